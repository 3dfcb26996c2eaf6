//! The handles [`crate::Database::write`] and [`crate::Database::read`] give their
//! closures, and [`TxError`], the one thing a service's error type needs to go through
//! them.
//!
//! - [`Tx`]: one `BEGIN IMMEDIATE` transaction. Its [`Tx::after_commit`] queues actions
//!   (publishing an event) that run once, in order, after COMMIT: a retried closure
//!   starts with an empty queue, and a rollback drops it, so no event ever goes out for
//!   a change that did not commit, and none goes out twice.
//! - [`ReadTx`]: one read snapshot.
//! - [`Tx::q`] and [`ReadTx::q`]: the generated queries as the backend-neutral traits
//!   (`tx.q().get_session(id)`), on SQLite and on PostgreSQL alike.
//! - [`Tx::conn`] and [`ReadTx::conn`]: the SQLite connection, `None` on PostgreSQL, for
//!   SQLite-only code (tests that look into the file, the generated SQLite free
//!   functions). Nothing that runs on both backends uses them.

use rusqlite::Connection;

use crate::clock::Clock;
use crate::error::Error;
use crate::queries::{Queries, ReadQueries, SqliteQueries};

/// Which backend a database, a [`Tx`] or a [`ReadTx`] runs on.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Backend {
    /// An SQLite file (or an in-memory database).
    Sqlite,
    /// A PostgreSQL database (the `postgres` feature).
    Postgres,
}

/// The connection a transaction handle runs its queries on.
enum On<'a> {
    Sqlite(SqliteQueries<'a>),
    #[cfg(feature = "postgres")]
    Postgres(crate::queries::postgres::PgQueries<'a, postgres::Client>),
}

impl<'a> On<'a> {
    fn backend(&self) -> Backend {
        match self {
            On::Sqlite(_) => Backend::Sqlite,
            #[cfg(feature = "postgres")]
            On::Postgres(_) => Backend::Postgres,
        }
    }

    fn queries(&mut self) -> &mut dyn Queries {
        match self {
            On::Sqlite(q) => q,
            #[cfg(feature = "postgres")]
            On::Postgres(q) => q,
        }
    }

    fn sqlite(&self) -> Option<&'a Connection> {
        match self {
            On::Sqlite(q) => Some(q.connection()),
            #[cfg(feature = "postgres")]
            On::Postgres(_) => None,
        }
    }
}

/// The connection under a handle, for the statements this crate builds at run time
/// (dynamic filters, search), which are not generated queries.
pub(crate) enum Conn<'t> {
    Sqlite(&'t Connection),
    #[cfg(feature = "postgres")]
    Postgres(&'t mut postgres::Client),
}

impl On<'_> {
    fn raw(&mut self) -> Conn<'_> {
        match self {
            On::Sqlite(q) => Conn::Sqlite(q.connection()),
            #[cfg(feature = "postgres")]
            On::Postgres(q) => Conn::Postgres(q.client()),
        }
    }
}

impl std::fmt::Debug for On<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{:?}", self.backend())
    }
}

/// An SQLite transaction begun and ended with the connection's cached statements:
/// `BEGIN`, `COMMIT` and `ROLLBACK` are parsed once per connection, not on every write
/// (rusqlite's `Transaction` prepares each of them anew, about 2% of a streamed flush).
/// Dropped without [`SqliteTx::commit`] (an error, a panic, a failed commit), it rolls
/// back, unless SQLite already did.
pub(crate) struct SqliteTx<'c> {
    conn: &'c Connection,
    open: bool,
}

impl<'c> SqliteTx<'c> {
    /// `BEGIN IMMEDIATE`: the write lock now, so that a conflict shows at the start.
    pub(crate) fn immediate(conn: &'c Connection) -> rusqlite::Result<Self> {
        run_cached(conn, "BEGIN IMMEDIATE")?;
        Ok(SqliteTx { conn, open: true })
    }

    /// `BEGIN` (deferred): one read snapshot from the first read on.
    pub(crate) fn deferred(conn: &'c Connection) -> rusqlite::Result<Self> {
        run_cached(conn, "BEGIN")?;
        Ok(SqliteTx { conn, open: true })
    }

    /// The connection, inside this transaction.
    pub(crate) fn conn(&self) -> &'c Connection {
        self.conn
    }

    /// `COMMIT`. On failure the transaction is rolled back as this handle drops.
    pub(crate) fn commit(mut self) -> rusqlite::Result<()> {
        run_cached(self.conn, "COMMIT")?;
        self.open = false;
        Ok(())
    }
}

