//! Crush (charmbracelet/crush): one SQLite database per project, `crush.db` in the
//! project's data folder (`.crush` in the project, unless its configuration moves it),
//! and in Crush's global data folder `projects.json`, the list of every project Crush was
//! started in with its data folder (`{"projects": [{"path", "data_dir", "last_accessed"}]}`).
//!
//! Where: the global data folder is `$CRUSH_GLOBAL_DATA`, else
//! `${XDG_DATA_HOME:-~/.local/share}/crush` (`%LOCALAPPDATA%\crush` on Windows); the
//! import's roots are the data folders its `projects.json` lists. A project's folder, its
//! data folder, its `crush.db` or the global data folder may be given.
//!
//! Mapping (`internal/db/migrations`, `internal/message/content.go`):
//! - a session is a `sessions` row: its `title` (the one Crush's model wrote; `New
//!   Session` and `New Agent Session`, the placeholders it starts with, are no title), its times (epoch seconds), its
//!   parent (`parent_session_id`: a sub-agent's session, a task session of its parent's);
//!   the folder is the project's (the data folder's parent when it is named `.crush`, as by
//!   default);
//! - a message's `parts` is Crush's list of parts, `{"type", "data"}`, as JSON or
//!   compressed with zstd: `text` a text part (synthetic when `hidden`, a continuation
//!   Crush generated), `reasoning` a reasoning part (`thinking`, `signature`), `image_url`
//!   and `binary` (base64 `Data`, `MIMEType`, `Path`) file parts, `tool_call` a tool part
//!   (`input` JSON text) settled by the `tool_result` with its id in a later `tool`
//!   message (its `content`; `is_error` fails it; `metadata`, JSON text, kept as the
//!   call's), `finish` the reply's finish reason, and its error when it `error`ed or was
//!   `canceled`; a `system` message and a part this build does not know are counted as
//!   skipped. An assistant message Crush flags `is_summary_message` is the session's
//!   summary;
//! - usage: Crush keeps only the last model call's tokens (`prompt_tokens`,
//!   `completion_tokens`: a gauge of the context, which it sets rather than adds to) and
//!   the session's running `cost`, which it reports: that cost is the session's, reported,
//!   with the replies as its model calls and no tokens (a session whose cost is 0, a
//!   flat-rate model's or one Crush has no price for, has no usage recorded). Crush adds a sub-agent session's
//!   cost to its parent's when the sub-agent ends, so a parent's own cost is its `cost` less
//!   its children's (never below zero), and the two together are what Crush shows;
//! - a session whose row, message count, newest message update and parts' total size did
//!   not change is not read again.

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use scribe_message::{Part, Role, TokenUsage, ToolState};
use scribe_session::SessionKind;
use serde_json::Value;

use super::{
    Batches, FileReport, Importer, Unit, array_of, by_created_at, file, find_db, int_of, message,
    numbered, open_source_db, reasoning, rows, settle_call, str_of, text, time_of, tool, unzstd,
};
use crate::Source;
use crate::env::Env;
use crate::error::{ImportError, Result};
use crate::record::{Batch, MessageRec, Resume, SessionRec, SessionUsage, TitleRank};

const SRC: Source = Source::Crush;

/// A project's database.
const DB: &str = "crush.db";

/// The list of projects in the global data folder.
const PROJECTS: &str = "projects.json";

/// The titles Crush gives a session before its model names it (a sub-agent's is never
/// named).
const PLACEHOLDER_TITLES: [&str; 2] = ["New Session", "New Agent Session"];

/// The first bytes of a zstd frame: parts stored compressed.
const ZSTD_MAGIC: [u8; 4] = [0x28, 0xb5, 0x2f, 0xfd];

/// The Crush importer.
#[derive(Debug, Clone, Copy)]
pub struct Crush;

impl Importer for Crush {
    fn source(&self) -> Source {
        SRC
    }

    /// The data folders of the projects Crush lists that exist; when it lists none, its
    /// global data folder (so that a report names where it looked).
    fn default_roots(&self, env: &Env) -> Vec<PathBuf> {
        let Some(global) = global_data(env) else {
            return Vec::new();
        };
        let listed: Vec<PathBuf> = projects(&global)
            .into_iter()
            .filter(|d| d.is_dir())
            .collect();
        if listed.is_empty() {
            vec![global]
        } else {
            listed
        }
    }

    /// `crush.db` in `root` (a data folder, the database itself) or in its `.crush` (a
    /// project's folder); else, when `root` is the global data folder, in each data folder
    /// its `projects.json` lists.
    fn discover(&self, root: &Path, out: &mut Vec<PathBuf>) -> Result<()> {
        if find_db(root, &[DB, ".crush/crush.db"], out) {
            return Ok(());
        }
        for dir in projects(root) {
            find_db(&dir, &[DB], out);
        }
        Ok(())
    }

