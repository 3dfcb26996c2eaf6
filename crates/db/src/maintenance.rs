//! [`Database::check`] and [`Database::vacuum`]: what `scribe db check` and
//! `scribe db vacuum` run.
//!
//! The check runs on a fresh connection. A connection that has been open a while caches
//! FTS5's index structure; after another connection rebuilt an index (a 'rebuild' command,
//! or a trigger's rebuild after a damaged part changed), `PRAGMA integrity_check` on the old
//! connection reports the index as corrupt although it is fine, so a pooled reader would
//! raise false alarms.

use std::path::{Path, PathBuf};
use std::time::Duration;

use rusqlite::{Connection, ErrorCode};

use crate::database::{open_reader, retry};
use crate::search_index;
use crate::{Database, Error, Result};

/// The search indexes [`Database::check`] verifies.
const INDEXES: [&str; 2] = ["parts_fts", "parts_fts_trigram"];

/// The findings of [`Database::check`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IntegrityReport {
    /// The backend checked.
    pub backend: crate::Backend,
    /// The lines of `PRAGMA integrity_check`: `["ok"]` for a sound file. Empty on
    /// PostgreSQL, which has no such check (see [`IntegrityReport::skipped`]).
    pub integrity_check: Vec<String>,
    /// One entry per search index: on SQLite `parts_fts` and `parts_fts_trigram` (each
    /// compared with the rows), on PostgreSQL the word and trigram GIN indexes on `parts`
    /// (present and valid).
    pub indexes: Vec<IndexReport>,
    /// Further checks in plain SQL (PostgreSQL: the schema version, constraints and
    /// indexes the server holds as not valid, rows that disagree with each other).
    pub checks: Vec<NamedCheck>,
    /// What was not checked, and why, one line each.
    pub skipped: Vec<String>,
}

/// One of [`IntegrityReport::checks`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NamedCheck {
    /// What was checked, e.g. `schema_version`.
    pub name: &'static str,
    /// `None` when nothing was found wrong, else what was.
    pub problem: Option<String>,
}

/// The FTS5 `integrity-check` of one search index, including the comparison with the
/// `parts` rows (`rank = 1`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IndexReport {
    /// The index: `parts_fts` or `parts_fts_trigram`.
    pub index: &'static str,
    /// What the check found.
    pub status: IndexStatus,
}

/// The outcome of one index check.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum IndexStatus {
    /// The index is sound and matches the rows.
    Ok,
    /// The index does not match the rows, or its structure is damaged (SQLite's message).
    Mismatch(String),
    /// Not checked: FTS5's check is written as an INSERT, which a read-only database
    /// refuses.
    SkippedReadOnly,
    /// The index does not exist, or the server holds it as not valid (PostgreSQL: a
    /// failed concurrent build); searches would scan or fail.
    Missing(String),
}

impl IntegrityReport {
    /// Whether nothing was found wrong (indexes skipped on a read-only database count as
    /// fine).
    pub fn is_ok(&self) -> bool {
        self.problems().is_empty()
    }

    /// One line per problem found, e.g. `parts_fts: database disk image is malformed`.
    pub fn problems(&self) -> Vec<String> {
        let mut problems = Vec::new();
        if !self.integrity_check.is_empty() && self.integrity_check != ["ok"] {
            problems.push(format!(
                "integrity_check: {}",
                self.integrity_check.join("; ")
            ));
        }
        for index in &self.indexes {
            if let IndexStatus::Mismatch(message) | IndexStatus::Missing(message) = &index.status {
                problems.push(format!("{}: {message}", index.index));
            }
        }
        for check in &self.checks {
            if let Some(problem) = &check.problem {
                problems.push(format!("{}: {problem}", check.name));
            }
        }
        problems
    }
}

/// What [`Database::vacuum`] did to the size of the database.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct VacuumReport {
    /// Bytes of the file and its write-ahead log before.
    pub bytes_before: u64,
    /// Bytes of the file and its write-ahead log after.
    pub bytes_after: u64,
}

impl Database {
    /// Checks the whole database on a fresh connection: `PRAGMA integrity_check`, then each
    /// search index's FTS5 `integrity-check` with `rank = 1`, which also compares the index
    /// with the `parts` rows. Findings are returned in the report, not as errors; an error
    /// means the check itself could not run (or stayed locked out by writers).
    ///
    /// The index checks are FTS5 commands written as INSERTs: they run in a write
    /// transaction that is rolled back, so they wait for other writers like a write does,
    /// and on a read-only database they are skipped ([`IndexStatus::SkippedReadOnly`]).
    ///
    /// On PostgreSQL the checks are the ones plain SQL can make (see
    /// [`IntegrityReport::checks`] and [`IntegrityReport::skipped`]).
    pub fn check(&self) -> Result<IntegrityReport> {
        #[cfg(feature = "postgres")]
        if let Some(pg) = self.postgres() {
            return pg.check();
        }
        // What may be indexed is indexed (and committed) first, so that the rolled-back
        // check has little left to do.
        self.index_pending()?;
        match self.path() {
            Some(path) => {
                let conn = self.fresh_connection(path)?;
                check_on(&conn, self)
            }
            // A second connection to an in-memory database would see another, empty one.
            None => {
                let conn = self.writer();
                check_on(&conn, self)
            }
        }
    }

