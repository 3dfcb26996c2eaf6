//! Concurrent processes: 4 writer processes append 2,000 messages each while 2 processes
//! search and 1 prunes, all on one database file. No caller may ever see an error, no
//! acknowledged write may be lost, and every counter and total must come out exact.
//!
//! Every child is this test binary re-run in the `concurrent_processes_child` role (which
//! one is in `SCRIBE_CP_ROLE`); it reports on stdout with lines starting `@cp ` and fails
//! (panic → non-zero exit, message on stderr) on the first error a service returns.
//!
//! - Writers append messages of 1–3 parts (text, reasoning, tool calls, CJK now and then)
//!   through `MessageService::create` into their own two sessions and, after every
//!   assistant message, add usage through `SessionService::add_usage`. Costs are whole
//!   multiples of 2⁻¹⁰ dollars, so their sums are exact in `f64` and compared with `==`.
//! - Searchers run mixed queries (words, phrases, prefixes, CJK, garbage) with random
//!   filters through `MessageService::search` until the parent closes their stdin.
//! - The pruner prunes, when the parent says so, one pre-made batch of old ended sessions
//!   (with messages, parts and files) at a time, so deletes land among the writes: each
//!   round's `older_than_days` lets exactly one more batch qualify, and a last round ends
//!   a batch of active sessions itself and prunes with `older_than_days = 0`. The writers'
//!   sessions are active throughout and must never be touched.
//!
//! Afterwards the parent checks every acknowledged message (whole, in its session, with
//! its tool parts), every session counter and usage total, that pruned sessions left no
//! rows behind, both search indexes and `PRAGMA integrity_check`.
//!
//! `SCRIBE_CP_MESSAGES` overrides the messages per writer (default 2,000);
//! `SCRIBE_TEST_SEED` reproduces a run (the seed is printed).

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::{HashMap, HashSet};
use std::io::{BufRead, BufReader, Read, Write};
use std::path::Path;
use std::process::{Child, ChildStdin, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, mpsc};
use std::time::{Duration, Instant};

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use scribe_db::{Clock, Database, Options};
use scribe_message::{
    MessageService, NewMessage, Part, ReasoningPart, Role, SearchOptions, TokenUsage, ToolState,
};
use scribe_session::{NewSession, SessionService, UsageDelta};
use scribe_tests::{WORDS, child_command, consistency_problems, error_chain, search_counts, seed};
use serde_json::json;

const CHILD_TEST: &str = "concurrent_processes_child";
const ENV_ROLE: &str = "SCRIBE_CP_ROLE";
const ENV_DB: &str = "SCRIBE_CP_DB";
const ENV_SEED: &str = "SCRIBE_CP_SEED";
const ENV_SESSIONS: &str = "SCRIBE_CP_SESSIONS";
const ENV_COUNT: &str = "SCRIBE_CP_COUNT";
const ENV_WRITER: &str = "SCRIBE_CP_WRITER";
/// Messages per writer; the issue asks for 2,000.
const ENV_MESSAGES: &str = "SCRIBE_CP_MESSAGES";
const DEFAULT_MESSAGES: usize = 2_000;

const WRITERS: usize = 4;
const SEARCHERS: usize = 2;
const SESSIONS_PER_WRITER: usize = 2;
/// Batches of old ended sessions, pruned one per round.
const AGED_BATCHES: usize = 6;
/// Plus one batch the pruner ends itself.
const PRUNE_ROUNDS: usize = AGED_BATCHES + 1;
const SESSIONS_PER_BATCH: usize = 4;
const MESSAGES_PER_PRUNED_SESSION: usize = 25;

/// The whole run is killed and failed after this long.
const HARD_TIMEOUT: Duration = Duration::from_secs(180);
/// Children stop by themselves after this long, in case the parent vanished unnoticed.
const CHILD_LIFETIME: Duration = Duration::from_secs(240);
const DAY_MS: i64 = 86_400_000;
/// Costs are counted in units of 2⁻¹⁰ dollars: sums of such values are exact in f64.
const COST_UNIT: f64 = 1.0 / 1024.0;
/// Marks the protocol lines among libtest's own output.
const PREFIX: &str = "@cp ";
/// Only ever appears as a whole word, so word-index hits can be counted with LIKE.
const MARKER: &str = "kingfisher";
const CJK_MARKER: &str = "数据库连接";

fn env(name: &str) -> String {
    std::env::var(name).unwrap_or_else(|_| panic!("{name} is not set"))
}

fn messages_per_writer() -> usize {
    match std::env::var(ENV_MESSAGES) {
        Ok(s) => s
            .parse()
            .unwrap_or_else(|_| panic!("{ENV_MESSAGES} must be a count, got {s:?}")),
        Err(_) => DEFAULT_MESSAGES,
    }
}

