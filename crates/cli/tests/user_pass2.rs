//! End to end, as a user types it (a second pass): spans reaching before 1970, `export -o`
//! over an existing file or onto the terminal, `--db` naming a directory (or `dir/`), `--json` on a
//! terminal, an empty `--source`, `serve`'s `--addr` and `--token`, `db copy`'s report,
//! a `SCRIBE_DB` that names no database, and `search --` alone.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use common::{Env, stderr, stdout};

/// A span reaching back before 1970-01-01 (the earliest date `--since` takes) is a usage
/// error naming the flag, and nothing is pruned: `prune --older-than 3000000d --yes`
/// reported "ended before -6187-03-16 05:18", and `stats --since 3000000d --json` a
/// `since` of -257403638489572.
#[test]
fn a_span_reaching_before_1970_is_a_usage_error() {
    let env = Env::new();
    common::seed(&env);
    for (args, flag) in [
        (
            &["prune", "--older-than", "3000000d", "--yes"][..],
            "--older-than",
        ),
        (
            &["prune", "--older-than", "30000", "--dry-run"],
            "--older-than",
        ),
        (&["stats", "--since", "3000000d", "--json"], "--since"),
        (&["search", "parser", "--since", "30000d"], "--since"),
        (
            &["import", "--from", "codex", "--since", "999999h"],
            "--since",
        ),
        (&["stats", "--since", "1969-12-31"], "--since"),
    ] {
        let out = env.run(args);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {}", stderr(&out));
        let err = stderr(&out);
        assert!(err.contains(flag), "{args:?}: {err}");
        assert!(err.contains("before 1970-01-01"), "{args:?}: {err}");
        assert!(stdout(&out).is_empty(), "{args:?}");
    }
    assert_eq!(common::snapshot(&env.db).len(), 4, "nothing was pruned");
    // A span that stays after 1970 still works, and reads as a date of this era.
    let text = env.ok(&["prune", "--older-than", "20000d", "--dry-run"]);
    assert!(text.contains("ended before 19"), "{text}");
    let stats = env.json(&["stats", "--since", "20000d", "--json"]);
    assert!(stats["since"].as_i64().unwrap() > 0, "{stats}");
}

/// `export -o` over an existing file keeps that file's permissions (they were 0600, so
/// exporting over a shared 0644 file made it private), and a new file is private (0600)
/// as the database is, whatever the umask: it holds the same conversations.
#[cfg(unix)]
#[test]
fn export_to_a_file_keeps_its_mode_and_a_new_one_is_private() {
    use std::os::unix::fs::PermissionsExt as _;
    let env = Env::new();
    common::seed(&env);
    let mode =
        |path: &std::path::Path| std::fs::metadata(path).unwrap().permissions().mode() & 0o7777;
    // `scribe --db DB export --all -o FILE` under `umask 027`.
    let export = |path: &std::path::Path| {
        let out = std::process::Command::new("sh")
            .args(["-c", "umask 027 && exec \"$0\" \"$@\""])
            .arg(env!("CARGO_BIN_EXE_scribe"))
            .arg("--db")
            .arg(&env.db)
            .args(["export", "--all", "-o"])
            .arg(path)
            .env_remove("SCRIBE_DB")
            .output()
            .unwrap();
        assert!(out.status.success(), "{}", stderr(&out));
        let doc: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
        assert_eq!(doc["sessions"].as_array().unwrap().len(), 4);
    };
    for old in [0o644, 0o664, 0o600, 0o444] {
        let path = env.path(&format!("old-{old:o}.json"));
        std::fs::write(&path, "old").unwrap();
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(old)).unwrap();
        export(&path);
        assert_eq!(
            format!("{:o}", mode(&path)),
            format!("{old:o}"),
            "{}",
            path.display()
        );
    }
    let new = env.path("new.json");
    export(&new);
    assert_eq!(
        format!("{:o}", mode(&new)),
        "600",
        "private under umask 027"
    );
}

