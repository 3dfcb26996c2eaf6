//! Fixtures of the message tests that do not depend on where the store is: sessions
//! created through the generated queries (either backend), small part builders and
//! counters. Shared by this crate's tests (`common/mod.rs`) and the cross-crate message
//! suites in `tests/tests/message_common/mod.rs`, which include this file by path.
#![allow(clippy::unwrap_used, clippy::expect_used, dead_code)]

use scribe_db::ids::{Prefix, new_id};
use scribe_db::queries;
use scribe_message::{MessageService, NewMessage, Part, Role};
use serde_json::json;

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
                parent_session_id: parent,
                kind,
                title,
                model: Some("claude-test"),
                ..scribe_db::testing::bare_session(&id, source, scribe_db::now_ms())
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
