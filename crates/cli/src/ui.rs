//! Presentation for humans: colour, tables, progress bars, times, numbers and one-line
//! cuts of text.
//!
//! Colour is written as ANSI styles into [`anstream`] streams, which strip them when the
//! stream is not a terminal or `NO_COLOR` is set, so every command styles unconditionally
//! and the decision lives in one place. Tables are comfy-table in dynamic arrangement: on a
//! terminal they fit its width, elsewhere they take the room they need.

use std::io::IsTerminal;
use std::time::Duration;

use anstyle::{AnsiColor, Style};
use comfy_table::{ColumnConstraint, ContentArrangement, Row, Table, presets};
use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};

/// `text` on one line, whitespace collapsed, cut to `max` characters: the cut the JSON
/// shapes use (a preview is cut the same way in a table and in `--json`), with control
/// characters made [`visible`].
pub fn one_line(text: &str, max: usize) -> String {
    visible(&scribe_server::json::one_line(text, max)).into_owned()
}

/// `text` cut to `max` characters as the JSON shapes cut it, with control characters made
/// [`visible`].
pub fn cut(text: &str, max: usize) -> String {
    visible(&scribe_server::json::cut(text, max)).into_owned()
}

/// Stored text as a terminal should print it: every control character but newline and
/// tab shown as a visible symbol (`ESC` as `␛`, `CR` as `␍`, `BEL` as `␇`, the C1 set
/// as `�`; a `CR` before a newline is dropped), so that what an agent's history holds
/// (tool output from any file or web page) cannot recolour, retitle or clear the
/// terminal, move its cursor or hide text when `show`, `search` or `list` prints it.
/// One character for one, so cut lengths stay.
pub fn visible(text: &str) -> std::borrow::Cow<'_, str> {
    let acts = |c: char| c.is_control() && c != '\n' && c != '\t';
    if !text.contains(acts) {
        return std::borrow::Cow::Borrowed(text);
    }
    let mut out = String::with_capacity(text.len() + 8);
    let mut chars = text.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '\r' if chars.peek() == Some(&'\n') => {}
            '\u{0}'..='\u{1f}' if acts(c) => {
                out.push(char::from_u32(0x2400 + u32::from(c)).unwrap_or('\u{fffd}'));
            }
            '\u{7f}' => out.push('\u{2421}'),
            c if acts(c) => out.push('\u{fffd}'),
            c => out.push(c),
        }
    }
    std::borrow::Cow::Owned(out)
}

/// Styles used across commands.
pub mod style {
    use super::{AnsiColor, Style};

    /// Table headers and section titles.
    pub const HEADER: Style = Style::new().bold();
    /// Ids and other secondary details.
    pub const DIM: Style = Style::new().dimmed();
    /// A search match.
    pub const MATCH: Style = Style::new()
        .bold()
        .fg_color(Some(anstyle::Color::Ansi(AnsiColor::Yellow)));
    /// The user's turns.
    pub const USER: Style = Style::new()
        .bold()
        .fg_color(Some(anstyle::Color::Ansi(AnsiColor::Green)));
    /// The assistant's turns.
    pub const ASSISTANT: Style = Style::new()
        .bold()
        .fg_color(Some(anstyle::Color::Ansi(AnsiColor::Blue)));
    /// System and tool turns.
    pub const OTHER_ROLE: Style = Style::new()
        .bold()
        .fg_color(Some(anstyle::Color::Ansi(AnsiColor::Magenta)));
    /// Tool calls.
    pub const TOOL: Style = Style::new().fg_color(Some(anstyle::Color::Ansi(AnsiColor::Cyan)));
    /// Failures.
    pub const ERROR: Style = Style::new().fg_color(Some(anstyle::Color::Ansi(AnsiColor::Red)));
    /// Compaction and summary markers.
    pub const MARK: Style = Style::new()
        .bold()
        .fg_color(Some(anstyle::Color::Ansi(AnsiColor::Yellow)));
}

/// `text` wrapped in `style` (stripped later by the stream when colour is off).
pub fn paint(style: Style, text: impl std::fmt::Display) -> String {
    format!("{style}{text}{style:#}")
}

