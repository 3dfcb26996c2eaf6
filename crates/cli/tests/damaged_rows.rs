//! The built `scribe` binary over a database another program (or a hand) has written odd
//! rows into, with raw SQL on the real file: one damaged row must not make a whole
//! listing or report fail, and what fails says which row in one line.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use common::*;

/// Runs raw SQL on the file (CHECK constraints off: a program that is not Scribe).
fn damage(env: &Env, sql: &str) {
    let conn = rusqlite::Connection::open(&env.db).unwrap();
    conn.execute_batch("PRAGMA ignore_check_constraints = 1")
        .unwrap();
    conn.execute_batch(sql).unwrap();
}

/// A text part whose JSON has no `text` (valid JSON, a field missing) in a session's first
/// user message: `list` left the preview query's NULL in a non-null column and failed for
/// every session.
#[test]
fn list_survives_a_first_message_text_part_without_text() {
    let env = Env::new();
    let seeded = seed(&env);
    damage(
        &env,
        &format!(
            "UPDATE parts SET data = '{{\"type\":\"text\"}}' WHERE message_id = '{}'",
            seeded.build_first
        ),
    );
    let out = env.ok(&["list"]);
    assert!(out.contains("Fix the build"), "{out}");
    assert!(out.contains("搜索功能"), "{out}");
    let listed = env.json(&["list", "--json"]);
    assert_eq!(listed["sessions"].as_array().unwrap().len(), 2, "{listed}");
    // Showing the damaged conversation itself is a one-line error naming the part.
    let err = env.fails(&["show", &seeded.build]);
    assert!(err.contains("is corrupt"), "{err}");
    assert!(err.contains("missing field `text`"), "{err}");
}
