//! The database keeps derived data exact by itself: message and tool-call counters,
//! the session's `updated_at` a new message or tool part moves (never the database's clock), and both search indexes, under insert, update and delete of parts,
//! messages and sessions (cascade).
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use common::*;
use rusqlite::params;
use scribe_db::Database;
use serde_json::json;

fn count(db: &Database, session: &str) -> (i64, i64) {
    db.read(|c| -> scribe_db::Result<_> {
        let c = c.conn().unwrap();
        Ok(c.query_row(
            "SELECT message_count, tool_call_count FROM sessions WHERE id = ?1",
            [session],
            |r| Ok((r.get(0)?, r.get(1)?)),
        )?)
    })
    .unwrap()
}

#[test]
fn counters_and_both_indexes_stay_exact() {
    let dir = tempfile::tempdir().unwrap();
    let db = Database::open(dir.path().join("t.db")).unwrap();
    let s1 = session(&db, "cli");
    let s2 = session(&db, "telegram");

    // Insert: a text message, a tool call, a reasoning part, a CJK text.
    let (m_text, p_text) = db
        .write(|tx| -> scribe_db::Result<_> {
            let tx = tx.conn().unwrap();
            message_with_part(tx, &s1, "user", "text", &text("deploy the docker image"))
        })
        .unwrap();
    let (m_tool, p_tool) = db
        .write(|tx| -> scribe_db::Result<_> {
            let tx = tx.conn().unwrap();
            message_with_part(
                tx,
                &s1,
                "assistant",
                "tool",
                &tool(
                    "bash",
                    json!({"command": "kubectl rollout"}),
                    "pods restarted fine 已重启",
                ),
            )
        })
        .unwrap();
    let (_, p_reason) = db
        .write(|tx| -> scribe_db::Result<_> {
            let tx = tx.conn().unwrap();
            message_with_part(
                tx,
                &s2,
                "assistant",
                "reasoning",
                &json!({"type": "reasoning", "text": "think about café"}).to_string(),
            )
        })
        .unwrap();
    let (_, p_cjk) = db
        .write(|tx| -> scribe_db::Result<_> {
            let tx = tx.conn().unwrap();
            message_with_part(tx, &s2, "user", "text", &text("数据库迁移失败了"))
        })
        .unwrap();
    // A part that is not searched.
    db.write(|tx| -> scribe_db::Result<_> {
        let tx = tx.conn().unwrap();
        add_part(
            tx,
            "prt_step",
            &m_tool,
            &s1,
            1,
            "step_start",
            r#"{"type":"step_start"}"#,
        )
    })
    .unwrap();

    assert_eq!(count(&db, &s1), (2, 1));
    assert_eq!(count(&db, &s2), (2, 0));
    db.index_pending().unwrap();
    db.read(|c| -> scribe_db::Result<_> {
        let c = c.conn().unwrap();
        assert_eq!(hits(c, "parts_fts", "docker"), vec![p_text.clone()]);
        // Tool name, input and output are all searchable.
        assert_eq!(hits(c, "parts_fts", "bash"), vec![p_tool.clone()]);
        assert_eq!(hits(c, "parts_fts", "kubectl"), vec![p_tool.clone()]);
        assert_eq!(hits(c, "parts_fts", "restarted"), vec![p_tool.clone()]);
        // Diacritics are folded by the word index.
        assert_eq!(hits(c, "parts_fts", "cafe"), vec![p_reason.clone()]);
        // Substrings and CJK through the trigram index, which holds the parts whose text
        // has CJK (or other spaceless-script) characters, all of their text.
        assert_eq!(
            hits(c, "parts_fts_trigram", "\"ubectl\""),
            vec![p_tool.clone()]
        );
        assert!(hits(c, "parts_fts_trigram", "\"docker\"").is_empty());
        assert_eq!(
            hits(c, "parts_fts_trigram", "\"库迁移\""),
            vec![p_cjk.clone()]
        );
        Ok(())
    })
    .unwrap();
    assert_derived_exact(&db);

    // Update: the tool's output changes; old text is gone from both indexes, new text found.
    db.write(|tx| -> scribe_db::Result<_> {
        let tx = tx.conn().unwrap();
        let data = tool(
            "bash",
            json!({"command": "kubectl rollout"}),
            "crashloop backoff 崩溃",
        );
        tx.execute(
            "UPDATE parts SET data = ?1 WHERE id = ?2",
            params![data, p_tool],
        )?;
        Ok(())
    })
    .unwrap();
    db.index_pending().unwrap();
    db.read(|c| -> scribe_db::Result<_> {
        let c = c.conn().unwrap();
        assert!(hits(c, "parts_fts", "restarted").is_empty());
        assert!(hits(c, "parts_fts_trigram", "\"restarted\"").is_empty());
        assert_eq!(hits(c, "parts_fts", "crashloop"), vec![p_tool.clone()]);
        assert_eq!(
            hits(c, "parts_fts_trigram", "\"ashloo\""),
            vec![p_tool.clone()]
        );
        Ok(())
    })
    .unwrap();
    assert_derived_exact(&db);

    // Update that changes the type: a tool part becomes text → tool count drops.
    db.write(|tx| -> scribe_db::Result<_> {
        let tx = tx.conn().unwrap();
        tx.execute(
            "UPDATE parts SET type = 'text', data = ?1 WHERE id = ?2",
            params![text("now plain words"), p_tool],
        )?;
        Ok(())
    })
    .unwrap();
    assert_eq!(count(&db, &s1), (2, 0));
    db.index_pending().unwrap();
    db.read(|c| -> scribe_db::Result<_> {
        let c = c.conn().unwrap();
        assert!(hits(c, "parts_fts", "crashloop").is_empty());
        assert_eq!(hits(c, "parts_fts", "plain"), vec![p_tool.clone()]);
        Ok(())
    })
    .unwrap();
    assert_derived_exact(&db);
    db.write(|tx| -> scribe_db::Result<_> {
        let tx = tx.conn().unwrap();
        let data = tool("grep", json!({"pattern": "needle"}), "found it");
        tx.execute(
            "UPDATE parts SET type = 'tool', data = ?1 WHERE id = ?2",
            params![data, p_tool],
        )?;
        Ok(())
    })
    .unwrap();
    assert_eq!(count(&db, &s1), (2, 1));

    // Delete a part.
    db.write(|tx| -> scribe_db::Result<_> {
        let tx = tx.conn().unwrap();
        tx.execute("DELETE FROM parts WHERE id = ?1", [&p_text])?;
        Ok(())
    })
    .unwrap();
    db.index_pending().unwrap();
    db.read(|c| -> scribe_db::Result<_> {
        let c = c.conn().unwrap();
        assert!(hits(c, "parts_fts", "docker").is_empty());
        assert!(hits(c, "parts_fts_trigram", "\"docker\"").is_empty());
        Ok(())
    })
    .unwrap();
    assert_derived_exact(&db);

    // Delete a message: its parts go, its session's count drops.
    db.write(|tx| -> scribe_db::Result<_> {
        let tx = tx.conn().unwrap();
        tx.execute("DELETE FROM messages WHERE id = ?1", [&m_tool])?;
        Ok(())
    })
    .unwrap();
    assert_eq!(count(&db, &s1), (1, 0));
    db.index_pending().unwrap();
    db.read(|c| -> scribe_db::Result<_> {
        let c = c.conn().unwrap();
        assert!(hits(c, "parts_fts", "needle").is_empty());
        Ok(())
    })
    .unwrap();
    assert_derived_exact(&db);
    let _ = m_text;

    // Delete a session: messages, parts and index entries cascade.
    db.write(|tx| -> scribe_db::Result<_> {
        let tx = tx.conn().unwrap();
        tx.execute("DELETE FROM sessions WHERE id = ?1", [&s2])?;
        Ok(())
    })
    .unwrap();
    db.index_pending().unwrap();
    db.read(|c| -> scribe_db::Result<_> {
        let c = c.conn().unwrap();
        assert!(hits(c, "parts_fts", "cafe").is_empty());
        assert!(hits(c, "parts_fts_trigram", "\"库迁移\"").is_empty());
        let left: i64 = c.query_row(
            "SELECT count(*) FROM parts WHERE session_id = ?1",
            [&s2],
            |r| r.get(0),
        )?;
        assert_eq!(left, 0);
        Ok(())
    })
    .unwrap();
    assert_derived_exact(&db);
}

