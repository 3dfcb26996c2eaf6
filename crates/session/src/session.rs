//! [`Session`]: the typed view of a `sessions` row, and [`SessionKind`].

use std::fmt;
use std::str::FromStr;

use scribe_db::queries::SessionRow;
use scribe_message::TokenUsage;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::error::SessionError;

/// What a session is for; decides how it relates to its parent.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum SessionKind {
    /// A conversation of its own.
    #[default]
    Normal,
    /// A background session that generates its parent's title.
    Title,
    /// A sub-agent's session, spawned by a tool call of its parent.
    Task,
    /// A copy of its parent's conversation up to some message.
    Fork,
    /// The continuation of its parent after compaction.
    Continuation,
}

impl SessionKind {
    /// Every kind, in declaration order.
    pub const ALL: [SessionKind; 5] = [
        SessionKind::Normal,
        SessionKind::Title,
        SessionKind::Task,
        SessionKind::Fork,
        SessionKind::Continuation,
    ];

    /// The stored name: `normal`, `title`, `task`, `fork` or `continuation`.
    pub const fn as_str(self) -> &'static str {
        match self {
            SessionKind::Normal => "normal",
            SessionKind::Title => "title",
            SessionKind::Task => "task",
            SessionKind::Fork => "fork",
            SessionKind::Continuation => "continuation",
        }
    }
}

impl fmt::Display for SessionKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for SessionKind {
    type Err = SessionError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        SessionKind::ALL
            .into_iter()
            .find(|kind| kind.as_str() == s)
            .ok_or_else(|| SessionError::InvalidInput(format!("unknown session kind {s:?}")))
    }
}

/// A session: one conversation with its settings, counters, usage and lifecycle times.
///
/// Counters and usage are maintained by the database (triggers and atomic increments);
/// the service never writes totals it computed itself. Times are milliseconds since the
/// Unix epoch.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Session {
    /// `ses_…`, or the tool-call id of a task session, or `title-{parent}`.
    pub id: String,
    /// The session this one came from (task, title, fork, continuation).
    pub parent_session_id: Option<String>,
    /// What the session is for.
    pub kind: SessionKind,
    /// Where it was started: `cli`, `tui`, `telegram` …
    pub source: String,
    /// Who it belongs to, when the source knows users.
    pub user_id: Option<String>,
    /// The project directory it works in.
    pub directory: Option<String>,
    /// Normalized, unique when present.
    pub title: Option<String>,
    /// The model it talks to (`provider/model`).
    pub model: Option<String>,
    /// Model settings (temperature, reasoning effort …) as JSON.
    pub model_config: Option<Value>,
    /// The system prompt it was started with.
    pub system_prompt: Option<String>,
    /// The permission ruleset as JSON.
    pub permission: Option<Value>,
    /// Messages in the session (kept by triggers). A message added or deleted is announced
    /// by the message service's broker, not as a session `updated`: a list that shows this
    /// count watches [`Store::watch`](crate::Store::watch), which hears both (and other
    /// processes).
    pub message_count: i64,
    /// Tool calls in the session (kept by triggers on tool parts; announced as
    /// [`message_count`](Session::message_count) is).
    pub tool_call_count: i64,
    /// Model calls made.
    pub api_call_count: i64,
    /// Tokens used, all model calls added up.
    pub tokens: TokenUsage,
    /// Cost estimated from token prices, in US dollars.
    pub estimated_cost_usd: f64,
    /// Cost billed by the provider, when it reported one.
    pub actual_cost_usd: Option<f64>,
    /// The provider that bills the calls.
    pub billing_provider: Option<String>,
    /// The provider's API base URL.
    pub billing_base_url: Option<String>,
    /// How calls are billed (e.g. `api`, `subscription`).
    pub billing_mode: Option<String>,
    /// Where the cost figure stands, as the history importers write it
    /// (`scribe_import::pricing::status`): `reported`, `estimated`, `reported+estimated`,
    /// `partial` (some usage had no price) or `unknown` (none had); `None` for sessions
    /// the agent loop wrote, whose every call was priced. See
    /// [`Session::cost_is_partial`].
    pub cost_status: Option<String>,
    /// Where the cost figure came from.
    pub cost_source: Option<String>,
    /// The price table version used for the estimate.
    pub pricing_version: Option<String>,
    /// The message that summarizes the conversation so far (after compaction).
    pub summary_message_id: Option<String>,
    /// Creation time.
    pub created_at: i64,
    /// Last change.
    pub updated_at: i64,
    /// When it ended; `None` while active.
    pub ended_at: Option<i64>,
    /// Why it ended (`user_exit`, `compacted` …).
    pub end_reason: Option<String>,
    /// When it was archived; `None` when not archived.
    pub archived_at: Option<i64>,
    /// When a compaction started; `None` when none is running.
    pub compacting_at: Option<i64>,
}

