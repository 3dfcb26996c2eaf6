//! Goose: its sessions database found where Goose keeps it, read into faithful sessions
//! (tool calls with their results, a compaction's summary, the session's usage), read
//! again only for the sessions that changed, and nothing stored twice when Goose rewrites
//! a session's rows.
//!
//! The fixture (`fixtures/goose/sessions.sql`) is Goose's own schema with rows written
//! for Scribe (fixtures/SOURCES.md). Its session totals and estimated costs equal
//! ccusage's (`fixtures.rs`).

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::path::{Path, PathBuf};

use common::*;
use rusqlite::Connection;
use scribe_import::{Source, sources};
use scribe_message::{FileSource, Part, Role};

const FLAKY: &str = "20251120_1";
const COMPACTED: &str = "20251121_1";
const QUESTION: &str = "20251122_1";

/// Goose's data folder under `home`, its database built from the fixture.
fn goose_home(home: &Path) -> PathBuf {
    let data = home.join(".local/share/goose");
    build_db("goose/sessions.sql", &data.join("sessions/sessions.db"));
    data
}

#[cfg(all(unix, not(target_os = "macos")))]
#[test]
fn goose_is_found_where_it_keeps_its_database() {
    let dir = tempfile::tempdir().unwrap();
    let home = dir.path().join("home");
    let roots =
        |vars: &[(&str, &str)]| sources::importer(Source::Goose).default_roots(&env(&home, vars));
    assert_eq!(roots(&[]), [home.join(".local/share/goose/sessions")]);
    assert_eq!(
        roots(&[("XDG_DATA_HOME", "/data")]),
        [PathBuf::from("/data/goose/sessions")]
    );
    // GOOSE_PATH_ROOT moves all of Goose's folders; Goose ignores a relative one.
    assert_eq!(
        roots(&[
            ("GOOSE_PATH_ROOT", "/srv/goose"),
            ("XDG_DATA_HOME", "/data")
        ]),
        [PathBuf::from("/srv/goose/data/sessions")]
    );
    assert_eq!(
        roots(&[("GOOSE_PATH_ROOT", "relative/goose")]),
        [home.join(".local/share/goose/sessions")]
    );

    // The sessions folder, the data folder above it, or the file itself: the database.
    let data = goose_home(&home);
    let db_file = data.join("sessions/sessions.db");
    for root in [data.join("sessions"), data.clone(), db_file.clone()] {
        let mut found = Vec::new();
        sources::importer(Source::Goose)
            .discover(&root, &mut found)
            .unwrap();
        assert_eq!(
            found,
            std::slice::from_ref(&db_file),
            "from {}",
            root.display()
        );
    }
    let mut found = Vec::new();
    sources::importer(Source::Goose)
        .discover(&home, &mut found)
        .unwrap();
    assert!(found.is_empty(), "{found:?}");
}

