//! Factory Droid: session files found where Droid keeps them, read into faithful sessions
//! (the user's words apart from the reminders Droid puts before them, replies with
//! reasoning and tool calls settled by their results, a failed one failed), the usage its
//! settings keep per session, and read again whole when either changes, storing nothing
//! twice.
//!
//! Fixtures (`fixtures/droid/sessions`): a session written for Scribe after the format
//! ccusage, jazzyalex/agent-sessions and cross_agent_session_resumer read, and one from
//! jazzyalex/agent-sessions (fixtures/SOURCES.md). The token totals and cost equal
//! ccusage's (`fixtures.rs`).

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::path::PathBuf;

use common::*;
use scribe_import::{Source, sources};
use scribe_message::{Part, Role};

const RATE: &str = "6f0b2d1e-4c3a-4e5b-9a8d-1c2e3f4a5b6c";

#[test]
fn droid_sessions_are_found_where_droid_keeps_them() {
    let dir = tempfile::tempdir().unwrap();
    let home = dir.path().join("home");
    let roots =
        |vars: &[(&str, &str)]| sources::importer(Source::Droid).default_roots(&env(&home, vars));
    assert_eq!(roots(&[]), [home.join(".factory/sessions")]);
    assert_eq!(
        roots(&[("DROID_SESSIONS_DIR", "/a,/b")]),
        [PathBuf::from("/a"), PathBuf::from("/b")]
    );
    // Transcripts only: the settings beside them are read with them.
    let sessions = home.join(".factory/sessions");
    copy("droid/sessions", &sessions);
    let mut found = Vec::new();
    sources::importer(Source::Droid)
        .discover(&sessions, &mut found)
        .unwrap();
    let names: Vec<String> = found
        .iter()
        .map(|p| p.file_name().unwrap().to_string_lossy().into_owned())
        .collect();
    assert_eq!(names, [format!("{RATE}.jsonl"), "droid_drift.jsonl".into()]);
}

#[test]
fn a_droid_session_keeps_its_words_calls_and_the_usage_of_its_settings() {
    let dir = tempfile::tempdir().unwrap();
    let sessions = dir.path().join("droid/sessions");
    copy("droid/sessions", &sessions);
    let db = scribe_db(dir.path());
    let s = run(&db, Source::Droid, std::slice::from_ref(&sessions));
    assert!(s.failed.is_empty() && s.malformed.is_empty(), "{s:?}");
    assert_eq!(s.written.sessions_created, 2);
    assert_eq!(s.skipped.get("todo_state"), Some(&1), "{s:?}");

    let rate = session(&db, RATE);
    assert_eq!(rate.source, "droid");
    assert_eq!(rate.title.as_deref(), Some("Rate-limit the login endpoint"));
    assert_eq!(rate.directory.as_deref(), Some("/home/dev/api"));
    // The custom model's name as the catalog knows it, priced.
    assert_eq!(rate.model.as_deref(), Some("claude-sonnet-4.5"));
    assert_eq!(
        texts(&db, RATE),
        [
            (Role::User, "The user's shell is zsh.".into(), true),
            (
                Role::User,
                "Add rate limiting to the login endpoint: 5 attempts a minute per IP.".into(),
                false
            ),
            (
                Role::Assistant,
                "I'll look at the login route first.".into(),
                false
            ),
            (
                Role::Assistant,
                "Login now allows 5 attempts a minute per IP; a sixth gets 429 Too Many Requests."
                    .into(),
                false
            ),
        ]
    );
    assert_eq!(
        tool_outcomes(&db, RATE),
        [
            (
                "Read".into(),
                "completed".into(),
                "router.post('/login', login);".into()
            ),
            (
                "Execute".into(),
                "error".into(),
                "Error: Command failed (exit code: 1)\n└── (empty)".into()
            ),
            (
                "Edit".into(),
                "completed".into(),
                "Edited src/routes/login.ts".into()
            ),
        ]
    );
    match &messages(&db, RATE)[1].parts[0].part {
        Part::Reasoning(r) => assert_eq!(r.signature.as_deref(), Some("sig-droid-1")),
        other => panic!("{other:?}"),
    }
    // Usage per session, from the settings; the replies are its calls.
    let t = rate.tokens;
    assert_eq!(
        (t.input, t.output, t.reasoning, t.cache_write, t.cache_read),
        (1_840, 920, 210, 6_400, 38_200)
    );
    assert_eq!(rate.api_call_count, 4);
    assert!((rate.estimated_cost_usd - 0.057_93).abs() < 1e-12);

    // A session with no settings: its words, no usage.
    let drift = session(&db, "droid_drift");
    assert_eq!(drift.title.as_deref(), Some("Stage0 Droid Drift"));
    assert_eq!(
        texts(&db, "droid_drift"),
        [
            (Role::User, "Be concise.".into(), true),
            (Role::User, "Do the thing".into(), false),
            (Role::Assistant, "Ok".into(), false),
        ]
    );
    assert!(drift.tokens.is_zero());
}

