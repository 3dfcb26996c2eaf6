//! History import: a generated corpus of Claude Code and Codex files, shaped like the
//! importer's fixtures (one API response split over two lines with streaming usage, tool
//! calls answered on their own lines, Codex `token_count` events re-emitted with unchanged
//! totals, injected context), imported end to end into an empty database
//! (`scribe_import::import`: discovery, parsing, pricing, batched writes, then both search
//! indexes built in bulk by the store sink); then imported again unchanged, which must
//! cost one `stat` per file and read nothing.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Instant;

use scribe_db::Database;
use scribe_import::sink::StoreSink;
use scribe_import::{Options, Source, import, sources};
use scribe_session::Store;
use serde::Serialize;

use crate::Result;
use crate::data::Gen;
use crate::stats::{ms, rate};

/// Turns (user prompt, assistant response with a tool call, its result, final answer)
/// per generated session.
const TURNS_PER_SESSION: usize = 25;

/// What the import benchmark measured.
#[derive(Debug, Clone, Serialize)]
pub struct ImportResult {
    /// Files generated (half Claude Code, half Codex).
    pub files: usize,
    /// Bytes generated.
    pub bytes: u64,
    /// Messages stored.
    pub messages: u64,
    /// End-to-end import time, ms.
    pub import_ms: f64,
    /// Messages stored per second.
    pub import_per_s: f64,
    /// Of `import_ms`, the time spent building the search indexes at the end of each
    /// source's import, ms.
    pub index_ms: f64,
    /// Time of the second, unchanged import, ms.
    pub rerun_ms: f64,
    /// Files the second import read (must be 0).
    pub rerun_files_read: u64,
    /// Microseconds per file of the second import.
    pub rerun_us_per_file: f64,
}

/// Generates about `messages` messages of history under `dir` and imports them into a new
/// database there, twice.
pub fn run(dir: &Path, messages: usize, seed: u64) -> Result<ImportResult> {
    let mut g = Gen::new(seed);
    let root = dir.join("history");
    // Claude: 3 messages per turn (prompt, response with a call, answer); Codex the same.
    let sessions = (messages / (3 * TURNS_PER_SESSION)).max(2);
    let (mut files, mut bytes) = (0, 0);
    for i in 0..sessions {
        let (path, text) = if i % 2 == 0 {
            claude(&mut g, &root, i)
        } else {
            codex(&mut g, &root, i)
        };
        std::fs::create_dir_all(path.parent().ok_or("no parent")?)?;
        bytes += text.len() as u64;
        std::fs::write(path, text)?;
        files += 1;
    }
    let options = Options::default();
    let db = Arc::new(Database::open(dir.join("import.db"))?);
    let mut sink = StoreSink::new(Store::new(Arc::clone(&db)));
    let (stored, elapsed, indexing) = import_all(&db, &root, &options)?;
    let started = Instant::now();
    let mut reread = 0;
    for source in [Source::ClaudeCode, Source::Codex] {
        let root = root.join(source.name());
        let s = import(
            &mut sink,
            sources::importer(source),
            &[root],
            &options,
            &mut |_| {},
        )?;
        reread += s.files_read;
    }
    let rerun = started.elapsed();
    Ok(ImportResult {
        files,
        bytes,
        messages: stored,
        import_ms: ms(elapsed),
        import_per_s: rate(usize::try_from(stored)?, elapsed),
        index_ms: ms(indexing),
        rerun_ms: ms(rerun),
        rerun_files_read: reread,
        rerun_us_per_file: ms(rerun) * 1000.0 / files.max(1) as f64,
    })
}

/// Imports the corpus under `root` into `db`: messages stored, the time it took, and the
/// part of it spent indexing.
fn import_all(
    db: &Arc<Database>,
    root: &Path,
    options: &Options,
) -> Result<(u64, std::time::Duration, std::time::Duration)> {
    let mut sink = StoreSink::new(Store::new(Arc::clone(db)));
    let started = Instant::now();
    let mut stored = 0;
    let mut indexing = std::time::Duration::ZERO;
    for source in [Source::ClaudeCode, Source::Codex] {
        let root = root.join(source.name());
        let mut index_started = None;
        let s = import(
            &mut sink,
            sources::importer(source),
            &[root],
            options,
            &mut |event| {
                if matches!(event, scribe_import::Event::Indexed { .. }) && index_started.is_none()
                {
                    index_started = Some(Instant::now());
                }
            },
        )?;
        indexing += index_started.map(|t| t.elapsed()).unwrap_or_default();
        if !s.failed.is_empty() || !s.malformed.is_empty() {
            return Err(format!(
                "import of the corpus failed: {:?} {:?}",
                s.failed, s.malformed
            )
            .into());
        }
        stored += s.written.messages_inserted;
    }
    Ok((stored, started.elapsed(), indexing))
}

fn json(s: &str) -> String {
    serde_json::to_string(s).unwrap_or_default()
}

