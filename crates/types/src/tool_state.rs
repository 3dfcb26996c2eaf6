//! The life of a tool call: [`ToolState`] and its legal transitions.
//!
//! ```text
//! pending ──start──▶ running ──complete──▶ completed
//!    │                  │
//!    └──────fail────────┴──────fail──────▶ error
//! ```
//!
//! `completed` and `error` are final. A pending call may fail without ever
//! running (permission denied, canceled before start), which is why
//! `error.started_at` is optional.
//!
//! Unlike [`crate::Part`], a status this build does not know is a decode error
//! (the transitions could not be checked against it); add statuses together
//! with their transitions.

use serde::{Deserialize, Serialize};
use serde_json::Value;

/// Where a tool call is in its life; serialized tagged by `"status"`.
///
/// Times are milliseconds since the epoch.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "status", rename_all = "snake_case")]
pub enum ToolState {
    /// Requested by the model, not started yet.
    Pending,
    /// Executing.
    Running {
        /// When execution started.
        started_at: i64,
    },
    /// Finished with a result.
    Completed {
        /// What the tool returned (sent back to the model).
        output: String,
        /// A short human-readable title for UIs.
        #[serde(default)]
        title: String,
        /// Tool-specific details, kept verbatim (`null` when absent).
        #[serde(default, skip_serializing_if = "Value::is_null")]
        metadata: Value,
        /// When execution started.
        started_at: i64,
        /// When execution ended.
        ended_at: i64,
    },
    /// Failed, was refused or was canceled.
    Error {
        /// What went wrong (sent back to the model).
        message: String,
        /// When execution started; `None` if it never ran.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        started_at: Option<i64>,
        /// When the failure was recorded.
        ended_at: i64,
    },
}

/// A [`ToolState`] transition that the state machine forbids.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ToolStateError {
    /// The call cannot move from `from` to `to` (e.g. completed → running).
    #[error("illegal tool state transition from {from} to {to}")]
    IllegalTransition {
        /// The current status.
        from: &'static str,
        /// The requested status.
        to: &'static str,
    },
}

