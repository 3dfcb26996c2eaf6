//! Keeping the WAL bounded while several processes write one file.
//!
//! SQLite appends every commit to the `-wal` file and starts the file over (a *WAL
//! restart*) only when a writer begins while every frame has already been copied into the
//! database (`nBackfill == mxFrame`) and no reader still reads from the WAL. Its
//! auto-checkpoint is PASSIVE: run after a commit, it copies the frames that were there
//! when it started, and syncs the WAL and the database file while it does, which takes
//! milliseconds. With writers committing in turn several hundred times a second, new
//! frames always arrive meanwhile, so no checkpoint ever catches up, no writer ever finds
//! the WAL fully copied, and the file only grows (stop 24: ~600 MB for 4 processes x 2,500
//! appends; every commit past 1,000 frames also ran a checkpoint of its own).
//!
//! Catching up needs the write lock: new frames must stop while the last ones are copied.
//! A RESTART checkpoint takes it, but copies and syncs everything under it, and waits
//! for the lock with SQLite's busy handler, which sleeps milliseconds between looks while
//! writers that just committed retake the lock within microseconds (stop 24: a RESTART
//! in a WAL hook kept the WAL under 10 MB but the worst wait rose to 0.6-0.9 s). So a
//! [`Checkpointer`] thread, woken when a commit of this process leaves
//! [`Options::wal_restart_pages`] frames or more in the WAL, first runs a PASSIVE
//! checkpoint on a connection of its own, without any lock writers wait for: it copies
//! and syncs nearly everything. Then a second connection of its own takes the write lock
//! (`BEGIN IMMEDIATE`, its busy handler looking every 250 us), and PASSIVE checkpoints
//! copy the few frames committed meanwhile: nothing new can arrive, so they complete,
//! with two short syncs under the lock. When it lets go, the next writer finds every
//! frame copied and starts the WAL over. A checkpoint another connection began before the
//! lock was taken (a writer's auto-checkpoint, another process's first step) holds the
//! checkpoint lock: it is waited for under the write lock, since it too completes there.
//! When it cannot get the lock in time, or another process checkpoints, the next commit
//! past the threshold tries again.
//!
//! The writer connection registers a WAL hook ([`watch_wal`]) that notes how many frames
//! the WAL holds after each commit, and then does what SQLite's auto-checkpoint (which a
//! hook replaces) did: a passive checkpoint past 1,000 frames. That one stays on purpose:
//! without it commits were faster (4-writer p99 ~1 ms instead of ~10 ms), the writer
//! that had just committed took the lock again before the others looked, and the worst
//! wait rose from ~100 ms to ~400-600 ms. `journal_size_limit` trims a file that grew past
//! twice the threshold (a restart that had to wait) back when the WAL next starts over.
//!
//! With the writers' gate, SQLite's own auto-checkpoint (every commit past 1,000 frames)
//! is run here too, by [`AutoCheckpoint`]'s thread instead of the write that was due it
//! (stop 31: those writes were the slowest 1% of single appends).

use std::cell::Cell;
use std::os::raw::c_int;
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard, PoisonError};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use rusqlite::Connection;
use rusqlite::hooks::Wal;

use crate::Result;
use crate::database::{CheckpointReport, Options, jitter, open_checkpointer};
use crate::error::is_busy;
use crate::tx::SqliteTx;

thread_local! {
    /// Frames in the WAL after the latest commit on this thread ([`record_frames`]).
    static COMMITTED_FRAMES: Cell<u32> = const { Cell::new(0) };
}

/// The WAL hook: notes the frames a commit left in the WAL, for the thread that
/// committed (it runs inside the commit, on that thread). Registering it replaces
/// SQLite's auto-checkpoint on the connection.
fn record_frames(wal: &Wal, frames: c_int) -> rusqlite::Result<()> {
    COMMITTED_FRAMES.with(|cell| cell.set(u32::try_from(frames).unwrap_or(0)));
    if frames >= AUTO_CHECKPOINT {
        // What SQLite's auto-checkpoint does; a failure only leaves it to the next one.
        let _ = wal.checkpoint();
    }
    Ok(())
}

/// SQLite's default auto-checkpoint threshold, frames.
const AUTO_CHECKPOINT: c_int = 1000;

/// Replaces `conn`'s auto-checkpoint by [`record_frames`].
pub(crate) fn watch_wal(conn: &Connection) {
    conn.wal_hook(Some(record_frames));
}