fn sentence(rng: &mut StdRng) -> String {
    let n = rng.random_range(4..20);
    let mut words: Vec<&str> = (0..n)
        .map(|_| WORDS[rng.random_range(0..WORDS.len())])
        .collect();
    if rng.random_bool(0.2) {
        let at = rng.random_range(0..words.len());
        words.insert(at, MARKER);
    }
    let mut text = words.join(" ");
    if rng.random_bool(0.1) {
        text.push_str(&format!(" 这个{CJK_MARKER}池的问题已经修复了。"));
    }
    text
}

fn random_part(rng: &mut StdRng, tag: &str) -> Part {
    match rng.random_range(0..10) {
        0..=5 => Part::text(sentence(rng)),
        6 => Part::Reasoning(ReasoningPart {
            text: sentence(rng),
            ..Default::default()
        }),
        _ => {
            let mut part = Part::tool(
                format!("call_{tag}_{}", rng.random::<u32>()),
                ["bash", "read", "edit", "grep"][rng.random_range(0..4)],
                json!({ "command": format!("cargo test -p {}", sentence(rng)) }),
            );
            if let Part::Tool(tool) = &mut part {
                tool.state = match rng.random_range(0..3) {
                    0 => ToolState::Running { started_at: 1_000 },
                    1 => ToolState::Completed {
                        output: sentence(rng),
                        title: "cargo test".into(),
                        metadata: serde_json::Value::Null,
                        started_at: 1_000,
                        ended_at: 2_000,
                    },
                    _ => ToolState::Error {
                        message: sentence(rng),
                        started_at: Some(1_000),
                        ended_at: 2_000,
                    },
                };
            }
            part
        }
    }
}

/// Sends one protocol line to the parent; `false` when the parent is gone.
fn report(line: &str) -> bool {
    let stdout = std::io::stdout();
    let mut out = stdout.lock();
    writeln!(out, "{PREFIX}{line}")
        .and_then(|()| out.flush())
        .is_ok()
}

/// Set once stdin reaches its end: the parent closed it (or died).
fn stdin_closed_flag() -> Arc<AtomicBool> {
    let closed = Arc::new(AtomicBool::new(false));
    let flag = Arc::clone(&closed);
    std::thread::spawn(move || {
        let mut sink = Vec::new();
        let _ = std::io::stdin().read_to_end(&mut sink);
        flag.store(true, Ordering::SeqCst);
    });
    closed
}

/// The child roles. A no-op in the normal test run.
#[test]
fn concurrent_processes_child() {
    let Ok(role) = std::env::var(ENV_ROLE) else {
        return;
    };
    let path = env(ENV_DB);
    let seed: u64 = env(ENV_SEED).parse().unwrap();
    // The pruner ends sessions and then prunes what ended before "now": a clock whose
    // readings never repeat makes that hold without sleeping.
    let options = Options {
        clock: Clock::monotonic(),
        ..Options::default()
    };
    let db = Arc::new(
        Database::open_with(&path, options)
            .unwrap_or_else(|e| panic!("{role}: open: {}", error_chain(&e))),
    );
    match role.as_str() {
        "writer" => writer(db, seed),
        "searcher" => searcher(db, seed),
        "pruner" => pruner(db),
        other => panic!("unknown role {other:?}"),
    }
}