impl Drop for SqliteTx<'_> {
    fn drop(&mut self) {
        // After some errors (a full disk, an interrupt) SQLite has rolled back already.
        if self.open
            && !self.conn.is_autocommit()
            && let Err(err) = run_cached(self.conn, "ROLLBACK")
        {
            tracing::debug!(error = %err, "rollback failed");
        }
    }
}

/// Runs a statement without parameters or rows through the connection's statement cache.
fn run_cached(conn: &Connection, sql: &str) -> rusqlite::Result<()> {
    conn.prepare_cached(sql)?.execute([])?;
    Ok(())
}

/// An action queued with [`Tx::after_commit`].
pub(crate) type AfterCommit = Box<dyn FnOnce() + Send + 'static>;

/// A queued action, with the key it was queued under ([`Tx::after_commit_keyed`]).
struct Queued {
    key: Option<String>,
    action: AfterCommit,
}

/// One write transaction, given to the closure of [`crate::Database::write`].
pub struct Tx<'a> {
    on: On<'a>,
    clock: &'a Clock,
    after_commit: Vec<Queued>,
}

impl<'a> Tx<'a> {
    pub(crate) fn new(conn: &'a Connection, clock: &'a Clock) -> Self {
        Tx {
            on: On::Sqlite(SqliteQueries::new(conn)),
            clock,
            after_commit: Vec::new(),
        }
    }

    #[cfg(feature = "postgres")]
    pub(crate) fn postgres(
        queries: crate::queries::postgres::PgQueries<'a, postgres::Client>,
        clock: &'a Clock,
    ) -> Self {
        Tx {
            on: On::Postgres(queries),
            clock,
            after_commit: Vec::new(),
        }
    }

    /// Every generated query, inside this transaction, on either backend:
    /// `tx.q().get_session(id)?`.
    ///
    /// ```
    /// use scribe_db::{Database, Tx};
    ///
    /// let db = Database::open_in_memory()?;
    /// let n = db.write(|tx: &mut Tx<'_>| tx.q().count_sessions())?;
    /// assert_eq!(n, 0);
    /// # Ok::<(), scribe_db::Error>(())
    /// ```
    pub fn q(&mut self) -> &mut dyn Queries {
        self.on.queries()
    }

    /// Which backend this transaction runs on.
    pub fn backend(&self) -> Backend {
        self.on.backend()
    }

