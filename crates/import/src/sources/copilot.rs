//! GitHub Copilot CLI: `${COPILOT_HOME:-~/.copilot}/session-state/<session id>/events.jsonl`
//! (earlier builds wrote `session-state/<session id>.jsonl`), one event per line in the
//! envelope github/copilot-sdk documents (`docs/features/streaming-events.md`: `type`,
//! `data`, `id`, `timestamp`, `parentId`, a sub-agent's `agentId`); only the events it
//! calls persisted are on disk.
//!
//! A session's file is read whole whenever it changes. It is only appended to, but its
//! usage is told at each shutdown and goes to replies written before it; ids derive from
//! the events' own, so what an earlier import stored is met again, never stored twice.
//!
//! Mapping:
//! - `user.message` becomes a user message (its `content`, as typed; attachments, which
//!   only name files, are not kept); `assistant.message` an assistant message: the
//!   `assistant.reasoning` before it (or its own `reasoningText`) as reasoning, its text,
//!   and a tool part per `toolRequests` entry, settled by the `tool.execution_complete`
//!   with its `toolCallId` (`result.content`, what the model read; `error.message` when
//!   it failed). A call still open when the turn is aborted or the session shuts down
//!   failed (interrupted);
//! - a reply's model is the one `session.start` or the last `session.model_change`
//!   chose, or the one a `tool.execution_complete` of its calls names;
//! - events of a sub-agent (an envelope `agentId`, or the older `parentToolCallId`) make
//!   a task session under the session, which the call that started it names, titled with
//!   the sub-agent's name (`subagent.started`);
//! - the title is the `summary` Copilot's session index (`session-store.db` in its home,
//!   beside `session-state`) keeps for the session: only that row is read;
//! - `session.compaction_complete` with a `summaryContent` is the session's summary;
//!   `session.start`'s context (or `session.context_changed`) gives the directory; a
//!   `session.shutdown` not followed by a `session.resume` ends the session;
//! - usage: Copilot records it per model at each `session.shutdown` (`modelMetrics`; not
//!   cumulative, each covers the lifecycle since the start or resume before it; the
//!   per-call `assistant.usage` events are not kept on disk). Each model's counts go to
//!   its last reply in that lifecycle; those of a model with no reply there (one working
//!   in the background) to a task session of that model under the session, holding them
//!   as Hermes' auxiliary calls are held. `inputTokens` includes the cache read and
//!   written and `outputTokens` the reasoning, which Scribe keeps apart; `requests.count`
//!   is the model calls. A lifecycle without a shutdown (a session still running, or one
//!   that crashed) has no usage on disk.

use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};

use scribe_message::{CompactionPart, Message, Part, Role, TokenUsage, ToolState};
use scribe_session::SessionKind;
use serde_json::Value;

use super::{
    FileReport, Importer, Unit, int_of, message, numbered, reasoning, resume_whole, settled,
    str_of, text, tool,
};
use crate::Source;
use crate::env::Env;
use crate::error::Result;
use crate::record::{Batch, MessageRec, Resume, SessionRec, SessionUsage, TaskLink, TitleRank};
use crate::time;

const SRC: Source = Source::Copilot;

/// A session's log in its own folder (current builds).
const EVENTS: &str = "events.jsonl";

/// Copilot's index of its sessions, beside `session-state`.
const STORE: &str = "session-store.db";

/// What an open call's failure says when the turn or session ended around it.
const INTERRUPTED: &str = "interrupted: the turn ended before the call finished";

/// The GitHub Copilot CLI importer.
#[derive(Debug, Clone, Copy)]
pub struct Copilot;

impl Importer for Copilot {
    fn source(&self) -> Source {
        SRC
    }

    fn default_roots(&self, env: &Env) -> Vec<PathBuf> {
        env.var("COPILOT_HOME")
            .map(|h| env.expand(h))
            .or_else(|| env.home_join(".copilot"))
            .map(|home| vec![home.join("session-state")])
            .unwrap_or_default()
    }

