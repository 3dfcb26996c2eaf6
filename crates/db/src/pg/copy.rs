//! Copying a whole store between backends (`scribe db copy FROM TO`): every table, in
//! dependency order, in batches, values as they are stored (ids, times, JSON text byte for
//! byte, floats bit for bit), into an empty target, in one target transaction.
//!
//! The plan (tables, columns, keys, foreign keys) is read from the SQLite end's own
//! catalog, so a table a later migration adds is copied without a change here; the
//! PostgreSQL end has the same tables (sqlgen's parity check; its own `scribe_…` machinery,
//! such as V19's change outbox, is not data and is not copied). Derived data is copied as
//! stored, not derived twice:
//! - into PostgreSQL, the tables' own triggers (counters, updated_at, the change
//!   outbox, the search documents) are switched off for the copy (`DISABLE TRIGGER
//!   USER`, which the tables' owner may do; foreign keys stay checked), `parts_fts` (V13,
//!   PostgreSQL's own search documents) is built from the copied parts in one statement, nullable references to the same or
//!   a later table (a session's parent and summary message) are filled in after every row
//!   is there, and identity sequences are moved past the copied keys;
//! - into SQLite, foreign keys are switched off and tables are filled children first, so
//!   the counter triggers find no session to count into (the search index triggers do
//!   index every part); `PRAGMA foreign_key_check` must then find nothing.
//!
//! Generated columns, should a table have any, are computed by the target (`parts` has
//! none since schema version 11).

use std::collections::HashMap;
use std::ops::ControlFlow;

use bytes::BytesMut;
use postgres::types::{IsNull, ToSql, Type, to_sql_checked};
use rusqlite::OptionalExtension;
use rusqlite::types::Value;

use crate::database::{Engine, SqliteStore};
use crate::{Database, Error, Result};

/// Rows per INSERT statement (PostgreSQL) and per progress report.
const BATCH: usize = 500;

/// How far a copy has got, reported after every batch.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CopyProgress {
    /// The table being copied.
    pub table: String,
    /// Rows of it copied so far.
    pub done: u64,
    /// Rows it has in the source.
    pub total: u64,
}

/// What a copy did: rows per table, in the order copied.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CopyReport {
    /// (table, rows) in the order the tables were filled.
    pub tables: Vec<(String, u64)>,
}

/// One table of the plan.
#[derive(Debug, Clone)]
struct Table {
    name: String,
    /// Stored (not generated) columns, in the table's order.
    columns: Vec<String>,
    /// Primary key columns (ordering, and the key of deferred updates).
    key: Vec<String>,
    /// Columns filled in after all rows are there (PostgreSQL target).
    deferred: Vec<String>,
}

