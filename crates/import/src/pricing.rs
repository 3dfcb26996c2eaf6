//! Cost of imported usage: the source's own figure where it reports one, otherwise an
//! estimate from Scribe's pricing catalog (`scribe_agent::models`), and where neither is
//! possible the tokens are kept and the cost is said to be unknown.
//!
//! Every message records where its cost came from as bits ([`REPORTED`], [`ESTIMATED`],
//! [`UNKNOWN`]); a session ORs its messages' bits, and its `cost_status` says it in words:
//! `reported`, `estimated`, `reported+estimated`, `partial` (some usage has no price) or
//! `unknown` (none has).

use scribe_agent::models::{Model, ModelCatalog};
use scribe_message::TokenUsage;

use crate::record::MessageRec;

/// The cost is the source's own figure.
pub const REPORTED: u8 = 1;
/// The cost is estimated from the pricing catalog.
pub const ESTIMATED: u8 = 2;
/// Some usage is of a model the catalog does not price: its cost is not counted.
pub const UNKNOWN: u8 = 4;

/// Prices usage with a model catalog.
#[derive(Debug, Clone)]
pub struct Pricer {
    catalog: ModelCatalog,
}

impl Default for Pricer {
    fn default() -> Self {
        Pricer::new(ModelCatalog::builtin())
    }
}

impl Pricer {
    /// A pricer over `catalog`.
    pub fn new(catalog: ModelCatalog) -> Self {
        Pricer { catalog }
    }

    /// The catalog model a source's model name means: the name itself, or without a
    /// `provider/` prefix, a `-YYYYMMDD` / `@YYYYMMDD` date, or a `-latest` suffix
    /// (`claude-sonnet-4-20250514` is `claude-sonnet-4`), or with its dots written as
    /// dashes, as Copilot CLI names Claude models (`claude-sonnet-4.5` is
    /// `claude-sonnet-4-5`; a name the catalog has with its dots, `gpt-4.1`, is itself),
    /// or without a `-thinking` suffix (Zed's `claude-sonnet-4-thinking`), or, as Cursor
    /// names Claude models, with the version before the family and the thinking or effort
    /// it ran with after it (`claude-4.5-sonnet-thinking` and `claude-4.5-opus-high` are
    /// `claude-sonnet-4-5` and `claude-opus-4-5`): neither changes the price of a token.
    pub fn model(&self, name: &str) -> Option<&Model> {
        let name = name.trim();
        let name = name.rsplit('/').next().unwrap_or(name);
        if let Some(m) = self.catalog.get(name) {
            return Some(m);
        }
        let undated = strip_date(name);
        let base = undated.strip_suffix("-latest").unwrap_or(undated);
        self.catalog
            .get(base)
            .or_else(|| {
                base.contains('.')
                    .then(|| self.catalog.get(&base.replace('.', "-")))
                    .flatten()
            })
            .or_else(|| self.catalog.get(base.strip_suffix("-thinking")?))
            .or_else(|| self.catalog.get(&version_last(base)?))
    }

    /// The version of its prices: a digest of every model's id and prices (FNV-1a), so
    /// two catalogs that price alike have the same version. Stored with the sessions it
    /// priced (`pricing_version`); usage left without a price is looked at again only
    /// under another version ([`crate::sink::Sink::reprice`]).
    pub fn version(&self) -> String {
        let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
        let mut eat = |bytes: &[u8]| {
            for b in bytes {
                hash ^= u64::from(*b);
                hash = hash.wrapping_mul(0x0100_0000_01b3);
            }
        };
        for m in &self.catalog {
            eat(m.id.as_bytes());
            eat(&[0]);
            let p = m.pricing;
            let mut prices = vec![
                p.input_per_mtok,
                p.output_per_mtok,
                p.cache_write_per_mtok,
                p.cache_read_per_mtok,
            ];
            if let Some(long) = p.long_prompt {
                eat(&long.above_tokens.to_le_bytes());
                prices.extend([
                    long.input_per_mtok,
                    long.output_per_mtok,
                    long.cache_write_per_mtok,
                    long.cache_read_per_mtok,
                ]);
            }
            for price in prices {
                eat(&price.to_bits().to_le_bytes());
            }
        }
        format!("catalog-{hash:016x}")
    }

    /// What one call's `usage` of `model` costs (long-prompt prices for a long prompt),
    /// when the catalog knows the model.
    pub fn estimate(&self, model: Option<&str>, usage: &TokenUsage) -> Option<f64> {
        self.model(model?).map(|m| m.cost(usage))
    }

    /// What `usage` summed over `calls` calls of `model` costs: as one call when it is
    /// one ([`Pricer::estimate`]), else at the base prices (`Pricing::base_cost`: the
    /// sum's prompt says nothing of each call's).
    pub fn estimate_calls(
        &self,
        model: Option<&str>,
        usage: &TokenUsage,
        calls: i64,
    ) -> Option<f64> {
        self.estimate_calls_with_hour_writes(model, usage, calls, 0)
    }

