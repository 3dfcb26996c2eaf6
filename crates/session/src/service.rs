//! [`SessionService`]: session lifecycle, titles and lineage over a shared [`Database`],
//! announcing every committed change on a [`Broker<Session>`].
//!
//! Each public method is one `BEGIN IMMEDIATE` transaction. Its events are queued inside
//! it ([`Tx::after_commit`]) and published only after it commits, so a subscriber never
//! hears about a change that was rolled back, and a method that changes nothing (ending
//! an ended session) publishes nothing. The `_tx` methods make the same changes inside
//! another service's transaction and queue the same events on it; a session changed
//! twice in one transaction is announced once, as it committed.

use std::sync::Arc;

use scribe_db::filters::{self, SessionFilter};
use scribe_db::ids::{Prefix, new_id};
use scribe_db::queries as q;
use scribe_db::{Database, Reads, Tx};
use scribe_message::store;
use scribe_pubsub::{Broker, EventKind, Subscription};
use serde_json::Value;

use crate::error::{Result, SessionError};
use crate::session::{Session, SessionKind, json_text, sessions};
use crate::title::{
    MAX_TITLE_CHARS, lineage_title, normalize_optional_title, normalize_title, split_lineage,
};

/// What a new session starts with. `source` defaults to `"cli"`, `kind` to
/// [`SessionKind::Normal`]; every other field is optional.
#[derive(Debug, Clone, PartialEq)]
pub struct NewSession {
    /// The session it comes from; required for every kind but [`SessionKind::Normal`].
    pub parent_session_id: Option<String>,
    /// What the session is for.
    pub kind: SessionKind,
    /// Where it is started: `cli`, `tui`, `telegram` … (not empty).
    pub source: String,
    /// Who it belongs to.
    pub user_id: Option<String>,
    /// The project directory.
    pub directory: Option<String>,
    /// A title; normalized, and it must not be in use.
    pub title: Option<String>,
    /// The model (`provider/model`).
    pub model: Option<String>,
    /// Model settings as JSON.
    pub model_config: Option<Value>,
    /// The system prompt.
    pub system_prompt: Option<String>,
    /// The permission ruleset as JSON.
    pub permission: Option<Value>,
    /// The provider that bills the calls.
    pub billing_provider: Option<String>,
    /// The provider's API base URL.
    pub billing_base_url: Option<String>,
    /// How calls are billed.
    pub billing_mode: Option<String>,
}

impl Default for NewSession {
    fn default() -> Self {
        NewSession {
            parent_session_id: None,
            kind: SessionKind::Normal,
            source: "cli".to_owned(),
            user_id: None,
            directory: None,
            title: None,
            model: None,
            model_config: None,
            system_prompt: None,
            permission: None,
            billing_provider: None,
            billing_base_url: None,
            billing_mode: None,
        }
    }
}

impl NewSession {
    /// A normal session with this title.
    pub fn titled(title: impl Into<String>) -> Self {
        NewSession {
            title: Some(title.into()),
            ..NewSession::default()
        }
    }
}

/// The session service. Cheap to share behind an `Arc`; `Send + Sync`.
///
/// ```
/// use std::sync::Arc;
/// use scribe_db::Database;
/// use scribe_pubsub::EventKind;
/// use scribe_session::{NewSession, SessionService, UsageDelta};
///
/// let svc = SessionService::new(Arc::new(Database::open_in_memory()?));
/// let events = svc.subscribe();
/// let s = svc.create(NewSession::titled("  Fix   the build "))?;
/// assert_eq!(s.title.as_deref(), Some("Fix the build"));
/// assert_eq!(svc.next_title_in_lineage("Fix the build")?, "Fix the build #2");
/// // Creating in the lineage picks that title in the same transaction.
/// let again = svc.create_in_lineage(NewSession::titled("Fix the build"))?;
/// assert_eq!(again.title.as_deref(), Some("Fix the build #2"));
/// let s = svc.add_usage(&s.id, &UsageDelta { api_calls: 1, cost_usd: 0.25, ..UsageDelta::default() })?;
/// assert_eq!(s.estimated_cost_usd, 0.25);
/// let created = events.try_recv().unwrap();
/// assert_eq!((created.kind, created.payload.id), (EventKind::Created, s.id));
/// # Ok::<(), scribe_session::SessionError>(())
/// ```
#[derive(Debug)]
pub struct SessionService {
    pub(crate) db: Arc<Database>,
    pub(crate) broker: Arc<Broker<Session>>,
}

