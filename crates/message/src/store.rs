//! Transaction-level message storage that other services call inside their own
//! `Database::write`/`read` closures — session fork, import and export use these.
//! Writers take the write transaction ([`Tx`]); readers take either kind
//! ([`Reads`]). Everything here runs on SQLite and PostgreSQL alike.
//!
//! Nothing here publishes events: these store rows exactly as given (imports, copies),
//! and the caller announces what it made. [`crate::MessageService`]'s own `_tx`
//! methods queue their events. Loading a session is a constant number of queries
//! (messages, then all their parts), never one query per message.

use std::collections::HashMap;

use scribe_db::ids::check_id;
use scribe_db::queries::{self, MessageRow};
use scribe_db::{Backend, ErrorKind, Reads, Tx};

use crate::error::{MessageError, Result};
use crate::message::{Message, StoredPart, message_from_row};
use crate::usage::TokenUsage;

/// The generated insert's row for `msg` (with `error`, its JSON text): one mapping for
/// [`insert_message`] and the bulk path ([`crate::bulk`]).
pub(crate) fn create_message_params<'a>(
    msg: &'a Message,
    error: Option<&'a str>,
) -> queries::CreateMessageParams<'a> {
    queries::CreateMessageParams {
        id: &msg.id,
        session_id: &msg.session_id,
        parent_id: msg.parent_id.as_deref(),
        role: msg.role.as_str(),
        agent: msg.agent.as_deref(),
        provider: msg.provider.as_deref(),
        model: msg.model.as_deref(),
        finish_reason: msg.finish_reason.as_ref().map(|r| r.as_str()),
        is_summary: msg.is_summary,
        input_tokens: msg.usage.input,
        output_tokens: msg.usage.output,
        cache_read_tokens: msg.usage.cache_read,
        cache_write_tokens: msg.usage.cache_write,
        reasoning_tokens: msg.usage.reasoning,
        cost_usd: msg.cost_usd,
        error,
        created_at: msg.created_at,
        updated_at: msg.updated_at,
        finished_at: msg.finished_at,
    }
}

/// The generated insert's row for `part` of message `message_id` in `session_id`, its
/// content encoded as `data`: one mapping for [`insert_part`] and the bulk path.
pub(crate) fn create_part_params<'a>(
    message_id: &'a str,
    session_id: &'a str,
    part: &'a StoredPart,
    data: &'a str,
) -> queries::CreatePartParams<'a> {
    queries::CreatePartParams {
        id: &part.id,
        message_id,
        session_id,
        position: part.position,
        r#type: part.part.type_name(),
        data,
        created_at: part.created_at,
        updated_at: part.updated_at,
    }
}

/// Inserts `msg` and all its parts exactly as given (ids, positions, times, usage). On
/// PostgreSQL two or more parts go in with one statement (`CreateParts`: each statement is
/// a round trip to the server), in the order given, with the same rows, triggers and
/// errors as one by one.
///
/// Fails with [`MessageError::NotFound`] if the session does not exist (asked only when
/// the insert fails, so storing a message costs no extra query),
/// [`MessageError::InvalidInput`] for an empty id or duplicate part positions,
/// [`MessageError::IdTooLong`] for an id longer than [`scribe_db::ids::MAX_ID_BYTES`], and
/// `Db(Conflict)` if an id is already taken.
pub fn insert_message(tx: &mut Tx<'_>, msg: &Message) -> Result<()> {
    if msg.id.is_empty() {
        return Err(MessageError::InvalidInput("message id is empty".into()));
    }
    check_ids(msg)?;
    let error = msg.error.as_ref().map(serde_json::Value::to_string);
    let inserted = tx
        .q()
        .create_message(&create_message_params(msg, error.as_deref()));
    if let Err(err) = inserted {
        return Err(insert_failed(tx, &msg.session_id, err));
    }
    if tx.backend() == Backend::Postgres && msg.parts.len() > 1 {
        // Each statement is a round trip to the server: the parts go in one.
        if let Some(parts) = parts_json(msg) {
            return insert_parts(tx, msg, &parts);
        }
    }
    for part in &msg.parts {
        insert_part(tx, &msg.id, &msg.session_id, part)?;
    }
    Ok(())
}

