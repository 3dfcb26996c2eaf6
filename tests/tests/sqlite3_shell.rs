//! A store is an SQLite file other programs can open: the `sqlite3` shell and the SQLite
//! of language bindings, which on many systems is older than the one Scribe bundles
//! (Debian 12: 3.40; Ubuntu 22.04: 3.37; RHEL 9: 3.34; macOS 13 and 14: 3.39 and 3.43).
//!
//! - The schema (tables, indexes, views, triggers) calls no function and uses no syntax
//!   newer than SQLite 3.34 (the first with FTS5's trigram tokenizer): read off a new
//!   store's `sqlite_master`, so a later migration is held to it too. Before schema V32
//!   the view `parts_search` used `->>` (3.38), so an older SQLite could not load the
//!   schema at all ("malformed database schema"), and `concat_ws` (3.44), so up to 3.43
//!   every read of the search indexes' text, every change or delete of a part, and with
//!   foreign keys on every delete of a message or session failed.
//! - With the machine's own `sqlite3` shell (a real process; `.ci/run` installs Debian's):
//!   a search with a snippet, a part's text changed, tool parts and a whole session
//!   deleted with foreign keys on; Scribe then finds the store whole (`scribe db check`),
//!   searches the new text and not the old, and counts what is left.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::io::Write;
use std::process::{Command, Stdio};
use std::sync::Arc;

use scribe_db::Database;
use scribe_db::testing::sql_code;
use scribe_message::{MessageService, NewMessage, Part, Role, ToolState};
use scribe_session::{NewSession, SessionService};
use scribe_tests::messages_found;
use serde_json::json;

/// Functions SQLite gained after 3.34 (from its release notes), which a store's schema
/// must not call: the math functions (3.35, and only where SQLite was built with them),
/// `unixepoch` and `format` (3.38), `unhex` (3.41), `octet_length` and `timediff`
/// (3.43), `concat`, `concat_ws` and `string_agg` (3.44), the `jsonb` family (3.45),
/// `json_pretty` (3.46), `if` (3.48), `unistr` and `unistr_quote` (3.50).
const NEWER_FUNCTIONS: [&str; 42] = [
    "acos",
    "acosh",
    "asin",
    "asinh",
    "atan",
    "atan2",
    "atanh",
    "ceil",
    "ceiling",
    "cos",
    "cosh",
    "degrees",
    "exp",
    "floor",
    "ln",
    "log",
    "log10",
    "log2",
    "mod",
    "pi",
    "pow",
    "power",
    "radians",
    "sin",
    "sinh",
    "sqrt",
    "tan",
    "tanh",
    "trunc",
    "unixepoch",
    "format",
    "unhex",
    "octet_length",
    "timediff",
    "concat",
    "concat_ws",
    "string_agg",
    "jsonb",
    "json_pretty",
    "if",
    "unistr",
    "unistr_quote",
];

/// Syntax SQLite gained after 3.34: `RETURNING` and `[NOT] MATERIALIZED` (3.35), `STRICT`
/// tables (3.37), the operators `->` and `->>` (3.38), `IS [NOT] DISTINCT FROM` and
/// RIGHT and FULL joins (3.39). Matched in [`sql_code`]'s reading of the SQL.
const NEWER_SYNTAX: [&str; 7] = [
    "returning",
    "materialized",
    ") strict",
    "->",
    "distinct from",
    "right join",
    "full join",
];

/// The SQL of every table, index, view and trigger of a new store.
fn schema_sql() -> Vec<(String, String)> {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("new.db");
    drop(Database::open(&path).unwrap());
    let conn = rusqlite::Connection::open(&path).unwrap();
    let mut stmt = conn
        .prepare("SELECT name, sql FROM sqlite_master WHERE sql IS NOT NULL ORDER BY name")
        .unwrap();
    stmt.query_map([], |row| Ok((row.get(0)?, row.get(1)?)))
        .unwrap()
        .collect::<rusqlite::Result<_>>()
        .unwrap()
}

/// The names `code` (from [`sql_code`]) calls as functions: each word followed by `(`.
fn called_functions(code: &str) -> Vec<String> {
    let mut calls = Vec::new();
    let mut word = String::new();
    let mut after_word = false;
    for c in code.chars() {
        if c.is_ascii_alphanumeric() || c == '_' {
            if after_word {
                word.clear();
                after_word = false;
            }
            word.push(c);
        } else if c.is_whitespace() && !word.is_empty() {
            after_word = true;
        } else {
            if c == '(' && !word.is_empty() {
                calls.push(word.clone());
            }
            word.clear();
            after_word = false;
        }
    }
    calls
}

#[test]
fn the_word_scan_finds_calls_outside_comments_and_strings() {
    assert_eq!(
        called_functions(&sql_code(
            "SELECT concat_ws (char(10), 'if(' , x) -- concat(\nFROM t"
        )),
        ["concat_ws", "char"]
    );
    assert_eq!(
        sql_code("SELECT a  ->>\n '$.x' -- b -> c\nFROM t WHERE d = 'e -> f'"),
        "select a ->> '' from t where d = ''"
    );
}

