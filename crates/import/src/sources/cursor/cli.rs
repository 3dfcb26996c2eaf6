//! Cursor's command-line agent (`cursor-agent`): one SQLite database per conversation,
//! `~/.cursor/chats/<hash of the folder>/<conversation id>/store.db`.
//!
//! Its `meta` table holds, under key `0`, the conversation's record as hex-encoded JSON
//! (`agentId`, `name`, `createdAt`, `lastUsedModel`, `latestRootBlobId`); its `blobs`
//! table holds content-addressed blobs (`id` the SHA-256 of `data`, in hex): a message is
//! a JSON object (`{"role": …, "content": …}`, as the AI SDK writes them), and a tree node
//! lists its children as repeated `0x0A 0x20` + 32 hash bytes, a message of its own
//! possibly after them. The conversation is the tree under `latestRootBlobId`, read in
//! order; blobs outside it (earlier states) are not read.
//!
//! Mapping:
//! - a user message's words are what its `<user_query>` tags hold (Cursor wraps them with
//!   context: `<timestamp>`, `<system_reminder>` …); a user message of context alone
//!   (`<user_info>`, `<git_status>` …) is not one the user wrote and is counted skipped;
//!   the first `Workspace Path:` line of the context is the session's folder; a system
//!   message is skipped too;
//! - an assistant message's `text`, `reasoning` (its signature kept; `redacted-reasoning`
//!   as a reasoning part holding the block) and `tool-call` blocks (`toolCallId`,
//!   `toolName`, `args`) become its parts, the model is the one its reasoning names
//!   (`providerOptions.cursor.modelName`), else the conversation's `lastUsedModel`;
//! - a `tool` message's `tool-result` blocks settle the calls they name (`isError` fails
//!   one), their text the output;
//! - the title is the conversation's `name`, unless it is Cursor's placeholder (`New
//!   Agent`);
//! - no usage is kept, and no message has a time: each takes the conversation's
//!   `createdAt` (the file's modification time is when it was last active). A message is
//!   keyed by its blob and how many times that blob came before it in the conversation
//!   (the same words twice are one blob), so a conversation read again as it grows stores
//!   each message once.

use std::collections::{HashMap, HashSet};
use std::path::Path;

use scribe_message::{Part, Role, ToolState};
use serde_json::Value;

use super::super::{
    FileReport, Recorded, Unit, array_of, content_text, message, numbered, open_source_db,
    reasoning, settle_call, str_of, text, tool,
};
use super::SRC;
use crate::error::{ImportError, Result};
use crate::record::{Batch, MessageRec, Resume, SessionRec, TitleRank};

/// The database's file name.
pub(super) const DB: &str = "store.db";

/// The name Cursor gives a conversation before it names it.
const PLACEHOLDER_NAME: &str = "New Agent";

/// A tree node's child reference: field 1, 32 bytes.
const CHILD_TAG: [u8; 2] = [0x0a, 0x20];

/// How deep a tree is followed (Cursor's are a few levels; a cycle or a hostile file stops
/// here).
const MAX_DEPTH: usize = 64;

/// How many visits a tree may take per blob the database holds (a blob listed twice is
/// visited twice; a hostile file listing each node's child many times would otherwise
/// take forever).
const VISITS_PER_BLOB: usize = 8;

