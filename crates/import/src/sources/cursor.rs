//! Cursor (the editor's chat and agent, its "composer"): `User/globalStorage/state.vscdb`,
//! the SQLite key-value database Cursor keeps every conversation in, whatever folder it
//! was held in. Its `cursorDiskKV` table holds a conversation under
//! `composerData:<composer id>` (its name, times, model and the list of its messages'
//! headers, `fullConversationHeadersOnly`) and each message under
//! `bubbleId:<composer id>:<bubble id>`; conversations of older builds keep their
//! messages inline (`conversation`, or `conversationMap` beside the headers). Only those
//! keys are read: the database holds secrets too (sign-in tokens in `ItemTable`,
//! encryption keys in a conversation's record), which Scribe never reads or stores.
//!
//! Where: `~/.config/Cursor/User` (`$XDG_CONFIG_HOME`), `~/Library/Application
//! Support/Cursor/User` on macOS, `%APPDATA%\Cursor\User` on Windows; that folder, its
//! `globalStorage` folder or the database itself may be given. The folder a conversation
//! was held in comes from the workspace databases beside it
//! (`workspaceStorage/<hash>/state.vscdb`, whose `composer.composerData` lists the
//! workspace's conversations, and `workspace.json`, which names its folder).
//!
//! Mapping, one Scribe message per Cursor message (a "bubble"):
//! - `type` 1 is the user's: its `text` (the text of its rich-text document,
//!   `richText`, when that is all it has);
//! - `type` 2 is Cursor's: its `thinking` a reasoning part, its `text` a text part, its
//!   `toolFormerData` a tool part: the call's `name` and arguments (`rawArgs`, else
//!   `params`, JSON kept as text), settled by its `status` (`completed`; `error`, and a
//!   call cancelled or refused, fail it) with its `result`: the text under `output`,
//!   `contents`, `content`, `text` or `error` when the result is an object holding one
//!   (the rest kept as the call's metadata), else the result as written. A call with
//!   neither status nor result was never settled and is kept running;
//! - usage: a bubble's `tokenCount` (`inputTokens`, `outputTokens`) is one model call's.
//!   Cursor keeps no cache split, so an estimated cost prices all input as uncached (an
//!   upper bound where the provider cached), and recent builds keep no counts at all. A
//!   conversation whose record has `usageData` (per model, `costInCents` and `amount`, the
//!   requests Cursor counted) has that as its cost, reported, and its requests as its
//!   model calls; its tokens, if any, are the session's then, not its messages' (one
//!   figure for the whole). Without either, a conversation has no usage recorded. The model is the user message's
//!   `modelInfo.modelName` for the replies after it, else the conversation's
//!   `modelConfig.modelName`, as Cursor names it (`claude-4.5-sonnet`, `default` for its
//!   automatic choice; the pricer reads Cursor's Claude names, `scribe_import::pricing`);
//! - times: a bubble's `createdAt` (ISO text, or epoch ms), else its
//!   `timingInfo.clientRpcSendTime`; a bubble with neither takes the time of the one before
//!   it (the conversation's `createdAt` for the first);
//! - the title is the conversation's `name` (Cursor's, or the user's after a rename: the
//!   database does not tell them apart); a conversation with no messages (opened and
//!   closed) is not a session;
//! - a conversation is read again only when its record's row or size, or its bubbles'
//!   count, total size or newest row changed (Cursor rewrites a row to change it, which
//!   gives it a new row id unless it was the newest; the size catches most of the rest).
//!   None of that reads a record's content: a rewrite that keeps the newest row's id and
//!   every size (a rename to a name of the same length, with nothing else changed) waits
//!   for the conversation's next change.
//!
//! Cursor's command-line agent keeps each conversation in a database of its own under
//! `~/.cursor/chats` instead: see `cursor/cli.rs` for how it is read.
//!
//! Not read: the chats of Cursor's first builds (`workbench.panel.aichat…` in the
//! workspace databases' `ItemTable`), sub-composers (`subComposerIds`) as sessions of
//! their own, code-block and checkpoint records, and the summary Cursor keeps of a long
//! conversation (`latestConversationSummary`). A conversation Cursor cut short (a message
//! edited and sent again drops the ones after it) keeps in Scribe what an earlier import
//! stored of it.