/// [`MessageError::IdTooLong`] when the message's id or one of its parts' is longer than
/// [`scribe_db::ids::MAX_ID_BYTES`], naming its session: checked before anything of the
/// message is written, on both backends (PostgreSQL refused such an id itself, with a
/// raw message about its index, and only there).
pub(crate) fn check_ids(msg: &Message) -> Result<()> {
    let named = |err: scribe_db::ids::IdTooLong| err.in_session(&msg.session_id);
    check_id("message", &msg.id).map_err(named)?;
    for part in &msg.parts {
        check_id("part", &part.id).map_err(named)?;
    }
    Ok(())
}

/// Whether every id of `msg` may be stored as it is (not empty, not too long).
pub(crate) fn ids_storable(msg: &Message) -> bool {
    let fits = |id: &str| !id.is_empty() && check_id("", id).is_ok();
    fits(&msg.id) && msg.parts.iter().all(|p| fits(&p.id))
}

/// `msg`'s parts as `CreateParts`' parameter (`scribe_db::bulk::parts_json`), or `None`
/// when one of them cannot be stored (an empty id, content that does not encode): the
/// one-by-one path then reports it exactly where it always did.
fn parts_json(msg: &Message) -> Option<String> {
    let mut data = Vec::with_capacity(msg.parts.len());
    for part in &msg.parts {
        if part.id.is_empty() || check_id("part", &part.id).is_err() {
            return None;
        }
        data.push(part.part.to_json().ok()?);
    }
    let rows: Vec<queries::CreatePartParams<'_>> = msg
        .parts
        .iter()
        .zip(&data)
        .map(|(part, data)| create_part_params(&msg.id, &msg.session_id, part, data))
        .collect();
    scribe_db::bulk::parts_json(&rows).ok()
}

/// Inserts all of `msg`'s parts (encoded by [`parts_json`]) with one statement, with
/// [`insert_part`]'s errors: a clashing position is the first part whose position an
/// earlier part holds, as when they went in one by one (in the same order).
fn insert_parts(tx: &mut Tx<'_>, msg: &Message, parts: &str) -> Result<()> {
    let inserted = tx.q().create_parts(parts);
    match inserted {
        Ok(()) => Ok(()),
        Err(err) => {
            let clash = match &err {
                scribe_db::Error::Conflict { message, .. } if message.contains("position") => {
                    msg.parts.iter().enumerate().find_map(|(i, part)| {
                        let earlier = msg.parts.get(..i)?;
                        earlier
                            .iter()
                            .any(|p| p.position == part.position)
                            .then_some(part.position)
                    })
                }
                _ => None,
            };
            Err(match clash {
                Some(position) => {
                    MessageError::InvalidInput(format!("two parts at position {position}"))
                }
                None => MessageError::Db(err),
            })
        }
    }
}

/// What a failed insert into session `session_id` is: [`MessageError::NotFound`] when
/// the session does not exist, else the database's error.
fn insert_failed(tx: &mut Tx<'_>, session_id: &str, err: scribe_db::Error) -> MessageError {
    match tx.backend() {
        // Only a failed insert asks whether the session exists: an unknown session is
        // that, whatever else (a taken id) is wrong too.
        Backend::Sqlite => match ensure_session(tx, session_id) {
            Ok(()) => MessageError::Db(err),
            Err(missing) => missing,
        },
        // A failed statement aborts a PostgreSQL transaction (no query may follow it), so
        // the foreign key violation itself says that the session is missing.
        Backend::Postgres if err.kind() == ErrorKind::ForeignKeyViolation => {
            MessageError::not_found("session", session_id)
        }
        Backend::Postgres => MessageError::Db(err),
    }
}

/// What [`import_message`] found before it wrote.
#[derive(Debug, Clone, PartialEq)]
pub enum Imported {
    /// The message was new and is now stored as given.
    Inserted,
    /// The id belongs to a message of another session (a source that replays earlier
    /// records into a new conversation): nothing was written.
    InOtherSession {
        /// The session that has it.
        session_id: String,
    },
    /// The message was there; its fields now are as given, parts with new ids were added
    /// and parts with known ids replaced. Holds the usage and cost it had before, so the
    /// caller can add the difference to the session.
    Merged {
        /// The usage before.
        usage: TokenUsage,
        /// The cost before.
        cost_usd: f64,
    },
}

