//! [`MessageService`]: creates, changes, loads and deletes messages and parts through the
//! generated query layer, and publishes what changed — after commit, never for a change
//! that rolled back.
//!
//! Two brokers:
//! - [`MessageService::messages`] (`Broker<Message>`): `created` by [`MessageService::create`],
//!   `updated` by [`update`](MessageService::update), [`finish`](MessageService::finish) and
//!   [`add_usage`](MessageService::add_usage) (payload: the whole message after the change),
//!   `deleted` by [`delete`](MessageService::delete) (payload: the message as it was).
//! - [`MessageService::parts`] (`Broker<PartEvent>`): single-part changes —
//!   [`append_part`](MessageService::append_part) (`created`),
//!   [`update_part`](MessageService::update_part) (`updated`),
//!   [`delete_part`](MessageService::delete_part) (`deleted`), and the finish part that
//!   [`finish`](MessageService::finish) adds or replaces. Parts written by `create` arrive
//!   inside the message's `created` event only.

use std::sync::Arc;

use scribe_db::ids::{Prefix, new_id};
use scribe_db::queries::{self, PartRow};
use scribe_db::{Database, Reads, Tx};
use scribe_pubsub::{Broker, EventKind, Subscription};
use serde_json::Value;

use crate::error::{MessageError, Result};
use crate::events::queue_event;
use crate::message::{Message, MessageUsage, StoredPart, message_from_row};
use crate::part::Part;
use crate::role::{FinishReason, Role};
use crate::store;
use crate::tool_state::{ToolState, ToolStateError};
use crate::usage::TokenUsage;

/// A single part changed on its own.
#[derive(Debug, Clone, PartialEq)]
pub struct PartEvent {
    /// The part's message.
    pub message_id: String,
    /// The message's session.
    pub session_id: String,
    /// The part after the change (for `deleted`: as it was).
    pub part: StoredPart,
}

/// What [`MessageService::create`] needs; build it with [`NewMessage::new`] and set the
/// optional fields.
#[derive(Debug, Clone, PartialEq)]
pub struct NewMessage {
    /// The session it belongs to (must exist).
    pub session_id: String,
    /// Who wrote it.
    pub role: Role,
    /// Its parts, in order.
    pub parts: Vec<Part>,
    /// The agent that produced or received it.
    pub agent: Option<String>,
    /// The model provider.
    pub provider: Option<String>,
    /// The model.
    pub model: Option<String>,
    /// The message it answers.
    pub parent_id: Option<String>,
    /// A compaction summary.
    pub is_summary: bool,
}

impl NewMessage {
    /// A message of `role` in `session_id` with `parts` and nothing else set.
    pub fn new(session_id: impl Into<String>, role: Role, parts: Vec<Part>) -> Self {
        NewMessage {
            session_id: session_id.into(),
            role,
            parts,
            agent: None,
            provider: None,
            model: None,
            parent_id: None,
            is_summary: false,
        }
    }

    /// The message [`MessageService::create`] writes for this: fresh message and part
    /// ids, every time `now`, no usage. A non-assistant message comes out ended: a finish
    /// part (reason `end_turn`, unless `parts` already ends with one), `finish_reason` and
    /// `finished_at`.
    pub fn into_message(self, now: i64) -> Message {
        let mut parts = self.parts;
        let mut finish_reason = None;
        let mut finished_at = None;
        if self.role != Role::Assistant {
            let reason = match parts.last() {
                Some(Part::Finish(finish)) => finish.reason.clone(),
                _ => {
                    parts.push(Part::finish(FinishReason::EndTurn, now));
                    FinishReason::EndTurn
                }
            };
            finish_reason = Some(reason);
            finished_at = Some(now);
        }
        Message {
            id: new_id(Prefix::Message),
            session_id: self.session_id,
            parent_id: self.parent_id,
            role: self.role,
            agent: self.agent,
            provider: self.provider,
            model: self.model,
            finish_reason,
            is_summary: self.is_summary,
            usage: TokenUsage::default(),
            cost_usd: 0.0,
            error: None,
            created_at: now,
            updated_at: now,
            finished_at,
            parts: parts
                .into_iter()
                .zip(0_i64..)
                .map(|(part, position)| StoredPart {
                    id: new_id(Prefix::Part),
                    position,
                    part,
                    created_at: now,
                    updated_at: now,
                })
                .collect(),
        }
    }
}

