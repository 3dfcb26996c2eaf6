//! `scribe import`: sessions from a `scribe export` file (JSON or JSON Lines, detected),
//! or with `--from <agent>` another agent's own history (see `import_history`).
//!
//! The whole file is read and checked before anything is stored, so a malformed file
//! imports nothing; its sessions are then put parents first (a child is linked only to a
//! parent already stored). The sessions then go in through the bulk path
//! (`SessionService::import_many`: thousands of messages per transaction, each of which
//! also fills both search indexes with what it stored, progress on stderr): one already present is skipped
//! (importing a file twice never duplicates), and one that cannot be stored is reported
//! while the rest go in.

use std::io::Write;
use std::path::{Path, PathBuf};

use clap::Args;
use scribe_session::{ImportOutcome, SessionExport};

use crate::commands::export::{ExportDocument, FORMAT_NAME, FORMAT_VERSION};
use crate::commands::import_history::{self, From, HistoryArgs};
use crate::context::{Access, Context};
use crate::error::{CliError, one_line};
use crate::interrupt::Interrupt;
use crate::ui::{self, paint, style};

/// Characters of a session title quoted in import messages.
const TITLE_CHARS: usize = 60;

/// Import sessions from a file written by `scribe export`, or with --from the history of
/// Claude Code, Codex, OpenCode, Hermes or Gemini CLI.
///
/// `scribe import FILE`: JSON and JSON Lines are told apart by their content. Sessions
/// already in the database are skipped, so importing the same file twice changes nothing
/// the second time; one whose title another session holds is imported under the next title
/// of its lineage (`t #2`). A file that is not a valid export imports nothing. Ctrl-C
/// stops the import after the transaction it is in, says what was stored, and exits
/// with 130; importing the same export again imports the rest.
///
/// `scribe import --from AGENT [PATH...]`: reads the agent's history where it keeps it
/// (its own environment overrides apply: CLAUDE_CONFIG_DIR, CODEX_HOME, OPENCODE_DB or
/// XDG_DATA_HOME, HERMES_HOME, GEMINI_DATA_DIR), or the files and directories given.
/// Incremental: an unchanged file costs one stat, a grown one is read from where the last
/// import stopped, and importing twice changes nothing. The agents' files are only read.
/// Ctrl-C stops it between files (those taken are stored whole), says what was stored
/// and how many files it did not reach, and exits with 130; importing again reads the
/// rest. With --watch, Ctrl-C ends the watch between imports (an import in flight stops
/// between files) and says what the watch stored, exit status 130. A cost the agent does
/// not report is estimated from the built-in prices and your model catalog file
/// (SCRIBE_MODELS, else ~/.config/scribe/models.toml, TOML or JSON); history imported
/// before its model had a price is priced once a price is known.
#[derive(Debug, Args)]
pub struct ImportCmd {
    /// Without --from: the export file (`-` for stdin). With --from: the agent's files or
    /// directories (default: where the agent keeps its history).
    #[arg(value_name = "PATH")]
    pub paths: Vec<PathBuf>,
    /// Import this agent's own history instead of an export file.
    ///
    /// A cost the agent does not report is estimated from the built-in prices and your
    /// model catalog file (SCRIBE_MODELS, else ~/.config/scribe/models.toml).
    #[arg(long, value_enum, value_name = "AGENT")]
    pub from: Option<From>,
    /// With --from: say what would be imported, and write nothing (the database is read
    /// as it is, not created or migrated).
    #[arg(long, requires = "from")]
    pub dry_run: bool,
    /// With --from: only sessions active since a span ago (7d, 24h) or a date (2026-01-31),
    /// from 1970-01-01 on.
    #[arg(long, requires = "from", value_name = "WHEN", value_parser = ui::parse_since)]
    pub since: Option<i64>,
    /// With --from: print the summary as JSON.
    #[arg(long, requires = "from")]
    pub json: bool,
    /// With --from: keep running and import new records as the agents write them.
    #[arg(long, requires = "from")]
    pub watch: bool,
}

/// An import whose input has been read and checked, before any database is opened: an
/// import that fails on its input (a missing file or PATH, a malformed export) creates no
/// database (`commands::run`).
#[derive(Debug)]
pub enum Import {
    /// `scribe import FILE`: the sessions of the export, and Ctrl-C (caught from before
    /// the file is read: a pipe whose writer Ctrl-C ended reads as a cut-off file).
    File(Vec<SessionExport>, Interrupt),
    /// `scribe import --from AGENT`.
    History(HistoryArgs),
}

