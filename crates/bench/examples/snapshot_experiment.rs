//! Throwaway experiment (stop 25, issue 14 "load <= 1.2x", layout (c)): a message's settled
//! parts as one JSON value in a row, read instead of the part rows, in raw rusqlite on a
//! kept corpus (`scribe-bench --only reads --keep DIR`), against the limit and today's two
//! statements, in one run. It adds its tables to the corpus file (use a copy).
//! Usage: snapshot_experiment <DIR>/corpus.db <DIR>/corpus-limit.db
//! With `ONLY=<case>` (and `N=<loads>`, default 2000) it runs one case in a loop and prints
//! nothing: for `valgrind --tool=callgrind` (subtract a run with `N=0`, the setup).
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::type_complexity,
    missing_docs
)]

use std::time::{Duration, Instant};

use rusqlite::{Connection, OpenFlags};
use scribe_message::Part;
use serde::Deserialize;

/// The bench's raw load, for its message-row reader (included by path: the bench is a
/// binary crate).
#[path = "../src/raw_load.rs"]
#[allow(dead_code)]
mod raw_load;

const MSG_COLS: &str = "id, session_id, parent_id, role, agent, provider, model, finish_reason, is_summary, input_tokens, output_tokens, cache_read_tokens, cache_write_tokens, reasoning_tokens, cost_usd, error, created_at, updated_at, finished_at";
const COLS_DEF: &str = "id TEXT NOT NULL, session_id TEXT NOT NULL, parent_id TEXT, role TEXT NOT NULL, agent TEXT, provider TEXT, model TEXT, finish_reason TEXT, is_summary BOOLEAN NOT NULL, input_tokens INTEGER NOT NULL, output_tokens INTEGER NOT NULL, cache_read_tokens INTEGER NOT NULL, cache_write_tokens INTEGER NOT NULL, reasoning_tokens INTEGER NOT NULL, cost_usd REAL NOT NULL, error TEXT, created_at INTEGER NOT NULL, updated_at INTEGER NOT NULL, finished_at INTEGER";

fn open(path: &str, write: bool) -> Connection {
    let flags = if write {
        OpenFlags::SQLITE_OPEN_READ_WRITE
    } else {
        OpenFlags::SQLITE_OPEN_READ_ONLY
    };
    let c = Connection::open_with_flags(path, flags | OpenFlags::SQLITE_OPEN_NO_MUTEX).unwrap();
    c.pragma_update(None, "cache_size", -65536).unwrap();
    c
}

/// A message row (schema column order) as the raw load reads it.
type Head = raw_load::RawMessage;

/// A stored part as the load returns it: id, position, content, created, updated.
type Stored = (String, i64, Part, i64, i64);

fn head(r: &rusqlite::Row<'_>) -> rusqlite::Result<Head> {
    raw_load::message_tuple(r)
}

/// Snapshot element, object form: `{"id":…,"position":…,"created_at":…,"updated_at":…,
/// "data":{part}}`.
#[derive(Deserialize)]
struct SnapObj {
    id: String,
    position: i64,
    created_at: i64,
    updated_at: i64,
    data: Part,
}

/// Today's design: messages, then parts by `parts_session` in seq order, grouped.
fn today(c: &Connection, s: &str) -> usize {
    let tx = c.unchecked_transaction().unwrap();
    let heads: Vec<Head> = tx
        .prepare_cached(&format!(
            "SELECT {MSG_COLS} FROM messages WHERE session_id = ?1 ORDER BY created_at, id"
        ))
        .unwrap()
        .query_map([s], head)
        .unwrap()
        .map(Result::unwrap)
        .collect();
    let mut out: Vec<(Head, Vec<Stored>)> = heads.into_iter().map(|h| (h, Vec::new())).collect();
    let mut stmt = tx
        .prepare_cached(
            "SELECT id, message_id, position, data, created_at, updated_at FROM parts WHERE session_id = ?1 ORDER BY seq",
        )
        .unwrap();
    let mut rows = stmt.query([s]).unwrap();
    let mut at = 0usize;
    while let Some(r) = rows.next().unwrap() {
        let mid = r.get_ref(1).unwrap().as_str().unwrap();
        if out[at].0.0.0 != mid {
            at = out.iter().position(|m| m.0.0.0 == mid).unwrap();
        }
        let part = Part::from_json(r.get_ref(3).unwrap().as_str().unwrap()).unwrap();
        out[at].1.push((
            r.get(0).unwrap(),
            r.get(2).unwrap(),
            part,
            r.get(4).unwrap(),
            r.get(5).unwrap(),
        ));
    }
    drop(rows);
    drop(stmt);
    tx.commit().unwrap();
    std::hint::black_box(&out);
    out.len()
}

