//! Hermes Agent: `${HERMES_HOME:-~/.hermes}/state.db` (SQLite; `HERMES_HOME` may list
//! several homes, comma-separated), and the older per-session logs
//! `sessions/session_<id>.json` (read only for sessions the database does not have).
//!
//! Mapping (FORMATS.md §4):
//! - messages are OpenAI chat rows: the assistant row's `tool_calls` and the `role='tool'`
//!   rows with their `tool_call_id` become one tool part each; `reasoning` /
//!   `reasoning_content` a reasoning part; system rows are skipped;
//! - usage exists per session only: the session's totals are set to Hermes's
//!   (input without cache, cache read and write, output, reasoning, API calls) and its cost
//!   is `actual_cost_usd`, else Hermes's own `estimated_cost_usd`;
//! - auxiliary calls (v22+: `session_model_usage` rows whose `task` names one, such as
//!   `title_generation`, `compression`, `vision`) are not in the session's totals: each
//!   task and model of a session becomes a child session holding that usage (a title
//!   session for `title_generation`, a task otherwise; no messages), as Scribe records its
//!   own title calls, so stats count them under their own model. Rows of the main loop
//!   (`task` empty) and of a per-turn route (`voice_chat`) are already in the totals
//!   (Hermes' own dashboard reads them the same way);
//! - `parent_session_id` is a compression continuation when the parent ended with
//!   `compression`, a fork for `_branched_from`, otherwise a delegated task; the
//!   `[CONTEXT COMPACTION …]` user message that opens a continuation is its summary;
//! - Hermes rewrites a transcript on `/retry`, `/undo` and `/compress` (rows deleted and
//!   inserted again, with new ids and times), and a session log's message times are made
//!   up from its start and last update, which move every turn. So a session read again is
//!   matched against what is stored of it by what its messages say (`match_stored`):
//!   a message read again keeps its stored id and time, a stored message the transcript
//!   no longer has is marked (never deleted), a new one is added after the one before it.
//!   A session whose message count, last row and totals are unchanged is not read again;
//!   with the v30 `active` column only active rows are imported.

use std::collections::{BTreeMap, HashSet};
use std::path::{Path, PathBuf};

use scribe_message::{CompactionPart, FinishReason, Message, Part, Role, TokenUsage, ToolState};
use scribe_session::SessionKind;
use serde_json::Value;

use super::{
    Batches, FileReport, Importer, Unit, columns, content_text, f64_of, int_of, json_col,
    mark_undone, message, numbered, open_source_db, reasoning, rows, settled, str_of, text, tool,
};
use crate::Source;
use crate::env::Env;
use crate::error::{ImportError, Result};
use crate::record::{Batch, MessageRec, Resume, SessionRec, SessionUsage, TitleRank};
use crate::time;

const SRC: Source = Source::Hermes;

/// The Hermes importer.
#[derive(Debug, Clone, Copy)]
pub struct Hermes;

impl Importer for Hermes {
    fn source(&self) -> Source {
        SRC
    }

    fn default_roots(&self, env: &Env) -> Vec<PathBuf> {
        env.paths("HERMES_HOME")
            .or_else(|| env.home_join(".hermes").map(|h| vec![h]))
            .unwrap_or_default()
    }

    fn discover(&self, root: &Path, out: &mut Vec<PathBuf>) -> Result<()> {
        if root.is_file() {
            out.push(root.to_owned());
            return Ok(());
        }
        // Hermes' home (state.db, sessions/), or its sessions folder itself: a user points
        // at the folder they see their logs in. From there, state.db beside it is read as
        // well, since the logs of the sessions it holds are left to it: without it they
        // would not be imported at all. A folder of logs under another name (copied, kept)
        // is read alone.
        let (db, logs_dir) = if in_sessions_folder(root) {
            (
                root.parent().map(|home| home.join("state.db")),
                root.to_owned(),
            )
        } else if is_home(root) || !holds_logs(root) {
            (Some(root.join("state.db")), root.join("sessions"))
        } else {
            (None, root.to_owned())
        };
        let mut in_db = HashSet::new();
        if let Some(db) = db.filter(|db| db.is_file()) {
            // A log's session that the database holds is read from the database (which
            // has its usage), never from both.
            if let Ok(conn) = open_source_db(&db)
                && let Ok(ids) = rows(&conn, "SELECT id FROM sessions", [])
            {
                in_db.extend(
                    ids.iter()
                        .filter_map(|r| str_of(r, "id").map(str::to_owned)),
                );
            }
            out.push(db);
        }
        let Ok(entries) = std::fs::read_dir(logs_dir) else {
            return Ok(());
        };
        let mut logs: Vec<PathBuf> = entries
            .filter_map(|e| e.ok().map(|e| e.path()))
            .filter(|p| log_id(p).is_some_and(|id| !in_db.contains(&id)))
            .collect();
        logs.sort();
        out.extend(logs);
        Ok(())
    }

