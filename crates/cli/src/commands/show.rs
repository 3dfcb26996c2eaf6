//! `scribe show`: one conversation rendered for a terminal.

use std::io::Write;

use clap::Args;
use scribe_message::{Message, Part, Role, ToolState};
use scribe_session::{ExportSelection, Session};

use crate::context::Context;
use crate::error::CliError;
use crate::json;
use crate::ui::{self, paint, style};

/// Characters of a tool call's input shown.
const TOOL_INPUT_CHARS: usize = 100;
/// Lines of a tool's output shown.
const TOOL_OUTPUT_LINES: usize = 6;
/// Characters of one output line shown.
const TOOL_LINE_CHARS: usize = 160;
/// Characters of folded reasoning shown.
const REASONING_CHARS: usize = 100;

/// Show a session's conversation.
///
/// Prints each message with its role and time: text in full, reasoning folded to one line,
/// tool calls with their state and the start of their output, attachments, sub-agent tasks,
/// and compaction markers and summaries flagged.
#[derive(Debug, Args)]
pub struct ShowCmd {
    /// The session: an id, a unique id prefix, or a title (the newest of `t`, `t #2` …).
    pub session: String,
    /// Print the session's full export (session, messages, parts, files) as JSON.
    #[arg(long)]
    pub json: bool,
}

impl ShowCmd {
    /// Runs the command.
    pub fn run(self, ctx: &Context) -> Result<(), CliError> {
        let session = ctx.resolve(&self.session)?;
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
        header(&mut out, &session)?;
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
        for message in ctx.messages.stream(&session.id)? {
            render(&mut out, &message?)?;
        }
        Ok(())
    }
}

fn header(out: &mut impl Write, s: &Session) -> Result<(), CliError> {
    let title = s.title.as_deref().unwrap_or("(untitled)");
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
    writeln!(out, "{}", paint(style::DIM, facts.join(" · ")))?;
    let t = &s.tokens;
    writeln!(
        out,
        "{}",
        paint(
            style::DIM,
            format!(
                "{} messages · {} tool calls · {} tokens (in {}, out {}, cache read {}, cache write {}, reasoning {}) · {}",
                s.message_count,
                s.tool_call_count,
                ui::grouped(t.total()),
                ui::grouped(t.input),
                ui::grouped(t.output),
                ui::grouped(t.cache_read),
                ui::grouped(t.cache_write),
                ui::grouped(t.reasoning),
                ui::dollars(s.estimated_cost_usd)
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
    writeln!(out)?;
    let mut line = format!("{} {}", role_label(m.role), ui::date_time(m.created_at));
    if let Some(model) = &m.model {
        line.push_str(&format!(" · {model}"));
    }
    if m.is_summary {
        line.push_str(&format!(
            " {}",
            paint(style::MARK, "[summary of the conversation so far]")
        ));
    }
    writeln!(out, "{line}  {}", paint(style::DIM, &m.id))?;
    for stored in &m.parts {
        render_part(out, &stored.part)?;
    }
    if let Some(error) = &m.error {
        writeln!(out, "  {}", paint(style::ERROR, format!("error: {error}")))?;
    }
    Ok(())
}

fn indent(text: &str) -> String {
    text.lines()
        .map(|l| format!("  {l}"))
        .collect::<Vec<_>>()
        .join("\n")
}

fn render_part(out: &mut impl Write, part: &Part) -> Result<(), CliError> {
    match part {
        Part::Text(t) => {
            let text = indent(t.text.trim_end());
            if t.synthetic {
                writeln!(out, "{}", paint(style::DIM, text))?;
            } else {
                writeln!(out, "{text}")?;
            }
        }
        Part::Reasoning(r) => writeln!(
            out,
            "  {}",
            paint(
                style::DIM,
                format!("thinking: {}", ui::one_line(&r.text, REASONING_CHARS))
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
                paint(style::TOOL, format!("⚙ {}({input})", t.tool)),
                format_args!("[{state}]")
            )?;
            let shown = t.state.output().or(t.state.error_message());
            if let Some(text) = shown {
                if t.compacted_at.is_some() {
                    writeln!(
                        out,
                        "    {}",
                        paint(style::DIM, "(output cleared by compaction)")
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
                format!(
                    "📎 {} ({})",
                    f.filename.as_deref().unwrap_or("attachment"),
                    f.mime
                )
            )
        )?,
        Part::ImageUrl(i) => writeln!(out, "  {}", paint(style::TOOL, format!("🖼 {}", i.url)))?,
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
                format!("patch {} · {}", p.hash, p.files.join(", "))
            )
        )?,
        Part::Agent(a) => writeln!(out, "  {}", paint(style::DIM, format!("agent: {}", a.name)))?,
        Part::Subtask(s) => writeln!(
            out,
            "  {}",
            paint(
                style::TOOL,
                format!(
                    "↳ sub-agent task ({}): {}",
                    s.agent,
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
            writeln!(out, "  {}", paint(style::DIM, format!("[{kind} part]")))?;
        }
    }
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