/// The WAL hook of a writer whose auto-checkpoint runs after the commit, outside the
/// writers' gate ([`deferred_checkpoint_due`]): notes the frames, checkpoints nothing.
fn record_frames_only(_wal: &Wal, frames: c_int) -> rusqlite::Result<()> {
    COMMITTED_FRAMES.with(|cell| cell.set(u32::try_from(frames).unwrap_or(0)));
    Ok(())
}

/// Replaces `conn`'s auto-checkpoint by [`record_frames_only`]: the writer runs it itself,
/// once it let the writers' gate go.
pub(crate) fn watch_wal_deferred(conn: &Connection) {
    conn.wal_hook(Some(record_frames_only));
}

/// Whether a commit that left `frames` frames in the WAL is due SQLite's auto-checkpoint
/// (what [`record_frames`] runs inside the commit).
pub(crate) fn deferred_checkpoint_due(frames: u32) -> bool {
    i64::from(frames) >= i64::from(AUTO_CHECKPOINT)
}

/// The frames the latest commit on this thread left in the WAL (0 when none committed
/// since the last call), and forgets them.
pub(crate) fn take_committed_frames() -> u32 {
    COMMITTED_FRAMES.with(|cell| cell.replace(0))
}

/// `journal_size_limit` for a WAL restarted at `pages` frames of `page_size` bytes: the
/// file keeps up to twice that (overwriting is cheaper than growing it again).
pub(crate) fn journal_size_limit(pages: u32, page_size: i64) -> i64 {
    i64::from(pages)
        .saturating_mul(2)
        .saturating_mul(page_size + WAL_FRAME_HEADER)
}

/// Bytes of a WAL frame's header, before its page.
const WAL_FRAME_HEADER: i64 = 24;

/// The background checkpointer of a read-write file database (see the module doc).
#[derive(Debug)]
pub(crate) struct Checkpointer {
    shared: Arc<Shared>,
    thread: Option<JoinHandle<()>>,
    /// [`Options::wal_restart_pages`].
    pages: u32,
}

#[derive(Debug, Default)]
struct Shared {
    state: Mutex<State>,
    wake: Condvar,
    /// RESTART checkpoints that completed: the next writer started the WAL over.
    restarts: AtomicU64,
}

#[derive(Debug, Default)]
struct State {
    /// A commit left the WAL past the threshold since the thread last looked.
    due: bool,
    stop: bool,
}

impl Checkpointer {
    /// Opens the checkpointer's own connection to `path` and starts the thread.
    pub(crate) fn start(path: &Path, options: &Options) -> Result<Checkpointer> {
        let conns = Conns {
            checkpoint: open_checkpointer(path, options)?,
            lock: open_checkpointer(path, options)?,
        };
        conns.lock.busy_handler(Some(poll_for_lock))?;
        let shared = Arc::new(Shared::default());
        let thread = {
            let shared = Arc::clone(&shared);
            let options = options.clone();
            std::thread::Builder::new()
                .name("scribe-checkpoint".to_owned())
                .spawn(move || run(&shared, &conns, &options))
                .map_err(|source| crate::Error::Io {
                    path: path.to_owned(),
                    source,
                })?
        };
        Ok(Checkpointer {
            shared,
            thread: Some(thread),
            pages: options.wal_restart_pages,
        })
    }

    /// A commit of this process left `frames` frames in the WAL: wakes the thread when
    /// that is past the threshold.
    pub(crate) fn committed(&self, frames: u32) {
        if frames < self.pages {
            return;
        }
        let wake = {
            let mut state = lock(&self.shared);
            !std::mem::replace(&mut state.due, true)
        };
        if wake {
            self.shared.wake.notify_one();
        }
    }

    /// RESTART checkpoints this thread completed.
    pub(crate) fn restarts(&self) -> u64 {
        self.shared.restarts.load(Ordering::Relaxed)
    }
}

impl Drop for Checkpointer {
    fn drop(&mut self) {
        lock(&self.shared).stop = true;
        self.shared.wake.notify_one();
        if let Some(thread) = self.thread.take() {
            // A checkpoint under way finishes first (bounded by the busy timeout).
            let _ = thread.join();
        }
    }
}

fn lock(shared: &Shared) -> MutexGuard<'_, State> {
    shared.state.lock().unwrap_or_else(PoisonError::into_inner)
}

/// The checkpointer's two connections: one that checkpoints, one that holds the write
/// lock meanwhile (a connection cannot checkpoint inside its own transaction).
struct Conns {
    checkpoint: Connection,
    lock: Connection,
}

