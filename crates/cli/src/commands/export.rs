//! `scribe export`: sessions with everything in them, as JSON (one document), JSON Lines
//! (one session per line) or Markdown (for reading; not importable).
//!
//! A file given with `-o` is written to a temporary file beside it and renamed into place
//! only when complete, so a failed export never leaves half a file.

use std::io::{BufWriter, Write};
use std::path::{Path, PathBuf};

use clap::{ArgGroup, Args, ValueEnum};
use scribe_message::{Message, Part, ToolState};
use scribe_session::{ExportSelection, SessionExport};
use serde::{Deserialize, Serialize};

use crate::context::Context;
use crate::error::CliError;
use crate::ui;

/// The `format` field of a JSON export document.
pub const FORMAT_NAME: &str = "scribe-export";
/// The version of the export document this build writes (and the newest it reads).
pub const FORMAT_VERSION: u32 = 1;

/// An export file in the `json` format.
#[derive(Debug, Serialize, Deserialize)]
pub struct ExportDocument {
    /// Always [`FORMAT_NAME`].
    #[serde(default)]
    pub format: String,
    /// [`FORMAT_VERSION`] when written.
    #[serde(default)]
    pub version: u32,
    /// When it was written (ms).
    #[serde(default)]
    pub exported_at: i64,
    /// The sessions, parents before their children.
    pub sessions: Vec<SessionExport>,
}

/// Output formats.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Format {
    /// One JSON document: {"format", "version", "exported_at", "sessions": [...]}.
    Json,
    /// One session per line (each line is a whole session export).
    Jsonl,
    /// Readable Markdown (cannot be imported).
    Markdown,
}

/// Export sessions with their messages, parts and file versions.
///
/// JSON and JSON Lines exports can be imported into any Scribe database with `scribe
/// import`; the copy is exact (ids, times, usage and counters).
#[derive(Debug, Args)]
#[command(group(ArgGroup::new("what").required(true).args(["sessions", "all"])))]
pub struct ExportCmd {
    /// The sessions to export (ids, id prefixes or titles).
    #[arg(value_name = "SESSION")]
    pub sessions: Vec<String>,
    /// Export every session (parents before their children).
    #[arg(long, conflicts_with = "sessions")]
    pub all: bool,
    /// With --all: only sessions from this source.
    #[arg(long, requires = "all", value_name = "SOURCE")]
    pub source: Option<String>,
    /// Output format.
    #[arg(long, short = 'f', value_enum, default_value_t = Format::Json)]
    pub format: Format,
    /// Write to this file instead of stdout.
    #[arg(long, short = 'o', value_name = "FILE")]
    pub output: Option<PathBuf>,
}

impl ExportCmd {
    /// Runs the command.
    pub fn run(self, ctx: &Context) -> Result<(), CliError> {
        let exports = if self.all {
            let spinner = ui::spinner("reading sessions");
            let all = ctx.sessions.export(&ExportSelection::All {
                source: self.source.clone(),
            })?;
            spinner.finish_and_clear();
            all
        } else {
            let mut sessions = Vec::with_capacity(self.sessions.len());
            for wanted in &self.sessions {
                let session = ctx.resolve(wanted)?;
                if !sessions
                    .iter()
                    .any(|s: &scribe_session::Session| s.id == session.id)
                {
                    sessions.push(session);
                }
            }
            // Oldest first, so a parent exported with its child is imported before it.
            sessions.sort_by(|a, b| (a.created_at, &a.id).cmp(&(b.created_at, &b.id)));
            let bar = ui::progress(sessions.len(), "reading");
            let mut exports = Vec::with_capacity(sessions.len());
            for session in sessions {
                exports.extend(ctx.sessions.export(&ExportSelection::One(session.id))?);
                bar.inc(1);
            }
            bar.finish_and_clear();
            exports
        };
        match &self.output {
            None => {
                let mut out = std::io::stdout().lock();
                write_exports(&mut out, &exports, self.format)?;
                out.flush()?;
            }
            Some(path) => {
                write_atomically(path, |file| write_exports(file, &exports, self.format))?;
                eprintln!(
                    "exported {} session{} to {}",
                    exports.len(),
                    if exports.len() == 1 { "" } else { "s" },
                    path.display()
                );
            }
        }
        Ok(())
    }
}

