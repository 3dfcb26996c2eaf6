//! A bounded WAL: writer processes append to one file in three phases, each writing many
//! times `wal_restart_pages` worth of WAL; the `-wal` file must stay under a bound while
//! they write and after each phase, and nothing may be lost.
//!
//! SQLite's own passive auto-checkpoint never catches up with writers that keep
//! committing, so without the background checkpointer (`Options::wal_restart_pages` = 0)
//! the file grows by everything written (about 40 MiB per phase here). With it, the WAL is
//! checkpointed and started over whenever a commit leaves it past the threshold
//! (`WAL_PAGES` = 1 MiB here), and `journal_size_limit` trims the file back to twice that
//! when it starts over after a spike.
//!
//! Each writer is this test binary re-run in the `wal_bounded_child` role: it appends
//! messages through `MessageService::create`, prints `ack <message id> <parts>` after each
//! commit and, at the end, `restarts <n>` (each line marked `@wal `): the WAL restarts its checkpointer made.
//! The parent samples the file's size while they run (a lower peak is all a slow sample
//! can cause), then checks every acknowledged message whole, the file's consistency (the
//! same checks as `scribe db check`, and the counters) and that restarts happened.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::HashMap;
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Duration;

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use scribe_db::{Database, Options};
use scribe_message::{MessageService, NewMessage, Part, Role};
use scribe_tests::{WORDS, child_command, consistency_problems, create_session, seed};

const CHILD_TEST: &str = "wal_bounded_child";
const ENV_DB: &str = "SCRIBE_WAL_DB";
const ENV_SESSION: &str = "SCRIBE_WAL_SESSION";
const ENV_SEED: &str = "SCRIBE_WAL_SEED";
const ENV_COUNT: &str = "SCRIBE_WAL_COUNT";

/// Marks the protocol lines among libtest's own output (which may share their line).
const PREFIX: &str = "@wal ";

const WRITERS: usize = 3;
const PHASES: usize = 3;
const MESSAGES_PER_WRITER: usize = 300;
/// The writers' threshold: 256 pages of 4 KiB.
const WAL_PAGES: u32 = 256;
/// What the `-wal` file may reach: 32 times the threshold. It grows past the threshold
/// only by what is committed while a restart is under way or has to wait for the lock:
/// here ~40 MB/s of writers times a checkpoint's syncs, a few ms (tens to hundreds on a
/// disk busy with other work). Rounds that gave up whenever a writer's own
/// auto-checkpoint held the checkpoint lock made it load-dependent: at a load of ~4-6 on
/// 2 cores the file reached 30-40 MB (the whole phase) in about one run of three; with
/// rounds that take the lock and wait for that checkpoint, 2-5 MB in most phases and at
/// most 12.6 MB in 18 phases under the same load.
const WAL_BOUND: u64 = 32 * 1024 * 1024;

fn options() -> Options {
    Options {
        wal_restart_pages: WAL_PAGES,
        ..Options::default()
    }
}

/// A message of 1-3 text parts, about 4-12 KB of text: enough WAL per commit that each
/// phase writes the threshold many times over.
fn message(rng: &mut StdRng, session: &str) -> NewMessage {
    let parts = rng.random_range(1..=3);
    let parts = (0..parts)
        .map(|_| {
            let words: Vec<&str> = (0..rng.random_range(150..400))
                .map(|_| WORDS[rng.random_range(0..WORDS.len())])
                .collect();
            Part::text(words.join(" "))
        })
        .collect();
    NewMessage::new(session, Role::Assistant, parts)
}

/// The child side: appends `SCRIBE_WAL_COUNT` messages, acknowledging each.
#[test]
fn wal_bounded_child() {
    let Ok(db) = std::env::var(ENV_DB) else {
        return; // not a child: nothing to do in the normal run
    };
    let session = std::env::var(ENV_SESSION).unwrap();
    let seed: u64 = std::env::var(ENV_SEED).unwrap().parse().unwrap();
    let count: usize = std::env::var(ENV_COUNT).unwrap().parse().unwrap();
    let db = Arc::new(Database::open_with(&db, options()).unwrap());
    let svc = MessageService::new(Arc::clone(&db));
    let mut rng = StdRng::seed_from_u64(seed);
    for _ in 0..count {
        let new = message(&mut rng, &session);
        let parts = new.parts.len();
        let created = svc.create(new).unwrap();
        println!("{PREFIX}ack {} {parts}", created.id);
    }
    println!("{PREFIX}restarts {}", db.wal_restarts());
}

fn wal_path(db: &Path) -> PathBuf {
    let mut wal = db.as_os_str().to_owned();
    wal.push("-wal");
    PathBuf::from(wal)
}

