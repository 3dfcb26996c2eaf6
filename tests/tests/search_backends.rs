//! Search and the session filters answer the same on SQLite and PostgreSQL.
//!
//! One store is written on SQLite through the services, copied into a fresh PostgreSQL
//! database (`scribe_db::copy`), and every question is asked of both: searches (words,
//! phrases, prefixes, `OR`, `NOT`/`-word`, identifiers split at punctuation, diacritics,
//! CJK through trigrams and LIKE, tool parts, hostile input) with every filter, and
//! session lists and counts for every parent filter, order, title text and keyset place.
//! Hits must name the same messages (and parts); snippets must mark the same words. The
//! order of word hits is bm25's on SQLite and `ts_rank_cd`'s on PostgreSQL: asserted only
//! where it is meant to agree (a clearly better hit first, ties newest first, substring
//! routes newest first).
//!
//! Then PostgreSQL on its own: rows written there are found by the very next search
//! (its GIN indexes are kept inside the write; `index_pending` has nothing to do).
//!
//! The PostgreSQL tests need a server: run under `.ci/with-postgres` with `--ignored`.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::BTreeSet;
use std::sync::Arc;

use scribe_db::filters::{
    self, ParentFilter, SessionFilter, SessionKeyset, SessionOrder, SortValue,
};
use scribe_db::ids::{Prefix, new_id};
use scribe_db::queries as q;
use scribe_db::{Backend, Database};
use scribe_message::{
    MATCH_END, MATCH_START, MessageService, NewMessage, Part, Role, SearchOptions,
};
use serde_json::json;

/// A fresh, empty PostgreSQL database on the test server: its connection string.
fn fresh_postgres_url() -> String {
    let name = scribe_db::testing::unique_test_name("scribe_search_backends");
    scribe_db::testing::fresh_test_database(&name).unwrap()
}

/// A fresh PostgreSQL database, opened (and migrated).
fn fresh_postgres() -> Database {
    let db = Database::open(fresh_postgres_url()).unwrap();
    assert_eq!(db.backend(), Backend::Postgres);
    db
}

/// A session made with the generated query (on either backend).
fn session(
    db: &Database,
    source: &str,
    kind: &str,
    parent: Option<&str>,
    title: Option<&str>,
    now: i64,
) -> String {
    let id = new_id(Prefix::Session);
    db.write(|tx| {
        tx.q().create_session(&q::CreateSessionParams {
            parent_session_id: parent,
            kind,
            title,
            model: Some("claude-test"),
            ..scribe_db::testing::bare_session(&id, source, now)
        })
    })
    .unwrap();
    id
}

/// The same store on both backends.
struct Pair {
    _dir: tempfile::TempDir,
    sqlite: MessageService,
    pg: MessageService,
    sessions: Vec<String>,
}

fn completed_tool(call_id: &str, tool: &str, input: serde_json::Value, output: &str) -> Part {
    let mut part = Part::tool(call_id, tool, input);
    if let Part::Tool(t) = &mut part {
        t.state.start(1).unwrap();
        t.state.complete(output, tool, json!(null), 2).unwrap();
    }
    part
}

const TEXTS: &[&str] = &[
    "The quick brown fox jumps over the lazy dog",
    "fix the chat-send handler in my-app.config.ts",
    "milestone P2.2 is done; sp_new1 migrated",
    "I love C++ and C# but don't like Java",
    "python scripts beat java applets",
    "docker deployment with kubernetes",
    "数据库连接池配置错误",
    "这是中文文本 and some docker words",
    "email me at user@example.com about 100% coverage",
    "configuration of the connection pool",
    "Résumé of the café meeting: naïve approach",
    "resume the cafe work tomorrow",
    "データベースの移行に失敗しました",
    "한국어 텍스트 검색",
    "rust rust rust",
    "🚀 shipped; ship🚀it",
    "family 👨\u{200d}👩\u{200d}👧 and thumbs 👍🏽",
    "fn main() -> Result<(), Error> { std::io::stdin(); }",
    "if a != b && c { echo $HOME } #tag @user ...",
    "a long text about rust with many other words so that the snippet has to be cut \
     somewhere before and after the match because it holds far more than twenty four \
     words in total, and then it goes on about deployments, databases and other things",
];