/// Stores `msg` for an importer of another agent's history, which reads a conversation
/// again as it grows and must write each message however often it sees it.
///
/// A new id is inserted as [`insert_message`] does. A message already present (same id,
/// same session) is merged: its fields (usage, cost, model, finish, error, times) become
/// those of `msg`, a part whose id it already has is replaced by the given one (no tool
/// state-machine check: the source decides the state), and a part with a new id is added
/// at its position. Parts of the stored message that `msg` does not list stay. The
/// message's `updated_at` (and each part's) is taken from `msg`, never the clock.
///
/// A message id present in another session is left alone ([`Imported::InOtherSession`]).
/// Errors: those of [`insert_message`]; a part id of another message is
/// [`MessageError::InvalidInput`].
pub fn import_message(tx: &mut Tx<'_>, msg: &Message) -> Result<Imported> {
    let Some(row) = tx.q().get_message(&msg.id)? else {
        insert_message(tx, msg)?;
        return Ok(Imported::Inserted);
    };
    if row.session_id != msg.session_id {
        return Ok(Imported::InOtherSession {
            session_id: row.session_id,
        });
    }
    let before = Imported::Merged {
        usage: TokenUsage {
            input: row.input_tokens,
            output: row.output_tokens,
            cache_read: row.cache_read_tokens,
            cache_write: row.cache_write_tokens,
            reasoning: row.reasoning_tokens,
        },
        cost_usd: row.cost_usd,
    };
    let error = msg.error.as_ref().map(serde_json::Value::to_string);
    let unchanged = row.parent_id == msg.parent_id
        && row.agent == msg.agent
        && row.provider == msg.provider
        && row.model == msg.model
        && row.finish_reason.as_deref() == msg.finish_reason.as_ref().map(|r| r.as_str())
        && row.is_summary == msg.is_summary
        && before
            == Imported::Merged {
                usage: msg.usage,
                cost_usd: msg.cost_usd,
            }
        && row.error == error
        && row.finished_at == msg.finished_at;
    // A real change moves updated_at at least one millisecond on (before V23 an update
    // that left it as it was got the database's clock from the messages_touch trigger).
    if !unchanged {
        tx.q().update_message(&queries::UpdateMessageParams {
            parent_id: msg.parent_id.as_deref(),
            agent: msg.agent.as_deref(),
            provider: msg.provider.as_deref(),
            model: msg.model.as_deref(),
            finish_reason: msg.finish_reason.as_ref().map(|r| r.as_str()),
            is_summary: msg.is_summary,
            input_tokens: msg.usage.input,
            output_tokens: msg.usage.output,
            cache_read_tokens: msg.usage.cache_read,
            cache_write_tokens: msg.usage.cache_write,
            reasoning_tokens: msg.usage.reasoning,
            cost_usd: msg.cost_usd,
            error: error.as_deref(),
            finished_at: msg.finished_at,
            now: msg.updated_at.max(row.updated_at.saturating_add(1)),
            id: &msg.id,
        })?;
    }
    for part in &msg.parts {
        import_part_of(tx, &msg.id, &msg.session_id, part)?;
    }
    Ok(before)
}

/// Stores `part` of message `message_id` for an importer (a tool call whose result was
/// read later): added at its position when the message lacks it, replaced when its content
/// changed (no tool state-machine check: the source decides), with the part's own times.
/// Returns whether anything was written. A message that is not stored is
/// [`MessageError::NotFound`]; a part id of another message, or a position another part
/// holds, [`MessageError::InvalidInput`].
pub fn import_part(tx: &mut Tx<'_>, message_id: &str, part: &StoredPart) -> Result<bool> {
    let Some(session_id) = message_session(tx, message_id)? else {
        return Err(MessageError::not_found("message", message_id));
    };
    import_part_of(tx, message_id, &session_id, part)
}

/// The session message `id` belongs to, or `None` when no message has that id: what an
/// importer asks of a record it reads again, and the session service before it points at
/// a message (a session's summary, a fork point). One indexed read; nothing is decoded.
pub fn message_session(tx: &mut dyn Reads, id: &str) -> Result<Option<String>> {
    Ok(tx.reads().get_message(id)?.map(|row| row.session_id))
}

