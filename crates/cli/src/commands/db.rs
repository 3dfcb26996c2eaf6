//! `scribe db info | migrate | check | reindex | vacuum | copy`: thin reports over
//! `Database`'s own maintenance API (no SQL here). `info` and `check` also work on a database this process
//! may only read. Every subcommand runs on SQLite and PostgreSQL.

use std::io::Write;
use std::path::{Path, PathBuf};

use clap::{Args, Subcommand};
use scribe_db::{Backend, Database, DbInfo, IndexStatus};

use crate::context::{Access, NewDatabase, open_database};
use crate::error::CliError;
use crate::interrupt::Interrupt;
use crate::location::DbPath;
use crate::ui;

/// Database maintenance.
#[derive(Debug, Subcommand)]
pub enum DbCommand {
    /// Show the database's backend and location, engine version, schema version, row
    /// counts and size.
    ///
    /// Migrates an older schema first; a database this process may not write is read as
    /// it is. A missing database is not created (`scribe db migrate` creates one).
    Info(InfoArgs),
    /// Create the database if needed and bring its schema up to date (on PostgreSQL under
    /// an advisory lock, so processes starting together migrate it once).
    Migrate,
    /// Check the database: on SQLite its integrity check, both search indexes against
    /// the parts they index (the index checks need write access) and every column for
    /// values of a kind Scribe cannot read (naming the rows); on PostgreSQL what plain
    /// SQL can see (schema version, constraints and indexes not valid, the search indexes,
    /// parts against their messages), listing what it skips. Exit 1 when anything is
    /// wrong.
    Check,
    /// Rebuild the search indexes from the parts they index, in one transaction: what
    /// `scribe db check` reports as a search index that does not match its parts is
    /// repaired so, and nothing stored is lost (the indexes hold only what the parts
    /// give). On SQLite both FTS5 indexes, on PostgreSQL the search documents.
    Reindex,
    /// Reclaim the space of deleted rows: on SQLite rebuild the file (and truncate its
    /// write-ahead log); on PostgreSQL run VACUUM (ANALYZE) on each of Scribe's tables,
    /// which makes dead rows' space reusable and refreshes the planner's statistics
    /// without blocking readers or writers.
    Vacuum,
    /// Copy a whole store into an empty one, between backends: an SQLite file to
    /// PostgreSQL or back (`scribe db copy ~/scribe.db postgres://me@host/scribe`).
    ///
    /// Every row goes over as stored (ids, times, JSON, amounts), in one transaction on
    /// the target, which must be empty; both are brought to this build's schema first.
    /// A new SQLite target is written under a hidden name beside it and takes its name
    /// once complete, so a copy that fails or that Ctrl-C stops (exit 130) leaves
    /// nothing there.
    Copy(CopyArgs),
}

/// Options of `scribe db copy`.
#[derive(Debug, Args)]
pub struct CopyArgs {
    /// The store to copy: an SQLite file, a `postgres://` URL or a libpq keyword string.
    #[arg(value_parser = store_location)]
    pub from: String,
    /// The empty store to fill, in the same forms.
    #[arg(value_parser = store_location)]
    pub to: String,
}

/// A FROM or TO of `db copy` as `--db` takes it (a URL without a backend is a usage
/// error), except that it cannot be empty: `--db ""` means the default database, but an
/// empty FROM or TO names nothing.
fn store_location(text: &str) -> Result<String, String> {
    if text.trim().is_empty() {
        return Err("give an SQLite file or a postgres:// URL".to_owned());
    }
    crate::location::parse_db_path(text).map(|_| text.to_owned())
}

/// Options of `scribe db info`.
#[derive(Debug, Args)]
pub struct InfoArgs {
    /// Print JSON instead of text.
    #[arg(long)]
    pub json: bool,
}

/// Runs a `db` subcommand against the database at `db`. Only `migrate` (and `copy`'s
/// target) creates a missing database.
pub fn run(command: DbCommand, db: &DbPath) -> Result<(), CliError> {
    let mut out = std::io::stdout().lock();
    match command {
        DbCommand::Info(args) => {
            let info = open_database(db, Access::Read)?.info()?;
            if args.json {
                crate::json::print(&mut out, &info_json(&info))?;
            } else {
                write_info(&mut out, &info)?;
            }
        }
        DbCommand::Migrate => {
            let db = open_database(db, Access::Create)?;
            let report = db.migration_report();
            if report.applied.is_empty() {
                writeln!(
                    out,
                    "{}: schema is up to date (version {})",
                    db.location(),
                    report.to
                )?;
            } else {
                for m in &report.applied {
                    writeln!(out, "applied V{}__{}", m.version, m.name)?;
                }
                writeln!(
                    out,
                    "{}: migrated schema from version {} to {}",
                    db.location(),
                    report.from,
                    report.to
                )?;
            }
        }
        DbCommand::Check => check(&mut out, db)?,
        DbCommand::Reindex => {
            let db = open_database(db, Access::Change)?;
            let started = std::time::Instant::now();
            let indexes = db.rebuild_search_indexes()?;
            writeln!(
                out,
                "{}: rebuilt {} from the parts in {:.1} s",
                db.location(),
                indexes.join(" and "),
                started.elapsed().as_secs_f64()
            )?;
        }
        DbCommand::Vacuum => vacuum(&mut out, db)?,
        DbCommand::Copy(args) => copy(&mut out, &args)?,
    }
    Ok(())
}