/// The mutable fields of a message; `None` leaves a field as it is, `Some(None)` clears a
/// nullable one. Usage and cost set here are absolute; use
/// [`MessageService::add_usage`] to add to them.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct MessageUpdate {
    /// The message it answers.
    pub parent_id: Option<Option<String>>,
    /// The agent.
    pub agent: Option<Option<String>>,
    /// The model provider.
    pub provider: Option<Option<String>>,
    /// The model.
    pub model: Option<Option<String>>,
    /// Why it ended.
    pub finish_reason: Option<Option<FinishReason>>,
    /// When it ended (ms).
    pub finished_at: Option<Option<i64>>,
    /// A compaction summary.
    pub is_summary: Option<bool>,
    /// Token usage.
    pub usage: Option<TokenUsage>,
    /// Cost in US dollars (finite, not negative).
    pub cost_usd: Option<f64>,
    /// The error that ended it.
    pub error: Option<Option<Value>>,
}

/// Messages and parts of every session, with change events.
///
/// Every change is one `Database::write`; its events are queued with
/// [`Tx::after_commit`](scribe_db::Tx::after_commit) and go out once it has committed,
/// never for a change that rolled back. The `_tx` methods make the same changes inside
/// a caller's transaction (usage, recovery, compaction, a streamed reply) and queue the
/// same events on it.
///
/// ```
/// use scribe_message::{MessageService, NewMessage, Part, Role};
/// use scribe_db::Database;
/// # use scribe_db::{queries, Tx};
/// # use std::sync::Arc;
///
/// let db = Arc::new(Database::open_in_memory()?);
/// # let session_id = "ses_1";
/// # db.write(|tx: &mut Tx<'_>| -> scribe_db::Result<()> {
/// #     tx.q().create_session(&queries::CreateSessionParams {
/// #         id: session_id, parent_session_id: None, kind: "normal", source: "cli",
/// #         user_id: None, directory: None, title: None, model: None, model_config: None,
/// #         system_prompt: None, permission: None, billing_provider: None,
/// #         billing_base_url: None, billing_mode: None, now: 1,
/// #     })?;
/// #     Ok(())
/// # })?;
/// // (sessions come from scribe-session's SessionService; see its `Store`)
/// let messages = MessageService::new(db);
/// let events = messages.subscribe();
/// let asked = messages.create(NewMessage::new(session_id, Role::User, vec![Part::text("hi")]))?;
/// assert_eq!(messages.list(session_id)?[0].text(), "hi");
/// assert_eq!(events.try_recv().unwrap().payload.id, asked.id);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Debug)]
pub struct MessageService {
    pub(crate) db: Arc<Database>,
    messages: Arc<Broker<Message>>,
    parts: Arc<Broker<PartEvent>>,
}

impl MessageService {
    /// A service over `db` with fresh brokers.
    pub fn new(db: Arc<Database>) -> Self {
        MessageService {
            db,
            messages: Arc::new(Broker::new()),
            parts: Arc::new(Broker::new()),
        }
    }

    /// The database it works on.
    pub fn database(&self) -> &Arc<Database> {
        &self.db
    }

    /// The broker of whole-message events (see the module doc).
    pub fn messages(&self) -> &Broker<Message> {
        &self.messages
    }

    /// The broker of single-part events (see the module doc).
    pub fn parts(&self) -> &Broker<PartEvent> {
        &self.parts
    }

    /// A subscription to message events.
    pub fn subscribe(&self) -> Subscription<Message> {
        self.messages.subscribe()
    }

