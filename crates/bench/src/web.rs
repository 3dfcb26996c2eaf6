//! The web viewer (`scribe serve`, crates/server) at size, in server time: requests over
//! loopback HTTP to a server running in this process, the way the page asks them, each
//! timed from connect to the last byte of the answer.
//!
//! The database: 100,000 sessions (10% of them sub-agent children, 2% archived, spread
//! over a year, with sources, models and usage) and 100,000 messages, one conversation of
//! 2,000 of them. Rows:
//! - a page of 50 of the session list: the first, one half-way down (keyset), and the
//!   first sorted by cost (a sort over every session), against the list's bare SELECT read
//!   raw;
//! - the 2,000-message conversation: its first page of 100, and all of it page by page;
//! - search as you type: each prefix of a few words as the page sends it (`c`, `co`,
//!   `con*`, `conn*` …, with `rank=recent`: the best of the newest
//!   `scribe_message::TYPING_WINDOW` matches) as one request, against
//!   `MessageService::search` called directly for the same strings; and the same strings
//!   as Enter sends them (ranked over the whole history).

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use scribe_db::ids::{Prefix, new_id};
use scribe_db::queries as q;
use scribe_message::{MessageService, SearchOptions};
use scribe_server::{Config, Server};
use serde::Serialize;
use serde_json::Value;

use crate::Result;
use crate::corpus::{self, Shape};
use crate::stats::{median, ms, percentile};

/// The list's query for its first page, written out by hand (what
/// `scribe_db::filters::list_sessions` builds for the default filters, `+` included).
const RAW_FIRST_PAGE: &str = "SELECT * FROM sessions WHERE +parent_session_id IS NULL \
     AND archived_at IS NULL ORDER BY created_at DESC, id DESC LIMIT 51";

/// What is typed, a keystroke at a time.
const TYPED: [&str; 5] = [
    "connection",
    "database",
    "timeout",
    "handle_request",
    "数据库",
];

/// How big the web benchmark is.
#[derive(Debug, Clone, Copy, Serialize)]
pub struct WebSizes {
    /// Sessions in all.
    pub sessions: usize,
    /// Messages in all.
    pub messages: usize,
    /// Messages of the conversation read page by page.
    pub conversation: usize,
    /// Timed repetitions of each request.
    pub rounds: usize,
}

impl WebSizes {
    /// The report's sizes, or a smoke run's.
    pub fn new(quick: bool) -> Self {
        if quick {
            WebSizes {
                sessions: 5_000,
                messages: 5_000,
                conversation: 500,
                rounds: 10,
            }
        } else {
            WebSizes {
                sessions: 100_000,
                messages: 100_000,
                conversation: 2_000,
                rounds: 50,
            }
        }
    }
}

/// The figures, times in ms.
#[derive(Debug, Clone, Serialize)]
pub struct WebResult {
    /// Sizes.
    pub sizes: WebSizes,
    /// Top-level, unarchived sessions (what the list shows).
    pub listed: usize,
    /// Building the database, s.
    pub build_s: f64,
    /// First page of 50, median.
    pub list_first_ms: f64,
    /// The same page's query read raw, median.
    pub list_first_raw_ms: f64,
    /// How far down the deep page starts.
    pub deep_position: usize,
    /// A page of 50 starting there, median.
    pub list_deep_ms: f64,
    /// Walking to it in pages of 200: requests and total.
    pub walk_pages: usize,
    /// Total of that walk.
    pub walk_ms: f64,
    /// First page sorted by cost, median.
    pub list_cost_ms: f64,
    /// The conversation's first page of 100, median.
    pub conversation_first_ms: f64,
    /// All of it in pages of 100: pages.
    pub conversation_pages: usize,
    /// All of it, median of the totals.
    pub conversation_all_ms: f64,
    /// Keystrokes timed.
    pub keystrokes: usize,
    /// One keystroke's search over HTTP, median.
    pub keystroke_median_ms: f64,
    /// 95th percentile.
    pub keystroke_p95_ms: f64,
    /// The slowest keystrokes (what the p95 is made of): the typed string and its median
    /// over HTTP, slowest first, at most eight.
    pub keystroke_slowest: Vec<(String, f64)>,
    /// `MessageService::search` for the same strings, median.
    pub keystroke_service_median_ms: f64,
    /// The same strings ranked over the whole history (what Enter asks), median.
    pub enter_median_ms: f64,
    /// 95th percentile.
    pub enter_p95_ms: f64,
}

/// `GET path` from `addr`; the JSON answer and how long it took.
fn get(addr: SocketAddr, path: &str) -> Result<(Value, Duration)> {
    let started = Instant::now();
    let mut stream = TcpStream::connect(addr)?;
    write!(
        stream,
        "GET {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\r\n"
    )?;
    let mut raw = Vec::new();
    stream.read_to_end(&mut raw)?;
    let took = started.elapsed();
    let split = raw
        .windows(4)
        .position(|w| w == b"\r\n\r\n")
        .ok_or("no HTTP head")?;
    let head = String::from_utf8_lossy(&raw[..split]);
    if !head.starts_with("HTTP/1.1 200") {
        return Err(format!("GET {path}: {head}").into());
    }
    Ok((serde_json::from_slice(&raw[split + 4..])?, took))
}