fn pair() -> Pair {
    let dir = tempfile::tempdir().unwrap();
    let db = Arc::new(Database::open(dir.path().join("scribe.db")).unwrap());
    let svc = MessageService::new(db.clone());
    let cli = session(&db, "cli", "normal", None, Some("cli work"), 1_000);
    let tg = session(&db, "telegram", "normal", None, Some("chat 100%_x"), 2_000);
    let task = session(&db, "cli", "task", Some(&cli), Some("a task"), 3_000);
    let cont = session(&db, "cli", "continuation", Some(&cli), None, 4_000);
    let fork = session(&db, "tui", "fork", Some(&tg), Some("Chat fork"), 5_000);
    for (i, text) in TEXTS.iter().enumerate() {
        let (on, role) = match i % 3 {
            0 => (&cli, Role::User),
            1 => (&tg, Role::Assistant),
            _ => (&task, Role::User),
        };
        svc.create(NewMessage::new(on, role, vec![Part::text(*text)]))
            .unwrap();
    }
    svc.create(NewMessage::new(
        &cli,
        Role::Assistant,
        vec![
            Part::text("needle one 数据库迁移 中文"),
            Part::text("needle two 数据库迁移 中文"),
            completed_tool(
                "c1",
                "ripgrep_search",
                json!({"pattern": "zebrafish"}),
                "found okapi_habitat.rs and needle three",
            ),
        ],
    ))
    .unwrap();
    svc.create(NewMessage::new(
        &fork,
        Role::User,
        vec![Part::text("needle once 数据库迁移 中文 in a fork")],
    ))
    .unwrap();
    let pg = fresh_postgres();
    scribe_db::copy::copy(&db, &pg, |_| std::ops::ControlFlow::Continue(())).unwrap();
    Pair {
        _dir: dir,
        sqlite: svc,
        pg: MessageService::new(Arc::new(pg)),
        sessions: vec![cli, tg, task, cont, fork],
    }
}

/// The words a snippet marks, lowercased.
fn marked(snippet: &str) -> BTreeSet<String> {
    snippet
        .split(MATCH_START)
        .skip(1)
        .filter_map(|rest| rest.split(MATCH_END).next())
        .map(str::to_lowercase)
        .collect()
}

const QUERIES: &[&str] = &[
    "quick fox",
    r#""lazy dog""#,
    r#""dog lazy""#,
    "docker OR python",
    "java NOT python",
    "java -python",
    "config*",
    "conf* pool",
    "chat-send",
    "my-app.config.ts",
    "config",
    "P2.2",
    "sp_new1",
    "sp_new*",
    "don't",
    "user@example.com",
    "100%",
    "content:secret",
    "NOT fox",
    "",
    "résumé",
    "resume",
    "cafe",
    "CAFÉ",
    "naive",
    "rust",
    "rust OR docker",
    "needle",
    "ripgrep_search",
    "zebrafish",
    "okapi_habitat.rs",
    "okapi*",
    "okapi_hab",
    "连接池",
    "数据库连接池",
    "中文",
    "错误",
    "缺失",
    "数据库迁移",
    "数据库 OR docker",
    "中文 docker",
    "数据库 NOT 连接池",
    "データベース",
    "한국어",
    "检",
    "C++",
    "(hello",
    r#"a"b"#,
    "NEAR(a b)",
    "* foo",
    "OR AND NOT",
    "🚀",
    "ship🚀it",
    "🚀 shipped",
    "👨\u{200d}👩\u{200d}👧",
    "👍🏽",
    "👍",
    "->",
    "::",
    "!=",
    "&&",
    "$",
    "#",
    "%",
    "@user",
    "...",
    r#""()""#,
    "-> OR ::",
    "-",
    "中",
    "x",
    // symbols next to words, and short terms next to CJK: tested, not dropped
    "shipped -🚀",
    "shipped OR 🚀",
    "rust OR ->",
    "main -> Result",
    r#""fn main" ->"#,
    "echo -$",
    "-> NOT ::",
    "中 🚀",
    "config* ...",
    "docker OR 🚀 OR ::",
    "needle -中文",
    "needle 中文",
    "数据库迁移 中文",
    "中文 OR ->",
    "-🚀 -rust",
    "shipped 🚀 OR main ->",
    "rust -:: OR fn :: OR 🚀🚀",
];

fn options(p: &Pair) -> Vec<(String, SearchOptions)> {
    let d = SearchOptions::default;
    vec![
        ("default".into(), d()),
        (
            "sources".into(),
            SearchOptions {
                sources: vec!["telegram".into()],
                ..d()
            },
        ),
        (
            "exclude".into(),
            SearchOptions {
                exclude_sources: vec!["telegram".into()],
                ..d()
            },
        ),
        (
            "roles".into(),
            SearchOptions {
                roles: vec![Role::Assistant],
                ..d()
            },
        ),
        (
            "session".into(),
            SearchOptions {
                session_id: Some(p.sessions[0].clone()),
                ..d()
            },
        ),
        ("limit".into(), SearchOptions { limit: 1, ..d() }),
        (
            "offset".into(),
            SearchOptions {
                limit: 2,
                offset: 1,
                ..d()
            },
        ),
        (
            "until".into(),
            SearchOptions {
                until: Some(0),
                ..d()
            },
        ),
    ]
}

