//! The server reads through the generated traits (`tx.q()`), so its queries must answer the
//! same on PostgreSQL as on SQLite: the fixture is copied into a fresh PostgreSQL database
//! (`scribe_db::copy`) and every query of `sql/queries/server.sql` (with its per-dialect
//! overrides) and the list previews run on both. Needs a server: run under
//! `.ci/with-postgres` with `--ignored`.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use common::*;
use scribe_db::queries as q;
use scribe_db::{Backend, Database, ReadTx};

/// A fresh, empty database named `name` on the test server, opened (and migrated).
fn fresh(name: &str) -> Database {
    Database::open(scribe_db::testing::fresh_test_database(name).unwrap()).unwrap()
}

/// Everything the server asks through `tx.q()`, as text (costs rounded: sums may add in
/// another order).
fn answers(tx: &mut ReadTx<'_>, ids: &[&str]) -> scribe_db::Result<Vec<String>> {
    let mut out = Vec::new();
    for since in [i64::MIN, T0 - 3 * DAY] {
        for r in tx.q().usage_by_day_and_model_since(since)? {
            out.push(format!(
                "model {since} {} {} {} {} {} {} {} {} {} {:.9}",
                r.day,
                r.key,
                r.session_count,
                r.input_tokens,
                r.output_tokens,
                r.cache_read_tokens,
                r.cache_write_tokens,
                r.reasoning_tokens,
                r.api_call_count,
                r.estimated_cost_usd
            ));
        }
        for r in tx.q().usage_by_day_and_source_since(since)? {
            out.push(format!(
                "source {since} {} {} {} {} {} {} {} {} {} {:.9}",
                r.day,
                r.key,
                r.session_count,
                r.input_tokens,
                r.output_tokens,
                r.cache_read_tokens,
                r.cache_write_tokens,
                r.reasoning_tokens,
                r.api_call_count,
                r.estimated_cost_usd
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
    scribe_db::copy::copy(&sqlite, &pg, |_| {}).unwrap();

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
        "model ",
        "source ",
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