/// A Claude Code session file: per turn a prompt, a response written as two lines (text,
/// then a tool call, the first with a partial output count), the tool result, an answer.
fn claude(g: &mut Gen, root: &Path, i: usize) -> (PathBuf, String) {
    let sid = format!("{:08x}-0000-4000-8000-{:012x}", i, i);
    let path = root
        .join("claude-code")
        .join(format!("-work-project-{}", i % 7))
        .join(format!("{sid}.jsonl"));
    let mut t = 1_760_000_000_000 + (i as i64) * 3_600_000;
    let mut out = String::new();
    let mut parent = "null".to_owned();
    let env = |uuid: &str, parent: &str, t: i64| {
        format!(
            "\"uuid\":\"{uuid}\",\"parentUuid\":{parent},\"sessionId\":\"{sid}\",\"timestamp\":\"{}\",\"cwd\":\"/work/project\",\"isSidechain\":false,\"userType\":\"external\",\"version\":\"2.1.200\",\"gitBranch\":\"main\"",
            scribe_db::calendar::rfc3339(t)
        )
    };
    for turn in 0..TURNS_PER_SESSION {
        let u = format!("u-{i}-{turn}");
        let prompt = g.text(40, 400);
        let _ = writeln!(
            out,
            "{{\"type\":\"user\",{},\"message\":{{\"role\":\"user\",\"content\":{}}}}}",
            env(&u, &parent, t),
            json(&prompt)
        );
        t += 2_000;
        let (a1, a2) = (format!("a1-{i}-{turn}"), format!("a2-{i}-{turn}"));
        let (mid, rid, call) = (
            format!("msg_{i}_{turn}"),
            format!("req_{i}_{turn}"),
            format!("toolu_{i}_{turn}"),
        );
        let usage = |out_tokens: usize| {
            format!(
                "{{\"input_tokens\":{},\"cache_creation_input_tokens\":{},\"cache_read_input_tokens\":{},\"cache_creation\":{{\"ephemeral_5m_input_tokens\":{},\"ephemeral_1h_input_tokens\":0}},\"output_tokens\":{out_tokens},\"service_tier\":\"standard\"}}",
                5 + turn,
                300 + turn * 10,
                15_000 + turn * 400,
                300 + turn * 10
            )
        };
        let _ = writeln!(
            out,
            "{{\"type\":\"assistant\",{},\"requestId\":\"{rid}\",\"message\":{{\"id\":\"{mid}\",\"type\":\"message\",\"role\":\"assistant\",\"model\":\"claude-sonnet-4-5-20250929\",\"content\":[{{\"type\":\"text\",\"text\":{}}}],\"stop_reason\":null,\"usage\":{}}}}}",
            env(&a1, &format!("\"{u}\""), t),
            json(&g.text(60, 600)),
            usage(30)
        );
        let _ = writeln!(
            out,
            "{{\"type\":\"assistant\",{},\"requestId\":\"{rid}\",\"message\":{{\"id\":\"{mid}\",\"type\":\"message\",\"role\":\"assistant\",\"model\":\"claude-sonnet-4-5-20250929\",\"content\":[{{\"type\":\"tool_use\",\"id\":\"{call}\",\"name\":\"Bash\",\"input\":{{\"command\":{}}}}}],\"stop_reason\":\"tool_use\",\"usage\":{}}}}}",
            env(&a2, &format!("\"{a1}\""), t + 300),
            json(&g.text(10, 60)),
            usage(180 + turn)
        );
        t += 1_500;
        let r = format!("r-{i}-{turn}");
        let output = g.text(100, 1200);
        let _ = writeln!(
            out,
            "{{\"type\":\"user\",{},\"message\":{{\"role\":\"user\",\"content\":[{{\"type\":\"tool_result\",\"tool_use_id\":\"{call}\",\"content\":{},\"is_error\":false}}]}},\"toolUseResult\":{{\"stdout\":{},\"stderr\":\"\",\"interrupted\":false}}}}",
            env(&r, &format!("\"{a2}\""), t),
            json(&output),
            json(&output)
        );
        t += 2_500;
        let f = format!("f-{i}-{turn}");
        let _ = writeln!(
            out,
            "{{\"type\":\"assistant\",{},\"requestId\":\"{rid}b\",\"message\":{{\"id\":\"{mid}b\",\"type\":\"message\",\"role\":\"assistant\",\"model\":\"claude-sonnet-4-5-20250929\",\"content\":[{{\"type\":\"text\",\"text\":{}}}],\"stop_reason\":\"end_turn\",\"usage\":{}}}}}",
            env(&f, &format!("\"{r}\""), t),
            json(&g.text(80, 800)),
            usage(90 + turn)
        );
        parent = format!("\"{f}\"");
        t += 30_000;
    }
    (path, out)
}

