//! Zed's agent panel: `threads/threads.db` in Zed's data folder, the SQLite database Zed
//! keeps its agent's threads in, a row per thread (`id`, `summary`, `updated_at`,
//! `data_type`, `data`): the thread as JSON, compressed with zstd when `data_type` is
//! `zstd`. Threads written since Zed's second agent (`version` `0.3.0`) and those of the
//! first (older versions, as Zed still reads them) are both read.
//!
//! Where: `${XDG_DATA_HOME:-~/.local/share}/zed/threads` (and Flatpak's
//! `~/.var/app/dev.zed.Zed/data/zed/threads`), `~/Library/Application Support/Zed/threads`
//! on macOS, `%LOCALAPPDATA%\Zed\threads` on Windows; that folder, Zed's data folder or the
//! database itself may be given.
//!
//! Mapping:
//! - a `User` message's `Text` is the user's text; a `Mention` (a file, a symbol, a thread
//!   the user attached) is synthetic text holding what the model was sent; an `Image` a
//!   file part;
//! - an `Agent` message's `Text`, `Thinking` (its signature kept; `RedactedThinking` as a
//!   reasoning part holding it) and `ToolUse` (`id`, `name`, `input`) become its parts, each
//!   call settled by the `tool_results` entry with its id (`is_error` fails it; the text of
//!   its `content`); a `Resume` (Zed going on after its tool-use limit) is skipped;
//! - first-agent threads: a message's `segments` (`text`, `thinking`, `redacted_thinking`),
//!   `tool_uses` and `tool_results` likewise; a system message is skipped;
//! - usage exists per thread only: `cumulative_token_usage` (input, output, cache
//!   written and read, kept apart as Anthropic counts them), its model calls the agent's
//!   replies; the model is the thread's `model` (`provider`, `model`);
//! - the title is the thread's `title` (`summary` before); the folder the first worktree of
//!   its `initial_project_snapshot`, whose `timestamp` is when it began (else its
//!   `updated_at` when the first import saw it: the fingerprint keeps that start, so it
//!   never moves). Messages keep no times: each takes the thread's start;
//! - a thread whose `updated_at` and size are what the last import saw is not read again.
//!
//! Not read: a thread's detailed summary, its checkpoints, and the text threads of Zed's
//! older assistant (`conversations/*.zed.json`).

use std::path::{Path, PathBuf};

use scribe_message::{Part, Role, TokenUsage, ToolState};
use serde_json::Value;

use super::{
    Batches, FileReport, Importer, Recorded, Unit, array_of, file, find_db, int_of, message,
    numbered, open_source_db, reasoning, rows, settled, str_of, text, tool, unzstd,
};
use crate::Source;
use crate::env::Env;
use crate::error::{ImportError, Result};
use crate::record::{Batch, MessageRec, Resume, SessionRec, SessionUsage, TitleRank};
use crate::time;

const SRC: Source = Source::Zed;

/// The database's file name.
const DB: &str = "threads.db";

/// The Zed importer.
#[derive(Debug, Clone, Copy)]
pub struct Zed;

impl Importer for Zed {
    fn source(&self) -> Source {
        SRC
    }

    /// Zed's `threads` folder on this platform (each place Zed keeps its data that
    /// exists, else the first).
    fn default_roots(&self, env: &Env) -> Vec<PathBuf> {
        let mut candidates: Vec<PathBuf> = Vec::new();
        if cfg!(windows) {
            candidates.extend(
                env.var("LOCALAPPDATA")
                    .map(|d| PathBuf::from(d).join("Zed")),
            );
        } else if cfg!(target_os = "macos") {
            candidates.extend(env.home_join("Library/Application Support/Zed"));
        } else {
            candidates.extend(
                env.var("XDG_DATA_HOME")
                    .map(|d| env.expand(d))
                    .or_else(|| env.home_join(".local/share"))
                    .map(|d| d.join("zed")),
            );
            candidates.extend(env.home_join(".var/app/dev.zed.Zed/data/zed"));
        }
        super::existing_or_first(candidates.into_iter().map(|d| d.join("threads")).collect())
    }

