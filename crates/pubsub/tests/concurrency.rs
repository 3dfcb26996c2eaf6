//! Many threads at once: a slow subscriber never slows anyone, concurrent publishers
//! lose nothing, subscribers come and go mid-stream, and a poisoned lock is survived.
//! Every assertion is on counts; time only bounds how long a hang may last.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Barrier, mpsc};
use std::thread;
use std::time::Duration;

use scribe_pubsub::{Broker, Event, EventKind, Subscription};

/// Generous bound that turns a hang into a failure; never a performance assertion.
const WATCHDOG: Duration = Duration::from_secs(120);

/// Runs `f` on its own thread and fails (instead of hanging) if it does not finish.
fn finishes<R: Send + 'static>(what: &str, f: impl FnOnce() -> R + Send + 'static) -> R {
    let (done, finished) = mpsc::channel();
    thread::spawn(move || done.send(f()).unwrap());
    finished
        .recv_timeout(WATCHDOG)
        .unwrap_or_else(|_| panic!("{what} blocked or panicked"))
}

/// Receives every event until the stream ends, panicking on a lag.
fn collect_all<T>(sub: Subscription<T>) -> Vec<T> {
    sub.into_iter()
        .map(|item| item.expect("unexpected lag").payload)
        .collect()
}

#[test]
fn slow_subscriber_does_not_slow_the_publisher_or_others() {
    const EVENTS: usize = 10_000;
    let broker = Arc::new(Broker::<usize>::new());
    let slow = broker.subscribe(); // default buffer 100, never read
    let fast = broker.subscribe_with_buffer(EVENTS);
    let consumer = thread::spawn(move || collect_all(fast));

    let publisher = Arc::clone(&broker);
    let delivered = finishes("publisher", move || {
        (0..EVENTS)
            .map(|n| publisher.publish_updated(n))
            .sum::<usize>()
    });
    // Both got the first 100; afterwards only the fast one had room.
    assert_eq!(delivered, EVENTS + 100);
    assert_eq!(slow.len(), 100);
    assert_eq!(slow.missed(), (EVENTS - 100) as u64);

    broker.shutdown();
    let received = finishes("consumer", move || consumer.join().unwrap());
    assert_eq!(received, (0..EVENTS).collect::<Vec<_>>());

    // The slow subscriber still learns the exact gap, then its 100 oldest events.
    let first: Vec<_> = slow.try_iter().take(2).collect();
    assert_eq!(first[0], Err(scribe_pubsub::Lagged((EVENTS - 100) as u64)));
    assert_eq!(first[1], Ok(Event::updated(0)));
}

#[test]
fn many_publisher_threads_lose_nothing_and_keep_per_thread_order() {
    const THREADS: usize = 8;
    const PER_THREAD: usize = 1_000;
    let broker = Arc::new(Broker::<(usize, usize)>::new());
    let first = broker.subscribe_with_buffer(THREADS * PER_THREAD);
    let second = broker.subscribe_with_buffer(THREADS * PER_THREAD);
    let start = Arc::new(Barrier::new(THREADS));

    let publishers: Vec<_> = (0..THREADS)
        .map(|t| {
            let broker = Arc::clone(&broker);
            let start = Arc::clone(&start);
            thread::spawn(move || {
                start.wait();
                (0..PER_THREAD)
                    .map(|n| broker.publish(EventKind::Created, (t, n)))
                    .sum::<usize>()
            })
        })
        .collect();
    let delivered = finishes("publishers", move || {
        publishers
            .into_iter()
            .map(|p| p.join().unwrap())
            .sum::<usize>()
    });
    assert_eq!(delivered, 2 * THREADS * PER_THREAD);
    broker.shutdown();

    let first = collect_all(first);
    assert_eq!(first.len(), THREADS * PER_THREAD);
    let mut next = [0; THREADS];
    for (t, n) in &first {
        assert_eq!(*n, next[*t], "thread {t} out of order");
        next[*t] += 1;
    }
    assert_eq!(next, [PER_THREAD; THREADS]);
    // Every subscriber sees the same interleaving.
    assert_eq!(collect_all(second), first);
}

#[test]
fn concurrent_consumers_each_receive_everything() {
    const EVENTS: u64 = 5_000;
    let broker = Broker::<u64>::with_buffer(EVENTS as usize);
    let consumers: Vec<_> = (0..4)
        .map(|_| {
            let sub = broker.subscribe();
            thread::spawn(move || collect_all(sub).into_iter().sum::<u64>())
        })
        .collect();
    for n in 0..EVENTS {
        assert_eq!(broker.publish_created(n), 4);
    }
    broker.shutdown();
    let sums = finishes("consumers", move || {
        consumers
            .into_iter()
            .map(|c| c.join().unwrap())
            .collect::<Vec<_>>()
    });
    assert_eq!(sums, vec![EVENTS * (EVENTS - 1) / 2; 4]);
}

#[test]
fn subscribers_can_come_and_go_while_publishing() {
    let broker = Arc::new(Broker::<u32>::with_buffer(8));
    let stop = Arc::new(AtomicBool::new(false));
    let churners: Vec<_> = (0..4)
        .map(|_| {
            let broker = Arc::clone(&broker);
            let stop = Arc::clone(&stop);
            thread::spawn(move || {
                let mut rounds = 0u32;
                while !stop.load(Ordering::Relaxed) || rounds == 0 {
                    let sub = broker.subscribe();
                    let _ = sub.try_recv();
                    drop(sub);
                    rounds += 1;
                }
                rounds
            })
        })
        .collect();
    let publisher = Arc::clone(&broker);
    finishes("publisher", move || {
        for n in 0..20_000 {
            publisher.publish_updated(n);
        }
    });
    stop.store(true, Ordering::Relaxed);
    for churner in churners {
        assert!(churner.join().unwrap() > 0);
    }
    assert_eq!(broker.subscriber_count(), 0);
}

/// A payload whose clone panics on demand, to poison the broker's locks mid-publish.
#[derive(Debug)]
struct Fragile {
    value: u32,
    explode: Arc<AtomicBool>,
}

impl Clone for Fragile {
    fn clone(&self) -> Self {
        assert!(!self.explode.load(Ordering::Relaxed), "clone exploded");
        Fragile {
            value: self.value,
            explode: Arc::clone(&self.explode),
        }
    }
}

#[test]
fn a_panicking_payload_clone_does_not_break_the_broker() {
    let explode = Arc::new(AtomicBool::new(false));
    let fragile = |value| Fragile {
        value,
        explode: Arc::clone(&explode),
    };
    let broker = Broker::new();
    let a = broker.subscribe();
    let b = broker.subscribe();

    explode.store(true, Ordering::Relaxed);
    let publish = catch_unwind(AssertUnwindSafe(|| broker.publish_created(fragile(1))));
    assert!(publish.is_err(), "the clone should have panicked");
    explode.store(false, Ordering::Relaxed);

    // Both the broker lock and a queue lock are poisoned now; everything still works.
    assert_eq!(broker.publish_updated(fragile(2)), 2);
    assert_eq!(a.try_recv().map(|e| e.payload.value), Ok(2));
    assert_eq!(b.try_recv().map(|e| e.payload.value), Ok(2));
    drop(a);
    assert_eq!(broker.subscriber_count(), 1);
    broker.shutdown();
    assert_eq!(
        b.recv().map(|e| e.payload.value),
        Err(scribe_pubsub::RecvError::Closed)
    );
}
