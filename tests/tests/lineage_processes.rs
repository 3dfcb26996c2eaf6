//! Creating sessions in one title lineage from several processes at once, as an agent and
//! a chat gateway on one store do: each process (this test binary re-run in the
//! `lineage_processes_child` role) creates its sessions with
//! `SessionService::create_in_lineage`, which picks the lineage's next free title and
//! creates the session in one write transaction. No process may see an error (the
//! two-step `next_title_in_lineage` then `create` gives some `TitleInUse`), and the titles
//! must come out exactly `t`, `t #2` … `t #N*M`, each acknowledged once.
//!
//! On SQLite (a file) and on PostgreSQL (`.ci/with-postgres … --ignored`, where the
//! SERIALIZABLE transactions are retried whole on a serialization failure).
//! `SCRIBE_LP_TWO_STEP=1` makes the children use the two-step form instead, to see it
//! race (the test then fails).

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::BTreeSet;
use std::process::{Child, Stdio};
use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use scribe_db::Database;
use scribe_session::{NewSession, SessionFilter, SessionService};
use scribe_tests::{Backend, TestDb, child_command, error_chain};

const CHILD_TEST: &str = "lineage_processes_child";
const ENV_DB: &str = "SCRIBE_LP_DB";
const ENV_COUNT: &str = "SCRIBE_LP_COUNT";
const ENV_START: &str = "SCRIBE_LP_START";
/// Set (to anything) to make the children use `next_title_in_lineage` then `create`.
const ENV_TWO_STEP: &str = "SCRIBE_LP_TWO_STEP";
const PROCESSES: usize = 4;
const PER_PROCESS: usize = 25;
const LINEAGE: &str = "fix the build";
/// Marks the protocol lines among libtest's own output.
const PREFIX: &str = "@lp ";

fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
}

#[test]
fn lineage_processes_child() {
    let Ok(location) = std::env::var(ENV_DB) else {
        return;
    };
    let count: usize = std::env::var(ENV_COUNT).unwrap().parse().unwrap();
    let start: u64 = std::env::var(ENV_START).unwrap().parse().unwrap();
    let two_step = std::env::var_os(ENV_TWO_STEP).is_some();
    let db = Arc::new(Database::open(&location).unwrap());
    let sessions = SessionService::new(Arc::clone(&db));
    // Every process starts together, so their creates overlap.
    std::thread::sleep(Duration::from_millis(start.saturating_sub(now_ms())));
    for _ in 0..count {
        let created = if two_step {
            sessions
                .next_title_in_lineage(LINEAGE)
                .and_then(|title| sessions.create(NewSession::titled(title)))
        } else {
            sessions.create_in_lineage(NewSession {
                source: "gateway".to_owned(),
                ..NewSession::titled(LINEAGE)
            })
        };
        let session = created.unwrap_or_else(|e| panic!("create: {}", error_chain(&e)));
        println!("{PREFIX}{}", session.title.unwrap_or_default());
    }
    // Not a protocol line: how often the store retried a write (busy, or 40001).
    println!("\n@lp-retries {}", db.write_retries());
}

fn spawn(t: &TestDb, start: u64) -> Child {
    let mut cmd = child_command(CHILD_TEST).unwrap();
    cmd.env(ENV_DB, &t.location)
        .env(ENV_COUNT, PER_PROCESS.to_string())
        .env(ENV_START, start.to_string())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    cmd.spawn().unwrap()
}

/// N processes each create M sessions in one lineage at once: none fails, and the titles
/// acknowledged and stored are exactly `t`, `t #2` … `t #N*M`, once each.
fn processes_creating_in_one_lineage_never_collide(backend: Backend) {
    let t = TestDb::new(backend);
    // Far enough ahead for every child to have opened the store.
    let start = now_ms() + 1_500;
    let children: Vec<Child> = (0..PROCESSES).map(|_| spawn(&t, start)).collect();
    let mut acked = Vec::new();
    let mut retries = 0;
    for (i, child) in children.into_iter().enumerate() {
        let out = child.wait_with_output().unwrap();
        let stdout = String::from_utf8_lossy(&out.stdout);
        assert!(
            out.status.success(),
            "process {i} failed ({}):\n{}\n{stdout}",
            out.status,
            String::from_utf8_lossy(&out.stderr)
        );
        let titles: Vec<String> = stdout
            .lines()
            .filter_map(|l| l.split_once(PREFIX).map(|(_, rest)| rest.to_owned()))
            .collect();
        assert_eq!(titles.len(), PER_PROCESS, "process {i}:\n{stdout}");
        acked.extend(titles);
        retries += stdout
            .lines()
            .filter_map(|l| l.strip_prefix("@lp-retries "))
            .map(|n| n.trim().parse::<u64>().unwrap())
            .sum::<u64>();
    }

    let total = PROCESSES * PER_PROCESS;
    println!("{backend:?}: {total} sessions created in one lineage, {retries} write retries");
    let want: BTreeSet<String> = std::iter::once(LINEAGE.to_owned())
        .chain((2..=total).map(|n| format!("{LINEAGE} #{n}")))
        .collect();
    let distinct: BTreeSet<String> = acked.iter().cloned().collect();
    assert_eq!(distinct.len(), acked.len(), "a title acknowledged twice");
    assert_eq!(distinct, want);

    let sessions = SessionService::new(t.reopen());
    let stored: BTreeSet<String> = sessions
        .list(&SessionFilter::default())
        .unwrap()
        .into_iter()
        .map(|s| {
            assert_eq!(s.source, "gateway");
            s.title.unwrap()
        })
        .collect();
    assert_eq!(stored, want);
    assert_eq!(
        sessions.resolve_by_title(LINEAGE).unwrap().title.unwrap(),
        format!("{LINEAGE} #{total}")
    );
}

scribe_tests::backends!(processes_creating_in_one_lineage_never_collide);
