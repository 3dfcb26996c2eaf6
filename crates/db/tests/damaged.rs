//! Schema version 3: a part whose JSON is damaged on disk (only bit rot can put it there)
//! stays out of search instead of breaking it, can be overwritten and deleted, and the
//! search indexes end up exact again; and migrating from version 2 keeps every row, `seq`
//! and both indexes valid, even with a damaged row already present.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::path::Path;

use common::*;
use rusqlite::Connection;
use scribe_db::Database;
use scribe_db::queries as q;

/// Replaces the opening brace of the JSON `{"text":"<text>","type":"text"}` in the file
/// with a space, as a flipped byte would; the database must be closed.
fn damage_on_disk(path: &Path, text: &str) {
    let mut bytes = std::fs::read(path).unwrap();
    let needle = format!(r#"{{"text":"{text}""#);
    let needle = needle.as_bytes();
    let at: Vec<usize> = bytes
        .windows(needle.len())
        .enumerate()
        .filter(|(_, w)| *w == needle)
        .map(|(i, _)| i)
        .collect();
    assert_eq!(at.len(), 1, "{text:?} should be on disk exactly once");
    bytes[at[0]] = b' ';
    std::fs::write(path, bytes).unwrap();
}

/// A closed database at `version` with one session of three single-part messages, the
/// second part's JSON damaged on disk. Returns (session, [(message, part)]).
fn damaged_database(path: &Path, version: Option<i64>) -> (String, Vec<(String, String)>) {
    let (session, rows) = {
        let db = match version {
            Some(v) => Database::open_at_version(path, v).unwrap(),
            None => Database::open(path).unwrap(),
        };
        let s = session(&db, "cli");
        let rows: Vec<_> = (0..3)
            .map(|i| {
                db.write(|tx| -> scribe_db::Result<_> {
                    let tx = tx.conn().unwrap();
                    message_with_part(tx, &s, "user", "text", &text(&format!("quill {i} 羽毛笔")))
                })
                .unwrap()
            })
            .collect();
        (s, rows)
    };
    damage_on_disk(path, "quill 1 羽毛笔");
    (session, rows)
}

fn check_problems(db: &Database) -> Vec<String> {
    db.check().unwrap().problems()
}

#[test]
fn a_damaged_part_is_not_searchable_but_does_not_break_search() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("d.db");
    let (_, rows) = damaged_database(&path, None);
    let db = Database::open(&path).unwrap();
    db.index_pending().unwrap();
    db.read(|c| -> scribe_db::Result<_> { let c = c.conn().unwrap();
        let (text, damaged): (Option<String>, bool) = c.query_row(
            "SELECT v.search_text, v.damaged FROM parts_search AS v JOIN parts AS p ON p.seq = v.seq \
             WHERE p.id = ?1",
            [&rows[1].1],
            |r| Ok((r.get(0)?, r.get(1)?)),
        )?;
        assert_eq!((text, damaged), (None, true));
        // The whole row reads (no "malformed JSON" from its text).
        let part = q::get_part(c, &rows[1].1)?;
        assert!(part.data.starts_with(' '));
        // The index still holds the tokens from before the damage; matching it is harmless.
        for index in ["parts_fts", "parts_fts_trigram"] {
            let found = hits(c, index, "quill");
            assert_eq!(found.len(), 3, "{index}");
            let snippets: Vec<Option<String>> = c
                .prepare(&format!(
                    "SELECT snippet({index}, 0, '[', ']', '…', 8) FROM {index} WHERE {index} MATCH 'quill'"
                ))?
                .query_map([], |r| r.get(0))?
                .collect::<Result<_, _>>()?;
            assert_eq!(snippets.len(), 3);
        }
        Ok(())
    })
    .unwrap();
    // The damage itself is what a check reports.
    assert!(!check_problems(&db).is_empty());
}

#[test]
fn overwriting_a_damaged_part_repairs_it_and_the_indexes() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("d.db");
    let (_, rows) = damaged_database(&path, None);
    let db = Database::open(&path).unwrap();
    db.write(|tx| -> scribe_db::Result<_> {
        let tx = tx.conn().unwrap();
        let changed = tx.execute(
            "UPDATE parts SET data = ?1 WHERE id = ?2",
            [text("repaired quill 修好了"), rows[1].1.clone()],
        )?;
        assert_eq!(changed, 1);
        Ok(())
    })
    .unwrap();
    assert_eq!(check_problems(&db), Vec::<String>::new());
    assert_derived_exact(&db);
    db.index_pending().unwrap();
    db.read(|c| -> scribe_db::Result<_> {
        let c = c.conn().unwrap();
        assert_eq!(hits(c, "parts_fts", "repaired"), vec![rows[1].1.clone()]);
        assert_eq!(hits(c, "parts_fts", "quill").len(), 3);
        assert_eq!(hits(c, "parts_fts_trigram", "pair").len(), 1);
        Ok(())
    })
    .unwrap();
}

