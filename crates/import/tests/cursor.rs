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

use common::fixture_home::{CURSOR_CHATS, CURSOR_WORKSPACE, cursor_chats, cursor_user};
use common::*;
use scribe_import::{Source, sources};
use scribe_message::{Part, Role};

const AGENT: &str = "b7f3c2a1-5d4e-4f6a-9b8c-1e2d3f4a5b6c";
const CHAT: &str = "4a9e1f20-7c3b-4d8e-a1f6-2b5c8d9e0f13";
/// The command-line agent's conversations.
const CLI: &str = "9c2e4b7a-1d3f-4e5a-8b6c-0d1e2f3a4b5c";
const CLI_UNTITLED: &str = "5e6f7a8b-9c0d-4e1f-a2b3-c4d5e6f7a8b9";

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
            [home.join(".config/Cursor/User"), home.join(".cursor/chats")]
        );
        assert_eq!(
            importer.default_roots(&env(&home, &[("XDG_CONFIG_HOME", "/cfg")])),
            [
                PathBuf::from("/cfg/Cursor/User"),
                home.join(".cursor/chats")
            ]
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
    // `--watch` watches the editor's database, not the whole of its busy `User` folder.
    assert_eq!(importer.watch_root(&user), db);
    assert_eq!(importer.watch_root(user.parent().unwrap()), db);
    // A workspace's database is not the global one, and the editor's folder is not
    // searched for the agent's conversations.
    let mut found = Vec::new();
    importer
        .discover(&user.join("workspaceStorage"), &mut found)
        .unwrap();
    assert!(found.is_empty(), "{found:?}");
    std::fs::remove_file(&db).unwrap();
    importer.discover(&user, &mut found).unwrap();
    assert!(found.is_empty(), "{found:?}");

    // The command-line agent's conversations: from `~/.cursor`, its `chats` folder, a
    // workspace's folder, a conversation's, or the database itself.
    let dot_cursor = home.join(".cursor");
    cursor_chats(&dot_cursor.join("chats"));
    let stores: Vec<PathBuf> = CURSOR_CHATS
        .iter()
        .map(|(w, id, _)| dot_cursor.join("chats").join(w).join(id).join("store.db"))
        .collect();
    let (workspace, conversation, _) = CURSOR_CHATS[0];
    for (root, want) in [
        (dot_cursor.clone(), &stores[..]),
        (dot_cursor.join("chats"), &stores[..]),
        (dot_cursor.join("chats").join(workspace), &stores[..1]),
        (
            dot_cursor.join("chats").join(workspace).join(conversation),
            &stores[..1],
        ),
        (stores[1].clone(), &stores[1..]),
    ] {
        let mut found = Vec::new();
        importer.discover(&root, &mut found).unwrap();
        assert_eq!(found, want, "from {}", root.display());
    }
    assert_eq!(
        importer.watch_root(&dot_cursor.join("chats")),
        dot_cursor.join("chats")
    );
}

/// The command-line agent's `chats` folder in a fresh home under `dir`.
fn chats(dir: &Path) -> PathBuf {
    let chats = dir.join("home/.cursor/chats");
    cursor_chats(&chats);
    chats
}