/// `--db` naming a directory says so, in one line, for a command that reads, one that
/// writes and one that creates (it said "sqlite error: unable to open database file" or
/// "cannot access database path …: Is a directory (os error 21)"); nothing is created in
/// it.
#[test]
fn a_directory_given_as_the_database_is_named_as_one() {
    let env = Env::new();
    let dir = env.path("history");
    std::fs::create_dir(&dir).unwrap();
    for args in [
        &["list"][..],
        &["rename", "x", "y"],
        &["db", "migrate"],
        &["db", "info"],
        &["demo"],
    ] {
        let out = std::process::Command::new(env!("CARGO_BIN_EXE_scribe"))
            .arg("--db")
            .arg(&dir)
            .args(args)
            .env_remove("SCRIBE_DB")
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(1), "{args:?}: {}", stderr(&out));
        assert_eq!(
            stderr(&out),
            format!(
                "scribe: {} is a directory, not a database file\n",
                dir.display()
            ),
            "{args:?}"
        );
    }
    assert_eq!(std::fs::read_dir(&dir).unwrap().count(), 0);
}

/// `--db dir/` (a path written as a directory, which does not exist) is named as a directory
/// by every kind of command, and nothing is created: a command that creates the database
/// said "cannot access database path …/: Is a directory (os error 21)", and one that reads
/// said there was no database and to run `scribe db migrate`, which then failed so.
#[test]
fn a_database_path_ending_in_a_slash_is_named_as_a_directory() {
    let env = Env::new();
    let dir = env.path("history");
    let mut given = dir.clone().into_os_string();
    given.push("/");
    for args in [
        &["list"][..],
        &["rename", "x", "y"],
        &["db", "migrate"],
        &["db", "info"],
        &["demo"],
    ] {
        let out = std::process::Command::new(env!("CARGO_BIN_EXE_scribe"))
            .arg("--db")
            .arg(&given)
            .args(args)
            .env_remove("SCRIBE_DB")
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(1), "{args:?}: {}", stderr(&out));
        assert_eq!(
            stderr(&out),
            format!(
                "scribe: {}/ is a directory, not a database file\n",
                dir.display()
            ),
            "{args:?}"
        );
        assert!(!dir.exists(), "{args:?} created {}", dir.display());
    }
}

/// Message text holding C1 controls (U+009B is CSI, U+009D OSC, U+0085 NEL) and a C0 one.
#[cfg(target_os = "linux")]
const C1_TEXT: &str = "needle see\u{9b}2J\u{9d}0;x\u{7}ok\u{85}é\u{a0}";

/// A session "c1" whose one message is [`C1_TEXT`]; its id.
#[cfg(target_os = "linux")]
fn c1_session(env: &Env) -> String {
    let (sessions, messages) = env.services();
    let session = sessions
        .create(scribe_session::NewSession::titled("c1"))
        .unwrap();
    messages
        .create(scribe_message::NewMessage::new(
            &session.id,
            scribe_message::Role::User,
            vec![scribe_message::Part::text(C1_TEXT)],
        ))
        .unwrap();
    session.id
}

/// The text of the first part of the first message of `doc`: an export document, a
/// session export (`show --json`, a JSON Lines line).
#[cfg(target_os = "linux")]
fn first_text(doc: &serde_json::Value) -> Option<&str> {
    let session = doc.get("sessions").map_or(doc, |all| &all[0]);
    session["messages"][0]["parts"][0]["part"]["text"].as_str()
}

