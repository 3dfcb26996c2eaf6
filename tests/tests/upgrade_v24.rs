//! Upgrade to schema version 24 (part JSON holding a NUL on PostgreSQL): a store written by
//! version 23 — sessions, messages, text and tool parts — opens, migrates to 24 and keeps
//! every row of sessions, messages, parts and files exactly; its search documents stay
//! valid (`scribe db check` finds nothing: V24 redefines how they are computed, and for a
//! part without NUL they are the same), and afterwards a part holding a NUL is stored,
//! read back and found. Both backends (V24 does nothing on SQLite).
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::sync::Arc;

use scribe_db::{Backend, Database};
use scribe_message::{MessageService, NewMessage, Part, Role, SearchOptions};
use scribe_session::{NewSession, SessionService};
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
        Backend::Sqlite => dir.path().join("v23.db").to_string_lossy().into_owned(),
        Backend::Postgres => {
            let name = scribe_db::testing::unique_test_name("scribe_upgrade_v24");
            scribe_db::testing::fresh_test_database(&name).unwrap()
        }
    }
}

fn a_v23_store_upgrades_to_v24_with_its_rows_intact(backend: Backend) {
    let dir = tempfile::tempdir().unwrap();
    let location = fresh_location(backend, &dir);
    let session_id = {
        let db = Arc::new(Database::open_at_version(&location, 23).unwrap());
        assert_eq!(db.schema_version().unwrap(), 23);
        let sessions = SessionService::new(Arc::clone(&db));
        let messages = MessageService::new(Arc::clone(&db));
        let s = sessions.create(NewSession::default()).unwrap();
        messages
            .create(NewMessage::new(
                &s.id,
                Role::Assistant,
                vec![
                    Part::text("hello from v23, a literal \\u0000 here"),
                    Part::tool("call_1", "bash", json!({"command": "ls"})),
                ],
            ))
            .unwrap();
        sessions
            .update(&s.id, |s| s.title = Some("before v24".into()))
            .unwrap();
        s.id
    };
    let before = dump(backend, &location);
    assert!(before.len() >= 4, "{before:#?}");

    let db = Arc::new(Database::open(&location).unwrap());
    assert_eq!(db.schema_version().unwrap(), 24);
    assert_eq!(dump(backend, &location), before, "rows changed by V24");
    assert_eq!(db.check().unwrap().problems(), Vec::<String>::new());

    let messages = MessageService::new(Arc::clone(&db));
    let m = messages
        .create(NewMessage::new(
            &session_id,
            Role::User,
            vec![Part::text("after\u{0}upgrade")],
        ))
        .unwrap();
    assert_eq!(messages.get(&m.id).unwrap(), m);
    db.index_pending().unwrap();
    let options = SearchOptions {
        limit: 10,
        ..SearchOptions::default()
    };
    for (word, hits) in [("upgrade", 1), ("after", 1), ("hello", 1), ("u0000", 1)] {
        assert_eq!(
            messages.search(word, &options).unwrap().len(),
            hits,
            "{word}"
        );
    }
    assert_eq!(db.check().unwrap().problems(), Vec::<String>::new());
}

scribe_tests::backends!(a_v23_store_upgrades_to_v24_with_its_rows_intact);