#[test]
fn deleting_a_parent_keeps_children_unlinked_and_summary_links_clear() {
    let db = Database::open_in_memory().unwrap();
    let parent = session(&db, "cli");
    let child = session(&db, "cli");
    db.write(|tx| -> scribe_db::Result<_> {
        let tx = tx.conn().unwrap();
        tx.execute(
            "UPDATE sessions SET parent_session_id = ?1, kind = 'task' WHERE id = ?2",
            [&parent, &child],
        )?;
        let (m, _) = message_with_part(tx, &child, "assistant", "text", &text("summary"))?;
        tx.execute(
            "UPDATE sessions SET summary_message_id = ?1 WHERE id = ?2",
            [&m, &child],
        )?;
        tx.execute("DELETE FROM messages WHERE id = ?1", [&m])?;
        tx.execute("DELETE FROM sessions WHERE id = ?1", [&parent])?;
        Ok(())
    })
    .unwrap();
    let (parent_link, summary): (Option<String>, Option<String>) = db
        .read(|c| -> scribe_db::Result<_> {
            let c = c.conn().unwrap();
            Ok(c.query_row(
                "SELECT parent_session_id, summary_message_id FROM sessions WHERE id = ?1",
                [&child],
                |r| Ok((r.get(0)?, r.get(1)?)),
            )?)
        })
        .unwrap();
    assert_eq!((parent_link, summary), (None, None));
}

