//! Amp (Sourcegraph's coding agent): one JSON file per thread, `T-<uuid>.json`, in
//! `~/.local/share/amp/threads` (`$XDG_DATA_HOME/amp/threads` when set; `AMP_DATA_DIR`,
//! a comma-separated list of folders each holding `threads`, as ccusage reads it,
//! replaces both), and, from the editor extension's earlier builds, in each VS Code-like
//! editor's `User/globalStorage/sourcegraph.amp/threads3`.
//!
//! Amp rewrites a thread's file whole as it goes, so a changed file is read whole;
//! messages are keyed by the thread and their `messageId`, so reading it again stores
//! each once.
//!
//! Mapping (the thread's messages are Anthropic-style content blocks):
//! - `user` messages: `text` and `image` blocks; their `tool_result` blocks (`toolUseID`,
//!   and the tool's `run`: `status`, `result`, `error`, `progress`) settle the call of
//!   the reply before, completed when the run is `done`, failed when it is `error`,
//!   `cancelled` or `rejected-by-user` (a call whose run never ended stays running);
//! - `assistant` messages: `text`, `thinking` (and `redacted_thinking`) as reasoning,
//!   `tool_use` as a tool part; `state.stopReason` as the finish reason, a `cancelled`
//!   or `error` state kept as the message's error;
//! - `info` messages: a `summary` of the conversation is the session's summary message;
//!   other info (a summary written into another thread) is counted as skipped;
//! - the thread's `title` is its title, the first tree of `env.initial` its directory.
//!
//! Usage: each reply's own `usage` (`inputTokens` without the cache,
//! `cacheCreationInputTokens`, `cacheReadInputTokens`, `outputTokens`; a bare
//! `totalTokens` counted as output, as ccusage does). The thread's `usageLedger` is what
//! Amp billed, one event per model call: an event naming a reply (`toMessageId`) gives
//! that reply its input and output tokens (the sum of its events, each a call); an event
//! naming none (a `title-generation`, another operation) is usage no message carries, so
//! each operation and model of a thread becomes a child session holding it (a title
//! session for title generation, a task otherwise), as Hermes' auxiliary calls are.
//! Amp's `credits` are its own billing unit, not dollars: costs are estimated from the
//! pricing catalog.

use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};

use scribe_message::{CompactionPart, FinishReason, Part, Role, TokenUsage, ToolState};
use scribe_session::SessionKind;
use serde_json::Value;

use super::{
    FileReport, Importer, Unit, content_text, existing_or_first, f64_of, int_of, media, message,
    numbered, reasoning, settle_call, str_of, text, tool, walk,
};
use crate::Source;
use crate::env::Env;
use crate::error::{ImportError, Result};
use crate::record::{Batch, MessageRec, Resume, SessionRec, SessionUsage, TitleRank};
use crate::time;

const SRC: Source = Source::Amp;

/// The Amp importer.
#[derive(Debug, Clone, Copy)]
pub struct Amp;

impl Importer for Amp {
    fn source(&self) -> Source {
        SRC
    }

    fn reads_state(&self) -> bool {
        false
    }

    /// `AMP_DATA_DIR`'s folders when it is set; else Amp's data folder and the editor
    /// extension's folders that exist (Amp's data folder when none does, so that a report
    /// names where it looked).
    fn default_roots(&self, env: &Env) -> Vec<PathBuf> {
        if let Some(dirs) = env.paths("AMP_DATA_DIR") {
            return dirs.into_iter().map(|d| d.join("threads")).collect();
        }
        let data = env
            .var("XDG_DATA_HOME")
            .map(|d| env.expand(d))
            .or_else(|| env.home_join(".local/share"));
        let mut candidates: Vec<PathBuf> =
            data.map(|d| d.join("amp/threads")).into_iter().collect();
        candidates.extend(
            env.editor_storage("sourcegraph.amp")
                .into_iter()
                .map(|d| d.join("threads3")),
        );
        existing_or_first(candidates)
    }

    fn discover(&self, root: &Path, out: &mut Vec<PathBuf>) -> Result<()> {
        walk(root, out, |p| p.extension().is_some_and(|e| e == "json"))
    }

