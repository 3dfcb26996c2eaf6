//! Cursor: the conversations of the editor's global database found where Cursor keeps
//! them, read into faithful sessions (the user's words, reasoning, tool calls settled as
//! Cursor recorded them, each counted model call's usage, the folder from the workspace
//! databases), Cursor's secrets never stored, its database never changed, and a
//! conversation that grows or is rewritten read again storing nothing twice.
//!
//! Fixtures (`fixtures/cursor`): dumps authored for Scribe after the layout public readers
//! of Cursor's database document (fixtures/SOURCES.md).

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::path::{Path, PathBuf};

use common::fixture_home::{CURSOR_WORKSPACE, cursor_user};
use common::*;
use scribe_import::{Source, sources};
use scribe_message::{Part, Role};

const AGENT: &str = "b7f3c2a1-5d4e-4f6a-9b8c-1e2d3f4a5b6c";
const CHAT: &str = "4a9e1f20-7c3b-4d8e-a1f6-2b5c8d9e0f13";

/// Cursor's `User` folder in a fresh home under `dir`; the roots an import reads.
fn user(dir: &Path) -> (PathBuf, Vec<PathBuf>) {
    let home = dir.join("home");
    let user = home.join(".config/Cursor/User");
    cursor_user(&user);
    let roots = sources::importer(Source::Cursor).default_roots(&env(&home, &[]));
    (user, roots)
}

fn global(user: &Path) -> PathBuf {
    user.join("globalStorage/state.vscdb")
}

/// Runs SQL against Cursor's global database, as Cursor would.
fn cursor_writes(user: &Path, sql: &str) {
    rusqlite::Connection::open(global(user))
        .unwrap()
        .execute_batch(sql)
        .unwrap();
}

#[test]
fn cursor_is_found_in_its_user_folder_and_from_any_folder_above_its_database() {
    let dir = tempfile::tempdir().unwrap();
    let home = dir.path().join("home");
    let importer = sources::importer(Source::Cursor);
    if cfg!(target_os = "linux") {
        assert_eq!(
            importer.default_roots(&env(&home, &[])),
            [home.join(".config/Cursor/User")]
        );
        assert_eq!(
            importer.default_roots(&env(&home, &[("XDG_CONFIG_HOME", "/cfg")])),
            [PathBuf::from("/cfg/Cursor/User")]
        );
    }
    let (user, _) = user(dir.path());
    let db = global(&user);
    for root in [
        user.clone(),
        user.parent().unwrap().to_owned(),
        user.join("globalStorage"),
        db.clone(),
    ] {
        let mut found = Vec::new();
        importer.discover(&root, &mut found).unwrap();
        assert_eq!(found, std::slice::from_ref(&db), "from {}", root.display());
    }
    // A workspace's database is not the global one.
    let mut found = Vec::new();
    importer
        .discover(&user.join("workspaceStorage"), &mut found)
        .unwrap();
    assert!(found.is_empty(), "{found:?}");
}

