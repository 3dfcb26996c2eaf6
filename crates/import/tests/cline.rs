//! Cline, Roo Code and Kilo Code: task folders found where each extension keeps them,
//! read into faithful sessions (tool calls with their results, usage and cost from the UI
//! log's requests), read again when any file of the folder changes, and never anything
//! stored twice or lost.
//!
//! The fixtures (`fixtures/cline`, `roo-code`, `kilo-code`) were written for Scribe after
//! the formats in the extensions' sources (fixtures/SOURCES.md). ccusage reads none of
//! these task folders (its `kilo` command reads the Kilo CLI's database), so the expected
//! figures are the fixtures' own: the sums of their `api_req_started` rows.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::path::{Path, PathBuf};

use common::*;
use scribe_import::{Source, sources};
use scribe_message::{Part, Role, ToolState};

const CLASSIC: &str = "1764590400000";
const CLI: &str = "1764667800000";
const ROO: &str = "0a4c8e2b-7d1f-4c55-9a0e-3f6b2d9e8c10";
const KILO: &str = "1764057600000";

fn roots(home: &Path, source: Source) -> Vec<PathBuf> {
    sources::importer(source).default_roots(&env(home, &[]))
}

fn tool_parts(db: &std::sync::Arc<scribe_db::Database>, id: &str) -> Vec<scribe_message::ToolPart> {
    messages(db, id)
        .into_iter()
        .flat_map(|m| m.parts)
        .filter_map(|p| match p.part {
            Part::Tool(t) => Some(t),
            _ => None,
        })
        .collect()
}

fn output(state: &ToolState) -> (&str, &str) {
    match state {
        ToolState::Completed { output, .. } => ("completed", output),
        ToolState::Error { message, .. } => ("error", message),
        ToolState::Running { .. } => ("running", ""),
        ToolState::Pending => ("pending", ""),
    }
}

#[test]
fn each_extension_is_found_where_it_keeps_its_tasks() {
    let dir = tempfile::tempdir().unwrap();
    let home = home(dir.path());
    let storage = home.join(".config/Code/User/globalStorage");
    assert_eq!(
        roots(&home, Source::Cline),
        [
            storage.join("saoudrizwan.claude-dev/tasks"),
            home.join(".cline/data/tasks")
        ]
    );
    assert_eq!(
        roots(&home, Source::RooCode),
        [storage.join("rooveterinaryinc.roo-cline/tasks")]
    );
    // Other editors are looked in too; where none has the extension, VS Code's place is
    // named so that a report says where it looked.
    let cursor = home.join(".config/Cursor/User/globalStorage/kilocode.kilo-code/tasks");
    std::fs::create_dir_all(&cursor).unwrap();
    assert_eq!(
        roots(&home, Source::KiloCode),
        [storage.join("kilocode.kilo-code/tasks"), cursor]
    );
    let empty = dir.path().join("empty");
    assert_eq!(
        roots(&empty, Source::RooCode),
        [empty.join(".config/Code/User/globalStorage/rooveterinaryinc.roo-cline/tasks")]
    );
    // XDG_CONFIG_HOME moves the editors' folder; CLINE_DIR and CLINE_DATA_DIR the CLI's.
    let moved = sources::importer(Source::Cline).default_roots(&env(
        &empty,
        &[("XDG_CONFIG_HOME", "/x/config"), ("CLINE_DIR", "/x/cline")],
    ));
    assert_eq!(moved, [PathBuf::from("/x/cline/data/tasks")]);
    let moved =
        sources::importer(Source::Cline).default_roots(&env(&empty, &[("CLINE_DATA_DIR", "~/d")]));
    assert_eq!(moved, [empty.join("d/tasks")]);
    let moved = sources::importer(Source::Cline)
        .default_roots(&env(&empty, &[("XDG_CONFIG_HOME", "/x/config")]));
    assert_eq!(
        moved,
        [PathBuf::from(
            "/x/config/Code/User/globalStorage/saoudrizwan.claude-dev/tasks"
        )]
    );
}