#[test]
#[ignore = "needs PostgreSQL: run under .ci/with-postgres"]
fn search_answers_the_same_on_both_backends() {
    let p = pair();
    let mut compared = 0;
    for query in QUERIES {
        let all_sqlite = p.sqlite.search(query, &SearchOptions::default()).unwrap();
        let all_pg = p.pg.search(query, &SearchOptions::default()).unwrap();
        // Ranks differ between bm25 and ts_rank_cd; the hits and their snippets must not.
        let set = |hits: &[scribe_message::SearchHit]| -> BTreeSet<(String, String)> {
            hits.iter()
                .map(|h| (h.message_id.clone(), h.part_id.clone()))
                .collect()
        };
        assert_eq!(set(&all_sqlite), set(&all_pg), "{query:?}");
        for s in &all_sqlite {
            let pg_hit = all_pg
                .iter()
                .find(|h| h.message_id == s.message_id)
                .unwrap();
            assert_eq!(
                marked(&s.snippet),
                marked(&pg_hit.snippet),
                "{query:?}: {s:#?} / {pg_hit:#?}"
            );
            assert_eq!(
                (
                    &s.role,
                    &s.source,
                    &s.title,
                    &s.model,
                    &s.message_model,
                    s.created_at
                ),
                (
                    &pg_hit.role,
                    &pg_hit.source,
                    &pg_hit.title,
                    &pg_hit.model,
                    &pg_hit.message_model,
                    pg_hit.created_at
                ),
            );
            assert_eq!(
                (&s.before, &s.after),
                (&pg_hit.before, &pg_hit.after),
                "{query:?}"
            );
        }
        compared += all_sqlite.len();
        for (name, o) in options(&p) {
            let ids = |hits: Vec<scribe_message::SearchHit>| -> BTreeSet<String> {
                hits.into_iter().map(|h| h.message_id).collect()
            };
            let s = ids(p.sqlite.search(query, &o).unwrap());
            let g = ids(p.pg.search(query, &o).unwrap());
            if o.limit == 20 {
                assert_eq!(s, g, "{query:?} {name}");
            } else {
                // A page of a ranked list: the same size, from the same hits.
                assert_eq!(s.len(), g.len(), "{query:?} {name}");
                let all: BTreeSet<String> = all_pg.iter().map(|h| h.message_id.clone()).collect();
                assert!(g.is_subset(&all), "{query:?} {name}");
            }
        }
    }
    assert!(compared > 40, "the corpus answers too little: {compared}");
}

#[test]
#[ignore = "needs PostgreSQL: run under .ci/with-postgres"]
fn orders_agree_where_they_are_meant_to() {
    let p = pair();
    let order = |svc: &MessageService, q: &str| -> Vec<String> {
        svc.search(q, &SearchOptions::default())
            .unwrap()
            .into_iter()
            .map(|h| h.message_id)
            .collect()
    };
    // A text that is all `rust` beats a long one that mentions it once.
    for q in ["rust", "中文", "数据库迁移", "检"] {
        assert_eq!(order(&p.sqlite, q), order(&p.pg, q), "{q}");
    }
    // Pages of one order concatenate to the whole list on PostgreSQL too.
    let all = order(&p.pg, "needle OR rust OR docker");
    let mut paged = Vec::new();
    for offset in 0..all.len() {
        paged.extend(
            p.pg.search(
                "needle OR rust OR docker",
                &SearchOptions {
                    limit: 1,
                    offset,
                    ..SearchOptions::default()
                },
            )
            .unwrap()
            .into_iter()
            .map(|h| h.message_id),
        );
    }
    assert_eq!(paged, all);
    // Lower is better on both, as bm25 reports it.
    let hits = p.pg.search("rust", &SearchOptions::default()).unwrap();
    assert!(hits.windows(2).all(|w| w[0].rank <= w[1].rank), "{hits:#?}");
    assert!(hits[0].rank < 0.0);
}

