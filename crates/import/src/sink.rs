//! The sink: the one place where imported history is written to Scribe's database.
//!
//! Readers produce [`Batch`]es keyed by the source's own ids; a [`Sink`] stores one batch
//! per transaction and answers what earlier imports recorded. Everything that touches the
//! store is in this module, behind the methods of [`Sink`], so a change of the
//! services' transaction API (or a bulk index-building path) is a change here only.
//!
//! [`StoreSink`] writes one batch per `Database::write` transaction, through the session
//! and message crates' transaction-level functions (`SessionService::upsert_external_tx`,
//! `add_usage_at_tx`, `get_tx`, `exists_tx`; `scribe_message::store::import_message`,
//! `import_part`, `message_session`) and the importer's own state tables
//! (`import_files`, `import_sessions`, V6), which only this module touches. The session
//! service queues `created` / `updated` for the sessions a batch wrote; they go out after
//! COMMIT. Messages are stored as `store` stores them, unannounced (as the session
//! crate's export import does). [`DryRunSink`] reads that state and writes nothing.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;

use scribe_db::queries as q;
use scribe_db::{Reads, Tx};
use scribe_message::store::{self, Imported};
use scribe_message::{Message, MessageError, Part, StoredPart, TokenUsage, ToolState};
use scribe_session::{ExternalSession, SessionKind, SessionService, Store, UsageDelta};

use crate::Source;
use crate::error::Result;
use crate::pricing::{self, ESTIMATED, Pricer, REPORTED, UNKNOWN};
use crate::record::{Batch, KeyMark, KeyTitle, MessageMark, Resume, SessionRec};

/// What an earlier import recorded about a file.
#[derive(Debug, Clone, PartialEq)]
pub struct FileState {
    /// Its size then.
    pub size: i64,
    /// Its modification time then (ns).
    pub mtime_ns: i64,
    /// Bytes of complete records read.
    pub offset: u64,
    /// Lines read.
    pub lines: u64,
    /// The reader's state, as stored (JSON text): parsed only for a file read again
    /// ([`FileState::resume`]), so an import of unchanged history parses none.
    pub carry: Option<String>,
}

impl FileState {
    /// Where reading stopped, to go on from: the offset, the lines and the reader's state
    /// (a state that no longer parses is none: the reader starts its state afresh).
    pub fn resume(self) -> Resume {
        Resume {
            offset: self.offset,
            lines: self.lines,
            carry: self.carry.and_then(|c| serde_json::from_str(&c).ok()),
            more: false,
        }
    }
}

/// What one [`Sink::commit`] wrote.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
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
    /// The usage of what this commit took: its messages stored (added or merged) and its
    /// sessions' usage totals. Not the replayed messages another session holds (their
    /// usage is counted once, with it), nor records whose session has nowhere to go.
    pub usage: Counted,
}

/// The tokens and cost of what an import took ([`Written::usage`]).
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Counted {
    /// Tokens, by kind.
    pub tokens: TokenUsage,
    /// Their cost (reported or estimated), US dollars; without the unpriced ones.
    pub cost_usd: f64,
    /// Messages (or session totals) with usage of a model the pricing catalog does not
    /// know: their tokens are counted, their cost is unknown and not in `cost_usd`.
    pub unpriced: u64,
}

impl Counted {
    /// Counts a message taken.
    fn message(&mut self, rec: &crate::record::MessageRec) {
        self.add(&rec.message.usage, rec.message.cost_usd, rec.cost_flags);
    }

    /// Counts a session's usage total taken.
    fn session(&mut self, u: &crate::record::SessionUsage) {
        self.add(&u.tokens, u.cost_usd, u.cost_flags);
    }

    fn add(&mut self, tokens: &TokenUsage, cost_usd: f64, cost_flags: u8) {
        self.tokens += *tokens;
        self.cost_usd += cost_usd;
        self.unpriced += u64::from(cost_flags & UNKNOWN != 0);
    }
}

impl std::ops::AddAssign for Counted {
    fn add_assign(&mut self, o: Counted) {
        self.tokens += o.tokens;
        self.cost_usd += o.cost_usd;
        self.unpriced += o.unpriced;
    }
}

impl std::ops::AddAssign for Written {
    fn add_assign(&mut self, o: Written) {
        self.sessions_created += o.sessions_created;
        self.sessions_updated += o.sessions_updated;
        self.messages_inserted += o.messages_inserted;
        self.messages_merged += o.messages_merged;
        self.messages_replayed += o.messages_replayed;
        self.parts_updated += o.parts_updated;
        self.usage += o.usage;
    }
}

/// What one [`Sink::reprice`] priced.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Repriced {
    /// Sessions with usage priced.
    pub sessions: u64,
    /// Messages priced.
    pub messages: u64,
    /// What that usage costs, US dollars (added to the sessions' costs).
    pub cost_usd: f64,
}

/// Where imported history goes.
pub trait Sink: std::fmt::Debug {
    /// What the last imports recorded about every file of `source`, by path (one query,
    /// so checking a file costs one `stat` and a map lookup).
    fn files(&self, source: Source) -> Result<HashMap<String, FileState>>;
    /// The fingerprint recorded for an imported session (database sources).
    fn fingerprint(&self, source: Source, external_id: &str) -> Result<Option<String>>;
    /// The messages stored for an imported session, with their parts, in creation
    /// order; none when it is not stored. What a reader of a source that rewrites its
    /// transcripts (Hermes) matches a new read against. None by default.
    fn stored_conversation(&self, source: Source, external_id: &str) -> Result<Vec<Message>> {
        let _ = (source, external_id);
        Ok(Vec::new())
    }
    /// Stores `batch` (records of `source`) in one transaction: all of it or nothing.
    fn commit(&mut self, source: Source, batch: &Batch) -> Result<Written>;
    /// Prices with `pricer` the usage `source`'s sessions stored without a price (a model
    /// the catalog did not know when they were imported), in one transaction. [`import`]
    /// calls it first in every run, with the prices its commits then estimate with.
    /// Nothing by default; a dry run says what it would price.
    ///
    /// [`import`]: crate::import
    fn reprice(&mut self, source: Source, pricer: &Pricer) -> Result<Repriced> {
        let _ = (source, pricer);
        Ok(Repriced::default())
    }
    /// The end of an import run: whatever the run left to do in bulk (the store sink
    /// builds the search indexes for what it stored), reporting `(done, total)` parts as
    /// it goes. Nothing by default.
    fn finish(&mut self, progress: &mut dyn FnMut(u64, u64)) -> Result<()> {
        let _ = progress;
        Ok(())
    }
}

/// Writes into a Scribe store: the bulk path. While a run writes, the process's
/// background search indexer waits (the batches queue their parts for indexing, as every
/// write does); [`Sink::finish`] then builds both search indexes in a few large
/// transactions (`IndexBatch::BULK`), which costs far less than indexing between batches.
#[derive(Debug, Clone)]
pub struct StoreSink {
    store: Store,
    /// Held from the first commit of a run to its finish.
    paused: Option<Arc<scribe_db::IndexingPaused>>,
    /// The version of the prices the run's commits estimate with (from
    /// [`Sink::reprice`], which a run calls first): kept with the sessions they price.
    pricing_version: Option<String>,
}

