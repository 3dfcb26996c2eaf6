//! Helpers shared by the integration tests: fixture rows written the way services write
//! them, and checks that derived data (counters, both search indexes) is exact.
#![allow(clippy::unwrap_used, clippy::expect_used, dead_code)]

use rusqlite::Connection;
use scribe_db::ids::{Prefix, new_id};
use scribe_db::queries as q;
use scribe_db::{Database, now_ms};

/// Creates a session through the generated layer; returns its id.
pub fn session(db: &Database, source: &str) -> String {
    let id = new_id(Prefix::Session);
    db.write(|tx| -> scribe_db::Result<_> {
        let tx = tx.conn().unwrap();
        q::create_session(tx, &new_session(&id, source))?;
        Ok(())
    })
    .unwrap();
    id
}

/// A bare session's row (`scribe_db::testing::bare_session`) created now.
pub fn new_session<'a>(id: &'a str, source: &'a str) -> q::CreateSessionParams<'a> {
    scribe_db::testing::bare_session(id, source, now_ms())
}

/// Inserts a message with one part (`data` JSON) in `tx`; returns (message id, part id).
pub fn message_with_part(
    tx: &Connection,
    session_id: &str,
    role: &str,
    part_type: &str,
    data: &str,
) -> scribe_db::Result<(String, String)> {
    let message_id = new_id(Prefix::Message);
    let part_id = new_id(Prefix::Part);
    let now = now_ms();
    q::create_message(
        tx,
        &scribe_db::testing::bare_message(&message_id, session_id, role, now),
    )?;
    add_part(tx, &part_id, &message_id, session_id, 0, part_type, data)?;
    Ok((message_id, part_id))
}

pub fn add_part(
    tx: &Connection,
    part_id: &str,
    message_id: &str,
    session_id: &str,
    position: i64,
    part_type: &str,
    data: &str,
) -> scribe_db::Result<()> {
    let now = now_ms();
    q::create_part(
        tx,
        &q::CreatePartParams {
            id: part_id,
            message_id,
            session_id,
            position,
            r#type: part_type,
            data,
            created_at: now,
            updated_at: now,
        },
    )?;
    Ok(())
}

pub fn text(text: &str) -> String {
    serde_json::json!({ "type": "text", "text": text }).to_string()
}

pub fn tool(name: &str, input: serde_json::Value, output: &str) -> String {
    serde_json::json!({
        "type": "tool", "tool": name, "call_id": "call_1", "input": input,
        "state": { "status": "completed", "output": output, "title": "", "started_at": 1, "ended_at": 2 }
    })
    .to_string()
}

/// Part ids whose text matches `query` in the word index (`parts_fts`) or the trigram index
/// (which holds only text with CJK or other spaceless-script characters). Reads the index
/// as it is: call `Database::index_pending` first to index what is queued.
pub fn hits(conn: &Connection, index: &str, query: &str) -> Vec<String> {
    let sql = format!(
        "SELECT p.id FROM {index} JOIN parts AS p ON p.seq = {index}.rowid \
         WHERE {index} MATCH ?1 ORDER BY p.id"
    );
    let mut stmt = conn.prepare(&sql).unwrap();
    stmt.query_map([query], |r| r.get(0))
        .unwrap()
        .collect::<Result<_, _>>()
        .unwrap()
}

/// Fails unless both search indexes hold exactly the searchable text of every part (what
/// `Database::check` verifies: the indexes plus the queue against the parts) and every
/// session counter equals a recount. Also makes sure every part that may be indexed is.
pub fn assert_derived_exact(db: &Database) {
    let report = db.check().unwrap();
    assert!(
        report.is_ok(),
        "indexes out of sync: {:?}",
        report.problems()
    );
    db.index_pending().unwrap();
    db.read(|tx| -> scribe_db::Result<_> {
        check_derived(tx.conn().unwrap());
        Ok(())
    })
    .unwrap();
}