    fn watch_root(&self, root: &Path) -> PathBuf {
        match root.parent() {
            Some(home) if in_sessions_folder(root) && home.join("state.db").is_file() => {
                home.to_owned()
            }
            _ => root.to_owned(),
        }
    }

    fn read(&self, unit: &Unit<'_>, out: &mut Batch, report: &mut FileReport) -> Result<Resume> {
        if unit.path.extension().is_some_and(|e| e == "json") {
            log(unit, out, report)?;
            Ok(Resume::default())
        } else {
            database(unit, out, report)
        }
    }
}

/// Whether `root` is Hermes' sessions folder itself rather than its home.
fn in_sessions_folder(root: &Path) -> bool {
    root.file_name().is_some_and(|n| n == "sessions") && !is_home(root)
}

/// Whether `root` looks like Hermes' home: its database or its sessions folder is there.
fn is_home(root: &Path) -> bool {
    root.join("sessions").is_dir() || root.join("state.db").is_file()
}

/// Whether `dir` holds session logs (`session_<id>.json`) itself.
fn holds_logs(dir: &Path) -> bool {
    std::fs::read_dir(dir).is_ok_and(|entries| {
        entries
            .filter_map(|e| e.ok())
            .any(|e| log_id(&e.path()).is_some())
    })
}

/// The session id of a log file's name (`session_<id>.json`).
fn log_id(path: &Path) -> Option<String> {
    let name = path.file_name()?.to_string_lossy();
    let id = name.strip_prefix("session_")?.strip_suffix(".json")?;
    Some(id.to_owned())
}