/// One statement over a messages table with a snapshot column (`form`: objects or tuples).
fn snapshot(c: &Connection, table: &str, tuples: bool, s: &str) -> usize {
    let mut stmt = c
        .prepare_cached(&format!(
            "SELECT {MSG_COLS}, parts_json FROM {table} WHERE session_id = ?1 ORDER BY created_at, id"
        ))
        .unwrap();
    let mut rows = stmt.query([s]).unwrap();
    let mut out: Vec<(Head, Vec<Stored>)> = Vec::new();
    while let Some(r) = rows.next().unwrap() {
        let h = head(r).unwrap();
        let json = r.get_ref(19).unwrap().as_str().unwrap();
        let parts: Vec<Stored> = if tuples {
            serde_json::from_str(json).unwrap()
        } else {
            serde_json::from_str::<Vec<SnapObj>>(json)
                .unwrap()
                .into_iter()
                .map(|p| (p.id, p.position, p.data, p.created_at, p.updated_at))
                .collect()
        };
        out.push((h, parts));
    }
    std::hint::black_box(&out);
    out.len()
}

/// Two statements: today's messages, then a side table of snapshots in the same order.
fn side(c: &Connection, s: &str) -> usize {
    let tx = c.unchecked_transaction().unwrap();
    let heads: Vec<Head> = tx
        .prepare_cached(&format!(
            "SELECT {MSG_COLS} FROM messages WHERE session_id = ?1 ORDER BY created_at, id"
        ))
        .unwrap()
        .query_map([s], head)
        .unwrap()
        .map(Result::unwrap)
        .collect();
    let mut out: Vec<(Head, Vec<Stored>)> = heads.into_iter().map(|h| (h, Vec::new())).collect();
    let mut stmt = tx
        .prepare_cached(
            "SELECT message_id, parts_json FROM message_snapshots WHERE session_id = ?1 ORDER BY created_at, message_id",
        )
        .unwrap();
    let mut rows = stmt.query([s]).unwrap();
    let mut at = 0usize;
    while let Some(r) = rows.next().unwrap() {
        let mid = r.get_ref(0).unwrap().as_str().unwrap();
        while out[at].0.0.0 != mid {
            at += 1;
        }
        out[at].1 = serde_json::from_str(r.get_ref(1).unwrap().as_str().unwrap()).unwrap();
    }
    drop(rows);
    drop(stmt);
    tx.commit().unwrap();
    std::hint::black_box(&out);
    out.len()
}

fn limit(c: &Connection, s: &str) -> usize {
    let mut stmt = c
        .prepare_cached(
            "SELECT id, role, parts, model, created_at, updated_at FROM messages WHERE session_id = ?1 ORDER BY created_at",
        )
        .unwrap();
    let mut rows = stmt.query([s]).unwrap();
    let mut out = Vec::new();
    while let Some(r) = rows.next().unwrap() {
        let parts: Vec<Part> =
            serde_json::from_str(r.get_ref(2).unwrap().as_str().unwrap()).unwrap();
        let x: (String, String, Option<String>, i64, i64) = (
            r.get(0).unwrap(),
            r.get(1).unwrap(),
            r.get(3).unwrap(),
            r.get(4).unwrap(),
            r.get(5).unwrap(),
        );
        out.push((parts, x));
    }
    std::hint::black_box(&out);
    out.len()
}

fn median(mut v: Vec<Duration>) -> f64 {
    v.sort();
    v[v.len() / 2].as_secs_f64() * 1000.0
}

fn bytes(c: &Connection, names: &str) -> i64 {
    c.query_row(
        &format!("SELECT coalesce(sum(pgsize), 0) FROM dbstat WHERE name IN ({names})"),
        [],
        |r| r.get(0),
    )
    .unwrap()
}

