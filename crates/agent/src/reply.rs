//! [`ReplyWriter`]: writes a streamed assistant reply into a session as it arrives,
//! for the agent loop and for an application that runs its own loop over a provider.
//!
//! Consecutive text deltas grow ONE text part (written at most every flush interval,
//! and once more when it closes), reasoning likewise, and each tool call becomes a
//! `pending` tool part at once — so a crash mid-answer leaves what had arrived. Every
//! write announces its part on the message service's part broker after it commits.
//!
//! A step's end is one transaction: [`ReplyWriter::finish_charged`] squares what
//! streamed with the response (below), appends the step's `step_finish` part and
//! charges its usage to the message and its session ([`UsageTracker`]), all or none
//! of it; a crash or a storage error never leaves a reply ended but uncharged.
//! [`ReplyWriter::finish`] ends a reply that is not charged.
//!
//! ```
//! use std::sync::Arc;
//! use scribe_agent::{ModelCatalog, ReplyWriter, ScriptedProvider, ScriptedTurn, UsageTracker};
//! use scribe_agent::provider::{ChatMessage, ChatRequest, Provider};
//! use scribe_message::{FinishReason, NewMessage, Part, Role, StepStartPart, TokenUsage};
//! use scribe_session::{NewSession, Store};
//!
//! let store = Store::open_in_memory()?;
//! let catalog = Arc::new(ModelCatalog::builtin());
//! let model = catalog.iter().next().expect("a built-in model").id.clone();
//! let session = store.sessions().create(NewSession::default())?;
//! let provider = ScriptedProvider::new([ScriptedTurn::reply()
//!     .text("Hello ")
//!     .text("there.")
//!     .usage(TokenUsage { input: 12, output: 3, ..TokenUsage::default() })]);
//!
//! // Your own loop: an assistant message, the provider's stream into it, then its end,
//! // committed in one transaction with the step's usage and its step-finish part.
//! let mut reply = ReplyWriter::start(store.messages(), NewMessage::new(
//!     &session.id,
//!     Role::Assistant,
//!     vec![Part::StepStart(StepStartPart::default())],
//! ))?;
//! let request = ChatRequest::new(&model, vec![ChatMessage::user_text("hi")]);
//! let response = provider.send(&request, &mut |event| reply.push(event))?;
//! let message_id = reply.message_id().to_owned();
//! let tracker = UsageTracker::new(store.clone(), catalog);
//! let (tool_calls, charge) = reply.finish_charged(&response, &tracker, &model)?;
//! assert!(tool_calls.is_empty());
//! store.messages().finish(&message_id, FinishReason::EndTurn)?;
//!
//! assert_eq!(store.messages().get(&message_id)?.text(), "Hello there.");
//! assert_eq!(store.sessions().get(&session.id)?.tokens.input, 12);
//! assert_eq!(charge.record.usage.output, 3);
//! assert!(matches!(charge.step_finish.part, Part::StepFinish(_)));
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
//!
//! An application that reads a model's stream itself, without a [`Provider`](crate::Provider),
//! has no [`ProviderResponse`] to give [`ReplyWriter::finish`]: it pushes each event to
//! the writer alone and ends with [`ReplyWriter::finish_streamed`], which assembles the
//! response from the events as a [`ResponseBuilder`](crate::provider::ResponseBuilder)
//! does (from the parts it wrote: the text is not kept twice) and returns it with the
//! message id and the tool calls. What is stored is exactly what `finish` with that
//! response stores. [`ReplyWriter::finish_streamed_charged`] does the same and charges
//! the step in the same transaction, as `finish_charged` does
//! (`crates/agent/examples/own_loop.rs` does this, and searches and reads the cost
//! after):
//!
//! ```
//! use scribe_agent::ReplyWriter;
//! use scribe_agent::provider::ProviderEvent;
//! use scribe_message::{FinishReason, NewMessage, Part, Role, StepStartPart, TokenUsage};
//! use scribe_session::{NewSession, Store};
//!
//! let store = Store::open_in_memory()?;
//! let session = store.sessions().create(NewSession::default())?;
//! let mut reply = ReplyWriter::start(store.messages(), NewMessage::new(
//!     &session.id,
//!     Role::Assistant,
//!     vec![Part::StepStart(StepStartPart::default())],
//! ))?;
//! // Events as your adapter reads them off the wire.
//! for event in [
//!     ProviderEvent::TextDelta("Hello ".into()),
//!     ProviderEvent::TextDelta("there.".into()),
//!     ProviderEvent::Finish { reason: FinishReason::EndTurn, usage: TokenUsage::default() },
//! ] {
//!     reply.push(event);
//! }
//! let streamed = reply.finish_streamed()?;
//! assert_eq!(streamed.response.text(), "Hello there.");
//! assert_eq!(store.messages().get(&streamed.message_id)?.text(), "Hello there.");
//! assert!(streamed.tool_calls.is_empty());
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
//!
//! When the call returns, [`ReplyWriter::finish`] squares what streamed with the
//! [`ProviderResponse`] (a provider may return parts without streaming them,
//! or stream less than it returns). The rules, in one transaction:
//!
//! - nothing streamed (no text, reasoning or tool-call delta): every text,
//!   reasoning and tool-call part of the response is saved, in order (tool
//!   calls as `pending`, whatever state the response gave them: only the
//!   loop runs tools); other part kinds are not the model's to produce;
//! - something streamed: the streamed parts stand, and
//!   - a tool call of the response whose call id did not stream is added
//!     (`pending`), in the response's order, after the streamed parts;
//!   - for text, and separately for reasoning: with `S` the streamed parts'
//!     joined content and `R` the response's, nothing changes when `R` is
//!     empty or equal to `S`; when `R` extends `S` (trailing deltas were
//!     lost) the missing tail is added to the last streamed part of that kind
//!     (or saved as a new part if none of that kind streamed); otherwise the
//!     response is the final word: the first streamed part of that kind
//!     takes `R` and the later ones of that kind are deleted.

