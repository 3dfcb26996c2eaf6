//! What the sources say about records after the fact: a Codex `thread_rolled_back`
//! marks the turns it undid; a Claude Code Task (or Agent) call is linked to the sub-agent
//! session it started, whether the sub-agent's lines are inline (matched by prompt) or in
//! a file of their own; a Claude Code `summary` titles the session whose leaf it names.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::io::Write;
use std::path::Path;

use common::*;
use scribe_import::Source;
use serde_json::{Value, json};

fn write_lines(path: &Path, lines: &[Value]) {
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    let text: String = lines.iter().map(|l| format!("{l}\n")).collect();
    std::fs::write(path, text).unwrap();
}

fn append_lines(path: &Path, lines: &[Value]) {
    let mut f = std::fs::OpenOptions::new().append(true).open(path).unwrap();
    for l in lines {
        writeln!(f, "{l}").unwrap();
    }
}

// ---- Codex: thread_rolled_back -------------------------------------------------------

const THREAD: &str = "0199aaaa-0000-7000-8000-000000000001";

fn at(second: u32) -> String {
    format!("2026-03-01T10:00:{second:02}.000Z")
}

fn codex_line(second: u32, kind: &str, payload: Value) -> Value {
    json!({"timestamp": at(second), "type": kind, "payload": payload})
}

fn turn(second: u32, prompt: &str, answer: &str, total_in: i64, total_out: i64) -> Vec<Value> {
    let usage = json!({"input_tokens": total_in, "cached_input_tokens": 0,
                       "output_tokens": total_out, "reasoning_output_tokens": 0});
    vec![
        codex_line(
            second,
            "event_msg",
            json!({"type": "user_message", "message": prompt}),
        ),
        codex_line(
            second + 1,
            "response_item",
            json!({"type": "message", "role": "assistant",
                   "content": [{"type": "output_text", "text": answer}]}),
        ),
        codex_line(
            second + 2,
            "event_msg",
            json!({"type": "token_count",
                   "info": {"total_token_usage": usage, "last_token_usage": usage}}),
        ),
    ]
}

/// A rollout of three turns whose second was rolled back: before the rollback, and after.
fn rollout() -> (Vec<Value>, Vec<Value>) {
    let mut before = vec![codex_line(
        0,
        "session_meta",
        json!({"id": THREAD, "timestamp": at(0), "cwd": "/w", "originator": "codex_cli_rs",
               "cli_version": "0.100.0", "source": "cli", "model_provider": "openai"}),
    )];
    before.extend(turn(1, "first", "one", 100, 10));
    before.extend(turn(10, "second", "two", 220, 20));
    let mut after = vec![codex_line(
        20,
        "event_msg",
        json!({"type": "thread_rolled_back", "num_turns": 1}),
    )];
    after.extend(turn(30, "third", "three", 340, 30));
    (before, after)
}

/// (text, rolled back) of every message of the thread, in order.
fn marked(db: &std::sync::Arc<scribe_db::Database>) -> Vec<(String, bool)> {
    messages(db, THREAD)
        .iter()
        .map(|m| {
            let rolled = m.error.as_ref().is_some_and(|e| e["type"] == "rolled_back");
            (m.text(), rolled)
        })
        .collect()
}

#[test]
fn a_codex_rollback_marks_the_turns_it_undid_and_keeps_their_usage() {
    let expected: Vec<(String, bool)> = [
        ("first", false),
        ("one", false),
        ("second", true),
        ("two", true),
        ("third", false),
        ("three", false),
    ]
    .iter()
    .map(|(t, r)| ((*t).to_owned(), *r))
    .collect();
    let (before, after) = rollout();
    // Read in one go, and with the rollback arriving in a later import than its turns.
    for split in [false, true] {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().join("in");
        let file = root.join(format!("rollout-2026-03-01T10-00-00-{THREAD}.jsonl"));
        let db = scribe_db(dir.path());
        if split {
            write_lines(&file, &before);
            run(&db, Source::Codex, std::slice::from_ref(&root));
            append_lines(&file, &after);
        } else {
            write_lines(&file, &[before.clone(), after.clone()].concat());
        }
        run(&db, Source::Codex, std::slice::from_ref(&root));
        assert_eq!(marked(&db), expected, "split: {split}");
        // Codex spent the tokens of the undone turn too: they stay counted.
        let s = session(&db, THREAD);
        assert_eq!(
            (s.tokens.input, s.tokens.output),
            (340, 30),
            "split: {split}"
        );
        // Importing again changes nothing.
        let stored = dump(&db);
        std::fs::write(&file, std::fs::read(&file).unwrap()).unwrap();
        run(&db, Source::Codex, std::slice::from_ref(&root));
        assert_same(&dump(&db), &stored, "again");
    }
}

