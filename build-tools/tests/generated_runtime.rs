//! Compiles the committed golden output (under the same strict lints as `crates/db`) and runs
//! the generated functions against an in-memory database built from the fixture migrations.
#![allow(clippy::unwrap_used, clippy::expect_used)]

#[deny(warnings, missing_debug_implementations, unsafe_code)]
#[allow(dead_code)] // the real crate re-exports everything; here some models go unused
mod generated {
    include!("fixtures/expected/queries.rs");
}

use generated as q;
use q::{Queries, ReadQueries};
use rusqlite::Connection;

/// What the generated traits return errors as: the including crate's `Error` (in Scribe,
/// `scribe_db::Error`), which must convert from the drivers' errors.
#[derive(Debug)]
pub enum Error {
    /// rusqlite's.
    Sqlite(rusqlite::Error),
}

impl From<rusqlite::Error> for Error {
    fn from(err: rusqlite::Error) -> Self {
        Error::Sqlite(err)
    }
}

/// The traits give the same answers as the free functions, with `Option` for a row that
/// may be missing and the row itself where one always exists.
#[test]
fn traits_run_the_same_queries() {
    let conn = db();
    let mut tx = q::SqliteQueries::new(&conn);
    let s = tx
        .create_session(&q::CreateSessionParams {
            id: "t",
            parent_id: None,
            title: "trait",
            now: 5,
        })
        .unwrap();
    assert_eq!(tx.get_session("t").unwrap(), Some(s));
    assert_eq!(tx.get_session("missing").unwrap(), None);
    assert_eq!(tx.count_sessions().unwrap(), 1);
    // Through `dyn`, as a transaction handle will hand it out.
    let dynamic: &mut dyn Queries = &mut tx;
    assert_eq!(dynamic.count_sessions().unwrap(), 1);
}

fn db() -> Connection {
    let conn = Connection::open_in_memory().unwrap();
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/migrations");
    let mut files: Vec<_> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    files.sort();
    for f in files {
        conn.execute_batch(&std::fs::read_to_string(f).unwrap())
            .unwrap();
    }
    conn
}

fn session(conn: &Connection, id: &str, parent: Option<&str>, now: i64) -> q::SessionRow {
    q::create_session(
        conn,
        &q::CreateSessionParams {
            id,
            parent_id: parent,
            title: &format!("title {id}"),
            now,
        },
    )
    .unwrap()
}

