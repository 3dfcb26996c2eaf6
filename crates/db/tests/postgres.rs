//! The PostgreSQL backend against a real server: opening (and every way it can fail),
//! migrations run once by processes starting together, SERIALIZABLE writes retried whole,
//! ambiguous commits reported, snapshot reads, TLS, two processes acting as two hosts, and
//! change notifications across connections.
//!
//! Every test here needs a server: run
//! `.ci/with-postgres cargo test -p scribe-db --features postgres --test postgres -- --ignored`
//! (`.ci/run` does). Without one they are listed as ignored, never passed.
#![cfg(feature = "postgres")]
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::process::Command;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Barrier, Mutex};
use std::time::Duration;

use common::{new_session, text};
use scribe_db::events::{ChangeOp, Notice};
use scribe_db::ids::{Prefix, new_id};
use scribe_db::queries::{self as q, Queries};
use scribe_db::testing::incompressible;
use scribe_db::{Backend, Database, Error, ErrorKind, Options, now_ms};
use scribe_pubsub::{Broker, RecvTimeoutError};

const NEEDS: &str = "SCRIBE_TEST_POSTGRES is unset: run under .ci/with-postgres";

fn server() -> String {
    std::env::var("SCRIBE_TEST_POSTGRES").expect(NEEDS)
}

/// A fresh, empty database named `name` on the test server; its connection string.
fn fresh(name: &str) -> String {
    scribe_db::testing::fresh_test_database(name).unwrap()
}

fn admin(url: &str) -> postgres::Client {
    postgres::Client::connect(url, postgres::NoTls).unwrap()
}

fn create_session(db: &Database) -> String {
    let id = new_id(Prefix::Session);
    db.write(|tx| tx.q().create_session(&new_session(&id, "cli")))
        .unwrap();
    id
}

fn message_with_part(q: &mut dyn Queries, session_id: &str, body: &str) -> scribe_db::Result<()> {
    let (message_id, part_id, now) = (new_id(Prefix::Message), new_id(Prefix::Part), now_ms());
    q.create_message(&scribe_db::testing::bare_message(
        &message_id,
        session_id,
        "user",
        now,
    ))?;
    q.create_part(&q::CreatePartParams {
        id: &part_id,
        message_id: &message_id,
        session_id,
        position: 0,
        r#type: "text",
        data: &text(body),
        created_at: now,
        updated_at: now,
    })
}

fn usage(id: &str, tokens: i64) -> q::AddSessionUsageDeltaParams<'_> {
    q::AddSessionUsageDeltaParams {
        input_tokens: tokens,
        output_tokens: 0,
        cache_read_tokens: 0,
        cache_write_tokens: 0,
        reasoning_tokens: 0,
        api_call_count: 1,
        tool_call_count: 0,
        estimated_cost_usd: 0.25,
        now: now_ms(),
        id,
    }
}

#[test]
#[ignore = "needs PostgreSQL: run under .ci/with-postgres"]
fn opens_migrates_once_and_reopens_without_migrating() {
    let url = fresh("scribe_open");
    let db = Database::open(&url).unwrap();
    assert_eq!(db.backend(), Backend::Postgres);
    let report = db.migration_report().clone();
    assert_eq!(report.from, 0);
    assert_eq!(report.to, Database::known_schema_version());
    assert!(!report.applied.is_empty());
    assert_eq!(
        db.schema_version().unwrap(),
        Database::known_schema_version()
    );
    let s = create_session(&db);
    drop(db);

    // A URL opens the same database; nothing left to apply.
    let again = Database::open(&url).unwrap();
    assert!(again.migration_report().applied.is_empty());
    let info = again.info().unwrap();
    assert_eq!(info.schema_version, Database::known_schema_version());
    assert_eq!(info.tables[0].table, "sessions");
    assert_eq!(info.tables[0].rows, 1);
    let row = again.read(|tx| tx.q().get_session(&s)).unwrap().unwrap();
    assert_eq!(row.id, s);
    assert!(!again.location().contains("password"));
}

#[test]
#[ignore = "needs PostgreSQL: run under .ci/with-postgres"]
fn an_older_schema_is_migrated_and_a_newer_one_refused() {
    let url = fresh("scribe_versions");
    let old = Database::open_at_version(&url, 3).unwrap();
    assert_eq!(old.schema_version().unwrap(), 3);
    drop(old);

    // Read-only never migrates: the older schema is reported.
    let read_only = Options {
        read_only: true,
        ..Options::default()
    };
    let err = Database::open_with(&url, read_only.clone()).unwrap_err();
    assert!(
        matches!(err, Error::SchemaTooOld { found: 3, .. }),
        "{err:?}"
    );

    let db = Database::open(&url).unwrap();
    assert_eq!(db.migration_report().from, 3);
    assert_eq!(
        db.schema_version().unwrap(),
        Database::known_schema_version()
    );
    drop(db);
    let ro = Database::open_with(&url, read_only).unwrap();
    let err = ro.write(|tx| tx.q().count_sessions()).unwrap_err();
    assert!(matches!(err, Error::ReadOnly { .. }), "{err:?}");
    assert_eq!(ro.read(|tx| tx.q().count_sessions()).unwrap(), 0);

    admin(&url)
        .batch_execute(
            "INSERT INTO refinery_schema_history (version, name, applied_on, checksum) \
             VALUES (99, 'future', '2100-01-01T00:00:00Z', '1')",
        )
        .unwrap();
    let err = Database::open(&url).unwrap_err();
    assert!(
        matches!(err, Error::SchemaTooNew { found: 99, .. }),
        "{err:?}"
    );
    assert!(err.to_string().contains("upgrade scribe"), "{err}");
}

/// The usage from a time on (`scribe statusline`, `stats --since`) reads the messages that
/// carry usage through their time index (V29), as on SQLite: the planner can answer both
/// queries with it (sequential scans priced out, so a small table's cheaper scan does not
/// hide an index the queries cannot use).
#[test]
#[ignore = "needs PostgreSQL: run under .ci/with-postgres"]
fn usage_since_a_time_reads_the_messages_by_their_time_index() {
    let url = fresh("scribe_usage_index");
    drop(Database::open(&url).unwrap());
    let mut client = admin(&url);
    for sql in [
        q::postgres::OWN_USAGE_SINCE_SQL,
        q::postgres::MESSAGE_USAGE_SINCE_SQL,
    ] {
        let plan = plan_without_seq_scan(&mut client, sql, &[&1_i64], "messages");
        assert!(
            plan.iter()
                .any(|step| step.contains("on messages_usage_created")
                    || step.contains("using messages_usage_created on messages u")),
            "{plan:#?}"
        );
    }
}

/// The plan of `sql` with sequential scans priced out (so a small table's cheaper scan does
/// not hide an index the query cannot use), one line a step, and that it reads `table`
/// without one all the same.
fn plan_without_seq_scan(
    client: &mut postgres::Client,
    sql: &str,
    params: &[&(dyn postgres::types::ToSql + Sync)],
    table: &str,
) -> Vec<String> {
    client.batch_execute("SET enable_seqscan = off").unwrap();
    let plan: Vec<String> = client
        .query(&format!("EXPLAIN {sql}"), params)
        .unwrap()
        .iter()
        .map(|row| row.get(0))
        .collect();
    assert!(
        !plan
            .iter()
            .any(|step| step.contains(&format!("Seq Scan on {table}"))),
        "{plan:#?}"
    );
    plan
}

/// The highest number of a title lineage is a seek in V31's index, as on SQLite (the query
/// repeats the index's expressions; sequential scans priced out, so a small table's
/// cheaper scan does not hide an index the query cannot use).
#[test]
#[ignore = "needs PostgreSQL: run under .ci/with-postgres"]
fn the_highest_number_of_a_title_lineage_is_one_index_seek() {
    let url = fresh("scribe_title_lineage_index");
    drop(Database::open(&url).unwrap());
    let plan = plan_without_seq_scan(
        &mut admin(&url),
        q::postgres::MAX_TITLE_LINEAGE_NUMBER_SQL,
        &[&"t"],
        "sessions",
    );
    assert!(
        plan.iter()
            .any(|step| step.contains("using sessions_title_lineage on sessions")),
        "{plan:#?}"
    );
}

/// The two statements whose generic plan, made while `sessions` held a few rows, went on
/// reading every session as the table grew (the lineage's highest number, the bulk path's
/// counters) are `custom_plan`: never prepared, even through a statement cache, so each
/// call is planned for the table as it is then. Other statements are prepared once.
#[test]
#[ignore = "needs PostgreSQL: run under .ci/with-postgres"]
fn the_statements_a_growing_table_outgrows_are_planned_per_call() {
    use q::ReadQueries;
    let url = fresh("scribe_custom_plans");
    drop(Database::open(&url).unwrap());
    let mut client = admin(&url);
    let mut statements = q::postgres::Statements::default();
    let mut queries = q::postgres::PgQueries::cached(&mut client, &mut statements);
    for _ in 0..7 {
        assert_eq!(queries.max_title_lineage_number("t").unwrap(), 0);
        queries.add_session_counts("{}").unwrap();
        assert_eq!(queries.get_session("ses_none").unwrap(), None);
    }
    assert_eq!(statements.len(), 1, "{statements:?}");
    let prepared: Vec<String> = client
        .query_typed("SELECT statement FROM pg_prepared_statements", &[])
        .unwrap()
        .iter()
        .map(|row| row.get(0))
        .collect();
    assert_eq!(prepared, [q::postgres::GET_SESSION_SQL]);
}

/// What the current schema holds: its relations (tables, indexes, sequences, views) and
/// functions, by name.
fn schema_objects(url: &str) -> Vec<String> {
    admin(url)
        .query(
            "SELECT c.relname::text FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
             WHERE n.nspname = current_schema()
             UNION ALL
             SELECT p.proname::text || '()' FROM pg_proc p
             JOIN pg_namespace n ON n.oid = p.pronamespace WHERE n.nspname = current_schema()
             ORDER BY 1",
            &[],
        )
        .unwrap()
        .iter()
        .map(|r| r.get(0))
        .collect()
}

/// A database whose schema holds another program's tables and no Scribe schema history is
/// refused as an SQLite file of another program is (`Error::ForeignDatabase`), by every
/// way of opening it, before anything is written: its schema is left as it was. (Before,
/// `Database::open` ran every migration into it.)
#[test]
#[ignore = "needs PostgreSQL: run under .ci/with-postgres"]
fn another_programs_database_is_refused_and_left_untouched() {
    let url = fresh("scribe_foreign");
    admin(&url)
        .batch_execute("CREATE TABLE foo (id int PRIMARY KEY); INSERT INTO foo VALUES (1)")
        .unwrap();
    let before = schema_objects(&url);
    assert_eq!(before, ["foo", "foo_pkey"]);
    let read_only = Options {
        read_only: true,
        ..Options::default()
    };
    for err in [
        Database::open(&url).unwrap_err(),
        Database::open_existing(&url).unwrap_err(),
        Database::open_with(&url, read_only).unwrap_err(),
        Database::open_at_version(&url, 3).unwrap_err(),
    ] {
        assert!(
            matches!(
                err,
                Error::ForeignDatabase {
                    tables: 1,
                    backend: Backend::Postgres,
                    ..
                }
            ),
            "{err:?}"
        );
        let text = err.to_string();
        assert!(
            text.contains("is a PostgreSQL database of another program (1 table,"),
            "{text}"
        );
        assert_eq!(schema_objects(&url), before);
    }
    let rows: i64 = admin(&url)
        .query_one("SELECT count(*) FROM foo", &[])
        .unwrap()
        .get(0);
    assert_eq!(rows, 1);

    // Once the other program's table is gone, the empty database is Scribe's.
    admin(&url).batch_execute("DROP TABLE foo").unwrap();
    let db = Database::open(&url).unwrap();
    assert_eq!(
        db.schema_version().unwrap(),
        Database::known_schema_version()
    );
}

