//! Throwaway profile (issue 14, the write path): `N` appends through
//! `MessageService::create` (one user message with one text part each) or `N` streamed
//! flushes through `MessageService::update_part` (a growing 10 KB text part, as the bench's
//! streaming row), on a fresh file with the background indexer, in one process. Prints
//! the time per write; for counting instructions run it under
//! `valgrind --tool=callgrind` and subtract a run with `N=0` (the setup).
//! Usage: `MODE=append|flush N=<writes> write_profile <DIR>`
#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

use std::sync::Arc;
use std::time::Instant;

use scribe_db::Database;
use scribe_message::{MessageService, NewMessage, Part, PartTime, Role, TextPart};
use scribe_session::{NewSession, SessionService};

/// Flushes per streamed reply (the bench's streaming row: 10 KB in 100 flushes).
const FLUSHES: usize = 100;

fn main() {
    let dir = std::path::PathBuf::from(std::env::args().nth(1).expect("usage: write_profile DIR"));
    let mode = std::env::var("MODE").unwrap_or_else(|_| "append".to_owned());
    let n: usize = std::env::var("N")
        .ok()
        .map_or(2_000, |v| v.parse().expect("N is a number"));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join(format!("write-profile-{mode}.db"));
    for suffix in ["", "-wal", "-shm"] {
        let _ = std::fs::remove_file(format!("{}{suffix}", path.display()));
    }
    let db = Arc::new(Database::open(&path).unwrap());
    let session = SessionService::new(Arc::clone(&db))
        .create(NewSession::default())
        .unwrap()
        .id;
    let svc = MessageService::new(db);
    let piece = "lorem ipsum dolor sit amet, consectetur adipiscing elit. sed do eiusmod tempo "
        .repeat(2)[..100]
        .to_owned();
    let started = Instant::now();
    match mode.as_str() {
        "append" => {
            for i in 0..n {
                let text = format!("message {i}: {piece}");
                svc.create(NewMessage::new(
                    &session,
                    Role::User,
                    vec![Part::text(text)],
                ))
                .unwrap();
            }
        }
        "flush" => {
            let mut done = 0;
            while done < n {
                let mut text = TextPart {
                    text: String::new(),
                    time: Some(PartTime {
                        start: svc.database().now(),
                        end: None,
                    }),
                    ..TextPart::default()
                };
                let msg = svc
                    .create(NewMessage::new(
                        &session,
                        Role::Assistant,
                        vec![Part::Text(text.clone())],
                    ))
                    .unwrap();
                let id = msg.parts[0].id.clone();
                for _ in 0..FLUSHES.min(n - done) {
                    text.text.push_str(&piece);
                    svc.update_part(&id, Part::Text(text.clone())).unwrap();
                    done += 1;
                }
            }
        }
        other => panic!("MODE: no mode named {other:?} (append, flush)"),
    }
    let elapsed = started.elapsed();
    if n > 0 {
        println!(
            "{mode}: {n} writes, {:.1} us each",
            elapsed.as_secs_f64() * 1e6 / n as f64
        );
    }
}