#[test]
fn a_cursor_conversation_keeps_its_words_calls_usage_and_folder() {
    let dir = tempfile::tempdir().unwrap();
    let (_, roots) = user(dir.path());
    let db = scribe_db(dir.path());
    let s = run(&db, Source::Cursor, &roots);
    assert!(s.failed.is_empty() && s.malformed.is_empty(), "{s:?}");
    // A header whose message is gone, and a conversation opened and closed unused.
    assert_eq!(s.skipped.get("bubble:missing"), Some(&1), "{s:?}");
    assert_eq!(s.skipped.get("conversation:empty"), Some(&1), "{s:?}");
    assert_eq!(
        (s.written.sessions_created, s.written.messages_inserted),
        (2, 12)
    );

    let agent = session(&db, AGENT);
    assert_eq!(agent.source, "cursor");
    assert_eq!(
        agent.title.as_deref(),
        Some("Fix the timezone bug in the date parser")
    );
    assert_eq!(agent.directory.as_deref(), Some("/home/dev/date parser"));
    assert_eq!(agent.model.as_deref(), Some("claude-4.5-sonnet"));
    assert_eq!((agent.tokens.input, agent.tokens.output), (37_262, 675));
    assert_eq!(agent.api_call_count, 2);
    // Cursor's name for the model is priced as Claude Sonnet 4.5.
    assert_eq!(agent.cost_status.as_deref(), Some("estimated"));
    let expected = (37_262.0 * 3.0 + 675.0 * 15.0) / 1e6;
    let cost = agent.estimated_cost_usd;
    assert!((cost - expected).abs() < 1e-9, "{cost}");
    assert_eq!(
        texts(&db, AGENT),
        [
            (
                Role::User,
                "The test `parses_local_midnight` fails on CI but passes on my laptop. Can you \
                 fix it?"
                    .into(),
                false
            ),
            (
                Role::Assistant,
                "The parser now reads dates as UTC, so `parses_local_midnight` no longer \
                 depends on the machine's timezone."
                    .into(),
                false
            ),
            // Only the rich-text document holds this one's words.
            (
                Role::User,
                "Run the whole suite too,\nthen stop.".into(),
                false
            ),
            (Role::Assistant, "All 42 tests pass.".into(), false),
        ]
    );
    let tools = tool_outcomes(&db, AGENT);
    assert_eq!(
        tools,
        [
            (
                "read_file".into(),
                "completed".into(),
                "pub fn parse(s: &str) -> Option<DateTime<Local>> {\n    \
                 Local.datetime_from_str(s, FMT).ok()\n}"
                    .into()
            ),
            (
                "edit_file".into(),
                "completed".into(),
                r#"{"diff":{"chunks":[{"linesAdded":1,"linesRemoved":1}]},"isApplied":true}"#
                    .into()
            ),
            (
                "run_terminal_cmd".into(),
                "error".into(),
                "error[E0308]: mismatched types".into()
            ),
            (
                "run_terminal_cmd".into(),
                "completed".into(),
                "test result: ok. 42 passed; 0 failed".into()
            ),
            (
                "run_terminal_cmd".into(),
                "error".into(),
                "cancelled".into()
            ),
        ]
    );
    let messages = messages(&db, AGENT);
    let parts: Vec<&Part> = messages
        .iter()
        .flat_map(|m| m.parts.iter().map(|p| &p.part))
        .collect();
    // The call's arguments, its id, and what its result held beside the text.
    let Some(Part::Tool(read)) = parts.iter().find(|p| matches!(p, Part::Tool(_))) else {
        panic!("no tool part");
    };
    assert_eq!(read.call_id, "toolu_01Read");
    assert_eq!(read.input["target_file"], "src/date.rs");
    let Some(Part::Tool(failed)) = parts
        .iter()
        .find(|p| matches!(p, Part::Tool(t) if t.call_id == "toolu_03Test"))
    else {
        panic!("no failed call");
    };
    assert_eq!(failed.input["command"], "cargo test parses_local");
    let Some(Part::Tool(suite)) = parts
        .iter()
        .find(|p| matches!(p, Part::Tool(t) if t.call_id == "toolu_04Suite"))
    else {
        panic!("no suite call");
    };
    assert!(
        matches!(&suite.state, scribe_message::ToolState::Completed { metadata, .. }
            if metadata["exitCode"] == 0),
        "{:?}",
        suite.state
    );
    assert!(parts.iter().any(|p| matches!(p, Part::Reasoning(r)
        if r.text.starts_with("CI runs in UTC") && r.signature.as_deref() == Some("sig-a1"))));
    // Every reply carries the model its user message asked for; the times are Cursor's,
    // and a message without one (the suite's run) follows the one before it.
    assert!(
        messages
            .iter()
            .filter(|m| m.role == Role::Assistant)
            .all(|m| m.model.as_deref() == Some("claude-4.5-sonnet"))
    );
    assert_eq!(messages.len(), 10);
    let times: Vec<i64> = messages.iter().map(|m| m.created_at).collect();
    assert!(times.windows(2).all(|w| w[0] <= w[1]), "{times:?}");
    assert_eq!(
        times[0],
        scribe_import::time::parse("2025-12-29T10:00:05Z").unwrap()
    );

    // An older conversation keeps its messages inline, records no usage and no name.
    let chat = session(&db, CHAT);
    assert_eq!(chat.title, None);
    assert_eq!(chat.directory, None);
    assert_eq!(chat.model.as_deref(), Some("gpt-4.1"));
    assert!(!chat.usage_recorded(), "{chat:?}");
    assert_eq!(
        texts(&db, CHAT).iter().map(|t| t.0).collect::<Vec<_>>(),
        [Role::User, Role::Assistant]
    );
    assert_eq!(
        chat.created_at,
        scribe_import::time::parse("2025-11-29T10:00:00Z").unwrap()
    );

    // Cursor's sign-in token and encryption keys are never read into the store.
    let stored = dump(&db);
    for secret in [
        "not-a-real-token-but-never-read",
        "c2VjcmV0LW5ldmVyLXN0b3JlZA==",
        "c2VjcmV0LWFsc28tbmV2ZXItc3RvcmVk",
    ] {
        assert!(!stored.contains(secret), "{secret} was stored");
    }
}

