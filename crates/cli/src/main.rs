//! `scribe`: the command-line tool over a Scribe database.
//!
//! Exit codes: 0 success, 1 a failure (one line on stderr), 2 a usage error (from clap).

mod cli;
mod commands;
mod context;
mod error;
mod json;
mod location;
mod ui;

use std::process::ExitCode;

use clap::Parser;

fn main() -> ExitCode {
    let args = commands::search::escape_query_words(std::env::args_os().collect());
    let cli = cli::Cli::parse_from(args);
    match commands::run(cli) {
        Ok(()) => ExitCode::SUCCESS,
        // `scribe list | head`: the reader has what it wanted.
        Err(err) if error::is_broken_pipe(&err) => ExitCode::SUCCESS,
        Err(err) => {
            eprintln!("scribe: {}", error::one_line(&err));
            ExitCode::FAILURE
        }
    }
}
