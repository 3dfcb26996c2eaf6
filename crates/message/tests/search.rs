//! MessageService::search on a real database: every sanitizer case runs, the query syntax
//! finds the right messages on each route (words, trigram, LIKE), filters apply on every
//! route, hits never repeat a message, tool parts are found until changed or deleted, and
//! any random string returns Ok.
//!
//! Every test runs twice, writing and searching through the services: on an SQLite file
//! (`<test>::sqlite`) and on a fresh PostgreSQL database (`<test>::postgres`, ignored
//! unless run under `.ci/with-postgres … -- --ignored`). `tests/tests/search_backends.rs`
//! compares the two backends' answers about one store hit by hit.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::cell::RefCell;
use std::collections::HashSet;
use std::sync::Arc;

use common::{completed_tool, say, service};
use proptest::prelude::*;
use scribe_db::ids::{Prefix, new_id};
use scribe_db::{Backend, Database, queries};
use scribe_message::{
    MAX_TERMS, MessageService, NewMessage, Part, Role, SearchHit, SearchOptions, ToolState,
};
use serde_json::json;

/// Every input of the sanitizer's table (crates/message/src/search_query/tests.rs).
const SANITIZER_INPUTS: &[&str] = &[
    "hello",
    "hello world",
    "hello AND world",
    r#""exact phrase""#,
    "docker OR kubernetes",
    "python NOT java",
    "deploy*",
    r#""connection po"*"#,
    "a b NOT c OR d",
    "cats or dogs",
    r#""hello world"#,
    r#"say "hi"#,
    r#"""#,
    "(hello",
    "hello)",
    "((a OR b)",
    "[x]",
    "{col}: x",
    "hello AND",
    "hello OR",
    "OR x",
    "AND x",
    "a AND OR b",
    "a OR OR b",
    "a NOT",
    "a NOT NOT b",
    "NOT x",
    "NOT x y",
    "a OR NOT b",
    "OR AND NOT",
    "C++",
    "C#",
    "don't",
    "foo:bar",
    "content:secret",
    "-foo",
    "100%",
    "user@example.com",
    "^start",
    "^",
    "NEAR(a b)",
    "NEAR(",
    "*",
    "* foo",
    "a + b",
    "",
    "   \t\n",
    "!!! ??? ---",
    "chat-send",
    "P2.2",
    "my-app.config.ts",
    "sp_new1",
    "sp_new*",
    "fix chat-send bug",
    r#"a"b"#,
    r#""a ""b""#,
    "résumé café",
    "a\u{0}b",
    "数据库连接池",
    "连接池",
    "中文",
    "中",
    "中文 数据库",
    "数据库 OR 缓存",
    "数据库 OR 缓存层",
    "数据库 NOT 连接池",
    "数据* rust",
    "数据*",
    "rust 数据库连接池",
    "「中文」",
    "NOT 中文",
    "データベース",
    "한국어",
    "🚀",
    "ship🚀it",
    "🚀 deployed",
    "👍🏽",
    "👨\u{200d}👩\u{200d}👧",
    "->",
    "::",
    "!=",
    "&&",
    "$",
    "#",
    "%",
    "_",
    "\\",
    "'",
    "@user",
    "...",
    "-> OR ::",
    "-> NOT ::",
    "foo OR ->",
    r#""()""#,
    "中 🚀",
];

/// Runs each named test (a `fn(Backend)`) on SQLite and on PostgreSQL.
macro_rules! on_both_backends {
    ($($name:ident),* $(,)?) => {$(
        mod $name {
            #[test]
            fn sqlite() {
                super::$name(scribe_db::Backend::Sqlite);
            }

            #[test]
            #[ignore = "needs PostgreSQL: run under .ci/with-postgres"]
            fn postgres() {
                super::$name(scribe_db::Backend::Postgres);
            }
        }
    )*};
}

on_both_backends!(
    every_sanitizer_case_runs_through_search,
    words_phrases_or_not_prefix_and_identifiers_find_the_right_messages,
    cjk_uses_trigrams_from_three_characters_and_like_below,
    hits_carry_snippet_context_and_session_fields,
    filters_apply_on_every_route,
    a_message_with_many_matching_parts_is_one_hit,
    tool_names_inputs_and_outputs_are_found_until_changed_or_deleted,
    results_order_by_rank_then_recency,
    emoji_symbols_and_short_strings_are_found_as_substrings,
    symbols_next_to_words_are_searched_not_dropped,
    an_exclusion_leaves_out_the_whole_message,
    an_exclusion_leaves_out_the_whole_message_on_substring_routes,
    pages_with_an_exclusion_neither_repeat_nor_skip,
    a_long_query_is_searched_whole_or_refused,
    a_word_many_times_in_one_part_is_found_with_a_marked_snippet,
);

/// A fresh, empty PostgreSQL database on the test server, opened (and migrated).
fn fresh_postgres() -> Database {
    let name = scribe_db::testing::unique_test_name("scribe_msg_search");
    Database::open(scribe_db::testing::fresh_test_database(&name).unwrap()).unwrap()
}

struct Fixture {
    _dir: tempfile::TempDir,
    svc: MessageService,
    backend: Backend,
    cli: String,
    tg: String,
}

/// A session row made with the generated query (on either backend).
fn session_on(svc: &MessageService, source: &str, title: &str) -> String {
    let id = new_id(Prefix::Session);
    svc.database()
        .write(|tx| {
            tx.q().create_session(&queries::CreateSessionParams {
                title: Some(title),
                model: Some("claude-test"),
                ..scribe_db::testing::bare_session(&id, source, scribe_db::now_ms())
            })
        })
        .unwrap();
    id
}