    fn discover(&self, root: &Path, out: &mut Vec<PathBuf>) -> Result<()> {
        // Zed's threads folder, or its data folder above it.
        find_db(root, &[DB, "threads/threads.db"], out);
        Ok(())
    }

    fn read(&self, unit: &Unit<'_>, out: &mut Batch, report: &mut FileReport) -> Result<Resume> {
        let path = unit.path;
        let conn = open_source_db(path)?;
        let db = |source| ImportError::source_db(path, source);
        // Each thread's id, time and size: none of its content is read until it changed.
        let mut threads = rows(
            &conn,
            "SELECT id, updated_at, length(data) AS bytes FROM threads",
            [],
        )
        .map_err(db)?;
        // By id, which never changes, so a read that goes on after a full batch neither
        // skips a thread nor reads one twice.
        fn order_of(t: &Value) -> (f64, &str) {
            (0.0, str_of(t, "id").unwrap_or(""))
        }
        let mut batches = Batches::new(unit, &mut threads, order_of);
        while let Some(t) = batches.next(&threads, out.messages.len()) {
            let Some(id) = str_of(t, "id").filter(|id| !id.is_empty()) else {
                report.malformed(path, None, "a thread without an id");
                continue;
            };
            let updated_text = str_of(t, "updated_at").unwrap_or("");
            let updated = time::parse(updated_text).unwrap_or(unit.mtime_ms);
            if unit.since.is_some_and(|since| updated < since) {
                continue;
            }
            let seen = format!("{updated_text}:{}", int_of(t, "bytes"));
            let recorded = Recorded::of(unit, SRC, id)?;
            if recorded.unchanged(&seen) {
                continue;
            }
            let stored = {
                use rusqlite::OptionalExtension;
                // Either column as whatever it holds: text or bytes, read alike.
                let bytes = |v: rusqlite::types::ValueRef<'_>| match v {
                    rusqlite::types::ValueRef::Text(b) | rusqlite::types::ValueRef::Blob(b) => {
                        b.to_vec()
                    }
                    _ => Vec::new(),
                };
                conn.query_row(
                    "SELECT data_type, data FROM threads WHERE id = ?1",
                    [id],
                    |r| {
                        let kind = String::from_utf8_lossy(&bytes(r.get_ref(0)?)).into_owned();
                        Ok((kind, bytes(r.get_ref(1)?)))
                    },
                )
                .optional()
                .map_err(db)?
            };
            let Some((kind, data)) = stored else { continue };
            let thread = match decode(&kind, &data) {
                Ok(v @ Value::Object(_)) => v,
                Ok(_) => {
                    report.malformed(path, None, format!("thread {id} is not an object"));
                    continue;
                }
                Err(why) => {
                    report.malformed(path, None, format!("thread {id}: {why}"));
                    continue;
                }
            };
            drop(data);
            let mut rec = session(&thread, id, updated, recorded.start);
            rec.fingerprint = Some(Recorded::fingerprint(rec.created_at, &seen));
            let replies = transcript(&rec, &thread, out, report, path);
            if let Some(usage) = &mut rec.usage_total {
                usage.api_calls = replies;
            }
            out.sessions.push(rec);
        }
        Ok(batches.resume())
    }
}

/// A thread's JSON from its stored form: zstd-compressed (`zstd`) or as it is (`json`).
fn decode(kind: &str, data: &[u8]) -> std::result::Result<Value, String> {
    let json = match kind {
        "json" => data.to_vec(),
        "zstd" => unzstd(data)?,
        other => {
            return Err(format!(
                "stored as {other:?}, which this build does not read"
            ));
        }
    };
    serde_json::from_slice(&json).map_err(|e| e.to_string())
}

