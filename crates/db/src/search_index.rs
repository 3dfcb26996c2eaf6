//! The search indexer: fills both full-text indexes from `search_queue`, after the writes
//! that queued the parts (schema V7; `sql/migrations/sqlite/V7__search_queue.sql` states
//! the invariant the triggers and this module keep together).
//!
//! A write commits its parts and, by trigger, queues the searchable ones. Indexing runs
//! in batches, each its own short write transaction bounded by a number of parts and a
//! time ([`IndexBatch`]):
//!
//! - in the writing process, on a background thread that the first committed write after
//!   its last batch wakes ([`Options::index_delay`](crate::Options::index_delay) later, or
//!   once a batch's worth of writes came, so that one batch carries many writes);
//! - in any process that searches, before the search ([`Database::index_pending`]), so a
//!   search finds every message committed before it started, whoever wrote it;
//! - when a database is opened read-write, for what a crashed or short-lived process left
//!   (the background thread starts with it).
//!
//! A text or reasoning part that is still being streamed (it has `time.start` but no
//! `time.end`, its message is not finished, and it changed less than
//! [`STREAM_SETTLE_MS`] ago) stays queued until it settles, so that its flushes do not
//! index and un-index it again and again; a search finds its text once it has settled.
//!
//! The statements here are SQLite's own (FTS5 tables and commands) and are not part of the
//! generated query layer, which both dialects share: PostgreSQL keeps its GIN indexes in
//! the write (see `sql/migrations/postgres/V7__search_queue.sql`).

use std::sync::{Arc, Condvar, Mutex, MutexGuard, PoisonError};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use rusqlite::types::Type;
use rusqlite::{Connection, OptionalExtension, params};

use crate::checkpoint::AutoCheckpoint;
use crate::clock::Clock;
use crate::database::{Options, gate_wait, retry};
use crate::gate::Gate;
use crate::search::is_spaceless_script;
use crate::tx::SqliteTx;
use crate::{Database, Result};

/// How long after its last change a part that looks streamed (see the module doc) is
/// indexed anyway: a stream that stopped for this long (its process died, say) has
/// settled.
pub const STREAM_SETTLE_MS: i64 = 30_000;

/// Queued parts that may be indexed now (`?1`: everything, also parts being streamed;
/// `?2`: parts changed before this time count as settled; `?3`: at most this many), in
/// queue order. A queued part that no longer exists or is no longer searchable is taken
/// too, so that it leaves the queue.
///
/// The tests are a CASE so that they run in this order, cheapest first: as one chain of
/// ORs, SQLite (3.51) evaluated the JSON tests first, a parse of every queued part's JSON
/// per look, although nearly every part is settled by its age or its finished message.
const CANDIDATES: &str = "SELECT q.seq FROM search_queue AS q
LEFT JOIN parts AS p ON p.seq = q.seq
WHERE CASE
    WHEN ?1 OR p.seq IS NULL OR p.type NOT IN ('text', 'reasoning') OR p.updated_at < ?2
        THEN 1
    WHEN EXISTS (SELECT 1 FROM messages AS m
                 WHERE m.id = p.message_id AND m.finished_at IS NOT NULL)
        THEN 1
    ELSE NOT json_valid(p.data)
        OR p.data ->> '$.time.start' IS NULL
        OR p.data ->> '$.time.end' IS NOT NULL
END
ORDER BY q.seq
LIMIT ?3";

/// The text a part's index rows hold (the word index's content view), and whether its JSON
/// is damaged. The trigram index's view adds a character class GLOB, which costs more per
/// part than indexing it; [`in_trigram_index`] decides the same in Rust.
const TEXT: &str = "SELECT search_text, damaged FROM parts_search WHERE seq = ?1";
const INSERT_WORDS: &str = "INSERT INTO parts_fts (rowid, search_text) VALUES (?1, ?2)";
const INSERT_TRIGRAMS: &str = "INSERT INTO parts_fts_trigram (rowid, search_text) VALUES (?1, ?2)";
const DEQUEUE: &str = "DELETE FROM search_queue WHERE seq = ?1";
const WAITING: &str = "SELECT count(*) FROM search_queue";

