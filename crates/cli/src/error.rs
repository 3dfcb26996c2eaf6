//! The CLI's report error: what went wrong, for a human, on one line.

use std::path::PathBuf;

/// A failed command.
#[derive(Debug, thiserror::Error)]
pub enum CliError {
    /// The database refused or failed the operation.
    #[error(transparent)]
    Db(#[from] scribe_db::Error),
    /// The session service refused or failed the operation.
    #[error(transparent)]
    Session(#[from] scribe_session::SessionError),
    /// The message service refused or failed the operation.
    #[error(transparent)]
    Message(#[from] scribe_message::MessageError),
    /// `scribe serve` could not start or failed.
    #[error(transparent)]
    Serve(#[from] scribe_server::ServeError),
    /// The user's model catalog file (`SCRIBE_MODELS`, or `models.toml` in the platform
    /// config directory) cannot be read, parsed or used; nothing was imported.
    #[error("nothing was imported: {source}")]
    ModelCatalog {
        /// What is wrong with the file, naming it.
        #[source]
        source: scribe_agent::models::CatalogError,
    },
    /// No `--db`, no `SCRIBE_DB`, and the platform has no data directory.
    #[error("cannot find a data directory for the database; pass --db PATH or set SCRIBE_DB")]
    NoDataDir,
    /// `--db` or `SCRIBE_DB` names a database file that does not exist, for a command that
    /// does not create one (it only reads, or changes what is stored); nothing was created.
    #[error("{source}; check --db or SCRIBE_DB (`scribe db migrate` creates an empty database)")]
    NoDatabase {
        /// The database's [`scribe_db::Error::NoDatabase`], naming the path.
        #[source]
        source: scribe_db::Error,
    },
    /// No `--db`, no `SCRIBE_DB`, and no database at the default path yet (a first run),
    /// for a command that needs one; nothing was created.
    #[error(
        "nothing recorded yet: no database at {} (`scribe import --from all` imports the \
         agents' histories, `scribe demo` records a sample session)",
        path.display()
    )]
    NothingYet {
        /// The default path, where the first writer creates the database.
        path: PathBuf,
    },
    /// `export --all --source S` where no session has source S (a typo, most likely):
    /// nothing is written, so a backup the output would replace stays as it was.
    #[error("nothing was exported: {0}")]
    NoSuchSource(String),
    /// Nothing matches what the user named as a session.
    #[error("no session matches {} (not an id, an id prefix or a title); try `scribe list`", echo(.0))]
    NoSuchSession(String),
    /// `scribe show` without a session, on a store that holds no conversation to show.
    #[error(
        "there is no conversation to show yet; `scribe import --from all` reads your agents' history"
    )]
    NoConversation,
    /// An id prefix names more than one session.
    #[error("{} matches {matches} sessions: {}; use a longer prefix", echo(prefix), candidates.join(", "))]
    AmbiguousSession {
        /// What the user typed.
        prefix: String,
        /// How many match: `3`, or `more than 10` when only the first few were listed.
        matches: String,
        /// `id (title)` of each candidate.
        candidates: Vec<String>,
    },
    /// Nothing matches what the user named as a message.
    #[error("no message of session {session} matches {}", echo(message))]
    NoSuchMessage {
        /// The session searched.
        session: String,
        /// What the user typed.
        message: String,
    },
    /// A message id prefix names more than one message.
    #[error("{} matches several messages: {}; use a longer prefix", echo(prefix), candidates.join(", "))]
    AmbiguousMessage {
        /// What the user typed.
        prefix: String,
        /// The candidate ids.
        candidates: Vec<String>,
    },
    /// The session has no messages to fork at.
    #[error("session {0} has no messages to fork")]
    EmptySession(String),
    /// A destructive command needs a confirmation that cannot be asked for.
    #[error("refusing to {action} without confirmation: stdin is not a terminal; pass --yes")]
    NeedsConfirmation {
        /// What would have been done, e.g. `delete session ses_…`.
        action: String,
    },
    /// The user answered no.
    #[error("cancelled; nothing was changed")]
    Cancelled,
    /// An import file is not a Scribe export; nothing was imported.
    #[error("malformed import file {}: {reason}; nothing was imported", path.display())]
    MalformedImport {
        /// The file.
        path: PathBuf,
        /// Where and why (`line 3: expected value at column 1`).
        reason: String,
    },
    /// Reading an input file failed.
    #[error("cannot read {}", path.display())]
    ReadFile {
        /// The file.
        path: PathBuf,
        /// What the operating system said.
        #[source]
        source: std::io::Error,
    },
    /// Writing an output file failed.
    #[error("cannot write {}", path.display())]
    WriteFile {
        /// The file.
        path: PathBuf,
        /// What the operating system said.
        #[source]
        source: std::io::Error,
    },
    /// An import that stored nothing could not remove the database file it created.
    #[error("nothing was imported, and the new {} could not be removed; delete it", path.display())]
    RemoveNew {
        /// The file.
        path: PathBuf,
        /// What the operating system said.
        #[source]
        source: std::io::Error,
    },
    /// Ctrl-C stopped the command where nothing was half done; what it did is said in
    /// the message (exit status [`crate::interrupt::EXIT`]).
    #[error("interrupted: {0}")]
    Interrupted(String),
    /// `db copy`'s scratch name beside a new target is taken (by a copy that was killed).
    #[error("{} is in the way of the copy (left by a copy that was killed?); remove it and copy again", path.display())]
    CopyScratchExists {
        /// The sibling's path.
        path: PathBuf,
    },
    /// `db copy` could not give the finished copy the target's name.
    #[error("cannot move the copy {} to {}", from.display(), to.display())]
    MoveCopy {
        /// The finished copy.
        from: PathBuf,
        /// The target.
        to: PathBuf,
        /// What the file system said.
        #[source]
        source: std::io::Error,
    },
    /// Some sessions of an import failed; the others were imported.
    #[error("{failed} of {total} sessions could not be imported (see above)")]
    ImportIncomplete {
        /// How many failed.
        failed: usize,
        /// How many the file holds.
        total: usize,
    },
    /// `list` or `export --all` left out sessions, or `search` hits, whose stored rows
    /// cannot be read (each named above it); the others were listed, written or shown.
    #[error(
        "{count} {what}{} could not be read and {} left out of {from} (see above); \
         `scribe db check` names the values to set right",
        if *count == 1 { "" } else { "s" },
        if *count == 1 { "was" } else { "were" }
    )]
    LeftOut {
        /// How many were left out.
        count: usize,
        /// What they are: `session`, `search hit`.
        what: &'static str,
        /// What they were left out of: `the list`, `the export`.
        from: &'static str,
    },
    /// Some files of an `import --from`, or some sessions of its files, failed (listed in
    /// its report); the others were imported.
    #[error("{} could not be imported (see above)", import_failures(*failed, *total, *sessions))]
    ImportFilesFailed {
        /// How many files failed.
        failed: usize,
        /// How many files were found.
        total: u64,
        /// How many sessions of files that were read failed.
        sessions: usize,
    },
    /// The PATHs given to `import --from` hold none of the agent's history.
    #[error("no {agent} history in {paths} ({keeps}); check the PATH, or --from")]
    NoHistoryIn {
        /// The agent (`claude-code`).
        agent: String,
        /// The PATHs, as given.
        paths: String,
        /// What the agent's history looks like and where it keeps it.
        keeps: &'static str,
    },
    /// The database's consistency checks found problems.
    #[error("database check failed: {0}")]
    CheckFailed(String),
    /// The demo could not run.
    #[error("demo failed: {what}")]
    Demo {
        /// What it was doing, or what went wrong.
        what: String,
        /// The failure behind it, when there is one.
        #[source]
        source: Option<Box<dyn std::error::Error + Send + Sync>>,
    },
    /// Importing an agent's history failed.
    #[error(transparent)]
    History(#[from] scribe_import::ImportError),
    /// Writing the output failed (e.g. a closed pipe).
    #[error("cannot write output")]
    Output(#[from] std::io::Error),
    /// Encoding JSON output failed.
    #[error("cannot encode output")]
    Json(#[from] serde_json::Error),
}

/// How many characters of what the user typed an error repeats.
const ECHO_CHARS: usize = 80;

/// What the user typed, quoted and escaped, cut to [`ECHO_CHARS`] characters: a pasted
/// 100 KB argument that names nothing is not printed back whole (as `search` cuts its
/// "no matches for …").
fn echo(typed: &str) -> String {
    format!("{:?}", scribe_server::json::cut(typed, ECHO_CHARS))
}

/// `err` and its sources joined with `: `, skipping a source whose text its parent
/// already shows ([`scribe_agent::error_chain`]), on one line.
pub fn one_line(err: &dyn std::error::Error) -> String {
    scribe_agent::error_chain(err)
        .lines()
        .collect::<Vec<_>>()
        .join(" ")
}

/// Names on stderr a session that `list` or `export --all` left out, or a `search` hit
/// ([`CliError::LeftOut`] counts them): its id when known (`None` when its own row is the
/// unreadable one, which `err` then names; `what` says what it is: `a session`, `a search
/// hit`), and why.
pub fn report_left_out(what: &str, id: Option<&str>, err: &dyn std::error::Error) {
    let why = one_line(err);
    match id {
        Some(id) => eprintln!("left out {id}: {why}"),
        None => eprintln!("left out {what}: {why}"),
    }
}

/// Whether `err` is a write to a closed pipe (`scribe list | head`), which is not a failure:
/// an [`std::io::Error`] of kind `BrokenPipe` anywhere in its chain (an export streams
/// each session from inside the session service, which wraps what its writer returned).
pub fn is_broken_pipe(err: &CliError) -> bool {
    let mut next: Option<&(dyn std::error::Error + 'static)> = Some(err);
    while let Some(err) = next {
        let kind = err
            .downcast_ref::<std::io::Error>()
            .map(std::io::Error::kind)
            // JSON is streamed to stdout, so a closed pipe surfaces as an encoding error.
            .or_else(|| err.downcast_ref::<serde_json::Error>()?.io_error_kind());
        if kind == Some(std::io::ErrorKind::BrokenPipe) {
            return true;
        }
        next = err.source();
    }
    false
}

/// What failed in an `import --from`: "2 of 10 files", "1 session", or both.
fn import_failures(files: usize, total: u64, sessions: usize) -> String {
    let files = (files > 0).then(|| format!("{files} of {total} files"));
    let sessions = (sessions > 0).then(|| {
        if sessions == 1 {
            "1 session".to_owned()
        } else {
            format!("{sessions} sessions")
        }
    });
    match (files, sessions) {
        (Some(f), Some(s)) => format!("{f} and {s}"),
        (Some(f), None) => f,
        (None, Some(s)) => s,
        (None, None) => "nothing".to_owned(),
    }
}
