//! Goose (block/goose): `sessions/sessions.db` in Goose's data folder, the SQLite database
//! Goose keeps every session in (its schema versions up to 9 read; a column an older one
//! lacks reads as absent). Goose moved its older `sessions/*.jsonl` logs into this database
//! when it first started with it, so those are not read.
//!
//! Where: `$GOOSE_PATH_ROOT/data/sessions` when that is set to an absolute path (as Goose
//! requires); else `${XDG_DATA_HOME:-~/.local/share}/goose/sessions` (on macOS too, where
//! `~/Library/Application Support/Block/goose/sessions` and `…/Application
//! Support/goose/sessions` are looked in as well) and `%APPDATA%\Block\goose\data\sessions`
//! on Windows. Goose's data folder itself, or the database file, may be given too.
//!
//! Mapping:
//! - a message's `content_json` is Goose's list of contents: `text` becomes a text part
//!   (synthetic when only the model was to see it, by its `audience`), `image` a file,
//!   `thinking`, `redactedThinking` and `reasoning` a reasoning part, `toolRequest` (and
//!   `frontendToolRequest`) a tool part, settled by the `toolResponse` with its id in a
//!   later message (the response's text meant for the model; `isError`, or an `error`
//!   status, fails it; a call Goose could not read is a failed part named
//!   `(unreadable call)`). What only Goose's window shows (`systemNotification`,
//!   `actionRequired`, `toolConfirmationRequest`, `jsonRenderSpec`) is counted as skipped;
//! - `metadata_json` says who sees a message. A compaction keeps the messages before it
//!   for the user only (imported as they are), adds the summary for the model only (a user
//!   message: imported as the session's summary, with a compaction part) and a prompt to
//!   go on for the model only (synthetic text); a message that neither sees (the copy of
//!   the last prompt a compaction puts aside) is skipped;
//! - usage exists per session only (`accumulated_input_tokens` and
//!   `accumulated_output_tokens`, else the last call's `input_tokens` and
//!   `output_tokens`). Goose counts cached input in its input and keeps no split, so an
//!   estimated cost prices all of it as uncached input: an upper bound where the provider
//!   cached. Model calls are the assistant replies; the model is `model_config_json`'s
//!   `model_name`, the provider `provider_name`;
//! - the title is the session's `name` (the older `description`): the user's when
//!   `user_set_name`, else the one Goose's model wrote; the placeholder a session starts
//!   with (`CLI Session`) is no title;
//! - Goose rewrites a session's rows when it compacts or truncates it (new row ids, the
//!   same `message_id` and times), so messages are keyed by session and `message_id` (by
//!   position where a row has none), and a session whose message count, last row, totals,
//!   name and update time are unchanged is not read again.

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use scribe_message::{CompactionPart, Part, Role, TokenUsage, ToolState};
use serde_json::Value;

use super::{
    Batches, FileReport, Importer, Unit, array_of, by_created_at, f64_of, find_db, inline_image,
    int_of, json_col, message, numbered, open_source_db, reasoning, rows, settled, str_of, text,
    time_of, tool,
};
use crate::Source;
use crate::env::Env;
use crate::error::{ImportError, Result};
use crate::record::{Batch, MessageRec, Resume, SessionRec, SessionUsage, TitleRank};
use crate::time;

const SRC: Source = Source::Goose;

/// The database's file name.
const DB: &str = "sessions.db";

/// The name Goose gives a session before its model names it.
const PLACEHOLDER_NAME: &str = "CLI Session";

/// The tool name of a call Goose could not read (it keeps no name for it).
const UNREADABLE_CALL: &str = "(unreadable call)";

/// Session columns whose change means the session is read again (with its messages'
/// count and last row).
const WATCHED: [&str; 9] = [
    "name",
    "description",
    "updated_at",
    "accumulated_input_tokens",
    "accumulated_output_tokens",
    "input_tokens",
    "output_tokens",
    "provider_name",
    "model_config_json",
];

/// The Goose importer.
#[derive(Debug, Clone, Copy)]
pub struct Goose;

impl Importer for Goose {
    fn source(&self) -> Source {
        SRC
    }

