//! `scribe show`: one conversation rendered for a terminal.

use std::collections::HashMap;
use std::io::Write;

use clap::Args;
use scribe_message::{CLEARED_TOOL_OUTPUT, Message, Part, Role, ToolState, summary_compaction};
use scribe_session::{
    ExportSelection, ParentFilter, Session, SessionFilter, SessionKind, SessionOrder,
};

use crate::context::Context;
use crate::error::CliError;
use crate::json;
use crate::ui::{self, paint, style};

mod follow;

/// Characters of a tool call's input shown.
const TOOL_INPUT_CHARS: usize = 100;
/// Lines of a tool's output shown.
const TOOL_OUTPUT_LINES: usize = 6;
/// Characters of one output line shown.
const TOOL_LINE_CHARS: usize = 160;
/// Characters of folded reasoning shown.
const REASONING_CHARS: usize = 100;
/// Lines shown of text the agent added rather than the user or the model wrote (an
/// attached file, a command's output, the environment details Cline appends to every
/// message); the rest are counted.
const ADDED_TEXT_LINES: usize = 6;

/// Show a session's conversation.
///
/// Prints each message with its role and time: text in full (text the agent added, such as
/// an attached file or a command's output, dimmed and cut to its first lines), reasoning
/// folded to one line,
/// tool calls with their state and the start of their output, attachments, sub-agent tasks,
/// and compaction markers and summaries flagged. Compaction is made visible: outputs it
/// cleared say so, each summary says what it stands for, and a line marks where what the
/// model is sent next begins.
#[derive(Debug, Args)]
pub struct ShowCmd {
    /// The session: an id, a unique id prefix, or a title (the newest of `t`, `t #2` …);
    /// without it, the most recently active conversation (the first of `scribe list
    /// --sort active`).
    pub session: Option<String>,
    /// Show only the last N messages (what the agent did last), after a line saying how
    /// many were left out before them.
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(1..))]
    pub last: Option<u32>,
    /// Print the session's full export (session, messages, parts, files) as JSON.
    #[arg(long, conflicts_with = "last")]
    pub json: bool,
    /// Keep printing the conversation as it is written, by whichever process writes it
    /// (a reply as it streams, a tool call once it has its result), until Ctrl-C or the
    /// session is deleted.
    #[arg(short, long, conflicts_with = "json")]
    pub follow: bool,
}

impl ShowCmd {
    /// Runs the command.
    pub fn run(self, ctx: &Context) -> Result<(), CliError> {
        let session = match &self.session {
            Some(wanted) => ctx.resolve(wanted)?,
            None => most_recently_active(ctx)?,
        };
        let mut out = anstream::stdout().lock();
        if self.json {
            let export = ctx
                .sessions
                .export(&ExportSelection::One(session.id.clone()))?;
            return match export.first() {
                Some(one) => json::print(&mut out, one),
                None => Err(CliError::NoSuchSession(session.id)),
            };
        }
        let began = if session.title.is_none() {
            scribe_server::previews(&ctx.db, &[session.id.as_str()])?.remove(&session.id)
        } else {
            None
        };
        header(&mut out, &session, began.as_deref())?;
        // An ended conversation may go on in a compaction continuation: say where.
        let tip = ctx.sessions.continuation_tip(&session.id)?;
        if tip.id != session.id {
            let title = tip
                .title
                .as_deref()
                .map(|t| format!(" ({t})"))
                .unwrap_or_default();
            writeln!(
                out,
                "{}",
                paint(
                    style::MARK,
                    format!("continued in {}{title}: scribe show {}", tip.id, tip.id)
                )
            )?;
        }
        let children = ctx.sessions.children(&session.id)?;
        sub_sessions(&mut out, &children)?;
        let marks = compaction_marks(ctx, &session, &children)?;
        // With --last, the newest N, read a page at a time from the end.
        let mut shows_first = true;
        let messages: Box<dyn Iterator<Item = Result<Message, CliError>>> = match self.last {
            None => Box::new(
                ctx.messages
                    .stream(&session.id)?
                    .map(|m| m.map_err(CliError::from)),
            ),
            Some(n) => {
                let (last, earlier) = last_messages(ctx, &session.id, n as usize)?;
                if earlier {
                    shows_first = false;
                    writeln!(out)?;
                    writeln!(
                        out,
                        "{}",
                        paint(
                            style::DIM,
                            format!(
                                "… {} left out (scribe show {} shows them all)",
                                ui::plural(
                                    session.message_count.saturating_sub(
                                        i64::try_from(last.len()).unwrap_or(i64::MAX)
                                    ),
                                    "earlier message"
                                ),
                                session.id
                            )
                        )
                    )?;
                }
                Box::new(last.into_iter().map(Ok))
            }
        };
        // The mark before a session's first message goes before it only when it is shown.
        let mut first = shows_first;
        // Following, each message is printed as far as it is written (see `follow`).
        let mut follow = self.follow.then(|| follow::Follow::new(&session.id));
        let mut messages = messages.peekable();
        while let Some(message) = messages.next() {
            let message = message?;
            let mark = marks
                .get(&message.id)
                .or_else(|| marks.get("").filter(|_| first));
            first = false;
            if let Some(mark) = mark {
                writeln!(out)?;
                writeln!(out, "{}", paint(style::MARK, mark))?;
            }
            match &mut follow {
                Some(follow) => follow.show(&mut out, &message, messages.peek().is_none())?,
                None => render(&mut out, &message)?,
            }
        }
        match follow {
            Some(follow) => follow.run(ctx, &mut out),
            None => Ok(()),
        }
    }
}