/// Reads the conversation of the database at `unit.path` into `out`.
pub(super) fn read(unit: &Unit<'_>, out: &mut Batch, report: &mut FileReport) -> Result<Resume> {
    let path = unit.path;
    let conn = open_source_db(path)?;
    let db = |source| ImportError::source_db(path, source);
    let meta: Option<String> = {
        use rusqlite::OptionalExtension;
        conn.query_row(
            "SELECT CAST(value AS TEXT) FROM meta WHERE key = '0'",
            [],
            |r| r.get::<_, Option<String>>(0),
        )
        .optional()
        .map_err(db)?
        .flatten()
    };
    let Some(meta) = meta else {
        // A conversation Cursor has not recorded yet.
        report.skip("conversation:empty");
        return Ok(Resume::default());
    };
    let Some(meta) = decode_meta(&meta) else {
        report.malformed(path, None, "the conversation's record (meta 0) is not JSON");
        return Ok(Resume::default());
    };
    let Some(id) = str_of(&meta, "agentId")
        .filter(|i| !i.is_empty())
        .map(str::to_owned)
        .or_else(|| {
            path.parent()
                .and_then(Path::file_name)
                .map(|n| n.to_string_lossy().into_owned())
        })
    else {
        report.malformed(path, None, "a conversation without an id");
        return Ok(Resume::default());
    };
    let Some(root) = str_of(&meta, "latestRootBlobId").filter(|r| !r.is_empty()) else {
        // Opened, never written to.
        report.skip("conversation:empty");
        return Ok(Resume::default());
    };
    let mut blobs: HashMap<String, Vec<u8>> = HashMap::new();
    {
        let mut stmt = conn.prepare("SELECT id, data FROM blobs").map_err(db)?;
        let mut rows = stmt.query([]).map_err(db)?;
        while let Some(row) = rows.next().map_err(db)? {
            use rusqlite::types::ValueRef;
            let (Ok(ValueRef::Text(key)), Ok(ValueRef::Blob(data) | ValueRef::Text(data))) =
                (row.get_ref(0), row.get_ref(1))
            else {
                continue;
            };
            blobs.insert(
                String::from_utf8_lossy(key).to_ascii_lowercase(),
                data.to_vec(),
            );
        }
    }
    let messages = conversation(&blobs, root, path, report);
    drop(blobs);
    // Its start: its own, else the one an earlier import gave it (the file's time moves).
    let recorded = Recorded::of(unit, SRC, &id)?;
    let created = super::when(meta.get("createdAt"))
        .or(recorded.start)
        .unwrap_or(unit.mtime_ms);
    if unit
        .since
        .is_some_and(|since| unit.mtime_ms.max(created) < since)
    {
        return Ok(Resume::default());
    }
    let mut rec = SessionRec::new(&id, created);
    rec.fingerprint = Some(Recorded::fingerprint(created, ""));
    rec.updated_at = unit.mtime_ms.max(created);
    rec.model = str_of(&meta, "lastUsedModel")
        .filter(|m| !m.trim().is_empty())
        .map(str::to_owned);
    rec.title = str_of(&meta, "name")
        .map(str::trim)
        .filter(|n| !n.is_empty() && *n != PLACEHOLDER_NAME)
        .map(|n| (n.to_owned(), TitleRank::Source));
    transcript(&mut rec, messages, created, out, report, path);
    out.sessions.push(rec);
    // Read whole again when it changes (its size and time, its -wal's too, tell).
    Ok(Resume::default())
}

/// The record under `meta` key `0`: hex-encoded JSON (JSON as it is, too).
fn decode_meta(value: &str) -> Option<Value> {
    let value = value.trim();
    if value.starts_with('{') {
        return serde_json::from_str(value).ok();
    }
    if !value.len().is_multiple_of(2) {
        return None;
    }
    let bytes: Option<Vec<u8>> = (0..value.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(value.get(i..i + 2)?, 16).ok())
        .collect();
    serde_json::from_slice(&bytes?).ok()
}

/// The messages of the tree under `root`, in order, each with its key (its blob and how
/// many times that blob came before it).
fn conversation(
    blobs: &HashMap<String, Vec<u8>>,
    root: &str,
    path: &Path,
    report: &mut FileReport,
) -> Vec<(String, Value)> {
    let mut found = Vec::new();
    let mut seen: HashMap<String, usize> = HashMap::new();
    let mut tree = Tree {
        blobs,
        on_path: HashSet::new(),
        visits_left: blobs.len().saturating_mul(VISITS_PER_BLOB) + 1,
        path,
    };
    tree.walk(
        &root.to_ascii_lowercase(),
        0,
        &mut |blob, message| {
            let n = seen.entry(blob.to_owned()).or_default();
            found.push((format!("{blob}#{n}"), message));
            *n += 1;
        },
        report,
    );
    found
}

/// A walk of a conversation's tree.
struct Tree<'a> {
    blobs: &'a HashMap<String, Vec<u8>>,
    /// The nodes from the root to the one being visited (a node under itself is a cycle).
    on_path: HashSet<String>,
    /// Visits left before the walk gives up (see [`VISITS_PER_BLOB`]).
    visits_left: usize,
    path: &'a Path,
}

