//! Throwaway experiment (issue 14, load): a session's parts concatenated per message by
//! SQLite (`group_concat`) and split in Rust, against today's two statements and the
//! limit, on a kept corpus (`scribe-bench --only reads --keep DIR`).
//! Usage: concat_experiment <DIR>/corpus.db <DIR>/corpus-limit.db
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::type_complexity,
    missing_docs
)]

use std::time::{Duration, Instant};

use rusqlite::{Connection, OpenFlags};
use scribe_message::Part;

#[path = "../src/raw_load.rs"]
mod raw;

use raw::{RawMessage, message_tuple, raw_load};

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

const PART: &str = "json_quote(p.id) || char(31) || p.position || char(31) || p.created_at \
|| char(31) || p.updated_at || char(31) || p.data";

fn correlated() -> String {
    format!(
        "SELECT m.*, (SELECT group_concat({PART}, char(30) ORDER BY p.position) FROM parts p \
         WHERE p.message_id = m.id) FROM messages m WHERE m.session_id = ?1 \
         ORDER BY m.created_at, m.id"
    )
}

fn correlated_unordered() -> String {
    format!(
        "SELECT m.*, (SELECT group_concat({PART}, char(30)) FROM parts p \
         WHERE p.message_id = m.id) FROM messages m WHERE m.session_id = ?1 \
         ORDER BY m.created_at, m.id"
    )
}

fn limit_decode(c: &Connection, s: &str) -> usize {
    let tx = c.unchecked_transaction().unwrap();
    let mut stmt = tx.prepare_cached(LIMIT).unwrap();
    let mut rows = stmt.query([s]).unwrap();
    let mut out = Vec::new();
    while let Some(r) = rows.next().unwrap() {
        let parts: Vec<Part> =
            serde_json::from_str(r.get_ref(2).unwrap().as_str().unwrap()).unwrap();
        out.push((
            r.get::<_, String>(0).unwrap(),
            r.get::<_, String>(1).unwrap(),
            parts,
            r.get::<_, Option<String>>(3).unwrap(),
            r.get::<_, i64>(4).unwrap(),
            r.get::<_, i64>(5).unwrap(),
        ));
    }
    drop(rows);
    drop(stmt);
    tx.commit().unwrap();
    std::hint::black_box(&out);
    out.len()
}

type RawPart = (String, i64, Part, i64, i64);

fn split(text: &str, out: &mut Vec<RawPart>) {
    for rec in text.split('\u{1e}') {
        let mut f = rec.splitn(5, '\u{1f}');
        let id = f.next().unwrap();
        let id = if id.contains('\\') {
            serde_json::from_str::<String>(id).unwrap()
        } else {
            id[1..id.len() - 1].to_owned()
        };
        let position: i64 = f.next().unwrap().parse().unwrap();
        let created: i64 = f.next().unwrap().parse().unwrap();
        let updated: i64 = f.next().unwrap().parse().unwrap();
        let part = Part::from_json(f.next().unwrap()).unwrap();
        out.push((id, position, part, created, updated));
    }
}

fn concat(c: &Connection, sql: &str, s: &str, decode: bool) -> usize {
    let tx = c.unchecked_transaction().unwrap();
    let mut stmt = tx.prepare_cached(sql).unwrap();
    let mut rows = stmt.query([s]).unwrap();
    let mut out: Vec<(RawMessage, Vec<RawPart>)> = Vec::new();
    while let Some(r) = rows.next().unwrap() {
        let m = message_tuple(r).unwrap();
        let mut parts = Vec::new();
        if let Some(text) = r.get_ref(19).unwrap().as_str_or_null().unwrap() {
            if decode {
                split(text, &mut parts);
            } else {
                std::hint::black_box(text);
            }
        }
        out.push((m, parts));
    }
    drop(rows);
    drop(stmt);
    tx.commit().unwrap();
    std::hint::black_box(&out);
    out.len()
}

fn median(mut v: Vec<Duration>) -> f64 {
    v.sort();
    v[v.len() / 2].as_secs_f64() * 1000.0
}

fn main() {
    let a: Vec<String> = std::env::args().collect();
    let (db, limit_db) = (open(&a[1]), open(&a[2]));
    let pick = "SELECT session_id FROM messages GROUP BY session_id HAVING count(*) = 500 LIMIT 1";
    let s: String = db.query_row(pick, [], |r| r.get(0)).unwrap();
    let ls: String = limit_db.query_row(pick, [], |r| r.get(0)).unwrap();
    let svc = scribe_message::MessageService::new(std::sync::Arc::new(
        scribe_db::Database::open_read_only(&a[1]).unwrap(),
    ));
    let (corr, corr_u) = (correlated(), correlated_unordered());
    for sql in [&corr, &corr_u] {
        let plan: Vec<String> = db
            .prepare(&format!("EXPLAIN QUERY PLAN {sql}"))
            .unwrap()
            .query_map([&s], |r| r.get::<_, String>(3))
            .unwrap()
            .map(Result::unwrap)
            .collect();
        println!("plan: {plan:?}");
    }
    type Case<'a> = (&'a str, Box<dyn Fn() -> usize + 'a>);
    let cases: Vec<Case<'_>> = vec![
        ("limit: decode", Box::new(|| limit_decode(&limit_db, &ls))),
        ("raw_load", Box::new(|| raw_load(&db, &s, true).unwrap())),
        ("list", Box::new(|| svc.list(&s).unwrap().len())),
        ("concat ordered", Box::new(|| concat(&db, &corr, &s, true))),
        (
            "concat unordered",
            Box::new(|| concat(&db, &corr_u, &s, true)),
        ),
        (
            "concat no decode",
            Box::new(|| concat(&db, &corr, &s, false)),
        ),
    ];
    let rounds: usize = std::env::var("N").map_or(300, |n| n.parse().unwrap());
    let mut times: Vec<Vec<Duration>> = vec![Vec::new(); cases.len()];
    for round in 0..rounds {
        for k in 0..cases.len() {
            let i = (k + round) % cases.len();
            let t = Instant::now();
            std::hint::black_box(cases[i].1());
            times[i].push(t.elapsed());
        }
    }
    let base = median(times[0].clone());
    for (i, (name, _)) in cases.iter().enumerate() {
        let m = median(times[i].clone());
        println!("{name:20} {m:.3} ms  {:.2}x", m / base);
    }
}