/// The sessions of Hermes' database in order of start, a batch at a time: after
/// [`Unit::max_messages`] it stops at a session's end and says where it got to
/// ([`Batches`]).
fn database(unit: &Unit<'_>, out: &mut Batch, report: &mut FileReport) -> Result<Resume> {
    let path = unit.path;
    let conn = open_source_db(path)?;
    let db = |source| ImportError::source_db(path, source);
    let message_cols = columns(&conn, "messages").map_err(db)?;
    let active = if message_cols.iter().any(|c| c == "active") {
        " AND coalesce(active, 1) = 1"
    } else {
        ""
    };
    let sessions = rows(&conn, "SELECT * FROM sessions ORDER BY started_at, id", []).map_err(db)?;
    let aux_sql = aux_usage_sql(&columns(&conn, "session_model_usage").map_err(db)?);
    let ends: BTreeMap<String, String> = sessions
        .iter()
        .filter_map(|s| {
            Some((
                str_of(s, "id")?.to_owned(),
                str_of(s, "end_reason")?.to_owned(),
            ))
        })
        .collect();
    // What a session's messages look like for its fingerprint (count, newest id): asked
    // per session where an index leads with `session_id` (a database read a batch at a
    // time would count every message again for each batch), else counted for all at once
    // (an older schema without the index would scan the table once per session).
    let indexed = rows(
        &conn,
        "SELECT 1 AS found FROM pragma_index_list('messages') AS l, \
         pragma_index_info(l.name) AS i WHERE i.seqno = 0 AND i.name = 'session_id'",
        [],
    )
    .is_ok_and(|found| !found.is_empty());
    let of = |r: &Value| (int_of(r, "n"), int_of(r, "last"));
    let all_seen: Option<BTreeMap<String, (i64, i64)>> = if indexed {
        None
    } else {
        let sql = format!(
            "SELECT session_id, count(*) AS n, max(id) AS last FROM messages \
             WHERE 1 = 1{active} GROUP BY session_id"
        );
        let seen = rows(&conn, &sql, []).map_err(db)?;
        Some(
            seen.iter()
                .filter_map(|r| Some((str_of(r, "session_id")?.to_owned(), of(r))))
                .collect(),
        )
    };
    let one_sql = format!(
        "SELECT count(*) AS n, coalesce(max(id), 0) AS last FROM messages \
         WHERE session_id = ?1{active}"
    );
    let seen_of = |id: &str| -> Result<(i64, i64)> {
        Ok(match &all_seen {
            Some(all) => all.get(id).copied().unwrap_or((0, 0)),
            None => rows(&conn, &one_sql, [id])
                .map_err(db)?
                .first()
                .map_or((0, 0), of),
        })
    };
    fn order_of(s: &Value) -> (f64, &str) {
        let started = f64_of(s, "started_at").unwrap_or(0.0);
        (started, str_of(s, "id").unwrap_or(""))
    }
    let mut sessions = sessions;
    let mut batches = Batches::new(unit, &mut sessions, order_of);
    while let Some(s) = batches.next(&sessions, out.messages.len()) {
        // Said by the read whose batch holds the row, so once however many reads there are.
        let Some(id) = str_of(s, "id") else {
            report.malformed(path, None, "a session without an id");
            continue;
        };
        let started = f64_of(s, "started_at").and_then(time::epoch).unwrap_or(0);
        let ended = f64_of(s, "ended_at").and_then(time::epoch);
        let last_activity = f64_of(s, "last_activity_at").and_then(time::epoch);
        if unit
            .since
            .is_some_and(|since| ended.or(last_activity).unwrap_or(i64::MAX) < since)
        {
            continue;
        }
        let (n, last) = seen_of(id)?;
        let totals = [
            "input_tokens",
            "output_tokens",
            "cache_read_tokens",
            "cache_write_tokens",
            "reasoning_tokens",
            "api_call_count",
        ]
        .map(|c| int_of(s, c).to_string())
        .join(",");
        let aux = match &aux_sql {
            Some(sql) => rows(&conn, sql, [id]).map_err(db)?,
            None => Vec::new(),
        };
        let mut fingerprint = format!("{n}:{last}:{totals}:{ended:?}:{:?}", str_of(s, "title"));
        // Only a session with auxiliary usage says so: the others keep the fingerprint
        // they were stored with, and are not read again for it.
        for row in &aux {
            fingerprint.push_str(&format!(
                ":{}/{}/{}/{}/{}/{}/{}/{}",
                str_of(row, "task").unwrap_or(""),
                str_of(row, "model").unwrap_or(""),
                int_of(row, "api_call_count"),
                int_of(row, "input_tokens"),
                int_of(row, "output_tokens"),
                int_of(row, "cache_read_tokens"),
                int_of(row, "cache_write_tokens"),
                int_of(row, "reasoning_tokens"),
            ));
        }
        if unit.state.fingerprint(SRC, id)?.as_deref() == Some(fingerprint.as_str()) {
            continue;
        }
        let msgs = rows(
            &conn,
            &format!("SELECT * FROM messages WHERE session_id = ?1{active} ORDER BY timestamp, id"),
            [id],
        )
        .map_err(db)?;
        let config = json_col(s, "model_config");
        let mut rec = SessionRec::new(id, started);
        rec.updated_at = ended.or(last_activity).unwrap_or(started).max(started);
        rec.ended_at = ended;
        rec.end_reason = str_of(s, "end_reason").map(str::to_owned);
        rec.model = str_of(s, "model").map(str::to_owned);
        rec.system_prompt = str_of(s, "system_prompt").map(str::to_owned);
        rec.billing_provider = str_of(s, "billing_provider").map(str::to_owned);
        rec.directory = str_of(s, "cwd")
            .or_else(|| str_of(&config, "cwd"))
            .map(str::to_owned);
        rec.model_config = Some(config.clone()).filter(|c| c.is_object());
        rec.title = str_of(s, "title")
            .filter(|t| !t.trim().is_empty())
            .map(|t| (t.to_owned(), TitleRank::Source));
        if let Some(parent) = str_of(s, "parent_session_id").filter(|p| !p.is_empty()) {
            rec.parent = Some(parent.to_owned());
            rec.kind = if config.get("_branched_from").is_some()
                || ends.get(parent).map(String::as_str) == Some("branched")
            {
                SessionKind::Fork
            } else if config.get("_delegate_from").is_some() {
                SessionKind::Task
            } else if ends.get(parent).map(String::as_str) == Some("compression") {
                SessionKind::Continuation
            } else {
                SessionKind::Task
            };
        }
        rec.usage_total = Some(SessionUsage {
            tokens: TokenUsage {
                input: int_of(s, "input_tokens"),
                output: int_of(s, "output_tokens"),
                cache_read: int_of(s, "cache_read_tokens"),
                cache_write: int_of(s, "cache_write_tokens"),
                reasoning: int_of(s, "reasoning_tokens"),
            },
            api_calls: int_of(s, "api_call_count"),
            reported_cost: f64_of(s, "actual_cost_usd").or_else(|| f64_of(s, "estimated_cost_usd")),
            model: rec.model.clone(),
            cost_usd: 0.0,
            cost_flags: 0,
        });
        rec.fingerprint = Some(fingerprint);
        let rows: Vec<(Value, i64)> = msgs
            .into_iter()
            .map(|m| {
                let at = f64_of(&m, "timestamp")
                    .and_then(time::epoch)
                    .unwrap_or(started);
                let mut m = m;
                if let Some(obj) = m.as_object_mut() {
                    let calls = json_col(&Value::Object(obj.clone()), "tool_calls");
                    obj.insert("tool_calls".into(), calls);
                }
                (m, at)
            })
            .collect();
        let from = out.messages.len();
        transcript(&rec, &rows, out, report, path);
        match_stored(unit, id, out, from)?;
        let children: Vec<SessionRec> = aux.iter().map(|row| aux_session(&rec, row)).collect();
        out.sessions.push(rec);
        out.sessions.extend(children);
    }
    Ok(batches.resume())
}

