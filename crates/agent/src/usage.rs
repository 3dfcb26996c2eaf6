//! Usage and cost tracking: [`UsageTracker::track_usage`] charges one model
//! call to a session and its assistant message in one transaction, and
//! [`UsageTracker::finish_task_session`] ends a sub-agent's session and rolls
//! its totals into the parent in one transaction.
//!
//! Cost is [`crate::models::Pricing::cost`]: Σ tokens × price / 1e6 over input,
//! output, cache read and cache write, with reasoning billed at the output
//! price (Scribe's usage counters are disjoint, see [`crate::models`]).
//! Totals only ever change through SQL increments (`x = x + ?`), so any number
//! of threads and processes may charge one session at once and every call
//! counts. `tool_call_count` is not touched here: the database counts tool
//! parts itself.

use std::sync::Arc;

use scribe_db::now_ms;
use scribe_db::queries as q;
use scribe_db::rusqlite::{Connection, OptionalExtension, Transaction};
use scribe_message::{Message, MessageService, Role, TokenUsage};
use scribe_pubsub::Broker;
use scribe_session::{RollUp, Session, SessionError, SessionService, UsageDelta};

use crate::error::{AgentError, Result, write_tx};
use crate::events::{AgentEvent, emit};
use crate::models::ModelCatalog;

/// What one [`UsageTracker::track_usage`] call charged.
#[derive(Debug, Clone, PartialEq)]
pub struct UsageRecord {
    /// The session charged.
    pub session_id: String,
    /// The assistant message charged, if one was named.
    pub message_id: Option<String>,
    /// The model priced.
    pub model_id: String,
    /// The tokens added.
    pub usage: TokenUsage,
    /// The cost added, in US dollars.
    pub cost_usd: f64,
    /// The session after the change (its totals include this call).
    pub session: Session,
    /// The assistant message as read back after the commit (`None` when none
    /// was named, or it could not be read back, e.g. a corrupt part row: the
    /// charge itself does not depend on decoding its parts).
    pub message: Option<Message>,
}

/// What [`UsageTracker::finish_task_session`] did.
#[derive(Debug, Clone, PartialEq)]
pub struct TaskFinish {
    /// The task session after it ended (the first end's reason wins).
    pub child: Session,
    /// Whether its totals went to the parent now, earlier, or nowhere.
    pub roll_up: RollUp,
}

/// Charges model calls to sessions and messages; cheap to share behind an `Arc`.
#[derive(Debug)]
pub struct UsageTracker {
    sessions: Arc<SessionService>,
    messages: Arc<MessageService>,
    catalog: Arc<ModelCatalog>,
    events: Broker<AgentEvent>,
}

impl UsageTracker {
    /// A tracker over the services, pricing calls with `catalog`, with its own
    /// event broker.
    pub fn new(
        sessions: Arc<SessionService>,
        messages: Arc<MessageService>,
        catalog: Arc<ModelCatalog>,
    ) -> Self {
        UsageTracker {
            sessions,
            messages,
            catalog,
            events: Broker::new(),
        }
    }

    /// Publishes [`AgentEvent::UsageTracked`] on `events` instead of a broker of
    /// its own (e.g. a compactor's, so one subscription sees both).
    pub fn with_events(mut self, events: Broker<AgentEvent>) -> Self {
        self.events = events;
        self
    }

    /// The broker [`AgentEvent::UsageTracked`] is published on.
    pub fn events(&self) -> &Broker<AgentEvent> {
        &self.events
    }

    /// The catalog calls are priced with.
    pub fn catalog(&self) -> &Arc<ModelCatalog> {
        &self.catalog
    }

    /// What `usage` on `model_id` costs, in US dollars.
    pub fn cost(&self, model_id: &str, usage: &TokenUsage) -> Result<f64> {
        let model = self
            .catalog
            .get(model_id)
            .ok_or_else(|| AgentError::UnknownModel(model_id.to_owned()))?;
        Ok(model.cost(usage))
    }

    /// Charges one model call on `model_id` to `session_id`: its tokens (all five
    /// kinds), one api call and its cost are added to the session, and — when
    /// `assistant_message_id` is given — its tokens and cost to that assistant
    /// message of the session. Both in one transaction; then the session and
    /// message `updated` events and [`AgentEvent::UsageTracked`] are published.
    ///
    /// Errors, with nothing written: [`AgentError::UnknownModel`], negative
    /// counts ([`AgentError::Session`] invalid input), an unknown session or
    /// message, a message of another session or not from the assistant
    /// ([`AgentError::InvalidInput`]).
    pub fn track_usage(
        &self,
        session_id: &str,
        model_id: &str,
        usage: &TokenUsage,
        assistant_message_id: Option<&str>,
    ) -> Result<UsageRecord> {
        self.track_usage_with(session_id, model_id, usage, assistant_message_id, |_, _| {
            Ok(())
        })
        .map(|(record, ())| record)
    }

