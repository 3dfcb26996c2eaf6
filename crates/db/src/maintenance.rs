//! [`Database::check`] and [`Database::vacuum`]: what `scribe db check` and
//! `scribe db vacuum` run, on either backend.
//!
//! The check runs on a fresh connection. A connection that has been open a while caches
//! FTS5's index structure; after another connection rebuilt an index (a 'rebuild' command,
//! or a trigger's rebuild after a damaged part changed), `PRAGMA integrity_check` on the old
//! connection reports the index as corrupt although it is fine, so a pooled reader would
//! raise false alarms.

use std::path::{Path, PathBuf};
use std::time::Duration;

use rusqlite::{Connection, ErrorCode, OptionalExtension};

use crate::database::{Engine, SqliteStore, open_reader, retry};
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
    /// Further checks in plain SQL: on both backends `message_counts` (each session's
    /// count against its messages); on SQLite stored values its readers cannot take or
    /// that break the schema's rules (CHECK, NOT NULL, foreign keys); on PostgreSQL the
    /// schema version, constraints and indexes the server holds as not valid, rows that
    /// disagree with each other.
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

    /// Whether all that was found wrong is stored values that break the schema's rules,
    /// each named with its rows (the checks `column_types`, `constraints`, `foreign_keys`
    /// and `message_counts`, and `integrity_check` lines that only say a table holds a row
    /// breaking a CHECK or a NOT NULL): not damage to the file or an index, and set right
    /// by an UPDATE or a DELETE.
    /// `false` when nothing was found wrong.
    pub fn only_values_wrong(&self) -> bool {
        let named = |name: &str| {
            self.checks
                .iter()
                .any(|c| c.name == name && c.problem.is_some())
        };
        let integrity_ok = self.integrity_check.is_empty() || self.integrity_check == ["ok"];
        let integrity_values = self
            .integrity_check
            .iter()
            .all(|line| line.starts_with(CHECK_FAILED) || line.starts_with(NULL_VALUE));
        !self.is_ok()
            && self.backend == crate::Backend::Sqlite
            && (integrity_ok || (integrity_values && named("constraints")))
            && self
                .indexes
                .iter()
                .all(|i| matches!(i.status, IndexStatus::Ok | IndexStatus::SkippedReadOnly))
            && self.checks.iter().all(|c| {
                c.problem.is_none()
                    || matches!(
                        c.name,
                        "column_types" | "constraints" | "foreign_keys" | "message_counts"
                    )
            })
    }
}

/// What [`Database::vacuum`] did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct VacuumReport {
    /// The backend vacuumed.
    pub backend: crate::Backend,
    /// The tables vacuumed and analyzed (PostgreSQL: every table of the schema Scribe's
    /// migrations created, in name order); empty on SQLite, which rebuilds the whole file.
    pub tables: Vec<String>,
    /// Bytes before: on SQLite the file and its write-ahead log, on PostgreSQL the
    /// tables with their indexes and TOAST (`pg_total_relation_size`).
    pub bytes_before: u64,
    /// The same bytes after. On PostgreSQL a plain VACUUM makes dead rows' space
    /// reusable inside the tables and seldom shrinks them, so this is usually close to
    /// `bytes_before`.
    pub bytes_after: u64,
}

impl Database {
    /// Checks the whole database on a fresh connection: `PRAGMA integrity_check`, then each
    /// search index's FTS5 `integrity-check` with `rank = 1`, which also compares the index
    /// with the `parts` rows; then rows of Scribe's tables whose values its readers cannot
    /// take, that break a CHECK or NOT NULL rule, or whose foreign key names a row that is
    /// not there, and sessions whose `message_count` is not the number of their messages.
    /// Findings are returned in the report, not as errors; an error means the check itself
    /// could not run (or stayed locked out by writers).
    ///
    /// The index checks are FTS5 commands written as INSERTs: they run in a write
    /// transaction that is rolled back, so they wait for other writers like a write does,
    /// and on a read-only database they are skipped ([`IndexStatus::SkippedReadOnly`]).
    ///
    /// On PostgreSQL the checks are the ones plain SQL can make (see
    /// [`IntegrityReport::checks`] and [`IntegrityReport::skipped`]).
    pub fn check(&self) -> Result<IntegrityReport> {
        // A match with one arm without the postgres feature.
        #[allow(clippy::infallible_destructuring_match)]
        let sqlite = match self.engine() {
            Engine::Sqlite(sqlite) => sqlite,
            #[cfg(feature = "postgres")]
            Engine::Postgres(pg) => return pg.check(),
        };
        // What may be indexed is indexed (and committed) first, so that the rolled-back
        // check has little left to do.
        self.index_pending()?;
        match sqlite.path() {
            Some(path) => {
                let conn = self.fresh_connection(path)?;
                check_on(&conn, self, sqlite)
            }
            // A second connection to an in-memory database would see another, empty one.
            None => {
                let conn = sqlite.writer();
                check_on(&conn, self, sqlite)
            }
        }
    }

