//! OpenCode: `$XDG_DATA_HOME/opencode/opencode.db` (default `~/.local/share/opencode`,
//! `opencode-<channel>.db` for other channels, `OPENCODE_DB` overrides the file and
//! `OPENCODE_DATA_DIR`, as ccusage reads it, the directory), and the older JSON files
//! under `storage/` that versions before the database wrote.
//!
//! Kilo's CLI is a fork of OpenCode that keeps the same
//! database as `$XDG_DATA_HOME/kilo/kilo.db` (`KILO_DATA_DIR`, a comma-separated list of
//! folders, as ccusage reads it): one module, two [`Importer`] values ([`OPENCODE`],
//! [`KILO`]), as the Cline family is.
//!
//! Mapping (FORMATS.md §3):
//! - sessions, messages and parts keep OpenCode's ids (`ses_…`, `msg_…`, `prt_…`);
//!   `parent_id` makes a task session (the `task` tool's child), `title` is the title;
//! - a tool part already holds its call and its result: its state maps as it is
//!   (`pending`, `running`, `completed`, `error`; `time.compacted` kept); a `task` call
//!   names the child session it started (`state.metadata.sessionId`, there while it runs,
//!   so also when it failed) as Claude Code's Task calls do (`session_id`);
//! - usage per message is the sum of its `step-finish` parts (the message's own `tokens`
//!   hold only the last step's, while its `cost` is the sum), else the message's tokens;
//!   `input` is already without cache; `reasoning` is kept apart; the cost is OpenCode's;
//! - `summary: true` assistant messages are compaction summaries;
//! - the `event` tables (an event log repeating every update) are never read;
//! - the database is opened read-only; a session whose update time and message and part
//!   counts are what the last import saw is not read again.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use scribe_message::{
    AgentPart, CompactionPart, FinishReason, Part, PatchPart, Role, StepFinishPart, StepStartPart,
    SubtaskPart, TokenUsage, ToolState,
};
use scribe_session::SessionKind;
use serde_json::Value;

use super::{
    Batches, FileReport, Importer, Unit, f64_of, file, int_of, json_col, message, open_source_db,
    reasoning, rows, stored_part, str_of, text, tool, walk,
};
use crate::Source;
use crate::env::Env;
use crate::error::{ImportError, Result};
use crate::record::{Batch, MessageRec, Resume, SessionRec, TaskLink, TitleRank};

/// OpenCode, or a fork of it keeping the same database under its own name.
#[derive(Debug, Clone, Copy)]
pub struct OpenCodeFamily {
    source: Source,
    /// Its data folder's name under `$XDG_DATA_HOME`, and how its databases' names begin.
    name: &'static str,
}

/// OpenCode.
pub const OPENCODE: OpenCodeFamily = OpenCodeFamily {
    source: Source::OpenCode,
    name: "opencode",
};

/// Kilo's CLI.
pub const KILO: OpenCodeFamily = OpenCodeFamily {
    source: Source::Kilo,
    name: "kilo",
};

impl Importer for OpenCodeFamily {
    fn source(&self) -> Source {
        self.source
    }

    fn default_roots(&self, env: &Env) -> Vec<PathBuf> {
        match self.source {
            Source::OpenCode => {
                if let Some(db) = env.var("OPENCODE_DB") {
                    return vec![env.expand(db)];
                }
                if let Some(dir) = env.var("OPENCODE_DATA_DIR") {
                    return vec![env.expand(dir)];
                }
            }
            _ => {
                if let Some(dirs) = env.paths("KILO_DATA_DIR") {
                    return dirs;
                }
            }
        }
        let data = env
            .var("XDG_DATA_HOME")
            .map(PathBuf::from)
            .or_else(|| env.home_join(".local/share"));
        data.map(|d| vec![d.join(self.name)]).unwrap_or_default()
    }

    fn discover(&self, root: &Path, out: &mut Vec<PathBuf>) -> Result<()> {
        if root.is_file() {
            out.push(root.to_owned());
            return Ok(());
        }
        let Ok(entries) = std::fs::read_dir(root) else {
            return Ok(());
        };
        let mut dbs: Vec<PathBuf> = entries
            .filter_map(|e| e.ok().map(|e| e.path()))
            .filter(|p| {
                let name = p
                    .file_name()
                    .map(|n| n.to_string_lossy())
                    .unwrap_or_default();
                // A directory so named is not a database (SQLite: "disk I/O error").
                name.starts_with(self.name) && name.ends_with(".db") && p.is_file()
            })
            .collect();
        dbs.sort();
        out.extend(dbs);
        // Legacy JSON storage: one unit per session file.
        walk(&legacy_sessions(root), out, |p| {
            p.extension().is_some_and(|e| e == "json")
        })
    }

