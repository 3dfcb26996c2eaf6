//! The conversation view: provider-neutral messages, tool calls paired with results,
//! interrupted and compacted tools, the summary cut, and continuation ancestors.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use scribe_message::{
    CLEARED_TOOL_OUTPUT, ConversationMessage, ConversationOptions, ConversationPart,
    INTERRUPTED_TOOL_OUTPUT, Message, MessageUpdate, NewMessage, Part, Role, ToolState,
};
use scribe_session::{NewSession, SessionError, SessionKind, Store};
use scribe_tests::{Backend, TestDb};
use serde_json::json;

/// A store over a fresh store on `backend`; keep the [`TestDb`] alive while using it.
fn service_on(backend: Backend) -> (TestDb, Store) {
    let t = TestDb::new(backend);
    let store = Store::new(std::sync::Arc::clone(&t.db));
    (t, store)
}

/// A session of `kind`, a child of `parent` when given.
fn session_with(svc: &Store, kind: SessionKind, parent: Option<&str>) -> String {
    svc.sessions()
        .create(NewSession {
            kind,
            parent_session_id: parent.map(str::to_owned),
            model: Some("claude-test".into()),
            ..NewSession::default()
        })
        .unwrap()
        .id
}

/// A normal `cli` session.
fn session(svc: &Store) -> String {
    session_with(svc, SessionKind::Normal, None)
}

/// Creates a message of `role` with one text part.
fn say(svc: &Store, session: &str, role: Role, text: &str) -> Message {
    svc.messages()
        .create(NewMessage::new(session, role, vec![Part::text(text)]))
        .unwrap()
}

/// A tool part in the completed state.
fn completed_tool(call_id: &str, tool: &str, input: serde_json::Value, output: &str) -> Part {
    let mut part = Part::tool(call_id, tool, input);
    if let Part::Tool(t) = &mut part {
        t.state.start(1).unwrap();
        t.state.complete(output, tool, json!(null), 2).unwrap();
    }
    part
}

fn text(role: Role, t: &str) -> ConversationMessage {
    ConversationMessage {
        role,
        parts: vec![ConversationPart::Text { text: t.into() }],
    }
}

fn tool_calls_are_paired_with_results_in_order(backend: Backend) {
    let (_dir, svc) = service_on(backend);
    let ses = session(&svc);
    say(&svc, &ses, Role::User, "list and read");
    let mut failed = Part::tool("c2", "read", json!({"path": "/nope"}));
    if let Part::Tool(t) = &mut failed {
        t.state.fail("no such file", 5).unwrap();
    }
    let mut compacted = completed_tool("c3", "bash", json!("cat big.log"), "huge output");
    if let Part::Tool(t) = &mut compacted {
        t.compacted_at = Some(9);
    }
    let mut running = Part::tool("c5", "sleep", json!(null));
    if let Part::Tool(t) = &mut running {
        t.state = ToolState::Running { started_at: 1 };
    }
    svc.messages()
        .create(NewMessage::new(
            &ses,
            Role::Assistant,
            vec![
                Part::Reasoning(scribe_message::ReasoningPart {
                    text: "thinking".into(),
                    signature: Some("sig".into()),
                    ..Default::default()
                }),
                Part::text("on it"),
                completed_tool("c1", "ls", json!({"dir": "."}), "a.txt"),
                failed,
                compacted,
                Part::tool("c4", "write", json!({})),
                running,
            ],
        ))
        .unwrap();
    say(&svc, &ses, Role::User, "thanks");

    let conv = svc
        .sessions()
        .conversation(&ses, ConversationOptions::default())
        .unwrap();
    assert_eq!(conv.len(), 4);
    assert_eq!(conv[0], text(Role::User, "list and read"));
    assert_eq!(conv[1].role, Role::Assistant);
    assert_eq!(
        conv[1].parts[..2],
        [
            ConversationPart::Reasoning {
                text: "thinking".into(),
                signature: Some("sig".into()),
                metadata: None
            },
            ConversationPart::Text {
                text: "on it".into()
            },
        ]
    );
    let calls: Vec<&str> = conv[1]
        .parts
        .iter()
        .filter_map(|p| match p {
            ConversationPart::ToolCall { call_id, .. } => Some(call_id.as_str()),
            _ => None,
        })
        .collect();
    assert_eq!(calls, ["c1", "c2", "c3", "c4", "c5"]);
    assert_eq!(conv[2].role, Role::Tool);
    let result =
        |call: &str, tool: &str, output: &str, is_error: bool| ConversationPart::ToolResult {
            call_id: call.into(),
            tool: tool.into(),
            output: output.into(),
            is_error,
        };
    assert_eq!(
        conv[2].parts,
        vec![
            result("c1", "ls", "a.txt", false),
            result("c2", "read", "no such file", true),
            result("c3", "bash", CLEARED_TOOL_OUTPUT, false),
            result("c4", "write", INTERRUPTED_TOOL_OUTPUT, true),
            result("c5", "sleep", INTERRUPTED_TOOL_OUTPUT, true),
        ]
    );
    assert_eq!(conv[3], text(Role::User, "thanks"));
}

