//! Shared fixtures of the message tests: a fresh store on either backend, and the message
//! crate's own fixtures (sessions created through the generated queries, small part
//! builders, counters), included from `crates/message/tests/common/fixtures.rs` so both
//! suites share one copy.
#![allow(clippy::unwrap_used, clippy::expect_used, dead_code)]

use std::sync::Arc;

use scribe_message::MessageService;
use scribe_tests::{Backend, TestDb};

#[path = "../../../crates/message/tests/common/fixtures.rs"]
mod fixtures;
pub use fixtures::*;

/// A service over a fresh SQLite file; keep the [`TestDb`] alive while using it.
pub fn service() -> (TestDb, MessageService) {
    service_on(Backend::Sqlite)
}

/// A service over a fresh store on `backend`; keep the [`TestDb`] alive while using it.
pub fn service_on(backend: Backend) -> (TestDb, MessageService) {
    let t = TestDb::new(backend);
    let svc = MessageService::new(Arc::clone(&t.db));
    (t, svc)
}
