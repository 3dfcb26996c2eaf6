//! The generated queries, the session filters and search do what the services rely on:
//! lifecycle (first end wins, reopen, archive), atomic usage, lineage, title lineages,
//! pagination cursors, file versions, filtered lists and search with filters.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use common::*;
use rusqlite::OptionalExtension;
use scribe_db::filters::{self, ParentFilter, SessionFilter, SessionOrder};
use scribe_db::ids::{Prefix, new_id};
use scribe_db::queries as q;
use scribe_db::search::{self, SearchFilter, TextQuery};
use scribe_db::{Database, Error};
use serde_json::json;

/// Runs `f` on a read connection of `db` (these tests are on SQLite) and unwraps its result.
fn read_with<T>(
    db: &Database,
    mut f: impl FnMut(&rusqlite::Connection) -> rusqlite::Result<T>,
) -> T {
    db.read(|c| -> scribe_db::Result<T> { Ok(f(c.conn().unwrap())?) })
        .unwrap()
}

/// Runs `f` in one write transaction of `db` (these tests are on SQLite) and unwraps its result.
fn write_with<T>(
    db: &Database,
    mut f: impl FnMut(&rusqlite::Connection) -> rusqlite::Result<T>,
) -> T {
    db.write(|tx| -> scribe_db::Result<T> { Ok(f(tx.conn().unwrap())?) })
        .unwrap()
}

/// The usage from a time on (`scribe statusline` at every prompt, `stats --since`, the web
/// page's usage of a period) reads the messages that carry usage through their time
/// index, never every message of the history (V29: a full scan per query grew with the
/// history, 100 ms at 710,000 messages).
#[test]
fn usage_since_a_time_reads_the_messages_by_their_time_index() {
    let db = Database::open_in_memory().unwrap();
    for sql in [q::OWN_USAGE_SINCE_SQL, q::MESSAGE_USAGE_SINCE_SQL] {
        let plan: Vec<String> = read_with(&db, |c| {
            let mut stmt = c.prepare(&format!("EXPLAIN QUERY PLAN {sql}"))?;
            let rows = stmt.query_map([1_i64], |row| row.get(3))?;
            rows.collect()
        });
        assert!(
            plan.iter().any(|step| step.starts_with("SEARCH u ")
                && step.contains("INDEX messages_usage_created (created_at>?)")),
            "{plan:?}"
        );
        assert!(
            !plan.iter().any(|step| step.starts_with("SCAN u")),
            "{plan:?}"
        );
    }
}

/// The next free title of a lineage is found by a seek in V31's index of each title's
/// lineage base and number, never by a scan of the lineage's titles: with a scan, importing
/// n sessions of one title took time in the square of n (8,000: 8.4 s). The query repeats
/// the index's expressions, and this holds the two together.
#[test]
fn the_highest_number_of_a_title_lineage_is_one_index_seek() {
    let db = Database::open_in_memory().unwrap();
    let plan: Vec<String> = read_with(&db, |c| {
        let mut stmt = c.prepare(&format!(
            "EXPLAIN QUERY PLAN {}",
            q::MAX_TITLE_LINEAGE_NUMBER_SQL
        ))?;
        let rows = stmt.query_map(["t"], |row| row.get(3))?;
        rows.collect()
    });
    assert!(
        plan.iter()
            .any(|step| step.contains("INDEX sessions_title_lineage (<expr>=?)")),
        "{plan:?}"
    );
    assert!(
        !plan.iter().any(|step| step.starts_with("SCAN sessions")),
        "{plan:?}"
    );
}

fn child(db: &Database, parent: &str, kind: &str, created_at: i64) -> String {
    let id = new_id(Prefix::Session);
    db.write(|tx| -> scribe_db::Result<_> {
        let tx = tx.conn().unwrap();
        let mut params = new_session(&id, "cli");
        params.parent_session_id = Some(parent);
        params.kind = kind;
        params.now = created_at;
        q::create_session(tx, &params)?;
        Ok(())
    })
    .unwrap();
    id
}

fn titled(db: &Database, title: &str) -> String {
    let id = new_id(Prefix::Session);
    db.write(|tx| -> scribe_db::Result<_> {
        let tx = tx.conn().unwrap();
        let mut params = new_session(&id, "cli");
        params.title = Some(title);
        q::create_session(tx, &params)?;
        Ok(())
    })
    .unwrap();
    id
}