fn message(conn: &Connection, id: &str, session_id: &str, content: &str, at: i64) -> i64 {
    q::add_message(
        conn,
        &q::AddMessageParams {
            id,
            session_id,
            role: "user",
            content,
            cost: Some(0.5),
            meta: Some(r#"{"model":"m1"}"#),
            created_at: at,
        },
    )
    .unwrap()
}

#[test]
fn sessions_round_trip() {
    let conn = db();
    let s = session(&conn, "a", None, 10);
    assert_eq!(
        s,
        q::SessionRow {
            id: "a".into(),
            parent_id: None,
            title: "title a".into(),
            summary: None,
            message_count: 0,
            cost: 0.0,
            created_at: 10,
            updated_at: 10,
            archived_at: None,
        }
    );
    assert_eq!(q::get_session(&conn, "a").unwrap(), s);
    assert!(matches!(
        q::get_session(&conn, "missing"),
        Err(rusqlite::Error::QueryReturnedNoRows)
    ));
    use rusqlite::OptionalExtension as _;
    assert_eq!(q::get_session(&conn, "missing").optional().unwrap(), None);

    session(&conn, "b", Some("a"), 20);
    session(&conn, "c", Some("b"), 30);
    assert_eq!(q::count_sessions(&conn).unwrap(), 3);
    let page = q::list_sessions(
        &conn,
        &q::ListSessionsParams {
            limit: 2,
            offset: 1,
        },
    )
    .unwrap();
    assert_eq!(
        page.iter().map(|s| s.id.as_str()).collect::<Vec<_>>(),
        ["b", "a"]
    );

    let changed = q::update_session_title(
        &conn,
        &q::UpdateSessionTitleParams {
            title: "renamed",
            now: 40,
            id: "a",
        },
    )
    .unwrap();
    assert_eq!(changed, 1);
    q::add_session_cost(
        &conn,
        &q::AddSessionCostParams {
            cost: 1.5,
            updated_at: 41,
            id: "a",
        },
    )
    .unwrap();
    q::add_session_cost(
        &conn,
        &q::AddSessionCostParams {
            cost: 1.0,
            updated_at: 42,
            id: "a",
        },
    )
    .unwrap();
    q::set_session_summary(
        &conn,
        &q::SetSessionSummaryParams {
            summary: Some("sum"),
            id: "a",
        },
    )
    .unwrap();
    q::touch_session(&conn, &q::TouchSessionParams { now: 43, id: "b" }).unwrap();
    let a = q::get_session(&conn, "a").unwrap();
    assert_eq!(
        (a.title.as_str(), a.cost, a.summary.as_deref()),
        ("renamed", 2.5, Some("sum"))
    );
    assert_eq!(q::total_cost(&conn).unwrap(), 2.5);
    assert_eq!(q::latest_update(&conn).unwrap(), Some(43));
    assert_eq!(q::newest_root(&conn).unwrap(), 10);

    // Repeated @since is one parameter.
    assert_eq!(q::sessions_changed_since(&conn, 43).unwrap(), ["b"]);
    assert_eq!(
        q::sessions_changed_since(&conn, 30).unwrap(),
        ["a", "b", "c"]
    );
    assert_eq!(
        q::sessions_created_between(
            &conn,
            &q::SessionsCreatedBetweenParams {
                created_at: 15,
                created_at_2: 30
            }
        )
        .unwrap(),
        ["b", "c"]
    );

    // Recursive CTE walking parent ids.
    let chain = q::session_ancestors(&conn, "c").unwrap();
    let ids: Vec<_> = chain
        .iter()
        .map(|r| (r.id.as_str(), r.parent_id.as_deref(), r.depth))
        .collect();
    assert_eq!(
        ids,
        [("c", Some("b"), 0), ("b", Some("a"), 1), ("a", None, 2)]
    );

    // ALTER TABLE column and :execrows.
    assert_eq!(
        q::archive_session(
            &conn,
            &q::ArchiveSessionParams {
                now: Some(50),
                id: "c"
            }
        )
        .unwrap(),
        1
    );
    assert_eq!(
        q::archive_session(
            &conn,
            &q::ArchiveSessionParams {
                now: Some(51),
                id: "c"
            }
        )
        .unwrap(),
        0
    );
    let archived = q::archived_summaries(&conn).unwrap();
    assert_eq!(archived.len(), 1);
    assert_eq!(archived[0].archived_at, Some(50));

    q::upsert_session_title(
        &conn,
        &q::UpsertSessionTitleParams {
            id: "a",
            title: "up",
            now: 60,
        },
    )
    .unwrap();
    assert_eq!(q::get_session(&conn, "a").unwrap().title, "up");
    assert_eq!(q::delete_old_sessions(&conn, 0).unwrap(), 0);
}

#[test]
fn slices_expand_at_run_time() {
    let conn = db();
    for (i, id) in ["a", "b", "c", "d"].iter().enumerate() {
        session(&conn, id, None, i as i64);
    }
    assert!(q::get_sessions_by_ids(&conn, &[]).unwrap().is_empty());
    let rows = q::get_sessions_by_ids(&conn, &["a", "c", "zzz"]).unwrap();
    assert_eq!(
        rows.iter().map(|r| r.id.as_str()).collect::<Vec<_>>(),
        ["a", "c"]
    );
    let rows = q::get_sessions_by_ids(&conn, &["d", "b", "a"]).unwrap();
    assert_eq!(rows.len(), 3);
    let rest = q::get_sessions_by_ids_since(
        &conn,
        &q::GetSessionsByIdsSinceParams {
            since: 1,
            exclude: &["b", "d"],
        },
    )
    .unwrap();
    assert_eq!(rest, ["c"]);
    let all = q::get_sessions_by_ids_since(
        &conn,
        &q::GetSessionsByIdsSinceParams {
            since: 0,
            exclude: &[],
        },
    )
    .unwrap();
    assert_eq!(all, ["a", "b", "c", "d"]);
}

#[test]
fn messages_joins_aggregates_and_search() {
    let conn = db();
    session(&conn, "s1", None, 1);
    session(&conn, "s2", None, 2);
    let rowid = message(&conn, "m1", "s1", "hello wonderful world", 10);
    assert!(rowid > 0);
    message(&conn, "m2", "s1", "another message", 11);
    message(&conn, "m3", "s1", "third one", 12);

    let joined = q::list_messages_with_session(&conn, "s1").unwrap();
    assert_eq!(joined.len(), 3);
    assert_eq!(joined[0].session_title, "title s1");

    let last = q::sessions_with_last_message(&conn).unwrap();
    assert_eq!(last[0].last_content.as_deref(), Some("third one"));
    assert_eq!(last[1].last_content, None);
    assert_eq!(last[1].last_at, None);

    let stats = q::message_stats(&conn, "s1").unwrap();
    assert_eq!((stats.total, stats.priced, stats.cost), (3, 3, 1.5));
    assert_eq!(stats.avg_cost, Some(0.5));
    let empty = q::message_stats(&conn, "s2").unwrap();
    assert_eq!((empty.total, empty.cost, empty.avg_cost), (0, 0.0, None));

    let found = q::search_messages(
        &conn,
        &q::SearchMessagesParams {
            query: "wonderful",
            limit: 10,
        },
    )
    .unwrap();
    assert_eq!(found.len(), 1);
    assert_eq!(found[0].id, "m1");
    assert!(
        found[0].excerpt.contains("[wonderful]"),
        "{}",
        found[0].excerpt
    );
    assert!(found[0].score.is_finite());
    let ranked = q::search_ranked(&conn, "message").unwrap();
    assert_eq!(ranked.len(), 1);
    assert!(ranked[0].marked.contains("<message>"));

    let meta = q::message_meta(&conn, "m1").unwrap();
    assert_eq!(meta.model.as_deref(), Some("m1"));
    assert_eq!(meta.meta, Some(serde_json::json!({"model": "m1"})));
    let models = q::message_models(&conn).unwrap();
    assert_eq!(
        models[0].model,
        Some(rusqlite::types::Value::Text("m1".into()))
    );

    assert_eq!(q::message_counts_by_role(&conn).unwrap()[0].n, 3);
    assert_eq!(
        q::recent_message_ids(&conn, "s1").unwrap(),
        ["m1", "m2", "m3"]
    );
    let counts = q::session_message_counts(&conn).unwrap();
    assert_eq!((counts[0].n, counts[1].n), (3, 0));
    let labels = q::role_labels(&conn, "s1").unwrap();
    assert_eq!((labels[0].label.as_str(), labels[0].len), ("U", 21));
    assert_eq!(labels[0].role_upper, "USER");
    assert_eq!(q::all_ids(&conn).unwrap().len(), 5);
    assert_eq!(q::count_by_role(&conn, "user").unwrap(), 3);

    let with_stats = q::sessions_with_stats(&conn, "title%").unwrap();
    assert_eq!((with_stats[0].messages, with_stats[0].cost), (3, 1.5));
    // The trigger kept the counter.
    assert_eq!(q::get_session(&conn, "s1").unwrap().message_count, 3);

    assert_eq!(q::delete_session_messages(&conn, "s1").unwrap(), 3);
}

#[test]
fn files_tags_and_casts() {
    let conn = db();
    session(&conn, "s", None, 1);
    let f = q::upsert_file(
        &conn,
        &q::UpsertFileParams {
            session_id: "s",
            file_path: "a.rs",
            data: None,
            pinned: false,
        },
    )
    .unwrap();
    let again = q::upsert_file(
        &conn,
        &q::UpsertFileParams {
            session_id: "s",
            file_path: "a.rs",
            data: Some(b"x"),
            pinned: true,
        },
    )
    .unwrap();
    assert_eq!((again.id, again.pinned), (f.id, true));
    let row = q::get_file(&conn, f.id).unwrap();
    assert_eq!(row.data.as_deref(), Some(&b"x"[..]));
    assert_eq!(q::pinned_file_paths(&conn, "s").unwrap(), ["a.rs"]);

    q::insert_tags(
        &conn,
        &q::InsertTagsParams {
            name: "x",
            name_2: "y",
        },
    )
    .unwrap();
    assert_eq!(
        q::copy_title_to_tags(
            &conn,
            &q::CopyTitleToTagsParams {
                prefix: "t:",
                id: "s"
            }
        )
        .unwrap(),
        1
    );
    assert_eq!(q::list_tags(&conn).unwrap(), ["t:title s", "x", "y"]);
    assert_eq!(q::echo_cast(&conn, 21).unwrap(), 42);

    let by_ids = q::get_files_by_ids(&conn, &[f.id, 999]).unwrap();
    assert_eq!(by_ids.len(), 1);
    assert_eq!(by_ids[0].file_path, "a.rs");
    assert!(q::get_files_by_ids(&conn, &[]).unwrap().is_empty());
    let add = |n| q::add_tag_if_missing(&conn, &q::AddTagIfMissingParams { name: n, name_2: n });
    assert_eq!(add("z").unwrap(), 1);
    assert_eq!(add("z").unwrap(), 0);
}

#[test]
fn works_inside_a_transaction() {
    let mut conn = db();
    let tx = conn.transaction().unwrap();
    session(&tx, "t", None, 1);
    assert_eq!(q::count_sessions(&tx).unwrap(), 1);
    tx.rollback().unwrap();
    assert_eq!(q::count_sessions(&conn).unwrap(), 0);
}

#[test]
fn row_values_is_and_negated_patterns() {
    let conn = db();
    session(&conn, "s", None, 1);
    session(&conn, "c", Some("s"), 2);
    for (id, at) in [("m1", 10), ("m2", 10), ("m3", 20), ("m4", 30)] {
        message(&conn, id, "s", "hi", at);
    }
    // Keyset pagination walks (created_at, id) downwards without repeating a row.
    let page = |created_at, id| {
        q::messages_before(
            &conn,
            &q::MessagesBeforeParams {
                session_id: "s",
                created_at,
                id,
                limit: 2,
            },
        )
        .unwrap()
        .into_iter()
        .map(|r| r.id)
        .collect::<Vec<_>>()
    };
    assert_eq!(page(i64::MAX, ""), ["m4", "m3"]);
    assert_eq!(page(20, "m3"), ["m2", "m1"]);
    assert_eq!(page(10, "m1"), Vec::<String>::new());

    let from = |updated_at, id| {
        q::sessions_from(&conn, &q::SessionsFromParams { updated_at, id }).unwrap()
    };
    // Messages moved "s" to updated_at 30 (trigger); "c" stays at 2.
    assert_eq!(from(1, "s"), ["c", "s"]);
    assert_eq!(from(2, "c"), ["c", "s"]);
    assert_eq!(from(2, "d"), ["s"]);
    let at_rows = q::sessions_at_rows(
        &conn,
        &q::SessionsAtRowsParams {
            created_at: 1,
            title: "title s",
            at: 2,
            title_2: "title c",
        },
    )
    .unwrap();
    assert_eq!(at_rows, ["c", "s"]);
    let either = q::messages_at_either(
        &conn,
        &q::MessagesAtEitherParams {
            session_id: "s",
            created_at: 20,
            session_id_2: "s",
            created_at_2: 30,
        },
    )
    .unwrap();
    assert_eq!(either, ["m3", "m4"]);

    // `IS` matches NULL when given None, unlike `=`.
    let by_summary = |summary, not_parent| {
        q::sessions_by_summary(
            &conn,
            &q::SessionsBySummaryParams {
                summary,
                not_parent,
            },
        )
        .unwrap()
    };
    assert_eq!(by_summary(None, None), ["c"]);
    assert_eq!(by_summary(None, Some("s")), ["s"]);
    assert!(by_summary(Some("x"), None).is_empty());

    let plain = q::titles_not_matching(
        &conn,
        &q::TitlesNotMatchingParams {
            pattern: "*c",
            exclude: "%\\_%",
        },
    )
    .unwrap();
    let got: Vec<_> = plain.iter().map(|r| (r.id.as_str(), r.plain)).collect();
    assert_eq!(got, [("c", false), ("s", true)]);
}

#[test]
fn stars_ctes_aggregates_literals_and_unions() {
    let conn = db();
    // Bare aggregates over no rows are NULL, hence the Options.
    assert_eq!(q::session_cost_sum(&conn).unwrap(), None);
    assert_eq!(q::earliest_created(&conn).unwrap(), None);

    session(&conn, "a", None, 1);
    session(&conn, "b", Some("a"), 2);
    session(&conn, "c", None, 3);
    let cost = |id, cost, at| {
        q::add_session_cost(
            &conn,
            &q::AddSessionCostParams {
                cost,
                updated_at: at,
                id,
            },
        )
        .unwrap();
    };
    cost("a", 2.0, 5);
    cost("b", 0.5, 6);
    q::set_session_summary(
        &conn,
        &q::SetSessionSummaryParams {
            summary: Some("sum b"),
            id: "b",
        },
    )
    .unwrap();
    message(&conn, "m1", "a", "first", 10);
    message(&conn, "m2", "a", "second", 12);

    let starred = q::messages_with_title_star(&conn, "a").unwrap();
    assert_eq!(starred.len(), 2);
    assert_eq!(
        (
            starred[0].id.as_str(),
            starred[0].cost,
            starred[0].created_at
        ),
        ("m1", Some(0.5), 10)
    );
    assert_eq!(starred[1].session_title, "title a");

    let file = q::upsert_file(
        &conn,
        &q::UpsertFileParams {
            session_id: "a",
            file_path: "src/lib.rs",
            data: Some(b"x"),
            pinned: true,
        },
    )
    .unwrap();
    assert_eq!(
        q::session_files_star(&conn, "title a").unwrap(),
        [q::FileRow {
            id: file.id,
            session_id: "a".into(),
            file_path: "src/lib.rs".into(),
            data: Some(b"x".to_vec()),
            pinned: true,
        }]
    );

    let children = q::child_sessions_star(&conn).unwrap();
    let pairs: Vec<_> = children
        .iter()
        .map(|r| (r.parent.as_str(), r.id.as_deref(), r.parent_id.as_deref()))
        .collect();
    assert_eq!(
        pairs,
        [
            ("a", Some("b"), Some("a")),
            ("b", None, None),
            ("c", None, None)
        ]
    );
    assert_eq!(children[0].cost, Some(0.5));
    assert_eq!(
        (children[1].title.as_deref(), children[1].message_count),
        (None, None)
    );

    // The message trigger moved a's updated_at to 12.
    let recent = q::recent_titles(&conn, 5).unwrap();
    let recent: Vec<_> = recent
        .iter()
        .map(|r| (r.id.as_str(), r.title.as_str(), r.summary.as_deref()))
        .collect();
    assert_eq!(
        recent,
        [("a", "title a", None), ("b", "title b", Some("sum b"))]
    );

    let bounds = q::message_cost_bounds(&conn, "a").unwrap();
    assert_eq!(
        (bounds.total, bounds.first_at, bounds.last_at),
        (Some(1.0), Some(10), Some(12))
    );
    let none = q::message_cost_bounds(&conn, "c").unwrap();
    assert_eq!(
        (none.total, none.first_at, none.last_at),
        (None, None, None)
    );
    assert_eq!(q::session_cost_sum(&conn).unwrap(), Some(2.5));
    assert_eq!(q::earliest_created(&conn).unwrap(), Some(1));

    assert_eq!(q::constant_one(&conn).unwrap(), 1);
    assert_eq!(q::constant_text(&conn).unwrap(), "a");
    assert_eq!(
        q::constants(&conn).unwrap(),
        q::ConstantsRow {
            one: 1,
            letter: "a".into(),
            ratio: 2.5,
            negative: -3,
            bytes: vec![0x00, 0xff],
        }
    );

    let pair = q::sessions_in_pair(&conn, &q::SessionsInPairParams { id: "c", id_2: "a" }).unwrap();
    let pair: Vec<_> = pair
        .iter()
        .map(|r| (r.id.as_str(), r.title.as_str()))
        .collect();
    assert_eq!(pair, [("a", "title a"), ("c", "title c")]);

    let scaled = q::scaled_costs(
        &conn,
        &q::ScaledCostsParams {
            cost: 2.0,
            created_at: 2,
        },
    )
    .unwrap();
    let scaled: Vec<_> = scaled.iter().map(|r| (r.id.as_str(), r.scaled)).collect();
    assert_eq!(scaled, [("b", 1.0), ("c", 0.0)]);
    assert_eq!(q::cast_factor(&conn, 1.5).unwrap(), 1.5);

    let between =
        q::sessions_updated_between(&conn, &q::SessionsUpdatedBetweenParams { start: 3, end: 6 })
            .unwrap();
    assert_eq!(between, ["b", "c"]);

    q::archive_session(
        &conn,
        &q::ArchiveSessionParams {
            now: Some(7),
            id: "c",
        },
    )
    .unwrap();
    let buckets = q::cost_buckets(&conn).unwrap();
    let buckets: Vec<_> = buckets
        .iter()
        .map(|r| (r.bucket.as_str(), r.archived, r.paid, r.label.as_deref()))
        .collect();
    assert_eq!(
        buckets,
        [
            ("high", 0, Some(2.0), Some("title a")),
            ("low", 0, Some(0.5), Some("sum b")),
            ("free", 1, None, Some("title c")),
        ]
    );

    // UNION removes duplicates; NULL sorts first.
    assert_eq!(
        q::titles_and_summaries(&conn).unwrap(),
        [
            None,
            Some("sum b".to_string()),
            Some("title a".into()),
            Some("title b".into()),
            Some("title c".into()),
        ]
    );
    q::insert_tags(
        &conn,
        &q::InsertTagsParams {
            name: "t1",
            name_2: "a",
        },
    )
    .unwrap();
    let kv = q::titles_and_tags(&conn).unwrap();
    let kv: Vec<_> = kv
        .iter()
        .map(|r| (r.key.as_str(), r.value.as_str()))
        .collect();
    assert_eq!(kv[..2], [("a", "title a"), ("a", "a")]);
    assert_eq!(kv.len(), 5);

    let derived = q::derived_star(&conn).unwrap();
    assert_eq!(derived.iter().map(|r| r.k).collect::<Vec<_>>(), [1, 1, 1]);
    assert_eq!(derived[2].id, "c");
    let counted = q::cte_column_list(&conn).unwrap();
    assert_eq!(
        counted,
        [q::CteColumnListRow {
            id: "a".into(),
            summary: None,
            n: 2,
        }]
    );
}
