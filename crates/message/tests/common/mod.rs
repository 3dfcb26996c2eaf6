//! Shared fixtures: a file database in a temp dir, sessions created through the generated
//! queries, and small part builders.
#![allow(clippy::unwrap_used, clippy::expect_used, dead_code)]

use std::sync::Arc;

use scribe_db::Database;
use scribe_db::ids::{Prefix, new_id};
use scribe_db::queries;
use scribe_message::{MessageService, NewMessage, Part, Role};
use serde_json::json;

/// A service over a fresh database file; keep the `TempDir` alive while using it.
pub fn service() -> (tempfile::TempDir, MessageService) {
    let dir = tempfile::tempdir().unwrap();
    let db = Database::open(dir.path().join("scribe.db")).unwrap();
    (dir, MessageService::new(Arc::new(db)))
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
            let tx = tx.conn().unwrap();
            queries::create_session(
                tx,
                &queries::CreateSessionParams {
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
                },
            )?;
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

/// Raw SQL count helper for checking indexes and counters.
pub fn count(svc: &MessageService, sql: &str) -> i64 {
    svc.database()
        .read(|c| -> scribe_db::Result<_> {
            let c = c.conn().unwrap();
            Ok(c.query_row(sql, [], |r| r.get(0))?)
        })
        .unwrap()
}