/// The session `id`, or [`SessionError::NotFound`].
pub(crate) fn load(tx: &mut dyn Reads, id: &str) -> Result<Session> {
    // A value of the wrong kind in the row (another program's write) names the session.
    let row = tx
        .reads()
        .get_session(id)
        .map_err(|err| SessionError::from(err).in_session(id))?;
    match row {
        Some(row) => Session::try_from(row),
        None => Err(SessionError::not_found("session", id)),
    }
}

/// Deletes `session`'s conversation inside `tx`, keeping the session (`clear`): its
/// messages and parts, through the message store (parts first), and before them the link
/// to its summary message. The link would go by its `ON DELETE SET NULL`, but PostgreSQL
/// checks the session row's foreign key at every counter update the deletes make to that
/// row (a row this transaction already changed), before the link's action has run, and
/// refused the clear of a compacted session. Returns how many messages went.
pub(crate) fn delete_conversation(tx: &mut Tx<'_>, session: &Session) -> Result<usize> {
    if session.summary_message_id.is_some() {
        let now = tx.now();
        tx.q()
            .set_session_summary_message(&q::SetSessionSummaryMessageParams {
                summary_message_id: None,
                now,
                id: &session.id,
            })?;
    }
    Ok(store::delete_session_messages(tx, &session.id)?)
}

/// Fails with [`SessionError::TitleInUse`] if another session than `except` holds `title`.
fn ensure_title_free(tx: &mut dyn Reads, title: &str, except: Option<&str>) -> Result<()> {
    if let Some(holder) = tx.reads().get_session_by_title(title)?
        && Some(holder.id.as_str()) != except
    {
        return Err(SessionError::TitleInUse {
            title: title.to_owned(),
            session_id: holder.id,
        });
    }
    Ok(())
}

fn ensure_not_empty(what: &str, value: &str) -> Result<()> {
    if value.trim().is_empty() {
        return Err(SessionError::InvalidInput(format!(
            "{what} must not be empty"
        )));
    }
    Ok(())
}

/// Refuses, on PostgreSQL, a session's free-text column holding the NUL character, which
/// PostgreSQL's text cannot store (SQLite stores it): [`scribe_db::Error::NulInText`]
/// naming the column and the session, before anything of the write is stored. Columns not
/// listed here get the same error from the server, naming no column.
pub(crate) fn ensure_storable_texts(
    tx: &Tx<'_>,
    id: &str,
    directory: Option<&str>,
    system_prompt: Option<&str>,
    model: Option<&str>,
) -> Result<()> {
    for (name, value) in [
        ("directory", directory),
        ("system prompt", system_prompt),
        ("model", model),
    ] {
        if let Some(value) = value {
            scribe_db::storable_text(
                tx.backend(),
                || format!("the {name} of session {id}"),
                value,
            )?;
        }
    }
    Ok(())
}

/// Inserts a session with `id` after checking everything a caller can get wrong, so the
/// caller gets a typed error rather than a constraint failure.
pub(crate) fn insert_session(tx: &mut Tx<'_>, id: &str, new: &NewSession) -> Result<Session> {
    ensure_not_empty("session id", id)?;
    scribe_db::ids::check_id("session", id)?;
    ensure_not_empty("source", &new.source)?;
    scribe_db::ids::check_id("source", &new.source)?;
    if let Some(user) = &new.user_id {
        scribe_db::ids::check_id("user", user)?;
    }
    let title = normalize_optional_title(new.title.as_deref())?;
    match (&new.parent_session_id, new.kind) {
        (None, SessionKind::Normal) => {}
        (None, kind) => {
            return Err(SessionError::InvalidInput(format!(
                "a {kind} session needs a parent session"
            )));
        }
        (Some(parent), _) => {
            if !tx.q().session_exists(parent)? {
                return Err(SessionError::not_found("parent session", parent.as_str()));
            }
        }
    }
    if tx.q().session_exists(id)? {
        return Err(SessionError::conflict(format!(
            "session id {id} is already in use"
        )));
    }
    if let Some(title) = &title {
        ensure_title_free(tx, title, None)?;
    }
    ensure_storable_texts(
        tx,
        id,
        new.directory.as_deref(),
        new.system_prompt.as_deref(),
        new.model.as_deref(),
    )?;
    let model_config = json_text(new.model_config.as_ref());
    let permission = json_text(new.permission.as_ref());
    let now = tx.now();
    let row = tx.q().create_session(&q::CreateSessionParams {
        id,
        parent_session_id: new.parent_session_id.as_deref(),
        kind: new.kind.as_str(),
        source: &new.source,
        user_id: new.user_id.as_deref(),
        directory: new.directory.as_deref(),
        title: title.as_deref(),
        model: new.model.as_deref(),
        model_config: model_config.as_deref(),
        system_prompt: new.system_prompt.as_deref(),
        permission: permission.as_deref(),
        billing_provider: new.billing_provider.as_deref(),
        billing_base_url: new.billing_base_url.as_deref(),
        billing_mode: new.billing_mode.as_deref(),
        now,
    })?;
    Session::try_from(row)
}