/// The session of thread `id` (its usage without the model-call count: the transcript
/// gives that). It began when its project was first seen, else when an earlier import
/// first saw it (`known_start`), else at its last save: a start that never moves, since
/// its messages (which keep no times) take it, and their ids with it.
fn session(thread: &Value, id: &str, updated: i64, known_start: Option<i64>) -> SessionRec {
    let nonblank = |s: &&str| !s.trim().is_empty();
    let snapshot = thread
        .get("initial_project_snapshot")
        .unwrap_or(&Value::Null);
    let created = snapshot
        .get("timestamp")
        .and_then(time::of_json)
        .or(known_start)
        .unwrap_or(updated)
        .min(updated);
    let mut rec = SessionRec::new(id, created);
    rec.updated_at = updated;
    rec.directory = snapshot
        .get("worktree_snapshots")
        .and_then(Value::as_array)
        .and_then(|w| w.first())
        .and_then(|w| str_of(w, "worktree_path"))
        .filter(nonblank)
        .map(str::to_owned);
    rec.title = str_of(thread, "title")
        .or_else(|| str_of(thread, "summary"))
        .filter(nonblank)
        .map(|t| (t.trim().to_owned(), TitleRank::Source));
    let model = thread.get("model").unwrap_or(&Value::Null);
    rec.model = str_of(model, "model").filter(nonblank).map(str::to_owned);
    rec.billing_provider = str_of(model, "provider")
        .filter(nonblank)
        .map(str::to_owned);
    let usage = thread.get("cumulative_token_usage").unwrap_or(&Value::Null);
    rec.usage_total = Some(SessionUsage {
        tokens: TokenUsage {
            input: int_of(usage, "input_tokens"),
            output: int_of(usage, "output_tokens"),
            cache_write: int_of(usage, "cache_creation_input_tokens"),
            cache_read: int_of(usage, "cache_read_input_tokens"),
            reasoning: 0,
        },
        api_calls: 0,
        reported_cost: None,
        model: rec.model.clone(),
        cost_usd: 0.0,
        cost_flags: 0,
    });
    rec
}

/// The messages of one thread into `out`; returns the agent's replies among them.
fn transcript(
    rec: &SessionRec,
    thread: &Value,
    out: &mut Batch,
    report: &mut FileReport,
    path: &Path,
) -> i64 {
    let sid = rec.external_id.as_str();
    let at = rec.created_at;
    let mut replies = 0;
    let messages = array_of(thread, "messages");
    for (n, m) in messages.iter().enumerate() {
        report.records += 1;
        let (role, key, parts) = match m {
            Value::Object(o) if o.contains_key("User") => {
                let user = &o["User"];
                let key = str_of(user, "id").map_or_else(|| format!("#{n}"), str::to_owned);
                (Role::User, key, user_parts(user, report))
            }
            Value::Object(o) if o.contains_key("Agent") => (
                Role::Assistant,
                format!("#{n}"),
                agent_parts(&o["Agent"], at, report),
            ),
            Value::String(s) if s == "Resume" => {
                report.skip("message:resume");
                continue;
            }
            Value::Object(o) if o.contains_key("role") => match str_of(m, "role") {
                // A first-agent thread's message.
                Some("user") => (Role::User, legacy_key(m, n), legacy_parts(m, at, report)),
                Some("assistant") => (
                    Role::Assistant,
                    legacy_key(m, n),
                    legacy_parts(m, at, report),
                ),
                Some(other) => {
                    report.skip(format!("message:{other}"));
                    continue;
                }
                None => {
                    report.malformed(path, None, format!("a message of {sid} without a role"));
                    continue;
                }
            },
            _ => {
                report.malformed(path, None, format!("a message of {sid} of no known kind"));
                continue;
            }
        };
        if parts.is_empty() {
            report.skip("message:empty");
            continue;
        }
        let key = format!("{sid}:{key}");
        let mut msg = message(SRC, &key, role, at);
        if role == Role::Assistant {
            msg.model.clone_from(&rec.model);
            replies += 1;
        }
        msg.parts = numbered(SRC, &key, parts, at);
        out.messages.push(MessageRec::new(sid.to_owned(), msg));
    }
    replies
}

