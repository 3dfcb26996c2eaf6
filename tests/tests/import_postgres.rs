//! The history importers' store side on PostgreSQL: every fixture of every source imported
//! into a PostgreSQL store gives exactly what the same import gives on SQLite (sessions with
//! their usage and lineage, messages with their parts), and a second import changes nothing.
//!
//! The sources themselves are files (and the SQLite databases OpenCode and Hermes keep);
//! only the Scribe store differs. PostgreSQL only: run under `.ci/with-postgres … --ignored`
//! (the importer's own suite covers SQLite).

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::Path;
use std::sync::Arc;

use scribe_db::Database;
use scribe_import::sink::StoreSink;
use scribe_import::{Env, Options, Source, SourceSummary, import, sources};
use scribe_message::MessageService;
use scribe_session::{SessionFilter, SessionService, Store};
use scribe_tests::{Backend, TestDb};

#[path = "../../crates/import/tests/common/fixture_home.rs"]
mod fixture_home;

use fixture_home::home;

fn import_all(db: &Arc<Database>, home: &Path) -> Vec<SourceSummary> {
    let env = Env {
        home: Some(home.to_owned()),
        vars: Default::default(),
    };
    Source::ALL
        .into_iter()
        .map(|source| {
            let roots = sources::importer(source).default_roots(&env);
            let mut sink = StoreSink::new(Store::new(Arc::clone(db)));
            import(
                &mut sink,
                sources::importer(source),
                &roots,
                &Options::default(),
                &mut |_| {},
            )
            .unwrap()
        })
        .collect()
}

/// Everything stored in `db` for the sessions `ids`, as text.
fn dump(db: &Arc<Database>, ids: &[String]) -> String {
    let sessions = SessionService::new(Arc::clone(db));
    let messages = MessageService::new(Arc::clone(db));
    let round = |x: f64| (x * 1e9).round() / 1e9;
    let mut out = String::new();
    for id in ids {
        let mut s = sessions.get(id).unwrap();
        // Sums of float costs depend on the order they were added in.
        s.estimated_cost_usd = round(s.estimated_cost_usd);
        s.actual_cost_usd = s.actual_cost_usd.map(round);
        out.push_str(&format!("{s:?}\n"));
        for m in messages.list(id).unwrap() {
            out.push_str(&format!("  {m:?}\n"));
        }
    }
    out
}

#[test]
#[ignore = "needs PostgreSQL: run under .ci/with-postgres"]
fn every_fixture_imports_into_postgres_as_into_sqlite_and_twice_changes_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let home = home(dir.path());
    // Hermes' auxiliary calls (v22+), which become child sessions.
    rusqlite::Connection::open(home.join(".hermes/state.db"))
        .unwrap()
        .execute_batch(
            "CREATE TABLE session_model_usage (
                session_id TEXT NOT NULL, model TEXT NOT NULL, task TEXT NOT NULL DEFAULT '',
                api_call_count INTEGER NOT NULL DEFAULT 0, input_tokens INTEGER NOT NULL DEFAULT 0,
                output_tokens INTEGER NOT NULL DEFAULT 0, estimated_cost_usd REAL NOT NULL DEFAULT 0,
                first_seen REAL, last_seen REAL);
             INSERT INTO session_model_usage VALUES
               ('20260101_100000_a1b2c3', 'gpt-4o-mini', 'title_generation', 1, 200, 10, 0.0004,
                1767261605, 1767261605),
               ('20260101_100000_a1b2c3', 'gemini-2.5-flash', 'compression', 1, 5000, 300, 0,
                1767262150, 1767262150);",
        )
        .unwrap();

    let sqlite = TestDb::new(Backend::Sqlite);
    let on_sqlite = import_all(&sqlite.db, &home);
    // The session ids, from SQLite (a filtered list runs there).
    let mut ids: Vec<String> = SessionService::new(Arc::clone(&sqlite.db))
        .list(&SessionFilter {
            limit: None,
            ..SessionFilter::default()
        })
        .unwrap()
        .into_iter()
        .map(|s| s.id)
        .collect();
    ids.sort();
    assert!(ids.len() > 10, "the fixtures hold more sessions: {ids:?}");
    for aux in [
        "title_generation:gpt-4o-mini",
        "compression:gemini-2.5-flash",
    ] {
        let id = format!("20260101_100000_a1b2c3:{aux}");
        assert!(ids.contains(&id), "{id} in {ids:?}");
    }

    let postgres = TestDb::new(Backend::Postgres);
    let on_postgres = import_all(&postgres.db, &home);
    for (s, p) in on_sqlite.iter().zip(&on_postgres) {
        assert_eq!(s.written, p.written, "{}", s.source);
        assert_eq!(s.records, p.records, "{}", s.source);
        assert!(p.malformed.is_empty(), "{}: {:?}", p.source, p.malformed);
    }
    let expected = dump(&sqlite.db, &ids);
    let got = dump(&postgres.db, &ids);
    if got != expected {
        let at = got
            .lines()
            .zip(expected.lines())
            .position(|(g, e)| g != e)
            .unwrap_or(0);
        panic!(
            "PostgreSQL stored something else, first at line {at}:\n postgres: {}\n   sqlite: {}",
            got.lines().nth(at).unwrap_or(""),
            expected.lines().nth(at).unwrap_or("")
        );
    }

    for s in import_all(&postgres.db, &home) {
        assert_eq!(s.files_read, 0, "{}: every file is unchanged", s.source);
        assert_eq!(s.written, Default::default(), "{}", s.source);
    }
    assert_eq!(dump(&postgres.db, &ids), expected);

    // Usage stored without a price is priced alike on both once its price is known.
    let mut catalog = scribe_agent::models::ModelCatalog::builtin();
    for id in ["gpt-5.6-luna", "fake-model"] {
        catalog
            .insert(scribe_agent::models::Model {
                id: id.to_owned(),
                provider: "test".to_owned(),
                name: id.to_owned(),
                context_window: 100_000,
                max_output_tokens: 1_000,
                pricing: scribe_agent::models::Pricing {
                    input_per_mtok: 3.0,
                    output_per_mtok: 7.0,
                    cache_write_per_mtok: 3.0,
                    cache_read_per_mtok: 0.5,
                    long_prompt: None,
                },
            })
            .unwrap();
    }
    let options = Options {
        pricer: scribe_import::pricing::Pricer::new(catalog),
        ..Options::default()
    };
    let env = Env {
        home: Some(home.clone()),
        vars: Default::default(),
    };
    let roots = sources::importer(Source::Codex).default_roots(&env);
    let repriced: Vec<_> = [&sqlite.db, &postgres.db]
        .into_iter()
        .map(|db| {
            let mut sink = StoreSink::new(Store::new(Arc::clone(db)));
            import(
                &mut sink,
                sources::importer(Source::Codex),
                &roots,
                &options,
                &mut |_| {},
            )
            .unwrap()
            .repriced
        })
        .collect();
    assert_eq!(repriced[0].messages, 3, "{repriced:?}");
    assert_eq!(repriced[0].sessions, repriced[1].sessions);
    assert_eq!(repriced[0].messages, repriced[1].messages);
    assert!((repriced[0].cost_usd - repriced[1].cost_usd).abs() < 1e-12);
    assert_eq!(dump(&postgres.db, &ids), dump(&sqlite.db, &ids));
}
