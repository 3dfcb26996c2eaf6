//! [`Database`]: one SQLite file shared by threads and processes without losing a write.
//!
//! Writes go through one connection behind a mutex, each in `BEGIN IMMEDIATE` so a lock
//! conflict shows up at the start of the transaction rather than at commit. SQLite's own
//! busy handler waits only briefly; beyond that `write` retries the whole closure after a
//! random pause, so competing processes don't retry in lock-step. Reads use a small pool of
//! separate read-only connections, which in WAL mode never wait for a writer.

use std::fs;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Mutex, MutexGuard};
use std::time::Duration;

use rand::Rng;
use rusqlite::{Connection, OpenFlags, TransactionBehavior};

use crate::error::is_busy;
use crate::migrate::{self, MigrationReport};
use crate::{Error, Result};

/// Tuning of a [`Database`]; the defaults suit an interactive agent sharing its file with a
/// few other processes.
#[derive(Debug, Clone)]
pub struct Options {
    /// How long SQLite itself waits on a lock before reporting busy. Kept short: the
    /// jittered retries of [`Database::write`] do the real waiting.
    pub busy_timeout: Duration,
    /// How many times `write` tries (the first try included) before returning
    /// [`Error::Locked`].
    pub write_attempts: u32,
    /// Shortest random pause between tries.
    pub retry_min: Duration,
    /// Longest random pause between tries.
    pub retry_max: Duration,
    /// A passive WAL checkpoint runs after every this many successful writes (0: never).
    pub checkpoint_every: u64,
    /// SQLite page cache per connection, in KiB.
    pub cache_kib: i64,
    /// Idle read connections kept open for reuse.
    pub max_idle_readers: usize,
}

impl Default for Options {
    fn default() -> Self {
        // 80 tries of (50 ms busy wait + 20–150 ms pause) ≈ 10 s of contention before giving up.
        Options {
            busy_timeout: Duration::from_millis(50),
            write_attempts: 80,
            retry_min: Duration::from_millis(20),
            retry_max: Duration::from_millis(150),
            checkpoint_every: 100,
            cache_kib: 16 * 1024,
            max_idle_readers: 4,
        }
    }
}

/// A Scribe database: a file (or an in-memory database for tests) with the current schema.
///
/// `Send + Sync`; share it as `Arc<Database>`.
#[derive(Debug)]
pub struct Database {
    path: Option<PathBuf>,
    options: Options,
    writer: Mutex<Connection>,
    /// Idle read connections; unused for an in-memory database, which reads through the
    /// writer (a second connection would see a different, empty database).
    readers: Mutex<Vec<Connection>>,
    writes: AtomicU64,
    migration: MigrationReport,
}

impl Database {
    /// Opens (creating if needed) the database at `path` with default [`Options`] and brings
    /// its schema up to date.
    ///
    /// A new parent directory is created with mode 0700 and a new file with mode 0600, as
    /// conversations are private. A database written by a newer Scribe is refused with
    /// [`Error::SchemaTooNew`].
    pub fn open(path: impl AsRef<Path>) -> Result<Self> {
        Self::open_with(path, Options::default())
    }

    /// [`Database::open`] with explicit [`Options`].
    pub fn open_with(path: impl AsRef<Path>, options: Options) -> Result<Self> {
        Self::open_at(path.as_ref(), options, None)
    }

    /// Opens `path` and migrates it only up to version `target`; for tests of migrations
    /// from older schemas.
    #[doc(hidden)]
    pub fn open_at_version(path: impl AsRef<Path>, target: i64) -> Result<Self> {
        Self::open_at(path.as_ref(), Options::default(), Some(target))
    }

    fn open_at(path: &Path, options: Options, target: Option<i64>) -> Result<Self> {
        let path = absolute(path)?;
        create_private_file(&path)?;
        let flags = OpenFlags::SQLITE_OPEN_READ_WRITE
            | OpenFlags::SQLITE_OPEN_CREATE
            | OpenFlags::SQLITE_OPEN_NO_MUTEX;
        let mut conn = Connection::open_with_flags(&path, flags)?;
        conn.busy_timeout(options.busy_timeout)?;
        // Switching to WAL needs a moment of exclusive access, which a concurrent opener may
        // hold; it is retried like any write.
        retry(&options, || {
            let mode: String = conn.query_row("PRAGMA journal_mode = WAL", [], |row| row.get(0))?;
            if !mode.eq_ignore_ascii_case("wal") {
                tracing::warn!(%mode, "database did not switch to WAL mode");
            }
            Ok(())
        })?;
        configure(&conn, &options)?;
        let migration = retry(&options, || {
            let tx = conn.transaction_with_behavior(TransactionBehavior::Immediate)?;
            let report = migrate::migrate(&tx, target)?;
            tx.commit()?;
            Ok(report)
        })?;
        Ok(Database {
            path: Some(path),
            options,
            writer: Mutex::new(conn),
            readers: Mutex::new(Vec::new()),
            writes: AtomicU64::new(0),
            migration,
        })
    }