/// A table that fits the terminal: no borders, bold header, columns shrunk and wrapped as
/// needed.
pub fn table<I, S>(header: I) -> Table
where
    I: IntoIterator<Item = S>,
    S: std::fmt::Display,
{
    let mut table = Table::new();
    table
        .load_preset(presets::NOTHING)
        .set_content_arrangement(ContentArrangement::Dynamic)
        .set_header({
            let mut row = Row::from(
                header
                    .into_iter()
                    .map(|h| paint(style::HEADER, h))
                    .collect::<Vec<_>>(),
            );
            row.max_height(1);
            row
        });
    if let Some(width) = terminal_width() {
        table.set_width(width);
    }
    // A terminal that reports no usable size (a bare pty) must not squeeze every column
    // to one character: lay the table out at its natural width instead.
    if table.width().is_some_and(|w| w < MIN_TABLE_WIDTH) {
        table.set_content_arrangement(ContentArrangement::Disabled);
    }
    table
}

/// How wide a [`table`] is laid out: `COLUMNS`, else the terminal's width; `None` when
/// output is not a terminal (the table takes its natural width).
pub fn table_width() -> Option<u16> {
    terminal_width().or_else(|| Table::new().width())
}

/// Narrower than this, fitting a table to the terminal does more harm than good.
const MIN_TABLE_WIDTH: u16 = 40;

/// `table` as text: one line per row (cells that don't fit are cut with `…`), columns
/// two spaces apart, no padding at the line ends. The columns in `keep` are never
/// narrowed (ids must stay whole to be copied).
pub fn render(table: &mut Table, keep: &[usize]) -> String {
    table.set_truncation_indicator("…");
    for row in table.row_iter_mut() {
        row.max_height(1);
    }
    for (i, column) in table.column_iter_mut().enumerate() {
        column.set_padding((0, 2));
        if keep.contains(&i) {
            column.set_constraint(ColumnConstraint::ContentWidth);
        }
    }
    table.trim_fmt()
}

/// `COLUMNS` when set; otherwise comfy-table asks the terminal itself (and leaves output
/// that is not a terminal unconstrained).
fn terminal_width() -> Option<u16> {
    std::env::var("COLUMNS").ok()?.trim().parse().ok()
}

/// A progress bar on stderr for `len` steps; hidden when stderr is not a terminal or
/// there is too little work for it to matter.
pub fn progress(len: usize, message: &'static str) -> ProgressBar {
    let len = u64::try_from(len).unwrap_or(u64::MAX);
    if !std::io::stderr().is_terminal() || len < 2 {
        return ProgressBar::hidden();
    }
    let bar = ProgressBar::with_draw_target(Some(len), ProgressDrawTarget::stderr());
    let template = "{msg} [{bar:30}] {pos}/{len} ({eta})";
    if let Ok(style) = ProgressStyle::with_template(template) {
        bar.set_style(style.progress_chars("=> "));
    }
    bar.set_message(message);
    bar
}

/// A spinner on stderr for work of unknown length; hidden when stderr is not a terminal.
pub fn spinner(message: &'static str) -> ProgressBar {
    if !std::io::stderr().is_terminal() {
        return ProgressBar::hidden();
    }
    let bar = ProgressBar::with_draw_target(None, ProgressDrawTarget::stderr());
    if let Ok(style) = ProgressStyle::with_template("{spinner} {msg}") {
        bar.set_style(style);
    }
    bar.set_message(message);
    bar.enable_steady_tick(Duration::from_millis(100));
    bar
}

/// Whether a person can answer a question on stdin.
pub fn can_ask() -> bool {
    std::io::stdin().is_terminal()
}

/// Asks `question` on stderr and reads a yes/no answer from stdin (default: no).
pub fn confirm(question: &str) -> std::io::Result<bool> {
    eprint!("{question} [y/N] ");
    let mut answer = String::new();
    std::io::stdin().read_line(&mut answer)?;
    Ok(matches!(
        answer.trim().to_ascii_lowercase().as_str(),
        "y" | "yes"
    ))
}