/// Copies every row of `from` into `to`, which must be empty and at the same schema
/// version; one end must be SQLite. Calls `progress` after each batch; when it returns
/// [`ControlFlow::Break`] the copy stops there with [`Error::CopyStopped`] and its one
/// transaction is rolled back (nothing was copied). Into PostgreSQL, an id longer than
/// [`crate::ids::MAX_ID_BYTES`] is [`Error::IdTooLong`] naming its session, and a title
/// longer than that [`Error::CopyRefused`] naming its session, before anything is written.
pub fn copy(
    from: &Database,
    to: &Database,
    mut progress: impl FnMut(&CopyProgress) -> ControlFlow<()>,
) -> Result<CopyReport> {
    if std::ptr::eq(from, to) {
        return Err(Error::CopyRefused(
            "the source and the target are one handle; copy into another, empty store".to_owned(),
        ));
    }
    // Two handles on one file (the same path twice, `./x.db` and `x.db`, a symlink or a
    // hard link): the target is not "not empty", it is the source.
    if from.is_same_store(to) {
        return Err(Error::CopyRefused(format!(
            "the source ({}) and the target ({}) are the same database; copy into another, \
             empty store",
            from.location(),
            to.location()
        )));
    }
    let (version_from, version_to) = (from.schema_version()?, to.schema_version()?);
    if version_from != version_to {
        return Err(Error::CopyRefused(format!(
            "{} has schema version {version_from} and {} version {version_to}; open both \
             with this build first",
            from.location(),
            to.location()
        )));
    }
    let plan_db = match (from.sqlite(), to.sqlite()) {
        (Some(sqlite), _) | (None, Some(sqlite)) => sqlite,
        (None, None) => {
            return Err(Error::CopyRefused(
                "one end must be an SQLite file (PostgreSQL to PostgreSQL: use pg_dump)".to_owned(),
            ));
        }
    };
    let tables = plan(plan_db)?;
    for table in &tables {
        let rows = count(to, &table.name)?;
        if rows > 0 {
            return Err(Error::CopyRefused(format!(
                "{} is not empty ({} holds {rows} rows); copy into an empty store",
                to.location(),
                table.name
            )));
        }
    }
    let mut report = CopyReport { tables: Vec::new() };
    let mut reader = Reader::open(from)?;
    reader.refuse_broken_references()?;
    match to.engine() {
        Engine::Postgres(pg) => {
            reader.refuse_long_ids()?;
            let mut client = pg.client()?;
            let mut tx = client.transaction()?;
            for table in &tables {
                tx.batch_execute(&format!(
                    "ALTER TABLE {} DISABLE TRIGGER USER",
                    q(&table.name)
                ))?;
            }
            let mut patches: Vec<(usize, Vec<Value>)> = Vec::new();
            for (index, table) in tables.iter().enumerate() {
                let total = reader.count(&table.name)?;
                let deferred: Vec<usize> = table
                    .deferred
                    .iter()
                    .filter_map(|c| table.columns.iter().position(|x| x == c))
                    .collect();
                let key: Vec<usize> = table
                    .key
                    .iter()
                    .filter_map(|c| table.columns.iter().position(|x| x == c))
                    .collect();
                let mut done = 0;
                reader.each_batch(table, |mut rows| {
                    for row in &mut rows {
                        if deferred.iter().any(|&i| row[i] != Value::Null) {
                            let mut patch: Vec<Value> =
                                deferred.iter().map(|&i| row[i].clone()).collect();
                            patch.extend(key.iter().map(|&i| row[i].clone()));
                            patches.push((index, patch));
                            for &i in &deferred {
                                row[i] = Value::Null;
                            }
                        }
                    }
                    insert_pg(&mut tx, table, &rows)?;
                    done += rows.len() as u64;
                    match progress(&CopyProgress {
                        table: table.name.clone(),
                        done,
                        total,
                    }) {
                        ControlFlow::Continue(()) => Ok(()),
                        ControlFlow::Break(()) => Err(Error::CopyStopped),
                    }
                })?;
                report.tables.push((table.name.clone(), done));
            }
            for (index, values) in &patches {
                let table = &tables[*index];
                let mut n = 0;
                let set: Vec<String> = table
                    .deferred
                    .iter()
                    .map(|c| {
                        n += 1;
                        format!("{} = ${n}", q(c))
                    })
                    .collect();
                let filter: Vec<String> = table
                    .key
                    .iter()
                    .map(|c| {
                        n += 1;
                        format!("{} = ${n}", q(c))
                    })
                    .collect();
                let sql = format!(
                    "UPDATE {} SET {} WHERE {}",
                    q(&table.name),
                    set.join(", "),
                    filter.join(" AND ")
                );
                let params: Vec<PgValue<'_>> = values.iter().map(PgValue).collect();
                let refs: Vec<&(dyn ToSql + Sync)> =
                    params.iter().map(|p| p as &(dyn ToSql + Sync)).collect();
                tx.execute(&sql, &refs)?;
            }
            // The search documents are the target's own (SQLite's FTS5 tables are not
            // copied), and their triggers were off: built once from the copied parts.
            tx.batch_execute("SELECT scribe_parts_fts_rebuild()")?;
            // Statistics for what was just loaded, before anyone searches it: without
            // them the planner guesses the tables' sizes and may read every stored text
            // instead of using a search index.
            let analyzed: Vec<String> = tables
                .iter()
                .map(|t| q(&t.name))
                .chain([q("parts_fts")])
                .collect();
            tx.batch_execute(&format!("ANALYZE {}", analyzed.join(", ")))?;
            for table in &tables {
                tx.batch_execute(&format!(
                    "ALTER TABLE {} ENABLE TRIGGER USER",
                    q(&table.name)
                ))?;
                for column in &table.columns {
                    // An identity column's sequence goes past the copied keys.
                    let sequence: Option<String> = tx
                        .query_one(
                            "SELECT pg_get_serial_sequence($1, $2)",
                            &[&q(&table.name), column],
                        )?
                        .try_get(0)?;
                    if let Some(sequence) = sequence {
                        let sql = format!(
                            "SELECT setval(CAST(CAST($1 AS TEXT) AS regclass), (SELECT max({}) FROM {}))",
                            q(column),
                            q(&table.name)
                        );
                        tx.execute(&sql, &[&sequence])?;
                    }
                }
            }
            tx.commit()?;
        }
        Engine::Sqlite(sqlite) => {
            let conn = sqlite.writer();
            conn.pragma_update(None, "foreign_keys", false)?;
            let outcome = (|| -> Result<()> {
                let tx = rusqlite::Transaction::new_unchecked(
                    &conn,
                    rusqlite::TransactionBehavior::Immediate,
                )?;
                // Children first: the counter triggers then find no session to count into.
                for table in tables.iter().rev() {
                    let total = reader.count(&table.name)?;
                    let placeholders: Vec<String> =
                        (1..=table.columns.len()).map(|i| format!("?{i}")).collect();
                    // The queue may already hold a part: inserting a searchable part
                    // queues it (V7's trigger), and the catalog lists `parts` after
                    // `search_queue` since V11 rebuilt it. Either way the part waits once.
                    let verb = if table.name == "search_queue" {
                        "INSERT OR IGNORE"
                    } else {
                        "INSERT"
                    };
                    let sql = format!(
                        "{verb} INTO {} ({}) VALUES ({})",
                        q(&table.name),
                        table
                            .columns
                            .iter()
                            .map(|c| q(c))
                            .collect::<Vec<_>>()
                            .join(", "),
                        placeholders.join(", ")
                    );
                    let mut done = 0;
                    reader.each_batch(table, |rows| {
                        let mut stmt = tx.prepare_cached(&sql)?;
                        for row in &rows {
                            stmt.execute(rusqlite::params_from_iter(row.iter()))?;
                        }
                        done += rows.len() as u64;
                        match progress(&CopyProgress {
                            table: table.name.clone(),
                            done,
                            total,
                        }) {
                            ControlFlow::Continue(()) => Ok(()),
                            ControlFlow::Break(()) => Err(Error::CopyStopped),
                        }
                    })?;
                    report.tables.push((table.name.clone(), done));
                }
                let broken = broken_references(&tx)?;
                if broken > 0 {
                    return Err(Error::CopyRefused(format!(
                        "the copy would leave {broken} rows pointing at rows that do not exist"
                    )));
                }
                tx.commit()?;
                Ok(())
            })();
            conn.pragma_update(None, "foreign_keys", true)?;
            outcome?;
        }
    }
    Ok(report)
}