fn import_part_of(
    tx: &mut Tx<'_>,
    message_id: &str,
    session_id: &str,
    part: &StoredPart,
) -> Result<bool> {
    match tx.q().get_part(&part.id)? {
        None => {
            insert_part(tx, message_id, session_id, part)?;
            Ok(true)
        }
        Some(old) if old.message_id != message_id => Err(MessageError::InvalidInput(format!(
            "part {} belongs to message {}, not {message_id}",
            part.id, old.message_id
        ))),
        Some(old) => {
            let Some((data, now)) = import_change(message_id, &old.data, old.updated_at, part)?
            else {
                return Ok(false);
            };
            tx.q().update_part(&queries::UpdatePartParams {
                r#type: part.part.type_name(),
                data: &data,
                now,
                id: &part.id,
            })?;
            Ok(true)
        }
    }
}

/// An importer's new version `part` of a part stored (or waiting to be stored) with JSON
/// `old_data` and time `old_updated_at`: its JSON and time, or `None` when the content is
/// the same (nothing to write). The one rule for [`import_part`] and importers that apply
/// a change before the part is written: the content is replaced, id, position and
/// `created_at` are kept, and the time moves at least 1 ms past the old one (an update
/// that left `updated_at` as it was got the database's clock from `parts_touch` until V23).
///
/// A part nesting deeper than [`crate::MAX_PART_DEPTH`] is [`MessageError::PartTooDeep`]
/// (naming `message_id`).
pub fn import_change(
    message_id: &str,
    old_data: &str,
    old_updated_at: i64,
    part: &StoredPart,
) -> Result<Option<(String, i64)>> {
    let data = part
        .part
        .to_json()
        .map_err(|err| MessageError::encoding(err, &part.id, message_id))?;
    if old_data == data {
        return Ok(None);
    }
    Ok(Some((
        data,
        part.updated_at.max(old_updated_at.saturating_add(1)),
    )))
}

/// Inserts one part of message `message_id` (in `session_id`) exactly as given.
pub fn insert_part(
    tx: &mut Tx<'_>,
    message_id: &str,
    session_id: &str,
    part: &StoredPart,
) -> Result<()> {
    if part.id.is_empty() {
        return Err(MessageError::InvalidInput("part id is empty".into()));
    }
    check_id("part", &part.id).map_err(|err| err.in_session(session_id))?;
    let data = part
        .part
        .to_json()
        .map_err(|err| MessageError::encoding(err, &part.id, message_id))?;
    let inserted = tx
        .q()
        .create_part(&create_part_params(message_id, session_id, part, &data));
    match inserted {
        Ok(()) => Ok(()),
        Err(err) => match err {
            // UNIQUE (message_id, position) vs a taken part id: both are conflicts, but a
            // clashing position is the caller's bug in building the message.
            scribe_db::Error::Conflict { message, .. } if message.contains("position") => Err(
                MessageError::InvalidInput(format!("two parts at position {}", part.position)),
            ),
            other => Err(MessageError::Db(other)),
        },
    }
}

/// The message `id` with its parts in position order.
pub fn load_message(tx: &mut dyn Reads, id: &str) -> Result<Message> {
    let row = tx
        .reads()
        .get_message(id)?
        .ok_or_else(|| MessageError::not_found("message", id))?;
    let mut msg = message_from_row(row)?;
    msg.parts = parts_of(tx, id)?;
    Ok(msg)
}

/// The parts of message `id` in position order (one query), decoded.
pub(crate) fn parts_of(tx: &mut dyn Reads, id: &str) -> Result<Vec<StoredPart>> {
    tx.reads()
        .list_message_part_data(id)?
        .into_iter()
        .map(|row| PartData::from(row).decode())
        .collect()
}

/// Which of `ids` are stored, each with its session (`(message id, session id)`, in
/// creation order; ids that are not stored are left out). For many ids, call it per
/// chunk: each call is one statement with an `IN` list of all of `ids`.
pub fn message_sessions(tx: &mut dyn Reads, ids: &[&str]) -> Result<Vec<(String, String)>> {
    if ids.is_empty() {
        return Ok(Vec::new());
    }
    Ok(tx
        .reads()
        .list_messages_by_ids(ids)?
        .into_iter()
        .map(|row| (row.id, row.session_id))
        .collect())
}

/// [`message_sessions`] for part ids: which are stored, each with its session.
pub fn part_sessions(tx: &mut dyn Reads, ids: &[&str]) -> Result<Vec<(String, String)>> {
    if ids.is_empty() {
        return Ok(Vec::new());
    }
    Ok(tx
        .reads()
        .list_part_sessions(ids)?
        .into_iter()
        .map(|row| (row.id, row.session_id))
        .collect())
}

