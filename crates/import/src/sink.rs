//! The sink: the one place where imported history is written to Scribe's database.
//!
//! Readers produce [`Batch`]es keyed by the source's own ids; a [`Sink`] stores one batch
//! per transaction and answers what earlier imports recorded. Everything that touches the
//! store is in this module, behind the three methods of [`Sink`], so a change of the
//! services' transaction API (or a bulk index-building path) is a change here only.
//!
//! [`StoreSink`] writes through the session and message crates' transaction-level
//! functions (`SessionService::upsert_external_tx`, `add_usage_at_tx`, `get_tx`,
//! `scribe_message::store::import_message`, `insert_part`,
//! `MessageService::update_part_tx`) and the importer's own state tables
//! (`import_files`, `import_sessions`, V6). [`DryRunSink`] reads that state and writes
//! nothing.

use std::collections::HashMap;
use std::sync::Arc;

use scribe_db::Database;
use scribe_db::queries as q;
use scribe_db::rusqlite::{Connection, OptionalExtension};
use scribe_message::store::{self, Imported};
use scribe_message::{MessageError, StoredPart, TokenUsage};
use scribe_session::{ExternalSession, SessionKind, SessionService, UsageDelta};

use crate::Source;
use crate::error::{ImportError, Result};
use crate::pricing::{self, REPORTED};
use crate::record::{Batch, Resume, SessionRec};

/// What an earlier import recorded about a file.
#[derive(Debug, Clone, PartialEq)]
pub struct FileState {
    /// Its size then.
    pub size: i64,
    /// Its modification time then (ns).
    pub mtime_ns: i64,
    /// Where reading stopped.
    pub resume: Resume,
}

/// What one [`Sink::commit`] wrote.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Written {
    /// Sessions created.
    pub sessions_created: u64,
    /// Sessions already there, brought up to date.
    pub sessions_updated: u64,
    /// Messages added.
    pub messages_inserted: u64,
    /// Messages already there, merged with what was read again.
    pub messages_merged: u64,
    /// Messages another session already holds (replayed history), left there.
    pub messages_replayed: u64,
    /// Parts changed after the fact (tool results).
    pub parts_updated: u64,
}

impl std::ops::AddAssign for Written {
    fn add_assign(&mut self, o: Written) {
        self.sessions_created += o.sessions_created;
        self.sessions_updated += o.sessions_updated;
        self.messages_inserted += o.messages_inserted;
        self.messages_merged += o.messages_merged;
        self.messages_replayed += o.messages_replayed;
        self.parts_updated += o.parts_updated;
    }
}

/// Where imported history goes.
pub trait Sink: std::fmt::Debug {
    /// What the last imports recorded about every file of `source`, by path (one query,
    /// so checking a file costs one `stat` and a map lookup).
    fn files(&self, source: Source) -> Result<HashMap<String, FileState>>;
    /// The fingerprint recorded for an imported session (database sources).
    fn fingerprint(&self, source: Source, external_id: &str) -> Result<Option<String>>;
    /// Stores `batch` (records of `source`) in one transaction: all of it or nothing.
    fn commit(&mut self, source: Source, batch: &Batch) -> Result<Written>;
}

/// Writes into a Scribe database.
#[derive(Debug, Clone)]
pub struct StoreSink {
    db: Arc<Database>,
}

impl StoreSink {
    /// A sink writing into `db`.
    pub fn new(db: Arc<Database>) -> Self {
        StoreSink { db }
    }
}

/// Writes nothing: reads the recorded state and counts what a commit would store.
#[derive(Debug, Clone)]
pub struct DryRunSink {
    db: Option<Arc<Database>>,
}

impl DryRunSink {
    /// A dry run against the state recorded in `db` (none: as if nothing was imported).
    pub fn new(db: Option<Arc<Database>>) -> Self {
        DryRunSink { db }
    }
}

fn file_states(conn: &Connection, source: Source) -> Result<HashMap<String, FileState>> {
    let rows = q::list_import_files(conn, source.name())?;
    Ok(rows
        .into_iter()
        .map(|r| {
            let state = FileState {
                size: r.size,
                mtime_ns: r.mtime_ns,
                resume: Resume {
                    offset: u64::try_from(r.byte_offset).unwrap_or(0),
                    lines: u64::try_from(r.lines).unwrap_or(0),
                    carry: r.carry.and_then(|c| serde_json::from_str(&c).ok()),
                },
            };
            (r.path, state)
        })
        .collect())
}