/// `1 session`, `2 sessions`, `12,345 sessions`: the count grouped by thousands.
pub fn plural(n: impl Into<i64>, word: &str) -> String {
    let n = n.into();
    let s = if n == 1 { "" } else { "s" };
    format!("{} {word}{s}", grouped(n))
}

/// A token count for a narrow column: `950`, `12.3k`, `4.1M`.
pub fn compact_count(n: i64) -> String {
    #[allow(clippy::cast_precision_loss)] // display only
    let f = n as f64;
    match n.unsigned_abs() {
        0..1_000 => n.to_string(),
        1_000..1_000_000 => format!("{:.1}k", f / 1e3),
        1_000_000..1_000_000_000 => format!("{:.1}M", f / 1e6),
        _ => format!("{:.1}G", f / 1e9),
    }
}

/// A column of dollar amounts, one format for all of them: as many decimals as the value
/// that needs most under [`dollars`] (2 to 4), so `$0.0040` stands beside `$0.0035`, never
/// `$0.004`. Right-align the column so the decimal points line up.
pub fn dollar_column(amounts: &[f64]) -> Vec<String> {
    let decimals = amounts
        .iter()
        .filter(|usd| usd.abs() < HUGE_DOLLARS)
        .map(|&usd| {
            let text = dollars(usd);
            text.find('.').map_or(0, |dot| text.len() - dot - 1)
        })
        .max()
        .unwrap_or(2);
    amounts
        .iter()
        .map(|&usd| {
            if usd.abs() >= HUGE_DOLLARS {
                dollars(usd)
            } else {
                format!("${usd:.decimals$}")
            }
        })
        .collect()
}

/// What marks a cost that leaves out usage of a model without a price (`$0.0932+?`); a
/// cost that is nothing but such usage is [`UNPRICED`] alone.
pub const PARTIAL_MARK: &str = "+?";

/// A cost none of whose usage had a price.
pub const UNPRICED: &str = "?";

/// A COST column, each amount with whether it leaves out unpriced usage: as
/// [`dollar_column`], a partial amount followed by [`PARTIAL_MARK`] and a partial $0 shown
/// as [`UNPRICED`]. When any is marked, the others are padded as wide as the mark, so the
/// decimal points of the right-aligned column still line up.
pub fn cost_column(costs: &[(f64, bool)]) -> Vec<String> {
    let amounts: Vec<f64> = costs.iter().map(|&(usd, _)| usd).collect();
    let any = costs.iter().any(|&(_, partial)| partial);
    let pad = " ".repeat(PARTIAL_MARK.len());
    dollar_column(&amounts)
        .into_iter()
        .zip(costs)
        .map(|(text, &(usd, partial))| match (any, partial) {
            (false, _) => text,
            (true, false) => format!("{text}{pad}"),
            (true, true) if usd == 0.0 => format!("{UNPRICED}{pad}"),
            (true, true) => format!("{text}{PARTIAL_MARK}"),
        })
        .collect()
}

/// The TOKENS and COST columns of a table of sessions: [`compact_count`] and
/// [`cost_column`], each [`NOT_RECORDED`] for a session with no usage recorded (its cost
/// cell padded as the others are, so the right-aligned column stays lined up), and the
/// tokens alone for one whose agent kept only a cost.
pub fn session_usage_columns(sessions: &[scribe_session::Session]) -> Vec<(String, String)> {
    let costs: Vec<(f64, bool)> = sessions
        .iter()
        .map(|s| (s.estimated_cost_usd, s.cost_is_partial()))
        .collect();
    let pad = if costs.iter().any(|&(_, partial)| partial) {
        " ".repeat(PARTIAL_MARK.len())
    } else {
        String::new()
    };
    sessions
        .iter()
        .zip(cost_column(&costs))
        .map(|(s, cost)| {
            if s.tokens_recorded() {
                (compact_count(s.tokens.total()), cost)
            } else if s.usage_recorded() {
                (NOT_RECORDED.to_owned(), cost)
            } else {
                (NOT_RECORDED.to_owned(), format!("{NOT_RECORDED}{pad}"))
            }
        })
        .collect()
}