impl Fixture {
    fn new(backend: Backend) -> Fixture {
        let (dir, svc) = service();
        let svc = match backend {
            Backend::Sqlite => svc,
            Backend::Postgres => MessageService::new(Arc::new(fresh_postgres())),
        };
        assert_eq!(svc.database().backend(), backend);
        let cli = session_on(&svc, "cli", "cli work");
        let tg = session_on(&svc, "telegram", "chat");
        Fixture {
            _dir: dir,
            svc,
            backend,
            cli,
            tg,
        }
    }

    fn search_with(
        &self,
        query: &str,
        options: &SearchOptions,
    ) -> scribe_message::Result<Vec<SearchHit>> {
        self.svc.search(query, options)
    }

    fn search(&self, query: &str) -> Vec<SearchHit> {
        self.search_with(query, &SearchOptions::default()).unwrap()
    }

    fn texts(&self, query: &str) -> Vec<String> {
        self.texts_with(query, &SearchOptions::default())
    }

    fn texts_with(&self, query: &str, options: &SearchOptions) -> Vec<String> {
        let mut out: Vec<String> = self
            .search_with(query, options)
            .unwrap()
            .into_iter()
            .map(|h| self.svc.get(&h.message_id).unwrap().text())
            .collect();
        out.sort();
        out
    }
}

fn sorted(v: &[&str]) -> Vec<String> {
    let mut out: Vec<String> = v.iter().map(|s| (*s).to_owned()).collect();
    out.sort();
    out
}

fn corpus(backend: Backend) -> Fixture {
    let f = Fixture::new(backend);
    for text in [
        "The quick brown fox jumps over the lazy dog",
        "fix the chat-send handler in my-app.config.ts",
        "milestone P2.2 is done; sp_new1 migrated",
        "I love C++ and C# but don't like Java",
        "python scripts beat java applets",
        "docker deployment with kubernetes",
        "数据库连接池配置错误",
        "这是中文文本",
        "email me at user@example.com about 100% coverage",
        "configuration of the connection pool",
    ] {
        say(&f.svc, &f.cli, Role::User, text);
    }
    f
}

fn every_sanitizer_case_runs_through_search(backend: Backend) {
    let f = corpus(backend);
    for input in SANITIZER_INPUTS {
        let result = f.search_with(input, &SearchOptions::default());
        assert!(result.is_ok(), "{input:?}: {result:?}");
    }
}

