//! Write-path benchmark: appends the same realistic messages, one transaction each, through
//! `Database::write` + the generated query functions, through the same plus the generated
//! `Queries` trait (a `&mut dyn Queries`, as a transaction handle will hand it out), and
//! through a hand-written rusqlite loop with identical SQL and pragmas, then prints the rates
//! and their ratios.
//!
//! ```text
//! cargo run --release -p scribe-db --example bench [-- --messages N] [--rounds R]
//! ```
//!
//! Each round runs both paths on fresh files (alternating which goes first); the best
//! round of each path is compared, which filters out one-off disk and scheduler noise.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::Path;
use std::time::{Duration, Instant};

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use rusqlite::{Connection, TransactionBehavior, params};
use scribe_db::ids::{Prefix, new_id};
use scribe_db::queries as q;
use scribe_db::queries::Queries;
use scribe_db::{Database, Options};

/// The raw loop's SQL, written out by hand; checked equal to the generated constants so
/// both paths run exactly the same statements.
const RAW_INSERT_MESSAGE: &str = "INSERT INTO messages (
    id, session_id, parent_id, role, agent, provider, model, finish_reason, is_summary,
    input_tokens, output_tokens, cache_read_tokens, cache_write_tokens, reasoning_tokens,
    cost_usd, error, created_at, updated_at, finished_at
) VALUES (
    ?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9,
    ?10, ?11, ?12, ?13, ?14,
    ?15, ?16, ?17, ?18, ?19
)";
const RAW_INSERT_PART: &str =
    "INSERT INTO parts (id, message_id, session_id, position, type, data, created_at, updated_at)
VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)";

struct Message {
    id: String,
    role: &'static str,
    model: Option<&'static str>,
    output_tokens: i64,
    created_at: i64,
    parts: Vec<Part>,
}

struct Part {
    id: String,
    kind: &'static str,
    data: String,
}

const WORDS: &[&str] = &[
    "the",
    "build",
    "fails",
    "because",
    "cargo",
    "cannot",
    "find",
    "crate",
    "function",
    "returns",
    "error",
    "when",
    "database",
    "is",
    "locked",
    "retry",
    "with",
    "jitter",
    "session",
    "message",
    "part",
    "index",
    "trigger",
    "migration",
    "schema",
    "version",
    "query",
    "result",
    "tokens",
    "cost",
    "compaction",
    "summary",
    "context",
    "window",
    "agent",
    "tool",
    "output",
    "input",
    "fn",
    "impl",
    "struct",
    "Option<String>",
    "Vec<u8>",
    "async",
    "await",
    "thread",
    "mutex",
    "src/main.rs",
    "Cargo.toml",
    "println!",
    "unwrap_or_default",
    "HashMap",
    "iterator",
    "and",
    "a",
    "of",
    "to",
    "in",
    "we",
    "should",
    "then",
    "check",
    "that",
    "it",
    "works",
    "now",
];

fn sentence(rng: &mut StdRng, min_chars: usize, max_chars: usize) -> String {
    let target = rng.random_range(min_chars..=max_chars);
    let mut text = String::with_capacity(target + 16);
    while text.len() < target {
        if !text.is_empty() {
            text.push(if rng.random_ratio(1, 12) { '\n' } else { ' ' });
        }
        text.push_str(WORDS[rng.random_range(0..WORDS.len())]);
    }
    text
}

fn workload(count: usize) -> Vec<Message> {
    let mut rng = StdRng::seed_from_u64(42);
    let start = 1_700_000_000_000_i64;
    (0..count)
        .map(|i| {
            let assistant = i % 2 == 1;
            let text = sentence(&mut rng, 200, 2_000);
            let mut parts = vec![Part {
                id: new_id(Prefix::Part),
                kind: "text",
                data: serde_json::json!({ "type": "text", "text": text }).to_string(),
            }];
            // Every third assistant turn also calls a tool.
            if assistant && i % 3 == 0 {
                let output = sentence(&mut rng, 100, 1_500);
                parts.push(Part {
                    id: new_id(Prefix::Part),
                    kind: "tool",
                    data: serde_json::json!({
                        "type": "tool", "tool": "bash", "call_id": format!("call_{i}"),
                        "input": { "command": "cargo test --workspace" },
                        "state": { "status": "completed", "output": output, "title": "cargo test",
                                   "started_at": start, "ended_at": start + 900 }
                    })
                    .to_string(),
                });
            }
            Message {
                id: new_id(Prefix::Message),
                role: if assistant { "assistant" } else { "user" },
                model: assistant.then_some("claude-sonnet-4"),
                output_tokens: if assistant {
                    rng.random_range(50..2_000)
                } else {
                    0
                },
                created_at: start + i64::try_from(i).unwrap() * 1_000,
                parts,
            }
        })
        .collect()
}