/// Appends one message with one ~1 KB text part per transaction, as the bench's append row,
/// in raw rusqlite on Scribe's schema; with `snapshot` the message row also gets the
/// snapshot of its parts (what writing it when a message is created settled would cost).
fn append(c: &Connection, session: &str, i: usize, snapshot: bool) {
    let now = 1_700_000_000_000_i64 + i as i64;
    let mid = format!("msg_{snapshot}_{i:012}");
    let pid = format!("prt_{snapshot}_{i:012}");
    let words = "the connection pool returned an error while the function read the config ";
    let data = serde_json::json!({"type": "text", "text": words.repeat(14)}).to_string();
    let tx = c.unchecked_transaction().unwrap();
    if snapshot {
        let snap = format!(
            "[[{},0,{data},{now},{now}]]",
            serde_json::to_string(&pid).unwrap()
        );
        tx.prepare_cached(&format!(
            "INSERT INTO messages ({MSG_COLS}, parts_json) VALUES (?1, ?2, NULL, 'user', NULL, NULL, NULL, NULL, 0, 0, 0, 0, 0, 0, 0.0, NULL, ?3, ?3, NULL, ?4)"
        ))
        .unwrap()
        .execute(rusqlite::params![mid, session, now, snap])
        .unwrap();
    } else {
        tx.prepare_cached(&format!(
            "INSERT INTO messages ({MSG_COLS}) VALUES (?1, ?2, NULL, 'user', NULL, NULL, NULL, NULL, 0, 0, 0, 0, 0, 0, 0.0, NULL, ?3, ?3, NULL)"
        ))
        .unwrap()
        .execute(rusqlite::params![mid, session, now])
        .unwrap();
    }
    tx.prepare_cached(
        "INSERT INTO parts (id, message_id, session_id, position, type, data, created_at, updated_at) VALUES (?1, ?2, ?3, 0, 'text', ?4, ?5, ?5)",
    )
    .unwrap()
    .execute(rusqlite::params![pid, mid, session, data, now])
    .unwrap();
    tx.commit().unwrap();
}

/// `MODE=append`: appends alternated in blocks of 100, on two fresh files (Scribe's schema,
/// one with the snapshot column), then the bytes per message of each.
fn append_mode(dir: &str) {
    let n: usize = std::env::var("N").map_or(4000, |n| n.parse().unwrap());
    let only: Option<bool> = std::env::var("SIDE").ok().map(|s| s == "snapshot");
    let mut conns = Vec::new();
    for snapshot in [false, true] {
        let path = format!("{dir}/append-{snapshot}.db");
        for suffix in ["", "-wal", "-shm"] {
            let _ = std::fs::remove_file(format!("{path}{suffix}"));
        }
        let db = scribe_db::Database::open(&path).unwrap();
        let sessions = scribe_session::SessionService::new(std::sync::Arc::new(db));
        let s = sessions
            .create(scribe_session::NewSession::default())
            .unwrap()
            .id;
        drop(sessions);
        let c = open(&path, true);
        c.pragma_update(None, "journal_mode", "wal").unwrap();
        c.pragma_update(None, "synchronous", "normal").unwrap();
        c.pragma_update(None, "foreign_keys", true).unwrap();
        if snapshot {
            c.execute_batch("ALTER TABLE messages ADD COLUMN parts_json TEXT")
                .unwrap();
        }
        conns.push((c, s, path));
    }
    let mut times = [Duration::ZERO; 2];
    for block in 0..n / 100 {
        for k in 0..2 {
            let side = (block + k) % 2;
            if only.is_some_and(|o| o != (side == 1)) {
                continue;
            }
            let (c, s, _) = &conns[side];
            let t = Instant::now();
            for i in 0..100 {
                append(c, s, block * 100 + i, side == 1);
            }
            times[side] += t.elapsed();
        }
    }
    if only.is_some() {
        return;
    }
    for (side, (c, _, _)) in conns.iter().enumerate() {
        c.execute_batch("PRAGMA wal_checkpoint(TRUNCATE)").unwrap();
        let b: i64 = c
            .query_row(
                "SELECT page_count * page_size FROM pragma_page_count, pragma_page_size",
                [],
                |r| r.get(0),
            )
            .unwrap();
        println!(
            "{:9} {:8.0} msg/s  {} B/message (whole file)",
            if side == 1 { "snapshot" } else { "today" },
            n as f64 / times[side].as_secs_f64(),
            b / n as i64
        );
    }
}

