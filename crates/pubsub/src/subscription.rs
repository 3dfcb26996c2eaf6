//! The receiving end of a broker: blocking, timed and non-blocking receives, iterators,
//! and the missed-event counters. Dropping a subscription unsubscribes it.
//!
//! Receive order: a pending lag first, then buffered events oldest first, then the end
//! of the stream. The lag comes first because the events still buffered were published
//! before the ones that were missed: a subscriber that reloads on `Lagged` may discard
//! them with [`Subscription::clear`] since the reload already reflects them.

use std::fmt;
use std::iter::FusedIterator;
use std::sync::{Arc, Weak};
use std::time::{Duration, Instant};

use crate::broker::Shared;
use crate::queue::{Queue, Taken, Wait};
use crate::{Event, Lagged, RecvError, RecvTimeoutError, TryRecvError};

/// One subscriber's stream of events from a [`Broker`](crate::Broker), with its own
/// bounded buffer.
///
/// It is `Send + Sync` when `T: Send`, so it can move to (or be shared with) the thread
/// that consumes it. Missed events are counted exactly: [`missed`](Self::missed) tells how
/// many are not yet reported, and the next receive reports them as `Lagged(n)`, which
/// resets the count to zero; [`total_missed`](Self::total_missed) never resets.
pub struct Subscription<T> {
    id: u64,
    queue: Arc<Queue<T>>,
    broker: Weak<Shared<T>>,
}

impl<T> Subscription<T> {
    pub(crate) fn new(id: u64, queue: Arc<Queue<T>>, broker: Weak<Shared<T>>) -> Self {
        Self { id, queue, broker }
    }

    /// Blocks until an event arrives, a lag is to be reported, or the stream ends.
    ///
    /// # Errors
    ///
    /// [`RecvError::Lagged`] if events were missed since the last report;
    /// [`RecvError::Closed`] once the broker is shut down and the buffer drained.
    pub fn recv(&self) -> Result<Event<T>, RecvError> {
        match self.queue.take(Wait::Forever) {
            Taken::Event(event) => Ok(event),
            Taken::Lagged(n) => Err(RecvError::Lagged(n)),
            // A forever wait only returns empty-handed when the stream ended.
            Taken::Empty | Taken::Closed => Err(RecvError::Closed),
        }
    }

    /// Like [`recv`](Self::recv), giving up after `timeout`.
    ///
    /// # Errors
    ///
    /// [`RecvTimeoutError::Timeout`] if nothing arrived in time, otherwise as
    /// [`recv`](Self::recv).
    pub fn recv_timeout(&self, timeout: Duration) -> Result<Event<T>, RecvTimeoutError> {
        // A timeout too large for an Instant is as good as forever.
        let wait = Instant::now()
            .checked_add(timeout)
            .map_or(Wait::Forever, Wait::Until);
        match self.queue.take(wait) {
            Taken::Event(event) => Ok(event),
            Taken::Lagged(n) => Err(RecvTimeoutError::Lagged(n)),
            Taken::Empty => Err(RecvTimeoutError::Timeout),
            Taken::Closed => Err(RecvTimeoutError::Closed),
        }
    }

    /// Takes the next event if one is buffered, without blocking.
    ///
    /// # Errors
    ///
    /// [`TryRecvError::Empty`] if nothing is buffered, otherwise as [`recv`](Self::recv).
    pub fn try_recv(&self) -> Result<Event<T>, TryRecvError> {
        match self.queue.take(Wait::No) {
            Taken::Event(event) => Ok(event),
            Taken::Lagged(n) => Err(TryRecvError::Lagged(n)),
            Taken::Empty => Err(TryRecvError::Empty),
            Taken::Closed => Err(TryRecvError::Closed),
        }
    }

