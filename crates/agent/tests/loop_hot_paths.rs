//! The agent loop's hot paths, counted rather than timed: one context load per step,
//! no write lock for recovery when nothing needs repair, `run()` without reading the
//! history; and compaction before any request that needs it, the first of a prompt
//! included, ending in the clear error when the words alone do not fit.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod loop_support;

use std::sync::Arc;

use loop_support::*;
use scribe_agent::{
    AgentConfig, AgentError, AgentEvent, AgentRegistry, AgentRunner, CancelToken, CompactionConfig,
    CompactionStep, CompactionStrategy, LoopEvent, PromptInput, ScriptedProvider, ScriptedTurn,
    ToolRegistry,
};
use scribe_db::queries as q;
use scribe_db::{Database, Options};
use scribe_message::{FinishReason, NewMessage, Part, Role};
use scribe_session::Store;
use serde_json::json;

fn echo_turn(n: usize) -> ScriptedTurn {
    ScriptedTurn::reply()
        .text(format!("step {n}"))
        .tool_call(format!("c{n}"), "echo", json!({"text": format!("out {n}")}))
        .into()
}

#[test]
fn each_step_loads_the_context_once() {
    let env = Env::new();
    let provider = Arc::new(ScriptedProvider::new([
        echo_turn(1),
        echo_turn(2),
        echo_turn(3),
        ScriptedTurn::text("done"),
    ]));
    let runner = env
        .runner(provider.clone())
        .with_tools(ToolRegistry::new().with(Echo))
        .build();
    let session = env.session();
    let compactor = runner.compactor("build").unwrap().clone();
    let before = compactor.contexts_loaded();
    let out = runner
        .prompt(PromptInput::text(&session.id, "go"), &CancelToken::new())
        .unwrap();
    assert_eq!(out.steps, 4);
    assert_eq!(provider.requests().len(), 4);
    // The load that decides whether to compact is the one the request is built from.
    assert_eq!(compactor.contexts_loaded() - before, 4);
}

#[test]
fn recovery_with_nothing_to_repair_takes_no_write_lock() {
    let env = Env::new();
    let session = env.session();
    env.messages
        .create(NewMessage::new(
            &session.id,
            Role::User,
            vec![Part::text("hi")],
        ))
        .unwrap();
    // A second handle on the file that gives up at the first busy write.
    let db = Arc::new(
        Database::open_with(
            env.root.join("scribe.db"),
            Options {
                write_attempts: 1,
                ..Options::default()
            },
        )
        .unwrap(),
    );
    let provider = Arc::new(ScriptedProvider::new(Vec::<ScriptedTurn>::new()));
    let runner = AgentRunner::builder(Store::new(db.clone()), provider)
        .with_catalog(env.catalog.clone())
        .build();
    // Another process holds the write lock.
    let other = rusqlite::Connection::open(env.root.join("scribe.db")).unwrap();
    other.execute_batch("BEGIN IMMEDIATE").unwrap();
    let report = runner.recover_session(&session.id).unwrap();
    assert!(report.is_empty());
    // A write through the same handle does wait for the lock (and gives up), so the
    // read above is what spared recovery from it.
    let write = db.write(|tx| scribe_db::testing::create_bare_session(tx, "ses_probe"));
    assert!(matches!(write, Err(scribe_db::Error::Locked)), "{write:?}");
    other.execute_batch("ROLLBACK").unwrap();
    // Unknown sessions are still refused.
    assert!(runner.recover_session("ses_nope").is_err());
}

#[test]
fn run_finds_the_last_user_message_without_reading_the_history() {
    let env = Env::new();
    let provider = Arc::new(ScriptedProvider::new([
        ScriptedTurn::text("## Goal\nsay hi"),
        ScriptedTurn::text("resumed"),
    ]));
    let runner = env.runner(provider.clone()).build();
    let session = env.session();
    let first = env
        .messages
        .create(NewMessage::new(
            &session.id,
            Role::User,
            vec![Part::text("old")],
        ))
        .unwrap();
    env.messages
        .create(NewMessage::new(
            &session.id,
            Role::Assistant,
            vec![Part::text("old answer")],
        ))
        .unwrap();
    let compactor = runner.compactor("build").unwrap();
    compactor.compact(&session.id, MODEL).unwrap();
    let last = env
        .messages
        .create(NewMessage::new(
            &session.id,
            Role::User,
            vec![Part::text("new")],
        ))
        .unwrap();
    // The summary covers the first message; break its row: reading the whole history
    // now fails.
    env.db
        .write(|tx| -> scribe_db::Result<()> {
            let now = tx.now();
            tx.q().update_part(&q::UpdatePartParams {
                r#type: "text",
                data: "[\"not a part\"]",
                now,
                id: &first.parts[0].id,
            })?;
            Ok(())
        })
        .unwrap();
    assert!(env.messages.list(&session.id).is_err());

    let out = runner.run(&session.id, None, &CancelToken::new()).unwrap();
    assert_eq!(out.text, "resumed");
    let answer = env.messages.get(&out.assistant_message_ids[0]).unwrap();
    assert_eq!(answer.parent_id.as_deref(), Some(last.id.as_str()));
}

