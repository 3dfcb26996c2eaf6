//! Read-only mode: opens existing files only, never creates or migrates, refuses writes
//! with a typed error naming the file, and reads what a read-write process writes.
//! (Files this process may not write are covered by `tests/tests/faults.rs`, which needs
//! a non-root user.)
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use common::*;
use scribe_db::{Database, Error, Options};

fn count(db: &Database, sql: &str) -> i64 {
    db.read(|c| -> scribe_db::Result<_> {
        let c = c.conn().unwrap();
        Ok(c.query_row(sql, [], |r| r.get(0))?)
    })
    .unwrap()
}

/// Neither a read-only open nor `open_existing` (read-write, migrating) creates a missing
/// database: both are `Error::NoDatabase` naming the path, and leave no file, no
/// `-wal`/`-shm` and no directory behind. `open` creates it; then `open_existing` opens it.
#[test]
fn a_missing_file_is_not_created() {
    let dir = tempfile::tempdir().unwrap();
    for path in [dir.path().join("sub/none.db"), dir.path().join("none.db")] {
        for err in [
            Database::open_read_only(&path).unwrap_err(),
            Database::open_existing(&path).unwrap_err(),
        ] {
            assert!(
                matches!(&err, Error::NoDatabase { path: p } if *p == path),
                "{err:?}"
            );
            assert_eq!(
                err.to_string(),
                format!("no database at {}: the file does not exist", path.display())
            );
        }
        let left: Vec<_> = std::fs::read_dir(dir.path()).unwrap().collect();
        assert!(left.is_empty(), "{left:?}");
    }
    let path = dir.path().join("sub/made.db");
    drop(Database::open(&path).unwrap());
    let db = Database::open_existing(&path).unwrap();
    assert_eq!(
        db.schema_version().unwrap(),
        Database::known_schema_version()
    );
}

/// A path naming a directory is `Error::IsADirectory` naming it, from every open (it was
/// SQLite's "unable to open database file", or "Is a directory (os error 21)"), and
/// nothing is created in it.
#[test]
fn a_directory_is_not_a_database() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().to_owned();
    for err in [
        Database::open(&path).unwrap_err(),
        Database::open_existing(&path).unwrap_err(),
        Database::open_read_only(&path).unwrap_err(),
    ] {
        assert!(
            matches!(&err, Error::IsADirectory { path: p } if *p == path),
            "{err:?}"
        );
        assert_eq!(
            err.to_string(),
            format!("{} is a directory, not a database file", path.display())
        );
    }
    let left: Vec<_> = std::fs::read_dir(&path).unwrap().collect();
    assert!(left.is_empty(), "{left:?}");
}

/// A path ending in a separator (`dir/`) that does not exist is `Error::IsADirectory` from
/// every open, and nothing is created: the creating open gave the system's "Is a directory
/// (os error 21)" as `Error::Io`.
#[test]
fn a_path_written_as_a_directory_is_not_a_database() {
    let dir = tempfile::tempdir().unwrap();
    let mut path = dir.path().join("history").into_os_string();
    path.push("/");
    let path = std::path::PathBuf::from(path);
    for err in [
        Database::open(&path).unwrap_err(),
        Database::open_existing(&path).unwrap_err(),
        Database::open_read_only(&path).unwrap_err(),
    ] {
        assert!(
            matches!(&err, Error::IsADirectory { path: p } if *p == path),
            "{err:?}"
        );
        assert_eq!(
            err.to_string(),
            format!("{} is a directory, not a database file", path.display())
        );
    }
    let left: Vec<_> = std::fs::read_dir(dir.path()).unwrap().collect();
    assert!(left.is_empty(), "{left:?}");
}

#[test]
fn reads_work_and_writes_are_refused_by_name() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("r.db");
    {
        let db = Database::open(&path).unwrap();
        let s = session(&db, "cli");
        db.write(|tx| -> scribe_db::Result<_> {
            let tx = tx.conn().unwrap();
            message_with_part(tx, &s, "user", "text", &text("hello reader"))
        })
        .unwrap();
    }
    let db = Database::open_read_only(&path).unwrap();
    assert!(db.is_read_only());
    assert_eq!(
        db.schema_version().unwrap(),
        Database::known_schema_version()
    );
    assert!(db.migration_report().applied.is_empty());
    assert_eq!(count(&db, "SELECT count(*) FROM messages"), 1);
    assert_eq!(
        db.read(|c| -> scribe_db::Result<_> {
            let c = c.conn().unwrap();
            Ok(hits(c, "parts_fts", "reader"))
        })
        .unwrap()
        .len(),
        1
    );
    let err = db
        .write(|_| -> scribe_db::Result<()> { panic!("the closure must not run") })
        .unwrap_err();
    assert!(
        matches!(&err, Error::ReadOnly { path: p } if *p == path),
        "{err:?}"
    );
    assert_eq!(
        err.to_string(),
        format!(
            "database {} is open read-only; writes are refused",
            path.display()
        )
    );
    assert!(matches!(db.vacuum(), Err(Error::ReadOnly { .. })));
    // Even SQL sent through read cannot write.
    let sneaky = db.read(|c| -> scribe_db::Result<_> {
        let c = c.conn().unwrap();
        Ok(c.execute("DELETE FROM messages", [])?)
    });
    assert!(sneaky.is_err());
    assert_eq!(count(&db, "SELECT count(*) FROM messages"), 1);
    db.checkpoint().unwrap();
    let report = db.check().unwrap();
    assert!(report.is_ok(), "{report:?}");
    assert!(
        report
            .indexes
            .iter()
            .all(|i| i.status == scribe_db::IndexStatus::SkippedReadOnly)
    );
}

