//! The writers' gate: a queue, kept by the kernel, in which Scribe's SQLite writers of
//! every process take their turn ([`Options::writer_gate`](crate::Options::writer_gate)).
//!
//! SQLite's write lock has no queue: a writer that finds it taken is told "busy", and
//! waits by sleeping and looking again (SQLite's busy handler, then `Database::write`'s
//! jittered retries). A waiter asleep when the lock frees lets the writer that just
//! committed take it again, so with several processes writing without pause one unlucky
//! waiter can lose many times in a row (the worst wait of scribe-bench's 4-writer row).
//!
//! The gate is an exclusive `flock` on a small side file next to the database, named as
//! SQLite names its own (`<db>-writers` beside `<db>-wal` and `<db>-shm`). A write takes
//! it before `BEGIN IMMEDIATE` and lets go after `COMMIT` or `ROLLBACK`; a writer that
//! finds it taken *blocks* in the kernel, which wakes it the moment the holder lets go
//! (Linux queues conflicting `flock` waiters behind each other, so they are woken one at
//! a time, in order). SQLite's own lock stays the guarantee: the gate only orders
//! Scribe's writers, so a program that never takes it (an older Scribe, the `sqlite3`
//! shell) is still excluded by SQLite and still correct, and just competes as before.
//!
//! - `flock` locks belong to an open file description, not a process: every
//!   [`Gate`] opens the file itself, so two `Database`s in one process exclude each
//!   other too. Threads sharing one `Gate` take turns on its mutex.
//! - The kernel drops the lock when the holder's file is closed, also when the holder
//!   dies: a killed writer never leaves the gate shut.
//! - A blocking `flock` has no timeout, so the blocking call runs on a waiter thread of
//!   the gate, and the writer waits for that thread's answer with a deadline
//!   ([`Gate::enter`]). When the deadline passes the writer gives up (the write fails with
//!   [`Error::Locked`](crate::Error::Locked), as after its last retry), and the waiter
//!   thread stays queued: the next write of this gate takes that place in the queue over,
//!   or, if none comes, the thread lets go at once when the kernel hands it the lock.
//!   That handover is most of what the gate costs a saturated 4-process total (two
//!   threads to schedule per turn; a writer blocking in `flock` itself measured +12%,
//!   `docs/measurements/sqlite.md`, stop 30), and it stays: the only ways to wait in the
//!   writer's own thread and still give up at the deadline are a signal that interrupts
//!   the blocked `flock` (a process-wide handler, which a library embedded in agents and
//!   TUIs must not claim) or a robust mutex in shared memory (`mmap`), and both need
//!   `unsafe` code, which the workspace forbids. Without a deadline, a stopped or hung
//!   holder would hang every writer instead of failing them with `Error::Locked`.
//! - Whatever a commit triggers that need not exclude other writers runs after the gate
//!   is let go: SQLite's auto-checkpoint (its syncs stopped every writer when it ran
//!   inside the commit; since stop 31 on a thread of its own, see
//!   `checkpoint::AutoCheckpoint`), the background indexer's wake-up, the after-commit
//!   actions.
//! - The gate is taken before the writer connection's mutex, never while holding it, so
//!   a thread of this process that holds the connection never waits for the gate.
//! - The side file is never removed (removing a lock file races with a process about to
//!   lock it); it is empty, and only ever locked.
//! - Read-only, in-memory and PostgreSQL databases have no gate; neither does a file
//!   whose side file cannot be opened (a warning, then SQLite's lock alone). On other
//!   platforms than unix the gate is a no-op.

use std::path::{Path, PathBuf};
use std::time::Duration;

/// The side file of the database `db`: `<db>-writers`.
pub fn writer_gate_path(db: &Path) -> PathBuf {
    let mut name = db.as_os_str().to_owned();
    name.push("-writers");
    PathBuf::from(name)
}

/// A database's writers' gate (see the module doc), or none.
#[derive(Debug)]
pub(crate) struct Gate {
    #[cfg(unix)]
    shared: Option<std::sync::Arc<imp::Shared>>,
}