/// A first-agent message's key: its own id (a number), else its place.
fn legacy_key(m: &Value, n: usize) -> String {
    match m.get("id") {
        Some(Value::Number(id)) => format!("m{id}"),
        _ => format!("#{n}"),
    }
}

/// A user message's parts (see the module's mapping).
fn user_parts(user: &Value, report: &mut FileReport) -> Vec<Part> {
    let mut parts = Vec::new();
    for content in array_of(user, "content") {
        match tagged(content) {
            Some(("Text", Value::String(said))) if !said.trim().is_empty() => {
                parts.push(text(said.as_str(), false));
            }
            Some(("Text", _)) => {}
            Some(("Mention", mention)) => {
                if let Some(said) = str_of(mention, "content").filter(|c| !c.trim().is_empty()) {
                    parts.push(text(said, true));
                }
            }
            Some(("Image", image)) => parts.push(zed_image(image)),
            Some((other, _)) => report.skip(format!("content:{other}")),
            None => report.skip("content:untyped"),
        }
    }
    parts
}

/// An agent message's parts: its content in order, each call settled by its result.
fn agent_parts(agent: &Value, at: i64, report: &mut FileReport) -> Vec<Part> {
    let mut parts = Vec::new();
    for content in array_of(agent, "content") {
        match tagged(content) {
            Some(("Text", Value::String(said))) if !said.trim().is_empty() => {
                parts.push(text(said.as_str(), false));
            }
            Some(("Text", _)) => {}
            Some(("Thinking", thinking)) => {
                let signature = str_of(thinking, "signature")
                    .filter(|s| !s.is_empty())
                    .map(str::to_owned);
                parts.push(reasoning(
                    str_of(thinking, "text").unwrap_or(""),
                    signature,
                    None,
                ));
            }
            Some(("RedactedThinking", data)) => {
                parts.push(reasoning(
                    "",
                    None,
                    Some(serde_json::json!({ "data": data })),
                ));
            }
            Some(("ToolUse", call)) => {
                parts.push(tool_use(call, at));
            }
            Some((other, _)) => report.skip(format!("content:{other}")),
            None => report.skip("content:untyped"),
        }
    }
    if let Some(results) = agent.get("tool_results").and_then(Value::as_object) {
        for result in results.values() {
            settle(&mut parts, result, at, report);
        }
    }
    parts
}

/// A first-agent message's parts: its segments, calls and their results.
fn legacy_parts(m: &Value, at: i64, report: &mut FileReport) -> Vec<Part> {
    let mut parts = Vec::new();
    for segment in array_of(m, "segments") {
        match str_of(segment, "type") {
            Some("text") => {
                if let Some(said) = str_of(segment, "text").filter(|t| !t.trim().is_empty()) {
                    parts.push(text(said, false));
                }
            }
            Some("thinking") => {
                let signature = str_of(segment, "signature")
                    .filter(|s| !s.is_empty())
                    .map(str::to_owned);
                parts.push(reasoning(
                    str_of(segment, "text").unwrap_or(""),
                    signature,
                    None,
                ));
            }
            Some("redacted_thinking") => parts.push(reasoning("", None, Some(segment.clone()))),
            Some(other) => report.skip(format!("segment:{other}")),
            None => report.skip("segment:untyped"),
        }
    }
    for call in array_of(m, "tool_uses") {
        parts.push(tool_use(call, at));
    }
    for result in array_of(m, "tool_results") {
        settle(&mut parts, result, at, report);
    }
    parts
}

