//! Kiro CLI and the Amazon Q Developer CLI before it (aws/amazon-q-developer-cli): one
//! SQLite database, `data.sqlite3` in `kiro-cli` (or `amazon-q`) under the platform's local
//! data folder (`${XDG_DATA_HOME:-~/.local/share}`, `~/Library/Application Support`,
//! `%LOCALAPPDATA%`). Its `conversations_v2` table keeps each conversation (`key`: the
//! folder it was held in, `conversation_id`, `value`: the conversation as JSON, and its
//! times in ms); builds before it kept one per folder in `conversations` (`key`, `value`),
//! read when `conversations_v2` is not there. Only those tables are read: the database
//! also keeps the user's sign-in (`auth_kv`) and telemetry credentials (`state`), which
//! Scribe never reads. Kiro CLI 2 keeps each session in a file of its own instead, in
//! `${KIRO_HOME:-~/.kiro}/sessions/cli` (the `sessions` module).
//!
//! Mapping (`crates/chat-cli/src/cli/chat/conversation.rs` and `message.rs`): a
//! conversation's `history` is a list of turns, `{user, assistant, request_metadata}`:
//! - the user's `content` is `{"Prompt": {prompt}}` (the user's words), `{"ToolUseResults":
//!   {tool_use_results}}` (what the tools the reply before asked for returned: each settles
//!   its call, a `status` of `Error` fails it; its `Text` and `Json` blocks are the output)
//!   or `{"CancelledToolUses": {prompt, tool_use_results}}` (calls the user cancelled, then
//!   what they said instead); what the CLI adds to a prompt (`additional_context`) is not
//!   the user's and is left out;
//! - the reply is `{"Response": {message_id, content, thinking}}` or `{"ToolUse": {…,
//!   tool_uses}}`: reasoning (`thinking.text`, its `signature`), text, and tool calls (the
//!   tool's `orig_name` and `orig_args`, as the user's configuration names them, else
//!   `name` and `args`);
//! - times: a prompt's `timestamp` (RFC 3339), else its turn's `request_start_timestamp_ms`;
//!   a reply starts at its request and ends at `stream_end_timestamp_ms`; a turn without
//!   either takes the time before it (the conversation's start for the first);
//! - the model is the turn's `request_metadata.model_id`, else the conversation's
//!   (`model_info.model_id`, an older build's `model`); the folder is the row's `key`; the
//!   summary `/compact` wrote (`latest_summary`) is the session's summary;
//! - no usage: Kiro and Amazon Q bill by request and credits, and keep no token counts.
//!
//! A conversation whose row did not change (its update time and size; for an older build's
//! row, which keeps no times, its size and the start its first import gave it, kept in the
//! fingerprint) is not read again. A conversation `/compact` or `/clear` cut short keeps in
//! Scribe what an earlier import stored of it.

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use scribe_message::{Part, Role, ToolState};
use serde_json::Value;

use super::{
    Batches, FileReport, Importer, Recorded, Times, Unit, array_of, columns, find_db, message,
    numbered, open_source_db, reasoning, rows, settle_call, str_of, text, tool,
};
use crate::Source;
use crate::env::Env;
use crate::error::{ImportError, Result};
use crate::record::{Batch, MessageRec, Resume, SessionRec};
use crate::time;

const SRC: Source = Source::Kiro;

mod sessions;

/// The database's file name.
const DB: &str = "data.sqlite3";

/// The folders (under the local data folder) the CLI has kept its database in: Kiro's, then
/// Amazon Q's.
const FOLDERS: [&str; 2] = ["kiro-cli", "amazon-q"];

/// The Kiro CLI (and Amazon Q Developer CLI) importer.
#[derive(Debug, Clone, Copy)]
pub struct Kiro;

impl Importer for Kiro {
    fn source(&self) -> Source {
        SRC
    }

