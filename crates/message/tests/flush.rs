//! Streamed flushes (`update_part` of a growing text part): the part's
//! `updated_at` moves strictly forward even when the clock stands still or runs behind what
//! is stored, and what the call returns (and its event carries) is exactly what a reader
//! of the database sees.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::sync::Arc;
use std::time::Duration;

use common::session;
use scribe_db::{Database, ManualClock, Options};
use scribe_message::{MessageError, MessageService, NewMessage, Part, Role};

#[test]
fn flushes_move_updated_at_forward_and_return_what_is_stored() {
    let dir = tempfile::tempdir().unwrap();
    let clock = ManualClock::new(1_000_000);
    let options = Options {
        clock: clock.clock(),
        ..Options::default()
    };
    let db = Database::open_with(dir.path().join("scribe.db"), options).unwrap();
    let svc = MessageService::new(Arc::new(db));
    let ses = session(&svc);
    let msg = svc
        .create(NewMessage::new(
            &ses,
            Role::Assistant,
            vec![Part::text("a")],
        ))
        .unwrap();
    let part = &msg.parts[0];
    assert_eq!(part.updated_at, 1_000_000);
    let parts = svc.subscribe_parts();

    // The clock stands still: each flush is one millisecond past the one before.
    let first = svc.update_part(&part.id, Part::text("ab")).unwrap();
    let second = svc.update_part(&part.id, Part::text("abc")).unwrap();
    assert_eq!(
        (first.updated_at, second.updated_at),
        (1_000_001, 1_000_002)
    );
    // The clock runs behind what is stored (set back): still forward.
    clock.set(5);
    let third = svc.update_part(&part.id, Part::text("abcd")).unwrap();
    assert_eq!(third.updated_at, 1_000_003);
    // The clock passes it: the clock's time.
    clock.set(2_000_000);
    clock.advance(Duration::from_millis(7));
    let fourth = svc.update_part(&part.id, Part::text("abcde")).unwrap();
    assert_eq!(fourth.updated_at, 2_000_007);

    // Where the part sits came back from the same statement: position, creation time.
    assert_eq!(
        (fourth.id.as_str(), fourth.position, fourth.created_at),
        (part.id.as_str(), 0, 1_000_000)
    );
    let stored = svc.get(&msg.id).unwrap();
    assert_eq!(stored.parts, vec![fourth.clone()]);
    let events: Vec<_> = std::iter::from_fn(|| parts.try_recv().ok()).collect();
    assert_eq!(events.len(), 4);
    let last = &events[3].payload;
    assert_eq!(
        (last.message_id.as_str(), last.session_id.as_str()),
        (msg.id.as_str(), ses.as_str())
    );
    assert_eq!(last.part, fourth);
}

#[test]
fn a_flush_of_a_missing_part_is_not_found_and_writes_nothing() {
    let (_dir, svc) = common::service();
    let ses = session(&svc);
    let msg = svc
        .create(NewMessage::new(
            &ses,
            Role::Assistant,
            vec![Part::text("kept")],
        ))
        .unwrap();
    let parts = svc.subscribe_parts();
    let err = svc
        .update_part("prt_missing", Part::text("lost"))
        .unwrap_err();
    assert!(matches!(&err, MessageError::NotFound { .. }), "{err:?}");
    assert!(
        parts.try_recv().is_err(),
        "no event for a write that did not happen"
    );
    assert_eq!(svc.get(&msg.id).unwrap().parts, msg.parts);
}
