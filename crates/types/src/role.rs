//! Who wrote a message ([`Role`]) and why the model stopped ([`FinishReason`]).

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Deserializer, Serialize, Serializer};

/// The author of a message.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Role {
    /// The human (or the gateway speaking for one).
    User,
    /// The model.
    Assistant,
    /// System instructions.
    System,
    /// A tool result sent back to the model.
    Tool,
}

impl Role {
    /// Every role, in declaration order.
    pub const ALL: [Role; 4] = [Role::User, Role::Assistant, Role::System, Role::Tool];

    /// The stored spelling (`"user"`, `"assistant"`, `"system"`, `"tool"`).
    pub fn as_str(self) -> &'static str {
        match self {
            Role::User => "user",
            Role::Assistant => "assistant",
            Role::System => "system",
            Role::Tool => "tool",
        }
    }
}

impl fmt::Display for Role {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A string that is not one of the four [`Role`] spellings.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown role {value:?} (expected user, assistant, system or tool)")]
pub struct ParseRoleError {
    /// The rejected input, verbatim.
    pub value: String,
}

impl FromStr for Role {
    type Err = ParseRoleError;

    /// Exact, case-sensitive match on the stored spelling: the database only
    /// ever holds lowercase, so anything else is corrupt data, not a variant.
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Role::ALL
            .into_iter()
            .find(|r| r.as_str() == s)
            .ok_or_else(|| ParseRoleError {
                value: s.to_owned(),
            })
    }
}

/// Why a model turn ended.
///
/// Serialized as a plain string. Values this build does not know (a newer
/// provider, a newer Scribe) are kept verbatim in [`FinishReason::Unknown`]
/// and written back unchanged, so reading old or future rows never fails.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum FinishReason {
    /// The model finished its answer.
    EndTurn,
    /// The output token limit was reached.
    MaxTokens,
    /// The model stopped to call tools.
    ToolUse,
    /// The user or the caller canceled the turn.
    Canceled,
    /// The provider or the agent failed.
    Error,
    /// A tool call was refused by the permission rules.
    PermissionDenied,
    /// The agent's step limit was reached while the model still called tools.
    MaxSteps,
    /// Any other value, kept verbatim.
    Unknown(String),
}

impl FinishReason {
    /// The stored spelling; for [`FinishReason::Unknown`] the original string.
    pub fn as_str(&self) -> &str {
        match self {
            FinishReason::EndTurn => "end_turn",
            FinishReason::MaxTokens => "max_tokens",
            FinishReason::ToolUse => "tool_use",
            FinishReason::Canceled => "canceled",
            FinishReason::Error => "error",
            FinishReason::PermissionDenied => "permission_denied",
            FinishReason::MaxSteps => "max_steps",
            FinishReason::Unknown(s) => s,
        }
    }

    /// Whether this is a value this build knows.
    pub fn is_known(&self) -> bool {
        !matches!(self, FinishReason::Unknown(_))
    }
}

impl From<&str> for FinishReason {
    fn from(s: &str) -> Self {
        match s {
            "end_turn" => FinishReason::EndTurn,
            "max_tokens" => FinishReason::MaxTokens,
            "tool_use" => FinishReason::ToolUse,
            "canceled" => FinishReason::Canceled,
            "error" => FinishReason::Error,
            "permission_denied" => FinishReason::PermissionDenied,
            "max_steps" => FinishReason::MaxSteps,
            other => FinishReason::Unknown(other.to_owned()),
        }
    }
}

impl From<String> for FinishReason {
    fn from(s: String) -> Self {
        match FinishReason::from(s.as_str()) {
            // Reuse the allocation we already own.
            FinishReason::Unknown(_) => FinishReason::Unknown(s),
            known => known,
        }
    }
}

impl FromStr for FinishReason {
    type Err = std::convert::Infallible;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Ok(FinishReason::from(s))
    }
}

impl fmt::Display for FinishReason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl Serialize for FinishReason {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(self.as_str())
    }
}

impl<'de> Deserialize<'de> for FinishReason {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        String::deserialize(deserializer).map(FinishReason::from)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn role_round_trips_through_str_and_serde() {
        for role in Role::ALL {
            assert_eq!(role.as_str().parse::<Role>(), Ok(role));
            let json = serde_json::to_string(&role).unwrap();
            assert_eq!(json, format!("\"{}\"", role.as_str()));
            assert_eq!(serde_json::from_str::<Role>(&json).unwrap(), role);
        }
    }

    #[test]
    fn role_rejects_unknown_with_typed_error() {
        let err = "User".parse::<Role>().unwrap_err();
        assert_eq!(err.value, "User");
        assert!(err.to_string().starts_with("unknown role"));
        assert!(serde_json::from_str::<Role>("\"robot\"").is_err());
    }

    #[test]
    fn finish_reason_round_trips_known_and_unknown() {
        let all = [
            FinishReason::EndTurn,
            FinishReason::MaxTokens,
            FinishReason::ToolUse,
            FinishReason::Canceled,
            FinishReason::Error,
            FinishReason::PermissionDenied,
            FinishReason::MaxSteps,
            FinishReason::Unknown("content_filter".into()),
            FinishReason::Unknown(String::new()),
        ];
        for r in all {
            let json = serde_json::to_string(&r).unwrap();
            assert_eq!(json, format!("\"{}\"", r.as_str()));
            assert_eq!(serde_json::from_str::<FinishReason>(&json).unwrap(), r);
            assert_eq!(r.as_str().parse::<FinishReason>(), Ok(r.clone()));
        }
        assert_eq!(
            FinishReason::from("stop-sequence".to_string()),
            FinishReason::Unknown("stop-sequence".into())
        );
        assert!(!FinishReason::Unknown("x".into()).is_known());
        assert!(FinishReason::ToolUse.is_known());
    }
}