#[test]
fn end_first_wins_reopen_archive() {
    let db = Database::open_in_memory().unwrap();
    let s = session(&db, "cli");
    let end = |reason: &str, now: i64| {
        db.write(|tx| -> scribe_db::Result<_> {
            let tx = tx.conn().unwrap();
            Ok(q::end_session(
                tx,
                &q::EndSessionParams {
                    now,
                    end_reason: Some(reason),
                    id: &s,
                },
            )?)
        })
        .unwrap()
    };
    assert_eq!(end("user_exit", 100), 1);
    assert_eq!(end("timeout", 200), 0);
    let row = read_with(&db, |c| q::get_session(c, &s));
    assert_eq!(
        (row.ended_at, row.end_reason.as_deref()),
        (Some(100), Some("user_exit"))
    );

    db.write(|tx| -> scribe_db::Result<_> {
        let tx = tx.conn().unwrap();
        Ok(q::reopen_session(
            tx,
            &q::ReopenSessionParams { now: 300, id: &s },
        )?)
    })
    .unwrap();
    let row = read_with(&db, |c| q::get_session(c, &s));
    assert_eq!((row.ended_at, row.end_reason), (None, None));

    db.write(|tx| -> scribe_db::Result<_> {
        let tx = tx.conn().unwrap();
        Ok(q::archive_session(
            tx,
            &q::ArchiveSessionParams { now: 400, id: &s },
        )?)
    })
    .unwrap();
    let row = read_with(&db, |c| q::get_session(c, &s));
    assert_eq!(row.archived_at, Some(400));

    let missing = read_with(&db, |c| q::get_session(c, "ses_missing").optional());
    assert!(missing.is_none());
    assert_eq!(
        write_with(&db, |tx| q::delete_session(tx, "ses_missing")),
        0
    );
}

#[test]
fn usage_adds_atomically_and_rolls_up_into_the_parent() {
    let db = Database::open_in_memory().unwrap();
    let parent = session(&db, "cli");
    let task = child(&db, &parent, "task", 10);
    let add = |id: &str, tokens: i64, cost: f64| {
        db.write(|tx| -> scribe_db::Result<_> {
            let tx = tx.conn().unwrap();
            q::add_session_usage_delta(
                tx,
                &q::AddSessionUsageDeltaParams {
                    input_tokens: tokens,
                    output_tokens: 2 * tokens,
                    cache_read_tokens: 1,
                    cache_write_tokens: 1,
                    reasoning_tokens: 1,
                    api_call_count: 1,
                    tool_call_count: 0,
                    estimated_cost_usd: cost,
                    now: 5,
                    id,
                },
            )?;
            Ok(())
        })
        .unwrap();
    };
    add(&parent, 10, 0.25);
    add(&task, 100, 1.0);
    add(&task, 100, 1.0);
    db.write(|tx| -> scribe_db::Result<_> {
        let tx = tx.conn().unwrap();
        q::add_session_actual_cost(
            tx,
            &q::AddSessionActualCostParams {
                actual_cost_usd: 0.5,
                now: 6,
                id: &task,
            },
        )?;
        q::roll_up_session_usage(
            tx,
            &q::RollUpSessionUsageParams {
                now: 7,
                child_id: &task,
            },
        )?;
        Ok(())
    })
    .unwrap();
    let row = read_with(&db, |c| q::get_session(c, &parent));
    assert_eq!(row.input_tokens, 210);
    assert_eq!(row.output_tokens, 420);
    assert_eq!(row.api_call_count, 3);
    assert!((row.estimated_cost_usd - 2.25).abs() < 1e-9);
    assert_eq!(row.actual_cost_usd, Some(0.5));
}

