//! Live updates: a watcher thread polls the database's data version and counts changes in a
//! [`Live`] generation that `/api/events` streams (server-sent events) wait on.
//!
//! Events of the services' in-process brokers never cross processes, and the writer is
//! usually another process (an agent, a TUI), so changes are detected from the database
//! itself: SQLite's `PRAGMA data_version` moves on every commit by any other connection.
//! A poll is one pragma on an idle connection (microseconds), so polling every
//! [`POLL`] costs nothing measurable and bounds the delay well under a second.

use std::sync::{Condvar, Mutex, PoisonError};
use std::time::Duration;

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
