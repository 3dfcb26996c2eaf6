//! End to end: list order, import of sessions whose titles the session rules refuse, and
//! read-only commands on a database this user may not write.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::os::unix::fs::PermissionsExt;
use std::os::unix::process::CommandExt;
use std::path::Path;
use std::process::{Command, Output};

use common::{Env, seed, stderr, stdout};
use scribe_db::{Clock, Options, now_ms};
use scribe_message::{NewMessage, Part, Role};

#[test]
fn list_is_newest_first_and_sort_orders_by_activity_cost_or_tokens() {
    let env = Env::new();
    let s = seed(&env);
    // The older session becomes the most recently active one: a message a second later
    // (by the store's clock, so no sleeping).
    let later = Clock::from_fn(|| now_ms() + 1_000);
    let (_, messages) = env.services_with(Options {
        clock: later,
        ..Options::default()
    });
    messages
        .create(NewMessage::new(
            &s.build,
            Role::User,
            vec![Part::text("one more thing")],
        ))
        .unwrap();

    let ids = |args: &[&str]| -> Vec<String> {
        env.json(args)["sessions"]
            .as_array()
            .unwrap()
            .iter()
            .map(|x| x["id"].as_str().unwrap().to_owned())
            .collect()
    };
    assert_eq!(ids(&["list", "--json"]), [s.cjk.clone(), s.build.clone()]);
    assert_eq!(
        ids(&["list", "--json", "--sort", "created"]),
        [s.cjk.clone(), s.build.clone()]
    );
    assert_eq!(
        ids(&["list", "--json", "--sort", "active"]),
        [s.build.clone(), s.cjk.clone()]
    );
    let text = env.ok(&["list"]);
    assert!(
        text.find("搜索功能").unwrap() < text.find("Fix the build").unwrap(),
        "{text}"
    );
    // The most expensive conversation first ($0.50 against $0.0123), or the one with the
    // most tokens (2,450 against 600).
    assert_eq!(
        ids(&["list", "--json", "--sort", "cost"]),
        [s.cjk.clone(), s.build.clone()]
    );
    assert_eq!(
        ids(&["list", "--json", "--sort", "tokens"]),
        [s.build.clone(), s.cjk.clone()]
    );
    // Active since then: both are, today; none from a future date on.
    assert_eq!(
        ids(&["list", "--json", "--since", "7d", "--sort", "cost"]),
        [s.cjk.clone(), s.build.clone()]
    );
    assert!(ids(&["list", "--json", "--since", "2999-01-01"]).is_empty());
    assert!(
        env.ok(&["list", "--since", "2999-01-01"])
            .contains("no sessions")
    );
    assert_eq!(env.run(&["list", "--since", "soon"]).status.code(), Some(2));
    assert_eq!(
        env.run(&["list", "--sort", "planet"]).status.code(),
        Some(2)
    );
    assert!(env.ok(&["list", "--help"]).contains("newest first"));
}