    fn read(&self, unit: &Unit<'_>, out: &mut Batch, report: &mut FileReport) -> Result<Resume> {
        let path = unit.path;
        let raw = std::fs::read_to_string(path).map_err(ImportError::io(path))?;
        let doc: Value = serde_json::from_str(&raw).map_err(|e| ImportError::Malformed {
            path: path.to_owned(),
            what: "Amp thread",
            reason: e.to_string(),
        })?;
        // Another JSON file in the folder (not a thread: no messages): nothing to import.
        match doc.get("messages") {
            Some(Value::Array(list)) => {
                let mut thread = Thread::new(&doc, path, unit.mtime_ms);
                for (i, m) in list.iter().enumerate() {
                    thread.message(i, m, report);
                }
                thread.ledger(&doc, report);
                if unit.since.is_none_or(|since| thread.last_at >= since) {
                    thread.finish(&doc, out);
                }
            }
            _ => report.skip("(not a thread)"),
        }
        Ok(Resume {
            offset: u64::try_from(raw.len()).unwrap_or(u64::MAX),
            lines: raw.lines().count() as u64,
            carry: None,
            more: false,
        })
    }
}

/// Usage no reply carries, of one operation and model.
#[derive(Debug, Default)]
struct Background {
    first: i64,
    last: i64,
    tokens: TokenUsage,
    calls: i64,
}

/// One thread being read.
struct Thread {
    id: String,
    created: i64,
    last_at: i64,
    messages: Vec<MessageRec>,
    /// A reply's `messageId` → its index in `messages`.
    replies: HashMap<i64, usize>,
    /// A call's id → (index in `messages`, part index).
    calls: HashMap<String, (usize, usize)>,
    /// (operation, model) → the usage of ledger events naming no reply.
    background: BTreeMap<(String, String), Background>,
}

impl Thread {
    fn new(doc: &Value, path: &Path, mtime_ms: i64) -> Thread {
        let stem = path
            .file_stem()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        let created = f64_of(doc, "created")
            .and_then(time::epoch)
            .unwrap_or(mtime_ms);
        Thread {
            id: str_of(doc, "id")
                .filter(|id| !id.is_empty())
                .map_or(stem, str::to_owned),
            created,
            last_at: created,
            messages: Vec::new(),
            replies: HashMap::new(),
            calls: HashMap::new(),
            background: BTreeMap::new(),
        }
    }

    /// Message `i` of the thread.
    fn message(&mut self, i: usize, m: &Value, report: &mut FileReport) {
        let number = m.get("messageId").and_then(Value::as_i64);
        let key = match number {
            Some(n) => format!("{}:{n}", self.id),
            None => format!("{}:#{i}", self.id),
        };
        let usage = m.get("usage").filter(|u| u.is_object());
        let at = m
            .pointer("/meta/sentAt")
            .and_then(Value::as_f64)
            .and_then(time::epoch)
            .or_else(|| {
                usage
                    .and_then(|u| str_of(u, "timestamp"))
                    .and_then(time::parse)
            })
            .unwrap_or(self.last_at);
        self.last_at = self.last_at.max(at);
        let blocks: Vec<Value> = match m.get("content") {
            Some(Value::Array(blocks)) => blocks.clone(),
            Some(Value::String(s)) => vec![serde_json::json!({ "type": "text", "text": s })],
            _ => Vec::new(),
        };
        match str_of(m, "role").unwrap_or("") {
            "user" => self.user(&key, &blocks, at, report),
            "assistant" => {
                if let Some(index) = self.reply(&key, m, &blocks, usage, at, report)
                    && let Some(n) = number
                {
                    self.replies.insert(n, index);
                }
            }
            "info" => self.info(&key, &blocks, at, report),
            "" => report.skip("message:untyped"),
            other => report.skip(format!("message:{other}")),
        }
    }

    /// Adds a message; returns its index.
    fn push(&mut self, key: &str, role: Role, at: i64, parts: Vec<Part>) -> usize {
        let mut m = message(SRC, key, role, at);
        m.parts = numbered(SRC, key, parts, at);
        self.messages.push(MessageRec::new(self.id.clone(), m));
        self.messages.len() - 1
    }

