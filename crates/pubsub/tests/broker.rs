//! Single-broker behaviour seen from outside the crate: fan-out, exact missed counts,
//! unsubscribe on drop, shutdown, and the three ways to receive.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::sync::mpsc;
use std::thread;
use std::time::Duration;

use scribe_pubsub::{
    Broker, Event, EventKind, Lagged, RecvError, RecvTimeoutError, Subscription, TryRecvError,
};

/// Generous bound that turns a hang into a failure; never a performance assertion.
const WATCHDOG: Duration = Duration::from_secs(60);

/// Drains what is buffered right now, panicking on a lag.
fn drain<T>(sub: &Subscription<T>) -> Vec<Event<T>> {
    sub.try_iter()
        .map(|item| item.expect("unexpected lag"))
        .collect()
}

#[test]
fn fan_out_reaches_every_subscriber_in_publish_order() {
    let broker = Broker::new();
    let subs: Vec<_> = (0..4).map(|_| broker.subscribe()).collect();
    assert_eq!(broker.subscriber_count(), 4);

    let kinds = [EventKind::Created, EventKind::Updated, EventKind::Deleted];
    let expected: Vec<_> = (0..60).map(|n| Event::new(kinds[n % 3], n)).collect();
    for event in &expected {
        assert_eq!(broker.publish(event.kind, event.payload), 4);
    }
    for sub in &subs {
        assert_eq!(drain(sub), expected);
        assert_eq!(sub.missed(), 0);
    }
}

#[test]
fn subscriber_only_sees_events_published_after_subscribing() {
    let broker = Broker::new();
    broker.publish_created("before");
    let sub = broker.subscribe();
    broker.publish_created("after");
    assert_eq!(drain(&sub), [Event::created("after")]);
}

#[test]
fn publish_counts_only_subscribers_with_room() {
    let broker = Broker::with_buffer(2);
    let _full = broker.subscribe();
    let _roomy = broker.subscribe_with_buffer(10);
    assert_eq!(broker.publish_created(1), 2);
    assert_eq!(broker.publish_created(2), 2);
    assert_eq!(broker.publish_created(3), 1);
}

#[test]
fn missed_counts_are_exact_and_reported_on_the_next_receive() {
    let broker = Broker::with_buffer(3);
    let sub = broker.subscribe();
    let delivered: Vec<usize> = (0..10).map(|n| broker.publish_updated(n)).collect();
    assert_eq!(delivered, [1, 1, 1, 0, 0, 0, 0, 0, 0, 0]);
    assert_eq!(sub.missed(), 7);
    assert_eq!(sub.total_missed(), 7);
    assert_eq!(sub.len(), 3);

    // The very next receive reports the gap; reporting resets `missed` (not the total).
    assert_eq!(sub.try_recv(), Err(TryRecvError::Lagged(7)));
    assert_eq!(sub.missed(), 0);
    assert_eq!(sub.total_missed(), 7);

    // The events buffered before the gap still follow, oldest first.
    assert_eq!(drain(&sub), [0, 1, 2].map(Event::updated));
    assert_eq!(sub.try_recv(), Err(TryRecvError::Empty));

    // Room again: nothing more is missed.
    assert_eq!(broker.publish_updated(10), 1);
    assert_eq!(sub.recv(), Ok(Event::updated(10)));

    // A second gap is counted from zero and reported the same way by every receive kind.
    for n in 11..16 {
        broker.publish_updated(n);
    }
    assert_eq!(sub.missed(), 2);
    assert_eq!(sub.recv(), Err(RecvError::Lagged(2)));
    for n in 16..18 {
        broker.publish_updated(n);
    }
    assert_eq!(sub.missed(), 2);
    assert_eq!(
        sub.recv_timeout(Duration::from_millis(1)),
        Err(RecvTimeoutError::Lagged(2))
    );
    assert_eq!(sub.total_missed(), 11);
    assert_eq!(drain(&sub), [11, 12, 13].map(Event::updated));
}

#[test]
fn a_ui_can_reload_on_lag_and_discard_stale_events() {
    let broker = Broker::with_buffer(3);
    let sub = broker.subscribe();
    for n in 0..10 {
        broker.publish_updated(n);
    }
    let mut reloads = 0;
    let mut applied = Vec::new();
    for item in sub.try_iter() {
        match item {
            Ok(event) => applied.push(event.payload),
            Err(Lagged(n)) => {
                assert_eq!(n, 7);
                reloads += 1;
                // The reload reflects everything published so far, buffered events included.
                assert_eq!(sub.clear(), 3);
            }
        }
    }
    assert_eq!((reloads, applied.len()), (1, 0));
}

#[test]
fn dropping_a_subscription_unsubscribes_it() {
    let broker = Broker::new();
    let kept = broker.subscribe();
    let dropped = broker.subscribe();
    assert_eq!(broker.subscriber_count(), 2);
    drop(dropped);
    assert_eq!(broker.subscriber_count(), 1);
    assert_eq!(broker.publish_created(1), 1);
    assert_eq!(drain(&kept), [Event::created(1)]);

    // Dropped on another thread.
    let moved = broker.subscribe();
    assert_eq!(broker.subscriber_count(), 2);
    thread::spawn(move || drop(moved)).join().unwrap();
    assert_eq!(broker.subscriber_count(), 1);

    drop(kept);
    assert_eq!(broker.subscriber_count(), 0);
    assert_eq!(broker.publish_created(2), 0);
}

