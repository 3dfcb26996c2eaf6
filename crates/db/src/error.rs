//! The one error type of scribe-db, shared by the services built on it.
//!
//! Messages are written for a person reading an error chain (`a: b: c`): each variant says
//! what went wrong in its own words and keeps the underlying error as its source. Where a
//! variant's text already contains its source's text ([`Error::Storage`], whose message
//! is SQLite's), chain printers that skip a source already shown (the CLI's `one_line`)
//! print it once.

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
    /// The change would break a uniqueness rule (a title in use, an id taken). `message`
    /// is SQLite's (`UNIQUE constraint failed: sessions.id`) or the caller's; `source` is
    /// the driver's error when SQLite reported it.
    #[error("conflict: {message}")]
    Conflict {
        /// What clashed.
        message: String,
        /// The driver's error, with SQLite's extended result code.
        #[source]
        source: Option<rusqlite::Error>,
    },
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
    /// A database opened read-only has an older schema than this build's; read-only mode
    /// never migrates, and reading an older schema with this build's queries is not
    /// supported.
    #[error(
        "database {} has schema version {found}, older than this build's version {known}; \
         open it read-write once to migrate it",
        path.display()
    )]
    SchemaTooOld {
        /// The database file.
        path: PathBuf,
        /// The highest migration version recorded in the database (0: no Scribe schema).
        found: i64,
        /// The highest migration version embedded in this build.
        known: i64,
    },
    /// A write was attempted on a database opened read-only ([`crate::Options::read_only`]).
    #[error("database {} is open read-only; writes are refused", path.display())]
    ReadOnly {
        /// The database file.
        path: PathBuf,
    },
    /// The database file or its directory cannot be written by this process (file modes,
    /// a read-only file system), so it cannot be opened read-write, or a write failed.
    #[error(
        "database {} is not writable (check the permissions of the file and its directory); \
         it can still be opened read-only",
        path.display()
    )]
    NotWritable {
        /// The database file.
        path: PathBuf,
        /// What the operating system or SQLite said.
        #[source]
        source: Box<dyn std::error::Error + Send + Sync + 'static>,
    },
    /// The file is not a SQLite database (or its header is destroyed); found when opening.
    #[error("{} is not a scribe database (or is damaged beyond opening)", path.display())]
    NotADatabase {
        /// The file.
        path: PathBuf,
        /// SQLite's SQLITE_NOTADB error.
        #[source]
        source: rusqlite::Error,
    },
    /// The database file is damaged (SQLITE_CORRUPT) in a way found when opening.
    #[error(
        "database {} is damaged (malformed); restore it from a backup or an export",
        path.display()
    )]
    Corrupt {
        /// The file.
        path: PathBuf,
        /// SQLite's SQLITE_CORRUPT error.
        #[source]
        source: rusqlite::Error,
    },
    /// SQLite could not grow the database (SQLITE_FULL): the disk, or a configured page
    /// limit, is full. The failed transaction was rolled back whole.
    #[error("database or disk is full")]
    DiskFull(#[source] rusqlite::Error),
    /// The database's directory or file could not be created or inspected.
    #[error("cannot access database path {}", path.display())]
    Io {
        /// The directory or file involved.
        path: PathBuf,
        /// What the operating system said.
        #[source]
        source: std::io::Error,
    },
    /// SQLite failed otherwise (I/O, corruption found while reading, a constraint other
    /// than uniqueness, a bad query). The message is SQLite's, also kept as the source.
    #[error("sqlite error: {0}")]
    Storage(#[source] rusqlite::Error),
    /// PostgreSQL failed (a statement of the generated `PgQueries`, or a value of an
    /// unexpected type read back), other than a uniqueness violation, which is
    /// [`Error::Conflict`]. The message is the server's or the client's.
    #[cfg(feature = "postgres")]
    #[error("postgres error: {0}")]
    Postgres(#[source] postgres::Error),
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

    /// The SQLite primary error code behind this error, if SQLite reported it (directly,
    /// or as the cause of a failed migration or open).
    pub fn sqlite_code(&self) -> Option<ErrorCode> {
        let mut source: Option<&(dyn std::error::Error + 'static)> = Some(self);
        while let Some(current) = source {
            if let Some(sqlite) = current.downcast_ref::<rusqlite::Error>() {
                return sqlite.sqlite_error_code();
            }
            source = current.source();
        }
        None
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
                return Error::Conflict {
                    message,
                    source: Some(err),
                };
            }
            if failure.code == ErrorCode::DiskFull {
                return Error::DiskFull(err);
            }
        }
        Error::Storage(err)
    }
}

#[cfg(feature = "postgres")]
impl From<postgres::Error> for Error {
    fn from(err: postgres::Error) -> Self {
        if let Some(db) = err.as_db_error()
            && *db.code() == postgres::error::SqlState::UNIQUE_VIOLATION
        {
            return Error::Conflict {
                message: db.message().to_owned(),
                source: None,
            };
        }
        Error::Postgres(err)
    }
}

impl From<refinery::Error> for Error {
    fn from(err: refinery::Error) -> Self {
        Error::Migration(err)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn failure(code: i32, message: Option<&str>) -> rusqlite::Error {
        rusqlite::Error::SqliteFailure(rusqlite::ffi::Error::new(code), message.map(Into::into))
    }

    #[test]
    fn storage_shows_sqlite_message_once_in_a_deduplicating_chain() {
        let err = Error::from(failure(rusqlite::ffi::SQLITE_ERROR, Some("malformed JSON")));
        assert_eq!(err.to_string(), "sqlite error: malformed JSON");
        let source = std::error::Error::source(&err).map(ToString::to_string);
        assert_eq!(source.as_deref(), Some("malformed JSON"));
    }

    #[test]
    fn full_is_typed_and_keeps_the_code() {
        let err = Error::from(failure(rusqlite::ffi::SQLITE_FULL, None));
        assert!(matches!(err, Error::DiskFull(_)), "{err:?}");
        assert_eq!(err.to_string(), "database or disk is full");
        assert_eq!(err.sqlite_code(), Some(ErrorCode::DiskFull));
    }

    #[test]
    fn unique_violation_is_a_conflict_with_sqlites_text() {
        let err = Error::from(rusqlite::Error::SqliteFailure(
            rusqlite::ffi::Error::new(rusqlite::ffi::SQLITE_CONSTRAINT_UNIQUE),
            Some("UNIQUE constraint failed: sessions.id".into()),
        ));
        assert!(
            matches!(&err, Error::Conflict { message, source: Some(_) } if message == "UNIQUE constraint failed: sessions.id"),
            "{err:?}"
        );
        assert!(!err.is_busy());
    }

    #[test]
    fn busy_stays_storage() {
        let err = Error::from(failure(rusqlite::ffi::SQLITE_BUSY, None));
        assert!(err.is_busy());
        assert_eq!(err.sqlite_code(), Some(ErrorCode::DatabaseBusy));
    }
}
