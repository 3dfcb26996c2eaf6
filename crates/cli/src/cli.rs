//! The command line, declared with clap; doc comments are the help text.

use std::path::PathBuf;

use clap::builder::TypedValueParser as _;
use clap::{Parser, Subcommand};

use crate::commands::archive::{ArchiveCmd, UnarchiveCmd};
use crate::commands::completions::CompletionsCmd;
use crate::commands::db::DbCommand;
use crate::commands::delete::DeleteCmd;
use crate::commands::demo::{DemoCheckCmd, DemoCmd};
use crate::commands::export::ExportCmd;
use crate::commands::fork::ForkCmd;
use crate::commands::import::ImportCmd;
use crate::commands::list::ListCmd;
use crate::commands::prune::PruneCmd;
use crate::commands::rename::RenameCmd;
use crate::commands::search::SearchCmd;
use crate::commands::show::ShowCmd;
use crate::commands::sources::SourcesCmd;
use crate::commands::stats::StatsCmd;
use crate::commands::statusline::StatuslineCmd;

/// Scribe keeps every conversation of an AI coding agent in one SQLite file (or one
/// PostgreSQL database shared by many hosts).
///
/// A `<SESSION>` argument is a session id, a unique id prefix (one a session shares only
/// with its sub-agents, whose ids extend its own, names the session; `PREFIX:REST` names a
/// sub-agent `ID:REST…` of the session PREFIX names), or a title (a title names the newest
/// of its lineage `t`, `t #2`, …; `t #2` names only that one). Data goes to stdout,
/// progress and errors to stderr. Exit status: 0 success, 1 failure, 2 usage error, 130
/// stopped by Ctrl-C.
#[derive(Debug, Parser)]
#[command(name = "scribe", version, propagate_version = true)]
pub struct Cli {
    /// The database: an SQLite file, or a PostgreSQL `postgres://` URL or libpq keyword
    /// string [default: the platform data directory's scribe/scribe.db]
    #[arg(long, global = true, env = "SCRIBE_DB", value_name = "PATH|URL",
          value_parser = clap::builder::OsStringValueParser::new()
              .try_map(crate::location::parse_db_os))]
    pub db: Option<PathBuf>,

    #[command(subcommand)]
    pub command: Command,
}

/// What to do.
#[derive(Debug, Subcommand)]
pub enum Command {
    /// Run a scripted coding session through the real agent loop (offline), then show
    /// what was stored.
    Demo(DemoCmd),
    /// List sessions, newest first.
    #[command(alias = "ls")]
    List(ListCmd),
    /// Show a session's conversation.
    Show(ShowCmd),
    /// Search every conversation.
    Search(SearchCmd),
    /// Token usage and cost by model, source, day, week, month, project directory or 5-hour block.
    Stats(StatsCmd),
    /// Export sessions as JSON, JSON Lines or Markdown.
    Export(ExportCmd),
    /// Import sessions from an export file, or with --from an agent's own history.
    Import(ImportCmd),
    /// The agents' histories found on this machine and when each was last imported.
    Sources(SourcesCmd),
    /// One line for an agent's status bar: the session's, today's and the open 5-hour block's cost.
    Statusline(StatuslineCmd),
    /// Give a session a new title.
    Rename(RenameCmd),
    /// Copy a conversation up to a message into a new session.
    Fork(ForkCmd),
    /// Archive a session (hidden from `list`, not deleted).
    Archive(ArchiveCmd),
    /// Unarchive a session.
    Unarchive(UnarchiveCmd),
    /// Delete a session.
    #[command(alias = "rm")]
    Delete(DeleteCmd),
    /// Delete sessions that ended long ago.
    Prune(PruneCmd),
    /// Inspect, check or maintain the database itself.
    #[command(subcommand)]
    Db(DbCommand),
    /// Print a shell completion script.
    Completions(CompletionsCmd),
    /// Serve a web viewer of every conversation, search and cost (read-only).
    Serve(crate::commands::serve::Cmd),
    /// The check command of the demo's project.
    #[command(name = "__demo-check", hide = true)]
    DemoCheck(DemoCheckCmd),
}
