//! Kimi: both generations' session logs found where they are kept (Kimi Code's
//! `~/.kimi-code`, with each sub-agent's log a task session; the Kimi CLI's `~/.kimi`),
//! read into faithful sessions (the user's words apart from what Kimi injects, reasoning,
//! tool calls settled by their results, each model call's usage once, the Kimi CLI's
//! streamed pieces joined), token totals equal to ccusage's, and a grown log read again
//! storing nothing twice.
//!
//! Fixtures (`fixtures/kimi`): authored for Scribe after jazzyalex/agent-sessions' Kimi
//! Code logs and MoonshotAI/kimi-cli's wire events (fixtures/SOURCES.md).

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::path::PathBuf;

use common::*;
use scribe_import::{Source, sources};
use scribe_message::{Part, Role};
use scribe_session::SessionKind;

const CODE: &str = "session_5c1e8a2f-3b7d-4e9a-8c6f-1d2e3f4a5b6c";
const CLI: &str = "3e7a1c52-9d4b-4f6e-8a2c-7b5d1e9f0a34";

fn roots(dir: &std::path::Path) -> Vec<PathBuf> {
    let home = dir.join("home");
    copy("kimi/kimi-code", &home.join(".kimi-code"));
    copy("kimi/kimi", &home.join(".kimi"));
    sources::importer(Source::Kimi).default_roots(&env(&home, &[]))
}

#[test]
fn kimi_sessions_are_found_where_both_generations_keep_them() {
    let dir = tempfile::tempdir().unwrap();
    let home = dir.path().join("home");
    let roots_with =
        |vars: &[(&str, &str)]| sources::importer(Source::Kimi).default_roots(&env(&home, vars));
    assert_eq!(
        roots_with(&[]),
        [
            home.join(".kimi-code/sessions"),
            home.join(".kimi/sessions")
        ]
    );
    assert_eq!(
        roots_with(&[("KIMI_CODE_HOME", "/srv/kc"), ("KIMI_DATA_DIR", "/a,/b")]),
        [
            PathBuf::from("/srv/kc/sessions"),
            PathBuf::from("/a/sessions"),
            PathBuf::from("/b/sessions")
        ]
    );
    let mut found = Vec::new();
    for root in roots(dir.path()) {
        sources::importer(Source::Kimi)
            .discover(&root, &mut found)
            .unwrap();
    }
    let names: Vec<String> = found
        .iter()
        .map(|p| p.strip_prefix(&home).unwrap().display().to_string())
        .collect();
    assert_eq!(
        names,
        [
            format!(".kimi-code/sessions/wd_shop_3f2a9c1d7b4e/{CODE}/agents/agent-0/wire.jsonl"),
            format!(".kimi-code/sessions/wd_shop_3f2a9c1d7b4e/{CODE}/agents/main/wire.jsonl"),
            format!(".kimi/sessions/9f3c2b1a0e8d7c6b5a4f3e2d1c0b9a8f/{CLI}/wire.jsonl"),
        ]
    );
}

#[test]
fn a_kimi_code_session_keeps_its_words_calls_usage_and_sub_agent() {
    let dir = tempfile::tempdir().unwrap();
    let roots = roots(dir.path());
    let db = scribe_db(dir.path());
    let s = run(&db, Source::Kimi, &roots);
    assert!(s.failed.is_empty() && s.malformed.is_empty(), "{s:?}");
    // A step's usage is taken from its end, not again from the record repeating it.
    assert_eq!(s.skipped.get("usage.record"), Some(&5), "{s:?}");

    let session = session(&db, CODE);
    assert_eq!(session.source, "kimi");
    assert_eq!(session.model.as_deref(), Some("kimi-k2.7-code"));
    assert_eq!(session.directory.as_deref(), Some("/home/dev/shop"));
    assert_eq!(
        (
            session.tokens.input,
            session.tokens.output,
            session.tokens.cache_read
        ),
        (10_008, 259, 63_232)
    );
    assert_eq!(session.api_call_count, 3);
    assert_eq!(
        texts(&db, CODE),
        [
            (Role::User, "run the tests".into(), false),
            (
                Role::Assistant,
                "One test fails: the cart total rounds down. Let me find where totals are computed."
                    .into(),
                false
            ),
            // What Kimi injected, not the user.
            (
                Role::User,
                "<system-reminder>\nThe TodoList tool has not been updated recently.\n</system-reminder>"
                    .into(),
                true
            ),
            (
                Role::Assistant,
                "`total()` in src/cart.ts uses Math.floor; it should round to cents.".into(),
                false
            ),
        ]
    );
    let tools = tool_outcomes(&db, CODE);
    assert_eq!(
        tools[0],
        (
            "Bash".to_owned(),
            "error".to_owned(),
            "1 failing: cart total rounds down\nCommand failed with exit code: 1.".to_owned()
        )
    );
    assert_eq!(
        (tools[1].0.as_str(), tools[1].1.as_str()),
        ("Agent", "completed")
    );
    assert!(
        matches!(&messages(&db, CODE)[1].parts[0].part, Part::Reasoning(r) if r.text == "Run the test suite with npm.")
    );

    // The sub-agent's log: a task session under the session, named by its profile, and
    // the call that started it names it, as Scribe's own task tool does.
    let child = common::session(&db, &format!("{CODE}:agent-0"));
    let agent_call = messages(&db, CODE)
        .into_iter()
        .flat_map(|m| m.parts)
        .find_map(|p| match p.part {
            Part::Tool(t) if t.tool == "Agent" => Some(t),
            _ => None,
        })
        .unwrap();
    match &agent_call.state {
        scribe_message::ToolState::Completed { metadata, .. } => {
            assert_eq!(metadata["session_id"], child.id.as_str(), "{metadata}");
        }
        other => panic!("{other:?}"),
    }
    assert_eq!(child.parent_session_id.as_deref(), Some(CODE));
    assert_eq!(child.kind, SessionKind::Task);
    assert_eq!(child.title.as_deref(), Some("explore"));
    assert_eq!(
        tool_outcomes(&db, &child.id),
        [(
            "Grep".to_owned(),
            "completed".to_owned(),
            "src/cart.ts:12: export const total = (items) => Math.floor(sum(items));".to_owned()
        )]
    );
}