#[test]
fn cursor_databases_are_read_without_being_changed_or_locked() {
    let dir = tempfile::tempdir().unwrap();
    let (user, roots) = user(dir.path());
    let before = listing(&user);
    let bytes = std::fs::read(global(&user)).unwrap();
    let db = scribe_db(dir.path());
    run(&db, Source::Cursor, &roots);
    assert_eq!(listing(&user), before, "no file changed, added or touched");
    assert_eq!(std::fs::read(global(&user)).unwrap(), bytes);
    // Nothing is held once the import is done: Cursor commits at once.
    let cursor = rusqlite::Connection::open(global(&user)).unwrap();
    cursor.busy_timeout(std::time::Duration::ZERO).unwrap();
    cursor
        .execute("INSERT INTO ItemTable VALUES ('workbench.view', '{}')", [])
        .unwrap();
    let workspace = user
        .join("workspaceStorage")
        .join(CURSOR_WORKSPACE)
        .join("state.vscdb");
    rusqlite::Connection::open(workspace)
        .unwrap()
        .execute("INSERT INTO ItemTable VALUES ('x', '{}')", [])
        .unwrap();
}

#[test]
fn a_grown_or_rewritten_cursor_conversation_is_read_again_storing_nothing_twice() {
    let dir = tempfile::tempdir().unwrap();
    let (user, roots) = user(dir.path());
    let db = scribe_db(dir.path());
    run(&db, Source::Cursor, &roots);
    let first = dump(&db);

    // Cursor touches its database (the window's state) without changing a conversation:
    // nothing is read into a message again.
    cursor_writes(
        &user,
        "INSERT INTO ItemTable VALUES ('workbench.view', '{}');",
    );
    let again = run(&db, Source::Cursor, &roots);
    assert_eq!(again.files_read, 1, "{again:?}");
    assert_eq!(
        (
            again.written.messages_inserted,
            again.written.messages_merged
        ),
        (0, 0),
        "{again:?}"
    );
    assert_same(&first, &dump(&db), "after an unrelated change");

    // Cursor settles the cancelled call after all (rewriting its message) and the
    // conversation grows by a reply with usage.
    let cancelled =
        "bubbleId:b7f3c2a1-5d4e-4f6a-9b8c-1e2d3f4a5b6c:3e5a1008-1c2d-4e3f-8a4b-5c6d7e8f9a0b";
    let new = "3e5a100a-1c2d-4e3f-8a4b-5c6d7e8f9a0b";
    cursor_writes(
        &user,
        &format!(
            r#"
            UPDATE cursorDiskKV SET value = json_set(CAST(value AS TEXT),
                '$.toolFormerData.status', 'completed',
                '$.toolFormerData.result', '{{"output":"bench: 1.2 ms"}}')
                WHERE key = '{cancelled}';
            INSERT INTO cursorDiskKV VALUES ('bubbleId:{AGENT}:{new}',
                '{{"_v":3,"type":2,"bubbleId":"{new}","text":"The bench ran: 1.2 ms.","createdAt":"2025-12-29T10:04:00.000Z","tokenCount":{{"inputTokens":100,"outputTokens":10}}}}');
            UPDATE cursorDiskKV SET value = json_set(CAST(value AS TEXT),
                '$.fullConversationHeadersOnly[#]', json('{{"bubbleId":"{new}","type":2}}'),
                '$.lastUpdatedAt', 1767002700000)
                WHERE key = 'composerData:{AGENT}';
            "#
        ),
    );
    let grown = run(&db, Source::Cursor, &roots);
    assert!(grown.malformed.is_empty(), "{grown:?}");
    assert_eq!(grown.written.messages_inserted, 1, "{grown:?}");
    let agent = session(&db, AGENT);
    assert_eq!((agent.tokens.input, agent.tokens.output), (37_362, 685));
    assert_eq!(agent.api_call_count, 3);
    assert_eq!(messages(&db, AGENT).len(), 11);
    let tools = tool_outcomes(&db, AGENT);
    assert_eq!(
        tools.last().unwrap(),
        &(
            "run_terminal_cmd".to_owned(),
            "completed".to_owned(),
            "bench: 1.2 ms".to_owned()
        )
    );
    // The other conversation, unchanged, was not read again.
    assert_eq!(texts(&db, CHAT).len(), 2);
    let settled = dump(&db);
    let repeat = run(&db, Source::Cursor, &roots);
    assert_eq!(repeat.written.messages_inserted, 0, "{repeat:?}");
    assert_same(&settled, &dump(&db), "read twice");
}