    /// Rebuilds the search indexes from the parts they index, in one write transaction
    /// (it waits for other writers as a write does, and they wait for it: 10.5 s for a
    /// 137 MiB store of 6,000 sessions here), and returns which indexes it rebuilt.
    /// What `scribe db check` reports as an index that does not match its parts is
    /// repaired so: the indexes hold nothing but what the parts give, so nothing stored
    /// is lost.
    ///
    /// SQLite: FTS5's `rebuild` of `parts_fts` and `parts_fts_trigram` from their views,
    /// and the search queue emptied, since every queued part is then indexed. An index
    /// goes out of step with its parts when another program changed or deleted a part
    /// whose text its own SQLite reads differently (3.37 and 3.40 were seen to end a JSON
    /// string at a `\u0000`), or wrote to an index by hand.
    ///
    /// PostgreSQL: `parts_fts` computed again from every part
    /// (`scribe_parts_fts_rebuild()`, what `scribe db copy` runs after loading).
    ///
    /// [`Error::ReadOnly`] on a database opened read-only.
    pub fn rebuild_search_indexes(&self) -> Result<&'static [&'static str]> {
        self.write(
            |tx: &mut crate::Tx<'_>| -> Result<&'static [&'static str]> {
                match tx.backend() {
                    crate::Backend::Sqlite => {
                        tx.execute_batch(
                            "DELETE FROM search_queue;
                             INSERT INTO parts_fts (parts_fts) VALUES ('rebuild');
                             INSERT INTO parts_fts_trigram (parts_fts_trigram) VALUES ('rebuild');",
                        )?;
                        Ok(&INDEXES)
                    }
                    crate::Backend::Postgres => {
                        tx.execute_batch("SELECT scribe_parts_fts_rebuild()")?;
                        Ok(&["parts_fts"])
                    }
                }
            },
        )
    }

    /// SQLite: rebuilds the file to drop free pages (`VACUUM`), then truncates the
    /// write-ahead log, and reports the size before and after. Waits for other writers
    /// like a write does; readers in other processes may make the log truncation partial,
    /// which is harmless. Nothing to do in memory.
    ///
    /// VACUUM keeps both search indexes valid: they are keyed by `parts.seq`, an INTEGER
    /// PRIMARY KEY that VACUUM preserves.
    ///
    /// PostgreSQL: `VACUUM (ANALYZE)` of each table of the schema Scribe's migrations
    /// created (the connection's `current_schema()`), one statement per table outside
    /// any transaction (VACUUM cannot run inside one), which autovacuum otherwise does in
    /// its own time: dead rows' space becomes reusable and the planner's statistics are
    /// fresh. It takes no lock that blocks reads or writes. It does not return space to
    /// the operating system (`VACUUM FULL` would, holding an exclusive lock on every
    /// table: run it in psql if you must). A table the connection's role does not own
    /// is skipped by the server with a warning.
    ///
    /// [`Error::ReadOnly`] on a database opened read-only.
    pub fn vacuum(&self) -> Result<VacuumReport> {
        // A match with one arm without the postgres feature.
        #[allow(clippy::infallible_destructuring_match)]
        let sqlite = match self.engine() {
            Engine::Sqlite(sqlite) => sqlite,
            #[cfg(feature = "postgres")]
            Engine::Postgres(pg) => return vacuum_postgres(pg, self.is_read_only()),
        };
        let Some(path) = sqlite.path().map(Path::to_path_buf) else {
            return Ok(VacuumReport {
                backend: crate::Backend::Sqlite,
                tables: Vec::new(),
                bytes_before: 0,
                bytes_after: 0,
            });
        };
        if self.is_read_only() {
            return Err(Error::ReadOnly { path });
        }
        let bytes_before = size_on_disk(&path);
        {
            let conn = sqlite.writer();
            // The background auto-checkpoint's round would keep the TRUNCATE below from
            // emptying the log (it answers busy); with the writer held, no commit of this
            // process can hand it another while the vacuum runs.
            if let Some(auto) = sqlite.auto_checkpoint() {
                auto.wait_idle();
            }
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
            backend: crate::Backend::Sqlite,
            tables: Vec::new(),
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

fn check_on(conn: &Connection, db: &Database, sqlite: &SqliteStore) -> Result<IntegrityReport> {
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
        check_indexes(conn, db, sqlite)?
    };
    Ok(IntegrityReport {
        backend: crate::Backend::Sqlite,
        indexes,
        checks: vec![
            NamedCheck {
                name: "column_types",
                problem: column_types(conn)?,
            },
            NamedCheck {
                name: "constraints",
                problem: constraints(conn, &integrity_check)?,
            },
            NamedCheck {
                name: "foreign_keys",
                problem: foreign_keys(conn)?,
            },
            NamedCheck {
                name: "message_counts",
                problem: {
                    let mut statement = conn.prepare(MESSAGE_COUNTS_SQL)?;
                    let rows = statement
                        .query_map([], |row| Ok((row.get(0)?, row.get(1)?, row.get(2)?)))?
                        .collect::<rusqlite::Result<Vec<_>>>()?;
                    message_counts(rows)
                },
            },
        ],
        integrity_check,
        skipped: Vec::new(),
    })
}

/// Rows listed per column by [`column_types`], at most.
const MAX_ROWS_LISTED: usize = 3;

/// The sessions whose `message_count` is not the number of their stored messages, as
/// (id, stored count, counted), all three as text, by id; the same statement on both
/// backends. The count is kept by triggers (and, for a batch on PostgreSQL, by
/// `scribe_db::bulk`'s own query), so a difference is a row another program or a hand
/// wrote, or a bug. One index-only count per session.
pub(crate) const MESSAGE_COUNTS_SQL: &str = "SELECT id, CAST(message_count AS TEXT), \
     CAST(counted AS TEXT) \
     FROM (SELECT coalesce(CAST(id AS TEXT), 'NULL') AS id, message_count, \
                  (SELECT count(*) FROM messages m WHERE m.session_id = s.id) AS counted \
           FROM sessions s) AS c \
     WHERE message_count <> counted ORDER BY id";

/// What the `message_counts` check says of the rows [`MESSAGE_COUNTS_SQL`] returned:
/// how many sessions, the first few with their stored and counted numbers, and the
/// statement that sets them right. `None` when there are none.
pub(crate) fn message_counts(rows: Vec<(String, String, String)>) -> Option<String> {
    let listed: Vec<String> = rows
        .iter()
        .take(MAX_ROWS_LISTED)
        .map(|(id, stored, counted)| format!("{id}: message_count {stored}, messages {counted}"))
        .collect();
    let more = if rows.len() > listed.len() {
        "; …"
    } else {
        ""
    };
    let which = match rows.len() {
        0 => return None,
        1 => "1 session's count differs from its".to_owned(),
        n => format!("{n} sessions' counts differ from their"),
    };
    Some(format!(
        "{which} stored messages ({}{more}); set with UPDATE sessions SET message_count = \
         (SELECT count(*) FROM messages WHERE session_id = sessions.id)",
        listed.join("; ")
    ))
}

/// The storage classes Scribe's readers take from a column declared `declared` (besides
/// NULL, which NOT NULL and `integrity_check` cover), and what to call them; `None` for a
/// type Scribe's tables do not declare (refinery's history, FTS5's own tables).
fn readable_classes(declared: &str) -> Option<(&'static [&'static str], &'static str)> {
    match declared.to_ascii_uppercase().as_str() {
        "INTEGER" | "BOOLEAN" => Some((&["integer"], "an integer")),
        "REAL" => Some((&["real", "integer"], "a number")),
        "TEXT" => Some((&["text"], "text")),
        _ => None,
    }
}

