//! `scribe show --follow`: the conversation goes on printing as it is written, whichever
//! process writes it (an agent, a TUI, an import), until Ctrl-C or the session is deleted.
//!
//! What is printed is what `show` prints, a piece at a time, in order, and never taken
//! back: a message's head when it begins; a text part as it grows (a streamed reply
//! appears as it streams); any other part once it is whole. A part is whole when a later
//! part follows it or its message is settled, a tool call only once it has its result
//! (or failed), and a message is settled when it finished, ended in an error, is not an
//! assistant's, is followed by another message, or was not written to for [`QUIET`]
//! (an agent that stopped without finishing it). A part that changes after it was
//! printed is not printed again; a text that is rewritten rather than extended is.

use std::io::Write;
use std::time::Duration;

use scribe_message::{Cursor, Message, Part, Role};

use super::{TextOut, message_end, message_head, render_part};
use crate::context::Context;
use crate::error::CliError;
use crate::ui::{paint, style};

/// How often the database is asked whether anything was committed.
const POLL: Duration = Duration::from_millis(100);

/// An unfinished message nothing was written to for this long is shown whole: what it
/// holds is all it will hold.
const QUIET: Duration = Duration::from_secs(600);

/// What of a session has been printed, and what to print next.
#[derive(Debug)]
pub(super) struct Follow {
    session_id: String,
    /// Where the last message printed whole sits; `None` before the first.
    after: Option<Cursor>,
    /// The message printed part by part while it is written.
    open: Option<Open>,
}

/// A message whose head is printed and whose parts are printed as far as they are whole.
#[derive(Debug)]
struct Open {
    id: String,
    at: Cursor,
    /// How many of its parts are printed whole.
    parts: usize,
    /// The text part being written (its id), printed as far as it has come.
    text: Option<(String, TextOut)>,
}

impl Follow {
    /// Nothing of `session_id` printed yet.
    pub(super) fn new(session_id: &str) -> Self {
        Follow {
            session_id: session_id.to_owned(),
            after: None,
            open: None,
        }
    }

    /// Prints what of `m` is not printed yet; `is_last`: no later message of the session
    /// is known. Messages come in the session's order, each until it is settled.
    pub(super) fn show(
        &mut self,
        out: &mut impl Write,
        m: &Message,
        is_last: bool,
    ) -> Result<(), CliError> {
        let settled = !is_last
            || m.finished_at.is_some()
            || m.error.is_some()
            || m.role != Role::Assistant
            || quiet(m);
        let mut open = match self.open.take() {
            Some(open) if open.id == m.id => open,
            other => {
                if let Some(gone) = other {
                    gone.close(out, "ended")?;
                }
                message_head(out, m)?;
                Open {
                    id: m.id.clone(),
                    at: Cursor::of(m),
                    parts: 0,
                    text: None,
                }
            }
        };
        while let Some(stored) = m.parts.get(open.parts) {
            let whole = settled || open.parts + 1 < m.parts.len();
            match &stored.part {
                Part::Text(t) => {
                    if open.text.as_ref().is_some_and(|(id, _)| *id != stored.id)
                        && let Some((_, text)) = open.text.take()
                    {
                        text.end(out)?;
                    }
                    let (_, text) = open
                        .text
                        .get_or_insert_with(|| (stored.id.clone(), TextOut::default()));
                    if !text.grow(out, &t.text, t.synthetic)? {
                        // Not an extension of what is printed: end that, print it anew.
                        std::mem::take(text).end(out)?;
                        writeln!(
                            out,
                            "  {}",
                            paint(style::DIM, "(the text above was rewritten:)")
                        )?;
                        text.grow(out, &t.text, t.synthetic)?;
                    }
                    if !whole {
                        break;
                    }
                    if let Some((_, text)) = open.text.take() {
                        text.end(out)?;
                    }
                }
                Part::Tool(t) if !settled && !t.state.is_terminal() => break,
                // Written whole, last of a step.
                Part::Tool(_) | Part::StepFinish(_) => render_part(out, &stored.part)?,
                other if whole => render_part(out, other)?,
                _ => break,
            }
            open.parts += 1;
        }
        if settled {
            message_end(out, m)?;
            self.after = Some(open.at);
        } else {
            self.open = Some(open);
        }
        Ok(())
    }

    /// Prints, as [`show`](Self::show) does, everything of the session written since it
    /// last looked. `false`: the session is gone.
    fn refresh(&mut self, ctx: &Context, out: &mut impl Write) -> Result<bool, CliError> {
        let mut fresh = Vec::new();
        if let Some(open) = &self.open {
            match ctx.messages.get(&open.id) {
                Ok(m) => fresh.push(m),
                Err(err) if err.is_not_found() => {
                    if let Some(open) = self.open.take() {
                        self.after = Some(open.at.clone());
                        open.close(out, "deleted before it was finished")?;
                    }
                }
                Err(err) => return Err(err.into()),
            }
        }
        let from = self.open.as_ref().map(|o| &o.at).or(self.after.as_ref());
        let stream = match from {
            Some(at) => ctx.messages.stream_after(&self.session_id, at),
            None => ctx.messages.stream(&self.session_id),
        };
        let stream = match stream {
            Ok(stream) => stream,
            Err(err) if err.is_not_found() => return Ok(false),
            Err(err) => return Err(err.into()),
        };
        for m in stream {
            match m {
                Ok(m) => fresh.push(m),
                Err(err) if err.is_not_found() => return Ok(false),
                Err(err) => return Err(err.into()),
            }
        }
        let n = fresh.len();
        for (i, m) in fresh.iter().enumerate() {
            self.show(out, m, i + 1 == n)?;
        }
        Ok(true)
    }

    /// Waits for commits to the session and prints what they add, until the session is
    /// deleted (said on stderr; success) or the process is stopped.
    pub(super) fn run(mut self, ctx: &Context, out: &mut impl Write) -> Result<(), CliError> {
        // Watch first, then look once: a commit between the first read and the watch's
        // start is seen by that look.
        let mut watch = ctx.db.watch_changes()?;
        let mut alive = self.refresh(ctx, out)?;
        while alive {
            out.flush()?;
            let changes = loop {
                if let Some(changes) = watch.poll()? {
                    break changes;
                }
                std::thread::sleep(POLL);
            };
            if changes.touches(&self.session_id) {
                alive = self.refresh(ctx, out)?;
            }
        }
        if let Some(open) = self.open.take() {
            open.close(out, "its session was deleted")?;
        }
        out.flush()?;
        eprintln!("scribe: session {} was deleted", self.session_id);
        Ok(())
    }
}

impl Open {
    /// Ends the message's printing where it stands, saying why it stops there.
    fn close(self, out: &mut impl Write, why: &str) -> Result<(), CliError> {
        if let Some((_, text)) = self.text {
            text.end(out)?;
        }
        writeln!(out, "  {}", paint(style::DIM, format!("({why})")))?;
        Ok(())
    }
}

/// Whether nothing was written to `m` (its row or a part) for [`QUIET`].
fn quiet(m: &Message) -> bool {
    let last = m
        .parts
        .iter()
        .map(|p| p.updated_at)
        .fold(m.updated_at, i64::max);
    let quiet = i64::try_from(QUIET.as_millis()).unwrap_or(i64::MAX);
    scribe_db::now_ms().saturating_sub(last) >= quiet
}
