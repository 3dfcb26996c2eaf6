//! [`ImportError`]: what can stop an import. Problems inside one record (a malformed line,
//! an unknown record type) never do: they are counted and reported in the
//! [`SourceSummary`](crate::SourceSummary), and the rest is imported.

use std::path::PathBuf;

/// Result with [`ImportError`].
pub type Result<T, E = ImportError> = std::result::Result<T, E>;

/// Why an import (of one file, or of everything) failed.
#[derive(Debug, thiserror::Error)]
pub enum ImportError {
    /// A source file or directory could not be read.
    #[error("cannot read {}", path.display())]
    Io {
        /// The file or directory.
        path: PathBuf,
        /// What the operating system said.
        #[source]
        source: std::io::Error,
    },
    /// A compressed file could not be decompressed.
    #[error("cannot decompress {}", path.display())]
    Decompress {
        /// The `.zst` file.
        path: PathBuf,
        /// What the decoder said.
        #[source]
        source: std::io::Error,
    },
    /// An agent's SQLite database could not be read.
    #[error("cannot read the database {}", path.display())]
    SourceDb {
        /// The agent's database file.
        path: PathBuf,
        /// What SQLite said.
        #[source]
        source: SourceDbError,
    },
    /// A whole-file JSON source is not the document it should be.
    #[error("{} is not a {what}: {reason}", path.display())]
    Malformed {
        /// The file.
        path: PathBuf,
        /// What it should have been.
        what: &'static str,
        /// Why it is not.
        reason: String,
    },
    /// Scribe's database failed (a busy one inside a write is retried first).
    #[error("scribe's database failed")]
    Db(#[from] scribe_db::Error),
    /// The session service refused a write.
    #[error("storing a session failed")]
    Session(#[source] scribe_session::SessionError),
    /// The message service refused a write.
    #[error("storing a message failed")]
    Message(#[source] scribe_message::MessageError),
    /// The source name is not one of the known agents.
    #[error("unknown source {0:?}; known: claude-code, codex, opencode, hermes, gemini, all")]
    UnknownSource(String),
}

/// What SQLite said about an agent's database ([`ImportError::SourceDb`]): its message,
/// without the driver's type, which is not part of this crate's API.
#[derive(Debug)]
pub struct SourceDbError(rusqlite::Error);

impl std::fmt::Display for SourceDbError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.0.fmt(f)?;
        if matches!(
            self.0.sqlite_error_code(),
            Some(rusqlite::ErrorCode::DatabaseBusy | rusqlite::ErrorCode::DatabaseLocked)
        ) {
            // A rollback-journal database whose writer held its lock through the busy
            // timeout: the agent is writing; the next import reads it.
            write!(
                f,
                " (its writer kept it locked for {} s; import again when it is idle)",
                crate::sources::SOURCE_BUSY_TIMEOUT.as_secs()
            )?;
        }
        Ok(())
    }
}

impl std::error::Error for SourceDbError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match &self.0 {
            // The message shown is SQLite's own; the driver's source would only repeat
            // it as "Error code 11: database disk image is malformed".
            rusqlite::Error::SqliteFailure(..) => None,
            other => std::error::Error::source(other),
        }
    }
}

impl ImportError {
    /// An [`ImportError::SourceDb`] for the agent's database at `path`.
    pub(crate) fn source_db(path: &std::path::Path, source: rusqlite::Error) -> ImportError {
        ImportError::SourceDb {
            path: path.to_owned(),
            source: SourceDbError(source),
        }
    }

    /// An [`ImportError::Io`] for `path`.
    pub(crate) fn io(path: impl Into<PathBuf>) -> impl FnOnce(std::io::Error) -> ImportError {
        let path = path.into();
        move |source| ImportError::Io { path, source }
    }
}

impl From<scribe_session::SessionError> for ImportError {
    fn from(err: scribe_session::SessionError) -> Self {
        // One shape for a database failure, so a busy one inside a write is retried.
        match err {
            scribe_session::SessionError::Db(db) => ImportError::Db(db),
            other => ImportError::Session(other),
        }
    }
}

impl From<scribe_message::MessageError> for ImportError {
    fn from(err: scribe_message::MessageError) -> Self {
        match err {
            scribe_message::MessageError::Db(db) => ImportError::Db(db),
            other => ImportError::Message(other),
        }
    }
}

// What `scribe_db::Database::write` and `read` need to carry an `ImportError` through
// their retry loop: a busy database in `ImportError::Db` is retried, everything else
// rolls back and comes out as it is.
scribe_db::impl_tx_error!(ImportError, ImportError::Db);
