//! pi (the pi coding agent) and OpenClaw, which records its agents' sessions in pi's
//! session format: one JSON Lines file per session, a header line (`type: "session"`,
//! its `id`, `cwd`, and `parentSession` when it was forked from another), then entries
//! linked into a tree by `id`/`parentId` (pi's `packages/coding-agent/src/core/
//! session-manager.ts`, format version 3; versions 1 and 2 read too).
//!
//! Where: pi keeps them in `${PI_CODING_AGENT_SESSION_DIR}`, else
//! `${PI_CODING_AGENT_DIR:-~/.pi/agent}/sessions/<encoded cwd>/*.jsonl`; OpenClaw in
//! `${OPENCLAW_STATE_DIR:-~/.openclaw}/agents/<agent>/sessions/*.jsonl` (else under
//! `~/.clawdbot`, `~/.moldbot` or `~/.moltbot`, its earlier names, as OpenClaw looks for
//! them), with the transcripts a reset or a deletion set aside (`*.jsonl.reset.<time>`,
//! `*.jsonl.deleted.<time>`) read as well; from 2026.9 on, in each agent's database,
//! `agents/<agent>/agent/openclaw-agent.sqlite` (the `store` module).
//!
//! A file is read whole when it changes (pi rewrites a file when it upgrades its format;
//! ids derive from the entries', so nothing is stored twice). Every entry is imported in
//! file order, the branches a `/tree` navigation left included: they are what was said.
//!
//! Mapping:
//! - `message` entries by role: `user` (text, images), `assistant` (text, `thinking` as
//!   reasoning with its signature, `toolCall` as a tool part settled by the `toolResult`
//!   with its `toolCallId`; its `model` and `provider`; `stopReason` as the finish reason,
//!   an `error` or `aborted` one kept as the message's error), `bashExecution` (a command
//!   the user ran: `!command` as typed and its output as synthetic text), `custom` (an
//!   extension's message to the model: synthetic text);
//! - usage per reply: `input` (without the cache), `cacheRead`, `cacheWrite`, `output`
//!   (holding the `reasoning`, which Scribe keeps apart); the cost is pi's own
//!   (`cost.total`) where it is above zero, else estimated;
//! - a `compaction` entry is the session's summary, the messages from its
//!   `firstKeptEntryId` on (which pi keeps sending after it) kept with it
//!   (`CompactionPart::keep_from`); a `branch_summary` (what a left branch
//!   did) and a `custom_message` are synthetic text; `session_info`'s `name` is the title
//!   the user gave; `model_change`, `thinking_level_change`, `label` and `custom` entries
//!   carry nothing to keep and are counted as skipped.

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use scribe_message::{CompactionPart, FinishReason, Part, Role, TokenUsage, ToolState};
use scribe_session::SessionKind;
use serde_json::Value;

use super::{
    FileReport, Importer, Unit, content_text, f64_of, inline_image, int_of, message, numbered,
    reasoning, resume_whole, settle_call, str_of, text, tool,
};
use crate::Source;
use crate::env::Env;
use crate::error::Result;
use crate::record::{Batch, MessageRec, Resume, SessionRec, TitleRank};
use crate::time;

mod store;

/// pi, or OpenClaw: the same session format in different places.
#[derive(Debug, Clone, Copy)]
pub struct PiFamily {
    source: Source,
}

/// The pi coding agent.
pub const PI: PiFamily = PiFamily { source: Source::Pi };

/// OpenClaw.
pub const OPENCLAW: PiFamily = PiFamily {
    source: Source::OpenClaw,
};

/// Whether `path` is a session file: `*.jsonl`, or (OpenClaw) a transcript set aside,
/// `*.jsonl.reset.<time>` or `*.jsonl.deleted.<time>`.
fn is_session_file(path: &Path) -> bool {
    let Some(name) = path.file_name().map(|n| n.to_string_lossy()) else {
        return false;
    };
    name.ends_with(".jsonl") || name.contains(".jsonl.reset.") || name.contains(".jsonl.deleted.")
}

/// Whether `path` is OpenClaw's agent database.
fn is_store(path: &Path) -> bool {
    path.file_name().is_some_and(|n| n == store::DB)
}

impl Importer for PiFamily {
    fn source(&self) -> Source {
        self.source
    }

    fn default_roots(&self, env: &Env) -> Vec<PathBuf> {
        match self.source {
            Source::OpenClaw => {
                if let Some(dir) = env.var("OPENCLAW_STATE_DIR") {
                    return vec![env.expand(dir).join("agents")];
                }
                super::existing_or_first(
                    [".openclaw", ".clawdbot", ".moldbot", ".moltbot"]
                        .iter()
                        .filter_map(|d| env.home_join(&format!("{d}/agents")))
                        .collect(),
                )
            }
            _ => {
                if let Some(dir) = env.var("PI_CODING_AGENT_SESSION_DIR") {
                    return vec![env.expand(dir)];
                }
                env.var("PI_CODING_AGENT_DIR")
                    .map(|d| env.expand(d))
                    .or_else(|| env.home_join(".pi/agent"))
                    .map(|agent| vec![agent.join("sessions")])
                    .unwrap_or_default()
            }
        }
    }

