//! Compaction guarantees found missing in review: the steps chaining in one
//! run, compacted outputs surviving export, the continuation being one
//! transaction, and prune marks published only after they commit.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod compaction_support;

use std::sync::Arc;

use compaction_support::{Env, SMALL, png, read, text_of};
use scribe_agent::compaction::{CLEARED_TOOL_OUTPUT, FitStep};
use scribe_agent::{
    CompactionConfig, CompactionOutcome, CompactionStep, CompactionStrategy, ScriptedProvider,
    ScriptedTurn,
};
use scribe_message::{Part, Role, TokenUsage, ToolState};
use scribe_pubsub::EventKind;
use scribe_session::ExportSelection;

fn prune_config() -> CompactionConfig {
    CompactionConfig {
        prune_protect_tokens: 1_000,
        ..CompactionConfig::default()
    }
}

fn completed_output(part: &Part) -> (&str, Option<i64>) {
    match part {
        Part::Tool(t) => match &t.state {
            ToolState::Completed { output, .. } => (output.as_str(), t.compacted_at),
            other => panic!("not completed: {other:?}"),
        },
        other => panic!("not a tool part: {other:?}"),
    }
}

/// Prune, then progressive, then strip media, all in one `compact` call, each
/// needed (sizes below, budget 8,000). The summary step is off, so the run goes
/// from the cheap step straight to the send-side ones.
#[test]
fn prune_then_progressive_then_strip_media_chain_in_one_run() {
    let env = Env::new();
    let s = env.session("chain");
    // Turn 1 (outside the two protected user turns): a 3,000-token output, prunable.
    env.user(&s.id, "start");
    let a1 = env.assistant(&s.id, vec![read("c1", 3_000, "alpha")]);
    // Turn 2: 3,000 tokens of text (never pruned) and a protected output.
    env.user(&s.id, &text_of(3_000, "ancient"));
    let a2 = env.assistant(&s.id, vec![read("c2", 1_200, "beta")]);
    // Turn 3: six screenshots (6 × 1,600 = 9,600 tokens): too big even alone.
    let shots: Vec<Part> = std::iter::once(Part::text("compare"))
        .chain((1..=6).map(|i| png(&format!("shot{i}.png"))))
        .collect();
    env.user_parts(&s.id, shots);
    env.assistant(&s.id, vec![Part::text("looking")]);

    let provider = Arc::new(ScriptedProvider::new(Vec::<ScriptedTurn>::new()));
    let c = env
        .compactor(&provider, prune_config())
        .with_summarize(false);
    let before = c.context(&s.id).unwrap().tokens;
    assert!(before > 16_000, "{before}");

    let outcome = c.compact(&s.id, SMALL).unwrap();
    let CompactionOutcome::Pruned { report, .. } = &outcome else {
        panic!("{outcome:?}")
    };
    // Step 2 ran and was not enough: only c1 could go; c2 is in a protected turn.
    assert_eq!(report.pruned_part_ids, vec![a1.parts[0].id.clone()]);
    // Steps 3 and 4 followed, in that order.
    assert_eq!(
        report.steps,
        vec![
            CompactionStep::Prune,
            CompactionStep::Progressive,
            CompactionStep::StripMedia
        ]
    );
    assert!(report.tokens_after <= 8_000, "{report:?}");
    assert!(provider.requests().is_empty());

    // What is sent: the last user turn with the screenshots described, and its answer.
    let request = c.request_context(&s.id, SMALL).unwrap();
    assert_eq!(
        request.steps,
        vec![FitStep::Progressive, FitStep::StripMedia]
    );
    assert_eq!(request.messages.len(), 2);
    assert_eq!(request.messages[0].role, Role::User);
    let texts: Vec<&str> = request.messages[0]
        .parts
        .iter()
        .map(|p| match p {
            Part::Text(t) => t.text.as_str(),
            other => panic!("media must be stripped: {other:?}"),
        })
        .collect();
    assert_eq!(texts.len(), 7);
    assert_eq!(texts[0], "compare");
    assert_eq!(texts[6], "[Attached image/png: shot6.png]");
    assert!(matches!(&request.messages[1].parts[0], Part::Text(t) if t.text == "looking"));
    assert_eq!(request.tokens, report.tokens_after);

    // Stored: c1 is marked but whole; c2 untouched; the full context clears c1 only.
    let stored = env.messages.get(&a1.id).unwrap();
    let (output, compacted) = completed_output(&stored.parts[0].part);
    assert_eq!(output, text_of(3_000, "alpha"));
    assert!(compacted.is_some());
    assert!(
        completed_output(&env.messages.get(&a2.id).unwrap().parts[0].part)
            .1
            .is_none()
    );
    let ctx = c.context(&s.id).unwrap();
    assert_eq!(
        completed_output(&ctx.messages[1].parts[0]).0,
        CLEARED_TOOL_OUTPUT
    );

    // Export carries the compacted output in full, with its mark.
    let export = env
        .sessions
        .export(&ExportSelection::One(s.id.clone()))
        .unwrap();
    let exported = export[0].messages.iter().find(|m| m.id == a1.id).unwrap();
    let (output, compacted) = completed_output(&exported.parts[0].part);
    assert_eq!(output, text_of(3_000, "alpha"));
    assert!(compacted.is_some());
}

