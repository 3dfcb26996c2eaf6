//! Throwaway experiment (issue 14 item 1): loading a 500-message session under other
//! layouts of `messages` and `parts`, in raw rusqlite, against the limit, in one run.
//! Usage: layout_experiment <corpus.db> <corpus-limit.db> <session> <limit-session>
#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

use std::time::{Duration, Instant};

use rusqlite::{Connection, OpenFlags};
use scribe_message::Part;

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

const MSG_COLS: &str = "id, session_id, parent_id, role, agent, provider, model, finish_reason, is_summary, input_tokens, output_tokens, cache_read_tokens, cache_write_tokens, reasoning_tokens, cost_usd, error, created_at, updated_at, finished_at";

type Msg = (
    String,
    String,
    Option<String>,
    String,
    Option<String>,
    i64,
    i64,
    Vec<(String, i64, Part, i64, i64)>,
);

fn read_msg(r: &rusqlite::Row<'_>) -> Msg {
    let _: Option<String> = r.get(4).unwrap();
    let _: Option<String> = r.get(5).unwrap();
    let _: Option<String> = r.get(7).unwrap();
    let _: bool = r.get(8).unwrap();
    for i in 9..14 {
        let _: i64 = r.get(i).unwrap();
    }
    let _: f64 = r.get(14).unwrap();
    let _: Option<String> = r.get(15).unwrap();
    let _: Option<i64> = r.get(18).unwrap();
    (
        r.get(0).unwrap(),
        r.get(1).unwrap(),
        r.get(2).unwrap(),
        r.get(3).unwrap(),
        r.get(6).unwrap(),
        r.get(16).unwrap(),
        r.get(17).unwrap(),
        Vec::new(),
    )
}

