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
    use std::time::Instant;

    #[test]
    fn clones_share_the_flag_and_waiters_wake() {
        let token = CancelToken::new();
        assert!(!token.wait_timeout(Duration::from_millis(1)));
        let other = token.clone();
        let started = Instant::now();
        let waiter = std::thread::spawn(move || other.wait_timeout(Duration::from_secs(30)));
        std::thread::sleep(Duration::from_millis(20));
        token.cancel();
        assert!(waiter.join().unwrap());
        assert!(started.elapsed() < Duration::from_secs(10));
        assert!(token.is_canceled());
    }
}