    /// A subscription to part events.
    pub fn subscribe_parts(&self) -> Subscription<PartEvent> {
        self.parts.subscribe()
    }

    /// Persists a new message and all its parts in one transaction and publishes
    /// `created`.
    ///
    /// A non-assistant message is complete when written (OpenCode's design): it gets a
    /// finish part (reason `end_turn`, unless `parts` already ends with one),
    /// `finish_reason` and `finished_at`. An assistant message stays open until
    /// [`finish`](Self::finish). Unknown session → [`MessageError::NotFound`].
    pub fn create(&self, new: NewMessage) -> Result<Message> {
        if new.session_id.is_empty() {
            return Err(MessageError::InvalidInput("session id is empty".into()));
        }
        let msg = new.into_message(self.db.now());
        self.db.write(|tx| self.insert_tx(tx, &msg))?;
        Ok(msg)
    }

    /// The message `id` with its parts.
    pub fn get(&self, id: &str) -> Result<Message> {
        self.db.read(|tx| store::load_message(tx, id))
    }

    /// Every message of a session in creation order, with parts (two queries). Unknown
    /// session → [`MessageError::NotFound`].
    pub fn list(&self, session_id: &str) -> Result<Vec<Message>> {
        self.db
            .read(|tx| store::load_session_messages(tx, session_id))
    }

    /// Changes the mutable fields of message `id` and publishes `updated`.
    pub fn update(&self, id: &str, update: MessageUpdate) -> Result<Message> {
        if let Some(cost) = update.cost_usd {
            check_cost(cost)?;
        }
        self.db.write(|tx| {
            let mut current = store::load_message(tx, id)?;
            apply_update(&mut current, update.clone());
            let msg = store_message_fields(tx, &current)?;
            self.announce(tx, EventKind::Updated, &msg);
            Ok(msg)
        })
    }

    /// Replaces the content of one part, leaving the message's other parts untouched, and
    /// publishes a part `updated` event.
    ///
    /// A tool part keeps its call id and may only move along its state machine
    /// (pending → running → completed | error; staying in the same state, e.g. to record
    /// compaction, is allowed): anything else is
    /// [`MessageError::IllegalToolTransition`] or [`MessageError::InvalidInput`]. A part
    /// whose stored JSON is corrupt may be overwritten (that is how it is repaired).
    ///
    /// A part nesting deeper than [`crate::MAX_PART_DEPTH`] is
    /// [`MessageError::PartTooDeep`], and the stored part stays as it was.
    pub fn update_part(&self, part_id: &str, part: Part) -> Result<StoredPart> {
        let data = match part.to_json() {
            Ok(data) => data,
            Err(err) => {
                // Only the error names the message, so only it asks which that is.
                let message_id = self
                    .db
                    .read(|tx| Ok::<_, MessageError>(tx.reads().get_part_place(part_id)?))?
                    .ok_or_else(|| MessageError::not_found("part", part_id))?
                    .message_id;
                return Err(MessageError::encoding(err, part_id, &message_id));
            }
        };
        self.db
            .write(|tx| self.replace_part_tx(tx, part_id, &part, &data))
    }

    /// Adds `part` after the last part of message `message_id` and publishes a part
    /// `created` event.
    /// A part nesting deeper than [`crate::MAX_PART_DEPTH`] is
    /// [`MessageError::PartTooDeep`], with nothing written.
    pub fn append_part(&self, message_id: &str, part: Part) -> Result<StoredPart> {
        let id = new_id(Prefix::Part);
        let data = part
            .to_json()
            .map_err(|err| MessageError::encoding(err, &id, message_id))?;
        self.db
            .write(|tx| self.insert_part_tx(tx, &id, message_id, &part, &data))
    }

    /// Deletes one part (the search indexes and tool counter follow by trigger) and
    /// publishes a part `deleted` event with the part as it was.
    pub fn delete_part(&self, part_id: &str) -> Result<StoredPart> {
        self.db.write(|tx| self.delete_part_tx(tx, part_id))
    }

