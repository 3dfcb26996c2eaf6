//! A user's pass over `scribe` on PostgreSQL: the agents' histories imported into an
//! SQLite file, copied to a PostgreSQL database, and every command asked the same thing
//! of both (the real binary); and the ways a PostgreSQL location can be wrong, each one
//! clear line without the password.
//!
//! They need a server: `.ci/with-postgres cargo test -p scribe-cli --test postgres_pass --
//! --ignored` (`.ci/run` does). Without one they are listed as ignored, never passed.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::collections::BTreeSet;
use std::path::Path;
use std::process::{Command, Output};

/// A new, empty database named `name` on the test server, as a keyword string.
fn fresh(name: &str) -> String {
    scribe_db::testing::fresh_test_database(name).unwrap()
}

/// `scribe --db DB ARGS` (SCRIBE_DB unset).
fn scribe(db: &str, args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_scribe"))
        .arg("--db")
        .arg(db)
        .args(args)
        .env_remove("SCRIBE_DB")
        .env_remove("NO_COLOR")
        .output()
        .unwrap()
}

fn ok(db: &str, args: &[&str]) -> String {
    let out = scribe(db, args);
    assert!(
        out.status.success(),
        "scribe {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

fn json(db: &str, args: &[&str]) -> serde_json::Value {
    serde_json::from_str(&ok(db, args)).unwrap()
}

/// What a user sees of one run: exit status, stdout, stderr.
fn seen(db: &str, args: &[&str]) -> (Option<i32>, String, String) {
    let out = scribe(db, args);
    (
        out.status.code(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// The same run on both stores answers the same, byte for byte (stderr too).
fn same(file: &str, url: &str, args: &[&str]) {
    let (on_sqlite, on_postgres) = (seen(file, args), seen(url, args));
    assert!(
        on_sqlite == on_postgres,
        "scribe {args:?} differs between backends:\nSQLite: {on_sqlite:?}\nPostgreSQL: {on_postgres:?}"
    );
}

/// Every agent's fixture history imported into the SQLite file `file`, plus one session
/// of text in scripts written without spaces, with accents and ligatures.
fn import_histories(file: &str, dir: &Path) {
    let fixtures = Path::new(env!("CARGO_MANIFEST_DIR")).join("../import/tests/fixtures");
    for (agent, sub) in [
        ("claude-code", "claude"),
        ("codex", "codex"),
        ("gemini", "gemini"),
        ("hermes", "hermes"),
        ("opencode", "opencode"),
        ("cline", "cline"),
        ("roo-code", "roo-code"),
        ("kilo-code", "kilo-code"),
        ("copilot", "copilot/session-state"),
        ("pi", "pi/sessions"),
        ("openclaw", "openclaw/agents"),
        ("amp", "amp/threads"),
        ("droid", "droid/sessions"),
        ("grok", "grok/sessions"),
        ("qwen", "qwen/projects"),
        ("antigravity", "antigravity"),
        ("kimi", "kimi"),
        ("vscode", "vscode/User"),
        ("continue", "continue/sessions"),
        ("aider", "aider"),
        ("mistral-vibe", "vibe"),
        ("openhands", "openhands"),
        ("kiro", "kiro/sessions/cli"),
    ] {
        let from = fixtures.join(sub);
        ok(file, &["import", "--from", agent, from.to_str().unwrap()]);
    }
    // Goose's, the Kilo CLI's, Cursor's, Zed's, Crush's, Kiro's and OpenClaw's agent
    // database fixtures are dumps of their databases: each is built from its dump first.
    for (agent, dump, db) in [
        ("goose", "goose/sessions.sql", "goose/sessions.db"),
        ("kilo", "kilo/kilo.sql", "kilo/kilo.db"),
        (
            "cursor",
            "cursor/global.sql",
            "cursor/globalStorage/state.vscdb",
        ),
        (
            "cursor",
            "cursor/agent.sql",
            "cursor/chats/w/9c2e4b7a/store.db",
        ),
        ("zed", "zed/threads.sql", "zed/threads/threads.db"),
        ("crush", "crush/crush.sql", "crush/.crush/crush.db"),
        ("kiro", "kiro/kiro.sql", "kiro/kiro-cli/data.sqlite3"),
        ("kiro", "kiro/amazon-q.sql", "kiro/amazon-q/data.sqlite3"),
        (
            "openclaw",
            "openclaw/agents/main/agent/openclaw-agent.sql",
            "openclaw/agent/openclaw-agent.sqlite",
        ),
    ] {
        let db = dir.join(db);
        std::fs::create_dir_all(db.parent().unwrap()).unwrap();
        let dump = std::fs::read_to_string(fixtures.join(dump)).unwrap();
        rusqlite::Connection::open(&db)
            .unwrap()
            .execute_batch(&dump)
            .unwrap();
        ok(file, &["import", "--from", agent, db.to_str().unwrap()]);
    }
    let texts = [
        "数据库迁移失败了，请检查日志",
        "日本語のテストを書いてください",
        "한국어 검색 테스트입니다",
        "Straße und naïve Café ÉCOLE",
        "mixed 中文 and English words together",
    ];
    let base = 1_790_000_000_000_i64;
    let messages: Vec<serde_json::Value> = texts
        .iter()
        .enumerate()
        .map(|(i, text)| {
            let at = base + 1000 * i64::try_from(i).unwrap();
            serde_json::json!({
                "id": format!("msg_pass{i:04}"), "session_id": "ses_pass", "parent_id": null,
                "role": if i % 2 == 0 { "user" } else { "assistant" },
                "agent": "opencode", "provider": "openai", "model": "gpt-4o-mini",
                "finish_reason": null, "is_summary": false,
                "usage": {"input": 10 * i, "output": i, "cache_read": 0, "cache_write": 0, "reasoning": 0},
                "cost_usd": 0.001, "error": null, "created_at": at, "updated_at": at,
                "finished_at": null,
                "parts": [{"id": format!("prt_pass{i:04}"), "position": 0,
                           "part": {"type": "text", "text": text},
                           "created_at": at, "updated_at": at}]
            })
        })
        .collect();
    let doc = serde_json::json!({
        "format": "scribe-export", "version": 1, "exported_at": base,
        "sessions": [{
            "session": {
                "id": "ses_pass", "parent_session_id": null, "kind": "normal",
                "source": "opencode", "user_id": null, "directory": "/tmp/多言語",
                "title": "多言語 テスト", "model": "gpt-4o-mini", "model_config": null,
                "system_prompt": null, "permission": null, "message_count": texts.len(),
                "tool_call_count": 0, "api_call_count": 0,
                "tokens": {"input": 0, "output": 0, "cache_read": 0, "cache_write": 0, "reasoning": 0},
                "estimated_cost_usd": 0.0, "actual_cost_usd": null, "billing_provider": null,
                "billing_base_url": null, "billing_mode": null, "cost_status": null,
                "cost_source": null, "pricing_version": null, "summary_message_id": null,
                "created_at": base, "updated_at": base + 10_000, "ended_at": null,
                "end_reason": null, "archived_at": null, "compacting_at": null
            },
            "messages": messages,
            "files": []
        }]
    });
    let export = dir.join("pass.json");
    std::fs::write(&export, doc.to_string()).unwrap();
    ok(file, &["import", export.to_str().unwrap()]);
}

/// An export without the time it was made.
fn export_doc(db: &str, args: &[&str]) -> serde_json::Value {
    let mut doc = json(db, args);
    doc.as_object_mut().unwrap().remove("exported_at");
    doc
}

/// The messages a search finds (their order may differ between backends: bm25 and
/// `ts_rank_cd`, ARCHITECTURE.md's "What differs").
fn found(db: &str, args: &[&str]) -> BTreeSet<String> {
    let mut all = vec!["search"];
    all.extend_from_slice(args);
    all.extend_from_slice(&["--json", "-n", "500"]);
    json(db, &all)["hits"]
        .as_array()
        .unwrap()
        .iter()
        .map(|hit| hit["message_id"].as_str().unwrap().to_owned())
        .collect()
}

/// The imported histories on SQLite and on PostgreSQL (a `db copy`): every reading
/// command, its main flags and its failures answer the same on both; search finds the
/// same messages for words, phrases, prefixes, CJK and accented text, under every
/// filter; the writing commands say the same and leave the same stores; `db copy` back
/// and an export imported elsewhere give the store back as it was.
#[test]
#[ignore = "needs PostgreSQL: run under .ci/with-postgres"]
fn every_command_answers_on_postgres_as_on_sqlite() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("scribe.db");
    let file = file.to_str().unwrap();
    import_histories(file, dir.path());
    let url = fresh("cli_pass_store");
    ok(file, &["db", "copy", file, &url]);

    let listed = json(file, &["list", "--all", "--json"]);
    let ids: Vec<String> = listed["sessions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["id"].as_str().unwrap().to_owned())
        .collect();
    assert!(ids.len() >= 15, "{listed}");

    // Reads, their flags and their failures.
    let mut runs: Vec<Vec<String>> = [
        &["list"][..],
        &["list", "--all"],
        &["list", "--json"],
        &["list", "--all", "--json", "--sort", "created"],
        &["list", "--sort", "active", "-n", "3"],
        &["list", "--source", "codex"],
        &["list", "--source", "hermes", "--json"],
        &["list", "--source", "nobody"],
        &["list", "-n", "0"],
        &["show", "多言語 テスト"],
        &["show", "Stage0 small fixture", "--json"],
        &["show", "s"],
        &["show", "no such session"],
        &["stats"],
        &["stats", "--json"],
        &["stats", "--by", "source"],
        &["stats", "--by", "day", "--json"],
        &["stats", "--by", "model", "--since", "2026-01-01"],
        &["export", "--all", "--format", "jsonl"],
        &["export", "--all", "--format", "markdown"],
        &["export", "small", "--format", "markdown"],
        &["search", "fi"],
        &["search", "nothingmatchesthis"],
        &["search", "files", "--session", "no such session"],
        &["search", "files", "-n", "0"],
        &["completions", "bash"],
    ]
    .iter()
    .map(|args| args.iter().map(ToString::to_string).collect())
    .collect();
    for id in &ids {
        runs.push(vec!["show".into(), id.clone()]);
        runs.push(vec!["show".into(), id.clone(), "--json".into()]);
    }
    for args in &runs {
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        same(file, &url, &args);
    }
    assert!(export_doc(file, &["export", "--all"]) == export_doc(&url, &["export", "--all"]));

    // Search: the same messages (the order is the ranking's).
    for query in [
        "files",
        "fixture",
        "\"echo fixture\"",
        "fixture please",
        "fix*",
        "todo*",
        "test -fixture",
        "a OR b",
        "add(2, 2)",
        "2239bcba",
        "数据库",
        "数",
        "迁移失败",
        "テスト",
        "日本",
        "한국어",
        "English 中文",
        "\"中文 and\"",
        "naive",
        "NAÏVE",
        "cafe",
        "école",
        "straße",
    ] {
        let on_sqlite = found(file, &[query]);
        assert!(
            on_sqlite == found(&url, &[query]),
            "search {query:?} found other messages on PostgreSQL"
        );
    }
    assert!(!found(file, &["数据库"]).is_empty());
    assert!(!found(file, &["\"echo fixture\""]).is_empty());
    for filter in [
        &["--source", "codex"][..],
        &["--source", "codex", "--source", "gemini"],
        &["--exclude-source", "claude-code"],
        &["--role", "user"],
        &["--role", "tool", "--role", "assistant"],
        &["--session", "small"],
        &["--since", "2026-01-01"],
    ] {
        for query in ["the", "files", "日本"] {
            let mut args = vec![query];
            args.extend_from_slice(filter);
            assert!(
                found(file, &args) == found(&url, &args),
                "search {args:?} found other messages on PostgreSQL"
            );
        }
    }

    // Back to SQLite two ways: `db copy`, and an export imported into a new file.
    let back = dir.path().join("back.db");
    let back = back.to_str().unwrap();
    ok(file, &["db", "copy", &url, back]);
    let jsonl = dir.path().join("pg.jsonl");
    ok(
        &url,
        &[
            "export",
            "--all",
            "-f",
            "jsonl",
            "-o",
            jsonl.to_str().unwrap(),
        ],
    );
    let imported = dir.path().join("imported.db");
    let imported = imported.to_str().unwrap();
    ok(imported, &["import", jsonl.to_str().unwrap()]);
    for copy in [back, imported] {
        for args in [
            &["list", "--all", "--json"][..],
            &["stats", "--json"],
            &["export", "--all", "-f", "jsonl"],
        ] {
            assert!(
                ok(copy, args) == ok(file, args),
                "{copy}: scribe {args:?} differs from the original"
            );
        }
    }

    // Writes say the same and leave the same stores.
    for args in [
        &["rename", "small", "renamed on both"][..],
        &["rename", "renamed on both", "多言語 テスト"],
        &["rename", "small", " "],
        &["archive", "renamed on both"],
        &["archive", "renamed on both"],
        &["unarchive", "renamed on both"],
        &["fork", "ses_pass", "--at", "nosuch"],
        &["delete", "s_stage0_small"],
        &["delete", "s_stage0_small", "--yes"],
        &["delete", "s_stage0_small", "--yes"],
        &[
            "prune",
            "--older-than",
            "300",
            "--source",
            "codex",
            "--dry-run",
        ],
        &["prune", "--older-than", "300", "--source", "codex", "--yes"],
        &["stats", "--by", "source", "--json"],
    ] {
        same(file, &url, args);
    }
    // What is left, but for the times of the changes (the clock's, on each): every
    // session, not the 20 most recent a list shows by default.
    let left = |db: &str| {
        let doc = json(db, &["list", "--all", "--json", "-n", "1000"]);
        doc["sessions"]
            .as_array()
            .unwrap()
            .iter()
            .map(|s| {
                let field = |name: &str| s[name].to_string();
                [
                    field("id"),
                    field("title"),
                    field("message_count"),
                    s["archived_at"].is_null().to_string(),
                ]
                .join(" ")
            })
            .collect::<Vec<_>>()
    };
    let on_sqlite = left(file);
    assert!(on_sqlite == left(&url), "{on_sqlite:#?}");
    assert!(on_sqlite.iter().any(|s| s.contains("\"renamed on both\"")));
    assert!(!on_sqlite.iter().any(|s| s.contains("s_stage0_small")));
    // A fork gets a new id on each, and copies the same messages.
    let fork = |db: &str| {
        let text = ok(db, &["fork", "ses_pass", "--at", "msg_pass0002"]);
        let id = text
            .split_whitespace()
            .find(|w| w.starts_with("ses_0"))
            .unwrap()
            .to_owned();
        let shown = json(db, &["show", &id, "--json"]);
        shown["messages"]
            .as_array()
            .unwrap()
            .iter()
            .map(|m| m["parts"][0]["part"]["text"].as_str().unwrap().to_owned())
            .collect::<Vec<_>>()
    };
    let copied = fork(file);
    assert_eq!(copied.len(), 3, "{copied:?}");
    assert_eq!(copied, fork(&url));
}

/// The web viewer on both stores: the same API answers for the same store.
#[test]
#[ignore = "needs PostgreSQL: run under .ci/with-postgres"]
fn serve_answers_on_postgres_as_on_sqlite() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("scribe.db");
    let file = file.to_str().unwrap();
    import_histories(file, dir.path());
    let url = fresh("cli_pass_serve");
    ok(file, &["db", "copy", file, &url]);
    let paths = [
        "/api/sessions",
        "/api/sessions/ses_pass",
        "/api/stats?by=day",
        "/api/usage",
        "/api/sessions/nosuch",
    ];
    let answers = |db: &str| {
        let server = common::Serving::start(db);
        paths.map(|path| server.get_text(path))
    };
    let (on_sqlite, on_postgres) = (answers(file), answers(&url));
    for (path, (a, b)) in paths.iter().zip(on_sqlite.iter().zip(&on_postgres)) {
        assert!(a == b, "GET {path} differs: {a:?} / {b:?}");
    }
    assert_eq!(on_postgres[0].0, 200);
    assert_eq!(on_postgres[4].0, 404);

    // An empty database (created, never migrated): serve opens read-only and says what
    // to run, in one line.
    let empty = fresh("cli_pass_serve_empty");
    let out = scribe(&empty, &["serve", "--addr", "127.0.0.1:0"]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(
        err.contains("holds no scribe schema yet")
            && err.contains("to create it (`scribe db migrate`)"),
        "{err}"
    );
}

/// `scribe --db DB list` fails with exit 1 and one line on stderr, `scribe: ` and a
/// lowercase word, that contains `want`, holds no password, no driver's struct and not
/// the driver's own wording.
fn one_clear_line(db: &str, want: &str) -> String {
    let (code, stdout, stderr) = seen(db, &["list"]);
    assert_eq!(code, Some(1), "{db}: {stderr}");
    assert_eq!(stdout, "", "{db}");
    assert_eq!(stderr.lines().count(), 1, "{db}: {stderr}");
    let line = stderr.trim_end();
    let rest = line
        .strip_prefix("scribe: ")
        .unwrap_or_else(|| panic!("{line}"));
    assert!(rest.starts_with(|c: char| c.is_lowercase()), "{db}: {line}");
    assert!(line.contains(want), "{db}: {want:?} in {line}");
    // The driver's own wording ("db error: FATAL: …") repeated what the line said.
    for secret in [
        "s3cret", "Error {", "DbError", "kind:", "Some(", "db error", "FATAL",
    ] {
        assert!(!line.contains(secret), "{db}: {secret:?} in {line}");
    }
    line.to_owned()
}

/// The ways a PostgreSQL location goes wrong, each one clear line, exit 1, no password:
/// a bad URL, nothing listening, a wrong password, no such database, no database name
/// (libpq would pick the user's name: `postgres`, the server's own database, for the
/// superuser, and a command migrates an empty database), a root certificate that is not
/// there, and a schema newer than this build; and a user who may read but not write or
/// vacuum: the server's refusal once, and `db vacuum` refused rather than reported done.
#[test]
#[ignore = "needs PostgreSQL: run under .ci/with-postgres"]
fn each_wrong_postgres_location_is_one_clear_line() {
    let base = std::env::var("SCRIBE_TEST_POSTGRES").expect("under .ci/with-postgres");
    let mut admin = postgres::Client::connect(&base, postgres::NoTls).unwrap();
    // scribe_pw logs in with a password (.ci/with-postgres's pg_hba.conf); any password
    // other than its own is wrong.
    admin
        .batch_execute(
            "DO $$ BEGIN CREATE ROLE scribe_pw LOGIN PASSWORD 'right'; \
             EXCEPTION WHEN duplicate_object THEN NULL; END $$",
        )
        .unwrap();

    one_clear_line(
        "postgres://me:s3cret@localhost:notaport/scribe",
        "invalid database location postgres://me:***@localhost:notaport/scribe",
    );
    one_clear_line(
        "postgres://me:s3cret@localhost/scribe?sslmode=sometimes",
        "sslmode \"sometimes\" is not one of",
    );
    one_clear_line(
        "host=127.0.0.1 port=1 user=me password=s3cret dbname=scribe connect_timeout=5",
        "cannot reach the database server at 127.0.0.1:1",
    );
    one_clear_line(
        &format!("{base} user=scribe_pw password=s3cret"),
        "refused user \"scribe_pw\": wrong password or no such role",
    );
    one_clear_line(
        &format!("{base} dbname=no_such_db_here"),
        "has no database \"no_such_db_here\"",
    );
    one_clear_line(
        &format!("{base} sslmode=require sslrootcert=/no/such/ca.pem password=s3cret"),
        "cannot set up TLS with the database server at ",
    );
    one_clear_line(
        &format!("{base} sslmode=require sslrootcert=/no/such/ca.pem"),
        "(sslrootcert /no/such/ca.pem): ",
    );

    // No database name, as a URL or a keyword string: refused before connecting, and the
    // server's own database is left without Scribe's tables.
    let tables = |admin: &mut postgres::Client| -> i64 {
        admin
            .query_one(
                "SELECT count(*) FROM pg_tables WHERE tablename = 'sessions'",
                &[],
            )
            .unwrap()
            .get(0)
    };
    let before = tables(&mut admin);
    let without_name = base
        .split_whitespace()
        .filter(|pair| !pair.starts_with("dbname="))
        .collect::<Vec<_>>()
        .join(" ");
    let port = base
        .split_whitespace()
        .find_map(|pair| pair.strip_prefix("port="))
        .unwrap();
    for location in [
        without_name.clone(),
        format!("{without_name} password=s3cret dbname=''"),
        format!("postgres://postgres:s3cret@localhost:{port}/"),
        format!("postgres://postgres:s3cret@localhost:{port}"),
    ] {
        one_clear_line(
            &location,
            "no database name: add one (postgres://USER@HOST/DB or dbname=DB)",
        );
    }
    assert_eq!(tables(&mut admin), before, "a store was made somewhere");

    // A user who may read but not vacuum: `db vacuum` says so (VACUUM itself only warns
    // and skips each table, and the command reported a vacuum of every table).
    let store = fresh("cli_pass_reader");
    ok(&store, &["demo"]);
    let mut owner = postgres::Client::connect(&store, postgres::NoTls).unwrap();
    owner
        .batch_execute(
            "DO $$ BEGIN CREATE ROLE scribe_reader LOGIN; \
             EXCEPTION WHEN duplicate_object THEN NULL; END $$; \
             GRANT SELECT ON ALL TABLES IN SCHEMA public TO scribe_reader",
        )
        .unwrap();
    let reader = format!("{store} user=scribe_reader");
    assert!(ok(&reader, &["list"]).contains("Demo: fix the failing add test"));
    // A change it may not make: the server's words, once.
    let (code, _, stderr) = seen(&reader, &["rename", "Demo: fix the failing add test", "x"]);
    assert_eq!(code, Some(1), "{stderr}");
    assert_eq!(stderr.lines().count(), 1, "{stderr}");
    assert_eq!(
        stderr
            .matches("permission denied for table sessions")
            .count(),
        1,
        "{stderr}"
    );
    assert!(!stderr.contains("db error"), "{stderr}");
    let (code, stdout, stderr) = seen(&reader, &["db", "vacuum"]);
    assert_eq!(code, Some(1), "{stdout}{stderr}");
    assert_eq!(stdout, "");
    assert_eq!(stderr.lines().count(), 1, "{stderr}");
    assert!(
        stderr.contains("user \"scribe_reader\" may not vacuum ") && stderr.contains(", sessions)"),
        "{stderr}"
    );
    let never: i64 = owner
        .query_one(
            "SELECT count(*) FROM pg_stat_user_tables WHERE last_vacuum IS NOT NULL",
            &[],
        )
        .unwrap()
        .get(0);
    assert_eq!(never, 0, "nothing was vacuumed");
    owner
        .batch_execute("REVOKE ALL ON ALL TABLES IN SCHEMA public FROM scribe_reader")
        .unwrap();
    // A user who may not even read: the server's refusal, not a migration it tried (the
    // history it could not see was taken for a fresh database's).
    one_clear_line(
        &reader,
        "postgres error: permission denied for table refinery_schema_history",
    );

    // A schema a newer Scribe wrote: every command refuses it in the same line.
    let newer = fresh("cli_pass_newer");
    ok(&newer, &["db", "migrate"]);
    let mut client = postgres::Client::connect(&newer, postgres::NoTls).unwrap();
    client
        .batch_execute(
            "INSERT INTO refinery_schema_history (version, name, applied_on, checksum) \
             VALUES (99, 'future', 'later', '1')",
        )
        .unwrap();
    let known = scribe_db::Database::known_schema_version();
    let want = format!(
        "database schema version 99 is newer than this build knows (version {known}); \
         upgrade scribe"
    );
    one_clear_line(&newer, &want);
    for args in [&["db", "info"][..], &["db", "migrate"], &["stats"]] {
        let (code, _, stderr) = seen(&newer, args);
        assert_eq!(code, Some(1), "{args:?}: {stderr}");
        assert!(stderr.contains(&want), "{args:?}: {stderr}");
    }
}

/// A location whose port answers, but not as PostgreSQL (here a listener that reads the
/// greeting, answers `HTTP/1.1 400 Bad Request` and closes, as a web server does): one
/// line saying so, under every `sslmode` and as a URL; not the driver's "bytes remaining
/// on stream" nor "cannot reach" (something was reached). Once nothing listens there,
/// it is "cannot reach" again. Needs no PostgreSQL server.
#[test]
fn a_port_that_is_not_postgres_is_one_clear_line() {
    use std::io::{Read, Write};
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let answering = std::thread::spawn(move || {
        for stream in listener.incoming() {
            let mut stream = stream.unwrap();
            let mut greeting = [0_u8; 1024];
            if stream.read(&mut greeting).unwrap_or(0) == 0 {
                break; // the test's own "stop" connection
            }
            let _ = stream.write_all(
                b"HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\nConnection: close\r\n\r\n",
            );
        }
    });
    let want = format!(
        "the server at 127.0.0.1:{port} did not answer as PostgreSQL (it answered \
         \"HTTP/1.1 400 Bad Request\"); check the location's host and port"
    );
    for location in [
        format!("host=127.0.0.1 port={port} user=me password=s3cret dbname=scribe"),
        format!("host=127.0.0.1 port={port} user=me dbname=scribe sslmode=disable"),
        format!("host=127.0.0.1 port={port} user=me dbname=scribe sslmode=require"),
        format!("postgres://me:s3cret@127.0.0.1:{port}/scribe"),
    ] {
        let line = one_clear_line(&location, &want);
        for driver in ["bytes remaining", "cannot reach", "error communicating"] {
            assert!(!line.contains(driver), "{location}: {line}");
        }
    }
    drop(std::net::TcpStream::connect(("127.0.0.1", port)).unwrap());
    answering.join().unwrap();
    one_clear_line(
        &format!("host=127.0.0.1 port={port} user=me dbname=scribe"),
        &format!("cannot reach the database server at 127.0.0.1:{port}"),
    );
}

/// `db info` says what is true of each backend: on SQLite the write-ahead log file's
/// size (a number in `--json`, a line in the text), on PostgreSQL no such number (`null`:
/// the log is the server's, not this database's; before, `0`) and no such line. `db copy`
/// refusals are the command's own (`cannot copy: …`, not "invalid input: …"), the same
/// on both backends. An empty `sslrootcert=` names no file, as in libpq.
#[test]
#[ignore = "needs PostgreSQL: run under .ci/with-postgres"]
fn db_info_and_copy_say_what_is_true_on_postgres() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("scribe.db");
    let file = file.to_str().unwrap();
    ok(file, &["demo"]);
    let url = fresh("cli_pass_info");
    ok(&url, &["demo"]);

    let on_sqlite = json(file, &["db", "info", "--json"]);
    assert!(on_sqlite["wal_size"].is_u64(), "{on_sqlite}");
    assert!(ok(file, &["db", "info"]).contains("(write-ahead log "));
    let on_postgres = json(&url, &["db", "info", "--json"]);
    assert_eq!(on_postgres["backend"], "postgres", "{on_postgres}");
    assert!(on_postgres["wal_size"].is_null(), "{on_postgres}");
    assert!(
        on_postgres["file_size"].as_u64().unwrap() > 0,
        "{on_postgres}"
    );
    let text = ok(&url, &["db", "info"]);
    assert!(text.contains("database size   "), "{text}");
    assert!(!text.contains("write-ahead"), "{text}");

    // Into a store that holds sessions, either way: the copy's refusal, one line.
    let other = dir.path().join("other.db");
    let other = other.to_str().unwrap();
    ok(other, &["demo"]);
    for (from, to) in [(file, url.as_str()), (url.as_str(), other)] {
        let (code, stdout, stderr) = seen(file, &["db", "copy", from, to]);
        assert_eq!(code, Some(1), "{from} → {to}: {stderr}");
        assert_eq!(stdout, "");
        assert_eq!(stderr.lines().count(), 1, "{stderr}");
        assert!(
            stderr.starts_with("scribe: cannot copy: ") && stderr.contains(" is not empty ("),
            "{from} → {to}: {stderr}"
        );
        assert!(!stderr.contains("invalid input"), "{stderr}");
    }
    let empty = fresh("cli_pass_info_empty");
    ok(&empty, &["db", "migrate"]);
    let (code, _, stderr) = seen(file, &["db", "copy", &url, &empty]);
    assert_eq!(code, Some(1), "{stderr}");
    assert_eq!(
        stderr.trim_end(),
        "scribe: cannot copy: one end must be an SQLite file (PostgreSQL to PostgreSQL: \
         use pg_dump)"
    );

    // `sslrootcert=` (empty) is not a file named "": TLS as without it.
    let tcp = std::env::var("SCRIBE_TEST_POSTGRES_TCP").expect("under .ci/with-postgres");
    let over_tls = format!("{tcp} dbname=cli_pass_info sslmode=require");
    let listed = ok(&over_tls, &["list", "--json"]);
    for location in [
        format!("{over_tls} sslrootcert="),
        format!("{over_tls} sslrootcert=''"),
    ] {
        assert_eq!(ok(&location, &["list", "--json"]), listed, "{location}");
    }
}

/// An export holding a session of a text of ~250,000 different words (more than a 1 MiB
/// `tsvector` holds) and one whose id is longer than PostgreSQL's btree index takes, among
/// others. The first is stored and found by its first words (schema V25; before, its
/// write failed: "string is too long for tsvector"). The second is refused by the id rule
/// (at most 1,024 bytes, the same on SQLite), with the id's kind and length: as for any
/// session refused, that one is reported failed by id and title, exit status 1, and the
/// others are stored. Before, the whole import failed with the server's message alone,
/// naming no session, and stored nothing; then the server's raw 54000 named the index.
#[test]
#[ignore = "needs PostgreSQL: run under .ci/with-postgres"]
fn one_session_postgres_refuses_fails_alone_and_very_many_words_are_stored() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("scribe.db");
    let file = file.to_str().unwrap();
    ok(file, &["demo"]);
    let lines = ok(file, &["export", "--all", "-f", "jsonl"]);
    let normal: Vec<&str> = lines.lines().collect();
    assert_eq!(normal.len(), 2, "{lines}");

    let mut n: u64 = 0x2545_f491_4f6c_dd1d;
    let mut letters = |count: usize| -> String {
        (0..count)
            .map(|_| {
                n ^= n << 13;
                n ^= n >> 7;
                n ^= n << 17;
                char::from(b'a' + u8::try_from(n % 26).unwrap())
            })
            .collect()
    };
    // The demo's sub-agent session as another one, `id`, with one text part `text`.
    let session = |id: &str, title: &str, text: String| -> serde_json::Value {
        let mut copy: serde_json::Value = serde_json::from_str(normal[0]).unwrap();
        copy["session"]["id"] = id.into();
        copy["session"]["title"] = title.into();
        copy["session"]["parent_session_id"] = serde_json::Value::Null;
        copy.as_object_mut().unwrap().remove("rolled_up");
        let mut message = copy["messages"][0].clone();
        message["id"] = format!("msg_{title}").replace(' ', "_").into();
        message["session_id"] = id.into();
        message["parent_id"] = serde_json::Value::Null;
        message["parts"] = serde_json::json!([{
            "id": format!("prt_{title}").replace(' ', "_"), "position": 0,
            "part": {"type": "text", "text": text},
            "created_at": message["created_at"], "updated_at": message["created_at"],
        }]);
        copy["messages"] = serde_json::json!([message]);
        copy["files"] = serde_json::json!([]);
        copy["session"]["message_count"] = 1.into();
        copy
    };
    let words: Vec<String> = (0..250_000).map(|_| letters(10)).collect();
    let huge = session("huge_session", "huge words", words.join(" "));
    let long_id = format!("ses_{}", letters(9_000));
    let refused = session(&long_id, "long id", "a short text".into());
    let export = dir.path().join("mixed.jsonl");
    std::fs::write(
        &export,
        format!("{}\n{huge}\n{refused}\n{}\n", normal[0], normal[1]),
    )
    .unwrap();

    let url = fresh("cli_pass_huge_words");
    let (code, stdout, stderr) = seen(&url, &["import", export.to_str().unwrap()]);
    assert_eq!(code, Some(1), "{stdout}{stderr}");
    assert!(
        stdout.ends_with("3 imported, 0 skipped, 1 failed\n"),
        "{stdout}{stderr}"
    );
    assert!(
        stderr.contains(&format!("failed {long_id} \"long id\": ")),
        "{stderr}"
    );
    assert!(
        stderr.contains("is 9004 bytes long, more than the 1024 an id may have"),
        "{stderr}"
    );
    let listed = json(&url, &["list", "--all", "--json"]);
    let ids: BTreeSet<&str> = listed["sessions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["id"].as_str().unwrap())
        .collect();
    assert_eq!(ids.len(), 3, "{listed}");
    assert!(ids.contains("huge_session"), "{listed}");
    // Found by its first word; its last, past the word index's budget, finds nothing.
    let found = |word: &str| -> usize {
        json(&url, &["search", word, "--json"])["hits"]
            .as_array()
            .unwrap()
            .len()
    };
    assert_eq!(found(&words[0]), 1);
    assert_eq!(found(&words[249_999]), 0);
    let check = ok(&url, &["db", "check"]);
    assert!(
        !check.contains("FAIL") && !check.contains("error"),
        "{check}"
    );
}
