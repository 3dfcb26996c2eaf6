//! Mistral Vibe: sessions found where Vibe keeps them (both layouts: a folder per session,
//! and the single file of builds before 2.0), read into faithful sessions (the user's words,
//! what Vibe injected as synthetic, signed reasoning, tool calls settled by their results,
//! failed and skipped calls, the model, the folder, the title), a forked session and one
//! continued after `/compact` linked to their parent without its copied messages, each
//! session's usage its own (a continuation's stats run on from its parent's), Vibe's files
//! never changed, and a session that grows read again storing nothing twice.
//!
//! Fixtures (`fixtures/vibe`): sessions authored for Scribe after Vibe's own types
//! (fixtures/SOURCES.md).

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::path::{Path, PathBuf};

use common::*;
use scribe_import::{Source, sources};
use scribe_message::{Part, Role};
use scribe_session::SessionKind;

/// A session, the one continued from it after `/compact`, one forked from it, and a
/// pre-2.0 session file.
const FIRST: &str = "3f9a1c2e-5b7d-4e1f-9a2b-6c8d0e4f1a3b";
const CONTINUED: &str = "7b2d4e6f-1c3a-4b5d-8e9f-0a1b2c3d4e5f";
const FORKED: &str = "9e8d7c6b-5a4f-4e3d-8c2b-1a0f9e8d7c6b";
const LEGACY: &str = "c0ffee12-8a7b-4c6d-9e5f-1a2b3c4d5e6f";

/// Vibe's folder in a fresh home under `dir`: (its save folder, the import's roots).
fn saved(dir: &Path) -> (PathBuf, Vec<PathBuf>) {
    let home = dir.join("home");
    vibe_sessions(&home.join(".vibe"));
    let roots = sources::importer(Source::Vibe).default_roots(&env(&home, &[]));
    (home.join(".vibe/logs/session"), roots)
}

fn close(a: f64, b: f64) -> bool {
    (a - b).abs() < 1e-9
}

#[test]
fn vibe_sessions_are_found_where_vibe_keeps_them() {
    let dir = tempfile::tempdir().unwrap();
    let home = dir.path().join("home");
    let importer = sources::importer(Source::Vibe);
    // Neither exists: the first, so a report names where it looked.
    assert_eq!(
        importer.default_roots(&env(&home, &[])),
        [home.join(".vibe/logs/session")]
    );
    assert_eq!(
        importer.default_roots(&env(&home, &[("VIBE_HOME", "/v")])),
        [PathBuf::from("/v/logs/session")]
    );
    // Without ~/.vibe, newer builds keep it under the XDG config folder.
    let xdg = dir.path().join("config");
    std::fs::create_dir_all(xdg.join("vibe/logs/session")).unwrap();
    assert_eq!(
        importer.default_roots(&env(&home, &[("XDG_CONFIG_HOME", xdg.to_str().unwrap())])),
        [xdg.join("vibe/logs/session")]
    );
    let (folder, roots) = saved(dir.path());
    assert_eq!(roots, std::slice::from_ref(&folder));
    let expected = [
        folder.join("session_20251101_090000_c0ffee12.json"),
        folder.join("session_20251210_203409_3f9a1c2e/messages.jsonl"),
        folder.join("session_20251210_204512_7b2d4e6f/messages.jsonl"),
        folder.join("session_20251210_210003_9e8d7c6b/messages.jsonl"),
    ];
    for root in [folder.clone(), home.join(".vibe")] {
        let mut found = Vec::new();
        importer.discover(&root, &mut found).unwrap();
        assert_eq!(found, expected, "from {}", root.display());
    }
    let one = folder.join("session_20251210_203409_3f9a1c2e");
    let mut found = Vec::new();
    importer.discover(&one, &mut found).unwrap();
    assert_eq!(found, [one.join("messages.jsonl")]);
    assert_eq!(
        importer.companions(&one.join("messages.jsonl")),
        [one.join("meta.json")]
    );
}

