//! Throwaway profile (stop 25, schema V18): `N` appends through `MessageService::create`
//! (one user message with one text part each, as the bench's append row) on a fresh file at
//! schema version `VERSION` (16: the search triggers and `parts_search` test a part's type
//! with `IN ('text', 'reasoning', 'tool')`; unset: the current schema, `=` and OR), then
//! every queued part indexed, so both counts hold the same work. For counting
//! instructions run it under `valgrind --tool=callgrind` and subtract a run with `N=0`.
//! Usage: `VERSION=16 N=<appends> in_list_profile <DIR>`
#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

use std::sync::Arc;

use scribe_db::Database;
use scribe_message::{MessageService, NewMessage, Part, Role};
use scribe_session::{NewSession, SessionService};

fn main() {
    let dir =
        std::path::PathBuf::from(std::env::args().nth(1).expect("usage: in_list_profile DIR"));
    let version: Option<i64> = std::env::var("VERSION").ok().map(|v| v.parse().unwrap());
    let n: usize = std::env::var("N").map_or(500, |v| v.parse().unwrap());
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join(format!("in-list-{version:?}.db"));
    for suffix in ["", "-wal", "-shm"] {
        let _ = std::fs::remove_file(format!("{}{suffix}", path.display()));
    }
    let db = match version {
        Some(v) => Database::open_at_version(&path, v).unwrap(),
        None => Database::open(&path).unwrap(),
    };
    let db = Arc::new(db);
    let session = SessionService::new(Arc::clone(&db))
        .create(NewSession::default())
        .unwrap()
        .id;
    let svc = MessageService::new(Arc::clone(&db));
    let piece = "lorem ipsum dolor sit amet, consectetur adipiscing elit. sed do eiusmod tempo ";
    for i in 0..n {
        svc.create(NewMessage::new(
            &session,
            Role::User,
            vec![Part::text(format!("message {i}: {piece}"))],
        ))
        .unwrap();
    }
    db.index_pending().unwrap();
    println!("schema {}: {n} appends", db.schema_version().unwrap());
}
