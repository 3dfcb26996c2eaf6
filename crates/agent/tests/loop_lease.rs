//! Run leases across processes: a session a LIVE process is answering (this
//! test binary re-run as a child role, blocked in a tool) is
//! neither repaired nor prompted by another process; once that process is
//! killed, recovery proceeds. A lease from another host counts until its
//! heartbeat is older than the configured window.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod loop_support;

use std::sync::Arc;
use std::time::Duration;

use loop_support::*;
use scribe_agent::recovery::INTERRUPTED;
use scribe_agent::{
    AgentError, CancelToken, LeaseConfig, PromptInput, ProviderError, ScriptedProvider,
    ScriptedTurn, ToolRegistry, recover_session, recover_session_with,
};
use scribe_db::queries;
use scribe_message::{FinishReason, Part, Role};
use serde_json::json;

/// The child role: runs a loop whose tool blocks until the process is killed.
/// Does nothing in a normal test run.
#[test]
fn lease_child_role() {
    let Some((env, session_id)) = child_role() else {
        return;
    };
    let provider = Arc::new(ScriptedProvider::new([ScriptedTurn::reply()
        .text("working")
        .tool_call("c1", "block", json!({}))]));
    let runner = env
        .runner(provider)
        .with_tools(ToolRegistry::new().with(Block {
            marker: Some(env.root.join("running")),
        }))
        .build();
    let _ = runner.prompt(PromptInput::text(&session_id, "work"), &CancelToken::new());
    panic!("the child should have been killed while its tool blocked");
}

fn lease_row(env: &Env, session_id: &str) -> Option<queries::SessionRunRow> {
    env.db
        .read(|tx| -> scribe_db::Result<_> { tx.q().get_session_run(session_id) })
        .unwrap()
}