/// Runs every check, printing one line each, and fails if any found a problem.
fn check(out: &mut impl Write, db: &DbPath) -> Result<(), CliError> {
    let report = open_database(db, Access::Read)?.check()?;
    if report.integrity_check.is_empty() {
        // PostgreSQL: no such check (see `skipped`).
    } else if report.integrity_check == ["ok"] {
        writeln!(out, "{:<18} ok", "integrity_check")?;
    } else {
        writeln!(
            out,
            "{:<18} {}",
            "integrity_check",
            report.integrity_check.join("; ")
        )?;
    }
    for index in &report.indexes {
        match &index.status {
            IndexStatus::Ok => writeln!(out, "{:<18} ok", index.index)?,
            IndexStatus::Mismatch(message) => writeln!(
                out,
                "{:<18} index does not match the parts table: {message}",
                index.index
            )?,
            IndexStatus::SkippedReadOnly => writeln!(
                out,
                "{:<18} skipped: the database is not writable here",
                index.index
            )?,
            IndexStatus::Missing(message) => writeln!(out, "{:<18} {message}", index.index)?,
        }
    }
    for check in &report.checks {
        match &check.problem {
            None => writeln!(out, "{:<18} ok", check.name)?,
            Some(problem) => writeln!(out, "{:<18} {problem}", check.name)?,
        }
    }
    for skipped in &report.skipped {
        writeln!(out, "skipped: {skipped}")?;
    }
    if report.is_ok() {
        return Ok(());
    }
    let mut failed: Vec<&str> = Vec::new();
    if !report.integrity_check.is_empty() && report.integrity_check != ["ok"] {
        failed.push("integrity_check");
    }
    failed.extend(
        report
            .indexes
            .iter()
            .filter(|i| matches!(i.status, IndexStatus::Mismatch(_) | IndexStatus::Missing(_)))
            .map(|i| i.index),
    );
    failed.extend(
        report
            .checks
            .iter()
            .filter(|c| c.problem.is_some())
            .map(|c| c.name),
    );
    let advice = match report.backend {
        // Only values another program wrote: the rows are named, and a fix is an UPDATE
        // or a DELETE.
        Backend::Sqlite if report.only_values_wrong() => {
            let mut advice =
                "set the values named above right, or delete their rows, with sqlite3".to_owned();
            if failed.contains(&"foreign_keys") {
                // Without it (the shell's default) a delete leaves what it would take.
                advice.push_str(" (run `PRAGMA foreign_keys = ON` first)");
            }
            if failed
                .iter()
                .any(|c| matches!(*c, "column_types" | "constraints"))
            {
                advice.push_str("; until then every read of those rows fails");
            }
            advice
        }
        // Only the search indexes: they hold nothing but what the parts give.
        Backend::Sqlite
            if failed
                .iter()
                .all(|c| report.indexes.iter().any(|i| i.index == *c)) =>
        {
            "`scribe db reindex` rebuilds the search indexes from the parts".to_owned()
        }
        Backend::Sqlite => {
            "`scribe db vacuum` does not repair the file, restore from an export".to_owned()
        }
        Backend::Postgres => {
            "see the lines above; `scribe db migrate` brings an older schema up".to_owned()
        }
    };
    Err(CliError::CheckFailed(format!(
        "{}; {advice}",
        failed.join(", ")
    )))
}

