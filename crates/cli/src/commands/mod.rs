//! One module per subcommand; `run` dispatches.

pub mod archive;
pub mod completions;
pub mod db;
pub mod delete;
pub mod demo;
pub mod export;
pub mod export_file;
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
pub mod statusline;

use crate::cli::{Cli, Command};
use crate::context::{Access, Context, NewDatabase};
use crate::error::CliError;
use crate::location;

/// Runs the parsed command line.
pub fn run(cli: Cli) -> Result<(), CliError> {
    match cli.command {
        Command::Completions(cmd) => return cmd.run(),
        Command::DemoCheck(cmd) => return cmd.run(),
        _ => {}
    }
    let db = location::database_path(cli.db)?;
    match cli.command {
        Command::Db(command) => return db::run(command, &db),
        Command::Serve(cmd) => return cmd.run(&db.path),
        _ => {}
    }
    // An import reads and checks its input before the database is opened: one that fails
    // on its input (a file that is not there or not an export) creates no database.
    // One that stores nothing (every session of the export failed, no history found)
    // leaves no database it created behind either (`context::NewDatabase`).
    if let Command::Import(cmd) = cli.command {
        let import = cmd.prepare()?;
        let new = import
            .creates()
            .then(|| NewDatabase::before_open(&db.path))
            .flatten();
        let ctx = open(&db, import.access(), import.dry_run())?;
        let result = import.run(&ctx);
        let Some(new) = new else { return result };
        // Counted before closing: the last connection's close deletes the `-wal`.
        let sessions = ctx
            .db
            .read(|tx| -> scribe_db::Result<i64> { tx.q().count_sessions() });
        drop(ctx);
        let new_path = new.file().to_owned();
        let cleanup = match sessions {
            Ok(0) => new.remove().map(|()| {
                eprintln!(
                    "scribe: nothing was imported, so no database was created at {}",
                    new_path.display()
                );
            }),
            Ok(_) => Ok(()),
            Err(err) => Err(err.into()),
        };
        // The import's own failure is the news; a failed clean-up only when it succeeded.
        return result.and(cleanup);
    }
    // Only a command that adds to the store creates a missing database; see
    // `context::open_database` and the README's CLI tour.
    let access = match &cli.command {
        Command::List(_)
        | Command::Show(_)
        | Command::Search(_)
        | Command::Stats(_)
        | Command::Export(_)
        | Command::Sources(_) => Access::Read,
        Command::Demo(_) | Command::Statusline(_) => Access::Create,
        _ => Access::Change,
    };
    let ctx = open(&db, access, false)?;
    match cli.command {
        Command::List(cmd) => cmd.run(&ctx),
        Command::Show(cmd) => cmd.run(&ctx),
        Command::Search(cmd) => cmd.run(&ctx),
        Command::Stats(cmd) => cmd.run(&ctx),
        Command::Export(cmd) => cmd.run(&ctx),
        Command::Sources(cmd) => cmd.run(&ctx),
        Command::Statusline(cmd) => cmd.run(&ctx),
        Command::Rename(cmd) => cmd.run(&ctx),
        Command::Fork(cmd) => cmd.run(&ctx),
        Command::Archive(cmd) => cmd.run(&ctx),
        Command::Unarchive(cmd) => cmd.run(&ctx),
        Command::Delete(cmd) => cmd.run(&ctx),
        Command::Prune(cmd) => cmd.run(&ctx),
        Command::Demo(cmd) => cmd.run(&ctx),
        Command::Db(_)
        | Command::Serve(_)
        | Command::Import(_)
        | Command::Completions(_)
        | Command::DemoCheck(_) => Ok(()),
    }
}

/// Opens the database for a command that needs `access`; `dry_run` is an import's
/// `--dry-run`, which reads only and writes nothing (`Context::open_dry_run`).
fn open(db: &location::DbPath, access: Access, dry_run: bool) -> Result<Context, CliError> {
    if dry_run {
        return Context::open_dry_run(db);
    }
    match Context::open(db, access) {
        // A first run: a reading command answers as for an empty store, saying why.
        Err(CliError::NothingYet { path }) if access == Access::Read => {
            eprintln!("scribe: {}", CliError::NothingYet { path });
            Context::empty()
        }
        other => other,
    }
}
