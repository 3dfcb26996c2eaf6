//! Operations on a session's whole conversation: [`fork`](SessionService::fork),
//! [`clear`](SessionService::clear), [`prune`](SessionService::prune),
//! [`export`](SessionService::export) and [`import`](SessionService::import).
//!
//! Messages and parts are read and written through `scribe_message::store`, inside this
//! service's transactions, so a fork or an import is all or nothing.

use std::collections::{BTreeSet, HashMap};

use scribe_db::filters::{SessionFilter, SessionOrder};
use scribe_db::ids::{Prefix, new_id};
use scribe_db::queries as q;
use scribe_db::{Reads, Tx};
use scribe_message::{Message, TokenUsage, store};
use scribe_pubsub::EventKind;
use serde::{Deserialize, Serialize};

use crate::error::{Result, SessionError};
use crate::files::{FileVersion, file_sessions, file_versions};
use crate::service::{
    SessionService, child_of, delete_conversation, free_title, insert_session, list_readable, load,
};
use crate::session::{Session, SessionKind, json_text, sessions};
use crate::title::normalize_optional_title;
use crate::usage::UsageDelta;

/// Which sessions [`SessionService::export`] writes out.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum ExportSelection {
    /// One session by id.
    One(String),
    /// Every session, or those of one source; oldest first, so parents come before
    /// their children.
    All {
        /// Only sessions of this source.
        source: Option<String>,
    },
}

/// The mark that a session's usage was rolled into its parent.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RollUpMark {
    /// The parent it went to.
    pub parent_id: String,
    /// When (ms).
    pub rolled_up_at: i64,
    /// What the roll-up added to the parent (`tool_calls` is always 0: tool calls are not
    /// rolled up), so usage statistics can count it under the child only. Absent in
    /// exports made before it was recorded; an import then takes the child's totals.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub added: Option<UsageDelta>,
}

/// A session with everything that belongs to it, as [`SessionService::export`] writes it
/// and [`SessionService::import`] reads it back.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SessionExport {
    /// The session, counters and usage totals included.
    pub session: Session,
    /// Its messages in creation order, each with its parts.
    pub messages: Vec<Message>,
    /// Every recorded file version, by path and version.
    #[serde(default)]
    pub files: Vec<FileVersion>,
    /// Present when the session's usage was already rolled into its parent, so an import
    /// does not let it be rolled up twice.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rolled_up: Option<RollUpMark>,
}

/// What [`SessionService::import`] did.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub enum ImportOutcome {
    /// The session and everything in it were stored.
    Imported {
        /// The session as stored.
        session: Box<Session>,
        /// The exported parent, when it was not in this database and the link was dropped.
        unlinked_parent: Option<String>,
    },
    /// Nothing was stored.
    Skipped {
        /// Why, e.g. the session id is already present.
        reason: String,
    },
}

/// How far [`SessionService::import_many`] has come (its progress callback's argument).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ImportProgress {
    /// Sessions handled so far (imported, skipped or failed).
    pub sessions: usize,
    /// Messages stored so far.
    pub messages: usize,
    /// Parts indexed for search so far (indexing starts once every session is stored).
    pub indexed: u64,
    /// Parts waiting to be indexed when indexing started.
    pub to_index: u64,
}

/// About how many messages [`SessionService::import_many`] stores (and indexes) per
/// transaction. Each transaction writes one FTS5 segment per index, which FTS5 merges
/// later; 10,000 rather than 5,000 cost 5% fewer instructions over a 100,000-message
/// import (less merging), for transactions of well under a second.
pub const IMPORT_BATCH_MESSAGES: usize = 10_000;

/// What [`SessionService::prune`] removed, or would remove in a dry run.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PruneReport {
    /// Whether this was a dry run (nothing changed).
    pub dry_run: bool,
    /// Sessions that ended before this time (ms) qualified.
    pub ended_before: i64,
    /// The sessions removed (or that would be), oldest end first, as they were.
    pub sessions: Vec<Session>,
}

const DAY_MS: i64 = 86_400_000;

/// What a writer given to [`SessionService::export_each`] may fail with.
pub type BoxError = Box<dyn std::error::Error + Send + Sync>;

fn prunable(tx: &mut dyn Reads, before: i64, source: Option<&str>) -> Result<Vec<Session>> {
    let rows =
        match source {
            None => tx.reads().list_prunable_sessions(before)?,
            Some(source) => tx.reads().list_prunable_sessions_by_source(
                &q::ListPrunableSessionsBySourceParams { before, source },
            )?,
        };
    sessions(rows)
}

/// Reorders `list` (oldest first) so every session comes after its parent when both are
/// in it. Creation order alone is not enough: a task session's id is a tool-call id, so a
/// child created in the same millisecond as its parent may sort before it.
fn parents_first(list: Vec<Session>) -> Vec<Session> {
    parents_first_by(list, |s| s)
}

/// Reorders the sessions of an export file so every session comes after its parent when
/// both are in it, keeping the file's order otherwise: [`SessionService::import_many`]
/// links a child only to a parent already stored, so a file that lists a child first (two
/// exports concatenated, one edited by hand) would otherwise lose the link.
pub fn exports_parents_first(list: Vec<SessionExport>) -> Vec<SessionExport> {
    parents_first_by(list, |e| &e.session)
}

