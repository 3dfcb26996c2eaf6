//! Qwen Code: one JSON Lines file per session,
//! `~/.qwen/projects/<project>/chats/<sessionId>.jsonl` (`QWEN_DATA_DIR`, a
//! comma-separated list of folders that each hold a `projects` folder, replaces `~/.qwen`,
//! as ccusage reads it).
//!
//! Each line is a record (QwenLM/qwen-code `packages/core/src/services/
//! chatRecordingService.ts`, `ChatRecord`): `uuid`, `parentUuid`, `sessionId`,
//! `timestamp`, `type` (`user`, `assistant`, `tool_result`, `system`), `cwd`, and for the
//! conversation a Gemini API `message` (`role`, `parts`). The records form a tree by
//! `parentUuid`; the conversation is the chain from the newest record back to the first,
//! and records of one `uuid` (a reply written in pieces) are one message, their parts in
//! file order, the last usage and the first model kept (`sessionService.ts`
//! `reconstructHistory`). A changed file is read again whole; messages are keyed by the
//! file's session and the record's `uuid`, so nothing is stored twice. Lines holding two
//! records glued together are read as both.
//!
//! Mapping:
//! - `user` records: `text` parts (synthetic for a notification or a scheduled prompt, what
//!   the user did not type), `inlineData` and `fileData` as files;
//! - `assistant` records: `text` (a `thought` one as reasoning), `functionCall` as a tool
//!   part; usage from `usageMetadata`: `promptTokenCount` includes
//!   `cachedContentTokenCount`, so Scribe stores the prompt less the cache as input and the
//!   cache as cache read (ccusage counts the cache in both); `thoughtsTokenCount` is
//!   reasoning, apart from `candidatesTokenCount`; a bare `totalTokenCount` is output, as
//!   ccusage counts it;
//! - `tool_result` records: each `functionResponse` settles its call (by `id`, else by
//!   name): failed when `toolCallResult.status` is `error` or `cancelled` or the response
//!   holds an `error`, with the response's `output` (or `error`) as its text;
//! - `system` records: `chat_compression` is a summary message (the first turn of its
//!   `compressedHistory`), whose compaction keeps what Qwen goes on sending after it from
//!   the message the rest of that history repeats; `custom_title` is the title (a user's
//!   over a generated one); `rewind` re-roots the conversation at its parent, and the
//!   messages it leaves behind stay with `error` `{"type": "rewound", …}` and their usage
//!   (it was spent), as Claude Code's and Gemini CLI's rewinds do; the rest (telemetry,
//!   slash commands, snapshots, …) is counted as skipped;
//! - records of a sub-agent (`isSidechain`, `agentId`) form a task session of their own
//!   under the session, titled by `agentName`;
//! - a session `/branch` made starts with copies of the original's records, each naming
//!   it (`forkedFrom`): they are skipped (the original holds them, as a Codex fork's copied
//!   history stays with its parent) and the session is the original's fork.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::path::{Path, PathBuf};

use scribe_message::{CompactionPart, Part, Role, TokenUsage, ToolState};
use scribe_session::SessionKind;
use serde_json::Value;

use super::{
    FileReport, Importer, Times, Unit, file, int_of, message, numbered, reasoning, resume_whole,
    settle_call, stored_part, str_of, text, tool, walk,
};
use crate::Source;
use crate::env::Env;
use crate::error::Result;
use crate::record::{Batch, MessageRec, Resume, SessionRec, TitleRank};
use crate::time;

const SRC: Source = Source::Qwen;

/// The Qwen Code importer.
#[derive(Debug, Clone, Copy)]
pub struct Qwen;

impl Importer for Qwen {
    fn source(&self) -> Source {
        SRC
    }

    fn reads_state(&self) -> bool {
        false
    }