    /// A blocking iterator: events and lags until the stream ends. Each item is
    /// `Ok(event)`, or `Err(Lagged(n))` when `n` events were missed before the ones that
    /// follow (reload what the events would have told).
    #[must_use]
    pub fn iter(&self) -> Iter<'_, T> {
        Iter { subscription: self }
    }

    /// A non-blocking iterator: what is available now, ending when the buffer is empty.
    /// Items as [`Subscription::iter`]'s: `Ok(event)` or `Err(Lagged(n))`.
    #[must_use]
    pub fn try_iter(&self) -> TryIter<'_, T> {
        TryIter { subscription: self }
    }

    /// Events missed (buffer full) and not yet reported by a receive.
    #[must_use]
    pub fn missed(&self) -> u64 {
        self.queue.missed()
    }

    /// Events missed over this subscription's life, reported or not.
    #[must_use]
    pub fn total_missed(&self) -> u64 {
        self.queue.total_missed()
    }

    /// How many events are buffered.
    #[must_use]
    pub fn len(&self) -> usize {
        self.queue.len()
    }

    /// Whether no event is buffered.
    #[must_use]
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The most events this subscription buffers before it misses some.
    #[must_use]
    pub fn capacity(&self) -> usize {
        self.queue.capacity()
    }

    /// Whether the broker has shut down; buffered events can still be received.
    #[must_use]
    pub fn is_closed(&self) -> bool {
        self.queue.is_closed()
    }

    /// Discards the buffered events and returns how many there were; a pending lag is
    /// kept. Useful right before reloading after a lag.
    pub fn clear(&self) -> usize {
        self.queue.clear()
    }
}

impl<T> Drop for Subscription<T> {
    fn drop(&mut self) {
        if let Some(broker) = self.broker.upgrade() {
            broker.unsubscribe(self.id);
        }
    }
}

impl<T> fmt::Debug for Subscription<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Subscription")
            .field("id", &self.id)
            .field("buffered", &self.len())
            .field("capacity", &self.capacity())
            .field("missed", &self.missed())
            .field("closed", &self.is_closed())
            .finish()
    }
}

/// Blocking iterator over a borrowed subscription; see [`Subscription::iter`].
#[derive(Debug)]
pub struct Iter<'a, T> {
    subscription: &'a Subscription<T>,
}

impl<T> Iterator for Iter<'_, T> {
    type Item = Result<Event<T>, Lagged>;

    fn next(&mut self) -> Option<Self::Item> {
        match self.subscription.recv() {
            Ok(event) => Some(Ok(event)),
            Err(RecvError::Lagged(n)) => Some(Err(Lagged(n))),
            Err(RecvError::Closed) => None,
        }
    }
}

impl<T> FusedIterator for Iter<'_, T> {}

/// Non-blocking iterator over a borrowed subscription; see [`Subscription::try_iter`].
#[derive(Debug)]
pub struct TryIter<'a, T> {
    subscription: &'a Subscription<T>,
}

impl<T> Iterator for TryIter<'_, T> {
    type Item = Result<Event<T>, Lagged>;

    fn next(&mut self) -> Option<Self::Item> {
        match self.subscription.try_recv() {
            Ok(event) => Some(Ok(event)),
            Err(TryRecvError::Lagged(n)) => Some(Err(Lagged(n))),
            Err(TryRecvError::Empty | TryRecvError::Closed) => None,
        }
    }
}

/// Blocking iterator that owns its subscription (and unsubscribes when dropped).
#[derive(Debug)]
pub struct IntoIter<T> {
    subscription: Subscription<T>,
}

impl<T> Iterator for IntoIter<T> {
    type Item = Result<Event<T>, Lagged>;

    fn next(&mut self) -> Option<Self::Item> {
        self.subscription.iter().next()
    }
}

impl<T> FusedIterator for IntoIter<T> {}

impl<T> IntoIterator for Subscription<T> {
    type Item = Result<Event<T>, Lagged>;
    type IntoIter = IntoIter<T>;

    fn into_iter(self) -> IntoIter<T> {
        IntoIter { subscription: self }
    }
}