/// SQLite keeps any value in any column (Scribe's tables are not STRICT): text where an
/// integer belongs, a REAL past the largest integer, a blob in a text column, written by
/// another program or a hand. `integrity_check` does not look, and every read of such a
/// row fails naming only the column ("Invalid column type Text at index: 29, name:
/// created_at"). This names each column of Scribe's tables with rows its readers cannot
/// take: how many, and the keys and kinds of the first few. One scan per table. `None`
/// when there are none.
fn column_types(conn: &Connection) -> Result<Option<String>> {
    let tables: Vec<String> = conn
        .prepare(
            "SELECT name FROM pragma_table_list WHERE schema = 'main' AND type = 'table' \
             AND name NOT LIKE 'sqlite_%' ORDER BY name",
        )?
        .query_map([], |row| row.get(0))?
        .collect::<rusqlite::Result<_>>()?;
    let mut found = Vec::new();
    for table in tables {
        // (name, declared type, place in the primary key)
        let columns: Vec<(String, String, i64)> = conn
            .prepare("SELECT name, type, pk FROM pragma_table_info(?1)")?
            .query_map([&table], |row| Ok((row.get(0)?, row.get(1)?, row.get(2)?)))?
            .collect::<rusqlite::Result<_>>()?;
        let typed: Vec<(&str, &[&str], &str)> = columns
            .iter()
            .filter_map(|(name, declared, _)| {
                let (classes, what) = readable_classes(declared)?;
                Some((name.as_str(), classes, what))
            })
            .collect();
        if typed.is_empty() {
            continue;
        }
        let mut key: Vec<&(String, String, i64)> = columns.iter().filter(|c| c.2 > 0).collect();
        key.sort_by_key(|c| c.2);
        let key = match key.as_slice() {
            [] => "quote(rowid)".to_owned(),
            key => key
                .iter()
                .map(|(name, _, _)| format!("quote(\"{name}\")"))
                .collect::<Vec<_>>()
                .join(" || ', ' || "),
        };
        let kinds: Vec<String> = typed
            .iter()
            .map(|(name, _, _)| format!("typeof(\"{name}\")"))
            .collect();
        let unreadable: Vec<String> = typed
            .iter()
            .map(|(name, classes, _)| {
                let classes: Vec<String> = classes.iter().map(|c| format!("'{c}'")).collect();
                format!("typeof(\"{name}\") NOT IN ({}, 'null')", classes.join(", "))
            })
            .collect();
        let sql = format!(
            "SELECT {key}, {} FROM \"{table}\" WHERE {}",
            kinds.join(", "),
            unreadable.join(" OR ")
        );
        // Per typed column: the rows found, and the first few as `key kind`.
        let mut per_column: Vec<(u64, Vec<String>)> = vec![(0, Vec::new()); typed.len()];
        let mut statement = conn.prepare(&sql)?;
        let mut rows = statement.query([])?;
        while let Some(row) = rows.next()? {
            let key: String = row.get(0)?;
            for (i, (_, classes, _)) in typed.iter().enumerate() {
                let kind: String = row.get(i + 1)?;
                if kind != "null" && !classes.contains(&kind.as_str()) {
                    let (count, listed) = &mut per_column[i];
                    *count += 1;
                    if listed.len() < MAX_ROWS_LISTED {
                        listed.push(format!("{key} {kind}"));
                    }
                }
            }
        }
        for ((column, _, what), (count, listed)) in typed.iter().zip(per_column) {
            if count == 0 {
                continue;
            }
            let more = if count > listed.len() as u64 {
                "; …"
            } else {
                ""
            };
            let rows = if count == 1 { "row holds" } else { "rows hold" };
            found.push(format!(
                "{table}.{column}: {count} {rows} what is not {what} ({}{more})",
                listed.join("; ")
            ));
        }
    }
    Ok((!found.is_empty()).then(|| found.join("; ")))
}