#[test]
fn list_and_search_filter_by_directory_and_list_by_model_and_title() {
    let env = Env::new();
    let s = seed(&env);
    // A session whose agent worked in a directory that exists, reached here through a
    // symbolic link too.
    let work = tempfile::tempdir().unwrap();
    let real = std::fs::canonicalize(work.path()).unwrap();
    let (sessions, _) = env.services_with(Options::default());
    let here = sessions
        .create(scribe_session::NewSession {
            title: Some("Here".into()),
            directory: Some(real.to_str().unwrap().to_owned()),
            ..scribe_session::NewSession::default()
        })
        .unwrap();
    let link = env.path("link");
    std::os::unix::fs::symlink(&real, &link).unwrap();
    let ids_in = |dir: &Path, args: &[&str]| -> Vec<String> {
        json_in(&env, dir, &[&["list", "--json"], args].concat())["sessions"]
            .as_array()
            .unwrap()
            .iter()
            .map(|x| x["id"].as_str().unwrap().to_owned())
            .collect()
    };
    let ids = |args: &[&str]| ids_in(env.dir.path(), args);
    // The directory as the agent recorded it: written out, or `.` and a link to it; a
    // directory that is gone is still named (`..` and a trailing `/` taken out by name);
    // not its subdirectories, nor its parent.
    assert_eq!(ids(&["--dir", "/src/app"]), vec![s.build.clone()]);
    assert_eq!(ids(&["--dir", "/src/app/"]), vec![s.build.clone()]);
    assert_eq!(ids(&["--dir", "/src/lib/../app"]), vec![s.build.clone()]);
    assert!(ids(&["--dir", "/src"]).is_empty());
    assert_eq!(ids_in(&real, &["--dir", "."]), vec![here.id.clone()]);
    assert_eq!(ids(&["--dir", "link"]), vec![here.id.clone()]);
    assert_eq!(ids_in(&link, &["--dir", "."]), vec![here.id.clone()]);
    // The session's model, any of several.
    assert_eq!(ids(&["--model", "openai/gpt-4o"]), vec![s.cjk.clone()]);
    assert_eq!(
        ids(&[
            "--model",
            "openai/gpt-4o",
            "--model",
            "anthropic/claude-sonnet-4"
        ]),
        vec![s.cjk.clone(), s.build.clone()]
    );
    assert!(ids(&["--model", "openai"]).is_empty());
    // Text in the title, letters of any case; with the others, all must hold.
    assert_eq!(ids(&["--title", "BUILD"]), vec![s.build.clone()]);
    assert_eq!(ids(&["--title", "搜索"]), vec![s.cjk.clone()]);
    assert!(ids(&["--title", "build", "--model", "openai/gpt-4o"]).is_empty());
    assert_eq!(env.run(&["list", "--dir", ""]).status.code(), Some(2));
    assert!(env.ok(&["list", "--help"]).contains("--dir <DIR>"));

    // `search --dir` takes the directory the same way, and finds only that project's
    // messages; anywhere among the query's words, a `-word` still excluding.
    messages_in(&env, &here.id, "the parser of this project");
    let hits_in = |dir: &Path, args: &[&str]| -> Vec<String> {
        let json = json_in(&env, dir, &[&["search", "--json"], args].concat());
        let mut sessions: Vec<String> = json["hits"]
            .as_array()
            .unwrap()
            .iter()
            .map(|x| x["session_id"].as_str().unwrap().to_owned())
            .collect();
        sessions.dedup();
        sessions
    };
    let everywhere = hits_in(env.dir.path(), &["parser"]);
    assert!(everywhere.contains(&s.build) && everywhere.contains(&here.id));
    assert_eq!(
        hits_in(&real, &["parser", "--dir", "."]),
        vec![here.id.clone()]
    );
    assert_eq!(
        hits_in(&link, &["--dir", ".", "parser"]),
        vec![here.id.clone()]
    );
    // The build's sub-agent worked where the build did (it inherits the directory).
    let mut in_app = hits_in(env.dir.path(), &["--dir", "/src/app", "parser"]);
    in_app.sort();
    let mut build_and_task = vec![s.build.clone(), s.task.clone()];
    build_and_task.sort();
    assert_eq!(in_app, build_and_task);
    assert_eq!(
        hits_in(&real, &["project", "--dir", "."]),
        vec![here.id.clone()]
    );
    assert!(hits_in(&real, &["project", "--dir", ".", "-parser"]).is_empty());
    assert!(hits_in(&real, &["project", "--dir", "/src/app"]).is_empty());
    assert!(hits_in(env.dir.path(), &["--dir", "/src", "parser"]).is_empty());
    assert_eq!(
        env.run(&["search", "--dir", "", "parser"]).status.code(),
        Some(2)
    );
}

/// The JSON `scribe ARGS` prints on `env`'s database, run from `dir` (`--dir .` reads
/// the directory it runs in).
fn json_in(env: &Env, dir: &Path, args: &[&str]) -> serde_json::Value {
    let out = Command::new(env!("CARGO_BIN_EXE_scribe"))
        .arg("--db")
        .arg(&env.db)
        .args(args)
        .env_remove("SCRIBE_DB")
        .current_dir(dir)
        .output()
        .unwrap();
    assert!(out.status.success(), "{args:?}: {}", stderr(&out));
    serde_json::from_str(&stdout(&out)).unwrap()
}

/// Adds a user message with `text` to session `id`.
fn messages_in(env: &Env, id: &str, text: &str) {
    let (_, messages) = env.services();
    messages
        .create(scribe_message::NewMessage::new(
            id,
            scribe_message::Role::User,
            vec![scribe_message::Part::text(text)],
        ))
        .unwrap();
}

/// `export` of `id` as one JSON Lines line, as a JSON value.
fn exported(env: &Env, id: &str) -> serde_json::Value {
    let line = env.ok(&["export", id, "--format", "jsonl"]);
    serde_json::from_str(line.trim()).unwrap()
}

