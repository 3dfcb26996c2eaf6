//! Reads on the corpus: search (`MessageService::search` against one raw FTS5 statement on
//! the same index with the same limit), loading a whole session (`MessageService::list`
//! against the same two statements read raw, parts decoded the same way) and `context()`
//! of a long and a short history with the same tail after the summary.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use rusqlite::{Connection, OpenFlags};
use scribe_agent::{HeuristicEstimator, context};
use scribe_db::Options;
use scribe_db::queries as q;
use scribe_message::{MessageService, SearchOptions, SearchQuery};
use scribe_session::Store;
use serde::Serialize;

use crate::Result;
use crate::corpus::Corpus;
use crate::data::RARE;
use crate::stats::{self, median, ms, percentile};

/// The same design's load, shared with `examples/load_profile.rs`.
#[path = "raw_load.rs"]
mod raw;

use raw::{RAW_LIST_MESSAGES, RAW_LIST_PARTS};

/// The hits a caller needs (message, session, role, time, snippet, rank, session source,
/// model and title), best rank first, from the word index.
const RAW_WORDS: &str = "SELECT p.message_id, p.session_id, m.role, m.created_at,
    snippet(parts_fts, 0, '>>>', '<<<', '…', 24), parts_fts.rank, s.source, s.model, s.title
FROM parts_fts JOIN parts AS p ON p.seq = parts_fts.rowid
JOIN messages AS m ON m.id = p.message_id JOIN sessions AS s ON s.id = p.session_id
WHERE parts_fts MATCH ?1 ORDER BY parts_fts.rank LIMIT ?2";

/// [`RAW_WORDS`] on the trigram index (CJK).
const RAW_TRIGRAMS: &str = "SELECT p.message_id, p.session_id, m.role, m.created_at,
    snippet(parts_fts_trigram, 0, '>>>', '<<<', '…', 24), parts_fts_trigram.rank,
    s.source, s.model, s.title
FROM parts_fts_trigram JOIN parts AS p ON p.seq = parts_fts_trigram.rowid
JOIN messages AS m ON m.id = p.message_id JOIN sessions AS s ON s.id = p.session_id
WHERE parts_fts_trigram MATCH ?1 ORDER BY parts_fts_trigram.rank LIMIT ?2";

/// Hits of search.
const LIMIT: usize = 20;

/// The query mix: six kinds, cycled.
pub(crate) fn query_mix(count: usize) -> Vec<(&'static str, &'static str)> {
    let kinds: [(&str, &[&str]); 6] = [
        (
            "common word",
            &["error", "function", "database", "session", "config"],
        ),
        ("rare word", RARE),
        (
            "two words",
            &[
                "connection timeout",
                "retry cache",
                "server panic",
                "merge review",
                "handle_request memory",
            ],
        ),
        (
            "phrase",
            &[
                "\"connection pool\"",
                "\"error function\"",
                "\"handle_request\"",
                "\"src/db/pool.rs\"",
            ],
        ),
        ("prefix", &["conf*", "migr*", "perm*", "bench*", "sock*"]),
        (
            "cjk",
            &["数据库", "连接池", "中文文本", "データベース", "部署失败"],
        ),
    ];
    (0..count)
        .map(|i| {
            let (kind, list) = kinds[i % kinds.len()];
            (kind, list[(i / kinds.len()) % list.len()])
        })
        .collect()
}

/// Search figures, all times in ms. The medians and 95th percentiles are over the word
/// queries (common and rare words, two words, phrases, prefixes: what the limit can
/// answer); the CJK queries have their own figures.
#[derive(Debug, Clone, Serialize)]
pub struct SearchResult {
    /// Queries run (word and CJK).
    pub queries: usize,
    /// Hits asked for.
    pub limit: usize,
    /// `MessageService::search` median.
    pub scribe_median_ms: f64,
    /// `MessageService::search` 95th percentile.
    pub scribe_p95_ms: f64,
    /// The limit's search median.
    pub limit_median_ms: f64,
    /// The limit's search 95th percentile.
    pub limit_p95_ms: f64,
    /// Raw FTS5 on Scribe's index (same design), median.
    pub raw_median_ms: f64,
    /// Raw FTS5 on Scribe's index, 95th percentile.
    pub raw_p95_ms: f64,
    /// CJK queries: `MessageService::search` median.
    pub cjk_scribe_median_ms: f64,
    /// CJK queries: raw FTS5 on Scribe's trigram index, median.
    pub cjk_raw_median_ms: f64,
    /// Per kind of query: `(scribe median, limit median (0 for CJK), raw median, hits)`.
    pub by_kind: BTreeMap<String, (f64, f64, f64, usize)>,
}

