//! Search highlights come only from real matches: stored text holding the snippet's own
//! marker characters (STX/ETX, U+0002/U+0003, which terminal output captured in a tool
//! result can hold) neither forges a highlight nor loses those characters, on every route
//! (word index, typing window, trigram index with its plain LIKE half, LIKE alone) and on
//! both backends. In a snippet a stored STX is shown as `␂` (U+2402) and a stored ETX as
//! `␃` (U+2403); every other character is kept as stored.
//!
//! Runs on SQLite, and on PostgreSQL under `.ci/with-postgres … -- --ignored`.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use scribe_message::{
    MATCH_END, MATCH_START, MessageService, NewMessage, Part, Role, SearchOptions, TYPING_WINDOW,
};
use scribe_tests::{Backend, TestDb, backends, create_session};
use serde_json::json;

/// A snippet's text without markers, and its highlighted pieces (as a client reads it:
/// the web API's `split_snippet`, the CLI's styling).
fn split(snippet: &str) -> (String, Vec<String>) {
    let mut text = String::new();
    let mut marked = Vec::new();
    let mut rest = snippet;
    while let Some(start) = rest.find(MATCH_START) {
        text.push_str(&rest[..start]);
        rest = &rest[start + MATCH_START.len()..];
        let end = rest.find(MATCH_END).unwrap_or(rest.len());
        text.push_str(&rest[..end]);
        marked.push(rest[..end].to_owned());
        rest = rest.get(end + MATCH_END.len()..).unwrap_or("");
    }
    text.push_str(rest);
    (text, marked)
}

struct Store {
    svc: MessageService,
    db: TestDb,
}

impl Store {
    fn new(backend: Backend) -> Store {
        let db = TestDb::new(backend);
        let svc = MessageService::new(db.db.clone());
        Store { svc, db }
    }

    /// A user message with one text part holding `text`: its id.
    fn say(&self, session: &str, text: &str) -> String {
        self.svc
            .create(NewMessage::new(session, Role::User, vec![Part::text(text)]))
            .unwrap()
            .id
    }

    /// The snippet of `message`'s hit for `query` (with the typing window when `typing`).
    fn snippet(&self, query: &str, typing: bool, message: &str) -> String {
        let options = SearchOptions {
            window: typing.then_some(TYPING_WINDOW),
            ..SearchOptions::default()
        };
        let hits = self.svc.search(query, &options).unwrap();
        let hit = hits
            .iter()
            .find(|h| h.message_id == message)
            .unwrap_or_else(|| panic!("{query:?} did not find {message}: {hits:?}"));
        hit.snippet.clone()
    }
}

/// The probe's text: `red` between a stored STX and ETX is not a match, and both
/// characters stay in the snippet (as their visible symbols); only `needle` is marked.
fn stored_markers_forge_no_highlight(backend: Backend) {
    let s = Store::new(backend);
    let session = create_session(&s.db.db, Some("markers")).unwrap();
    let id = s.say(&session, "output \u{2}red\u{3} then the needle here");
    for (query, typing) in [("needle", false), ("needle", true), ("nee*", true)] {
        let snippet = s.snippet(query, typing, &id);
        assert_eq!(
            snippet, "output \u{2402}red\u{2403} then the \u{2}needle\u{3} here",
            "{query:?} typing {typing}"
        );
        let (text, marked) = split(&snippet);
        assert_eq!(text, "output ␂red␃ then the needle here");
        assert_eq!(marked, ["needle"], "{query:?} typing {typing}");
    }
}