/// A `ToolUse` (or a first-agent `tool_uses` entry) as a running tool part.
fn tool_use(call: &Value, at: i64) -> Part {
    let input = match call.get("input") {
        Some(v) if !v.is_null() => v.clone(),
        _ => str_of(call, "raw_input")
            .and_then(|raw| serde_json::from_str(raw).ok())
            .unwrap_or_else(|| Value::Object(serde_json::Map::new())),
    };
    tool(
        str_of(call, "id").unwrap_or(""),
        str_of(call, "name").unwrap_or(""),
        input,
        ToolState::Running { started_at: at },
    )
}

/// Settles the call among `parts` that `result` (`tool_use_id`, `is_error`, `content`)
/// answers.
fn settle(parts: &mut [Part], result: &Value, at: i64, report: &mut FileReport) {
    let id = str_of(result, "tool_use_id").unwrap_or("");
    let Some(Part::Tool(call)) = parts
        .iter_mut()
        .find(|p| matches!(p, Part::Tool(t) if t.call_id == id))
    else {
        report.skip("tool_result:without-call");
        return;
    };
    let failed = result.get("is_error").and_then(Value::as_bool) == Some(true);
    let output = result_text(result.get("content").unwrap_or(&Value::Null));
    call.state = settled(output, failed, Value::Null, Some(at), at);
}

/// The text of a tool result's content, in any of the shapes Zed reads: a string,
/// `{"Text": …}`, `{"type": "text", "text": …}`, `{"text": …}`, an image (named, not kept),
/// or a list of those.
fn result_text(content: &Value) -> String {
    match content {
        Value::String(s) => s.clone(),
        Value::Array(items) => items
            .iter()
            .map(result_text)
            .filter(|t| !t.is_empty())
            .collect::<Vec<_>>()
            .join("\n"),
        Value::Object(o) => {
            let field = |name: &str| {
                o.iter()
                    .find(|(k, _)| k.eq_ignore_ascii_case(name))
                    .map(|(_, v)| v)
            };
            if let Some(Value::String(s)) = field("text") {
                s.clone()
            } else if field("image").is_some() || field("source").is_some() {
                "(an image)".to_owned()
            } else {
                content.to_string()
            }
        }
        Value::Null => String::new(),
        other => other.to_string(),
    }
}

/// An externally tagged value (`{"Text": "…"}`): its tag and what it holds.
fn tagged(v: &Value) -> Option<(&str, &Value)> {
    let o = v.as_object()?;
    if o.len() != 1 {
        return None;
    }
    o.iter().next().map(|(k, v)| (k.as_str(), v))
}

/// An image Zed keeps as base64 PNG (`source`) as a file part.
fn zed_image(image: &Value) -> Part {
    match str_of(image, "source") {
        Some(data) => file("image/png", None, format!("data:image/png;base64,{data}")),
        None => Part::Unknown(image.clone()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_results_text_is_read_from_every_shape_zed_reads() {
        let t = |v: Value| result_text(&v);
        assert_eq!(t(serde_json::json!("ok")), "ok");
        assert_eq!(t(serde_json::json!({"Text": "ok"})), "ok");
        assert_eq!(t(serde_json::json!({"type": "text", "text": "ok"})), "ok");
        assert_eq!(t(serde_json::json!([{"Text": "a"}, "b"])), "a\nb");
        assert_eq!(
            t(serde_json::json!({"Image": {"source": "x"}})),
            "(an image)"
        );
        assert_eq!(t(serde_json::json!({"other": 1})), r#"{"other":1}"#);
        assert_eq!(t(Value::Null), "");
    }

    #[test]
    fn a_thread_is_decoded_from_json_or_zstd_and_nothing_else() {
        assert_eq!(decode("json", br#"{"a":1}"#).unwrap()["a"], 1);
        assert!(
            decode("zstd", b"not zstd")
                .unwrap_err()
                .starts_with("not zstd")
        );
        assert!(decode("gzip", b"{}").unwrap_err().contains("gzip"));
        assert!(decode("json", b"{").is_err());
    }
}
