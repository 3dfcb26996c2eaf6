//! scribe-db: Scribe's SQLite layer.
//!
//! - [`Database`]: opens the file (private modes, WAL, foreign keys, a short busy timeout),
//!   migrates the schema from `sql/migrations`, and offers [`Database::write`] (retried
//!   `BEGIN IMMEDIATE` transactions, with actions queued to run after COMMIT) and
//!   [`Database::read`] (read-only connections that never take the write lock), both
//!   generic over the caller's error type ([`TxError`]); [`Database::open_read_only`] for
//!   files this process may not write, [`Database::open_existing`] where a missing file
//!   must not be created; [`Database::check`] and [`Database::vacuum`] for maintenance.
//! - [`Tx`] and [`ReadTx`]: what those closures get — the generated queries as
//!   backend-neutral traits (`tx.q().get_session(id)`), the clock, and
//!   [`Tx::after_commit`]; [`Reads`] for functions that only read and take either.
//!   `conn()` (the SQLite connection, `None` on PostgreSQL) is for SQLite-only code.
//! - [`Clock`]: where every stored time comes from ([`Options::clock`]); [`ManualClock`]
//!   and [`Clock::ticking`] for tests.
//! - [`queries`]: the typed functions sqlgen generates from `sql/queries`.
//! - [`filters`]: sea-query builders for the queries whose shape depends on the caller
//!   (optional filters, IN lists, sort orders).
//! - [`search`]: full-text search over parts (both indexes) with filters.
//! - [`changes`]: [`Database::watch_changes`], whether the database changed since the last
//!   look, whichever process changed it (SQLite's data version on a connection of its own;
//!   PostgreSQL's change outbox, naming sessions).
//! - [`ids`]: prefixed, time-sortable ids and [`now_ms`].
//! - [`calendar`]: UTC dates of those times, and the one grammar users write a time in
//!   (`7d`, `2026-01-31`) for the CLI and the web viewer.
//!
//! All SQL lives in `sql/` or in the builders here; services call typed functions only.

mod backend;
pub mod bulk;
pub mod calendar;
pub mod changes;
mod checkpoint;
mod clock;
mod database;
mod error;
pub mod filters;
mod gate;
pub mod ids;
mod info;
mod maintenance;
mod migrate;
#[cfg(feature = "postgres")]
mod pg;
pub mod queries;
#[cfg(feature = "postgres")]
pub use pg::{copy, events};
pub mod search;
mod search_index;
pub mod testing;
mod tx;

pub use changes::{ChangeWatch, Changes};
pub use clock::{Clock, ManualClock};
pub use database::{CheckpointReport, Database, Options};
#[cfg(feature = "postgres")]
pub use error::ServerError;
pub use error::{BoxError, Error, ErrorKind, Result, SqliteError, storable_text};
pub use gate::writer_gate_path;
pub use ids::now_ms;
pub use info::{DbInfo, TableCount};
pub use maintenance::{IndexReport, IndexStatus, IntegrityReport, NamedCheck, VacuumReport};
pub use migrate::{AppliedMigration, MigrationReport};
pub use search_index::{BULK_HASH_SIZE, IndexBatch, IndexRun, IndexingPaused, STREAM_SETTLE_MS};
pub use tx::{Backend, ReadTx, Tx, TxError};

use queries::ReadQueries;

/// What a function that only reads takes, so that it runs inside a write transaction
/// ([`Tx`]) or a read snapshot ([`ReadTx`]) alike, on either backend:
/// `fn load(tx: &mut dyn Reads, id: &str)` calls `tx.reads().get_session(id)?`, and its
/// callers pass their `tx` as it is.
pub trait Reads {
    /// The read-only generated queries, inside the open transaction.
    fn reads(&mut self) -> &mut dyn ReadQueries;

    /// Which backend the transaction runs on.
    fn backend(&self) -> Backend;
}

impl Reads for Tx<'_> {
    fn reads(&mut self) -> &mut dyn ReadQueries {
        self.q()
    }

    fn backend(&self) -> Backend {
        Tx::backend(self)
    }
}

impl Reads for ReadTx<'_> {
    fn reads(&mut self) -> &mut dyn ReadQueries {
        self.q()
    }

    fn backend(&self) -> Backend {
        ReadTx::backend(self)
    }
}
