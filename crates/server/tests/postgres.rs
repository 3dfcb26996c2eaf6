//! `scribe serve` on PostgreSQL. The fixture is copied into a fresh PostgreSQL database
//! (`scribe_db::copy`); then every query of `sql/queries/server.sql` (with its per-dialect
//! overrides) and the list previews answer as on SQLite, the whole HTTP API answers as the
//! same server over the SQLite file, and live updates follow writes by another process and
//! another handle (PostgreSQL's change notifications). Needs a server: run under
//! `.ci/with-postgres` with `--ignored`.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::collections::BTreeSet;

use common::*;
use scribe_db::queries as q;
use scribe_db::{Backend, Database, ReadTx};
use serde_json::json;

/// A fresh, empty database named `name` on the test server, opened (and migrated).
fn fresh(name: &str) -> Database {
    Database::open(scribe_db::testing::fresh_test_database(name).unwrap()).unwrap()
}

/// Everything the server asks through `tx.q()`, as text (costs rounded: sums may add in
/// another order).
fn answers(tx: &mut ReadTx<'_>, ids: &[&str]) -> scribe_db::Result<Vec<String>> {
    let mut out = Vec::new();
    for since in [i64::MIN, T0 - 3 * DAY] {
        // In no order: sorted.
        let mut carried = Vec::new();
        for r in tx.q().message_usage_since(since)? {
            carried.push(format!(
                "messages {since} {} {} {:?} {} {} {} {} {} {} {:.9}",
                r.session_id,
                r.hour,
                r.model,
                r.message_count,
                r.input_tokens,
                r.output_tokens,
                r.cache_read_tokens,
                r.cache_write_tokens,
                r.reasoning_tokens,
                r.cost_usd
            ));
        }
        carried.sort();
        out.extend(carried);
        for r in tx.q().own_usage_since(since)? {
            out.push(format!(
                "own {since} {} {:?} {} {} {} {} {} {} {} {} {:.9} {}",
                r.id,
                r.model,
                r.source,
                r.hour,
                r.input_tokens,
                r.output_tokens,
                r.cache_read_tokens,
                r.cache_write_tokens,
                r.reasoning_tokens,
                r.api_call_count,
                r.estimated_cost_usd,
                r.unpriced
            ));
        }
    }
    for r in tx.q().list_source_choices(500)? {
        out.push(format!("source choice {} {}", r.value, r.sessions));
    }
    for r in tx.q().list_model_choices(500)? {
        out.push(format!("model choice {} {}", r.value, r.sessions));
    }
    for r in tx.q().list_directory_choices(500)? {
        out.push(format!("directory choice {} {}", r.value, r.sessions));
    }
    for r in tx.q().count_child_sessions(ids)? {
        out.push(format!("children {} {}", r.parent_id, r.children));
    }
    for r in tx
        .q()
        .list_session_previews(&q::ListSessionPreviewsParams {
            max_chars: 400,
            session_ids: ids,
        })?
    {
        out.push(format!("preview {} {}", r.session_id, r.text));
    }
    Ok(out)
}

#[test]
#[ignore = "needs PostgreSQL: run under .ci/with-postgres"]
fn the_server_queries_answer_the_same_on_postgres() {
    let f = fixture();
    let sqlite = Database::open(&f.db).unwrap();
    let pg = fresh("scribe_server_queries");
    assert_eq!(pg.backend(), Backend::Postgres);
    scribe_db::copy::copy(&sqlite, &pg, |_| std::ops::ControlFlow::Continue(())).unwrap();

    let ids = [
        f.main.as_str(),
        f.task.as_str(),
        f.long.as_str(),
        f.archived.as_str(),
        f.telegram.as_str(),
    ];
    let on_sqlite = sqlite.read(|tx| answers(tx, &ids)).unwrap();
    let on_pg = pg.read(|tx| answers(tx, &ids)).unwrap();
    // Not vacuous: every query answered something.
    for what in [
        "messages ",
        "own ",
        "source choice",
        "model choice",
        "directory choice",
        "children",
        "preview",
    ] {
        assert!(
            on_sqlite.iter().any(|line| line.starts_with(what)),
            "{what}: {on_sqlite:#?}"
        );
    }
    assert_eq!(on_sqlite, on_pg);
}

/// A copy of the fixture on the test server, named `name`: (fixture, its SQLite file's
/// database, the PostgreSQL connection string).
fn fixture_on_postgres(name: &str) -> (Fixture, String) {
    let f = fixture();
    let url = scribe_db::testing::fresh_test_database(name).unwrap();
    let sqlite = Database::open(&f.db).unwrap();
    let pg = Database::open(&url).unwrap();
    scribe_db::copy::copy(&sqlite, &pg, |_| std::ops::ControlFlow::Continue(())).unwrap();
    (f, url)
}

