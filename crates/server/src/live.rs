//! Live updates: a watcher thread polls the database's data version and counts changes in a
//! [`Live`] generation that `/api/events` streams (server-sent events) wait on.
//!
//! Events of the services' in-process brokers never cross processes, and the writer is
//! usually another process (an agent, a TUI), so changes are detected from the database
//! itself: SQLite's `PRAGMA data_version` moves on every commit by any other connection.
//! A poll is one pragma on an idle connection (microseconds), so polling every
//! [`POLL`] costs nothing measurable and bounds the delay well under a second.
//!
//! A database read as `immutable` (a read-only directory or medium, no writer at start)
//! has no data version that moves: its files are watched instead, and each change opens
//! the store again, so reads never run on a connection that assumed the file could not
//! change. On PostgreSQL every commit records its changes in the outbox that
//! `Database::listen` polls: the watcher asks whether it delivered any since the last poll.
//! Both the data version and the outbox are scribe-db's one change watch
//! (`Database::watch_changes`, also behind scribe-session's `Store::watch`; see
//! [`crate::store::Watcher`]).

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Condvar, Mutex, PoisonError};
use std::time::Duration;

use crate::store::{Store, Watcher};

/// How often the watcher polls the database.
pub const POLL: Duration = Duration::from_millis(200);

/// A counter of database changes that threads can wait on.
#[derive(Debug, Default)]
pub struct Live {
    generation: Mutex<u64>,
    changed: Condvar,
}

impl Live {
    /// The current generation (0 at start, +1 per detected change).
    pub fn current(&self) -> u64 {
        *self
            .generation
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
    }

    /// Records a change and wakes every waiter.
    pub fn bump(&self) {
        let mut generation = self
            .generation
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        *generation += 1;
        self.changed.notify_all();
    }

    /// Wakes every waiter without a change (shutdown).
    pub fn wake_all(&self) {
        self.changed.notify_all();
    }

    /// Waits until the generation differs from `seen` or `timeout` passes (or a
    /// [`Live::wake_all`]); returns the generation then.
    pub fn wait(&self, seen: u64, timeout: Duration) -> u64 {
        let guard = self
            .generation
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        if *guard != seen {
            return *guard;
        }
        let (guard, _) = self
            .changed
            .wait_timeout(guard, timeout)
            .unwrap_or_else(PoisonError::into_inner);
        *guard
    }
}

/// Polls `watcher` every [`POLL`] until `stop`, bumping `live` on every change. A change
/// the watcher cannot see without opening the database again ([`Watcher::reopens`]) is
/// announced once the store has been opened again, with a watcher for the new opening
/// (which may no longer be `immutable`: a writer has started). A failed poll or reopen (a
/// file briefly locked or mid-change) is tried again at the next poll; a watcher whose
/// connection fails for good is replaced by opening the store again.
pub(crate) fn watch(store: &Store, mut watcher: Watcher, live: &Live, stop: &AtomicBool) {
    while !stop.load(Ordering::SeqCst) {
        std::thread::sleep(POLL);
        let changed = watcher.changed();
        if matches!(changed, Ok(false)) {
            continue;
        }
        if changed.is_err() || watcher.reopens() {
            // An immutable read's files changed, or the watcher's connection failed: open
            // again. On failure the watcher stays, so the next poll tries again.
            if store.reopen().is_err() {
                continue;
            }
            match store.watcher() {
                Ok(fresh) => watcher = fresh,
                Err(_) => continue,
            }
        }
        live.bump();
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::*;

    #[test]
    fn a_waiter_wakes_on_a_change() {
        let live = Arc::new(Live::default());
        let seen = live.current();
        let waiter = {
            let live = Arc::clone(&live);
            std::thread::spawn(move || live.wait(seen, Duration::from_secs(30)))
        };
        live.bump();
        assert_eq!(waiter.join().ok(), Some(seen + 1));
        // An already-moved generation returns at once.
        assert_eq!(live.wait(seen, Duration::from_secs(30)), seen + 1);
    }
}
