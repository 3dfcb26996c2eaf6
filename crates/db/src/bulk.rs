//! Many messages and parts in few statements: the bulk import path's inserts (`scribe
//! import FILE`, the history importers).
//!
//! Why, on SQLite. Every INSERT into `messages` or `parts` fires triggers that write other
//! tables (the session's counters, the search queue) and has constraints that abort, so
//! SQLite gives each such statement a statement journal: before the statement first changes
//! a page, it copies the page aside, so that a failure can undo the statement alone. One
//! row per statement copies the same few pages (the tables' and indexes' last leaves,
//! the session's row) again for every row; a profile of an import of 100,000 messages
//! put that copying at about a twelfth of its CPU. One statement of many rows copies
//! each page once, and pays the statement's start and end once.
//!
//! Why, on PostgreSQL. Every statement is a round trip to the server, which the import
//! waits for: one per message and one per message's parts, a server's statement start and
//! end each. Here a batch of messages is two statements, the generated `CreateMessages`
//! and `CreateParts`, each reading its rows from one JSON parameter ([`messages_json`],
//! [`parts_json`]).
//!
//! The rows are exactly those the generated `CreateMessage`/`CreatePart` write, in the
//! same order, so the triggers do the same (counters, queue, PostgreSQL's search
//! documents). All or nothing: the rows go in under a savepoint; when the database refuses
//! one (a taken id, a position two parts share, a missing session; on PostgreSQL also a
//! value it cannot take, such as a NUL in a text), everything since the savepoint is undone
//! and [`insert_messages`] says so, and the caller stores the rows one by one to learn
//! which row and why (failures are rare: the common path pays nothing for them).

use rusqlite::Connection;
use rusqlite::types::ToSql;
use serde::Serialize;
use serde::ser::Serializer;

use crate::Result;
use crate::queries::{CREATE_MESSAGE_SQL, CREATE_PART_SQL, CreateMessageParams, CreatePartParams};
use crate::search_index;
use crate::tx::Tx;

/// Rows per statement, largest first: a batch is written in statements of these sizes
/// (so at most three statements per table are prepared and cached).
const ROWS: [usize; 3] = [64, 8, 1];

/// Parameters per row of each table: the generated statement's `?1 … ?N`, checked by
/// [`statement`] against the generated SQL.
const MESSAGE_PARAMS: usize = 19;
const PART_PARAMS: usize = 8;

/// What [`insert_messages`] did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Bulk {
    /// Every row is stored.
    Inserted,
    /// Nothing is stored: the database refused a row (everything of the call was undone),
    /// or a value cannot take the bulk path (a cost that is not a finite number). Store
    /// the rows one by one.
    NotInserted,
}

