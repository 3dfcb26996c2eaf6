//! [`Database`]: one SQLite file shared by threads and processes without losing a write.
//!
//! Writes go through one connection behind a mutex, each in `BEGIN IMMEDIATE` so a lock
//! conflict shows up at the start of the transaction rather than at commit. SQLite's own
//! busy handler waits only briefly; beyond that `write` retries the whole closure after a
//! random pause, so competing processes don't retry in lock-step. Reads use a small pool of
//! separate read-only connections, which in WAL mode never wait for a writer.
//!
//! [`Options::read_only`] opens an existing file for reading only: no file is created, no
//! migration runs, every connection is opened `SQLITE_OPEN_READ_ONLY`, and `write` returns
//! [`Error::ReadOnly`]. That is how a database on a read-only disk, or owned by another
//! user, can still be read.
//!
//! A [`Database`] is one backend's state and nothing of the other's (`Engine`): an
//! SQLite file's connections (`SqliteStore`, this module), or a PostgreSQL pool
//! (`crate::pg`), to which `write`, `read` and the rest delegate.

use std::fs;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use rand::Rng;
use rusqlite::config::DbConfig;
use rusqlite::{Connection, ErrorCode, OpenFlags, TransactionBehavior};

use crate::checkpoint::{self, AutoCheckpoint, Checkpointer};
use crate::clock::Clock;
use crate::error::is_busy;
use crate::gate::Gate;
use crate::migrate::{self, MigrationReport};
use crate::search_index::{IndexBatch, Indexer};
use crate::tx::{AfterCommit, ReadTx, SqliteTx, Tx, TxError};
use crate::{Error, Result};

/// The schema version that queues parts for the search indexes (V7).
const SEARCH_QUEUE_VERSION: i64 = 7;

/// Tuning of a [`Database`]; the defaults suit an interactive agent sharing its file with a
/// few other processes.
#[derive(Debug, Clone)]
pub struct Options {
    /// How long SQLite itself waits on a lock before reporting busy. Kept short: the
    /// jittered retries of [`Database::write`] do the real waiting. SQLite takes at most
    /// `i32::MAX` ms; a longer one is cut to that.
    pub busy_timeout: Duration,
    /// How many times `write` tries (the first try included) before returning
    /// [`Error::Locked`].
    pub write_attempts: u32,
    /// Shortest random pause between tries.
    pub retry_min: Duration,
    /// Longest random pause between tries.
    pub retry_max: Duration,
    /// A passive WAL checkpoint runs on the writer connection after every this many
    /// successful writes (0: never).
    pub checkpoint_every: u64,
    /// Whenever a commit of this process leaves at least this many frames (pages) in the
    /// `-wal` file, a background thread of this process checkpoints the WAL so that the
    /// next writer starts it over. A PASSIVE checkpoint first copies nearly everything
    /// without any lock writers wait for; then, holding the write lock (taken on a
    /// connection of its own, looking every 250 us), PASSIVE checkpoints copy the frames
    /// committed meanwhile: two short syncs under the lock (see
    /// `crates/db/src/checkpoint.rs`). `journal_size_limit` is twice this size. With
    /// several processes writing without pause, SQLite's own passive auto-checkpoint
    /// (which still runs, every 1,000 pages) never catches up, and the file only grows
    /// (to ~600 MB in stop 24's 4-writer benchmark). Read-write file databases only.
    ///
    /// 0 (the default): no thread, SQLite's auto-checkpoint only. Not the default because
    /// it did not pay in scribe-bench's 4-writer row (stop 26, three alternated runs
    /// each): with 4,096 pages the peak `-wal` was 86-573 MB against 131-572 MB without
    /// (the round often cannot take the lock between four writers committing without
    /// pause), and the total and worst wait moved within the runs' noise. With a small
    /// threshold and writers that pause it does bound the file
    /// (`tests/tests/wal_bounded.rs`: 256 pages, under 32 MiB against 58-66 MB).
    pub wal_restart_pages: u32,
    /// SQLite page cache per connection, in KiB.
    pub cache_kib: i64,
    /// Idle read connections kept open for reuse.
    pub max_idle_readers: usize,
    /// Open an existing database for reading only (see [`Database::open_read_only`]).
    pub read_only: bool,
    /// Create a missing SQLite file (and its directory) when opening read-write: the
    /// default, what a writer wants. Off ([`Database::open_existing`]), a path with no
    /// file is [`Error::NoDatabase`] and nothing is created, as for a read-only open
    /// (which never creates). PostgreSQL never creates a database when connecting, so it
    /// has no say there.
    pub create: bool,
    /// Where the services over this database read the time ([`Database::now`],
    /// [`Tx::now`]); the system clock by default, a test's own clock in tests.
    pub clock: Clock,
    /// Index queued parts on a background thread of this process (read-write file
    /// databases only). Without it, parts are indexed by [`Database::index_pending`]: by
    /// the next search, in any process, or the next open with it.
    pub background_indexing: bool,
    /// How long the background indexer lets writes gather after the first one wakes it,
    /// so that one transaction indexes many of them.
    pub index_delay: Duration,
    /// The bounds of each of the background indexer's transactions: short, since a write
    /// of this process waits for the one running.
    pub index_batch: IndexBatch,
    /// Scribe's writers take their turns at SQLite's write lock in a queue the kernel
    /// keeps: before `BEGIN IMMEDIATE` a write (and a batch of the background indexer, and
    /// a migration) takes an exclusive `flock` on the side file `<db>-writers`, blocking,
    /// so that a waiter is woken the moment the holder commits, instead of sleeping and
    /// looking again (see `crates/db/src/gate.rs`). The wait is bounded by the retries'
    /// budget ([`Options::write_attempts`] x (busy timeout + mean pause)): then
    /// [`Error::Locked`]. SQLite's lock stays the guarantee; a program that does not take
    /// the gate is still excluded by SQLite. Read-write file databases on unix only.
    ///
    /// With the gate, SQLite's auto-checkpoint (a passive checkpoint after each commit
    /// that leaves 1,000 frames or more in the WAL) runs after the writer let the gate go,
    /// not inside its commit: under the gate it stopped every writer for its syncs (the
    /// WAL then restarted every ~1,000 frames, 5-17 MB at most, but the 4-writer total
    /// fell 20-50% and the worst wait rose). Since stop 31 it runs on a thread of its own
    /// with a connection of its own, and the write that was due it returns at once (those
    /// writes were the slowest 1% of single appends, 5-6 ms each); only a write that finds
    /// 4,000 frames or more in the WAL (the thread has not caught up with writes that never
    /// pause) still runs it itself, so that the WAL starts over
    /// ([`Database::wait_for_checkpoint`]).
    ///
    /// On by default (since stop 30). In ten alternated pairs of scribe-bench's 4-writer
    /// row (`--only writers`, `SCRIBE_BENCH_WRITER_GATE=0|1`, another build running on the
    /// machine) the worst wait was 44-158 ms with the gate and 111-396 ms without (over
    /// 200 ms in six of ten), the p99 13-18 ms against 21-30 ms, and the peak `-wal` file
    /// 69-207 MiB against 87-576 MiB; the total fell by ~10% (3,115 against 3,445 msg/s on
    /// average; 0.69-1.02x the limit against 0.74-1.27x): a fair turn costs a process
    /// switch per commit, and the next writer's page cache is stale after every other
    /// process's commit. Processes sharing a file (an agent, a TUI, a gateway, the CLI)
    /// feel the tail more than the saturated total, so the gate is on; off, the writers
    /// take SQLite's lock alone, as before. Stop 27's eight pairs found the same
    /// (`docs/measurements/sqlite.md`). Short turns (a writer kept the gate for a linger
    /// after its commit, so that a busy process committed a batch per turn) lowered the
    /// total in 10 of 11 pairs, with worst waits no better than a turn per write: more
    /// likely the cost is that a turn stops other processes while the holder works between
    /// its commits, work that otherwise overlaps their transactions; they were reverted.
    pub writer_gate: bool,
}

