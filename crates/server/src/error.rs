//! Errors: [`ServeError`] for starting and running the server (what `scribe serve` prints),
//! [`ApiError`] for one request (what a client gets as `{"error": …}` with a status code).

use std::path::PathBuf;

/// [`ServeError::Open`]'s message: the reason itself when it names `location` (a chain
/// printer then skips it as already shown), else what could not be opened.
fn open_message(location: &str, source: &scribe_db::Error) -> String {
    let reason = source.to_string();
    if reason.contains(location) {
        reason
    } else {
        format!("cannot open database {location}")
    }
}

/// `scribe serve` could not start or stopped with a failure.
#[derive(Debug, thiserror::Error)]
pub enum ServeError {
    /// There is no database file where the user pointed.
    #[error(
        "no database at {}; record some sessions first (e.g. `scribe demo`) or pass --db PATH",
        path.display()
    )]
    NoDatabase {
        /// The path looked at.
        path: PathBuf,
    },
    /// The database exists but could not be opened read-only, or (PostgreSQL) its
    /// change outbox could not be listened to. When the reason already names the
    /// location (`X is not a scribe database …`), the message is the reason alone, so
    /// the location is said once; otherwise `cannot open database X`, then the reason.
    #[error("{}", open_message(location, source))]
    Open {
        /// The database file, or the PostgreSQL location with its password hidden.
        location: String,
        /// Why (a newer or older schema, not a database, permissions, an unreachable
        /// server …).
        #[source]
        source: scribe_db::Error,
    },
    /// `--addr` is not `host:port`, or names no address.
    #[error("invalid address {addr:?}: {reason}; expected host:port, e.g. 127.0.0.1:7777")]
    BadAddress {
        /// What the user gave.
        addr: String,
        /// What is wrong with it.
        reason: String,
    },
    /// A non-loopback address without `--token`: anyone who can reach it could read every
    /// conversation.
    #[error(
        "{addr} is not a loopback address, so other machines could read every conversation; \
         pass --token TOKEN (every request must then carry it) or listen on 127.0.0.1"
    )]
    TokenRequired {
        /// The address asked for.
        addr: String,
    },
    /// The token is empty or holds characters that cannot travel in a header or cookie.
    #[error(
        "the token (--token or SCRIBE_SERVE_TOKEN) must be 1 to 256 visible ASCII characters, \
         none of them `;`, `,`, `\"` or `\\` (no spaces)"
    )]
    BadToken,
    /// Another process already listens on the address.
    #[error(
        "{addr} is already in use (another `scribe serve`?); choose another port, e.g. --addr {suggestion}"
    )]
    AddrInUse {
        /// The address asked for.
        addr: String,
        /// The same host with the next port.
        suggestion: String,
    },
    /// Listening failed for another reason (permissions, an address not on this machine).
    #[error("cannot listen on {addr}")]
    Bind {
        /// The address asked for.
        addr: String,
        /// What the operating system said.
        #[source]
        source: std::io::Error,
    },
    /// The HTTP server stopped with an error.
    #[error("the web server failed")]
    Server(#[source] std::io::Error),
}

/// A request that failed: the status code and a one-line message for `{"error": …}`.
#[derive(Debug, thiserror::Error)]
pub enum ApiError {
    /// A parameter is missing, unknown or malformed (400).
    #[error("{0}")]
    BadRequest(String),
    /// The request lacks the server's token (401).
    #[error("{0}")]
    Unauthorized(String),
    /// The request may not be answered (403): a `Host` that is not loopback.
    #[error("{0}")]
    Forbidden(String),
    /// The session, message or route does not exist (404).
    #[error("{0}")]
    NotFound(String),
    /// A method other than `GET` or `HEAD` (405): the server is read-only.
    #[error("{0}")]
    MethodNotAllowed(String),
    /// The server is too busy for this request (503).
    #[error("{0}")]
    Unavailable(String),
    /// Reading the database failed (500); the text is the error chain.
    #[error("{0}")]
    Internal(String),
}

impl ApiError {
    /// The HTTP status code.
    pub fn status(&self) -> u16 {
        match self {
            ApiError::BadRequest(_) => 400,
            ApiError::Unauthorized(_) => 401,
            ApiError::Forbidden(_) => 403,
            ApiError::NotFound(_) => 404,
            ApiError::MethodNotAllowed(_) => 405,
            ApiError::Internal(_) => 500,
            ApiError::Unavailable(_) => 503,
        }
    }
}

/// `err` and its sources joined with `: `, skipping a source whose text is already shown.
pub(crate) fn chain(err: &dyn std::error::Error) -> String {
    let mut line = err.to_string();
    let mut source = err.source();
    while let Some(cause) = source {
        let text = cause.to_string();
        if !line.contains(&text) {
            line.push_str(": ");
            line.push_str(&text);
        }
        source = cause.source();
    }
    line
}

impl From<scribe_db::Error> for ApiError {
    fn from(err: scribe_db::Error) -> Self {
        match err {
            scribe_db::Error::NotFound { .. } => ApiError::NotFound(err.to_string()),
            scribe_db::Error::InvalidInput(text) => ApiError::BadRequest(text),
            other => ApiError::Internal(chain(&other)),
        }
    }
}

impl From<scribe_session::SessionError> for ApiError {
    fn from(err: scribe_session::SessionError) -> Self {
        use scribe_session::SessionError as E;
        match err {
            E::NotFound { .. } => ApiError::NotFound(err.to_string()),
            E::InvalidInput(text) => ApiError::BadRequest(text),
            E::Db(db) => ApiError::from(db),
            other => ApiError::Internal(chain(&other)),
        }
    }
}

impl From<scribe_message::MessageError> for ApiError {
    fn from(err: scribe_message::MessageError) -> Self {
        use scribe_message::MessageError as E;
        match err {
            E::NotFound { .. } => ApiError::NotFound(err.to_string()),
            E::InvalidInput(text) => ApiError::BadRequest(text),
            E::Db(db) => ApiError::from(db),
            other => ApiError::Internal(chain(&other)),
        }
    }
}
