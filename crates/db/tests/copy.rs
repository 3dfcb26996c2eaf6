//! Copying a whole store (`scribe_db::copy`) between two SQLite files, which needs no
//! server: every row byte for byte, derived data (counters, search indexes) exact, an
//! empty target required. The PostgreSQL round trip is in tests/postgres.rs.
#![cfg(feature = "postgres")]
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use common::*;
use std::ops::ControlFlow;

use scribe_db::copy::copy;
use scribe_db::{Database, Error};

#[test]
fn an_sqlite_store_copies_into_an_empty_one_unchanged() {
    let dir = tempfile::tempdir().unwrap();
    let from = Database::open(dir.path().join("from.db")).unwrap();
    fill_for_copy(&from);
    let to = Database::open(dir.path().join("to.db")).unwrap();
    let mut reports = Vec::new();
    let report = copy(&from, &to, |p| {
        reports.push(p.clone());
        ControlFlow::Continue(())
    })
    .unwrap();
    assert_eq!(dump(&from), dump(&to));
    assert_derived_exact(&to);
    let parts = report.tables.iter().find(|(t, _)| t == "parts").unwrap();
    assert_eq!(parts.1, 1201);
    let last = reports.iter().rfind(|p| p.table == "parts").unwrap();
    assert_eq!((last.done, last.total), (1201, 1201));
    assert!(
        reports.iter().filter(|p| p.table == "parts").count() >= 3,
        "batched"
    );

    // A second copy into the now-full store is refused, and changes nothing.
    let err = copy(&from, &to, |_| ControlFlow::Continue(())).unwrap_err();
    assert!(
        matches!(err, Error::CopyRefused(ref m) if m.contains("not empty")),
        "{err}"
    );
    assert_eq!(dump(&from), dump(&to));
}

/// A copy its progress callback stops (`scribe db copy` on Ctrl-C) is `CopyStopped`
/// and leaves the target as empty as it was: its one transaction rolled back, though
/// a batch of parts had gone in; the same target then takes a whole copy.
#[test]
fn a_copy_stopped_by_its_progress_callback_copies_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let from = Database::open(dir.path().join("from.db")).unwrap();
    fill_for_copy(&from);
    let to = Database::open(dir.path().join("to.db")).unwrap();
    let empty = dump(&to);
    let mut seen = Vec::new();
    let err = copy(&from, &to, |p| {
        seen.push(p.clone());
        // At the second batch of parts: the first 500 went in before it.
        if p.table == "parts" && p.done > 500 {
            ControlFlow::Break(())
        } else {
            ControlFlow::Continue(())
        }
    })
    .unwrap_err();
    assert!(matches!(err, Error::CopyStopped), "{err}");
    assert!(
        seen.iter().any(|p| p.table == "parts" && p.done == 500),
        "{seen:?}"
    );
    assert_eq!(dump(&to), empty);

    copy(&from, &to, |_| ControlFlow::Continue(())).unwrap();
    assert_eq!(dump(&from), dump(&to));
    assert_derived_exact(&to);
}