    /// `kiro-cli` and `amazon-q` in the local data folder and Kiro CLI 2's session folder,
    /// `${KIRO_HOME:-~/.kiro}/sessions/cli`: those that exist (else the first).
    fn default_roots(&self, env: &Env) -> Vec<PathBuf> {
        let local = if cfg!(windows) {
            env.var("LOCALAPPDATA").map(PathBuf::from)
        } else if cfg!(target_os = "macos") {
            env.home_join("Library/Application Support")
        } else {
            env.var("XDG_DATA_HOME")
                .map(|d| env.expand(d))
                .or_else(|| env.home_join(".local/share"))
        };
        let sessions = env
            .var("KIRO_HOME")
            .map(|d| env.expand(d))
            .or_else(|| env.home_join(".kiro"))
            .map(|kiro| kiro.join("sessions/cli"));
        let mut candidates: Vec<PathBuf> = local
            .map(|local| FOLDERS.iter().map(|f| local.join(f)).collect())
            .unwrap_or_default();
        candidates.extend(sessions);
        super::existing_or_first(candidates)
    }

    /// The CLI's database in `root` (or `root` itself), else Kiro CLI 2's session files
    /// below it.
    fn discover(&self, root: &Path, out: &mut Vec<PathBuf>) -> Result<()> {
        if find_db(root, &[DB], out) {
            return Ok(());
        }
        if root.is_file() {
            return super::walk(root, out, sessions::is_session);
        }
        super::walk(root, out, sessions::is_session_file)
    }

    /// A session file's metadata; the database's write-ahead log.
    fn companions(&self, path: &Path) -> Vec<PathBuf> {
        if sessions::is_session(path) {
            vec![sessions::metadata_of(path)]
        } else {
            vec![super::wal_of(path)]
        }
    }

    fn read(&self, unit: &Unit<'_>, out: &mut Batch, report: &mut FileReport) -> Result<Resume> {
        let path = unit.path;
        if sessions::is_session(path) {
            return sessions::read(unit, out, report);
        }
        let conn = open_source_db(path)?;
        let db = |source| ImportError::source_db(path, source);
        let v2 = !columns(&conn, "conversations_v2").map_err(db)?.is_empty();
        let sql = if v2 {
            "SELECT key, conversation_id, created_at, updated_at, length(value) AS size \
             FROM conversations_v2"
        } else if !columns(&conn, "conversations").map_err(db)?.is_empty() {
            "SELECT key, NULL AS conversation_id, NULL AS created_at, NULL AS updated_at, \
             length(value) AS size FROM conversations"
        } else {
            return Err(ImportError::Malformed {
                path: path.to_owned(),
                what: "Kiro or Amazon Q CLI database",
                reason: "it has no conversations table".to_owned(),
            });
        };
        let mut listed = rows(&conn, sql, []).map_err(db)?;
        fn order_of(c: &Value) -> (f64, &str) {
            let created = c.get("created_at").and_then(Value::as_f64).unwrap_or(0.0);
            let id = str_of(c, "conversation_id").or_else(|| str_of(c, "key"));
            (created, id.unwrap_or(""))
        }
        let mut batches = Batches::new(unit, &mut listed, order_of);
        while let Some(c) = batches.next(&listed, out.messages.len()) {
            let key = str_of(c, "key").unwrap_or("");
            let size = c.get("size").and_then(Value::as_i64).unwrap_or(0);
            let updated = c.get("updated_at").and_then(Value::as_i64);
            let value: Option<String> = if v2 {
                conn.query_row(
                    "SELECT value FROM conversations_v2 WHERE key = ?1 AND conversation_id = ?2",
                    [key, str_of(c, "conversation_id").unwrap_or("")],
                    |r| r.get(0),
                )
            } else {
                conn.query_row(
                    "SELECT value FROM conversations WHERE key = ?1",
                    [key],
                    |r| r.get(0),
                )
            }
            .ok();
            let Some(state) = value.and_then(|v| serde_json::from_str::<Value>(&v).ok()) else {
                report.malformed(path, None, format!("the conversation of {key} is not JSON"));
                continue;
            };
            let Some(id) = str_of(c, "conversation_id")
                .or_else(|| str_of(&state, "conversation_id"))
                .filter(|id| !id.is_empty())
                .map(str::to_owned)
            else {
                report.malformed(path, None, format!("the conversation of {key} has no id"));
                continue;
            };
            // An older build's row keeps no times: the start its first import gave it is
            // kept with what was seen of it.
            let recorded = Recorded::of(unit, SRC, &id)?;
            let seen = format!("{}:{size}", updated.unwrap_or(0));
            if recorded.unchanged(&seen) {
                continue;
            }
            let first_time = first_time(&state);
            let created = c
                .get("created_at")
                .and_then(Value::as_i64)
                .or(recorded.start)
                .or(first_time)
                .unwrap_or(unit.mtime_ms);
            let mut rec = SessionRec::new(id.clone(), created);
            rec.directory = Some(key.to_owned()).filter(|k| !k.is_empty());
            rec.fingerprint = Some(Recorded::fingerprint(created, &seen));
            let last = transcript(&state, &mut rec, out, report);
            rec.updated_at = updated.unwrap_or(last).max(last).max(created);
            if unit.since.is_some_and(|since| rec.updated_at < since) {
                out.messages.retain(|m| m.session != id);
                continue;
            }
            out.sessions.push(rec);
        }
        Ok(batches.resume())
    }
}