    /// [`Pricer::estimate_calls`] with `hour_writes` of the cache writes kept for an hour
    /// (`Pricing::cost_with_hour_writes`).
    fn estimate_calls_with_hour_writes(
        &self,
        model: Option<&str>,
        usage: &TokenUsage,
        calls: i64,
        hour_writes: i64,
    ) -> Option<f64> {
        let pricing = self.model(model?)?.pricing;
        Some(if calls == 1 {
            pricing.cost_with_hour_writes(usage, hour_writes)
        } else {
            pricing.base_cost_with_hour_writes(usage, hour_writes)
        })
    }

    /// Sets `rec`'s cost and cost bits: the reported cost, else the estimate (its 1-hour
    /// cache writes, `rec.cache_write_1h`, at twice the input price), else 0 with
    /// [`UNKNOWN`] (only when it has usage; a message without tokens costs nothing).
    pub fn apply(&self, rec: &mut MessageRec) {
        let usage = rec.message.usage;
        if let Some(cost) = rec.reported_cost.filter(|c| c.is_finite() && *c >= 0.0) {
            rec.message.cost_usd = cost;
            rec.cost_flags = REPORTED;
            return;
        }
        if usage.is_zero() {
            rec.message.cost_usd = 0.0;
            rec.cost_flags = 0;
            return;
        }
        match self.estimate_calls_with_hour_writes(
            rec.message.model.as_deref(),
            &usage,
            rec.api_calls,
            rec.cache_write_1h,
        ) {
            Some(cost) => {
                rec.message.cost_usd = cost;
                rec.cost_flags = ESTIMATED;
            }
            None => {
                rec.message.cost_usd = 0.0;
                rec.cost_flags = UNKNOWN;
            }
        }
    }
}

fn strip_date(name: &str) -> &str {
    for sep in ['-', '@'] {
        if let Some((head, tail)) = name.rsplit_once(sep)
            && tail.len() == 8
            && tail.bytes().all(|b| b.is_ascii_digit())
        {
            return head;
        }
    }
    name
}

/// `cost_status` of a session whose messages' cost bits OR to `flags`.
pub fn status(flags: u8) -> Option<&'static str> {
    let known = flags & (REPORTED | ESTIMATED);
    Some(match (known, flags & UNKNOWN != 0) {
        (0, false) => return None,
        (0, true) => "unknown",
        (_, true) => "partial",
        (REPORTED, false) => "reported",
        (ESTIMATED, false) => "estimated",
        _ => "reported+estimated",
    })
}

/// `cost_source` of such a session: the agent, the catalog, or both.
pub fn source(flags: u8, agent: &str) -> Option<String> {
    match (flags & REPORTED != 0, flags & ESTIMATED != 0) {
        (true, true) => Some(format!("{agent}+pricing-catalog")),
        (true, false) => Some(agent.to_owned()),
        (false, true) => Some("pricing-catalog".to_owned()),
        (false, false) => None,
    }
}