/// How much one indexing transaction may do: at most `max_parts` parts, and no new part
/// once `max_time` has passed (at least one part is always indexed).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct IndexBatch {
    /// Parts per transaction.
    pub max_parts: usize,
    /// Time spent adding parts per transaction (the commit comes after).
    pub max_time: Duration,
}

impl IndexBatch {
    /// Bounds for catching up before a search or after an open: larger transactions,
    /// still short enough that other writers get their turn.
    pub const CATCH_UP: IndexBatch = IndexBatch {
        max_parts: 5_000,
        max_time: Duration::from_millis(50),
    };

    /// Bounds for indexing after a bulk import: few, large transactions (each new FTS5
    /// segment costs merging later; a batch of 20,000 parts takes a few hundred ms).
    /// Batches with these bounds also raise FTS5's in-memory term buffer (`hashsize`,
    /// [`BULK_HASH_SIZE`]) for their transaction, so that each writes one segment per
    /// index instead of one per megabyte of terms.
    pub const BULK: IndexBatch = IndexBatch {
        max_parts: 20_000,
        max_time: Duration::from_secs(1),
    };
}

/// FTS5's in-memory term buffer during a [`IndexBatch::BULK`] batch, bytes. FTS5 writes
/// its pending terms out as a new segment whenever they pass `hashsize` (1 MiB by
/// default), and merges segments as they pile up; a bulk batch of 20,000 parts holds
/// tens of megabytes of terms, so at the default it writes dozens of small segments and
/// merges them again. The setting is FTS5's own `hashsize` (kept in `parts_fts_config`):
/// a batch sets it first and puts the default back before it commits, so no other
/// writer, and no later transaction, ever sees it changed.
pub const BULK_HASH_SIZE: i64 = 16 * 1024 * 1024;

/// FTS5's `hashsize` while [`index_after`] indexes a bulk import's batch (about 10,000
/// messages, tens of megabytes of terms): one segment per index and batch.
const NEW_PARTS_HASH_SIZE: i64 = 32 * 1024 * 1024;

/// FTS5's default `hashsize`.
const DEFAULT_HASH_SIZE: i64 = 1024 * 1024;

const SET_HASH_SIZE: [&str; 2] = [
    "INSERT INTO parts_fts (parts_fts, rank) VALUES ('hashsize', ?1)",
    "INSERT INTO parts_fts_trigram (parts_fts_trigram, rank) VALUES ('hashsize', ?1)",
];

fn set_hash_size(conn: &Connection, bytes: i64) -> Result<()> {
    for sql in SET_HASH_SIZE {
        conn.prepare_cached(sql)?.execute([bytes])?;
    }
    Ok(())
}

/// What [`Database::index_pending`] did.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct IndexRun {
    /// Parts that left the queue (indexed, or gone).
    pub indexed: u64,
    /// Transactions it took.
    pub batches: u64,
    /// Parts still queued afterwards (being streamed, or queued meanwhile).
    pub waiting: u64,
}

/// Indexes one batch of queued parts on `conn`, which must be inside a write transaction;
/// returns how many parts left the queue. `everything` also takes parts being streamed.
pub(crate) fn index_batch(
    conn: &Connection,
    now: i64,
    bounds: IndexBatch,
    everything: bool,
) -> Result<usize> {
    let seqs = candidates(conn, now, bounds.max_parts, everything)?;
    if seqs.is_empty() {
        return Ok(0);
    }
    let started = Instant::now();
    let mut text = conn.prepare_cached(TEXT)?;
    let mut words = conn.prepare_cached(INSERT_WORDS)?;
    let mut trigrams = conn.prepare_cached(INSERT_TRIGRAMS)?;
    let mut dequeue = conn.prepare_cached(DEQUEUE)?;
    let mut done = 0;
    for seq in seqs {
        if done > 0 && started.elapsed() >= bounds.max_time {
            break;
        }
        let row: Option<(Option<String>, bool)> = text
            .query_row([seq], |r| Ok((r.get(0)?, r.get(1)?)))
            .optional()?;
        if let Some((text, damaged)) = row {
            words.execute(params![seq, text])?;
            if in_trigram_index(text.as_deref(), damaged) {
                trigrams.execute(params![seq, text])?;
            }
        }
        dequeue.execute([seq])?;
        done += 1;
    }
    Ok(done)
}