/// The id of `session_id`'s newest message (any role), if it has one; one indexed query.
pub fn last_message_id(tx: &mut dyn Reads, session_id: &str) -> Result<Option<String>> {
    Ok(tx.reads().get_last_message(session_id)?.map(|row| row.id))
}

/// Deletes every message of `session_id` with its parts (the session's counters and the
/// search indexes follow by trigger) and returns how many messages went. Publishes
/// nothing: the caller announces what the session became. The parts go first, in one
/// statement: left to the foreign key's cascade, SQLite found each message's parts by
/// walking all of the session's (time in the square of the session's size).
pub fn delete_session_messages(tx: &mut Tx<'_>, session_id: &str) -> Result<usize> {
    tx.q().delete_session_parts(session_id)?;
    Ok(tx.q().delete_session_messages(session_id)?)
}

/// What must happen inside `tx` before the row of session `session_id` is deleted, its
/// messages and parts going by the cascade. On SQLite its parts are deleted first, in one
/// statement: the cascade looks each message's parts up by the composite foreign key
/// `(session_id, message_id)`, for which SQLite's planner (without statistics) picks
/// `parts_session` and walks every part of the session, time in the square of the
/// session's size (a session of 7,200 messages took 8.5 s to delete, now 0.2 s). On
/// PostgreSQL nothing: its planner looks parts up by message, and parts deleted before
/// the row would each update the session's counters, a new row version every time,
/// where after the row is gone those updates find nothing (the same session: 0.65 s by
/// the cascade, 5.5 s parts first).
pub fn before_session_delete(tx: &mut Tx<'_>, session_id: &str) -> Result<()> {
    if tx.backend() == Backend::Sqlite {
        tx.q().delete_session_parts(session_id)?;
    }
    Ok(())
}

/// The message `id` without its parts (its row only: usage, role, session …), for
/// callers that must not depend on decoding parts.
pub fn load_message_row(tx: &mut dyn Reads, id: &str) -> Result<Message> {
    let row = tx
        .reads()
        .get_message(id)?
        .ok_or_else(|| MessageError::not_found("message", id))?;
    message_from_row(row)
}

/// Where [`load_sent_messages_from`] starts: a message's `(created_at, id)`, or the
/// session's first message.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SentFrom<'a> {
    /// From the session's first message.
    Start,
    /// From this message on (it included).
    Message {
        /// Its creation time.
        created_at: i64,
        /// Its id.
        id: &'a str,
    },
}

/// The messages of `session_id` from `from` on (creation order) with their parts, as a
/// request needs them: **the output and metadata of every tool call cleared by compaction
/// are left out** (where the dialect can; the cleared marker is what is sent), so the
/// cost of loading follows what is sent rather than what is stored. Four reads at most
/// (messages and parts, each one cursor query, and the session's existence when it has
/// no message), whatever the history's length. For sending only: never write these parts
/// back.
pub fn load_sent_messages_from(
    tx: &mut dyn Reads,
    session_id: &str,
    from: SentFrom<'_>,
) -> Result<Vec<Message>> {
    let (created_at, id) = match from {
        SentFrom::Start => (i64::MIN, ""),
        SentFrom::Message { created_at, id } => (created_at, id),
    };
    let rows = tx
        .reads()
        .list_messages_from(&queries::ListMessagesFromParams {
            session_id,
            created_at,
            id,
        })?;
    if rows.is_empty() {
        ensure_session(tx, session_id)?;
        return Ok(Vec::new());
    }
    let parts = tx
        .reads()
        .list_sent_part_data_from(&queries::ListSentPartDataFromParams {
            session_id,
            created_at,
            id,
        })?;
    assemble(rows, parts.into_iter().map(PartData::from))
}

/// The id of `session_id`'s newest user message, if it has one; one indexed query that
/// reads no other message.
pub fn last_user_message_id(tx: &mut dyn Reads, session_id: &str) -> Result<Option<String>> {
    Ok(tx.reads().get_last_user_message_id(session_id)?)
}

/// The assistant messages of `session_id` left open (`finished_at` unset: a dead
/// process's, or one still being answered), oldest first; one indexed query.
pub fn list_unfinished_assistant_message_ids(
    tx: &mut dyn Reads,
    session_id: &str,
) -> Result<Vec<String>> {
    Ok(tx
        .reads()
        .list_unfinished_assistant_message_ids(session_id)?)
}

