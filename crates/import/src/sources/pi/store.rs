//! OpenClaw's agent database (2026.9 on): one SQLite file per agent,
//! `agents/<agent>/agent/openclaw-agent.sqlite` under OpenClaw's state folder, where it
//! keeps its sessions' transcripts in place of the JSON Lines files before it.
//!
//! Its `transcript_events` table holds a row per transcript record (`session_id`, `seq`,
//! `created_at` in ms): the record as the JSON Lines file had it, in `event_json`, or
//! (2026.9.7 on, for a large record) compressed with zstd in `event_zstd` with its
//! length in `event_utf8_bytes`, `event_json` then empty. A session's records, in `seq`
//! order, are read as a pi session file is (the parent module), so a session OpenClaw
//! moved from its file into the database is the same session, its messages stored once.
//!
//! `session_windows` says more of each session (each column read only when there):
//! its `display_name` (the chat or channel it answers: the title, when the user gave
//! none), its `model` (when no reply names one), when its run ended and how (`ended_at`,
//! `status`); `previous_session_id` and `reason`, the
//! session it went on from (after a compaction or a rollover: a continuation of it; a
//! fork or a rewind: a fork of it; a reset starts a conversation of its own); and
//! `parent_session_key` or `spawned_by`, the conversation whose run started it (a
//! sub-agent: a task of that conversation's session active when it began).
//!
//! Only those two tables are read: the database also keeps the agent's credentials
//! (`auth_profile_store`), which Scribe never reads. A session whose record count, last
//! `seq`, size and window's update time are what the last import saw is not read again;
//! a record that cannot be read (not JSON, a compressed one that is not zstd or not of
//! its length) is reported and the session read without it.

use std::collections::HashMap;

use scribe_session::SessionKind;
use serde_json::Value;

use super::super::{
    Batches, FileReport, Unit, by_created_at, columns, int_of, open_source_db, rows, str_of,
    time_of, unzstd,
};
use super::Session;
use crate::Source;
use crate::error::{ImportError, Result};
use crate::record::{Batch, Resume, TitleRank};

/// The database's file name.
pub(super) const DB: &str = "openclaw-agent.sqlite";

/// Reads OpenClaw's agent database at `unit.path`, a batch of sessions at a time.
pub(super) fn read(
    source: Source,
    unit: &Unit<'_>,
    out: &mut Batch,
    report: &mut FileReport,
) -> Result<Resume> {
    let path = unit.path;
    let conn = open_source_db(path)?;
    let db = |source| ImportError::source_db(path, source);
    let event_columns = columns(&conn, "transcript_events").map_err(db)?;
    if event_columns.is_empty() {
        // An agent that has kept no transcript here yet.
        report.skip("database:no-transcripts");
        return Ok(Resume::default());
    }
    let compressed = event_columns.iter().any(|c| c == "event_zstd");
    let size = if compressed {
        "coalesce(length(event_json), 0) + coalesce(length(event_zstd), 0)"
    } else {
        "coalesce(length(event_json), 0)"
    };
    let mut sessions = rows(
        &conn,
        &format!(
            "SELECT session_id AS id, min(created_at) AS created_at, \
             max(created_at) AS last_at, count(*) AS n, max(seq) AS last, \
             sum({size}) AS bytes FROM transcript_events GROUP BY session_id"
        ),
        [],
    )
    .map_err(db)?;
    let windows = windows(&conn).map_err(db)?;
    let mut batches = Batches::new(unit, &mut sessions, by_created_at);
    while let Some(s) = batches.next(&sessions, out.messages.len()) {
        let Some(id) = str_of(s, "id").filter(|id| !id.is_empty()) else {
            report.malformed(path, None, "transcript records without a session id");
            continue;
        };
        let window = windows.get(id).unwrap_or(&Value::Null);
        let created = time_of(s, "created_at").unwrap_or(unit.mtime_ms);
        let updated = [time_of(s, "last_at"), time_of(window, "updated_at")]
            .into_iter()
            .flatten()
            .fold(created, i64::max);
        if unit.since.is_some_and(|since| updated < since) {
            continue;
        }
        let fingerprint = format!(
            "{}:{}:{}:{}",
            int_of(s, "n"),
            int_of(s, "last"),
            int_of(s, "bytes"),
            window.get("updated_at").unwrap_or(&Value::Null)
        );
        if unit.state.fingerprint(source, id)?.as_deref() == Some(fingerprint.as_str()) {
            continue;
        }
        let entries = records(&conn, id, compressed, report, path).map_err(db)?;
        let mut session = Session::new(source, &entries, id.to_owned(), created);
        for entry in entries.iter().skip(session.header) {
            session.entry(entry, report);
        }
        let sessions_before = out.sessions.len();
        session.finish(path, out);
        let Some(rec) = out.sessions.get_mut(sessions_before) else {
            continue;
        };
        rec.fingerprint = Some(fingerprint);
        rec.updated_at = rec.updated_at.max(updated);
        if rec.title.is_none() {
            rec.title = str_of(window, "display_name")
                .map(str::trim)
                .filter(|name| !name.is_empty())
                .map(|name| (name.to_owned(), TitleRank::Source));
        }
        if rec.model.is_none() {
            rec.model = str_of(window, "model")
                .filter(|m| !m.trim().is_empty())
                .map(str::to_owned);
        }
        // A run that ended (a sub-agent's): when, and how (`done`, `failed`, `killed`,
        // `timeout`).
        if let Some(ended) = time_of(window, "ended_at") {
            rec.ended_at = Some(ended.max(rec.created_at));
            rec.end_reason = str_of(window, "status")
                .filter(|s| !s.is_empty())
                .map(str::to_owned);
        }
        if rec.parent.is_none()
            && let Some((parent, kind)) = parent_of(id, window, created, &windows)
        {
            rec.parent = Some(parent);
            rec.kind = kind;
        }
    }
    Ok(batches.resume())
}