#[test]
fn a_goose_session_keeps_its_calls_their_results_its_summary_and_its_usage() {
    let dir = tempfile::tempdir().unwrap();
    let data = goose_home(&dir.path().join("home"));
    // A row whose content is not JSON, as a damaged database might hold.
    Connection::open(data.join("sessions/sessions.db"))
        .unwrap()
        .execute_batch(&format!(
            "INSERT INTO messages (message_id, session_id, role, content_json,
                 created_timestamp) VALUES ('msg_bad', '{FLAKY}', 'assistant', '{{not json',
                 1763629241);"
        ))
        .unwrap();
    let db = scribe_db(dir.path());
    let summary = run(&db, Source::Goose, &[data]);
    assert!(summary.failed.is_empty(), "{:?}", summary.failed);
    assert_eq!(summary.written.sessions_created, 3);
    assert_eq!(summary.written.messages_inserted, 12);
    // The row whose content is not JSON is said once; the rest of its session is kept.
    let said: Vec<&str> = summary.malformed.iter().map(|m| m.error.as_str()).collect();
    assert_eq!(said.len(), 1, "{said:?}");
    assert!(said[0].starts_with("a message of 20251120_1: "), "{said:?}");
    assert_eq!(summary.skipped.get("content:systemNotification"), Some(&1));
    assert_eq!(summary.skipped.get("message:archived"), Some(&1));

    let flaky = session(&db, FLAKY);
    assert_eq!(flaky.source, "goose");
    assert_eq!(flaky.title.as_deref(), Some("Fix the flaky parser test"));
    assert_eq!(flaky.directory.as_deref(), Some("/home/me/parser"));
    assert_eq!(flaky.model.as_deref(), Some("claude-sonnet-4-5-20250929"));
    assert_eq!(flaky.billing_provider.as_deref(), Some("anthropic"));
    // The session's running totals, not the last call's; a call per reply.
    assert_eq!(
        (
            flaky.tokens.input,
            flaky.tokens.output,
            flaky.tokens.cache_read
        ),
        (24_310, 1_204, 0)
    );
    assert_eq!(flaky.api_call_count, 3);
    assert!(flaky.estimated_cost_usd > 0.0);
    assert_eq!(flaky.actual_cost_usd, None);

    // Tool responses settle the calls they answer and leave no message of their own.
    let msgs = messages(&db, FLAKY);
    let roles: Vec<Role> = msgs.iter().map(|m| m.role).collect();
    assert_eq!(
        roles,
        [
            Role::User,
            Role::Assistant,
            Role::Assistant,
            Role::Assistant
        ]
    );
    let out = "test test_parse ... FAILED\nleft: [\"b\", \"a\"]\nright: [\"a\", \"b\"]";
    assert_eq!(
        tool_outcomes(&db, FLAKY),
        [
            // The output meant for the model, once, though Goose keeps a copy for the user.
            ("developer__shell".into(), "completed".into(), out.into()),
            // A result older Goose wrote as the list of contents alone.
            (
                "developer__text_editor".into(),
                "completed".into(),
                "pub fn parse(s: &str) -> HashMap<String, usize> {".into()
            ),
            // A call Goose could not read, and the error the model was told.
            (
                "(unreadable call)".into(),
                "error".into(),
                "-32602: Could not interpret tool use parameters for id toolu_03".into()
            ),
        ]
    );
    match &msgs[1].parts[0].part {
        Part::Reasoning(r) => {
            assert!(r.text.starts_with("It fails intermittently"), "{r:?}");
            assert_eq!(r.signature.as_deref(), Some("sig-1"));
        }
        other => panic!("{other:?}"),
    }
    assert_eq!(msgs[1].model.as_deref(), Some("claude-sonnet-4-5-20250929"));

    // A compaction: the messages before it stay as they were; the summary is the
    // session's summary; the prompt Goose adds for the model is synthetic and no reply.
    let compacted = session(&db, COMPACTED);
    assert_eq!(
        compacted.title.as_deref(),
        Some("Split the parser into modules")
    );
    assert_eq!(compacted.api_call_count, 2);
    let msgs = messages(&db, COMPACTED);
    assert_eq!(
        msgs.len(),
        6,
        "the archived copy of a prompt is not imported"
    );
    let summary = &msgs[2];
    assert!(summary.is_summary);
    assert!(matches!(summary.parts[0].part, Part::Compaction(_)));
    match &summary.parts[1].part {
        Part::Text(t) => {
            assert!(t.text.starts_with("The user asked to split"), "{t:?}");
            assert!(!t.synthetic);
        }
        other => panic!("{other:?}"),
    }
    let go_on = &msgs[3];
    assert_eq!(
        (go_on.role, go_on.model.as_deref()),
        (Role::Assistant, None)
    );
    match &go_on.parts[0].part {
        Part::Text(t) => assert!(t.synthetic && t.text.starts_with("Your context was compacted")),
        other => panic!("{other:?}"),
    }
    match &msgs[4].parts[1].part {
        Part::File(f) => {
            assert_eq!(f.mime, "image/png");
            assert!(
                matches!(&f.source, FileSource::Url { url } if url == "data:image/png;base64,iVBORw0KGgo="),
                "{f:?}"
            );
        }
        other => panic!("{other:?}"),
    }

    // An older session: its description titles it; the last call's counts are its usage;
    // a model the catalog does not price leaves the cost unknown.
    let question = session(&db, QUESTION);
    assert_eq!(
        question.title.as_deref(),
        Some("Quick question about cargo")
    );
    assert_eq!((question.tokens.input, question.tokens.output), (900, 120));
    assert!(question.cost_is_partial(), "{:?}", question.cost_status);
    assert!(!flaky.cost_is_partial() && !compacted.cost_is_partial());
}