    fn user(&mut self, key: &str, blocks: &[Value], at: i64, report: &mut FileReport) {
        let mut parts = Vec::new();
        let mut results = 0;
        for block in blocks {
            match str_of(block, "type").unwrap_or("") {
                "text" => {
                    if let Some(said) = str_of(block, "text").filter(|t| !t.is_empty()) {
                        parts.push(text(said, false));
                    }
                }
                "image" => parts.push(media(block)),
                "tool_result" => {
                    results += 1;
                    self.result(block, at, report);
                }
                other => report.skip(format!("content:{other}")),
            }
        }
        if !parts.is_empty() {
            self.push(key, Role::User, at, parts);
            report.records += 1;
        } else if results == 0 {
            report.skip("message:user:empty");
        }
    }

    /// A `tool_result` block: settles its call.
    fn result(&mut self, block: &Value, at: i64, report: &mut FileReport) {
        let id = str_of(block, "toolUseID")
            .or_else(|| str_of(block, "tool_use_id"))
            .unwrap_or("");
        let Some(&place) = self.calls.get(id) else {
            report.skip("tool_result:without-call");
            return;
        };
        report.records += 1;
        let run = block.get("run").unwrap_or(&Value::Null);
        let status = str_of(run, "status").unwrap_or("");
        let failed = match status {
            "done" => false,
            "error" | "cancelled" | "rejected-by-user" => true,
            // Still running, waiting for the user, or a status this build does not know:
            // the call stays as it was.
            _ => return,
        };
        let said = if failed {
            run_error(run, status)
        } else {
            run_output(run)
        };
        settle_call(&mut self.messages, place, said, failed, at);
    }

    /// An assistant message; its index when it was kept.
    fn reply(
        &mut self,
        key: &str,
        m: &Value,
        blocks: &[Value],
        usage: Option<&Value>,
        at: i64,
        report: &mut FileReport,
    ) -> Option<usize> {
        let mut parts = Vec::new();
        let mut calls = Vec::new();
        for block in blocks {
            match str_of(block, "type").unwrap_or("") {
                "text" => {
                    if let Some(said) = str_of(block, "text").filter(|t| !t.is_empty()) {
                        parts.push(text(said, false));
                    }
                }
                "thinking" => {
                    let signature = str_of(block, "signature")
                        .filter(|s| !s.is_empty())
                        .map(str::to_owned);
                    let thought = str_of(block, "thinking").unwrap_or("");
                    if !thought.is_empty() || signature.is_some() {
                        parts.push(reasoning(thought, signature, None));
                    }
                }
                "redacted_thinking" => parts.push(reasoning("", None, Some(block.clone()))),
                "tool_use" => {
                    let id = str_of(block, "id").unwrap_or("");
                    let input = match block.get("input") {
                        None | Some(Value::Null) => Value::Object(serde_json::Map::new()),
                        Some(input) => input.clone(),
                    };
                    calls.push((id.to_owned(), parts.len()));
                    let name = str_of(block, "name").unwrap_or("");
                    parts.push(tool(id, name, input, ToolState::Running { started_at: at }));
                }
                other => report.skip(format!("content:{other}")),
            }
        }
        let state = m.get("state").unwrap_or(&Value::Null);
        let ended = str_of(state, "type").filter(|s| matches!(*s, "cancelled" | "error"));
        let has_usage = usage.is_some_and(|u| !tokens_of(u).is_zero());
        if parts.is_empty() && ended.is_none() && !has_usage {
            report.skip("message:assistant:empty");
            return None;
        }
        report.records += 1;
        let i = self.push(key, Role::Assistant, at, parts);
        let rec = &mut self.messages[i];
        let msg = &mut rec.message;
        msg.model = usage
            .and_then(|u| str_of(u, "model"))
            .filter(|s| !s.is_empty())
            .map(str::to_owned);
        msg.finish_reason = str_of(state, "stopReason").map(|s| match s {
            "end_turn" => FinishReason::EndTurn,
            "tool_use" => FinishReason::ToolUse,
            "max_tokens" => FinishReason::MaxTokens,
            other => FinishReason::Unknown(other.to_owned()),
        });
        if let Some(kind) = ended {
            let said = state
                .get("error")
                .map(|e| str_of(e, "message").map_or_else(|| content_text(e), str::to_owned))
                .unwrap_or_default();
            msg.error = Some(serde_json::json!({ "type": kind, "message": said }));
        }
        if let Some(u) = usage {
            msg.usage = tokens_of(u);
            rec.api_calls = i64::from(!msg.usage.is_zero());
        }
        for (id, part) in calls {
            self.calls.insert(id, (i, part));
        }
        Some(i)
    }

