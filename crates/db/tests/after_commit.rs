//! The one transaction helper: a service's own error type through the retry loop, and
//! actions queued with `Tx::after_commit` — run once after COMMIT, dropped on rollback,
//! cleared when a busy database makes the closure run again.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::sync::{Arc, Mutex};

use rusqlite::OptionalExtension;
use scribe_db::{Database, Error, Options, Tx, queries as q};

use common::session;

/// A service's error: its own variants plus the database's.
#[derive(Debug, thiserror::Error)]
enum ServiceError {
    #[error("refused: {0}")]
    Refused(String),
    #[error("storage failed")]
    Db(#[source] Error),
}

impl From<Error> for ServiceError {
    fn from(err: Error) -> Self {
        ServiceError::Db(err)
    }
}

impl From<rusqlite::Error> for ServiceError {
    fn from(err: rusqlite::Error) -> Self {
        ServiceError::Db(err.into())
    }
}

scribe_db::impl_tx_error!(ServiceError, ServiceError::Db);

fn busy() -> Error {
    Error::from(rusqlite::Error::SqliteFailure(
        rusqlite::ffi::Error::new(rusqlite::ffi::SQLITE_BUSY),
        None,
    ))
}

fn file_db(dir: &tempfile::TempDir) -> Arc<Database> {
    Arc::new(Database::open(dir.path().join("scribe.db")).unwrap())
}

/// What a queued action saw when it ran: whether another connection could already read
/// the row the transaction wrote, i.e. whether COMMIT had happened.
#[test]
fn queued_actions_run_once_after_commit_in_order() {
    let dir = tempfile::tempdir().unwrap();
    let db = file_db(&dir);
    let id = session(&db, "cli");
    let seen: Arc<Mutex<Vec<(u32, bool)>>> = Arc::default();
    let path = dir.path().join("scribe.db");
    let ran_inside = db
        .write(|tx: &mut Tx<'_>| -> Result<bool, ServiceError> {
            q::end_session(
                tx.conn().unwrap(),
                &q::EndSessionParams {
                    now: 7,
                    end_reason: Some("done"),
                    id: &id,
                },
            )?;
            for n in [1, 2] {
                let (seen, path, id) = (Arc::clone(&seen), path.clone(), id.clone());
                tx.after_commit(move || {
                    // A separate connection sees only committed data.
                    let other = rusqlite::Connection::open(&path).unwrap();
                    let ended: Option<i64> = other
                        .query_row("SELECT ended_at FROM sessions WHERE id = ?1", [&id], |r| {
                            r.get(0)
                        })
                        .unwrap();
                    seen.lock().unwrap().push((n, ended == Some(7)));
                });
            }
            Ok(!seen.lock().unwrap().is_empty())
        })
        .unwrap();
    assert!(!ran_inside, "an action ran before the closure returned");
    assert_eq!(*seen.lock().unwrap(), [(1, true), (2, true)]);
}

#[test]
fn a_rollback_drops_the_queued_actions_and_returns_the_service_error() {
    let db = Database::open_in_memory().unwrap();
    let id = session(&db, "cli");
    let ran: Arc<Mutex<u32>> = Arc::default();
    let mut tries = 0;
    let err = db
        .write(|tx| -> Result<(), ServiceError> {
            tries += 1;
            q::delete_session(tx.conn().unwrap(), &id)?;
            let ran = Arc::clone(&ran);
            tx.after_commit(move || *ran.lock().unwrap() += 1);
            Err(ServiceError::Refused("no".into()))
        })
        .unwrap_err();
    assert!(
        matches!(err, ServiceError::Refused(ref why) if why == "no"),
        "{err:?}"
    );
    assert_eq!(tries, 1, "a service error is not retried");
    assert_eq!(
        *ran.lock().unwrap(),
        0,
        "an action ran for a rolled-back change"
    );
    let still: Option<String> = db
        .read(|tx| -> scribe_db::Result<_> {
            Ok(q::get_session(tx.conn().unwrap(), &id)
                .optional()?
                .map(|s| s.id))
        })
        .unwrap();
    assert_eq!(
        still.as_deref(),
        Some(id.as_str()),
        "the delete rolled back"
    );
}

#[test]
fn a_retried_closure_starts_with_an_empty_queue() {
    let db = Database::open_in_memory().unwrap();
    let ran: Arc<Mutex<Vec<u32>>> = Arc::default();
    let mut tries = 0;
    let value = db
        .write(|tx| -> Result<u32, ServiceError> {
            tries += 1;
            let ran = Arc::clone(&ran);
            let attempt = tries;
            tx.after_commit(move || ran.lock().unwrap().push(attempt));
            if tries < 3 {
                // What SQLite reports when another connection holds the lock mid-way.
                return Err(busy().into());
            }
            Ok(attempt)
        })
        .unwrap();
    assert_eq!((tries, value), (3, 3));
    assert_eq!(
        *ran.lock().unwrap(),
        [3],
        "only the committed run's action ran"
    );
}

#[test]
fn busy_through_every_retry_is_locked_in_the_callers_type() {
    let db = Database::open_in_memory_with(Options {
        write_attempts: 3,
        ..Options::default()
    })
    .unwrap();
    let ran: Arc<Mutex<u32>> = Arc::default();
    let err = db
        .write(|tx| -> Result<(), ServiceError> {
            let ran = Arc::clone(&ran);
            tx.after_commit(move || *ran.lock().unwrap() += 1);
            Err(busy().into())
        })
        .unwrap_err();
    assert!(matches!(err, ServiceError::Db(Error::Locked)), "{err:?}");
    assert_eq!(*ran.lock().unwrap(), 0);
}

#[test]
fn reads_carry_the_callers_error_too() {
    let db = Database::open_in_memory().unwrap();
    let err = db
        .read(|_| -> Result<(), ServiceError> { Err(ServiceError::Refused("x".into())) })
        .unwrap_err();
    assert!(matches!(err, ServiceError::Refused(_)));
}

#[test]
fn a_keyed_action_replaces_the_one_queued_before_it() {
    let db = Database::open_in_memory().unwrap();
    let ran: Arc<Mutex<Vec<&'static str>>> = Arc::default();
    db.write(|tx| -> scribe_db::Result<()> {
        for (key, what) in [
            ("ses_1", "ses_1 first state"),
            ("ses_2", "ses_2"),
            ("ses_1", "ses_1 final state"),
        ] {
            let ran = Arc::clone(&ran);
            tx.after_commit_keyed(key, move || ran.lock().unwrap().push(what));
        }
        let ran = Arc::clone(&ran);
        tx.after_commit(move || ran.lock().unwrap().push("unkeyed"));
        Ok(())
    })
    .unwrap();
    assert_eq!(
        *ran.lock().unwrap(),
        ["ses_2", "ses_1 final state", "unkeyed"]
    );
}