/// The gate held (or no gate): lets go when dropped.
#[derive(Debug)]
#[must_use = "the gate is let go when this is dropped"]
pub(crate) struct Entered<'g> {
    #[cfg(unix)]
    shared: Option<&'g imp::Shared>,
    #[cfg(not(unix))]
    _gate: std::marker::PhantomData<&'g Gate>,
}

impl Gate {
    /// No gate: [`Gate::enter`] always lets in at once.
    pub(crate) fn none() -> Gate {
        Gate {
            #[cfg(unix)]
            shared: None,
        }
    }

    /// The gate of the database file `db`, creating its side file (mode 0600) if needed.
    /// When the file cannot be opened, a warning and no gate.
    pub(crate) fn open(db: &Path) -> Gate {
        #[cfg(unix)]
        {
            let path = writer_gate_path(db);
            match imp::Shared::open(&path) {
                Ok(shared) => Gate {
                    shared: Some(std::sync::Arc::new(shared)),
                },
                Err(err) => {
                    tracing::warn!(
                        path = %path.display(),
                        error = %err,
                        "no writers' gate: SQLite's lock alone orders the writers"
                    );
                    Gate::none()
                }
            }
        }
        #[cfg(not(unix))]
        {
            let _ = db;
            Gate::none()
        }
    }

    /// Whether this is a real gate (not [`Gate::none`]).
    #[cfg(test)]
    pub(crate) fn is_real(&self) -> bool {
        #[cfg(unix)]
        {
            self.shared.is_some()
        }
        #[cfg(not(unix))]
        {
            false
        }
    }

    /// Takes the gate, waiting in the kernel's queue at most `wait`; `None` when the
    /// deadline passed first (another writer, in this or another process, holds it).
    /// Without a gate, or when the lock call fails (a file system without `flock`), it
    /// lets in at once.
    pub(crate) fn enter(&self, wait: Duration) -> Option<Entered<'_>> {
        #[cfg(unix)]
        {
            match &self.shared {
                None => Some(Entered { shared: None }),
                Some(shared) => shared.enter(wait).map(|held| Entered {
                    shared: held.then_some(&**shared),
                }),
            }
        }
        #[cfg(not(unix))]
        {
            let _ = wait;
            Some(Entered {
                _gate: std::marker::PhantomData,
            })
        }
    }
}

impl Drop for Entered<'_> {
    fn drop(&mut self) {
        #[cfg(unix)]
        if let Some(shared) = self.shared {
            shared.leave();
        }
    }
}

#[cfg(unix)]
impl Drop for Gate {
    fn drop(&mut self) {
        if let Some(shared) = &self.shared {
            shared.stop();
        }
    }
}

#[cfg(unix)]
mod imp {
    use std::fs::File;
    use std::io;
    use std::path::Path;
    use std::sync::{Arc, Condvar, Mutex, MutexGuard, PoisonError};
    use std::time::{Duration, Instant};

    use rustix::fs::{FlockOperation, flock};

    /// The gate's file and the state its users and waiter thread share.
    #[derive(Debug)]
    pub(crate) struct Shared {
        file: File,
        state: Mutex<State>,
        changed: Condvar,
    }

    #[derive(Debug, Default)]
    struct State {
        phase: Phase,
        /// The waiter thread runs (started at the first write that had to wait).
        waiter: bool,
        /// The gate was dropped: the waiter thread lets go of anything it gets and ends.
        stop: bool,
        /// `flock` failed other than by contention: the gate lets everyone in.
        broken: bool,
    }

    #[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
    enum Phase {
        /// Nobody here holds the lock or waits for it.
        #[default]
        Idle,
        /// A writer holds the lock.
        Held,
        /// A writer waits for the waiter thread, which is (or is about to be) blocked in
        /// `flock`.
        Wanted,
        /// The waiter thread got the lock for the writer waiting.
        Granted,
        /// The writer that wanted it gave up while the waiter thread is still blocked:
        /// the next writer takes its place, or the thread lets go when it gets the lock.
        Abandoned,
    }

    impl Shared {
        pub(crate) fn open(path: &Path) -> io::Result<Shared> {
            let mut options = std::fs::OpenOptions::new();
            options.read(true).write(true).create(true).truncate(false);
            std::os::unix::fs::OpenOptionsExt::mode(&mut options, 0o600);
            Ok(Shared {
                file: options.open(path)?,
                state: Mutex::new(State::default()),
                changed: Condvar::new(),
            })
        }

