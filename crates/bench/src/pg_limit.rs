//! PostgreSQL's limit: the simplest raw program that stores a conversation with word
//! search on the server given, issue 14's limit ([`crate::limit`]) translated to
//! PostgreSQL. The PostgreSQL report's writer rows are set beside it, as the SQLite
//! report's are beside the SQLite limit.
//!
//! Its own schema (`scribe_bench_limit`, created by the report and dropped at its end) on the
//! same server: a session table with a message counter kept by an AFTER INSERT trigger;
//! one `messages` row per message holding its parts as one JSON array (TEXT); an index
//! on `(session_id, created_at)`; one word index, a GIN index over
//! `to_tsvector('simple', parts::json -> 0 ->> 'text')` (the first part's text, as the
//! SQLite limit's FTS5 table holds). `simple` is the closest configuration to FTS5's
//! default tokenizer (unicode61): both lower-case and split on non-word characters and
//! neither stems nor drops stop words; unlike unicode61 `simple` does not remove
//! diacritics, splits `foo-bar`/`a.b` URLs, file paths and e-mail addresses as its parser
//! sees them (one token for a path or an address, where unicode61 makes several), and
//! keeps no copy of the text (FTS5's default table keeps one).
//!
//! An append is one autocommit prepared INSERT with the raw `postgres` crate at READ
//! COMMITTED (one round trip). The writers are separate processes (the hidden
//! `--writer --pg-limit` role), each appending to its own session the same drafts as
//! Scribe's writer rows. [`Variant`]s add one of Scribe's choices at a time (an explicit
//! transaction as Scribe runs it, then SERIALIZABLE) for the report's breakdown.

use std::time::Duration;

use postgres::{Client, NoTls};
use scribe_db::ids::{Prefix, new_id};
use scribe_db::now_ms;
use scribe_message::Role;

use crate::Result;
use crate::append::Draft;

/// The environment variable naming a limit writer's [`Variant`].
pub const VARIANT_ENV: &str = "SCRIBE_BENCH_PG_VARIANT";

/// The limit's schema (in `scribe_bench_limit`).
const SCHEMA: &str = "
CREATE SCHEMA IF NOT EXISTS scribe_bench_limit;
CREATE TABLE IF NOT EXISTS scribe_bench_limit.sessions (
    id TEXT PRIMARY KEY,
    title TEXT,
    message_count BIGINT NOT NULL DEFAULT 0,
    created_at BIGINT NOT NULL,
    updated_at BIGINT NOT NULL
);
CREATE TABLE IF NOT EXISTS scribe_bench_limit.messages (
    id TEXT PRIMARY KEY,
    session_id TEXT NOT NULL REFERENCES scribe_bench_limit.sessions (id) ON DELETE CASCADE,
    role TEXT NOT NULL,
    parts TEXT NOT NULL,
    model TEXT,
    created_at BIGINT NOT NULL,
    updated_at BIGINT NOT NULL
);
CREATE INDEX IF NOT EXISTS messages_session
    ON scribe_bench_limit.messages (session_id, created_at);
CREATE INDEX IF NOT EXISTS messages_words ON scribe_bench_limit.messages
    USING gin (to_tsvector('simple', (parts::json -> 0 ->> 'text')));
CREATE OR REPLACE FUNCTION scribe_bench_limit.messages_count() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    UPDATE scribe_bench_limit.sessions SET message_count = message_count + 1
    WHERE id = NEW.session_id;
    RETURN NULL;
END;
$$;
DROP TRIGGER IF EXISTS messages_count ON scribe_bench_limit.messages;
CREATE TRIGGER messages_count AFTER INSERT ON scribe_bench_limit.messages
FOR EACH ROW EXECUTE FUNCTION scribe_bench_limit.messages_count();
";

const INSERT: &str = "INSERT INTO scribe_bench_limit.messages
    (id, session_id, role, parts, model, created_at, updated_at)
VALUES ($1, $2, $3, $4, $5, $6, $7)";

/// What a limit writer does per append.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Variant {
    /// The limit: one autocommit INSERT (READ COMMITTED), one round trip.
    Limit,
    /// The same INSERT inside a transaction sent as Scribe sends one: `BEGIN ISOLATION
    /// LEVEL READ COMMITTED`, the INSERT, `SELECT 1; COMMIT` (three round trips).
    Tx,
    /// [`Variant::Tx`] at SERIALIZABLE (Scribe's isolation), run again on a
    /// serialization failure or deadlock.
    Serializable,
}

