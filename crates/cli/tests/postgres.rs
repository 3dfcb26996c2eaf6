//! `scribe --db postgres://…` against a real server: a fresh database per test.
//!
//! They need a server: `.ci/with-postgres cargo test -p scribe-cli --test postgres --
//! --ignored` (`.ci/run` does). Without one they are listed as ignored, never passed.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::process::{Command, Output};

/// A new, empty database named `name` on the test server, as a keyword string.
fn fresh(name: &str) -> String {
    scribe_db::testing::fresh_test_database(name).unwrap()
}

/// `scribe ARGS` with `SCRIBE_DB` set to `db` (or unset).
fn scribe(args: &[&str], db: Option<&str>) -> Output {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_scribe"));
    cmd.args(args).env_remove("SCRIBE_DB");
    if let Some(db) = db {
        cmd.env("SCRIBE_DB", db);
    }
    cmd.output().unwrap()
}

fn ok(args: &[&str], db: Option<&str>) -> String {
    let out = scribe(args, db);
    assert!(
        out.status.success(),
        "scribe {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

fn json(args: &[&str], db: Option<&str>) -> serde_json::Value {
    serde_json::from_str(&ok(args, db)).unwrap()
}

/// `SCRIBE_DB` at a PostgreSQL database of another program (a table `foo`, no Scribe
/// schema history): reading and writing commands alike refuse it in one line, exit 1, as
/// they refuse another program's SQLite file, and add nothing to it.
#[test]
#[ignore = "needs PostgreSQL: run under .ci/with-postgres"]
fn another_programs_postgres_database_is_refused_and_left_untouched() {
    let url = fresh("cli_foreign");
    let mut admin = postgres::Client::connect(&url, postgres::NoTls).unwrap();
    admin.batch_execute("CREATE TABLE foo (id int)").unwrap();
    let relations = |admin: &mut postgres::Client| -> i64 {
        admin
            .query_one(
                "SELECT count(*) FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace \
                 WHERE n.nspname = current_schema()",
                &[],
            )
            .unwrap()
            .get(0)
    };
    assert_eq!(relations(&mut admin), 1);
    for args in [&["list"][..], &["db", "info"][..], &["db", "migrate"][..]] {
        let out = scribe(args, Some(&url));
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "{args:?}: {err}");
        assert_eq!(err.lines().count(), 1, "{err}");
        assert!(
            err.contains("PostgreSQL database of another program"),
            "{err}"
        );
        assert_eq!(relations(&mut admin), 1, "{args:?} created something");
    }
}

/// The `db` commands on PostgreSQL: migrate once (under its lock), info with the server's
/// version and the rows, a copy from an SQLite file, and a check that passes.
#[test]
#[ignore = "needs PostgreSQL: run under .ci/with-postgres"]
fn db_migrate_info_copy_and_check_run_on_postgres() {
    let url = fresh("cli_db_commands");
    let known = scribe_db::Database::known_schema_version();

    let text = ok(&["--db", &url, "db", "migrate"], None);
    assert!(text.contains("applied V1__initial"), "{text}");
    assert!(
        text.contains(&format!("migrated schema from version 0 to {known}")),
        "{text}"
    );
    // SCRIBE_DB works as --db does; the second run has nothing to apply.
    let text = ok(&["db", "migrate"], Some(&url));
    assert!(
        text.contains(&format!("schema is up to date (version {known})")),
        "{text}"
    );

    let text = ok(&["db", "info"], Some(&url));
    assert!(text.contains("backend         PostgreSQL 1"), "{text}");
    assert!(text.contains("dbname=cli_db_commands"), "{text}");

    // A real store, made on SQLite by the demo, copied over.
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("scribe.db");
    let file = file.to_str().unwrap();
    ok(&["--db", file, "demo"], None);
    let sqlite = json(&["--db", file, "db", "info", "--json"], None);
    let target = fresh("cli_db_copy");
    let text = ok(&["db", "copy", file, &target], None);
    assert!(text.contains("copied"), "{text}");
    let pg = json(&["--db", &target, "db", "info", "--json"], None);
    assert_eq!(pg["backend"], "postgres");
    assert_eq!(sqlite["backend"], "sqlite");
    assert_eq!(pg["schema_version"], known);
    assert_eq!(pg["rows"], sqlite["rows"], "every row went over");
    assert!(pg["rows"]["messages"].as_i64().unwrap() > 0);
    assert!(pg["file_size"].as_u64().unwrap() > 0);

    let text = ok(&["--db", &target, "db", "check"], None);
    for line in [
        "schema_version     ok",
        "constraints        ok",
        "part_sessions      ok",
        "message_counts     ok",
        "search (words)     ok",
        "search (trigrams)  ok",
        "search_documents   ok",
        "skipped: page and b-tree structure",
    ] {
        assert!(text.contains(line), "{line:?} in {text}");
    }
}

/// `db check` on PostgreSQL finds what plain SQL can see and fails with exit 1, naming it.
#[test]
#[ignore = "needs PostgreSQL: run under .ci/with-postgres"]
fn db_check_on_postgres_reports_what_is_wrong() {
    let url = fresh("cli_db_check_broken");
    ok(&["--db", &url, "db", "migrate"], None);
    let mut admin = postgres::Client::connect(&url, postgres::NoTls).unwrap();
    admin
        .batch_execute(
            "DROP INDEX parts_fts_trigram;
             ALTER TABLE sessions ADD CONSTRAINT later CHECK (created_at > 0) NOT VALID;
             INSERT INTO parts_fts VALUES (-1, 'no such part', scribe_search_words('no such part'));
             INSERT INTO sessions (id, created_at, updated_at, message_count) \
             VALUES ('ses_counted', 1, 1, 2);",
        )
        .unwrap();
    let out = scribe(&["--db", &url, "db", "check"], None);
    let (text, err) = (
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr),
    );
    assert_eq!(out.status.code(), Some(1), "{text}{err}");
    assert!(
        text.contains("search (trigrams)  no such index on parts_fts"),
        "{text}"
    );
    assert!(
        text.contains("constraints        not validated: sessions.later"),
        "{text}"
    );
    assert!(text.contains("search (words)     ok"), "{text}");
    assert!(
        text.contains("search_documents   1 part(s) whose stored search text"),
        "{text}"
    );
    assert!(
        text.contains(
            "message_counts     1 session's count differs from its stored messages \
             (ses_counted: message_count 2, messages 0); set with UPDATE sessions"
        ),
        "{text}"
    );
    assert!(
        err.contains("search (trigrams), constraints, message_counts, search_documents"),
        "{err}"
    );
}