#[test]
#[ignore = "needs PostgreSQL: run under .ci/with-postgres"]
fn snippets_have_the_same_shape() {
    let p = pair();
    for q in [
        "rust",
        "deployments",
        "my-app.config.ts",
        "连接池",
        "中文",
        "café",
    ] {
        let s = p.sqlite.search(q, &SearchOptions::default()).unwrap();
        let g = p.pg.search(q, &SearchOptions::default()).unwrap();
        for hit in s.iter().chain(&g) {
            assert!(
                hit.snippet.contains(MATCH_START) && hit.snippet.contains(MATCH_END),
                "{q}: {hit:#?}"
            );
            assert!(hit.snippet.chars().count() <= 260, "{q}: {}", hit.snippet);
        }
    }
    // A long text is cut on both sides, around the match, on both backends.
    for svc in [&p.sqlite, &p.pg] {
        let hit = &svc
            .search("deployments", &SearchOptions::default())
            .unwrap()[0];
        assert!(
            hit.snippet.starts_with('…') && hit.snippet.contains("\u{2}deployments\u{3}"),
            "{}",
            hit.snippet
        );
    }
}

#[test]
#[ignore = "needs PostgreSQL: run under .ci/with-postgres"]
fn session_filters_answer_the_same_on_both_backends() {
    let p = pair();
    let (sqlite, pg) = (p.sqlite.database(), p.pg.database());
    let mut filters_to_ask = Vec::new();
    for parent in [
        ParentFilter::Any,
        ParentFilter::Root,
        ParentFilter::Child,
        ParentFilter::Of(p.sessions[0].clone()),
        ParentFilter::Conversations,
    ] {
        for order in [
            SessionOrder::UpdatedDesc,
            SessionOrder::CreatedDesc,
            SessionOrder::CreatedAsc,
            SessionOrder::TokensDesc,
            SessionOrder::CostDesc,
        ] {
            filters_to_ask.push(SessionFilter {
                parent: parent.clone(),
                order,
                ..SessionFilter::default()
            });
        }
    }
    for title in ["chat", "CHAT", "100%_", "%", "_", "zzz"] {
        filters_to_ask.push(SessionFilter {
            title_contains: Some(title.into()),
            ..SessionFilter::default()
        });
    }
    filters_to_ask.push(SessionFilter {
        sources: vec!["cli".into(), "tui".into()],
        exclude_sources: vec!["tui".into()],
        kinds: vec!["normal".into(), "task".into()],
        models: vec!["claude-test".into()],
        created_after: Some(2_000),
        created_before: Some(4_000),
        archived: Some(false),
        ended: Some(false),
        ..SessionFilter::default()
    });
    filters_to_ask.push(SessionFilter {
        limit: Some(2),
        offset: Some(1),
        ..SessionFilter::default()
    });
    filters_to_ask.push(SessionFilter {
        offset: Some(2),
        ..SessionFilter::default()
    });
    filters_to_ask.push(SessionFilter {
        order: SessionOrder::CostDesc,
        after: Some(SessionKeyset {
            value: SortValue::Real(0.0),
            id: p.sessions[2].clone(),
        }),
        ..SessionFilter::default()
    });
    filters_to_ask.push(SessionFilter {
        order: SessionOrder::CreatedAsc,
        after: Some(SessionKeyset {
            value: SortValue::Int(2_000),
            id: p.sessions[1].clone(),
        }),
        ..SessionFilter::default()
    });
    for filter in &filters_to_ask {
        let ask = |db: &Database| {
            db.read(|tx| -> scribe_db::Result<_> {
                let rows = filters::list_sessions(tx, filter)?;
                let n = filters::count_sessions(tx, filter)?;
                Ok((rows, n))
            })
            .unwrap()
        };
        let (s, g) = (ask(sqlite), ask(pg));
        assert_eq!(s, g, "{filter:?}");
    }
    // Not vacuous: the title filter is literal and case-folded, the parent filters differ.
    let titles = |text: &str| {
        pg.read(|tx| {
            filters::list_sessions(
                tx,
                &SessionFilter {
                    title_contains: Some(text.into()),
                    ..SessionFilter::default()
                },
            )
        })
        .unwrap()
        .len()
    };
    assert_eq!((titles("CHAT"), titles("100%_"), titles("%")), (2, 1, 1));
}

