//! [`MessageError`]: everything that can go wrong storing, loading or searching messages.

use crate::part::{PartDecodeError, PartEncodeError};
use crate::tool_state::ToolStateError;

/// Result with [`MessageError`].
pub type Result<T, E = MessageError> = std::result::Result<T, E>;

/// The error type of the message layer.
#[derive(Debug, thiserror::Error)]
pub enum MessageError {
    /// The session, message or part a caller named does not exist.
    #[error("{what} not found: {id}")]
    NotFound {
        /// The kind of row: `"session"`, `"message"` or `"part"`.
        what: &'static str,
        /// The id that was looked up.
        id: String,
    },
    /// The caller's input was rejected before anything was written (a bad cursor, a zero
    /// page size, an empty id …).
    #[error("invalid input: {0}")]
    InvalidInput(String),
    /// A message or part id is longer than [`scribe_db::ids::MAX_ID_BYTES`]; nothing of
    /// the message was written.
    #[error(transparent)]
    IdTooLong(#[from] scribe_db::ids::IdTooLong),
    /// A stored part's JSON cannot be decoded; names the row so it can be repaired.
    #[error("part {part_id} is corrupt")]
    CorruptPart {
        /// The id of the bad `parts` row.
        part_id: String,
        /// Why it could not be decoded.
        #[source]
        source: PartDecodeError,
    },
    /// A stored message row holds a value this build cannot read (an unknown role, an
    /// error column that is not JSON).
    #[error("message {message_id} is corrupt: {reason}")]
    CorruptMessage {
        /// The id of the bad `messages` row.
        message_id: String,
        /// Which column is wrong (`"role is not a known role"` …), without the decoder's
        /// own message: that is the source.
        reason: String,
        /// The decoder's error ([`crate::ParseRoleError`], `serde_json::Error`).
        #[source]
        source: Box<dyn std::error::Error + Send + Sync + 'static>,
    },
    /// A part could not be encoded as JSON.
    #[error("cannot encode part")]
    Encode(#[from] PartEncodeError),
    /// A part nests deeper than [`crate::MAX_PART_DEPTH`]: it is refused, nothing is
    /// written, since it could not be read back (see [`crate::Part::into_storable`] for
    /// a form that can be stored).
    #[error(
        "part {part_id} of message {message_id} nests {depth} levels deep, more than the \
         {limit} a part may have"
    )]
    PartTooDeep {
        /// The part's id.
        part_id: String,
        /// Its message's id.
        message_id: String,
        /// How deep its JSON nests (its own object is level 1).
        depth: usize,
        /// [`crate::MAX_PART_DEPTH`].
        limit: usize,
    },
    /// A tool part update asked for a state change the tool state machine forbids
    /// (e.g. completed → running).
    #[error("part {part_id}: illegal tool state change")]
    IllegalToolTransition {
        /// The tool part's id.
        part_id: String,
        /// The refused transition.
        #[source]
        source: ToolStateError,
    },
    /// The database failed or refused the change (busy through every retry, a conflict,
    /// an I/O error …).
    #[error("database error")]
    Db(#[from] scribe_db::Error),
}

impl MessageError {
    /// A part's encoding error as the error of storing part `part_id` of message
    /// `message_id` ([`MessageError::PartTooDeep`] names both).
    pub(crate) fn encoding(err: PartEncodeError, part_id: &str, message_id: &str) -> Self {
        match err {
            PartEncodeError::TooDeep { depth, limit } => MessageError::PartTooDeep {
                part_id: part_id.to_owned(),
                message_id: message_id.to_owned(),
                depth,
                limit,
            },
            other => MessageError::Encode(other),
        }
    }

    /// A [`MessageError::NotFound`] for `what` with `id`.
    pub fn not_found(what: &'static str, id: impl Into<String>) -> Self {
        MessageError::NotFound {
            what,
            id: id.into(),
        }
    }

    /// Whether this is a not-found error.
    pub fn is_not_found(&self) -> bool {
        matches!(
            self,
            MessageError::NotFound { .. } | MessageError::Db(scribe_db::Error::NotFound { .. })
        )
    }
}

// What `scribe_db::Database::write` and `read` need to
// carry a `MessageError` through their retry loop: a busy database inside
// `MessageError::Db` is retried, everything else rolls back and comes out as it is.
scribe_db::impl_tx_error!(MessageError, MessageError::Db);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn service_errors_cross_a_write_closure_with_their_chain() {
        let db = scribe_db::Database::open_in_memory().unwrap();
        let err = db
            .write(|_| -> Result<()> {
                Err(MessageError::IllegalToolTransition {
                    part_id: "prt_1".into(),
                    source: ToolStateError::IllegalTransition {
                        from: "completed",
                        to: "running",
                    },
                })
            })
            .unwrap_err();
        assert_eq!(err.to_string(), "part prt_1: illegal tool state change");
        let cause = std::error::Error::source(&err).map(ToString::to_string);
        assert_eq!(
            cause.as_deref(),
            Some("illegal tool state transition from completed to running")
        );
        assert!(matches!(
            &err,
            MessageError::IllegalToolTransition { part_id, .. } if part_id == "prt_1"
        ));
        assert!(scribe_db::TxError::db_error(&err).is_none());
    }

    #[test]
    fn write_returns_a_service_error_at_once() {
        let db = scribe_db::Database::open_in_memory().unwrap();
        let mut tries = 0;
        let err = db
            .write(|_| -> Result<()> {
                tries += 1;
                Err(MessageError::IllegalToolTransition {
                    part_id: "prt_2".into(),
                    source: ToolStateError::IllegalTransition {
                        from: "error",
                        to: "pending",
                    },
                })
            })
            .unwrap_err();
        assert_eq!(tries, 1);
        assert!(
            matches!(err, MessageError::IllegalToolTransition { .. }),
            "{err:?}"
        );
    }
}