/// `--json` on a terminal escapes C1 control characters as `\u009b`, as JSON already does
/// for C0 ones, so stored text cannot send the terminal an escape (`show`, `search`,
/// `export` in both JSON formats); the document still parses to the stored text. Piped,
/// the bytes stay exactly what serde_json writes (C1 raw).
#[cfg(target_os = "linux")]
#[test]
fn json_on_a_terminal_escapes_c1_controls_and_piped_json_does_not() {
    let env = Env::new();
    let id = &c1_session(&env);
    let escaped = r"see\u009b2J\u009d0;x\u0007ok\u0085é";
    for (args, parses) in [
        (format!("show {id} --json"), true),
        (format!("export {id}"), true),
        (format!("export {id} -f jsonl"), true),
        ("search needle --json".to_owned(), false),
    ] {
        let seen = env.on_a_terminal(&args);
        for raw in ['\u{9b}', '\u{9d}', '\u{85}', '\u{7}'] {
            assert!(
                !seen.contains(raw),
                "{args}: {raw:?} reached the terminal: {seen:?}"
            );
        }
        assert!(seen.contains(escaped), "{args}: {seen:?}");
        if parses {
            // The same value: what the terminal shows parses back to the stored text.
            let doc: serde_json::Value = serde_json::from_str(&seen.replace("\r\n", "\n"))
                .unwrap_or_else(|e| panic!("{args}: {e}: {seen:?}"));
            assert_eq!(first_text(&doc), Some(C1_TEXT), "{args}");
        }
    }
    // Piped: the bytes serde_json writes, C1 raw.
    for args in [&["show", id, "--json"][..], &["export", id, "-f", "jsonl"]] {
        let piped = env.ok(args);
        assert!(
            piped.contains(&serde_json::to_string(C1_TEXT).unwrap()),
            "{args:?}: {piped:?}"
        );
    }
}

/// The URL `serve --token` prints lets a browser in whatever the token holds: `+`, `&`,
/// `#`, `%` and `=` are percent-encoded (it was printed as given, so `a+b` arrived as
/// `a b`, `&`/`#` cut it short, and opening the printed URL answered 401).
#[test]
fn the_url_serve_prints_carries_any_token() {
    let env = Env::new();
    env.ok(&["db", "migrate"]);
    for token in ["a+b", "x&y=z", "p#q", "100%25", "plain-token_1"] {
        let mut cmd = std::process::Command::new(env!("CARGO_BIN_EXE_scribe"));
        cmd.arg("--db")
            .arg(&env.db)
            .args(["serve", "--addr", "127.0.0.1:0", "--token", token])
            .env_remove("SCRIBE_DB");
        let serving = common::Serving::spawn(cmd);
        let url = serving.line.split(" at ").nth(1).unwrap().trim();
        let from_host = url.strip_prefix("http://").unwrap();
        let path = &from_host[from_host.find('/').unwrap()..];
        // What a browser sends: no fragment.
        let sent = path.split('#').next().unwrap();
        let (status, body) = serving.get_text(sent);
        assert_eq!(status, 303, "{token:?}: GET {sent} (printed {url}): {body}");
    }
}

/// A token `serve` cannot use is refused naming where it came from and every character
/// it may not hold (`"` and `\` were refused without being listed), and nothing listens.
#[test]
fn a_token_serve_cannot_use_is_refused_naming_what_it_may_hold() {
    let env = Env::new();
    env.ok(&["db", "migrate"]);
    for token in ["", "a b", "a\"b", "a\\b", "a;b", "a,b"] {
        let out = env.run(&["serve", "--addr", "127.0.0.1:0", "--token", token]);
        assert_eq!(out.status.code(), Some(1), "{token:?}");
        assert!(stdout(&out).is_empty(), "{token:?}");
        assert_eq!(
            stderr(&out),
            "scribe: the token (--token or SCRIBE_SERVE_TOKEN) must be 1 to 256 visible ASCII \
             characters, none of them `;`, `,`, `\"` or `\\` (no spaces)\n",
            "{token:?}"
        );
    }
}

