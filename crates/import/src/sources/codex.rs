//! OpenAI Codex CLI: `${CODEX_HOME:-~/.codex}/sessions/YYYY/MM/DD/rollout-…-<uuid>.jsonl`
//! (also `.jsonl.zst`, and `archived_sessions/`).
//!
//! Mapping (FORMATS.md §2):
//! - one session per rollout file, id from `session_meta` (else the file name's uuid);
//!   `forked_from_id` makes it a fork, `source.subagent.thread_spawn.parent_thread_id` a
//!   task session, under that parent; the title is `thread_name_updated`;
//! - the transcript is built from `response_item`s: the items of one model response
//!   (reasoning, text, tool calls) are one assistant message; `function_call_output` and
//!   `custom_tool_call_output` settle their call's tool part;
//! - user messages: a `response_item` user message is a prompt only when the user typed it
//!   (0.158: `content_item_kinds` holds `user.text`; older: a matching `event_msg
//!   user_message` exists; with neither, text that is not injected context); the
//!   `event_msg` and `item_completed` copies of messages are skipped; a `!` shell command
//!   the user ran (`<user_shell_command>`) is kept as typed (`!ls`) with what it printed
//!   as synthetic text;
//! - usage: deltas of the cumulative `total_token_usage` (a `token_count` re-emitted with
//!   unchanged totals is skipped; `last_token_usage` only when totals are missing or went
//!   back), attached to the response before it; `input_tokens` includes the cached ones and
//!   `output_tokens` the reasoning ones, so Scribe stores `input − cached` and
//!   `output − reasoning`; `token_usage_record` repeats `token_count` and is skipped;
//! - the model is the `token_count`'s own, else the latest `turn_context`'s;
//! - a `token_count`'s `rate_limits` (how much of the plan's five-hour and weekly windows
//!   is used, when each resets) is the session's usage-limit snapshot, the newest kept in
//!   its `model_config` under [`RATE_LIMITS`] (`scribe sources` shows the newest of all);
//! - a fork or sub-agent file starts with a copy of its parent's history written in the
//!   second its `session_meta` was: those lines are skipped, their last token total kept as
//!   the baseline (as ccusage does);
//! - `compacted` is a summary message; its `replacement_history` is not imported again;
//! - `thread_rolled_back` drops the newest `num_turns` user turns from the thread, as
//!   Codex itself does when it rebuilds a thread's history (a turn: a real prompt and
//!   everything up to the next one); their messages stay in Scribe, as they stay in the
//!   rollout, with `error` `{"type": "rolled_back", …}`, and their usage (it was spent)
//!   stays counted. Only the newest [`TURNS_KEPT`] turns are remembered for it.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use scribe_message::{CompactionPart, Part, Role, TokenUsage, ToolState};
use scribe_session::SessionKind;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::{
    FileReport, Importer, JsonLines, Unit, content_text, f64_of, int_of, mark_undone, message,
    read_json_lines, reasoning, resume_after, resumed_carry, settled, stored_part, str_of, text,
    tool, walk,
};
use crate::Source;
use crate::env::Env;
use crate::error::Result;
use crate::record::{Batch, MessageRec, PartUpdate, Resume, SessionRec, TitleRank};
use crate::time;

const SRC: Source = Source::Codex;

/// User turns a reader remembers (their message ids) for a later `thread_rolled_back`.
pub const TURNS_KEPT: usize = 100;

/// The Codex importer.
#[derive(Debug, Clone, Copy)]
pub struct Codex;

