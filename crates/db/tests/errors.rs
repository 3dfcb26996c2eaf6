//! Errors crossing `Database::write`: a service layer's own error comes out whole (type,
//! text, causes), is not retried, and rolls the transaction back; a duplicate id is a
//! `Conflict` carrying SQLite's text.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use common::*;
use rusqlite::OptionalExtension;
use scribe_db::queries as q;
use scribe_db::{Database, Error};

/// Stands in for a service's error: a decode error with a cause of its own, or the
/// database's.
#[derive(Debug, thiserror::Error)]
enum ServiceError {
    #[error("part {0} is corrupt")]
    CorruptPart(String, #[source] serde_json::Error),
    #[error(transparent)]
    Db(#[from] Error),
}

impl From<rusqlite::Error> for ServiceError {
    fn from(err: rusqlite::Error) -> Self {
        ServiceError::Db(err.into())
    }
}

scribe_db::impl_tx_error!(ServiceError, ServiceError::Db);

fn decode_error() -> serde_json::Error {
    serde_json::from_str::<serde_json::Value>("{\"type\":").unwrap_err()
}

#[test]
fn a_service_error_is_returned_once_whole_and_rolls_back() {
    let dir = tempfile::tempdir().unwrap();
    let db = Database::open(dir.path().join("e.db")).unwrap();
    let mut tries = 0;
    let mut written = String::new();
    let err = db
        .write(|tx| -> Result<(), ServiceError> {
            tries += 1;
            written = scribe_db::ids::new_id(scribe_db::ids::Prefix::Session);
            q::create_session(tx.conn().unwrap(), &new_session(&written, "cli"))?;
            Err(ServiceError::CorruptPart("prt_1".into(), decode_error()))
        })
        .unwrap_err();
    assert_eq!(tries, 1, "a service error is not retried");
    assert!(matches!(err, ServiceError::CorruptPart(..)), "{err:?}");
    assert_eq!(err.to_string(), "part prt_1 is corrupt");
    let cause = std::error::Error::source(&err).unwrap();
    assert_eq!(cause.to_string(), decode_error().to_string());
    assert!(matches!(&err, ServiceError::CorruptPart(id, _) if id == "prt_1"));

    let found = db
        .read(|tx| -> scribe_db::Result<_> {
            Ok(q::get_session(tx.conn().unwrap(), &written).optional()?)
        })
        .unwrap();
    assert!(found.is_none(), "the session insert was rolled back");
}

#[test]
fn a_duplicate_id_is_a_conflict_naming_the_column() {
    let db = Database::open_in_memory().unwrap();
    let id = session(&db, "cli");
    let err = db
        .write(|tx| -> scribe_db::Result<()> {
            q::create_session(tx.conn().unwrap(), &new_session(&id, "cli"))?;
            Ok(())
        })
        .unwrap_err();
    match err {
        Error::Conflict { message, .. } => assert!(message.contains("sessions.id"), "{message}"),
        other => panic!("expected Conflict, got {other:?}"),
    }
}
