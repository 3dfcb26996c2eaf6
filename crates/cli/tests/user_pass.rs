//! End to end, as a user types it: a numbered title names that session or none, the
//! README's `--help` is the real one, piped output is the stored bytes, empty flag values
//! and closed pipes.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use common::{Env, stderr, stdout};
use scribe_session::NewSession;

/// `t` and `t #2` exist, `t #3` does not: every command taking a <SESSION> says there is
/// no such session, and nothing is deleted, renamed, archived or forked. (The title
/// resolver answered `t #3` with the lineage's newest, `t #2`, so `delete "t #3" --yes`
/// deleted `t #2`.)
#[test]
fn a_numbered_title_that_names_no_session_is_no_session() {
    let env = Env::new();
    let (sessions, messages) = env.services();
    let first = sessions.create(NewSession::titled("t")).unwrap();
    let second = sessions.create(NewSession::titled("t #2")).unwrap();
    for id in [&first.id, &second.id] {
        messages
            .create(scribe_message::NewMessage::new(
                id,
                scribe_message::Role::User,
                vec![scribe_message::Part::text("hello")],
            ))
            .unwrap();
    }
    for cmd in [
        vec!["delete", "t #3", "--yes"],
        vec!["show", "t #3"],
        vec!["export", "t #3"],
        vec!["fork", "t #3"],
        vec!["rename", "t #3", "renamed"],
        vec!["archive", "t #3"],
    ] {
        let err = env.fails(&cmd);
        assert!(
            err.contains("no session matches \"t #3\""),
            "{cmd:?}: {err}"
        );
    }
    let left: Vec<_> = sessions
        .list(&scribe_session::SessionFilter::default())
        .unwrap()
        .into_iter()
        .map(|s| (s.id, s.title, s.archived_at.is_some()))
        .collect();
    assert_eq!(left.len(), 2, "{left:?}");
    assert!(
        left.iter().any(|(id, title, archived)| id == &second.id
            && title.as_deref() == Some("t #2")
            && !archived),
        "{left:?}"
    );
    // What does exist still resolves: the plain title is the newest, `#2` and `#1` name
    // their own member.
    assert!(env.ok(&["show", "t"]).contains(&second.id));
    assert!(env.ok(&["show", "t #2"]).contains(&second.id));
    assert!(env.ok(&["show", "t #1"]).contains(&first.id));
}

/// The lines of the README's console block that follow `$ scribe {command}`, up to the
/// block's end (blank lines included).
fn readme_block(command: &str) -> String {
    let readme = std::fs::read_to_string(
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../README.md"),
    )
    .unwrap();
    let marker = format!("\n$ scribe {command}\n");
    let start = readme
        .find(&marker)
        .unwrap_or_else(|| panic!("the README shows `$ scribe {command}`"))
        + marker.len();
    let end = readme[start..].find("```").unwrap() + start;
    readme[start..end].to_owned()
}

/// The README's `scribe --help` is what the binary prints (it showed a `--db <PATH>` and
/// an opening line the binary had long stopped printing).
#[test]
fn the_readme_help_is_the_real_help() {
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_scribe"))
        .arg("--help")
        .env_remove("SCRIBE_DB")
        .env_remove("COLUMNS")
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", stderr(&out));
    assert_eq!(stdout(&out), readme_block("--help"));
}
