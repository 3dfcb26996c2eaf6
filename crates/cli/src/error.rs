//! The CLI's report error: what went wrong, for a human, on one line.

/// A failed command.
#[derive(Debug, thiserror::Error)]
pub enum CliError {
    /// The database refused or failed the operation.
    #[error(transparent)]
    Db(#[from] scribe_db::Error),
    /// No `--db`, no `SCRIBE_DB`, and the platform has no data directory.
    #[error("cannot find a data directory for the database; pass --db PATH or set SCRIBE_DB")]
    NoDataDir,
    /// Writing the output failed (e.g. a closed pipe).
    #[error("cannot write output")]
    Output(#[from] std::io::Error),
    /// Encoding JSON output failed.
    #[error("cannot encode output")]
    Json(#[from] serde_json::Error),
}

/// `err` and its sources joined with `: `, skipping a source whose text its parent
/// already shows.
pub fn one_line(err: &dyn std::error::Error) -> String {
    let mut line = err.to_string();
    let mut source = err.source();
    while let Some(cause) = source {
        let text = cause.to_string();
        if !line.contains(&text) {
            line.push_str(": ");
            line.push_str(&text);
        }
        source = cause.source();
    }
    line
}
