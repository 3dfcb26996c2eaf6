//! Kimi (Moonshot AI): each session's `wire.jsonl`, the log of what went over the wire
//! between the agent and its user interface, in the layout of either generation:
//!
//! - Kimi Code: `~/.kimi-code/sessions/<workdir>/<session>/agents/<agent>/wire.jsonl`
//!   (`KIMI_CODE_HOME` moves `~/.kimi-code`), `agents/main` the session and every other
//!   agent's log a sub-agent's task session under it. Records (`protocol_version` 1.4) carry
//!   a `type` and a `time` (ms): `context.append_message` (what enters the context: the
//!   user's words, `origin.kind` `user`; what Kimi injects, synthetic), and
//!   `context.append_loop_event` events: `step.begin` (a reply, one model call),
//!   `content.part` (`think` as reasoning, `text`), `tool.call` and `tool.result`
//!   (`isError` fails it; an `Agent` call's result names the agent it started, whose task
//!   session the call is linked to, as Scribe's own task tool is), `step.end` (the call's
//!   `usage`: `inputOther`, `inputCacheRead`, `inputCacheCreation`, `output`);
//!   `llm.request` and `config.update` name the model (`moonshot-ai/kimi-k2.7-code` →
//!   `kimi-k2.7-code`). `usage.record` repeats a step's usage and is skipped, as are the
//!   prompts (`turn.prompt`, `turn.steer`: their words enter the context as messages) and
//!   the rest (permissions, tool lists, plan mode).
//! - Kimi CLI (the earlier Python agent, the layout ccusage reads):
//!   `~/.kimi/sessions/<workdir hash>/<session>/wire.jsonl` (`KIMI_DATA_DIR`, a
//!   comma-separated list, replaces `~/.kimi`), envelopes `{"timestamp": seconds,
//!   "message": {"type", "payload"}}` of MoonshotAI/kimi-cli's wire events
//!   (`src/kimi_cli/wire/types.py`): `TurnBegin` and `SteerInput` (the user's input),
//!   `StepBegin` (a reply), `ContentPart` (streamed pieces of `text` and `think`, joined),
//!   `ToolCall` with its streamed `ToolCallPart` arguments, `ToolResult`
//!   (`return_value.is_error`), `StatusUpdate` (`token_usage`: `input_other`,
//!   `input_cache_read`, `input_cache_creation`, `output`, for the step), `StepInterrupted`,
//!   and `SubagentEvent` (a sub-agent's events, into its own task session). The model is
//!   `config.json`'s beside `sessions`, as ccusage reads it.
//!
//! A changed log is read whole; messages are keyed by the session and the step (or the
//! line), so nothing is stored twice.

use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};

use scribe_message::{Part, Role, TokenUsage, ToolState};
use scribe_session::SessionKind;
use serde_json::Value;

use super::{
    FileReport, Importer, Times, Unit, content_text, image_url, int_of, message, reasoning,
    resume_whole, settle_call, stored_part, str_of, text, tool, walk,
};
use crate::Source;
use crate::env::Env;
use crate::error::Result;
use crate::record::{Batch, MessageRec, Resume, SessionRec, TaskLink, TitleRank};

const SRC: Source = Source::Kimi;

/// The log of a session (or agent).
const WIRE: &str = "wire.jsonl";

/// The Kimi importer.
#[derive(Debug, Clone, Copy)]
pub struct Kimi;

impl Importer for Kimi {
    fn source(&self) -> Source {
        SRC
    }

    fn reads_state(&self) -> bool {
        false
    }

    fn default_roots(&self, env: &Env) -> Vec<PathBuf> {
        let code = env
            .var("KIMI_CODE_HOME")
            .map(|h| env.expand(h))
            .or_else(|| env.home_join(".kimi-code"));
        let cli = env
            .paths("KIMI_DATA_DIR")
            .or_else(|| env.home_join(".kimi").map(|p| vec![p]))
            .unwrap_or_default();
        code.into_iter()
            .chain(cli)
            .map(|dir| dir.join("sessions"))
            .collect()
    }

    fn discover(&self, root: &Path, out: &mut Vec<PathBuf>) -> Result<()> {
        walk(root, out, |p| p.file_name().is_some_and(|n| n == WIRE))
    }

