//! [`SessionWatch`]: one subscription that says when what a session list shows (titles,
//! message and tool-call counts, tokens, cost, `updated_at`, which sessions exist) may
//! have changed, whichever process changed it.

use std::time::{Duration, Instant};

use scribe_db::{Backend, ChangeWatch, Changes};
use scribe_message::{Message, PartEvent};
use scribe_pubsub::{Event, RecvTimeoutError, Subscription, TryRecvError};

use crate::error::{Result, SessionError};
use crate::session::Session;
use crate::store::Store;

/// How often a [`SessionWatch`] looks for other processes' commits by default.
pub const WATCH_POLL: Duration = Duration::from_millis(100);

/// What changed since the watch last reported: these sessions (created, updated —
/// renamed, archived, charged … —, deleted, or a message or part of theirs added, changed
/// or deleted), or [`Changes::All`] for something the watch cannot name (another process
/// committed to an SQLite file, or events were missed): read again everything you show.
/// The same type as scribe-db's change watch reports.
pub type SessionChanges = Changes;

/// One subscription to every change of a store's sessions and their counters, from this
/// process and from others ([`Store::watch`]).
///
/// Why a helper and not a session `updated` event per append: the services' brokers are
/// in-process, and a list is usually watched while another process (an agent, a TUI, an
/// import) writes, whose events never reach this one. A message append changes its
/// session's counters through the schema's triggers and is announced on the message
/// service's broker only; publishing a session `updated` for it as well would cost every
/// append a read of the session row inside the write lock and still not reach another
/// process. So the watch combines, behind one [`SessionWatch::wait`]:
///
/// - this [`Store`]'s session broker, which names the session and ends a wait at once;
///   on an in-memory store its message and part brokers too (a file or server store's
///   own commits are seen as another process's are, below, so that a watch costs this
///   process's appends nothing: no part of a streamed reply is cloned for it);
/// - other processes' commits, through scribe-db's one change watch
///   ([`scribe_db::Database::watch_changes`], which `scribe serve` uses too): on an
///   SQLite file, `PRAGMA data_version` on a read-only connection of the watch's own,
///   polled every [`WATCH_POLL`] (a pragma on an idle connection: microseconds); it
///   moves on every commit by any other connection and names nothing, so it is reported
///   as [`Changes::All`]. On PostgreSQL, `scribe_db::Database::listen`'s change
///   outbox, which names the session of every change on any host (needs this crate's
///   `postgres` feature). An in-memory store has no other connection.
///
/// Missed events (a subscription's buffer overflowed, the outbox trimmed changes before
/// they were read) are [`Changes::All`] too: read again what you show.
///
/// ```
/// use std::time::Duration;
/// use scribe_message::{NewMessage, Part, Role};
/// use scribe_session::{NewSession, SessionChanges, Store};
///
/// let store = Store::open_in_memory()?;
/// let mut watch = store.watch()?;
/// let session = store.sessions().create(NewSession::titled("Fix the build"))?;
/// store.messages().create(NewMessage::new(&session.id, Role::User, vec![Part::text("hi")]))?;
/// let changes = watch.wait(Duration::from_secs(1))?.expect("a change");
/// assert!(changes.touches(&session.id));
/// // Nothing more happened.
/// assert_eq!(watch.wait(Duration::ZERO)?, None);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Debug)]
pub struct SessionWatch {
    sessions: Subscription<Session>,
    /// In-memory stores only (see the type's doc).
    messages: Option<Subscription<Message>>,
    parts: Option<Subscription<PartEvent>>,
    /// Other processes' commits (every commit but an in-memory store's: see the type's
    /// doc); `None` for an in-memory store.
    others: Option<ChangeWatch>,
    poll: Duration,
}