/// Writes `path` through a temporary file in the same directory, renamed into place when
/// `write` succeeded.
fn write_atomically(
    path: &Path,
    write: impl FnOnce(&mut BufWriter<&std::fs::File>) -> Result<(), CliError>,
) -> Result<(), CliError> {
    let io_err = |source| CliError::WriteFile {
        path: path.to_owned(),
        source,
    };
    let dir = match path.parent() {
        Some(dir) if !dir.as_os_str().is_empty() => dir,
        _ => Path::new("."),
    };
    let tmp = tempfile::NamedTempFile::new_in(dir).map_err(io_err)?;
    {
        let mut writer = BufWriter::new(tmp.as_file());
        write(&mut writer)?;
        writer.flush().map_err(io_err)?;
    }
    tmp.as_file().sync_all().map_err(io_err)?;
    tmp.persist(path).map_err(|e| io_err(e.error))?;
    Ok(())
}

fn write_exports(
    out: &mut impl Write,
    exports: &[SessionExport],
    format: Format,
) -> Result<(), CliError> {
    let bar = ui::progress(exports.len(), "writing");
    match format {
        Format::Json => {
            // Written by hand around the sessions so the progress bar can advance per
            // session; the result is the same document serde would write.
            writeln!(
                out,
                "{{\n  \"format\": {},\n  \"version\": {FORMAT_VERSION},\n  \"exported_at\": {},\n  \"sessions\": [",
                serde_json::to_string(FORMAT_NAME)?,
                scribe_db::now_ms()
            )?;
            for (i, export) in exports.iter().enumerate() {
                if i > 0 {
                    writeln!(out, ",")?;
                }
                serde_json::to_writer(&mut *out, export)?;
                bar.inc(1);
            }
            writeln!(out, "\n  ]\n}}")?;
        }
        Format::Jsonl => {
            for export in exports {
                serde_json::to_writer(&mut *out, export)?;
                writeln!(out)?;
                bar.inc(1);
            }
        }
        Format::Markdown => {
            for (i, export) in exports.iter().enumerate() {
                if i > 0 {
                    writeln!(out, "\n---\n")?;
                }
                markdown(out, export)?;
                bar.inc(1);
            }
        }
    }
    bar.finish_and_clear();
    Ok(())
}

fn markdown(out: &mut impl Write, export: &SessionExport) -> Result<(), CliError> {
    let s = &export.session;
    writeln!(out, "# {}\n", s.title.as_deref().unwrap_or("(untitled)"))?;
    writeln!(out, "- id: `{}`", s.id)?;
    writeln!(out, "- kind: {} · source: {}", s.kind, s.source)?;
    if let Some(model) = &s.model {
        writeln!(out, "- model: {model}")?;
    }
    writeln!(out, "- started: {} UTC", ui::date_time(s.created_at))?;
    writeln!(
        out,
        "- {} messages · {} tokens · {}",
        s.message_count,
        ui::grouped(s.tokens.total()),
        ui::dollars(s.estimated_cost_usd)
    )?;
    for m in &export.messages {
        markdown_message(out, m)?;
    }
    Ok(())
}

fn markdown_message(out: &mut impl Write, m: &Message) -> Result<(), CliError> {
    let summary = if m.is_summary { " (summary)" } else { "" };
    writeln!(
        out,
        "\n## {}{summary} · {}\n",
        m.role.as_str(),
        ui::date_time(m.created_at)
    )?;
    for stored in &m.parts {
        match &stored.part {
            Part::Text(t) => writeln!(out, "{}\n", t.text.trim_end())?,
            Part::Reasoning(r) => writeln!(out, "> _thinking:_ {}\n", ui::one_line(&r.text, 300))?,
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
                    writeln!(out, "```\n{}\n```\n", text.trim_end())?;
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
    Ok(())
}