#[test]
fn lineage_ancestors_descendants_and_continuation_tip() {
    let db = Database::open_in_memory().unwrap();
    let root = session(&db, "cli");
    let a = child(&db, &root, "continuation", 10);
    let b = child(&db, &a, "continuation", 20);
    let task = child(&db, &a, "task", 30);
    let ids = |rows: Vec<q::SessionRow>| rows.into_iter().map(|r| r.id).collect::<Vec<_>>();

    let ancestors = read_with(&db, |c| q::list_session_ancestors(c, &b));
    assert_eq!(ids(ancestors), vec![root.clone(), a.clone()]);
    let descendants = read_with(&db, |c| q::list_session_descendants(c, &root));
    assert_eq!(ids(descendants), vec![a.clone(), b.clone(), task.clone()]);
    let tip = read_with(&db, |c| q::get_continuation_tip(c, &root));
    assert_eq!(tip.id, b);
    let tip = read_with(&db, |c| q::get_continuation_tip(c, &task));
    assert_eq!(tip.id, task);

    // Deleting the middle keeps its children, unlinked.
    write_with(&db, |tx| q::delete_session(tx, &a));
    let b_row = read_with(&db, |c| q::get_session(c, &b));
    assert_eq!(b_row.parent_session_id, None);
}

#[test]
fn title_lineage_takes_literal_titles_and_the_highest_number() {
    let db = Database::open_in_memory().unwrap();
    let base = titled(&db, "fix 100%_done");
    let second = titled(&db, "fix 100%_done #2");
    let tenth = titled(&db, "fix 100%_done #10");
    titled(&db, "fix 100%_done #x"); // not a number
    titled(&db, "fix 100%_done #02"); // leading zero: not ours
    titled(&db, "fix 1000_done #3"); // `%_` are not wildcards
    titled(&db, "fix 100%_done #2 #3"); // a lineage of its own
    let lineage = read_with(&db, |c| q::list_title_lineage(c, "fix 100%_done"));
    let ids: Vec<_> = lineage.iter().map(|r| r.id.clone()).collect();
    assert_eq!(ids, vec![tenth, second, base]);
    let n = read_with(&db, |c| q::max_title_lineage_number(c, "fix 100%_done"));
    assert_eq!(n, 10);
    assert_eq!(
        read_with(&db, |c| q::max_title_lineage_number(c, "unused")),
        0
    );

    let err = db
        .write(|tx| -> scribe_db::Result<_> {
            let tx = tx.conn().unwrap();
            let id = new_id(Prefix::Session);
            let mut params = new_session(&id, "cli");
            params.title = Some("fix 100%_done");
            q::create_session(tx, &params)?;
            Ok(())
        })
        .unwrap_err();
    assert!(matches!(err, Error::Conflict { .. }), "{err:?}");
}

#[test]
fn message_pages_use_stable_cursors() {
    let db = Database::open_in_memory().unwrap();
    let s = session(&db, "cli");
    // Ten messages, all in the same millisecond: ids break the tie.
    let mut ids = Vec::new();
    for i in 0..10 {
        let (m, _) = db
            .write(|tx| -> scribe_db::Result<_> {
                let tx = tx.conn().unwrap();
                message_with_part(tx, &s, "user", "text", &text(&format!("m{i}")))
            })
            .unwrap();
        ids.push(m);
    }
    db.write(|tx| -> scribe_db::Result<_> {
        let tx = tx.conn().unwrap();
        tx.execute("UPDATE messages SET created_at = 1000", [])?;
        Ok(())
    })
    .unwrap();
    let mut seen = Vec::new();
    let mut page = db
        .read(|c| -> scribe_db::Result<_> {
            let c = c.conn().unwrap();
            Ok(q::list_messages_newest(
                c,
                &q::ListMessagesNewestParams {
                    session_id: &s,
                    limit: 4,
                },
            )?)
        })
        .unwrap();
    while let Some(last) = page.last().cloned() {
        seen.extend(page.iter().map(|m| m.id.clone()));
        page = db
            .read(|c| -> scribe_db::Result<_> {
                let c = c.conn().unwrap();
                Ok(q::list_messages_before(
                    c,
                    &q::ListMessagesBeforeParams {
                        session_id: &s,
                        created_at: last.created_at,
                        id: &last.id,
                        limit: 4,
                    },
                )?)
            })
            .unwrap();
    }
    seen.reverse();
    assert_eq!(seen, ids);

    let all = read_with(&db, |c| q::list_messages(c, &s));
    assert_eq!(all.iter().map(|m| m.id.clone()).collect::<Vec<_>>(), ids);
    let parts = read_with(&db, |c| q::list_session_parts(c, &s));
    assert_eq!(
        parts
            .iter()
            .map(|p| p.message_id.clone())
            .collect::<Vec<_>>(),
        ids
    );
    let by_ids = read_with(&db, |c| {
        q::list_messages_by_ids(c, &[ids[3].as_str(), ids[1].as_str()])
    });
    assert_eq!(by_ids.len(), 2);
    let none = read_with(&db, |c| q::list_messages_by_ids(c, &[]));
    assert!(none.is_empty());
}

