//! Persists a streamed model response as it arrives: consecutive text deltas
//! grow ONE text part (written at most every flush interval, and once more
//! when it closes), reasoning likewise, and each tool call becomes a `pending`
//! tool part at once — so a crash mid-answer leaves what had arrived.

use std::time::{Duration, Instant};

use scribe_db::now_ms;
use scribe_message::{
    MessageError, MessageService, Part, PartTime, ReasoningPart, TextPart, ToolPart,
};

use crate::provider::ProviderEvent;

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
    error: Option<MessageError>,
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

    /// Writes what is pending and returns the tool parts created (part id, part).
    pub(crate) fn finish(mut self) -> Result<Vec<(String, ToolPart)>, MessageError> {
        if let Some(e) = self.error.take() {
            return Err(e);
        }
        self.close()?;
        Ok(self.tools)
    }

    /// The tool parts created so far, for failing them when the call broke.
    pub(crate) fn finish_lenient(mut self) -> Vec<(String, ToolPart)> {
        if self.error.is_none() {
            let _ = self.close();
        }
        self.tools
    }

    fn apply(&mut self, event: ProviderEvent) -> Result<(), MessageError> {
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
        self.messages.update_part(&open.id, open.part)?;
        Ok(())
    }
}
