//! Zed: the agent panel's threads found where Zed keeps them, both agents' thread formats
//! read into faithful sessions (the user's words apart from what they attached, reasoning,
//! tool calls settled by their results, the thread's usage and cost, its folder and start),
//! Zed's database never changed, and a thread that grows read again storing nothing twice.
//!
//! Fixtures (`fixtures/zed`): a dump authored for Scribe after Zed's own types
//! (fixtures/SOURCES.md).

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::path::{Path, PathBuf};

use common::*;
use scribe_import::{Source, sources};
use scribe_message::{Part, Role};

/// A thread of Zed's second agent (stored zstd-compressed).
const THREAD: &str = "5f3c1a2e-8b7d-4c6e-9a0f-1b2c3d4e5f60";
/// A thread of the first agent (stored as JSON).
const LEGACY: &str = "0c9d8e7f-6a5b-4c3d-8e2f-1a0b9c8d7e6f";

/// Zed's threads folder in a fresh home under `dir`: (its database, the import's roots).
fn threads(dir: &Path) -> (PathBuf, Vec<PathBuf>) {
    let home = dir.join("home");
    let db = home.join(".local/share/zed/threads/threads.db");
    build_db("zed/threads.sql", &db);
    let roots = sources::importer(Source::Zed).default_roots(&env(&home, &[]));
    (db, roots)
}

#[test]
fn zed_threads_are_found_in_its_data_folder() {
    let dir = tempfile::tempdir().unwrap();
    let home = dir.path().join("home");
    let importer = sources::importer(Source::Zed);
    if cfg!(target_os = "linux") {
        assert_eq!(
            importer.default_roots(&env(&home, &[])),
            [home.join(".local/share/zed/threads")]
        );
        assert_eq!(
            importer.default_roots(&env(&home, &[("XDG_DATA_HOME", "/data")])),
            [PathBuf::from("/data/zed/threads")]
        );
    }
    let (db, _) = threads(dir.path());
    for root in [
        db.parent().unwrap().to_owned(),
        db.parent().unwrap().parent().unwrap().to_owned(),
        db.clone(),
    ] {
        let mut found = Vec::new();
        importer.discover(&root, &mut found).unwrap();
        assert_eq!(found, std::slice::from_ref(&db), "from {}", root.display());
    }
}

