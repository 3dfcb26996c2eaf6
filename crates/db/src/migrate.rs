//! Schema migrations: the refinery migrations embedded from `sql/migrations/sqlite`, applied inside
//! the caller's `BEGIN IMMEDIATE` transaction.
//!
//! refinery's own rusqlite driver opens a deferred transaction per step, so two processes
//! opening a fresh file at once would both decide to create the schema. Running the whole
//! check-and-apply inside one immediate transaction makes it atomic: the second process
//! waits for the lock, then sees the schema already current.
//!
//! Consequence for future migrations: they run inside a transaction, where
//! `PRAGMA foreign_keys` cannot change. A table rebuild (create new, copy, drop old,
//! rename) should use `PRAGMA defer_foreign_keys = ON`, which does work there (or, like V3,
//! rely on no table referencing the rebuilt one). A migration that switches
//! `ignore_check_constraints` on to copy damaged rows as they are must switch it off again;
//! `Database::open` also resets it after every migration run.

use refinery::{Migration, Runner};
use refinery_core::traits::sync::{Migrate, Query, Transaction};
use rusqlite::{Connection, OptionalExtension};
use time::OffsetDateTime;
use time::format_description::well_known::Rfc3339;

use crate::{Error, Result};

mod embedded {
    refinery::embed_migrations!("../../sql/migrations/sqlite");
}

/// refinery's history table.
pub(crate) const HISTORY_TABLE: &str = "refinery_schema_history";

/// The highest migration version this build embeds.
pub fn known_version() -> i64 {
    embedded::migrations::runner()
        .get_migrations()
        .iter()
        .map(|m| i64::from(m.version()))
        .max()
        .unwrap_or(0)
}

/// The highest migration version recorded in the database (0 for a fresh one).
pub(crate) fn current_version(conn: &Connection) -> Result<i64> {
    let has_history: bool = conn.query_row(
        "SELECT EXISTS (SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = ?1)",
        [HISTORY_TABLE],
        |row| row.get(0),
    )?;
    if !has_history {
        return Ok(0);
    }
    let version: Option<i64> = conn
        .query_row(
            &format!("SELECT max(version) FROM {HISTORY_TABLE}"),
            [],
            |row| row.get(0),
        )
        .optional()?
        .flatten();
    Ok(version.unwrap_or(0))
}

/// How many tables the database holds when it has no Scribe schema history: 0 for
/// Scribe's own databases and for a new, empty file; more for another program's database
/// (SQLite's own `sqlite_…` tables are not counted).
pub(crate) fn foreign_tables(conn: &Connection) -> Result<i64> {
    Ok(conn.query_row(
        "SELECT CASE WHEN EXISTS (SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = ?1)
                THEN 0
                ELSE (SELECT count(*) FROM sqlite_master
                      WHERE type = 'table' AND name NOT LIKE 'sqlite\\_%' ESCAPE '\\')
                END",
        [HISTORY_TABLE],
        |row| row.get(0),
    )?)
}

/// The report of an open that found nothing to do, when the database already holds exactly
/// this build's migrations (same versions, same checksums); `None` when anything differs,
/// so the caller takes the write lock and lets refinery apply what is missing or refuse
/// what diverges. This lets a reader (`scribe list` while an agent writes) open a current
/// database without waiting for the write lock.
pub(crate) fn already_current(conn: &Connection) -> Result<Option<MigrationReport>> {
    let known = known_version();
    if current_version(conn)? != known {
        return Ok(None);
    }
    let mut stmt = conn.prepare(&format!(
        "SELECT version, checksum FROM {HISTORY_TABLE} ORDER BY version"
    ))?;
    let recorded = stmt
        .query_map([], |row| {
            Ok((row.get::<_, i64>(0)?, row.get::<_, String>(1)?))
        })?
        .collect::<rusqlite::Result<Vec<_>>>()?;
    let mut embedded = embedded::migrations::runner().get_migrations().to_vec();
    embedded.sort_by_key(Migration::version);
    let same = recorded.len() == embedded.len()
        && recorded
            .iter()
            .zip(&embedded)
            .all(|((version, checksum), migration)| {
                *version == i64::from(migration.version())
                    && checksum.parse::<u64>().ok() == Some(migration.checksum())
            });
    Ok(same.then_some(MigrationReport {
        from: known,
        to: known,
        applied: Vec::new(),
    }))
}

/// One migration applied when the database was opened.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AppliedMigration {
    /// Its version (`V3__…` → 3).
    pub version: i64,
    /// Its name (`V3__add_x` → `add_x`).
    pub name: String,
}

/// What opening did to the schema ([`crate::Database::migration_report`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MigrationReport {
    /// Version before migrating (0: a fresh database).
    pub from: i64,
    /// Version after migrating.
    pub to: i64,
    /// The migrations applied, in order (empty when the schema was current).
    pub applied: Vec<AppliedMigration>,
}

/// Brings the schema of `tx`'s database up to `target` (all embedded migrations when
/// `None`), inside `tx`. Refuses a database newer than this build.
pub(crate) fn migrate(
    tx: &rusqlite::Transaction<'_>,
    target: Option<i64>,
) -> Result<MigrationReport> {
    let known = known_version();
    let from = current_version(tx)?;
    if from > known {
        return Err(Error::SchemaTooNew { found: from, known });
    }
    let mut runner: Runner = embedded::migrations::runner()
        .set_grouped(true)
        .set_abort_divergent(true)
        .set_abort_missing(true);
    if let Some(target) = target {
        let target = i32::try_from(target)
            .map_err(|_| Error::InvalidInput(format!("migration target {target} out of range")))?;
        runner = runner.set_target(refinery::Target::Version(target));
    }
    let report = runner.run(&mut InTransaction { conn: tx })?;
    let applied: Vec<AppliedMigration> = report
        .applied_migrations()
        .iter()
        .map(|m| AppliedMigration {
            version: i64::from(m.version()),
            name: m.name().to_owned(),
        })
        .collect();
    let to = current_version(tx)?;
    Ok(MigrationReport { from, to, applied })
}

/// A connection already inside a transaction: refinery's statements run as they are.
struct InTransaction<'c> {
    conn: &'c Connection,
}

impl Transaction for InTransaction<'_> {
    type Error = rusqlite::Error;

    fn execute<'a, T: Iterator<Item = &'a str>>(
        &mut self,
        queries: T,
    ) -> Result<usize, Self::Error> {
        let mut count = 0;
        for query in queries {
            self.conn.execute_batch(query)?;
            count += 1;
        }
        Ok(count)
    }
}

impl Query<Vec<Migration>> for InTransaction<'_> {
    fn query(&mut self, query: &str) -> Result<Vec<Migration>, Self::Error> {
        let mut stmt = self.conn.prepare(query)?;
        let mut rows = stmt.query([])?;
        let mut applied = Vec::new();
        while let Some(row) = rows.next()? {
            let applied_on: String = row.get(2)?;
            // A malformed timestamp is not worth refusing to open over; the version and
            // checksum are what refinery verifies.
            let applied_on =
                OffsetDateTime::parse(&applied_on, &Rfc3339).unwrap_or(OffsetDateTime::UNIX_EPOCH);
            let checksum: String = row.get(3)?;
            let checksum = checksum.parse::<u64>().map_err(|err| {
                rusqlite::Error::FromSqlConversionFailure(
                    3,
                    rusqlite::types::Type::Text,
                    Box::new(err),
                )
            })?;
            applied.push(Migration::applied(
                row.get(0)?,
                row.get(1)?,
                applied_on,
                checksum,
            ));
        }
        Ok(applied)
    }
}

impl Migrate for InTransaction<'_> {}