/// `db check` on PostgreSQL fails a trigram index over every part's text: since V15 it
/// holds only text with characters of scripts written without spaces.
#[test]
#[ignore = "needs PostgreSQL: run under .ci/with-postgres"]
fn db_check_on_postgres_reports_a_trigram_index_over_all_text() {
    let url = fresh("cli_db_check_trigrams");
    ok(&["--db", &url, "db", "migrate"], None);
    let text = ok(&["--db", &url, "db", "check"], None);
    assert!(text.contains("search (trigrams)  ok"), "{text}");
    let mut admin = postgres::Client::connect(&url, postgres::NoTls).unwrap();
    admin
        .batch_execute(
            "DROP INDEX parts_fts_trigram;
             CREATE INDEX parts_fts_trigram ON parts_fts USING gin (search_text gin_trgm_ops);",
        )
        .unwrap();
    let out = scribe(&["--db", &url, "db", "check"], None);
    let text = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(1), "{text}");
    assert!(
        text.contains(
            "search (trigrams)  the index is not limited to the text that needs it \
             (expected WHERE spaceless)"
        ),
        "{text}"
    );
}

/// The commands over one session run on PostgreSQL and answer as they do on SQLite for
/// the same store: show, stats, export, rename, fork, archive, unarchive, delete, prune,
/// and an import of an export file.
#[test]
#[ignore = "needs PostgreSQL: run under .ci/with-postgres"]
fn the_main_commands_run_on_postgres_as_on_sqlite() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("scribe.db");
    let file = file.to_str().unwrap();
    ok(&["--db", file, "demo"], None);
    let url = fresh("cli_main_commands");
    ok(&["db", "copy", file, &url], None);
    let listed = json(&["--db", file, "list", "--all", "--json"], None);
    let id = listed["sessions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["id"].as_str().unwrap().to_owned())
        .find(|id| id.starts_with("ses_"))
        .unwrap();

    // Reads: the same answer from both backends.
    for args in [
        &["show", id.as_str()][..],
        &["show", id.as_str(), "--json"][..],
        &["stats"][..],
        &["stats", "--json"][..],
        &["list"][..],
        &["list", "--all", "--json"][..],
    ] {
        let on_sqlite = ok(args, Some(file));
        let on_postgres = ok(args, Some(&url));
        assert!(
            on_postgres == on_sqlite,
            "scribe {args:?} differs between backends"
        );
        assert!(!on_postgres.is_empty(), "scribe {args:?}");
    }
    // Search, the whole export and the demo's agent loop run there too.
    // (the demo's first prompt asks "Which files call add() …")
    let hits = |db: &str| json(&["search", "files", "--json"], Some(db))["hits"].clone();
    let on_postgres = hits(&url);
    assert!(
        on_postgres.as_array().is_some_and(|h| !h.is_empty()),
        "{on_postgres}"
    );
    assert_eq!(
        on_postgres.as_array().map(Vec::len),
        hits(file).as_array().map(Vec::len)
    );
    assert!(!ok(&["export", "--all"], Some(&url)).is_empty());
    ok(&["demo"], Some(&fresh("cli_demo")));

    // An export is the same but for the time it was made.
    let export = |db: &str| {
        let mut doc = json(&["export", id.as_str()], Some(db));
        doc.as_object_mut().unwrap().remove("exported_at");
        doc
    };
    assert!(export(&url) == export(file), "the exports differ");
    // A prefix names the session on PostgreSQL too.
    let prefix = &id[..id.len() - 6];
    assert!(ok(&["show", prefix], Some(&url)) == ok(&["show", &id], Some(&url)));

    // Writes.
    ok(&["rename", &id, "renamed on postgres"], Some(&url));
    let shown = json(&["show", "renamed on postgres", "--json"], Some(&url));
    assert_eq!(shown["session"]["id"], id.as_str(), "{shown}");
    let text = ok(&["fork", &id], Some(&url));
    assert!(text.contains("ses_"), "{text}");
    ok(&["archive", &id], Some(&url));
    ok(&["unarchive", &id], Some(&url));
    let before = json(&["db", "info", "--json"], Some(&url));
    ok(&["delete", &id, "--yes"], Some(&url));
    let after = json(&["db", "info", "--json"], Some(&url));
    assert!(
        after["rows"]["messages"].as_i64() < before["rows"]["messages"].as_i64(),
        "{before} {after}"
    );
    ok(&["prune", "--older-than", "3650", "--yes"], Some(&url));

    // An export file of the SQLite store imports into an empty PostgreSQL database.
    let export = dir.path().join("all.jsonl");
    let text = ok(
        &[
            "export",
            "--all",
            "--format",
            "jsonl",
            "-o",
            export.to_str().unwrap(),
        ],
        Some(file),
    );
    let _ = text;
    let target = fresh("cli_import");
    ok(&["import", export.to_str().unwrap()], Some(&target));
    let imported = json(&["db", "info", "--json"], Some(&target));
    let original = json(&["db", "info", "--json"], Some(file));
    assert_eq!(imported["rows"]["sessions"], original["rows"]["sessions"]);
    assert_eq!(imported["rows"]["messages"], original["rows"]["messages"]);
    assert!(ok(&["show", &id], Some(&target)) == ok(&["show", &id], Some(file)));
}

