//! Storing many new messages at once: the bulk import path (`scribe import FILE`, the
//! history importers) inserts whole conversations, not one message per call.
//!
//! [`insert_messages`] stores what [`store::insert_message`] would store for each message
//! (the same rows, in the same order, the same triggers), in statements of many rows
//! (`scribe_db::bulk`, which says why that is cheaper on each backend). When the database
//! refuses a row, the messages are stored one by one with [`store::insert_message`], so
//! the error is exactly that of the one-by-one path.

use scribe_db::Tx;
use scribe_db::bulk::{self, Bulk};
use scribe_db::queries::{CreateMessageParams, CreatePartParams};

use crate::error::{MessageError, Result};
use crate::message::Message;
use crate::store;

/// Messages per bulk call: the rows of one savepoint (`scribe_db::bulk`).
const CHUNK: usize = 256;

/// Stores every message of `messages` (with its parts) exactly as
/// [`store::insert_message`] stores each, in order; errors are that function's, for the
/// first message it refuses (earlier ones stay stored, as a loop over it would leave them).
pub fn insert_messages<'m>(
    tx: &mut Tx<'_>,
    messages: impl IntoIterator<Item = &'m Message>,
) -> Result<()> {
    let mut chunk: Vec<&Message> = Vec::with_capacity(CHUNK);
    for message in messages {
        chunk.push(message);
        if chunk.len() == CHUNK {
            insert_chunk(tx, &chunk)?;
            chunk.clear();
        }
    }
    insert_chunk(tx, &chunk)
}

fn insert_chunk(tx: &mut Tx<'_>, messages: &[&Message]) -> Result<()> {
    if messages.is_empty() {
        return Ok(());
    }
    if !messages.iter().all(|m| store::ids_storable(m)) {
        // The one-by-one path says which and stores those before it.
        return one_by_one(tx, messages);
    }
    let errors: Vec<Option<String>> = messages
        .iter()
        .map(|m| m.error.as_ref().map(serde_json::Value::to_string))
        .collect();
    let mut data: Vec<String> = Vec::new();
    for m in messages {
        for p in &m.parts {
            let json = p.part.to_json();
            data.push(json.map_err(|err| MessageError::encoding(err, &p.id, &m.id))?);
        }
    }
    let rows: Vec<CreateMessageParams<'_>> = messages
        .iter()
        .zip(&errors)
        .map(|(msg, error)| store::create_message_params(msg, error.as_deref()))
        .collect();
    let parts: Vec<CreatePartParams<'_>> = messages
        .iter()
        .flat_map(|m| m.parts.iter().map(move |p| (m, p)))
        .zip(&data)
        .map(|((m, p), data)| store::create_part_params(&m.id, &m.session_id, p, data))
        .collect();
    match bulk::insert_messages(tx, &rows, &parts).map_err(MessageError::Db)? {
        Bulk::Inserted => Ok(()),
        Bulk::NotInserted => one_by_one(tx, messages),
    }
}

fn one_by_one(tx: &mut Tx<'_>, messages: &[&Message]) -> Result<()> {
    for message in messages {
        store::insert_message(tx, message)?;
    }
    Ok(())
}