impl ImportCmd {
    /// Reads and checks what is to be imported: the whole export file, or that every PATH
    /// given with --from is there.
    pub fn prepare(self) -> Result<Import, CliError> {
        if let Some(from) = self.from {
            if from == From::All && !self.paths.is_empty() {
                usage(
                    "PATHs belong to one agent: give --from one agent with them, or no PATH with --from all",
                );
            }
            let args = HistoryArgs {
                from,
                paths: self.paths,
                dry_run: self.dry_run,
                since: self.since,
                json: self.json,
                watch: self.watch,
                catalog: crate::location::model_catalog()?,
            };
            import_history::check_paths(&args)?;
            return Ok(Import::History(args));
        }
        let file = match <[PathBuf; 1]>::try_from(self.paths) {
            Ok([file]) => file,
            Err(_) => usage("give one export FILE, or --from AGENT to import an agent's history"),
        };
        let malformed = |reason| CliError::MalformedImport {
            path: file.clone(),
            reason,
        };
        let interrupt = Interrupt::catch();
        let nothing = || CliError::Interrupted("nothing was imported".to_owned());
        let Some(bytes) = read(&file, &interrupt)? else {
            return Err(nothing());
        };
        if interrupt.happened() {
            return Err(nothing());
        }
        let text = String::from_utf8(bytes).map_err(|e| malformed(not_text(&e)))?;
        let exports = parse(&text).map_err(malformed)?;
        if interrupt.happened() {
            return Err(nothing());
        }
        // A child is linked only to a parent already stored: parents go first.
        Ok(Import::File(
            scribe_session::exports_parents_first(exports),
            interrupt,
        ))
    }
}

impl Import {
    /// What the import needs of the database: a dry run only reads; otherwise a missing
    /// database is created.
    pub fn access(&self) -> Access {
        if self.dry_run() {
            Access::Read
        } else {
            Access::Create
        }
    }

    /// Whether it is `--dry-run` (which writes nothing, so creates nothing either).
    pub fn dry_run(&self) -> bool {
        matches!(self, Import::History(args) if args.dry_run)
    }

