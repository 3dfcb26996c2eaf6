//! The raw load of a session, the load row's "same design": Scribe's two statements
//! (`ListMessages`, then `ListSessionPartData`) read with rusqlite in one read transaction,
//! message rows into tuples, parts decoded into the same typed `Part`s and grouped under
//! their messages. The bench's load row (`reads.rs`) and `examples/load_profile.rs` both use
//! it; the example includes this file by path (the bench is a binary crate), so it depends
//! on nothing of the bench.

use std::collections::HashMap;

use rusqlite::Connection;
use scribe_message::Part;

/// `ListMessages`, written out by hand.
pub const RAW_LIST_MESSAGES: &str =
    "SELECT * FROM messages WHERE session_id = ?1 ORDER BY created_at, id";
/// `ListSessionPartData`, written out by hand.
pub const RAW_LIST_PARTS: &str = "SELECT id, message_id, position, data, created_at, updated_at
FROM parts
WHERE session_id = ?1
ORDER BY seq";

/// A message row: its 19 columns, in two tuples.
pub type RawMessage = (
    (
        String,
        String,
        Option<String>,
        String,
        Option<String>,
        Option<String>,
        Option<String>,
        Option<String>,
        bool,
    ),
    (
        i64,
        i64,
        i64,
        i64,
        i64,
        f64,
        Option<String>,
        i64,
        i64,
        Option<i64>,
    ),
);

/// A part: id, position, content (`None` when the load does not decode), created and
/// updated times.
pub type RawPart = (String, i64, Option<Part>, i64, i64);

/// What the raw load fails with: SQLite or a part's JSON.
pub type RawError = Box<dyn std::error::Error + Send + Sync>;

/// One `messages` row (schema column order, the 19 columns) into a [`RawMessage`].
pub fn message_tuple(r: &rusqlite::Row<'_>) -> rusqlite::Result<RawMessage> {
    Ok((
        (
            r.get(0)?,
            r.get(1)?,
            r.get(2)?,
            r.get(3)?,
            r.get(4)?,
            r.get(5)?,
            r.get(6)?,
            r.get(7)?,
            r.get(8)?,
        ),
        (
            r.get(9)?,
            r.get(10)?,
            r.get(11)?,
            r.get(12)?,
            r.get(13)?,
            r.get(14)?,
            r.get(15)?,
            r.get(16)?,
            r.get(17)?,
            r.get(18)?,
        ),
    ))
}

/// The session's message rows into tuples (`ListMessages`).
pub fn read_messages(conn: &Connection, session: &str) -> rusqlite::Result<Vec<RawMessage>> {
    conn.prepare_cached(RAW_LIST_MESSAGES)?
        .query_map([session], message_tuple)?
        .collect()
}

/// Loads `session` the raw way (parts decoded when `decode`); returns how many messages.
pub fn raw_load(conn: &Connection, session: &str, decode: bool) -> Result<usize, RawError> {
    let tx = conn.unchecked_transaction()?;
    let messages = read_messages(&tx, session)?;
    let mut grouped: Vec<(RawMessage, Vec<RawPart>)> =
        messages.into_iter().map(|m| (m, Vec::new())).collect();
    let mut stmt = tx.prepare_cached(RAW_LIST_PARTS)?;
    let mut rows = stmt.query([session])?;
    // Parts come in the order they were written, which is message order: a cursor walks
    // forward, and an index is built the first time a part is out of that order.
    let mut at = 0;
    let mut index: Option<HashMap<String, usize>> = None;
    while let Some(r) = rows.next()? {
        let message_id: String = r.get(1)?;
        if grouped.get(at).is_none_or(|(m, _)| m.0.0 != message_id) {
            if grouped
                .get(at + 1)
                .is_some_and(|(m, _)| m.0.0 == message_id)
            {
                at += 1;
            } else {
                let index = index.get_or_insert_with(|| {
                    grouped
                        .iter()
                        .enumerate()
                        .map(|(i, (m, _))| (m.0.0.clone(), i))
                        .collect()
                });
                match index.get(&message_id) {
                    Some(&i) => at = i,
                    None => continue,
                }
            }
        }
        let data: String = r.get(3)?;
        let part = if decode {
            Some(Part::from_json(&data)?)
        } else {
            None
        };
        if let Some((_, parts)) = grouped.get_mut(at) {
            parts.push((r.get(0)?, r.get(2)?, part, r.get(4)?, r.get(5)?));
        }
    }
    drop(rows);
    drop(stmt);
    tx.commit()?;
    std::hint::black_box(&grouped);
    Ok(grouped.len())
}