/// Inserts `messages`, then `parts`, each as the generated `create_message` /
/// `create_part` would, in that order, in statements of many rows (see the module doc).
/// All or nothing; [`Bulk::NotInserted`] when nothing was stored. Errors other than a
/// refused row (the database failed, it is busy) are returned as they are.
pub fn insert_messages(
    tx: &mut Tx<'_>,
    messages: &[CreateMessageParams<'_>],
    parts: &[CreatePartParams<'_>],
) -> Result<Bulk> {
    if messages.is_empty() && parts.is_empty() {
        return Ok(Bulk::Inserted);
    }
    let Some(conn) = tx.conn() else {
        #[cfg(feature = "postgres")]
        return insert_json(tx, messages, parts);
        #[cfg(not(feature = "postgres"))]
        return Ok(Bulk::NotInserted);
    };
    if statement(CREATE_MESSAGE_SQL, MESSAGE_PARAMS, 1).is_none()
        || statement(CREATE_PART_SQL, PART_PARAMS, 1).is_none()
    {
        return Ok(Bulk::NotInserted);
    }
    outcome(tx.attempt(|_| {
        insert_all(conn, messages, parts).map_err(|err| {
            if refused(&err) {
                Stored::Refused
            } else {
                Stored::Failed(err.into())
            }
        })
    }))
}

/// Why the rows of an [`insert_messages`] attempt were undone.
enum Stored {
    /// The database refused a row: store them one by one to learn which and why.
    Refused,
    /// Anything else, returned as it is.
    Failed(crate::Error),
}

impl From<crate::Error> for Stored {
    fn from(err: crate::Error) -> Self {
        Stored::Failed(err)
    }
}

/// [`insert_messages`]' answer from its attempt ([`Tx::attempt`]: everything of it undone
/// when it failed).
fn outcome(attempt: std::result::Result<(), Stored>) -> Result<Bulk> {
    match attempt {
        Ok(()) => Ok(Bulk::Inserted),
        Err(Stored::Refused) => Ok(Bulk::NotInserted),
        Err(Stored::Failed(err)) => Err(err),
    }
}

/// [`insert_messages`] on PostgreSQL: `CreateMessages`, then `CreateParts`, then
/// `AddSessionCounts`, in one attempt ([`Tx::attempt`]).
///
/// The row triggers that count a session's messages and tool parts stand aside while
/// `scribe.bulk` is on (schema V30): each of their updates is a new version of the
/// session's row, which the next one walks past until the transaction ends, so a batch's
/// rows counted one by one took time in the square of the session's rows in the
/// transaction. [`added_counts`] gives the same counts for the batch, added in one UPDATE.
/// The setting is transaction-local, and undone with the attempt when a row is refused.
#[cfg(feature = "postgres")]
fn insert_json(
    tx: &mut Tx<'_>,
    messages: &[CreateMessageParams<'_>],
    parts: &[CreatePartParams<'_>],
) -> Result<Bulk> {
    // A batch JSON cannot carry (a cost that is NaN or an infinity, which `Field` refuses
    // to write) goes in one by one, its values as typed parameters.
    let (Ok(rows), Ok(part_rows)) = (messages_json(messages), parts_json(parts)) else {
        return Ok(Bulk::NotInserted);
    };
    let counts = added_counts(messages, parts)?;
    outcome(tx.attempt(|tx| {
        let refusal = |err: crate::Error| {
            if refused_value(&err) {
                Stored::Refused
            } else {
                Stored::Failed(err)
            }
        };
        tx.execute_batch("SET LOCAL scribe.bulk = on")?;
        tx.q().create_messages(&rows).map_err(refusal)?;
        tx.q().create_parts(&part_rows).map_err(refusal)?;
        tx.q().add_session_counts(&counts)?;
        tx.execute_batch("SET LOCAL scribe.bulk = off")?;
        Ok(())
    }))
}

/// What the counter triggers (V1, V23) add to each session for `messages` and `parts`
/// stored one by one, as `AddSessionCounts` takes it: {session id: {"messages", "tools",
/// "at"}}, where a message counts one with its `created_at`, a part of type `tool` one
/// tool call with its `updated_at`, and `at` is the newest of those times.
#[cfg(feature = "postgres")]
fn added_counts(
    messages: &[CreateMessageParams<'_>],
    parts: &[CreatePartParams<'_>],
) -> Result<String> {
    #[derive(Serialize)]
    struct Added {
        messages: i64,
        tools: i64,
        at: i64,
    }
    let mut counts: std::collections::BTreeMap<&str, Added> = std::collections::BTreeMap::new();
    let rows = messages
        .iter()
        .map(|m| (m.session_id, 1, 0, m.created_at))
        .chain(
            parts
                .iter()
                .filter(|p| p.r#type == "tool")
                .map(|p| (p.session_id, 0, 1, p.updated_at)),
        );
    for (session, messages, tools, at) in rows {
        let entry = counts.entry(session).or_insert(Added {
            messages: 0,
            tools: 0,
            at,
        });
        entry.messages += messages;
        entry.tools += tools;
        entry.at = entry.at.max(at);
    }
    serde_json::to_string(&counts)
        .map_err(|err| crate::Error::InvalidInput(format!("cannot encode counts: {err}")))
}

/// Whether PostgreSQL refused a row or one of its values (SQLSTATE classes 22, data
/// exception; 23, a constraint; 54, a limit such as an index row's size), as against
/// failing itself or being in another writer's way.
#[cfg(feature = "postgres")]
fn refused_value(err: &crate::Error) -> bool {
    match err {
        crate::Error::Conflict { .. } | crate::Error::NulInText { .. } => true,
        _ => err
            .sqlstate()
            .is_some_and(|code| ["22", "23", "54"].iter().any(|c| code.starts_with(c))),
    }
}

/// `messages` as `CreateMessages` reads them: a JSON object from each row's index to an
/// object of its parameters, named as in the generated `CreateMessage`.
pub fn messages_json(messages: &[CreateMessageParams<'_>]) -> Result<String> {
    indexed(messages.iter().map(message_fields))
}

/// `parts` as `CreateParts` reads them: a JSON object from each row's index to an object
/// of its parameters, named as in the generated `CreatePart`.
pub fn parts_json(parts: &[CreatePartParams<'_>]) -> Result<String> {
    indexed(parts.iter().map(part_fields))
}

/// One parameter of a generated insert, as both bulk paths take it: bound to SQLite's
/// statement of many rows, or written into PostgreSQL's JSON parameter.
#[derive(Debug, Clone, Copy)]
enum Field<'r> {
    Text(&'r str),
    MaybeText(Option<&'r str>),
    Int(i64),
    MaybeInt(Option<i64>),
    Real(f64),
    Bool(bool),
}

impl ToSql for Field<'_> {
    fn to_sql(&self) -> rusqlite::Result<rusqlite::types::ToSqlOutput<'_>> {
        match self {
            Field::Text(v) => v.to_sql(),
            Field::MaybeText(v) => v.to_sql(),
            Field::Int(v) => v.to_sql(),
            Field::MaybeInt(v) => v.to_sql(),
            Field::Real(v) => v.to_sql(),
            Field::Bool(v) => v.to_sql(),
        }
    }
}

impl Serialize for Field<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> std::result::Result<S::Ok, S::Error> {
        match self {
            Field::Text(v) => v.serialize(s),
            Field::MaybeText(v) => v.serialize(s),
            Field::Int(v) => v.serialize(s),
            Field::MaybeInt(v) => v.serialize(s),
            // serde_json would write null for NaN or an infinity: refused instead.
            Field::Real(v) if !v.is_finite() => Err(serde::ser::Error::custom(format!(
                "{v} has no JSON spelling"
            ))),
            Field::Real(v) => v.serialize(s),
            Field::Bool(v) => v.serialize(s),
        }
    }
}

/// `CreateMessage`'s parameters for `m`, named as in the generated statement and in its
/// order: the one list of a message row's fields both bulk paths use. Destructured
/// without `..`: a column added to the generated statement stops this from compiling
/// instead of being left out.
fn message_fields<'r>(
    m: &'r CreateMessageParams<'r>,
) -> [(&'static str, Field<'r>); MESSAGE_PARAMS] {
    let CreateMessageParams {
        id,
        session_id,
        parent_id,
        role,
        agent,
        provider,
        model,
        finish_reason,
        is_summary,
        input_tokens,
        output_tokens,
        cache_read_tokens,
        cache_write_tokens,
        reasoning_tokens,
        cost_usd,
        error,
        created_at,
        updated_at,
        finished_at,
    } = *m;
    [
        ("id", Field::Text(id)),
        ("session_id", Field::Text(session_id)),
        ("parent_id", Field::MaybeText(parent_id)),
        ("role", Field::Text(role)),
        ("agent", Field::MaybeText(agent)),
        ("provider", Field::MaybeText(provider)),
        ("model", Field::MaybeText(model)),
        ("finish_reason", Field::MaybeText(finish_reason)),
        ("is_summary", Field::Bool(is_summary)),
        ("input_tokens", Field::Int(input_tokens)),
        ("output_tokens", Field::Int(output_tokens)),
        ("cache_read_tokens", Field::Int(cache_read_tokens)),
        ("cache_write_tokens", Field::Int(cache_write_tokens)),
        ("reasoning_tokens", Field::Int(reasoning_tokens)),
        ("cost_usd", Field::Real(cost_usd)),
        ("error", Field::MaybeText(error)),
        ("created_at", Field::Int(created_at)),
        ("updated_at", Field::Int(updated_at)),
        ("finished_at", Field::MaybeInt(finished_at)),
    ]
}

/// `CreatePart`'s parameters for `p`, as [`message_fields`] gives a message's.
fn part_fields<'r>(p: &'r CreatePartParams<'r>) -> [(&'static str, Field<'r>); PART_PARAMS] {
    let CreatePartParams {
        id,
        message_id,
        session_id,
        position,
        r#type,
        data,
        created_at,
        updated_at,
    } = *p;
    [
        ("id", Field::Text(id)),
        ("message_id", Field::Text(message_id)),
        ("session_id", Field::Text(session_id)),
        ("position", Field::Int(position)),
        ("type", Field::Text(r#type)),
        ("data", Field::Text(data)),
        ("created_at", Field::Int(created_at)),
        ("updated_at", Field::Int(updated_at)),
    ]
}

/// `rows` as a JSON object from each one's index (`"0"`, `"1"`, …) to an object of its
/// fields: the statements insert in key order.
fn indexed<'r, const N: usize>(
    rows: impl ExactSizeIterator<Item = [(&'static str, Field<'r>); N]>,
) -> Result<String> {
    /// One row's fields as a JSON object.
    struct Object<'r, const N: usize>([(&'static str, Field<'r>); N]);
    impl<const N: usize> Serialize for Object<'_, N> {
        fn serialize<S: Serializer>(&self, s: S) -> std::result::Result<S::Ok, S::Error> {
            s.collect_map(self.0.iter().map(|(name, value)| (*name, value)))
        }
    }
    let mut out = Vec::with_capacity(rows.len() * 256);
    let mut s = serde_json::Serializer::new(&mut out);
    s.collect_map(rows.enumerate().map(|(i, row)| (i, Object(row))))
        .map_err(|err| crate::Error::InvalidInput(format!("cannot encode rows: {err}")))?;
    String::from_utf8(out)
        .map_err(|err| crate::Error::InvalidInput(format!("cannot encode rows: {err}")))
}

/// Where the parts table ended when a bulk write began (see [`index_new_parts`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PartsMark(i64);

/// Marks the end of the parts table, in the write transaction `tx` before it inserts: the
/// parts it inserts after this can then be indexed at its end with [`index_new_parts`].
/// `None` where search indexing is not the writer's job (PostgreSQL keeps its indexes in
/// the write itself).
pub fn parts_mark(tx: &mut Tx<'_>) -> Result<Option<PartsMark>> {
    let Some(conn) = tx.conn() else {
        return Ok(None);
    };
    Ok(Some(PartsMark(search_index::last_part(conn)?)))
}

/// Indexes, in both SQLite full-text indexes and inside `tx`, every part `tx` inserted
/// since `mark` that is still waiting in the search queue, and takes it off the queue: the
/// bulk import's indexing, without a candidates query and a lookup per part, and without
/// indexing transactions of its own after the import. The V7 invariant (every searchable
/// part is either queued or indexed with its current text) holds before and after, so a
/// rollback of `tx` leaves nothing behind either. Call it after the transaction's last
/// insert: FTS5 writes its pending terms out at every later savepoint. Returns how many
/// parts left the queue.
pub fn index_new_parts(tx: &mut Tx<'_>, mark: PartsMark) -> Result<u64> {
    let Some(conn) = tx.conn() else {
        return Ok(0);
    };
    search_index::index_after(conn, mark.0)
}

/// Whether SQLite refused a row (a constraint), as against failing itself.
fn refused(err: &rusqlite::Error) -> bool {
    matches!(
        err,
        rusqlite::Error::SqliteFailure(failure, _)
            if failure.code == rusqlite::ErrorCode::ConstraintViolation
    )
}

fn insert_all(
    conn: &Connection,
    messages: &[CreateMessageParams<'_>],
    parts: &[CreatePartParams<'_>],
) -> rusqlite::Result<()> {
    insert_rows(conn, CREATE_MESSAGE_SQL, messages, message_fields)?;
    insert_rows(conn, CREATE_PART_SQL, parts, part_fields)
}

/// Inserts `rows` in statements of [`ROWS`] rows of the generated single-row statement
/// `generated`, in order.
fn insert_rows<'r, T, const N: usize>(
    conn: &Connection,
    generated: &str,
    mut rows: &'r [T],
    fields: impl Fn(&'r T) -> [(&'static str, Field<'r>); N],
) -> rusqlite::Result<()> {
    let mut values: Vec<Field<'r>> = Vec::with_capacity(ROWS[0] * N);
    for size in ROWS {
        if rows.len() < size {
            continue;
        }
        let Some(sql) = statement(generated, N, size) else {
            return Err(rusqlite::Error::InvalidQuery);
        };
        let mut stmt = conn.prepare_cached(&sql)?;
        while rows.len() >= size {
            let (now, rest) = rows.split_at(size);
            values.clear();
            for row in now {
                values.extend(fields(row).map(|(_, value)| value));
            }
            stmt.execute(rusqlite::params_from_iter(&values))?;
            rows = rest;
        }
    }
    Ok(())
}

/// The generated single-row INSERT `generated` (`… VALUES (?1, …, ?N)`) with `rows`
/// groups of values instead of one, so the table and its columns have one definition (the
/// query in sql/queries). `None` when `generated` is not of that shape.
fn statement(generated: &str, per_row: usize, rows: usize) -> Option<String> {
    let at = generated.rfind("VALUES")? + "VALUES".len();
    let (head, group) = generated.split_at(at);
    let inner = group.trim().strip_prefix('(')?.strip_suffix(')')?;
    let numbered = inner
        .split(',')
        .map(|p| p.trim().strip_prefix('?')?.parse::<usize>().ok())
        .collect::<Option<Vec<_>>>()?;
    if numbered != (1..=per_row).collect::<Vec<_>>() {
        return None;
    }
    let group = format!("({})", vec!["?"; per_row].join(", "));
    let mut sql = String::with_capacity(head.len() + rows * (group.len() + 2));
    sql.push_str(head);
    sql.push(' ');
    for i in 0..rows {
        if i > 0 {
            sql.push_str(", ");
        }
        sql.push_str(&group);
    }
    Some(sql)
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;
    use crate::Database;

    fn message<'a>(id: &'a str, session_id: &'a str, at: i64) -> CreateMessageParams<'a> {
        CreateMessageParams {
            id,
            session_id,
            parent_id: None,
            role: "user",
            agent: None,
            provider: None,
            model: None,
            finish_reason: None,
            is_summary: false,
            input_tokens: 1,
            output_tokens: 2,
            cache_read_tokens: 3,
            cache_write_tokens: 4,
            reasoning_tokens: 5,
            cost_usd: 0.5,
            error: None,
            created_at: at,
            updated_at: at,
            finished_at: None,
        }
    }

    fn part<'a>(
        id: &'a str,
        message_id: &'a str,
        session_id: &'a str,
        data: &'a str,
    ) -> CreatePartParams<'a> {
        CreatePartParams {
            id,
            message_id,
            session_id,
            position: 0,
            r#type: "text",
            data,
            created_at: 1,
            updated_at: 1,
        }
    }

    /// Every row of `table` as text, in rowid order.
    fn dump(db: &Database, sql: &str) -> Vec<String> {
        db.write(|tx: &mut Tx<'_>| {
            let conn = tx.conn().unwrap();
            let mut stmt = conn.prepare(sql)?;
            let n = stmt.column_count();
            let rows = stmt.query_map([], |r| {
                let mut row = Vec::new();
                for i in 0..n {
                    row.push(format!("{:?}", r.get_ref(i)?));
                }
                Ok(row.join("|"))
            })?;
            Ok::<_, crate::Error>(rows.collect::<rusqlite::Result<Vec<_>>>()?)
        })
        .unwrap()
    }

    /// How [`store`] inserts its rows.
    #[derive(Clone, Copy, PartialEq)]
    enum Way {
        /// The generated single-row statements, one row each.
        OneByOne,
        /// [`insert_messages`] (statements of many rows on SQLite).
        Bulk,
        /// The JSON statements, `CreateMessages` and `CreateParts` ([`messages_json`],
        /// [`parts_json`]): PostgreSQL's bulk path, in SQLite's spelling.
        Json,
    }

    /// A message with every optional field set, of another role, a summary, with an
    /// error and a cost that is not a round number.
    fn full_message<'a>(
        id: &'a str,
        session_id: &'a str,
        parent_id: &'a str,
        at: i64,
    ) -> CreateMessageParams<'a> {
        CreateMessageParams {
            parent_id: Some(parent_id),
            role: "assistant",
            agent: Some("build"),
            provider: Some("anthropic"),
            model: Some("claude-sonnet"),
            finish_reason: Some("end_turn"),
            is_summary: true,
            input_tokens: 1_000_000_000_007,
            cost_usd: FULL_COST,
            error: Some(r#"{"kind":"api","message":"überlastet"}"#),
            finished_at: Some(at + 5),
            ..message(id, session_id, at)
        }
    }

    /// [`full_message`]'s cost: all of an `f64`'s significant digits.
    const FULL_COST: f64 = 0.123_456_789_012_345_6;

    fn store(way: Way, count: usize) -> Database {
        let db = Database::open_in_memory().unwrap();
        let ids: Vec<String> = (0..count).map(|i| format!("msg_{i:04}")).collect();
        let part_ids: Vec<String> = (0..count).map(|i| format!("prt_{i:04}")).collect();
        let data = r#"{"type":"text","text":"hello"}"#;
        db.write(|tx: &mut Tx<'_>| {
            tx.conn().unwrap().execute(
                "INSERT INTO sessions (id, created_at, updated_at) VALUES ('ses_1', 0, 0)",
                [],
            )?;
            // Every third message has every optional field set, its parent the one before.
            let messages: Vec<_> = ids
                .iter()
                .enumerate()
                .map(|(i, id)| match i {
                    0 => message(id, "ses_1", 10),
                    _ if i % 3 == 0 => full_message(id, "ses_1", &ids[i - 1], 10 + i as i64),
                    _ => message(id, "ses_1", 10 + i as i64),
                })
                .collect();
            let parts: Vec<_> = ids
                .iter()
                .zip(&part_ids)
                .map(|(m, p)| part(p, m, "ses_1", data))
                .collect();
            match way {
                Way::Bulk => assert_eq!(insert_messages(tx, &messages, &parts)?, Bulk::Inserted),
                Way::Json => {
                    tx.q().create_messages(&messages_json(&messages)?)?;
                    tx.q().create_parts(&parts_json(&parts)?)?;
                }
                Way::OneByOne => {
                    for m in &messages {
                        tx.q().create_message(m)?;
                    }
                    for p in &parts {
                        tx.q().create_part(p)?;
                    }
                }
            }
            Ok::<_, crate::Error>(())
        })
        .unwrap();
        db
    }

    /// What tells two ways of storing the same rows apart: every column of the tables
    /// written and of those their triggers write, in insertion order.
    const DUMPS: [&str; 4] = [
        "SELECT * FROM messages ORDER BY rowid",
        "SELECT * FROM parts ORDER BY seq",
        "SELECT * FROM search_queue ORDER BY seq",
        "SELECT id, message_count, updated_at FROM sessions",
    ];

    #[test]
    fn many_rows_store_what_one_by_one_stores() {
        // 64 + 8 + 1 rows per statement and a remainder of each size.
        let count = 64 + 2 * 8 + 3;
        let (bulk, single) = (store(Way::Bulk, count), store(Way::OneByOne, count));
        for sql in DUMPS {
            assert_eq!(dump(&bulk, sql), dump(&single, sql), "{sql}");
        }
    }

    /// The JSON statements PostgreSQL's bulk path sends store, in SQLite's spelling too,
    /// exactly what the single-row statements store: every column, NULLs, a boolean, a
    /// 13-digit integer and a cost of 16 significant digits, in order.
    #[test]
    fn the_json_statements_store_what_one_by_one_stores() {
        let (json, single) = (store(Way::Json, 10), store(Way::OneByOne, 10));
        let messages = dump(&single, DUMPS[0]);
        assert!(
            messages[3].contains(&format!("Real({FULL_COST:?})"))
                && messages[3].contains("Integer(1000000000007)"),
            "{}",
            messages[3]
        );
        for sql in DUMPS {
            assert_eq!(dump(&json, sql), dump(&single, sql), "{sql}");
        }
    }

    #[test]
    fn a_refused_row_stores_nothing() {
        let db = store(Way::Bulk, 3);
        let data = r#"{"type":"text","text":"again"}"#;
        let outcome = db
            .write(|tx: &mut Tx<'_>| {
                // A new message, then a part whose id is taken.
                insert_messages(
                    tx,
                    &[message("msg_new", "ses_1", 99)],
                    &[part("prt_0001", "msg_new", "ses_1", data)],
                )
            })
            .unwrap();
        assert_eq!(outcome, Bulk::NotInserted);
        assert_eq!(dump(&db, "SELECT id FROM messages").len(), 3);
        assert_eq!(
            dump(&db, "SELECT message_count FROM sessions"),
            ["Integer(3)"]
        );
        // A missing session is refused too (foreign key).
        let outcome = db
            .write(|tx: &mut Tx<'_>| insert_messages(tx, &[message("msg_x", "ses_nope", 1)], &[]))
            .unwrap();
        assert_eq!(outcome, Bulk::NotInserted);
        assert_eq!(dump(&db, "SELECT id FROM messages").len(), 3);
    }

    fn part_at<'a>(
        id: &'a str,
        message_id: &'a str,
        position: i64,
        kind: &'a str,
        data: &'a str,
    ) -> CreatePartParams<'a> {
        CreatePartParams {
            position,
            r#type: kind,
            ..part(id, message_id, "ses_1", data)
        }
    }

    /// The first column of `sql`'s rows, as text.
    fn texts(db: &Database, sql: &str) -> Vec<String> {
        db.write(|tx: &mut Tx<'_>| {
            let conn = tx.conn().unwrap();
            let mut stmt = conn.prepare(sql)?;
            let rows = stmt.query_map([], |r| r.get::<_, String>(0))?;
            Ok::<_, crate::Error>(rows.collect::<rusqlite::Result<Vec<_>>>()?)
        })
        .unwrap()
    }

    /// Part ids the index `table` finds for `query`.
    fn hits(db: &Database, table: &str, query: &str) -> Vec<String> {
        texts(
            db,
            &format!(
                "SELECT p.id FROM {table} JOIN parts AS p ON p.seq = {table}.rowid \
                 WHERE {table} MATCH '{query}' ORDER BY p.id"
            ),
        )
    }

    #[test]
    fn new_parts_are_indexed_in_their_transaction_and_older_ones_stay_queued() {
        // One part queued before, by an ordinary write.
        let db = store(Way::OneByOne, 1);
        assert_eq!(dump(&db, "SELECT seq FROM search_queue").len(), 1);
        let words = r#"{"type":"text","text":"heron in the reeds"}"#;
        let cjk = r#"{"type":"text","text":"批量索引 heron"}"#;
        let tool = r#"{"type":"tool","tool":"bash","input":{"command":"ls"},"state":{"status":"completed","output":"heron.txt"}}"#;
        let finish = r#"{"type":"finish","reason":"end_turn"}"#;
        let indexed = db
            .write(|tx: &mut Tx<'_>| {
                let mark = parts_mark(tx)?.expect("sqlite");
                assert_eq!(
                    insert_messages(
                        tx,
                        &[message("msg_a", "ses_1", 50), message("msg_b", "ses_1", 51)],
                        &[
                            part_at("prt_a0", "msg_a", 0, "text", words),
                            part_at("prt_a1", "msg_a", 1, "finish", finish),
                            part_at("prt_b0", "msg_b", 0, "text", cjk),
                            part_at("prt_b1", "msg_b", 1, "tool", tool),
                        ],
                    )?,
                    Bulk::Inserted
                );
                index_new_parts(tx, mark)
            })
            .unwrap();
        // The three searchable new parts left the queue; the older one is still waiting.
        assert_eq!(indexed, 3);
        assert_eq!(
            texts(
                &db,
                "SELECT p.id FROM search_queue JOIN parts AS p USING (seq)"
            ),
            ["prt_0000"]
        );
        assert_eq!(
            hits(&db, "parts_fts", "heron"),
            ["prt_a0", "prt_b0", "prt_b1"]
        );
        assert_eq!(hits(&db, "parts_fts_trigram", "批量索"), ["prt_b0"]);
        // FTS5's term buffer is back at its default, and everything checks out (the
        // indexes against the rows, the queue against the indexes).
        for index in ["parts_fts", "parts_fts_trigram"] {
            assert_eq!(
                texts(
                    &db,
                    &format!("SELECT CAST(v AS TEXT) FROM {index}_config WHERE k = 'hashsize'")
                ),
                ["1048576"]
            );
        }
        let report = db.check().unwrap();
        assert!(report.is_ok(), "{:?}", report.problems());
    }

    #[test]
    fn a_rolled_back_bulk_write_leaves_neither_rows_nor_index_entries() {
        let db = store(Way::OneByOne, 1);
        let data = r#"{"type":"text","text":"heron in the reeds"}"#;
        let failed = db.write(|tx: &mut Tx<'_>| {
            let mark = parts_mark(tx)?.expect("sqlite");
            insert_messages(
                tx,
                &[message("msg_a", "ses_1", 50)],
                &[part("prt_a0", "msg_a", "ses_1", data)],
            )?;
            index_new_parts(tx, mark)?;
            Err::<(), _>(crate::Error::InvalidInput("stop here".into()))
        });
        assert!(failed.is_err());
        assert!(hits(&db, "parts_fts", "heron").is_empty());
        assert_eq!(dump(&db, "SELECT seq FROM search_queue").len(), 1);
        assert_eq!(dump(&db, "SELECT id FROM parts").len(), 1);
        let report = db.check().unwrap();
        assert!(report.is_ok(), "{:?}", report.problems());
    }

    #[test]
    fn statements_have_one_group_per_row() {
        let sql = statement("INSERT INTO t (a, b) VALUES (?1, ?2)", 2, 3);
        assert_eq!(
            sql.as_deref(),
            Some("INSERT INTO t (a, b) VALUES (?, ?), (?, ?), (?, ?)")
        );
        // Anything but `?1 … ?N` in order is not expanded (the caller stores one by one).
        assert_eq!(
            statement("INSERT INTO t (a, b) VALUES (?2, ?1)", 2, 3),
            None
        );
        assert_eq!(
            statement("INSERT INTO t (a) VALUES (?1) RETURNING *", 1, 3),
            None
        );
        assert_eq!(
            statement("INSERT INTO t (a, b) VALUES (?1, ?2)", 3, 3),
            None
        );
    }

    #[test]
    fn the_generated_inserts_expand() {
        // If sql/queries changes CreateMessage/CreatePart's shape, the bulk path must be
        // told, not silently fall back to one row per statement.
        assert!(statement(CREATE_MESSAGE_SQL, MESSAGE_PARAMS, 64).is_some());
        assert!(statement(CREATE_PART_SQL, PART_PARAMS, 64).is_some());
    }
}