/// A read-only raw connection with `Database`'s cache size.
fn raw_reader(path: &std::path::Path) -> Result<Connection> {
    let conn = Connection::open_with_flags(
        path,
        OpenFlags::SQLITE_OPEN_READ_ONLY | OpenFlags::SQLITE_OPEN_NO_MUTEX,
    )?;
    conn.pragma_update(None, "cache_size", -Options::default().cache_kib)?;
    Ok(conn)
}

/// One raw search: the same sanitized expression, one statement, rows read into tuples.
fn raw_search(conn: &Connection, query: &str) -> Result<usize> {
    let (sql, expr) = match SearchQuery::parse(query) {
        SearchQuery::Fts(e) => (RAW_WORDS, e),
        SearchQuery::Trigram(e) => (RAW_TRIGRAMS, e),
        // The mix has no 1–2 character CJK queries (the LIKE route).
        SearchQuery::Like(_) | SearchQuery::Empty => return Ok(0),
    };
    let mut stmt = conn.prepare_cached(sql)?;
    let rows = stmt.query_map(rusqlite::params![expr, LIMIT as i64], |r| {
        Ok((
            r.get::<_, String>(0)?,
            r.get::<_, String>(1)?,
            r.get::<_, String>(2)?,
            r.get::<_, i64>(3)?,
            r.get::<_, String>(4)?,
            r.get::<_, f64>(5)?,
            r.get::<_, String>(6)?,
            r.get::<_, Option<String>>(7)?,
            r.get::<_, Option<String>>(8)?,
        ))
    })?;
    Ok(rows.collect::<rusqlite::Result<Vec<_>>>()?.len())
}

/// Times of one kind of query: Scribe, the limit, raw.
type KindTimes = (Vec<Duration>, Vec<Duration>, Vec<Duration>);

/// Runs `count` mixed queries through every path (after one warm-up pass).
pub fn search(corpus: &Corpus, svc: &MessageService, count: usize) -> Result<SearchResult> {
    let raw = raw_reader(&corpus.path)?;
    let limit = raw_reader(&corpus.limit_path)?;
    let options = SearchOptions {
        limit: LIMIT,
        ..SearchOptions::default()
    };
    let queries = query_mix(count);
    let limit_expr = |query: &str| match SearchQuery::parse(query) {
        SearchQuery::Fts(e) => Some(e),
        _ => None,
    };
    let mut hits = BTreeMap::new();
    for (kind, query) in &queries {
        let n = svc.search(query, &options)?.len();
        raw_search(&raw, query)?;
        if let Some(expr) = limit_expr(query) {
            crate::limit::search(&limit, &expr)?;
        }
        *hits.entry(*kind).or_insert(0) += n;
    }
    let (mut ours, mut theirs, mut limits) = (Vec::new(), Vec::new(), Vec::new());
    let (mut cjk_ours, mut cjk_raw) = (Vec::new(), Vec::new());
    let mut kinds: BTreeMap<&str, KindTimes> = BTreeMap::new();
    for (i, (kind, query)) in queries.iter().enumerate() {
        let expr = limit_expr(query);
        let mut times = [Duration::ZERO; 3];
        // Rotate which side goes first so none always finds the warmest cache.
        for side in 0..3 {
            let which = (i + side) % 3;
            let t = Instant::now();
            match which {
                0 => {
                    std::hint::black_box(svc.search(query, &options)?);
                }
                1 => {
                    if let Some(expr) = &expr {
                        std::hint::black_box(crate::limit::search(&limit, expr)?);
                    }
                }
                _ => {
                    std::hint::black_box(raw_search(&raw, query)?);
                }
            }
            times[which] = t.elapsed();
        }
        let entry = kinds.entry(kind).or_default();
        entry.0.push(times[0]);
        entry.1.push(times[1]);
        entry.2.push(times[2]);
        if expr.is_some() {
            ours.push(times[0]);
            limits.push(times[1]);
            theirs.push(times[2]);
        } else {
            cjk_ours.push(times[0]);
            cjk_raw.push(times[2]);
        }
    }
    Ok(SearchResult {
        queries: queries.len(),
        limit: LIMIT,
        scribe_median_ms: ms(median(&ours)),
        scribe_p95_ms: ms(percentile(&ours, 0.95)),
        limit_median_ms: ms(median(&limits)),
        limit_p95_ms: ms(percentile(&limits, 0.95)),
        raw_median_ms: ms(median(&theirs)),
        raw_p95_ms: ms(percentile(&theirs, 0.95)),
        cjk_scribe_median_ms: ms(median(&cjk_ours)),
        cjk_raw_median_ms: ms(median(&cjk_raw)),
        by_kind: kinds
            .into_iter()
            .map(|(kind, (a, b, c))| {
                let n = hits.get(kind).copied().unwrap_or(0);
                (
                    kind.to_owned(),
                    (ms(median(&a)), ms(median(&b)), ms(median(&c)), n),
                )
            })
            .collect(),
    })
}