    fn read(&self, unit: &Unit<'_>, out: &mut Batch, report: &mut FileReport) -> Result<Resume> {
        let path = unit.path;
        let chunk = crate::reader::read_from(path, 0, 0)?;
        let folder = |n: usize| {
            path.ancestors()
                .nth(n)
                .and_then(Path::file_name)
                .map(|s| s.to_string_lossy().into_owned())
        };
        // Kimi Code: <session>/agents/<agent>/wire.jsonl; Kimi CLI: <session>/wire.jsonl.
        let (mut conv, code) = if folder(2).as_deref() == Some("agents") {
            let session = folder(3).unwrap_or_default();
            let agent = folder(1).unwrap_or_default();
            let mut conv = Conv::new(session.clone(), unit.mtime_ms);
            if agent != "main" {
                conv.id = format!("{session}:{agent}");
                conv.parent = Some(session);
            }
            (conv, true)
        } else {
            let mut conv = Conv::new(folder(1).unwrap_or_default(), unit.mtime_ms);
            conv.model = cli_model(path);
            (conv, false)
        };
        for line in chunk.lines() {
            match serde_json::from_str::<Value>(line.text) {
                Ok(record) if code => conv.code_record(&record, line.number, report),
                Ok(record) => conv.cli_record(&record, line.number, report),
                Err(err) => report.malformed(path, Some(line.number), err.to_string()),
            }
        }
        if conv.seen && unit.since.is_none_or(|since| conv.times.last() >= since) {
            conv.finish(out);
        } else if !conv.seen {
            report.skip("(not a Kimi session)");
        }
        Ok(resume_whole(&chunk))
    }
}

/// The model the Kimi CLI's `config.json` names, beside the `sessions` folder holding
/// `path` (`sessions/<hash>/<session>/wire.jsonl`).
fn cli_model(path: &Path) -> Option<String> {
    let config = path.ancestors().nth(4)?.join("config.json");
    let v: Value = serde_json::from_slice(&std::fs::read(config).ok()?).ok()?;
    str_of(&v, "model")
        .filter(|m| !m.trim().is_empty())
        .map(model_name)
}

/// A model as Kimi names it, without its provider (`moonshot-ai/kimi-k2.7-code` →
/// `kimi-k2.7-code`).
fn model_name(raw: &str) -> String {
    let raw = raw.trim();
    raw.rsplit_once('/').map_or(raw, |(_, m)| m).to_owned()
}

/// One session's (or agent's) conversation being read.
struct Conv {
    id: String,
    parent: Option<String>,
    /// Whether a record of Kimi's was read.
    seen: bool,
    times: Times,
    directory: Option<String>,
    /// A sub-agent's type, as its title.
    title: Option<String>,
    model: Option<String>,
    messages: Vec<MessageRec>,
    /// Each message's key (parts are keyed by it and their position).
    keys: Vec<String>,
    /// A step's id → its reply (index in `messages`).
    steps: HashMap<String, usize>,
    /// The Kimi CLI's reply being written.
    current: Option<usize>,
    /// A call's id → (index in `messages`, part index).
    calls: HashMap<String, (usize, usize)>,
    /// The Kimi CLI's streamed arguments of a call (its place), joined at the end.
    arguments: BTreeMap<(usize, usize), String>,
    /// The call whose arguments stream now.
    streaming: Option<(usize, usize)>,
    /// The Kimi CLI's sub-agents, by id.
    agents: BTreeMap<String, Conv>,
    /// Kimi Code's `Agent` calls and the task sessions (other agents' logs) they started.
    links: Vec<TaskLink>,
}

impl Conv {
    fn new(id: String, mtime_ms: i64) -> Conv {
        Conv {
            id,
            parent: None,
            seen: false,
            times: Times::new(mtime_ms),
            directory: None,
            title: None,
            model: None,
            messages: Vec::new(),
            keys: Vec::new(),
            steps: HashMap::new(),
            current: None,
            calls: HashMap::new(),
            arguments: BTreeMap::new(),
            streaming: None,
            agents: BTreeMap::new(),
            links: Vec::new(),
        }
    }

