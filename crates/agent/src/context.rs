//! What the next request sends: [`context`] loads a session's conversation as the model
//! is sent it, and measures it ([`Context::tokens`]).
//!
//! # What is loaded
//!
//! Only what is sent, never the whole history. The session's `summary_message_id` names
//! its latest compaction summary, whose compaction part says where the conversation sent
//! with it begins ([`scribe_message::sent`] has the rules):
//!
//! - a summary that restarts the conversation: the summary and what follows it, plus the
//!   recent messages it kept verbatim (from its `keep_from` on, which for a continuation
//!   lies in the session it continues, up to where that session handed over);
//! - a summary that keeps the words: the conversation it was added to, from where that
//!   began (the previous summary's start, or the session's first message).
//!
//! Those rows are read with cursor queries (messages, then their parts, each one query
//! whatever the history's length: no `IN` list that grows with the session), and the
//! outputs of tool calls compaction cleared are left out by the query itself
//! ([`scribe_message::store::load_sent_messages_from`]), since only the cleared marker is
//! sent. So building the context costs in proportion to what is sent: rows before the
//! conversation's start are not even decoded. Without a summary the whole session is the
//! context.
//!
//! What of those messages is sent is the one view of scribe-message
//! ([`scribe_message::sent`]): parts that carry nothing for a model (step markers,
//! finish markers, patches, compaction markers, unknown types) are left out, a compacted
//! tool output is sent as [`CLEARED_TOOL_OUTPUT`](scribe_message::CLEARED_TOOL_OUTPUT),
//! and the summary is sent as a user message.
//!
//! # How big it is
//!
//! A provider's own count beats any estimate, so the size is measured from the latest
//! model call reported after the summary, when there is one that still describes what is
//! sent:
//!
//! - **reported** = that call's prompt (input + cache read + cache write) plus what it
//!   wrote (output + reasoning), all of which is in the history now, plus the estimated
//!   size of every message created after that assistant message. The call is the
//!   message's last `step-finish` part with tokens, or the message's own usage when it
//!   has no such part (that total sums every step of the message, so it errs on the
//!   large side);
//! - **estimated** = the [`TokenEstimator`] over the whole context.
//!
//! Both count what every request sends besides the conversation, the system prompt and
//! the tool specifications ([`RequestFrame`]): a reported prompt includes them, and the
//! estimate adds [`Context::frame_tokens`] to the messages'. So the compactor never
//! compacts one request too late (or, measuring the frame twice, too early) because of
//! them.
//!
//! [`Context::tokens`] is the larger of the two (an estimate alone when no call was
//! reported): tool outputs that arrived after the last call, which no provider has
//! counted yet, still weigh, and compaction triggers early rather than late. A call made
//! before the context last shrank no longer describes it, so it is not used: summary
//! messages and everything stored before the summary never serve (right after a
//! compaction the size restarts from the estimate), nor does a call made no later than
//! the newest clearing of a tool output (a prune that made the request fit is believed
//! until the next call reports).

use scribe_db::Reads;
use scribe_message::store::{self, SentFrom};
use scribe_message::{
    Message, Part, Role, TokenUsage, sent_message, sent_order, summary_compaction,
};
use scribe_session::{SessionService, Store};

use crate::error::Result;
use crate::estimate::TokenEstimator;
use crate::provider::{ChatMessage, ChatRequest, ToolSpec};
use crate::prune_input::PruneMessage;

/// What a request sends besides the conversation: the system prompt and the tool
/// specifications. Every request pays for it, so every size compared with a budget
/// counts it ([`Context::frame_tokens`]).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct RequestFrame {
    /// The system prompt; `None` sends the session's own (`system_prompt` of the session).
    pub system: Option<String>,
    /// The tool specifications offered with the request.
    pub tools: Vec<ToolSpec>,
}

impl RequestFrame {
    /// A frame of `system` (if any) and `tools`.
    pub fn new(system: Option<String>, tools: Vec<ToolSpec>) -> RequestFrame {
        RequestFrame { system, tools }
    }

    /// The estimated tokens of `system` (the resolved system prompt) and the tools, as
    /// [`TokenEstimator::estimate_request`] counts them.
    fn tokens(&self, system: Option<&str>, estimator: &dyn TokenEstimator) -> u64 {
        let request = ChatRequest {
            model: String::new(),
            system: system.map(str::to_owned),
            messages: Vec::new(),
            tools: self.tools.clone(),
        };
        estimator.estimate_request(&request)
    }
}

