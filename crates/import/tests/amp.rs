//! Amp: thread files found where Amp (and its editor extension's earlier builds) keep
//! them, read into faithful sessions (the user's text and images, replies with reasoning
//! and tool calls, each call settled by its run: done, failed, refused by the user; a
//! cancelled reply; a summary), each reply's usage with what the ledger billed, a title
//! generation's usage as a title session under its thread, and read again whole when Amp
//! rewrites them without storing anything twice.
//!
//! Fixtures (`fixtures/amp/threads`): two threads written for Scribe after the format
//! ccusage and cross_agent_session_resumer read (fixtures/SOURCES.md). Their token totals
//! and costs equal ccusage's (`fixtures.rs`).

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::path::PathBuf;

use common::*;
use scribe_import::{Source, sources};
use scribe_message::{FinishReason, Part, Role};
use scribe_session::SessionKind;

const LOGIN: &str = "T-3f6c2a1e-8b4d-4e7a-9c15-2d8e0b7f4a63";
const BILLING: &str = "T-9a1d7c55-0e3b-4f28-b6a4-71c2e8d05f19";

#[test]
fn amp_threads_are_found_where_amp_keeps_them() {
    let dir = tempfile::tempdir().unwrap();
    let home = dir.path().join("home");
    let roots =
        |vars: &[(&str, &str)]| sources::importer(Source::Amp).default_roots(&env(&home, vars));
    assert_eq!(roots(&[]), [home.join(".local/share/amp/threads")]);
    assert_eq!(
        roots(&[("XDG_DATA_HOME", "/srv/data")]),
        [PathBuf::from("/srv/data/amp/threads")]
    );
    // ccusage's override: a list of Amp data folders, each holding `threads`.
    assert_eq!(
        roots(&[("AMP_DATA_DIR", "/a, /b")]),
        [PathBuf::from("/a/threads"), PathBuf::from("/b/threads")]
    );
    // The editor extension's earlier storage, when it exists, beside Amp's own.
    if cfg!(target_os = "linux") {
        let legacy = home.join(".config/Code/User/globalStorage/sourcegraph.amp/threads3");
        std::fs::create_dir_all(&legacy).unwrap();
        assert_eq!(roots(&[]), std::slice::from_ref(&legacy));
        copy("amp/threads", &home.join(".local/share/amp/threads"));
        assert_eq!(
            roots(&[]),
            [home.join(".local/share/amp/threads"), legacy.clone()]
        );
        // A thread found in either is imported.
        copy(
            &format!("amp/threads/{BILLING}.json"),
            &legacy.join("T-0d2b6e1f-1c3a-4b5d-8e7f-9a0b1c2d3e4f.json"),
        );
        let db = scribe_db(dir.path());
        let s = run(&db, Source::Amp, &roots(&[]));
        assert_eq!((s.files, s.written.sessions_created), (3, 3), "{s:?}");
    }
}

