//! Upgrade to schema version 26 (PostgreSQL keeps a part's search row, its text and words,
//! whole in its page): a store written by version 25 — parts of a few words, of some
//! kilobytes (whose row PostgreSQL compressed until V26) and of CJK text — opens, migrates
//! and keeps every row of sessions, messages, parts and files exactly; `scribe db check`
//! finds every search document right; the same searches find the same messages in the same
//! order as before the upgrade. On PostgreSQL no search row that fits a page is compressed
//! any more, those written before the upgrade and after it. Both backends (V26 does
//! nothing on SQLite).
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::sync::Arc;

use scribe_db::{Backend, Database, Options};
use scribe_message::{MessageService, NewMessage, Part, Role, SearchOptions};
use scribe_session::{NewSession, SessionService};
use scribe_tests::{dump_store_rows, open_upgraded, upgrade_location};

/// A text of about 3 kB that compresses well: with its words, its row is past the 2 kB
/// at which PostgreSQL compressed it until V26, and within a page.
fn long_text(n: usize) -> String {
    (0..120)
        .map(|i| format!("deploy{} step {i} finished", n + i % 7))
        .collect::<Vec<_>>()
        .join(" ")
}

/// The searches compared before and after the upgrade: message ids and ranks, in order.
fn answers(messages: &MessageService) -> Vec<Vec<(String, String)>> {
    let options = SearchOptions {
        limit: 10,
        ..SearchOptions::default()
    };
    [
        "finished",
        "step",
        "deploy3*",
        "hello",
        "\"step 5\"",
        "数据库",
    ]
    .iter()
    .map(|q| {
        messages
            .search(q, &options)
            .unwrap()
            .into_iter()
            .map(|h| (h.message_id, format!("{:.6}", h.rank)))
            .collect()
    })
    .collect()
}

/// How many of the PostgreSQL store's search rows have a compressed text or words.
fn compressed_rows(location: &str) -> i64 {
    let mut client = postgres::Client::connect(location, postgres::NoTls).unwrap();
    client
        .query_one(
            "SELECT count(*) FROM parts_fts WHERE pg_column_compression(search_text) IS NOT NULL \
             OR pg_column_compression(words) IS NOT NULL",
            &[],
        )
        .unwrap()
        .get(0)
}

fn a_v25_store_upgrades_to_v26_with_its_rows_intact(backend: Backend) {
    let dir = tempfile::tempdir().unwrap();
    let location = upgrade_location(backend, &dir, "v25.db", "scribe_upgrade_v26").unwrap();
    let (session_id, before_answers) = {
        let db = Arc::new(Database::open_at_version(&location, 25).unwrap());
        assert_eq!(db.schema_version().unwrap(), 25);
        let sessions = SessionService::new(Arc::clone(&db));
        let messages = MessageService::new(Arc::clone(&db));
        let s = sessions.create(NewSession::default()).unwrap();
        for n in 0..6 {
            messages
                .create(NewMessage::new(
                    &s.id,
                    Role::Assistant,
                    vec![
                        Part::text(format!("hello from v25, step {n} finished")),
                        Part::text(long_text(n)),
                    ],
                ))
                .unwrap();
        }
        messages
            .create(NewMessage::new(
                &s.id,
                Role::User,
                vec![Part::text("数据库迁移失败 ".repeat(150))],
            ))
            .unwrap();
        db.index_pending().unwrap();
        (s.id, answers(&messages))
    };
    if backend == Backend::Postgres {
        // Version 25 compressed the rows of the long parts.
        assert!(compressed_rows(&location) >= 6);
    }
    let before = dump_store_rows(backend, &location).unwrap();
    assert!(before.len() >= 4, "{before:#?}");

    let db = open_upgraded(backend, &location, Options::default(), &before, "V26");
    assert_eq!(db.check().unwrap().problems(), Vec::<String>::new());
    let messages = MessageService::new(Arc::clone(&db));
    assert_eq!(answers(&messages), before_answers);
    assert!(
        before_answers.iter().all(|hits| !hits.is_empty()),
        "{before_answers:?}"
    );

    messages
        .create(NewMessage::new(
            &session_id,
            Role::User,
            vec![Part::text(long_text(100))],
        ))
        .unwrap();
    db.index_pending().unwrap();
    if backend == Backend::Postgres {
        assert_eq!(compressed_rows(&location), 0);
    }
    let hits = messages
        .search("deploy100", &SearchOptions::default())
        .unwrap();
    assert_eq!(hits.len(), 1, "{hits:#?}");
    assert_eq!(db.check().unwrap().problems(), Vec::<String>::new());
}

scribe_tests::backends!(a_v25_store_upgrades_to_v26_with_its_rows_intact);
