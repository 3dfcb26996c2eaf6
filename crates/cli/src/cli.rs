//! The command line, declared with clap; doc comments are the help text.

use std::path::PathBuf;

use clap::{Parser, Subcommand};

use crate::commands::db::DbCommand;

/// Scribe keeps every conversation of an AI coding agent in one SQLite file.
#[derive(Debug, Parser)]
#[command(name = "scribe", version, propagate_version = true)]
pub struct Cli {
    /// The database file [default: the platform data directory's scribe/scribe.db]
    #[arg(long, global = true, env = "SCRIBE_DB", value_name = "PATH")]
    pub db: Option<PathBuf>,

    #[command(subcommand)]
    pub command: Command,
}

/// What to do.
#[derive(Debug, Subcommand)]
pub enum Command {
    /// Inspect or upgrade the database itself.
    #[command(subcommand)]
    Db(DbCommand),
}