fn fingerprint_of(conn: &Connection, source: Source, external_id: &str) -> Result<Option<String>> {
    Ok(q::get_import_session(
        conn,
        &q::GetImportSessionParams {
            source: source.name(),
            external_id,
        },
    )
    .optional()?
    .and_then(|r| r.fingerprint))
}

impl Sink for StoreSink {
    fn files(&self, source: Source) -> Result<HashMap<String, FileState>> {
        read(&self.db, |conn| file_states(conn, source))
    }

    fn fingerprint(&self, source: Source, external_id: &str) -> Result<Option<String>> {
        read(&self.db, |conn| fingerprint_of(conn, source, external_id))
    }

    fn commit(&mut self, source: Source, batch: &Batch) -> Result<Written> {
        if batch.is_empty() {
            return Ok(Written::default());
        }
        write(&self.db, |tx| commit_tx(tx, source, batch))
    }
}

impl Sink for DryRunSink {
    fn files(&self, source: Source) -> Result<HashMap<String, FileState>> {
        match &self.db {
            Some(db) => read(db, |conn| file_states(conn, source)),
            None => Ok(HashMap::new()),
        }
    }

    fn fingerprint(&self, source: Source, external_id: &str) -> Result<Option<String>> {
        match &self.db {
            Some(db) => read(db, |conn| fingerprint_of(conn, source, external_id)),
            None => Ok(None),
        }
    }

    fn commit(&mut self, _source: Source, batch: &Batch) -> Result<Written> {
        Ok(Written {
            sessions_created: batch.sessions.len() as u64,
            messages_inserted: batch.messages.len() as u64,
            parts_updated: batch.part_updates.len() as u64,
            ..Written::default()
        })
    }
}

/// Runs `f` in one write transaction, keeping `f`'s own error; database errors pass
/// through so busy ones are retried.
fn write<T>(db: &Database, mut f: impl FnMut(&Connection) -> Result<T>) -> Result<T> {
    let mut failure = None;
    let outcome = db.write(|tx| {
        failure = None;
        match f(tx) {
            Ok(v) => Ok(v),
            Err(ImportError::Db(err)) => Err(err),
            Err(other) => {
                failure = Some(other);
                Err(scribe_db::Error::InvalidInput("rolled back".to_owned()))
            }
        }
    });
    match outcome {
        Ok(v) => Ok(v),
        Err(err) => Err(failure.take().unwrap_or(ImportError::Db(err))),
    }
}

fn read<T>(db: &Database, mut f: impl FnMut(&Connection) -> Result<T>) -> Result<T> {
    let mut failure = None;
    let outcome = db.read(|conn| {
        failure = None;
        match f(conn) {
            Ok(v) => Ok(v),
            Err(ImportError::Db(err)) => Err(err),
            Err(other) => {
                failure = Some(other);
                Err(scribe_db::Error::InvalidInput("aborted".to_owned()))
            }
        }
    });
    match outcome {
        Ok(v) => Ok(v),
        Err(err) => Err(failure.take().unwrap_or(ImportError::Db(err))),
    }
}

/// Usage to add to one session.
#[derive(Default)]
struct Pending {
    delta: UsageDelta,
    at: i64,
}

