//! The one error type of scribe-db, shared by the services built on it.

use std::path::PathBuf;

use rusqlite::ErrorCode;

/// Result with [`Error`].
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// Everything that can go wrong storing or loading Scribe data.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The row a caller named does not exist (`what` is the kind of row, e.g. `"session"`).
    #[error("{what} not found: {id}")]
    NotFound {
        /// The kind of row: `"session"`, `"message"`, `"part"`, `"file"`.
        what: &'static str,
        /// The id that was looked up.
        id: String,
    },
    /// The change would break a uniqueness rule (a title in use, an id taken).
    #[error("conflict: {0}")]
    Conflict(String),
    /// The caller's input was rejected before reaching the database.
    #[error("invalid input: {0}")]
    InvalidInput(String),
    /// Another writer held the database lock through every retry.
    #[error("database stayed locked: another process kept writing through every retry")]
    Locked,
    /// A schema migration could not be applied; the database was left as it was.
    #[error("schema migration failed")]
    Migration(#[source] refinery::Error),
    /// The database was written by a newer Scribe whose schema this build does not know.
    #[error(
        "database schema version {found} is newer than this build knows (version {known}); upgrade scribe"
    )]
    SchemaTooNew {
        /// The highest migration version recorded in the database.
        found: i64,
        /// The highest migration version embedded in this build.
        known: i64,
    },
    /// The database's directory or file could not be created or inspected.
    #[error("cannot prepare database path {path}")]
    Io {
        /// The directory or file involved.
        path: PathBuf,
        /// What the operating system said.
        #[source]
        source: std::io::Error,
    },
    /// SQLite failed (I/O, corruption, a constraint other than uniqueness, a bad query).
    #[error("database error")]
    Storage(#[source] rusqlite::Error),
}

impl Error {
    /// A [`Error::NotFound`] for `what` with `id`.
    pub fn not_found(what: &'static str, id: impl Into<String>) -> Self {
        Error::NotFound {
            what,
            id: id.into(),
        }
    }

    /// Whether this is SQLite reporting that another connection holds a lock, the one
    /// failure that retrying can cure.
    pub fn is_busy(&self) -> bool {
        matches!(self, Error::Storage(err) if is_busy(err))
    }
}

/// Whether `err` is SQLITE_BUSY or SQLITE_LOCKED (any extended code).
pub(crate) fn is_busy(err: &rusqlite::Error) -> bool {
    matches!(
        err.sqlite_error_code(),
        Some(ErrorCode::DatabaseBusy | ErrorCode::DatabaseLocked)
    )
}

impl From<rusqlite::Error> for Error {
    fn from(err: rusqlite::Error) -> Self {
        if let rusqlite::Error::SqliteFailure(failure, message) = &err {
            let unique = failure.extended_code == rusqlite::ffi::SQLITE_CONSTRAINT_UNIQUE
                || failure.extended_code == rusqlite::ffi::SQLITE_CONSTRAINT_PRIMARYKEY;
            if unique {
                let message = message
                    .clone()
                    .unwrap_or_else(|| "unique constraint failed".to_owned());
                return Error::Conflict(message);
            }
        }
        Error::Storage(err)
    }
}

impl From<refinery::Error> for Error {
    fn from(err: refinery::Error) -> Self {
        Error::Migration(err)
    }
}