/// A child of `parent` that inherits where and for whom it runs.
pub(crate) fn child_of(parent: &Session, kind: SessionKind) -> NewSession {
    NewSession {
        parent_session_id: Some(parent.id.clone()),
        kind,
        source: parent.source.clone(),
        user_id: parent.user_id.clone(),
        directory: parent.directory.clone(),
        model: parent.model.clone(),
        model_config: parent.model_config.clone(),
        permission: parent.permission.clone(),
        billing_provider: parent.billing_provider.clone(),
        billing_base_url: parent.billing_base_url.clone(),
        billing_mode: parent.billing_mode.clone(),
        ..NewSession::default()
    }
}

/// The sessions matching `filter` whose rows can be read; the error of each that cannot
/// ([`SessionError::is_unreadable`]) goes to `unreadable`. Every other error fails it.
pub(crate) fn list_readable(
    tx: &mut scribe_db::ReadTx<'_>,
    filter: &SessionFilter,
    unreadable: &mut Vec<SessionError>,
) -> Result<Vec<Session>> {
    let rows = filters::list_sessions_skipping(tx, filter, &mut |err| {
        unreadable.push(SessionError::from(err));
        Ok(())
    })?;
    let mut listed = Vec::with_capacity(rows.len());
    for row in rows {
        match Session::try_from(row) {
            Ok(session) => listed.push(session),
            Err(err) if err.is_unreadable() => unreadable.push(err),
            Err(err) => return Err(err),
        }
    }
    Ok(listed)
}

impl SessionService {
    /// A service over `db` with its own broker ([`scribe_pubsub::DEFAULT_BUFFER`] events
    /// per subscriber).
    pub fn new(db: Arc<Database>) -> Self {
        SessionService::with_broker(db, Broker::new())
    }

    /// A service publishing on `broker` (e.g. one with a larger buffer).
    pub fn with_broker(db: Arc<Database>, broker: Broker<Session>) -> Self {
        SessionService {
            db,
            broker: Arc::new(broker),
        }
    }

    /// The database the service works on.
    pub fn database(&self) -> &Arc<Database> {
        &self.db
    }

    /// The broker session events are published on.
    pub fn broker(&self) -> &Broker<Session> {
        &self.broker
    }

    /// A subscription to every session change from now on: `created` (payload: the new
    /// session), `updated` (the new state), `deleted` (the last state).
    pub fn subscribe(&self) -> Subscription<Session> {
        self.broker.subscribe()
    }

    /// Reads `id` and publishes it as `updated`: for a change the service did not make
    /// itself (a migration tool, raw SQL), once it committed. Changes through this
    /// service, its `_tx` methods included, are announced already.
    pub fn notify_changed(&self, id: &str) -> Result<Session> {
        let session = self.get(id)?;
        self.broker.publish_updated(session.clone());
        Ok(session)
    }

    /// Queues `kind` for `session` on `tx` ([`scribe_message::queue_event`]: `updated`
    /// goes out once per transaction, as committed).
    pub(crate) fn announce(&self, tx: &mut Tx<'_>, kind: EventKind, session: &Session) {
        scribe_message::queue_event(tx, &self.broker, kind, &session.id, session.clone());
    }

    /// Creates a session with a new `ses_…` id. A title another session holds is refused:
    /// to take the next free title of its lineage instead, use
    /// [`create_in_lineage`](SessionService::create_in_lineage).
    ///
    /// Errors: [`SessionError::TitleInUse`], [`SessionError::InvalidTitle`],
    /// [`SessionError::TitleTooLong`], [`SessionError::NotFound`] (parent),
    /// [`SessionError::InvalidInput`] (empty source, a non-normal kind without parent),
    /// [`SessionError::IdTooLong`] (a source or user id longer than
    /// [`scribe_db::ids::MAX_ID_BYTES`]).
    pub fn create(&self, new: NewSession) -> Result<Session> {
        let id = new_id(Prefix::Session);
        self.db.write(|tx| self.create_tx(tx, &id, &new))
    }