#[test]
fn an_import_with_an_unusable_title_says_so_in_one_line() {
    let env = Env::new();
    let s = seed(&env);
    let mut long = exported(&env, &s.build);
    long["session"]["title"] = "x".repeat(500).into();
    let mut blank = exported(&env, &s.archived);
    blank["session"]["title"] = " \u{200b} \t ".into();
    let good = exported(&env, &s.cjk);
    let file = env.path("titles.jsonl");
    std::fs::write(&file, format!("{long}\n{blank}\n{good}\n")).unwrap();

    let other = Env::new();
    let out = other.run(&["import", file.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    let err = stderr(&out);
    let lines: Vec<&str> = err.lines().collect();
    assert_eq!(lines.len(), 3, "{err}");
    assert!(
        lines[0].starts_with(&format!("failed {}", s.build)),
        "{err}"
    );
    assert!(
        lines[0].contains("title too long: 500 characters, at most 200 allowed"),
        "{err}"
    );
    assert!(lines[0].chars().count() < 200, "the title is cut: {err}");
    assert!(
        lines[1].starts_with(&format!("failed {}", s.archived)),
        "{err}"
    );
    assert!(lines[1].contains("invalid title"), "{err}");
    assert!(
        lines[2].contains("2 of 3 sessions could not be imported"),
        "{err}"
    );
    assert!(
        stdout(&out).contains("1 imported, 0 skipped, 2 failed"),
        "{}",
        stdout(&out)
    );
    // Only the good session went in, whole.
    let json = other.json(&["list", "--all", "--json"]);
    let sessions = json["sessions"].as_array().unwrap();
    assert_eq!(sessions.len(), 1);
    assert_eq!(sessions[0]["id"], s.cjk.as_str());
    let db = rusqlite::Connection::open(&other.db).unwrap();
    let orphans: i64 = db
        .query_row(
            "SELECT count(*) FROM messages WHERE session_id <> ?1",
            [&s.cjk],
            |r| r.get(0),
        )
        .unwrap();
    assert_eq!(orphans, 0, "nothing of the refused sessions was written");
}

/// Runs the built binary on `db` as a user that may read but not write it: ourselves when
/// the file modes stop us, else (as root) `nobody`. `None` when neither is possible here.
fn run_unprivileged(db: &Path, args: &[&str]) -> Output {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_scribe"));
    cmd.arg("--db")
        .arg(db)
        .args(args)
        .env_remove("SCRIBE_DB")
        .env_remove("NO_COLOR")
        .env_remove("CLICOLOR_FORCE")
        .env("COLUMNS", "200");
    let blocked = std::fs::OpenOptions::new().write(true).open(db).is_err();
    if !blocked {
        cmd.uid(65534).gid(65534);
    }
    // A test that cannot do its job here fails and says why; it never passes silently.
    cmd.output().unwrap_or_else(|err| {
        panic!("this test runs scribe as a user who may not write the database (uid 65534 when run as root), which failed here: {err}")
    })
}

#[test]
fn read_commands_work_on_a_database_this_user_cannot_write() {
    let env = Env::new();
    let s = seed(&env);
    // Readable by everyone, writable by no one but root.
    std::fs::set_permissions(env.dir.path(), std::fs::Permissions::from_mode(0o555)).unwrap();
    std::fs::set_permissions(&env.db, std::fs::Permissions::from_mode(0o444)).unwrap();
    let restore = || {
        std::fs::set_permissions(env.dir.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
    };
    let probe = run_unprivileged(&env.db, &["list", "--json"]);
    if !probe.status.success() {
        restore();
    }
    assert!(
        probe.status.success(),
        "uid 65534 could not run scribe on the read-only database here (it needs to be \
         able to execute the test binary): {}",
        stderr(&probe)
    );
    let json: serde_json::Value = serde_json::from_slice(&probe.stdout).unwrap();
    assert_eq!(json["sessions"].as_array().unwrap().len(), 2);

    let ok = |args: &[&str]| -> String {
        let out = run_unprivileged(&env.db, args);
        assert!(out.status.success(), "{args:?}: {}", stderr(&out));
        assert!(stderr(&out).is_empty(), "{args:?}: {}", stderr(&out));
        stdout(&out)
    };
    assert!(ok(&["show", &s.build]).contains("mismatched types"));
    assert!(ok(&["search", "mismatched"]).contains("Fix the build"));
    assert!(ok(&["stats", "--json"]).contains("\"totals\""));
    assert!(ok(&["export", "--all"]).contains("Fix the build"));
    assert!(ok(&["db", "info"]).contains("schema version"));
    let check = ok(&["db", "check"]);
    assert!(check.contains("integrity_check    ok"), "{check}");
    assert!(check.contains("parts_fts          skipped"), "{check}");

    // A write is refused in one line, and nothing changes.
    let out = run_unprivileged(&env.db, &["rename", &s.build, "renamed"]);
    assert_eq!(out.status.code(), Some(1));
    let err = stderr(&out);
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(err.contains("not writable"), "{err}");
    restore();
    assert!(env.ok(&["show", &s.build]).contains("Fix the build"));
}

#[test]
fn a_very_ambiguous_prefix_says_more_than_it_lists() {
    let env = Env::new();
    let (sessions, _) = env.services();
    for i in 0..12 {
        sessions
            .create(scribe_session::NewSession::titled(format!("s{i}")))
            .unwrap();
    }
    drop(sessions);
    let err = env.fails(&["show", "ses_"]);
    assert!(
        err.contains("\"ses_\" matches more than 10 sessions"),
        "{err}"
    );
    assert!(err.contains(", …; use a longer prefix"), "{err}");
    assert_eq!(
        err.matches("ses_").count(),
        11,
        "the prefix and 10 candidates: {err}"
    );
}
