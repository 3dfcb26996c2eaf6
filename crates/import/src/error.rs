//! [`ImportError`]: what can stop an import. Problems inside one record (a malformed line,
//! an unknown record type) never do: they are counted and reported in the
//! [`Summary`](crate::Summary), and the rest is imported.

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
        source: rusqlite::Error,
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
    /// Scribe's database failed.
    #[error("scribe's database failed")]
    Db(#[from] scribe_db::Error),
    /// The session service refused or failed a write.
    #[error("storing a session failed")]
    Session(#[from] scribe_session::SessionError),
    /// The message service refused or failed a write.
    #[error("storing a message failed")]
    Message(#[from] scribe_message::MessageError),
    /// The source name is not one of the known agents.
    #[error("unknown source {0:?}; known: claude-code, codex, opencode, hermes, gemini, all")]
    UnknownSource(String),
}

impl ImportError {
    /// An [`ImportError::Io`] for `path`.
    pub(crate) fn io(path: impl Into<PathBuf>) -> impl FnOnce(std::io::Error) -> ImportError {
        let path = path.into();
        move |source| ImportError::Io { path, source }
    }
}

impl From<rusqlite::Error> for ImportError {
    fn from(err: rusqlite::Error) -> Self {
        ImportError::Db(scribe_db::Error::from(err))
    }
}
