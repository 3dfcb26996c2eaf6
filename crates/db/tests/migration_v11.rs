//! Schema version 11: `parts` loses its generated `search_text` column (the searched text is
//! computed by the views where search reads it). Migrating a version 10 file with data
//! keeps every row and `seq`, the queue (a part waiting stays waiting), both indexes (an
//! indexed part stays found without re-indexing), the triggers, indexes and foreign keys,
//! and a damaged part behaves as V3 and V7 say: not searchable, and repaired exactly.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::path::Path;

use common::*;
use rusqlite::Connection;
use scribe_db::search::{self, SearchFilter, TextQuery};
use scribe_db::{Database, Options};
use serde_json::json;

/// What a file holds, read raw: (seq, id, data, searched text) per part, the queue, and
/// the parts each index holds a row for.
type Snapshot = (
    Vec<(i64, String, String, Option<String>)>,
    Vec<i64>,
    Vec<i64>,
    Vec<i64>,
);

fn snapshot(c: &Connection, text: &str) -> Snapshot {
    let rows = c
        .prepare(&format!(
            "SELECT p.seq, p.id, p.data, {text} FROM parts AS p \
             LEFT JOIN parts_search AS v ON v.seq = p.seq ORDER BY p.seq"
        ))
        .unwrap()
        .query_map([], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?)))
        .unwrap()
        .map(Result::unwrap)
        .collect();
    let list = |sql: &str| -> Vec<i64> {
        c.prepare(sql)
            .unwrap()
            .query_map([], |r| r.get(0))
            .unwrap()
            .map(Result::unwrap)
            .collect()
    };
    (
        rows,
        list("SELECT seq FROM search_queue ORDER BY seq"),
        list("SELECT id FROM parts_fts_docsize ORDER BY id"),
        list("SELECT id FROM parts_fts_trigram_docsize ORDER BY id"),
    )
}

fn schema_names(c: &Connection, kind: &str, table: &str) -> Vec<String> {
    c.prepare("SELECT name FROM sqlite_master WHERE type = ?1 AND tbl_name = ?2 ORDER BY name")
        .unwrap()
        .query_map([kind, table], |r| r.get(0))
        .unwrap()
        .map(Result::unwrap)
        .collect()
}

fn column_names(c: &Connection) -> Vec<String> {
    c.prepare("SELECT name FROM pragma_table_xinfo('parts')")
        .unwrap()
        .query_map([], |r| r.get(0))
        .unwrap()
        .map(Result::unwrap)
        .collect()
}