#[derive(Debug, Clone, Default, Serialize, Deserialize)]
struct Head {
    id: String,
    meta: bool,
    parent: Option<String>,
    fork: bool,
    cwd: Option<String>,
    created_at: i64,
    updated_at: i64,
    model: Option<String>,
    models: BTreeMap<String, u64>,
    title: Option<String>,
    provider: Option<String>,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
struct Open {
    key: String,
    message_id: String,
    created_at: i64,
    updated_at: i64,
    next_position: i64,
    model: Option<String>,
    usage: TokenUsage,
    calls: i64,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
struct Call {
    message_id: String,
    part_id: String,
    position: i64,
    name: String,
    input: Value,
    started_at: i64,
}

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
struct Totals {
    input: i64,
    cached: i64,
    cache_write: i64,
    output: i64,
    reasoning: i64,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
struct PendingUser {
    key: String,
    text: String,
    at: i64,
    images: Vec<String>,
}

#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(default)]
struct Carry {
    head: Head,
    open: Option<Open>,
    calls: BTreeMap<String, Call>,
    totals: Option<Totals>,
    pending: Vec<PendingUser>,
    saw_user_event: bool,
    /// The second (`YYYY-MM-DDTHH:MM:SS`) of a fork's or sub-agent's copied history.
    replay: Option<String>,
    last_at: i64,
    started: bool,
    /// The message ids of the newest user turns, oldest first: what a rollback undoes.
    turns: Vec<Vec<String>>,
    /// The newest usage-limit snapshot a `token_count` carried ([`rate_limits`]).
    rate_limits: Option<Value>,
}

impl Importer for Codex {
    fn reads_state(&self) -> bool {
        false
    }

    fn source(&self) -> Source {
        SRC
    }

    fn default_roots(&self, env: &Env) -> Vec<PathBuf> {
        let home = env
            .var("CODEX_HOME")
            .map(|h| env.expand(h))
            .or_else(|| env.home_join(".codex"));
        home.map(|h| vec![h.join("sessions"), h.join("archived_sessions")])
            .unwrap_or_default()
    }

    fn discover(&self, root: &Path, out: &mut Vec<PathBuf>) -> Result<()> {
        let mut found = Vec::new();
        walk(root, &mut found, |p| {
            let name = p
                .file_name()
                .map(|n| n.to_string_lossy())
                .unwrap_or_default();
            name.ends_with(".jsonl") || name.ends_with(".jsonl.zst")
        })?;
        // A plain rollout wins over its compressed sibling.
        for path in &found {
            let name = path.to_string_lossy();
            if let Some(plain) = name.strip_suffix(".zst")
                && found.iter().any(|p| p.to_string_lossy() == plain)
            {
                continue;
            }
            out.push(path.clone());
        }
        Ok(())
    }

    fn read(&self, unit: &Unit<'_>, out: &mut Batch, report: &mut FileReport) -> Result<Resume> {
        let mut carry: Carry = resumed_carry(unit);
        if carry.head.id.is_empty() {
            carry.head.id = id_from_name(unit.path);
        }
        if carry.last_at == 0 {
            carry.last_at = unit.mtime_ms;
        }
        let mut r = Reader {
            carry,
            out,
            report,
            emitted: BTreeMap::new(),
            line: 0,
        };
        let chunk = read_json_lines(unit, &mut r)?;
        r.flush_open();
        Ok(resume_after(&chunk, &r.finish()))
    }
}

impl JsonLines for Reader<'_> {
    fn report(&mut self) -> &mut FileReport {
        self.report
    }

    fn read_line(&mut self, number: u64, value: &Value) {
        self.line = number;
        self.record(value);
    }
}

/// The thread id in `rollout-YYYY-MM-DDThh-mm-ss-<uuid>.jsonl`, else the file's stem.
fn id_from_name(path: &Path) -> String {
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let stem = name
        .strip_suffix(".zst")
        .unwrap_or(&name)
        .strip_suffix(".jsonl")
        .unwrap_or(&name)
        .to_owned();
    // `get`, not indexing: a name with multi-byte characters must not panic.
    if stem.starts_with("rollout-")
        && let Some(tail) = stem.get(stem.len().saturating_sub(36)..)
        && tail.len() == 36
        && tail.bytes().filter(|b| *b == b'-').count() == 4
    {
        return tail.to_owned();
    }
    stem
}

struct Reader<'a> {
    carry: Carry,
    out: &'a mut Batch,
    report: &'a mut FileReport,
    emitted: BTreeMap<String, usize>,
    line: u64,
}

impl Reader<'_> {
    fn record(&mut self, v: &Value) {
        let kind = str_of(v, "type").unwrap_or("");
        let stamp = str_of(v, "timestamp").unwrap_or("");
        let at = time::parse(stamp);
        if let Some(at) = at {
            self.carry.last_at = at;
        }
        let at = at.unwrap_or(self.carry.last_at);
        let payload = v.get("payload").cloned().unwrap_or(Value::Null);
        let ptype = str_of(&payload, "type").unwrap_or("");
        // The copied history at the top of a fork or a sub-agent's file.
        if kind != "session_meta"
            && let Some(second) = &self.carry.replay
        {
            if stamp.get(..19) == Some(second.as_str()) {
                if kind == "event_msg"
                    && ptype == "token_count"
                    && let Some(t) = payload.pointer("/info/total_token_usage").map(totals)
                {
                    self.carry.totals = Some(t);
                }
                self.report.skip("replayed-parent-history");
                return;
            }
            self.carry.replay = None;
        }
        match kind {
            "session_meta" => self.meta(&payload, stamp, at),
            "turn_context" => {
                if let Some(m) = str_of(&payload, "model") {
                    self.carry.head.model = Some(m.to_owned());
                }
                if self.carry.head.cwd.is_none() {
                    self.carry.head.cwd = str_of(&payload, "cwd").map(str::to_owned);
                }
                self.report.records += 1;
            }
            "response_item" => {
                self.touch(at);
                self.item(&payload, ptype, at);
            }
            "event_msg" => self.event(&payload, ptype, at),
            "compacted" => {
                self.touch(at);
                self.compacted(&payload, at);
            }
            "" => self.report.skip("(no type)"),
            other => self.report.skip(other),
        }
    }

