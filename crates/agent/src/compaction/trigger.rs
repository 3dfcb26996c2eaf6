//! When to compact: [`CompactionConfig`] and [`should_compact`].
//!
//! Two triggers of the window, either one suffices:
//!
//! - **threshold**: the context *reaches* `threshold_fraction` of the model's
//!   window (`tokens ≥ ⌈window × fraction⌉`; default 0.95, as OpenCode);
//! - **overflow**: the context *exceeds* the window minus the tokens reserved
//!   for the answer (`tokens > window − reserve`; default reserve
//!   `min(20_000, max_output_tokens)`), i.e. the next answer might not fit.
//!
//! The context's size counts the system prompt and the tool specifications
//! ([`crate::context::RequestFrame`]). A third trigger needs the conversation itself,
//! so the compactor checks it ([`crate::Compactor::trigger`]): with
//! [`CompactionConfig::prune_early`], a prune is due as soon as at least
//! [`CompactionConfig::prune_minimum_for`] tokens of old tool outputs can be cleared
//! ([`TriggerReason::PruneDue`]).

use serde::{Deserialize, Serialize};

use crate::models::Model;

/// What a summary does to the conversation; serialized `in_place` / `continuation` /
/// `keep_words`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum CompactionStrategy {
    /// The summary restarts the conversation in the same session: a summary message, the
    /// session's `summary_message_id` points at it, and what is sent is the summary, then
    /// the most recent messages it kept verbatim
    /// ([`CompactionConfig::keep_recent_tokens`]), then what follows.
    #[default]
    InPlace,
    /// As [`CompactionStrategy::InPlace`], but the session ends (reason `compression`)
    /// and a child continuation session starts from the summary; the kept messages stay
    /// where they are and are sent after it.
    Continuation,
    /// The summary is added beside the conversation (OpenCode's design): every user and
    /// assistant text and reasoning part is still sent, the tool outputs before the
    /// summary are cleared, and the summary is sent where it stands. When the words
    /// themselves would fill more than half of what a request may hold, the summary
    /// restarts the conversation instead, keeping the recent turns
    /// ([`CompactionConfig::keep_recent_tokens`]) and at least everything from the last
    /// user message on: OpenCode's progressive step, made once and stored rather than
    /// paid for with a summary before every request. If even that does not fit, media
    /// is stripped, then the run stops with the clear error.
    KeepWords,
}

/// How an agent compacts its conversations.
///
/// Deserializable from an agent's configuration; missing fields take their
/// defaults, unknown fields are refused. Call [`CompactionConfig::validate`]
/// after reading one.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct CompactionConfig {
    /// Compact when the context reaches this fraction of the window, in (0, 1].
    pub threshold_fraction: f64,
    /// Tokens kept free for the answer; `None`: `min(20_000, max output)`.
    pub reserve_output_tokens: Option<u64>,
    /// What a summary does to the conversation.
    pub strategy: CompactionStrategy,
    /// Clear old tool outputs first and ask for a summary only if the request still does
    /// not fit (default). `false` asks for the summary first (OpenCode-Go's order) and
    /// prunes only what follows it.
    pub prune_first: bool,
    /// Tool outputs this recent (in tokens, newest first) are never pruned; at most a
    /// quarter of what a request may hold ([`CompactionConfig::prune_protect_for`]).
    pub prune_protect_tokens: u64,
    /// The last this many user turns are never pruned.
    pub protect_user_turns: usize,
    /// A prune runs only when the outputs it clears add up to at least this many tokens
    /// (OpenCode's `PRUNE_MINIMUM`): clearing an output changes the prompt from that
    /// message on, so a provider's prompt cache is written again from there, which only a
    /// large step pays for. A prune that is all a compaction of a full window does must
    /// also leave this much room below what a request may hold, so that the next turns
    /// fit without another rewrite; otherwise a summary follows it. Neither holds for
    /// [`CompactionStrategy::KeepWords`] on a full window (its summary keeps the words,
    /// so it frees little more than a prune). At most a quarter of what a request may
    /// hold ([`CompactionConfig::prune_minimum_for`]).
    pub prune_minimum_tokens: u64,
    /// Prune as soon as the minimum can be cleared ([`TriggerReason::PruneDue`]), before
    /// a request that would still fit, rather than only when the window fills (OpenCode
    /// prunes after every prompt). Requests then carry the protected outputs and the
    /// words, not a nearly full window of old outputs, which is what they cost; each prune
    /// still clears a large step. Only with [`CompactionConfig::prune_first`].
    pub prune_early: bool,
    /// For the strategies that restart from a summary: the most recent messages, up to
    /// this many tokens, are sent verbatim after the summary instead of being summarised
    /// (whole turns when a turn's start is among them). Capped at a quarter of what a
    /// request may hold ([`CompactionConfig::keep_recent_for`]); 0 keeps none.
    /// [`CompactionStrategy::KeepWords`] uses it when the words themselves no longer fit.
    pub keep_recent_tokens: u64,
}