/// Appends `SCRIBE_CP_COUNT` messages to its sessions, acknowledging each after commit.
///
/// `@cp ack <session> <message id> <parts> <tool parts> <seq>` after each message,
/// `@cp usage <session> <input> <output> <cache read> <cache write> <reasoning>
/// <cost units> <actual cost units or ->` after each usage increment, and
/// `@cp done <messages> <slowest create ms> <slowest add_usage ms>` at the end.
fn writer(db: Arc<Database>, seed: u64) {
    let me: usize = env(ENV_WRITER).parse().unwrap();
    let count: usize = env(ENV_COUNT).parse().unwrap();
    let sessions: Vec<String> = env(ENV_SESSIONS).split(',').map(str::to_owned).collect();
    let mut rng = StdRng::seed_from_u64(seed);
    let messages = MessageService::new(Arc::clone(&db));
    let svc = SessionService::new(db);
    let started = Instant::now();
    let (mut slowest_create, mut slowest_usage) = (Duration::ZERO, Duration::ZERO);
    for seq in 0..count {
        if started.elapsed() > CHILD_LIFETIME {
            panic!("writer {me}: still writing after {CHILD_LIFETIME:?}");
        }
        let session = &sessions[rng.random_range(0..sessions.len())];
        let role =
            [Role::User, Role::Assistant, Role::Assistant, Role::Tool][rng.random_range(0..4)];
        let parts: Vec<Part> = (0..rng.random_range(1..=3))
            .map(|_| random_part(&mut rng, &format!("{me}_{seq}")))
            .collect();
        let tools = parts.iter().filter(|p| matches!(p, Part::Tool(_))).count();
        // Non-assistant messages get a finish part on creation.
        let expected = parts.len() + usize::from(role != Role::Assistant);
        let mut new = NewMessage::new(session.clone(), role, parts);
        new.agent = Some(format!("writer-{me}/{seq}"));
        new.model = Some("anthropic/claude-sonnet".into());
        let t = Instant::now();
        let msg = messages.create(new).unwrap_or_else(|e| {
            panic!(
                "writer {me}: create message {seq} in {session}: {}",
                error_chain(&e)
            )
        });
        slowest_create = slowest_create.max(t.elapsed());
        assert_eq!(
            msg.parts.len(),
            expected,
            "writer {me}: message {seq} parts"
        );
        if !report(&format!(
            "ack {session} {} {expected} {tools} {seq}",
            msg.id
        )) {
            return;
        }
        if role != Role::Assistant {
            continue;
        }
        let tokens = TokenUsage {
            input: rng.random_range(1..5_000),
            output: rng.random_range(1..2_000),
            cache_read: rng.random_range(0..10_000),
            cache_write: rng.random_range(0..500),
            reasoning: rng.random_range(0..300),
        };
        let cost_units: u32 = rng.random_range(0..2_048);
        let actual_units: Option<u32> = rng.random_bool(0.5).then(|| rng.random_range(0..2_048));
        let delta = UsageDelta {
            tokens,
            api_calls: 1,
            tool_calls: 0,
            cost_usd: f64::from(cost_units) * COST_UNIT,
            actual_cost_usd: actual_units.map(|u| f64::from(u) * COST_UNIT),
        };
        let t = Instant::now();
        svc.add_usage(session, &delta).unwrap_or_else(|e| {
            panic!(
                "writer {me}: add usage after message {seq} in {session}: {}",
                error_chain(&e)
            )
        });
        slowest_usage = slowest_usage.max(t.elapsed());
        let actual = actual_units.map_or_else(|| "-".to_owned(), |u| u.to_string());
        if !report(&format!(
            "usage {session} {} {} {} {} {} {cost_units} {actual}",
            tokens.input, tokens.output, tokens.cache_read, tokens.cache_write, tokens.reasoning
        )) {
            return;
        }
    }
    report(&format!(
        "done {count} {} {}",
        slowest_create.as_millis(),
        slowest_usage.as_millis()
    ));
}

/// A search string: words, phrases, prefixes, CJK, or garbage that must not fail.
fn random_query(rng: &mut StdRng) -> String {
    let word = |rng: &mut StdRng| WORDS[rng.random_range(0..WORDS.len())];
    match rng.random_range(0..12) {
        0 | 1 => word(rng).to_owned(),
        2 => format!("{} {}", word(rng), word(rng)),
        3 => format!("\"{} {}\"", word(rng), word(rng)),
        4 => {
            let w = word(rng);
            format!("{}*", &w[..w.len().min(rng.random_range(1..5))])
        }
        5 => [CJK_MARKER, "连接池", "问题", "修复了", "连接"][rng.random_range(0..5)].to_owned(),
        6 => MARKER.to_owned(),
        7 => [
            "\"unbalanced",
            "AND OR NOT",
            "NEAR(build test",
            "*",
            "-",
            "text:build",
            "^build",
            "build AND",
            "(((",
            "'; DROP TABLE parts; --",
            "",
            "   ",
            "🦀 crab",
            "\u{0}\u{7}\u{1b}[31m",
            "ingf",
            "%_\\",
        ][rng.random_range(0..16)]
        .to_owned(),
        8 => "build ".repeat(rng.random_range(20..80)),
        _ => {
            const POOL: &[char] = &[
                'a', 'e', 'z', 'Q', '0', '9', ' ', ' ', '"', '\'', '*', '^', ':', '(', ')', '-',
                '+', '%', '_', '\\', '/', '.', ',', '数', '据', '库', 'é', 'ß', '🦀', '\u{200b}',
                '\u{202e}', '\t', '\n', '\u{0}',
            ];
            (0..rng.random_range(0..40))
                .map(|_| POOL[rng.random_range(0..POOL.len())])
                .collect()
        }
    }
}

/// Searches until stdin closes; `@cp searched <calls> <hits> <slowest ms> <its query>`
/// at the end.
fn searcher(db: Arc<Database>, seed: u64) {
    let sessions: Vec<String> = env(ENV_SESSIONS).split(',').map(str::to_owned).collect();
    let mut rng = StdRng::seed_from_u64(seed);
    let messages = MessageService::new(db);
    let stop = stdin_closed_flag();
    let started = Instant::now();
    let (mut calls, mut hits) = (0u64, 0u64);
    let (mut slowest, mut slowest_query) = (Duration::ZERO, String::new());
    // At least one search even if the writers were done before this process started.
    while calls == 0 || !stop.load(Ordering::SeqCst) {
        if started.elapsed() > CHILD_LIFETIME {
            panic!("searcher: not stopped after {CHILD_LIFETIME:?}");
        }
        let query = random_query(&mut rng);
        let mut options = SearchOptions {
            limit: rng.random_range(0..60),
            ..SearchOptions::default()
        };
        if rng.random_bool(0.2) {
            options.offset = rng.random_range(0..40);
        }
        if rng.random_bool(0.3) {
            options.session_id = Some(sessions[rng.random_range(0..sessions.len())].clone());
        }
        if rng.random_bool(0.2) {
            options.roles = vec![[Role::User, Role::Assistant, Role::Tool][rng.random_range(0..3)]];
        }
        match rng.random_range(0..6) {
            0 => options.sources = vec!["cli".into()],
            1 => options.exclude_sources = vec!["tui".into()],
            2 => options.since = Some(scribe_db::now_ms() - rng.random_range(0..5_000)),
            _ => {}
        }
        let t = Instant::now();
        let found = messages.search(&query, &options).unwrap_or_else(|e| {
            panic!(
                "searcher: search {query:?} with {options:?}: {}",
                error_chain(&e)
            )
        });
        assert!(
            found.len() <= options.limit,
            "searcher: {} hits for {query:?} with limit {}",
            found.len(),
            options.limit
        );
        if t.elapsed() > slowest {
            slowest = t.elapsed();
            slowest_query = format!("{query:?} {options:?}");
        }
        calls += 1;
        hits += found.len() as u64;
    }
    report(&format!(
        "searched {calls} {hits} {} {slowest_query}",
        slowest.as_millis()
    ));
}

