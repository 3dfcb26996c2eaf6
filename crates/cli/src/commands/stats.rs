//! `scribe stats`: tokens and cost grouped by model, source, day, week, month, directory or
//! usage block.

use std::io::Write;

use clap::{Args, ValueEnum};
use scribe_db::calendar;
use scribe_session::{StatsBy, UsageStatsRow, UsageTotals, block_span};

use crate::context::Context;
use crate::error::CliError;
use crate::json::{self, Stats};
use crate::ui::{self, paint, style};

/// How to group usage.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum By {
    /// By the model that used it, most expensive first.
    Model,
    /// By source (cli, tui, telegram …), most expensive first.
    Source,
    /// By the UTC day it was used on, oldest first.
    Day,
    /// By the UTC week it was used in (Monday to Sunday, shown by its Monday), oldest first.
    Week,
    /// By the UTC month it was used in, oldest first.
    Month,
    /// By the directory the agent worked in (the project), most expensive first.
    Directory,
    /// By usage block, oldest first: five hours from the UTC hour of the first use after
    /// the last block ended, the window Claude's and Codex's subscription limits count in
    /// (with --source, of that agent's usage); the block still open says how long it has
    /// left.
    Block,
}

/// Token usage and cost.
///
/// Tokens (input, output, cache read, cache write, reasoning) and estimated cost, grouped
/// by model, source, day, week or month (UTC), the directory the agent worked in, or usage
/// block (five hours, as subscription limits count), with totals. Usage counts under the
/// model and hour of the message that used it, so a session that switched models or ran
/// past midnight is split as it happened; what a session counts beyond its messages (usage
/// an agent reported for the session as a whole) counts under its model and the hour it
/// started. A sub-agent session whose usage was rolled
/// into its parent is counted once, under its own model.
#[derive(Debug, Args)]
pub struct StatsCmd {
    /// How to group.
    #[arg(long, value_enum, default_value_t = By::Model)]
    pub by: By,
    /// Only usage since then (a message's by its time; what a session counts beyond its
    /// messages by when it started): a span back from now (7d, 24h) or a date
    /// (2026-01-31), from 1970-01-01 on.
    #[arg(long, value_name = "WHEN", value_parser = ui::parse_since)]
    pub since: Option<i64>,
    /// Only sessions from this source (cli, tui, telegram …); repeat for several.
    #[arg(long, value_name = "SOURCE", value_parser = ui::parse_source)]
    pub source: Vec<String>,
    /// Only usage of this model (as the MODEL rows name it); repeat for several.
    #[arg(long, value_name = "MODEL")]
    pub model: Vec<String>,
    /// Only sessions whose agent worked in this directory (`.`: the current one), as
    /// `scribe list --dir` takes it: `scribe stats --by day --dir .` is this project's
    /// spend per day.
    #[arg(long = "dir", value_name = "DIR", value_parser = ui::parse_dir)]
    pub dir: Option<String>,
    /// Split each row by model (rows of models: by day), as indented lines under it;
    /// in JSON each row's "breakdown".
    #[arg(long)]
    pub breakdown: bool,
    /// Print JSON: {"by": …, "since": …, "rows": [...], "totals": {...}}.
    #[arg(long)]
    pub json: bool,
}