    /// Rebuilds the file to drop free pages (`VACUUM`), then truncates the write-ahead log,
    /// and reports the size before and after. Waits for other writers like a write does;
    /// readers in other processes may make the log truncation partial, which is harmless.
    /// [`Error::ReadOnly`] on a read-only database; nothing to do in memory.
    ///
    /// VACUUM keeps both search indexes valid: they are keyed by `parts.seq`, an INTEGER
    /// PRIMARY KEY that VACUUM preserves.
    pub fn vacuum(&self) -> Result<VacuumReport> {
        if self.backend() == crate::Backend::Postgres {
            return Err(Error::InvalidInput(
                "vacuum is SQLite's; PostgreSQL reclaims space with autovacuum".to_owned(),
            ));
        }
        let Some(path) = self.path().map(Path::to_path_buf) else {
            return Ok(VacuumReport {
                bytes_before: 0,
                bytes_after: 0,
            });
        };
        if self.is_read_only() {
            return Err(Error::ReadOnly { path });
        }
        let bytes_before = size_on_disk(&path);
        {
            let conn = self.writer();
            retry(self.options(), || {
                conn.execute_batch("VACUUM")?;
                Ok(())
            })?;
            retry(self.options(), || {
                conn.query_row("PRAGMA wal_checkpoint(TRUNCATE)", [], |_| Ok(()))?;
                Ok(())
            })?;
        }
        Ok(VacuumReport {
            bytes_before,
            bytes_after: size_on_disk(&path),
        })
    }

    fn fresh_connection(&self, path: &Path) -> Result<Connection> {
        let conn = open_reader(path, self.options(), self.is_immutable())?;
        // The index checks need to write (then roll back); query_only would refuse them.
        if !self.is_read_only() {
            conn.pragma_update(None, "query_only", false)?;
        }
        // One long wait instead of the write retries: a check is not latency-sensitive.
        conn.busy_timeout(Duration::from_secs(10))?;
        Ok(conn)
    }
}

fn check_on(conn: &Connection, db: &Database) -> Result<IntegrityReport> {
    let mut integrity_check = Vec::new();
    conn.pragma_query(None, "integrity_check", |row| {
        integrity_check.push(row.get::<_, String>(0)?);
        Ok(())
    })?;
    let indexes = if db.is_read_only() {
        INDEXES
            .iter()
            .map(|&index| IndexReport {
                index,
                status: IndexStatus::SkippedReadOnly,
            })
            .collect()
    } else {
        check_indexes(conn, db)?
    };
    Ok(IntegrityReport {
        backend: crate::Backend::Sqlite,
        integrity_check,
        indexes,
        checks: Vec::new(),
        skipped: Vec::new(),
    })
}

/// FTS5's checks of both indexes, with `rank = 1` (the index against its content view), in
/// one write transaction that is rolled back. Inside it the parts still queued (being
/// streamed) are indexed first: the indexes and the queue together must give exactly the
/// searchable text of every part.
fn check_indexes(conn: &Connection, db: &Database) -> Result<Vec<IndexReport>> {
    conn.execute_batch("BEGIN IMMEDIATE")?;
    let result = (|| -> Result<Vec<IndexReport>> {
        if db.searchable_schema() {
            search_index::index_everything(conn, db.now())?;
        }
        INDEXES
            .iter()
            .map(|&index| {
                Ok(IndexReport {
                    index,
                    status: check_index(conn, index)?,
                })
            })
            .collect()
    })();
    conn.execute_batch("ROLLBACK")?;
    result
}

fn check_index(conn: &Connection, index: &str) -> Result<IndexStatus> {
    let result = conn.execute(
        &format!("INSERT INTO {index} ({index}, rank) VALUES ('integrity-check', 1)"),
        [],
    );
    match result {
        Ok(_) => Ok(IndexStatus::Ok),
        Err(err) if err.sqlite_error_code() == Some(ErrorCode::DatabaseCorrupt) => {
            Ok(IndexStatus::Mismatch(err.to_string()))
        }
        Err(err) => Err(err.into()),
    }
}

/// Bytes of `path` and its `-wal` file (0 for a missing one).
fn size_on_disk(path: &Path) -> u64 {
    let size = |p: PathBuf| std::fs::metadata(p).map_or(0, |m| m.len());
    let mut wal = path.as_os_str().to_owned();
    wal.push("-wal");
    size(path.to_path_buf()) + size(PathBuf::from(wal))
}