mod cli;

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use scribe_message::{Part, Role, TokenUsage, ToolState};
use serde_json::Value;

use super::{
    Batches, FileReport, Importer, Recorded, Times, Unit, editor_state, find_db, int_of, message,
    numbered, open_source_db, reasoning, rows, str_of, text, tool, uri_directory, walk,
};
use crate::Source;
use crate::env::Env;
use crate::error::{ImportError, Result};
use crate::record::{Batch, MessageRec, Resume, SessionRec, SessionUsage, TitleRank};
use crate::time;

const SRC: Source = Source::Cursor;

/// The database's file name (global and per workspace).
const DB: &str = "state.vscdb";

/// The table of conversations and their messages.
const TABLE: &str = "cursorDiskKV";

/// A user's message.
const USER: i64 = 1;
/// Cursor's.
const ASSISTANT: i64 = 2;

/// The fields of a tool's result object that hold its text, in order of preference.
const OUTPUT_FIELDS: [&str; 5] = ["output", "contents", "content", "text", "error"];

/// The Cursor importer.
#[derive(Debug, Clone, Copy)]
pub struct Cursor;

impl Importer for Cursor {
    fn source(&self) -> Source {
        SRC
    }

    /// The editor's `User` folder on this platform, and the command-line agent's
    /// `~/.cursor/chats`.
    fn default_roots(&self, env: &Env) -> Vec<PathBuf> {
        let mut roots: Vec<PathBuf> = env.editor_user_dir("Cursor").into_iter().collect();
        roots.extend(env.home_join(".cursor/chats"));
        roots
    }

    /// The editor's global database under `root` (Cursor's `User` folder, the folder
    /// above it, its `globalStorage` folder, or the database itself); else the
    /// command-line agent's conversations (`store.db`) under it (`~/.cursor`, its `chats`
    /// folder, a folder of one workspace's conversations, or one conversation's).
    fn discover(&self, root: &Path, out: &mut Vec<PathBuf>) -> Result<()> {
        let editor = [
            "globalStorage/state.vscdb",
            "User/globalStorage/state.vscdb",
            DB,
        ];
        if find_db(root, &editor, out) {
            return Ok(());
        }
        if root.join("globalStorage").is_dir() || root.join("User").is_dir() {
            // The editor's folder, without its database yet: nothing of the agent's.
            return Ok(());
        }
        let chats = root.join("chats");
        let root = if chats.is_dir() { &chats } else { root };
        walk(root, out, |p| p.file_name().is_some_and(|n| n == cli::DB))
    }

    /// The editor's database itself (its folder is watched, not the tree: the rest of
    /// Cursor's `User` folder, its file history and workspace state, changes all the time
    /// and holds nothing of a conversation); the agent's `chats` folder as it is.
    fn watch_root(&self, root: &Path) -> PathBuf {
        [
            "globalStorage/state.vscdb",
            "User/globalStorage/state.vscdb",
        ]
        .iter()
        .map(|rel| root.join(rel))
        .find(|db| db.is_file())
        .unwrap_or_else(|| root.to_owned())
    }

    fn companions(&self, path: &Path) -> Vec<PathBuf> {
        vec![super::wal_of(path)]
    }