    /// A new message of `role` keyed `key`; returns its index.
    fn push(&mut self, key: String, role: Role, at: i64) -> usize {
        let mut m = message(SRC, &key, role, at);
        if role == Role::Assistant {
            m.model.clone_from(&self.model);
        }
        self.messages.push(MessageRec::new(self.id.clone(), m));
        self.keys.push(key);
        self.messages.len() - 1
    }

    /// Adds `part` to message `i`; with `join`, a piece of text or reasoning that goes on
    /// the one before it (the Kimi CLI streams them) is added to it.
    fn add(&mut self, i: usize, part: Part, join: bool, at: i64) -> usize {
        let m = &mut self.messages[i].message;
        if join && let Some(last) = m.parts.last_mut() {
            match (&mut last.part, &part) {
                (Part::Text(a), Part::Text(b)) if !a.synthetic && !b.synthetic => {
                    a.text.push_str(&b.text);
                    last.updated_at = at;
                    return m.parts.len() - 1;
                }
                (Part::Reasoning(a), Part::Reasoning(b)) => {
                    a.text.push_str(&b.text);
                    last.updated_at = at;
                    return m.parts.len() - 1;
                }
                _ => {}
            }
        }
        let position = m.parts.len();
        m.parts.push(stored_part(
            SRC,
            &self.keys[i],
            &position.to_string(),
            position as i64,
            part,
            at,
        ));
        m.updated_at = m.updated_at.max(at);
        position
    }

    fn call(&mut self, i: usize, id: &str, name: &str, input: Value, at: i64) -> (usize, usize) {
        let part = tool(id, name, input, ToolState::Running { started_at: at });
        let place = (i, self.add(i, part, false, at));
        self.calls.insert(id.to_owned(), place);
        place
    }

    fn result(&mut self, id: &str, output: String, failed: bool, at: i64, report: &mut FileReport) {
        let Some(place) = self.calls.remove(id) else {
            report.skip("tool result without a call");
            return;
        };
        report.records += 1;
        settle_call(&mut self.messages, place, output, failed, at);
    }

    fn usage(&mut self, i: usize, tokens: TokenUsage) {
        let rec = &mut self.messages[i];
        let u = &mut rec.message.usage;
        u.input += tokens.input;
        u.output += tokens.output;
        u.cache_read += tokens.cache_read;
        u.cache_write += tokens.cache_write;
        rec.api_calls = 1;
    }

    /// A message the user (or, synthetic, the agent in their place) put in the context.
    fn user(&mut self, key: String, content: &Value, synthetic: bool, at: i64) -> bool {
        let parts = content_parts(content, synthetic);
        if parts.is_empty() {
            return false;
        }
        let i = self.push(key, Role::User, at);
        for part in parts {
            self.add(i, part, false, at);
        }
        true
    }

    /// A record of Kimi Code's log.
    fn code_record(&mut self, r: &Value, line: u64, report: &mut FileReport) {
        let kind = str_of(r, "type").unwrap_or("");
        let at = r.get("time").and_then(Value::as_i64);
        match kind {
            "metadata" => {
                self.seen = true;
                let at = r.get("created_at").and_then(Value::as_i64).or(at);
                self.times.note(at);
            }
            "config.update" | "llm.request" => {
                self.seen = true;
                if let Some(model) = str_of(r, "model")
                    .or_else(|| str_of(r, "modelAlias"))
                    .filter(|m| !m.trim().is_empty())
                {
                    self.model = Some(model_name(model));
                }
                if self.directory.is_none() {
                    self.directory = str_of(r, "cwd")
                        .filter(|d| !d.is_empty())
                        .map(str::to_owned);
                }
                // A sub-agent's profile is what kind of agent it is.
                if self.parent.is_some()
                    && let Some(profile) = str_of(r, "profileName").filter(|p| !p.is_empty())
                {
                    self.title = Some(profile.to_owned());
                }
                report.skip(kind);
            }
            "context.append_message" => {
                self.seen = true;
                let at = self.times.note(at);
                let m = r.get("message").unwrap_or(&Value::Null);
                let content = m.get("content").unwrap_or(&Value::Null);
                let key = format!("{}:#{line}", self.id);
                let role = str_of(m, "role").unwrap_or("");
                let taken = match Some(role) {
                    Some("user") => {
                        let typed =
                            m.pointer("/origin/kind").and_then(Value::as_str) == Some("user");
                        self.user(key, content, !typed, at)
                    }
                    Some("assistant") => {
                        let parts = content_parts(content, false);
                        let taken = !parts.is_empty();
                        if taken {
                            let i = self.push(key, Role::Assistant, at);
                            for part in parts {
                                self.add(i, part, false, at);
                            }
                        }
                        taken
                    }
                    _ => false,
                };
                if taken {
                    report.records += 1;
                } else {
                    report.skip(format!("context.append_message:{role}"));
                }
            }
            "context.append_loop_event" => {
                self.seen = true;
                let at = self.times.note(at);
                self.loop_event(r.get("event").unwrap_or(&Value::Null), at, report);
            }
            "" => report.skip("untyped"),
            other => report.skip(other),
        }
    }