    /// [`SessionService::create`] with the id `id`, inside the caller's transaction;
    /// queues `created`.
    pub fn create_tx(&self, tx: &mut Tx<'_>, id: &str, new: &NewSession) -> Result<Session> {
        let session = insert_session(tx, id, new)?;
        self.announce(tx, EventKind::Created, &session);
        Ok(session)
    }

    /// Creates a session titled with the next free title of the lineage `new.title`
    /// belongs to (`t` when no session of the lineage exists, else `t #N+1`, as
    /// [`next_title_in_lineage`](SessionService::next_title_in_lineage) gives it), read and
    /// used in ONE write transaction: two processes creating in one lineage at once each
    /// get a title of their own, never [`SessionError::TitleInUse`] (the two-step
    /// `next_title_in_lineage` then `create` can race).
    ///
    /// Errors: [`SessionError::InvalidInput`] when `new.title` is `None`, the title errors
    /// of [`create`](SessionService::create) (a title too long once numbered), and the rest
    /// of `create`'s.
    pub fn create_in_lineage(&self, new: NewSession) -> Result<Session> {
        let id = new_id(Prefix::Session);
        self.db.write(|tx| self.create_in_lineage_tx(tx, &id, &new))
    }

    /// [`SessionService::create_in_lineage`] with the id `id`, inside the caller's
    /// transaction; queues `created`.
    pub fn create_in_lineage_tx(
        &self,
        tx: &mut Tx<'_>,
        id: &str,
        new: &NewSession,
    ) -> Result<Session> {
        let Some(title) = &new.title else {
            return Err(SessionError::InvalidInput(
                "a session created in a lineage needs a title".to_owned(),
            ));
        };
        let title = next_title_tx(tx, &normalize_title(title)?)?;
        let new = NewSession {
            title: Some(title),
            ..new.clone()
        };
        self.create_tx(tx, id, &new)
    }

    /// Creates the background session that generates `parent_id`'s title: id
    /// `title-{parent_id}`, kind [`SessionKind::Title`], linked to the parent, no title.
    /// There is one per parent: a second is a [`SessionError::Conflict`].
    pub fn create_title_session(&self, parent_id: &str) -> Result<Session> {
        let id = format!("title-{parent_id}");
        self.db.write(|tx| {
            let parent = load(tx, parent_id)?;
            self.create_tx(tx, &id, &child_of(&parent, SessionKind::Title))
        })
    }

    /// Creates a sub-agent's session: its id is `tool_call_id` (the call that spawned it),
    /// kind [`SessionKind::Task`], linked to `parent_id`, inheriting its source, user,
    /// directory, model and permissions. `title` is optional and must be free.
    pub fn create_task_session(
        &self,
        parent_id: &str,
        tool_call_id: &str,
        title: Option<&str>,
    ) -> Result<Session> {
        self.db.write(|tx| {
            let parent = load(tx, parent_id)?;
            let mut new = child_of(&parent, SessionKind::Task);
            new.title = title.map(str::to_owned);
            self.create_tx(tx, tool_call_id, &new)
        })
    }

    /// Creates the continuation of `parent_id` after compaction: kind
    /// [`SessionKind::Continuation`], inheriting the parent's settings, titled with the
    /// next title of the parent's lineage (`t #2`, `t #3` …) when the parent has a title.
    pub fn create_continuation(&self, parent_id: &str) -> Result<Session> {
        self.db
            .write(|tx| self.create_continuation_tx(tx, parent_id))
    }

    /// [`SessionService::create_continuation`] inside the caller's transaction, so the
    /// continuation commits (or rolls back) with the rest of a compaction; queues
    /// `created`.
    pub fn create_continuation_tx(&self, tx: &mut Tx<'_>, parent_id: &str) -> Result<Session> {
        let parent = load(tx, parent_id)?;
        let mut new = child_of(&parent, SessionKind::Continuation);
        new.system_prompt = parent.system_prompt.clone();
        new.title = parent.title.clone();
        let id = new_id(Prefix::Session);
        if new.title.is_some() {
            self.create_in_lineage_tx(tx, &id, &new)
        } else {
            self.create_tx(tx, &id, &new)
        }
    }

    /// Sets the title of `id` to `title` only if it has none, inside the caller's
    /// transaction: check and set cannot be separated by another writer. A title in use
    /// becomes the next free title of its lineage. Returns the session when the title was
    /// set (and queues `updated`), `None` when it already had one.
    pub fn set_title_if_unset_tx(
        &self,
        tx: &mut Tx<'_>,
        id: &str,
        title: &str,
    ) -> Result<Option<Session>> {
        let mut session = load(tx, id)?;
        if session.title.is_some() {
            return Ok(None);
        }
        let title = normalize_title(title)?;
        let title = match ensure_title_free(tx, &title, Some(id)) {
            Ok(()) => title,
            Err(SessionError::TitleInUse { .. }) => next_title_tx(tx, &title)?,
            Err(other) => return Err(other),
        };
        session.title = Some(title);
        let session = store_mutable(tx, id, &session)?;
        self.announce(tx, EventKind::Updated, &session);
        Ok(Some(session))
    }