    fn discover(&self, root: &Path, out: &mut Vec<PathBuf>) -> Result<()> {
        let openclaw = self.source == Source::OpenClaw;
        super::walk(root, out, |path| {
            is_session_file(path) || (openclaw && is_store(path))
        })
    }

    /// OpenClaw's agent database beside its sessions: a change to its `-wal` is a change.
    fn companions(&self, path: &Path) -> Vec<PathBuf> {
        if is_store(path) {
            vec![super::wal_of(path)]
        } else {
            Vec::new()
        }
    }

    /// OpenClaw's agent database skips the sessions an earlier import stored unchanged.
    fn reads_state(&self) -> bool {
        self.source == Source::OpenClaw
    }

    fn read(&self, unit: &Unit<'_>, out: &mut Batch, report: &mut FileReport) -> Result<Resume> {
        let path = unit.path;
        if self.source == Source::OpenClaw && is_store(path) {
            return store::read(self.source, unit, out, report);
        }
        let chunk = crate::reader::read_from(path, 0, 0)?;
        let mut entries = Vec::new();
        for line in chunk.lines() {
            match serde_json::from_str::<Value>(line.text) {
                Ok(entry) => entries.push(entry),
                Err(err) => report.malformed(path, Some(line.number), err.to_string()),
            }
        }
        let fallback = path
            .file_name()
            .map(|n| n.to_string_lossy())
            .map(|n| n.split(".jsonl").next().unwrap_or_default().to_owned())
            .unwrap_or_default();
        let mut session = Session::new(self.source, &entries, fallback, unit.mtime_ms);
        for entry in entries.iter().skip(session.header) {
            session.entry(entry, report);
        }
        if unit.since.is_none_or(|since| session.last_at >= since) {
            session.finish(path, out);
        }
        Ok(resume_whole(&chunk))
    }
}

/// One session file being read.
struct Session {
    source: Source,
    id: String,
    /// Entries before the first one to read (the header's line).
    header: usize,
    created: i64,
    last_at: i64,
    directory: Option<String>,
    /// The file this session was forked from.
    parent_file: Option<String>,
    title: Option<String>,
    /// The model the last `model_change` chose, and its provider.
    model: Option<(String, Option<String>)>,
    messages: Vec<MessageRec>,
    /// A call's id → (index in `messages`, part index).
    calls: HashMap<String, (usize, usize)>,
    /// Entries read so far (the one being read included).
    entries: usize,
    /// An entry's id → its place among the entries (1-based, as `entries` counts them).
    entry_at: HashMap<String, usize>,
    /// For each message, the place of the entry it came from.
    message_at: Vec<usize>,
}

impl Session {
    fn new(source: Source, entries: &[Value], fallback: String, mtime_ms: i64) -> Session {
        let head = entries
            .first()
            .filter(|e| str_of(e, "type") == Some("session"));
        let created = head
            .and_then(|h| str_of(h, "timestamp"))
            .and_then(time::parse)
            .unwrap_or(mtime_ms);
        Session {
            source,
            id: head
                .and_then(|h| str_of(h, "id"))
                .filter(|id| !id.is_empty())
                .map_or(fallback, str::to_owned),
            header: usize::from(head.is_some()),
            created,
            last_at: created,
            directory: head
                .and_then(|h| str_of(h, "cwd"))
                .filter(|d| !d.is_empty())
                .map(str::to_owned),
            parent_file: head
                .and_then(|h| str_of(h, "parentSession"))
                .filter(|p| !p.is_empty())
                .map(str::to_owned),
            title: None,
            model: None,
            messages: Vec::new(),
            calls: HashMap::new(),
            entries: 0,
            entry_at: HashMap::new(),
            message_at: Vec::new(),
        }
    }

