//! One module per subcommand; `run` dispatches.

pub mod db;

use crate::cli::{Cli, Command};
use crate::error::CliError;
use crate::location;

/// Runs the parsed command line.
pub fn run(cli: Cli) -> Result<(), CliError> {
    let path = location::database_path(cli.db)?;
    match cli.command {
        Command::Db(command) => db::run(command, &path),
    }
}