    /// Runs the import into `ctx`.
    pub fn run(self, ctx: &Context) -> Result<(), CliError> {
        let (exports, interrupt) = match self {
            Import::History(args) => return import_history::run(args, ctx),
            Import::File(exports, interrupt) => (exports, interrupt),
        };
        let total = exports.len();
        let total_messages: usize = exports.iter().map(|e| e.messages.len()).sum();
        let labels: Vec<(String, String, Option<String>)> = exports
            .iter()
            .map(|export| {
                let given = export.session.title.clone();
                let title = given
                    .as_deref()
                    // A title the import refuses may be huge; the message stays one short line.
                    .map(|t| format!(" {:?}", ui::cut(t, TITLE_CHARS)))
                    .unwrap_or_default();
                let id = &export.session.id;
                // A blank id (refused) would print as nothing: quoted, it shows.
                let id = if id.trim().is_empty() {
                    format!("session {id:?}")
                } else {
                    id.clone()
                };
                (id, title, given)
            })
            .collect();
        // The bulk path: thousands of messages per transaction, each indexing what it
        // stored; the bar counts messages stored, then the parts others left queued (if
        // any) as they are indexed.
        let bar = ui::progress(total_messages, "importing");
        let mut indexing = false;
        // Ctrl-C ends the sessions handed over: the batch being filled is stored (one
        // transaction, as always) and the import stops there.
        let handed = exports.into_iter().take_while(|_| !interrupt.happened());
        let outcomes = ctx.sessions.import_many(handed, |p| {
            if p.to_index > 0 {
                if !indexing {
                    indexing = true;
                    bar.set_length(p.to_index);
                    bar.set_message("indexing");
                }
                bar.set_position(p.indexed);
            } else {
                bar.set_position(u64::try_from(p.messages).unwrap_or(u64::MAX));
            }
        })?;
        bar.finish_and_clear();
        let mut out = anstream::stdout().lock();
        let (mut imported, mut skipped, mut failed) = (0_usize, 0_usize, 0_usize);
        let handled = outcomes.len();
        let mut stored_messages = 0;
        for ((id, title, given), outcome) in labels.iter().zip(outcomes) {
            match outcome {
                Ok(ImportOutcome::Imported {
                    session,
                    unlinked_parent,
                }) => {
                    imported += 1;
                    stored_messages += session.message_count;
                    // A title another session held was numbered (`t #2`), one with
                    // stray whitespace normalized: say what it is called now.
                    let renamed = match &session.title {
                        Some(stored) if given.as_ref() != Some(stored) => {
                            format!(" as {:?}", ui::cut(stored, TITLE_CHARS))
                        }
                        _ => String::new(),
                    };
                    let mut line = format!(
                        "imported {}{title}{renamed} ({})",
                        session.id,
                        ui::plural(session.message_count, "message")
                    );
                    if let Some(parent) = unlinked_parent {
                        line.push_str(&format!(
                            "; its parent {parent} is not in this database, so the link was dropped"
                        ));
                    }
                    writeln!(out, "{line}")?;
                }
                Ok(ImportOutcome::Skipped { reason }) => {
                    skipped += 1;
                    writeln!(out, "skipped {id}{title}: {reason}")?;
                }
                Err(err) => {
                    failed += 1;
                    anstream::eprintln!(
                        "{}",
                        paint(
                            style::ERROR,
                            format!("failed {id}{title}: {}", one_line(&err))
                        )
                    );
                }
            }
        }
        writeln!(
            out,
            "{imported} imported, {skipped} skipped, {failed} failed"
        )?;
        if handled < total {
            return Err(CliError::Interrupted(format!(
                "{} ({}) stored, {} of {} not reached; importing the same export again \
                 skips what is stored and imports the rest",
                ui::plural(i64::try_from(imported).unwrap_or(i64::MAX), "session"),
                ui::plural(stored_messages, "message"),
                ui::grouped(i64::try_from(total - handled).unwrap_or(i64::MAX)),
                ui::grouped(i64::try_from(total).unwrap_or(i64::MAX)),
            )));
        }
        if failed > 0 {
            return Err(CliError::ImportIncomplete { failed, total });
        }
        Ok(())
    }
}

impl Import {
    /// Whether a missing SQLite database would be created for it and kept open until it
    /// ends: not for a dry run (creates nothing) or `--watch` (runs until stopped).
    pub fn creates(&self) -> bool {
        self.access() == Access::Create && !matches!(self, Import::History(args) if args.watch)
    }
}

/// Exits with a usage error (status 2), as clap does for the arguments it checks itself:
/// with import's own usage line (`Usage: scribe import [OPTIONS] [PATH]...`), not the
/// top-level one.
fn usage(message: &str) -> ! {
    use clap::CommandFactory;
    let mut cli = crate::cli::Cli::command();
    // Building gives every subcommand its full name (`scribe import`) for the usage line.
    cli.build();
    let mut import = cli.find_subcommand("import").cloned().unwrap_or(cli);
    import
        .error(clap::error::ErrorKind::ArgumentConflict, message)
        .exit()
}

/// The bytes of the export at `path` (`-`: stdin), or `None` when Ctrl-C came while
/// stdin was still being read (a read of a pipe is not interrupted by the signal itself:
/// it goes on in a thread of its own, left behind, while this one watches for Ctrl-C).
fn read(path: &Path, interrupt: &Interrupt) -> Result<Option<Vec<u8>>, CliError> {
    let err = |source| CliError::ReadFile {
        path: path.to_owned(),
        source,
    };
    if path.as_os_str() != "-" {
        return std::fs::read(path).map(Some).map_err(err);
    }
    let (sender, received) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let mut bytes = Vec::new();
        let read = std::io::Read::read_to_end(&mut std::io::stdin(), &mut bytes);
        drop(sender.send(read.map(|_| bytes)));
    });
    loop {
        if interrupt.happened() {
            return Ok(None);
        }
        match received.recv_timeout(std::time::Duration::from_millis(50)) {
            Ok(read) => return read.map(Some).map_err(err),
            Err(std::sync::mpsc::RecvTimeoutError::Timeout) => {}
            Err(std::sync::mpsc::RecvTimeoutError::Disconnected) => {
                return Err(err(std::io::Error::other("the reading thread ended")));
            }
        }
    }
}

