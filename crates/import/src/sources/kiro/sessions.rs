//! Kiro CLI 2 and later: a JSON Lines file per session, `<session id>.jsonl` in
//! `${KIRO_HOME:-~/.kiro}/sessions/cli`, beside `<session id>.json` (what Kiro keeps of the
//! session: its id, folder, times, model and per-turn metadata) and, while it runs, a
//! `.lock`. The conversation is appended a record at a time, `{"version": "v1", "kind":
//! …, "data": {"message_id", "content": [blocks], "meta"}}`, a block being `{"kind",
//! "data"}`:
//! - `Prompt`: the user's message, its `text` blocks (the time is its `meta.timestamp`, in
//!   seconds);
//! - `AssistantMessage`: a reply, its `text` blocks, `toolUse` blocks (`toolUseId`, `name`,
//!   `input`) as tool calls, and reasoning (`thinking` or `reasoning` blocks, their `text`);
//!   it keeps no time of its own and takes the prompt's;
//! - `ToolResults`: the results, each `toolResult` (`toolUseId`, `content` of `text` or
//!   `json` blocks, `status`) settling its call, an `error` status failing it;
//! - `Clear` (`/clear`: Kiro sends nothing before it again) and kinds not known are
//!   counted skipped; what came before stays, as it was said.
//!
//! From the metadata file: the folder (`cwd`), the title (`title`, when Kiro gave one), the
//! model (`session_state.rts_model_state.model_info`), the parent of a sub-agent's session
//! (`parent_session_id`: a task of it), and usage: each `user_turn_metadatas` entry names
//! its turn's records (`message_ids`); its token counts, when Kiro recorded any, and its
//! `total_request_count` (the model calls) go to the turn's last reply, which ends at the
//! turn's `end_timestamp`. Kiro bills in credits (`metering_usage`), which are not kept.
//!
//! A file is read whole when it or its metadata changes; messages are keyed by their
//! `message_id`, so nothing is stored twice. A last line still being written waits.

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use scribe_message::{Role, TokenUsage, ToolState};
use scribe_session::SessionKind;
use serde_json::Value;

use super::super::{
    FileReport, Recorded, Times, Unit, array_of, int_of, message, numbered, reasoning,
    resume_whole, settle_call, str_of, text, tool,
};
use super::SRC;
use crate::error::Result;
use crate::record::{Batch, MessageRec, Resume, SessionRec, TitleRank};
use crate::time;

/// Whether `path` is a session's conversation (`*.jsonl`).
pub(super) fn is_session(path: &Path) -> bool {
    path.extension().is_some_and(|e| e == "jsonl")
}

/// Whether `path`, found below a folder given, is one: a `*.jsonl` in a `cli` folder, as
/// Kiro keeps them, or beside its metadata file (so other JSON Lines files under `~/.kiro`
/// are not taken for sessions).
pub(super) fn is_session_file(path: &Path) -> bool {
    is_session(path)
        && (path
            .parent()
            .and_then(Path::file_name)
            .is_some_and(|n| n == "cli")
            || metadata_of(path).is_file())
}

/// The metadata file beside session file `path`.
pub(super) fn metadata_of(path: &Path) -> PathBuf {
    path.with_extension("json")
}