#[test]
fn a_changed_goose_session_is_read_again_and_a_rewritten_one_stores_nothing_twice() {
    let dir = tempfile::tempdir().unwrap();
    let data = goose_home(&dir.path().join("home"));
    let file = data.join("sessions/sessions.db");
    let db = scribe_db(dir.path());
    run(&db, Source::Goose, std::slice::from_ref(&data));
    let before = dump(&db);

    // Nothing changed: nothing read.
    let again = run(&db, Source::Goose, std::slice::from_ref(&data));
    assert_eq!(again.files_unchanged, 1, "{again:?}");
    assert_same(&dump(&db), &before, "an unchanged database");

    // Goose compacts a session: it deletes its rows and writes them again (new row ids,
    // the same message ids and times). The store is what it was.
    let goose = Connection::open(&file).unwrap();
    goose
        .execute_batch(&format!(
            "CREATE TEMP TABLE kept AS SELECT * FROM messages WHERE session_id = '{FLAKY}';
             DELETE FROM messages WHERE session_id = '{FLAKY}';
             INSERT INTO messages (message_id, session_id, role, content_json,
                 created_timestamp, timestamp, tokens, metadata_json)
             SELECT message_id, session_id, role, content_json, created_timestamp,
                 timestamp, tokens, metadata_json FROM kept ORDER BY id;"
        ))
        .unwrap();
    let rewritten = run(&db, Source::Goose, std::slice::from_ref(&data));
    assert_eq!(rewritten.written.messages_inserted, 0, "{rewritten:?}");
    assert_eq!(
        rewritten.written.sessions_updated, 1,
        "only the rewritten session"
    );
    assert_same(&dump(&db), &before, "a rewritten session");

    // The session goes on: a new exchange, the totals grown.
    goose
        .execute_batch(&format!(
            r#"INSERT INTO messages (message_id, session_id, role, content_json,
                   created_timestamp, metadata_json)
               VALUES ('msg_new-1', '{COMPACTED}', 'user',
                   '[{{"type":"text","text":"And one for the grammar"}}]', 1763734500,
                   '{{"userVisible":true,"agentVisible":true}}'),
                  ('msg_new-2', '{COMPACTED}', 'assistant',
                   '[{{"type":"text","text":"Added tests/grammar.rs."}}]', 1763734560,
                   '{{"userVisible":true,"agentVisible":true}}');
               UPDATE sessions SET accumulated_input_tokens = 60000,
                   accumulated_output_tokens = 3500, updated_at = '2025-11-21 14:36:00'
               WHERE id = '{COMPACTED}';"#
        ))
        .unwrap();
    let grown = run(&db, Source::Goose, std::slice::from_ref(&data));
    assert_eq!(grown.written.messages_inserted, 2, "{grown:?}");
    assert_eq!(grown.written.sessions_updated, 1);
    let s = session(&db, COMPACTED);
    // The totals are Goose's, set again, not added to.
    assert_eq!((s.tokens.input, s.tokens.output), (60_000, 3_500));
    assert_eq!(s.api_call_count, 3);
    assert_eq!(messages(&db, COMPACTED).len(), 8);
}

#[test]
fn an_older_goose_database_is_read_by_position_and_a_placeholder_name_is_no_title() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("goose/sessions/sessions.db");
    std::fs::create_dir_all(file.parent().unwrap()).unwrap();
    // The first schema: no message ids, no visibility, no running totals, no model.
    Connection::open(&file)
        .unwrap()
        .execute_batch(
            r#"CREATE TABLE sessions (id TEXT PRIMARY KEY, description TEXT NOT NULL DEFAULT '',
                   working_dir TEXT NOT NULL, created_at TIMESTAMP DEFAULT CURRENT_TIMESTAMP,
                   updated_at TIMESTAMP DEFAULT CURRENT_TIMESTAMP,
                   extension_data TEXT DEFAULT '{}', total_tokens INTEGER,
                   input_tokens INTEGER, output_tokens INTEGER);
               CREATE TABLE messages (id INTEGER PRIMARY KEY AUTOINCREMENT,
                   session_id TEXT NOT NULL REFERENCES sessions(id), role TEXT NOT NULL,
                   content_json TEXT NOT NULL, created_timestamp INTEGER NOT NULL,
                   timestamp TIMESTAMP DEFAULT CURRENT_TIMESTAMP, tokens INTEGER);
               INSERT INTO sessions (id, description, working_dir, created_at, updated_at,
                   input_tokens, output_tokens)
               VALUES ('20251001_1', 'CLI Session', '/w', '2025-10-01 08:00:00',
                   '2025-10-01 08:01:00', 400, 50);
               INSERT INTO messages (session_id, role, content_json, created_timestamp)
               VALUES ('20251001_1', 'user', '[{"type":"text","text":"hello"}]', 1759305600),
                      ('20251001_1', 'assistant', '[{"type":"text","text":"hi"}]', 1759305601);"#,
        )
        .unwrap();
    let db = scribe_db(dir.path());
    let first = run(&db, Source::Goose, std::slice::from_ref(&file));
    assert!(
        first.failed.is_empty() && first.malformed.is_empty(),
        "{first:?}"
    );
    let s = session(&db, "20251001_1");
    assert_eq!(s.title, None, "Goose's placeholder name is no title");
    assert_eq!((s.tokens.input, s.tokens.output), (400, 50));
    assert_eq!(s.model, None);
    let texts: Vec<String> = messages(&db, "20251001_1")
        .iter()
        .map(|m| match &m.parts[0].part {
            Part::Text(t) => t.text.clone(),
            other => panic!("{other:?}"),
        })
        .collect();
    assert_eq!(texts, ["hello", "hi"]);
    // Read again after a change elsewhere in the session's row: keyed by position, the
    // same messages.
    Connection::open(&file)
        .unwrap()
        .execute("UPDATE sessions SET output_tokens = 60", [])
        .unwrap();
    let again = run(&db, Source::Goose, std::slice::from_ref(&file));
    assert_eq!(
        (
            again.written.messages_inserted,
            again.written.sessions_updated
        ),
        (0, 1)
    );
    assert_eq!(messages(&db, "20251001_1").len(), 2);
}