    fn touch(&mut self, at: i64) {
        let h = &mut self.carry.head;
        if h.created_at == 0 || at < h.created_at {
            h.created_at = at;
        }
        h.updated_at = h.updated_at.max(at);
        self.carry.started = true;
    }

    fn meta(&mut self, p: &Value, stamp: &str, at: i64) {
        if self.carry.head.meta {
            self.report.skip("session_meta:repeated");
            return;
        }
        self.carry.head.meta = true;
        self.report.records += 1;
        let h = &mut self.carry.head;
        if let Some(id) = str_of(p, "id").filter(|id| !id.trim().is_empty()) {
            h.id = id.to_owned();
        }
        let created = str_of(p, "timestamp").and_then(time::parse).unwrap_or(at);
        h.created_at = created;
        h.updated_at = h.updated_at.max(created);
        h.cwd = str_of(p, "cwd").map(str::to_owned);
        h.provider = str_of(p, "model_provider").map(str::to_owned);
        let spawn = p.pointer("/source/subagent/thread_spawn/parent_thread_id");
        let parent = spawn
            .and_then(Value::as_str)
            .or_else(|| str_of(p, "parent_thread_id"))
            .filter(|_| p.pointer("/source/subagent").is_some());
        if let Some(parent) = parent {
            h.parent = Some(parent.to_owned());
        } else if let Some(fork) = str_of(p, "forked_from_id") {
            h.parent = Some(fork.to_owned());
            h.fork = true;
        }
        if h.parent.is_some() {
            self.carry.replay = stamp.get(..19).map(str::to_owned);
        }
        self.carry.started = true;
    }

    fn open(&mut self, at: i64) -> Open {
        self.flush_users();
        if let Some(open) = &self.carry.open {
            return open.clone();
        }
        let key = format!("{}:{}", self.carry.head.id, self.line);
        let open = Open {
            message_id: crate::ids::message_id(SRC, &key, at),
            key,
            created_at: at,
            updated_at: at,
            next_position: 0,
            model: None,
            usage: TokenUsage::default(),
            calls: 0,
        };
        self.carry.open = Some(open.clone());
        open
    }

    /// Adds `part` to the open response.
    fn add(&mut self, part: Part, at: i64, call: Option<(&str, &str, &Value)>) {
        let open = self.open(at);
        let position = open.next_position;
        let part_key = format!("{}", self.line);
        let stored = stored_part(SRC, &open.key, &part_key, position, part, at);
        if let Some((call_id, name, input)) = call {
            self.carry.calls.insert(
                call_id.to_owned(),
                Call {
                    message_id: open.message_id.clone(),
                    part_id: stored.id.clone(),
                    position,
                    name: name.to_owned(),
                    input: input.clone(),
                    started_at: at,
                },
            );
        }
        if let Some(o) = self.carry.open.as_mut() {
            o.next_position += 1;
            o.updated_at = o.updated_at.max(at);
        }
        let m = self.open_message();
        match self.emitted.get(&open.message_id).copied() {
            Some(i) => {
                let rec = &mut self.out.messages[i];
                let mut parts = std::mem::take(&mut rec.message.parts);
                parts.push(stored);
                rec.message = m;
                rec.message.parts = parts;
            }
            None => {
                let mut m = m;
                m.parts.push(stored);
                self.emit(m, 1);
            }
        }
    }