fn from_summary_starts_at_the_newest_summary_as_a_user_message(backend: Backend) {
    let (_dir, svc) = service_on(backend);
    let ses = session(&svc);
    say(&svc, &ses, Role::User, "old question");
    say(&svc, &ses, Role::Assistant, "old answer");
    let summary = say(&svc, &ses, Role::Assistant, "summary of before");
    svc.messages()
        .update(
            &summary.id,
            MessageUpdate {
                is_summary: Some(true),
                ..MessageUpdate::default()
            },
        )
        .unwrap();
    // The conversation starts where the session says its summary is.
    svc.sessions()
        .update(&ses, |s| s.summary_message_id = Some(summary.id.clone()))
        .unwrap();
    say(&svc, &ses, Role::User, "new question");

    let full = svc
        .sessions()
        .conversation(&ses, ConversationOptions::default())
        .unwrap();
    assert_eq!(full.len(), 4);
    let cut = svc
        .sessions()
        .conversation(
            &ses,
            ConversationOptions {
                from_summary: true,
                ..ConversationOptions::default()
            },
        )
        .unwrap();
    assert_eq!(
        cut,
        vec![
            text(Role::User, "summary of before"),
            text(Role::User, "new question")
        ]
    );
}

fn ancestors_follow_continuations_root_first_but_not_task_parents(backend: Backend) {
    let (_dir, svc) = service_on(backend);
    let root = session(&svc);
    say(&svc, &root, Role::User, "root 1");
    let cont = session_with(&svc, SessionKind::Continuation, Some(&root));
    say(&svc, &cont, Role::User, "cont 1");
    let tip = session_with(&svc, SessionKind::Continuation, Some(&cont));
    say(&svc, &tip, Role::User, "tip 1");
    let task = session_with(&svc, SessionKind::Task, Some(&tip));
    say(&svc, &task, Role::User, "task 1");

    let with = ConversationOptions {
        include_ancestors: true,
        ..ConversationOptions::default()
    };
    let texts = |conv: Vec<ConversationMessage>| -> Vec<String> {
        conv.into_iter()
            .flat_map(|m| m.parts)
            .filter_map(|p| match p {
                ConversationPart::Text { text } => Some(text),
                _ => None,
            })
            .collect()
    };
    assert_eq!(
        texts(svc.sessions().conversation(&tip, with).unwrap()),
        ["root 1", "cont 1", "tip 1"]
    );
    assert_eq!(
        texts(
            svc.sessions()
                .conversation(&tip, ConversationOptions::default())
                .unwrap()
        ),
        ["tip 1"]
    );
    assert_eq!(
        texts(svc.sessions().conversation(&task, with).unwrap()),
        ["task 1"]
    );
    assert!(matches!(
        svc.sessions().conversation("ses_missing", with),
        Err(SessionError::NotFound {
            what: "session",
            ..
        })
    ));
}

scribe_tests::backends!(
    tool_calls_are_paired_with_results_in_order,
    from_summary_starts_at_the_newest_summary_as_a_user_message,
    ancestors_follow_continuations_root_first_but_not_task_parents,
);