impl StoreSink {
    /// A sink writing into `store` (its session service announces the sessions written).
    pub fn new(store: Store) -> Self {
        StoreSink {
            store,
            paused: None,
            pricing_version: None,
        }
    }
}

/// Writes nothing: reads what is stored and counts what a commit would change — net:
/// a message already stored (or counted earlier in this dry run) is not new, a session
/// the importer already created is updated, not created.
#[derive(Debug, Clone, Default)]
pub struct DryRunSink {
    store: Option<Store>,
    /// Sessions this dry run would have created, by source and external id.
    sessions: HashSet<(Source, String)>,
    /// Messages this dry run would have inserted: id → the external id of their session.
    messages: HashMap<String, String>,
}

impl DryRunSink {
    /// A dry run against what `store` holds (none: as if it held nothing).
    pub fn new(store: Option<Store>) -> Self {
        DryRunSink {
            store,
            ..DryRunSink::default()
        }
    }
}

/// What a dry run reads of the store for one batch.
#[derive(Default)]
struct Stored {
    /// External session id → its Scribe id, for sessions imported before.
    sessions: HashMap<String, String>,
    /// Message id → the session holding it, for messages of the batch already stored.
    messages: HashMap<String, String>,
}

impl Stored {
    fn read(tx: &mut dyn Reads, source: Source, batch: &Batch) -> Result<Stored> {
        let mut stored = Stored::default();
        let externals = batch
            .sessions
            .iter()
            .map(|s| s.external_id.as_str())
            .chain(batch.messages.iter().map(|m| m.session.as_str()))
            .chain(batch.part_updates.iter().map(|u| u.session.as_str()));
        for external in externals {
            if stored.sessions.contains_key(external) {
                continue;
            }
            let row = tx.reads().get_import_session(&q::GetImportSessionParams {
                source: source.name(),
                external_id: external,
            })?;
            let id = match row {
                Some(row) => Some(row.session_id),
                None => unrecorded_session(tx, source, external)?,
            };
            if let Some(id) = id {
                stored.sessions.insert(external.to_owned(), id);
            }
        }
        let ids = batch
            .messages
            .iter()
            .map(|m| m.message.id.as_str())
            .chain(batch.part_updates.iter().map(|u| u.message_id.as_str()));
        for id in ids {
            if !stored.messages.contains_key(id)
                && let Some(session) = store::message_session(tx, id)?
            {
                stored.messages.insert(id.to_owned(), session);
            }
        }
        Ok(stored)
    }
}

/// The stored session of `source` that an import would give `external` (its id, or
/// `<source>-<id>`), when the importer has no record of it: one that `scribe import` of
/// an export of an earlier import brought (an export does not carry `import_sessions`).
/// It is that session, taken over by the import rather than doubled.
fn unrecorded_session(
    tx: &mut dyn Reads,
    source: Source,
    external: &str,
) -> Result<Option<String>> {
    for id in [external.to_owned(), format!("{}-{external}", source.name())] {
        if SessionService::exists_tx(tx, &id)?
            && SessionService::get_tx(tx, &id)?.source == source.name()
        {
            return Ok(Some(id));
        }
    }
    Ok(None)
}

fn file_states(tx: &mut dyn Reads, source: Source) -> Result<HashMap<String, FileState>> {
    let rows = tx.reads().list_import_files(source.name())?;
    Ok(rows
        .into_iter()
        .map(|r| {
            let state = FileState {
                size: r.size,
                mtime_ns: r.mtime_ns,
                offset: u64::try_from(r.byte_offset).unwrap_or(0),
                lines: u64::try_from(r.lines).unwrap_or(0),
                carry: r.carry,
            };
            (r.path, state)
        })
        .collect())
}

fn fingerprint_of(tx: &mut dyn Reads, source: Source, external_id: &str) -> Result<Option<String>> {
    Ok(tx
        .reads()
        .get_import_session(&q::GetImportSessionParams {
            source: source.name(),
            external_id,
        })?
        .and_then(|r| r.fingerprint))
}

fn stored_conversation_of(
    tx: &mut dyn Reads,
    source: Source,
    external_id: &str,
) -> Result<Vec<Message>> {
    let Some(row) = tx.reads().get_import_session(&q::GetImportSessionParams {
        source: source.name(),
        external_id,
    })?
    else {
        return Ok(Vec::new());
    };
    match store::load_session_messages(tx, &row.session_id) {
        Ok(messages) => Ok(messages),
        // Its record outlived the session (deleted since): nothing stored.
        Err(MessageError::NotFound { .. }) => Ok(Vec::new()),
        Err(err) => Err(err.into()),
    }
}

impl Sink for StoreSink {
    fn files(&self, source: Source) -> Result<HashMap<String, FileState>> {
        self.store.database().read(|tx| file_states(tx, source))
    }

    fn fingerprint(&self, source: Source, external_id: &str) -> Result<Option<String>> {
        self.store
            .database()
            .read(|tx| fingerprint_of(tx, source, external_id))
    }

    fn stored_conversation(&self, source: Source, external_id: &str) -> Result<Vec<Message>> {
        self.store
            .database()
            .read(|tx| stored_conversation_of(tx, source, external_id))
    }

    fn commit(&mut self, source: Source, batch: &Batch) -> Result<Written> {
        if batch.is_empty() {
            return Ok(Written::default());
        }
        // The bulk path defers the background indexer (and indexes at the finish); a
        // database without one (PostgreSQL, whose indexes are kept by the write) gets a
        // guard that pauses nothing.
        if self.paused.is_none() {
            self.paused = Some(Arc::new(self.store.database().pause_background_indexing()));
        }
        let sessions = self.store.sessions();
        self.store.database().write(|tx| {
            Commit {
                tx,
                sessions,
                source,
                pricing_version: self.pricing_version.as_deref(),
                links: HashMap::new(),
                stored: HashMap::new(),
                seen: HashSet::new(),
                new: Vec::new(),
                new_at: HashMap::new(),
            }
            .batch(batch)
        })
    }

