//! Schema version 18: SQLite's search triggers and the view `parts_search` test a part's
//! type with `=` and OR instead of an IN list (which SQLite builds a temporary table for at
//! every execution). Migrating a version 16 file with data keeps every row, the queue and
//! both indexes; afterwards the view holds the same rows, and inserts, type changes and
//! deletes queue, index and unindex exactly as before.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use common::*;
use rusqlite::Connection;
use scribe_db::{Database, Options};
use serde_json::json;

/// The view's rows (seq, text, damaged), the queue, and the parts each index holds.
type Derived = (
    Vec<(i64, Option<String>, bool)>,
    Vec<i64>,
    Vec<i64>,
    Vec<i64>,
);

fn derived(c: &Connection) -> Derived {
    let list = |sql: &str| -> Vec<i64> {
        c.prepare(sql)
            .unwrap()
            .query_map([], |r| r.get(0))
            .unwrap()
            .map(Result::unwrap)
            .collect()
    };
    (
        c.prepare("SELECT seq, search_text, damaged FROM parts_search ORDER BY seq")
            .unwrap()
            .query_map([], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)))
            .unwrap()
            .map(Result::unwrap)
            .collect(),
        list("SELECT seq FROM search_queue ORDER BY seq"),
        list("SELECT id FROM parts_fts_docsize ORDER BY id"),
        list("SELECT id FROM parts_fts_trigram_docsize ORDER BY id"),
    )
}

/// (type, name, sql) of every trigger and view of the schema.
fn definitions(c: &Connection) -> Vec<(String, String, String)> {
    c.prepare(
        "SELECT type, name, sql FROM sqlite_master WHERE type IN ('trigger', 'view') ORDER BY type, name",
    )
    .unwrap()
    .query_map([], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)))
    .unwrap()
    .map(Result::unwrap)
    .collect()
}

fn seq_of(c: &Connection, part_id: &str) -> i64 {
    c.query_row("SELECT seq FROM parts WHERE id = ?1", [part_id], |r| {
        r.get(0)
    })
    .unwrap()
}

fn queued(c: &Connection, part_id: &str) -> bool {
    c.query_row(
        "SELECT EXISTS (SELECT 1 FROM search_queue WHERE seq = ?1)",
        [seq_of(c, part_id)],
        |r| r.get(0),
    )
    .unwrap()
}