use std::fmt;
use std::time::{Duration, Instant};

use scribe_db::Tx;
use scribe_message::{
    FinishReason, MessageError, MessageService, NewMessage, Part, PartTime, ReasoningPart, Role,
    TextPart, TokenUsage, ToolPart, ToolState,
};

use crate::error::{AgentError, Result};
use crate::provider::{ProviderEvent, ProviderResponse};
use crate::usage::{StepCharge, UsageTracker};

/// How often a growing text or reasoning part is written by default.
pub const DEFAULT_FLUSH_INTERVAL: Duration = Duration::from_millis(50);

/// What streamed into one message, for [`reconcile`].
struct Streamed<'s> {
    /// The text and reasoning parts (id, final content), in order.
    content: &'s [(String, Part)],
    /// The tool parts created (id, part), in order.
    tools: &'s [(String, ToolPart)],
    /// Whether any content delta arrived.
    any: bool,
}

/// Where a part written so far sits: in `content` or in `tools`, at this index.
#[derive(Clone, Copy)]
enum Slot {
    Content(usize),
    Tool(usize),
}

struct OpenPart {
    id: String,
    part: Part,
    dirty: bool,
    written_at: Instant,
}

/// Writes one streamed response into its assistant message (see the module doc).
pub struct ReplyWriter<'a> {
    messages: &'a MessageService,
    message_id: String,
    interval: Duration,
    open: Option<OpenPart>,
    tools: Vec<(String, ToolPart)>,
    /// Text and reasoning parts written so far (id, last written content).
    content: Vec<(String, Part)>,
    /// Whether any text, reasoning or tool-call delta arrived.
    any: bool,
    /// The parts of `content` and `tools` in the order they streamed: with `finish`,
    /// the response [`ReplyWriter::finish_streamed`] assembles (the text is kept once,
    /// in the parts written, not again in a `ResponseBuilder`).
    order: Vec<Slot>,
    /// The last [`ProviderEvent::Finish`] pushed.
    finish: Option<(FinishReason, TokenUsage)>,
    error: Option<MessageError>,
}

impl fmt::Debug for ReplyWriter<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ReplyWriter")
            .field("message_id", &self.message_id)
            .field("interval", &self.interval)
            .field("tools", &self.tools.len())
            .finish_non_exhaustive()
    }
}

/// A tool call the reply made, as stored: the part's id and the call (`pending`).
pub type ToolCall = (String, ToolPart);

/// What [`ReplyWriter::finish_streamed`] gives back.
#[derive(Debug, Clone, PartialEq)]
pub struct StreamedReply {
    /// The assistant message written.
    pub message_id: String,
    /// The response assembled from the events pushed, as a
    /// [`ResponseBuilder`](crate::provider::ResponseBuilder) makes it: its usage is what
    /// [`ReplyWriter::finish_streamed_charged`] charges, and its `finish_reason` ends the
    /// message.
    pub response: ProviderResponse,
    /// Every tool call of the message to run, in order, as [`ReplyWriter::finish`]
    /// returns them.
    pub tool_calls: Vec<ToolCall>,
}