/// Copies one store into another, with a progress bar per table.
///
/// Into a new SQLite file the copy is written to a hidden sibling
/// (`.NAME.scribe-copy-PID`) that takes the target's name only once the copy is
/// committed and closed: a copy that fails, or that Ctrl-C stops, leaves nothing at the
/// target (and removes the sibling), so a later `db copy` to it just works. Into an
/// existing store (an empty SQLite file, PostgreSQL) the copy is one transaction there,
/// so a stopped or failed one leaves the rows as they were.
fn copy(out: &mut impl Write, args: &CopyArgs) -> Result<(), CliError> {
    let interrupt = Interrupt::catch();
    // The source must exist (a mistyped one is not an empty store to copy).
    let from = Database::open_existing(&args.from)?;
    let target = Path::new(&args.to);
    let new = NewDatabase::before_open(target);
    let sibling = match &new {
        Some(new) => Some(copy_sibling(new.file())?),
        None => None,
    };
    // What is created is the sibling (and the directories above it), removed again
    // unless the copy is there in the end.
    let created = match &sibling {
        Some(sibling) => NewDatabase::before_open(sibling),
        None => None,
    };
    let to = Database::open(sibling.as_deref().unwrap_or(target))?;
    let stopped = |created: Option<NewDatabase>| -> CliError {
        let what = match created {
            None => "nothing was copied (the copy is one transaction)".to_owned(),
            Some(created) => match created.remove() {
                Ok(()) => format!(
                    "nothing was copied, and no database was created at {}",
                    target.display()
                ),
                Err(cleanup) => format!("nothing was copied; {}", crate::error::one_line(&cleanup)),
            },
        };
        CliError::Interrupted(what)
    };
    let mut bar: Option<(String, indicatif::ProgressBar)> = None;
    let copied = scribe_db::copy::copy(&from, &to, |p| {
        if interrupt.happened() {
            // Nothing of the copy is committed yet: it stops, and its transaction is
            // rolled back.
            return std::ops::ControlFlow::Break(());
        }
        if bar.as_ref().is_none_or(|(table, _)| *table != p.table) {
            if let Some((_, done)) = bar.take() {
                done.finish_and_clear();
            }
            let fresh = crate::ui::progress(usize::try_from(p.total).unwrap_or(0), "copying");
            fresh.set_message(format!("copying {}", p.table));
            bar = Some((p.table.clone(), fresh));
        }
        if let Some((_, current)) = &bar {
            current.set_position(p.done);
        }
        std::ops::ControlFlow::Continue(())
    });
    if let Some((_, done)) = bar.take() {
        done.finish_and_clear();
    }
    let report = match (copied, created) {
        (Ok(report), created) => match created {
            // Stopped after the last batch: a new file is not kept half wanted.
            Some(created) if interrupt.happened() => {
                drop(to);
                return Err(stopped(Some(created)));
            }
            created => {
                // Closed first: the last close checkpoints the write-ahead log into the
                // file, which then moves to the target's name whole.
                let location = match (&sibling, created) {
                    (Some(sibling), Some(created)) => {
                        drop(to);
                        move_into_place(sibling, target, created)?;
                        std::path::absolute(target)
                            .unwrap_or_else(|_| target.to_owned())
                            .display()
                            .to_string()
                    }
                    _ => to.location().to_string(),
                };
                (report, location)
            }
        },
        (Err(scribe_db::Error::CopyStopped), created) => {
            drop(to);
            return Err(stopped(created));
        }
        (Err(err), None) => return Err(err.into()),
        (Err(err), Some(created)) => {
            drop(to);
            // The copy's failure is the news; a failed clean-up is reported alone only
            // when there is nothing to add it to.
            match created.remove() {
                Ok(()) => eprintln!(
                    "scribe: nothing was copied, so no database was created at {}",
                    target.display()
                ),
                Err(cleanup) => eprintln!("scribe: {}", crate::error::one_line(&cleanup)),
            }
            return Err(err.into());
        }
    };
    let (report, location) = report;
    for (table, rows) in &report.tables {
        let rows = i64::try_from(*rows).unwrap_or(i64::MAX);
        let word = if rows == 1 { "row" } else { "rows" };
        writeln!(out, "  {table:<16} {:>10} {word}", ui::grouped(rows))?;
    }
    writeln!(out, "copied {} to {location}", from.location())?;
    Ok(())
}

/// The hidden sibling a copy into the new SQLite file `file` is written to.
fn copy_sibling(file: &Path) -> Result<PathBuf, CliError> {
    let name = file.file_name().unwrap_or_default().to_string_lossy();
    let sibling = file.with_file_name(format!(".{name}.scribe-copy-{}", std::process::id()));
    // Left by a copy of this process id that was killed: never written into.
    if std::fs::symlink_metadata(&sibling).is_ok() {
        return Err(CliError::CopyScratchExists { path: sibling });
    }
    Ok(sibling)
}