fn main() {
    let a: Vec<String> = std::env::args().collect();
    if std::env::var("MODE").is_ok_and(|m| m == "append") {
        append_mode(&a[1]);
        return;
    }
    let (db, limit_db) = (&a[1], &a[2]);
    {
        let w = open(db, true);
        let have: i64 = w
            .query_row(
                "SELECT count(*) FROM sqlite_master WHERE name = 'messages_o'",
                [],
                |r| r.get(0),
            )
            .unwrap();
        if have == 0 {
            let t = Instant::now();
            // The snapshot of a message: its parts in position order, each with its columns.
            let obj = "(SELECT json_group_array(json_object('id', p.id, 'position', p.position, 'created_at', p.created_at, 'updated_at', p.updated_at, 'data', json(p.data))) FROM (SELECT * FROM parts AS p WHERE p.message_id = m.id ORDER BY p.position) AS p)";
            let tup = "(SELECT json_group_array(json_array(p.id, p.position, json(p.data), p.created_at, p.updated_at)) FROM (SELECT * FROM parts AS p WHERE p.message_id = m.id ORDER BY p.position) AS p)";
            let ins = |table: &str, expr: &str| {
                format!(
                    "INSERT INTO {table} ({MSG_COLS}, parts_json) SELECT {}, {expr} FROM messages AS m ORDER BY m.rowid;",
                    MSG_COLS
                        .split(", ")
                        .map(|c| format!("m.{c}"))
                        .collect::<Vec<_>>()
                        .join(", ")
                )
            };
            w.execute_batch(&format!(
                "CREATE INDEX IF NOT EXISTS parts_message ON parts (message_id, position);
                 BEGIN;
                 CREATE TABLE messages_o ({COLS_DEF}, parts_json TEXT);
                 {}
                 CREATE INDEX messages_o_sc ON messages_o (session_id, created_at, id);
                 CREATE TABLE messages_t ({COLS_DEF}, parts_json TEXT);
                 {}
                 CREATE INDEX messages_t_sc ON messages_t (session_id, created_at, id);
                 CREATE TABLE message_snapshots (session_id TEXT NOT NULL, created_at INTEGER NOT NULL,
                    message_id TEXT NOT NULL, parts_json TEXT NOT NULL,
                    PRIMARY KEY (session_id, created_at, message_id)) WITHOUT ROWID;
                 INSERT INTO message_snapshots SELECT session_id, created_at, id, parts_json FROM messages_t ORDER BY rowid;
                 COMMIT;",
                ins("messages_o", obj),
                ins("messages_t", tup),
            ))
            .unwrap();
            eprintln!("built variants in {:?}", t.elapsed());
        }
        let n: i64 = w
            .query_row("SELECT count(*) FROM messages", [], |r| r.get(0))
            .unwrap();
        let sizes: &[(&str, &str)] = if std::env::var("ONLY").is_ok() {
            &[]
        } else {
            &[
                ("messages + index", "'messages', 'messages_session_created'"),
                (
                    "parts + indexes",
                    "'parts', 'parts_session', 'sqlite_autoindex_parts_1', 'sqlite_autoindex_parts_2'",
                ),
                ("messages_o + index", "'messages_o', 'messages_o_sc'"),
                ("messages_t + index", "'messages_t', 'messages_t_sc'"),
                ("message_snapshots", "'message_snapshots'"),
            ]
        };
        for (name, names) in sizes {
            let b = bytes(&w, names);
            eprintln!("bytes {name}: {b} ({} B/message)", b / n);
        }
    }
    let c = open(db, false);
    let l = open(limit_db, false);
    let q = "SELECT session_id FROM messages GROUP BY session_id HAVING count(*) = 500 LIMIT 1";
    let s: String = c.query_row(q, [], |r| r.get(0)).unwrap();
    let ls: String = l.query_row(q, [], |r| r.get(0)).unwrap();
    type Case<'a> = (&'a str, Box<dyn Fn() -> usize + 'a>);
    let cases: Vec<Case<'_>> = vec![
        ("limit", Box::new(|| limit(&l, &ls))),
        ("today", Box::new(|| today(&c, &s))),
        (
            "snapshot objects",
            Box::new(|| snapshot(&c, "messages_o", false, &s)),
        ),
        (
            "snapshot tuples",
            Box::new(|| snapshot(&c, "messages_t", true, &s)),
        ),
        ("side table tuples", Box::new(|| side(&c, &s))),
    ];
    if let Ok(only) = std::env::var("ONLY") {
        let case = cases.iter().find(|(n, _)| *n == only).unwrap();
        let n: usize = std::env::var("N").map_or(2000, |n| n.parse().unwrap());
        for _ in 0..n {
            std::hint::black_box(case.1());
        }
        return;
    }
    for (name, f) in &cases {
        eprintln!("{name}: {} messages", f());
    }
    let mut times: Vec<Vec<Duration>> = vec![Vec::new(); cases.len()];
    for round in 0..150 {
        for k in 0..cases.len() {
            let i = (round + k) % cases.len();
            let t = Instant::now();
            std::hint::black_box((cases[i].1)());
            times[i].push(t.elapsed());
        }
    }
    let base = median(times[0].clone());
    for ((name, _), t) in cases.iter().zip(times) {
        let m = median(t);
        println!("{name:24} {m:8.3} ms  {:5.2}x limit", m / base);
    }
}
