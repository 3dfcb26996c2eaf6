//! `Database::check`, `Database::rebuild_search_indexes` and `Database::vacuum`, and the typed, readable errors of opening a
//! file that is not a database and of a full disk.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use common::*;
use scribe_db::{Database, Error, IndexStatus};

fn filled(path: &std::path::Path, messages: usize) -> (Database, String) {
    let db = Database::open(path).unwrap();
    let s = session(&db, "cli");
    for i in 0..messages {
        db.write(|tx| -> scribe_db::Result<_> {
            let tx = tx.conn().unwrap();
            message_with_part(
                tx,
                &s,
                "user",
                "text",
                &text(&format!(
                    "maintenance entry {i} 维护 {}",
                    "padding ".repeat(40)
                )),
            )
        })
        .unwrap();
    }
    (db, s)
}

#[test]
fn check_reports_a_healthy_database_as_ok() {
    let dir = tempfile::tempdir().unwrap();
    let (db, _) = filled(&dir.path().join("c.db"), 20);
    let report = db.check().unwrap();
    assert_eq!(report.integrity_check, ["ok"]);
    assert_eq!(report.indexes.len(), 2);
    assert!(
        report.indexes.iter().all(|i| i.status == IndexStatus::Ok),
        "{report:?}"
    );
    assert!(report.is_ok());
    let memory = Database::open_in_memory().unwrap();
    assert!(memory.check().unwrap().is_ok());
}

#[test]
fn check_finds_an_index_that_drifted_from_the_rows() {
    let dir = tempfile::tempdir().unwrap();
    let (db, _) = filled(&dir.path().join("d.db"), 5);
    db.index_pending().unwrap();
    db.write(|tx| -> scribe_db::Result<_> {
        let tx = tx.conn().unwrap();
        tx.execute(
            "INSERT INTO parts_fts_trigram (parts_fts_trigram, rowid, search_text) \
             SELECT 'delete', seq, search_text FROM parts_search_trigram ORDER BY seq LIMIT 1",
            [],
        )?;
        Ok(())
    })
    .unwrap();
    let report = db.check().unwrap();
    assert_eq!(report.indexes[0].status, IndexStatus::Ok);
    assert!(
        matches!(report.indexes[1].status, IndexStatus::Mismatch(_)),
        "{report:?}"
    );
    let problems = report.problems();
    assert_eq!(problems.len(), 1, "{problems:?}");
    assert!(
        problems[0].starts_with("parts_fts_trigram: "),
        "{problems:?}"
    );
}