/// A Codex rollout: meta, turn context, and per turn a prompt (with its event copy and
/// injected context), reasoning, a function call, a token count (re-emitted once), the
/// call's output, an answer and its token count.
fn codex(g: &mut Gen, root: &Path, i: usize) -> (PathBuf, String) {
    let id = format!("019c{:04x}-0000-7000-8000-{:012x}", i % 0xffff, i);
    let mut t = 1_760_000_000_000 + (i as i64) * 3_600_000;
    let path = root
        .join("codex")
        .join("sessions/2025/10/09")
        .join(format!("rollout-2025-10-09T10-00-00-{id}.jsonl"));
    let mut out = String::new();
    let line = |out: &mut String, t: i64, kind: &str, payload: String| {
        let _ = writeln!(
            out,
            "{{\"timestamp\":\"{}\",\"type\":\"{kind}\",\"payload\":{payload}}}",
            scribe_db::calendar::rfc3339(t)
        );
    };
    line(
        &mut out,
        t,
        "session_meta",
        format!(
            "{{\"id\":\"{id}\",\"timestamp\":\"{}\",\"cwd\":\"/work/project\",\"originator\":\"codex_cli_rs\",\"cli_version\":\"0.104.0\",\"source\":\"cli\",\"model_provider\":\"openai\"}}",
            scribe_db::calendar::rfc3339(t)
        ),
    );
    line(
        &mut out,
        t,
        "turn_context",
        "{\"cwd\":\"/work/project\",\"model\":\"gpt-4.1\",\"effort\":\"high\"}".to_owned(),
    );
    let (mut input, mut cached, mut output, mut reasoning) = (0_i64, 0_i64, 0_i64, 0_i64);
    for turn in 0..TURNS_PER_SESSION {
        let prompt = g.text(40, 400);
        line(
            &mut out,
            t,
            "response_item",
            "{\"type\":\"message\",\"role\":\"user\",\"content\":[{\"type\":\"input_text\",\"text\":\"<environment_context>\\n  <cwd>/work/project</cwd>\\n</environment_context>\"}]}".to_owned(),
        );
        line(
            &mut out,
            t,
            "response_item",
            format!(
                "{{\"type\":\"message\",\"role\":\"user\",\"content\":[{{\"type\":\"input_text\",\"text\":{}}}]}}",
                json(&prompt)
            ),
        );
        line(
            &mut out,
            t,
            "event_msg",
            format!(
                "{{\"type\":\"user_message\",\"message\":{},\"images\":[]}}",
                json(&prompt)
            ),
        );
        t += 3_000;
        line(
            &mut out,
            t,
            "response_item",
            format!(
                "{{\"type\":\"reasoning\",\"summary\":[{{\"type\":\"summary_text\",\"text\":{}}}],\"content\":null,\"encrypted_content\":\"gAAAA\"}}",
                json(&g.text(30, 200))
            ),
        );
        let call = format!("call_{i}_{turn}");
        line(
            &mut out,
            t + 200,
            "response_item",
            format!(
                "{{\"type\":\"function_call\",\"name\":\"exec_command\",\"arguments\":{},\"call_id\":\"{call}\"}}",
                json(&format!("{{\"cmd\":{}}}", json(&g.text(10, 60))))
            ),
        );
        let mut count = |out: &mut String, t: i64, di: i64, dc: i64, dout: i64, dr: i64| {
            input += di;
            cached += dc;
            output += dout;
            reasoning += dr;
            let usage = |a: i64, b: i64, c: i64, d: i64| {
                format!(
                    "{{\"input_tokens\":{a},\"cached_input_tokens\":{b},\"output_tokens\":{c},\"reasoning_output_tokens\":{d},\"total_tokens\":{}}}",
                    a + c
                )
            };
            let payload = format!(
                "{{\"type\":\"token_count\",\"info\":{{\"total_token_usage\":{},\"last_token_usage\":{},\"model_context_window\":258400}}}}",
                usage(input, cached, output, reasoning),
                usage(di, dc, dout, dr)
            );
            line(out, t, "event_msg", payload.clone());
            // Codex re-emits the same count (rate-limit refresh): not a new call.
            line(out, t + 5, "event_msg", payload);
        };
        count(
            &mut out,
            t + 300,
            20_000 + (turn as i64) * 500,
            15_000,
            400,
            250,
        );
        t += 2_000;
        line(
            &mut out,
            t,
            "response_item",
            format!(
                "{{\"type\":\"function_call_output\",\"call_id\":\"{call}\",\"output\":{}}}",
                json(&g.text(100, 1200))
            ),
        );
        t += 2_000;
        line(
            &mut out,
            t,
            "response_item",
            format!(
                "{{\"type\":\"message\",\"role\":\"assistant\",\"content\":[{{\"type\":\"output_text\",\"text\":{}}}]}}",
                json(&g.text(80, 800))
            ),
        );
        count(
            &mut out,
            t + 100,
            21_000 + (turn as i64) * 500,
            19_000,
            300,
            100,
        );
        t += 30_000;
    }
    (path, out)
}
