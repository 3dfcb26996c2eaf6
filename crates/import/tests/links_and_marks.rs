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