#[test]
fn options_read_only_is_the_same_mode() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("o.db");
    drop(Database::open(&path).unwrap());
    let options = Options {
        read_only: true,
        ..Options::default()
    };
    let db = Database::open_with(&path, options).unwrap();
    assert!(db.is_read_only());
    assert!(matches!(
        scribe_db::Database::write(&db, |_| Ok(())),
        Err(Error::ReadOnly { .. })
    ));
}

#[test]
fn sees_what_a_writer_commits_meanwhile() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("w.db");
    let writer = Database::open(&path).unwrap();
    let s = session(&writer, "cli");
    let reader = Database::open_read_only(&path).unwrap();
    assert_eq!(count(&reader, "SELECT count(*) FROM messages"), 0);
    for i in 0..3 {
        writer
            .write(|tx| -> scribe_db::Result<_> {
                let tx = tx.conn().unwrap();
                message_with_part(tx, &s, "user", "text", &text(&format!("live {i}")))
            })
            .unwrap();
        assert_eq!(count(&reader, "SELECT count(*) FROM messages"), i + 1);
    }
}

#[test]
fn an_older_schema_is_refused_and_left_unmigrated() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("old.db");
    drop(Database::open_at_version(&path, 1).unwrap());
    let err = Database::open_read_only(&path).unwrap_err();
    let known = Database::known_schema_version();
    assert!(
        matches!(&err, Error::SchemaTooOld { found: 1, known: k, .. } if *k == known),
        "{err:?}"
    );
    let shown = err.to_string();
    assert!(
        shown.contains(&path.display().to_string()) && shown.contains("open it read-write once"),
        "{shown}"
    );
    assert_eq!(
        Database::open_at_version(&path, 1)
            .unwrap()
            .schema_version()
            .unwrap(),
        1
    );
}

#[test]
fn a_newer_schema_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("new.db");
    drop(Database::open(&path).unwrap());
    let conn = rusqlite::Connection::open(&path).unwrap();
    conn.execute(
        "INSERT INTO refinery_schema_history (version, name, applied_on, checksum) \
         VALUES (999, 'future', '2030-01-01T00:00:00Z', '0')",
        [],
    )
    .unwrap();
    drop(conn);
    let err = Database::open_read_only(&path).unwrap_err();
    assert!(
        matches!(err, Error::SchemaTooNew { found: 999, .. }),
        "{err:?}"
    );
}

#[test]
fn an_empty_or_foreign_file_is_a_clear_error() {
    let dir = tempfile::tempdir().unwrap();
    let empty = dir.path().join("empty.db");
    std::fs::write(&empty, b"").unwrap();
    let err = Database::open_read_only(&empty).unwrap_err();
    assert!(
        matches!(err, Error::SchemaTooOld { found: 0, .. }),
        "{err:?}"
    );
    let text = dir.path().join("text.db");
    std::fs::write(&text, "not a database at all, just some text ".repeat(100)).unwrap();
    let err = Database::open_read_only(&text).unwrap_err();
    assert!(
        matches!(&err, Error::NotADatabase { path, .. } if *path == text),
        "{err:?}"
    );
    assert_eq!(std::fs::metadata(&empty).unwrap().len(), 0);
}

/// Another program's SQLite file is refused by every open, counting its tables in
/// English ("1 tables" was the text for one), and is left as it was.
#[test]
fn a_foreign_file_is_refused_counting_its_tables() {
    let dir = tempfile::tempdir().unwrap();
    for (tables, count) in [(1, "1 table,"), (2, "2 tables,")] {
        let path = dir.path().join(format!("agent-{tables}.db"));
        {
            let c = rusqlite::Connection::open(&path).unwrap();
            for n in 0..tables {
                c.execute_batch(&format!("CREATE TABLE t{n} (a)")).unwrap();
            }
        }
        let before = std::fs::read(&path).unwrap();
        for err in [
            Database::open(&path).unwrap_err(),
            Database::open_read_only(&path).unwrap_err(),
        ] {
            assert!(
                matches!(&err, Error::ForeignDatabase { tables: t, .. } if *t == tables),
                "{err:?}"
            );
            assert_eq!(
                err.to_string(),
                format!(
                    "{} is an SQLite database of another program ({count} no scribe schema); \
                     scribe leaves it as it is (to import an agent's history, name its files \
                     after `scribe import --from AGENT` and give --db a store of scribe's own, \
                     or none for the default)",
                    path.display()
                )
            );
        }
        assert_eq!(std::fs::read(&path).unwrap(), before);
    }
}
