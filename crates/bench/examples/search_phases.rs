//! Times each phase of one `MessageService::search` on a kept bench corpus (throwaway
//! profiling aid): `cargo run --release -p scribe-bench --example search_phases -- DIR`.
use std::sync::Arc;
use std::time::{Duration, Instant};

use rusqlite::Connection;
use scribe_db::Database;
use scribe_db::search::{SearchFilter, TextQuery};
use scribe_message::{MessageService, SearchOptions, SearchQuery};

const RAW: &str = "SELECT p.message_id, p.session_id, m.role, m.created_at,
    snippet(parts_fts, 0, '>>>', '<<<', '…', 24), parts_fts.rank, s.source, s.model, s.title
FROM parts_fts JOIN parts AS p ON p.seq = parts_fts.rowid
JOIN messages AS m ON m.id = p.message_id JOIN sessions AS s ON s.id = p.session_id
WHERE parts_fts MATCH ?1 ORDER BY parts_fts.rank LIMIT ?2";

const SCRIBE: &str = "SELECT p.message_id, p.session_id, p.id, m.role, m.created_at,
    snippet(parts_fts, 0, '>>>', '<<<', '…', 24), parts_fts.rank, s.source, s.model, m.model, s.title, s.created_at
FROM parts_fts CROSS JOIN parts AS p ON p.seq = parts_fts.rowid
CROSS JOIN messages AS m ON m.id = p.message_id CROSS JOIN sessions AS s ON s.id = p.session_id
WHERE p.seq = parts_fts.rowid AND m.id = p.message_id AND s.id = p.session_id AND parts_fts MATCH ?1 ORDER BY parts_fts.rank";

const RANK_ONLY: &str =
    "SELECT rowid FROM parts_fts WHERE parts_fts MATCH ?1 ORDER BY rank LIMIT 20";
const COUNT: &str = "SELECT count(*) FROM parts_fts WHERE parts_fts MATCH ?1";