    fn loop_event(&mut self, e: &Value, at: i64, report: &mut FileReport) {
        let step = |key: &str| str_of(e, key).filter(|s| !s.is_empty()).map(str::to_owned);
        match str_of(e, "type").unwrap_or("") {
            "step.begin" => {
                let Some(uuid) = step("uuid") else {
                    report.skip("step.begin:without-id");
                    return;
                };
                let i = self.push(format!("{}:{uuid}", self.id), Role::Assistant, at);
                self.steps.insert(uuid, i);
                report.records += 1;
            }
            "content.part" => {
                let Some(&i) = step("stepUuid").and_then(|s| self.steps.get(&s)) else {
                    report.skip("content.part:without-step");
                    return;
                };
                let p = e.get("part").unwrap_or(&Value::Null);
                match content_part(p, false) {
                    Some(part) => {
                        self.add(i, part, false, at);
                        report.records += 1;
                    }
                    None => report.skip("content.part:empty"),
                }
            }
            "tool.call" => {
                let Some(&i) = step("stepUuid").and_then(|s| self.steps.get(&s)) else {
                    report.skip("tool.call:without-step");
                    return;
                };
                let id = step("toolCallId")
                    .or_else(|| step("uuid"))
                    .unwrap_or_default();
                let input = match e.get("args") {
                    None | Some(Value::Null) => Value::Object(serde_json::Map::new()),
                    Some(args) => args.clone(),
                };
                self.call(i, &id, str_of(e, "name").unwrap_or(""), input, at);
                report.records += 1;
            }
            "tool.result" => {
                let id = step("toolCallId")
                    .or_else(|| step("parentUuid"))
                    .unwrap_or_default();
                let result = e.get("result").unwrap_or(&Value::Null);
                let failed = result.get("isError").and_then(Value::as_bool) == Some(true);
                let output = content_text(result.get("output").unwrap_or(result));
                // An `Agent` call's result names the agent it started (`agent_id: agent-0`),
                // whose log is the task session `<session>:<agent>`.
                let agent = output
                    .lines()
                    .find_map(|l| l.trim().strip_prefix("agent_id:"))
                    .map(str::trim)
                    .filter(|a| !a.is_empty() && !a.contains(['/', '\\']))
                    .map(str::to_owned);
                if let (Some(agent), Some(&(i, p)), None) =
                    (agent, self.calls.get(&id), &self.parent)
                    && let Some(part) = self.messages[i].message.parts.get(p)
                {
                    self.links.push(TaskLink {
                        part_id: part.id.clone(),
                        child: format!("{}:{agent}", self.id),
                    });
                }
                self.result(&id, output, failed, at, report);
            }
            "step.end" => {
                let Some(&i) = step("uuid").and_then(|s| self.steps.get(&s)) else {
                    report.skip("step.end:without-step");
                    return;
                };
                if let Some(u) = e.get("usage").filter(|u| u.is_object()) {
                    self.usage(
                        i,
                        TokenUsage {
                            input: int_of(u, "inputOther"),
                            output: int_of(u, "output"),
                            cache_read: int_of(u, "inputCacheRead"),
                            cache_write: int_of(u, "inputCacheCreation"),
                            reasoning: 0,
                        },
                    );
                }
                let m = &mut self.messages[i].message;
                m.finished_at = Some(at);
                m.updated_at = m.updated_at.max(at);
                report.records += 1;
            }
            "" => report.skip("loop:untyped"),
            other => report.skip(format!("loop:{other}")),
        }
    }

