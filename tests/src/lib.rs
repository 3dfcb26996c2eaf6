//! Shared helpers for the cross-crate integration tests in `tests/`.
//!
//! - [`create_session`]: a session row through the generated query layer;
//! - [`consistency_problems`]: every invariant the database is supposed to keep by itself
//!   (integrity, counters, both search indexes, no message without parts), as a list of
//!   human-readable violations so a failing test shows all of them at once;
//! - [`search_counts`]: hits of both search indexes next to the rows that contain a term;
//! - [`messages_found`]: how many messages a search finds;
//! - [`error_chain`]: an error and its sources on one line, as a user would read them;
//! - [`child_command`]: re-runs the current test binary as a child process in a given role,
//!   for tests that need a second process (killed writers, another user id);
//! - [`seed`]: the random seed of a randomised test, `SCRIBE_TEST_SEED` to reproduce one;
//! - [`TestDb`] and [`backends!`]: a fresh store on SQLite (a file) or PostgreSQL (a new
//!   database on the `.ci/with-postgres` server), and the macro that runs one test body on
//!   both;
//! - [`dump_store_rows`], [`upgrade_location`] and [`open_upgraded`]: the rows an upgrade
//!   test compares, where it creates the older store, and the upgrade's open with what
//!   every upgrade keeps asserted (the newest version, the rows unchanged).

use std::process::Command;
use std::sync::Arc;

pub use scribe_db::Backend;
use scribe_db::ids::{Prefix, new_id};
use scribe_db::{Database, now_ms, queries};

/// Why a PostgreSQL variant is ignored in a plain `cargo test`.
pub const NEEDS_POSTGRES: &str = scribe_db::testing::NEEDS_SERVER;

/// A fresh, empty, migrated store on one backend, for one test. On SQLite it is the file
/// `scribe.db` in [`TestDb::dir`]; on PostgreSQL a new database on the server named by
/// `SCRIBE_TEST_POSTGRES` (set by `.ci/with-postgres`), dropped again with this value.
#[derive(Debug)]
pub struct TestDb {
    /// The backend.
    pub backend: Backend,
    /// The store.
    pub db: Arc<Database>,
    /// What [`Database::open`] takes to open the same store again (another handle, another
    /// process): the file's path or the PostgreSQL connection string.
    pub location: String,
    /// A temp dir for the test's files (the SQLite file lives here).
    pub dir: tempfile::TempDir,
    /// The PostgreSQL database to drop, with the server's connection string.
    postgres: Option<(String, String)>,
}

impl TestDb {
    /// A fresh store on `backend`. Panics (a test helper) when PostgreSQL is asked for
    /// without `SCRIBE_TEST_POSTGRES`, so a PostgreSQL test never passes without a server.
    pub fn new(backend: Backend) -> TestDb {
        let dir = tempfile::tempdir().expect("temp dir");
        let (location, postgres) = match backend {
            Backend::Sqlite => (
                dir.path().join("scribe.db").to_string_lossy().into_owned(),
                None,
            ),
            Backend::Postgres => {
                let (location, name, server) = fresh_postgres_database();
                (location, Some((server, name)))
            }
        };
        let db = Arc::new(Database::open(&location).expect("open the test store"));
        assert_eq!(db.backend(), backend);
        TestDb {
            backend,
            db,
            location,
            dir,
            postgres,
        }
    }

    /// Another handle on the same store (as a second process would open it).
    pub fn reopen(&self) -> Arc<Database> {
        Arc::new(Database::open(&self.location).expect("reopen the test store"))
    }

    /// Another handle on the same store whose clock stands still at `at` (ms): a process
    /// whose clock is behind or ahead of another's.
    pub fn reopen_at(&self, at: i64) -> Arc<Database> {
        let options = scribe_db::Options {
            clock: scribe_db::ManualClock::new(at).clock(),
            ..scribe_db::Options::default()
        };
        Arc::new(Database::open_with(&self.location, options).expect("reopen the test store"))
    }
}

