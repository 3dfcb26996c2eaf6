//! Throwaway experiment (stop 29, issue 14 "load <= 1.2x" with "bytes <= 1.3x"): a
//! settled message's parts *moved* into its row as one JSON array (not copied, as
//! `snapshot_experiment.rs` did), `parts` kept as one thin row per part (seq, id, message,
//! session, position, type, times) whose `data` is NULL once the part settled. Raw
//! rusqlite, no library change, against the limit and today's two statements in one run.
//!
//! The layout ("moved"), made from a fresh Scribe schema (V22) by [`make_moved`]:
//! - `messages.parts TEXT NOT NULL DEFAULT '[]' CHECK (json_valid(parts))`: one element per
//!   position, `[id, part, created_at]`, or `[id, part, created_at, updated_at]` when the
//!   part changed after it was created; the array index is the part's position, a `null`
//!   element is a position with no settled part (deleted, or still unsettled);
//! - `parts.data` nullable (`CHECK (data IS NULL OR json_valid(data))`): the JSON of a part
//!   that is still streamed or running, NULL once settled; a partial index
//!   `parts_unsettled ON parts (session_id) WHERE data IS NOT NULL` finds those;
//! - the view `parts_search` (the external content of both FTS5 indexes) reads a settled
//!   part's text with `messages.parts ->> '$[<position>][1].text'` (and the tool fields),
//!   an unsettled one's from `parts.data`; everything else (triggers, queue, FTS5 tables,
//!   the trigram view) is today's, unchanged.
//!
//! Load = the session's messages (one statement, parts arrays decoded) + the session's
//! unsettled parts (one probe of `parts_unsettled`, which finds none in the corpus), in
//! one read transaction.
//!
//! Usage (a kept corpus: `scribe-bench --only reads --keep DIR`; it writes two files
//! beside it, `moved-today.db` and `moved.db`, both rebuilt from `corpus.db` the same way,
//! today's layout and the moved one; `REBUILD=1` makes them again):
//!
//! ```text
//! flock /work/wt/bench.lock target/release/examples/moved_parts_experiment DIR/corpus.db DIR/corpus-limit.db
//! flock /work/wt/bench.lock env MODE=append target/release/examples/moved_parts_experiment DIR
//! flock /work/wt/bench.lock env MODE=index target/release/examples/moved_parts_experiment DIR
//! ```
//!
//! The first prints bytes per message (whole file after a checkpoint, and by object with
//! `dbstat`), the library's indexer run on each rebuilt file, the view read per part (the
//! indexer's look-up), a search page with and without `snippet()`, the unsettled probe's
//! plan and cost, and the load: `REPEATS` (default 5) repeats of 150 alternated rounds,
//! each repeat's ratio against the limit, then median and spread. The second
//! (`MODE=append`, fresh files in DIR) appends one message with one ~1 KB text part per
//! transaction in alternated blocks of 100 (`N`, default 4000, per side, `REPEATS` times),
//! then streams `STREAMS` (default 30) 10 KB replies in 100 flushes on each side and
//! times the moved layout's settle (the part's JSON moved into its message row). The third
//! (`MODE=index`, after the first) rebuilds both FTS5 indexes from their views on copies
//! of the two rebuilt files, alternated: the indexer's cost per part in bulk.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::type_complexity,
    clippy::too_many_lines,
    missing_docs
)]

use std::fmt;
use std::path::Path;
use std::time::{Duration, Instant};

use rusqlite::{Connection, OpenFlags, params};
use scribe_message::{Part, SearchQuery};
use serde::Deserialize;
use serde::de::{self, Deserializer, SeqAccess, Visitor};
use serde_json::Value;

/// The bench's raw load (today's two statements, the load row's "same design").
#[path = "../src/raw_load.rs"]
#[allow(dead_code)]
mod raw_load;

const MSG_COLS: &str = "id, session_id, parent_id, role, agent, provider, model, finish_reason, is_summary, input_tokens, output_tokens, cache_read_tokens, cache_write_tokens, reasoning_tokens, cost_usd, error, created_at, updated_at, finished_at";
const PART_COLS: &str =
    "seq, id, message_id, session_id, position, type, data, created_at, updated_at";

/// The thin `parts` table: today's, with `data` nullable.
const MOVED_PARTS: &str = "CREATE TABLE parts (
    seq                 INTEGER PRIMARY KEY,
    id                  TEXT NOT NULL UNIQUE,
    message_id          TEXT NOT NULL,
    session_id          TEXT NOT NULL,
    position            INTEGER NOT NULL,
    type                TEXT NOT NULL,
    data                TEXT CHECK (data IS NULL OR json_valid(data)),
    created_at          INTEGER NOT NULL,
    updated_at          INTEGER NOT NULL,
    UNIQUE (message_id, position),
    FOREIGN KEY (session_id, message_id) REFERENCES messages (session_id, id) ON DELETE CASCADE
)";

/// One JSON field of a part, read from the part row while unsettled, else from its
/// element in the message's array (`[id, part, created, updated?]`: the part is `[1]`).
fn field(path: &str) -> String {
    format!(
        "CASE WHEN p.data IS NULL THEN m.parts ->> ('$[' || p.position || '][1]{path}') ELSE p.data ->> '${path}' END"
    )
}

/// `parts_search` over the moved layout: V18's columns and rows, the JSON read from where
/// the part's content lives.
fn moved_view() -> String {
    format!(
        "CREATE VIEW parts_search AS
SELECT p.seq,
       CASE WHEN json_valid(coalesce(p.data, m.parts)) THEN CAST(
           CASE p.type
               WHEN 'text' THEN {text}
               WHEN 'reasoning' THEN {text}
               WHEN 'tool' THEN concat_ws(char(10), {tool}, {input}, {output}, {message})
           END AS TEXT)
       END AS search_text,
       NOT json_valid(coalesce(p.data, m.parts)) AS damaged
FROM parts AS p JOIN messages AS m ON m.id = p.message_id
WHERE p.type = 'text' OR p.type = 'reasoning' OR p.type = 'tool'",
        text = field(".text"),
        tool = field(".tool"),
        input = field(".input"),
        output = field(".state.output"),
        message = field(".state.message"),
    )
}