/// Two statements: messages, then parts in `parts_sql` order, grouped by message id.
fn two(c: &Connection, msgs_sql: &str, parts_sql: &str, s: &str) -> usize {
    let tx = c.unchecked_transaction().unwrap();
    let mut out: Vec<Msg> = tx
        .prepare_cached(msgs_sql)
        .unwrap()
        .query_map([s], |r| Ok(read_msg(r)))
        .unwrap()
        .map(Result::unwrap)
        .collect();
    let index: std::collections::HashMap<String, usize> = out
        .iter()
        .enumerate()
        .map(|(i, m)| (m.0.clone(), i))
        .collect();
    let mut stmt = tx.prepare_cached(parts_sql).unwrap();
    let mut rows = stmt.query([s]).unwrap();
    let mut at = 0usize;
    while let Some(r) = rows.next().unwrap() {
        let mid = r.get_ref(1).unwrap().as_str().unwrap();
        if out.get(at).is_none_or(|m| m.0 != mid) {
            at = index[mid];
        }
        let part = Part::from_json(r.get_ref(3).unwrap().as_str().unwrap()).unwrap();
        out[at].7.push((
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

/// One statement joining messages and parts (LEFT JOIN: messages without parts too).
fn joined(c: &Connection, sql: &str, s: &str) -> usize {
    let mut stmt = c.prepare_cached(sql).unwrap();
    let mut rows = stmt.query([s]).unwrap();
    let mut out: Vec<Msg> = Vec::new();
    while let Some(r) = rows.next().unwrap() {
        let id = r.get_ref(0).unwrap().as_str().unwrap();
        if out.last().is_none_or(|m| m.0 != id) {
            out.push(read_msg(r));
        }
        if let Some(pid) = r.get::<_, Option<String>>(19).unwrap() {
            let part = Part::from_json(r.get_ref(21).unwrap().as_str().unwrap()).unwrap();
            out.last_mut().unwrap().7.push((
                pid,
                r.get(20).unwrap(),
                part,
                r.get(22).unwrap(),
                r.get(23).unwrap(),
            ));
        }
    }
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
    let mut n = 0;
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
        std::hint::black_box((parts, x));
        n += 1;
    }
    n
}

fn median(mut v: Vec<Duration>) -> f64 {
    v.sort();
    v[v.len() / 2].as_secs_f64() * 1000.0
}

fn main() {
    let a: Vec<String> = std::env::args().collect();
    let (db, limit_db, s, ls) = (&a[1], &a[2], &a[3], &a[4]);
    {
        let w = open(db, true);
        let have: i64 = w
            .query_row(
                "SELECT count(*) FROM sqlite_master WHERE name = 'parts_c'",
                [],
                |r| r.get(0),
            )
            .unwrap();
        if have == 0 {
            let t = Instant::now();
            w.execute_batch(&format!(
                "BEGIN;
                 CREATE TABLE parts_c (seq INTEGER NOT NULL, id TEXT NOT NULL, message_id TEXT NOT NULL,
                    session_id TEXT NOT NULL, position INTEGER NOT NULL, type TEXT NOT NULL, data TEXT NOT NULL,
                    created_at INTEGER NOT NULL, updated_at INTEGER NOT NULL,
                    PRIMARY KEY (session_id, seq)) WITHOUT ROWID;
                 INSERT INTO parts_c SELECT seq, id, message_id, session_id, position, type, data, created_at, updated_at FROM parts ORDER BY seq;
                 CREATE UNIQUE INDEX parts_c_seq ON parts_c (seq);
                 CREATE TABLE messages_c ({cols_def}, PRIMARY KEY (session_id, created_at, id)) WITHOUT ROWID;
                 INSERT INTO messages_c ({MSG_COLS}) SELECT {MSG_COLS} FROM messages ORDER BY rowid;
                 CREATE INDEX messages_cov ON messages (session_id, created_at, {MSG_COLS});
                 COMMIT;",
                cols_def = "id TEXT NOT NULL, session_id TEXT NOT NULL, parent_id TEXT, role TEXT NOT NULL, agent TEXT, provider TEXT, model TEXT, finish_reason TEXT, is_summary BOOLEAN NOT NULL, input_tokens INTEGER NOT NULL, output_tokens INTEGER NOT NULL, cache_read_tokens INTEGER NOT NULL, cache_write_tokens INTEGER NOT NULL, reasoning_tokens INTEGER NOT NULL, cost_usd REAL NOT NULL, error TEXT, created_at INTEGER NOT NULL, updated_at INTEGER NOT NULL, finished_at INTEGER"
            ))
            .unwrap();
            eprintln!("built variants in {:?}", t.elapsed());
        }
        for (name, sql) in [
            (
                "parts",
                "SELECT sum(pgsize) FROM dbstat WHERE name = 'parts'",
            ),
            (
                "parts_c",
                "SELECT sum(pgsize) FROM dbstat WHERE name IN ('parts_c', 'parts_c_seq')",
            ),
            (
                "messages",
                "SELECT sum(pgsize) FROM dbstat WHERE name = 'messages'",
            ),
            (
                "messages_c",
                "SELECT sum(pgsize) FROM dbstat WHERE name = 'messages_c'",
            ),
            (
                "messages_cov",
                "SELECT sum(pgsize) FROM dbstat WHERE name = 'messages_cov'",
            ),
        ] {
            let n: Option<i64> = w.query_row(sql, [], |r| r.get(0)).ok().flatten();
            eprintln!("bytes {name}: {n:?}");
        }
    }
    let c = open(db, false);
    let l = open(limit_db, false);
    let m_plain =
        format!("SELECT {MSG_COLS} FROM messages WHERE session_id = ?1 ORDER BY created_at, id");
    let m_cov = format!(
        "SELECT {MSG_COLS} FROM messages INDEXED BY messages_cov WHERE session_id = ?1 ORDER BY created_at, id"
    );
    let m_c =
        format!("SELECT {MSG_COLS} FROM messages_c WHERE session_id = ?1 ORDER BY created_at, id");
    let p_plain = "SELECT id, message_id, position, data, created_at, updated_at FROM parts WHERE session_id = ?1 ORDER BY seq";
    let p_c = "SELECT id, message_id, position, data, created_at, updated_at FROM parts_c WHERE session_id = ?1 ORDER BY seq";
    let pm = |m: &str| {
        m.split(", ")
            .map(|c| format!("m.{c}"))
            .collect::<Vec<_>>()
            .join(", ")
    };
    let j_plain = format!(
        "SELECT {}, p.id, p.position, p.data, p.created_at, p.updated_at FROM messages AS m LEFT JOIN parts AS p ON p.message_id = m.id WHERE m.session_id = ?1 ORDER BY m.created_at, m.id, p.position",
        pm(MSG_COLS)
    );
    let j_c = format!(
        "SELECT {}, p.id, p.position, p.data, p.created_at, p.updated_at FROM messages_c AS m LEFT JOIN parts_c AS p ON p.session_id = m.session_id AND p.message_id = m.id WHERE m.session_id = ?1 ORDER BY m.created_at, m.id, p.position",
        pm(MSG_COLS)
    );
    type Variant<'a> = (&'a str, Box<dyn Fn() -> usize + 'a>);
    let variants: Vec<Variant<'_>> = vec![
        ("limit", Box::new(|| limit(&l, ls))),
        (
            "today: 2 queries",
            Box::new(|| two(&c, &m_plain, p_plain, s)),
        ),
        (
            "join (today's tables)",
            Box::new(|| joined(&c, &j_plain, s)),
        ),
        (
            "covering messages index + parts",
            Box::new(|| two(&c, &m_cov, p_plain, s)),
        ),
        (
            "parts clustered (session, seq)",
            Box::new(|| two(&c, &m_plain, p_c, s)),
        ),
        ("both clustered", Box::new(|| two(&c, &m_c, p_c, s))),
        (
            "covering messages + parts clustered",
            Box::new(|| two(&c, &m_cov, p_c, s)),
        ),
        ("both clustered, join", Box::new(|| joined(&c, &j_c, s))),
    ];
    for (name, f) in &variants {
        eprintln!("{name}: {} messages", f());
    }
    let mut times: Vec<Vec<Duration>> = vec![Vec::new(); variants.len()];
    for round in 0..60 {
        for k in 0..variants.len() {
            let i = (round + k) % variants.len();
            let t = Instant::now();
            std::hint::black_box((variants[i].1)());
            times[i].push(t.elapsed());
        }
    }
    let base = median(times[0].clone());
    for ((name, _), t) in variants.iter().zip(times) {
        let m = median(t);
        println!("{name:40} {m:8.3} ms  {:5.2}x limit", m / base);
    }
}