/// Per-turn routes whose calls Hermes counts in the session's totals as well as under
/// their task in `session_model_usage`: not auxiliary.
const PRIMARY_TASKS: [&str; 2] = ["", "voice_chat"];

/// The statement reading one session's auxiliary usage (`?1`: its id) per task and model,
/// from the `session_model_usage` columns this database has (`cols`); `None` without the
/// table or its `task` column (before v22 every row was the main loop's).
fn aux_usage_sql(cols: &[String]) -> Option<String> {
    let has = |c: &str| cols.iter().any(|x| x == c);
    if !(has("session_id") && has("task") && has("model")) {
        return None;
    }
    let sum = |c: &str| {
        if has(c) {
            format!("coalesce(sum({c}), 0) AS {c}")
        } else {
            format!("0 AS {c}")
        }
    };
    let seen = |f: &str, c: &str| {
        if has(c) {
            format!("{f}({c}) AS {c}")
        } else {
            format!("NULL AS {c}")
        }
    };
    let primary = PRIMARY_TASKS
        .iter()
        .map(|t| format!("'{t}'"))
        .collect::<Vec<_>>()
        .join(", ");
    Some(format!(
        "SELECT task, model, {}, {}, {}, {}, {}, {}, {}, {}, {}, {} \
         FROM session_model_usage \
         WHERE session_id = ?1 AND coalesce(task, '') NOT IN ({primary}) \
         GROUP BY task, model ORDER BY task, model",
        sum("api_call_count"),
        sum("input_tokens"),
        sum("output_tokens"),
        sum("cache_read_tokens"),
        sum("cache_write_tokens"),
        sum("reasoning_tokens"),
        sum("estimated_cost_usd"),
        sum("actual_cost_usd"),
        seen("min", "first_seen"),
        seen("max", "last_seen"),
    ))
}

