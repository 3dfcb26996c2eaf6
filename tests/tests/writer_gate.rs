//! The writers' gate (`Options::writer_gate`, `crates/db/src/gate.rs`) with real
//! processes: writers queued at the `<db>-writers` flock lose nothing; a process stuck
//! inside a write (holding the gate and SQLite's lock) makes another process's write fail
//! with `Error::Locked` once its budget is spent, instead of hanging; a killed holder lets
//! the next writer in (the kernel drops its lock); read-only and in-memory databases never
//! create the side file, and a read-write open does by default (the gate is on unless
//! switched off).
//!
//! Every child is this test binary re-run in the `writer_gate_child` role (which one is in
//! `SCRIBE_GATE_ROLE`).

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::io::{BufRead, BufReader, Write};
use std::path::Path;
use std::process::{Child, Stdio};
use std::sync::mpsc;
use std::time::Duration;

use scribe_db::ids::{Prefix, new_id};
use scribe_db::{Database, Error, Options, writer_gate_path};
use scribe_message::{MessageService, NewMessage, Part, Role};
use scribe_tests::{child_command, consistency_problems, create_session};

const CHILD_TEST: &str = "writer_gate_child";
const ENV_ROLE: &str = "SCRIBE_GATE_ROLE";
const ENV_DB: &str = "SCRIBE_GATE_DB";
const ENV_SESSION: &str = "SCRIBE_GATE_SESSION";
const ENV_COUNT: &str = "SCRIBE_GATE_COUNT";

const WRITERS: usize = 4;
const MESSAGES_PER_WRITER: usize = 250;
/// How long the parent waits for anything a child or a bounded write must do; far above
/// what any of it takes, only so that a hang fails the test instead of stalling it.
const GENEROUS: Duration = Duration::from_secs(120);

fn gated() -> Options {
    Options {
        writer_gate: true,
        ..Options::default()
    }
}

/// The gate with a short budget: 5 tries of (10 ms + ~3 ms), so a write that cannot get
/// in gives up after well under a second.
fn gated_impatient() -> Options {
    Options {
        writer_gate: true,
        write_attempts: 5,
        busy_timeout: Duration::from_millis(10),
        retry_min: Duration::from_millis(1),
        retry_max: Duration::from_millis(5),
        ..Options::default()
    }
}

fn env(name: &str) -> String {
    std::env::var(name).unwrap_or_else(|_| panic!("{name} is not set"))
}

/// The child roles. A no-op in the normal test run.
#[test]
fn writer_gate_child() {
    let Ok(role) = std::env::var(ENV_ROLE) else {
        return;
    };
    let path = env(ENV_DB);
    let db = std::sync::Arc::new(Database::open_with(&path, gated()).unwrap());
    let mut out = std::io::stdout().lock();
    match role.as_str() {
        // Appends its messages through the gate, one transaction each; any error fails
        // the child (a panic, non-zero exit).
        "writer" => {
            let session = env(ENV_SESSION);
            let count: usize = env(ENV_COUNT).parse().unwrap();
            let service = MessageService::new(db);
            writeln!(out, "ready").and_then(|()| out.flush()).unwrap();
            let mut go = String::new();
            std::io::stdin().read_line(&mut go).unwrap();
            for i in 0..count {
                let text = format!("message {i} of {session}");
                service
                    .create(NewMessage::new(
                        session.clone(),
                        Role::User,
                        vec![Part::text(text)],
                    ))
                    .unwrap();
            }
            writeln!(out, "done").and_then(|()| out.flush()).unwrap();
        }
        // Stays inside a write (the gate and SQLite's write lock held, a session inserted
        // but not committed) until its stdin closes, then commits.
        "holder" => {
            let id = new_id(Prefix::Session);
            db.write(|tx| -> scribe_db::Result<()> {
                scribe_db::testing::create_bare_session(tx, &id)?;
                writeln!(out, "holding").and_then(|()| out.flush()).unwrap();
                let mut line = String::new();
                let _ = std::io::stdin().read_line(&mut line);
                Ok(())
            })
            .unwrap();
        }
        other => panic!("unknown role {other:?}"),
    }
}

