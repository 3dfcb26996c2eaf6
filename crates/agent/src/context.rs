//! What the next request sends: [`context`] loads a session's conversation from
//! its latest summary on, and measures it ([`Context::tokens`]).
//!
//! # What is loaded
//!
//! The session's `summary_message_id` names its latest compaction summary; the
//! context is that summary (sent first, as a user message, so every provider
//! accepts it as the conversation's opening) followed by every message created
//! after it. Only those rows are read (the `ListMessagesFrom` cursor query and
//! their parts), so building the context costs in proportion to the messages
//! since the last summary, never the whole history: older rows are not even
//! decoded. A continuation session holds its summary as its own first message
//! and points at it the same way. Without a summary the whole session is the
//! context.
//!
//! Parts that carry nothing for a model (step markers, finish markers, patches,
//! compaction markers, unknown types) are left out; a compacted tool output is
//! sent as [`CLEARED_TOOL_OUTPUT`](crate::compaction::CLEARED_TOOL_OUTPUT).
//!
//! # How big it is
//!
//! A provider's own count beats any estimate, so the size is measured from the
//! latest model call reported after the summary, when there is one:
//!
//! - **reported** = that call's prompt (input + cache read + cache write) plus
//!   what it wrote (output + reasoning), all of which is in the history now,
//!   plus the estimated size of every message created after that assistant
//!   message. The call is the message's last `step-finish` part with tokens,
//!   or the message's own usage when it has no such part (that total sums
//!   every step of the message, so it errs on the large side);
//! - **estimated** = the [`TokenEstimator`] over the whole context.
//!
//! [`Context::tokens`] is the larger of the two (an estimate alone when no call
//! was reported): tool outputs that arrived after the last call, which no
//! provider has counted yet, still weigh, and compaction triggers early rather
//! than late. Summary messages never serve as the reported call — their usage
//! is the summarising call over the old history — so right after a compaction
//! the size restarts from the summary's own size.

use std::sync::Arc;

use scribe_db::Database;
use scribe_db::queries as q;
use scribe_db::rusqlite::{Connection, OptionalExtension};
use scribe_message::{Message, MessageService, Part, Role, TokenUsage, store};
use scribe_session::{SessionError, SessionService};

use crate::compaction::clear_compacted_tool_outputs;
use crate::error::{AgentError, Result, read_tx};
use crate::estimate::TokenEstimator;
use crate::provider::ChatMessage;

/// How [`Context::tokens`] was measured.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ContextMeasure {
    /// No model call was reported since the summary: the estimate alone.
    Estimated,
    /// From the latest reported call (see the module doc).
    Reported {
        /// The assistant message of that call.
        message_id: String,
        /// The call's prompt plus what it wrote.
        call_tokens: u64,
        /// The estimated size of the messages created after that message.
        estimated_after: u64,
    },
}

/// The messages the next request sends, and their size.
#[derive(Debug, Clone, PartialEq)]
pub struct Context {
    /// The session.
    pub session_id: String,
    /// The session's system prompt, for [`crate::provider::ChatRequest::system`].
    pub system_prompt: Option<String>,
    /// What to send, oldest first; the summary (if any) first.
    pub messages: Vec<ChatMessage>,
    /// The context's size in tokens: the larger of the reported and the
    /// estimated size (see the module doc).
    pub tokens: u64,
    /// The estimator's size of [`Context::messages`].
    pub estimated_tokens: u64,
    /// How [`Context::tokens`] was measured.
    pub measure: ContextMeasure,
    /// The summary the context starts from.
    pub summary_message_id: Option<String>,
    /// How many message rows were loaded (the summary and what follows it).
    pub loaded_messages: usize,
}

/// The context of `session_id` for its next request (see the module doc).
///
/// Everything is read in one snapshot of the message service's database;
/// `sessions` must work on the same database (the same handle, or the same
/// file), else [`AgentError::InvalidInput`]: a session row and message rows
/// from two databases would make a context that exists nowhere.
///
/// Errors: an unknown session ([`AgentError::Session`]), a corrupt message or
/// part row *since the summary* ([`AgentError::Message`]); rows before the
/// summary are not read.
pub fn context(
    messages: &MessageService,
    sessions: &SessionService,
    session_id: &str,
    estimator: &dyn TokenEstimator,
) -> Result<Context> {
    let (mine, theirs) = (messages.database(), sessions.database());
    let same = Arc::ptr_eq(mine, theirs) || (mine.path().is_some() && mine.path() == theirs.path());
    if !same {
        return Err(AgentError::InvalidInput(
            "the message and session services work on different databases".to_owned(),
        ));
    }
    let (context, _) = load_context_in(mine, session_id, estimator)?;
    Ok(context)
}

/// [`context`] plus the stored messages it was built from (creation order,
/// the summary first), for the compactor's prune step.
pub(crate) fn load_context(
    sessions: &SessionService,
    session_id: &str,
    estimator: &dyn TokenEstimator,
) -> Result<(Context, Vec<Message>)> {
    load_context_in(sessions.database(), session_id, estimator)
}