    /// Ends message `id`: sets its finish reason and time, adds a finish part (or replaces
    /// the one it has), and publishes the part event then the message `updated`. Returns
    /// the message as it now is (its parts loaded once; [`finish_tx`](Self::finish_tx)
    /// does not load them).
    pub fn finish(&self, id: &str, reason: FinishReason) -> Result<Message> {
        self.db.write(|tx| {
            let (_, message) = self.finish_impl(tx, id, &reason, true)?;
            message.ok_or_else(|| MessageError::not_found("message", id))
        })
    }

    /// Adds a step's usage and cost to message `id` with one atomic `x = x + ?` update (two
    /// processes adding at once both count) and publishes `updated`. Returns the message
    /// as it now is (its parts loaded once; [`add_usage_tx`](Self::add_usage_tx) does not
    /// load them); a message whose parts cannot be decoded is an error, and the charge is
    /// rolled back. Each total stops at `i64::MAX` (a cost at `f64::MAX`); a negative count
    /// or cost is [`MessageError::InvalidInput`], with nothing written.
    pub fn add_usage(&self, id: &str, usage: TokenUsage, cost_usd: f64) -> Result<Message> {
        check_charge(&usage, cost_usd)?;
        self.db.write(|tx| {
            let (_, message) = self.add_usage_impl(tx, id, &usage, cost_usd, true)?;
            message.ok_or_else(|| MessageError::not_found("message", id))
        })
    }

    /// Deletes message `id` with its parts (session counters and search indexes follow by
    /// trigger) and publishes `deleted` with the message as it was. A message whose parts
    /// are corrupt can still be deleted; its event then carries them as unknown parts.
    pub fn delete(&self, id: &str) -> Result<Message> {
        self.db.write(|tx| {
            let row = get_message_row(tx, id)?;
            let mut msg = message_from_row(row)?;
            msg.parts = tx
                .q()
                .list_parts(id)?
                .into_iter()
                .map(|row| lenient_part_event(row).part)
                .collect();
            tx.q().delete_message(id)?;
            self.announce(tx, EventKind::Deleted, &msg);
            Ok(msg)
        })
    }

    /// Queues `kind` for `message` on `tx` ([`queue_event`]).
    fn announce(&self, tx: &mut Tx<'_>, kind: EventKind, message: &Message) {
        queue_event(tx, &self.messages, kind, &message.id, message.clone());
    }

    /// Queues `kind` for a single-part change on `tx` ([`queue_event`]).
    /// Clones the event only when someone listens (a streamed flush's part is its whole
    /// text so far).
    fn announce_part(&self, tx: &mut Tx<'_>, kind: EventKind, event: &PartEvent) {
        if self.parts.subscriber_count() > 0 {
            queue_event(tx, &self.parts, kind, &event.part.id, event.clone());
        }
    }
}

/// Transaction-level variants of the changes, for callers that must commit them
/// together with other writes (usage, recovery, compaction, a streamed reply). Each
/// queues the same events as its public twin on the caller's transaction, so they go
/// out when (and only if) that transaction commits.
impl MessageService {
    /// Stores `msg` exactly as given (ids, positions, times, usage) with all its parts,
    /// in the caller's transaction, and queues `created` (see [`store::insert_message`]
    /// for the errors).
    pub fn insert_tx(&self, tx: &mut Tx<'_>, msg: &Message) -> Result<()> {
        store::insert_message(tx, msg)?;
        self.announce(tx, EventKind::Created, msg);
        Ok(())
    }

    /// [`MessageService::update_part`] inside the caller's transaction.
    pub fn update_part_tx(
        &self,
        tx: &mut Tx<'_>,
        part_id: &str,
        part: &Part,
    ) -> Result<StoredPart> {
        let data = match part.to_json() {
            Ok(data) => data,
            Err(err) => {
                let place = tx
                    .q()
                    .get_part_place(part_id)?
                    .ok_or_else(|| MessageError::not_found("part", part_id))?;
                return Err(MessageError::encoding(err, part_id, &place.message_id));
            }
        };
        self.replace_part_tx(tx, part_id, part, &data)
    }

