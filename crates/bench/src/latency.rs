//! Time from commit to searchable. A writer appends one-text-part messages as fast as it
//! can while a reader (its own read-only connection, as another process would have) polls
//! the search queue every millisecond; a message's latency is the time from its commit
//! until its part has left the queue, i.e. is in the indexes without anyone searching.
//! (A search indexes what is queued before it runs, so it never misses a committed
//! message; the second figure checks that for searches right after each commit.)

use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use rusqlite::{Connection, OpenFlags, OptionalExtension};
use scribe_db::Database;
use scribe_message::{MessageService, NewMessage, Part, Role, SearchOptions};
use serde::Serialize;

use crate::Result;
use crate::append::{fresh_db, one_text_drafts};
use crate::stats::{max, ms, percentile};

/// Commit-to-indexed figures.
#[derive(Debug, Clone, Serialize)]
pub struct LatencyResult {
    /// Messages appended.
    pub messages: usize,
    /// Median, ms.
    pub p50_ms: f64,
    /// 99th percentile, ms.
    pub p99_ms: f64,
    /// Longest, ms.
    pub max_ms: f64,
    /// Searches run right after a commit, in the writing process.
    pub searched: usize,
    /// How many of them found the message just committed.
    pub found: usize,
}

/// Runs `count` appends with the poller, then `searches` commit-then-search rounds.
pub fn run(dir: &Path, seed: u64, count: usize, searches: usize) -> Result<LatencyResult> {
    let path = dir.join("latency.db");
    let session = fresh_db(&path, "latency")?;
    let db = Arc::new(Database::open(&path)?);
    let svc = MessageService::new(Arc::clone(&db));
    let stop = Arc::new(AtomicBool::new(false));
    // (when, lowest part seq still queued; i64::MAX when none is)
    let polls: Arc<Mutex<Vec<(Instant, i64)>>> = Arc::new(Mutex::new(Vec::new()));
    let poller = {
        let (stop, polls, path) = (Arc::clone(&stop), Arc::clone(&polls), path.clone());
        std::thread::spawn(move || -> Result<()> {
            let conn = Connection::open_with_flags(&path, OpenFlags::SQLITE_OPEN_READ_ONLY)?;
            let mut stmt = conn.prepare("SELECT min(seq) FROM search_queue")?;
            while !stop.load(Ordering::Relaxed) {
                let low: Option<i64> = stmt.query_row([], |r| r.get(0)).optional()?.flatten();
                let at = Instant::now();
                polls
                    .lock()
                    .map_err(|_| "poller lock poisoned")?
                    .push((at, low.unwrap_or(i64::MAX)));
                std::thread::sleep(Duration::from_millis(1));
            }
            Ok(())
        })
    };
    let reader = Connection::open_with_flags(&path, OpenFlags::SQLITE_OPEN_READ_ONLY)?;
    let mut commits = Vec::with_capacity(count);
    for (role, parts) in one_text_drafts(seed ^ 0x1a7e, count) {
        let msg = svc.create(NewMessage::new(&session, role, parts))?;
        let at = Instant::now();
        let seq: i64 = reader.query_row(
            "SELECT seq FROM parts WHERE id = ?1",
            [&msg.parts[0].id],
            |r| r.get(0),
        )?;
        commits.push((at, seq));
    }
    // Wait until the background indexer has taken everything (bounded).
    let deadline = Instant::now() + Duration::from_secs(60);
    while db.search_backlog()? > 0 && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(5));
    }
    std::thread::sleep(Duration::from_millis(5));
    stop.store(true, Ordering::Relaxed);
    poller.join().map_err(|_| "poller panicked")??;
    let polls = polls.lock().map_err(|_| "poller lock poisoned")?.clone();
    let mut latencies = Vec::with_capacity(count);
    for (committed, seq) in &commits {
        let indexed = polls
            .iter()
            .find(|(at, low)| at >= committed && *low > *seq)
            .map(|(at, _)| *at)
            .ok_or("a message was never indexed by the background indexer")?;
        latencies.push(indexed.saturating_duration_since(*committed));
    }
    let mut found = 0;
    for i in 0..searches {
        let word = format!("zqx{i}marker");
        svc.create(NewMessage::new(
            &session,
            Role::User,
            vec![Part::text(format!("committed then searched: {word}"))],
        ))?;
        if !svc.search(&word, &SearchOptions::default())?.is_empty() {
            found += 1;
        }
    }
    Ok(LatencyResult {
        messages: count,
        p50_ms: ms(percentile(&latencies, 0.5)),
        p99_ms: ms(percentile(&latencies, 0.99)),
        max_ms: ms(max(&latencies)),
        searched: searches,
        found,
    })
}