fn commit_tx(conn: &Connection, source: Source, batch: &Batch) -> Result<Written> {
    let now = scribe_db::now_ms();
    let mut written = Written::default();
    // Cost bits of this batch's messages, per session.
    let mut flags: HashMap<&str, u8> = HashMap::new();
    for m in &batch.messages {
        *flags.entry(m.session.as_str()).or_default() |= m.cost_flags;
    }
    for s in &batch.sessions {
        if let Some(u) = &s.usage_total {
            *flags.entry(s.external_id.as_str()).or_default() |= u.cost_flags;
        }
    }
    let mut ids: HashMap<String, String> = HashMap::new();
    let path = batch.files.first().map_or("", |f| f.path.as_str());
    // Messages by session, in file order; each session is written before its messages,
    // so a later session of the batch can find them (a `--resume` continuation).
    let mut by_session: HashMap<&str, Vec<usize>> = HashMap::new();
    for (i, m) in batch.messages.iter().enumerate() {
        by_session.entry(m.session.as_str()).or_default().push(i);
    }
    let mut usage: HashMap<String, Pending> = HashMap::new();
    for rec in &batch.sessions {
        let (id, created) = upsert_session(
            conn,
            source,
            rec,
            flags.get(rec.external_id.as_str()).copied().unwrap_or(0),
            path,
            now,
        )?;
        if created {
            written.sessions_created += 1;
        } else {
            written.sessions_updated += 1;
        }
        ids.insert(rec.external_id.clone(), id.clone());
        let mut replayed_from = None;
        for i in by_session
            .remove(rec.external_id.as_str())
            .unwrap_or_default()
        {
            let other = store_message(
                conn,
                source,
                &batch.messages[i],
                &mut ids,
                &mut usage,
                &mut written,
            )?;
            replayed_from = replayed_from.or(other);
        }
        // A new conversation whose first records another session already holds was
        // resumed from it (Claude Code `--resume` replays them into the new file).
        if let Some(other) = replayed_from
            && created
            && rec.parent.is_none()
            && other != id
        {
            let session = SessionService::get_tx(conn, &id)?;
            if session.parent_session_id.is_none() {
                link(conn, &session, other, SessionKind::Continuation)?;
            }
        }
    }
    let mut rest: Vec<usize> = by_session.into_values().flatten().collect();
    rest.sort_unstable();
    for i in rest {
        store_message(
            conn,
            source,
            &batch.messages[i],
            &mut ids,
            &mut usage,
            &mut written,
        )?;
    }

    for up in &batch.part_updates {
        if session_id(conn, source, &up.session, &mut ids)?.is_none() {
            continue;
        }
        let part = StoredPart {
            id: up.part_id.clone(),
            position: up.position,
            part: up.part.clone(),
            created_at: up.at,
            updated_at: up.at,
        };
        match store::import_part(conn, &up.message_id, &part) {
            Ok(true) => written.parts_updated += 1,
            Ok(false) => {}
            // Its message is not stored (read from a file not imported) or the position is
            // taken by another part: the result has nowhere to go.
            Err(MessageError::NotFound { .. } | MessageError::InvalidInput(_)) => {}
            Err(err) => return Err(err.into()),
        }
    }

    for rec in &batch.sessions {
        let Some(total) = &rec.usage_total else {
            continue;
        };
        let Some(id) = ids.get(&rec.external_id) else {
            continue;
        };
        let current = SessionService::get_tx(conn, id)?;
        let entry = usage.entry(id.clone()).or_default();
        let d = &mut entry.delta;
        d.tokens += positive(total.tokens, current.tokens);
        d.api_calls += (total.api_calls - current.api_call_count).max(0);
        let cost = (total.cost_usd - current.estimated_cost_usd).max(0.0);
        d.cost_usd += cost;
        if total.cost_flags & REPORTED != 0 && cost > 0.0 {
            *d.actual_cost_usd.get_or_insert(0.0) += cost;
        }
        entry.at = entry.at.max(rec.updated_at);
    }
    // Every session touched gets its usage and its last activity as the source says (the
    // message triggers moved updated_at to the time of this write).
    for rec in &batch.sessions {
        if let Some(id) = ids.get(&rec.external_id) {
            let entry = usage.entry(id.clone()).or_default();
            entry.at = entry.at.max(rec.updated_at);
        }
    }
    for (id, pending) in &usage {
        SessionService::add_usage_at_tx(conn, id, &pending.delta, pending.at)?;
    }

    for file in &batch.files {
        let carry = file.resume.carry.as_ref().map(serde_json::Value::to_string);
        q::upsert_import_file(
            conn,
            &q::UpsertImportFileParams {
                source: source.name(),
                path: &file.path,
                size: file.size,
                mtime_ns: file.mtime_ns,
                byte_offset: i64::try_from(file.resume.offset).unwrap_or(i64::MAX),
                lines: i64::try_from(file.resume.lines).unwrap_or(i64::MAX),
                carry: carry.as_deref(),
                records: file.records,
                skipped: file.skipped,
                imported_at: now,
            },
        )?;
    }
    link_pending_parents(conn, source, now)?;
    Ok(written)
}