fn wal_size(db: &Path) -> u64 {
    std::fs::metadata(wal_path(db)).map_or(0, |m| m.len())
}

/// One phase: a writer process per session, all at once; the acknowledged messages
/// (id → parts), the restarts the writers' checkpointers made, and the largest size of
/// the `-wal` file seen meanwhile.
fn phase(path: &Path, sessions: &[String], seed: u64) -> (HashMap<String, usize>, u64, u64) {
    let done = Arc::new(AtomicBool::new(false));
    let peak = Arc::new(AtomicU64::new(0));
    let sampler = {
        let (done, peak, path) = (Arc::clone(&done), Arc::clone(&peak), path.to_owned());
        std::thread::spawn(move || {
            while !done.load(Ordering::Relaxed) {
                peak.fetch_max(wal_size(&path), Ordering::Relaxed);
                std::thread::sleep(Duration::from_millis(1));
            }
        })
    };
    let children: Vec<_> = sessions
        .iter()
        .enumerate()
        .map(|(i, session)| {
            child_command(CHILD_TEST)
                .unwrap()
                .env(ENV_DB, path)
                .env(ENV_SESSION, session)
                .env(ENV_SEED, (seed + i as u64).to_string())
                .env(ENV_COUNT, MESSAGES_PER_WRITER.to_string())
                .stdout(Stdio::piped())
                .stderr(Stdio::inherit())
                .spawn()
                .unwrap()
        })
        .collect();
    let mut acked = HashMap::new();
    let mut restarts = 0;
    for mut child in children {
        let stdout = BufReader::new(child.stdout.take().unwrap());
        for line in stdout.lines() {
            let line = line.unwrap();
            let Some((_, said)) = line.split_once(PREFIX) else {
                continue; // libtest's own lines
            };
            let mut words = said.split_whitespace();
            match (words.next(), words.next(), words.next()) {
                (Some("ack"), Some(id), Some(parts)) => {
                    acked.insert(id.to_owned(), parts.parse().unwrap());
                }
                (Some("restarts"), Some(n), None) => restarts += n.parse::<u64>().unwrap(),
                _ => panic!("unexpected line from a writer: {line:?}"),
            }
        }
        assert!(child.wait().unwrap().success(), "a writer failed");
    }
    done.store(true, Ordering::Relaxed);
    sampler.join().unwrap();
    let peak = peak.load(Ordering::Relaxed).max(wal_size(path));
    (acked, restarts, peak)
}

#[test]
fn the_wal_stays_bounded_with_several_writer_processes() {
    let seed = seed();
    println!("seed {seed} (SCRIBE_TEST_SEED reproduces it)");
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("scribe.db");
    // Held open throughout, as a TUI or a server would: the file's WAL outlives each
    // phase's writers (the last connection to close would checkpoint and delete it).
    let db = Arc::new(Database::open_with(&path, options()).unwrap());
    let sessions: Vec<String> = (0..WRITERS)
        .map(|i| create_session(&db, Some(&format!("writer {i}"))).unwrap())
        .collect();
    let svc = MessageService::new(Arc::clone(&db));
    let mut acked = HashMap::new();
    for round in 0..PHASES {
        let started = std::time::Instant::now();
        let (new, restarts, peak) = phase(&path, &sessions, seed + 100 * round as u64);
        println!(
            "phase {round}: {} messages in {:?}, {restarts} restarts, peak -wal {peak} B, now {} B",
            new.len(),
            started.elapsed(),
            wal_size(&path)
        );
        assert_eq!(new.len(), WRITERS * MESSAGES_PER_WRITER);
        assert!(
            restarts > 0,
            "phase {round}: no writer's checkpointer restarted the WAL"
        );
        assert!(
            peak <= WAL_BOUND,
            "phase {round}: the -wal file reached {peak} bytes (bound {WAL_BOUND})"
        );
        let now = wal_size(&path);
        assert!(
            now <= WAL_BOUND,
            "after phase {round}: the -wal file holds {now} bytes (bound {WAL_BOUND})"
        );
        acked.extend(new);
    }

    // Nothing lost: every acknowledged message, with all its parts.
    for (id, parts) in &acked {
        let message = svc
            .get(id)
            .unwrap_or_else(|err| panic!("message {id} is lost: {err}"));
        assert_eq!(message.parts.len(), *parts, "message {id} lost parts");
    }
    for session in &sessions {
        let stored = svc.list(session).unwrap().len();
        assert_eq!(stored, PHASES * MESSAGES_PER_WRITER, "session {session}");
    }
    // What `scribe db check` checks, and the counters and indexes besides.
    let report = db.check().unwrap();
    assert!(report.is_ok(), "db check: {:?}", report.problems());
    assert_eq!(consistency_problems(&db).unwrap(), Vec::<String>::new());
}