    fn watch_root(&self, root: &Path) -> PathBuf {
        let sessions = legacy_sessions(root);
        match sessions.parent() {
            // The storage's session folder itself: its messages and parts are beside it.
            Some(storage) if sessions == root => storage.to_owned(),
            _ => root.to_owned(),
        }
    }

    fn read(&self, unit: &Unit<'_>, out: &mut Batch, report: &mut FileReport) -> Result<Resume> {
        if unit.path.extension().is_some_and(|e| e == "json") {
            legacy(self.source, unit, out, report)?;
            Ok(Resume::default())
        } else {
            database(self.source, unit, out, report)
        }
    }
}

/// The sessions of OpenCode's database in order of creation, a batch at a time: after
/// [`Unit::max_messages`] it stops at a session's end and says where it got to
/// ([`Batches`]).
fn database(
    source: Source,
    unit: &Unit<'_>,
    out: &mut Batch,
    report: &mut FileReport,
) -> Result<Resume> {
    let path = unit.path;
    let conn = open_source_db(path)?;
    let db = |source| ImportError::source_db(path, source);
    let sessions =
        rows(&conn, "SELECT * FROM session ORDER BY time_created, id", []).map_err(db)?;
    fn order_of(s: &Value) -> (f64, &str) {
        (
            int_of(s, "time_created") as f64,
            str_of(s, "id").unwrap_or(""),
        )
    }
    let mut sessions = sessions;
    let mut batches = Batches::new(unit, &mut sessions, order_of);
    while let Some(s) = batches.next(&sessions, out.messages.len()) {
        // Said by the read whose batch holds the row, so once however many reads there are.
        let Some(id) = str_of(s, "id") else {
            report.malformed(path, None, "a session without an id");
            continue;
        };
        let updated = int_of(s, "time_updated");
        if unit.since.is_some_and(|since| updated < since) {
            continue;
        }
        let fingerprint = format!(
            "{updated}:{}:{:?}",
            parts_seen(&conn, id).map_err(db)?,
            str_of(s, "title")
        );
        if unit.state.fingerprint(source, id)?.as_deref() == Some(fingerprint.as_str()) {
            continue;
        }
        let messages = rows(
            &conn,
            "SELECT id, time_created, time_updated, data FROM message \
             WHERE session_id = ?1 ORDER BY time_created, id",
            [id],
        )
        .map_err(db)?;
        let parts = rows(
            &conn,
            "SELECT id, message_id, time_created, time_updated, data FROM part \
             WHERE session_id = ?1 ORDER BY message_id, id",
            [id],
        )
        .map_err(db)?;
        let mut by_message: BTreeMap<String, Vec<(String, i64, i64, Value)>> = BTreeMap::new();
        for p in parts {
            let (Some(pid), Some(mid)) = (str_of(&p, "id"), str_of(&p, "message_id")) else {
                continue;
            };
            by_message.entry(mid.to_owned()).or_default().push((
                pid.to_owned(),
                int_of(&p, "time_created"),
                int_of(&p, "time_updated"),
                json_col(&p, "data"),
            ));
        }
        let mut msgs = Vec::new();
        for m in messages {
            let Some(mid) = str_of(&m, "id") else {
                continue;
            };
            let data = json_col(&m, "data");
            let parts = by_message.remove(mid).unwrap_or_default();
            msgs.push((mid.to_owned(), int_of(&m, "time_created"), data, parts));
        }
        let mut rec = session_rec(
            id,
            str_of(s, "parent_id"),
            str_of(s, "directory"),
            str_of(s, "title"),
            int_of(s, "time_created"),
            updated,
        );
        rec.fingerprint = Some(fingerprint);
        if let Value::Object(model) = json_col(s, "model") {
            rec.model = model.get("id").and_then(Value::as_str).map(str::to_owned);
            rec.billing_provider = model
                .get("providerID")
                .and_then(Value::as_str)
                .map(str::to_owned);
        }
        emit_session(source, rec, msgs, out, report, path);
    }
    Ok(batches.resume())
}