    fn default_roots(&self, env: &Env) -> Vec<PathBuf> {
        env.paths("QWEN_DATA_DIR")
            .or_else(|| env.home_join(".qwen").map(|p| vec![p]))
            .unwrap_or_default()
            .into_iter()
            .map(|dir| dir.join("projects"))
            .collect()
    }

    fn discover(&self, root: &Path, out: &mut Vec<PathBuf>) -> Result<()> {
        let jsonl = |p: &Path| p.extension().is_some_and(|e| e == "jsonl");
        if root.is_file() {
            return walk(root, out, jsonl);
        }
        // A session's transcript sits in its project's `chats` folder; what lies deeper
        // (a session's own folders) is not a transcript.
        walk(root, out, |p| {
            jsonl(p)
                && p.parent()
                    .and_then(Path::file_name)
                    .is_some_and(|n| n == "chats")
        })
    }

    fn read(&self, unit: &Unit<'_>, out: &mut Batch, report: &mut FileReport) -> Result<Resume> {
        let path = unit.path;
        let chunk = crate::reader::read_from(path, 0, 0)?;
        let stem = path
            .file_stem()
            .map(|s| s.to_string_lossy().into_owned())
            .unwrap_or_default();
        let mut session = Session::new(stem, unit.mtime_ms);
        for line in chunk.lines() {
            // Qwen appends a record per line; a line holding two glued together is read
            // as both, up to whatever cannot be read.
            for value in serde_json::Deserializer::from_str(line.text).into_iter::<Value>() {
                match value {
                    Ok(record) => session.record(&record, report),
                    Err(err) => {
                        report.malformed(path, Some(line.number), err.to_string());
                        break;
                    }
                }
            }
        }
        if session.seen && unit.since.is_none_or(|since| session.times.last() >= since) {
            session.finish(out);
        } else if !session.seen {
            report.skip("(not a Qwen Code session)");
        }
        Ok(resume_whole(&chunk))
    }
}

/// A sub-agent's task session inside a session file.
struct Agent {
    id: String,
    title: Option<String>,
    created: i64,
    updated: i64,
}

/// One session file being read.
struct Session {
    id: String,
    /// Whether a record of a known type was read: a Qwen Code session.
    seen: bool,
    times: Times,
    directory: Option<String>,
    title: Option<(String, TitleRank)>,
    messages: Vec<MessageRec>,
    /// A record's `uuid` → the message its parts went to (index in `messages`).
    at_uuid: HashMap<String, usize>,
    /// A record's `uuid` → its `message` (a reply written in pieces: the pieces' parts
    /// together), to find what a compaction's history repeats.
    contents: HashMap<String, Value>,
    /// The conversation as it stands: record uuids from the first, a rewind's cut taken
    /// off.
    chain: Vec<String>,
    /// A call's id (or `name:<name>` for one without) → (index in `messages`, part index).
    calls: HashMap<String, (usize, usize)>,
    /// The session a `/branch` copied this one's first records from.
    forked_from: Option<String>,
    /// Every record uuid read (a uuid seen again continues its message).
    uuids: HashSet<String>,
    /// Sub-agents by `agentId`.
    agents: BTreeMap<String, Agent>,
    /// Records read (for records without a `uuid`).
    count: usize,
}

impl Session {
    fn new(id: String, mtime_ms: i64) -> Session {
        Session {
            id,
            seen: false,
            times: Times::new(mtime_ms),
            directory: None,
            title: None,
            messages: Vec::new(),
            at_uuid: HashMap::new(),
            contents: HashMap::new(),
            chain: Vec::new(),
            calls: HashMap::new(),
            forked_from: None,
            uuids: HashSet::new(),
            agents: BTreeMap::new(),
            count: 0,
        }
    }