fn med(v: &mut [Duration]) -> f64 {
    if std::env::var("MIN").is_ok() {
        v.sort();
        return v[0].as_secs_f64() * 1e3;
    }
    v.sort();
    v[v.len() / 2].as_secs_f64() * 1e3
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let dir = std::env::args().nth(1).ok_or("DIR")?;
    let path = std::path::Path::new(&dir).join("corpus.db");
    let db = Arc::new(Database::open(&path)?);
    let svc = MessageService::new(Arc::clone(&db));
    let raw = Connection::open(&path)?;
    raw.pragma_update(
        None,
        "cache_size",
        -(scribe_db::Options::default().cache_kib),
    )?;
    let queries = [
        "error",
        "function",
        "database",
        "session",
        "config",
        "connection timeout",
        "retry cache",
        "server panic",
        "\"connection pool\"",
        "conf*",
        "migr*",
        "perm*",
    ];
    let opts = SearchOptions {
        limit: 20,
        ..SearchOptions::default()
    };
    if std::env::var("TEMPMEM").is_ok() {
        raw.pragma_update(None, "temp_store", "MEMORY")?;
    }
    if std::env::var("KEYS").is_ok() {
        // Keystrokes as the web page sends them: ranked in the typing window and in full.
        let typing = SearchOptions {
            limit: 50,
            window: Some(scribe_message::TYPING_WINDOW),
            ..SearchOptions::default()
        };
        let full = SearchOptions {
            limit: 50,
            ..SearchOptions::default()
        };
        for q in [
            "c",
            "co",
            "con*",
            "conn*",
            "connection*",
            "connection",
            "d",
            "da",
            "dat*",
            "data*",
            "databa*",
            "handle_re*",
        ] {
            let mut t = [Vec::new(), Vec::new()];
            for _ in 0..5 {
                for (i, o) in [&typing, &full].into_iter().enumerate() {
                    let s = Instant::now();
                    svc.search(q, o)?;
                    t[i].push(s.elapsed());
                }
            }
            let mut d = Vec::new();
            if let SearchQuery::Fts(expr) = SearchQuery::parse(q) {
                let filter = SearchFilter {
                    limit: 50,
                    window: Some(scribe_message::TYPING_WINDOW as u64),
                    ..SearchFilter::new(TextQuery::Words(expr))
                };
                for _ in 0..5 {
                    let s = Instant::now();
                    db.read(|tx| scribe_db::search::search(tx, &filter))?;
                    d.push(s.elapsed());
                }
            } else {
                d.push(Duration::ZERO);
            }
            println!(
                "{q:<14} window {:>8.2} ms (db {:>8.2} ms)  full {:>8.2} ms",
                med(&mut t[0]),
                med(&mut d),
                med(&mut t[1])
            );
        }
        return Ok(());
    }
    if let Ok(mode) = std::env::var("MODE") {
        // One path only, for `perf stat`: its instructions, whatever the load.
        for _ in 0..3 {
            for q in queries {
                let SearchQuery::Fts(expr) = SearchQuery::parse(q) else {
                    continue;
                };
                match mode.as_str() {
                    "svc" => {
                        svc.search(q, &opts)?;
                    }
                    "db" => {
                        let filter = SearchFilter::new(TextQuery::Words(expr.clone()));
                        db.read(|tx| scribe_db::search::search(tx, &filter))?;
                    }
                    "raw" => {
                        let mut st = raw.prepare_cached(RAW)?;
                        std::hint::black_box(
                            st.query_map(rusqlite::params![expr, 20], |r| {
                                Ok((r.get::<_, String>(0)?, r.get::<_, String>(4)?))
                            })?
                            .count(),
                        );
                    }
                    "scr" => {
                        let mut st = raw.prepare_cached(SCRIBE)?;
                        let mut rows = st.query([&expr])?;
                        let mut seen = std::collections::HashSet::new();
                        while seen.len() < 20 {
                            let Some(r) = rows.next()? else { break };
                            let _snip: String = r.get(5)?;
                            seen.insert(r.get::<_, String>(0)?);
                        }
                    }
                    "rank" => {
                        let mut st = raw.prepare_cached(RANK_ONLY)?;
                        std::hint::black_box(
                            st.query_map([&expr], |r| r.get::<_, i64>(0))?.count(),
                        );
                    }
                    _ => {}
                }
            }
        }
        return Ok(());
    }
    println!(
        "{:<22} {:>8} {:>8} {:>8} {:>8} {:>8} {:>8} {:>8} {:>8} {:>7}",
        "query", "svc", "pending", "emptyrd", "dbsearch", "raw", "scrsql", "rankonly", "count", "n"
    );
    for q in queries {
        let SearchQuery::Fts(expr) = SearchQuery::parse(q) else {
            continue;
        };
        let filter = SearchFilter::new(TextQuery::Words(expr.clone()));
        let mut t: Vec<Vec<Duration>> = vec![Vec::new(); 8];
        let mut n = 0i64;
        for _ in 0..std::env::var("N")
            .ok()
            .and_then(|n| n.parse().ok())
            .unwrap_or(7)
        {
            let s = Instant::now();
            svc.search(q, &opts)?;
            t[0].push(s.elapsed());
            let s = Instant::now();
            db.index_pending()?;
            t[1].push(s.elapsed());
            let s = Instant::now();
            db.read(|_tx| -> scribe_db::Result<()> { Ok(()) })?;
            t[2].push(s.elapsed());
            let s = Instant::now();
            db.read(|tx| scribe_db::search::search(tx, &filter))?;
            t[3].push(s.elapsed());
            let s = Instant::now();
            let mut st = raw.prepare_cached(RAW)?;
            let c = st
                .query_map(rusqlite::params![expr, 20], |r| {
                    Ok((r.get::<_, String>(0)?, r.get::<_, String>(4)?))
                })?
                .count();
            std::hint::black_box(c);
            t[4].push(s.elapsed());
            let s = Instant::now();
            let mut st = raw.prepare_cached(SCRIBE)?;
            let mut rows = st.query([&expr])?;
            let mut seen = std::collections::HashSet::new();
            while seen.len() < 20 {
                let Some(r) = rows.next()? else { break };
                let _snip: String = r.get(5)?;
                seen.insert(r.get::<_, String>(0)?);
            }
            drop(rows);
            t[5].push(s.elapsed());
            let s = Instant::now();
            let mut st = raw.prepare_cached(RANK_ONLY)?;
            std::hint::black_box(st.query_map([&expr], |r| r.get::<_, i64>(0))?.count());
            t[6].push(s.elapsed());
            let s = Instant::now();
            n = raw.query_row(COUNT, [&expr], |r| r.get(0))?;
            t[7].push(s.elapsed());
        }
        let m: Vec<f64> = t.iter_mut().map(|v| med(v)).collect();
        println!(
            "{:<22} {:>8.2} {:>8.2} {:>8.2} {:>8.2} {:>8.2} {:>8.2} {:>8.2} {:>8.2} {:>7}",
            q, m[0], m[1], m[2], m[3], m[4], m[5], m[6], m[7], n
        );
    }
    Ok(())
}
