//! End to end, as a user types it: a numbered title names that session or none, the
//! README's `--help` is the real one, piped output is the stored bytes, empty flag values
//! and closed pipes.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use common::{Env, stderr, stdout};
use scribe_session::NewSession;

/// `t` and `t #2` exist, `t #3` does not: every command taking a <SESSION> says there is
/// no such session, and nothing is deleted, renamed, archived or forked. (The title
/// resolver answered `t #3` with the lineage's newest, `t #2`, so `delete "t #3" --yes`
/// deleted `t #2`.)
#[test]
fn a_numbered_title_that_names_no_session_is_no_session() {
    let env = Env::new();
    let (sessions, messages) = env.services();
    let first = sessions.create(NewSession::titled("t")).unwrap();
    let second = sessions.create(NewSession::titled("t #2")).unwrap();
    for id in [&first.id, &second.id] {
        messages
            .create(scribe_message::NewMessage::new(
                id,
                scribe_message::Role::User,
                vec![scribe_message::Part::text("hello")],
            ))
            .unwrap();
    }
    for cmd in [
        vec!["delete", "t #3", "--yes"],
        vec!["show", "t #3"],
        vec!["export", "t #3"],
        vec!["fork", "t #3"],
        vec!["rename", "t #3", "renamed"],
        vec!["archive", "t #3"],
    ] {
        let err = env.fails(&cmd);
        assert!(
            err.contains("no session matches \"t #3\""),
            "{cmd:?}: {err}"
        );
    }
    let left: Vec<_> = sessions
        .list(&scribe_session::SessionFilter::default())
        .unwrap()
        .into_iter()
        .map(|s| (s.id, s.title, s.archived_at.is_some()))
        .collect();
    assert_eq!(left.len(), 2, "{left:?}");
    assert!(
        left.iter().any(|(id, title, archived)| id == &second.id
            && title.as_deref() == Some("t #2")
            && !archived),
        "{left:?}"
    );
    // What does exist still resolves: the plain title is the newest, `#2` and `#1` name
    // their own member.
    assert!(env.ok(&["show", "t"]).contains(&second.id));
    assert!(env.ok(&["show", "t #2"]).contains(&second.id));
    assert!(env.ok(&["show", "t #1"]).contains(&first.id));
}

/// The lines of the README's console block that follow `$ scribe {command}`, up to the
/// block's end (blank lines included).
fn readme_block(command: &str) -> String {
    let readme = std::fs::read_to_string(
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../README.md"),
    )
    .unwrap();
    let marker = format!("\n$ scribe {command}\n");
    let start = readme
        .find(&marker)
        .unwrap_or_else(|| panic!("the README shows `$ scribe {command}`"))
        + marker.len();
    let end = readme[start..].find("```").unwrap() + start;
    readme[start..end].to_owned()
}

/// The README's `scribe --help` is what the binary prints (it showed a `--db <PATH>` and
/// an opening line the binary had long stopped printing).
#[test]
fn the_readme_help_is_the_real_help() {
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_scribe"))
        .arg("--help")
        .env_remove("SCRIBE_DB")
        .env_remove("COLUMNS")
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", stderr(&out));
    assert_eq!(stdout(&out), readme_block("--help"));
}

/// A session holding text with control characters, as tool output from anywhere can.
const HOSTILE: &str = "look\u{1b}]0;pwned\u{7} here\u{1b}[2J\rhidden\u{9b}6n end\r\n";

fn hostile_session(env: &Env) -> String {
    let (sessions, messages) = env.services();
    let session = sessions.create(NewSession::titled("Escapes")).unwrap();
    messages
        .create(scribe_message::NewMessage::new(
            &session.id,
            scribe_message::Role::User,
            vec![scribe_message::Part::text(HOSTILE)],
        ))
        .unwrap();
    session.id
}