    /// Each session of `source` whose cost is unknown in part (and not the source's own
    /// figure) and was estimated with another catalog version than `pricer`'s
    /// (`sessions.pricing_version`) is looked at once: its messages that used tokens and
    /// cost nothing are priced where the catalog now knows their model, the cost added to
    /// the message and the session, and its cost status said again (`estimated` once no
    /// usage is left without a price). A session whose usage is its own (Hermes reports
    /// it per session; no message carries any) is priced by its model, as the import
    /// priced it, the cost added to the session. Either way it is marked with the
    /// version, so an unchanged catalog looks at nothing again. The run's commits mark
    /// the sessions they price with the same version.
    fn reprice(&mut self, source: Source, pricer: &Pricer) -> Result<Repriced> {
        let version = pricer.version();
        let sessions = self.store.sessions();
        let db = self.store.database();
        // Most runs have nothing to look at: that is found in a read, without the write
        // lock.
        let any = db.read(|tx| unpriced_sessions(tx, source, &version))?;
        let repriced = if any.is_empty() {
            Repriced::default()
        } else {
            db.write(|tx| reprice(tx, sessions, source, pricer, &version))?
        };
        self.pricing_version = Some(version);
        Ok(repriced)
    }

    fn finish(&mut self, progress: &mut dyn FnMut(u64, u64)) -> Result<()> {
        if self.paused.take().is_none() {
            return Ok(());
        }
        let db = self.store.database();
        let total = db.search_backlog()?;
        progress(0, total);
        db.index_pending_with_progress(scribe_db::IndexBatch::BULK, &mut |run| {
            progress(run.indexed, total.max(run.indexed));
        })?;
        Ok(())
    }
}

impl Sink for DryRunSink {
    fn files(&self, source: Source) -> Result<HashMap<String, FileState>> {
        match &self.store {
            Some(store) => store.database().read(|tx| file_states(tx, source)),
            None => Ok(HashMap::new()),
        }
    }

    fn fingerprint(&self, source: Source, external_id: &str) -> Result<Option<String>> {
        match &self.store {
            Some(store) => store
                .database()
                .read(|tx| fingerprint_of(tx, source, external_id)),
            None => Ok(None),
        }
    }

    fn stored_conversation(&self, source: Source, external_id: &str) -> Result<Vec<Message>> {
        match &self.store {
            Some(store) => store
                .database()
                .read(|tx| stored_conversation_of(tx, source, external_id)),
            None => Ok(Vec::new()),
        }
    }

    /// What the store sink would price (read only).
    fn reprice(&mut self, source: Source, pricer: &Pricer) -> Result<Repriced> {
        let Some(store) = &self.store else {
            return Ok(Repriced::default());
        };
        let version = pricer.version();
        let plan = store
            .database()
            .read(|tx| plan_repricing(tx, source, pricer, &version))?;
        Ok(repriced(&plan))
    }

    fn commit(&mut self, source: Source, batch: &Batch) -> Result<Written> {
        let stored = match &self.store {
            Some(store) => store
                .database()
                .read(|tx| Stored::read(tx, source, batch))?,
            None => Stored::default(),
        };
        let mut written = Written::default();
        // As the store sink: a new session holding only copies of other sessions' messages
        // is not stored, and its messages are counted as replayed below.
        let mut by_session: HashMap<&str, Vec<usize>> = HashMap::new();
        for (i, m) in batch.messages.iter().enumerate() {
            by_session.entry(m.session.as_str()).or_default().push(i);
        }
        let parents = parents(batch);
        // Messages of the sessions counted so far in this batch.
        let mut met: HashSet<&str> = HashSet::new();
        for rec in &batch.sessions {
            let key = (source, rec.external_id.clone());
            let new =
                !stored.sessions.contains_key(&rec.external_id) && !self.sessions.contains(&key);
            let mine = by_session
                .get(rec.external_id.as_str())
                .map_or(&[][..], Vec::as_slice);
            if !new {
                written.sessions_updated += 1;
            } else if only_replays(rec, batch, mine, &parents, |id| {
                stored.messages.contains_key(id)
                    || met.contains(id)
                    || self.messages.get(id).is_some_and(|s| *s != rec.external_id)
            }) {
                written.messages_replayed += mine.len() as u64;
                continue;
            } else {
                written.sessions_created += 1;
                self.sessions.insert(key);
            }
            if let Some(total) = &rec.usage_total {
                written.usage.session(total);
            }
            met.extend(mine.iter().map(|&i| batch.messages[i].message.id.as_str()));
        }
        // As the store sink: a message of a session neither imported nor in this batch
        // has nowhere to go.
        let known = |external: &str, sessions: &HashSet<(Source, String)>| {
            stored.sessions.contains_key(external)
                || sessions.contains(&(source, external.to_owned()))
        };
        for rec in &batch.messages {
            if !known(&rec.session, &self.sessions) {
                continue;
            }
            let id = &rec.message.id;
            let same = match (self.messages.get(id), stored.messages.get(id)) {
                (Some(external), _) => Some(*external == rec.session),
                (None, Some(holder)) => Some(stored.sessions.get(&rec.session) == Some(holder)),
                (None, None) => None,
            };
            match same {
                Some(true) => written.messages_merged += 1,
                Some(false) => {
                    written.messages_replayed += 1;
                    continue;
                }
                None => {
                    written.messages_inserted += 1;
                    self.messages.insert(id.clone(), rec.session.clone());
                }
            }
            written.usage.message(rec);
        }
        for up in &batch.part_updates {
            if known(&up.session, &self.sessions)
                && (self.messages.contains_key(&up.message_id)
                    || stored.messages.contains_key(&up.message_id))
            {
                written.parts_updated += 1;
            }
        }
        Ok(written)
    }
}

/// What earlier imports of one source recorded (`scribe sources`).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SourceState {
    /// Files (or databases) read at least once.
    pub files: i64,
    /// Their sizes when last read, summed.
    pub bytes: i64,
    /// Records taken from them.
    pub records: i64,
    /// Records skipped (unknown types).
    pub skipped: i64,
    /// Sessions imported.
    pub sessions: i64,
    /// When the source was last imported (ms), if ever.
    pub last_imported_at: Option<i64>,
    /// The newest usage-limit snapshot its sessions hold (Codex's: see
    /// [`crate::sources::codex::RATE_LIMITS`]): `{"at", "plan"?, "windows": [{"minutes",
    /// "used_percent", "resets_at"}]}`.
    pub rate_limits: Option<serde_json::Value>,
}

/// Recently active sessions of a source looked at for its newest usage-limit snapshot.
const RECENT_CONFIGS: i64 = 50;

/// What earlier imports recorded, per source name (sources never imported are absent).
pub fn source_states(store: &Store) -> Result<HashMap<String, SourceState>> {
    store.database().read(|tx| {
        let mut out: HashMap<String, SourceState> = HashMap::new();
        for row in tx.q().summarize_imports()? {
            let entry = out.entry(row.source).or_default();
            entry.files = row.files;
            entry.bytes = row.bytes;
            entry.records = row.records;
            entry.skipped = row.skipped;
            entry.last_imported_at = Some(row.last_imported_at);
        }
        for row in tx.q().count_imported_sessions()? {
            out.entry(row.source).or_default().sessions = row.sessions;
        }
        // Codex reports its plan's usage limits with its token counts; the newest snapshot
        // is in one of the sessions active last (each holds its own newest).
        let key = crate::sources::codex::RATE_LIMITS;
        let newest = tx
            .q()
            .list_recent_imported_configs(&q::ListRecentImportedConfigsParams {
                source: Source::Codex.name(),
                limit: RECENT_CONFIGS,
            })?
            .into_iter()
            .filter_map(|text| {
                let mut config: serde_json::Value = serde_json::from_str(&text).ok()?;
                let limits = config.get_mut(key)?.take();
                limits.get("at")?.as_i64().map(|at| (at, limits))
            })
            .max_by_key(|(at, _)| *at);
        if let Some((_, limits)) = newest
            && let Some(state) = out.get_mut(Source::Codex.name())
        {
            state.rate_limits = Some(limits);
        }
        Ok(out)
    })
}

