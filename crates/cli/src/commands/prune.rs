//! `scribe prune`: delete sessions that ended long ago.

use std::io::Write;

use clap::Args;
use scribe_session::PruneReport;
use serde::Serialize;

use crate::context::Context;
use crate::error::CliError;
use crate::json;
use crate::ui::{self, paint, style};

/// Delete sessions that ended more than a given time ago.
///
/// Active sessions are never pruned, however old. Asks for confirmation on a terminal;
/// elsewhere --yes (or --dry-run) is required.
#[derive(Debug, Args)]
pub struct PruneCmd {
    /// How long ago a session must have ended: whole days (90d, 12w; a bare number is days),
    /// reaching back no further than 1970-01-01.
    #[arg(long, value_name = "AGE", value_parser = ui::parse_days)]
    pub older_than: u32,
    /// Only sessions from this source.
    #[arg(long, value_name = "SOURCE", value_parser = ui::parse_source)]
    pub source: Option<String>,
    /// Show what would be deleted; change nothing.
    #[arg(long)]
    pub dry_run: bool,
    /// Delete without asking.
    #[arg(long, short = 'y')]
    pub yes: bool,
    /// Print JSON: {"dry_run": bool, "ended_before": ms, "sessions": [{"id", "title", "source", "ended_at", "message_count"}]}.
    #[arg(long)]
    pub json: bool,
}

#[derive(Serialize)]
struct PrunedJson {
    id: String,
    title: Option<String>,
    source: String,
    ended_at: Option<i64>,
    message_count: i64,
}

#[derive(Serialize)]
struct PruneJson {
    dry_run: bool,
    ended_before: i64,
    sessions: Vec<PrunedJson>,
}

impl PruneCmd {
    /// Runs the command.
    pub fn run(self, ctx: &Context) -> Result<(), CliError> {
        let source = self.source.as_deref();
        let preview = ctx.sessions.prune(self.older_than, source, true)?;
        // How each untitled session began, read while it is still there (the table names
        // it so; JSON keeps the stored title).
        let began = if self.json {
            std::collections::HashMap::new()
        } else {
            let untitled: Vec<&str> = preview
                .sessions
                .iter()
                .filter(|s| s.title.is_none())
                .map(|s| s.id.as_str())
                .collect();
            scribe_server::previews(&ctx.db, &untitled)?
        };
        let report = if self.dry_run {
            preview
        } else if preview.sessions.is_empty() {
            // Nothing to delete: a real prune that found nothing, not a dry run.
            PruneReport {
                dry_run: false,
                ..preview
            }
        } else {
            if !self.yes {
                if !ui::can_ask() {
                    return Err(CliError::NeedsConfirmation {
                        action: format!(
                            "prune {}",
                            ui::plural(
                                i64::try_from(preview.sessions.len()).unwrap_or(i64::MAX),
                                "session"
                            )
                        ),
                    });
                }
                let n = i64::try_from(preview.sessions.len()).unwrap_or(i64::MAX);
                let question = format!(
                    "Delete {} that ended more than {} ago?",
                    ui::plural(n, "session"),
                    ui::plural(self.older_than, "day")
                );
                if !ui::confirm(&question)? {
                    return Err(CliError::Cancelled);
                }
            }
            let spinner = ui::spinner("pruning");
            let report = ctx.sessions.prune(self.older_than, source, false)?;
            spinner.finish_and_clear();
            report
        };
        let mut out = anstream::stdout().lock();
        if self.json {
            let sessions = report
                .sessions
                .iter()
                .map(|s| PrunedJson {
                    id: s.id.clone(),
                    title: s.title.clone(),
                    source: s.source.clone(),
                    ended_at: s.ended_at,
                    message_count: s.message_count,
                })
                .collect();
            let doc = PruneJson {
                dry_run: report.dry_run,
                ended_before: report.ended_before,
                sessions,
            };
            return json::print(&mut out, &doc);
        }
        for s in &report.sessions {
            writeln!(
                out,
                "{} {} {}",
                if report.dry_run {
                    "would delete"
                } else {
                    "deleted"
                },
                s.id,
                paint(
                    style::DIM,
                    format!(
                        "{} · {} · ended {}",
                        ui::session_name(s.title.as_deref(), began.get(&s.id).map(String::as_str)),
                        ui::visible(&s.source),
                        s.ended_at.map(ui::date).unwrap_or_default()
                    )
                )
            )?;
        }
        let n = report.sessions.len();
        let verb = if report.dry_run {
            "would be pruned (dry run)"
        } else {
            "pruned"
        };
        writeln!(
            out,
            "{n} session{} {verb}; ended before {}",
            if n == 1 { "" } else { "s" },
            ui::date_time(report.ended_before)
        )?;
        Ok(())
    }
}
