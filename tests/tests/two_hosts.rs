//! Two hosts, one PostgreSQL store: two processes (this test binary re-run in the
//! `two_hosts_child` role) write the same rows at once through the services, as agents on
//! two machines would, and nothing they were told succeeded may be duplicated or lost:
//!
//! - unique titles and `#N` lineage numbers: each creates continuations of one titled
//!   session (`race #2`, `race #3` …: the next number is read and used in one
//!   transaction), and creates new sessions in the lineage `gateway` with
//!   `create_in_lineage` (`gateway`, `gateway #2` …), as an agent and a chat gateway do;
//! - file versions: each records new versions of one file of one session;
//! - part positions: each appends parts to one message;
//! - exact usage totals: each adds usage to that message and to its session.
//!
//! Every change is a SERIALIZABLE transaction retried whole on a serialization failure
//! (`Database::write`); the parent checks that the stored rows are exactly what the
//! children acknowledged: numbers contiguous, none twice, totals to the token.
//!
//! PostgreSQL only (SQLite's one writer lock serializes these by construction; its
//! multi-process suite is `concurrent_processes`): run under `.ci/with-postgres … --ignored`.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::BTreeSet;
use std::process::{Child, Stdio};
use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use scribe_db::Database;
use scribe_message::{MessageService, NewMessage, Part, Role, TokenUsage};
use scribe_session::{NewSession, SessionService, UsageDelta};
use scribe_tests::{Backend, TestDb, child_command, error_chain};

const CHILD_TEST: &str = "two_hosts_child";
const ENV_DB: &str = "SCRIBE_TH_DB";
const ENV_HOST: &str = "SCRIBE_TH_HOST";
const ENV_ROOT: &str = "SCRIBE_TH_ROOT";
const ENV_MESSAGE: &str = "SCRIBE_TH_MESSAGE";
const ENV_ROUNDS: &str = "SCRIBE_TH_ROUNDS";
const ENV_START: &str = "SCRIBE_TH_START";
/// Rounds per host (`SCRIBE_TH_ROUNDS` overrides).
const ROUNDS: usize = 30;
const FILE: &str = "src/lib.rs";
/// Marks the protocol lines among libtest's own output.
const PREFIX: &str = "@th ";

fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
}

/// The usage a host adds in round `round`: different per host and round, so a lost or
/// doubled addition changes the total.
fn usage_of(host: &str, round: usize) -> TokenUsage {
    let base = if host == "a" { 1 } else { 1_000 };
    let round = i64::try_from(round).unwrap();
    TokenUsage {
        input: base + round,
        output: 2 * base + round,
        ..TokenUsage::default()
    }
}

/// The child: one host. Does nothing in a plain test run (no role set).
#[test]
fn two_hosts_child() {
    let Ok(location) = std::env::var(ENV_DB) else {
        return;
    };
    let host = std::env::var(ENV_HOST).unwrap();
    let root = std::env::var(ENV_ROOT).unwrap();
    let message = std::env::var(ENV_MESSAGE).unwrap();
    let rounds: usize = std::env::var(ENV_ROUNDS).unwrap().parse().unwrap();
    let start: u64 = std::env::var(ENV_START).unwrap().parse().unwrap();

    let db = Arc::new(Database::open(&location).unwrap());
    let sessions = SessionService::new(Arc::clone(&db));
    let messages = MessageService::new(Arc::clone(&db));
    // Both hosts start together, so their writes overlap.
    std::thread::sleep(Duration::from_millis(start.saturating_sub(now_ms())));
    let fail = |what: &str, err: &dyn std::error::Error| -> ! {
        panic!("host {host}: {what}: {}", error_chain(err))
    };
    for round in 0..rounds {
        let child = sessions
            .create_continuation(&root)
            .unwrap_or_else(|e| fail("continuation", &e));
        println!("{PREFIX}title {}", child.title.unwrap_or_default());

        let fresh = sessions
            .create_in_lineage(NewSession::titled("gateway"))
            .unwrap_or_else(|e| fail("create in lineage", &e));
        println!("{PREFIX}lineage {}", fresh.title.unwrap_or_default());

        let version = sessions
            .record_file(&root, FILE, &format!("host {host} round {round}\n"))
            .unwrap_or_else(|e| fail("record file", &e));
        println!("{PREFIX}version {}", version.version);

        let part = messages
            .append_part(&message, Part::text(format!("host {host} round {round}")))
            .unwrap_or_else(|e| fail("append part", &e));
        println!("{PREFIX}part {} {}", part.id, part.position);

        let usage = usage_of(&host, round);
        messages
            .add_usage(&message, usage, 0.0)
            .unwrap_or_else(|e| fail("message usage", &e));
        sessions
            .add_usage(
                &root,
                &UsageDelta {
                    tokens: usage,
                    api_calls: 1,
                    ..UsageDelta::default()
                },
            )
            .unwrap_or_else(|e| fail("session usage", &e));
        println!("{PREFIX}usage {round}");
    }
}