/// Usage to add to one session.
#[derive(Default)]
struct Pending {
    delta: UsageDelta,
    at: i64,
}

/// One batch being written: the transaction, the session service that announces what
/// it writes, and the source the batch came from.
struct Commit<'t, 'a> {
    tx: &'t mut Tx<'a>,
    sessions: &'t SessionService,
    source: Source,
    /// The version of the prices estimates were made with ([`StoreSink::pricing_version`]).
    pricing_version: Option<&'t str>,
    /// Task calls of this batch (their part ids) → the Scribe id of the session each
    /// started.
    links: HashMap<String, String>,
    /// Messages of this batch stored before it began: id → the session holding it (read
    /// for the whole batch at once, instead of one lookup per message).
    stored: HashMap<String, String>,
    /// Message ids of this batch met so far.
    seen: HashSet<String>,
    /// New messages not written yet: stored together, many rows per statement
    /// ([`Commit::write_new`]), before anything of the batch reads messages back.
    new: Vec<Message>,
    /// Where each message of `new` is in it, by id.
    new_at: HashMap<String, usize>,
}

/// Message ids per lookup of [`Commit::read_stored`].
const LOOKUP_IDS: usize = 500;

impl Commit<'_, '_> {
    fn batch(&mut self, batch: &Batch) -> Result<Written> {
        let now = self.tx.now();
        self.read_stored(batch)?;
        for link in &batch.task_links {
            let child = self.scribe_id(&link.child)?;
            self.links.insert(link.part_id.clone(), child);
        }
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
        // Messages by session, in file order; each session is written before its
        // messages, so a later session of the batch can find them (a `--resume`
        // continuation).
        let mut by_session: HashMap<&str, Vec<usize>> = HashMap::new();
        for (i, m) in batch.messages.iter().enumerate() {
            by_session.entry(m.session.as_str()).or_default().push(i);
        }
        let mut usage: HashMap<String, Pending> = HashMap::new();
        let parents = parents(batch);
        // Sessions this batch made.
        let mut created_now: HashSet<&str> = HashSet::new();
        for rec in &batch.sessions {
            let mine = by_session
                .get(rec.external_id.as_str())
                .map_or(&[][..], Vec::as_slice);
            // Held: stored before the batch, or met in a session of it written before.
            if only_replays(rec, batch, mine, &parents, |id| {
                self.stored.contains_key(id) || self.seen.contains(id)
            })
                && !ids.contains_key(&rec.external_id)
                && self.known(&rec.external_id)?.is_none()
                // Nor one an export of an earlier import brought, which it would take over.
                && unrecorded_session(self.tx, self.source, &rec.external_id)?.is_none()
            {
                written.messages_replayed += mine.len() as u64;
                by_session.remove(rec.external_id.as_str());
                continue;
            }
            let (id, created) = self.upsert_session(
                rec,
                flags.get(rec.external_id.as_str()).copied().unwrap_or(0),
                path,
                now,
            )?;
            if created {
                written.sessions_created += 1;
                created_now.insert(rec.external_id.as_str());
            } else {
                written.sessions_updated += 1;
            }
            ids.insert(rec.external_id.clone(), id.clone());
            let mut replayed_from = None;
            for i in by_session
                .remove(rec.external_id.as_str())
                .unwrap_or_default()
            {
                let other =
                    self.store_message(&batch.messages[i], &mut ids, &mut usage, &mut written)?;
                replayed_from = replayed_from.or(other);
            }
            // A new conversation whose first records another session already holds was
            // resumed from it (Claude Code `--resume` replays them into the new file).
            if let Some(other) = replayed_from
                && created
                && rec.parent.is_none()
                && other != id
            {
                let session = SessionService::get_tx(self.tx, &id)?;
                if session.parent_session_id.is_none() {
                    self.link(&session, other, SessionKind::Continuation)?;
                }
            }
        }
        let mut rest: Vec<usize> = by_session.into_values().flatten().collect();
        rest.sort_unstable();
        for i in rest {
            self.store_message(&batch.messages[i], &mut ids, &mut usage, &mut written)?;
        }
        for up in &batch.part_updates {
            if self.session_id(&up.session, &mut ids)?.is_none() {
                continue;
            }
            let mut part = StoredPart {
                id: up.part_id.clone(),
                position: up.position,
                part: up.part.clone(),
                created_at: up.at,
                updated_at: up.at,
            };
            if let Some(child) = self.links.get(&part.id) {
                link_task(&mut part.part, child);
            }
            if !storable(&mut part) {
                continue;
            }
            // A call's result (the common update) changes a part of a message this batch
            // has not written yet: it is changed there, as import_part would change it
            // in the store, and written once.
            if let Some(changed) = self.update_new(&up.message_id, &part)? {
                written.parts_updated += u64::from(changed);
                continue;
            }
            self.write_new()?;
            match store::import_part(self.tx, &up.message_id, &part) {
                Ok(true) => written.parts_updated += 1,
                Ok(false) => {}
                // Its message is not stored (read from a file not imported) or the
                // position is taken by another part: the result has nowhere to go.
                Err(MessageError::NotFound { .. } | MessageError::InvalidInput(_)) => {}
                Err(err) => return Err(err.into()),
            }
        }
        // Everything below may read messages back.
        self.write_new()?;

        for mark in &batch.marks {
            self.mark(mark, &mut ids)?;
        }
        for key in &batch.keys {
            self.mark_key(key, &mut ids)?;
        }
        for title in &batch.key_titles {
            self.title_key(title)?;
        }
        // A session whose first line answers a line of another session (Claude Code
        // `--resume` without a replay) continues the session holding that line's key:
        // looked up once this batch's keys are marked, so that session may be in this
        // batch, and again in every batch with the session until it is found. A session
        // made only now from a file read before (its replay was not kept) continues the
        // one holding the line this read's first line answers.
        for rec in &batch.sessions {
            let key = match (&rec.continues_from, &rec.answers) {
                (Some(key), _) => key,
                (None, Some(key)) if created_now.contains(rec.external_id.as_str()) => key,
                _ => continue,
            };
            if rec.parent.is_some() {
                continue;
            }
            let Some(id) = ids.get(&rec.external_id).cloned() else {
                continue;
            };
            let Some(holder) = self.key(key)?.and_then(|row| row.session_id) else {
                continue;
            };
            let session = SessionService::get_tx(self.tx, &id)?;
            if holder != id && session.parent_session_id.is_none() {
                self.link(&session, holder, SessionKind::Continuation)?;
            }
        }

        self.point_at_summaries(batch, &mut ids)?;

        for rec in &batch.sessions {
            let Some(total) = &rec.usage_total else {
                continue;
            };
            let Some(id) = ids.get(&rec.external_id) else {
                continue;
            };
            written.usage.session(total);
            let current = SessionService::get_tx(self.tx, id)?;
            let entry = usage.entry(id.clone()).or_default();
            let d = &mut entry.delta;
            d.tokens += positive(total.tokens, current.tokens);
            d.api_calls = d.api_calls.saturating_add(
                total
                    .api_calls
                    .saturating_sub(current.api_call_count)
                    .max(0),
            );
            let cost = (total.cost_usd - current.estimated_cost_usd).max(0.0);
            add_cost(&mut d.cost_usd, cost);
            if total.cost_flags & REPORTED != 0 && cost > 0.0 {
                add_cost(d.actual_cost_usd.get_or_insert(0.0), cost);
            }
            entry.at = entry.at.max(rec.updated_at);
        }
        // Every session touched gets its usage and its last activity as the source says
        // (the message triggers moved updated_at to the time of this write).
        for rec in &batch.sessions {
            if let Some(id) = ids.get(&rec.external_id) {
                let entry = usage.entry(id.clone()).or_default();
                entry.at = entry.at.max(rec.updated_at);
            }
        }
        // In id order, so the events queued for them are too.
        let mut usage: Vec<(String, Pending)> = usage.into_iter().collect();
        usage.sort_unstable_by(|a, b| a.0.cmp(&b.0));
        for (id, pending) in &usage {
            self.sessions
                .add_usage_at_tx(self.tx, id, &pending.delta, pending.at)?;
        }

        for file in &batch.files {
            let carry = file.resume.carry.as_ref().map(serde_json::Value::to_string);
            self.tx.q().upsert_import_file(&q::UpsertImportFileParams {
                source: self.source.name(),
                path: &file.path,
                size: file.size,
                mtime_ns: file.mtime_ns,
                byte_offset: i64::try_from(file.resume.offset).unwrap_or(i64::MAX),
                lines: i64::try_from(file.resume.lines).unwrap_or(i64::MAX),
                carry: carry.as_deref(),
                records: file.records,
                skipped: file.skipped,
                imported_at: now,
            })?;
        }
        self.link_pending_parents(now)?;
        Ok(written)
    }

