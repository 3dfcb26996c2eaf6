//! `scribe statusline` as Claude Code runs it: its status JSON on stdin, a transcript
//! being written, one line out. The transcript is the shared Claude Code fixture with its
//! times moved to the current hour, so today's and the open block's costs are its own.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::path::{Path, PathBuf};

use common::{Env, stderr, stdout};

const SESSION: &str = "1af7fc5e-8455-4414-9ccd-011d40f70b2a";

/// The fixture's lines, stamped in the current UTC hour (they were written at 00:47).
fn fixture_lines_now() -> Vec<String> {
    let text = std::fs::read_to_string(
        Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../import/tests/fixtures/claude/projects/-path-to-Demo")
            .join(format!("{SESSION}.jsonl")),
    )
    .unwrap();
    let now = scribe_db::calendar::rfc3339(scribe_db::now_ms());
    let hour = &now[..13];
    text.lines()
        .map(|l| l.replace("2025-09-03T00", hour))
        .collect()
}

fn status_json(transcript: &Path) -> String {
    serde_json::json!({
        "session_id": SESSION,
        "transcript_path": transcript,
        "model": {"id": "claude-sonnet-4-20250514", "display_name": "Sonnet 4"},
        "cost": {"total_cost_usd": 0.5},
    })
    .to_string()
}

/// The other Claude Code fixture session: another conversation in the same folder.
const OTHER: &str = "609b44ad-7c18-4745-a70b-784281dce85e";

fn copy_other_into(folder: &Path) {
    std::fs::copy(
        Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../import/tests/fixtures/claude/projects/-work-proj")
            .join(format!("{OTHER}.jsonl")),
        folder.join(format!("{OTHER}.jsonl")),
    )
    .unwrap();
}

fn stored_sessions(env: &Env) -> Vec<String> {
    let list = env.json(&["list", "--all", "--json"]);
    let mut ids: Vec<String> = list["sessions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["id"].as_str().unwrap().to_owned())
        .collect();
    ids.sort();
    ids
}

fn write(path: &PathBuf, lines: &[String]) {
    std::fs::write(path, lines.join("\n") + "\n").unwrap();
}

/// Each call imports what Claude Code wrote since the last one, and the line follows:
/// the session's cost grows with its transcript; today and the open block count it.
#[test]
fn the_line_follows_the_transcript_as_it_grows() {
    let env = Env::new();
    let project = env.path("projects/-path-to-Demo");
    std::fs::create_dir_all(&project).unwrap();
    let transcript = project.join(format!("{SESSION}.jsonl"));
    let lines = fixture_lines_now();
    write(&transcript, &lines[..3]);
    copy_other_into(&project);
    let json = status_json(&transcript);

    let out = env.run_with_stdin(&["statusline"], Some(&json));
    assert!(out.status.success(), "{}", stderr(&out));
    let line = stdout(&out);
    assert!(
        line.starts_with("Sonnet 4 · session $0.0421 · today $0.0421 · block $0.0421 ("),
        "{line}"
    );
    assert!(
        line.ends_with(" left)\n") && line.lines().count() == 1,
        "{line}"
    );
    assert_eq!(stderr(&out), "");

    write(&transcript, &lines);
    let line = stdout(&env.run_with_stdin(&["statusline"], Some(&json)));
    assert!(
        line.starts_with("Sonnet 4 · session $0.0932 · today $0.0932 · block $0.0932 ("),
        "{line}"
    );
    // What the line imported is in the store, for every other command: the project's
    // other conversation too.
    assert!(
        env.ok(&["show", SESSION])
            .contains("I've created a basic CLAUDE.md")
    );
    assert_eq!(stored_sessions(&env), [SESSION, OTHER]);
}

/// Without the status JSON: today's and the block's cost, of every agent. With JSON that
/// is not Claude Code's status, or a transcript that is not there: the line still comes,
/// and stderr says what could not be used.
#[test]
fn without_usable_input_the_line_still_comes() {
    let env = Env::new();
    let out = env.run_with_stdin(&["statusline"], Some(""));
    assert!(out.status.success(), "{}", stderr(&out));
    assert_eq!(stdout(&out), "today $0.00\n");

    let out = env.run_with_stdin(&["statusline"], Some("not json"));
    assert!(out.status.success());
    assert_eq!(stdout(&out), "today $0.00\n");
    assert!(
        stderr(&out).starts_with("scribe: the status JSON on stdin is not one Scribe reads"),
        "{}",
        stderr(&out)
    );

    // A session id no store holds (over 1,024 bytes): no session part, the rest comes.
    let long = serde_json::json!({"session_id": "x".repeat(5_000)}).to_string();
    let out = env.run_with_stdin(&["statusline"], Some(&long));
    assert!(out.status.success(), "{}", stderr(&out));
    assert_eq!(stdout(&out), "today $0.00\n");

    let missing = env.path("gone/x.jsonl");
    let out = env.run_with_stdin(&["statusline"], Some(&status_json(&missing)));
    assert!(out.status.success(), "{}", stderr(&out));
    assert_eq!(stdout(&out), "Sonnet 4 · today $0.00\n");
}

/// Usage from long ago is in no open block and not today's. A transcript outside a
/// `projects/` folder is imported alone: not the files beside it.
#[test]
fn old_usage_is_neither_today_nor_in_a_block() {
    let env = Env::new();
    let project = env.path("p");
    std::fs::create_dir_all(&project).unwrap();
    copy_other_into(&project);
    let transcript = project.join(format!("{SESSION}.jsonl"));
    std::fs::copy(
        Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../import/tests/fixtures/claude/projects/-path-to-Demo")
            .join(format!("{SESSION}.jsonl")),
        &transcript,
    )
    .unwrap();
    let line = stdout(&env.run_with_stdin(&["statusline"], Some(&status_json(&transcript))));
    assert_eq!(line, "Sonnet 4 · session $0.0932 · today $0.00\n");
    assert_eq!(stored_sessions(&env), [SESSION]);
}