    fn record(&mut self, v: &Value, report: &mut FileReport) {
        self.count += 1;
        let kind = match str_of(v, "type") {
            Some(kind @ ("user" | "assistant" | "tool_result" | "system")) => kind,
            Some(other) => {
                report.skip(other);
                return;
            }
            None => {
                report.skip("untyped");
                return;
            }
        };
        self.seen = true;
        // A `/branch` copies the session's records so far into the new session's file,
        // each naming where it was copied from: they stay with the original (as a Codex
        // fork's copied history does), and the session is that one's fork.
        if let Some(from) = v.get("forkedFrom").filter(|f| f.is_object()) {
            if let Some(original) = str_of(from, "sessionId").filter(|o| !o.is_empty()) {
                self.forked_from.get_or_insert_with(|| original.to_owned());
            }
            report.skip("replayed-parent-history");
            return;
        }
        let at = self
            .times
            .note(str_of(v, "timestamp").and_then(time::parse));
        if self.directory.is_none() {
            self.directory = str_of(v, "cwd")
                .filter(|d| !d.is_empty())
                .map(str::to_owned);
        }
        let uuid = str_of(v, "uuid")
            .filter(|u| !u.is_empty())
            .map_or_else(|| format!("#{}", self.count), str::to_owned);
        if self.uuids.insert(uuid.clone()) {
            self.chain.push(uuid.clone());
        }
        if let Some(m) = v.get("message").filter(|m| m.is_object()) {
            match self.contents.get_mut(&uuid) {
                Some(Value::Object(seen)) => {
                    let more = m.get("parts").and_then(Value::as_array).cloned();
                    if let (Some(Value::Array(parts)), Some(more)) = (seen.get_mut("parts"), more) {
                        parts.extend(more);
                    }
                }
                _ => {
                    self.contents.insert(uuid.clone(), m.clone());
                }
            }
        }
        match kind {
            "user" => self.user(v, &uuid, at, report),
            "assistant" => self.assistant(v, &uuid, at, report),
            "tool_result" => self.tool_result(v, at, report),
            _ => self.system(v, &uuid, at, report),
        }
    }

    /// The session a record belongs to: the file's, or a sub-agent's.
    fn session_of(&mut self, v: &Value, at: i64) -> String {
        let sidechain = v.get("isSidechain").and_then(Value::as_bool) == Some(true);
        let Some(agent) = str_of(v, "agentId")
            .filter(|a| sidechain && !a.is_empty())
            .map(str::to_owned)
        else {
            return self.id.clone();
        };
        let id = format!("{}:{agent}", self.id);
        let entry = self.agents.entry(agent).or_insert_with(|| Agent {
            id,
            title: None,
            created: at,
            updated: at,
        });
        entry.updated = entry.updated.max(at);
        if entry.title.is_none() {
            entry.title = str_of(v, "agentName")
                .filter(|n| !n.trim().is_empty())
                .map(|n| n.trim().to_owned());
        }
        entry.id.clone()
    }

    fn parts_of(v: &Value) -> &[Value] {
        v.pointer("/message/parts")
            .and_then(Value::as_array)
            .map_or(&[], Vec::as_slice)
    }

    fn user(&mut self, v: &Value, uuid: &str, at: i64, report: &mut FileReport) {
        // What the user typed, or (a notification, a scheduled prompt, …) what Qwen sent
        // for them.
        let synthetic = str_of(v, "subtype").is_some_and(|s| s != "mid_turn_user_message");
        let mut parts = Vec::new();
        for p in Self::parts_of(v) {
            if let Some(said) = str_of(p, "text") {
                if !said.is_empty() {
                    parts.push(text(said, synthetic));
                }
            } else if let Some(data) = p.get("inlineData") {
                let mime = str_of(data, "mimeType").unwrap_or("application/octet-stream");
                let bytes = str_of(data, "data").unwrap_or("");
                parts.push(file(
                    mime,
                    str_of(data, "displayName").map(str::to_owned),
                    format!("data:{mime};base64,{bytes}"),
                ));
            } else if let Some(data) = p.get("fileData") {
                let mime = str_of(data, "mimeType").unwrap_or("application/octet-stream");
                let url = str_of(data, "fileUri").unwrap_or("").to_owned();
                parts.push(file(
                    mime,
                    str_of(data, "displayName").map(str::to_owned),
                    url,
                ));
            } else if let Some(response) = p.get("functionResponse") {
                self.settle(response, None, at, report);
            } else {
                report.skip("user:part");
            }
        }
        let session = self.session_of(v, at);
        self.push(
            uuid,
            session,
            Role::User,
            at,
            parts,
            Vec::new(),
            None,
            report,
        );
    }