#[test]
fn a_vibe_session_keeps_its_words_calls_usage_and_lineage() {
    let dir = tempfile::tempdir().unwrap();
    let (_, roots) = saved(dir.path());
    let db = scribe_db(dir.path());
    let s = run(&db, Source::Vibe, &roots);
    assert!(s.failed.is_empty() && s.malformed.is_empty(), "{s:?}");
    // The copies of the first session's messages its continuation and its fork open with.
    assert_eq!(s.skipped.get("replayed-parent-history"), Some(&9), "{s:?}");
    assert_eq!(s.skipped.get("message:system"), Some(&1), "{s:?}");

    let first = session(&db, FIRST);
    assert_eq!(first.source, "mistral-vibe");
    assert_eq!(first.title.as_deref(), Some("Fix the flaky retry test"));
    assert_eq!(first.directory.as_deref(), Some("/home/dev/client"));
    assert_eq!(first.model.as_deref(), Some("devstral-2512"));
    assert_eq!(first.created_at, 1_765_398_849_851);
    assert_eq!(first.updated_at, 1_765_399_315_120);
    assert_eq!(
        texts(&db, FIRST),
        [
            (
                Role::User,
                "The retry test in tests/test_client.py is flaky. Find out why and fix it."
                    .to_owned(),
                false
            ),
            (
                Role::Assistant,
                "Let me look at the test first.".to_owned(),
                false
            ),
            (
                Role::Assistant,
                "The test sleeps 100 ms and hopes three retries happened by then. I'll make \
                 it wait on the client instead."
                    .to_owned(),
                false
            ),
            (
                Role::User,
                "Use a fake clock instead of sleeping.".to_owned(),
                false
            ),
            (
                Role::Assistant,
                "Replaced the sleep with a fake clock; the test no longer depends on timing."
                    .to_owned(),
                false
            ),
            // What Vibe told the model in the user's place.
            (
                Role::User,
                "<vibe_warning>The user has manually updated the plan file. Here is the \
                 updated version -- use this as the source of truth for implementation:\n\n\
                 1. Fake clock in tests/test_client.py</vibe_warning>"
                    .to_owned(),
                true
            ),
            (
                Role::Assistant,
                "Noted: the plan is done.".to_owned(),
                false
            ),
        ]
    );
    assert_eq!(
        tool_outcomes(&db, FIRST),
        [
            (
                "read_file".into(),
                "completed".into(),
                "path: tests/test_client.py\ncontent: def test_retry():\n    client.start()\n    \
                 time.sleep(0.1)\n    assert client.calls == 3"
                    .into()
            ),
            (
                "bash".into(),
                "error".into(),
                "bash failed: Command exited with code 1: 1 failed in 0.31s".into()
            ),
            (
                "write_file".into(),
                "error".into(),
                "User skipped the tool call: use a fake clock instead.".into()
            ),
            (
                "search_replace".into(),
                "completed".into(),
                "file: tests/test_client.py\nblocks_applied: 1\nlines_changed: 1".into()
            ),
        ]
    );
    let stored = messages(&db, FIRST);
    let reasoning: Vec<(&str, Option<&str>)> = stored
        .iter()
        .flat_map(|m| m.parts.iter())
        .filter_map(|p| match &p.part {
            Part::Reasoning(r) => Some((r.text.as_str(), r.signature.as_deref())),
            _ => None,
        })
        .collect();
    assert_eq!(
        reasoning,
        [(
            "Flaky usually means timing. Read the test before guessing.",
            Some("sig-vibe-1")
        )]
    );
    assert!(
        stored
            .iter()
            .filter(|m| m.role == Role::Assistant)
            .all(|m| m.model.as_deref() == Some("devstral-2512"))
    );
    // The session's usage, its cost Vibe's own: 12,000 × $0.40 + 900 × $2.00 per million.
    assert_eq!((first.tokens.input, first.tokens.output), (12_000, 900));
    assert_eq!(first.api_call_count, 5);
    assert!(close(first.actual_cost_usd.unwrap(), 0.0066), "{first:?}");

    // Continued after /compact: the summary first, the copies of the parent's messages
    // left to it, and its own usage what its stats add to the parent's.
    let continued = session(&db, CONTINUED);
    assert_eq!(continued.kind, SessionKind::Continuation);
    assert_eq!(continued.parent_session_id.as_deref(), Some(FIRST));
    let said = texts(&db, CONTINUED);
    assert!(
        said[0].1.starts_with("Summary of the conversation so far:"),
        "{said:?}"
    );
    assert!(said[0].2, "the summary is Vibe's, not the user's");
    assert_eq!(
        said[1..]
            .iter()
            .map(|t| (t.0, t.1.as_str()))
            .collect::<Vec<_>>(),
        [
            (Role::User, "Now run the whole suite."),
            (Role::Assistant, "All 42 tests pass."),
        ]
    );
    let summary = messages(&db, CONTINUED)
        .into_iter()
        .find(|m| m.is_summary)
        .expect("the summary");
    assert_eq!(
        continued.summary_message_id.as_deref(),
        Some(summary.id.as_str())
    );
    assert_eq!(
        (continued.tokens.input, continued.tokens.output),
        (8_000, 600)
    );
    assert!(
        close(continued.actual_cost_usd.unwrap(), 0.0044),
        "{continued:?}"
    );
    assert_eq!(continued.api_call_count, 2);

    // Forked: its own messages only, its own stats (a fork starts them afresh), the title
    // the user gave it.
    let forked = session(&db, FORKED);
    assert_eq!(forked.kind, SessionKind::Fork);
    assert_eq!(forked.parent_session_id.as_deref(), Some(FIRST));
    assert_eq!(forked.title.as_deref(), Some("Retry decorator"));
    assert_eq!(
        texts(&db, FORKED)
            .into_iter()
            .map(|t| t.1)
            .collect::<Vec<_>>(),
        [
            "Try a retry decorator instead.",
            "Wrapped the call in a retry decorator with three attempts."
        ]
    );
    assert_eq!((forked.tokens.input, forked.tokens.output), (3_000, 200));
    assert!(close(forked.actual_cost_usd.unwrap(), 0.0016), "{forked:?}");
    // The parent's messages stay the parent's alone.
    assert_eq!(messages(&db, FIRST).len(), 8);

    // Before 2.0: one file, the model from its agent config, no prices Vibe knew (and
    // none Scribe has for the model): tokens, no cost.
    let legacy = session(&db, LEGACY);
    assert_eq!(legacy.model.as_deref(), Some("devstral-small-latest"));
    assert_eq!(legacy.directory.as_deref(), Some("/home/dev/blog"));
    assert_eq!(legacy.created_at, 1_761_987_600_123);
    assert_eq!((legacy.tokens.input, legacy.tokens.output), (4_000, 350));
    assert_eq!(legacy.actual_cost_usd, None);
    assert_eq!(texts(&db, LEGACY).len(), 2);
}

