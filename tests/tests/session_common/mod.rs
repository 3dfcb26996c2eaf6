//! Shared fixtures of the session tests: a fresh store (a SQLite file, or a PostgreSQL
//! database: [`env_on`]), message helpers and an event drain.
#![allow(clippy::unwrap_used, clippy::expect_used, dead_code)]

use std::sync::Arc;
use std::sync::atomic::{AtomicI64, Ordering};

use scribe_db::Database;
use scribe_db::ids::{Prefix, new_id};
use scribe_message::{Message, Part, Role, StoredPart, TokenUsage, store};
use scribe_pubsub::{Event, Subscription};
use scribe_session::{Session, SessionService};
use scribe_tests::{Backend, TestDb};

/// A service over a fresh store; keep it alive for the test's duration.
pub struct Env {
    pub t: TestDb,
    pub db: Arc<Database>,
    pub svc: SessionService,
}

impl Env {
    /// The SQLite file (SQLite-only tests that look into it).
    pub fn path(&self) -> std::path::PathBuf {
        assert_eq!(self.t.backend, Backend::Sqlite, "a SQLite-only test");
        self.t.dir.path().join("scribe.db")
    }
}

/// A service over a fresh SQLite file.
pub fn env() -> Env {
    env_on(Backend::Sqlite)
}

/// A service over a fresh store on `backend`.
pub fn env_on(backend: Backend) -> Env {
    let t = TestDb::new(backend);
    let db = Arc::clone(&t.db);
    let svc = SessionService::new(Arc::clone(&db));
    Env { t, db, svc }
}

/// Every event waiting on `sub`.
pub fn drain(sub: &Subscription<Session>) -> Vec<Event<Session>> {
    let mut events = Vec::new();
    while let Ok(event) = sub.try_recv() {
        events.push(event);
    }
    events
}

static CLOCK: AtomicI64 = AtomicI64::new(1_700_000_000_000);

/// A message of `role` with `parts`, not yet stored; strictly increasing times.
pub fn message(session_id: &str, role: Role, parts: Vec<Part>) -> Message {
    let at = CLOCK.fetch_add(10, Ordering::Relaxed);
    Message {
        id: new_id(Prefix::Message),
        session_id: session_id.to_owned(),
        parent_id: None,
        role,
        agent: Some("build".to_owned()),
        provider: (role == Role::Assistant).then(|| "anthropic".to_owned()),
        model: (role == Role::Assistant).then(|| "claude".to_owned()),
        finish_reason: None,
        is_summary: false,
        usage: TokenUsage {
            input: 3,
            output: 5,
            ..TokenUsage::default()
        },
        cost_usd: 0.5,
        error: None,
        created_at: at,
        updated_at: at,
        finished_at: None,
        parts: parts
            .into_iter()
            .enumerate()
            .map(|(i, part)| StoredPart {
                id: new_id(Prefix::Part),
                position: i64::try_from(i).unwrap(),
                part,
                created_at: at,
                updated_at: at,
            })
            .collect(),
    }
}

/// Stores `msg`.
pub fn store_message(db: &Database, msg: &Message) {
    db.write(|tx| store::insert_message(tx, msg)).unwrap();
}

/// Stores a short conversation in `session_id` (user, assistant with a tool call, tool
/// result, assistant) and returns the messages.
pub fn conversation(db: &Database, session_id: &str) -> Vec<Message> {
    let mut msgs = vec![
        message(session_id, Role::User, vec![Part::text("fix the build")]),
        message(
            session_id,
            Role::Assistant,
            vec![
                Part::text("looking"),
                Part::tool("call_1", "bash", serde_json::json!({"cmd": "cargo build"})),
            ],
        ),
        message(session_id, Role::Tool, vec![Part::text("error[E0599]")]),
        message(session_id, Role::Assistant, vec![Part::text("fixed")]),
    ];
    for i in 1..msgs.len() {
        msgs[i].parent_id = Some(msgs[i - 1].id.clone());
    }
    for msg in &msgs {
        store_message(db, msg);
    }
    msgs
}