/// Why bytes that are not UTF-8 are no export, with what to do about a compressed file.
fn not_text(err: &std::string::FromUtf8Error) -> String {
    let bytes = err.as_bytes();
    if bytes.starts_with(&[0x1f, 0x8b]) {
        "gzip-compressed: decompress it first (`gunzip -k FILE`), then import the .json".to_owned()
    } else if bytes.starts_with(&[0x28, 0xb5, 0x2f, 0xfd]) {
        "zstd-compressed: decompress it first (`zstd -d FILE`), then import the .json".to_owned()
    } else {
        format!(
            "not UTF-8 text (byte {}): a scribe export is JSON",
            err.utf8_error().valid_up_to()
        )
    }
}

/// The sessions of an export file: a JSON export document, a single session export, a
/// JSON array of them, or JSON Lines. `Err` says where and why it is malformed.
pub fn parse(text: &str) -> Result<Vec<SessionExport>, String> {
    let trimmed = text.trim_start_matches('\u{feff}').trim();
    if trimmed.is_empty() {
        return Err("the file is empty".to_owned());
    }
    if !trimmed.starts_with('{') && !trimmed.starts_with('[') {
        return Err("not JSON: a scribe export starts with `{` or `[`".to_owned());
    }
    match serde_json::from_str::<serde_json::Value>(trimmed) {
        Ok(value) => from_document(value),
        // Not one JSON value: JSON Lines, one session per line.
        Err(whole) => {
            let lines: Vec<(usize, &str)> = trimmed
                .lines()
                .enumerate()
                .filter(|(_, l)| !l.trim().is_empty())
                .collect();
            // A first line that is not a whole JSON value means a broken JSON document,
            // not JSON Lines: report where the document broke.
            let first_is_value = lines
                .first()
                .is_some_and(|(_, l)| serde_json::from_str::<serde_json::Value>(l).is_ok());
            if lines.len() < 2 || !first_is_value {
                return Err(whole.to_string());
            }
            lines
                .into_iter()
                .map(|(i, line)| {
                    serde_json::from_str::<SessionExport>(line)
                        .map_err(|e| format!("line {}: {e}", i + 1))
                })
                .collect()
        }
    }
}

fn from_document(value: serde_json::Value) -> Result<Vec<SessionExport>, String> {
    match &value {
        serde_json::Value::Array(_) => {
            serde_json::from_value::<Vec<SessionExport>>(value).map_err(|e| e.to_string())
        }
        serde_json::Value::Object(map) if map.contains_key("sessions") => {
            let format = map.get("format").and_then(|f| f.as_str());
            if format.is_some_and(|f| f != FORMAT_NAME) {
                return Err(format!(
                    "unknown format {format:?}, expected {FORMAT_NAME:?}"
                ));
            }
            let version = map.get("version").and_then(serde_json::Value::as_u64);
            if version.is_some_and(|v| v > u64::from(FORMAT_VERSION)) {
                return Err(format!(
                    "written by a newer scribe (export version {}, this build reads {FORMAT_VERSION})",
                    version.unwrap_or_default()
                ));
            }
            serde_json::from_value::<ExportDocument>(value)
                .map(|doc| doc.sessions)
                .map_err(|e| e.to_string())
        }
        serde_json::Value::Object(_) => serde_json::from_value::<SessionExport>(value)
            .map(|one| vec![one])
            .map_err(|e| e.to_string()),
        _ => Err("not a scribe export".to_owned()),
    }
}

#[cfg(test)]
mod tests {
    use super::parse;

    #[test]
    fn malformed_files_say_where() {
        assert!(parse("").unwrap_err().contains("empty"));
        assert!(parse("hello").unwrap_err().contains("not JSON"));
        let err = parse("{\"session\": 1}\n{\"x\": 2}\n").unwrap_err();
        assert!(err.starts_with("line 1:"), "{err}");
        let err = parse("{\n  \"format\": \"scribe-export\",\n  \"sessions\": [\n").unwrap_err();
        assert!(err.contains("EOF") && err.contains("line 3"), "{err}");
        let err = parse(r#"{"format":"scribe-export","version":9,"sessions":[]}"#).unwrap_err();
        assert!(err.contains("newer"), "{err}");
        assert!(
            parse(r#"{"format":"scribe-export","version":1,"sessions":[]}"#)
                .unwrap()
                .is_empty()
        );
    }
}
