//! Continue (continuedev/continue, the VS Code and JetBrains extension and its `cn` CLI):
//! `~/.continue/sessions/<session id>.json`, one file per conversation, and `sessions.json`
//! beside them, the list of sessions with their `dateCreated`; `CONTINUE_GLOBAL_DIR` moves
//! `~/.continue`. Its `sessions` folder, `~/.continue` itself or one session's file may be
//! given.
//!
//! Mapping (`core/index.d.ts`: `Session`, `ChatHistoryItem`, `ChatMessage`): a session is
//! `{sessionId, title, workspaceDirectory, history}`, each history item one message:
//! - `user`: its `content` (a string, or parts: `text` joined, `imageUrl` a file part); the
//!   context the user attached (`contextItems`: files, code, docs) is what the model was
//!   sent beside it and is left out;
//! - `assistant`: its text, its `reasoning` (a reasoning part), and its `toolCalls` (the
//!   function's `name` and `arguments`, JSON text), settled by the `tool` message that
//!   answers each (`toolCallId`, its `content`) or else by the item's `toolCallState` /
//!   `toolCallStates` (`output`'s contents; `errored` and `canceled` fail it);
//!   a `thinking` message (its text and `signature`) is the next reply's reasoning; `system`
//!   messages are counted as skipped;
//! - the model is what the reply's `promptLogs` name (`completionOptions.model`, else
//!   `modelTitle`);
//! - times: Continue keeps none per message: every message takes the session's
//!   `dateCreated` (from `sessions.json`, epoch ms; a session the list lacks keeps the start
//!   its first import gave it), and the file's modification time is its last activity; the title is the session's (`New Session`, the placeholder, is none);
//!   the folder is `workspaceDirectory`.
//! - no usage: Continue's session files keep no token counts a reader can rely on (the
//!   providers' usage, where one is kept, is counted differently by each), so its sessions
//!   show "no usage recorded".
//!
//! A changed file is read again whole; its messages are keyed by session and position, so
//! reading it again stores each once.

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use scribe_message::{Part, Role, ToolState};
use serde_json::Value;

use super::{
    FileReport, Importer, Recorded, Unit, array_of, image_url, message, numbered, reasoning,
    settled, str_of, text, tool, uri_directory,
};
use crate::Source;
use crate::env::Env;
use crate::error::{ImportError, Result};
use crate::record::{Batch, MessageRec, Resume, SessionRec, TitleRank};
use crate::time;

const SRC: Source = Source::Continue;

/// The list of sessions beside their files.
const INDEX: &str = "sessions.json";

/// The title Continue gives a session before it names it.
const PLACEHOLDER_TITLE: &str = "New Session";

/// The Continue importer.
#[derive(Debug, Clone, Copy)]
pub struct Continue;

impl Importer for Continue {
    fn source(&self) -> Source {
        SRC
    }

    /// `$CONTINUE_GLOBAL_DIR/sessions`, else `~/.continue/sessions`.
    fn default_roots(&self, env: &Env) -> Vec<PathBuf> {
        match env.var("CONTINUE_GLOBAL_DIR") {
            Some(dir) => vec![env.expand(dir).join("sessions")],
            None => env.home_join(".continue/sessions").into_iter().collect(),
        }
    }

    fn discover(&self, root: &Path, out: &mut Vec<PathBuf>) -> Result<()> {
        let sessions = root.join("sessions");
        let root = if sessions.is_dir() { &sessions } else { root };
        let given = root.is_file();
        super::walk(root, out, |p| {
            p.extension().is_some_and(|e| e == "json")
                && (given || p.file_name().is_some_and(|n| n != INDEX))
        })
    }

