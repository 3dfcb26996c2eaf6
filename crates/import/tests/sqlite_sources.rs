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

/// A database source is read and stored a batch at a time, so a database of any size
/// is imported in the memory of one batch (an OpenCode database of 150,000 messages took
/// 674 MB, read whole into one batch; 59 MB read so): each read stops at the end of the
/// session that filled its batch and says where (`Resume::more`), the next goes on from
/// there, and every session is read once. The store is the one a whole read gives.
#[test]
fn a_database_is_read_and_stored_a_batch_at_a_time() {
    let dir = tempfile::tempdir().unwrap();
    let opencode = dir.path().join("opencode/opencode.db");
    build_db("opencode/opencode.sql", &opencode);
    // Four more sessions like the fixture's one, each created a second later.
    let conn = Connection::open(&opencode).unwrap();
    conn.execute_batch(
        "PRAGMA foreign_keys = OFF;
         CREATE TEMP TABLE n(i INTEGER);
         INSERT INTO n VALUES (1), (2), (3), (4);
         CREATE TEMP TABLE s0 AS SELECT * FROM session;
         CREATE TEMP TABLE m0 AS SELECT * FROM message;
         CREATE TEMP TABLE p0 AS SELECT * FROM part;
         UPDATE s0 SET time_created = time_created + 1000;
         INSERT INTO session SELECT s0.id || 'n' || n.i, project_id, workspace_id, parent_id,
             slug, directory, path, title, version, share_url, summary_additions,
             summary_deletions, summary_files, summary_diffs, metadata, cost, tokens_input,
             tokens_output, tokens_reasoning, tokens_cache_read, tokens_cache_write, revert,
             permission, agent, model, time_created * 1 + n.i, time_updated, time_compacting,
             time_archived FROM s0, n;
         INSERT INTO message SELECT m0.id || 'n' || n.i, m0.session_id || 'n' || n.i,
             time_created, time_updated, replace(data, m0.session_id, m0.session_id || 'n' || n.i)
             FROM m0, n;
         INSERT INTO part SELECT p0.id || 'n' || n.i, p0.message_id || 'n' || n.i,
             p0.session_id || 'n' || n.i, time_created, time_updated,
             replace(replace(data, p0.session_id, p0.session_id || 'n' || n.i),
                     p0.message_id, p0.message_id || 'n' || n.i)
             FROM p0, n;",
    )
    .unwrap();
    drop(conn);
    let hermes = dir.path().join("hermes/state.db");
    build_db("hermes/state_db_sample.sql", &hermes);
    let goose = dir.path().join("goose/sessions.db");
    build_db("goose/sessions.sql", &goose);
    for (source, file, sessions) in [
        (Source::OpenCode, &opencode, 5),
        (Source::Hermes, &hermes, 3),
        (Source::Goose, &goose, 3),
    ] {
        let importer = scribe_import::sources::importer(source);
        // Read by hand, one message a batch: one session a read, each once.
        let state = scribe_import::sink::DryRunSink::new(None);
        let (mut resume, mut read) = (scribe_import::record::Resume::default(), Vec::new());
        let mut reads = 0;
        loop {
            reads += 1;
            let mut out = scribe_import::record::Batch::default();
            let unit = scribe_import::sources::Unit {
                path: file,
                resume: resume.clone(),
                since: None,
                mtime_ms: 0,
                state: &state,
                max_messages: 1,
            };
            let mut report = scribe_import::sources::FileReport::default();
            let next = importer.read(&unit, &mut out, &mut report).unwrap();
            read.extend(out.sessions.iter().map(|s| s.external_id.clone()));
            if !next.more {
                break;
            }
            assert_eq!(out.sessions.len(), 1, "{source:?}: one session a read");
            resume = next;
        }
        let mut once = read.clone();
        once.sort();
        once.dedup();
        assert_eq!(
            (read.len(), once.len()),
            (sessions, sessions),
            "{source:?}: {read:?}"
        );
        assert_eq!(reads, sessions, "{source:?}: a read a session");

        // Imported so, the store is the one a whole read gives.
        let store = |name: &str, batch_messages: usize| {
            let at = dir.path().join(name);
            std::fs::create_dir_all(&at).unwrap();
            let db = scribe_db(&at);
            // Each part stored says so, with the file's messages stored so far.
            let mut stored = Vec::new();
            let summary = run_batched(
                &db,
                source,
                std::slice::from_ref(file),
                batch_messages,
                &mut |event| {
                    if let scribe_import::Event::Stored { messages, .. } = event {
                        stored.push(messages);
                    }
                },
            );
            assert_eq!(summary.files_read, 1, "{summary:?}");
            assert_eq!(summary.written.sessions_created, sessions as u64);
            let parts = if batch_messages == 1 { sessions - 1 } else { 0 };
            assert_eq!(stored.len(), parts, "{name}: {stored:?}");
            assert!(stored.windows(2).all(|w| w[0] < w[1]), "{stored:?}");
            db
        };
        let name = format!("{source:?}");
        let (whole, batched) = (
            store(&format!("{name}-whole"), 5_000),
            store(&format!("{name}-batched"), 1),
        );
        assert_same(&dump(&batched), &dump(&whole), &name);
        if source == Source::Hermes {
            // An older schema without the index on a message's session: the same store.
            Connection::open(file)
                .unwrap()
                .execute_batch("DROP INDEX idx_messages_session")
                .unwrap();
            let unindexed = store("Hermes-unindexed", 1);
            assert_same(&dump(&unindexed), &dump(&whole), "without the index");
        }
    }
}