/// The queued parts after `seq` (the parts a bulk write just inserted), with their text:
/// one range scan instead of a candidates query and a lookup per part. A queued part that
/// is no longer searchable has no text row and just leaves the queue, as in
/// [`index_batch`].
const NEW_TEXT: &str = "SELECT s.seq, s.search_text, s.damaged FROM parts_search AS s
WHERE s.seq > ?1 AND EXISTS (SELECT 1 FROM search_queue AS q WHERE q.seq = s.seq)
ORDER BY s.seq";
const DEQUEUE_AFTER: &str = "DELETE FROM search_queue WHERE seq > ?1";
const LAST_PART: &str = "SELECT coalesce(max(seq), 0) FROM parts";

/// The highest `parts.seq` so far, on `conn` inside a write transaction: the parts that
/// transaction inserts from then on have higher ones (see [`index_after`]).
pub(crate) fn last_part(conn: &Connection) -> Result<i64> {
    Ok(conn
        .prepare_cached(LAST_PART)?
        .query_row([], |r| r.get(0))?)
}

/// Indexes every queued part whose `seq` is above `after` and takes it off the queue, on
/// `conn` inside the write transaction that inserted those parts (a bulk import's: what
/// [`last_part`] said before its inserts). Streamed parts are indexed too (with their
/// current text: the V7 invariant holds either way). FTS5 gets a [`NEW_PARTS_HASH_SIZE`]
/// term buffer for the call, so a batch writes one segment per index; the default is back
/// before it returns. Returns how many parts left the queue.
pub(crate) fn index_after(conn: &Connection, after: i64) -> Result<u64> {
    set_hash_size(conn, NEW_PARTS_HASH_SIZE)?;
    {
        let mut select = conn.prepare_cached(NEW_TEXT)?;
        let mut words = conn.prepare_cached(INSERT_WORDS)?;
        let mut trigrams = conn.prepare_cached(INSERT_TRIGRAMS)?;
        let mut found = select.query([after])?;
        while let Some(row) = found.next()? {
            let seq: i64 = row.get(0)?;
            // Borrowed from the row: the text goes to FTS5 without a copy.
            let text = row.get_ref(1)?.as_str_or_null().map_err(|err| {
                rusqlite::Error::FromSqlConversionFailure(1, Type::Text, Box::new(err))
            })?;
            let damaged: bool = row.get(2)?;
            words.execute(params![seq, text])?;
            if in_trigram_index(text, damaged) {
                trigrams.execute(params![seq, text])?;
            }
        }
    }
    set_hash_size(conn, DEFAULT_HASH_SIZE)?;
    let dequeued = conn.prepare_cached(DEQUEUE_AFTER)?.execute([after])?;
    Ok(dequeued as u64)
}

/// Whether the trigram index holds a part with this text: the membership rule of the view
/// `parts_search_trigram` (text with a spaceless-script character, or damaged JSON).
pub(crate) fn in_trigram_index(text: Option<&str>, damaged: bool) -> bool {
    // Every spaceless range starts at U+0E00 or later, whose UTF-8 lead byte is 0xE0 or
    // more: most text has no such byte, and a byte scan is far cheaper than decoding.
    damaged
        || text.is_some_and(|t| t.bytes().any(|b| b >= 0xE0) && t.chars().any(is_spaceless_script))
}

fn candidates(conn: &Connection, now: i64, limit: usize, everything: bool) -> Result<Vec<i64>> {
    let limit = i64::try_from(limit).unwrap_or(i64::MAX);
    let mut stmt = conn.prepare_cached(CANDIDATES)?;
    let rows = stmt.query_map(
        params![everything, now.saturating_sub(STREAM_SETTLE_MS), limit],
        |r| r.get(0),
    )?;
    Ok(rows.collect::<rusqlite::Result<_>>()?)
}

