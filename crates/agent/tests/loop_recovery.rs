//! Recovery after a crash: a separate process (this test binary, re-run
//! as a child role by `Env::spawn_blocked_child`) is killed with
//! SIGKILL while a tool blocks mid-loop; the history it leaves is then made
//! consistent by `recover_session`, and by the runner when it reopens the
//! session.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod loop_support;

use std::sync::Arc;

use loop_support::*;
use scribe_agent::recovery::INTERRUPTED;
use scribe_agent::{
    CancelToken, PromptInput, ScriptedProvider, ScriptedTurn, ToolRegistry, recover_session,
};
use scribe_message::{FinishReason, Part, Role, ToolState};
use serde_json::json;

/// The child role: runs a loop whose tool blocks until the process is killed.
/// Does nothing in a normal test run.
#[test]
fn crash_child_role() {
    let Some((env, session_id)) = child_role() else {
        return;
    };
    let provider = Arc::new(ScriptedProvider::new([ScriptedTurn::reply()
        .text("let me wait")
        .tool_call("c1", "block", json!({}))
        .tool_call("c2", "echo", json!({"text": "after"}))]));
    let runner = env
        .runner(provider)
        .with_tools(ToolRegistry::new().with(Echo).with(Block {
            marker: Some(env.root.join("running")),
        }))
        .build();
    let _ = runner.prompt(
        PromptInput::text(&session_id, "wait for me"),
        &CancelToken::new(),
    );
    panic!("the child should have been killed while its tool blocked");
}

#[test]
fn a_killed_process_leaves_history_that_recovery_makes_consistent() {
    let env = Env::new();
    let session = env.session();
    let mut child = env.spawn_blocked_child("crash_child_role", &session.id);
    child.kill().unwrap(); // SIGKILL on Unix: no destructor, no cleanup runs.
    let status = child.wait().unwrap();
    assert!(!status.success());

    // What the dead process left: an unfinished message, a running and a pending call.
    let stored = env.messages_of(&session.id);
    assert_eq!(stored.len(), 2);
    let msg = &stored[1];
    assert_eq!(msg.role, Role::Assistant);
    assert!(msg.finished_at.is_none());
    assert_eq!(msg.text(), "let me wait");
    let states: Vec<&str> = tool_parts(msg).iter().map(|t| t.state.status()).collect();
    assert_eq!(states, ["running", "pending"]);

    let report = recover_session(&env.store, &session.id).unwrap();
    assert_eq!(report.messages, vec![msg.id.clone()]);
    assert_eq!(report.tool_parts.len(), 2);
    let msg = env.messages.get(&msg.id).unwrap();
    assert_eq!(msg.finish_reason, Some(FinishReason::Error));
    assert!(msg.finished_at.is_some());
    assert_eq!(msg.error.as_ref().unwrap()["type"], INTERRUPTED);
    for tool in tool_parts(&msg) {
        assert!(matches!(&tool.state, ToolState::Error { message, .. } if message == INTERRUPTED));
    }
    assert!(tool_parts(&msg)[0].state.started_at().is_some());
    assert!(matches!(msg.parts.last().unwrap().part, Part::Finish(_)));
    // Idempotent.
    assert!(recover_session(&env.store, &session.id).unwrap().is_empty());
    assert_eq!(env.messages.get(&msg.id).unwrap(), msg);

    // The session carries on; the model is told the calls were interrupted.
    let provider = Arc::new(ScriptedProvider::new([ScriptedTurn::text("resumed")]));
    let runner = env
        .runner(provider.clone())
        .with_tools(ToolRegistry::new().with(Echo))
        .build();
    let out = runner
        .prompt(PromptInput::text(&session.id, "again"), &CancelToken::new())
        .unwrap();
    assert_eq!(out.text, "resumed");
    let sent = &provider.requests()[0].messages;
    assert_eq!(sent.len(), 3);
    assert!(
        sent[1]
            .parts
            .iter()
            .any(|p| matches!(p, Part::Tool(t) if t.state.error_message() == Some(INTERRUPTED)))
    );
}

#[test]
fn the_runner_recovers_a_session_when_it_opens_it() {
    let env = Env::new();
    let session = env.session();
    // Simulate a dead writer: an assistant message left open with a running call.
    let msg = env
        .messages
        .create(scribe_message::NewMessage::new(
            &session.id,
            Role::Assistant,
            vec![Part::text("half")],
        ))
        .unwrap();
    let tool = env
        .messages
        .append_part(&msg.id, Part::tool("c9", "echo", json!({"text": "x"})))
        .unwrap();
    let Part::Tool(mut running) = tool.part.clone() else {
        unreachable!()
    };
    running.state.start(1).unwrap();
    env.messages
        .update_part(&tool.id, Part::Tool(running))
        .unwrap();

    let runner = env
        .runner(Arc::new(ScriptedProvider::new([ScriptedTurn::text("ok")])))
        .build();
    runner
        .prompt(PromptInput::text(&session.id, "hi"), &CancelToken::new())
        .unwrap();
    let old = env.messages.get(&msg.id).unwrap();
    assert_eq!(old.finish_reason, Some(FinishReason::Error));
    assert_eq!(tool_parts(&old)[0].state.error_message(), Some(INTERRUPTED));
}
