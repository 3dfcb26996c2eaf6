//! Opening a database: file modes, migrations in place, refusing newer schemas, and every
//! static query in `sql/queries` preparing against the migrated schema.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use common::*;
use rusqlite::Connection;
use scribe_db::{Database, Error};

#[cfg(unix)]
#[test]
fn new_directory_and_file_are_private() {
    use std::os::unix::fs::PermissionsExt;
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("nested/deeper/scribe.db");
    let db = Database::open(&path).unwrap();
    let mode = |p: &std::path::Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode(path.parent().unwrap()), 0o700);
    assert_eq!(mode(&dir.path().join("nested")), 0o700);
    assert_eq!(mode(&path), 0o600);
    db.write(|tx| -> scribe_db::Result<_> {
        let tx = tx.conn().unwrap();
        tx.execute(
            "INSERT INTO sessions (id, created_at, updated_at) VALUES ('s', 1, 1)",
            [],
        )?;
        Ok(())
    })
    .unwrap();
    // SQLite gives the WAL the main file's mode.
    assert_eq!(mode(&dir.path().join("nested/deeper/scribe.db-wal")), 0o600);
}

#[test]
fn pragmas_are_set() {
    let dir = tempfile::tempdir().unwrap();
    let db = Database::open(dir.path().join("p.db")).unwrap();
    let (journal, fk, sync): (String, i64, i64) = db
        .write(|tx| -> scribe_db::Result<_> {
            let tx = tx.conn().unwrap();
            Ok((
                tx.query_row("PRAGMA journal_mode", [], |r| r.get(0))?,
                tx.query_row("PRAGMA foreign_keys", [], |r| r.get(0))?,
                tx.query_row("PRAGMA synchronous", [], |r| r.get(0))?,
            ))
        })
        .unwrap();
    assert_eq!((journal.as_str(), fk, sync), ("wal", 1, 1));
    // Readers are separate connections that cannot write.
    let err = db
        .read(|c| -> scribe_db::Result<_> {
            let c = c.conn().unwrap();
            c.execute(
                "INSERT INTO sessions (id, created_at, updated_at) VALUES ('r', 1, 1)",
                [],
            )?;
            Ok(())
        })
        .unwrap_err();
    assert!(matches!(err, Error::Storage(_)), "{err:?}");
}

/// Messages in the database file alone, without its WAL: a copy of just the main file
/// holds only what a checkpoint has copied there.
fn checkpointed_messages(path: &std::path::Path) -> i64 {
    copied_messages(path).unwrap()
}

/// [`checkpointed_messages`], or the error reading the copy: a copy taken while a
/// checkpoint on another thread is writing pages into the main file can be torn
/// ("database disk image is malformed"), which is the copy's fault, not the file's.
fn copied_messages(path: &std::path::Path) -> rusqlite::Result<i64> {
    let copy = tempfile::tempdir().unwrap();
    let main_only = copy.path().join("main-only.db");
    std::fs::copy(path, &main_only).unwrap();
    let conn = Connection::open(&main_only)?;
    conn.query_row("SELECT count(*) FROM messages", [], |r| r.get(0))
}

#[test]
fn checkpoints_run_every_n_writes_and_on_demand() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("c.db");
    let options = scribe_db::Options {
        checkpoint_every: 3,
        ..scribe_db::Options::default()
    };
    let db = Database::open_with(&path, options).unwrap();
    assert_eq!((db.checkpoints_run(), db.last_checkpoint()), (0, None));
    // On demand: the migrations reach the main file, so the copy below has the schema.
    db.checkpoint().unwrap();
    assert_eq!(db.checkpoints_run(), 1);
    let first = db.last_checkpoint().unwrap();
    assert!(!first.busy && first.wal_frames > 0, "{first:?}");
    assert_eq!(first.checkpointed_frames, first.wal_frames);

    let s = session(&db, "cli"); // write 1
    let add = |i: usize| {
        db.write(|tx| -> scribe_db::Result<_> {
            let tx = tx.conn().unwrap();
            message_with_part(tx, &s, "user", "text", &text(&format!("m{i}")))
        })
        .unwrap();
    };
    add(0); // write 2
    assert_eq!(
        db.checkpoints_run(),
        1,
        "no checkpoint before the 3rd write"
    );
    assert_eq!(
        checkpointed_messages(&path),
        0,
        "the message is only in the WAL"
    );

    add(1); // write 3: the periodic checkpoint runs
    assert_eq!(db.checkpoints_run(), 2);
    let periodic = db.last_checkpoint().unwrap();
    // No reader holds an old snapshot, so a passive checkpoint copies every frame.
    assert!(!periodic.busy, "{periodic:?}");
    assert!(periodic.wal_frames > 0);
    assert_eq!(periodic.checkpointed_frames, periodic.wal_frames);
    assert_eq!(
        checkpointed_messages(&path),
        2,
        "both messages reached the main file"
    );

    for i in 2..9 {
        add(i); // writes 4..=10: checkpoints after the 6th and 9th
    }
    assert_eq!(db.checkpoints_run(), 4);
    assert_eq!(
        checkpointed_messages(&path),
        8,
        "the 10th write is not checkpointed yet"
    );
    db.checkpoint().unwrap();
    assert_eq!(db.checkpoints_run(), 5);
    assert_eq!(checkpointed_messages(&path), 9);
    assert_derived_exact(&db);
}