        fn state(&self) -> MutexGuard<'_, State> {
            self.state.lock().unwrap_or_else(PoisonError::into_inner)
        }

        /// [`super::Gate::enter`]: `Some(true)` held, `Some(false)` let in without it
        /// (broken), `None` the deadline passed.
        pub(crate) fn enter(self: &Arc<Self>, wait: Duration) -> Option<bool> {
            // None: further than an Instant can say (an enormous budget): no deadline.
            let deadline = Instant::now().checked_add(wait);
            let mut state = self.state();
            // Whether this call put the waiter thread in the queue (or took over the place
            // an earlier call gave up): then it must give the place up if it leaves.
            let mut asked = false;
            loop {
                if state.broken {
                    return Some(false);
                }
                match state.phase {
                    Phase::Idle => match lock(&self.file, FlockOperation::NonBlockingLockExclusive)
                    {
                        Ok(()) => {
                            state.phase = Phase::Held;
                            return Some(true);
                        }
                        Err(err) if err.kind() == io::ErrorKind::WouldBlock => {
                            // Another process holds it: queue in the kernel.
                            if !state.waiter && !self.start_waiter(&mut state) {
                                return Some(false);
                            }
                            state.phase = Phase::Wanted;
                            asked = true;
                            self.changed.notify_all();
                        }
                        Err(err) => {
                            self.break_gate(&mut state, &err);
                            return Some(false);
                        }
                    },
                    // The waiter thread is still queued for a write that gave up: take its
                    // place.
                    Phase::Abandoned => {
                        state.phase = Phase::Wanted;
                        asked = true;
                    }
                    // Granted for a writer of this gate: whichever looks first takes it
                    // (the one that asked goes on waiting for the next turn).
                    Phase::Granted => {
                        state.phase = Phase::Held;
                        return Some(true);
                    }
                    // Another thread of this gate holds it or waits for it.
                    Phase::Held | Phase::Wanted => {}
                }
                let now = Instant::now();
                state = match deadline {
                    Some(deadline) if now >= deadline => {
                        if asked && state.phase == Phase::Wanted {
                            state.phase = Phase::Abandoned;
                            self.changed.notify_all();
                        }
                        return None;
                    }
                    Some(deadline) => {
                        self.changed
                            .wait_timeout(state, deadline - now)
                            .unwrap_or_else(PoisonError::into_inner)
                            .0
                    }
                    None => self
                        .changed
                        .wait(state)
                        .unwrap_or_else(PoisonError::into_inner),
                };
            }
        }

        /// Lets go of the lock a writer holds.
        pub(crate) fn leave(&self) {
            let mut state = self.state();
            if let Err(err) = lock(&self.file, FlockOperation::Unlock) {
                // Unlocking a lock held cannot fail on Linux; should it, closing the file
                // would be the only way out, so writers go on without the gate.
                self.break_gate(&mut state, &err);
            }
            state.phase = Phase::Idle;
            self.changed.notify_all();
        }

        pub(crate) fn stop(&self) {
            self.state().stop = true;
            self.changed.notify_all();
        }

        fn break_gate(&self, state: &mut State, err: &io::Error) {
            if !state.broken {
                tracing::warn!(error = %err, "the writers' gate failed: SQLite's lock alone orders the writers");
            }
            state.broken = true;
            self.changed.notify_all();
        }

        /// Starts the waiter thread; false (and the gate broken) if it cannot start.
        fn start_waiter(self: &Arc<Self>, state: &mut State) -> bool {
            let shared = Arc::clone(self);
            // Detached: it may stay blocked in `flock` for as long as another process
            // holds the gate, so dropping the gate cannot wait for it (it ends when it
            // gets the lock, or with the process).
            match std::thread::Builder::new()
                .name("scribe-gate".to_owned())
                .spawn(move || shared.wait_in_queue())
            {
                Ok(_) => {
                    state.waiter = true;
                    true
                }
                Err(err) => {
                    self.break_gate(state, &err);
                    false
                }
            }
        }

