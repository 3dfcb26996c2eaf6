//! The `scribe` binary end to end: database location, `db migrate`, `db info`, exit codes.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::process::{Command, Output};

fn scribe(args: &[&str], db_env: Option<&std::path::Path>) -> Output {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_scribe"));
    cmd.args(args).env_remove("SCRIBE_DB");
    if let Some(path) = db_env {
        cmd.env("SCRIBE_DB", path);
    }
    cmd.output().unwrap()
}

/// `scribe ARGS` on the database at `path`, named by `SCRIBE_DB` (`via_env`) or by `--db`,
/// with nothing on stdin.
fn scribe_at(path: &std::path::Path, via_env: bool, args: &[&str]) -> Output {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_scribe"));
    cmd.env_remove("SCRIBE_DB")
        .stdin(std::process::Stdio::null());
    if via_env {
        cmd.env("SCRIBE_DB", path);
    } else {
        cmd.arg("--db").arg(path);
    }
    cmd.args(args).output().unwrap()
}

fn stdout(out: &Output) -> String {
    String::from_utf8_lossy(&out.stdout).into_owned()
}

fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

#[test]
fn migrate_then_info() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("data/scribe.db");
    let p = path.to_str().unwrap();

    let known = scribe_db::Database::known_schema_version();
    let out = scribe(&["db", "migrate", "--db", p], None);
    assert!(out.status.success(), "{}", stderr(&out));
    let text = stdout(&out);
    assert!(text.contains("applied V1__initial"), "{text}");
    assert!(
        text.contains(&format!("migrated schema from version 0 to {known}")),
        "{text}"
    );

    let out = scribe(&["--db", p, "db", "migrate"], None);
    assert!(out.status.success());
    assert!(
        stdout(&out).contains(&format!("up to date (version {known})")),
        "{}",
        stdout(&out)
    );

    // SCRIBE_DB is used when --db is absent.
    let out = scribe(&["db", "info"], Some(&path));
    assert!(out.status.success(), "{}", stderr(&out));
    let text = stdout(&out);
    assert!(text.contains(p), "{text}");
    assert!(text.contains(&format!("schema version  {known}")), "{text}");
    for table in ["sessions", "messages", "parts", "files"] {
        assert!(text.contains(table), "{text}");
    }

    let out = scribe(&["db", "info", "--json", "--db", p], None);
    let json: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(json["schema_version"], known);
    assert_eq!(json["rows"]["sessions"], 0);
}

/// Every command that only reads or changes what is stored, run with `--db` or
/// `SCRIBE_DB`.
const NOT_CREATING: &[&[&str]] = &[
    &["list"],
    &["list", "--json"],
    &["show", "x"],
    &["search", "foo"],
    &["stats"],
    &["export", "--all"],
    &["sources"],
    &["db", "info"],
    &["db", "check"],
    &["db", "reindex"],
    &["db", "vacuum"],
    &["rename", "x", "y"],
    &["fork", "x"],
    &["archive", "x"],
    &["unarchive", "x"],
    &["delete", "x", "--yes"],
    &["prune", "--older-than", "1d", "--yes"],
    &["serve", "--addr", "127.0.0.1:0"],
];

