//! Upgrade: a database written by schema version 1, with representative data, must open,
//! migrate and read back identically in every later version.
//!
//! `tests/fixtures/v1.db` was written through `Database::open_at_version(path, 1)` by the
//! generator below, and `tests/fixtures/v1.expected.json` is the canonical dump of its rows
//! (every table's rows ordered by primary key, every column). The test migrates a copy
//! with the current build and compares the V1 columns of every row with that dump; columns
//! a later migration adds are ignored, rows may not change. The generator runs as a test
//! too: it builds the fixture in a temporary directory and checks that the committed dump
//! is what it writes, writing nothing.
//!
//! Regenerate (only when the fixture itself must change, never to make the test pass):
//! `SCRIBE_REGENERATE_FIXTURES=1 cargo test -p scribe-tests --test upgrade
//! the_v1_fixture_is_what_its_generator_writes`.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::{Path, PathBuf};
use std::sync::Arc;

use rusqlite::types::ValueRef;
use scribe_db::Database;
use scribe_message::{
    AgentPart, CompactionPart, FilePart, FileSource, FinishReason, ImageUrlPart, MessageService,
    Part, PatchPart, ReasoningPart, StepFinishPart, StepStartPart, SubtaskPart, TokenUsage,
    ToolPart, ToolState,
};
use scribe_session::SessionService;
use scribe_tests::{consistency_problems, search_counts};
use serde_json::{Map, Value, json};

/// The tables of schema version 1 and the order their rows are dumped in.
const V1_TABLES: [(&str, &str); 4] = [
    ("sessions", "id"),
    ("messages", "id"),
    ("parts", "seq"),
    ("files", "id"),
];

fn fixture_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures")
}

/// Every row of `table` ordered by `key`, each as a JSON object of all its columns
/// (INTEGER → integer, REAL → float, TEXT → string, BLOB → `{"blob": hex}`). A part's
/// `search_text`, a generated column until version 11, comes from the view `parts_search`
/// after it (NULL for parts that are not searched, as the column was).
fn dump_table(conn: &rusqlite::Connection, table: &str, key: &str) -> Vec<Map<String, Value>> {
    let generated_text: bool = conn
        .query_row(
            "SELECT count(*) > 0 FROM pragma_table_xinfo(?1) WHERE name = 'search_text'",
            [table],
            |r| r.get(0),
        )
        .unwrap();
    let sql = if table == "parts" && !generated_text {
        format!(
            "SELECT p.*, v.search_text FROM parts AS p \
             LEFT JOIN parts_search AS v ON v.seq = p.seq ORDER BY p.{key}"
        )
    } else {
        format!("SELECT * FROM {table} ORDER BY {key}")
    };
    let mut stmt = conn.prepare(&sql).unwrap();
    let names: Vec<String> = stmt.column_names().into_iter().map(str::to_owned).collect();
    let mut rows = stmt.query([]).unwrap();
    let mut out = Vec::new();
    while let Some(row) = rows.next().unwrap() {
        let mut object = Map::new();
        for (i, name) in names.iter().enumerate() {
            let value = match row.get_ref(i).unwrap() {
                ValueRef::Null => Value::Null,
                ValueRef::Integer(n) => json!(n),
                ValueRef::Real(f) => json!(f),
                ValueRef::Text(t) => json!(String::from_utf8(t.to_vec()).unwrap()),
                ValueRef::Blob(b) => {
                    let hex: String = b.iter().map(|byte| format!("{byte:02x}")).collect();
                    json!({ "blob": hex })
                }
            };
            object.insert(name.clone(), value);
        }
        out.push(object);
    }
    out
}

fn dump(conn: &rusqlite::Connection) -> Value {
    let mut tables = Map::new();
    for (table, key) in V1_TABLES {
        tables.insert(table.to_owned(), json!(dump_table(conn, table, key)));
    }
    Value::Object(tables)
}