    fn read(&self, unit: &Unit<'_>, out: &mut Batch, report: &mut FileReport) -> Result<Resume> {
        let path = unit.path;
        if path.file_name().is_some_and(|n| n == cli::DB) {
            return cli::read(unit, out, report);
        }
        let conn = open_source_db(path)?;
        let db = |source| ImportError::source_db(path, source);
        // Read statement by statement, not from one snapshot: a database Cursor keeps in
        // rollback-journal mode is then held under SQLite's shared lock only while one
        // record is read, never for the whole import. Conversations are apart, and one
        // that changes while it is read is read again by the next import (its
        // fingerprint, below, is taken before it).
        conn.execute_batch("COMMIT").map_err(db)?;
        let tables = rows(
            &conn,
            "SELECT name FROM sqlite_master WHERE type = 'table' AND name IN (?1, 'ItemTable')",
            [TABLE],
        )
        .map_err(db)?;
        let has = |name: &str| tables.iter().any(|t| str_of(t, "name") == Some(name));
        if !has(TABLE) && has("ItemTable") {
            // A build from before conversations were kept here.
            return Ok(Resume::default());
        }
        // The conversations' keys, rows and sizes only: none of their content is read
        // (a size is in the row's header), so a database whose conversations did not
        // change costs an index scan and a look at each row.
        let mut composers = rows(
            &conn,
            "SELECT rowid AS row, substr(key, 14) AS id, octet_length(value) AS bytes \
             FROM cursorDiskKV WHERE key >= 'composerData:' AND key < 'composerData;'",
            [],
        )
        .map_err(db)?;
        // By id: a conversation's id never changes, so a read that goes on after a full
        // batch neither skips a conversation nor reads one twice.
        fn order_of(s: &Value) -> (f64, &str) {
            (0.0, str_of(s, "id").unwrap_or(""))
        }
        let mut batches = Batches::new(unit, &mut composers, order_of);
        let mut folders: Option<HashMap<String, String>> = None;
        while let Some(s) = batches.next(&composers, out.messages.len()) {
            let Some(id) = str_of(s, "id").filter(|id| !id.is_empty()) else {
                report.malformed(path, None, "a conversation without an id");
                continue;
            };
            let (low, high) = (format!("bubbleId:{id}:"), format!("bubbleId:{id};"));
            let seen = rows(
                &conn,
                "SELECT count(*) AS n, coalesce(max(rowid), 0) AS last, \
                 coalesce(sum(octet_length(value)), 0) AS bytes \
                 FROM cursorDiskKV WHERE key >= ?1 AND key < ?2",
                [&low, &high],
            )
            .map_err(db)?;
            let seen = seen.first().unwrap_or(&Value::Null);
            let fingerprint = format!(
                "{}:{}:{}:{}:{}",
                int_of(s, "row"),
                int_of(s, "bytes"),
                int_of(seen, "n"),
                int_of(seen, "last"),
                int_of(seen, "bytes"),
            );
            let recorded = Recorded::of(unit, SRC, id)?;
            if recorded.unchanged(&fingerprint) {
                continue;
            }
            let Some(bytes) = value(&conn, &format!("composerData:{id}")).map_err(db)? else {
                // Deleted since it was listed: the next import will not list it.
                continue;
            };
            let composer = match serde_json::from_slice::<Value>(&bytes) {
                Ok(c @ Value::Object(_)) => c,
                Ok(_) => {
                    report.malformed(path, None, format!("conversation {id} is not an object"));
                    continue;
                }
                Err(err) => {
                    report.malformed(path, None, format!("conversation {id}: {err}"));
                    continue;
                }
            };
            drop(bytes);
            // Its start: its own, else the one an earlier import gave it, else its last
            // change (never the file's time, which moves with every other conversation).
            let created = when(composer.get("createdAt"))
                .or(recorded.start)
                .or_else(|| when(composer.get("lastUpdatedAt")))
                .unwrap_or(unit.mtime_ms);
            let updated = when(composer.get("lastUpdatedAt"))
                .unwrap_or(created)
                .max(created);
            if unit.since.is_some_and(|since| updated < since) {
                continue;
            }
            let bubbles = bubbles(&conn, &composer, id, path, report).map_err(db)?;
            if bubbles.is_empty() {
                report.skip("conversation:empty");
                continue;
            }
            let folders = folders.get_or_insert_with(|| workspace_folders(path));
            let mut rec = session(&composer, id, created, updated);
            rec.directory = folders.get(id).cloned();
            rec.fingerprint = Some(Recorded::fingerprint(created, &fingerprint));
            let first = out.messages.len();
            let last_at = transcript(&rec, &composer, bubbles, out, report);
            rec.updated_at = rec.updated_at.max(last_at);
            if let Some((cost, requests)) = cursor_cost(&composer) {
                // Cursor's own figure for the conversation: the usage goes to the session
                // (as Hermes's and Goose's do), its messages keep none of their own.
                let mut tokens = TokenUsage::default();
                let mut calls = 0;
                for m in &mut out.messages[first..] {
                    tokens += std::mem::take(&mut m.message.usage);
                    calls += std::mem::take(&mut m.api_calls);
                }
                rec.usage_total = Some(SessionUsage {
                    tokens,
                    api_calls: requests.max(calls),
                    reported_cost: Some(cost),
                    model: rec.model.clone(),
                    cost_usd: 0.0,
                    cost_flags: 0,
                });
            }
            out.sessions.push(rec);
        }
        Ok(batches.resume())
    }
}