#[test]
#[ignore = "needs PostgreSQL: run under .ci/with-postgres"]
fn each_way_of_failing_to_connect_has_its_own_error() {
    let base = server();
    let err = Database::open("postgres://me:secret@localhost:notaport/db").unwrap_err();
    assert!(matches!(err, Error::InvalidLocation { .. }), "{err:?}");
    assert!(!err.to_string().contains("secret"), "{err}");

    // Nothing listens on port 1 of loopback.
    let err = Database::open("postgres://me@127.0.0.1:1/db?connect_timeout=5").unwrap_err();
    assert!(matches!(err, Error::Unreachable { .. }), "{err:?}");
    assert!(err.to_string().contains("127.0.0.1:1"), "{err}");
    let err = Database::open("host=/nonexistent/socket/dir user=me dbname=d").unwrap_err();
    assert!(matches!(err, Error::Unreachable { .. }), "{err:?}");

    let err = Database::open(format!("{base} dbname=no_such_db_here")).unwrap_err();
    assert!(
        matches!(err, Error::NoSuchDatabase { ref name, .. } if name == "no_such_db_here"),
        "{err:?}"
    );

    let err = Database::open(format!("{base} user=no_such_role")).unwrap_err();
    assert!(
        matches!(err, Error::AuthFailed { ref user, .. } if user == "no_such_role"),
        "{err:?}"
    );

    // scribe_pw logs in with a password (.ci/with-postgres's pg_hba.conf).
    let mut admin = admin(&base);
    admin
        .batch_execute(
            "DROP ROLE IF EXISTS scribe_pw; CREATE ROLE scribe_pw LOGIN PASSWORD 'right'",
        )
        .unwrap();
    let err = Database::open(format!("{base} user=scribe_pw password=badpass")).unwrap_err();
    assert!(matches!(err, Error::AuthFailed { .. }), "{err:?}");
    assert!(!err.to_string().contains("badpass"), "{err}");
    // With the right one, a database it owns is migrated by it (no superuser needed:
    // the extensions are trusted ones).
    fresh("scribe_pwdb");
    admin
        .batch_execute("ALTER DATABASE scribe_pwdb OWNER TO scribe_pw")
        .unwrap();
    let db = Database::open(format!(
        "{base} user=scribe_pw password=right dbname=scribe_pwdb"
    ))
    .unwrap();
    assert_eq!(
        db.schema_version().unwrap(),
        Database::known_schema_version()
    );
    let err = Database::open(format!("{base} user=scribe_pw")).unwrap_err();
    assert!(matches!(err, Error::AuthFailed { .. }), "{err:?}");
}

#[test]
#[ignore = "needs PostgreSQL: run under .ci/with-postgres"]
fn tls_is_used_and_verified_as_the_url_asks() {
    let tcp = std::env::var("SCRIBE_TEST_POSTGRES_TCP").expect(NEEDS);
    let ca = std::env::var("SCRIBE_TEST_POSTGRES_CA").expect("with-postgres made no certificate");
    fresh("scribe_tls");
    let ssl_in_use = |db: &Database| {
        // A session's own statement tells whether its connection is encrypted; the
        // generated queries don't ask that, so read it through pg_stat_ssl by pid.
        db.read(|tx| tx.q().count_sessions()).unwrap();
        let mut client = admin(&server());
        let rows = client
            .query(
                "SELECT ssl FROM pg_stat_ssl JOIN pg_stat_activity USING (pid) \
                 WHERE datname = 'scribe_tls' AND application_name = 'scribe'",
                &[],
            )
            .unwrap();
        rows.iter().map(|r| r.get::<_, bool>(0)).collect::<Vec<_>>()
    };
    let full = format!("{tcp} dbname=scribe_tls sslmode=verify-full sslrootcert={ca}");
    let db = Database::open(&full).unwrap();
    assert_eq!(ssl_in_use(&db), [true]);
    drop(db);
    let plain = Database::open(format!("{tcp} dbname=scribe_tls sslmode=disable")).unwrap();
    assert_eq!(ssl_in_use(&plain), [false]);
    drop(plain);
    // A Unix socket under the default `prefer` connects in plain text (the server offers
    // no TLS there), with no TLS connector built for it.
    let local = Database::open(format!("{} dbname=scribe_tls", server())).unwrap();
    assert_eq!(ssl_in_use(&local), [false]);
    drop(local);
    // The certificate names localhost, not 127.0.0.1: verify-full refuses, verify-ca
    // (the chain only) and require (no check) accept.
    let by_ip = tcp.replace("host=localhost", "host=127.0.0.1");
    let err = Database::open(format!(
        "{by_ip} dbname=scribe_tls sslmode=verify-full sslrootcert={ca}"
    ))
    .unwrap_err();
    assert!(matches!(err, Error::Tls { .. }), "{err:?}");
    Database::open(format!(
        "{by_ip} dbname=scribe_tls sslmode=verify-ca sslrootcert={ca}"
    ))
    .unwrap();
    Database::open(format!("{by_ip} dbname=scribe_tls sslmode=require")).unwrap();
    // Trusting only the system's roots, the self-signed certificate fails verification.
    let err = Database::open(format!("{tcp} dbname=scribe_tls sslmode=verify-full")).unwrap_err();
    assert!(matches!(err, Error::Tls { .. }), "{err:?}");
}

#[test]
#[ignore = "needs PostgreSQL: run under .ci/with-postgres"]
fn writes_commit_with_their_actions_and_failures_roll_back_whole() {
    let db = Database::open(fresh("scribe_write")).unwrap();
    let s = create_session(&db);
    let announced = Arc::new(Mutex::new(Vec::new()));
    db.write(|tx| -> scribe_db::Result<()> {
        message_with_part(tx.q(), &s, "hello")?;
        let announced = Arc::clone(&announced);
        tx.after_commit(move || announced.lock().unwrap().push("hello"));
        Ok(())
    })
    .unwrap();
    assert_eq!(*announced.lock().unwrap(), ["hello"]);
    let row = db.read(|tx| tx.q().get_session(&s)).unwrap().unwrap();
    assert_eq!(row.message_count, 1, "the counter trigger ran");

    // An error rolls everything back and drops the queue.
    let err = db
        .write(|tx| -> scribe_db::Result<()> {
            message_with_part(tx.q(), &s, "lost")?;
            let announced = Arc::clone(&announced);
            tx.after_commit(move || announced.lock().unwrap().push("lost"));
            message_with_part(tx.q(), "ses_missing", "no such session")
        })
        .unwrap_err();
    assert_eq!(err.kind(), ErrorKind::ForeignKeyViolation, "{err:?}");
    assert_eq!(*announced.lock().unwrap(), ["hello"]);
    let row = db.read(|tx| tx.q().get_session(&s)).unwrap().unwrap();
    assert_eq!(row.message_count, 1);

    // The other classifications, from the server's own codes.
    let err = db
        .write(|tx| tx.q().create_session(&new_session(&s, "cli")))
        .unwrap_err();
    assert_eq!(err.kind(), ErrorKind::UniqueViolation, "{err:?}");
    assert!(matches!(err, Error::Conflict { .. }));
    let bad = new_id(Prefix::Session);
    let err = db
        .write(|tx| {
            let mut params = new_session(&bad, "cli");
            params.kind = "not-a-kind";
            tx.q().create_session(&params)
        })
        .unwrap_err();
    assert_eq!(err.kind(), ErrorKind::CheckViolation, "{err:?}");
    assert_eq!(err.sqlstate(), Some("23514"));
}

#[test]
#[ignore = "needs PostgreSQL: run under .ci/with-postgres"]
fn a_closure_that_goes_on_after_a_failed_statement_does_not_commit_silently() {
    let db = Database::open(fresh("scribe_swallow")).unwrap();
    let s = create_session(&db);
    let err = db
        .write(|tx| -> scribe_db::Result<()> {
            message_with_part(tx.q(), &s, "kept?")?;
            // SQLite would carry on after this; PostgreSQL aborts the transaction.
            let _ = tx.q().create_session(&new_session(&s, "cli"));
            Ok(())
        })
        .unwrap_err();
    assert_eq!(err.sqlstate(), Some("25P02"), "{err:?}");
    assert!(err.to_string().contains("nothing was committed"), "{err}");
    let row = db.read(|tx| tx.q().get_session(&s)).unwrap().unwrap();
    assert_eq!(row.message_count, 0);
}

#[test]
#[ignore = "needs PostgreSQL: run under .ci/with-postgres"]
fn a_serialization_failure_reruns_the_whole_closure_with_an_empty_queue() {
    let db = Arc::new(Database::open(fresh("scribe_retry")).unwrap());
    let s = create_session(&db);
    let (read_done, other_done) = (Arc::new(Barrier::new(2)), Arc::new(Barrier::new(2)));
    let runs = AtomicUsize::new(0);
    let announced = Arc::new(Mutex::new(Vec::new()));
    let other = std::thread::spawn({
        let (db, s) = (Arc::clone(&db), s.clone());
        let (read_done, other_done) = (Arc::clone(&read_done), Arc::clone(&other_done));
        move || {
            read_done.wait();
            db.write(|tx| tx.q().add_session_usage_delta(&usage(&s, 5)))
                .unwrap();
            other_done.wait();
        }
    });
    db.write(|tx| -> scribe_db::Result<()> {
        let run = runs.fetch_add(1, Ordering::SeqCst) + 1;
        // Read-check-write: what SERIALIZABLE must protect.
        let before = tx.q().get_session(&s)?.map_or(0, |r| r.input_tokens);
        if run == 1 {
            // Let the other writer change the row we read, and commit, before we write.
            read_done.wait();
            other_done.wait();
        }
        let announced = Arc::clone(&announced);
        tx.after_commit(move || announced.lock().unwrap().push((run, before)));
        tx.q().add_session_usage_delta(&usage(&s, 1))?;
        Ok(())
    })
    .unwrap();
    other.join().unwrap();
    assert_eq!(runs.load(Ordering::SeqCst), 2, "the closure ran again");
    // Only the committed run's action ran, and it saw the other writer's tokens.
    assert_eq!(*announced.lock().unwrap(), [(2, 5)]);
    let row = db.read(|tx| tx.q().get_session(&s)).unwrap().unwrap();
    assert_eq!((row.input_tokens, row.api_call_count), (6, 2));
}

#[test]
#[ignore = "needs PostgreSQL: run under .ci/with-postgres"]
fn a_commit_whose_outcome_is_unknown_is_reported_and_never_retried() {
    let url = fresh("scribe_ambiguous");
    let db = Database::open(&url).unwrap();
    let s = create_session(&db);
    let mut killer = admin(&url);
    let mut runs = 0;
    let err = db
        .write(|tx| -> scribe_db::Result<()> {
            runs += 1;
            tx.q().add_session_usage_delta(&usage(&s, 7))?;
            // The connection dies before COMMIT's answer can arrive.
            killer
                .batch_execute(
                    "SELECT pg_terminate_backend(pid) FROM pg_stat_activity \
                     WHERE datname = current_database() AND application_name = 'scribe' \
                     AND state = 'idle in transaction'",
                )
                .unwrap();
            std::thread::sleep(Duration::from_millis(200));
            Ok(())
        })
        .unwrap_err();
    assert!(matches!(err, Error::CommitUnknown(_)), "{err:?}");
    assert_eq!(err.kind(), ErrorKind::CommitUnknown);
    assert_eq!(runs, 1, "an unknown commit is never retried");
    // The pool replaced the dead connection.
    let row = db.read(|tx| tx.q().get_session(&s)).unwrap().unwrap();
    assert_eq!(
        row.input_tokens, 0,
        "this time the server never got the COMMIT"
    );
}

#[test]
#[ignore = "needs PostgreSQL: run under .ci/with-postgres"]
fn idle_connections_the_server_ended_are_replaced_without_an_error() {
    let url = fresh("scribe_ended_idle");
    let db = Database::open(&url).unwrap();
    let s = create_session(&db);
    // Two connections idle in the pool: a read's and a write's, each warm.
    let (read_started, write_done) = (Arc::new(Barrier::new(2)), Arc::new(Barrier::new(2)));
    std::thread::scope(|scope| {
        scope.spawn(|| {
            db.read(|tx| -> scribe_db::Result<()> {
                read_started.wait();
                write_done.wait();
                tx.q().get_session(&s).map(drop)
            })
            .unwrap();
        });
        read_started.wait();
        db.write(|tx| tx.q().add_session_usage_delta(&usage(&s, 2)))
            .unwrap();
        write_done.wait();
    });
    // An administrator ends every idle session of this database (as a restart or an idle
    // timeout would); each answers its next statement with a FATAL error.
    let ended: Vec<bool> = admin(&url)
        .query(
            "SELECT pg_terminate_backend(pid, 10000) FROM pg_stat_activity \
             WHERE datname = current_database() AND pid <> pg_backend_pid() \
             AND state = 'idle' AND application_name = 'scribe'",
            &[],
        )
        .unwrap()
        .iter()
        .map(|row| row.get(0))
        .collect();
    assert!(ended.len() >= 2 && ended.iter().all(|&e| e), "{ended:?}");
    // Reads and writes go on, on new connections, and lose nothing.
    for _ in 0..3 {
        db.write(|tx| tx.q().add_session_usage_delta(&usage(&s, 1)))
            .unwrap();
        let row = db.read(|tx| tx.q().get_session(&s)).unwrap().unwrap();
        assert!(row.input_tokens >= 3);
    }
    let row = db.read(|tx| tx.q().get_session(&s)).unwrap().unwrap();
    assert_eq!((row.input_tokens, row.api_call_count), (5, 4));
}