#[test]
fn a_zed_thread_keeps_its_words_calls_usage_and_folder() {
    let dir = tempfile::tempdir().unwrap();
    let (_, roots) = threads(dir.path());
    let db = scribe_db(dir.path());
    let s = run(&db, Source::Zed, &roots);
    assert!(s.failed.is_empty() && s.malformed.is_empty(), "{s:?}");
    // Zed going on after its tool-use limit, and a first-agent system message.
    assert_eq!(s.skipped.get("message:resume"), Some(&1), "{s:?}");
    assert_eq!(s.skipped.get("message:system"), Some(&1), "{s:?}");

    let thread = session(&db, THREAD);
    assert_eq!(thread.source, "zed");
    assert_eq!(thread.title.as_deref(), Some("Speed up the slug function"));
    assert_eq!(thread.directory.as_deref(), Some("/home/dev/blog"));
    assert_eq!(thread.model.as_deref(), Some("claude-sonnet-4-5"));
    assert_eq!(thread.billing_provider.as_deref(), Some("anthropic"));
    // It began when its project was first seen, and was last active when Zed saved it.
    let at = |t: &str| scribe_import::time::parse(t).unwrap();
    assert_eq!(thread.created_at, at("2026-02-10T14:20:00Z"));
    assert_eq!(thread.updated_at, at("2026-02-10T14:32:10.123Z"));
    // The thread's usage, as Anthropic counts it (cache apart), priced; the replies are
    // its model calls.
    assert_eq!(
        (
            thread.tokens.input,
            thread.tokens.output,
            thread.tokens.cache_write,
            thread.tokens.cache_read
        ),
        (1_520, 860, 12_000, 48_000)
    );
    assert_eq!(thread.api_call_count, 4);
    assert_eq!(thread.cost_status.as_deref(), Some("estimated"));
    let expected = (1_520.0 * 3.0 + 860.0 * 15.0 + 12_000.0 * 3.75 + 48_000.0 * 0.30) / 1e6;
    let cost = thread.estimated_cost_usd;
    assert!((cost - expected).abs() < 1e-9, "{cost}");

    let said = texts(&db, THREAD);
    assert_eq!(
        said[0],
        (
            Role::User,
            "`slugify` is slow on long titles. Can you make it faster? See ".into(),
            false
        )
    );
    // What the user attached is what the model was sent, not the user's words.
    assert!(
        said[1].2 && said[1].1.contains("pub fn slugify"),
        "{said:?}"
    );
    assert_eq!(
        said.iter()
            .filter(|t| !t.2)
            .map(|t| (t.0, t.1.as_str()))
            .skip(1)
            .collect::<Vec<_>>(),
        [
            (Role::Assistant, "Let me look at the benchmark first."),
            (
                Role::Assistant,
                "`slugify` now builds the slug in one pass (41.5 µs to 6.2 µs), but \
                 `keeps_digits` fails: digits were dropped. Want me to fix that too?"
            ),
            (Role::User, "Yes, and here is the failure I see:"),
            (Role::Assistant, "Fixed: digits are kept."),
        ]
    );
    assert_eq!(
        tool_outcomes(&db, THREAD),
        [
            (
                "terminal".into(),
                "completed".into(),
                "slugify/long   time: [41.2 µs 41.5 µs 41.9 µs]".into()
            ),
            (
                "edit_file".into(),
                "completed".into(),
                "Edited blog/src/slug.rs".into()
            ),
            (
                "terminal".into(),
                "error".into(),
                "test slug::tests::keeps_digits ... FAILED".into()
            ),
        ]
    );
    let parts: Vec<Part> = messages(&db, THREAD)
        .into_iter()
        .flat_map(|m| m.parts.into_iter().map(|p| p.part))
        .collect();
    let reasoning: Vec<(String, Option<String>)> = parts
        .iter()
        .filter_map(|p| match p {
            Part::Reasoning(r) => Some((r.text.clone(), r.signature.clone())),
            _ => None,
        })
        .collect();
    assert_eq!(
        reasoning,
        [
            (
                "It allocates per char; a single pass with capacity will do.".to_owned(),
                Some("sig-zed-1".to_owned())
            ),
            (String::new(), None),
        ]
    );
    assert!(
        parts
            .iter()
            .any(|p| matches!(p, Part::File(f) if f.mime == "image/png")),
        "the user's image"
    );
    // Usage is the thread's: no message carries any of its own.
    assert!(
        messages(&db, THREAD)
            .iter()
            .all(|m| m.usage.total() == 0 && m.created_at >= thread.created_at)
    );

    // The first agent's thread: segments, a call and its result, no folder.
    let legacy = session(&db, LEGACY);
    assert_eq!(legacy.title.as_deref(), Some("Explain the borrow error"));
    assert_eq!(legacy.directory, None);
    assert_eq!(legacy.model.as_deref(), Some("gpt-4.1"));
    assert_eq!(
        (
            legacy.tokens.input,
            legacy.tokens.output,
            legacy.api_call_count
        ),
        (3_000, 120, 2)
    );
    assert_eq!(
        texts(&db, LEGACY).iter().map(|t| t.0).collect::<Vec<_>>(),
        [Role::User, Role::Assistant, Role::Assistant]
    );
    assert_eq!(
        tool_outcomes(&db, LEGACY),
        [(
            "read_file".into(),
            "completed".into(),
            "fn get(&self, k: &K) -> Option<&V>".into()
        )]
    );
}

#[test]
fn zeds_database_is_read_without_being_changed() {
    let dir = tempfile::tempdir().unwrap();
    let (db_path, roots) = threads(dir.path());
    let folder = db_path.parent().unwrap();
    let db = scribe_db(dir.path());
    import_read_only(&db, Source::Zed, &roots, folder);
}

/// Replaces thread `id`'s stored JSON with `thread` (as Zed saves a thread whole), stored
/// as JSON, and moves its `updated_at`.
fn zed_saves(db: &Path, id: &str, thread: &serde_json::Value, updated_at: &str) {
    rusqlite::Connection::open(db)
        .unwrap()
        .execute(
            "UPDATE threads SET data_type = 'json', data = ?2, updated_at = ?3 WHERE id = ?1",
            rusqlite::params![id, thread.to_string().into_bytes(), updated_at],
        )
        .unwrap();
}