// ---- Claude Code: Task calls and the sessions they started ----------------------------

fn claude_line(
    uuid: &str,
    parent: Option<&str>,
    session: &str,
    sidechain: bool,
    second: u32,
    message: Value,
) -> Value {
    let kind = message["role"].clone();
    json!({"parentUuid": parent, "isSidechain": sidechain, "userType": "external",
           "cwd": "/w", "sessionId": session, "version": "1.0.108", "type": kind,
           "message": message, "uuid": uuid,
           "timestamp": format!("2025-08-01T10:00:{second:02}.000Z")})
}

fn said(text: &str) -> Value {
    json!({"role": "user", "content": text})
}

fn answer(id: &str, blocks: Value) -> Value {
    json!({"id": id, "type": "message", "role": "assistant",
           "model": "claude-sonnet-4-20250514", "content": blocks, "stop_reason": "end_turn",
           "usage": {"input_tokens": 10, "output_tokens": 5,
                     "cache_creation_input_tokens": 0, "cache_read_input_tokens": 0}})
}

fn task_call(id: &str, description: &str, prompt: &str) -> Value {
    json!({"type": "tool_use", "id": id, "name": "Task",
           "input": {"description": description, "prompt": prompt,
                     "subagent_type": "general-purpose"}})
}

/// A user line carrying the result of `call`, with `toolUseResult` as the line has it.
fn task_result(
    uuid: &str,
    parent: &str,
    session: &str,
    second: u32,
    call: &str,
    tool_use_result: Value,
) -> Value {
    let mut line = claude_line(
        uuid,
        Some(parent),
        session,
        false,
        second,
        json!({"role": "user",
               "content": [{"type": "tool_result", "tool_use_id": call, "content": "done"}]}),
    );
    line["toolUseResult"] = tool_use_result;
    line
}

/// The session named by the metadata of `session`'s tool part for `call`.
fn linked(db: &std::sync::Arc<scribe_db::Database>, session: &str, call: &str) -> Option<String> {
    messages(db, session)
        .iter()
        .flat_map(|m| m.parts.iter())
        .find_map(|p| match &p.part {
            scribe_message::Part::Tool(t) if t.call_id == call => match &t.state {
                scribe_message::ToolState::Completed { metadata, .. } => {
                    metadata["session_id"].as_str().map(str::to_owned)
                }
                // A failed call has no metadata: the part itself names the session.
                scribe_message::ToolState::Error { .. } => {
                    t.extra.get("session_id")?.as_str().map(str::to_owned)
                }
                _ => None,
            },
            _ => None,
        })
}

const PARENT: &str = "5e7a0000-0000-4000-8000-000000000001";

#[test]
fn inline_sidechains_are_matched_to_their_task_calls_by_prompt() {
    let s = PARENT;
    // Two parallel Task calls; their sidechains start in the other order and interleave,
    // and the results come back in yet another order.
    let lines = vec![
        claude_line("u1", None, s, false, 1, said("Look at two things")),
        claude_line(
            "a1",
            Some("u1"),
            s,
            false,
            2,
            answer(
                "msg_1",
                json!([
                    task_call("toolu_A", "find todos", "Find TODO comments"),
                    task_call("toolu_B", "count lines", "Count lines of code")
                ]),
            ),
        ),
        claude_line("s1", None, s, true, 3, said("Count lines of code")),
        claude_line("s2", None, s, true, 4, said("Find TODO comments")),
        claude_line(
            "s3",
            Some("s1"),
            s,
            true,
            5,
            answer("msg_s3", json!([{"type": "text", "text": "1200 lines"}])),
        ),
        claude_line(
            "s4",
            Some("s2"),
            s,
            true,
            6,
            answer("msg_s4", json!([{"type": "text", "text": "3 TODOs"}])),
        ),
        task_result("r1", "a1", s, 7, "toolu_B", json!({"status": "completed"})),
        task_result("r2", "a1", s, 8, "toolu_A", Value::Null),
        claude_line(
            "a2",
            Some("r2"),
            s,
            false,
            9,
            answer("msg_2", json!([{"type": "text", "text": "Both done."}])),
        ),
    ];
    let todos = format!("{s}:sidechain:s2");
    let count = format!("{s}:sidechain:s1");
    // In one import, and with the results read by a later import than the sidechains.
    for split in [None, Some(6)] {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().join("projects");
        let file = root.join("-w").join(format!("{s}.jsonl"));
        let db = scribe_db(dir.path());
        match split {
            Some(n) => {
                write_lines(&file, &lines[..n]);
                run(&db, Source::ClaudeCode, std::slice::from_ref(&root));
                append_lines(&file, &lines[n..]);
            }
            None => write_lines(&file, &lines),
        }
        run(&db, Source::ClaudeCode, std::slice::from_ref(&root));
        assert_eq!(linked(&db, s, "toolu_A"), Some(todos.clone()), "{split:?}");
        assert_eq!(linked(&db, s, "toolu_B"), Some(count.clone()), "{split:?}");
        for (child, title, text) in [
            (&todos, "find todos", "3 TODOs"),
            (&count, "count lines", "1200 lines"),
        ] {
            let c = session(&db, child);
            assert_eq!(c.kind, scribe_session::SessionKind::Task);
            assert_eq!(c.parent_session_id.as_deref(), Some(s));
            assert_eq!(c.title.as_deref(), Some(title));
            assert_eq!(messages(&db, child)[1].text(), text);
        }
    }
}