/// Differences between the expected dump and the rows now stored, V1 columns only.
fn differences(expected: &Value, actual: &Value) -> Vec<String> {
    let mut problems = Vec::new();
    for (table, _) in V1_TABLES {
        let want = expected[table].as_array().unwrap();
        let got = actual[table].as_array().unwrap();
        if want.len() != got.len() {
            problems.push(format!(
                "{table}: {} rows, expected {}",
                got.len(),
                want.len()
            ));
        }
        for (i, (want, got)) in want.iter().zip(got).enumerate() {
            for (column, value) in want.as_object().unwrap() {
                if got.get(column) != Some(value) {
                    problems.push(format!(
                        "{table} row {i} ({}), column {column}: {:?}, expected {value}",
                        want.get("id").unwrap_or(&Value::Null),
                        got.get(column)
                    ));
                }
            }
        }
    }
    problems
}

#[test]
fn v1_fixture_opens_migrates_and_reads_back_identically() {
    let fixture = fixture_dir().join("v1.db");
    let expected: Value = serde_json::from_str(
        &std::fs::read_to_string(fixture_dir().join("v1.expected.json")).unwrap(),
    )
    .unwrap();
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("scribe.db");
    std::fs::copy(&fixture, &path).unwrap();

    // The fixture and its dump belong together.
    {
        let raw = rusqlite::Connection::open(&path).unwrap();
        let version: i64 = raw
            .query_row(
                "SELECT max(version) FROM refinery_schema_history",
                [],
                |r| r.get(0),
            )
            .unwrap();
        assert_eq!(version, 1, "the fixture must be a version 1 database");
        let before = differences(&expected, &dump(&raw));
        assert!(before.is_empty(), "fixture and dump disagree: {before:#?}");
    }

    let db = Arc::new(Database::open(&path).unwrap());
    let report = db.migration_report();
    assert_eq!(report.from, 1);
    assert_eq!(report.to, Database::known_schema_version());
    assert_eq!(
        db.schema_version().unwrap(),
        Database::known_schema_version()
    );

    let after = db
        .read(|conn| -> scribe_db::Result<_> {
            let conn = conn.conn().unwrap();
            Ok(dump(conn))
        })
        .unwrap();
    let changed = differences(&expected, &after);
    assert!(
        changed.is_empty(),
        "rows changed by migrating: {changed:#?}"
    );

    let problems = consistency_problems(&db).unwrap();
    assert!(problems.is_empty(), "{problems:#?}");
    let (word_hits, with_word, cjk_hits, with_cjk) =
        search_counts(&db, "parser", "数据库").unwrap();
    assert_eq!((word_hits, cjk_hits), (with_word, with_cjk));
    assert!(word_hits >= 3 && cjk_hits >= 2, "{word_hits} {cjk_hits}");

    // Everything also reads back through the services, every part decoding.
    let sessions = SessionService::new(Arc::clone(&db));
    let messages = MessageService::new(Arc::clone(&db));
    let mut seen_types = std::collections::BTreeSet::new();
    let mut total_messages = 0;
    for row in expected["sessions"].as_array().unwrap() {
        let id = row["id"].as_str().unwrap();
        let session = sessions.get(id).unwrap();
        assert_eq!(session.title.as_deref(), row["title"].as_str());
        let list = messages.list(id).unwrap();
        assert_eq!(list.len() as i64, row["message_count"].as_i64().unwrap());
        for msg in list {
            total_messages += 1;
            for part in msg.parts {
                seen_types.insert(part.part.type_name().to_owned());
                if let Part::Unknown(value) = &part.part {
                    assert_eq!(value["type"], "citation");
                    assert_eq!(value["source"]["title"], "SQLite FTS5 — 全文检索");
                }
            }
        }
    }
    assert_eq!(
        total_messages,
        expected["messages"].as_array().unwrap().len()
    );
    for kind in scribe_message::KNOWN_PART_TYPES {
        assert!(seen_types.contains(kind), "no {kind} part in the fixture");
    }
    assert!(seen_types.contains("citation"));

    // And the upgraded database takes new writes.
    let id = scribe_tests::create_session(&db, Some("after the upgrade")).unwrap();
    messages
        .create(scribe_message::NewMessage::new(
            id.as_str(),
            scribe_message::Role::User,
            vec![Part::text("the parser survived the upgrade")],
        ))
        .unwrap();
    let problems = consistency_problems(&db).unwrap();
    assert!(problems.is_empty(), "{problems:#?}");
}