#[test]
fn a_cursor_agent_conversation_keeps_its_words_calls_and_folder() {
    let dir = tempfile::tempdir().unwrap();
    let chats = chats(dir.path());
    let db = scribe_db(dir.path());
    let s = run(&db, Source::Cursor, std::slice::from_ref(&chats));
    assert!(s.failed.is_empty() && s.malformed.is_empty(), "{s:?}");
    assert_eq!(s.files, 2);
    // Cursor's system prompt and the context it adds are not the user's words.
    assert_eq!(s.skipped.get("message:system"), Some(&1), "{s:?}");
    assert_eq!(s.skipped.get("message:context"), Some(&1), "{s:?}");

    let cli = session(&db, CLI);
    assert_eq!(cli.source, "cursor");
    assert_eq!(cli.title.as_deref(), Some("Why cargo build fails"));
    assert_eq!(cli.directory.as_deref(), Some("/home/dev/shop"));
    assert_eq!(cli.model.as_deref(), Some("claude-4.5-opus-high-thinking"));
    assert!(!cli.usage_recorded(), "it keeps no usage: {cli:?}");
    assert_eq!(
        cli.created_at,
        scribe_import::time::parse("2026-01-05T08:00:00Z").unwrap()
    );
    // The same words twice are one blob, and two messages; a draft outside the
    // conversation's tree is not read.
    assert_eq!(
        texts(&db, CLI),
        [
            (
                Role::User,
                "Why does `cargo build` fail in the shop crate?".into(),
                false
            ),
            (Role::Assistant, "Let me run the build.".into(), false),
            (
                Role::Assistant,
                "`serde` is missing from `Cargo.toml`: add `serde = \"1\"` under \
                 `[dependencies]`."
                    .into(),
                false
            ),
            (Role::User, "continue".into(), false),
            (Role::Assistant, "Done.".into(), false),
            (Role::User, "continue".into(), false),
            (Role::Assistant, "Done.".into(), false),
        ]
    );
    assert_eq!(
        tool_outcomes(&db, CLI),
        [
            (
                "Shell".into(),
                "completed".into(),
                "error[E0433]: failed to resolve: use of undeclared crate `serde`".into()
            ),
            (
                "StrReplace".into(),
                "error".into(),
                "The user rejected the edit.".into()
            ),
        ]
    );
    let replies = messages(&db, CLI);
    let reasoning: Vec<(String, Option<String>)> = replies
        .iter()
        .flat_map(|m| &m.parts)
        .filter_map(|p| match &p.part {
            Part::Reasoning(r) => Some((r.text.clone(), r.signature.clone())),
            _ => None,
        })
        .collect();
    assert_eq!(
        reasoning,
        [
            (
                "The build output will say which crate is missing.".to_owned(),
                Some("sig-cli-1".to_owned())
            ),
            // Redacted: kept as it came, in the part's metadata.
            (String::new(), None),
        ]
    );
    assert!(
        replies
            .iter()
            .filter(|m| m.role == Role::Assistant)
            .all(|m| m.model.as_deref() == Some("claude-4.5-opus-high-thinking"))
    );

    // Cursor's placeholder is no title; a reply kept after a node's children is read.
    let untitled = session(&db, CLI_UNTITLED);
    assert_eq!(untitled.title, None);
    assert_eq!(untitled.directory, None);
    assert_eq!(
        texts(&db, CLI_UNTITLED),
        [
            (Role::User, "say hi".into(), false),
            (Role::Assistant, "Hi.".into(), false)
        ]
    );
    assert_eq!(
        messages(&db, CLI_UNTITLED)[1].model.as_deref(),
        Some("gpt-5")
    );
}

/// A blob id for `data`: 64 hex digits that differ with it (Cursor's are its SHA-256;
/// the importer only follows them).
fn blob_id(data: &[u8]) -> String {
    use std::hash::{Hash, Hasher};
    (0..4u8)
        .map(|seed| {
            let mut h = std::collections::hash_map::DefaultHasher::new();
            (seed, data).hash(&mut h);
            format!("{:016x}", h.finish())
        })
        .collect()
}

/// `hex` (pairs of hex digits) as bytes.
fn unhex(hex: &str) -> Vec<u8> {
    (0..hex.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&hex[i..i + 2], 16).unwrap())
        .collect()
}

/// The agent's record of its conversation at `store` (`meta` `0`, hex-encoded JSON).
fn record(conn: &rusqlite::Connection) -> serde_json::Value {
    let hex: String = conn
        .query_row("SELECT value FROM meta WHERE key = '0'", [], |r| r.get(0))
        .unwrap();
    serde_json::from_slice(&unhex(&hex)).unwrap()
}

/// Writes `meta` as the agent's record of its conversation, as Cursor encodes it.
fn set_record(conn: &rusqlite::Connection, meta: &serde_json::Value) {
    let hex: String = meta
        .to_string()
        .bytes()
        .map(|b| format!("{b:02x}"))
        .collect();
    conn.execute("UPDATE meta SET value = ?1 WHERE key = '0'", [hex])
        .unwrap();
}

/// Appends `message` to the agent's conversation at `store` as Cursor does: a new blob,
/// and a new root listing the old root's children and it.
fn agent_says(store: &Path, message: &str) {
    let conn = rusqlite::Connection::open(store).unwrap();
    let mut meta = record(&conn);
    let root = meta["latestRootBlobId"].as_str().unwrap().to_owned();
    let old: Vec<u8> = conn
        .query_row("SELECT data FROM blobs WHERE id = ?1", [&root], |r| {
            r.get(0)
        })
        .unwrap();
    let id = blob_id(message.as_bytes());
    let mut node = old;
    node.extend([0x0a, 0x20]);
    node.extend(unhex(&id));
    let new_root = blob_id(&node);
    conn.execute(
        "INSERT OR IGNORE INTO blobs VALUES (?1, ?2)",
        rusqlite::params![id, message.as_bytes()],
    )
    .unwrap();
    conn.execute(
        "INSERT INTO blobs VALUES (?1, ?2)",
        rusqlite::params![new_root, node],
    )
    .unwrap();
    meta["latestRootBlobId"] = new_root.into();
    set_record(&conn, &meta);
}