    /// The session `id`, or [`SessionError::NotFound`].
    pub fn get(&self, id: &str) -> Result<Session> {
        self.db.read(|tx| load(tx, id))
    }

    /// The session `id` as `tx` sees it, or [`SessionError::NotFound`].
    pub fn get_tx(tx: &mut dyn Reads, id: &str) -> Result<Session> {
        load(tx, id)
    }

    /// The sessions matching `filter`, in its order (by default newest first: creation
    /// time, then id, descending), limited and offset as it says.
    pub fn list(&self, filter: &SessionFilter) -> Result<Vec<Session>> {
        self.db
            .read(|tx| sessions(filters::list_sessions(tx, filter)?))
    }

    /// [`list`](Self::list) that goes on past a session whose row cannot be read
    /// ([`SessionError::is_unreadable`]: a value another program wrote into an SQLite
    /// column, a field that does not decode): `left_out` gets the error naming each such
    /// session, once, and the list holds the others (so fewer than `filter.limit` when one
    /// was on the page). Every other error fails the list.
    pub fn list_skipping(
        &self,
        filter: &SessionFilter,
        left_out: &mut dyn FnMut(SessionError),
    ) -> Result<Vec<Session>> {
        let mut unreadable = Vec::new();
        let listed = self.db.read(|tx| {
            // A busy read is tried again: only the last try's errors count.
            unreadable.clear();
            list_readable(tx, filter, &mut unreadable)
        })?;
        for err in unreadable {
            left_out(err);
        }
        Ok(listed)
    }

    /// How many sessions match `filter` (its order, limit and offset ignored).
    pub fn count(&self, filter: &SessionFilter) -> Result<i64> {
        self.db.read(|tx| Ok(filters::count_sessions(tx, filter)?))
    }

    /// Reads `id`, lets `change` edit it, and stores the mutable fields in one transaction:
    /// title, directory, model, model_config, system_prompt, permission,
    /// summary_message_id and the billing fields. Edits to anything else (id, kind,
    /// counters, usage, times) are ignored: those have their own operations.
    ///
    /// `change` may run more than once if the database is busy, so it should only edit the
    /// session it is given.
    pub fn update(&self, id: &str, mut change: impl FnMut(&mut Session)) -> Result<Session> {
        self.db.write(|tx| {
            let mut session = load(tx, id)?;
            change(&mut session);
            let session = store_mutable(tx, id, &session)?;
            self.announce(tx, EventKind::Updated, &session);
            Ok(session)
        })
    }

    /// Stores the mutable fields of `session` (see [`SessionService::update`]) over the
    /// stored session with its id, and returns the result.
    pub fn save(&self, session: &Session) -> Result<Session> {
        self.db.write(|tx| {
            load(tx, &session.id)?;
            let saved = store_mutable(tx, &session.id, session)?;
            self.announce(tx, EventKind::Updated, &saved);
            Ok(saved)
        })
    }

    /// Sets or clears (`None`) the title of `id`.
    pub fn set_title(&self, id: &str, title: Option<&str>) -> Result<Session> {
        let title = normalize_optional_title(title)?;
        self.update(id, |session| session.title.clone_from(&title))
    }

    /// Deletes `id` with its messages, parts and files. Its children stay, with their
    /// parent link cleared. Publishes `deleted` with the last state, then `updated` for
    /// every unlinked child.
    pub fn delete(&self, id: &str) -> Result<Session> {
        self.db.write(|tx| {
            let (session, unlinked) = self.delete_tx(tx, id)?;
            self.announce(tx, EventKind::Deleted, &session);
            for child in &unlinked {
                self.announce(tx, EventKind::Updated, child);
            }
            Ok(session)
        })
    }

    /// Deletes `id` and returns its last state plus the children whose parent link the
    /// database cleared (as they are now). Queues nothing: the callers announce.
    pub(crate) fn delete_tx(&self, tx: &mut Tx<'_>, id: &str) -> Result<(Session, Vec<Session>)> {
        let session = load(tx, id)?;
        let children: Vec<String> = tx
            .q()
            .list_child_sessions(id)?
            .into_iter()
            .map(|row| row.id)
            .collect();
        // Messages, parts and files go by the cascade (on SQLite the parts first: see
        // the message store's before_session_delete).
        store::before_session_delete(tx, id)?;
        tx.q().delete_session(id)?;
        let mut unlinked = Vec::with_capacity(children.len());
        for child in &children {
            // A child may itself have gone in the same transaction (prune).
            if let Some(row) = tx.q().get_session(child)? {
                unlinked.push(Session::try_from(row)?);
            }
        }
        Ok((session, unlinked))
    }