/// `rebuild_search_indexes` repairs both indexes from the parts: a row one of them lost
/// (what a delete by an SQLite that reads the part's text differently leaves) and one
/// still queued are each indexed once, the queue ends empty, and search finds both again.
#[test]
fn a_rebuild_repairs_the_indexes_from_the_parts() {
    let dir = tempfile::tempdir().unwrap();
    let (db, s) = filled(&dir.path().join("r.db"), 5);
    db.index_pending().unwrap();
    drop(db);
    // Without the indexer's thread, nothing but the rebuild takes the queued part.
    let db = Database::open_with(
        dir.path().join("r.db"),
        scribe_db::Options {
            background_indexing: false,
            ..scribe_db::Options::default()
        },
    )
    .unwrap();
    let count = |sql: &str| -> i64 {
        db.read(|tx| -> scribe_db::Result<i64> {
            Ok(tx.conn().unwrap().query_row(sql, [], |row| row.get(0))?)
        })
        .unwrap()
    };
    let words = "SELECT count(*) FROM parts_fts WHERE parts_fts MATCH 'entry'";
    let cjk =
        r#"SELECT count(*) FROM parts_fts_trigram WHERE parts_fts_trigram MATCH '"维护 pad"'"#;
    assert_eq!((count(words), count(cjk)), (5, 5));
    db.write(|tx| -> scribe_db::Result<_> {
        let conn = tx.conn().unwrap();
        for index in ["parts_fts", "parts_fts_trigram"] {
            conn.execute(
                &format!(
                    "INSERT INTO {index} ({index}, rowid, search_text) \
                     SELECT 'delete', seq, search_text FROM parts_search ORDER BY seq LIMIT 1"
                ),
                [],
            )?;
        }
        Ok(())
    })
    .unwrap();
    let report = db.check().unwrap();
    assert!(
        report
            .indexes
            .iter()
            .all(|i| matches!(i.status, IndexStatus::Mismatch(_))),
        "{report:?}"
    );

    // A part another connection wrote after the check (which indexes what is queued),
    // which this process's indexer is not told of.
    let other = rusqlite::Connection::open(dir.path().join("r.db")).unwrap();
    message_with_part(
        &other,
        &s,
        "user",
        "text",
        &text("maintenance entry queued 维护 padding"),
    )
    .unwrap();
    assert_eq!(count("SELECT count(*) FROM search_queue"), 1);
    assert_eq!(
        db.rebuild_search_indexes().unwrap(),
        ["parts_fts", "parts_fts_trigram"]
    );
    assert_eq!(count("SELECT count(*) FROM search_queue"), 0);
    assert!(db.check().unwrap().is_ok());
    assert_eq!((count(words), count(cjk)), (6, 6));

    let read_only = Database::open_with(
        dir.path().join("r.db"),
        scribe_db::Options {
            read_only: true,
            ..scribe_db::Options::default()
        },
    )
    .unwrap();
    assert!(matches!(
        read_only.rebuild_search_indexes(),
        Err(Error::ReadOnly { .. })
    ));
}

/// A pooled reader that cached the index structure before another connection rebuilt the
/// index reports corruption from `PRAGMA integrity_check`; `check` uses a fresh connection
/// and does not.
#[test]
fn check_has_no_false_alarm_after_another_connection_rebuilds_an_index() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("f.db");
    let (db, _) = filled(&path, 30);
    // Warm a pooled reader: it now caches the FTS5 structure.
    db.index_pending().unwrap();
    db.read(|c| -> scribe_db::Result<_> {
        let c = c.conn().unwrap();
        Ok(hits(c, "parts_fts", "maintenance").len())
    })
    .unwrap();
    let other = rusqlite::Connection::open(&path).unwrap();
    other
        .execute("INSERT INTO parts_fts (parts_fts) VALUES ('rebuild')", [])
        .unwrap();
    drop(other);
    let stale: Vec<String> = db
        .read(|c| -> scribe_db::Result<_> {
            let c = c.conn().unwrap();
            let mut rows = Vec::new();
            c.pragma_query(None, "integrity_check", |r| {
                rows.push(r.get(0)?);
                Ok(())
            })?;
            Ok(rows)
        })
        .unwrap();
    // Shows the false alarm (not asserted: a later SQLite may cure it).
    eprintln!("pooled reader's integrity_check: {stale:?}");
    let report = db.check().unwrap();
    assert!(report.is_ok(), "{:?}", report.problems());
    // Searches on the pooled reader are still right.
    let n = db
        .read(|c| -> scribe_db::Result<_> {
            let c = c.conn().unwrap();
            Ok(hits(c, "parts_fts", "maintenance").len())
        })
        .unwrap();
    assert_eq!(n, 30);
}