impl Default for Options {
    fn default() -> Self {
        // 500 tries of (10 ms busy wait + 1–20 ms pause) ≈ 10 s of contention before giving
        // up. Short, jittered pauses are what keep the wait fair: with 4 processes appending
        // in tight loops, 20–150 ms pauses let the writer that just committed retake the lock
        // while every waiter slept, and single writes waited up to 850 ms; with 1–20 ms the
        // worst wait measured 161–264 ms at the same throughput (scribe-bench).
        // A kernel-queued turn for writers (`writer_gate`) cuts that worst wait to 44-167 ms
        // and the p99 by ~40% for ~10% of the saturated total: on.
        // SQLite checkpoints on its own every 1,000 WAL pages; ours is a backstop, since each
        // passive checkpoint waits for an fsync (about 5% of append throughput at every 100).
        Options {
            busy_timeout: Duration::from_millis(10),
            write_attempts: 500,
            retry_min: Duration::from_millis(1),
            retry_max: Duration::from_millis(20),
            checkpoint_every: 1000,
            wal_restart_pages: 0,
            cache_kib: 16 * 1024,
            max_idle_readers: 4,
            read_only: false,
            create: true,
            clock: Clock::system(),
            background_indexing: true,
            index_delay: Duration::from_millis(50),
            index_batch: IndexBatch {
                max_parts: 1_000,
                max_time: Duration::from_millis(4),
            },
            writer_gate: true,
        }
    }
}

/// What one WAL checkpoint did: SQLite's `PRAGMA wal_checkpoint` result row.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CheckpointReport {
    /// Another connection kept the checkpoint from finishing (a passive one never waits).
    pub busy: bool,
    /// Frames in the WAL file.
    pub wal_frames: i64,
    /// Frames of the WAL already copied into the database file (all of them once
    /// `checkpointed_frames == wal_frames`).
    pub checkpointed_frames: i64,
}

/// A Scribe database with the current schema: an SQLite file (or an in-memory database
/// for tests), or a PostgreSQL database (feature `postgres`).
///
/// `Send + Sync`; share it as `Arc<Database>`.
#[derive(Debug)]
pub struct Database {
    options: Options,
    migration: MigrationReport,
    engine: Engine,
}

/// What a [`Database`] runs on: one backend's state, and nothing of the other's.
#[derive(Debug)]
pub(crate) enum Engine {
    /// An SQLite file or in-memory database (boxed, as the other: the enum stays small).
    Sqlite(Box<SqliteStore>),
    /// A PostgreSQL store: its pool (crate::pg).
    #[cfg(feature = "postgres")]
    Postgres(Box<crate::pg::PgBackend>),
}

/// The SQLite side of a [`Database`]: the writer connection, the idle readers, the
/// search indexer and the counters.
#[derive(Debug)]
pub(crate) struct SqliteStore {
    path: Option<PathBuf>,
    writer: Arc<Mutex<Connection>>,
    /// The background search indexer (read-write file databases with the current schema).
    indexer: Option<Indexer>,
    /// The background checkpointer ([`Options::wal_restart_pages`]; read-write files).
    checkpointer: Option<Checkpointer>,
    /// SQLite's auto-checkpoint off the writing thread (with [`Options::writer_gate`];
    /// read-write files), shared with the indexer.
    auto_checkpoint: Option<Arc<AutoCheckpoint>>,
    /// The writers' gate ([`Options::writer_gate`]; read-write files), shared with the
    /// indexer.
    gate: Arc<Gate>,
    /// Whether the schema has the search queue (version 7 on; older ones only through
    /// [`Database::open_at_version`]).
    search_queue: bool,
    /// Idle read connections; unused for an in-memory database, which reads through the
    /// writer (a second connection would see a different, empty database).
    readers: Mutex<Vec<Connection>>,
    writes: AtomicU64,
    /// Write closures run again after a busy database (SQLite; PostgreSQL counts its own).
    retries: AtomicU64,
    /// Checkpoints that ran (periodic and on demand); observable so tests can prove the
    /// periodic one happens.
    checkpoints: AtomicU64,
    /// The result of the latest checkpoint.
    last_checkpoint: Mutex<Option<CheckpointReport>>,
    /// Read-only connections open the file `immutable` (see [`Database::open_read_only`]).
    immutable: bool,
}

impl SqliteStore {
    fn new(
        path: Option<PathBuf>,
        writer: Arc<Mutex<Connection>>,
        indexer: Option<Indexer>,
        checkpointer: Option<Checkpointer>,
        gate: Arc<Gate>,
        search_queue: bool,
        immutable: bool,
    ) -> Self {
        SqliteStore {
            path,
            writer,
            indexer,
            checkpointer,
            auto_checkpoint: None,
            gate,
            search_queue,
            readers: Mutex::new(Vec::new()),
            writes: AtomicU64::new(0),
            retries: AtomicU64::new(0),
            checkpoints: AtomicU64::new(0),
            last_checkpoint: Mutex::new(None),
            immutable,
        }
    }
}

impl Database {
    /// Opens (creating if needed) the database at `path` with default [`Options`] and brings
    /// its schema up to date.
    ///
    /// A new parent directory is created with mode 0700 and a new file with mode 0600, as
    /// conversations are private. A database written by a newer Scribe is refused with
    /// [`Error::SchemaTooNew`]. A file or directory this process may not write gives
    /// [`Error::NotWritable`] (open it with [`Database::open_read_only`] instead), a file
    /// that is not a database [`Error::NotADatabase`], a damaged one [`Error::Corrupt`], a
    /// directory (or a path written as one, `dir/`) [`Error::IsADirectory`].
    ///
    /// A PostgreSQL location (a `postgres://` URL or a libpq keyword string) as `path`
    /// opens that database instead: see [`Database::open_postgres`].
    pub fn open(path: impl AsRef<Path>) -> Result<Self> {
        Self::open_with(path, Options::default())
    }

    /// Opens the database at `path` as [`Database::open`] does (read-write, migrated), but
    /// only when it exists: a path with no file is [`Error::NoDatabase`] and nothing is
    /// created (no directory, no file, no `-wal`/`-shm`). For a command that reads or
    /// changes what is stored, to which a mistyped path must not look like an empty store.
    /// On PostgreSQL the same as [`Database::open`].
    pub fn open_existing(path: impl AsRef<Path>) -> Result<Self> {
        let options = Options {
            create: false,
            ..Options::default()
        };
        Self::open_with(path, options)
    }

    /// Opens the existing database at `path` for reading only, with default [`Options`].
    ///
    /// Never creates, migrates or writes anything, so it works on a file or directory this
    /// process may not write; a path with no file is [`Error::NoDatabase`]. Reading a WAL
    /// database alongside writers needs its `-shm` file; when neither it nor the `-wal`
    /// file exists (as after every writer closed cleanly) and they cannot be created (a
    /// read-only directory or medium), the file is read as `immutable`: without locks,
    /// assuming no process writes it meanwhile (a writer starting later may make reads fail
    /// or miss its changes).
    ///
    /// The schema must be exactly this build's version: a newer one gives
    /// [`Error::SchemaTooNew`], an older one [`Error::SchemaTooOld`] (open it read-write once
    /// to migrate it; this build's queries are written against the current schema only).
    /// [`Database::write`] and [`Database::vacuum`] return [`Error::ReadOnly`];
    /// [`Database::check`] skips the search-index checks, which FTS5 runs as writes.
    pub fn open_read_only(path: impl AsRef<Path>) -> Result<Self> {
        let options = Options {
            read_only: true,
            ..Options::default()
        };
        Self::open_with(path, options)
    }