/// How [`Context::tokens`] was measured.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ContextMeasure {
    /// No model call was reported since the summary (or since the context last shrank):
    /// the estimate alone.
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
    /// The system prompt the request sends ([`crate::provider::ChatRequest::system`]):
    /// the frame's, else the session's.
    pub system_prompt: Option<String>,
    /// The estimated tokens of the system prompt and the frame's tool specifications,
    /// counted in [`Context::estimated_tokens`] and so in [`Context::tokens`].
    pub frame_tokens: u64,
    /// What to send, in order (see [`scribe_message::sent`]).
    pub messages: Vec<ChatMessage>,
    /// Where the summary is in [`Context::messages`] (first for a summary that restarts
    /// the conversation, in its place for one that keeps the words).
    pub summary_index: Option<usize>,
    /// The context's size in tokens: the larger of the reported and the
    /// estimated size (see the module doc).
    pub tokens: u64,
    /// The estimator's size of the request: [`Context::frame_tokens`] plus
    /// [`Context::messages`].
    pub estimated_tokens: u64,
    /// How [`Context::tokens`] was measured.
    pub measure: ContextMeasure,
    /// The summary the context is sent with.
    pub summary_message_id: Option<String>,
    /// How many message rows were loaded (what is sent, and the few bookkeeping-only
    /// messages among them).
    pub loaded_messages: usize,
    /// The loaded messages as the prune planner sees them (stored order), so the
    /// compactor can tell from this load whether a prune is due.
    pub(crate) prune_input: Vec<PruneMessage>,
}

impl Context {
    /// The estimated tokens of [`Context::messages`] alone.
    pub fn message_tokens(&self) -> u64 {
        self.estimated_tokens.saturating_sub(self.frame_tokens)
    }
}

/// The stored messages a [`Context`] was built from, for the compactor.
#[derive(Debug, Clone, Default)]
pub(crate) struct Loaded {
    /// Creation order; a continuation's kept messages (from the session it continues)
    /// first. Outputs of cleared tool calls are empty: never write these parts back.
    pub(crate) messages: Vec<Message>,
    /// Where the summary is in [`Loaded::messages`].
    pub(crate) summary_at: Option<usize>,
}

/// The context of `session_id` for its next request (see the module doc), read in one
/// snapshot of `store`, sent with the session's system prompt and no tools (see
/// [`context_with_frame`]).
///
/// Errors: an unknown session ([`crate::AgentError::Session`]), a corrupt message or
/// part row *in what is sent* ([`crate::AgentError::Message`]); rows before the
/// conversation's start are not read.
pub fn context(store: &Store, session_id: &str, estimator: &dyn TokenEstimator) -> Result<Context> {
    context_with_frame(store, session_id, estimator, &RequestFrame::default())
}

/// [`context`] for a request sent with `frame` (the agent's system prompt, if it has
/// one, and the tools it offers), which its size counts.
pub fn context_with_frame(
    store: &Store,
    session_id: &str,
    estimator: &dyn TokenEstimator,
    frame: &RequestFrame,
) -> Result<Context> {
    let (context, _) = load_context(store, session_id, estimator, frame)?;
    Ok(context)
}

/// [`context_with_frame`] plus the stored messages it was built from.
pub(crate) fn load_context(
    store: &Store,
    session_id: &str,
    estimator: &dyn TokenEstimator,
    frame: &RequestFrame,
) -> Result<(Context, Loaded)> {
    let (session_prompt, summary_message_id, messages) =
        store.database().read(|tx| load_sent(tx, session_id))?;
    let system_prompt = frame.system.clone().or(session_prompt);
    let frame_tokens = frame.tokens(system_prompt.as_deref(), estimator);
    let summary_at = summary_message_id
        .as_deref()
        .and_then(|id| messages.iter().position(|m| m.id == id));
    let loaded = Loaded {
        messages,
        summary_at,
    };
    let context = build(
        session_id,
        (system_prompt, frame_tokens),
        summary_at.and(summary_message_id),
        &loaded,
        estimator,
    );
    Ok((context, loaded))
}