#[test]
fn an_amp_thread_keeps_its_messages_calls_usage_and_title_generation() {
    let dir = tempfile::tempdir().unwrap();
    let threads = dir.path().join("amp/threads");
    copy("amp/threads", &threads);
    let db = scribe_db(dir.path());
    let s = run(&db, Source::Amp, std::slice::from_ref(&threads));
    assert!(s.failed.is_empty() && s.malformed.is_empty(), "{s:?}");
    assert_eq!(s.written.sessions_created, 3);

    let login = session(&db, LOGIN);
    assert_eq!(login.source, "amp");
    assert_eq!(login.title.as_deref(), Some("Fix flaky login test"));
    assert_eq!(login.directory.as_deref(), Some("/home/dev/src/web app"));
    assert_eq!(login.model.as_deref(), Some("claude-sonnet-4-5-20250929"));
    let msgs = messages(&db, LOGIN);
    let said: Vec<(Role, String)> = msgs
        .iter()
        .flat_map(|m| {
            m.parts.iter().filter_map(move |p| match &p.part {
                Part::Text(t) => Some((m.role, t.text.clone())),
                _ => None,
            })
        })
        .collect();
    assert_eq!(
        said,
        [
            (
                Role::User,
                "The login test fails about one run in five. Find out why and fix it.".into()
            ),
            (Role::Assistant, "Let me read the test first.".into()),
            (
                Role::Assistant,
                "The URL check waits only 500 ms. Let me confirm by repeating the test.".into()
            ),
            (
                Role::User,
                "Don't raise the timeout; wait for the sign-in request to finish instead.".into()
            ),
            (
                Role::Assistant,
                "Fixed: the test now waits for the sign-in request before it checks the URL, so a slow response no longer fails it."
                    .into()
            ),
        ]
    );
    // The screenshot the user pasted, with its type.
    match &msgs[0].parts[1].part {
        Part::File(f) => assert_eq!(f.mime, "image/png"),
        other => panic!("{other:?}"),
    }
    match &msgs[1].parts[0].part {
        Part::Reasoning(r) => assert_eq!(r.signature.as_deref(), Some("EsYBCkgIBxABGAIiQ")),
        other => panic!("{other:?}"),
    }
    let outcomes = tool_outcomes(&db, LOGIN);
    assert_eq!(outcomes.len(), 4);
    assert_eq!(outcomes[0].0, "Read");
    assert!(
        outcomes[0]
            .2
            .contains("toHaveURL('/home', { timeout: 500 })"),
        "a read file's content: {:?}",
        outcomes[0]
    );
    assert_eq!(
        outcomes[1],
        (
            "Bash".into(),
            "completed".into(),
            "8 passed, 2 failed: Timed out 500ms waiting for URL /home".into()
        )
    );
    // The user refused the first edit: it failed, saying so.
    assert_eq!(
        outcomes[2],
        (
            "edit_file".into(),
            "error".into(),
            "rejected-by-user".into()
        )
    );
    assert_eq!(outcomes[3].1, "completed");
    assert!(
        outcomes[3].2.starts_with("-  await page.click"),
        "{outcomes:?}"
    );

    // Each reply's usage: the ledger's input and output, the reply's cache counts.
    let replies: Vec<_> = msgs.iter().filter(|m| m.role == Role::Assistant).collect();
    assert_eq!(replies.len(), 5);
    let first = replies[0].usage;
    assert_eq!(
        (
            first.input,
            first.output,
            first.cache_write,
            first.cache_read
        ),
        (12, 180, 4_200, 9_000)
    );
    assert_eq!(replies[0].finish_reason, Some(FinishReason::ToolUse));
    assert_eq!(replies[4].finish_reason, Some(FinishReason::EndTurn));
    assert_eq!(login.api_call_count, 5);
    assert_eq!(login.cost_status.as_deref(), Some("estimated"));

    // The title generation the ledger billed, which no message carries: a title session
    // under the thread, with its own model.
    let title = session(
        &db,
        "T-3f6c2a1e-8b4d-4e7a-9c15-2d8e0b7f4a63:title-generation:claude-haiku-4-5-20251001",
    );
    assert_eq!(
        (title.kind, title.parent_session_id.as_deref()),
        (SessionKind::Title, Some(LOGIN))
    );
    assert_eq!(title.model.as_deref(), Some("claude-haiku-4-5-20251001"));
    assert_eq!(
        (
            title.tokens.input,
            title.tokens.output,
            title.api_call_count
        ),
        (350, 12, 1)
    );
    assert!(title.estimated_cost_usd > 0.0);
}

#[test]
fn a_thread_without_a_ledger_keeps_a_cancelled_reply_a_failed_call_and_its_summary() {
    let dir = tempfile::tempdir().unwrap();
    let threads = dir.path().join("amp/threads");
    copy("amp/threads", &threads);
    let db = scribe_db(dir.path());
    run(&db, Source::Amp, std::slice::from_ref(&threads));

    let billing = session(&db, BILLING);
    assert_eq!(billing.directory.as_deref(), Some("/home/dev/billing"));
    assert_eq!(billing.model.as_deref(), Some("claude-opus-4-5-20251101"));
    let msgs = messages(&db, BILLING);
    // The reply the user stopped keeps what it said, its usage, and why it ended.
    let stopped = &msgs[1];
    assert_eq!(stopped.error.as_ref().unwrap()["type"], "cancelled");
    assert_eq!(
        (stopped.usage.input, stopped.usage.output),
        (900, 15),
        "usage of a cancelled reply was spent"
    );
    assert_eq!(
        tool_outcomes(&db, BILLING),
        [(
            "Bash".into(),
            "error".into(),
            "fatal: not a git repository (or any of the parent directories): .git".into()
        )]
    );
    let summary = msgs.iter().find(|m| m.is_summary).unwrap();
    assert!(matches!(summary.parts[0].part, Part::Compaction(_)));
    assert_eq!(billing.api_call_count, 3);
}

