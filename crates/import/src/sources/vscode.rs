//! VS Code's chat (GitHub Copilot Chat and the other chat participants): one file per
//! conversation, `workspaceStorage/<workspace>/chatSessions/<session id>.json` under the
//! editor's `User` folder, or `globalStorage/emptyWindowChatSessions/` for one held in a
//! window without a folder. VS Code 1.109 and later keep a conversation as an append log
//! beside it, `<session id>.jsonl`, which it reads instead when both are there.
//!
//! Where: `~/.config/Code/User` (`$XDG_CONFIG_HOME`; also `Code - Insiders`, `VSCodium`
//! and a remote host's `~/.vscode-server/data/User`), `~/Library/Application
//! Support/Code/User` on macOS, `%APPDATA%\Code\User` on Windows. That folder, its
//! `workspaceStorage` or `globalStorage` folder, one workspace's folder, a `chatSessions`
//! folder or one conversation's file may be given.
//!
//! The log (microsoft/vscode `chat/common/model/objectMutationLog.ts`) is one JSON entry
//! a line: `{"kind":0,"v":…}` the whole conversation, then `{"kind":1,"k":path,"v":…}`
//! setting the value at a path of keys and indices, `{"kind":2,"k":path,"v":[…],"i":n}`
//! cutting the array there to `n` items (when `i` is given) and appending `v`, and
//! `{"kind":3,"k":path}` deleting it; VS Code rewrites the file from a new first entry now
//! and then. It is replayed whole; an entry that does not apply (a path that is not there)
//! is reported malformed and the rest applied, and a last line without its newline (VS
//! Code still writing it) waits for the next import.
//!
//! Mapping, two Scribe messages per request (a turn): the user's and the reply.
//! - the user's is the request's `message.text` (an old build's `message` string), as
//!   typed: `@workspace /explain #file:main.rs` stays as it reads;
//! - the reply is its `response` parts in order: markdown (a plain string, or an object
//!   with its `value`) and the file references VS Code shows in it (`inlineReference`,
//!   written as `` `name` ``) run together into text; `thinking` is reasoning (its
//!   consecutive chunks one part); `toolInvocationSerialized` is a tool call: `toolId`,
//!   `toolCallId`, its arguments where Copilot keeps them (`result.metadata
//!   .toolCallRounds[].toolCalls[]`, JSON text), else the tool's own (`resultDetails
//!   .input`, a terminal's `commandLine`, `rawInput`), else what VS Code showed
//!   (`invocationMessage`); settled when `isComplete` with `resultDetails.output`'s text
//!   (else Copilot's `toolCallResults`, else the files the call read, else
//!   `pastTenseMessage`),
//!   failed when `isError`, and failed when the user denied it (`isConfirmed` false, or
//!   its reason's `type` 0) or VS Code skipped it (5). The other kinds (edits VS Code
//!   applied, progress, confirmations, code-block links) are counted as skipped;
//! - a request's `result.errorDetails` is its reply's error, and a request cancelled
//!   (`modelState.value` 2, an old build's `isCanceled`) has one of type `cancelled`;
//! - the model is the request's `modelId` (`copilot/gpt-4.1` is `gpt-4.1`), else Copilot's
//!   `result.metadata.modelId`;
//! - times: a request's `timestamp` (ms); its reply's `responseTimestamp`, else the request's
//!   time plus `result.timings.firstProgress`; a request without a time takes the one
//!   before it (the conversation's `creationDate` for the first);
//! - the title is the user's (`customTitle`), else an old build's `computedTitle`, else
//!   the one VS Code generated, from the index of conversations it keeps in the state
//!   database beside the folder (`chat.ChatSessionStore.index` in the workspace's
//!   `state.vscdb`, or the global one for the empty window's), read as any source database
//!   is (read-only, never locked for longer than the one read); a conversation with none
//!   of them takes its first words, as everywhere;
//! - the folder is the conversation's `workingDirectory`, else the one its workspace's
//!   `workspace.json` names (`folder`, or a multi-root workspace's file).
//!
//! No usage is recorded. What the files keep is a gauge of the context, not a bill: the
//! last model call's prompt size of a turn (`promptTokens`, on the request in recent
//! builds, in Copilot's `result.metadata` before), not the prompts of the turn's other
//! calls; and Copilot charges premium requests, not tokens. Such conversations say "no
//! usage recorded" rather than a figure that undercounts.
//!
//! A changed file is read again whole (its messages keyed by session and request, so each
//! is stored once); a request VS Code dropped (one edited and sent again, a conversation
//! cleared) keeps in Scribe what an earlier import stored.

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use scribe_message::{Part, Role, ToolState};
use serde_json::Value;

