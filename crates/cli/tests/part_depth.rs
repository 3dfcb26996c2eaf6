//! The built `scribe` binary over parts nested as deep as a part may be, and deeper (an
//! older build stored any depth): the conversation shows, serves and exports, and the
//! export imports into another store. Before, a 200-level tool input made every read of
//! its conversation fail ("part … is corrupt: recursion limit exceeded"), and a part at
//! 121-127 levels made an export that `scribe import` could not read.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use common::*;
use scribe_message::{MAX_PART_DEPTH, NewMessage, Part, Role};
use scribe_session::NewSession;
use serde_json::Value;

/// `levels` arrays nested in each other around `"leaf"`.
fn nested(levels: usize) -> String {
    "[".repeat(levels) + "\"leaf\"" + &"]".repeat(levels)
}

#[test]
fn deep_parts_show_serve_export_and_import() {
    let env = Env::new();
    let (sessions, messages) = env.services();
    let session = sessions
        .create(NewSession {
            title: Some("Deep probe".into()),
            ..NewSession::default()
        })
        .unwrap();
    // The deepest part Scribe stores, through the service.
    let input: Value = serde_json::from_str(&nested(MAX_PART_DEPTH - 1)).unwrap();
    let deepest = messages
        .create(NewMessage::new(
            &session.id,
            Role::Assistant,
            vec![Part::tool("call_max", "probe", input), Part::text("kept")],
        ))
        .unwrap();
    assert_eq!(deepest.parts[0].part.depth(), MAX_PART_DEPTH);
    // Parts an older build stored: 124 levels (serde_json reads it) and 200 (it does not).
    let older = messages
        .create(NewMessage::new(
            &session.id,
            Role::Assistant,
            vec![Part::text("a"), Part::text("b")],
        ))
        .unwrap();
    let conn = rusqlite::Connection::open(&env.db).unwrap();
    for (part, levels) in older.parts.iter().zip([123, 199]) {
        let data = format!(
            r#"{{"type":"tool","call_id":"call_{levels}","tool":"probe","input":{},"state":{{"status":"pending"}}}}"#,
            nested(levels)
        );
        conn.execute(
            "UPDATE parts SET type = 'tool', data = ?1 WHERE id = ?2",
            (&data, &part.id),
        )
        .unwrap();
    }
    drop(conn);

    let shown = env.ok(&["show", &session.id]);
    assert!(shown.contains("kept"), "{shown}");
    let server = Serving::start(&env.db);
    let page = server.json(&format!("/api/sessions/{}/messages", session.id));
    assert_eq!(page["messages"].as_array().unwrap().len(), 2, "{page}");
    drop(server);

    for (name, format) in [("all.json", "json"), ("all.jsonl", "jsonl")] {
        let file = env.path(name);
        env.ok(&[
            "export",
            &session.id,
            "--format",
            format,
            "-o",
            file.to_str().unwrap(),
        ]);
        let other = Env::new();
        let text = other.ok(&["import", file.to_str().unwrap()]);
        assert!(text.contains("1 imported, 0 skipped, 0 failed"), "{text}");
        let (_, imported) = other.services();
        let listed = imported.list(&session.id).unwrap();
        assert_eq!(listed[0].parts, deepest.parts);
        let depths: Vec<usize> = listed[1].parts.iter().map(|p| p.part.depth()).collect();
        assert_eq!(depths, [MAX_PART_DEPTH, MAX_PART_DEPTH]);
    }
}

/// An export (hand-edited, or an older build's) holding a part deeper than a part may,
/// though within what serde_json reads of its line: `scribe import` refuses that session,
/// saying which part of which message and the limit, and imports the others.
#[test]
fn import_refuses_a_session_whose_part_is_too_deep_and_imports_the_others() {
    let env = Env::new();
    let (sessions, messages) = env.services();
    let mut ids = Vec::new();
    for title in ["Deep", "Plain"] {
        let session = sessions
            .create(NewSession {
                title: Some(title.into()),
                ..NewSession::default()
            })
            .unwrap();
        messages
            .create(NewMessage::new(
                &session.id,
                Role::Assistant,
                vec![Part::tool(
                    "call_1",
                    "probe",
                    Value::String(format!("PLACEHOLDER-{title}")),
                )],
            ))
            .unwrap();
        ids.push(session.id);
    }
    let file = env.path("two.jsonl");
    env.ok(&[
        "export",
        &ids[0],
        &ids[1],
        "--format",
        "jsonl",
        "-o",
        file.to_str().unwrap(),
    ]);
    let text = std::fs::read_to_string(&file).unwrap();
    // 121 levels of input: the part nests 122, its line 127.
    let edited = text.replace("\"PLACEHOLDER-Deep\"", &nested(MAX_PART_DEPTH + 1));
    assert_ne!(edited, text);
    std::fs::write(&file, edited).unwrap();

    let other = Env::new();
    let out = other.run(&["import", file.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    let report = stdout(&out) + &stderr(&out);
    assert!(
        report.contains("1 imported, 0 skipped, 1 failed"),
        "{report}"
    );
    assert!(report.contains(&ids[0]), "{report}");
    assert!(
        report.contains(&format!("more than the {MAX_PART_DEPTH} a part may have")),
        "{report}"
    );
    let (imported, _) = other.services();
    assert!(imported.get(&ids[1]).is_ok());
    assert!(imported.get(&ids[0]).is_err());
}