fn run(shared: &Shared, conns: &Conns, options: &Options) {
    loop {
        {
            let mut state = lock(shared);
            while !state.stop && !state.due {
                state = shared
                    .wake
                    .wait(state)
                    .unwrap_or_else(PoisonError::into_inner);
            }
            if state.stop {
                return;
            }
            state.due = false;
        }
        match round(&conns.checkpoint, &conns.lock, options.wal_restart_pages) {
            Ok(Outcome::Restarted) => {
                shared.restarts.fetch_add(1, Ordering::Relaxed);
            }
            Ok(Outcome::Small) => {}
            Ok(Outcome::Busy) => {
                // Another process checkpoints, or the lock or a reader kept this one from
                // finishing: the next commit past the threshold tries again, after a pause
                // like a busy write's, so that this thread does not spin against them.
                std::thread::sleep(jitter(options));
            }
            Err(err) => {
                // Nothing is lost: the WAL only stays longer until the next try.
                tracing::debug!(error = %err, "background checkpoint failed");
                std::thread::sleep(jitter(options));
            }
        }
    }
}

/// What one [`round`] did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Outcome {
    /// Every frame is in the database and no reader uses the WAL: the next writer starts
    /// it over.
    Restarted,
    /// The WAL was already below the threshold (another process restarted it).
    Small,
    /// Another process checkpoints, or the write lock or a reader could not be had in
    /// time.
    Busy,
}

/// One try: a PASSIVE checkpoint on `conn` (no lock that writers wait for); then, if the
/// WAL still holds at least `pages` frames not all copied, the write lock taken on `lock`
/// (a `BEGIN IMMEDIATE` whose busy handler, [`poll_for_lock`], looks every
/// [`LOCK_POLL`]) while PASSIVE checkpoints on `conn` copy the frames committed
/// meanwhile. No new frame can come while `lock` holds the write lock, so the checkpoint
/// completes (a reader of an older snapshot may hold it up: it is tried [`FINISH_TRIES`]
/// times; another connection's checkpoint under way is waited for, up to
/// [`FINISH_BUSY_WAIT`]); when `lock` lets go, the next writer finds every frame copied
/// and starts the WAL over (unless a reader still reads from it: then the one after).
fn round(conn: &Connection, lock: &Connection, pages: u32) -> Result<Outcome> {
    let pages = i64::from(pages);
    let passive = checkpoint(conn, "PASSIVE")?;
    // Busy: another connection holds the checkpoint lock (a writer's auto-checkpoint,
    // which every commit runs once the WAL is past 1,000 frames, or another process's
    // checkpointer). It copies what this one would have; the lock is taken all the same,
    // and under it that checkpoint is waited for. (Giving up here left the WAL to grow
    // while writers' checkpoints kept the lock busy.)
    // (A passive checkpoint reports the frames there were when it began: writers may
    // have added more since, so "all copied" means nothing until the lock is held.)
    if !passive.busy && passive.wal_frames < pages {
        // Another process restarted the WAL since the commit that woke this thread.
        return Ok(Outcome::Small);
    }
    let held = match SqliteTx::immediate(lock) {
        Ok(held) => held,
        Err(err) if is_busy(&err) => return Ok(Outcome::Busy),
        Err(err) => return Err(err.into()),
    };
    let mut outcome = Outcome::Busy;
    let mut tries = 0;
    let mut waited = Duration::ZERO;
    while tries < FINISH_TRIES && waited < FINISH_BUSY_WAIT {
        let report = checkpoint(conn, "PASSIVE")?;
        if report.busy {
            // Another connection holds the checkpoint lock (SQLite then reports -1
            // frames, which is not a small WAL): a writer's auto-checkpoint begun before
            // this lock was taken, or another process's first, unlocked checkpoint. It
            // copies what this one would, and no frame can come meanwhile: wait for it
            // (letting go now would let writers add frames before it ends, and the WAL
            // would not start over). One that waits for the write lock itself (a FULL or
            // TRUNCATE checkpoint) cannot end meanwhile: the wait is bounded for it.
            let paused = Instant::now();
            std::thread::sleep(FINISH_PAUSE);
            waited += paused.elapsed();
            continue;
        }
        tries += 1;
        if report.wal_frames < pages {
            // Another process restarted the WAL before this one got the lock.
            outcome = Outcome::Small;
            break;
        }
        if report.checkpointed_frames == report.wal_frames {
            outcome = Outcome::Restarted;
            break;
        }
        std::thread::sleep(FINISH_PAUSE);
    }
    // Nothing was written: ending the transaction only lets go of the lock.
    drop(held);
    Ok(outcome)
}

