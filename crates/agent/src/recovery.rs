//! Crash recovery: a process that dies mid-loop leaves its assistant message
//! unfinished (`finished_at` NULL) and tool parts `pending` or `running`.
//! [`recover_session`] makes such a history consistent again — unfinished
//! tool parts become `error: interrupted`, the message is finished with
//! `error` and an error JSON saying it was interrupted — so the next request
//! (and any reader) sees what happened instead of a call that never ends.
//!
//! It is idempotent (a recovered message is finished, so a second run finds
//! nothing) and the runner calls it whenever it opens a session. It cannot
//! tell a dead process from a live one, so it must not be run on a session
//! another process is still answering.

use scribe_db::now_ms;
use scribe_db::queries;
use scribe_message::{FinishReason, MessageError, MessageService, MessageUpdate, Part, Role};
use serde_json::json;

use crate::run::LoopError;

/// The message of a tool call cut short by a dead process.
pub const INTERRUPTED: &str = "interrupted";

/// What [`recover_session`] repaired.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RecoveryReport {
    /// The assistant messages it finished.
    pub messages: Vec<String>,
    /// The tool parts it marked `error: interrupted`.
    pub tool_parts: Vec<String>,
}

impl RecoveryReport {
    /// Whether nothing needed repair.
    pub fn is_empty(&self) -> bool {
        self.messages.is_empty()
    }
}

/// Finishes every unfinished assistant message of `session_id` (see the module doc).
pub fn recover_session(
    messages: &MessageService,
    session_id: &str,
) -> Result<RecoveryReport, LoopError> {
    let mut report = RecoveryReport::default();
    // One indexed query finds the open messages, so opening a long session
    // does not load its whole history.
    let open = messages
        .database()
        .read(|conn| {
            if !queries::session_exists(conn, session_id)? {
                return Ok(None);
            }
            Ok(Some(queries::list_unfinished_assistant_message_ids(
                conn, session_id,
            )?))
        })
        .map_err(MessageError::Db)?
        .ok_or_else(|| MessageError::not_found("session", session_id))?;
    for id in open {
        let message = messages.get(&id)?;
        if message.role != Role::Assistant || message.finished_at.is_some() {
            continue;
        }
        for stored in &message.parts {
            let Part::Tool(tool) = &stored.part else {
                continue;
            };
            if tool.state.is_terminal() {
                continue;
            }
            let mut tool = tool.clone();
            if tool.state.fail(INTERRUPTED, now_ms()).is_ok() {
                messages.update_part(&stored.id, Part::Tool(tool))?;
                report.tool_parts.push(stored.id.clone());
            }
        }
        messages.update(
            &message.id,
            MessageUpdate {
                error: Some(Some(json!({
                    "type": INTERRUPTED,
                    "message": "the process answering this message stopped before it finished",
                }))),
                ..MessageUpdate::default()
            },
        )?;
        messages.finish(&message.id, FinishReason::Error)?;
        report.messages.push(message.id);
    }
    Ok(report)
}