/// `db reindex` on PostgreSQL computes the search documents again from the parts: a
/// stored document changed behind the triggers' back is what `db check` reports, with
/// the advice to reindex, and after it the check is clean and the part is found by its
/// own words again.
#[test]
#[ignore = "needs PostgreSQL: run under .ci/with-postgres"]
fn db_reindex_rebuilds_the_search_documents_on_postgres() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("scribe.db");
    let file = file.to_str().unwrap();
    ok(&["--db", file, "demo"], None);
    let url = fresh("cli_reindex");
    ok(&["db", "copy", file, &url], None);
    let mut admin = postgres::Client::connect(&url, postgres::NoTls).unwrap();
    admin
        .batch_execute(
            "UPDATE parts_fts SET search_text = 'stale', words = to_tsvector('simple', 'stale') \
             WHERE seq = (SELECT p.seq FROM parts AS p \
                          WHERE p.data LIKE '%The add test fails%' ORDER BY p.seq LIMIT 1)",
        )
        .unwrap();
    let found = |query: &str| -> usize {
        json(&["search", query, "--json"], Some(&url))["hits"]
            .as_array()
            .unwrap()
            .len()
    };
    assert_eq!(found("\"add test fails\""), 0);

    let out = scribe(&["db", "check"], Some(&url));
    assert_eq!(out.status.code(), Some(1));
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        stdout.contains("1 part(s) whose stored search text")
            && stdout.contains("rebuild them with `scribe db reindex`"),
        "{stdout}"
    );

    let text = ok(&["db", "reindex"], Some(&url));
    assert!(
        text.contains("dbname=cli_reindex") && text.contains("rebuilt parts_fts from the parts"),
        "{text}"
    );
    ok(&["db", "check"], Some(&url));
    assert_eq!(found("\"add test fails\""), 1);
}