#[test]
#[ignore = "needs PostgreSQL: run under .ci/with-postgres"]
fn a_read_sees_one_snapshot_while_writers_commit() {
    let db = Arc::new(Database::open(fresh("scribe_snapshot")).unwrap());
    let s = create_session(&db);
    let (first_read, written) = (Arc::new(Barrier::new(2)), Arc::new(Barrier::new(2)));
    let writer = std::thread::spawn({
        let (db, s) = (Arc::clone(&db), s.clone());
        let (first_read, written) = (Arc::clone(&first_read), Arc::clone(&written));
        move || {
            first_read.wait();
            db.write(|tx| tx.q().add_session_usage_delta(&usage(&s, 3)))
                .unwrap();
            written.wait();
        }
    });
    let (a, b) = db
        .read(|tx| -> scribe_db::Result<_> {
            let a = tx.q().get_session(&s)?.map(|r| r.input_tokens);
            first_read.wait();
            written.wait();
            let b = tx.q().get_session(&s)?.map(|r| r.input_tokens);
            Ok((a, b))
        })
        .unwrap();
    writer.join().unwrap();
    assert_eq!((a, b), (Some(0), Some(0)));
    let now = db.read(|tx| tx.q().get_session(&s)).unwrap().unwrap();
    assert_eq!(now.input_tokens, 3);
}

// ---- two processes acting as two hosts ----

const CHILD_URL: &str = "SCRIBE_PG_TEST_CHILD_URL";
const CHILD_ROLE: &str = "SCRIBE_PG_TEST_CHILD_ROLE";
const CHILD_SESSION: &str = "SCRIBE_PG_TEST_CHILD_SESSION";
const WRITES: i64 = 60;
const THREADS: usize = 3;

/// The child role, when spawned by a test below with the env vars set; a no-op otherwise.
#[test]
fn child_host() {
    let (Ok(url), Ok(role)) = (std::env::var(CHILD_URL), std::env::var(CHILD_ROLE)) else {
        return;
    };
    match role.as_str() {
        "open" => {
            let db = Database::open(&url).unwrap();
            assert_eq!(
                db.schema_version().unwrap(),
                Database::known_schema_version()
            );
        }
        "contend" => {
            let s = std::env::var(CHILD_SESSION).unwrap();
            let db = Arc::new(Database::open(&url).unwrap());
            let threads: Vec<_> = (0..THREADS)
                .map(|t| {
                    let (db, s) = (Arc::clone(&db), s.clone());
                    std::thread::spawn(move || {
                        for i in 0..WRITES {
                            // An atomic increment and a max()+1 version, both on hot rows.
                            db.write(|tx| -> scribe_db::Result<()> {
                                tx.q().add_session_usage_delta(&usage(&s, 1))?;
                                let id = new_id(Prefix::File);
                                let content = format!("{t}/{i}");
                                tx.q().create_file_version(&q::CreateFileVersionParams {
                                    id: &id,
                                    session_id: &s,
                                    path: "shared.txt",
                                    content: &content,
                                    now: now_ms(),
                                })?;
                                Ok(())
                            })
                            .unwrap();
                        }
                    })
                })
                .collect();
            for t in threads {
                t.join().unwrap();
            }
        }
        other => panic!("unknown child role {other}"),
    }
}

fn spawn_hosts(n: usize, url: &str, role: &str, session: &str) {
    let exe = std::env::current_exe().unwrap();
    let children: Vec<_> = (0..n)
        .map(|_| {
            Command::new(&exe)
                .args(["--exact", "child_host", "--nocapture", "--test-threads=1"])
                .env(CHILD_URL, url)
                .env(CHILD_ROLE, role)
                .env(CHILD_SESSION, session)
                .stdout(std::process::Stdio::null())
                .spawn()
                .unwrap()
        })
        .collect();
    for mut child in children {
        let status = child.wait().unwrap();
        assert!(status.success(), "a child process failed: {status}");
    }
}

#[test]
#[ignore = "needs PostgreSQL: run under .ci/with-postgres"]
fn processes_starting_together_migrate_a_fresh_database_once() {
    let url = fresh("scribe_race");
    spawn_hosts(4, &url, "open", "");
    let mut client = admin(&url);
    let versions: Vec<i32> = client
        .query(
            "SELECT version FROM refinery_schema_history ORDER BY version",
            &[],
        )
        .unwrap()
        .iter()
        .map(|r| r.get(0))
        .collect();
    let mut unique = versions.clone();
    unique.dedup();
    assert_eq!(versions, unique, "each migration recorded once");
    assert_eq!(
        i64::from(*versions.last().unwrap()),
        Database::known_schema_version()
    );
}

#[test]
#[ignore = "needs PostgreSQL: run under .ci/with-postgres"]
fn two_hosts_contending_for_the_same_rows_lose_nothing() {
    let url = fresh("scribe_contend");
    let db = Database::open(&url).unwrap();
    let s = create_session(&db);
    spawn_hosts(2, &url, "contend", &s);
    let total = 2 * THREADS as i64 * WRITES;
    let row = db.read(|tx| tx.q().get_session(&s)).unwrap().unwrap();
    assert_eq!((row.input_tokens, row.api_call_count), (total, total));
    assert!((row.estimated_cost_usd - 0.25 * total as f64).abs() < 1e-9);
    let versions: Vec<i64> = db
        .read(|tx| {
            tx.q().list_file_versions(&q::ListFileVersionsParams {
                session_id: &s,
                path: "shared.txt",
            })
        })
        .unwrap()
        .iter()
        .map(|f| f.version)
        .collect();
    assert_eq!(
        versions,
        (1..=total).collect::<Vec<_>>(),
        "versions 1..=n, none twice"
    );
}

// ---- changes across hosts ----

#[test]
#[ignore = "needs PostgreSQL: run under .ci/with-postgres"]
fn committed_changes_reach_another_host_in_commit_order_and_rollbacks_never() {
    let url = fresh("scribe_events");
    let a = Database::open(&url).unwrap();
    let b = Database::open(&url).unwrap();
    let broker: Arc<Broker<scribe_db::events::Change>> = Arc::new(Broker::with_buffer(1000));
    let sub = broker.subscribe();
    let listener = b
        .listen({
            let broker = Arc::clone(&broker);
            move |notice| match notice {
                Notice::Change(change) => {
                    broker.publish_updated(change);
                }
                Notice::Lagged(n) => broker.report_missed(n),
            }
        })
        .unwrap();

    let s = create_session(&a);
    let _ = a.write(|tx| -> scribe_db::Result<()> {
        message_with_part(tx.q(), &s, "rolled back")?;
        Err(Error::InvalidInput("changed my mind".into()))
    });
    a.write(|tx| message_with_part(tx.q(), &s, "kept")).unwrap();
    a.write(|tx| tx.q().add_session_usage_delta(&usage(&s, 1)))
        .unwrap();

    let mut seen = Vec::new();
    while seen.len() < 5 {
        let event = sub.recv_timeout(Duration::from_secs(10)).unwrap();
        let c = event.payload;
        assert_eq!(c.session_id, s);
        assert!(!c.own, "another host's change");
        seen.push((c.table, c.op));
    }
    let seen: Vec<(&str, ChangeOp)> = seen.iter().map(|(t, o)| (t.as_str(), *o)).collect();
    // Commit order: the first transaction's change, then the second's three (a message,
    // its part, and the session whose counter its trigger bumped, in trigger order), then
    // the third's.
    assert_eq!(seen[0], ("sessions", ChangeOp::Insert));
    let mut second = seen[1..4].to_vec();
    second.sort_unstable();
    assert_eq!(
        second,
        [
            ("messages", ChangeOp::Insert),
            ("parts", ChangeOp::Insert),
            ("sessions", ChangeOp::Update)
        ]
    );
    assert_eq!(seen[4], ("sessions", ChangeOp::Update));
    assert!(matches!(
        sub.recv_timeout(Duration::from_millis(300)),
        Err(RecvTimeoutError::Timeout)
    ));

    // b's own change is marked own.
    b.write(|tx| tx.q().add_session_usage_delta(&usage(&s, 1)))
        .unwrap();
    let own = sub.recv_timeout(Duration::from_secs(10)).unwrap().payload;
    assert!(own.own);

    listener.stop();
}

/// Ends the listener's connection (found by its application name) and waits until it is
/// gone.
fn terminate_listener(url: &str) {
    let ended: Vec<bool> = admin(url)
        .query(
            "SELECT pg_terminate_backend(pid, 10000) FROM pg_stat_activity \
             WHERE datname = current_database() AND application_name = $1",
            &[&scribe_db::events::APPLICATION_NAME],
        )
        .unwrap()
        .iter()
        .map(|row| row.get(0))
        .collect();
    assert_eq!(ended, [true], "one listener connection, ended");
}

