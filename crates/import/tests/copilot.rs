//! GitHub Copilot CLI: each session's event log found where Copilot keeps it, read into a
//! faithful session (replies with their reasoning and tool calls, the calls' results, a
//! compaction's summary, a sub-agent's task session), its per-model usage on the replies
//! of each model, and read again whole when it grows without storing anything twice.
//!
//! The fixtures (`fixtures/copilot/session-state`): one session written for Scribe after
//! the events github/copilot-sdk documents (fixtures/SOURCES.md), and one from
//! jazzyalex/agent-sessions. Their usage and costs equal ccusage's (`fixtures.rs`).

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::path::{Path, PathBuf};

use common::*;
use scribe_import::{Source, sources};
use scribe_message::{Part, Role, ToolState};
use scribe_session::SessionKind;

const WEBAPP: &str = "7c1e2a90-3b5d-4f61-9a2e-5d8c0b4f1e37";
const SMALL: &str = "copilot_stage0_small";

/// Copilot's session folder under `home`, with the fixtures' sessions.
fn copilot_home(home: &Path) -> PathBuf {
    let state = home.join(".copilot/session-state");
    copy("copilot/session-state", &state);
    state
}

#[test]
fn copilot_is_found_where_it_keeps_its_sessions() {
    let dir = tempfile::tempdir().unwrap();
    let home = dir.path().join("home");
    let roots =
        |vars: &[(&str, &str)]| sources::importer(Source::Copilot).default_roots(&env(&home, vars));
    assert_eq!(roots(&[]), [home.join(".copilot/session-state")]);
    assert_eq!(
        roots(&[("COPILOT_HOME", "/srv/copilot")]),
        [PathBuf::from("/srv/copilot/session-state")]
    );

    // The folder of every session (each in its folder, or a session's file lying there
    // as earlier builds wrote it), one session's folder, or its file.
    let state = copilot_home(&home);
    std::fs::write(state.join("legacy.jsonl"), "").unwrap();
    std::fs::write(state.join("notes.txt"), "").unwrap();
    let webapp = state.join(WEBAPP).join("events.jsonl");
    let small = state.join(SMALL).join("events.jsonl");
    let found = |root: &Path| {
        let mut out = Vec::new();
        sources::importer(Source::Copilot)
            .discover(root, &mut out)
            .unwrap();
        out
    };
    assert_eq!(
        found(&state),
        [webapp.clone(), small.clone(), state.join("legacy.jsonl")]
    );
    assert_eq!(found(&state.join(WEBAPP)), std::slice::from_ref(&webapp));
    assert_eq!(
        found(&home.join(".copilot")).len(),
        3,
        "from Copilot's home"
    );
    assert_eq!(found(&webapp), std::slice::from_ref(&webapp));
    assert!(found(&home).is_empty());
}