    /// The SQLite connection, inside this transaction (for SQLite-only code: the
    /// generated SQLite free functions, raw SQL in tests); `None` on PostgreSQL. Code
    /// that runs on both backends uses [`Tx::q`].
    pub fn conn(&self) -> Option<&'a Connection> {
        self.on.sqlite()
    }

    /// The time now, from the database's [`Clock`].
    pub fn now(&self) -> i64 {
        self.clock.now()
    }

    /// Runs `action` once this transaction has committed (after every action queued
    /// before it); never if it rolls back. When the closure is retried (a busy
    /// database), the actions its failed run queued are dropped with that run.
    pub fn after_commit(&mut self, action: impl FnOnce() + Send + 'static) {
        self.after_commit.push(Queued {
            key: None,
            action: Box::new(action),
        });
    }

    /// [`Tx::after_commit`], replacing the action queued earlier in this transaction
    /// under the same `key` (which then does not run): the new one goes last. Services
    /// queue an entity's `updated` event under its id, so a transaction that changes a
    /// session twice announces it once, as it committed, never in a state that no
    /// reader could ever see.
    pub fn after_commit_keyed(
        &mut self,
        key: impl Into<String>,
        action: impl FnOnce() + Send + 'static,
    ) {
        let key = key.into();
        self.after_commit
            .retain(|queued| queued.key.as_deref() != Some(key.as_str()));
        self.after_commit.push(Queued {
            key: Some(key),
            action: Box::new(action),
        });
    }

    /// Runs `f` under a savepoint: when it fails, what it wrote is undone and so are the
    /// actions it queued ([`Tx::after_commit`]; one it replaced under a key comes back),
    /// the rest of the transaction stays as it was, and `f`'s error is returned. For a
    /// transaction that stores many independent pieces (a batch of imported sessions)
    /// and lets one of them fail alone; on PostgreSQL the transaction stays usable after
    /// a statement `f` ran failed. Attempts nest.
    ///
    /// ```
    /// use scribe_db::{Database, Error, Tx};
    ///
    /// let db = Database::open_in_memory()?;
    /// db.write(|tx: &mut Tx<'_>| -> Result<(), Error> {
    ///     let failed = tx.attempt(|tx| -> Result<(), Error> {
    ///         tx.q().delete_session("nothing")?;
    ///         Err(Error::InvalidInput("changed my mind".into()))
    ///     });
    ///     assert!(failed.is_err());
    ///     Ok(())
    /// })?;
    /// # Ok::<(), scribe_db::Error>(())
    /// ```
    pub fn attempt<T, E: From<Error>>(
        &mut self,
        f: impl FnOnce(&mut Tx<'a>) -> std::result::Result<T, E>,
    ) -> std::result::Result<T, E> {
        self.execute_batch("SAVEPOINT scribe_attempt")?;
        let before = std::mem::take(&mut self.after_commit);
        let result = f(self);
        let queued = std::mem::replace(&mut self.after_commit, before);
        match result {
            Ok(value) => {
                self.execute_batch("RELEASE scribe_attempt")?;
                for q in queued {
                    if let Some(key) = &q.key {
                        self.after_commit
                            .retain(|earlier| earlier.key.as_ref() != Some(key));
                    }
                    self.after_commit.push(q);
                }
                Ok(value)
            }
            Err(err) => {
                self.execute_batch("ROLLBACK TO scribe_attempt; RELEASE scribe_attempt")?;
                Err(err)
            }
        }
    }

    /// Runs `sql` (statements without parameters or rows: savepoints) inside this
    /// transaction, on either backend.
    pub(crate) fn execute_batch(&mut self, sql: &str) -> Result<(), Error> {
        match self.on.raw() {
            Conn::Sqlite(conn) => Ok(conn.execute_batch(sql)?),
            #[cfg(feature = "postgres")]
            Conn::Postgres(client) => Ok(client.batch_execute(sql)?),
        }
    }

    pub(crate) fn into_after_commit(self) -> Vec<AfterCommit> {
        self.after_commit.into_iter().map(|q| q.action).collect()
    }
}

impl std::fmt::Debug for Tx<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Tx")
            .field("after_commit", &self.after_commit.len())
            .finish_non_exhaustive()
    }
}

/// One read snapshot, given to the closure of [`crate::Database::read`].
#[derive(Debug)]
pub struct ReadTx<'a> {
    on: On<'a>,
    clock: &'a Clock,
}

impl<'a> ReadTx<'a> {
    pub(crate) fn new(conn: &'a Connection, clock: &'a Clock) -> Self {
        ReadTx {
            on: On::Sqlite(SqliteQueries::new(conn)),
            clock,
        }
    }

    #[cfg(feature = "postgres")]
    pub(crate) fn postgres(
        queries: crate::queries::postgres::PgQueries<'a, postgres::Client>,
        clock: &'a Clock,
    ) -> Self {
        ReadTx {
            on: On::Postgres(queries),
            clock,
        }
    }

    /// The connection, for statements built at run time.
    pub(crate) fn raw(&mut self) -> Conn<'_> {
        self.on.raw()
    }

    /// The read-only generated queries, inside this snapshot, on either backend:
    /// `tx.q().get_session(id)?`.
    pub fn q(&mut self) -> &mut dyn ReadQueries {
        self.on.queries()
    }

    /// Which backend this snapshot is read from.
    pub fn backend(&self) -> Backend {
        self.on.backend()
    }

    /// The SQLite connection, inside this snapshot (for SQLite-only code); `None` on
    /// PostgreSQL. Code that runs on both backends uses [`ReadTx::q`].
    pub fn conn(&self) -> Option<&'a Connection> {
        self.on.sqlite()
    }

    /// The time now, from the database's [`Clock`].
    pub fn now(&self) -> i64 {
        self.clock.now()
    }

    /// The stored JSON text of the part whose row is `seq` (`parts.data`), read from its
    /// row a piece at a time inside this snapshot (SQLite's incremental blob I/O), so a big
    /// part is never held whole; `None` when there is no such row. SQLite only: on
    /// PostgreSQL it is [`Error::InvalidInput`] (read parts there through [`ReadTx::q`]).
    pub fn part_json_reader(&self, seq: i64) -> Result<Option<impl std::io::Read + 'a>, Error> {
        let Some(conn) = self.on.sqlite() else {
            return Err(Error::InvalidInput(
                "a part's JSON is read from its row on SQLite only".into(),
            ));
        };
        match conn.blob_open("main", "parts", "data", seq, true) {
            Ok(blob) => Ok(Some(blob)),
            Err(rusqlite::Error::SqliteFailure(_, Some(message)))
                if message.starts_with("no such rowid") =>
            {
                Ok(None)
            }
            Err(err) => Err(err.into()),
        }
    }
}