#[test]
fn a_session_row_without_an_id_is_reported_once_and_the_rest_imported() {
    let dir = tempfile::tempdir().unwrap();
    let opencode = dir.path().join("opencode/opencode.db");
    build_db("opencode/opencode.sql", &opencode);
    let hermes = dir.path().join("hermes/state.db");
    build_db("hermes/state_db_sample.sql", &hermes);
    let goose = dir.path().join("goose/sessions.db");
    build_db("goose/sessions.sql", &goose);
    // Goose keeps times as text; its fixture's one malformed message is left out here.
    let goose_times = (
        "datetime(created_at, '-1 second')",
        "datetime(created_at, '+30 days')",
        "DELETE FROM messages WHERE content_json NOT LIKE '[%';",
    );
    for (source, file, table, started, (earlier, later, tidy), sessions) in [
        (
            Source::OpenCode,
            &opencode,
            "session",
            "time_created",
            ("time_created - 1", "time_created + 1000000", ""),
            2,
        ),
        (
            Source::Hermes,
            &hermes,
            "sessions",
            "started_at",
            ("started_at - 1", "started_at + 1000000", ""),
            4,
        ),
        (
            Source::Goose,
            &goose,
            "sessions",
            "created_at",
            goose_times,
            4,
        ),
    ] {
        // A copy of the first session without an id (the schemas allow a NULL key),
        // started just before it, and one more session after them all, so that a read
        // a batch at a time stops after the first one and goes on past the row.
        Connection::open(file)
            .unwrap()
            .execute_batch(&format!(
                "PRAGMA foreign_keys = OFF;
                 {tidy}
                 CREATE TEMP TABLE s0 AS SELECT * FROM {table} ORDER BY {started} LIMIT 1;
                 UPDATE s0 SET id = NULL, {started} = {earlier};
                 INSERT INTO {table} SELECT * FROM s0;
                 UPDATE s0 SET id = 'last', {started} = {later};
                 INSERT INTO {table} SELECT * FROM s0;"
            ))
            .unwrap();
        // Read a session at a time (batches of one message), and all at once.
        for batch_messages in [1, 5_000] {
            let at = dir.path().join(format!("{source:?}-{batch_messages}"));
            std::fs::create_dir_all(&at).unwrap();
            let db = scribe_db(&at);
            let summary = run_batched(
                &db,
                source,
                std::slice::from_ref(file),
                batch_messages,
                &mut |_| {},
            );
            let said: Vec<&str> = summary.malformed.iter().map(|m| m.error.as_str()).collect();
            assert_eq!(
                said,
                ["a session without an id"],
                "{source:?}, batches of {batch_messages}"
            );
            assert_eq!(summary.malformed[0].path, file.display().to_string());
            assert!(summary.failed.is_empty(), "{:?}", summary.failed);
            assert_eq!(summary.written.sessions_created, sessions);
            assert_eq!(self::sessions(&db).len(), sessions as usize);
        }
    }
}