    /// [`UsageTracker::track_usage`] plus `also`'s writes (given the
    /// transaction and the call's cost) in the same transaction: the agent loop
    /// saves the step's `step_finish` part with the charge, so one never
    /// commits without the other. `also` may run more than once (a busy
    /// database is retried) and must not publish anything; the caller publishes
    /// what it returns after this returns.
    pub(crate) fn track_usage_with<T>(
        &self,
        session_id: &str,
        model_id: &str,
        usage: &TokenUsage,
        assistant_message_id: Option<&str>,
        mut also: impl FnMut(&Transaction<'_>, f64) -> Result<T>,
    ) -> Result<(UsageRecord, T)> {
        let cost_usd = self.cost(model_id, usage)?;
        let delta = UsageDelta {
            tokens: *usage,
            api_calls: 1,
            tool_calls: 0,
            cost_usd,
            actual_cost_usd: None,
        };
        delta.validate()?;
        let (session, extra) = write_tx(self.sessions.database(), |tx| {
            let session = charge_tx(tx, session_id, &delta, assistant_message_id)?;
            Ok((session, also(tx, cost_usd)?))
        })?;
        let message = assistant_message_id.and_then(|id| self.messages.get(id).ok());
        self.sessions.broker().publish_updated(session.clone());
        if let Some(message) = &message {
            self.messages.messages().publish_updated(message.clone());
        }
        emit(
            &self.events,
            AgentEvent::UsageTracked {
                session_id: session_id.to_owned(),
                message_id: assistant_message_id.map(str::to_owned),
                model_id: model_id.to_owned(),
                usage: *usage,
                cost_usd,
            },
        );
        let record = UsageRecord {
            session_id: session_id.to_owned(),
            message_id: assistant_message_id.map(str::to_owned),
            model_id: model_id.to_owned(),
            usage: *usage,
            cost_usd,
            session,
            message,
        };
        Ok((record, extra))
    }

    /// Ends the task (sub-agent) session `child_id` with `reason` and rolls its
    /// totals into its parent, in one transaction: the parent never misses the
    /// child's cost and never counts it twice (a second call changes nothing
    /// and reports [`RollUp::AlreadyRolledUp`]). A session without a parent is
    /// just ended ([`RollUp::NoParent`]). Publishes `updated` for what changed.
    pub fn finish_task_session(&self, child_id: &str, reason: &str) -> Result<TaskFinish> {
        if reason.trim().is_empty() {
            return Err(AgentError::InvalidInput("end reason is empty".to_owned()));
        }
        let (child, roll_up, ended) = write_tx(self.sessions.database(), |tx| {
            let now = now_ms();
            let ended = q::end_session(
                tx,
                &q::EndSessionParams {
                    now,
                    end_reason: Some(reason),
                    id: child_id,
                },
            )? > 0;
            let roll_up = SessionService::roll_up_into_parent_tx(tx, child_id)?;
            Ok((load_session(tx, child_id)?, roll_up, ended))
        })?;
        if ended {
            self.sessions.broker().publish_updated(child.clone());
        }
        if let RollUp::RolledUp { parent } = &roll_up {
            self.sessions
                .broker()
                .publish_updated(Session::clone(parent));
        }
        Ok(TaskFinish { child, roll_up })
    }
}

/// Adds `delta` to the session and, when named, to the assistant message,
/// inside the caller's transaction.
pub(crate) fn charge_tx(
    conn: &Connection,
    session_id: &str,
    delta: &UsageDelta,
    assistant_message_id: Option<&str>,
) -> Result<Session> {
    if let Some(message_id) = assistant_message_id {
        let row = q::get_message(conn, message_id)
            .optional()?
            .ok_or_else(|| {
                AgentError::Message(scribe_message::MessageError::not_found(
                    "message", message_id,
                ))
            })?;
        if row.session_id != session_id {
            return Err(AgentError::InvalidInput(format!(
                "message {message_id} belongs to session {}, not {session_id}",
                row.session_id
            )));
        }
        if row.role != Role::Assistant.as_str() {
            return Err(AgentError::InvalidInput(format!(
                "message {message_id} is a {} message; usage is charged to assistant messages",
                row.role
            )));
        }
    }
    let session = SessionService::add_usage_tx(conn, session_id, delta)?;
    if let Some(message_id) = assistant_message_id {
        q::add_message_usage(
            conn,
            &q::AddMessageUsageParams {
                input_tokens: delta.tokens.input,
                output_tokens: delta.tokens.output,
                cache_read_tokens: delta.tokens.cache_read,
                cache_write_tokens: delta.tokens.cache_write,
                reasoning_tokens: delta.tokens.reasoning,
                cost_usd: delta.cost_usd,
                now: now_ms(),
                id: message_id,
            },
        )?;
    }
    Ok(session)
}

/// The session `id` read inside a transaction.
pub(crate) fn load_session(conn: &Connection, id: &str) -> Result<Session> {
    match q::get_session(conn, id).optional()? {
        Some(row) => Ok(Session::try_from(row)?),
        None => Err(AgentError::Session(SessionError::not_found("session", id))),
    }
}