#[test]
fn changed_settings_or_a_grown_transcript_read_the_session_again_without_doubles() {
    let dir = tempfile::tempdir().unwrap();
    let sessions = dir.path().join("droid/sessions");
    copy("droid/sessions", &sessions);
    let file = sessions.join(format!("-home-dev-api/{RATE}.jsonl"));
    let settings = sessions.join(format!("-home-dev-api/{RATE}.settings.json"));
    let before_bytes = (
        std::fs::read(&file).unwrap(),
        std::fs::read(&settings).unwrap(),
    );
    let db = scribe_db(dir.path());
    run(&db, Source::Droid, std::slice::from_ref(&sessions));
    assert_eq!(
        (
            std::fs::read(&file).unwrap(),
            std::fs::read(&settings).unwrap()
        ),
        before_bytes,
        "the files are only read"
    );
    let before = dump(&db);
    let again = run(&db, Source::Droid, std::slice::from_ref(&sessions));
    assert_eq!(again.files_unchanged, 2, "{again:?}");
    assert_same(&dump(&db), &before, "unchanged files");

    // Droid goes on: a new exchange, and its settings count the tokens spent on it.
    let mut text = std::fs::read_to_string(&file).unwrap();
    text.push_str(concat!(
        r#"{"type":"message","id":"m9","timestamp":"2026-02-10T09:05:00.000Z","message":{"role":"user","content":[{"type":"text","text":"Add a test for it"}]}}"#,
        "\n",
        r#"{"type":"message","id":"m10","timestamp":"2026-02-10T09:05:09.000Z","message":{"role":"assistant","content":[{"type":"text","text":"Added test/login.rate.test.ts."}]}}"#,
        "\n",
    ));
    std::fs::write(&file, text).unwrap();
    let mut s: serde_json::Value =
        serde_json::from_slice(&std::fs::read(&settings).unwrap()).unwrap();
    s["tokenUsage"]["inputTokens"] = 2_000.into();
    s["tokenUsage"]["outputTokens"] = 1_000.into();
    std::fs::write(&settings, serde_json::to_vec(&s).unwrap()).unwrap();
    let grown = run(&db, Source::Droid, std::slice::from_ref(&sessions));
    assert!(
        grown.failed.is_empty() && grown.malformed.is_empty(),
        "{grown:?}"
    );
    assert_eq!(grown.written.messages_inserted, 2, "{grown:?}");
    let rate = session(&db, RATE);
    assert_eq!((rate.tokens.input, rate.tokens.output), (2_000, 1_000));
    assert_eq!(rate.api_call_count, 5);

    // Settings alone changing (Droid rewrites them as it counts) read the session again.
    s["tokenUsage"]["outputTokens"] = 1_100.into();
    std::fs::write(&settings, serde_json::to_vec(&s).unwrap()).unwrap();
    let counted = run(&db, Source::Droid, std::slice::from_ref(&sessions));
    assert_eq!(counted.written.messages_inserted, 0, "{counted:?}");
    assert_eq!(session(&db, RATE).tokens.output, 1_100);
}

#[test]
fn broken_lines_and_settings_are_reported_or_waited_for() {
    let dir = tempfile::tempdir().unwrap();
    let sessions = dir.path().join("droid/sessions");
    copy("droid/sessions", &sessions);
    let file = sessions.join(format!("-home-dev-api/{RATE}.jsonl"));
    let mut lines: Vec<String> = std::fs::read_to_string(&file)
        .unwrap()
        .lines()
        .map(str::to_owned)
        .collect();
    lines.insert(2, "{broken".into());
    std::fs::write(&file, lines.join("\n") + "\n").unwrap();
    // Settings cut short while Droid writes them: the session waits for its usage.
    std::fs::write(
        sessions.join(format!("-home-dev-api/{RATE}.settings.json")),
        r#"{"model":"claude-sonnet"#,
    )
    .unwrap();
    // A JSON Lines file that is no Droid session.
    std::fs::write(sessions.join("-tmp/notes.jsonl"), "{\"a\":1}\n").unwrap();
    let db = scribe_db(dir.path());
    let s = run(&db, Source::Droid, std::slice::from_ref(&sessions));
    assert_eq!(s.malformed.len(), 1, "{s:?}");
    assert_eq!(s.malformed[0].line, Some(3), "{s:?}");
    assert_eq!(s.skipped.get("(not a Droid session)"), Some(&1), "{s:?}");
    assert_eq!(s.written.sessions_created, 2, "{s:?}");
    let rate = session(&db, RATE);
    assert_eq!(messages(&db, RATE).len(), 5);
    assert!(rate.tokens.is_zero());
}