#[test]
fn overwriting_a_damaged_part_with_an_unsearchable_one_drops_its_tokens() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("d.db");
    let (_, rows) = damaged_database(&path, None);
    let db = Database::open(&path).unwrap();
    // search_text stays NULL → NULL, so only the json_valid(old.data) arm fires the trigger.
    db.write(|tx| -> scribe_db::Result<_> {
        let tx = tx.conn().unwrap();
        tx.execute(
            "UPDATE parts SET type = 'finish', data = '{\"type\":\"finish\"}' WHERE id = ?1",
            [&rows[1].1],
        )?;
        Ok(())
    })
    .unwrap();
    assert_eq!(check_problems(&db), Vec::<String>::new());
    db.index_pending().unwrap();
    db.read(|c| -> scribe_db::Result<_> {
        let c = c.conn().unwrap();
        assert_eq!(hits(c, "parts_fts", "quill").len(), 2);
        Ok(())
    })
    .unwrap();
}

#[test]
fn deleting_a_damaged_part_message_or_session_leaves_exact_indexes() {
    for what in ["part", "message", "session"] {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("d.db");
        let (session, rows) = damaged_database(&path, None);
        let db = Database::open(&path).unwrap();
        db.write(|tx| -> scribe_db::Result<_> {
            let tx = tx.conn().unwrap();
            let changed = match what {
                "part" => tx.execute("DELETE FROM parts WHERE id = ?1", [&rows[1].1])?,
                "message" => tx.execute("DELETE FROM messages WHERE id = ?1", [&rows[1].0])?,
                _ => tx.execute("DELETE FROM sessions WHERE id = ?1", [&session])?,
            };
            assert_eq!(changed, 1);
            Ok(())
        })
        .unwrap();
        assert_eq!(check_problems(&db), Vec::<String>::new(), "{what}");
        assert_derived_exact(&db);
        db.index_pending().unwrap();
        let left = db
            .read(|c| -> scribe_db::Result<_> {
                let c = c.conn().unwrap();
                Ok(hits(c, "parts_fts", "quill").len())
            })
            .unwrap();
        assert_eq!(left, if what == "session" { 0 } else { 2 }, "{what}");
    }
}

/// The columns of `parts` as `PRAGMA table_xinfo` lists them (name, type, not null,
/// default, primary key, hidden).
fn part_columns(c: &Connection) -> Vec<(String, String, bool, Option<String>, i64, i64)> {
    c.prepare("PRAGMA table_xinfo(parts)")
        .unwrap()
        .query_map([], |r| {
            Ok((
                r.get(1)?,
                r.get(2)?,
                r.get(3)?,
                r.get(4)?,
                r.get(5)?,
                r.get(6)?,
            ))
        })
        .unwrap()
        .map(Result::unwrap)
        .collect()
}

fn schema_names(c: &Connection, kind: &str, table: &str) -> Vec<String> {
    c.prepare("SELECT name FROM sqlite_master WHERE type = ?1 AND tbl_name = ?2 ORDER BY name")
        .unwrap()
        .query_map([kind, table], |r| r.get(0))
        .unwrap()
        .map(Result::unwrap)
        .collect()
}