#[test]
fn vibes_files_are_read_without_being_changed() {
    let dir = tempfile::tempdir().unwrap();
    let (folder, roots) = saved(dir.path());
    let db = scribe_db(dir.path());
    import_read_only(&db, Source::Vibe, &roots, &folder);
}

#[test]
fn a_grown_vibe_session_is_read_again_storing_nothing_twice() {
    let dir = tempfile::tempdir().unwrap();
    let (folder, roots) = saved(dir.path());
    let db = scribe_db(dir.path());
    import_twice(&db, Source::Vibe, &roots);

    // Vibe appends a turn and rewrites the meta file with the stats grown.
    let one = folder.join("session_20251210_203409_3f9a1c2e");
    std::thread::sleep(std::time::Duration::from_millis(20));
    let mut log = std::fs::read_to_string(one.join("messages.jsonl")).unwrap();
    log.push_str(concat!(
        r#"{"role":"user","content":"Thanks!","injected":false,"message_id":"u-thanks"}"#,
        "\n",
        r#"{"role":"assistant","content":"Any time.","injected":false,"message_id":"a-thanks"}"#,
        "\n"
    ));
    std::fs::write(one.join("messages.jsonl"), log).unwrap();
    let meta_path = one.join("meta.json");
    let mut meta: serde_json::Value =
        serde_json::from_slice(&std::fs::read(&meta_path).unwrap()).unwrap();
    meta["stats"]["session_prompt_tokens"] = 13_000.into();
    meta["stats"]["session_completion_tokens"] = 950.into();
    meta["stats"]["session_cost"] = 0.0071.into();
    std::fs::write(&meta_path, meta.to_string()).unwrap();

    let grown = run(&db, Source::Vibe, &roots);
    assert!(
        grown.malformed.is_empty() && grown.failed.is_empty(),
        "{grown:?}"
    );
    assert_eq!(grown.written.messages_inserted, 2, "{grown:?}");
    let s = session(&db, FIRST);
    assert_eq!((s.tokens.input, s.tokens.output), (13_000, 950));
    assert!(close(s.actual_cost_usd.unwrap(), 0.0071), "{s:?}");
    let settled = dump(&db);
    let repeat = run(&db, Source::Vibe, &roots);
    assert_eq!(repeat.written.messages_inserted, 0, "{repeat:?}");
    assert_same(&settled, &dump(&db), "read twice");
}

