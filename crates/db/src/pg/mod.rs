//! The PostgreSQL backend (`postgres` feature): what [`crate::Database`] runs on when it
//! is opened with a `postgres://` URL or a libpq keyword string.
//!
//! - [`location`]: parsing the URL (sslmode, sslrootcert, the password hidden in errors).
//! - [`pool`]: the connection pool and TLS.
//! - [`migrate`]: migrations under an advisory lock.
//! - [`events`]: the cross-host event listener.
//! - [`copy`]: copying a whole store between backends.
//! - `check`: what `scribe db check` verifies on PostgreSQL.
//!
//! Transactions keep SQLite's contract. A write runs SERIALIZABLE, so every
//! read-check-write a service does (a free title, the next file version, a lease) is as
//! safe as under SQLite's single writer: a conflicting concurrent transaction fails with a
//! serialization failure (40001) or a deadlock (40P01), and the whole closure runs again
//! after the same random pause as SQLite's busy retry, with an empty after-commit queue.
//! A write also turns `enable_seqscan` off for its transaction: under SERIALIZABLE a
//! sequential scan predicate-locks its whole table, and the planner picks one for a
//! lookup by key in a table of a few pages once it has statistics (autovacuum analyzes a
//! new store's tables in its first minute), after which every writer conflicted with
//! every other writer of the table, whatever their sessions. A write's statements are
//! lookups by key; with no index to use, a scan still runs.
//! If the connection is lost while COMMIT is under way, the outcome is unknown and
//! [`crate::Error::CommitUnknown`] is returned, never a retry. A read runs REPEATABLE READ
//! READ ONLY: one snapshot, never blocking a writer.

mod check;
pub mod copy;
pub mod events;
pub(crate) mod location;
pub(crate) mod migrate;
pub(crate) mod pool;

use crate::clock::Clock;
use crate::database::{Options, retry, retry_with};
use crate::info::{DbInfo, TableCount};
use crate::migrate::MigrationReport;
use crate::queries::postgres::PgQueries;
use crate::tx::{AfterCommit, ReadTx, Tx, TxError};
use crate::{Error, Result};

use location::Location;
use pool::{Pool, Pooled};

/// SQLSTATE of "current transaction is aborted, commands ignored until end of transaction
/// block".
const IN_FAILED_TRANSACTION: &str = "25P02";

/// An open PostgreSQL store: its pool and what opening it found.
#[derive(Debug)]
pub(crate) struct PgBackend {
    /// Shared with the background trim (see [`PgBackend::trim_when_due`]).
    pool: std::sync::Arc<Pool>,
    /// Write closures run again after a serialization failure or deadlock.
    retries: std::sync::atomic::AtomicU64,
    /// When this process last deleted outbox rows past their retention (`None`: not yet;
    /// it does after its first commit, then every [`events::WRITER_TRIM_EVERY`]).
    trimmed_at: std::sync::Mutex<Option<std::time::Instant>>,
    /// A background trim is running (at most one per process).
    trimming: std::sync::Arc<std::sync::atomic::AtomicBool>,
}

/// How a write transaction begins (see the module docs for `enable_seqscan`); one round
/// trip.
const BEGIN_WRITE: &str = "BEGIN ISOLATION LEVEL SERIALIZABLE; SET LOCAL enable_seqscan = off";