fn check_derived(conn: &Connection) {
    // Nothing settled is left queued, and each index holds one row per part of its view
    // that is not queued (being streamed).
    for (index, view) in [
        ("parts_fts", "parts_search"),
        ("parts_fts_trigram", "parts_search_trigram"),
    ] {
        let (indexed, expected): (i64, i64) = conn
            .query_row(
                &format!(
                    "SELECT (SELECT count(*) FROM {index}_docsize), \
                            (SELECT count(*) FROM {view} AS v \
                             WHERE NOT EXISTS (SELECT 1 FROM search_queue AS q WHERE q.seq = v.seq))"
                ),
                [],
                |r| Ok((r.get(0)?, r.get(1)?)),
            )
            .unwrap();
        assert_eq!(indexed, expected, "{index} row count");
    }
    let wrong: Vec<(String, i64, i64, i64, i64)> = conn
        .prepare(
            "SELECT s.id, s.message_count, \
                    (SELECT count(*) FROM messages m WHERE m.session_id = s.id), \
                    s.tool_call_count, \
                    (SELECT count(*) FROM parts p WHERE p.session_id = s.id AND p.type = 'tool') \
             FROM sessions s",
        )
        .unwrap()
        .query_map([], |r| {
            Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?, r.get(4)?))
        })
        .unwrap()
        .map(Result::unwrap)
        .filter(|(_, mc, m, tc, t)| mc != m || tc != t)
        .collect();
    assert!(wrong.is_empty(), "counters differ from recount: {wrong:?}");
}

/// Fills `db` with every kind of row a store holds, with values that show any loss: a
/// child session, a summary message, tool and text parts past one copy batch, file
/// versions, a roll-up, a run lease, floats that print long, non-ASCII JSON.
pub fn fill_for_copy(db: &Database) -> Vec<String> {
    let parent = session(db, "cli");
    let child = session(db, "telegram");
    db.write(|tx| -> scribe_db::Result<_> {
        let c = tx.conn().unwrap();
        let (m1, _) = message_with_part(c, &parent, "assistant", "text", &text("naïve 数据 \"q\" ✓"))?;
        let (m2, _) = message_with_part(
            c,
            &parent,
            "assistant",
            "tool",
            &tool("bash", serde_json::json!({"cmd": "ls -la"}), "a\nb"),
        )?;
        for i in 1..1200 {
            let part = new_id(Prefix::Part);
            add_part(c, &part, &m2, &parent, i, "text", &text(&format!("line {i}")))?;
        }
        c.execute(
            "UPDATE sessions SET parent_session_id = ?1, title = 'child ✓', \
             estimated_cost_usd = 0.1 + 0.2, actual_cost_usd = 1e-300, input_tokens = 1700000000123 \
             WHERE id = ?2",
            [&parent, &child],
        )?;
        c.execute(
            "UPDATE sessions SET summary_message_id = ?1, model_config = '{\"b\":1,\"a\":2}' \
             WHERE id = ?2",
            [&m1, &parent],
        )?;
        for content in ["v1", "v2"] {
            q::create_file_version(
                c,
                &q::CreateFileVersionParams {
                    id: &new_id(Prefix::File),
                    session_id: &parent,
                    path: "src/main.rs",
                    content,
                    now: now_ms(),
                },
            )?;
        }
        c.execute(
            "INSERT INTO session_rollups (child_id, parent_id, rolled_up_at, input_tokens, \
             estimated_cost_usd) VALUES (?1, ?2, 5, 7, 0.3)",
            [&child, &parent],
        )?;
        c.execute(
            "INSERT INTO session_runs (session_id, owner, pid, host, started_at, heartbeat_at) \
             VALUES (?1, 'run_1', 42, 'host-a', 1, 2)",
            [&parent],
        )?;
        Ok(())
    })
    .unwrap();
    vec![parent, child]
}

/// Every row of every copied table, floats as their bits, for exact comparison.
pub fn dump(db: &Database) -> Vec<(String, Vec<String>)> {
    let tables = [
        "sessions",
        "messages",
        "parts",
        "files",
        "session_rollups",
        "session_runs",
    ];
    db.read(|tx| -> scribe_db::Result<_> {
        let c = tx.conn().unwrap();
        let mut out = Vec::new();
        for table in tables {
            let mut stmt = c.prepare(&format!("SELECT * FROM {table} ORDER BY 1"))?;
            let width = stmt.column_count();
            let rows = stmt
                .query_map([], |row| {
                    let mut line = Vec::with_capacity(width);
                    for i in 0..width {
                        line.push(match row.get::<_, rusqlite::types::Value>(i)? {
                            rusqlite::types::Value::Real(f) => format!("real:{:x}", f.to_bits()),
                            other => format!("{other:?}"),
                        });
                    }
                    Ok(line.join("|"))
                })?
                .collect::<rusqlite::Result<Vec<_>>>()?;
            out.push((table.to_owned(), rows));
        }
        Ok(out)
    })
    .unwrap()
}