    fn emit(&mut self, m: scribe_message::Message, calls: i64) {
        let turns = &mut self.carry.turns;
        if m.role == Role::User {
            turns.push(vec![m.id.clone()]);
            if turns.len() > TURNS_KEPT {
                turns.remove(0);
            }
        } else if let Some(turn) = turns.last_mut()
            && !turn.contains(&m.id)
        {
            turn.push(m.id.clone());
        }
        self.emitted.insert(m.id.clone(), self.out.messages.len());
        let session = self.carry.head.id.clone();
        self.out.messages.push(MessageRec {
            session,
            message: m,
            api_calls: calls,
            reported_cost: None,
            cost_flags: 0,
            cache_write_1h: 0,
        });
    }

    fn open_message(&self) -> scribe_message::Message {
        let Some(open) = &self.carry.open else {
            return message(SRC, "", Role::Assistant, 0);
        };
        let mut m = message(SRC, &open.key, Role::Assistant, open.created_at);
        m.id.clone_from(&open.message_id);
        m.updated_at = open.updated_at;
        m.model = open.model.clone().or_else(|| self.carry.head.model.clone());
        m.provider.clone_from(&self.carry.head.provider);
        m.usage = open.usage;
        m
    }

    /// Writes the open response's fields into this import's output, and ends it.
    fn flush_open(&mut self) {
        let Some(open) = self.carry.open.clone() else {
            return;
        };
        let m = self.open_message();
        match self.emitted.get(&open.message_id).copied() {
            Some(i) => {
                let rec = &mut self.out.messages[i];
                let parts = std::mem::take(&mut rec.message.parts);
                rec.message = m;
                rec.message.parts = parts;
                rec.api_calls = open.calls.max(1);
            }
            // Read before (its parts are stored): only its fields change.
            None => self.emit(m, open.calls.max(1)),
        }
    }

    fn close(&mut self) {
        self.flush_open();
        self.carry.open = None;
    }

    fn item(&mut self, p: &Value, ptype: &str, at: i64) {
        match ptype {
            "message" => match str_of(p, "role").unwrap_or("") {
                "user" => self.user_item(p, at),
                "assistant" => {
                    let t = content_text(p.get("content").unwrap_or(&Value::Null));
                    self.add(text(t, false), at, None);
                    self.report.records += 1;
                }
                role => self.report.skip(format!("response_item:message:{role}")),
            },
            "reasoning" => {
                let summary: Vec<&str> = p
                    .get("summary")
                    .and_then(Value::as_array)
                    .map(|s| s.iter().filter_map(|b| str_of(b, "text")).collect())
                    .unwrap_or_default();
                let content = p.get("content").filter(|c| !c.is_null()).map(content_text);
                let body = match content {
                    Some(c) if !c.is_empty() => c,
                    _ => summary.join("\n\n"),
                };
                // The encrypted reasoning is opaque; only that it existed is kept.
                let meta = p
                    .get("encrypted_content")
                    .filter(|e| !e.is_null())
                    .map(|_| serde_json::json!({"encrypted": true}));
                self.add(reasoning(body, None, meta), at, None);
                self.report.records += 1;
            }
            "function_call" | "custom_tool_call" | "local_shell_call" => {
                let call_id = str_of(p, "call_id")
                    .or_else(|| str_of(p, "id"))
                    .unwrap_or("")
                    .to_owned();
                let name = str_of(p, "name")
                    .unwrap_or(if ptype == "local_shell_call" {
                        "local_shell"
                    } else {
                        ""
                    })
                    .to_owned();
                let input = match ptype {
                    "function_call" => {
                        let args = str_of(p, "arguments").unwrap_or("");
                        serde_json::from_str(args)
                            .unwrap_or_else(|_| Value::String(args.to_owned()))
                    }
                    "custom_tool_call" => p.get("input").cloned().unwrap_or(Value::Null),
                    _ => p.get("action").cloned().unwrap_or(Value::Null),
                };
                let part = tool(
                    &call_id,
                    &name,
                    input.clone(),
                    ToolState::Running { started_at: at },
                );
                self.add(part, at, Some((&call_id, &name, &input)));
                self.report.records += 1;
            }
            "function_call_output" | "custom_tool_call_output" => {
                self.output(p, at);
                self.report.records += 1;
            }
            "web_search_call" => {
                let id = str_of(p, "id").unwrap_or("").to_owned();
                let input = p.get("action").cloned().unwrap_or(Value::Null);
                let state = settled(String::new(), false, Value::Null, Some(at), at);
                self.add(tool(&id, "web_search", input, state), at, None);
                self.report.records += 1;
            }
            "ghost_snapshot" | "additional_tools" | "compaction" => {
                self.report.skip(format!("response_item:{ptype}"));
            }
            _ => {
                // Newer items (image generation, tool search …): kept as they are.
                self.add(Part::Unknown(p.clone()), at, None);
                self.report.records += 1;
            }
        }
    }

