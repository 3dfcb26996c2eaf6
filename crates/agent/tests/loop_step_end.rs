//! A step's end on a real SQLite file: the reply squared with the response, its
//! `step_finish` part and its charge commit in one transaction, so a charge that fails in
//! the database leaves nothing of the end (`loop_postgres.rs` runs the same on
//! PostgreSQL), and a step that ends is charged exactly.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod loop_support;

use std::sync::Arc;

use loop_support::*;
use scribe_agent::{CancelToken, PromptInput, ToolRegistry};
use scribe_message::{FinishReason, Part, Role, ToolState};

/// Every change of a session's `api_call_count` fails, as a storage error inside the
/// charge would: a trigger in the database file, seen by the store's connections.
fn fail_every_charge(env: &Env) {
    let conn = rusqlite::Connection::open(env.root.join("scribe.db")).unwrap();
    conn.execute_batch(
        "CREATE TRIGGER fail_charge BEFORE UPDATE OF api_call_count ON sessions
         BEGIN SELECT RAISE(ABORT, 'injected charge failure'); END;",
    )
    .unwrap();
}

#[test]
fn a_charge_failing_in_the_database_leaves_nothing_of_the_step_end() {
    let env = Env::new();
    a_failed_step_end_stores_nothing_of_it(&env, || fail_every_charge(&env));
}

/// The loop's step, as it ends: the response's tail and its unstreamed call added, the
/// call run, its `step_finish` part with the step's tokens and cost, and the session and
/// message charged exactly that, once per step.
#[test]
fn a_step_that_ends_is_charged_once_with_its_step_finish_part() {
    let env = Env::new();
    // The first step streams less than it returns and calls echo; the second ends the
    // turn.
    let runner = env
        .runner(Arc::new(StreamsLess::default()))
        .with_tools(ToolRegistry::new().with(Echo))
        .build();
    let session = env.session();
    let out = runner
        .prompt(PromptInput::text(&session.id, "hi"), &CancelToken::new())
        .unwrap();
    assert_eq!(out.finish_reason, Some(FinishReason::EndTurn));
    let replies: Vec<_> = env
        .messages_of(&session.id)
        .into_iter()
        .filter(|m| m.role == Role::Assistant)
        .collect();
    assert_eq!(replies.len(), 2);
    let first = &replies[0];
    assert_eq!(first.text(), "Hello there.");
    let calls = tool_parts(first);
    assert_eq!(calls.len(), 1);
    assert_eq!(calls[0].call_id, "c9");
    assert!(
        matches!(calls[0].state, ToolState::Completed { .. }),
        "{:?}",
        calls[0].state
    );
    let step_finishes: Vec<_> = first
        .parts
        .iter()
        .filter_map(|p| match &p.part {
            Part::StepFinish(f) => Some(f.clone()),
            _ => None,
        })
        .collect();
    assert_eq!(step_finishes.len(), 1, "{:#?}", first.parts);
    assert_eq!(step_finishes[0].tokens, STREAMS_LESS_USAGE);
    // test-model: $1000 input, $2000 output per Mtok.
    let cost = (1_000.0 * 1_000.0 + 20.0 * 2_000.0) / 1e6;
    assert!((step_finishes[0].cost - cost).abs() < 1e-9);
    assert_eq!(first.usage, STREAMS_LESS_USAGE);
    assert!((first.cost_usd - cost).abs() < 1e-9);

    assert_eq!(replies[1].usage, DONE_USAGE);
    let done_cost = (1_100.0 * 1_000.0 + 2.0 * 2_000.0) / 1e6;
    assert!((replies[1].cost_usd - done_cost).abs() < 1e-9);

    let after = env.sessions.get(&session.id).unwrap();
    assert_eq!(after.api_call_count, 2);
    assert_eq!(
        after.tokens.input,
        STREAMS_LESS_USAGE.input + DONE_USAGE.input
    );
    assert_eq!(
        after.tokens.output,
        STREAMS_LESS_USAGE.output + DONE_USAGE.output
    );
    assert!((after.estimated_cost_usd - (cost + done_cost)).abs() < 1e-9);
}