#[test]
fn parts_append_update_and_find_by_call_id() {
    let db = Database::open_in_memory().unwrap();
    let s = session(&db, "cli");
    let (m, _) = db
        .write(|tx| -> scribe_db::Result<_> {
            let tx = tx.conn().unwrap();
            message_with_part(tx, &s, "assistant", "text", &text("let me look"))
        })
        .unwrap();
    let running = json!({"type": "tool", "tool": "grep", "call_id": "call_9", "input": {"q": "x"},
                         "state": {"status": "running", "started_at": 1}})
    .to_string();
    let part = db
        .write(|tx| -> scribe_db::Result<_> {
            let tx = tx.conn().unwrap();
            Ok(q::append_part(
                tx,
                &q::AppendPartParams {
                    id: &new_id(Prefix::Part),
                    message_id: &m,
                    session_id: &s,
                    r#type: "tool",
                    data: &running,
                    now: 5,
                },
            )?)
        })
        .unwrap();
    assert_eq!(part.position, 1);
    let found = db
        .read(|c| -> scribe_db::Result<_> {
            let c = c.conn().unwrap();
            Ok(q::get_tool_part_by_call_id(
                c,
                &q::GetToolPartByCallIdParams {
                    session_id: &s,
                    call_id: "call_9",
                },
            )?)
        })
        .unwrap();
    assert_eq!(found.id, part.id);
    let done = json!({"type": "tool", "tool": "grep", "call_id": "call_9", "input": {"q": "x"},
                      "state": {"status": "completed", "output": "zebra", "started_at": 1, "ended_at": 2}})
    .to_string();
    db.write(|tx| -> scribe_db::Result<_> {
        let tx = tx.conn().unwrap();
        Ok(q::update_part(
            tx,
            &q::UpdatePartParams {
                r#type: "tool",
                data: &done,
                now: 6,
                id: &part.id,
            },
        )?)
    })
    .unwrap();
    let text: String = db
        .read(|c| -> scribe_db::Result<_> {
            let c = c.conn().unwrap();
            let row = q::get_part(c, &part.id)?;
            Ok(c.query_row(
                "SELECT search_text FROM parts_search WHERE seq = ?1",
                [row.seq],
                |r| r.get(0),
            )?)
        })
        .unwrap();
    assert!(text.contains("zebra"));
    let session_row = read_with(&db, |c| q::get_session(c, &s));
    assert_eq!(
        (session_row.message_count, session_row.tool_call_count),
        (1, 1)
    );
    assert_derived_exact(&db);
}

#[test]
fn file_versions_count_per_path() {
    let db = Database::open_in_memory().unwrap();
    let s = session(&db, "cli");
    let put = |path: &str, content: &str| {
        db.write(|tx| -> scribe_db::Result<_> {
            let tx = tx.conn().unwrap();
            Ok(q::create_file_version(
                tx,
                &q::CreateFileVersionParams {
                    id: &new_id(Prefix::File),
                    session_id: &s,
                    path,
                    content,
                    now: 1,
                },
            )?)
        })
        .unwrap()
    };
    assert_eq!(put("a.rs", "v1").version, 1);
    assert_eq!(put("a.rs", "v2").version, 2);
    assert_eq!(put("b.rs", "b1").version, 1);
    assert_eq!(put("a.rs", "v3").version, 3);
    let history = db
        .read(|c| -> scribe_db::Result<_> {
            let c = c.conn().unwrap();
            Ok(q::list_file_versions(
                c,
                &q::ListFileVersionsParams {
                    session_id: &s,
                    path: "a.rs",
                },
            )?)
        })
        .unwrap();
    assert_eq!(
        history
            .iter()
            .map(|f| f.content.as_str())
            .collect::<Vec<_>>(),
        ["v1", "v2", "v3"]
    );
    let latest = read_with(&db, |c| q::list_latest_files(c, &s));
    assert_eq!(
        latest
            .iter()
            .map(|f| (f.path.as_str(), f.version))
            .collect::<Vec<_>>(),
        [("a.rs", 3), ("b.rs", 1)]
    );
}