#[test]
fn vacuum_shrinks_the_file_and_keeps_rows_and_indexes() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("v.db");
    let (db, s) = filled(&path, 300);
    // The background indexer would otherwise index the deletes below whenever it wakes,
    // perhaps after the vacuum truncated the log (which its write then starts again).
    let paused = db.pause_background_indexing();
    db.write(|tx| -> scribe_db::Result<_> {
        let tx = tx.conn().unwrap();
        tx.execute(
            "DELETE FROM messages WHERE session_id = ?1 AND rowid % 10 != 0",
            [&s],
        )?;
        Ok(())
    })
    .unwrap();
    let report = db.vacuum().unwrap();
    assert!(report.bytes_after < report.bytes_before, "{report:?}");
    let wal = std::fs::metadata(format!("{}-wal", path.display())).map_or(0, |m| m.len());
    assert_eq!(wal, 0, "the log was not truncated");
    drop(paused);
    assert!(db.check().unwrap().is_ok());
    assert_derived_exact(&db);
    let n = db
        .read(|c| -> scribe_db::Result<_> {
            let c = c.conn().unwrap();
            Ok(hits(c, "parts_fts", "maintenance").len())
        })
        .unwrap();
    assert_eq!(n, 30);
    // Still writable afterwards.
    db.write(|tx| -> scribe_db::Result<_> {
        let tx = tx.conn().unwrap();
        message_with_part(tx, &s, "user", "text", &text("after vacuum"))
    })
    .unwrap();
    assert_eq!(
        Database::open_in_memory()
            .unwrap()
            .vacuum()
            .unwrap()
            .bytes_after,
        0
    );
}

#[test]
fn a_file_that_is_not_a_database_is_named() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("notes.db");
    let content = "[settings]\ntheme = \"dark\"\n".repeat(300);
    std::fs::write(&path, &content).unwrap();
    let err = Database::open(&path).unwrap_err();
    assert!(
        matches!(&err, Error::NotADatabase { path: p, .. } if *p == path),
        "{err:?}"
    );
    assert_eq!(err.sqlite_code(), Some(rusqlite::ffi::SQLITE_NOTADB));
    assert_eq!(
        err.to_string(),
        format!(
            "{} is not a scribe database (or is damaged beyond opening)",
            path.display()
        )
    );
    assert_eq!(std::fs::read_to_string(&path).unwrap(), content);
}

#[test]
fn a_directory_is_not_reported_as_unwritable() {
    let dir = tempfile::tempdir().unwrap();
    let err = Database::open(dir.path()).unwrap_err();
    assert!(!matches!(err, Error::NotWritable { .. }), "{err:?}");
}

#[test]
fn a_full_disk_is_a_typed_error_and_the_database_recovers() {
    let dir = tempfile::tempdir().unwrap();
    let (db, s) = filled(&dir.path().join("full.db"), 3);
    let limit = |extra: Option<i64>| {
        db.write(|tx| -> scribe_db::Result<_> {
            let tx = tx.conn().unwrap();
            let pages: i64 = tx.query_row("PRAGMA page_count", [], |r| r.get(0))?;
            let max = extra.map_or(1 << 30, |e| pages + e);
            tx.query_row(&format!("PRAGMA max_page_count = {max}"), [], |_| Ok(()))?;
            Ok(())
        })
        .unwrap();
    };
    limit(Some(1));
    let err = db
        .write(|tx| -> scribe_db::Result<_> {
            let tx = tx.conn().unwrap();
            message_with_part(tx, &s, "user", "text", &text(&"big ".repeat(50_000)))
        })
        .unwrap_err();
    assert!(matches!(err, Error::DiskFull(_)), "{err:?}");
    // What happened, and what to do about it.
    assert_eq!(
        err.to_string(),
        "database or disk is full; the last change was rolled back: free some space and run \
         it again"
    );
    assert!(!err.is_busy());
    limit(None);
    db.write(|tx| -> scribe_db::Result<_> {
        let tx = tx.conn().unwrap();
        message_with_part(tx, &s, "user", "text", &text(&"big ".repeat(50_000)))
    })
    .unwrap();
    assert_derived_exact(&db);
}

#[test]
fn storage_errors_show_sqlite_message() {
    let db = Database::open_in_memory().unwrap();
    let err = db
        .read(|c| -> scribe_db::Result<_> {
            let c = c.conn().unwrap();
            Ok(c.query_row("SELECT nope FROM sessions", [], |r| r.get::<_, i64>(0))?)
        })
        .unwrap_err();
    assert!(matches!(err, Error::Storage(_)), "{err:?}");
    assert!(
        err.to_string()
            .starts_with("sqlite error: no such column: nope"),
        "{err}"
    );
}
