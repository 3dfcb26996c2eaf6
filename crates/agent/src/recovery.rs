//! Crash recovery: a process that dies mid-loop leaves its assistant message
//! unfinished (`finished_at` NULL) and tool parts `pending` or `running`.
//! [`recover_session`] makes such a history consistent again — unfinished
//! tool parts become `error: interrupted`, the message is finished with
//! `error` and an error JSON saying it was interrupted — so the next request
//! (and any reader) sees what happened instead of a call that never ends.
//!
//! It is idempotent (a recovered message is finished, so a second run finds
//! nothing) and the runner calls it whenever it opens a session. Each
//! session's repair is one transaction (every part, the error and the finish
//! commit together, or none of them); the part and message events are
//! published after it commits.
//!
//! # Live runs
//!
//! Recovery must not "repair" a message that is still being answered. Inside
//! one process that is known: the agent loop registers the session it is
//! stepping in (see [`is_running_here`]) for as long as a step's message may be
//! open, and recovery leaves every session registered in this process alone
//! (it reports nothing for it). Across processes the run lease tells
//! ([`crate::lease`]): while another live process holds the session's lease,
//! recovery repairs nothing and reports the holder in
//! [`RecoveryReport::running_elsewhere`]; a dead holder's lease (its pid gone
//! on this host, or its heartbeat older than [`LeaseConfig::stale_after`]) is
//! cleared and the session repaired.

use std::collections::BTreeMap;
use std::sync::{Mutex, PoisonError};

use scribe_db::now_ms;
use scribe_db::queries;
use scribe_message::service::FinishedMessage;
use scribe_message::{
    FinishReason, Message, MessageError, MessageService, Part, PartEvent, Role, store,
};
use serde_json::json;

use crate::error::write_tx;
use crate::lease::{self, LeaseConfig, LeaseHolder};
use crate::run::LoopError;

/// The message of a tool call cut short by a dead process.
pub const INTERRUPTED: &str = "interrupted";

/// Sessions this process is stepping in, with how many loops run in each.
static RUNNING: Mutex<BTreeMap<String, usize>> = Mutex::new(BTreeMap::new());

/// Keeps a session registered as running in this process until dropped.
#[derive(Debug)]
pub(crate) struct RunningGuard {
    session_id: String,
}

impl Drop for RunningGuard {
    fn drop(&mut self) {
        let mut running = RUNNING.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(count) = running.get_mut(&self.session_id) {
            *count -= 1;
            if *count == 0 {
                running.remove(&self.session_id);
            }
        }
    }
}

/// Registers `session_id` as being answered by this process (see the module
/// doc) until the guard drops — also when the loop unwinds.
pub(crate) fn mark_running(session_id: &str) -> RunningGuard {
    let mut running = RUNNING.lock().unwrap_or_else(PoisonError::into_inner);
    *running.entry(session_id.to_owned()).or_insert(0) += 1;
    RunningGuard {
        session_id: session_id.to_owned(),
    }
}

/// Whether a loop of this process is answering in `session_id` right now.
pub fn is_running_here(session_id: &str) -> bool {
    RUNNING
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .contains_key(session_id)
}

/// What [`recover_session`] repaired.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RecoveryReport {
    /// The assistant messages it finished.
    pub messages: Vec<String>,
    /// The tool parts it marked `error: interrupted`.
    pub tool_parts: Vec<String>,
    /// Set when nothing was repaired because another live process holds the
    /// session's run lease (it is answering there right now).
    pub running_elsewhere: Option<LeaseHolder>,
}

impl RecoveryReport {
    /// Whether nothing was repaired (nothing needed it, or the session is
    /// [`running_elsewhere`](RecoveryReport::running_elsewhere)).
    pub fn is_empty(&self) -> bool {
        self.messages.is_empty()
    }
}

/// What one repair wrote, published after commit.
#[derive(Default)]
struct Repair {
    report: RecoveryReport,
    parts: Vec<PartEvent>,
    errors: Vec<Message>,
    finished: Vec<FinishedMessage>,
}

/// Finishes every unfinished assistant message of `session_id` (see the module
/// doc): one transaction, events after it commits. A session a loop of this
/// process, or another live process, is answering is left alone. Leases are
/// judged with the default [`LeaseConfig`].
pub fn recover_session(
    messages: &MessageService,
    session_id: &str,
) -> Result<RecoveryReport, LoopError> {
    recover_session_with(messages, session_id, &LeaseConfig::default())
}

/// [`recover_session`], judging run leases with `config`.
pub fn recover_session_with(
    messages: &MessageService,
    session_id: &str,
    config: &LeaseConfig,
) -> Result<RecoveryReport, LoopError> {
    let repair = write_tx(messages.database(), |tx| {
        let mut repair = Repair::default();
        if !queries::session_exists(tx, session_id)? {
            return Err(MessageError::not_found("session", session_id).into());
        }
        // Checked inside the write lock: a loop of this process registers
        // before it creates its message, so a message seen open here while
        // the session is unregistered was not left by this process.
        if is_running_here(session_id) {
            return Ok(repair);
        }
        // Also inside the write lock: a process takes the lease in a write
        // before it opens the session, so a live holder seen here is running.
        if let Some(holder) = lease::live_holder_tx(tx, session_id, config)? {
            repair.report.running_elsewhere = Some(holder);
            return Ok(repair);
        }
        // One indexed query finds the open messages, so opening a long session
        // does not load its whole history.
        for id in queries::list_unfinished_assistant_message_ids(tx, session_id)? {
            let message = store::load_message(tx, &id)?;
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
                    let event = MessageService::update_part_tx(tx, &stored.id, &Part::Tool(tool))?;
                    repair.parts.push(event);
                    repair.report.tool_parts.push(stored.id.clone());
                }
            }
            let error = json!({
                "type": INTERRUPTED,
                "message": "the process answering this message stopped before it finished",
            });
            repair
                .errors
                .push(MessageService::set_error_tx(tx, &message.id, Some(&error))?);
            repair.finished.push(MessageService::finish_tx(
                tx,
                &message.id,
                &FinishReason::Error,
            )?);
            repair.report.messages.push(message.id);
        }
        Ok(repair)
    })?;
    for event in repair.parts {
        messages.parts().publish_updated(event);
    }
    for message in repair.errors {
        messages.messages().publish_updated(message);
    }
    for finished in repair.finished {
        messages.publish_finished(finished);
    }
    Ok(repair.report)
}
