//! The stable JSON shapes of `--json` output (documented in the README): snake_case keys,
//! times in milliseconds since the epoch, costs in US dollars, one document per command.
//!
//! These are the CLI's own types rather than the library's, so a library refactor cannot
//! silently change what scripts read.

use std::io::Write;

use scribe_message::TokenUsage;
use scribe_session::{Session, UsageTotals};
use serde::Serialize;

/// `dollars` rounded to a billionth: sums of many small float charges carry noise in the
/// last digits (`0.04644000000000001`) that scripts should not see.
pub fn usd(dollars: f64) -> f64 {
    (dollars * 1e9).round() / 1e9
}

/// Token counters.
#[derive(Debug, Serialize)]
pub struct Tokens {
    /// Prompt tokens not served from a cache.
    pub input: i64,
    /// Generated tokens.
    pub output: i64,
    /// Prompt tokens read from the cache.
    pub cache_read: i64,
    /// Prompt tokens written to the cache.
    pub cache_write: i64,
    /// Reasoning tokens.
    pub reasoning: i64,
    /// All of the above.
    pub total: i64,
}

impl From<&TokenUsage> for Tokens {
    fn from(t: &TokenUsage) -> Self {
        Tokens {
            input: t.input,
            output: t.output,
            cache_read: t.cache_read,
            cache_write: t.cache_write,
            reasoning: t.reasoning,
            total: t.total(),
        }
    }
}

/// A session as `list` shows it.
#[derive(Debug, Serialize)]
pub struct SessionSummary {
    /// Id.
    pub id: String,
    /// Title, if any.
    pub title: Option<String>,
    /// `normal`, `task`, `fork`, `continuation` or `title`.
    pub kind: &'static str,
    /// Where it was started.
    pub source: String,
    /// The session it came from.
    pub parent_session_id: Option<String>,
    /// Model (`provider/model`).
    pub model: Option<String>,
    /// Messages.
    pub message_count: i64,
    /// Tool calls.
    pub tool_call_count: i64,
    /// Tokens used.
    pub tokens: Tokens,
    /// Estimated cost (USD).
    pub cost_usd: f64,
    /// The first user message on one line, cut with `…`; `null` when there is none.
    pub preview: Option<String>,
    /// Creation time.
    pub created_at: i64,
    /// Last activity.
    pub updated_at: i64,
    /// When it ended.
    pub ended_at: Option<i64>,
    /// When it was archived.
    pub archived_at: Option<i64>,
}

impl SessionSummary {
    /// The summary of `s` with its `preview`.
    pub fn new(s: &Session, preview: Option<String>) -> Self {
        SessionSummary {
            id: s.id.clone(),
            title: s.title.clone(),
            kind: s.kind.as_str(),
            source: s.source.clone(),
            parent_session_id: s.parent_session_id.clone(),
            model: s.model.clone(),
            message_count: s.message_count,
            tool_call_count: s.tool_call_count,
            tokens: Tokens::from(&s.tokens),
            cost_usd: usd(s.estimated_cost_usd),
            preview,
            created_at: s.created_at,
            updated_at: s.updated_at,
            ended_at: s.ended_at,
            archived_at: s.archived_at,
        }
    }
}

/// Usage totals of a group of sessions (`stats`).
#[derive(Debug, Serialize)]
pub struct Totals {
    /// Sessions counted.
    pub sessions: i64,
    /// Model calls.
    pub api_calls: i64,
    /// Tokens.
    pub tokens: Tokens,
    /// Estimated cost (USD).
    pub cost_usd: f64,
}

impl From<&UsageTotals> for Totals {
    fn from(t: &UsageTotals) -> Self {
        Totals {
            sessions: t.sessions,
            api_calls: t.api_calls,
            tokens: Tokens::from(&t.tokens),
            cost_usd: usd(t.cost_usd),
        }
    }
}

/// Writes `value` as one pretty JSON document and a newline.
pub fn print(out: &mut impl Write, value: &impl Serialize) -> Result<(), crate::error::CliError> {
    serde_json::to_writer_pretty(&mut *out, value)?;
    writeln!(out)?;
    Ok(())
}

#[cfg(test)]
mod tests {
    #[test]
    fn costs_lose_float_noise() {
        assert_eq!(super::usd(0.046_440_000_000_000_01).to_string(), "0.04644");
        assert_eq!(super::usd(0.0123), 0.0123);
    }
}
