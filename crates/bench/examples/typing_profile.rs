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
