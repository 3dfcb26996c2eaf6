//! The read benchmarks' database: many sessions of realistic messages, among them one
//! session of exactly `load_messages` messages (the load benchmark) and two sessions with a
//! compaction summary `summary_back` messages before their end (the `context()`
//! benchmark: a long and a short history before the same-sized tail).
//!
//! Built through `scribe_message::store::insert_message` in batches of 1,000 messages per
//! transaction (the import path), with the sessions' messages interleaved in time as in a
//! real store, then checkpointed.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use rand::SeedableRng;
use rand::rngs::StdRng;
use rand::seq::SliceRandom;
use scribe_db::Database;
use scribe_db::ids::{Prefix, new_id};
use scribe_message::{FinishReason, Message, Part, Role, StoredPart, TokenUsage, store};
use scribe_session::{NewSession, SessionService};

use crate::Result;
use crate::data::Gen;

/// Sizes of the corpus.
#[derive(Debug, Clone, Copy)]
pub struct Shape {
    /// Messages in all.
    pub messages: usize,
    /// Sessions in all (at least 4).
    pub sessions: usize,
    /// Messages of the session that is loaded whole.
    pub load_messages: usize,
    /// Messages of the long `context()` session.
    pub long_messages: usize,
    /// Messages of the short `context()` session.
    pub short_messages: usize,
    /// How many messages before the end the summary of both `context()` sessions is.
    pub summary_back: usize,
}

/// A built corpus.
#[derive(Debug)]
pub struct Corpus {
    /// The file.
    pub path: PathBuf,
    /// The same messages in the limit's schema ([`crate::limit`]).
    pub limit_path: PathBuf,
    /// The load session's id in the limit's file.
    pub limit_load_session: String,
    /// The database.
    pub db: Arc<Database>,
    /// The session loaded whole.
    pub load_session: String,
    /// The long `context()` session.
    pub long_session: String,
    /// The short `context()` session.
    pub short_session: String,
    /// Messages stored.
    pub messages: usize,
    /// Parts stored.
    pub parts: usize,
    /// Bytes of part JSON stored (the payload).
    pub payload_bytes: usize,
    /// How long building took.
    pub build_time: Duration,
}

