//! Benchmark of MessageService::search and ::list against raw rusqlite on the same file.
//!
//! `cargo run --release -p scribe-message --example bench [-- --messages N] [--queries Q]`
//!
//! Builds 100 sessions with N (default 50,000) messages of realistic text (200–2,000
//! characters: prose, code identifiers and paths, tool calls with outputs, ~10% CJK), one
//! session holding exactly 500 messages. Then, in one run:
//! - Q (default 200) mixed queries — common word, rare word, two words, phrase, prefix,
//!   CJK — through `search` (limit 20) and through one raw FTS5 statement on the same index
//!   with the same limit (joins to parts, messages and sessions for the hit's fields,
//!   bm25 order, snippet): median and p95 of each, and the ratio;
//! - loading the 500-message session with its parts through `list` versus the two raw
//!   statements (messages, then parts) read into plain tuples.
//!
//! Targets: search median ≤ 1.2× raw; load ≤ 1.3× raw.
//!
//! Other flags: `--load-rounds R` (default 60); `--breakdown` (JSON decode cost alone);
//! `--loop-ours` / `--loop-raw` (after building, only load the session 3,000 times through
//! `list` or raw SQL, for `perf record`).
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::sync::Arc;
use std::time::{Duration, Instant};

use rusqlite::{Connection, OpenFlags};
use scribe_db::Database;
use scribe_db::ids::{Prefix, new_id};
use scribe_db::queries;
use scribe_message::store;
use scribe_message::{
    FinishReason, Message, MessageService, Part, Role, SearchOptions, SearchQuery, StoredPart,
    TokenUsage,
};
use serde_json::json;

/// xorshift64*: deterministic data without a dependency.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }
    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }
    fn pick<'a>(&mut self, items: &[&'a str]) -> &'a str {
        items[self.below(items.len())]
    }
    /// Skewed towards the start of `items` (a rough Zipf).
    fn zipf<'a>(&mut self, items: &[&'a str]) -> &'a str {
        let a = self.below(items.len());
        let b = self.below(items.len());
        items[a.min(b)]
    }
}

const WORDS: &[&str] = &[
    "the",
    "to",
    "and",
    "error",
    "function",
    "file",
    "test",
    "value",
    "return",
    "we",
    "should",
    "this",
    "that",
    "config",
    "build",
    "run",
    "check",
    "update",
    "change",
    "fix",
    "data",
    "request",
    "response",
    "server",
    "client",
    "query",
    "index",
    "database",
    "connection",
    "pool",
    "timeout",
    "retry",
    "cache",
    "session",
    "message",
    "token",
    "model",
    "deploy",
    "release",
    "version",
    "branch",
    "commit",
    "merge",
    "review",
    "issue",
    "feature",
    "module",
    "crate",
    "compile",
    "warning",
    "panic",
    "thread",
    "async",
    "await",
    "future",
    "stream",
    "buffer",
    "socket",
    "handler",
    "router",
    "middleware",
    "schema",
    "migration",
    "column",
    "table",
    "row",
    "transaction",
    "lock",
    "mutex",
    "channel",
    "worker",
    "queue",
    "job",
    "parser",
    "lexer",
    "token",
    "syntax",
    "tree",
    "node",
    "graph",
    "edge",
    "vertex",
    "path",
    "directory",
    "permission",
    "user",
    "account",
    "password",
    "secret",
    "key",
    "certificate",
    "latency",
    "throughput",
    "benchmark",
    "profile",
    "memory",
    "allocation",
    "leak",
    "garbage",
];

const RARE: &[&str] = &[
    "zeitgeist",
    "quokka",
    "flibbertigibbet",
    "xylophone",
    "kumquat",
    "obfuscation",
    "serendipity",
    "palimpsest",
    "ouroboros",
    "heliotrope",
];

const IDENTS: &[&str] = &[
    "chat-send",
    "my-app.config.ts",
    "sp_new1",
    "P2.2",
    "handle_request",
    "parseQueryString",
    "src/db/pool.rs",
    "HashMap::new",
    "tokio::spawn",
    "useEffect",
    "fetch_user_by_id",
    "MAX_RETRIES",
    "Cargo.toml",
    "package.json",
    "docker-compose.yml",
    "api/v2/users",
];