#[test]
#[ignore = "needs PostgreSQL: run under .ci/with-postgres"]
fn rows_written_on_postgres_are_found_by_the_next_search() {
    let db = Arc::new(fresh_postgres());
    let svc = MessageService::new(db.clone());
    let ses = session(&db, "cli", "normal", None, None, 1_000);
    for (i, text) in ["the first albatross", "数据库迁移失败", "中文"]
        .iter()
        .enumerate()
    {
        let (message_id, part_id) = (new_id(Prefix::Message), new_id(Prefix::Part));
        let at = 2_000 + i64::try_from(i).unwrap();
        let data = serde_json::to_string(&Part::text(*text)).unwrap();
        db.write(|tx| -> scribe_db::Result<()> {
            tx.q().create_message(&scribe_db::testing::bare_message(
                &message_id,
                &ses,
                "user",
                at,
            ))?;
            tx.q().create_part(&q::CreatePartParams {
                id: &part_id,
                message_id: &message_id,
                session_id: &ses,
                position: 0,
                r#type: "text",
                data: &data,
                created_at: at,
                updated_at: at,
            })
        })
        .unwrap();
    }
    // Nothing is queued on PostgreSQL: the indexes were kept by the writes.
    assert_eq!(db.index_pending().unwrap().indexed, 0);
    for q in ["albatross", "albatr*", "迁移失败", "中文"] {
        let hits = svc.search(q, &SearchOptions::default()).unwrap();
        assert_eq!(hits.len(), 1, "{q}: {hits:#?}");
        assert!(hits[0].snippet.contains(MATCH_START), "{q}: {hits:#?}");
    }
}

/// The search text (as the indexes compute it) and `updated_at` of the part of message `id`.
fn stored(admin: &mut postgres::Client, id: &str) -> (String, i64) {
    let row = admin
        .query_one(
            "SELECT scribe_search_text(type, data), updated_at FROM parts WHERE message_id = $1",
            &[&id],
        )
        .unwrap();
    (row.get(0), row.get(1))
}

/// V10 on a store that version 1 filled: a tool part's input was stored re-rendered by
/// jsonb; after the upgrade it is the stored text, as on SQLite, and the part's
/// `updated_at` has not moved.
#[test]
#[ignore = "needs PostgreSQL: run under .ci/with-postgres"]
fn v10_gives_existing_tool_parts_their_stored_input() {
    let url = fresh_postgres_url();
    // Kept at version 10: forgetting V10 below must leave the store at version 9 (no
    // later version recorded), and the later versions are not written to run twice.
    let db = Arc::new(Database::open_at_version(&url, 10).unwrap());
    let svc = MessageService::new(db.clone());
    let ses = session(&db, "cli", "normal", None, None, 1_000);
    let msg = svc
        .create(NewMessage::new(
            &ses,
            Role::Assistant,
            vec![completed_tool(
                "c1",
                "grep",
                json!({"pattern": "zebrafish", "path": "src"}),
                "found",
            )],
        ))
        .unwrap();
    let mut admin = postgres::Client::connect(&url, postgres::NoTls).unwrap();
    let (now, at) = stored(&mut admin, &msg.id);
    assert!(
        now.contains(r#"{"path":"src","pattern":"zebrafish"}"#),
        "{now}"
    );
    // Back to version 1's text (the jsonb rendering), and V10 forgotten.
    admin
        .batch_execute(
            r#"
            CREATE OR REPLACE FUNCTION scribe_search_text(kind TEXT, data TEXT) RETURNS TEXT
            LANGUAGE plpgsql IMMUTABLE AS $$
            DECLARE doc JSONB;
            BEGIN
                doc := data::jsonb;
                RETURN CASE kind
                    WHEN 'tool' THEN concat_ws(E'\n', doc ->> 'tool', doc ->> 'input',
                        doc #>> '{state,output}', doc #>> '{state,message}')
                    ELSE doc ->> 'text' END;
            END;
            $$;
            ALTER TABLE parts DISABLE TRIGGER parts_touch;
            UPDATE parts SET data = data;
            ALTER TABLE parts ENABLE TRIGGER parts_touch;
            DELETE FROM refinery_schema_history WHERE version = 10;
            "#,
        )
        .unwrap();
    let (old, _) = stored(&mut admin, &msg.id);
    assert!(old.contains(r#""pattern": "zebrafish""#), "{old}");
    // Opened again: V10 runs.
    let reopened = MessageService::new(Arc::new(Database::open_at_version(&url, 10).unwrap()));
    assert_eq!(stored(&mut admin, &msg.id), (now, at));
    drop(reopened);
    // And on to the latest version, whose search reads the documents V13 stores.
    let latest = MessageService::new(Arc::new(Database::open(&url).unwrap()));
    let hits = latest
        .search("zebrafish", &SearchOptions::default())
        .unwrap();
    assert_eq!(hits.len(), 1);
    assert!(
        hits[0].snippet.contains("\u{2}zebrafish\u{3}"),
        "{}",
        hits[0].snippet
    );
}
