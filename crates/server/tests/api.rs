//! The JSON API over real HTTP against a real SQLite file: filters, sorting and keyset
//! paging of sessions, conversations page by page, search, stats and usage, the access
//! rules (token, loopback `Host`, read-only methods), errors and 404s, that the database
//! file is never written, and live events while another process writes.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::collections::BTreeSet;
use std::io::Write;
use std::net::TcpStream;
use std::sync::Arc;
use std::time::Duration;

use common::*;
use scribe_db::Database;
use scribe_message::{MessageService, SearchOptions};
use scribe_server::json::{SearchHits, SearchPage, Stats};
use scribe_session::{SessionService, StatsBy};
use serde_json::{Value, json};

fn ids(page: &Value) -> Vec<String> {
    page["sessions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["id"].as_str().unwrap().to_owned())
        .collect()
}

/// Every page of `/api/sessions?<query>`, following `next`.
fn walk(addr: std::net::SocketAddr, query: &str) -> Vec<String> {
    let mut all = Vec::new();
    let mut after: Option<String> = None;
    for _ in 0..100 {
        let path = match &after {
            Some(cursor) => format!("/api/sessions?{query}&after={cursor}"),
            None => format!("/api/sessions?{query}"),
        };
        let page = get_json(addr, &path);
        all.extend(ids(&page));
        assert_eq!(page["more"].as_bool().unwrap(), !page["next"].is_null());
        match page["next"].as_str() {
            Some(next) => after = Some(next.to_owned()),
            None => return all,
        }
    }
    panic!("paging did not end");
}

#[test]
fn the_session_list_filters_sorts_and_pages() {
    let f = fixture();
    let server = serve(&f.db, None);
    let a = server.addr;

    // Default: top-level, not archived, newest first; children counted, not listed.
    let page = get_json(a, "/api/sessions");
    let listed = ids(&page);
    assert_eq!(listed.len(), 9, "{listed:?}");
    assert_eq!(listed[0], f.telegram);
    assert!(!listed.contains(&f.task) && !listed.contains(&f.archived));
    assert_eq!(page["child_counts"], json!({ f.main.clone(): 1 }));
    assert_eq!(page["more"], json!(false));
    assert!(page["next"].is_null());
    let main = page["sessions"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["id"] == json!(f.main))
        .unwrap();
    assert_eq!(
        main["preview"],
        json!(SCRIPT_TEXT.split_whitespace().collect::<Vec<_>>().join(" "))
    );
    assert_eq!(main["tokens"]["total"], json!(1200));
    assert_eq!(main["cost_usd"], json!(0.5));

    // Filters.
    assert_eq!(
        ids(&get_json(a, "/api/sessions?source=telegram")),
        vec![f.telegram.clone()]
    );
    assert_eq!(
        ids(&get_json(a, "/api/sessions?source=telegram&source=tui")).len(),
        2
    );
    assert_eq!(
        ids(&get_json(a, "/api/sessions?exclude_source=cli")).len(),
        2
    );
    assert_eq!(ids(&get_json(a, "/api/sessions?model=m-sonnet")).len(), 7);
    assert_eq!(
        ids(&get_json(a, "/api/sessions?directory=/p/one")),
        vec![f.main.clone()]
    );
    assert_eq!(
        ids(&get_json(a, "/api/sessions?q=build")),
        vec![f.main.clone()]
    );
    assert_eq!(
        ids(&get_json(a, "/api/sessions?archived=only")),
        vec![f.archived.clone()]
    );
    assert_eq!(
        ids(&get_json(a, "/api/sessions?archived=include")).len(),
        10
    );
    assert_eq!(
        ids(&get_json(a, &format!("/api/sessions?parent={}", f.main))),
        vec![f.task.clone()]
    );
    assert_eq!(
        ids(&get_json(a, "/api/sessions?parent=any&archived=include")).len(),
        11
    );
    // Date range: created in [T0-3d, T0-1d): main and long (telegram is at T0-1d).
    let range = format!("/api/sessions?from={}&to={}", T0 - 3 * DAY, T0 - DAY);
    assert_eq!(
        ids(&get_json(a, &range))
            .into_iter()
            .collect::<BTreeSet<_>>(),
        [f.main.clone(), f.long.clone()].into_iter().collect()
    );
    assert_eq!(
        ids(&get_json(a, "/api/sessions?from=2026-01-09")),
        vec![f.telegram.clone()]
    );

    // Sorting.
    assert_eq!(ids(&get_json(a, "/api/sessions?sort=cost"))[0], f.main);
    assert_eq!(ids(&get_json(a, "/api/sessions?sort=tokens"))[0], f.long);
    assert_eq!(
        ids(&get_json(a, "/api/sessions?sort=oldest"))[0],
        "ses_bulk_0"
    );
    assert_eq!(
        ids(&get_json(a, "/api/sessions?sort=active"))[0],
        f.telegram
    );

    // Keyset paging: every sort, pages of 2, ties included, is the whole list in order.
    for sort in ["created", "active", "oldest", "tokens", "cost"] {
        let whole = ids(&get_json(
            a,
            &format!("/api/sessions?sort={sort}&limit=200"),
        ));
        assert_eq!(
            walk(a, &format!("sort={sort}&limit=2")),
            whole,
            "sort={sort}"
        );
        assert_eq!(walk(a, &format!("sort={sort}&limit=1&source=cli")).len(), 7);
    }
}

#[test]
fn bad_list_parameters_are_400_with_a_reason() {
    let f = fixture();
    let server = serve(&f.db, None);
    let cases = [
        ("/api/sessions?sort=price", "sort"),
        ("/api/sessions?limit=0", "limit"),
        ("/api/sessions?limit=201", "limit"),
        ("/api/sessions?limit=x", "limit"),
        ("/api/sessions?archived=maybe", "archived"),
        ("/api/sessions?from=yesterday", "from"),
        // Times as `--since` takes them, with its floor: a span reaching before 1970 was
        // answered with a negative `since`, a year-1 date with a year-1 one.
        ("/api/stats?since=3000000d", "before 1970-01-01"),
        ("/api/usage?since=0001-01-01", "before 1970-01-01"),
        ("/api/search?q=x&since=5y", "unknown unit"),
        ("/api/sessions?sorce=cli", "sorce"),
        ("/api/sessions?after=not-a-cursor", "cursor"),
        ("/api/sessions?q=a&q=b", "more than once"),
        ("/api/stats?by=year", "by"),
        ("/api/usage?stack=day", "stack"),
        ("/api/usage?step=year", "step"),
        ("/api/search?q=x&role=robot", "role"),
        ("/api/search?q=x&limit=501", "limit"),
        ("/api/search?q=x&rank=best", "rank"),
        ("/api/filters?x=1", "unknown parameter"),
        // Bytes that are not UTF-8 are refused, not searched for as U+FFFD.
        ("/api/search?q=%ff", "not UTF-8"),
        ("/api/sessions?source=cl%c3", "not UTF-8"),
    ];
    for (path, says) in cases {
        let reply = get(server.addr, path);
        assert_eq!(reply.status, 400, "{path}: {}", reply.text());
        assert_eq!(
            reply.header("content-type"),
            Some("application/json; charset=utf-8")
        );
        let error = reply.json()["error"].as_str().unwrap().to_owned();
        assert!(error.contains(says), "{path}: {error}");
    }
    // A cursor of one sort cannot be used with another.
    let page = get_json(server.addr, "/api/sessions?sort=cost&limit=1");
    let cursor = page["next"].as_str().unwrap();
    let reply = get(
        server.addr,
        &format!("/api/sessions?sort=created&after={cursor}"),
    );
    assert_eq!(reply.status, 400);
    assert!(
        reply.json()["error"]
            .as_str()
            .unwrap()
            .contains("sort=cost")
    );
}

#[test]
fn a_session_and_its_messages_page_by_page() {
    let f = fixture();
    let server = serve(&f.db, None);
    let a = server.addr;

    let detail = get_json(a, &format!("/api/sessions/{}", f.main));
    assert_eq!(detail["session"]["title"], json!("Fix the build"));
    assert_eq!(detail["session"]["message_count"], json!(4));
    assert!(detail["parent"].is_null());
    assert_eq!(detail["children"][0]["id"], json!(f.task));
    assert_eq!(detail["children"][0]["kind"], json!("task"));
    let child = get_json(a, &format!("/api/sessions/{}", f.task));
    assert_eq!(child["parent"]["id"], json!(f.main));
    // How each began, on one line: what names the untitled sub-agent.
    assert_eq!(
        detail["preview"],
        json!(SCRIPT_TEXT.split_whitespace().collect::<Vec<_>>().join(" "))
    );
    assert!(child["session"]["title"].is_null());
    assert_eq!(child["preview"], json!("Which files call the builder?"));

    // The whole conversation as Markdown, as `scribe export --format markdown` writes it,
    // to save as a file; stored text as stored.
    let md = get(a, &format!("/api/sessions/{}/markdown", f.main));
    assert_eq!(md.status, 200, "{}", md.text());
    assert_eq!(
        md.header("Content-Type"),
        Some("text/markdown; charset=utf-8")
    );
    assert_eq!(
        md.header("Content-Disposition"),
        Some("attachment; filename=\"ses_main.md\"")
    );
    let text = md.text();
    assert!(text.starts_with("# Fix the build\n"), "{text}");
    assert!(
        text.contains(SCRIPT_TEXT) && text.contains("## assistant"),
        "{text}"
    );
    let db = Arc::new(Database::open_read_only(&f.db).unwrap());
    let mut want = Vec::new();
    for export in SessionService::new(db)
        .export(&scribe_session::ExportSelection::One(f.main.clone()))
        .unwrap()
    {
        scribe_server::markdown::write(&mut want, &export).unwrap();
    }
    assert_eq!(md.body, want);
    let missing = get(a, "/api/sessions/ses_nope/markdown");
    assert_eq!(missing.status, 404, "{}", missing.text());
    assert_eq!(
        get(a, &format!("/api/sessions/{}/markdown?x=1", f.main)).status,
        400
    );

    // Messages are the library's shape (as in `scribe show --json`), stored text verbatim.
    let page = get_json(a, &format!("/api/sessions/{}/messages", f.main));
    let messages = page["messages"].as_array().unwrap();
    assert_eq!(messages.len(), 4);
    assert_eq!(messages[0]["parts"][0]["part"]["text"], json!(SCRIPT_TEXT));
    assert_eq!(messages[2]["is_summary"], json!(true));
    assert_eq!(messages[1]["parts"][3]["part"]["tool"], json!("edit_file"));
    assert_eq!(
        (page["more_before"].clone(), page["more_after"].clone()),
        (json!(false), json!(false))
    );

    // A long conversation, progressively: start, after, from (deep link), before, tail.
    let path = |q: &str| format!("/api/sessions/{}/messages?{q}", f.long);
    let msg_ids = |v: &Value| -> Vec<String> {
        v["messages"]
            .as_array()
            .unwrap()
            .iter()
            .map(|m| m["id"].as_str().unwrap().to_owned())
            .collect()
    };
    let first = get_json(a, &path("limit=100"));
    assert_eq!(msg_ids(&first), f.long_messages[..100]);
    assert_eq!(
        (first["more_before"].clone(), first["more_after"].clone()),
        (json!(false), json!(true))
    );
    let second = get_json(
        a,
        &path(&format!("after={}&limit=100", f.long_messages[99])),
    );
    assert_eq!(msg_ids(&second), f.long_messages[100..200]);
    let last = get_json(
        a,
        &path(&format!("after={}&limit=100", f.long_messages[199])),
    );
    assert_eq!(msg_ids(&last), f.long_messages[200..]);
    assert_eq!(
        (last["more_before"].clone(), last["more_after"].clone()),
        (json!(true), json!(false))
    );
    let deep = get_json(a, &path(&format!("from={}&limit=10", f.long_messages[150])));
    assert_eq!(msg_ids(&deep), f.long_messages[150..160]);
    assert_eq!(
        (deep["more_before"].clone(), deep["more_after"].clone()),
        (json!(true), json!(true))
    );
    let from_first = get_json(a, &path(&format!("from={}&limit=5", f.long_messages[0])));
    assert_eq!(msg_ids(&from_first), f.long_messages[..5]);
    assert_eq!(from_first["more_before"], json!(false));
    let earlier = get_json(
        a,
        &path(&format!("before={}&limit=10", f.long_messages[150])),
    );
    assert_eq!(msg_ids(&earlier), f.long_messages[140..150]);
    assert_eq!(
        (
            earlier["more_before"].clone(),
            earlier["more_after"].clone()
        ),
        (json!(true), json!(true))
    );
    let tail = get_json(a, &path("tail=1&limit=3"));
    assert_eq!(msg_ids(&tail), f.long_messages[247..]);
    assert_eq!(
        (tail["more_before"].clone(), tail["more_after"].clone()),
        (json!(true), json!(false))
    );

    // Errors.
    for (p, status) in [
        (
            format!(
                "/api/sessions/{}/messages?from={}",
                f.main, f.long_messages[0]
            ),
            404,
        ),
        (
            format!("/api/sessions/{}/messages?from=msg_nope", f.main),
            404,
        ),
        ("/api/sessions/ses_nope/messages".to_owned(), 404),
        ("/api/sessions/ses_nope".to_owned(), 404),
        (path("limit=501"), 400),
        (
            path(&format!("from={0}&after={0}", f.long_messages[3])),
            400,
        ),
        (format!("/api/sessions/{}?x=1", f.main), 400),
    ] {
        let reply = get(a, &p);
        assert_eq!(reply.status, status, "{p}: {}", reply.text());
        assert!(reply.json()["error"].is_string());
    }
}

/// `/api/search`'s document of `hits`: `scribe search --json`'s, untitled sessions named
/// by their first message, and none left out.
fn search_doc(db: &Database, hits: &[scribe_message::SearchHit]) -> SearchPage {
    SearchPage {
        hits: SearchHits::new(hits, &scribe_server::untitled_previews(db, hits).unwrap()),
        left_out: Vec::new(),
    }
}

#[test]
fn search_stats_and_usage_are_the_services_numbers() {
    let f = fixture();
    let server = serve(&f.db, None);
    let a = server.addr;
    let db = Arc::new(Database::open_read_only(&f.db).unwrap());
    let sessions = SessionService::new(Arc::clone(&db));
    let messages = MessageService::new(Arc::clone(&db));

    // Search: the CLI's document for the same query and filters.
    let hits = get_json(a, "/api/search?q=build");
    let expected = search_doc(
        &db,
        &messages.search("build", &SearchOptions::default()).unwrap(),
    );
    assert_eq!(hits, serde_json::to_value(&expected).unwrap());
    assert!(!hits["hits"].as_array().unwrap().is_empty());
    // `rank=all` is the default; `rank=recent` ranks the newest TYPING_WINDOW matches,
    // which here are all of them.
    assert_eq!(get_json(a, "/api/search?q=build&rank=all"), hits);
    let recent = search_doc(
        &db,
        &messages
            .search(
                "build",
                &SearchOptions {
                    window: Some(scribe_message::TYPING_WINDOW),
                    ..SearchOptions::default()
                },
            )
            .unwrap(),
    );
    assert_eq!(
        get_json(a, "/api/search?q=build&rank=recent"),
        serde_json::to_value(&recent).unwrap()
    );
    assert_eq!(
        serde_json::to_value(&recent).unwrap(),
        serde_json::to_value(&expected).unwrap()
    );
    let hit = &hits["hits"][0];
    let snippet: Vec<char> = hit["snippet"].as_str().unwrap().chars().collect();
    let [start, end] = [
        hit["highlights"][0][0].as_u64().unwrap() as usize,
        hit["highlights"][0][1].as_u64().unwrap() as usize,
    ];
    assert_eq!(
        snippet[start..end]
            .iter()
            .collect::<String>()
            .to_lowercase(),
        "build"
    );
    let only_user = get_json(a, "/api/search?q=build&role=user");
    assert!(
        only_user["hits"]
            .as_array()
            .unwrap()
            .iter()
            .all(|h| h["role"] == json!("user"))
    );
    assert_eq!(
        get_json(a, "/api/search?q=weather&source=telegram")["hits"]
            .as_array()
            .unwrap()
            .len(),
        1
    );
    assert_eq!(
        get_json(a, "/api/search?q=weather&exclude_source=telegram")["hits"],
        json!([])
    );
    // A directory: the sessions whose agent worked there, exactly that path.
    let in_dir = get_json(a, "/api/search?q=build&directory=/p/one");
    let want = search_doc(
        &db,
        &messages
            .search(
                "build",
                &SearchOptions {
                    directory: Some("/p/one".into()),
                    ..SearchOptions::default()
                },
            )
            .unwrap(),
    );
    assert_eq!(in_dir, serde_json::to_value(&want).unwrap());
    // A hit of an untitled session says how that session began; a titled one does not.
    let builder = get_json(a, "/api/search?q=builder");
    let hit = &builder["hits"][0];
    assert_eq!(hit["session_id"], json!(f.task), "{builder}");
    assert!(hit["title"].is_null());
    assert_eq!(hit["preview"], json!("Which files call the builder?"));
    assert!(
        hits["hits"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|h| h["title"].is_string())
            .all(|h| h["preview"].is_null())
    );
    let in_dir = in_dir["hits"].as_array().unwrap();
    assert!(!in_dir.is_empty());
    assert!(in_dir.iter().all(|h| h["session_id"] == json!(f.main)));
    for elsewhere in [
        "/api/search?q=build&directory=/p",
        "/api/search?q=weather&directory=/p/one",
    ] {
        assert_eq!(get_json(a, elsewhere)["hits"], json!([]), "{elsewhere}");
    }
    let in_session = get_json(
        a,
        &format!("/api/search?q=conversation&session={}&limit=3", f.long),
    );
    assert_eq!(in_session["hits"].as_array().unwrap().len(), 3);
    assert_eq!(get_json(a, "/api/search?q=")["hits"], json!([]));
    assert_eq!(
        get_json(a, "/api/search?q=%22unbalanced&since=7d")["hits"],
        json!([])
    );
    assert_eq!(get(a, "/api/search?q=x&session=ses_nope").status, 404);

    // Stats: the same document `scribe stats --json` prints, for every grouping.
    for by in StatsBy::ALL {
        let name = by.name();
        for since in [None, Some(T0 - 4 * DAY)] {
            let path = match since {
                Some(ms) => format!("/api/stats?by={name}&since={ms}"),
                None => format!("/api/stats?by={name}"),
            };
            let expected = Stats::new(&sessions.stats(by, since).unwrap());
            assert_eq!(
                get_json(a, &path),
                serde_json::to_value(&expected).unwrap(),
                "{path}"
            );
        }
    }

    // Usage: each day's (week's, month's) stacks add up to its stats row, each key's days
    // to its stats row, and the totals are the stats totals.
    for (stack, by, step) in [
        ("model", StatsBy::Model, StatsBy::Day),
        ("source", StatsBy::Source, StatsBy::Day),
        ("model", StatsBy::Model, StatsBy::Week),
        ("source", StatsBy::Source, StatsBy::Month),
        ("directory", StatsBy::Directory, StatsBy::Day),
    ] {
        let path = match step {
            // Days when no step is asked for.
            StatsBy::Day => format!("/api/usage?stack={stack}"),
            _ => format!("/api/usage?stack={stack}&step={}", step.name()),
        };
        let usage = get_json(a, &path);
        assert_eq!(usage["step"], step.name());
        assert_eq!(usage["stack"], stack);
        let by_day =
            serde_json::to_value(Stats::new(&sessions.stats(step, None).unwrap())).unwrap();
        let by_key = serde_json::to_value(Stats::new(&sessions.stats(by, None).unwrap())).unwrap();
        assert_eq!(usage["totals"], by_day["totals"]);
        let days = usage["days"].as_array().unwrap();
        assert_eq!(days.len(), by_day["rows"].as_array().unwrap().len());
        for (day, row) in days.iter().zip(by_day["rows"].as_array().unwrap()) {
            assert_eq!(day["day"], row["key"]);
            let stacked: f64 = day["stacks"]
                .as_array()
                .unwrap()
                .iter()
                .map(|s| s["cost_usd"].as_f64().unwrap())
                .sum();
            let sessions_n: i64 = day["stacks"]
                .as_array()
                .unwrap()
                .iter()
                .map(|s| s["sessions"].as_i64().unwrap())
                .sum();
            assert!(
                (stacked - row["cost_usd"].as_f64().unwrap()).abs() < 1e-9,
                "{day} vs {row}"
            );
            assert_eq!(sessions_n, row["sessions"].as_i64().unwrap());
        }
        for row in by_key["rows"].as_array().unwrap() {
            let key = &row["key"];
            let tokens: i64 = days
                .iter()
                .flat_map(|d| d["stacks"].as_array().unwrap())
                .filter(|s| &s["key"] == key)
                .map(|s| s["tokens"]["total"].as_i64().unwrap())
                .sum();
            assert_eq!(
                tokens,
                row["tokens"]["total"].as_i64().unwrap(),
                "{stack} {key}"
            );
        }
        assert_eq!(
            usage["keys"].as_array().unwrap().len(),
            by_key["rows"].as_array().unwrap().len()
        );
    }
    // `step=auto` picks by the period's length: days up to 92 days, weeks up to three
    // years, months beyond.
    let now = scribe_db::now_ms();
    for (back_days, step) in [(30, "day"), (92, "day"), (400, "week"), (4_000, "month")] {
        let since = now - back_days * DAY;
        let usage = get_json(a, &format!("/api/usage?step=auto&since={since}"));
        assert_eq!(usage["step"], step, "{back_days} days back");
    }
    let usage = get_json(a, "/api/usage?since=2026-01-07");
    assert_eq!(usage["since"], json!(T0 - 3 * DAY - 12 * 3_600_000));
    let top: Vec<&str> = usage["top"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["id"].as_str().unwrap())
        .collect();
    assert_eq!(
        top,
        vec![f.main.as_str(), f.long.as_str(), f.telegram.as_str()]
    );
    // A sub-agent's usage counts under its conversation, which alone is listed.
    assert_eq!(usage["top"][0]["period"]["sessions"], 2, "{usage}");

    let filters = get_json(a, "/api/filters");
    assert_eq!(
        filters["sources"][0],
        json!({"value": "cli", "sessions": 9})
    );
    assert_eq!(filters["models"].as_array().unwrap().len(), 3);
    assert_eq!(filters["directories"].as_array().unwrap().len(), 2);
}

/// A cost that leaves out usage of a model without a price says so in every document that
/// shows it: a session's `cost_partial` (list, detail, top sessions) and a group's
/// `unpriced_sessions` (stats, the usage chart's stacks and totals).
#[test]
fn a_cost_that_leaves_out_unpriced_usage_says_so() {
    let dir = tempfile::tempdir().unwrap();
    let db = unpriced_store(dir.path());
    let server = serve(&db, None);
    let list = get_json(server.addr, "/api/sessions?sort=oldest");
    let partial: Vec<(Value, Value)> = list["sessions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| (s["cost_status"].clone(), s["cost_partial"].clone()))
        .collect();
    assert_eq!(
        partial,
        vec![
            (json!("estimated"), json!(false)),
            (json!("partial"), json!(true)),
            (json!("unknown"), json!(true)),
        ]
    );
    for (id, partial) in [("ses_priced", false), ("ses_partial", true)] {
        let detail = get_json(server.addr, &format!("/api/sessions/{id}"));
        assert_eq!(detail["cost_partial"], json!(partial), "{detail}");
    }
    let stats = get_json(server.addr, "/api/stats?by=model");
    assert_eq!(stats["rows"][0]["key"], "m-new");
    assert_eq!(stats["rows"][0]["unpriced_sessions"], 2, "{stats}");
    assert_eq!(stats["totals"]["unpriced_sessions"], 2, "{stats}");
    assert_eq!(stats["totals"]["cost_usd"], 0.75, "{stats}");
    let usage = get_json(server.addr, "/api/usage?stack=model");
    assert_eq!(usage["totals"]["unpriced_sessions"], 2, "{usage}");
    assert_eq!(
        usage["days"][0]["stacks"][0]["unpriced_sessions"], 2,
        "{usage}"
    );
    let top: Vec<&Value> = usage["top"].as_array().unwrap().iter().collect();
    assert_eq!(top[0]["id"], "ses_priced", "{usage}");
    assert_eq!(top[0]["cost_partial"], false);
    assert_eq!(top[1]["cost_partial"], true);
}

/// What ended a message (a reply the user stopped, one a rewind took back) is in the
/// Markdown download as `scribe show` prints it, so a reader of the file sees it too.
#[test]
fn the_markdown_says_what_ended_a_message() {
    let dir = tempfile::tempdir().unwrap();
    let server = serve(&unpriced_store(dir.path()), None);
    let markdown = |id: &str| {
        String::from_utf8(get(server.addr, &format!("/api/sessions/{id}/markdown")).body).unwrap()
    };
    let stopped = markdown("ses_partial");
    assert!(
        stopped.contains("an answer cut\n\n> error (cancelled)\n"),
        "{stopped}"
    );
    let rewound = markdown("ses_unknown");
    assert!(
        rewound.contains(
            "an answer taken back\n\n> error (rewound): undone by a rewind in Gemini CLI\n"
        ),
        "{rewound}"
    );
    // A message that ended well has no such line.
    assert!(!markdown("ses_priced").contains("> error"));
}

/// A session whose agent keeps no usage says that none was recorded, rather than showing
/// zeros as if it were free: `usage_recorded` on the session (list, detail, its sub-session
/// entry) and on a group (stats), and the Markdown download's header says it in words.
#[test]
fn a_session_without_recorded_usage_says_so() {
    let dir = tempfile::tempdir().unwrap();
    let db = unrecorded_store(dir.path());
    let server = serve(&db, None);
    let list = get_json(server.addr, "/api/sessions?sort=oldest");
    let recorded: Vec<(&str, &Value)> = list["sessions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| (s["id"].as_str().unwrap(), &s["usage_recorded"]))
        .collect();
    assert_eq!(
        recorded,
        [
            ("ses_counted", &json!(true)),
            ("ses_uncounted", &json!(false)),
            ("ses_costonly", &json!(true))
        ]
    );
    for (id, recorded) in [
        ("ses_counted", true),
        ("ses_uncounted", false),
        ("ses_costonly", true),
    ] {
        let detail = get_json(server.addr, &format!("/api/sessions/{id}"));
        assert_eq!(detail["usage_recorded"], json!(recorded), "{detail}");
    }
    let stats = get_json(server.addr, "/api/stats?by=source");
    let rows: Vec<(&str, &Value)> = stats["rows"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| (r["key"].as_str().unwrap(), &r["usage_recorded"]))
        .collect();
    assert!(rows.contains(&("codex", &json!(true))), "{stats}");
    assert!(rows.contains(&("antigravity", &json!(false))), "{stats}");
    assert_eq!(stats["totals"]["usage_recorded"], true, "{stats}");

    let reply = get(server.addr, "/api/sessions/ses_uncounted/markdown");
    assert_eq!(reply.status, 200);
    let markdown = String::from_utf8(reply.body).unwrap();
    assert!(
        markdown.contains("- 2 messages · no usage recorded\n"),
        "{markdown}"
    );
    let markdown =
        String::from_utf8(get(server.addr, "/api/sessions/ses_counted/markdown").body).unwrap();
    assert!(
        markdown.contains("- 2 messages · 1,100 tokens · $0.50\n"),
        "{markdown}"
    );
    // A cost kept without tokens: the tokens are not known, rather than none.
    let markdown =
        String::from_utf8(get(server.addr, "/api/sessions/ses_costonly/markdown").body).unwrap();
    assert!(
        markdown.contains("- 2 messages · no tokens recorded · $0.04\n"),
        "{markdown}"
    );
}

/// A session that switched models overnight: the chart stacks each model's usage on the
/// day it was used, and what no message carried on the session's model and day.
#[test]
fn the_usage_chart_stacks_a_switched_session_by_model_and_day() {
    let dir = tempfile::tempdir().unwrap();
    let db = switched_store(dir.path());
    let server = serve(&db, None);
    let usage = get_json(server.addr, "/api/usage?stack=model");
    let stacks: Vec<(String, String, i64, i64, i64, f64)> = usage["days"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|day| {
            day["stacks"].as_array().unwrap().iter().map(move |s| {
                (
                    day["day"].as_str().unwrap().to_owned(),
                    s["key"].as_str().unwrap().to_owned(),
                    s["tokens"]["input"].as_i64().unwrap(),
                    s["tokens"]["output"].as_i64().unwrap(),
                    s["api_calls"].as_i64().unwrap(),
                    s["cost_usd"].as_f64().unwrap(),
                )
            })
        })
        .collect();
    let (day1, day2) = ("2026-01-09".to_owned(), "2026-01-10".to_owned());
    assert_eq!(
        stacks,
        vec![
            // Stacks in the keys' order: the most expensive model first.
            (day1.clone(), "m-b".to_owned(), 0, 100, 0, 0.0),
            (day1, "m-a".to_owned(), 300, 0, 1, 0.25),
            (day2, "m-b".to_owned(), 700, 0, 1, 0.75),
        ],
        "{usage}"
    );
    assert_eq!(usage["keys"], json!(["m-b", "m-a"]));
    assert_eq!(usage["totals"]["sessions"], 1);
    assert_eq!(usage["days"][0]["sessions"], 1);
    assert_eq!(usage["days"][1]["sessions"], 1);
    let stats = get_json(server.addr, "/api/stats?by=model");
    let rows: Vec<(&str, i64)> = stats["rows"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| {
            (
                r["key"].as_str().unwrap(),
                r["tokens"]["total"].as_i64().unwrap(),
            )
        })
        .collect();
    assert_eq!(rows, vec![("m-b", 800), ("m-a", 300)], "{stats}");
    // A period from its second day: the conversation started before it, and its usage in
    // it makes it the period's top session, with what it used in the period.
    let usage = get_json(server.addr, "/api/usage?since=2026-01-10");
    assert_eq!(usage["totals"]["tokens"]["total"], 700, "{usage}");
    assert_eq!(usage["top"][0]["id"], "ses_switched", "{usage}");
    assert_eq!(usage["top"][0]["period"]["tokens"]["total"], 700);
    assert_eq!(usage["top"][0]["period"]["cost_usd"], 0.75);
    assert_eq!(usage["top"][0]["cost_usd"], 1.0, "its cost of all time");
}

/// The usage page's numbers are read again once the database changed (between changes
/// its two requests of a refresh share one read), and for each period apart.
#[test]
fn usage_is_read_again_after_a_change() {
    let f = fixture();
    let server = serve(&f.db, None);
    let a = server.addr;
    let (_, mut next_line) = events(a);
    let input = |doc: &Value| doc["totals"]["tokens"]["input"].as_i64().unwrap();
    let before = get_json(a, "/api/stats");
    assert_eq!(input(&get_json(a, "/api/usage")), input(&before));
    let recent = get_json(a, "/api/stats?since=2026-01-09");
    assert!(input(&recent) < input(&before), "{recent} against {before}");
    let db = Arc::new(Database::open(&f.db).unwrap());
    SessionService::new(db)
        .add_usage(&f.main, &one_call(1_000, 1.0))
        .unwrap();
    wait_for_change(&mut next_line);
    let after = get_json(a, "/api/stats");
    assert_eq!(input(&after), input(&before) + 1_000, "{after}");
    assert_eq!(input(&get_json(a, "/api/usage")), input(&after));
    assert_eq!(
        get_json(a, "/api/stats?since=2026-01-09"),
        recent,
        "the main session started before that day"
    );
}

/// `/api/usage` carries the 5-hour block open now, whatever the period asked for: none
/// while the last use is days old, then the block a use now opens, from the UTC hour of
/// that use, with what it counted.
#[test]
fn usage_now_opens_a_block_the_usage_document_shows() {
    let f = fixture();
    let server = serve(&f.db, None);
    let a = server.addr;
    let (_, mut next_line) = events(a);
    assert_eq!(get_json(a, "/api/usage")["block"], Value::Null);
    let db = Arc::new(Database::open(&f.db).unwrap());
    // Usage no message carries counts when its session began: a session begun now.
    let sessions = SessionService::new(db);
    let now = sessions
        .create(scribe_session::NewSession::default())
        .unwrap();
    sessions.add_usage(&now.id, &one_call(1_000, 1.5)).unwrap();
    wait_for_change(&mut next_line);
    let hour = scribe_db::calendar::HOUR;
    // A period that ended before the use still shows the block open now.
    for query in ["/api/usage", "/api/usage?since=2026-01-09"] {
        let block = &get_json(a, query)["block"];
        let start = block["start"].as_i64().unwrap();
        let end = block["end"].as_i64().unwrap();
        assert_eq!(
            start,
            now.created_at - now.created_at.rem_euclid(hour),
            "{block}"
        );
        assert_eq!(end - start, 5 * hour, "{block}");
        assert!(end > scribe_db::now_ms(), "{block}");
        assert_eq!(block["totals"]["tokens"]["input"], 1_000, "{block}");
        assert_eq!(block["totals"]["cost_usd"], 1.5, "{block}");
        assert_eq!(block["totals"]["api_calls"], 1, "{block}");
    }
}

#[test]
fn pages_assets_and_404s() {
    let f = fixture();
    let server = serve(&f.db, None);
    let a = server.addr;
    for page in ["/", "/search", "/usage", &format!("/s/{}", f.main)] {
        let reply = get(a, page);
        assert_eq!(reply.status, 200, "{page}");
        assert_eq!(
            reply.header("content-type"),
            Some("text/html; charset=utf-8")
        );
        let csp = reply.header("content-security-policy").unwrap();
        assert!(
            csp.contains("script-src 'self'") && !csp.contains("unsafe-inline"),
            "{csp}"
        );
        assert!(reply.text().contains("/assets/app.js"));
    }
    let js = get(a, "/assets/app.js");
    assert_eq!(js.status, 200);
    assert_eq!(
        js.header("content-type"),
        Some("text/javascript; charset=utf-8")
    );
    let etag = js.header("etag").unwrap().to_owned();
    let again = request(
        a,
        "GET",
        "/assets/app.js",
        &[("If-None-Match", &etag)],
        None,
    )
    .unwrap();
    assert_eq!(again.status, 304);
    // Every library the page loads is embedded (the page works offline).
    let index = get(a, "/").text();
    for src in index
        .split("src=\"")
        .skip(1)
        .chain(index.split("href=\"").skip(1))
    {
        let url = src.split('"').next().unwrap();
        if url.starts_with('/') {
            assert_eq!(get(a, url).status, 200, "{url}");
        } else {
            panic!("the page loads {url} from elsewhere");
        }
    }
    for (path, status) in [
        ("/nope", 404),
        ("/s/", 404),
        ("/assets/nope.js", 404),
        ("/api/nope", 404),
        ("/api/sessions/x/y/z", 404),
    ] {
        assert_eq!(get(a, path).status, status, "{path}");
    }
    assert!(
        get(a, "/api/nope").json()["error"]
            .as_str()
            .unwrap()
            .contains("no such API")
    );
    let head = request(a, "HEAD", "/api/sessions", &[], None).unwrap();
    assert_eq!(head.status, 200);
    assert!(head.body.is_empty());
}

#[test]
fn the_server_is_read_only_and_never_writes_the_file() {
    let f = fixture();
    let before = std::fs::read(&f.db).unwrap();
    let wal = f.db.with_extension("db-wal");
    let wal_before = std::fs::metadata(&wal).map(|m| m.len()).ok();
    let server = serve(&f.db, None);
    for method in ["POST", "PUT", "DELETE", "PATCH"] {
        for path in ["/api/sessions", &format!("/api/sessions/{}", f.main), "/"] {
            let reply = request(server.addr, method, path, &[], Some(b"{}")).unwrap();
            assert_eq!(reply.status, 405, "{method} {path}");
            assert_eq!(reply.header("allow"), Some("GET, HEAD"));
            // Under /api/ a refusal is `{"error": …}` like every other API failure (it
            // was a line of plain text); the page's own paths answer text.
            if path.starts_with("/api/") {
                assert!(
                    reply.json()["error"]
                        .as_str()
                        .is_some_and(|e| e.contains("read-only")),
                    "{method} {path}"
                );
            } else {
                assert!(
                    reply
                        .header("content-type")
                        .is_some_and(|t| t.starts_with("text/plain")),
                    "{method} {path}"
                );
            }
        }
    }
    for path in [
        "/api/sessions".to_owned(),
        format!("/api/sessions/{}", f.main),
        format!("/api/sessions/{}/messages", f.long),
        "/api/search?q=build".to_owned(),
        "/api/stats".to_owned(),
        "/api/usage".to_owned(),
        "/api/filters".to_owned(),
    ] {
        get_json(server.addr, &path);
    }
    drop(server);
    assert!(
        std::fs::read(&f.db).unwrap() == before,
        "the database file changed"
    );
    // A reader may create an empty WAL where none was; it never adds a frame.
    let wal_after = std::fs::metadata(&wal).map(|m| m.len()).ok();
    match wal_before {
        Some(len) => assert_eq!(wal_after, Some(len), "the WAL changed"),
        None => assert!(
            matches!(wal_after, None | Some(0)),
            "the WAL grew: {wal_after:?}"
        ),
    }
}

#[test]
fn without_a_token_only_loopback_hosts_are_answered() {
    let f = fixture();
    let server = serve(&f.db, None);
    let port = server.addr.port();
    for host in [
        format!("localhost:{port}"),
        format!("127.0.0.1:{port}"),
        "[::1]".to_owned(),
    ] {
        let reply = request(
            server.addr,
            "GET",
            "/api/sessions",
            &[("Host", &host)],
            None,
        )
        .unwrap();
        assert_eq!(reply.status, 200, "{host}");
    }
    for host in [format!("attacker.example:{port}"), "192.168.1.5".to_owned()] {
        let reply = request(
            server.addr,
            "GET",
            "/api/sessions",
            &[("Host", &host)],
            None,
        )
        .unwrap();
        assert_eq!(reply.status, 403, "{host}");
        let page = request(server.addr, "GET", "/", &[("Host", &host)], None).unwrap();
        assert_eq!(page.status, 403, "{host}");
    }
}

#[test]
fn with_a_token_every_request_needs_it() {
    let f = fixture();
    let token = "t0ken-for-tests";
    let server = serve(&f.db, Some(token));
    let a = server.addr;
    let paths = [
        "/",
        "/search",
        "/assets/app.js",
        "/api/sessions",
        "/api/stats",
        "/api/events",
        "/nope",
    ];
    for path in paths {
        assert_eq!(get(a, path).status, 401, "{path} without the token");
        let wrong = request(
            a,
            "GET",
            path,
            &[("Authorization", "Bearer t0ken-for-test")],
            None,
        )
        .unwrap();
        assert_eq!(wrong.status, 401, "{path} with a wrong token");
        let wrong_cookie =
            request(a, "GET", path, &[("Cookie", "scribe_token=nope")], None).unwrap();
        assert_eq!(wrong_cookie.status, 401, "{path} with a wrong cookie");
    }
    assert!(
        get(a, "/api/sessions").json()["error"]
            .as_str()
            .unwrap()
            .contains("token")
    );
    let bearer = request(
        a,
        "GET",
        "/api/sessions",
        &[("Authorization", &format!("Bearer {token}"))],
        None,
    )
    .unwrap();
    assert_eq!(bearer.status, 200);
    let cookie = request(
        a,
        "GET",
        "/assets/app.js",
        &[("Cookie", &format!("other=1; scribe_token={token}"))],
        None,
    )
    .unwrap();
    assert_eq!(cookie.status, 200);
    assert_eq!(get(a, &format!("/api/stats?token={token}")).status, 200);
    // A page opened with ?token= trades it for a cookie and drops it from the address.
    let page = get(a, &format!("/search?q=build&token={token}"));
    assert_eq!(page.status, 303);
    assert_eq!(page.header("location"), Some("/search?q=build"));
    let set = page.header("set-cookie").unwrap();
    assert!(
        set.starts_with(&format!("scribe_token={token};")) && set.contains("HttpOnly"),
        "{set}"
    );
    // With a token, any Host is fine (the token is the protection).
    let remote = request(
        a,
        "GET",
        "/api/stats",
        &[
            ("Host", "scribe.example:80"),
            ("Authorization", &format!("Bearer {token}")),
        ],
        None,
    )
    .unwrap();
    assert_eq!(remote.status, 200);
}

/// Not a test of its own: the writer process that `live_events_follow_another_process`
/// starts (this test binary again, with `SCRIBE_TEST_WRITE` set).
#[test]
#[ignore = "helper: run as a separate writer process by live_events_follow_another_process"]
fn writer_process() {
    assert!(writer_main(), "run only with SCRIBE_TEST_WRITE set");
}

#[test]
fn live_events_follow_another_process() {
    let f = fixture();
    let server = serve(&f.db, None);
    let (headers, mut next_line) = events(server.addr);
    assert!(
        headers
            .iter()
            .any(|line| line
                .eq_ignore_ascii_case("content-type: text/event-stream; charset=utf-8"))
    );
    assert!(next_line().starts_with("data: {\"version\":"));

    assert_eq!(get_json(server.addr, "/api/version"), json!({"version": 0}));

    // Another process appends a message; the stream reports a change.
    write_elsewhere(&f.db, &f.main, "written by another process");
    wait_for_change(&mut next_line);
    // Pages that poll see the counter move.
    assert!(
        get_json(server.addr, "/api/version")["version"]
            .as_u64()
            .unwrap()
            >= 1
    );
    let page = get_json(
        server.addr,
        &format!("/api/sessions/{}/messages?tail=1&limit=1", f.main),
    );
    assert_eq!(
        page["messages"][0]["parts"][0]["part"]["text"],
        json!("written by another process")
    );
}

#[test]
fn starting_fails_clearly() {
    use scribe_server::{Config, ServeError, Server};
    let f = fixture();
    let bind = |db: &std::path::Path, addr: &str, token: Option<&str>| {
        Server::bind(Config {
            db: db.to_owned(),
            addr: addr.to_owned(),
            token: token.map(str::to_owned),
        })
    };
    let missing = f.dir.path().join("missing.db");
    let err = bind(&missing, "127.0.0.1:0", None).unwrap_err();
    assert!(matches!(err, ServeError::NoDatabase { .. }), "{err}");
    assert!(err.to_string().contains("missing.db"));
    let err = bind(&f.db, "0.0.0.0:0", None).unwrap_err();
    assert!(matches!(err, ServeError::TokenRequired { .. }), "{err}");
    let err = bind(&f.db, "127.0.0.1:0", Some("has space")).unwrap_err();
    assert!(matches!(err, ServeError::BadToken), "{err}");
    let err = bind(&f.db, "nonsense", None).unwrap_err();
    assert!(matches!(err, ServeError::BadAddress { .. }), "{err}");
    let running = serve(&f.db, None);
    let err = bind(&f.db, &running.addr.to_string(), None).unwrap_err();
    assert!(matches!(err, ServeError::AddrInUse { .. }), "{err}");
    let next = format!("127.0.0.1:{}", running.addr.port() + 1);
    assert!(err.to_string().contains(&next), "{err}");
    let not_db = f.dir.path().join("notes.txt");
    std::fs::write(&not_db, "not a database").unwrap();
    let err = bind(&not_db, "127.0.0.1:0", None).unwrap_err();
    assert!(matches!(err, ServeError::Open { .. }), "{err}");
}

/// Sends `bytes` on a new connection to `addr` and returns everything the server answers
/// until it closes (or 30 s pass).
fn exchange(addr: std::net::SocketAddr, bytes: &[u8]) -> String {
    use std::io::Read;
    let mut stream = TcpStream::connect(addr).unwrap();
    stream
        .set_read_timeout(Some(Duration::from_secs(30)))
        .unwrap();
    stream.write_all(bytes).unwrap();
    let mut out = String::new();
    let _ = stream.read_to_string(&mut out);
    out
}

#[test]
fn malformed_requests_get_a_clear_answer() {
    let f = fixture();
    let server = serve(&f.db, None);
    let raw = |bytes: &[u8]| exchange(server.addr, bytes);
    assert!(raw(b"NOT HTTP AT ALL\r\n\r\n").starts_with("HTTP/1.1 400"));
    let huge = format!(
        "GET /api/stats HTTP/1.1\r\nHost: localhost\r\nX-Big: {}\r\n\r\n",
        "x".repeat(20_000)
    );
    assert!(raw(huge.as_bytes()).starts_with("HTTP/1.1 431"));
    let many: String = (0..100).map(|i| format!("X-{i}: y\r\n")).collect();
    let reply = raw(format!("GET /api/stats HTTP/1.1\r\nHost: localhost\r\n{many}\r\n").as_bytes());
    assert!(reply.starts_with("HTTP/1.1 431"), "{reply}");
    // Under /api/ even these are `{"error": …}`, as the API reference promises; elsewhere
    // a line of text.
    for (head, status) in [
        (huge.clone(), "431"),
        (
            format!("GET /api/stats HTTP/1.1\r\nHost: localhost\r\n{many}\r\n"),
            "431",
        ),
        ("GET /api/stats HTTP/9.1\r\n\r\n".to_owned(), "400"),
        (
            "GET /api/stats HTTP/1.1\r\nBad Header\r\n\r\n".to_owned(),
            "400",
        ),
    ] {
        let reply = raw(head.as_bytes());
        assert!(reply.starts_with(&format!("HTTP/1.1 {status}")), "{reply}");
        assert!(
            reply.contains("Content-Type: application/json; charset=utf-8"),
            "{reply}"
        );
        let body = reply.split("\r\n\r\n").nth(1).unwrap();
        let error: Value = serde_json::from_str(body).unwrap();
        assert!(error["error"].is_string(), "{body}");
    }
    // An address too long to read is a 414, as JSON under /api/.
    let long = format!(
        "GET /api/search?q={} HTTP/1.1\r\nHost: localhost\r\n\r\n",
        "a".repeat(20_000)
    );
    let reply = raw(long.as_bytes());
    assert!(reply.starts_with("HTTP/1.1 414"), "{reply}");
    assert!(
        reply.contains("{\"error\":\"the request's address is too long"),
        "{reply}"
    );
    // A body length that is not one number: where the request ends is unknown.
    for length in ["abc", "-1", "5, 6", "", "1e3"] {
        let head = format!(
            "GET /api/version HTTP/1.1\r\nHost: localhost\r\nContent-Length: {length}\r\n\r\n"
        );
        let reply = raw(head.as_bytes());
        assert!(
            reply.starts_with("HTTP/1.1 400"),
            "Content-Length: {length:?}: {reply}"
        );
        assert!(reply.contains("Content-Length"), "{reply}");
    }
    let reply = raw(b"GET /api/version HTTP/1.1\r\nHost: localhost\r\nContent-Length: 4\r\ncontent-length: 5\r\n\r\nabcde");
    assert!(reply.starts_with("HTTP/1.1 400"), "{reply}");
    for same in [
        "Content-Length: 0\r\n",
        "Content-Length: 2\r\nContent-Length: 2\r\n",
        "Content-Length: 2, 2\r\n",
    ] {
        let head = format!("GET /api/version HTTP/1.1\r\nHost: localhost\r\n{same}\r\nab");
        let reply = raw(head.as_bytes());
        assert!(reply.starts_with("HTTP/1.1 200"), "{same:?}: {reply}");
    }
    let reply = raw(b"GET /search HTTP/9.1\r\n\r\n");
    assert!(reply.starts_with("HTTP/1.1 400"), "{reply}");
    assert!(reply.contains("Content-Type: text/plain"), "{reply}");
    // The server still answers afterwards.
    assert_eq!(get(server.addr, "/api/version").status, 200);
}

/// The first line of the answer to `GET path` (an event stream) on a new connection, and
/// the connection (still open).
fn open_stream(addr: std::net::SocketAddr, path: &str) -> (String, TcpStream) {
    use std::io::{BufRead, BufReader};
    let mut stream = TcpStream::connect(addr).unwrap();
    stream
        .set_read_timeout(Some(Duration::from_secs(30)))
        .unwrap();
    write!(stream, "GET {path} HTTP/1.1\r\nHost: {addr}\r\n\r\n").unwrap();
    let mut status = String::new();
    BufReader::new(stream.try_clone().unwrap())
        .read_line(&mut status)
        .unwrap();
    (status.trim_end().to_owned(), stream)
}

#[test]
fn closed_event_streams_give_their_slots_back_at_once() {
    let f = fixture();
    let server = serve(&f.db, None);
    let streams: Vec<TcpStream> = (0..scribe_server::MAX_STREAMS)
        .map(|_| {
            let (status, stream) = open_stream(server.addr, "/api/events");
            assert_eq!(status, "HTTP/1.1 200 OK");
            stream
        })
        .collect();
    // One more is refused with a JSON error, and the rest of the API still answers.
    let reply = request(server.addr, "GET", "/api/events", &[], None).unwrap();
    assert_eq!(reply.status, 503);
    assert_eq!(reply.header("retry-after"), Some("1"));
    assert!(
        reply.json()["error"]
            .as_str()
            .unwrap()
            .contains("event streams")
    );
    assert_eq!(get(server.addr, "/api/version").status, 200);
    // The clients go away (a page closed, a script stopped): reconnecting works within a
    // moment, not only after the keep-alive comment (15 s) found each socket closed.
    drop(streams);
    let start = std::time::Instant::now();
    loop {
        let (status, _stream) = open_stream(server.addr, "/api/events");
        if status == "HTTP/1.1 200 OK" {
            break;
        }
        assert!(
            start.elapsed() < Duration::from_secs(5),
            "event streams were still refused {:?} after their clients closed: {status}",
            start.elapsed()
        );
        std::thread::sleep(Duration::from_millis(100));
    }
}

#[test]
fn a_cursor_the_server_never_made_is_400_not_an_empty_page() {
    use base64::Engine as _;
    let f = fixture();
    let server = serve(&f.db, None);
    let encode = |plain: &str| base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(plain);
    // A real cost cursor pages on.
    let page = get_json(server.addr, "/api/sessions?sort=cost&limit=1");
    let next = page["next"].as_str().unwrap();
    assert_eq!(
        ids(&get_json(
            server.addr,
            &format!("/api/sessions?sort=cost&limit=1&after={next}")
        ))
        .len(),
        1
    );
    // A forged one whose amount is NaN compares after nothing: a 400, not "no more sessions".
    for plain in ["v1:cost:rNaN:ses_main", "v1:cost:rnan:x", "v1:created:i:x"] {
        let path = format!(
            "/api/sessions?sort={}&after={}",
            plain.split(':').nth(1).unwrap(),
            encode(plain)
        );
        let reply = get(server.addr, &path);
        assert_eq!(reply.status, 400, "{plain}: {}", reply.text());
        assert!(
            reply.json()["error"]
                .as_str()
                .unwrap()
                .contains("invalid cursor"),
            "{plain}"
        );
    }
}

#[test]
fn tail_and_event_stream_parameters_are_strict_too() {
    let f = fixture();
    let server = serve(&f.db, None);
    let messages = format!("/api/sessions/{}/messages", f.long);
    let last = f.long_messages.last().unwrap();
    for tail in ["1", "true"] {
        let page = get_json(server.addr, &format!("{messages}?tail={tail}&limit=1"));
        assert_eq!(page["messages"][0]["id"], json!(last), "tail={tail}");
    }
    for tail in ["0", "false"] {
        let page = get_json(server.addr, &format!("{messages}?tail={tail}&limit=1"));
        assert_eq!(
            page["messages"][0]["id"],
            json!(f.long_messages[0]),
            "tail={tail}"
        );
    }
    // A value that is neither is refused rather than read as "the last page".
    for tail in ["no", "off", "yes", "2"] {
        let reply = get(server.addr, &format!("{messages}?tail={tail}&limit=1"));
        assert_eq!(reply.status, 400, "tail={tail}: {}", reply.text());
        assert!(
            reply.json()["error"].as_str().unwrap().contains("tail"),
            "tail={tail}"
        );
    }
    // /api/events takes no parameters: a typo is a 400 like everywhere else, answered at
    // once instead of a stream that ignores it.
    for (path, says) in [
        ("/api/events?sinse=5", "sinse"),
        ("/api/events?x=%ff", "not UTF-8"),
    ] {
        let (status, _) = open_stream(server.addr, path);
        assert_eq!(status, "HTTP/1.1 400 Bad Request", "{path}");
        let reply = request(server.addr, "GET", path, &[], None).unwrap();
        assert!(
            reply.json()["error"].as_str().unwrap().contains(says),
            "{path}"
        );
    }
    // The token parameter and empty values are allowed, as elsewhere.
    let (status, _) = open_stream(server.addr, "/api/events?token=&x=");
    assert_eq!(status, "HTTP/1.1 200 OK");
}

#[test]
fn conditional_asset_requests_follow_http_caching_rules() {
    let f = fixture();
    let server = serve(&f.db, None);
    let a = server.addr;
    let js = get(a, "/assets/app.js");
    assert_eq!(js.status, 200);
    let etag = js.header("etag").unwrap().to_owned();
    let length = js.header("content-length").unwrap().to_owned();
    let with = |method: &str, value: &str| {
        request(
            a,
            method,
            "/assets/app.js",
            &[("If-None-Match", value)],
            None,
        )
        .unwrap()
    };
    // The tag as sent, weak, in a list, or `*`: not modified.
    for value in [
        etag.clone(),
        format!("W/{etag}"),
        format!("\"0000000000000000\", {etag}"),
        "*".to_owned(),
    ] {
        for method in ["GET", "HEAD"] {
            let reply = with(method, &value);
            assert_eq!(reply.status, 304, "{method} If-None-Match: {value}");
            assert!(reply.body.is_empty());
            // A cache refreshes its stored headers from a 304: they must be the 200's, and
            // a Content-Length other than the 200's (it said 0) is forbidden.
            assert_eq!(reply.header("etag"), Some(etag.as_str()));
            assert_eq!(reply.header("content-type"), js.header("content-type"));
            assert!(
                reply.header("content-length").is_none_or(|l| l == length),
                "{method} {value}: content-length {:?}",
                reply.header("content-length")
            );
        }
    }
    // Another tag: the file itself.
    let reply = with("GET", "\"0000000000000000\"");
    assert_eq!(reply.status, 200);
    assert_eq!(reply.body, js.body);
}

#[test]
fn the_token_is_taken_as_http_authentication_is_spelled() {
    let f = fixture();
    let token = "t0ken-for-tests";
    let server = serve(&f.db, Some(token));
    let a = server.addr;
    // The scheme is case-insensitive and may be followed by more than one space.
    for value in [
        format!("Bearer {token}"),
        format!("bearer {token}"),
        format!("BEARER  {token}"),
    ] {
        let reply = request(a, "GET", "/api/version", &[("Authorization", &value)], None).unwrap();
        assert_eq!(
            reply.status,
            200,
            "Authorization: {value}: {}",
            reply.text()
        );
    }
    for value in [
        format!("Basic {token}"),
        token.to_owned(),
        "Bearer".to_owned(),
    ] {
        let reply = request(a, "GET", "/api/version", &[("Authorization", &value)], None).unwrap();
        assert_eq!(reply.status, 401, "Authorization: {value}");
    }
    // A 401 says which scheme would do, on the API and on pages.
    for path in ["/api/version", "/"] {
        let reply = get(a, path);
        assert_eq!(reply.status, 401);
        assert_eq!(
            reply.header("www-authenticate"),
            Some("Bearer realm=\"scribe\""),
            "{path}"
        );
    }
}

#[test]
fn a_request_names_exactly_one_host() {
    let f = fixture();
    let token = "t0ken-for-tests";
    let plain = serve(&f.db, None);
    let guarded = serve(&f.db, Some(token));
    let raw = |addr: std::net::SocketAddr, head: String| exchange(addr, head.as_bytes());
    for (addr, auth) in [
        (plain.addr, String::new()),
        (guarded.addr, format!("Authorization: Bearer {token}\r\n")),
    ] {
        // Two Host headers, the loopback one first or last: refused, whichever is checked.
        for hosts in [
            format!("Host: {addr}\r\nHost: evil.example\r\n"),
            format!("Host: evil.example\r\nHost: {addr}\r\n"),
            format!("Host: {addr}\r\nhost: {addr}\r\n"),
        ] {
            let reply = raw(
                addr,
                format!("GET /api/version HTTP/1.1\r\n{hosts}{auth}\r\n"),
            );
            assert!(reply.starts_with("HTTP/1.1 400"), "{hosts:?}: {reply}");
            assert!(reply.contains("exactly one Host"), "{reply}");
        }
        // HTTP/1.1 requires one; HTTP/1.0 may omit it (then only a token admits it).
        let reply = raw(addr, format!("GET /api/version HTTP/1.1\r\n{auth}\r\n"));
        assert!(reply.starts_with("HTTP/1.1 400"), "{reply}");
        let reply = raw(
            addr,
            format!("GET /api/version HTTP/1.1\r\nHost: {addr}\r\n{auth}\r\n"),
        );
        assert!(reply.starts_with("HTTP/1.1 200"), "{reply}");
    }
    let reply = raw(
        guarded.addr,
        format!("GET /api/version HTTP/1.0\r\nAuthorization: Bearer {token}\r\n\r\n"),
    );
    assert!(reply.starts_with("HTTP/1.1 200"), "{reply}");
    let reply = raw(plain.addr, "GET /api/version HTTP/1.0\r\n\r\n".to_owned());
    assert!(reply.starts_with("HTTP/1.1 403"), "{reply}");
}

#[test]
fn a_body_trickled_byte_by_byte_is_cut_off_like_a_slow_head() {
    use std::io::Read;
    let f = fixture();
    let server = serve(&f.db, None);
    let mut stream = TcpStream::connect(server.addr).unwrap();
    write!(
        stream,
        "POST /api/sessions HTTP/1.1\r\nHost: {}\r\nContent-Length: 100000\r\n\r\n",
        server.addr
    )
    .unwrap();
    // One byte of the body every 200 ms: each read is quick, the whole would take 5 hours.
    let start = std::time::Instant::now();
    let trickle = {
        let mut stream = stream.try_clone().unwrap();
        std::thread::spawn(move || {
            while start.elapsed() < Duration::from_secs(40) {
                if stream.write_all(b"x").is_err() {
                    return Some(start.elapsed());
                }
                std::thread::sleep(Duration::from_millis(200));
            }
            None
        })
    };
    // The answer comes at once: a body a read-only server refuses need not arrive first.
    stream
        .set_read_timeout(Some(Duration::from_secs(25)))
        .unwrap();
    let mut head = [0u8; 12];
    stream.read_exact(&mut head).unwrap();
    assert_eq!(&head, b"HTTP/1.1 405");
    assert!(
        start.elapsed() < Duration::from_secs(5),
        "{:?}",
        start.elapsed()
    );
    // The rest of the body is read (so closing does not reset the answer) only until the
    // time a request may take (10 s): then the server closes, and writing fails.
    let stopped = trickle.join().unwrap();
    assert!(
        stopped.is_some_and(|t| t < Duration::from_secs(25)),
        "the server still read the body after {stopped:?}"
    );
}

#[test]
fn a_client_that_waits_for_100_continue_hears_405_at_once() {
    use std::io::Read;
    let f = fixture();
    let server = serve(&f.db, None);
    let mut stream = TcpStream::connect(server.addr).unwrap();
    stream
        .set_read_timeout(Some(Duration::from_secs(25)))
        .unwrap();
    // As curl sends a larger POST: the body only after a 100 (or a second of silence).
    write!(
        stream,
        "POST /api/sessions HTTP/1.1\r\nHost: {}\r\nContent-Length: 5000\r\n\
         Expect: 100-continue\r\n\r\n",
        server.addr
    )
    .unwrap();
    let start = std::time::Instant::now();
    let mut head = [0u8; 12];
    stream.read_exact(&mut head).unwrap();
    assert_eq!(&head, b"HTTP/1.1 405");
    assert!(
        start.elapsed() < Duration::from_secs(3),
        "{:?}",
        start.elapsed()
    );
}

#[test]
fn the_token_redirect_stays_on_this_server() {
    let f = fixture();
    let token = "t0ken-for-tests";
    let server = serve(&f.db, Some(token));
    for (path, location) in [
        ("//evil.example/x", "/evil.example/x"),
        ("///evil.example", "/evil.example"),
        ("/\\evil.example", "/evil.example"),
        ("/s/ses_main", "/s/ses_main"),
    ] {
        let reply = get(server.addr, &format!("{path}?token={token}"));
        assert_eq!(reply.status, 303, "{path}");
        assert_eq!(reply.header("location"), Some(location), "{path}");
    }
}

#[test]
fn a_target_in_absolute_form_is_understood() {
    let f = fixture();
    let server = serve(&f.db, None);
    let a = server.addr;
    let raw = |head: String| exchange(a, head.as_bytes());
    // As a client configured with a proxy sends it: the same answer as the origin form.
    let reply = raw(format!(
        "GET http://{a}/api/version HTTP/1.1\r\nHost: {a}\r\n\r\n"
    ));
    assert!(reply.starts_with("HTTP/1.1 200"), "{reply}");
    assert!(reply.ends_with("{\"version\":0}"), "{reply}");
    let reply = raw(format!(
        "GET HTTP://{a}/api/sessions/nope?x=1 HTTP/1.1\r\nHost: {a}\r\n\r\n"
    ));
    assert!(reply.starts_with("HTTP/1.1 400"), "{reply}");
    assert!(reply.contains("unknown parameter"), "{reply}");
    let reply = raw(format!("GET http://{a} HTTP/1.1\r\nHost: {a}\r\n\r\n"));
    assert!(
        reply.starts_with("HTTP/1.1 200") && reply.contains("<!doctype html>"),
        "{reply}"
    );
    // Its authority is the host that counts, not the Host header.
    let reply = raw(format!(
        "GET http://evil.example/api/version HTTP/1.1\r\nHost: {a}\r\n\r\n"
    ));
    assert!(reply.starts_with("HTTP/1.1 403"), "{reply}");
    let reply =
        raw("GET http://localhost:1/api/version HTTP/1.1\r\nHost: evil.example\r\n\r\n".to_owned());
    assert!(reply.starts_with("HTTP/1.1 200"), "{reply}");
}

#[test]
fn the_children_of_an_unknown_session_are_a_404() {
    let f = fixture();
    let server = serve(&f.db, None);
    // A session's children; one without any lists none.
    let page = get_json(server.addr, &format!("/api/sessions?parent={}", f.main));
    assert_eq!(ids(&page), vec![f.task.clone()]);
    let page = get_json(server.addr, &format!("/api/sessions?parent={}", f.telegram));
    assert_eq!(ids(&page), Vec::<String>::new());
    // A mistyped id is not "a session without children", as search's session= is not.
    for path in [
        "/api/sessions?parent=ses_mian",
        "/api/search?q=build&session=ses_mian",
    ] {
        let reply = get(server.addr, path);
        assert_eq!(reply.status, 404, "{path}: {}", reply.text());
        assert!(
            reply.json()["error"].as_str().unwrap().contains("ses_mian"),
            "{path}"
        );
    }
}

#[test]
fn a_deeply_nested_tool_input_is_served_not_a_crash() {
    use scribe_message::{MAX_PART_DEPTH, NewMessage, Part, Role};
    let f = fixture();
    // A tool call whose input nests as deep as a part may (MAX_PART_DEPTH levels, the
    // part's own object one of them): stored by the service like any other.
    let levels = MAX_PART_DEPTH - 1;
    let mut input = json!("leaf");
    for _ in 0..levels {
        input = json!({ "a": input });
    }
    let part: Part = serde_json::from_value(json!({
        "type": "tool", "call_id": "call_deep", "tool": "deep", "input": input,
        "state": {"status": "completed", "output": "ok", "title": "deep",
                  "started_at": T0, "ended_at": T0}
    }))
    .unwrap();
    let db = Arc::new(Database::open(&f.db).unwrap());
    let id = MessageService::new(Arc::clone(&db))
        .create(NewMessage::new(&f.telegram, Role::Assistant, vec![part]))
        .unwrap()
        .id;
    drop(db);
    let server = serve(&f.db, None);
    // The connection thread reads and writes it without overflowing its stack, which
    // aborted the whole server (125 levels did, on 256 KiB, before parts were held to
    // MAX_PART_DEPTH; the 2 MiB stack stays as a margin). The page nests it deeper than
    // serde_json reads by default, so it is checked as text; JSON.parse in the page has
    // no such limit.
    let reply = get(
        server.addr,
        &format!("/api/sessions/{}/messages?tail=1&limit=1", f.telegram),
    );
    assert_eq!(reply.status, 200, "{}", reply.text());
    let text = reply.text();
    assert!(text.contains(&format!("\"id\":\"{id}\"")), "{text}");
    assert_eq!(text.matches("{\"a\":").count(), levels, "{text}");
    assert!(text.contains("\"a\":\"leaf\"}"), "{text}");
    assert_eq!(get(server.addr, "/api/version").status, 200);
}

#[test]
fn a_request_head_that_never_ends_is_answered_408() {
    use std::io::Read;
    let f = fixture();
    let server = serve(&f.db, None);
    let start = std::time::Instant::now();
    // A connection that sends nothing, and one whose head's blank line never comes.
    let mut idle = TcpStream::connect(server.addr).unwrap();
    idle.set_read_timeout(Some(Duration::from_secs(30)))
        .unwrap();
    let mut stream = TcpStream::connect(server.addr).unwrap();
    stream
        .set_read_timeout(Some(Duration::from_secs(30)))
        .unwrap();
    write!(
        stream,
        "GET /api/version HTTP/1.1\r\nHost: {}\r\n",
        server.addr
    )
    .unwrap();
    let mut reply = String::new();
    let _ = stream.read_to_string(&mut reply);
    assert!(reply.starts_with("HTTP/1.1 408"), "{reply:?}");
    assert!(reply.contains("took too long"), "{reply}");
    // After the time a head may take (10 s), not the client's patience.
    assert!(
        start.elapsed() < Duration::from_secs(20),
        "{:?}",
        start.elapsed()
    );
    // The one that sent nothing is closed without an answer (browsers open spares).
    let mut nothing = Vec::new();
    let _ = idle.read_to_end(&mut nothing);
    assert!(
        nothing.is_empty(),
        "{:?}",
        String::from_utf8_lossy(&nothing)
    );
}

#[test]
fn a_base64_token_works_in_the_printed_url() {
    // `openssl rand -base64 12`: `+`, `/` and `=` are all allowed in a token.
    let token = "q+Zr/8fT+w9x1AbC==";
    let f = fixture();
    let server = serve(&f.db, Some(token));
    let a = server.addr;
    // As `scribe serve` prints it (not percent-encoded), and encoded: both are the token.
    let encoded: String = form_urlencoded_token(token);
    for sent in [token.to_owned(), encoded] {
        let page = get(a, &format!("/?token={sent}"));
        assert_eq!(page.status, 303, "?token={sent}: {}", page.text());
        assert!(
            page.header("set-cookie")
                .unwrap()
                .starts_with(&format!("scribe_token={token};"))
        );
        let api = get(a, &format!("/api/version?token={sent}"));
        assert_eq!(api.status, 200, "?token={sent}: {}", api.text());
    }
    // The cookie it set, and the header, work as they are.
    let cookie = format!("scribe_token={token}");
    let reply = request(a, "GET", "/api/version", &[("Cookie", &cookie)], None).unwrap();
    assert_eq!(reply.status, 200);
    // A token that differs only where decoding would change it is still refused.
    let near = token.replace('+', " ");
    assert_eq!(
        get(
            a,
            &format!("/api/version?token={}", near.replace(' ', "%20"))
        )
        .status,
        401
    );
    assert_eq!(get(a, "/api/version?token=q+Zr/8fT+w9x1AbC=").status, 401);
}

/// `text` percent-encoded for a query value (every byte but letters and digits).
fn form_urlencoded_token(text: &str) -> String {
    text.bytes()
        .map(|b| {
            if b.is_ascii_alphanumeric() {
                (b as char).to_string()
            } else {
                format!("%{b:02X}")
            }
        })
        .collect()
}

#[test]
fn a_big_part_is_cut_in_the_message_page_and_served_whole_on_its_own() {
    let dir = tempfile::tempdir().unwrap();
    // 3 MB of a three-byte character: the cap (64 KiB) falls inside one.
    let output = "日".repeat(1_000_000);
    let db = big_output_store(dir.path(), &output);
    let server = serve(&db, None);
    let a = server.addr;
    let cap = scribe_server::json::PART_TEXT_CAP;

    let reply = get(a, "/api/sessions/ses_big/messages");
    assert_eq!(reply.status, 200);
    assert!(
        reply.body.len() < 2 * cap,
        "the page is not sent whole: {} bytes",
        reply.body.len()
    );
    let page = reply.json();
    let big = &page["messages"][1]["parts"][0];
    let sent = big["part"]["state"]["output"].as_str().unwrap();
    assert!(sent.len() <= cap && sent.len() > cap - 4, "{}", sent.len());
    assert!(
        output.starts_with(sent),
        "the start of the output, whole characters"
    );
    assert_eq!(big["cut"], json!(true));
    // The rest of the part is as stored.
    assert_eq!(big["part"]["input"]["command"], json!("cat build.log"));
    assert_eq!(big["part"]["state"]["status"], json!("completed"));

    // The part whole, from its own endpoint: what `full_bytes` says.
    let whole = get_json(a, "/api/parts/prt_msg_big_2_0");
    assert_eq!(whole["id"], json!("prt_msg_big_2_0"));
    assert_eq!(whole["position"], json!(0));
    assert_eq!(whole["part"]["state"]["output"], json!(output));
    assert_eq!(
        big["full_bytes"],
        json!(serde_json::to_vec(&whole["part"]).unwrap().len())
    );

    // A small part is exactly as `scribe show --json` has it: no cut fields.
    let small = &page["messages"][1]["parts"][1];
    assert_eq!(small, &get_json(a, "/api/parts/prt_msg_big_2_1"));
    assert!(small.get("cut").is_none() && small.get("full_bytes").is_none());

    // Unknown parts are 404; the endpoint takes no parameters.
    let missing = get(a, "/api/parts/prt_nope");
    assert_eq!(missing.status, 404);
    assert_eq!(missing.json()["error"], json!("part not found: prt_nope"));
    assert_eq!(get(a, "/api/parts/prt_msg_big_2_0?limit=1").status, 400);
}

#[test]
fn a_stale_from_gives_the_first_page_marked_missing_when_asked() {
    let f = fixture();
    let server = serve(&f.db, None);
    let a = server.addr;
    let path = |q: &str| format!("/api/sessions/{}/messages?{q}", f.main);

    // By default a message that is not there is a 404, as before.
    let gone = get(a, &path("from=msg_gone"));
    assert_eq!(gone.status, 404);
    // With missing=first: the first page, marked.
    let page = get_json(a, &path("from=msg_gone&missing=first"));
    assert_eq!(page["missing"], json!(true));
    assert_eq!(page["messages"][0]["id"], json!(f.main_messages[0]));
    assert_eq!(page["more_before"], json!(false));
    // A message of another session is not this one's either.
    let other = get_json(
        a,
        &path(&format!("from={}&missing=first", f.long_messages[5])),
    );
    assert_eq!(other["missing"], json!(true));
    // A message that is there: its page, with no `missing` field.
    let found = get_json(
        a,
        &path(&format!("from={}&missing=first", f.main_messages[2])),
    );
    assert_eq!(found["messages"][0]["id"], json!(f.main_messages[2]));
    assert!(found.get("missing").is_none());
    // An unknown session is still a 404; missing= needs from= and a known value.
    assert_eq!(
        get(a, "/api/sessions/ses_nope/messages?from=m&missing=first").status,
        404
    );
    assert_eq!(get(a, &path("missing=first")).status, 400);
    assert_eq!(get(a, &path("from=msg_gone&missing=yes")).status, 400);
}

/// Not a test of its own: the server process of `measure_the_peak_memory_of_a_big_part_page`
/// (this test binary again, with `SCRIBE_TEST_SERVE_DB` set): serves that file, prints
/// its address, and stops when its stdin closes. Without the variable it does nothing.
#[test]
#[ignore = "helper: run as a separate server process by measure_the_peak_memory_of_a_big_part_page"]
fn serve_process() {
    let Some(db) = std::env::var_os("SCRIBE_TEST_SERVE_DB") else {
        return;
    };
    let server = serve(std::path::Path::new(&db), None);
    println!("listening {}", server.addr);
    std::io::stdout().flush().unwrap();
    let mut rest = String::new();
    let _ = std::io::Read::read_to_string(&mut std::io::stdin(), &mut rest);
}

/// What a server process costs answering the message page of a conversation whose tool
/// output is `output`: its peak resident memory (VmHWM, kB) before the request and after,
/// the page's bytes and how long it took. The server runs as its own process so nothing
/// else (building the store) counts.
struct BigPage {
    before_kb: u64,
    after_kb: u64,
    bytes: usize,
    took: std::time::Duration,
}

fn big_page(output: String) -> BigPage {
    use std::io::BufRead;
    let dir = tempfile::tempdir().unwrap();
    let db = big_output_store(dir.path(), &output);
    drop(output);
    let mut child = std::process::Command::new(std::env::current_exe().unwrap())
        .args(["--ignored", "--exact", "serve_process", "--nocapture"])
        .env("SCRIBE_TEST_SERVE_DB", &db)
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut lines = std::io::BufReader::new(child.stdout.take().unwrap()).lines();
    let addr: std::net::SocketAddr = loop {
        let line = lines.next().unwrap().unwrap();
        if let Some(addr) = line.strip_prefix("listening ") {
            break addr.parse().unwrap();
        }
    };
    let peak = || -> u64 {
        let status = std::fs::read_to_string(format!("/proc/{}/status", child.id())).unwrap();
        let kb = status
            .lines()
            .find_map(|l| l.strip_prefix("VmHWM:"))
            .unwrap()
            .trim()
            .trim_end_matches("kB")
            .trim();
        kb.parse().unwrap()
    };
    // One small request first, so the baseline includes an opened database.
    assert_eq!(get(addr, "/api/sessions").status, 200);
    let before_kb = peak();
    let started = std::time::Instant::now();
    let reply = get(addr, "/api/sessions/ses_big/messages");
    let took = started.elapsed();
    assert_eq!(reply.status, 200);
    let after_kb = peak();
    drop(child.stdin.take());
    child.wait().unwrap();
    BigPage {
        before_kb,
        after_kb,
        bytes: reply.body.len(),
        took,
    }
}

/// A measurement (prints the figures, asserts only that the page answers): the peak
/// resident memory (VmHWM) of a server process that answers the message page of a
/// conversation holding a `SCRIBE_BIG_OUTPUT_MB` (default 20) MB tool output, next to
/// its peak before that request ([`big_page`]).
#[test]
#[ignore = "a measurement: run with --ignored --nocapture"]
fn measure_the_peak_memory_of_a_big_part_page() {
    let mb: usize = std::env::var("SCRIBE_BIG_OUTPUT_MB")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(20);
    // SCRIBE_BIG_OUTPUT_LINES=1: an output of short lines (a `\n` escape every 17 bytes)
    // instead of one long run of `x`.
    let short_lines = std::env::var_os("SCRIBE_BIG_OUTPUT_LINES").is_some();
    let output = if short_lines {
        "some output line\n".repeat(mb * 1_000_000 / 17)
    } else {
        "x".repeat(mb * 1_000_000)
    };
    let page = big_page(output);
    println!(
        "measured: a {mb} MB tool output{}: the server's peak RSS {} kB before the page, {} kB after; the page {} bytes in {} ms",
        if short_lines { " of short lines" } else { "" },
        page.before_kb,
        page.after_kb,
        page.bytes,
        page.took.as_millis()
    );
}

/// On SQLite the page of a big part costs the cut, not the part: a 40 MB tool output's
/// page raises the server's peak memory by less than the output's size (the part is
/// streamed from its row and cut on the way; the database's page cache, 16 MiB, is most
/// of what it costs). Reading it through `json_tree` raised it by over three times the
/// output's size.
#[test]
fn a_big_part_page_costs_the_cut_not_the_part() {
    let mb = 40;
    let page = big_page("some output line\n".repeat(mb * 1_000_000 / 17));
    let grew_kb = page.after_kb.saturating_sub(page.before_kb);
    assert!(
        grew_kb < (mb as u64) * 1000,
        "the page of a {mb} MB output raised the peak by {grew_kb} kB"
    );
}

/// A part with a 5 MB string and one with fifty 100 KB strings: each string is cut at the
/// cap (never inside a character, four-byte ones included), the part within its budget,
/// `full_bytes` is exact, and `/api/parts/{id}` sends each whole, as stored
/// (`common::check_cut_parts`; tests/postgres.rs checks the same on PostgreSQL).
#[test]
fn big_strings_are_cut_at_the_cap_within_the_part_budget() {
    let dir = tempfile::tempdir().unwrap();
    let db = cut_parts_store(dir.path());
    let server = serve(&db, None);
    check_cut_parts(server.addr);
}

/// On SQLite a cut string keeps a NUL character as stored (PostgreSQL's reads it as a
/// space: ARCHITECTURE.md), and the cut ends on a character boundary after it.
#[test]
fn a_cut_string_keeps_its_nul_on_sqlite() {
    let dir = tempfile::tempdir().unwrap();
    let output = format!("a\0b{}", "é".repeat(40_000));
    let db = big_output_store(dir.path(), &output);
    let server = serve(&db, None);
    let page = get_json(server.addr, "/api/sessions/ses_big/messages");
    let sent = page["messages"][1]["parts"][0]["part"]["state"]["output"]
        .as_str()
        .unwrap();
    assert!(sent.starts_with("a\0b"), "{:?}", &sent[..4]);
    assert_eq!(
        sent,
        common::head_of(&output, scribe_server::json::PART_TEXT_CAP)
    );
}

/// A big part nesting deeper than a part may now (stored by an older build, which did not
/// refuse one) is still cut and sent, its levels as `/api/parts/{id}` has them (below
/// the deepest allowed, JSON text): the page stays readable by serde_json.
#[test]
fn a_too_deep_big_part_is_cut_and_sent() {
    let dir = tempfile::tempdir().unwrap();
    let db = big_output_store(dir.path(), "short");
    // 200 levels of arrays around 1 in the input, and a 100 KB output.
    let nested = (0..199).fold(json!(1), |inner, _| Value::Array(vec![inner]));
    let output = "y".repeat(100_000);
    let raw = format!(
        r#"{{"type":"tool","call_id":"call_deep","tool":"probe","input":{nested},"state":{{"status":"completed","output":"{output}","title":"","started_at":1,"ended_at":2}}}}"#
    );
    Database::open(&db)
        .unwrap()
        .write(|tx| -> scribe_db::Result<()> {
            tx.q().update_part(&scribe_db::queries::UpdatePartParams {
                r#type: "tool",
                data: &raw,
                now: i64::MAX / 2,
                id: "prt_msg_big_2_0",
            })?;
            Ok(())
        })
        .unwrap();
    let server = serve(&db, None);
    let page = get_json(server.addr, "/api/sessions/ses_big/messages");
    let part = &page["messages"][1]["parts"][0];
    assert_eq!(part["cut"], json!(true));
    assert_eq!(part["full_bytes"], json!(raw.len()));
    // As `/api/parts/{id}` reads it: the levels below the deepest allowed as JSON text.
    let whole = get_json(server.addr, "/api/parts/prt_msg_big_2_0");
    assert_eq!(part["part"]["input"], whole["part"]["input"]);
    let mut inner = &part["part"]["input"];
    for _ in 2..=scribe_message::MAX_PART_DEPTH {
        inner = &inner[0];
    }
    let levels = 199 - (scribe_message::MAX_PART_DEPTH - 1);
    let below = (0..levels).fold(json!(1), |inner, _| Value::Array(vec![inner]));
    assert_eq!(inner, &json!(below.to_string()));
    let sent = part["part"]["state"]["output"].as_str().unwrap();
    assert_eq!(sent.len(), scribe_server::json::PART_TEXT_CAP);
}

/// Writes text where the telegram session's `created_at` belongs, as another program
/// could (SQLite's columns take any kind of value).
fn damage_telegram_row(f: &Fixture) {
    let conn = rusqlite::Connection::open(&f.db).unwrap();
    conn.execute(
        "UPDATE sessions SET created_at = 'yesterday' WHERE id = ?1",
        [&f.telegram],
    )
    .unwrap();
}

/// A session whose row holds a value no reader takes (another program wrote text into
/// `created_at`) is left out of `/api/sessions` and named in `left_out`; the rest of the
/// page is there. Before, the whole list answered 500 and the page showed nothing.
#[test]
fn the_session_list_leaves_out_a_session_it_cannot_read_and_names_it() {
    let f = fixture();
    {
        let server = serve(&f.db, None);
        let page = get_json(server.addr, "/api/sessions");
        assert_eq!(page["left_out"], json!([]));
    }
    damage_telegram_row(&f);
    let server = serve(&f.db, None);
    let page = get_json(server.addr, "/api/sessions");
    let listed = ids(&page);
    assert_eq!(listed.len(), 8, "{listed:?}");
    assert!(!listed.contains(&f.telegram), "{listed:?}");
    let left_out = page["left_out"].as_array().unwrap();
    assert_eq!(left_out.len(), 1, "{page}");
    let line = left_out[0].as_str().unwrap();
    assert!(
        line.contains(&format!("session {}: sqlite error: ", f.telegram)),
        "{line}"
    );
    assert!(line.contains("name: created_at"), "{line}");
    // Paged: the page that read the damaged row still says more follow, and every
    // readable session is reached.
    let page = get_json(server.addr, "/api/sessions?limit=4");
    assert_eq!(ids(&page).len(), 4, "{page}");
    assert_eq!(page["more"], json!(true), "{page}");
    let walked = walk(server.addr, "limit=4");
    let distinct: BTreeSet<&String> = walked.iter().collect();
    assert_eq!(distinct.len(), 8, "{walked:?}");
    assert!(!walked.contains(&f.telegram), "{walked:?}");
}

/// A search hit in a row holding a value no reader takes is left out of `/api/search` and
/// named in `left_out` (by its message, then the damaged row); the other hits are there.
/// Before, every search meeting the row answered 500.
#[test]
fn a_search_leaves_out_a_hit_it_cannot_read_and_names_it() {
    let f = fixture();
    {
        let server = serve(&f.db, None);
        let page = get_json(server.addr, "/api/search?q=weather");
        assert_eq!(page["hits"].as_array().unwrap().len(), 1, "{page}");
        assert_eq!(page["left_out"], json!([]));
    }
    damage_telegram_row(&f);
    let server = serve(&f.db, None);
    let page = get_json(server.addr, "/api/search?q=weather");
    assert_eq!(page["hits"], json!([]), "{page}");
    let left_out = page["left_out"].as_array().unwrap();
    assert_eq!(left_out.len(), 1, "{page}");
    let line = left_out[0].as_str().unwrap();
    assert!(
        line.starts_with(&format!(
            "message msg_tg_1: database error: session {}: sqlite error: ",
            f.telegram
        )),
        "{line}"
    );
    assert!(line.contains("name: created_at"), "{line}");
    // A search meeting no damaged row is whole.
    let page = get_json(server.addr, "/api/search?q=builder");
    assert!(!page["hits"].as_array().unwrap().is_empty(), "{page}");
    assert_eq!(page["left_out"], json!([]));
}