/// The time of a conversation's first turn that has one.
fn first_time(state: &Value) -> Option<i64> {
    array_of(state, "history").iter().find_map(turn_time)
}

/// When a turn began: its prompt's `timestamp`, else its request's start.
fn turn_time(turn: &Value) -> Option<i64> {
    turn.pointer("/user/timestamp")
        .and_then(Value::as_str)
        .and_then(time::parse)
        .or_else(|| {
            turn.pointer("/request_metadata/request_start_timestamp_ms")
                .and_then(Value::as_i64)
                .filter(|t| *t > 0)
        })
}

/// The one variant of an externally tagged enum (`{"Prompt": {…}}`): its name and body.
fn variant(v: &Value) -> Option<(&str, &Value)> {
    let map = v.as_object()?;
    (map.len() == 1)
        .then(|| map.iter().next())
        .flatten()
        .map(|(k, v)| (k.as_str(), v))
}

/// The text of a tool result's blocks: `{"Text": s}` as it is, `{"Json": v}` as JSON.
fn result_text(blocks: &[Value]) -> String {
    blocks
        .iter()
        .map(|b| match variant(b) {
            Some(("Text", Value::String(s))) => s.clone(),
            Some((_, other)) => other.to_string(),
            None => b.to_string(),
        })
        .collect::<Vec<_>>()
        .join("\n")
}