/// The busy handler of the connection that takes the write lock for [`round`]: looks
/// again every [`LOCK_POLL`], [`LOCK_POLLS`] times. A writer that just committed begins
/// its next transaction within microseconds, so a waiter that sleeps milliseconds
/// between looks (SQLite's own handler, a write's jittered pauses) may wait hundreds of
/// milliseconds while the WAL grows by tens of megabytes; looking often catches the lock
/// between two transactions.
fn poll_for_lock(tries: i32) -> bool {
    std::thread::sleep(LOCK_POLL);
    tries < LOCK_POLLS
}

/// How often [`poll_for_lock`] looks.
const LOCK_POLL: Duration = Duration::from_micros(250);

/// How many times [`poll_for_lock`] looks before the round gives up (a few hundred
/// milliseconds): the next commit past the threshold tries again.
const LOCK_POLLS: i32 = 40;

/// How many PASSIVE checkpoints [`round`] runs under the write lock to copy the last
/// frames (a reader of an older snapshot keeps a checkpoint from copying past it).
const FINISH_TRIES: u32 = 3;

/// The pause between those tries.
const FINISH_PAUSE: Duration = Duration::from_micros(200);

/// How long [`round`] waits, holding the write lock, for another connection's checkpoint
/// to end. It copies the frames there are and syncs: ~1 ms on an idle machine, tens of
/// milliseconds when the disk is busy. Waiting holds writers up; not waiting lets go of
/// a WAL that was nearly copied (seen with 3 writer processes and other builds on the
/// machine: rounds gave up one after another while the file grew past 30 MB).
const FINISH_BUSY_WAIT: Duration = Duration::from_millis(50);

/// `PRAGMA wal_checkpoint(mode)` on `conn`.
pub(crate) fn checkpoint(conn: &Connection, mode: &str) -> Result<CheckpointReport> {
    let sql = format!("PRAGMA wal_checkpoint({mode})");
    Ok(conn.query_row(&sql, [], |row| {
        Ok(CheckpointReport {
            busy: row.get::<_, i64>(0)? != 0,
            wal_frames: row.get(1)?,
            checkpointed_frames: row.get(2)?,
        })
    })?)
}

/// How far the WAL may grow, in frames, while [`AutoCheckpoint`]'s thread has not yet
/// caught up with the writes: a commit that leaves this many or more runs the passive
/// checkpoint itself, after the gate, as every due commit did before stop 31
/// ([`AutoCheckpoint::take`]). Between two writes of its own thread that copies every
/// frame, so the next write starts the WAL over: a process that appends without pause,
/// which the thread chases without ever finding the WAL fully copied, still keeps the
/// file near this size (16 MiB of 4 KiB pages).
pub(crate) const AUTO_CHECKPOINT_BACKSTOP: u32 = 4 * AUTO_CHECKPOINT as u32;

/// Passive checkpoints one wake-up of [`AutoCheckpoint`]'s thread runs at most: the first
/// copies what the WAL held when it began, each next one what was committed meanwhile
/// (less each time), until every frame is copied and the next writer starts the WAL over.
const AUTO_ROUNDS: u32 = 4;

/// SQLite's auto-checkpoint off the writing thread (with the writers' gate; see
/// [`deferred_checkpoint_due`]): when a commit of this process leaves
/// [`AUTO_CHECKPOINT`] frames or more in the WAL, a thread of its own runs the passive
/// checkpoint on a connection of its own, which no writer waits for, and the write that
/// was due it returns at once.
///
/// Stop 31 found that the slowest 1% of single appends were the ones that ran it (about
/// 1.4% of appends, 5-6 ms each, mostly syncing the ~4 MB of WAL written since the last
/// one; the other appends' p99 was ~0.5 ms), as the limit's are. Run beside the writes it
/// copies the same frames; the WAL starts over when the thread has copied every frame and
/// the next write begins, which happens whenever the writes pause for about a round's
/// length. A process that writes without such a pause falls back on
/// [`AUTO_CHECKPOINT_BACKSTOP`].
///
/// The thread and its connection start at the first checkpoint due, so a process that
/// never writes 1,000 frames (most CLI commands) starts neither.
#[derive(Debug)]
pub(crate) struct AutoCheckpoint {
    path: std::path::PathBuf,
    options: Options,
    shared: Arc<AutoShared>,
    thread: Mutex<Started>,
}

#[derive(Debug, Default)]
struct AutoShared {
    state: Mutex<AutoState>,
    /// Wakes the thread.
    wake: Condvar,
    /// The thread finished its rounds.
    idle: Condvar,
}

#[derive(Debug, Default)]
struct AutoState {
    /// A commit left the WAL past [`AUTO_CHECKPOINT`] since the thread last looked.
    due: bool,
    /// The thread is checkpointing.
    running: bool,
    stop: bool,
}