impl<'a> ReplyWriter<'a> {
    /// Writes into the existing assistant message `message_id`.
    pub fn new(messages: &'a MessageService, message_id: impl Into<String>) -> Self {
        ReplyWriter {
            messages,
            message_id: message_id.into(),
            interval: DEFAULT_FLUSH_INTERVAL,
            open: None,
            tools: Vec::new(),
            content: Vec::new(),
            any: false,
            order: Vec::new(),
            finish: None,
            error: None,
        }
    }

    /// Creates the assistant message `new` describes (its role must be
    /// [`Role::Assistant`]; it stays open until finished) and writes into it.
    pub fn start(messages: &'a MessageService, new: NewMessage) -> Result<Self> {
        if new.role != Role::Assistant {
            return Err(AgentError::InvalidInput(format!(
                "a reply is an assistant message, not a {} message",
                new.role
            )));
        }
        let message = messages.create(new)?;
        Ok(ReplyWriter::new(messages, message.id))
    }

    /// Writes a growing text part at most this often (default
    /// [`DEFAULT_FLUSH_INTERVAL`]; zero writes every delta).
    pub fn with_flush_interval(mut self, interval: Duration) -> Self {
        self.interval = interval;
        self
    }

    /// The assistant message being written.
    pub fn message_id(&self) -> &str {
        &self.message_id
    }

    /// Takes one event; after a storage failure the rest are ignored and the
    /// failure is reported by [`ReplyWriter::finish`].
    pub fn push(&mut self, event: ProviderEvent) {
        if let ProviderEvent::Finish { reason, usage } = &event {
            self.finish = Some((reason.clone(), *usage));
        }
        if self.error.is_some() {
            return;
        }
        if let Err(e) = self.apply(event) {
            self.error = Some(e);
        }
    }

    /// Ends the stream: writes what is pending, squares what streamed with `response`
    /// (see the module doc; one transaction, whose part events follow its commit), and
    /// returns every tool call of the message to run (streamed first, then added), in
    /// order. A storage failure while streaming is reported here.
    ///
    /// This charges nothing: a step that is charged ends with
    /// [`finish_charged`](ReplyWriter::finish_charged) instead.
    pub fn finish(mut self, response: &ProviderResponse) -> Result<Vec<ToolCall>> {
        self.write_pending()?;
        let (tool_calls, ()) = self.commit(response, |_| Ok(()))?;
        Ok(tool_calls)
    }

    /// [`finish`](ReplyWriter::finish), and charges the step to the message and its
    /// session in the same transaction: `response`'s usage priced on `model_id` by
    /// `usage` ([`UsageTracker::track_usage`]'s charge, the message implying the
    /// session), and the step's `step_finish` part (finish reason, tokens, cost)
    /// appended. The reply's end, its `step_finish` part and its charge commit together
    /// or not at all; every event of them (parts, message and session `updated`,
    /// [`AgentEvent::UsageTracked`](crate::AgentEvent::UsageTracked)) goes out after
    /// the commit. Returns the tool calls, as `finish` does, and the charge.
    ///
    /// What streamed is written first (as [`abandon`](ReplyWriter::abandon) writes it),
    /// so after a failure the message holds what arrived, and nothing of its end.
    ///
    /// Errors, with nothing of the end written: a storage failure while streaming;
    /// [`AgentError::UnknownModel`] for a model not in `usage`'s catalog (an
    /// application on its own models adds them to the [`ModelCatalog`](crate::ModelCatalog)
    /// it gives the tracker); a usage with negative counts ([`AgentError::Session`]);
    /// [`AgentError::InvalidInput`] when `usage` is over another store than the writer's
    /// message service (a handle of its own on the same file, or the same PostgreSQL
    /// location, is the same store); and any storage failure of the transaction.
    pub fn finish_charged(
        mut self,
        response: &ProviderResponse,
        usage: &UsageTracker,
        model_id: &str,
    ) -> Result<(Vec<ToolCall>, StepCharge)> {
        self.write_pending()?;
        let delta = self.price(usage, model_id, response)?;
        let (messages, message_id) = (self.messages, self.message_id.as_str());
        self.commit(response, |tx| {
            usage.charge_step_tx(tx, messages, message_id, model_id, &delta, response)
        })
    }

