//! Upgrade to schema version 24 (part JSON holding a NUL on PostgreSQL): a store written by
//! version 23 — sessions, messages, text and tool parts — opens, migrates to 24 and keeps
//! every row of sessions, messages, parts and files exactly; its search documents stay
//! valid (`scribe db check` finds nothing: V24 redefines how they are computed, and for a
//! part without NUL they are the same), and afterwards a part holding a NUL is stored,
//! read back and found. Both backends (V24 does nothing on SQLite).
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::sync::Arc;

use scribe_db::{Backend, Database, Options};
use scribe_message::{MessageService, NewMessage, Part, Role, SearchOptions};
use scribe_session::{NewSession, SessionService};
use scribe_tests::{dump_store_rows, open_upgraded, upgrade_location};
use serde_json::json;

fn a_v23_store_upgrades_to_v24_with_its_rows_intact(backend: Backend) {
    let dir = tempfile::tempdir().unwrap();
    let location = upgrade_location(backend, &dir, "v23.db", "scribe_upgrade_v24").unwrap();
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
    let before = dump_store_rows(backend, &location).unwrap();
    assert!(before.len() >= 4, "{before:#?}");

    let db = open_upgraded(backend, &location, Options::default(), &before, "V24");
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