/// A time: epoch milliseconds (or seconds), or ISO text.
fn when(v: Option<&Value>) -> Option<i64> {
    time::of_json(v?)
}

/// The value stored under `key`, as bytes (text or blob alike); `None` when there is none.
fn value(conn: &rusqlite::Connection, key: &str) -> rusqlite::Result<Option<Vec<u8>>> {
    use rusqlite::OptionalExtension;
    use rusqlite::types::ValueRef;
    conn.prepare_cached("SELECT value FROM cursorDiskKV WHERE key = ?1")?
        .query_row([key], |r| {
            Ok(match r.get_ref(0)? {
                ValueRef::Text(t) | ValueRef::Blob(t) => t.to_vec(),
                _ => Vec::new(),
            })
        })
        .optional()
}

/// The conversation's messages, in order, with their ids: the headers' bubbles (inline in
/// `conversationMap`, else each under its own key), or the inline `conversation` of older
/// builds. A header whose bubble is gone is counted skipped; one that is not JSON is
/// reported malformed.
fn bubbles(
    conn: &rusqlite::Connection,
    composer: &Value,
    id: &str,
    path: &Path,
    report: &mut FileReport,
) -> rusqlite::Result<Vec<(String, Value)>> {
    let list = |key: &str| {
        composer
            .get(key)
            .and_then(Value::as_array)
            .filter(|a| !a.is_empty())
    };
    let mut found = Vec::new();
    if let Some(headers) = list("fullConversationHeadersOnly") {
        let inline = composer.get("conversationMap");
        for header in headers {
            let Some(bubble_id) = str_of(header, "bubbleId").filter(|b| !b.is_empty()) else {
                report.malformed(path, None, format!("a message of {id} without an id"));
                continue;
            };
            if let Some(b @ Value::Object(_)) = inline.and_then(|m| m.get(bubble_id)) {
                found.push((bubble_id.to_owned(), b.clone()));
                continue;
            }
            let Some(bytes) = value(conn, &format!("bubbleId:{id}:{bubble_id}"))? else {
                report.skip("bubble:missing");
                continue;
            };
            match serde_json::from_slice::<Value>(&bytes) {
                Ok(b @ Value::Object(_)) => found.push((bubble_id.to_owned(), b)),
                // Cursor writes `null` for a message it has let go of.
                Ok(Value::Null) => report.skip("bubble:null"),
                Ok(_) => report.malformed(
                    path,
                    None,
                    format!("message {bubble_id} of {id} is not an object"),
                ),
                Err(err) => {
                    report.malformed(path, None, format!("message {bubble_id} of {id}: {err}"));
                }
            }
        }
    } else if let Some(inline) = list("conversation") {
        for (n, b) in inline.iter().enumerate() {
            if !b.is_object() {
                report.malformed(path, None, format!("a message of {id} is not an object"));
                continue;
            }
            let bubble_id = str_of(b, "bubbleId")
                .filter(|b| !b.is_empty())
                .map_or_else(|| format!("#{n}"), str::to_owned);
            found.push((bubble_id, b.clone()));
        }
    }
    Ok(found)
}

