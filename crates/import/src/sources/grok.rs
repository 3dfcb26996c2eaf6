//! Grok Build (xAI's coding CLI): one folder per session,
//! `${GROK_HOME:-~/.grok}/sessions/<encoded folder>/<session id>/`, holding the
//! conversation in `chat_history.jsonl` and the session's details in `summary.json` (its
//! id, folder, times, model and generated title), read with it as a companion.
//!
//! The conversation is a log of records, each a whole message, in order; none carries a
//! time. So messages are placed at the session's start (`summary.json`'s `created_at`,
//! else the time in the session's UUIDv7 id, else the file's) a millisecond apart in file
//! order, which keeps their order and their ids stable when the file grows; the session's
//! last activity is the summary's. A changed file is read whole.
//!
//! Mapping:
//! - `user` records: text (an environment context Grok adds, `synthetic_reason`, as
//!   synthetic text) and images (`data:` URLs);
//! - `reasoning` records (the summary of the model's reasoning; the encrypted reasoning
//!   itself is opaque, only that it existed is kept) and `backend_tool_call` records (a
//!   tool the server ran, such as a web search: a completed tool part) go with the reply
//!   that follows them;
//! - `assistant` records: text, `tool_calls` (arguments as Grok wrote them, a JSON string
//!   parsed when it is JSON), `model_id`; a `tool_result` settles its call;
//! - `system` records (the system prompt) are counted as skipped.
//!
//! Usage: Grok Build keeps only the size of its context (`signals.json`), not what each
//! call read and wrote, so its sessions carry no usage and no cost (ccusage reports that
//! context size as a total with no breakdown).

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use scribe_message::{Part, Role, ToolState};
use serde_json::Value;

use super::{
    FileReport, Importer, Unit, content_text, image_url, message, numbered, reasoning,
    resume_whole, settle_call, settled, str_of, text, tool, walk,
};
use crate::Source;
use crate::env::Env;
use crate::error::Result;
use crate::record::{Batch, MessageRec, Resume, SessionRec, TitleRank};
use crate::time;

const SRC: Source = Source::Grok;

/// The conversation file of a session's folder.
const CHAT: &str = "chat_history.jsonl";
/// The session's details, beside it.
const SUMMARY: &str = "summary.json";

/// The Grok Build importer.
#[derive(Debug, Clone, Copy)]
pub struct Grok;

impl Importer for Grok {
    fn source(&self) -> Source {
        SRC
    }

    fn reads_state(&self) -> bool {
        false
    }

    fn default_roots(&self, env: &Env) -> Vec<PathBuf> {
        env.var("GROK_HOME")
            .map(|h| env.expand(h))
            .or_else(|| env.home_join(".grok"))
            .map(|h| vec![h.join("sessions")])
            .unwrap_or_default()
    }

    fn discover(&self, root: &Path, out: &mut Vec<PathBuf>) -> Result<()> {
        walk(root, out, |p| p.file_name().is_some_and(|n| n == CHAT))
    }

    fn companions(&self, path: &Path) -> Vec<PathBuf> {
        vec![path.with_file_name(SUMMARY)]
    }

    fn read(&self, unit: &Unit<'_>, out: &mut Batch, report: &mut FileReport) -> Result<Resume> {
        let path = unit.path;
        let summary: Value = std::fs::read(path.with_file_name(SUMMARY))
            .ok()
            .and_then(|bytes| serde_json::from_slice(&bytes).ok())
            .unwrap_or(Value::Null);
        let folder = path
            .parent()
            .and_then(Path::file_name)
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        let id = summary
            .pointer("/info/id")
            .and_then(Value::as_str)
            .filter(|id| !id.is_empty())
            .map_or(folder, str::to_owned);
        let created = str_of(&summary, "created_at")
            .and_then(time::parse)
            .or_else(|| uuid_v7_ms(&id))
            .unwrap_or(unit.mtime_ms);
        let mut chat = Chat::new(id, created);
        let chunk = crate::reader::read_from(path, 0, 0)?;
        for line in chunk.lines() {
            match serde_json::from_str::<Value>(line.text) {
                Ok(record) => chat.record(&record, report),
                Err(err) => report.malformed(path, Some(line.number), err.to_string()),
            }
        }
        let last = ["last_active_at", "updated_at"]
            .iter()
            .find_map(|k| str_of(&summary, k).and_then(time::parse))
            .unwrap_or(chat.at);
        if unit.since.is_none_or(|since| last >= since) {
            chat.finish(&summary, last, out);
        }
        Ok(resume_whole(&chunk))
    }
}