fn fresh_db(dir: &Path, name: &str, session: &str) -> std::path::PathBuf {
    let path = dir.join(name);
    let db = Database::open(&path).unwrap();
    db.write(|tx| -> scribe_db::Result<_> {
        let tx = tx.conn().unwrap();
        q::create_session(
            tx,
            &q::CreateSessionParams {
                ..scribe_db::testing::bare_session(session, "bench", 1_700_000_000_000)
            },
        )?;
        Ok(())
    })
    .unwrap();
    path
}

fn run_generated(path: &Path, session: &str, messages: &[Message]) -> Duration {
    let db = Database::open(path).unwrap();
    let started = Instant::now();
    for m in messages {
        db.write(|tx| -> scribe_db::Result<_> {
            let tx = tx.conn().unwrap();
            q::create_message(
                tx,
                &q::CreateMessageParams {
                    id: &m.id,
                    session_id: session,
                    parent_id: None,
                    role: m.role,
                    agent: None,
                    provider: None,
                    model: m.model,
                    finish_reason: None,
                    is_summary: false,
                    input_tokens: 0,
                    output_tokens: m.output_tokens,
                    cache_read_tokens: 0,
                    cache_write_tokens: 0,
                    reasoning_tokens: 0,
                    cost_usd: 0.0,
                    error: None,
                    created_at: m.created_at,
                    updated_at: m.created_at,
                    finished_at: None,
                },
            )?;
            for (position, p) in m.parts.iter().enumerate() {
                q::create_part(
                    tx,
                    &q::CreatePartParams {
                        id: &p.id,
                        message_id: &m.id,
                        session_id: session,
                        position: i64::try_from(position).unwrap(),
                        r#type: p.kind,
                        data: &p.data,
                        created_at: m.created_at,
                        updated_at: m.created_at,
                    },
                )?;
            }
            Ok(())
        })
        .unwrap();
    }
    started.elapsed()
}

fn run_trait(path: &Path, session: &str, messages: &[Message]) -> Duration {
    let db = Database::open(path).unwrap();
    let started = Instant::now();
    for m in messages {
        db.write(|tx| -> scribe_db::Result<_> {
            let mut sqlite = q::SqliteQueries::new(tx.conn().unwrap());
            let queries: &mut dyn Queries = &mut sqlite;
            queries.create_message(&q::CreateMessageParams {
                id: &m.id,
                session_id: session,
                parent_id: None,
                role: m.role,
                agent: None,
                provider: None,
                model: m.model,
                finish_reason: None,
                is_summary: false,
                input_tokens: 0,
                output_tokens: m.output_tokens,
                cache_read_tokens: 0,
                cache_write_tokens: 0,
                reasoning_tokens: 0,
                cost_usd: 0.0,
                error: None,
                created_at: m.created_at,
                updated_at: m.created_at,
                finished_at: None,
            })?;
            for (position, p) in m.parts.iter().enumerate() {
                queries.create_part(&q::CreatePartParams {
                    id: &p.id,
                    message_id: &m.id,
                    session_id: session,
                    position: i64::try_from(position).unwrap(),
                    r#type: p.kind,
                    data: &p.data,
                    created_at: m.created_at,
                    updated_at: m.created_at,
                })?;
            }
            Ok(())
        })
        .unwrap();
    }
    started.elapsed()
}

fn run_raw(path: &Path, session: &str, messages: &[Message]) -> Duration {
    let options = Options::default();
    let mut conn = Connection::open(path).unwrap();
    conn.busy_timeout(options.busy_timeout).unwrap();
    conn.pragma_update(None, "journal_mode", "WAL").unwrap();
    conn.pragma_update(None, "foreign_keys", true).unwrap();
    conn.pragma_update(None, "synchronous", "NORMAL").unwrap();
    conn.pragma_update(None, "cache_size", -options.cache_kib)
        .unwrap();
    conn.pragma_update(None, "temp_store", "MEMORY").unwrap();
    let started = Instant::now();
    for m in messages {
        let tx = conn
            .transaction_with_behavior(TransactionBehavior::Immediate)
            .unwrap();
        tx.prepare_cached(RAW_INSERT_MESSAGE)
            .unwrap()
            .execute(params![
                m.id,
                session,
                None::<&str>,
                m.role,
                None::<&str>,
                None::<&str>,
                m.model,
                None::<&str>,
                false,
                0,
                m.output_tokens,
                0,
                0,
                0,
                0.0,
                None::<&str>,
                m.created_at,
                m.created_at,
                None::<i64>,
            ])
            .unwrap();
        for (position, p) in m.parts.iter().enumerate() {
            tx.prepare_cached(RAW_INSERT_PART)
                .unwrap()
                .execute(params![
                    p.id,
                    m.id,
                    session,
                    i64::try_from(position).unwrap(),
                    p.kind,
                    p.data,
                    m.created_at,
                    m.created_at,
                ])
                .unwrap();
        }
        tx.commit().unwrap();
    }
    started.elapsed()
}