#[test]
fn a_cline_task_of_the_xml_protocol_reads_as_the_model_and_user_saw_it() {
    let dir = tempfile::tempdir().unwrap();
    let home = home(dir.path());
    let db = scribe_db(dir.path());
    let s = run(&db, Source::Cline, &roots(&home, Source::Cline));
    assert!(s.failed.is_empty() && s.malformed.is_empty(), "{s:?}");
    assert_eq!((s.files, s.files_read), (2, 2));

    let session = session(&db, CLASSIC);
    assert_eq!(session.source, "cline");
    assert_eq!(session.directory.as_deref(), Some("/home/dev/counter"));
    assert_eq!(session.model.as_deref(), Some("claude-sonnet-4-20250514"));
    // The four requests of the UI log, one per reply.
    assert_eq!(ccusage_view(&session.tokens), (17, 800, 10_870, 30_150));
    assert_eq!(session.api_call_count, 4);
    assert_eq!(session.tool_call_count, 4);
    assert_eq!(session.cost_status.as_deref(), Some("reported"));
    // The extension's own figure, reported.
    assert!((session.actual_cost_usd.unwrap() - 0.061_858_5).abs() < 1e-9);
    assert!((session.estimated_cost_usd - 0.061_858_5).abs() < 1e-9);
    assert_eq!(session.created_at, 1_764_590_400_000);

    let msgs = messages(&db, CLASSIC);
    let roles: Vec<Role> = msgs.iter().map(|m| m.role).collect();
    assert_eq!(roles, [Role::User, Role::Assistant].repeat(4));
    // The task is what the user typed; the environment details are the extension's.
    match (&msgs[0].parts[0].part, &msgs[0].parts[1].part) {
        (Part::Text(task), Part::Text(details)) => {
            assert_eq!(task.text, "Fix the off-by-one in src/main.rs");
            assert!(!task.synthetic);
            assert!(details.synthetic);
            assert!(details.text.starts_with("<environment_details>"));
        }
        other => panic!("{other:?}"),
    }
    // A reply: its <thinking>, its text, its call.
    let reply: Vec<&Part> = msgs[1].parts.iter().map(|p| &p.part).collect();
    match reply.as_slice() {
        [Part::Reasoning(r), Part::Text(t), Part::Tool(call)] => {
            assert_eq!(
                r.text,
                "The bug is in the loop bound; I need to read the file first."
            );
            assert_eq!(t.text, "Reading it first.");
            assert_eq!(call.tool, "read_file");
            assert_eq!(call.input, serde_json::json!({"path": "src/main.rs"}));
        }
        other => panic!("{other:?}"),
    }
    // Requests are timed by the UI log: the user message when its request was logged,
    // the reply 1 ms later.
    assert_eq!(msgs[2].created_at, 1_764_590_405_000);
    assert_eq!(msgs[3].created_at, 1_764_590_405_001);
    assert_eq!(msgs[1].usage.output, 120);
    assert_eq!(msgs[1].model.as_deref(), Some("claude-sonnet-4-20250514"));
    assert_eq!(msgs[1].provider.as_deref(), Some("anthropic"));

    let tools = tool_parts(&db, CLASSIC);
    let states: Vec<(&str, &str, &str)> = tools
        .iter()
        .map(|t| {
            let (state, out) = output(&t.state);
            (t.tool.as_str(), state, out)
        })
        .collect();
    assert_eq!(states[0].0, "read_file");
    assert_eq!(
        (states[0].1, states[0].2),
        (
            "completed",
            "fn main() {\n    for i in 0..9 {\n        println!(\"{i}\");\n    }\n}\n"
        )
    );
    assert_eq!((states[1].0, states[1].1), ("replace_in_file", "error"));
    assert!(states[1].2.contains("use a constant"), "{}", states[1].2);
    assert_eq!(
        states[2],
        (
            "write_to_file",
            "completed",
            "The content was successfully saved to src/main.rs."
        )
    );
    // The task ended on its completion, which no message answers.
    assert_eq!(states[3], ("attempt_completion", "completed", ""));
    // A file's text is kept as the model wrote it.
    assert_eq!(
        tools[2].input["content"],
        "const COUNT: u32 = 10;\n\nfn main() {\n    for i in 0..COUNT {\n        println!(\"{i}\");\n    }\n}"
    );
    // The results were taken out of the user messages; what is left is the details.
    for m in msgs.iter().skip(2).filter(|m| m.role == Role::User) {
        assert_eq!(m.parts.len(), 1, "{m:?}");
        assert!(matches!(&m.parts[0].part, Part::Text(t) if t.synthetic));
    }
}

