//! What the agent reports on its [`scribe_pubsub::Broker`]s, published after the
//! change they describe has committed (never for a rolled-back one), with
//! [`EventKind::Created`]: each is a new fact, not a change to an earlier one.
//!
//! - [`AgentEvent`]: compaction runs and usage tracking. A compaction reports, in
//!   order: [`AgentEvent::CompactionStarting`], [`AgentEvent::CompactionAnalyzing`],
//!   [`AgentEvent::CompactionSummarizing`] (only when it asks for a summary), then
//!   exactly one of [`AgentEvent::CompactionDone`] or [`AgentEvent::CompactionFailed`],
//!   both saying which steps ran ([`CompactionStep`]).
//! - [`LoopEvent`]: prompt ingestion and the loop's own milestones and failures.
//!   Part-level progress (text deltas, tool state changes) is on the message
//!   service's part broker.

use scribe_message::{FinishReason, TokenUsage};
use scribe_pubsub::{Broker, EventKind};

use crate::compaction::CompactionStep;

/// One compaction or usage event. Published with [`EventKind::Created`]: each
/// is a new fact, not a change to an earlier one.
#[derive(Debug, Clone, PartialEq)]
pub enum AgentEvent {
    /// A compaction of the session began (its `compacting_at` is set).
    CompactionStarting {
        /// The session being compacted.
        session_id: String,
    },
    /// What is sent was loaded and measured.
    CompactionAnalyzing {
        /// The session being compacted.
        session_id: String,
    },
    /// Clearing old tool outputs was not enough (or cleared nothing): the
    /// summarising model was asked for a summary.
    CompactionSummarizing {
        /// The session being compacted.
        session_id: String,
    },
    /// The compaction finished and the next request fits.
    CompactionDone {
        /// The session that was compacted.
        session_id: String,
        /// The stored summary message (`None` when pruning was enough, or summaries
        /// are off).
        summary_message_id: Option<String>,
        /// The continuation session holding the summary (continuation strategy).
        continuation_session_id: Option<String>,
        /// The context size before compaction.
        tokens_before: u64,
        /// The estimated size of the next request's context after it.
        tokens_after: u64,
        /// Tool parts whose outputs were cleared (by the prune step, and by a summary
        /// that keeps the words).
        pruned_tool_parts: usize,
        /// Messages a restarting summary kept verbatim after it.
        kept_messages: usize,
        /// The steps that ran, in order (the send-side ones are what the next
        /// request needs).
        steps: Vec<CompactionStep>,
    },
    /// The compaction stopped; `compacting_at` was cleared.
    CompactionFailed {
        /// The session whose compaction failed.
        session_id: String,
        /// The steps that ran before it failed (what they stored stays).
        steps: Vec<CompactionStep>,
        /// Why, e.g. `no messages to summarize in session …`.
        error: String,
    },
    /// A model call's usage and cost were added to a session (and message).
    UsageTracked {
        /// The session charged.
        session_id: String,
        /// The assistant message charged, if any.
        message_id: Option<String>,
        /// The model that was used.
        model_id: String,
        /// The tokens added.
        usage: TokenUsage,
        /// The cost added, in US dollars.
        cost_usd: f64,
    },
}

impl AgentEvent {
    /// The session the event is about.
    pub fn session_id(&self) -> &str {
        match self {
            AgentEvent::CompactionStarting { session_id }
            | AgentEvent::CompactionAnalyzing { session_id }
            | AgentEvent::CompactionSummarizing { session_id }
            | AgentEvent::CompactionDone { session_id, .. }
            | AgentEvent::CompactionFailed { session_id, .. }
            | AgentEvent::UsageTracked { session_id, .. } => session_id,
        }
    }

    /// Whether this event ends a compaction run.
    pub fn is_terminal(&self) -> bool {
        matches!(
            self,
            AgentEvent::CompactionDone { .. } | AgentEvent::CompactionFailed { .. }
        )
    }
}

/// Publishes `event` as a new fact.
pub(crate) fn emit<T: Clone + Send>(broker: &Broker<T>, event: T) {
    broker.publish(EventKind::Created, event);
}

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
    /// Compaction ran before a step.
    Compacted {
        /// The session that was compacted.
        session_id: String,
        /// Where the conversation continues, if it moved to a new session.
        continued_in: Option<String>,
        /// The steps it took.
        steps: Vec<CompactionStep>,
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