/// `scribe serve --db postgres://…`: every endpoint answers over HTTP exactly as the
/// same server does over the SQLite file the store was copied from (search: the same
/// hits; its ranks may differ, see ARCHITECTURE.md), and errors are the same.
#[test]
#[ignore = "needs PostgreSQL: run under .ci/with-postgres"]
fn the_api_answers_on_postgres_as_on_sqlite() {
    let (f, url) = fixture_on_postgres("scribe_server_api");
    let on_sqlite = serve(&f.db, None);
    let on_pg = serve(std::path::Path::new(&url), None);
    let paths = [
        "/api/sessions".to_owned(),
        "/api/sessions?sort=cost&limit=3".to_owned(),
        "/api/sessions?sort=active&archived=include".to_owned(),
        "/api/sessions?archived=only".to_owned(),
        "/api/sessions?source=telegram".to_owned(),
        "/api/sessions?q=build".to_owned(),
        format!("/api/sessions?parent={}", f.main),
        format!("/api/sessions/{}", f.main),
        format!("/api/sessions/{}", f.task),
        format!("/api/sessions/{}/messages", f.main),
        format!("/api/sessions/{}/messages?limit=100", f.long),
        format!("/api/sessions/{}/messages?tail=1&limit=10", f.long),
        format!(
            "/api/sessions/{}/messages?from={}&limit=5",
            f.long, f.long_messages[120]
        ),
        format!(
            "/api/sessions/{}/messages?from=msg_gone&missing=first",
            f.main
        ),
        format!("/api/parts/prt_{}_3", f.main_messages[1]),
        "/api/stats".to_owned(),
        "/api/stats?by=day".to_owned(),
        "/api/stats?by=source&since=2026-01-05".to_owned(),
        "/api/usage".to_owned(),
        "/api/usage?stack=source&since=2026-01-05".to_owned(),
        "/api/filters".to_owned(),
        "/api/version".to_owned(),
    ];
    for path in &paths {
        let (a, b) = (get(on_sqlite.addr, path), get(on_pg.addr, path));
        assert_eq!(b.status, 200, "GET {path} on PostgreSQL: {}", b.text());
        assert_eq!(a.status, 200, "GET {path} on SQLite: {}", a.text());
        assert_eq!(a.json(), b.json(), "GET {path}");
    }
    // The keyset cursor of one backend pages the other's list the same way.
    let first = get_json(on_pg.addr, "/api/sessions?sort=cost&limit=3");
    let next = first["next"].as_str().unwrap();
    let path = format!("/api/sessions?sort=cost&limit=3&after={next}");
    assert_eq!(get_json(on_pg.addr, &path), get_json(on_sqlite.addr, &path));

    // Search finds the same messages (all of them, on one page: equal ranks may come
    // in another order).
    let hit_ids = |addr, q: &str| -> BTreeSet<String> {
        get_json(addr, &format!("/api/search?q={q}&limit=500"))["hits"]
            .as_array()
            .unwrap()
            .iter()
            .map(|h| h["message_id"].as_str().unwrap().to_owned())
            .collect()
    };
    for q in [
        "build",
        "long%20conversation",
        "weather",
        "nothing-matches-this",
    ] {
        assert_eq!(hit_ids(on_pg.addr, q), hit_ids(on_sqlite.addr, q), "q={q}");
    }
    assert!(!hit_ids(on_pg.addr, "build").is_empty());

    // Failures answer alike.
    for path in [
        "/api/sessions/ses_nope",
        "/api/sessions/ses_main/messages?from=msg_nope",
        "/api/sessions?sort=sideways",
        "/api/nope",
    ] {
        let (a, b) = (get(on_sqlite.addr, path), get(on_pg.addr, path));
        assert!(a.status >= 400, "GET {path}: {}", a.status);
        assert_eq!((a.status, a.json()), (b.status, b.json()), "GET {path}");
    }
    // Read-only: nothing but GET and HEAD.
    let reply = request(on_pg.addr, "POST", "/api/sessions", &[], Some(b"{}")).unwrap();
    assert_eq!(reply.status, 405);
}

/// Not a test of its own: the writer process `live_updates_follow_writers_on_postgres`
/// starts (this test binary again, with `SCRIBE_TEST_WRITE` set). Run without it (as
/// `--ignored` runs every ignored test), it has nothing to do.
#[test]
#[ignore = "helper: run as a separate writer process by live_updates_follow_writers_on_postgres"]
fn writer_process() {
    if std::env::var_os("SCRIBE_TEST_WRITE").is_some() {
        assert!(writer_main());
    }
}

