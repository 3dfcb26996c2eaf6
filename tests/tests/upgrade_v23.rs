//! Upgrade to schema version 23 (times from the Clock): a store written by version 22 —
//! sessions, messages, tool and text parts, usage, a rename — opens, migrates to 23 and
//! keeps every row of sessions, messages, parts and files exactly; the counters stay
//! exact, and afterwards a counter change stamps the session with the store's Clock, not
//! the database's (the touch triggers and `scribe_touch`/`scribe_now_ms` are gone).
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::sync::Arc;

use scribe_db::{Backend, Database, ManualClock, Options};
use scribe_message::{MessageService, NewMessage, Part, Role, TokenUsage};
use scribe_session::{NewSession, SessionService, UsageDelta};
use scribe_tests::{consistency_problems, dump_store_rows, open_upgraded, upgrade_location};
use serde_json::json;

fn a_v22_store_upgrades_to_v23_with_its_rows_intact(backend: Backend) {
    let dir = tempfile::tempdir().unwrap();
    let location = upgrade_location(backend, &dir, "v22.db", "scribe_upgrade_v23").unwrap();
    let (session_id, message_id) = {
        let db = Arc::new(Database::open_at_version(&location, 22).unwrap());
        assert_eq!(db.schema_version().unwrap(), 22);
        let sessions = SessionService::new(Arc::clone(&db));
        let messages = MessageService::new(Arc::clone(&db));
        let s = sessions.create(NewSession::default()).unwrap();
        let m = messages
            .create(NewMessage::new(
                &s.id,
                Role::Assistant,
                vec![
                    Part::text("hello"),
                    Part::tool("call_1", "bash", json!({"command": "ls"})),
                ],
            ))
            .unwrap();
        messages
            .create(NewMessage::new(
                &s.id,
                Role::User,
                vec![Part::text("again")],
            ))
            .unwrap();
        let usage = TokenUsage {
            input: 7,
            ..TokenUsage::default()
        };
        messages.add_usage(&m.id, usage, 0.25).unwrap();
        sessions
            .add_usage(
                &s.id,
                &UsageDelta {
                    api_calls: 2,
                    ..UsageDelta::default()
                },
            )
            .unwrap();
        sessions
            .update(&s.id, |s| s.title = Some("before v23".into()))
            .unwrap();
        (s.id, m.id)
    };
    let before = dump_store_rows(backend, &location).unwrap();
    assert!(before.len() >= 6, "{before:#?}");

    let hand = ManualClock::new(978_307_200_000); // 2001, far from the wall clock
    let options = Options {
        clock: hand.clock(),
        ..Options::default()
    };
    let db = open_upgraded(backend, &location, options, &before, "V23");
    if backend == Backend::Sqlite {
        assert_eq!(consistency_problems(&db).unwrap(), Vec::<String>::new());
    }
    let sessions = SessionService::new(Arc::clone(&db));
    let messages = MessageService::new(Arc::clone(&db));
    let s = sessions.get(&session_id).unwrap();
    assert_eq!(s.message_count, 2);
    assert_eq!(s.title.as_deref(), Some("before v23"));
    assert_eq!(messages.get(&message_id).unwrap().parts.len(), 2);

    // A session whose rows all carry the 2001 Clock's time keeps it through a counter change.
    let fresh = sessions.create(NewSession::default()).unwrap();
    messages
        .create(NewMessage::new(
            &fresh.id,
            Role::Assistant,
            vec![Part::tool("call_2", "bash", json!({}))],
        ))
        .unwrap();
    let after = sessions.get(&fresh.id).unwrap();
    assert_eq!(after.message_count, 1);
    assert_eq!(
        after.updated_at,
        hand.now(),
        "the database stamped its own time"
    );
}

scribe_tests::backends!(a_v22_store_upgrades_to_v23_with_its_rows_intact);
