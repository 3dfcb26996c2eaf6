//! [`LoopEvent`]: what the agent loop reports on its broker (published as
//! `created`, after the change it describes has committed). Part-level
//! progress (text deltas, tool state changes) is on the message service's
//! part broker; these are the loop's own milestones and failures.

use scribe_message::FinishReason;

/// One milestone or failure of prompt ingestion and the loop.
#[derive(Debug, Clone, PartialEq)]
pub enum LoopEvent {
    /// The user message and its parts were saved.
    PromptSaved {
        /// The session.
        session_id: String,
        /// The saved user message.
        message_id: String,
    },
    /// An attached file could not be read; a synthetic text part says so.
    FileReadFailed {
        /// The session.
        session_id: String,
        /// The path as the caller gave it.
        path: String,
        /// What failed.
        error: String,
    },
    /// A model call began; its assistant message is saved.
    StepStarted {
        /// The session.
        session_id: String,
        /// The step's assistant message.
        message_id: String,
        /// 1-based step number within the prompt.
        step: usize,
    },
    /// Compaction ran between steps.
    Compacted {
        /// The session that was compacted.
        session_id: String,
        /// Where the conversation continues, if it moved to a new session.
        continued_in: Option<String>,
    },
    /// The loop stopped.
    Finished {
        /// The session it stopped in.
        session_id: String,
        /// Its last assistant message, if it made one.
        message_id: Option<String>,
        /// Why it stopped.
        reason: FinishReason,
    },
    /// Something failed and was recorded (a model call, a title, a file).
    Error {
        /// The session.
        session_id: String,
        /// What failed.
        message: String,
    },
}
