//! `Compactor::check` at and around both trigger boundaries, with the context
//! measured from reported usage (the latest call plus what came after it) or
//! estimated when nothing was reported.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod compaction_support;

use std::sync::Arc;

use compaction_support::{Env, SMALL, text_of};
use scribe_agent::{
    AgentError, CompactionConfig, ContextMeasure, HeuristicEstimator, ScriptedProvider,
    TriggerReason, UsageTracker, context,
};
use scribe_message::{Extra, FinishReason, Part, StepFinishPart, TokenUsage};

fn reported(env: &Env, title: &str, input: i64, output: i64) -> String {
    let s = env.session(title);
    env.user(&s.id, "hi");
    let a = env.assistant(&s.id, vec![Part::text("hello")]);
    UsageTracker::new(env.store.clone(), env.catalog.clone())
        .track_usage(
            &s.id,
            SMALL,
            &TokenUsage {
                input,
                output,
                ..TokenUsage::default()
            },
            Some(&a.id),
        )
        .unwrap();
    s.id
}

#[test]
fn overflow_trigger_at_and_around_window_minus_reserve() {
    // 10k window, 2k reserve: 8,000 tokens fit, 8,001 do not.
    let env = Env::new();
    let provider = Arc::new(ScriptedProvider::new(
        Vec::<scribe_agent::ScriptedTurn>::new(),
    ));
    let c = env.compactor(&provider, CompactionConfig::default());
    let at = reported(&env, "at", 7_990, 10);
    let over = reported(&env, "over", 7_991, 10);
    let under = reported(&env, "under", 7_989, 10);
    assert_eq!(c.check(&under, SMALL).unwrap(), None);
    assert_eq!(
        c.check(&at, SMALL).unwrap(),
        None,
        "exactly usable still fits"
    );
    assert_eq!(
        c.check(&over, SMALL).unwrap(),
        Some(TriggerReason::ExceedsUsable {
            context_tokens: 8_001,
            usable_tokens: 8_000
        })
    );
    let ctx = c.context(&at).unwrap();
    assert_eq!(ctx.tokens, 8_000);
    assert!(matches!(
        ctx.measure,
        ContextMeasure::Reported {
            call_tokens: 8_000,
            estimated_after: 0,
            ..
        }
    ));
}

#[test]
fn threshold_trigger_at_and_around_the_fraction() {
    let env = Env::new();
    let provider = Arc::new(ScriptedProvider::new(
        Vec::<scribe_agent::ScriptedTurn>::new(),
    ));
    // A small reserve makes 95% of the window (9,500) the binding trigger.
    let config = CompactionConfig {
        reserve_output_tokens: Some(100),
        ..CompactionConfig::default()
    };
    let c = env.compactor(&provider, config);
    let below = reported(&env, "below", 9_499, 0);
    let at = reported(&env, "at", 9_000, 500);
    let above = reported(&env, "above", 9_501, 0);
    let overflow = reported(&env, "overflow", 9_901, 0);
    assert_eq!(c.check(&below, SMALL).unwrap(), None);
    assert_eq!(
        c.check(&at, SMALL).unwrap(),
        Some(TriggerReason::ThresholdReached {
            context_tokens: 9_500,
            threshold_tokens: 9_500
        })
    );
    assert!(matches!(
        c.check(&above, SMALL).unwrap(),
        Some(TriggerReason::ThresholdReached { .. })
    ));
    assert!(matches!(
        c.check(&overflow, SMALL).unwrap(),
        Some(TriggerReason::ExceedsUsable { .. })
    ));
    assert!(matches!(
        c.check(&at, "no-such-model").unwrap_err(),
        AgentError::UnknownModel(_)
    ));
}

#[test]
fn estimated_context_triggers_exactly_past_the_budget() {
    let env = Env::new();
    let provider = Arc::new(ScriptedProvider::new(
        Vec::<scribe_agent::ScriptedTurn>::new(),
    ));
    let c = env.compactor(&provider, CompactionConfig::default());
    // A user message of n text tokens is sent as n + 3 (part) + 4 (message).
    let fits = env.session("fits");
    env.user(&fits.id, &text_of(7_993, "fits"));
    let over = env.session("over");
    env.user(&over.id, &text_of(7_994, "over"));
    let ctx = c.context(&fits.id).unwrap();
    assert_eq!(
        (ctx.tokens, &ctx.measure),
        (8_000, &ContextMeasure::Estimated)
    );
    assert_eq!(c.check(&fits.id, SMALL).unwrap(), None);
    assert!(matches!(
        c.check(&over.id, SMALL).unwrap(),
        Some(TriggerReason::ExceedsUsable {
            context_tokens: 8_001,
            ..
        })
    ));
    // An empty session never triggers.
    let empty = env.session("empty");
    assert_eq!(c.check(&empty.id, SMALL).unwrap(), None);
}

#[test]
fn reported_size_adds_what_came_after_and_prefers_the_last_step() {
    let env = Env::new();
    let s = env.session("steps");
    env.user(&s.id, "hi");
    // Two calls in one message: its usage sums both, the last step-finish has the last one.
    let step = |input: i64| {
        Part::StepFinish(StepFinishPart {
            reason: FinishReason::ToolUse,
            tokens: TokenUsage {
                input,
                output: 100,
                ..TokenUsage::default()
            },
            cost: 0.0,
            extra: Extra::new(),
        })
    };
    let a = env.assistant(
        &s.id,
        vec![Part::text("a"), step(4_000), Part::text("b"), step(5_000)],
    );
    let tracker = UsageTracker::new(env.store.clone(), env.catalog.clone());
    for input in [4_000, 5_000] {
        let u = TokenUsage {
            input,
            output: 100,
            ..TokenUsage::default()
        };
        tracker.track_usage(&s.id, SMALL, &u, Some(&a.id)).unwrap();
    }
    // A user message of 1,000 text tokens arrives after the call: 1,007 sent.
    env.user(&s.id, &text_of(1_000, "later"));
    let ctx = context(&env.store, &s.id, &HeuristicEstimator).unwrap();
    assert_eq!(
        ctx.measure,
        ContextMeasure::Reported {
            message_id: a.id.clone(),
            call_tokens: 5_100,
            estimated_after: 1_007,
        }
    );
    assert_eq!(ctx.tokens, 6_107);
    assert!(ctx.estimated_tokens < ctx.tokens);
}