impl ToolState {
    /// The `"status"` tag: `pending`, `running`, `completed` or `error`.
    pub fn status(&self) -> &'static str {
        match self {
            ToolState::Pending => "pending",
            ToolState::Running { .. } => "running",
            ToolState::Completed { .. } => "completed",
            ToolState::Error { .. } => "error",
        }
    }

    /// Whether the call has ended (completed or error).
    pub fn is_terminal(&self) -> bool {
        matches!(self, ToolState::Completed { .. } | ToolState::Error { .. })
    }

    /// The output of a completed call.
    pub fn output(&self) -> Option<&str> {
        match self {
            ToolState::Completed { output, .. } => Some(output),
            _ => None,
        }
    }

    /// The message of a failed call.
    pub fn error_message(&self) -> Option<&str> {
        match self {
            ToolState::Error { message, .. } => Some(message),
            _ => None,
        }
    }

    /// When the call started running, if it did.
    pub fn started_at(&self) -> Option<i64> {
        match self {
            ToolState::Pending => None,
            ToolState::Running { started_at } | ToolState::Completed { started_at, .. } => {
                Some(*started_at)
            }
            ToolState::Error { started_at, .. } => *started_at,
        }
    }

    /// pending → running. On error the state is unchanged.
    pub fn start(&mut self, now: i64) -> Result<(), ToolStateError> {
        match self {
            ToolState::Pending => {
                *self = ToolState::Running { started_at: now };
                Ok(())
            }
            other => Err(other.illegal("running")),
        }
    }

    /// running → completed. On error the state is unchanged.
    pub fn complete(
        &mut self,
        output: impl Into<String>,
        title: impl Into<String>,
        metadata: Value,
        now: i64,
    ) -> Result<(), ToolStateError> {
        match self {
            ToolState::Running { started_at } => {
                *self = ToolState::Completed {
                    output: output.into(),
                    title: title.into(),
                    metadata,
                    started_at: *started_at,
                    ended_at: now,
                };
                Ok(())
            }
            other => Err(other.illegal("completed")),
        }
    }

    /// pending | running → error. On error the state is unchanged.
    pub fn fail(&mut self, message: impl Into<String>, now: i64) -> Result<(), ToolStateError> {
        match self {
            ToolState::Pending | ToolState::Running { .. } => {
                *self = ToolState::Error {
                    message: message.into(),
                    started_at: self.started_at(),
                    ended_at: now,
                };
                Ok(())
            }
            other => Err(other.illegal("error")),
        }
    }

    fn illegal(&self, to: &'static str) -> ToolStateError {
        ToolStateError::IllegalTransition {
            from: self.status(),
            to,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn happy_path_pending_running_completed() {
        let mut s = ToolState::Pending;
        s.start(10).unwrap();
        assert_eq!(s, ToolState::Running { started_at: 10 });
        s.complete("ok", "ls", json!({"lines": 3}), 20).unwrap();
        assert_eq!(
            s,
            ToolState::Completed {
                output: "ok".into(),
                title: "ls".into(),
                metadata: json!({"lines": 3}),
                started_at: 10,
                ended_at: 20
            }
        );
        assert!(s.is_terminal());
        assert_eq!(s.output(), Some("ok"));
    }

    #[test]
    fn fail_from_pending_and_running() {
        let mut s = ToolState::Pending;
        s.fail("denied", 5).unwrap();
        assert_eq!(
            s,
            ToolState::Error {
                message: "denied".into(),
                started_at: None,
                ended_at: 5
            }
        );
        let mut s = ToolState::Running { started_at: 1 };
        s.fail("boom", 2).unwrap();
        assert_eq!(s.started_at(), Some(1));
        assert_eq!(s.error_message(), Some("boom"));
    }

    #[test]
    fn illegal_transitions_are_refused_and_leave_state_unchanged() {
        let completed = ToolState::Completed {
            output: "x".into(),
            title: String::new(),
            metadata: Value::Null,
            started_at: 1,
            ended_at: 2,
        };
        let errored = ToolState::Error {
            message: "m".into(),
            started_at: None,
            ended_at: 3,
        };
        for original in [completed, errored] {
            let mut s = original.clone();
            let from = original.status();
            assert_eq!(
                s.start(9),
                Err(ToolStateError::IllegalTransition {
                    from,
                    to: "running"
                })
            );
            assert_eq!(
                s.complete("y", "", Value::Null, 9),
                Err(ToolStateError::IllegalTransition {
                    from,
                    to: "completed"
                })
            );
            assert_eq!(
                s.fail("z", 9),
                Err(ToolStateError::IllegalTransition { from, to: "error" })
            );
            assert_eq!(s, original);
        }
        let mut running = ToolState::Running { started_at: 1 };
        assert!(running.start(2).is_err());
        let mut pending = ToolState::Pending;
        let err = pending.complete("y", "", Value::Null, 2).unwrap_err();
        assert_eq!(
            err.to_string(),
            "illegal tool state transition from pending to completed"
        );
        assert_eq!(pending, ToolState::Pending);
    }

    #[test]
    fn serde_shape_is_tagged_by_status() {
        assert_eq!(
            serde_json::to_value(ToolState::Pending).unwrap(),
            json!({"status": "pending"})
        );
        assert_eq!(
            serde_json::to_value(ToolState::Running { started_at: 4 }).unwrap(),
            json!({"status": "running", "started_at": 4})
        );
        let e: ToolState =
            serde_json::from_value(json!({"status": "error", "message": "m", "ended_at": 1}))
                .unwrap();
        assert_eq!(e.started_at(), None);
        assert!(serde_json::from_value::<ToolState>(json!({"status": "flying"})).is_err());
    }
}