/// Replaces the opening brace of the text part `text` on disk with a space, as bit rot
/// would; the database must be closed.
fn damage_on_disk(path: &Path, text: &str) {
    let mut bytes = std::fs::read(path).unwrap();
    let needle = format!(r#"{{"text":"{text}""#);
    let at: Vec<usize> = bytes
        .windows(needle.len())
        .enumerate()
        .filter(|(_, w)| *w == needle.as_bytes())
        .map(|(i, _)| i)
        .collect();
    assert_eq!(at.len(), 1, "{text:?} should be on disk exactly once");
    bytes[at[0]] = b' ';
    std::fs::write(path, bytes).unwrap();
}

fn search_words(db: &Database, expr: &str) -> Vec<String> {
    db.read(|tx| search::search(tx, &SearchFilter::new(TextQuery::Words(expr.into()))))
        .unwrap()
        .into_iter()
        .map(|h| h.part_id)
        .collect()
}

#[test]
fn migrating_from_v10_keeps_rows_queue_indexes_and_damaged_behaviour() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("v10.db");
    let (s, [indexed, tool_part, damaged, other]) = {
        let db = Database::open_at_version(&path, 10).unwrap();
        let s = session(&db, "cli");
        let write = |kind: &str, data: &str| {
            db.write(|tx| -> scribe_db::Result<_> {
                message_with_part(tx.conn().unwrap(), &s, "user", kind, data)
            })
            .unwrap()
            .1
        };
        let ids = [
            write("text", &text("indexed alpha 日本語の文章")),
            write(
                "tool",
                &tool("grep", json!({"pattern": "needle"}), "found it"),
            ),
            write("text", &text("quill damaged later")),
            write("step_start", r#"{"type":"step_start"}"#),
        ];
        db.index_pending().unwrap();
        (s, ids)
    };
    // Another program (or a process that crashed before indexing) leaves a part waiting
    // in the queue, in neither index.
    let (waiting, before, triggers, indexes) = {
        let c = Connection::open(&path).unwrap();
        let (_, waiting) =
            message_with_part(&c, &s, "user", "text", &text("waiting bravo")).unwrap();
        assert_eq!(hits(&c, "parts_fts", "alpha"), vec![indexed.clone()]);
        assert!(hits(&c, "parts_fts", "bravo").is_empty());
        assert!(column_names(&c).contains(&"search_text".to_owned()));
        (
            waiting,
            snapshot(&c, "p.search_text"),
            schema_names(&c, "trigger", "parts"),
            schema_names(&c, "index", "parts"),
        )
    };
    assert_eq!(before.1.len(), 1, "one part waits: {:?}", before.1);
    damage_on_disk(&path, "quill damaged later");

    let db = Database::open_with(
        &path,
        Options {
            background_indexing: false,
            ..Options::default()
        },
    )
    .unwrap();
    let report = db.migration_report();
    assert_eq!(report.from, 10);
    assert_eq!(report.applied[0].version, 11);
    assert_eq!(report.applied[0].name, "parts_without_search_text");
    db.read(|tx| -> scribe_db::Result<_> {
        let c = tx.conn().unwrap();
        assert!(!column_names(c).contains(&"search_text".to_owned()));
        let after = snapshot(c, "v.search_text");
        // The rows, every seq, the text each part is searched by (NULL for the damaged
        // part and the unsearchable one), the queue and both indexes' rows: as before.
        assert_eq!(after.0.len(), 5);
        for (b, a) in before.0.iter().zip(&after.0) {
            assert_eq!((&b.0, &b.1), (&a.0, &a.1));
            if b.1 == damaged {
                assert!(a.2.starts_with(' '), "the damaged row is copied as it is");
                assert_eq!(a.3, None);
            } else {
                assert_eq!(b, a);
            }
        }
        assert_eq!(
            (&after.1, &after.2, &after.3),
            (&before.1, &before.2, &before.3)
        );
        assert_eq!(
            after.0.iter().find(|r| r.1 == other).map(|r| r.3.clone()),
            Some(None)
        );
        // V23 drops `parts_touch` (updated_at comes from the statements, the Clock's).
        let triggers: Vec<String> = triggers
            .iter()
            .filter(|t| *t != "parts_touch")
            .cloned()
            .collect();
        assert_eq!(schema_names(c, "trigger", "parts"), triggers);
        assert_eq!(schema_names(c, "index", "parts"), indexes);
        assert_eq!(
            schema_names(c, "table", "parts_new"),
            Vec::<String>::new(),
            "the rebuild left its temporary table"
        );
        let fk: i64 = c.query_row("SELECT count(*) FROM pragma_foreign_key_check", [], |r| {
            r.get(0)
        })?;
        assert_eq!(fk, 0);
        // The indexed parts are found without re-indexing; the waiting one is not yet.
        assert_eq!(hits(c, "parts_fts", "alpha"), vec![indexed.clone()]);
        assert_eq!(hits(c, "parts_fts", "needle"), vec![tool_part.clone()]);
        assert_eq!(
            hits(c, "parts_fts_trigram", "日本語"),
            vec![indexed.clone()]
        );
        assert!(hits(c, "parts_fts", "bravo").is_empty());
        Ok(())
    })
    .unwrap();
    // The damaged part's stale tokens make the check report it, as before V11 (V3).
    assert!(!db.check().unwrap().is_ok());
    // A search still runs, with a damaged row among the hits' candidates.
    assert_eq!(search_words(&db, "alpha"), vec![indexed.clone()]);
    // Overwriting the damaged part (the repair path) rebuilds the indexes exactly.
    db.write(|tx| -> scribe_db::Result<_> {
        let changed = tx.conn().unwrap().execute(
            "UPDATE parts SET data = ?1 WHERE id = ?2",
            [text("repaired quill"), damaged.clone()],
        )?;
        assert_eq!(changed, 1);
        Ok(())
    })
    .unwrap();
    db.index_pending().unwrap();
    assert_eq!(search_words(&db, "bravo"), vec![waiting.clone()]);
    assert_eq!(search_words(&db, "repaired"), vec![damaged.clone()]);
    assert_eq!(search_words(&db, "needle"), vec![tool_part.clone()]);
    assert!(
        db.check().unwrap().is_ok(),
        "{:?}",
        db.check().unwrap().problems()
    );
    assert_derived_exact(&db);
    // The rebuilt table keeps its CHECK (bad JSON is refused), foreign key and uniqueness.
    let s = session(&db, "cli");
    let (m, _) = db
        .write(|tx| -> scribe_db::Result<_> {
            message_with_part(tx.conn().unwrap(), &s, "user", "text", &text("after"))
        })
        .unwrap();
    let bad_json = db.write(|tx| -> scribe_db::Result<_> {
        add_part(tx.conn().unwrap(), "prt_x", &m, &s, 1, "text", "{oops")
    });
    assert!(bad_json.is_err());
    let bad_fk = db.write(|tx| -> scribe_db::Result<_> {
        add_part(
            tx.conn().unwrap(),
            "prt_y",
            "msg_none",
            &s,
            1,
            "text",
            &text("x"),
        )
    });
    assert!(bad_fk.is_err());
    let dup = db.write(|tx| -> scribe_db::Result<_> {
        add_part(tx.conn().unwrap(), "prt_z", &m, &s, 0, "text", &text("x"))
    });
    assert!(
        matches!(dup, Err(scribe_db::Error::Conflict { .. })),
        "{dup:?}"
    );
    // Deleting the session takes its parts out of both indexes and the queue.
    db.write(|tx| -> scribe_db::Result<_> {
        tx.conn().unwrap().execute("DELETE FROM sessions", [])?;
        Ok(())
    })
    .unwrap();
    assert!(search_words(&db, "alpha").is_empty());
    assert_derived_exact(&db);
}