    /// [`Database::open`] (or [`Database::open_read_only`] when [`Options::read_only`])
    /// with explicit [`Options`].
    ///
    /// `path` may also name a PostgreSQL database, as a `postgres://` URL or a libpq
    /// keyword string (`host=… user=… dbname=…`): see [`Database::open_postgres`].
    pub fn open_with(path: impl AsRef<Path>, options: Options) -> Result<Self> {
        if let Some(location) = crate::backend::remote_location(path.as_ref())? {
            return Self::open_postgres(location, options);
        }
        if options.read_only {
            Self::open_read_only_at(path.as_ref(), options)
        } else {
            Self::open_at(path.as_ref(), options, None)
        }
    }

    /// Which backend `location` names, without opening or creating anything: PostgreSQL
    /// for a `postgres://`/`postgresql://` URL or a libpq keyword string, SQLite for a
    /// path; [`Error::InvalidLocation`] for another `scheme://` URL (no backend for it).
    pub fn backend_of(location: impl AsRef<Path>) -> Result<crate::Backend> {
        Ok(match crate::backend::remote_location(location.as_ref())? {
            Some(_) => crate::Backend::Postgres,
            None => crate::Backend::Sqlite,
        })
    }

    /// Opens `path` and migrates it only up to version `target`; for tests of migrations
    /// from older schemas.
    #[doc(hidden)]
    pub fn open_at_version(path: impl AsRef<Path>, target: i64) -> Result<Self> {
        if let Some(location) = crate::backend::remote_location(path.as_ref())? {
            return Self::open_postgres_at(location, Options::default(), Some(target));
        }
        Self::open_at(path.as_ref(), Options::default(), Some(target))
    }

    /// A handle on an opened PostgreSQL store: its pool and nothing else (no SQLite
    /// connection, no search queue: PostgreSQL keeps its GIN indexes inside each write).
    #[cfg(feature = "postgres")]
    pub(crate) fn from_postgres(
        backend: crate::pg::PgBackend,
        options: Options,
        migration: MigrationReport,
    ) -> Result<Self> {
        Ok(Database {
            options,
            migration,
            engine: Engine::Postgres(Box::new(backend)),
        })
    }

    /// What this handle runs on.
    pub(crate) fn engine(&self) -> &Engine {
        &self.engine
    }

    /// The PostgreSQL backend, when this handle runs on one.
    #[cfg(feature = "postgres")]
    pub(crate) fn postgres(&self) -> Option<&crate::pg::PgBackend> {
        match &self.engine {
            Engine::Postgres(pg) => Some(pg),
            Engine::Sqlite(_) => None,
        }
    }

    /// The SQLite side, when this handle runs on SQLite.
    pub(crate) fn sqlite(&self) -> Option<&SqliteStore> {
        match &self.engine {
            Engine::Sqlite(sqlite) => Some(&**sqlite),
            #[cfg(feature = "postgres")]
            Engine::Postgres(_) => None,
        }
    }

    fn open_at(path: &Path, options: Options, target: Option<i64>) -> Result<Self> {
        let path = absolute(path)?;
        Self::open_read_write(&path, options, target)
            .map_err(|err| classify_open_error(&path, err, true))
    }

    fn open_read_write(path: &Path, options: Options, target: Option<i64>) -> Result<Self> {
        let flags = if options.create {
            create_private_file(path)?;
            OpenFlags::SQLITE_OPEN_READ_WRITE | OpenFlags::SQLITE_OPEN_CREATE
        } else {
            must_exist(path)?;
            OpenFlags::SQLITE_OPEN_READ_WRITE
        } | OpenFlags::SQLITE_OPEN_NO_MUTEX;
        let mut conn = Connection::open_with_flags(path, flags)?;
        set_busy_timeout(&conn, options.busy_timeout)?;
        // Another program's database (`--db` pointed at an agent's history) is refused
        // before anything is written to it: no WAL switch, no schema.
        refuse_foreign(&conn, path, &options)?;
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
        let gate = Arc::new(if options.writer_gate {
            Gate::open(path)
        } else {
            Gate::none()
        });
        // A current schema is verified with reads only; the write lock is taken just when
        // there is something to apply (or a divergence for refinery to report).
        let current = match target {
            None => retry(&options, || migrate::already_current(&conn))?,
            Some(_) => None,
        };
        let migrated = match current {
            Some(report) => Ok(report),
            // In its turn with Scribe's writers, like every write.
            None => match gate.enter(gate_wait(&options)) {
                None => Err(Error::Locked),
                Some(_entered) => retry(&options, || {
                    let tx = conn.transaction_with_behavior(TransactionBehavior::Immediate)?;
                    let report = migrate::migrate(&tx, target)?;
                    tx.commit()?;
                    Ok(report)
                }),
            },
        };
        // A migration may switch CHECK constraints off to copy rows as they are (V3); it
        // switches them back itself, unless it failed half-way.
        conn.pragma_update(None, "ignore_check_constraints", false)?;
        let migration = migrated?;
        let search_queue = migration.to >= SEARCH_QUEUE_VERSION;
        let checkpointer = start_checkpointer(&conn, path, &options)?;
        let auto_checkpoint = deferred_checkpoint(&options).then(|| {
            checkpoint::watch_wal_deferred(&conn);
            Arc::new(AutoCheckpoint::new(path, &options))
        });
        let writer = Arc::new(Mutex::new(conn));
        let indexer = if search_queue && options.background_indexing {
            // Also finishes what a crashed or short-lived process left queued.
            match Indexer::start(
                Arc::clone(&writer),
                Arc::clone(&gate),
                auto_checkpoint.clone(),
                options.clone(),
            ) {
                Ok(indexer) => Some(indexer),
                Err(err) => {
                    // Searches still index what they need before they run.
                    tracing::warn!(error = %err, "no background search indexer");
                    None
                }
            }
        } else {
            None
        };
        Ok(Database {
            options,
            migration,
            engine: Engine::Sqlite(Box::new(SqliteStore {
                auto_checkpoint,
                ..SqliteStore::new(
                    Some(path.to_owned()),
                    writer,
                    indexer,
                    checkpointer,
                    gate,
                    search_queue,
                    false,
                )
            })),
        })
    }