    fn read(&self, unit: &Unit<'_>, out: &mut Batch, report: &mut FileReport) -> Result<Resume> {
        let path = unit.path;
        let conn = open_source_db(path)?;
        let db = |source| ImportError::source_db(path, source);
        let mut sessions = rows(&conn, "SELECT * FROM sessions", []).map_err(db)?;
        // What each session's children cost: Crush added it to the parent's cost.
        let mut children: HashMap<String, f64> = HashMap::new();
        for s in &sessions {
            if let Some(parent) = str_of(s, "parent_session_id").filter(|p| !p.is_empty()) {
                *children.entry(parent.to_owned()).or_default() += cost_of(s);
            }
        }
        let folder = project_folder(path);
        let mut batches = Batches::new(unit, &mut sessions, by_created_at);
        while let Some(s) = batches.next(&sessions, out.messages.len()) {
            let Some(id) = str_of(s, "id").filter(|id| !id.is_empty()) else {
                report.malformed(path, None, "a session without an id");
                continue;
            };
            let created = time_of(s, "created_at").unwrap_or(unit.mtime_ms);
            let updated = time_of(s, "updated_at").unwrap_or(created).max(created);
            if unit.since.is_some_and(|since| updated < since) {
                continue;
            }
            let seen = rows(
                &conn,
                "SELECT count(*) AS n, coalesce(max(updated_at), 0) AS last, \
                 coalesce(sum(length(parts)), 0) AS size FROM messages WHERE session_id = ?1",
                [id],
            )
            .map_err(db)?;
            let seen = seen.first().map_or_else(String::new, |r| {
                format!(
                    "{}:{}:{}",
                    int_of(r, "n"),
                    int_of(r, "last"),
                    int_of(r, "size")
                )
            });
            let own_cost = (cost_of(s) - children.get(id).copied().unwrap_or(0.0)).max(0.0);
            let fingerprint = format!("{seen}:{}:{own_cost}", Value::Object(row_fields(s)));
            if unit.state.fingerprint(SRC, id)?.as_deref() == Some(fingerprint.as_str()) {
                continue;
            }
            let msgs = rows(
                &conn,
                "SELECT * FROM messages WHERE session_id = ?1 ORDER BY created_at, rowid",
                [id],
            )
            .map_err(db)?;
            let mut rec = session(s, id, created, updated);
            rec.directory.clone_from(&folder);
            rec.fingerprint = Some(fingerprint);
            let (replies, last_at, model) = transcript(&conn, &rec, &msgs, out, report, path);
            rec.updated_at = rec.updated_at.max(last_at);
            rec.model = model;
            // A session Crush kept no cost for (a flat-rate model's, one whose model it has
            // no price for) has no usage recorded, rather than a cost of nothing.
            if cost_of(s) > 0.0 {
                rec.usage_total = Some(SessionUsage {
                    tokens: TokenUsage::default(),
                    api_calls: replies,
                    reported_cost: Some(own_cost),
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

/// Crush's global data folder.
fn global_data(env: &Env) -> Option<PathBuf> {
    if let Some(dir) = env.var("CRUSH_GLOBAL_DATA") {
        return Some(env.expand(dir));
    }
    if let Some(dir) = env.var("XDG_DATA_HOME") {
        return Some(env.expand(dir).join("crush"));
    }
    if cfg!(windows) {
        return env
            .var("LOCALAPPDATA")
            .map(|d| PathBuf::from(d).join("crush"))
            .or_else(|| env.home_join("AppData/Local/crush"));
    }
    env.home_join(".local/share/crush")
}

/// The data folders `projects.json` in `global` lists, in its order, each once (one given
/// relative to its project is taken from there); none when it cannot be read.
fn projects(global: &Path) -> Vec<PathBuf> {
    let Some(list) = std::fs::read(global.join(PROJECTS))
        .ok()
        .and_then(|bytes| serde_json::from_slice::<Value>(&bytes).ok())
    else {
        return Vec::new();
    };
    let mut dirs: Vec<PathBuf> = Vec::new();
    for p in array_of(&list, "projects") {
        let Some(data) = str_of(p, "data_dir").filter(|d| !d.is_empty()) else {
            continue;
        };
        let data = Path::new(data);
        let dir = match str_of(p, "path") {
            Some(project) if data.is_relative() => Path::new(project).join(data),
            _ => data.to_owned(),
        };
        if !dirs.contains(&dir) {
            dirs.push(dir);
        }
    }
    dirs
}

/// The project a database belongs to: the folder above its data folder when that is
/// named `.crush` (Crush's default).
fn project_folder(db: &Path) -> Option<String> {
    let data = db.parent()?;
    (data.file_name()? == ".crush").then(|| data.parent().map(|p| p.display().to_string()))?
}

/// A session row's `cost`.
fn cost_of(s: &Value) -> f64 {
    super::f64_of(s, "cost")
        .filter(|c| c.is_finite() && *c >= 0.0)
        .unwrap_or(0.0)
}

/// The row's columns that say whether the session changed (all but the ones Crush moves
/// on every save: `updated_at` moves with the messages, counted apart).
fn row_fields(s: &Value) -> serde_json::Map<String, Value> {
    let mut fields = s.as_object().cloned().unwrap_or_default();
    fields.remove("updated_at");
    fields
}

/// The session of row `s`.
fn session(s: &Value, id: &str, created: i64, updated: i64) -> SessionRec {
    let mut rec = SessionRec::new(id, created);
    rec.updated_at = updated;
    rec.title = str_of(s, "title")
        .map(str::trim)
        .filter(|t| !t.is_empty() && !PLACEHOLDER_TITLES.contains(t))
        .map(|t| (t.to_owned(), TitleRank::Ai));
    if let Some(parent) = str_of(s, "parent_session_id").filter(|p| !p.is_empty()) {
        rec.parent = Some(parent.to_owned());
        rec.kind = SessionKind::Task;
    }
    rec
}

/// A message's parts as stored: JSON text, or JSON compressed with zstd (which [`rows`]
/// does not read as bytes: a value that is not text is read again here).
fn stored_parts(
    conn: &rusqlite::Connection,
    row: &Value,
) -> std::result::Result<Vec<Value>, String> {
    let bytes = match row.get("parts") {
        // Text as it is; bytes that were not UTF-8 (read lossily) are read again as bytes.
        Some(Value::String(s)) if !s.contains(char::REPLACEMENT_CHARACTER) => {
            s.clone().into_bytes()
        }
        _ => conn
            .query_row(
                "SELECT parts FROM messages WHERE id = ?1",
                [str_of(row, "id").unwrap_or("")],
                |r| {
                    Ok(match r.get_ref(0)? {
                        rusqlite::types::ValueRef::Text(t) | rusqlite::types::ValueRef::Blob(t) => {
                            t.to_vec()
                        }
                        _ => Vec::new(),
                    })
                },
            )
            .map_err(|e| e.to_string())?,
    };
    let json = if bytes.starts_with(&ZSTD_MAGIC) {
        unzstd(&bytes)?
    } else {
        bytes
    };
    match serde_json::from_slice::<Value>(&json).map_err(|e| e.to_string())? {
        Value::Array(parts) => Ok(parts),
        _ => Err("its parts are not a list".to_owned()),
    }
}

/// The messages of one session (rows in order) into `out`; returns the replies among them,
/// the time of the last message and the model most replies came from.
fn transcript(
    conn: &rusqlite::Connection,
    rec: &SessionRec,
    rows: &[Value],
    out: &mut Batch,
    report: &mut FileReport,
    path: &Path,
) -> (i64, i64, Option<String>) {
    let sid = rec.external_id.as_str();
    // A call's id → (index in out.messages, part index).
    let mut calls: HashMap<String, (usize, usize)> = HashMap::new();
    let (mut replies, mut last_at) = (0, rec.created_at);
    let mut models: HashMap<String, usize> = HashMap::new();
    for row in rows {
        let mid = str_of(row, "id").unwrap_or("");
        let at = time_of(row, "created_at").unwrap_or(last_at);
        last_at = last_at.max(at);
        let parts = match stored_parts(conn, row) {
            Ok(parts) => parts,
            Err(why) => {
                report.malformed(path, None, format!("message {mid} of {sid}: {why}"));
                continue;
            }
        };
        let role = match str_of(row, "role") {
            Some("user") => Role::User,
            Some("assistant") => Role::Assistant,
            Some("tool") => {
                for p in &parts {
                    let data = p.get("data").unwrap_or(&Value::Null);
                    match str_of(p, "type").unwrap_or("") {
                        "tool_result" => {}
                        // Crush ends every message it writes with one.
                        "finish" => continue,
                        other => {
                            report.skip(format!("part:{other}"));
                            continue;
                        }
                    }
                    let id = str_of(data, "tool_call_id").unwrap_or("");
                    match calls.get(id) {
                        Some(&place) => {
                            let output = str_of(data, "content").unwrap_or("").to_owned();
                            let failed =
                                data.get("is_error").and_then(Value::as_bool) == Some(true);
                            settle_call(&mut out.messages, place, output, failed, at);
                            if let Some(meta) = str_of(data, "metadata")
                                .filter(|m| !m.is_empty())
                                .and_then(|m| serde_json::from_str::<Value>(m).ok())
                                && let Some(Part::Tool(t)) = out.messages[place.0]
                                    .message
                                    .parts
                                    .get_mut(place.1)
                                    .map(|p| &mut p.part)
                                && let ToolState::Completed { metadata, .. } = &mut t.state
                            {
                                *metadata = meta;
                            }
                        }
                        None => report.skip("tool_result:without-call"),
                    }
                }
                report.records += 1;
                continue;
            }
            Some(other) => {
                report.skip(format!("message:{other}"));
                continue;
            }
            None => {
                report.malformed(path, None, format!("message {mid} of {sid} without a role"));
                continue;
            }
        };
        report.records += 1;
        let key = format!("{sid}:{mid}");
        let this = out.messages.len();
        let mut content: Vec<Part> = Vec::new();
        let mut finish: Option<&Value> = None;
        for p in &parts {
            let data = p.get("data").unwrap_or(&Value::Null);
            match str_of(p, "type").unwrap_or("") {
                "text" => {
                    let said = str_of(data, "text").unwrap_or("");
                    if !said.is_empty() {
                        let hidden = data.get("hidden").and_then(Value::as_bool) == Some(true);
                        content.push(text(said, hidden));
                    }
                }
                "reasoning" => {
                    let thinking = str_of(data, "thinking").unwrap_or("");
                    let signature = str_of(data, "signature")
                        .filter(|s| !s.is_empty())
                        .map(str::to_owned);
                    if !thinking.is_empty() || signature.is_some() {
                        content.push(reasoning(thinking, signature, None));
                    }
                }
                "image_url" => {
                    if let Some(url) = str_of(data, "url") {
                        content.push(super::image_url(url.to_owned()));
                    }
                }
                "binary" => {
                    let mime = str_of(data, "MIMEType").unwrap_or("application/octet-stream");
                    let bytes = str_of(data, "Data").unwrap_or("");
                    let name = str_of(data, "Path")
                        .filter(|n| !n.is_empty())
                        .map(str::to_owned);
                    content.push(file(mime, name, format!("data:{mime};base64,{bytes}")));
                }
                "tool_call" => {
                    let id = str_of(data, "id").unwrap_or("");
                    let input = match str_of(data, "input") {
                        Some(raw) => serde_json::from_str(raw)
                            .unwrap_or_else(|_| Value::String(raw.to_owned())),
                        None => Value::Null,
                    };
                    let name = str_of(data, "name").unwrap_or("");
                    calls.insert(id.to_owned(), (this, content.len()));
                    content.push(tool(id, name, input, ToolState::Running { started_at: at }));
                }
                "finish" => finish = Some(data),
                other => report.skip(format!("part:{other}")),
            }
        }
        let mut m = message(SRC, &key, role, at);
        if let Some(done) = finish {
            let reason = str_of(done, "reason").unwrap_or("");
            if role == Role::Assistant && !reason.is_empty() {
                m.finish_reason = Some(reason.into());
            }
            if role == Role::Assistant {
                m.finished_at = time_of(done, "time").map(|t| t.max(at));
            }
            let said = [str_of(done, "message"), str_of(done, "details")]
                .into_iter()
                .flatten()
                .filter(|s| !s.is_empty())
                .collect::<Vec<_>>()
                .join(": ");
            m.error = match reason {
                "error" => Some(serde_json::json!({ "type": "error", "message": said })),
                "canceled" => Some(serde_json::json!({
                    "type": "cancelled",
                    "message": if said.is_empty() { "the request was cancelled" } else { &said },
                })),
                _ => None,
            };
        }
        if content.is_empty() && m.error.is_none() {
            report.skip(format!("message:{}:empty", role.as_str()));
            continue;
        }
        if role == Role::Assistant {
            m.model = str_of(row, "model")
                .filter(|s| !s.is_empty())
                .map(str::to_owned);
            m.provider = str_of(row, "provider")
                .filter(|s| !s.is_empty())
                .map(str::to_owned);
            m.is_summary = int_of(row, "is_summary_message") != 0;
            if let Some(model) = &m.model {
                *models.entry(model.clone()).or_default() += 1;
            }
            replies += 1;
        }
        m.parts = numbered(SRC, &key, content, at);
        out.messages.push(MessageRec::new(sid.to_owned(), m));
    }
    let model = models
        .into_iter()
        .max_by(|a, b| a.1.cmp(&b.1).then_with(|| b.0.cmp(&a.0)))
        .map(|(m, _)| m);
    (replies, last_at, model)
}