/// Turns a fresh (empty) Scribe file into the moved layout: `parts` made again thin (its
/// indexes and triggers as they were), `messages.parts` added, `parts_search` read from it.
fn make_moved(c: &Connection) {
    let saved = |sql: &str| -> Vec<String> {
        c.prepare(sql)
            .unwrap()
            .query_map([], |r| r.get(0))
            .unwrap()
            .map(Result::unwrap)
            .collect()
    };
    let part_objects = saved(
        "SELECT sql FROM sqlite_master WHERE tbl_name = 'parts' AND type IN ('index', 'trigger') AND sql IS NOT NULL ORDER BY type, name",
    );
    let trigram_view = saved("SELECT sql FROM sqlite_master WHERE name = 'parts_search_trigram'");
    assert_eq!(trigram_view.len(), 1, "not a Scribe V22 file");
    c.pragma_update(None, "foreign_keys", false).unwrap();
    let mut batch = String::from(
        "BEGIN;
         DROP VIEW parts_search_trigram;
         DROP VIEW parts_search;
         DROP TABLE parts;\n",
    );
    batch += MOVED_PARTS;
    batch += ";\n";
    for sql in &part_objects {
        batch += sql;
        batch += ";\n";
    }
    batch += "CREATE INDEX parts_unsettled ON parts (session_id) WHERE data IS NOT NULL;
              ALTER TABLE messages ADD COLUMN parts TEXT NOT NULL DEFAULT '[]' CHECK (json_valid(parts));\n";
    batch += &moved_view();
    batch += ";\n";
    batch += &trigram_view[0];
    batch += ";\nCOMMIT;";
    c.execute_batch(&batch).unwrap();
    c.pragma_update(None, "foreign_keys", true).unwrap();
}

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

/// A fresh Scribe file at `path` (schema V22, no background indexer), closed again.
fn fresh(path: &str) {
    for suffix in ["", "-wal", "-shm"] {
        let _ = std::fs::remove_file(format!("{path}{suffix}"));
    }
    drop(scribe_db::Database::open(path).unwrap());
}

fn no_indexer() -> scribe_db::Options {
    scribe_db::Options {
        background_indexing: false,
        ..scribe_db::Options::default()
    }
}

/// The element of a settled part in the message's array: `[id, part, created, updated?]`
/// (updated omitted when it equals created). The part decodes as the library decodes
/// stored JSON (`Part::from_value`: lenient about unknown types), or with serde's derive.
struct Elem<const DERIVE: bool> {
    id: String,
    part: Part,
    created: i64,
    updated: i64,
}

impl<'de, const DERIVE: bool> Deserialize<'de> for Elem<DERIVE> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V<const DERIVE: bool>;
        impl<'de, const DERIVE: bool> Visitor<'de> for V<DERIVE> {
            type Value = Elem<DERIVE>;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("[id, part, created_at, updated_at?]")
            }
            fn visit_seq<A: SeqAccess<'de>>(self, mut a: A) -> Result<Elem<DERIVE>, A::Error> {
                let id: String = a
                    .next_element()?
                    .ok_or_else(|| de::Error::invalid_length(0, &self))?;
                let part = if DERIVE {
                    a.next_element::<Part>()?
                        .ok_or_else(|| de::Error::invalid_length(1, &self))?
                } else {
                    let v: Value = a
                        .next_element()?
                        .ok_or_else(|| de::Error::invalid_length(1, &self))?;
                    Part::from_value(v).map_err(de::Error::custom)?
                };
                let created: i64 = a
                    .next_element()?
                    .ok_or_else(|| de::Error::invalid_length(2, &self))?;
                let updated = a.next_element()?.unwrap_or(created);
                Ok(Elem {
                    id,
                    part,
                    created,
                    updated,
                })
            }
        }
        d.deserialize_seq(V::<DERIVE>)
    }
}

/// A message row (schema column order) as the raw load reads it.
type Head = raw_load::RawMessage;
/// A stored part as the load returns it: id, position, content, created, updated.
type Stored = (String, i64, Part, i64, i64);

const MOVED_MESSAGES: &str = "SELECT id, session_id, parent_id, role, agent, provider, model, finish_reason, is_summary, input_tokens, output_tokens, cache_read_tokens, cache_write_tokens, reasoning_tokens, cost_usd, error, created_at, updated_at, finished_at, parts FROM messages WHERE session_id = ?1 ORDER BY created_at, id";
/// The session's unsettled parts: a probe of the partial index `parts_unsettled`.
const UNSETTLED: &str = "SELECT id, message_id, position, data, created_at, updated_at FROM parts WHERE session_id = ?1 AND data IS NOT NULL";

/// The moved layout's load: one statement for the messages and their settled parts, one
/// probe for the unsettled parts, in one read transaction.
fn moved_load<const DERIVE: bool>(c: &Connection, s: &str) -> usize {
    let tx = c.unchecked_transaction().unwrap();
    let mut out: Vec<(Head, Vec<Stored>)> = Vec::new();
    {
        let mut stmt = tx.prepare_cached(MOVED_MESSAGES).unwrap();
        let mut rows = stmt.query([s]).unwrap();
        while let Some(r) = rows.next().unwrap() {
            let h = raw_load::message_tuple(r).unwrap();
            let slots: Vec<Option<Elem<DERIVE>>> =
                serde_json::from_str(r.get_ref(19).unwrap().as_str().unwrap()).unwrap();
            let parts = slots
                .into_iter()
                .zip(0..)
                .filter_map(|(e, position)| {
                    e.map(|e| (e.id, position, e.part, e.created, e.updated))
                })
                .collect();
            out.push((h, parts));
        }
    }
    {
        let mut stmt = tx.prepare_cached(UNSETTLED).unwrap();
        let mut rows = stmt.query([s]).unwrap();
        while let Some(r) = rows.next().unwrap() {
            let mid = r.get_ref(1).unwrap().as_str().unwrap();
            let Some(m) = out.iter_mut().find(|m| m.0.0.0 == mid) else {
                continue;
            };
            let part = Part::from_json(r.get_ref(3).unwrap().as_str().unwrap()).unwrap();
            let position: i64 = r.get(2).unwrap();
            let at = m.1.partition_point(|p| p.1 < position);
            m.1.insert(
                at,
                (
                    r.get(0).unwrap(),
                    position,
                    part,
                    r.get(4).unwrap(),
                    r.get(5).unwrap(),
                ),
            );
        }
    }
    tx.commit().unwrap();
    std::hint::black_box(&out);
    out.len()
}

