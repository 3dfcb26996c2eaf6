//! The prune minimum and the early prune: a prune clears a large step or none (it
//! rewrites the prompt from the first cleared output on, which a provider's prompt cache
//! charges again), is due as soon as such a step can be cleared, is followed by a
//! summary when it leaves less room than the next step needs; and every size compared
//! with the window counts the system prompt and the tool specifications sent with it.
//!
//! On the small model a request may hold 8,000 tokens, so the minimum is 2,000 (a
//! quarter); these tests spare 1,000 tokens of outputs.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod compaction_support;

use std::sync::Arc;

use compaction_support::{CHEAP, Env, SMALL, read, text_of};
use scribe_agent::{
    CompactionConfig, CompactionOutcome, CompactionStep, CompactionStrategy, RequestFrame,
    ScriptedProvider, ScriptedTurn, ToolSpec, TriggerReason,
};
use scribe_message::{Part, TokenUsage};
use serde_json::json;

fn config() -> CompactionConfig {
    CompactionConfig {
        prune_protect_tokens: 1_000,
        ..CompactionConfig::default()
    }
}

fn no_model() -> Arc<ScriptedProvider> {
    Arc::new(ScriptedProvider::new(Vec::<ScriptedTurn>::new()))
}

fn summary(text: &str) -> ScriptedTurn {
    ScriptedTurn::reply()
        .text(text)
        .usage(TokenUsage {
            input: 6_000,
            output: 300,
            ..TokenUsage::default()
        })
        .into()
}

/// A request that fits, whose old outputs (c1, c2, c3: 2,400 tokens beyond the
/// spared ones) can be cleared once the fifth turn's output spares no more of them.
#[test]
fn a_prune_is_due_once_the_minimum_can_be_cleared_and_asks_no_model() {
    let env = Env::new();
    let s = env.session("due");
    env.user(&s.id, "t1");
    let a1 = env.assistant(&s.id, vec![read("c1", 1_200, "alpha")]);
    env.user(&s.id, "t2");
    let a2 = env.assistant(&s.id, vec![read("c2", 900, "beta")]);
    env.user(&s.id, "t3");
    let a3 = env.assistant(&s.id, vec![read("c3", 300, "gamma")]);
    env.user(&s.id, "t4");
    env.assistant(&s.id, vec![Part::text("ok")]);
    let provider = no_model();
    let c = env.compactor(&provider, config());
    // Only c1 (1,200 tokens) lies beyond the two protected turns and the spared 1,000:
    // below the minimum, nothing is due.
    assert_eq!(c.check(&s.id, SMALL).unwrap(), None);

    env.user(&s.id, "t5");
    env.assistant(&s.id, vec![read("c5", 1_500, "delta")]);
    env.user(&s.id, "t6");
    let ctx = c.context(&s.id).unwrap();
    assert!(ctx.tokens < 6_000, "the request fits: {}", ctx.tokens);
    assert_eq!(
        c.trigger(&ctx, SMALL).unwrap(),
        Some(TriggerReason::PruneDue {
            prunable_tokens: 2_400,
            minimum_tokens: 2_000,
        })
    );
    // Not without early prunes, nor when the summary comes first.
    for other in [
        CompactionConfig {
            prune_early: false,
            ..config()
        },
        CompactionConfig {
            prune_first: false,
            ..config()
        },
    ] {
        assert_eq!(
            env.compactor(&provider, other).check(&s.id, SMALL).unwrap(),
            None
        );
    }

    let outcome = c.compact(&s.id, SMALL).unwrap();
    let CompactionOutcome::Pruned { report, .. } = &outcome else {
        panic!("{outcome:?}")
    };
    assert!(matches!(
        report.trigger,
        Some(TriggerReason::PruneDue { .. })
    ));
    assert_eq!(report.steps, [CompactionStep::Prune]);
    assert_eq!(
        report.pruned_part_ids,
        [&a1, &a2, &a3].map(|m| m.parts[0].id.clone())
    );
    assert!(report.tokens_after + 2_300 < report.tokens_before);
    assert!(provider.requests().is_empty(), "a due prune asks no model");
    assert_eq!(env.get(&s.id).summary_message_id, None);
    // Done: nothing more is due until enough new outputs age.
    assert_eq!(c.check(&s.id, SMALL).unwrap(), None);
}

/// A full window whose old outputs (1,500 tokens) are fewer than the minimum: clearing
/// them would rewrite the prompt and leave the window nearly as full, so the summary is
/// asked for instead; with a smaller minimum, which the prune leaves room for, the same
/// session is pruned and no model is called.
#[test]
fn a_prune_below_the_minimum_gives_way_to_the_summary() {
    let build = |env: &Env| {
        let s = env.session("small prune");
        env.user(&s.id, "t1");
        env.assistant(
            &s.id,
            vec![
                read("c1", 1_500, "alpha"),
                Part::text(text_of(3_500, "words")),
            ],
        );
        env.user(&s.id, "t2");
        env.assistant(&s.id, vec![Part::text(text_of(3_000, "more"))]);
        env.user(&s.id, "t3");
        s.id
    };
    let env = Env::new();
    let s = build(&env);
    let provider = Arc::new(ScriptedProvider::new([summary("S")]));
    let c = env.compactor(&provider, config()).with_summary_model(CHEAP);
    let before = c.context(&s).unwrap().tokens;
    assert!(before > 8_000 && before < 8_200, "{before}");
    let outcome = c.compact(&s, SMALL).unwrap();
    assert_eq!(outcome.steps(), [CompactionStep::Summarize]);
    assert!(outcome.summary_message_id().is_some());
    assert_eq!(provider.requests().len(), 1);

    let env = Env::new();
    let s = build(&env);
    let provider = no_model();
    let c = env.compactor(
        &provider,
        CompactionConfig {
            prune_minimum_tokens: 1_000,
            ..config()
        },
    );
    let outcome = c.compact(&s, SMALL).unwrap();
    assert_eq!(outcome.steps(), [CompactionStep::Prune]);
    assert!(outcome.report().unwrap().tokens_after <= 7_000);
    assert!(provider.requests().is_empty());
}