    fn discover(&self, root: &Path, out: &mut Vec<PathBuf>) -> Result<()> {
        let log = |p: &Path| p.extension().is_some_and(|e| e == "jsonl");
        if root.is_file() {
            if log(root) {
                out.push(root.to_owned());
            }
            return Ok(());
        }
        // One session's folder, the folder of every session's, or Copilot's home above it.
        if root.join(EVENTS).is_file() {
            out.push(root.join(EVENTS));
            return Ok(());
        }
        let state = root.join("session-state");
        let root = if state.is_dir() { &state } else { root };
        let Ok(entries) = std::fs::read_dir(root) else {
            return Ok(());
        };
        let mut found: Vec<PathBuf> = entries
            .filter_map(|e| e.ok().map(|e| e.path()))
            .filter_map(|p| {
                if p.is_dir() {
                    Some(p.join(EVENTS)).filter(|events| events.is_file())
                } else {
                    Some(p).filter(|p| log(p))
                }
            })
            .collect();
        found.sort();
        out.extend(found);
        Ok(())
    }

    fn reads_state(&self) -> bool {
        false
    }

    fn read(&self, unit: &Unit<'_>, out: &mut Batch, report: &mut FileReport) -> Result<Resume> {
        let path = unit.path;
        // The folder's name for a session's own folder, else the file's.
        let named = if path.file_name().is_some_and(|n| n == EVENTS) {
            path.parent().and_then(Path::file_name)
        } else {
            path.file_stem()
        };
        let mut log = Log::new(
            named.map_or_else(String::new, |n| n.to_string_lossy().into_owned()),
            unit.mtime_ms,
        );
        let chunk = crate::reader::read_from(path, 0, 0)?;
        for line in chunk.lines() {
            match serde_json::from_str::<Value>(line.text) {
                Ok(event) => log.event(&event, report),
                Err(err) => report.malformed(path, Some(line.number), err.to_string()),
            }
        }
        if unit.since.is_none_or(|since| log.last_at >= since) {
            let first = out.sessions.len();
            log.finish(out);
            if let Some(main) = out.sessions.get_mut(first)
                && main.title.is_none()
            {
                main.title =
                    stored_title(path, &main.external_id).map(|title| (title, TitleRank::Source));
            }
        }
        Ok(resume_whole(&chunk))
    }
}

/// The title Copilot's session index (`session-store.db` in its home, above the
/// `session-state` folder holding the log at `path`) keeps for session `id`, its
/// `summary`: the name `/resume` lists it by. None where there is no index, no such row,
/// or it cannot be read (the log is imported all the same).
fn stored_title(path: &Path, id: &str) -> Option<String> {
    let home = path
        .ancestors()
        .find(|dir| dir.file_name().is_some_and(|n| n == "session-state"))?
        .parent()?;
    let store = home.join(STORE);
    if !store.is_file() {
        return None;
    }
    let title: Option<String> = super::open_source_db(&store)
        .ok()?
        .query_row("SELECT summary FROM sessions WHERE id = ?1", [id], |r| {
            r.get(0)
        })
        .ok()?;
    title.map(|t| t.trim().to_owned()).filter(|t| !t.is_empty())
}

/// A reply and the thread (sub-agent, or `""` for the session itself) it belongs to.
struct Reply {
    thread: String,
    message: Message,
    calls: i64,
}

/// Usage of a model that none of a lifecycle's replies was made by.
#[derive(Default)]
struct Background {
    tokens: TokenUsage,
    calls: i64,
    first: i64,
    last: i64,
}

/// What reading one session's log gathers.
struct Log {
    /// The id the file's path gives (the session's, unless `session.start` says).
    path_id: String,
    id: Option<String>,
    created: Option<i64>,
    last_at: i64,
    directory: Option<String>,
    /// The model chosen last.
    model: Option<String>,
    version: Option<String>,
    messages: Vec<Reply>,
    /// A call's id → (index in `messages`, part index).
    calls: HashMap<String, (usize, usize)>,
    /// Calls not yet settled, in the order they were made.
    open: Vec<String>,
    /// Reasoning waiting for its thread's next reply.
    reasoning: HashMap<String, Vec<String>>,
    /// Where the current lifecycle's messages start in `messages`.
    lifecycle: usize,
    background: BTreeMap<String, Background>,
    /// When and why the session ended, unless it was resumed since.
    ended: Option<(i64, String)>,
    /// Each thread's first and last event.
    threads: BTreeMap<String, (i64, i64)>,
    /// The name of the sub-agent each call started (`subagent.started`).
    agents: HashMap<String, String>,
    /// Events read so far.
    events: usize,
}

