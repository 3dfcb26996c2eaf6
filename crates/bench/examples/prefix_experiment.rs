//! Throwaway experiment (issue 14 item 4): the web viewer's search-as-you-type queries on
//! the word index as it is and with FTS5 prefix indexes, raw rusqlite, one run; and the
//! bytes each index takes. Usage: prefix_experiment <corpus.db> (a copy: it adds tables).
#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

use std::time::{Duration, Instant};

use rusqlite::Connection;

const TYPED: [&str; 4] = ["connection", "database", "timeout", "handle_request"];

fn main() {
    let path = std::env::args().nth(1).unwrap();
    let c = Connection::open(&path).unwrap();
    c.pragma_update(None, "cache_size", -65536).unwrap();
    let variants = [
        ("parts_fts", ""),
        ("fts_p23", "2 3"),
        ("fts_p34", "3 4"),
        ("fts_p234", "2 3 4"),
    ];
    for (name, prefix) in &variants[1..] {
        let have: i64 = c
            .query_row(
                "SELECT count(*) FROM sqlite_master WHERE name = ?1",
                [name],
                |r| r.get(0),
            )
            .unwrap();
        if have == 0 {
            let t = Instant::now();
            c.execute_batch(&format!(
                "CREATE VIRTUAL TABLE {name} USING fts5(search_text, content='parts_search', content_rowid='seq',
                    tokenize='unicode61 remove_diacritics 2', prefix='{prefix}');
                 INSERT INTO {name} ({name}) VALUES ('rebuild');"
            ))
            .unwrap();
            eprintln!("built {name} in {:?}", t.elapsed());
        }
    }
    for (name, _) in &variants {
        let n: Option<i64> = c
            .query_row(
                "SELECT sum(pgsize) FROM dbstat WHERE name LIKE ?1 || '%'",
                [name],
                |r| r.get(0),
            )
            .ok()
            .flatten();
        let msgs: i64 = c
            .query_row("SELECT count(*) FROM messages", [], |r| r.get(0))
            .unwrap();
        eprintln!(
            "bytes {name}: {n:?} ({} B/msg)",
            n.unwrap_or(0) / msgs.max(1)
        );
    }
    let keystrokes: Vec<String> = TYPED
        .iter()
        .flat_map(|w| (3..=w.len()).map(move |n| format!("\"{}\"*", &w[..n])))
        .collect();
    {
        let mut all = vec![Vec::new(); variants.len()];
        for round in 0..5 {
            for q in &keystrokes {
                for v in 0..variants.len() {
                    let i = (round + v) % variants.len();
                    let name = variants[i].0;
                    let sql = format!(
                        "SELECT p.message_id, snippet({name}, 0, '>>>', '<<<', '…', 24), {name}.rank
                         FROM {name} JOIN parts AS p ON p.seq = {name}.rowid
                         WHERE {name} MATCH ?1 ORDER BY {name}.rank LIMIT 50"
                    );
                    let mut stmt = c.prepare_cached(&sql).unwrap();
                    let t = Instant::now();
                    let n = stmt
                        .query_map([q], |r| r.get::<_, String>(0))
                        .unwrap()
                        .count();
                    all[i].push((q.clone(), t.elapsed(), n));
                }
            }
        }
        for (v, times) in all.iter().enumerate() {
            let mut d: Vec<Duration> = times.iter().map(|t| t.1).collect();
            d.sort();
            let med = d[d.len() / 2].as_secs_f64() * 1000.0;
            let p95 = d[d.len() * 95 / 100].as_secs_f64() * 1000.0;
            println!(
                "{:10} prefix keystrokes: median {med:7.2} ms, p95 {p95:7.2} ms",
                variants[v].0
            );
        }
        for q in &keystrokes[..8] {
            let line: Vec<String> = all
                .iter()
                .map(|times| {
                    let mut d: Vec<Duration> =
                        times.iter().filter(|t| &t.0 == q).map(|t| t.1).collect();
                    d.sort();
                    format!("{:7.2}", d[d.len() / 2].as_secs_f64() * 1000.0)
                })
                .collect();
            println!("  {q:16} {}", line.join(" "));
        }
    }
}
