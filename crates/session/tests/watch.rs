//! `Store::watch`: one subscription that hears every change a session list shows, made by
//! this store, by another handle on the same file (as another process would), or missed.
//! A real second process is `examples/watch_list.rs`'s test.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::BTreeSet;
use std::time::{Duration, Instant};

use scribe_message::{NewMessage, Part, Role};
use scribe_session::{NewSession, SessionChanges, Store};

const SOON: Duration = Duration::from_secs(5);

fn say(store: &Store, session_id: &str, text: &str) {
    store
        .messages()
        .create(NewMessage::new(
            session_id,
            Role::User,
            vec![Part::text(text)],
        ))
        .unwrap();
}

/// A message appended changes its session's count but is no session event: the session
/// broker alone misses it (a list fed by it went stale); the watch names the session.
#[test]
fn a_message_append_reaches_the_watch_with_its_session() {
    let store = Store::open_in_memory().unwrap();
    let session = store
        .sessions()
        .create(NewSession::titled("counted"))
        .unwrap();
    let sessions_only = store.sessions().subscribe();
    let mut watch = store.watch().unwrap();

    say(&store, &session.id, "one more");

    assert_eq!(sessions_only.try_iter().count(), 0);
    assert_eq!(
        watch.wait(SOON).unwrap(),
        Some(SessionChanges::Sessions(BTreeSet::from([session
            .id
            .clone()])))
    );
    assert_eq!(store.sessions().get(&session.id).unwrap().message_count, 1);
}

/// Created, renamed and deleted sessions and appends to two of them, all seen before the
/// next wait: one report naming each session once; then quiet is `None`, after the
/// timeout and not before.
#[test]
fn changes_are_gathered_and_quiet_times_out() {
    let store = Store::open_in_memory().unwrap();
    let mut watch = store.watch().unwrap();
    let a = store.sessions().create(NewSession::titled("a")).unwrap();
    let b = store.sessions().create(NewSession::titled("b")).unwrap();
    say(&store, &a.id, "x");
    say(&store, &b.id, "y");
    store.sessions().set_title(&a.id, Some("a2")).unwrap();
    store.sessions().delete(&b.id).unwrap();

    let changes = watch.wait(SOON).unwrap().unwrap();
    assert_eq!(
        changes,
        SessionChanges::Sessions(BTreeSet::from([a.id.clone(), b.id.clone()]))
    );
    assert!(changes.touches(&a.id) && !changes.touches("ses_other"));

    let started = Instant::now();
    assert_eq!(watch.wait(Duration::from_millis(150)).unwrap(), None);
    assert!(started.elapsed() >= Duration::from_millis(150));
}

/// Another handle on the same file stands for another process: its commits reach no
/// broker of this store, and the watch reports them as `All` (SQLite's data version
/// names no session) within a poll; a read of this store's own does not.
#[test]
fn another_handles_commit_on_the_file_is_all() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("scribe.db");
    let store = Store::open(&path).unwrap();
    let other = Store::open(&path).unwrap();
    let session = other
        .sessions()
        .create(NewSession::titled("there"))
        .unwrap();
    let mut watch = store.watch().unwrap();

    store.sessions().get(&session.id).unwrap();
    assert_eq!(watch.wait(Duration::from_millis(300)).unwrap(), None);

    say(&other, &session.id, "from elsewhere");
    let started = Instant::now();
    assert_eq!(watch.wait(SOON).unwrap(), Some(SessionChanges::All));
    assert!(started.elapsed() < Duration::from_secs(1));
    assert_eq!(store.sessions().get(&session.id).unwrap().message_count, 1);

    other.sessions().delete(&session.id).unwrap();
    assert_eq!(watch.wait(SOON).unwrap(), Some(SessionChanges::All));
    assert!(store.sessions().get(&session.id).is_err());
}

/// More events than a subscription holds: what was missed cannot be named, so the
/// report is `All`, and the watch goes on naming sessions afterwards.
#[test]
fn missed_events_are_all() {
    let store = Store::open_in_memory().unwrap();
    let session = store.sessions().create(NewSession::titled("busy")).unwrap();
    let mut watch = store.watch().unwrap();
    for i in 0..=scribe_pubsub::DEFAULT_BUFFER {
        say(&store, &session.id, &format!("message {i}"));
    }
    assert_eq!(watch.wait(SOON).unwrap(), Some(SessionChanges::All));

    say(&store, &session.id, "after");
    assert_eq!(
        watch.wait(SOON).unwrap(),
        Some(SessionChanges::Sessions(BTreeSet::from([session.id])))
    );
}