    fn read(&self, unit: &Unit<'_>, out: &mut Batch, report: &mut FileReport) -> Result<Resume> {
        let path = unit.path;
        let bytes = std::fs::read(path).map_err(ImportError::io(path))?;
        let doc: Value = serde_json::from_slice(&bytes).map_err(|e| malformed(path, e))?;
        if !doc.get("history").is_some_and(Value::is_array) {
            return Err(malformed(path, "it has no history"));
        }
        report.records += 1;
        let id = str_of(&doc, "sessionId")
            .filter(|s| !s.is_empty())
            .map(str::to_owned)
            .or_else(|| Some(path.file_stem()?.to_string_lossy().into_owned()))
            .unwrap_or_default();
        let listed = path
            .parent()
            .map(|dir| date_created(&dir.join(INDEX), &id))
            .unwrap_or_default();
        // A session the list does not date keeps the start its first import gave it (its
        // messages' ids are made from it).
        let recorded = Recorded::of(unit, SRC, &id)?;
        let created = listed
            .or(recorded.start)
            .unwrap_or(unit.mtime_ms)
            .min(unit.mtime_ms);
        let mut rec = SessionRec::new(id.clone(), created);
        rec.fingerprint = Some(Recorded::fingerprint(created, &bytes.len().to_string()));
        rec.updated_at = unit.mtime_ms.max(created);
        if unit.since.is_some_and(|since| rec.updated_at < since) {
            return Ok(whole(&bytes));
        }
        rec.title = str_of(&doc, "title")
            .map(str::trim)
            .filter(|t| !t.is_empty() && *t != PLACEHOLDER_TITLE)
            .map(|t| (t.to_owned(), TitleRank::Source));
        rec.directory = str_of(&doc, "workspaceDirectory")
            .filter(|d| !d.is_empty())
            .and_then(uri_directory);
        rec.model = transcript(&doc, &id, created, out, report);
        out.sessions.push(rec);
        Ok(whole(&bytes))
    }
}

fn malformed(path: &Path, reason: impl ToString) -> ImportError {
    ImportError::Malformed {
        path: path.to_owned(),
        what: "Continue session",
        reason: reason.to_string(),
    }
}

/// Where a file read whole ends.
fn whole(bytes: &[u8]) -> Resume {
    Resume {
        offset: u64::try_from(bytes.len()).unwrap_or(u64::MAX),
        lines: bytes.iter().filter(|b| **b == b'\n').count() as u64,
        carry: None,
        more: false,
    }
}

/// When session `id` was created, as the list of sessions at `index` says (epoch ms as
/// text or a number, or a date).
fn date_created(index: &Path, id: &str) -> Option<i64> {
    let list: Value = serde_json::from_slice(&std::fs::read(index).ok()?).ok()?;
    let entry = list
        .as_array()?
        .iter()
        .find(|s| str_of(s, "sessionId") == Some(id))?;
    match entry.get("dateCreated")? {
        Value::String(s) => s
            .trim()
            .parse::<f64>()
            .ok()
            .and_then(time::epoch)
            .or_else(|| time::parse(s)),
        other => time::of_json(other),
    }
}

/// The text of a message's `content`: a string, or its `text` parts joined.
fn content_text(content: &Value) -> String {
    match content {
        Value::String(s) => s.clone(),
        Value::Array(parts) => parts
            .iter()
            .filter(|p| str_of(p, "type") == Some("text"))
            .filter_map(|p| str_of(p, "text"))
            .collect::<Vec<_>>()
            .join("\n"),
        _ => String::new(),
    }
}

/// The text of a tool call's `output` (context items: their `content`).
fn output_text(items: &[Value]) -> String {
    items
        .iter()
        .filter_map(|i| str_of(i, "content"))
        .collect::<Vec<_>>()
        .join("\n")
}

