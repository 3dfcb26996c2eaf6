//! `scribe show --follow`: the conversation goes on printing as it is written, whichever
//! process writes it (an agent, a TUI, an import), until Ctrl-C or the session is deleted.
//!
//! What is printed is what `show` prints, a piece at a time, in order, and never taken
//! back: a message's head when it begins; a text part as it grows (a streamed reply
//! appears as it streams); any other part once it is whole. A part is whole when a later
//! part follows it or its message is settled, a tool call only once it has its result
//! (or failed). A message is settled when another message follows it, when nothing was
//! written to it for [`QUIET`] (an agent that stopped without finishing it: by the times
//! it holds and, once following, by the follower's clock too, since an import stores the
//! agent's times), or when it ended (finished, failed, or is not an assistant's) with
//! every tool call's result in.
//! When compaction carries the conversation on into a continuation session, a line says
//! so and the continuation is followed from its first message.
//! Parts added to the message printed last go on printing where it stopped (an import
//! stores Claude Code's reply a line, a part, at a time). A part that changes after it
//! was printed is not printed again; a text that is rewritten rather than extended is.

use std::io::Write;
use std::time::{Duration, Instant};

use scribe_message::{Cursor, Message, Part, Role, StoredPart};

use super::{TextOut, message_end, message_head, render_part};
use crate::context::Context;
use crate::error::CliError;
use crate::ui::{self, paint, style};

/// How often the database is asked whether anything was committed.
const POLL: Duration = Duration::from_millis(100);

/// An unfinished message nothing was written to for this long is shown whole: what it
/// holds is all it will hold.
const QUIET: Duration = Duration::from_secs(600);

/// Replaces [`QUIET`] (milliseconds); for troubleshooting and tests.
const QUIET_VAR: &str = "SCRIBE_FOLLOW_QUIET_MS";

/// What of a session has been printed, and what to print next.
#[derive(Debug)]
pub(super) struct Follow {
    session_id: String,
    /// The last message printed whole (`None` before the first): where the session goes
    /// on, and what is printed of it should parts still be added to it.
    last: Option<Open>,
    /// The message printed part by part while it is written.
    open: Option<Open>,
    /// Whether the first printing is over and the session is being followed.
    following: bool,
    /// [`QUIET`], or what [`QUIET_VAR`] says.
    quiet: Duration,
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
    /// Whether what follows its parts (its error) is printed.
    ended: bool,
    /// The newest time stored in the message or its parts, when last looked at.
    stamp: i64,
    /// When the follower last saw that time move (or first saw the message).
    changed: Instant,
}