    /// [`MessageService::append_part`] inside the caller's transaction.
    pub fn append_part_tx(
        &self,
        tx: &mut Tx<'_>,
        message_id: &str,
        part: &Part,
    ) -> Result<StoredPart> {
        let id = new_id(Prefix::Part);
        let data = part
            .to_json()
            .map_err(|err| MessageError::encoding(err, &id, message_id))?;
        self.insert_part_tx(tx, &id, message_id, part, &data)
    }

    /// [`MessageService::delete_part`] inside the caller's transaction.
    pub fn delete_part_tx(&self, tx: &mut Tx<'_>, part_id: &str) -> Result<StoredPart> {
        let row = get_part_row(tx, part_id)?;
        tx.q().delete_part(part_id)?;
        let event = lenient_part_event(row);
        self.announce_part(tx, EventKind::Deleted, &event);
        Ok(event.part)
    }

    /// Sets (`Some`) or clears (`None`) the error JSON of message `id` inside the caller's
    /// transaction, leaving its other fields as they are; queues `updated`.
    pub fn set_error_tx(
        &self,
        tx: &mut Tx<'_>,
        id: &str,
        error: Option<&Value>,
    ) -> Result<Message> {
        let mut current = store::load_message(tx, id)?;
        current.error = error.cloned();
        let msg = store_message_fields(tx, &current)?;
        self.announce(tx, EventKind::Updated, &msg);
        Ok(msg)
    }

    /// [`MessageService::finish`] inside the caller's transaction: queues the finish
    /// part's event (`created`, or `updated` when it replaced one), then the message's
    /// `updated`; returns the finish part. The message's other parts are not read (only
    /// for the `updated` event, and only while someone subscribes to message events).
    pub fn finish_tx(
        &self,
        tx: &mut Tx<'_>,
        id: &str,
        reason: &FinishReason,
    ) -> Result<StoredPart> {
        Ok(self.finish_impl(tx, id, reason, false)?.0)
    }

    /// [`MessageService::add_usage`] inside the caller's transaction: one `UPDATE …
    /// RETURNING` of the totals. Queues `updated` with the message (its parts loaded for
    /// the event only while someone subscribes to message events, and then only if they
    /// can be decoded: the charge never depends on them).
    pub fn add_usage_tx(
        &self,
        tx: &mut Tx<'_>,
        id: &str,
        usage: &TokenUsage,
        cost_usd: f64,
    ) -> Result<MessageUsage> {
        Ok(self.add_usage_impl(tx, id, usage, cost_usd, false)?.0)
    }

    /// Ends message `id`; returns the finish part and, when `load` (or for the event), the
    /// message with its parts.
    fn finish_impl(
        &self,
        tx: &mut Tx<'_>,
        id: &str,
        reason: &FinishReason,
        load: bool,
    ) -> Result<(StoredPart, Option<Message>)> {
        let now = tx.now();
        let row = tx
            .q()
            .finish_message(&queries::FinishMessageParams {
                finish_reason: Some(reason.as_str()),
                now,
                id,
            })?
            .ok_or_else(|| MessageError::not_found("message", id))?;
        let part = Part::finish(reason.clone(), now);
        let data = part.to_json()?;
        let existing = tx.q().get_last_finish_part_id(id)?;
        let (stored, kind) = match existing {
            Some(part_id) => {
                let place = tx
                    .q()
                    .get_part_place(&part_id)?
                    .ok_or_else(|| MessageError::not_found("part", &part_id))?;
                (
                    self.write_part(tx, &part_id, place, &part, &data)?,
                    EventKind::Updated,
                )
            }
            None => {
                let part_id = new_id(Prefix::Part);
                let event = append(tx, &part_id, id, &row.session_id, part, &data)?;
                (event, EventKind::Created)
            }
        };
        self.announce_part(tx, kind, &stored);
        let listening = self.messages.subscriber_count() > 0;
        let message = if load || listening {
            let mut message = message_from_row(row)?;
            message.parts = store::parts_of(tx, id)?;
            Some(message)
        } else {
            None
        };
        if let (true, Some(message)) = (listening, &message) {
            self.announce(tx, EventKind::Updated, message);
        }
        Ok((stored.part, message))
    }

