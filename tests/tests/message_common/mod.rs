//! Shared fixtures of the message tests: a fresh store on either backend, sessions created
//! through the generated queries, and small part builders.
#![allow(clippy::unwrap_used, clippy::expect_used, dead_code)]

use std::sync::Arc;

use scribe_db::ids::{Prefix, new_id};
use scribe_db::queries;
use scribe_message::{MessageService, NewMessage, Part, Role};
use scribe_tests::{Backend, TestDb};
use serde_json::json;

/// A service over a fresh SQLite file; keep the [`TestDb`] alive while using it.
pub fn service() -> (TestDb, MessageService) {
    service_on(Backend::Sqlite)
}

/// A service over a fresh store on `backend`; keep the [`TestDb`] alive while using it.
pub fn service_on(backend: Backend) -> (TestDb, MessageService) {
    let t = TestDb::new(backend);
    let svc = MessageService::new(Arc::clone(&t.db));
    (t, svc)
}

/// A session row with `source` (and optionally a title, model, kind and parent).
pub fn session_with(
    svc: &MessageService,
    source: &str,
    kind: &str,
    parent: Option<&str>,
    title: Option<&str>,
) -> String {
    let id = new_id(Prefix::Session);
    svc.database()
        .write(|tx| -> scribe_db::Result<_> {
            tx.q().create_session(&queries::CreateSessionParams {
                id: &id,
                parent_session_id: parent,
                kind,
                source,
                user_id: None,
                directory: None,
                title,
                model: Some("claude-test"),
                model_config: None,
                system_prompt: None,
                permission: None,
                billing_provider: None,
                billing_base_url: None,
                billing_mode: None,
                now: scribe_db::now_ms(),
            })?;
            Ok(())
        })
        .unwrap();
    id
}

/// A normal `cli` session.
pub fn session(svc: &MessageService) -> String {
    session_with(svc, "cli", "normal", None, None)
}

/// Creates a message of `role` with one text part.
pub fn say(svc: &MessageService, session: &str, role: Role, text: &str) -> scribe_message::Message {
    svc.create(NewMessage::new(session, role, vec![Part::text(text)]))
        .unwrap()
}

/// A tool part in the completed state.
pub fn completed_tool(call_id: &str, tool: &str, input: serde_json::Value, output: &str) -> Part {
    let mut part = Part::tool(call_id, tool, input);
    if let Part::Tool(t) = &mut part {
        t.state.start(1).unwrap();
        t.state.complete(output, tool, json!(null), 2).unwrap();
    }
    part
}

/// The `message_count` and `tool_call_count` of session `id` (kept by triggers), on either
/// backend.
pub fn counters(svc: &MessageService, id: &str) -> (i64, i64) {
    let row = svc
        .database()
        .read(|tx| tx.q().get_session(id))
        .unwrap()
        .unwrap();
    (row.message_count, row.tool_call_count)
}

/// Raw SQL count helper for checking indexes and counters (SQLite only).
pub fn count(svc: &MessageService, sql: &str) -> i64 {
    svc.database()
        .read(|c| -> scribe_db::Result<_> {
            let c = c.conn().unwrap();
            Ok(c.query_row(sql, [], |r| r.get(0))?)
        })
        .unwrap()
}