/// Reads the session file `unit.path` whole, with its metadata.
pub(super) fn read(unit: &Unit<'_>, out: &mut Batch, report: &mut FileReport) -> Result<Resume> {
    let path = unit.path;
    let chunk = crate::reader::read_from(path, 0, 0)?;
    let meta = match std::fs::read(metadata_of(path)) {
        Ok(bytes) => serde_json::from_slice::<Value>(&bytes).unwrap_or_else(|_| {
            // Being rewritten: the next import reads it whole.
            report.skip("metadata:unreadable");
            Value::Null
        }),
        Err(_) => Value::Null,
    };
    let sid = str_of(&meta, "session_id")
        .filter(|id| !id.is_empty())
        .map(str::to_owned)
        .or_else(|| path.file_stem().map(|s| s.to_string_lossy().into_owned()))
        .unwrap_or_default();
    // Its start: Kiro's, else the one the first import gave it (the file's time moves, and
    // records without a time of their own take the start).
    let created = meta
        .get("created_at")
        .and_then(time::of_json)
        .or(Recorded::of(unit, SRC, &sid)?.start)
        .unwrap_or(unit.mtime_ms);
    let model = meta
        .pointer("/session_state/rts_model_state/model_info")
        .and_then(|info| str_of(info, "model_id").or_else(|| str_of(info, "model_name")))
        .filter(|m| !m.trim().is_empty())
        .map(str::to_owned);
    let mut session = Session {
        sid: sid.clone(),
        model: model.clone(),
        times: Times::new(created),
        first: out.messages.len(),
        calls: HashMap::new(),
        replies: HashMap::new(),
    };
    for line in chunk.lines() {
        match serde_json::from_str::<Value>(line.text) {
            Ok(record) => {
                report.records += 1;
                session.record(&record, line.number, out, report);
            }
            Err(err) => report.malformed(path, Some(line.number), err.to_string()),
        }
    }
    if out.messages.len() == session.first && meta.is_null() {
        // Empty (a session just begun), or not Kiro's.
        report.skip("file:no-conversation");
        return Ok(resume_whole(&chunk));
    }
    session.usage(&meta, out);
    let mut rec = SessionRec::new(&sid, created.min(session.times.first()));
    rec.fingerprint = Some(Recorded::fingerprint(created, ""));
    rec.updated_at = [
        meta.get("updated_at").and_then(time::of_json),
        Some(session.times.last()),
    ]
    .into_iter()
    .flatten()
    .fold(rec.created_at, i64::max);
    if unit.since.is_some_and(|since| rec.updated_at < since) {
        out.messages.truncate(session.first);
        return Ok(resume_whole(&chunk));
    }
    rec.directory = str_of(&meta, "cwd")
        .filter(|d| !d.is_empty())
        .map(str::to_owned);
    rec.title = str_of(&meta, "title")
        .map(str::trim)
        .filter(|t| !t.is_empty())
        .map(|t| (t.to_owned(), TitleRank::Source));
    rec.model = model;
    if let Some(parent) = str_of(&meta, "parent_session_id").filter(|p| !p.is_empty() && *p != sid)
    {
        rec.parent = Some(parent.to_owned());
        rec.kind = SessionKind::Task;
    }
    out.sessions.push(rec);
    Ok(resume_whole(&chunk))
}

/// One session file being read.
struct Session {
    sid: String,
    model: Option<String>,
    times: Times,
    /// Where this session's messages begin in the batch.
    first: usize,
    /// A call's id → (index in the batch's messages, part index).
    calls: HashMap<String, (usize, usize)>,
    /// A reply's `message_id` → its index in the batch's messages.
    replies: HashMap<String, usize>,
}