/// Written to a pipe, every export format and `--json` carries the stored text exactly:
/// a JSON Lines export parses back to the very string stored.
#[test]
fn piped_exports_and_json_are_the_stored_text_exactly() {
    let env = Env::new();
    hostile_session(&env);
    let jsonl: serde_json::Value =
        serde_json::from_str(&env.ok(&["export", "Escapes", "-f", "jsonl"])).unwrap();
    assert_eq!(
        jsonl["messages"][0]["parts"][0]["part"]["text"].as_str(),
        Some(HOSTILE)
    );
    let json = env.json(&["export", "Escapes"]);
    assert_eq!(
        json["sessions"][0]["messages"][0]["parts"][0]["part"]["text"].as_str(),
        Some(HOSTILE)
    );
    let shown = env.json(&["show", "Escapes", "--json"]);
    assert!(
        shown
            .to_string()
            .contains(&serde_json::to_string(HOSTILE).unwrap())
    );
    let markdown = env.ok(&["export", "Escapes", "-f", "markdown"]);
    assert!(markdown.contains(HOSTILE.trim_end()), "{markdown:?}");
}

/// A Markdown export read on a terminal shows stored control characters as symbols, as
/// `show` does, rather than letting them retitle or clear the terminal (they reached it
/// as they were stored).
#[cfg(target_os = "linux")]
#[test]
fn a_markdown_export_on_a_terminal_shows_control_characters() {
    let env = Env::new();
    hostile_session(&env);
    let seen = env.on_a_terminal("export Escapes -f markdown");
    assert!(
        seen.contains("look␛]0;pwned␇ here␛[2J␍hidden\u{fffd}6n end"),
        "{seen:?}"
    );
    for raw in ["\u{1b}]", "\u{1b}[2J", "\u{7}", "\u{9b}"] {
        assert!(
            !seen.contains(raw),
            "{raw:?} reached the terminal: {seen:?}"
        );
    }
}

/// `scribe export` of nothing is an empty `sessions` array, `[]`, with no blank line in it.
#[test]
fn an_export_of_no_sessions_is_an_empty_array() {
    let env = Env::new();
    env.ok(&["db", "migrate"]);
    let text = env.ok(&["export", "--all"]);
    assert!(text.contains("\n  \"sessions\": []\n}\n"), "{text:?}");
    assert!(!text.contains("\n\n"), "{text:?}");
    let doc: serde_json::Value = serde_json::from_str(&text).unwrap();
    assert_eq!(doc["sessions"], serde_json::json!([]));
}

/// A reader that stops early (`| head -1`) ends the command quietly with status 0: the
/// completion script (clap_complete panicked on the failed write) and a Markdown or JSON
/// Lines export (the closed pipe came back wrapped by the session service, and was
/// reported as "writing the export failed … Broken pipe", status 1).
#[test]
fn a_reader_that_stops_early_ends_the_command_quietly() {
    let env = Env::new();
    common::seed(&env);
    for args in [
        &["completions", "bash"][..],
        &["export", "--all", "-f", "markdown"],
        &["export", "--all", "-f", "jsonl"],
        &["export", "--all"],
    ] {
        let mut child = std::process::Command::new(env!("CARGO_BIN_EXE_scribe"))
            .arg("--db")
            .arg(&env.db)
            .args(args)
            .env_remove("SCRIBE_DB")
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        // Close the read end before anything is written, like `| head -0`.
        drop(child.stdout.take());
        let out = child.wait_with_output().unwrap();
        assert_eq!(out.status.code(), Some(0), "{args:?}: {}", stderr(&out));
        assert!(stderr(&out).is_empty(), "{args:?}: {}", stderr(&out));
    }
}

