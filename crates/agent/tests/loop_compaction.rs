//! Compaction inside the loop: a model with a small window in a custom
//! catalog makes the context overflow after a tool step; the loop compacts
//! before the next request, in place or into a continuation session.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod loop_support;

use std::sync::Arc;

use loop_support::*;
use scribe_agent::{
    AgentConfig, AgentRegistry, CancelToken, CompactionConfig, CompactionStrategy, LoopEvent,
    PromptInput, ScriptedProvider, ScriptedTurn, ToolRegistry,
};
use scribe_message::{FinishReason, Role, TokenUsage};
use scribe_session::SessionKind;
use serde_json::json;

fn big() -> TokenUsage {
    // Over the small model's usable window (3000 − 1000 reserved).
    TokenUsage {
        input: 2_500,
        output: 20,
        ..TokenUsage::default()
    }
}

fn run(
    strategy: CompactionStrategy,
) -> (
    Env,
    String,
    scribe_agent::RunOutcome,
    Arc<ScriptedProvider>,
    Vec<LoopEvent>,
) {
    let env = Env::new();
    let provider = Arc::new(ScriptedProvider::new([
        ScriptedTurn::reply()
            .text("checking")
            .tool_call("c1", "echo", json!({"text": "data"}))
            .usage(big()),
        ScriptedTurn::reply().text("## Goal\nEcho data.\n## Next steps\nAnswer."),
        ScriptedTurn::reply().text("all done"),
    ]));
    let agent = AgentConfig::new("build")
        .with_model(SMALL_MODEL)
        .with_compaction(CompactionConfig {
            strategy,
            ..CompactionConfig::default()
        });
    let runner = env
        .runner(provider.clone())
        .with_tools(ToolRegistry::new().with(Echo))
        .with_agents(AgentRegistry::new(agent))
        .build();
    let events = runner.subscribe();
    let session = env.session();
    let out = runner
        .prompt(
            PromptInput::text(&session.id, "echo data"),
            &CancelToken::new(),
        )
        .unwrap();
    let events = events.try_iter().map(|e| e.unwrap().payload).collect();
    (env, session.id, out, provider, events)
}

#[test]
fn the_loop_compacts_in_place_before_the_next_request() {
    let (env, session_id, out, provider, events) = run(CompactionStrategy::InPlace);
    assert_eq!(out.finish_reason, Some(FinishReason::EndTurn));
    assert_eq!(out.session_id, session_id);
    assert_eq!(out.text, "all done");
    let requests = provider.requests();
    assert_eq!(requests.len(), 3);
    assert!(
        requests[1].tools.is_empty(),
        "the summary call has no tools"
    );
    // The request after compaction starts from the summary, sent as a user message.
    let after = &requests[2];
    assert_eq!(after.messages[0].role, Role::User);
    let session = env.sessions.get(&session_id).unwrap();
    let summary_id = session.summary_message_id.clone().unwrap();
    let summary = env.messages.get(&summary_id).unwrap();
    assert!(summary.is_summary);
    assert!(summary.text().contains("## Goal"));
    assert!(events.iter().any(|e| matches!(
        e,
        LoopEvent::Compacted {
            continued_in: None,
            ..
        }
    )));
    // Nothing was lost: the full history is still stored.
    assert!(env.messages_of(&session_id).len() >= 4);
}

#[test]
fn a_continuation_moves_the_loop_into_the_new_session() {
    let (env, session_id, out, _provider, events) = run(CompactionStrategy::Continuation);
    assert_eq!(out.finish_reason, Some(FinishReason::EndTurn));
    assert_ne!(out.session_id, session_id);
    let old = env.sessions.get(&session_id).unwrap();
    assert_eq!(old.end_reason.as_deref(), Some("compression"));
    let new = env.sessions.get(&out.session_id).unwrap();
    assert_eq!(new.kind, SessionKind::Continuation);
    assert_eq!(new.parent_session_id.as_deref(), Some(session_id.as_str()));
    let last = env.messages_of(&out.session_id).pop().unwrap();
    assert_eq!(last.text(), "all done");
    assert_eq!(last.role, Role::Assistant);
    assert!(events.iter().any(|e| matches!(e, LoopEvent::Compacted { continued_in: Some(id), .. } if *id == out.session_id)));
}

#[test]
fn prompting_a_compressed_session_continues_in_its_continuation() {
    let (env, session_id, out, provider, _events) = run(CompactionStrategy::Continuation);
    provider.push(ScriptedTurn::text("still here"));
    let runner = env
        .runner(provider)
        .with_agents(AgentRegistry::new(
            AgentConfig::new("build").with_model(SMALL_MODEL),
        ))
        .build();
    let next = runner
        .prompt(
            PromptInput::text(&session_id, "and now?"),
            &CancelToken::new(),
        )
        .unwrap();
    assert_eq!(next.session_id, out.session_id);
    assert_eq!(next.text, "still here");
    assert_eq!(
        env.messages_of(&session_id)
            .iter()
            .filter(|m| m.role == Role::User)
            .count(),
        1
    );
}

#[test]
fn a_context_overflow_from_the_provider_compacts_and_retries_once() {
    let env = Env::new();
    let provider = Arc::new(ScriptedProvider::new([
        ScriptedTurn::error(scribe_agent::ProviderError::ContextOverflow {
            model: MODEL.into(),
        }),
        ScriptedTurn::text("## Goal\nAnswer the question."),
        ScriptedTurn::text("answer"),
    ]));
    let runner = env.runner(provider.clone()).build();
    let session = env.session();
    let out = runner
        .prompt(
            PromptInput::text(&session.id, "question"),
            &CancelToken::new(),
        )
        .unwrap();
    assert_eq!(out.text, "answer");
    assert_eq!(out.finish_reason, Some(FinishReason::EndTurn));
    let stored = env.messages_of(&session.id);
    let failed = stored
        .iter()
        .find(|m| m.finish_reason == Some(FinishReason::Error))
        .unwrap();
    assert!(
        failed.error.as_ref().unwrap()["message"]
            .as_str()
            .unwrap()
            .contains("context window")
    );
    assert!(
        env.sessions
            .get(&session.id)
            .unwrap()
            .summary_message_id
            .is_some()
    );

    // A second overflow in the same prompt is an error, not a loop.
    let provider = Arc::new(ScriptedProvider::new([
        ScriptedTurn::error(scribe_agent::ProviderError::ContextOverflow {
            model: MODEL.into(),
        }),
        ScriptedTurn::text("## Goal\nx"),
        ScriptedTurn::error(scribe_agent::ProviderError::ContextOverflow {
            model: MODEL.into(),
        }),
    ]));
    let runner = env.runner(provider).build();
    let session = env.session();
    let err = runner
        .prompt(
            PromptInput::text(&session.id, "question"),
            &CancelToken::new(),
        )
        .unwrap_err();
    assert!(
        matches!(err, scribe_agent::AgentError::Provider { .. }),
        "{err}"
    );
}
