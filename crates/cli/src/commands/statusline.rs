//! `scribe statusline`: one line for an agent's status bar.

use std::io::{IsTerminal as _, Read as _, Write as _};
use std::path::{Path, PathBuf};

use clap::Args;
use scribe_db::calendar;
use scribe_import::pricing::Pricer;
use scribe_import::sink::StoreSink;
use scribe_import::{Options, Source, import, sources};
use scribe_session::{SessionError, UsageTotals, block_lookback};
use serde::Deserialize;

use crate::context::Context;
use crate::error::CliError;
use crate::ui;

/// One line for an agent's status bar: the session's cost, today's (UTC) and the open
/// 5-hour block's.
///
/// Made for Claude Code's status line (`"statusLine": {"type": "command", "command":
/// "scribe statusline"}` in its settings): it reads the status JSON Claude Code writes
/// to stdin (to its end), imports that session's project folder first (its transcript
/// and sub-agents; unchanged files cost a `stat`), so the line, and the store, are
/// current as you work, and prints `<model> · session $0.42 · today $3.10 · block $1.20
/// (2h 10m left)`. The block is Claude Code's usage alone (its subscription limit counts
/// that); today is every agent's. Without that JSON (stdin a terminal or empty) it
/// prints today's and the block's cost of every agent. A cost marked `+?` leaves out
/// models without a price. What could not be read or imported is said on stderr, and
/// the line is still printed.
#[derive(Debug, Args)]
pub struct StatuslineCmd {}

/// The part of Claude Code's status JSON the line uses (every field optional).
#[derive(Debug, Default, Deserialize)]
struct Status {
    session_id: Option<String>,
    transcript_path: Option<PathBuf>,
    model: Option<StatusModel>,
}

#[derive(Debug, Default, Deserialize)]
struct StatusModel {
    display_name: Option<String>,
    id: Option<String>,
}

impl StatuslineCmd {
    /// Runs the command.
    pub fn run(self, ctx: &Context) -> Result<(), CliError> {
        let status = read_status();
        if let Some(transcript) = &status.transcript_path {
            import_project(ctx, transcript);
        }
        let now = scribe_db::now_ms();
        let mut parts = Vec::new();
        if let Some(model) = status
            .model
            .as_ref()
            .and_then(|m| m.display_name.clone().or_else(|| m.id.clone()))
        {
            parts.push(ui::visible(&model).into_owned());
        }
        if let Some(id) = &status.session_id {
            match ctx.sessions.get(id) {
                Ok(s) => parts.push(format!(
                    "session {}",
                    cost(s.estimated_cost_usd, s.cost_is_partial())
                )),
                // Not imported (yet), or an id the store could never hold: no session
                // part, and the rest of the line.
                Err(SessionError::NotFound { .. }) => {}
                Err(err) => eprintln!("scribe: {err}"),
            }
        }
        let midnight = now - now.rem_euclid(calendar::DAY);
        let today = ctx.sessions.usage_slices(Some(midnight))?.totals;
        parts.push(format!("today {}", totals_cost(&today)));
        let mut recent = ctx.sessions.usage_slices(Some(block_lookback(now)))?;
        if status.session_id.is_some() {
            recent.retain(|slice| slice.source == Source::ClaudeCode.name());
        }
        if let Some(open) = recent.open_block(now) {
            let left = ui::time_left(open.end - now);
            parts.push(format!("block {} ({left} left)", totals_cost(&open.totals)));
        }
        let mut out = anstream::stdout().lock();
        writeln!(out, "{}", parts.join(" · "))?;
        Ok(())
    }
}

/// The status JSON on stdin, when stdin is not a terminal and holds one; what cannot be
/// read is said on stderr and counts as none.
fn read_status() -> Status {
    let mut stdin = std::io::stdin();
    if stdin.is_terminal() {
        return Status::default();
    }
    let mut text = String::new();
    if let Err(err) = stdin.read_to_string(&mut text) {
        eprintln!("scribe: cannot read the status JSON on stdin: {err}");
        return Status::default();
    }
    if text.trim().is_empty() {
        return Status::default();
    }
    serde_json::from_str(&text).unwrap_or_else(|err| {
        eprintln!("scribe: the status JSON on stdin is not one Scribe reads: {err}");
        Status::default()
    })
}

/// Imports the Claude Code project folder `transcript` is in (the session's transcript,
/// its sub-agents', and the project's other sessions, unchanged ones at a `stat` each)
/// when it is one (a folder of `…/projects/`); else the transcript and its session's
/// folder beside it alone, so a transcript elsewhere never has a whole tree walked. A
/// failure is said on stderr.
fn import_project(ctx: &Context, transcript: &Path) {
    let Some(project) = transcript.parent() else {
        return;
    };
    let roots = if project
        .parent()
        .and_then(Path::file_name)
        .is_some_and(|name| name == "projects")
    {
        vec![project.to_owned()]
    } else {
        vec![transcript.to_owned(), transcript.with_extension("")]
    };
    let catalog = match crate::location::model_catalog() {
        Ok(catalog) => catalog,
        Err(err) => {
            eprintln!("scribe: {err}");
            return;
        }
    };
    let options = Options {
        pricer: Pricer::new(catalog),
        ..Options::default()
    };
    let mut sink = StoreSink::new(ctx.store.clone());
    let summary = import(
        &mut sink,
        sources::importer(Source::ClaudeCode),
        &roots,
        &options,
        &mut |_| {},
    );
    match summary {
        Ok(s) if s.failed.is_empty() && s.failed_sessions.is_empty() => {}
        Ok(s) => eprintln!(
            "scribe: {} of {} could not be imported",
            ui::plural(
                i64::try_from(s.failed.len() + s.failed_sessions.len()).unwrap_or(i64::MAX),
                "file or session"
            ),
            project.display()
        ),
        Err(err) => eprintln!("scribe: cannot import {}: {err}", project.display()),
    }
}

/// A cost as the status line shows it: `$0.42`, `$0.42+?` when it leaves out models
/// without a price (as cost columns mark it).
fn cost(usd: f64, partial: bool) -> String {
    ui::cost_column(&[(usd, partial)])
        .pop()
        .unwrap_or_default()
        .trim_end()
        .to_owned()
}

fn totals_cost(t: &UsageTotals) -> String {
    cost(t.cost_usd, t.cost_is_partial())
}