    fn assistant(&mut self, v: &Value, uuid: &str, at: i64, report: &mut FileReport) {
        let mut parts = Vec::new();
        let mut calls = Vec::new();
        for p in Self::parts_of(v) {
            if let Some(said) = str_of(p, "text") {
                if p.get("thought").and_then(Value::as_bool) == Some(true) {
                    let signature = str_of(p, "thoughtSignature").map(str::to_owned);
                    if !said.is_empty() || signature.is_some() {
                        parts.push(reasoning(said, signature, None));
                    }
                } else if !said.is_empty() {
                    parts.push(text(said, false));
                }
            } else if let Some(call) = p.get("functionCall") {
                let id = str_of(call, "id").unwrap_or("");
                let name = str_of(call, "name").unwrap_or("");
                let key = if id.is_empty() {
                    format!("name:{name}")
                } else {
                    id.to_owned()
                };
                let input = match call.get("args") {
                    None | Some(Value::Null) => Value::Object(serde_json::Map::new()),
                    Some(args) => args.clone(),
                };
                calls.push((key, parts.len()));
                parts.push(tool(id, name, input, ToolState::Running { started_at: at }));
            } else if str_of(p, "thoughtSignature").is_some() {
                // A signature alone, for the thought before it: nothing to show.
            } else {
                report.skip("assistant:part");
            }
        }
        let usage = v.get("usageMetadata").map(usage);
        let model = str_of(v, "model")
            .filter(|m| !m.is_empty())
            .map(str::to_owned);
        let session = self.session_of(v, at);
        if let Some(i) = self.push(
            uuid,
            session,
            Role::Assistant,
            at,
            parts,
            calls,
            model,
            report,
        ) && let Some(usage) = usage
        {
            let rec = &mut self.messages[i];
            rec.message.usage = usage;
            rec.api_calls = 1;
        }
    }

    fn tool_result(&mut self, v: &Value, at: i64, report: &mut FileReport) {
        let status = v
            .pointer("/toolCallResult/status")
            .and_then(Value::as_str)
            .map(str::to_owned);
        let mut settled = 0;
        for p in Self::parts_of(v) {
            if let Some(response) = p.get("functionResponse") {
                settled += 1;
                self.settle(response, status.as_deref(), at, report);
            }
        }
        if settled == 0 {
            report.skip("tool_result:empty");
        }
    }

    /// A `functionResponse`: settles the call it answers.
    fn settle(&mut self, response: &Value, status: Option<&str>, at: i64, report: &mut FileReport) {
        let id = str_of(response, "id").unwrap_or("");
        let key = if id.is_empty() {
            format!("name:{}", str_of(response, "name").unwrap_or(""))
        } else {
            id.to_owned()
        };
        let Some(place) = self.calls.remove(&key) else {
            report.skip("tool_result:without-call");
            return;
        };
        report.records += 1;
        let body = response.get("response").unwrap_or(&Value::Null);
        let error = body.get("error").filter(|e| !e.is_null());
        let failed = matches!(status, Some("error" | "cancelled")) || error.is_some();
        let said = match (body.get("output"), error) {
            (Some(Value::String(s)), _) => s.clone(),
            (_, Some(Value::String(s))) => s.clone(),
            (_, Some(e)) => str_of(e, "message").map_or_else(|| e.to_string(), str::to_owned),
            (Some(other), None) => other.to_string(),
            (None, None) => match body {
                Value::Null => String::new(),
                Value::Object(o) if o.is_empty() => String::new(),
                other => other.to_string(),
            },
        };
        let said = if said.is_empty() && failed {
            status.unwrap_or("error").to_owned()
        } else {
            said
        };
        settle_call(&mut self.messages, place, said, failed, at);
    }