/// The moved load reading only the limit's six message columns (id, role, parts, model,
/// times), no read transaction and no probe: how much of the gap to the limit is Scribe's
/// wider message row rather than the layout.
fn moved_narrow(c: &Connection, s: &str) -> usize {
    let mut stmt = c
        .prepare_cached(
            "SELECT id, role, parts, model, created_at, updated_at FROM messages WHERE session_id = ?1 ORDER BY created_at, id",
        )
        .unwrap();
    let mut rows = stmt.query([s]).unwrap();
    let mut out = Vec::new();
    while let Some(r) = rows.next().unwrap() {
        let slots: Vec<Option<Elem<true>>> =
            serde_json::from_str(r.get_ref(2).unwrap().as_str().unwrap()).unwrap();
        let x: (String, String, Option<String>, i64, i64) = (
            r.get(0).unwrap(),
            r.get(1).unwrap(),
            r.get(3).unwrap(),
            r.get(4).unwrap(),
            r.get(5).unwrap(),
        );
        out.push((slots, x));
    }
    std::hint::black_box(&out);
    out.len()
}

/// The moved load with the 19 message columns read but not copied (`get_ref`, nothing
/// allocated or kept), the parts decoded as in [`moved_load`] (derive): what owning the
/// message row's strings costs, the bound borrowed row types would approach.
fn moved_borrowed(c: &Connection, s: &str) -> usize {
    let tx = c.unchecked_transaction().unwrap();
    let mut out: Vec<Vec<Option<Elem<true>>>> = Vec::new();
    {
        let mut stmt = tx.prepare_cached(MOVED_MESSAGES).unwrap();
        let mut rows = stmt.query([s]).unwrap();
        while let Some(r) = rows.next().unwrap() {
            for i in 0..19 {
                std::hint::black_box(r.get_ref(i).unwrap());
            }
            out.push(serde_json::from_str(r.get_ref(19).unwrap().as_str().unwrap()).unwrap());
        }
    }
    std::hint::black_box(probe_in(&tx, s));
    tx.commit().unwrap();
    std::hint::black_box(&out);
    out.len()
}

fn probe_in(c: &Connection, s: &str) -> usize {
    c.prepare_cached(UNSETTLED)
        .unwrap()
        .query_map([s], |r| r.get::<_, String>(0))
        .unwrap()
        .count()
}