#[test]
fn session_filters_combine_and_escape_like() {
    let db = Database::open_in_memory().unwrap();
    let make = |source: &str, title: Option<&str>, user: Option<&str>, created: i64| {
        let id = new_id(Prefix::Session);
        db.write(|tx| -> scribe_db::Result<_> {
            let tx = tx.conn().unwrap();
            let mut params = new_session(&id, source);
            params.title = title;
            params.user_id = user;
            params.now = created;
            q::create_session(tx, &params)?;
            Ok(())
        })
        .unwrap();
        id
    };
    let a = make("cli", Some("docker 100% build"), Some("u1"), 1);
    let b = make("telegram", Some("docker 1000 build"), Some("u2"), 2);
    let c_ = make("cli", None, Some("u1"), 3);
    let d = child(&db, &a, "task", 4);
    db.write(|tx| -> scribe_db::Result<_> {
        let tx = tx.conn().unwrap();
        q::end_session(
            tx,
            &q::EndSessionParams {
                now: 9,
                end_reason: None,
                id: &b,
            },
        )?;
        q::archive_session(tx, &q::ArchiveSessionParams { now: 9, id: &c_ })?;
        Ok(())
    })
    .unwrap();
    let list = |f: SessionFilter| {
        db.read(|c| -> scribe_db::Result<_> { filters::list_sessions(c, &f) })
            .unwrap()
            .into_iter()
            .map(|r| r.id)
            .collect::<Vec<_>>()
    };
    let by_created = |f: SessionFilter| {
        list(SessionFilter {
            order: SessionOrder::CreatedAsc,
            ..f
        })
    };

    assert_eq!(
        by_created(SessionFilter::default()),
        vec![a.clone(), b.clone(), c_.clone(), d.clone()]
    );
    assert_eq!(
        by_created(SessionFilter {
            title_contains: Some("100%".into()),
            ..Default::default()
        }),
        vec![a.clone()]
    );
    assert_eq!(
        by_created(SessionFilter {
            sources: vec!["telegram".into()],
            ..Default::default()
        }),
        vec![b.clone()]
    );
    assert_eq!(
        by_created(SessionFilter {
            exclude_sources: vec!["cli".into()],
            ..Default::default()
        }),
        vec![b.clone()]
    );
    assert_eq!(
        by_created(SessionFilter {
            parent: ParentFilter::Child,
            ..Default::default()
        }),
        vec![d.clone()]
    );
    assert_eq!(
        by_created(SessionFilter {
            parent: ParentFilter::Of(a.clone()),
            ..Default::default()
        }),
        vec![d.clone()]
    );
    assert_eq!(
        by_created(SessionFilter {
            parent: ParentFilter::Root,
            ended: Some(false),
            archived: Some(false),
            ..Default::default()
        }),
        vec![a.clone()]
    );
    assert_eq!(
        by_created(SessionFilter {
            user_id: Some("u1".into()),
            ..Default::default()
        }),
        vec![a.clone(), c_.clone()]
    );
    assert_eq!(
        by_created(SessionFilter {
            limit: Some(2),
            offset: Some(1),
            ..Default::default()
        }),
        vec![b.clone(), c_.clone()]
    );
    assert_eq!(
        by_created(SessionFilter {
            offset: Some(3),
            ..Default::default()
        }),
        vec![d.clone()]
    );
    let newest_first = list(SessionFilter {
        order: SessionOrder::CreatedDesc,
        ..Default::default()
    });
    assert_eq!(newest_first.first(), Some(&d));
    let n = db
        .read(|c| -> scribe_db::Result<_> {
            filters::count_sessions(
                c,
                &SessionFilter {
                    ended: Some(true),
                    ..Default::default()
                },
            )
        })
        .unwrap();
    assert_eq!(n, 1);
}