/// A mistyped `--db` (`~/scribe.bd`) or `SCRIBE_DB` is not an empty history: every command
/// that does not add to the store fails in one line naming the path, exit 1, and creates
/// nothing: no file, no `-wal`/`-shm`, no directory. (Before, each created an empty
/// database there and `list` printed "no sessions".) The commands that add create it.
#[test]
fn a_missing_database_named_by_the_user_is_an_error_and_nothing_is_created() {
    let dir = tempfile::tempdir().unwrap();
    for path in [
        dir.path().join("scribe.bd"),
        dir.path().join("no/such/dir/scribe.db"),
    ] {
        let shown = path.display().to_string();
        for args in NOT_CREATING {
            for via_env in [false, true] {
                let out = scribe_at(&path, via_env, args);
                let err = stderr(&out);
                assert_eq!(out.status.code(), Some(1), "{args:?}: {err}");
                assert_eq!(err.lines().count(), 1, "{args:?}: {err}");
                assert!(
                    err.contains(&format!("no database at {shown}")),
                    "{args:?}: {err}"
                );
                assert!(stdout(&out).is_empty(), "{args:?}: {}", stdout(&out));
                assert!(
                    common::names_in(dir.path()).is_empty(),
                    "{args:?}: {:?}",
                    common::names_in(dir.path())
                );
            }
        }
    }
    // `db copy` from a missing store creates neither.
    let from = dir.path().join("from.db");
    let to = dir.path().join("to.db");
    let out = scribe(
        &["db", "copy", from.to_str().unwrap(), to.to_str().unwrap()],
        None,
    );
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    assert!(stderr(&out).contains("no database at"), "{}", stderr(&out));
    assert!(
        common::names_in(dir.path()).is_empty(),
        "{:?}",
        common::names_in(dir.path())
    );

    // What adds to the store creates it, directory and all.
    let path = dir.path().join("fresh/scribe.db");
    let p = path.to_str().unwrap();
    let out = scribe(&["db", "migrate", "--db", p], None);
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(path.is_file());
    let out = scribe(&["db", "copy", p, to.to_str().unwrap()], None);
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(to.is_file());
    let out = scribe(&["db", "info", "--db", p], None);
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(stdout(&out).contains("sessions"), "{}", stdout(&out));
}

/// A `db copy` that fails half-way (here a source whose `parts` table is damaged) leaves
/// no new target behind: the copy is one transaction, so the file it created holds
/// nothing, and it is removed with the directory created for it. A target that was there
/// stays.
#[test]
fn a_failed_db_copy_leaves_no_new_target() {
    let dir = tempfile::tempdir().unwrap();
    let from = dir.path().join("from.db");
    let f = from.to_str().unwrap();
    let out = scribe(&["demo", "--db", f], None);
    assert!(out.status.success(), "{}", stderr(&out));
    // Nothing left in the write-ahead log: the damage below is what a reader finds.
    let conn = rusqlite::Connection::open(&from).unwrap();
    conn.execute_batch("PRAGMA wal_checkpoint(TRUNCATE)")
        .unwrap();
    let (page_size, root): (i64, i64) = conn
        .query_row(
            "SELECT (SELECT page_size FROM pragma_page_size), rootpage \
             FROM sqlite_master WHERE type = 'table' AND name = 'parts'",
            [],
            |row| Ok((row.get(0)?, row.get(1)?)),
        )
        .unwrap();
    drop(conn);
    let mut bytes = std::fs::read(&from).unwrap();
    let at = usize::try_from((root - 1) * page_size).unwrap();
    bytes[at..at + 64].fill(0xa5);
    std::fs::write(&from, bytes).unwrap();

    let to = dir.path().join("new/dir/to.db");
    let out = scribe(&["db", "copy", f, to.to_str().unwrap()], None);
    let err = stderr(&out);
    assert_eq!(out.status.code(), Some(1), "{err}");
    // Said once: SQLite's message, not again as the driver's "Error code 11: …".
    assert_eq!(err.matches("malformed").count(), 1, "{err}");
    assert!(
        err.contains("nothing was copied, so no database was created at"),
        "{err}"
    );
    assert_eq!(common::names_in(dir.path()), ["from.db", "from.db-writers"]);

    // An empty target that was there stays.
    let out = scribe(&["db", "migrate", "--db", to.to_str().unwrap()], None);
    assert!(out.status.success(), "{}", stderr(&out));
    let out = scribe(&["db", "copy", f, to.to_str().unwrap()], None);
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    assert!(
        !stderr(&out).contains("no database was created"),
        "{}",
        stderr(&out)
    );
    assert!(to.is_file());
}

