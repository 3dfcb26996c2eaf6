//! Appending messages, one transaction each: `MessageService::create` (the real path:
//! ids, part encoding, session check, the generated statements, `Database::write`'s
//! retrying `BEGIN IMMEDIATE`, the `created` event to a subscriber) against a raw
//! rusqlite loop running the same statements with the same pragmas.
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

/// Rates of both sides, in messages per second.
#[derive(Debug, Clone, serde::Serialize)]
pub struct AppendResult {
    /// Messages appended by each side.
    pub messages: usize,
    /// Parts those messages hold.
    pub parts: usize,
    /// Messages per timed chunk (the sides alternate chunk by chunk).
    pub chunk: usize,
    /// `MessageService::create`.
    pub scribe_per_s: f64,
    /// Raw rusqlite loop.
    pub raw_per_s: f64,
    /// Median over chunks of the per-chunk rate ratio Scribe / raw.
    pub median_chunk_ratio: f64,
}

/// Appends the same `count` messages on each side, each to its own fresh file.
///
/// The sides alternate in chunks of `chunk` messages (which goes first alternates too) and
/// each side's rate is its messages over the sum of its chunks' times, so both live
/// through the same background load: on a shared machine, running one side after the
/// other measures the neighbours as much as the code.
pub fn run(dir: &Path, seed: u64, count: usize, chunk: usize) -> Result<AppendResult> {
    check_raw_sql()?;
    let work = drafts(seed, count);
    let parts = work.iter().map(|(_, p)| p.len()).sum();
    let scribe_path = dir.join("append-scribe.db");
    let raw_path = dir.join("append-raw.db");
    let scribe_session = fresh_db(&scribe_path, "append")?;
    let raw_session = fresh_db(&raw_path, "append")?;
    let svc = MessageService::new(Arc::new(Database::open(&scribe_path)?));
    // A listener, as a UI would have; drained as it goes.
    let events = svc.subscribe();
    let mut conn = raw_connection(&raw_path, Options::default().busy_timeout)?;
    let (mut scribe_time, mut raw_time) = (Duration::ZERO, Duration::ZERO);
    let mut chunk_ratios = Vec::new();
    let chunk = chunk.max(1);
    for (i, drafts) in work.chunks(chunk).enumerate() {
        let scribe = || -> Result<Duration> {
            let owned = drafts.to_vec();
            let started = Instant::now();
            for draft in owned {
                scribe_append(&svc, &scribe_session, draft)?;
                for event in events.try_iter() {
                    let _ = std::hint::black_box(event);
                }
            }
            Ok(started.elapsed())
        };
        let mut raw = || -> Result<Duration> {
            let started = Instant::now();
            for draft in drafts {
                raw_append(&mut conn, &raw_session, draft)?;
            }
            Ok(started.elapsed())
        };
        let (s, r) = if i % 2 == 0 {
            let r = raw()?;
            (scribe()?, r)
        } else {
            let s = scribe()?;
            (s, raw()?)
        };
        scribe_time += s;
        raw_time += r;
        chunk_ratios.push(r.as_secs_f64() / s.as_secs_f64().max(1e-9));
    }
    verify(&scribe_path, count, parts)?;
    verify(&raw_path, count, parts)?;
    chunk_ratios.sort_by(f64::total_cmp);
    Ok(AppendResult {
        messages: count,
        parts,
        chunk,
        scribe_per_s: crate::stats::rate(count, scribe_time),
        raw_per_s: crate::stats::rate(count, raw_time),
        median_chunk_ratio: chunk_ratios
            .get(chunk_ratios.len() / 2)
            .copied()
            .unwrap_or(f64::NAN),
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