#[test]
fn a_copilot_session_keeps_its_replies_calls_summary_sub_agent_and_usage_per_model() {
    let dir = tempfile::tempdir().unwrap();
    let state = copilot_home(&dir.path().join("home"));
    let db = scribe_db(dir.path());
    let summary = run(&db, Source::Copilot, &[state]);
    assert!(
        summary.failed.is_empty() && summary.malformed.is_empty(),
        "{summary:?}"
    );
    assert_eq!(summary.files_read, 2);

    let webapp = session(&db, WEBAPP);
    assert_eq!(webapp.source, "copilot");
    assert_eq!(webapp.directory.as_deref(), Some("/home/me/webapp"));
    // Resumed after its shutdown: it has not ended.
    assert_eq!(webapp.title, None);
    let msgs = messages(&db, WEBAPP);
    let shape: Vec<(Role, Option<&str>, bool)> = msgs
        .iter()
        .map(|m| (m.role, m.model.as_deref(), m.is_summary))
        .collect();
    let sonnet = Some("claude-sonnet-4.5");
    let mini = Some("gpt-5-mini");
    assert_eq!(
        shape,
        [
            (Role::User, None, false),
            (Role::Assistant, sonnet, false),
            (Role::Assistant, sonnet, false),
            (Role::Assistant, sonnet, false),
            (Role::Assistant, None, true),
            (Role::User, None, false),
            (Role::Assistant, mini, false),
            (Role::Assistant, mini, false),
            (Role::User, None, false),
            (Role::Assistant, mini, false),
        ]
    );
    // The reasoning before a reply is its first part; the text typed is the user's
    // message, not what Copilot sent the model.
    assert!(
        matches!(&msgs[1].parts[0].part, Part::Reasoning(r) if r.text.starts_with("The test waits"))
    );
    assert!(
        matches!(&msgs[0].parts[0].part, Part::Text(t) if t.text == "Why does the login test time out?")
    );
    assert!(matches!(&msgs[4].parts[0].part, Part::Compaction(_)));
    assert_eq!(
        tool_outcomes(&db, WEBAPP),
        [
            (
                "view".into(),
                "completed".into(),
                "12: await page.waitForResponse('/api/login')".into()
            ),
            (
                "bash".into(),
                "error".into(),
                "Command timed out after 120 seconds".into()
            ),
            (
                "task".into(),
                "completed".into(),
                "The fix starts the mock server before the first test: it looks right.".into()
            ),
            // Made after the session was resumed, with no result yet: still running.
            ("bash".into(), "running".into(), String::new()),
        ]
    );

    // Each model's usage is on its last reply of the lifecycle; the reasoning and the
    // cache Copilot counts inside output and input are apart.
    let usage: Vec<(i64, i64, i64, i64, i64)> = msgs
        .iter()
        .filter(|m| !m.usage.is_zero())
        .map(|m| {
            let u = m.usage;
            (u.input, u.output, u.reasoning, u.cache_read, u.cache_write)
        })
        .collect();
    assert_eq!(
        usage,
        [
            (12_000, 1_300, 200, 30_000, 6_000),
            (5_000, 300, 100, 4_000, 0)
        ]
    );
    assert_eq!(webapp.api_call_count, 5);

    // The sub-agent's reply is in a task session the task call names.
    let children: Vec<_> = sessions(&db)
        .into_iter()
        .filter(|s| s.parent_session_id.as_deref() == Some(WEBAPP))
        .collect();
    let kinds: Vec<(SessionKind, Option<&str>)> = children
        .iter()
        .map(|s| (s.kind, s.model.as_deref()))
        .collect();
    assert_eq!(
        kinds,
        [
            (SessionKind::Task, Some("gpt-5-mini")),
            (SessionKind::Task, Some("claude-haiku-4.5"))
        ]
    );
    let agent = &children[0];
    assert_eq!(agent.title.as_deref(), Some("Code Review"));
    let said = messages(&db, &agent.id);
    assert_eq!(said.len(), 1);
    let task_call = msgs[6].parts[0].part.clone();
    match task_call {
        Part::Tool(t) => match t.state {
            ToolState::Completed { metadata, .. } => {
                assert_eq!(metadata["session_id"], agent.id.as_str(), "{metadata}");
            }
            other => panic!("{other:?}"),
        },
        other => panic!("{other:?}"),
    }
    // A model none of whose replies is in the log worked in the background: its usage
    // is a task session of its own.
    let background = &children[1];
    assert_eq!(
        (background.tokens.input, background.tokens.output),
        (1_200, 30)
    );
    assert_eq!(background.api_call_count, 1);
    assert!(messages(&db, &background.id).is_empty());

    // The other fixture's replies are gpt-5-mini's, its usage gpt-4.1's: background.
    let small = session(&db, SMALL);
    assert!(small.tokens.is_zero());
    let small_children: Vec<_> = sessions(&db)
        .into_iter()
        .filter(|s| s.parent_session_id.as_deref() == Some(SMALL))
        .collect();
    assert_eq!(small_children.len(), 1);
    assert_eq!(small_children[0].model.as_deref(), Some("gpt-4.1"));
    assert_eq!(
        (
            small_children[0].tokens.input,
            small_children[0].tokens.cache_read
        ),
        (200, 800)
    );
    assert!(small.ended_at.is_some());
    assert_eq!(small.end_reason.as_deref(), Some("routine"));
}