/// The child session holding `parent`'s auxiliary usage of one task and model (`row`,
/// from [`aux_usage_sql`]): a title session for `title_generation`, else a task; its
/// cost Hermes' billed amount, else its estimate, else none (priced from the catalog).
fn aux_session(parent: &SessionRec, row: &Value) -> SessionRec {
    let task = str_of(row, "task").unwrap_or("");
    let model = str_of(row, "model")
        .filter(|m| !m.is_empty() && *m != "unknown")
        .map(str::to_owned);
    let id = format!(
        "{}:{task}:{}",
        parent.external_id,
        model.as_deref().unwrap_or("unknown")
    );
    let created = f64_of(row, "first_seen")
        .and_then(time::epoch)
        .unwrap_or(parent.created_at);
    let mut rec = SessionRec::new(id, created);
    rec.updated_at = f64_of(row, "last_seen")
        .and_then(time::epoch)
        .unwrap_or(created)
        .max(created);
    rec.parent = Some(parent.external_id.clone());
    rec.kind = if task == "title_generation" {
        SessionKind::Title
    } else {
        SessionKind::Task
    };
    rec.ended_at = parent.ended_at;
    rec.directory.clone_from(&parent.directory);
    rec.model.clone_from(&model);
    rec.model_config = Some(serde_json::json!({ "hermes_task": task }));
    let positive = |c: &str| f64_of(row, c).filter(|v| *v > 0.0);
    rec.usage_total = Some(SessionUsage {
        tokens: TokenUsage {
            input: int_of(row, "input_tokens"),
            output: int_of(row, "output_tokens"),
            cache_read: int_of(row, "cache_read_tokens"),
            cache_write: int_of(row, "cache_write_tokens"),
            reasoning: int_of(row, "reasoning_tokens"),
        },
        api_calls: int_of(row, "api_call_count"),
        reported_cost: positive("actual_cost_usd").or_else(|| positive("estimated_cost_usd")),
        model,
        cost_usd: 0.0,
        cost_flags: 0,
    });
    rec
}

/// The messages of one session: (row, time) in order.
fn transcript(
    rec: &SessionRec,
    rows: &[(Value, i64)],
    out: &mut Batch,
    report: &mut FileReport,
    path: &Path,
) {
    let sid = rec.external_id.as_str();
    // call id → (index in out.messages, part index)
    let mut calls: BTreeMap<String, (usize, usize)> = BTreeMap::new();
    let mut ordinal = 0;
    for (row, at) in rows {
        let at = *at;
        let role = str_of(row, "role").unwrap_or("");
        match role {
            "tool" => {
                report.records += 1;
                let id = str_of(row, "tool_call_id").unwrap_or("");
                let Some(&(mi, pi)) = calls.get(id) else {
                    report.skip("tool:without-call");
                    continue;
                };
                let output = content_text(row.get("content").unwrap_or(&Value::Null));
                let failed = str_of(row, "finish_reason") == Some("error");
                if let Some(stored) = out.messages[mi].message.parts.get_mut(pi)
                    && let Part::Tool(t) = &mut stored.part
                {
                    let started = t.state.started_at();
                    t.state = settled(output, failed, Value::Null, started, at);
                    stored.updated_at = at;
                }
                continue;
            }
            "user" | "assistant" => {}
            "" => {
                report.malformed(path, None, format!("a message of {sid} without a role"));
                continue;
            }
            other => {
                report.skip(format!("message:{other}"));
                continue;
            }
        }
        report.records += 1;
        ordinal += 1;
        let key = format!("{sid}:{ordinal}");
        let body = content_text(row.get("content").unwrap_or(&Value::Null));
        let summary = role == "user"
            && (body.starts_with("[CONTEXT COMPACTION") || body.starts_with("[CONTEXT SUMMARY]"));
        let role = if role == "assistant" || summary {
            Role::Assistant
        } else {
            Role::User
        };
        let mut m = message(SRC, &key, role, at);
        let mut parts: Vec<Part> = Vec::new();
        if summary {
            m.is_summary = true;
            parts.push(Part::Compaction(CompactionPart::default()));
        }
        let thought = str_of(row, "reasoning")
            .or_else(|| str_of(row, "reasoning_content"))
            .filter(|r| !r.is_empty());
        if let Some(r) = thought {
            parts.push(reasoning(r, None, None));
        }
        if !body.is_empty() {
            parts.push(text(body, false));
        }
        let mut tool_calls = Vec::new();
        if let Some(list) = row.get("tool_calls").and_then(Value::as_array) {
            for call in list {
                let id = str_of(call, "id")
                    .or_else(|| str_of(call, "call_id"))
                    .unwrap_or("");
                let name = call
                    .pointer("/function/name")
                    .and_then(Value::as_str)
                    .unwrap_or("");
                let args = call
                    .pointer("/function/arguments")
                    .cloned()
                    .unwrap_or(Value::Null);
                let input = match args {
                    Value::String(s) => serde_json::from_str(&s).unwrap_or(Value::String(s)),
                    other => other,
                };
                tool_calls.push(id.to_owned());
                parts.push(tool(id, name, input, ToolState::Running { started_at: at }));
            }
        }
        if role == Role::Assistant {
            m.model.clone_from(&rec.model);
            m.finish_reason = str_of(row, "finish_reason").map(|f| match f {
                "stop" => FinishReason::EndTurn,
                "tool_calls" => FinishReason::ToolUse,
                "length" => FinishReason::MaxTokens,
                other => FinishReason::Unknown(other.to_owned()),
            });
        }
        let first_tool = parts.len() - tool_calls.len();
        m.parts = numbered(SRC, &key, parts, at);
        for (n, id) in tool_calls.into_iter().enumerate() {
            calls.insert(id, (out.messages.len(), first_tool + n));
        }
        out.messages.push(MessageRec::new(sid.to_owned(), m));
    }
}

