//! Usage and cost tracking: [`UsageTracker::track_usage`] charges one model
//! call to a session and its assistant message in one transaction (a step of a
//! reply streamed with [`crate::ReplyWriter`] is charged by its end,
//! [`ReplyWriter::finish_charged`](crate::ReplyWriter::finish_charged), in the
//! transaction that ends the reply, with its `step_finish` part), and
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

use scribe_db::Tx;
use scribe_message::{
    MessageService, MessageUsage, Part, Role, StepFinishPart, StoredPart, TokenUsage, store,
};
use scribe_pubsub::Broker;
use scribe_session::{RollUp, Session, Store, UsageDelta};

use crate::error::{AgentError, Result};
use crate::events::{AgentEvent, emit};
use crate::models::ModelCatalog;
use crate::provider::ProviderResponse;

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
    /// The assistant message's usage totals after the charge (`None` when none
    /// was named). Its parts are not read: a charge never depends on them.
    pub message: Option<MessageUsage>,
}

/// What a charged step's end wrote besides the reply
/// ([`crate::ReplyWriter::finish_charged`] and
/// [`finish_streamed_charged`](crate::ReplyWriter::finish_streamed_charged)), in the
/// same transaction as the reply's end.
#[derive(Debug, Clone, PartialEq)]
pub struct StepCharge {
    /// The charge: the step's tokens and cost added to the message and its session.
    pub record: UsageRecord,
    /// The step's `step_finish` part (finish reason, tokens, cost), as stored.
    pub step_finish: StoredPart,
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
    store: Store,
    catalog: Arc<ModelCatalog>,
    events: Arc<Broker<AgentEvent>>,
}

impl UsageTracker {
    /// A tracker over `store`, pricing calls with `catalog`, with its own event broker.
    pub fn new(store: Store, catalog: Arc<ModelCatalog>) -> Self {
        UsageTracker {
            store,
            catalog,
            events: Arc::new(Broker::new()),
        }
    }

    /// Publishes [`AgentEvent::UsageTracked`] on `events` instead of a broker of its
    /// own.
    pub fn with_events(mut self, events: Broker<AgentEvent>) -> Self {
        self.events = Arc::new(events);
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

    /// What one call's `usage` on `model_id` costs, in US dollars (the long-prompt prices
    /// when its prompt is a long one: [`crate::models::Pricing::cost`]).
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
        let delta = self.delta(model_id, usage)?;
        self.store
            .database()
            .write(|tx| self.charge_tx(tx, session_id, model_id, &delta, assistant_message_id))
    }

    /// The store charges are written to.
    pub(crate) fn store(&self) -> &Store {
        &self.store
    }

    /// Inside the caller's transaction (the reply's end, see
    /// [`crate::ReplyWriter::finish_charged`]): appends assistant message `message_id`'s
    /// `step_finish` part for `response` through `messages` (the writer's service, so
    /// the part's event goes where the reply's went) and charges `delta` on `model_id`
    /// to the message and the session it belongs to.
    pub(crate) fn charge_step_tx(
        &self,
        tx: &mut Tx<'_>,
        messages: &MessageService,
        message_id: &str,
        model_id: &str,
        delta: &UsageDelta,
        response: &ProviderResponse,
    ) -> Result<StepCharge> {
        // The row only: a charge never depends on decoding the message's parts.
        let message = store::load_message_row(tx, message_id)?;
        assistant_only(message_id, message.role)?;
        // The part first, so the message as the charge announces it holds it.
        let part = Part::StepFinish(StepFinishPart {
            reason: response.finish_reason.clone(),
            tokens: response.usage,
            cost: delta.cost_usd,
            extra: Default::default(),
        });
        let step_finish = messages.append_part_tx(tx, message_id, &part)?;
        let record = self.add_tx(tx, &message.session_id, model_id, delta, Some(message_id))?;
        Ok(StepCharge {
            record,
            step_finish,
        })
    }

    /// The delta one call of `model_id` with `usage` adds, priced and validated (before
    /// a transaction: a step's end prices its charge before it writes anything).
    pub(crate) fn delta(&self, model_id: &str, usage: &TokenUsage) -> Result<UsageDelta> {
        let delta = UsageDelta {
            tokens: *usage,
            api_calls: 1,
            tool_calls: 0,
            cost_usd: self.cost(model_id, usage)?,
            actual_cost_usd: None,
        };
        delta.validate()?;
        Ok(delta)
    }

    /// Adds `delta` to the session and, when named, to the assistant message, inside
    /// the caller's transaction; queues their `updated` events and
    /// [`AgentEvent::UsageTracked`].
    pub(crate) fn charge_tx(
        &self,
        tx: &mut Tx<'_>,
        session_id: &str,
        model_id: &str,
        delta: &UsageDelta,
        assistant_message_id: Option<&str>,
    ) -> Result<UsageRecord> {
        if let Some(message_id) = assistant_message_id {
            // The row only: a charge never depends on decoding the message's parts.
            let message = store::load_message_row(tx, message_id)?;
            if message.session_id != session_id {
                return Err(AgentError::InvalidInput(format!(
                    "message {message_id} belongs to session {}, not {session_id}",
                    message.session_id
                )));
            }
            assistant_only(message_id, message.role)?;
        }
        self.add_tx(tx, session_id, model_id, delta, assistant_message_id)
    }

    /// [`charge_tx`](UsageTracker::charge_tx) once the message is known to be an
    /// assistant message of `session_id`.
    fn add_tx(
        &self,
        tx: &mut Tx<'_>,
        session_id: &str,
        model_id: &str,
        delta: &UsageDelta,
        assistant_message_id: Option<&str>,
    ) -> Result<UsageRecord> {
        let session = self.store.sessions().add_usage_tx(tx, session_id, delta)?;
        let message = match assistant_message_id {
            Some(id) => Some(self.store.messages().add_usage_tx(
                tx,
                id,
                &delta.tokens,
                delta.cost_usd,
            )?),
            None => None,
        };
        let record = UsageRecord {
            session_id: session_id.to_owned(),
            message_id: assistant_message_id.map(str::to_owned),
            model_id: model_id.to_owned(),
            usage: delta.tokens,
            cost_usd: delta.cost_usd,
            session,
            message,
        };
        let (events, event) = (Arc::clone(&self.events), record.event());
        tx.after_commit(move || emit(&events, event));
        Ok(record)
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
        let sessions = self.store.sessions();
        self.store.database().write(|tx| {
            sessions.end_tx(tx, child_id, reason)?;
            let roll_up = sessions.roll_up_into_parent_tx(tx, child_id)?;
            let child = scribe_session::SessionService::get_tx(tx, child_id)?;
            Ok(TaskFinish { child, roll_up })
        })
    }
}

/// Refuses to charge a message that is not from the assistant.
fn assistant_only(message_id: &str, role: Role) -> Result<()> {
    if role != Role::Assistant {
        return Err(AgentError::InvalidInput(format!(
            "message {message_id} is a {role} message; usage is charged to assistant messages"
        )));
    }
    Ok(())
}

impl UsageRecord {
    fn event(&self) -> AgentEvent {
        AgentEvent::UsageTracked {
            session_id: self.session_id.clone(),
            message_id: self.message_id.clone(),
            model_id: self.model_id.clone(),
            usage: self.usage,
            cost_usd: self.cost_usd,
        }
    }
}