impl PgBackend {
    /// Connects to `text`, checks the server is reachable and the credentials work, and
    /// migrates the schema (up to `target`, or all; nothing with `options.read_only`).
    pub(crate) fn open(
        text: &str,
        options: &Options,
        target: Option<i64>,
    ) -> Result<(Self, MigrationReport)> {
        let location = Location::parse(text)?;
        let origin = uuid::Uuid::now_v7().simple().to_string();
        let max_open = options.max_idle_readers.max(1) * 4;
        let pool = Pool::new(
            location,
            origin,
            max_open,
            options.max_idle_readers.max(1) + 1,
        )?;
        let report = {
            let mut client = pool.get()?;
            let shown = pool.location().shown.clone();
            if let Some(path) = migrate::extension_path(&mut client)? {
                client.execute(
                    "SELECT pg_catalog.set_config('search_path', $1, false)",
                    &[&path],
                )?;
                pool.set_search_path(path);
            }
            let outcome = retry(options, || {
                migrate::migrate(&mut client, target, options.read_only, &shown)
            });
            if outcome.is_err() {
                // Its transaction state is not worth finding out.
                client.discard();
            }
            outcome?
        };
        Ok((
            PgBackend {
                pool: std::sync::Arc::new(pool),
                retries: std::sync::atomic::AtomicU64::new(0),
                trimmed_at: std::sync::Mutex::new(None),
                trimming: std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false)),
            },
            report,
        ))
    }

    /// How many times a write closure ran again (see [`crate::Database::write_retries`]).
    pub(crate) fn write_retries(&self) -> u64 {
        self.retries.load(std::sync::atomic::Ordering::Relaxed)
    }

    /// The location with its password hidden.
    pub(crate) fn shown(&self) -> &str {
        &self.pool.location().shown
    }

    /// The name this process's connections give their changes (`scribe.origin`).
    pub(crate) fn origin(&self) -> &str {
        self.pool.origin()
    }

    pub(crate) fn pool(&self) -> &Pool {
        &self.pool
    }

    /// [`crate::Database::write`] on PostgreSQL.
    pub(crate) fn write<T, E, F>(&self, options: &Options, mut f: F) -> Result<T, E>
    where
        E: TxError,
        F: FnMut(&mut Tx<'_>) -> Result<T, E>,
    {
        if options.read_only {
            return Err(E::from(Error::ReadOnly {
                path: self.shown().into(),
            }));
        }
        let mut tried = false;
        let (value, actions) = retry_with(options, || {
            if std::mem::replace(&mut tried, true) {
                self.retries
                    .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            }
            self.write_once(&options.clock, &mut f)
        })?;
        for action in actions {
            action();
        }
        self.trim_when_due();
        Ok(value)
    }

    /// Makes the next commit start an outbox trim, as if the last were
    /// [`events::WRITER_TRIM_EVERY`] ago (tests).
    pub(crate) fn trim_due_now(&self) {
        *self
            .trimmed_at
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner) = None;
    }

    /// Whether a background outbox trim is running: it has not yet returned its connection
    /// to the pool (tests).
    pub(crate) fn trim_running(&self) -> bool {
        self.trimming.load(std::sync::atomic::Ordering::Acquire)
    }

    /// After a commit: starts deleting the outbox rows past their retention on a thread of
    /// its own if this process has not for [`events::WRITER_TRIM_EVERY`] (or ever), so a
    /// store nobody listens to does not grow. The write that happens to be due returns at
    /// once: the trim's DELETE takes ~0.3 s per 300,000 expired rows, which no caller
    /// should wait for. A failure is logged, never the write's. The trim takes a spare
    /// connection ([`Pool::get_spare`]), never the warm one the writer will want next,
    /// and the one it used goes back below the writers' (it has prepared nothing).
    fn trim_when_due(&self) {
        use std::sync::atomic::Ordering;
        {
            let mut last = self
                .trimmed_at
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner);
            if last.is_some_and(|at| at.elapsed() < events::WRITER_TRIM_EVERY) {
                return;
            }
            if self.trimming.swap(true, Ordering::AcqRel) {
                // The last one is still running; it counts as this one.
                return;
            }
            *last = Some(std::time::Instant::now());
        }
        let pool = std::sync::Arc::clone(&self.pool);
        let trimming = std::sync::Arc::clone(&self.trimming);
        let spawned = std::thread::Builder::new()
            .name("scribe-outbox-trim".to_owned())
            .spawn(move || {
                let outcome = pool.get_spare().and_then(|mut client| {
                    let outcome = events::trim(&mut client);
                    if outcome.is_err() {
                        client.discard();
                    }
                    outcome
                });
                if let Err(err) = outcome {
                    tracing::debug!(error = %err, "could not trim the change outbox");
                }
                trimming.store(false, Ordering::Release);
            });
        if let Err(err) = spawned {
            self.trimming.store(false, Ordering::Release);
            tracing::debug!(error = %err, "could not start trimming the change outbox");
        }
    }

    fn write_once<T, E, F>(&self, clock: &Clock, f: &mut F) -> Result<(T, Vec<AfterCommit>), E>
    where
        E: TxError,
        F: FnMut(&mut Tx<'_>) -> Result<T, E>,
    {
        let mut client = self.begin(BEGIN_WRITE)?;
        let outcome = {
            let (conn, statements) = client.with_statements(true);
            let mut tx = Tx::postgres(PgQueries::cached(conn, statements), clock);
            f(&mut tx).map(|value| (value, tx.into_after_commit()))
        };
        match outcome {
            Ok(done) => {
                commit(client)?;
                Ok(done)
            }
            Err(err) => {
                rollback(client);
                Err(err)
            }
        }
    }

    /// [`crate::Database::read`] on PostgreSQL.
    pub(crate) fn read<T, E, F>(&self, options: &Options, mut f: F) -> Result<T, E>
    where
        E: TxError,
        F: FnMut(&mut ReadTx<'_>) -> Result<T, E>,
    {
        retry_with(options, || {
            let mut client = self.begin("BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY")?;
            let (conn, statements) = client.with_statements(false);
            let outcome = f(&mut ReadTx::postgres(
                PgQueries::cached(conn, statements),
                &options.clock,
            ));
            // A read has nothing to lose: ending it is enough either way.
            rollback(client);
            outcome
        })
    }

    /// A pooled connection inside a transaction begun with `begin`. A reused connection
    /// the server closed while it sat idle is closed and the next one tried, until one
    /// begins or a new one is opened: one whose socket closed, or one whose session the
    /// server ended (`pg_terminate_backend`, a restart, an idle timeout), which answers its
    /// next statement with a FATAL error. Nothing ran on it yet, so replacing it loses
    /// nothing; each one tried leaves the idle list, so this ends.
    fn begin(&self, begin: &str) -> Result<Pooled<'_>> {
        loop {
            let mut client = self.pool.get()?;
            match client.batch_execute(begin) {
                Ok(()) => return Ok(client),
                Err(err) => {
                    let stale = client.reused() && session_ended(&err);
                    client.discard();
                    if !stale {
                        return Err(err.into());
                    }
                }
            }
        }
    }

    /// The highest migration version recorded.
    pub(crate) fn schema_version(&self) -> Result<i64> {
        let mut client = self.pool.get()?;
        migrate::current_version(&mut client)
    }

    /// [`crate::Database::info`] on PostgreSQL: the database's size stands for the file
    /// size; there is no write-ahead log file of its own.
    pub(crate) fn info(&self, tables: &[&'static str], location: String) -> Result<DbInfo> {
        let mut client = self.pool.get()?;
        client.batch_execute("BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY")?;
        let version: String = client
            .query_one("SELECT current_setting('server_version')", &[])?
            .try_get(0)?;
        let schema_version = migrate::current_version(&mut client)?;
        let mut counts = Vec::with_capacity(tables.len());
        for &table in tables {
            // The table names are this crate's constants, never input.
            let rows: i64 = client
                .query_one(&format!("SELECT count(*) FROM {table}"), &[])?
                .try_get(0)?;
            counts.push(TableCount { table, rows });
        }
        let size: i64 = client
            .query_one("SELECT pg_database_size(current_database())", &[])?
            .try_get(0)?;
        client.batch_execute("COMMIT")?;
        Ok(DbInfo {
            backend: crate::Backend::Postgres,
            location,
            engine_version: format!("PostgreSQL {version}"),
            path: None,
            schema_version,
            known_version: migrate::known_version(),
            tables: counts,
            file_size: u64::try_from(size).unwrap_or(0),
            wal_size: None,
        })
    }

    /// A connection of the pool, for crate-internal work outside `write`/`read` (copying a
    /// store).
    pub(crate) fn client(&self) -> Result<Pooled<'_>> {
        self.pool.get()
    }
}