#[test]
fn a_session_whose_meta_file_is_not_written_yet_waits_for_it() {
    let dir = tempfile::tempdir().unwrap();
    let (folder, roots) = saved(dir.path());
    let meta = folder.join("session_20251210_210003_9e8d7c6b/meta.json");
    let kept = std::fs::read(&meta).unwrap();
    std::fs::remove_file(&meta).unwrap();
    let db = scribe_db(dir.path());
    let s = run(&db, Source::Vibe, &roots);
    assert!(s.failed.is_empty() && s.malformed.is_empty(), "{s:?}");
    assert_eq!(s.skipped.get("session:meta-not-written"), Some(&1), "{s:?}");
    assert_eq!(sessions(&db).len(), 3);
    // Vibe writes it: the next import reads the session.
    std::fs::write(&meta, kept).unwrap();
    run(&db, Source::Vibe, &roots);
    assert_eq!(session(&db, FORKED).kind, SessionKind::Fork);
}

#[test]
fn a_bad_line_is_reported_and_a_file_that_is_no_session_fails_alone() {
    let dir = tempfile::tempdir().unwrap();
    let (folder, roots) = saved(dir.path());
    std::fs::write(folder.join("notes.json"), r#"{"todo": [1, 2]}"#).unwrap();
    let one = folder.join("session_20251210_203409_3f9a1c2e/messages.jsonl");
    let mut log = std::fs::read_to_string(&one).unwrap();
    log.insert_str(0, "{\"role\": \"user\", \"content\": \n");
    std::fs::write(&one, log).unwrap();
    let db = scribe_db(dir.path());
    let s = run(&db, Source::Vibe, &roots);
    let failed: Vec<&str> = s.failed.iter().map(|f| f.error.as_str()).collect();
    assert_eq!(failed.len(), 1, "{failed:?}");
    assert!(
        failed[0].contains("is not a Mistral Vibe session"),
        "{failed:?}"
    );
    assert_eq!(s.malformed.len(), 1, "{:?}", s.malformed);
    assert_eq!(s.malformed[0].line, Some(1));
    assert_eq!(sessions(&db).len(), 4);
    assert_eq!(texts(&db, FIRST).len(), 7);
}