/// [`parents_first`] over anything that holds a session.
fn parents_first_by<T>(list: Vec<T>, session: impl Fn(&T) -> &Session) -> Vec<T> {
    let index: HashMap<String, usize> = list
        .iter()
        .enumerate()
        .map(|(i, s)| (session(s).id.clone(), i))
        .collect();
    let mut placed = vec![false; list.len()];
    let mut order = Vec::with_capacity(list.len());
    for start in 0..list.len() {
        // Walk up to the oldest unplaced ancestor in the list, then place the chain down.
        let mut chain = Vec::new();
        let mut at = Some(start);
        while let Some(i) = at {
            if placed[i] || chain.contains(&i) {
                break;
            }
            chain.push(i);
            at = session(&list[i])
                .parent_session_id
                .as_ref()
                .and_then(|parent| index.get(parent).copied());
        }
        for &i in chain.iter().rev() {
            placed[i] = true;
            order.push(i);
        }
    }
    let mut slots: Vec<Option<T>> = list.into_iter().map(Some).collect();
    order.into_iter().filter_map(|i| slots[i].take()).collect()
}

fn export_one(tx: &mut dyn Reads, session: Session) -> Result<SessionExport> {
    let messages = store::load_session_messages(tx, &session.id)?;
    let files = file_versions(tx.reads().list_session_files(&session.id)?);
    let mark = tx.reads().get_session_roll_up(&session.id)?;
    Ok(session_export(session, messages, files, mark))
}

/// Sessions read together by [`export_batch`], at most: each batch is four statements
/// (messages, parts, file versions, roll-up marks) instead of four per session.
const EXPORT_BATCH_SESSIONS: usize = 200;

/// Messages held in memory by one batch of [`export_batch`], about (by the sessions'
/// counts): a session with more is read alone, as [`export_one`] reads it.
const EXPORT_BATCH_MESSAGES: i64 = 2_000;

/// `sessions` split into runs for [`export_batch`], in order: runs of small sessions up to
/// [`EXPORT_BATCH_SESSIONS`] and about [`EXPORT_BATCH_MESSAGES`] messages, a big
/// session alone.
fn export_batches(sessions: Vec<Session>) -> Vec<Vec<Session>> {
    let mut batches: Vec<Vec<Session>> = Vec::new();
    let mut messages = 0i64;
    for session in sessions {
        let count = session.message_count.max(0);
        let fits = batches.last().is_some_and(|last| {
            last.len() < EXPORT_BATCH_SESSIONS
                && messages.saturating_add(count) <= EXPORT_BATCH_MESSAGES
        });
        if fits {
            messages = messages.saturating_add(count);
            if let Some(last) = batches.last_mut() {
                last.push(session);
            }
        } else {
            messages = count;
            batches.push(vec![session]);
        }
    }
    batches
}

/// The exports of `sessions` (a run from [`export_batches`]), each with its own outcome,
/// in order: a session whose rows do not decode fails alone. Read together in four
/// statements; when one of them fails on a value it cannot read (which names no
/// session), or for a single session, one at a time as [`export_one`] reads them.
fn export_batch(tx: &mut dyn Reads, sessions: Vec<Session>) -> Result<Vec<Result<SessionExport>>> {
    if sessions.len() > 1 {
        let ids: Vec<&str> = sessions.iter().map(|s| s.id.as_str()).collect();
        match read_batch(tx, &ids) {
            Ok((messages, mut files, mut marks)) => {
                return Ok(sessions
                    .into_iter()
                    .zip(messages)
                    .map(|(session, messages)| {
                        let files = file_versions(files.remove(&session.id).unwrap_or_default());
                        let mark = marks.remove(&session.id);
                        Ok(session_export(session, messages?, files, mark))
                    })
                    .collect());
            }
            Err(err) if err.is_unreadable() => {}
            Err(err) => return Err(err),
        }
    }
    Ok(sessions
        .into_iter()
        .map(|session| export_one(tx, session))
        .collect())
}

/// What [`export_batch`] reads of many sessions at once: each one's messages (or why they
/// do not decode), and the file versions and roll-up marks by session id.
type BatchRead = (
    Vec<scribe_message::Result<Vec<Message>>>,
    HashMap<String, Vec<q::FileRow>>,
    HashMap<String, q::SessionRollupRow>,
);

fn read_batch(tx: &mut dyn Reads, ids: &[&str]) -> Result<BatchRead> {
    let messages = store::load_sessions_messages(tx, ids)?;
    let mut files: HashMap<String, Vec<q::FileRow>> = HashMap::new();
    for row in tx.reads().list_files_of_sessions(ids)? {
        files.entry(row.session_id.clone()).or_default().push(row);
    }
    let marks = tx
        .reads()
        .list_session_roll_ups(ids)?
        .into_iter()
        .map(|mark| (mark.child_id.clone(), mark))
        .collect();
    Ok((messages, files, marks))
}

/// A session's export from what was read of it.
fn session_export(
    session: Session,
    messages: Vec<Message>,
    files: Vec<FileVersion>,
    mark: Option<q::SessionRollupRow>,
) -> SessionExport {
    let rolled_up = mark.map(|mark| RollUpMark {
        added: Some(UsageDelta {
            tokens: TokenUsage {
                input: mark.input_tokens,
                output: mark.output_tokens,
                cache_read: mark.cache_read_tokens,
                cache_write: mark.cache_write_tokens,
                reasoning: mark.reasoning_tokens,
            },
            api_calls: mark.api_call_count,
            tool_calls: 0,
            cost_usd: mark.estimated_cost_usd,
            actual_cost_usd: mark.actual_cost_usd,
        }),
        parent_id: mark.parent_id,
        rolled_up_at: mark.rolled_up_at,
    });
    SessionExport {
        session,
        messages,
        files,
        rolled_up,
    }
}