/// How many rows of an SQLite store have a foreign key naming a row that is not there.
fn broken_references(conn: &rusqlite::Connection) -> Result<i64> {
    Ok(
        conn.query_row("SELECT count(*) FROM pragma_foreign_key_check", [], |r| {
            r.get(0)
        })?,
    )
}

/// `name` as a quoted identifier.
fn q(name: &str) -> String {
    format!("\"{}\"", name.replace('"', "\"\""))
}

fn count(db: &Database, table: &str) -> Result<i64> {
    // Table names come from the schema's own catalog, quoted.
    let sql = format!("SELECT count(*) FROM {}", q(table));
    match db.engine() {
        Engine::Postgres(pg) => Ok(pg.client()?.query_one(&sql, &[])?.try_get(0)?),
        Engine::Sqlite(sqlite) => Ok(sqlite.writer().query_row(&sql, [], |r| r.get(0))?),
    }
}

/// The tables to copy, parents before children, from an SQLite database's catalog.
fn plan(db: &SqliteStore) -> Result<Vec<Table>> {
    let conn = db.writer();
    let mut stmt = conn.prepare(
        "SELECT name, sql FROM sqlite_master WHERE type = 'table' \
         AND name NOT LIKE 'sqlite_%' AND name <> 'refinery_schema_history' ORDER BY rowid",
    )?;
    let all: Vec<(String, String)> = stmt
        .query_map([], |r| {
            Ok((
                r.get(0)?,
                r.get::<_, Option<String>>(1)?.unwrap_or_default(),
            ))
        })?
        .collect::<rusqlite::Result<_>>()?;
    let virtual_tables: Vec<&str> = all
        .iter()
        .filter(|(_, sql)| sql.to_ascii_uppercase().starts_with("CREATE VIRTUAL TABLE"))
        .map(|(name, _)| name.as_str())
        .collect();
    let mut tables = Vec::new();
    // (table, column, referenced table, nullable)
    let mut references: Vec<(String, String, String, bool)> = Vec::new();
    for (name, _) in &all {
        // Virtual tables and their shadow tables are the target's own business.
        if virtual_tables
            .iter()
            .any(|v| name == v || name.starts_with(&format!("{v}_")))
        {
            continue;
        }
        let mut columns = Vec::new();
        let mut key: Vec<(i64, String)> = Vec::new();
        let mut nullable = HashMap::new();
        let mut info = conn.prepare(
            "SELECT name, \"notnull\", pk, hidden FROM pragma_table_xinfo(?1) ORDER BY cid",
        )?;
        let mut rows = info.query([name])?;
        while let Some(row) = rows.next()? {
            let column: String = row.get(0)?;
            let hidden: i64 = row.get(3)?;
            if hidden != 0 {
                continue;
            }
            let pk: i64 = row.get(2)?;
            if pk > 0 {
                key.push((pk, column.clone()));
            }
            nullable.insert(column.clone(), row.get::<_, i64>(1)? == 0 && pk == 0);
            columns.push(column);
        }
        key.sort();
        let mut fks =
            conn.prepare("SELECT \"table\", \"from\" FROM pragma_foreign_key_list(?1)")?;
        let mut rows = fks.query([name])?;
        while let Some(row) = rows.next()? {
            let (target, column): (String, String) = (row.get(0)?, row.get(1)?);
            let null = nullable.get(&column).copied().unwrap_or(false);
            references.push((name.clone(), column, target, null));
        }
        tables.push(Table {
            name: name.clone(),
            columns,
            key: key.into_iter().map(|(_, c)| c).collect(),
            deferred: Vec::new(),
        });
    }
    // Parents first along NOT NULL references; nullable ones are filled in afterwards.
    let mut ordered: Vec<Table> = Vec::new();
    while !tables.is_empty() {
        let ready = tables.iter().position(|t| {
            references.iter().all(|(from, _, target, null)| {
                from != &t.name
                    || *null
                    || target == &t.name
                    || ordered.iter().any(|o| &o.name == target)
                    || !tables.iter().any(|x| &x.name == target)
            })
        });
        // A cycle of NOT NULL references cannot be inserted in any order; take the
        // first and let the database say which row it refuses.
        let next = tables.remove(ready.unwrap_or(0));
        ordered.push(next);
    }
    for (from, column, target, null) in &references {
        let Some(at) = ordered.iter().position(|t| &t.name == from) else {
            continue;
        };
        let later = ordered
            .iter()
            .position(|t| &t.name == target)
            .is_none_or(|p| p >= at);
        if *null && later && !ordered[at].key.is_empty() {
            ordered[at].deferred.push(column.clone());
        }
    }
    Ok(ordered)
}

