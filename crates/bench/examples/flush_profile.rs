//! Throwaway profile (issue 14 item 2): what one streamed flush of a growing 10 KB text
//! part costs through `MessageService::update_part` (with and without the background
//! indexer woken by every write), against the limit's autocommit UPDATE, in one run.
//! Usage: flush_profile <DIR> (scratch files are made there)
#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

use std::sync::Arc;
use std::time::{Duration, Instant};

use rusqlite::{Connection, params};
use scribe_db::{Database, Options};
use scribe_message::{MessageService, NewMessage, Part, PartTime, Role, TextPart};
use scribe_session::{NewSession, SessionService};

const FLUSHES: usize = 100;
const ROUNDS: usize = 40;

fn scribe(dir: &std::path::Path, name: &str, background: bool) -> (MessageService, String) {
    let options = Options {
        background_indexing: background,
        ..Options::default()
    };
    let db = Arc::new(Database::open_with(dir.join(name), options).unwrap());
    let session = SessionService::new(Arc::clone(&db))
        .create(NewSession::default())
        .unwrap();
    (MessageService::new(db), session.id)
}

/// One reply: a message with an open text part, then FLUSHES updates of the growing text.
fn stream(svc: &MessageService, session: &str, piece: &str) -> Duration {
    let now = svc.database().now();
    let mut text = TextPart {
        text: String::new(),
        time: Some(PartTime {
            start: now,
            end: None,
        }),
        ..TextPart::default()
    };
    let msg = svc
        .create(NewMessage::new(
            session,
            Role::Assistant,
            vec![Part::Text(text.clone())],
        ))
        .unwrap();
    let id = msg.parts[0].id.clone();
    let t = Instant::now();
    for _ in 0..FLUSHES {
        text.text.push_str(piece);
        svc.update_part(&id, Part::Text(text.clone())).unwrap();
    }
    t.elapsed()
}

fn limit(conn: &Connection, piece: &str) -> Duration {
    conn.execute("INSERT INTO m (parts) VALUES ('[]')", [])
        .unwrap();
    let id = conn.last_insert_rowid();
    let mut text = String::new();
    let t = Instant::now();
    for _ in 0..FLUSHES {
        text.push_str(piece);
        let json = serde_json::to_string(&vec![Part::text(text.clone())]).unwrap();
        conn.prepare_cached("UPDATE m SET parts = ?1, updated_at = ?2 WHERE rowid = ?3")
            .unwrap()
            .execute(params![json, 1_i64, id])
            .unwrap();
    }
    t.elapsed()
}

fn median(mut v: Vec<Duration>) -> String {
    v.sort();
    let per = |d: Duration| d.as_secs_f64() * 1e6 / FLUSHES as f64;
    format!(
        "{:.1} µs/flush (p10 {:.1})",
        per(v[v.len() / 2]),
        per(v[v.len() / 10])
    )
}

fn main() {
    let dir = std::path::PathBuf::from(std::env::args().nth(1).unwrap());
    std::fs::create_dir_all(&dir).unwrap();
    for f in ["flush-a.db", "flush-b.db", "flush-limit.db"] {
        let _ = std::fs::remove_file(dir.join(f));
    }
    let (with_indexer, s1) = scribe(&dir, "flush-a.db", true);
    let (without, s2) = scribe(&dir, "flush-b.db", false);
    let conn = Connection::open(dir.join("flush-limit.db")).unwrap();
    conn.pragma_update(None, "journal_mode", "WAL").unwrap();
    conn.pragma_update(None, "synchronous", "NORMAL").unwrap();
    conn.execute_batch("CREATE TABLE IF NOT EXISTS m (parts TEXT NOT NULL, updated_at INTEGER)")
        .unwrap();
    let piece =
        "lorem ipsum dolor sit amet, consectetur adipiscing elit. sed do eiusmod tempo ".repeat(2);
    let piece = &piece[..100];
    let (mut a, mut b, mut l) = (Vec::new(), Vec::new(), Vec::new());
    for round in 0..ROUNDS {
        for k in 0..3 {
            match (round + k) % 3 {
                0 => a.push(stream(&with_indexer, &s1, piece)),
                1 => b.push(stream(&without, &s2, piece)),
                _ => l.push(limit(&conn, piece)),
            }
        }
    }
    println!("update_part, background indexer   {}", median(a));
    println!("update_part, no background indexer {}", median(b));
    println!("limit UPDATE                        {}", median(l));
}
