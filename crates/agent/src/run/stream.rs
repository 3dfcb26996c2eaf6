//! Persists a streamed model response as it arrives: consecutive text deltas
//! grow ONE text part (written at most every flush interval, and once more
//! when it closes), reasoning likewise, and each tool call becomes a `pending`
//! tool part at once — so a crash mid-answer leaves what had arrived.
//!
//! When the call returns, [`reconcile`] squares what streamed with the
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

use std::time::{Duration, Instant};

use scribe_db::now_ms;
use scribe_message::{
    MessageError, MessageService, Part, PartEvent, PartTime, ReasoningPart, TextPart, ToolPart,
    ToolState,
};

use crate::error::{AgentError, write_tx};
use crate::provider::{ProviderEvent, ProviderResponse};

struct OpenPart {
    id: String,
    part: Part,
    dirty: bool,
    written_at: Instant,
}

/// Writes one response's parts under its assistant message.
pub(crate) struct Streamer<'a> {
    messages: &'a MessageService,
    message_id: &'a str,
    interval: Duration,
    open: Option<OpenPart>,
    tools: Vec<(String, ToolPart)>,
    /// Text and reasoning parts written so far (id, last written content).
    content: Vec<(String, Part)>,
    /// Whether any text, reasoning or tool-call delta arrived.
    any: bool,
    error: Option<MessageError>,
}

/// What streamed into one message, for [`reconcile`].
pub(crate) struct Streamed {
    /// The text and reasoning parts (id, final content), in order.
    content: Vec<(String, Part)>,
    /// The tool parts created (id, part), in order.
    tools: Vec<(String, ToolPart)>,
    /// Whether any content delta arrived.
    any: bool,
}

impl<'a> Streamer<'a> {
    pub(crate) fn new(
        messages: &'a MessageService,
        message_id: &'a str,
        interval: Duration,
    ) -> Self {
        Streamer {
            messages,
            message_id,
            interval,
            open: None,
            tools: Vec::new(),
            content: Vec::new(),
            any: false,
            error: None,
        }
    }

    /// Takes one event; after a storage failure the rest are ignored and the
    /// failure is reported by [`Streamer::finish`].
    pub(crate) fn push(&mut self, event: ProviderEvent) {
        if self.error.is_some() {
            return;
        }
        if let Err(e) = self.apply(event) {
            self.error = Some(e);
        }
    }

    /// Writes what is pending and returns what streamed.
    pub(crate) fn finish(mut self) -> Result<Streamed, MessageError> {
        if let Some(e) = self.error.take() {
            return Err(e);
        }
        self.close()?;
        Ok(Streamed {
            content: self.content,
            tools: self.tools,
            any: self.any,
        })
    }

    /// The tool parts created so far, for failing them when the call broke.
    pub(crate) fn finish_lenient(mut self) -> Vec<(String, ToolPart)> {
        if self.error.is_none() {
            let _ = self.close();
        }
        self.tools
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
                let stored = self.messages.append_part(self.message_id, part)?;
                if let Part::Tool(tool) = stored.part {
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
            start: now_ms(),
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
        let stored = self.messages.append_part(self.message_id, part.clone())?;
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
        let end = Some(now_ms());
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
        self.content.push((open.id, open.part));
        Ok(())
    }
}

/// A part change written inside a transaction, published after commit.
enum Change {
    Created(PartEvent),
    Updated(PartEvent),
    Deleted(PartEvent),
}

/// Squares what streamed with the final response (see the module doc), in one
/// transaction, then publishes the part events. Returns every tool part of the
/// message to run (streamed first, then added), in order.
pub(crate) fn reconcile(
    messages: &MessageService,
    message_id: &str,
    streamed: Streamed,
    response: &ProviderResponse,
) -> Result<Vec<(String, ToolPart)>, AgentError> {
    let (tools, changes) = write_tx(messages.database(), |tx| {
        let mut changes = Vec::new();
        let mut tools = streamed.tools.clone();
        let now = now_ms();
        let add = |part: &Part, changes: &mut Vec<Change>| -> Result<PartEvent, AgentError> {
            let event = MessageService::append_part_tx(tx, message_id, part)?;
            changes.push(Change::Created(event.clone()));
            Ok(event)
        };
        if !streamed.any {
            for part in &response.parts {
                match part {
                    Part::Text(_) | Part::Reasoning(_) => {
                        add(&with_time(part.clone(), now), &mut changes)?;
                    }
                    Part::Tool(call) => {
                        let event = add(&pending(call), &mut changes)?;
                        if let Part::Tool(tool) = event.part.part {
                            tools.push((event.part.id, tool));
                        }
                    }
                    _ => {}
                }
            }
            return Ok((tools, changes));
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
                    let event = MessageService::update_part_tx(tx, last_id, &part)?;
                    changes.push(Change::Updated(event));
                }
                (Some((first_id, first)), _) => {
                    let mut part = first.clone();
                    set_text(&mut part, &theirs);
                    let event = MessageService::update_part_tx(tx, first_id, &part)?;
                    changes.push(Change::Updated(event));
                    for (id, _) in ours.iter().skip(1) {
                        let event = MessageService::delete_part_tx(tx, id)?;
                        changes.push(Change::Deleted(event));
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
                    add(&with_time(part, now), &mut changes)?;
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
            let event = add(&pending(call), &mut changes)?;
            if let Part::Tool(tool) = event.part.part {
                tools.push((event.part.id, tool));
            }
        }
        Ok((tools, changes))
    })?;
    for change in changes {
        match change {
            Change::Created(event) => messages.parts().publish_created(event),
            Change::Updated(event) => messages.parts().publish_updated(event),
            Change::Deleted(event) => messages.parts().publish_deleted(event),
        };
    }
    Ok(tools)
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