/// Gives the closed, committed copy at `sibling` the name `target`, which must still be
/// free (linked, not renamed, so a file that appeared there meanwhile is never
/// replaced), then removes the sibling's own files (not the directories: the target is
/// in them now).
fn move_into_place(sibling: &Path, target: &Path, created: NewDatabase) -> Result<(), CliError> {
    let with = |path: &Path, suffix: &str| {
        let mut name = path.as_os_str().to_owned();
        name.push(suffix);
        PathBuf::from(name)
    };
    let moved = |source| CliError::MoveCopy {
        from: sibling.to_owned(),
        to: target.to_owned(),
        source,
    };
    match std::fs::hard_link(sibling, target) {
        Ok(()) => {}
        Err(err) if err.kind() == std::io::ErrorKind::AlreadyExists => return Err(moved(err)),
        // A file system without hard links: renamed, while the target is still free.
        Err(err) => {
            if std::fs::symlink_metadata(target).is_ok() {
                return Err(moved(err));
            }
            std::fs::rename(sibling, target).map_err(moved)?;
        }
    }
    // A write-ahead log the close did not fold into the file goes along.
    let wal = with(sibling, "-wal");
    if std::fs::metadata(&wal).is_ok_and(|m| m.len() > 0) {
        std::fs::rename(&wal, with(target, "-wal")).map_err(moved)?;
    }
    created.remove_files()
}
/// SQLite: rebuilds the file, then truncates the write-ahead log, and reports the size
/// change. PostgreSQL: vacuums and analyzes each table, and reports which, with their
/// size before and after.
fn vacuum(out: &mut impl Write, db: &DbPath) -> Result<(), CliError> {
    let db = open_database(db, Access::Change)?;
    let report = db.vacuum()?;
    let (before, after) = (
        human_bytes(report.bytes_before),
        human_bytes(report.bytes_after),
    );
    match report.backend {
        Backend::Sqlite => writeln!(out, "{}: {before} → {after}", db.location())?,
        Backend::Postgres => {
            writeln!(
                out,
                "{}: VACUUM (ANALYZE) of {} tables: {}",
                db.location(),
                report.tables.len(),
                report.tables.join(", ")
            )?;
            writeln!(
                out,
                "tables with their indexes: {before} → {after} (dead rows' space is \
                 reusable now; VACUUM FULL in psql returns it to the system, locking \
                 each table)"
            )?;
        }
    }
    Ok(())
}

fn write_info(out: &mut impl Write, info: &DbInfo) -> std::io::Result<()> {
    match info.backend {
        Backend::Sqlite => {
            let path = info
                .path
                .as_deref()
                .map_or_else(|| "(in memory)".to_owned(), |p| p.display().to_string());
            writeln!(out, "path            {path}")?;
        }
        Backend::Postgres => writeln!(out, "database        {}", info.location)?,
    }
    writeln!(out, "backend         {}", info.engine_version)?;
    writeln!(
        out,
        "schema version  {} (this build knows {})",
        info.schema_version, info.known_version
    )?;
    match info.backend {
        Backend::Sqlite => writeln!(
            out,
            "file size       {} (write-ahead log {})",
            human_bytes(info.file_size),
            human_bytes(info.wal_size.unwrap_or(0))
        )?,
        Backend::Postgres => writeln!(out, "database size   {}", human_bytes(info.file_size))?,
    }
    writeln!(out, "rows")?;
    for table in &info.tables {
        writeln!(out, "  {:<12}  {:>10}", table.table, table.rows)?;
    }
    Ok(())
}

fn info_json(info: &DbInfo) -> serde_json::Value {
    let tables: serde_json::Map<String, serde_json::Value> = info
        .tables
        .iter()
        .map(|t| (t.table.to_owned(), t.rows.into()))
        .collect();
    let backend = match info.backend {
        Backend::Sqlite => "sqlite",
        Backend::Postgres => "postgres",
    };
    serde_json::json!({
        "backend": backend,
        "engine_version": info.engine_version,
        "location": info.location,
        "path": info.path,
        "schema_version": info.schema_version,
        "known_version": info.known_version,
        "file_size": info.file_size,
        "wal_size": info.wal_size,
        "rows": tables,
    })
}

fn human_bytes(bytes: u64) -> String {
    const UNITS: [&str; 4] = ["KiB", "MiB", "GiB", "TiB"];
    if bytes < 1024 {
        return format!("{bytes} B");
    }
    #[allow(clippy::cast_precision_loss)] // display only
    let mut value = bytes as f64 / 1024.0;
    let mut unit = 0;
    while value >= 1024.0 && unit + 1 < UNITS.len() {
        value /= 1024.0;
        unit += 1;
    }
    format!("{value:.1} {}", UNITS[unit])
}

#[cfg(test)]
mod tests {
    use super::human_bytes;

    #[test]
    fn sizes_read_naturally() {
        assert_eq!(human_bytes(512), "512 B");
        assert_eq!(human_bytes(2048), "2.0 KiB");
        assert_eq!(human_bytes(5 * 1024 * 1024), "5.0 MiB");
    }
}
