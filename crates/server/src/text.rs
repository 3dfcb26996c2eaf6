//! Counts and costs as people read them, one way everywhere: the command line's tables and
//! reports, and the web page's Markdown download ([`crate::markdown`]).

/// A count with thousands separators: `1,234,567`.
pub fn grouped(n: i64) -> String {
    let digits = n.unsigned_abs().to_string();
    let mut out = String::with_capacity(digits.len() + digits.len() / 3 + 1);
    if n < 0 {
        out.push('-');
    }
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    out
}

/// Amounts from here up are no real bill (a damaged or hand-written row; cost sums stop
/// at `f64::MAX`, 309 digits): shown in scientific notation, `$1.80e308`.
pub const HUGE_DOLLARS: f64 = 1e15;

/// Dollars: `$1.23`; below ten cents up to four decimals (`$0.0122`, `$0.05`), so small
/// costs neither read as zero nor all look alike; from [`HUGE_DOLLARS`] up `$1.80e308`.
pub fn dollars(usd: f64) -> String {
    if usd.abs() >= HUGE_DOLLARS {
        return format!("${usd:.2e}");
    }
    if usd == 0.0 || usd.abs() >= 0.1 {
        return format!("${usd:.2}");
    }
    let mut text = format!("{usd:.4}");
    while text.ends_with('0') && text.len() > text.find('.').map_or(0, |dot| dot + 3) {
        text.pop();
    }
    format!("${text}")
}

/// What a table's TOKENS and COST cells show for a session with no usage recorded
/// ([`Session::usage_recorded`](scribe_session::Session::usage_recorded)): not known,
/// rather than `0` and `$0.00`.
pub const NOT_RECORDED: &str = "—";

/// What a report says of a session with no usage recorded, in place of its tokens and cost.
pub const NO_USAGE: &str = "no usage recorded";

/// What a report says, in place of its tokens, of a session with usage recorded but no
/// tokens ([`Session::tokens_recorded`](scribe_session::Session::tokens_recorded): its
/// agent kept only a cost).
pub const NO_TOKENS: &str = "no tokens recorded";

/// What a reasoning part without text shows: the provider sent its reasoning redacted or
/// encrypted (Anthropic's `redacted_thinking`, OpenAI's encrypted reasoning), kept in the
/// part's metadata as it came.
pub const REDACTED_REASONING: &str = "(redacted by the provider)";

/// The text a reasoning part shows: its own, or [`REDACTED_REASONING`] when it has none.
pub fn reasoning_text(text: &str) -> &str {
    if text.trim().is_empty() {
        REDACTED_REASONING
    } else {
        text
    }
}

/// A message's error on one line, as `scribe show`, the Markdown export and the web page
/// write it: its `type` and `message` when they are text (`error (rewound): undone by a
/// rewind in Gemini CLI`), its type alone when the message is empty (`error (cancelled)`,
/// a reply the user stopped), else `error: ` and its JSON. `show` maps the stored text
/// (the terminal's escaping of control characters; the Markdown keeps it as stored).
pub fn error_line(
    error: &serde_json::Value,
    show: impl for<'a> Fn(&'a str) -> std::borrow::Cow<'a, str>,
) -> String {
    let text = |key: &str| error.get(key).and_then(serde_json::Value::as_str);
    let message = text("message").filter(|m| !m.trim().is_empty());
    match (message, text("type")) {
        (Some(message), Some(kind)) => format!("error ({}): {}", show(kind), show(message)),
        (Some(message), None) => format!("error: {}", show(message)),
        (None, Some(kind)) => format!("error ({})", show(kind)),
        (None, None) => format!("error: {error}"),
    }
}

/// A session's cost as [`cost_text`] writes it, or [`NO_USAGE`] when none was recorded.
pub fn session_cost_text(s: &scribe_session::Session) -> String {
    if s.usage_recorded() {
        cost_text(s.estimated_cost_usd, s.cost_is_partial())
    } else {
        NO_USAGE.to_owned()
    }
}

/// A cost as one figure ([`dollars`]), saying when it leaves out unpriced usage, as an
/// import's summary does: `$0.0932 + unknown (models without a price)`.
pub fn cost_text(usd: f64, partial: bool) -> String {
    if partial {
        format!("{} + unknown (models without a price)", dollars(usd))
    } else {
        dollars(usd)
    }
}