/// The turns of `state` into `out` (messages of `rec`, whose model it sets); returns the
/// time of the last.
fn transcript(
    state: &Value,
    rec: &mut SessionRec,
    out: &mut Batch,
    report: &mut FileReport,
) -> i64 {
    let sid = rec.external_id.clone();
    let conversation_model = state
        .pointer("/model_info/model_id")
        .or_else(|| state.get("model"))
        .and_then(Value::as_str)
        .filter(|m| !m.is_empty())
        .map(str::to_owned);
    let mut times = Times::new(rec.created_at);
    // A call's id → (index in out.messages, part index).
    let mut calls: HashMap<String, (usize, usize)> = HashMap::new();
    let mut models: HashMap<String, usize> = HashMap::new();
    for (i, turn) in array_of(state, "history").iter().enumerate() {
        report.records += 1;
        let meta = turn.get("request_metadata").unwrap_or(&Value::Null);
        let at = times.note(turn_time(turn));
        let assistant = turn.get("assistant").unwrap_or(&Value::Null);
        let reply = variant(assistant);
        let message_id = reply
            .and_then(|(_, body)| str_of(body, "message_id"))
            .or_else(|| str_of(meta, "message_id"))
            .map_or_else(|| format!("#{i}"), str::to_owned);
        match turn.pointer("/user/content").and_then(variant) {
            Some(("Prompt", body)) => {
                user_said(out, &sid, &message_id, str_of(body, "prompt"), at);
            }
            Some((kind @ ("ToolUseResults" | "CancelledToolUses"), body)) => {
                let cancelled = kind == "CancelledToolUses";
                for result in array_of(body, "tool_use_results") {
                    let id = str_of(result, "tool_use_id").unwrap_or("");
                    let Some(&place) = calls.get(id) else {
                        report.skip("tool_result:without-call");
                        continue;
                    };
                    let failed = cancelled
                        || str_of(result, "status")
                            .is_some_and(|s| s.eq_ignore_ascii_case("error"));
                    let output = result_text(array_of(result, "content"));
                    settle_call(&mut out.messages, place, output, failed, at);
                }
                if cancelled {
                    user_said(out, &sid, &message_id, str_of(body, "prompt"), at);
                }
            }
            Some((other, _)) => report.skip(format!("user:{other}")),
            None => report.skip("user:(none)"),
        }
        let Some((kind, body)) = reply else {
            report.skip("assistant:(none)");
            continue;
        };
        let started = meta
            .get("request_start_timestamp_ms")
            .and_then(Value::as_i64)
            .filter(|t| *t > 0)
            .unwrap_or(at)
            .max(at);
        let ended = meta
            .get("stream_end_timestamp_ms")
            .and_then(Value::as_i64)
            .filter(|t| *t > 0)
            .map(|t| t.max(started));
        times.note(Some(ended.unwrap_or(started)));
        let mut parts: Vec<Part> = Vec::new();
        if let Some(thinking) = body.get("thinking").filter(|t| t.is_object()) {
            let said = str_of(thinking, "text").unwrap_or("");
            let signature = str_of(thinking, "signature")
                .filter(|s| !s.is_empty())
                .map(str::to_owned);
            if !said.is_empty() || signature.is_some() {
                parts.push(reasoning(said, signature, None));
            }
        }
        if let Some(said) = str_of(body, "content").filter(|s| !s.trim().is_empty()) {
            parts.push(text(said, false));
        }
        let this = out.messages.len();
        if kind == "ToolUse" {
            for call in array_of(body, "tool_uses") {
                let id = str_of(call, "id").unwrap_or("");
                let name = str_of(call, "orig_name")
                    .filter(|n| !n.is_empty())
                    .or_else(|| str_of(call, "name"))
                    .unwrap_or("");
                let input = call
                    .get("orig_args")
                    .filter(|a| !a.is_null())
                    .or_else(|| call.get("args"))
                    .cloned()
                    .unwrap_or(Value::Null);
                calls.insert(id.to_owned(), (this, parts.len()));
                parts.push(tool(
                    id,
                    name,
                    input,
                    ToolState::Running {
                        started_at: started,
                    },
                ));
            }
        } else if kind != "Response" {
            report.skip(format!("assistant:{kind}"));
        }
        if parts.is_empty() {
            continue;
        }
        let key = format!("{sid}:{message_id}");
        let mut m = message(SRC, &key, Role::Assistant, started);
        m.model = str_of(meta, "model_id")
            .filter(|s| !s.is_empty())
            .map(str::to_owned)
            .or_else(|| conversation_model.clone());
        if let Some(model) = &m.model {
            *models.entry(model.clone()).or_default() += 1;
        }
        m.finished_at = ended;
        m.parts = numbered(SRC, &key, parts, started);
        out.messages.push(MessageRec::new(sid.clone(), m));
    }
    if let Some(summary) = state.get("latest_summary").and_then(Value::as_array) {
        let said = summary.first().and_then(Value::as_str).unwrap_or("");
        let meta = summary.get(1).unwrap_or(&Value::Null);
        if !said.trim().is_empty() {
            let at = times.note(
                meta.get("request_start_timestamp_ms")
                    .and_then(Value::as_i64)
                    .filter(|t| *t > 0),
            );
            let id = str_of(meta, "message_id").unwrap_or("latest");
            let key = format!("{sid}:summary:{id}");
            let mut m = message(SRC, &key, Role::Assistant, at);
            m.is_summary = true;
            m.parts = numbered(SRC, &key, vec![text(said, false)], at);
            out.messages.push(MessageRec::new(sid.clone(), m));
        }
    }
    rec.model = models
        .into_iter()
        .max_by(|a, b| a.1.cmp(&b.1).then_with(|| b.0.cmp(&a.0)))
        .map(|(m, _)| m)
        .or(conversation_model);
    times.last()
}

/// The user's message of the turn whose reply is `message_id`, when they said something.
fn user_said(out: &mut Batch, sid: &str, message_id: &str, said: Option<&str>, at: i64) {
    let Some(said) = said.filter(|s| !s.trim().is_empty()) else {
        return;
    };
    let key = format!("{sid}:{message_id}:user");
    let mut m = message(SRC, &key, Role::User, at);
    m.parts = numbered(SRC, &key, vec![text(said, false)], at);
    out.messages.push(MessageRec::new(sid.to_owned(), m));
}