#[test]
fn a_file_that_is_not_a_database_fails_alone() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("opencode");
    std::fs::create_dir_all(&data).unwrap();
    std::fs::write(data.join("opencode.db"), "this is not sqlite").unwrap();
    build_db("opencode/opencode.sql", &data.join("opencode-dev.db"));
    // A directory named like a database is not one, and not a failure either.
    std::fs::create_dir_all(data.join("opencode-old.db")).unwrap();
    let db = scribe_db(dir.path());
    let s = run(&db, Source::OpenCode, &[data]);
    assert_eq!(s.failed.len(), 1, "{:?}", s.failed);
    assert!(s.failed[0].path.ends_with("opencode.db"));
    assert_eq!(s.files, 2);
    assert_eq!(s.files_read, 1);
    assert_eq!(s.written.sessions_created, 1);
}

/// A rollback-journal database whose writer holds its lock through the reader's busy
/// timeout fails alone, saying what to do, and the next import reads it.
#[test]
fn a_database_locked_by_its_writer_fails_saying_to_import_again() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("opencode");
    build_db("opencode/opencode.sql", &data.join("opencode.db"));
    let writer = Connection::open(data.join("opencode.db")).unwrap();
    writer.execute_batch("BEGIN EXCLUSIVE").unwrap();
    let db = scribe_db(dir.path());
    let s = run(&db, Source::OpenCode, std::slice::from_ref(&data));
    assert_eq!(s.failed.len(), 1, "{:?}", s.failed);
    let reason = &s.failed[0].error;
    assert!(reason.contains("database is locked"), "{reason}");
    assert!(reason.contains("import again when it is idle"), "{reason}");
    assert_eq!(s.written.sessions_created, 0);
    writer.execute_batch("COMMIT").unwrap();
    let s = run(&db, Source::OpenCode, &[data]);
    assert!(s.failed.is_empty(), "{:?}", s.failed);
    assert_eq!(s.written.sessions_created, 1);
}

#[test]
fn an_opencode_task_call_names_its_child_whether_it_completed_or_failed() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("opencode");
    let source = data.join("opencode.db");
    build_db("opencode/opencode.sql", &source);
    let parent = "ses_f0de500f8ffeXvsiYJDOg5JtrU";
    let message = "msg_0f21b0104001XDVLEwtN0JiIZk";
    let agent = Connection::open(&source).unwrap();
    for (child, part, status, at) in [
        ("ses_childok", "prt_taskok", "completed", 1790768251700_i64),
        ("ses_childerr", "prt_taskerr", "error", 1790768251710),
    ] {
        agent
            .execute(
                "INSERT INTO session (id, project_id, parent_id, slug, directory, title, version, \
                 time_created, time_updated) \
                 VALUES (?1, 'global', ?2, ?1, '/w', ?1, '1.18.33', ?3, ?3)",
                rusqlite::params![child, parent, at],
            )
            .unwrap();
        let state = if status == "completed" {
            serde_json::json!({"status": "completed", "input": {"prompt": "look"},
                "output": "found it", "title": "look", "metadata": {"sessionId": child},
                "time": {"start": at, "end": at + 5}})
        } else {
            serde_json::json!({"status": "error", "input": {"prompt": "look"},
                "error": "Tool execution aborted", "metadata": {"sessionId": child},
                "time": {"start": at, "end": at + 5}})
        };
        let data = serde_json::json!({"type": "tool", "callID": part, "tool": "task",
                                      "state": state});
        agent
            .execute(
                "INSERT INTO part (id, message_id, session_id, time_created, time_updated, data) \
                 VALUES (?1, ?2, ?3, ?4, ?4, ?5)",
                rusqlite::params![part, message, parent, at, data.to_string()],
            )
            .unwrap();
    }
    let db = scribe_db(dir.path());
    let s = run(&db, Source::OpenCode, std::slice::from_ref(&data));
    assert!(s.failed.is_empty(), "{:?}", s.failed);
    let tools: Vec<scribe_message::part::ToolPart> = messages(&db, parent)
        .into_iter()
        .flat_map(|m| m.parts)
        .filter_map(|p| match p.part {
            scribe_message::Part::Tool(t) if t.tool == "task" => Some(t),
            _ => None,
        })
        .collect();
    assert_eq!(tools.len(), 2, "{tools:?}");
    for t in &tools {
        let named = match &t.state {
            scribe_message::ToolState::Completed { metadata, .. } => {
                metadata["session_id"].as_str().map(str::to_owned)
            }
            scribe_message::ToolState::Error { .. } => t
                .extra
                .get("session_id")
                .and_then(|v| v.as_str())
                .map(str::to_owned),
            other => panic!("unexpected state {other:?}"),
        };
        let want = if t.call_id == "prt_taskok" {
            "ses_childok"
        } else {
            "ses_childerr"
        };
        assert_eq!(named.as_deref(), Some(want), "{t:?}");
        let child = session(&db, want);
        assert_eq!(child.kind, scribe_session::SessionKind::Task);
        assert_eq!(child.parent_session_id.as_deref(), Some(parent));
    }
}