/// The time (ms) a UUIDv7 (`019f6851-7ec4-7ef0-…`) was made at.
fn uuid_v7_ms(id: &str) -> Option<i64> {
    let hex: String = id.chars().filter(|c| *c != '-').collect();
    if hex.len() != 32 || hex.as_bytes().get(12) != Some(&b'7') {
        return None;
    }
    i64::from_str_radix(hex.get(..12)?, 16).ok()
}

/// One session's conversation being read.
struct Chat {
    id: String,
    /// The time of the next message.
    at: i64,
    messages: Vec<MessageRec>,
    /// Reasoning and server-run tools waiting for the reply they belong to.
    pending: Vec<Part>,
    /// A call's id → (index in `messages`, part index).
    calls: HashMap<String, (usize, usize)>,
}

impl Chat {
    fn new(id: String, created: i64) -> Chat {
        Chat {
            id,
            at: created,
            messages: Vec::new(),
            pending: Vec::new(),
            calls: HashMap::new(),
        }
    }

    fn record(&mut self, r: &Value, report: &mut FileReport) {
        match str_of(r, "type").unwrap_or("") {
            "user" => {
                let synthetic = r.get("synthetic_reason").is_some_and(|s| !s.is_null());
                let parts = user_parts(r.get("content").unwrap_or(&Value::Null), synthetic);
                if parts.is_empty() {
                    report.skip("user:empty");
                    return;
                }
                self.flush_pending();
                self.push(Role::User, parts);
            }
            "reasoning" => {
                let said: Vec<&str> = r
                    .get("summary")
                    .and_then(Value::as_array)
                    .map(|s| s.iter().filter_map(|b| str_of(b, "text")).collect())
                    .unwrap_or_default();
                let meta = r
                    .get("encrypted_content")
                    .filter(|e| !e.is_null())
                    .map(|_| serde_json::json!({ "encrypted": true }));
                if said.is_empty() && meta.is_none() {
                    report.skip("reasoning:empty");
                    return;
                }
                self.pending.push(reasoning(said.join("\n\n"), None, meta));
            }
            "backend_tool_call" => {
                let kind = r.get("kind").unwrap_or(&Value::Null);
                let name = str_of(kind, "tool_type").unwrap_or("backend_tool");
                let id = str_of(kind, "id").unwrap_or("");
                let input = kind.get("action").cloned().unwrap_or(Value::Null);
                let state = match str_of(kind, "status") {
                    Some("completed") => settled(String::new(), false, Value::Null, None, self.at),
                    Some("failed") => settled("failed".into(), true, Value::Null, None, self.at),
                    _ => ToolState::Running {
                        started_at: self.at,
                    },
                };
                self.pending.push(tool(id, name, input, state));
            }
            "assistant" => self.reply(r),
            "tool_result" => {
                let id = str_of(r, "tool_call_id").unwrap_or("");
                let Some(&place) = self.calls.get(id) else {
                    report.skip("tool_result:without-call");
                    return;
                };
                let failed = r.get("is_error").and_then(Value::as_bool) == Some(true);
                let said = content_text(r.get("content").unwrap_or(&Value::Null));
                settle_call(&mut self.messages, place, said, failed, self.at);
            }
            "" => {
                report.skip("untyped");
                return;
            }
            other => {
                report.skip(other);
                return;
            }
        }
        report.records += 1;
    }

