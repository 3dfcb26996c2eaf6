//! Several real processes write one file at once and no write is lost; a lock held past the
//! retry budget surfaces as `Error::Locked`.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::process::Command;
use std::time::{Duration, Instant};

use common::*;
use scribe_db::{Database, Error, Options};

const CHILD_DB: &str = "SCRIBE_DB_TEST_CHILD_DB";
const CHILD_SESSION: &str = "SCRIBE_DB_TEST_CHILD_SESSION";
const CHILD_ROWS: &str = "SCRIBE_DB_TEST_CHILD_ROWS";
const PROCESSES: usize = 4;
const ROWS: usize = 2_000;

/// The child role: when spawned by `four_processes_append_without_loss` with the env vars
/// set, appends its rows (one message with one part per transaction); otherwise a no-op.
#[test]
fn child_writer() {
    let (Ok(path), Ok(session_id), Ok(rows)) = (
        std::env::var(CHILD_DB),
        std::env::var(CHILD_SESSION),
        std::env::var(CHILD_ROWS),
    ) else {
        return;
    };
    let rows: usize = rows.parse().unwrap();
    let db = Database::open(&path).unwrap();
    for i in 0..rows {
        db.write(|tx| -> scribe_db::Result<_> {
            let tx = tx.conn().unwrap();
            message_with_part(
                tx,
                &session_id,
                "user",
                "text",
                &text(&format!("row {i} of {session_id}")),
            )
        })
        .unwrap();
    }
}

#[test]
fn four_processes_append_without_loss() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("shared.db");
    let db = Database::open(&path).unwrap();
    let sessions: Vec<String> = (0..PROCESSES).map(|_| session(&db, "cli")).collect();
    drop(db);

    let exe = std::env::current_exe().unwrap();
    let started = Instant::now();
    let children: Vec<_> = sessions
        .iter()
        .map(|s| {
            Command::new(&exe)
                .args(["--exact", "child_writer", "--nocapture", "--test-threads=1"])
                .env(CHILD_DB, &path)
                .env(CHILD_SESSION, s)
                .env(CHILD_ROWS, ROWS.to_string())
                .stdout(std::process::Stdio::null())
                .spawn()
                .unwrap()
        })
        .collect();
    for mut child in children {
        let status = child.wait().unwrap();
        assert!(status.success(), "a writer process failed: {status}");
    }
    eprintln!("{PROCESSES}×{ROWS} rows in {:?}", started.elapsed());

    let db = Database::open(&path).unwrap();
    db.read(|c| -> scribe_db::Result<_> {
        let c = c.conn().unwrap();
        let ok: String = c.query_row("PRAGMA integrity_check", [], |r| r.get(0))?;
        assert_eq!(ok, "ok");
        for s in &sessions {
            let (messages, parts, counter): (i64, i64, i64) = c.query_row(
                "SELECT (SELECT count(*) FROM messages WHERE session_id = ?1), \
                        (SELECT count(*) FROM parts WHERE session_id = ?1), \
                        (SELECT message_count FROM sessions WHERE id = ?1)",
                [s],
                |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)),
            )?;
            assert_eq!(
                (messages, parts, counter),
                (ROWS as i64, ROWS as i64, ROWS as i64)
            );
        }
        Ok(())
    })
    .unwrap();
    assert_derived_exact(&db);
}

#[test]
fn a_lock_held_past_the_budget_is_reported_as_locked() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("locked.db");
    let options = Options {
        busy_timeout: Duration::from_millis(10),
        write_attempts: 3,
        retry_min: Duration::from_millis(5),
        retry_max: Duration::from_millis(10),
        ..Options::default()
    };
    let db = Database::open_with(&path, options).unwrap();
    let s = session(&db, "cli");

    let holder = rusqlite::Connection::open(&path).unwrap();
    holder.execute_batch("BEGIN IMMEDIATE").unwrap();
    let mut runs = 0;
    let err = db
        .write(|tx| -> scribe_db::Result<_> {
            let tx = tx.conn().unwrap();
            runs += 1;
            message_with_part(tx, &s, "user", "text", &text("blocked"))
        })
        .unwrap_err();
    assert!(matches!(err, Error::Locked), "{err:?}");
    assert!(err.to_string().contains("locked"));
    // BEGIN IMMEDIATE fails before the closure ever runs.
    assert_eq!(runs, 0);
    // Reads don't need the write lock.
    let n: i64 = db
        .read(|c| -> scribe_db::Result<_> {
            let c = c.conn().unwrap();
            Ok(c.query_row("SELECT count(*) FROM messages", [], |r| r.get(0))?)
        })
        .unwrap();
    assert_eq!(n, 0);

    holder.execute_batch("COMMIT").unwrap();
    db.write(|tx| -> scribe_db::Result<_> {
        let tx = tx.conn().unwrap();
        message_with_part(tx, &s, "user", "text", &text("free"))
    })
    .unwrap();
}

#[test]
fn threads_sharing_one_database_all_count() {
    let db = std::sync::Arc::new(Database::open_in_memory().unwrap());
    let s = session(&db, "cli");
    let handles: Vec<_> = (0..8)
        .map(|_| {
            let db = db.clone();
            let s = s.clone();
            std::thread::spawn(move || {
                for _ in 0..50 {
                    db.write(|tx| -> scribe_db::Result<_> {
                        let tx = tx.conn().unwrap();
                        tx.execute(
                            "UPDATE sessions SET input_tokens = input_tokens + 3, \
                             estimated_cost_usd = estimated_cost_usd + 0.5 WHERE id = ?1",
                            [&s],
                        )?;
                        Ok(())
                    })
                    .unwrap();
                }
            })
        })
        .collect();
    for h in handles {
        h.join().unwrap();
    }
    let (tokens, cost): (i64, f64) = db
        .read(|c| -> scribe_db::Result<_> {
            let c = c.conn().unwrap();
            Ok(c.query_row(
                "SELECT input_tokens, estimated_cost_usd FROM sessions WHERE id = ?1",
                [&s],
                |r| Ok((r.get(0)?, r.get(1)?)),
            )?)
        })
        .unwrap();
    assert_eq!((tokens, cost), (8 * 50 * 3, 8.0 * 50.0 * 0.5));
}