#[test]
fn migrating_from_v16_keeps_rows_queue_and_indexes_and_tests_types_without_in_lists() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("v16.db");
    let s = {
        let db = Database::open_at_version(&path, 16).unwrap();
        let s = session(&db, "cli");
        db.write(|tx| -> scribe_db::Result<_> {
            let c = tx.conn().unwrap();
            message_with_part(c, &s, "user", "text", &text("indexed alpha 日本語の文章"))?;
            message_with_part(
                c,
                &s,
                "assistant",
                "reasoning",
                r#"{"type":"reasoning","text":"pondering charlie"}"#,
            )?;
            message_with_part(
                c,
                &s,
                "assistant",
                "tool",
                &tool("grep", json!({"pattern": "needle"}), "found it"),
            )?;
            message_with_part(c, &s, "assistant", "step_start", r#"{"type":"step_start"}"#)?;
            Ok(())
        })
        .unwrap();
        db.index_pending().unwrap();
        s
    };
    // A part left waiting in the queue by another program.
    let (waiting, before, schema_before) = {
        let c = Connection::open(&path).unwrap();
        let (_, waiting) =
            message_with_part(&c, &s, "user", "text", &text("waiting bravo")).unwrap();
        (waiting, derived(&c), definitions(&c))
    };
    assert_eq!(
        before.0.len(),
        4,
        "text, reasoning, tool and the waiting text"
    );
    assert_eq!(before.1.len(), 1, "one part waits");

    let db = Database::open_with(
        &path,
        Options {
            background_indexing: false,
            ..Options::default()
        },
    )
    .unwrap();
    let report = db.migration_report();
    assert_eq!(report.from, 16);
    let v18 = report.applied.iter().find(|m| m.version == 18).unwrap();
    assert_eq!(v18.name, "search_type_without_in_lists");

    db.read(|tx| -> scribe_db::Result<_> {
        let c = tx.conn().unwrap();
        // Same rows of the view, same queue, same rows in both indexes.
        assert_eq!(derived(c), before);
        // The same triggers and views by name; none tests a type with an IN list.
        let after = definitions(c);
        let names = |d: &[(String, String, String)]| -> Vec<(String, String)> {
            d.iter().map(|(t, n, _)| (t.clone(), n.clone())).collect()
        };
        // V23 drops the `*_touch` triggers (updated_at comes from the statements).
        let schema_before: Vec<_> = schema_before
            .iter()
            .filter(|(_, n, _)| !n.ends_with("_touch"))
            .cloned()
            .collect();
        assert_eq!(names(&after), names(&schema_before));
        for (_, name, sql) in &after {
            assert!(
                !sql.contains("IN ('text', 'reasoning', 'tool')"),
                "{name} still has the IN list"
            );
        }
        assert_eq!(hits(c, "parts_fts", "alpha").len(), 1);
        assert_eq!(hits(c, "parts_fts", "needle").len(), 1);
        assert_eq!(hits(c, "parts_fts", "charlie").len(), 1);
        assert_eq!(hits(c, "parts_fts_trigram", "日本語").len(), 1);
        assert!(hits(c, "parts_fts", "bravo").is_empty());
        Ok(())
    })
    .unwrap();

    // After the migration each searchable type is queued on insert, any other is not.
    let inserted = db
        .write(|tx| -> scribe_db::Result<_> {
            let c = tx.conn().unwrap();
            let mut ids = Vec::new();
            for (kind, data) in [
                ("text", text("delta words")),
                (
                    "reasoning",
                    r#"{"type":"reasoning","text":"echo thoughts"}"#.to_owned(),
                ),
                ("tool", tool("sed", json!({"expr": "foxtrot"}), "edited")),
                ("step_start", r#"{"type":"step_start"}"#.to_owned()),
                ("finish", r#"{"type":"finish","reason":"stop"}"#.to_owned()),
            ] {
                let (_, part) = message_with_part(c, &s, "assistant", kind, &data)?;
                let waits = queued(c, &part);
                ids.push((kind, part, waits));
            }
            Ok(ids)
        })
        .unwrap();
    let queued_kinds: Vec<(&str, bool)> = inserted.iter().map(|(k, _, q)| (*k, *q)).collect();
    assert_eq!(
        queued_kinds,
        vec![
            ("text", true),
            ("reasoning", true),
            ("tool", true),
            ("step_start", false),
            ("finish", false),
        ]
    );
    db.index_pending().unwrap();
    db.read(|tx| -> scribe_db::Result<_> {
        let c = tx.conn().unwrap();
        assert_eq!(hits(c, "parts_fts", "bravo"), vec![waiting.clone()]);
        for word in ["delta", "echo", "foxtrot"] {
            assert_eq!(hits(c, "parts_fts", word).len(), 1, "{word}");
        }
        Ok(())
    })
    .unwrap();
    assert_derived_exact(&db);

    // An indexed part whose type changes to one that is not searched leaves both indexes
    // and the queue; a part whose type changes to a searched one is queued.
    let text_part = inserted[0].1.clone();
    let step_part = inserted[3].1.clone();
    db.write(|tx| -> scribe_db::Result<_> {
        let c = tx.conn().unwrap();
        c.execute(
            "UPDATE parts SET type = 'step_start', data = '{\"type\":\"step_start\"}' WHERE id = ?1",
            [&text_part],
        )?;
        assert!(!queued(c, &text_part));
        c.execute(
            "UPDATE parts SET type = 'text', data = ?1 WHERE id = ?2",
            [text("golf revived"), step_part.clone()],
        )?;
        assert!(queued(c, &step_part));
        Ok(())
    })
    .unwrap();
    db.index_pending().unwrap();
    db.read(|tx| -> scribe_db::Result<_> {
        let c = tx.conn().unwrap();
        assert!(hits(c, "parts_fts", "delta").is_empty());
        assert_eq!(hits(c, "parts_fts", "golf"), vec![step_part.clone()]);
        Ok(())
    })
    .unwrap();
    assert_derived_exact(&db);

    // Deleting the session takes every part out of both indexes and the queue.
    db.write(|tx| -> scribe_db::Result<_> {
        tx.conn().unwrap().execute("DELETE FROM sessions", [])?;
        Ok(())
    })
    .unwrap();
    db.read(|tx| -> scribe_db::Result<_> {
        let c = tx.conn().unwrap();
        let d = derived(c);
        assert!(d.0.is_empty() && d.1.is_empty() && d.2.is_empty() && d.3.is_empty());
        Ok(())
    })
    .unwrap();
    assert_derived_exact(&db);
}
