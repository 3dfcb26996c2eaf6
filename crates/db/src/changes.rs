//! [`ChangeWatch`]: whether a database changed since the last look, whichever process (on
//! PostgreSQL: whichever host) changed it. The one mechanism behind scribe-session's
//! `Store::watch` and `scribe serve`'s live version counter.
//!
//! - SQLite file: `PRAGMA data_version` on a read-only connection of the watch's own (a
//!   [`Database`] used by the watch only, whose pool keeps handing back the same idle
//!   connection) moves whenever another connection, in this process or any other,
//!   commits; a poll is one pragma (microseconds). It names nothing: [`Changes::All`].
//!   A file read as `immutable` ([`Database::open_read_only`] in a read-only location)
//!   has a data version that never moves, so it is refused a watch
//!   ([`Error::InvalidInput`]): its files are what can be watched (the server does).
//! - PostgreSQL (`postgres` feature): `Database::listen`'s thread reads every committed
//!   change to sessions, messages, parts and files from the change outbox and names its
//!   session ([`Changes::Sessions`]); a `Lagged` (changes deleted before it read them)
//!   is [`Changes::All`].
//! - An in-memory database has no other connection: [`Error::InvalidInput`].

use std::collections::BTreeSet;

use crate::{Backend, Database, Error, Result};

/// What changed since a [`ChangeWatch`] last reported.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Changes {
    /// Changes to these sessions (or to their messages, parts or files).
    Sessions(BTreeSet<String>),
    /// Something changed that the watch cannot name: read again everything you show.
    All,
}

impl Changes {
    /// Whether session `id` may have changed.
    pub fn touches(&self, id: &str) -> bool {
        match self {
            Changes::Sessions(ids) => ids.contains(id),
            Changes::All => true,
        }
    }

    /// Adds a change of session `id` to `this`.
    pub fn add(this: &mut Option<Changes>, id: &str) {
        match this {
            Some(Changes::All) => {}
            Some(Changes::Sessions(ids)) => {
                ids.insert(id.to_owned());
            }
            None => *this = Some(Changes::Sessions(BTreeSet::from([id.to_owned()]))),
        }
    }
}

/// Tells whether a database changed since the last [`ChangeWatch::poll`] (see the module
/// docs); made by [`Database::watch_changes`]. Dropping it closes its connection or stops
/// its listener.
#[derive(Debug)]
pub struct ChangeWatch {
    source: Source,
}

#[derive(Debug)]
enum Source {
    /// `PRAGMA data_version` on a connection of the watch's own, and the value last seen.
    DataVersion { db: Box<Database>, last: i64 },
    /// What the outbox listener delivered since the last poll.
    #[cfg(feature = "postgres")]
    Notices {
        _listener: crate::events::Listener,
        pending: std::sync::Arc<std::sync::Mutex<Option<Changes>>>,
    },
}

impl Database {
    /// A [`ChangeWatch`] over this database: from now on, every commit by any other
    /// connection (SQLite file; this handle's own commits included, as they are another
    /// connection than the watch's) or every committed change by any process
    /// (PostgreSQL).
    ///
    /// Errors: the watch's read-only connection could not be opened or read, or (on
    /// PostgreSQL) the listener could not start; [`Error::InvalidInput`] for an in-memory
    /// database, for a file read as immutable (by this handle or by the watch's
    /// connection: nothing it could poll moves), and on PostgreSQL without the `postgres`
    /// feature.
    pub fn watch_changes(&self) -> Result<ChangeWatch> {
        let source = match self.backend() {
            Backend::Sqlite => {
                let Some(path) = self.path() else {
                    return Err(Error::InvalidInput(
                        "an in-memory database has no other connection to watch".to_owned(),
                    ));
                };
                let immutable = || {
                    Error::InvalidInput(format!(
                        "{} is read as immutable (a read-only location no process was \
                         writing), so its changes cannot be watched",
                        path.display()
                    ))
                };
                if self.is_immutable() {
                    return Err(immutable());
                }
                let own = Database::open_read_only(path)?;
                if own.is_immutable() {
                    // Its data version never moves: a watch would never report.
                    return Err(immutable());
                }
                let last = own.data_version()?;
                Source::DataVersion {
                    db: Box::new(own),
                    last,
                }
            }
            Backend::Postgres => notices(self)?,
        };
        Ok(ChangeWatch { source })
    }
}

#[cfg(feature = "postgres")]
fn notices(db: &Database) -> Result<Source> {
    use std::sync::{Arc, Mutex, PoisonError};

    use crate::events::Notice;

    let pending = Arc::new(Mutex::new(None));
    let listener = db.listen({
        let pending = Arc::clone(&pending);
        move |notice| {
            let mut pending = pending.lock().unwrap_or_else(PoisonError::into_inner);
            match notice {
                Notice::Change(change) => Changes::add(&mut pending, &change.session_id),
                Notice::Lagged(_) => *pending = Some(Changes::All),
            }
        }
    })?;
    Ok(Source::Notices {
        _listener: listener,
        pending,
    })
}

#[cfg(not(feature = "postgres"))]
fn notices(_db: &Database) -> Result<Source> {
    Err(Error::InvalidInput(
        "watching a postgresql database needs scribe-db's `postgres` feature".to_owned(),
    ))
}

impl ChangeWatch {
    /// What changed since the last poll (or since the watch was made), `None` when
    /// nothing did. Errors: reading the SQLite file's data version failed; the value
    /// last seen stays, so the next poll compares with it again.
    pub fn poll(&mut self) -> Result<Option<Changes>> {
        match &mut self.source {
            Source::DataVersion { db, last } => {
                let now = db.data_version()?;
                if now == *last {
                    return Ok(None);
                }
                *last = now;
                Ok(Some(Changes::All))
            }
            #[cfg(feature = "postgres")]
            Source::Notices { pending, .. } => Ok(pending
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner)
                .take()),
        }
    }
}
