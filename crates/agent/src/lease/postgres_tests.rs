//! The run lease on PostgreSQL, with real processes acting as two hosts (this test binary
//! re-run with a host name of its own, `SCRIBE_TEST_LEASE_HOST`): two hosts contending
//! for one session's lease never hold it at once, and a lease of another host (whose
//! pid this host cannot see) is live until its heartbeat is stale, then taken over, as
//! on SQLite.
//!
//! They need a server: `.ci/with-postgres cargo test -p scribe-agent --lib --
//! --ignored` (`.ci/run` does). Without one they are listed as ignored, never passed.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::fs::OpenOptions;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use scribe_db::ids::{Prefix, new_id};
use scribe_db::{Database, ManualClock, Options, now_ms};

use super::{AcquireError, LeaseConfig, TEST_HOST_ENV, acquire, this_host, this_owner};

const CHILD_URL: &str = "SCRIBE_TEST_LEASE_URL";
const CHILD_ROLE: &str = "SCRIBE_TEST_LEASE_ROLE";
const CHILD_SESSION: &str = "SCRIBE_TEST_LEASE_SESSION";
const CHILD_DIR: &str = "SCRIBE_TEST_LEASE_DIR";
/// How many times each contending host takes and releases the lease.
const ROUNDS: usize = 25;

/// A fresh, empty database named `name` on the test server; its connection string.
fn fresh(name: &str) -> String {
    scribe_db::testing::fresh_test_database(name).unwrap()
}

fn create_session(db: &Database) -> String {
    let id = new_id(Prefix::Session);
    db.write(|tx| scribe_db::testing::create_bare_session(tx, &id))
        .unwrap();
    id
}

fn lease_row(db: &Database, session_id: &str) -> Option<scribe_db::queries::SessionRunRow> {
    db.read(|tx| tx.q().get_session_run(session_id)).unwrap()
}

/// The child role, when spawned by a test below with the env vars set; a no-op otherwise.
///
/// - `contend`: takes the session's lease [`ROUNDS`] times; while holding it, creates
///   `holder` in the shared directory (exclusively: it fails if another host holds the
///   lease too) and logs its host name to `holds`;
/// - `hold`: takes the lease, creates `held`, and waits to be killed.
#[test]
fn child_host() {
    let (Ok(url), Ok(role), Ok(session), Ok(dir)) = (
        std::env::var(CHILD_URL),
        std::env::var(CHILD_ROLE),
        std::env::var(CHILD_SESSION),
        std::env::var(CHILD_DIR),
    ) else {
        return;
    };
    let dir = PathBuf::from(dir);
    let db = Arc::new(Database::open(&url).unwrap());
    let config = LeaseConfig::default();
    match role.as_str() {
        "contend" => {
            let started = Instant::now();
            let mut held = 0;
            while held < ROUNDS {
                assert!(
                    started.elapsed() < Duration::from_secs(120),
                    "{}: {held} of {ROUNDS} holds after two minutes",
                    this_host()
                );
                match acquire(&db, &session, &config) {
                    Ok(guard) => {
                        let marker = dir.join("holder");
                        if let Err(e) = OpenOptions::new()
                            .write(true)
                            .create_new(true)
                            .open(&marker)
                        {
                            panic!(
                                "{} holds the lease while another host does: {e}",
                                this_host()
                            );
                        }
                        let mut log = OpenOptions::new()
                            .append(true)
                            .create(true)
                            .open(dir.join("holds"))
                            .unwrap();
                        writeln!(log, "{}", this_host()).unwrap();
                        // Hold it a moment, so the other host tries meanwhile.
                        std::thread::sleep(Duration::from_millis(5));
                        std::fs::remove_file(&marker).unwrap();
                        drop(guard);
                        held += 1;
                    }
                    Err(AcquireError::Busy(holder)) => {
                        assert_ne!(holder.host, this_host(), "{holder:?}");
                        std::thread::sleep(Duration::from_millis(2));
                    }
                    Err(AcquireError::Db(e)) => panic!("{}: {e}", this_host()),
                }
            }
        }
        "hold" => {
            let _guard = acquire(&db, &session, &config).unwrap();
            std::fs::write(dir.join("held"), this_host()).unwrap();
            // Killed by the test long before; never outlives a test that failed early.
            std::thread::sleep(Duration::from_secs(300));
            panic!("host-a was never killed");
        }
        other => panic!("unknown child role {other}"),
    }
}