/// The messages of `doc`'s history into `out`; returns the model most replies came from.
fn transcript(
    doc: &Value,
    sid: &str,
    at: i64,
    out: &mut Batch,
    report: &mut FileReport,
) -> Option<String> {
    // A call's id → (index in out.messages, part index).
    let mut calls: HashMap<String, (usize, usize)> = HashMap::new();
    let mut models: HashMap<String, usize> = HashMap::new();
    // Reasoning from a `thinking` message (its text and signature), for the reply after it.
    let mut thought: Option<(String, Option<String>)> = None;
    for (i, item) in array_of(doc, "history").iter().enumerate() {
        let m = item.get("message").unwrap_or(&Value::Null);
        let content = m.get("content").unwrap_or(&Value::Null);
        let key = format!("{sid}:{i}");
        match str_of(m, "role").unwrap_or("") {
            "user" => {
                let mut parts = Vec::new();
                let said = content_text(content);
                if !said.trim().is_empty() {
                    parts.push(text(said, false));
                }
                for p in content.as_array().map(Vec::as_slice).unwrap_or(&[]) {
                    if str_of(p, "type") == Some("imageUrl")
                        && let Some(url) = p.pointer("/imageUrl/url").and_then(Value::as_str)
                    {
                        parts.push(image_url(url.to_owned()));
                    }
                }
                if parts.is_empty() {
                    report.skip("message:user:empty");
                    continue;
                }
                let mut msg = message(SRC, &key, Role::User, at);
                msg.parts = numbered(SRC, &key, parts, at);
                out.messages.push(MessageRec::new(sid.to_owned(), msg));
            }
            "thinking" => {
                let said = content_text(content);
                if !said.trim().is_empty() {
                    let (text, signature) = thought.get_or_insert_with(Default::default);
                    text.push_str(&said);
                    if let Some(s) = str_of(m, "signature").filter(|s| !s.is_empty()) {
                        *signature = Some(s.to_owned());
                    }
                }
            }
            "assistant" => {
                let mut parts: Vec<Part> = Vec::new();
                let own = item.pointer("/reasoning/text").and_then(Value::as_str);
                if let Some((r, signature)) =
                    thought.take().or_else(|| own.map(|r| (r.to_owned(), None)))
                    && !r.trim().is_empty()
                {
                    parts.push(reasoning(r, signature, None));
                }
                let said = content_text(content);
                if !said.trim().is_empty() {
                    parts.push(text(said, false));
                }
                let this = out.messages.len();
                let states: Vec<&Value> = array_of(item, "toolCallStates")
                    .iter()
                    .chain(item.get("toolCallState").filter(|s| s.is_object()))
                    .collect();
                for call in array_of(m, "toolCalls") {
                    let id = str_of(call, "id").unwrap_or("");
                    let function = call.get("function").unwrap_or(&Value::Null);
                    let name = str_of(function, "name").unwrap_or("");
                    let input = match str_of(function, "arguments") {
                        Some(raw) => serde_json::from_str(raw)
                            .unwrap_or_else(|_| Value::String(raw.to_owned())),
                        None => Value::Null,
                    };
                    let state = states
                        .iter()
                        .find(|s| str_of(s, "toolCallId") == Some(id))
                        .and_then(|s| {
                            let status = str_of(s, "status")?;
                            let output = output_text(array_of(s, "output"));
                            match status {
                                "done" => Some(settled(output, false, Value::Null, Some(at), at)),
                                "errored" | "canceled" => {
                                    let why = if output.is_empty() {
                                        format!("the call {status}")
                                    } else {
                                        output
                                    };
                                    Some(settled(why, true, Value::Null, Some(at), at))
                                }
                                _ => None,
                            }
                        })
                        .unwrap_or(ToolState::Running { started_at: at });
                    calls.insert(id.to_owned(), (this, parts.len()));
                    parts.push(tool(id, name, input, state));
                }
                if parts.is_empty() {
                    report.skip("message:assistant:empty");
                    continue;
                }
                let mut msg = message(SRC, &key, Role::Assistant, at);
                msg.model = array_of(item, "promptLogs").last().and_then(|log| {
                    log.pointer("/completionOptions/model")
                        .and_then(Value::as_str)
                        .or_else(|| str_of(log, "modelTitle"))
                        .filter(|m| !m.is_empty())
                        .map(str::to_owned)
                });
                if let Some(model) = &msg.model {
                    *models.entry(model.clone()).or_default() += 1;
                }
                msg.parts = numbered(SRC, &key, parts, at);
                out.messages.push(MessageRec::new(sid.to_owned(), msg));
            }
            "tool" => {
                let id = str_of(m, "toolCallId").unwrap_or("");
                match calls.get(id) {
                    Some(&place) => {
                        let failed = item
                            .pointer("/toolCallState/status")
                            .and_then(Value::as_str)
                            == Some("errored");
                        super::settle_call(
                            &mut out.messages,
                            place,
                            content_text(content),
                            failed,
                            at,
                        );
                    }
                    None => report.skip("tool:without-call"),
                }
            }
            "" => report.skip("message:(no role)"),
            other => report.skip(format!("message:{other}")),
        }
    }
    models
        .into_iter()
        .max_by(|a, b| a.1.cmp(&b.1).then_with(|| b.0.cmp(&a.0)))
        .map(|(m, _)| m)
}