/// A stored marker right next to a real match: the match alone is marked, the stored
/// characters stay beside it, reversed order and a tool's output too.
fn stored_markers_next_to_a_match_stay_text(backend: Backend) {
    let s = Store::new(backend);
    let session = create_session(&s.db.db, Some("markers")).unwrap();
    let wrapped = s.say(&session, "log: \u{2}haystack\u{3} done");
    let reversed = s.say(&session, "\u{3}haystack\u{2}");
    let tool = s
        .svc
        .create(NewMessage::new(
            &session,
            Role::Assistant,
            vec![{
                let mut part = Part::tool("call_1", "bash", json!({"command": "make"}));
                if let Part::Tool(t) = &mut part {
                    t.state.start(1).unwrap();
                    t.state
                        .complete(
                            "\u{1b}[1m\u{2}BUILD\u{3}\u{2} ok\u{3}",
                            "bash",
                            json!(null),
                            2,
                        )
                        .unwrap();
                }
                part
            }],
        ))
        .unwrap()
        .id;
    for (query, typing) in [("haystack", false), ("hay*", true)] {
        assert_eq!(
            s.snippet(query, typing, &wrapped),
            "log: \u{2402}\u{2}haystack\u{3}\u{2403} done",
            "{query:?} typing {typing}"
        );
        assert_eq!(
            s.snippet(query, typing, &reversed),
            "\u{2403}\u{2}haystack\u{3}\u{2402}",
            "{query:?} typing {typing}"
        );
    }
    for (query, typing) in [("build", false), ("bui*", true)] {
        let (text, marked) = split(&s.snippet(query, typing, &tool));
        assert!(
            text.contains("\u{1b}[1m\u{2402}BUILD\u{2403}\u{2402} ok\u{2403}"),
            "{query:?} typing {typing}: {text:?}"
        );
        assert_eq!(marked, ["BUILD"], "{query:?} typing {typing}");
    }
}

/// The substring routes: the trigram index (3+ CJK characters), its plain-text half
/// (a Latin alternative of a CJK query), and LIKE alone (1–2 CJK characters).
fn stored_markers_on_the_substring_routes(backend: Backend) {
    let s = Store::new(backend);
    let session = create_session(&s.db.db, Some("markers")).unwrap();
    let cjk = s.say(&session, "数据库\u{2}红\u{3}迁移失败\u{3}");
    let plain = s.say(&session, "a \u{2}b\u{3} zebra\u{2}");
    let short = s.say(&session, "这是\u{2}中文\u{3}文本");

    let (text, marked) = split(&s.snippet("迁移失败", false, &cjk));
    assert_eq!(text, "数据库␂红␃迁移失败␃");
    assert_eq!(marked.concat(), "迁移失败", "{marked:?}");

    let (text, marked) = split(&s.snippet("数据库 OR zebra", false, &plain));
    assert_eq!(text, "a ␂b␃ zebra␂");
    assert_eq!(marked, ["zebra"]);

    assert_eq!(
        s.snippet("中文", false, &short),
        "这是\u{2402}\u{2}中文\u{3}\u{2403}文本"
    );
}

/// Every occurrence of a symbol or short literal term the query requires is marked, next
/// to the word index's marks, never an excluded one; touching occurrences are one mark.
/// Before, `error 🚀` marked only the `error`s, and `🚀` only its first rocket.
fn every_required_literal_is_marked(backend: Backend) {
    let s = Store::new(backend);
    let session = create_session(&s.db.db, Some("literals")).unwrap();
    let rockets = s.say(
        &session,
        "The deploy error 🚀 happened after the rocket 🚀 launch; another error later.",
    );
    let plain = s.say(&session, "an error without symbols");
    let pair = s.say(&session, "go 🚀🚀 now");
    let short = s.say(&session, "Ship X中 now");
    let marked = |query: &str, message: &str| {
        let (text, marked) = split(&s.snippet(query, false, message));
        assert!(!text.is_empty(), "{query:?}");
        marked
    };
    assert_eq!(marked("error 🚀", &rockets), ["error", "🚀", "🚀", "error"]);
    assert_eq!(marked("🚀", &rockets), ["🚀", "🚀"]);
    assert_eq!(marked("rocket 🚀", &rockets), ["🚀", "rocket", "🚀"]);
    assert_eq!(
        marked("error OR 🚀", &rockets),
        ["error", "🚀", "🚀", "error"]
    );
    // An excluded term is never marked (and leaves out the messages holding it).
    assert_eq!(marked("error -🚀", &plain), ["error"]);
    let hits = s
        .svc
        .search("error -🚀", &SearchOptions::default())
        .unwrap();
    assert!(hits.iter().all(|h| h.message_id != rockets), "{hits:?}");
    assert_eq!(marked("🚀", &pair), ["🚀🚀"]);
    // Compared as the substring routes match: ASCII letters without case.
    assert_eq!(marked("x中", &short), ["X中"]);
}

backends!(
    every_required_literal_is_marked,
    stored_markers_forge_no_highlight,
    stored_markers_next_to_a_match_stay_text,
    stored_markers_on_the_substring_routes,
);