impl Variant {
    /// Every variant, the limit first.
    pub const ALL: [Variant; 3] = [Variant::Limit, Variant::Tx, Variant::Serializable];

    /// Its name on the command line and in the report.
    pub fn name(self) -> &'static str {
        match self {
            Variant::Limit => "limit",
            Variant::Tx => "limit+tx",
            Variant::Serializable => "limit+tx+ser",
        }
    }

    /// Its name in the report's backend column.
    pub fn backend(self) -> &'static str {
        match self {
            Variant::Limit => "PG limit",
            Variant::Tx => "PG lim+tx",
            Variant::Serializable => "PG lim+ser",
        }
    }

    fn parse(name: &str) -> Result<Variant> {
        Variant::ALL
            .into_iter()
            .find(|v| v.name() == name)
            .ok_or_else(|| format!("no limit variant named {name:?}").into())
    }

    /// What it sends per append.
    pub fn describe(self) -> &'static str {
        match self {
            Variant::Limit => "one autocommit INSERT, READ COMMITTED: 1 round trip",
            Variant::Tx => "BEGIN READ COMMITTED; INSERT; SELECT 1; COMMIT: 3 round trips",
            Variant::Serializable => "BEGIN SERIALIZABLE; INSERT; SELECT 1; COMMIT: 3 round trips",
        }
    }
}

/// Connects to `url` without TLS (the limit is measured on a local or trusted server).
pub fn connect(url: &str) -> Result<Client> {
    Ok(Client::connect(url, NoTls)?)
}

/// Creates the limit's schema on the server at `url` (if it is not there).
pub fn create_schema(client: &mut Client) -> Result<()> {
    // Two reports at once could race on CREATE ... IF NOT EXISTS: one at a time.
    client.batch_execute("SELECT pg_advisory_lock(7140)")?;
    let outcome = client.batch_execute(SCHEMA);
    client.batch_execute("SELECT pg_advisory_unlock(7140)")?;
    Ok(outcome?)
}

/// Drops the limit's schema and everything in it.
pub fn drop_schema(client: &mut Client) -> Result<()> {
    client.batch_execute("DROP SCHEMA IF EXISTS scribe_bench_limit CASCADE")?;
    Ok(())
}

/// A new session of the limit titled `title`; its id.
pub fn create_session(client: &mut Client, title: &str) -> Result<String> {
    let id = new_id(Prefix::Session);
    let now = now_ms();
    client.execute(
        "INSERT INTO scribe_bench_limit.sessions (id, title, created_at, updated_at)
         VALUES ($1, $2, $3, $3)",
        &[&id, &title, &now],
    )?;
    Ok(id)
}

/// Messages stored in `sessions`, by the trigger's counters and by counting rows (they
/// must agree).
pub fn stored(client: &mut Client, sessions: &[String]) -> Result<(i64, i64)> {
    let row = client.query_one(
        "SELECT (SELECT coalesce(sum(message_count), 0)::bigint
                 FROM scribe_bench_limit.sessions WHERE id = ANY ($1)),
                (SELECT count(*) FROM scribe_bench_limit.messages WHERE session_id = ANY ($1))",
        &[&sessions],
    )?;
    Ok((row.try_get(0)?, row.try_get(1)?))
}

/// SQLSTATEs a SERIALIZABLE transaction is run again on.
fn retryable(err: &postgres::Error) -> bool {
    err.code().is_some_and(|c| {
        *c == postgres::error::SqlState::T_R_SERIALIZATION_FAILURE
            || *c == postgres::error::SqlState::T_R_DEADLOCK_DETECTED
    })
}