/// Stores one message and notes the usage it adds to its session; returns the session
/// that already holds it, when another one does.
fn store_message(
    conn: &Connection,
    source: Source,
    rec: &crate::record::MessageRec,
    ids: &mut HashMap<String, String>,
    usage: &mut HashMap<String, Pending>,
    written: &mut Written,
) -> Result<Option<String>> {
    let Some(session_id) = session_id(conn, source, &rec.session, ids)? else {
        return Ok(None);
    };
    let mut msg = rec.message.clone();
    msg.session_id.clone_from(&session_id);
    let (before, cost_before, calls) = match store::import_message(conn, &msg)? {
        Imported::Inserted => {
            written.messages_inserted += 1;
            (TokenUsage::default(), 0.0, rec.api_calls)
        }
        Imported::Merged { usage, cost_usd } => {
            written.messages_merged += 1;
            (usage, cost_usd, 0)
        }
        Imported::InOtherSession { session_id } => {
            written.messages_replayed += 1;
            return Ok(Some(session_id));
        }
    };
    let entry = usage.entry(session_id).or_default();
    let d = &mut entry.delta;
    d.tokens += positive(msg.usage, before);
    d.api_calls += calls;
    let cost = (msg.cost_usd - cost_before).max(0.0);
    d.cost_usd += cost;
    if rec.cost_flags & REPORTED != 0 && cost > 0.0 {
        *d.actual_cost_usd.get_or_insert(0.0) += cost;
    }
    entry.at = entry.at.max(msg.updated_at).max(msg.created_at);
    Ok(None)
}

/// Makes `child` a `kind` child of `parent` (both stored).
fn link(
    conn: &Connection,
    child: &scribe_session::Session,
    parent: String,
    kind: SessionKind,
) -> Result<()> {
    let external = ExternalSession {
        id: child.id.clone(),
        parent_session_id: Some(parent),
        kind,
        source: child.source.clone(),
        directory: None,
        title: None,
        model: None,
        model_config: None,
        system_prompt: None,
        billing_provider: None,
        billing_base_url: None,
        cost_status: None,
        cost_source: None,
        created_at: child.created_at,
        updated_at: child.updated_at,
        ended_at: None,
        end_reason: None,
    };
    SessionService::upsert_external_tx(conn, &external)?;
    Ok(())
}

/// `new - old`, field by field, never below zero (usage only grows).
fn positive(new: TokenUsage, old: TokenUsage) -> TokenUsage {
    TokenUsage {
        input: (new.input - old.input).max(0),
        output: (new.output - old.output).max(0),
        cache_read: (new.cache_read - old.cache_read).max(0),
        cache_write: (new.cache_write - old.cache_write).max(0),
        reasoning: (new.reasoning - old.reasoning).max(0),
    }
}

/// The Scribe id of `external` (from this batch or an earlier import).
fn session_id(
    conn: &Connection,
    source: Source,
    external: &str,
    ids: &mut HashMap<String, String>,
) -> Result<Option<String>> {
    if let Some(id) = ids.get(external) {
        return Ok(Some(id.clone()));
    }
    let row = q::get_import_session(
        conn,
        &q::GetImportSessionParams {
            source: source.name(),
            external_id: external,
        },
    )
    .optional()?;
    Ok(row.map(|r| {
        ids.insert(external.to_owned(), r.session_id.clone());
        r.session_id
    }))
}