/// `db vacuum` on PostgreSQL runs VACUUM (ANALYZE) on every table of the schema and says
/// which, with their size; the rows are all still there, and the database can be read
/// and written afterwards.
#[test]
#[ignore = "needs PostgreSQL: run under .ci/with-postgres"]
fn db_vacuum_runs_vacuum_analyze_on_postgres() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("scribe.db");
    let file = file.to_str().unwrap();
    ok(&["--db", file, "demo"], None);
    let url = fresh("cli_vacuum");
    ok(&["db", "copy", file, &url], None);
    let before = json(&["db", "info", "--json"], Some(&url));

    let text = ok(&["db", "vacuum"], Some(&url));
    assert!(text.contains("dbname=cli_vacuum"), "{text}");
    assert!(text.contains("VACUUM (ANALYZE) of "), "{text}");
    for table in [
        "files",
        "messages",
        "parts",
        "sessions",
        "refinery_schema_history",
    ] {
        assert!(text.contains(table), "{table} in {text}");
    }
    assert!(text.contains("tables with their indexes: "), "{text}");

    // The server analyzed every table just now.
    let mut admin = postgres::Client::connect(&url, postgres::NoTls).unwrap();
    let never: Vec<String> = admin
        .query(
            "SELECT relname::text FROM pg_stat_user_tables \
             WHERE last_vacuum IS NULL OR last_analyze IS NULL ORDER BY relname",
            &[],
        )
        .unwrap()
        .iter()
        .map(|row| row.get(0))
        .collect();
    assert!(never.is_empty(), "not vacuumed and analyzed: {never:?}");
    let after = json(&["db", "info", "--json"], Some(&url));
    assert_eq!(after["rows"], before["rows"], "a vacuum keeps every row");
    // Still a working store.
    ok(
        &["rename", "Demo: fix the failing add test", "after vacuum"],
        Some(&url),
    );
    assert!(ok(&["list"], Some(&url)).contains("after vacuum"));
}