    /// Stores one message and notes the usage it adds to its session; returns the session
    /// that already holds it, when another one does.
    fn store_message(
        &mut self,
        rec: &crate::record::MessageRec,
        ids: &mut HashMap<String, String>,
        usage: &mut HashMap<String, Pending>,
        written: &mut Written,
    ) -> Result<Option<String>> {
        let Some(session_id) = self.session_id(&rec.session, ids)? else {
            return Ok(None);
        };
        let mut msg = rec.message.clone();
        msg.session_id.clone_from(&session_id);
        for part in &mut msg.parts {
            if let Some(child) = self.links.get(&part.id) {
                link_task(&mut part.part, child);
            }
        }
        msg.parts.retain_mut(storable);
        // What the usage below needs, before the message may be moved to `new`.
        let (usage_now, cost_now) = (msg.usage, msg.cost_usd);
        let at = msg.updated_at.max(msg.created_at);
        // A message neither stored before the batch nor met earlier in it is new: it is
        // written with the others (write_new), exactly as import_message would insert
        // it. Any other goes through import_message, after the new ones before it.
        let imported = if !self.stored.contains_key(&msg.id) && self.seen.insert(msg.id.clone()) {
            self.new_at.insert(msg.id.clone(), self.new.len());
            self.new.push(msg);
            Imported::Inserted
        } else {
            self.write_new()?;
            store::import_message(self.tx, &msg)?
        };
        let (before, cost_before, calls) = match imported {
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
        written.usage.message(rec);
        let entry = usage.entry(session_id).or_default();
        let d = &mut entry.delta;
        d.tokens += positive(usage_now, before);
        d.api_calls = d.api_calls.saturating_add(calls);
        let cost = (cost_now - cost_before).max(0.0);
        add_cost(&mut d.cost_usd, cost);
        if rec.cost_flags & REPORTED != 0 && cost > 0.0 {
            add_cost(d.actual_cost_usd.get_or_insert(0.0), cost);
        }
        entry.at = entry.at.max(at);
        Ok(None)
    }

    /// Reads which messages of `batch` are stored already, and where.
    fn read_stored(&mut self, batch: &Batch) -> Result<()> {
        let ids: Vec<&str> = batch
            .messages
            .iter()
            .map(|m| m.message.id.as_str())
            .collect::<HashSet<&str>>()
            .into_iter()
            .collect();
        for chunk in ids.chunks(LOOKUP_IDS) {
            for (id, session_id) in store::message_sessions(self.tx, chunk)? {
                self.stored.insert(id, session_id);
            }
        }
        Ok(())
    }

    /// Writes the new messages met so far (see `new`).
    fn write_new(&mut self) -> Result<()> {
        if self.new.is_empty() {
            return Ok(());
        }
        scribe_message::bulk::insert_messages(self.tx, &self.new)?;
        self.new.clear();
        self.new_at.clear();
        Ok(())
    }

    /// Applies `part` to message `message_id` when that message is new and not written
    /// yet and already has a part with that id: what `store::import_part` does to a
    /// stored one, by the same rule (`store::import_change`). Returns whether it changed
    /// anything, or `None` when the message is not waiting here or lacks the part (the
    /// store path decides those).
    fn update_new(&mut self, message_id: &str, part: &StoredPart) -> Result<Option<bool>> {
        let Some(&at) = self.new_at.get(message_id) else {
            return Ok(None);
        };
        let Some(old) = self.new[at].parts.iter_mut().find(|p| p.id == part.id) else {
            return Ok(None);
        };
        let old_data = old.part.to_json().map_err(MessageError::from)?;
        let Some((_, updated_at)) =
            store::import_change(message_id, &old_data, old.updated_at, part)?
        else {
            return Ok(Some(false));
        };
        old.part = part.part.clone();
        old.updated_at = updated_at;
        Ok(Some(true))
    }

    /// Records on a stored message that its source undid it (its `error`); a message that
    /// is not stored, or not in the mark's session, is left alone.
    fn mark(&mut self, mark: &MessageMark, ids: &mut HashMap<String, String>) -> Result<()> {
        let Some(session_id) = self.session_id(&mark.session, ids)? else {
            return Ok(());
        };
        let mut msg = match store::load_message_row(self.tx, &mark.message_id) {
            Ok(msg) => msg,
            Err(MessageError::NotFound { .. }) => return Ok(()),
            Err(err) => return Err(err.into()),
        };
        if msg.session_id != session_id || msg.error.as_ref() == Some(&mark.error) {
            return Ok(());
        }
        msg.error = Some(mark.error.clone());
        // Its fields as stored but the error; its parts (none given) stay as they are.
        store::import_message(self.tx, &msg)?;
        Ok(())
    }

    /// Records which session holds a record key (the first to hold it keeps it), and
    /// gives that session a title that was waiting for the key.
    fn mark_key(&mut self, mark: &KeyMark, ids: &mut HashMap<String, String>) -> Result<()> {
        let Some(session_id) = self.session_id(&mark.session, ids)? else {
            return Ok(());
        };
        let waiting = self.key(&mark.key)?;
        self.tx.q().mark_import_key(&q::MarkImportKeyParams {
            source: self.source.name(),
            record_key: &mark.key,
            session_id: Some(&session_id),
        })?;
        if let Some(row) = waiting
            && row.session_id.is_none()
            && let Some(title) = row.title
        {
            self.set_key_title(&mark.key, None, 0)?;
            self.retitle(&session_id, &title, row.title_rank)?;
        }
        Ok(())
    }

    /// Titles the session holding `title.key`, or keeps the title until one does (the
    /// strongest title waiting wins).
    fn title_key(&mut self, title: &KeyTitle) -> Result<()> {
        let rank = title.rank as i64;
        let row = self.key(&title.key)?;
        if let Some(session_id) = row.as_ref().and_then(|r| r.session_id.as_deref()) {
            return self.retitle(session_id, &title.title, rank);
        }
        match row {
            Some(waiting) if waiting.title.is_some() && waiting.title_rank > rank => Ok(()),
            _ => self.set_key_title(&title.key, Some(&title.title), rank),
        }
    }

    fn key(&mut self, key: &str) -> Result<Option<q::ImportKeyRow>> {
        Ok(self.tx.q().get_import_key(&q::GetImportKeyParams {
            source: self.source.name(),
            record_key: key,
        })?)
    }

    fn set_key_title(&mut self, key: &str, title: Option<&str>, rank: i64) -> Result<()> {
        self.tx
            .q()
            .set_import_key_title(&q::SetImportKeyTitleParams {
                source: self.source.name(),
                record_key: key,
                title,
                title_rank: rank,
            })?;
        Ok(())
    }

    /// Gives imported session `session_id` `title` unless a stronger source titled it.
    fn retitle(&mut self, session_id: &str, title: &str, rank: i64) -> Result<()> {
        let Some(known) = self.tx.q().get_import_session_by_id(session_id)? else {
            return Ok(());
        };
        if rank < known.title_rank {
            return Ok(());
        }
        let current = SessionService::get_tx(self.tx, session_id)?;
        let external = ExternalSession {
            title: Some(title.to_owned()),
            ..unchanged(&current)
        };
        match self.sessions.upsert_external_tx(self.tx, &external) {
            // A title that normalizes to nothing is no title.
            Err(scribe_session::SessionError::InvalidTitle { .. }) => return Ok(()),
            other => other?,
        };
        let imported_at = self.tx.now();
        self.tx
            .q()
            .update_import_session(&q::UpdateImportSessionParams {
                path: &known.path,
                title_rank: rank,
                cost_flags: known.cost_flags,
                pending_parent: known.pending_parent.as_deref(),
                fingerprint: known.fingerprint.as_deref(),
                imported_at,
                session_id,
            })?;
        Ok(())
    }

    /// Makes `child` a `kind` child of `parent` (both stored).
    fn link(
        &mut self,
        child: &scribe_session::Session,
        parent: String,
        kind: SessionKind,
    ) -> Result<()> {
        let external = ExternalSession {
            parent_session_id: Some(parent),
            kind,
            ..unchanged(child)
        };
        self.sessions.upsert_external_tx(self.tx, &external)?;
        Ok(())
    }

    /// The importer's record of `external` (a session of this source), if it has one.
    fn known(&mut self, external: &str) -> Result<Option<q::ImportSessionRow>> {
        Ok(self.tx.q().get_import_session(&q::GetImportSessionParams {
            source: self.source.name(),
            external_id: external,
        })?)
    }

    /// The Scribe id a session of this source not imported yet gets: the source's id,
    /// unless another source's session already has it (then `<source>-<id>`, spelled
    /// within the id limit: [`crate::ids::clash_session_id`]).
    fn fresh_id(&mut self, external: &str) -> Result<String> {
        if let Some(id) = unrecorded_session(self.tx, self.source, external)? {
            return Ok(id);
        }
        Ok(if SessionService::exists_tx(self.tx, external)? {
            crate::ids::clash_session_id(self.source, external)
        } else {
            external.to_owned()
        })
    }

    /// The Scribe id of `external`: the one it was imported under, or the one it will be.
    fn scribe_id(&mut self, external: &str) -> Result<String> {
        match self.known(external)? {
            Some(row) => Ok(row.session_id),
            None => self.fresh_id(external),
        }
    }

    /// The Scribe id of `external` (from this batch or an earlier import).
    /// Points each session with a compaction summary in this batch at its latest summary
    /// (`summary_message_id`), as Scribe's own compaction does: the conversation sent to
    /// a model starts there, so an imported session continued in Scribe sends the summary
    /// and what follows it, not the whole history the agent had compacted. A summary
    /// older than the one the session points at (a file read again, an older file read
    /// after a newer one) leaves it; a summary stored in another session (a replayed
    /// record) is not this session's.
    fn point_at_summaries(
        &mut self,
        batch: &Batch,
        ids: &mut HashMap<String, String>,
    ) -> Result<()> {
        let mut latest: HashMap<&str, &Message> = HashMap::new();
        for rec in batch.messages.iter().filter(|m| m.message.is_summary) {
            let m = &rec.message;
            let newest = latest.entry(rec.session.as_str()).or_insert(m);
            if (m.created_at, &m.id) > (newest.created_at, &newest.id) {
                *newest = m;
            }
        }
        // In session order, so the events queued are too.
        let mut latest: Vec<(&str, &Message)> = latest.into_iter().collect();
        latest.sort_unstable_by_key(|(external, _)| *external);
        for (external, m) in latest {
            let Some(id) = self.session_id(external, ids)? else {
                continue;
            };
            if store::message_session(self.tx, &m.id)?.as_deref() != Some(id.as_str()) {
                continue;
            }
            let session = SessionService::get_tx(self.tx, &id)?;
            if let Some(current) = &session.summary_message_id {
                if *current == m.id {
                    continue;
                }
                match store::load_message_row(self.tx, current) {
                    Ok(row) if (row.created_at, &row.id) > (m.created_at, &m.id) => continue,
                    Ok(_) | Err(MessageError::NotFound { .. }) => {}
                    Err(err) => return Err(err.into()),
                }
            }
            self.sessions.set_summary_message_tx(self.tx, &id, &m.id)?;
        }
        Ok(())
    }

    fn session_id(
        &mut self,
        external: &str,
        ids: &mut HashMap<String, String>,
    ) -> Result<Option<String>> {
        if let Some(id) = ids.get(external) {
            return Ok(Some(id.clone()));
        }
        Ok(self.known(external)?.map(|r| {
            ids.insert(external.to_owned(), r.session_id.clone());
            r.session_id
        }))
    }

    /// Creates or updates the session of `rec`; returns its Scribe id and whether it is
    /// new.
    fn upsert_session(
        &mut self,
        rec: &SessionRec,
        batch_flags: u8,
        path: &str,
        now: i64,
    ) -> Result<(String, bool)> {
        let source = self.source;
        let known = self.known(&rec.external_id)?;
        let id = match &known {
            Some(row) => row.session_id.clone(),
            None => self.fresh_id(&rec.external_id)?,
        };
        let mut kind = rec.kind;
        let mut parent = None;
        let mut pending = None;
        if let Some(p) = &rec.parent {
            match self.known(p)? {
                Some(row) if row.session_id != id => parent = Some(row.session_id),
                Some(_) => {}
                None => pending = Some(p.clone()),
            }
        }
        // A kind comes with the parent it is a kind of: a stored session whose link this
        // batch does not name (a resumed file read again, a parent still pending) keeps the
        // kind and parent it has, as a continuation linked after its upsert (by a replay
        // or an answered line, below) or by an earlier run does.
        if parent.is_none() && known.is_some() {
            kind = SessionService::get_tx(self.tx, &id)?.kind;
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
            // Priced by the catalog in this batch: marked with its version, so a later run
            // under the same prices does not look at its unpriced usage again.
            pricing_version: (batch_flags & (ESTIMATED | UNKNOWN) != 0)
                .then(|| self.pricing_version.map(str::to_owned))
                .flatten(),
            created_at: rec.created_at,
            updated_at: rec.updated_at,
            ended_at: rec.ended_at,
            end_reason: rec.end_reason.clone(),
        };
        let (_, created) = match self.sessions.upsert_external_tx(self.tx, &external) {
            Err(scribe_session::SessionError::InvalidTitle { .. }) => {
                // A title that normalizes to nothing is no title.
                let mut untitled = external;
                untitled.title = None;
                self.sessions.upsert_external_tx(self.tx, &untitled)?
            }
            other => other?,
        };
        let path = if path.is_empty() {
            known.as_ref().map_or(String::new(), |r| r.path.clone())
        } else {
            path.to_owned()
        };
        let path = path.as_str();
        match known {
            None => self
                .tx
                .q()
                .insert_import_session(&q::InsertImportSessionParams {
                    session_id: &id,
                    source: source.name(),
                    external_id: &rec.external_id,
                    path,
                    title_rank,
                    cost_flags: i64::from(cost_flags),
                    pending_parent: pending.as_deref(),
                    fingerprint: rec.fingerprint.as_deref(),
                    imported_at: now,
                })?,
            Some(row) => self
                .tx
                .q()
                .update_import_session(&q::UpdateImportSessionParams {
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
                })?,
        }
        Ok((id, created))
    }

    /// Links sessions whose parent was imported after them.
    fn link_pending_parents(&mut self, now: i64) -> Result<()> {
        for row in self.tx.q().list_pending_parents()? {
            if row.source != self.source.name() {
                continue;
            }
            let Some(parent) = row.parent_session_id else {
                continue;
            };
            let child = SessionService::get_tx(self.tx, &row.session_id)?;
            if parent != child.id {
                self.link(&child, parent, child.kind)?;
            }
            let Some(known) = self.tx.q().get_import_session_by_id(&row.session_id)? else {
                continue;
            };
            self.tx
                .q()
                .update_import_session(&q::UpdateImportSessionParams {
                    path: &known.path,
                    title_rank: known.title_rank,
                    cost_flags: known.cost_flags,
                    pending_parent: None,
                    fingerprint: known.fingerprint.as_deref(),
                    imported_at: now,
                    session_id: &row.session_id,
                })?;
        }
        Ok(())
    }
}

/// `source`'s sessions with usage left unpriced, priced under another version than
/// `version` (or none): what [`StoreSink::reprice`] looks at.
fn unpriced_sessions(
    tx: &mut dyn Reads,
    source: Source,
    version: &str,
) -> Result<Vec<q::ListUnpricedImportSessionsRow>> {
    Ok(tx
        .reads()
        .list_unpriced_import_sessions(&q::ListUnpricedImportSessionsParams {
            source: source.name(),
            pricing_version: Some(version),
        })?)
}

/// One session [`StoreSink::reprice`] looks at, and what it finds.
struct Repricing {
    session_id: String,
    /// Its cost bits before.
    flags: u8,
    /// Its messages the catalog prices now, with their cost (0 for a free model).
    priced: Vec<(String, f64)>,
    /// What the catalog now prices its usage of its own at, when no message carries usage
    /// (a source that reports usage per session: Hermes).
    own: Option<f64>,
    /// Whether usage without a price is left.
    left: bool,
}

impl Repricing {
    /// Whether anything was priced.
    fn any(&self) -> bool {
        !self.priced.is_empty() || self.own.is_some()
    }