impl SessionService {
    /// Forks `session_id` at `message_id`: a new [`SessionKind::Fork`] session linked to
    /// the original, holding copies of the original's messages up to and including
    /// `message_id` (in creation order) with new message and part ids, in one transaction.
    ///
    /// The copies keep their roles, parts, per-message usage and times; links between
    /// copied messages (parent, the session's summary message) point at the copies. The
    /// fork's usage totals start at zero: what the copied turns cost was paid by the
    /// original. Publishes `created` for the fork, with its final counters.
    pub fn fork(&self, session_id: &str, message_id: &str) -> Result<Session> {
        self.db.write(|tx| {
            let original = load(tx, session_id)?;
            let messages = store::load_session_messages(tx, session_id)?;
            let Some(cut) = messages.iter().position(|m| m.id == message_id) else {
                return match store::message_session(tx, message_id)? {
                    None => Err(SessionError::not_found("message", message_id)),
                    Some(owner) => Err(SessionError::InvalidInput(format!(
                        "message {message_id} belongs to session {owner}, not {session_id}"
                    ))),
                };
            };
            let mut new = child_of(&original, SessionKind::Fork);
            new.system_prompt.clone_from(&original.system_prompt);
            let fork_id = new_id(Prefix::Session);
            insert_session(tx, &fork_id, &new)?;

            // The copies, stored in statements of many rows (on PostgreSQL a statement's
            // rows move the fork's counters once, not once a row).
            let mut copies = messages;
            copies.truncate(cut + 1);
            let mut ids: HashMap<String, String> = HashMap::new();
            for copy in &mut copies {
                let id = new_id(Prefix::Message);
                let original_id = std::mem::replace(&mut copy.id, id.clone());
                copy.session_id.clone_from(&fork_id);
                copy.parent_id = copy
                    .parent_id
                    .as_deref()
                    .and_then(|parent| ids.get(parent).cloned());
                for part in &mut copy.parts {
                    part.id = new_id(Prefix::Part);
                }
                ids.insert(original_id, id);
            }
            scribe_message::bulk::insert_messages(tx, &copies)?;
            if let Some(summary) = original
                .summary_message_id
                .as_deref()
                .and_then(|summary| ids.get(summary))
            {
                let params = q::SetSessionSummaryMessageParams {
                    summary_message_id: Some(summary),
                    now: tx.now(),
                    id: &fork_id,
                };
                tx.q().set_session_summary_message(&params)?;
            }
            let fork = load(tx, &fork_id)?;
            self.announce(tx, EventKind::Created, &fork);
            Ok(fork)
        })
    }

    /// Deletes every message (and part) of `session_id` but keeps the session, its
    /// settings, usage totals and files. Publishes `updated`.
    pub fn clear(&self, session_id: &str) -> Result<Session> {
        self.db.write(|tx| {
            let before = load(tx, session_id)?;
            delete_conversation(tx, &before)?;
            let session = load(tx, session_id)?;
            self.announce(tx, EventKind::Updated, &session);
            Ok(session)
        })
    }

    /// Removes sessions that ended more than `older_than_days` days ago (only those of
    /// `source` when given), with their messages, parts and files; active sessions are
    /// never pruned, however old. Children of a pruned session that stay lose their
    /// parent link. With `dry_run` nothing changes and the report lists what would go.
    ///
    /// Publishes `deleted` for every pruned session and `updated` for every unlinked child.
    pub fn prune(
        &self,
        older_than_days: u32,
        source: Option<&str>,
        dry_run: bool,
    ) -> Result<PruneReport> {
        let ended_before = self
            .db
            .now()
            .saturating_sub(i64::from(older_than_days).saturating_mul(DAY_MS));
        if dry_run {
            let sessions = self.db.read(|tx| prunable(tx, ended_before, source))?;
            return Ok(PruneReport {
                dry_run,
                ended_before,
                sessions,
            });
        }
        let pruned = self.db.write(|tx| -> Result<_> {
            let candidates = prunable(tx, ended_before, source)?;
            let gone: BTreeSet<&str> = candidates.iter().map(|s| s.id.as_str()).collect();
            let mut children = BTreeSet::new();
            for session in &candidates {
                let (_, unlinked) = self.delete_tx(tx, &session.id)?;
                children.extend(unlinked.into_iter().map(|child| child.id));
            }
            let mut unlinked = Vec::new();
            for child in children.iter().filter(|id| !gone.contains(id.as_str())) {
                if let Some(row) = tx.q().get_session(child)? {
                    unlinked.push(Session::try_from(row)?);
                }
            }
            for session in &candidates {
                self.announce(tx, EventKind::Deleted, session);
            }
            for child in &unlinked {
                self.announce(tx, EventKind::Updated, child);
            }
            Ok(candidates)
        })?;
        Ok(PruneReport {
            dry_run,
            ended_before,
            sessions: pruned,
        })
    }