/// A database that a newer Scribe has migrated further is refused, typed and clearly, and
/// left as it was.
#[test]
fn newer_schema_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("scribe.db");
    std::fs::copy(fixture_dir().join("v1.db"), &path).unwrap();
    drop(Database::open(&path).unwrap());
    let known = Database::known_schema_version();
    {
        let raw = rusqlite::Connection::open(&path).unwrap();
        raw.execute(
            "INSERT INTO refinery_schema_history (version, name, applied_on, checksum)
             VALUES (?1, 'from_the_future', '2030-01-01T00:00:00Z', '1')",
            [known + 1],
        )
        .unwrap();
    }
    let before = std::fs::read(&path).unwrap();
    match Database::open(&path) {
        Err(scribe_db::Error::SchemaTooNew { found, known: k }) => {
            assert_eq!((found, k), (known + 1, known));
        }
        other => panic!("expected SchemaTooNew, got {other:?}"),
    }
    let shown = Database::open(&path).unwrap_err().to_string();
    assert!(
        shown.contains("newer") && shown.contains("upgrade"),
        "unclear: {shown}"
    );
    assert_eq!(
        std::fs::read(&path).unwrap(),
        before,
        "the refused file changed"
    );
}

// ---------------------------------------------------------------------------------------
// The generator

/// 2025-11-25T00:00:00Z; every time in the fixture is an offset from it.
const T0: i64 = 1_764_028_800_000;

struct Writer<'a> {
    tx: &'a rusqlite::Connection,
    seq: u32,
}

impl Writer<'_> {
    fn message(&mut self, id: &str, session: &str, role: &str, at: i64, extra: &[(&str, Value)]) {
        let mut columns = vec!["id", "session_id", "role", "created_at", "updated_at"];
        let mut values: Vec<rusqlite::types::Value> = vec![
            id.to_owned().into(),
            session.to_owned().into(),
            role.to_owned().into(),
            (T0 + at).into(),
            (T0 + at + 500).into(),
        ];
        for (column, value) in extra {
            columns.push(column);
            values.push(match value {
                Value::Null => rusqlite::types::Value::Null,
                Value::Bool(b) => i64::from(*b).into(),
                Value::Number(n) if n.is_i64() => n.as_i64().unwrap().into(),
                Value::Number(n) => n.as_f64().unwrap().into(),
                Value::String(s) => s.clone().into(),
                other => other.to_string().into(),
            });
        }
        let placeholders = vec!["?"; columns.len()].join(", ");
        self.tx
            .execute(
                &format!(
                    "INSERT INTO messages ({}) VALUES ({placeholders})",
                    columns.join(", ")
                ),
                rusqlite::params_from_iter(values),
            )
            .unwrap();
    }

    fn parts(&mut self, message: &str, session: &str, at: i64, parts: Vec<Part>) {
        for (position, part) in parts.into_iter().enumerate() {
            self.raw_part(
                message,
                session,
                at,
                position,
                part.type_name(),
                &part.to_json().unwrap(),
            );
        }
    }

    fn raw_part(
        &mut self,
        message: &str,
        session: &str,
        at: i64,
        position: usize,
        kind: &str,
        data: &str,
    ) {
        self.seq += 1;
        let id = format!("prt_fixture{:04}", self.seq);
        self.tx
            .execute(
                "INSERT INTO parts (id, message_id, session_id, position, type, data, created_at, updated_at)
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?7)",
                rusqlite::params![id, message, session, position as i64, kind, data, T0 + at],
            )
            .unwrap();
    }
}