    fn system(&mut self, v: &Value, uuid: &str, at: i64, report: &mut FileReport) {
        let payload = v.get("systemPayload").unwrap_or(&Value::Null);
        match str_of(v, "subtype").unwrap_or("") {
            "chat_compression" => self.compression(v, payload, uuid, at, report),
            "custom_title" => {
                let Some(title) = str_of(payload, "customTitle")
                    .map(str::trim)
                    .filter(|t| !t.is_empty())
                else {
                    report.skip("system:custom_title:empty");
                    return;
                };
                // A title without a source is the user's, as Qwen reads it.
                let rank = match str_of(payload, "titleSource") {
                    Some("auto") => TitleRank::Ai,
                    _ => TitleRank::User,
                };
                if self.title.as_ref().is_none_or(|(_, r)| rank >= *r) {
                    self.title = Some((title.to_owned(), rank));
                }
                report.records += 1;
            }
            "rewind" => {
                self.rewind(str_of(v, "parentUuid"), at);
                report.records += 1;
            }
            "" => report.skip("system"),
            other => report.skip(format!("system:{other}")),
        }
    }

    /// A compaction: a summary message, keeping what Qwen sends after it from the message
    /// the rest of its history repeats.
    fn compression(
        &mut self,
        v: &Value,
        payload: &Value,
        uuid: &str,
        at: i64,
        report: &mut FileReport,
    ) {
        let history = super::array_of(payload, "compressedHistory");
        let summary = history
            .first()
            .and_then(|c| c.get("parts"))
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .filter_map(|p| str_of(p, "text"))
            .collect::<Vec<_>>()
            .join("\n");
        if summary.trim().is_empty() {
            report.skip("system:chat_compression:empty");
            return;
        }
        // The turns kept after the summary are copies of messages of the conversation:
        // the first one found is where they begin (Qwen's acknowledgement matches none).
        let before = self.chain.len().saturating_sub(1);
        let keep_from = history.iter().skip(1).find_map(|content| {
            self.chain[..before]
                .iter()
                .rev()
                .find(|u| self.contents.get(*u) == Some(content))
                .and_then(|u| self.at_uuid.get(u))
                .map(|&i| self.messages[i].message.id.clone())
        });
        let parts = vec![
            Part::Compaction(CompactionPart {
                keep_from,
                ..CompactionPart::default()
            }),
            text(summary, false),
        ];
        let session = self.session_of(v, at);
        if let Some(i) = self.push(
            uuid,
            session,
            Role::Assistant,
            at,
            parts,
            Vec::new(),
            None,
            report,
        ) {
            self.messages[i].message.is_summary = true;
        }
    }

    /// A rewind whose record answers `parent`: the conversation goes on from there, and the
    /// messages after it are marked as undone. A parent not in the conversation cuts
    /// nothing (nothing is guessed).
    fn rewind(&mut self, parent: Option<&str>, at: i64) {
        let own = self.chain.len().saturating_sub(1);
        let from = match parent.filter(|p| !p.is_empty()) {
            None => 0,
            Some(p) => match self.chain[..own].iter().rposition(|u| u == p) {
                Some(i) => i + 1,
                None => return,
            },
        };
        let error = serde_json::json!({
            "type": "rewound",
            "message": "undone by a rewind in Qwen Code",
            "at": at,
        });
        let cut: Vec<String> = self.chain.drain(from..own).collect();
        for u in cut {
            if let Some(&i) = self.at_uuid.get(&u) {
                let m = &mut self.messages[i].message;
                if m.error.is_none() {
                    m.error = Some(error.clone());
                }
            }
        }
    }