    /// Exports the selected sessions with their messages, parts and file versions, all
    /// read from one snapshot. [`ExportSelection::All`] lists sessions oldest first, every
    /// parent before its children, so importing them in order keeps every link. Holds
    /// them all in memory: [`export_each`](Self::export_each) streams them instead.
    pub fn export(&self, selection: &ExportSelection) -> Result<Vec<SessionExport>> {
        let mut all = Vec::new();
        self.export_each(selection, &mut |export| {
            all.push(export);
            Ok(())
        })?;
        Ok(all)
    }

    /// [`export`](Self::export) one session at a time: `write` gets each session's export
    /// as soon as it has been read, so memory holds one session (or a run of small ones,
    /// about 2,000 messages, read together), never all of them (what `scribe export --all`
    /// streams to its file). Everything is read from one snapshot, in
    /// the same order as `export`. Returns how many sessions were written; an error from
    /// `write` stops the export ([`SessionError::Write`]), and so does a session that
    /// cannot be read (the error names it).
    pub fn export_each(
        &self,
        selection: &ExportSelection,
        write: &mut dyn FnMut(SessionExport) -> std::result::Result<(), BoxError>,
    ) -> Result<usize> {
        self.export_sessions(selection, write, &mut |id, err| {
            Err(match id {
                Some(id) => err.in_session(id),
                None => err,
            })
        })
    }

    /// [`export_each`](Self::export_each) that goes on past a session whose stored rows
    /// cannot be read ([`SessionError::is_unreadable`]: a value another program wrote into
    /// an SQLite column, a part that does not decode): `left_out` gets each such session's
    /// id (`None` when its own row is the unreadable one, which the error then names) and
    /// the error, once, after the export has been read; everything else is written. What
    /// a backup of a store with one damaged row needs: the rest of it.
    pub fn export_each_skipping(
        &self,
        selection: &ExportSelection,
        write: &mut dyn FnMut(SessionExport) -> std::result::Result<(), BoxError>,
        left_out: &mut dyn FnMut(Option<&str>, SessionError),
    ) -> Result<usize> {
        let mut unreadable = Vec::new();
        let written = self.export_sessions(selection, write, &mut |id, err| {
            if err.is_unreadable() {
                unreadable.push((id.map(str::to_owned), err));
                Ok(())
            } else {
                Err(err)
            }
        })?;
        for (id, err) in unreadable {
            left_out(id.as_deref(), err);
        }
        Ok(written)
    }

    /// Both exports: `unreadable` decides about a session that fails to read (its id, when
    /// the session row itself was read): `Ok` leaves it out, an error stops the export.
    /// Called once per such session, however often a busy read is tried again.
    fn export_sessions(
        &self,
        selection: &ExportSelection,
        write: &mut dyn FnMut(SessionExport) -> std::result::Result<(), BoxError>,
        unreadable: &mut dyn FnMut(Option<&str>, SessionError) -> Result<()>,
    ) -> Result<usize> {
        // A read is retried when the database is busy; sessions written (or left out) by
        // a try that failed are not written (or reported) again.
        let mut written: BTreeSet<String> = BTreeSet::new();
        let mut left_out: BTreeSet<String> = BTreeSet::new();
        let mut listed_once = false;
        self.db.read(|tx| {
            let sessions = match selection {
                ExportSelection::One(id) => vec![load(tx, id)?],
                ExportSelection::All { source } => {
                    let filter = SessionFilter {
                        sources: source.iter().cloned().collect(),
                        order: SessionOrder::CreatedAsc,
                        ..SessionFilter::default()
                    };
                    let mut bad_rows = Vec::new();
                    let listed = list_readable(tx, &filter, &mut bad_rows)?;
                    // The rows no reader takes, told once (by the first try to list).
                    if !listed_once {
                        for err in bad_rows {
                            unreadable(None, err)?;
                        }
                        listed_once = true;
                    }
                    parents_first(listed)
                }
            };
            let pending: Vec<Session> = sessions
                .into_iter()
                .filter(|s| !written.contains(&s.id) && !left_out.contains(&s.id))
                .collect();
            for batch in export_batches(pending) {
                let ids: Vec<String> = batch.iter().map(|s| s.id.clone()).collect();
                for (id, export) in ids.into_iter().zip(export_batch(tx, batch)?) {
                    match export {
                        Ok(export) => {
                            write(export).map_err(SessionError::Write)?;
                            written.insert(id);
                        }
                        Err(err) => {
                            unreadable(Some(&id), err)?;
                            left_out.insert(id);
                        }
                    }
                }
            }
            Ok(written.len())
        })
    }

    /// Imports one exported session in one transaction: the session row exactly as
    /// exported (usage totals, cost, counters, times), its messages and parts with their
    /// ids, and its file versions. A session whose id is already present is
    /// [`ImportOutcome::Skipped`]; a parent that is not in this database is dropped from
    /// the link (reported in the outcome). The title goes through the same rules as
    /// [`create`](SessionService::create): it is stored normalized, and one that is empty
    /// after normalization is [`SessionError::InvalidTitle`], one too long
    /// [`SessionError::TitleTooLong`]. A title held by another session becomes the next
    /// free title of its lineage (`t #2`, as the history importers number it; the
    /// outcome's session has the title stored). A message id already present is a
    /// [`SessionError::Conflict`]; an id (the session's, a message's, a part's, a file
    /// version's) longer than [`scribe_db::ids::MAX_ID_BYTES`] is
    /// [`SessionError::IdTooLong`], checked before anything is read. A file version
    /// numbered below 1, a path given the same version twice, or a message, part or file
    /// version given twice, is [`SessionError::InvalidInput`]. On any error nothing is
    /// stored. Publishes `created`.
    pub fn import(&self, export: &SessionExport) -> Result<ImportOutcome> {
        self.db.write(|tx| {
            let outcome = import_tx(tx, export)?;
            if let ImportOutcome::Imported { session, .. } = &outcome {
                self.announce(tx, EventKind::Created, session);
            }
            Ok(outcome)
        })
    }

