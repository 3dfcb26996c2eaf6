//! `scribe serve` as a user runs it: the real binary on a free port, its API answering with
//! exactly what `scribe … --json` prints for the same question, and clear refusals for a
//! missing database, a busy port, a non-loopback address without a token and a bad token.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::net::TcpListener;
use std::process::Command;

use common::*;
use serde_json::Value;

/// `scribe serve` on the test's database, which it announces as read-only.
fn serve(env: &Env) -> Serving {
    let server = Serving::start(&env.db);
    assert!(server.line.contains("(read-only)"), "{}", server.line);
    server
}

#[test]
fn the_api_answers_with_the_clis_json() {
    let env = Env::new();
    let seeded = seed(&env);
    let server = serve(&env);

    for by in ["model", "source", "day"] {
        assert_eq!(
            server.json(&format!("/api/stats?by={by}")),
            env.json(&["stats", "--by", by, "--json"]),
            "stats --by {by}"
        );
        assert_eq!(
            server.json(&format!("/api/stats?by={by}&since=2020-01-31")),
            env.json(&["stats", "--by", by, "--since", "2020-01-31", "--json"]),
            "stats --by {by} --since"
        );
    }

    let list = env.json(&["list", "--json"]);
    let page = server.json("/api/sessions");
    assert_eq!(page["sessions"], list["sessions"]);
    assert_eq!(page["more"], list["more"]);

    for query in ["parser", "搜索"] {
        let page = server.json(&format!(
            "/api/search?q={}",
            query
                .bytes()
                .map(|b| format!("%{b:02X}"))
                .collect::<String>()
        ));
        // The page's `left_out` beside the CLI's `hits` (which names those on stderr).
        assert_eq!(page["left_out"], serde_json::json!([]), "search {query}");
        let mut hits = page;
        hits.as_object_mut().unwrap().remove("left_out");
        assert_eq!(
            hits,
            env.json(&["search", query, "--json"]),
            "search {query}"
        );
    }

    let show = env.json(&["show", &seeded.build, "--json"]);
    let detail = server.json(&format!("/api/sessions/{}", seeded.build));
    assert_eq!(detail["session"], show["session"]);
    let messages = server.json(&format!("/api/sessions/{}/messages", seeded.build));
    assert_eq!(messages["messages"], show["messages"]);
    assert_eq!(detail["children"][0]["id"], Value::String(seeded.task));

    let (status, body) = server.get("/api/sessions/ses_missing");
    assert_eq!(status, 404);
    assert!(body["error"].as_str().unwrap().contains("ses_missing"));
}

/// A session and its messages whose `created_at` is past year 9999 (written by another
/// program) and query strings a user or a fuzzer can type: every answer is a status with
/// a JSON error, never a dropped connection (a panic in the request's thread).
#[test]
fn the_api_answers_damaged_rows_and_hostile_queries() {
    let env = Env::new();
    let seeded = seed(&env);
    {
        let conn = rusqlite::Connection::open(&env.db).unwrap();
        for sql in [
            "UPDATE sessions SET created_at = ?1 WHERE id = ?2",
            "UPDATE messages SET created_at = ?1 WHERE session_id = ?2",
        ] {
            conn.execute(sql, rusqlite::params![i64::MAX, seeded.build])
                .unwrap();
        }
    }
    let server = serve(&env);
    for stack in ["model", "source"] {
        let usage = server.json(&format!("/api/usage?stack={stack}"));
        let text = usage.to_string();
        assert!(text.contains("9999-12-31"), "{text}");
    }
    for path in [
        "/api/usage?since=9223372036854775807-01-01",
        "/api/stats?since=99999999999-06-15",
        "/api/search?q=x&since=9223372036854775807-12-31",
        "/api/sessions?since=-9223372036854775808-01-01",
        "/api/stats?since=99999999999999999999999d",
        "/api/sessions?limit=18446744073709551616",
        "/api/sessions?limit=-1",
        "/api/sessions/%ff/messages",
        "/api/sessions?sort=%00",
        // Bytes that are not UTF-8 in a query are refused, as in a path.
        "/api/search?q=%ff%fe",
    ] {
        let (status, body) = server.get(path);
        assert!(
            status == 400 || status == 404,
            "GET {path}: {status} {body}"
        );
        assert!(body["error"].is_string(), "GET {path}: {body}");
    }
}

#[test]
fn serve_refuses_clearly() {
    let env = Env::new();
    // No database: said so, and none is created (serve never writes).
    let err = env.fails(&["serve", "--addr", "127.0.0.1:0"]);
    assert!(err.contains("no database at"), "{err}");
    assert!(!env.db.exists());

    seed(&env);
    let err = env.fails(&["serve", "--addr", "0.0.0.0:0"]);
    assert!(
        err.contains("not a loopback address") && err.contains("--token"),
        "{err}"
    );
    let err = env.fails(&["serve", "--addr", "127.0.0.1:0", "--token", "two words"]);
    assert!(err.contains("token"), "{err}");
    // Not host:port at all is a usage error (user_pass2.rs); a host that does not resolve
    // is found when binding.
    let err = env.fails(&["serve", "--addr", "no-such-host.invalid:0"]);
    assert!(err.contains("invalid address"), "{err}");

    let taken = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = taken.local_addr().unwrap().to_string();
    let err = env.fails(&["serve", "--addr", &addr]);
    assert!(err.contains("already in use"), "{err}");

    let not_db = env.path("notes.txt");
    std::fs::write(&not_db, "plain text").unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_scribe"))
        .arg("--db")
        .arg(&not_db)
        .args(["serve", "--addr", "127.0.0.1:0"])
        .output()
        .unwrap();
    // Why, with the file named once (before: "cannot open database X: X is not …").
    let err = stderr(&out);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(err.contains("is not a scribe database"), "{err}");
    assert_eq!(err.matches(not_db.to_str().unwrap()).count(), 1, "{err}");
    // A reason that does not name the database (an unreachable server): the location is
    // named once, before it.
    let nowhere = "host=127.0.0.1 port=1 user=me dbname=scribe connect_timeout=5";
    let out = Command::new(env!("CARGO_BIN_EXE_scribe"))
        .args(["--db", nowhere, "serve", "--addr", "127.0.0.1:0"])
        .output()
        .unwrap();
    let err = stderr(&out);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(
        err.starts_with(&format!("scribe: cannot open database {nowhere}: "))
            && err.contains("cannot reach the database server at 127.0.0.1:1"),
        "{err}"
    );
    assert_eq!(err.matches(nowhere).count(), 1, "{err}");
}