fn verify(path: &Path, expected_messages: usize, expected_parts: usize) {
    let conn = Connection::open(path).unwrap();
    let (m, p): (i64, i64) = conn
        .query_row(
            "SELECT (SELECT count(*) FROM messages), (SELECT count(*) FROM parts)",
            [],
            |r| Ok((r.get(0)?, r.get(1)?)),
        )
        .unwrap();
    assert_eq!(
        (m as usize, p as usize),
        (expected_messages, expected_parts)
    );
}

fn arg(name: &str, default: usize) -> usize {
    let args: Vec<String> = std::env::args().collect();
    args.iter()
        .position(|a| a == name)
        .and_then(|i| args.get(i + 1))
        .map_or(default, |v| v.parse().expect("a number"))
}

fn main() {
    assert_eq!(
        RAW_INSERT_MESSAGE,
        q::CREATE_MESSAGE_SQL,
        "raw SQL drifted from the query file"
    );
    assert_eq!(
        RAW_INSERT_PART,
        q::CREATE_PART_SQL,
        "raw SQL drifted from the query file"
    );
    let count = arg("--messages", 20_000);
    let rounds = arg("--rounds", 2).max(1);
    let messages = workload(count);
    let parts: usize = messages.iter().map(|m| m.parts.len()).sum();
    let chars: usize = messages
        .iter()
        .flat_map(|m| &m.parts)
        .map(|p| p.data.len())
        .sum();
    println!(
        "workload: {count} messages, {parts} parts, {:.1} MiB of part JSON; one transaction per message",
        chars as f64 / (1024.0 * 1024.0)
    );

    let dir = tempfile::tempdir().unwrap();
    let session = new_id(Prefix::Session);
    let (mut best_generated, mut best_trait, mut best_raw) =
        (Duration::MAX, Duration::MAX, Duration::MAX);
    for round in 0..rounds {
        let generated_path = fresh_db(dir.path(), &format!("generated-{round}.db"), &session);
        let trait_path = fresh_db(dir.path(), &format!("trait-{round}.db"), &session);
        let raw_path = fresh_db(dir.path(), &format!("raw-{round}.db"), &session);
        // Rotate which path goes first, so none always gets the coldest or warmest disk.
        let mut timings = [Duration::ZERO; 3];
        for k in 0..3 {
            let which = (round + k) % 3;
            timings[which] = match which {
                0 => run_generated(&generated_path, &session, &messages),
                1 => run_trait(&trait_path, &session, &messages),
                _ => run_raw(&raw_path, &session, &messages),
            };
        }
        let [generated, via_trait, raw] = timings;
        verify(&generated_path, count, parts);
        verify(&trait_path, count, parts);
        verify(&raw_path, count, parts);
        println!(
            "round {}: generated {:>8.0} msg/s   trait {:>8.0} msg/s   raw {:>8.0} msg/s",
            round + 1,
            count as f64 / generated.as_secs_f64(),
            count as f64 / via_trait.as_secs_f64(),
            count as f64 / raw.as_secs_f64()
        );
        best_generated = best_generated.min(generated);
        best_trait = best_trait.min(via_trait);
        best_raw = best_raw.min(raw);
    }
    let generated_rate = count as f64 / best_generated.as_secs_f64();
    let trait_rate = count as f64 / best_trait.as_secs_f64();
    let raw_rate = count as f64 / best_raw.as_secs_f64();
    println!("generated (Database::write + queries): {generated_rate:>8.0} messages/s");
    println!("trait (&mut dyn Queries, SQLite):       {trait_rate:>8.0} messages/s");
    println!("raw rusqlite loop, identical SQL:       {raw_rate:>8.0} messages/s");
    println!(
        "ratio generated/raw: {:.3}x (target >= 0.9x)",
        generated_rate / raw_rate
    );
    println!(
        "ratio trait/generated: {:.3}x (target >= 0.97x: the trait layer costs nothing)",
        trait_rate / generated_rate
    );
}