    /// Imports many exported sessions: the bulk path of `scribe import` and of the history
    /// importers. Each session is imported as [`import`](Self::import) does it (the same
    /// rules, skips and errors, all or nothing, `created` published), but many go into one
    /// transaction (about [`IMPORT_BATCH_MESSAGES`] messages). One that fails is reported
    /// and the others still go in: the transaction is rolled back and stored again without
    /// it (failures are rare, so the common path pays nothing for them). An id longer than
    /// [`scribe_db::ids::MAX_ID_BYTES`] is that session's [`SessionError::IdTooLong`], on
    /// both backends. A value the server refuses (SQLSTATE class 22 or 54: on PostgreSQL
    /// a key longer than its btree index takes, such as a file path of several KB; before
    /// schema V25 also a text whose words exceeded the 1 MiB `tsvector`) names no session: the batch's sessions are then stored one per transaction, and the
    /// one refused fails alone. Each transaction also indexes the parts it stored, in both
    /// search indexes, after its last insert (`scribe_db::bulk::index_new_parts`), while
    /// this process's background search indexer waits; what others queued meanwhile is
    /// indexed at the end, in a few large transactions.
    ///
    /// `progress` is called after every transaction (storing, then indexing). Returns one
    /// outcome per session, in order; `Err` only when the database itself failed (what
    /// earlier transactions stored stays).
    pub fn import_many<I>(
        &self,
        exports: I,
        mut progress: impl FnMut(&ImportProgress),
    ) -> Result<Vec<Result<ImportOutcome>>>
    where
        I: IntoIterator<Item = SessionExport>,
    {
        let mut done = ImportProgress::default();
        let mut outcomes = Vec::new();
        {
            let _paused = self.db.pause_background_indexing();
            let mut exports = exports.into_iter().peekable();
            let mut batch: Vec<SessionExport> = Vec::new();
            while exports.peek().is_some() {
                let mut messages = 0;
                while let Some(export) =
                    exports.next_if(|_| batch.is_empty() || messages < IMPORT_BATCH_MESSAGES)
                {
                    messages += export.messages.len();
                    batch.push(export);
                }
                let results = self.import_batch(&batch)?;
                done.sessions += results.len();
                done.messages += results
                    .iter()
                    .zip(&batch)
                    .filter(|(r, _)| matches!(r, Ok(ImportOutcome::Imported { .. })))
                    .map(|(_, e)| e.messages.len())
                    .sum::<usize>();
                outcomes.extend(results);
                batch.clear();
                progress(&done);
            }
        }
        done.to_index = self.db.search_backlog()?;
        progress(&done);
        self.db
            .index_pending_with_progress(scribe_db::IndexBatch::BULK, &mut |run| {
                done.indexed = run.indexed;
                progress(&done);
            })?;
        Ok(outcomes)
    }
}

/// Why a batch of [`SessionService::import_many`] stopped.
#[derive(Debug)]
enum BatchError {
    /// Session `0` of the batch cannot be imported (rolled back with the batch).
    Session(usize, Box<SessionError>),
    /// The database failed (a busy one is retried).
    Db(scribe_db::Error),
}

impl From<scribe_db::Error> for BatchError {
    fn from(err: scribe_db::Error) -> Self {
        BatchError::Db(err)
    }
}

scribe_db::impl_tx_error!(BatchError, BatchError::Db);