fn timed(rounds: usize, mut f: impl FnMut() -> Result<Duration>) -> Result<f64> {
    let samples = (0..rounds).map(|_| f()).collect::<Result<Vec<_>>>()?;
    Ok(ms(median(&samples)))
}

/// Adds sessions until there are `total`: sources, models, a year of creation times,
/// usage, some sub-agent children and archived ones.
fn add_sessions(db: &scribe_db::Database, have: usize, total: usize, seed: u64) -> Result<()> {
    let mut rng = StdRng::seed_from_u64(seed ^ 0x5e55);
    let sources = ["cli", "tui", "telegram", "slack", "claude-code", "codex"];
    let models = [
        "anthropic/claude-sonnet-4",
        "anthropic/claude-haiku",
        "openai/gpt-5",
    ];
    let start = scribe_db::now_ms() - 365 * 86_400_000;
    let mut ids: Vec<String> = Vec::with_capacity(total);
    let mut made = have;
    while made < total {
        let batch = (total - made).min(10_000);
        db.write(|tx| -> scribe_db::Result<()> {
            for i in 0..batch {
                let id = new_id(Prefix::Session);
                let n = made + i;
                let at = start + (n as i64) * (365 * 86_400_000 / total as i64);
                let parent = (rng.random_range(0..10) == 0 && !ids.is_empty())
                    .then(|| ids[rng.random_range(0..ids.len())].clone());
                let title = format!("bench web session {n}");
                tx.q().create_session(&q::CreateSessionParams {
                    parent_session_id: parent.as_deref(),
                    kind: if parent.is_some() { "task" } else { "normal" },
                    directory: Some(if n.is_multiple_of(3) {
                        "/src/app"
                    } else {
                        "/src/lib"
                    }),
                    title: Some(&title),
                    model: Some(models[n % models.len()]),
                    ..scribe_db::testing::bare_session(&id, sources[n % sources.len()], at)
                })?;
                let input = rng.random_range(1_000..200_000);
                tx.q()
                    .add_session_usage_delta(&q::AddSessionUsageDeltaParams {
                        input_tokens: input,
                        output_tokens: input / 20,
                        cache_read_tokens: input / 2,
                        cache_write_tokens: 0,
                        reasoning_tokens: 0,
                        api_call_count: rng.random_range(1..40),
                        tool_call_count: 0,
                        estimated_cost_usd: input as f64 * 3e-6,
                        now: at + 60_000,
                        id: &id,
                    })?;
                if rng.random_range(0..50) == 0 {
                    tx.q().archive_session(&q::ArchiveSessionParams {
                        now: at + 120_000,
                        id: &id,
                    })?;
                }
                if parent.is_none() {
                    ids.push(id);
                }
            }
            Ok(())
        })?;
        made += batch;
    }
    Ok(())
}

/// Runs the web benchmark in `dir`.
pub fn run(dir: &Path, quick: bool, seed: u64) -> Result<WebResult> {
    let sizes = WebSizes::new(quick);
    let started = Instant::now();
    let path = dir.join("web.db");
    let shape = Shape {
        messages: sizes.messages,
        sessions: if quick { 100 } else { 1_000 },
        load_messages: sizes.conversation,
        long_messages: if quick { 300 } else { 1_000 },
        short_messages: if quick { 150 } else { 500 },
        summary_back: 100,
    };
    let corpus = corpus::build(&path, &dir.join("web-limit.db"), shape, seed)?;
    add_sessions(&corpus.db, shape.sessions, sizes.sessions, seed)?;
    let raw = rusqlite::Connection::open(&path)?;
    raw.query_row("PRAGMA wal_checkpoint(TRUNCATE)", [], |_| Ok(()))?;
    let listed: usize = raw.query_row(
        "SELECT count(*) FROM sessions WHERE parent_session_id IS NULL AND archived_at IS NULL",
        [],
        |row| row.get(0),
    )?;
    let build_s = started.elapsed().as_secs_f64();

    let server = Server::bind(Config {
        db: path.clone(),
        addr: "127.0.0.1:0".into(),
        token: None,
    })?;
    let addr = server.local_addr();
    let stop = server.stop_handle();
    let serving = std::thread::spawn(move || server.run());
    let outcome = measure(addr, &raw, &corpus, sizes, listed);
    stop.stop();
    let _ = serving.join();
    let mut result = outcome?;
    result.build_s = build_s;
    Ok(result)
}