/// The line under a table with a marked cost ([`cost_column`]): what the mark means and
/// how to give those models a price.
pub fn unpriced_note(sessions: i64) -> String {
    format!(
        "{PARTIAL_MARK} leaves out usage of models without a price ({}); give them one in \
         a model catalog (see `scribe import --help`) and import again",
        plural(sessions, "session")
    )
}

/// Counts and costs as every command and the web page's downloads write them.
pub use scribe_server::text::{
    HUGE_DOLLARS, NO_TOKENS, NO_USAGE, NOT_RECORDED, cost_text, dollars, grouped, session_cost_text,
};

use scribe_db::calendar::{self, DAY, HOUR, MINUTE, SECOND};
/// UTC dates (`YYYY-MM-DD`) and times (`YYYY-MM-DD HH:MM`), as every command prints them.
pub use scribe_db::calendar::{date, date_time};

/// A span (ms) still to run, as `3h 05m`: whole minutes, rounded up.
pub fn time_left(ms: i64) -> String {
    let left = ms.saturating_add(MINUTE - 1).max(0) / MINUTE;
    format!("{}h {:02}m", left / 60, left % 60)
}

/// How long before `now` the time `then` was (both ms): `just now`, `5m ago`, `3h ago`,
/// `2d ago`, and the UTC date beyond four weeks.
pub fn ago(then: i64, now: i64) -> String {
    let d = now.saturating_sub(then);
    match d {
        i64::MIN..=9_999 => "just now".to_owned(),
        10_000..MINUTE => format!("{}s ago", d / SECOND),
        MINUTE..HOUR => format!("{}m ago", d / MINUTE),
        HOUR..DAY => format!("{}h ago", d / HOUR),
        _ if d < 28 * DAY => format!("{}d ago", d / DAY),
        _ => date(then),
    }
}

/// `--since`: a span back from now (`7d`, `24h`) or a date (`2026-01-31`), as ms, never
/// before 1970-01-01 ([`calendar::parse_since`]; a huge span printed a negative year,
/// `-6187-03-16`).
pub fn parse_since(text: &str) -> Result<i64, String> {
    calendar::parse_since(text, scribe_db::now_ms()).map_err(|err| err.to_string())
}

/// `--source` / `--exclude-source`: a source name, which is never empty. An empty one (an
/// unset shell variable) matched no session, so `export --all --source ""` wrote an empty
/// export, over a backup as readily as anywhere.
pub fn parse_source(text: &str) -> Result<String, String> {
    if text.trim().is_empty() {
        return Err("a source name cannot be empty (cli, tui, telegram …)".to_owned());
    }
    Ok(text.to_owned())
}

/// Characters of the first message that name an untitled session ([`session_name`]).
pub const UNTITLED_NAME_CHARS: usize = 60;

/// What a session is called where its title would be shown: the title, else how it
/// began (its first user message on one line, cut, in quotes, so it is not read as a
/// title), else `(untitled)`. Control characters are shown, not acted on.
pub fn session_name(title: Option<&str>, first_message: Option<&str>) -> String {
    match (title, first_message) {
        (Some(title), _) => visible(title).into_owned(),
        (None, Some(text)) if !text.trim().is_empty() => {
            format!("“{}”", one_line(text, UNTITLED_NAME_CHARS))
        }
        (None, _) => "(untitled)".to_owned(),
    }
}

/// `--dir`: `dir` as an agent records where it works: absolute, symbolic links resolved
/// (the working directory a process reads), without a trailing `/`; a directory that no
/// longer exists is made absolute and has its `.` and `..` taken out by name.
pub fn parse_dir(dir: &str) -> Result<String, String> {
    use std::path::Component;
    if dir.is_empty() {
        return Err("expected a directory (`.` for the current one)".to_owned());
    }
    let joined = std::env::current_dir()
        .map_err(|e| format!("cannot read the current directory: {e}"))?
        .join(dir);
    let path = std::fs::canonicalize(&joined).unwrap_or_else(|_| {
        let mut out = std::path::PathBuf::new();
        for part in joined.components() {
            match part {
                Component::CurDir => {}
                Component::ParentDir => {
                    out.pop();
                }
                other => out.push(other),
            }
        }
        out
    });
    path.to_str()
        .map(str::to_owned)
        .ok_or_else(|| "not UTF-8, and no agent records such a directory".to_owned())
}