    /// Whether the stream's [`ProviderEvent::Finish`] was pushed: what
    /// [`ReplyWriter::finish_streamed`] needs (without it, the stream broke off: call
    /// [`ReplyWriter::abandon`]).
    pub fn is_finished(&self) -> bool {
        self.finish.is_some()
    }

    /// Ends a stream the caller read itself (no [`Provider`](crate::Provider) returned a
    /// response): assembles the [`ProviderResponse`] from the events pushed, as a
    /// [`ResponseBuilder`](crate::provider::ResponseBuilder) does, and
    /// [`finish`](ReplyWriter::finish)es with it, so what is stored is the same. Returns
    /// the message id, that response and the tool calls. Charges nothing:
    /// [`finish_streamed_charged`](ReplyWriter::finish_streamed_charged) does.
    ///
    /// Errors: [`AgentError::InvalidInput`] when no [`ProviderEvent::Finish`] was pushed
    /// (check [`is_finished`](ReplyWriter::is_finished) and call
    /// [`abandon`](ReplyWriter::abandon) instead, which returns the tool calls to fail;
    /// here what is pending is written, as `abandon` does, and nothing else), and
    /// `finish`'s.
    pub fn finish_streamed(mut self) -> Result<StreamedReply> {
        let response = self.finished_response()?;
        let (tool_calls, ()) = self.commit(&response, |_| Ok(()))?;
        Ok(StreamedReply {
            message_id: self.message_id,
            response,
            tool_calls,
        })
    }

    /// [`finish_streamed`](ReplyWriter::finish_streamed), charging the step as
    /// [`finish_charged`](ReplyWriter::finish_charged) does, in the same transaction:
    /// the end, the `step_finish` part and the charge commit together or not at all.
    /// Errors: `finish_streamed`'s and `finish_charged`'s, with nothing of the end
    /// written.
    pub fn finish_streamed_charged(
        mut self,
        usage: &UsageTracker,
        model_id: &str,
    ) -> Result<(StreamedReply, StepCharge)> {
        let response = self.finished_response()?;
        let delta = self.price(usage, model_id, &response)?;
        let (messages, message_id) = (self.messages, self.message_id.as_str());
        let (tool_calls, charge) = self.commit(&response, |tx| {
            usage.charge_step_tx(tx, messages, message_id, model_id, &delta, &response)
        })?;
        let streamed = StreamedReply {
            message_id: self.message_id,
            response,
            tool_calls,
        };
        Ok((streamed, charge))
    }

    /// Reports a storage failure while streaming, else writes what is pending (the
    /// open part's last content and end time): what arrived is stored before the end.
    fn write_pending(&mut self) -> Result<()> {
        if let Some(e) = self.error.take() {
            return Err(e.into());
        }
        Ok(self.close()?)
    }

    /// For `finish_streamed*`: the response the events pushed make, after
    /// [`write_pending`](ReplyWriter::write_pending); a stream without its finish event
    /// is abandoned and refused.
    fn finished_response(&mut self) -> Result<ProviderResponse> {
        let Some(finish) = self.finish.clone() else {
            if self.error.is_none() {
                let _ = self.close();
            }
            return Err(AgentError::InvalidInput(
                "the stream ended without a finish event".to_owned(),
            ));
        };
        self.write_pending()?;
        Ok(self.assembled(finish))
    }

    /// What the step's charge adds, checked before anything of the end is written:
    /// `usage` must be over this writer's store (any handle to it: [`Database::is_same_store`]), and
    /// the model priced.
    fn price(
        &self,
        usage: &UsageTracker,
        model_id: &str,
        response: &ProviderResponse,
    ) -> Result<scribe_session::UsageDelta> {
        let (reply_db, tracker_db) = (self.messages.database(), usage.store().database());
        if !reply_db.is_same_store(tracker_db) {
            return Err(AgentError::InvalidInput(format!(
                "the usage tracker is over another store ({}) than the reply ({})",
                tracker_db.location(),
                reply_db.location()
            )));
        }
        usage.delta(model_id, &response.usage)
    }