/// Keep-words' summary keeps every word and clears the outputs before it: on a full
/// window it would free little more than a prune and rewrite the prompt as much, so
/// there the prune takes whatever it can (below the minimum, leaving less than the
/// minimum free) and no model is called while the request fits.
#[test]
fn keep_words_prunes_a_full_window_whatever_it_clears_and_summarises_only_what_does_not_fit() {
    let env = Env::new();
    let s = env.session("keep words");
    env.user(&s.id, "t1");
    let a1 = env.assistant(
        &s.id,
        vec![
            read("c1", 1_500, "alpha"),
            Part::text(text_of(3_500, "words")),
        ],
    );
    env.user(&s.id, "t2");
    env.assistant(&s.id, vec![Part::text(text_of(3_000, "more"))]);
    env.user(&s.id, "t3");
    let provider = no_model();
    let c = env.compactor(
        &provider,
        CompactionConfig {
            strategy: CompactionStrategy::KeepWords,
            ..config()
        },
    );
    assert!(c.context(&s.id).unwrap().tokens > 8_000);
    let outcome = c.compact(&s.id, SMALL).unwrap();
    let report = outcome.report().unwrap();
    assert_eq!(report.steps, [CompactionStep::Prune]);
    assert_eq!(report.pruned_part_ids, [a1.parts[0].id.clone()]);
    assert!(report.tokens_after > 6_000 && report.tokens_after <= 8_000);
    assert!(provider.requests().is_empty());

    // Words alone past the window: the prune cannot make it fit, the summary follows.
    env.assistant(&s.id, vec![Part::text(text_of(2_500, "overflow"))]);
    let provider = Arc::new(ScriptedProvider::new([summary("S")]));
    let c = env
        .compactor(
            &provider,
            CompactionConfig {
                strategy: CompactionStrategy::KeepWords,
                ..config()
            },
        )
        .with_summary_model(CHEAP);
    let outcome = c.compact(&s.id, SMALL).unwrap();
    assert!(
        outcome.steps().contains(&CompactionStep::Summarize),
        "{outcome:?}"
    );
    assert_eq!(provider.requests().len(), 1);
}

/// A prune of a full window that clears enough but leaves less than the minimum free
/// (the next turns would fill the window again at once) is followed by the summary.
#[test]
fn a_prune_that_leaves_too_little_room_is_followed_by_the_summary() {
    let env = Env::new();
    let s = env.session("no room");
    env.user(&s.id, "t1");
    let a1 = env.assistant(&s.id, vec![read("c1", 2_500, "alpha")]);
    env.user(&s.id, "t2");
    env.assistant(&s.id, vec![Part::text(text_of(3_000, "beta"))]);
    env.user(&s.id, "t3");
    env.assistant(
        &s.id,
        vec![
            read("c3", 800, "gamma"),
            Part::text(text_of(2_300, "delta")),
        ],
    );
    env.user(&s.id, "t4");
    let provider = Arc::new(ScriptedProvider::new([summary("S")]));
    let c = env.compactor(&provider, config()).with_summary_model(CHEAP);
    let outcome = c.compact(&s.id, SMALL).unwrap();
    let report = outcome.report().unwrap();
    assert_eq!(
        report.steps,
        [CompactionStep::Prune, CompactionStep::Summarize]
    );
    assert!(report.pruned_part_ids.contains(&a1.parts[0].id));
    assert!(outcome.summary_message_id().is_some());
    assert_eq!(provider.requests().len(), 1);
}

/// The system prompt and the tools are sent with every request: the context's size
/// counts them, so a conversation that fits alone triggers once they are added.
#[test]
fn the_frame_counts_in_the_size_compared_with_the_window() {
    let env = Env::new();
    let s = env.session("frame");
    env.user(&s.id, &text_of(7_000, "words"));
    let provider = no_model();
    let c = env.compactor(&provider, config());
    let bare = c.context(&s.id).unwrap();
    assert_eq!(bare.frame_tokens, 0);
    assert_eq!(c.trigger(&bare, SMALL).unwrap(), None);

    let frame = RequestFrame::new(
        Some(text_of(600, "system")),
        vec![ToolSpec {
            name: "read".into(),
            description: text_of(500, "reads a file"),
            input_schema: json!({"type": "object"}),
        }],
    );
    let framed = c.context_with_frame(&s.id, &frame).unwrap();
    assert!(framed.frame_tokens > 1_100, "{}", framed.frame_tokens);
    assert_eq!(framed.message_tokens(), bare.message_tokens());
    assert_eq!(framed.tokens, bare.tokens + framed.frame_tokens);
    assert_eq!(
        framed.system_prompt.as_deref(),
        Some(&*text_of(600, "system"))
    );
    assert!(matches!(
        c.trigger(&framed, SMALL).unwrap(),
        Some(TriggerReason::ExceedsUsable { .. })
    ));
}