fn measure(
    addr: SocketAddr,
    raw: &rusqlite::Connection,
    corpus: &corpus::Corpus,
    sizes: WebSizes,
    listed: usize,
) -> Result<WebResult> {
    let rounds = sizes.rounds;
    // Warm both sides once.
    get(addr, "/api/sessions?limit=50")?;
    let list_first_ms = timed(rounds, || Ok(get(addr, "/api/sessions?limit=50")?.1))?;
    let mut stmt = raw.prepare(RAW_FIRST_PAGE)?;
    let list_first_raw_ms = timed(rounds, || {
        let t = Instant::now();
        let rows = stmt.query_map([], |row| row.get::<_, String>(0))?.count();
        if rows == 0 {
            return Err("the raw first page is empty".into());
        }
        Ok(t.elapsed())
    })?;

    // Half-way down the list, in pages of 200.
    let (mut cursor, mut position, mut walk_pages) = (None::<String>, 0, 0);
    let walk_started = Instant::now();
    while position < listed / 2 {
        let path = match &cursor {
            Some(c) => format!("/api/sessions?limit=200&after={c}"),
            None => "/api/sessions?limit=200".to_owned(),
        };
        let (page, _) = get(addr, &path)?;
        walk_pages += 1;
        position += page["sessions"].as_array().map_or(0, Vec::len);
        match page["next"].as_str() {
            Some(next) => cursor = Some(next.to_owned()),
            None => break,
        }
    }
    let walk_ms = ms(walk_started.elapsed());
    let deep = match &cursor {
        Some(c) => format!("/api/sessions?limit=50&after={c}"),
        None => "/api/sessions?limit=50".to_owned(),
    };
    let list_deep_ms = timed(rounds, || Ok(get(addr, &deep)?.1))?;
    let list_cost_ms = timed(rounds, || {
        Ok(get(addr, "/api/sessions?limit=50&sort=cost")?.1)
    })?;

    let conversation = &corpus.load_session;
    let first = format!("/api/sessions/{conversation}/messages?limit=100");
    let conversation_first_ms = timed(rounds, || Ok(get(addr, &first)?.1))?;
    let mut conversation_pages = 0;
    let conversation_all_ms = timed(rounds.div_ceil(5), || {
        let mut total = Duration::ZERO;
        let mut after: Option<String> = None;
        conversation_pages = 0;
        loop {
            let path = match &after {
                Some(id) => format!("/api/sessions/{conversation}/messages?limit=100&after={id}"),
                None => first.clone(),
            };
            let (page, took) = get(addr, &path)?;
            total += took;
            conversation_pages += 1;
            if page["more_after"] != Value::Bool(true) {
                return Ok(total);
            }
            after = page["messages"]
                .as_array()
                .and_then(|m| m.last())
                .and_then(|m| m["id"].as_str())
                .map(str::to_owned);
        }
    })?;

    // As the page sends them: a word of three or more letters being typed is a prefix.
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
    let encode = |s: &str| -> String { s.bytes().map(|b| format!("%{b:02X}")).collect() };
    let mut samples = Vec::new();
    let mut per_keystroke = vec![Vec::new(); keystrokes.len()];
    for _ in 0..rounds.div_ceil(10) {
        for (i, typed) in keystrokes.iter().enumerate() {
            let took = get(
                addr,
                &format!("/api/search?q={}&limit=50&rank=recent", encode(typed)),
            )?
            .1;
            samples.push(took);
            per_keystroke[i].push(took);
        }
    }
    let mut keystroke_slowest: Vec<(String, f64)> = keystrokes
        .iter()
        .zip(&per_keystroke)
        .map(|(typed, took)| (typed.clone(), ms(median(took))))
        .collect();
    keystroke_slowest.sort_by(|a, b| b.1.total_cmp(&a.1));
    keystroke_slowest.truncate(8);
    // Enter on each typed keystroke: the same strings ranked over the whole history.
    let mut entered = Vec::new();
    for _ in 0..rounds.div_ceil(10) {
        for typed in &keystrokes {
            entered.push(get(addr, &format!("/api/search?q={}&limit=50", encode(typed)))?.1);
        }
    }
    let service = MessageService::new(Arc::clone(&corpus.db));
    let options = SearchOptions {
        limit: 50,
        window: Some(scribe_message::TYPING_WINDOW),
        ..SearchOptions::default()
    };
    let mut direct = Vec::new();
    for _ in 0..rounds.div_ceil(10) {
        for typed in &keystrokes {
            let t = Instant::now();
            service.search(typed, &options)?;
            direct.push(t.elapsed());
        }
    }
    Ok(WebResult {
        sizes,
        listed,
        build_s: 0.0,
        list_first_ms,
        list_first_raw_ms,
        deep_position: position,
        list_deep_ms,
        walk_pages,
        walk_ms,
        list_cost_ms,
        conversation_first_ms,
        conversation_pages,
        conversation_all_ms,
        keystrokes: samples.len(),
        keystroke_median_ms: ms(median(&samples)),
        keystroke_p95_ms: ms(percentile(&samples, 0.95)),
        keystroke_slowest,
        keystroke_service_median_ms: ms(median(&direct)),
        enter_median_ms: ms(median(&entered)),
        enter_p95_ms: ms(percentile(&entered, 0.95)),
    })
}