/// The session of conversation `id`.
fn session(composer: &Value, id: &str, created: i64, updated: i64) -> SessionRec {
    let nonblank = |v: &&str| !v.trim().is_empty();
    let config = composer.get("modelConfig").filter(|c| c.is_object());
    let mut rec = SessionRec::new(id, created);
    rec.updated_at = updated;
    rec.model = config
        .and_then(|c| str_of(c, "modelName"))
        .filter(nonblank)
        .map(str::to_owned);
    rec.model_config = config.cloned();
    rec.title = str_of(composer, "name")
        .filter(nonblank)
        .map(|name| (name.trim().to_owned(), TitleRank::Source));
    rec
}

/// What Cursor says a conversation cost (US dollars) and how many requests it made: its
/// `usageData`, a `{"costInCents", "amount"}` per model; `None` when it keeps none.
fn cursor_cost(composer: &Value) -> Option<(f64, i64)> {
    let per_model = composer.get("usageData")?.as_object()?;
    let (mut cents, mut requests, mut any) = (0.0, 0_i64, false);
    for entry in per_model.values() {
        let cost = entry
            .get("costInCents")
            .and_then(Value::as_f64)
            .filter(|c| c.is_finite() && *c >= 0.0);
        let amount = entry
            .get("amount")
            .and_then(Value::as_i64)
            .filter(|n| *n >= 0);
        if cost.is_none() && amount.is_none() {
            continue;
        }
        any = true;
        cents += cost.unwrap_or(0.0);
        requests = requests.saturating_add(amount.unwrap_or(0));
    }
    any.then_some((cents / 100.0, requests))
}

/// The messages of one conversation into `out`; returns the time of the last.
fn transcript(
    rec: &SessionRec,
    composer: &Value,
    bubbles: Vec<(String, Value)>,
    out: &mut Batch,
    report: &mut FileReport,
) -> i64 {
    let sid = rec.external_id.as_str();
    let mut times = Times::new(when(composer.get("createdAt")).unwrap_or(rec.created_at));
    let mut model = rec.model.clone();
    for (bubble_id, b) in bubbles {
        report.records += 1;
        let own = when(b.get("createdAt"))
            .or_else(|| when(b.pointer("/timingInfo/clientRpcSendTime")).filter(|&ms| ms > 0));
        let at = times.note(own);
        let key = format!("{sid}:{bubble_id}");
        let kind = b.get("type").and_then(Value::as_i64);
        let (role, parts) = match kind {
            Some(USER) => {
                if let Some(name) = b
                    .pointer("/modelInfo/modelName")
                    .and_then(Value::as_str)
                    .filter(|m| !m.trim().is_empty())
                {
                    model = Some(name.to_owned());
                }
                (Role::User, user_parts(&b))
            }
            Some(ASSISTANT) => (Role::Assistant, reply_parts(&b, &bubble_id, at)),
            Some(other) => {
                report.skip(format!("bubble:type-{other}"));
                continue;
            }
            None => {
                report.skip("bubble:untyped");
                continue;
            }
        };
        if parts.is_empty() {
            report.skip("bubble:empty");
            continue;
        }
        let mut m = message(SRC, &key, role, at);
        let mut calls = 0;
        if role == Role::Assistant {
            m.model.clone_from(&model);
            let count = b.get("tokenCount").unwrap_or(&Value::Null);
            m.usage = TokenUsage {
                input: int_of(count, "inputTokens"),
                output: int_of(count, "outputTokens"),
                ..TokenUsage::default()
            };
            if m.usage.total() > 0 {
                calls = 1;
            }
        }
        m.parts = numbered(SRC, &key, parts, at);
        let mut rec = MessageRec::new(sid.to_owned(), m);
        rec.api_calls = calls;
        out.messages.push(rec);
    }
    times.last()
}