/// Reads a source's rows in batches, all from one snapshot.
enum Reader<'a> {
    Sqlite(std::sync::MutexGuard<'a, rusqlite::Connection>),
    Postgres(Box<crate::pg::pool::Pooled<'a>>),
}

impl<'a> Reader<'a> {
    fn open(db: &'a Database) -> Result<Self> {
        match db.engine() {
            Engine::Postgres(pg) => {
                let mut client = pg.client()?;
                client.batch_execute("BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY")?;
                Ok(Reader::Postgres(Box::new(client)))
            }
            Engine::Sqlite(sqlite) => {
                let conn = sqlite.writer();
                conn.execute_batch("BEGIN DEFERRED")?;
                // The snapshot starts at the first read.
                conn.query_row("SELECT count(*) FROM sqlite_master", [], |r| {
                    r.get::<_, i64>(0)
                })?;
                Ok(Reader::Sqlite(conn))
            }
        }
    }

    fn count(&mut self, table: &str) -> Result<u64> {
        let sql = format!("SELECT count(*) FROM {}", q(table));
        let n: i64 = match self {
            Reader::Sqlite(conn) => conn.query_row(&sql, [], |r| r.get(0))?,
            Reader::Postgres(client) => client.query_one(&sql, &[])?.try_get(0)?,
        };
        Ok(u64::try_from(n).unwrap_or(0))
    }

    /// [`Error::CopyRefused`] when an SQLite source holds rows whose foreign key names a
    /// row that is not there (left by a delete with foreign keys off, which the `sqlite3`
    /// shell runs with), before anything is written: such rows cannot be carried as they
    /// are (PostgreSQL refused them midway with its raw message, an SQLite target after
    /// the copy), and `scribe db check` on the source names them. A PostgreSQL source
    /// keeps its references itself.
    fn refuse_broken_references(&mut self) -> Result<()> {
        let Reader::Sqlite(conn) = self else {
            return Ok(());
        };
        let broken = broken_references(conn)?;
        if broken > 0 {
            return Err(Error::CopyRefused(format!(
                "the source holds {broken} rows pointing at rows that do not exist \
                 (`scribe db check` on it names them); set them right there first"
            )));
        }
        Ok(())
    }

    /// [`Error::IdTooLong`] for the first id longer than [`crate::ids::MAX_ID_BYTES`]
    /// (a session's, a message's, a part's, a file version's, a session's source or user
    /// id, naming the session), read
    /// before anything is written to a PostgreSQL target: SQLite stores such an id (an
    /// older build, or one written around the services), PostgreSQL cannot index it, and
    /// the copy failed midway with the server's raw message naming an index. One scan of
    /// each table's id index (not of its rows); nothing is read from a PostgreSQL source,
    /// which cannot hold such ids.
    fn refuse_long_ids(&mut self) -> Result<()> {
        let Reader::Sqlite(conn) = self else {
            return Ok(());
        };
        let max = i64::try_from(crate::ids::MAX_ID_BYTES).unwrap_or(i64::MAX);
        for (what, table) in [
            ("session", "sessions"),
            ("message", "messages"),
            ("part", "parts"),
            ("file version", "files"),
        ] {
            // The id alone: a scan of the table's id index, never of its rows (a part's
            // row holds its whole JSON).
            let id: Option<String> = conn
                .query_row(
                    &format!("SELECT id FROM {table} WHERE length(CAST(id AS BLOB)) > ?1 LIMIT 1"),
                    [max],
                    |row| row.get(0),
                )
                .optional()?;
            let Some(id) = id else {
                continue;
            };
            let Err(err) = crate::ids::check_id(what, &id) else {
                continue;
            };
            if table == "sessions" {
                return Err(Error::IdTooLong(err));
            }
            let session: String = conn.query_row(
                &format!("SELECT session_id FROM {table} WHERE id = ?1"),
                [&id],
                |row| row.get(0),
            )?;
            return Err(Error::IdTooLong(err.in_session(&session)));
        }
        // A session's source and user id: the same rule (PostgreSQL indexes both), read
        // through their indexes (sessions_source, sessions_user).
        for (what, column) in [("source", "source"), ("user", "user_id")] {
            let found: Option<(String, String)> = conn
                .query_row(
                    &format!(
                        "SELECT {column}, id FROM sessions \
                         WHERE length(CAST({column} AS BLOB)) > ?1 LIMIT 1"
                    ),
                    [max],
                    |row| Ok((row.get(0)?, row.get(1)?)),
                )
                .optional()?;
            if let Some((text, session)) = found
                && let Err(err) = crate::ids::check_id(what, &text)
            {
                return Err(Error::IdTooLong(err.in_session(&session)));
            }
        }
        // A title: PostgreSQL keeps titles unique through an index too
        // (sessions_title_unique). The services cap a title at 200 characters (at most
        // 800 bytes); one written around them is held to the ids' bound, which the index
        // holds on every server.
        let title: Option<(String, usize)> = conn
            .query_row(
                "SELECT id, length(CAST(title AS BLOB)) FROM sessions \
                 WHERE length(CAST(title AS BLOB)) > ?1 LIMIT 1",
                [max],
                |row| Ok((row.get(0)?, row.get(1)?)),
            )
            .optional()?;
        if let Some((session, len)) = title {
            return Err(Error::CopyRefused(format!(
                "the title of session {session} is {len} bytes, more than PostgreSQL's \
                 title index is given ({} at most); shorten it in the source store first",
                crate::ids::MAX_ID_BYTES
            )));
        }
        Ok(())
    }

    /// Calls `f` with each batch of `table`'s rows (its columns, in key order).
    fn each_batch(
        &mut self,
        table: &Table,
        mut f: impl FnMut(Vec<Vec<Value>>) -> Result<()>,
    ) -> Result<()> {
        let order = if table.key.is_empty() {
            String::new()
        } else {
            format!(
                " ORDER BY {}",
                table
                    .key
                    .iter()
                    .map(|c| q(c))
                    .collect::<Vec<_>>()
                    .join(", ")
            )
        };
        let sql = format!(
            "SELECT {} FROM {}{order}",
            table
                .columns
                .iter()
                .map(|c| q(c))
                .collect::<Vec<_>>()
                .join(", "),
            q(&table.name)
        );
        match self {
            Reader::Sqlite(conn) => {
                let mut stmt = conn.prepare(&sql)?;
                let width = table.columns.len();
                let mut rows = stmt.query([])?;
                let mut batch = Vec::with_capacity(BATCH);
                while let Some(row) = rows.next()? {
                    let values = (0..width)
                        .map(|i| row.get::<_, Value>(i))
                        .collect::<rusqlite::Result<Vec<_>>>()?;
                    batch.push(values);
                    if batch.len() == BATCH {
                        f(std::mem::take(&mut batch))?;
                    }
                }
                if !batch.is_empty() {
                    f(batch)?;
                }
            }
            Reader::Postgres(client) => {
                let portal = client.query_raw::<_, &(dyn ToSql + Sync), _>(&sql, [])?;
                let mut batch = Vec::with_capacity(BATCH);
                let mut rows = portal;
                use postgres::fallible_iterator::FallibleIterator;
                while let Some(row) = rows.next()? {
                    batch.push(from_pg(&row)?);
                    if batch.len() == BATCH {
                        f(std::mem::take(&mut batch))?;
                    }
                }
                if !batch.is_empty() {
                    f(batch)?;
                }
            }
        }
        Ok(())
    }
}

impl Drop for Reader<'_> {
    fn drop(&mut self) {
        // Reads only: ending the snapshot is all there is to do.
        let _ = match self {
            Reader::Sqlite(conn) => conn.execute_batch("COMMIT").map_err(Error::from),
            Reader::Postgres(client) => client.batch_execute("COMMIT").map_err(Error::from),
        };
    }
}