/// The default reserve's cap: `min(this, model max output)`.
pub const DEFAULT_RESERVE_CAP_TOKENS: u64 = 20_000;

impl Default for CompactionConfig {
    fn default() -> Self {
        CompactionConfig {
            threshold_fraction: 0.95,
            reserve_output_tokens: None,
            strategy: CompactionStrategy::InPlace,
            prune_first: true,
            prune_protect_tokens: 40_000,
            protect_user_turns: 2,
            prune_minimum_tokens: 20_000,
            prune_early: true,
            keep_recent_tokens: 20_000,
        }
    }
}

/// A [`CompactionConfig`] that cannot work.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum CompactionConfigError {
    /// The fraction is not a number in (0, 1].
    #[error("threshold_fraction must be greater than 0 and at most 1, got {0}")]
    InvalidFraction(f64),
}

impl CompactionConfig {
    /// Checks that the fraction is in (0, 1].
    pub fn validate(&self) -> Result<(), CompactionConfigError> {
        let f = self.threshold_fraction;
        if f.is_nan() || f <= 0.0 || f > 1.0 {
            return Err(CompactionConfigError::InvalidFraction(f));
        }
        Ok(())
    }

    /// The tokens reserved for the answer on `model`.
    pub fn reserve_for(&self, model: &Model) -> u64 {
        self.reserve_output_tokens
            .unwrap_or_else(|| DEFAULT_RESERVE_CAP_TOKENS.min(model.max_output_tokens))
    }

    /// The smallest context size that reaches the threshold on `model`:
    /// `⌈window × fraction⌉`, at least 1. An invalid fraction counts as 1.
    pub fn threshold_tokens(&self, model: &Model) -> u64 {
        let fraction = if self.validate().is_ok() {
            self.threshold_fraction
        } else {
            1.0
        };
        let exact = model.context_window as f64 * fraction;
        // 200_000 × 0.95 is 189_999.99999999997 in binary; don't let float
        // noise move the boundary by a token.
        let rounded = exact.round();
        let tokens = if (exact - rounded).abs() < 1e-6 {
            rounded
        } else {
            exact.ceil()
        };
        (tokens as u64).max(1)
    }

    /// The largest context that still leaves the reserve free: window − reserve.
    pub fn usable_tokens(&self, model: &Model) -> u64 {
        model.context_window.saturating_sub(self.reserve_for(model))
    }

    /// The largest context size that triggers nothing (what a request may hold).
    pub fn max_context_tokens(&self, model: &Model) -> u64 {
        self.usable_tokens(model)
            .min(self.threshold_tokens(model) - 1)
    }

    /// The tokens of recent messages a restarting summary keeps verbatim on `model`:
    /// [`CompactionConfig::keep_recent_tokens`], at most a quarter of
    /// [`CompactionConfig::max_context_tokens`] (so the summary and what it kept leave
    /// most of the window to the conversation that follows).
    pub fn keep_recent_for(&self, model: &Model) -> u64 {
        self.keep_recent_tokens
            .min(self.max_context_tokens(model) / 4)
    }

    /// The tokens of recent tool outputs the prune step spares on `model`:
    /// [`CompactionConfig::prune_protect_tokens`], at most a quarter of
    /// [`CompactionConfig::max_context_tokens`], so that on a small window the cheap
    /// step still has something to clear (OpenCode's 40,000 would spare everything on a
    /// 32k model).
    pub fn prune_protect_for(&self, model: &Model) -> u64 {
        self.prune_protect_tokens
            .min(self.max_context_tokens(model) / 4)
    }

    /// The fewest tokens of outputs a prune clears on `model`, and the room a prune
    /// alone must leave: [`CompactionConfig::prune_minimum_tokens`], at most a quarter of
    /// [`CompactionConfig::max_context_tokens`] (OpenCode's 20,000 on a 200k window).
    pub fn prune_minimum_for(&self, model: &Model) -> u64 {
        self.prune_minimum_tokens
            .min(self.max_context_tokens(model) / 4)
    }
}

