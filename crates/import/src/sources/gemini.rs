//! Gemini CLI: `~/.gemini/tmp/<projectHash>/chats/session-….jsonl` (and the older
//! `session-….json`; sub-agents in `chats/<parentSessionId>/<id>.jsonl`);
//! `GEMINI_DATA_DIR` (as ccusage reads it) or `GEMINI_CLI_HOME` (the CLI's home, holding
//! `.gemini`) moves it.
//!
//! Mapping (FORMATS.md §5):
//! - the file is a log of records: a metadata line, message records (the same message
//!   `id` is appended again on every update, and the last one wins), `{"$set": …}`
//!   updates (`summary` is the title; `messages`, the history the CLI keeps sending
//!   after a compression or a masking of old tool outputs, adds the messages it has new,
//!   such as a summary, keeps the records of those it lists, and leaves the rest in
//!   Scribe, as they stay in the file; chatRecordingService.ts `updateMessagesFromHistory`)
//!   and
//!   `{"$rewindTo": id}`, which drops that message and all after it from the conversation.
//!   Those stay in Scribe, as they stay in the file, with `error` `{"type": "rewound", …}`,
//!   and their usage (it was spent) stays counted, as Codex's rolled-back turns do; a
//!   rewound message appended again is live again. A changed file is read whole;
//!   messages are keyed by session and id, so reading it again stores each once (and
//!   marks one rewound since);
//! - `user` records are user messages, `gemini` records assistant messages with their
//!   `thoughts` as reasoning and `toolCalls` (call and result in one record) as tool parts;
//!   `info`, `error` and `warning` records are skipped;
//! - usage per `gemini` message: `input` includes `cached`, so Scribe stores
//!   `input − cached` and `cached` as cache read; `thoughts` is reasoning, apart from
//!   `output`.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use scribe_message::{Part, Role, TokenUsage, ToolState};
use scribe_session::SessionKind;
use serde_json::Value;

use super::{
    FileReport, Importer, Unit, content_text, int_of, message, numbered, reasoning, settled,
    str_of, text, tool, walk,
};
use crate::Source;
use crate::env::Env;
use crate::error::{ImportError, Result};
use crate::record::{Batch, MessageRec, Resume, SessionRec, TitleRank};
use crate::time;

const SRC: Source = Source::Gemini;

/// The Gemini CLI importer.
#[derive(Debug, Clone, Copy)]
pub struct Gemini;

impl Importer for Gemini {
    fn reads_state(&self) -> bool {
        false
    }

    fn source(&self) -> Source {
        SRC
    }

    fn default_roots(&self, env: &Env) -> Vec<PathBuf> {
        if let Some(dir) = env.var("GEMINI_DATA_DIR") {
            return vec![env.expand(dir)];
        }
        if let Some(home) = env.var("GEMINI_CLI_HOME") {
            return vec![env.expand(home).join(".gemini/tmp")];
        }
        env.home_join(".gemini/tmp").into_iter().collect()
    }

    fn discover(&self, root: &Path, out: &mut Vec<PathBuf>) -> Result<()> {
        walk(root, out, |p| {
            let name = p
                .file_name()
                .map(|n| n.to_string_lossy())
                .unwrap_or_default();
            let in_chats = p
                .ancestors()
                .any(|a| a.file_name().is_some_and(|n| n == "chats"));
            // Under a `chats` folder, or named as the CLI names a conversation's file
            // (a folder of them copied elsewhere), or given itself.
            (name.ends_with(".json") || name.ends_with(".jsonl"))
                && name != "logs.json"
                && (in_chats || name.starts_with("session-") || root.is_file())
        })
    }

    fn read(&self, unit: &Unit<'_>, out: &mut Batch, report: &mut FileReport) -> Result<Resume> {
        let path = unit.path;
        let text = std::fs::read_to_string(path).map_err(ImportError::io(path))?;
        let mut log = Log::default();
        if path.extension().is_some_and(|e| e == "jsonl") {
            for (i, line) in text.lines().enumerate() {
                if line.trim().is_empty() {
                    continue;
                }
                match serde_json::from_str::<Value>(line) {
                    Ok(v) => log.record(v, report),
                    Err(err) => report.malformed(path, Some(i as u64 + 1), err.to_string()),
                }
            }
        } else {
            let doc: Value = serde_json::from_str(&text).map_err(|e| ImportError::Malformed {
                path: path.to_owned(),
                what: "Gemini CLI conversation",
                reason: e.to_string(),
            })?;
            log.meta(&doc);
            log.set(&doc, report);
        }
        if let Some(rec) = log.finish(path, unit, out, report) {
            out.sessions.push(rec);
        }
        let size = u64::try_from(text.len()).unwrap_or(u64::MAX);
        Ok(Resume {
            offset: size,
            lines: text.lines().count() as u64,
            carry: None,
            more: false,
        })
    }
}

