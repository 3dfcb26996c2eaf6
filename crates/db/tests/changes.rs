//! `Database::watch_changes` on SQLite: the one change watch behind scribe-session's
//! `Store::watch` and `scribe serve`'s live counter. Every commit by another connection
//! (another handle, as another process would, or the watched handle itself) is reported
//! once, as `All`; quiet is `None`. (PostgreSQL's, naming sessions, is tested through
//! `Store::watch` in scribe-session's `tests/watch.rs` and the server's `tests/postgres.rs`;
//! a file read as immutable, which needs root, by both crates' ignored tests.)
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use common::session;
use scribe_db::{Changes, Database, Error};

#[test]
fn every_other_connections_commit_is_reported_once() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("scribe.db");
    let db = Database::open(&path).unwrap();
    let other = Database::open(&path).unwrap();
    let mut watch = db.watch_changes().unwrap();
    assert_eq!(watch.poll().unwrap(), None);

    session(&other, "cli");
    assert_eq!(watch.poll().unwrap(), Some(Changes::All));
    assert_eq!(watch.poll().unwrap(), None, "reported once");

    // The watched handle's own commits too: the watch's connection is another.
    session(&db, "cli");
    session(&db, "cli");
    assert_eq!(watch.poll().unwrap(), Some(Changes::All));
    assert_eq!(watch.poll().unwrap(), None);

    // A read changes nothing.
    Database::open_read_only(&path)
        .unwrap()
        .data_version()
        .unwrap();
    assert_eq!(watch.poll().unwrap(), None);
}

/// An in-memory database has no other connection to watch: a typed refusal, not a watch
/// that never reports.
#[test]
fn an_in_memory_database_is_refused() {
    let db = Database::open_in_memory().unwrap();
    let err = db.watch_changes().unwrap_err();
    assert!(matches!(&err, Error::InvalidInput(_)), "{err:?}");
    assert!(err.to_string().contains("in-memory"), "{err}");
}

/// Sessions named by a change gather into one set; anything unnamed makes it `All`.
#[test]
fn named_changes_gather_and_all_absorbs_them() {
    let mut changes = None;
    Changes::add(&mut changes, "a");
    Changes::add(&mut changes, "b");
    Changes::add(&mut changes, "a");
    assert_eq!(
        changes,
        Some(Changes::Sessions(["a", "b"].map(str::to_owned).into()))
    );
    let mut all = Some(Changes::All);
    Changes::add(&mut all, "a");
    assert_eq!(all, Some(Changes::All));
}