/// Rows whose foreign key names a row that is not there (`PRAGMA foreign_key_check`,
/// which `integrity_check` does not run): what a program with foreign keys off (the
/// `sqlite3` shell's default) leaves when it deletes a session, whose messages, parts and
/// files the delete would have taken with it. Scribe's reads pass such rows by (they
/// join their session), so they only take space, and a sub-session names a parent that
/// is gone. One line per broken key: the table, how many rows, the first few, and what
/// the delete would have done to them. `None` when there are none.
fn foreign_keys(conn: &Connection) -> Result<Option<String>> {
    /// One foreign key of one table that rows break: how many, the first few rowids.
    struct BrokenKey {
        table: String,
        parent: String,
        fk: i64,
        count: u64,
        rowids: Vec<i64>,
    }

    let mut broken: Vec<BrokenKey> = Vec::new();
    let mut statement = conn.prepare("PRAGMA foreign_key_check")?;
    let mut rows = statement.query([])?;
    while let Some(row) = rows.next()? {
        let (table, parent, fk): (String, String, i64) = (row.get(0)?, row.get(2)?, row.get(3)?);
        let rowid: Option<i64> = row.get(1)?;
        let at = match broken
            .iter()
            .position(|b| b.table == table && b.parent == parent && b.fk == fk)
        {
            Some(at) => at,
            None => {
                broken.push(BrokenKey {
                    table,
                    parent,
                    fk,
                    count: 0,
                    rowids: Vec::new(),
                });
                broken.len() - 1
            }
        };
        let key = &mut broken[at];
        key.count += 1;
        if let Some(rowid) = rowid
            && key.rowids.len() < MAX_ROWS_LISTED
        {
            key.rowids.push(rowid);
        }
    }
    let mut found = Vec::new();
    for BrokenKey {
        table,
        parent,
        fk,
        count,
        rowids,
    } in broken
    {
        // The key's columns and what deleting the row it names does to this one.
        let (mut columns, mut on_delete) = (Vec::new(), String::new());
        let mut statement = conn
            .prepare("SELECT \"from\", on_delete FROM pragma_foreign_key_list(?1) WHERE id = ?2")?;
        let mut rows = statement.query(rusqlite::params![table, fk])?;
        while let Some(row) = rows.next()? {
            columns.push(row.get::<_, String>(0)?);
            on_delete = row.get(1)?;
        }
        let key = row_key(conn, &table)?;
        let quoted = table.replace('"', "\"\"");
        let mut listed = Vec::with_capacity(rowids.len());
        for rowid in &rowids {
            listed.push(conn.query_row(
                &format!("SELECT {key} FROM \"{quoted}\" WHERE rowid = ?1"),
                [rowid],
                |row| row.get::<_, String>(0),
            )?);
        }
        // A table without rowids has its rows counted, not named.
        let named = match (listed.is_empty(), count > listed.len() as u64) {
            (true, _) => String::new(),
            (false, true) => format!(" ({}; …)", listed.join("; ")),
            (false, false) => format!(" ({})", listed.join("; ")),
        };
        let (rows, them) = if count == 1 {
            ("row names", "it")
        } else {
            ("rows name", "them")
        };
        let undone = match on_delete.as_str() {
            "CASCADE" => format!("; its delete would have deleted {them}"),
            "SET NULL" => format!("; its delete would have set {them} to NULL"),
            _ => String::new(),
        };
        found.push(format!(
            "{table}.{}: {count} {rows} a row of {parent} that is not there{named}{undone}",
            columns.join(", "),
        ));
    }
    Ok((!found.is_empty()).then(|| found.join("; ")))
}