/// Why compaction is due.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TriggerReason {
    /// The context leaves less than the reserve for the answer.
    ExceedsUsable {
        /// The context size.
        context_tokens: u64,
        /// window − reserve.
        usable_tokens: u64,
    },
    /// The context reached the configured fraction of the window.
    ThresholdReached {
        /// The context size.
        context_tokens: u64,
        /// ⌈window × fraction⌉.
        threshold_tokens: u64,
    },
    /// The request fits, but at least the prune minimum of old tool outputs can be
    /// cleared ([`CompactionConfig::prune_early`]); only a prune runs.
    PruneDue {
        /// The tokens of outputs a prune would clear.
        prunable_tokens: u64,
        /// [`CompactionConfig::prune_minimum_for`].
        minimum_tokens: u64,
    },
}

/// Whether a context of `context_tokens` on `model` must be compacted first.
///
/// When both triggers fire, [`TriggerReason::ExceedsUsable`] is reported: it
/// is the one that would make the next answer fail. An empty context never
/// triggers: there is nothing to compact.
pub fn should_compact(
    context_tokens: u64,
    model: &Model,
    config: &CompactionConfig,
) -> Option<TriggerReason> {
    if context_tokens == 0 {
        return None;
    }
    let usable_tokens = config.usable_tokens(model);
    if context_tokens > usable_tokens {
        return Some(TriggerReason::ExceedsUsable {
            context_tokens,
            usable_tokens,
        });
    }
    let threshold_tokens = config.threshold_tokens(model);
    if context_tokens >= threshold_tokens {
        return Some(TriggerReason::ThresholdReached {
            context_tokens,
            threshold_tokens,
        });
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::models::Pricing;

    fn model(window: u64, max_out: u64) -> Model {
        Model {
            id: "m".into(),
            provider: "p".into(),
            name: "M".into(),
            context_window: window,
            max_output_tokens: max_out,
            pricing: Pricing::FREE,
        }
    }

    #[test]
    fn defaults() {
        let c = CompactionConfig::default();
        assert_eq!(c.threshold_fraction, 0.95);
        assert_eq!(c.strategy, CompactionStrategy::InPlace);
        assert_eq!(c.prune_protect_tokens, 40_000);
        assert_eq!(c.protect_user_turns, 2);
        assert!(c.prune_first);
        assert_eq!(c.keep_recent_tokens, 20_000);
        // 200k window: 180k per request, so 20k fits the quarter; 10k window: 2k.
        assert_eq!(c.keep_recent_for(&model(200_000, 64_000)), 20_000);
        assert_eq!(c.keep_recent_for(&model(10_000, 2_000)), 2_000);
        // Prune protection: OpenCode's 40k on a 200k window, a quarter on small ones.
        assert_eq!(c.prune_protect_for(&model(200_000, 64_000)), 40_000);
        assert_eq!(c.prune_protect_for(&model(32_000, 8_000)), 6_000);
        // Prune minimum: OpenCode's 20k on a 200k window, a quarter on small ones.
        assert_eq!(c.prune_minimum_tokens, 20_000);
        assert!(c.prune_early);
        assert_eq!(c.prune_minimum_for(&model(200_000, 64_000)), 20_000);
        assert_eq!(c.prune_minimum_for(&model(10_000, 2_000)), 2_000);
        assert_eq!(c.reserve_for(&model(200_000, 64_000)), 20_000);
        assert_eq!(c.reserve_for(&model(128_000, 16_384)), 16_384);
        c.validate().unwrap();
    }

    #[test]
    fn config_reads_from_json_with_defaults() {
        let c: CompactionConfig =
            serde_json::from_str(r#"{"threshold_fraction":0.8,"strategy":"continuation"}"#)
                .unwrap();
        assert_eq!(c.threshold_fraction, 0.8);
        assert_eq!(c.strategy, CompactionStrategy::Continuation);
        let c: CompactionConfig = serde_json::from_str(
            r#"{"strategy":"keep_words","prune_first":false,"keep_recent_tokens":0}"#,
        )
        .unwrap();
        assert_eq!(c.strategy, CompactionStrategy::KeepWords);
        assert!(!c.prune_first);
        assert_eq!(c.keep_recent_tokens, 0);
        assert_eq!(c.prune_protect_tokens, 40_000);
        assert!(serde_json::from_str::<CompactionConfig>(r#"{"treshold":1}"#).is_err());
    }

    #[test]
    fn overflow_trigger_at_and_around_window_minus_reserve() {
        // 200k window, 64k max output → reserve 20k → usable 180k; threshold 190k.
        let m = model(200_000, 64_000);
        let c = CompactionConfig::default();
        assert_eq!(c.usable_tokens(&m), 180_000);
        assert_eq!(should_compact(179_999, &m, &c), None);
        assert_eq!(
            should_compact(180_000, &m, &c),
            None,
            "exactly usable still fits"
        );
        assert_eq!(
            should_compact(180_001, &m, &c),
            Some(TriggerReason::ExceedsUsable {
                context_tokens: 180_001,
                usable_tokens: 180_000
            })
        );
        // Both triggers: the overflow is reported.
        assert!(matches!(
            should_compact(195_000, &m, &c),
            Some(TriggerReason::ExceedsUsable { .. })
        ));
        assert_eq!(c.max_context_tokens(&m), 180_000);
        assert_eq!(should_compact(0, &m, &c), None);
    }

    #[test]
    fn threshold_trigger_at_and_around_the_fraction() {
        // Small reserve so that the fraction is the binding trigger.
        let m = model(200_000, 64_000);
        let c = CompactionConfig {
            reserve_output_tokens: Some(1_000),
            ..CompactionConfig::default()
        };
        assert_eq!(c.threshold_tokens(&m), 190_000);
        assert_eq!(should_compact(189_999, &m, &c), None);
        assert_eq!(
            should_compact(190_000, &m, &c),
            Some(TriggerReason::ThresholdReached {
                context_tokens: 190_000,
                threshold_tokens: 190_000
            })
        );
        assert!(matches!(
            should_compact(190_001, &m, &c),
            Some(TriggerReason::ThresholdReached { .. })
        ));
        assert_eq!(c.max_context_tokens(&m), 189_999);
        // Window − reserve still wins above 199k.
        assert!(matches!(
            should_compact(199_001, &m, &c),
            Some(TriggerReason::ExceedsUsable { .. })
        ));
    }

    #[test]
    fn fractional_thresholds_round_up_and_float_noise_is_ignored() {
        let c = CompactionConfig {
            threshold_fraction: 0.95,
            reserve_output_tokens: Some(0),
            ..CompactionConfig::default()
        };
        // 1_001 × 0.95 = 950.95 → 951 reaches it, 950 does not.
        let m = model(1_001, 100);
        assert_eq!(c.threshold_tokens(&m), 951);
        assert_eq!(should_compact(950, &m, &c), None);
        assert!(should_compact(951, &m, &c).is_some());
        for window in [100, 1_000, 128_000, 200_000, 1_047_576, 1_048_576] {
            let m = model(window, 1);
            let t = c.threshold_tokens(&m);
            assert!((t as f64) >= window as f64 * 0.95 - 1e-6, "{window}");
            assert!(((t - 1) as f64) < window as f64 * 0.95, "{window}");
        }
        let all = CompactionConfig {
            threshold_fraction: 1.0,
            reserve_output_tokens: Some(0),
            ..CompactionConfig::default()
        };
        let m = model(1_000, 100);
        assert_eq!(should_compact(999, &m, &all), None);
        assert!(matches!(
            should_compact(1_000, &m, &all),
            Some(TriggerReason::ThresholdReached { .. })
        ));
    }

    #[test]
    fn explicit_and_oversized_reserves() {
        let m = model(10_000, 4_000);
        let c = CompactionConfig {
            threshold_fraction: 1.0,
            reserve_output_tokens: Some(12_000),
            ..CompactionConfig::default()
        };
        assert_eq!(c.usable_tokens(&m), 0);
        assert!(matches!(
            should_compact(1, &m, &c),
            Some(TriggerReason::ExceedsUsable { .. })
        ));
    }

    #[test]
    fn invalid_fractions_are_reported_and_treated_as_one() {
        for f in [0.0, -0.5, 1.5, f64::NAN] {
            let c = CompactionConfig {
                threshold_fraction: f,
                reserve_output_tokens: Some(0),
                ..CompactionConfig::default()
            };
            assert!(c.validate().is_err(), "{f}");
            assert_eq!(c.threshold_tokens(&model(1_000, 10)), 1_000);
        }
        assert_eq!(
            CompactionConfigError::InvalidFraction(2.0).to_string(),
            "threshold_fraction must be greater than 0 and at most 1, got 2"
        );
    }
}