    /// Its cost bits after: estimated where something was priced, unknown while usage
    /// without a price is left.
    fn flags(&self) -> u8 {
        let mut flags = self.flags;
        if self.any() {
            flags |= ESTIMATED;
            if !self.left {
                flags &= !UNKNOWN;
            }
        }
        flags
    }

    /// What its priced messages and usage of its own cost, summed.
    fn cost(&self) -> f64 {
        let mut cost = self.own.unwrap_or(0.0);
        for (_, c) in &self.priced {
            add_cost(&mut cost, *c);
        }
        cost
    }
}

/// What pricing `source`'s unpriced history under `pricer` (of version `version`) finds,
/// read only: the sessions [`unpriced_sessions`] names, each with its messages that used
/// tokens and cost nothing priced where the catalog knows their model. How many calls a
/// stored message stands for is not stored: each is priced as a sum (the base prices).
fn plan_repricing(
    tx: &mut dyn Reads,
    source: Source,
    pricer: &Pricer,
    version: &str,
) -> Result<Vec<Repricing>> {
    let mut plan = Vec::new();
    for candidate in unpriced_sessions(tx, source, version)? {
        let mut found = Repricing {
            flags: candidate.cost_flags as u8,
            session_id: candidate.session_id,
            priced: Vec::new(),
            own: None,
            left: false,
        };
        for m in store::unpriced_messages(tx, &found.session_id)? {
            match pricer.estimate_calls(m.model.as_deref(), &m.usage, 0) {
                Some(cost) => found.priced.push((m.id, cost)),
                None => found.left = true,
            }
        }
        // Usage the source reported for the session as a whole, priced by the session's
        // model as the import priced it (`price_session`); a session whose messages
        // carry usage has none of its own to price (its unpriced usage is theirs).
        if let Some(own) = SessionService::own_usage_tx(tx, &found.session_id)?
            && !own.carried_by_messages
            && !own.tokens.is_zero()
        {
            match pricer.estimate_calls(own.model.as_deref(), &own.tokens, own.api_calls) {
                Some(cost) => found.own = Some(cost),
                None => found.left = true,
            }
        }
        plan.push(found);
    }
    Ok(plan)
}

/// What `plan` prices, summed.
fn repriced(plan: &[Repricing]) -> Repriced {
    let mut out = Repriced::default();
    for p in plan.iter().filter(|p| p.any()) {
        out.sessions += 1;
        out.messages += p.priced.len() as u64;
        add_cost(&mut out.cost_usd, p.cost());
    }
    out
}

/// [`StoreSink::reprice`] inside `tx`: the plan read again and written.
fn reprice(
    tx: &mut Tx<'_>,
    sessions: &SessionService,
    source: Source,
    pricer: &Pricer,
    version: &str,
) -> Result<Repriced> {
    let plan = plan_repricing(tx, source, pricer, version)?;
    for p in &plan {
        let id = p.session_id.as_str();
        for (message, cost) in &p.priced {
            if *cost > 0.0 {
                store::add_message_cost(tx, message, *cost)?;
            }
        }
        let flags = p.flags();
        if flags != p.flags {
            tx.q()
                .set_import_session_cost_flags(&q::SetImportSessionCostFlagsParams {
                    cost_flags: i64::from(flags),
                    session_id: id,
                })?;
        }
        let current = SessionService::get_tx(tx, id)?;
        let cost = p.cost();
        if cost > 0.0 {
            let delta = UsageDelta {
                cost_usd: cost,
                ..UsageDelta::default()
            };
            sessions.add_usage_at_tx(tx, id, &delta, current.updated_at)?;
        }
        let external = ExternalSession {
            cost_status: pricing::status(flags).map(str::to_owned),
            cost_source: pricing::source(flags, source.name()),
            pricing_version: Some(version.to_owned()),
            ..unchanged(&current)
        };
        sessions.upsert_external_tx(tx, &external)?;
    }
    Ok(repriced(&plan))
}

/// `session` as an [`ExternalSession`] that changes nothing of it: no field given (a
/// stored session keeps what it has), its own kind, parent and times.
fn unchanged(session: &scribe_session::Session) -> ExternalSession {
    ExternalSession {
        id: session.id.clone(),
        parent_session_id: session.parent_session_id.clone(),
        kind: session.kind,
        source: session.source.clone(),
        directory: None,
        title: None,
        model: None,
        model_config: None,
        system_prompt: None,
        billing_provider: None,
        billing_base_url: None,
        cost_status: None,
        cost_source: None,
        pricing_version: None,
        created_at: session.created_at,
        updated_at: session.updated_at,
        ended_at: None,
        end_reason: None,
    }
}

/// The sessions of `batch` some other session of it names as its parent.
fn parents(batch: &Batch) -> HashSet<&str> {
    batch
        .sessions
        .iter()
        .filter_map(|s| s.parent.as_deref())
        .collect()
}

/// Whether `rec`, a session not stored yet, would hold nothing of its own: every message
/// the batch gives it (`mine`, indexes into `batch.messages`) is already `held` by
/// another session, and nothing else needs it (no usage of its own, no session below it
/// in `parents`). That is a resumed conversation that went no further than its replay
/// (Claude Code's `--resume` once copied the earlier conversation into a new file before
/// the first new prompt): stored, it would be an empty continuation standing for its
/// chain in `scribe list`. Neither sink keeps it, and its messages count as replayed. If
/// its file goes on, the session is made then, continuing the one its first new line
/// answers ([`SessionRec::answers`]).
fn only_replays(
    rec: &SessionRec,
    batch: &Batch,
    mine: &[usize],
    parents: &HashSet<&str>,
    held: impl Fn(&str) -> bool,
) -> bool {
    rec.parent.is_none()
        && rec.usage_total.is_none()
        && !mine.is_empty()
        && !parents.contains(rec.external_id.as_str())
        && mine.iter().all(|&i| held(&batch.messages[i].message.id))
}

/// Names `child` in a task call's part: in a completed call's metadata (`session_id`), as
/// Scribe's own task tool does; a failed call's error state has no metadata, so there in
/// the tool part's own `session_id` field (kept verbatim with the part, see
/// [`scribe_message::part::ToolPart::extra`]). A call still pending or running is left
/// as it is (its result, when read, is linked then).
/// Makes `part` storable: a record nesting deeper than a part may
/// (`scribe_message::MAX_PART_DEPTH`: the store refuses it, since it could not be read
/// back) keeps its content with every object or array below that depth as its JSON text,
/// a string (`Part::into_storable`), so one such record does not stop the import.
/// `false` (leave the part out) only when even that is no part, which only free-form
/// values nesting that deep could cause, so it is not expected.
fn storable(part: &mut StoredPart) -> bool {
    let content = std::mem::replace(&mut part.part, Part::Unknown(serde_json::Value::Null));
    match content.into_storable() {
        Some(content) => {
            part.part = content;
            true
        }
        None => false,
    }
}

fn link_task(part: &mut Part, child: &str) {
    let Part::Tool(tool) = part else {
        return;
    };
    let child = serde_json::Value::String(child.to_owned());
    let metadata = match &mut tool.state {
        ToolState::Completed { metadata, .. } => metadata,
        ToolState::Error { .. } => {
            tool.extra.insert("session_id".to_owned(), child);
            return;
        }
        ToolState::Pending | ToolState::Running { .. } => return,
    };
    match metadata {
        serde_json::Value::Object(map) => {
            map.insert("session_id".to_owned(), child);
        }
        serde_json::Value::Null => *metadata = serde_json::json!({ "session_id": child }),
        other => {
            let value = other.take();
            *other = serde_json::json!({ "session_id": child, "value": value });
        }
    }
}

/// `new - old`, field by field, never below zero (usage only grows).
fn positive(new: TokenUsage, old: TokenUsage) -> TokenUsage {
    // Saturating: `old` is what is stored, which another program may have written.
    let up = |new: i64, old: i64| new.saturating_sub(old).max(0);
    TokenUsage {
        input: up(new.input, old.input),
        output: up(new.output, old.output),
        cache_read: up(new.cache_read, old.cache_read),
        cache_write: up(new.cache_write, old.cache_write),
        reasoning: up(new.reasoning, old.reasoning),
    }
}

/// Adds an imported cost to a session's pending one, stopping at the largest finite
/// amount: two messages reporting 1e308 summed to infinity, which the usage update
/// refuses ("cost must be a finite, non-negative amount"), and that refusal aborted the
/// whole import, every file of it, on every run.
fn add_cost(total: &mut f64, cost: f64) {
    *total = (*total + cost).min(f64::MAX);
}
