//! `scribe`: the command-line tool over a Scribe database.
//!
//! Exit codes: 0 success, 1 a failure (one line on stderr), 2 a usage error (from clap).

mod cli;
mod commands;
mod error;
mod location;

use std::process::ExitCode;

use clap::Parser;

fn main() -> ExitCode {
    let cli = cli::Cli::parse();
    match commands::run(cli) {
        Ok(()) => ExitCode::SUCCESS,
        Err(err) => {
            eprintln!("scribe: {}", error::one_line(&err));
            ExitCode::FAILURE
        }
    }
}