/// `db copy` with the source as its target (the same path twice, `./x.db` and `x.db`, a
/// symlink to it) says that they are the same database, exit 1, and leaves the store as
/// it was. (Before, it said the target "is not empty", as if it were another store.)
#[test]
fn db_copy_onto_its_own_source_says_so() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("x.db");
    let out = scribe(&["demo", "--db", db.to_str().unwrap()], None);
    assert!(out.status.success(), "{}", stderr(&out));
    #[cfg(unix)]
    std::os::unix::fs::symlink(&db, dir.path().join("link.db")).unwrap();
    let listed = |db: &str| stdout(&scribe(&["list", "--all", "--json", "--db", db], None));
    let before = listed(db.to_str().unwrap());
    let mut pairs = vec![("x.db", "x.db"), ("./x.db", "x.db")];
    if cfg!(unix) {
        pairs.push(("x.db", "link.db"));
        pairs.push(("link.db", "./x.db"));
    }
    for (from, to) in pairs {
        let out = Command::new(env!("CARGO_BIN_EXE_scribe"))
            .args(["db", "copy", from, to])
            .env_remove("SCRIBE_DB")
            .current_dir(dir.path())
            .output()
            .unwrap();
        let err = stderr(&out);
        assert_eq!(out.status.code(), Some(1), "{from} {to}: {err}");
        assert_eq!(err.lines().count(), 1, "{from} {to}: {err}");
        assert!(err.contains("are the same database"), "{from} {to}: {err}");
        assert!(
            err.starts_with("scribe: cannot copy: "),
            "{from} {to}: {err}"
        );
        assert!(!err.contains("not empty"), "{from} {to}: {err}");
        assert!(stdout(&out).is_empty(), "{from} {to}: {}", stdout(&out));
    }
    assert_eq!(listed(db.to_str().unwrap()), before);
    assert!(db.is_file());
}

/// `db copy` into a store that holds sessions is the command's own refusal, one line
/// (`scribe: cannot copy: … is not empty …`, not the generic "invalid input: …"), exit 1,
/// and both stores are left as they were.
#[test]
fn db_copy_into_a_store_with_sessions_is_refused_as_a_copy() {
    let dir = tempfile::tempdir().unwrap();
    let (from, to) = (dir.path().join("from.db"), dir.path().join("to.db"));
    let (from, to) = (from.to_str().unwrap(), to.to_str().unwrap());
    for db in [from, to] {
        let out = scribe(&["demo", "--db", db], None);
        assert!(out.status.success(), "{}", stderr(&out));
    }
    let listed = |db: &str| stdout(&scribe(&["list", "--all", "--json", "--db", db], None));
    let before = (listed(from), listed(to));
    let out = scribe(&["db", "copy", from, to], None);
    let err = stderr(&out);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(
        err.starts_with(&format!("scribe: cannot copy: {to} is not empty (")),
        "{err}"
    );
    assert!(!err.contains("invalid input"), "{err}");
    assert!(stdout(&out).is_empty(), "{}", stdout(&out));
    assert_eq!((listed(from), listed(to)), before);
}

/// A first run (no `--db`, no `SCRIBE_DB`, no database at the default path yet): a reading
/// command answers as for an empty store and says why on stderr, exit 0 (`--json` is still
/// a document); one that needs a database says there is nothing yet, exit 1; none creates
/// anything. The first writer (`db migrate` here) creates it at the default path.
#[cfg(target_os = "linux")]
#[test]
fn a_first_run_reads_as_an_empty_store_and_creates_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let home = dir.path().join("home");
    let data = dir.path().join("data");
    std::fs::create_dir(&home).unwrap();
    let run = |args: &[&str]| {
        Command::new(env!("CARGO_BIN_EXE_scribe"))
            .args(args)
            .env_remove("SCRIBE_DB")
            .env("HOME", &home)
            .env("XDG_DATA_HOME", &data)
            .stdin(std::process::Stdio::null())
            .output()
            .unwrap()
    };
    let default = data.join("scribe/scribe.db");
    let nothing_yet = format!("nothing recorded yet: no database at {}", default.display());
    for (args, shows) in [
        (&["list"][..], "no sessions"),
        (&["list", "--json"][..], "\"sessions\": []"),
        (&["search", "foo"][..], "no matches"),
        (&["stats"][..], "no usage recorded"),
        (&["sources"][..], "never"),
    ] {
        let out = run(args);
        assert_eq!(out.status.code(), Some(0), "{args:?}: {}", stderr(&out));
        assert!(
            stderr(&out).contains(&nothing_yet),
            "{args:?}: {}",
            stderr(&out)
        );
        assert!(stdout(&out).contains(shows), "{args:?}: {}", stdout(&out));
    }
    for args in [
        &["db", "info"][..],
        &["db", "check"][..],
        &["db", "vacuum"][..],
        &["rename", "x", "y"][..],
        &["delete", "x", "--yes"][..],
    ] {
        let out = run(args);
        assert_eq!(out.status.code(), Some(1), "{args:?}: {}", stderr(&out));
        assert_eq!(stderr(&out).lines().count(), 1, "{}", stderr(&out));
        assert!(
            stderr(&out).contains(&nothing_yet),
            "{args:?}: {}",
            stderr(&out)
        );
    }
    assert!(!data.exists(), "nothing may be created");
    assert!(
        common::names_in(&home).is_empty(),
        "{:?}",
        common::names_in(&home)
    );
    let out = run(&["db", "migrate"]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(default.is_file());
    let out = run(&["list"]);
    assert!(
        out.status.success() && stderr(&out).is_empty(),
        "{}",
        stderr(&out)
    );
}