/// Checks a run of changes to one row: each moves its `updated_at` forward and returns
/// what `stored` reads back.
#[derive(Debug)]
pub struct MovesForward<T, R> {
    last: i64,
    updated_at: fn(&T) -> i64,
    stored: R,
}

impl<T: PartialEq + std::fmt::Debug, R: FnMut(&T) -> T> MovesForward<T, R> {
    /// Starts from the row as `first` is.
    pub fn new(first: &T, updated_at: fn(&T) -> i64, stored: R) -> Self {
        MovesForward {
            last: updated_at(first),
            updated_at,
            stored,
        }
    }

    /// Asserts that `changed` (what the change `what` returned) moved `updated_at` forward
    /// and is what is stored; returns it.
    pub fn check(&mut self, what: &str, changed: T) -> T {
        let at = (self.updated_at)(&changed);
        assert!(
            at > self.last,
            "{what}: updated_at {at} after {}",
            self.last
        );
        assert_eq!((self.stored)(&changed), changed, "{what}");
        self.last = at;
        changed
    }
}

impl Drop for TestDb {
    fn drop(&mut self) {
        if let Some((server, name)) = &self.postgres
            && let Ok(mut admin) = postgres::Client::connect(server, postgres::NoTls)
        {
            // FORCE: handles the test leaked (a service holding the pool) are cut off.
            let _ = admin.batch_execute(&format!("DROP DATABASE IF EXISTS {name} WITH (FORCE)"));
        }
    }
}

/// A new, empty database on the `SCRIBE_TEST_POSTGRES` server: its connection string, its
/// name and the server's connection string.
fn fresh_postgres_database() -> (String, String, String) {
    let server = scribe_db::testing::test_server().expect(NEEDS_POSTGRES);
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.subsec_nanos());
    let name = scribe_db::testing::unique_test_name(&format!("scribe_t_{nanos}"));
    let url = scribe_db::testing::fresh_test_database(&name).expect("create a test database");
    (url, name, server)
}

/// Runs each named test body (`fn name(backend: Backend)`) on SQLite only, as the test
/// `name::sqlite`, for a reason given first (a feature PostgreSQL does not have yet in this
/// build): `sqlite_only!("filtered lists: pgsearch", name, …)`. Moving `name` into
/// [`backends!`] is the whole change once the feature lands.
#[macro_export]
macro_rules! sqlite_only {
    ($reason:literal, $($name:ident),* $(,)?) => {$(
        #[doc = $reason]
        mod $name {
            #[test]
            fn sqlite() {
                super::$name($crate::Backend::Sqlite);
            }
        }
    )*};
}

/// Runs each named test body (`fn name(backend: Backend)`) on both backends: generates a
/// module `name` with the tests `name::sqlite` and `name::postgres`. The PostgreSQL one is
/// `#[ignore]`d, as every PostgreSQL test is: `.ci/with-postgres cargo test … -- --ignored`
/// runs it (and it fails, never passes, without a server).
///
/// ```ignore
/// fn creates_a_session(backend: Backend) { let t = TestDb::new(backend); /* … */ }
/// scribe_tests::backends!(creates_a_session);
/// ```
#[macro_export]
macro_rules! backends {
    ($($name:ident),* $(,)?) => {$(
        mod $name {
            #[test]
            fn sqlite() {
                super::$name($crate::Backend::Sqlite);
            }

            #[test]
            #[ignore = "needs PostgreSQL: run under .ci/with-postgres"]
            fn postgres() {
                super::$name($crate::Backend::Postgres);
            }
        }
    )*};
}

/// Creates a normal session (source `cli`) with an optional title and returns its id.
pub fn create_session(db: &Database, title: Option<&str>) -> scribe_db::Result<String> {
    let id = new_id(Prefix::Session);
    db.write(|tx| -> scribe_db::Result<_> {
        tx.q().create_session(&queries::CreateSessionParams {
            directory: Some("/home/dev/project"),
            title,
            model: Some("anthropic/claude-sonnet"),
            ..scribe_db::testing::bare_session(&id, "cli", now_ms())
        })?;
        Ok(())
    })?;
    Ok(id)
}

