//! A conversation as Markdown: what `scribe export --format markdown` writes and the web
//! page's "Download Markdown" serves (`GET /api/sessions/{id}/markdown`), one renderer for
//! both. Stored text goes in as stored (a reader's renderer escapes it); tool output sits
//! in fences no line of it can close.

use std::borrow::Cow;
use std::io::{self, Write};

use scribe_db::calendar::date_time;
use scribe_message::{Message, Part, ToolState};
use scribe_session::SessionExport;

use crate::json::one_line;
use crate::text::{NO_TOKENS, NO_USAGE, cost_text, error_line, grouped};

/// Writes `export`'s session (a heading and its facts) and its messages as Markdown.
pub fn write(out: &mut dyn Write, export: &SessionExport) -> io::Result<()> {
    let s = &export.session;
    writeln!(out, "# {}\n", s.title.as_deref().unwrap_or("(untitled)"))?;
    writeln!(out, "- id: `{}`", s.id)?;
    writeln!(out, "- kind: {} · source: {}", s.kind, s.source)?;
    if let Some(model) = &s.model {
        writeln!(out, "- model: {model}")?;
    }
    writeln!(out, "- started: {} UTC", date_time(s.created_at))?;
    if s.usage_recorded() && !s.tokens_recorded() {
        writeln!(
            out,
            "- {} messages · {NO_TOKENS} · {}",
            s.message_count,
            cost_text(s.estimated_cost_usd, s.cost_is_partial())
        )?;
    } else if s.usage_recorded() {
        writeln!(
            out,
            "- {} messages · {} tokens · {}",
            s.message_count,
            grouped(s.tokens.total()),
            cost_text(s.estimated_cost_usd, s.cost_is_partial())
        )?;
    } else {
        writeln!(out, "- {} messages · {NO_USAGE}", s.message_count)?;
    }
    for m in &export.messages {
        message(out, m)?;
    }
    Ok(())
}

/// A fence for a code block holding `text`: backticks, one more than the longest run in
/// `text` and at least three, so no line of the text can close it (CommonMark closes a
/// block at a line of at least as many backticks as opened it). A tool's output is often
/// a file with fenced code (`cat README.md`), which closed a plain ```` ``` ```` block
/// early and turned the rest of the export into Markdown of the output's making.
pub fn code_fence(text: &str) -> String {
    let longest = text.split(|c| c != '`').map(str::len).max().unwrap_or(0);
    "`".repeat((longest + 1).max(3))
}

fn message(out: &mut dyn Write, m: &Message) -> io::Result<()> {
    let summary = if m.is_summary { " (summary)" } else { "" };
    writeln!(
        out,
        "\n## {}{summary} · {}\n",
        m.role.as_str(),
        date_time(m.created_at)
    )?;
    for stored in &m.parts {
        match &stored.part {
            Part::Text(t) => writeln!(out, "{}\n", t.text.trim_end())?,
            Part::Reasoning(r) => writeln!(
                out,
                "> _thinking:_ {}\n",
                one_line(crate::text::reasoning_text(&r.text), 300)
            )?,
            Part::Tool(t) => {
                writeln!(
                    out,
                    "**tool `{}`** ({})\n\n```json\n{}\n```\n",
                    t.tool,
                    t.state.status(),
                    t.input
                )?;
                let text = match &t.state {
                    ToolState::Completed { output, .. } => Some(output.as_str()),
                    ToolState::Error { message, .. } => Some(message.as_str()),
                    _ => None,
                };
                if let Some(text) = text {
                    let fence = code_fence(text);
                    writeln!(out, "{fence}\n{}\n{fence}\n", text.trim_end())?;
                }
            }
            Part::File(f) => writeln!(
                out,
                "_attachment: {} ({})_\n",
                f.filename.as_deref().unwrap_or("file"),
                f.mime
            )?,
            Part::Compaction(_) => writeln!(out, "_— conversation compacted —_\n")?,
            Part::Subtask(t) => {
                writeln!(out, "_sub-agent task ({}): {}_\n", t.agent, t.description)?
            }
            _ => {}
        }
    }
    // What ended the message (a reply the user stopped, one a rewind took back), as
    // `scribe show` and the page mark it.
    if let Some(error) = &m.error {
        for line in error_line(error, |text| Cow::Borrowed(text)).lines() {
            writeln!(out, "> {line}")?;
        }
        writeln!(out)?;
    }
    Ok(())
}