    /// A record of the Kimi CLI's log.
    fn cli_record(&mut self, r: &Value, line: u64, report: &mut FileReport) {
        if str_of(r, "type") == Some("metadata") {
            self.seen = true;
            report.skip("metadata");
            return;
        }
        let Some(m) = r.get("message").filter(|m| m.is_object()) else {
            report.skip("untyped");
            return;
        };
        self.seen = true;
        let at = r
            .get("timestamp")
            .and_then(Value::as_f64)
            .filter(|t| t.is_finite() && t.abs() < 1e12)
            .map(|t| (t * 1000.0) as i64);
        let at = self.times.note(at);
        let kind = str_of(m, "type").unwrap_or("");
        let payload = m.get("payload").unwrap_or(&Value::Null);
        self.cli_event(kind, payload, line, at, report);
    }

    fn cli_event(&mut self, kind: &str, p: &Value, line: u64, at: i64, report: &mut FileReport) {
        match kind {
            "TurnBegin" | "SteerInput" => {
                self.current = None;
                self.streaming = None;
                let key = format!("{}:#{line}", self.id);
                if self.user(key, p.get("user_input").unwrap_or(&Value::Null), false, at) {
                    report.records += 1;
                } else {
                    report.skip(format!("{kind}:empty"));
                }
            }
            "StepBegin" => {
                let n = p.get("n").and_then(Value::as_i64).unwrap_or(0);
                let i = self.push(format!("{}:#{line}:step{n}", self.id), Role::Assistant, at);
                self.current = Some(i);
                self.streaming = None;
                report.records += 1;
            }
            "ContentPart" => {
                let i = self.reply(line, at);
                match content_part(p, false) {
                    Some(part) => {
                        self.add(i, part, true, at);
                        report.records += 1;
                    }
                    None => report.skip("ContentPart:empty"),
                }
            }
            "ToolCall" => {
                let i = self.reply(line, at);
                let id = str_of(p, "id").unwrap_or("").to_owned();
                let f = p.get("function").unwrap_or(&Value::Null);
                let place = self.call(i, &id, str_of(f, "name").unwrap_or(""), Value::Null, at);
                self.arguments
                    .insert(place, str_of(f, "arguments").unwrap_or("").to_owned());
                self.streaming = Some(place);
                report.records += 1;
            }
            "ToolCallPart" => match self.streaming {
                Some(place) => {
                    if let Some(piece) = str_of(p, "arguments_part") {
                        self.arguments.entry(place).or_default().push_str(piece);
                    }
                    report.records += 1;
                }
                None => report.skip("ToolCallPart:without-call"),
            },
            "ToolResult" => {
                self.streaming = None;
                let id = str_of(p, "tool_call_id").unwrap_or("");
                let value = p
                    .get("return_value")
                    .or_else(|| p.get("result"))
                    .unwrap_or(p);
                let failed = value.get("is_error").and_then(Value::as_bool) == Some(true);
                let mut output = content_text(value.get("output").unwrap_or(&Value::Null));
                if output.is_empty() {
                    output = str_of(value, "message").unwrap_or("").to_owned();
                }
                self.result(id, output, failed, at, report);
            }
            "StatusUpdate" => match p.get("token_usage").filter(|u| u.is_object()) {
                Some(u) => {
                    let i = self.reply(line, at);
                    self.usage(
                        i,
                        TokenUsage {
                            input: int_of(u, "input_other"),
                            output: int_of(u, "output"),
                            cache_read: int_of(u, "input_cache_read"),
                            cache_write: int_of(u, "input_cache_creation"),
                            reasoning: 0,
                        },
                    );
                    report.records += 1;
                }
                None => report.skip("StatusUpdate"),
            },
            "StepInterrupted" => {
                if let Some(i) = self.current {
                    self.messages[i].message.error = Some(serde_json::json!({
                        "type": "interrupted",
                        "message": "the step was interrupted",
                    }));
                }
                self.current = None;
                report.records += 1;
            }
            "SubagentEvent" => {
                let Some(agent) = str_of(p, "agent_id")
                    .or_else(|| str_of(p, "parent_tool_call_id"))
                    .filter(|a| !a.is_empty())
                    .map(str::to_owned)
                else {
                    report.skip("SubagentEvent:without-agent");
                    return;
                };
                let e = p.get("event").unwrap_or(&Value::Null);
                let (inner, payload) = (
                    str_of(e, "type").unwrap_or("").to_owned(),
                    e.get("payload").cloned().unwrap_or(Value::Null),
                );
                let (id, model, title) = (
                    format!("{}:{agent}", self.id),
                    self.model.clone(),
                    str_of(p, "subagent_type").map(str::to_owned),
                );
                let parent = self.id.clone();
                let child = self.agents.entry(agent).or_insert_with(|| {
                    let mut c = Conv::new(id, at);
                    c.parent = Some(parent);
                    c.model = model;
                    c.title = title;
                    c
                });
                child.seen = true;
                child.times.note(Some(at));
                child.cli_event(&inner, &payload, line, at, report);
            }
            "" => report.skip("untyped"),
            other => report.skip(other),
        }
    }