#[test]
fn a_task_call_is_linked_to_its_agent_file() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("projects");
    let project = root.join("-w");
    // 2.0.28: agent-<agentId>.jsonl beside the session; the call's result names the agent.
    let s = PARENT;
    write_lines(
        &project.join(format!("{s}.jsonl")),
        &[
            claude_line("u1", None, s, false, 1, said("Run the tests")),
            claude_line(
                "a1",
                Some("u1"),
                s,
                false,
                2,
                answer(
                    "msg_1",
                    json!([task_call("toolu_C", "run tests", "Run the test suite")]),
                ),
            ),
            task_result(
                "r1",
                "a1",
                s,
                9,
                "toolu_C",
                json!({"agentId": "abc123", "status": "completed"}),
            ),
        ],
    );
    write_lines(
        &project.join("agent-abc123.jsonl"),
        &[
            claude_line("c1", None, s, true, 3, said("Run the test suite")),
            claude_line(
                "c2",
                Some("c1"),
                s,
                true,
                4,
                answer("msg_c2", json!([{"type": "text", "text": "All green."}])),
            ),
        ],
    );
    // Newer: <session>/subagents/agent-<id>.jsonl, whose meta file names the call.
    let t = "5e7a0000-0000-4000-8000-000000000002";
    write_lines(
        &project.join(format!("{t}.jsonl")),
        &[
            claude_line("v1", None, t, false, 1, said("Search")),
            claude_line(
                "b1",
                Some("v1"),
                t,
                false,
                2,
                answer(
                    "msg_3",
                    json!([task_call("toolu_D", "search", "Search the repo")]),
                ),
            ),
            task_result("w1", "b1", t, 9, "toolu_D", json!({"status": "completed"})),
        ],
    );
    let agents = project.join(t).join("subagents");
    write_lines(
        &agents.join("agent-xyz.jsonl"),
        &[claude_line("d1", None, t, true, 3, said("Search the repo"))],
    );
    std::fs::write(
        agents.join("agent-xyz.meta.json"),
        json!({"agentType": "general-purpose", "description": "search", "toolUseId": "toolu_D"})
            .to_string(),
    )
    .unwrap();
    let db = scribe_db(dir.path());
    run(&db, Source::ClaudeCode, std::slice::from_ref(&root));
    assert_eq!(linked(&db, s, "toolu_C").as_deref(), Some("agent-abc123"));
    assert_eq!(linked(&db, t, "toolu_D").as_deref(), Some("agent-xyz"));
    for (child, parent) in [("agent-abc123", s), ("agent-xyz", t)] {
        let c = session(&db, child);
        assert_eq!(c.kind, scribe_session::SessionKind::Task);
        assert_eq!(c.parent_session_id.as_deref(), Some(parent));
    }
}

/// A user line carrying a failed result of `call` (`is_error`), with `toolUseResult` as
/// Claude Code writes it for an error: the error text.
fn task_error(uuid: &str, parent: &str, session: &str, second: u32, call: &str) -> Value {
    let text = "[Request interrupted by user for tool use]";
    let mut line = claude_line(
        uuid,
        Some(parent),
        session,
        false,
        second,
        json!({"role": "user",
               "content": [{"type": "tool_result", "tool_use_id": call, "content": text,
                            "is_error": true}]}),
    );
    line["toolUseResult"] = json!(format!("Error: {text}"));
    line
}

