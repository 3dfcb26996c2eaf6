//! [`LoopError`]: why prompt ingestion or the agent loop stopped with an error.
//! Failures inside a run that the history can express (a tool error, a denied
//! permission, a cancellation) are recorded as parts and finish reasons
//! instead; these are the ones the caller must hear about.

use scribe_message::MessageError;
use scribe_session::SessionError;

use crate::error::AgentError;
use crate::permission::PermissionError;
use crate::provider::ProviderError;
use crate::tools::PathError;

/// The error type of ingestion and the loop.
#[derive(Debug, thiserror::Error)]
pub enum LoopError {
    /// Usage tracking, context building or compaction failed.
    #[error("agent operation failed")]
    Agent(#[from] AgentError),
    /// A session operation failed (unknown session, storage).
    #[error("session operation failed")]
    Session(#[from] SessionError),
    /// A message operation failed (unknown message, storage).
    #[error("message operation failed")]
    Message(#[from] MessageError),
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
    /// The chosen model is not in the catalog.
    #[error("unknown model {0:?}: add it to the model catalog")]
    UnknownModel(String),
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
    /// The model call failed; the step's message is finished with `error` and
    /// carries the error.
    #[error("model call in session {session_id} failed")]
    Provider {
        /// The session.
        session_id: String,
        /// What the provider reported.
        #[source]
        source: ProviderError,
    },
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
    /// Another live process holds the session's run lease (see
    /// [`crate::lease`]): two processes must not answer in one session at once.
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
}
