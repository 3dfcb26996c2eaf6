//! Search as you type, keystroke by keystroke (profiling aid): on the web benchmark's kept
//! database (`scribe-bench --only web --keep DIR`), times each keystroke the page sends
//! (`MessageService::search` with the typing window, limit 50) and the statements it is
//! made of, read raw: the window's floor (the 2,000th newest match), the ranked first page
//! with snippets, and a bare count of the matches (what bm25's document frequency costs).
//! `cargo run --release -p scribe-bench --example typing_profile -- DIR/web.db`
#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

use std::sync::Arc;
use std::time::{Duration, Instant};

use rusqlite::Connection;
use scribe_db::Database;
use scribe_message::{MessageService, SearchOptions, SearchQuery};

const TYPED: [&str; 5] = [
    "connection",
    "database",
    "timeout",
    "handle_request",
    "数据库",
];

const FLOOR: &str = "SELECT rowid FROM parts_fts WHERE parts_fts MATCH ?1 \
    ORDER BY rowid DESC LIMIT 1 OFFSET 1999";
const PAGE: &str = "SELECT p.message_id, snippet(parts_fts, 0, '>>>', '<<<', '…', 24), parts_fts.rank \
    FROM parts_fts CROSS JOIN parts AS p WHERE p.seq = parts_fts.rowid AND parts_fts.rowid >= ?2 \
    AND parts_fts MATCH ?1 ORDER BY parts_fts.rank LIMIT 80";
const COUNT: &str = "SELECT count(*) FROM parts_fts WHERE parts_fts MATCH ?1";

fn med(v: &mut [Duration]) -> f64 {
    v.sort();
    v[v.len() / 2].as_secs_f64() * 1e3
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let path = std::env::args().nth(1).ok_or("DB")?;
    if let Ok(expr) = std::env::var("PHASES") {
        return phases(&path, &expr);
    }
    let rounds: usize = std::env::var("N")
        .ok()
        .and_then(|n| n.parse().ok())
        .unwrap_or(5);
    let db = Arc::new(Database::open(&path)?);
    let svc = MessageService::new(Arc::clone(&db));
    let raw = Connection::open(&path)?;
    raw.pragma_update(
        None,
        "cache_size",
        -(scribe_db::Options::default().cache_kib),
    )?;
    let keystrokes: Vec<String> = TYPED
        .iter()
        .flat_map(|word| {
            let chars: Vec<char> = word.chars().collect();
            (1..=chars.len()).map(move |n| {
                let typed: String = chars[..n].iter().collect();
                if n >= 3 && typed.is_ascii() {
                    typed + "*"
                } else {
                    typed
                }
            })
        })
        .collect();
    let typing = SearchOptions {
        limit: 50,
        window: Some(scribe_message::TYPING_WINDOW),
        ..SearchOptions::default()
    };
    let full = SearchOptions {
        limit: 50,
        ..SearchOptions::default()
    };
    println!(
        "{:<16} {:>9} {:>9} {:>9} {:>9} {:>9} {:>8} {:>5}",
        "typed", "svc", "enter", "floor", "page", "count", "matches", "hits"
    );
    let only = std::env::var("ONLY").ok();
    for typed in &keystrokes {
        if only.as_deref().is_some_and(|o| o != typed) {
            continue;
        }
        let mut t: Vec<Vec<Duration>> = vec![Vec::new(); 5];
        let mut hits = 0;
        let mut matches = 0i64;
        for _ in 0..rounds {
            let s = Instant::now();
            hits = svc.search(typed, &typing)?.len();
            t[0].push(s.elapsed());
            let s = Instant::now();
            svc.search(typed, &full)?;
            t[1].push(s.elapsed());
            if let SearchQuery::Fts(expr) = SearchQuery::parse(typed) {
                let s = Instant::now();
                let floor: i64 = raw
                    .prepare_cached(FLOOR)?
                    .query_row([&expr], |r| r.get(0))
                    .unwrap_or(0);
                t[2].push(s.elapsed());
                let s = Instant::now();
                let n = raw
                    .prepare_cached(PAGE)?
                    .query_map(rusqlite::params![expr, floor], |r| r.get::<_, String>(1))?
                    .count();
                std::hint::black_box(n);
                t[3].push(s.elapsed());
                let s = Instant::now();
                matches = raw
                    .prepare_cached(COUNT)?
                    .query_row([&expr], |r| r.get(0))?;
                t[4].push(s.elapsed());
            }
        }
        let m = |v: &mut Vec<Duration>| if v.is_empty() { 0.0 } else { med(v) };
        println!(
            "{:<16} {:>9.2} {:>9.2} {:>9.2} {:>9.2} {:>9.2} {:>8} {:>5}",
            typed,
            m(&mut t[0]),
            m(&mut t[1]),
            m(&mut t[2]),
            m(&mut t[3]),
            m(&mut t[4]),
            matches,
            hits
        );
    }
    Ok(())
}

/// The typing window's walk for one expression, phase by phase (`PHASES=<expr>`).
pub fn phases(path: &str, expr: &str) -> Result<(), Box<dyn std::error::Error>> {
    let conn = Connection::open(path)?;
    let t = Instant::now();
    let mem = Connection::open_in_memory()?;
    mem.execute_batch(
        "CREATE VIRTUAL TABLE w USING fts5(t, tokenize='unicode61 remove_diacritics 2')",
    )?;
    println!("open {:?}", t.elapsed());
    let mut below = i64::MAX;
    let (mut read_t, mut ins_t, mut count_t) = (Duration::ZERO, Duration::ZERO, Duration::ZERO);
    let mut texts: Vec<(i64, Option<String>)> = Vec::new();
    for _ in 0..8 {
        let t = Instant::now();
        let mut newest = conn.prepare_cached(
            "SELECT d.id, d.sz, v.search_text, p.message_id FROM parts_fts_docsize AS d \
             CROSS JOIN parts AS p CROSS JOIN parts_search AS v \
             WHERE p.seq = d.id AND v.seq = d.id AND d.id < ?1 ORDER BY d.id DESC LIMIT 1000",
        )?;
        texts.clear();
        for row in newest.query_map([below], |r| Ok((r.get::<_, i64>(0)?, r.get(2)?)))? {
            texts.push(row?);
        }
        read_t += t.elapsed();
        let t = Instant::now();
        mem.execute_batch("BEGIN")?;
        for (seq, text) in &texts {
            mem.execute(
                "INSERT INTO w (rowid, t) VALUES (?1, ?2)",
                rusqlite::params![seq, text],
            )?;
            below = *seq;
        }
        mem.execute_batch("COMMIT")?;
        ins_t += t.elapsed();
        let t = Instant::now();
        let n: i64 = mem.query_row("SELECT count(*) FROM w WHERE w MATCH ?1", [expr], |r| {
            r.get(0)
        })?;
        count_t += t.elapsed();
        if n >= 2000 {
            break;
        }
    }
    println!("read {read_t:?} insert {ins_t:?} count {count_t:?}");
    let t = Instant::now();
    let n = mem
        .prepare("SELECT rowid, highlight(w, 0, char(1), char(2)), t FROM w WHERE w MATCH ?1")?
        .query_map([expr], |r| r.get::<_, String>(1))?
        .count();
    println!("highlight {n} {:?}", t.elapsed());
    let t = Instant::now();
    let n = mem
        .prepare("SELECT rowid FROM w WHERE w MATCH ?1")?
        .query_map([expr], |r| r.get::<_, i64>(0))?
        .count();
    println!("match {n} {:?}", t.elapsed());
    Ok(())
}