impl Session {
    /// Whether the session has not ended.
    pub fn is_active(&self) -> bool {
        self.ended_at.is_none()
    }

    /// Whether [`estimated_cost_usd`](Session::estimated_cost_usd) leaves out usage of a
    /// model without a price (`cost_status` `unknown` or `partial`): the cost is a lower
    /// bound, and reports say so rather than show the usage as free. The same rule, in
    /// SQL, is `session_own_usage.unpriced` (schema V28), which
    /// [`UsageTotals::unpriced_sessions`](crate::UsageTotals::unpriced_sessions) counts.
    pub fn cost_is_partial(&self) -> bool {
        matches!(self.cost_status.as_deref(), Some("unknown" | "partial"))
    }

    /// Whether any usage was recorded: a model call counted, tokens, or a cost. `false`
    /// for a session no model has answered yet, or whose agent keeps no usage (Google
    /// Antigravity, Grok Build): its tokens and cost are not known, rather than zero, and
    /// reports show them as not recorded instead of as free.
    pub fn usage_recorded(&self) -> bool {
        self.api_call_count > 0
            || !self.tokens.is_zero()
            || self.estimated_cost_usd != 0.0
            || self.actual_cost_usd.is_some()
    }

    /// Whether its tokens are known: [`Session::usage_recorded`], and some counted. An
    /// agent that keeps only a cost (Crush's running cost, beside the last call's tokens
    /// alone) records usage without tokens: they are not known, rather than zero.
    pub fn tokens_recorded(&self) -> bool {
        !self.tokens.is_zero()
    }

    /// Whether the session is archived.
    pub fn is_archived(&self) -> bool {
        self.archived_at.is_some()
    }
}

fn json_column(
    id: &str,
    column: &str,
    text: Option<String>,
) -> Result<Option<Value>, SessionError> {
    text.map(|text| {
        serde_json::from_str(&text).map_err(|err| SessionError::Corrupt {
            id: id.to_owned(),
            reason: format!("{column} is not JSON"),
            source: Some(err),
        })
    })
    .transpose()
}

/// JSON text for a JSON column; `None` stays NULL.
pub(crate) fn json_text(value: Option<&Value>) -> Option<String> {
    value.map(Value::to_string)
}

impl TryFrom<SessionRow> for Session {
    type Error = SessionError;