impl Tree<'_> {
    /// Visits the blob `id`: a message is handed to `visit`; a node's children are visited
    /// in order, then the message after them, if any.
    fn walk(
        &mut self,
        id: &str,
        depth: usize,
        visit: &mut dyn FnMut(&str, Value),
        report: &mut FileReport,
    ) {
        let path = self.path;
        let Some(data) = self.blobs.get(id) else {
            report.skip("blob:missing");
            return;
        };
        if self.visits_left == 0 {
            return;
        }
        self.visits_left -= 1;
        if self.visits_left == 0 {
            report.malformed(
                path,
                None,
                "the conversation's tree lists its blobs too often",
            );
            return;
        }
        if depth > MAX_DEPTH || !self.on_path.insert(id.to_owned()) {
            report.malformed(path, None, format!("blob {id} is part of itself"));
            return;
        }
        let mut rest = data.as_slice();
        while rest.len() >= 34 && rest.starts_with(&CHILD_TAG) {
            let child: String = rest[2..34].iter().map(|b| format!("{b:02x}")).collect();
            self.walk(&child, depth + 1, visit, report);
            rest = &rest[34..];
        }
        let trimmed = rest.trim_ascii_start();
        if let Some(start) = trimmed.iter().position(|&b| b == b'{') {
            match serde_json::from_slice::<Value>(&trimmed[start..]) {
                Ok(message @ Value::Object(_)) if message.get("role").is_some() => {
                    visit(id, message);
                }
                Ok(_) => report.skip("blob:not-a-message"),
                Err(err) => report.malformed(path, None, format!("blob {id}: {err}")),
            }
        } else if !trimmed.is_empty() {
            report.skip("blob:unknown");
        }
        self.on_path.remove(id);
    }
}

/// The conversation's messages into `out`: the folder from the context Cursor adds to
/// `rec`.
fn transcript(
    rec: &mut SessionRec,
    messages: Vec<(String, Value)>,
    at: i64,
    out: &mut Batch,
    report: &mut FileReport,
    path: &Path,
) {
    let sid = rec.external_id.clone();
    let mut calls: HashMap<String, (usize, usize)> = HashMap::new();
    for (blob, m) in messages {
        report.records += 1;
        let key = format!("{sid}:{blob}");
        match str_of(&m, "role") {
            Some("user") => {
                let said = content_text(m.get("content").unwrap_or(&Value::Null));
                if rec.directory.is_none() {
                    rec.directory = workspace_path(&said);
                }
                match user_query(&said) {
                    Some(query) => {
                        let mut msg = message(SRC, &key, Role::User, at);
                        msg.parts = numbered(SRC, &key, vec![text(query, false)], at);
                        out.messages.push(MessageRec::new(sid.clone(), msg));
                    }
                    None if said.trim_start().starts_with('<') => report.skip("message:context"),
                    None if said.trim().is_empty() => report.skip("message:empty"),
                    None => {
                        let mut msg = message(SRC, &key, Role::User, at);
                        msg.parts = numbered(SRC, &key, vec![text(said.trim(), false)], at);
                        out.messages.push(MessageRec::new(sid.clone(), msg));
                    }
                }
            }
            Some("assistant") => {
                let (parts, model, ids) = reply(&m, at, report);
                if parts.is_empty() {
                    report.skip("message:empty");
                    continue;
                }
                let this = out.messages.len();
                for (part, call) in ids {
                    calls.insert(call, (this, part));
                }
                let mut msg = message(SRC, &key, Role::Assistant, at);
                msg.model = model.or_else(|| rec.model.clone());
                msg.parts = numbered(SRC, &key, parts, at);
                out.messages.push(MessageRec::new(sid.clone(), msg));
            }
            Some("tool") => {
                for block in blocks(&m) {
                    if str_of(block, "type") != Some("tool-result") {
                        report.skip(format!("tool:{}", str_of(block, "type").unwrap_or("")));
                        continue;
                    }
                    let call = str_of(block, "toolCallId").unwrap_or("");
                    let Some(&place) = calls.get(call) else {
                        report.skip("tool-result:without-call");
                        continue;
                    };
                    let output = match block.get("result") {
                        Some(Value::String(s)) => s.clone(),
                        Some(v @ Value::Array(_)) => content_text(v),
                        Some(Value::Null) | None => String::new(),
                        Some(other) => other.to_string(),
                    };
                    let failed = block.get("isError").and_then(Value::as_bool) == Some(true);
                    settle_call(&mut out.messages, place, output, failed, at);
                }
            }
            Some(other) => report.skip(format!("message:{other}")),
            None => report.malformed(path, None, "a message without a role"),
        }
    }
}

