//! `scribe import`: sessions from a `scribe export` file (JSON or JSON Lines, detected),
//! or with `--from <agent>` another agent's own history (see `import_history`).
//!
//! The whole file is read and checked before anything is stored, so a malformed file
//! imports nothing; the sessions are then parsed again one at a time as they are stored
//! (`export_file`), so memory holds the file's text and a batch, never every session. A
//! file that lists a child before its parent (a child is linked only to a parent already
//! stored) is held whole and put parents first. The sessions go in through the bulk path
//! (`SessionService::import_many`: thousands of messages per transaction, each of which
//! also fills both search indexes with what it stored, progress on stderr): one already present is skipped
//! (importing a file twice never duplicates), and one that cannot be stored is reported
//! while the rest go in.

use std::io::Write;
use std::path::{Path, PathBuf};

use clap::Args;
use scribe_session::{ImportOutcome, SessionExport};

use crate::commands::export_file::{ExportFile, Listed};
use crate::commands::import_history::{self, From, HistoryArgs};
use crate::context::{Access, Context};
use crate::error::{CliError, one_line};
use crate::interrupt::Interrupt;
use crate::ui::{self, paint, style};

/// Characters of a session title quoted in import messages.
const TITLE_CHARS: usize = 60;

/// Import sessions from a file written by `scribe export`, or with --from the history of
/// Claude Code, Codex, OpenCode, Hermes, Gemini CLI, Cline, Roo Code, Kilo Code, Goose,
/// GitHub Copilot CLI, pi, OpenClaw, Amp, Factory Droid, the Kilo CLI, Grok Build, Qwen Code,
/// Google Antigravity, Kimi, Cursor, Zed, VS Code's chat, Crush, Kiro CLI (Amazon Q),
/// Continue, Aider, Mistral Vibe or OpenHands.
///
/// `scribe import FILE`: JSON and JSON Lines are told apart by their content. Sessions
/// already in the database are skipped, so importing the same file twice changes nothing
/// the second time; one whose title another session holds is imported under the next title
/// of its lineage (`t #2`). A file that is not a valid export imports nothing. Ctrl-C
/// stops the import after the transaction it is in, says what was stored, and exits
/// with 130; importing the same export again imports the rest.
///
/// `scribe import --from AGENT [PATH...]`: reads the agent's history where it keeps it
/// (its own environment overrides apply: CLAUDE_CONFIG_DIR, CODEX_HOME, OPENCODE_DB,
/// OPENCODE_DATA_DIR or XDG_DATA_HOME, HERMES_HOME, GEMINI_DATA_DIR), or the files and
/// directories given.
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
    /// `scribe import FILE`: the export, checked, and Ctrl-C (caught from before the file
    /// is read: a pipe whose writer Ctrl-C ended reads as a cut-off file).
    File(ExportFile, Interrupt),
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
        let file = ExportFile::check(text).map_err(malformed)?;
        if interrupt.happened() {
            return Err(nothing());
        }
        Ok(Import::File(file, interrupt))
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
        let (file, interrupt) = match self {
            Import::History(args) => return import_history::run(args, ctx),
            Import::File(file, interrupt) => (file, interrupt),
        };
        let total = file.listed().len();
        let total_messages: usize = file.listed().iter().map(|s| s.messages).sum();
        // The bulk path: thousands of messages per transaction, each indexing what it
        // stored; the bar counts messages stored, then the parts others left queued (if
        // any) as they are indexed.
        let bar = ui::progress(total_messages, "importing");
        let mut indexing = false;
        let progress = |p: &scribe_session::ImportProgress| {
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
        };
        // Ctrl-C ends the sessions handed over: the batch being filled is stored (one
        // transaction, as always) and the import stops there.
        let (labels, outcomes) = if file.parents_first() {
            // As `scribe export` writes them: parsed again one at a time, on a thread of
            // their own, as the import takes them.
            let labels: Vec<_> = file.listed().iter().map(label).collect();
            let outcomes = std::thread::scope(|scope| {
                let (send, taken) = std::sync::mpsc::sync_channel::<SessionExport>(4);
                scope.spawn(|| {
                    // Ends when the import stops taking sessions (the receiver is gone).
                    file.each(&mut move |export| {
                        send.send(export).map_err(|_| "stopped".to_owned())
                    })
                });
                let handed = taken.into_iter().take_while(|_| !interrupt.happened());
                ctx.sessions.import_many(handed, progress)
            })?;
            (labels, outcomes)
        } else {
            // A child is linked only to a parent already stored: parents go first, which
            // needs them all.
            let exports = scribe_session::exports_parents_first(file.all());
            let labels = exports.iter().map(|e| label(&Listed::of(e))).collect();
            let handed = exports.into_iter().take_while(|_| !interrupt.happened());
            (labels, ctx.sessions.import_many(handed, progress)?)
        };
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

/// How a session is named in the import's lines: its id (a blank one quoted, so it
/// shows), the start of its title quoted (a title the import refuses may be huge; the line
/// stays short), and the title as given.
fn label(s: &Listed) -> (String, String, Option<String>) {
    let title = s
        .title
        .as_deref()
        .map(|t| format!(" {:?}", ui::cut(t, TITLE_CHARS)))
        .unwrap_or_default();
    let id = if s.id.trim().is_empty() {
        format!("session {:?}", s.id)
    } else {
        s.id.clone()
    };
    (id, title, s.title.clone())
}