use super::{
    FileReport, Importer, Times, Unit, array_of, editor_state, existing_or_first, message,
    numbered, reasoning, settled, str_of, text, tool, uri_directory, walk,
};
use crate::Source;
use crate::env::Env;
use crate::error::{ImportError, Result};
use crate::record::{Batch, MessageRec, Resume, SessionRec, TitleRank};

const SRC: Source = Source::VsCode;

/// The editors whose own chat is read (Cursor keeps its conversations elsewhere: `--from
/// cursor`).
const EDITORS: [&str; 3] = ["Code", "Code - Insiders", "VSCodium"];

/// A workspace's folder of conversations.
const SESSIONS: &str = "chatSessions";

/// The folder of conversations held in a window without a folder, under `globalStorage`.
const EMPTY_WINDOW: &str = "emptyWindowChatSessions";

/// The key of VS Code's index of the conversations in a state database.
const INDEX: &str = "chat.ChatSessionStore.index";

/// What the reader says a file should be.
const WHAT: &str = "VS Code chat session";

/// `modelState.value` of a request the user cancelled (`ResponseModelState.Cancelled`).
const CANCELLED: i64 = 2;

/// `isConfirmed.type` of a call the user denied (`ToolConfirmKind.Denied`) and of one VS
/// Code skipped (`ToolConfirmKind.Skipped`).
const DENIED: i64 = 0;
const SKIPPED: i64 = 5;

/// The VS Code chat importer.
#[derive(Debug, Clone, Copy)]
pub struct VsCode;

impl Importer for VsCode {
    fn reads_state(&self) -> bool {
        false
    }

    fn source(&self) -> Source {
        SRC
    }

    /// The `User` folder of each of VS Code's builds that exists (the first when none
    /// does), and a remote host's.
    fn default_roots(&self, env: &Env) -> Vec<PathBuf> {
        let mut candidates: Vec<PathBuf> = EDITORS
            .iter()
            .filter_map(|editor| env.editor_user_dir(editor))
            .collect();
        candidates.extend(env.home_join(".vscode-server/data/User"));
        existing_or_first(candidates)
    }

    /// The conversations under `root`: a `User` folder's (every workspace's and the empty
    /// window's), a `workspaceStorage` folder's, a `globalStorage` folder's, one
    /// workspace's, or the `.json`/`.jsonl` files in any other folder (a `chatSessions`
    /// folder, a copy of one). A conversation kept both ways is its log.
    fn discover(&self, root: &Path, out: &mut Vec<PathBuf>) -> Result<()> {
        let mut found = Vec::new();
        if root.is_file() {
            walk(root, &mut found, is_session_file)?;
        } else if root.join("workspaceStorage").is_dir() || root.join("globalStorage").is_dir() {
            workspaces(&root.join("workspaceStorage"), &mut found)?;
            files_in(&root.join("globalStorage").join(EMPTY_WINDOW), &mut found)?;
        } else if root.file_name().is_some_and(|n| n == "workspaceStorage") {
            workspaces(root, &mut found)?;
        } else if root.join(EMPTY_WINDOW).is_dir() {
            files_in(&root.join(EMPTY_WINDOW), &mut found)?;
        } else if root.join(SESSIONS).is_dir() {
            files_in(&root.join(SESSIONS), &mut found)?;
        } else {
            walk(root, &mut found, is_session_file)?;
        }
        let logs: std::collections::HashSet<PathBuf> = found
            .iter()
            .filter(|p| p.extension().is_some_and(|e| e == "jsonl"))
            .map(|p| p.with_extension("json"))
            .collect();
        out.extend(found.into_iter().filter(|p| !logs.contains(p)));
        Ok(())
    }