    /// `$GOOSE_PATH_ROOT/data/sessions`, else the sessions folder of each place Goose has
    /// kept its data that exists, else the first of them (so that a report names where it
    /// looked).
    fn default_roots(&self, env: &Env) -> Vec<PathBuf> {
        if let Some(root) = env
            .var("GOOSE_PATH_ROOT")
            .map(PathBuf::from)
            .filter(|p| p.is_absolute())
        {
            return vec![root.join("data/sessions")];
        }
        let xdg = env
            .var("XDG_DATA_HOME")
            .map(|d| env.expand(d))
            .or_else(|| env.home_join(".local/share"))
            .map(|d| d.join("goose"));
        let mut candidates: Vec<PathBuf> = Vec::new();
        if cfg!(windows) {
            candidates.extend(
                env.var("APPDATA")
                    .map(|d| PathBuf::from(d).join("Block/goose/data")),
            );
        } else {
            candidates.extend(xdg);
            if cfg!(target_os = "macos") {
                for rel in ["Block/goose", "goose"] {
                    candidates.extend(env.home_join(&format!("Library/Application Support/{rel}")));
                }
            }
        }
        super::existing_or_first(candidates.into_iter().map(|d| d.join("sessions")).collect())
    }

    fn discover(&self, root: &Path, out: &mut Vec<PathBuf>) -> Result<()> {
        // Goose's sessions folder, or its data folder above it.
        find_db(root, &[DB, "sessions/sessions.db"], out);
        Ok(())
    }

    fn read(&self, unit: &Unit<'_>, out: &mut Batch, report: &mut FileReport) -> Result<Resume> {
        let path = unit.path;
        let conn = open_source_db(path)?;
        let db = |source| ImportError::source_db(path, source);
        let mut sessions = rows(&conn, "SELECT * FROM sessions", []).map_err(db)?;
        let mut batches = Batches::new(unit, &mut sessions, by_created_at);
        while let Some(s) = batches.next(&sessions, out.messages.len()) {
            let Some(id) = str_of(s, "id") else {
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
                "SELECT count(*) AS n, coalesce(max(id), 0) AS last FROM messages \
                 WHERE session_id = ?1",
                [id],
            )
            .map_err(db)?;
            let (n, last) = seen
                .first()
                .map_or((0, 0), |r| (int_of(r, "n"), int_of(r, "last")));
            let mut fingerprint = format!("{n}:{last}");
            for column in WATCHED {
                fingerprint.push(':');
                fingerprint.push_str(&s.get(column).unwrap_or(&Value::Null).to_string());
            }
            if unit.state.fingerprint(SRC, id)?.as_deref() == Some(fingerprint.as_str()) {
                continue;
            }
            let msgs = rows(
                &conn,
                "SELECT * FROM messages WHERE session_id = ?1 ORDER BY id",
                [id],
            )
            .map_err(db)?;
            let mut rec = session(s, id, created, updated);
            rec.fingerprint = Some(fingerprint);
            let (replies, last_at) = transcript(&rec, &msgs, out, report, path);
            rec.updated_at = rec.updated_at.max(last_at);
            if let Some(usage) = &mut rec.usage_total {
                usage.api_calls = replies;
            }
            out.sessions.push(rec);
        }
        Ok(batches.resume())
    }
}

/// Whether a flag column (a boolean stored as an integer, or a JSON boolean) is set.
fn flag(row: &Value, key: &str) -> bool {
    match row.get(key) {
        Some(Value::Bool(b)) => *b,
        Some(v) => v.as_i64().is_some_and(|n| n != 0),
        None => false,
    }
}

