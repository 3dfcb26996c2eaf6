//! Hermes rewrites what it keeps of a conversation: `/retry`, `/undo` and `/compress`
//! delete a session's rows and insert them again with new ids and times, and a session
//! log (`sessions/session_<id>.json`) is written whole every turn with message times
//! Scribe makes up from its start and last update. A session read again is matched
//! against what is stored of it: nothing is stored twice, a message the transcript no
//! longer has is kept and marked, a new one is added.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::path::Path;

use common::*;
use rusqlite::Connection;
use scribe_import::Source;
use scribe_message::{Message, Part, ToolState};

const SESSION: &str = "20260101_100000_a1b2c3";

/// Each message as (role, its text parts, its error's type).
fn said(messages: &[Message]) -> Vec<(String, String, Option<String>)> {
    messages
        .iter()
        .map(|m| {
            let text = m
                .parts
                .iter()
                .filter_map(|p| match &p.part {
                    Part::Text(t) => Some(t.text.as_str()),
                    _ => None,
                })
                .collect::<Vec<_>>()
                .join(" ");
            let error = m
                .error
                .as_ref()
                .and_then(|e| e.get("type"))
                .and_then(|t| t.as_str())
                .map(str::to_owned);
            (m.role.as_str().to_owned(), text, error)
        })
        .collect()
}

fn ids(messages: &[Message]) -> Vec<(String, Vec<String>)> {
    messages
        .iter()
        .map(|m| (m.id.clone(), m.parts.iter().map(|p| p.id.clone()).collect()))
        .collect()
}

/// What `replace_messages` does: every row of the session deleted and inserted again
/// (new row ids), `shift` seconds later, without the rows `drop` matches.
fn replace_messages(source: &Path, shift: f64, drop: &str) {
    let conn = Connection::open(source).unwrap();
    conn.execute_batch(&format!(
        "CREATE TEMP TABLE t AS SELECT session_id, role, content, tool_call_id, tool_calls, \
         tool_name, timestamp + {shift} AS timestamp, token_count, finish_reason, reasoning \
         FROM messages WHERE session_id = '{SESSION}' AND NOT ({drop}) ORDER BY id; \
         DELETE FROM messages WHERE session_id = '{SESSION}'; \
         INSERT INTO messages (session_id, role, content, tool_call_id, tool_calls, tool_name, \
         timestamp, token_count, finish_reason, reasoning) SELECT * FROM t; DROP TABLE t;"
    ))
    .unwrap();
}