/// The conversation `scribe list --sort active` lists first: a session that is neither
/// archived nor a sub-session, by its last activity.
fn most_recently_active(ctx: &Context) -> Result<Session, CliError> {
    let filter = SessionFilter {
        parent: ParentFilter::Conversations,
        archived: Some(false),
        order: SessionOrder::UpdatedDesc,
        limit: Some(1),
        ..SessionFilter::default()
    };
    ctx.sessions
        .list(&filter)?
        .into_iter()
        .next()
        .ok_or(CliError::NoConversation)
}

/// The lines printed before some messages, by message id (`""`: before the first one):
/// where what the model is sent next begins (by the session's latest summary), and, in a
/// session compacted into a continuation, where the messages the continuation still sends
/// begin.
fn compaction_marks(
    ctx: &Context,
    session: &Session,
    children: &[Session],
) -> Result<HashMap<String, String>, CliError> {
    let mut marks = HashMap::new();
    if let Some(id) = &session.summary_message_id {
        let summary = ctx.messages.get(id)?;
        let part = summary_compaction(&summary);
        let keep_from = part
            .and_then(|p| p.keep_from.clone())
            .filter(|from| from != id);
        if part.is_some_and(|p| p.keeps_words) {
            let line = "── the model is sent every word from here on (tool outputs before the summary cleared), the summary where it stands ──";
            // No start: the session's first message.
            marks.insert(keep_from.unwrap_or_default(), line.to_owned());
        } else {
            match keep_from {
                Some(from) if in_session(ctx, &from, &session.id)? => {
                    marks.insert(
                        from,
                        format!("── the model is sent summary {id} first, then the messages from here on ──"),
                    );
                }
                _ => {
                    marks.insert(
                        id.clone(),
                        "── the model is sent the conversation from this summary on ──".to_owned(),
                    );
                }
            }
        }
    }
    // Ended by compaction: the continuation may still send this session's last messages.
    for child in children {
        if child.kind != SessionKind::Continuation {
            continue;
        }
        let Some(id) = &child.summary_message_id else {
            continue;
        };
        let summary = ctx.messages.get(id)?;
        if let Some(from) = summary_compaction(&summary).and_then(|p| p.keep_from.clone())
            && in_session(ctx, &from, &session.id)?
        {
            marks.entry(from).or_insert_with(|| {
                format!(
                    "── from here on also sent after the summary of continuation {}: scribe show {} ──",
                    child.id, child.id
                )
            });
        }
    }
    Ok(marks)
}

/// Sub-sessions `show` names under the header; the rest are counted.
const SUB_SESSIONS_SHOWN: usize = 20;