/// Everything wrong with the derived state of `db`: `PRAGMA integrity_check`, both FTS5
/// indexes' own integrity checks and their row counts (after indexing what is queued, as a
/// search would: the indexes plus the queue must give every searchable part), session
/// counters against the rows, and messages without parts. Empty when the database is
/// consistent. SQLite only: an `InvalidInput` error on PostgreSQL.
pub fn consistency_problems(db: &Database) -> scribe_db::Result<Vec<String>> {
    db.index_pending()?;
    let integrity = |conn: &rusqlite::Connection| -> rusqlite::Result<Option<String>> {
        let mut stmt = conn.prepare("PRAGMA integrity_check")?;
        let report: Vec<String> = stmt
            .query_map([], |row| row.get(0))?
            .collect::<rusqlite::Result<_>>()?;
        Ok((report != ["ok"]).then(|| format!("integrity_check: {}", report.join("; "))))
    };
    // On a file, a fresh connection: FTS5's part of the check can report corruption on a
    // long-lived connection that cached the index structure before another connection
    // rebuilt it, though that connection's searches are fine.
    let fresh = match db.path() {
        Some(path) => Some(integrity(&rusqlite::Connection::open(path)?)?),
        None => None,
    };
    let mut problems = db.read(|conn| -> scribe_db::Result<_> {
        let Some(conn) = conn.conn() else {
            return Err(scribe_db::Error::InvalidInput(
                "this check reads an SQLite file".to_owned(),
            ));
        };
        let mut problems = Vec::new();
        let report = match &fresh {
            Some(report) => report.clone(),
            None => integrity(conn)?,
        };
        problems.extend(report);

        let orphans: Vec<String> = conn
            .prepare(
                "SELECT id FROM messages AS m
                 WHERE NOT EXISTS (SELECT 1 FROM parts AS p WHERE p.message_id = m.id)
                 ORDER BY id",
            )?
            .query_map([], |row| row.get(0))?
            .collect::<rusqlite::Result<_>>()?;
        for id in orphans {
            problems.push(format!("message {id} has no parts"));
        }

        let mut stmt = conn.prepare(
            "SELECT s.id, s.message_count,
                    (SELECT count(*) FROM messages AS m WHERE m.session_id = s.id),
                    s.tool_call_count,
                    (SELECT count(*) FROM parts AS p WHERE p.session_id = s.id AND p.type = 'tool')
             FROM sessions AS s ORDER BY s.id",
        )?;
        let rows = stmt.query_map([], |row| {
            Ok((
                row.get::<_, String>(0)?,
                row.get::<_, i64>(1)?,
                row.get::<_, i64>(2)?,
                row.get::<_, i64>(3)?,
                row.get::<_, i64>(4)?,
            ))
        })?;
        for row in rows {
            let (id, messages, real_messages, tools, real_tools) = row?;
            if messages != real_messages {
                problems.push(format!(
                    "session {id}: message_count {messages}, but {real_messages} messages"
                ));
            }
            if tools != real_tools {
                problems.push(format!(
                    "session {id}: tool_call_count {tools}, but {real_tools} tool parts"
                ));
            }
        }

        // Each index holds one row per part of its content view that is not queued (the
        // indexer indexes NULL text too), keyed by seq; a queued part has no row.
        for (index, view) in [
            ("parts_fts", "parts_search"),
            ("parts_fts_trigram", "parts_search_trigram"),
        ] {
            let sql = format!(
                "SELECT (SELECT count(*) FROM {index}_docsize),
                        (SELECT count(*) FROM {view} AS v
                         WHERE NOT EXISTS (SELECT 1 FROM search_queue AS q WHERE q.seq = v.seq)),
                        (SELECT count(*) FROM {index}_docsize AS d
                         WHERE NOT EXISTS (SELECT 1 FROM {view} AS v WHERE v.seq = d.id)
                            OR EXISTS (SELECT 1 FROM search_queue AS q WHERE q.seq = d.id))"
            );
            let (docs, parts, stray): (i64, i64, i64) =
                conn.query_row(&sql, [], |row| Ok((row.get(0)?, row.get(1)?, row.get(2)?)))?;
            if docs != parts || stray != 0 {
                problems.push(format!(
                    "{index}: {docs} indexed documents ({stray} not in {view} or still queued) \
                     for {parts} parts indexed"
                ));
            }
        }
        Ok(problems)
    })?;

    // FTS5's own checks, with rank = 1 (each index against its content view), as
    // `scribe db check` runs them: parts still queued are indexed first inside the check's
    // rolled-back transaction, so the indexes plus the queue are compared with the rows.
    for index in db.check()?.indexes {
        if let scribe_db::IndexStatus::Mismatch(message) = index.status {
            problems.push(format!("{}: {message}", index.index));
        }
    }
    Ok(problems)
}