    /// One entry after the header.
    fn entry(&mut self, entry: &Value, report: &mut FileReport) {
        let kind = str_of(entry, "type").unwrap_or("");
        let inner = entry.get("message").unwrap_or(&Value::Null);
        let at = str_of(entry, "timestamp")
            .and_then(time::parse)
            .or_else(|| f64_of(inner, "timestamp").and_then(time::epoch))
            .unwrap_or(self.last_at);
        self.last_at = self.last_at.max(at);
        self.entries += 1;
        let key = match str_of(entry, "id").filter(|id| !id.is_empty()) {
            Some(id) => {
                self.entry_at.insert(id.to_owned(), self.entries);
                format!("{}:{id}", self.id)
            }
            None => format!("{}:#{}", self.id, self.messages.len()),
        };
        match kind {
            "message" => {
                if !self.message(&key, inner, at, report) {
                    return;
                }
            }
            "compaction" => {
                let Some(summary) = str_of(entry, "summary").filter(|s| !s.trim().is_empty())
                else {
                    report.skip("compaction:empty");
                    return;
                };
                // pi keeps sending the entries from `firstKeptEntryId` on after the
                // summary: the first message among them is where they begin.
                let keep_from = str_of(entry, "firstKeptEntryId")
                    .and_then(|kept| self.entry_at.get(kept).copied())
                    .and_then(|from| self.message_at.iter().position(|at| *at >= from))
                    .map(|i| self.messages[i].message.id.clone());
                let parts = vec![
                    Part::Compaction(CompactionPart {
                        keep_from,
                        ..CompactionPart::default()
                    }),
                    text(summary, false),
                ];
                let i = self.push(&key, Role::Assistant, at, parts);
                self.messages[i].message.is_summary = true;
            }
            "branch_summary" | "custom_message" => {
                let said = match kind {
                    "branch_summary" => str_of(entry, "summary").unwrap_or("").to_owned(),
                    _ => content_text(entry.get("content").unwrap_or(&Value::Null)),
                };
                if said.trim().is_empty() {
                    report.skip(format!("{kind}:empty"));
                    return;
                }
                self.push(&key, Role::User, at, vec![text(said, true)]);
            }
            "session_info" => {
                if let Some(name) = str_of(entry, "name").filter(|n| !n.trim().is_empty()) {
                    self.title = Some(name.trim().to_owned());
                }
            }
            "model_change" => {
                if let Some(model) = str_of(entry, "modelId").filter(|m| !m.is_empty()) {
                    let provider = str_of(entry, "provider").map(str::to_owned);
                    self.model = Some((model.to_owned(), provider));
                }
                report.skip(kind);
                return;
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

    /// Adds a message; returns its index.
    fn push(&mut self, key: &str, role: Role, at: i64, parts: Vec<Part>) -> usize {
        let mut m = message(self.source, key, role, at);
        m.parts = numbered(self.source, key, parts, at);
        self.messages.push(MessageRec::new(self.id.clone(), m));
        self.message_at.push(self.entries);
        self.messages.len() - 1
    }

    /// A `message` entry; whether it was kept.
    fn message(&mut self, key: &str, inner: &Value, at: i64, report: &mut FileReport) -> bool {
        let role = str_of(inner, "role").unwrap_or("");
        let content = inner.get("content").unwrap_or(&Value::Null);
        match role {
            "user" => {
                let parts = user_parts(content);
                if parts.is_empty() {
                    report.skip("message:user:empty");
                    return false;
                }
                self.push(key, Role::User, at, parts);
            }
            "assistant" => return self.reply(key, inner, at, report),
            "toolResult" => {
                let id = str_of(inner, "toolCallId").unwrap_or("");
                let Some(&place) = self.calls.get(id) else {
                    report.skip("message:toolResult:without-call");
                    return false;
                };
                let failed = inner.get("isError").and_then(Value::as_bool) == Some(true);
                settle_call(&mut self.messages, place, content_text(content), failed, at);
            }
            "bashExecution" => {
                let command = str_of(inner, "command").unwrap_or("");
                let mut parts = vec![text(format!("!{command}"), false)];
                if let Some(output) = str_of(inner, "output").filter(|o| !o.is_empty()) {
                    parts.push(text(output, true));
                }
                self.push(key, Role::User, at, parts);
            }
            "custom" | "hookMessage" => {
                let said = content_text(content);
                if said.trim().is_empty() {
                    report.skip("message:custom:empty");
                    return false;
                }
                self.push(key, Role::User, at, vec![text(said, true)]);
            }
            "" => {
                report.skip("message:untyped");
                return false;
            }
            other => {
                report.skip(format!("message:{other}"));
                return false;
            }
        }
        true
    }

    /// An assistant message; whether it was kept.
    fn reply(&mut self, key: &str, inner: &Value, at: i64, report: &mut FileReport) -> bool {
        let mut parts = Vec::new();
        let mut calls = Vec::new();
        let blocks = match inner.get("content") {
            Some(Value::Array(blocks)) => blocks.clone(),
            Some(Value::String(s)) => vec![serde_json::json!({ "type": "text", "text": s })],
            _ => Vec::new(),
        };
        for block in &blocks {
            match str_of(block, "type").unwrap_or("") {
                "text" => {
                    if let Some(said) = str_of(block, "text").filter(|t| !t.is_empty()) {
                        parts.push(text(said, false));
                    }
                }
                "thinking" => {
                    let signature = str_of(block, "thinkingSignature")
                        .filter(|s| !s.is_empty())
                        .map(str::to_owned);
                    let thought = str_of(block, "thinking").unwrap_or("");
                    if !thought.is_empty() || signature.is_some() {
                        parts.push(reasoning(thought, signature, None));
                    }
                }
                "toolCall" => {
                    let id = str_of(block, "id").unwrap_or("");
                    let input = match block.get("arguments") {
                        None | Some(Value::Null) => Value::Object(serde_json::Map::new()),
                        Some(args) => args.clone(),
                    };
                    calls.push((id.to_owned(), parts.len()));
                    let name = str_of(block, "name").unwrap_or("");
                    parts.push(tool(id, name, input, ToolState::Running { started_at: at }));
                }
                "image" => parts.push(inline_image(block)),
                other => report.skip(format!("content:{other}")),
            }
        }
        let stop = str_of(inner, "stopReason");
        let failed = matches!(stop, Some("error" | "aborted"));
        if parts.is_empty() && !failed {
            report.skip("message:assistant:empty");
            return false;
        }
        let i = self.push(key, Role::Assistant, at, parts);
        let chosen = self.model.clone();
        let rec = &mut self.messages[i];
        let m = &mut rec.message;
        m.model = str_of(inner, "model")
            .filter(|s| !s.is_empty())
            .map(str::to_owned)
            .or_else(|| chosen.as_ref().map(|(model, _)| model.clone()));
        m.provider = str_of(inner, "provider")
            .filter(|s| !s.is_empty())
            .map(str::to_owned)
            .or_else(|| chosen.and_then(|(_, provider)| provider));
        m.finish_reason = stop.map(|s| match s {
            "stop" => FinishReason::EndTurn,
            "toolUse" => FinishReason::ToolUse,
            "length" => FinishReason::MaxTokens,
            other => FinishReason::Unknown(other.to_owned()),
        });
        if failed {
            m.error = Some(serde_json::json!({
                "type": stop.unwrap_or("error"),
                "message": str_of(inner, "errorMessage").unwrap_or(""),
            }));
        }
        if let Some(usage) = inner.get("usage").filter(|u| u.is_object()) {
            let thought = int_of(usage, "reasoning");
            m.usage = TokenUsage {
                input: int_of(usage, "input"),
                output: int_of(usage, "output").saturating_sub(thought).max(0),
                reasoning: thought,
                cache_read: int_of(usage, "cacheRead"),
                cache_write: int_of(usage, "cacheWrite"),
            };
            rec.api_calls = 1;
            rec.reported_cost = usage
                .get("cost")
                .and_then(|c| f64_of(c, "total"))
                .filter(|c| c.is_finite() && *c > 0.0);
        }
        for (id, part) in calls {
            self.calls.insert(id, (i, part));
        }
        true
    }

    /// The session (forked from the session its header names, when that file is there to
    /// say which) and its messages, into `out`.
    fn finish(self, path: &Path, out: &mut Batch) {
        let mut rec = SessionRec::new(&self.id, self.created);
        rec.updated_at = self.last_at.max(self.created);
        rec.directory = self.directory;
        rec.title = self.title.map(|t| (t, TitleRank::User));
        rec.model = self
            .messages
            .iter()
            .rev()
            .find_map(|m| m.message.model.clone())
            .or(self.model.map(|(model, _)| model));
        if let Some(parent) = self
            .parent_file
            .and_then(|file| header_id(path, &file))
            .filter(|parent| *parent != self.id)
        {
            rec.parent = Some(parent);
            rec.kind = SessionKind::Fork;
        }
        out.sessions.push(rec);
        out.messages.extend(self.messages);
    }
}

/// The id in the header of the session file `file` (relative to `path`'s folder when it
/// is not absolute), when it can be read.
fn header_id(path: &Path, file: &str) -> Option<String> {
    use std::io::{BufRead, Read};
    let file = path.parent().unwrap_or(Path::new("")).join(file);
    let mut line = String::new();
    std::io::BufReader::new(std::fs::File::open(file).ok()?)
        .take(64 * 1024)
        .read_line(&mut line)
        .ok()?;
    let head: Value = serde_json::from_str(line.trim()).ok()?;
    (str_of(&head, "type") == Some("session"))
        .then(|| str_of(&head, "id").map(str::to_owned))
        .flatten()
}

/// A user message's content: a string, or text and image blocks.
fn user_parts(content: &Value) -> Vec<Part> {
    match content {
        Value::String(s) if !s.is_empty() => vec![text(s.clone(), false)],
        Value::Array(blocks) => blocks
            .iter()
            .filter_map(|b| match str_of(b, "type") {
                Some("text") => str_of(b, "text")
                    .filter(|t| !t.is_empty())
                    .map(|t| text(t, false)),
                Some("image") => Some(inline_image(b)),
                _ => None,
            })
            .collect(),
        _ => Vec::new(),
    }
}
