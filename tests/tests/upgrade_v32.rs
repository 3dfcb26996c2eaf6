//! Upgrade to schema version 32 (SQLite's view `parts_search` without `->>` and
//! `concat_ws`, so that a `sqlite3` shell as old as 3.34 can open and change a store): a
//! store written by version 31, holding parts of every shape the old
//! view read (a tool's fields absent, null, empty, numbers, booleans, objects, a NUL inside
//! a string, CJK; a text that is not a string), opens, migrates to 32 and keeps every
//! row; the new view gives each part the text the old one gave, byte for byte (FTS5 takes
//! a row out of its external-content index by the text the view gives again); and after
//! the upgrade those parts are changed and deleted with both search indexes still whole
//! (`scribe db check`, whose FTS5 integrity check compares them with the view). SQLite
//! only: PostgreSQL's version 32 does nothing.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::sync::Arc;

use rusqlite::{Connection, params};
use scribe_db::{Backend, Database, Options};
use scribe_message::{MessageService, NewMessage, Part, Role, ToolState};
use scribe_session::{NewSession, SessionService};
use scribe_tests::{dump_store_rows, messages_found, open_upgraded};
use serde_json::json;

/// Tool parts' JSON the services never write but the view must join as `concat_ws` did;
/// each with a word it alone holds where it holds any text.
const ODD_TOOL_PARTS: [&str; 12] = [
    r#"{"type":"tool","tool":"bash","input":"","state":{"status":"completed","output":"","title":""}}"#,
    r#"{"type":"tool","input":42,"state":{"status":"error","message":"boomword"}}"#,
    r#"{"type":"tool","tool":null,"input":null,"state":{"status":"pending"}}"#,
    r#"{"type":"tool","state":{"output":"onlyoutput 数据库迁移失败"}}"#,
    r#"{"type":"tool","tool":"grep","input":{"pattern":"a\u0000b"},"state":{"status":"completed","output":"nulword x\u0000y tail"}}"#,
    r#"{"type":"tool","tool":"calc","input":1.5,"state":{"message":"realword"}}"#,
    r#"{"type":"tool","tool":"","input":"","state":{}}"#,
    r#"{"type":"tool","tool":"list","input":[1,"two",null],"state":{"output":null,"message":"arrayword"}}"#,
    r#"{"type":"tool","input":"inputword"}"#,
    r#"{"type":"tool","tool":"flag","input":true,"state":{"output":false,"message":"boolword"}}"#,
    r#"{"type":"tool","tool":"big","input":1e300,"state":{"output":123456789012345678901234567890}}"#,
    r#"{"type":"tool","tool":"esc","input":"caf\u00e9 \ud83d\ude80","state":{"output":"escword \"quoted\""}}"#,
];

