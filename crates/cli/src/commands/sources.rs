//! `scribe sources`: the agents' histories found on this machine, their size, and when
//! each was last imported.

use std::io::Write;
use std::path::PathBuf;

use clap::Args;
use scribe_import::{Env, Source, scan, sources};
use serde::Serialize;

use crate::context::Context;
use crate::error::CliError;
use crate::json;
use crate::ui;

/// List the agents' histories `scribe import --from` can read.
///
/// For each agent: where it keeps history (its own overrides applied), how many files
/// and bytes are there, and when and how much of it was last imported.
#[derive(Debug, Args)]
pub struct SourcesCmd {
    /// Print JSON: {"sources": [...]}.
    #[arg(long)]
    pub json: bool,
}

#[derive(Serialize)]
struct SourceRow {
    source: &'static str,
    locations: Vec<PathBuf>,
    found: bool,
    files: usize,
    bytes: i64,
    sessions_imported: i64,
    files_imported: i64,
    last_imported_at: Option<i64>,
}

#[derive(Serialize)]
struct SourcesJson {
    sources: Vec<SourceRow>,
}

impl SourcesCmd {
    /// Runs the command.
    pub fn run(self, ctx: &Context) -> Result<(), CliError> {
        let env = Env::from_process();
        let imported = scribe_import::sink::source_states(&ctx.store)?;
        let mut rows = Vec::new();
        for source in Source::ALL {
            let importer = sources::importer(source);
            let locations = importer.default_roots(&env);
            let files = scan(importer, &locations)?;
            let done = imported.get(source.name());
            rows.push(SourceRow {
                source: source.name(),
                found: !files.is_empty(),
                files: files.len(),
                bytes: files.iter().map(|f| f.1).sum(),
                sessions_imported: done.map_or(0, |r| r.sessions),
                files_imported: done.map_or(0, |r| r.files),
                last_imported_at: done.and_then(|r| r.last_imported_at),
                locations,
            });
        }
        let mut out = anstream::stdout().lock();
        if self.json {
            return json::print(&mut out, &SourcesJson { sources: rows });
        }
        let now = scribe_db::now_ms();
        let mut table = ui::table([
            "source",
            "location",
            "files",
            "size",
            "imported",
            "last import",
        ]);
        for r in &rows {
            let location = r
                .locations
                .iter()
                .map(|p| p.display().to_string())
                .collect::<Vec<_>>()
                .join(", ");
            table.add_row(vec![
                r.source.to_owned(),
                match (r.found, location.is_empty()) {
                    (true, _) => location,
                    // No home directory: no location to look in at all.
                    (false, true) => "(none)".to_owned(),
                    (false, false) => format!("{location} (none)"),
                },
                r.files.to_string(),
                size(r.bytes),
                ui::plural(r.sessions_imported, "session"),
                r.last_imported_at
                    .map_or("never".to_owned(), |t| ui::ago(t, now)),
            ]);
        }
        writeln!(out, "{}", ui::render(&mut table, &[0, 2, 3, 4, 5]))?;
        Ok(())
    }
}

/// Bytes for people: `812 B`, `4.1 KB`, `12.3 MB`.
fn size(bytes: i64) -> String {
    #[allow(clippy::cast_precision_loss)] // display only
    let b = bytes as f64;
    match bytes {
        ..1_000 => format!("{bytes} B"),
        1_000..1_000_000 => format!("{:.1} KB", b / 1e3),
        1_000_000..1_000_000_000 => format!("{:.1} MB", b / 1e6),
        _ => format!("{:.1} GB", b / 1e9),
    }
}