/// On PostgreSQL the change outbox names the session of another handle's commit (as
/// another host's would be), and a deletion too.
#[cfg(feature = "postgres")]
#[test]
#[ignore = "needs a PostgreSQL server: .ci/with-postgres cargo test -p scribe-session \
            --features postgres --test watch -- --ignored"]
fn another_hosts_commit_on_postgresql_names_its_session() {
    let name = scribe_db::testing::unique_test_name("scribe_session_watch");
    let location = scribe_db::testing::fresh_test_database(&name).unwrap();
    let store = Store::open(&location).unwrap();
    let other = Store::open(&location).unwrap();
    let session = other
        .sessions()
        .create(NewSession::titled("there"))
        .unwrap();
    let mut watch = store.watch().unwrap();
    assert_eq!(watch.wait(Duration::from_millis(300)).unwrap(), None);

    say(&other, &session.id, "from another host");
    let named = SessionChanges::Sessions(BTreeSet::from([session.id.clone()]));
    assert_eq!(watch.wait(SOON).unwrap(), Some(named.clone()));
    assert_eq!(store.sessions().get(&session.id).unwrap().message_count, 1);

    other.sessions().delete(&session.id).unwrap();
    assert_eq!(watch.wait(SOON).unwrap(), Some(named));
}

/// On a file, this process's own appends are seen as every commit is (its data version),
/// so the watch subscribes to no message or part broker: a streamed reply written while
/// a list is watched clones nothing for it. An in-memory store has only its brokers.
#[test]
fn a_file_stores_watch_costs_its_appends_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(dir.path().join("scribe.db")).unwrap();
    let session = store.sessions().create(NewSession::titled("own")).unwrap();
    let mut watch = store.watch().unwrap();
    assert_eq!(store.messages().messages().subscriber_count(), 0);
    assert_eq!(store.messages().parts().subscriber_count(), 0);
    say(&store, &session.id, "mine");
    assert_eq!(watch.wait(SOON).unwrap(), Some(SessionChanges::All));

    let memory = Store::open_in_memory().unwrap();
    let _watch = memory.watch().unwrap();
    assert_eq!(memory.messages().messages().subscriber_count(), 1);
    assert_eq!(memory.messages().parts().subscriber_count(), 1);
}

/// A file SQLite can only read as `immutable` (a read-only location, no writer when it
/// was opened) has no data version that moves: its watch is refused by name rather than
/// one that never reports. Needs root to bind-mount a directory read-only (the only way
/// to make SQLite read a file as immutable as root); `.ci/run` runs it.
#[cfg(target_os = "linux")]
#[test]
#[ignore = "needs root to bind-mount a directory read-only: .ci/run runs it with --ignored"]
fn an_immutable_file_cannot_be_watched() {
    let source = tempfile::tempdir().unwrap();
    {
        let store = Store::open(source.path().join("scribe.db")).unwrap();
        store.sessions().create(NewSession::titled("kept")).unwrap();
    }
    let at = tempfile::tempdir().unwrap();
    let _mounted = ReadOnlyMount::new(source.path(), at.path());
    let db = scribe_db::Database::open_read_only(at.path().join("scribe.db")).unwrap();
    assert!(db.is_immutable());
    let store = Store::new(std::sync::Arc::new(db));
    assert_eq!(store.sessions().list(&Default::default()).unwrap().len(), 1);
    let err = store.watch().unwrap_err();
    assert!(
        matches!(err, scribe_session::SessionError::InvalidInput(_)),
        "{err}"
    );
    assert!(err.to_string().contains("immutable"), "{err}");
}

/// `source` bind-mounted read-only at `at` until dropped (lazily unmounted, so an open
/// connection cannot keep it).
#[cfg(target_os = "linux")]
struct ReadOnlyMount(std::path::PathBuf);

#[cfg(target_os = "linux")]
impl ReadOnlyMount {
    fn new(source: &std::path::Path, at: &std::path::Path) -> ReadOnlyMount {
        let mount = |args: &[&std::ffi::OsStr]| {
            let out = std::process::Command::new("mount")
                .args(args)
                .output()
                .unwrap();
            assert!(
                out.status.success(),
                "this test needs root to bind-mount a directory read-only: {}",
                String::from_utf8_lossy(&out.stderr)
            );
        };
        mount(&["--bind".as_ref(), source.as_os_str(), at.as_os_str()]);
        let mounted = ReadOnlyMount(at.to_owned());
        mount(&["-o".as_ref(), "remount,bind,ro".as_ref(), at.as_os_str()]);
        mounted
    }
}

#[cfg(target_os = "linux")]
impl Drop for ReadOnlyMount {
    fn drop(&mut self) {
        let _ = std::process::Command::new("umount")
            .arg("-l")
            .arg(&self.0)
            .status();
    }
}
