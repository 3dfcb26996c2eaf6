//! The broker: a registry of subscriber queues that fans each published event out to
//! all of them without ever waiting for a slow one.

use std::fmt;
use std::sync::{Arc, Mutex, Weak};

use crate::queue::{Offer, Queue, lock};
use crate::{Event, EventKind, Subscription};

/// The per-subscriber buffer of [`Broker::new`].
pub const DEFAULT_BUFFER: usize = 100;

/// A typed publish/subscribe hub that a service embeds to announce what changed.
///
/// Every [`Subscription`] has its own bounded buffer. [`publish`](Broker::publish) never
/// blocks on a subscriber: one whose buffer is full misses the event, and learns how many
/// it missed on its next receive ([`RecvError::Lagged`](crate::RecvError::Lagged)) so it
/// knows to reload. All subscribers see events in the same order, and events from one
/// publishing thread arrive in the order it published them.
///
/// The broker is `Send + Sync` when `T: Send`; share it behind an `Arc` or own it.
/// [`shutdown`](Broker::shutdown), or dropping the broker, ends every stream once its
/// buffer is drained.
///
/// # Example
///
/// ```
/// use std::time::Duration;
/// use scribe_pubsub::{Broker, EventKind, RecvError, TryRecvError};
///
/// let broker: Broker<String> = Broker::with_buffer(2);
/// let sub = broker.subscribe();
///
/// assert_eq!(broker.publish(EventKind::Created, "ses_1".to_string()), 1);
/// let event = sub.recv().unwrap();
/// assert_eq!((event.kind, event.payload.as_str()), (EventKind::Created, "ses_1"));
///
/// // A full buffer never stalls the publisher: the subscriber misses events instead...
/// for n in 0..5 {
///     broker.publish_updated(format!("ses_{n}"));
/// }
/// assert_eq!(sub.missed(), 3);
/// // ...and is told so first, before the two events it still holds.
/// assert_eq!(sub.recv(), Err(RecvError::Lagged(3)));
/// assert_eq!(sub.recv_timeout(Duration::from_secs(1)).unwrap().payload, "ses_0");
/// assert_eq!(sub.try_recv().unwrap().payload, "ses_1");
/// assert_eq!(sub.try_recv(), Err(TryRecvError::Empty));
///
/// broker.shutdown();
/// assert_eq!(sub.recv(), Err(RecvError::Closed));
/// ```
pub struct Broker<T> {
    shared: Arc<Shared<T>>,
}

/// The part of a broker its subscriptions point back to (weakly, so they never keep a
/// dropped broker alive) in order to unsubscribe.
pub(crate) struct Shared<T> {
    state: Mutex<State<T>>,
    buffer: usize,
}

struct State<T> {
    subscribers: Vec<Subscriber<T>>,
    next_id: u64,
    closed: bool,
}

struct Subscriber<T> {
    id: u64,
    queue: Arc<Queue<T>>,
}

impl<T> Shared<T> {
    pub(crate) fn unsubscribe(&self, id: u64) {
        let removed = {
            let mut state = lock(&self.state);
            let position = state.subscribers.iter().position(|s| s.id == id);
            position.map(|i| state.subscribers.swap_remove(i))
        };
        // The queue (and any events left in it) is freed outside the broker lock.
        drop(removed);
    }
}

impl<T: Clone + Send> Broker<T> {
    /// A broker whose subscriptions buffer [`DEFAULT_BUFFER`] (100) events each.
    #[must_use]
    pub fn new() -> Self {
        Self::with_buffer(DEFAULT_BUFFER)
    }

    /// A broker whose subscriptions buffer `buffer` events each (at least one).
    #[must_use]
    pub fn with_buffer(buffer: usize) -> Self {
        Self {
            shared: Arc::new(Shared {
                state: Mutex::new(State {
                    subscribers: Vec::new(),
                    next_id: 0,
                    closed: false,
                }),
                buffer: buffer.max(1),
            }),
        }
    }

    /// The per-subscriber buffer that [`subscribe`](Broker::subscribe) uses.
    #[must_use]
    pub fn buffer(&self) -> usize {
        self.shared.buffer
    }