    /// Archives `id`. Archiving an archived session keeps its first archive time and
    /// publishes nothing.
    pub fn archive(&self, id: &str) -> Result<Session> {
        self.db.write(|tx| {
            self.change_if(tx, id, |tx, now| {
                Ok(tx
                    .q()
                    .archive_session(&q::ArchiveSessionParams { now, id })?
                    > 0)
            })
        })
    }

    /// Unarchives `id`; a no-op (no event) when it is not archived.
    pub fn unarchive(&self, id: &str) -> Result<Session> {
        self.db.write(|tx| {
            self.change_if(tx, id, |tx, now| {
                if load(tx, id)?.archived_at.is_none() {
                    return Ok(false);
                }
                Ok(tx
                    .q()
                    .unarchive_session(&q::UnarchiveSessionParams { now, id })?
                    > 0)
            })
        })
    }

    /// Ends `id` with `reason`. The first end wins: ending an ended session keeps its
    /// first reason and time, returns it unchanged and publishes nothing.
    pub fn end(&self, id: &str, reason: &str) -> Result<Session> {
        self.db.write(|tx| self.end_tx(tx, id, reason))
    }

    /// [`SessionService::end`] inside the caller's transaction; queues `updated` when it
    /// ended the session.
    pub fn end_tx(&self, tx: &mut Tx<'_>, id: &str, reason: &str) -> Result<Session> {
        self.change_if(tx, id, |tx, now| {
            let params = q::EndSessionParams {
                now,
                end_reason: Some(reason),
                id,
            };
            Ok(tx.q().end_session(&params)? > 0)
        })
    }

    /// Reopens an ended session (clears its end time and reason); a no-op (no event) when
    /// it is active.
    pub fn reopen(&self, id: &str) -> Result<Session> {
        self.db.write(|tx| {
            self.change_if(tx, id, |tx, now| {
                if load(tx, id)?.ended_at.is_none() {
                    return Ok(false);
                }
                Ok(tx.q().reopen_session(&q::ReopenSessionParams { now, id })? > 0)
            })
        })
    }

    /// Marks a compaction of `id` as running (`Some(now)`) or finished (`None`).
    pub fn set_compacting(&self, id: &str, compacting: bool) -> Result<Session> {
        self.db.write(|tx| {
            self.change_if(tx, id, |tx, now| {
                let params = q::SetSessionCompactingParams {
                    compacting_at: compacting.then_some(now),
                    now,
                    id,
                };
                Ok(tx.q().set_session_compacting(&params)? > 0)
            })
        })
    }

    /// Claims `id` for a compaction: sets `compacting_at` to now unless a run holds it
    /// whose mark is newer than `stale_after` (an older mark is a crashed run's, and is
    /// taken over). One transaction, so two compactors never both win; `updated` is
    /// published when it was claimed.
    pub fn claim_compaction(
        &self,
        id: &str,
        stale_after: std::time::Duration,
    ) -> Result<CompactionClaim> {
        let stale_ms = i64::try_from(stale_after.as_millis()).unwrap_or(i64::MAX);
        self.db.write(|tx| {
            let now = tx.now();
            let claimed = tx
                .q()
                .claim_session_compaction(&q::ClaimSessionCompactionParams {
                    now,
                    id,
                    stale_before: now.saturating_sub(stale_ms),
                })?;
            let session = load(tx, id)?;
            if claimed > 0 {
                self.announce(tx, EventKind::Updated, &session);
                return Ok(CompactionClaim::Claimed(session));
            }
            Ok(if session.ended_at.is_some() {
                CompactionClaim::Ended(session)
            } else {
                CompactionClaim::Held {
                    since_ms: session.compacting_at.unwrap_or_default(),
                }
            })
        })
    }

    /// Stores what a prompt implies for its session, inside the caller's transaction: the
    /// model it used and, when given, its permission rules (JSON text); queues `updated`.
    pub fn set_prompt_settings_tx(
        &self,
        tx: &mut Tx<'_>,
        id: &str,
        model: &str,
        permission: Option<&str>,
    ) -> Result<Session> {
        let now = tx.now();
        let changed = tx
            .q()
            .set_session_prompt_settings(&q::SetSessionPromptSettingsParams {
                model: Some(model),
                permission,
                now,
                id,
            })?;
        if changed == 0 {
            return Err(SessionError::not_found("session", id));
        }
        let session = load(tx, id)?;
        self.announce(tx, EventKind::Updated, &session);
        Ok(session)
    }

