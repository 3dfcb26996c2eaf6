//! Shared fixtures: a file database in a temp dir, and what `fixtures.rs` holds (sessions
//! created through the generated queries, small part builders, counters).
#![allow(clippy::unwrap_used, clippy::expect_used, dead_code)]

use std::sync::Arc;

use scribe_db::Database;
use scribe_message::MessageService;

mod fixtures;
pub use fixtures::*;

/// A service over a fresh database file; keep the `TempDir` alive while using it.
pub fn service() -> (tempfile::TempDir, MessageService) {
    let dir = tempfile::tempdir().unwrap();
    let db = Database::open(dir.path().join("scribe.db")).unwrap();
    (dir, MessageService::new(Arc::new(db)))
}