        /// The waiter thread: blocks in `flock` whenever a writer wants the gate.
        fn wait_in_queue(&self) {
            let mut state = self.state();
            loop {
                while !state.stop && state.phase != Phase::Wanted {
                    state = self
                        .changed
                        .wait(state)
                        .unwrap_or_else(PoisonError::into_inner);
                }
                if state.stop {
                    return;
                }
                drop(state);
                let locked = lock(&self.file, FlockOperation::LockExclusive);
                state = self.state();
                match locked {
                    Ok(()) if state.phase == Phase::Wanted && !state.stop => {
                        state.phase = Phase::Granted;
                    }
                    Ok(()) => {
                        // Nobody wants it any more: let the next process in at once.
                        if let Err(err) = lock(&self.file, FlockOperation::Unlock) {
                            self.break_gate(&mut state, &err);
                        }
                        state.phase = Phase::Idle;
                    }
                    Err(err) => {
                        self.break_gate(&mut state, &err);
                        state.phase = Phase::Idle;
                    }
                }
                self.changed.notify_all();
            }
        }
    }

    /// `flock`, again when a signal interrupted it.
    fn lock(file: &File, operation: FlockOperation) -> io::Result<()> {
        loop {
            match flock(file, operation) {
                Err(rustix::io::Errno::INTR) => continue,
                other => return other.map_err(io::Error::from),
            }
        }
    }
}

#[cfg(all(test, unix))]
mod tests {
    use super::*;

    /// A wait meant to run out (the gate is held throughout).
    const SHORT: Duration = Duration::from_millis(20);
    /// A wait meant not to run out.
    const LONG: Duration = Duration::from_secs(60);

    #[test]
    fn two_gates_on_one_file_exclude_each_other() {
        let dir = tempfile::tempdir().unwrap();
        let db = dir.path().join("x.db");
        let (a, b) = (Gate::open(&db), Gate::open(&db));
        assert!(a.is_real() && b.is_real());
        assert!(writer_gate_path(&db).is_file());
        let held = a.enter(LONG).unwrap();
        assert!(b.enter(SHORT).is_none());
        drop(held);
        let held = b.enter(LONG).unwrap();
        assert!(a.enter(SHORT).is_none());
        drop(held);
        drop(a.enter(LONG).unwrap());
    }

    #[test]
    fn a_queued_waiter_gets_the_gate_when_the_holder_lets_go() {
        let dir = tempfile::tempdir().unwrap();
        let db = dir.path().join("x.db");
        let (a, b) = (Gate::open(&db), Gate::open(&db));
        let held = a.enter(LONG).unwrap();
        std::thread::scope(|scope| {
            let waiter = scope.spawn(|| b.enter(LONG).is_some());
            drop(held);
            assert!(waiter.join().unwrap());
        });
    }

    #[test]
    fn a_place_given_up_is_let_go_when_the_kernel_grants_it() {
        let dir = tempfile::tempdir().unwrap();
        let db = dir.path().join("x.db");
        let (a, b) = (Gate::open(&db), Gate::open(&db));
        let held = a.enter(LONG).unwrap();
        // b's waiter thread stays queued in the kernel after b gives up.
        assert!(b.enter(SHORT).is_none());
        drop(held);
        // When it gets the lock nobody wants it: it must let go, or a would wait forever.
        drop(a.enter(LONG).unwrap());
        // And b, given up once, still gets in later.
        drop(b.enter(LONG).unwrap());
    }

    #[test]
    fn threads_sharing_a_gate_take_turns() {
        let dir = tempfile::tempdir().unwrap();
        let gate = Gate::open(&dir.path().join("x.db"));
        let held = gate.enter(LONG).unwrap();
        std::thread::scope(|scope| {
            assert!(scope.spawn(|| gate.enter(SHORT).is_none()).join().unwrap());
        });
        drop(held);
        std::thread::scope(|scope| {
            assert!(scope.spawn(|| gate.enter(SHORT).is_some()).join().unwrap());
        });
    }

    #[test]
    fn no_gate_lets_everyone_in() {
        let gate = Gate::none();
        let first = gate.enter(SHORT);
        assert!(first.is_some() && gate.enter(SHORT).is_some());
    }
}