/// Live updates on PostgreSQL come from its change outbox (`Database::listen`):
/// the event stream reports a change, and `/api/version` moves, when another process
/// appends a message, and again when a second `Database` in this process does; the new
/// message is then on the page.
#[test]
#[ignore = "needs PostgreSQL: run under .ci/with-postgres"]
fn live_updates_follow_writers_on_postgres() {
    let (f, url) = fixture_on_postgres("scribe_server_live");
    let server = serve(std::path::Path::new(&url), None);
    let (_, mut next_line) = events(server.addr);
    assert!(next_line().starts_with("data: {\"version\":"));
    assert_eq!(get_json(server.addr, "/api/version"), json!({"version": 0}));
    let last_text = |addr| {
        get_json(
            addr,
            &format!("/api/sessions/{}/messages?tail=1&limit=1", f.main),
        )["messages"][0]["parts"][0]["part"]["text"]
            .clone()
    };

    // Another process (another host, as far as PostgreSQL can tell) appends a message.
    write_elsewhere(
        std::path::Path::new(&url),
        &f.main,
        "written by another process",
    );
    wait_for_change(&mut next_line);
    let seen = get_json(server.addr, "/api/version")["version"]
        .as_u64()
        .unwrap();
    assert!(seen >= 1);
    assert_eq!(last_text(server.addr), json!("written by another process"));

    // A second handle in this process: the same.
    append_message(
        std::path::Path::new(&url),
        &f.main,
        "written by a second handle",
    );
    wait_for_change(&mut next_line);
    assert!(
        get_json(server.addr, "/api/version")["version"]
            .as_u64()
            .unwrap()
            > seen
    );
    assert_eq!(last_text(server.addr), json!("written by a second handle"));
}

/// Starting on PostgreSQL fails clearly: a database with no Scribe schema (never
/// migrated; the viewer opens read-only and migrates nothing) and an unreachable server
/// are errors naming the location, never its password.
#[test]
#[ignore = "needs PostgreSQL: run under .ci/with-postgres"]
fn starting_on_postgres_fails_clearly() {
    use scribe_server::{Config, ServeError, Server};
    let bind = |db: &str| {
        Server::bind(Config {
            db: db.into(),
            addr: "127.0.0.1:0".to_owned(),
            token: None,
        })
    };
    let empty = scribe_db::testing::fresh_test_database("scribe_server_empty").unwrap();
    let err = bind(&empty).unwrap_err();
    assert!(matches!(err, ServeError::Open { .. }), "{err}");
    assert!(err.to_string().contains("scribe_server_empty"), "{err}");

    let err = bind("postgres://nobody:secret@127.0.0.1:1/scribe").unwrap_err();
    assert!(matches!(err, ServeError::Open { .. }), "{err}");
    let text = format!("{err} {:?}", std::error::Error::source(&err));
    assert!(
        !text.contains("secret"),
        "the password is never shown: {text}"
    );
    assert!(text.contains("127.0.0.1:1"), "{text}");
}

/// A part with a 5 MB string and one with fifty 100 KB strings, on PostgreSQL: cut in the
/// database as on SQLite (`common::check_cut_parts`: at the cap, whole characters, within
/// the part's budget, `full_bytes` exact, `/api/parts/{id}` whole), and the page is the
/// same document as the SQLite file's it was copied from.
#[test]
#[ignore = "needs PostgreSQL: run under .ci/with-postgres"]
fn big_strings_are_cut_in_the_database_on_postgres() {
    let dir = tempfile::tempdir().unwrap();
    let db = cut_parts_store(dir.path());
    let url = scribe_db::testing::fresh_test_database("scribe_server_cut").unwrap();
    let sqlite = Database::open(&db).unwrap();
    let pg = Database::open(&url).unwrap();
    scribe_db::copy::copy(&sqlite, &pg, |_| std::ops::ControlFlow::Continue(())).unwrap();
    let on_pg = serve(std::path::Path::new(&url), None);
    let on_sqlite = serve(&db, None);
    let page = check_cut_parts(on_pg.addr);
    assert_eq!(page, check_cut_parts(on_sqlite.addr));
}

/// A NUL in a string cut on PostgreSQL is a space (the walk reads the document without
/// its NUL escapes, V24), where SQLite keeps it (tests/api.rs); the part whole keeps it.
#[test]
#[ignore = "needs PostgreSQL: run under .ci/with-postgres"]
fn a_cut_string_reads_its_nul_as_a_space_on_postgres() {
    let dir = tempfile::tempdir().unwrap();
    let output = format!("a\0b{}", "é".repeat(40_000));
    let db = big_output_store(dir.path(), &output);
    let url = scribe_db::testing::fresh_test_database("scribe_server_cut_nul").unwrap();
    let sqlite = Database::open(&db).unwrap();
    let pg = Database::open(&url).unwrap();
    scribe_db::copy::copy(&sqlite, &pg, |_| std::ops::ControlFlow::Continue(())).unwrap();
    let server = serve(std::path::Path::new(&url), None);
    let page = get_json(server.addr, "/api/sessions/ses_big/messages");
    let sent = page["messages"][1]["parts"][0]["part"]["state"]["output"]
        .as_str()
        .unwrap();
    let spaced = output.replace('\0', " ");
    assert_eq!(sent, head_of(&spaced, scribe_server::json::PART_TEXT_CAP));
    let whole = get_json(server.addr, "/api/parts/prt_msg_big_2_0");
    assert_eq!(whole["part"]["state"]["output"], json!(output));
}