    /// A `User` folder's `workspaceStorage`, not the whole folder: the rest of it (the
    /// history of every file saved, extensions' storage) changes all the time and holds
    /// none of the conversations but the empty window's, which the watch's periodic look
    /// finds (`scribe_import::watch::RESCAN`). Any other root as it is.
    fn watch_root(&self, root: &Path) -> PathBuf {
        let workspaces = root.join("workspaceStorage");
        if workspaces.is_dir() {
            workspaces
        } else {
            root.to_owned()
        }
    }

    fn read(&self, unit: &Unit<'_>, out: &mut Batch, report: &mut FileReport) -> Result<Resume> {
        let path = unit.path;
        let bytes = std::fs::read(path).map_err(ImportError::io(path))?;
        let (doc, end) = if path.extension().is_some_and(|e| e == "jsonl") {
            replay(&bytes, path, report)?
        } else {
            let doc: Value = serde_json::from_slice(&bytes).map_err(|e| malformed(path, e))?;
            report.records += 1;
            (doc, bytes.len())
        };
        if !doc.get("requests").is_some_and(Value::is_array) {
            return Err(malformed(path, "it has no requests"));
        }
        if let Some(rec) = conversation(&doc, path, unit, out, report) {
            out.sessions.push(rec);
        }
        let lines = bytes[..end].iter().filter(|b| **b == b'\n').count();
        Ok(Resume {
            offset: u64::try_from(end).unwrap_or(u64::MAX),
            lines: lines as u64,
            carry: None,
            more: false,
        })
    }
}

fn malformed(path: &Path, reason: impl ToString) -> ImportError {
    ImportError::Malformed {
        path: path.to_owned(),
        what: WHAT,
        reason: reason.to_string(),
    }
}

fn is_session_file(p: &Path) -> bool {
    p.extension().is_some_and(|e| e == "json" || e == "jsonl")
}

/// The conversation files directly in `dir` (none when it does not exist), sorted.
fn files_in(dir: &Path, out: &mut Vec<PathBuf>) -> Result<()> {
    let entries = match std::fs::read_dir(dir) {
        Ok(entries) => entries,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(()),
        Err(source) => {
            return Err(ImportError::Io {
                path: dir.to_owned(),
                source,
            });
        }
    };
    let mut files: Vec<PathBuf> = entries
        .filter_map(|e| Some(e.ok()?.path()))
        .filter(|p| p.is_file() && is_session_file(p))
        .collect();
    files.sort();
    out.extend(files);
    Ok(())
}

/// The conversation files of every workspace under `storage` (`workspaceStorage`).
fn workspaces(storage: &Path, out: &mut Vec<PathBuf>) -> Result<()> {
    let Ok(entries) = std::fs::read_dir(storage) else {
        return Ok(());
    };
    let mut dirs: Vec<PathBuf> = entries.filter_map(|e| Some(e.ok()?.path())).collect();
    dirs.sort();
    for dir in dirs {
        files_in(&dir.join(SESSIONS), out)?;
    }
    Ok(())
}

/// Replays the append log in `bytes`: the conversation it ends with, and where its last
/// complete line ends.
fn replay(bytes: &[u8], path: &Path, report: &mut FileReport) -> Result<(Value, usize)> {
    let mut state: Option<Value> = None;
    let (mut start, mut number) = (0, 0u64);
    while let Some(len) = bytes[start..].iter().position(|b| *b == b'\n') {
        let line = &bytes[start..start + len];
        start += len + 1;
        number += 1;
        if line.iter().all(u8::is_ascii_whitespace) {
            continue;
        }
        let applied = serde_json::from_slice::<Value>(line)
            .map_err(|e| e.to_string())
            .and_then(|entry| apply(&mut state, entry));
        match applied {
            Ok(()) => report.records += 1,
            Err(why) => report.malformed(path, Some(number), why),
        }
    }
    let state = state.ok_or_else(|| malformed(path, "its log has no first entry"))?;
    Ok((state, start))
}

