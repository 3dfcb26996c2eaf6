//! The ranking window of a search (`SearchOptions::window`, what the web viewer sets while
//! the user types): only the newest matching parts that pass the filters are ranked, and
//! the hits are the best of those, best first. Without it the whole history is ranked.
//!
//! One store per backend: an old message that is the best match for `rust` by far, then
//! newer matches of varying strength in one session, then newer still in another session.
//! Asked with and without windows, filters and paging; the LIKE route ignores the window.
//! Runs on SQLite, and on PostgreSQL under `.ci/with-postgres … -- --ignored`.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::BTreeSet;

use scribe_message::{MessageService, NewMessage, Part, Role, SearchHit, SearchOptions};
use scribe_tests::{Backend, TestDb, backends, create_session};

/// Newer matches in the first session, after the old best one.
const NEWER: usize = 30;
/// Matches in the second session, written last.
const OTHER: usize = 12;
/// The window the tests rank.
const WINDOW: usize = 10;

struct Corpus {
    svc: MessageService,
    /// The old message that ranks first over the whole history.
    old_best: String,
    /// The first session's matching messages after it, oldest first.
    newer: Vec<String>,
    /// The second session's matching messages, oldest first.
    other: Vec<String>,
    first_session: String,
    _db: TestDb,
}

fn corpus(backend: Backend) -> Corpus {
    let db = TestDb::new(backend);
    let svc = MessageService::new(db.db.clone());
    let first = create_session(&db.db, Some("first")).unwrap();
    let second = create_session(&db.db, Some("second")).unwrap();
    let add = |session: &str, text: String| {
        svc.create(NewMessage::new(session, Role::User, vec![Part::text(text)]))
            .unwrap()
            .id
    };
    let old_best = add(&first, "rust rust rust rust rust rust".into());
    // Filler that matches nothing, so the windows below hold only these messages.
    add(&first, "nothing to see here".into());
    let newer: Vec<String> = (0..NEWER)
        .map(|i| {
            // One to three `rust` among more or less filler: bm25 tells them apart, and
            // none comes near the old message.
            let rust = vec!["rust"; 1 + i % 3].join(" ");
            let filler = vec!["filler words about other things"; 1 + i % 4].join(" ");
            add(&first, format!("{rust} {filler}"))
        })
        .collect();
    let other: Vec<String> = (0..OTHER)
        .map(|i| add(&second, format!("rust in the second session, number {i}")))
        .collect();
    // Something the LIKE route (one CJK character) finds in every session.
    for session in [&first, &second] {
        for _ in 0..3 {
            add(session, "中文".into());
        }
    }
    Corpus {
        svc,
        old_best,
        newer,
        other,
        first_session: first,
        _db: db,
    }
}

fn ids(hits: &[SearchHit]) -> BTreeSet<String> {
    hits.iter().map(|h| h.message_id.clone()).collect()
}

fn assert_ranked(hits: &[SearchHit]) {
    assert!(
        hits.windows(2).all(|w| w[0].rank <= w[1].rank),
        "hits are not in rank order: {:?}",
        hits.iter().map(|h| h.rank).collect::<Vec<_>>()
    );
}

fn options(window: Option<usize>) -> SearchOptions {
    SearchOptions {
        limit: 100,
        window,
        ..SearchOptions::default()
    }
}

backends!(
    the_window_ranks_only_the_newest_matches,
    the_window_counts_matches_that_pass_the_filters,
    pages_stay_inside_the_window,
    substring_scans_ignore_the_window,
);