fn failed_state(db: &std::sync::Arc<scribe_db::Database>, session: &str, call: &str) -> bool {
    messages(db, session)
        .iter()
        .flat_map(|m| m.parts.iter())
        .any(|p| {
            matches!(&p.part, scribe_message::Part::Tool(t)
            if t.call_id == call && matches!(t.state, scribe_message::ToolState::Error { .. }))
        })
}

#[test]
fn a_failed_task_call_is_linked_to_the_session_it_started() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("projects");
    let project = root.join("-w");
    // Inline (<= 2.0.27): the sidechain ran, then the call was interrupted.
    let s = PARENT;
    write_lines(
        &project.join(format!("{s}.jsonl")),
        &[
            claude_line("u1", None, s, false, 1, said("Look around")),
            claude_line(
                "a1",
                Some("u1"),
                s,
                false,
                2,
                answer(
                    "msg_1",
                    json!([task_call("toolu_E", "look", "Look at the layout")]),
                ),
            ),
            claude_line("s1", None, s, true, 3, said("Look at the layout")),
            claude_line(
                "s2",
                Some("s1"),
                s,
                true,
                4,
                answer("msg_s2", json!([{"type": "text", "text": "Half way"}])),
            ),
            task_error("r1", "a1", s, 5, "toolu_E"),
        ],
    );
    // Newer 2.x: the agent's file and meta under subagents/; the result is an error
    // without an agentId.
    let t = "5e7a0000-0000-4000-8000-000000000003";
    write_lines(
        &project.join(format!("{t}.jsonl")),
        &[
            claude_line("v1", None, t, false, 1, said("Search")),
            claude_line(
                "b1",
                Some("v1"),
                t,
                false,
                2,
                answer(
                    "msg_3",
                    json!([task_call("toolu_F", "search", "Search the repo")]),
                ),
            ),
            task_error("w1", "b1", t, 9, "toolu_F"),
        ],
    );
    let agents = project.join(t).join("subagents");
    write_lines(
        &agents.join("agent-failed.jsonl"),
        &[claude_line("d1", None, t, true, 3, said("Search the repo"))],
    );
    std::fs::write(
        agents.join("agent-failed.meta.json"),
        json!({"agentType": "general-purpose", "description": "search", "toolUseId": "toolu_F"})
            .to_string(),
    )
    .unwrap();
    let db = scribe_db(dir.path());
    run(&db, Source::ClaudeCode, std::slice::from_ref(&root));
    let inline = format!("{s}:sidechain:s1");
    for (parent, call, child) in [
        (s, "toolu_E", inline.as_str()),
        (t, "toolu_F", "agent-failed"),
    ] {
        assert!(
            failed_state(&db, parent, call),
            "{call} stays a failed call"
        );
        assert_eq!(linked(&db, parent, call).as_deref(), Some(child), "{call}");
        let c = session(&db, child);
        assert_eq!(c.kind, scribe_session::SessionKind::Task);
        assert_eq!(c.parent_session_id.as_deref(), Some(parent));
    }
    // A second import changes nothing.
    let again = run(&db, Source::ClaudeCode, std::slice::from_ref(&root));
    assert_eq!(again.files_read, 0);
}

// ---- Claude Code: summaries title the session whose leaf they name --------------------

fn summary(text: &str, leaf: &str) -> Value {
    json!({"type": "summary", "summary": text, "leafUuid": leaf})
}

fn set_age(path: &Path, secs_ago: u64) {
    let when = std::time::SystemTime::now() - std::time::Duration::from_secs(secs_ago);
    std::fs::File::options()
        .write(true)
        .open(path)
        .unwrap()
        .set_modified(when)
        .unwrap();
}

const EARLIER: &str = "5e7a0000-0000-4000-8000-00000000000a";
const LATER: &str = "5e7a0000-0000-4000-8000-00000000000b";

fn earlier_conversation() -> Vec<Value> {
    vec![
        claude_line("x1", None, EARLIER, false, 1, said("hello")),
        claude_line(
            "x2",
            Some("x1"),
            EARLIER,
            false,
            2,
            answer("msg_x2", json!([{"type": "text", "text": "Hi!"}])),
        ),
    ]
}