#[derive(Debug, Default)]
struct Log {
    meta: Value,
    /// Every message the file holds (the last record of each id), in the order each first
    /// came.
    messages: Vec<Value>,
    index: BTreeMap<String, usize>,
    /// The CLI's list of live messages, in its order: what a `$rewindTo` cuts and a
    /// `$set.messages` sets.
    live: Vec<String>,
    /// The ids in `live`.
    in_live: BTreeSet<String>,
    /// Ids of `messages` a `$rewindTo` dropped from the conversation.
    rewound: BTreeSet<String>,
    summary: Option<String>,
}

impl Log {
    fn meta(&mut self, v: &Value) {
        if self.meta.is_null() {
            self.meta = v.clone();
        }
    }

    fn record(&mut self, v: Value, report: &mut FileReport) {
        if let Some(set) = v.get("$set") {
            self.set(set, report);
        } else if let Some(to) = v.get("$rewindTo").and_then(Value::as_str) {
            // As the CLI rewinds its list of live messages: one not in it is no point to
            // rewind to.
            if let Some(i) = self.live.iter().position(|id| id == to) {
                for id in self.live.drain(i..) {
                    self.in_live.remove(&id);
                    self.rewound.insert(id);
                }
            }
            report.records += 1;
        } else if v.get("sessionId").is_some() && v.get("type").is_none() {
            self.meta(&v);
            report.records += 1;
        } else if v.get("id").is_some() && v.get("type").is_some() {
            self.put(v);
            report.records += 1;
        } else {
            report.skip("(unknown record)");
        }
    }

    fn set(&mut self, set: &Value, report: &mut FileReport) {
        if let Some(summary) = str_of(set, "summary") {
            self.summary = Some(summary.to_owned());
        }
        // The CLI sets the messages it sends the model from then on (its history after a
        // compression, with a summary turn, or with old tool outputs masked): that is its
        // list of live messages now. A message it lists that the file recorded before
        // keeps that record (the set's copy may be masked); a new one (the summary) is
        // taken; the ones it leaves out stay, as they stay in the file, with the usage
        // they were counted with.
        if let Some(list) = set.get("messages").and_then(Value::as_array) {
            self.live.clear();
            self.in_live.clear();
            for m in list {
                let id = str_of(m, "id").unwrap_or("");
                if self.index.contains_key(id) {
                    self.rewound.remove(id);
                    if self.in_live.insert(id.to_owned()) {
                        self.live.push(id.to_owned());
                    }
                } else {
                    self.put(m.clone());
                }
            }
        }
        report.records += 1;
    }

    /// Takes a message record: new, or the update of one (the last wins), which is live
    /// (again, if a rewind had dropped it).
    fn put(&mut self, m: Value) {
        let id = str_of(&m, "id").unwrap_or("").to_owned();
        self.rewound.remove(&id);
        if self.in_live.insert(id.clone()) {
            self.live.push(id.clone());
        }
        match self.index.get(&id).copied() {
            Some(i) => self.messages[i] = m,
            None => {
                self.index.insert(id, self.messages.len());
                self.messages.push(m);
            }
        }
    }