#[test]
fn a_part_cannot_belong_to_another_sessions_message() {
    let db = Database::open_in_memory().unwrap();
    let s1 = session(&db, "cli");
    let s2 = session(&db, "cli");
    let err = db
        .write(|tx| -> scribe_db::Result<_> {
            let tx = tx.conn().unwrap();
            let (m, _) = message_with_part(tx, &s1, "user", "text", &text("hi"))?;
            add_part(tx, "prt_x", &m, &s2, 1, "text", &text("wrong session"))
        })
        .unwrap_err();
    assert!(matches!(err, scribe_db::Error::Storage(_)), "{err:?}");
}

/// The database never stamps a row with its own clock (V23): an update that does not set
/// `updated_at` leaves it as it was, however far from the wall clock it is; every time a
/// user sees comes from the statements, i.e. the store's Clock.
#[test]
fn an_update_that_forgets_updated_at_leaves_it() {
    let db = Database::open_in_memory().unwrap();
    let s = session(&db, "cli");
    db.write(|tx| -> scribe_db::Result<_> {
        let tx = tx.conn().unwrap();
        tx.execute("UPDATE sessions SET updated_at = 5 WHERE id = ?1", [&s])?;
        tx.execute("UPDATE sessions SET title = 'x' WHERE id = ?1", [&s])?;
        Ok(())
    })
    .unwrap();
    let updated: i64 = db
        .read(|c| -> scribe_db::Result<_> {
            let c = c.conn().unwrap();
            Ok(
                c.query_row("SELECT updated_at FROM sessions WHERE id = ?1", [&s], |r| {
                    r.get(0)
                })?,
            )
        })
        .unwrap();
    assert_eq!(updated, 5);
}

#[test]
fn unique_titles_conflict_and_null_titles_never_do() {
    let db = Database::open_in_memory().unwrap();
    let a = session(&db, "cli");
    let b = session(&db, "cli");
    let _c = session(&db, "cli"); // NULL title, like b until set
    db.write(|tx| -> scribe_db::Result<_> {
        let tx = tx.conn().unwrap();
        tx.execute(
            "UPDATE sessions SET title = 'fix build' WHERE id = ?1",
            [&a],
        )?;
        Ok(())
    })
    .unwrap();
    let err = db
        .write(|tx| -> scribe_db::Result<_> {
            let tx = tx.conn().unwrap();
            tx.execute(
                "UPDATE sessions SET title = 'fix build' WHERE id = ?1",
                [&b],
            )?;
            Ok(())
        })
        .unwrap_err();
    assert!(matches!(err, scribe_db::Error::Conflict { .. }), "{err:?}");
    assert!(err.to_string().contains("sessions.title"), "{err}");
}

#[test]
fn the_integrity_check_used_above_does_catch_a_stale_index() {
    let db = Database::open_in_memory().unwrap();
    let s = session(&db, "cli");
    db.write(|tx| -> scribe_db::Result<_> {
        let tx = tx.conn().unwrap();
        message_with_part(tx, &s, "user", "text", &text("alpha beta"))
    })
    .unwrap();
    // Simulate a writer that bypassed the triggers: the index keeps text the table lost.
    let result = db.write(|tx| -> scribe_db::Result<_> {
        let tx = tx.conn().unwrap();
        tx.execute_batch(
            "DROP TRIGGER parts_search_update;
             UPDATE parts SET data = json_object('type', 'text', 'text', 'gamma');",
        )?;
        Ok(tx
            .execute(
                "INSERT INTO parts_fts (parts_fts, rank) VALUES ('integrity-check', 1)",
                [],
            )
            .is_err())
    });
    assert!(result.unwrap(), "integrity-check missed a stale index");
}