/// Thread `id` as Zed stored it.
fn stored_thread(db: &Path, id: &str) -> serde_json::Value {
    let conn = rusqlite::Connection::open(db).unwrap();
    let (kind, data): (String, Vec<u8>) = conn
        .query_row(
            "SELECT data_type, data FROM threads WHERE id = ?1",
            [id],
            |r| Ok((r.get(0)?, r.get(1)?)),
        )
        .unwrap();
    assert_eq!(kind, "json", "the legacy thread is stored as JSON");
    serde_json::from_slice(&data).unwrap()
}

#[test]
fn a_grown_zed_thread_is_read_again_storing_nothing_twice() {
    let dir = tempfile::tempdir().unwrap();
    let (db_path, roots) = threads(dir.path());
    let db = scribe_db(dir.path());
    // Zed rewrites nothing: nothing is read again.
    import_twice(&db, Source::Zed, &roots);

    // The user goes on in the first agent's thread; Zed saves it whole.
    let mut thread = stored_thread(&db_path, LEGACY);
    let messages = thread["messages"].as_array_mut().unwrap();
    messages.push(serde_json::json!({"id": 4, "role": "user", "segments": [{"type": "text", "text": "And with `entry`?"}], "tool_uses": [], "tool_results": []}));
    messages.push(serde_json::json!({"id": 5, "role": "assistant", "segments": [{"type": "text", "text": "`entry` borrows it mutably until you drop the entry."}], "tool_uses": [], "tool_results": []}));
    thread["cumulative_token_usage"] =
        serde_json::json!({"input_tokens": 4200, "output_tokens": 180});
    zed_saves(&db_path, LEGACY, &thread, "2025-06-02T09:20:00+00:00");
    let grown = run(&db, Source::Zed, &roots);
    assert!(grown.malformed.is_empty(), "{grown:?}");
    assert_eq!(grown.written.messages_inserted, 2, "{grown:?}");
    let legacy = session(&db, LEGACY);
    assert_eq!(
        (
            legacy.tokens.input,
            legacy.tokens.output,
            legacy.api_call_count
        ),
        (4_200, 180, 3)
    );
    assert_eq!(texts(&db, LEGACY).len(), 5);
    let settled = dump(&db);
    let repeat = run(&db, Source::Zed, &roots);
    assert_eq!(repeat.written.messages_inserted, 0, "{repeat:?}");
    assert_same(&settled, &dump(&db), "read twice");
}

#[test]
fn a_zed_thread_that_cannot_be_read_is_reported_and_the_rest_imported() {
    let dir = tempfile::tempdir().unwrap();
    let (db_path, roots) = threads(dir.path());
    rusqlite::Connection::open(&db_path)
        .unwrap()
        .execute_batch(
            "INSERT INTO threads VALUES ('bad-zstd', 't', '2026-01-01T00:00:00Z', 'zstd', X'00010203'); \
             INSERT INTO threads VALUES ('bad-kind', 't', '2026-01-01T00:00:00Z', 'gzip', X'00'); \
             INSERT INTO threads VALUES ('bad-json', 't', '2026-01-01T00:00:00Z', 'json', CAST('[1]' AS BLOB)); \
             INSERT INTO threads VALUES ('as-text', 't', '2026-01-01T00:00:00Z', 'json', \
               '{\"title\":\"kept as text\",\"messages\":[{\"User\":{\"id\":\"u\",\"content\":[{\"Text\":\"hi\"}]}}]}');",
        )
        .unwrap();
    let db = scribe_db(dir.path());
    let s = run(&db, Source::Zed, &roots);
    assert!(s.failed.is_empty(), "{s:?}");
    let errors: Vec<&str> = s.malformed.iter().map(|m| m.error.as_str()).collect();
    assert_eq!(errors.len(), 3, "{errors:?}");
    assert!(
        errors
            .iter()
            .any(|e| e.starts_with("thread bad-zstd: not zstd"))
    );
    assert!(errors.iter().any(|e| e.contains("\"gzip\"")));
    assert!(errors.contains(&"thread bad-json is not an object"));
    // A thread whose JSON is stored as text rather than bytes is read all the same.
    assert_eq!(sessions(&db).len(), 3);
    assert_eq!(
        session(&db, "as-text").title.as_deref(),
        Some("kept as text")
    );
}