impl SessionService {
    /// Imports `batch` in one transaction; a session that fails is taken out and the rest
    /// stored again, each under a savepoint ([`scribe_db::Tx::attempt`]) so that another
    /// failure undoes its session alone. One outcome per session, in order.
    ///
    /// The first try has no savepoints (the common path pays nothing for failures). Before,
    /// every try did without: each failing session cost a whole batch stored and rolled
    /// back again, so a file in which many sessions clash (an export merged into a store
    /// that holds its messages under other sessions) took time in the square of its size.
    fn import_batch(&self, batch: &[SessionExport]) -> Result<Vec<Result<ImportOutcome>>> {
        let mut outcomes: Vec<Option<Result<ImportOutcome>>> = batch.iter().map(|_| None).collect();
        let mut careful = false;
        loop {
            let left: Vec<usize> = (0..batch.len())
                .filter(|&i| outcomes[i].is_none())
                .collect();
            let stored = self.db.write(|tx| {
                let mark = scribe_db::bulk::parts_mark(tx)?;
                let mut stored = Vec::with_capacity(left.len());
                for &i in &left {
                    let outcome = if careful {
                        tx.attempt(|tx| import_tx(tx, &batch[i]))
                    } else {
                        import_tx(tx, &batch[i])
                    };
                    match outcome {
                        Ok(outcome) => {
                            if let ImportOutcome::Imported { session, .. } = &outcome {
                                self.announce(tx, EventKind::Created, session);
                            }
                            stored.push((i, Ok(outcome)));
                        }
                        // Undone by its savepoint; a value the server refused is this
                        // session's too.
                        Err(err) if careful && session_failure(&err) => stored.push((i, Err(err))),
                        Err(SessionError::Db(err)) => return Err(BatchError::Db(err)),
                        Err(err) => return Err(BatchError::Session(i, Box::new(err))),
                    }
                }
                // Both search indexes in this transaction, after its last insert: the
                // rows just written are still in the page cache, and no queue scan, lookup
                // per part or indexing transaction of its own is needed afterwards.
                if let Some(mark) = mark {
                    scribe_db::bulk::index_new_parts(tx, mark)?;
                }
                Ok(stored)
            });
            match stored {
                Ok(stored) => {
                    let mut clashed = Vec::new();
                    for (i, outcome) in stored {
                        if matches!(outcome, Err(SessionError::Conflict { .. })) {
                            clashed.push(i);
                        }
                        outcomes[i] = Some(outcome);
                    }
                    // Explained once every outcome is known (the lookup reads what is
                    // committed, which now holds the batch's other sessions).
                    for i in clashed {
                        if let Some(err) = self.explain_conflict(batch, &outcomes, i) {
                            outcomes[i] = Some(Err(err));
                        }
                    }
                    return Ok(outcomes
                        .into_iter()
                        .map(|o| {
                            o.unwrap_or_else(|| {
                                Err(SessionError::InvalidInput("not imported".into()))
                            })
                        })
                        .collect());
                }
                Err(BatchError::Session(i, err)) => {
                    let err = match *err {
                        err @ SessionError::Conflict { .. } => {
                            self.explain_conflict(batch, &outcomes, i).unwrap_or(err)
                        }
                        err => err,
                    };
                    outcomes[i] = Some(Err(err));
                    careful = true;
                }
                // The server refused a value of one of the sessions (on PostgreSQL a key
                // longer than its btree index takes): which one is unknown, so the batch
                // is stored again with a savepoint each, and the one refused fails by
                // itself, as a session this import refuses does.
                Err(BatchError::Db(err)) if refused_value(&err) && !careful => careful = true,
                Err(BatchError::Db(err)) => return Err(SessionError::from(err)),
            }
        }
    }
}

/// Whether `err`, from one session of a batch stored under its own savepoint, is that
/// session's failure (its data refused: an id taken, an input this import refuses, a
/// value the server cannot take), not the database's (busy, gone), which stops the batch.
fn session_failure(err: &SessionError) -> bool {
    match err {
        SessionError::Db(err) => refused_value(err),
        _ => true,
    }
}

/// Whether the server refused a value written (SQLSTATE class 22, data exception; 54,
/// program limit exceeded), not the transaction or the connection: then one session of a
/// batch is to blame, and the others can still be stored.
fn refused_value(err: &scribe_db::Error) -> bool {
    matches!(err.sqlstate(), Some(code) if code.starts_with("22") || code.starts_with("54"))
}

impl SessionService {
    /// Which id of `batch[failed]` clashed (the database said only "UNIQUE constraint
    /// failed: messages.id", or parts', or files'): a message, part or file version already
    /// stored in another session, or one that a session before it in the batch, not
    /// failed, also holds. `None` when none did (the clash was elsewhere) or the lookup
    /// itself failed: the database's error stands.
    fn explain_conflict(
        &self,
        batch: &[SessionExport],
        outcomes: &[Option<Result<ImportOutcome>>],
        failed: usize,
    ) -> Option<SessionError> {
        let export = &batch[failed];
        let ids: Vec<(&str, &str)> = export_ids(export).collect();
        let stored = self
            .db
            .read(|tx| -> Result<Vec<(&str, String, String)>> {
                let mut found = Vec::new();
                for kind in [MESSAGE, PART, FILE_VERSION] {
                    let mine: Vec<&str> = ids
                        .iter()
                        .filter(|(what, _)| *what == kind)
                        .map(|(_, id)| *id)
                        .collect();
                    for chunk in mine.chunks(500) {
                        let holders = match kind {
                            MESSAGE => store::message_sessions(tx, chunk)?,
                            PART => store::part_sessions(tx, chunk)?,
                            _ => file_sessions(tx, chunk)?,
                        };
                        found.extend(holders.into_iter().map(|(id, holder)| (kind, id, holder)));
                    }
                }
                Ok(found)
            })
            .ok()?;
        let clash = |what: &str, id: &str, holder: &str, when: &str| {
            SessionError::conflict(format!(
                "{what} {id} is already in session {holder}, {when}; a {what} belongs to one \
                 session: remove it from one of them and import again"
            ))
        };
        // A session of this batch stored before `failed` is "earlier in this import"; one
        // stored after it (which the failed session's rows, undone, no longer kept from
        // its ids) is no answer; any other holder was stored before the import.
        let imported_at = |holder: &str| {
            batch.iter().zip(outcomes).position(|(other, outcome)| {
                other.session.id == holder
                    && matches!(outcome, Some(Ok(ImportOutcome::Imported { .. })))
            })
        };
        if let Some((what, id, holder, when)) = stored.into_iter().find_map(|(what, id, holder)| {
            if holder == export.session.id {
                return None;
            }
            match imported_at(&holder) {
                Some(at) if at < failed => Some((what, id, holder, "earlier in this import")),
                Some(_) => None,
                None => Some((what, id, holder, "stored before")),
            }
        }) {
            return Some(clash(what, &id, &holder, when));
        }
        let mine: BTreeSet<(&str, &str)> = ids.into_iter().collect();
        batch
            .iter()
            .zip(outcomes)
            .take(failed)
            .filter(|(_, outcome)| !matches!(outcome, Some(Err(_))))
            .find_map(|(other, _)| {
                let (what, id) = export_ids(other).find(|key| mine.contains(key))?;
                Some(clash(what, id, &other.session.id, "earlier in this import"))
            })
    }
}

