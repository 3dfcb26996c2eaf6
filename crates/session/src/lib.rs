//! scribe-session: the session service.
//!
//! [`SessionService`] keeps Scribe's sessions over a shared [`scribe_db::Database`]:
//!
//! - lifecycle: [`create`](SessionService::create), title, task and continuation sessions,
//!   [`fork`](SessionService::fork), [`get`](SessionService::get),
//!   [`list`](SessionService::list), [`update`](SessionService::update) /
//!   [`save`](SessionService::save), [`delete`](SessionService::delete),
//!   archive / unarchive, [`end`](SessionService::end) (first end wins) and reopen;
//! - titles: normalized ([`normalize_title`]), unique when present, lineages `t`, `t #2` …
//!   ([`resolve_by_title`](SessionService::resolve_by_title),
//!   [`next_title_in_lineage`](SessionService::next_title_in_lineage) to show one, and
//!   [`create_in_lineage`](SessionService::create_in_lineage) to create a session with
//!   the lineage's next title: picked and used in one transaction, so two processes
//!   creating in one lineage at once never collide);
//! - lineage: ancestors, descendants, the tip of a compaction chain;
//! - usage: atomic [`add_usage`](SessionService::add_usage), a once-only
//!   [`roll_up_into_parent`](SessionService::roll_up_into_parent), [`stats`](SessionService::stats);
//! - history import: [`upsert_external_tx`](SessionService::upsert_external_tx) and
//!   [`add_usage_at_tx`](SessionService::add_usage_at_tx) write another agent's sessions
//!   with their own ids and times;
//! - maintenance: [`prune`](SessionService::prune), [`clear`](SessionService::clear),
//!   [`export`](SessionService::export) / [`import`](SessionService::import);
//! - files history: [`record_file`](SessionService::record_file) and friends.
//!
//! Every change is one transaction and is announced on the service's
//! [`Broker<Session>`](scribe_pubsub::Broker) after it commits, never before and never for
//! a change that was rolled back (events are queued inside the transaction with
//! `Tx::after_commit`). `_tx` twins make the same changes inside another caller's
//! transaction (the agent's compaction, usage, prompts). All SQL lives in `sql/queries`; this crate only calls the
//! generated functions and the sea-query builders of `scribe_db::filters`.
//!
//! The front door is [`Store`]: a database with this service and scribe-message's
//! `MessageService` over it, built together.
//!
//! A list of sessions with their counts and cost kept live watches one thing,
//! [`Store::watch`] ([`SessionWatch`]): this store's session, message and part events and
//! every other process's commits (an SQLite file's data version; PostgreSQL's change
//! outbox with the `postgres` feature), as the ids of the sessions that changed, or
//! [`SessionChanges::All`](scribe_db::Changes::All) when the change cannot be named. A message added to a session
//! changes its counters through triggers and is announced by the message service only,
//! not as a session `updated`, so a list fed by the session broker alone goes stale
//! (`crates/session/examples/watch_list.rs`).
//!
//! Also [`SessionService::conversation`]: a session (and the sessions it continues) as
//! an LLM request needs it.

mod conversation;
mod error;
mod external;
mod files;
mod service;
mod session;
mod store;
mod title;
mod transfer;
mod usage;
mod watch;

pub use error::{Result, SessionError};
pub use external::ExternalSession;
pub use files::FileVersion;
pub use scribe_db::filters::{ParentFilter, SessionFilter, SessionOrder};
pub use service::{CompactionClaim, NewSession, SessionService};
pub use session::{Session, SessionKind};
pub use store::Store;
pub use title::{
    MAX_TITLE_CHARS, lineage_title, normalize_optional_title, normalize_title, split_lineage,
};
pub use transfer::{
    BoxError, ExportSelection, IMPORT_BATCH_MESSAGES, ImportOutcome, ImportProgress, PruneReport,
    RollUpMark, SessionExport, exports_parents_first,
};
pub use usage::{
    BLOCK_HOURS, BLOCK_LOOKBACK_HOURS, OpenBlock, OwnUsage, RollUp, StatsBy, UsageDelta,
    UsageSlice, UsageSlices, UsageStats, UsageStatsRow, UsageTotals, block_lookback, block_span,
    group_usage,
};
pub use watch::{SessionChanges, SessionWatch, WATCH_POLL};