#[test]
fn subscription_may_outlive_its_broker() {
    let broker = Broker::new();
    let sub = broker.subscribe();
    broker.publish_created(1);
    drop(broker);
    assert!(sub.is_closed());
    assert_eq!(sub.recv(), Ok(Event::created(1)));
    assert_eq!(sub.recv(), Err(RecvError::Closed));
    drop(sub);
}

#[test]
fn shutdown_drains_then_closes() {
    let broker = Broker::new();
    let sub = broker.subscribe();
    broker.publish_created(1);
    broker.publish_updated(2);
    broker.shutdown();

    assert_eq!(
        broker.publish_deleted(3),
        0,
        "publish after shutdown is a no-op"
    );
    assert_eq!(broker.subscriber_count(), 0);
    assert!(sub.is_closed());
    assert_eq!(sub.len(), 2);
    assert_eq!(sub.recv(), Ok(Event::created(1)));
    assert_eq!(sub.try_recv(), Ok(Event::updated(2)));
    assert_eq!(sub.recv(), Err(RecvError::Closed));
    assert_eq!(sub.try_recv(), Err(TryRecvError::Closed));
    assert_eq!(
        sub.recv_timeout(Duration::from_secs(1)),
        Err(RecvTimeoutError::Closed)
    );
    assert_eq!(sub.iter().count(), 0);
}

#[test]
fn subscribing_after_shutdown_yields_a_closed_subscription() {
    let broker = Broker::<u8>::with_buffer(7);
    broker.shutdown();
    let sub = broker.subscribe();
    assert!(sub.is_closed());
    assert_eq!(sub.capacity(), 7);
    assert_eq!(broker.subscriber_count(), 0);
    assert_eq!(sub.recv(), Err(RecvError::Closed));
    assert_eq!(sub.try_recv(), Err(TryRecvError::Closed));
}

#[test]
fn blocked_recv_wakes_up_on_publish() {
    let broker = Broker::new();
    let sub = broker.subscribe();
    let (done, finished) = mpsc::channel();
    let consumer = thread::spawn(move || done.send(sub.recv()).unwrap());
    // Give the consumer a chance to block first; the outcome is the same either way.
    thread::sleep(Duration::from_millis(20));
    broker.publish_created("hello");
    assert_eq!(
        finished.recv_timeout(WATCHDOG).unwrap(),
        Ok(Event::created("hello"))
    );
    consumer.join().unwrap();
}

#[test]
fn blocked_recv_wakes_up_on_shutdown() {
    let broker = Broker::<u32>::new();
    let subs: Vec<_> = (0..3).map(|_| broker.subscribe()).collect();
    let (done, finished) = mpsc::channel();
    let consumers: Vec<_> = subs
        .into_iter()
        .map(|sub| {
            let done = done.clone();
            thread::spawn(move || done.send(sub.recv()).unwrap())
        })
        .collect();
    thread::sleep(Duration::from_millis(20));
    broker.shutdown();
    for _ in 0..3 {
        assert_eq!(
            finished.recv_timeout(WATCHDOG).unwrap(),
            Err(RecvError::Closed)
        );
    }
    for consumer in consumers {
        consumer.join().unwrap();
    }
}

#[test]
fn dropping_the_broker_wakes_blocked_receivers() {
    let broker = Broker::<u32>::new();
    let sub = broker.subscribe();
    let (done, finished) = mpsc::channel();
    let consumer = thread::spawn(move || done.send(sub.iter().count()).unwrap());
    thread::sleep(Duration::from_millis(20));
    broker.publish_created(1);
    drop(broker);
    assert_eq!(finished.recv_timeout(WATCHDOG).unwrap(), 1);
    consumer.join().unwrap();
}

#[test]
fn recv_timeout_times_out_then_receives() {
    let broker = Broker::new();
    let sub = broker.subscribe();
    assert_eq!(
        sub.recv_timeout(Duration::from_millis(10)),
        Err(RecvTimeoutError::Timeout)
    );
    assert_eq!(
        sub.recv_timeout(Duration::ZERO),
        Err(RecvTimeoutError::Timeout)
    );

    let (done, finished) = mpsc::channel();
    let consumer = thread::spawn(move || done.send(sub.recv_timeout(WATCHDOG)).unwrap());
    thread::sleep(Duration::from_millis(20));
    broker.publish_updated(5);
    assert_eq!(
        finished.recv_timeout(WATCHDOG).unwrap(),
        Ok(Event::updated(5))
    );
    consumer.join().unwrap();
}

#[test]
fn recv_timeout_wakes_up_on_shutdown() {
    let broker = Broker::<u8>::new();
    let sub = broker.subscribe();
    let (done, finished) = mpsc::channel();
    let consumer = thread::spawn(move || done.send(sub.recv_timeout(WATCHDOG)).unwrap());
    thread::sleep(Duration::from_millis(20));
    broker.shutdown();
    assert_eq!(
        finished.recv_timeout(WATCHDOG).unwrap(),
        Err(RecvTimeoutError::Closed)
    );
    consumer.join().unwrap();
}

#[test]
fn try_recv_never_blocks() {
    let broker = Broker::new();
    let sub = broker.subscribe();
    assert_eq!(sub.try_recv(), Err(TryRecvError::Empty));
    broker.publish_deleted('x');
    assert_eq!(sub.try_recv(), Ok(Event::deleted('x')));
    assert_eq!(sub.try_recv(), Err(TryRecvError::Empty));
    broker.shutdown();
    assert_eq!(sub.try_recv(), Err(TryRecvError::Closed));
}