#[test]
fn the_schema_needs_nothing_newer_than_sqlite_3_34() {
    let schema = schema_sql();
    assert!(schema.iter().any(|(name, _)| name == "parts_search"));
    let mut newer = Vec::new();
    for (name, sql) in &schema {
        let code = sql_code(sql);
        for call in called_functions(&code) {
            if NEWER_FUNCTIONS.contains(&call.as_str()) || call.starts_with("jsonb_") {
                newer.push(format!("{name}: {call}()"));
            }
        }
        for syntax in NEWER_SYNTAX {
            if code.contains(syntax) {
                newer.push(format!("{name}: {syntax}"));
            }
        }
    }
    assert_eq!(newer, Vec::<String>::new());
}

/// What `sqlite3 --version` prints, for the failure messages.
fn shell_version() -> String {
    let out = Command::new("sqlite3")
        .arg("--version")
        .output()
        .expect("run sqlite3 (Debian's package sqlite3)");
    String::from_utf8_lossy(&out.stdout).trim().to_owned()
}

/// Runs `script` in the `sqlite3` shell on `path`, stopping at the first error; its
/// standard output.
fn shell(path: &std::path::Path, script: &str) -> String {
    let mut child = Command::new("sqlite3")
        .arg("-bail")
        .arg(path)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("run sqlite3 (Debian's package sqlite3)");
    child
        .stdin
        .take()
        .unwrap()
        .write_all(script.as_bytes())
        .unwrap();
    let out = child.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success() && stderr.is_empty(),
        "sqlite3 ({}) failed: {}\n{stderr}",
        shell_version(),
        out.status
    );
    String::from_utf8(out.stdout).unwrap()
}

#[test]
#[ignore = "needs a sqlite3 shell on PATH (Debian's package sqlite3); .ci/run installs it and runs this"]
fn an_older_sqlite3_shell_reads_and_changes_a_store() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("scribe.db");
    let (kept, gone) = {
        let db = Arc::new(Database::open(&path).unwrap());
        let sessions = SessionService::new(Arc::clone(&db));
        let messages = MessageService::new(Arc::clone(&db));
        let kept = sessions.create(NewSession::titled("kept")).unwrap();
        let gone = sessions.create(NewSession::titled("gone")).unwrap();
        let mut tool = Part::tool("call_1", "bash", json!({"command": "make deploy"}));
        if let Part::Tool(part) = &mut tool {
            part.state = ToolState::Error {
                message: "permission denied".into(),
                started_at: None,
                ended_at: 1,
            };
        }
        messages
            .create(NewMessage::new(
                &kept.id,
                Role::User,
                vec![Part::text("deploy the staging build")],
            ))
            .unwrap();
        messages
            .create(NewMessage::new(
                &kept.id,
                Role::Assistant,
                vec![Part::text("running it"), tool],
            ))
            .unwrap();
        messages
            .create(NewMessage::new(
                &gone.id,
                Role::User,
                vec![Part::text("数据库迁移失败 staging")],
            ))
            .unwrap();
        db.index_pending().unwrap();
        (kept.id, gone.id)
    };

    let out = shell(
        &path,
        &format!(
            "PRAGMA foreign_keys = ON;
             SELECT snippet(parts_fts, 0, '[', ']', '…', 8) FROM parts_fts
                 WHERE parts_fts MATCH 'staging' ORDER BY rowid;
             SELECT count(*) FROM parts_fts_trigram WHERE parts_fts_trigram MATCH '迁移失败';
             UPDATE parts SET data = json_set(data, '$.text', 'roll back the canary')
                 WHERE data ->> '$.text' = 'deploy the staging build';
             DELETE FROM parts WHERE type = 'tool';
             DELETE FROM sessions WHERE id = '{gone}';"
        ),
    );
    assert_eq!(
        out,
        "deploy the [staging] build\n数据库迁移失败 [staging]\n1\n",
        "sqlite3 {}",
        shell_version()
    );

    let db = Arc::new(Database::open(&path).unwrap());
    let sessions = SessionService::new(Arc::clone(&db));
    let messages = MessageService::new(Arc::clone(&db));
    assert_eq!(db.check().unwrap().problems(), Vec::<String>::new());
    assert_eq!(messages_found(&messages, "canary").unwrap(), 1);
    for word in ["staging", "denied", "迁移失败"] {
        assert_eq!(messages_found(&messages, word).unwrap(), 0, "{word}");
    }
    let kept = sessions.get(&kept).unwrap();
    assert_eq!((kept.message_count, kept.tool_call_count), (2, 0));
    assert!(sessions.get(&gone).is_err());
    assert_eq!(db.check().unwrap().problems(), Vec::<String>::new());
}