/// Trims the outbox as if every row were past its retention until at most `rows` rows
/// are left (a transaction of the server's own, an autovacuum's ANALYZE, can hold a trim
/// back for a moment, as any running transaction does), or ten seconds passed; the rows
/// left.
fn trim_down_to(url: &str, rows: i64) -> i64 {
    let mut client = admin(url);
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    loop {
        let mut tx = client
            .build_transaction()
            .isolation_level(postgres::IsolationLevel::ReadCommitted)
            .start()
            .unwrap();
        tx.query_one("SELECT scribe_outbox_trim(0)", &[]).unwrap();
        tx.commit().unwrap();
        let left: i64 = client
            .query_one("SELECT count(*) FROM scribe_outbox", &[])
            .unwrap()
            .get(0);
        if left <= rows || std::time::Instant::now() > deadline {
            return left;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Since schema V19 a listener that lost its connection goes on from where it was: what
/// was committed meanwhile arrives after the reconnect, in commit order, and no `Lagged`.
/// Only changes deleted from the outbox (past its retention) before it read them are
/// lost, and `Lagged(n)` says exactly how many.
#[test]
#[ignore = "needs PostgreSQL: run under .ci/with-postgres"]
fn a_listener_that_lost_its_connection_gets_what_it_missed_or_an_exact_lagged() {
    let url = fresh("scribe_events_lagged");
    let a = Database::open(&url).unwrap();
    let b = Database::open(&url).unwrap();
    let s = create_session(&a);
    // The sink hands each notice over, then waits at a gate the test can hold: while it
    // does, the listener thread can neither notice that its connection died nor
    // reconnect, so what A commits meanwhile is surely committed while it was away. The
    // test takes the gate again only once the listener is past it for every notice taken
    // (else the listener could still be on its way to the gate with the last notice, and
    // would wait there instead of delivering the next one).
    let gate = Arc::new(Mutex::new(()));
    let (notices, rx) = std::sync::mpsc::channel();
    let (through, through_rx) = std::sync::mpsc::channel();
    let listener = b
        .listen({
            let gate = Arc::clone(&gate);
            move |notice| {
                let _ = notices.send(notice);
                drop(gate.lock());
                let _ = through.send(());
            }
        })
        .unwrap();
    let taken = std::cell::Cell::new(0_usize);
    let passed = std::cell::Cell::new(0_usize);
    let next = || {
        let notice = rx.recv_timeout(Duration::from_secs(10)).unwrap();
        taken.set(taken.get() + 1);
        notice
    };
    let hold = || {
        while passed.get() < taken.get() {
            through_rx.recv_timeout(Duration::from_secs(10)).unwrap();
            passed.set(passed.get() + 1);
        }
        gate.lock().unwrap()
    };
    let session_update = |notice: Notice| match notice {
        Notice::Change(c) => {
            assert_eq!(
                (c.table.as_str(), c.op, c.id.as_str()),
                ("sessions", ChangeOp::Update, s.as_str())
            );
        }
        other => panic!("expected the session's update, got {other:?}"),
    };
    // Five changes in three transactions: a session update, a message with its part and
    // the session's counter, a session update.
    let three_transactions = || {
        a.write(|tx| tx.q().add_session_usage_delta(&usage(&s, 1)))
            .unwrap();
        a.write(|tx| message_with_part(tx.q(), &s, "while away"))
            .unwrap();
        a.write(|tx| tx.q().add_session_usage_delta(&usage(&s, 1)))
            .unwrap();
    };

    let held = hold();
    a.write(|tx| tx.q().add_session_usage_delta(&usage(&s, 1)))
        .unwrap();
    session_update(next());
    // The listener waits in the sink now.
    terminate_listener(&url);
    three_transactions();
    drop(held);
    // After the reconnect: all five, in commit order, and nothing else.
    session_update(next());
    let mut second: Vec<(String, ChangeOp)> = (0..3)
        .map(|_| match next() {
            Notice::Change(c) => (c.table, c.op),
            other => panic!("expected a change, got {other:?}"),
        })
        .collect();
    second.sort_unstable();
    assert_eq!(
        second,
        [
            ("messages".to_owned(), ChangeOp::Insert),
            ("parts".to_owned(), ChangeOp::Insert),
            ("sessions".to_owned(), ChangeOp::Update)
        ]
    );
    session_update(next());
    assert!(rx.recv_timeout(Duration::from_millis(300)).is_err());

    // Away again, and this time the rows are deleted before it reads them: exactly the
    // five it never read are reported (the rows it had read are deleted as well).
    let held = hold();
    a.write(|tx| tx.q().add_session_usage_delta(&usage(&s, 1)))
        .unwrap();
    session_update(next());
    terminate_listener(&url);
    three_transactions();
    assert_eq!(trim_down_to(&url, 0), 0);
    drop(held);
    assert_eq!(next(), Notice::Lagged(5));
    a.write(|tx| tx.q().add_session_usage_delta(&usage(&s, 1)))
        .unwrap();
    session_update(next());
    assert!(rx.recv_timeout(Duration::from_millis(300)).is_err());
    listener.stop();
}

/// A store nobody listens to does not grow: a writing process deletes the changes past
/// their retention after its first commit, on a thread of its own (the write returns
/// without waiting for it), and records what it deleted for listeners to count.
#[test]
#[ignore = "needs PostgreSQL: run under .ci/with-postgres"]
fn a_writing_process_trims_expired_changes_in_the_background() {
    let url = fresh("scribe_writer_trim");
    let mut client = admin(&url);
    // Migrated by a first opening that writes nothing.
    drop(Database::open(&url).unwrap());
    // 40 changes of long-finished transactions (ids below any running one), written ten
    // minutes ago: past the five minutes' retention.
    client
        .batch_execute(
            "INSERT INTO scribe_outbox (xid, chunk, origin, n, changes, at) \
             SELECT (3 + g / 4)::text::xid8, g % 4, 'expired', 1, \
                    '[[\"sessions\",\"update\",\"ses_x\",\"ses_x\"]]', \
                    clock_timestamp() - INTERVAL '10 minutes' \
             FROM generate_series(0, 39) g",
        )
        .unwrap();
    let db = Database::open(&url).unwrap();
    let s = create_session(&db);
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    let expired = loop {
        let left: i64 = client
            .query_one(
                "SELECT count(*) FROM scribe_outbox WHERE origin = 'expired'",
                &[],
            )
            .unwrap()
            .get(0);
        if left == 0 || std::time::Instant::now() > deadline {
            break left;
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    assert_eq!(expired, 0, "the expired changes are deleted");
    let (changes, kept): (i64, i64) = {
        let row = client
            .query_one(
                "SELECT (SELECT changes FROM scribe_outbox_trim), \
                        (SELECT count(*) FROM scribe_outbox WHERE changes LIKE '%' || $1 || '%')",
                &[&s],
            )
            .unwrap();
        (row.get(0), row.get(1))
    };
    assert_eq!(
        changes, 40,
        "the trim record counts every change it deleted"
    );
    assert_eq!(
        kept, 1,
        "the session's own change is within the retention and stays"
    );
}

/// The backend a write runs on, asked from inside it: the one connection of the pool
/// (`application_name` scribe) idle in a transaction; a trim waiting on a lock is not.
fn writing_backend(admin: &mut postgres::Client) -> i32 {
    admin
        .query_one(
            "SELECT pid FROM pg_stat_activity WHERE datname = current_database() \
             AND application_name = 'scribe' AND state = 'idle in transaction'",
            &[],
        )
        .unwrap()
        .get(0)
}

/// One step of a writer (a message with a part, usage), and the backend it ran on.
fn step_on_backend(db: &Database, session: &str, admin: &mut postgres::Client) -> i32 {
    db.write(|tx| -> scribe_db::Result<i32> {
        message_with_part(tx.q(), session, "a step")?;
        tx.q().add_session_usage_delta(&usage(session, 1))?;
        Ok(writing_backend(admin))
    })
    .unwrap()
}

/// Waits (up to 10 s) until `ready` says so.
fn wait_until(what: &str, mut ready: impl FnMut() -> bool) {
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    while !ready() {
        assert!(
            std::time::Instant::now() < deadline,
            "still waiting: {what}"
        );
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// The background outbox trim leaves a writer its warm connection, whose statements are
/// prepared: it neither takes it (the write meanwhile had to open a new one and prepare
/// every statement again) nor puts its own, which has prepared nothing, back above it
/// (the next write took that one). Here the trim is held on a lock while the writer
/// writes, then let go; every write runs on the same backend.
#[test]
#[ignore = "needs PostgreSQL: run under .ci/with-postgres"]
fn the_outbox_trim_leaves_the_writer_its_warm_connection() {
    let url = fresh("scribe_trim_spare");
    drop(Database::open(&url).unwrap());
    let (mut admin, mut blocker) = (admin(&url), admin(&url));
    let db = Database::open(&url).unwrap();
    // The first commit starts the first trim; nothing holds it.
    let s = create_session(&db);
    wait_until("the first trim ends", || !db.outbox_trim_running());
    let warm = step_on_backend(&db, &s, &mut admin);

    // The next trim blocks on the trim record until `blocker` commits.
    blocker
        .batch_execute("BEGIN; LOCK TABLE scribe_outbox_trim IN ACCESS EXCLUSIVE MODE")
        .unwrap();
    db.outbox_trim_due_now();
    assert_eq!(step_on_backend(&db, &s, &mut admin), warm);
    wait_until("the trim waits for the trim record", || {
        let waiting: i64 = admin
            .query_one(
                "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() \
                 AND application_name = 'scribe' AND wait_event_type = 'Lock'",
                &[],
            )
            .unwrap()
            .get(0);
        waiting == 1
    });
    assert_eq!(
        step_on_backend(&db, &s, &mut admin),
        warm,
        "a write during the trim runs on the warm connection, not a new one"
    );
    blocker.batch_execute("COMMIT").unwrap();
    wait_until("the held trim ends", || !db.outbox_trim_running());
    assert_eq!(
        step_on_backend(&db, &s, &mut admin),
        warm,
        "after the trim the next write runs on the warm connection, not the trim's"
    );
}

/// A transaction that stays open holds back nothing but itself: other sessions' commits
/// arrive meanwhile, a trim keeps its rows (it has written none yet that anyone can see),
/// and its own changes arrive once it commits, once, with no `Lagged`.
#[test]
#[ignore = "needs PostgreSQL: run under .ci/with-postgres"]
fn a_long_transaction_holds_back_only_itself() {
    let url = fresh("scribe_events_long");
    let a = Database::open(&url).unwrap();
    let b = Database::open(&url).unwrap();
    let (slow, busy) = (create_session(&a), create_session(&a));
    let (notices, rx) = std::sync::mpsc::channel();
    let listener = b
        .listen(move |notice| {
            let _ = notices.send(notice);
        })
        .unwrap();
    let next = || match rx.recv_timeout(Duration::from_secs(10)).unwrap() {
        Notice::Change(c) => (c.table, c.op, c.session_id),
        other => panic!("expected a change, got {other:?}"),
    };

    let mut long = admin(&url);
    long.batch_execute("BEGIN ISOLATION LEVEL SERIALIZABLE")
        .unwrap();
    q::postgres::PgQueries::new(&mut long)
        .add_session_usage_delta(&usage(&slow, 1))
        .unwrap();
    for _ in 0..3 {
        a.write(|tx| tx.q().add_session_usage_delta(&usage(&busy, 1)))
            .unwrap();
        assert_eq!(
            next(),
            ("sessions".to_owned(), ChangeOp::Update, busy.clone())
        );
    }
    // A trim deletes only the rows of transactions older than the open one (the two
    // sessions' creation): the three younger ones wait for it.
    assert_eq!(trim_down_to(&url, 3), 3);
    long.batch_execute("COMMIT").unwrap();
    assert_eq!(
        next(),
        ("sessions".to_owned(), ChangeOp::Update, slow.clone())
    );
    a.write(|tx| tx.q().add_session_usage_delta(&usage(&busy, 1)))
        .unwrap();
    assert_eq!(next(), ("sessions".to_owned(), ChangeOp::Update, busy));
    // Once it has finished, everything read can go, and nothing was lost.
    assert_eq!(trim_down_to(&url, 0), 0);
    assert!(rx.recv_timeout(Duration::from_millis(300)).is_err());
    listener.stop();
}

/// What the listener's order rests on (V19): a write that changes a session's rows also
/// updates the session's row, so under SERIALIZABLE a transaction cannot commit after
/// another of the same session that committed since it began. Its id was taken before
/// that other's, so ids follow commit order per session. Checked for each kind of write
/// that did not update the session's row before V19, with a transaction that took its id
/// first and writes last; and at schema 18 the same interleaving commits a message update
/// (the other writes can also meet on a page of an index or of `parts_fts` there).
#[test]
#[ignore = "needs PostgreSQL: run under .ci/with-postgres"]
fn a_lower_transaction_id_never_commits_after_a_higher_one_of_the_same_session() {
    type Write = fn(&mut postgres::Client, &Place, usize) -> scribe_db::Result<()>;
    let writes: [(&str, Write); 5] = [
        ("a part updated", |c, p, i| {
            let n = q::postgres::PgQueries::new(c).update_part(&q::UpdatePartParams {
                r#type: "text",
                data: &text("again"),
                now: now_ms(),
                id: &p.parts[i],
            })?;
            assert_eq!(n, 1);
            Ok(())
        }),
        ("a part appended", |c, p, i| {
            q::postgres::PgQueries::new(c).append_part(&q::AppendPartParams {
                id: &new_id(Prefix::Part),
                message_id: &p.messages[i],
                session_id: &p.session,
                r#type: "text",
                data: &text("more"),
                now: now_ms(),
            })?;
            Ok(())
        }),
        ("a file version", |c, p, i| {
            q::postgres::PgQueries::new(c).create_file_version(&q::CreateFileVersionParams {
                id: &new_id(Prefix::File),
                session_id: &p.session,
                path: ["a.txt", "b.txt"][i],
                content: "x",
                now: now_ms(),
            })?;
            Ok(())
        }),
        ("a message updated", |c, p, i| {
            let n = c
                .execute(
                    "UPDATE messages SET model = 'another' WHERE id = $1",
                    &[&p.messages[i]],
                )
                .map_err(scribe_db::Error::from)?;
            assert_eq!(n, 1);
            Ok(())
        }),
        ("a part deleted", |c, p, i| {
            let n = q::postgres::PgQueries::new(c).delete_part(&p.parts[i])?;
            assert_eq!(n, 1);
            Ok(())
        }),
    ];
    let url = fresh("scribe_outbox_order");
    let db = Database::open(&url).unwrap();
    let old_url = fresh("scribe_outbox_order_18");
    let old = Database::open_at_version(&old_url, 18).unwrap();
    for (what, write) in writes {
        for (url, db, bites) in [(&url, &db, true), (&old_url, &old, false)] {
            let place = Place::new(db);
            let (mut low, mut high) = (admin(url), admin(url));
            // The lower id, taken first (with the snapshot the transaction keeps).
            low.batch_execute("BEGIN ISOLATION LEVEL SERIALIZABLE; SELECT pg_current_xact_id()")
                .unwrap();
            high.batch_execute("BEGIN ISOLATION LEVEL SERIALIZABLE")
                .unwrap();
            // Each writes its own rows of the session (its own message, part, file).
            write(&mut high, &place, 0).unwrap();
            high.batch_execute("COMMIT").unwrap();
            let outcome = write(&mut low, &place, 1)
                .and_then(|()| low.batch_execute("COMMIT").map_err(scribe_db::Error::from));
            if bites {
                let err = outcome.expect_err(what);
                assert_eq!(err.kind(), ErrorKind::Retryable, "{what}: {err}");
                low.batch_execute("ROLLBACK").unwrap();
            } else if what == "a message updated" {
                // Before V19 the session's row was not written: the lower id commits
                // after the higher one.
                assert!(outcome.is_ok(), "{what} at schema 18: {outcome:?}");
            } else if outcome.is_err() {
                low.batch_execute("ROLLBACK").unwrap();
            }
        }
    }
    // The bump is no change of the session: not announced, updated_at not moved.
    let place = Place::new(&db);
    let before = db
        .read(|tx| tx.q().get_session(&place.session))
        .unwrap()
        .unwrap();
    let (notices, rx) = std::sync::mpsc::channel();
    let listener = db
        .listen(move |notice| {
            let _ = notices.send(notice);
        })
        .unwrap();
    db.write(|tx| {
        tx.q().update_part(&q::UpdatePartParams {
            r#type: "text",
            data: &text("streamed"),
            now: before.updated_at,
            id: &place.parts[0],
        })
    })
    .unwrap();
    match rx.recv_timeout(Duration::from_secs(10)).unwrap() {
        Notice::Change(c) => assert_eq!((c.table.as_str(), c.op), ("parts", ChangeOp::Update)),
        other => panic!("expected the part's update, got {other:?}"),
    }
    assert!(rx.recv_timeout(Duration::from_millis(300)).is_err());
    listener.stop();
    let after = db
        .read(|tx| tx.q().get_session(&place.session))
        .unwrap()
        .unwrap();
    assert_eq!(after, before);
}

/// A session with two messages of a part each, for the write kinds above.
struct Place {
    session: String,
    messages: Vec<String>,
    parts: Vec<String>,
}

impl Place {
    fn new(db: &Database) -> Place {
        let session = create_session(db);
        for body in ["first", "second"] {
            db.write(|tx| message_with_part(tx.q(), &session, body))
                .unwrap();
        }
        let messages: Vec<String> = db
            .read(|tx| tx.q().list_messages(&session))
            .unwrap()
            .into_iter()
            .map(|m| m.id)
            .collect();
        let parts = messages
            .iter()
            .map(|m| db.read(|tx| tx.q().list_parts(m)).unwrap().remove(0).id)
            .collect();
        Place {
            session,
            messages,
            parts,
        }
    }
}

/// Writers streaming into one session from several threads (each append its own
/// transaction, conflicts retried) reach a listener in commit order: the order of their
/// positions, which each append takes after the message's last part.
#[test]
#[ignore = "needs PostgreSQL: run under .ci/with-postgres"]
fn concurrent_appends_to_one_session_arrive_in_commit_order() {
    let url = fresh("scribe_events_order");
    let db = Arc::new(Database::open(&url).unwrap());
    let place = Arc::new(Place::new(&db));
    let listener_db = Database::open(&url).unwrap();
    let seen = Arc::new(Mutex::new(Vec::new()));
    let listener = listener_db
        .listen({
            let seen = Arc::clone(&seen);
            move |notice| match notice {
                Notice::Change(c) if c.table == "parts" => seen.lock().unwrap().push(c.id),
                Notice::Change(_) => {}
                Notice::Lagged(n) => panic!("lagged {n}"),
            }
        })
        .unwrap();
    let threads: Vec<_> = (0..4)
        .map(|_| {
            let (db, place) = (Arc::clone(&db), Arc::clone(&place));
            std::thread::spawn(move || {
                for _ in 0..25 {
                    db.write(|tx| {
                        tx.q().append_part(&q::AppendPartParams {
                            id: &new_id(Prefix::Part),
                            message_id: &place.messages[0],
                            session_id: &place.session,
                            r#type: "text",
                            data: &text("delta"),
                            now: now_ms(),
                        })
                    })
                    .unwrap();
                }
            })
        })
        .collect();
    for t in threads {
        t.join().unwrap();
    }
    let stored: Vec<String> = db
        .read(|tx| tx.q().list_parts(&place.messages[0]))
        .unwrap()
        .into_iter()
        .skip(1)
        .map(|p| p.id)
        .collect();
    assert_eq!(stored.len(), 100);
    let deadline = std::time::Instant::now() + Duration::from_secs(20);
    while seen.lock().unwrap().len() < 100 && std::time::Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(20));
    }
    listener.stop();
    assert_eq!(*seen.lock().unwrap(), stored);
}

/// Schema V14 sends a transaction's changes together; one that changes more rows than
/// fit in one notification (PostgreSQL's payload limit is 8,000 bytes) sends several, and
/// the listener still hands over every change, in the order made, none twice.
#[test]
#[ignore = "needs PostgreSQL: run under .ci/with-postgres"]
fn a_big_transaction_reaches_another_host_whole_and_in_order() {
    let url = fresh("scribe_events_big");
    let a = Database::open(&url).unwrap();
    let b = Database::open(&url).unwrap();
    let seen = Arc::new(Mutex::new(Vec::new()));
    let listener = b
        .listen({
            let seen = Arc::clone(&seen);
            move |notice| {
                if let Notice::Change(change) = notice {
                    seen.lock().unwrap().push(change);
                }
            }
        })
        .unwrap();
    let s = create_session(&a);
    let bodies: Vec<String> = (0..300).map(|i| format!("message {i}")).collect();
    a.write(|tx| -> scribe_db::Result<()> {
        for body in &bodies {
            message_with_part(tx.q(), &s, body)?;
        }
        Ok(())
    })
    .unwrap();
    let messages: Vec<String> = a
        .read(|tx| tx.q().list_messages(&s))
        .unwrap()
        .into_iter()
        .map(|m| m.id)
        .collect();
    assert_eq!(messages.len(), 300);
    let deadline = std::time::Instant::now() + Duration::from_secs(20);
    let wanted = 1 + 300 * 2; // the session, then each message and its part
    while seen
        .lock()
        .unwrap()
        .iter()
        .filter(|c| c.table != "sessions" || c.op == ChangeOp::Insert)
        .count()
        < wanted
        && std::time::Instant::now() < deadline
    {
        std::thread::sleep(Duration::from_millis(50));
    }
    listener.stop();
    let seen = seen.lock().unwrap();
    let inserted: Vec<&str> = seen
        .iter()
        .filter(|c| c.table == "messages")
        .map(|c| {
            assert_eq!(c.op, ChangeOp::Insert);
            assert!(!c.own);
            c.id.as_str()
        })
        .collect();
    // Every message once, in the order inserted (ids are time-ordered, as the list is).
    assert_eq!(
        inserted,
        messages.iter().map(String::as_str).collect::<Vec<_>>()
    );
    assert_eq!(seen.iter().filter(|c| c.table == "parts").count(), 300);
    assert!(seen.iter().all(|c| c.session_id == s));
}

// ---- moving a store between backends ----

#[test]
#[ignore = "needs PostgreSQL: run under .ci/with-postgres"]
fn a_store_goes_to_postgres_and_back_unchanged() {
    let dir = tempfile::tempdir().unwrap();
    let original = Database::open(dir.path().join("original.db")).unwrap();
    let sessions = common::fill_for_copy(&original);
    let pg = Database::open(fresh("scribe_copy")).unwrap();

    let mut tables_seen = Vec::new();
    scribe_db::copy::copy(&original, &pg, |p| {
        if tables_seen.last() != Some(&p.table) {
            tables_seen.push(p.table.clone());
        }
        std::ops::ControlFlow::Continue(())
    })
    .unwrap();
    // Parents first.
    let at = |t: &str| tables_seen.iter().position(|x| x == t).unwrap();
    assert!(at("sessions") < at("messages") && at("messages") < at("parts"));

    // On PostgreSQL: the same rows, counters as stored (not counted twice), the
    // summary and parent links filled in, search text derived, sequences moved on.
    for id in &sessions {
        let a = original.read(|tx| tx.q().get_session(id)).unwrap().unwrap();
        let b = pg.read(|tx| tx.q().get_session(id)).unwrap().unwrap();
        assert_eq!(a, b);
        assert_eq!(
            a.estimated_cost_usd.to_bits(),
            b.estimated_cost_usd.to_bits()
        );
    }
    let parent = pg
        .read(|tx| tx.q().get_session(&sessions[0]))
        .unwrap()
        .unwrap();
    assert!(parent.summary_message_id.is_some());
    assert_eq!(parent.message_count, 2);
    let m = parent.summary_message_id.unwrap();

    // And back into a fresh SQLite file: byte for byte what we started with, derived
    // data (counters, both search indexes) exact.
    let back = Database::open(dir.path().join("back.db")).unwrap();
    scribe_db::copy::copy(&pg, &back, |_| std::ops::ControlFlow::Continue(())).unwrap();
    assert_eq!(common::dump(&original), common::dump(&back));
    common::assert_derived_exact(&back);

    // The identity sequence went past the copied keys: new parts still insert.
    pg.write(|tx| -> scribe_db::Result<()> {
        let now = now_ms();
        tx.q().create_part(&q::CreatePartParams {
            id: &new_id(Prefix::Part),
            message_id: &m,
            session_id: &sessions[0],
            position: 99,
            r#type: "text",
            data: &text("after the copy"),
            created_at: now,
            updated_at: now,
        })
    })
    .unwrap();
}

/// A PostgreSQL `Database` has no SQLite inside: its transactions offer no SQLite
/// connection (`None`, never a panic), SQLite's own operations say they are SQLite's,
/// and `vacuum` runs VACUUM (ANALYZE) on every table of the schema, keeping every row;
/// opened read-only, it refuses to.
#[test]
#[ignore = "needs PostgreSQL: run under .ci/with-postgres"]
fn no_sqlite_inside_and_vacuum_analyzes_every_table() {
    let url = fresh("scribe_db_vacuum");
    let db = Database::open(&url).unwrap();
    let id = create_session(&db);
    db.write(|tx| {
        assert!(tx.conn().is_none());
        message_with_part(tx.q(), &id, "kept through a vacuum")
    })
    .unwrap();
    db.read(|tx| -> scribe_db::Result<()> {
        assert!(tx.conn().is_none());
        Ok(())
    })
    .unwrap();
    assert_eq!(db.path(), None);
    assert!(matches!(db.data_version(), Err(Error::InvalidInput(_))));
    assert_eq!(db.checkpoints_run(), 0);
    db.checkpoint().unwrap();
    assert_eq!(db.search_backlog().unwrap(), 0);
    db.write(|tx| tx.q().delete_session(&id)).unwrap();
    let kept = create_session(&db);

    let report = db.vacuum().unwrap();
    assert_eq!(report.backend, Backend::Postgres);
    for table in [
        "files",
        "messages",
        "parts",
        "refinery_schema_history",
        "sessions",
    ] {
        assert!(
            report.tables.iter().any(|t| t == table),
            "{table}: {report:?}"
        );
    }
    let mut sorted = report.tables.clone();
    sorted.sort();
    assert_eq!(sorted, report.tables, "in name order");
    assert!(
        report.bytes_before > 0 && report.bytes_after > 0,
        "{report:?}"
    );
    let not_done: Vec<String> = admin(&url)
        .query(
            "SELECT relname::text FROM pg_stat_user_tables \
             WHERE last_vacuum IS NULL OR last_analyze IS NULL",
            &[],
        )
        .unwrap()
        .iter()
        .map(|row| row.get(0))
        .collect();
    assert!(not_done.is_empty(), "{not_done:?}");
    let found = db.read(|tx| tx.q().get_session(&kept)).unwrap();
    assert_eq!(found.map(|s| s.id), Some(kept));

    let read_only = Database::open_with(
        &url,
        Options {
            read_only: true,
            ..Options::default()
        },
    )
    .unwrap();
    assert!(matches!(read_only.vacuum(), Err(Error::ReadOnly { .. })));
}

// ---- the trigram index (V15) ----

/// The trigram index holds only text with a character of a script written without spaces
/// (V15), as SQLite's does: its predicate agrees with `is_spaceless_script` on every code
/// point; a Latin part is outside it and a CJK part inside; a CJK substring search finds
/// the CJK part through it, a search for the trigram index alone finds no Latin text (as
/// on SQLite), and a substring search whose other alternative is Latin finds both parts.
#[test]
#[ignore = "needs PostgreSQL: run under .ci/with-postgres"]
fn the_trigram_index_holds_only_spaceless_text_and_both_kinds_are_found() {
    use scribe_db::search::{self, Alternative, SearchFilter, TextQuery, is_spaceless_script};

    let url = fresh("scribe_spaceless");
    let db = Database::open(&url).unwrap();
    let mut admin = admin(&url);

    // Every code point (but surrogates, which text cannot hold), against the Rust ranges.
    let in_sql: Vec<u32> = admin
        .query(
            "SELECT cp FROM generate_series(1, 1114111) AS cp \
             WHERE cp NOT BETWEEN 55296 AND 57343 AND scribe_spaceless(chr(cp)) ORDER BY cp",
            &[],
        )
        .unwrap()
        .iter()
        .map(|row| u32::try_from(row.get::<_, i32>(0)).unwrap())
        .collect();
    let in_rust: Vec<u32> = (1..=0x10FFFF_u32)
        .filter(|&cp| char::from_u32(cp).is_some_and(is_spaceless_script))
        .collect();
    assert_eq!(in_sql.len(), in_rust.len());
    assert!(
        in_sql == in_rust,
        "scribe_spaceless differs from is_spaceless_script"
    );

    let session = create_session(&db);
    db.write(|tx| -> scribe_db::Result<()> {
        message_with_part(tx.q(), &session, "the database migration failed on config")?;
        message_with_part(tx.q(), &session, "数据库迁移失败 after the config change")
    })
    .unwrap();
    let indexed: Vec<String> = admin
        .query("SELECT search_text FROM parts_fts WHERE spaceless", &[])
        .unwrap()
        .iter()
        .map(|row| row.get(0))
        .collect();
    assert_eq!(
        indexed,
        vec!["数据库迁移失败 after the config change".to_owned()]
    );
    let def: String = admin
        .query_one(
            "SELECT indexdef FROM pg_indexes WHERE indexname = 'parts_fts_trigram'",
            &[],
        )
        .unwrap()
        .get(0);
    assert!(def.ends_with("WHERE spaceless"), "{def}");
    let stale = |db: &Database| {
        let report = db.check().unwrap();
        report
            .checks
            .iter()
            .find(|c| c.name == "search_documents")
            .unwrap()
            .problem
            .clone()
    };
    assert_eq!(stale(&db), None);

    let texts = |query: TextQuery| -> Vec<String> {
        let hits = db
            .read(|tx| search::search(tx, &SearchFilter::new(query.clone())))
            .unwrap();
        let mut snippets: Vec<String> = hits.into_iter().map(|h| h.snippet).collect();
        snippets.sort();
        snippets
    };
    assert_eq!(
        texts(TextQuery::Substrings {
            trigrams: "\"数据库\"".into(),
            plain: Vec::new(),
        }),
        vec!["\u{2}数据库\u{3}迁移失败 after the config change".to_owned()]
    );
    // The trigram index alone holds no Latin-only text (SQLite answers the same).
    assert_eq!(
        texts(TextQuery::Trigrams("\"config\"".into())),
        vec!["数据库迁移失败 after the \u{2}config\u{3} change".to_owned()]
    );
    // Either alternative: the Latin one is matched in the other text too.
    assert_eq!(
        texts(TextQuery::Substrings {
            trigrams: "\"迁移失败\" OR \"migration\"".into(),
            plain: vec![Alternative {
                all: vec!["migration".into()],
                none: Vec::new(),
            }],
        }),
        vec![
            "the database \u{2}migration\u{3} failed on config".to_owned(),
            "数据库\u{2}迁移失败\u{3} after the config change".to_owned(),
        ]
    );

    // `db check` finds a row the trigram index should not hold, or should.
    admin
        .batch_execute(
            "UPDATE parts_fts SET spaceless = NOT spaceless WHERE search_text LIKE 'the %'",
        )
        .unwrap();
    let problem = stale(&db).unwrap();
    assert!(
        problem.starts_with("1 part(s) whose stored search text"),
        "{problem}"
    );
}

/// Schema V17: the search trigger computes a part's search text from its JSON without
/// validating it again (the CHECK on `parts.data` already did). What it stores must stay
/// exactly what `scribe_search_text` (the rebuild's and `db check`'s function) computes,
/// for every kind of part and JSON shape, on insert and on update; JSON the CHECK refuses
/// stores nothing.
#[test]
#[ignore = "needs PostgreSQL: run under .ci/with-postgres"]
fn the_search_trigger_stores_what_scribe_search_text_computes() {
    let url = fresh("scribe_v17_search_trigger");
    let db = Database::open(&url).unwrap();
    let session = create_session(&db);
    db.write(|tx| message_with_part(tx.q(), &session, "the first part"))
        .unwrap();
    let mut admin = admin(&url);
    let message: String = admin
        .query_one("SELECT message_id FROM parts", &[])
        .unwrap()
        .get(0);
    let shapes: [(&str, &str); 14] = [
        (
            "text",
            r#"{"type":"text","text":"plain words, café Ünïcödé"}"#,
        ),
        ("text", r#"{"type":"text","text":"数据库迁移失败 mixed"}"#),
        ("text", r#"{"type":"text"}"#),
        ("text", r#""a JSON string, not an object""#),
        (
            "reasoning",
            r#"{"type":"reasoning","text":"think:\n  then \"quote\""}"#,
        ),
        (
            "tool",
            r#"{"tool":"bash","input":{"cmd":"ls  -la", "n" : [1, 2]},"state":{"status":"completed","output":"a\nb"}}"#,
        ),
        (
            "tool",
            r#"{"tool":"read","input":"a string input","state":{"status":"error","message":"no such file"}}"#,
        ),
        (
            "tool",
            r#"{"tool":"edit","state":{"output":{"nested":true}}}"#,
        ),
        ("tool", r#"{"input":null,"state":null}"#),
        ("tool", "[1, 2, 3]"),
        ("step", r#"{"type":"step","text":"not searchable"}"#),
        ("finish", r#"{"text":"not searchable either"}"#),
        (
            "text",
            r#"{"text":"escapes \u00e9 \u4e2d \ud83d\ude00 \\ \/"}"#,
        ),
        ("text", r#"{"text":""}"#),
    ];
    for (i, (kind, data)) in shapes.iter().enumerate() {
        let position = i64::try_from(i + 1).unwrap();
        admin
            .execute(
                "INSERT INTO parts (id, message_id, session_id, position, type, data, \
                 created_at, updated_at) VALUES ($1, $2, $3, $4, $5, $6, 1, 1)",
                &[
                    &new_id(Prefix::Part),
                    &message,
                    &session,
                    &position,
                    kind,
                    data,
                ],
            )
            .unwrap();
    }
    // Every part against the function, both ways: a row exactly for the parts whose text is
    // not NULL, holding that text and its words.
    let mismatches = |admin: &mut postgres::Client| -> Vec<String> {
        admin
            .query(
                "SELECT coalesce(p.id, 'orphan ' || f.seq) FROM parts p \
                 FULL JOIN parts_fts f ON f.seq = p.seq \
                 WHERE p.seq IS NULL \
                    OR scribe_search_text(p.type, p.data) IS DISTINCT FROM f.search_text \
                    OR (f.seq IS NOT NULL AND (f.words IS DISTINCT FROM scribe_search_words(f.search_text) \
                        OR f.spaceless IS DISTINCT FROM scribe_spaceless(f.search_text)))",
                &[],
            )
            .unwrap()
            .iter()
            .map(|row| row.get(0))
            .collect()
    };
    assert_eq!(mismatches(&mut admin), Vec::<String>::new());
    let stored: i64 = admin
        .query_one("SELECT count(*) FROM parts_fts", &[])
        .unwrap()
        .get(0);
    // The message's own part and ten shapes: not the step and finish parts, nor the text
    // parts without a text (no field, a JSON string); a tool part always has one (concat_ws
    // of NULLs is '').
    let expected: i64 = admin
        .query_one(
            "SELECT count(*) FROM parts WHERE scribe_search_text(type, data) IS NOT NULL",
            &[],
        )
        .unwrap()
        .get(0);
    assert_eq!(stored, expected);
    assert_eq!(expected, 11);

    // Updates: text -> step drops the row, step -> tool adds one, new data replaces it.
    admin
        .batch_execute(
            "UPDATE parts SET type = 'step' WHERE position = 1;
             UPDATE parts SET type = 'tool', data = '{\"tool\":\"grep\",\"input\":\"needle\"}' \
                 WHERE position = 11;
             UPDATE parts SET data = '{\"text\":\"replaced words\"}' WHERE position = 2;",
        )
        .unwrap();
    assert_eq!(mismatches(&mut admin), Vec::<String>::new());
    let texts: Vec<String> = admin
        .query(
            "SELECT f.search_text FROM parts_fts f JOIN parts p ON p.seq = f.seq \
             WHERE p.position IN (1, 2, 11) ORDER BY p.position",
            &[],
        )
        .unwrap()
        .iter()
        .map(|row| row.get(0))
        .collect();
    assert_eq!(
        texts,
        vec!["replaced words".to_owned(), "grep\nneedle".to_owned()]
    );

    // JSON the CHECK refuses never reaches the trigger: the insert fails, nothing stored.
    let refused = admin.execute(
        "INSERT INTO parts (id, message_id, session_id, position, type, data, created_at, \
         updated_at) VALUES ($1, $2, $3, 99, 'text', '{\"text\": \"unclosed', 1, 1)",
        &[&new_id(Prefix::Part), &message, &session],
    );
    let err = refused.unwrap_err();
    assert_eq!(
        err.as_db_error().map(|e| e.code().code()),
        Some("23514"),
        "{err}"
    );
    assert_eq!(mismatches(&mut admin), Vec::<String>::new());

    // The rebuild (after `scribe db copy`) computes the same rows.
    let before: Vec<(i64, String)> = admin
        .query("SELECT seq, search_text FROM parts_fts ORDER BY seq", &[])
        .unwrap()
        .iter()
        .map(|row| (row.get(0), row.get(1)))
        .collect();
    admin
        .batch_execute("SELECT scribe_parts_fts_rebuild()")
        .unwrap();
    let after: Vec<(i64, String)> = admin
        .query("SELECT seq, search_text FROM parts_fts ORDER BY seq", &[])
        .unwrap()
        .iter()
        .map(|row| (row.get(0), row.get(1)))
        .collect();
    assert_eq!(before, after);
}

/// Schema V21: `scribe_search_words` keeps spaces and replaces only the runs of other
/// non-alphanumerics (fewer regular expression matches). Its words and positions must be
/// exactly V13's split (every non-alphanumeric run to one space) for any text: stored words
/// stay valid without a rebuild, `db check` compares against this function, and queries
/// match as before. The corpus: diacritics, CJK, digits, underscores, hyphens, paths, URLs,
/// e-mail addresses, numbers the parser reads specially, whitespace of every kind, long
/// words, and every code point (but NUL and the surrogates) between and beside words.
#[test]
#[ignore = "needs PostgreSQL: run under .ci/with-postgres"]
fn the_word_split_gives_v13s_words_and_positions_for_any_text() {
    let url = fresh("scribe_v21_word_split");
    drop(Database::open(&url).unwrap());
    let mut admin = admin(&url);
    let body: String = admin
        .query_one(
            "SELECT prosrc FROM pg_proc WHERE proname = 'scribe_search_words'",
            &[],
        )
        .unwrap()
        .get(0);
    assert!(body.contains("'[^[:alnum:] ]+'"), "{body}");
    // V21 also compresses new texts with lz4 where the server has it (the test server's
    // Debian build does): the part's JSON, its search text and its words.
    let lz4: bool = admin
        .query_one(
            "SELECT 'lz4' = ANY (enumvals) FROM pg_settings WHERE name = 'default_toast_compression'",
            &[],
        )
        .unwrap()
        .get(0);
    let compressed: Vec<String> = admin
        .query(
            "SELECT attrelid::regclass::text || '.' || attname FROM pg_attribute \
             WHERE attcompression = 'l' AND attrelid IN ('parts'::regclass, 'parts_fts'::regclass) \
             ORDER BY 1",
            &[],
        )
        .unwrap()
        .iter()
        .map(|row| row.get(0))
        .collect();
    let expected: Vec<String> = if lz4 {
        vec![
            "parts.data".into(),
            "parts_fts.search_text".into(),
            "parts_fts.words".into(),
        ]
    } else {
        Vec::new()
    };
    assert_eq!(compressed, expected);
    let long_word = "x".repeat(3000);
    let long_accented = "é".repeat(1500);
    let texts: Vec<String> = [
        "plain words, café Ünïcödé naïve façade Ærøskøbing ß straße İstanbul ﬁle",
        "数据库迁移失败 mixed 日本語のテキスト 한국어 텍스트 ภาษาไทย",
        "my-app.config.ts src/search/postgres.rs ../a/b_c/d.e C:\\Users\\x\\file.txt",
        "https://example.com/a/b?c=1&d=two#frag user.name+tag@example.co.uk",
        "snake_case_name __dunder__ _leading trailing_ a__b CamelCase2Words",
        "1.2.3 3.14 -5 +7 1e10 0x1F 1,000,000 10:30 2024-01-02T03:04:05Z v2.0-rc1",
        "don't O'Reilly «quoted» “curly” ‘single’ — en–dash … ellipsis",
        "<b>bold</b> &amp; &#169; <a href=\"x\">link</a> C++ node.js .NET",
        "  leading and trailing spaces  ",
        "tabs\tand\nnewlines\r\nand\u{b}vertical\u{c}feeds",
        "nbsp\u{a0}em\u{2003}ideographic\u{3000}zero\u{200b}width\u{200d}joiner",
        "combining e\u{301} a\u{308} n\u{303} and emoji 😀 👩\u{200d}💻 🇫🇷",
        "fullwidth １２３ ＡＢＣ superscript x² roman Ⅻ fractions ½ ¼",
        "arabic مرحبا hebrew שלום devanagari नमस्ते greek αβγ cyrillic привет",
        "   ",
        "",
        "-",
        "a",
        "a  b   c    d",
        "word-word-word_word.word/word\\word|word@word#word",
        "12abc abc12 12-34 ab-12 1_2 ½2 ²3",
        &long_word,
        &format!("{long_word} short {long_word}-tail"),
        &long_accented,
    ]
    .iter()
    .map(|s| (*s).to_owned())
    .collect();
    let differ = admin
        .query(
            "SELECT t FROM unnest($1::text[]) AS t \
             WHERE scribe_search_words(t)::text IS DISTINCT FROM \
                   to_tsvector('scribe', regexp_replace(t, '[^[:alnum:]]+', ' ', 'g'))::text",
            &[&texts],
        )
        .unwrap();
    let differ: Vec<String> = differ.iter().map(|row| row.get(0)).collect();
    assert_eq!(differ, Vec::<String>::new());
    // The corpus is not trivially empty: words, positions and a skipped long word.
    let words: String = admin
        .query_one(
            "SELECT scribe_search_words($1)::text",
            &[&"My-App.config.ts  café\tcafe 数据库"],
        )
        .unwrap()
        .get(0);
    assert_eq!(
        words,
        "'app':2 'cafe':5,6 'config':3 'my':1 'ts':4 '数据库':7"
    );

    // Every code point, 32 to a text: inside a word, between two words, doubled, next to a
    // space, between digits, alone.
    let differ: i64 = admin
        .query_one(
            "WITH cps AS (
                 SELECT cp FROM generate_series(1, 1114111) AS cp
                 WHERE cp NOT BETWEEN 55296 AND 57343
             ), texts AS (
                 SELECT string_agg(
                     'a' || chr(cp) || 'b ' || chr(cp) || chr(cp) || 'é ' || chr(cp) || ' 1'
                         || chr(cp) || '2 ' || chr(cp) || '_x' || chr(cp),
                     ' ') AS t
                 FROM cps GROUP BY cp / 32
             )
             SELECT count(*) FROM texts
             WHERE scribe_search_words(t)::text IS DISTINCT FROM \
                   to_tsvector('scribe', regexp_replace(t, '[^[:alnum:]]+', ' ', 'g'))::text",
            &[],
        )
        .unwrap()
        .get(0);
    assert_eq!(differ, 0);
}

/// Schema V25: a text of very many different words stores on PostgreSQL (a tsvector holds
/// at most 1 MiB, and until V25 such a part failed its write with "string is too long for
/// tsvector", where SQLite stores it). Its words are searched up to the document's budget;
/// a text over 200,000 bytes whose words fit is searched whole, at every piece boundary,
/// multibyte characters and a word longer than a piece included; a text of at most
/// 200,000 bytes keeps V21's document exactly; `db check` finds every document right.
#[test]
#[ignore = "needs PostgreSQL: run under .ci/with-postgres"]
fn a_text_of_very_many_words_stores_and_its_words_are_searched_to_the_budget() {
    use scribe_db::search::{self, SearchFilter, TextQuery};

    let url = fresh("scribe_many_words");
    let db = Database::open(&url).unwrap();
    let mut admin = admin(&url);
    let session = create_session(&db);
    // ~250,000 different words, ~2.7 MB: the document of the whole would be ~4 MB.
    let many: String = (0..250_000)
        .map(|i| format!("w{i:07}x"))
        .collect::<Vec<_>>()
        .join(" ");
    // ~600 KB: different words of two-byte and three-byte characters and ASCII, a
    // 300,000-byte word (no piece boundary inside it), then words after it.
    let letters = ['é', 'ж', '中', 'ß', '文'];
    let fits: String = (0..60_000)
        .map(|i| format!("{}{i}", letters[i % letters.len()]))
        .chain(std::iter::once("y".repeat(300_000)))
        .chain((0..2_000).map(|i| format!("tail{i}")))
        .collect::<Vec<_>>()
        .join(" ");
    // ~300 KB of 20-byte words; the first piece ends after the first space from byte
    // 200,000 on (0-based), between the words `across[0]` and `across[1]`.
    let long_words: Vec<String> = (0..14_300).map(|i| format!("b{i:019}")).collect();
    let positional = long_words.join(" ");
    let end = 200_000 + positional[200_000..].find(' ').unwrap();
    let k = positional[..end].split(' ').count() - 1;
    let across = [&long_words[k], &long_words[k + 1], &long_words[k + 2]];
    let small = "the quick brown fox jumps over the lazy dog ".repeat(4_000);
    assert!(fits.len() > 600_000 && small.len() <= 200_000);
    db.write(|tx| -> scribe_db::Result<()> {
        message_with_part(tx.q(), &session, &many)?;
        message_with_part(tx.q(), &session, &fits)?;
        message_with_part(tx.q(), &session, &positional)?;
        message_with_part(tx.q(), &session, &small)
    })
    .unwrap();

    let found = |word: &str| -> usize {
        db.read(|tx| {
            search::search(
                tx,
                &SearchFilter::new(TextQuery::Words(format!("\"{word}\""))),
            )
        })
        .unwrap()
        .len()
    };
    // The first words of the big text are searched; its last, past the budget, are not.
    assert_eq!(found("w0000000x"), 1);
    assert_eq!(found("w0010000x"), 1);
    assert_eq!(found("w0249999x"), 0);
    // The text whose words fit is searched whole: every letter's words, across pieces,
    // and the words after the long one.
    for word in [
        "é0", "ж1", "中2", "ß3", "文4", "é59995", "文59999", "tail0", "tail1999",
    ] {
        assert_eq!(found(word), 1, "{word}");
    }
    // Positions run on from piece to piece as in one document: two words on either side
    // of the first piece's end are a phrase (positions stop counting at 16,383, so these
    // words are long enough for the end to come before that).
    assert_eq!(found(&format!("{} {}", across[0], across[1])), 1);
    assert_eq!(found(&format!("{} {}", across[0], across[2])), 0);
    let documents: Vec<(i64, i32)> = admin
        .query(
            "SELECT octet_length(search_text)::bigint, pg_column_size(words) FROM parts_fts \
             ORDER BY seq",
            &[],
        )
        .unwrap()
        .iter()
        .map(|row| (row.get(0), row.get(1)))
        .collect();
    assert_eq!(documents.len(), 4);
    assert!(
        documents.iter().all(|&(_, size)| size < 1_048_576),
        "{documents:?}"
    );
    // A text of at most 200,000 bytes has V21's document exactly.
    let same: bool = admin
        .query_one(
            "SELECT scribe_search_words($1)::text = \
                    to_tsvector('scribe', regexp_replace($1, '[^[:alnum:] ]+', ' ', 'g'))::text",
            &[&small],
        )
        .unwrap()
        .get(0);
    assert!(same);
    let report = db.check().unwrap();
    assert!(
        report.checks.iter().all(|c| c.problem.is_none()),
        "{:?}",
        report.checks
    );
}

/// A location whose `search_path` names a schema that does not exist (a typo, a schema
/// not created yet) is refused with the schema and what to do, by every open, and nothing
/// is created: not the schema, not a table anywhere. Before, refinery's "error asserting
/// migrations table … no schema has been selected to create in" came out, and a
/// read-only open called the store one never migrated. Once the schema exists, Scribe's
/// tables go in it, and only there.
#[test]
#[ignore = "needs PostgreSQL: run under .ci/with-postgres"]
fn a_search_path_naming_no_schema_is_refused_with_what_to_do() {
    let url = fresh("scribe_no_schema");
    let missing = format!("{url} options='-csearch_path=nosuch'");
    let read_only = Options {
        read_only: true,
        ..Options::default()
    };
    let tables = |schema: &str| -> i64 {
        admin(&url)
            .query_one(
                "SELECT count(*) FROM pg_tables WHERE schemaname = $1",
                &[&schema],
            )
            .unwrap()
            .get(0)
    };
    for err in [
        Database::open(&missing).unwrap_err(),
        Database::open_existing(&missing).unwrap_err(),
        Database::open_with(&missing, read_only).unwrap_err(),
    ] {
        assert!(
            matches!(err, Error::NoSchema { ref search_path, .. } if &**search_path == "nosuch"),
            "{err:?}"
        );
        let text = err.to_string();
        assert!(
            text.contains("has no schema for scribe's tables: its search_path (nosuch) names none"),
            "{text}"
        );
        assert!(text.contains("CREATE SCHEMA \"nosuch\""), "{text}");
        assert!(
            !text.contains("refinery") && !text.contains("migration"),
            "{text}"
        );
    }
    // An empty path names nothing to create.
    let err = Database::open(format!("{url} options='-csearch_path='")).unwrap_err();
    assert!(matches!(err, Error::NoSchema { .. }), "{err:?}");
    assert!(
        err.to_string()
            .contains("name an existing schema in the location (options=-csearch_path=NAME)"),
        "{err}"
    );
    let schemas: i64 = admin(&url)
        .query_one(
            "SELECT count(*) FROM pg_namespace WHERE nspname = 'nosuch'",
            &[],
        )
        .unwrap()
        .get(0);
    assert_eq!(schemas, 0);
    assert_eq!(tables("public"), 0);

    admin(&url).batch_execute("CREATE SCHEMA nosuch").unwrap();

    // A user who may not use the schema (no USAGE: PostgreSQL skips it in the path) is
    // told so, not that it does not exist; one who may use but not create in it (a
    // fresh database it does not own: PostgreSQL 15 gives only the owner CREATE on
    // `public`) is told who may not create where, instead of refinery's "permission
    // denied for schema public".
    admin(&url)
        .batch_execute(
            "DROP ROLE IF EXISTS scribe_guest; CREATE ROLE scribe_guest LOGIN; \
             GRANT CONNECT ON DATABASE scribe_no_schema TO scribe_guest",
        )
        .unwrap();
    let guest = format!("{missing} user=scribe_guest");
    let err = Database::open(&guest).unwrap_err();
    assert!(
        matches!(err, Error::NoSchema { unusable: Some(ref s), ref user, .. }
            if &**s == "nosuch" && &**user == "scribe_guest"),
        "{err:?}"
    );
    assert!(
        err.to_string().contains(
            "its search_path (nosuch) names schema \"nosuch\", which user \"scribe_guest\" \
             may not use; grant it (GRANT USAGE, CREATE ON SCHEMA \"nosuch\" TO \"scribe_guest\")"
        ),
        "{err}"
    );
    admin(&url)
        .batch_execute("GRANT USAGE ON SCHEMA nosuch TO scribe_guest")
        .unwrap();
    for location in [guest.clone(), format!("{url} user=scribe_guest")] {
        let err = Database::open(&location).unwrap_err();
        assert!(
            matches!(err, Error::SchemaNotWritable { ref user, .. } if &**user == "scribe_guest"),
            "{location}: {err:?}"
        );
        let text = err.to_string();
        assert!(
            text.starts_with("user \"scribe_guest\" may not create scribe's tables in schema"),
            "{text}"
        );
        assert!(
            text.contains("GRANT CREATE ON DATABASE \"scribe_no_schema\""),
            "{text}"
        );
        assert!(
            !text.contains("refinery") && !text.contains("migration"),
            "{text}"
        );
    }
    assert_eq!(tables("public"), 0);
    assert_eq!(tables("nosuch"), 0);
    // What the message says to grant is enough.
    admin(&url)
        .batch_execute(
            "GRANT CREATE ON SCHEMA nosuch TO scribe_guest; \
             GRANT CREATE ON DATABASE scribe_no_schema TO scribe_guest",
        )
        .unwrap();
    let db = Database::open(&guest).unwrap();
    create_session(&db);
    assert_eq!(
        db.schema_version().unwrap(),
        Database::known_schema_version()
    );
    assert!(tables("nosuch") > 5, "{}", tables("nosuch"));
    assert_eq!(tables("public"), 0);
}

/// An SQLite store holding an id longer than `MAX_ID_BYTES` (written before the rule,
/// here through the query layer): it copies into SQLite whole, and a copy into
/// PostgreSQL is `Error::IdTooLong` naming the kind, the length and the session, before
/// anything is written (the target stays empty and can take a copy later). Before, the
/// server refused the row midway with SQLSTATE 54000 ("index row size … exceeds btree
/// version 4 maximum 2704 for index \"sessions_pkey\"").
#[test]
#[ignore = "needs PostgreSQL: run under .ci/with-postgres"]
fn a_store_with_an_over_long_id_copies_into_sqlite_but_is_refused_by_postgres() {
    let dir = tempfile::tempdir().unwrap();
    let len = 3_000;
    let cases = [
        ("session", incompressible(len, 1)),
        ("part", incompressible(len, 2)),
    ];
    for (i, (what, long)) in cases.iter().enumerate() {
        let source = Database::open(dir.path().join(format!("source{i}.db"))).unwrap();
        let ordinary = common::session(&source, "cli");
        let holder = if *what == "session" {
            source
                .write(|tx| tx.q().create_session(&new_session(long, "cli")))
                .unwrap();
            long.clone()
        } else {
            ordinary.clone()
        };
        source
            .write(|tx| {
                let conn = tx.conn().unwrap();
                let message = new_id(Prefix::Message);
                q::create_message(
                    conn,
                    &scribe_db::testing::bare_message(&message, &holder, "user", now_ms()),
                )?;
                let part = if *what == "part" {
                    long.clone()
                } else {
                    new_id(Prefix::Part)
                };
                common::add_part(conn, &part, &message, &holder, 0, "text", &text("hi"))
            })
            .unwrap();

        let sqlite = Database::open(dir.path().join(format!("copy{i}.db"))).unwrap();
        let report =
            scribe_db::copy::copy(&source, &sqlite, |_| std::ops::ControlFlow::Continue(()))
                .unwrap();
        assert!(report.tables.iter().any(|(t, n)| t == "parts" && *n == 1));
        assert_eq!(
            sqlite.read(|tx| tx.q().count_sessions()).unwrap(),
            source.read(|tx| tx.q().count_sessions()).unwrap()
        );
        assert!(
            sqlite
                .read(|tx| tx.q().get_session(&holder))
                .unwrap()
                .is_some()
        );

        let url = fresh(&format!("scribe_copy_long_{i}"));
        let pg = Database::open(&url).unwrap();
        let err = scribe_db::copy::copy(&source, &pg, |_| std::ops::ControlFlow::Continue(()))
            .unwrap_err();
        let Error::IdTooLong(ref too_long) = err else {
            panic!("{what}: {err:?}");
        };
        assert_eq!((too_long.what, too_long.len), (*what, len), "{err:?}");
        let text = err.to_string();
        assert!(
            text.ends_with("is 3000 bytes long, more than the 1024 an id may have"),
            "{text}"
        );
        if *what == "part" {
            assert_eq!(too_long.session.as_deref(), Some(ordinary.as_str()));
            assert!(text.contains(&format!("(of session {ordinary})")), "{text}");
        }
        assert_eq!(pg.read(|tx| tx.q().count_sessions()).unwrap(), 0);
    }
}

/// A session's source or user id longer than `MAX_ID_BYTES` in an SQLite store (written
/// before the rule, through the query layer): a copy into PostgreSQL is `Error::IdTooLong`
/// naming `source` / `user` and the session, before anything is written. Before, the
/// server refused the row midway (54000 for index "sessions_source" / "sessions_user").
#[test]
#[ignore = "needs PostgreSQL: run under .ci/with-postgres"]
fn a_store_with_an_over_long_source_or_user_is_refused_by_postgres_up_front() {
    let dir = tempfile::tempdir().unwrap();
    let long = incompressible(3_000, 3);
    for (i, what) in ["source", "user"].into_iter().enumerate() {
        let source = Database::open(dir.path().join(format!("long_{what}.db"))).unwrap();
        common::session(&source, "cli");
        let id = new_id(Prefix::Session);
        let params = if what == "source" {
            new_session(&id, &long)
        } else {
            q::CreateSessionParams {
                user_id: Some(&long),
                ..new_session(&id, "cli")
            }
        };
        source.write(|tx| tx.q().create_session(&params)).unwrap();
        let url = fresh(&format!("scribe_copy_long_{what}_{i}"));
        let pg = Database::open(&url).unwrap();
        let err = scribe_db::copy::copy(&source, &pg, |_| std::ops::ControlFlow::Continue(()))
            .unwrap_err();
        let Error::IdTooLong(ref too_long) = err else {
            panic!("{what}: {err:?}");
        };
        assert_eq!((too_long.what, too_long.len), (what, 3_000), "{err:?}");
        assert_eq!(too_long.session.as_deref(), Some(id.as_str()));
        assert_eq!(pg.read(|tx| tx.q().count_sessions()).unwrap(), 0);
    }
}

/// A session title longer than `MAX_ID_BYTES` in an SQLite store (written around the
/// services, which cap titles at 200 characters): a copy into PostgreSQL is
/// `Error::CopyRefused` naming the session and the length, before anything is written.
/// Before, the server refused the row midway (54000 for index "sessions_title_unique").
#[test]
#[ignore = "needs PostgreSQL: run under .ci/with-postgres"]
fn a_store_with_an_over_long_title_is_refused_by_postgres_up_front() {
    let dir = tempfile::tempdir().unwrap();
    let source = Database::open(dir.path().join("long_title.db")).unwrap();
    common::session(&source, "cli");
    let id = new_id(Prefix::Session);
    let long = incompressible(3_000, 5);
    source
        .write(|tx| tx.q().create_session(&new_session(&id, "cli")))
        .unwrap();
    source
        .write(|tx| {
            tx.conn()
                .unwrap()
                .execute("UPDATE sessions SET title = ?1 WHERE id = ?2", [&long, &id])?;
            Ok::<_, Error>(())
        })
        .unwrap();
    let url = fresh("scribe_copy_long_title");
    let pg = Database::open(&url).unwrap();
    let err =
        scribe_db::copy::copy(&source, &pg, |_| std::ops::ControlFlow::Continue(())).unwrap_err();
    let Error::CopyRefused(ref text) = err else {
        panic!("{err:?}");
    };
    assert!(text.contains(&id) && text.contains("3000 bytes"), "{text}");
    assert_eq!(pg.read(|tx| tx.q().count_sessions()).unwrap(), 0);

    // At the bound it is copied.
    let at_bound = incompressible(scribe_db::ids::MAX_ID_BYTES, 6);
    source
        .write(|tx| {
            tx.conn().unwrap().execute(
                "UPDATE sessions SET title = ?1 WHERE id = ?2",
                [&at_bound, &id],
            )?;
            Ok::<_, Error>(())
        })
        .unwrap();
    scribe_db::copy::copy(&source, &pg, |_| std::ops::ControlFlow::Continue(())).unwrap();
    assert_eq!(pg.read(|tx| tx.q().count_sessions()).unwrap(), 2);
}

/// An SQLite store where a session was deleted with foreign keys off (the `sqlite3`
/// shell's default), its messages left behind: a copy into PostgreSQL is
/// `Error::CopyRefused` pointing at `scribe db check`, before anything is written. Before,
/// the server refused the first such row midway with its raw foreign key message.
#[test]
#[ignore = "needs PostgreSQL: run under .ci/with-postgres"]
fn a_store_with_rows_left_by_a_delete_is_refused_up_front() {
    let dir = tempfile::tempdir().unwrap();
    let source = Database::open(dir.path().join("orphans.db")).unwrap();
    let kept = common::session(&source, "cli");
    let gone = common::session(&source, "cli");
    for session in [&kept, &gone] {
        source
            .write(|tx| {
                common::message_with_part(
                    tx.conn().unwrap(),
                    session,
                    "user",
                    "text",
                    &common::text("left"),
                )
            })
            .unwrap();
    }
    let raw = rusqlite::Connection::open(dir.path().join("orphans.db")).unwrap();
    raw.execute_batch(&format!(
        "PRAGMA foreign_keys = OFF; DELETE FROM sessions WHERE id = '{gone}'"
    ))
    .unwrap();
    drop(raw);
    let url = fresh("scribe_copy_orphans");
    let pg = Database::open(&url).unwrap();
    let err =
        scribe_db::copy::copy(&source, &pg, |_| std::ops::ControlFlow::Continue(())).unwrap_err();
    let Error::CopyRefused(ref text) = err else {
        panic!("{err:?}");
    };
    assert!(
        text.contains("rows pointing at rows that do not exist")
            && text.contains("`scribe db check` on it names them"),
        "{text}"
    );
    assert_eq!(pg.read(|tx| tx.q().count_sessions()).unwrap(), 0);
}

/// Two stores in two schemas of one database: PostgreSQL installs `unaccent` and
/// `pg_trgm` once per database, in the first store's schema (here one whose name needs
/// quoting and escaping: a space, upper case). The second store, whose location names
/// only its own schema, migrates, writes words (`unaccent()` in its trigger), finds them
/// folded and by substring, from connections opened after the first, and checks clean.
/// Before, its migration failed with `text search dictionary "unaccent" does not exist`.
#[test]
#[ignore = "needs PostgreSQL: run under .ci/with-postgres"]
fn a_second_store_in_another_schema_finds_the_extensions_of_the_first() {
    use scribe_db::search::{self, SearchFilter, TextQuery};

    let url = fresh("scribe_two_schemas");
    admin(&url)
        .batch_execute("CREATE SCHEMA \"First Store\"; CREATE SCHEMA second")
        .unwrap();
    let first =
        Database::open(format!("{url} options='-csearch_path=\"First\\\\ Store\"'")).unwrap();
    let session = create_session(&first);
    first
        .write(|tx| message_with_part(tx.q(), &session, "premier café"))
        .unwrap();
    let installed: Vec<String> = admin(&url)
        .query(
            "SELECT extnamespace::regnamespace::text FROM pg_extension \
             WHERE extname IN ('unaccent', 'pg_trgm')",
            &[],
        )
        .unwrap()
        .iter()
        .map(|row| row.get(0))
        .collect();
    assert_eq!(installed, ["\"First Store\"", "\"First Store\""]);

    let location = format!("{url} options='-csearch_path=second'");
    let options = Options {
        max_idle_readers: 1,
        ..Options::default()
    };
    let second = Database::open_with(&location, options.clone()).unwrap();
    let session = create_session(&second);
    // More writes at once than the pool keeps idle, so some run on connections opened
    // after the open.
    std::thread::scope(|s| {
        for i in 0..6 {
            let (second, session) = (&second, &session);
            s.spawn(move || {
                second
                    .write(|tx| {
                        message_with_part(tx.q(), session, &format!("déjà vu {i} 数据库迁移"))
                    })
                    .unwrap();
            });
        }
    });
    let again = Database::open_with(&location, options).unwrap();
    for (query, hits) in [
        (TextQuery::Words("deja".to_owned()), 6),
        (TextQuery::Words("cafe".to_owned()), 0),
        (TextQuery::Trigrams("\"库迁移\"".to_owned()), 6),
    ] {
        let found = again
            .read(|tx| search::search(tx, &SearchFilter::new(query.clone())))
            .unwrap();
        assert_eq!(found.len(), hits, "{query:?}");
    }
    assert_eq!(again.check().unwrap().problems(), Vec::<String>::new());
    let found = first
        .read(|tx| search::search(tx, &SearchFilter::new(TextQuery::Words("cafe".to_owned()))))
        .unwrap();
    assert_eq!(found.len(), 1);
}