/// `fork --at ""` names no message: a usage error naming the flag, and no fork is made.
/// (The empty prefix matched every message: a one-message session was forked at it.)
#[test]
fn fork_at_an_empty_value_is_a_usage_error() {
    let env = Env::new();
    let (sessions, messages) = env.services();
    let session = sessions.create(NewSession::titled("one")).unwrap();
    messages
        .create(scribe_message::NewMessage::new(
            &session.id,
            scribe_message::Role::User,
            vec![scribe_message::Part::text("hello")],
        ))
        .unwrap();
    for at in ["", " "] {
        let out = env.run(&["fork", "one", "--at", at]);
        assert_eq!(out.status.code(), Some(2), "{at:?}: {}", stderr(&out));
        assert!(stderr(&out).contains("--at"), "{}", stderr(&out));
        assert!(stdout(&out).is_empty());
    }
    assert_eq!(
        sessions
            .list(&scribe_session::SessionFilter::default())
            .unwrap()
            .len(),
        1,
        "no fork was made"
    );
}

/// A usage error that `import` finds itself (no FILE, two FILEs) shows import's usage
/// line, as clap's own errors for it do, not the top-level `scribe [OPTIONS] <COMMAND>`.
#[test]
fn import_usage_errors_show_the_import_usage() {
    let env = Env::new();
    for args in [&["import"][..], &["import", "a.json", "b.json"]] {
        let out = env.run(args);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {}", stderr(&out));
        let err = stderr(&out);
        assert!(err.contains("Usage: scribe import "), "{args:?}: {err}");
        assert!(!err.contains("<COMMAND>"), "{args:?}: {err}");
    }
    assert!(!env.db.exists(), "a usage error creates no database");
}

/// `export -o` through a symlink writes the file it points to and leaves the link, and onto
/// a device (`/dev/null`, `/dev/stdout`) writes the device: nothing is put in the place of
/// either. (The temporary file was renamed over the path itself: as root, `-o /dev/stdout`
/// turned the system's `/dev/stdout` symlink into a regular file.)
#[cfg(unix)]
#[test]
fn export_to_a_symlink_or_a_device_keeps_the_link_and_the_device() {
    let env = Env::new();
    common::seed(&env);
    let target = env.path("real.json");
    std::fs::write(&target, "old").unwrap();
    let link = env.path("link.json");
    std::os::unix::fs::symlink(&target, &link).unwrap();
    env.ok(&["export", "--all", "-o", link.to_str().unwrap()]);
    assert!(
        std::fs::symlink_metadata(&link).unwrap().is_symlink(),
        "the link was replaced"
    );
    let doc: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&target).unwrap()).unwrap();
    assert_eq!(doc["sessions"].as_array().unwrap().len(), 4);

    let null = env.path("null");
    std::os::unix::fs::symlink("/dev/null", &null).unwrap();
    env.ok(&["export", "--all", "-o", null.to_str().unwrap()]);
    assert_eq!(
        std::fs::read_link(&null).unwrap(),
        std::path::Path::new("/dev/null")
    );
    let names: Vec<_> = std::fs::read_dir(env.dir.path())
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .filter(|n| !n.starts_with("scribe.db"))
        .collect();
    assert_eq!(names.len(), 3, "no temporary file is left: {names:?}");
}

/// Help or version that cannot be written (a full disk) is a failure, status 1 with one
/// line, as for any other output; clap's own printing ignored the error and exited 0.
#[cfg(target_os = "linux")]
#[test]
fn help_that_cannot_be_written_is_a_failure() {
    for args in [&["--help"][..], &["--version"], &["list", "--help"]] {
        let out = std::process::Command::new(env!("CARGO_BIN_EXE_scribe"))
            .args(args)
            .env_remove("SCRIBE_DB")
            .stdout(std::fs::File::create("/dev/full").unwrap())
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(1), "{args:?}");
        assert_eq!(
            stderr(&out),
            "scribe: cannot write output: No space left on device (os error 28)\n",
            "{args:?}"
        );
    }
}