/// A PostgreSQL row as SQLite values, by the column's PostgreSQL type.
fn from_pg(row: &postgres::Row) -> Result<Vec<Value>> {
    let mut values = Vec::with_capacity(row.len());
    for (i, column) in row.columns().iter().enumerate() {
        let ty = column.type_();
        let value = if *ty == Type::INT8 {
            row.try_get::<_, Option<i64>>(i)?.map(Value::Integer)
        } else if *ty == Type::INT4 {
            row.try_get::<_, Option<i32>>(i)?
                .map(|v| Value::Integer(i64::from(v)))
        } else if *ty == Type::INT2 {
            row.try_get::<_, Option<i16>>(i)?
                .map(|v| Value::Integer(i64::from(v)))
        } else if *ty == Type::FLOAT8 {
            row.try_get::<_, Option<f64>>(i)?.map(Value::Real)
        } else if *ty == Type::BOOL {
            row.try_get::<_, Option<bool>>(i)?
                .map(|v| Value::Integer(i64::from(v)))
        } else if *ty == Type::BYTEA {
            row.try_get::<_, Option<Vec<u8>>>(i)?.map(Value::Blob)
        } else if matches!(*ty, Type::TEXT | Type::VARCHAR | Type::BPCHAR | Type::NAME) {
            row.try_get::<_, Option<String>>(i)?.map(Value::Text)
        } else {
            return Err(Error::CopyRefused(format!(
                "column {} has PostgreSQL type {ty}, which the copy does not know",
                column.name()
            )));
        };
        values.push(value.unwrap_or(Value::Null));
    }
    Ok(values)
}