/// What `PRAGMA integrity_check` says of a row that breaks a table's CHECK constraint or a
/// column's NOT NULL (SQLite's wording, `pragma.c`), naming the table but not the row.
const CHECK_FAILED: &str = "CHECK constraint failed in ";
const NULL_VALUE: &str = "NULL value in ";

/// Rows that break a CHECK constraint or a NOT NULL, which only a program that switched
/// the checks off (`PRAGMA ignore_check_constraints`) or a hand can have written: a
/// session's `kind` Scribe does not know, `model_config` that is not JSON. `integrity_check`
/// names only the table, and every read of such a row fails; this names each rule broken
/// and the keys of the first few rows that break it. Only the tables `integrity_check`
/// named are scanned (it evaluated every rule of every row already), so a sound file costs
/// nothing more. `None` when there are none.
fn constraints(conn: &Connection, integrity_check: &[String]) -> Result<Option<String>> {
    let mut checks: Vec<&str> = Vec::new();
    let mut nulls: Vec<(&str, &str)> = Vec::new();
    for line in integrity_check {
        if let Some(table) = line.strip_prefix(CHECK_FAILED) {
            if !checks.contains(&table) {
                checks.push(table);
            }
        } else if let Some(column) = line.strip_prefix(NULL_VALUE)
            && let Some((table, column)) = column.split_once('.')
            && !nulls.contains(&(table, column))
        {
            nulls.push((table, column));
        }
    }
    let mut found = Vec::new();
    for table in checks {
        let Some(sql) = conn
            .query_row(
                "SELECT sql FROM sqlite_schema WHERE type = 'table' AND name = ?1",
                [table],
                |row| row.get::<_, Option<String>>(0),
            )
            .optional()?
            .flatten()
        else {
            continue;
        };
        for expr in check_expressions(&sql) {
            let rule = format!("CHECK ({})", one_line(&expr));
            found.extend(rows_breaking(conn, table, &format!("NOT ({expr})"), &rule)?);
        }
    }
    for (table, column) in nulls {
        let rule = format!("{column} NOT NULL");
        // Not `IS NULL`: SQLite folds that to false for a column declared NOT NULL.
        let filter = format!("typeof(\"{}\") = 'null'", column.replace('"', "\"\""));
        found.extend(rows_breaking(conn, table, &filter, &rule)?);
    }
    Ok((!found.is_empty()).then(|| found.join("; ")))
}

/// `table: N rows break RULE (key; key; …)` for the rows of `table` that `filter` selects,
/// or `None` when there are none.
fn rows_breaking(
    conn: &Connection,
    table: &str,
    filter: &str,
    rule: &str,
) -> Result<Option<String>> {
    let key = row_key(conn, table)?;
    let quoted = table.replace('"', "\"\"");
    let sql = format!("SELECT {key} FROM \"{quoted}\" WHERE {filter}");
    let mut statement = conn.prepare(&sql)?;
    let mut rows = statement.query([])?;
    let mut count = 0u64;
    let mut listed = Vec::new();
    while let Some(row) = rows.next()? {
        count += 1;
        if listed.len() < MAX_ROWS_LISTED {
            listed.push(row.get::<_, String>(0)?);
        }
    }
    if count == 0 {
        return Ok(None);
    }
    let more = if count > listed.len() as u64 {
        "; …"
    } else {
        ""
    };
    let rows = if count == 1 {
        "row breaks"
    } else {
        "rows break"
    };
    Ok(Some(format!(
        "{table}: {count} {rows} {rule} ({}{more})",
        listed.join("; ")
    )))
}

/// An SQL expression that names a row of `table` by its primary key (quoted values, `, `
/// between the columns of a composite key), or its rowid.
fn row_key(conn: &Connection, table: &str) -> Result<String> {
    let mut key: Vec<(String, i64)> = conn
        .prepare("SELECT name, pk FROM pragma_table_info(?1) WHERE pk > 0")?
        .query_map([table], |row| Ok((row.get(0)?, row.get(1)?)))?
        .collect::<rusqlite::Result<_>>()?;
    key.sort_by_key(|c| c.1);
    Ok(if key.is_empty() {
        "quote(rowid)".to_owned()
    } else {
        key.iter()
            .map(|(name, _)| format!("quote(\"{}\")", name.replace('"', "\"\"")))
            .collect::<Vec<_>>()
            .join(" || ', ' || ")
    })
}