/// Applies one entry of the log to `state`.
fn apply(state: &mut Option<Value>, mut entry: Value) -> std::result::Result<(), String> {
    let kind = entry.get("kind").and_then(Value::as_i64);
    let value = entry.get_mut("v").map(Value::take);
    if kind == Some(0) {
        *state = Some(value.unwrap_or(Value::Null));
        return Ok(());
    }
    let Some(root) = state.as_mut() else {
        return Err("an update before the log's first entry".to_owned());
    };
    let path = array_of(&entry, "k");
    match kind {
        Some(1) => set(root, path, Some(value.unwrap_or(Value::Null))),
        Some(3) => set(root, path, None),
        Some(2) => {
            let cut = entry.get("i").and_then(Value::as_u64);
            let slot = place(root, path).ok_or("no such array")?;
            if !slot.is_array() {
                *slot = Value::Array(Vec::new());
            }
            if let Value::Array(items) = slot {
                if let Some(cut) = cut {
                    items.truncate(usize::try_from(cut).unwrap_or(usize::MAX));
                }
                if let Some(Value::Array(more)) = value {
                    items.extend(more);
                }
            }
            Ok(())
        }
        other => Err(format!("an entry of unknown kind {other:?}")),
    }
}

/// The value at `path` (keys of objects, indices of arrays) in `root`: the place to set
/// it, created as null in an object that lacks it.
fn place<'a>(root: &'a mut Value, path: &[Value]) -> Option<&'a mut Value> {
    let Some((last, parent)) = path.split_last() else {
        return Some(root);
    };
    let mut at = root;
    for step in parent {
        at = match (at, step) {
            (Value::Object(map), Value::String(key)) => map.get_mut(key)?,
            (Value::Array(items), Value::Number(i)) => {
                items.get_mut(usize::try_from(i.as_u64()?).ok()?)?
            }
            _ => return None,
        };
    }
    match (at, last) {
        (Value::Object(map), Value::String(key)) => {
            Some(map.entry(key.clone()).or_insert(Value::Null))
        }
        (Value::Array(items), Value::Number(i)) => {
            let i = usize::try_from(i.as_u64()?).ok()?;
            if i == items.len() {
                items.push(Value::Null);
            }
            items.get_mut(i)
        }
        _ => None,
    }
}

/// Sets the value at `path` to `value`, or deletes it.
fn set(root: &mut Value, path: &[Value], value: Option<Value>) -> std::result::Result<(), String> {
    match value {
        Some(value) => {
            *place(root, path).ok_or("no such place")? = value;
            Ok(())
        }
        None => {
            let Some((last, parent)) = path.split_last() else {
                return Err("the whole conversation deleted".to_owned());
            };
            match (place(root, parent), last) {
                (Some(Value::Object(map)), Value::String(key)) => {
                    map.remove(key);
                    Ok(())
                }
                (Some(Value::Array(items)), Value::Number(i)) => {
                    if let Some(slot) = i
                        .as_u64()
                        .and_then(|i| items.get_mut(usize::try_from(i).ok()?))
                    {
                        *slot = Value::Null;
                    }
                    Ok(())
                }
                _ => Err("no such place".to_owned()),
            }
        }
    }
}