/// What a session's parts look like for its fingerprint: `<count>:<newest update>`. Asked
/// per session (an index range), not for the whole table at once: a database read a
/// batch at a time would scan every part again for each batch.
fn parts_seen(conn: &rusqlite::Connection, session: &str) -> rusqlite::Result<String> {
    let row = rows(
        conn,
        "SELECT count(*) AS n, coalesce(max(time_updated), 0) AS t FROM part \
         WHERE session_id = ?1",
        [session],
    )?;
    let row = row.first().cloned().unwrap_or_default();
    Ok(format!("{}:{}", int_of(&row, "n"), int_of(&row, "t")))
}

fn session_rec(
    id: &str,
    parent: Option<&str>,
    directory: Option<&str>,
    title: Option<&str>,
    created: i64,
    updated: i64,
) -> SessionRec {
    let mut rec = SessionRec::new(id, created);
    rec.updated_at = updated.max(created);
    rec.directory = directory.map(str::to_owned);
    rec.title = title
        .filter(|t| !t.trim().is_empty())
        .map(|t| (t.to_owned(), TitleRank::Source));
    if let Some(parent) = parent.filter(|p| !p.is_empty()) {
        rec.parent = Some(parent.to_owned());
        rec.kind = SessionKind::Task;
    }
    rec
}

/// One message: (id, created, data, parts as (id, created, updated, data)).
type RawMessage = (String, i64, Value, Vec<(String, i64, i64, Value)>);

fn emit_session(
    source: Source,
    mut rec: SessionRec,
    msgs: Vec<RawMessage>,
    out: &mut Batch,
    report: &mut FileReport,
    path: &Path,
) {
    let mut models: BTreeMap<String, u64> = BTreeMap::new();
    let session = rec.external_id.clone();
    for (mid, created, data, parts) in msgs {
        report.records += 1;
        let role = match str_of(&data, "role") {
            Some("user") => Role::User,
            Some("assistant") => Role::Assistant,
            other => {
                report.malformed(path, None, format!("message {mid}: role {other:?}"));
                continue;
            }
        };
        let at = data
            .pointer("/time/created")
            .and_then(Value::as_i64)
            .unwrap_or(created);
        rec.updated_at = rec.updated_at.max(at);
        let mut m = message(source, &mid, role, at);
        m.agent = str_of(&data, "agent").map(str::to_owned);
        m.model = str_of(&data, "modelID")
            .or_else(|| data.pointer("/model/modelID").and_then(Value::as_str))
            .map(str::to_owned);
        m.provider = str_of(&data, "providerID")
            .or_else(|| data.pointer("/model/providerID").and_then(Value::as_str))
            .map(str::to_owned);
        m.is_summary = data.get("summary").and_then(Value::as_bool) == Some(true);
        m.finished_at = data.pointer("/time/completed").and_then(Value::as_i64);
        m.updated_at = m.finished_at.unwrap_or(at).max(at);
        m.finish_reason = str_of(&data, "finish").map(finish);
        m.error = data.get("error").filter(|e| !e.is_null()).cloned();
        let mut step_usage: Option<TokenUsage> = None;
        for (position, (pid, pcreated, pupdated, pdata)) in parts.into_iter().enumerate() {
            let part = part_of(&pdata, &mut step_usage);
            let mut stored = stored_part(source, &pid, "", position as i64, part, pcreated.max(0));
            stored.id = crate::ids::part_id(source, &mid, &pid, at);
            stored.updated_at = pupdated.max(pcreated);
            if let Some(child) = task_child(&pdata) {
                out.task_links.push(TaskLink {
                    part_id: stored.id.clone(),
                    child: child.to_owned(),
                });
            }
            m.parts.push(stored);
        }
        let own = data.get("tokens").map(tokens).unwrap_or_default();
        m.usage = step_usage.unwrap_or(own);
        let reported = f64_of(&data, "cost");
        if role == Role::Assistant
            && let Some(model) = &m.model
        {
            *models.entry(model.clone()).or_default() += 1;
        }
        let calls = i64::from(role == Role::Assistant && !m.usage.is_zero());
        out.messages.push(MessageRec {
            session: session.clone(),
            message: m,
            api_calls: calls,
            reported_cost: reported,
            cost_flags: 0,
            cache_write_1h: 0,
        });
    }
    if rec.model.is_none() {
        rec.model = models.into_iter().max_by_key(|(_, n)| *n).map(|(m, _)| m);
    }
    out.sessions.push(rec);
}

