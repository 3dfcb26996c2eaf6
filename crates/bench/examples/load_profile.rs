//! Throwaway profile (issue 14 item 1): where the time of loading a 500-message session
//! goes, Scribe's two statements against the limit's one, split into SQLite stepping,
//! column extraction, JSON decoding and grouping, in one run on a kept corpus
//! (`scribe-bench --only reads --keep DIR`).
//! Usage: load_profile <DIR>/corpus.db <DIR>/corpus-limit.db
//! With `ONLY=<case>` (and `N=<loads>`, default 2000) it runs one case in a loop and
//! prints nothing: for `perf record`, or for counting instructions with
//! `valgrind --tool=callgrind` (subtract a run with `N=0`, the setup).
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::type_complexity,
    missing_docs
)]

use std::time::{Duration, Instant};

use rusqlite::{Connection, OpenFlags};
use scribe_message::Part;

/// The bench's raw load (the load row's "same design").
#[path = "../src/raw_load.rs"]
mod raw;

use raw::{RAW_LIST_MESSAGES as MSGS, RAW_LIST_PARTS as PARTS, raw_load, read_messages};

fn open(path: &str) -> Connection {
    let c = Connection::open_with_flags(
        path,
        OpenFlags::SQLITE_OPEN_READ_ONLY | OpenFlags::SQLITE_OPEN_NO_MUTEX,
    )
    .unwrap();
    c.pragma_update(None, "cache_size", -65536).unwrap();
    c
}

const LIMIT: &str = "SELECT id, role, parts, model, created_at, updated_at
FROM messages WHERE session_id = ?1 ORDER BY created_at";

/// Steps `sql` and touches no column.
fn step(c: &Connection, sql: &str, s: &str) -> usize {
    let mut stmt = c.prepare_cached(sql).unwrap();
    let mut rows = stmt.query([s]).unwrap();
    let mut n = 0;
    while rows.next().unwrap().is_some() {
        n += 1;
    }
    n
}

/// Steps `sql` and reads every column as a borrowed value (no allocation).
fn refs(c: &Connection, sql: &str, s: &str) -> usize {
    let mut stmt = c.prepare_cached(sql).unwrap();
    let cols = stmt.column_count();
    let mut rows = stmt.query([s]).unwrap();
    let mut n = 0;
    while let Some(r) = rows.next().unwrap() {
        for i in 0..cols {
            std::hint::black_box(r.get_ref(i).unwrap());
        }
        n += 1;
    }
    n
}

/// Steps `sql` and copies every text column into a String.
fn owned(c: &Connection, sql: &str, s: &str) -> usize {
    let mut stmt = c.prepare_cached(sql).unwrap();
    let cols = stmt.column_count();
    let mut rows = stmt.query([s]).unwrap();
    let mut n = 0;
    let mut keep = Vec::new();
    while let Some(r) = rows.next().unwrap() {
        for i in 0..cols {
            if let rusqlite::types::ValueRef::Text(t) = r.get_ref(i).unwrap() {
                keep.push(String::from_utf8(t.to_vec()).unwrap());
            }
        }
        n += 1;
    }
    std::hint::black_box(keep);
    n
}

/// Steps the parts statement and decodes each part from the borrowed column.
fn parts_decode(c: &Connection, s: &str) -> usize {
    let mut stmt = c.prepare_cached(PARTS).unwrap();
    let mut rows = stmt.query([s]).unwrap();
    let mut out = Vec::new();
    while let Some(r) = rows.next().unwrap() {
        out.push(Part::from_json(r.get_ref(3).unwrap().as_str().unwrap()).unwrap());
    }
    std::hint::black_box(&out);
    out.len()
}

/// Steps the limit and decodes each message's parts array.
fn limit_decode(c: &Connection, s: &str) -> usize {
    let mut stmt = c.prepare_cached(LIMIT).unwrap();
    let mut rows = stmt.query([s]).unwrap();
    let mut out = Vec::new();
    while let Some(r) = rows.next().unwrap() {
        let parts: Vec<Part> =
            serde_json::from_str(r.get_ref(2).unwrap().as_str().unwrap()).unwrap();
        out.push(parts);
    }
    std::hint::black_box(&out);
    out.len()
}

