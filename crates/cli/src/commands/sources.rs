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
/// and bytes are there, and when and how much of it was last imported. Under the table,
/// the usage limits an agent reported last (Codex: how much of its five-hour and weekly
/// windows the plan has used, as of its newest imported record).
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
    /// The newest usage-limit snapshot: `{"at", "plan"?, "windows": [{"minutes",
    /// "used_percent", "resets_at"}]}` (times in ms); `null` when the agent reported none.
    rate_limits: Option<serde_json::Value>,
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
                rate_limits: done.and_then(|r| r.rate_limits.clone()),
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
        for r in &rows {
            if let Some(line) = r.rate_limits.as_ref().and_then(|l| limits_line(l, now)) {
                writeln!(out, "{} {line}", r.source)?;
            }
        }
        Ok(())
    }
}

/// A usage-limit snapshot for people: `usage limits as of 2026-02-23 16:40 UTC: 19% of
/// the 5-hour window (resets 2026-02-23 16:40), 6% of the weekly window (resets …)`; a
/// reset already past at `now` says so, since the figure no longer holds.
fn limits_line(limits: &serde_json::Value, now: i64) -> Option<String> {
    let at = limits.get("at")?.as_i64()?;
    let windows: Vec<String> = limits
        .get("windows")?
        .as_array()?
        .iter()
        .filter_map(|w| {
            let used = w.get("used_percent")?.as_f64()?;
            let minutes = w
                .get("minutes")
                .and_then(serde_json::Value::as_i64)
                .unwrap_or(0);
            let name = match minutes {
                10_080 => "weekly".to_owned(),
                m if m > 0 && m % 60 == 0 => format!("{}-hour", m / 60),
                m => format!("{m}-minute"),
            };
            let reset = match w.get("resets_at").and_then(serde_json::Value::as_i64) {
                Some(t) if t <= now => format!(" (reset since, {})", ui::date_time(t)),
                Some(t) => format!(" (resets {})", ui::date_time(t)),
                None => String::new(),
            };
            Some(format!("{used:.0}% of the {name} window{reset}"))
        })
        .collect();
    let plan = limits
        .get("plan")
        .and_then(serde_json::Value::as_str)
        .map(|p| format!(" ({} plan)", ui::visible(p)))
        .unwrap_or_default();
    (!windows.is_empty()).then(|| {
        format!(
            "usage limits{plan} as of {} UTC: {}",
            ui::date_time(at),
            windows.join(", ")
        )
    })
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_limit_snapshot_reads_as_its_windows() {
        let limits = serde_json::json!({
            "at": 1_771_849_192_689_i64,
            "windows": [
                {"minutes": 300, "used_percent": 19.0, "resets_at": 1_771_864_834_000_i64},
                {"minutes": 10_080, "used_percent": 6.4, "resets_at": null},
                {"minutes": 90, "used_percent": 100.0, "resets_at": 1_771_800_000_000_i64},
            ],
        });
        assert_eq!(
            limits_line(&limits, 1_771_850_000_000).as_deref(),
            Some(
                "usage limits as of 2026-02-23 12:19 UTC: 19% of the 5-hour window (resets \
                 2026-02-23 16:40), 6% of the weekly window, 100% of the 90-minute window \
                 (reset since, 2026-02-22 22:40)"
            )
        );
        assert_eq!(
            limits_line(&serde_json::json!({"at": 1, "windows": []}), 0),
            None
        );
        assert_eq!(limits_line(&serde_json::json!({"windows": []}), 0), None);
    }
}