#[test]
fn a_grown_cursor_agent_conversation_is_read_again_storing_nothing_twice() {
    let dir = tempfile::tempdir().unwrap();
    let chats = chats(dir.path());
    let db = scribe_db(dir.path());
    run(&db, Source::Cursor, std::slice::from_ref(&chats));
    let (workspace, id, _) = CURSOR_CHATS[0];
    let store = chats.join(workspace).join(id).join("store.db");
    agent_says(
        &store,
        r#"{"role":"user","content":[{"type":"text","text":"<user_query>\nship it\n</user_query>"}]}"#,
    );
    agent_says(
        &store,
        r#"{"id":"1","role":"assistant","content":[{"type":"text","text":"Shipped."}]}"#,
    );
    let grown = run(&db, Source::Cursor, std::slice::from_ref(&chats));
    assert!(grown.malformed.is_empty(), "{grown:?}");
    assert_eq!(grown.written.messages_inserted, 2, "{grown:?}");
    let said = texts(&db, CLI);
    assert_eq!(said.len(), 9);
    assert_eq!(said[7], (Role::User, "ship it".into(), false));
    assert_eq!(said[8], (Role::Assistant, "Shipped.".into(), false));
    let settled = dump(&db);
    let again = run(&db, Source::Cursor, std::slice::from_ref(&chats));
    assert_eq!(again.written.messages_inserted, 0, "{again:?}");
    assert_same(&settled, &dump(&db), "read twice");
}