impl Follow {
    /// Nothing of `session_id` printed yet.
    pub(super) fn new(session_id: &str) -> Self {
        Follow {
            session_id: session_id.to_owned(),
            last: None,
            open: None,
            following: false,
            quiet: std::env::var(QUIET_VAR)
                .ok()
                .and_then(|ms| ms.parse().ok())
                .map_or(QUIET, Duration::from_millis),
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
        let stamp = last_write(m);
        let mut open = match self.open.take() {
            Some(open) if open.id == m.id => open,
            other => {
                if let Some(mut gone) = other {
                    gone.close(out, "ended")?;
                }
                message_head(out, m)?;
                Open {
                    id: m.id.clone(),
                    at: Cursor::of(m),
                    parts: 0,
                    text: None,
                    ended: false,
                    stamp,
                    changed: Instant::now(),
                }
            }
        };
        if open.stamp != stamp {
            open.stamp = stamp;
            open.changed = Instant::now();
        }
        // Quiet by its stored times (an import stores the agent's, maybe long past), and,
        // once following, for as long here as well.
        let quiet_ms = i64::try_from(self.quiet.as_millis()).unwrap_or(i64::MAX);
        let quiet = scribe_db::now_ms().saturating_sub(stamp) >= quiet_ms
            && (!self.following || open.changed.elapsed() >= self.quiet);
        let ended = m.finished_at.is_some() || m.error.is_some() || m.role != Role::Assistant;
        let settled = !is_last || quiet || (ended && !m.parts.iter().any(awaits_result));
        while let Some(stored) = m.parts.get(open.parts) {
            let whole = settled || open.parts + 1 < m.parts.len();
            match &stored.part {
                // Text the agent added is written whole and printed cut, as `show` does.
                Part::Text(t) if t.synthetic && !whole => break,
                Part::Text(t) if t.synthetic => render_part(out, &stored.part)?,
                Part::Text(t) => {
                    if open.text.as_ref().is_some_and(|(id, _)| *id != stored.id)
                        && let Some((_, text)) = open.text.take()
                    {
                        text.end(out)?;
                    }
                    let (_, text) = open
                        .text
                        .get_or_insert_with(|| (stored.id.clone(), TextOut::default()));
                    if !text.grow(out, &t.text, false)? {
                        // Not an extension of what is printed: end that, print it anew.
                        std::mem::take(text).end(out)?;
                        writeln!(
                            out,
                            "  {}",
                            paint(style::DIM, "(the text above was rewritten:)")
                        )?;
                        text.grow(out, &t.text, false)?;
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
            if !open.ended {
                message_end(out, m)?;
                open.ended = true;
            }
            self.last = Some(open);
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
                    if let Some(mut open) = self.open.take() {
                        open.close(out, "deleted before it was finished")?;
                        self.last = Some(open);
                    }
                }
                Err(err) => return Err(err.into()),
            }
        } else if let Some(last) = &self.last {
            // A message can gain parts after it looked whole: an importer stores each
            // line of Claude Code's file as it comes, and a reply's text and its tool
            // calls are lines of their own. Until another message is printed, its new
            // parts go on where its printing stopped.
            match ctx.messages.get(&last.id) {
                Ok(m) if m.parts.len() > last.parts => {
                    self.open = self.last.take();
                    fresh.push(m);
                }
                Ok(_) => {}
                Err(err) if err.is_not_found() => {}
                Err(err) => return Err(err.into()),
            }
        }
        let from = self.open.as_ref().or(self.last.as_ref()).map(|o| &o.at);
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

    /// Prints what is new (as [`refresh`](Self::refresh) does) and, when compaction carried
    /// the conversation on into a continuation session, says so and goes on there, from
    /// its first message. `false`: the session is gone.
    fn look(&mut self, ctx: &Context, out: &mut impl Write) -> Result<bool, CliError> {
        loop {
            if !self.refresh(ctx, out)? {
                return Ok(false);
            }
            let tip = match ctx.sessions.continuation_tip(&self.session_id) {
                Ok(tip) => tip,
                Err(scribe_session::SessionError::NotFound { .. }) => return Ok(false),
                Err(err) => return Err(err.into()),
            };
            if tip.id == self.session_id {
                return Ok(true);
            }
            if let Some(mut open) = self.open.take() {
                open.close(out, "the conversation went on in a continuation")?;
            }
            let title = tip
                .title
                .as_deref()
                .map(|t| format!(" ({})", ui::visible(t)))
                .unwrap_or_default();
            writeln!(out)?;
            writeln!(
                out,
                "{}",
                paint(
                    style::MARK,
                    format!(
                        "── continued in {}{title}, after compaction: following it ──",
                        tip.id
                    )
                )
            )?;
            self.session_id = tip.id;
            self.last = None;
        }
    }

    /// Waits for commits to the session and prints what they add, until the session is
    /// deleted (said on stderr; success) or the process is stopped.
    pub(super) fn run(mut self, ctx: &Context, out: &mut impl Write) -> Result<(), CliError> {
        // Watch first, then look once: a commit between the first read and the watch's
        // start is seen by that look.
        let mut watch = ctx.db.watch_changes()?;
        self.following = true;
        let mut alive = self.look(ctx, out)?;
        let mut looked = Instant::now();
        while alive {
            out.flush()?;
            let look = loop {
                if let Some(changes) = watch.poll()? {
                    break changes.touches(&self.session_id);
                }
                // A message held open (its writer may have stopped) is looked at again
                // without a commit, 20 times a quiet span, so that it shows whole once
                // quiet.
                if self.open.is_some() && looked.elapsed() >= self.quiet / 20 {
                    break true;
                }
                std::thread::sleep(POLL);
            };
            if look {
                alive = self.look(ctx, out)?;
                looked = Instant::now();
            }
        }
        if let Some(mut open) = self.open.take() {
            open.close(out, "its session was deleted")?;
        }
        out.flush()?;
        eprintln!("scribe: session {} was deleted", self.session_id);
        Ok(())
    }
}

impl Open {
    /// Ends the message's printing where it stands, saying why it stops there.
    fn close(&mut self, out: &mut impl Write, why: &str) -> Result<(), CliError> {
        if let Some((_, text)) = self.text.take() {
            text.end(out)?;
        }
        self.ended = true;
        writeln!(out, "  {}", paint(style::DIM, format!("({why})")))?;
        Ok(())
    }
}

/// Whether `part` is a tool call without its result yet. A message can end before its
/// calls have their results: an importer stores Claude Code's reply when the model
/// ends it, and each result when the next line of the file brings it.
fn awaits_result(part: &StoredPart) -> bool {
    matches!(&part.part, Part::Tool(t) if !t.state.is_terminal())
}

/// The newest time stored in `m`'s row or its parts.
fn last_write(m: &Message) -> i64 {
    m.parts
        .iter()
        .map(|p| p.updated_at)
        .fold(m.updated_at, i64::max)
}
