//! [`CancelToken`]: a cloneable flag that one thread sets and the agent loop
//! and running tools observe at their safe points.

use std::sync::{Arc, Condvar, Mutex, PoisonError};
use std::time::Duration;

/// Cancellation shared between the caller, the loop and its tools: clones
/// share one flag; once canceled it stays canceled.
#[derive(Debug, Clone, Default)]
pub struct CancelToken {
    inner: Arc<(Mutex<bool>, Condvar)>,
}

impl CancelToken {
    /// A token that is not canceled.
    pub fn new() -> CancelToken {
        CancelToken::default()
    }

    /// Cancels: every clone sees it, and threads in [`CancelToken::wait_timeout`] wake.
    pub fn cancel(&self) {
        let (flag, wake) = &*self.inner;
        *flag.lock().unwrap_or_else(PoisonError::into_inner) = true;
        wake.notify_all();
    }

    /// Whether [`CancelToken::cancel`] was called on any clone.
    pub fn is_canceled(&self) -> bool {
        *self.inner.0.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Sleeps up to `timeout`, waking early on cancellation; returns whether it
    /// is canceled. Lets a blocking tool wait without busy-looping.
    pub fn wait_timeout(&self, timeout: Duration) -> bool {
        let (flag, wake) = &*self.inner;
        let guard = flag.lock().unwrap_or_else(PoisonError::into_inner);
        let (guard, _) = wake
            .wait_timeout_while(guard, timeout, |canceled| !*canceled)
            .unwrap_or_else(PoisonError::into_inner);
        *guard
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::mpsc;
    use std::time::Instant;

    /// Far longer than any test run: a waiter that returns before it was woken.
    const FOREVER: Duration = Duration::from_secs(300);

    #[test]
    fn an_uncanceled_wait_times_out_false() {
        let token = CancelToken::new();
        assert!(!token.wait_timeout(Duration::from_millis(1)));
        assert!(!token.is_canceled());
    }

    #[test]
    fn a_wait_after_cancel_returns_at_once() {
        let token = CancelToken::new();
        token.clone().cancel();
        let started = Instant::now();
        assert!(token.wait_timeout(FOREVER));
        assert!(started.elapsed() < FOREVER / 2);
    }

    /// No sleeps: the waiter says it is about to wait, then the main thread
    /// cancels. Whichever comes first — the cancel, or the waiter blocking —
    /// the wait must end with `true` long before its timeout: either it sees
    /// the flag before blocking, or the notification wakes it. Both orders are
    /// correct, so the test cannot be flaky, and a lost wake-up (the bug it
    /// guards against) would hang it until the timeout and fail.
    #[test]
    fn clones_share_the_flag_and_waiters_wake() {
        let token = CancelToken::new();
        let other = token.clone();
        let (ready, waiting) = mpsc::channel();
        let started = Instant::now();
        let waiter = std::thread::spawn(move || {
            ready.send(()).unwrap();
            other.wait_timeout(FOREVER)
        });
        waiting.recv().unwrap();
        token.cancel();
        assert!(waiter.join().unwrap());
        assert!(started.elapsed() < FOREVER / 2);
        assert!(token.is_canceled());
    }
}
