//! Google Antigravity: conversation logs found where the CLI and the editor keep them (the
//! full log preferred to the one cut short beside it), read into a faithful session (the
//! user's request apart from what Antigravity adds to it, the model the user selected,
//! reasoning, tool calls settled by the steps that carry them out, a compaction, a system
//! message), with no usage (the logs keep none), and a grown log read again storing
//! nothing twice.
//!
//! Fixtures (`fixtures/antigravity`): a CLI log from jazzyalex/agent-sessions and an
//! editor conversation authored for Scribe after it (fixtures/SOURCES.md).

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::path::PathBuf;

use common::*;
use scribe_import::{Source, sources};
use scribe_message::{Part, Role};

const ID: &str = "8e4b2c1d-6f3a-4d5e-9b7c-0a1f2e3d4c5b";
const CLI: &str = "ag-stage0-cli-small";

fn gemini(dir: &std::path::Path) -> PathBuf {
    let gemini = dir.join("home/.gemini");
    copy("antigravity", &gemini);
    gemini
}

#[test]
fn antigravity_logs_are_found_where_the_cli_and_the_editor_keep_them() {
    let dir = tempfile::tempdir().unwrap();
    let home = dir.path().join("home");
    let roots = |vars: &[(&str, &str)]| {
        sources::importer(Source::Antigravity).default_roots(&env(&home, vars))
    };
    // Nothing there yet: where the CLI would keep it.
    assert_eq!(roots(&[]), [home.join(".gemini/antigravity-cli/brain")]);
    assert_eq!(
        roots(&[("ANTIGRAVITY_DATA_DIR", "/srv/a,/srv/b")]),
        [PathBuf::from("/srv/a/brain"), PathBuf::from("/srv/b/brain")]
    );
    let gemini = gemini(dir.path());
    assert_eq!(
        roots(&[]),
        [
            gemini.join("antigravity-cli/brain"),
            gemini.join("antigravity/brain")
        ]
    );
    let mut found = Vec::new();
    for root in roots(&[]) {
        sources::importer(Source::Antigravity)
            .discover(&root, &mut found)
            .unwrap();
    }
    // The editor's conversation has both logs: the full one is read.
    assert_eq!(
        found,
        [
            gemini.join(format!(
                "antigravity-cli/brain/{CLI}/.system_generated/logs/transcript.jsonl"
            )),
            gemini.join(format!(
                "antigravity/brain/{ID}/.system_generated/logs/transcript_full.jsonl"
            )),
        ]
    );
}

#[test]
fn an_antigravity_conversation_keeps_its_request_model_calls_and_compaction() {
    let dir = tempfile::tempdir().unwrap();
    let gemini = gemini(dir.path());
    let db = scribe_db(dir.path());
    let roots = [
        gemini.join("antigravity-cli/brain"),
        gemini.join("antigravity/brain"),
    ];
    let s = run(&db, Source::Antigravity, &roots);
    assert!(s.failed.is_empty() && s.malformed.is_empty(), "{s:?}");
    assert_eq!(s.skipped.get("CONVERSATION_HISTORY"), Some(&2), "{s:?}");

    let session = session(&db, ID);
    assert_eq!(session.source, "antigravity");
    assert_eq!(session.model.as_deref(), Some("claude-sonnet-4.5"));
    // No usage on disk: none stored, no cost claimed.
    assert!(session.tokens.is_zero());
    assert_eq!(session.api_call_count, 0);
    assert_eq!(
        texts(&db, ID),
        [
            (Role::User, "Fix the failing date test in utils.".into(), false),
            (
                Role::User,
                "The current local time is: 2026-11-21T10:00:00+01:00.".into(),
                true
            ),
            (
                Role::User,
                "The user changed setting `Model Selection` from None to Claude Sonnet 4.5 (Thinking)."
                    .into(),
                true
            ),
            (
                Role::Assistant,
                "The test compares local dates; the helper formats in UTC.".into(),
                false
            ),
            (
                Role::Assistant,
                "Fixed: `day` now formats the local date.".into(),
                false
            ),
            (
                Role::Assistant,
                "# Resuming from a compaction\nThe user asked to fix a date test; the helper now formats local dates."
                    .into(),
                false
            ),
            (
                Role::User,
                "The following is a <SYSTEM_MESSAGE> not actually sent by the user.\n\n<SYSTEM_MESSAGE>\nThe user's workspace changed.\n</SYSTEM_MESSAGE>"
                    .into(),
                true
            ),
            (Role::User, "Thanks!".into(), false),
        ]
    );
    // Each call settled by the step after it, in order; a failed edit says why; a search
    // no call waited for is a call of its own.
    assert_eq!(
        tool_outcomes(&db, ID),
        [
            (
                "run_command".into(),
                "completed".into(),
                "FAIL utils/date.test.ts\n  expected 2026-11-21, got 2026-11-20\n".into()
            ),
            (
                "view_file".into(),
                "completed".into(),
                "File Path: `file:///home/dev/app/utils/date.ts`\n1: export const day = (d: Date) => d.toISOString().slice(0, 10);\n"
                    .into()
            ),
            (
                "replace_file_content".into(),
                "error".into(),
                "The target content was not found in the file.".into()
            ),
            (
                "search_web".into(),
                "completed".into(),
                "The search for \"toLocaleDateString sv\" returned: it formats as YYYY-MM-DD."
                    .into()
            ),
        ]
    );
    let msgs = messages(&db, ID);
    // The arguments as the tool got them (Antigravity writes each as JSON text).
    match &msgs[1].parts[1].part {
        Part::Tool(t) => assert_eq!(
            t.input,
            serde_json::json!({"CommandLine": "npm test -- utils", "Cwd": "/home/dev/app"})
        ),
        other => panic!("{other:?}"),
    }
    assert!(
        matches!(&msgs[1].parts[0].part, Part::Reasoning(r) if r.text == "Run the tests first.")
    );
    let summary = msgs.iter().find(|m| m.is_summary).unwrap();
    assert_eq!(
        session.summary_message_id.as_deref(),
        Some(summary.id.as_str())
    );

    // The CLI's log: the model it selected.
    assert_eq!(
        common::session(&db, CLI).model.as_deref(),
        Some("gemini-3.5-flash")
    );
}

#[test]
fn a_grown_antigravity_log_is_read_again_and_nothing_is_stored_twice() {
    let dir = tempfile::tempdir().unwrap();
    let gemini = gemini(dir.path());
    let roots = [gemini.join("antigravity/brain")];
    let file = gemini.join(format!(
        "antigravity/brain/{ID}/.system_generated/logs/transcript_full.jsonl"
    ));
    let db = scribe_db(dir.path());
    run(&db, Source::Antigravity, &roots);
    let before = dump(&db);
    let again = run(&db, Source::Antigravity, &roots);
    assert_eq!(again.files_unchanged, 1, "{again:?}");
    assert_same(&dump(&db), &before, "an unchanged log");

    let mut text = std::fs::read_to_string(&file).unwrap();
    text.push_str(concat!(
        r#"{"step_index":12,"source":"MODEL","type":"PLANNER_RESPONSE","status":"DONE","created_at":"2026-11-21T09:00:45Z","content":"You're welcome."}"#,
        "\n",
        r#"{"step_index":13,"source":"MO"#,
    ));
    std::fs::write(&file, text).unwrap();
    let grown = run(&db, Source::Antigravity, &roots);
    assert!(
        grown.malformed.is_empty(),
        "a line being written waits: {grown:?}"
    );
    assert_eq!(grown.written.messages_inserted, 1, "{grown:?}");
    assert_eq!(messages(&db, ID).len(), 9);
}