/// Commits. The `SELECT 1` first makes a transaction that a failed statement already
/// aborted report that (PostgreSQL answers a bare COMMIT there with a silent ROLLBACK, so a
/// closure that went on after an error would lose its writes without a word). Both go in
/// one message, so the outcome is unknown exactly when the connection fails before the
/// answer arrives.
fn commit(mut client: Pooled<'_>) -> Result<()> {
    match client.batch_execute("SELECT 1; COMMIT") {
        Ok(()) => Ok(()),
        // An ended session (lost connection, or FATAL: the server shut down or terminated
        // it while COMMIT was on its way) leaves whether it ran unknown: handled below.
        Err(err) if !session_ended(&err) => {
            let err = Error::from(err);
            let err = match err {
                Error::Postgres {
                    code: Some(code),
                    source,
                    ..
                } if code == IN_FAILED_TRANSACTION => Error::Postgres {
                    code: Some(code),
                    message: "a statement failed earlier in this transaction and the closure \
                              went on; on PostgreSQL a failed statement aborts the whole \
                              transaction, so nothing was committed"
                        .to_owned(),
                    source,
                },
                other => other,
            };
            rollback(client);
            Err(err)
        }
        Err(err) => {
            client.discard();
            Err(Error::CommitUnknown(Box::new(err)))
        }
    }
}

/// Whether `err` means the connection's session is over: the connection was lost (no
/// answer from the server), or the server ended the session with a FATAL or PANIC error
/// (an administrator's `pg_terminate_backend`, a shutdown, an idle timeout), after which it
/// closes the connection. Any other error leaves the session usable. The severity is read
/// from the field servers never translate, the localized one only where that is missing.
fn session_ended(err: &postgres::Error) -> bool {
    use postgres::error::Severity;
    err.as_db_error()
        .is_none_or(|db| match db.parsed_severity() {
            Some(severity) => matches!(severity, Severity::Fatal | Severity::Panic),
            None => matches!(db.severity(), "FATAL" | "PANIC"),
        })
}

/// Rolls back; a connection that cannot even do that is closed rather than reused.
fn rollback(mut client: Pooled<'_>) {
    if client.batch_execute("ROLLBACK").is_err() {
        client.discard();
    }
}