    fn try_from(row: SessionRow) -> Result<Self, Self::Error> {
        let kind = row.kind.parse().map_err(|_| SessionError::Corrupt {
            id: row.id.clone(),
            reason: format!("unknown kind {:?}", row.kind),
            source: None,
        })?;
        let model_config = json_column(&row.id, "model_config", row.model_config)?;
        let permission = json_column(&row.id, "permission", row.permission)?;
        Ok(Session {
            kind,
            model_config,
            permission,
            tokens: TokenUsage {
                input: row.input_tokens,
                output: row.output_tokens,
                cache_read: row.cache_read_tokens,
                cache_write: row.cache_write_tokens,
                reasoning: row.reasoning_tokens,
            },
            id: row.id,
            parent_session_id: row.parent_session_id,
            source: row.source,
            user_id: row.user_id,
            directory: row.directory,
            title: row.title,
            model: row.model,
            system_prompt: row.system_prompt,
            message_count: row.message_count,
            tool_call_count: row.tool_call_count,
            api_call_count: row.api_call_count,
            estimated_cost_usd: row.estimated_cost_usd,
            actual_cost_usd: row.actual_cost_usd,
            billing_provider: row.billing_provider,
            billing_base_url: row.billing_base_url,
            billing_mode: row.billing_mode,
            cost_status: row.cost_status,
            cost_source: row.cost_source,
            pricing_version: row.pricing_version,
            summary_message_id: row.summary_message_id,
            created_at: row.created_at,
            updated_at: row.updated_at,
            ended_at: row.ended_at,
            end_reason: row.end_reason,
            archived_at: row.archived_at,
            compacting_at: row.compacting_at,
        })
    }
}

/// Converts a list of rows, failing on the first malformed one.
pub(crate) fn sessions(rows: Vec<SessionRow>) -> Result<Vec<Session>, SessionError> {
    rows.into_iter().map(Session::try_from).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row() -> SessionRow {
        SessionRow {
            id: "ses_1".into(),
            parent_session_id: None,
            kind: "task".into(),
            source: "cli".into(),
            user_id: None,
            directory: None,
            title: Some("t".into()),
            model: None,
            model_config: Some(r#"{"a":1}"#.into()),
            system_prompt: None,
            permission: None,
            message_count: 1,
            tool_call_count: 2,
            api_call_count: 3,
            input_tokens: 4,
            output_tokens: 5,
            cache_read_tokens: 6,
            cache_write_tokens: 7,
            reasoning_tokens: 8,
            estimated_cost_usd: 0.5,
            actual_cost_usd: None,
            billing_provider: None,
            billing_base_url: None,
            billing_mode: None,
            cost_status: None,
            cost_source: None,
            pricing_version: None,
            summary_message_id: None,
            created_at: 1,
            updated_at: 2,
            ended_at: None,
            end_reason: None,
            archived_at: None,
            compacting_at: None,
        }
    }

    #[test]
    fn converts_a_row_and_round_trips_through_json() {
        let session = Session::try_from(row()).unwrap();
        assert_eq!(session.kind, SessionKind::Task);
        assert_eq!(session.tokens.total(), 4 + 5 + 6 + 7 + 8);
        assert_eq!(session.model_config, Some(serde_json::json!({"a": 1})));
        let json = serde_json::to_string(&session).unwrap();
        assert!(json.contains(r#""kind":"task""#), "{json}");
        assert_eq!(serde_json::from_str::<Session>(&json).unwrap(), session);
    }

    #[test]
    fn malformed_rows_are_corrupt_not_panics() {
        let bad_kind = SessionRow {
            kind: "mystery".into(),
            ..row()
        };
        assert!(matches!(
            Session::try_from(bad_kind),
            Err(SessionError::Corrupt { id, .. }) if id == "ses_1"
        ));
        let bad_json = SessionRow {
            permission: Some("{nope".into()),
            ..row()
        };
        let err = Session::try_from(bad_json).unwrap_err();
        assert!(
            matches!(
                &err,
                SessionError::Corrupt {
                    source: Some(_),
                    ..
                }
            ),
            "{err:?}"
        );
        // The decoder's message is the source, not repeated in the display.
        assert_eq!(
            err.to_string(),
            "stored session ses_1 is malformed: permission is not JSON"
        );
        let source = std::error::Error::source(&err).unwrap();
        assert!(source.is::<serde_json::Error>(), "{source:?}");
    }

    #[test]
    fn kinds_parse_their_names() {
        for kind in SessionKind::ALL {
            assert_eq!(kind.as_str().parse::<SessionKind>().unwrap(), kind);
            assert_eq!(kind.to_string(), kind.as_str());
        }
        assert!("Normal".parse::<SessionKind>().is_err());
    }
}