/// Text and reasoning parts whose text is not a string, or is missing.
const ODD_TEXT_PARTS: [(&str, &str); 5] = [
    ("text", r#"{"type":"text","text":7}"#),
    ("text", r#"{"type":"text","text":{"nested":"objword"}}"#),
    ("reasoning", r#"{"type":"reasoning","text":true}"#),
    ("reasoning", r#"{"type":"reasoning"}"#),
    ("text", r#"{"type":"text","text":null}"#),
];

/// Every searchable part's text as the view gives it, read whole as bytes (a NUL inside
/// stays).
fn view_texts(location: &str) -> Vec<(i64, Option<String>)> {
    let conn = Connection::open(location).unwrap();
    let mut stmt = conn
        .prepare("SELECT seq, CAST(search_text AS BLOB) FROM parts_search ORDER BY seq")
        .unwrap();
    let rows = stmt
        .query_map([], |row| {
            Ok((row.get(0)?, row.get::<_, Option<Vec<u8>>>(1)?))
        })
        .unwrap()
        .collect::<rusqlite::Result<Vec<_>>>()
        .unwrap();
    rows.into_iter()
        .map(|(seq, text)| (seq, text.map(|t| String::from_utf8(t).unwrap())))
        .collect()
}

/// The tool parts whose text in the view is not what `concat_ws` (which the bundled
/// SQLite has) makes of the same fields.
fn texts_unlike_concat_ws(location: &str) -> Vec<i64> {
    let conn = Connection::open(location).unwrap();
    let mut stmt = conn
        .prepare(
            "SELECT p.seq FROM parts AS p JOIN parts_search AS s ON s.seq = p.seq \
             WHERE p.type = 'tool' AND json_valid(p.data) \
               AND CAST(s.search_text AS BLOB) IS NOT CAST(concat_ws(char(10), \
                   p.data ->> '$.tool', p.data ->> '$.input', \
                   p.data ->> '$.state.output', p.data ->> '$.state.message') AS BLOB) \
             ORDER BY p.seq",
        )
        .unwrap();
    stmt.query_map([], |row| row.get(0))
        .unwrap()
        .collect::<rusqlite::Result<_>>()
        .unwrap()
}

#[test]
fn a_v31_store_upgrades_to_v32_with_its_search_texts_unchanged() {
    let dir = tempfile::tempdir().unwrap();
    let location = dir.path().join("v31.db").to_string_lossy().into_owned();
    {
        let db = Arc::new(Database::open_at_version(&location, 31).unwrap());
        assert_eq!(db.schema_version().unwrap(), 31);
        let sessions = SessionService::new(Arc::clone(&db));
        let messages = MessageService::new(Arc::clone(&db));
        let s = sessions.create(NewSession::default()).unwrap();
        let mut done = Part::tool("call_1", "read_file", json!({"path": "src/lib.rs"}));
        if let Part::Tool(tool) = &mut done {
            tool.state = ToolState::Completed {
                output: "fn completedword() {}".into(),
                title: String::new(),
                metadata: serde_json::Value::Null,
                started_at: 1,
                ended_at: 2,
            };
        }
        let mut failed = Part::tool("call_2", "bash", json!("cargo tset"));
        if let Part::Tool(tool) = &mut failed {
            tool.state = ToolState::Error {
                message: "no such command: tset failedword".into(),
                started_at: None,
                ended_at: 3,
            };
        }
        let message = messages
            .create(NewMessage::new(
                &s.id,
                Role::Assistant,
                vec![Part::text("a text part"), done, failed],
            ))
            .unwrap();
        let conn = Connection::open(&location).unwrap();
        let odd = ODD_TOOL_PARTS
            .iter()
            .map(|data| ("tool", *data))
            .chain(ODD_TEXT_PARTS);
        for (n, (kind, data)) in odd.enumerate() {
            conn.execute(
                "INSERT INTO parts (id, message_id, session_id, position, type, data, \
                 created_at, updated_at) VALUES (?1, ?2, ?3, ?4, ?5, ?6, 10, 10)",
                params![format!("prt_odd{n}"), message.id, s.id, 10 + n, kind, data],
            )
            .unwrap();
        }
        db.index_pending().unwrap();
        assert_eq!(db.check().unwrap().problems(), Vec::<String>::new());
    }
    let texts_before = view_texts(&location);
    assert_eq!(
        texts_before.len(),
        3 + ODD_TOOL_PARTS.len() + ODD_TEXT_PARTS.len()
    );
    assert!(
        texts_before
            .iter()
            .any(|(_, text)| text.as_deref().is_some_and(|t| t.contains('\0'))),
        "no text with a NUL inside: {texts_before:?}"
    );
    let before = dump_store_rows(Backend::Sqlite, &location).unwrap();

    let db = open_upgraded(
        Backend::Sqlite,
        &location,
        Options::default(),
        &before,
        "V32",
    );
    assert_eq!(view_texts(&location), texts_before);
    assert_eq!(texts_unlike_concat_ws(&location), Vec::<i64>::new());
    assert_eq!(db.check().unwrap().problems(), Vec::<String>::new());

    let messages = MessageService::new(Arc::clone(&db));
    for word in [
        "completedword",
        "failedword",
        "boomword",
        "nulword",
        "realword",
        "arrayword",
        "inputword",
        "boolword",
        "escword",
        "objword",
        "迁移",
    ] {
        assert_eq!(messages_found(&messages, word).unwrap(), 1, "{word}");
    }

    // An old part changed, then every tool part and odd text deleted: FTS5 takes each
    // indexed text out by the text the view gives now.
    let conn = Connection::open(&location).unwrap();
    conn.execute_batch("PRAGMA foreign_keys = ON").unwrap();
    conn.execute(
        "UPDATE parts SET data = json_set(data, '$.state.message', 'changedword') \
         WHERE id = 'prt_odd1'",
        [],
    )
    .unwrap();
    db.index_pending().unwrap();
    assert_eq!(db.check().unwrap().problems(), Vec::<String>::new());
    assert_eq!(messages_found(&messages, "boomword").unwrap(), 0);
    assert_eq!(messages_found(&messages, "changedword").unwrap(), 1);
    let deleted = conn
        .execute(
            "DELETE FROM parts WHERE type = 'tool' OR id LIKE 'prt_odd%'",
            [],
        )
        .unwrap();
    assert_eq!(deleted, 2 + ODD_TOOL_PARTS.len() + ODD_TEXT_PARTS.len());
    assert_eq!(db.check().unwrap().problems(), Vec::<String>::new());
    for word in ["completedword", "nulword", "changedword", "objword", "迁移"] {
        assert_eq!(messages_found(&messages, word).unwrap(), 0, "{word}");
    }
    assert_eq!(messages_found(&messages, "text").unwrap(), 1);
}