fn spawn(role: &str, db: &Path, session: &str) -> Child {
    child_command(CHILD_TEST)
        .unwrap()
        .env(ENV_ROLE, role)
        .env(ENV_DB, db)
        .env(ENV_SESSION, session)
        .env(ENV_COUNT, MESSAGES_PER_WRITER.to_string())
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .unwrap()
}

/// Reads the child's stdout on a thread and sends every line that ends with a word.
fn lines(child: &mut Child) -> mpsc::Receiver<String> {
    let stdout = child.stdout.take().unwrap();
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        let mut reader = BufReader::new(stdout);
        let mut line = String::new();
        while reader.read_line(&mut line).is_ok_and(|n| n > 0) {
            // libtest has already printed "test <name> ... " on the same line.
            if let Some(word) = line.split_whitespace().last() {
                let _ = tx.send(word.to_owned());
            }
            line.clear();
        }
    });
    rx
}

fn expect_line(rx: &mpsc::Receiver<String>, word: &str) {
    loop {
        let got = rx
            .recv_timeout(GENEROUS)
            .unwrap_or_else(|err| panic!("no {word:?} from the child: {err}"));
        if got == word {
            return;
        }
    }
}

/// A write of one session on `path` with `options`, on a thread: its outcome and the
/// handle's write retries, or a failure if it does not finish within [`GENEROUS`].
fn bounded_write(path: &Path, options: Options) -> (scribe_db::Result<String>, u64) {
    let path = path.to_owned();
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        let db = Database::open_with(&path, options).unwrap();
        let outcome = create_session(&db, Some("after the holder"));
        let _ = tx.send((outcome, db.write_retries()));
    });
    rx.recv_timeout(GENEROUS)
        .expect("a write waiting for the gate hung instead of giving up")
}

fn count(db: &Database, table: &str) -> i64 {
    db.read(|tx| -> scribe_db::Result<i64> {
        Ok(tx
            .conn()
            .unwrap()
            .query_row(&format!("SELECT count(*) FROM {table}"), [], |r| r.get(0))?)
    })
    .unwrap()
}

#[test]
#[cfg(unix)]
fn writers_through_the_gate_lose_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("gate.db");
    let sessions: Vec<String> = {
        let db = Database::open_with(&path, gated()).unwrap();
        (0..WRITERS)
            .map(|i| create_session(&db, Some(&format!("writer {i}"))).unwrap())
            .collect()
    };
    assert!(writer_gate_path(&path).is_file());
    let mut children: Vec<Child> = sessions
        .iter()
        .map(|session| spawn("writer", &path, session))
        .collect();
    let outputs: Vec<_> = children.iter_mut().map(lines).collect();
    for rx in &outputs {
        expect_line(rx, "ready");
    }
    for child in &mut children {
        let stdin = child.stdin.as_mut().unwrap();
        writeln!(stdin, "go").and_then(|()| stdin.flush()).unwrap();
    }
    for (child, rx) in children.iter_mut().zip(&outputs) {
        expect_line(rx, "done");
        assert!(child.wait().unwrap().success(), "a writer failed");
    }
    let db = Database::open(&path).unwrap();
    assert_eq!(
        count(&db, "messages"),
        (WRITERS * MESSAGES_PER_WRITER) as i64
    );
    let problems = consistency_problems(&db).unwrap();
    assert!(problems.is_empty(), "{problems:#?}");
}