/// The session `doc` is, its messages added to `out`.
fn conversation(
    doc: &Value,
    path: &Path,
    unit: &Unit<'_>,
    out: &mut Batch,
    report: &mut FileReport,
) -> Option<SessionRec> {
    let id = str_of(doc, "sessionId")
        .filter(|s| !s.is_empty())
        .map(str::to_owned)
        .or_else(|| Some(path.file_stem()?.to_string_lossy().into_owned()))?;
    let requests = array_of(doc, "requests");
    let created = millis(doc.get("creationDate"))
        .or_else(|| requests.iter().find_map(|r| millis(r.get("timestamp"))))
        .unwrap_or(unit.mtime_ms);
    let mut times = Times::new(created);
    let mut rec = SessionRec::new(id.clone(), created);
    let named = |key: &str| str_of(doc, key).filter(|t| !t.trim().is_empty());
    rec.title = match named("customTitle") {
        Some(t) => Some((t.to_owned(), TitleRank::User)),
        None => named("computedTitle")
            .map(str::to_owned)
            .or_else(|| indexed_title(path, &id))
            .map(|t| (t, TitleRank::Source)),
    };
    rec.directory = str_of(doc, "workingDirectory")
        .and_then(uri_directory)
        .or_else(|| workspace_folder(path));
    let mut models: HashMap<String, usize> = HashMap::new();
    let first = out.messages.len();
    for (i, r) in requests.iter().enumerate() {
        let request_id = str_of(r, "requestId")
            .map(str::to_owned)
            .unwrap_or_else(|| i.to_string());
        let at = times.note(millis(r.get("timestamp")));
        let said = match r.get("message") {
            Some(Value::String(s)) => s.clone(),
            Some(m) => str_of(m, "text").unwrap_or("").to_owned(),
            None => String::new(),
        };
        if !said.trim().is_empty() {
            let key = format!("{id}:{request_id}:user");
            let mut msg = message(SRC, &key, Role::User, at);
            msg.parts = numbered(SRC, &key, vec![text(said, false)], at);
            push(out, &id, msg);
        }
        let result = r.get("result").unwrap_or(&Value::Null);
        let replied_at = millis(r.get("responseTimestamp"))
            .or_else(|| Some(at.saturating_add(millis(result.pointer("/timings/firstProgress"))?)))
            .unwrap_or(at)
            .max(at);
        let replied_at = times.note(Some(replied_at));
        let parts = reply(r, result, replied_at, report);
        let error = failure(r, result);
        if parts.is_empty() && error.is_none() {
            continue;
        }
        let key = format!("{id}:{request_id}:reply");
        let mut msg = message(SRC, &key, Role::Assistant, replied_at);
        msg.model = str_of(r, "modelId")
            .or_else(|| result.pointer("/metadata/modelId").and_then(Value::as_str))
            .map(|m| m.strip_prefix("copilot/").unwrap_or(m).to_owned())
            .filter(|m| !m.is_empty());
        if let Some(model) = &msg.model {
            *models.entry(model.clone()).or_default() += 1;
        }
        msg.agent = r
            .pointer("/agent/id")
            .and_then(Value::as_str)
            .map(str::to_owned);
        msg.error = error;
        let done = millis(r.pointer("/modelState/completedAt"))
            .or_else(|| Some(at.saturating_add(millis(result.pointer("/timings/totalElapsed"))?)));
        msg.finished_at = done
            .filter(|d| *d <= crate::time::LATEST)
            .map(|d| d.max(replied_at));
        msg.parts = numbered(SRC, &key, parts, replied_at);
        push(out, &id, msg);
    }
    rec.updated_at = times.last().max(created);
    if unit.since.is_some_and(|since| rec.updated_at < since) {
        out.messages.truncate(first);
        return None;
    }
    rec.model = models
        .into_iter()
        .max_by(|a, b| a.1.cmp(&b.1).then_with(|| b.0.cmp(&a.0)))
        .map(|(m, _)| m);
    Some(rec)
}

fn push(out: &mut Batch, session: &str, msg: scribe_message::Message) {
    out.messages.push(MessageRec {
        session: session.to_owned(),
        message: msg,
        api_calls: 0,
        reported_cost: None,
        cost_flags: 0,
        cache_write_1h: 0,
    });
}

/// Milliseconds as VS Code writes them (a number): a time since the epoch, or a duration
/// (`timings.firstProgress`).
fn millis(v: Option<&Value>) -> Option<i64> {
    let v = v?;
    v.as_i64()
        .or_else(|| v.as_f64().filter(|f| f.is_finite()).map(|f| f as i64))
}

