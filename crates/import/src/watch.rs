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

/// Waits for changes under a set of roots (see the module doc).
pub struct Watch {
    /// The watcher (kept alive while waiting) and where it reports.
    events: Option<(RecommendedWatcher, Receiver<()>)>,
    /// Whether notifications cover every root.
    complete: bool,
    poll: Duration,
}

impl std::fmt::Debug for Watch {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Watch")
            .field("notifying", &self.events.is_some())
            .field("complete", &self.complete)
            .field("poll", &self.poll)
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
        }
    }

    /// Whether file-system notifications cover every root (else [`Watch::wait`] polls).
    pub fn notifying(&self) -> bool {
        self.events.is_some() && self.complete
    }

    /// Returns once something under the roots changed (after gathering the rest of its
    /// burst), or when it is time to look anyway: every `poll` unless notifications cover
    /// every root, then every [`RESCAN`] (or `poll`, if longer).
    pub fn wait(&self) {
        let timeout = if self.notifying() {
            self.poll.max(RESCAN)
        } else {
            self.poll
        };
        let Some((_, rx)) = &self.events else {
            std::thread::sleep(timeout);
            return;
        };
        match rx.recv_timeout(timeout) {
            Ok(()) => {
                let until = Instant::now() + BURST;
                while Instant::now() < until && rx.recv_timeout(QUIET).is_ok() {}
            }
            Err(RecvTimeoutError::Timeout) => {}
            // The watcher is gone: poll.
            Err(RecvTimeoutError::Disconnected) => std::thread::sleep(self.poll),
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
}