#[test]
fn migrating_from_v2_keeps_rows_seq_columns_triggers_and_indexes() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("v2.db");
    let (before_rows, before_columns, before_indexes, before_triggers) = {
        let db = Database::open_at_version(&path, 2).unwrap();
        let s = session(&db, "cli");
        for i in 0..30 {
            db.write(|tx| -> scribe_db::Result<_> {
                let tx = tx.conn().unwrap();
                let data = if i % 3 == 0 {
                    tool(
                        "grep",
                        serde_json::json!({"pattern": format!("needle{i}")}),
                        "found it",
                    )
                } else {
                    text(&format!("entry {i} 日本語"))
                };
                let kind = if i % 3 == 0 { "tool" } else { "text" };
                message_with_part(tx, &s, "user", kind, &data)
            })
            .unwrap();
        }
        // Gaps in seq, so a renumbering copy would show.
        db.write(|tx| -> scribe_db::Result<_> {
            let tx = tx.conn().unwrap();
            tx.execute(
                "DELETE FROM messages WHERE id IN (SELECT message_id FROM parts WHERE seq % 4 = 0)",
                [],
            )?;
            Ok(())
        })
        .unwrap();
        db.read(|c| -> scribe_db::Result<_> {
            let c = c.conn().unwrap();
            let rows: Vec<(i64, String, String, Option<String>)> = c
                .prepare("SELECT seq, id, data, search_text FROM parts ORDER BY seq")?
                .query_map([], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?)))?
                .collect::<Result<_, _>>()?;
            Ok((
                rows,
                part_columns(c),
                schema_names(c, "index", "parts"),
                schema_names(c, "trigger", "parts"),
            ))
        })
        .unwrap()
    };
    assert!(before_triggers.len() >= 7, "{before_triggers:?}");

    let db = Database::open(&path).unwrap();
    let report = db.migration_report();
    // Later migrations (V4 …) may follow; this test is about V3, the first applied.
    assert_eq!(
        (report.from, report.to),
        (2, Database::known_schema_version())
    );
    assert_eq!(report.applied[0].version, 3);
    assert_eq!(report.applied[0].name, "part_search_guard");
    db.index_pending().unwrap();
    db.read(|c| -> scribe_db::Result<_> {
        let c = c.conn().unwrap();
        // V11 moved the text from the column into the view `parts_search`.
        let rows: Vec<(i64, String, String, Option<String>)> = c
            .prepare(
                "SELECT p.seq, p.id, p.data, v.search_text FROM parts AS p \
                 LEFT JOIN parts_search AS v ON v.seq = p.seq ORDER BY p.seq",
            )?
            .query_map([], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?)))?
            .collect::<Result<_, _>>()?;
        assert_eq!(rows, before_rows);
        let stored: Vec<_> = before_columns
            .iter()
            .filter(|col| col.0 != "search_text")
            .cloned()
            .collect();
        assert_eq!(part_columns(c), stored);
        assert_eq!(schema_names(c, "index", "parts"), before_indexes);
        // V7 keeps the trigger names of the search triggers it replaces and adds two;
        // V23 drops `parts_touch` (updated_at comes from the statements, the Clock's).
        let mut triggers = before_triggers.clone();
        triggers.retain(|t| t != "parts_touch");
        triggers.extend([
            "parts_search_dequeue".to_owned(),
            "parts_seq_fixed".to_owned(),
        ]);
        triggers.sort();
        assert_eq!(schema_names(c, "trigger", "parts"), triggers);
        assert_eq!(
            schema_names(c, "table", "parts_new"),
            Vec::<String>::new(),
            "the rebuild left its temporary table"
        );
        assert_eq!(
            hits(c, "parts_fts", "found").len(),
            rows.iter().filter(|r| r.2.contains("grep")).count()
        );
        assert!(!hits(c, "parts_fts_trigram", "日本語").is_empty());
        let fk: i64 = c.query_row("SELECT count(*) FROM pragma_foreign_key_check", [], |r| {
            r.get(0)
        })?;
        assert_eq!(fk, 0);
        Ok(())
    })
    .unwrap();
    assert_eq!(check_problems(&db), Vec::<String>::new());
    assert_derived_exact(&db);
    // The rebuilt table keeps its CHECK, foreign key and uniqueness.
    let s = session(&db, "cli");
    let (m, _) = db
        .write(|tx| -> scribe_db::Result<_> {
            let tx = tx.conn().unwrap();
            message_with_part(tx, &s, "user", "text", &text("after"))
        })
        .unwrap();
    let bad_json = db.write(|tx| -> scribe_db::Result<_> {
        let tx = tx.conn().unwrap();
        add_part(tx, "prt_x", &m, &s, 1, "text", "{oops")
    });
    assert!(bad_json.is_err());
    let bad_fk = db.write(|tx| -> scribe_db::Result<_> {
        let tx = tx.conn().unwrap();
        add_part(tx, "prt_y", "msg_none", &s, 1, "text", &text("x"))
    });
    assert!(bad_fk.is_err());
    let dup = db.write(|tx| -> scribe_db::Result<_> {
        let tx = tx.conn().unwrap();
        add_part(tx, "prt_z", &m, &s, 0, "text", &text("x"))
    });
    assert!(
        matches!(dup, Err(scribe_db::Error::Conflict { .. })),
        "{dup:?}"
    );
}

#[test]
fn migrating_with_a_damaged_row_already_present_succeeds_and_keeps_it() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("v2.db");
    let (_, rows) = damaged_database(&path, Some(2));
    let db = Database::open(&path).unwrap();
    assert_eq!(
        db.schema_version().unwrap(),
        Database::known_schema_version()
    );
    let data = db
        .read(|c| -> scribe_db::Result<_> {
            let c = c.conn().unwrap();
            Ok(q::get_part(c, &rows[1].1)?.data)
        })
        .unwrap();
    assert_eq!(data, r#" "text":"quill 1 羽毛笔","type":"text"}"#);
    // CHECK constraints are back on for every later write.
    let (m, s) = (rows[0].0.clone(), {
        db.read(|c| -> scribe_db::Result<_> {
            let c = c.conn().unwrap();
            Ok(c.query_row("SELECT id FROM sessions", [], |r| r.get::<_, String>(0))?)
        })
        .unwrap()
    });
    let bad = db.write(|tx| -> scribe_db::Result<_> {
        let tx = tx.conn().unwrap();
        add_part(tx, "prt_x", &m, &s, 5, "text", "{oops")
    });
    assert!(bad.is_err(), "CHECK (json_valid(data)) was left off");
    // And the damaged row can be deleted, leaving exact indexes.
    db.write(|tx| -> scribe_db::Result<_> {
        let tx = tx.conn().unwrap();
        tx.execute("DELETE FROM parts WHERE id = ?1", [&rows[1].1])?;
        Ok(())
    })
    .unwrap();
    assert_eq!(check_problems(&db), Vec::<String>::new());
}
