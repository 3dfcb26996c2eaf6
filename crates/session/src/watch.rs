//! [`SessionWatch`]: one subscription that says when what a session list shows (titles,
//! message and tool-call counts, tokens, cost, `updated_at`, which sessions exist) may
//! have changed, whichever process changed it.

use std::collections::BTreeSet;
use std::time::{Duration, Instant};

use scribe_db::{Backend, Database};
use scribe_message::{Message, PartEvent};
use scribe_pubsub::{Event, RecvTimeoutError, Subscription, TryRecvError};

use crate::error::{Result, SessionError};
use crate::session::Session;
use crate::store::Store;

/// How often a [`SessionWatch`] looks for other processes' commits by default.
pub const WATCH_POLL: Duration = Duration::from_millis(100);

/// What changed since the watch last reported.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SessionChanges {
    /// These sessions changed: created, updated (renamed, archived, charged …), deleted,
    /// or a message or part of theirs was added, changed or deleted.
    Sessions(BTreeSet<String>),
    /// Something changed that the watch cannot name (another process committed to an
    /// SQLite file, or events were missed): read again everything you show.
    All,
}

impl SessionChanges {
    /// Whether session `id` may have changed.
    pub fn touches(&self, id: &str) -> bool {
        match self {
            SessionChanges::Sessions(ids) => ids.contains(id),
            SessionChanges::All => true,
        }
    }

    fn add(this: &mut Option<SessionChanges>, id: &str) {
        match this {
            Some(SessionChanges::All) => {}
            Some(SessionChanges::Sessions(ids)) => {
                ids.insert(id.to_owned());
            }
            None => *this = Some(SessionChanges::Sessions(BTreeSet::from([id.to_owned()]))),
        }
    }
}

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
/// - other processes' commits: on an SQLite file, `PRAGMA data_version` on a read-only
///   connection of the watch's own, polled every [`WATCH_POLL`] (a pragma on an idle
///   connection: microseconds); it moves on every commit by any other connection and
///   names nothing, so it is reported as [`SessionChanges::All`]. On PostgreSQL,
///   `scribe_db::Database::listen`'s change outbox, which names the session of every
///   change on any host (needs this crate's `postgres` feature). An in-memory store has
///   no other connection.
///
/// Missed events (a subscription's buffer overflowed, the outbox trimmed changes before
/// they were read) are [`SessionChanges::All`] too: read again what you show.
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
    others: Others,
    poll: Duration,
}

/// How the watch sees other processes' commits.
#[derive(Debug)]
enum Others {
    /// An in-memory store: no other connection writes to it.
    None,
    /// An SQLite file: `PRAGMA data_version` on a connection of the watch's own (a
    /// read-only [`Database`] used by this watch only, whose pool hands back the same
    /// connection), and the value last seen.
    DataVersion { db: Box<Database>, last: i64 },
    /// PostgreSQL: the sessions the outbox listener named since the last look.
    #[cfg(feature = "postgres")]
    Notices {
        _listener: scribe_db::events::Listener,
        pending: std::sync::Arc<std::sync::Mutex<Option<SessionChanges>>>,
    },
}

impl Store {
    /// A [`SessionWatch`] over this store: from now on, every committed change to its
    /// sessions, their messages and parts, by this process or another.
    ///
    /// Errors: the read-only connection to an SQLite file could not be opened, or (on
    /// PostgreSQL) the listener could not start; [`SessionError::InvalidInput`] for an
    /// SQLite file read as immutable ([`Database::open_read_only`] in a read-only
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
        let others = match db.backend() {
            Backend::Sqlite => match db.path() {
                None => Others::None,
                Some(path) => {
                    let own = Database::open_read_only(path).map_err(SessionError::Db)?;
                    if db.is_immutable() || own.is_immutable() {
                        // Its data version never moves: a watch would never report.
                        return Err(SessionError::InvalidInput(format!(
                            "{} is read as immutable (a read-only location no process \
                             was writing), so its changes cannot be watched",
                            path.display()
                        )));
                    }
                    let last = own.data_version().map_err(SessionError::Db)?;
                    Others::DataVersion {
                        db: Box::new(own),
                        last,
                    }
                }
            },
            Backend::Postgres => postgres_notices(db)?,
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

#[cfg(feature = "postgres")]
fn postgres_notices(db: &Database) -> Result<Others> {
    use std::sync::{Arc, Mutex, PoisonError};

    use scribe_db::events::Notice;

    let pending = Arc::new(Mutex::new(None));
    let listener = db
        .listen({
            let pending = Arc::clone(&pending);
            move |notice| {
                let mut pending = pending.lock().unwrap_or_else(PoisonError::into_inner);
                match notice {
                    Notice::Change(change) => SessionChanges::add(&mut pending, &change.session_id),
                    Notice::Lagged(_) => *pending = Some(SessionChanges::All),
                }
            }
        })
        .map_err(SessionError::Db)?;
    Ok(Others::Notices {
        _listener: listener,
        pending,
    })
}

#[cfg(not(feature = "postgres"))]
fn postgres_notices(_db: &Database) -> Result<Others> {
    Err(SessionError::InvalidInput(
        "watching a postgresql store needs scribe-session's `postgres` feature".to_owned(),
    ))
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
        match &mut self.others {
            Others::None => {}
            Others::DataVersion { db, last } => {
                let now = db.data_version().map_err(SessionError::Db)?;
                if now != *last {
                    *last = now;
                    *changes = Some(SessionChanges::All);
                }
            }
            #[cfg(feature = "postgres")]
            Others::Notices { pending, .. } => {
                let taken = pending
                    .lock()
                    .unwrap_or_else(std::sync::PoisonError::into_inner)
                    .take();
                match taken {
                    None => {}
                    Some(SessionChanges::All) => *changes = Some(SessionChanges::All),
                    Some(SessionChanges::Sessions(ids)) => {
                        for id in ids {
                            SessionChanges::add(changes, &id);
                        }
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
