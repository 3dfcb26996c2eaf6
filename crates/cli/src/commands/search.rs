//! `scribe search`: full-text search over every conversation.

use std::ffi::OsString;
use std::io::Write;

use clap::{Args, CommandFactory};
use scribe_message::{MAX_SEARCH_LIMIT, Role, SearchHit, SearchOptions, snippet_pieces};

use crate::context::Context;
use crate::error::CliError;
use crate::json::{self, SearchHits};
use crate::ui::{self, paint, style};

/// Search every conversation.
///
/// Any text is accepted: words match whole words (and prefixes with `fix*`), "quoted
/// phrases" match in order, `-word` (or `NOT word`) leaves out messages with that word, `OR`
/// gives alternatives, and Chinese, Japanese and Korean text and other substrings are found
/// too. The best match of each message is shown, best first.
/// How much of a query that found nothing is echoed back (characters).
const QUERY_ECHO: usize = 80;

#[derive(Debug, Args)]
pub struct SearchCmd {
    /// What to look for; words may start with `-` to exclude them (`fix -test`).
    #[arg(required = true, num_args = 1.., value_name = "QUERY", value_parser = parse_word)]
    pub query: Vec<String>,
    /// Only sessions from this source; repeat for several.
    #[arg(long, value_name = "SOURCE", value_parser = ui::parse_source)]
    pub source: Vec<String>,
    /// Leave out sessions from this source; repeat for several.
    #[arg(long, value_name = "SOURCE", value_parser = ui::parse_source)]
    pub exclude_source: Vec<String>,
    /// Only sessions whose agent worked in this directory (`.`: the current one), as
    /// `scribe list --dir` takes it: `scribe search --dir . WORDS` searches this project.
    #[arg(long = "dir", value_name = "DIR", value_parser = ui::parse_dir)]
    pub dir: Option<String>,
    /// Only messages with this role (user, assistant, system, tool); repeat for several.
    #[arg(long, value_name = "ROLE", value_parser = parse_role)]
    pub role: Vec<Role>,
    /// Only this session (an id, id prefix or title).
    #[arg(long, value_name = "SESSION")]
    pub session: Option<String>,
    /// Only messages since then: a span back from now (7d, 24h, 30m) or a date (2026-01-31),
    /// from 1970-01-01 on.
    #[arg(long, value_name = "WHEN", value_parser = ui::parse_since)]
    pub since: Option<i64>,
    /// Show at most this many hits.
    #[arg(long, short = 'n', default_value_t = 20, value_name = "N",
          value_parser = parse_limit, allow_negative_numbers = true)]
    pub limit: usize,
    /// Print JSON: {"hits": [...]}.
    #[arg(long)]
    pub json: bool,
}

/// The command line as clap should read it: in `scribe search`, a word starting with `-`
/// that is none of the command's options (`-parser`, `-nothing`, `--verbose`) is a word
/// of the query — web-search syntax for "without" — not an unknown option. Such words go
/// after a `--`, with the other words of the query in their order; options stay before
/// it, wherever they were. Only exact option forms are options: `-n 5`, `-n5`, `-n=5`,
/// `--limit 5`, `--limit=5`, `--json`, `-h`. A `--` ends the options, unless nothing
/// else is the query (`scribe search --`, `scribe search -n 5 --`): then it is the query,
/// searched for as `scribe search -- --` does (it was a usage error, "required arguments
/// were not provided", though a query was typed). Other command lines are returned
/// unchanged.
pub fn escape_query_words(args: Vec<OsString>) -> Vec<OsString> {
    let mut cmd = crate::cli::Cli::command();
    cmd.build();
    let Some(at) = subcommand_index(&cmd, &args) else {
        return args;
    };
    if args.get(at).and_then(|a| a.to_str()) != Some("search") {
        return args;
    }
    let Some(search) = cmd.find_subcommand("search") else {
        return args;
    };
    let mut out: Vec<OsString> = args[..=at].to_vec();
    let mut words: Vec<OsString> = Vec::new();
    let mut rest = args[at + 1..].iter();
    while let Some(arg) = rest.next() {
        let Some(text) = arg.to_str() else {
            words.push(arg.clone());
            continue;
        };
        if text == "--" {
            words.extend(rest.by_ref().cloned());
            // `scribe search --`: a `--` with no word before or after it ends no options;
            // the one thing typed to search for is `--` itself, an operator like `->`.
            if words.is_empty() {
                words.push(arg.clone());
            }
            break;
        }
        match option_form(search, text) {
            Some(takes_next) => {
                out.push(arg.clone());
                if takes_next && let Some(value) = rest.next() {
                    out.push(value.clone());
                }
            }
            None => words.push(arg.clone()),
        }
    }
    if !words.is_empty() {
        out.push(OsString::from("--"));
        out.extend(words);
    }
    out
}