fn text(s: &str) -> Part {
    Part::text(s)
}

fn tool(call: &str, name: &str, input: Value, state: ToolState) -> Part {
    Part::Tool(ToolPart {
        call_id: call.into(),
        tool: name.into(),
        input,
        state,
        compacted_at: None,
        extra: Default::default(),
    })
}

fn write_fixture(tx: &rusqlite::Connection) {
    let session = |id: &str, columns: &str, values: Vec<rusqlite::types::Value>| {
        let placeholders = vec!["?"; values.len()].join(", ");
        tx.execute(
            &format!("INSERT INTO sessions (id, {columns}) VALUES (?, {placeholders})"),
            rusqlite::params_from_iter(std::iter::once(id.to_owned().into()).chain(values)),
        )
        .unwrap();
    };
    use rusqlite::types::Value as V;
    let s = |x: &str| V::Text(x.to_owned());
    let n = |x: i64| V::Integer(x);

    session(
        "ses_fixture_main",
        "kind, source, user_id, directory, title, model, model_config, system_prompt, permission,
         billing_provider, billing_base_url, billing_mode, created_at, updated_at",
        vec![
            s("normal"),
            s("cli"),
            s("u_42"),
            s("/home/dev/scribe"),
            s("Refactor the parser"),
            s("anthropic/claude-sonnet-4"),
            s(r#"{"temperature":0.2,"max_tokens":8192,"thinking":{"budget":4096}}"#),
            s("You are a careful coding agent. Prefer small, tested changes."),
            s(r#"{"bash":"ask","edit":"allow","webfetch":"deny"}"#),
            s("anthropic"),
            s("https://api.anthropic.com"),
            s("api"),
            n(T0),
            n(T0),
        ],
    );
    session(
        "call_task_7",
        "parent_session_id, kind, source, title, model, created_at, updated_at",
        vec![
            s("ses_fixture_main"),
            s("task"),
            s("cli"),
            s("Find every caller of parse_expr"),
            s("anthropic/claude-haiku"),
            n(T0 + 40_000),
            n(T0 + 40_000),
        ],
    );
    session(
        "ses_fixture_cont",
        "parent_session_id, kind, source, title, model, created_at, updated_at",
        vec![
            s("ses_fixture_main"),
            s("continuation"),
            s("cli"),
            s("Refactor the parser #2"),
            s("anthropic/claude-sonnet-4"),
            n(T0 + 900_000),
            n(T0 + 900_000),
        ],
    );
    session(
        "ses_fixture_fork",
        "parent_session_id, kind, source, user_id, directory, title, created_at, updated_at",
        vec![
            s("ses_fixture_main"),
            s("fork"),
            s("telegram"),
            s("tg:1234567"),
            s("/srv/数据"),
            s("数据库迁移讨论 🚀"),
            n(T0 + 1_000_000),
            n(T0 + 1_000_000),
        ],
    );
    session(
        "title-ses_fixture_main",
        "parent_session_id, kind, source, created_at, updated_at",
        vec![
            s("ses_fixture_main"),
            s("title"),
            s("cli"),
            n(T0 + 1_000),
            n(T0 + 1_000),
        ],
    );

    let mut w = Writer { tx, seq: 0 };
    let main = "ses_fixture_main";
    w.message(
        "msg_fixture_0001",
        main,
        "system",
        10,
        &[
            ("finish_reason", json!("end_turn")),
            ("finished_at", json!(T0 + 10)),
        ],
    );
    w.parts(
        "msg_fixture_0001",
        main,
        10,
        vec![
            text("Project rules: run `cargo test` before every commit."),
            Part::finish(FinishReason::EndTurn, T0 + 10),
        ],
    );
    w.message(
        "msg_fixture_0002",
        main,
        "user",
        1_000,
        &[
            ("agent", json!("build")),
            ("finish_reason", json!("end_turn")),
            ("finished_at", json!(T0 + 1_000)),
        ],
    );
    w.parts("msg_fixture_0002", main, 1_000, vec![
        Part::Agent(AgentPart { name: "build".into(), extra: Default::default() }),
        text("The parser chokes on `a -> b` — please refactor parse_expr and add tests. Ünïcödé, 中文, emoji 🎉."),
        Part::File(FilePart {
            mime: "text/x-rust".into(),
            filename: Some("parser.rs".into()),
            source: FileSource::Url { url: "file:///home/dev/scribe/src/parser.rs".into() },
            extra: Default::default(),
        }),
        Part::File(FilePart {
            mime: "application/octet-stream".into(),
            filename: Some("dump.bin".into()),
            source: FileSource::Inline { data: vec![0, 1, 2, 254, 255, b'S', b'Q', b'L'] },
            extra: Default::default(),
        }),
        Part::ImageUrl(ImageUrlPart {
            url: "https://example.invalid/screenshot.png".into(),
            detail: Some("high".into()),
            extra: Default::default(),
        }),
        Part::finish(FinishReason::EndTurn, T0 + 1_000),
    ]);
    w.message(
        "msg_fixture_0003",
        main,
        "assistant",
        2_000,
        &[
            ("parent_id", json!("msg_fixture_0002")),
            ("agent", json!("build")),
            ("provider", json!("anthropic")),
            ("model", json!("claude-sonnet-4")),
            ("finish_reason", json!("tool_use")),
            ("input_tokens", json!(12_345)),
            ("output_tokens", json!(678)),
            ("cache_read_tokens", json!(10_000)),
            ("cache_write_tokens", json!(2_048)),
            ("reasoning_tokens", json!(321)),
            ("cost_usd", json!(0.061_234_5)),
            ("finished_at", json!(T0 + 9_000)),
        ],
    );
    w.parts(
        "msg_fixture_0003",
        main,
        2_000,
        vec![
            Part::StepStart(StepStartPart::default()),
            Part::Reasoning(ReasoningPart {
                text: "The parser must handle right-associative arrows; check callers first."
                    .into(),
                signature: Some("sig_abc123".into()),
                metadata: Some(json!({ "redacted": false })),
                time: Some(scribe_message::PartTime {
                    start: T0 + 2_000,
                    end: Some(T0 + 2_400),
                }),
                extra: Default::default(),
            }),
            tool(
                "call_pending",
                "bash",
                json!({ "command": "cargo test -p parser" }),
                ToolState::Pending,
            ),
            tool(
                "call_running",
                "grep",
                json!({ "pattern": "parse_expr" }),
                ToolState::Running {
                    started_at: T0 + 2_500,
                },
            ),
            tool(
                "call_done",
                "read",
                json!({ "path": "src/parser.rs", "offset": 0 }),
                ToolState::Completed {
                    output: "fn parse_expr(tokens: &[Token]) -> Expr { … }".into(),
                    title: "src/parser.rs".into(),
                    metadata: json!({ "lines": 420, "truncated": false }),
                    started_at: T0 + 2_600,
                    ended_at: T0 + 2_700,
                },
            ),
            tool(
                "call_failed",
                "edit",
                json!({ "path": "src/parser.rs", "old": "a", "new": "b" }),
                ToolState::Error {
                    message: "permission denied: edit requires approval".into(),
                    started_at: Some(T0 + 2_800),
                    ended_at: T0 + 2_900,
                },
            ),
            tool(
                "call_denied",
                "webfetch",
                json!("https://example.invalid"),
                ToolState::Error {
                    message: "denied by rule webfetch=deny".into(),
                    started_at: None,
                    ended_at: T0 + 2_950,
                },
            ),
            Part::Tool(ToolPart {
                call_id: "call_compacted".into(),
                tool: "bash".into(),
                input: json!({ "command": "cargo build" }),
                state: ToolState::Completed {
                    output: "[output cleared by compaction]".into(),
                    title: "cargo build".into(),
                    metadata: Value::Null,
                    started_at: T0 + 3_000,
                    ended_at: T0 + 3_100,
                },
                compacted_at: Some(T0 + 800_000),
                extra: Default::default(),
            }),
            Part::Subtask(SubtaskPart {
                prompt: "Find every caller of parse_expr".into(),
                description: "callers".into(),
                agent: "explore".into(),
                extra: Default::default(),
            }),
            Part::Patch(PatchPart {
                hash: "4b825dc642cb6eb9a060e54bf8d69288fbee4904".into(),
                files: vec!["src/parser.rs".into(), "tests/parser.rs".into()],
                extra: Default::default(),
            }),
            Part::StepFinish(StepFinishPart {
                reason: FinishReason::ToolUse,
                tokens: TokenUsage {
                    input: 12_345,
                    output: 678,
                    cache_read: 10_000,
                    cache_write: 2_048,
                    reasoning: 321,
                },
                cost: 0.061_234_5,
                extra: Default::default(),
            }),
        ],
    );
    // A part type from a newer version: must survive untouched.
    w.raw_part(
        "msg_fixture_0003",
        main,
        2_000,
        11,
        "citation",
        r#"{"source":{"title":"SQLite FTS5 — 全文检索","url":"https://sqlite.org/fts5.html"},"type":"citation"}"#,
    );
    w.message(
        "msg_fixture_0004",
        main,
        "tool",
        3_000,
        &[
            ("parent_id", json!("msg_fixture_0003")),
            ("finish_reason", json!("end_turn")),
            ("finished_at", json!(T0 + 3_000)),
        ],
    );
    w.parts(
        "msg_fixture_0004",
        main,
        3_000,
        vec![
            text("exit status 0: 42 tests passed"),
            Part::finish(FinishReason::EndTurn, T0 + 3_000),
        ],
    );
    w.message(
        "msg_fixture_0005",
        main,
        "assistant",
        4_000,
        &[
            ("provider", json!("anthropic")),
            ("model", json!("claude-sonnet-4")),
            ("finish_reason", json!("error")),
            (
                "error",
                json!(r#"{"kind":"overloaded","message":"529 overloaded","retryable":true}"#),
            ),
            ("cost_usd", json!(0.000_1)),
            ("finished_at", json!(T0 + 4_500)),
        ],
    );
    w.parts(
        "msg_fixture_0005",
        main,
        4_000,
        vec![
            text("I was refactoring the parser when the provider failed"),
            Part::finish(FinishReason::Error, T0 + 4_500),
        ],
    );
    w.message(
        "msg_fixture_0006",
        main,
        "assistant",
        800_000,
        &[
            ("provider", json!("anthropic")),
            ("model", json!("claude-sonnet-4")),
            ("is_summary", json!(true)),
            ("finish_reason", json!("end_turn")),
            ("input_tokens", json!(150_000)),
            ("output_tokens", json!(2_000)),
            ("cost_usd", json!(0.48)),
            ("finished_at", json!(T0 + 810_000)),
        ],
    );
    w.parts("msg_fixture_0006", main, 800_000, vec![
        Part::Compaction(CompactionPart { auto: true, ..Default::default() }),
        text("Summary: parse_expr was split into parse_arrow and parse_atom; the parser tests pass."),
        Part::finish(FinishReason::EndTurn, T0 + 810_000),
    ]);

    let task = "call_task_7";
    w.message(
        "msg_fixture_0101",
        task,
        "user",
        40_100,
        &[("finish_reason", json!("end_turn"))],
    );
    w.parts(
        "msg_fixture_0101",
        task,
        40_100,
        vec![text("Find every caller of parse_expr")],
    );
    w.message(
        "msg_fixture_0102",
        task,
        "assistant",
        40_200,
        &[
            ("model", json!("claude-haiku")),
            ("finish_reason", json!("max_tokens")),
            ("output_tokens", json!(4_096)),
            ("cost_usd", json!(0.004)),
        ],
    );
    w.parts("msg_fixture_0102", task, 40_200, vec![
        text("Callers: src/repl.rs:12, src/lib.rs:88, benches/parse.rs:5 (output cut at max tokens"),
        Part::finish(FinishReason::MaxTokens, T0 + 41_000),
    ]);

    let cont = "ses_fixture_cont";
    w.message(
        "msg_fixture_0201",
        cont,
        "user",
        900_100,
        &[("finish_reason", json!("canceled"))],
    );
    w.parts(
        "msg_fixture_0201",
        cont,
        900_100,
        vec![
            text("Continue with the parser, but stop if the benchmarks regress"),
            Part::finish(FinishReason::Canceled, T0 + 900_200),
        ],
    );

    let fork = "ses_fixture_fork";
    w.message(
        "msg_fixture_0301",
        fork,
        "user",
        1_000_100,
        &[("finish_reason", json!("permission_denied"))],
    );
    w.parts(
        "msg_fixture_0301",
        fork,
        1_000_100,
        vec![
            text("数据库迁移需要保留所有历史记录吗？请用中文回答。"),
            Part::finish(FinishReason::PermissionDenied, T0 + 1_000_200),
        ],
    );
    w.message(
        "msg_fixture_0302",
        fork,
        "assistant",
        1_000_300,
        &[
            ("finish_reason", json!("some_future_reason")),
            ("model", json!("deepseek-chat")),
            ("cost_usd", json!(0.000_07)),
        ],
    );
    w.parts(
        "msg_fixture_0302",
        fork,
        1_000_300,
        vec![
            text("是的，数据库迁移必须保留全部历史：每条消息、每个部分。日本語も大丈夫です。"),
            tool(
                "call_cjk",
                "搜索",
                json!({ "查询": "数据库" }),
                ToolState::Completed {
                    output: "找到 3 条结果".into(),
                    title: "搜索".into(),
                    metadata: Value::Null,
                    started_at: T0 + 1_000_310,
                    ended_at: T0 + 1_000_320,
                },
            ),
        ],
    );

    let title = "title-ses_fixture_main";
    w.message(
        "msg_fixture_0401",
        title,
        "assistant",
        1_100,
        &[("model", json!("claude-haiku"))],
    );
    w.parts(
        "msg_fixture_0401",
        title,
        1_100,
        vec![text("Refactor the parser")],
    );

    // Files: two versions of one path, one of another, in two sessions.
    for (id, session, path, content, version, at) in [
        (
            "fil_fixture_1",
            main,
            "src/parser.rs",
            "fn parse_expr() {}\n",
            1,
            2_000,
        ),
        (
            "fil_fixture_2",
            main,
            "src/parser.rs",
            "fn parse_arrow() {}\nfn parse_atom() {}\n",
            2,
            5_000,
        ),
        (
            "fil_fixture_3",
            fork,
            "docs/迁移.md",
            "# 数据库迁移\n\n保留历史。\n",
            1,
            1_000_400,
        ),
    ] {
        tx.execute(
            "INSERT INTO files (id, session_id, path, content, version, created_at, updated_at)
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?6)",
            rusqlite::params![id, session, path, content, version, T0 + at],
        )
        .unwrap();
    }

    // Usage, cost and lifecycle columns (atomic adds, as the services do).
    tx.execute(
        "UPDATE sessions SET api_call_count = api_call_count + 4,
            input_tokens = input_tokens + 162345, output_tokens = output_tokens + 2678,
            cache_read_tokens = cache_read_tokens + 10000, cache_write_tokens = cache_write_tokens + 2048,
            reasoning_tokens = reasoning_tokens + 321, estimated_cost_usd = estimated_cost_usd + 0.5413345,
            actual_cost_usd = 0.55, cost_status = 'billed', cost_source = 'provider',
            pricing_version = '2025-11', summary_message_id = 'msg_fixture_0006',
            ended_at = ?1, end_reason = 'continued', compacting_at = NULL, updated_at = ?1
         WHERE id = 'ses_fixture_main'",
        [T0 + 900_000],
    )
    .unwrap();
    tx.execute(
        "UPDATE sessions SET api_call_count = 1, output_tokens = 4096, estimated_cost_usd = 0.004,
            cost_status = 'estimated', ended_at = ?1, end_reason = 'completed', updated_at = ?1
         WHERE id = 'call_task_7'",
        [T0 + 41_000],
    )
    .unwrap();
    tx.execute(
        "UPDATE sessions SET archived_at = ?1, compacting_at = ?1, updated_at = ?1
         WHERE id = 'ses_fixture_fork'",
        [T0 + 2_000_000],
    )
    .unwrap();
}

/// Builds the V1 fixture and checks that the committed `tests/fixtures/v1.expected.json`
/// is its dump (and so, by `v1_fixture_opens_migrates_and_reads_back_identically`, the
/// committed `v1.db`'s): a change to `write_fixture` without a rebuild fails here. With
/// `SCRIBE_REGENERATE_FIXTURES=1` it writes both files instead. (It used to be an ignored
/// test that always wrote them, so `cargo test -- --include-ignored` rewrote the
/// committed fixture.)
#[test]
fn the_v1_fixture_is_what_its_generator_writes() {
    let dir = tempfile::tempdir().unwrap();
    let work = dir.path().join("v1.db");
    {
        let db = Database::open_at_version(&work, 1).unwrap();
        assert_eq!(db.schema_version().unwrap(), 1);
        db.write(|tx| -> scribe_db::Result<_> {
            let tx = tx.conn().unwrap();
            write_fixture(tx);
            Ok(())
        })
        .unwrap();
    }
    // The V1 file's own checks: `consistency_problems` speaks today's schema (it runs
    // today's indexer first), which a version-1 file does not have; the upgrade tests run
    // it after upgrading.
    {
        let conn = rusqlite::Connection::open(&work).unwrap();
        let integrity: String = conn
            .query_row("PRAGMA integrity_check", [], |r| r.get(0))
            .unwrap();
        assert_eq!(integrity, "ok");
        let broken: i64 = conn
            .query_row("SELECT count(*) FROM pragma_foreign_key_check", [], |r| {
                r.get(0)
            })
            .unwrap();
        assert_eq!(broken, 0, "rows breaking a foreign key");
    }
    // One self-contained, compact file: no WAL beside it, rollback journal mode, small
    // pages (fewer bytes of empty space in the many small tables and indexes), no free
    // pages. The next open switches it back to WAL.
    let conn = rusqlite::Connection::open(&work).unwrap();
    let mode: String = conn
        .query_row("PRAGMA journal_mode = DELETE", [], |r| r.get(0))
        .unwrap();
    assert_eq!(mode, "delete");
    conn.execute_batch("PRAGMA page_size = 1024; VACUUM")
        .unwrap();
    let expected = dump(&conn);
    drop(conn);

    if std::env::var_os("SCRIBE_REGENERATE_FIXTURES").is_none() {
        let committed: Value = serde_json::from_str(
            &std::fs::read_to_string(fixture_dir().join("v1.expected.json")).unwrap(),
        )
        .unwrap();
        assert!(
            committed == expected,
            "tests/fixtures/v1.expected.json is not what the generator writes; if the \
             fixture itself must change, run SCRIBE_REGENERATE_FIXTURES=1 cargo test -p \
             scribe-tests --test upgrade the_v1_fixture_is_what_its_generator_writes"
        );
        return;
    }
    let out = fixture_dir();
    std::fs::create_dir_all(&out).unwrap();
    std::fs::copy(&work, out.join("v1.db")).unwrap();
    let mut text = serde_json::to_string_pretty(&expected).unwrap();
    text.push('\n');
    std::fs::write(out.join("v1.expected.json"), text).unwrap();
    let size = std::fs::metadata(out.join("v1.db")).unwrap().len();
    eprintln!("wrote {} ({size} bytes)", out.join("v1.db").display());
    assert!(size < 200 * 1024, "fixture too large: {size} bytes");
}