/// The child session a `task` tool part started (`state.metadata.sessionId`, which
/// OpenCode sets while the call runs, so a call that failed has it too).
fn task_child(part: &Value) -> Option<&str> {
    if str_of(part, "type")? != "tool" || str_of(part, "tool")? != "task" {
        return None;
    }
    part.pointer("/state/metadata/sessionId")
        .and_then(Value::as_str)
        .filter(|id| !id.is_empty())
}

/// OpenCode tokens as Scribe's buckets: `input` is already without cache.
fn tokens(t: &Value) -> TokenUsage {
    let cache = t.get("cache").cloned().unwrap_or(Value::Null);
    TokenUsage {
        input: int_of(t, "input"),
        output: int_of(t, "output"),
        cache_read: int_of(&cache, "read"),
        cache_write: int_of(&cache, "write"),
        reasoning: int_of(t, "reasoning"),
    }
}

fn finish(reason: &str) -> FinishReason {
    match reason {
        "stop" | "end_turn" => FinishReason::EndTurn,
        "tool-calls" | "tool_calls" => FinishReason::ToolUse,
        "length" | "max_tokens" => FinishReason::MaxTokens,
        "error" => FinishReason::Error,
        "aborted" | "cancelled" => FinishReason::Canceled,
        other => FinishReason::Unknown(other.to_owned()),
    }
}

/// A part's JSON as a Scribe part; `step-finish` usage is added to `steps`.
fn part_of(d: &Value, steps: &mut Option<TokenUsage>) -> Part {
    match str_of(d, "type").unwrap_or("") {
        "text" => {
            let mut p = text(str_of(d, "text").unwrap_or(""), false);
            if let Part::Text(t) = &mut p {
                t.synthetic = d.get("synthetic").and_then(Value::as_bool) == Some(true);
            }
            p
        }
        "reasoning" => reasoning(
            str_of(d, "text").unwrap_or(""),
            None,
            d.get("metadata").filter(|m| !m.is_null()).cloned(),
        ),
        "tool" => {
            let state = d.get("state").cloned().unwrap_or(Value::Null);
            let start = state.pointer("/time/start").and_then(Value::as_i64);
            let end = state.pointer("/time/end").and_then(Value::as_i64);
            let s = match str_of(&state, "status").unwrap_or("") {
                "completed" => ToolState::Completed {
                    output: super::content_text(state.get("output").unwrap_or(&Value::Null)),
                    title: str_of(&state, "title").unwrap_or("").to_owned(),
                    metadata: state.get("metadata").cloned().unwrap_or(Value::Null),
                    started_at: start.unwrap_or(0),
                    ended_at: end.or(start).unwrap_or(0),
                },
                "error" => ToolState::Error {
                    message: super::content_text(state.get("error").unwrap_or(&Value::Null)),
                    started_at: start,
                    ended_at: end.or(start).unwrap_or(0),
                },
                "running" => ToolState::Running {
                    started_at: start.unwrap_or(0),
                },
                _ => ToolState::Pending,
            };
            let mut p = tool(
                str_of(d, "callID").unwrap_or(""),
                str_of(d, "tool").unwrap_or(""),
                state.get("input").cloned().unwrap_or(Value::Null),
                s,
            );
            if let Part::Tool(t) = &mut p {
                t.compacted_at = state.pointer("/time/compacted").and_then(Value::as_i64);
            }
            p
        }
        "file" => {
            let url = str_of(d, "url").unwrap_or("").to_owned();
            file(
                str_of(d, "mime").unwrap_or("application/octet-stream"),
                str_of(d, "filename").map(str::to_owned),
                url,
            )
        }
        "step-start" => Part::StepStart(StepStartPart::default()),
        "step-finish" => {
            let t = d.get("tokens").map(tokens).unwrap_or_default();
            *steps.get_or_insert_with(TokenUsage::default) += t;
            Part::StepFinish(StepFinishPart {
                reason: finish(str_of(d, "reason").unwrap_or("")),
                tokens: t,
                cost: f64_of(d, "cost").unwrap_or(0.0),
                extra: serde_json::Map::new(),
            })
        }
        "subtask" => Part::Subtask(SubtaskPart {
            prompt: str_of(d, "prompt").unwrap_or("").to_owned(),
            description: str_of(d, "description").unwrap_or("").to_owned(),
            agent: str_of(d, "agent").unwrap_or("").to_owned(),
            extra: serde_json::Map::new(),
        }),
        "agent" => Part::Agent(AgentPart {
            name: str_of(d, "name").unwrap_or("").to_owned(),
            extra: serde_json::Map::new(),
        }),
        "patch" => Part::Patch(PatchPart {
            hash: str_of(d, "hash").unwrap_or("").to_owned(),
            files: d
                .get("files")
                .and_then(Value::as_array)
                .map(|f| {
                    f.iter()
                        .filter_map(|x| x.as_str().map(str::to_owned))
                        .collect()
                })
                .unwrap_or_default(),
            extra: serde_json::Map::new(),
        }),
        "compaction" => Part::Compaction(CompactionPart {
            auto: d.get("auto").and_then(Value::as_bool) == Some(true),
            ..CompactionPart::default()
        }),
        // snapshot, retry and newer types: kept as they are.
        _ => Part::Unknown(if d.get("type").and_then(Value::as_str).is_some() {
            d.clone()
        } else {
            serde_json::json!({"type": "opencode", "data": d})
        }),
    }
}