/// The folder the workspace a conversation's file is kept under names
/// (`workspaceStorage/<workspace>/workspace.json`).
fn workspace_folder(path: &Path) -> Option<String> {
    let workspace = path.parent()?.parent()?;
    let bytes = std::fs::read(workspace.join("workspace.json")).ok()?;
    let meta: Value = serde_json::from_slice(&bytes).ok()?;
    str_of(&meta, "folder")
        .or_else(|| str_of(&meta, "workspace"))
        .and_then(uri_directory)
}

/// The title VS Code gave conversation `id` (the file at `path`), from the index it keeps
/// of a workspace's conversations in the workspace's state database (`state.vscdb` beside
/// its `chatSessions` folder), or of the empty window's in the global one (beside
/// `emptyWindowChatSessions`).
fn indexed_title(path: &Path, id: &str) -> Option<String> {
    let db = path.parent()?.parent()?.join("state.vscdb");
    let index = editor_state(&db, INDEX)?;
    let title = index
        .get("entries")?
        .get(id)?
        .get("title")?
        .as_str()?
        .trim();
    (!title.is_empty()).then(|| title.to_owned())
}

/// The error of a request's reply: VS Code's `errorDetails`, or a cancellation.
fn failure(r: &Value, result: &Value) -> Option<Value> {
    if let Some(e) = result.get("errorDetails").filter(|e| e.is_object()) {
        let kind = str_of(e, "code").unwrap_or("error");
        let said = str_of(e, "message").unwrap_or("");
        return Some(serde_json::json!({ "type": kind, "message": said }));
    }
    let cancelled = r.pointer("/modelState/value").and_then(Value::as_i64) == Some(CANCELLED)
        || r.get("isCanceled").and_then(Value::as_bool) == Some(true);
    cancelled
        .then(|| serde_json::json!({ "type": "cancelled", "message": "the request was cancelled" }))
}

/// The text of a markdown value: a string, or an object's `value`.
fn markdown(v: &Value) -> Option<&str> {
    match v {
        Value::String(s) => Some(s),
        _ => str_of(v, "value"),
    }
}

/// The parts of a request's reply, from its `response`.
fn reply(r: &Value, result: &Value, at: i64, report: &mut FileReport) -> Vec<Part> {
    let mut args: HashMap<&str, Value> = HashMap::new();
    for round in array_of(
        result.get("metadata").unwrap_or(&Value::Null),
        "toolCallRounds",
    ) {
        for call in array_of(round, "toolCalls") {
            if let (Some(id), Some(raw)) = (str_of(call, "id"), call.get("arguments")) {
                let parsed = raw
                    .as_str()
                    .and_then(|s| serde_json::from_str(s).ok())
                    .unwrap_or_else(|| raw.clone());
                args.insert(id, parsed);
            }
        }
    }
    let results = result.pointer("/metadata/toolCallResults");
    let mut parts: Vec<Part> = Vec::new();
    let mut prose = String::new();
    // The reasoning being read: its id and its text so far.
    let mut thought: Option<(Option<&str>, String)> = None;
    let response: Vec<&Value> = match r.get("response") {
        Some(v @ Value::String(_)) => vec![v],
        Some(Value::Array(items)) => items.iter().collect(),
        _ => Vec::new(),
    };
    for part in response {
        let kind = str_of(part, "kind");
        let another = thought
            .as_ref()
            .is_some_and(|(id, _)| kind != Some("thinking") || str_of(part, "id") != *id);
        if another && let Some((_, t)) = thought.take() {
            parts.push(reasoning(t, None, None));
        }
        match kind {
            None | Some("markdownContent") | Some("markdownVuln") => {
                let body = markdown(part).or_else(|| part.get("content").and_then(markdown));
                match body {
                    Some(body) => prose.push_str(body),
                    None => report.skip("response:(unknown)"),
                }
            }
            Some("inlineReference") => {
                let name = str_of(part, "name")
                    .map(str::to_owned)
                    .or_else(|| reference_name(part.get("inlineReference")?));
                if let Some(name) = name {
                    prose.push('`');
                    prose.push_str(&name);
                    prose.push('`');
                }
            }
            Some("thinking") => {
                let chunk = match part.get("value") {
                    Some(Value::Array(items)) => {
                        items.iter().filter_map(Value::as_str).collect::<String>()
                    }
                    Some(v) => markdown(v).unwrap_or("").to_owned(),
                    None => String::new(),
                };
                flush(&mut prose, &mut parts);
                if !chunk.is_empty() {
                    thought
                        .get_or_insert_with(|| (str_of(part, "id"), String::new()))
                        .1
                        .push_str(&chunk);
                }
            }
            Some("toolInvocationSerialized") => {
                flush(&mut prose, &mut parts);
                parts.push(tool_call(part, &args, results, at));
            }
            Some(other) => report.skip(format!("response:{other}")),
        }
    }
    if let Some((_, t)) = thought {
        parts.push(reasoning(t, None, None));
    }
    flush(&mut prose, &mut parts);
    parts
}

