//! `scribe list`: sessions, newest first (or most recently active, most expensive or
//! most tokens first with `--sort`), with a preview of how each began.

use std::collections::HashMap;
use std::io::Write;

use clap::{Args, ValueEnum};
use scribe_session::{
    ParentFilter, Session, SessionError, SessionFilter, SessionKind, SessionOrder,
};

use crate::context::Context;
use crate::error::CliError;
use crate::json::{self, SessionList, SessionSummary};
use crate::ui::{self, paint, style};

/// Characters of a preview in the table (the table may cut it further to fit).
const PREVIEW_TABLE_CHARS: usize = 60;

/// Narrower than this, the table has no FIRST MESSAGE column: an untitled session is named
/// by how it began in the TITLE column instead (as `show` names it), so neither is cut to a
/// few letters.
const NARROW_TABLE: u16 = 100;

/// List sessions, newest first.
///
/// Shows id, title, source, messages, tokens, cost, the start of the first user message and
/// when the session was last active (in a terminal narrower than 100 columns, the first
/// message stands in quotes where an untitled session's title would be). Forks are listed, marked as forks of their parent. A
/// conversation that compaction carried on into a continuation is listed once, as its
/// newest continuation (`t #2`), marked with the session it continues. Archived sessions,
/// sub-agent tasks, title sessions and the earlier parts of a continued conversation are
/// hidden unless --all is given.
///
/// A session whose stored row cannot be read (another program's write; `scribe db check`
/// names it) is left out, named on stderr, and the rest listed; the exit status is then 1.
#[derive(Debug, Args)]
pub struct ListCmd {
    /// Only sessions from this source (cli, tui, telegram …); repeat for several.
    #[arg(long, value_name = "SOURCE", value_parser = ui::parse_source)]
    pub source: Vec<String>,
    /// Only sessions of this model (the MODEL of `scribe show`); repeat for several.
    #[arg(long, value_name = "MODEL")]
    pub model: Vec<String>,
    /// Only sessions whose agent worked in this directory (`.`: the current one), as the
    /// agent recorded it: not its subdirectories.
    #[arg(long = "dir", value_name = "DIR", value_parser = ui::parse_dir)]
    pub dir: Option<String>,
    /// Only sessions whose title contains this text (letters of any case).
    #[arg(long, value_name = "TEXT")]
    pub title: Option<String>,
    /// Show at most this many sessions.
    #[arg(long, short = 'n', default_value_t = 20, value_name = "N",
          value_parser = parse_limit, allow_negative_numbers = true)]
    pub limit: u64,
    /// Include archived sessions and every child session (tasks, titles, continued parts).
    #[arg(long, short = 'a')]
    pub all: bool,
    /// Only sessions active since then (a message or other change from then on, whenever
    /// they began): a span back from now (7d, 24h) or a date (2026-01-31), from
    /// 1970-01-01 on.
    #[arg(long, value_name = "WHEN", value_parser = ui::parse_since)]
    pub since: Option<i64>,
    /// Order: by creation, newest first; by last activity, most recent first; by cost or
    /// tokens, most first.
    #[arg(long, value_enum, default_value_t = Sort::Created)]
    pub sort: Sort,
    /// Print JSON: {"sessions": [...], "more": bool}.
    #[arg(long)]
    pub json: bool,
}

/// A `--limit`: a whole number from 1 (clap's own range check would say "0 is not in
/// 1..18446744073709551615").
fn parse_limit(text: &str) -> Result<u64, String> {
    match text.trim().parse::<u64>() {
        Ok(n) if n >= 1 => Ok(n),
        _ => Err("expected a whole number from 1 up".to_owned()),
    }
}

/// The order of `scribe list`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Sort {
    /// Newest first (when the session was created).
    Created,
    /// Most recently active first (its last message or change).
    Active,
    /// Most expensive first (by the cost the COST column shows).
    Cost,
    /// Most tokens first (all kinds, as the TOKENS column counts them).
    Tokens,
}

impl ListCmd {
    /// Runs the command.
    pub fn run(self, ctx: &Context) -> Result<(), CliError> {
        let mut left_out = Vec::new();
        self.print(ctx, &mut left_out)?;
        if !left_out.is_empty() {
            return Err(CliError::LeftOut {
                count: left_out.len(),
                what: "session",
                from: "the list",
            });
        }
        Ok(())
    }

