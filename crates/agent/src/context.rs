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
//! What of those messages is sent is the one view of scribe-message
//! ([`scribe_message::sent`]): parts that carry nothing for a model (step markers,
//! finish markers, patches, compaction markers, unknown types) are left out, a
//! compacted tool output is sent as
//! [`CLEARED_TOOL_OUTPUT`](crate::compaction::CLEARED_TOOL_OUTPUT), and the summary
//! opens the conversation as a user message.
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

use scribe_db::Queryable;
use scribe_message::{Message, Part, Role, TokenUsage, sent, sent_message, store};
use scribe_session::{SessionService, Store};

use crate::error::Result;
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

/// The context of `session_id` for its next request (see the module doc), read in one
/// snapshot of `store`.
///
/// Errors: an unknown session ([`crate::AgentError::Session`]), a corrupt message or
/// part row *since the summary* ([`crate::AgentError::Message`]); rows before the
/// summary are not read.
pub fn context(store: &Store, session_id: &str, estimator: &dyn TokenEstimator) -> Result<Context> {
    let (context, _) = load_context(store, session_id, estimator)?;
    Ok(context)
}

/// [`context`] plus the stored messages it was built from (creation order,
/// the summary first), for the compactor's prune step.
pub(crate) fn load_context(
    store: &Store,
    session_id: &str,
    estimator: &dyn TokenEstimator,
) -> Result<(Context, Vec<Message>)> {
    let (system_prompt, summary_message_id, stored) = store
        .database()
        .read(|tx| load_since_summary(tx, session_id))?;
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
    tx: &dyn Queryable,
    session_id: &str,
) -> Result<(Option<String>, Option<String>, Vec<Message>)> {
    let session = SessionService::get_tx(tx, session_id)?;
    // A summary moved to another session (it should not happen) cannot start this
    // one's context: then the whole session is.
    let from_summary = match session.summary_message_id.as_deref() {
        Some(id) => store::load_session_messages_from(tx, session_id, id)?
            .map(|messages| (id.to_owned(), messages)),
        None => None,
    };
    Ok(match from_summary {
        Some((summary, messages)) => (session.system_prompt, Some(summary), messages),
        None => (
            session.system_prompt,
            None,
            store::load_session_messages(tx, session_id)?,
        ),
    })
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
    let messages = sent(stored, summary_message_id.as_deref());
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
                .filter_map(|m| sent_message(m, false))
                .collect();
            let estimated_after = estimator.estimate_messages(&after);
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