/// The rows of `session_windows` (when the database has it) by session id.
fn windows(conn: &rusqlite::Connection) -> rusqlite::Result<HashMap<String, Value>> {
    if columns(conn, "session_windows")?.is_empty() {
        return Ok(HashMap::new());
    }
    Ok(rows(conn, "SELECT * FROM session_windows", [])?
        .into_iter()
        .filter_map(|w| Some((str_of(&w, "session_id")?.to_owned(), w)))
        .collect())
}

/// The session `id` (its window `window`, begun at `created`) went on from or was started
/// by, and what it is to it.
fn parent_of(
    id: &str,
    window: &Value,
    created: i64,
    windows: &HashMap<String, Value>,
) -> Option<(String, SessionKind)> {
    let previous = str_of(window, "previous_session_id").filter(|p| *p != id && !p.is_empty());
    let kind = match str_of(window, "reason") {
        Some("compaction" | "rollover") => Some(SessionKind::Continuation),
        Some("fork" | "rewind") => Some(SessionKind::Fork),
        _ => None,
    };
    if let (Some(previous), Some(kind)) = (previous, kind) {
        return Some((previous.to_owned(), kind));
    }
    // A sub-agent: the session of the conversation that started it, the one of its
    // windows begun last before it (or its first, when none was).
    let key = str_of(window, "parent_session_key")
        .or_else(|| str_of(window, "spawned_by"))
        .filter(|k| !k.is_empty() && Some(*k) != str_of(window, "session_key"))?;
    let begun = |w: &Value| time_of(w, "created_at").unwrap_or(i64::MIN);
    let of_key = windows
        .iter()
        .filter(|(other, w)| other.as_str() != id && str_of(w, "session_key") == Some(key));
    let parent = of_key
        .clone()
        .filter(|(_, w)| begun(w) <= created)
        .max_by_key(|(other, w)| (begun(w), other.as_str()))
        .or_else(|| of_key.min_by_key(|(other, w)| (begun(w), other.as_str())))?;
    Some((parent.0.clone(), SessionKind::Task))
}

/// Session `id`'s records in `seq` order, each as JSON; a record that cannot be read is
/// reported and left out.
fn records(
    conn: &rusqlite::Connection,
    id: &str,
    compressed: bool,
    report: &mut FileReport,
    path: &std::path::Path,
) -> rusqlite::Result<Vec<Value>> {
    use rusqlite::types::ValueRef;
    let sql = if compressed {
        "SELECT seq, event_json, event_zstd, event_utf8_bytes FROM transcript_events \
         WHERE session_id = ?1 ORDER BY seq"
    } else {
        "SELECT seq, event_json, NULL, NULL FROM transcript_events \
         WHERE session_id = ?1 ORDER BY seq"
    };
    let mut stmt = conn.prepare(sql)?;
    let mut rows = stmt.query([id])?;
    let mut out = Vec::new();
    while let Some(row) = rows.next()? {
        let seq = row.get_ref(0)?.as_i64().unwrap_or_default();
        let text = match (row.get_ref(1)?, row.get_ref(2)?) {
            (ValueRef::Text(json), _) => Ok(String::from_utf8_lossy(json).into_owned()),
            (ValueRef::Null, ValueRef::Blob(frame)) => {
                let length = row.get_ref(3)?.as_i64().ok();
                decompress(frame, length)
            }
            _ => Err("neither JSON nor a compressed record".to_owned()),
        };
        match text.and_then(|t| serde_json::from_str::<Value>(&t).map_err(|e| e.to_string())) {
            Ok(record) => out.push(record),
            Err(why) => report.malformed(path, None, format!("session {id}, record {seq}: {why}")),
        }
    }
    Ok(out)
}

/// A record OpenClaw compressed, as text, when it is zstd of `length` bytes of UTF-8.
fn decompress(frame: &[u8], length: Option<i64>) -> std::result::Result<String, String> {
    let bytes = unzstd(frame)?;
    if let Some(length) = length
        && u64::try_from(length).ok() != Some(bytes.len() as u64)
    {
        return Err(format!(
            "the compressed record is {} bytes, not the {length} its row says",
            bytes.len()
        ));
    }
    String::from_utf8(bytes).map_err(|_| "the compressed record is not UTF-8".to_owned())
}