/// Inserts `rows` of `table` with multi-row INSERTs.
fn insert_pg(tx: &mut postgres::Transaction<'_>, table: &Table, rows: &[Vec<Value>]) -> Result<()> {
    if rows.is_empty() {
        return Ok(());
    }
    let width = table.columns.len();
    // PostgreSQL's text cannot hold a NUL, which SQLite's can: name the row and column
    // rather than let the server refuse the batch without naming either.
    for row in rows {
        for (column, value) in table.columns.iter().zip(row) {
            if let Value::Text(text) = value
                && text.contains('\0')
            {
                let key: Vec<String> = table
                    .key
                    .iter()
                    .filter_map(|k| table.columns.iter().position(|c| c == k))
                    .map(|i| match &row[i] {
                        Value::Text(t) => t.clone(),
                        Value::Integer(v) => v.to_string(),
                        other => format!("{other:?}"),
                    })
                    .collect();
                return Err(Error::NulInText {
                    what: format!("{}.{column} of row {}", table.name, key.join(", ")),
                    source: None,
                });
            }
        }
    }
    let mut n = 0;
    let tuples: Vec<String> = rows
        .iter()
        .map(|_| {
            let slots: Vec<String> = (0..width)
                .map(|_| {
                    n += 1;
                    format!("${n}")
                })
                .collect();
            format!("({})", slots.join(", "))
        })
        .collect();
    let sql = format!(
        "INSERT INTO {} ({}) OVERRIDING SYSTEM VALUE VALUES {}",
        q(&table.name),
        table
            .columns
            .iter()
            .map(|c| q(c))
            .collect::<Vec<_>>()
            .join(", "),
        tuples.join(", ")
    );
    let params: Vec<PgValue<'_>> = rows.iter().flatten().map(PgValue).collect();
    let refs: Vec<&(dyn ToSql + Sync)> = params.iter().map(|p| p as &(dyn ToSql + Sync)).collect();
    tx.execute(&sql, &refs)?;
    Ok(())
}

