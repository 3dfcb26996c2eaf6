//! One subscriber's bounded queue, shared by the broker (which offers events) and the
//! subscription (which takes them).
//!
//! Buffered events, the missed counters and the closed flag live behind one mutex, so a
//! miss and the receive that reports it can never race: the counts are exact.

use std::collections::VecDeque;
use std::sync::{Condvar, Mutex, MutexGuard, PoisonError};
use std::time::Instant;

use crate::Event;

/// Locks `mutex`, recovering the data if a panicking thread poisoned it: every
/// critical section here leaves the state consistent before anything can panic.
pub(crate) fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}

pub(crate) struct Queue<T> {
    state: Mutex<QueueState<T>>,
    ready: Condvar,
    capacity: usize,
}

struct QueueState<T> {
    events: VecDeque<Event<T>>,
    /// Missed since the last `Lagged` was reported.
    missed: u64,
    /// Missed over the subscription's life.
    total_missed: u64,
    closed: bool,
    /// Receivers blocked on `ready`; lets a publisher skip the wake-up syscall when none are.
    waiters: usize,
}

/// What happened to one offered event.
pub(crate) enum Offer {
    /// Buffered; `wake` says a receiver is blocked and needs a notify.
    Delivered { wake: bool },
    /// The buffer was full; the miss is counted.
    Missed,
    /// The queue is closed; nothing was counted.
    Closed,
}

/// How long a receive may block.
#[derive(Clone, Copy)]
pub(crate) enum Wait {
    No,
    Until(Instant),
    Forever,
}

/// The result of one receive, before each public method maps it to its error type.
pub(crate) enum Taken<T> {
    Event(Event<T>),
    Lagged(u64),
    /// Nothing buffered and the wait (if any) expired.
    Empty,
    Closed,
}

impl<T> Queue<T> {
    /// A queue holding at most `capacity` events (at least one).
    pub(crate) fn new(capacity: usize, closed: bool) -> Self {
        Self {
            state: Mutex::new(QueueState {
                events: VecDeque::new(),
                missed: 0,
                total_missed: 0,
                closed,
                waiters: 0,
            }),
            ready: Condvar::new(),
            capacity: capacity.max(1),
        }
    }

    pub(crate) fn capacity(&self) -> usize {
        self.capacity
    }

    /// Buffers the event `make` builds, unless the queue is full or closed; `make` runs
    /// only when there is room, so a full subscriber costs no clone.
    pub(crate) fn offer(&self, make: impl FnOnce() -> Event<T>) -> Offer {
        let mut state = lock(&self.state);
        if state.closed {
            return Offer::Closed;
        }
        if state.events.len() >= self.capacity {
            state.missed = state.missed.saturating_add(1);
            state.total_missed = state.total_missed.saturating_add(1);
            return Offer::Missed;
        }
        state.events.push_back(make());
        Offer::Delivered {
            wake: state.waiters > 0,
        }
    }

    /// Wakes one blocked receiver; called without any lock held.
    pub(crate) fn notify(&self) {
        self.ready.notify_one();
    }

    /// Counts `n` events as missed (they were never offered), waking a blocked receiver
    /// so it learns of the lag.
    pub(crate) fn add_missed(&self, n: u64) {
        let wake = {
            let mut state = lock(&self.state);
            if state.closed || n == 0 {
                return;
            }
            state.missed = state.missed.saturating_add(n);
            state.total_missed = state.total_missed.saturating_add(n);
            state.waiters > 0
        };
        if wake {
            self.ready.notify_all();
        }
    }

    /// Ends the stream: receivers drain what is buffered, then see `Closed`.
    pub(crate) fn close(&self) {
        let wake = {
            let mut state = lock(&self.state);
            state.closed = true;
            state.waiters > 0
        };
        if wake {
            self.ready.notify_all();
        }
    }

    /// Takes the next item: a pending lag first (so a UI reloads as early as possible),
    /// then buffered events in order, then the end of the stream.
    pub(crate) fn take(&self, wait: Wait) -> Taken<T> {
        let mut state = lock(&self.state);
        loop {
            if state.missed > 0 {
                return Taken::Lagged(std::mem::take(&mut state.missed));
            }
            if let Some(event) = state.events.pop_front() {
                return Taken::Event(event);
            }
            if state.closed {
                return Taken::Closed;
            }
            state = match wait {
                Wait::No => return Taken::Empty,
                Wait::Forever => {
                    state.waiters += 1;
                    let mut state = self
                        .ready
                        .wait(state)
                        .unwrap_or_else(PoisonError::into_inner);
                    state.waiters = state.waiters.saturating_sub(1);
                    state
                }
                Wait::Until(deadline) => {
                    let left = deadline.saturating_duration_since(Instant::now());
                    if left.is_zero() {
                        return Taken::Empty;
                    }
                    state.waiters += 1;
                    let (mut state, _) = self
                        .ready
                        .wait_timeout(state, left)
                        .unwrap_or_else(PoisonError::into_inner);
                    state.waiters = state.waiters.saturating_sub(1);
                    state
                }
            };
        }
    }

    pub(crate) fn missed(&self) -> u64 {
        lock(&self.state).missed
    }

    pub(crate) fn total_missed(&self) -> u64 {
        lock(&self.state).total_missed
    }

    pub(crate) fn len(&self) -> usize {
        lock(&self.state).events.len()
    }

    pub(crate) fn is_closed(&self) -> bool {
        lock(&self.state).closed
    }

    /// Drops every buffered event (not the pending lag) and returns how many there were.
    pub(crate) fn clear(&self) -> usize {
        let drained = std::mem::take(&mut lock(&self.state).events);
        // Payload destructors run after the lock is released.
        drained.len()
    }
}