fn raw_messages(c: &Connection, s: &str) -> usize {
    read_messages(c, s).unwrap().len()
}

/// The limit without decoding (each parts array copied into a String).
fn limit_owned(c: &Connection, s: &str) -> usize {
    let mut stmt = c.prepare_cached(LIMIT).unwrap();
    let mut rows = stmt.query([s]).unwrap();
    let mut out: Vec<(String, String, String, Option<String>, i64, i64)> = Vec::new();
    while let Some(r) = rows.next().unwrap() {
        out.push((
            r.get(0).unwrap(),
            r.get(1).unwrap(),
            r.get(2).unwrap(),
            r.get(3).unwrap(),
            r.get(4).unwrap(),
            r.get(5).unwrap(),
        ));
    }
    std::hint::black_box(&out);
    out.len()
}

fn median(mut v: Vec<Duration>) -> String {
    v.sort();
    format!(
        "{:.3} (p10 {:.3})",
        v[v.len() / 2].as_secs_f64() * 1000.0,
        v[v.len() / 10].as_secs_f64() * 1000.0
    )
}

fn main() {
    let a: Vec<String> = std::env::args().collect();
    let (db, limit_db) = (open(&a[1]), open(&a[2]));
    let s: String = db
        .query_row(
            "SELECT session_id FROM messages GROUP BY session_id HAVING count(*) = 500 LIMIT 1",
            [],
            |r| r.get(0),
        )
        .unwrap();
    let ls: String = limit_db
        .query_row(
            "SELECT session_id FROM messages GROUP BY session_id HAVING count(*) = 500 LIMIT 1",
            [],
            |r| r.get(0),
        )
        .unwrap();
    let svc = scribe_message::MessageService::new(std::sync::Arc::new(
        scribe_db::Database::open_read_only(&a[1]).unwrap(),
    ));
    type Case<'a> = (&'a str, Box<dyn Fn() -> usize + 'a>);
    let cases: Vec<Case<'_>> = vec![
        ("messages: step", Box::new(|| step(&db, MSGS, &s))),
        ("messages: refs", Box::new(|| refs(&db, MSGS, &s))),
        ("messages: owned", Box::new(|| owned(&db, MSGS, &s))),
        ("parts: step", Box::new(|| step(&db, PARTS, &s))),
        ("parts: refs", Box::new(|| refs(&db, PARTS, &s))),
        ("parts: owned", Box::new(|| owned(&db, PARTS, &s))),
        ("parts: decode", Box::new(|| parts_decode(&db, &s))),
        ("limit: step", Box::new(|| step(&limit_db, LIMIT, &ls))),
        ("limit: refs", Box::new(|| refs(&limit_db, LIMIT, &ls))),
        ("limit: owned", Box::new(|| owned(&limit_db, LIMIT, &ls))),
        ("limit: decode", Box::new(|| limit_decode(&limit_db, &ls))),
        ("limit: tuples", Box::new(|| limit_owned(&limit_db, &ls))),
        ("raw_load", Box::new(|| raw_load(&db, &s, true).unwrap())),
        (
            "raw_load no decode",
            Box::new(|| raw_load(&db, &s, false).unwrap()),
        ),
        ("messages: tuples", Box::new(|| raw_messages(&db, &s))),
        ("list", Box::new(|| svc.list(&s).unwrap().len())),
    ];
    if let Ok(only) = std::env::var("ONLY") {
        let case = cases.iter().find(|(n, _)| *n == only).unwrap();
        let n: usize = std::env::var("N").map_or(2000, |n| n.parse().unwrap());
        for _ in 0..n {
            std::hint::black_box(case.1());
        }
        return;
    }
    let mut times: Vec<Vec<Duration>> = vec![Vec::new(); cases.len()];
    for round in 0..200 {
        for k in 0..cases.len() {
            let i = (k + round) % cases.len();
            let t = Instant::now();
            std::hint::black_box(cases[i].1());
            times[i].push(t.elapsed());
        }
    }
    for (i, (name, _)) in cases.iter().enumerate() {
        println!("{name:20} {} ms", median(times[i].clone()));
    }
}
