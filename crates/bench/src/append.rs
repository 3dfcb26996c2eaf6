//! Appending messages, one transaction each: `MessageService::create` (the real path:
//! ids, part encoding, session check, the generated statements, `Database::write`'s
//! retrying `BEGIN IMMEDIATE`, the `created` event to a subscriber, the background search
//! indexer) against the limit ([`crate::limit`]) and against a raw rusqlite loop running
//! Scribe's own statements with the same pragmas (the same design without the library).
//!
//! The raw SQL is written out by hand and checked equal to the generated `*_SQL`
//! constants ([`check_raw_sql`]), so both sides run exactly the same statements. The raw
//! loop does the work any application must do for the same rows (ids, a timestamp, JSON
//! encoding of each part) and nothing else.

use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use rusqlite::{Connection, TransactionBehavior, params};
use scribe_db::ids::{Prefix, new_id};
use scribe_db::queries as q;
use scribe_db::{Database, Options, now_ms};
use scribe_message::{FinishReason, MessageService, NewMessage, Part, Role};
use scribe_session::{NewSession, SessionService};

use crate::Result;
use crate::data::Gen;

/// `SessionExists`, as a hand-written application would write it.
pub const RAW_SESSION_EXISTS: &str =
    "SELECT EXISTS (SELECT 1 FROM sessions WHERE id = ?1) AS \"found!: bool\"";
/// `CreateMessage`, as a hand-written application would write it.
pub const RAW_CREATE_MESSAGE: &str = "INSERT INTO messages (
    id, session_id, parent_id, role, agent, provider, model, finish_reason, is_summary,
    input_tokens, output_tokens, cache_read_tokens, cache_write_tokens, reasoning_tokens,
    cost_usd, error, created_at, updated_at, finished_at
) VALUES (
    ?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9,
    ?10, ?11, ?12, ?13, ?14,
    ?15, ?16, ?17, ?18, ?19
)";
/// `CreatePart`, as a hand-written application would write it.
pub const RAW_CREATE_PART: &str =
    "INSERT INTO parts (id, message_id, session_id, position, type, data, created_at, updated_at)
VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)";

/// Fails unless the raw statements are byte-identical to the generated ones.
pub fn check_raw_sql() -> Result<()> {
    for (name, raw, generated) in [
        ("SessionExists", RAW_SESSION_EXISTS, q::SESSION_EXISTS_SQL),
        ("CreateMessage", RAW_CREATE_MESSAGE, q::CREATE_MESSAGE_SQL),
        ("CreatePart", RAW_CREATE_PART, q::CREATE_PART_SQL),
    ] {
        if raw != generated {
            return Err(format!(
                "raw SQL of {name} drifted from sql/queries; update crates/bench to match"
            )
            .into());
        }
    }
    Ok(())
}

/// One message to append: its role and parts.
pub type Draft = (Role, Vec<Part>);

/// `count` messages from `seed` (alternating user and assistant, 1–3 parts).
pub fn drafts(seed: u64, count: usize) -> Vec<Draft> {
    let mut g = Gen::new(seed);
    let time = 1_700_000_000_000;
    (0..count).map(|n| g.message(n, time)).collect()
}

/// Creates a database at `path` with one session; returns the session id.
pub fn fresh_db(path: &Path, title: &str) -> Result<String> {
    let db = Arc::new(Database::open(path)?);
    let sessions = SessionService::new(db);
    Ok(sessions
        .create(NewSession {
            source: "bench".to_owned(),
            ..NewSession::titled(title)
        })?
        .id)
}

/// A connection with `Database`'s pragmas, for the raw side.
pub fn raw_connection(path: &Path, busy_timeout: Duration) -> Result<Connection> {
    let options = Options::default();
    let conn = Connection::open(path)?;
    conn.busy_timeout(busy_timeout)?;
    conn.pragma_update(None, "journal_mode", "WAL")?;
    conn.pragma_update(None, "foreign_keys", true)?;
    conn.pragma_update(None, "synchronous", "NORMAL")?;
    conn.pragma_update(None, "cache_size", -options.cache_kib)?;
    conn.pragma_update(None, "temp_store", "MEMORY")?;
    Ok(conn)
}