#[test]
fn no_periodic_checkpoint_when_disabled_or_in_memory() {
    let dir = tempfile::tempdir().unwrap();
    let options = scribe_db::Options {
        checkpoint_every: 0,
        ..scribe_db::Options::default()
    };
    let db = Database::open_with(dir.path().join("off.db"), options).unwrap();
    let s = session(&db, "cli");
    for i in 0..5 {
        db.write(|tx| -> scribe_db::Result<_> {
            let tx = tx.conn().unwrap();
            message_with_part(tx, &s, "user", "text", &text(&format!("m{i}")))
        })
        .unwrap();
    }
    assert_eq!(db.checkpoints_run(), 0);

    let memory = Database::open_in_memory().unwrap();
    session(&memory, "cli");
    memory.checkpoint().unwrap();
    assert_eq!(
        (memory.checkpoints_run(), memory.last_checkpoint()),
        (0, None)
    );
}

/// Bytes of `path`'s `-wal` file (0 when there is none).
fn wal_bytes(path: &std::path::Path) -> u64 {
    std::fs::metadata(format!("{}-wal", path.display())).map_or(0, |m| m.len())
}

/// Bytes a WAL of `frames` 4 KiB pages takes (each frame has a 24-byte header).
const fn wal_frames_bytes(frames: u64) -> u64 {
    frames * (4096 + 24)
}

/// With the writers' gate (the default), SQLite's auto-checkpoint (a passive checkpoint
/// once a commit leaves 1,000 frames in the WAL) runs on a thread of its own, not in the
/// write that was due it: the write returns without having checkpointed, and what it
/// committed still reaches the main file without another write.
#[test]
fn the_auto_checkpoint_runs_off_the_writing_thread() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("auto.db");
    let options = scribe_db::Options {
        checkpoint_every: 0,
        background_indexing: false,
        ..scribe_db::Options::default()
    };
    let db = Database::open_with(&path, options).unwrap();
    let s = session(&db, "cli");
    // On demand: the schema reaches the main file, so its copies below can be read.
    db.checkpoint().unwrap();
    assert_eq!(db.checkpoints_run(), 1);
    let body = "lorem ipsum dolor sit amet ".repeat(600); // ~16 KB: a few pages per write
    let mut written = 0;
    while wal_bytes(&path) < wal_frames_bytes(1_000) {
        db.write(|tx| -> scribe_db::Result<_> {
            let tx = tx.conn().unwrap();
            message_with_part(tx, &s, "user", "text", &text(&body))
        })
        .unwrap();
        written += 1;
    }
    // The write that left 1,000 frames was due the checkpoint: not run by it.
    assert_eq!(db.checkpoints_run(), 1);
    // The thread copies everything committed before it began, with no write after.
    // The copies are taken while the thread writes into the main file: a torn one is
    // looked at again.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    let reached = loop {
        let there = copied_messages(&path);
        if let Ok(n) = there
            && n >= written
        {
            break n;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "the WAL never reached the main file: {there:?} of {written} messages there"
        );
        std::thread::sleep(std::time::Duration::from_millis(20));
    };
    assert_eq!(reached, written);
    assert_derived_exact(&db);
}

