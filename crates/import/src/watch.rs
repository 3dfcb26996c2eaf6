//! [`Watch`]: waits until something may have changed under the roots an import reads,
//! for `scribe import --watch`.
//!
//! It listens to the operating system's file-system notifications (inotify, FSEvents,
//! ReadDirectoryChangesW, through `notify`) for every root it can watch, and falls back
//! to a poll where it cannot: a root that does not exist yet, a system without
//! notifications, a watch the system refuses (too many watches). An import after a
//! wake-up costs one `stat` per unchanged file, so a spurious wake-up is cheap and a
//! missed one is not: when in doubt, it wakes.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{self, Receiver, RecvTimeoutError};
use std::time::{Duration, Instant};

use notify::{Event, EventKind, RecommendedWatcher, RecursiveMode, Watcher};

/// How often to look when notifications do not cover every root.
pub const POLL: Duration = Duration::from_secs(1);

/// How often to look anyway when notifications cover every root (a safety net for an
/// event the system dropped).
pub const RESCAN: Duration = Duration::from_secs(30);

/// After a change, how long to wait for the next before importing: a burst of writes
/// (an agent streaming a response) becomes one import.
const QUIET: Duration = Duration::from_millis(50);

/// The longest a burst is gathered before importing anyway.
const BURST: Duration = Duration::from_millis(300);

/// How often a wait with a stop flag ([`Watch::stop_on`]) looks at it.
const STOP_CHECK: Duration = Duration::from_millis(100);

/// Waits for changes under a set of roots (see the module doc).
pub struct Watch {
    /// The watcher (kept alive while waiting) and where it reports.
    events: Option<(RecommendedWatcher, Receiver<()>)>,
    /// Whether notifications cover every root.
    complete: bool,
    poll: Duration,
    /// Set (by a Ctrl-C handler) to end a wait early.
    stop: Option<Arc<AtomicBool>>,
}

impl std::fmt::Debug for Watch {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Watch")
            .field("notifying", &self.events.is_some())
            .field("complete", &self.complete)
            .field("poll", &self.poll)
            .field("stop", &self.stop)
            .finish()
    }
}

impl Watch {
    /// Watches `roots` (directories recursively; for a file, its directory, where a
    /// database's `-wal` changes too). With `notify` false, or where notifications
    /// cannot be had, [`Watch::wait`] polls every `poll`.
    pub fn new(roots: &[PathBuf], poll: Duration, notify: bool) -> Watch {
        let polling = Watch {
            events: None,
            complete: false,
            poll,
            stop: None,
        };
        if !notify || roots.is_empty() {
            return polling;
        }
        let (tx, rx) = mpsc::channel();
        let handler = move |event: notify::Result<Event>| {
            // An error (a dropped event, an overflowed queue) may hide a change: look.
            if event.as_ref().map_or(true, relevant) {
                let _ = tx.send(());
            }
        };
        let Ok(mut watcher) = notify::recommended_watcher(handler) else {
            return polling;
        };
        let mut complete = true;
        for root in roots {
            let (path, mode) = if root.is_dir() {
                (root.as_path(), RecursiveMode::Recursive)
            } else if root.is_file()
                && let Some(dir) = root.parent()
            {
                (dir, RecursiveMode::NonRecursive)
            } else {
                complete = false;
                continue;
            };
            if watcher.watch(path, mode).is_err() {
                complete = false;
            }
        }
        Watch {
            events: Some((watcher, rx)),
            complete,
            poll,
            stop: None,
        }
    }

    /// Ends [`Watch::wait`] early (within a tenth of a second) once `stop` is set, e.g. by
    /// a Ctrl-C handler; the caller then tells a stop from a change by the flag.
    pub fn stop_on(mut self, stop: Arc<AtomicBool>) -> Watch {
        self.stop = Some(stop);
        self
    }

    /// Whether the stop flag is set.
    fn stopped(&self) -> bool {
        self.stop.as_ref().is_some_and(|s| s.load(Ordering::SeqCst))
    }

    /// Whether file-system notifications cover every root (else [`Watch::wait`] polls).
    pub fn notifying(&self) -> bool {
        self.events.is_some() && self.complete
    }