/// A legacy per-session log, `sessions/session_<id>.json`.
fn log(unit: &Unit<'_>, out: &mut Batch, report: &mut FileReport) -> Result<()> {
    let path = unit.path;
    let text = std::fs::read_to_string(path).map_err(ImportError::io(path))?;
    let doc: Value = serde_json::from_str(&text).map_err(|e| ImportError::Malformed {
        path: path.to_owned(),
        what: "Hermes session log",
        reason: e.to_string(),
    })?;
    let Some(id) = str_of(&doc, "session_id") else {
        return Err(ImportError::Malformed {
            path: path.to_owned(),
            what: "Hermes session log",
            reason: "no session_id".to_owned(),
        });
    };
    let started = str_of(&doc, "session_start")
        .and_then(time::parse)
        .unwrap_or(unit.mtime_ms);
    let updated = str_of(&doc, "last_updated")
        .and_then(time::parse)
        .unwrap_or(started);
    if unit.since.is_some_and(|since| updated < since) {
        return Ok(());
    }
    let mut rec = SessionRec::new(id, started);
    rec.updated_at = updated.max(started);
    rec.model = str_of(&doc, "model").map(str::to_owned);
    rec.system_prompt = str_of(&doc, "system_prompt").map(str::to_owned);
    rec.directory = str_of(&doc, "cwd")
        .or_else(|| doc.pointer("/model_config/cwd").and_then(Value::as_str))
        .map(str::to_owned);
    let msgs: Vec<Value> = doc
        .get("messages")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    // No per-message times: spread them between start and last update, in order.
    let n = msgs.len().max(1) as i64;
    let rows: Vec<(Value, i64)> = msgs
        .into_iter()
        .enumerate()
        .filter(|(_, m)| str_of(m, "role") != Some("session_meta"))
        .map(|(i, m)| {
            // In i128: a span of millennia times tens of thousands of messages
            // overflowed i64; the quotient is at most the span, so it fits again.
            let span = i128::from(updated.saturating_sub(started).max(0));
            let step = span.saturating_mul(i128::try_from(i).unwrap_or(i128::MAX)) / i128::from(n);
            let at = started.saturating_add(i64::try_from(step).unwrap_or(i64::MAX));
            (m, at)
        })
        .collect();
    let skipped = doc
        .get("messages")
        .and_then(Value::as_array)
        .map_or(0, |a| a.len() - rows.len());
    for _ in 0..skipped {
        report.skip("message:session_meta");
    }
    let from = out.messages.len();
    transcript(&rec, &rows, out, report, path);
    match_stored(unit, id, out, from)?;
    out.sessions.push(rec);
    Ok(())
}