/// The agents are not running: their WAL-mode databases have no `-wal`/`-shm` files. A
/// read-only open would create both in the agent's directory and leave them there; the
/// import must leave the directories exactly as they were (same files, bytes, mtimes),
/// and an agent that starts afterwards writes without waiting for anything.
#[test]
fn closed_wal_databases_are_read_without_creating_or_touching_any_file() {
    let dir = tempfile::tempdir().unwrap();
    let opencode = dir.path().join("opencode");
    let hermes = dir.path().join("hermes");
    let goose = dir.path().join("goose/sessions");
    build_db("opencode/opencode.sql", &opencode.join("opencode.db"));
    build_db("hermes/state_db_sample.sql", &hermes.join("state.db"));
    build_db("goose/sessions.sql", &goose.join("sessions.db"));
    for db in [
        opencode.join("opencode.db"),
        hermes.join("state.db"),
        goose.join("sessions.db"),
    ] {
        drop(wal(&db));
        assert!(!db.with_extension("db-wal").exists());
        assert!(!db.with_extension("db-shm").exists());
    }
    let before = (listing(&opencode), listing(&hermes), listing(&goose));
    let db = scribe_db(dir.path());
    let a = run(&db, Source::OpenCode, std::slice::from_ref(&opencode));
    let b = run(&db, Source::Hermes, std::slice::from_ref(&hermes));
    let c = run(&db, Source::Goose, std::slice::from_ref(&goose));
    for s in [&a, &b, &c] {
        assert!(s.failed.is_empty(), "{s:?}");
        assert!(s.written.sessions_created > 0, "{s:?}");
    }
    assert_eq!(
        (listing(&opencode), listing(&hermes), listing(&goose)),
        before
    );
    // The agent starts and commits at once: no lock of the importer's is left to wait for.
    let agent = wal(&opencode.join("opencode.db"));
    agent.busy_timeout(std::time::Duration::ZERO).unwrap();
    agent
        .execute_batch("BEGIN IMMEDIATE; UPDATE session SET title = 'Renamed'; COMMIT;")
        .unwrap();
}

/// An importer reading while the agent writes: the agent's writes and commits never get
/// SQLITE_BUSY because of it (no busy timeout on the agent's side, so any wait fails).
#[test]
fn an_agent_commits_without_waiting_while_its_database_is_imported() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("opencode");
    let source = data.join("opencode.db");
    build_db("opencode/opencode.sql", &source);
    let agent = wal(&source);
    agent.busy_timeout(std::time::Duration::ZERO).unwrap();
    let db = scribe_db(dir.path());
    let stop = std::sync::atomic::AtomicBool::new(false);
    std::thread::scope(|scope| {
        let importer = scope.spawn(|| {
            let mut runs = 0;
            while !stop.load(std::sync::atomic::Ordering::Relaxed) || runs == 0 {
                let s = run(&db, Source::OpenCode, std::slice::from_ref(&data));
                assert!(s.failed.is_empty(), "{:?}", s.failed);
                runs += 1;
            }
            runs
        });
        for i in 0..200 {
            agent
                .execute(
                    "UPDATE session SET title = ?1 WHERE id = (SELECT min(id) FROM session)",
                    [format!("title {i}")],
                )
                .unwrap_or_else(|e| panic!("write {i}: {e}"));
        }
        stop.store(true, std::sync::atomic::Ordering::Relaxed);
        assert!(importer.join().unwrap() > 0);
    });
}
