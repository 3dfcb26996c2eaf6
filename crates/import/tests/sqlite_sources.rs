//! The agents' SQLite databases are read without harming or holding up the agent: opened
//! read-only while another connection is in the middle of writing them, never changed,
//! and read again only for the sessions that changed.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::path::Path;

use common::*;
use rusqlite::Connection;
use scribe_import::Source;

fn wal(db: &Path) -> Connection {
    let conn = Connection::open(db).unwrap();
    let mode: String = conn
        .query_row("PRAGMA journal_mode = WAL", [], |r| r.get(0))
        .unwrap();
    assert_eq!(mode, "wal");
    conn
}

fn bytes(path: &Path) -> Vec<u8> {
    std::fs::read(path).unwrap_or_default()
}

#[test]
fn opencode_is_read_while_the_agent_writes_and_never_changed() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("opencode");
    let source = data.join("opencode.db");
    build_db("opencode/opencode.sql", &source);
    let agent = wal(&source);
    // The agent is in the middle of a write transaction: a new session, not committed.
    agent.execute_batch("BEGIN IMMEDIATE").unwrap();
    agent
        .execute(
            "INSERT INTO session (id, project_id, slug, directory, title, version, \
             time_created, time_updated) \
             VALUES ('ses_new', 'global', 'new', '/w', 'A new one', '1.18.33', 1790768300000, 1790768300000)",
            [],
        )
        .unwrap();
    let db = scribe_db(dir.path());
    let first = run(&db, Source::OpenCode, std::slice::from_ref(&data));
    assert!(first.failed.is_empty(), "{:?}", first.failed);
    assert_eq!(
        first.written.sessions_created, 1,
        "only committed rows are read"
    );
    agent.execute_batch("COMMIT").unwrap();
    agent
        .execute(
            "INSERT INTO message (id, session_id, time_created, time_updated, data) VALUES \
             ('msg_new', 'ses_new', 1790768300001, 1790768300001, \
              '{\"role\":\"user\",\"time\":{\"created\":1790768300001}}')",
            [],
        )
        .unwrap();
    agent
        .execute(
            "INSERT INTO part (id, message_id, session_id, time_created, time_updated, data) \
             VALUES ('prt_new', 'msg_new', 'ses_new', 1790768300001, 1790768300001, \
              '{\"type\":\"text\",\"text\":\"hello from the agent\"}')",
            [],
        )
        .unwrap();
    let wal_file = data.join("opencode.db-wal");
    let (db_before, wal_before) = (bytes(&source), bytes(&wal_file));
    let second = run(&db, Source::OpenCode, std::slice::from_ref(&data));
    assert!(second.failed.is_empty(), "{:?}", second.failed);
    assert_eq!(second.written.sessions_created, 1);
    assert_eq!(
        second.written.messages_inserted, 1,
        "the unchanged session is not read again"
    );
    assert_eq!(messages(&db, "ses_new")[0].text(), "hello from the agent");
    // Reading changed neither the database nor its WAL.
    assert_eq!(bytes(&source), db_before);
    assert_eq!(bytes(&wal_file), wal_before);
    // The agent can still write.
    agent
        .execute(
            "UPDATE session SET title = 'Renamed' WHERE id = 'ses_new'",
            [],
        )
        .unwrap();
    let third = run(&db, Source::OpenCode, &[data]);
    assert_eq!(third.written.sessions_updated, 1);
    assert_eq!(third.written.messages_inserted, 0);
    assert_eq!(session(&db, "ses_new").title.as_deref(), Some("Renamed"));
}

#[test]
fn hermes_is_read_while_the_gateway_writes_and_changed_sessions_are_read_again() {
    let dir = tempfile::tempdir().unwrap();
    let home = dir.path().join("hermes");
    let source = home.join("state.db");
    build_db("hermes/state_db_sample.sql", &source);
    let gateway = wal(&source);
    gateway.execute_batch("BEGIN IMMEDIATE").unwrap();
    gateway
        .execute(
            "INSERT INTO messages (session_id, role, content, timestamp) \
             VALUES ('20260101_101000_d4e5f6', 'user', 'not committed yet', 1767262450.0)",
            [],
        )
        .unwrap();
    let db = scribe_db(dir.path());
    let first = run(&db, Source::Hermes, std::slice::from_ref(&home));
    assert!(first.failed.is_empty(), "{:?}", first.failed);
    assert_eq!(session(&db, "20260101_101000_d4e5f6").message_count, 2);
    gateway.execute_batch("COMMIT").unwrap();
    gateway
        .execute(
            "UPDATE sessions SET input_tokens = input_tokens + 100, api_call_count = api_call_count + 1 \
             WHERE id = '20260101_101000_d4e5f6'",
            [],
        )
        .unwrap();
    let second = run(&db, Source::Hermes, &[home]);
    assert_eq!(
        second.written.sessions_updated, 1,
        "only the changed session"
    );
    assert_eq!(second.written.messages_inserted, 1);
    let s = session(&db, "20260101_101000_d4e5f6");
    assert_eq!(s.message_count, 3);
    assert_eq!((s.tokens.input, s.api_call_count), (500, 2));
}

#[test]
fn a_file_that_is_not_a_database_fails_alone() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("opencode");
    std::fs::create_dir_all(&data).unwrap();
    std::fs::write(data.join("opencode.db"), "this is not sqlite").unwrap();
    build_db("opencode/opencode.sql", &data.join("opencode-dev.db"));
    let db = scribe_db(dir.path());
    let s = run(&db, Source::OpenCode, &[data]);
    assert_eq!(s.failed.len(), 1, "{:?}", s.failed);
    assert!(s.failed[0].path.ends_with("opencode.db"));
    assert_eq!(s.files_read, 1);
    assert_eq!(s.written.sessions_created, 1);
}