impl<'a, T> IntoIterator for &'a Subscription<T> {
    type Item = Result<Event<T>, Lagged>;
    type IntoIter = Iter<'a, T>;

    fn into_iter(self) -> Iter<'a, T> {
        self.iter()
    }
}

#[cfg(test)]
mod tests {
    use crate::{Broker, Event, Lagged, RecvError, RecvTimeoutError, TryRecvError};
    use std::time::Duration;

    #[test]
    fn lag_is_reported_once_then_buffered_events_follow() {
        let broker = Broker::with_buffer(2);
        let sub = broker.subscribe();
        for n in 0..5 {
            broker.publish_created(n);
        }
        assert_eq!((sub.missed(), sub.total_missed(), sub.len()), (3, 3, 2));
        assert_eq!(sub.recv(), Err(RecvError::Lagged(3)));
        assert_eq!((sub.missed(), sub.total_missed()), (0, 3));
        assert_eq!(sub.recv(), Ok(Event::created(0)));
        assert_eq!(sub.recv(), Ok(Event::created(1)));
        assert_eq!(sub.try_recv(), Err(TryRecvError::Empty));
    }

    #[test]
    fn clear_keeps_the_pending_lag() {
        let broker = Broker::with_buffer(2);
        let sub = broker.subscribe();
        for n in 0..3 {
            broker.publish_updated(n);
        }
        assert_eq!(sub.clear(), 2);
        assert!(sub.is_empty());
        assert_eq!(sub.try_recv(), Err(TryRecvError::Lagged(1)));
        assert_eq!(sub.try_recv(), Err(TryRecvError::Empty));
    }

    #[test]
    fn lag_is_reported_before_closed() {
        let broker = Broker::with_buffer(1);
        let sub = broker.subscribe();
        broker.publish_deleted(1);
        broker.publish_deleted(2);
        broker.shutdown();
        assert!(sub.is_closed());
        assert_eq!(
            sub.recv_timeout(Duration::ZERO),
            Err(RecvTimeoutError::Lagged(1))
        );
        assert_eq!(sub.recv_timeout(Duration::ZERO), Ok(Event::deleted(1)));
        assert_eq!(
            sub.recv_timeout(Duration::ZERO),
            Err(RecvTimeoutError::Closed)
        );
    }

    #[test]
    fn iterators_yield_lags_and_stop() {
        let broker = Broker::with_buffer(2);
        let sub = broker.subscribe();
        for n in 0..3 {
            broker.publish_created(n);
        }
        let now: Vec<_> = sub.try_iter().collect();
        assert_eq!(
            now,
            [Err(Lagged(1)), Ok(Event::created(0)), Ok(Event::created(1))]
        );
        broker.publish_created(9);
        broker.shutdown();
        let rest: Vec<_> = (&sub).into_iter().collect();
        assert_eq!(rest, [Ok(Event::created(9))]);
        assert_eq!(sub.iter().next(), None);
    }

    #[test]
    fn owned_iterator_unsubscribes_when_dropped() {
        let broker = Broker::new();
        let mut events = broker.subscribe().into_iter();
        broker.publish_created("a");
        assert_eq!(events.next(), Some(Ok(Event::created("a"))));
        assert_eq!(broker.subscriber_count(), 1);
        drop(events);
        assert_eq!(broker.subscriber_count(), 0);
    }

    #[test]
    fn huge_timeout_does_not_overflow() {
        let broker = Broker::new();
        let sub = broker.subscribe();
        broker.publish_created(1);
        assert_eq!(sub.recv_timeout(Duration::MAX), Ok(Event::created(1)));
    }

    #[test]
    fn debug_shows_counters() {
        let broker = Broker::with_buffer(1);
        let sub = broker.subscribe();
        broker.publish_created(1);
        broker.publish_created(2);
        assert_eq!(
            format!("{sub:?}"),
            "Subscription { id: 0, buffered: 1, capacity: 1, missed: 1, closed: false }"
        );
    }
}