/// An empty FROM or TO of `db copy`, or a URL with no backend, is a usage error (status
/// 2, naming the argument) as the same mistake in `--db` is, and nothing is created.
/// (They failed with status 1: "cannot access database path : cannot make an empty path
/// absolute", "invalid database location mysql://x".)
#[test]
fn db_copy_locations_are_checked_like_db() {
    let env = Env::new();
    env.ok(&["db", "migrate"]);
    let db = env.db.to_str().unwrap().to_owned();
    let target = env.path("copy.db");
    let target = target.to_str().unwrap();
    for (args, names) in [
        (["db", "copy", db.as_str(), ""], "<TO>"),
        (["db", "copy", "", target], "<FROM>"),
        (["db", "copy", db.as_str(), "mysql://h/x"], "<TO>"),
    ] {
        let out = env.run(&args);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {}", stderr(&out));
        assert!(stderr(&out).contains(names), "{args:?}: {}", stderr(&out));
    }
    assert!(!std::path::Path::new(target).exists());
}

/// A pasted 100 KB argument that names no session or message is echoed cut to 80
/// characters, on one short line (it was printed back whole).
#[test]
fn a_huge_argument_that_names_nothing_is_echoed_cut() {
    let env = Env::new();
    let (sessions, messages) = env.services();
    let session = sessions.create(NewSession::titled("one")).unwrap();
    messages
        .create(scribe_message::NewMessage::new(
            &session.id,
            scribe_message::Role::User,
            vec![scribe_message::Part::text("hello")],
        ))
        .unwrap();
    let huge = "x".repeat(100_000);
    let expected_echo = format!("\"{}…\"", "x".repeat(79));
    for args in [
        vec!["show", huge.as_str()],
        vec!["delete", huge.as_str(), "--yes"],
        vec!["fork", "one", "--at", huge.as_str()],
    ] {
        let err = env.fails(&args);
        assert!(err.len() < 300, "{} bytes: {}", err.len(), &err[..200]);
        assert!(err.contains(&expected_echo), "{args:?}: {err}");
    }
}

/// Without a home directory, `sources` lists every agent with no location as `(none)`,
/// in its column (it printed ` (none)`, one space out of line with the header).
#[test]
fn sources_without_a_home_directory_stay_in_their_columns() {
    let env = Env::new();
    env.ok(&["db", "migrate"]);
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_scribe"))
        .arg("--db")
        .arg(&env.db)
        .arg("sources")
        .env_clear()
        .env("COLUMNS", "200")
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", stderr(&out));
    let text = stdout(&out);
    let mut lines = text.lines();
    let header = lines.next().unwrap();
    let column = header.find("location").unwrap();
    for line in lines {
        assert_eq!(line.find("(none)"), Some(column), "{text}");
    }
}

/// With `SCRIBE_DB` set (as a shell profile does), a usage error's usage line is the
/// command's own, `--db` not in it as if required (it read `Usage: scribe search --db
/// <PATH|URL> <QUERY>...`); a bad `SCRIBE_DB` is still the error reported.
#[test]
fn scribe_db_from_the_environment_is_not_in_usage_lines() {
    let env = Env::new();
    let run = |args: &[&str], db: &str| {
        std::process::Command::new(env!("CARGO_BIN_EXE_scribe"))
            .args(args)
            .env("SCRIBE_DB", db)
            .output()
            .unwrap()
    };
    let db = env.db.to_str().unwrap();
    for (args, usage) in [
        (&["search"][..], "Usage: scribe search <QUERY>...\n"),
        (&["db", "copy", "x"], "Usage: scribe db copy <FROM> <TO>\n"),
    ] {
        let out = run(args, db);
        assert_eq!(out.status.code(), Some(2), "{args:?}");
        assert!(stderr(&out).contains(usage), "{args:?}: {}", stderr(&out));
    }
    let out = run(&["search"], "mysql://h/x");
    assert_eq!(out.status.code(), Some(2));
    assert!(stderr(&out).contains("mysql://"), "{}", stderr(&out));
    assert!(!env.db.exists());
}