#[test]
fn an_unusable_path_is_one_line_and_exit_1() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("a-file");
    std::fs::write(&file, "not a directory").unwrap();
    let path = file.join("scribe.db");
    let out = scribe(&["db", "info", "--db", path.to_str().unwrap()], None);
    assert_eq!(out.status.code(), Some(1));
    let err = stderr(&out);
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(err.starts_with("scribe: cannot "), "{err}");
    assert!(err.contains("database path"), "{err}");
}

#[test]
fn newer_schema_is_refused_with_exit_1() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("future.db");
    let p = path.to_str().unwrap();
    assert!(scribe(&["db", "migrate", "--db", p], None).status.success());
    stamp_future_version(&path);
    let out = scribe(&["db", "info", "--db", p], None);
    assert_eq!(out.status.code(), Some(1));
    let err = stderr(&out);
    let known = scribe_db::Database::known_schema_version();
    let want = format!("version 42 is newer than this build knows (version {known})");
    assert!(err.contains(&want), "{err}");
}

/// Records schema version 42, as a newer Scribe would have.
fn stamp_future_version(path: &std::path::Path) {
    let conn = rusqlite::Connection::open(path).unwrap();
    conn.execute(
        "INSERT INTO refinery_schema_history (version, name, applied_on, checksum) \
         VALUES (42, 'future', '2030-01-01T00:00:00Z', '0')",
        [],
    )
    .unwrap();
}

#[test]
fn usage_errors_exit_2() {
    let out = scribe(&["db", "frobnicate"], None);
    assert_eq!(out.status.code(), Some(2));
    let out = scribe(&[], None);
    assert_eq!(out.status.code(), Some(2));
}

/// `--db` with a URL (`postgres://…`, any `scheme://`) is a usage error until a backend for
/// that scheme exists: nothing is created, and the message says what to pass instead. A
/// path stays a path, even one that merely contains `://` further in.
#[test]
fn a_url_without_a_backend_is_a_usage_error_and_creates_nothing() {
    let dir = tempfile::tempdir().unwrap();
    for url in [
        "mysql://user@localhost/scribe",
        "sqlite://scribe.db",
        "mysql+ssl://h/db",
    ] {
        for via_env in [false, true] {
            let mut cmd = Command::new(env!("CARGO_BIN_EXE_scribe"));
            cmd.current_dir(dir.path()).env_remove("SCRIBE_DB");
            if via_env {
                cmd.env("SCRIBE_DB", url).arg("list");
            } else {
                cmd.args(["--db", url, "list"]);
            }
            let out = cmd.output().unwrap();
            assert_eq!(out.status.code(), Some(2), "{url}: {}", stderr(&out));
            let err = stderr(&out);
            let scheme = url.split("://").next().unwrap();
            assert!(err.contains(&format!("{scheme}://")), "{err}");
            assert!(err.contains("no backend"), "{err}");
            assert!(err.contains("file path"), "{err}");
        }
    }
    let left: Vec<_> = std::fs::read_dir(dir.path()).unwrap().collect();
    assert!(left.is_empty(), "nothing may be created: {left:?}");

    // A path that is not a URL is still a path.
    let path = dir.path().join("odd://name/scribe.db");
    let out = scribe(&["db", "migrate", "--db", path.to_str().unwrap()], None);
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(path.exists());
}

