//! What the slowest 1% of single appends are (stop 31): the bench's append row
//! (`scribe-bench --only append`: 10,000 one-text-part messages, Scribe and the limit
//! alternating every 100, Scribe's queue drained and its background checkpoint waited for
//! after each of its chunks), with every
//! append classified.
//!
//! - Scribe: whether the append ran a WAL checkpoint after its commit
//!   ([`Database::checkpoints_run`] moved), and whether the background indexer indexed
//!   while it ran (the backlog, read after each append outside its timing, grew by less
//!   than the one part it queued).
//! - The limit: a WAL hook that does exactly what SQLite's auto-checkpoint does (a
//!   passive checkpoint once a commit leaves 1,000 frames or more) and notes whether it
//!   ran and how many frames the commit wrote (an FTS5 segment merge writes many).
//!
//! Prints, for each side, the p50/p99/max and how the appends at or over its p99 split.
//! Usage: `N=<appends> CHUNK=<per chunk> append_tail <DIR>`; the options of Scribe's
//! side from the environment: `INDEX_DELAY_MS`, `CHECKPOINT_EVERY`.
#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

use std::cell::Cell;
use std::os::raw::c_int;
use std::sync::Arc;
use std::time::{Duration, Instant};

use rusqlite::hooks::Wal;
use scribe_db::{Database, Options};
use scribe_message::{MessageService, NewMessage, Part, Role};
use scribe_session::{NewSession, SessionService};

type Error = Box<dyn std::error::Error + Send + Sync>;
type Result<T> = std::result::Result<T, Error>;

mod append {
    pub type Draft = (scribe_message::Role, Vec<scribe_message::Part>);
}

#[path = "../src/limit.rs"]
#[allow(dead_code)]
mod limit;

#[path = "../src/data.rs"]
#[allow(dead_code)]
mod data;

thread_local! {
    static FRAMES: Cell<i32> = const { Cell::new(0) };
    static CHECKPOINTED: Cell<bool> = const { Cell::new(false) };
}

/// SQLite's default WAL hook (`sqlite3WalDefaultHook`), noting what it did.
fn limit_hook(wal: &Wal, frames: c_int) -> rusqlite::Result<()> {
    FRAMES.with(|c| c.set(frames));
    if frames >= 1000 {
        CHECKPOINTED.with(|c| c.set(true));
        let _ = wal.checkpoint();
    }
    Ok(())
}

fn env(name: &str) -> Option<u64> {
    std::env::var(name)
        .ok()
        .map(|v| v.parse().expect("a number"))
}

#[derive(Clone, Copy)]
struct Sample {
    time: Duration,
    checkpoint: bool,
    /// Scribe: the indexer ran meanwhile; the limit: frames the commit wrote.
    other: i64,
}

fn summary(name: &str, samples: &[Sample], other_name: &str, other_is_count: bool) {
    let mut sorted: Vec<Duration> = samples.iter().map(|s| s.time).collect();
    sorted.sort_unstable();
    let rank =
        |p: f64| sorted[((p * sorted.len() as f64).ceil() as usize).clamp(1, sorted.len()) - 1];
    let p99 = rank(0.99);
    let ms = |d: Duration| d.as_secs_f64() * 1000.0;
    let slow: Vec<&Sample> = samples.iter().filter(|s| s.time >= p99).collect();
    let all_ck = samples.iter().filter(|s| s.checkpoint).count();
    let slow_ck = slow.iter().filter(|s| s.checkpoint).count();
    let ck_times: Vec<f64> = samples
        .iter()
        .filter(|s| s.checkpoint)
        .map(|s| ms(s.time))
        .collect();
    let ck_mean = ck_times.iter().sum::<f64>() / ck_times.len().max(1) as f64;
    let plain: Vec<Duration> = samples
        .iter()
        .filter(|s| !s.checkpoint)
        .map(|s| s.time)
        .collect();
    let mut plain_sorted = plain.clone();
    plain_sorted.sort_unstable();
    let plain_p99 = plain_sorted
        .get(((0.99 * plain_sorted.len() as f64).ceil() as usize).saturating_sub(1))
        .copied()
        .unwrap_or_default();
    println!(
        "{name}: p50 {:.3} ms, p99 {:.3} ms, max {:.2} ms; {} appends ran a checkpoint (mean {:.2} ms), {} of the {} at/over p99; p99 of the rest {:.3} ms",
        ms(rank(0.5)),
        ms(p99),
        ms(*sorted.last().unwrap()),
        all_ck,
        ck_mean,
        slow_ck,
        slow.len(),
        ms(plain_p99),
    );
    if other_is_count {
        let slow_other = slow.iter().filter(|s| s.other > 0 && !s.checkpoint).count();
        let all_other = samples.iter().filter(|s| s.other > 0).count();
        println!(
            "  {other_name}: {all_other} appends, {slow_other} of the slow ones without a checkpoint"
        );
    } else {
        let mut frames: Vec<i64> = samples.iter().map(|s| s.other).filter(|f| *f > 0).collect();
        frames.sort_unstable();
        let slow_frames: Vec<i64> = slow
            .iter()
            .filter(|s| !s.checkpoint)
            .map(|s| s.other)
            .collect();
        println!(
            "  {other_name}: median {} frames per commit; slow ones without a checkpoint: {:?}",
            frames.get(frames.len() / 2).copied().unwrap_or(0),
            slow_frames
        );
    }
    let slow_plain: Vec<String> = slow
        .iter()
        .filter(|s| !s.checkpoint)
        .map(|s| format!("{:.1}", ms(s.time)))
        .collect();
    println!("  slow without a checkpoint (ms): {}", slow_plain.join(" "));
}