/// Appends one draft through `MessageService::create`.
pub fn scribe_append(svc: &MessageService, session: &str, draft: Draft) -> Result<()> {
    let (role, parts) = draft;
    svc.create(NewMessage::new(session, role, parts))?;
    Ok(())
}

/// Appends one draft with raw rusqlite: `BEGIN IMMEDIATE`, the same three statements,
/// `COMMIT`. SQLite's busy handler (the connection's busy timeout) is the only waiting.
pub fn raw_append(conn: &mut Connection, session: &str, draft: &Draft) -> Result<()> {
    let (role, parts) = draft;
    let now = now_ms();
    let id = new_id(Prefix::Message);
    let user = *role != Role::Assistant;
    let finish_reason = user.then(|| FinishReason::EndTurn.as_str());
    let finished_at = user.then_some(now);
    let tx = conn.transaction_with_behavior(TransactionBehavior::Immediate)?;
    let exists: bool = tx
        .prepare_cached(RAW_SESSION_EXISTS)?
        .query_row([session], |r| r.get(0))?;
    if !exists {
        return Err(format!("session {session} not found").into());
    }
    tx.prepare_cached(RAW_CREATE_MESSAGE)?.execute(params![
        id,
        session,
        None::<&str>,
        role.as_str(),
        None::<&str>,
        None::<&str>,
        None::<&str>,
        finish_reason,
        false,
        0,
        0,
        0,
        0,
        0,
        0.0,
        None::<&str>,
        now,
        now,
        finished_at,
    ])?;
    for (position, part) in (0_i64..).zip(parts) {
        let data = serde_json::to_string(part)?;
        tx.prepare_cached(RAW_CREATE_PART)?.execute(params![
            new_id(Prefix::Part),
            id,
            session,
            position,
            part.type_name(),
            data,
            now,
            now,
        ])?;
    }
    tx.commit()?;
    Ok(())
}

/// `count` messages of one text part each (assistant replies of 200–2,000 bytes, about
/// 1.1 KB): "the commit of one message with one text part" of issue 14.
pub fn one_text_drafts(seed: u64, count: usize) -> Vec<Draft> {
    let mut g = Gen::new(seed);
    (0..count)
        .map(|_| (Role::Assistant, vec![Part::text(g.text(200, 2_000))]))
        .collect()
}

/// Appending, one message per transaction, on three sides: Scribe, the limit and the same
/// design in raw rusqlite. Rates in messages per second, latencies in ms.
#[derive(Debug, Clone, serde::Serialize)]
pub struct AppendResult {
    /// Messages appended by each side.
    pub messages: usize,
    /// Messages per timed chunk (the sides alternate chunk by chunk).
    pub chunk: usize,
    /// `MessageService::create` (the background indexer running beside it).
    pub scribe_per_s: f64,
    /// Scribe's appends plus indexing them until no part waits, over the whole run.
    pub scribe_sustained_per_s: f64,
    /// The limit ([`crate::limit`]).
    pub limit_per_s: f64,
    /// Scribe's statements in a raw rusqlite loop (the same schema and triggers).
    pub raw_per_s: f64,
    /// 99th percentile of one append, Scribe.
    pub scribe_p99_ms: f64,
    /// 99th percentile of one append, the limit.
    pub limit_p99_ms: f64,
    /// 99th percentile of one append, raw.
    pub raw_p99_ms: f64,
    /// Longest append, Scribe.
    pub scribe_max_ms: f64,
    /// Longest append, the limit.
    pub limit_max_ms: f64,
}