    /// A new subscription with the broker's buffer size. It receives every event
    /// published after this call; dropping it unsubscribes. After
    /// [`shutdown`](Broker::shutdown) it is already closed.
    #[must_use]
    pub fn subscribe(&self) -> Subscription<T> {
        self.subscribe_with_buffer(self.shared.buffer)
    }

    /// Like [`subscribe`](Broker::subscribe) with its own buffer size (at least one),
    /// e.g. larger for a consumer known to fall behind in bursts.
    #[must_use]
    pub fn subscribe_with_buffer(&self, buffer: usize) -> Subscription<T> {
        let mut state = lock(&self.shared.state);
        if state.closed {
            return Subscription::new(0, Arc::new(Queue::new(buffer, true)), Weak::new());
        }
        let id = state.next_id;
        state.next_id += 1;
        let queue = Arc::new(Queue::new(buffer, false));
        state.subscribers.push(Subscriber {
            id,
            queue: Arc::clone(&queue),
        });
        Subscription::new(id, queue, Arc::downgrade(&self.shared))
    }

    /// Publishes `payload` as a `kind` event to every subscriber and returns how many
    /// buffered it; the rest had a full buffer and count a miss. Never blocks on a
    /// subscriber; after shutdown it does nothing and returns 0.
    pub fn publish(&self, kind: EventKind, payload: T) -> usize {
        self.publish_event(Event::new(kind, payload))
    }

    /// [`publish`](Broker::publish) an [`EventKind::Created`] event.
    pub fn publish_created(&self, payload: T) -> usize {
        self.publish(EventKind::Created, payload)
    }

    /// [`publish`](Broker::publish) an [`EventKind::Updated`] event.
    pub fn publish_updated(&self, payload: T) -> usize {
        self.publish(EventKind::Updated, payload)
    }

    /// [`publish`](Broker::publish) an [`EventKind::Deleted`] event.
    pub fn publish_deleted(&self, payload: T) -> usize {
        self.publish(EventKind::Deleted, payload)
    }

    /// [`publish`](Broker::publish) an already built event.
    pub fn publish_event(&self, event: Event<T>) -> usize {
        let mut delivered = 0;
        let mut to_wake: Vec<Arc<Queue<T>>> = Vec::new();
        {
            // Offering under the broker lock gives every subscriber the same order; each
            // offer is a bounded push, and the wake-up syscalls happen after unlocking.
            let state = lock(&self.shared.state);
            if state.closed {
                return 0;
            }
            let mut note = |offer: Offer, queue: &Arc<Queue<T>>| {
                if let Offer::Delivered { wake } = offer {
                    delivered += 1;
                    if wake {
                        to_wake.push(Arc::clone(queue));
                    }
                }
            };
            if let Some((last, rest)) = state.subscribers.split_last() {
                for subscriber in rest {
                    note(subscriber.queue.offer(|| event.clone()), &subscriber.queue);
                }
                // The last subscriber takes the original: one clone fewer per publish.
                note(last.queue.offer(move || event), &last.queue);
            }
        }
        for queue in to_wake {
            queue.notify();
        }
        delivered
    }

    /// Tells every subscriber it missed `n` events that were never published here: what
    /// a feed from elsewhere (another host's changes) reports when it lost some, e.g.
    /// while reconnecting. Each subscriber's next receive is
    /// [`RecvError::Lagged`](crate::RecvError::Lagged), before the events it still holds.
    pub fn report_missed(&self, n: u64) {
        let queues: Vec<Arc<Queue<T>>> = lock(&self.shared.state)
            .subscribers
            .iter()
            .map(|s| Arc::clone(&s.queue))
            .collect();
        for queue in queues {
            queue.add_missed(n);
        }
    }

    /// How many subscriptions are registered (dropped ones and those created after
    /// shutdown are not).
    #[must_use]
    pub fn subscriber_count(&self) -> usize {
        lock(&self.shared.state).subscribers.len()
    }

    /// Whether [`shutdown`](Broker::shutdown) was called.
    #[must_use]
    pub fn is_shut_down(&self) -> bool {
        lock(&self.shared.state).closed
    }

    /// Ends every stream: later publishes do nothing, subscribers receive what is
    /// buffered and then [`RecvError::Closed`](crate::RecvError::Closed), blocked
    /// receivers wake up, and new subscriptions start closed. Idempotent.
    pub fn shutdown(&self) {
        self.close();
    }
}