/// Whether anything queued may be indexed now (a read; no lock taken).
fn has_candidates(conn: &Connection, now: i64) -> Result<bool> {
    Ok(!candidates(conn, now, 1, false)?.is_empty())
}

/// Parts waiting in the queue.
pub(crate) fn waiting(conn: &Connection) -> Result<u64> {
    let n: i64 = conn.query_row(WAITING, [], |r| r.get(0))?;
    Ok(u64::try_from(n).unwrap_or(0))
}

/// Runs batches on the writer connection `writer` until nothing settled is left (or
/// `stop` says so); each batch is its own `BEGIN IMMEDIATE` transaction, taken in its turn
/// through the writers' `gate` as a write is, and retried like a write when another
/// process holds the lock.
#[allow(clippy::too_many_arguments)] // what the indexer thread and a search each hold, passed flat
pub(crate) fn index_until_done(
    writer: &Mutex<Connection>,
    gate: &Gate,
    auto_checkpoint: Option<&AutoCheckpoint>,
    options: &Options,
    clock: &Clock,
    bounds: IndexBatch,
    stop: &dyn Fn() -> bool,
    progress: &mut dyn FnMut(&IndexRun),
) -> Result<IndexRun> {
    let mut report = IndexRun::default();
    loop {
        if stop() {
            break;
        }
        // Looking first needs no lock: most wake-ups (a streamed flush) find nothing.
        let any = has_candidates(&lock(writer), clock.now())?;
        let done = if !any {
            0
        } else {
            // The gate before the connection, as in `Database::write` (never the other way
            // round: a thread holding the connection never waits for the gate).
            let Some(_entered) = gate.enter(gate_wait(options)) else {
                return Err(crate::Error::Locked);
            };
            let conn = lock(writer);
            // Looked at again under the lock: a pause that came while this thread waited
            // for it starts no batch ([`Database::pause_background_indexing`]).
            if stop() {
                break;
            }
            retry(options, || {
                // BEGIN and COMMIT from the statement cache, as every write's.
                let tx = SqliteTx::immediate(&conn)?;
                let bulk = bounds == IndexBatch::BULK;
                if bulk {
                    set_hash_size(tx.conn(), BULK_HASH_SIZE)?;
                }
                let done = index_batch(tx.conn(), clock.now(), bounds, false)?;
                if bulk {
                    set_hash_size(tx.conn(), DEFAULT_HASH_SIZE)?;
                }
                tx.commit()?;
                Ok(done)
            })?
        };
        // The auto-checkpoint this batch's commit was due, with the gate let go: on the
        // checkpoint's own thread, or here when that cannot take it.
        let frames = crate::checkpoint::take_committed_frames();
        if crate::database::deferred_checkpoint(options)
            && crate::checkpoint::deferred_checkpoint_due(frames)
            && !auto_checkpoint.is_some_and(|auto| auto.take(frames))
            && let Err(err) =
                lock(writer).query_row("PRAGMA wal_checkpoint(PASSIVE)", [], |_| Ok(()))
        {
            tracing::debug!(error = %err, "passive checkpoint failed");
        }
        if done == 0 {
            break;
        }
        report.indexed += done as u64;
        report.batches += 1;
        progress(&report);
    }
    report.waiting = waiting(&lock(writer))?;
    Ok(report)
}

fn lock(writer: &Mutex<Connection>) -> MutexGuard<'_, Connection> {
    // A panic inside a transaction rolled it back; the connection is still sound.
    writer.lock().unwrap_or_else(PoisonError::into_inner)
}

impl Database {
    /// Indexes every queued part that may be indexed now (everything but parts being
    /// streamed), in transactions bounded by [`IndexBatch::CATCH_UP`]; what a search runs
    /// first, so that it finds every message committed before it started. Cheap when
    /// nothing is queued: one read, no lock. Does nothing on a read-only database (its
    /// searches find what was indexed; see [`Database::open_read_only`]).
    pub fn index_pending(&self) -> Result<IndexRun> {
        self.index_pending_with(IndexBatch::CATCH_UP)
    }

