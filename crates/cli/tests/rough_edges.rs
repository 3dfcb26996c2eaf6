//! End to end, with the real binary and real files: a dry run that finds an empty file or
//! an older store writes nothing to it, and Ctrl-C (SIGINT, sent with `kill -INT`) during
//! `import FILE`, `import -` (a pipe) and `db copy` into a new file stops the command,
//! says what was stored, exits 130 and leaves no half store behind.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;

mod common;
#[path = "../../import/tests/common/fixture_home.rs"]
mod fixture_home;

fn scribe(db: &Path) -> Command {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_scribe"));
    cmd.env_remove("SCRIBE_DB")
        .env("COLUMNS", "200")
        .arg("--db")
        .arg(db)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    cmd
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

fn ok(out: &Output) -> String {
    assert!(out.status.success(), "{}", text(&out.stderr));
    text(&out.stdout)
}

fn claude_projects() -> PathBuf {
    fixture_home::fixtures().join("claude/projects")
}

/// `import --from claude-code --dry-run --json` of the fixtures into `db`.
fn dry_run(db: &Path) -> (Value, String) {
    let out = scribe(db)
        .args(["import", "--from", "claude-code", "--dry-run", "--json"])
        .arg(claude_projects())
        .output()
        .unwrap();
    let report: Value = serde_json::from_str(&ok(&out)).unwrap();
    (report, text(&out.stderr))
}

fn sessions_created(report: &Value) -> u64 {
    report["sources"][0]["sessions_created"].as_u64().unwrap()
}

/// A dry run writes nothing: an empty (0-byte) file and an SQLite file without Scribe's
/// schema stay byte for byte as they were (they were given the whole schema, and a
/// `-writers` file beside them), an older store is refused with what to do and keeps its
/// version and bytes (it was migrated), and a missing one is still not created; the
/// others still report what would be imported, counted against an empty store or the
/// store's rows.
#[test]
fn a_dry_run_leaves_an_empty_file_and_an_older_store_as_they_were() {
    let dir = tempfile::tempdir().unwrap();

    let empty = dir.path().join("empty.db");
    std::fs::write(&empty, b"").unwrap();
    let (report, err) = dry_run(&empty);
    assert_eq!(report["dry_run"], true);
    assert_eq!(sessions_created(&report), 7, "{report}");
    assert!(err.contains("holds no scribe schema yet"), "{err}");
    assert_eq!(std::fs::read(&empty).unwrap(), b"");
    assert_eq!(common::names_in(dir.path()), ["empty.db"]);

    // An SQLite file with no tables (another program's, never used yet).
    let blank = dir.path().join("blank.db");
    {
        let conn = rusqlite::Connection::open(&blank).unwrap();
        conn.execute_batch("CREATE TABLE t(x); DROP TABLE t;")
            .unwrap();
    }
    let before = std::fs::read(&blank).unwrap();
    let (report, _) = dry_run(&blank);
    assert_eq!(sessions_created(&report), 7, "{report}");
    assert_eq!(std::fs::read(&blank).unwrap(), before);

    // A store one schema version behind: refused (this build cannot read it, and a dry
    // run migrates nothing), as on PostgreSQL, and left as it was.
    let known = scribe_db::Database::known_schema_version();
    let older = dir.path().join("older.db");
    drop(scribe_db::Database::open_at_version(&older, known - 1).unwrap());
    let before = std::fs::read(&older).unwrap();
    let out = scribe(&older)
        .args(["import", "--from", "claude-code", "--dry-run", "--json"])
        .arg(claude_projects())
        .output()
        .unwrap();
    let err = text(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(err.contains("older than this build's"), "{err}");
    assert!(err.contains("scribe db migrate"), "{err}");
    assert_eq!(
        std::fs::read(&older).unwrap(),
        before,
        "the older store changed"
    );
    let version: i64 = rusqlite::Connection::open(&older)
        .unwrap()
        .query_row(
            "SELECT max(version) FROM refinery_schema_history",
            [],
            |r| r.get(0),
        )
        .unwrap();
    assert_eq!(version, known - 1);

    // A store at this version, holding some of the sessions: only the others are new.
    let partial = dir.path().join("partial.db");
    ok(&scribe(&partial)
        .args(["import", "--from", "claude-code"])
        .arg(claude_projects().join("-path-to-Demo"))
        .output()
        .unwrap());
    let held = stored(&partial);
    assert!(held > 0 && held < 7, "{held}");
    let (report, _) = dry_run(&partial);
    assert_eq!(
        sessions_created(&report),
        7 - u64::try_from(held).unwrap(),
        "{report}"
    );

    let missing = dir.path().join("missing.db");
    let (report, _) = dry_run(&missing);
    assert_eq!(sessions_created(&report), 7, "{report}");
    assert!(!missing.exists());
}

/// An export of `copies` × the fixtures' 7 sessions (JSON Lines), every id made unique
/// per copy; returns the file and the number of sessions.
fn big_export(dir: &Path, copies: usize) -> (PathBuf, usize) {
    let seed = dir.join("seed.db");
    ok(&scribe(&seed)
        .args(["import", "--from", "claude-code"])
        .arg(claude_projects())
        .output()
        .unwrap());
    let lines = ok(&scribe(&seed)
        .args(["export", "--all", "--format", "jsonl"])
        .output()
        .unwrap());
    for suffix in ["", "-wal", "-shm", "-writers"] {
        drop(std::fs::remove_file(format!("{}{suffix}", seed.display())));
    }
    let lines: Vec<(String, Vec<String>)> = lines
        .lines()
        .map(|line| {
            let v: Value = serde_json::from_str(line).unwrap();
            let mut ids = vec![v["session"]["id"].as_str().unwrap().to_owned()];
            for m in v["messages"].as_array().unwrap() {
                ids.push(m["id"].as_str().unwrap().to_owned());
                for p in m["parts"].as_array().unwrap() {
                    ids.push(p["id"].as_str().unwrap().to_owned());
                }
            }
            // Longer ids first, so one that contains another is replaced whole.
            ids.sort_by_key(|id| std::cmp::Reverse(id.len()));
            ids.dedup();
            (line.to_owned(), ids)
        })
        .collect();
    let path = dir.join("big.jsonl");
    let mut file = std::io::BufWriter::new(std::fs::File::create(&path).unwrap());
    for copy in 0..copies {
        for (line, ids) in &lines {
            let mut line = line.clone();
            for (i, id) in ids.iter().enumerate() {
                line = line.replace(&format!("\"{id}\""), &format!("\"@{i}@\""));
            }
            for (i, id) in ids.iter().enumerate() {
                line = line.replace(&format!("\"@{i}@\""), &format!("\"{id}-{copy}\""));
            }
            writeln!(file, "{line}").unwrap();
        }
    }
    file.flush().unwrap();
    (path, copies * lines.len())
}

/// Sessions stored in `db` so far, read alongside the writer (0 while it has none).
fn stored(db: &Path) -> i64 {
    if !db.exists() {
        return 0;
    }
    let Ok(conn) =
        rusqlite::Connection::open_with_flags(db, rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY)
    else {
        return 0;
    };
    conn.query_row("SELECT count(*) FROM sessions", [], |r| r.get(0))
        .unwrap_or(0)
}

fn interrupt(child: &Child) {
    let status = Command::new("kill")
        .args(["-INT", &child.id().to_string()])
        .status()
        .unwrap();
    assert!(status.success());
}

/// Waits until `ready` holds (or a minute passed), then sends Ctrl-C.
fn interrupt_when(child: &Child, ready: impl Fn() -> bool) {
    let start = Instant::now();
    while !ready() {
        assert!(start.elapsed() < Duration::from_secs(60), "never got going");
        std::thread::sleep(Duration::from_millis(10));
    }
    interrupt(child);
}

/// What an interrupted import said: its exit status is 130, its summary counts what it
/// handled, and stderr says how many sessions it stored, which is what the database holds.
fn assert_interrupted_import(out: &Output, db: &Path, total: usize) -> i64 {
    let err = text(&out.stderr);
    assert_eq!(out.status.code(), Some(130), "{err}");
    let stored = stored(db);
    assert!(stored > 0, "{err}");
    assert!(
        usize::try_from(stored).unwrap() < total,
        "the import ran to its end: {err}"
    );
    let summary = text(&out.stdout);
    assert!(
        summary.ends_with(&format!("{stored} imported, 0 skipped, 0 failed\n")),
        "{summary}"
    );
    let grouped = |n: usize| {
        let s = n.to_string();
        let mut out = String::new();
        for (i, c) in s.chars().enumerate() {
            if i > 0 && (s.len() - i).is_multiple_of(3) {
                out.push(',');
            }
            out.push(c);
        }
        out
    };
    let stored_n = usize::try_from(stored).unwrap();
    assert!(
        err.contains(&format!("interrupted: {} sessions (", grouped(stored_n)))
            && err.contains(&format!(
                "{} of {} not reached",
                grouped(total - stored_n),
                grouped(total)
            )),
        "{err}"
    );
    stored
}

/// Ctrl-C during `import FILE`, `cat FILE | import -` and `db copy FROM NEW`: the import
/// stops after the transaction it is in, prints its summary and how many sessions it
/// stored and did not reach (both printed nothing and died of the signal), and importing
/// again finishes the rest; the copy leaves no file at NEW (it left an empty store that
/// the next copy refused), and copying again works.
#[test]
fn ctrl_c_stops_an_import_or_a_copy_and_says_so() {
    let dir = tempfile::tempdir().unwrap();
    let (export, total) = big_export(dir.path(), 1000);

    // From a file.
    let db = dir.path().join("file.db");
    let child = scribe(&db).arg("import").arg(&export).spawn().unwrap();
    interrupt_when(&child, || stored(&db) > 0);
    let out = child.wait_with_output().unwrap();
    let first = assert_interrupted_import(&out, &db, total);
    // Again: what was stored is skipped, the rest imported.
    let out = scribe(&db).arg("import").arg(&export).output().unwrap();
    let summary = ok(&out);
    assert!(
        summary.ends_with(&format!(
            "{} imported, {first} skipped, 0 failed\n",
            total - usize::try_from(first).unwrap()
        )),
        "{}",
        &summary[summary.len().saturating_sub(200)..]
    );

    // From a pipe.
    let piped = dir.path().join("pipe.db");
    let mut child = scribe(&piped)
        .args(["import", "-"])
        .stdin(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    let bytes = std::fs::read(&export).unwrap();
    let feeder = std::thread::spawn(move || {
        drop(stdin.write_all(&bytes));
    });
    interrupt_when(&child, || stored(&piped) > 0);
    let out = child.wait_with_output().unwrap();
    feeder.join().unwrap();
    assert_interrupted_import(&out, &piped, total);

    // A pipe still being read: nothing is stored, no database is created, and it says so
    // (a pipe cut off by Ctrl-C is not reported as a malformed file).
    let unread = dir.path().join("unread.db");
    let mut child = scribe(&unread)
        .args(["import", "-"])
        .stdin(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    stdin
        .write_all(&std::fs::read(&export).unwrap()[..4096])
        .unwrap();
    stdin.flush().unwrap();
    std::thread::sleep(Duration::from_millis(500));
    interrupt(&child);
    let out = child.wait_with_output().unwrap();
    drop(stdin);
    let err = text(&out.stderr);
    assert_eq!(out.status.code(), Some(130), "{err}");
    assert!(err.contains("interrupted: nothing was imported"), "{err}");
    assert!(!unread.exists());

    // A copy into a new file, in a directory of its own.
    let into = dir.path().join("copies");
    std::fs::create_dir(&into).unwrap();
    let new = into.join("new.db");
    let child = Command::new(env!("CARGO_BIN_EXE_scribe"))
        .env_remove("SCRIBE_DB")
        .arg("db")
        .arg("copy")
        .arg(&db)
        .arg(&new)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    interrupt_when(&child, || !common::names_in(&into).is_empty());
    let out = child.wait_with_output().unwrap();
    let err = text(&out.stderr);
    assert_eq!(out.status.code(), Some(130), "{err}");
    assert!(
        err.contains("interrupted: nothing was copied, and no database was created at"),
        "{err}"
    );
    assert!(
        common::names_in(&into).is_empty(),
        "{:?}",
        common::names_in(&into)
    );
    // The next copy is not refused, and leaves only the store.
    let out = Command::new(env!("CARGO_BIN_EXE_scribe"))
        .env_remove("SCRIBE_DB")
        .arg("db")
        .arg("copy")
        .arg(&db)
        .arg(&new)
        .output()
        .unwrap();
    let report = ok(&out);
    assert!(
        report.contains(&format!("to {}", new.display())),
        "{report}"
    );
    assert_eq!(common::names_in(&into), ["new.db"]);
    assert_eq!(stored(&new), i64::try_from(total).unwrap());
}

/// On PostgreSQL a dry run writes nothing either: an empty database is counted as an
/// empty store and keeps no table (it was given the whole schema), and one at an older
/// schema version is refused with what to run, and stays at its version (it was
/// migrated).
#[test]
#[ignore = "needs PostgreSQL: run under .ci/with-postgres"]
fn a_dry_run_leaves_an_empty_or_older_postgres_database_as_it_was() {
    let tables = |url: &str| -> i64 {
        let mut client = postgres::Client::connect(url, postgres::NoTls).unwrap();
        client
            .query_one(
                "SELECT count(*) FROM information_schema.tables \
                 WHERE table_schema = current_schema()",
                &[],
            )
            .unwrap()
            .get(0)
    };
    let empty = scribe_db::testing::fresh_test_database("dry_run_empty").unwrap();
    let (report, err) = dry_run(Path::new(&empty));
    assert_eq!(sessions_created(&report), 7, "{report}");
    assert!(err.contains("holds no scribe schema yet"), "{err}");
    assert_eq!(tables(&empty), 0);

    let older = scribe_db::testing::fresh_test_database("dry_run_older").unwrap();
    let known = scribe_db::Database::known_schema_version();
    drop(scribe_db::Database::open_at_version(&older, known - 1).unwrap());
    let before = tables(&older);
    let out = scribe(Path::new(&older))
        .args(["import", "--from", "claude-code", "--dry-run"])
        .arg(claude_projects())
        .output()
        .unwrap();
    let err = text(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(err.contains("scribe db migrate"), "{err}");
    assert_eq!(tables(&older), before);
    let version = scribe_db::Database::open_read_only(&older);
    assert!(
        matches!(version, Err(scribe_db::Error::SchemaTooOld { found, .. }) if found == known - 1),
        "{version:?}"
    );
}

/// `count` Codex rollouts of `messages` messages each under `dir/sessions`.
fn codex_rollouts(dir: &Path, count: usize, messages: usize) -> PathBuf {
    let root = dir.join("sessions");
    std::fs::create_dir_all(&root).unwrap();
    let lines: Vec<(&str, String)> = (0..messages)
        .map(|m| {
            let role = if m % 2 == 0 { "user" } else { "assistant" };
            (
                role,
                format!("{m}: {}", "a line of a long conversation ".repeat(6)),
            )
        })
        .collect();
    let lines: Vec<(&str, &str)> = lines.iter().map(|(r, t)| (*r, t.as_str())).collect();
    for i in 0..count {
        let id = format!("019c8a70-dda7-7f33-98ea-{i:012}");
        std::fs::write(
            root.join(format!("rollout-2026-02-23T13-19-38-{i:05}.jsonl")),
            fixture_home::codex_rollout(&id, &lines),
        )
        .unwrap();
    }
    root
}

/// Ctrl-C during `import --from AGENT`: it stops between files (the files taken are
/// stored, whole), prints its report, says on stderr how many sessions it stored and
/// how many of the agent's files it did not reach, and exits 130; importing again reads
/// the rest, and every session is there once. Before, the signal ended it and it printed
/// nothing.
#[test]
fn ctrl_c_stops_an_import_from_an_agent_between_files() {
    let dir = tempfile::tempdir().unwrap();
    let (files, messages) = (2_000, 40);
    let root = codex_rollouts(dir.path(), files, messages);
    let db = dir.path().join("agent.db");
    let child = scribe(&db)
        .args(["import", "--from", "codex"])
        .arg(&root)
        .spawn()
        .unwrap();
    interrupt_when(&child, || stored(&db) > 0);
    let out = child.wait_with_output().unwrap();
    let err = text(&out.stderr);
    assert_eq!(out.status.code(), Some(130), "{err}");
    let first = stored(&db);
    assert!(
        first > 0 && usize::try_from(first).unwrap() < files,
        "{first}: {err}"
    );
    assert!(
        text(&out.stdout).starts_with("codex "),
        "{}",
        text(&out.stdout)
    );
    assert!(
        err.contains(&format!("interrupted: {first} sessions (")),
        "{err}"
    );
    assert!(err.contains(" files of codex not reached"), "{err}");
    assert!(err.contains("importing again reads the rest"), "{err}");
    // Whole files: every stored session has all its messages (the importer makes 21 of
    // each file's 40 lines; the count is the same for every file, whole).
    let counts = |db: &Path| -> Vec<i64> {
        let conn = rusqlite::Connection::open(db).unwrap();
        let mut stmt = conn
            .prepare("SELECT DISTINCT message_count FROM sessions")
            .unwrap();
        stmt.query_map([], |r| r.get(0))
            .unwrap()
            .map(Result::unwrap)
            .collect()
    };
    let whole = counts(&db);
    assert_eq!(whole.len(), 1, "{whole:?}");

    let out = scribe(&db)
        .args(["import", "--from", "codex", "--json"])
        .arg(&root)
        .output()
        .unwrap();
    let report: Value = serde_json::from_str(&ok(&out)).unwrap();
    assert_eq!(
        report["sources"][0]["sessions_created"].as_i64().unwrap(),
        i64::try_from(files).unwrap() - first,
        "{report}"
    );
    assert_eq!(stored(&db), i64::try_from(files).unwrap());
    assert_eq!(counts(&db), whole);
    let check = scribe(&db).args(["db", "check"]).output().unwrap();
    ok(&check);
}
