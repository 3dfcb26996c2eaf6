//! Scribe's own export and import: a JSON Lines export file of many sessions (what `scribe
//! export --all -f jsonl` writes) read, parsed and stored into an empty database through
//! the bulk path (`SessionService::import_many`, what `scribe import FILE` runs) with both
//! search indexes built, timed end to end; and export of the long session.

use std::io::{BufWriter, Write};
use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use scribe_db::Database;
use scribe_message::Message;
use scribe_session::{ExportSelection, ImportOutcome, SessionExport, SessionService};
use serde::Serialize;

use crate::Result;
use crate::data::Gen;
use crate::stats::{ms, rate};

/// Import and export figures.
#[derive(Debug, Clone, Serialize)]
pub struct TransferResult {
    /// Sessions in the file.
    pub sessions: usize,
    /// Messages in the file.
    pub messages: usize,
    /// Bytes of the file.
    pub file_bytes: u64,
    /// Read, parse, store and index, ms.
    pub import_ms: f64,
    /// Messages per second, end to end.
    pub import_per_s: f64,
    /// Of that, reading and parsing the file, ms.
    pub parse_ms: f64,
    /// Of that, indexing after the last session was stored, ms: each batch indexes its own
    /// parts in its transaction (`scribe_db::bulk::index_new_parts`), so this is what was
    /// left (nothing, unless something else queued parts meanwhile).
    pub index_ms: f64,
    /// Messages of the exported session.
    pub export_messages: usize,
    /// Export of one long session, ms.
    pub export_ms: f64,
    /// Messages exported per second.
    pub export_per_s: f64,
}

/// The id of the `n`th session of an export file [`write_file`] writes.
pub fn session_id(n: usize) -> String {
    format!("ses_import{n:08}")
}

/// A session export of `messages` generated messages, as JSON.
fn session_export(g: &mut Gen, n: usize, messages: usize, time: &mut i64) -> Result<SessionExport> {
    let id = session_id(n);
    let session = serde_json::json!({
        "id": id, "parent_session_id": null, "kind": "normal", "source": "import",
        "user_id": null, "directory": "/home/dev/project", "title": format!("imported {n}"),
        "model": "anthropic/claude-bench", "model_config": null, "system_prompt": null,
        "permission": null, "message_count": messages, "tool_call_count": 0,
        "api_call_count": 0, "tokens": {}, "estimated_cost_usd": 0.0,
        "actual_cost_usd": null, "billing_provider": null, "billing_base_url": null,
        "billing_mode": null, "cost_status": null, "cost_source": null,
        "pricing_version": null, "summary_message_id": null, "created_at": *time,
        "updated_at": *time, "ended_at": null, "end_reason": null, "archived_at": null,
        "compacting_at": null
    });
    let mut export = SessionExport {
        session: serde_json::from_value(session)?,
        messages: Vec::with_capacity(messages),
        files: Vec::new(),
        rolled_up: None,
    };
    let mut tools = 0;
    for m in 0..messages {
        *time += 1;
        let (role, parts) = g.message(m, *time);
        tools += parts
            .iter()
            .filter(|p| matches!(p, scribe_message::Part::Tool(_)))
            .count();
        let msg: Message = crate::corpus::message(&id, role, parts, *time, false);
        export.messages.push(msg);
    }
    export.session.tool_call_count = i64::try_from(tools)?;
    Ok(export)
}

/// Writes `sessions` × `per_session` generated messages to `file` as JSON Lines, what
/// `scribe export --all -f jsonl` writes (sessions [`session_id`]`(0..sessions)`); its size.
pub fn write_file(file: &Path, seed: u64, sessions: usize, per_session: usize) -> Result<u64> {
    let mut g = Gen::new(seed ^ 0x1b);
    let mut time = 1_700_000_000_000_i64;
    let mut out = BufWriter::new(std::fs::File::create(file)?);
    for n in 0..sessions {
        let export = session_export(&mut g, n, per_session, &mut time)?;
        serde_json::to_writer(&mut out, &export)?;
        writeln!(out)?;
    }
    out.flush()?;
    Ok(std::fs::metadata(file)?.len())
}

/// What [`import_file`] stored and how long it took.
#[derive(Debug, Clone)]
pub struct Imported {
    /// The sessions stored.
    pub ids: Vec<String>,
    /// Their messages.
    pub messages: usize,
    /// Read, parse, store and index.
    pub time: Duration,
    /// Of that, reading and parsing the file.
    pub parsed: Duration,
    /// Of that, indexing after the last session was stored.
    pub indexing: Duration,
}

/// Imports the JSON Lines export `file` into the store at `location` (an SQLite file or a
/// PostgreSQL location) as `scribe import FILE` does: the whole file read and parsed
/// (nothing is stored from a malformed one), then the bulk path
/// (`SessionService::import_many`). A session skipped or failed is an error.
pub fn import_file(file: &Path, location: &str) -> Result<Imported> {
    let started = Instant::now();
    let text = std::fs::read_to_string(file)?;
    let exports = text
        .lines()
        .filter(|l| !l.trim().is_empty())
        .map(serde_json::from_str::<SessionExport>)
        .collect::<std::result::Result<Vec<_>, _>>()?;
    drop(text);
    let parsed = started.elapsed();
    let db = Arc::new(Database::open(location)?);
    let target = SessionService::new(Arc::clone(&db));
    let mut indexing: Option<Instant> = None;
    let outcomes = target.import_many(exports, |p| {
        if p.to_index > 0 && indexing.is_none() {
            indexing = Some(Instant::now());
        }
    })?;
    let index_time = indexing.map(|t| t.elapsed()).unwrap_or_default();
    let time = started.elapsed();
    let mut imported = Imported {
        ids: Vec::new(),
        messages: 0,
        time,
        parsed,
        indexing: index_time,
    };
    for outcome in outcomes {
        match outcome? {
            ImportOutcome::Imported { session, .. } => {
                imported.messages += usize::try_from(session.message_count)?;
                imported.ids.push(session.id);
            }
            ImportOutcome::Skipped { reason } => {
                return Err(format!("import skipped: {reason}").into());
            }
        }
    }
    Ok(imported)
}

/// Writes `sessions` × `per_session` messages as JSON Lines to `file`, then imports the
/// file into a new database at `db_path`.
pub fn run(
    file: &Path,
    db_path: &Path,
    seed: u64,
    sessions: usize,
    per_session: usize,
    export_from: (&SessionService, &str),
) -> Result<TransferResult> {
    let file_bytes = write_file(file, seed, sessions, per_session)?;
    let location = db_path.to_str().ok_or("database path is not UTF-8")?;
    let imported = import_file(file, location)?;
    let messages = sessions * per_session;
    if imported.messages != messages {
        return Err(format!("imported {} messages of {messages}", imported.messages).into());
    }
    let (import_time, parsed, index_time) = (imported.time, imported.parsed, imported.indexing);

    let (from, session) = export_from;
    let started = Instant::now();
    let exports = from.export(&ExportSelection::One(session.to_owned()))?;
    let export_time = started.elapsed();
    let export_messages = exports.iter().map(|e| e.messages.len()).sum();
    Ok(TransferResult {
        sessions,
        messages,
        file_bytes,
        import_ms: ms(import_time),
        import_per_s: rate(messages, import_time),
        parse_ms: ms(parsed),
        index_ms: ms(index_time),
        export_messages,
        export_ms: ms(export_time),
        export_per_s: rate(export_messages, export_time),
    })
}