    fn output(&mut self, p: &Value, at: i64) {
        let call_id = str_of(p, "call_id").unwrap_or("");
        let Some(call) = self.carry.calls.remove(call_id) else {
            self.report.skip("tool_output:without-call");
            return;
        };
        let raw = match p.get("output") {
            Some(Value::String(s)) => s.clone(),
            Some(other) => content_text(other),
            None => String::new(),
        };
        // Older versions wrap the output as JSON: {"output": …, "metadata": {"exit_code": …}}.
        let (output, metadata) = match serde_json::from_str::<Value>(&raw) {
            Ok(Value::Object(map)) if map.contains_key("output") => (
                content_text(map.get("output").unwrap_or(&Value::Null)),
                map.get("metadata").cloned().unwrap_or(Value::Null),
            ),
            _ => (raw, Value::Null),
        };
        let failed = p.get("success").and_then(Value::as_bool) == Some(false);
        let state = settled(output, failed, metadata, Some(call.started_at), at);
        let part = tool(call_id, &call.name, call.input.clone(), state);
        if let Some(i) = self.emitted.get(&call.message_id).copied()
            && let Some(stored) = self.out.messages[i]
                .message
                .parts
                .iter_mut()
                .find(|s| s.id == call.part_id)
        {
            stored.part = part;
            stored.updated_at = at;
            return;
        }
        self.out.part_updates.push(PartUpdate {
            session: self.carry.head.id.clone(),
            message_id: call.message_id,
            part_id: call.part_id,
            part,
            position: call.position,
            at,
        });
    }

    fn user_item(&mut self, p: &Value, at: i64) {
        let content = p.get("content").cloned().unwrap_or(Value::Null);
        let body = content_text(&content);
        let images: Vec<String> = content
            .as_array()
            .map(|blocks| {
                blocks
                    .iter()
                    .filter(|b| str_of(b, "type") == Some("input_image"))
                    .filter_map(|b| str_of(b, "image_url").map(str::to_owned))
                    .collect()
            })
            .unwrap_or_default();
        let key = format!("{}:{}", self.carry.head.id, self.line);
        let kinds = p
            .pointer("/internal_chat_message_metadata_passthrough/content_item_kinds")
            .and_then(Value::as_array);
        let pending = PendingUser {
            key,
            text: body,
            at,
            images,
        };
        match kinds {
            Some(kinds) if kinds.iter().any(|k| k.as_str() == Some("user.text")) => {
                self.close();
                self.emit_user(pending);
            }
            Some(_) => self.report.skip("user-context"),
            None => self.carry.pending.push(pending),
        }
    }

    fn emit_user(&mut self, u: PendingUser) {
        let mut m = message(SRC, &u.key, Role::User, u.at);
        let mut position = 0;
        if let Some((typed, output)) = shell_command(&u.text) {
            m.parts.push(stored_part(
                SRC,
                &u.key,
                "text",
                0,
                text(typed, false),
                u.at,
            ));
            position = 1;
            if !output.is_empty() {
                m.parts.push(stored_part(
                    SRC,
                    &u.key,
                    "output",
                    1,
                    text(output, true),
                    u.at,
                ));
                position = 2;
            }
        } else if !u.text.is_empty() {
            m.parts.push(stored_part(
                SRC,
                &u.key,
                "text",
                0,
                text(u.text, false),
                u.at,
            ));
            position = 1;
        }
        for (i, url) in u.images.into_iter().enumerate() {
            let part = super::image_url(url);
            m.parts.push(stored_part(
                SRC,
                &u.key,
                &format!("image{i}"),
                position,
                part,
                u.at,
            ));
            position += 1;
        }
        self.emit(m, 0);
        self.report.records += 1;
    }