/// How many parts each index finds for a word and a substring, next to how many parts
/// they should find (`LIKE`, case-insensitive for ASCII as both indexes are): every part
/// with the word for the word index, every part of the trigram index's view (text with
/// CJK or other spaceless-script characters) with the substring for the trigram index.
/// Indexes what is queued first, as a search does.
///
/// Returns `(word_hits, parts_with_word, substring_hits, parts_with_substring)`. `word` must
/// occur in the data only as a whole word for the first pair to be comparable. SQLite
/// only: an `InvalidInput` error on PostgreSQL.
pub fn search_counts(
    db: &Database,
    word: &str,
    substring: &str,
) -> scribe_db::Result<(i64, i64, i64, i64)> {
    db.index_pending()?;
    db.read(|conn| -> scribe_db::Result<_> {
        let Some(conn) = conn.conn() else {
            return Err(scribe_db::Error::InvalidInput(
                "this check reads an SQLite file".to_owned(),
            ));
        };
        let count = |sql: &str, arg: &str| -> rusqlite::Result<i64> {
            conn.query_row(sql, [arg], |row| row.get(0))
        };
        let quoted = |s: &str| format!("\"{}\"", s.replace('"', "\"\""));
        Ok((
            count(
                "SELECT count(*) FROM parts_fts WHERE parts_fts MATCH ?1",
                &quoted(word),
            )?,
            count(
                "SELECT count(*) FROM parts_search WHERE search_text LIKE '%' || ?1 || '%'",
                word,
            )?,
            count(
                "SELECT count(*) FROM parts_fts_trigram WHERE parts_fts_trigram MATCH ?1",
                &quoted(substring),
            )?,
            count(
                "SELECT count(*) FROM parts_search_trigram WHERE search_text LIKE '%' || ?1 || '%'",
                substring,
            )?,
        ))
    })
}

/// How many messages `messages.search(query)` finds with the default options (one hit per
/// message).
pub fn messages_found(
    messages: &scribe_message::MessageService,
    query: &str,
) -> scribe_message::Result<usize> {
    Ok(messages
        .search(query, &scribe_message::SearchOptions::default())?
        .len())
}

/// An error with its sources, `: `-separated, as a user would read it (the one
/// implementation, from scribe-types).
pub use scribe_agent::error_chain;

/// The current test binary re-run to execute only the test `test_name`, with its output
/// not captured: the child side of a multi-process test. The child test reads its role
/// from environment variables the caller sets on the returned command, and returns at once
/// when they are absent (so it passes as a no-op in the normal run).
pub fn child_command(test_name: &str) -> std::io::Result<Command> {
    let exe = std::env::current_exe()?;
    let mut cmd = Command::new(exe);
    cmd.args(["--exact", test_name, "--nocapture", "--test-threads=1"]);
    Ok(cmd)
}

/// The seed for a randomised test: `SCRIBE_TEST_SEED` when set (to reproduce a failing
/// run), otherwise taken from the clock. Panics when the variable is not an unsigned integer.
pub fn seed() -> u64 {
    match std::env::var("SCRIBE_TEST_SEED") {
        Ok(s) => s
            .parse()
            .unwrap_or_else(|e| panic!("SCRIBE_TEST_SEED must be an unsigned integer: {e:?}")),
        Err(_) => std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(1, |d| d.as_nanos() as u64),
    }
}