/// `export -o` naming the terminal itself (`/dev/tty`, or `/dev/stdout` when that is the
/// terminal) is printing on a terminal: JSON escapes C1 controls and Markdown shows
/// control characters as symbols, as without `-o` (both reached the terminal raw).
#[cfg(target_os = "linux")]
#[test]
fn export_to_the_terminal_device_is_printing_on_a_terminal() {
    let env = Env::new();
    let id = &c1_session(&env);
    for device in ["/dev/tty", "/dev/stdout"] {
        for format in ["json", "jsonl", "markdown"] {
            let args = format!("export {id} -f {format} -o {device}");
            let seen = env.on_a_terminal(&args);
            for raw in ['\u{9b}', '\u{9d}', '\u{85}', '\u{7}'] {
                assert!(
                    !seen.contains(raw),
                    "{args}: {raw:?} reached the terminal: {seen:?}"
                );
            }
            let shown = if format == "markdown" {
                "see\u{fffd}2J\u{fffd}0;x␇ok\u{fffd}é"
            } else {
                r"see\u009b2J\u009d0;x\u0007ok\u0085é"
            };
            assert!(seen.contains(shown), "{args}: {seen:?}");
        }
    }
}

/// An empty `--source` (or `--exclude-source`), as an unset shell variable gives, is a
/// usage error naming the flag: it matched no session, so `export --all --source "$SRC"
/// -o backup.json` replaced a backup with an empty export, and `list` said "no sessions".
#[test]
fn an_empty_source_is_a_usage_error() {
    let env = Env::new();
    common::seed(&env);
    let backup = env.path("backup.json");
    std::fs::write(&backup, "the old backup").unwrap();
    let backup = backup.to_str().unwrap();
    for args in [
        &["export", "--all", "--source", "", "-o", backup][..],
        &["list", "--source", " "],
        &["search", "parser", "--source", ""],
        &["search", "parser", "--exclude-source", ""],
        &["prune", "--older-than", "0", "--source", "", "--yes"],
    ] {
        let out = env.run(args);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {}", stderr(&out));
        let err = stderr(&out);
        assert!(err.contains("source <SOURCE>'"), "{args:?}: {err}");
        assert!(
            err.contains("a source name cannot be empty"),
            "{args:?}: {err}"
        );
        assert!(stdout(&out).is_empty(), "{args:?}");
    }
    assert_eq!(std::fs::read_to_string(backup).unwrap(), "the old backup");
    assert_eq!(common::snapshot(&env.db).len(), 4, "nothing was pruned");
    // A real source still filters.
    let listed = env.json(&["list", "--source", "tui", "--json"]);
    assert_eq!(listed["sessions"].as_array().unwrap().len(), 1, "{listed}");
}

/// A `serve --addr` that is not `host:port` is a usage error naming the flag (status 2,
/// as for any other flag's bad value; it was status 1), and nothing listens; a host that
/// does not resolve is still a failure to start (status 1).
#[test]
fn a_serve_address_that_is_not_host_port_is_a_usage_error() {
    let env = Env::new();
    env.ok(&["db", "migrate"]);
    let serve = |addr: &str| env.run(&["serve", "--addr", addr]);
    for addr in [
        "127.0.0.1",
        "localhost",
        "",
        ":7777",
        "127.0.0.1:",
        "127.0.0.1:99999",
        "127.0.0.1:-1",
        "127.0.0.1:http",
        "[::1",
        "::1:7777",
    ] {
        let out = serve(addr);
        assert_eq!(out.status.code(), Some(2), "{addr:?}: {}", stderr(&out));
        let err = stderr(&out);
        assert!(err.contains("'--addr <HOST:PORT>'"), "{addr:?}: {err}");
        assert!(err.contains("e.g. 127.0.0.1:7777"), "{addr:?}: {err}");
        assert!(stdout(&out).is_empty(), "{addr:?}");
    }
    let out = serve("no-such-host.invalid:7777");
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    assert!(
        stderr(&out).contains("no-such-host.invalid:7777"),
        "{}",
        stderr(&out)
    );
}