/// The probe alone, in a read transaction (what it adds to a load).
fn probe(c: &Connection, s: &str) -> usize {
    let tx = c.unchecked_transaction().unwrap();
    let n = tx
        .prepare_cached(UNSETTLED)
        .unwrap()
        .query_map([s], |r| r.get::<_, String>(0))
        .unwrap()
        .count();
    tx.commit().unwrap();
    n
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

fn median_ms(v: &[Duration]) -> f64 {
    let mut v = v.to_vec();
    v.sort();
    v[v.len() / 2].as_secs_f64() * 1000.0
}

fn median_f(v: &[f64]) -> f64 {
    let mut v = v.to_vec();
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

fn spread(v: &[f64]) -> String {
    let lo = v.iter().copied().fold(f64::INFINITY, f64::min);
    let hi = v.iter().copied().fold(f64::NEG_INFINITY, f64::max);
    format!("median {:.2}x, {lo:.2}-{hi:.2}x", median_f(v))
}

/// Copies `src` (a kept corpus) into `dst` (a fresh Scribe file, made moved when `moved`)
/// in batches of 1,000 messages per transaction as the corpus was built (messages, then
/// their parts, in the source's order), then indexes both FTS5 indexes with the library's
/// indexer (timed) and checkpoints.
fn rebuild(src: &str, dst: &str, moved: bool) -> (Duration, u64) {
    fresh(dst);
    let c = open(dst, true);
    c.pragma_update(None, "journal_mode", "wal").unwrap();
    c.pragma_update(None, "synchronous", "normal").unwrap();
    if moved {
        make_moved(&c);
    }
    // The copy is of consistent rows (a session's summary message comes after it).
    c.pragma_update(None, "foreign_keys", false).unwrap();
    c.execute("ATTACH DATABASE ?1 AS src", [src]).unwrap();
    let gaps: i64 = c
        .query_row(
            "SELECT count(*) FROM (SELECT message_id FROM src.parts GROUP BY message_id HAVING max(position) + 1 <> count(*) OR min(position) <> 0)",
            [],
            |r| r.get(0),
        )
        .unwrap();
    assert_eq!(
        gaps, 0,
        "positions with gaps: this experiment assumes dense ones"
    );
    c.execute_batch("INSERT INTO sessions SELECT * FROM src.sessions")
        .unwrap();
    let (lo, hi): (i64, i64) = c
        .query_row("SELECT min(rowid), max(rowid) FROM src.messages", [], |r| {
            Ok((r.get(0)?, r.get(1)?))
        })
        .unwrap();
    let m_cols = MSG_COLS
        .split(", ")
        .map(|c| format!("m.{c}"))
        .collect::<Vec<_>>()
        .join(", ");
    let insert_messages = if moved {
        format!(
            "INSERT INTO messages ({MSG_COLS}, parts) SELECT {m_cols},
                (SELECT json_group_array(json(CASE WHEN p.updated_at = p.created_at
                     THEN json_array(p.id, json(p.data), p.created_at)
                     ELSE json_array(p.id, json(p.data), p.created_at, p.updated_at) END))
                 FROM (SELECT * FROM src.parts AS p WHERE p.message_id = m.id ORDER BY p.position) AS p)
             FROM src.messages AS m WHERE m.rowid BETWEEN ?1 AND ?2 ORDER BY m.rowid"
        )
    } else {
        format!(
            "INSERT INTO messages ({MSG_COLS}) SELECT {m_cols} FROM src.messages AS m WHERE m.rowid BETWEEN ?1 AND ?2 ORDER BY m.rowid"
        )
    };
    let data = if moved { "NULL" } else { "p.data" };
    let insert_parts = format!(
        "INSERT INTO parts ({PART_COLS}) SELECT p.seq, p.id, p.message_id, p.session_id, p.position, p.type, {data}, p.created_at, p.updated_at
         FROM src.messages AS m JOIN src.parts AS p ON p.message_id = m.id
         WHERE m.rowid BETWEEN ?1 AND ?2 ORDER BY p.seq"
    );
    let mut at = lo;
    while at <= hi {
        let tx = c.unchecked_transaction().unwrap();
        tx.execute(&insert_messages, params![at, at + 999]).unwrap();
        tx.execute(&insert_parts, params![at, at + 999]).unwrap();
        tx.commit().unwrap();
        at += 1000;
    }
    c.execute_batch("DETACH DATABASE src; PRAGMA wal_checkpoint(TRUNCATE);")
        .unwrap();
    drop(c);
    let db = scribe_db::Database::open_with(dst, no_indexer()).unwrap();
    let t = Instant::now();
    let run = db
        .index_pending_with(scribe_db::IndexBatch {
            max_parts: 20_000,
            max_time: Duration::from_secs(1),
        })
        .unwrap();
    let took = t.elapsed();
    drop(db);
    let c = open(dst, true);
    c.execute_batch("PRAGMA wal_checkpoint(TRUNCATE)").unwrap();
    (took, run.indexed)
}

/// Bytes per message of `path` (whole file) and by group of objects (`dbstat`), printed.
fn bytes_report(name: &str, path: &str) -> f64 {
    let c = open(path, false);
    let n: f64 = c
        .query_row("SELECT count(*) FROM messages", [], |r| r.get::<_, i64>(0))
        .unwrap() as f64;
    let file = std::fs::metadata(path).unwrap().len() as f64;
    let mut groups: Vec<(&str, f64)> = Vec::new();
    let mut stmt = c
        .prepare("SELECT name, sum(pgsize) FROM dbstat GROUP BY name")
        .unwrap();
    let rows = stmt
        .query_map([], |r| Ok((r.get::<_, String>(0)?, r.get::<_, i64>(1)?)))
        .unwrap();
    for row in rows {
        let (object, b) = row.unwrap();
        let group = if object.starts_with("parts_fts_trigram") {
            "trigram"
        } else if object.starts_with("parts_fts") {
            "words"
        } else if object.starts_with("parts") || object.starts_with("sqlite_autoindex_parts") {
            "parts"
        } else if object.starts_with("messages") || object.starts_with("sqlite_autoindex_messages")
        {
            "messages"
        } else {
            "other"
        };
        match groups.iter_mut().find(|(g, _)| *g == group) {
            Some((_, t)) => *t += b as f64,
            None => groups.push((group, b as f64)),
        }
    }
    let detail = groups
        .iter()
        .map(|(g, b)| format!("{g} {:.0}", b / n))
        .collect::<Vec<_>>()
        .join(", ");
    println!("bytes/message {name:12} {:6.0} B  ({detail})", file / n);
    file / n
}

/// The indexer's look-up (`search_index.rs`'s TEXT) for every searchable part, summed text
/// length; returns (elapsed, parts, a checksum of the texts).
fn view_read(c: &Connection, seqs: &[i64]) -> (Duration, u64) {
    let mut stmt = c
        .prepare_cached("SELECT search_text, damaged FROM parts_search WHERE seq = ?1")
        .unwrap();
    let t = Instant::now();
    let mut sum = 0_u64;
    for (i, seq) in seqs.iter().enumerate() {
        let (text, _damaged): (Option<String>, bool) = stmt
            .query_row([seq], |r| Ok((r.get(0)?, r.get(1)?)))
            .unwrap();
        let text = text.unwrap_or_default();
        sum = sum
            .wrapping_mul(31)
            .wrapping_add(text.len() as u64 ^ (i as u64))
            .wrapping_add(text.bytes().take(64).map(u64::from).sum::<u64>());
    }
    (t.elapsed(), sum)
}

const RAW_WORDS: &str = "SELECT p.message_id, p.session_id, m.role, m.created_at,
    snippet(parts_fts, 0, '>>>', '<<<', '…', 24), parts_fts.rank, s.source, s.model, s.title
FROM parts_fts JOIN parts AS p ON p.seq = parts_fts.rowid
JOIN messages AS m ON m.id = p.message_id JOIN sessions AS s ON s.id = p.session_id
WHERE parts_fts MATCH ?1 ORDER BY parts_fts.rank LIMIT 20";
const RAW_TRIGRAMS: &str = "SELECT p.message_id, p.session_id, m.role, m.created_at,
    snippet(parts_fts_trigram, 0, '>>>', '<<<', '…', 24), parts_fts_trigram.rank,
    s.source, s.model, s.title
FROM parts_fts_trigram JOIN parts AS p ON p.seq = parts_fts_trigram.rowid
JOIN messages AS m ON m.id = p.message_id JOIN sessions AS s ON s.id = p.session_id
WHERE parts_fts_trigram MATCH ?1 ORDER BY parts_fts_trigram.rank LIMIT 20";

/// The bench's query mix (`reads.rs`), 60 queries.
fn queries() -> Vec<(bool, String)> {
    let kinds: [&[&str]; 6] = [
        &["error", "function", "database", "session", "config"],
        &[
            "zeitgeist",
            "quokka",
            "flibbertigibbet",
            "xylophone",
            "kumquat",
        ],
        &[
            "connection timeout",
            "retry cache",
            "server panic",
            "merge review",
            "handle_request memory",
        ],
        &[
            "\"connection pool\"",
            "\"error function\"",
            "\"handle_request\"",
            "\"src/db/pool.rs\"",
        ],
        &["conf*", "migr*", "perm*", "bench*", "sock*"],
        &["数据库", "连接池", "中文文本", "データベース", "部署失败"],
    ];
    (0..60)
        .filter_map(|i| {
            let q = kinds[i % 6][(i / 6) % kinds[i % 6].len()];
            match SearchQuery::parse(q) {
                SearchQuery::Fts(e) => Some((false, e)),
                SearchQuery::Trigram(e) => Some((true, e)),
                _ => None,
            }
        })
        .collect()
}

/// One search page, snippets computed or not (then '' in its place); returns the
/// snippets' total length (the same on both layouts when the content is).
fn search(c: &Connection, trigram: bool, expr: &str, snippets: bool) -> usize {
    let mut sql = if trigram { RAW_TRIGRAMS } else { RAW_WORDS }.to_owned();
    if !snippets {
        let table = if trigram {
            "parts_fts_trigram"
        } else {
            "parts_fts"
        };
        sql = sql.replace(&format!("snippet({table}, 0, '>>>', '<<<', '…', 24)"), "''");
    }
    let mut stmt = c.prepare_cached(&sql).unwrap();
    let rows = stmt
        .query_map([expr], |r| Ok(r.get::<_, String>(4)?.len()))
        .unwrap();
    rows.map(Result::unwrap).sum()
}

fn reads(db: &str, limit_db: &str) {
    let dir = Path::new(db).parent().unwrap().to_str().unwrap().to_owned();
    let today_path = format!("{dir}/moved-today.db");
    let moved_path = format!("{dir}/moved.db");
    let rebuild_all = std::env::var("REBUILD").is_ok() || !Path::new(&moved_path).exists();
    if rebuild_all {
        for (path, moved) in [(&today_path, false), (&moved_path, true)] {
            let (took, parts) = rebuild(db, path, moved);
            println!(
                "indexer (library, index_pending_with) {:5}: {parts} parts in {:.0} ms, {:.1} us/part",
                if moved { "moved" } else { "today" },
                took.as_secs_f64() * 1000.0,
                took.as_secs_f64() * 1e6 / parts as f64
            );
        }
    }
    let b_corpus = bytes_report("corpus", db);
    let b_today = bytes_report("today", &today_path);
    let b_moved = bytes_report("moved", &moved_path);
    let b_limit = bytes_report("limit", limit_db);
    println!(
        "bytes/message vs limit: corpus {:.2}x, today rebuilt {:.2}x, moved {:.2}x (moved - today {:+.0} B)",
        b_corpus / b_limit,
        b_today / b_limit,
        b_moved / b_limit,
        b_moved - b_today
    );

    let corpus = open(db, false);
    let today = open(&today_path, false);
    let moved = open(&moved_path, false);
    let lim = open(limit_db, false);

    // Both indexes hold the same rows, and the views the same texts.
    for table in ["parts_fts_docsize", "parts_fts_trigram_docsize"] {
        let sql = format!("SELECT count(*) FROM {table}");
        let a: i64 = today.query_row(&sql, [], |r| r.get(0)).unwrap();
        let b: i64 = moved.query_row(&sql, [], |r| r.get(0)).unwrap();
        println!("{table}: today {a} rows, moved {b} rows");
        assert_eq!(a, b);
    }
    let seqs: Vec<i64> = today
        .prepare("SELECT seq FROM parts WHERE type = 'text' OR type = 'reasoning' OR type = 'tool' ORDER BY seq")
        .unwrap()
        .query_map([], |r| r.get(0))
        .unwrap()
        .map(Result::unwrap)
        .collect();
    let mut view_times = [Vec::new(), Vec::new()];
    for round in 0..4 {
        let mut sums = [0, 0];
        for k in 0..2 {
            let side = (round + k) % 2;
            let (t, sum) = view_read(if side == 0 { &today } else { &moved }, &seqs);
            view_times[side].push(t.as_secs_f64() * 1e9 / seqs.len() as f64);
            sums[side] = sum;
        }
        assert_eq!(sums[0], sums[1], "the views read different texts");
    }
    println!(
        "view read per searchable part ({} parts, 4 alternated rounds, median): today {:.0} ns, moved {:.0} ns",
        seqs.len(),
        median_f(&view_times[0]),
        median_f(&view_times[1])
    );

    // A search page, with and without snippet(), on both layouts.
    let qs = queries();
    for (trigram, e) in &qs {
        assert_eq!(
            search(&today, *trigram, e, true),
            search(&moved, *trigram, e, true),
            "different snippets for {e}"
        );
    }
    let mut st: [[Vec<Duration>; 2]; 2] = Default::default();
    for round in 0..5 {
        for (i, (trigram, e)) in qs.iter().enumerate() {
            for k in 0..4 {
                let which = (round + i + k) % 4;
                let (side, snippets) = (which / 2, which % 2 == 1);
                let c = if side == 0 { &today } else { &moved };
                let t = Instant::now();
                std::hint::black_box(search(c, *trigram, e, snippets));
                st[side][usize::from(snippets)].push(t.elapsed());
            }
        }
    }
    let sum_ms = |v: &[Duration]| v.iter().sum::<Duration>().as_secs_f64() * 1000.0 / 5.0;
    println!(
        "search page x{} queries (5 rounds, per round): today {:.1} ms with snippets, {:.1} ms without; moved {:.1} ms with, {:.1} ms without; snippets cost today {:.1} ms, moved {:.1} ms",
        qs.len(),
        sum_ms(&st[0][1]),
        sum_ms(&st[0][0]),
        sum_ms(&st[1][1]),
        sum_ms(&st[1][0]),
        sum_ms(&st[0][1]) - sum_ms(&st[0][0]),
        sum_ms(&st[1][1]) - sum_ms(&st[1][0]),
    );

    // What snippet() reads per hit: the hit's content through the view (the highlighting
    // after it is the same work on both layouts), for every hit of every page above.
    let mut hits: Vec<i64> = Vec::new();
    for (trigram, e) in &qs {
        let table = if *trigram {
            "parts_fts_trigram"
        } else {
            "parts_fts"
        };
        let sql =
            format!("SELECT rowid FROM {table} WHERE {table} MATCH ?1 ORDER BY rank LIMIT 20");
        hits.extend(
            today
                .prepare_cached(&sql)
                .unwrap()
                .query_map([e], |r| r.get::<_, i64>(0))
                .unwrap()
                .map(Result::unwrap),
        );
    }
    let mut page_times = [Vec::new(), Vec::new()];
    for round in 0..10 {
        for k in 0..2 {
            let side = (round + k) % 2;
            let (t, _) = view_read(if side == 0 { &today } else { &moved }, &hits);
            page_times[side].push(t.as_secs_f64() * 1e9 / hits.len() as f64);
        }
    }
    println!(
        "snippet's content read per hit ({} hits of {} pages, 10 alternated rounds, median): today {:.0} ns, moved {:.0} ns ({:+.0} ns/hit, {:+.3} ms per 20-hit page)",
        hits.len(),
        qs.len(),
        median_f(&page_times[0]),
        median_f(&page_times[1]),
        median_f(&page_times[1]) - median_f(&page_times[0]),
        (median_f(&page_times[1]) - median_f(&page_times[0])) * 20.0 / 1e6
    );

    // The load.
    let q = "SELECT session_id FROM messages GROUP BY session_id HAVING count(*) = 500 LIMIT 1";
    let s: String = corpus.query_row(q, [], |r| r.get(0)).unwrap();
    let ls: String = lim.query_row(q, [], |r| r.get(0)).unwrap();
    let plan: Vec<String> = moved
        .prepare(&format!("EXPLAIN QUERY PLAN {UNSETTLED}"))
        .unwrap()
        .query_map([&s], |r| r.get::<_, String>(3))
        .unwrap()
        .map(Result::unwrap)
        .collect();
    println!("unsettled probe plan: {}", plan.join("; "));
    assert_eq!(probe(&moved, &s), 0);
    let n = 20_000;
    let t = Instant::now();
    for _ in 0..n {
        std::hint::black_box(probe(&moved, &s));
    }
    let probe_us = t.elapsed().as_secs_f64() * 1e6 / f64::from(n);
    let t = Instant::now();
    for _ in 0..n {
        let tx = moved.unchecked_transaction().unwrap();
        tx.commit().unwrap();
    }
    let txn_us = t.elapsed().as_secs_f64() * 1e6 / f64::from(n);
    println!(
        "unsettled probe in its own read transaction: {probe_us:.2} us ({txn_us:.2} us of it BEGIN/COMMIT alone)"
    );

    type Case<'a> = (&'a str, Box<dyn Fn() -> usize + 'a>);
    let cases: Vec<Case<'_>> = vec![
        ("limit", Box::new(|| limit(&lim, &ls))),
        (
            "today (corpus, raw_load)",
            Box::new(|| raw_load::raw_load(&corpus, &s, true).unwrap()),
        ),
        (
            "today (rebuilt)",
            Box::new(|| raw_load::raw_load(&today, &s, true).unwrap()),
        ),
        (
            "moved (from_value)",
            Box::new(|| moved_load::<false>(&moved, &s)),
        ),
        (
            "moved (serde derive)",
            Box::new(|| moved_load::<true>(&moved, &s)),
        ),
        (
            "moved, 19 columns borrowed",
            Box::new(|| moved_borrowed(&moved, &s)),
        ),
        (
            "moved, limit's 6 columns",
            Box::new(|| moved_narrow(&moved, &s)),
        ),
    ];
    for (name, f) in &cases {
        assert_eq!(f(), 500, "{name}");
    }
    let repeats: usize = std::env::var("REPEATS").map_or(5, |n| n.parse().unwrap());
    let mut ratios: Vec<Vec<f64>> = vec![Vec::new(); cases.len()];
    for rep in 0..repeats {
        let mut times: Vec<Vec<Duration>> = vec![Vec::new(); cases.len()];
        for round in 0..150 {
            for k in 0..cases.len() {
                let i = (round + k) % cases.len();
                let t = Instant::now();
                std::hint::black_box((cases[i].1)());
                times[i].push(t.elapsed());
            }
        }
        let base = median_ms(&times[0]);
        let line = cases
            .iter()
            .zip(&times)
            .enumerate()
            .map(|(i, ((name, _), t))| {
                let m = median_ms(t);
                ratios[i].push(m / base);
                format!("{name} {m:.3} ms {:.2}x", m / base)
            })
            .collect::<Vec<_>>()
            .join(" | ");
        println!("load repeat {rep}: {line}");
    }
    for ((name, _), r) in cases.iter().zip(&ratios) {
        println!("load {name:26} {}", spread(r));
    }
}

/// Appends one message with one ~1 KB text part in one transaction: today's layout (the
/// part's JSON in its row) or the moved one (in the message's array, the part row thin).
fn append(c: &Connection, session: &str, i: usize, moved: bool) {
    let now = 1_700_000_000_000_i64 + i as i64;
    let mid = format!("msg_{moved}_{i:012}");
    let pid = format!("prt_{moved}_{i:012}");
    let words = "the connection pool returned an error while the function read the config ";
    let data = serde_json::json!({"type": "text", "text": words.repeat(14)}).to_string();
    let tx = c.unchecked_transaction().unwrap();
    if moved {
        let parts = format!("[[{},{data},{now}]]", serde_json::to_string(&pid).unwrap());
        tx.prepare_cached(&format!(
            "INSERT INTO messages ({MSG_COLS}, parts) VALUES (?1, ?2, NULL, 'user', NULL, NULL, NULL, NULL, 0, 0, 0, 0, 0, 0, 0.0, NULL, ?3, ?3, NULL, ?4)"
        ))
        .unwrap()
        .execute(params![mid, session, now, parts])
        .unwrap();
        tx.prepare_cached(
            "INSERT INTO parts (id, message_id, session_id, position, type, data, created_at, updated_at) VALUES (?1, ?2, ?3, 0, 'text', NULL, ?4, ?4)",
        )
        .unwrap()
        .execute(params![pid, mid, session, now])
        .unwrap();
    } else {
        tx.prepare_cached(&format!(
            "INSERT INTO messages ({MSG_COLS}) VALUES (?1, ?2, NULL, 'user', NULL, NULL, NULL, NULL, 0, 0, 0, 0, 0, 0, 0.0, NULL, ?3, ?3, NULL)"
        ))
        .unwrap()
        .execute(params![mid, session, now])
        .unwrap();
        tx.prepare_cached(
            "INSERT INTO parts (id, message_id, session_id, position, type, data, created_at, updated_at) VALUES (?1, ?2, ?3, 0, 'text', ?4, ?5, ?5)",
        )
        .unwrap()
        .execute(params![pid, mid, session, data, now])
        .unwrap();
    }
    tx.commit().unwrap();
}

/// A 10 KB reply streamed in 100 flushes, each its own transaction: the message and its
/// part inserted with the first piece, each further piece an UPDATE of the part row (in
/// both layouts: an unsettled part's JSON is in its row). The moved layout then settles
/// the part (its JSON moved into the message's array, the part row's `data` set NULL, one
/// transaction), timed apart: returns (flushes, settle).
fn stream(
    c: &Connection,
    session: &str,
    i: usize,
    moved: bool,
    text: &str,
) -> (Duration, Duration) {
    let mid = format!("msg_s{moved}_{i:012}");
    let pid = format!("prt_s{moved}_{i:012}");
    let start = 1_800_000_000_000_i64 + i as i64 * 1000;
    let step = text.len() / 100;
    let t = Instant::now();
    let mut data = String::new();
    for k in 0..100 {
        let now = start + k as i64;
        let upto = if k == 99 { text.len() } else { (k + 1) * step };
        data = serde_json::json!({"type": "text", "text": &text[..upto], "time": {"start": start}})
            .to_string();
        let tx = c.unchecked_transaction().unwrap();
        if k == 0 {
            let cols = if moved {
                format!("{MSG_COLS}, parts")
            } else {
                MSG_COLS.to_owned()
            };
            let parts = if moved { ", '[null]'" } else { "" };
            tx.prepare_cached(&format!(
                "INSERT INTO messages ({cols}) VALUES (?1, ?2, NULL, 'assistant', NULL, NULL, 'm', NULL, 0, 0, 0, 0, 0, 0, 0.0, NULL, ?3, ?3, NULL{parts})"
            ))
            .unwrap()
            .execute(params![mid, session, now])
            .unwrap();
            tx.prepare_cached(
                "INSERT INTO parts (id, message_id, session_id, position, type, data, created_at, updated_at) VALUES (?1, ?2, ?3, 0, 'text', ?4, ?5, ?5)",
            )
            .unwrap()
            .execute(params![pid, mid, session, data, now])
            .unwrap();
        } else {
            tx.prepare_cached(
                "UPDATE parts SET type = 'text', data = ?1, updated_at = ?2 WHERE id = ?3",
            )
            .unwrap()
            .execute(params![data, now, pid])
            .unwrap();
        }
        tx.commit().unwrap();
    }
    let flushes = t.elapsed();
    if !moved {
        return (flushes, Duration::ZERO);
    }
    let now = start + 100;
    let t = Instant::now();
    let tx = c.unchecked_transaction().unwrap();
    let n = tx
        .prepare_cached(
            "UPDATE messages SET parts = json_set(parts, '$[' || ?2 || ']', json_array(?3, json(?4), ?5, ?6)), updated_at = ?6 WHERE id = ?1",
        )
        .unwrap()
        .execute(params![mid, 0, pid, data, start, now])
        .unwrap();
    assert_eq!(n, 1);
    tx.prepare_cached("UPDATE parts SET data = NULL, updated_at = ?2 WHERE id = ?1")
        .unwrap()
        .execute(params![pid, now])
        .unwrap();
    tx.commit().unwrap();
    (flushes, t.elapsed())
}

fn append_mode(dir: &str) {
    let n: usize = std::env::var("N").map_or(4000, |n| n.parse().unwrap());
    let repeats: usize = std::env::var("REPEATS").map_or(3, |n| n.parse().unwrap());
    let streams: usize = std::env::var("STREAMS").map_or(30, |n| n.parse().unwrap());
    let mut rates: [Vec<f64>; 2] = Default::default();
    let mut bytes = [0.0; 2];
    for rep in 0..repeats {
        let mut conns = Vec::new();
        for moved in [false, true] {
            let path = format!("{dir}/append-moved-{moved}.db");
            fresh(&path);
            let db =
                std::sync::Arc::new(scribe_db::Database::open_with(&path, no_indexer()).unwrap());
            let sessions = scribe_session::SessionService::new(db);
            let s = sessions
                .create(scribe_session::NewSession::default())
                .unwrap()
                .id;
            drop(sessions);
            let c = open(&path, true);
            c.pragma_update(None, "journal_mode", "wal").unwrap();
            c.pragma_update(None, "synchronous", "normal").unwrap();
            if moved {
                make_moved(&c);
                // `NO_UNSETTLED_INDEX=1`: without the partial index (which every flush of
                // `data` updates), to see what it costs a flush.
                if std::env::var("NO_UNSETTLED_INDEX").is_ok() {
                    c.execute_batch("DROP INDEX parts_unsettled").unwrap();
                }
            }
            c.pragma_update(None, "foreign_keys", true).unwrap();
            conns.push((c, s, path));
        }
        let mut times = [Duration::ZERO; 2];
        for block in 0..n / 100 {
            for k in 0..2 {
                let side = (block + k) % 2;
                let (c, s, _) = &conns[side];
                let t = Instant::now();
                for i in 0..100 {
                    append(c, s, block * 100 + i, side == 1);
                }
                times[side] += t.elapsed();
            }
        }
        for side in 0..2 {
            rates[side].push(n as f64 / times[side].as_secs_f64());
            let (c, _, path) = &conns[side];
            c.execute_batch("PRAGMA wal_checkpoint(TRUNCATE)").unwrap();
            bytes[side] = std::fs::metadata(path).unwrap().len() as f64 / n as f64;
        }
        println!(
            "append repeat {rep}: today {:.0} msg/s, moved {:.0} msg/s ({:+.1}%)",
            rates[0][rep],
            rates[1][rep],
            (rates[1][rep] / rates[0][rep] - 1.0) * 100.0
        );
        if rep + 1 == repeats {
            let text = "the connection pool returned an error while the function read the config "
                .repeat(140);
            let text = &text[..10_000];
            let mut flush: [Vec<Duration>; 2] = Default::default();
            let mut settles = Vec::new();
            for i in 0..streams {
                for k in 0..2 {
                    let side = (i + k) % 2;
                    let (c, s, _) = &conns[side];
                    let (f, settle) = stream(c, s, i, side == 1, text);
                    flush[side].push(f);
                    if side == 1 {
                        settles.push(settle);
                    }
                }
            }
            let pending: i64 = conns[1]
                .0
                .query_row(
                    "SELECT count(*) FROM parts WHERE data IS NOT NULL",
                    [],
                    |r| r.get(0),
                )
                .unwrap();
            assert_eq!(pending, 0);
            println!(
                "stream 10 KB in 100 flushes ({streams} each, median): today {:.2} ms, moved {:.2} ms; moved's settle {:.3} ms (one append: today {:.3} ms)",
                median_ms(&flush[0]),
                median_ms(&flush[1]),
                median_ms(&settles),
                1000.0 / rates[0][rep]
            );
        }
    }
    let ratios: Vec<f64> = rates[1].iter().zip(&rates[0]).map(|(m, t)| m / t).collect();
    println!(
        "append moved/today rate: {} ; whole file per appended message: today {:.0} B, moved {:.0} B",
        spread(&ratios),
        bytes[0],
        bytes[1]
    );
}

/// `MODE=index`: both FTS5 indexes rebuilt from their content views (`'rebuild'`: one scan
/// of the view, every text tokenized again) on copies of the two rebuilt files, alternated,
/// `REPEATS` (default 3) times: what reading the content through the moved view costs the
/// indexer per part, against the tokenizing it comes with.
fn index_mode(dir: &str) {
    let repeats: usize = std::env::var("REPEATS").map_or(3, |n| n.parse().unwrap());
    let mut conns = Vec::new();
    for name in ["moved-today", "moved"] {
        let copy = format!("{dir}/{name}-rebuild.db");
        std::fs::copy(format!("{dir}/{name}.db"), &copy).unwrap();
        let c = open(&copy, true);
        c.pragma_update(None, "journal_mode", "wal").unwrap();
        c.pragma_update(None, "synchronous", "normal").unwrap();
        conns.push(c);
    }
    let parts: i64 = conns[0]
        .query_row("SELECT count(*) FROM parts_fts_docsize", [], |r| r.get(0))
        .unwrap();
    let mut times: [[Vec<f64>; 2]; 2] = Default::default();
    for round in 0..repeats {
        for k in 0..2 {
            let side = (round + k) % 2;
            for (t, table) in ["parts_fts", "parts_fts_trigram"].iter().enumerate() {
                let start = Instant::now();
                conns[side]
                    .execute_batch(&format!("INSERT INTO {table} ({table}) VALUES ('rebuild')"))
                    .unwrap();
                times[side][t].push(start.elapsed().as_secs_f64() * 1e6 / parts as f64);
            }
        }
    }
    for (t, table) in ["parts_fts (words)", "parts_fts_trigram"]
        .iter()
        .enumerate()
    {
        let each = |v: &[f64]| {
            v.iter()
                .map(|x| format!("{x:.0}"))
                .collect::<Vec<_>>()
                .join(" ")
        };
        println!(
            "rebuild {table} rounds, us/part: today {}; moved {}",
            each(&times[0][t]),
            each(&times[1][t])
        );
        println!(
            "rebuild {table} over {parts} searchable parts, us/part (median of {repeats}): today {:.2}, moved {:.2} ({:+.0}%)",
            median_f(&times[0][t]),
            median_f(&times[1][t]),
            (median_f(&times[1][t]) / median_f(&times[0][t]) - 1.0) * 100.0
        );
    }
    drop(conns);
    for name in ["moved-today", "moved"] {
        for suffix in ["", "-wal", "-shm"] {
            let _ = std::fs::remove_file(format!("{dir}/{name}-rebuild.db{suffix}"));
        }
    }
}

fn main() {
    let a: Vec<String> = std::env::args().collect();
    if std::env::var("MODE").is_ok_and(|m| m == "index") {
        index_mode(&a[1]);
        return;
    }
    if std::env::var("MODE").is_ok_and(|m| m == "append") {
        append_mode(&a[1]);
        return;
    }
    reads(&a[1], &a[2]);
}