fn spawn(t: &TestDb, host: &str, root: &str, message: &str, rounds: usize, start: u64) -> Child {
    let mut cmd = child_command(CHILD_TEST).unwrap();
    cmd.env(ENV_DB, &t.location)
        .env(ENV_HOST, host)
        .env(ENV_ROOT, root)
        .env(ENV_MESSAGE, message)
        .env(ENV_ROUNDS, rounds.to_string())
        .env(ENV_START, start.to_string())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    cmd.spawn().unwrap()
}

/// What one host acknowledged.
#[derive(Default)]
struct Acked {
    titles: Vec<String>,
    lineage: Vec<String>,
    versions: Vec<i64>,
    parts: Vec<(String, i64)>,
    usages: usize,
}

/// What `child` acknowledged on stdout, once it exited successfully. Both pipes are read
/// together (`wait_with_output`): read one after the other, a child that wrote more than
/// a pipe buffer to stderr would block while stdout was waited on, and so would the test.
fn collect(host: &str, child: Child) -> Acked {
    let output = child.wait_with_output().unwrap();
    let (status, out, err) = (
        output.status,
        String::from_utf8_lossy(&output.stdout).into_owned(),
        String::from_utf8_lossy(&output.stderr).into_owned(),
    );
    assert!(
        status.success(),
        "host {host} failed ({status}):\n{err}\n{out}"
    );
    let mut acked = Acked::default();
    // libtest's `test two_hosts_child ... ` may start the first protocol line.
    for line in out
        .lines()
        .filter_map(|l| l.split_once(PREFIX).map(|(_, rest)| rest))
    {
        let fields: Vec<&str> = line.split(' ').collect();
        match fields[0] {
            "title" => acked.titles.push(line["title ".len()..].to_owned()),
            "lineage" => acked.lineage.push(line["lineage ".len()..].to_owned()),
            "version" => acked.versions.push(fields[1].parse().unwrap()),
            "part" => acked
                .parts
                .push((fields[1].to_owned(), fields[2].parse().unwrap())),
            "usage" => acked.usages += 1,
            other => panic!("host {host}: unknown line {other:?}"),
        }
    }
    acked
}