/// `ParentFilter::Conversations`: roots and forks, each at the tip of its compaction
/// chain; tasks, title sessions and continued (non-tip) sessions are left out.
#[test]
fn conversations_are_roots_and_forks_at_their_tips() {
    let db = Database::open_in_memory().unwrap();
    let root = child_of_none(&db, 1);
    let cont = child(&db, &root, "continuation", 2);
    let tip = child(&db, &cont, "continuation", 3);
    let plain = child_of_none(&db, 4);
    let task = child(&db, &plain, "task", 5);
    let task_cont = child(&db, &task, "continuation", 6);
    let title = child(&db, &plain, "title", 7);
    let fork = child(&db, &plain, "fork", 8);
    let fork_cont = child(&db, &fork, "continuation", 9);
    let fork_of_task = child(&db, &task, "fork", 10);
    let filter = SessionFilter {
        parent: ParentFilter::Conversations,
        order: SessionOrder::CreatedAsc,
        ..Default::default()
    };
    let listed: Vec<String> = db
        .read(|c| -> scribe_db::Result<_> { filters::list_sessions(c, &filter) })
        .unwrap()
        .into_iter()
        .map(|r| r.id)
        .collect();
    assert_eq!(listed, vec![tip, plain, fork_cont, fork_of_task]);
    let n = db
        .read(|c| -> scribe_db::Result<_> { filters::count_sessions(c, &filter) })
        .unwrap();
    assert_eq!(n, 4);
    for hidden in [root, cont, task, task_cont, title, fork] {
        assert!(!listed.contains(&hidden));
    }
}

fn child_of_none(db: &Database, created_at: i64) -> String {
    let id = new_id(Prefix::Session);
    db.write(|tx| -> scribe_db::Result<_> {
        let tx = tx.conn().unwrap();
        let mut params = new_session(&id, "cli");
        params.now = created_at;
        q::create_session(tx, &params)?;
        Ok(())
    })
    .unwrap();
    id
}

#[test]
fn search_filters_ranks_and_never_repeats_a_message() {
    let db = Database::open_in_memory().unwrap();
    let cli = session(&db, "cli");
    let tg = session(&db, "telegram");
    let (m1, _) = db
        .write(|tx| -> scribe_db::Result<_> {
            let tx = tx.conn().unwrap();
            message_with_part(
                tx,
                &cli,
                "user",
                "text",
                &text("the docker build is broken"),
            )
        })
        .unwrap();
    // A second docker part in the same message: still one hit.
    db.write(|tx| -> scribe_db::Result<_> {
        let tx = tx.conn().unwrap();
        add_part(
            tx,
            &new_id(Prefix::Part),
            &m1,
            &cli,
            1,
            "text",
            &text("docker docker docker"),
        )
    })
    .unwrap();
    let (m2, _) = db
        .write(|tx| -> scribe_db::Result<_> {
            let tx = tx.conn().unwrap();
            message_with_part(
                tx,
                &tg,
                "assistant",
                "tool",
                &tool("bash", json!({"cmd": "docker ps"}), "no containers"),
            )
        })
        .unwrap();
    let (m3, _) = db
        .write(|tx| -> scribe_db::Result<_> {
            let tx = tx.conn().unwrap();
            message_with_part(tx, &tg, "user", "text", &text("数据库迁移失败"))
        })
        .unwrap();

    // search::search reads the indexes as they are; index what is queued first.
    db.index_pending().unwrap();
    let run = |f: SearchFilter| {
        db.read(|c| -> scribe_db::Result<_> { search::search(c, &f) })
            .unwrap()
    };
    let hits = run(SearchFilter::new(TextQuery::Words("docker".into())));
    let mut ids: Vec<_> = hits.iter().map(|h| h.message_id.clone()).collect();
    ids.sort();
    let mut want = vec![m1.clone(), m2.clone()];
    want.sort();
    assert_eq!(ids, want);
    assert!(
        hits.iter().all(|h| h.snippet.contains("\u{2}docker\u{3}")),
        "{hits:?}"
    );
    let m1_hit = hits.iter().find(|h| h.message_id == m1).unwrap();
    assert_eq!(
        (m1_hit.source.as_str(), m1_hit.role.as_str()),
        ("cli", "user")
    );

    let only_tg = run(SearchFilter {
        exclude_sources: vec!["cli".into()],
        ..SearchFilter::new(TextQuery::Words("docker".into()))
    });
    assert_eq!(
        only_tg
            .iter()
            .map(|h| h.message_id.clone())
            .collect::<Vec<_>>(),
        vec![m2.clone()]
    );
    let only_users = run(SearchFilter {
        roles: vec!["user".into()],
        ..SearchFilter::new(TextQuery::Words("docker".into()))
    });
    assert_eq!(
        only_users
            .iter()
            .map(|h| h.message_id.clone())
            .collect::<Vec<_>>(),
        vec![m1.clone()]
    );
    let paged = run(SearchFilter {
        limit: 1,
        offset: 1,
        ..SearchFilter::new(TextQuery::Words("docker".into()))
    });
    assert_eq!(paged.len(), 1);

    let cjk = run(SearchFilter::new(TextQuery::Trigrams("\"库迁移\"".into())));
    assert_eq!(
        cjk.iter().map(|h| h.message_id.clone()).collect::<Vec<_>>(),
        vec![m3.clone()]
    );
    assert!(cjk[0].snippet.contains("\u{2}"), "{cjk:?}");
    let short = run(SearchFilter::new(TextQuery::Substring("迁移".into())));
    assert_eq!(
        short
            .iter()
            .map(|h| h.message_id.clone())
            .collect::<Vec<_>>(),
        vec![m3.clone()]
    );
    assert_eq!(short[0].snippet, "数据库\u{2}迁移\u{3}失败");
    // LIKE wildcards in user text are literal.
    assert!(run(SearchFilter::new(TextQuery::Substring("%".into()))).is_empty());
    let in_session = run(SearchFilter {
        session_id: Some(cli.clone()),
        ..SearchFilter::new(TextQuery::Substring("docker".into()))
    });
    assert_eq!(
        in_session
            .iter()
            .map(|h| h.message_id.clone())
            .collect::<Vec<_>>(),
        vec![m1]
    );
}