#[test]
fn a_kimi_cli_session_joins_what_it_streamed() {
    let dir = tempfile::tempdir().unwrap();
    let roots = roots(dir.path());
    let db = scribe_db(dir.path());
    run(&db, Source::Kimi, &roots);

    let session = session(&db, CLI);
    // The model config.json names, beside `sessions`.
    assert_eq!(session.model.as_deref(), Some("kimi-k2-turbo-preview"));
    assert_eq!(
        texts(&db, CLI),
        [
            (Role::User, "what does the Makefile build?".into(), false),
            (
                Role::Assistant,
                "It builds the release binary with cargo.".into(),
                false
            ),
            (Role::User, "run it".into(), false),
        ]
    );
    let msgs = messages(&db, CLI);
    match (&msgs[1].parts[0].part, &msgs[1].parts[1].part) {
        (Part::Reasoning(r), Part::Tool(t)) => {
            assert_eq!(r.text, "Read the Makefile.");
            // The arguments streamed in two pieces, parsed whole.
            assert_eq!(t.input, serde_json::json!({"path": "Makefile"}));
        }
        other => panic!("{other:?}"),
    }
    // Each step's usage, as its status update said.
    let usage: Vec<(i64, i64, i64, i64)> = msgs
        .iter()
        .filter(|m| m.role == Role::Assistant)
        .map(|m| {
            (
                m.usage.input,
                m.usage.output,
                m.usage.cache_read,
                m.usage.cache_write,
            )
        })
        .collect();
    assert_eq!(
        usage,
        [(100, 50, 10, 20), (40, 12, 150, 0), (30, 8, 200, 0)]
    );
    // A failed call says why (its message, its output being empty); the step the user
    // interrupted is marked.
    assert_eq!(
        tool_outcomes(&db, CLI)[1],
        (
            "Shell".to_owned(),
            "error".to_owned(),
            "make: cargo: No such file or directory".to_owned()
        )
    );
    assert_eq!(msgs[4].error.as_ref().unwrap()["type"], "interrupted");

    // A sub-agent's events: its own task session, with its usage.
    let child = common::session(&db, &format!("{CLI}:agent-7"));
    assert_eq!(child.parent_session_id.as_deref(), Some(CLI));
    assert_eq!(child.title.as_deref(), Some("coder"));
    assert_eq!((child.tokens.input, child.tokens.output), (500, 20));
}

/// ccusage 20.0.24 (`ccusage kimi session --json --offline` over the fixtures laid out as
/// `~/.kimi-code` and `~/.kimi`) counts a Kimi Code session with its sub-agents' logs, and
/// a Kimi CLI session's own status updates (not those inside a sub-agent's events, which
/// Scribe counts in the sub-agent's task session). (It prices Kimi's models; Scribe's
/// catalog has none, so their cost is unknown until a catalog gives one.)
#[test]
fn kimi_token_totals_equal_ccusage() {
    let dir = tempfile::tempdir().unwrap();
    let roots = roots(dir.path());
    let db = scribe_db(dir.path());
    run(&db, Source::Kimi, &roots);
    let family = |id: &str| {
        let mut got = (0, 0, 0, 0);
        for s in sessions(&db)
            .iter()
            .filter(|s| s.id == id || s.parent_session_id.as_deref() == Some(id))
        {
            let t = s.tokens;
            got.0 += t.input;
            got.1 += t.output;
            got.2 += t.cache_write;
            got.3 += t.cache_read;
            assert_eq!(s.cost_status.as_deref(), Some("unknown"), "{}", s.id);
        }
        got
    };
    assert_eq!(family(CODE), (21_261, 453, 0, 79_104));
    let t = session(&db, CLI).tokens;
    assert_eq!(
        (t.input, t.output, t.cache_write, t.cache_read),
        (170, 70, 20, 360)
    );
}

#[test]
fn a_grown_kimi_log_is_read_again_and_nothing_is_stored_twice() {
    let dir = tempfile::tempdir().unwrap();
    let roots = roots(dir.path());
    let db = scribe_db(dir.path());
    run(&db, Source::Kimi, &roots);
    let before = dump(&db);
    let again = run(&db, Source::Kimi, &roots);
    assert_eq!(again.files_unchanged, 3, "{again:?}");
    assert_same(&dump(&db), &before, "unchanged logs");

    let file = dir.path().join(format!(
        "home/.kimi-code/sessions/wd_shop_3f2a9c1d7b4e/{CODE}/agents/main/wire.jsonl"
    ));
    let mut text = std::fs::read_to_string(&file).unwrap();
    text.push_str(concat!(
        r#"{"type":"context.append_message","message":{"role":"user","content":[{"type":"text","text":"fix it"}],"toolCalls":[],"origin":{"kind":"user"}},"time":1785700099000}"#,
        "\n",
        r#"{"type":"context.append_loop_event","event":{"type":"step.beg"#,
    ));
    std::fs::write(&file, text).unwrap();
    let count = messages(&db, CODE).len();
    let grown = run(&db, Source::Kimi, &roots);
    assert!(
        grown.malformed.is_empty(),
        "a line being written waits: {grown:?}"
    );
    assert_eq!(grown.written.messages_inserted, 1, "{grown:?}");
    assert_eq!(messages(&db, CODE).len(), count + 1);
}