fn main() -> Result<()> {
    let dir = std::path::PathBuf::from(std::env::args().nth(1).expect("usage: append_tail DIR"));
    let count = env("N").unwrap_or(10_000) as usize;
    let chunk = env("CHUNK").unwrap_or(100) as usize;
    std::fs::create_dir_all(&dir)?;
    let scribe_path = dir.join("tail-scribe.db");
    let limit_path = dir.join("tail-limit.db");
    for path in [&scribe_path, &limit_path] {
        for suffix in ["", "-wal", "-shm", "-writers"] {
            let _ = std::fs::remove_file(format!("{}{suffix}", path.display()));
        }
    }
    let mut options = Options::default();
    if let Some(ms) = env("INDEX_DELAY_MS") {
        options.index_delay = Duration::from_millis(ms);
    }
    if let Some(n) = env("CHECKPOINT_EVERY") {
        options.checkpoint_every = n;
    }
    let db = Arc::new(Database::open_with(&scribe_path, options)?);
    let session = SessionService::new(Arc::clone(&db))
        .create(NewSession::titled("tail"))?
        .id;
    let svc = MessageService::new(Arc::clone(&db));
    let events = svc.subscribe();
    let lim = limit::open(&limit_path, Duration::from_secs(5))?;
    lim.wal_hook(Some(limit_hook));
    let lim_session = limit::create_session(&lim, "tail")?;
    let mut g = data::Gen::new(42);
    let work: Vec<append::Draft> = (0..count)
        .map(|_| (Role::Assistant, vec![Part::text(g.text(200, 2_000))]))
        .collect();
    let (mut scribe, mut lim_samples) = (Vec::new(), Vec::new());
    let wal = |path: &std::path::Path| {
        std::fs::metadata(format!("{}-wal", path.display())).map_or(0, |m| m.len())
    };
    let (mut scribe_wal, mut limit_wal) = (0, 0);
    for (i, drafts) in work.chunks(chunk).enumerate() {
        for side in 0..2 {
            if (i + side) % 2 == 0 {
                let mut backlog = db.search_backlog()?;
                for (role, parts) in drafts.iter().cloned() {
                    let checkpoints = db.checkpoints_run();
                    let t = Instant::now();
                    svc.create(NewMessage::new(&session, role, parts))?;
                    let time = t.elapsed();
                    for event in events.try_iter() {
                        let _ = std::hint::black_box(event);
                    }
                    let now = db.search_backlog()?;
                    scribe.push(Sample {
                        time,
                        checkpoint: db.checkpoints_run() != checkpoints,
                        other: i64::from(now < backlog + 1),
                    });
                    backlog = now;
                    scribe_wal = scribe_wal.max(wal(&scribe_path));
                }
                db.index_pending()?;
                db.wait_for_checkpoint();
            } else {
                for draft in drafts {
                    let before = FRAMES.with(Cell::get);
                    CHECKPOINTED.with(|c| c.set(false));
                    let t = Instant::now();
                    limit::append(&lim, &lim_session, draft)?;
                    let time = t.elapsed();
                    let after = FRAMES.with(Cell::get);
                    let checkpoint = CHECKPOINTED.with(Cell::get);
                    lim_samples.push(Sample {
                        time,
                        checkpoint,
                        other: i64::from(after - before),
                    });
                    limit_wal = limit_wal.max(wal(&limit_path));
                }
            }
        }
    }
    summary("scribe", &scribe, "indexer ran meanwhile", true);
    summary("limit", &lim_samples, "frames", false);
    println!(
        "peak -wal file: scribe {:.1} MiB, limit {:.1} MiB",
        scribe_wal as f64 / 1048576.0,
        limit_wal as f64 / 1048576.0
    );
    Ok(())
}