/// A continuation whose transaction fails after every write of it (the child
/// created, the summary stored and charged, the parent ended) leaves nothing:
/// no child, the parent active and unsummarised, and no session or message
/// event published.
#[test]
fn a_continuation_that_fails_before_commit_leaves_nothing() {
    let env = Env::new();
    let s = env.session("atomic");
    env.user(&s.id, &text_of(5_000, "first"));
    env.assistant(&s.id, vec![Part::text("ok")]);
    env.user(&s.id, &text_of(4_000, "second"));
    let provider = Arc::new(ScriptedProvider::new([ScriptedTurn::reply()
        .text("## Goal\nsummary")
        .usage(TokenUsage {
            input: 100,
            output: 10,
            ..TokenUsage::default()
        })]));
    let c = env
        .compactor(
            &provider,
            CompactionConfig {
                strategy: CompactionStrategy::Continuation,
                ..CompactionConfig::default()
            },
        )
        .with_summary_model(compaction_support::CHEAP)
        .with_failure_before_summary_commit();
    let before = env.get(&s.id);
    let session_events = env.sessions.subscribe();
    let message_events = env.messages.subscribe();

    let err = c.compact(&s.id, SMALL).unwrap_err();
    assert!(err.to_string().contains("injected"), "{err}");
    assert_eq!(provider.requests().len(), 1, "the summary was asked for");

    assert!(env.sessions.children(&s.id).unwrap().is_empty());
    let after = env.get(&s.id);
    assert_eq!(after.ended_at, None);
    assert_eq!(after.end_reason, None);
    assert_eq!(after.summary_message_id, None);
    assert_eq!(after.api_call_count, before.api_call_count);
    assert_eq!(after.estimated_cost_usd, before.estimated_cost_usd);
    assert_eq!(after.compacting_at, None);
    assert_eq!(env.messages.list(&s.id).unwrap().len(), 3);

    // Only the compaction mark's own updates (set, then cleared) were announced.
    let sessions: Vec<_> = session_events.try_iter().map(|e| e.unwrap()).collect();
    assert!(
        sessions
            .iter()
            .all(|e| e.kind == EventKind::Updated && e.payload.id == s.id),
        "{sessions:?}"
    );
    assert!(
        sessions.iter().all(|e| e.payload.ended_at.is_none()),
        "{sessions:?}"
    );
    assert_eq!(message_events.try_iter().count(), 0);
}

/// Every prune mark commits in one transaction and each part's event is
/// published once, after the commit: when the first event arrives, every
/// marked part is already marked in the database, all with one time.
#[test]
fn prune_marks_commit_together_and_are_announced_after() {
    let env = Env::new();
    let s = env.session("prune events");
    env.user(&s.id, "one");
    let a1 = env.assistant(
        &s.id,
        vec![read("c1", 2_000, "alpha"), read("c2", 2_000, "beta")],
    );
    env.user(&s.id, "two");
    let a2 = env.assistant(&s.id, vec![read("c3", 3_000, "gamma")]);
    env.user(&s.id, "three");
    let a3 = env.assistant(&s.id, vec![read("c4", 3_000, "delta")]);
    env.user(&s.id, "four");
    env.assistant(&s.id, vec![Part::text("ok")]);
    let provider = Arc::new(ScriptedProvider::new(Vec::<ScriptedTurn>::new()));
    let c = env
        .compactor(
            &provider,
            CompactionConfig {
                prune_protect_tokens: 0,
                protect_user_turns: 1,
                ..CompactionConfig::default()
            },
        )
        .with_summarize(false);
    let parts = env.messages.subscribe_parts();

    let outcome = c.compact(&s.id, SMALL).unwrap();
    let pruned = outcome.report().unwrap().pruned_part_ids.clone();
    // Every output before the protected turn, oldest first (not just enough to fit:
    // one clearing now saves the next requests from clearing bit by bit).
    assert_eq!(
        pruned,
        [&a1.parts[0], &a1.parts[1], &a2.parts[0], &a3.parts[0]].map(|p| p.id.clone()),
        "{pruned:?}"
    );

    let events: Vec<_> = parts.try_iter().map(|e| e.unwrap()).collect();
    assert_eq!(events.len(), pruned.len(), "one event per mark: {events:?}");
    let mut marks = Vec::new();
    for (event, id) in events.iter().zip(&pruned) {
        assert_eq!(event.kind, EventKind::Updated);
        assert_eq!(&event.payload.part.id, id);
        let Part::Tool(tool) = &event.payload.part.part else {
            panic!("{event:?}")
        };
        marks.push(tool.compacted_at.unwrap());
    }
    marks.dedup();
    assert_eq!(marks.len(), 1, "one transaction, one mark time");
    // The stored parts agree with what was announced.
    for m in [&a1.id, &a2.id, &a3.id] {
        for p in env.messages.get(m).unwrap().parts {
            if pruned.contains(&p.id) {
                assert_eq!(completed_output(&p.part).1, Some(marks[0]));
            }
        }
    }
}