/// Creates or updates the session of `rec`; returns its Scribe id and whether it is new.
fn upsert_session(
    conn: &Connection,
    source: Source,
    rec: &SessionRec,
    batch_flags: u8,
    path: &str,
    now: i64,
) -> Result<(String, bool)> {
    let known = q::get_import_session(
        conn,
        &q::GetImportSessionParams {
            source: source.name(),
            external_id: &rec.external_id,
        },
    )
    .optional()?;
    let id = match &known {
        Some(row) => row.session_id.clone(),
        // The source's id, unless a session that is not this one already has it.
        None if q::session_exists(conn, &rec.external_id)? => {
            format!("{}-{}", source.name(), rec.external_id)
        }
        None => rec.external_id.clone(),
    };
    let mut kind = rec.kind;
    let mut parent = None;
    let mut pending = None;
    if let Some(p) = &rec.parent {
        let row = q::get_import_session(
            conn,
            &q::GetImportSessionParams {
                source: source.name(),
                external_id: p,
            },
        )
        .optional()?;
        match row {
            Some(row) if row.session_id != id => parent = Some(row.session_id),
            Some(_) => {}
            None => pending = Some(p.clone()),
        }
    }
    if parent.is_none()
        && let Some(message_id) = &rec.continues_from
        && let Some(row) = q::get_message(conn, message_id).optional()?
        && row.session_id != id
    {
        parent = Some(row.session_id);
        kind = SessionKind::Continuation;
    }
    let stored_rank = known.as_ref().map_or(0, |r| r.title_rank);
    let title = rec
        .title
        .as_ref()
        .filter(|(_, rank)| *rank as i64 >= stored_rank)
        .map(|(t, _)| t.clone());
    let title_rank = match &title {
        Some(_) => rec.title.as_ref().map_or(0, |(_, r)| *r as i64),
        None => stored_rank,
    };
    let cost_flags = known.as_ref().map_or(0, |r| r.cost_flags as u8) | batch_flags;
    let external = ExternalSession {
        id: id.clone(),
        parent_session_id: parent,
        kind,
        source: source.name().to_owned(),
        directory: rec.directory.clone(),
        title,
        model: rec.model.clone(),
        model_config: rec.model_config.clone(),
        system_prompt: rec.system_prompt.clone(),
        billing_provider: rec.billing_provider.clone(),
        billing_base_url: None,
        cost_status: pricing::status(cost_flags).map(str::to_owned),
        cost_source: pricing::source(cost_flags, source.name()),
        created_at: rec.created_at,
        updated_at: rec.updated_at,
        ended_at: rec.ended_at,
        end_reason: rec.end_reason.clone(),
    };
    let external = match SessionService::upsert_external_tx(conn, &external) {
        Err(scribe_session::SessionError::InvalidTitle { .. }) => {
            // A title that normalizes to nothing is no title.
            let mut untitled = external;
            untitled.title = None;
            SessionService::upsert_external_tx(conn, &untitled)
        }
        other => other,
    };
    let (_, created) = external?;
    let path = if path.is_empty() {
        known.as_ref().map_or(String::new(), |r| r.path.clone())
    } else {
        path.to_owned()
    };
    let path = path.as_str();
    match known {
        None => q::insert_import_session(
            conn,
            &q::InsertImportSessionParams {
                session_id: &id,
                source: source.name(),
                external_id: &rec.external_id,
                path,
                title_rank,
                cost_flags: i64::from(cost_flags),
                pending_parent: pending.as_deref(),
                fingerprint: rec.fingerprint.as_deref(),
                imported_at: now,
            },
        )?,
        Some(row) => q::update_import_session(
            conn,
            &q::UpdateImportSessionParams {
                path,
                title_rank,
                cost_flags: i64::from(cost_flags),
                pending_parent: if rec.parent.is_some() {
                    pending.as_deref()
                } else {
                    row.pending_parent.as_deref()
                },
                fingerprint: rec.fingerprint.as_deref().or(row.fingerprint.as_deref()),
                imported_at: now,
                session_id: &id,
            },
        )?,
    }
    Ok((id, created))
}

/// Links sessions whose parent was imported after them.
fn link_pending_parents(conn: &Connection, source: Source, now: i64) -> Result<()> {
    for row in q::list_pending_parents(conn)? {
        if row.source != source.name() {
            continue;
        }
        let Some(parent) = row.parent_session_id else {
            continue;
        };
        let child = SessionService::get_tx(conn, &row.session_id)?;
        if parent != child.id {
            link(conn, &child, parent, child.kind)?;
        }
        let known = q::get_import_session_by_id(conn, &row.session_id)?;
        q::update_import_session(
            conn,
            &q::UpdateImportSessionParams {
                path: &known.path,
                title_rank: known.title_rank,
                cost_flags: known.cost_flags,
                pending_parent: None,
                fingerprint: known.fingerprint.as_deref(),
                imported_at: now,
                session_id: &row.session_id,
            },
        )?;
    }
    Ok(())
}
