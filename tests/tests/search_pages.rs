//! Pages of a ranked search where many hits rank alike: PostgreSQL cuts a page by the rank
//! of its last hit (the `offset + limit`-th best) and orders only the hits at or above it by
//! their message's time, so hits tied with the page's last one, the page past the end and
//! a page longer than the hits must come out as whole pages of the one order (rank, then
//! newest first): every hit once, none left out, a clearly better hit first.
//!
//! Unfiltered word queries find that last rank from the best parts' messages, looked up
//! for a few hundred parts at most: a message whose parts crowd the top counts once.
//!
//! Runs on SQLite, and on PostgreSQL under `.ci/with-postgres … -- --ignored`.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::BTreeSet;

use scribe_message::{MessageService, NewMessage, Part, Role, SearchOptions};
use scribe_tests::{Backend, TestDb, backends, create_session};

/// Messages that rank alike (the same text).
const ALIKE: usize = 25;

fn pages_of_equal_ranks_are_whole_and_newest_first(backend: Backend) {
    let db = TestDb::new(backend);
    let svc = MessageService::new(db.db.clone());
    let session = create_session(&db.db, Some("pages")).unwrap();
    let add = |text: &str| {
        svc.create(NewMessage::new(
            &session,
            Role::User,
            vec![Part::text(text)],
        ))
        .unwrap()
        .id
    };
    let best = add("kestrel kestrel kestrel kestrel");
    let alike: Vec<String> = (0..ALIKE)
        .map(|_| add("a kestrel over the field, hovering before it dives"))
        .collect();
    let page = |offset: usize, limit: usize| -> Vec<String> {
        let options = SearchOptions {
            limit,
            offset,
            ..SearchOptions::default()
        };
        svc.search("kestrel", &options)
            .unwrap()
            .into_iter()
            .map(|h| h.message_id)
            .collect()
    };
    let all = page(0, 100);
    assert_eq!(all.len(), ALIKE + 1, "{all:?}");
    assert_eq!(all[0], best);
    for limit in [1, 3, 7, 20] {
        let mut paged = Vec::new();
        let mut offset = 0;
        loop {
            let hits = page(offset, limit);
            assert!(hits.len() <= limit);
            if hits.is_empty() {
                break;
            }
            offset += hits.len();
            paged.extend(hits);
        }
        assert_eq!(paged, all, "pages of {limit}");
    }
    assert!(page(ALIKE + 1, 5).is_empty());
    let unique: BTreeSet<&String> = all.iter().collect();
    assert_eq!(unique.len(), all.len());
    if backend == Backend::Postgres {
        // Ties are newest first there (the order the tests of both backends pin elsewhere
        // only for PostgreSQL).
        let newest_first: Vec<String> = alike.iter().rev().cloned().collect();
        assert_eq!(all[1..], newest_first[..]);
    }
}

/// A message whose parts are the best matches by the hundred (more than PostgreSQL looks up
/// to find the page's last rank) is one hit, and the other messages still fill the page.
fn a_message_of_many_best_parts_is_one_hit(backend: Backend) {
    let db = TestDb::new(backend);
    let svc = MessageService::new(db.db.clone());
    let session = create_session(&db.db, Some("crowded")).unwrap();
    let add = |parts: Vec<Part>| {
        svc.create(NewMessage::new(&session, Role::Assistant, parts))
            .unwrap()
            .id
    };
    let others: Vec<String> = (0..30)
        .map(|i| {
            add(vec![Part::text(format!(
                "a kestrel seen on day {i}, and then the field"
            ))])
        })
        .collect();
    let crowded = add((0..250)
        .map(|_| Part::text("kestrel kestrel kestrel"))
        .collect());
    let options = |offset: usize, limit: usize| SearchOptions {
        limit,
        offset,
        ..SearchOptions::default()
    };
    let ids = |offset, limit| -> Vec<String> {
        svc.search("kestrel", &options(offset, limit))
            .unwrap()
            .into_iter()
            .map(|h| h.message_id)
            .collect()
    };
    let all = ids(0, 100);
    assert_eq!(all.len(), others.len() + 1, "{all:?}");
    assert_eq!(all[0], crowded);
    let first = ids(0, 20);
    assert_eq!(first, all[..20]);
    let second = ids(20, 20);
    assert_eq!(second, all[20..]);
    if backend == Backend::Postgres {
        let newest_first: Vec<String> = others.iter().rev().cloned().collect();
        assert_eq!(all[1..], newest_first[..]);
    }
}

backends!(
    pages_of_equal_ranks_are_whole_and_newest_first,
    a_message_of_many_best_parts_is_one_hit
);