#[test]
#[ignore = "needs PostgreSQL: run under .ci/with-postgres"]
fn two_hosts_never_duplicate_or_lose_titles_versions_positions_or_usage() {
    let rounds: usize = std::env::var(ENV_ROUNDS)
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(ROUNDS);
    let t = TestDb::new(Backend::Postgres);
    let sessions = SessionService::new(Arc::clone(&t.db));
    let messages = MessageService::new(Arc::clone(&t.db));
    let root = sessions.create(NewSession::titled("race")).unwrap();
    let message = messages
        .create(NewMessage::new(
            &root.id,
            Role::Assistant,
            vec![Part::text("start")],
        ))
        .unwrap();

    let start = now_ms() + 1_500;
    let a = spawn(&t, "a", &root.id, &message.id, rounds, start);
    let b = spawn(&t, "b", &root.id, &message.id, rounds, start);
    let a = collect("a", a);
    let b = collect("b", b);
    let total = 2 * rounds;
    for acked in [&a, &b] {
        assert_eq!(acked.titles.len(), rounds);
        assert_eq!(acked.lineage.len(), rounds);
        assert_eq!(acked.versions.len(), rounds);
        assert_eq!(acked.parts.len(), rounds);
        assert_eq!(acked.usages, rounds);
    }

    // Titles: `race #2` … `race #(2n+1)`, each acknowledged once and stored once.
    let expected: BTreeSet<String> = (2..=total + 1).map(|n| format!("race #{n}")).collect();
    let acked: Vec<&String> = a.titles.iter().chain(&b.titles).collect();
    let acked_set: BTreeSet<String> = acked.iter().map(|s| (*s).clone()).collect();
    assert_eq!(acked_set.len(), acked.len(), "a title was given twice");
    assert_eq!(acked_set, expected);
    let stored: Vec<String> = sessions
        .children(&root.id)
        .unwrap()
        .into_iter()
        .map(|s| s.title.unwrap_or_default())
        .collect();
    assert_eq!(stored.len(), total);
    assert_eq!(stored.into_iter().collect::<BTreeSet<_>>(), expected);
    assert_eq!(
        sessions.next_title_in_lineage("race").unwrap(),
        format!("race #{}", total + 2)
    );

    // New sessions in one lineage: `gateway`, `gateway #2` … `gateway #2n`, each
    // acknowledged once and stored once.
    let expected: BTreeSet<String> = std::iter::once("gateway".to_owned())
        .chain((2..=total).map(|n| format!("gateway #{n}")))
        .collect();
    let acked: Vec<&String> = a.lineage.iter().chain(&b.lineage).collect();
    let acked_set: BTreeSet<String> = acked.iter().map(|s| (*s).clone()).collect();
    assert_eq!(
        acked_set.len(),
        acked.len(),
        "a lineage title was given twice"
    );
    assert_eq!(acked_set, expected);
    assert_eq!(
        sessions.resolve_by_title("gateway").unwrap().title.unwrap(),
        format!("gateway #{total}")
    );

    // File versions: 1 … 2n, each acknowledged once and stored once.
    let mut versions: Vec<i64> = a.versions.iter().chain(&b.versions).copied().collect();
    versions.sort_unstable();
    let expected: Vec<i64> = (1..=i64::try_from(total).unwrap()).collect();
    assert_eq!(versions, expected);
    let stored: Vec<i64> = sessions
        .file_versions(&root.id, FILE)
        .unwrap()
        .into_iter()
        .map(|v| v.version)
        .collect::<BTreeSet<_>>()
        .into_iter()
        .collect();
    assert_eq!(stored, expected);

    // Part positions: the first part at 0, then 1 … 2n, each part where it was
    // acknowledged.
    let stored = messages.get(&message.id).unwrap();
    let positions: Vec<i64> = stored.parts.iter().map(|p| p.position).collect();
    let expected: Vec<i64> = (0..=i64::try_from(total).unwrap()).collect();
    assert_eq!(positions, expected);
    for (id, position) in a.parts.iter().chain(&b.parts) {
        let part = stored
            .parts
            .iter()
            .find(|p| &p.id == id)
            .expect("acked part");
        assert_eq!(part.position, *position);
    }

    // Usage: every addition counted once, on the message and on its session.
    let (input, output) = ["a", "b"]
        .iter()
        .flat_map(|host| (0..rounds).map(move |r| usage_of(host, r)))
        .fold((0, 0), |(i, o), u| (i + u.input, o + u.output));
    assert_eq!((stored.usage.input, stored.usage.output), (input, output));
    let session = sessions.get(&root.id).unwrap();
    assert_eq!(
        (session.tokens.input, session.tokens.output),
        (input, output)
    );
    assert_eq!(session.api_call_count, i64::try_from(total).unwrap());
}

/// `collect` reads a child that writes more to stderr than a pipe holds (a panicking
/// child's backtrace, a chatty driver) before it writes its acknowledgements: before, it
/// read stdout to its end first, while the child waited for room on stderr, and both
/// waited for ever. Needs no server (the child is `sh`).
#[cfg(unix)]
#[test]
fn collect_reads_a_child_that_fills_its_stderr_pipe() {
    let child = std::process::Command::new("sh")
        .arg("-c")
        .arg(format!(
            "yes noise | head -c 1000000 >&2; echo '{PREFIX}title race #2'"
        ))
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let (done, acked) = std::sync::mpsc::channel();
    std::thread::spawn(move || done.send(collect("noisy", child).titles));
    let titles = acked
        .recv_timeout(Duration::from_secs(60))
        .expect("collect returned (it blocked on a full stderr pipe)");
    assert_eq!(titles, ["race #2"]);
}