/// An SQLite value bound to a PostgreSQL parameter of whatever type the column has.
#[derive(Debug)]
struct PgValue<'v>(&'v Value);

impl ToSql for PgValue<'_> {
    fn to_sql(
        &self,
        ty: &Type,
        out: &mut BytesMut,
    ) -> std::result::Result<IsNull, Box<dyn std::error::Error + Sync + Send>> {
        match self.0 {
            Value::Null => Ok(IsNull::Yes),
            Value::Integer(v) => {
                if *ty == Type::BOOL {
                    (*v != 0).to_sql(ty, out)
                } else if *ty == Type::INT4 {
                    i32::try_from(*v)?.to_sql(ty, out)
                } else if *ty == Type::INT2 {
                    i16::try_from(*v)?.to_sql(ty, out)
                } else if *ty == Type::FLOAT8 {
                    // An integral REAL that SQLite handed back as an integer.
                    #[allow(clippy::cast_precision_loss)]
                    (*v as f64).to_sql(ty, out)
                } else {
                    v.to_sql(ty, out)
                }
            }
            Value::Real(v) => v.to_sql(ty, out),
            Value::Text(v) => v.to_sql(ty, out),
            Value::Blob(v) => v.to_sql(ty, out),
        }
    }

    fn accepts(_: &Type) -> bool {
        true
    }

    to_sql_checked!();
}