    fn info(&mut self, key: &str, blocks: &[Value], at: i64, report: &mut FileReport) {
        for (n, block) in blocks.iter().enumerate() {
            let summary = block.get("summary").unwrap_or(&Value::Null);
            match (str_of(block, "type"), str_of(summary, "type")) {
                (Some("summary"), Some("message")) => {
                    let Some(said) = str_of(summary, "summary").filter(|s| !s.trim().is_empty())
                    else {
                        report.skip("info:summary:empty");
                        continue;
                    };
                    let key = if n == 0 {
                        key.to_owned()
                    } else {
                        format!("{key}:{n}")
                    };
                    let parts = vec![
                        Part::Compaction(CompactionPart::default()),
                        text(said, false),
                    ];
                    let i = self.push(&key, Role::Assistant, at, parts);
                    self.messages[i].message.is_summary = true;
                    report.records += 1;
                }
                (Some("summary"), Some(other)) => report.skip(format!("info:summary:{other}")),
                (Some(kind), _) => report.skip(format!("info:{kind}")),
                (None, _) => report.skip("info:untyped"),
            }
        }
    }

    /// The thread's usage ledger: each event's input and output onto the reply it names,
    /// the others into background usage.
    fn ledger(&mut self, doc: &Value, report: &mut FileReport) {
        let Some(events) = doc
            .pointer("/usageLedger/events")
            .and_then(Value::as_array)
            .filter(|e| !e.is_empty())
        else {
            return;
        };
        // What the ledger says replaces what the replies say of their input and output
        // (their cache counts are only in the replies).
        let mut billed: HashMap<usize, (TokenUsage, i64)> = HashMap::new();
        for event in events {
            let tokens = event.get("tokens").unwrap_or(&Value::Null);
            let (input, mut output) = (int_of(tokens, "input"), int_of(tokens, "output"));
            if input == 0 && output == 0 {
                output = int_of(tokens, "total");
            }
            if input == 0 && output == 0 {
                report.skip("usage:empty");
                continue;
            }
            let at = str_of(event, "timestamp")
                .and_then(time::parse)
                .unwrap_or(self.last_at);
            let model = str_of(event, "model").filter(|m| !m.is_empty());
            let reply = event
                .get("toMessageId")
                .and_then(Value::as_i64)
                .and_then(|n| self.replies.get(&n).copied());
            match reply {
                Some(i) => {
                    let (t, calls) = billed.entry(i).or_default();
                    t.input += input;
                    t.output += output;
                    *calls += 1;
                    let msg = &mut self.messages[i].message;
                    if msg.model.is_none() {
                        msg.model = model.map(str::to_owned);
                    }
                }
                None => {
                    let operation = str_of(event, "operationType")
                        .filter(|o| !o.is_empty())
                        .unwrap_or("unknown");
                    let key = (operation.to_owned(), model.unwrap_or("unknown").to_owned());
                    let bg = self.background.entry(key).or_insert_with(|| Background {
                        first: at,
                        last: at,
                        ..Background::default()
                    });
                    bg.first = bg.first.min(at);
                    bg.last = bg.last.max(at);
                    bg.tokens.input += input;
                    bg.tokens.output += output;
                    bg.calls += 1;
                }
            }
            report.records += 1;
        }
        for (i, (tokens, calls)) in billed {
            let rec = &mut self.messages[i];
            rec.message.usage.input = tokens.input;
            rec.message.usage.output = tokens.output;
            rec.api_calls = calls;
        }
    }