/// `text` on one line: each run of whitespace one space.
fn one_line(text: &str) -> String {
    text.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// The expressions of the CHECK constraints in a `CREATE TABLE` statement as SQLite keeps
/// it (`sqlite_schema.sql`, comments and all): the text between the parentheses after each
/// `CHECK` keyword, skipping comments, string literals and quoted identifiers, which may
/// hold the word or a parenthesis.
fn check_expressions(sql: &str) -> Vec<String> {
    let bytes = sql.as_bytes();
    let mut found = Vec::new();
    let mut i = 0;
    while i < bytes.len() {
        if let Some(next) = skip_quoted_or_comment(bytes, i) {
            i = next;
        } else if is_word_byte(bytes[i]) {
            let start = i;
            while i < bytes.len() && is_word_byte(bytes[i]) {
                i += 1;
            }
            if !sql[start..i].eq_ignore_ascii_case("check") {
                continue;
            }
            // Whitespace and comments, then the parenthesis.
            let mut j = i;
            loop {
                if let Some(next) = bytes
                    .get(j)
                    .filter(|b| b.is_ascii_whitespace())
                    .map(|_| j + 1)
                {
                    j = next;
                } else if bytes.get(j) == Some(&b'-') || bytes.get(j) == Some(&b'/') {
                    match skip_quoted_or_comment(bytes, j) {
                        Some(next) => j = next,
                        None => break,
                    }
                } else {
                    break;
                }
            }
            if bytes.get(j) != Some(&b'(') {
                continue;
            }
            let open = j;
            let mut depth = 0usize;
            while j < bytes.len() {
                if let Some(next) = skip_quoted_or_comment(bytes, j) {
                    j = next;
                    continue;
                }
                match bytes[j] {
                    b'(' => depth += 1,
                    b')' => {
                        depth -= 1;
                        if depth == 0 {
                            found.push(sql[open + 1..j].trim().to_owned());
                            break;
                        }
                    }
                    _ => {}
                }
                j += 1;
            }
            i = j + 1;
        } else {
            i += 1;
        }
    }
    found
}

/// A byte of an SQL keyword or bare identifier (any byte of a non-ASCII character counts).
fn is_word_byte(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b == b'_' || b == b'$' || b >= 0x80
}

/// `sql` as code alone, by the scan the CHECK rules are read with: each string literal
/// left as `''`, each quoted identifier and comment as a space, the rest lowercased, and
/// whitespace runs made one space. What is left is keywords, names, operators and
/// numbers ([`crate::testing::sql_code`]).
pub(crate) fn sql_code(sql: &str) -> String {
    let bytes = sql.as_bytes();
    let mut code = String::with_capacity(sql.len());
    let mut start = 0;
    let mut i = 0;
    while i < bytes.len() {
        if let Some(end) = skip_quoted_or_comment(bytes, i) {
            code.push_str(&sql[start..i]);
            code.push_str(if bytes[i] == b'\'' { " '' " } else { " " });
            start = end;
            i = end;
        } else {
            i += 1;
        }
    }
    code.push_str(&sql[start..]);
    code.to_lowercase()
        .split_whitespace()
        .collect::<Vec<_>>()
        .join(" ")
}

/// When a string literal, quoted identifier or comment starts at `i`: the index just past
/// it (the end of the text when it is not closed).
fn skip_quoted_or_comment(bytes: &[u8], i: usize) -> Option<usize> {
    let close = match (bytes[i], bytes.get(i + 1)) {
        (b'-', Some(b'-')) => {
            let end = bytes[i..].iter().position(|&b| b == b'\n');
            return Some(end.map_or(bytes.len(), |end| i + end + 1));
        }
        (b'/', Some(b'*')) => {
            let end = bytes[i + 2..].windows(2).position(|w| w == b"*/");
            return Some(end.map_or(bytes.len(), |end| i + 2 + end + 2));
        }
        (b'\'', _) => b'\'',
        (b'"', _) => b'"',
        (b'`', _) => b'`',
        (b'[', _) => b']',
        _ => return None,
    };
    let mut j = i + 1;
    while j < bytes.len() {
        if bytes[j] == close {
            // A doubled quote is one quote inside the literal ([…] has no escape).
            if close != b']' && bytes.get(j + 1) == Some(&close) {
                j += 2;
                continue;
            }
            return Some(j + 1);
        }
        j += 1;
    }
    Some(bytes.len())
}

/// FTS5's checks of both indexes, with `rank = 1` (the index against its content view), in
/// one write transaction that is rolled back. Inside it the parts still queued (being
/// streamed) are indexed first: the indexes and the queue together must give exactly the
/// searchable text of every part.
fn check_indexes(
    conn: &Connection,
    db: &Database,
    sqlite: &SqliteStore,
) -> Result<Vec<IndexReport>> {
    conn.execute_batch("BEGIN IMMEDIATE")?;
    let result = (|| -> Result<Vec<IndexReport>> {
        if sqlite.searchable_schema() {
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

/// [`Database::vacuum`] on PostgreSQL.
#[cfg(feature = "postgres")]
fn vacuum_postgres(pg: &crate::pg::PgBackend, read_only: bool) -> Result<VacuumReport> {
    if read_only {
        return Err(Error::ReadOnly {
            path: pg.shown().into(),
        });
    }
    let mut client = pg.client()?;
    let tables: Vec<String> = client
        .query(
            "SELECT c.relname::text FROM pg_class c \
             JOIN pg_namespace n ON n.oid = c.relnamespace \
             WHERE n.nspname = current_schema() AND c.relkind IN ('r', 'p') \
             ORDER BY c.relname",
            &[],
        )?
        .iter()
        .map(|row| row.try_get(0))
        .collect::<std::result::Result<_, _>>()?;
    let size = |client: &mut postgres::Client| -> Result<u64> {
        let bytes: i64 = client
            .query_one(
                "SELECT COALESCE(sum(pg_total_relation_size(c.oid)), 0)::bigint FROM pg_class c \
                 JOIN pg_namespace n ON n.oid = c.relnamespace \
                 WHERE n.nspname = current_schema() AND c.relkind IN ('r', 'p')",
                &[],
            )?
            .try_get(0)?;
        Ok(u64::try_from(bytes).unwrap_or(0))
    };
    // VACUUM skips, with only a WARNING, a table this user may not vacuum: refuse instead
    // of reporting a vacuum that did nothing. PostgreSQL 17 asks for the MAINTAIN
    // privilege; before it, the table's owner, the database's owner or a superuser.
    let version: i32 = client
        .query_one("SELECT current_setting('server_version_num')::int", &[])?
        .try_get(0)?;
    let may_vacuum = if version >= 170_000 {
        "has_table_privilege(c.oid, 'MAINTAIN')"
    } else {
        "pg_has_role(c.relowner, 'USAGE') \
         OR pg_has_role((SELECT datdba FROM pg_database WHERE datname = current_database()), 'USAGE') \
         OR (SELECT rolsuper FROM pg_roles WHERE rolname = current_user)"
    };
    let refused: Vec<String> = client
        .query(
            &format!(
                "SELECT c.relname::text FROM pg_class c \
                 JOIN pg_namespace n ON n.oid = c.relnamespace \
                 WHERE n.nspname = current_schema() AND c.relkind IN ('r', 'p') \
                 AND NOT ({may_vacuum}) ORDER BY c.relname"
            ),
            &[],
        )?
        .iter()
        .map(|row| row.try_get(0))
        .collect::<std::result::Result<_, _>>()?;
    if !refused.is_empty() {
        let user: String = client
            .query_one("SELECT current_user::text", &[])?
            .try_get(0)?;
        return Err(Error::Postgres {
            code: Some("42501".to_owned()),
            message: format!(
                "user {user:?} may not vacuum {} of the {} tables ({}): {}",
                refused.len(),
                tables.len(),
                refused.join(", "),
                if version >= 170_000 {
                    "it needs the MAINTAIN privilege on them"
                } else {
                    "only their owner, the database's owner or a superuser may vacuum them"
                }
            ),
            source: None,
        });
    }
    let bytes_before = size(&mut client)?;
    for table in &tables {
        // The name comes from the catalog, quoted as an identifier; the pooled connection
        // is in autocommit, as VACUUM needs.
        let quoted = format!("\"{}\"", table.replace('"', "\"\""));
        client.batch_execute(&format!("VACUUM (ANALYZE) {quoted}"))?;
    }
    let bytes_after = size(&mut client)?;
    Ok(VacuumReport {
        backend: crate::Backend::Postgres,
        tables,
        bytes_before,
        bytes_after,
    })
}

/// Bytes of `path` and its `-wal` file (0 for a missing one).
fn size_on_disk(path: &Path) -> u64 {
    let size = |p: PathBuf| std::fs::metadata(p).map_or(0, |m| m.len());
    let mut wal = path.as_os_str().to_owned();
    wal.push("-wal");
    size(path.to_path_buf()) + size(PathBuf::from(wal))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn check_expressions_are_read_past_comments_strings_and_quoted_names() {
        let sql = "CREATE TABLE t (
            -- a comment that says CHECK (nothing) and has a ( in it
            kind TEXT CHECK (kind IN ('a', 'b)', 'it''s')),
            \"check\" TEXT, [CHECK (x)] TEXT, /* CHECK (no) */
            data TEXT check(data IS NULL OR json_valid(data)) -- trailing ) comment
            , CONSTRAINT c CHECK ( length(\"check\") > 0
                -- a ) in a comment inside
            )
        )";
        assert_eq!(
            check_expressions(sql),
            [
                "kind IN ('a', 'b)', 'it''s')",
                "data IS NULL OR json_valid(data)",
                "length(\"check\") > 0\n                -- a ) in a comment inside",
            ]
        );
        assert!(check_expressions("CREATE TABLE u (a TEXT, b INTEGER)").is_empty());
        // Cut short (a damaged schema text): nothing half-read.
        assert!(check_expressions("CREATE TABLE v (a TEXT CHECK (a IN ('x'").is_empty());
    }

    /// Rows breaking a CHECK or a NOT NULL are named by key with the rule they break, only
    /// in the tables `integrity_check` names, and the rules' text as in the schema.
    #[test]
    fn rows_breaking_a_rule_are_named_by_key() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("rules.db");
        {
            let conn = Connection::open(&path).unwrap();
            conn.execute_batch(
                "CREATE TABLE t (id TEXT PRIMARY KEY, kind TEXT CHECK (kind IN ('a', 'b')),
                                 n INTEGER);
                 CREATE TABLE pair (x INTEGER, y INTEGER, PRIMARY KEY (x, y),
                                    CHECK (x < y));
                 PRAGMA ignore_check_constraints = 1;
                 INSERT INTO t VALUES ('one', 'a', 1), ('two', 'z', NULL), ('it''s', 'q', 3);
                 INSERT INTO pair VALUES (1, 2), (5, 4);
                 PRAGMA writable_schema = ON;
                 UPDATE sqlite_schema SET sql = replace(sql, 'n INTEGER', 'n INTEGER NOT NULL')
                 WHERE name = 't';",
            )
            .unwrap();
        }
        let conn = Connection::open(&path).unwrap();
        let mut integrity = Vec::new();
        conn.pragma_query(None, "integrity_check", |row| {
            integrity.push(row.get::<_, String>(0)?);
            Ok(())
        })
        .unwrap();
        assert!(
            integrity.contains(&"CHECK constraint failed in t".to_owned()),
            "{integrity:?}"
        );
        assert!(
            integrity.contains(&"NULL value in t.n".to_owned()),
            "{integrity:?}"
        );
        assert!(
            integrity.contains(&"CHECK constraint failed in pair".to_owned()),
            "{integrity:?}"
        );
        assert_eq!(
            constraints(&conn, &integrity).unwrap().as_deref(),
            Some(
                "pair: 1 row breaks CHECK (x < y) (5, 4); \
                 t: 2 rows break CHECK (kind IN ('a', 'b')) ('two'; 'it''s'); \
                 t: 1 row breaks n NOT NULL ('two')"
            )
        );
        // A table integrity_check did not name is not scanned; a sound file finds nothing.
        assert_eq!(
            constraints(&conn, &["CHECK constraint failed in pair".to_owned()])
                .unwrap()
                .as_deref(),
            Some("pair: 1 row breaks CHECK (x < y) (5, 4)")
        );
        assert_eq!(constraints(&conn, &["ok".to_owned()]).unwrap(), None);
    }

    #[test]
    fn only_values_wrong_needs_every_problem_named_by_row() {
        let report = |integrity: &[&str], column_types: bool, constraints: bool| IntegrityReport {
            backend: crate::Backend::Sqlite,
            integrity_check: integrity.iter().map(|l| (*l).to_owned()).collect(),
            indexes: vec![IndexReport {
                index: "parts_fts",
                status: IndexStatus::Ok,
            }],
            checks: vec![
                NamedCheck {
                    name: "column_types",
                    problem: column_types.then(|| "sessions.created_at: …".to_owned()),
                },
                NamedCheck {
                    name: "constraints",
                    problem: constraints.then(|| "sessions: 1 row breaks …".to_owned()),
                },
            ],
            skipped: Vec::new(),
        };
        assert!(!report(&["ok"], false, false).only_values_wrong());
        assert!(report(&["ok"], true, false).only_values_wrong());
        assert!(report(&["CHECK constraint failed in sessions"], false, true).only_values_wrong());
        // The table named but no row found: not known to be values alone.
        assert!(
            !report(&["CHECK constraint failed in sessions"], false, false).only_values_wrong()
        );
        assert!(
            !report(
                &[
                    "CHECK constraint failed in sessions",
                    "row 7 missing from index x"
                ],
                false,
                true
            )
            .only_values_wrong()
        );
        let mut index_broken = report(&["ok"], true, false);
        index_broken.indexes[0].status = IndexStatus::Mismatch("malformed".to_owned());
        assert!(!index_broken.only_values_wrong());
    }
}