/// The session's sub-sessions other than its continuation (sub-agents, forks, title
/// calls, an agent's auxiliary calls), a line each: id, title, kind, model, messages and
/// cost, as the web page lists them.
fn sub_sessions(out: &mut impl Write, children: &[Session]) -> Result<(), CliError> {
    let others: Vec<&Session> = children
        .iter()
        .filter(|c| c.kind != SessionKind::Continuation)
        .collect();
    if others.is_empty() {
        return Ok(());
    }
    let head = format!(
        "{} (sub-agents, forks, titles):",
        ui::plural(
            i64::try_from(others.len()).unwrap_or(i64::MAX),
            "sub-session"
        )
    );
    writeln!(out, "{}", paint(style::DIM, head))?;
    for c in others.iter().take(SUB_SESSIONS_SHOWN) {
        let mut facts = vec![c.id.clone()];
        facts.extend(c.title.clone());
        facts.push(c.kind.to_string());
        facts.extend(c.model.clone());
        facts.push(ui::plural(c.message_count, "message"));
        facts.push(ui::session_cost_text(c));
        writeln!(
            out,
            "  {}",
            paint(style::DIM, ui::visible(&facts.join(" · ")))
        )?;
    }
    if others.len() > SUB_SESSIONS_SHOWN {
        let more = format!(
            "  … and {} more: scribe list --all",
            others.len() - SUB_SESSIONS_SHOWN
        );
        writeln!(out, "{}", paint(style::DIM, more))?;
    }
    Ok(())
}

/// The last `n` messages of `session_id`, oldest first, and whether earlier ones exist.
fn last_messages(
    ctx: &Context,
    session_id: &str,
    n: usize,
) -> Result<(Vec<Message>, bool), CliError> {
    let mut newest_first: Vec<Message> = Vec::new();
    let mut before = None;
    loop {
        let want = n - newest_first.len();
        let page = ctx.messages.page(
            session_id,
            want.min(scribe_message::MAX_PAGE),
            before.as_ref(),
        )?;
        newest_first.extend(page.messages);
        if newest_first.len() >= n || !page.more {
            newest_first.reverse();
            return Ok((newest_first, page.more));
        }
        before = page.next;
    }
}

/// Whether message `id` exists in session `session_id`.
fn in_session(ctx: &Context, id: &str, session_id: &str) -> Result<bool, CliError> {
    match ctx.messages.get(id) {
        Ok(m) => Ok(m.session_id == session_id),
        Err(e) if e.is_not_found() => Ok(false),
        Err(e) => Err(e.into()),
    }
}

/// The session's name (an untitled one's by how it `began`), then its facts.
fn header(out: &mut impl Write, s: &Session, began: Option<&str>) -> Result<(), CliError> {
    let title = ui::session_name(s.title.as_deref(), began);
    writeln!(out, "{}", paint(style::HEADER, title))?;
    let mut facts = vec![s.id.clone(), s.kind.to_string(), s.source.clone()];
    facts.extend(s.model.clone());
    facts.push(format!("started {}", ui::date_time(s.created_at)));
    if let Some(parent) = &s.parent_session_id {
        facts.push(format!("from {parent}"));
    }
    if s.is_archived() {
        facts.push("archived".to_owned());
    }
    if let Some(reason) = &s.end_reason {
        facts.push(format!("ended: {reason}"));
    }
    writeln!(
        out,
        "{}",
        paint(style::DIM, ui::visible(&facts.join(" · ")))
    )?;
    let t = &s.tokens;
    let usage = if s.usage_recorded() && !s.tokens_recorded() {
        format!(
            "{} · {}",
            ui::NO_TOKENS,
            ui::cost_text(s.estimated_cost_usd, s.cost_is_partial())
        )
    } else if s.usage_recorded() {
        format!(
            "{} tokens (in {}, out {}, cache read {}, cache write {}, reasoning {}) · {}",
            ui::grouped(t.total()),
            ui::grouped(t.input),
            ui::grouped(t.output),
            ui::grouped(t.cache_read),
            ui::grouped(t.cache_write),
            ui::grouped(t.reasoning),
            ui::cost_text(s.estimated_cost_usd, s.cost_is_partial())
        )
    } else {
        ui::NO_USAGE.to_owned()
    };
    writeln!(
        out,
        "{}",
        paint(
            style::DIM,
            format!(
                "{} · {} · {usage}",
                ui::plural(s.message_count, "message"),
                ui::plural(s.tool_call_count, "tool call"),
            )
        )
    )?;
    Ok(())
}

fn role_label(role: Role) -> String {
    let s = match role {
        Role::User => style::USER,
        Role::Assistant => style::ASSISTANT,
        Role::System | Role::Tool => style::OTHER_ROLE,
    };
    paint(s, role.as_str())
}

fn render(out: &mut impl Write, m: &Message) -> Result<(), CliError> {
    message_head(out, m)?;
    for stored in &m.parts {
        render_part(out, &stored.part)?;
    }
    message_end(out, m)
}