/// Every command runs on PostgreSQL, `serve` and `db vacuum` included: given a server that
/// cannot be reached, each tries to connect and says so, by `--db` or `SCRIBE_DB`, never
/// showing the password, and nothing is created anywhere.
#[test]
fn an_unreachable_postgres_server_is_reported_by_every_command_without_its_password() {
    let dir = tempfile::tempdir().unwrap();
    // Port 1 on loopback: nothing listens there.
    let url = "postgres://nobody:secret@127.0.0.1:1/scribe";
    for args in [
        &["db", "info"][..],
        &["show", "x"][..],
        &["stats"][..],
        &["serve", "--addr", "127.0.0.1:0"][..],
        &["db", "vacuum"][..],
    ] {
        for via_env in [false, true] {
            let mut cmd = Command::new(env!("CARGO_BIN_EXE_scribe"));
            cmd.current_dir(dir.path()).env_remove("SCRIBE_DB");
            if via_env {
                cmd.env("SCRIBE_DB", url);
            } else {
                cmd.args(["--db", url]);
            }
            let out = cmd.args(args).output().unwrap();
            let err = stderr(&out);
            assert_eq!(out.status.code(), Some(1), "{args:?}: {err}");
            assert!(err.contains("cannot reach"), "{args:?}: {err}");
            assert!(!err.contains("panicked"), "{err}");
            assert!(
                !err.contains("secret"),
                "the password is never shown: {err}"
            );
        }
    }
    let left: Vec<_> = std::fs::read_dir(dir.path()).unwrap().collect();
    assert!(left.is_empty(), "nothing may be created: {left:?}");
}

/// `--db` pointed at another program's SQLite database (an agent's history, a typo in
/// SCRIBE_DB): refused in one line, exit 1, by read commands and writes alike, and the
/// file is left byte for byte as it was, its journal mode too (before, Scribe switched it
/// to WAL and added its twenty tables to it).
#[test]
fn another_programs_database_is_refused_and_left_untouched() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("agent.db");
    {
        let conn = rusqlite::Connection::open(&path).unwrap();
        conn.execute_batch(
            "CREATE TABLE session (id TEXT PRIMARY KEY, title TEXT);
             INSERT INTO session VALUES ('s1', 'the agent''s own');",
        )
        .unwrap();
    }
    let before = std::fs::read(&path).unwrap();
    let p = path.to_str().unwrap();
    // A valid (empty) export elsewhere: the import reads its input first.
    let input = tempfile::tempdir().unwrap();
    let empty_export = input.path().join("empty.json");
    std::fs::write(&empty_export, "[]").unwrap();
    for args in [
        vec!["list", "--db", p],
        vec!["db", "info", "--db", p],
        vec!["db", "migrate", "--db", p],
        vec!["import", "--db", p, empty_export.to_str().unwrap()],
        vec![
            "import",
            "--db",
            p,
            "--from",
            "codex",
            empty_export.to_str().unwrap(),
        ],
    ] {
        let out = scribe(&args, None);
        assert_eq!(out.status.code(), Some(1), "{args:?}");
        let err = stderr(&out);
        assert_eq!(err.lines().count(), 1, "{err}");
        assert!(err.contains("SQLite database of another program"), "{err}");
        assert!(err.contains("(1 table, no scribe schema)"), "{err}");
        // The advice fits an `import --from` too: the file goes after it, --db elsewhere.
        assert!(
            err.contains("name its files after `scribe import --from AGENT` and give --db"),
            "{err}"
        );
    }
    assert_eq!(std::fs::read(&path).unwrap(), before);
    let names: Vec<String> = std::fs::read_dir(dir.path())
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    assert_eq!(names, ["agent.db"]);
}