#[test]
fn a_newer_cline_task_has_its_models_and_native_calls() {
    let dir = tempfile::tempdir().unwrap();
    let home = home(dir.path());
    let db = scribe_db(dir.path());
    run(&db, Source::Cline, &roots(&home, Source::Cline));
    let session = session(&db, CLI);
    assert_eq!(session.directory.as_deref(), Some("/home/dev/notes"));
    assert_eq!(
        session.model.as_deref(),
        Some("anthropic/claude-sonnet-4.5")
    );
    assert_eq!(ccusage_view(&session.tokens), (13, 155, 7_500, 7_200));
    let msgs = messages(&db, CLI);
    // Times are the conversation's own.
    let times: Vec<i64> = msgs
        .iter()
        .map(|m| m.created_at - 1_764_667_800_000)
        .collect();
    assert_eq!(times, [120, 3_000, 3_500, 6_000]);
    assert_eq!(msgs[1].provider.as_deref(), Some("cline"));
    match &msgs[1].parts[0].part {
        Part::Reasoning(r) => assert_eq!(r.signature.as_deref(), Some("c2lnLTE=")),
        other => panic!("{other:?}"),
    }
    let tools = tool_parts(&db, CLI);
    assert_eq!(tools[0].call_id, "toolu_01");
    assert_eq!(
        tools[0].input,
        serde_json::json!({"path": ".", "regex": "TODO"})
    );
    let (state, out) = output(&tools[0].state);
    assert_eq!(state, "completed");
    assert!(out.starts_with("Found 2 results."), "{out}");
    assert_eq!(output(&tools[1].state), ("completed", ""));
    // The tool result is the call's; the user message keeps the details only.
    assert_eq!(msgs[2].parts.len(), 1);
}

#[test]
fn roo_code_counts_the_cache_in_its_openai_input_sums_a_retried_request_and_links_sub_tasks() {
    let dir = tempfile::tempdir().unwrap();
    let home = home(dir.path());
    let db = scribe_db(dir.path());
    let s = run(&db, Source::RooCode, &roots(&home, Source::RooCode));
    assert!(s.failed.is_empty() && s.malformed.is_empty(), "{s:?}");
    let session = session(&db, ROO);
    assert_eq!(session.source, "roo-code");
    assert_eq!(session.directory.as_deref(), Some("/home/dev/app"));
    // Its history entry titles it, and the sub-task its new_task started is under it.
    assert_eq!(session.title.as_deref(), Some("Rename the util helper"));
    let child = self::session(&db, "5f1d7a3c-2b8e-4e09-8d61-7c4a9b0e2f35");
    assert_eq!(child.kind, scribe_session::SessionKind::Task);
    assert_eq!(child.parent_session_id.as_deref(), Some(ROO));
    assert_eq!(child.title, None);
    assert_eq!(ccusage_view(&child.tokens), (1_000, 60, 0, 2_000));
    // tokensIn less cache reads and writes: 12,000 − 8,000; 13,000 − 11,000 − 1,500;
    // 14,500 − 13,000.
    assert_eq!(ccusage_view(&session.tokens), (6_000, 570, 1_500, 32_000));
    assert_eq!(session.api_call_count, 4);
    let msgs = messages(&db, ROO);
    let replies: Vec<_> = msgs.iter().filter(|m| m.role == Role::Assistant).collect();
    // The failed request and its retry answered by one reply, which is no error.
    assert_eq!(replies[1].usage.input, 500);
    assert_eq!(replies[1].error, None);
    // The last reply was cancelled.
    assert_eq!(
        replies[2].error.as_ref().unwrap()["type"],
        serde_json::json!("user_cancelled")
    );
    let tools = tool_parts(&db, ROO);
    assert_eq!(tools[0].tool, "read_file");
    assert!(output(&tools[0].state).1.contains("export const helpr = 1"));
    // The user's feedback on a completion is that call's result.
    assert!(output(&tools[1].state).1.contains("also update the README"));
    // The extension's own figure, reported.
    assert!((session.actual_cost_usd.unwrap() - 0.037_33).abs() < 1e-9);
    assert!((session.estimated_cost_usd - 0.037_33).abs() < 1e-9);
}