/// Builds the corpus at `path`, and the same messages in the limit's schema at
/// `limit_path`.
pub fn build(path: &Path, limit_path: &Path, shape: Shape, seed: u64) -> Result<Corpus> {
    let started = Instant::now();
    let db = Arc::new(Database::open(path)?);
    let sessions = SessionService::new(Arc::clone(&db));
    let sources = ["cli", "tui", "telegram", "slack"];
    let ids = (0..shape.sessions.max(4))
        .map(|i| {
            Ok(sessions
                .create(NewSession {
                    source: sources[i % sources.len()].to_owned(),
                    model: Some("anthropic/claude-bench".to_owned()),
                    ..NewSession::titled(format!("bench session {i}"))
                })?
                .id)
        })
        .collect::<Result<Vec<String>>>()?;
    let limit = crate::limit::open(limit_path, std::time::Duration::from_secs(5))?;
    let limit_ids = (0..ids.len())
        .map(|i| crate::limit::create_session(&limit, &format!("bench session {i}")))
        .collect::<Result<Vec<String>>>()?;
    let mut limit_batch: Vec<(usize, crate::append::Draft, i64)> = Vec::with_capacity(1_000);

    // Which session each message goes to, shuffled so sessions interleave in time.
    let fixed = [
        shape.load_messages,
        shape.long_messages,
        shape.short_messages,
    ];
    let rest = shape.messages.saturating_sub(fixed.iter().sum());
    let others = ids.len() - fixed.len();
    let mut owner: Vec<usize> = Vec::with_capacity(shape.messages);
    for (i, &n) in fixed.iter().enumerate() {
        owner.extend(std::iter::repeat_n(i, n));
    }
    owner.extend((0..rest).map(|n| fixed.len() + n % others));
    owner.shuffle(&mut StdRng::seed_from_u64(seed ^ 0x5eed));

    let mut g = Gen::new(seed);
    let mut counts = vec![0_usize; ids.len()];
    let mut summaries: [Option<String>; 2] = [None, None];
    let mut time = 1_700_000_000_000_i64;
    let mut batch: Vec<Message> = Vec::with_capacity(1_000);
    let (mut parts, mut payload_bytes) = (0, 0);
    for (n, &s) in owner.iter().enumerate() {
        time += 1 + i64::try_from(g.below(3))?;
        let nth = counts[s];
        counts[s] += 1;
        // The two context sessions get their summary `summary_back` messages before the end.
        let summary = match s {
            1 => nth + shape.summary_back == shape.long_messages,
            2 => nth + shape.summary_back == shape.short_messages,
            _ => false,
        };
        let (role, mut content) = g.message(nth, time);
        if summary {
            content = vec![
                Part::text(format!(
                    "Summary of the conversation so far. {}",
                    g.text(800, 1_600)
                )),
                Part::finish(FinishReason::EndTurn, time),
            ];
        }
        let role = if summary { Role::Assistant } else { role };
        limit_batch.push((s, (role, content.clone()), time));
        let msg = message(&ids[s], role, content, time, summary);
        if summary {
            summaries[s - 1] = Some(msg.id.clone());
        }
        parts += msg.parts.len();
        for p in &msg.parts {
            payload_bytes += p.part.to_json()?.len();
        }
        batch.push(msg);
        if batch.len() == 1_000 || n + 1 == owner.len() {
            db.write(|tx| -> scribe_message::Result<()> {
                for msg in &batch {
                    store::insert_message(tx, msg)?;
                }
                Ok(())
            })?;
            batch.clear();
            let tx = limit.unchecked_transaction()?;
            for (s, draft, time) in limit_batch.drain(..) {
                crate::limit::append_at(&tx, &limit_ids[s], &draft, time)?;
            }
            tx.commit()?;
        }
    }
    for (i, summary) in summaries.into_iter().enumerate() {
        let summary = summary.ok_or("summary_back is larger than a context session")?;
        sessions.update(&ids[i + 1], |s| {
            s.summary_message_id = Some(summary.clone());
        })?;
    }
    // Both search indexes complete, as the limit's is, before anything is measured.
    db.index_pending_with(scribe_db::IndexBatch {
        max_parts: 20_000,
        max_time: std::time::Duration::from_secs(1),
    })?;
    for file in [path, limit_path] {
        let conn = rusqlite::Connection::open(file)?;
        conn.query_row("PRAGMA wal_checkpoint(TRUNCATE)", [], |_| Ok(()))?;
    }
    Ok(Corpus {
        path: path.to_owned(),
        limit_path: limit_path.to_owned(),
        limit_load_session: limit_ids[0].clone(),
        db,
        load_session: ids[0].clone(),
        long_session: ids[1].clone(),
        short_session: ids[2].clone(),
        messages: owner.len(),
        parts,
        payload_bytes,
        build_time: started.elapsed(),
    })
}

/// A finished message as stored by an agent: ids, times, usage of assistant turns.
pub fn message(
    session: &str,
    role: Role,
    content: Vec<Part>,
    time: i64,
    is_summary: bool,
) -> Message {
    let assistant = role == Role::Assistant;
    let parts = content
        .into_iter()
        .zip(0..)
        .map(|(part, position)| StoredPart {
            id: new_id(Prefix::Part),
            position,
            part,
            created_at: time,
            updated_at: time,
        })
        .collect();
    Message {
        id: new_id(Prefix::Message),
        session_id: session.to_owned(),
        parent_id: None,
        role,
        agent: Some("build".to_owned()),
        provider: assistant.then(|| "anthropic".to_owned()),
        model: assistant.then(|| "claude-bench".to_owned()),
        finish_reason: Some(FinishReason::EndTurn),
        is_summary,
        usage: if assistant {
            TokenUsage {
                input: 12_000,
                output: 300,
                ..TokenUsage::default()
            }
        } else {
            TokenUsage::default()
        },
        cost_usd: if assistant { 0.01 } else { 0.0 },
        error: None,
        created_at: time,
        updated_at: time,
        finished_at: Some(time),
        parts,
    }
}