#[test]
fn a_cursor_record_that_is_not_json_is_reported_and_the_rest_imported() {
    let dir = tempfile::tempdir().unwrap();
    let (user, roots) = user(dir.path());
    cursor_writes(
        &user,
        &format!(
            "UPDATE cursorDiskKV SET value = '{{\"type\":2,' \
             WHERE key = 'bubbleId:{AGENT}:3e5a1005-1c2d-4e3f-8a4b-5c6d7e8f9a0b'; \
             INSERT INTO cursorDiskKV VALUES ('composerData:0bad', 'not json'); \
             INSERT INTO cursorDiskKV VALUES ('composerData:1bad', '[1, 2]');"
        ),
    );
    let db = scribe_db(dir.path());
    let s = run(&db, Source::Cursor, &roots);
    assert!(s.failed.is_empty(), "{s:?}");
    let errors: Vec<&str> = s.malformed.iter().map(|m| m.error.as_str()).collect();
    assert_eq!(errors.len(), 3, "{errors:?}");
    assert!(errors.iter().any(|e| e.starts_with("conversation 0bad:")));
    assert!(errors.contains(&"conversation 1bad is not an object"));
    assert!(
        errors
            .iter()
            .any(|e| e.starts_with("message 3e5a1005-1c2d-4e3f-8a4b-5c6d7e8f9a0b of"))
    );
    // The rest of the conversation, and the other one, are there.
    assert_eq!(messages(&db, AGENT).len(), 9);
    assert_eq!(texts(&db, CHAT).len(), 2);

    // A database that is not Cursor's fails alone, saying so.
    let other = dir.path().join("other.vscdb");
    rusqlite::Connection::open(&other)
        .unwrap()
        .execute_batch("CREATE TABLE t (x)")
        .unwrap();
    let s = run(&db, Source::Cursor, &[other]);
    assert_eq!(s.failed.len(), 1, "{s:?}");
    assert!(s.failed[0].error.contains("cursorDiskKV"), "{s:?}");
}

#[test]
fn a_cursor_database_from_before_its_conversations_imports_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let old = dir.path().join("User/globalStorage/state.vscdb");
    std::fs::create_dir_all(old.parent().unwrap()).unwrap();
    rusqlite::Connection::open(&old)
        .unwrap()
        .execute_batch(
            "CREATE TABLE ItemTable (key TEXT UNIQUE ON CONFLICT REPLACE, value BLOB); \
             INSERT INTO ItemTable VALUES ('workbench.panel.aichat.view.aichat.chatdata', '{}');",
        )
        .unwrap();
    let db = scribe_db(dir.path());
    let s = run(&db, Source::Cursor, &[dir.path().join("User")]);
    assert!(s.failed.is_empty() && s.malformed.is_empty(), "{s:?}");
    assert_eq!((s.files, s.written.sessions_created), (1, 0));
}