#[test]
fn kilo_code_without_a_cost_or_a_model_keeps_its_tokens_and_says_the_cost_is_unknown() {
    let dir = tempfile::tempdir().unwrap();
    let home = home(dir.path());
    let db = scribe_db(dir.path());
    run(&db, Source::KiloCode, &roots(&home, Source::KiloCode));
    let session = session(&db, KILO);
    assert_eq!(session.source, "kilo-code");
    assert_eq!(ccusage_view(&session.tokens), (900, 40, 0, 0));
    assert_eq!(session.cost_status.as_deref(), Some("unknown"));
    assert_eq!(session.estimated_cost_usd, 0.0);
}

/// A task as the extension writes it while it runs: `(role, text)` turns, and the UI log's
/// requests (`tokensIn`, `tokensOut`) at the times given.
fn write_task(dir: &Path, turns: &[(&str, &str)], requests: &[(i64, i64, i64)]) {
    std::fs::create_dir_all(dir).unwrap();
    let conversation: Vec<serde_json::Value> = turns
        .iter()
        .map(|(role, text)| serde_json::json!({"role": role, "content": [{"type": "text", "text": text}]}))
        .collect();
    std::fs::write(
        dir.join("api_conversation_history.json"),
        serde_json::to_string(&conversation).unwrap(),
    )
    .unwrap();
    let ui: Vec<serde_json::Value> = requests
        .iter()
        .map(|(ts, tin, tout)| {
            serde_json::json!({"ts": ts, "type": "say", "say": "api_req_started",
                "text": serde_json::json!({"tokensIn": tin, "tokensOut": tout, "cost": 0.01}).to_string()})
        })
        .collect();
    std::fs::write(
        dir.join("ui_messages.json"),
        serde_json::to_string(&ui).unwrap(),
    )
    .unwrap();
}

#[test]
fn a_running_task_is_read_again_as_it_grows_and_nothing_is_counted_twice() {
    let dir = tempfile::tempdir().unwrap();
    let db = scribe_db(dir.path());
    let root = dir.path().join("tasks");
    let task = root.join("1764000000000");
    // The first request is logged and its user message added; no reply yet.
    write_task(
        &task,
        &[("user", "<task>\nhi\n</task>")],
        &[(1_764_000_000_010, 10, 5)],
    );
    let first = run(&db, Source::Cline, std::slice::from_ref(&root));
    assert_eq!(first.written.messages_inserted, 1);
    assert_eq!(
        session(&db, "1764000000000").tokens.input,
        0,
        "no reply yet"
    );
    // Nothing changed: one stat, nothing read.
    let again = run(&db, Source::Cline, std::slice::from_ref(&root));
    assert_eq!((again.files_read, again.files_unchanged), (0, 1));
    // The reply arrives.
    std::thread::sleep(std::time::Duration::from_millis(20));
    write_task(
        &task,
        &[("user", "<task>\nhi\n</task>"), ("assistant", "Hello.")],
        &[(1_764_000_000_010, 10, 5)],
    );
    let grown = run(&db, Source::Cline, std::slice::from_ref(&root));
    assert_eq!(grown.files_read, 1);
    assert_eq!(grown.written.messages_inserted, 1);
    let s = session(&db, "1764000000000");
    assert_eq!(
        (s.tokens.input, s.tokens.output, s.message_count),
        (10, 5, 2)
    );
    // Only the UI log changes (the next request is logged): the task is read again, and
    // what it held before is stored once.
    std::thread::sleep(std::time::Duration::from_millis(20));
    let ui = task.join("ui_messages.json");
    let mut rows: Vec<serde_json::Value> =
        serde_json::from_str(&std::fs::read_to_string(&ui).unwrap()).unwrap();
    rows.push(
        serde_json::json!({"ts": 1_764_000_009_000_i64, "type": "say", "say": "api_req_started",
        "text": "{\"tokensIn\": 7, \"tokensOut\": 1}"}),
    );
    std::fs::write(&ui, serde_json::to_string(&rows).unwrap()).unwrap();
    let touched = run(&db, Source::Cline, std::slice::from_ref(&root));
    assert_eq!(touched.files_read, 1, "a companion's change is the task's");
    assert_eq!(touched.written.messages_inserted, 0);
    let s = session(&db, "1764000000000");
    assert_eq!(
        (s.tokens.input, s.tokens.output, s.message_count),
        (10, 5, 2)
    );
    assert_eq!(s.api_call_count, 1, "the new request has no reply yet");
}