/// Ends the text run so far: a text part, unless it is only whitespace.
fn flush(prose: &mut String, parts: &mut Vec<Part>) {
    if !prose.trim().is_empty() {
        parts.push(text(std::mem::take(prose), false));
    }
    prose.clear();
}

/// The name a file reference is shown by: its file's name (a URI's path, or a location's
/// URI's).
fn reference_name(reference: &Value) -> Option<String> {
    let uri = reference.get("uri").unwrap_or(reference);
    let path = str_of(uri, "path").or_else(|| str_of(uri, "fsPath"))?;
    let name = path.rsplit(['/', '\\']).next().unwrap_or(path);
    (!name.is_empty()).then(|| name.to_owned())
}

/// A tool call of the reply.
fn tool_call(part: &Value, args: &HashMap<&str, Value>, results: Option<&Value>, at: i64) -> Part {
    let id = str_of(part, "toolCallId").unwrap_or("");
    let name = str_of(part, "toolId").unwrap_or("");
    let details = part.get("resultDetails").unwrap_or(&Value::Null);
    let own = part.get("toolSpecificData").unwrap_or(&Value::Null);
    let input = args
        .get(id)
        .cloned()
        .or_else(|| {
            str_of(details, "input")
                .map(|s| serde_json::from_str(s).unwrap_or_else(|_| Value::String(s.to_owned())))
        })
        .or_else(|| match str_of(own, "kind") {
            Some("terminal") => own
                .pointer("/commandLine/original")
                .or_else(|| own.get("command"))
                .map(|c| serde_json::json!({ "command": c })),
            Some("input") => own.get("rawInput").cloned(),
            _ => None,
        })
        .or_else(|| {
            part.get("invocationMessage")
                .and_then(markdown)
                .map(|m| Value::String(m.to_owned()))
        })
        .unwrap_or(Value::Null);
    let confirmed = part.get("isConfirmed").unwrap_or(&Value::Null);
    let refused = match confirmed {
        Value::Bool(false) => Some("the user denied the call"),
        v => match v.get("type").and_then(Value::as_i64) {
            Some(DENIED) => Some("the user denied the call"),
            Some(SKIPPED) => Some("the call was skipped"),
            _ => None,
        },
    };
    if let Some(why) = refused {
        return tool(
            id,
            name,
            input,
            settled(why.to_owned(), true, Value::Null, Some(at), at),
        );
    }
    if part.get("isComplete").and_then(Value::as_bool) != Some(true) {
        return tool(id, name, input, ToolState::Running { started_at: at });
    }
    let output = tool_output(details)
        .or_else(|| {
            // A tool result's parts: text (`value`), or data left out.
            let text = array_of(results?.get(id)?, "content")
                .iter()
                .filter_map(|c| str_of(c, "value").or_else(|| str_of(c, "text")))
                .collect::<Vec<_>>()
                .join("\n");
            (!text.is_empty()).then_some(text)
        })
        .or_else(|| files_read(details))
        .or_else(|| {
            part.get("pastTenseMessage")
                .and_then(markdown)
                .map(str::to_owned)
        })
        .unwrap_or_default();
    let failed = details.get("isError").and_then(Value::as_bool) == Some(true);
    tool(
        id,
        name,
        input,
        settled(output, failed, Value::Null, Some(at), at),
    )
}