impl StatsCmd {
    /// Runs the command.
    pub fn run(self, ctx: &Context) -> Result<(), CliError> {
        let by = match self.by {
            By::Model => StatsBy::Model,
            By::Source => StatsBy::Source,
            By::Day => StatsBy::Day,
            By::Week => StatsBy::Week,
            By::Month => StatsBy::Month,
            By::Directory => StatsBy::Directory,
            By::Block => StatsBy::Block,
        };
        let mut slices = ctx.sessions.usage_slices(self.since)?;
        let filtered = !self.source.is_empty() || !self.model.is_empty() || self.dir.is_some();
        if filtered {
            slices.retain(|slice| {
                (self.source.is_empty() || self.source.contains(&slice.source))
                    && (self.model.is_empty() || self.model.contains(&slice.model))
                    && self.dir.as_ref().is_none_or(|dir| *dir == slice.directory)
            });
        }
        let stats = if self.breakdown {
            let then = match by {
                StatsBy::Model => StatsBy::Day,
                _ => StatsBy::Model,
            };
            slices.stats_broken_down(by, then)
        } else {
            slices.stats(by)
        };
        let mut out = anstream::stdout().lock();
        if self.json {
            return json::print(&mut out, &Stats::new(&stats));
        }
        if stats.rows.is_empty() {
            let none = if filtered {
                "no usage matches the filters (--source, --model, --dir)"
            } else {
                "no usage recorded"
            };
            writeln!(out, "{none}")?;
            for line in ctx.unmatched_filters(&self.source, &self.model, self.dir.as_deref())? {
                eprintln!("scribe: {line}");
            }
            return Ok(());
        }
        let mut table = ui::table([
            by.name().to_uppercase().as_str(),
            "SESSIONS",
            "CALLS",
            "INPUT",
            "OUTPUT",
            "CACHE READ",
            "CACHE WRITE",
            "REASONING",
            "COST",
        ]);
        // Each row, then its breakdown's (in that order in the cost column too).
        let lines: Vec<(bool, &UsageStatsRow)> = stats
            .rows
            .iter()
            .flat_map(|row| {
                [(false, row)]
                    .into_iter()
                    .chain(row.breakdown.iter().map(|b| (true, b)))
            })
            .collect();
        let costs: Vec<(f64, bool)> = lines
            .iter()
            .map(|(_, r)| &r.totals)
            .chain([&stats.totals])
            .map(|t| (t.cost_usd, t.cost_is_partial()))
            .collect();
        let mut costs = ui::cost_column(&costs).into_iter();
        let now = scribe_db::now_ms();
        for (sub, row) in lines {
            let block = (by == StatsBy::Block && !sub)
                .then(|| block_text(&row.key, now))
                .flatten();
            let key = if let Some(block) = block {
                block
            } else if row.key.is_empty() {
                "(none)".to_owned()
            } else {
                ui::visible(&row.key).into_owned()
            };
            let cost = costs.next().unwrap_or_default();
            let key = if sub {
                paint(style::DIM, format!("  └ {key}"))
            } else {
                key
            };
            table.add_row(cells(key, &row.totals, cost));
        }
        table.add_row(
            cells(
                "total".to_owned(),
                &stats.totals,
                costs.next().unwrap_or_default(),
            )
            .into_iter()
            .map(|c| paint(style::HEADER, c))
            .collect::<Vec<_>>(),
        );
        for i in 1..9 {
            if let Some(column) = table.column_mut(i) {
                column.set_cell_alignment(comfy_table::CellAlignment::Right);
            }
        }
        writeln!(out, "{}", ui::render(&mut table, &[1, 2, 3, 4, 5, 6, 7, 8]))?;
        if stats.totals.cost_is_partial() {
            let note = ui::unpriced_note(stats.totals.unpriced_sessions);
            writeln!(out, "{}", paint(style::DIM, note))?;
        }
        Ok(())
    }
}

/// A block's row as people read it: `2026-03-01 09:00–14:00` (UTC), and for the block
/// still open at `now`, how long it has left; `None` for a key that is no block's start.
fn block_text(key: &str, now: i64) -> Option<String> {
    let (start, end) = block_span(key)?;
    let mut text = format!(
        "{}–{}",
        calendar::date_time(start),
        calendar::date_time(end).get(11..).unwrap_or_default()
    );
    if let Some(left) = block_left(key, now) {
        text.push_str(&format!(" (open, {left} left)"));
    }
    Some(text)
}

/// How long the block `key` has left at `now`, as `3h 05m` (whole minutes, rounded up);
/// `None` when it is not open then (or `key` is no block's start).
fn block_left(key: &str, now: i64) -> Option<String> {
    let (start, end) = block_span(key)?;
    (start..end)
        .contains(&now)
        .then(|| ui::time_left(end - now))
}

/// A row's cells; a group with no usage recorded shows [`ui::NOT_RECORDED`] for its tokens
/// and cost, not zeros, and one with a cost but no tokens for its tokens.
fn cells(key: String, t: &UsageTotals, cost: String) -> Vec<String> {
    let mut row = vec![key, ui::grouped(t.sessions), ui::grouped(t.api_calls)];
    let counts = [
        t.tokens.input,
        t.tokens.output,
        t.tokens.cache_read,
        t.tokens.cache_write,
        t.tokens.reasoning,
    ];
    if t.tokens_recorded() {
        row.extend(counts.map(ui::grouped));
        row.push(cost);
    } else if t.usage_recorded() {
        row.extend(counts.map(|_| ui::NOT_RECORDED.to_owned()));
        row.push(cost);
    } else {
        let pad = cost.len().saturating_sub(cost.trim_end().len());
        row.extend(counts.map(|_| ui::NOT_RECORDED.to_owned()));
        row.push(format!("{}{}", ui::NOT_RECORDED, " ".repeat(pad)));
    }
    row
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_block_reads_as_its_hours_and_the_open_one_says_what_is_left() {
        let start = calendar::parse_date("2026-03-01").unwrap() + 22 * calendar::HOUR;
        assert_eq!(
            block_text("2026-03-01T22:00Z", start - 1).as_deref(),
            Some("2026-03-01 22:00–03:00")
        );
        assert_eq!(
            block_text("2026-03-01T22:00Z", start + 90 * calendar::MINUTE + 1).as_deref(),
            Some("2026-03-01 22:00–03:00 (open, 3h 30m left)")
        );
        assert_eq!(
            block_text("2026-03-01T22:00Z", start + 5 * calendar::HOUR).as_deref(),
            Some("2026-03-01 22:00–03:00")
        );
        for not_a_block in ["", "2026-03-01", "2026-03-01T22", "(none)"] {
            assert_eq!(block_text(not_a_block, start), None, "{not_a_block:?}");
        }
    }
}