/// `--older-than` of `prune`: whole days (`90d`, `90`, `12w`; [`calendar::parse_days`]).
pub fn parse_days(text: &str) -> Result<u32, String> {
    calendar::parse_days(text, scribe_db::now_ms()).map_err(|err| err.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn control_characters_are_shown_not_acted_on() {
        assert_eq!(visible("plain\ttext\nline"), "plain\ttext\nline");
        assert!(matches!(visible("plain"), std::borrow::Cow::Borrowed(_)));
        assert_eq!(
            visible("a\u{1b}[31mred\u{7}\u{1b}]0;t\u{7}\rb\u{7f}\u{9b}c\r\nd"),
            "a␛[31mred␇␛]0;t␇␍b␡\u{fffd}c\nd"
        );
        assert_eq!(one_line("x\u{1b}[2J y", 40), "x␛[2J y");
        assert_eq!(cut("\u{1b}\u{1b}\u{1b}", 2), "␛…");
    }

    #[test]
    fn cuts_to_one_line() {
        assert_eq!(one_line("  fix\n the   build ", 40), "fix the build");
        assert_eq!(one_line("abcdefghij", 5), "abcd…");
        assert_eq!(cut("héllo wörld", 6), "héllo…");
        assert_eq!(cut("short", 5), "short");
    }

    #[test]
    fn numbers_read_naturally() {
        assert_eq!(compact_count(950), "950");
        assert_eq!(compact_count(12_345), "12.3k");
        assert_eq!(compact_count(4_100_000), "4.1M");
        assert_eq!(grouped(1_234_567), "1,234,567");
        assert_eq!(grouped(12), "12");
        assert_eq!(dollars(1.234), "$1.23");
        assert_eq!(dollars(0.0042), "$0.0042");
        assert_eq!(dollars(0.0122), "$0.0122");
        assert_eq!(dollars(0.05), "$0.05");
        assert_eq!(dollars(0.5), "$0.50");
        assert_eq!(dollars(0.0), "$0.00");
        assert_eq!(dollars(f64::MAX), "$1.80e308");
        assert_eq!(dollars(1e15), "$1.00e15");
        assert_eq!(dollars(999_999_999_999_999.0), "$999999999999999.00");
        assert_eq!(
            dollar_column(&[f64::MAX, 0.0042, 12.5]),
            ["$1.80e308", "$0.0042", "$12.5000"]
        );
        assert_eq!(
            dollar_column(&[0.004, 0.0035, 1.5]),
            ["$0.0040", "$0.0035", "$1.5000"]
        );
        assert_eq!(
            dollar_column(&[0.5, 12.0, 0.0]),
            ["$0.50", "$12.00", "$0.00"]
        );
        assert_eq!(dollar_column(&[0.05, 0.004]), ["$0.050", "$0.004"]);
        assert!(dollar_column(&[]).is_empty());
    }

    #[test]
    fn relative_times() {
        let now = 1_000 * DAY;
        assert_eq!(ago(now - 2 * SECOND, now), "just now");
        assert_eq!(ago(now - 45 * SECOND, now), "45s ago");
        assert_eq!(ago(now - 5 * MINUTE, now), "5m ago");
        assert_eq!(ago(now - 3 * HOUR, now), "3h ago");
        assert_eq!(ago(now - 2 * DAY, now), "2d ago");
        assert_eq!(ago(0, now), "1970-01-01");
    }

    #[test]
    fn the_flags_take_the_calendar_grammar() {
        assert_eq!(
            date_time(parse_since("2026-11-29").unwrap() + 90 * MINUTE),
            "2026-11-29 01:30"
        );
        assert!(parse_since("7d").unwrap() < scribe_db::now_ms());
        assert!(
            parse_since("3000000d")
                .unwrap_err()
                .contains("before 1970-01-01")
        );
        assert!(
            parse_days("3000000d")
                .unwrap_err()
                .contains("before 1970-01-01")
        );
        assert_eq!(parse_days("12w").unwrap(), 84);
        let err = parse_since("yesterday").unwrap_err();
        assert!(err.contains("7d") && err.contains("2026-01-31"), "{err}");
    }
}