/// The session folder of the legacy JSON storage under `root`: OpenCode's data folder
/// (`…/opencode/storage/session`), the storage folder itself (`…/storage/session`, beside
/// `message` and `part`), or that session folder. A user points at the folder they see
/// their history in; before, only the data folder found it ("no history found").
fn legacy_sessions(root: &Path) -> PathBuf {
    let holds_storage = |dir: &Path| dir.join("session").is_dir() && dir.join("message").is_dir();
    if !root.join("storage/session").is_dir() {
        if holds_storage(root) {
            return root.join("session");
        }
        if root.file_name().is_some_and(|n| n == "session")
            && root.parent().is_some_and(holds_storage)
        {
            return root.to_owned();
        }
    }
    root.join("storage/session")
}

/// A session of the JSON storage OpenCode used before its database.
fn legacy(source: Source, unit: &Unit<'_>, out: &mut Batch, report: &mut FileReport) -> Result<()> {
    let path = unit.path;
    let read_json = |p: &Path| -> Option<Value> {
        serde_json::from_str(&std::fs::read_to_string(p).ok()?).ok()
    };
    let Some(s) = read_json(path) else {
        report.malformed(path, None, "not a JSON session");
        return Ok(());
    };
    let stem = path
        .file_stem()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let id = str_of(&s, "id").map_or(stem, str::to_owned);
    // …/storage/session/<project>/<id>.json → …/storage
    let Some(storage) = path.parent().and_then(Path::parent).and_then(Path::parent) else {
        return Ok(());
    };
    let updated = s
        .pointer("/time/updated")
        .and_then(Value::as_i64)
        .unwrap_or(0);
    if unit.since.is_some_and(|since| updated < since) {
        return Ok(());
    }
    let created = s
        .pointer("/time/created")
        .and_then(Value::as_i64)
        .unwrap_or(updated);
    let list = |dir: PathBuf| -> Vec<PathBuf> {
        let mut v: Vec<PathBuf> = std::fs::read_dir(dir)
            .map(|d| d.filter_map(|e| e.ok().map(|e| e.path())).collect())
            .unwrap_or_default();
        v.sort();
        v
    };
    let mut msgs = Vec::new();
    for mpath in list(storage.join("message").join(&id)) {
        let Some(m) = read_json(&mpath) else {
            report.malformed(&mpath, None, "not a JSON message");
            continue;
        };
        let mid = str_of(&m, "id").map(str::to_owned).unwrap_or_else(|| {
            mpath
                .file_stem()
                .map(|n| n.to_string_lossy().into_owned())
                .unwrap_or_default()
        });
        let mcreated = m
            .pointer("/time/created")
            .and_then(Value::as_i64)
            .unwrap_or(created);
        let mut parts = Vec::new();
        for ppath in list(storage.join("part").join(&mid)) {
            let Some(p) = read_json(&ppath) else {
                report.malformed(&ppath, None, "not a JSON part");
                continue;
            };
            let pid = str_of(&p, "id").map(str::to_owned).unwrap_or_else(|| {
                ppath
                    .file_stem()
                    .map(|n| n.to_string_lossy().into_owned())
                    .unwrap_or_default()
            });
            let pat = p
                .pointer("/time/start")
                .and_then(Value::as_i64)
                .unwrap_or(mcreated);
            parts.push((pid, pat, pat, p));
        }
        msgs.push((mid, mcreated, m, parts));
    }
    let mut rec = session_rec(
        &id,
        str_of(&s, "parentID"),
        str_of(&s, "directory"),
        str_of(&s, "title"),
        created,
        updated,
    );
    rec.fingerprint = Some(format!("json:{updated}"));
    emit_session(source, rec, msgs, out, report, path);
    Ok(())
}