    /// Returns once something under the roots changed (after gathering the rest of its
    /// burst), or when it is time to look anyway: every `poll` unless notifications cover
    /// every root, then every [`RESCAN`] (or `poll`, if longer); or soon after the stop
    /// flag is set ([`Watch::stop_on`]).
    pub fn wait(&self) {
        let timeout = if self.notifying() {
            self.poll.max(RESCAN)
        } else {
            self.poll
        };
        let Some((_, rx)) = &self.events else {
            self.sleep(timeout);
            return;
        };
        match self.recv(rx, timeout) {
            Ok(()) => {
                let until = Instant::now() + BURST;
                while Instant::now() < until && !self.stopped() && rx.recv_timeout(QUIET).is_ok() {}
            }
            Err(RecvTimeoutError::Timeout) => {}
            // The watcher is gone: poll.
            Err(RecvTimeoutError::Disconnected) => self.sleep(self.poll),
        }
    }

    /// `rx.recv_timeout(timeout)`, given up early (as a timeout) once the stop flag is set.
    fn recv(&self, rx: &Receiver<()>, timeout: Duration) -> Result<(), RecvTimeoutError> {
        let until = Instant::now() + timeout;
        loop {
            let left = until.saturating_duration_since(Instant::now());
            if left.is_zero() || self.stopped() {
                return Err(RecvTimeoutError::Timeout);
            }
            let slice = if self.stop.is_some() {
                left.min(STOP_CHECK)
            } else {
                left
            };
            match rx.recv_timeout(slice) {
                Err(RecvTimeoutError::Timeout) => {}
                other => return other,
            }
        }
    }

    /// Sleeps `d`, or less once the stop flag is set.
    fn sleep(&self, d: Duration) {
        let until = Instant::now() + d;
        loop {
            let left = until.saturating_duration_since(Instant::now());
            if left.is_zero() || self.stopped() {
                return;
            }
            std::thread::sleep(if self.stop.is_some() {
                left.min(STOP_CHECK)
            } else {
                left
            });
        }
    }
}

/// Whether `event` may mean new records: anything but reads (the importer's own, among
/// others) and SQLite's shared-memory index (touched by readers too).
fn relevant(event: &Event) -> bool {
    if matches!(event.kind, EventKind::Access(_)) {
        return false;
    }
    event.paths.is_empty() || event.paths.iter().any(|p| !is_shm(p))
}

fn is_shm(path: &Path) -> bool {
    path.file_name()
        .is_some_and(|n| n.to_string_lossy().ends_with("-shm"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_and_shared_memory_do_not_wake_a_watch() {
        let event = |kind: EventKind, path: &str| Event::new(kind).add_path(PathBuf::from(path));
        use notify::event::{AccessKind, CreateKind, ModifyKind};
        assert!(!relevant(&event(
            EventKind::Access(AccessKind::Any),
            "/h/.claude/projects/p/s.jsonl"
        )));
        assert!(!relevant(&event(
            EventKind::Modify(ModifyKind::Any),
            "/h/.hermes/state.db-shm"
        )));
        assert!(relevant(&event(
            EventKind::Modify(ModifyKind::Any),
            "/h/.hermes/state.db-wal"
        )));
        assert!(relevant(&event(
            EventKind::Create(CreateKind::File),
            "/h/.codex/sessions/r.jsonl"
        )));
    }

    #[test]
    fn a_missing_root_means_polling() {
        let dir = tempfile::tempdir().unwrap();
        let watch = Watch::new(&[dir.path().join("nope")], POLL, true);
        assert!(!watch.notifying());
        let watch = Watch::new(&[dir.path().to_path_buf()], POLL, false);
        assert!(!watch.notifying());
    }

    /// A wait of an hour (polling, or notified with nothing changing) ends once its stop
    /// flag is set: `scribe import --watch` ends on Ctrl-C without waiting for a change.
    #[test]
    fn a_stop_flag_ends_a_wait() {
        let dir = tempfile::tempdir().unwrap();
        let hour = Duration::from_secs(3600);
        for notify in [false, true] {
            let stop = Arc::new(AtomicBool::new(false));
            let watch = Watch::new(&[dir.path().to_path_buf()], hour, notify).stop_on(stop.clone());
            assert_eq!(watch.notifying(), notify);
            let (tx, rx) = mpsc::channel();
            std::thread::spawn(move || {
                watch.wait();
                let _ = tx.send(());
            });
            assert!(
                rx.recv_timeout(Duration::from_millis(300)).is_err(),
                "returned before the flag was set (notify {notify})"
            );
            stop.store(true, Ordering::SeqCst);
            // Generous: this proves the wait ends at all, not how fast.
            rx.recv_timeout(Duration::from_secs(60))
                .unwrap_or_else(|_| panic!("the wait went on after the stop (notify {notify})"));
        }
    }
}