/// The model of `session_id`'s newest assistant message that names one.
pub fn last_assistant_model(tx: &mut dyn Reads, session_id: &str) -> Result<Option<String>> {
    Ok(tx.reads().get_last_assistant_model(session_id)?)
}

/// A message that used tokens and cost nothing ([`unpriced_messages`]).
#[derive(Debug, Clone, PartialEq)]
pub struct UnpricedMessage {
    /// The message.
    pub id: String,
    /// The model it names.
    pub model: Option<String>,
    /// Its tokens.
    pub usage: TokenUsage,
}

/// The messages of `session_id` that used tokens and cost nothing, in creation order: how
/// an importer stores usage of a model it had no price for. One indexed query.
pub fn unpriced_messages(tx: &mut dyn Reads, session_id: &str) -> Result<Vec<UnpricedMessage>> {
    Ok(tx
        .reads()
        .list_unpriced_messages(session_id)?
        .into_iter()
        .map(|r| UnpricedMessage {
            id: r.id,
            model: r.model,
            usage: TokenUsage {
                input: r.input_tokens,
                output: r.output_tokens,
                cache_read: r.cache_read_tokens,
                cache_write: r.cache_write_tokens,
                reasoning: r.reasoning_tokens,
            },
        })
        .collect())
}

/// Adds `cost_usd` to message `id`'s cost, its tokens unchanged (a price found for usage
/// stored without one); `updated_at` moves one past its stored value, as every change
/// moves it, not to the clock (the time of an imported record stays the source's).
/// Errors: a negative or non-finite cost ([`MessageError::InvalidInput`]), an unknown
/// message ([`MessageError::NotFound`]).
pub fn add_message_cost(tx: &mut Tx<'_>, id: &str, cost_usd: f64) -> Result<()> {
    crate::service::check_cost(cost_usd)?;
    tx.q()
        .add_message_usage(&queries::AddMessageUsageParams {
            input_tokens: 0,
            output_tokens: 0,
            cache_read_tokens: 0,
            cache_write_tokens: 0,
            reasoning_tokens: 0,
            cost_usd,
            // `moved_forward` from the smallest clock: one past the stored time.
            now: i64::MIN,
            id,
        })?
        .ok_or_else(|| MessageError::not_found("message", id))?;
    Ok(())
}

/// Every message of a session in creation order, parts in position order: two queries
/// however long the session is. An unknown session is [`MessageError::NotFound`].
pub fn load_session_messages(tx: &mut dyn Reads, session_id: &str) -> Result<Vec<Message>> {
    let rows = tx.reads().list_messages(session_id)?;
    if rows.is_empty() {
        // Only an empty answer needs telling "no messages" from "no session".
        ensure_session(tx, session_id)?;
        return Ok(Vec::new());
    }
    let parts = tx.reads().list_session_part_data(session_id)?;
    assemble(rows, parts.into_iter().map(PartData::from))
}

/// The messages of each of `session_ids` with their parts, as [`load_session_messages`]
/// gives one session's, in two statements for all of them (a batch of `export --all`,
/// where a session's own statements cost a round trip each on PostgreSQL). One entry per
/// session id, in the order given: the session's messages (none for a session without,
/// or one not stored, which the caller tells apart itself), or the error decoding them,
/// which is that session's alone.
/// `Err` when a statement failed, e.g. on a value of the wrong kind in a column
/// (`scribe_db::Error::UnreadableValue`), which names no session: load the sessions
/// one at a time to learn which.
pub fn load_sessions_messages(
    tx: &mut dyn Reads,
    session_ids: &[&str],
) -> Result<Vec<Result<Vec<Message>>>> {
    if session_ids.is_empty() {
        return Ok(Vec::new());
    }
    let mut rows: HashMap<String, Vec<MessageRow>> = HashMap::new();
    for row in tx.reads().list_messages_of_sessions(session_ids)? {
        rows.entry(row.session_id.clone()).or_default().push(row);
    }
    let mut parts: HashMap<String, Vec<PartData>> = HashMap::new();
    for row in tx.reads().list_part_data_of_sessions(session_ids)? {
        parts
            .entry(row.session_id.clone())
            .or_default()
            .push(PartData::from(row));
    }
    Ok(session_ids
        .iter()
        .map(|id| {
            let rows = rows.remove(*id).unwrap_or_default();
            let parts = parts.remove(*id).unwrap_or_default();
            assemble(rows, parts.into_iter())
        })
        .collect())
}