    /// Decides the user-role items seen so far: prompts are kept, injected context is not.
    fn flush_users(&mut self) {
        let pending = std::mem::take(&mut self.carry.pending);
        for u in pending {
            if !self.carry.saw_user_event && !injected(&u.text) {
                self.emit_user(u);
            } else {
                self.report.skip("user-context");
            }
        }
    }

    fn event(&mut self, p: &Value, ptype: &str, at: i64) {
        match ptype {
            "token_count" => self.tokens(p, at),
            "user_message" => {
                self.touch(at);
                self.carry.saw_user_event = true;
                let said = str_of(p, "message").unwrap_or("");
                let pending = std::mem::take(&mut self.carry.pending);
                let mut matched = false;
                for u in pending {
                    if !matched && u.text.trim() == said.trim() {
                        matched = true;
                        self.close();
                        self.emit_user(u);
                    } else {
                        self.report.skip("user-context");
                    }
                }
                if matched {
                    self.report.skip("event_msg:user_message(copy)");
                } else {
                    // The prompt has no response_item copy (older versions): keep this one.
                    self.close();
                    let key = format!("{}:{}", self.carry.head.id, self.line);
                    let images = p
                        .get("images")
                        .and_then(Value::as_array)
                        .map(|a| {
                            a.iter()
                                .filter_map(|i| i.as_str().map(str::to_owned))
                                .collect()
                        })
                        .unwrap_or_default();
                    self.emit_user(PendingUser {
                        key,
                        text: said.to_owned(),
                        at,
                        images,
                    });
                }
            }
            "thread_rolled_back" => {
                self.rollback(p, at);
                self.report.records += 1;
            }
            "thread_name_updated" => {
                if let Some(name) = str_of(p, "thread_name") {
                    self.carry.head.title = Some(name.to_owned());
                }
                self.report.records += 1;
            }
            other => self.report.skip(format!("event_msg:{other}")),
        }
    }

    /// Marks the messages of the newest `num_turns` user turns as rolled back.
    fn rollback(&mut self, p: &Value, at: i64) {
        self.flush_users();
        self.close();
        let n = usize::try_from(int_of(p, "num_turns")).unwrap_or(0);
        let error = serde_json::json!({
            "type": "rolled_back",
            "message": "undone by a thread rollback in Codex",
            "at": at,
        });
        let keep = self.carry.turns.len().saturating_sub(n);
        let undone: Vec<String> = self.carry.turns.drain(keep..).flatten().collect();
        let session = self.carry.head.id.clone();
        mark_undone(self.out, &self.emitted, &session, undone, &error);
    }

    fn tokens(&mut self, p: &Value, at: i64) {
        if let Some(limits) = rate_limits(p, at) {
            let newer = self
                .carry
                .rate_limits
                .as_ref()
                .is_none_or(|known| int_of(known, "at") <= at);
            if newer {
                self.carry.rate_limits = Some(limits);
            }
        }
        let Some(info) = p.get("info").filter(|i| !i.is_null()) else {
            self.report.skip("event_msg:token_count(no info)");
            return;
        };
        let total = info
            .get("total_token_usage")
            .filter(|t| !t.is_null())
            .map(totals);
        let last = info
            .get("last_token_usage")
            .filter(|t| !t.is_null())
            .map(totals);
        let delta = match (total, self.carry.totals) {
            (Some(t), Some(prev)) if t == prev => {
                self.report.skip("event_msg:token_count(repeated)");
                return;
            }
            (Some(t), Some(prev)) if ge(&t, &prev) => sub(&t, &prev),
            (Some(t), None) => t,
            // Totals that went back (a rollback or a reset): this call's own figures.
            (Some(_), Some(_)) | (None, _) => match last {
                Some(l) => l,
                None => {
                    self.report.skip("event_msg:token_count(empty)");
                    return;
                }
            },
        };
        if let Some(t) = total {
            self.carry.totals = Some(t);
        }
        self.touch(at);
        self.report.records += 1;
        let usage = TokenUsage {
            input: (delta.input - delta.cached).max(0),
            cache_read: delta.cached,
            cache_write: delta.cache_write,
            output: (delta.output - delta.reasoning).max(0),
            reasoning: delta.reasoning.min(delta.output).max(0),
        };
        if usage.is_zero() {
            return;
        }
        self.flush_users();
        let model = str_of(info, "model")
            .map(str::to_owned)
            .or_else(|| self.carry.head.model.clone());
        if let Some(m) = &model {
            *self.carry.head.models.entry(m.clone()).or_default() += 1;
        }
        let fresh = self.carry.open.is_none();
        self.open(at);
        if let Some(open) = self.carry.open.as_mut() {
            open.usage += usage;
            open.calls += 1;
            open.model = model;
            open.updated_at = open.updated_at.max(at);
        }
        if fresh {
            // A call whose items are not in the file (or were copied from a parent):
            // a message of its own carries its usage.
            let m = self.open_message();
            self.emit(m, 1);
        }
        self.close();
    }

