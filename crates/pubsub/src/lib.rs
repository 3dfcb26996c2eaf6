//! A generic, typed, in-process event broker that every Scribe service embeds to say
//! what changed: [`Broker<T>`] publishes [`Event<T>`]s (`created`, `updated`, `deleted`)
//! to [`Subscription<T>`]s.
//!
//! Std only and thread-based: each subscription is a bounded queue behind a mutex and a
//! condition variable. A publisher never waits for a slow subscriber — the subscriber
//! misses the event instead, the miss is counted exactly, and its next receive returns
//! [`RecvError::Lagged`] so a UI knows to reload rather than silently drift.
//!
//! ```
//! use std::sync::Arc;
//! use std::thread;
//! use scribe_pubsub::{Broker, Event};
//!
//! let broker = Arc::new(Broker::<u32>::new());
//! let sub = broker.subscribe();
//! let consumer = thread::spawn(move || {
//!     // Ends when the broker shuts down and the buffer is drained.
//!     sub.iter().filter_map(Result::ok).map(|e| e.payload).sum::<u32>()
//! });
//! for n in 1..=4 {
//!     broker.publish_created(n);
//! }
//! broker.shutdown();
//! assert_eq!(consumer.join().unwrap(), 10);
//! ```

mod broker;
mod error;
mod event;
mod queue;
mod subscription;

pub use broker::{Broker, DEFAULT_BUFFER};
pub use error::{Lagged, RecvError, RecvTimeoutError, TryRecvError};
pub use event::{Event, EventKind};
pub use subscription::{IntoIter, Iter, Subscription, TryIter};

#[cfg(test)]
mod tests {
    use super::*;

    fn assert_send_sync<T: Send + Sync>() {}

    #[test]
    fn public_types_are_send_and_sync() {
        assert_send_sync::<Broker<String>>();
        assert_send_sync::<Subscription<String>>();
        assert_send_sync::<Event<String>>();
        assert_send_sync::<IntoIter<String>>();
        assert_send_sync::<RecvError>();
        assert_send_sync::<TryRecvError>();
        assert_send_sync::<RecvTimeoutError>();
        assert_send_sync::<Lagged>();
    }
}