    /// Lists what can be read; a session whose row cannot be (another program's write)
    /// is named on stderr and goes to `left_out`, and the rest is listed.
    fn print(self, ctx: &Context, left_out: &mut Vec<SessionError>) -> Result<(), CliError> {
        let mut filter = SessionFilter {
            sources: self.source.clone(),
            models: self.model.clone(),
            title_contains: self.title.clone(),
            directory: self.dir.clone(),
            updated_after: self.since,
            order: match self.sort {
                Sort::Created => SessionOrder::CreatedDesc,
                Sort::Active => SessionOrder::UpdatedDesc,
                Sort::Cost => SessionOrder::CostDesc,
                Sort::Tokens => SessionOrder::TokensDesc,
            },
            // One more than asked tells whether more exist.
            limit: Some(self.limit.saturating_add(1)),
            ..SessionFilter::default()
        };
        if !self.all {
            filter.parent = ParentFilter::Conversations;
            filter.archived = Some(false);
        }
        let mut sessions = ctx
            .sessions
            .list_skipping(&filter, &mut |err| left_out.push(err))?;
        for err in left_out.iter() {
            crate::error::report_left_out("a session", None, err);
        }
        // Rows left out were read too: the one more than asked may be among them.
        let more = (sessions.len() + left_out.len()) as u64 > self.limit;
        sessions.truncate(usize::try_from(self.limit).unwrap_or(usize::MAX));
        let ids: Vec<&str> = sessions.iter().map(|s| s.id.as_str()).collect();
        let previews = scribe_server::previews(&ctx.db, &ids)?;

        let mut out = anstream::stdout().lock();
        if self.json {
            let sessions = sessions
                .iter()
                .map(|s| SessionSummary::new(s, previews.get(&s.id).map(String::as_str)))
                .collect();
            return json::print(&mut out, &SessionList { sessions, more });
        }
        if sessions.is_empty() {
            writeln!(out, "no sessions")?;
            for line in ctx.unmatched_filters(&self.source, &self.model, self.dir.as_deref())? {
                eprintln!("scribe: {line}");
            }
            return Ok(());
        }
        let short = ctx.short_ids(&ids)?;
        let parents = parent_names(ctx, &sessions)?;
        let unpriced = sessions.iter().filter(|s| s.cost_is_partial()).count();
        let usage = ui::session_usage_columns(&sessions);
        let now = scribe_db::now_ms();
        let narrow = ui::table_width().is_some_and(|w| w < NARROW_TABLE);
        let mut header = vec!["ID", "TITLE", "SOURCE", "MSGS", "TOKENS", "COST"];
        if !narrow {
            header.push("FIRST MESSAGE");
        }
        header.push("ACTIVE");
        let active = header.len() - 1;
        let mut table = ui::table(header);
        for (s, (tokens, cost)) in sessions.iter().zip(usage) {
            let first = previews.get(&s.id).map(String::as_str);
            let mut title = if narrow {
                ui::session_name(s.title.as_deref(), first)
            } else {
                ui::visible(s.title.as_deref().unwrap_or("(untitled)")).into_owned()
            };
            if s.is_archived() {
                title.push_str(" [archived]");
            }
            if let Some(parent) = &s.parent_session_id {
                let parent =
                    ui::visible(parents.get(parent).map_or(parent.as_str(), String::as_str));
                title = match s.kind {
                    SessionKind::Fork => format!("{title} (fork of {parent})"),
                    SessionKind::Continuation => format!("{title} (continues {parent})"),
                    kind => format!("{title} ({kind})"),
                };
            }
            let mut row = vec![
                paint(
                    style::DIM,
                    short
                        .get(s.id.as_str())
                        .map_or(s.id.as_str(), String::as_str),
                ),
                title,
                ui::visible(&s.source).into_owned(),
                s.message_count.to_string(),
                tokens,
                cost,
            ];
            if !narrow {
                row.push(
                    first
                        .map(|text| ui::one_line(text, PREVIEW_TABLE_CHARS))
                        .unwrap_or_default(),
                );
            }
            row.push(ui::ago(s.updated_at, now));
            table.add_row(row);
        }
        for i in [3, 4, 5] {
            if let Some(column) = table.column_mut(i) {
                column.set_cell_alignment(comfy_table::CellAlignment::Right);
            }
        }
        writeln!(out, "{}", ui::render(&mut table, &[0, 3, 4, 5, active]))?;
        if unpriced > 0 {
            let unpriced = i64::try_from(unpriced).unwrap_or(i64::MAX);
            writeln!(out, "{}", paint(style::DIM, ui::unpriced_note(unpriced)))?;
        }
        // The sessions left out (named on stderr) are not among the more to show.
        let total = if more {
            ctx.sessions.count(&filter)?
        } else {
            0
        };
        let shown = i64::try_from(sessions.len() + left_out.len()).unwrap_or(i64::MAX);
        let n = total.saturating_sub(shown);
        if n > 0 {
            let noun = if n == 1 { "session" } else { "sessions" };
            let hidden = if self.all {
                String::new()
            } else {
                "; --all adds archived and child sessions".to_owned()
            };
            writeln!(
                out,
                "{}",
                paint(
                    style::DIM,
                    format!("… {n} more {noun}; show them with --limit {total}{hidden}")
                )
            )?;
        }
        Ok(())
    }
}

/// How each listed session's parent is named in its row: its title, else its short id.
fn parent_names(ctx: &Context, sessions: &[Session]) -> Result<HashMap<String, String>, CliError> {
    let mut names = HashMap::new();
    for id in sessions
        .iter()
        .filter_map(|s| s.parent_session_id.as_deref())
    {
        if names.contains_key(id) {
            continue;
        }
        let name = match ctx.sessions.get(id) {
            Ok(parent) => match parent.title {
                Some(title) => title,
                None => ctx
                    .short_ids(&[id])?
                    .remove(id)
                    .unwrap_or_else(|| id.to_owned()),
            },
            // Deleted meanwhile: the row's own parent id is all there is.
            Err(SessionError::NotFound { .. }) => id.to_owned(),
            Err(err) => return Err(err.into()),
        };
        names.insert(id.to_owned(), name);
    }
    Ok(names)
}