/// Appends one draft as `variant` does; the attempts run again.
fn append(
    client: &mut Client,
    insert: &postgres::Statement,
    variant: Variant,
    session: &str,
    draft: &Draft,
) -> std::result::Result<u64, postgres::Error> {
    let (role, parts) = draft;
    // The parts always encode: they came from the generator.
    let json = serde_json::to_string(parts).unwrap_or_default();
    let model = (*role == Role::Assistant).then_some("claude-bench");
    let id = new_id(Prefix::Message);
    let now = now_ms();
    let params: [&(dyn postgres::types::ToSql + Sync); 7] =
        [&id, &session, &role.as_str(), &json, &model, &now, &now];
    let begin = match variant {
        Variant::Limit => {
            client.execute(insert, &params)?;
            return Ok(0);
        }
        Variant::Tx => "BEGIN ISOLATION LEVEL READ COMMITTED",
        Variant::Serializable => "BEGIN ISOLATION LEVEL SERIALIZABLE",
    };
    let mut retries = 0;
    loop {
        client.batch_execute(begin)?;
        let outcome = client
            .execute(insert, &params)
            .and_then(|_| client.batch_execute("SELECT 1; COMMIT"));
        match outcome {
            Ok(()) => return Ok(retries),
            Err(err) => {
                let _ = client.batch_execute("ROLLBACK");
                if retryable(&err) && retries < 100 {
                    retries += 1;
                    continue;
                }
                return Err(err);
            }
        }
    }
}

/// The writer process side of `--writer --pg-limit`: the location from
/// [`crate::postgres::DB_ENV`], the variant from [`VARIANT_ENV`] (the limit when unset);
/// one untimed append, "ready", then `count` appends after "go", as fast as it can or
/// one every [`crate::postgres::PACE_ENV`] ms.
pub fn child(session: &str, count: usize, seed: u64) -> Result<()> {
    let location = std::env::var(crate::postgres::DB_ENV)
        .map_err(|_| format!("{} is not set", crate::postgres::DB_ENV))?;
    let variant = match std::env::var(VARIANT_ENV) {
        Ok(name) => Variant::parse(&name)?,
        Err(_) => Variant::Limit,
    };
    let mut client = connect(&location)?;
    let insert = client.prepare(INSERT)?;
    let retries = std::cell::Cell::new(0);
    let own_backend = client
        .query_one("SELECT pg_backend_pid()", &[])
        .ok()
        .and_then(|row| row.try_get::<_, i32>(0).ok())
        .and_then(|pid| u32::try_from(pid).ok());
    crate::postgres::writer_loop(
        count,
        seed,
        crate::postgres::pace_of_env()?,
        |draft| match append(&mut client, &insert, variant, session, draft) {
            Ok(n) => {
                retries.set(retries.get() + n);
                Ok(())
            }
            Err(err) => Err(match err.as_db_error() {
                Some(db) => format!("{} ({})", db.message(), db.code().code()),
                None => err.to_string(),
            }),
        },
        || own_backend.into_iter().collect(),
        || retries.get(),
    )
}

/// The CPU time the server's processes spent, read from `/proc` when the server runs on
/// this machine: the postmaster's own and its reaped children's (a backend that exited
/// is counted there), plus each live child's.
#[derive(Debug, Clone, Copy)]
pub struct ServerCpu {
    postmaster: u32,
}

/// Clock ticks per second of `/proc/<pid>/stat` (`USER_HZ`, 100 on Linux).
const TICKS_PER_S: f64 = 100.0;

impl ServerCpu {
    /// Finds the postmaster (the parent of this connection's backend), if its `/proc`
    /// entry is readable here.
    pub fn find(client: &mut Client) -> Option<ServerCpu> {
        let backend: i32 = client
            .query_one("SELECT pg_backend_pid()", &[])
            .ok()?
            .try_get(0)
            .ok()?;
        let stat = proc_stat(u32::try_from(backend).ok()?)?;
        let postmaster = ServerCpu { postmaster: stat.0 };
        postmaster.total()?;
        Some(postmaster)
    }

    /// The server's CPU time so far.
    pub fn total(self) -> Option<Duration> {
        let (_, own, reaped) = proc_stat(self.postmaster)?;
        let mut ticks = own + reaped;
        for entry in std::fs::read_dir("/proc").ok()?.flatten() {
            let Some(pid) = entry
                .file_name()
                .to_str()
                .and_then(|s| s.parse::<u32>().ok())
            else {
                continue;
            };
            // A process that ended since the listing is in the postmaster's reaped time.
            if let Some((parent, live, _)) = proc_stat(pid)
                && parent == self.postmaster
            {
                ticks += live;
            }
        }
        Some(Duration::from_secs_f64(ticks as f64 / TICKS_PER_S))
    }
}