    fn open_read_only_at(path: &Path, options: Options) -> Result<Self> {
        let path = absolute(path)?;
        let open = || -> Result<Self> {
            // SQLite would report a missing file as "unable to open database file".
            must_exist(&path)?;
            let probe = |immutable: bool| -> Result<(Connection, i64)> {
                let conn = open_reader(&path, &options, immutable)?;
                let found = retry(&options, || migrate::current_version(&conn))?;
                Ok((conn, found))
            };
            // A WAL database needs its `-shm` file to be read safely alongside writers. When
            // neither it nor the `-wal` file exists and they cannot be created (a read-only
            // directory or medium), SQLite refuses; then nobody is writing the file right
            // now, and it is read as immutable.
            let (conn, found, immutable) = match probe(false) {
                Ok((conn, found)) => (conn, found, false),
                Err(err)
                    if matches!(
                        err.sqlite_error_code(),
                        Some(ErrorCode::ReadOnly | ErrorCode::CannotOpen)
                    ) =>
                {
                    tracing::debug!(error = %err, "reading the database as immutable");
                    let (conn, found) = probe(true)?;
                    (conn, found, true)
                }
                Err(err) => return Err(err),
            };
            let known = migrate::known_version();
            if found == 0 {
                refuse_foreign(&conn, &path, &options)?;
            }
            if found > known {
                return Err(Error::SchemaTooNew { found, known });
            }
            if found < known {
                return Err(Error::SchemaTooOld {
                    path: path.clone(),
                    found,
                    known,
                });
            }
            Ok(Database {
                options: options.clone(),
                migration: MigrationReport {
                    from: found,
                    to: found,
                    applied: Vec::new(),
                },
                engine: Engine::Sqlite(Box::new(SqliteStore::new(
                    Some(path.clone()),
                    Arc::new(Mutex::new(conn)),
                    None,
                    None,
                    Arc::new(Gate::none()),
                    found >= SEARCH_QUEUE_VERSION,
                    immutable,
                ))),
            })
        };
        open().map_err(|err| classify_open_error(&path, err, false))
    }

    /// A private in-memory database with the current schema, for tests.
    pub fn open_in_memory() -> Result<Self> {
        Self::open_in_memory_with(Options::default())
    }

    /// [`Database::open_in_memory`] with explicit [`Options`] (e.g. a test's clock).
    pub fn open_in_memory_with(options: Options) -> Result<Self> {
        let mut conn = Connection::open_in_memory()?;
        configure(&conn, &options)?;
        let tx = conn.transaction_with_behavior(TransactionBehavior::Immediate)?;
        let migration = migrate::migrate(&tx, None)?;
        tx.commit()?;
        Ok(Database {
            options,
            migration,
            engine: Engine::Sqlite(Box::new(SqliteStore::new(
                None,
                Arc::new(Mutex::new(conn)),
                None,
                None,
                Arc::new(Gate::none()),
                true,
                false,
            ))),
        })
    }

    /// The database file, or `None` for an in-memory or PostgreSQL database.
    pub fn path(&self) -> Option<&Path> {
        self.sqlite().and_then(|sqlite| sqlite.path.as_deref())
    }

    /// The options this database was opened with.
    pub fn options(&self) -> &Options {
        &self.options
    }

    /// The clock of this database ([`Options::clock`]).
    pub fn clock(&self) -> &Clock {
        &self.options.clock
    }

    /// The time now from [`Database::clock`] (ms since the Unix epoch).
    pub fn now(&self) -> i64 {
        self.options.clock.now()
    }

    /// Whether this database was opened read-only ([`Options::read_only`]).
    pub fn is_read_only(&self) -> bool {
        self.options.read_only
    }

    /// Whether a read-only database is read as immutable (see [`Database::open_read_only`]):
    /// without locks, so it cannot tell when another process commits (`PRAGMA
    /// data_version` never moves) and should be opened again when the file changes.
    pub fn is_immutable(&self) -> bool {
        self.sqlite().is_some_and(|sqlite| sqlite.immutable)
    }

    /// What opening did to the schema.
    pub fn migration_report(&self) -> &MigrationReport {
        &self.migration
    }

    /// The schema version recorded in the database.
    pub fn schema_version(&self) -> Result<i64> {
        match &self.engine {
            Engine::Sqlite(sqlite) => sqlite.with_reader(&self.options, migrate::current_version),
            #[cfg(feature = "postgres")]
            Engine::Postgres(pg) => pg.schema_version(),
        }
    }

    /// The highest schema version this build knows.
    pub fn known_schema_version() -> i64 {
        migrate::known_version()
    }