/// Appends the same `count` one-text-part messages on each side, each to its own fresh
/// file.
///
/// The sides alternate in chunks of `chunk` messages (which goes first rotates too) and
/// each side's rate is its messages over the sum of its chunks' times, so all three live
/// through the same background load: on a shared machine, running one side after the
/// other measures the neighbours as much as the code. After each Scribe chunk the queue
/// is drained and the WAL checkpoint its writes handed to a thread is waited for (both
/// timed separately, for the sustained rate), so no indexing or checkpoint runs while
/// another side is timed.
pub fn run(dir: &Path, seed: u64, count: usize, chunk: usize) -> Result<AppendResult> {
    check_raw_sql()?;
    let work = one_text_drafts(seed, count);
    let parts = work.iter().map(|(_, p)| p.len()).sum();
    let scribe_path = dir.join("append-scribe.db");
    let raw_path = dir.join("append-raw.db");
    let limit_path = dir.join("append-limit.db");
    let scribe_session = fresh_db(&scribe_path, "append")?;
    let raw_session = fresh_db(&raw_path, "append")?;
    let db = Arc::new(Database::open(&scribe_path)?);
    let svc = MessageService::new(Arc::clone(&db));
    // A listener, as a UI would have; drained as it goes.
    let events = svc.subscribe();
    let mut conn = raw_connection(&raw_path, Options::default().busy_timeout)?;
    let limit = crate::limit::open(&limit_path, Duration::from_secs(5))?;
    let limit_session = crate::limit::create_session(&limit, "append")?;
    let (mut scribe_time, mut drain_time, mut raw_time, mut limit_time) = (
        Duration::ZERO,
        Duration::ZERO,
        Duration::ZERO,
        Duration::ZERO,
    );
    let (mut scribe_lat, mut raw_lat, mut limit_lat) = (Vec::new(), Vec::new(), Vec::new());
    let chunk = chunk.max(1);
    for (i, drafts) in work.chunks(chunk).enumerate() {
        for side in 0..3 {
            match (i + side) % 3 {
                0 => {
                    let started = Instant::now();
                    for draft in drafts.iter().cloned() {
                        let t = Instant::now();
                        scribe_append(&svc, &scribe_session, draft)?;
                        scribe_lat.push(t.elapsed());
                        for event in events.try_iter() {
                            let _ = std::hint::black_box(event);
                        }
                    }
                    scribe_time += started.elapsed();
                    let started = Instant::now();
                    db.index_pending()?;
                    // The WAL checkpoint the chunk handed to a thread (stop 31) ends too,
                    // counted here, and does not run while another side is timed.
                    db.wait_for_checkpoint();
                    drain_time += started.elapsed();
                }
                1 => {
                    let started = Instant::now();
                    for draft in drafts {
                        let t = Instant::now();
                        crate::limit::append(&limit, &limit_session, draft)?;
                        limit_lat.push(t.elapsed());
                    }
                    limit_time += started.elapsed();
                }
                _ => {
                    let started = Instant::now();
                    for draft in drafts {
                        let t = Instant::now();
                        raw_append(&mut conn, &raw_session, draft)?;
                        raw_lat.push(t.elapsed());
                    }
                    raw_time += started.elapsed();
                }
            }
        }
    }
    drop(svc);
    drop(db);
    verify(&scribe_path, count, parts)?;
    verify(&raw_path, count, parts)?;
    if crate::limit::count(&limit)? != count {
        return Err("the limit did not store every message".into());
    }
    use crate::stats::{max, ms, percentile, rate};
    Ok(AppendResult {
        messages: count,
        chunk,
        scribe_per_s: rate(count, scribe_time),
        scribe_sustained_per_s: rate(count, scribe_time + drain_time),
        limit_per_s: rate(count, limit_time),
        raw_per_s: rate(count, raw_time),
        scribe_p99_ms: ms(percentile(&scribe_lat, 0.99)),
        limit_p99_ms: ms(percentile(&limit_lat, 0.99)),
        raw_p99_ms: ms(percentile(&raw_lat, 0.99)),
        scribe_max_ms: ms(max(&scribe_lat)),
        limit_max_ms: ms(max(&limit_lat)),
    })
}

/// Both sides must have stored exactly the same number of rows.
fn verify(path: &Path, messages: usize, parts: usize) -> Result<()> {
    let conn = Connection::open(path)?;
    let (m, p): (i64, i64) = conn.query_row(
        "SELECT (SELECT count(*) FROM messages), (SELECT count(*) FROM parts)",
        [],
        |r| Ok((r.get(0)?, r.get(1)?)),
    )?;
    if (usize::try_from(m)?, usize::try_from(p)?) != (messages, parts) {
        return Err(format!(
            "{}: {m} messages and {p} parts stored, expected {messages} and {parts}",
            path.display()
        )
        .into());
    }
    Ok(())
}