#[derive(Debug, Default)]
enum Started {
    #[default]
    Not,
    Running(JoinHandle<()>),
    /// The thread or its connection could not start: commits checkpoint themselves.
    Failed,
}

impl AutoCheckpoint {
    pub(crate) fn new(path: &Path, options: &Options) -> AutoCheckpoint {
        AutoCheckpoint {
            path: path.to_owned(),
            options: options.clone(),
            shared: Arc::new(AutoShared::default()),
            thread: Mutex::new(Started::Not),
        }
    }

    /// A commit of this process left `frames` frames in the WAL and is due a checkpoint
    /// ([`deferred_checkpoint_due`]): hands it to the thread and returns true, or returns
    /// false when the caller must run it itself, now: the WAL reached
    /// [`AUTO_CHECKPOINT_BACKSTOP`] (then the thread's rounds under way end first, so
    /// that the caller's checkpoint is not turned away busy and copies the rest), or the
    /// thread could not start.
    pub(crate) fn take(&self, frames: u32) -> bool {
        if frames >= AUTO_CHECKPOINT_BACKSTOP {
            self.wait_idle();
            return false;
        }
        if !self.started() {
            return false;
        }
        let wake = !std::mem::replace(&mut self.state().due, true);
        if wake {
            self.shared.wake.notify_one();
        }
        true
    }

    /// Returns once the thread is not checkpointing (at once when it is idle or never
    /// started); what it was asked to do meanwhile is done by then.
    pub(crate) fn wait_idle(&self) {
        let mut state = self.state();
        while state.running || (state.due && !state.stop && self.is_running()) {
            state = self
                .shared
                .idle
                .wait(state)
                .unwrap_or_else(PoisonError::into_inner);
        }
    }

    /// Whether the thread was started and runs.
    fn is_running(&self) -> bool {
        matches!(
            *self.thread.lock().unwrap_or_else(PoisonError::into_inner),
            Started::Running(_)
        )
    }

    fn state(&self) -> MutexGuard<'_, AutoState> {
        lock_auto(&self.shared)
    }

    /// Whether the thread runs, starting it the first time.
    fn started(&self) -> bool {
        let mut thread = self.thread.lock().unwrap_or_else(PoisonError::into_inner);
        if let Started::Not = *thread {
            *thread = match self.start() {
                Ok(handle) => Started::Running(handle),
                Err(err) => {
                    tracing::warn!(error = %err, "no background auto-checkpoint");
                    Started::Failed
                }
            };
        }
        matches!(*thread, Started::Running(_))
    }

    fn start(&self) -> Result<JoinHandle<()>> {
        let conn = open_checkpointer(&self.path, &self.options)?;
        let shared = Arc::clone(&self.shared);
        std::thread::Builder::new()
            .name("scribe-autocheckpoint".to_owned())
            .spawn(move || run_auto(&shared, &conn))
            .map_err(|source| crate::Error::Io {
                path: self.path.clone(),
                source,
            })
    }
}

impl Drop for AutoCheckpoint {
    fn drop(&mut self) {
        self.state().stop = true;
        self.shared.wake.notify_one();
        let thread = std::mem::take(
            self.thread
                .get_mut()
                .unwrap_or_else(PoisonError::into_inner),
        );
        if let Started::Running(handle) = thread {
            // A checkpoint under way finishes first.
            let _ = handle.join();
        }
    }
}

fn lock_auto(shared: &AutoShared) -> MutexGuard<'_, AutoState> {
    shared.state.lock().unwrap_or_else(PoisonError::into_inner)
}

fn run_auto(shared: &AutoShared, conn: &Connection) {
    loop {
        {
            let mut state = lock_auto(shared);
            state.running = false;
            shared.idle.notify_all();
            while !state.stop && !state.due {
                state = shared
                    .wake
                    .wait(state)
                    .unwrap_or_else(PoisonError::into_inner);
            }
            if state.stop {
                return;
            }
            state.due = false;
            state.running = true;
        }
        for _ in 0..AUTO_ROUNDS {
            match checkpoint(conn, "PASSIVE") {
                // Every frame copied (the next writer starts the WAL over), or another
                // connection checkpoints (it copies what this one would).
                Ok(report) if report.busy || report.checkpointed_frames >= report.wal_frames => {
                    break;
                }
                Ok(_) => {}
                Err(err) => {
                    // Nothing is lost: the next commit past the threshold tries again.
                    tracing::debug!(error = %err, "background auto-checkpoint failed");
                    break;
                }
            }
        }
    }
}