fn import_tx(tx: &mut Tx<'_>, export: &SessionExport) -> Result<ImportOutcome> {
    let s = &export.session;
    // Every id the file gives, before anything is read or written: the same refusal on
    // both backends (PostgreSQL refused an id longer than its index takes itself, with
    // a raw message naming the index).
    check_ids(export)?;
    if tx.q().session_exists(&s.id)? {
        return Ok(ImportOutcome::Skipped {
            reason: format!("session {} is already in this database", s.id),
        });
    }
    if s.id.trim().is_empty() {
        return Err(SessionError::InvalidInput(
            "session id must not be empty".to_owned(),
        ));
    }
    // The same title rules as every other way in: an export may come from an older or
    // edited file, so its title is normalized and length-checked, never trusted.
    // A title another stored session holds is numbered as the history importers number
    // it (`t #2`): merging two stores keeps every session.
    let title = match normalize_optional_title(s.title.as_deref())? {
        Some(title) => Some(free_title(tx, &title, &s.id)?),
        None => None,
    };
    if let Some(stray) = export.messages.iter().find(|m| m.session_id != s.id) {
        return Err(SessionError::InvalidInput(format!(
            "message {} belongs to session {}, not {}",
            stray.id, stray.session_id, s.id
        )));
    }
    if let Some(stray) = export.files.iter().find(|f| f.session_id != s.id) {
        return Err(SessionError::InvalidInput(format!(
            "file version {} belongs to session {}, not {}",
            stray.id, stray.session_id, s.id
        )));
    }
    check_file_versions(&export.files)?;
    check_repeated_ids(export)?;
    let (parent, unlinked_parent) = match &s.parent_session_id {
        Some(parent) if !tx.q().session_exists(parent)? => (None, Some(parent.clone())),
        other => (other.as_deref(), None),
    };
    crate::service::ensure_storable_texts(
        tx,
        &s.id,
        s.directory.as_deref(),
        s.system_prompt.as_deref(),
        s.model.as_deref(),
    )?;
    for file in &export.files {
        crate::files::ensure_storable_file(tx, &s.id, &file.path, &file.content)?;
    }
    let model_config = json_text(s.model_config.as_ref());
    let permission = json_text(s.permission.as_ref());
    tx.q().import_session(&q::ImportSessionParams {
        id: &s.id,
        parent_session_id: parent,
        kind: s.kind.as_str(),
        source: &s.source,
        user_id: s.user_id.as_deref(),
        directory: s.directory.as_deref(),
        title: title.as_deref(),
        model: s.model.as_deref(),
        model_config: model_config.as_deref(),
        system_prompt: s.system_prompt.as_deref(),
        permission: permission.as_deref(),
        api_call_count: s.api_call_count,
        input_tokens: s.tokens.input,
        output_tokens: s.tokens.output,
        cache_read_tokens: s.tokens.cache_read,
        cache_write_tokens: s.tokens.cache_write,
        reasoning_tokens: s.tokens.reasoning,
        estimated_cost_usd: s.estimated_cost_usd,
        actual_cost_usd: s.actual_cost_usd,
        billing_provider: s.billing_provider.as_deref(),
        billing_base_url: s.billing_base_url.as_deref(),
        billing_mode: s.billing_mode.as_deref(),
        cost_status: s.cost_status.as_deref(),
        cost_source: s.cost_source.as_deref(),
        pricing_version: s.pricing_version.as_deref(),
        created_at: s.created_at,
        updated_at: s.updated_at,
        ended_at: s.ended_at,
        end_reason: s.end_reason.as_deref(),
        archived_at: s.archived_at,
    })?;
    // Many rows per statement (the message crate's bulk path); the same rows and errors
    // as storing them one by one.
    scribe_message::bulk::insert_messages(tx, &export.messages)?;
    for file in &export.files {
        tx.q().import_file_version(&q::ImportFileVersionParams {
            id: &file.id,
            session_id: &file.session_id,
            path: &file.path,
            content: &file.content,
            version: file.version,
            created_at: file.created_at,
            updated_at: file.updated_at,
        })?;
    }
    if let Some(mark) = &export.rolled_up {
        // An older export does not say what was added: the child's totals are what a
        // roll-up adds (as the V4 migration assumes for old marks).
        let added = mark.added.unwrap_or(UsageDelta {
            tokens: s.tokens,
            api_calls: s.api_call_count,
            tool_calls: 0,
            cost_usd: s.estimated_cost_usd,
            actual_cost_usd: s.actual_cost_usd,
        });
        tx.q()
            .import_session_roll_up(&q::ImportSessionRollUpParams {
                child_id: &s.id,
                parent_id: &mark.parent_id,
                rolled_up_at: mark.rolled_up_at,
                input_tokens: added.tokens.input,
                output_tokens: added.tokens.output,
                cache_read_tokens: added.tokens.cache_read,
                cache_write_tokens: added.tokens.cache_write,
                reasoning_tokens: added.tokens.reasoning,
                api_call_count: added.api_calls,
                estimated_cost_usd: added.cost_usd,
                actual_cost_usd: added.actual_cost_usd,
            })?;
    }
    // A summary message that was not exported cannot be linked (foreign key).
    let summary = match s.summary_message_id.as_deref() {
        Some(id) if export.messages.iter().any(|m| m.id == id) => Some(id),
        _ => None,
    };
    let restored = tx
        .q()
        .restore_imported_session(&q::RestoreImportedSessionParams {
            summary_message_id: summary,
            compacting_at: s.compacting_at,
            tool_call_count: s.tool_call_count,
            updated_at: s.updated_at,
            id: &s.id,
        })?
        .ok_or_else(|| SessionError::not_found("session", &s.id))?;
    Ok(ImportOutcome::Imported {
        session: Box::new(Session::try_from(restored)?),
        unlinked_parent,
    })
}

