//! Upgrade to schema version 25 (a part's word document bounded to what PostgreSQL's
//! `tsvector` holds): a store written by version 24 — a session, a short text part and one
//! of ~330 KB of words, which V25 recomputes on PostgreSQL — opens, migrates and keeps every
//! row of sessions, messages, parts and files exactly; `scribe db check` finds every search
//! document right; the long part's last word is still found; and afterwards a part of
//! ~250,000 different words (whose write failed on PostgreSQL at version 24) is stored and
//! found by its first word. Both backends (V25 does nothing on SQLite).
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::sync::Arc;

use scribe_db::{Backend, Database, Options};
use scribe_message::{MessageService, NewMessage, Part, Role, SearchOptions};
use scribe_session::{NewSession, SessionService};
use scribe_tests::{dump_store_rows, open_upgraded, upgrade_location};

fn a_v24_store_upgrades_to_v25_with_its_rows_intact(backend: Backend) {
    let dir = tempfile::tempdir().unwrap();
    let location = upgrade_location(backend, &dir, "v24.db", "scribe_upgrade_v25").unwrap();
    let long: String = (0..30_000)
        .map(|i| format!("long{i:06}"))
        .collect::<Vec<_>>()
        .join(" ");
    let session_id = {
        let db = Arc::new(Database::open_at_version(&location, 24).unwrap());
        assert_eq!(db.schema_version().unwrap(), 24);
        let sessions = SessionService::new(Arc::clone(&db));
        let messages = MessageService::new(Arc::clone(&db));
        let s = sessions.create(NewSession::default()).unwrap();
        messages
            .create(NewMessage::new(
                &s.id,
                Role::Assistant,
                vec![Part::text("hello from v24"), Part::text(long.clone())],
            ))
            .unwrap();
        db.index_pending().unwrap();
        s.id
    };
    let before = dump_store_rows(backend, &location).unwrap();
    assert!(before.len() >= 4, "{before:#?}");

    let db = open_upgraded(backend, &location, Options::default(), &before, "V25");
    assert_eq!(db.check().unwrap().problems(), Vec::<String>::new());

    let messages = MessageService::new(Arc::clone(&db));
    let many: String = (0..250_000)
        .map(|i| format!("w{i:07}x"))
        .collect::<Vec<_>>()
        .join(" ");
    messages
        .create(NewMessage::new(
            &session_id,
            Role::User,
            vec![Part::text(many)],
        ))
        .unwrap();
    db.index_pending().unwrap();
    let options = SearchOptions {
        limit: 10,
        ..SearchOptions::default()
    };
    for word in ["hello", "long000000", "long029999", "w0000000x"] {
        assert_eq!(messages.search(word, &options).unwrap().len(), 1, "{word}");
    }
    assert_eq!(db.check().unwrap().problems(), Vec::<String>::new());
}

scribe_tests::backends!(a_v24_store_upgrades_to_v25_with_its_rows_intact);