/// A thread that writes without pause never leaves the auto-checkpoint's thread a moment
/// in which every frame is copied, which is when the WAL starts over: past 4,000 frames
/// (16 MiB) the write checkpoints itself, so the file stays near that size instead of
/// growing with everything written (~190 MB here without that backstop).
#[test]
fn writing_without_pause_keeps_the_wal_near_its_backstop() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("busy.db");
    let db = Database::open(&path).unwrap();
    let s = session(&db, "cli");
    let body = "lorem ipsum dolor sit amet ".repeat(150); // ~4 KB
    let mut peak = 0;
    for _ in 0..3_000 {
        db.write(|tx| -> scribe_db::Result<_> {
            let tx = tx.conn().unwrap();
            message_with_part(tx, &s, "user", "text", &text(&body))
        })
        .unwrap();
        peak = peak.max(wal_bytes(&path));
    }
    assert!(
        peak <= wal_frames_bytes(5_000),
        "the -wal file grew to {peak} bytes"
    );
    assert_derived_exact(&db);
}

#[test]
fn a_v1_database_with_data_keeps_every_row_when_opened_by_this_build() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("old.db");
    let (sessions, messages) = {
        let old = Database::open_at_version(&path, 1).unwrap();
        assert_eq!(old.schema_version().unwrap(), 1);
        let mut messages = Vec::new();
        let sessions: Vec<String> = (0..5).map(|i| session(&old, &format!("src{i}"))).collect();
        for s in &sessions {
            for i in 0..20 {
                let (m, _) = old
                    .write(|tx| -> scribe_db::Result<_> {
                        let tx = tx.conn().unwrap();
                        message_with_part(tx, s, "user", "text", &text(&format!("row {i}")))
                    })
                    .unwrap();
                messages.push(m);
            }
        }
        (sessions, messages)
    };

    let db = Database::open(&path).unwrap();
    assert_eq!(
        db.schema_version().unwrap(),
        Database::known_schema_version()
    );
    let report = db.migration_report();
    assert_eq!(report.from, 1);
    assert_eq!(report.to, Database::known_schema_version());
    db.index_pending().unwrap();
    db.read(|c| -> scribe_db::Result<_> {
        let c = c.conn().unwrap();
        let ids = |sql: &str| -> Vec<String> {
            let mut stmt = c.prepare(sql).unwrap();
            stmt.query_map([], |r| r.get(0))
                .unwrap()
                .map(Result::unwrap)
                .collect()
        };
        let mut want_sessions = sessions.clone();
        want_sessions.sort();
        assert_eq!(ids("SELECT id FROM sessions ORDER BY id"), want_sessions);
        let mut want_messages = messages.clone();
        want_messages.sort();
        assert_eq!(ids("SELECT id FROM messages ORDER BY id"), want_messages);
        assert_eq!(ids("SELECT id FROM parts").len(), messages.len());
        assert_eq!(hits(c, "parts_fts", "row").len(), messages.len());
        Ok(())
    })
    .unwrap();
    assert_derived_exact(&db);
}

#[test]
fn opening_twice_is_a_no_op() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("twice.db");
    let first = Database::open(&path).unwrap();
    assert_eq!(first.migration_report().from, 0);
    assert!(!first.migration_report().applied.is_empty());
    let s = session(&first, "cli");
    drop(first);
    let second = Database::open(&path).unwrap();
    let report = second.migration_report();
    assert!(report.applied.is_empty(), "{report:?}");
    assert_eq!(report.from, report.to);
    let n: i64 = second
        .read(|c| -> scribe_db::Result<_> {
            let c = c.conn().unwrap();
            Ok(
                c.query_row("SELECT count(*) FROM sessions WHERE id = ?1", [&s], |r| {
                    r.get(0)
                })?,
            )
        })
        .unwrap();
    assert_eq!(n, 1);
    // Two handles on one file at once are fine too.
    let third = Database::open(&path).unwrap();
    assert!(third.migration_report().applied.is_empty());
}

#[test]
fn a_newer_schema_is_refused_naming_both_versions() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("future.db");
    drop(Database::open(&path).unwrap());
    let conn = Connection::open(&path).unwrap();
    conn.execute(
        "INSERT INTO refinery_schema_history (version, name, applied_on, checksum) \
         VALUES (999, 'from_the_future', '2030-01-01T00:00:00Z', '0')",
        [],
    )
    .unwrap();
    drop(conn);
    let err = Database::open(&path).unwrap_err();
    let known = Database::known_schema_version();
    assert!(
        matches!(err, Error::SchemaTooNew { found: 999, known: k } if k == known),
        "{err:?}"
    );
    let message = err.to_string();
    assert!(
        message.contains("999") && message.contains(&format!("version {known}")),
        "{message}"
    );
}