/// A message's first line (role, time, model, what a summary stands for, id), after a
/// blank line.
fn message_head(out: &mut impl Write, m: &Message) -> Result<(), CliError> {
    writeln!(out)?;
    let mut line = format!("{} {}", role_label(m.role), ui::date_time(m.created_at));
    if let Some(model) = &m.model {
        line.push_str(&format!(" · {}", ui::visible(model)));
    }
    if m.is_summary {
        let what = match summary_compaction(m) {
            Some(p) if p.keeps_words => {
                "[summary of the conversation so far, added beside its words]".to_owned()
            }
            Some(p) => match &p.keep_from {
                Some(from) => {
                    format!("[summary of the conversation before {from}, which is sent after it]")
                }
                None => "[summary of the conversation so far]".to_owned(),
            },
            None => "[summary of the conversation so far]".to_owned(),
        };
        line.push_str(&format!(" {}", paint(style::MARK, what)));
    }
    writeln!(out, "{line}  {}", paint(style::DIM, &m.id))?;
    Ok(())
}

/// What follows a message's parts: the error that ended it, if any.
fn message_end(out: &mut impl Write, m: &Message) -> Result<(), CliError> {
    if let Some(error) = &m.error {
        writeln!(out, "  {}", paint(style::ERROR, error_line(error)))?;
    }
    Ok(())
}

/// A message's error on one line ([`scribe_server::text::error_line`]), control
/// characters made visible.
fn error_line(error: &serde_json::Value) -> String {
    scribe_server::text::error_line(error, ui::visible)
}

/// A text part as `show` prints it (without its trailing whitespace, two spaces before
/// each line, dim when the agent wrote it, not the model or the user), written a piece at
/// a time as the text grows (`--follow`) or at once.
#[derive(Debug)]
struct TextOut {
    /// The text printed so far.
    shown: String,
    /// Whether the next character printed starts a line.
    line_start: bool,
}

impl Default for TextOut {
    fn default() -> Self {
        TextOut {
            shown: String::new(),
            line_start: true,
        }
    }
}

impl TextOut {
    /// Prints what `text` adds to what is printed. `false` (nothing printed): `text` does
    /// not go on from it (it was rewritten).
    fn grow(
        &mut self,
        out: &mut impl Write,
        text: &str,
        synthetic: bool,
    ) -> Result<bool, CliError> {
        let text = text.trim_end();
        let Some(new) = text.strip_prefix(self.shown.as_str()) else {
            return Ok(false);
        };
        if new.is_empty() {
            return Ok(true);
        }
        let mut piece = String::with_capacity(new.len() + 8);
        for c in ui::visible(new).chars() {
            if self.line_start {
                piece.push_str("  ");
                self.line_start = false;
            }
            piece.push(c);
            self.line_start = c == '\n';
        }
        if synthetic {
            write!(out, "{}", paint(style::DIM, piece))?;
        } else {
            out.write_all(piece.as_bytes())?;
        }
        self.shown.push_str(new);
        Ok(true)
    }

    /// Ends the text's last line (an empty text prints as an empty line).
    fn end(self, out: &mut impl Write) -> Result<(), CliError> {
        if !self.line_start || self.shown.is_empty() {
            writeln!(out)?;
        }
        Ok(())
    }
}