/// A later conversation whose file starts with a summary of the earlier one.
fn later_conversation() -> Vec<Value> {
    vec![
        summary("Greeting the user", "x2"),
        claude_line("y1", None, LATER, false, 10, said("something else")),
        claude_line(
            "y2",
            Some("y1"),
            LATER,
            false,
            11,
            answer("msg_y2", json!([{"type": "text", "text": "Sure."}])),
        ),
    ]
}

#[test]
fn a_summary_in_a_later_file_titles_the_session_it_names() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("projects");
    let (a, b) = (
        root.join("-w").join(format!("{EARLIER}.jsonl")),
        root.join("-w").join(format!("{LATER}.jsonl")),
    );
    write_lines(&a, &earlier_conversation());
    write_lines(&b, &later_conversation());
    set_age(&a, 60);
    let db = scribe_db(dir.path());
    run(&db, Source::ClaudeCode, std::slice::from_ref(&root));
    assert_eq!(
        session(&db, EARLIER).title.as_deref(),
        Some("Greeting the user")
    );
    assert_eq!(session(&db, LATER).title, None);
    // A summary of its own conversation, after the lines it names, titles its own session;
    // a stronger title (the user's) is not replaced by a later summary.
    append_lines(&b, &[summary("Something else entirely", "y2")]);
    append_lines(
        &a,
        &[json!({"type": "custom-title", "customTitle": "Mine", "sessionId": EARLIER})],
    );
    run(&db, Source::ClaudeCode, std::slice::from_ref(&root));
    assert_eq!(
        session(&db, LATER).title.as_deref(),
        Some("Something else entirely")
    );
    assert_eq!(session(&db, EARLIER).title.as_deref(), Some("Mine"));
    append_lines(&b, &[summary("Greeting, again", "x2")]);
    run(&db, Source::ClaudeCode, std::slice::from_ref(&root));
    assert_eq!(session(&db, EARLIER).title.as_deref(), Some("Mine"));
}

#[test]
fn a_summary_naming_a_session_not_imported_yet_waits_for_it() {
    let dir = tempfile::tempdir().unwrap();
    let (first, second) = (dir.path().join("first"), dir.path().join("second"));
    write_lines(&first.join(format!("{LATER}.jsonl")), &later_conversation());
    write_lines(
        &second.join(format!("{EARLIER}.jsonl")),
        &earlier_conversation(),
    );
    let db = scribe_db(dir.path());
    run(&db, Source::ClaudeCode, std::slice::from_ref(&first));
    assert_eq!(session(&db, LATER).title, None);
    run(&db, Source::ClaudeCode, std::slice::from_ref(&second));
    assert_eq!(
        session(&db, EARLIER).title.as_deref(),
        Some("Greeting the user")
    );
    assert_eq!(session(&db, LATER).title, None);
}

// ---- Claude Code: a rewind (Esc-Esc) --------------------------------------------------

const REWOUND: &str = "5e7a0000-0000-4000-8000-0000000000c1";

/// A line that is not conversation: a hook's attachment answering `parent`.
fn hook(uuid: &str, parent: &str, second: u32) -> Value {
    json!({"parentUuid": parent, "isSidechain": false, "cwd": "/w", "sessionId": REWOUND,
           "type": "attachment", "attachment": {"type": "hook_success", "content": ""},
           "uuid": uuid, "timestamp": format!("2025-08-01T10:00:{second:02}.000Z")})
}

fn line(uuid: &str, parent: Option<&str>, second: u32, message: Value) -> Value {
    claude_line(uuid, parent, REWOUND, false, second, message)
}

fn reply(uuid: &str, parent: &str, second: u32, text: &str) -> Value {
    let id = format!("msg_{uuid}");
    line(
        uuid,
        Some(parent),
        second,
        answer(&id, json!([{"type": "text", "text": text}])),
    )
}