/// The position of the subcommand in `args` (after the program name and global options).
fn subcommand_index(cmd: &clap::Command, args: &[OsString]) -> Option<usize> {
    let mut i = 1;
    while let Some(text) = args.get(i).and_then(|a| a.to_str()) {
        if !text.starts_with('-') || text == "-" {
            return Some(i);
        }
        let takes_next = option_form(cmd, text)?;
        i += if takes_next { 2 } else { 1 };
    }
    None
}

/// Whether `text` is exactly an option of `cmd` and, if so, whether its value is the next
/// argument. `None`: not an option (a word, or something clap will reject itself).
fn option_form(cmd: &clap::Command, text: &str) -> Option<bool> {
    if let Some(long) = text.strip_prefix("--") {
        let (name, value) = match long.split_once('=') {
            Some((name, _)) => (name, true),
            None => (long, false),
        };
        let arg = cmd.get_arguments().find(|a| {
            a.get_long_and_visible_aliases()
                .is_some_and(|names| names.contains(&name))
        })?;
        return Some(arg.get_action().takes_values() && !value);
    }
    let mut chars = text.strip_prefix('-')?.chars();
    let short = chars.next()?;
    let attached = chars.as_str();
    let arg = cmd.get_arguments().find(|a| {
        a.get_short_and_visible_aliases()
            .is_some_and(|names| names.contains(&short))
    })?;
    let takes_value = arg.get_action().takes_values();
    match (takes_value, attached) {
        (_, "") => Some(takes_value),
        // `-n5`, `-n=5`; but `-nothing` is a word.
        (true, value) if value.starts_with(|c: char| c.is_ascii_digit() || c == '=') => Some(false),
        _ => None,
    }
}

fn parse_limit(text: &str) -> Result<usize, String> {
    match text.parse::<usize>() {
        Ok(n) if (1..=MAX_SEARCH_LIMIT).contains(&n) => Ok(n),
        _ => Err(format!("expected a number from 1 to {MAX_SEARCH_LIMIT}")),
    }
}

/// A word of the query: any text but an empty (or all-blank) one, which is most often a
/// shell variable that was not set; it searched for nothing and answered "no matches"
/// (exit 0), as if the store had been searched for something.
fn parse_word(text: &str) -> Result<String, String> {
    if text.trim().is_empty() {
        return Err("expected text to search for, not an empty word".to_owned());
    }
    Ok(text.to_owned())
}

fn parse_role(text: &str) -> Result<Role, String> {
    text.parse::<Role>().map_err(|e| e.to_string())
}