    /// The end, in one transaction: squares what streamed with `response` (see the
    /// module doc), then runs `then` (the charge, or nothing) in the same transaction.
    /// Every event of it follows the commit.
    fn commit<T>(
        &self,
        response: &ProviderResponse,
        mut then: impl FnMut(&mut Tx<'_>) -> Result<T>,
    ) -> Result<(Vec<ToolCall>, T)> {
        let streamed = self.streamed();
        self.messages.database().write(|tx| {
            let tool_calls = reconcile(tx, self.messages, &self.message_id, &streamed, response)?;
            let then = then(tx)?;
            Ok((tool_calls, then))
        })
    }

    /// Ends a stream whose call failed: writes what is pending (best effort) and
    /// returns the tool calls created so far, for the caller to fail.
    pub fn abandon(mut self) -> Vec<ToolCall> {
        if self.error.is_none() {
            let _ = self.close();
        }
        self.tools
    }

    fn streamed(&self) -> Streamed<'_> {
        Streamed {
            content: &self.content,
            tools: &self.tools,
            any: self.any,
        }
    }

    fn apply(&mut self, event: ProviderEvent) -> Result<(), MessageError> {
        if !matches!(event, ProviderEvent::Finish { .. }) {
            self.any = true;
        }
        match event {
            ProviderEvent::TextDelta(delta) => self.delta(&delta, false),
            ProviderEvent::ReasoningDelta(delta) => self.delta(&delta, true),
            ProviderEvent::ToolCall {
                call_id,
                name,
                input,
            } => {
                self.close()?;
                let part = Part::tool(call_id, name, input);
                let stored = self.messages.append_part(&self.message_id, part)?;
                if let Part::Tool(tool) = stored.part {
                    self.order.push(Slot::Tool(self.tools.len()));
                    self.tools.push((stored.id, tool));
                }
                Ok(())
            }
            ProviderEvent::Finish { .. } => self.close(),
        }
    }

    fn delta(&mut self, delta: &str, reasoning: bool) -> Result<(), MessageError> {
        if let Some(open) = &mut self.open {
            let same = matches!(
                (&open.part, reasoning),
                (Part::Text(_), false) | (Part::Reasoning(_), true)
            );
            if same {
                match &mut open.part {
                    Part::Text(p) => p.text.push_str(delta),
                    Part::Reasoning(p) => p.text.push_str(delta),
                    _ => {}
                }
                open.dirty = true;
                if open.written_at.elapsed() >= self.interval {
                    self.messages.update_part(&open.id, open.part.clone())?;
                    open.dirty = false;
                    open.written_at = Instant::now();
                }
                return Ok(());
            }
        }
        self.close()?;
        let time = Some(PartTime {
            start: self.messages.database().now(),
            end: None,
        });
        let part = if reasoning {
            Part::Reasoning(ReasoningPart {
                text: delta.to_owned(),
                time,
                ..ReasoningPart::default()
            })
        } else {
            Part::Text(TextPart {
                text: delta.to_owned(),
                time,
                ..TextPart::default()
            })
        };
        let stored = self.messages.append_part(&self.message_id, part.clone())?;
        self.open = Some(OpenPart {
            id: stored.id,
            part,
            dirty: false,
            written_at: Instant::now(),
        });
        Ok(())
    }

    /// Writes the open text or reasoning part's final content and end time.
    fn close(&mut self) -> Result<(), MessageError> {
        let Some(mut open) = self.open.take() else {
            return Ok(());
        };
        let end = Some(self.messages.database().now());
        match &mut open.part {
            Part::Text(TextPart {
                time: Some(time), ..
            })
            | Part::Reasoning(ReasoningPart {
                time: Some(time), ..
            }) => time.end = end,
            _ => {}
        }
        self.messages.update_part(&open.id, open.part.clone())?;
        self.order.push(Slot::Content(self.content.len()));
        self.content.push((open.id, open.part));
        Ok(())
    }

    /// The response the events pushed make, as a `ResponseBuilder` fed the same events
    /// makes it (no times, tool calls `pending`), from the parts written: call after
    /// [`close`](ReplyWriter::close) and only when no storage error stopped the writes.
    fn assembled(&self, (finish_reason, usage): (FinishReason, TokenUsage)) -> ProviderResponse {
        let parts = self
            .order
            .iter()
            .filter_map(|slot| match *slot {
                Slot::Content(i) => match &self.content.get(i)?.1 {
                    Part::Text(p) => Some(Part::text(p.text.clone())),
                    Part::Reasoning(p) => Some(Part::Reasoning(ReasoningPart {
                        text: p.text.clone(),
                        ..ReasoningPart::default()
                    })),
                    _ => None,
                },
                Slot::Tool(i) => {
                    let (_, call) = self.tools.get(i)?;
                    Some(Part::tool(
                        call.call_id.clone(),
                        call.tool.clone(),
                        call.input.clone(),
                    ))
                }
            })
            .collect();
        ProviderResponse {
            parts,
            finish_reason,
            usage,
        }
    }
}