fn small_agent(strategy: CompactionStrategy) -> AgentRegistry {
    AgentRegistry::new(
        AgentConfig::new("build")
            .with_model(SMALL_MODEL)
            .with_compaction(CompactionConfig {
                strategy,
                ..CompactionConfig::default()
            }),
    )
}

#[test]
fn a_prompt_that_overflows_is_compacted_before_its_first_request() {
    let env = Env::new();
    let provider = Arc::new(ScriptedProvider::new([
        ScriptedTurn::text("fine"),
        ScriptedTurn::text("## Goal\nsummary"),
        ScriptedTurn::text("answered"),
    ]));
    let runner = env
        .runner(provider.clone())
        .with_agents(small_agent(CompactionStrategy::InPlace))
        .build();
    let events = runner.subscribe();
    let session = env.session();
    runner
        .prompt(
            PromptInput::text(&session.id, "x ".repeat(1_800)),
            &CancelToken::new(),
        )
        .unwrap();
    // 3,600 + 4,400 characters: past the small model's 2,000-token budget.
    let out = runner
        .prompt(
            PromptInput::text(&session.id, "y ".repeat(2_200)),
            &CancelToken::new(),
        )
        .unwrap();
    assert_eq!(out.text, "answered");
    let requests = provider.requests();
    assert_eq!(requests.len(), 3);
    assert!(requests[1].tools.is_empty(), "the summary call");
    assert!(
        env.sessions
            .get(&session.id)
            .unwrap()
            .summary_message_id
            .is_some()
    );
    assert!(events.try_iter().any(|e| matches!(
        e.unwrap().payload,
        LoopEvent::Compacted { continued_in: None, ref steps, .. } if !steps.is_empty()
    )));
}

#[test]
fn words_alone_overflowing_the_window_stop_the_prompt_with_the_clear_error() {
    let env = Env::new();
    let provider = Arc::new(ScriptedProvider::new([
        ScriptedTurn::text("hello"),
        ScriptedTurn::text("## Goal\ngreet"),
    ]));
    let runner = env
        .runner(provider.clone())
        .with_agents(small_agent(CompactionStrategy::KeepWords))
        .build();
    let events = runner.compactor("build").unwrap().subscribe();
    let session = env.session();
    runner
        .prompt(PromptInput::text(&session.id, "hi"), &CancelToken::new())
        .unwrap();
    // 3,000 tokens of words in one prompt; a request may hold 2,000.
    let huge = "z".repeat(12_000);
    let err = runner
        .prompt(PromptInput::text(&session.id, &huge), &CancelToken::new())
        .unwrap_err();
    assert!(matches!(err, AgentError::DoesNotFit { .. }), "{err}");
    let why = scribe_agent::error_chain(&err);
    assert!(why.contains("cannot fit the context window"), "{why}");
    // Before the first request of the prompt: no room for the words, so the summary
    // restarted from the prompt (kept verbatim, never summarised away), which alone
    // does not fit either.
    let requests = provider.requests();
    assert_eq!(requests.len(), 2, "the first answer and the summary");
    assert!(requests[1].tools.is_empty());
    let steps = events
        .try_iter()
        .filter_map(|e| match e.unwrap().payload {
            AgentEvent::CompactionFailed { steps, .. } => Some(steps),
            _ => None,
        })
        .last()
        .unwrap();
    assert_eq!(
        steps,
        [
            CompactionStep::Summarize,
            CompactionStep::Progressive,
            CompactionStep::StripMedia
        ]
    );
    // Nothing lost: the prompt is stored whole after the earlier exchange, the summary
    // beside them; the session is free again.
    let stored = env.messages_of(&session.id);
    assert_eq!(stored.len(), 4);
    assert_eq!(stored[2].text(), huge);
    assert_eq!(stored[1].finish_reason, Some(FinishReason::EndTurn));
    assert!(stored[3].is_summary);
    let after = env.sessions.get(&session.id).unwrap();
    assert_eq!(after.compacting_at, None);
}