/// `scribe serve --db postgres://…` as a user runs it: the printed line names the
/// database without its password, and the API answers with what `scribe … --json` prints
/// for the same store.
#[test]
#[ignore = "needs PostgreSQL: run under .ci/with-postgres"]
fn serve_runs_on_postgres_and_never_prints_the_password() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("scribe.db");
    let file = file.to_str().unwrap();
    ok(&["--db", file, "demo"], None);
    // The test server trusts local connections, so the password is only there to be hidden.
    let url = format!("{} password=s3cret", fresh("cli_serve"));
    ok(&["db", "copy", file, &url], None);

    let mut cmd = Command::new(env!("CARGO_BIN_EXE_scribe"));
    cmd.args(["serve", "--addr", "127.0.0.1:0"])
        .env("SCRIBE_DB", &url);
    let server = common::Serving::spawn(cmd);
    let line = server.line.clone();
    let answers = (
        server.json("/api/stats?by=model"),
        server.json("/api/sessions"),
    );
    drop(server);

    assert!(line.contains("(read-only)"), "{line}");
    assert!(line.contains("dbname=cli_serve"), "{line}");
    assert!(line.contains("password=***"), "{line}");
    assert!(
        !line.contains("s3cret"),
        "the password is never shown: {line}"
    );
    let (stats, sessions) = answers;
    assert_eq!(
        stats,
        json(&["stats", "--by", "model", "--json"], Some(&url))
    );
    let listed = json(&["list", "--json"], Some(&url));
    assert_eq!(sessions["sessions"], listed["sessions"]);
    assert!(!sessions["sessions"].as_array().unwrap().is_empty());
}

/// Rows another program wrote into the shared database: sessions and messages created past
/// year 9999 and token counts at `i64::MAX`. `stats` by every grouping answers (the time counts on
/// 9999-12-31, the sums clamp at `i64::MAX`, costs at `f64::MAX`) instead of failing with 'timestamp out of
/// range' or 'bigint out of range'.
#[test]
#[ignore = "needs PostgreSQL: run under .ci/with-postgres"]
fn stats_on_postgres_survive_times_and_counts_out_of_range() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("scribe.db");
    let file = file.to_str().unwrap();
    // Two sessions, so that their costs near f64::MAX sum past it.
    ok(&["--db", file, "demo"], None);
    ok(&["--db", file, "demo"], None);
    let url = fresh("cli_damaged_rows");
    ok(&["db", "copy", file, &url], None);
    let mut client = postgres::Client::connect(&url, postgres::NoTls).unwrap();
    client
        .execute(
            "UPDATE sessions SET created_at = $1, input_tokens = $1, api_call_count = $1,
                 estimated_cost_usd = $2",
            &[&i64::MAX, &f64::MAX],
        )
        .unwrap();
    // Usage counts on the day of the message that carries it.
    client
        .execute("UPDATE messages SET created_at = $1", &[&i64::MAX])
        .unwrap();
    for by in ["model", "source", "day"] {
        let stats = json(&["--db", &url, "stats", "--by", by, "--json"], None);
        assert_eq!(
            stats["totals"]["tokens"]["input"],
            i64::MAX,
            "{by}: {stats}"
        );
        assert_eq!(stats["totals"]["api_calls"], i64::MAX, "{by}: {stats}");
        // Costs sum to at most f64::MAX ('value out of range: overflow' before).
        assert_eq!(stats["totals"]["cost_usd"], f64::MAX, "{by}: {stats}");
        if by == "day" {
            assert_eq!(stats["rows"][0]["key"], "9999-12-31", "{stats}");
        }
    }
    // The web viewer's usage chart and top sessions (bigint addition overflowed there).
    let (status, body) = serve_get(&url, "/api/usage");
    assert_eq!(status, 200, "{body}");
    assert!(body.contains("9999-12-31"), "{body}");
}

/// Starts `scribe serve` on `db`, answers one `GET path` (status, body), and stops it.
fn serve_get(db: &str, path: &str) -> (u16, String) {
    common::Serving::start(db).get_text(path)
}

