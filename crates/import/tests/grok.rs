//! Grok Build: session folders found where Grok keeps them, their conversation read into
//! a faithful session (the environment context Grok adds apart from the user's words,
//! reasoning and a server-run web search with the reply that follows, tool calls settled
//! by their results, an image), placed in file order from the session's start since no
//! record carries a time, and read again whole when it grows, storing nothing twice.
//!
//! Fixture (`fixtures/grok/sessions`): a session from jazzyalex/agent-sessions
//! (fixtures/SOURCES.md). Grok Build keeps no per-call usage, so there is nothing to
//! compare with ccusage (which reports Grok's context size as a bare total).

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::path::PathBuf;

use common::*;
use scribe_import::{Source, sources};
use scribe_message::{Part, Role};

const ID: &str = "019f6851-7ec4-7ef0-97d3-03f3eee38755";
const FOLDER: &str = "%2Ftmp%2Fas-agent-lab%2Fgrok%2Fproject";

#[test]
fn grok_sessions_are_found_where_grok_keeps_them() {
    let dir = tempfile::tempdir().unwrap();
    let home = dir.path().join("home");
    let roots =
        |vars: &[(&str, &str)]| sources::importer(Source::Grok).default_roots(&env(&home, vars));
    assert_eq!(roots(&[]), [home.join(".grok/sessions")]);
    assert_eq!(
        roots(&[("GROK_HOME", "/srv/grok")]),
        [PathBuf::from("/srv/grok/sessions")]
    );
    // The conversation files only: the summary beside each is read with it.
    let sessions = home.join(".grok/sessions");
    copy("grok/sessions", &sessions);
    let mut found = Vec::new();
    sources::importer(Source::Grok)
        .discover(&sessions, &mut found)
        .unwrap();
    assert_eq!(
        found,
        [sessions.join(format!("{FOLDER}/{ID}/chat_history.jsonl"))]
    );
}

#[test]
fn a_grok_session_keeps_its_words_reasoning_calls_and_order() {
    let dir = tempfile::tempdir().unwrap();
    let sessions = dir.path().join("grok/sessions");
    copy("grok/sessions", &sessions);
    let db = scribe_db(dir.path());
    let s = run(&db, Source::Grok, std::slice::from_ref(&sessions));
    assert!(s.failed.is_empty() && s.malformed.is_empty(), "{s:?}");
    assert_eq!(s.skipped.get("system"), Some(&1), "{s:?}");

    let session = session(&db, ID);
    assert_eq!(session.source, "grok");
    assert_eq!(
        session.title.as_deref(),
        Some("Read hello.py and summarize what it prints")
    );
    assert_eq!(
        session.directory.as_deref(),
        Some("/tmp/as-agent-lab/grok/project")
    );
    assert_eq!(session.model.as_deref(), Some("grok-4.5"));
    // No usage on disk: none stored, no cost claimed.
    assert!(session.tokens.is_zero());
    assert_eq!(session.api_call_count, 0);

    assert_eq!(
        texts(&db, ID),
        [
            (
                Role::User,
                "<user_info>\nOS Version: macos\nWorkspace Path: /tmp/as-agent-lab/grok/project\n</user_info>"
                    .into(),
                true
            ),
            (
                Role::User,
                "Read hello.py and summarize what it prints without editing files.".into(),
                false
            ),
            (Role::Assistant, "I'll read the file first.".into(), false),
            (
                Role::User,
                "Here is a screenshot for reference.".into(),
                false
            ),
        ]
    );
    assert_eq!(
        tool_outcomes(&db, ID),
        [
            (
                "read_file".into(),
                "completed".into(),
                "print(\"hello from the grok fixture\")\n".into()
            ),
            // The server's web search, with the reply after it.
            ("web_search".into(), "completed".into(), String::new()),
            (
                "run_terminal_cmd".into(),
                "completed".into(),
                "hello from the grok fixture\n".into()
            ),
        ]
    );
    let msgs = messages(&db, ID);
    let kinds: Vec<(Role, Vec<&str>)> = msgs
        .iter()
        .map(|m| {
            let kinds = m
                .parts
                .iter()
                .map(|p| match &p.part {
                    Part::Text(_) => "text",
                    Part::Reasoning(_) => "reasoning",
                    Part::Tool(_) => "tool",
                    Part::File(_) => "file",
                    _ => "other",
                })
                .collect();
            (m.role, kinds)
        })
        .collect();
    assert_eq!(
        kinds,
        [
            (Role::User, vec!["text"]),
            (Role::User, vec!["text"]),
            (Role::Assistant, vec!["reasoning", "text", "tool"]),
            (Role::Assistant, vec!["tool", "tool"]),
            // Reasoning no reply followed, before the user spoke again.
            (Role::Assistant, vec!["reasoning"]),
            (Role::User, vec!["file", "text"]),
        ]
    );
    match &msgs[5].parts[0].part {
        Part::File(f) => assert_eq!(f.mime, "image/png"),
        other => panic!("{other:?}"),
    }
    // In file order, a millisecond apart from the session's start (summary.json's).
    let start = 1_785_492_807_574_i64;
    let times: Vec<i64> = msgs.iter().map(|m| m.created_at - start).collect();
    assert_eq!(times, [0, 1, 2, 3, 4, 5]);
    assert_eq!(msgs[2].model.as_deref(), Some("grok-4.5"));
}

#[test]
fn a_grown_grok_session_is_read_again_and_nothing_is_stored_twice() {
    let dir = tempfile::tempdir().unwrap();
    let sessions = dir.path().join("grok/sessions");
    copy("grok/sessions", &sessions);
    let file = sessions.join(format!("{FOLDER}/{ID}/chat_history.jsonl"));
    let db = scribe_db(dir.path());
    run(&db, Source::Grok, std::slice::from_ref(&sessions));
    let before = dump(&db);
    let again = run(&db, Source::Grok, std::slice::from_ref(&sessions));
    assert_eq!(again.files_unchanged, 1, "{again:?}");
    assert_same(&dump(&db), &before, "an unchanged file");

    let mut text = std::fs::read_to_string(&file).unwrap();
    text.push_str(concat!(
        r#"{"type":"assistant","content":"The screenshot shows the same greeting.","model_id":"grok-4.5"}"#,
        "\n",
        r#"{"type":"user","content":[{"type":"te"#,
    ));
    std::fs::write(&file, text).unwrap();
    let grown = run(&db, Source::Grok, std::slice::from_ref(&sessions));
    assert!(
        grown.malformed.is_empty(),
        "a line being written waits: {grown:?}"
    );
    assert_eq!(grown.written.messages_inserted, 1, "{grown:?}");
    assert_eq!(messages(&db, ID).len(), 7);
}