fn load_context_in(
    db: &Database,
    session_id: &str,
    estimator: &dyn TokenEstimator,
) -> Result<(Context, Vec<Message>)> {
    let (system_prompt, summary_message_id, stored) =
        read_tx(db, |conn| load_since_summary(conn, session_id))?;
    let context = build(
        session_id,
        system_prompt,
        summary_message_id,
        &stored,
        estimator,
    );
    Ok((context, stored))
}

/// Reads the session and its messages from the summary on, in one snapshot.
fn load_since_summary(
    conn: &Connection,
    session_id: &str,
) -> Result<(Option<String>, Option<String>, Vec<Message>)> {
    let Some(session) = q::get_session(conn, session_id).optional()? else {
        return Err(AgentError::Session(SessionError::not_found(
            "session", session_id,
        )));
    };
    let summary = match session.summary_message_id.as_deref() {
        Some(id) => q::get_message(conn, id)
            .optional()?
            // A summary moved to another session (it should not happen) cannot
            // start this one's context.
            .filter(|m| m.session_id == session_id),
        None => None,
    };
    let messages = match &summary {
        Some(summary) => {
            let rows = q::list_messages_from(
                conn,
                &q::ListMessagesFromParams {
                    session_id,
                    created_at: summary.created_at,
                    id: &summary.id,
                },
            )?;
            let ids: Vec<&str> = rows.iter().map(|r| r.id.as_str()).collect();
            store::load_messages_by_ids(conn, &ids)?
        }
        None => store::load_session_messages(conn, session_id)?,
    };
    Ok((session.system_prompt, summary.map(|s| s.id), messages))
}

/// Whether a part means anything to a model.
fn is_sent(part: &Part) -> bool {
    matches!(
        part,
        Part::Text(_)
            | Part::Reasoning(_)
            | Part::Tool(_)
            | Part::File(_)
            | Part::ImageUrl(_)
            | Part::Agent(_)
            | Part::Subtask(_)
    )
}

/// One stored message as sent; `None` when nothing of it is sent.
pub(crate) fn to_chat(message: &Message, first_summary: bool) -> Option<ChatMessage> {
    let parts: Vec<Part> = message
        .parts
        .iter()
        .map(|p| &p.part)
        .filter(|p| is_sent(p))
        .cloned()
        .collect();
    if parts.is_empty() {
        return None;
    }
    let role = if first_summary && message.is_summary {
        Role::User
    } else {
        message.role
    };
    Some(ChatMessage::new(role, parts))
}

/// Stored messages (the summary first, if any) to what is sent.
pub(crate) fn to_chat_messages(stored: &[Message]) -> Vec<ChatMessage> {
    let messages = stored
        .iter()
        .enumerate()
        .filter_map(|(i, m)| to_chat(m, i == 0))
        .collect();
    clear_compacted_tool_outputs(messages)
}

/// The prompt plus output of the last call a message reports, if any.
fn reported_call(message: &Message) -> Option<u64> {
    let step = message.parts.iter().rev().find_map(|p| match &p.part {
        Part::StepFinish(step) if !step.tokens.is_zero() => Some(step.tokens),
        _ => None,
    });
    let usage = step.or((!message.usage.is_zero()).then_some(message.usage))?;
    Some(call_size(&usage))
}

/// Every counter of a call, negatives counted as 0.
fn call_size(usage: &TokenUsage) -> u64 {
    [
        usage.input,
        usage.cache_read,
        usage.cache_write,
        usage.output,
        usage.reasoning,
    ]
    .into_iter()
    .map(|n| u64::try_from(n).unwrap_or(0))
    .fold(0_u64, u64::saturating_add)
}

fn build(
    session_id: &str,
    system_prompt: Option<String>,
    summary_message_id: Option<String>,
    stored: &[Message],
    estimator: &dyn TokenEstimator,
) -> Context {
    let messages = to_chat_messages(stored);
    let estimated_tokens = estimator.estimate_messages(&messages);
    let reported = stored
        .iter()
        .enumerate()
        .rev()
        .filter(|(_, m)| m.role == Role::Assistant && !m.is_summary)
        .find_map(|(i, m)| reported_call(m).map(|tokens| (i, m, tokens)));
    let (tokens, measure) = match reported {
        None => (estimated_tokens, ContextMeasure::Estimated),
        Some((i, message, call_tokens)) => {
            let after: Vec<ChatMessage> = stored[i + 1..]
                .iter()
                .filter_map(|m| to_chat(m, false))
                .collect();
            let estimated_after = estimator.estimate_messages(&clear_compacted_tool_outputs(after));
            let reported_tokens = call_tokens.saturating_add(estimated_after);
            (
                reported_tokens.max(estimated_tokens),
                ContextMeasure::Reported {
                    message_id: message.id.clone(),
                    call_tokens,
                    estimated_after,
                },
            )
        }
    };
    Context {
        session_id: session_id.to_owned(),
        system_prompt,
        messages,
        tokens,
        estimated_tokens,
        measure,
        summary_message_id,
        loaded_messages: stored.len(),
    }
}