    /// Adds usage to message `id`; returns the totals and, when `load` (or for the event),
    /// the message with its parts (`load` makes undecodable parts an error).
    fn add_usage_impl(
        &self,
        tx: &mut Tx<'_>,
        id: &str,
        usage: &TokenUsage,
        cost_usd: f64,
        load: bool,
    ) -> Result<(MessageUsage, Option<Message>)> {
        check_charge(usage, cost_usd)?;
        let now = tx.now();
        let totals = tx
            .q()
            .add_message_usage(&queries::AddMessageUsageParams {
                input_tokens: usage.input,
                output_tokens: usage.output,
                cache_read_tokens: usage.cache_read,
                cache_write_tokens: usage.cache_write,
                reasoning_tokens: usage.reasoning,
                cost_usd,
                now,
                id,
            })?
            .ok_or_else(|| MessageError::not_found("message", id))?;
        let totals = MessageUsage {
            message_id: totals.id,
            session_id: totals.session_id,
            usage: TokenUsage {
                input: totals.input_tokens,
                output: totals.output_tokens,
                cache_read: totals.cache_read_tokens,
                cache_write: totals.cache_write_tokens,
                reasoning: totals.reasoning_tokens,
            },
            cost_usd: totals.cost_usd,
            updated_at: totals.updated_at,
        };
        let listening = self.messages.subscriber_count() > 0;
        let message = if load {
            Some(store::load_message(tx, id)?)
        } else if listening {
            store::load_message(tx, id).ok()
        } else {
            None
        };
        if let (true, Some(message)) = (listening, &message) {
            self.announce(tx, EventKind::Updated, message);
        }
        Ok((totals, message))
    }

    /// Replaces part `part_id` with `part` (already serialised as `data`, so that a caller
    /// can fail on serialisation before opening a transaction); queues `updated`.
    ///
    /// A streamed flush costs one small SELECT (where the part sits) and one UPDATE (one
    /// `UPDATE … RETURNING` costs more in SQLite: RETURNING builds an ephemeral table per
    /// statement, about 6,000 instructions more per flush than the indexed SELECT): the
    /// stored content is read (and parsed) only when `part` is a tool part, to check the
    /// call's state machine against it, and the event carries `part` itself rather than
    /// the row read back.
    fn replace_part_tx(
        &self,
        tx: &mut Tx<'_>,
        part_id: &str,
        part: &Part,
        data: &str,
    ) -> Result<StoredPart> {
        let place = if let Part::Tool(_) = part {
            let old = tx
                .q()
                .get_part_content(part_id)?
                .ok_or_else(|| MessageError::not_found("part", part_id))?;
            if old.r#type == "tool"
                && let Ok(old_part) = Part::from_json(&old.data)
            {
                check_part_change(part_id, &old_part, part)?;
            }
            queries::GetPartPlaceRow {
                message_id: old.message_id,
                session_id: old.session_id,
                position: old.position,
                created_at: old.created_at,
                updated_at: old.updated_at,
            }
        } else {
            tx.q()
                .get_part_place(part_id)?
                .ok_or_else(|| MessageError::not_found("part", part_id))?
        };
        let event = self.write_part(tx, part_id, place, part, data)?;
        self.announce_part(tx, EventKind::Updated, &event);
        Ok(event.part)
    }