fn words_phrases_or_not_prefix_and_identifiers_find_the_right_messages(backend: Backend) {
    let f = corpus(backend);
    assert_eq!(
        f.texts("quick fox"),
        sorted(&["The quick brown fox jumps over the lazy dog"])
    );
    assert_eq!(
        f.texts(r#""lazy dog""#),
        sorted(&["The quick brown fox jumps over the lazy dog"])
    );
    assert!(f.texts(r#""dog lazy""#).is_empty());
    assert_eq!(
        f.texts("docker OR python"),
        sorted(&[
            "docker deployment with kubernetes",
            "python scripts beat java applets"
        ])
    );
    assert_eq!(
        f.texts("java NOT python"),
        sorted(&["I love C++ and C# but don't like Java"])
    );
    assert_eq!(
        f.texts("config*"),
        sorted(&[
            "configuration of the connection pool",
            "fix the chat-send handler in my-app.config.ts"
        ])
    );
    assert_eq!(
        f.texts("chat-send"),
        sorted(&["fix the chat-send handler in my-app.config.ts"])
    );
    assert_eq!(
        f.texts("my-app.config.ts"),
        sorted(&["fix the chat-send handler in my-app.config.ts"])
    );
    assert_eq!(
        f.texts("P2.2"),
        sorted(&["milestone P2.2 is done; sp_new1 migrated"])
    );
    assert_eq!(
        f.texts("sp_new1"),
        sorted(&["milestone P2.2 is done; sp_new1 migrated"])
    );
    assert_eq!(
        f.texts("don't"),
        sorted(&["I love C++ and C# but don't like Java"])
    );
    assert_eq!(
        f.texts("user@example.com"),
        sorted(&["email me at user@example.com about 100% coverage"])
    );
    assert!(f.texts("content:secret").is_empty());
    assert!(f.texts("NOT fox").is_empty());
    assert!(f.texts("").is_empty());
}

fn cjk_uses_trigrams_from_three_characters_and_like_below(backend: Backend) {
    let f = corpus(backend);
    assert_eq!(f.texts("连接池"), sorted(&["数据库连接池配置错误"]));
    assert_eq!(f.texts("数据库连接池"), sorted(&["数据库连接池配置错误"]));
    assert_eq!(f.texts("中文"), sorted(&["这是中文文本"]));
    assert_eq!(f.texts("错误"), sorted(&["数据库连接池配置错误"]));
    assert!(f.texts("缺失").is_empty());
    // Snippets mark the match on both routes.
    let tri = f.search("连接池");
    assert!(tri[0].snippet.contains("\u{2}"), "{:?}", tri[0].snippet);
    let like = f.search("中文");
    assert_eq!(like[0].snippet, "这是\u{2}中文\u{3}文本");
}

/// Emoji, symbols, operators and one- or two-character strings, as a user types them
/// into the search box (which promises any substring): a term without a letter or digit
/// is a literal substring on both backends; next to a word the word index answers.
fn emoji_symbols_and_short_strings_are_found_as_substrings(backend: Backend) {
    let f = Fixture::new(backend);
    const ROCKET: &str = "🚀 deployed to prod";
    const SHIP: &str = "ship🚀it now";
    const FAMILY: &str = "family 👨\u{200d}👩\u{200d}👧 photo";
    const THUMBS: &str = "thumbs 👍🏽 up";
    const RUST: &str = "fn main() -> Result<(), Error> { std::io::stdin(); }";
    const SHELL: &str = "if a != b && c { echo $HOME }";
    const SALE: &str = "cost is 50% off #sale";
    const PING: &str = "ping @user about it";
    const CJK: &str = "中文 text";
    const DOTS: &str = "loading...";
    const PLAIN: &str = "deployed the fix";
    const EQ: &str = "x = y";
    for text in [
        ROCKET, SHIP, FAMILY, THUMBS, RUST, SHELL, SALE, PING, CJK, DOTS, PLAIN, EQ,
    ] {
        say(&f.svc, &f.cli, Role::User, text);
    }
    let cases: &[(&str, &[&str])] = &[
        // an emoji alone, inside a word, with a ZWJ sequence or a skin tone
        ("🚀", &[ROCKET, SHIP]),
        ("ship🚀it", &[SHIP]),
        ("👨\u{200d}👩\u{200d}👧", &[FAMILY]),
        ("👍🏽", &[THUMBS]),
        ("👍", &[THUMBS]),
        // operators and symbols
        ("->", &[RUST]),
        ("::", &[RUST]),
        (r#""()""#, &[RUST]),
        ("!=", &[SHELL]),
        ("&&", &[SHELL]),
        ("$", &[SHELL]),
        ("%", &[SALE]),
        ("#", &[SALE]),
        ("=", &[SHELL, EQ]),
        ("...", &[DOTS]),
        ("-> OR ::", &[RUST]),
        // a dash alone (or one that begins an operator, `->`) is searched as written
        ("-", &[RUST]),
        ("!!!", &[]),
        ("_", &[]),
        // symbols around a word belong to it (the word answers); a symbol term next to a
        // word is searched too
        ("@user", &[PING]),
        ("#sale", &[SALE]),
        ("🚀 deployed", &[ROCKET]),
        ("-> fn", &[RUST]),
        // one-character words, one and two CJK characters
        ("x", &[EQ]),
        ("中", &[CJK]),
        ("中文", &[CJK]),
    ];
    for (query, expected) in cases {
        assert_eq!(f.texts(query), sorted(expected), "{query:?} on {backend:?}");
    }
    // The match is marked in the snippet, in the same format as every LIKE hit.
    let hit = &f.search("->")[0];
    assert_eq!(
        hit.snippet,
        "fn main() \u{2}->\u{3} Result<(), Error> { std::io::stdin(); }"
    );
    let hits = f.search("🚀");
    let rocket = hits
        .iter()
        .find(|h| f.svc.get(&h.message_id).unwrap().text() == ROCKET)
        .unwrap();
    assert_eq!(rocket.snippet, "\u{2}🚀\u{3} deployed to prod");
    let hit = &f.search("👨\u{200d}👩\u{200d}👧")[0];
    assert_eq!(hit.snippet, "family \u{2}👨\u{200d}👩\u{200d}👧\u{3} photo");
    let hit = &f.search("%")[0];
    assert_eq!(hit.snippet, "cost is 50\u{2}%\u{3} off #sale");
}

fn hits_carry_snippet_context_and_session_fields(backend: Backend) {
    let f = Fixture::new(backend);
    let before = say(
        &f.svc,
        &f.tg,
        Role::User,
        "how do I rotate the kafka credentials?",
    );
    let hit_msg = say(
        &f.svc,
        &f.tg,
        Role::Assistant,
        &format!(
            "Use the vault CLI to rotate them. {}",
            "padding ".repeat(60)
        ),
    );
    let after = say(
        &f.svc,
        &f.tg,
        Role::User,
        &"thanks, that worked ".repeat(30),
    );
    let hits = f.search("vault");
    assert_eq!(hits.len(), 1);
    let hit = &hits[0];
    assert_eq!(hit.message_id, hit_msg.id);
    assert_eq!(hit.session_id, f.tg);
    assert_eq!(hit.role, Role::Assistant);
    assert_eq!(hit.created_at, hit_msg.created_at);
    assert!(hit.snippet.contains("\u{2}vault\u{3}"), "{}", hit.snippet);
    assert_eq!(hit.source, "telegram");
    assert_eq!(hit.title.as_deref(), Some("chat"));
    assert_eq!(hit.model.as_deref(), Some("claude-test"));
    let b = hit.before.as_ref().unwrap();
    assert_eq!((b.id.as_str(), b.role), (before.id.as_str(), Role::User));
    assert_eq!(b.text, "how do I rotate the kafka credentials?");
    let a = hit.after.as_ref().unwrap();
    assert_eq!(a.id, after.id);
    assert!(
        a.text.chars().count() <= 201 && a.text.ends_with('…'),
        "{}",
        a.text
    );
    // The first message of a session has no context before it.
    let first = f.search("kafka");
    assert!(first[0].before.is_none());
    assert_eq!(first[0].after.as_ref().unwrap().id, hit_msg.id);
}

fn filters_apply_on_every_route(backend: Backend) {
    let f = Fixture::new(backend);
    let texts = [
        "deploy token 数据库迁移 中文",
        "deploy token 数据库迁移 中文 again",
    ];
    let cli_user = say(&f.svc, &f.cli, Role::User, texts[0]);
    let cli_asst = f
        .svc
        .create(NewMessage::new(
            &f.cli,
            Role::Assistant,
            vec![Part::text(texts[1])],
        ))
        .unwrap();
    let tg_user = say(&f.svc, &f.tg, Role::User, texts[0]);
    // A third session whose agent worked in a project directory.
    let project = new_id(Prefix::Session);
    f.svc
        .database()
        .write(|tx| {
            tx.q().create_session(&queries::CreateSessionParams {
                directory: Some("/home/dev/project"),
                ..scribe_db::testing::bare_session(&project, "cli", scribe_db::now_ms())
            })
        })
        .unwrap();
    let project_user = say(&f.svc, &project, Role::User, texts[0]);
    let ids = |q: &str, o: &SearchOptions| -> HashSet<String> {
        f.search_with(q, o)
            .unwrap()
            .into_iter()
            .map(|h| h.message_id)
            .collect()
    };
    let set = |v: &[&str]| -> HashSet<String> { v.iter().map(|s| (*s).to_owned()).collect() };
    // words, trigram, LIKE
    for q in ["deploy", "数据库迁移", "中文"] {
        let all = ids(q, &SearchOptions::default());
        assert_eq!(
            all,
            set(&[&cli_user.id, &cli_asst.id, &tg_user.id, &project_user.id]),
            "{q}"
        );
        let o = SearchOptions {
            sources: vec!["telegram".into()],
            ..SearchOptions::default()
        };
        assert_eq!(ids(q, &o), set(&[&tg_user.id]), "{q} sources");
        let o = SearchOptions {
            exclude_sources: vec!["telegram".into()],
            ..SearchOptions::default()
        };
        assert_eq!(
            ids(q, &o),
            set(&[&cli_user.id, &cli_asst.id, &project_user.id]),
            "{q} exclude"
        );
        let o = SearchOptions {
            directory: Some("/home/dev/project".into()),
            ..SearchOptions::default()
        };
        assert_eq!(ids(q, &o), set(&[&project_user.id]), "{q} directory");
        // The same path exactly: not a directory above it, nor one merely starting so.
        for other in ["/home/dev", "/home/dev/proj", "/home/dev/project/src"] {
            let o = SearchOptions {
                directory: Some(other.into()),
                ..SearchOptions::default()
            };
            assert!(ids(q, &o).is_empty(), "{q} directory {other}");
        }
        let o = SearchOptions {
            directory: Some("/home/dev/project".into()),
            sources: vec!["telegram".into()],
            ..SearchOptions::default()
        };
        assert!(ids(q, &o).is_empty(), "{q} directory and source");
        let o = SearchOptions {
            roles: vec![Role::Assistant],
            ..SearchOptions::default()
        };
        assert_eq!(ids(q, &o), set(&[&cli_asst.id]), "{q} roles");
        let o = SearchOptions {
            session_id: Some(f.tg.clone()),
            ..SearchOptions::default()
        };
        assert_eq!(ids(q, &o), set(&[&tg_user.id]), "{q} session");
        let o = SearchOptions {
            since: Some(tg_user.created_at),
            ..SearchOptions::default()
        };
        assert!(ids(q, &o).contains(&tg_user.id), "{q} since");
        let o = SearchOptions {
            until: Some(cli_user.created_at),
            ..SearchOptions::default()
        };
        assert!(ids(q, &o).is_empty(), "{q} until");
        let o = SearchOptions {
            limit: 1,
            ..SearchOptions::default()
        };
        let first = ids(q, &o);
        assert_eq!(first.len(), 1, "{q} limit");
        let o = SearchOptions {
            limit: 1,
            offset: 1,
            ..SearchOptions::default()
        };
        let second = ids(q, &o);
        assert_eq!(second.len(), 1, "{q} offset");
        assert!(first.is_disjoint(&second));
        let o = SearchOptions {
            offset: 4,
            ..SearchOptions::default()
        };
        assert!(ids(q, &o).is_empty());
        let o = SearchOptions {
            session_id: Some("ses_missing".into()),
            ..SearchOptions::default()
        };
        assert!(ids(q, &o).is_empty());
    }
}

fn a_message_with_many_matching_parts_is_one_hit(backend: Backend) {
    let f = Fixture::new(backend);
    let msg = f
        .svc
        .create(NewMessage::new(
            &f.cli,
            Role::Assistant,
            vec![
                Part::text("needle one 数据库迁移 中文"),
                Part::text("needle two 数据库迁移 中文"),
                completed_tool(
                    "c1",
                    "grep",
                    json!({"q": "needle"}),
                    "needle three 数据库迁移 中文",
                ),
            ],
        ))
        .unwrap();
    say(&f.svc, &f.cli, Role::User, "needle once 数据库迁移 中文");
    for q in ["needle", "数据库迁移", "中文"] {
        let hits = f.search(q);
        let unique: HashSet<&str> = hits.iter().map(|h| h.message_id.as_str()).collect();
        assert_eq!(hits.len(), 2, "{q}");
        assert_eq!(unique.len(), 2, "{q}");
        assert!(unique.contains(msg.id.as_str()));
    }
}

fn tool_names_inputs_and_outputs_are_found_until_changed_or_deleted(backend: Backend) {
    let f = Fixture::new(backend);
    let mut tool = Part::tool("call_1", "ripgrep_search", json!({"pattern": "zebrafish"}));
    let msg = f
        .svc
        .create(NewMessage::new(&f.cli, Role::Assistant, vec![tool.clone()]))
        .unwrap();
    let part_id = msg.parts[0].id.clone();
    assert_eq!(f.search("ripgrep_search").len(), 1, "tool name");
    assert_eq!(f.search("zebrafish").len(), 1, "tool input");
    assert!(f.search("okapi").is_empty());

    if let Part::Tool(t) = &mut tool {
        t.state.start(1).unwrap();
    }
    f.svc.update_part(&part_id, tool.clone()).unwrap();
    if let Part::Tool(t) = &mut tool {
        t.state
            .complete("found okapi_habitat.rs", "rg", json!(null), 2)
            .unwrap();
    }
    f.svc.update_part(&part_id, tool.clone()).unwrap();
    assert_eq!(f.search("okapi_habitat.rs").len(), 1, "tool output");
    assert_eq!(
        f.search("okapi_hab").len(),
        0,
        "a word index needs whole tokens"
    );
    assert_eq!(f.search("okapi*").len(), 1, "prefix");

    // The output changes: the old text is gone from both indexes.
    if let Part::Tool(t) = &mut tool {
        t.state = ToolState::Completed {
            output: "replaced with 鸭嘴兽数据".into(),
            title: String::new(),
            metadata: json!(null),
            started_at: 1,
            ended_at: 3,
        };
    }
    f.svc.update_part(&part_id, tool).unwrap();
    assert!(f.search("okapi_habitat.rs").is_empty());
    assert_eq!(f.search("鸭嘴兽").len(), 1);
    // Deleted: nothing is found any more, on any route.
    f.svc.delete_part(&part_id).unwrap();
    for q in ["ripgrep_search", "zebrafish", "鸭嘴兽", "鸭嘴", "replaced"] {
        assert!(f.search(q).is_empty(), "{q}");
    }
}

fn results_order_by_rank_then_recency(backend: Backend) {
    let f = Fixture::new(backend);
    let weak = say(
        &f.svc,
        &f.cli,
        Role::User,
        &format!("rust {}", "filler words ".repeat(40)),
    );
    let strong = say(&f.svc, &f.cli, Role::User, "rust rust rust");
    let hits = f.search("rust");
    assert_eq!(hits[0].message_id, strong.id);
    assert_eq!(hits[1].message_id, weak.id);
    assert!(hits[0].rank <= hits[1].rank);
    // LIKE route: newest first.
    let old = say(&f.svc, &f.cli, Role::User, "旧的中文");
    let new = say(&f.svc, &f.cli, Role::User, "新的中文");
    let hits = f.search("中文");
    assert_eq!(
        hits.iter()
            .map(|h| h.message_id.clone())
            .collect::<Vec<_>>(),
        vec![new.id, old.id]
    );
}

fn any_string_searches_ok(backend: Backend, query: &str) -> Result<(), TestCaseError> {
    thread_local! {
        // Leaked: a PostgreSQL client must not be dropped while the thread's locals are
        // torn down (its runtime is gone by then).
        static FIXTURES: RefCell<Vec<&'static Fixture>> = const { RefCell::new(Vec::new()) };
    }
    let f = FIXTURES.with(|fixtures| {
        let mut fixtures = fixtures.borrow_mut();
        match fixtures.iter().find(|f| f.backend == backend) {
            Some(f) => *f,
            None => {
                let f: &'static Fixture = Box::leak(Box::new(corpus(backend)));
                fixtures.push(f);
                f
            }
        }
    });
    let result = f.search_with(query, &SearchOptions::default());
    prop_assert!(result.is_ok(), "{:?}: {:?}", query, result);
    Ok(())
}

fn any_query() -> impl Strategy<Value = String> {
    prop_oneof![
        ".*",
        "[ -~]{0,40}",
        "[\"()*:^+\\-%_\\\\ a-zA-Z0-9]{0,30}",
        "[\\u{4e00}-\\u{4e20} a-z\"*]{0,12}",
        proptest::collection::vec(
            prop_oneof![
                Just("OR".to_owned()),
                Just("AND".to_owned()),
                Just("NOT".to_owned()),
                Just("\"".to_owned()),
                Just("*".to_owned()),
                Just("(".to_owned()),
                Just("数据".to_owned()),
                "[a-z]{1,5}",
            ],
            0..8
        )
        .prop_map(|v| v.join(" ")),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(128))]

    #[test]
    fn any_string_searches_ok_on_sqlite(query in any_query()) {
        any_string_searches_ok(Backend::Sqlite, &query)?;
    }

    #[test]
    #[ignore = "needs PostgreSQL: run under .ci/with-postgres"]
    fn any_string_searches_ok_on_postgres(query in any_query()) {
        any_string_searches_ok(Backend::Postgres, &query)?;
    }
}

/// A symbol term next to a word is searched, not dropped: required (`🚀 deployed` needs
/// both), excluded (`deployed -🚀`), an alternative of its own (`🚀 OR deployed` finds
/// either, the word's hits first), next to a phrase, a prefix or CJK; a query of
/// exclusions alone finds nothing. Each case found the wrong messages when the word index
/// answered alone (the symbol dropped, `-🚀` searched as the text "-🚀").
fn symbols_next_to_words_are_searched_not_dropped(backend: Backend) {
    let f = Fixture::new(backend);
    const ROCKET: &str = "🚀 deployed to prod";
    const PLAIN: &str = "deployed the fix";
    const LAUNCH: &str = "launch 🚀🚀 soon";
    const ARROW: &str = "the parser maps a -> b";
    const PARSER: &str = "parser rewrite done";
    const MAPS: &str = "the parser maps words";
    const CHECKED: &str = "configured ✅ everything";
    const CONFIG: &str = "configuration pending";
    const CJK_ROCKET: &str = "数据库迁移 🚀 完成";
    const CJK: &str = "数据库迁移失败";
    const DASH: &str = "a -🚀 written with a dash";
    for text in [
        ROCKET, PLAIN, LAUNCH, ARROW, PARSER, MAPS, CHECKED, CONFIG, CJK_ROCKET, CJK, DASH,
    ] {
        say(&f.svc, &f.cli, Role::User, text);
    }
    let cases: &[(&str, &[&str])] = &[
        // required symbol: both must occur
        ("🚀 deployed", &[ROCKET]),
        ("deployed 🚀", &[ROCKET]),
        ("deployed AND 🚀", &[ROCKET]),
        // NOT symbol: leaves out the parts holding it
        ("deployed -🚀", &[PLAIN]),
        ("deployed NOT 🚀", &[PLAIN]),
        (r#"parser -"->""#, &[PARSER, MAPS]),
        // OR: either, each message once
        ("🚀 OR deployed", &[ROCKET, PLAIN, LAUNCH, CJK_ROCKET, DASH]),
        ("deployed OR 🚀🚀", &[ROCKET, PLAIN, LAUNCH]),
        ("rewrite OR -> OR ✅", &[PARSER, ARROW, CHECKED]),
        // each alternative tests its own symbols on the parts its own words find
        ("deployed 🚀 OR parser ->", &[ROCKET, ARROW]),
        ("deployed -🚀 OR parser ->", &[PLAIN, ARROW]),
        (
            "parser -> OR deployed OR ✅",
            &[ARROW, ROCKET, PLAIN, CHECKED],
        ),
        // a phrase next to a symbol, a symbol as a phrase next to a word
        (r#""parser maps" ->"#, &[ARROW]),
        (r#""->" parser"#, &[ARROW]),
        (r#""the fix" 🚀"#, &[]),
        // a symbol next to a prefix
        ("✅ config*", &[CHECKED]),
        ("config* -✅", &[CONFIG]),
        // CJK next to a symbol (the trigram route tests the short term)
        ("数据库迁移 🚀", &[CJK_ROCKET]),
        ("数据库迁移 -🚀", &[CJK]),
        ("数据库 OR 🚀🚀", &[LAUNCH, CJK_ROCKET, CJK]),
        // exclusions alone find nothing, as `-deployed` alone does
        ("-🚀", &[]),
        ("NOT 🚀", &[]),
        ("-deployed -🚀", &[]),
        ("NOT deployed NOT ->", &[]),
        // symbols alone: every term counts
        ("🚀 -", &[DASH]),
        ("🚀 NOT -", &[ROCKET, LAUNCH, CJK_ROCKET]),
    ];
    for (query, expected) in cases {
        assert_eq!(f.texts(query), sorted(expected), "{query:?} on {backend:?}");
    }
    // The word's hits come first (by rank), then the symbol's alone, newest first; pages
    // of one hit walk the same list without a repeat or a gap.
    let all: Vec<String> = f
        .search("deployed OR 🚀")
        .iter()
        .map(|h| f.svc.get(&h.message_id).unwrap().text())
        .collect();
    assert_eq!(all.len(), 5, "{all:?}");
    assert_eq!(
        sorted(&[&all[0], &all[1]]),
        sorted(&[ROCKET, PLAIN]),
        "{all:?}"
    );
    assert_eq!(all[2..], [DASH, CJK_ROCKET, LAUNCH], "{all:?}");
    for offset in 0..6 {
        let page = f
            .search_with(
                "deployed OR 🚀",
                &SearchOptions {
                    limit: 1,
                    offset,
                    ..SearchOptions::default()
                },
            )
            .unwrap();
        let texts: Vec<String> = page
            .iter()
            .map(|h| f.svc.get(&h.message_id).unwrap().text())
            .collect();
        assert_eq!(
            texts,
            all.get(offset..=offset).unwrap_or_default(),
            "{offset}"
        );
    }
    // Snippets mark the word and the symbol the hit needed (the symbol's alone when only
    // it matched).
    let hit = &f.search("🚀 deployed")[0];
    assert_eq!(hit.snippet, "\u{2}🚀\u{3} \u{2}deployed\u{3} to prod");
    let launch = f
        .search("deployed OR 🚀🚀")
        .into_iter()
        .find(|h| f.svc.get(&h.message_id).unwrap().text() == LAUNCH)
        .unwrap();
    assert_eq!(launch.snippet, "launch \u{2}🚀🚀\u{3} soon");
    assert_eq!(launch.rank, 0.0);
    // Filters apply to both halves.
    let other = SearchOptions {
        session_id: Some(f.tg.clone()),
        ..SearchOptions::default()
    };
    assert!(f.texts_with("deployed OR 🚀", &other).is_empty());
    assert!(f.texts_with("🚀 deployed", &other).is_empty());
}

/// An exclusion leaves out the message, not the part: search returns one hit per
/// message, so `deploy -staging` reads "messages about deploy without staging". A
/// message whose text part says `deploy` and whose second text part or tool part says
/// `staging` (or holds `🚀`) is not found by `deploy -staging`, `deploy NOT staging` or
/// `deploy -🚀`; a message saying `deploy` alone still is.
fn an_exclusion_leaves_out_the_whole_message(backend: Backend) {
    let f = Fixture::new(backend);
    let two_texts = NewMessage::new(
        &f.cli,
        Role::Assistant,
        vec![
            Part::text("deploy the service now"),
            Part::text("staging is ready 🚀"),
        ],
    );
    f.svc.create(two_texts).unwrap();
    let with_tool = NewMessage::new(
        &f.cli,
        Role::Assistant,
        vec![
            Part::text("deploy finished for everyone"),
            completed_tool(
                "t1",
                "bash",
                json!({"command": "kubectl apply"}),
                "staging 🚀 ok",
            ),
        ],
    );
    f.svc.create(with_tool).unwrap();
    const PLAIN: &str = "deploy went fine";
    say(&f.svc, &f.cli, Role::User, PLAIN);
    let wrong: Vec<(&str, Vec<String>)> = [
        "deploy -staging",
        "deploy NOT staging",
        "deploy -🚀",
        "deploy NOT 🚀",
    ]
    .into_iter()
    .map(|query| (query, f.texts(query)))
    .filter(|(_, found)| *found != sorted(&[PLAIN]))
    .collect();
    assert!(wrong.is_empty(), "on {backend:?}: {wrong:#?}");
    assert_eq!(f.search("deploy").len(), 3, "on {backend:?}");
}

/// The same rule on the substring routes: an excluded term leaves out the message when any
/// of its parts holds it, whether the query goes to the trigram index (`数据库迁移 -失败了`,
/// its short terms tested on the candidates: `数据库迁移 -::`, its plain alternatives:
/// `中文测试 OR docker -staging`), to a LIKE of symbols alone (`-> NOT ::`, `🚀 -staging`)
/// or to the LIKE walk after the words (`zzzqqq OR 🚀 -staging`).
fn an_exclusion_leaves_out_the_whole_message_on_substring_routes(backend: Backend) {
    let f = Fixture::new(backend);
    let split = NewMessage::new(
        &f.cli,
        Role::Assistant,
        vec![
            Part::text("数据库迁移 -> docker 🚀 start"),
            Part::text("失败了 :: staging"),
        ],
    );
    f.svc.create(split).unwrap();
    let plain_split = NewMessage::new(
        &f.cli,
        Role::Assistant,
        vec![
            Part::text("docker -> 🚀 begins"),
            completed_tool("t1", "bash", json!({"command": "ls"}), "staging :: 失败了"),
        ],
    );
    f.svc.create(plain_split).unwrap();
    const CJK: &str = "数据库迁移 -> docker 🚀 fine";
    const PLAIN: &str = "docker -> 🚀 fine";
    say(&f.svc, &f.cli, Role::User, CJK);
    say(&f.svc, &f.cli, Role::User, PLAIN);
    let wrong: Vec<(&str, Vec<String>, Vec<String>)> = [
        ("数据库迁移 -失败了", vec![CJK]),
        ("数据库迁移 NOT staging", vec![CJK]),
        ("数据库迁移 -::", vec![CJK]),
        ("中文测试 OR docker -staging", vec![CJK, PLAIN]),
        ("中文测试 OR docker -::", vec![CJK, PLAIN]),
        ("-> NOT ::", vec![CJK, PLAIN]),
        ("🚀 -staging", vec![CJK, PLAIN]),
        ("🚀 NOT 失败了", vec![CJK, PLAIN]),
        ("zzzqqq OR 🚀 -staging", vec![CJK, PLAIN]),
    ]
    .into_iter()
    .map(|(query, want)| (query, f.texts(query), sorted(&want)))
    .filter(|(_, found, want)| found != want)
    .collect();
    assert!(wrong.is_empty(), "on {backend:?}: {wrong:#?}");
    // Without the exclusion every message is found.
    assert_eq!(f.search("docker").len(), 4, "on {backend:?}");
    assert_eq!(f.search("->").len(), 4, "on {backend:?}");
}

/// Pages of a query with an exclusion neither repeat nor skip a message: the messages left
/// out because another of their parts holds the excluded word or symbol are left out of
/// every page, and the pages together are the one long answer, in its order.
fn pages_with_an_exclusion_neither_repeat_nor_skip(backend: Backend) {
    let f = Fixture::new(backend);
    let mut kept_staging = HashSet::new();
    let mut kept_rocket = HashSet::new();
    for i in 0..45 {
        let mut parts = vec![Part::text(format!("deploy number {i} done"))];
        if i % 3 == 0 {
            parts.push(Part::text(format!("staging {i}")));
        }
        if i % 5 == 0 {
            parts.push(completed_tool(
                &format!("t{i}"),
                "bash",
                json!({"command": "ship"}),
                "🚀 shipped",
            ));
        }
        let id = f
            .svc
            .create(NewMessage::new(&f.cli, Role::Assistant, parts))
            .unwrap()
            .id;
        if i % 3 != 0 {
            kept_staging.insert(id.clone());
        }
        if i % 5 != 0 {
            kept_rocket.insert(id);
        }
    }
    for (query, kept) in [
        ("deploy -staging", &kept_staging),
        ("deploy NOT 🚀", &kept_rocket),
    ] {
        let ids = |offset: usize, limit: usize| -> Vec<String> {
            let options = SearchOptions {
                offset,
                limit,
                ..SearchOptions::default()
            };
            f.search_with(query, &options)
                .unwrap()
                .into_iter()
                .map(|h| h.message_id)
                .collect()
        };
        let whole = ids(0, 100);
        assert_eq!(
            whole.iter().cloned().collect::<HashSet<_>>(),
            *kept,
            "{query} on {backend:?}"
        );
        assert_eq!(whole.len(), kept.len(), "{query} on {backend:?}");
        for limit in [1, 7, 20] {
            let mut paged = Vec::new();
            let mut offset = 0;
            loop {
                let page = ids(offset, limit);
                if page.is_empty() {
                    break;
                }
                offset += limit;
                paged.extend(page);
            }
            assert_eq!(paged, whole, "{query} limit {limit} on {backend:?}");
        }
    }
}

/// `Part::searchable_text` says what the search view reads from a stored part: the two
/// agree on SQLite for text, reasoning and tool parts of every shape, empty pieces and
/// odd JSON included.
#[test]
fn searchable_text_is_what_the_search_view_reads() {
    let (_dir, svc) = common::service();
    let s = common::session(&svc);
    let failed = |tool: &str, input: serde_json::Value, message: &str| {
        let mut part = Part::tool("c", tool, input);
        if let Part::Tool(t) = &mut part {
            t.state.fail(message, 1).unwrap();
        }
        part
    };
    let running = {
        let mut part = Part::tool("c", "bash", json!({"command": "sleep 9"}));
        if let Part::Tool(t) = &mut part {
            t.state.start(1).unwrap();
        }
        part
    };
    let parts = vec![
        Part::text("plain words"),
        Part::text(""),
        Part::text("line\nbreaks\tand \"quotes\" \\ and ünïcödé 中文 🦀"),
        Part::Reasoning(scribe_message::ReasoningPart {
            text: "thinking…".to_owned(),
            ..Default::default()
        }),
        Part::tool("c", "bash", json!(null)),
        Part::tool("c", "bash", json!("")),
        Part::tool("c", "", json!("only input")),
        Part::tool("c", "grep", json!("needle")),
        Part::tool(
            "c",
            "edit",
            json!({"b": [1, 2.5, -0.0, 1e100, 12345678901234567890u64], "a": {"z": null, "y": "é\n\"q\""}, "t": true}),
        ),
        Part::tool("c", "json", json!([1, "two", {"three": 3}])),
        Part::tool("c", "num", json!(42)),
        running,
        completed_tool("c", "bash", json!({"command": "ls"}), ""),
        completed_tool("c", "bash", json!(""), "total 0\nfile"),
        completed_tool("c", "", json!(null), "output only"),
        failed("bash", json!({"command": "rm"}), "denied"),
        failed("bash", json!(null), ""),
    ];
    let message = svc
        .create(NewMessage::new(&s, Role::Assistant, parts))
        .unwrap();
    let viewed: std::collections::HashMap<String, Option<String>> = svc
        .database()
        .read(|tx| -> scribe_db::Result<_> {
            let conn = tx.conn().unwrap();
            let mut stmt = conn.prepare(
                "SELECT p.id, v.search_text FROM parts_search AS v JOIN parts AS p USING (seq)",
            )?;
            let rows = stmt
                .query_map([], |r| Ok((r.get(0)?, r.get(1)?)))?
                .collect::<Result<_, _>>()?;
            Ok(rows)
        })
        .unwrap();
    assert_eq!(viewed.len(), message.parts.len());
    for stored in &message.parts {
        let expected = stored.part.searchable_text();
        let seen = viewed[&stored.id].clone().unwrap_or_default();
        assert_eq!(expected, seen, "{}", stored.part.to_json().unwrap());
    }
}

/// A query is searched with every term it holds, up to `MAX_TERMS` (a pasted error line,
/// unquoted), exclusions included; one with more is refused, never searched in part.
fn a_long_query_is_searched_whole_or_refused(backend: Backend) {
    let f = Fixture::new(backend);
    let words: Vec<String> = (0..MAX_TERMS).map(|i| format!("w{i}")).collect();
    let long = words.join(" ");
    say(&f.svc, &f.cli, Role::User, &long);
    say(&f.svc, &f.cli, Role::User, "w0 w1 w2 only");
    assert_eq!(f.texts(&long), sorted(&[&long]), "on {backend:?}");
    // The last of many terms still counts: one missing word finds nothing...
    let missing = format!("{} absentword", words[..40].join(" "));
    assert!(f.texts(&missing).is_empty(), "on {backend:?}");
    // ...and an exclusion after them leaves the message out.
    let excluded = format!("{} -w150", words[..40].join(" "));
    assert!(f.texts(&excluded).is_empty(), "on {backend:?}");
    // As many exclusions as the limit allows, every one applied.
    let mut exclusions = vec!["w1".to_owned()];
    exclusions.extend((0..MAX_TERMS - 2).map(|i| format!("-x{i}")));
    exclusions.push("-w199".to_owned());
    assert_eq!(
        f.texts(&exclusions.join(" ")),
        sorted(&["w0 w1 w2 only"]),
        "on {backend:?}"
    );
    let too_long = format!("{long} w200");
    let err = f
        .svc
        .search(&too_long, &SearchOptions::default())
        .unwrap_err();
    assert!(
        matches!(&err, scribe_message::MessageError::InvalidInput(text)
            if text == &format!("a search holds at most {MAX_TERMS} words, phrases or symbols; this one has {}", MAX_TERMS + 1)),
        "on {backend:?}: {err:?}"
    );
}

/// A part that holds a word tens of thousands of times (a log in a tool's output) is a hit
/// like any other, with a snippet of words around a marked match. (FTS5's `snippet()`
/// costs the square of the matches in a part: 20,000 took seconds; the long part's
/// snippet is now made from pieces of its text.)
fn a_word_many_times_in_one_part_is_found_with_a_marked_snippet(backend: Backend) {
    let f = Fixture::new(backend);
    let long = format!("{}needle at the end", "filler ".repeat(20_000));
    let msg = say(&f.svc, &f.cli, Role::Assistant, &long);
    let words = |snippet: &str| snippet.split_whitespace().count();
    for query in [
        "filler",
        "needle",
        "filler needle",
        "fil*",
        "needle -absent",
    ] {
        let hits = f.search(query);
        assert_eq!(hits.len(), 1, "{query} on {backend:?}");
        let hit = &hits[0];
        assert_eq!(hit.message_id, msg.id, "{query} on {backend:?}");
        assert!(
            hit.snippet.contains('\u{2}'),
            "{query} on {backend:?}: {}",
            hit.snippet
        );
        assert!(
            words(&hit.snippet) <= 30,
            "{query} on {backend:?}: {}",
            hit.snippet
        );
    }
    // The typing window (the web page's search as one types: newest first, a short
    // prefix) makes its own snippets, from the same pieces.
    let typing = SearchOptions {
        window: Some(scribe_message::TYPING_WINDOW),
        ..SearchOptions::default()
    };
    for query in ["fil*", "nee*"] {
        let hits = f.search_with(query, &typing).unwrap();
        assert_eq!(hits.len(), 1, "{query} on {backend:?}");
        assert!(
            hits[0].snippet.contains('\u{2}'),
            "{query} on {backend:?}: {}",
            hits[0].snippet
        );
        assert!(
            words(&hits[0].snippet) <= 30,
            "{query} on {backend:?}: {}",
            hits[0].snippet
        );
    }
    let needle = &f.search("needle")[0].snippet;
    assert!(
        needle.starts_with('…') && needle.contains("\u{2}needle\u{3} at the end"),
        "on {backend:?}: {needle}"
    );
    assert!(f.search("needle -filler").is_empty(), "on {backend:?}");
}