/// Reads the session and the messages its context is made of, in one snapshot.
fn load_sent(
    tx: &mut dyn Reads,
    session_id: &str,
) -> Result<(Option<String>, Option<String>, Vec<Message>)> {
    let session = SessionService::get_tx(tx, session_id)?;
    let summary = match session.summary_message_id.as_deref() {
        Some(id) => match store::load_message(tx, id) {
            // A summary moved to another session (it should not happen) cannot start
            // this one's context: then the whole session is.
            Ok(summary) if summary.session_id == session_id => Some(summary),
            Ok(_) => None,
            Err(e) if e.is_not_found() => None,
            Err(other) => return Err(other.into()),
        },
        None => None,
    };
    let Some(summary) = summary else {
        let messages = store::load_sent_messages_from(tx, session_id, SentFrom::Start)?;
        return Ok((session.system_prompt, None, messages));
    };
    let compaction = summary_compaction(&summary);
    let keeps_words = compaction.is_some_and(|c| c.keeps_words);
    let keep_from = match compaction.and_then(|c| c.keep_from.as_deref()) {
        Some(id) => match store::load_message_row(tx, id) {
            Ok(row) => Some(row),
            Err(e) if e.is_not_found() => None,
            Err(other) => return Err(other.into()),
        },
        None => None,
    };
    let from_summary = SentFrom::Message {
        created_at: summary.created_at,
        id: &summary.id,
    };
    let messages = match keep_from {
        // Kept messages of this session: one stretch, from them on.
        Some(first) if first.session_id == session_id => {
            let from = SentFrom::Message {
                created_at: first.created_at,
                id: &first.id,
            };
            store::load_sent_messages_from(tx, session_id, from)?
        }
        // A continuation's kept messages, in the session it continues: those up to where
        // that session handed over (the first message of this one), then this session.
        Some(first) => {
            let own = store::load_sent_messages_from(tx, session_id, SentFrom::Start)?;
            let from = SentFrom::Message {
                created_at: first.created_at,
                id: &first.id,
            };
            let handed_over = own
                .first()
                .map_or((summary.created_at, summary.id.as_str()), |m| {
                    (m.created_at, m.id.as_str())
                });
            let mut messages: Vec<Message> =
                store::load_sent_messages_from(tx, &first.session_id, from)?
                    .into_iter()
                    .filter(|m| (m.created_at, m.id.as_str()) < handed_over)
                    .collect();
            messages.extend(own);
            messages
        }
        None if keeps_words => store::load_sent_messages_from(tx, session_id, SentFrom::Start)?,
        None => store::load_sent_messages_from(tx, session_id, from_summary)?,
    };
    Ok((session.system_prompt, Some(summary.id), messages))
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

/// When a message's reported call was made: its last reporting `step-finish` part, or
/// the message's last change.
fn reported_at(message: &Message) -> i64 {
    message
        .parts
        .iter()
        .rev()
        .find(|p| matches!(&p.part, Part::StepFinish(step) if !step.tokens.is_zero()))
        .map_or(message.updated_at, |p| p.created_at)
}

/// The newest time a loaded tool output was cleared.
fn last_cleared_at(messages: &[Message]) -> Option<i64> {
    messages
        .iter()
        .flat_map(|m| &m.parts)
        .filter_map(|p| match &p.part {
            Part::Tool(tool) => tool.compacted_at,
            _ => None,
        })
        .max()
}

fn build(
    session_id: &str,
    (system_prompt, frame_tokens): (Option<String>, u64),
    summary_message_id: Option<String>,
    loaded: &Loaded,
    estimator: &dyn TokenEstimator,
) -> Context {
    let stored = &loaded.messages;
    let order = sent_order(stored, summary_message_id.as_deref());
    let mut messages = Vec::with_capacity(order.len());
    let mut summary_index = None;
    for (message, as_summary) in order {
        if let Some(sent) = sent_message(message, as_summary) {
            if as_summary {
                summary_index = Some(messages.len());
            }
            messages.push(sent);
        }
    }
    let estimated_tokens = frame_tokens.saturating_add(estimator.estimate_messages(&messages));
    // Only a call made after the summary, and after the newest clearing, describes what
    // is sent now.
    let first_after_summary = loaded.summary_at.map_or(0, |k| k + 1);
    let cleared = last_cleared_at(stored);
    let reported = stored
        .iter()
        .enumerate()
        .skip(first_after_summary)
        .rev()
        .filter(|(_, m)| m.role == Role::Assistant && !m.is_summary)
        .find_map(|(i, m)| reported_call(m).map(|tokens| (i, m, tokens)))
        .filter(|(_, m, _)| cleared.is_none_or(|at| at < reported_at(m)));
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
    let prune_input = stored
        .iter()
        .map(|m| PruneMessage::from_stored(m, estimator))
        .collect();
    Context {
        session_id: session_id.to_owned(),
        system_prompt,
        frame_tokens,
        messages,
        summary_index,
        tokens,
        estimated_tokens,
        measure,
        summary_message_id,
        loaded_messages: stored.len(),
        prune_input,
    }
}