    /// [`Database::index_pending`] with other bounds per transaction (a bulk import uses
    /// larger ones).
    pub fn index_pending_with(&self, bounds: IndexBatch) -> Result<IndexRun> {
        self.index_pending_with_progress(bounds, &mut |_| {})
    }

    /// [`Database::index_pending_with`], calling `progress` after every transaction with
    /// the totals so far.
    pub fn index_pending_with_progress(
        &self,
        bounds: IndexBatch,
        progress: &mut dyn FnMut(&IndexRun),
    ) -> Result<IndexRun> {
        let Some(sqlite) = self.sqlite().filter(|s| s.searchable_schema()) else {
            return Ok(IndexRun::default());
        };
        if self.is_read_only() {
            return Ok(IndexRun::default());
        }
        index_until_done(
            sqlite.writer_handle(),
            sqlite.gate(),
            sqlite.auto_checkpoint(),
            self.options(),
            self.clock(),
            bounds,
            &|| false,
            progress,
        )
    }

    /// Keeps this process's background indexer from starting new batches until the guard
    /// is dropped (a batch under way finishes first). A bulk import holds it while it
    /// stores, then indexes everything in a few large transactions, which costs less than
    /// many small ones between its writes.
    pub fn pause_background_indexing(&self) -> IndexingPaused {
        match self.sqlite().and_then(|s| s.indexer()) {
            Some(indexer) => indexer.pause(),
            None => IndexingPaused { signal: None },
        }
    }

    /// Parts waiting to be indexed (including parts being streamed).
    pub fn search_backlog(&self) -> Result<u64> {
        if !self.sqlite().is_some_and(|s| s.searchable_schema()) {
            return Ok(0);
        }
        self.read_sqlite("the search backlog", waiting)
    }
}

/// The background indexer of a read-write file database: a thread woken by the first
/// committed write after its last batch, which indexes what is queued
/// [`Options::index_delay`] later (sooner when a batch's worth of writes came), in batches
/// of [`Options::index_batch`].
#[derive(Debug)]
pub(crate) struct Indexer {
    signal: Arc<Signal>,
    thread: Option<JoinHandle<()>>,
    /// [`IndexBatch::max_parts`]: this many writes end the wait for more.
    batch: u64,
}

#[derive(Debug, Default)]
struct Signal {
    state: Mutex<State>,
    wake: Condvar,
}

#[derive(Debug, Default)]
struct State {
    /// Writes announced so far.
    writes: u64,
    /// Writes announced when the thread last started indexing.
    seen: u64,
    /// Whether this process has written through the database at all.
    wrote: bool,
    /// Open [`IndexingPaused`] guards.
    paused: usize,
    stop: bool,
}

/// How long closing a database may spend indexing what its own writes queued.
const CLOSE_BUDGET: Duration = Duration::from_secs(2);

impl Indexer {
    /// Starts the thread; it looks at the queue once right away (what a previous process
    /// left).
    pub(crate) fn start(
        writer: Arc<Mutex<Connection>>,
        gate: Arc<Gate>,
        auto_checkpoint: Option<Arc<AutoCheckpoint>>,
        options: Options,
    ) -> std::io::Result<Indexer> {
        let batch = options.index_batch.max_parts as u64;
        let signal = Arc::new(Signal::default());
        // Looks at the queue once right away (what a previous process left), without
        // counting as a write of this process.
        {
            let mut state = lock_state(&signal);
            state.writes = 1;
            state.seen = 0;
        }
        let thread = {
            let signal = Arc::clone(&signal);
            std::thread::Builder::new()
                .name("scribe-indexer".to_owned())
                .spawn(move || {
                    run(
                        &signal,
                        &writer,
                        &gate,
                        auto_checkpoint.as_deref(),
                        &options,
                    )
                })?
        };
        Ok(Indexer {
            signal,
            thread: Some(thread),
            batch,
        })
    }