/// The session of row `s`, its usage totals without their model-call count (the
/// transcript gives that).
fn session(s: &Value, id: &str, created: i64, updated: i64) -> SessionRec {
    let config = json_col(s, "model_config_json");
    let nonblank = |v: &&str| !v.trim().is_empty();
    let mut rec = SessionRec::new(id, created);
    rec.updated_at = updated;
    rec.directory = str_of(s, "working_dir").filter(nonblank).map(str::to_owned);
    rec.model = str_of(&config, "model_name")
        .filter(nonblank)
        .map(str::to_owned);
    rec.billing_provider = str_of(s, "provider_name")
        .filter(nonblank)
        .map(str::to_owned);
    rec.model_config = Some(config).filter(Value::is_object);
    let user_named = flag(s, "user_set_name");
    rec.title = str_of(s, "name")
        .filter(nonblank)
        .or_else(|| str_of(s, "description").filter(nonblank))
        .filter(|name| user_named || name.trim() != PLACEHOLDER_NAME)
        .map(|name| {
            let rank = if user_named {
                TitleRank::User
            } else {
                TitleRank::Ai
            };
            (name.trim().to_owned(), rank)
        });
    // The running totals, or (older sessions) the last call's counts.
    let count = |total: &str, last: &str| match s.get(total) {
        Some(v) if !v.is_null() => int_of(s, total),
        _ => int_of(s, last),
    };
    rec.usage_total = Some(SessionUsage {
        tokens: TokenUsage {
            input: count("accumulated_input_tokens", "input_tokens"),
            output: count("accumulated_output_tokens", "output_tokens"),
            ..TokenUsage::default()
        },
        api_calls: 0,
        reported_cost: None,
        model: rec.model.clone(),
        cost_usd: 0.0,
        cost_flags: 0,
    });
    rec
}

/// The roles of a content's `annotations.audience`, when it names any.
fn audience(content: &Value) -> Option<Vec<&str>> {
    content
        .pointer("/annotations/audience")?
        .as_array()
        .map(|roles| roles.iter().filter_map(Value::as_str).collect())
}

/// The messages of one session (rows in order) into `out`; returns the assistant replies
/// among them and the time of the last.
fn transcript(
    rec: &SessionRec,
    rows: &[Value],
    out: &mut Batch,
    report: &mut FileReport,
    path: &Path,
) -> (i64, i64) {
    let sid = rec.external_id.as_str();
    // A call's id → (index in out.messages, part index).
    let mut calls: HashMap<String, (usize, usize)> = HashMap::new();
    let (mut replies, mut last_at) = (0, rec.created_at);
    for (row_number, row) in rows.iter().enumerate() {
        let role = match str_of(row, "role") {
            Some("user") => Role::User,
            Some("assistant") => Role::Assistant,
            Some(other) => {
                report.skip(format!("message:{other}"));
                continue;
            }
            None => {
                report.malformed(path, None, format!("a message of {sid} without a role"));
                continue;
            }
        };
        let contents = match str_of(row, "content_json").map(serde_json::from_str::<Value>) {
            Some(Ok(Value::Array(items))) => items,
            Some(Err(err)) => {
                report.malformed(path, None, format!("a message of {sid}: {err}"));
                continue;
            }
            _ => {
                report.malformed(
                    path,
                    None,
                    format!("a message of {sid} whose content is not a list"),
                );
                continue;
            }
        };
        report.records += 1;
        let meta = json_col(row, "metadata_json");
        let seen_by = |who: &str| meta.get(who).and_then(Value::as_bool).unwrap_or(true);
        let (for_user, for_model) = (seen_by("userVisible"), seen_by("agentVisible"));
        if !for_user && !for_model {
            report.skip("message:archived");
            continue;
        }
        let at = f64_of(row, "created_timestamp")
            .and_then(time::epoch)
            .or_else(|| str_of(row, "timestamp").and_then(time::parse))
            .unwrap_or(rec.created_at);
        let key = match str_of(row, "message_id").filter(|k| !k.is_empty()) {
            Some(own) => format!("{sid}:{own}"),
            None => format!("{sid}:#{row_number}"),
        };
        let summary = !for_user && role == Role::User;
        let mut parts: Vec<Part> = Vec::new();
        if summary {
            parts.push(Part::Compaction(CompactionPart::default()));
        }
        let this = out.messages.len();
        for item in &contents {
            let kind = str_of(item, "type").unwrap_or("");
            match kind {
                "text" => {
                    let said = str_of(item, "text").unwrap_or("");
                    if said.is_empty() {
                        continue;
                    }
                    let model_only =
                        !for_user || audience(item).is_some_and(|roles| !roles.contains(&"user"));
                    parts.push(text(said, model_only && !summary));
                }
                "image" => parts.push(inline_image(item)),
                "thinking" => {
                    let signature = str_of(item, "signature")
                        .filter(|s| !s.is_empty())
                        .map(str::to_owned);
                    parts.push(reasoning(
                        str_of(item, "thinking").unwrap_or(""),
                        signature,
                        None,
                    ));
                }
                "redactedThinking" => parts.push(reasoning("", None, Some(item.clone()))),
                "reasoning" => {
                    let said = str_of(item, "text").or_else(|| str_of(item, "content"));
                    parts.push(reasoning(said.unwrap_or(""), None, None));
                }
                "toolRequest" | "frontendToolRequest" => {
                    let id = str_of(item, "id").unwrap_or("");
                    let call = item.get("toolCall").unwrap_or(&Value::Null);
                    let part = if str_of(call, "status") == Some("error") {
                        // Goose could not read the model's call; the model was told so.
                        let why = str_of(call, "error").unwrap_or("the call could not be read");
                        let state = ToolState::Error {
                            message: why.to_owned(),
                            started_at: Some(at),
                            ended_at: at,
                        };
                        tool(id, UNREADABLE_CALL, Value::Null, state)
                    } else {
                        let value = call.get("value").unwrap_or(&Value::Null);
                        let input = match value.get("arguments") {
                            None | Some(Value::Null) => Value::Object(serde_json::Map::new()),
                            Some(args) => args.clone(),
                        };
                        let name = str_of(value, "name").unwrap_or("");
                        tool(id, name, input, ToolState::Running { started_at: at })
                    };
                    calls.insert(id.to_owned(), (this, parts.len()));
                    parts.push(part);
                }
                "toolResponse" => {
                    let id = str_of(item, "id").unwrap_or("");
                    let Some(&(mi, pi)) = calls.get(id) else {
                        report.skip("toolResponse:without-request");
                        continue;
                    };
                    let (output, failed) = response(item);
                    let target = if mi == this {
                        parts.get_mut(pi)
                    } else {
                        out.messages
                            .get_mut(mi)
                            .and_then(|m| m.message.parts.get_mut(pi))
                            .map(|stored| {
                                stored.updated_at = stored.updated_at.max(at);
                                &mut stored.part
                            })
                    };
                    if let Some(Part::Tool(t)) = target {
                        let started = t.state.started_at();
                        t.state = settled(output, failed, Value::Null, started, at);
                    }
                }
                "" => report.skip("content:untyped"),
                other => report.skip(format!("content:{other}")),
            }
        }
        last_at = last_at.max(at);
        if parts.is_empty() {
            continue;
        }
        let role = if summary { Role::Assistant } else { role };
        let mut m = message(SRC, &key, role, at);
        m.is_summary = summary;
        // A reply of the model; not the prompt to go on that Goose itself adds after a
        // compaction, for the model only.
        if role == Role::Assistant && for_user {
            m.model.clone_from(&rec.model);
            replies += 1;
        }
        m.parts = numbered(SRC, &key, parts, at);
        out.messages.push(MessageRec::new(sid.to_owned(), m));
    }
    (replies, last_at)
}