/// The messages `ids` (any order in, creation order out) with their parts; ids that do
/// not exist are skipped.
pub fn load_messages_by_ids(tx: &mut dyn Reads, ids: &[&str]) -> Result<Vec<Message>> {
    if ids.is_empty() {
        return Ok(Vec::new());
    }
    let rows = tx.reads().list_messages_by_ids(ids)?;
    attach_parts(tx, rows)
}

/// The messages `ids` without their parts (`parts` empty), in creation order; ids that
/// are not stored are left out. For a reader that loads parts its own way (the web
/// viewer's message pages read a big part cut, in the database).
pub fn load_messages_without_parts_by_ids(
    tx: &mut dyn Reads,
    ids: &[&str],
) -> Result<Vec<Message>> {
    if ids.is_empty() {
        return Ok(Vec::new());
    }
    tx.reads()
        .list_messages_by_ids(ids)?
        .into_iter()
        .map(message_from_row)
        .collect()
}

/// Decodes message rows and loads all their parts with one query, keeping the rows' order.
pub(crate) fn attach_parts(tx: &mut dyn Reads, rows: Vec<MessageRow>) -> Result<Vec<Message>> {
    if rows.is_empty() {
        return Ok(Vec::new());
    }
    let ids: Vec<&str> = rows.iter().map(|r| r.id.as_str()).collect();
    let parts = tx.reads().list_part_data_by_message_ids(&ids)?;
    assemble(rows, parts.into_iter().map(PartData::from))
}

/// Fails with [`MessageError::NotFound`] unless session `id` exists: the one question
/// this crate asks of the `sessions` table (which crates/session owns), to tell an empty
/// session from a missing one. It never reads a session's columns.
pub(crate) fn ensure_session(tx: &mut dyn Reads, id: &str) -> Result<()> {
    if tx.reads().session_exists(id)? {
        Ok(())
    } else {
        Err(MessageError::not_found("session", id))
    }
}

/// The columns of a part the part-loading queries return (its JSON is decoded once, in
/// Rust).
struct PartData {
    id: String,
    message_id: String,
    position: i64,
    data: String,
    created_at: i64,
    updated_at: i64,
}

macro_rules! part_data_from {
    ($($row:ident),*) => {
        $(impl From<queries::$row> for PartData {
            fn from(r: queries::$row) -> PartData {
                PartData {
                    id: r.id,
                    message_id: r.message_id,
                    position: r.position,
                    data: r.data,
                    created_at: r.created_at,
                    updated_at: r.updated_at,
                }
            }
        })*
    };
}

part_data_from!(
    ListSentPartDataFromRow,
    ListSessionPartDataRow,
    ListPartDataOfSessionsRow,
    ListPartDataByMessageIdsRow,
    ListMessagePartDataRow
);

impl PartData {
    fn decode(self) -> Result<StoredPart> {
        StoredPart::decode(
            self.id,
            self.position,
            &self.data,
            self.created_at,
            self.updated_at,
        )
    }
}

/// Puts each part under its message, in position order (parts usually arrive in it).
fn assemble(rows: Vec<MessageRow>, parts: impl Iterator<Item = PartData>) -> Result<Vec<Message>> {
    let mut messages = rows
        .into_iter()
        .map(message_from_row)
        .collect::<Result<Vec<_>>>()?;
    // Parts usually come in message order, so a cursor walks forward through the messages
    // (skipping those without parts); when they don't (a newest-first page), an index is
    // built once.
    let mut at = 0;
    let mut index: Option<HashMap<String, usize>> = None;
    for row in parts {
        if messages.get(at).is_none_or(|m| m.id != row.message_id) {
            let next = messages.get(at + 1).is_some_and(|m| m.id == row.message_id);
            let found = if next {
                Some(at + 1)
            } else {
                index
                    .get_or_insert_with(|| {
                        messages
                            .iter()
                            .enumerate()
                            .map(|(i, m)| (m.id.clone(), i))
                            .collect()
                    })
                    .get(&row.message_id)
                    .copied()
            };
            match found {
                Some(i) => at = i,
                None => continue,
            }
        }
        if let Some(msg) = messages.get_mut(at) {
            msg.parts.push(row.decode()?);
        }
    }
    for msg in &mut messages {
        if !msg.parts.is_sorted_by_key(|p| p.position) {
            msg.parts.sort_by_key(|p| p.position);
        }
    }
    Ok(messages)
}