/// Matches the messages of session `sid` just read (`out.messages[from..]`, in order)
/// against what is stored of it. Each message read takes the identity (ids, time) of a
/// stored message that says the same ([`says_the_same`]): the next one in order, else
/// any one not taken yet (a transcript whose times were rewritten may list some in
/// another order), so it is merged into it rather than stored twice. Stored messages no
/// message read takes are no longer in Hermes' transcript and are marked so, with their
/// content kept; a message found nowhere is new, placed after the message before it, and
/// keyed apart from every stored message. Messages marked before take no part: a
/// transcript that says the same again gets new messages.
fn match_stored(unit: &Unit<'_>, sid: &str, out: &mut Batch, from: usize) -> Result<()> {
    let stored = unit.state.stored_conversation(SRC, sid)?;
    if stored.is_empty() {
        return Ok(());
    }
    let taken_ids: HashSet<&str> = stored.iter().map(|m| m.id.as_str()).collect();
    let live: Vec<&Message> = stored.iter().filter(|m| m.error.is_none()).collect();
    let read = &mut out.messages[from..];
    let mut taken = vec![false; live.len()];
    let mut found: Vec<Option<usize>> = vec![None; read.len()];
    let mut next = 0;
    for (i, rec) in read.iter().enumerate() {
        if let Some(k) = (next..live.len()).find(|&k| says_the_same(live[k], &rec.message)) {
            found[i] = Some(k);
            taken[k] = true;
            next = k + 1;
        }
    }
    for (i, rec) in read.iter().enumerate() {
        if found[i].is_none()
            && let Some(k) =
                (0..live.len()).find(|&k| !taken[k] && says_the_same(live[k], &rec.message))
        {
            found[i] = Some(k);
            taken[k] = true;
        }
    }
    let mut last_at = i64::MIN;
    for (rec, found) in read.iter_mut().zip(found) {
        let m = &mut rec.message;
        if let Some(k) = found {
            let s = live[k];
            m.id.clone_from(&s.id);
            m.created_at = s.created_at;
            m.updated_at = m.updated_at.max(s.created_at);
            for (part, old) in m.parts.iter_mut().zip(&s.parts) {
                part.id.clone_from(&old.id);
                part.created_at = old.created_at;
            }
            last_at = s.created_at;
            continue;
        }
        if m.created_at <= last_at {
            let at = last_at.saturating_add(1);
            m.created_at = at;
            m.updated_at = m.updated_at.max(at);
        }
        last_at = m.created_at;
        // Its key's id may be a stored message's (the same position read at the same
        // time, saying something else now): that one keeps its content.
        if taken_ids.contains(m.id.as_str()) {
            let key = format!("{}:rewritten", m.id);
            m.id = crate::ids::message_id(SRC, &key, m.created_at);
            for (i, part) in m.parts.iter_mut().enumerate() {
                part.id = crate::ids::part_id(SRC, &key, &i.to_string(), m.created_at);
            }
        }
    }
    let gone = live
        .iter()
        .zip(&taken)
        .filter(|(_, taken)| !**taken)
        .map(|(s, _)| s.id.clone());
    let error = serde_json::json!({
        "type": "rewritten",
        "message": "no longer in the transcript in Hermes (/retry, /undo or /compress)",
    });
    mark_undone(out, &BTreeMap::new(), sid, gone, &error);
    Ok(())
}

/// Whether stored message `stored` says what `read` says: the same role and parts, each
/// the same kind with the same text, or the same call with the same input (its result
/// may have come since).
fn says_the_same(stored: &Message, read: &Message) -> bool {
    stored.role == read.role
        && stored.is_summary == read.is_summary
        && stored.parts.len() == read.parts.len()
        && stored
            .parts
            .iter()
            .zip(&read.parts)
            .all(|(a, b)| match (&a.part, &b.part) {
                (Part::Text(a), Part::Text(b)) => a.text == b.text,
                (Part::Reasoning(a), Part::Reasoning(b)) => a.text == b.text,
                (Part::Tool(a), Part::Tool(b)) => {
                    a.call_id == b.call_id && a.tool == b.tool && a.input == b.input
                }
                (a, b) => a.type_name() == b.type_name(),
            })
}