/// Prunes on `prune <round>` lines from stdin until it closes; `@cp pruned <round> <n>`
/// after each round. Rounds below [`AGED_BATCHES`] let exactly batch `round` qualify by
/// age; the last one ends the sessions in `SCRIBE_CP_SESSIONS` and prunes everything
/// ended (`older_than_days = 0`).
fn pruner(db: Arc<Database>) {
    let to_end: Vec<String> = env(ENV_SESSIONS).split(',').map(str::to_owned).collect();
    let svc = SessionService::new(db);
    let started = Instant::now();
    for line in std::io::stdin().lock().lines() {
        if started.elapsed() > CHILD_LIFETIME {
            panic!("pruner: not stopped after {CHILD_LIFETIME:?}");
        }
        let line = line.unwrap();
        let round: usize = line
            .strip_prefix("prune ")
            .and_then(|r| r.parse().ok())
            .unwrap_or_else(|| panic!("pruner: bad command {line:?}"));
        let older_than_days = if round < AGED_BATCHES {
            u32::try_from(AGED_BATCHES - round - 1).unwrap()
        } else {
            for id in &to_end {
                svc.end(id, "completed")
                    .unwrap_or_else(|e| panic!("pruner: end {id}: {}", error_chain(&e)));
            }
            // Prune takes sessions that ended strictly before now (the clock never
            // repeats a reading).
            0
        };
        let dry = svc
            .prune(older_than_days, None, true)
            .unwrap_or_else(|e| panic!("pruner: dry run {round}: {}", error_chain(&e)));
        let outcome = svc
            .prune(older_than_days, None, false)
            .unwrap_or_else(|e| panic!("pruner: round {round}: {}", error_chain(&e)));
        let ids = |r: &scribe_session::PruneReport| -> Vec<String> {
            r.sessions.iter().map(|s| s.id.clone()).collect()
        };
        assert_eq!(
            ids(&dry),
            ids(&outcome),
            "pruner: dry run vs prune, round {round}"
        );
        let batch = format!("prune batch {round} ");
        for session in &outcome.sessions {
            let title = session.title.as_deref().unwrap_or_default();
            assert!(
                title.starts_with(&batch),
                "pruner: round {round} (older than {older_than_days} days) pruned {} {title:?}",
                session.id
            );
        }
        if !report(&format!("pruned {round} {}", outcome.sessions.len())) {
            return;
        }
    }
}

/// A protocol line from child `index`.
#[derive(Debug)]
struct Line {
    child: usize,
    fields: Vec<String>,
}

#[derive(Debug)]
struct Proc {
    name: String,
    child: Child,
    stdin: Option<ChildStdin>,
    stderr: Arc<Mutex<String>>,
    status: Option<std::process::ExitStatus>,
    /// When the parent saw it exit, from the start of the run.
    exited_at: Option<Duration>,
}

fn spawn(
    index: usize,
    name: String,
    envs: &[(&str, String)],
    lines: &mpsc::Sender<Line>,
    readers: &mut Vec<std::thread::JoinHandle<()>>,
) -> Proc {
    let mut cmd = child_command(CHILD_TEST).unwrap();
    for (k, v) in envs {
        cmd.env(k, v);
    }
    let mut child = cmd
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let stdout = child.stdout.take().unwrap();
    let lines = lines.clone();
    readers.push(std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines() {
            let Ok(line) = line else { break };
            // libtest may have printed "test <name> ... " on the same line.
            let Some(at) = line.find(PREFIX) else {
                continue;
            };
            let fields = line[at + PREFIX.len()..]
                .split(' ')
                .map(str::to_owned)
                .collect();
            if lines
                .send(Line {
                    child: index,
                    fields,
                })
                .is_err()
            {
                break;
            }
        }
    }));
    let stderr = Arc::new(Mutex::new(String::new()));
    let mut pipe = child.stderr.take().unwrap();
    let sink = Arc::clone(&stderr);
    readers.push(std::thread::spawn(move || {
        let mut text = String::new();
        let _ = pipe.read_to_string(&mut text);
        sink.lock().unwrap().push_str(&text);
    }));
    Proc {
        name,
        stdin: child.stdin.take(),
        child,
        stderr,
        status: None,
        exited_at: None,
    }
}

