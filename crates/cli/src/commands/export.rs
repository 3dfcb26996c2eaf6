//! `scribe export`: sessions with everything in them, as JSON (one document), JSON Lines
//! (one session per line) or Markdown (for reading; not importable).
//!
//! A file given with `-o` is written to a temporary file beside it and renamed into place
//! only when complete, so a failed export never leaves half a file.

use std::io::{BufWriter, IsTerminal as _, Write};
use std::path::{Path, PathBuf};

use clap::{ArgGroup, Args, ValueEnum};
use scribe_session::{BoxError, ExportSelection, SessionError, SessionExport};

use crate::context::Context;
use crate::error::CliError;
use crate::ui;

/// The `format` field of a JSON export document.
pub const FORMAT_NAME: &str = "scribe-export";
/// The version of the export document this build writes (and the newest it reads).
pub const FORMAT_VERSION: u32 = 1;

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
    ///
    /// A session whose stored rows cannot be read (another program's write; `scribe db check` names them) is left out,
    /// named on stderr, and the rest written; the exit status is then 1.
    #[arg(long, conflicts_with = "sessions")]
    pub all: bool,
    /// With --all: only sessions from this source (one no session has is an error: nothing
    /// is written).
    #[arg(long, requires = "all", value_name = "SOURCE", value_parser = ui::parse_source)]
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
        let selections: Vec<ExportSelection> = if self.all {
            vec![ExportSelection::All {
                source: self.source.clone(),
            }]
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
            sessions
                .into_iter()
                .map(|s| ExportSelection::One(s.id))
                .collect()
        };
        let expected = if self.all {
            let sources: Vec<String> = self.source.iter().cloned().collect();
            let filter = scribe_db::filters::SessionFilter {
                sources: sources.clone(),
                ..scribe_db::filters::SessionFilter::default()
            };
            let expected = usize::try_from(ctx.sessions.count(&filter)?).unwrap_or(0);
            if expected == 0
                && let Some(line) = ctx
                    .unmatched_filters(&sources, &[], None)?
                    .into_iter()
                    .next()
            {
                return Err(CliError::NoSuchSource(line));
            }
            expected
        } else {
            selections.len()
        };
        let format = self.format;
        // Markdown for a person reading a terminal (stdout, or `-o /dev/tty`) shows stored
        // control characters as symbols (`ui::visible`), as `show` does, and JSON escapes
        // the C1 ones (`json::escaped_on`); written to a pipe or a file, every format is the
        // stored text exactly.
        let mut left_out: Vec<(Option<String>, SessionError)> = Vec::new();
        let mut stream = |out: &mut dyn Write, on_terminal: bool| -> Result<usize, CliError> {
            let mut out = crate::json::escaped_on(out, on_terminal);
            // Each session is written as soon as it is read: memory holds one session (or
            // a run of small ones read together), however many are exported.
            let bar = ui::progress(expected, "exporting");
            let mut writer = ExportWriter::new(&mut out, format, on_terminal)?;
            for selection in &selections {
                let mut write = |export: SessionExport| -> Result<(), BoxError> {
                    writer.write(&export)?;
                    bar.inc(1);
                    Ok(())
                };
                match selection {
                    // A session whose rows cannot be read (another program's write) is
                    // left out of --all, named, and the rest written: a backup of a
                    // damaged store keeps what can be read.
                    ExportSelection::All { .. } => {
                        ctx.sessions.export_each_skipping(
                            selection,
                            &mut write,
                            &mut |id, err| {
                                left_out.push((id.map(str::to_owned), err));
                            },
                        )?;
                    }
                    ExportSelection::One(_) => {
                        ctx.sessions.export_each(selection, &mut write)?;
                    }
                }
            }
            bar.finish_and_clear();
            writer.finish()
        };
        match &self.output {
            None => {
                let mut out = std::io::stdout().lock();
                stream(&mut out, std::io::stdout().is_terminal())?;
                out.flush()?;
            }
            Some(path) => {
                let mut count = 0;
                write_output(path, |file, on_terminal| {
                    count = stream(file, on_terminal)?;
                    Ok(())
                })?;
                report_left_out(&left_out);
                eprintln!(
                    "exported {count} session{} to {}",
                    if count == 1 { "" } else { "s" },
                    path.display()
                );
            }
        }
        if self.output.is_none() {
            report_left_out(&left_out);
        }
        if !left_out.is_empty() {
            return Err(CliError::LeftOut {
                count: left_out.len(),
                what: "session",
                from: "the export",
            });
        }
        Ok(())
    }
}

/// One line on stderr for each session `export --all` left out, naming it and why.
fn report_left_out(left_out: &[(Option<String>, SessionError)]) {
    for (id, err) in left_out {
        crate::error::report_left_out("a session", id.as_deref(), err);
    }
}