    /// Points `id`'s `summary_message_id` at `message_id` (a message of `id`), inside the
    /// caller's transaction; queues `updated`.
    pub fn set_summary_message_tx(
        &self,
        tx: &mut Tx<'_>,
        id: &str,
        message_id: &str,
    ) -> Result<Session> {
        let mut session = load(tx, id)?;
        session.summary_message_id = Some(message_id.to_owned());
        let session = store_mutable(tx, id, &session)?;
        self.announce(tx, EventKind::Updated, &session);
        Ok(session)
    }

    /// Runs `change` (which says whether it changed anything) and returns the session as
    /// it then is, queueing `updated` only when something changed.
    fn change_if(
        &self,
        tx: &mut Tx<'_>,
        id: &str,
        mut change: impl FnMut(&mut Tx<'_>, i64) -> Result<bool>,
    ) -> Result<Session> {
        let now = tx.now();
        let changed = change(tx, now)?;
        let session = load(tx, id)?;
        if changed {
            self.announce(tx, EventKind::Updated, &session);
        }
        Ok(session)
    }

    /// The session a user means by `title`. Both this and
    /// [`next_title_in_lineage`](SessionService::next_title_in_lineage) place a title in
    /// the same lineage: `t`, `t #2`, `t #3` … all belong to the lineage `t`
    /// ([`split_lineage`]).
    ///
    /// - A numbered title (`"t #3"`) names one member: the session titled exactly that,
    ///   when it exists; `"t #1"`, when no session is titled so, names `t` itself (the
    ///   member numbered 1).
    /// - Otherwise (a plain title, or a numbered one that does not exist) it is the newest
    ///   session of the lineage: the highest number wins (`t` itself counts as 1).
    ///
    /// `_` and `%` are ordinary characters. Errors: [`SessionError::NotFound`] (`"title"`)
    /// when the lineage is empty; title errors when `title` is not a usable title.
    pub fn resolve_by_title(&self, title: &str) -> Result<Session> {
        let title = normalize_title(title)?;
        let (base, number) = split_lineage(&title);
        // A value of the wrong kind in a row read (another program's write) names the
        // sessions the query read.
        let titled = |title: &str| {
            let row = format!("the session titled {title:?}");
            move |err: scribe_db::Error| err.in_row(|| Some(row))
        };
        self.db.read(|tx| {
            if base != title
                && let Some(row) = tx
                    .q()
                    .get_session_by_title(&title)
                    .map_err(titled(&title))?
            {
                return Session::try_from(row);
            }
            if base != title
                && number == 1
                && let Some(row) = tx.q().get_session_by_title(base).map_err(titled(base))?
            {
                return Session::try_from(row);
            }
            let lineage = tx.q().list_title_lineage(base).map_err(|err| {
                err.in_row(|| Some(format!("a session titled {base:?} or {base:?} #N")))
            })?;
            match lineage.into_iter().next() {
                Some(row) => Session::try_from(row),
                None => Err(SessionError::not_found("title", title.as_str())),
            }
        })
    }

    /// The next free title of the lineage `title` belongs to: `t #N+1` where `N` is the
    /// highest number in use (`t` itself counts as 1; `"t #3"` belongs to the lineage `t`,
    /// as in [`resolve_by_title`](SessionService::resolve_by_title)), or `t` itself when
    /// no session of the lineage exists. So the lineage's newest session, as
    /// `resolve_by_title(t)` gives it, is always numbered `N`.
    ///
    /// This is what a UI shows before creating; it reads in a transaction of its own, so
    /// another process may take the title before a following
    /// [`create`](SessionService::create) (which then fails with
    /// [`SessionError::TitleInUse`]). To create the session, use
    /// [`create_in_lineage`](SessionService::create_in_lineage), which picks the title and
    /// creates in one transaction.
    pub fn next_title_in_lineage(&self, title: &str) -> Result<String> {
        let title = normalize_title(title)?;
        self.db.read(|tx| next_title_tx(tx, &title))
    }

    /// The ancestors of `id`, root first, without `id` itself.
    pub fn ancestors(&self, id: &str) -> Result<Vec<Session>> {
        self.db.read(|tx| {
            load(tx, id)?;
            sessions(tx.q().list_session_ancestors(id)?)
        })
    }

    /// The descendants of `id`, breadth first, without `id` itself.
    pub fn descendants(&self, id: &str) -> Result<Vec<Session>> {
        self.db.read(|tx| {
            load(tx, id)?;
            sessions(tx.q().list_session_descendants(id)?)
        })
    }

    /// The direct children of `id`, oldest first.
    pub fn children(&self, id: &str) -> Result<Vec<Session>> {
        self.db.read(|tx| {
            load(tx, id)?;
            sessions(tx.q().list_child_sessions(id)?)
        })
    }

    /// The newest end of the compaction chain starting at `id`: follows continuation
    /// children as deep as they go; `id` itself when it has none.
    pub fn continuation_tip(&self, id: &str) -> Result<Session> {
        self.db.read(|tx| match tx.q().get_continuation_tip(id)? {
            Some(row) => Session::try_from(row),
            None => Err(SessionError::not_found("session", id)),
        })
    }
}

/// What [`SessionService::claim_compaction`] found.
#[derive(Debug, Clone, PartialEq)]
pub enum CompactionClaim {
    /// The session is claimed for this run (its `compacting_at` is now).
    Claimed(Session),
    /// The session has ended; it cannot be compacted.
    Ended(Session),
    /// Another run holds the claim, taken at `since_ms`.
    Held {
        /// When the running compaction claimed the session (ms since the epoch).
        since_ms: i64,
    },
}

/// `title` (normalized), or the next free title of its lineage (`t #2`) when another
/// session than `id` holds it: how an importer (of another agent's history, or of an
/// export) keeps a session whose title is taken.
pub(crate) fn free_title(tx: &mut dyn Reads, title: &str, id: &str) -> Result<String> {
    match tx.reads().get_session_by_title(title)? {
        Some(holder) if holder.id != id => next_title_tx(tx, title),
        _ => Ok(title.to_owned()),
    }
}

/// `title` is already normalized.
pub(crate) fn next_title_tx(tx: &mut dyn Reads, title: &str) -> Result<String> {
    let (base, _) = split_lineage(title);
    // A row without FROM: always one.
    let highest = tx.reads().max_title_lineage_number(base)?;
    let next = if highest <= 0 {
        base.to_owned()
    } else {
        let n = u64::try_from(highest)
            .ok()
            .and_then(|n| n.checked_add(1))
            .ok_or_else(|| SessionError::InvalidTitle {
                reason: format!("the lineage of {base:?} has no next number"),
            })?;
        lineage_title(base, n)
    };
    let len = next.chars().count();
    if len > MAX_TITLE_CHARS {
        return Err(SessionError::TitleTooLong {
            len,
            max: MAX_TITLE_CHARS,
        });
    }
    Ok(next)
}

/// Writes the mutable fields of `session` to row `id` (title normalized and checked).
fn store_mutable(tx: &mut Tx<'_>, id: &str, session: &Session) -> Result<Session> {
    let title = normalize_optional_title(session.title.as_deref())?;
    if let Some(title) = &title {
        ensure_title_free(tx, title, Some(id))?;
    }
    ensure_storable_texts(
        tx,
        id,
        session.directory.as_deref(),
        session.system_prompt.as_deref(),
        session.model.as_deref(),
    )?;
    let model_config = json_text(session.model_config.as_ref());
    let permission = json_text(session.permission.as_ref());
    if let Some(summary) = &session.summary_message_id {
        match store::message_session(tx, summary)? {
            None => return Err(SessionError::not_found("message", summary.as_str())),
            Some(owner) if owner != id => {
                return Err(SessionError::InvalidInput(format!(
                    "summary message {summary} belongs to session {owner}, not {id}"
                )));
            }
            Some(_) => {}
        }
    }
    let now = tx.now();
    let row = tx.q().update_session(&q::UpdateSessionParams {
        title: title.as_deref(),
        directory: session.directory.as_deref(),
        model: session.model.as_deref(),
        model_config: model_config.as_deref(),
        system_prompt: session.system_prompt.as_deref(),
        permission: permission.as_deref(),
        summary_message_id: session.summary_message_id.as_deref(),
        billing_provider: session.billing_provider.as_deref(),
        billing_base_url: session.billing_base_url.as_deref(),
        billing_mode: session.billing_mode.as_deref(),
        cost_status: session.cost_status.as_deref(),
        cost_source: session.cost_source.as_deref(),
        pricing_version: session.pricing_version.as_deref(),
        now,
        id,
    })?;
    match row {
        Some(row) => Session::try_from(row),
        None => Err(SessionError::not_found("session", id)),
    }
}