/// An assistant message left open with a running call, as a writer that
/// stopped mid-tool leaves it.
fn open_message(env: &Env, session_id: &str) -> String {
    let msg = env
        .messages
        .create(scribe_message::NewMessage::new(
            session_id,
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
    msg.id
}

#[test]
fn a_live_process_keeps_its_session_until_it_dies() {
    let env = Env::new();
    let session = env.session();
    let mut child = env.spawn_blocked_child("lease_child_role", &session.id);

    let lease = lease_row(&env, &session.id).expect("the child holds the lease");
    assert_eq!(lease.pid, i64::from(child.id()));

    // The child is alive and mid-tool: nothing to repair here.
    let report = recover_session(&env.store, &session.id).unwrap();
    assert!(report.is_empty());
    assert!(report.tool_parts.is_empty());
    let holder = report
        .running_elsewhere
        .expect("skipped: running elsewhere");
    assert_eq!(holder.pid, i64::from(child.id()));
    assert_eq!(holder.owner, lease.owner);
    let stored = env.messages_of(&session.id);
    assert_eq!(stored.len(), 2);
    assert!(stored[1].finished_at.is_none());
    assert_eq!(tool_parts(&stored[1])[0].state.status(), "running");

    // A second concurrent turn is refused before anything is saved.
    let provider = Arc::new(ScriptedProvider::new([ScriptedTurn::text("never")]));
    let runner = env.runner(provider.clone()).build();
    let err = runner
        .prompt(
            PromptInput::text(&session.id, "me too"),
            &CancelToken::new(),
        )
        .unwrap_err();
    match &err {
        AgentError::SessionBusy {
            session_id,
            owner,
            pid,
            ..
        } => {
            assert_eq!(session_id, &session.id);
            assert_eq!(owner, &lease.owner);
            assert_eq!(*pid, i64::from(child.id()));
        }
        other => panic!("expected SessionBusy, got {other:?}"),
    }
    assert!(err.to_string().starts_with("session "));
    assert!(matches!(
        runner.run(&session.id, None, &CancelToken::new()),
        Err(AgentError::SessionBusy { .. })
    ));
    assert_eq!(env.messages_of(&session.id).len(), 2);
    assert!(provider.requests().is_empty());

    child.kill().unwrap(); // SIGKILL on Unix: the lease row stays behind.
    assert!(!child.wait().unwrap().success());

    // Same host, pid gone: the lease is dead, so recovery proceeds at once.
    let report = recover_session(&env.store, &session.id).unwrap();
    assert_eq!(report.running_elsewhere, None);
    assert_eq!(report.messages, vec![stored[1].id.clone()]);
    assert_eq!(report.tool_parts.len(), 1);
    assert_eq!(lease_row(&env, &session.id), None);
    let msg = env.messages.get(&stored[1].id).unwrap();
    assert_eq!(msg.finish_reason, Some(FinishReason::Error));
    assert_eq!(tool_parts(&msg)[0].state.error_message(), Some(INTERRUPTED));

    // And the session can be prompted again; the lease is released after.
    let out = runner
        .prompt(PromptInput::text(&session.id, "again"), &CancelToken::new())
        .unwrap();
    assert_eq!(out.finish_reason, Some(FinishReason::EndTurn));
    assert_eq!(lease_row(&env, &session.id), None);
}

#[test]
fn a_lease_from_another_host_counts_until_its_heartbeat_is_stale() {
    let env = Env::new();
    let session = env.session();
    let open = open_message(&env, &session.id);
    let heartbeat = scribe_db::now_ms() - 5_000;
    env.db
        .write(|tx| -> scribe_db::Result<_> {
            tx.q().put_session_run(&queries::PutSessionRunParams {
                session_id: &session.id,
                owner: "elsewhere-owner",
                pid: 1,
                host: "some-other-host",
                started_at: heartbeat,
                heartbeat_at: heartbeat,
            })?;
            Ok(())
        })
        .unwrap();

    // Within the (default, 120 s) window: live.
    let report = recover_session(&env.store, &session.id).unwrap();
    assert!(report.is_empty());
    assert_eq!(
        report.running_elsewhere.as_ref().map(|h| h.host.as_str()),
        Some("some-other-host")
    );
    let runner = env
        .runner(Arc::new(ScriptedProvider::new([ScriptedTurn::text("ok")])))
        .build();
    assert!(matches!(
        runner.prompt(PromptInput::text(&session.id, "hi"), &CancelToken::new()),
        Err(AgentError::SessionBusy { pid: 1, .. })
    ));

    // A window shorter than the heartbeat's age: dead, repaired, taken over.
    let short = LeaseConfig {
        stale_after: Duration::from_secs(1),
    };
    let runner = env
        .runner(Arc::new(ScriptedProvider::new([ScriptedTurn::text("ok")])))
        .with_lease_config(short)
        .build();
    let out = runner
        .prompt(PromptInput::text(&session.id, "hi"), &CancelToken::new())
        .unwrap();
    assert_eq!(out.text, "ok");
    let old = env.messages.get(&open).unwrap();
    assert_eq!(old.finish_reason, Some(FinishReason::Error));
    assert_eq!(lease_row(&env, &session.id), None);
    assert!(
        recover_session_with(&env.store, &session.id, &short)
            .unwrap()
            .is_empty()
    );
}

#[test]
fn the_lease_is_released_when_a_turn_fails() {
    let env = Env::new();
    let session = env.session();
    let runner = env
        .runner(Arc::new(ScriptedProvider::new([ScriptedTurn::error(
            ProviderError::Canceled,
        )])))
        .build();
    let out = runner
        .prompt(PromptInput::text(&session.id, "hi"), &CancelToken::new())
        .unwrap();
    assert_eq!(out.finish_reason, Some(FinishReason::Canceled));
    assert_eq!(lease_row(&env, &session.id), None);

    // An empty script fails the model call.
    let runner = env
        .runner(Arc::new(ScriptedProvider::new(Vec::<ScriptedTurn>::new())))
        .build();
    assert!(
        runner
            .prompt(PromptInput::text(&session.id, "hi"), &CancelToken::new())
            .is_err()
    );
    assert_eq!(lease_row(&env, &session.id), None);
}
