//! One module per subcommand; `run` dispatches.

pub mod archive;
pub mod completions;
pub mod db;
pub mod delete;
pub mod demo;
pub mod export;
pub mod fork;
pub mod import;
pub mod import_history;
pub mod list;
pub mod prune;
pub mod rename;
pub mod search;
pub mod serve;
pub mod show;
pub mod sources;
pub mod stats;

use crate::cli::{Cli, Command};
use crate::context::{Access, Context};
use crate::error::CliError;
use crate::location;

/// Runs the parsed command line.
pub fn run(cli: Cli) -> Result<(), CliError> {
    match cli.command {
        Command::Completions(cmd) => return cmd.run(),
        Command::DemoCheck(cmd) => return cmd.run(),
        _ => {}
    }
    let path = location::database_path(cli.db)?;
    match cli.command {
        Command::Db(command) => return db::run(command, &path),
        Command::Serve(cmd) => return cmd.run(&path),
        _ => {}
    }
    let access = match &cli.command {
        Command::List(_)
        | Command::Show(_)
        | Command::Search(_)
        | Command::Stats(_)
        | Command::Export(_)
        | Command::Sources(_) => Access::Read,
        _ => Access::Write,
    };
    let ctx = Context::open(&path, access)?;
    match cli.command {
        Command::List(cmd) => cmd.run(&ctx),
        Command::Show(cmd) => cmd.run(&ctx),
        Command::Search(cmd) => cmd.run(&ctx),
        Command::Stats(cmd) => cmd.run(&ctx),
        Command::Export(cmd) => cmd.run(&ctx),
        Command::Import(cmd) => cmd.run(&ctx),
        Command::Sources(cmd) => cmd.run(&ctx),
        Command::Rename(cmd) => cmd.run(&ctx),
        Command::Fork(cmd) => cmd.run(&ctx),
        Command::Archive(cmd) => cmd.run(&ctx),
        Command::Unarchive(cmd) => cmd.run(&ctx),
        Command::Delete(cmd) => cmd.run(&ctx),
        Command::Prune(cmd) => cmd.run(&ctx),
        Command::Demo(cmd) => cmd.run(&ctx),
        Command::Db(_) | Command::Serve(_) | Command::Completions(_) | Command::DemoCheck(_) => {
            Ok(())
        }
    }
}