/// A child process, killed when dropped (a failed assertion never leaves it behind).
struct Host(Child);

impl Drop for Host {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn spawn_host(host: &str, url: &str, role: &str, session: &str, dir: &Path) -> Host {
    let child = Command::new(std::env::current_exe().unwrap())
        .args([
            "--exact",
            "lease::postgres_tests::child_host",
            "--nocapture",
            "--test-threads=1",
        ])
        .env(TEST_HOST_ENV, host)
        .env(CHILD_URL, url)
        .env(CHILD_ROLE, role)
        .env(CHILD_SESSION, session)
        .env(CHILD_DIR, dir)
        .stdout(Stdio::null())
        .spawn()
        .unwrap();
    Host(child)
}

#[test]
#[ignore = "needs PostgreSQL: run under .ci/with-postgres"]
fn two_hosts_contending_for_a_session_never_hold_its_lease_at_once() {
    let url = fresh("scribe_agent_lease_contend");
    let db = Database::open(&url).unwrap();
    let session = create_session(&db);
    let dir = tempfile::tempdir().unwrap();
    let mut children: Vec<Host> = ["host-a", "host-b"]
        .iter()
        .map(|host| spawn_host(host, &url, "contend", &session, dir.path()))
        .collect();
    for Host(child) in &mut children {
        let status = child.wait().unwrap();
        assert!(status.success(), "a host failed: {status}");
    }
    let holds = std::fs::read_to_string(dir.path().join("holds")).unwrap();
    for host in ["host-a", "host-b"] {
        assert_eq!(
            holds.lines().filter(|h| *h == host).count(),
            ROUNDS,
            "{host}"
        );
    }
    assert!(!dir.path().join("holder").exists());
    // Every hold was released: the lease row is gone.
    assert_eq!(lease_row(&db, &session), None);
}

#[test]
#[ignore = "needs PostgreSQL: run under .ci/with-postgres"]
fn a_lease_of_another_host_is_live_until_its_heartbeat_is_stale_then_taken_over() {
    let url = fresh("scribe_agent_lease_stale");
    let clock = ManualClock::new(now_ms());
    let db = Arc::new(
        Database::open_with(
            &url,
            Options {
                clock: clock.clock(),
                ..Options::default()
            },
        )
        .unwrap(),
    );
    let session = create_session(&db);
    let dir = tempfile::tempdir().unwrap();
    let Host(child) = &mut spawn_host("host-a", &url, "hold", &session, dir.path());
    let started = Instant::now();
    while !dir.path().join("held").exists() {
        assert!(
            started.elapsed() < Duration::from_secs(60),
            "host-a never took the lease"
        );
        if let Some(status) = child.try_wait().unwrap() {
            panic!("host-a ended: {status}");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    let config = LeaseConfig {
        stale_after: Duration::from_secs(30),
    };
    let busy = |db: &Arc<Database>| match acquire(db, &session, &config) {
        Err(AcquireError::Busy(holder)) => holder,
        Err(AcquireError::Db(e)) => panic!("{e}"),
        Ok(_) => panic!("took a live lease"),
    };
    let holder = busy(&db);
    assert_eq!(holder.host, "host-a");
    assert_ne!(holder.owner, this_owner());

    // Gone, but on another host: its pid means nothing here, so only the heartbeat can
    // say it is dead.
    child.kill().unwrap();
    child.wait().unwrap();
    let last = busy(&db);
    assert_eq!(last.owner, holder.owner);
    // Judged by this host's (database) clock against the last heartbeat.
    clock.set(last.heartbeat_at + 30_000);
    assert_eq!(busy(&db).owner, holder.owner);

    clock.set(last.heartbeat_at + 30_001);
    let guard = acquire(&db, &session, &config).unwrap_or_else(|e| panic!("{e:?}"));
    let row = lease_row(&db, &session).unwrap();
    assert_eq!(
        (row.owner.as_str(), row.host.as_str()),
        (this_owner(), this_host())
    );
    drop(guard);
    assert_eq!(lease_row(&db, &session), None);
}