#[test]
fn a_grown_copilot_log_is_read_again_whole_and_nothing_is_stored_twice() {
    let dir = tempfile::tempdir().unwrap();
    let state = copilot_home(&dir.path().join("home"));
    let db = scribe_db(dir.path());
    run(&db, Source::Copilot, std::slice::from_ref(&state));
    let before = dump(&db);
    let again = run(&db, Source::Copilot, std::slice::from_ref(&state));
    assert_eq!(again.files_unchanged, 2, "{again:?}");
    assert_same(&dump(&db), &before, "unchanged logs");

    // The resumed session goes on: the commit finishes, half a line is being written.
    let log = state.join(WEBAPP).join("events.jsonl");
    let mut text = std::fs::read_to_string(&log).unwrap();
    text.push_str(concat!(
        r#"{"type":"tool.execution_complete","data":{"toolCallId":"toolu_03","success":true,"result":{"content":"[main 4f2a1c9] Start the mock server in beforeAll"}},"id":"e-28","timestamp":"2026-11-02T10:00:12.000Z","parentId":null}"#,
        "\n",
        r#"{"type":"assistant.message","data":{"messageId":"m-8","content":"Committed."},"id":"e-29","timestamp":"2026-11-02T10:00:15.000Z","parentId":"e-28"}"#,
        "\n",
        r#"{"type":"session.shutdown","data":{"shutdownType":"routine","modelMetrics":{"gpt-5-mini":{"requests":{"count":2},"usage":{"inputTokens":7000,"outputTokens":90,"cacheReadTokens":6000}}}},"id":"e-30","timestamp":"2026-11-02T10:00:16.000Z","parentId":"e-29"}"#,
        "\n",
        r#"{"type":"session.resume","data":{"#,
    ));
    std::fs::write(&log, text).unwrap();
    let grown = run(&db, Source::Copilot, std::slice::from_ref(&state));
    assert!(grown.malformed.is_empty(), "a line being written waits");
    assert_eq!(grown.written.messages_inserted, 1, "{grown:?}");
    let msgs = messages(&db, WEBAPP);
    assert_eq!(msgs.len(), 11);
    assert_eq!(
        tool_outcomes(&db, WEBAPP)[3],
        (
            "bash".into(),
            "completed".into(),
            "[main 4f2a1c9] Start the mock server in beforeAll".into()
        )
    );
    // The new lifecycle's usage is on its last reply; the first lifecycle's stays put.
    let last = msgs.last().unwrap();
    assert_eq!(
        (last.usage.input, last.usage.output, last.usage.cache_read),
        (1_000, 90, 6_000)
    );
    let s = session(&db, WEBAPP);
    assert_eq!(
        (s.tokens.input, s.tokens.cache_read, s.api_call_count),
        (18_000, 40_000, 7)
    );
    assert_eq!(s.end_reason.as_deref(), Some("routine"));
}

#[test]
fn a_line_that_is_not_json_is_reported_and_the_rest_of_the_log_imported() {
    let dir = tempfile::tempdir().unwrap();
    let state = dir.path().join("session-state");
    std::fs::create_dir_all(&state).unwrap();
    // A session's file directly in the folder, as earlier builds laid them out.
    let mut text = std::fs::read_to_string(
        fixtures()
            .join("copilot/session-state")
            .join(SMALL)
            .join("events.jsonl"),
    )
    .unwrap();
    text.insert_str(0, "{not json\n");
    std::fs::write(state.join("older.jsonl"), text).unwrap();
    let db = scribe_db(dir.path());
    let s = run(&db, Source::Copilot, &[state]);
    assert_eq!(s.malformed.len(), 1, "{s:?}");
    assert_eq!(s.malformed[0].line, Some(1));
    assert_eq!(messages(&db, SMALL).len(), 3);
}