#[test]
fn broken_files_are_reported_and_the_rest_is_imported_untouched() {
    let dir = tempfile::tempdir().unwrap();
    let db = scribe_db(dir.path());
    let root = dir.path().join("tasks");
    write_task(
        &root.join("1764000000001"),
        &[("user", "<task>\nfine\n</task>"), ("assistant", "Yes.")],
        &[(1_764_000_000_010, 3, 2)],
    );
    // A conversation that is not JSON: that task fails alone.
    let broken = root.join("1764000000002");
    std::fs::create_dir_all(&broken).unwrap();
    std::fs::write(broken.join("api_conversation_history.json"), "[{\"role\":").unwrap();
    // A UI log that is not JSON: the conversation is still read, with no usage.
    let no_log = root.join("1764000000003");
    write_task(
        &no_log,
        &[
            ("user", "<task>\nstill here\n</task>"),
            ("assistant", "Yes."),
        ],
        &[],
    );
    std::fs::write(no_log.join("ui_messages.json"), "not json").unwrap();
    let before = listing(&root);
    let s = run(&db, Source::Cline, std::slice::from_ref(&root));
    assert_eq!(s.failed.len(), 1, "{s:?}");
    assert!(s.failed[0].path.contains("1764000000002"), "{s:?}");
    assert_eq!(s.malformed.len(), 1, "{s:?}");
    assert!(s.malformed[0].path.ends_with("ui_messages.json"), "{s:?}");
    assert_eq!(sessions(&db).len(), 2);
    assert_eq!(messages(&db, "1764000000003").len(), 2);
    assert_eq!(session(&db, "1764000000001").tokens.input, 3);
    // Read, never written: every file as it was.
    assert_eq!(listing(&root), before);
}

#[test]
fn a_condensed_summary_is_a_summary_and_a_call_left_unanswered_failed() {
    let dir = tempfile::tempdir().unwrap();
    let db = scribe_db(dir.path());
    let task = dir.path().join("tasks/abc");
    std::fs::create_dir_all(&task).unwrap();
    let conversation = serde_json::json!([
        {"role": "user", "ts": 1_000_000_000_100_i64, "content": "<task>\ngo\n</task>"},
        {"role": "assistant", "ts": 1_000_000_000_200_i64, "content": [
            {"type": "tool_use", "id": "t1", "name": "execute_command", "input": {"command": "ls"}}]},
        // The task was resumed: the call never got its result.
        {"role": "user", "ts": 1_000_000_000_300_i64, "content": [
            {"type": "text", "text": "[TASK RESUMPTION] This task was interrupted 1 minute ago."},
            {"type": "tool_result", "tool_use_id": "nobody", "content": "stray"}]},
        {"role": "assistant", "ts": 1_000_000_000_400_i64, "isSummary": true,
         "content": "## Summary\nListed files."},
        {"role": "system", "ts": 1_000_000_000_500_i64, "content": "?"}
    ]);
    std::fs::write(
        task.join("api_conversation_history.json"),
        conversation.to_string(),
    )
    .unwrap();
    let s = run(&db, Source::RooCode, &[dir.path().join("tasks")]);
    assert!(s.failed.is_empty(), "{s:?}");
    assert_eq!(s.skipped.get("message:system"), Some(&1), "{s:?}");
    assert_eq!(s.skipped.get("tool_result:without-call"), Some(&1), "{s:?}");
    let msgs = messages(&db, "abc");
    assert_eq!(msgs.len(), 4);
    assert!(msgs[3].is_summary);
    match &msgs[2].parts[0].part {
        Part::Text(t) => assert!(t.synthetic),
        other => panic!("{other:?}"),
    }
    let tools = tool_parts(&db, "abc");
    assert_eq!(output(&tools[0].state).0, "error");
    // No UI log: the session starts at its first message.
    assert_eq!(session(&db, "abc").created_at, 1_000_000_000_100);
}

