//! Shared fixtures of the session tests: a fresh database file in a temp dir, message
//! helpers and an event drain.
#![allow(clippy::unwrap_used, clippy::expect_used, dead_code)]

use std::sync::Arc;
use std::sync::atomic::{AtomicI64, Ordering};

use scribe_db::Database;
use scribe_db::ids::{Prefix, new_id};
use scribe_message::{Message, Part, Role, StoredPart, TokenUsage, store};
use scribe_pubsub::{Event, Subscription};
use scribe_session::{Session, SessionService};
use tempfile::TempDir;

/// A service over a new database file; keep `dir` alive for the test's duration.
pub struct Env {
    pub dir: TempDir,
    pub db: Arc<Database>,
    pub svc: SessionService,
}

pub fn env() -> Env {
    let dir = tempfile::tempdir().unwrap();
    let db = Arc::new(Database::open(dir.path().join("scribe.db")).unwrap());
    let svc = SessionService::new(Arc::clone(&db));
    Env { dir, db, svc }
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