#[test]
fn an_edited_migration_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("edited.db");
    drop(Database::open(&path).unwrap());
    let conn = Connection::open(&path).unwrap();
    conn.execute(
        "UPDATE refinery_schema_history SET checksum = '1' WHERE version = 1",
        [],
    )
    .unwrap();
    drop(conn);
    let err = Database::open(&path).unwrap_err();
    assert!(matches!(err, Error::Migration(_)), "{err:?}");
}

/// Opening a database that is already current needs no write lock, so a reader (the CLI
/// listing sessions) is not held up by an agent in the middle of a write.
#[test]
fn opening_a_current_database_does_not_wait_for_the_write_lock() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("busy.db");
    drop(Database::open(&path).unwrap());
    let holder = Connection::open(&path).unwrap();
    holder.execute_batch("BEGIN IMMEDIATE").unwrap();
    // One try and a 10 ms busy wait: taking the write lock here would fail with Locked.
    let impatient = scribe_db::Options {
        write_attempts: 1,
        busy_timeout: std::time::Duration::from_millis(10),
        ..scribe_db::Options::default()
    };
    let db = Database::open_with(&path, impatient.clone()).unwrap();
    assert!(db.migration_report().applied.is_empty());
    assert!(matches!(
        db.write(|_| -> scribe_db::Result<_> { Ok(()) }),
        Err(Error::Locked)
    ));
    holder.execute_batch("COMMIT").unwrap();
    db.write(|_| -> scribe_db::Result<_> { Ok(()) }).unwrap();

    // A database that needs migrating still takes the lock (and so waits for it).
    let fresh = dir.path().join("fresh.db");
    let holder = Connection::open(&fresh).unwrap();
    holder.execute_batch("BEGIN IMMEDIATE").unwrap();
    assert!(matches!(
        Database::open_with(&fresh, impatient),
        Err(Error::Locked)
    ));
    holder.execute_batch("COMMIT").unwrap();
}

/// Every query in sql/queries prepares against the migrated schema (SQLite itself checks
/// names and syntax), independent of the generator's analysis: only its fragment calls
/// (`sqlgen.name(…)`) are expanded, by sqlgen, as the generated code has them.
#[test]
fn every_static_query_prepares() {
    let db = Database::open_in_memory().unwrap();
    let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/../../sql/queries");
    let mut checked = 0;
    // sqlgen's own reader of a query directory (sorted; an unreadable file fails here).
    let read = |dir: &str| -> Vec<sqlgen::SourceFile> {
        let (files, unreadable) = sqlgen::query::read_queries(std::path::Path::new(dir));
        assert!(unreadable.is_empty(), "{unreadable:?}");
        files
    };
    // The shared queries and SQLite's own spellings (sql/queries/sqlite).
    let (shared, sqlite) = (read(dir), read(&format!("{dir}/sqlite")));
    for file in shared.iter().chain(&sqlite) {
        for block in file.text.split("-- name: ").skip(1) {
            let (name, sql) = block.split_once('\n').unwrap();
            let sql = sql.split("-- fragment:").next().unwrap_or_default();
            let sql = sqlgen::fragment::expand_text(sqlgen::Dialect::Sqlite, &shared, &sqlite, sql)
                .unwrap_or_else(|e| panic!("{}: {name}: {e}", file.display));
            let sql = plain_sqlite(&sql);
            db.read(|c| -> scribe_db::Result<_> {
                let c = c.conn().unwrap();
                c.prepare(&sql)
                    .unwrap_or_else(|e| panic!("{}: {name}: {e}", file.display));
                Ok(())
            })
            .unwrap();
            checked += 1;
        }
    }
    assert!(checked > 50, "only {checked} queries found");
}

/// Rewrites the generator's `sqlc.arg(x)`, `sqlc.narg(x)` and `sqlc.slice(x)` (an IN list;
/// one element stands in for it) as SQLite's own `@x`.
fn plain_sqlite(sql: &str) -> String {
    let mut out = sql.to_owned();
    for marker in ["sqlc.slice(", "sqlc.narg(", "sqlc.arg("] {
        while let Some(start) = out.find(marker) {
            let rest = &out[start + marker.len()..];
            let end = rest.find(')').unwrap();
            let name = rest[..end].trim().to_owned();
            out.replace_range(start..start + marker.len() + end + 1, &format!("@{name}"));
        }
    }
    out
}
