//! File history through the loop: `edit_file` and `write_file` record the files a
//! session changed (the original first, then each change), latest files and export
//! carry them, and a recording failure or an oversized file never fails the call.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod loop_support;

use std::collections::BTreeMap;
use std::sync::Arc;

use loop_support::*;
use scribe_agent::tools::{EditFile, FileRecorder, RecordError, WriteFile};
use scribe_agent::{
    CancelToken, PromptInput, ScriptedProvider, ScriptedTurn, Tool, ToolContext, ToolRegistry,
};
use scribe_message::{TokenUsage, ToolState};
use scribe_session::ExportSelection;
use serde_json::{Value, json};

fn usage() -> TokenUsage {
    TokenUsage {
        input: 100,
        output: 10,
        ..TokenUsage::default()
    }
}

fn edit(call: &str, old: &str, new: &str) -> ScriptedTurn {
    ScriptedTurn::from(
        ScriptedTurn::reply()
            .tool_call(
                call,
                "edit_file",
                json!({"path": "src/x.rs", "old": old, "new": new}),
            )
            .usage(usage()),
    )
}

/// The metadata of every completed tool part of `session_id`, in order.
fn tool_metadata(env: &Env, session_id: &str) -> Vec<Value> {
    env.messages_of(session_id)
        .iter()
        .flat_map(tool_parts)
        .filter_map(|t| match t.state {
            ToolState::Completed { metadata, .. } => Some(metadata),
            _ => None,
        })
        .collect()
}

#[test]
fn edits_and_writes_record_file_versions() {
    let env = Env::new();
    std::fs::create_dir_all(env.project.join("src")).unwrap();
    std::fs::write(env.project.join("src/x.rs"), "fn x() -> i32 { 1 }\n").unwrap();
    let provider = Arc::new(ScriptedProvider::new([
        edit("c1", "{ 1 }", "{ 2 }"),
        edit("c2", "{ 2 }", "{ 3 }"),
        ScriptedTurn::from(
            ScriptedTurn::reply()
                .tool_call(
                    "c3",
                    "write_file",
                    json!({"path": "./src/new.rs", "content": "pub fn new() {}\n"}),
                )
                .usage(usage()),
        ),
        ScriptedTurn::reply().text("done").usage(usage()).into(),
    ]));
    let runner = env
        .runner(provider)
        .with_tools(ToolRegistry::builtin(BTreeMap::new()))
        .build();
    let session = env.session();
    runner
        .prompt(
            PromptInput::text(&session.id, "bump x"),
            &CancelToken::new(),
        )
        .unwrap();

    let versions = env.sessions.file_versions(&session.id, "src/x.rs").unwrap();
    let contents: Vec<(i64, &str)> = versions
        .iter()
        .map(|v| (v.version, v.content.as_str()))
        .collect();
    assert_eq!(
        contents,
        [
            (1, "fn x() -> i32 { 1 }\n"),
            (2, "fn x() -> i32 { 2 }\n"),
            (3, "fn x() -> i32 { 3 }\n"),
        ]
    );

    // A new file has no "original": only what was written.
    let new = env
        .sessions
        .file_versions(&session.id, "src/new.rs")
        .unwrap();
    assert_eq!(new.len(), 1);
    assert_eq!(
        (new[0].version, new[0].content.as_str()),
        (1, "pub fn new() {}\n")
    );

    let latest: Vec<(String, i64)> = env
        .sessions
        .latest_files(&session.id)
        .unwrap()
        .into_iter()
        .map(|f| (f.path, f.version))
        .collect();
    assert_eq!(
        latest,
        [("src/new.rs".to_owned(), 1), ("src/x.rs".to_owned(), 3)]
    );

    // The tool parts say what was recorded.
    let meta = tool_metadata(&env, &session.id);
    assert_eq!(meta.len(), 3);
    assert_eq!(meta[0]["history"]["versions"], json!([1, 2]));
    assert_eq!(meta[0]["history"]["path"], "src/x.rs");
    assert_eq!(meta[1]["history"]["versions"], json!([3]));
    assert_eq!(meta[2]["history"]["versions"], json!([1]));
    assert!(meta.iter().all(|m| m["history"].get("error").is_none()));

    let export = env
        .sessions
        .export(&ExportSelection::One(session.id.clone()))
        .unwrap();
    let mut exported: Vec<(String, i64)> = export[0]
        .files
        .iter()
        .map(|f| (f.path.clone(), f.version))
        .collect();
    exported.sort();
    assert_eq!(
        exported,
        [
            ("src/new.rs".to_owned(), 1),
            ("src/x.rs".to_owned(), 1),
            ("src/x.rs".to_owned(), 2),
            ("src/x.rs".to_owned(), 3),
        ]
    );
}

