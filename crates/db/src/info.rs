//! [`Database::info`]: what `scribe db info` shows.

use std::path::PathBuf;

use sea_query::{Alias, Asterisk, Expr, ExprTrait, Query, SqliteQueryBuilder};
use sea_query_rusqlite::RusqliteBinder;

use crate::{Database, Result, migrate};

/// The tables whose rows `info` counts, in display order.
const TABLES: [&str; 4] = ["sessions", "messages", "parts", "files"];

/// Row count of one table.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TableCount {
    /// The table's name.
    pub table: &'static str,
    /// How many rows it holds.
    pub rows: i64,
}

/// A summary of a database.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DbInfo {
    /// The backend it runs on.
    pub backend: crate::Backend,
    /// Where it is, for people ([`Database::location`]: a PostgreSQL URL's password is
    /// hidden).
    pub location: String,
    /// The engine and its version: `SQLite 3.50.4` (the library linked in) or
    /// `PostgreSQL 15.14` (the server's).
    pub engine_version: String,
    /// The file, or `None` in memory or on PostgreSQL.
    pub path: Option<PathBuf>,
    /// Schema version recorded in the database.
    pub schema_version: i64,
    /// Highest schema version this build knows.
    pub known_version: i64,
    /// Rows per table.
    pub tables: Vec<TableCount>,
    /// Size of the main file in bytes (0 in memory); on PostgreSQL the database's size
    /// (`pg_database_size`).
    pub file_size: u64,
    /// Size of the write-ahead log file in bytes (0 when absent or in memory); `None` on
    /// PostgreSQL, whose log is the server's, shared by its databases, with no file of
    /// this database's own.
    pub wal_size: Option<u64>,
}

impl Database {
    /// Path, schema versions, row counts and file sizes.
    pub fn info(&self) -> Result<DbInfo> {
        #[cfg(feature = "postgres")]
        if let Some(pg) = self.postgres() {
            return pg.info(&TABLES, self.location());
        }
        let (schema_version, tables) = self.read_sqlite("info", |conn| {
            let version = migrate::current_version(conn)?;
            let mut tables = Vec::with_capacity(TABLES.len());
            for table in TABLES {
                // The table name varies, so the statement is built rather than written out.
                let (sql, values) = Query::select()
                    .expr(Expr::col(Asterisk).count())
                    .from(Alias::new(table))
                    .build_rusqlite(SqliteQueryBuilder);
                let rows = conn.query_row(&sql, &*values.as_params(), |row| row.get(0))?;
                tables.push(TableCount { table, rows });
            }
            Ok((version, tables))
        })?;
        let size = |suffix: &str| {
            self.path()
                .and_then(|p| {
                    let mut name = p.as_os_str().to_owned();
                    name.push(suffix);
                    std::fs::metadata(PathBuf::from(name)).ok()
                })
                .map_or(0, |m| m.len())
        };
        Ok(DbInfo {
            backend: crate::Backend::Sqlite,
            location: self.location(),
            engine_version: format!("SQLite {}", rusqlite::version()),
            path: self.path().map(PathBuf::from),
            schema_version,
            known_version: migrate::known_version(),
            tables,
            file_size: size(""),
            wal_size: Some(size("-wal")),
        })
    }
}