    /// A write committed: wake the thread if it waits for this write (the first since
    /// it last started indexing, or the one that fills a batch). Waking it for every
    /// write cost a thread switch per write (5-10 us a streamed flush) to no effect.
    pub(crate) fn notify(&self) {
        let wake = {
            let mut state = lock_state(&self.signal);
            state.writes += 1;
            state.wrote = true;
            let new = state.writes - state.seen;
            new == 1 || new == self.batch
        };
        if wake {
            self.signal.wake.notify_one();
        }
    }
}

/// While held, the background indexer of this process does not start new batches (see
/// [`Database::pause_background_indexing`]).
#[derive(Debug)]
pub struct IndexingPaused {
    signal: Option<Arc<Signal>>,
}

impl Drop for IndexingPaused {
    fn drop(&mut self) {
        if let Some(signal) = &self.signal {
            lock_state(signal).paused -= 1;
            signal.wake.notify_one();
        }
    }
}

impl Indexer {
    fn pause(&self) -> IndexingPaused {
        lock_state(&self.signal).paused += 1;
        IndexingPaused {
            signal: Some(Arc::clone(&self.signal)),
        }
    }
}

impl Drop for Indexer {
    fn drop(&mut self) {
        lock_state(&self.signal).stop = true;
        self.signal.wake.notify_one();
        if let Some(thread) = self.thread.take() {
            // The thread finishes the batch it is in; if this process wrote at all, it
            // indexes what is queued first (for at most CLOSE_BUDGET), so that a process
            // that can only read the file still finds what this one wrote. What
            // is left waits for the next process that opens the file or searches it.
            let _ = thread.join();
        }
    }
}

fn lock_state(signal: &Signal) -> MutexGuard<'_, State> {
    signal.state.lock().unwrap_or_else(PoisonError::into_inner)
}

fn run(
    signal: &Signal,
    writer: &Mutex<Connection>,
    gate: &Gate,
    auto_checkpoint: Option<&AutoCheckpoint>,
    options: &Options,
) {
    loop {
        {
            let mut state = lock_state(signal);
            while !state.stop && (state.writes == state.seen || state.paused > 0) {
                state = signal
                    .wake
                    .wait(state)
                    .unwrap_or_else(PoisonError::into_inner);
            }
            if state.stop {
                let wrote = state.wrote;
                drop(state);
                if wrote {
                    let deadline = Instant::now() + CLOSE_BUDGET;
                    let _ = index_until_done(
                        writer,
                        gate,
                        auto_checkpoint,
                        options,
                        &options.clock,
                        options.index_batch,
                        &|| Instant::now() >= deadline,
                        &mut |_| {},
                    );
                }
                return;
            }
            let seen = state.seen;
            // Let more writes join this batch, unless enough are already waiting.
            let deadline = Instant::now() + options.index_delay;
            while !state.stop
                && (state.paused > 0
                    || (state.writes - seen < options.index_batch.max_parts as u64
                        && Instant::now() < deadline))
            {
                let left = deadline.saturating_duration_since(Instant::now());
                state = signal
                    .wake
                    .wait_timeout(state, left)
                    .unwrap_or_else(PoisonError::into_inner)
                    .0;
            }
            if state.stop {
                // Indexed on the way out, above.
                continue;
            }
            state.seen = state.writes;
        }
        let stop = || {
            let state = lock_state(signal);
            state.stop || state.paused > 0
        };
        if let Err(err) = index_until_done(
            writer,
            gate,
            auto_checkpoint,
            options,
            &options.clock,
            options.index_batch,
            &stop,
            &mut |_| {},
        ) {
            // Nothing is lost: the parts stay queued for the next wake-up, open or search.
            tracing::debug!(error = %err, "background search indexing failed");
        }
    }
}

/// Indexes everything queued, streamed parts too, inside the caller's transaction (the
/// check rolls it back); returns how many parts that took.
pub(crate) fn index_everything(conn: &Connection, now: i64) -> Result<u64> {
    let mut total = 0;
    loop {
        let done = index_batch(
            conn,
            now,
            IndexBatch {
                max_parts: 10_000,
                max_time: Duration::MAX,
            },
            true,
        )?;
        if done == 0 {
            return Ok(total);
        }
        total += done as u64;
    }
}