/// A user's message: its text, else the text of its rich-text document.
fn user_parts(b: &Value) -> Vec<Part> {
    let said = str_of(b, "text")
        .filter(|t| !t.trim().is_empty())
        .map(str::to_owned)
        .or_else(|| rich_text(b.get("richText")?));
    said.into_iter().map(|t| text(t, false)).collect()
}

/// The text of a rich-text (Lexical) document, kept as JSON text or an object: its text
/// nodes joined, a line per paragraph.
fn rich_text(doc: &Value) -> Option<String> {
    fn walk(node: &Value, out: &mut String) {
        if let Some(t) = str_of(node, "text") {
            out.push_str(t);
        }
        if let Some(children) = node.get("children").and_then(Value::as_array) {
            for child in children {
                walk(child, out);
            }
            if str_of(node, "type") == Some("paragraph") {
                out.push('\n');
            }
        }
    }
    let parsed;
    let doc = match doc {
        Value::String(s) => {
            parsed = serde_json::from_str::<Value>(s).ok()?;
            &parsed
        }
        other => other,
    };
    let mut said = String::new();
    walk(doc.get("root").unwrap_or(doc), &mut said);
    let said = said.trim();
    (!said.is_empty()).then(|| said.to_owned())
}

/// Cursor's message: its reasoning, text and tool call, in that order.
fn reply_parts(b: &Value, bubble_id: &str, at: i64) -> Vec<Part> {
    let mut parts = Vec::new();
    let (thought, signature) = match b.get("thinking") {
        Some(Value::String(s)) => (s.as_str(), None),
        Some(t @ Value::Object(_)) => (str_of(t, "text").unwrap_or(""), str_of(t, "signature")),
        _ => ("", None),
    };
    if !thought.trim().is_empty() {
        let signature = signature.filter(|s| !s.is_empty()).map(str::to_owned);
        parts.push(reasoning(thought, signature, None));
    }
    if let Some(said) = str_of(b, "text").filter(|t| !t.trim().is_empty()) {
        parts.push(text(said, false));
    }
    if let Some(call) = b.get("toolFormerData").filter(|c| c.is_object()) {
        parts.push(tool_call(call, bubble_id, at));
    }
    parts
}

/// A `toolFormerData` as a tool part (see the module's mapping).
fn tool_call(call: &Value, bubble_id: &str, at: i64) -> Part {
    let id = str_of(call, "toolCallId")
        .filter(|i| !i.is_empty())
        .unwrap_or(bubble_id);
    let name = match (str_of(call, "name"), call.get("tool")) {
        (Some(name), _) if !name.is_empty() => name.to_owned(),
        (_, Some(Value::Number(n))) => format!("tool {n}"),
        _ => "(unnamed tool)".to_owned(),
    };
    let input = ["rawArgs", "params"]
        .iter()
        .find_map(|key| match call.get(*key)? {
            Value::String(s) if !s.trim().is_empty() => {
                Some(serde_json::from_str(s).unwrap_or_else(|_| Value::String(s.clone())))
            }
            v @ Value::Object(_) => Some(v.clone()),
            _ => None,
        })
        .unwrap_or_else(|| Value::Object(serde_json::Map::new()));
    let result = call.get("result").filter(|r| !r.is_null());
    let (output, metadata) = output(result);
    let status = str_of(call, "status").unwrap_or("");
    let failed = |why: &str| ToolState::Error {
        message: if output.is_empty() {
            why.to_owned()
        } else {
            output.clone()
        },
        started_at: Some(at),
        ended_at: at,
    };
    let state = match status {
        "error" | "failed" => failed("the tool failed"),
        "cancelled" | "canceled" | "aborted" | "rejected" => failed(status),
        "completed" | "success" => completed(output.clone(), metadata, at),
        _ if result.is_some() => completed(output.clone(), metadata, at),
        _ => ToolState::Running { started_at: at },
    };
    tool(id, &name, input, state)
}