#[test]
fn a_rewritten_thread_is_read_again_and_nothing_is_stored_twice() {
    let dir = tempfile::tempdir().unwrap();
    let threads = dir.path().join("amp/threads");
    copy("amp/threads", &threads);
    let file = threads.join(format!("{BILLING}.json"));
    let original = std::fs::read(&file).unwrap();
    let db = scribe_db(dir.path());
    run(&db, Source::Amp, std::slice::from_ref(&threads));
    assert_eq!(
        std::fs::read(&file).unwrap(),
        original,
        "the file is only read"
    );
    let before = dump(&db);
    let again = run(&db, Source::Amp, std::slice::from_ref(&threads));
    assert_eq!(again.files_unchanged, 2, "{again:?}");
    assert_same(&dump(&db), &before, "unchanged files");

    // Amp rewrites the whole file as the thread goes on.
    let mut doc: serde_json::Value = serde_json::from_slice(&original).unwrap();
    let list = doc["messages"].as_array_mut().unwrap();
    list.push(serde_json::json!({
        "role": "user", "messageId": 7,
        "content": [{"type": "text", "text": "I opened it from the repository now."}],
        "meta": {"sentAt": 1_767_700_060_000_i64}
    }));
    list.push(serde_json::json!({
        "role": "assistant", "messageId": 8,
        "content": [{"type": "text", "text": "Two invoice changes this week: rounding and the PDF footer."}],
        "state": {"type": "complete", "stopReason": "end_turn"},
        "usage": {"model": "claude-opus-4-5-20251101", "inputTokens": 80, "outputTokens": 30,
                  "cacheReadInputTokens": 2_500, "timestamp": "2026-01-06T12:01:05.000Z"}
    }));
    std::fs::write(&file, serde_json::to_vec_pretty(&doc).unwrap()).unwrap();
    let grown = run(&db, Source::Amp, std::slice::from_ref(&threads));
    assert!(grown.failed.is_empty(), "{grown:?}");
    assert_eq!(grown.written.messages_inserted, 2, "{grown:?}");
    assert_eq!(session(&db, BILLING).api_call_count, 4);
}

#[test]
fn a_broken_thread_file_is_reported_and_other_json_is_left_alone() {
    let dir = tempfile::tempdir().unwrap();
    let threads = dir.path().join("amp/threads");
    copy("amp/threads", &threads);
    // A file cut short (Amp killed while writing), and a JSON file that is no thread.
    std::fs::write(
        threads.join("T-cut.json"),
        r#"{"v":3,"id":"T-cut","messages":[{"ro"#,
    )
    .unwrap();
    std::fs::write(threads.join("index.json"), r#"{"threads":["T-a","T-b"]}"#).unwrap();
    let db = scribe_db(dir.path());
    let s = run(&db, Source::Amp, std::slice::from_ref(&threads));
    assert_eq!(s.failed.len(), 1, "{s:?}");
    assert!(s.failed[0].path.ends_with("T-cut.json"), "{s:?}");
    assert_eq!(s.skipped.get("(not a thread)"), Some(&1), "{s:?}");
    // The good threads are all there.
    assert_eq!(s.written.sessions_created, 3, "{s:?}");
}

/// The session points at its newest summary, whichever file is read last: an older copy
/// of a thread (the editor extension's, read after Amp's own) with an older summary of
/// its own leaves the pointer at the newer one.
#[test]
fn an_older_copy_of_a_thread_leaves_its_newest_summary_in_place() {
    let dir = tempfile::tempdir().unwrap();
    let newer = dir.path().join("amp/threads");
    copy("amp/threads", &newer);
    let older = dir.path().join("ext/threads3");
    std::fs::create_dir_all(&older).unwrap();
    let mut doc: serde_json::Value =
        serde_json::from_slice(&std::fs::read(newer.join(format!("{BILLING}.json"))).unwrap())
            .unwrap();
    let list = doc["messages"].as_array_mut().unwrap();
    list.truncate(2);
    list.push(serde_json::json!({
        "role": "info", "messageId": 40,
        "content": [{"type": "summary", "summary": {"type": "message", "summary": "An earlier summary."}}],
        "meta": {"sentAt": 1_767_700_005_000_i64}
    }));
    std::fs::write(
        older.join(format!("{BILLING}.json")),
        serde_json::to_vec(&doc).unwrap(),
    )
    .unwrap();
    let db = scribe_db(dir.path());
    run(&db, Source::Amp, &[newer]);
    run(&db, Source::Amp, &[older]);
    let msgs = messages(&db, BILLING);
    let summaries: Vec<_> = msgs.iter().filter(|m| m.is_summary).collect();
    assert_eq!(summaries.len(), 2);
    let newest = summaries.iter().max_by_key(|m| m.created_at).unwrap();
    assert_eq!(
        session(&db, BILLING).summary_message_id.as_deref(),
        Some(newest.id.as_str())
    );
}