#[test]
fn a_call_an_abort_cut_short_failed_and_an_empty_reply_is_skipped() {
    let dir = tempfile::tempdir().unwrap();
    let folder = dir.path().join("session-state/s-abort");
    std::fs::create_dir_all(&folder).unwrap();
    let lines = [
        r#"{"type":"session.start","data":{"sessionId":"s-abort","startTime":"2026-11-03T08:00:00.000Z","context":{"cwd":"/w"}},"id":"a1","timestamp":"2026-11-03T08:00:00.000Z"}"#,
        r#"{"type":"user.message","data":{"content":"Run the suite"},"id":"a2","timestamp":"2026-11-03T08:00:01.000Z"}"#,
        r#"{"type":"assistant.message","data":{"messageId":"r1","content":"","toolRequests":[{"toolCallId":"c1","name":"bash","arguments":{"command":"make test"}}]},"id":"a3","timestamp":"2026-11-03T08:00:02.000Z"}"#,
        r#"{"type":"abort","data":{"reason":"user initiated"},"id":"a4","timestamp":"2026-11-03T08:00:09.000Z"}"#,
        r#"{"type":"assistant.message","data":{"messageId":"r2","content":"","toolRequests":[]},"id":"a5","timestamp":"2026-11-03T08:00:10.000Z"}"#,
    ];
    std::fs::write(folder.join("events.jsonl"), lines.join("\n") + "\n").unwrap();
    let db = scribe_db(dir.path());
    let s = run(&db, Source::Copilot, &[folder]);
    assert_eq!(s.skipped.get("assistant.message:empty"), Some(&1), "{s:?}");
    assert_eq!(messages(&db, "s-abort").len(), 2);
    assert_eq!(
        tool_outcomes(&db, "s-abort"),
        [(
            "bash".into(),
            "error".into(),
            "interrupted: the turn ended before the call finished".into()
        )]
    );
    let s = session(&db, "s-abort");
    assert_eq!((s.ended_at, s.directory.as_deref()), (None, Some("/w")));
}

/// A session's title is the `summary` Copilot's session index keeps for it (the name
/// `/resume` lists it by), read without changing the index; a session the index does not
/// hold, or an index that cannot be read, leaves the session untitled.
#[test]
fn a_copilot_session_takes_the_title_its_session_index_keeps() {
    let dir = tempfile::tempdir().unwrap();
    let home = dir.path().join("home");
    let state = copilot_home(&home);
    let store = home.join(".copilot/session-store.db");
    build_db("copilot/session-store.sql", &store);
    let db = scribe_db(dir.path());
    let s = import_read_only(
        &db,
        Source::Copilot,
        std::slice::from_ref(&state),
        &home.join(".copilot"),
    );
    assert!(s.failed.is_empty() && s.malformed.is_empty(), "{s:?}");
    assert_eq!(
        session(&db, WEBAPP).title.as_deref(),
        Some("Login test timeout")
    );
    assert_eq!(session(&db, SMALL).title, None, "not in the index");

    // An index that is not a database: the sessions are imported all the same.
    let other = tempfile::tempdir().unwrap();
    let home = other.path().join("home");
    let state = copilot_home(&home);
    std::fs::write(home.join(".copilot/session-store.db"), "not a database").unwrap();
    let db = scribe_db(other.path());
    let s = run(&db, Source::Copilot, &[state]);
    assert!(s.failed.is_empty() && s.malformed.is_empty(), "{s:?}");
    assert_eq!(session(&db, WEBAPP).title, None);
}