/// The README's Rust examples, compiled and run as doctests so they cannot drift from the
/// library.
#[cfg(doctest)]
#[doc = include_str!("../../README.md")]
pub struct ReadmeDoctests;

/// Words of the realistic text the writer processes generate.
pub const WORDS: [&str; 28] = [
    "the",
    "build",
    "failed",
    "because",
    "migration",
    "table",
    "index",
    "query",
    "retry",
    "writer",
    "session",
    "message",
    "refactor",
    "compile",
    "error",
    "function",
    "returns",
    "cargo",
    "test",
    "lock",
    "commit",
    "rollback",
    "snapshot",
    "token",
    "borrow",
    "checker",
    "lifetime",
    "trait",
];

/// The tables an upgrade test compares, each with the key its rows are ordered by.
const UPGRADE_TABLES: [(&str, &str); 4] = [
    ("sessions", "id"),
    ("messages", "id"),
    ("parts", "seq"),
    ("files", "id"),
];

/// What the upgrade helpers fail with: either backend's driver error, or the server's.
pub type DumpError = Box<dyn std::error::Error + Send + Sync>;

/// Every row of sessions, messages, parts and files, in key order, as text: what an
/// upgrade test compares before and after a migration (SQLite's values as rusqlite shows
/// them, PostgreSQL's rows as `to_jsonb` text).
pub fn dump_store_rows(backend: Backend, location: &str) -> Result<Vec<String>, DumpError> {
    let mut rows = Vec::new();
    match backend {
        Backend::Sqlite => {
            let conn = rusqlite::Connection::open(location)?;
            for (table, key) in UPGRADE_TABLES {
                let mut stmt = conn.prepare(&format!("SELECT * FROM {table} ORDER BY {key}"))?;
                let n = stmt.column_count();
                let mut r = stmt.query([])?;
                while let Some(row) = r.next()? {
                    let cols = (0..n)
                        .map(|i| row.get_ref(i).map(|value| format!("{value:?}")))
                        .collect::<rusqlite::Result<Vec<String>>>()?;
                    rows.push(format!("{table}: {}", cols.join(" | ")));
                }
            }
        }
        Backend::Postgres => {
            let mut client = postgres::Client::connect(location, postgres::NoTls)?;
            for (table, key) in UPGRADE_TABLES {
                let query = format!("SELECT to_jsonb(t)::text FROM {table} AS t ORDER BY {key}");
                for row in client.query(&query, &[])? {
                    rows.push(format!("{table}: {}", row.try_get::<_, String>(0)?));
                }
            }
        }
    }
    Ok(rows)
}

/// Opens the older store at `location` with `options`, which migrates it, and asserts
/// what every upgrade keeps: the store is at the newest schema version and its rows of
/// sessions, messages, parts and files are `before` ([`dump_store_rows`] before the
/// upgrade), exactly. `upgrade` names the upgrade in a failure (`"V25"`).
pub fn open_upgraded(
    backend: Backend,
    location: &str,
    options: scribe_db::Options,
    before: &[String],
    upgrade: &str,
) -> Arc<Database> {
    let db = Arc::new(Database::open_with(location, options).expect("open the upgraded store"));
    assert_eq!(
        db.schema_version().expect("its schema version"),
        Database::known_schema_version(),
        "{upgrade}: not at the newest version"
    );
    assert_eq!(
        dump_store_rows(backend, location).expect("its rows"),
        before,
        "rows changed by {upgrade}"
    );
    db
}

/// Where an upgrade test creates a store at an older version: `file` in `dir` on SQLite, a
/// new database (its name made unique from `name`) on the `.ci/with-postgres` server.
pub fn upgrade_location(
    backend: Backend,
    dir: &tempfile::TempDir,
    file: &str,
    name: &str,
) -> scribe_db::Result<String> {
    match backend {
        Backend::Sqlite => Ok(dir.path().join(file).to_string_lossy().into_owned()),
        Backend::Postgres => {
            scribe_db::testing::fresh_test_database(&scribe_db::testing::unique_test_name(name))
        }
    }
}
