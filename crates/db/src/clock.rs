//! [`Clock`]: where a [`crate::Database`] and the services over it read the time.
//!
//! Every stored time is integer milliseconds since the Unix epoch. Services take it from
//! the database's clock ([`crate::Tx::now`], [`crate::Database::now`]), so a test can
//! inject one ([`crate::Options::clock`]) and never sleep to make two timestamps
//! differ: [`Clock::ticking`] moves on at every reading, a [`ManualClock`] when told.
//! Ids stay on the system clock (they only need to sort by creation).

use std::fmt;
use std::sync::Arc;
use std::sync::atomic::{AtomicI64, Ordering};
use std::time::Duration;

use crate::ids::now_ms;

/// A source of "now" in milliseconds since the Unix epoch; cheap to clone.
#[derive(Clone)]
pub struct Clock(Arc<dyn Fn() -> i64 + Send + Sync>);

impl Clock {
    /// The system clock ([`now_ms`]).
    pub fn system() -> Clock {
        Clock(Arc::new(now_ms))
    }

    /// A clock that reads `now` from `f`.
    pub fn from_fn(f: impl Fn() -> i64 + Send + Sync + 'static) -> Clock {
        Clock(Arc::new(f))
    }

    /// The system clock, except that no reading repeats or goes back: one that would is
    /// 1 ms after the previous reading. Two changes stamped with it never share a
    /// millisecond, so "before now" holds for what was just written.
    pub fn monotonic() -> Clock {
        let last = AtomicI64::new(i64::MIN);
        Clock::from_fn(move || {
            let now = now_ms();
            let previous = last
                .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |last| {
                    Some(now.max(last.saturating_add(1)))
                })
                .unwrap_or(now);
            now.max(previous.saturating_add(1))
        })
    }

    /// A clock for tests: the first reading is `start`, and every reading is `step_ms`
    /// later than the one before, so two writes never share a millisecond.
    pub fn ticking(start: i64, step_ms: i64) -> Clock {
        let next = AtomicI64::new(start);
        Clock::from_fn(move || next.fetch_add(step_ms, Ordering::Relaxed))
    }

    /// The time now (ms since the epoch).
    pub fn now(&self) -> i64 {
        (self.0)()
    }
}

impl Default for Clock {
    fn default() -> Self {
        Clock::system()
    }
}

impl fmt::Debug for Clock {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Clock")
    }
}

/// A clock a test sets and moves by hand (every clone shows the same time).
///
/// ```
/// use std::time::Duration;
/// use scribe_db::ManualClock;
///
/// let hand = ManualClock::new(1_000);
/// let clock = hand.clock();
/// hand.advance(Duration::from_secs(2));
/// assert_eq!(clock.now(), 3_000);
/// ```
#[derive(Debug, Clone)]
pub struct ManualClock(Arc<AtomicI64>);

impl ManualClock {
    /// A clock standing at `start` ms.
    pub fn new(start: i64) -> ManualClock {
        ManualClock(Arc::new(AtomicI64::new(start)))
    }

    /// The time it shows.
    pub fn now(&self) -> i64 {
        self.0.load(Ordering::SeqCst)
    }

    /// Sets it to `ms`.
    pub fn set(&self, ms: i64) {
        self.0.store(ms, Ordering::SeqCst);
    }

    /// Moves it on by `by`.
    pub fn advance(&self, by: Duration) {
        let ms = i64::try_from(by.as_millis()).unwrap_or(i64::MAX);
        self.0.fetch_add(ms, Ordering::SeqCst);
    }

    /// A [`Clock`] that reads this one.
    pub fn clock(&self) -> Clock {
        let hand = Arc::clone(&self.0);
        Clock::from_fn(move || hand.load(Ordering::SeqCst))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ticking_clocks_never_repeat_a_reading() {
        let clock = Clock::ticking(10, 1);
        let other = clock.clone();
        assert_eq!((clock.now(), other.now(), clock.now()), (10, 11, 12));
    }

    #[test]
    fn a_monotonic_clock_never_repeats_a_reading() {
        let clock = Clock::monotonic();
        let readings: Vec<i64> = (0..1_000).map(|_| clock.now()).collect();
        assert!(readings.windows(2).all(|w| w[0] < w[1]));
        assert!(readings[0] >= now_ms() - 1_000);
    }

    #[test]
    fn the_system_clock_is_the_default() {
        let before = now_ms();
        let now = Clock::default().now();
        assert!(now >= before && now <= now_ms());
    }
}
