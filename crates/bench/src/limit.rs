//! The limit: the simplest raw rusqlite program that stores a conversation with word
//! search, as issue 14 specifies it. Every target of the report is a ratio against it.
//!
//! WAL, `synchronous=NORMAL`, foreign keys on; a session table with a message counter kept
//! by an AFTER INSERT trigger; one `messages` row per message holding its parts as one
//! JSON array; an index on `(session_id, created_at)`; one FTS5 table (default tokenizer,
//! which keeps its own copy of the text) filled by an AFTER INSERT trigger with the first
//! part's text. Append is one autocommit prepared INSERT per message; search is `MATCH`,
//! top 20 by bm25 with `snippet()`, joined back to messages; load is a session's messages
//! by `created_at` with their parts JSON decoded.
//!
//! It has no trigram index (no CJK or substring search), no per-part rows, no usage
//! columns and no search over tool calls: it is what the same data costs with nothing
//! but word search on top.

use std::path::Path;
use std::time::Duration;

use rusqlite::{Connection, params};
use scribe_db::ids::{Prefix, new_id};
use scribe_db::now_ms;
use scribe_message::{Part, Role};

use crate::Result;
use crate::append::Draft;

/// The limit's schema.
pub const SCHEMA: &str = "
CREATE TABLE IF NOT EXISTS sessions (
    id TEXT PRIMARY KEY,
    title TEXT,
    message_count INTEGER NOT NULL DEFAULT 0,
    created_at INTEGER NOT NULL,
    updated_at INTEGER NOT NULL
);
CREATE TABLE IF NOT EXISTS messages (
    id TEXT PRIMARY KEY,
    session_id TEXT NOT NULL REFERENCES sessions (id) ON DELETE CASCADE,
    role TEXT NOT NULL,
    parts TEXT NOT NULL,
    model TEXT,
    created_at INTEGER NOT NULL,
    updated_at INTEGER NOT NULL
);
CREATE INDEX IF NOT EXISTS messages_session ON messages (session_id, created_at);
CREATE TRIGGER IF NOT EXISTS messages_count AFTER INSERT ON messages
BEGIN
    UPDATE sessions SET message_count = message_count + 1 WHERE id = new.session_id;
END;
CREATE VIRTUAL TABLE IF NOT EXISTS messages_fts USING fts5 (text);
CREATE TRIGGER IF NOT EXISTS messages_fts_insert AFTER INSERT ON messages
BEGIN
    INSERT INTO messages_fts (rowid, text) VALUES (new.rowid, json_extract(new.parts, '$[0].text'));
END;
";

const INSERT: &str =
    "INSERT INTO messages (id, session_id, role, parts, model, created_at, updated_at)
VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)";

const SEARCH: &str = "SELECT m.id, m.session_id, m.role, m.created_at,
    snippet(messages_fts, 0, '>>>', '<<<', '…', 24), messages_fts.rank
FROM messages_fts JOIN messages AS m ON m.rowid = messages_fts.rowid
WHERE messages_fts MATCH ?1 ORDER BY messages_fts.rank LIMIT 20";

const LOAD: &str = "SELECT id, role, parts, model, created_at, updated_at
FROM messages WHERE session_id = ?1 ORDER BY created_at";

/// Opens (creating) a limit database with its pragmas and schema.
pub fn open(path: &Path, busy_timeout: Duration) -> Result<Connection> {
    let conn = Connection::open(path)?;
    conn.busy_timeout(busy_timeout)?;
    conn.pragma_update(None, "journal_mode", "WAL")?;
    conn.pragma_update(None, "synchronous", "NORMAL")?;
    conn.pragma_update(None, "foreign_keys", true)?;
    conn.execute_batch(SCHEMA)?;
    Ok(conn)
}

/// Creates a session; returns its id.
pub fn create_session(conn: &Connection, title: &str) -> Result<String> {
    let id = new_id(Prefix::Session);
    let now = now_ms();
    conn.execute(
        "INSERT INTO sessions (id, title, created_at, updated_at) VALUES (?1, ?2, ?3, ?3)",
        params![id, title, now],
    )?;
    Ok(id)
}

/// Appends one message: one autocommit INSERT (the parts encoded as one JSON array).
pub fn append(conn: &Connection, session: &str, draft: &Draft) -> Result<()> {
    append_at(conn, session, draft, now_ms())
}

/// [`append`] with a given creation time (the corpus interleaves sessions in time).
pub fn append_at(conn: &Connection, session: &str, draft: &Draft, time: i64) -> Result<()> {
    let (role, parts) = draft;
    let json = serde_json::to_string(parts)?;
    let model = (*role == Role::Assistant).then_some("claude-bench");
    conn.prepare_cached(INSERT)?.execute(params![
        new_id(Prefix::Message),
        session,
        role.as_str(),
        json,
        model,
        time,
        time,
    ])?;
    Ok(())
}

/// One search: the hits' columns and snippets, read into tuples.
pub fn search(conn: &Connection, expr: &str) -> Result<usize> {
    let mut stmt = conn.prepare_cached(SEARCH)?;
    let rows = stmt.query_map([expr], |r| {
        Ok((
            r.get::<_, String>(0)?,
            r.get::<_, String>(1)?,
            r.get::<_, String>(2)?,
            r.get::<_, i64>(3)?,
            r.get::<_, Option<String>>(4)?,
            r.get::<_, f64>(5)?,
        ))
    })?;
    Ok(rows.collect::<rusqlite::Result<Vec<_>>>()?.len())
}

/// A loaded message: id, role, parts, model, times.
type LoadedMessage = (String, String, Vec<Part>, Option<String>, i64, i64);

/// Loads a session's messages in creation order with their parts decoded (into the same
/// typed `Part`s Scribe returns).
pub fn load(conn: &Connection, session: &str) -> Result<usize> {
    let mut stmt = conn.prepare_cached(LOAD)?;
    let mut rows = stmt.query([session])?;
    let mut out: Vec<LoadedMessage> = Vec::new();
    while let Some(r) = rows.next()? {
        let parts: Vec<Part> = serde_json::from_str(r.get_ref(2)?.as_str()?)?;
        out.push((r.get(0)?, r.get(1)?, parts, r.get(3)?, r.get(4)?, r.get(5)?));
    }
    Ok(std::hint::black_box(out).len())
}

/// Messages stored.
pub fn count(conn: &Connection) -> Result<usize> {
    let n: i64 = conn.query_row("SELECT count(*) FROM messages", [], |r| r.get(0))?;
    Ok(usize::try_from(n)?)
}