/// An error type a [`crate::Database::write`] or [`crate::Database::read`] closure may
/// return: a service's own error, which keeps its type through the retry loop.
///
/// It converts from [`Error`] (what the database itself reports: begin, commit, busy
/// through every retry) and shows the database error it holds, if it holds one, so that
/// a busy database inside the closure is retried (the closure runs again) while every
/// other error rolls back and comes out unchanged.
pub trait TxError: From<Error> {
    /// The database error this is, if it is one.
    fn db_error(&self) -> Option<&Error>;

    /// The same, to replace it (the helper turns SQLite's "read-only" into
    /// [`Error::NotWritable`] naming the file).
    fn db_error_mut(&mut self) -> Option<&mut Error>;
}

impl TxError for Error {
    fn db_error(&self) -> Option<&Error> {
        Some(self)
    }

    fn db_error_mut(&mut self) -> Option<&mut Error> {
        Some(self)
    }
}

/// Implements [`TxError`] for an error enum whose tuple variant `$variant` holds the
/// [`Error`]: `scribe_db::impl_tx_error!(MyError, MyError::Db);`. A busy
/// database error in that variant is retried; every other value passes through.
#[macro_export]
macro_rules! impl_tx_error {
    ($ty:ty, $variant:path) => {
        impl $crate::TxError for $ty {
            fn db_error(&self) -> ::std::option::Option<&$crate::Error> {
                match self {
                    $variant(err) => ::std::option::Option::Some(err),
                    #[allow(unreachable_patterns)]
                    _ => ::std::option::Option::None,
                }
            }

            fn db_error_mut(&mut self) -> ::std::option::Option<&mut $crate::Error> {
                match self {
                    $variant(err) => ::std::option::Option::Some(err),
                    #[allow(unreachable_patterns)]
                    _ => ::std::option::Option::None,
                }
            }
        }
    };
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A part's JSON is read from its row whole; a row that is gone is `None` (a page
    /// leaves such a part out); any other failure to open is the database's error.
    #[test]
    fn a_part_json_reader_reads_the_row_and_a_gone_row_is_none() {
        let conn = Connection::open_in_memory().unwrap();
        conn.execute_batch(
            "CREATE TABLE parts (seq INTEGER PRIMARY KEY, id TEXT, data TEXT);
             INSERT INTO parts VALUES (7, 'prt_here', '{\"a\":\"0123456789\"}');",
        )
        .unwrap();
        let clock = Clock::system();
        let tx = ReadTx::new(&conn, &clock);
        let mut text = String::new();
        std::io::Read::read_to_string(&mut tx.part_json_reader(7).unwrap().unwrap(), &mut text)
            .unwrap();
        assert_eq!(text, r#"{"a":"0123456789"}"#);
        assert!(tx.part_json_reader(8).unwrap().is_none());
        conn.execute_batch("DROP TABLE parts").unwrap();
        assert!(tx.part_json_reader(7).is_err());
    }

    /// What an attempt wrote and queued is undone when it fails (a keyed action it
    /// replaced comes back) and kept when it succeeds; the transaction goes on either way,
    /// and attempts nest.
    #[test]
    fn a_failed_attempt_undoes_its_writes_and_actions_alone() {
        use std::sync::{Arc, Mutex};
        let conn = conn();
        conn.execute_batch("BEGIN").unwrap();
        let clock = Clock::system();
        let mut tx = Tx::new(&conn, &clock);
        let ran = Arc::new(Mutex::new(Vec::new()));
        let log = |name: &'static str| {
            let ran = Arc::clone(&ran);
            move || ran.lock().unwrap().push(name)
        };
        let insert = |tx: &mut Tx<'_>, id: i64| -> Result<(), Error> {
            tx.execute_batch(&format!("INSERT INTO parent (id) VALUES ({id})"))
        };
        insert(&mut tx, 1).unwrap();
        tx.after_commit_keyed("k", log("first"));
        let failed = tx.attempt(|tx| -> Result<(), Error> {
            insert(tx, 2)?;
            tx.after_commit_keyed("k", log("replaced, then undone"));
            tx.after_commit(log("undone"));
            // An inner attempt that succeeds is undone with the outer one.
            tx.attempt(|tx| insert(tx, 3))?;
            insert(tx, 1) // the primary key is taken
        });
        assert!(failed.is_err());
        let kept = tx.attempt(|tx| -> Result<(), Error> {
            insert(tx, 4)?;
            tx.after_commit(log("kept"));
            tx.attempt(|tx| -> Result<(), Error> {
                insert(tx, 5)?;
                Err(Error::InvalidInput("no".into()))
            })
            .unwrap_err();
            Ok(())
        });
        assert!(kept.is_ok());
        let ids: Vec<i64> = conn
            .prepare("SELECT id FROM parent ORDER BY id")
            .unwrap()
            .query_map([], |r| r.get(0))
            .unwrap()
            .collect::<rusqlite::Result<_>>()
            .unwrap();
        assert_eq!(ids, [1, 4]);
        for action in tx.into_after_commit() {
            action();
        }
        assert_eq!(*ran.lock().unwrap(), ["first", "kept"]);
    }

    fn conn() -> Connection {
        let conn = Connection::open_in_memory().unwrap();
        conn.execute_batch(
            "PRAGMA foreign_keys = ON;
             CREATE TABLE parent (id INTEGER PRIMARY KEY);
             CREATE TABLE child (
                 id INTEGER PRIMARY KEY,
                 parent INTEGER REFERENCES parent (id) DEFERRABLE INITIALLY DEFERRED
             );",
        )
        .unwrap();
        conn
    }

    fn count(conn: &Connection, table: &str) -> i64 {
        conn.query_row(&format!("SELECT count(*) FROM {table}"), [], |r| r.get(0))
            .unwrap()
    }

    #[test]
    fn a_committed_transaction_stays_and_a_dropped_one_rolls_back() {
        let conn = conn();
        for _ in 0..3 {
            let tx = SqliteTx::immediate(&conn).unwrap();
            tx.conn()
                .execute("INSERT INTO parent DEFAULT VALUES", [])
                .unwrap();
            tx.commit().unwrap();
        }
        {
            let tx = SqliteTx::immediate(&conn).unwrap();
            tx.conn()
                .execute("INSERT INTO parent DEFAULT VALUES", [])
                .unwrap();
        }
        assert!(conn.is_autocommit());
        assert_eq!(count(&conn, "parent"), 3);
        let tx = SqliteTx::deferred(&conn).unwrap();
        assert_eq!(count(tx.conn(), "parent"), 3);
        tx.commit().unwrap();
    }

    #[test]
    fn a_failed_commit_rolls_back_and_leaves_the_connection_usable() {
        let conn = conn();
        let tx = SqliteTx::immediate(&conn).unwrap();
        // A deferred foreign key fails only at COMMIT, which leaves the transaction open.
        tx.conn()
            .execute("INSERT INTO child (parent) VALUES (42)", [])
            .unwrap();
        let err = tx.commit().unwrap_err();
        assert_eq!(
            err.sqlite_error_code(),
            Some(rusqlite::ErrorCode::ConstraintViolation)
        );
        assert!(conn.is_autocommit());
        assert_eq!(count(&conn, "child"), 0);
        // Beginning again works: nothing is left open.
        let tx = SqliteTx::immediate(&conn).unwrap();
        tx.conn()
            .execute("INSERT INTO parent DEFAULT VALUES", [])
            .unwrap();
        tx.commit().unwrap();
        assert_eq!(count(&conn, "parent"), 1);
    }

    #[test]
    fn a_begin_inside_a_transaction_fails_without_ending_it() {
        let conn = conn();
        let outer = SqliteTx::immediate(&conn).unwrap();
        outer
            .conn()
            .execute("INSERT INTO parent DEFAULT VALUES", [])
            .unwrap();
        assert!(SqliteTx::immediate(&conn).is_err());
        assert!(!conn.is_autocommit(), "the outer transaction is still open");
        outer.commit().unwrap();
        assert_eq!(count(&conn, "parent"), 1);
    }
}