#[test]
#[cfg(unix)]
fn a_stuck_holder_makes_a_write_fail_locked_instead_of_hanging() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("stuck.db");
    drop(Database::open_with(&path, gated()).unwrap());
    let mut holder = spawn("holder", &path, "");
    let rx = lines(&mut holder);
    expect_line(&rx, "holding");

    let (outcome, retries) = bounded_write(&path, gated_impatient());
    let err = outcome.expect_err("a write got in while another process held the gate");
    assert!(matches!(err, Error::Locked), "{err:?}");
    assert_eq!(err.kind(), scribe_db::ErrorKind::Retryable);
    assert_eq!(retries, 0, "it waited at the gate, not at SQLite's lock");

    // Let go: the holder commits, and the next write gets in.
    drop(holder.stdin.take());
    assert!(holder.wait().unwrap().success());
    let (outcome, _) = bounded_write(&path, gated_impatient());
    outcome.unwrap();
    let db = Database::open(&path).unwrap();
    assert_eq!(
        count(&db, "sessions"),
        2,
        "the holder's session and the later one"
    );
}

#[test]
#[cfg(unix)]
fn a_killed_holder_lets_the_next_writer_in() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("killed.db");
    drop(Database::open_with(&path, gated()).unwrap());
    let mut holder = spawn("holder", &path, "");
    let rx = lines(&mut holder);
    expect_line(&rx, "holding");
    // SIGKILL on unix: no rollback, no unlock runs in the holder.
    holder.kill().unwrap();
    assert!(!holder.wait().unwrap().success());

    // With a budget of well under a second, only a gate the kernel let go of lets it in.
    let (outcome, retries) = bounded_write(&path, gated_impatient());
    outcome.unwrap();
    assert_eq!(retries, 0);
    let db = Database::open(&path).unwrap();
    assert_eq!(count(&db, "sessions"), 1, "the killed write is not there");
    let problems = consistency_problems(&db).unwrap();
    assert!(problems.is_empty(), "{problems:#?}");
}

#[test]
#[cfg(unix)]
fn two_databases_in_one_process_take_turns_at_the_gate() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("one-process.db");
    let first = &Database::open_with(&path, gated()).unwrap();
    let second = Database::open_with(&path, gated_impatient()).unwrap();
    let (held_tx, held) = mpsc::channel();
    let (release_tx, release) = mpsc::channel::<()>();
    std::thread::scope(|scope| {
        scope.spawn(move || {
            first
                .write(|_tx| -> scribe_db::Result<()> {
                    held_tx.send(()).unwrap();
                    // Also ends when the main thread failed (its sender dropped).
                    let _ = release.recv_timeout(GENEROUS);
                    Ok(())
                })
                .unwrap();
        });
        // Dropped if an assertion below fails, so the holder ends and the scope can join.
        let release_tx = release_tx;
        held.recv_timeout(GENEROUS).unwrap();
        let err = create_session(&second, None).expect_err("both handles were in");
        assert!(matches!(err, Error::Locked), "{err:?}");
        assert_eq!(second.write_retries(), 0, "it waited at the gate");
        release_tx.send(()).unwrap();
    });
    create_session(&second, None).unwrap();
}

#[test]
fn read_only_and_in_memory_databases_have_no_gate_file() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("plain.db");
    // Switched off: no side file.
    let ungated = Options {
        writer_gate: false,
        ..Options::default()
    };
    drop(Database::open_with(&path, ungated).unwrap());
    assert!(!writer_gate_path(&path).exists());
    let read_only = Options {
        read_only: true,
        ..gated()
    };
    let db = Database::open_with(&path, read_only).unwrap();
    assert_eq!(count(&db, "sessions"), 0);
    drop(db);
    assert!(!writer_gate_path(&path).exists());
    let memory = Database::open_in_memory_with(gated()).unwrap();
    create_session(&memory, None).unwrap();
    assert!(std::fs::read_dir(dir.path()).unwrap().all(|entry| {
        let name = entry.unwrap().file_name();
        !name.to_string_lossy().ends_with("-writers")
    }));
    // A read-write open with the gate (the default) creates it, private.
    drop(Database::open(&path).unwrap());
    let meta = std::fs::metadata(writer_gate_path(&path)).unwrap();
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        assert_eq!(meta.permissions().mode() & 0o777, 0o600);
    }
    #[cfg(not(unix))]
    let _ = meta;
}