    fn compacted(&mut self, p: &Value, at: i64) {
        self.close();
        let key = format!("{}:{}", self.carry.head.id, self.line);
        let mut m = message(SRC, &key, Role::Assistant, at);
        m.is_summary = true;
        m.parts.push(stored_part(
            SRC,
            &key,
            "compaction",
            0,
            Part::Compaction(CompactionPart::default()),
            at,
        ));
        let summary = str_of(p, "message").unwrap_or("");
        if !summary.is_empty() {
            m.parts
                .push(stored_part(SRC, &key, "text", 1, text(summary, false), at));
        }
        self.emit(m, 0);
        self.report.records += 1;
    }

    fn finish(self) -> Carry {
        let h = &self.carry.head;
        if self.carry.started {
            let mut rec = SessionRec::new(h.id.clone(), h.created_at);
            rec.updated_at = h.updated_at.max(h.created_at);
            rec.directory.clone_from(&h.cwd);
            rec.model = h
                .models
                .iter()
                .max_by_key(|(_, n)| **n)
                .map(|(m, _)| m.clone())
                .or_else(|| h.model.clone());
            rec.billing_provider.clone_from(&h.provider);
            rec.model_config = self
                .carry
                .rate_limits
                .clone()
                .map(|limits| serde_json::json!({ RATE_LIMITS: limits }));
            rec.title = h.title.clone().map(|t| (t, TitleRank::Source));
            if let Some(parent) = &h.parent {
                rec.parent = Some(parent.clone());
                rec.kind = if h.fork {
                    SessionKind::Fork
                } else {
                    SessionKind::Task
                };
            }
            self.out.sessions.push(rec);
        }
        self.carry
    }
}

/// The key of a Codex session's `model_config` that holds its newest usage-limit snapshot.
pub const RATE_LIMITS: &str = "codex_rate_limits";

/// The usage limits a `token_count` payload reports at `at` (ms), as Scribe keeps them:
/// `{"at": ms, "plan": "pro"?, "windows": [{"minutes", "used_percent", "resets_at" (ms or
/// null)}]}`, one window for each of Codex's `primary` and `secondary` that it reports
/// with a length (either may be the five hours or the week, depending on the plan).
/// Read in the shapes Codex wrote over time: `resets_at` (seconds) or `resets_in_seconds`
/// (from `at`), and the older flat `primary_used_percent` / `primary_window_minutes`. A
/// window of length 0 (what Codex wrote before it knew) says nothing; `None` when no
/// window says anything (older Codex, an API key without a plan).
fn rate_limits(p: &Value, at: i64) -> Option<Value> {
    let limits = p.get("rate_limits").filter(|l| l.is_object())?;
    let windows: Vec<Value> = ["primary", "secondary"]
        .into_iter()
        .filter_map(|name| {
            let (used, minutes, w) = match limits.get(name).filter(|w| w.is_object()) {
                Some(w) => (
                    f64_of(w, "used_percent")?,
                    int_of(w, "window_minutes"),
                    Some(w),
                ),
                None => (
                    f64_of(limits, &format!("{name}_used_percent"))?,
                    int_of(limits, &format!("{name}_window_minutes")),
                    None,
                ),
            };
            if minutes <= 0 || !used.is_finite() {
                return None;
            }
            let seconds = |key: &str| {
                w.and_then(|w| f64_of(w, key))
                    .filter(|s| s.is_finite() && s.abs() < 1e12)
                    .map(|s| (s * 1000.0).round() as i64)
            };
            let resets_at = seconds("resets_at")
                .or_else(|| seconds("resets_in_seconds").map(|ms| at.saturating_add(ms)));
            Some(serde_json::json!({
                "minutes": minutes,
                "used_percent": used,
                "resets_at": resets_at,
            }))
        })
        .collect();
    if windows.is_empty() {
        return None;
    }
    let mut snapshot = serde_json::json!({ "at": at, "windows": windows });
    if let Some(plan) = str_of(limits, "plan_type").filter(|p| !p.is_empty()) {
        snapshot["plan"] = Value::from(plan);
    }
    Some(snapshot)
}

