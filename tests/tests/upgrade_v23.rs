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
use scribe_tests::consistency_problems;
use serde_json::json;

const TABLES: [(&str, &str); 4] = [
    ("sessions", "id"),
    ("messages", "id"),
    ("parts", "seq"),
    ("files", "id"),
];

/// Every row of the four tables, in key order, as text.
fn dump(backend: Backend, location: &str) -> Vec<String> {
    let mut rows = Vec::new();
    match backend {
        Backend::Sqlite => {
            let conn = rusqlite::Connection::open(location).unwrap();
            for (table, key) in TABLES {
                let mut stmt = conn
                    .prepare(&format!("SELECT * FROM {table} ORDER BY {key}"))
                    .unwrap();
                let n = stmt.column_count();
                let mut r = stmt.query([]).unwrap();
                while let Some(row) = r.next().unwrap() {
                    let cols: Vec<String> = (0..n)
                        .map(|i| format!("{:?}", row.get_ref(i).unwrap()))
                        .collect();
                    rows.push(format!("{table}: {}", cols.join(" | ")));
                }
            }
        }
        Backend::Postgres => {
            let mut client = postgres::Client::connect(location, postgres::NoTls).unwrap();
            for (table, key) in TABLES {
                for row in client
                    .query(
                        &format!("SELECT to_jsonb(t)::text FROM {table} AS t ORDER BY {key}"),
                        &[],
                    )
                    .unwrap()
                {
                    rows.push(format!("{table}: {}", row.get::<_, String>(0)));
                }
            }
        }
    }
    rows
}

fn fresh_location(backend: Backend, dir: &tempfile::TempDir) -> String {
    match backend {
        Backend::Sqlite => dir.path().join("v22.db").to_string_lossy().into_owned(),
        Backend::Postgres => {
            let name = scribe_db::testing::unique_test_name("scribe_upgrade_v23");
            scribe_db::testing::fresh_test_database(&name).unwrap()
        }
    }
}

fn a_v22_store_upgrades_to_v23_with_its_rows_intact(backend: Backend) {
    let dir = tempfile::tempdir().unwrap();
    let location = fresh_location(backend, &dir);
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
    let before = dump(backend, &location);
    assert!(before.len() >= 6, "{before:#?}");

    let hand = ManualClock::new(978_307_200_000); // 2001, far from the wall clock
    let options = Options {
        clock: hand.clock(),
        ..Options::default()
    };
    let db = Arc::new(Database::open_with(&location, options).unwrap());
    assert_eq!(
        db.schema_version().unwrap(),
        Database::known_schema_version()
    );
    assert_eq!(dump(backend, &location), before, "rows changed by V23");
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