/// Sums of what the writers acknowledged for one session.
#[derive(Debug, Default, Clone, PartialEq)]
struct Expected {
    messages: i64,
    tool_parts: i64,
    tokens: TokenUsage,
    api_calls: i64,
    cost_units: u64,
    actual_units: Option<u64>,
}

/// An acknowledged message: its session, parts, tool parts, and agent tag.
#[derive(Debug, Clone, PartialEq)]
struct Ack {
    session: String,
    parts: i64,
    tools: i64,
    agent: String,
}

fn num<T: std::str::FromStr>(fields: &[String], i: usize) -> T {
    fields[i]
        .parse()
        .unwrap_or_else(|_| panic!("bad field {i} in {fields:?}"))
}

/// The panic message in a child's stderr (without the backtrace), or its last lines.
fn panic_message(stderr: &str) -> String {
    let lines: Vec<&str> = stderr.lines().collect();
    match lines.iter().position(|l| l.contains("panicked at")) {
        Some(at) => lines[at..]
            .iter()
            .take_while(|l| !l.starts_with("stack backtrace"))
            .take(20)
            .copied()
            .collect::<Vec<_>>()
            .join("\n"),
        None => lines[lines.len().saturating_sub(15)..].join("\n"),
    }
}

fn count(db: &Database, sql: &str) -> i64 {
    db.read(|conn| -> scribe_db::Result<_> {
        let conn = conn.conn().unwrap();
        Ok(conn.query_row(sql, [], |row| row.get(0))?)
    })
    .unwrap()
}

/// The setup: writers' sessions, and batches of sessions for the pruner with messages and
/// files. Aged batch `k` ended `AGED_BATCHES - k` days minus 12 hours ago, so pruning with
/// `older_than_days = AGED_BATCHES - k - 1` takes exactly it and the batches before.
struct Setup {
    writer_sessions: Vec<Vec<String>>,
    prune_sessions: Vec<String>,
    to_end: Vec<String>,
    prune_messages: Vec<String>,
}

fn setup(path: &Path, rng: &mut StdRng) -> Setup {
    let db = Arc::new(Database::open(path).unwrap());
    let sessions = SessionService::new(Arc::clone(&db));
    let messages = MessageService::new(Arc::clone(&db));
    let writer_sessions: Vec<Vec<String>> = (0..WRITERS)
        .map(|w| {
            (0..SESSIONS_PER_WRITER)
                .map(|j| {
                    let mut new = NewSession::titled(format!("writer {w} session {j}"));
                    new.model = Some("anthropic/claude-sonnet".into());
                    sessions.create(new).unwrap().id
                })
                .collect()
        })
        .collect();
    let mut prune_sessions = Vec::new();
    let mut to_end = Vec::new();
    let mut prune_messages = Vec::new();
    let now = scribe_db::now_ms();
    for batch in 0..PRUNE_ROUNDS {
        for i in 0..SESSIONS_PER_BATCH {
            let mut new = NewSession::titled(format!("prune batch {batch} session {i}"));
            new.source = "tui".into();
            let id = sessions.create(new).unwrap().id;
            for n in 0..MESSAGES_PER_PRUNED_SESSION {
                let role = [Role::User, Role::Assistant][n % 2];
                let parts = (0..rng.random_range(1..=3))
                    .map(|_| random_part(rng, "old"))
                    .collect();
                prune_messages.push(
                    messages
                        .create(NewMessage::new(id.clone(), role, parts))
                        .unwrap()
                        .id,
                );
            }
            sessions
                .record_file(&id, "src/main.rs", "fn main() {}\n")
                .unwrap();
            sessions
                .add_usage(
                    &id,
                    &UsageDelta {
                        api_calls: 3,
                        cost_usd: 0.5,
                        ..UsageDelta::default()
                    },
                )
                .unwrap();
            if batch < AGED_BATCHES {
                sessions.end(&id, "completed").unwrap();
                let ended = now - (AGED_BATCHES - batch) as i64 * DAY_MS + DAY_MS / 2;
                // Backdated in SQL: no service makes a session old, only time does.
                db.write(|tx| -> scribe_db::Result<_> {
                    let tx = tx.conn().unwrap();
                    tx.execute(
                        "UPDATE sessions SET created_at = ?1, ended_at = ?2 WHERE id = ?3",
                        rusqlite::params![ended - 3_600_000, ended, id],
                    )?;
                    Ok(())
                })
                .unwrap();
            } else {
                to_end.push(id.clone());
            }
            prune_sessions.push(id);
        }
    }
    Setup {
        writer_sessions,
        prune_sessions,
        to_end,
        prune_messages,
    }
}