    fn finish(
        self,
        path: &Path,
        unit: &Unit<'_>,
        out: &mut Batch,
        report: &mut FileReport,
    ) -> Option<SessionRec> {
        // Nothing of a Gemini CLI conversation in it (another agent's file given with
        // `--from gemini`, a stray JSON file under chats/): no session, only the skipped
        // records the report already counts.
        if str_of(&self.meta, "sessionId").is_none() && self.messages.is_empty() {
            return None;
        }
        let stem = path
            .file_stem()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        let id = str_of(&self.meta, "sessionId").map_or(stem, str::to_owned);
        let start = str_of(&self.meta, "startTime").and_then(time::parse);
        let last = str_of(&self.meta, "lastUpdated").and_then(time::parse);
        let first_message = self
            .messages
            .first()
            .and_then(|m| str_of(m, "timestamp"))
            .and_then(time::parse);
        let created = start.or(first_message).unwrap_or(unit.mtime_ms);
        let mut rec = SessionRec::new(id.clone(), created);
        rec.updated_at = last.unwrap_or(created).max(created);
        if unit.since.is_some_and(|since| rec.updated_at < since) {
            return None;
        }
        rec.title = self
            .summary
            .clone()
            .or_else(|| str_of(&self.meta, "summary").map(str::to_owned))
            .map(|t| (t, TitleRank::Source));
        rec.directory = self
            .meta
            .get("directories")
            .and_then(Value::as_array)
            .and_then(|d| d.first())
            .and_then(Value::as_str)
            .map(str::to_owned);
        if str_of(&self.meta, "kind") == Some("subagent") {
            rec.kind = SessionKind::Task;
            // chats/<parentSessionId>/<id>.jsonl
            rec.parent = path
                .parent()
                .filter(|p| p.file_name().is_some_and(|n| n != "chats"))
                .and_then(Path::file_name)
                .map(|n| n.to_string_lossy().into_owned());
        }
        let mut models: BTreeMap<String, u64> = BTreeMap::new();
        let mut last_at = created;
        for m in &self.messages {
            let mid = str_of(m, "id").unwrap_or("");
            let key = format!("{id}:{mid}");
            let at = str_of(m, "timestamp")
                .and_then(time::parse)
                .unwrap_or(last_at);
            last_at = at;
            rec.updated_at = rec.updated_at.max(at);
            let role = match str_of(m, "type").unwrap_or("") {
                "user" => Role::User,
                "gemini" => Role::Assistant,
                other => {
                    report.skip(format!("message:{other}"));
                    continue;
                }
            };
            let mut msg = message(SRC, &key, role, at);
            if self.rewound.contains(mid) {
                msg.error = Some(serde_json::json!({
                    "type": "rewound",
                    "message": "undone by a rewind in Gemini CLI",
                }));
            }
            let mut parts: Vec<Part> = Vec::new();
            if let Some(thoughts) = m.get("thoughts").and_then(Value::as_array) {
                for t in thoughts {
                    let body = [str_of(t, "subject"), str_of(t, "description")]
                        .into_iter()
                        .flatten()
                        .collect::<Vec<_>>()
                        .join(": ");
                    if !body.is_empty() {
                        parts.push(reasoning(body, None, None));
                    }
                }
            }
            let body = content_text(m.get("content").unwrap_or(&Value::Null));
            if !body.is_empty() {
                parts.push(text(body, false));
            }
            for call in m
                .get("toolCalls")
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
            {
                let call_at = str_of(call, "timestamp")
                    .and_then(time::parse)
                    .unwrap_or(at);
                let status = str_of(call, "status").unwrap_or("");
                let output = result_text(call.get("result").unwrap_or(&Value::Null));
                let state = match status {
                    "success" => settled(output, false, Value::Null, Some(call_at), call_at),
                    "error" | "cancelled" => {
                        settled(output, true, Value::Null, Some(call_at), call_at)
                    }
                    _ => ToolState::Running {
                        started_at: call_at,
                    },
                };
                parts.push(tool(
                    str_of(call, "id").unwrap_or(""),
                    str_of(call, "name").unwrap_or(""),
                    call.get("args").cloned().unwrap_or(Value::Null),
                    state,
                ));
            }
            if role == Role::Assistant {
                msg.model = str_of(m, "model").map(str::to_owned);
                msg.provider = Some("google".to_owned());
                if let Some(model) = &msg.model {
                    *models.entry(model.clone()).or_default() += 1;
                }
                if let Some(t) = m.get("tokens") {
                    let input = int_of(t, "input");
                    let cached = int_of(t, "cached").min(input);
                    msg.usage = TokenUsage {
                        input: input - cached,
                        output: int_of(t, "output"),
                        cache_read: cached,
                        cache_write: 0,
                        reasoning: int_of(t, "thoughts"),
                    };
                }
            }
            msg.parts = numbered(SRC, &key, parts, at);
            let calls = i64::from(role == Role::Assistant);
            out.messages.push(MessageRec {
                session: id.clone(),
                message: msg,
                api_calls: calls,
                reported_cost: None,
                cost_flags: 0,
                cache_write_1h: 0,
            });
        }
        rec.model = models.into_iter().max_by_key(|(_, n)| *n).map(|(m, _)| m);
        Some(rec)
    }
}

/// The text of a tool call's result (`functionResponse` parts).
fn result_text(v: &Value) -> String {
    let Some(list) = v.as_array() else {
        return content_text(v);
    };
    list.iter()
        .map(|p| match p.pointer("/functionResponse/response") {
            Some(r) => match r.get("output") {
                Some(Value::String(s)) => s.clone(),
                _ => r.to_string(),
            },
            None => content_text(p),
        })
        .collect::<Vec<_>>()
        .join("\n")
}