#[test]
fn a_rewritten_hermes_transcript_is_matched_not_stored_twice() {
    let dir = tempfile::tempdir().unwrap();
    let home = dir.path().join("hermes");
    let source = home.join("state.db");
    build_db("hermes/state_db_sample.sql", &source);
    let db = scribe_db(dir.path());
    run(&db, Source::Hermes, std::slice::from_ref(&home));
    let first = messages(&db, SESSION);
    assert_eq!(first.len(), 4);

    // `/retry` of nothing changed: every row again, ten minutes later.
    replace_messages(&source, 600.0, "0");
    let again = run(&db, Source::Hermes, std::slice::from_ref(&home));
    assert!(again.failed.is_empty(), "{:?}", again.failed);
    assert_eq!(again.written.messages_inserted, 0);
    let second = messages(&db, SESSION);
    assert_eq!(ids(&second), ids(&first));
    assert_eq!(said(&second), said(&first));
    assert_eq!(session(&db, SESSION).message_count, 4);

    // `/undo` of the last prompt, then a new turn.
    replace_messages(&source, 0.0, "content = 'ok continue'");
    Connection::open(&source)
        .unwrap()
        .execute_batch(&format!(
            "INSERT INTO messages (session_id, role, content, timestamp) VALUES \
             ('{SESSION}', 'user', 'use a lock instead', 1767263000.0), \
             ('{SESSION}', 'assistant', 'Done: the temp file is locked.', 1767263010.0);"
        ))
        .unwrap();
    let undone = run(&db, Source::Hermes, std::slice::from_ref(&home));
    assert!(undone.failed.is_empty(), "{:?}", undone.failed);
    assert_eq!(undone.written.messages_inserted, 2);
    let third = messages(&db, SESSION);
    let owned = |role: &str, text: &str, error: Option<&str>| {
        (role.to_owned(), text.to_owned(), error.map(str::to_owned))
    };
    assert_eq!(
        said(&third),
        vec![
            owned(
                "user",
                "The test in tests/test_io.py is flaky, fix it.",
                None
            ),
            owned("assistant", "Let me run it first.", None),
            owned(
                "assistant",
                "The failure is a race on a temp file; delegating a search.",
                None
            ),
            // Kept, with what Hermes did to it.
            owned("user", "ok continue", Some("rewritten")),
            owned("user", "use a lock instead", None),
            owned("assistant", "Done: the temp file is locked.", None),
        ]
    );
    assert_eq!(ids(&third[..3]), ids(&first[..3]));
    let tool_completed = third[1].parts.iter().any(
        |p| matches!(&p.part, Part::Tool(t) if matches!(t.state, ToolState::Completed { .. })),
    );
    assert!(tool_completed, "the call keeps its result");
    assert_eq!(session(&db, SESSION).message_count, 6);

    // Read again unchanged: nothing moves.
    let before = dump(&db);
    replace_messages(&source, 0.0, "0");
    let same = run(&db, Source::Hermes, std::slice::from_ref(&home));
    assert_eq!(same.written.messages_inserted, 0);
    assert_same(&before, &dump(&db), "a store read again unchanged");

    // Times rewritten out of order: an earlier answer now listed after the new turn.
    replace_messages(&source, 0.0, "0");
    Connection::open(&source)
        .unwrap()
        .execute(
            "UPDATE messages SET timestamp = 1767263100.0 WHERE content LIKE 'The failure%'",
            [],
        )
        .unwrap();
    let reordered = run(&db, Source::Hermes, std::slice::from_ref(&home));
    assert_eq!(reordered.written.messages_inserted, 0);
    assert_eq!(said(&messages(&db, SESSION)), said(&third));
    assert_eq!(ids(&messages(&db, SESSION)), ids(&third));
    assert!(db.check().unwrap().is_ok());
}

#[test]
fn a_hermes_session_log_written_again_keeps_its_messages() {
    let dir = tempfile::tempdir().unwrap();
    let logs = dir.path().join("hermes/sessions");
    std::fs::create_dir_all(&logs).unwrap();
    let log = logs.join("session_20260429_hermes_small.json");
    std::fs::copy(
        fixtures().join("hermes/sessions/session_20260429_hermes_small.json"),
        &log,
    )
    .unwrap();
    let db = scribe_db(dir.path());
    run(&db, Source::Hermes, std::slice::from_ref(&logs));
    let id = "20260429_hermes_small";
    let first = messages(&db, id);
    assert_eq!(first.len(), 2);

    // Hermes writes the whole log again after a turn: two messages more, and a later
    // last update, which moves every message time Scribe makes up from it.
    let mut doc: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&log).unwrap()).unwrap();
    let list = doc["messages"].as_array_mut().unwrap();
    list.push(serde_json::json!({"role": "user", "content": "and the tests?"}));
    list.push(serde_json::json!({"role": "assistant", "content": "They pass."}));
    assert_eq!(doc["last_updated"], "2026-04-29T20:00:04Z");
    doc["last_updated"] = serde_json::json!("2026-04-29T23:00:00Z");
    std::fs::write(&log, serde_json::to_string(&doc).unwrap()).unwrap();
    let again = run(&db, Source::Hermes, &[logs]);
    assert!(again.failed.is_empty(), "{:?}", again.failed);
    assert_eq!(again.written.messages_inserted, 2);
    let second = messages(&db, id);
    assert_eq!(second.len(), 4);
    assert_eq!(ids(&second[..2]), ids(&first));
    assert_eq!(said(&second[..2]), said(&first));
    let texts: Vec<String> = said(&second[2..]).into_iter().map(|s| s.1).collect();
    assert_eq!(texts, ["and the tests?", "They pass."]);
    assert!(second.iter().all(|m| m.error.is_none()));
}
