//! Export of the long session (`SessionService::export`) and its import into an empty
//! database (`SessionService::import`, one transaction).

use std::path::Path;
use std::sync::Arc;
use std::time::Instant;

use scribe_db::Database;
use scribe_session::{ExportSelection, ImportOutcome, SessionService};
use serde::Serialize;

use crate::Result;
use crate::stats::{ms, rate};

/// Export and import times.
#[derive(Debug, Clone, Serialize)]
pub struct TransferResult {
    /// Messages moved.
    pub messages: usize,
    /// Export time, ms.
    pub export_ms: f64,
    /// Messages exported per second.
    pub export_per_s: f64,
    /// Import time, ms.
    pub import_ms: f64,
    /// Messages imported per second.
    pub import_per_s: f64,
}

/// Exports `session` from `from` and imports it into a new database at `to`.
pub fn run(from: &SessionService, session: &str, to: &Path) -> Result<TransferResult> {
    let started = Instant::now();
    let mut exports = from.export(&ExportSelection::One(session.to_owned()))?;
    let export_time = started.elapsed();
    let export = exports.pop().ok_or("export returned no session")?;
    let messages = export.messages.len();

    let target = SessionService::new(Arc::new(Database::open(to)?));
    let started = Instant::now();
    let outcome = target.import(&export)?;
    let import_time = started.elapsed();
    if let ImportOutcome::Skipped { reason } = outcome {
        return Err(format!("import skipped: {reason}").into());
    }
    let stored = target.get(session)?.message_count;
    if usize::try_from(stored)? != messages {
        return Err(format!("imported {stored} messages of {messages}").into());
    }
    Ok(TransferResult {
        messages,
        export_ms: ms(export_time),
        export_per_s: rate(messages, export_time),
        import_ms: ms(import_time),
        import_per_s: rate(messages, import_time),
    })
}