/// The CPU time this process's live threads have spent, in nanoseconds from each
/// thread's `/proc/self/task/<tid>/schedstat` (a writer's appends take less than
/// `/proc/self/stat`'s 10 ms ticks), when `/proc` can tell.
pub fn own_cpu() -> Option<Duration> {
    let mut ns = 0_u64;
    for task in std::fs::read_dir("/proc/self/task").ok()?.flatten() {
        let text = std::fs::read_to_string(task.path().join("schedstat")).ok()?;
        ns += text.split_whitespace().next()?.parse::<u64>().ok()?;
    }
    Some(Duration::from_nanos(ns))
}

/// `(parent pid, utime + stime, cutime + cstime)` of process `pid`, in ticks.
fn proc_stat(pid: u32) -> Option<(u32, u64, u64)> {
    parse_stat(&std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?)
}

/// [`proc_stat`] of the text of a `/proc/<pid>/stat`.
fn parse_stat(text: &str) -> Option<(u32, u64, u64)> {
    // The command name may hold spaces and parentheses: the fields start after the last ')'.
    let rest = &text[text.rfind(')')? + 1..];
    let fields: Vec<&str> = rest.split_whitespace().collect();
    // fields[0] is the state (field 3 of stat(5)); ppid is field 4, utime..cstime 14..17.
    let num = |i: usize| fields.get(i - 3).and_then(|f| f.parse::<u64>().ok());
    let parent = u32::try_from(num(4)?).ok()?;
    Some((parent, num(14)? + num(15)?, num(16)? + num(17)?))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::append::drafts;

    #[test]
    fn stat_fields_are_read_after_the_command_name() {
        // A backend's title holds spaces and parentheses.
        let line = "4242 (postgres: postgres db [local] (idle) x) S 17 4242 4242 0 -1 4194560 \
                    900 0 0 0 123 45 6 7 20 0 1 0 5000 220000000 5000 18446744073709551615";
        assert_eq!(parse_stat(line), Some((17, 168, 13)));
    }

    #[test]
    fn a_truncated_stat_is_none() {
        assert_eq!(parse_stat("4242 (postgres) S 17 4242"), None);
        assert_eq!(parse_stat("no parenthesis"), None);
    }

    /// The limit's schema on a real server: every variant stores its appends, the trigger
    /// counts them, and the word index answers a word of the first part (with
    /// `bash .ci/with-postgres cargo test -p scribe-bench -- --ignored`).
    #[test]
    #[ignore = "needs a PostgreSQL server: SCRIBE_TEST_POSTGRES (.ci/with-postgres)"]
    fn the_limit_stores_counts_and_finds_words() -> Result<()> {
        let url = std::env::var("SCRIBE_TEST_POSTGRES")?;
        let mut client = connect(&url)?;
        create_schema(&mut client)?;
        // Twice: the schema is created only if it is not there.
        create_schema(&mut client)?;
        let session = create_session(&mut client, "limit test")?;
        let insert = client.prepare(INSERT)?;
        let work = drafts(7, 6);
        for (variant, draft) in Variant::ALL.into_iter().cycle().zip(&work) {
            append(&mut client, &insert, variant, &session, draft)?;
        }
        assert_eq!(stored(&mut client, std::slice::from_ref(&session))?, (6, 6));
        let word = work
            .iter()
            .find_map(|(_, parts)| match parts.first() {
                Some(scribe_message::Part::Text(part)) => part
                    .text
                    .split(|c: char| !c.is_alphanumeric())
                    .find(|w| w.len() > 3)
                    .map(str::to_lowercase),
                _ => None,
            })
            .ok_or("no text part with a word")?;
        let found: i64 = client
            .query_one(
                "SELECT count(*) FROM scribe_bench_limit.messages
                 WHERE to_tsvector('simple', (parts::json -> 0 ->> 'text'))
                       @@ plainto_tsquery('simple', $1)",
                &[&word],
            )?
            .try_get(0)?;
        assert!(found >= 1, "{word:?} not found");
        drop_schema(&mut client)?;
        let left: i64 = client
            .query_one(
                "SELECT count(*) FROM pg_namespace WHERE nspname = 'scribe_bench_limit'",
                &[],
            )?
            .try_get(0)?;
        assert_eq!(left, 0);
        Ok(())
    }

    #[test]
    fn variants_round_trip_their_names() {
        for variant in Variant::ALL {
            assert_eq!(Variant::parse(variant.name()).ok(), Some(variant));
        }
        assert!(Variant::parse("fast").is_err());
    }
}