    /// Stores `part` (serialised as `data`) as part `part_id`, which sits at `place`; its
    /// event, not queued. `updated_at` moves strictly forward (the clock, or one past the
    /// stored time when the clock has not passed it), as the `moved_forward` fragment of
    /// every UPDATE, so the event carries exactly what is stored.
    fn write_part(
        &self,
        tx: &mut Tx<'_>,
        part_id: &str,
        place: queries::GetPartPlaceRow,
        part: &Part,
        data: &str,
    ) -> Result<PartEvent> {
        let now = tx.now().max(place.updated_at.saturating_add(1));
        let changed = tx.q().update_part(&queries::UpdatePartParams {
            r#type: part.type_name(),
            data,
            now,
            id: part_id,
        })?;
        if changed == 0 {
            return Err(MessageError::not_found("part", part_id));
        }
        Ok(PartEvent {
            message_id: place.message_id,
            session_id: place.session_id,
            part: StoredPart {
                id: part_id.to_owned(),
                position: place.position,
                part: part.clone(),
                created_at: place.created_at,
                updated_at: now,
            },
        })
    }

    /// Appends `part` (already serialised as `data`) as part `id` after the last part of
    /// message `message_id`; the caller picks the id so that a retried transaction reuses
    /// it. Queues `created`.
    fn insert_part_tx(
        &self,
        tx: &mut Tx<'_>,
        id: &str,
        message_id: &str,
        part: &Part,
        data: &str,
    ) -> Result<StoredPart> {
        let msg = get_message_row(tx, message_id)?;
        let event = append(tx, id, message_id, &msg.session_id, part.clone(), data)?;
        self.announce_part(tx, EventKind::Created, &event);
        Ok(event.part)
    }
}

/// Stores `part` (serialised as `data`) as part `id` after the last part of message
/// `message_id`, and returns its event. (Not `INSERT … RETURNING`: SQLite runs RETURNING
/// through an ephemeral table, a page cache made and dropped per statement, which costs
/// more than the indexed read it would spare.)
fn append(
    tx: &mut Tx<'_>,
    id: &str,
    message_id: &str,
    session_id: &str,
    part: Part,
    data: &str,
) -> Result<PartEvent> {
    let now = tx.now();
    // An aggregate: always one row (0 for a message without parts).
    let position = tx.q().next_part_position(message_id)?.unwrap_or(0);
    tx.q().create_part(&queries::CreatePartParams {
        id,
        message_id,
        session_id,
        position,
        r#type: part.type_name(),
        data,
        created_at: now,
        updated_at: now,
    })?;
    Ok(PartEvent {
        message_id: message_id.to_owned(),
        session_id: session_id.to_owned(),
        part: StoredPart {
            id: id.to_owned(),
            position,
            part,
            created_at: now,
            updated_at: now,
        },
    })
}

/// What [`MessageService::add_usage`] adds: no negative count (totals only grow, as a
/// session's do; each stored total stops at `i64::MAX`) and a valid cost.
fn check_charge(usage: &TokenUsage, cost: f64) -> Result<()> {
    if let Some((name, value)) = usage.first_negative() {
        return Err(MessageError::InvalidInput(format!(
            "{name} must not be negative, got {value}"
        )));
    }
    check_cost(cost)
}

/// A cost is finite and not negative.
pub(crate) fn check_cost(cost: f64) -> Result<()> {
    if cost.is_finite() && cost >= 0.0 {
        Ok(())
    } else {
        Err(MessageError::InvalidInput(format!(
            "cost must be a finite, non-negative amount, got {cost}"
        )))
    }
}

fn apply_update(msg: &mut Message, update: MessageUpdate) {
    let MessageUpdate {
        parent_id,
        agent,
        provider,
        model,
        finish_reason,
        finished_at,
        is_summary,
        usage,
        cost_usd,
        error,
    } = update;
    if let Some(v) = parent_id {
        msg.parent_id = v;
    }
    if let Some(v) = agent {
        msg.agent = v;
    }
    if let Some(v) = provider {
        msg.provider = v;
    }
    if let Some(v) = model {
        msg.model = v;
    }
    if let Some(v) = finish_reason {
        msg.finish_reason = v;
    }
    if let Some(v) = finished_at {
        msg.finished_at = v;
    }
    if let Some(v) = is_summary {
        msg.is_summary = v;
    }
    if let Some(v) = usage {
        msg.usage = v;
    }
    if let Some(v) = cost_usd {
        msg.cost_usd = v;
    }
    if let Some(v) = error {
        msg.error = v;
    }
}