#[test]
fn concurrent_writers_searchers_and_pruner_lose_nothing() {
    let seed = seed();
    let per_writer = messages_per_writer();
    eprintln!("concurrent_processes seed: {seed} (rerun with SCRIBE_TEST_SEED={seed})");
    let mut rng = StdRng::seed_from_u64(seed);
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("scribe.db");
    let path_str = path.to_str().unwrap().to_owned();

    let t_setup = Instant::now();
    let setup = setup(&path, &mut rng);
    let setup_time = t_setup.elapsed();
    let all_writer_sessions: Vec<String> = setup.writer_sessions.concat();

    // Children: writers 0..WRITERS, then searchers, then the pruner.
    let (tx, lines) = mpsc::channel();
    let mut readers = Vec::new();
    let mut procs = Vec::new();
    let started = Instant::now();
    for (w, own) in setup.writer_sessions.iter().enumerate() {
        procs.push(spawn(
            procs.len(),
            format!("writer {w}"),
            &[
                (ENV_ROLE, "writer".into()),
                (ENV_DB, path_str.clone()),
                (ENV_SEED, rng.random::<u64>().to_string()),
                (ENV_SESSIONS, own.join(",")),
                (ENV_COUNT, per_writer.to_string()),
                (ENV_WRITER, w.to_string()),
            ],
            &tx,
            &mut readers,
        ));
    }
    for s in 0..SEARCHERS {
        procs.push(spawn(
            procs.len(),
            format!("searcher {s}"),
            &[
                (ENV_ROLE, "searcher".into()),
                (ENV_DB, path_str.clone()),
                (ENV_SEED, rng.random::<u64>().to_string()),
                (ENV_SESSIONS, all_writer_sessions.join(",")),
            ],
            &tx,
            &mut readers,
        ));
    }
    let pruner = procs.len();
    procs.push(spawn(
        pruner,
        "pruner".into(),
        &[
            (ENV_ROLE, "pruner".into()),
            (ENV_DB, path_str.clone()),
            (ENV_SEED, "0".into()),
            (ENV_SESSIONS, setup.to_end.join(",")),
        ],
        &tx,
        &mut readers,
    ));
    drop(tx);

    let total = WRITERS * per_writer;
    let mut acks: HashMap<String, Ack> = HashMap::new();
    let mut expected: HashMap<String, Expected> = all_writer_sessions
        .iter()
        .map(|s| (s.clone(), Expected::default()))
        .collect();
    let mut done: HashMap<usize, (usize, u64, u64)> = HashMap::new();
    // (calls, hits, slowest ms, slowest query)
    let mut searched: HashMap<usize, (u64, u64, u64, String)> = HashMap::new();
    let mut pruned: Vec<(usize, usize, usize)> = Vec::new(); // (round, sessions, acks then)
    let mut rounds_sent = 0;
    let mut writers_finished_at = None;

    let mut handle =
        |line: Line, acks: &mut HashMap<String, Ack>, expected: &mut HashMap<String, Expected>| {
            let f = &line.fields;
            match f[0].as_str() {
                "ack" => {
                    let session = f[1].clone();
                    let (parts, tools): (i64, i64) = (num(f, 3), num(f, 4));
                    let e = expected
                        .get_mut(&session)
                        .unwrap_or_else(|| panic!("ack for unknown session: {f:?}"));
                    e.messages += 1;
                    e.tool_parts += tools;
                    let ack = Ack {
                        session,
                        parts,
                        tools,
                        agent: format!("writer-{}/{}", line.child, f[5]),
                    };
                    assert!(
                        acks.insert(f[2].clone(), ack).is_none(),
                        "message {} acknowledged twice",
                        f[2]
                    );
                }
                "usage" => {
                    let e = expected.get_mut(&f[1]).unwrap();
                    e.tokens += TokenUsage {
                        input: num(f, 2),
                        output: num(f, 3),
                        cache_read: num(f, 4),
                        cache_write: num(f, 5),
                        reasoning: num(f, 6),
                    };
                    e.api_calls += 1;
                    e.cost_units += num::<u64>(f, 7);
                    if f[8] != "-" {
                        e.actual_units = Some(e.actual_units.unwrap_or(0) + num::<u64>(f, 8));
                    }
                }
                "done" => {
                    done.insert(line.child, (num(f, 1), num(f, 2), num(f, 3)));
                }
                "searched" => {
                    searched.insert(
                        line.child,
                        (num(f, 1), num(f, 2), num(f, 3), f[4..].join(" ")),
                    );
                }
                "pruned" => pruned.push((num(f, 1), num(f, 2), acks.len())),
                other => panic!("unknown report {other:?} from child {}", line.child),
            }
        };

    // Drive the run: collect reports, ask for a prune round each time the writers got
    // another 1/(rounds+1) of the way, stop searchers and pruner once the writers exit.
    loop {
        match lines.recv_timeout(Duration::from_millis(50)) {
            Ok(line) => handle(line, &mut acks, &mut expected),
            Err(mpsc::RecvTimeoutError::Timeout) => {}
            Err(mpsc::RecvTimeoutError::Disconnected) => {}
        }
        while rounds_sent < PRUNE_ROUNDS
            && acks.len() >= (rounds_sent + 1) * total / (PRUNE_ROUNDS + 1)
        {
            if let Some(stdin) = procs[pruner].stdin.as_mut() {
                // A dead pruner shows in its exit status.
                let _ = writeln!(stdin, "prune {rounds_sent}").and_then(|()| stdin.flush());
            }
            rounds_sent += 1;
        }
        for p in procs.iter_mut() {
            if p.status.is_none() {
                p.status = p.child.try_wait().unwrap();
                if p.status.is_some() {
                    p.exited_at = Some(started.elapsed());
                }
            }
        }
        if writers_finished_at.is_none() && procs[..WRITERS].iter().all(|p| p.status.is_some()) {
            writers_finished_at = Some(started.elapsed());
            // Rounds not yet asked for (a writer failed early) are asked for now.
            while rounds_sent < PRUNE_ROUNDS {
                if let Some(stdin) = procs[pruner].stdin.as_mut() {
                    let _ = writeln!(stdin, "prune {rounds_sent}");
                }
                rounds_sent += 1;
            }
            for p in &mut procs[WRITERS..] {
                p.stdin = None;
            }
        }
        if procs.iter().all(|p| p.status.is_some()) {
            break;
        }
        if started.elapsed() > HARD_TIMEOUT {
            for p in procs.iter_mut().filter(|p| p.status.is_none()) {
                let _ = p.child.kill();
                let _ = p.child.wait();
            }
            let running: Vec<&str> = procs
                .iter()
                .filter(|p| p.status.is_none())
                .map(|p| p.name.as_str())
                .collect();
            panic!(
                "seed {seed}: timed out after {HARD_TIMEOUT:?} with {running:?} still running; \
                 {} of {total} messages acknowledged, {} prune rounds reported",
                acks.len(),
                pruned.len()
            );
        }
    }
    for reader in readers {
        reader.join().unwrap();
    }
    while let Ok(line) = lines.try_recv() {
        handle(line, &mut acks, &mut expected);
    }
    let run_time = started.elapsed();

    let failures: Vec<String> = procs
        .iter()
        .filter(|p| !p.status.unwrap().success())
        .map(|p| {
            let stderr = p.stderr.lock().unwrap();
            format!(
                "{} exited {}:\n{}",
                p.name,
                p.status.unwrap(),
                panic_message(&stderr)
            )
        })
        .collect();
    assert!(
        failures.is_empty(),
        "seed {seed}: children failed:\n{}",
        failures.join("\n\n")
    );

    // Every child finished its work and said so.
    for w in 0..WRITERS {
        let (n, _, _) = done
            .get(&w)
            .unwrap_or_else(|| panic!("writer {w} did not report done"));
        assert_eq!(*n, per_writer, "writer {w}");
    }
    assert_eq!(acks.len(), total, "seed {seed}: acknowledged messages");
    for (s, proc_) in procs.iter().enumerate().skip(WRITERS).take(SEARCHERS) {
        let (calls, ..) = searched
            .get(&s)
            .unwrap_or_else(|| panic!("{} did not report", proc_.name));
        assert!(*calls > 0, "{} searched nothing", proc_.name);
    }
    let rounds: Vec<(usize, usize)> = pruned.iter().map(|&(r, n, _)| (r, n)).collect();
    let want: Vec<(usize, usize)> = (0..PRUNE_ROUNDS).map(|r| (r, SESSIONS_PER_BATCH)).collect();
    assert_eq!(
        rounds, want,
        "seed {seed}: prune rounds (round, sessions pruned)"
    );

    // Now the file itself.
    let db = Arc::new(Database::open(&path).unwrap());
    let problems = consistency_problems(&db).unwrap();
    assert!(problems.is_empty(), "seed {seed}: {problems:#?}");

    // Every acknowledged message is there, whole, where it was written; nothing else is.
    let stored: HashMap<String, Ack> = db
        .read(|conn| -> scribe_db::Result<_> { let conn = conn.conn().unwrap();
            let mut stmt = conn.prepare(
                "SELECT m.id, m.session_id, coalesce(m.agent, ''),
                        (SELECT count(*) FROM parts AS p WHERE p.message_id = m.id),
                        (SELECT count(*) FROM parts AS p WHERE p.message_id = m.id AND p.type = 'tool')
                 FROM messages AS m",
            )?;
            let rows = stmt
                .query_map([], |row| {
                    Ok((
                        row.get(0)?,
                        Ack {
                            session: row.get(1)?,
                            agent: row.get(2)?,
                            parts: row.get(3)?,
                            tools: row.get(4)?,
                        },
                    ))
                })?
                .collect::<rusqlite::Result<_>>()?;
            Ok(rows)
        })
        .unwrap();
    for (id, ack) in &acks {
        match stored.get(id) {
            None => panic!("seed {seed}: acknowledged message {id} is missing"),
            Some(row) => assert_eq!(row, ack, "seed {seed}: message {id}"),
        }
    }
    assert_eq!(
        stored.len(),
        acks.len(),
        "seed {seed}: stored messages besides the acknowledged ones"
    );

    // Counters and usage totals, exactly.
    let sessions = SessionService::new(Arc::clone(&db));
    let messages = MessageService::new(Arc::clone(&db));
    for id in &all_writer_sessions {
        let e = &expected[id];
        let s = sessions.get(id).unwrap();
        let context = format!("seed {seed}: session {id}");
        assert!(s.is_active(), "{context}: no longer active");
        assert_eq!(s.message_count, e.messages, "{context}: message_count");
        assert_eq!(
            s.tool_call_count, e.tool_parts,
            "{context}: tool_call_count"
        );
        assert_eq!(s.tokens, e.tokens, "{context}: tokens");
        assert_eq!(s.api_call_count, e.api_calls, "{context}: api_call_count");
        assert_eq!(
            s.estimated_cost_usd,
            e.cost_units as f64 * COST_UNIT,
            "{context}: estimated cost"
        );
        assert_eq!(
            s.actual_cost_usd,
            e.actual_units.map(|u| u as f64 * COST_UNIT),
            "{context}: actual cost"
        );
        // And every message loads through the message layer, parts decoded.
        let loaded = messages.list(id).unwrap();
        assert_eq!(
            loaded.len() as i64,
            e.messages,
            "{context}: loaded messages"
        );
    }

    // Pruned sessions are gone with everything that hung on them; nothing else was.
    let remaining: HashSet<String> = db
        .read(|conn| -> scribe_db::Result<_> {
            let conn = conn.conn().unwrap();
            Ok(conn
                .prepare("SELECT id FROM sessions")?
                .query_map([], |row| row.get(0))?
                .collect::<rusqlite::Result<_>>()?)
        })
        .unwrap();
    let writers: HashSet<String> = all_writer_sessions.iter().cloned().collect();
    assert_eq!(remaining, writers, "seed {seed}: sessions left");
    for id in &setup.prune_sessions {
        assert!(!remaining.contains(id));
    }
    for id in &setup.prune_messages {
        assert!(
            !stored.contains_key(id),
            "seed {seed}: pruned message {id} remains"
        );
    }
    for (what, sql) in [
        (
            "messages without a session",
            "SELECT count(*) FROM messages WHERE session_id NOT IN (SELECT id FROM sessions)",
        ),
        (
            "parts without a message",
            "SELECT count(*) FROM parts WHERE message_id NOT IN (SELECT id FROM messages)",
        ),
        (
            "parts without a session",
            "SELECT count(*) FROM parts WHERE session_id NOT IN (SELECT id FROM sessions)",
        ),
        (
            "files without a session",
            "SELECT count(*) FROM files WHERE session_id NOT IN (SELECT id FROM sessions)",
        ),
        ("files", "SELECT count(*) FROM files"),
    ] {
        assert_eq!(count(&db, sql), 0, "seed {seed}: {what}");
    }

    // The indexes agree with the rows on what a search finds.
    let (word_hits, with_word, substring_hits, with_substring) =
        search_counts(&db, MARKER, CJK_MARKER).unwrap();
    assert_eq!(word_hits, with_word, "seed {seed}: word index vs rows");
    assert_eq!(
        substring_hits, with_substring,
        "seed {seed}: trigram index vs rows"
    );

    let slowest_create = done.values().map(|d| d.1).max().unwrap_or(0);
    let slowest_usage = done.values().map(|d| d.2).max().unwrap_or(0);
    let (calls, hits) = searched
        .values()
        .fold((0, 0), |(c, h), (calls, hits, ..)| (c + calls, h + hits));
    let slowest_search = searched.values().max_by_key(|s| s.2).unwrap();
    let writing = writers_finished_at.unwrap_or(run_time);
    let stopped: Vec<String> = procs[WRITERS..]
        .iter()
        .map(|p| {
            let after = p.exited_at.unwrap_or(run_time).saturating_sub(writing);
            format!("{} {after:.1?}", p.name)
        })
        .collect();
    eprintln!(
        "concurrent_processes: setup {setup_time:.1?}; {WRITERS} writers × {per_writer} messages \
         in {writing:.1?} ({:.0} messages/s), slowest create {slowest_create} ms, slowest \
         add_usage {slowest_usage} ms; {SEARCHERS} searchers: {calls} searches, {hits} hits, slowest {} ms \
         ({}); pruner: {} sessions in {PRUNE_ROUNDS} rounds at {:?} acks; stopped after the writers: {}; \
         run {run_time:.1?}",
        total as f64 / writing.as_secs_f64(),
        slowest_search.2,
        slowest_search.3,
        PRUNE_ROUNDS * SESSIONS_PER_BATCH,
        pruned.iter().map(|p| p.2).collect::<Vec<_>>(),
        stopped.join(", "),
    );
}