    /// The thread, its background usage as child sessions, and its messages, into `out`.
    fn finish(self, doc: &Value, out: &mut Batch) {
        let mut rec = SessionRec::new(&self.id, self.created);
        rec.updated_at = self.last_at.max(self.created);
        rec.directory = directory(doc);
        rec.title = str_of(doc, "title")
            .map(str::trim)
            .filter(|t| !t.is_empty())
            .map(|t| (t.to_owned(), TitleRank::Source));
        rec.model = self
            .messages
            .iter()
            .rev()
            .find_map(|m| m.message.model.clone());
        let mut children = Vec::new();
        for ((operation, model), bg) in self.background {
            let mut child = SessionRec::new(format!("{}:{operation}:{model}", self.id), bg.first);
            child.updated_at = bg.last.max(bg.first);
            child.parent = Some(self.id.clone());
            child.kind = if operation == "title-generation" {
                SessionKind::Title
            } else {
                SessionKind::Task
            };
            child.directory.clone_from(&rec.directory);
            let model = (model != "unknown").then_some(model);
            child.model.clone_from(&model);
            child.model_config = Some(serde_json::json!({ "amp_operation": operation }));
            child.usage_total = Some(SessionUsage {
                tokens: bg.tokens,
                api_calls: bg.calls,
                reported_cost: None,
                model,
                cost_usd: 0.0,
                cost_flags: 0,
            });
            children.push(child);
        }
        out.sessions.push(rec);
        out.sessions.extend(children);
        out.messages.extend(self.messages);
    }
}

/// A reply's `usage` as Scribe's buckets (Amp's input is without the cache; a bare total
/// is counted as output).
fn tokens_of(u: &Value) -> TokenUsage {
    let mut t = TokenUsage {
        input: int_of(u, "inputTokens"),
        output: int_of(u, "outputTokens"),
        reasoning: 0,
        cache_read: int_of(u, "cacheReadInputTokens"),
        cache_write: int_of(u, "cacheCreationInputTokens"),
    };
    if t.is_zero() {
        t.output = int_of(u, "totalTokens");
    }
    t
}

/// What a finished run gave: its result as text (a string; content blocks' text; a
/// shell's `output`, a read file's `content` or an edit's `diff`; else the result as
/// JSON), else its progress.
fn run_output(run: &Value) -> String {
    match run.get("result") {
        Some(Value::String(s)) => s.clone(),
        Some(Value::Array(items)) => content_text(&Value::Array(items.clone())),
        Some(result @ Value::Object(_)) => ["output", "content", "diff"]
            .iter()
            .find_map(|key| str_of(result, key))
            .map_or_else(|| result.to_string(), str::to_owned),
        Some(Value::Null) | None => match run.get("progress") {
            Some(Value::Null) | None => String::new(),
            Some(progress) => {
                str_of(progress, "output").map_or_else(|| content_text(progress), str::to_owned)
            }
        },
        Some(other) => other.to_string(),
    }
}

/// Why a run failed: its error's message, its result, or its status.
fn run_error(run: &Value, status: &str) -> String {
    let error = match run.get("error") {
        Some(Value::String(s)) => s.clone(),
        Some(e @ Value::Object(_)) => {
            str_of(e, "message").map_or_else(|| e.to_string(), str::to_owned)
        }
        _ => String::new(),
    };
    if !error.is_empty() {
        return error;
    }
    let output = run_output(run);
    if output.is_empty() {
        status.to_owned()
    } else {
        output
    }
}

/// The thread's working directory: the first tree of its initial environment (a
/// `file://` URI, or a path).
fn directory(doc: &Value) -> Option<String> {
    let init = doc.pointer("/env/initial")?;
    if let Some(cwd) = str_of(init, "cwd").filter(|c| !c.is_empty()) {
        return Some(cwd.to_owned());
    }
    let uri = init.get("trees")?.as_array()?.first().and_then(|t| {
        str_of(t, "uri").or_else(|| t.get("uri").and_then(|u| str_of(u, "fsPath")))
    })?;
    super::uri_directory(uri)
}