/// Rejects changes that break a tool call's identity or its state machine.
fn check_part_change(part_id: &str, old: &Part, new: &Part) -> Result<()> {
    let (Part::Tool(old), Part::Tool(new)) = (old, new) else {
        return Ok(());
    };
    if old.call_id != new.call_id {
        return Err(MessageError::InvalidInput(format!(
            "part {part_id}: a tool part keeps its call id ({:?}, not {:?})",
            old.call_id, new.call_id
        )));
    }
    check_transition(&old.state, &new.state).map_err(|source| MessageError::IllegalToolTransition {
        part_id: part_id.to_owned(),
        source,
    })
}

/// Whether `old` may become `new`, asked of the state machine's own helpers.
fn check_transition(old: &ToolState, new: &ToolState) -> std::result::Result<(), ToolStateError> {
    if old.status() == new.status() {
        return Ok(());
    }
    let mut probe = old.clone();
    match new {
        ToolState::Pending => Err(ToolStateError::IllegalTransition {
            from: old.status(),
            to: "pending",
        }),
        ToolState::Running { started_at } => probe.start(*started_at),
        ToolState::Completed { ended_at, .. } => {
            // completed is reachable from running only; pending → completed skips a step.
            probe.complete("", "", Value::Null, *ended_at)
        }
        ToolState::Error { ended_at, .. } => probe.fail("", *ended_at),
    }
}

/// Writes every mutable field of `current` to its row and reads the message back.
fn store_message_fields(tx: &mut Tx<'_>, current: &Message) -> Result<Message> {
    let error = current.error.as_ref().map(Value::to_string);
    let now = tx.now();
    tx.q().update_message(&queries::UpdateMessageParams {
        parent_id: current.parent_id.as_deref(),
        agent: current.agent.as_deref(),
        provider: current.provider.as_deref(),
        model: current.model.as_deref(),
        finish_reason: current.finish_reason.as_ref().map(FinishReason::as_str),
        is_summary: current.is_summary,
        input_tokens: current.usage.input,
        output_tokens: current.usage.output,
        cache_read_tokens: current.usage.cache_read,
        cache_write_tokens: current.usage.cache_write,
        reasoning_tokens: current.usage.reasoning,
        cost_usd: current.cost_usd,
        error: error.as_deref(),
        finished_at: current.finished_at,
        now,
        id: &current.id,
    })?;
    store::load_message(tx, &current.id)
}

fn get_part_row(tx: &mut dyn Reads, id: &str) -> Result<PartRow> {
    tx.reads()
        .get_part(id)?
        .ok_or_else(|| MessageError::not_found("part", id))
}

fn get_message_row(tx: &mut dyn Reads, id: &str) -> Result<queries::MessageRow> {
    tx.reads()
        .get_message(id)?
        .ok_or_else(|| MessageError::not_found("message", id))
}

/// A part event from a row read back, where a corrupt part becomes an unknown part holding its raw JSON (or
/// just its type), so deleting it still works and reports something.
fn lenient_part_event(row: PartRow) -> PartEvent {
    let part = Part::from_json(&row.data).unwrap_or_else(|_| {
        let raw = serde_json::from_str::<Value>(&row.data)
            .ok()
            .filter(Value::is_object)
            .unwrap_or_else(|| serde_json::json!({ "type": row.r#type }));
        Part::Unknown(raw)
    });
    PartEvent {
        message_id: row.message_id,
        session_id: row.session_id,
        part: StoredPart {
            id: row.id,
            position: row.position,
            part,
            created_at: row.created_at,
            updated_at: row.updated_at,
        },
    }
}