/// The snippet on one line with its matches styled.
fn highlighted(snippet: &str) -> String {
    let flat = snippet.split_whitespace().collect::<Vec<_>>().join(" ");
    let mut out = String::new();
    // The markers are control characters themselves: text is made visible piece by piece.
    for (piece, matched) in snippet_pieces(&flat) {
        if matched {
            out.push_str(&paint(style::MATCH, ui::visible(piece)));
        } else {
            out.push_str(&ui::visible(piece));
        }
    }
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
            directory: self.dir.clone(),
            roles: self.role.clone(),
            session_id,
            since: self.since,
            limit: self.limit,
            ..SearchOptions::default()
        };
        let query = self.query.join(" ");
        // A hit whose rows cannot be read (another program's write) is named on stderr and
        // left out; the others are shown, and the exit status tells of the gap.
        let mut left_out = 0;
        let hits = ctx
            .messages
            .search_skipping(&query, &options, &mut |id, err| {
                crate::error::report_left_out("a search hit", id, &err);
                left_out += 1;
            })?;
        self.print(ctx, &query, &hits, left_out)?;
        if left_out > 0 {
            return Err(CliError::LeftOut {
                count: left_out,
                what: "search hit",
                from: "the search",
            });
        }
        Ok(())
    }

    /// Prints `hits`, found for `query`, `left_out` others left out (named on stderr).
    fn print(
        &self,
        ctx: &Context,
        query: &str,
        hits: &[SearchHit],
        left_out: usize,
    ) -> Result<(), CliError> {
        let previews = scribe_server::untitled_previews(&ctx.db, hits)?;
        let mut out = anstream::stdout().lock();
        if self.json {
            return json::print(&mut out, &SearchHits::new(hits, &previews));
        }
        if hits.is_empty() {
            // One line, however long the query was (a pasted file, say).
            let shown = ui::one_line(query, QUERY_ECHO);
            let readable = if left_out > 0 { "readable " } else { "" };
            writeln!(out, "no {readable}matches for {shown:?}")?;
            for line in ctx.unmatched_filters(&self.source, &[], self.dir.as_deref())? {
                eprintln!("scribe: {line}");
            }
            return Ok(());
        }
        let now = scribe_db::now_ms();
        for (i, hit) in hits.iter().enumerate() {
            if i > 0 {
                writeln!(out)?;
            }
            let title = ui::session_name(
                hit.title.as_deref(),
                previews.get(&hit.session_id).map(String::as_str),
            );
            writeln!(
                out,
                "{} {} {} {}",
                paint(style::HEADER, title),
                paint(
                    style::DIM,
                    format!("· {} · {} ·", hit.role.as_str(), ui::visible(&hit.source))
                ),
                paint(style::DIM, ui::ago(hit.created_at, now)),
                paint(style::DIM, format!("· {}", hit.session_id)),
            )?;
            writeln!(out, "  {}", highlighted(&hit.snippet))?;
        }
        Ok(())
    }
}
#[cfg(test)]
mod tests {
    use super::*;

    fn escaped(args: &[&str]) -> Vec<String> {
        let args = args.iter().map(OsString::from).collect();
        escape_query_words(args)
            .into_iter()
            .map(|a| a.into_string().unwrap())
            .collect()
    }

    #[test]
    fn dashed_query_words_go_after_an_escape() {
        assert_eq!(
            escaped(&["scribe", "search", "foo", "-bar", "-n", "5", "--json"]),
            ["scribe", "search", "-n", "5", "--json", "--", "foo", "-bar"]
        );
        assert_eq!(
            escaped(&["scribe", "--db", "x.db", "search", "-nothing", "-n5"]),
            ["scribe", "--db", "x.db", "search", "-n5", "--", "-nothing"]
        );
        assert_eq!(
            escaped(&["scribe", "search", "--limit=2", "a", "--", "-n", "b"]),
            ["scribe", "search", "--limit=2", "--", "a", "-n", "b"]
        );
        assert_eq!(
            escaped(&["scribe", "search", "--verbose", "-h"]),
            ["scribe", "search", "-h", "--", "--verbose"]
        );
        // A `--` that ends no options and leaves no query is the query.
        assert_eq!(
            escaped(&["scribe", "search", "--"]),
            ["scribe", "search", "--", "--"]
        );
        assert_eq!(
            escaped(&["scribe", "search", "-n", "3", "--json", "--"]),
            ["scribe", "search", "-n", "3", "--json", "--", "--"]
        );
        // With words before or after it, it only ends the options.
        assert_eq!(
            escaped(&["scribe", "search", "foo", "--"]),
            ["scribe", "search", "--", "foo"]
        );
        assert_eq!(
            escaped(&["scribe", "search", "--", "--"]),
            ["scribe", "search", "--", "--"]
        );
        // Other commands, and a search with no words, are left alone.
        for args in [
            &["scribe", "list", "-n", "3"][..],
            &["scribe", "search", "--json"][..],
            &["scribe", "--db", "search", "list"][..],
            &["scribe"][..],
        ] {
            assert_eq!(escaped(args), args, "{args:?}");
        }
    }
}