    /// Runs `f` in a `BEGIN IMMEDIATE` transaction and commits it; then runs the actions
    /// `f` queued with [`Tx::after_commit`], once, in order.
    ///
    /// `E` is the caller's own error type ([`TxError`]): whatever `f` returns comes out
    /// unchanged, with two exceptions. If another connection holds the write lock
    /// (SQLITE_BUSY or SQLITE_LOCKED, at begin, inside `f` or at commit), the transaction
    /// is rolled back and `f` runs again after a random pause, with a new [`Tx`] (the
    /// failed run's queued actions are dropped), up to [`Options::write_attempts`] tries;
    /// then [`Error::Locked`]. So `f` must have no effects outside the transaction: queue
    /// them. Any other error rolls back, drops the queue and is returned.
    ///
    /// Don't call [`Database::read`] or `write` from inside `f`: use `tx`, which sees the
    /// transaction's own changes. The queued actions run after the write lock is released,
    /// so they may.
    ///
    /// On a database opened read-only, returns [`Error::ReadOnly`] without running `f`. If
    /// the file became unwritable after it was opened, SQLite's SQLITE_READONLY is returned
    /// as [`Error::NotWritable`].
    ///
    /// ```
    /// use std::sync::{Arc, Mutex};
    /// use scribe_db::{Database, Tx};
    ///
    /// let db = Database::open_in_memory()?;
    /// let announced = Arc::new(Mutex::new(Vec::new()));
    /// let count = db.write(|tx: &mut Tx<'_>| -> scribe_db::Result<i64> {
    ///     let n = tx.q().count_sessions()?;
    ///     let announced = Arc::clone(&announced);
    ///     tx.after_commit(move || announced.lock().unwrap().push(n));
    ///     Ok(n)
    /// })?;
    /// assert_eq!(*announced.lock().unwrap(), [count]);
    /// # Ok::<(), scribe_db::Error>(())
    /// ```
    pub fn write<T, E, F>(&self, f: F) -> Result<T, E>
    where
        E: TxError,
        F: FnMut(&mut Tx<'_>) -> Result<T, E>,
    {
        match &self.engine {
            Engine::Sqlite(sqlite) => sqlite.write(&self.options, f),
            #[cfg(feature = "postgres")]
            Engine::Postgres(pg) => pg.write(&self.options, f),
        }
    }

    /// Runs `f` on a read-only connection inside one read transaction, so everything it
    /// reads comes from the same snapshot. Never waits for a writer (WAL), and retried like
    /// [`Database::write`] in the rare case SQLite reports busy. `E` is the caller's error
    /// type, as for `write`.
    pub fn read<T, E, F>(&self, f: F) -> Result<T, E>
    where
        E: TxError,
        F: FnMut(&mut ReadTx<'_>) -> Result<T, E>,
    {
        match &self.engine {
            Engine::Sqlite(sqlite) => sqlite.read(&self.options, f),
            #[cfg(feature = "postgres")]
            Engine::Postgres(pg) => pg.read(&self.options, f),
        }
    }

    /// Runs `f` on an SQLite read connection inside one read transaction (as
    /// [`Database::read`]), for this crate's SQLite-only statements; on PostgreSQL,
    /// [`Error::InvalidInput`] naming `what`.
    #[cfg_attr(not(feature = "postgres"), allow(unused_variables))]
    pub(crate) fn read_sqlite<T>(
        &self,
        what: &str,
        f: impl FnMut(&Connection) -> Result<T>,
    ) -> Result<T> {
        match &self.engine {
            Engine::Sqlite(sqlite) => sqlite.with_reader(&self.options, f),
            #[cfg(feature = "postgres")]
            Engine::Postgres(_) => Err(Error::InvalidInput(format!(
                "{what} is SQLite's, and this is a PostgreSQL database"
            ))),
        }
    }

    /// Runs a passive WAL checkpoint now: copies what it can without waiting for readers
    /// (after the background auto-checkpoint's round under way, if any, which would turn
    /// it away; see [`Database::wait_for_checkpoint`]). Does nothing on a read-only,
    /// in-memory or PostgreSQL database (which have no WAL of their own).
    pub fn checkpoint(&self) -> Result<()> {
        match self.sqlite() {
            Some(sqlite) => sqlite.checkpoint(&self.options),
            None => Ok(()),
        }
    }

    /// Waits until the background auto-checkpoint of this handle is idle: with
    /// [`Options::writer_gate`] (the default), a commit that leaves 1,000 frames or more
    /// in the WAL hands SQLite's passive auto-checkpoint to a thread of its own instead of
    /// running it before the write returns, and this returns once that thread has done
    /// what it was handed (at once when nothing is under way, and on databases without
    /// it). For a program or benchmark that must count that work as its own, or wants the
    /// main file up to date before it copies it.
    pub fn wait_for_checkpoint(&self) {
        if let Some(auto) = self.sqlite().and_then(SqliteStore::auto_checkpoint) {
            auto.wait_idle();
        }
    }

    /// SQLite's `PRAGMA data_version` on one of this handle's read connections: a number
    /// that changes whenever another connection, in any process, commits. A watcher that
    /// polls it from one thread keeps getting the same idle connection, so a different
    /// value means a commit since the last poll.
    ///
    /// On PostgreSQL, [`Error::InvalidInput`]: changes are announced there, to
    /// `Database::listen` (feature `postgres`).
    pub fn data_version(&self) -> Result<i64> {
        self.read_sqlite("data_version", |conn| {
            Ok(conn.pragma_query_value(None, "data_version", |row| row.get(0))?)
        })
    }

    /// How many times a [`Database::write`] closure on this handle ran again: after
    /// SQLite reported the database busy, or PostgreSQL a serialization failure or a
    /// deadlock. Contention shows here before it shows as latency or errors.
    pub fn write_retries(&self) -> u64 {
        match &self.engine {
            Engine::Sqlite(sqlite) => sqlite.retries.load(Ordering::Relaxed),
            #[cfg(feature = "postgres")]
            Engine::Postgres(pg) => pg.write_retries(),
        }
    }

    /// Makes this handle's next commit start a background outbox trim, as if its last were
    /// a minute ago (PostgreSQL; nothing on SQLite). For tests of the trim.
    #[doc(hidden)]
    pub fn outbox_trim_due_now(&self) {
        match &self.engine {
            Engine::Sqlite(_) => {}
            #[cfg(feature = "postgres")]
            Engine::Postgres(pg) => pg.trim_due_now(),
        }
    }

    /// Whether a background outbox trim of this handle is running, its connection not yet
    /// back in the pool (PostgreSQL; always false on SQLite). For tests of the trim.
    #[doc(hidden)]
    pub fn outbox_trim_running(&self) -> bool {
        match &self.engine {
            Engine::Sqlite(_) => false,
            #[cfg(feature = "postgres")]
            Engine::Postgres(pg) => pg.trim_running(),
        }
    }

    /// How many WAL checkpoints have run on this handle: every [`Options::checkpoint_every`]
    /// successful writes, plus each [`Database::checkpoint`] call that did something,
    /// plus each SQLite auto-checkpoint a write ran itself (with [`Options::writer_gate`]
    /// only past 4,000 WAL frames: the auto-checkpoint's own thread is not counted; see
    /// [`Database::wait_for_checkpoint`]); always 0 on PostgreSQL.
    pub fn checkpoints_run(&self) -> u64 {
        self.sqlite()
            .map_or(0, |sqlite| sqlite.checkpoints.load(Ordering::Relaxed))
    }

    /// How many times this handle's background checkpointer restarted the WAL (see
    /// [`Options::wal_restart_pages`]); 0 without one.
    pub fn wal_restarts(&self) -> u64 {
        self.sqlite()
            .and_then(|sqlite| sqlite.checkpointer.as_ref())
            .map_or(0, Checkpointer::restarts)
    }

    /// What the latest checkpoint on this handle did, if any ran.
    pub fn last_checkpoint(&self) -> Option<CheckpointReport> {
        *self
            .sqlite()?
            .last_checkpoint
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }
}

impl SqliteStore {
    /// [`Database::write`] on SQLite.
    fn write<T, E, F>(&self, options: &Options, mut f: F) -> Result<T, E>
    where
        E: TxError,
        F: FnMut(&mut Tx<'_>) -> Result<T, E>,
    {
        self.refuse_if_read_only(options)?;
        // The writers' turn (Options::writer_gate), for every try: a retry here is a
        // program that does not take the gate holding SQLite's lock.
        let Some(entered) = self.gate.enter(gate_wait(options)) else {
            return Err(E::from(Error::Locked));
        };
        let mut tried = false;
        let outcome = retry_with(options, || {
            if std::mem::replace(&mut tried, true) {
                self.retries.fetch_add(1, Ordering::Relaxed);
            }
            self.write_once(&options.clock, &mut f)
        });
        // Committed or rolled back: the next writer's turn, before anything else here.
        drop(entered);
        let (value, actions) = match outcome {
            Ok(done) => done,
            Err(mut err) => {
                if let (Some(path), Some(inner)) = (&self.path, err.db_error_mut()) {
                    let taken = std::mem::replace(inner, Error::Locked);
                    *inner = match taken {
                        Error::Storage(source)
                            if source.code() == Some(rusqlite::ffi::SQLITE_READONLY) =>
                        {
                            Error::NotWritable {
                                path: path.clone(),
                                source: Box::new(source),
                            }
                        }
                        other => other,
                    };
                }
                return Err(err);
            }
        };
        self.after_write(options);
        for action in actions {
            action();
        }
        Ok(value)
    }

    /// One try of [`SqliteStore::write`]: the value and the queued actions, committed.
    fn write_once<T, E, F>(&self, clock: &Clock, f: &mut F) -> Result<(T, Vec<AfterCommit>), E>
    where
        E: TxError,
        F: FnMut(&mut Tx<'_>) -> Result<T, E>,
    {
        let conn = self.writer();
        let tx = SqliteTx::immediate(&conn).map_err(Error::from)?;
        // An error drops `handle` (its queue) and `tx` (rolling back).
        let mut handle = Tx::new(tx.conn(), clock);
        let value = f(&mut handle)?;
        let actions = handle.into_after_commit();
        tx.commit().map_err(Error::from)?;
        Ok((value, actions))
    }

    fn refuse_if_read_only(&self, options: &Options) -> Result<()> {
        match &self.path {
            Some(path) if options.read_only => Err(Error::ReadOnly { path: path.clone() }),
            _ => Ok(()),
        }
    }

    /// [`Database::read`] on SQLite.
    fn read<T, E, F>(&self, options: &Options, mut f: F) -> Result<T, E>
    where
        E: TxError,
        F: FnMut(&mut ReadTx<'_>) -> Result<T, E>,
    {
        let clock = &options.clock;
        self.with_reader(options, |conn| f(&mut ReadTx::new(conn, clock)))
    }

    /// Runs `f` on a read connection inside one read transaction (an in-memory database
    /// reads through the writer, in autocommit), retried on busy like a write.
    fn with_reader<T, E, F>(&self, options: &Options, mut f: F) -> Result<T, E>
    where
        E: TxError,
        F: FnMut(&Connection) -> Result<T, E>,
    {
        let Some(path) = &self.path else {
            let conn = self.writer();
            return f(&conn);
        };
        retry_with(options, || {
            let conn = self.take_reader(path, options)?;
            let result = (|| {
                let tx = SqliteTx::deferred(&conn).map_err(Error::from)?;
                let value = f(tx.conn())?;
                tx.commit().map_err(Error::from)?;
                Ok(value)
            })();
            self.return_reader(conn, options);
            result
        })
    }

    /// [`Database::checkpoint`] on SQLite.
    fn checkpoint(&self, options: &Options) -> Result<()> {
        if self.path.is_some() && !options.read_only {
            if let Some(auto) = &self.auto_checkpoint {
                auto.wait_idle();
            }
            let report = {
                let conn = self.writer();
                conn.query_row("PRAGMA wal_checkpoint(PASSIVE)", [], |row| {
                    Ok(CheckpointReport {
                        busy: row.get::<_, i64>(0)? != 0,
                        wal_frames: row.get(1)?,
                        checkpointed_frames: row.get(2)?,
                    })
                })?
            };
            *self
                .last_checkpoint
                .lock()
                .unwrap_or_else(|poisoned| poisoned.into_inner()) = Some(report);
            self.checkpoints.fetch_add(1, Ordering::Relaxed);
        }
        Ok(())
    }

    /// The file, or `None` in memory.
    pub(crate) fn path(&self) -> Option<&Path> {
        self.path.as_deref()
    }

    /// The writer connection's lock, for the search indexer.
    pub(crate) fn writer_handle(&self) -> &Mutex<Connection> {
        &self.writer
    }

    /// The writers' gate ([`Options::writer_gate`]; [`Gate::none`] when off).
    pub(crate) fn gate(&self) -> &Gate {
        &self.gate
    }

    /// SQLite's auto-checkpoint off the writing thread, when this database has it.
    pub(crate) fn auto_checkpoint(&self) -> Option<&AutoCheckpoint> {
        self.auto_checkpoint.as_deref()
    }

    /// The background indexer, if this database runs one.
    pub(crate) fn indexer(&self) -> Option<&Indexer> {
        self.indexer.as_ref()
    }

    /// Whether the schema has the search queue (see `search_index`).
    pub(crate) fn searchable_schema(&self) -> bool {
        self.search_queue
    }

    /// The writer connection, locked.
    pub(crate) fn writer(&self) -> MutexGuard<'_, Connection> {
        // A panic inside a write closure rolled its transaction back (Transaction's drop),
        // so the connection behind a poisoned lock is still sound.
        self.writer
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    fn after_write(&self, options: &Options) {
        if let Some(indexer) = &self.indexer {
            indexer.notify();
        }
        // This thread's commit, just now (the WAL hook ran inside it).
        let frames = checkpoint::take_committed_frames();
        if let Some(checkpointer) = &self.checkpointer {
            checkpointer.committed(frames);
        }
        let every = options.checkpoint_every;
        let done = self.writes.fetch_add(1, Ordering::Relaxed) + 1;
        let deferred = deferred_checkpoint(options)
            && checkpoint::deferred_checkpoint_due(frames)
            && !self
                .auto_checkpoint
                .as_ref()
                .is_some_and(|auto| auto.take(frames));
        if self.path.is_some() && (deferred || (every > 0 && done.is_multiple_of(every))) {
            // Keeps the WAL from growing while readers stay busy; failure only delays that.
            if let Err(err) = self.checkpoint(options) {
                tracing::debug!(error = %err, "passive checkpoint failed");
            }
        }
    }

    fn take_reader(&self, path: &Path, options: &Options) -> Result<Connection> {
        let idle = self
            .readers
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
            .pop();
        if let Some(conn) = idle {
            return Ok(conn);
        }
        open_reader(path, options, self.immutable)
    }

    fn return_reader(&self, conn: Connection, options: &Options) {
        let mut idle = self
            .readers
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        if idle.len() < options.max_idle_readers && conn.is_autocommit() {
            idle.push(conn);
        }
    }
}

/// A connection that cannot write: read-write at the file level (so it can map the WAL
/// index) but `query_only`; or, for a read-only database, opened `SQLITE_OPEN_READ_ONLY`,
/// and with `immutable` as an `immutable=1` URI (no locks, no `-shm`: only sound while
/// nobody writes the file).
pub(crate) fn open_reader(path: &Path, options: &Options, immutable: bool) -> Result<Connection> {
    let access = if options.read_only {
        OpenFlags::SQLITE_OPEN_READ_ONLY
    } else {
        OpenFlags::SQLITE_OPEN_READ_WRITE
    };
    let flags = access | OpenFlags::SQLITE_OPEN_NO_MUTEX;
    let conn = if immutable {
        let uri = format!("file:{}?immutable=1", uri_path(path));
        Connection::open_with_flags(uri, flags | OpenFlags::SQLITE_OPEN_URI)?
    } else {
        Connection::open_with_flags(path, flags)?
    };
    set_busy_timeout(&conn, options.busy_timeout)?;
    configure(&conn, options)?;
    conn.pragma_update(None, "query_only", true)?;
    Ok(conn)
}

/// The background checkpointer's own connection to `path` (read-write, never in a
/// transaction; see `checkpoint`).
pub(crate) fn open_checkpointer(path: &Path, options: &Options) -> Result<Connection> {
    let flags = OpenFlags::SQLITE_OPEN_READ_WRITE | OpenFlags::SQLITE_OPEN_NO_MUTEX;
    let conn = Connection::open_with_flags(path, flags)?;
    set_busy_timeout(&conn, options.busy_timeout)?;
    // The same sync level as the writers' (a checkpoint syncs by it); it reads no tables,
    // so a small page cache.
    configure(&conn, options)?;
    conn.pragma_update(None, "cache_size", -64)?;
    Ok(conn)
}

/// Starts the background checkpointer for the writer connection `conn` of `path`, when
/// [`Options::wal_restart_pages`] asks for one: the writer's commits then note the WAL's
/// size for it instead of checkpointing themselves, and a WAL restarted after it grew
/// past twice the threshold is trimmed back. Without the thread (it could not start),
/// SQLite's auto-checkpoint stays.
fn start_checkpointer(
    conn: &Connection,
    path: &Path,
    options: &Options,
) -> Result<Option<Checkpointer>> {
    if options.wal_restart_pages == 0 {
        return Ok(None);
    }
    let checkpointer = match Checkpointer::start(path, options) {
        Ok(checkpointer) => checkpointer,
        Err(err) => {
            tracing::warn!(error = %err, "no background checkpointer");
            return Ok(None);
        }
    };
    let page_size: i64 = conn.pragma_query_value(None, "page_size", |row| row.get(0))?;
    let limit = checkpoint::journal_size_limit(options.wal_restart_pages, page_size);
    conn.pragma_update(None, "journal_size_limit", limit)?;
    checkpoint::watch_wal(conn);
    Ok(Some(checkpointer))
}

/// `path` percent-encoded for a `file:` URI (everything but unreserved bytes and `/`).
fn uri_path(path: &Path) -> String {
    let mut out = String::new();
    for &byte in path.as_os_str().as_encoded_bytes() {
        if byte.is_ascii_alphanumeric() || b"/-._~".contains(&byte) {
            out.push(char::from(byte));
        } else {
            out.push_str(&format!("%{byte:02X}"));
        }
    }
    out
}

/// Turns an error from opening `path` into the variant that says what is wrong with the
/// file: not a database, damaged, or (opening read-write) not writable.
fn classify_open_error(path: &Path, err: Error, read_write: bool) -> Error {
    let code = err.sqlite_error_code();
    let not_writable = |err: Error| -> Error {
        let source: Box<dyn std::error::Error + Send + Sync> = match err {
            Error::Io { source, .. } => Box::new(source),
            Error::Storage(source) => Box::new(source),
            Error::Migration(source) => Box::new(source),
            other => Box::new(other),
        };
        Error::NotWritable {
            path: path.to_owned(),
            source,
        }
    };
    match err {
        // Only an existing file can be offered read-only instead.
        Error::Io { ref source, .. }
            if read_write
                && path.is_file()
                && matches!(
                    source.kind(),
                    std::io::ErrorKind::PermissionDenied | std::io::ErrorKind::ReadOnlyFilesystem
                ) =>
        {
            not_writable(err)
        }
        Error::Storage(source) => match code {
            Some(ErrorCode::NotADatabase) => Error::NotADatabase {
                path: path.to_owned(),
                source,
            },
            Some(ErrorCode::DatabaseCorrupt) => Error::Corrupt {
                path: path.to_owned(),
                source,
            },
            Some(ErrorCode::ReadOnly | ErrorCode::PermissionDenied) if read_write => {
                not_writable(Error::Storage(source))
            }
            // Also "is a directory" or a missing parent; only unwritable if it really is.
            Some(ErrorCode::CannotOpen) if read_write && !writable(path) => {
                not_writable(Error::Storage(source))
            }
            _ => Error::Storage(source),
        },
        Error::Migration(_)
            if read_write
                && matches!(
                    code,
                    Some(ErrorCode::ReadOnly | ErrorCode::PermissionDenied)
                ) =>
        {
            not_writable(err)
        }
        other => other,
    }
}

/// Whether this process can write the existing file `path` and create files beside it (the
/// WAL and shared-memory files). Only asked after SQLite failed to open it, so the probe
/// file it creates and removes costs nothing in the normal case.
fn writable(path: &Path) -> bool {
    if !path.is_file() {
        return true;
    }
    if fs::OpenOptions::new().append(true).open(path).is_err() {
        return false;
    }
    let Some(dir) = path.parent() else {
        return true;
    };
    let probe = dir.join(format!(".scribe-write-probe-{}", std::process::id()));
    match fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .open(&probe)
    {
        Ok(_) => {
            let _ = fs::remove_file(&probe);
            true
        }
        Err(err) => err.kind() == std::io::ErrorKind::AlreadyExists,
    }
}

/// Per-connection settings (WAL mode is per file and set once at open).
fn configure(conn: &Connection, options: &Options) -> Result<()> {
    conn.pragma_update(None, "foreign_keys", true)?;
    conn.pragma_update(None, "synchronous", "NORMAL")?;
    conn.pragma_update(None, "cache_size", -options.cache_kib)?;
    // Plans made without the values bound to parameters, so that a cached statement is
    // prepared once. Without it SQLite 3.51 plans `LIMIT ?N` with the value bound, and
    // every new binding re-prepares the statement on its next step: the indexer's
    // candidates query (twice per batch, ~175,000 instructions each, more than half of
    // what an append costs) and every paged query (sessions, messages, search). No other
    // planning here uses bound values: LIKE on the trigram index is the
    // virtual table's, there are no ANALYZE statistics (STAT4), and no partial index is
    // matched against a parameter; the generated statements with `LIMIT ?N` plan the same
    // either way (crates/bench/examples/qpsg_plans.rs).
    conn.set_db_config(DbConfig::SQLITE_DBCONFIG_ENABLE_QPSG, true)?;
    register_fold(conn)?;
    // `temp_store` stays SQLite's default (a temp file, used only by a sort or temporary
    // table that outgrows the cache). With `MEMORY` the sorter gives up its page-sized
    // arena and mallocs every record: FTS5's `ORDER BY rank` sorts every match, and a
    // word search ran 15-30% slower (measured with the bench corpus, issue 14).
    Ok(())
}

/// The SQL function `scribe_fold(text)`: `text` lowercased by Unicode's rules (SQLite's
/// `lower()` and `LIKE` fold ASCII letters only), NULL for anything but text. The title
/// filter compares through it (`SessionFilter::title_contains`), as PostgreSQL lowers
/// with its ICU collation.
fn register_fold(conn: &Connection) -> Result<()> {
    use rusqlite::functions::FunctionFlags;
    use rusqlite::types::ValueRef;
    conn.create_scalar_function(
        "scribe_fold",
        1,
        FunctionFlags::SQLITE_UTF8 | FunctionFlags::SQLITE_DETERMINISTIC,
        |ctx| {
            Ok(match ctx.get_raw(0) {
                ValueRef::Text(bytes) => Some(String::from_utf8_lossy(bytes).to_lowercase()),
                _ => None,
            })
        },
    )?;
    Ok(())
}

/// Runs `op` until it succeeds, fails with something other than busy (a database error
/// inside `E` that [`Error::is_busy`], or a migration that met a busy database), or has
/// been tried `options.write_attempts` times (then [`Error::Locked`]).
pub(crate) fn retry_with<T, E: TxError>(
    options: &Options,
    mut op: impl FnMut() -> Result<T, E>,
) -> Result<T, E> {
    let attempts = options.write_attempts.max(1);
    for attempt in 1..=attempts {
        match op() {
            Err(err) if err.db_error().is_some_and(is_retryable) => {
                if attempt == attempts {
                    break;
                }
                std::thread::sleep(jitter(options));
            }
            other => return other,
        }
    }
    Err(E::from(Error::Locked))
}

/// `Error::ForeignDatabase` when the file at `path` is another program's database (tables
/// but no Scribe schema history), checked before anything is written to it.
fn refuse_foreign(conn: &Connection, path: &Path, options: &Options) -> Result<()> {
    let tables = retry(options, || migrate::foreign_tables(conn))?;
    if tables > 0 {
        return Err(Error::ForeignDatabase {
            path: path.to_owned(),
            tables,
            backend: crate::Backend::Sqlite,
        });
    }
    Ok(())
}

/// Sets `conn`'s busy timeout to `timeout`, or to the longest SQLite takes (`i32::MAX` ms,
/// ~24.8 days) when it is longer: rusqlite panics on such a value, and a caller's
/// [`Options::busy_timeout`] must never make opening a database panic.
fn set_busy_timeout(conn: &Connection, timeout: Duration) -> rusqlite::Result<()> {
    let longest = Duration::from_millis(i32::MAX.unsigned_abs().into());
    conn.busy_timeout(timeout.min(longest))
}

/// Whether the writer connection's auto-checkpoint runs after a write let the writers'
/// gate go (with [`Options::writer_gate`]), instead of inside the commit.
pub(crate) fn deferred_checkpoint(options: &Options) -> bool {
    options.writer_gate && !options.read_only
}

/// How long a write waits for the writers' gate before [`Error::Locked`]: what its retries
/// would take to run out, [`Options::write_attempts`] x (busy timeout + mean pause)
/// (about 10 s by default).
pub(crate) fn gate_wait(options: &Options) -> Duration {
    let pause = options.retry_min / 2 + options.retry_max.max(options.retry_min) / 2;
    options
        .busy_timeout
        .saturating_add(pause)
        .saturating_mul(options.write_attempts.max(1))
}

/// [`retry_with`] for operations that fail with this crate's [`Error`].
pub(crate) fn retry<T>(options: &Options, op: impl FnMut() -> Result<T>) -> Result<T> {
    retry_with(options, op)
}

fn is_retryable(err: &Error) -> bool {
    match err {
        Error::Migration(err) => migration_busy(err),
        other => other.is_retryable(),
    }
}

pub(crate) fn jitter(options: &Options) -> Duration {
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

/// Whether `path` is written as a directory: it ends in a separator (`dir/`), which names a
/// directory whether or not one exists (opening it to create a file is the system's "Is a
/// directory").
fn written_as_directory(path: &Path) -> bool {
    path.as_os_str()
        .as_encoded_bytes()
        .last()
        .is_some_and(|&last| std::path::is_separator(char::from(last)))
}

/// [`Error::NoDatabase`] when there is no file at `path` (the one rule of every open that
/// must not create one), [`Error::IsADirectory`] when it is a directory or is written as
/// one (SQLite would say "unable to open database file"); [`Error::Io`] when the operating
/// system cannot tell.
fn must_exist(path: &Path) -> Result<()> {
    if written_as_directory(path) {
        return Err(Error::IsADirectory {
            path: path.to_owned(),
        });
    }
    match fs::metadata(path) {
        Ok(meta) if meta.is_dir() => Err(Error::IsADirectory {
            path: path.to_owned(),
        }),
        Ok(_) => Ok(()),
        Err(err) if err.kind() == std::io::ErrorKind::NotFound => Err(Error::NoDatabase {
            path: path.to_owned(),
        }),
        Err(source) => Err(Error::Io {
            path: path.to_owned(),
            source,
        }),
    }
}

/// Creates the parent directory (0700) and the file (0600) if they don't exist; existing
/// ones keep their modes. A directory at `path`, or a `path` written as one (`dir/`, which
/// does not exist yet), is [`Error::IsADirectory`] and nothing is created.
fn create_private_file(path: &Path) -> Result<()> {
    if written_as_directory(path) || path.is_dir() {
        return Err(Error::IsADirectory {
            path: path.to_owned(),
        });
    }
    let io = |path: &Path| {
        let path = path.to_owned();
        move |source| Error::Io { path, source }
    };
    if let Some(parent) = path.parent().filter(|p| !p.as_os_str().is_empty()) {
        let mut builder = fs::DirBuilder::new();
        builder.recursive(true);
        #[cfg(unix)]
        std::os::unix::fs::DirBuilderExt::mode(&mut builder, 0o700);
        builder.create(parent).map_err(|source| {
            // A file where a directory should be: name it (the system's "File exists" or
            // "Not a directory" named a path below it).
            let kind = source.kind();
            match parent.ancestors().find(|dir| dir.is_file()) {
                Some(file)
                    if kind == std::io::ErrorKind::AlreadyExists
                        || kind == std::io::ErrorKind::NotADirectory =>
                {
                    Error::Io {
                        path: file.to_owned(),
                        source: std::io::Error::new(
                            std::io::ErrorKind::NotADirectory,
                            "a file, not a directory",
                        ),
                    }
                }
                _ => io(parent)(source),
            }
        })?;
    }
    let mut file = fs::OpenOptions::new();
    file.read(true).write(true).create(true).truncate(false);
    #[cfg(unix)]
    std::os::unix::fs::OpenOptionsExt::mode(&mut file, 0o600);
    file.open(path).map_err(|source| {
        // A directory made at `path` since the check above.
        if source.kind() == std::io::ErrorKind::IsADirectory {
            Error::IsADirectory {
                path: path.to_owned(),
            }
        } else {
            io(path)(source)
        }
    })?;
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
    fn a_file_where_a_directory_should_be_is_named() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("notes.json");
        std::fs::write(&file, "{}").unwrap();
        for below in ["scribe.db", "sub/scribe.db", "sub/deeper/scribe.db"] {
            let err = Database::open(file.join(below)).unwrap_err();
            let source = std::error::Error::source(&err).map(ToString::to_string);
            let text = format!("{err}: {}", source.unwrap_or_default());
            assert!(
                text.contains(&format!("{}: a file, not a directory", file.display())),
                "{below}: {text}"
            );
        }
        assert_eq!(std::fs::read(&file).unwrap(), b"{}");
    }

    #[test]
    fn a_closure_run_again_counts_as_a_retry() {
        let db = Database::open_in_memory().unwrap();
        assert_eq!(db.write_retries(), 0);
        let mut runs = 0;
        db.write(|_tx| -> Result<()> {
            runs += 1;
            if runs == 1 {
                // What SQLite reports when another connection holds the write lock.
                return Err(Error::from(rusqlite::Error::SqliteFailure(
                    rusqlite::ffi::Error::new(rusqlite::ffi::SQLITE_BUSY),
                    None,
                )));
            }
            Ok(())
        })
        .unwrap();
        assert_eq!(runs, 2);
        assert_eq!(db.write_retries(), 1);
        db.write(|_tx| -> Result<()> { Ok(()) }).unwrap();
        assert_eq!(db.write_retries(), 1, "a first run is not a retry");
    }

    #[test]
    fn a_cached_statement_with_a_bound_limit_is_prepared_once() {
        let dir = tempfile::tempdir().unwrap();
        let db = Database::open(dir.path().join("limit.db")).unwrap();
        let sql = "SELECT id FROM sessions ORDER BY id LIMIT ?1";
        let reprepared = |db: &Database| -> i32 {
            db.read_sqlite("test", |conn| {
                for limit in 1..=3 {
                    let mut stmt = conn.prepare_cached(sql)?;
                    stmt.query_map([limit], |r| r.get::<_, String>(0))?
                        .for_each(drop);
                }
                let stmt = conn.prepare_cached(sql)?;
                Ok(stmt.get_status(rusqlite::StatementStatus::RePrepare))
            })
            .unwrap()
        };
        assert_eq!(reprepared(&db), 0);
        // The writer connection too (the search indexer's paged queries run there).
        let conn = db.sqlite().unwrap().writer();
        for limit in 1..=3 {
            let mut stmt = conn.prepare_cached(sql).unwrap();
            stmt.query_map([limit], |r| r.get::<_, String>(0))
                .unwrap()
                .for_each(drop);
        }
        let stmt = conn.prepare_cached(sql).unwrap();
        assert_eq!(stmt.get_status(rusqlite::StatementStatus::RePrepare), 0);
    }

    #[test]
    fn an_enormous_write_budget_waits_at_the_gate_without_overflowing() {
        // (rusqlite refuses a busy timeout past i32::MAX ms; the pauses are the enormous
        // part here.)
        let options = Options {
            retry_min: Duration::MAX,
            retry_max: Duration::MAX,
            write_attempts: u32::MAX,
            writer_gate: true,
            ..Options::default()
        };
        assert_eq!(gate_wait(&options), Duration::MAX);
        let dir = tempfile::tempdir().unwrap();
        let db = Database::open_with(dir.path().join("budget.db"), options).unwrap();
        db.write(|_tx| -> Result<()> { Ok(()) }).unwrap();
    }

    #[test]
    fn an_endless_busy_timeout_opens_instead_of_panicking() {
        let options = Options {
            busy_timeout: Duration::MAX,
            ..Options::default()
        };
        let dir = tempfile::tempdir().unwrap();
        let db = Database::open_with(dir.path().join("patient.db"), options).unwrap();
        db.write(|_tx| -> Result<()> { Ok(()) }).unwrap();
        db.read(|_tx| -> Result<()> { Ok(()) }).unwrap();
    }

    #[test]
    fn in_memory_has_current_schema() {
        let db = Database::open_in_memory().unwrap();
        assert_eq!(
            db.schema_version().unwrap(),
            Database::known_schema_version()
        );
        let n: i64 = db
            .read(|tx| -> Result<i64> {
                Ok(tx
                    .conn()
                    .unwrap()
                    .query_row("SELECT count(*) FROM sessions", [], |r| r.get(0))?)
            })
            .unwrap();
        assert_eq!(n, 0);
    }
}