impl Session {
    /// One record (line `number` of the file).
    fn record(&mut self, record: &Value, number: u64, out: &mut Batch, report: &mut FileReport) {
        let kind = str_of(record, "kind").unwrap_or("");
        let data = record.get("data").unwrap_or(&Value::Null);
        let message_id = str_of(data, "message_id")
            .filter(|id| !id.is_empty())
            .map_or_else(|| format!("#{number}"), str::to_owned);
        let key = format!("{}:{message_id}", self.sid);
        let blocks = array_of(data, "content");
        match kind {
            "Prompt" => {
                let at = self.times.note(
                    data.pointer("/meta/timestamp")
                        .and_then(Value::as_f64)
                        .and_then(time::epoch),
                );
                let said: Vec<&str> = blocks
                    .iter()
                    .filter(|b| str_of(b, "kind") == Some("text"))
                    .filter_map(|b| str_of(b, "data"))
                    .filter(|t| !t.trim().is_empty())
                    .collect();
                for b in blocks {
                    if let Some(other) = str_of(b, "kind").filter(|k| *k != "text") {
                        report.skip(format!("prompt:{other}"));
                    }
                }
                if said.is_empty() {
                    report.skip("prompt:empty");
                    return;
                }
                let mut m = message(SRC, &key, Role::User, at);
                m.parts = numbered(SRC, &key, vec![text(said.join("\n\n"), false)], at);
                out.messages.push(MessageRec::new(self.sid.clone(), m));
            }
            "AssistantMessage" => {
                let at = self.times.note(None);
                let this = out.messages.len();
                let mut parts = Vec::new();
                for b in blocks {
                    let inner = b.get("data").unwrap_or(&Value::Null);
                    match str_of(b, "kind") {
                        Some("text") => {
                            if let Some(said) = inner.as_str().filter(|t| !t.trim().is_empty()) {
                                parts.push(text(said, false));
                            }
                        }
                        Some("thinking" | "reasoning") => {
                            let said = inner.as_str().or_else(|| str_of(inner, "text"));
                            if let Some(said) = said.filter(|t| !t.trim().is_empty()) {
                                let signature = str_of(inner, "signature").map(str::to_owned);
                                parts.push(reasoning(said, signature, None));
                            }
                        }
                        Some("toolUse") => {
                            let id = str_of(inner, "toolUseId").unwrap_or("");
                            let input = inner.get("input").cloned().unwrap_or(Value::Null);
                            if !id.is_empty() {
                                self.calls.insert(id.to_owned(), (this, parts.len()));
                            }
                            parts.push(tool(
                                id,
                                str_of(inner, "name").unwrap_or(""),
                                input,
                                ToolState::Running { started_at: at },
                            ));
                        }
                        other => report.skip(format!("assistant:{}", other.unwrap_or("?"))),
                    }
                }
                if parts.is_empty() {
                    report.skip("assistant:empty");
                    return;
                }
                let mut m = message(SRC, &key, Role::Assistant, at);
                m.model = self.model.clone();
                m.parts = numbered(SRC, &key, parts, at);
                self.replies.insert(message_id, this);
                out.messages.push(MessageRec::new(self.sid.clone(), m));
            }
            "ToolResults" => {
                let at = self.times.note(None);
                for b in blocks
                    .iter()
                    .filter(|b| str_of(b, "kind") == Some("toolResult"))
                {
                    let result = b.get("data").unwrap_or(&Value::Null);
                    let id = str_of(result, "toolUseId").unwrap_or("");
                    let Some(&place) = self.calls.get(id) else {
                        report.skip("tool_result:without-call");
                        continue;
                    };
                    let failed =
                        str_of(result, "status").is_some_and(|s| s.eq_ignore_ascii_case("error"));
                    let output = result_text(array_of(result, "content"));
                    settle_call(&mut out.messages, place, output, failed, at);
                }
            }
            other => report.skip(if other.is_empty() { "?" } else { other }),
        }
    }

    /// Each turn's usage (from the metadata's `user_turn_metadatas`) on its last reply.
    fn usage(&self, meta: &Value, out: &mut Batch) {
        let turns = meta
            .pointer("/session_state/conversation_metadata/user_turn_metadatas")
            .and_then(Value::as_array)
            .map_or(&[][..], Vec::as_slice);
        for turn in turns {
            let Some(&last) = array_of(turn, "message_ids")
                .iter()
                .filter_map(|id| self.replies.get(id.as_str()?))
                .max()
            else {
                continue;
            };
            let Some(reply) = out.messages.get_mut(last) else {
                continue;
            };
            let (input, output) = (
                int_of(turn, "input_token_count"),
                int_of(turn, "output_token_count"),
            );
            if input > 0 || output > 0 {
                reply.message.usage = TokenUsage {
                    input,
                    output,
                    ..TokenUsage::default()
                };
                reply.api_calls = int_of(turn, "total_request_count").max(1);
            }
            if let Some(end) = turn
                .get("end_timestamp")
                .and_then(Value::as_f64)
                .and_then(time::epoch)
            {
                reply.message.finished_at = Some(end.max(reply.message.created_at));
            }
        }
    }
}

/// A tool result's text: `text` blocks as they are; a `json` block's `stdout` and `stderr`
/// (a shell command's), else its JSON.
fn result_text(blocks: &[Value]) -> String {
    blocks
        .iter()
        .map(|b| {
            let data = b.get("data").unwrap_or(&Value::Null);
            match data {
                Value::String(s) => s.clone(),
                Value::Object(_)
                    if data.get("stdout").is_some() || data.get("stderr").is_some() =>
                {
                    [str_of(data, "stdout"), str_of(data, "stderr")]
                        .into_iter()
                        .flatten()
                        .filter(|s| !s.is_empty())
                        .collect::<Vec<_>>()
                        .join("\n")
                }
                other => other.to_string(),
            }
        })
        .collect::<Vec<_>>()
        .join("\n")
}