    /// A private in-memory database with the current schema, for tests.
    pub fn open_in_memory() -> Result<Self> {
        let options = Options::default();
        let mut conn = Connection::open_in_memory()?;
        configure(&conn, &options)?;
        let tx = conn.transaction_with_behavior(TransactionBehavior::Immediate)?;
        let migration = migrate::migrate(&tx, None)?;
        tx.commit()?;
        Ok(Database {
            path: None,
            options,
            writer: Mutex::new(conn),
            readers: Mutex::new(Vec::new()),
            writes: AtomicU64::new(0),
            migration,
        })
    }

    /// The database file, or `None` for an in-memory database.
    pub fn path(&self) -> Option<&Path> {
        self.path.as_deref()
    }

    /// The options this database was opened with.
    pub fn options(&self) -> &Options {
        &self.options
    }

    /// What opening did to the schema.
    pub fn migration_report(&self) -> &MigrationReport {
        &self.migration
    }

    /// The schema version recorded in the database.
    pub fn schema_version(&self) -> Result<i64> {
        self.read(migrate::current_version)
    }

    /// The highest schema version this build knows.
    pub fn known_schema_version() -> i64 {
        migrate::known_version()
    }

    /// Runs `f` in a `BEGIN IMMEDIATE` transaction and commits it.
    ///
    /// If another connection holds the write lock (SQLITE_BUSY or SQLITE_LOCKED, at begin,
    /// inside `f` or at commit), the transaction is rolled back and `f` runs again after a
    /// random pause, up to [`Options::write_attempts`] tries; then [`Error::Locked`]. So `f`
    /// must have no effects outside the transaction. Any other error from `f` rolls back
    /// and is returned as is.
    ///
    /// Don't call [`Database::read`] or `write` from inside `f`: use `tx`, which sees the
    /// transaction's own changes.
    pub fn write<T, F>(&self, mut f: F) -> Result<T>
    where
        F: FnMut(&rusqlite::Transaction<'_>) -> Result<T>,
    {
        let value = retry(&self.options, || {
            let mut conn = self.writer();
            let tx = conn.transaction_with_behavior(TransactionBehavior::Immediate)?;
            let value = f(&tx)?;
            tx.commit()?;
            Ok(value)
        })?;
        self.after_write();
        Ok(value)
    }

    /// Runs `f` on a read-only connection inside one read transaction, so everything it
    /// reads comes from the same snapshot. Never waits for a writer (WAL), and retried like
    /// [`Database::write`] in the rare case SQLite reports busy.
    pub fn read<T, F>(&self, mut f: F) -> Result<T>
    where
        F: FnMut(&Connection) -> Result<T>,
    {
        let Some(path) = &self.path else {
            let conn = self.writer();
            return f(&conn);
        };
        retry(&self.options, || {
            let conn = self.take_reader(path)?;
            let result = (|| {
                let tx = conn.unchecked_transaction()?;
                let value = f(&tx)?;
                tx.commit()?;
                Ok(value)
            })();
            self.return_reader(conn);
            result
        })
    }

    /// Runs a passive WAL checkpoint now: copies what it can without waiting for readers.
    pub fn checkpoint(&self) -> Result<()> {
        if self.path.is_some() {
            let conn = self.writer();
            conn.query_row("PRAGMA wal_checkpoint(PASSIVE)", [], |_| Ok(()))?;
        }
        Ok(())
    }

    fn writer(&self) -> MutexGuard<'_, Connection> {
        // A panic inside a write closure rolled its transaction back (Transaction's drop),
        // so the connection behind a poisoned lock is still sound.
        self.writer
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    fn after_write(&self) {
        let every = self.options.checkpoint_every;
        let done = self.writes.fetch_add(1, Ordering::Relaxed) + 1;
        if self.path.is_some() && every > 0 && done % every == 0 {
            // Keeps the WAL from growing while readers stay busy; failure only delays that.
            if let Err(err) = self.checkpoint() {
                tracing::debug!(error = %err, "passive checkpoint failed");
            }
        }
    }

    fn take_reader(&self, path: &Path) -> Result<Connection> {
        let idle = self
            .readers
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
            .pop();
        if let Some(conn) = idle {
            return Ok(conn);
        }
        let flags = OpenFlags::SQLITE_OPEN_READ_WRITE | OpenFlags::SQLITE_OPEN_NO_MUTEX;
        let conn = Connection::open_with_flags(path, flags)?;
        conn.busy_timeout(self.options.busy_timeout)?;
        configure(&conn, &self.options)?;
        // Read-write at the file level (so it can map the WAL index) but unable to write.
        conn.pragma_update(None, "query_only", true)?;
        Ok(conn)
    }

    fn return_reader(&self, conn: Connection) {
        let mut idle = self
            .readers
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        if idle.len() < self.options.max_idle_readers && conn.is_autocommit() {
            idle.push(conn);
        }
    }
}

/// Per-connection settings (WAL mode is per file and set once at open).
fn configure(conn: &Connection, options: &Options) -> Result<()> {
    conn.pragma_update(None, "foreign_keys", true)?;
    conn.pragma_update(None, "synchronous", "NORMAL")?;
    conn.pragma_update(None, "cache_size", -options.cache_kib)?;
    conn.pragma_update(None, "temp_store", "MEMORY")?;
    Ok(())
}

/// Runs `op` until it succeeds, fails with something other than busy, or has been tried
/// `options.write_attempts` times (then [`Error::Locked`]).
fn retry<T>(options: &Options, mut op: impl FnMut() -> Result<T>) -> Result<T> {
    let attempts = options.write_attempts.max(1);
    for attempt in 1..=attempts {
        match op() {
            Err(err) if err.is_busy() => {
                if attempt == attempts {
                    break;
                }
                std::thread::sleep(jitter(options));
            }
            Err(Error::Migration(err)) if migration_busy(&err) => {
                if attempt == attempts {
                    break;
                }
                std::thread::sleep(jitter(options));
            }
            other => return other,
        }
    }
    Err(Error::Locked)
}

fn jitter(options: &Options) -> Duration {
    let (min, max) = (options.retry_min, options.retry_max.max(options.retry_min));
    rand::rng().random_range(min..=max)
}

/// refinery wraps driver errors; a busy database during migration is retried too.
fn migration_busy(err: &refinery::Error) -> bool {
    let mut source: Option<&(dyn std::error::Error + 'static)> = Some(err);
    while let Some(current) = source {
        if let Some(sqlite) = current.downcast_ref::<rusqlite::Error>() {
            return is_busy(sqlite);
        }
        source = current.source();
    }
    false
}

fn absolute(path: &Path) -> Result<PathBuf> {
    std::path::absolute(path).map_err(|source| Error::Io {
        path: path.to_owned(),
        source,
    })
}

/// Creates the parent directory (0700) and the file (0600) if they don't exist; existing
/// ones keep their modes.
fn create_private_file(path: &Path) -> Result<()> {
    let io = |path: &Path| {
        let path = path.to_owned();
        move |source| Error::Io { path, source }
    };
    if let Some(parent) = path.parent().filter(|p| !p.as_os_str().is_empty()) {
        let mut builder = fs::DirBuilder::new();
        builder.recursive(true);
        #[cfg(unix)]
        std::os::unix::fs::DirBuilderExt::mode(&mut builder, 0o700);
        builder.create(parent).map_err(io(parent))?;
    }
    let mut file = fs::OpenOptions::new();
    file.read(true).write(true).create(true).truncate(false);
    #[cfg(unix)]
    std::os::unix::fs::OpenOptionsExt::mode(&mut file, 0o600);
    file.open(path).map_err(io(path))?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn assert_send_sync<T: Send + Sync>() {}

    #[test]
    fn database_is_send_and_sync() {
        assert_send_sync::<Database>();
    }

    #[test]
    fn in_memory_has_current_schema() {
        let db = Database::open_in_memory().unwrap();
        assert_eq!(
            db.schema_version().unwrap(),
            Database::known_schema_version()
        );
        let n: i64 = db
            .read(|c| Ok(c.query_row("SELECT count(*) FROM sessions", [], |r| r.get(0))?))
            .unwrap();
        assert_eq!(n, 0);
    }
}