/// A Claude model named with its version first (`claude-4.5-opus-high-thinking`, Cursor's
/// way) named as Anthropic does (`claude-opus-4-5`), its thinking and effort left out.
fn version_last(name: &str) -> Option<String> {
    let rest = name.strip_prefix("claude-")?;
    let rest = rest.strip_suffix("-thinking").unwrap_or(rest);
    let (version, rest) = rest.split_once('-')?;
    let (family, effort) = rest.split_once('-').unwrap_or((rest, ""));
    let numbered = version.starts_with(|c: char| c.is_ascii_digit())
        && version.chars().all(|c| c.is_ascii_digit() || c == '.');
    let known = ["opus", "sonnet", "haiku"].contains(&family)
        && ["", "low", "medium", "high", "max"].contains(&effort);
    (numbered && known).then(|| format!("claude-{family}-{}", version.replace('.', "-")))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// One call with a long prompt is charged the long-prompt prices for all its tokens
    /// (as the providers bill it); usage summed over several calls (a Hermes session's
    /// total) the base prices, since its prompt is no call's.
    #[test]
    fn a_long_prompt_is_told_only_of_one_call() {
        let p = Pricer::default();
        let long = TokenUsage {
            input: 1,
            cache_read: 250_000,
            output: 1_000,
            ..TokenUsage::default()
        };
        let model = Some("claude-sonnet-4-5-20250929");
        let one = p.estimate_calls(model, &long, 1).unwrap();
        assert!((one - (6.0 + 250_000.0 * 0.60 + 1_000.0 * 22.5) / 1e6).abs() < 1e-12);
        let many = p.estimate_calls(model, &long, 3).unwrap();
        assert!((many - (3.0 + 250_000.0 * 0.30 + 1_000.0 * 15.0) / 1e6).abs() < 1e-12);
        let mut rec = MessageRec {
            session: "s".to_owned(),
            message: scribe_message::Message {
                model: model.map(str::to_owned),
                usage: long,
                ..crate::sources::message(
                    crate::Source::ClaudeCode,
                    "k",
                    scribe_message::Role::Assistant,
                    0,
                )
            },
            api_calls: 1,
            reported_cost: None,
            cost_flags: 0,
            cache_write_1h: 0,
        };
        p.apply(&mut rec);
        assert_eq!((rec.message.cost_usd, rec.cost_flags), (one, ESTIMATED));
        rec.api_calls = 2;
        p.apply(&mut rec);
        assert_eq!((rec.message.cost_usd, rec.cost_flags), (many, ESTIMATED));
        // Cache writes kept for an hour cost twice the input price (the long prompt's
        // $6 here, $3 at the base prices), the others the cache-write price ($7.50 and
        // $3.75).
        rec.message.usage.cache_write = 1_000;
        let with_writes = rec.message.usage;
        let one = p.estimate_calls(model, &with_writes, 1).unwrap();
        let many = p.estimate_calls(model, &with_writes, 2).unwrap();
        let cost = |rec: &mut MessageRec, hour: i64, calls: i64| {
            rec.cache_write_1h = hour;
            rec.api_calls = calls;
            p.apply(rec);
            rec.message.cost_usd
        };
        let close = |a: f64, b: f64| (a - b).abs() < 1e-12;
        assert!(close(cost(&mut rec, 0, 1), one));
        assert!(close(
            cost(&mut rec, 400, 1),
            one + 400.0 * (12.0 - 7.5) / 1e6
        ));
        assert!(close(
            cost(&mut rec, 400, 2),
            many + 400.0 * (6.0 - 3.75) / 1e6
        ));
        // Never more of them than its cache writes.
        assert!(close(
            cost(&mut rec, i64::MAX, 1),
            one + 1_000.0 * (12.0 - 7.5) / 1e6
        ));
        assert_eq!(rec.cost_flags, ESTIMATED);
    }

    /// The version names the prices: the same catalog gives the same one, any price
    /// changed (a long prompt's too) another.
    #[test]
    fn the_version_changes_with_any_price() {
        let builtin = ModelCatalog::builtin();
        let version = Pricer::new(builtin.clone()).version();
        assert_eq!(Pricer::default().version(), version);
        assert!(version.starts_with("catalog-"), "{version}");
        let changed = |edit: &dyn Fn(&mut scribe_agent::models::Pricing)| {
            let mut catalog = builtin.clone();
            let mut sonnet = catalog.get("claude-sonnet-4-5").cloned().unwrap();
            edit(&mut sonnet.pricing);
            catalog.insert(sonnet).unwrap();
            Pricer::new(catalog).version()
        };
        assert_ne!(changed(&|p| p.cache_read_per_mtok = 0.31), version);
        assert_ne!(
            changed(&|p| {
                if let Some(long) = &mut p.long_prompt {
                    long.above_tokens += 1;
                }
            }),
            version
        );
        assert_eq!(changed(&|_| {}), version);
    }

    #[test]
    fn dated_and_prefixed_names_find_their_model() {
        let p = Pricer::default();
        assert_eq!(
            p.model("claude-sonnet-4-20250514").map(|m| m.id.as_str()),
            Some("claude-sonnet-4")
        );
        assert_eq!(
            p.model("anthropic/claude-opus-4-1").map(|m| m.id.as_str()),
            Some("claude-opus-4-1")
        );
        assert_eq!(
            p.model("openai/gpt-5.3-codex").map(|m| m.id.as_str()),
            Some("gpt-5.3-codex")
        );
        // Copilot CLI writes Claude's versions with dots; a dotted id the catalog has is
        // itself.
        for (name, id) in [
            ("claude-sonnet-4.5", "claude-sonnet-4-5"),
            ("claude-haiku-4.5", "claude-haiku-4-5"),
            ("gpt-4.1", "gpt-4.1"),
            // Cursor's names: the version first, thinking and effort after the family.
            ("claude-4.5-sonnet", "claude-sonnet-4-5"),
            ("claude-4-sonnet-thinking", "claude-sonnet-4"),
            ("claude-4.5-opus-high-thinking", "claude-opus-4-5"),
            ("claude-3.7-sonnet", "claude-3-7-sonnet"),
            // Zed's: thinking after the name.
            ("claude-sonnet-4-thinking", "claude-sonnet-4"),
            ("claude-opus-4-5-thinking", "claude-opus-4-5"),
        ] {
            assert_eq!(p.model(name).map(|m| m.id.as_str()), Some(id), "{name}");
        }
        assert!(p.model("gpt-5.6-luna").is_none());
        assert!(p.model("claude-4.5-sonnet-turbo").is_none());
        assert!(p.model("claude-x-sonnet").is_none());
        assert!(p.model("<synthetic>").is_none());
        assert_eq!(status(0), None);
        assert_eq!(status(ESTIMATED), Some("estimated"));
        assert_eq!(status(ESTIMATED | UNKNOWN), Some("partial"));
        assert_eq!(status(UNKNOWN), Some("unknown"));
        assert_eq!(status(REPORTED | ESTIMATED), Some("reported+estimated"));
    }
}