fn totals(v: &Value) -> Totals {
    Totals {
        input: int_of(v, "input_tokens"),
        cached: int_of(v, "cached_input_tokens"),
        cache_write: int_of(v, "cache_write_input_tokens"),
        output: int_of(v, "output_tokens"),
        reasoning: int_of(v, "reasoning_output_tokens"),
    }
}

fn ge(a: &Totals, b: &Totals) -> bool {
    a.input >= b.input
        && a.cached >= b.cached
        && a.cache_write >= b.cache_write
        && a.output >= b.output
        && a.reasoning >= b.reasoning
}

fn sub(a: &Totals, b: &Totals) -> Totals {
    Totals {
        input: a.input - b.input,
        cached: a.cached - b.cached,
        cache_write: a.cache_write - b.cache_write,
        output: a.output - b.output,
        reasoning: a.reasoning - b.reasoning,
    }
}

/// A shell command the user ran in Codex (`!ls`), which it records as a user message
/// `<user_shell_command><command>ls</command><result>…</result></user_shell_command>`:
/// the command as typed (`!ls`) and what it printed (its exit code, time and output, as
/// Codex wrote them), or `None` for any other text.
fn shell_command(text: &str) -> Option<(String, &str)> {
    let outer = super::only_tags(text, &["user_shell_command"])?;
    let inner = super::only_tags(outer.get("user_shell_command")?, &["command", "result"])?;
    let command = inner.get("command")?.trim();
    Some((
        format!("!{command}"),
        inner.get("result").map_or("", |r| r.trim()),
    ))
}

/// Context Codex injects as user-role messages (instructions, environment, AGENTS.md).
fn injected(text: &str) -> bool {
    let t = text.trim_start();
    [
        "<environment_context",
        "<user_instructions",
        "<permissions",
        "<skills_instructions",
        "<INSTRUCTIONS>",
        "# AGENTS.md",
        "<user_shell_command",
        "<turn_aborted",
    ]
    .iter()
    .any(|p| t.starts_with(p))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_shell_command_reads_as_typed_with_its_output() {
        let recorded = "<user_shell_command><command>printf synthetic</command><result>Exit code: 0\nDuration: 0.01 seconds\nOutput:\nsynthetic</result></user_shell_command>";
        assert_eq!(
            shell_command(recorded),
            Some((
                "!printf synthetic".to_owned(),
                "Exit code: 0\nDuration: 0.01 seconds\nOutput:\nsynthetic"
            ))
        );
        assert_eq!(
            shell_command("<user_shell_command><command>true</command></user_shell_command>"),
            Some(("!true".to_owned(), ""))
        );
        for prompt in [
            "what does <user_shell_command> mean?",
            "<user_shell_command><result>no command</result></user_shell_command>",
            "<user_shell_command><command>ls</command>",
            "",
        ] {
            assert_eq!(shell_command(prompt), None, "{prompt:?}");
        }
    }

    #[test]
    fn thread_ids_come_from_rollout_names() {
        let id = |n: &str| id_from_name(Path::new(n));
        assert_eq!(
            id("rollout-2026-02-23T13-19-38-019c8a70-dda7-7f33-98ea-f30553347322.jsonl.zst"),
            "019c8a70-dda7-7f33-98ea-f30553347322"
        );
        assert_eq!(id("session-alpha.jsonl"), "session-alpha");
        assert_eq!(
            id("rollout-é€é€é€é€é€é€é€é€é€é€é€é€.jsonl"),
            "rollout-é€é€é€é€é€é€é€é€é€é€é€é€"
        );
    }
}
