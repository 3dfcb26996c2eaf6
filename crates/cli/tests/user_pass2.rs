//! End to end, as a user types it (a second pass): spans reaching before 1970, `export -o`
//! over an existing file, `--db` naming a directory, and `--json` on a terminal.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use common::{Env, stderr, stdout};

/// A span reaching back before 1970-01-01 (the earliest date `--since` takes) is a usage
/// error naming the flag, and nothing is pruned: `prune --older-than 3000000d --yes`
/// reported "ended before -6187-03-16 05:18", and `stats --since 3000000d --json` a
/// `since` of -257403638489572.
#[test]
fn a_span_reaching_before_1970_is_a_usage_error() {
    let env = Env::new();
    common::seed(&env);
    for (args, flag) in [
        (
            &["prune", "--older-than", "3000000d", "--yes"][..],
            "--older-than",
        ),
        (
            &["prune", "--older-than", "30000", "--dry-run"],
            "--older-than",
        ),
        (&["stats", "--since", "3000000d", "--json"], "--since"),
        (&["search", "parser", "--since", "30000d"], "--since"),
        (
            &["import", "--from", "codex", "--since", "999999h"],
            "--since",
        ),
        (&["stats", "--since", "1969-12-31"], "--since"),
    ] {
        let out = env.run(args);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {}", stderr(&out));
        let err = stderr(&out);
        assert!(err.contains(flag), "{args:?}: {err}");
        assert!(err.contains("before 1970-01-01"), "{args:?}: {err}");
        assert!(stdout(&out).is_empty(), "{args:?}");
    }
    assert_eq!(common::snapshot(&env.db).len(), 4, "nothing was pruned");
    // A span that stays after 1970 still works, and reads as a date of this era.
    let text = env.ok(&["prune", "--older-than", "20000d", "--dry-run"]);
    assert!(text.contains("ended before 19"), "{text}");
    let stats = env.json(&["stats", "--since", "20000d", "--json"]);
    assert!(stats["since"].as_i64().unwrap() > 0, "{stats}");
}