fn the_window_ranks_only_the_newest_matches(backend: Backend) {
    let c = corpus(backend);
    // The whole history: the old message ranks first.
    let all = c.svc.search("rust", &options(None)).unwrap();
    assert_eq!(all.len(), 1 + NEWER + OTHER);
    assert_eq!(all[0].message_id, c.old_best);
    assert_ranked(&all);
    // The default is the whole history.
    assert_eq!(
        c.svc
            .search(
                "rust",
                &SearchOptions {
                    limit: 100,
                    ..SearchOptions::default()
                }
            )
            .unwrap(),
        all
    );

    // A window: exactly the newest WINDOW matches (all in the second session, then the
    // newest of the first), best first; the old best is outside it.
    let windowed = c.svc.search("rust", &options(Some(WINDOW))).unwrap();
    let newest: BTreeSet<String> = c.other.iter().rev().take(WINDOW).cloned().collect();
    assert_eq!(ids(&windowed), newest);
    assert_ranked(&windowed);
    assert!(!ids(&windowed).contains(&c.old_best));
    // Its hits carry what full hits carry.
    for hit in &windowed {
        let full = all.iter().find(|h| h.message_id == hit.message_id).unwrap();
        assert_eq!(hit.snippet, full.snippet);
        assert_eq!(hit.title, full.title);
    }

    // A window reaching past the old message finds it first again; one larger than the
    // matches answers as the whole history does.
    let reaching = c
        .svc
        .search("rust", &options(Some(1 + NEWER + OTHER)))
        .unwrap();
    assert_eq!(reaching, all);
    assert_eq!(c.svc.search("rust", &options(Some(10_000))).unwrap(), all);
    // A window that leaves out only the old message: the rest, ranked.
    let without_old = c.svc.search("rust", &options(Some(NEWER + OTHER))).unwrap();
    assert_eq!(without_old.len(), NEWER + OTHER);
    assert!(!ids(&without_old).contains(&c.old_best));
    assert_ranked(&without_old);
    // Ranked by the same measure as the whole history, only over fewer matches.
    let rest: Vec<&str> = all[1..].iter().map(|h| h.message_id.as_str()).collect();
    let got: Vec<&str> = without_old.iter().map(|h| h.message_id.as_str()).collect();
    assert_eq!(got, rest);

    // An empty window ranks nothing.
    assert!(c.svc.search("rust", &options(Some(0))).unwrap().is_empty());
}

fn the_window_counts_matches_that_pass_the_filters(backend: Backend) {
    let c = corpus(backend);
    // The second session's matches are the newest, but they do not pass the filter: the
    // window holds the first session's newest matches.
    let hits = c
        .svc
        .search(
            "rust",
            &SearchOptions {
                session_id: Some(c.first_session.clone()),
                ..options(Some(WINDOW))
            },
        )
        .unwrap();
    let newest: BTreeSet<String> = c.newer.iter().rev().take(WINDOW).cloned().collect();
    assert_eq!(ids(&hits), newest);
    assert_ranked(&hits);
    // Without the window the same filter finds the old best first.
    let all = c
        .svc
        .search(
            "rust",
            &SearchOptions {
                session_id: Some(c.first_session.clone()),
                ..options(None)
            },
        )
        .unwrap();
    assert_eq!(all.len(), 1 + NEWER);
    assert_eq!(all[0].message_id, c.old_best);
}

fn pages_stay_inside_the_window(backend: Backend) {
    let c = corpus(backend);
    let page = |offset: usize| {
        c.svc
            .search(
                "rust",
                &SearchOptions {
                    limit: 4,
                    offset,
                    ..options(Some(WINDOW))
                },
            )
            .unwrap()
    };
    let whole = c.svc.search("rust", &options(Some(WINDOW))).unwrap();
    let pages: Vec<SearchHit> = [0, 4, 8].into_iter().flat_map(page).collect();
    assert_eq!(pages, whole);
    assert!(page(12).is_empty());
}

fn substring_scans_ignore_the_window(backend: Backend) {
    let c = corpus(backend);
    // One CJK character: the LIKE route, newest first, not ranked.
    let hits = c.svc.search("中", &options(Some(1))).unwrap();
    assert_eq!(hits.len(), 6);
    assert_eq!(hits, c.svc.search("中", &options(None)).unwrap());
}
