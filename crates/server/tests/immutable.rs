//! A database SQLite can only read as `immutable` (a read-only directory or medium, no
//! writer running when the server starts): its data version never moves, so the server
//! watches the files and opens the database again when they change. Live events and pages
//! must keep following another process's writes.
//!
//! The only way to make SQLite fall back to `immutable` is a directory it cannot create the
//! `-shm` file in; as root (this machine's CI) permission bits do not stop that, so the test
//! bind-mounts the fixture's directory read-only. That needs root, so it is ignored by
//! default and `.ci/run` runs it with `--ignored`.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::path::{Path, PathBuf};
use std::process::Command;

use common::*;
use scribe_db::Database;
use serde_json::{Value, json};

/// `source` bind-mounted read-only at `at` until dropped.
struct ReadOnlyMount {
    at: PathBuf,
}

impl ReadOnlyMount {
    fn new(source: &Path, at: &Path) -> ReadOnlyMount {
        let run = |args: &[&str]| {
            let out = Command::new("mount")
                .args(args)
                .output()
                .unwrap_or_else(|err| {
                    panic!("this test needs mount(8) and root to bind-mount read-only: {err}")
                });
            assert!(
                out.status.success(),
                "this test needs root (CAP_SYS_ADMIN) to bind-mount a directory read-only; \
                 mount {args:?} said: {}",
                String::from_utf8_lossy(&out.stderr)
            );
        };
        let (source, at_text) = (source.to_str().unwrap(), at.to_str().unwrap());
        run(&["--bind", source, at_text]);
        let mount = ReadOnlyMount { at: at.to_owned() };
        run(&["-o", "remount,bind,ro", at_text]);
        mount
    }
}

impl Drop for ReadOnlyMount {
    fn drop(&mut self) {
        // Lazy: a connection still open (a server thread finishing) must not leave it mounted.
        let _ = Command::new("umount").arg("-l").arg(&self.at).status();
    }
}

/// The text of the last message of `session`, as the API serves it.
fn last_text(addr: std::net::SocketAddr, session: &str) -> Value {
    let page = get_json(
        addr,
        &format!("/api/sessions/{session}/messages?tail=1&limit=1"),
    );
    page["messages"][0]["parts"][0]["part"]["text"].clone()
}

/// Reads change events until the last message of `session` is `text`. A server that never
/// notices fails the test: each read waits at most 30 s for a line, and four keep-alive
/// comments (a minute) without a change are a failure.
fn follow_until(
    next_line: &mut impl FnMut() -> String,
    addr: std::net::SocketAddr,
    session: &str,
    text: &str,
) {
    while last_text(addr, session) != json!(text) {
        let mut quiet = 0;
        loop {
            let line = next_line();
            if line == "event: change" {
                break;
            }
            if line.starts_with(':') {
                quiet += 1;
                assert!(
                    quiet < 4,
                    "no change event for a minute; the write went unseen"
                );
            }
            assert!(
                line.is_empty() || line.starts_with(':') || line.starts_with("data:"),
                "{line}"
            );
        }
    }
}

/// Not a test: the writer process `write_elsewhere` starts.
#[test]
#[ignore = "helper: run as a separate writer process by the test below"]
fn writer_process() {
    assert!(writer_main(), "run only with SCRIBE_TEST_WRITE set");
}

#[test]
#[ignore = "needs root (CAP_SYS_ADMIN) to bind-mount a directory read-only, the only way to \
            make SQLite read a file as immutable here; .ci/run runs it with --ignored"]
fn live_updates_follow_a_database_read_as_immutable() {
    let f = fixture();
    let view = tempfile::tempdir().unwrap();
    let _mount = ReadOnlyMount::new(f.dir.path(), view.path());
    let db = view.path().join(f.db.file_name().unwrap());
    assert!(
        Database::open_read_only(&db).unwrap().is_immutable(),
        "the read-only view must be read as immutable, or this test proves nothing"
    );

    let server = serve(&db, None);
    let before = last_text(server.addr, &f.main);
    let (_, mut next_line) = events(server.addr);

    // A writer starts (creating -wal and -shm beside the file), commits and exits.
    write_elsewhere(&f.db, &f.main, "written while read as immutable");
    follow_until(
        &mut next_line,
        server.addr,
        &f.main,
        "written while read as immutable",
    );
    assert_ne!(before, last_text(server.addr, &f.main));
    // And again: the watcher keeps following after the store was opened again.
    write_elsewhere(&f.db, &f.main, "and once more");
    follow_until(&mut next_line, server.addr, &f.main, "and once more");
    assert!(
        get_json(server.addr, "/api/version")["version"]
            .as_u64()
            .unwrap()
            >= 2
    );
    // Everything else still answers.
    let list = get_json(server.addr, "/api/sessions");
    assert!(list["sessions"].as_array().is_some_and(|s| !s.is_empty()));
}