/// No message, part or file version of `export` given twice (an edited file, one
/// concatenated from two): its session fails saying which, not with a constraint's words.
fn check_repeated_ids(export: &SessionExport) -> Result<()> {
    let mut seen = BTreeSet::new();
    for (what, id) in export_ids(export) {
        if !seen.insert((what, id)) {
            return Err(SessionError::InvalidInput(format!(
                "{what} {id} is in session {} twice",
                export.session.id
            )));
        }
    }
    Ok(())
}

/// The kinds of id an export gives that the store keeps unique across sessions, as
/// [`export_ids`] names them.
const MESSAGE: &str = "message";
const PART: &str = "part";
const FILE_VERSION: &str = "file version";

/// Every message, part and file version id of `export`, each with its kind.
fn export_ids(export: &SessionExport) -> impl Iterator<Item = (&'static str, &str)> {
    let messages = export.messages.iter().map(|m| (MESSAGE, m.id.as_str()));
    let parts = export
        .messages
        .iter()
        .flat_map(|m| m.parts.iter().map(|p| (PART, p.id.as_str())));
    let files = export.files.iter().map(|f| (FILE_VERSION, f.id.as_str()));
    messages.chain(parts).chain(files)
}

/// The rules the files table keeps, checked so that an export breaking them fails its
/// session with words that say what is wrong (an edited or another program's file),
/// not a constraint's: a path's versions are numbered from 1 (`CHECK (version > 0)`), and
/// no path has the same version twice.
fn check_file_versions(files: &[FileVersion]) -> Result<()> {
    let mut seen = BTreeSet::new();
    for file in files {
        if file.version < 1 {
            return Err(SessionError::InvalidInput(format!(
                "file version {} of {} is numbered {}; a path's versions are numbered from 1",
                file.id, file.path, file.version
            )));
        }
        if !seen.insert((file.path.as_str(), file.version)) {
            return Err(SessionError::InvalidInput(format!(
                "{} has version {} twice (file version {})",
                file.path, file.version, file.id
            )));
        }
    }
    Ok(())
}

/// [`SessionError::IdTooLong`] for the first id of `export` (its session's, its source's
/// or user's, a message's, a part's, a file version's) longer than
/// [`scribe_db::ids::MAX_ID_BYTES`].
fn check_ids(export: &SessionExport) -> Result<()> {
    use scribe_db::ids::check_id;
    let session = &export.session.id;
    check_id("session", session)?;
    let named = |err: scribe_db::ids::IdTooLong| err.in_session(session);
    check_id("source", &export.session.source).map_err(named)?;
    if let Some(user) = &export.session.user_id {
        check_id("user", user).map_err(named)?;
    }
    for message in &export.messages {
        check_id("message", &message.id).map_err(named)?;
        for part in &message.parts {
            check_id("part", &part.id).map_err(named)?;
        }
    }
    for file in &export.files {
        check_id("file version", &file.id).map_err(named)?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn session(id: &str, parent: Option<&str>) -> Session {
        let json = serde_json::json!({
            "id": id, "parent_session_id": parent, "kind": "normal", "source": "cli",
            "user_id": null, "directory": null, "title": null, "model": null,
            "model_config": null, "system_prompt": null, "permission": null,
            "message_count": 0, "tool_call_count": 0, "api_call_count": 0,
            "tokens": {}, "estimated_cost_usd": 0.0, "actual_cost_usd": null,
            "billing_provider": null, "billing_base_url": null, "billing_mode": null,
            "cost_status": null, "cost_source": null, "pricing_version": null,
            "summary_message_id": null, "created_at": 0, "updated_at": 0, "ended_at": null,
            "end_reason": null, "archived_at": null, "compacting_at": null
        });
        serde_json::from_value(json).unwrap()
    }

    #[test]
    fn parents_come_before_children() {
        let list = vec![
            session("c", Some("b")),
            session("x", Some("outside")),
            session("b", Some("a")),
            session("a", None),
            session("d", Some("a")),
        ];
        let ids: Vec<String> = parents_first(list).into_iter().map(|s| s.id).collect();
        assert_eq!(ids, ["a", "b", "c", "x", "d"]);
    }

    #[test]
    fn a_cycle_does_not_loop() {
        let list = vec![session("a", Some("b")), session("b", Some("a"))];
        assert_eq!(parents_first(list).len(), 2);
    }
}
