//! `scribe db info | migrate | check | vacuum`.
//!
//! `check` and `vacuum` work on the file rather than on Scribe's data, so they use
//! rusqlite's pragma API and a plain connection: SQLite cannot vacuum inside a transaction,
//! which is all `Database` hands out.

use std::io::Write;
use std::path::Path;

use clap::{Args, Subcommand};
use scribe_db::queries as q;
use scribe_db::rusqlite;
use scribe_db::{Database, DbInfo};

use crate::error::CliError;

/// Database maintenance.
#[derive(Debug, Subcommand)]
pub enum DbCommand {
    /// Show the database's path, schema version, row counts and size.
    ///
    /// Like every command, this creates the database if it is missing and migrates an
    /// older schema first.
    Info(InfoArgs),
    /// Create the database if needed and bring its schema up to date.
    Migrate,
    /// Check the database: SQLite's integrity check and both search indexes against the
    /// parts they index. Exit 1 when anything is wrong.
    Check,
    /// Rebuild the file to reclaim the space of deleted rows.
    Vacuum,
}

/// Options of `scribe db info`.
#[derive(Debug, Args)]
pub struct InfoArgs {
    /// Print JSON instead of text.
    #[arg(long)]
    pub json: bool,
}

/// Runs a `db` subcommand against the database at `path`.
pub fn run(command: DbCommand, path: &Path) -> Result<(), CliError> {
    let mut out = std::io::stdout().lock();
    match command {
        DbCommand::Info(args) => {
            let info = Database::open(path)?.info()?;
            if args.json {
                writeln!(out, "{}", serde_json::to_string_pretty(&info_json(&info))?)?;
            } else {
                write_info(&mut out, &info)?;
            }
        }
        DbCommand::Migrate => {
            let db = Database::open(path)?;
            let report = db.migration_report();
            if report.applied.is_empty() {
                writeln!(
                    out,
                    "{}: schema is up to date (version {})",
                    path.display(),
                    report.to
                )?;
            } else {
                for m in &report.applied {
                    writeln!(out, "applied V{}__{}", m.version, m.name)?;
                }
                writeln!(
                    out,
                    "{}: migrated schema from version {} to {}",
                    path.display(),
                    report.from,
                    report.to
                )?;
            }
        }
        DbCommand::Check => check(&mut out, path)?,
        DbCommand::Vacuum => vacuum(&mut out, path)?,
    }
    Ok(())
}

/// One search index's FTS5 integrity check.
type IndexCheck = fn(&rusqlite::Connection) -> rusqlite::Result<()>;

/// Runs every check, printing one line each, and fails if any found a problem.
fn check(out: &mut impl Write, path: &Path) -> Result<(), CliError> {
    let db = Database::open(path)?;
    let mut problems = Vec::new();
    let integrity = db.read(|conn| {
        let mut rows = Vec::new();
        conn.pragma_query(None, "integrity_check", |row| {
            rows.push(row.get::<_, String>(0)?);
            Ok(())
        })?;
        Ok(rows)
    })?;
    if integrity == ["ok"] {
        writeln!(out, "integrity_check    ok")?;
    } else {
        writeln!(out, "integrity_check    {}", integrity.join("; "))?;
        problems.push("integrity_check".to_owned());
    }
    let indexes: [(&str, IndexCheck); 2] = [
        ("parts_fts", q::check_word_index),
        ("parts_fts_trigram", q::check_trigram_index),
    ];
    for (name, run) in indexes {
        // FTS5's check is an INSERT command, so it runs as a (rolled back) write; a
        // mismatch is reported as SQLITE_CORRUPT_VTAB, which is a finding, not a failure.
        match db.write(|tx| Ok(run(tx)?)) {
            Ok(()) => writeln!(out, "{name:<18} ok")?,
            Err(scribe_db::Error::Storage(err)) if is_corrupt(&err) => {
                writeln!(
                    out,
                    "{name:<18} index does not match the parts table: {err}"
                )?;
                problems.push(name.to_owned());
            }
            Err(err) => return Err(err.into()),
        }
    }
    if problems.is_empty() {
        Ok(())
    } else {
        Err(CliError::CheckFailed(format!(
            "{}; `scribe db vacuum` does not repair indexes, restore from an export",
            problems.join(", ")
        )))
    }
}

fn is_corrupt(err: &rusqlite::Error) -> bool {
    matches!(
        err.sqlite_error_code(),
        Some(rusqlite::ErrorCode::DatabaseCorrupt)
    )
}

/// Rebuilds the file, then truncates the write-ahead log, and reports the size change.
fn vacuum(out: &mut impl Write, path: &Path) -> Result<(), CliError> {
    let before = Database::open(path)?.info()?;
    let conn = rusqlite::Connection::open(path).map_err(scribe_db::Error::from)?;
    conn.busy_timeout(std::time::Duration::from_secs(10))
        .map_err(scribe_db::Error::from)?;
    conn.execute_batch("VACUUM")
        .map_err(scribe_db::Error::from)?;
    conn.pragma(None, "wal_checkpoint", "TRUNCATE", |_| Ok(()))
        .map_err(scribe_db::Error::from)?;
    drop(conn);
    let after = Database::open(path)?.info()?;
    writeln!(
        out,
        "{}: {} → {}",
        path.display(),
        human_bytes(before.file_size + before.wal_size),
        human_bytes(after.file_size + after.wal_size)
    )?;
    Ok(())
}

fn write_info(out: &mut impl Write, info: &DbInfo) -> std::io::Result<()> {
    let path = info
        .path
        .as_deref()
        .map_or_else(|| "(in memory)".to_owned(), |p| p.display().to_string());
    writeln!(out, "path            {path}")?;
    writeln!(
        out,
        "schema version  {} (this build knows {})",
        info.schema_version, info.known_version
    )?;
    writeln!(
        out,
        "file size       {} (write-ahead log {})",
        human_bytes(info.file_size),
        human_bytes(info.wal_size)
    )?;
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
    serde_json::json!({
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