/// The text of a call's `resultDetails` output: its text items' `value`s.
fn tool_output(details: &Value) -> Option<String> {
    let text = array_of(details, "output")
        .iter()
        .filter(|o| o.get("isText").and_then(Value::as_bool) != Some(false))
        .filter_map(|o| str_of(o, "value"))
        .collect::<Vec<_>>()
        .join("\n");
    (!text.is_empty()).then_some(text)
}

/// The files a call's `resultDetails` lists (URIs or locations), one a line.
fn files_read(details: &Value) -> Option<String> {
    let text = details
        .as_array()?
        .iter()
        .filter_map(|r| {
            let uri = r.get("uri").unwrap_or(r);
            str_of(uri, "fsPath").or_else(|| str_of(uri, "path"))
        })
        .collect::<Vec<_>>()
        .join("\n");
    (!text.is_empty()).then_some(text)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use serde_json::json;

    use super::*;

    fn replayed(lines: &[Value]) -> (Value, FileReport) {
        let mut bytes = Vec::new();
        for l in lines {
            bytes.extend(l.to_string().as_bytes());
            bytes.push(b'\n');
        }
        let mut report = FileReport::default();
        let (doc, end) = replay(&bytes, Path::new("s.jsonl"), &mut report).unwrap();
        assert_eq!(end, bytes.len());
        (doc, report)
    }

    #[test]
    fn the_log_is_replayed_as_vs_code_applies_it() {
        let (doc, report) = replayed(&[
            json!({"kind": 0, "v": {"requests": [{"requestId": "a", "response": ["x"]}], "title": "t"}}),
            json!({"kind": 2, "k": ["requests", 0, "response"], "v": ["y", "z"]}),
            json!({"kind": 2, "k": ["requests"], "v": [{"requestId": "b"}]}),
            json!({"kind": 1, "k": ["requests", 1, "modelId"], "v": "copilot/gpt-4.1"}),
            json!({"kind": 2, "k": ["requests", 0, "response"], "v": ["w"], "i": 1}),
            json!({"kind": 3, "k": ["title"]}),
            json!({"kind": 2, "k": ["pending"], "v": [1]}),
        ]);
        assert_eq!(
            doc,
            json!({
                "requests": [
                    {"requestId": "a", "response": ["x", "w"]},
                    {"requestId": "b", "modelId": "copilot/gpt-4.1"}
                ],
                "pending": [1]
            })
        );
        assert_eq!(report.records, 7);
        assert!(report.malformed.is_empty());
    }

    #[test]
    fn an_entry_that_does_not_apply_is_malformed_and_the_rest_applied() {
        let (doc, report) = replayed(&[
            json!({"kind": 0, "v": {"requests": []}}),
            json!({"kind": 1, "k": ["requests", 5, "x"], "v": 1}),
            json!({"kind": 9, "k": []}),
            json!({"kind": 1, "k": ["customTitle"], "v": "named"}),
        ]);
        assert_eq!(doc, json!({"requests": [], "customTitle": "named"}));
        assert_eq!(report.malformed.len(), 2);
        assert_eq!(report.malformed[0].line, Some(2));
    }

    #[test]
    fn a_line_still_being_written_waits_and_a_log_without_a_start_is_refused() {
        let mut report = FileReport::default();
        let bytes = b"{\"kind\":0,\"v\":{\"requests\":[]}}\n{\"kind\":1,\"k\":[\"cu";
        let (_, end) = replay(bytes, Path::new("s.jsonl"), &mut report).unwrap();
        assert_eq!(end, 31);
        assert!(report.malformed.is_empty());
        let err = replay(
            b"{\"kind\":1,\"k\":[\"a\"],\"v\":1}\n",
            Path::new("s.jsonl"),
            &mut report,
        )
        .unwrap_err();
        assert!(err.to_string().contains("no first entry"), "{err}");
    }
}