#[test]
fn overwriting_an_existing_file_records_its_original_first() {
    let env = Env::new();
    std::fs::write(env.project.join("a.txt"), "before").unwrap();
    let provider = Arc::new(ScriptedProvider::new([
        ScriptedTurn::reply()
            .tool_call(
                "c1",
                "write_file",
                json!({"path": "a.txt", "content": "after"}),
            )
            .usage(usage()),
        ScriptedTurn::reply().text("done").usage(usage()),
    ]));
    let runner = env
        .runner(provider)
        .with_tools(ToolRegistry::builtin(BTreeMap::new()))
        .build();
    let session = env.session();
    runner
        .prompt(PromptInput::text(&session.id, "go"), &CancelToken::new())
        .unwrap();
    let versions: Vec<String> = env
        .sessions
        .file_versions(&session.id, "a.txt")
        .unwrap()
        .into_iter()
        .map(|v| v.content)
        .collect();
    assert_eq!(versions, ["before", "after"]);
}

#[test]
fn huge_and_binary_files_are_noted_not_recorded() {
    let env = Env::new();
    std::fs::write(env.project.join("blob.bin"), [0u8, 159, 146, 150]).unwrap();
    // Huge but with a small edit, so the tool call itself fits the context window.
    let huge = format!(
        "MARK{}",
        "x".repeat(scribe_agent::tools::MAX_RECORDED_BYTES)
    );
    std::fs::write(env.project.join("big.txt"), &huge).unwrap();
    let provider = Arc::new(ScriptedProvider::new([
        ScriptedTurn::reply()
            .tool_call(
                "c1",
                "edit_file",
                json!({"path": "big.txt", "old": "MARK", "new": "DONE"}),
            )
            .tool_call(
                "c2",
                "write_file",
                json!({"path": "blob.bin", "content": "text now"}),
            )
            .usage(usage()),
        ScriptedTurn::reply().text("done").usage(usage()),
    ]));
    let runner = env
        .runner(provider)
        .with_tools(ToolRegistry::builtin(BTreeMap::new()))
        .build();
    let session = env.session();
    runner
        .prompt(PromptInput::text(&session.id, "go"), &CancelToken::new())
        .unwrap();
    assert_eq!(
        std::fs::read_to_string(env.project.join("big.txt")).unwrap()[..4],
        *"DONE"
    );
    assert!(
        env.sessions
            .file_versions(&session.id, "big.txt")
            .unwrap()
            .is_empty()
    );
    // The binary original is skipped (noted); the new text is recorded.
    let blob = env.sessions.file_versions(&session.id, "blob.bin").unwrap();
    assert_eq!(blob.len(), 1);
    assert_eq!(blob[0].content, "text now");
    let meta = tool_metadata(&env, &session.id);
    let skipped = meta[0]["history"]["skipped"].as_str().unwrap();
    assert!(skipped.contains("limit"), "{skipped}");
    let note = meta[1]["history"]["note"].as_str().unwrap();
    assert!(note.contains("binary"), "{note}");
}

struct Failing;

impl FileRecorder for Failing {
    fn has_versions(&self, _session: &str, _path: &str) -> Result<bool, RecordError> {
        Ok(false)
    }
    fn record(&self, _session: &str, _path: &str, _content: &str) -> Result<i64, RecordError> {
        Err("database is locked".into())
    }
}

#[test]
fn a_recording_failure_is_reported_without_failing_the_call() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("a.txt"), "one").unwrap();
    let ctx = ToolContext {
        session_id: "ses_x".into(),
        message_id: "msg_x".into(),
        call_id: "c".into(),
        agent: "build".into(),
        cancel: CancelToken::new(),
        project_root: dir.path().to_path_buf(),
        files: Some(Arc::new(Failing)),
    };
    let out = EditFile
        .run(&json!({"path": "a.txt", "old": "one", "new": "two"}), &ctx)
        .unwrap();
    assert_eq!(
        std::fs::read_to_string(dir.path().join("a.txt")).unwrap(),
        "two"
    );
    let error = out.metadata["history"]["error"].as_str().unwrap();
    assert!(error.contains("database is locked"), "{error}");
    assert_eq!(out.metadata["replacements"], 1);

    let out = WriteFile
        .run(&json!({"path": "b.txt", "content": "new"}), &ctx)
        .unwrap();
    assert!(out.metadata["history"]["error"].is_string());
    assert_eq!(out.metadata["bytes"], 3);
}