/// The task's totals are Cline's own (`getApiMetrics`): requests, what requests a
/// checkpoint restore removed had spent, and sub-agents; an old Cline's
/// `api_req_finished` row completes the request before it.
#[test]
fn every_row_cline_counts_in_its_totals_is_counted_once() {
    let dir = tempfile::tempdir().unwrap();
    let db = scribe_db(dir.path());
    let task = dir.path().join("tasks/1764000000009");
    write_task(
        &task,
        &[
            ("user", "<task>\nfirst\n</task>"),
            ("assistant", "One."),
            ("user", "<feedback>\nmore\n</feedback>"),
            ("assistant", "Two."),
        ],
        &[],
    );
    let row = |ts: i64, say: &str, text: serde_json::Value| serde_json::json!({"ts": ts, "type": "say", "say": say, "text": text.to_string()});
    let mut second = row(
        1_764_000_002_000,
        "api_req_started",
        serde_json::json!({"tokensIn": 7, "tokensOut": 3, "cost": 0.02}),
    );
    second["modelInfo"] =
        serde_json::json!({"modelId": "claude-haiku-4-5", "providerId": "anthropic"});
    let ui = serde_json::json!([
        row(
            1_764_000_001_000,
            "deleted_api_reqs",
            serde_json::json!({"tokensIn": 1, "tokensOut": 1, "cost": 0.001})
        ),
        row(
            1_764_000_001_010,
            "api_req_started",
            serde_json::json!({"request": "<task>\nfirst\n</task>"})
        ),
        row(
            1_764_000_001_020,
            "api_req_finished",
            serde_json::json!({"tokensIn": 5, "tokensOut": 2, "cost": 0.01})
        ),
        row(
            1_764_000_001_500,
            "subagent_usage",
            serde_json::json!({"source": "subagents", "tokensIn": 100, "tokensOut": 10, "cost": 0.2})
        ),
        second,
    ]);
    std::fs::write(task.join("ui_messages.json"), ui.to_string()).unwrap();
    run(&db, Source::Cline, &[dir.path().join("tasks")]);
    let s = session(&db, "1764000000009");
    assert_eq!((s.tokens.input, s.tokens.output), (113, 16));
    assert_eq!(
        s.api_call_count, 2,
        "two requests; the other rows are no calls"
    );
    assert!((s.actual_cost_usd.unwrap() - 0.231).abs() < 1e-9, "{s:?}");
    let msgs = messages(&db, "1764000000009");
    assert_eq!((msgs[1].usage.input, msgs[1].usage.output), (106, 13));
    assert_eq!(msgs[3].usage.input, 7);
    assert_eq!(msgs[3].model.as_deref(), Some("claude-haiku-4-5"));
    // The user's feedback is what they typed.
    match &msgs[2].parts[0].part {
        Part::Text(t) => assert_eq!((t.text.as_str(), t.synthetic), ("more", false)),
        other => panic!("{other:?}"),
    }
}

#[test]
fn calls_of_one_reply_take_the_results_in_order() {
    let dir = tempfile::tempdir().unwrap();
    let db = scribe_db(dir.path());
    let task = dir.path().join("tasks/1764000000010");
    std::fs::create_dir_all(&task).unwrap();
    let text = |t: &str| serde_json::json!({"type": "text", "text": t});
    let conversation = serde_json::json!([
        {"role": "user", "content": "<task>\nread both\n</task>"},
        {"role": "assistant", "content": [
            text("<read_file>\n<path>a.txt</path>\n</read_file>"),
            text("<read_file>\n<path>b.txt</path>\n</read_file>")]},
        {"role": "user", "content": [
            text("[read_file for 'a.txt'] Result:"), text("A"),
            text("[read_file for 'b.txt'] Result:"), text("B"),
            text("[read_file for 'c.txt'] Result:")]}
    ]);
    std::fs::write(
        task.join("api_conversation_history.json"),
        conversation.to_string(),
    )
    .unwrap();
    run(&db, Source::Cline, &[dir.path().join("tasks")]);
    let tools = tool_parts(&db, "1764000000010");
    let got: Vec<(&str, &str)> = tools.iter().map(|t| output(&t.state)).collect();
    assert_eq!(got, [("completed", "A"), ("completed", "B")]);
    assert_eq!(tools[1].input, serde_json::json!({"path": "b.txt"}));
    // A result with no call to belong to stays in its message, as the extension's text.
    let msgs = messages(&db, "1764000000010");
    match &msgs[2].parts[..] {
        [p] => assert!(matches!(&p.part, Part::Text(t) if t.synthetic && t.text.contains("c.txt"))),
        other => panic!("{other:?}"),
    }
}
