//! Crash recovery: a process that dies mid-loop leaves its assistant message
//! unfinished (`finished_at` NULL) and tool parts `pending` or `running`.
//! [`recover_session`] makes such a history consistent again — unfinished
//! tool parts become `error: interrupted`, the message is finished with
//! `error` and an error JSON saying it was interrupted — so the next request
//! (and any reader) sees what happened instead of a call that never ends.
//!
//! It is idempotent (a recovered message is finished, so a second run finds
//! nothing) and the runner calls it whenever it opens a session. It looks
//! first in a read (one indexed query), so a session with nothing left open —
//! nearly every prompt — costs no write lock; only a session with an open
//! message is checked again, and repaired, in a write. Each
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

use scribe_message::{FinishReason, Part, Role, store};
use scribe_session::{SessionService, Store};
use serde_json::json;

use crate::error::Result;
use crate::lease::{self, LeaseConfig, LeaseHolder};

/// The message of a tool call cut short by a dead process: the one marker text of an
/// interrupted call, which a call still pending or running is also sent as
/// ([`scribe_message::INTERRUPTED_TOOL_OUTPUT`]); also the `type` of the error JSON
/// recovery puts on the message.
pub use scribe_message::INTERRUPTED_TOOL_OUTPUT as INTERRUPTED;

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

/// Finishes every unfinished assistant message of `session_id` (see the module
/// doc): one transaction, events after it commits. A session a loop of this
/// process, or another live process, is answering is left alone. Leases are
/// judged with the default [`LeaseConfig`].
pub fn recover_session(store: &Store, session_id: &str) -> Result<RecoveryReport> {
    recover_session_with(store, session_id, &LeaseConfig::default())
}

/// [`recover_session`], judging run leases with `config`.
pub fn recover_session_with(
    store: &Store,
    session_id: &str,
    config: &LeaseConfig,
) -> Result<RecoveryReport> {
    // A read first: with nothing left open (nearly always) there is nothing to repair,
    // and opening a session takes no write lock.
    let open = store.database().read(|tx| -> Result<bool> {
        SessionService::get_tx(tx, session_id)?;
        Ok(!store::list_unfinished_assistant_message_ids(tx, session_id)?.is_empty())
    })?;
    if !open {
        return Ok(RecoveryReport::default());
    }
    let messages = store.messages();
    store.database().write(|tx| {
        let mut report = RecoveryReport::default();
        SessionService::get_tx(tx, session_id)?;
        // Checked inside the write lock: a loop of this process registers
        // before it creates its message, so a message seen open here while
        // the session is unregistered was not left by this process.
        if is_running_here(session_id) {
            return Ok(report);
        }
        // Also inside the write lock: a process takes the lease in a write
        // before it opens the session, so a live holder seen here is running.
        if let Some(holder) = lease::live_holder_tx(tx, session_id, config)? {
            report.running_elsewhere = Some(holder);
            return Ok(report);
        }
        // One indexed query finds the open messages, so opening a long session
        // does not load its whole history.
        for id in store::list_unfinished_assistant_message_ids(tx, session_id)? {
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
                if tool.state.fail(INTERRUPTED, tx.now()).is_ok() {
                    messages.update_part_tx(tx, &stored.id, &Part::Tool(tool))?;
                    report.tool_parts.push(stored.id.clone());
                }
            }
            let error = json!({
                "type": INTERRUPTED,
                "message": "the process answering this message stopped before it finished",
            });
            messages.set_error_tx(tx, &message.id, Some(&error))?;
            messages.finish_tx(tx, &message.id, &FinishReason::Error)?;
            report.messages.push(message.id);
        }
        Ok(report)
    })
}