    /// Adds `parts` as the message of record `uuid` (to it, when an earlier record of that
    /// uuid made it); registers the tool calls among them (`calls`: key, index in
    /// `parts`). Returns the message's index, or `None` for a new one with nothing in it.
    #[allow(clippy::too_many_arguments)]
    fn push(
        &mut self,
        uuid: &str,
        session: String,
        role: Role,
        at: i64,
        parts: Vec<Part>,
        calls: Vec<(String, usize)>,
        model: Option<String>,
        report: &mut FileReport,
    ) -> Option<usize> {
        let key = format!("{}:{uuid}", self.id);
        if let Some(&i) = self.at_uuid.get(uuid) {
            let m = &mut self.messages[i].message;
            let start = m.parts.len();
            for (n, part) in parts.into_iter().enumerate() {
                let position = start + n;
                m.parts.push(stored_part(
                    SRC,
                    &key,
                    &position.to_string(),
                    position as i64,
                    part,
                    at,
                ));
            }
            if m.model.is_none() {
                m.model = model;
            }
            m.updated_at = m.updated_at.max(at);
            for (call, n) in calls {
                self.calls.insert(call, (i, start + n));
            }
            report.records += 1;
            return Some(i);
        }
        if parts.is_empty() && role != Role::Assistant {
            report.skip(format!("{}:empty", role.as_str()));
            return None;
        }
        let mut m = message(SRC, &key, role, at);
        m.parts = numbered(SRC, &key, parts, at);
        m.model = model;
        let i = self.messages.len();
        self.messages.push(MessageRec::new(session, m));
        self.at_uuid.insert(uuid.to_owned(), i);
        for (call, n) in calls {
            self.calls.insert(call, (i, n));
        }
        report.records += 1;
        Some(i)
    }

    /// The session, its sub-agents' sessions and their messages into `out`.
    fn finish(self, out: &mut Batch) {
        let created = self.times.first();
        let mut rec = SessionRec::new(&self.id, created);
        rec.updated_at = self.times.last().max(created);
        rec.directory = self.directory;
        rec.title = self.title;
        if let Some(original) = self.forked_from.filter(|o| *o != self.id) {
            rec.parent = Some(original);
            rec.kind = SessionKind::Fork;
        }
        // A reply with nothing in it and no usage says nothing.
        let messages: Vec<MessageRec> = self
            .messages
            .into_iter()
            .filter(|m| !m.message.parts.is_empty() || !m.message.usage.is_zero())
            .collect();
        let mut models: BTreeMap<&str, usize> = BTreeMap::new();
        for m in &messages {
            if m.session == self.id
                && let Some(model) = m.message.model.as_deref()
            {
                *models.entry(model).or_default() += 1;
            }
        }
        rec.model = models
            .into_iter()
            .max_by_key(|(_, n)| *n)
            .map(|(m, _)| m.to_owned());
        let directory = rec.directory.clone();
        out.sessions.push(rec);
        for agent in self.agents.into_values() {
            let mut child = SessionRec::new(&agent.id, agent.created);
            child.updated_at = agent.updated;
            child.parent = Some(self.id.clone());
            child.kind = SessionKind::Task;
            child.directory.clone_from(&directory);
            child.title = agent.title.map(|t| (t, TitleRank::Source));
            out.sessions.push(child);
        }
        out.messages.extend(messages);
    }
}

/// A reply's `usageMetadata` as Scribe counts it.
fn usage(u: &Value) -> TokenUsage {
    let prompt = int_of(u, "promptTokenCount");
    let cached = int_of(u, "cachedContentTokenCount").min(prompt);
    let mut tokens = TokenUsage {
        input: prompt - cached,
        output: int_of(u, "candidatesTokenCount"),
        cache_read: cached,
        cache_write: 0,
        reasoning: int_of(u, "thoughtsTokenCount"),
    };
    if tokens.is_zero() {
        tokens.output = int_of(u, "totalTokenCount");
    }
    tokens
}