/// Squares what streamed with the final response (see the module doc) inside `tx`,
/// whose commit its part events follow. Returns every tool part of the message to run
/// (streamed first, then added), in order.
fn reconcile(
    tx: &mut Tx<'_>,
    messages: &MessageService,
    message_id: &str,
    streamed: &Streamed<'_>,
    response: &ProviderResponse,
) -> Result<Vec<ToolCall>> {
    {
        let mut tools = streamed.tools.to_vec();
        let now = tx.now();
        if !streamed.any {
            for part in &response.parts {
                match part {
                    Part::Text(_) | Part::Reasoning(_) => {
                        messages.append_part_tx(tx, message_id, &with_time(part.clone(), now))?;
                    }
                    Part::Tool(call) => {
                        let stored = messages.append_part_tx(tx, message_id, &pending(call))?;
                        if let Part::Tool(tool) = stored.part {
                            tools.push((stored.id, tool));
                        }
                    }
                    _ => {}
                }
            }
            return Ok(tools);
        }
        for reasoning in [false, true] {
            let theirs: String = response
                .parts
                .iter()
                .filter_map(|p| content_of(p, reasoning))
                .collect();
            let ours: Vec<&(String, Part)> = streamed
                .content
                .iter()
                .filter(|(_, p)| content_of(p, reasoning).is_some())
                .collect();
            let streamed_text: String = ours
                .iter()
                .filter_map(|(_, p)| content_of(p, reasoning))
                .collect();
            if theirs.is_empty() || theirs == streamed_text {
                continue;
            }
            match (ours.first(), ours.last()) {
                (Some(_), Some((last_id, last))) if theirs.starts_with(&streamed_text) => {
                    let tail = &theirs[streamed_text.len()..];
                    let mut part = last.clone();
                    push_text(&mut part, tail);
                    messages.update_part_tx(tx, last_id, &part)?;
                }
                (Some((first_id, first)), _) => {
                    let mut part = first.clone();
                    set_text(&mut part, &theirs);
                    messages.update_part_tx(tx, first_id, &part)?;
                    for (id, _) in ours.iter().skip(1) {
                        messages.delete_part_tx(tx, id)?;
                    }
                }
                (None, _) => {
                    let part = if reasoning {
                        Part::Reasoning(ReasoningPart {
                            text: theirs,
                            ..ReasoningPart::default()
                        })
                    } else {
                        Part::text(theirs)
                    };
                    messages.append_part_tx(tx, message_id, &with_time(part, now))?;
                }
            }
        }
        for call in response.tool_calls() {
            if streamed
                .tools
                .iter()
                .any(|(_, t)| t.call_id == call.call_id)
            {
                continue;
            }
            let stored = messages.append_part_tx(tx, message_id, &pending(call))?;
            if let Part::Tool(tool) = stored.part {
                tools.push((stored.id, tool));
            }
        }
        Ok(tools)
    }
}

/// The text of a text part (`reasoning` false) or a reasoning part (true).
fn content_of(part: &Part, reasoning: bool) -> Option<&str> {
    match (part, reasoning) {
        (Part::Text(p), false) => Some(&p.text),
        (Part::Reasoning(p), true) => Some(&p.text),
        _ => None,
    }
}

fn push_text(part: &mut Part, tail: &str) {
    match part {
        Part::Text(p) => p.text.push_str(tail),
        Part::Reasoning(p) => p.text.push_str(tail),
        _ => {}
    }
}

fn set_text(part: &mut Part, text: &str) {
    match part {
        Part::Text(p) => text.clone_into(&mut p.text),
        Part::Reasoning(p) => text.clone_into(&mut p.text),
        _ => {}
    }
}

/// A text or reasoning part that arrived whole: it started and ended at `now`
/// unless the provider said otherwise.
fn with_time(mut part: Part, now: i64) -> Part {
    let whole = Some(PartTime {
        start: now,
        end: Some(now),
    });
    match &mut part {
        Part::Text(p) if p.time.is_none() => p.time = whole,
        Part::Reasoning(p) if p.time.is_none() => p.time = whole,
        _ => {}
    }
    part
}

/// A tool call as the loop saves it: `pending`, not compacted.
fn pending(call: &ToolPart) -> Part {
    let mut call = call.clone();
    call.state = ToolState::Pending;
    call.compacted_at = None;
    Part::Tool(call)
}