#[test]
fn search_looks_past_many_matching_parts_of_one_message() {
    let db = Database::open_in_memory().unwrap();
    let s = session(&db, "cli");
    // One message whose 40 parts all match strongly, then five that match once each.
    let (big, _) = db
        .write(|tx| -> scribe_db::Result<_> {
            let tx = tx.conn().unwrap();
            message_with_part(tx, &s, "assistant", "text", &text("needle needle needle"))
        })
        .unwrap();
    db.write(|tx| -> scribe_db::Result<_> {
        let tx = tx.conn().unwrap();
        for i in 1..40 {
            add_part(
                tx,
                &new_id(Prefix::Part),
                &big,
                &s,
                i,
                "text",
                &text("needle needle needle"),
            )?;
        }
        Ok(())
    })
    .unwrap();
    let mut others = Vec::new();
    for i in 0..5 {
        let filler = "hay ".repeat(50);
        let (m, _) = db
            .write(|tx| -> scribe_db::Result<_> {
                let tx = tx.conn().unwrap();
                message_with_part(
                    tx,
                    &s,
                    "user",
                    "text",
                    &text(&format!("{filler} needle {i}")),
                )
            })
            .unwrap();
        others.push(m);
    }
    db.index_pending().unwrap();
    let hits = db
        .read(|c| -> scribe_db::Result<_> {
            search::search(
                c,
                &SearchFilter {
                    limit: 6,
                    ..SearchFilter::new(TextQuery::Words("needle".into()))
                },
            )
        })
        .unwrap();
    assert_eq!(hits.len(), 6, "{hits:?}");
    assert_eq!(hits[0].message_id, big);
    let mut rest: Vec<_> = hits[1..].iter().map(|h| h.message_id.clone()).collect();
    rest.sort();
    assert_eq!(rest, others);
    let page2 = db
        .read(|c| -> scribe_db::Result<_> {
            search::search(
                c,
                &SearchFilter {
                    limit: 3,
                    offset: 3,
                    ..SearchFilter::new(TextQuery::Words("needle".into()))
                },
            )
        })
        .unwrap();
    assert_eq!(page2.len(), 3);
    assert!(page2.iter().all(|h| h.message_id != big));
}
