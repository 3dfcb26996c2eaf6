//! Throwaway experiment (issue 14 item 2): what one streamed flush of a 10 KB text part
//! costs with `parts` as V10 has it (generated search_text + json_valid CHECK), without
//! the generated column (V11), and without the CHECK too. Raw rusqlite, WAL,
//! synchronous=NORMAL, one transaction per flush as `Database::write` runs it.
#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

use std::time::{Duration, Instant};

use rusqlite::{Connection, params};

const GENERATED: &str = ",
    search_text TEXT GENERATED ALWAYS AS (
        CASE WHEN json_valid(data) THEN
            CASE type
                WHEN 'text' THEN data ->> '$.text'
                WHEN 'reasoning' THEN data ->> '$.text'
                WHEN 'tool' THEN concat_ws(char(10), data ->> '$.tool', data ->> '$.input',
                    data ->> '$.state.output', data ->> '$.state.message')
            END
        END
    ) VIRTUAL";

fn setup(path: &std::path::Path, check: bool, generated: bool) -> Connection {
    let c = Connection::open(path).unwrap();
    c.pragma_update(None, "journal_mode", "WAL").unwrap();
    c.pragma_update(None, "synchronous", "NORMAL").unwrap();
    let check = if check {
        "CHECK (json_valid(data))"
    } else {
        ""
    };
    let generated = if generated { GENERATED } else { "" };
    c.execute_batch(&format!(
        "CREATE TABLE search_queue (seq INTEGER PRIMARY KEY NOT NULL);
         CREATE TABLE parts (seq INTEGER PRIMARY KEY, id TEXT NOT NULL UNIQUE, message_id TEXT NOT NULL,
            session_id TEXT NOT NULL, position INTEGER NOT NULL, type TEXT NOT NULL,
            data TEXT NOT NULL {check}, created_at INTEGER NOT NULL, updated_at INTEGER NOT NULL {generated},
            UNIQUE (message_id, position));
         CREATE INDEX parts_session ON parts (session_id);
         CREATE TRIGGER parts_search_insert AFTER INSERT ON parts
         WHEN new.type IN ('text', 'reasoning', 'tool')
         BEGIN INSERT OR IGNORE INTO search_queue (seq) VALUES (new.seq); END;
         CREATE TRIGGER parts_touch AFTER UPDATE ON parts WHEN new.updated_at IS old.updated_at
         BEGIN UPDATE parts SET updated_at = max(old.updated_at, 0) WHERE seq = new.seq; END;
         CREATE TRIGGER parts_search_update BEFORE UPDATE OF type, data ON parts
         WHEN NOT EXISTS (SELECT 1 FROM search_queue WHERE seq = old.seq)
         BEGIN INSERT OR IGNORE INTO search_queue (seq) SELECT new.seq; END;"
    ))
    .unwrap();
    c
}

fn flushes(c: &Connection, reply: usize, pieces: usize) -> Duration {
    let id = format!("prt_{reply}");
    let piece =
        "lorem ipsum dolor sit amet, consectetur adipiscing elit sed do eiusmod te".repeat(2);
    let piece = &piece[..(10_000 / pieces).min(piece.len())];
    let mut text = String::new();
    let t = Instant::now();
    for i in 0..pieces {
        text.push_str(piece);
        let data = serde_json::json!({"type": "text", "text": text}).to_string();
        c.execute_batch("BEGIN IMMEDIATE").unwrap();
        if i == 0 {
            c.prepare_cached(
                "INSERT INTO parts (id, message_id, session_id, position, type, data, created_at, updated_at)
                 VALUES (?1, ?2, 's', 0, 'text', ?3, 1, 1)",
            )
            .unwrap()
            .execute(params![id, format!("msg_{reply}"), data])
            .unwrap();
        } else {
            c.prepare_cached(
                "UPDATE parts SET type = 'text', data = ?1, updated_at = ?2 WHERE id = ?3",
            )
            .unwrap()
            .execute(params![data, i as i64 + 2, id])
            .unwrap();
        }
        c.execute_batch("COMMIT").unwrap();
    }
    t.elapsed()
}

fn main() {
    let dir = tempfile::tempdir().unwrap();
    let variants = [
        ("V10: generated column + CHECK", true, true),
        ("V11: CHECK, no generated column", true, false),
        ("no CHECK, no generated column", false, false),
    ];
    let conns: Vec<Connection> = variants
        .iter()
        .enumerate()
        .map(|(i, (_, check, generated))| {
            setup(&dir.path().join(format!("{i}.db")), *check, *generated)
        })
        .collect();
    let mut times = vec![Vec::new(); variants.len()];
    for reply in 0..60 {
        for k in 0..variants.len() {
            let i = (reply + k) % variants.len();
            times[i].push(flushes(&conns[i], reply, 100));
        }
    }
    for ((name, ..), mut t) in variants.iter().zip(times) {
        t.sort();
        let m = t[t.len() / 2].as_secs_f64() * 1000.0;
        println!(
            "{name:40} 100 flushes of a 10 KB reply: median {m:7.2} ms ({:.1} µs/flush)",
            m * 10.0
        );
    }
}