impl Log {
    fn new(path_id: String, mtime_ms: i64) -> Log {
        Log {
            path_id,
            id: None,
            created: None,
            last_at: mtime_ms,
            directory: None,
            model: None,
            version: None,
            messages: Vec::new(),
            calls: HashMap::new(),
            open: Vec::new(),
            reasoning: HashMap::new(),
            lifecycle: 0,
            background: BTreeMap::new(),
            ended: None,
            threads: BTreeMap::new(),
            agents: HashMap::new(),
            events: 0,
        }
    }

    /// One event of the log.
    fn event(&mut self, event: &Value, report: &mut FileReport) {
        let kind = str_of(event, "type").unwrap_or("");
        let data = event.get("data").unwrap_or(&Value::Null);
        if event.get("ephemeral").and_then(Value::as_bool) == Some(true) {
            report.skip(format!("{kind}(ephemeral)"));
            return;
        }
        // An event without a time happened when the one before it did.
        let at = str_of(event, "timestamp")
            .and_then(time::parse)
            .unwrap_or(self.last_at);
        if self.created.is_none() {
            self.created = Some(at);
            self.last_at = at;
        }
        self.last_at = self.last_at.max(at);
        let thread = str_of(event, "agentId")
            .or_else(|| str_of(data, "parentToolCallId"))
            .unwrap_or("")
            .to_owned();
        // A message is keyed by its event's id (one per event, where a reply's `messageId`
        // might be shared by the parts of a reply), else its place in the log.
        self.events += 1;
        let key = str_of(event, "id")
            .filter(|id| !id.is_empty())
            .map_or_else(|| format!("#{}", self.events), str::to_owned);
        match kind {
            "session.start" | "session.resume" => {
                if kind == "session.start" {
                    self.id = str_of(data, "sessionId")
                        .map(str::to_owned)
                        .or(self.id.take());
                    if let Some(start) = str_of(data, "startTime").and_then(time::parse) {
                        self.created = Some(start.min(self.created.unwrap_or(start)));
                    }
                    self.version = str_of(data, "copilotVersion").map(str::to_owned);
                }
                if let Some(model) = str_of(data, "selectedModel").filter(|m| !m.is_empty()) {
                    self.model = Some(model.to_owned());
                }
                self.context(data.get("context").unwrap_or(data));
                self.lifecycle = self.messages.len();
                self.ended = None;
            }
            "session.model_change" => {
                if let Some(model) = str_of(data, "newModel").filter(|m| !m.is_empty()) {
                    self.model = Some(model.to_owned());
                }
            }
            "session.context_changed" => self.context(data),
            "user.message" => {
                let said = str_of(data, "content").unwrap_or("");
                if said.is_empty() {
                    report.skip("user.message:empty");
                    return;
                }
                self.push(&thread, &key, Role::User, at, vec![text(said, false)]);
            }
            "assistant.reasoning" => {
                if let Some(thought) = str_of(data, "content").filter(|t| !t.is_empty()) {
                    self.reasoning
                        .entry(thread.clone())
                        .or_default()
                        .push(thought.to_owned());
                }
            }
            "assistant.message" => {
                if !self.reply(&thread, &key, data, at, report) {
                    return;
                }
            }
            "tool.execution_start" => {
                if let Some(&(mi, pi)) = str_of(data, "toolCallId").and_then(|c| self.calls.get(c))
                    && let Some(Part::Tool(t)) = self.part(mi, pi)
                    && matches!(t.state, ToolState::Running { .. })
                {
                    t.state = ToolState::Running { started_at: at };
                }
            }
            "tool.execution_complete" => self.complete(data, at, report),
            "session.compaction_complete" => {
                let summary = str_of(data, "summaryContent").filter(|s| !s.trim().is_empty());
                let done = data.get("success").and_then(Value::as_bool) != Some(false);
                match summary.filter(|_| done) {
                    Some(summary) => {
                        let parts = vec![
                            Part::Compaction(CompactionPart::default()),
                            text(summary, false),
                        ];
                        let i = self.push(&thread, &key, Role::Assistant, at, parts);
                        self.messages[i].message.is_summary = true;
                    }
                    None => {
                        report.skip("session.compaction_complete:no-summary");
                        return;
                    }
                }
            }
            "subagent.started" => {
                let name = str_of(data, "agentDisplayName").or_else(|| str_of(data, "agentName"));
                match (str_of(data, "toolCallId"), name) {
                    (Some(call), Some(name)) if !name.trim().is_empty() => {
                        self.agents.insert(call.to_owned(), name.trim().to_owned());
                    }
                    _ => {
                        report.skip("subagent.started:unnamed");
                        return;
                    }
                }
            }
            "abort" => self.interrupt(at),
            "session.shutdown" => self.shutdown(data, at),
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
        let span = self.threads.entry(thread).or_insert((at, at));
        span.1 = span.1.max(at);
    }

    /// A working directory from a `session.start` context or `session.context_changed`.
    fn context(&mut self, context: &Value) {
        if let Some(cwd) = str_of(context, "cwd").filter(|d| !d.is_empty()) {
            self.directory.get_or_insert_with(|| cwd.to_owned());
        }
    }

    /// Adds a message of `thread`; returns its index.
    fn push(&mut self, thread: &str, key: &str, role: Role, at: i64, parts: Vec<Part>) -> usize {
        let key = format!("{}:{key}", self.path_id);
        let mut m = message(SRC, &key, role, at);
        m.parts = numbered(SRC, &key, parts, at);
        self.messages.push(Reply {
            thread: thread.to_owned(),
            message: m,
            calls: 0,
        });
        self.messages.len() - 1
    }

    /// An `assistant.message`; whether it had anything to keep (one without is counted
    /// as skipped).
    fn reply(
        &mut self,
        thread: &str,
        key: &str,
        data: &Value,
        at: i64,
        report: &mut FileReport,
    ) -> bool {
        let mut parts: Vec<Part> = Vec::new();
        let thoughts = self.reasoning.remove(thread).unwrap_or_default();
        if thoughts.is_empty() {
            if let Some(thought) = str_of(data, "reasoningText").filter(|t| !t.is_empty()) {
                parts.push(reasoning(thought, None, None));
            }
        } else {
            parts.extend(thoughts.into_iter().map(|t| reasoning(t, None, None)));
        }
        if let Some(said) = str_of(data, "content").filter(|s| !s.is_empty()) {
            parts.push(text(said, false));
        }
        let mut calls = Vec::new();
        for request in data
            .get("toolRequests")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
        {
            let Some(id) = str_of(request, "toolCallId").filter(|c| !c.is_empty()) else {
                report.skip("toolRequest:without-id");
                continue;
            };
            let input = match request.get("arguments") {
                None | Some(Value::Null) => Value::Object(serde_json::Map::new()),
                Some(Value::String(s)) => {
                    serde_json::from_str(s).unwrap_or_else(|_| Value::String(s.clone()))
                }
                Some(args) => args.clone(),
            };
            let name = str_of(request, "name").unwrap_or("");
            calls.push((id.to_owned(), parts.len()));
            parts.push(tool(id, name, input, ToolState::Running { started_at: at }));
        }
        if parts.is_empty() {
            report.skip("assistant.message:empty");
            return false;
        }
        let i = self.push(thread, key, Role::Assistant, at, parts);
        self.messages[i].message.model.clone_from(&self.model);
        for (id, part) in calls {
            self.calls.insert(id.clone(), (i, part));
            self.open.push(id);
        }
        true
    }

    /// The part `pi` of message `mi`, when there is one.
    fn part(&mut self, mi: usize, pi: usize) -> Option<&mut Part> {
        let stored = self.messages.get_mut(mi)?.message.parts.get_mut(pi)?;
        Some(&mut stored.part)
    }

    /// Settles call `id` (the tool part of message `mi`, part `pi`).
    fn settle(&mut self, id: &str, output: String, failed: bool, at: i64) {
        let Some(&(mi, pi)) = self.calls.get(id) else {
            return;
        };
        if let Some(stored) = self
            .messages
            .get_mut(mi)
            .and_then(|m| m.message.parts.get_mut(pi))
            && let Part::Tool(t) = &mut stored.part
        {
            let started = t.state.started_at();
            t.state = settled(output, failed, Value::Null, started, at);
            stored.updated_at = stored.updated_at.max(at);
        }
        self.open.retain(|open| open != id);
    }

    /// A `tool.execution_complete`.
    fn complete(&mut self, data: &Value, at: i64, report: &mut FileReport) {
        let id = str_of(data, "toolCallId").unwrap_or("");
        let Some(&(mi, _)) = self.calls.get(id) else {
            report.skip("tool.execution_complete:without-request");
            return;
        };
        let failed = data.get("success").and_then(Value::as_bool) == Some(false);
        let output = if failed {
            let error = data.get("error").unwrap_or(&Value::Null);
            str_of(error, "message")
                .or_else(|| error.as_str())
                .unwrap_or("the tool failed")
                .to_owned()
        } else {
            let result = data.get("result").unwrap_or(&Value::Null);
            str_of(result, "content")
                .or_else(|| str_of(result, "detailedContent"))
                .or_else(|| result.as_str())
                .unwrap_or("")
                .to_owned()
        };
        if let Some(model) = str_of(data, "model").filter(|m| !m.is_empty())
            && let Some(reply) = self.messages.get_mut(mi)
        {
            reply.message.model = Some(model.to_owned());
        }
        self.settle(id, output, failed, at);
    }

    /// Fails every open call: the turn or the session ended around it.
    fn interrupt(&mut self, at: i64) {
        for id in std::mem::take(&mut self.open) {
            self.settle(&id, INTERRUPTED.to_owned(), true, at);
        }
    }

    /// A `session.shutdown`: its usage, per model, to that model's last reply of the
    /// lifecycle (or to the model's background usage); the session ends.
    fn shutdown(&mut self, data: &Value, at: i64) {
        self.interrupt(at);
        let replies = self.lifecycle..self.messages.len();
        let metrics = data
            .get("modelMetrics")
            .and_then(Value::as_object)
            .cloned()
            .unwrap_or_default();
        // Replies whose model no event named, in a lifecycle of one model: that model's.
        if metrics.len() == 1
            && let Some(only) = metrics.keys().next()
        {
            for reply in &mut self.messages[replies.clone()] {
                if reply.message.role == Role::Assistant
                    && !reply.message.is_summary
                    && reply.message.model.is_none()
                {
                    reply.message.model = Some(only.clone());
                }
            }
        }
        for (model, metric) in &metrics {
            let usage = metric.get("usage").unwrap_or(&Value::Null);
            let (cache_read, cache_write) = (
                int_of(usage, "cacheReadTokens"),
                int_of(usage, "cacheWriteTokens"),
            );
            let thought = int_of(usage, "reasoningTokens");
            let tokens = TokenUsage {
                input: int_of(usage, "inputTokens")
                    .saturating_sub(cache_read)
                    .saturating_sub(cache_write)
                    .max(0),
                output: int_of(usage, "outputTokens").saturating_sub(thought).max(0),
                reasoning: thought,
                cache_read,
                cache_write,
            };
            let calls = metric
                .get("requests")
                .map_or(0, |requests| int_of(requests, "count"));
            let last = replies.clone().rev().find(|&i| {
                let m = &self.messages[i].message;
                m.role == Role::Assistant && !m.is_summary && m.model.as_deref() == Some(model)
            });
            match last {
                Some(i) => {
                    let reply = &mut self.messages[i];
                    reply.message.usage += tokens;
                    reply.calls = reply.calls.saturating_add(calls);
                }
                None => {
                    let bg = self.background.entry(model.clone()).or_default();
                    if bg.first == 0 {
                        bg.first = at;
                    }
                    bg.last = at;
                    bg.tokens += tokens;
                    bg.calls = bg.calls.saturating_add(calls);
                }
            }
        }
        let how = str_of(data, "shutdownType").unwrap_or("routine");
        let reason = match str_of(data, "errorReason").filter(|r| !r.is_empty()) {
            Some(why) => format!("{how}: {why}"),
            None => how.to_owned(),
        };
        self.ended = Some((at, reason));
        self.lifecycle = self.messages.len();
    }

    /// The session, its sub-agents' task sessions and its background usage, into `out`.
    fn finish(self, out: &mut Batch) {
        let id = self
            .id
            .clone()
            .filter(|id| !id.is_empty())
            .unwrap_or_else(|| self.path_id.clone());
        let created = self.created.unwrap_or(self.last_at);
        let mut main = SessionRec::new(&id, created);
        main.updated_at = self.last_at.max(created);
        main.directory.clone_from(&self.directory);
        main.model = most_used(self.messages.iter().filter(|r| r.thread.is_empty()))
            .or_else(|| self.model.clone());
        main.model_config = self
            .version
            .as_ref()
            .map(|v| serde_json::json!({ "copilot_version": v }));
        if let Some((at, reason)) = &self.ended {
            main.ended_at = Some(*at);
            main.end_reason = Some(reason.clone());
        }
        let mut sessions = vec![main];
        // A sub-agent's task session, linked from the call that started it when its
        // thread is named by that call's id.
        let child_id = |thread: &str| format!("{id}:agent:{thread}");
        for (thread, (first, last)) in &self.threads {
            if thread.is_empty() {
                continue;
            }
            let mut rec = SessionRec::new(child_id(thread), *first);
            rec.updated_at = *last;
            rec.parent = Some(id.clone());
            rec.kind = SessionKind::Task;
            rec.directory.clone_from(&self.directory);
            rec.model = most_used(self.messages.iter().filter(|r| &r.thread == thread));
            rec.title = self
                .agents
                .get(thread)
                .map(|name| (name.clone(), TitleRank::Source));
            if let Some(&(mi, pi)) = self.calls.get(thread)
                && let Some(part) = self.messages[mi].message.parts.get(pi)
            {
                out.task_links.push(TaskLink {
                    part_id: part.id.clone(),
                    child: rec.external_id.clone(),
                });
            }
            sessions.push(rec);
        }
        for (model, bg) in self.background {
            let mut rec = SessionRec::new(format!("{id}:model:{model}"), bg.first);
            rec.updated_at = bg.last;
            rec.parent = Some(id.clone());
            rec.kind = SessionKind::Task;
            rec.directory.clone_from(&self.directory);
            rec.model = Some(model.clone());
            rec.model_config = Some(serde_json::json!({ "copilot_usage": "background" }));
            rec.usage_total = Some(SessionUsage {
                tokens: bg.tokens,
                api_calls: bg.calls,
                reported_cost: None,
                model: Some(model),
                cost_usd: 0.0,
                cost_flags: 0,
            });
            sessions.push(rec);
        }
        out.sessions.extend(sessions);
        for reply in self.messages {
            let session = if reply.thread.is_empty() {
                id.clone()
            } else {
                child_id(&reply.thread)
            };
            out.messages.push(MessageRec {
                session,
                message: reply.message,
                api_calls: reply.calls,
                reported_cost: None,
                cost_flags: 0,
                cache_write_1h: 0,
            });
        }
    }
}

/// The model most of `replies` were made by (the latest of those tied).
fn most_used<'a>(replies: impl Iterator<Item = &'a Reply>) -> Option<String> {
    let mut counts: Vec<(String, usize)> = Vec::new();
    for reply in replies {
        if let Some(model) = &reply.message.model
            && reply.message.role == Role::Assistant
        {
            match counts.iter_mut().find(|(m, _)| m == model) {
                Some((_, n)) => *n += 1,
                None => counts.push((model.clone(), 1)),
            }
        }
    }
    // `max_by_key` takes the last of equal maxima.
    counts.into_iter().max_by_key(|(_, n)| *n).map(|(m, _)| m)
}