/// A store whose parts hold the NUL character (a pasted text, a tool's output of a binary
/// file) copies into PostgreSQL and back with every session's export unchanged; there
/// `list` previews the text (the NUL as a space), `search` finds the words on either side
/// of a NUL and `db check` is clean. Until schema V24 the copy failed at PostgreSQL's
/// CHECK on the part JSON (`\u0000`, which jsonb refuses).
#[test]
#[ignore = "needs PostgreSQL: run under .ci/with-postgres"]
fn parts_holding_nul_copy_list_search_and_check_on_postgres() {
    use scribe_message::{NewMessage, Part, Role};
    use scribe_session::NewSession;

    let env = common::Env::new();
    let id = {
        let (sessions, messages) = env.services();
        let s = sessions.create(NewSession::default()).unwrap();
        messages
            .create(NewMessage::new(
                &s.id,
                Role::User,
                vec![Part::text("look\u{0}here please")],
            ))
            .unwrap();
        let mut tool = Part::tool(
            "call_1",
            "bash",
            serde_json::json!({"command": "cat a.bin"}),
        );
        if let Part::Tool(t) = &mut tool {
            t.state.start(1).unwrap();
            t.state
                .complete("ELF\u{0}\u{1}tailword", "bash", serde_json::Value::Null, 2)
                .unwrap();
        }
        messages
            .create(NewMessage::new(&s.id, Role::Assistant, vec![tool]))
            .unwrap();
        s.id
    };
    let file = env.db.to_str().unwrap();
    let url = fresh("cli_nul_parts");
    ok(&["db", "copy", file, &url], None);

    let export = |db: &str| {
        let mut doc = json(&["export", id.as_str()], Some(db));
        doc.as_object_mut().unwrap().remove("exported_at");
        doc
    };
    let original = export(file);
    assert!(original.to_string().contains("\\u0000"), "{original}");
    assert!(export(&url) == original, "the exports differ");

    let listed = json(&["list", "--json"], Some(&url));
    assert_eq!(
        listed["sessions"][0]["preview"], "look here please",
        "{listed}"
    );
    for word in ["tailword", "here"] {
        let hits = json(&["search", word, "--json"], Some(&url))["hits"].clone();
        assert_eq!(hits.as_array().map(Vec::len), Some(1), "{word}: {hits}");
    }
    ok(&["--db", &url, "db", "check"], None);

    let back = env.path("back.db");
    let back = back.to_str().unwrap();
    ok(&["db", "copy", &url, back], None);
    assert!(
        export(back) == original,
        "the exports differ after the copy back"
    );
}

/// `SCRIBE_DB` whose `search_path` names a schema that does not exist: `db info`, `list`
/// and `db migrate` each say so in one line naming the schema and what to do, exit 1, and
/// create nothing (before: refinery's "error asserting migrations table").
#[test]
#[ignore = "needs PostgreSQL: run under .ci/with-postgres"]
fn a_search_path_naming_no_schema_is_one_clear_line() {
    let url = fresh("cli_no_schema");
    let db = format!("{url} options='-csearch_path=scribe_here'");
    for args in [&["db", "info"][..], &["list"][..], &["db", "migrate"][..]] {
        let out = scribe(args, Some(&db));
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "{args:?}: {err}");
        assert_eq!(err.lines().count(), 1, "{err}");
        assert!(
            err.contains("no schema for scribe's tables: its search_path (scribe_here)"),
            "{err}"
        );
        assert!(err.contains("CREATE SCHEMA \"scribe_here\""), "{err}");
    }
    let mut admin = postgres::Client::connect(&url, postgres::NoTls).unwrap();
    admin.batch_execute("CREATE SCHEMA scribe_here").unwrap();
    // A user who may use it but not create in it: one line naming them, not the server's
    // "permission denied for schema".
    admin
        .batch_execute(
            "DROP ROLE IF EXISTS cli_guest; CREATE ROLE cli_guest LOGIN; \
             GRANT USAGE ON SCHEMA scribe_here TO cli_guest",
        )
        .unwrap();
    let guest = format!("{db} user=cli_guest");
    for args in [&["db", "info"][..], &["list"][..], &["db", "migrate"][..]] {
        let out = scribe(args, Some(&guest));
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "{args:?}: {err}");
        assert_eq!(err.lines().count(), 1, "{err}");
        assert!(
            err.contains(
                "user \"cli_guest\" may not create scribe's tables in schema \"scribe_here\""
            ),
            "{err}"
        );
    }
    ok(&["db", "migrate"], Some(&db));
    let info = json(&["db", "info", "--json"], Some(&db));
    assert_eq!(
        info["schema_version"],
        scribe_db::Database::known_schema_version()
    );
}