/// A conversation of three prompts, then a rewind to before the second: the new prompt
/// answers the first reply, as the second did (each through a hook's line).
fn rewound_conversation() -> (Vec<Value>, Vec<Value>) {
    let call = json!([{"type": "tool_use", "id": "toolu_r1", "name": "Bash",
                       "input": {"command": "cargo bench"}}]);
    let before = vec![
        line("u1", None, 0, said("write a parser")),
        reply("a1", "u1", 5, "Here is a parser."),
        hook("h1", "a1", 9),
        line("u2", Some("h1"), 10, said("make it faster")),
        line("a2", Some("u2"), 15, answer("msg_a2", call)),
        line(
            "r2",
            Some("a2"),
            16,
            json!({"role": "user", "content": [{"type": "tool_result",
                   "tool_use_id": "toolu_r1", "content": "12 ns"}]}),
        ),
        reply("a2b", "r2", 17, "Faster now."),
        line("u3", Some("a2b"), 20, said("add tests")),
        reply("a3", "u3", 25, "Tests added."),
    ];
    let after = vec![
        hook("h2", "a1", 29),
        line("u2b", Some("h2"), 30, said("make it shorter")),
        reply("a4", "u2b", 35, "Shorter now."),
    ];
    (before, after)
}

/// (text, rewound) of every message of `session`, in order.
fn rewound(db: &std::sync::Arc<scribe_db::Database>, session: &str) -> Vec<(String, bool)> {
    messages(db, session)
        .iter()
        .map(|m| {
            let undone = m.error.as_ref().is_some_and(|e| {
                e["type"] == "rewound" && e["message"] == "undone by a rewind in Claude Code"
            });
            (m.text(), undone)
        })
        .collect()
}

#[test]
fn a_claude_code_rewind_marks_the_branch_it_left_and_keeps_its_usage() {
    let expected: Vec<(String, bool)> = [
        ("write a parser", false),
        ("Here is a parser.", false),
        ("make it faster", true),
        ("", true),
        ("Faster now.", true),
        ("add tests", true),
        ("Tests added.", true),
        ("make it shorter", false),
        ("Shorter now.", false),
    ]
    .iter()
    .map(|(t, r)| ((*t).to_owned(), *r))
    .collect();
    let (before, after) = rewound_conversation();
    // Read in one go, and with the rewind arriving in a later import than the branch.
    for split in [false, true] {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().join("projects");
        let file = root.join("-w").join(format!("{REWOUND}.jsonl"));
        let db = scribe_db(dir.path());
        if split {
            write_lines(&file, &before);
            run(&db, Source::ClaudeCode, std::slice::from_ref(&root));
            assert!(
                rewound(&db, REWOUND).iter().all(|(_, r)| !r),
                "nothing is rewound before the rewind"
            );
            append_lines(&file, &after);
        } else {
            write_lines(&file, &[before.clone(), after.clone()].concat());
        }
        run(&db, Source::ClaudeCode, std::slice::from_ref(&root));
        assert_eq!(rewound(&db, REWOUND), expected, "split: {split}");
        // The left branch's calls were made and paid for: their tokens stay counted.
        let s = session(&db, REWOUND);
        assert_eq!(
            (s.tokens.input, s.tokens.output),
            (50, 25),
            "split: {split}"
        );
        // Importing again changes nothing.
        let stored = dump(&db);
        std::fs::write(&file, std::fs::read(&file).unwrap()).unwrap();
        run(&db, Source::ClaudeCode, std::slice::from_ref(&root));
        assert_same(&dump(&db), &stored, "again");
    }
}

#[test]
fn prompts_that_only_look_like_a_rewind_are_not_marked() {
    // A compaction's replay writes its lines at one time, a prompt after a compaction
    // answers the boundary (a line with no parent) and tool results are no prompts: none
    // of them is a rewind.
    let lines = vec![
        line("u1", None, 0, said("first")),
        reply("a1", "u1", 5, "one"),
        line("u2", Some("a1"), 10, said("second")),
        line("u2r", Some("a1"), 10, said("second, replayed")),
        reply("a2", "u2", 15, "two"),
        json!({"parentUuid": null, "isSidechain": false, "cwd": "/w", "sessionId": REWOUND,
               "type": "system", "subtype": "compact_boundary", "uuid": "b1",
               "compactMetadata": {"trigger": "manual", "preTokens": 100},
               "timestamp": "2025-08-01T10:00:20.000Z"}),
        line("u3", Some("b1"), 25, said("third")),
        reply("a3", "u3", 30, "three"),
        line("u4", None, 35, said("a new root")),
        reply("a4", "u4", 40, "four"),
    ];
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("projects");
    let file = root.join("-w").join(format!("{REWOUND}.jsonl"));
    write_lines(&file, &lines);
    let db = scribe_db(dir.path());
    run(&db, Source::ClaudeCode, std::slice::from_ref(&root));
    let read = rewound(&db, REWOUND);
    assert_eq!(read.len(), 9, "{read:?}");
    assert!(read.iter().all(|(_, r)| !r), "{read:?}");
}
