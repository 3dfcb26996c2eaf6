//! Every `updated_at` a user sees comes from the store's [`scribe_db::Clock`], never from
//! the database server's own clock: with a clock standing far from the wall clock (2001,
//! 2100), a session after a counter change (a message, a tool part), a rename and a usage
//! add, a message and a part all carry a time the clock read, and none moves backward.
//! (Until V23 the `*_touch` triggers stamped a row that a statement changed without setting
//! `updated_at` with the database's clock: a frozen 2001 clock saw 2026 times.)
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::sync::Arc;
use std::time::Duration;

use scribe_db::{Database, ManualClock, Options};
use scribe_message::{MessageService, NewMessage, Part, Role, TokenUsage};
use scribe_session::{NewSession, SessionService, UsageDelta};
use scribe_tests::{Backend, TestDb};
use serde_json::json;

const YEAR_2001: i64 = 978_307_200_000;
const YEAR_2100: i64 = 4_102_444_800_000;

/// Checks each time read back: within what the clock has read so far, and never before
/// the last one seen for the same row.
struct Times {
    start: i64,
    hand: ManualClock,
    last: std::collections::HashMap<String, i64>,
}

impl Times {
    fn check(&mut self, what: &str, row: &str, at: i64) {
        let now = self.hand.now();
        assert!(
            (self.start..=now).contains(&at),
            "{what}: updated_at {at} is no reading of the clock ({} ..= {now})",
            self.start
        );
        let last = self.last.entry(row.to_owned()).or_insert(at);
        assert!(
            at >= *last,
            "{what}: updated_at {at} moved back from {last}"
        );
        *last = at;
    }
}

/// A fresh database on `backend` whose clock is a hand standing at `start`, and the
/// services over it (the database lives as long as the returned `TestDb`).
fn services_at(
    backend: Backend,
    start: i64,
) -> (TestDb, ManualClock, SessionService, MessageService) {
    let t = TestDb::new(backend);
    let hand = ManualClock::new(start);
    let options = Options {
        clock: hand.clock(),
        ..Options::default()
    };
    let db = Arc::new(Database::open_with(&t.location, options).unwrap());
    let sessions = SessionService::new(Arc::clone(&db));
    let messages = MessageService::new(db);
    (t, hand, sessions, messages)
}

fn updated_at_comes_from_the_clock(backend: Backend, start: i64) {
    let (_t, hand, sessions, messages) = services_at(backend, start);
    let mut times = Times {
        start,
        hand: hand.clone(),
        last: Default::default(),
    };
    let step = || hand.advance(Duration::from_secs(1));

    let session = sessions.create(NewSession::default()).unwrap();
    times.check("created session", &session.id, session.updated_at);
    step();
    // A message and a tool part: the counter triggers change the session's row.
    let message = messages
        .create(NewMessage::new(
            &session.id,
            Role::Assistant,
            vec![
                Part::text("hello"),
                Part::tool("call_1", "bash", json!({"command": "ls"})),
            ],
        ))
        .unwrap();
    times.check("created message", &message.id, message.updated_at);
    let s = sessions.get(&session.id).unwrap();
    assert_eq!(s.message_count, 1);
    times.check("session after a message", &session.id, s.updated_at);
    step();
    let part = messages
        .append_part(&message.id, Part::tool("call_2", "bash", json!({})))
        .unwrap();
    times.check("appended part", &part.id, part.updated_at);
    times.check(
        "message after an appended part",
        &message.id,
        messages.get(&message.id).unwrap().updated_at,
    );
    times.check(
        "session after a tool part",
        &session.id,
        sessions.get(&session.id).unwrap().updated_at,
    );
    step();
    let part = messages
        .update_part(&part.id, Part::text("changed"))
        .unwrap();
    times.check("updated part", &part.id, part.updated_at);
    times.check(
        "session after a tool part became text",
        &session.id,
        sessions.get(&session.id).unwrap().updated_at,
    );
    step();
    let renamed = sessions
        .update(&session.id, |s| s.title = Some("renamed".into()))
        .unwrap();
    times.check("renamed session", &session.id, renamed.updated_at);
    times.check(
        "stored renamed session",
        &session.id,
        sessions.get(&session.id).unwrap().updated_at,
    );
    step();
    let delta = UsageDelta {
        api_calls: 1,
        ..UsageDelta::default()
    };
    let charged = sessions.add_usage(&session.id, &delta).unwrap();
    times.check("session after usage", &session.id, charged.updated_at);
    step();
    let usage = TokenUsage {
        input: 3,
        ..TokenUsage::default()
    };
    let m = messages.add_usage(&message.id, usage, 0.1).unwrap();
    times.check("message after usage", &message.id, m.updated_at);
    times.check(
        "stored message after usage",
        &message.id,
        messages.get(&message.id).unwrap().updated_at,
    );
    step();
    messages.delete(&message.id).unwrap();
    let s = sessions.get(&session.id).unwrap();
    assert_eq!(s.message_count, 0);
    times.check("session after a deleted message", &session.id, s.updated_at);
    for p in messages.list(&session.id).unwrap() {
        times.check("listed message", &p.id, p.updated_at);
    }
}

fn updated_at_comes_from_a_clock_in_2001(backend: Backend) {
    updated_at_comes_from_the_clock(backend, YEAR_2001);
}

fn updated_at_comes_from_a_clock_in_2100(backend: Backend) {
    updated_at_comes_from_the_clock(backend, YEAR_2100);
}

/// A row whose time is the largest a time may be (an imported session stamped by a broken
/// clock, a clock that reads it): every change leaves it there, and the row still reads.
/// Before, `moved_forward` stored one past it, which SQLite kept as a REAL that no reader
/// could take (the import failed whole) and PostgreSQL refused.
fn updated_at_at_the_largest_time_stays_there(backend: Backend) {
    let (_t, _hand, sessions, messages) = services_at(backend, i64::MAX);
    let session = sessions.create(NewSession::default()).unwrap();
    assert_eq!(session.updated_at, i64::MAX);
    let message = messages
        .create(NewMessage::new(
            &session.id,
            Role::Assistant,
            vec![Part::text("hello")],
        ))
        .unwrap();
    let part = messages
        .update_part(&message.parts[0].id, Part::text("changed"))
        .unwrap();
    assert_eq!(part.updated_at, i64::MAX);
    let usage = TokenUsage {
        input: 3,
        ..TokenUsage::default()
    };
    let m = messages.add_usage(&message.id, usage, 0.1).unwrap();
    assert_eq!(m.updated_at, i64::MAX);
    let renamed = sessions
        .update(&session.id, |s| s.title = Some("renamed".into()))
        .unwrap();
    assert_eq!(renamed.updated_at, i64::MAX);
    let s = sessions.get(&session.id).unwrap();
    assert_eq!(
        (s.updated_at, s.title.as_deref()),
        (i64::MAX, Some("renamed"))
    );
    assert_eq!(messages.list(&session.id).unwrap()[0].updated_at, i64::MAX);
}

scribe_tests::backends!(
    updated_at_comes_from_a_clock_in_2001,
    updated_at_comes_from_a_clock_in_2100,
    updated_at_at_the_largest_time_stays_there,
);