fn render_part(out: &mut impl Write, part: &Part) -> Result<(), CliError> {
    match part {
        Part::Text(t) if t.synthetic => write_added_text(out, &t.text)?,
        Part::Text(t) => {
            let mut text = TextOut::default();
            text.grow(out, &t.text, false)?;
            text.end(out)?;
        }
        Part::Reasoning(r) => writeln!(
            out,
            "  {}",
            paint(
                style::DIM,
                format!(
                    "thinking: {}",
                    ui::one_line(
                        scribe_server::text::reasoning_text(&r.text),
                        REASONING_CHARS
                    )
                )
            )
        )?,
        Part::Tool(t) => {
            let input = ui::one_line(&t.input.to_string(), TOOL_INPUT_CHARS);
            let state = match &t.state {
                ToolState::Error { .. } => paint(style::ERROR, t.state.status()),
                other => other.status().to_owned(),
            };
            writeln!(
                out,
                "  {} {}",
                paint(style::TOOL, format!("⚙ {}({input})", ui::visible(&t.tool))),
                format_args!("[{state}]")
            )?;
            let shown = t.state.output().or(t.state.error_message());
            if let Some(text) = shown {
                if let Some(at) = t.compacted_at {
                    let lines = text.lines().count();
                    writeln!(
                        out,
                        "    {}",
                        paint(
                            style::MARK,
                            format!(
                                "⌫ output cleared by compaction {}: the model is sent \"{CLEARED_TOOL_OUTPUT}\" ({} still stored, --json shows it)",
                                ui::date_time(at),
                                ui::plural(lines as i64, "line")
                            )
                        )
                    )?;
                } else {
                    write_cut_output(out, text)?;
                }
            }
        }
        Part::File(f) => writeln!(
            out,
            "  {}",
            paint(
                style::TOOL,
                ui::visible(&format!(
                    "📎 {} ({})",
                    f.filename.as_deref().unwrap_or("attachment"),
                    f.mime
                ))
            )
        )?,
        Part::ImageUrl(i) => writeln!(
            out,
            "  {}",
            paint(style::TOOL, format!("🖼 {}", ui::visible(&i.url)))
        )?,
        Part::Compaction(c) => writeln!(
            out,
            "  {}",
            paint(
                style::MARK,
                if c.auto {
                    "── conversation compacted (automatic) ──"
                } else {
                    "── conversation compacted ──"
                }
            )
        )?,
        Part::Patch(p) => writeln!(
            out,
            "  {}",
            paint(
                style::DIM,
                ui::visible(&format!("patch {} · {}", p.hash, p.files.join(", ")))
            )
        )?,
        Part::Agent(a) => writeln!(
            out,
            "  {}",
            paint(style::DIM, format!("agent: {}", ui::visible(&a.name)))
        )?,
        Part::Subtask(s) => writeln!(
            out,
            "  {}",
            paint(
                style::TOOL,
                format!(
                    "↳ sub-agent task ({}): {}",
                    ui::visible(&s.agent),
                    ui::one_line(&s.description, 100)
                )
            )
        )?,
        Part::StepFinish(s) => writeln!(
            out,
            "  {}",
            paint(
                style::DIM,
                format!(
                    "step: {} tokens · {} · {}",
                    ui::grouped(s.tokens.total()),
                    ui::dollars(s.cost),
                    s.reason.as_str()
                )
            )
        )?,
        Part::StepStart(_) | Part::Finish(_) => {}
        Part::Unknown(value) => {
            let kind = value.get("type").and_then(|t| t.as_str()).unwrap_or("?");
            writeln!(
                out,
                "  {}",
                paint(style::DIM, format!("[{} part]", ui::visible(kind)))
            )?;
        }
    }
    Ok(())
}

/// Text the agent added: dimmed, its first [`ADDED_TEXT_LINES`] lines and how many more.
fn write_added_text(out: &mut impl Write, text: &str) -> Result<(), CliError> {
    let lines: Vec<&str> = text.trim_end().lines().collect();
    let mut shown = TextOut::default();
    if lines.len() <= ADDED_TEXT_LINES {
        shown.grow(out, text, true)?;
        return shown.end(out);
    }
    shown.grow(out, &lines[..ADDED_TEXT_LINES].join("\n"), true)?;
    shown.end(out)?;
    writeln!(
        out,
        "  {}",
        paint(
            style::DIM,
            format!("… {} more lines", lines.len() - ADDED_TEXT_LINES)
        )
    )?;
    Ok(())
}

fn write_cut_output(out: &mut impl Write, text: &str) -> Result<(), CliError> {
    let lines: Vec<&str> = text.lines().collect();
    for line in lines.iter().take(TOOL_OUTPUT_LINES) {
        writeln!(
            out,
            "    {}",
            paint(style::DIM, ui::cut(line, TOOL_LINE_CHARS))
        )?;
    }
    if lines.len() > TOOL_OUTPUT_LINES {
        writeln!(
            out,
            "    {}",
            paint(
                style::DIM,
                format!("… {} more lines", lines.len() - TOOL_OUTPUT_LINES)
            )
        )?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::error_line;
    use serde_json::json;

    #[test]
    fn an_error_reads_as_its_message_and_type() {
        let rewound = json!({"type": "rewound", "message": "undone by a rewind in Gemini CLI"});
        assert_eq!(
            error_line(&rewound),
            "error (rewound): undone by a rewind in Gemini CLI"
        );
        assert_eq!(error_line(&json!({"message": "boom"})), "error: boom");
        // A reply the user stopped says so, with no empty message after it.
        assert_eq!(
            error_line(&json!({"type": "cancelled", "message": ""})),
            "error (cancelled)"
        );
        assert_eq!(
            error_line(&json!({"message": "a\u{1b}[2J"})),
            "error: a\u{241b}[2J"
        );
        assert_eq!(error_line(&json!({"code": 7})), "error: {\"code\":7}");
    }
}
