//! `scribe`: the command-line tool over a Scribe database.
//!
//! Exit codes: 0 success, 1 a failure (one line on stderr), 2 a usage error (from clap),
//! 130 Ctrl-C stopped `import FILE` or `db copy` (see `interrupt`).

mod cli;
mod commands;
mod context;
mod error;
mod interrupt;
mod json;
mod location;
mod ui;

use std::process::ExitCode;

use clap::Parser as _;

fn main() -> ExitCode {
    let args = commands::search::escape_query_words(std::env::args_os().collect());
    let cli = match cli::Cli::try_parse_from(&args) {
        Ok(cli) => cli,
        Err(err) => match without_database_env(&args) {
            Some(cli) => cli,
            None => return clap_exit(&without_env_in_usage(err, &args)),
        },
    };
    match commands::run(cli) {
        Ok(()) => ExitCode::SUCCESS,
        // `scribe list | head`: the reader has what it wanted.
        Err(err) if error::is_broken_pipe(&err) => ExitCode::SUCCESS,
        Err(err @ error::CliError::Interrupted(_)) => {
            eprintln!("scribe: {err}");
            ExitCode::from(interrupt::EXIT)
        }
        Err(err) => {
            eprintln!("scribe: {}", error::one_line(&err));
            ExitCode::FAILURE
        }
    }
}

/// The command line parsed without `SCRIBE_DB`, when that is what failed it and the
/// variable is not used: `--db` was given (it comes first), or the command reads no
/// database (`completions`, `db copy`, which names its own stores). clap checks the
/// variable's value even then, so a `SCRIBE_DB` that is not a database location
/// (`mysql://…`) failed `scribe --db good.db list` and `scribe completions bash`.
fn without_database_env(args: &[std::ffi::OsString]) -> Option<cli::Cli> {
    use clap::{CommandFactory as _, FromArgMatches as _};
    std::env::var_os("SCRIBE_DB")?;
    let matches = cli::Cli::command()
        .mut_arg("db", |db| db.env(None))
        .try_get_matches_from(args)
        .ok()?;
    let cli = cli::Cli::from_arg_matches(&matches).ok()?;
    let reads_no_database = match &cli.command {
        cli::Command::Completions(_) => true,
        cli::Command::Db(db) => matches!(db, commands::db::DbCommand::Copy(_)),
        _ => false,
    };
    (reads_no_database || cli.db.is_some()).then_some(cli)
}

/// `err` as it reads when `--db` came from `SCRIBE_DB` rather than the command line: clap
/// lists an argument taken from the environment in the usage line of an error as if it
/// had been typed (`Usage: scribe search --db <PATH|URL> <QUERY>...` for a missing
/// query), which reads as though `--db` were required. The same command line is parsed
/// again without the variable; its error is used when it is the same mistake (not one
/// about `SCRIBE_DB`'s own value).
fn without_env_in_usage(err: clap::Error, args: &[std::ffi::OsString]) -> clap::Error {
    use clap::CommandFactory as _;
    if !err.use_stderr() || std::env::var_os("SCRIBE_DB").is_none() {
        return err;
    }
    let plain = cli::Cli::command()
        .mut_arg("db", |db| db.env(None))
        .try_get_matches_from(args);
    match plain {
        Err(again) if again.kind() == err.kind() => again,
        _ => err,
    }
}

/// Prints what clap stopped at (help, version or a usage error) and its status, as
/// `clap::Error::exit` would, except that help or version that cannot be written
/// (`scribe --help > /dev/full`) is a failure, not a silent success; a closed pipe is not.
fn clap_exit(err: &clap::Error) -> ExitCode {
    match err.print() {
        Err(io) if err.use_stderr() || io.kind() == std::io::ErrorKind::BrokenPipe => {}
        Err(io) => {
            eprintln!("scribe: cannot write output: {io}");
            return ExitCode::FAILURE;
        }
        Ok(()) => {}
    }
    u8::try_from(err.exit_code()).map_or(ExitCode::FAILURE, ExitCode::from)
}
