//! A stored message ([`Message`]) and its stored parts ([`StoredPart`]), and their mapping
//! from the database rows of `scribe_db::queries`.

use serde::{Deserialize, Serialize};

use scribe_db::queries::{MessageRow, PartRow};

use crate::error::{MessageError, Result};
use crate::part::Part;
use crate::role::{FinishReason, Role};
use crate::usage::TokenUsage;

/// One turn of a conversation, with its parts in order.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Message {
    /// `msg_…` (time-sortable).
    pub id: String,
    /// The session it belongs to.
    pub session_id: String,
    /// The message this one answers, if any.
    pub parent_id: Option<String>,
    /// Who wrote it.
    pub role: Role,
    /// The agent that produced or received it.
    pub agent: Option<String>,
    /// The model provider (assistant messages).
    pub provider: Option<String>,
    /// The model (assistant messages).
    pub model: Option<String>,
    /// Why the turn ended, once it has.
    pub finish_reason: Option<FinishReason>,
    /// A compaction summary of the conversation before it.
    pub is_summary: bool,
    /// Tokens the message used.
    pub usage: TokenUsage,
    /// What it cost, in US dollars.
    pub cost_usd: f64,
    /// The error that ended it, as JSON.
    pub error: Option<serde_json::Value>,
    /// Creation time (ms).
    pub created_at: i64,
    /// Last change (ms).
    pub updated_at: i64,
    /// When it finished (ms).
    pub finished_at: Option<i64>,
    /// Its parts, in position order.
    pub parts: Vec<StoredPart>,
}

/// A part as stored: its row identity and times around the typed [`Part`].
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct StoredPart {
    /// `prt_…`.
    pub id: String,
    /// Its place in the message (ascending; need not be contiguous).
    pub position: i64,
    /// The typed content.
    pub part: Part,
    /// Creation time (ms).
    pub created_at: i64,
    /// Last change (ms).
    pub updated_at: i64,
}

/// A message's usage totals, as [`MessageService::add_usage_tx`](crate::MessageService::add_usage_tx)
/// left them (without loading the message's parts).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct MessageUsage {
    /// The message.
    pub message_id: String,
    /// Its session.
    pub session_id: String,
    /// Its tokens, all steps so far.
    pub usage: TokenUsage,
    /// Its cost so far, US dollars.
    pub cost_usd: f64,
    /// When it last changed (ms).
    pub updated_at: i64,
}

impl Message {
    /// The text of the message's text parts, joined by blank lines.
    pub fn text(&self) -> String {
        self.parts
            .iter()
            .filter_map(|p| match &p.part {
                Part::Text(t) => Some(t.text.as_str()),
                _ => None,
            })
            .collect::<Vec<_>>()
            .join("\n\n")
    }

    /// The part with id `part_id`.
    pub fn part(&self, part_id: &str) -> Option<&StoredPart> {
        self.parts.iter().find(|p| p.id == part_id)
    }
}

impl StoredPart {
    /// Decodes a `parts` row; bad JSON is [`MessageError::CorruptPart`] naming the row.
    pub fn from_row(row: PartRow) -> Result<StoredPart> {
        StoredPart::decode(
            row.id,
            row.position,
            &row.data,
            row.created_at,
            row.updated_at,
        )
    }

    /// Decodes a part from its stored columns; bad JSON is [`MessageError::CorruptPart`].
    pub fn decode(
        id: String,
        position: i64,
        data: &str,
        created_at: i64,
        updated_at: i64,
    ) -> Result<StoredPart> {
        match Part::from_json(data) {
            Ok(part) => Ok(StoredPart {
                id,
                position,
                part,
                created_at,
                updated_at,
            }),
            Err(source) => Err(MessageError::CorruptPart {
                part_id: id,
                source,
            }),
        }
    }
}

/// Decodes a `messages` row (without parts).
pub(crate) fn message_from_row(row: MessageRow) -> Result<Message> {
    let role = row
        .role
        .parse::<Role>()
        .map_err(|e| MessageError::CorruptMessage {
            message_id: row.id.clone(),
            reason: "role is not a known role".to_owned(),
            source: Box::new(e),
        })?;
    let error = match row.error {
        None => None,
        Some(text) => {
            Some(
                serde_json::from_str(&text).map_err(|e| MessageError::CorruptMessage {
                    message_id: row.id.clone(),
                    reason: "error column is not json".to_owned(),
                    source: Box::new(e),
                })?,
            )
        }
    };
    Ok(Message {
        id: row.id,
        session_id: row.session_id,
        parent_id: row.parent_id,
        role,
        agent: row.agent,
        provider: row.provider,
        model: row.model,
        finish_reason: row.finish_reason.map(FinishReason::from),
        is_summary: row.is_summary,
        usage: TokenUsage {
            input: row.input_tokens,
            output: row.output_tokens,
            cache_read: row.cache_read_tokens,
            cache_write: row.cache_write_tokens,
            reasoning: row.reasoning_tokens,
        },
        cost_usd: row.cost_usd,
        error,
        created_at: row.created_at,
        updated_at: row.updated_at,
        finished_at: row.finished_at,
        parts: Vec::new(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row() -> MessageRow {
        MessageRow {
            id: "msg_1".into(),
            session_id: "ses_1".into(),
            parent_id: None,
            role: "user".into(),
            agent: None,
            provider: None,
            model: None,
            finish_reason: None,
            is_summary: false,
            input_tokens: 0,
            output_tokens: 0,
            cache_read_tokens: 0,
            cache_write_tokens: 0,
            reasoning_tokens: 0,
            cost_usd: 0.0,
            error: None,
            created_at: 1,
            updated_at: 1,
            finished_at: None,
        }
    }

    #[test]
    fn corrupt_rows_keep_the_decoder_error_as_source() {
        let bad_role = MessageRow {
            role: "robot".into(),
            ..row()
        };
        let err = message_from_row(bad_role).unwrap_err();
        assert_eq!(
            err.to_string(),
            "message msg_1 is corrupt: role is not a known role"
        );
        let source = std::error::Error::source(&err).unwrap();
        assert!(source.is::<crate::ParseRoleError>(), "{source:?}");

        let bad_error = MessageRow {
            error: Some("{nope".into()),
            ..row()
        };
        let err = message_from_row(bad_error).unwrap_err();
        assert_eq!(
            err.to_string(),
            "message msg_1 is corrupt: error column is not json"
        );
        let source = std::error::Error::source(&err).unwrap();
        assert!(source.is::<serde_json::Error>(), "{source:?}");

        assert!(message_from_row(row()).is_ok());
    }
}
