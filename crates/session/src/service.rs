//! [`SessionService`]: session lifecycle, titles and lineage over a shared [`Database`],
//! announcing every committed change on a [`Broker<Session>`].
//!
//! Each public method is one `BEGIN IMMEDIATE` transaction. Events are published only after
//! it commits, so a subscriber never hears about a change that was rolled back, and a
//! method that changes nothing (ending an ended session) publishes nothing.

use std::sync::Arc;

use scribe_db::filters::{self, SessionFilter};
use scribe_db::ids::{Prefix, new_id};
use scribe_db::queries as q;
use scribe_db::rusqlite::{Connection, OptionalExtension, Transaction};
use scribe_db::{Database, now_ms};
use scribe_pubsub::{Broker, Subscription};
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
#[derive(Debug)]
pub struct SessionService {
    pub(crate) db: Arc<Database>,
    pub(crate) broker: Broker<Session>,
}

/// Runs `f` in a write transaction, keeping `f`'s own error (rolled back) instead of
/// flattening it into a database error. Database errors go through untouched, so
/// `Database::write` still retries a busy one.
pub(crate) fn write_tx<T>(
    db: &Database,
    mut f: impl FnMut(&Transaction<'_>) -> Result<T>,
) -> Result<T> {
    let mut failure: Option<SessionError> = None;
    let outcome = db.write(|tx| match f(tx) {
        Ok(value) => Ok(value),
        Err(SessionError::Db(err)) => Err(err),
        Err(err) => {
            failure = Some(err);
            // Any non-busy error makes `write` roll back and return at once.
            Err(scribe_db::Error::InvalidInput("rolled back".to_owned()))
        }
    });
    match outcome {
        Ok(value) => Ok(value),
        Err(err) => Err(failure.take().unwrap_or(SessionError::Db(err))),
    }
}

/// [`write_tx`] for a read snapshot.
pub(crate) fn read_tx<T>(db: &Database, mut f: impl FnMut(&Connection) -> Result<T>) -> Result<T> {
    let mut failure: Option<SessionError> = None;
    let outcome = db.read(|conn| match f(conn) {
        Ok(value) => Ok(value),
        Err(SessionError::Db(err)) => Err(err),
        Err(err) => {
            failure = Some(err);
            Err(scribe_db::Error::InvalidInput("aborted".to_owned()))
        }
    });
    match outcome {
        Ok(value) => Ok(value),
        Err(err) => Err(failure.take().unwrap_or(SessionError::Db(err))),
    }
}

/// The session `id`, or [`SessionError::NotFound`].
pub(crate) fn load(conn: &Connection, id: &str) -> Result<Session> {
    match q::get_session(conn, id).optional()? {
        Some(row) => Session::try_from(row),
        None => Err(SessionError::not_found("session", id)),
    }
}

/// Fails with [`SessionError::TitleInUse`] if another session than `except` holds `title`.
fn ensure_title_free(conn: &Connection, title: &str, except: Option<&str>) -> Result<()> {
    if let Some(holder) = q::get_session_by_title(conn, title).optional()?
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

/// Inserts a session with `id` after checking everything a caller can get wrong, so the
/// caller gets a typed error rather than a constraint failure.
pub(crate) fn insert_session(conn: &Connection, id: &str, new: &NewSession) -> Result<Session> {
    ensure_not_empty("session id", id)?;
    ensure_not_empty("source", &new.source)?;
    let title = normalize_optional_title(new.title.as_deref())?;
    match (&new.parent_session_id, new.kind) {
        (None, SessionKind::Normal) => {}
        (None, kind) => {
            return Err(SessionError::InvalidInput(format!(
                "a {kind} session needs a parent session"
            )));
        }
        (Some(parent), _) => {
            if !q::session_exists(conn, parent)? {
                return Err(SessionError::not_found("parent session", parent.as_str()));
            }
        }
    }
    if q::session_exists(conn, id)? {
        return Err(SessionError::Conflict(format!(
            "session id {id} is already in use"
        )));
    }
    if let Some(title) = &title {
        ensure_title_free(conn, title, None)?;
    }
    let model_config = json_text(new.model_config.as_ref());
    let permission = json_text(new.permission.as_ref());
    let row = q::create_session(
        conn,
        &q::CreateSessionParams {
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
            now: now_ms(),
        },
    )?;
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

/// Deletes `id` and returns its last state plus the children whose parent link the
/// database cleared (as they are now).
pub(crate) fn delete_tx(conn: &Connection, id: &str) -> Result<(Session, Vec<Session>)> {
    let session = load(conn, id)?;
    let children: Vec<String> = q::list_child_sessions(conn, id)?
        .into_iter()
        .map(|row| row.id)
        .collect();
    q::delete_session(conn, id)?;
    let mut unlinked = Vec::with_capacity(children.len());
    for child in &children {
        // A child may itself have gone in the same transaction (prune).
        if let Some(row) = q::get_session(conn, child).optional()? {
            unlinked.push(Session::try_from(row)?);
        }
    }
    Ok((session, unlinked))
}

impl SessionService {
    /// A service over `db` with its own broker ([`scribe_pubsub::DEFAULT_BUFFER`] events
    /// per subscriber).
    pub fn new(db: Arc<Database>) -> Self {
        SessionService::with_broker(db, Broker::new())
    }

    /// A service publishing on `broker` (e.g. one with a larger buffer).
    pub fn with_broker(db: Arc<Database>, broker: Broker<Session>) -> Self {
        SessionService { db, broker }
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

    /// Reads `id` and publishes it as `updated`; for callers that changed a session inside
    /// their own transaction (e.g. with [`SessionService::add_usage_tx`]) once it committed.
    pub fn notify_changed(&self, id: &str) -> Result<Session> {
        let session = self.get(id)?;
        self.broker.publish_updated(session.clone());
        Ok(session)
    }

    /// Creates a session with a new `ses_…` id.
    ///
    /// Errors: [`SessionError::TitleInUse`], [`SessionError::InvalidTitle`],
    /// [`SessionError::TitleTooLong`], [`SessionError::NotFound`] (parent),
    /// [`SessionError::InvalidInput`] (empty source, a non-normal kind without parent).
    pub fn create(&self, new: NewSession) -> Result<Session> {
        let id = new_id(Prefix::Session);
        let session = write_tx(&self.db, |tx| insert_session(tx, &id, &new))?;
        self.broker.publish_created(session.clone());
        Ok(session)
    }

    /// Creates the background session that generates `parent_id`'s title: id
    /// `title-{parent_id}`, kind [`SessionKind::Title`], linked to the parent, no title.
    /// There is one per parent: a second is a [`SessionError::Conflict`].
    pub fn create_title_session(&self, parent_id: &str) -> Result<Session> {
        let id = format!("title-{parent_id}");
        let session = write_tx(&self.db, |tx| {
            let parent = load(tx, parent_id)?;
            insert_session(tx, &id, &child_of(&parent, SessionKind::Title))
        })?;
        self.broker.publish_created(session.clone());
        Ok(session)
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
        let session = write_tx(&self.db, |tx| {
            let parent = load(tx, parent_id)?;
            let mut new = child_of(&parent, SessionKind::Task);
            new.title = title.map(str::to_owned);
            insert_session(tx, tool_call_id, &new)
        })?;
        self.broker.publish_created(session.clone());
        Ok(session)
    }

    /// Creates the continuation of `parent_id` after compaction: kind
    /// [`SessionKind::Continuation`], inheriting the parent's settings, titled with the
    /// next title of the parent's lineage (`t #2`, `t #3` …) when the parent has a title.
    pub fn create_continuation(&self, parent_id: &str) -> Result<Session> {
        let session = write_tx(&self.db, |tx| {
            let parent = load(tx, parent_id)?;
            let mut new = child_of(&parent, SessionKind::Continuation);
            new.system_prompt = parent.system_prompt.clone();
            new.title = match &parent.title {
                Some(title) => Some(next_title_tx(tx, title)?),
                None => None,
            };
            insert_session(tx, &new_id(Prefix::Session), &new)
        })?;
        self.broker.publish_created(session.clone());
        Ok(session)
    }

    /// [`SessionService::create_continuation`] inside the caller's transaction, so the
    /// continuation commits (or rolls back) with the rest of a compaction. Publishes
    /// nothing: publish the returned session as `created` after commit.
    pub fn create_continuation_tx(conn: &Connection, parent_id: &str) -> Result<Session> {
        let parent = load(conn, parent_id)?;
        let mut new = child_of(&parent, SessionKind::Continuation);
        new.system_prompt = parent.system_prompt.clone();
        new.title = match &parent.title {
            Some(title) => Some(next_title_tx(conn, title)?),
            None => None,
        };
        insert_session(conn, &new_id(Prefix::Session), &new)
    }

    /// Sets the title of `id` to `title` only if it has none, inside the caller's
    /// transaction: check and set cannot be separated by another writer. A title in use
    /// becomes the next free title of its lineage. Returns the session when the title was
    /// set (publish it as `updated` after commit), `None` when it already had one.
    pub fn set_title_if_unset_tx(
        conn: &Connection,
        id: &str,
        title: &str,
    ) -> Result<Option<Session>> {
        let mut session = load(conn, id)?;
        if session.title.is_some() {
            return Ok(None);
        }
        let title = normalize_title(title)?;
        let title = match ensure_title_free(conn, &title, Some(id)) {
            Ok(()) => title,
            Err(SessionError::TitleInUse { .. }) => next_title_tx(conn, &title)?,
            Err(other) => return Err(other),
        };
        session.title = Some(title);
        store_mutable(conn, id, &session).map(Some)
    }

    /// [`SessionService::get`] inside the caller's transaction.
    pub fn get_tx(conn: &Connection, id: &str) -> Result<Session> {
        load(conn, id)
    }

    /// The session `id`, or [`SessionError::NotFound`].
    pub fn get(&self, id: &str) -> Result<Session> {
        read_tx(&self.db, |conn| load(conn, id))
    }

    /// The sessions matching `filter`, in its order (by default newest first: creation
    /// time, then id, descending), limited and offset as it says.
    pub fn list(&self, filter: &SessionFilter) -> Result<Vec<Session>> {
        read_tx(&self.db, |conn| {
            sessions(filters::list_sessions(conn, filter)?)
        })
    }

    /// How many sessions match `filter` (its order, limit and offset ignored).
    pub fn count(&self, filter: &SessionFilter) -> Result<i64> {
        read_tx(&self.db, |conn| Ok(filters::count_sessions(conn, filter)?))
    }

    /// Reads `id`, lets `change` edit it, and stores the mutable fields in one transaction:
    /// title, directory, model, model_config, system_prompt, permission,
    /// summary_message_id and the billing fields. Edits to anything else (id, kind,
    /// counters, usage, times) are ignored: those have their own operations.
    ///
    /// `change` may run more than once if the database is busy, so it should only edit the
    /// session it is given.
    pub fn update(&self, id: &str, mut change: impl FnMut(&mut Session)) -> Result<Session> {
        let session = write_tx(&self.db, |tx| {
            let mut session = load(tx, id)?;
            change(&mut session);
            store_mutable(tx, id, &session)
        })?;
        self.broker.publish_updated(session.clone());
        Ok(session)
    }

    /// Stores the mutable fields of `session` (see [`SessionService::update`]) over the
    /// stored session with its id, and returns the result.
    pub fn save(&self, session: &Session) -> Result<Session> {
        let saved = write_tx(&self.db, |tx| {
            load(tx, &session.id)?;
            store_mutable(tx, &session.id, session)
        })?;
        self.broker.publish_updated(saved.clone());
        Ok(saved)
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
        let (session, unlinked) = write_tx(&self.db, |tx| delete_tx(tx, id))?;
        self.broker.publish_deleted(session.clone());
        for child in unlinked {
            self.broker.publish_updated(child);
        }
        Ok(session)
    }

    /// Archives `id`. Archiving an archived session keeps its first archive time and
    /// publishes nothing.
    pub fn archive(&self, id: &str) -> Result<Session> {
        self.change_if(id, |tx, now| {
            Ok(q::archive_session(tx, &q::ArchiveSessionParams { now, id })? > 0)
        })
    }

    /// Unarchives `id`; a no-op (no event) when it is not archived.
    pub fn unarchive(&self, id: &str) -> Result<Session> {
        self.change_if(id, |tx, now| {
            if load(tx, id)?.archived_at.is_none() {
                return Ok(false);
            }
            Ok(q::unarchive_session(tx, &q::UnarchiveSessionParams { now, id })? > 0)
        })
    }

    /// Ends `id` with `reason`. The first end wins: ending an ended session keeps its
    /// first reason and time, returns it unchanged and publishes nothing.
    pub fn end(&self, id: &str, reason: &str) -> Result<Session> {
        self.change_if(id, |tx, now| {
            let params = q::EndSessionParams {
                now,
                end_reason: Some(reason),
                id,
            };
            Ok(q::end_session(tx, &params)? > 0)
        })
    }

    /// Reopens an ended session (clears its end time and reason); a no-op (no event) when
    /// it is active.
    pub fn reopen(&self, id: &str) -> Result<Session> {
        self.change_if(id, |tx, now| {
            if load(tx, id)?.ended_at.is_none() {
                return Ok(false);
            }
            Ok(q::reopen_session(tx, &q::ReopenSessionParams { now, id })? > 0)
        })
    }

    /// Marks a compaction of `id` as running (`Some(now)`) or finished (`None`).
    pub fn set_compacting(&self, id: &str, compacting: bool) -> Result<Session> {
        self.change_if(id, |tx, now| {
            let params = q::SetSessionCompactingParams {
                compacting_at: compacting.then_some(now),
                now,
                id,
            };
            Ok(q::set_session_compacting(tx, &params)? > 0)
        })
    }

    /// Runs `change` (which says whether it changed anything) and returns the session as
    /// it then is, publishing `updated` only when something changed.
    fn change_if(
        &self,
        id: &str,
        mut change: impl FnMut(&Transaction<'_>, i64) -> Result<bool>,
    ) -> Result<Session> {
        let (session, changed) = write_tx(&self.db, |tx| {
            let changed = change(tx, now_ms())?;
            Ok((load(tx, id)?, changed))
        })?;
        if changed {
            self.broker.publish_updated(session.clone());
        }
        Ok(session)
    }

    /// The session a user means by `title`. Both this and
    /// [`next_title_in_lineage`](SessionService::next_title_in_lineage) place a title in
    /// the same lineage: `t`, `t #2`, `t #3` … all belong to the lineage `t`
    /// ([`split_lineage`]).
    ///
    /// - A numbered title (`"t #3"`) names one member: the session titled exactly that,
    ///   when it exists.
    /// - Otherwise (a plain title, or a numbered one that does not exist) it is the newest
    ///   session of the lineage: the highest number wins (`t` itself counts as 1).
    ///
    /// `_` and `%` are ordinary characters. Errors: [`SessionError::NotFound`] (`"title"`)
    /// when the lineage is empty; title errors when `title` is not a usable title.
    pub fn resolve_by_title(&self, title: &str) -> Result<Session> {
        let title = normalize_title(title)?;
        let (base, _) = split_lineage(&title);
        read_tx(&self.db, |conn| {
            if base != title
                && let Some(row) = q::get_session_by_title(conn, &title).optional()?
            {
                return Session::try_from(row);
            }
            match q::list_title_lineage(conn, base)?.into_iter().next() {
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
    pub fn next_title_in_lineage(&self, title: &str) -> Result<String> {
        let title = normalize_title(title)?;
        read_tx(&self.db, |conn| next_title_tx(conn, &title))
    }

    /// The ancestors of `id`, root first, without `id` itself.
    pub fn ancestors(&self, id: &str) -> Result<Vec<Session>> {
        read_tx(&self.db, |conn| {
            load(conn, id)?;
            sessions(q::list_session_ancestors(conn, id)?)
        })
    }

    /// The descendants of `id`, breadth first, without `id` itself.
    pub fn descendants(&self, id: &str) -> Result<Vec<Session>> {
        read_tx(&self.db, |conn| {
            load(conn, id)?;
            sessions(q::list_session_descendants(conn, id)?)
        })
    }

    /// The direct children of `id`, oldest first.
    pub fn children(&self, id: &str) -> Result<Vec<Session>> {
        read_tx(&self.db, |conn| {
            load(conn, id)?;
            sessions(q::list_child_sessions(conn, id)?)
        })
    }

    /// The newest end of the compaction chain starting at `id`: follows continuation
    /// children as deep as they go; `id` itself when it has none.
    pub fn continuation_tip(&self, id: &str) -> Result<Session> {
        read_tx(&self.db, |conn| {
            match q::get_continuation_tip(conn, id).optional()? {
                Some(row) => Session::try_from(row),
                None => Err(SessionError::not_found("session", id)),
            }
        })
    }
}

/// `title` is already normalized.
pub(crate) fn next_title_tx(conn: &Connection, title: &str) -> Result<String> {
    let (base, _) = split_lineage(title);
    let highest = q::max_title_lineage_number(conn, base)?;
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
fn store_mutable(conn: &Connection, id: &str, session: &Session) -> Result<Session> {
    let title = normalize_optional_title(session.title.as_deref())?;
    if let Some(title) = &title {
        ensure_title_free(conn, title, Some(id))?;
    }
    let model_config = json_text(session.model_config.as_ref());
    let permission = json_text(session.permission.as_ref());
    if let Some(summary) = &session.summary_message_id {
        match q::get_message(conn, summary).optional()? {
            None => return Err(SessionError::not_found("message", summary.as_str())),
            Some(message) if message.session_id != id => {
                return Err(SessionError::InvalidInput(format!(
                    "summary message {summary} belongs to session {}, not {id}",
                    message.session_id
                )));
            }
            Some(_) => {}
        }
    }
    let row = q::update_session(
        conn,
        &q::UpdateSessionParams {
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
            now: now_ms(),
            id,
        },
    )
    .optional()?;
    match row {
        Some(row) => Session::try_from(row),
        None => Err(SessionError::not_found("session", id)),
    }
}
