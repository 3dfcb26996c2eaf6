//! Throwaway experiment (issue 14 item "a 10 KB reply streamed in 100 flushes: <= 3x the
//! cost of appending the finished reply once"): is there a durable flush cheap enough, in
//! any layout? Raw rusqlite, the limit's schema and pragmas (WAL, `synchronous=NORMAL`),
//! one autocommit write per flush, in one run, alternating:
//! - `once`: the finished 10 KB reply appended in one INSERT (the limit's append, FTS5
//!   trigger included): the denominator;
//! - `rewrite`: the limit's stream, each flush an UPDATE of the message row with all the
//!   text so far (what `scribe-bench` reports as the limit's streaming);
//! - `delta`: each flush INSERTs only the new piece (~100 bytes) into a side table, and the
//!   settle (one transaction) writes the whole text into the message row (its FTS5 row
//!   then) and deletes the pieces: the least a durable stream can write;
//! - `floor`: each flush an UPDATE of one integer in a one-row table, nothing else: the
//!   cost of a commit itself on this machine.
//!
//! Usage: `cargo run --release -p scribe-bench --example delta_experiment`
#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

use std::time::{Duration, Instant};

use rusqlite::{Connection, params};

const FLUSHES: usize = 100;
const REPLY: usize = 10_000;
const ROUNDS: usize = 60;

fn open(path: &std::path::Path) -> Connection {
    let c = Connection::open(path).unwrap();
    c.pragma_update(None, "journal_mode", "WAL").unwrap();
    c.pragma_update(None, "synchronous", "NORMAL").unwrap();
    c.pragma_update(None, "foreign_keys", true).unwrap();
    c.execute_batch(
        "CREATE TABLE sessions (id TEXT PRIMARY KEY, title TEXT,
            message_count INTEGER NOT NULL DEFAULT 0, created_at INTEGER NOT NULL,
            updated_at INTEGER NOT NULL);
         CREATE TABLE messages (id TEXT PRIMARY KEY,
            session_id TEXT NOT NULL REFERENCES sessions (id) ON DELETE CASCADE,
            role TEXT NOT NULL, parts TEXT NOT NULL, model TEXT,
            created_at INTEGER NOT NULL, updated_at INTEGER NOT NULL);
         CREATE INDEX messages_session ON messages (session_id, created_at);
         CREATE TRIGGER messages_count AFTER INSERT ON messages BEGIN
            UPDATE sessions SET message_count = message_count + 1 WHERE id = new.session_id;
         END;
         CREATE VIRTUAL TABLE messages_fts USING fts5 (text);
         CREATE TRIGGER messages_fts_insert AFTER INSERT ON messages BEGIN
            INSERT INTO messages_fts (rowid, text)
            VALUES (new.rowid, json_extract(new.parts, '$[0].text'));
         END;
         CREATE TABLE pieces (message_id TEXT NOT NULL, n INTEGER NOT NULL, text TEXT NOT NULL,
            PRIMARY KEY (message_id, n)) WITHOUT ROWID;
         CREATE TABLE counter (id INTEGER PRIMARY KEY, n INTEGER NOT NULL);
         INSERT INTO counter VALUES (1, 0);
         INSERT INTO sessions (id, title, created_at, updated_at) VALUES ('s', 't', 0, 0);",
    )
    .unwrap();
    c
}

fn parts_json(text: &str) -> String {
    serde_json::json!([{"type": "text", "text": text}]).to_string()
}

const INSERT: &str =
    "INSERT INTO messages (id, session_id, role, parts, model, created_at, updated_at)
    VALUES (?1, 's', 'assistant', ?2, 'm', ?3, ?3)";

fn once(c: &Connection, id: &str, text: &str) {
    c.prepare_cached(INSERT)
        .unwrap()
        .execute(params![id, parts_json(text), 1])
        .unwrap();
}

fn rewrite(c: &Connection, id: &str, pieces: &[String]) {
    let mut text = String::new();
    for (i, p) in pieces.iter().enumerate() {
        text.push_str(p);
        if i == 0 {
            once(c, id, &text);
        } else {
            c.prepare_cached("UPDATE messages SET parts = ?1, updated_at = ?2 WHERE id = ?3")
                .unwrap()
                .execute(params![parts_json(&text), i as i64, id])
                .unwrap();
        }
    }
}

fn delta(c: &Connection, id: &str, pieces: &[String]) {
    for (i, p) in pieces.iter().enumerate() {
        c.prepare_cached("INSERT INTO pieces (message_id, n, text) VALUES (?1, ?2, ?3)")
            .unwrap()
            .execute(params![id, i as i64, p])
            .unwrap();
    }
    // The settle: the whole text into the message row (indexed once), the pieces gone.
    c.execute_batch("BEGIN IMMEDIATE").unwrap();
    let text: String = c
        .prepare_cached("SELECT group_concat(text, '') FROM (SELECT text FROM pieces WHERE message_id = ?1 ORDER BY n)")
        .unwrap()
        .query_row([id], |r| r.get(0))
        .unwrap();
    once(c, id, &text);
    c.prepare_cached("DELETE FROM pieces WHERE message_id = ?1")
        .unwrap()
        .execute([id])
        .unwrap();
    c.execute_batch("COMMIT").unwrap();
}

fn floor(c: &Connection) {
    for _ in 0..FLUSHES {
        c.prepare_cached("UPDATE counter SET n = n + 1 WHERE id = 1")
            .unwrap()
            .execute([])
            .unwrap();
    }
}

fn median(mut v: Vec<Duration>) -> f64 {
    v.sort();
    v[v.len() / 2].as_secs_f64() * 1000.0
}

fn main() {
    let dir = tempfile::tempdir().unwrap();
    let c = open(&dir.path().join("x.db"));
    let words = "lorem ipsum dolor sit amet consectetur adipiscing elit sed do eiusmod tempor ";
    let text: String = words.repeat(REPLY / words.len() + 1)[..REPLY].to_string();
    let size = REPLY / FLUSHES;
    let pieces: Vec<String> = text
        .as_bytes()
        .chunks(size)
        .map(|b| String::from_utf8(b.to_vec()).unwrap())
        .collect();
    let names = ["once", "rewrite", "delta", "floor"];
    let mut times = vec![Vec::new(); names.len()];
    for round in 0..ROUNDS {
        for k in 0..names.len() {
            let i = (round + k) % names.len();
            let id = format!("m{round}_{i}");
            let t = Instant::now();
            match i {
                0 => once(&c, &id, &text),
                1 => rewrite(&c, &id, &pieces),
                2 => delta(&c, &id, &pieces),
                _ => floor(&c),
            }
            times[i].push(t.elapsed());
        }
    }
    let meds: Vec<f64> = times.into_iter().map(median).collect();
    for (name, m) in names.iter().zip(&meds) {
        println!("{name:8} median {m:8.3} ms   {:6.2}x once", m / meds[0]);
    }
}