    /// The Kimi CLI's reply being written: the step's, or a new one for content that came
    /// without a `StepBegin`.
    fn reply(&mut self, line: u64, at: i64) -> usize {
        match self.current {
            Some(i) => i,
            None => {
                let i = self.push(format!("{}:#{line}", self.id), Role::Assistant, at);
                self.current = Some(i);
                i
            }
        }
    }

    /// The session (with its sub-agents') and its messages into `out`.
    fn finish(mut self, out: &mut Batch) {
        // The Kimi CLI's streamed arguments, parsed where they are JSON.
        for ((i, part), raw) in std::mem::take(&mut self.arguments) {
            if let Some(stored) = self
                .messages
                .get_mut(i)
                .and_then(|m| m.message.parts.get_mut(part))
                && let Part::Tool(t) = &mut stored.part
            {
                t.input = match raw.trim() {
                    "" => Value::Object(serde_json::Map::new()),
                    s => serde_json::from_str(s).unwrap_or(Value::String(raw.clone())),
                };
            }
        }
        let created = self.times.first();
        let mut rec = SessionRec::new(&self.id, created);
        rec.updated_at = self.times.last().max(created);
        if let Some(parent) = &self.parent {
            rec.parent = Some(parent.clone());
            rec.kind = SessionKind::Task;
        }
        rec.directory = self.directory.clone();
        rec.title = self.title.map(|t| (t, TitleRank::Source));
        let messages: Vec<MessageRec> = self
            .messages
            .into_iter()
            .filter(|m| !m.message.parts.is_empty() || !m.message.usage.is_zero())
            .collect();
        rec.model = messages
            .iter()
            .rev()
            .find_map(|m| m.message.model.clone())
            .or(self.model);
        out.sessions.push(rec);
        out.task_links.extend(self.links);
        out.messages.extend(messages);
        for agent in self.agents.into_values() {
            agent.finish(out);
        }
    }
}

/// A content part of Kimi's (`text`, `think`, `image_url`).
fn content_part(p: &Value, synthetic: bool) -> Option<Part> {
    match str_of(p, "type").unwrap_or("") {
        "text" => str_of(p, "text")
            .filter(|t| !t.is_empty())
            .map(|t| text(t, synthetic)),
        "think" => {
            let thought = str_of(p, "think").unwrap_or("");
            let signature = str_of(p, "encrypted").map(str::to_owned);
            (!thought.is_empty() || signature.is_some())
                .then(|| reasoning(thought, signature, None))
        }
        "image_url" => p
            .pointer("/image_url/url")
            .or_else(|| p.get("imageUrl"))
            .and_then(Value::as_str)
            .map(|u| image_url(u.to_owned())),
        _ => None,
    }
}

/// The parts of a message's content: a string, or a list of content parts.
fn content_parts(content: &Value, synthetic: bool) -> Vec<Part> {
    match content {
        Value::String(s) if !s.is_empty() => vec![text(s, synthetic)],
        Value::Array(items) => items
            .iter()
            .filter_map(|p| content_part(p, synthetic))
            .collect(),
        _ => Vec::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::model_name;

    #[test]
    fn models_lose_their_provider() {
        assert_eq!(model_name("moonshot-ai/kimi-k2.7-code"), "kimi-k2.7-code");
        assert_eq!(model_name(" kimi-k2 "), "kimi-k2");
    }
}