const CJK: &[&str] = &[
    "数据库连接池配置错误，需要检查超时设置。",
    "这是中文文本，用于测试搜索功能。",
    "请把这个函数重构一下，然后运行测试。",
    "部署失败了，日志里有权限错误。",
    "クエリのデータベース接続がタイムアウトしました。",
    "한국어 검색 테스트 문장입니다.",
];

fn text(rng: &mut Rng, min: usize, max: usize) -> String {
    let target = min + rng.below(max - min);
    let mut out = String::with_capacity(target + 32);
    let cjk = rng.below(10) == 0;
    while out.len() < target {
        let roll = rng.below(100);
        let piece = if cjk && roll < 30 {
            rng.pick(CJK)
        } else if roll < 8 {
            rng.pick(IDENTS)
        } else if roll < 9 && rng.below(20) == 0 {
            rng.pick(RARE)
        } else if roll < 12 {
            "connection pool"
        } else {
            rng.zipf(WORDS)
        };
        out.push_str(piece);
        out.push(if rng.below(12) == 0 { '.' } else { ' ' });
    }
    out
}

fn arg(name: &str, default: usize) -> usize {
    let args: Vec<String> = std::env::args().collect();
    args.iter()
        .position(|a| a == name)
        .and_then(|i| args.get(i + 1))
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

fn percentile(samples: &mut [Duration], p: f64) -> Duration {
    samples.sort_unstable();
    let idx = ((samples.len() as f64 - 1.0) * p).round() as usize;
    samples[idx]
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}

fn main() {
    let total = arg("--messages", 50_000).max(1_000);
    let query_count = arg("--queries", 200).max(6);
    let sessions = 100;
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("bench.db");
    let db = Arc::new(Database::open(&path).unwrap());
    let svc = MessageService::new(Arc::clone(&db));
    let mut rng = Rng(0x9E37_79B9_7F4A_7C15);

    // Sessions: the first gets exactly 500 messages (the load benchmark), the rest share
    // what is left.
    let sources = ["cli", "tui", "telegram", "slack"];
    let session_ids: Vec<String> = (0..sessions)
        .map(|i| {
            let id = new_id(Prefix::Session);
            let title = format!("session {i}");
            db.write(|tx| {
                queries::create_session(
                    tx,
                    &queries::CreateSessionParams {
                        id: &id,
                        parent_session_id: None,
                        kind: "normal",
                        source: sources[i % sources.len()],
                        user_id: None,
                        directory: None,
                        title: Some(&title),
                        model: Some("claude-bench"),
                        model_config: None,
                        system_prompt: None,
                        permission: None,
                        billing_provider: None,
                        billing_base_url: None,
                        billing_mode: None,
                        now: 1_700_000_000_000,
                    },
                )?;
                Ok(())
            })
            .unwrap();
            id
        })
        .collect();
    let load_session = session_ids[0].clone();

    let started = Instant::now();
    let mut batch: Vec<Message> = Vec::new();
    let mut time = 1_700_000_000_000_i64;
    for n in 0..total {
        let session = if n < 500 {
            &session_ids[0]
        } else {
            &session_ids[1 + rng.below(sessions - 1)]
        };
        time += 1 + rng.below(3) as i64;
        let assistant = n % 2 == 1;
        let mut parts = vec![Part::text(text(&mut rng, 200, 2_000))];
        if assistant && rng.below(3) == 0 {
            let mut tool = Part::tool(
                format!("call_{n}"),
                rng.pick(&["bash", "read", "grep", "edit"]),
                json!({"command": format!("{} {}", rng.pick(IDENTS), rng.zipf(WORDS))}),
            );
            if let Part::Tool(t) = &mut tool {
                t.state.start(time).unwrap();
                t.state
                    .complete(text(&mut rng, 100, 600), "done", json!(null), time + 5)
                    .unwrap();
            }
            parts.push(tool);
        }
        if assistant {
            parts.push(Part::StepFinish(scribe_message::StepFinishPart {
                reason: FinishReason::EndTurn,
                tokens: TokenUsage {
                    input: 1000,
                    output: 200,
                    ..TokenUsage::default()
                },
                cost: 0.01,
                extra: Default::default(),
            }));
        }
        parts.push(Part::finish(FinishReason::EndTurn, time));
        let stored = parts
            .into_iter()
            .zip(0..)
            .map(|(part, position)| StoredPart {
                id: new_id(Prefix::Part),
                position,
                part,
                created_at: time,
                updated_at: time,
            })
            .collect();
        batch.push(Message {
            id: new_id(Prefix::Message),
            session_id: session.clone(),
            parent_id: None,
            role: if assistant {
                Role::Assistant
            } else {
                Role::User
            },
            agent: Some("build".into()),
            provider: assistant.then(|| "anthropic".into()),
            model: assistant.then(|| "claude-bench".into()),
            finish_reason: Some(FinishReason::EndTurn),
            is_summary: false,
            usage: TokenUsage::default(),
            cost_usd: 0.0,
            error: None,
            created_at: time,
            updated_at: time,
            finished_at: Some(time),
            parts: stored,
        });
        if batch.len() == 1_000 || n + 1 == total {
            db.write(|tx| {
                for msg in &batch {
                    store::insert_message(tx, msg)
                        .map_err(|e| scribe_db::Error::InvalidInput(e.to_string()))?;
                }
                Ok(())
            })
            .unwrap();
            batch.clear();
        }
    }
    db.checkpoint().unwrap();
    println!(
        "built {total} messages in {sessions} sessions in {:.1} s ({} MB)",
        started.elapsed().as_secs_f64(),
        std::fs::metadata(&path)
            .map(|m| m.len() / 1_000_000)
            .unwrap_or(0)
    );

    // The query mix: six kinds, cycled.
    let kinds: [(&str, &[&str]); 6] = [
        (
            "common word",
            &["error", "function", "database", "session", "the config"],
        ),
        ("rare word", RARE),
        (
            "two words",
            &[
                "connection timeout",
                "retry cache",
                "server panic",
                "merge review",
            ],
        ),
        (
            "phrase",
            &[
                "\"connection pool\"",
                "\"error function\"",
                "\"handle_request\"",
            ],
        ),
        ("prefix", &["conf*", "migr*", "perm*", "bench*", "sock*"]),
        (
            "cjk",
            &["数据库", "连接池", "中文", "データベース", "部署失败"],
        ),
    ];
    let queries: Vec<(&str, &str)> = (0..query_count)
        .map(|i| {
            let (kind, list) = kinds[i % kinds.len()];
            (kind, list[(i / kinds.len()) % list.len()])
        })
        .collect();

    let raw = Connection::open_with_flags(&path, OpenFlags::SQLITE_OPEN_READ_ONLY).unwrap();
    raw.pragma_update(None, "cache_size", -16 * 1024).unwrap();
    let options = SearchOptions::default();
    let raw_search = |q: &str| -> usize {
        let (sql, expr) = match SearchQuery::parse(q) {
            SearchQuery::Fts(e) => (RAW_WORDS, e),
            SearchQuery::Trigram(e) => (RAW_TRIGRAM, e),
            SearchQuery::Like(p) => (RAW_LIKE, p),
            SearchQuery::Empty => return 0,
        };
        let mut stmt = raw.prepare_cached(sql).unwrap();
        let rows = stmt
            .query_map([expr], |r| {
                Ok((
                    r.get::<_, String>(0)?,
                    r.get::<_, String>(1)?,
                    r.get::<_, String>(2)?,
                    r.get::<_, i64>(3)?,
                    r.get::<_, Option<String>>(4)?,
                    r.get::<_, f64>(5)?,
                    r.get::<_, String>(6)?,
                    r.get::<_, Option<String>>(7)?,
                    r.get::<_, Option<String>>(8)?,
                ))
            })
            .unwrap();
        rows.map(|r| r.unwrap()).collect::<Vec<_>>().len()
    };
    // Warm both paths (page cache, statement caches).
    let mut hit_counts = Vec::new();
    for (_, q) in &queries {
        hit_counts.push((svc.search(q, &options).unwrap().len(), raw_search(q)));
    }
    let mut ours = Vec::new();
    let mut theirs = Vec::new();
    let mut by_kind: Vec<(&str, Vec<Duration>, Vec<Duration>)> = kinds
        .iter()
        .map(|(k, _)| (*k, Vec::new(), Vec::new()))
        .collect();
    for (i, (kind, q)) in queries.iter().enumerate() {
        // Alternate which side runs first so neither always gets the warmer cache.
        let time_ours = || {
            let t = Instant::now();
            std::hint::black_box(svc.search(q, &options).unwrap());
            t.elapsed()
        };
        let time_raw = || {
            let t = Instant::now();
            std::hint::black_box(raw_search(q));
            t.elapsed()
        };
        let (a, b) = if i % 2 == 0 {
            let a = time_ours();
            (a, time_raw())
        } else {
            let b = time_raw();
            (time_ours(), b)
        };
        ours.push(a);
        theirs.push(b);
        if let Some(entry) = by_kind.iter_mut().find(|(k, _, _)| k == kind) {
            entry.1.push(a);
            entry.2.push(b);
        }
    }
    let (om, op) = (percentile(&mut ours, 0.5), percentile(&mut ours, 0.95));
    let (rm, rp) = (percentile(&mut theirs, 0.5), percentile(&mut theirs, 0.95));
    println!("\nsearch: {} queries, limit 20", queries.len());
    println!(
        "  {:<12} {:>10} {:>10} {:>10} {:>10}",
        "kind", "ours med", "raw med", "ratio", "hits"
    );
    for (k, (kind, mut a, mut b)) in by_kind.into_iter().enumerate() {
        let hits = hit_counts.get(k).map(|h| h.0).unwrap_or(0);
        let (am, bm) = (percentile(&mut a, 0.5), percentile(&mut b, 0.5));
        println!(
            "  {kind:<12} {:>8.3}ms {:>8.3}ms {:>9.2}x {hits:>10}",
            ms(am),
            ms(bm),
            am.as_secs_f64() / bm.as_secs_f64()
        );
    }
    println!(
        "  all          median {:.3} ms vs raw {:.3} ms  → ratio {:.2}x (target ≤ 1.2x)",
        ms(om),
        ms(rm),
        om.as_secs_f64() / rm.as_secs_f64()
    );
    println!(
        "               p95    {:.3} ms vs raw {:.3} ms  → ratio {:.2}x",
        ms(op),
        ms(rp),
        op.as_secs_f64() / rp.as_secs_f64()
    );

    // Loading one 500-message session.
    let raw_load = |decode: bool| -> usize {
        let mut m = raw.prepare_cached(RAW_MESSAGES).unwrap();
        let messages: Vec<_> = m
            .query_map([&load_session], |r| {
                Ok((
                    (
                        r.get::<_, String>(0)?,
                        r.get::<_, String>(1)?,
                        r.get::<_, Option<String>>(2)?,
                        r.get::<_, String>(3)?,
                        r.get::<_, Option<String>>(4)?,
                        r.get::<_, Option<String>>(5)?,
                        r.get::<_, Option<String>>(6)?,
                        r.get::<_, Option<String>>(7)?,
                        r.get::<_, bool>(8)?,
                    ),
                    (
                        r.get::<_, i64>(9)?,
                        r.get::<_, i64>(10)?,
                        r.get::<_, i64>(11)?,
                        r.get::<_, i64>(12)?,
                        r.get::<_, i64>(13)?,
                        r.get::<_, f64>(14)?,
                        r.get::<_, Option<String>>(15)?,
                        r.get::<_, i64>(16)?,
                        r.get::<_, i64>(17)?,
                        r.get::<_, Option<i64>>(18)?,
                    ),
                ))
            })
            .unwrap()
            .map(|r| r.unwrap())
            .collect();
        let mut p = raw.prepare_cached(RAW_PARTS).unwrap();
        let parts: Vec<_> = p
            .query_map([&load_session], |r| {
                Ok((
                    r.get::<_, String>(0)?,
                    r.get::<_, String>(1)?,
                    r.get::<_, i64>(2)?,
                    r.get::<_, String>(3)?,
                    r.get::<_, i64>(4)?,
                    r.get::<_, i64>(5)?,
                ))
            })
            .unwrap()
            .map(|r| r.unwrap())
            .collect();
        if decode {
            let decoded: Vec<Part> = parts
                .iter()
                .map(|p| Part::from_json(&p.3).unwrap())
                .collect();
            std::hint::black_box(decoded);
        }
        messages.len() + parts.len()
    };
    assert_eq!(svc.list(&load_session).unwrap().len(), 500);
    raw_load(true);
    let rounds = arg("--load-rounds", 60);
    let (mut ours, mut theirs, mut json_only) = (Vec::new(), Vec::new(), Vec::new());
    for _ in 0..rounds {
        let t = Instant::now();
        std::hint::black_box(svc.list(&load_session).unwrap());
        ours.push(t.elapsed());
        let t = Instant::now();
        std::hint::black_box(raw_load(true));
        theirs.push(t.elapsed());
        let t = Instant::now();
        std::hint::black_box(raw_load(false));
        json_only.push(t.elapsed());
    }
    let mins = (
        ours.iter().min().copied().unwrap_or_default(),
        theirs.iter().min().copied().unwrap_or_default(),
    );
    let (om, rm, jm) = (
        percentile(&mut ours, 0.5),
        percentile(&mut theirs, 0.5),
        percentile(&mut json_only, 0.5),
    );
    println!("\nload a 500-message session with parts ({rounds} rounds)");
    println!(
        "  list median {:.3} ms vs raw SQL + Part::from_json {:.3} ms → ratio {:.2}x (target ≤ 1.3x)",
        ms(om),
        ms(rm),
        om.as_secs_f64() / rm.as_secs_f64()
    );
    println!(
        "  best of {rounds}: list {:.3} ms vs raw {:.3} ms → ratio {:.2}x",
        ms(mins.0),
        ms(mins.1),
        mins.0.as_secs_f64() / mins.1.as_secs_f64()
    );
    println!(
        "  (raw SQL rows only, part JSON left undecoded: {:.3} ms → ratio {:.2}x)",
        ms(jm),
        om.as_secs_f64() / jm.as_secs_f64()
    );
    if std::env::args().any(|a| a == "--loop-ours") {
        for _ in 0..3000 {
            std::hint::black_box(svc.list(&load_session).unwrap());
        }
        return;
    }
    if std::env::args().any(|a| a == "--loop-raw") {
        for _ in 0..3000 {
            std::hint::black_box(raw_load(true));
        }
        return;
    }
    if std::env::args().any(|a| a == "--breakdown") {
        // Where a load's time goes: decoding the parts' JSON alone.
        let datas: Vec<String> = raw
            .prepare(RAW_PARTS)
            .unwrap()
            .query_map([&load_session], |r| r.get::<_, String>(3))
            .unwrap()
            .map(|r| r.unwrap())
            .collect();
        let t = Instant::now();
        for _ in 0..20 {
            for d in &datas {
                std::hint::black_box(Part::from_json(d).unwrap());
            }
        }
        println!(
            "  typed decode of {} parts: {:.3} ms",
            datas.len(),
            ms(t.elapsed() / 20)
        );
        let t = Instant::now();
        for _ in 0..20 {
            for d in &datas {
                std::hint::black_box(serde_json::from_str::<serde_json::Value>(d).unwrap());
            }
        }
        println!(
            "  serde_json::Value decode of {} parts: {:.3} ms",
            datas.len(),
            ms(t.elapsed() / 20)
        );
    }
}

const RAW_WORDS: &str = "SELECT p.message_id, m.session_id, m.role, m.created_at,
    snippet(parts_fts, 0, '>>>', '<<<', '…', 24), bm25(parts_fts) AS r,
    s.source, s.model, s.title
FROM parts_fts JOIN parts AS p ON p.seq = parts_fts.rowid
JOIN messages AS m ON m.id = p.message_id JOIN sessions AS s ON s.id = m.session_id
WHERE parts_fts MATCH ?1 ORDER BY r LIMIT 20";

const RAW_TRIGRAM: &str = "SELECT p.message_id, m.session_id, m.role, m.created_at,
    snippet(parts_fts_trigram, 0, '>>>', '<<<', '…', 24), bm25(parts_fts_trigram) AS r,
    s.source, s.model, s.title
FROM parts_fts_trigram JOIN parts AS p ON p.seq = parts_fts_trigram.rowid
JOIN messages AS m ON m.id = p.message_id JOIN sessions AS s ON s.id = m.session_id
WHERE parts_fts_trigram MATCH ?1 ORDER BY r LIMIT 20";

const RAW_LIKE: &str = "SELECT p.message_id, m.session_id, m.role, m.created_at,
    p.search_text, 0.0, s.source, s.model, s.title
FROM parts AS p JOIN messages AS m ON m.id = p.message_id
JOIN sessions AS s ON s.id = m.session_id
WHERE p.search_text LIKE ?1 ESCAPE '\\' ORDER BY m.created_at DESC LIMIT 20";

const RAW_MESSAGES: &str = "SELECT * FROM messages WHERE session_id = ?1 ORDER BY created_at, id";

const RAW_PARTS: &str = "SELECT p.id, p.message_id, p.position, p.data, p.created_at, p.updated_at
FROM parts AS p JOIN messages AS m ON m.id = p.message_id
WHERE p.session_id = ?1 ORDER BY m.created_at, m.id, p.position";