#[test]
fn a_cursor_agent_tree_that_holds_itself_is_reported_not_followed_forever() {
    let dir = tempfile::tempdir().unwrap();
    let chats = chats(dir.path());
    let (workspace, id, _) = CURSOR_CHATS[1];
    let store = chats.join(workspace).join(id).join("store.db");
    let conn = rusqlite::Connection::open(&store).unwrap();
    // A node whose child is itself (no such hash exists; a damaged file can say so).
    let me = "ab".repeat(32);
    let mut node: Vec<u8> = vec![0x0a, 0x20];
    node.extend([0xab_u8; 32]);
    conn.execute(
        "INSERT INTO blobs VALUES (?1, ?2)",
        rusqlite::params![me, node],
    )
    .unwrap();
    set_record(
        &conn,
        &serde_json::json!({"agentId": id, "latestRootBlobId": me, "createdAt": 1}),
    );
    drop(conn);
    let db = scribe_db(dir.path());
    let s = run(&db, Source::Cursor, std::slice::from_ref(&chats));
    assert!(s.failed.is_empty(), "{s:?}");
    assert_eq!(s.malformed.len(), 1, "{s:?}");
    assert!(s.malformed[0].error.contains("is part of itself"), "{s:?}");
    // The other conversation is imported whole.
    assert_eq!(texts(&db, CLI).len(), 7);
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

    // An older conversation keeps its messages inline and no name; its tokens are not
    // counted, but Cursor's record of what it cost (its `usageData`) is its cost, reported,
    // and its requests its model calls.
    let chat = session(&db, CHAT);
    assert_eq!(chat.title, None);
    assert_eq!(chat.directory, None);
    assert_eq!(chat.model.as_deref(), Some("gpt-4.1"));
    assert_eq!(chat.cost_status.as_deref(), Some("reported"));
    assert_eq!(chat.actual_cost_usd, Some(0.04));
    assert_eq!((chat.api_call_count, chat.tokens.total()), (1, 0));
    assert!(
        common::messages(&db, CHAT)
            .iter()
            .all(|m| m.usage.total() == 0)
    );
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
    let bytes = std::fs::read(global(&user)).unwrap();
    let db = scribe_db(dir.path());
    import_read_only(&db, Source::Cursor, &roots, &user);
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

#[test]
fn a_cursor_agent_tree_that_lists_its_blobs_over_and_over_is_cut_short() {
    let dir = tempfile::tempdir().unwrap();
    let chats = chats(dir.path());
    let (workspace, id, _) = CURSOR_CHATS[1];
    let store = chats.join(workspace).join(id).join("store.db");
    let conn = rusqlite::Connection::open(&store).unwrap();
    // Forty nodes, each listing the next twice: 2^40 paths down to one message.
    let hex = |n: u64| format!("{n:064x}");
    conn.execute(
        "INSERT INTO blobs VALUES (?1, ?2)",
        rusqlite::params![
            hex(1000),
            br#"{"role":"user","content":"<user_query>again</user_query>"}"#.to_vec()
        ],
    )
    .unwrap();
    for n in 0..40u64 {
        let child = if n == 39 { 1000 } else { n + 1 };
        let bytes = unhex(&hex(child));
        let mut node: Vec<u8> = Vec::new();
        for _ in 0..2 {
            node.extend([0x0a_u8, 0x20]);
            node.extend(&bytes);
        }
        conn.execute(
            "INSERT INTO blobs VALUES (?1, ?2)",
            rusqlite::params![hex(n), node],
        )
        .unwrap();
    }
    set_record(
        &conn,
        &serde_json::json!({"agentId": id, "latestRootBlobId": hex(0), "createdAt": 1}),
    );
    drop(conn);
    let db = scribe_db(dir.path());
    let s = run(&db, Source::Cursor, std::slice::from_ref(&chats));
    assert_eq!(s.malformed.len(), 1, "{s:?}");
    // Cut short after a few visits per blob, rather than walked 2^40 times.
    assert!(s.malformed[0].error.contains("too often"), "{s:?}");
    assert_eq!(texts(&db, CLI).len(), 7);
}

#[test]
fn a_cursor_conversation_without_a_start_keeps_the_one_its_first_import_gave_it() {
    let dir = tempfile::tempdir().unwrap();
    let (user, roots) = user(dir.path());
    // An older conversation whose record says neither when it began nor when it changed:
    // its messages carry no time either.
    cursor_writes(
        &user,
        &format!(
            "UPDATE cursorDiskKV SET value = json_remove(CAST(value AS TEXT), '$.createdAt', \
             '$.lastUpdatedAt') WHERE key = 'composerData:{CHAT}';"
        ),
    );
    let db = scribe_db(dir.path());
    run(&db, Source::Cursor, &roots);
    let started = session(&db, CHAT).created_at;
    let ids: Vec<String> = messages(&db, CHAT).into_iter().map(|m| m.id).collect();
    // Later the file changes (another conversation, the window's state) and this one is
    // rewritten: it is read again, and its messages are the same ones.
    std::thread::sleep(std::time::Duration::from_millis(20));
    cursor_writes(
        &user,
        &format!(
            "UPDATE cursorDiskKV SET value = json_set(CAST(value AS TEXT), '$.status', 'none') \
             WHERE key = 'composerData:{CHAT}'; \
             INSERT INTO ItemTable VALUES ('workbench.view', '{{}}');"
        ),
    );
    let again = run(&db, Source::Cursor, &roots);
    assert!(again.malformed.is_empty(), "{again:?}");
    assert_eq!(again.written.messages_inserted, 0, "{again:?}");
    assert_eq!(session(&db, CHAT).created_at, started);
    let after: Vec<String> = messages(&db, CHAT).into_iter().map(|m| m.id).collect();
    assert_eq!(after, ids);
}

#[test]
fn a_cursor_agent_chat_not_recorded_yet_imports_nothing_and_a_bad_record_is_reported() {
    let dir = tempfile::tempdir().unwrap();
    let chats = chats(dir.path());
    let store = |n: usize| {
        let (workspace, id, _) = CURSOR_CHATS[n];
        chats.join(workspace).join(id).join("store.db")
    };
    // A chat opened but not recorded (no record under `0` yet), and one whose record is
    // neither hex nor JSON.
    let set = |n: usize, sql: &str| {
        rusqlite::Connection::open(store(n))
            .unwrap()
            .execute_batch(sql)
            .unwrap();
    };
    set(0, "UPDATE meta SET value = NULL WHERE key = '0'");
    set(1, "UPDATE meta SET value = 'zz' WHERE key = '0'");
    let db = scribe_db(dir.path());
    let s = run(&db, Source::Cursor, std::slice::from_ref(&chats));
    assert!(s.failed.is_empty(), "{s:?}");
    assert_eq!(s.skipped.get("conversation:empty"), Some(&1), "{s:?}");
    assert_eq!(s.malformed.len(), 1, "{s:?}");
    assert!(s.malformed[0].error.contains("is not JSON"), "{s:?}");
    assert!(sessions(&db).is_empty());
}
