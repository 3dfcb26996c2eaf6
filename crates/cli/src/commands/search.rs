//! `scribe search`: full-text search over every conversation.

use std::io::Write;

use clap::Args;
use scribe_message::{MATCH_END, MATCH_START, MAX_SEARCH_LIMIT, Role, SearchOptions};

use crate::context::Context;
use crate::error::CliError;
use crate::json::{self, SearchHits};
use crate::ui::{self, paint, style};

/// Search every conversation.
///
/// Any text is accepted: words match whole words (and prefixes with `fix*`), "quoted
/// phrases" match in order, Chinese, Japanese and Korean text and other substrings are
/// found too. The best match of each message is shown, best first.
#[derive(Debug, Args)]
pub struct SearchCmd {
    /// What to look for.
    #[arg(required = true, num_args = 1.., value_name = "QUERY")]
    pub query: Vec<String>,
    /// Only sessions from this source; repeat for several.
    #[arg(long, value_name = "SOURCE")]
    pub source: Vec<String>,
    /// Leave out sessions from this source; repeat for several.
    #[arg(long, value_name = "SOURCE")]
    pub exclude_source: Vec<String>,
    /// Only messages with this role (user, assistant, system, tool); repeat for several.
    #[arg(long, value_name = "ROLE", value_parser = parse_role)]
    pub role: Vec<Role>,
    /// Only this session (an id, id prefix or title).
    #[arg(long, value_name = "SESSION")]
    pub session: Option<String>,
    /// Only messages since then: a span back from now (7d, 24h, 30m) or a date (2026-01-31).
    #[arg(long, value_name = "WHEN", value_parser = ui::parse_since)]
    pub since: Option<i64>,
    /// Show at most this many hits.
    #[arg(long, short = 'n', default_value_t = 20, value_name = "N",
          value_parser = parse_limit)]
    pub limit: usize,
    /// Print JSON: {"hits": [...]}.
    #[arg(long)]
    pub json: bool,
}

fn parse_limit(text: &str) -> Result<usize, String> {
    match text.parse::<usize>() {
        Ok(n) if (1..=MAX_SEARCH_LIMIT).contains(&n) => Ok(n),
        _ => Err(format!("expected a number from 1 to {MAX_SEARCH_LIMIT}")),
    }
}

fn parse_role(text: &str) -> Result<Role, String> {
    text.parse::<Role>().map_err(|e| e.to_string())
}

/// The snippet on one line with its matches styled.
fn highlighted(snippet: &str) -> String {
    let flat = snippet.split_whitespace().collect::<Vec<_>>().join(" ");
    let mut out = String::new();
    let mut rest = flat.as_str();
    while let Some(start) = rest.find(MATCH_START) {
        out.push_str(&rest[..start]);
        rest = &rest[start + MATCH_START.len()..];
        let end = rest.find(MATCH_END).unwrap_or(rest.len());
        out.push_str(&paint(style::MATCH, &rest[..end]));
        rest = rest.get(end + MATCH_END.len()..).unwrap_or("");
    }
    out.push_str(rest);
    out
}

impl SearchCmd {
    /// Runs the command.
    pub fn run(self, ctx: &Context) -> Result<(), CliError> {
        let session_id = match &self.session {
            Some(wanted) => Some(ctx.resolve(wanted)?.id),
            None => None,
        };
        let options = SearchOptions {
            sources: self.source.clone(),
            exclude_sources: self.exclude_source.clone(),
            roles: self.role.clone(),
            session_id,
            since: self.since,
            limit: self.limit,
            ..SearchOptions::default()
        };
        let query = self.query.join(" ");
        let hits = ctx.messages.search(&query, &options)?;
        let mut out = anstream::stdout().lock();
        if self.json {
            return json::print(&mut out, &SearchHits::new(&hits));
        }
        if hits.is_empty() {
            writeln!(out, "no matches for {query:?}")?;
            return Ok(());
        }
        let now = scribe_db::now_ms();
        for (i, hit) in hits.iter().enumerate() {
            if i > 0 {
                writeln!(out)?;
            }
            let title = hit.title.as_deref().unwrap_or("(untitled)");
            writeln!(
                out,
                "{} {} {} {}",
                paint(style::HEADER, title),
                paint(
                    style::DIM,
                    format!("· {} · {} ·", hit.role.as_str(), hit.source)
                ),
                paint(style::DIM, ui::ago(hit.created_at, now)),
                paint(style::DIM, format!("· {}", hit.session_id)),
            )?;
            writeln!(out, "  {}", highlighted(&hit.snippet))?;
        }
        Ok(())
    }
}
