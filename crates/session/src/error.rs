//! [`SessionError`]: everything the session service can refuse or fail at.

/// Result with [`SessionError`].
pub type Result<T, E = SessionError> = std::result::Result<T, E>;

/// Why a session operation failed. Nothing was changed when an operation returns one.
#[derive(Debug, thiserror::Error)]
pub enum SessionError {
    /// The row a caller named does not exist (`what`: `"session"`, `"message"`, `"title"`).
    #[error("{what} not found: {id}")]
    NotFound {
        /// The kind of thing looked up.
        what: &'static str,
        /// The id (or title) that was looked up.
        id: String,
    },
    /// The title is already used by another session; non-empty titles are unique.
    #[error("title {title:?} is already used by session {session_id}")]
    TitleInUse {
        /// The (normalized) title asked for.
        title: String,
        /// The session that holds it.
        session_id: String,
    },
    /// Another uniqueness rule was broken, e.g. a session id already taken.
    #[error("conflict: {message}")]
    Conflict {
        /// What clashed.
        message: String,
        /// The database's error, when the database found the clash.
        #[source]
        source: Option<scribe_db::Error>,
    },
    /// The title is unusable, e.g. nothing is left of it after normalization.
    #[error("invalid title: {reason}")]
    InvalidTitle {
        /// What is wrong with it.
        reason: String,
    },
    /// The title is longer than allowed (counted in characters, after normalization).
    #[error("title too long: {len} characters, at most {max} allowed")]
    TitleTooLong {
        /// Its length in characters.
        len: usize,
        /// The limit, [`crate::MAX_TITLE_CHARS`].
        max: usize,
    },
    /// An id (the session's, or one of its messages', parts' or file versions') is longer
    /// than [`scribe_db::ids::MAX_ID_BYTES`]; nothing of the session was written.
    #[error(transparent)]
    IdTooLong(#[from] scribe_db::ids::IdTooLong),
    /// Some other argument was rejected before reaching the database.
    #[error("invalid input: {0}")]
    InvalidInput(String),
    /// A stored row could not be read back into its typed form (bad JSON, unknown kind).
    #[error("stored session {id} is malformed: {reason}")]
    Corrupt {
        /// The session (or other row) id.
        id: String,
        /// What could not be decoded (which column), without the decoder's own message.
        reason: String,
        /// The decoder's error, when there is one (bad JSON).
        #[source]
        source: Option<serde_json::Error>,
    },
    /// The database failed or stayed locked.
    #[error("session storage failed")]
    Db(#[source] scribe_db::Error),
    /// Loading or storing a message failed.
    #[error("message storage failed")]
    Message(#[source] scribe_message::MessageError),
    /// The caller's writer refused a session of a streamed export
    /// ([`SessionService::export_each`](crate::SessionService::export_each)).
    #[error("writing the export failed")]
    Write(#[source] Box<dyn std::error::Error + Send + Sync>),
}

impl SessionError {
    /// A [`SessionError::NotFound`] for `what` with `id`.
    pub fn not_found(what: &'static str, id: impl Into<String>) -> Self {
        SessionError::NotFound {
            what,
            id: id.into(),
        }
    }

    /// Whether a stored row could not be read back: a value of the wrong kind in an SQLite
    /// column ([`scribe_db::Error::UnreadableValue`], another program's write), a session
    /// row that does not decode ([`SessionError::Corrupt`]), a part or message row that
    /// does not ([`scribe_message::MessageError::CorruptPart`], `CorruptMessage`). Such a
    /// session can be left out of an export while the rest is written
    /// ([`SessionService::export_each_skipping`](crate::SessionService::export_each_skipping)).
    pub fn is_unreadable(&self) -> bool {
        matches!(
            self,
            SessionError::Db(scribe_db::Error::UnreadableValue { .. })
                | SessionError::Corrupt { .. }
                | SessionError::Message(
                    scribe_message::MessageError::CorruptPart { .. }
                        | scribe_message::MessageError::CorruptMessage { .. }
                )
        )
    }

    /// This error, naming `session_id` as the row when it is an unreadable value that
    /// names no row yet ([`scribe_db::Error::in_row`]).
    pub(crate) fn in_session(self, session_id: &str) -> Self {
        match self {
            SessionError::Db(err) => {
                SessionError::Db(err.in_row(|| Some(format!("session {session_id}"))))
            }
            other => other,
        }
    }

    /// A [`SessionError::Conflict`] the service found itself (no database error behind it).
    pub fn conflict(message: impl Into<String>) -> Self {
        SessionError::Conflict {
            message: message.into(),
            source: None,
        }
    }
}

impl From<scribe_db::Error> for SessionError {
    fn from(err: scribe_db::Error) -> Self {
        match err {
            scribe_db::Error::NotFound { what, id } => SessionError::NotFound { what, id },
            scribe_db::Error::Conflict { message, source } => SessionError::Conflict {
                message: message.clone(),
                source: Some(scribe_db::Error::Conflict { message, source }),
            },
            scribe_db::Error::InvalidInput(message) => SessionError::InvalidInput(message),
            scribe_db::Error::IdTooLong(err) => SessionError::IdTooLong(err),
            other => SessionError::Db(other),
        }
    }
}

impl From<scribe_message::MessageError> for SessionError {
    fn from(err: scribe_message::MessageError) -> Self {
        // Database failures keep their identity so a busy error inside a write closure is
        // still retried by `Database::write`.
        match err {
            scribe_message::MessageError::Db(db) => SessionError::from(db),
            scribe_message::MessageError::IdTooLong(err) => SessionError::IdTooLong(err),
            scribe_message::MessageError::NotFound { what, id } => {
                SessionError::NotFound { what, id }
            }
            other => SessionError::Message(other),
        }
    }
}

// What `scribe_db::Database::write` and `read` need to
// carry a `SessionError` through their retry loop: a busy database inside
// `SessionError::Db` is retried, everything else rolls back and comes out as it is.
scribe_db::impl_tx_error!(SessionError, SessionError::Db);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_database_conflict_keeps_its_source() {
        let db = scribe_db::Error::Conflict {
            message: "UNIQUE constraint failed: sessions.id".into(),
            source: None,
        };
        let err = SessionError::from(db);
        assert_eq!(
            err.to_string(),
            "conflict: UNIQUE constraint failed: sessions.id"
        );
        let source = std::error::Error::source(&err).expect("the database error");
        assert!(source.is::<scribe_db::Error>(), "{source:?}");
    }
}