/// A `toolResponse`'s output and whether the call failed: the text contents meant for the
/// model (all of them when none is), of the result (`{content, isError}`, or the list
/// alone as older Goose wrote it) or its error.
fn response(item: &Value) -> (String, bool) {
    let result = item.get("toolResult").unwrap_or(&Value::Null);
    if str_of(result, "status") == Some("error") {
        let why = str_of(result, "error").unwrap_or("the tool failed");
        return (why.to_owned(), true);
    }
    let value = result.get("value").unwrap_or(&Value::Null);
    let (items, failed) = match value {
        Value::Array(items) => (items.as_slice(), false),
        other => (
            array_of(other, "content"),
            other.get("isError").and_then(Value::as_bool) == Some(true),
        ),
    };
    fn text_of(c: &Value) -> Option<&str> {
        match str_of(c, "type") {
            Some("text") => str_of(c, "text"),
            Some("resource") => c.pointer("/resource/text").and_then(Value::as_str),
            _ => None,
        }
    }
    let for_model: Vec<&str> = items
        .iter()
        .filter(|c| audience(c).is_none_or(|roles| roles.contains(&"assistant")))
        .filter_map(text_of)
        .collect();
    let texts = if for_model.is_empty() {
        items.iter().filter_map(text_of).collect()
    } else {
        for_model
    };
    (texts.join("\n"), failed)
}
