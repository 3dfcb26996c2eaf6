//! [`AgentError`]: the one error type of the agent crate — usage tracking, context
//! building, compaction, prompt ingestion and the loop. A busy database has one shape
//! here, [`AgentError::Db`], wherever it happened, so [`scribe_db::Database::write`]
//! retries it and callers match it once.
//!
//! Failures inside a run that the history can express (a tool error, a denied
//! permission, a cancellation) are recorded as parts and finish reasons instead; these
//! are the ones the caller must hear about. Unless a variant says otherwise, nothing was
//! stored when one is returned.

use scribe_message::MessageError;
use scribe_session::SessionError;

use crate::compaction::DoesNotFit;
use crate::permission::PermissionError;
use crate::provider::ProviderError;
use crate::tools::PathError;

/// Why an agent operation failed.
#[derive(Debug, thiserror::Error)]
pub enum AgentError {
    /// A session operation failed (unknown session, invalid usage …); a database
    /// failure is [`AgentError::Db`] instead.
    #[error("session operation failed")]
    Session(#[source] SessionError),
    /// A message operation failed (unknown message, corrupt part …); a database failure
    /// is [`AgentError::Db`] instead.
    #[error("message operation failed")]
    Message(#[source] MessageError),
    /// The database failed or stayed locked.
    #[error("agent storage failed")]
    Db(#[source] scribe_db::Error),
    /// A model call failed. In the loop, the step's message is finished with `error`
    /// and carries the error; in a compaction, nothing of the summary was stored.
    #[error("model call failed (session {session_id})")]
    Provider {
        /// The session the call was for.
        session_id: String,
        /// What the provider reported.
        #[source]
        source: ProviderError,
    },
    /// The model id is not in the catalog, so its window and prices are unknown.
    #[error("unknown model {0:?}: add it to the model catalog")]
    UnknownModel(String),
    /// The prompt or the session names an agent the runner does not know.
    #[error("unknown agent {0:?}")]
    UnknownAgent(String),
    /// No model was given, the agent has none and the session never used one.
    #[error(
        "no model for session {session_id}: pass one, configure the agent's, or use a session that has one"
    )]
    NoModel {
        /// The session.
        session_id: String,
    },
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
    /// Another live process holds the session's run lease (see [`crate::lease`]):
    /// two processes must not answer in one session at once.
    #[error(
        "session {session_id} is being answered by another process ({owner}, pid {pid} on {host})"
    )]
    SessionBusy {
        /// The session.
        session_id: String,
        /// The lease holder's owner id.
        owner: String,
        /// The holder's process id.
        pid: i64,
        /// The holder's host.
        host: String,
    },
    /// An attached file lies outside the session's allowed roots; nothing was saved.
    #[error("attached file {path:?} refused")]
    FileRefused {
        /// The path as the caller gave it.
        path: String,
        /// Why it is refused.
        #[source]
        source: PathError,
    },
    /// A prompt hook refused the message; nothing was saved.
    #[error("prompt hook {index} failed")]
    Hook {
        /// The hook's position in the runner's list.
        index: usize,
        /// What it reported.
        #[source]
        source: Box<dyn std::error::Error + Send + Sync>,
    },
    /// The session's permission rules cannot be read.
    #[error("session {session_id} has invalid permission rules")]
    Permission {
        /// The session.
        session_id: String,
        /// What is wrong.
        #[source]
        source: PermissionError,
    },
    /// The prompt has no parts.
    #[error("the prompt is empty")]
    EmptyPrompt,
    /// The compaction thread the loop waited for panicked; the session's
    /// `compacting_at` mark is taken over once stale.
    #[error("compaction of session {session_id} panicked")]
    CompactionPanicked {
        /// The session being compacted.
        session_id: String,
    },
    /// A background title thread panicked.
    #[error("title generation for session {session_id} panicked")]
    TitlePanicked {
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
            // One shape for a database failure, so a busy one inside a write closure is
            // retried and callers match it once.
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

impl From<rusqlite::Error> for AgentError {
    fn from(err: rusqlite::Error) -> Self {
        AgentError::Db(scribe_db::Error::from(err))
    }
}

// What `scribe_db::Database::write` and `read` need to
// carry an `AgentError` through their retry loop.
scribe_db::impl_tx_error!(AgentError, AgentError::Db);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_busy_database_has_one_shape() {
        let busy = || {
            scribe_db::Error::from(rusqlite::Error::SqliteFailure(
                rusqlite::ffi::Error::new(rusqlite::ffi::SQLITE_BUSY),
                None,
            ))
        };
        for err in [
            AgentError::from(SessionError::Db(busy())),
            AgentError::from(MessageError::Db(busy())),
            AgentError::from(busy()),
        ] {
            assert!(
                matches!(&err, AgentError::Db(db) if db.is_busy()),
                "{err:?}"
            );
        }
    }
}