    fn reply(&mut self, r: &Value) {
        let mut parts = std::mem::take(&mut self.pending);
        let said = content_text(r.get("content").unwrap_or(&Value::Null));
        if !said.is_empty() {
            parts.push(text(said, false));
        }
        let mut calls = Vec::new();
        for call in r
            .get("tool_calls")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
        {
            let id = str_of(call, "id").unwrap_or("");
            let input = match call.get("arguments") {
                Some(Value::String(s)) => {
                    serde_json::from_str(s).unwrap_or_else(|_| Value::String(s.clone()))
                }
                None | Some(Value::Null) => Value::Object(serde_json::Map::new()),
                Some(other) => other.clone(),
            };
            calls.push((id.to_owned(), parts.len()));
            let name = str_of(call, "name").unwrap_or("");
            parts.push(tool(
                id,
                name,
                input,
                ToolState::Running {
                    started_at: self.at,
                },
            ));
        }
        let i = self.push(Role::Assistant, parts);
        self.messages[i].message.model = str_of(r, "model_id")
            .filter(|m| !m.is_empty())
            .map(str::to_owned);
        for (id, part) in calls {
            self.calls.insert(id, (i, part));
        }
    }

    /// Reasoning or server-run tools no reply followed: a reply of their own.
    fn flush_pending(&mut self) {
        if !self.pending.is_empty() {
            let parts = std::mem::take(&mut self.pending);
            self.push(Role::Assistant, parts);
        }
    }

    /// Adds a message at the next millisecond; returns its index.
    fn push(&mut self, role: Role, parts: Vec<Part>) -> usize {
        let key = format!("{}:{}", self.id, self.messages.len());
        let mut m = message(SRC, &key, role, self.at);
        m.parts = numbered(SRC, &key, parts, self.at);
        self.messages.push(MessageRec::new(self.id.clone(), m));
        self.at += 1;
        self.messages.len() - 1
    }

    /// The session and its messages into `out`.
    fn finish(mut self, summary: &Value, last: i64, out: &mut Batch) {
        self.flush_pending();
        let created = self
            .messages
            .first()
            .map_or(self.at, |m| m.message.created_at);
        let mut rec = SessionRec::new(&self.id, created);
        rec.updated_at = last.max(self.at - 1).max(created);
        rec.directory = summary
            .pointer("/info/cwd")
            .and_then(Value::as_str)
            .filter(|d| !d.is_empty())
            .map(str::to_owned);
        rec.title = str_of(summary, "generated_title")
            .map(|t| (t, TitleRank::Ai))
            .or_else(|| str_of(summary, "session_summary").map(|t| (t, TitleRank::Source)))
            .filter(|(t, _)| !t.trim().is_empty())
            .map(|(t, rank)| (t.trim().to_owned(), rank));
        rec.model = str_of(summary, "current_model_id")
            .filter(|m| !m.is_empty())
            .map(str::to_owned)
            .or_else(|| {
                self.messages
                    .iter()
                    .rev()
                    .find_map(|m| m.message.model.clone())
            });
        out.sessions.push(rec);
        out.messages.extend(self.messages);
    }
}

/// A user record's content: a string, or text and image blocks.
fn user_parts(content: &Value, synthetic: bool) -> Vec<Part> {
    let blocks = match content {
        Value::String(s) => vec![serde_json::json!({ "type": "text", "text": s })],
        Value::Array(blocks) => blocks.clone(),
        _ => Vec::new(),
    };
    blocks
        .iter()
        .filter_map(|b| match str_of(b, "type") {
            Some("text") => str_of(b, "text")
                .filter(|t| !t.is_empty())
                .map(|t| text(t, synthetic)),
            Some("image") => str_of(b, "url").map(|u| image_url(u.to_owned())),
            _ => None,
        })
        .collect()
}
