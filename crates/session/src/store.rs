//! [`Store`]: the front door of the library — one database with the session and message
//! services over it, built together.

use std::path::Path;
use std::sync::Arc;

use scribe_db::Database;
use scribe_message::MessageService;

use crate::service::SessionService;

/// A Scribe store: one [`Database`] and the [`SessionService`] and [`MessageService`]
/// over it. Built together, the services can never work on two different databases
/// (a session row from one file and its messages from another). Cheap to clone; share it
/// across threads. `scribe-agent`'s runner takes one.
///
/// ```
/// use scribe_message::{NewMessage, Part, Role, SearchOptions};
/// use scribe_session::{NewSession, Store};
///
/// let store = Store::open_in_memory()?;
/// let session = store.sessions().create(NewSession::titled("Fix the build"))?;
/// store.messages().create(NewMessage::new(
///     &session.id,
///     Role::User,
///     vec![Part::text("cargo build fails with E0308")],
/// ))?;
/// let hits = store.messages().search("E0308", &SearchOptions::default())?;
/// assert_eq!(hits[0].session_id, session.id);
/// assert_eq!(store.sessions().get(&session.id)?.message_count, 1);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Debug, Clone)]
pub struct Store {
    db: Arc<Database>,
    sessions: Arc<SessionService>,
    messages: Arc<MessageService>,
}

impl Store {
    /// Opens (creating and migrating) the database file at `path`; see
    /// [`Database::open`]. `path` may also be a PostgreSQL location (a `postgres://` URL
    /// or a libpq keyword string), which needs scribe-db's `postgres` feature (without it,
    /// [`scribe_db::Error::InvalidLocation`]); see [`Database::open_postgres`].
    pub fn open(path: impl AsRef<Path>) -> scribe_db::Result<Store> {
        Ok(Store::new(Arc::new(Database::open(path)?)))
    }

    /// A private in-memory store, for tests and examples.
    pub fn open_in_memory() -> scribe_db::Result<Store> {
        Ok(Store::new(Arc::new(Database::open_in_memory()?)))
    }

    /// The services over `db` (opened with whatever [`scribe_db::Options`] it needs:
    /// read-only, a test clock …).
    pub fn new(db: Arc<Database>) -> Store {
        Store {
            sessions: Arc::new(SessionService::new(Arc::clone(&db))),
            messages: Arc::new(MessageService::new(Arc::clone(&db))),
            db,
        }
    }

    /// The database.
    pub fn database(&self) -> &Arc<Database> {
        &self.db
    }

    /// Sessions: lifecycle, titles, lineage, usage, export and import, prune, files.
    pub fn sessions(&self) -> &Arc<SessionService> {
        &self.sessions
    }

    /// Messages and parts: create, stream, page, search.
    pub fn messages(&self) -> &Arc<MessageService> {
        &self.messages
    }
}
