//! [`AgentError`]: everything usage tracking, context building and compaction
//! can refuse or fail at, plus the transaction helpers that keep an agent-level
//! error intact through `Database::write`'s retry loop.

use scribe_db::Database;
use scribe_db::rusqlite::{Connection, Transaction};
use scribe_message::MessageError;
use scribe_session::SessionError;

use crate::compaction::DoesNotFit;
use crate::provider::ProviderError;

/// Why an agent operation failed. Unless a variant says otherwise, nothing was
/// stored when one is returned.
#[derive(Debug, thiserror::Error)]
pub enum AgentError {
    /// A session operation failed (unknown session, invalid usage, storage).
    #[error("session operation failed")]
    Session(#[source] SessionError),
    /// A message operation failed (unknown message, corrupt part, storage).
    #[error("message operation failed")]
    Message(#[source] MessageError),
    /// The database failed or stayed locked.
    #[error("agent storage failed")]
    Db(#[source] scribe_db::Error),
    /// The model call failed.
    #[error("model call failed")]
    Provider(#[source] ProviderError),
    /// The model id is not in the catalog, so its window and prices are unknown.
    #[error("unknown model {0:?}: add it to the model catalog")]
    UnknownModel(String),
    /// Even after every compaction step the next request does not fit.
    #[error("session {session_id} cannot be compacted enough")]
    DoesNotFit {
        /// The session.
        session_id: String,
        /// The sizes involved and why.
        #[source]
        source: DoesNotFit,
    },
    /// Compaction found nothing to summarise (no messages since the last summary).
    #[error("no messages to summarize in session {session_id}")]
    NothingToSummarize {
        /// The session.
        session_id: String,
    },
    /// The summarising model answered with no text.
    #[error("the summary of session {session_id} came back empty")]
    EmptySummary {
        /// The session.
        session_id: String,
    },
    /// Another compaction of the session is running (its `compacting_at` is set
    /// and recent).
    #[error("session {session_id} is already being compacted (since {since_ms})")]
    AlreadyCompacting {
        /// The session.
        session_id: String,
        /// When the running compaction started (ms since the epoch).
        since_ms: i64,
    },
    /// The session has ended, so it cannot be compacted or continued in place.
    #[error("session {session_id} has ended")]
    SessionEnded {
        /// The session.
        session_id: String,
    },
    /// An argument was rejected before anything was written.
    #[error("invalid input: {0}")]
    InvalidInput(String),
}

/// Result with [`AgentError`].
pub type Result<T, E = AgentError> = std::result::Result<T, E>;

impl From<SessionError> for AgentError {
    fn from(err: SessionError) -> Self {
        match err {
            // Keep storage failures recognisable, so a busy database inside a write
            // closure is still retried by `Database::write`.
            SessionError::Db(db) => AgentError::Db(db),
            other => AgentError::Session(other),
        }
    }
}

impl From<MessageError> for AgentError {
    fn from(err: MessageError) -> Self {
        match err {
            MessageError::Db(db) => AgentError::Db(db),
            other => AgentError::Message(other),
        }
    }
}

impl From<scribe_db::Error> for AgentError {
    fn from(err: scribe_db::Error) -> Self {
        AgentError::Db(err)
    }
}

impl From<scribe_db::rusqlite::Error> for AgentError {
    fn from(err: scribe_db::rusqlite::Error) -> Self {
        AgentError::Db(scribe_db::Error::from(err))
    }
}

impl From<ProviderError> for AgentError {
    fn from(err: ProviderError) -> Self {
        AgentError::Provider(err)
    }
}

/// Runs `f` in a write transaction. A database error from `f` goes through
/// untouched (so a busy one is retried); any other error rolls back and is
/// returned as is.
pub(crate) fn write_tx<T>(
    db: &Database,
    mut f: impl FnMut(&Transaction<'_>) -> Result<T>,
) -> Result<T> {
    let mut failure: Option<AgentError> = None;
    let outcome = db.write(|tx| {
        failure = None;
        match f(tx) {
            Ok(value) => Ok(value),
            Err(AgentError::Db(err)) => Err(err),
            Err(err) => {
                failure = Some(err);
                Err(scribe_db::Error::InvalidInput("rolled back".to_owned()))
            }
        }
    });
    match outcome {
        Ok(value) => Ok(value),
        Err(err) => Err(failure.take().unwrap_or(AgentError::Db(err))),
    }
}

/// [`write_tx`] for a read snapshot.
pub(crate) fn read_tx<T>(db: &Database, mut f: impl FnMut(&Connection) -> Result<T>) -> Result<T> {
    let mut failure: Option<AgentError> = None;
    let outcome = db.read(|conn| {
        failure = None;
        match f(conn) {
            Ok(value) => Ok(value),
            Err(AgentError::Db(err)) => Err(err),
            Err(err) => {
                failure = Some(err);
                Err(scribe_db::Error::InvalidInput("aborted".to_owned()))
            }
        }
    });
    match outcome {
        Ok(value) => Ok(value),
        Err(err) => Err(failure.take().unwrap_or(AgentError::Db(err))),
    }
}