fn completed(output: String, metadata: Value, at: i64) -> ToolState {
    ToolState::Completed {
        output,
        title: String::new(),
        metadata,
        started_at: at,
        ended_at: at,
    }
}

/// A tool's result as its text and the rest of it (`null` when nothing is left): the
/// text under the first of [`OUTPUT_FIELDS`] a result object holds, else the result as
/// written (a JSON string's own text).
fn output(result: Option<&Value>) -> (String, Value) {
    let parsed = match result {
        None => return (String::new(), Value::Null),
        Some(Value::String(s)) => match serde_json::from_str::<Value>(s) {
            Ok(v @ (Value::Object(_) | Value::String(_))) => v,
            _ => return (s.clone(), Value::Null),
        },
        Some(other) => other.clone(),
    };
    match parsed {
        Value::String(s) => (s, Value::Null),
        Value::Object(mut map) => {
            let field = OUTPUT_FIELDS
                .iter()
                .find(|f| map.get(**f).is_some_and(Value::is_string));
            match field.and_then(|f| map.remove(*f)) {
                Some(Value::String(said)) => {
                    let rest = if map.is_empty() {
                        Value::Null
                    } else {
                        Value::Object(map)
                    };
                    (said, rest)
                }
                _ => (Value::Object(map).to_string(), Value::Null),
            }
        }
        other => (other.to_string(), Value::Null),
    }
}

/// The folder each conversation was held in, from the workspace databases beside the
/// global one (`../../workspaceStorage/<hash>/`): what each one's `workspace.json` names
/// (its `folder`, or a multi-root workspace's file) for every conversation its
/// `composer.composerData` lists. A workspace that cannot be read is passed over.
fn workspace_folders(global: &Path) -> HashMap<String, String> {
    let mut folders = HashMap::new();
    let Some(storage) = global
        .parent()
        .and_then(Path::parent)
        .map(|user| user.join("workspaceStorage"))
    else {
        return folders;
    };
    let Ok(entries) = std::fs::read_dir(&storage) else {
        return folders;
    };
    let mut dirs: Vec<PathBuf> = entries.filter_map(|e| Some(e.ok()?.path())).collect();
    dirs.sort();
    for dir in dirs {
        let (meta, db) = (dir.join("workspace.json"), dir.join(DB));
        if !db.is_file() {
            continue;
        }
        let folder = std::fs::read(&meta)
            .ok()
            .and_then(|bytes| serde_json::from_slice::<Value>(&bytes).ok())
            .and_then(|w| {
                str_of(&w, "folder")
                    .or_else(|| str_of(&w, "workspace"))
                    .and_then(uri_directory)
            });
        let Some(folder) = folder else { continue };
        let Some(listed) = editor_state(&db, "composer.composerData") else {
            tracing::debug!(path = %db.display(), "a workspace without conversations");
            continue;
        };
        for c in listed
            .get("allComposers")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
        {
            if let Some(id) = str_of(c, "composerId") {
                folders
                    .entry(id.to_owned())
                    .or_insert_with(|| folder.clone());
            }
        }
    }
    folders
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cursors_cost_is_its_usage_data_summed_over_models() {
        let cost = |v: Value| cursor_cost(&serde_json::json!({ "usageData": v }));
        assert_eq!(
            cost(serde_json::json!({
                "default": {"costInCents": 245, "amount": 8},
                "claude-4.5-sonnet": {"costInCents": 100.5, "amount": 2},
                "broken": {"costInCents": -3, "amount": "x"},
                "empty": null
            })),
            Some((3.455, 10))
        );
        // Requests Cursor did not charge for are still its requests.
        assert_eq!(
            cost(serde_json::json!({"default": {"amount": 3}})),
            Some((0.0, 3))
        );
        assert_eq!(cost(serde_json::json!({})), None);
        assert_eq!(cost(serde_json::json!([1])), None);
        assert_eq!(cursor_cost(&serde_json::json!({})), None);
    }
}