impl Store {
    /// A [`SessionWatch`] over this store: from now on, every committed change to its
    /// sessions, their messages and parts, by this process or another.
    ///
    /// Errors: the read-only connection to an SQLite file could not be opened, or (on
    /// PostgreSQL) the listener could not start; [`SessionError::InvalidInput`] for an
    /// SQLite file read as immutable ([`scribe_db::Database::open_read_only`] in a read-only
    /// location: nothing it could poll moves) and on PostgreSQL without this crate's
    /// `postgres` feature.
    pub fn watch(&self) -> Result<SessionWatch> {
        // Subscribe first: a change committed while the rest is set up is then heard
        // (perhaps twice, which a set of ids absorbs).
        let sessions = self.sessions().subscribe();
        let db = self.database();
        let in_memory = db.backend() == Backend::Sqlite && db.path().is_none();
        let messages = in_memory.then(|| self.messages().subscribe());
        let parts = in_memory.then(|| self.messages().subscribe_parts());
        if db.backend() == Backend::Postgres && !cfg!(feature = "postgres") {
            return Err(SessionError::InvalidInput(
                "watching a postgresql store needs scribe-session's `postgres` feature".to_owned(),
            ));
        }
        // Other processes' commits: scribe-db's one change watch (an immutable file is
        // its `InvalidInput`, which stays one here).
        let others = if in_memory {
            None
        } else {
            Some(db.watch_changes().map_err(|err| match err {
                scribe_db::Error::InvalidInput(message) => SessionError::InvalidInput(message),
                other => SessionError::Db(other),
            })?)
        };
        Ok(SessionWatch {
            sessions,
            messages,
            parts,
            others,
            poll: WATCH_POLL,
        })
    }
}

impl SessionWatch {
    /// Looks for other processes' commits every `poll` instead of [`WATCH_POLL`]: the
    /// longest a change by another process waits before [`wait`](Self::wait) reports it.
    #[must_use]
    pub fn with_poll(mut self, poll: Duration) -> Self {
        self.poll = poll.max(Duration::from_millis(1));
        self
    }

    /// Waits up to `timeout` for a change and returns every change seen by then, or
    /// `None` when nothing changed. A session event of this store ends the wait at once;
    /// its message and part events and other processes' commits are looked for once per
    /// poll interval ([`with_poll`](Self::with_poll)).
    ///
    /// Errors: polling the SQLite file's data version failed (the watch stays usable; the
    /// next call tries again).
    pub fn wait(&mut self, timeout: Duration) -> Result<Option<SessionChanges>> {
        let deadline = Instant::now() + timeout;
        let mut changes = None;
        loop {
            self.collect(&mut changes)?;
            let now = Instant::now();
            if changes.is_some() || now >= deadline {
                return Ok(changes);
            }
            // Session events wake the wait at once; the rest is looked at each poll.
            let slice = self.poll.min(deadline - now);
            match self.sessions.recv_timeout(slice) {
                Ok(event) => SessionChanges::add(&mut changes, &event.payload.id),
                Err(RecvTimeoutError::Lagged(_)) => changes = Some(SessionChanges::All),
                Err(RecvTimeoutError::Timeout) => {}
                Err(RecvTimeoutError::Closed) => std::thread::sleep(slice),
            }
        }
    }

    /// Everything buffered and every other process's commit so far, into `changes`.
    fn collect(&mut self, changes: &mut Option<SessionChanges>) -> Result<()> {
        drain(&self.sessions, changes, |s| &s.id);
        if let Some(messages) = &self.messages {
            drain(messages, changes, |m| &m.session_id);
        }
        if let Some(parts) = &self.parts {
            drain(parts, changes, |p| &p.session_id);
        }
        if let Some(others) = &mut self.others {
            match others.poll().map_err(SessionError::Db)? {
                None => {}
                Some(Changes::All) => *changes = Some(Changes::All),
                Some(Changes::Sessions(ids)) => {
                    for id in ids {
                        Changes::add(changes, &id);
                    }
                }
            }
        }
        Ok(())
    }
}

/// Takes every buffered event of `sub` into `changes`, by the session `id_of` names.
fn drain<T: Clone>(
    sub: &Subscription<T>,
    changes: &mut Option<SessionChanges>,
    id_of: impl Fn(&T) -> &String,
) {
    loop {
        match sub.try_recv() {
            Ok(Event { payload, .. }) => SessionChanges::add(changes, id_of(&payload)),
            Err(TryRecvError::Lagged(_)) => *changes = Some(SessionChanges::All),
            Err(TryRecvError::Empty | TryRecvError::Closed) => return,
        }
    }
}