/// `scribe import` may create a missing database, but one that fails on its input (a file
/// that is not there, not an export, a `--from` PATH that does not exist) reads and checks
/// it first and leaves no database behind: no file, `-wal`/`-shm` or directory. (Before,
/// the empty database was created and then the input found malformed.) An existing
/// database is left as it was, and a valid import that stores a session still creates one.
#[test]
fn an_import_that_fails_on_its_input_creates_no_database() {
    let input = tempfile::tempdir().unwrap();
    let write = |name: &str, text: &str| {
        let path = input.path().join(name);
        std::fs::write(&path, text).unwrap();
        path.to_str().unwrap().to_owned()
    };
    let malformed = write("text.json", "hello");
    let empty = write("empty.json", "");
    let shape = write("shape.json", "{\"sessions\": [{\"nope\": 1}]}");
    let missing = input.path().join("missing.json");
    let missing = missing.to_str().unwrap();
    let no_history = input.path().join("no/such/projects");
    let no_history = no_history.to_str().unwrap();
    let cases: [(&[&str], &str); 5] = [
        (&["import", &malformed], "malformed import file"),
        (&["import", &empty], "the file is empty"),
        (&["import", &shape], "missing field"),
        (&["import", missing], "cannot read"),
        (
            &["import", "--from", "claude-code", no_history],
            "cannot read",
        ),
    ];
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("data/scribe.db");
    for (args, want) in cases {
        for via_env in [false, true] {
            let out = scribe_at(&path, via_env, args);
            let err = stderr(&out);
            assert_eq!(out.status.code(), Some(1), "{args:?}: {err}");
            assert!(err.contains(want), "{args:?}: {err}");
            assert!(
                common::names_in(dir.path()).is_empty(),
                "{args:?}: {:?}",
                common::names_in(dir.path())
            );
        }
    }
    // From stdin too.
    let mut child = Command::new(env!("CARGO_BIN_EXE_scribe"))
        .env_remove("SCRIBE_DB")
        .arg("--db")
        .arg(&path)
        .args(["import", "-"])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    {
        use std::io::Write;
        let mut stdin = child.stdin.take().unwrap();
        stdin.write_all(b"not an export").unwrap();
    }
    let out = child.wait_with_output().unwrap();
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    assert!(
        stderr(&out).contains("malformed import file"),
        "{}",
        stderr(&out)
    );
    assert!(
        common::names_in(dir.path()).is_empty(),
        "{:?}",
        common::names_in(dir.path())
    );

    // An existing database stays, untouched by the failed import.
    let p = path.to_str().unwrap();
    let out = scribe(&["db", "migrate", "--db", p], None);
    assert!(out.status.success(), "{}", stderr(&out));
    let out = scribe(&["import", "--db", p, &malformed], None);
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    assert!(path.is_file());
    let out = scribe(&["db", "info", "--json", "--db", p], None);
    let json: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(json["rows"]["sessions"], 0, "{json}");

    // A valid import into a missing database creates it when it stores a session; one
    // that stores none (an export of no sessions) leaves none behind either.
    let fresh = dir.path().join("fresh/scribe.db");
    let none = write("none.json", "[]");
    let out = scribe(&["import", "--db", fresh.to_str().unwrap(), &none], None);
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(!dir.path().join("fresh").exists());
    let source = input.path().join("source.db");
    let out = scribe(&["demo", "--db", source.to_str().unwrap()], None);
    assert!(out.status.success(), "{}", stderr(&out));
    let valid = input.path().join("valid.json");
    let out = scribe(
        &[
            "export",
            "--all",
            "--db",
            source.to_str().unwrap(),
            "-o",
            valid.to_str().unwrap(),
        ],
        None,
    );
    assert!(out.status.success(), "{}", stderr(&out));
    let out = scribe(
        &[
            "import",
            "--db",
            fresh.to_str().unwrap(),
            valid.to_str().unwrap(),
        ],
        None,
    );
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(fresh.is_file());
}

/// A database file whose name is not UTF-8 (legal on Unix), given with `--db` or
/// `SCRIBE_DB`: opened like any other path (clap refused it with exit 2 before).
#[cfg(unix)]
#[test]
fn a_database_path_that_is_not_utf8_works() {
    use std::os::unix::ffi::OsStrExt;
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join(std::ffi::OsStr::from_bytes(b"caf\xe9.db"));
    let out = Command::new(env!("CARGO_BIN_EXE_scribe"))
        .arg("--db")
        .arg(&path)
        .args(["db", "migrate"])
        .env_remove("SCRIBE_DB")
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(path.is_file());
    let out = scribe(&["list"], Some(&path));
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(stdout(&out).contains("no sessions"), "{}", stdout(&out));
}