/// Writes the export to `path`: a regular file (or a new one) atomically, through
/// [`write_atomically`]; through a symlink, the file it points to, so the link stays; a
/// device, FIFO or socket (`/dev/stdout`, `/dev/null`, a named pipe) directly, as it is
/// not a file to replace. (Renaming a temporary file over `-o /dev/stdout` replaced the
/// device's symlink with a regular file.) `write` is told whether it writes to a terminal
/// (`-o /dev/tty`).
fn write_output(
    path: &Path,
    write: impl FnOnce(&mut BufWriter<&std::fs::File>, bool) -> Result<(), CliError>,
) -> Result<(), CliError> {
    let io_err = |source| CliError::WriteFile {
        path: path.to_owned(),
        source,
    };
    match std::fs::metadata(path) {
        Ok(meta) if meta.is_file() => {
            let target = std::fs::canonicalize(path).map_err(io_err)?;
            write_atomically(&target, Some(meta.permissions()), |out| write(out, false)).map_err(
                |err| match err {
                    CliError::WriteFile { source, .. } => io_err(source),
                    other => other,
                },
            )
        }
        // A directory fails below, named as the user gave it.
        Ok(meta) if !meta.is_dir() => {
            let file = std::fs::OpenOptions::new()
                .write(true)
                .open(path)
                .map_err(io_err)?;
            let mut writer = BufWriter::new(&file);
            write(&mut writer, file.is_terminal())?;
            writer.flush().map_err(io_err)
        }
        _ => write_atomically(path, None, |out| write(out, false)),
    }
}

/// Writes `path` through a temporary file in the same directory, renamed into place when
/// `write` succeeded. The file keeps `replaced`, the permissions of the file it replaces
/// (it was 0600, so an export over a shared 0644 file made it private); a new one is
/// private (0600) as the database it comes from is: it holds the same conversations, tool
/// output and all.
fn write_atomically(
    path: &Path,
    replaced: Option<std::fs::Permissions>,
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
    // The temporary file is opened here rather than by `NamedTempFile::new_in`, whose error
    // wraps the operating system's in a text naming its own random file (`… at path
    // "dir/.tmpX1b2"`): this one is the operating system's error as it is (kind, code,
    // message), and the user asked for `path`, which `WriteFile` names. As tempfile does:
    // a new file (never an existing one), private (0600), removed unless persisted; when
    // it replaces a file, given that file's permissions before anything is written.
    let tmp = tempfile::Builder::new()
        .make_in(dir, |tmp| {
            let mut options = std::fs::OpenOptions::new();
            options.read(true).write(true).create_new(true);
            #[cfg(unix)]
            std::os::unix::fs::OpenOptionsExt::mode(&mut options, 0o600);
            options.open(tmp)
        })
        .map_err(io_err)?;
    if let Some(permissions) = replaced {
        tmp.as_file().set_permissions(permissions).map_err(io_err)?;
    }
    {
        let mut writer = BufWriter::new(tmp.as_file());
        write(&mut writer)?;
        writer.flush().map_err(io_err)?;
    }
    tmp.as_file().sync_all().map_err(io_err)?;
    tmp.persist(path).map_err(|e| io_err(e.error))?;
    Ok(())
}

/// Writes sessions one by one in one of the formats: the JSON document
/// (`{"format": FORMAT_NAME, "version": FORMAT_VERSION, "exported_at": ms, "sessions":
/// [...]}`, parents before their children) is written by hand around them;
/// `export_file` reads it back.
struct ExportWriter<'w> {
    out: &'w mut dyn Write,
    format: Format,
    /// Markdown goes to a terminal: control characters are made visible.
    on_terminal: bool,
    written: usize,
}

impl<'w> ExportWriter<'w> {
    fn new(out: &'w mut dyn Write, format: Format, on_terminal: bool) -> Result<Self, CliError> {
        if format == Format::Json {
            write!(
                out,
                "{{\n  \"format\": {},\n  \"version\": {FORMAT_VERSION},\n  \"exported_at\": {},\n  \"sessions\": [",
                serde_json::to_string(FORMAT_NAME)?,
                scribe_db::now_ms()
            )?;
        }
        Ok(ExportWriter {
            out,
            format,
            on_terminal,
            written: 0,
        })
    }

    fn write(&mut self, export: &SessionExport) -> Result<(), CliError> {
        match self.format {
            Format::Json => {
                // `[` then one session a line: `[]` when there is none.
                writeln!(self.out, "{}", if self.written > 0 { "," } else { "" })?;
                serde_json::to_writer(&mut *self.out, export)?;
            }
            Format::Jsonl => {
                serde_json::to_writer(&mut *self.out, export)?;
                writeln!(self.out)?;
            }
            Format::Markdown => {
                if self.written > 0 {
                    writeln!(self.out, "\n---\n")?;
                }
                if self.on_terminal {
                    let mut text = Vec::new();
                    scribe_server::markdown::write(&mut text, export)?;
                    let text = String::from_utf8_lossy(&text);
                    self.out.write_all(ui::visible(&text).as_bytes())?;
                } else {
                    scribe_server::markdown::write(&mut *self.out, export)?;
                }
            }
        }
        self.written += 1;
        Ok(())
    }

    /// Closes the document; returns how many sessions it holds.
    fn finish(self) -> Result<usize, CliError> {
        if self.format == Format::Json {
            let end = if self.written > 0 { "\n  " } else { "" };
            writeln!(self.out, "{end}]\n}}")?;
        }
        Ok(self.written)
    }
}