impl<T> Broker<T> {
    fn close(&self) {
        let subscribers = {
            let mut state = lock(&self.shared.state);
            state.closed = true;
            std::mem::take(&mut state.subscribers)
        };
        for subscriber in subscribers {
            subscriber.queue.close();
        }
    }
}

impl<T: Clone + Send> Default for Broker<T> {
    fn default() -> Self {
        Self::new()
    }
}

impl<T> Drop for Broker<T> {
    fn drop(&mut self) {
        self.close();
    }
}

impl<T> fmt::Debug for Broker<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let state = lock(&self.shared.state);
        f.debug_struct("Broker")
            .field("buffer", &self.shared.buffer)
            .field("subscribers", &state.subscribers.len())
            .field("shut_down", &state.closed)
            .finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{RecvError, TryRecvError};

    #[test]
    fn publish_without_subscribers_reaches_nobody() {
        let broker = Broker::new();
        assert_eq!(broker.publish_created(1), 0);
        assert_eq!(broker.buffer(), DEFAULT_BUFFER);
        assert_eq!(Broker::<u8>::default().buffer(), DEFAULT_BUFFER);
    }

    #[test]
    fn missed_events_reported_from_outside_come_before_buffered_ones() {
        let broker = Broker::new();
        let sub = broker.subscribe();
        broker.publish_created(1);
        broker.report_missed(3);
        assert_eq!(sub.missed(), 3);
        assert_eq!(sub.recv(), Err(RecvError::Lagged(3)));
        assert_eq!(sub.recv().map(|e| e.payload), Ok(1));
        broker.report_missed(0);
        assert_eq!(sub.try_recv(), Err(TryRecvError::Empty));
    }

    #[test]
    fn zero_buffer_is_raised_to_one() {
        let broker = Broker::with_buffer(0);
        assert_eq!(broker.buffer(), 1);
        let sub = broker.subscribe();
        assert_eq!(sub.capacity(), 1);
        assert_eq!(broker.publish_created(1), 1);
        assert_eq!(broker.publish_created(2), 0);
        assert_eq!(sub.try_recv(), Err(TryRecvError::Lagged(1)));
        assert_eq!(sub.try_recv().map(|e| e.payload), Ok(1));
    }

    #[test]
    fn subscribe_with_buffer_overrides_the_default() {
        let broker = Broker::with_buffer(1);
        let big = broker.subscribe_with_buffer(5);
        let small = broker.subscribe();
        for n in 0..5 {
            broker.publish_updated(n);
        }
        assert_eq!((big.len(), big.missed()), (5, 0));
        assert_eq!((small.len(), small.missed()), (1, 4));
    }

    #[test]
    fn convenience_publishers_set_the_kind() {
        let broker = Broker::new();
        let sub = broker.subscribe();
        broker.publish_created('a');
        broker.publish_updated('b');
        broker.publish_deleted('c');
        broker.publish_event(Event::updated('d'));
        let kinds: Vec<_> = sub.try_iter().map(|e| e.map(|e| e.kind)).collect();
        assert_eq!(
            kinds,
            [
                Ok(EventKind::Created),
                Ok(EventKind::Updated),
                Ok(EventKind::Deleted),
                Ok(EventKind::Updated)
            ]
        );
    }

    #[test]
    fn shutdown_is_idempotent_and_visible() {
        let broker = Broker::<u8>::new();
        let sub = broker.subscribe();
        assert!(!broker.is_shut_down());
        broker.shutdown();
        broker.shutdown();
        assert!(broker.is_shut_down());
        assert_eq!(broker.subscriber_count(), 0);
        assert_eq!(sub.recv(), Err(RecvError::Closed));
    }

    #[test]
    fn debug_does_not_need_debug_payloads() {
        struct Opaque;
        impl Clone for Opaque {
            fn clone(&self) -> Self {
                Opaque
            }
        }
        let broker = Broker::<Opaque>::with_buffer(4);
        let _sub = broker.subscribe();
        assert_eq!(
            format!("{broker:?}"),
            "Broker { buffer: 4, subscribers: 1, shut_down: false }"
        );
    }
}