/// An assistant message's parts, the model its reasoning names, and its calls (part index,
/// call id).
fn reply(
    m: &Value,
    at: i64,
    report: &mut FileReport,
) -> (Vec<Part>, Option<String>, Vec<(usize, String)>) {
    let mut parts = Vec::new();
    let mut model = None;
    let mut calls = Vec::new();
    if let Some(said) = m.get("content").and_then(Value::as_str) {
        if !said.trim().is_empty() {
            parts.push(text(said, false));
        }
        return (parts, model, calls);
    }
    for block in blocks(m) {
        match str_of(block, "type").unwrap_or("") {
            "text" => {
                if let Some(said) = str_of(block, "text").filter(|t| !t.trim().is_empty()) {
                    parts.push(text(said, false));
                }
            }
            "reasoning" => {
                if model.is_none() {
                    model = block
                        .pointer("/providerOptions/cursor/modelName")
                        .and_then(Value::as_str)
                        .filter(|m| !m.trim().is_empty())
                        .map(str::to_owned);
                }
                let signature = str_of(block, "signature")
                    .filter(|s| !s.is_empty())
                    .map(str::to_owned);
                parts.push(reasoning(
                    str_of(block, "text").unwrap_or(""),
                    signature,
                    None,
                ));
            }
            "redacted-reasoning" => parts.push(reasoning("", None, Some(block.clone()))),
            "tool-call" => {
                let id = str_of(block, "toolCallId").unwrap_or("");
                let name = str_of(block, "toolName").unwrap_or("");
                let input = match block.get("args") {
                    Some(Value::String(s)) => {
                        serde_json::from_str(s).unwrap_or_else(|_| Value::String(s.clone()))
                    }
                    Some(v) if !v.is_null() => v.clone(),
                    _ => Value::Object(serde_json::Map::new()),
                };
                calls.push((parts.len(), id.to_owned()));
                parts.push(tool(id, name, input, ToolState::Running { started_at: at }));
            }
            "" => report.skip("content:untyped"),
            other => report.skip(format!("content:{other}")),
        }
    }
    (parts, model, calls)
}

/// A message's content blocks (none when its content is text).
fn blocks(m: &Value) -> &[Value] {
    array_of(m, "content")
}

/// What the `<user_query>` tags of a user message hold (trimmed), when it has them: the
/// user's own words, apart from the context Cursor wraps them in.
fn user_query(said: &str) -> Option<String> {
    let (_, rest) = said.split_once("<user_query>")?;
    let inner = rest.rsplit_once("</user_query>").map_or(rest, |(q, _)| q);
    let inner = inner.trim();
    (!inner.is_empty()).then(|| inner.to_owned())
}

/// The folder a context message's `Workspace Path:` line names.
fn workspace_path(said: &str) -> Option<String> {
    said.lines()
        .find_map(|l| l.trim().strip_prefix("Workspace Path:"))
        .map(str::trim)
        .filter(|p| !p.is_empty())
        .map(str::to_owned)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_record_is_hex_encoded_json_or_json() {
        let json = r#"{"agentId":"a","name":"n"}"#;
        let hex: String = json.bytes().map(|b| format!("{b:02x}")).collect();
        assert_eq!(decode_meta(&hex).unwrap()["agentId"], "a");
        assert_eq!(decode_meta(json).unwrap()["name"], "n");
        assert!(decode_meta("7b2").is_none());
        assert!(decode_meta("zz").is_none());
        assert!(decode_meta("").is_none());
    }

    #[test]
    fn the_users_words_are_the_query_apart_from_cursors_context() {
        assert_eq!(
            user_query("<timestamp>Monday</timestamp>\n<user_query>\nfix it\n</user_query>"),
            Some("fix it".to_owned())
        );
        assert_eq!(
            user_query("<user_query>\nshow <user_query> tags\n</user_query>"),
            Some("show <user_query> tags".to_owned())
        );
        assert_eq!(user_query("<user_info>x</user_info>"), None);
        assert_eq!(user_query("<user_query>  </user_query>"), None);
        assert_eq!(
            workspace_path(
                "<user_info>\nOS Version: linux\nWorkspace Path: /home/me/a b\n</user_info>"
            ),
            Some("/home/me/a b".to_owned())
        );
        assert_eq!(workspace_path("<user_info>\n</user_info>"), None);
    }
}