/// Loading one session, medians in ms.
#[derive(Debug, Clone, Serialize)]
pub struct LoadResult {
    /// Messages in the session.
    pub messages: usize,
    /// Rounds timed.
    pub rounds: usize,
    /// `MessageService::list`.
    pub scribe_ms: f64,
    /// The limit: one statement, each message's parts array decoded.
    pub limit_ms: f64,
    /// Scribe's statements in one read transaction, parts decoded with serde.
    pub raw_ms: f64,
}

/// Loads the corpus's load session `rounds` times each way.
pub fn load(corpus: &Corpus, svc: &MessageService, rounds: usize) -> Result<LoadResult> {
    for (name, raw, generated) in [
        ("ListMessages", RAW_LIST_MESSAGES, q::LIST_MESSAGES_SQL),
        (
            "ListSessionPartData",
            RAW_LIST_PARTS,
            q::LIST_SESSION_PART_DATA_SQL,
        ),
    ] {
        if raw != generated {
            return Err(format!("raw SQL of {name} drifted from sql/queries").into());
        }
    }
    let raw = raw_reader(&corpus.path)?;
    let limit = raw_reader(&corpus.limit_path)?;
    let session = corpus.load_session.as_str();
    let limit_session = corpus.limit_load_session.as_str();
    let messages = svc.list(session)?.len();
    let raw_messages = raw::raw_load(&raw, session, true)?;
    if raw_messages != messages {
        return Err(format!("raw load found {raw_messages} messages, list {messages}").into());
    }
    let limit_messages = crate::limit::load(&limit, limit_session)?;
    if limit_messages != messages {
        return Err(format!("the limit loaded {limit_messages} messages, list {messages}").into());
    }
    let (mut ours, mut theirs, mut limits) = (Vec::new(), Vec::new(), Vec::new());
    for i in 0..rounds {
        for side in 0..3 {
            let t = Instant::now();
            match (i + side) % 3 {
                0 => {
                    std::hint::black_box(svc.list(session)?);
                    ours.push(t.elapsed());
                }
                1 => {
                    std::hint::black_box(crate::limit::load(&limit, limit_session)?);
                    limits.push(t.elapsed());
                }
                _ => {
                    std::hint::black_box(raw::raw_load(&raw, session, true)?);
                    theirs.push(t.elapsed());
                }
            }
        }
    }
    Ok(LoadResult {
        messages,
        rounds,
        scribe_ms: ms(median(&ours)),
        limit_ms: ms(median(&limits)),
        raw_ms: ms(median(&theirs)),
    })
}

/// `context()` of the long and the short session, medians in ms.
#[derive(Debug, Clone, Serialize)]
pub struct ContextResult {
    /// Messages of the long session.
    pub long_messages: usize,
    /// Messages of the short session.
    pub short_messages: usize,
    /// Messages loaded by `context()` (the same for both: the summary and what follows).
    pub loaded_messages: usize,
    /// Rounds timed.
    pub rounds: usize,
    /// `context()` of the long session.
    pub long_ms: f64,
    /// `context()` of the short session.
    pub short_ms: f64,
    /// Loading the whole long session with `list`, for scale.
    pub long_full_list_ms: f64,
}

/// Times `context()` on both context sessions.
pub fn context_time(
    corpus: &Corpus,
    store: &Store,
    shape: (usize, usize),
    rounds: usize,
) -> Result<ContextResult> {
    let estimator = HeuristicEstimator;
    let long = context(store, &corpus.long_session, &estimator)?;
    let short = context(store, &corpus.short_session, &estimator)?;
    if long.loaded_messages != short.loaded_messages {
        return Err(format!(
            "context loaded {} messages of the long session, {} of the short one",
            long.loaded_messages, short.loaded_messages
        )
        .into());
    }
    let (mut a, mut b, mut full) = (Vec::new(), Vec::new(), Vec::new());
    for _ in 0..rounds {
        let t = Instant::now();
        std::hint::black_box(context(store, &corpus.long_session, &estimator)?);
        a.push(t.elapsed());
        let t = Instant::now();
        std::hint::black_box(context(store, &corpus.short_session, &estimator)?);
        b.push(t.elapsed());
    }
    for _ in 0..rounds.clamp(1, 5) {
        let t = Instant::now();
        std::hint::black_box(store.messages().list(&corpus.long_session)?);
        full.push(t.elapsed());
    }
    Ok(ContextResult {
        long_messages: shape.0,
        short_messages: shape.1,
        loaded_messages: long.loaded_messages,
        rounds,
        long_ms: ms(median(&a)),
        short_ms: ms(median(&b)),
        long_full_list_ms: ms(stats::median(&full)),
    })
}