/// `db copy` counts what it copied in English and in thousands as every other report
/// does: `1 row`, not `1 rows`.
#[test]
fn db_copy_counts_rows_in_english() {
    let env = Env::new();
    // The demo's store: two sessions, one roll-up row.
    env.ok(&["demo"]);
    let to = env.path("copy.db");
    let report = env.ok(&["db", "copy", env.db.to_str().unwrap(), to.to_str().unwrap()]);
    let rows = |table: &str| {
        report
            .lines()
            .find(|l| l.split_whitespace().next() == Some(table))
            .unwrap_or_else(|| panic!("no {table} line in {report}"))
            .split_whitespace()
            .skip(1)
            .collect::<Vec<_>>()
            .join(" ")
    };
    assert_eq!(rows("sessions"), "2 rows", "{report}");
    assert_eq!(rows("session_rollups"), "1 row", "{report}");
    assert_eq!(rows("search_queue"), "0 rows", "{report}");
}

/// A `SCRIBE_DB` that names no database location (`mysql://…`) is a usage error only where
/// it is used: `--db` comes before it (`scribe --db good.db list` failed on the
/// variable), and `completions` and `db copy` read no database. Where it is used, it is
/// still refused, naming its value.
#[test]
fn a_bad_scribe_db_matters_only_where_it_is_used() {
    let env = Env::new();
    common::seed(&env);
    let bad = [("SCRIBE_DB", "mysql://nowhere")];
    // Env::run passes --db: the variable is not used.
    let out = env.run_env(&["list", "--json"], &bad);
    assert!(out.status.success(), "{}", stderr(&out));
    assert_eq!(
        stdout(&out),
        env.ok(&["list", "--json"]),
        "as without the variable"
    );
    let to = env.path("copy.db");
    let out = env.run_env(
        &["db", "copy", env.db.to_str().unwrap(), to.to_str().unwrap()],
        &bad,
    );
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(to.is_file());
    // Without --db.
    let bare = |args: &[&str]| {
        std::process::Command::new(env!("CARGO_BIN_EXE_scribe"))
            .args(args)
            .env("SCRIBE_DB", "mysql://nowhere")
            .output()
            .unwrap()
    };
    let out = bare(&["completions", "bash"]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(stdout(&out).contains("_scribe"));
    let out = bare(&["list"]);
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert!(stderr(&out).contains("mysql://nowhere"), "{}", stderr(&out));
    assert!(stdout(&out).is_empty());
}

/// `scribe search --` searches for `--`, as `scribe search -- --` does (it was a usage
/// error, "the following required arguments were not provided: <QUERY>", though a query
/// was typed); with options, with `--json`, and a `--` after words still only ends the
/// options. No query at all is still a usage error.
#[test]
fn search_for_a_lone_double_dash_finds_it() {
    let env = Env::new();
    let (sessions, messages) = env.services();
    let session = sessions
        .create(scribe_session::NewSession::titled("flags"))
        .unwrap();
    for text in ["run cargo test -- --nocapture", "no dashes here"] {
        messages
            .create(scribe_message::NewMessage::new(
                &session.id,
                scribe_message::Role::User,
                vec![scribe_message::Part::text(text)],
            ))
            .unwrap();
    }

    let alone = env.ok(&["search", "--"]);
    assert_eq!(alone, env.ok(&["search", "--", "--"]));
    assert!(alone.contains("flags · user"), "{alone}");
    assert_eq!(alone.matches("ses_").count(), 1, "{alone}");
    assert!(alone.contains("--nocapture"), "{alone}");

    let json = env.json(&["search", "-n", "5", "--json", "--"]);
    let hits = json["hits"].as_array().unwrap();
    assert_eq!(hits.len(), 1, "{json}");
    assert_eq!(hits[0]["session_id"], session.id.as_str());

    // After words, `--` ends the options and adds nothing: `dashes` alone.
    let words = env.ok(&["search", "dashes", "--"]);
    assert!(words.contains("no dashes here"), "{words}");
    assert!(!words.contains("nocapture"), "{words}");

    let out = env.run(&["search"]);
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
}
