//! The built `scribe` binary over a database another program (or a hand) has written odd
//! rows into, with raw SQL on the real file: one damaged row must not make a whole
//! listing or report fail, and what fails says which row in one line.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use common::*;
use scribe_message::{NewMessage, Part, Role};

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

/// Sessions and messages whose `created_at` lies outside the calendar SQLite's `date()`
/// knows (years 0000-9999): the day grouping gave NULL for them and `stats --by day`
/// failed outright. They count on the first or last day, so the days still add up to the
/// totals. (Usage counts on the day of the message that carries it, what no message
/// carries on its session's creation day.)
#[test]
fn stats_by_day_survives_created_at_out_of_range() {
    let env = Env::new();
    let seeded = seed(&env);
    damage(
        &env,
        &format!(
            "UPDATE sessions SET created_at = {max} WHERE id = '{}';
             UPDATE messages SET created_at = {max} WHERE session_id = '{}';
             UPDATE sessions SET created_at = {min} WHERE id = '{}';",
            seeded.build,
            seeded.build,
            seeded.cjk,
            max = i64::MAX,
            min = i64::MIN,
        ),
    );
    let by_day = env.json(&["stats", "--by", "day", "--json"]);
    let rows = by_day["rows"].as_array().unwrap();
    let keys: Vec<&str> = rows.iter().map(|r| r["key"].as_str().unwrap()).collect();
    assert_eq!(keys.first(), Some(&"0000-01-01"), "{by_day}");
    assert_eq!(keys.last(), Some(&"9999-12-31"), "{by_day}");
    let by_model = env.json(&["stats", "--json"]);
    assert_eq!(by_day["totals"], by_model["totals"]);
    let sessions: i64 = rows.iter().map(|r| r["sessions"].as_i64().unwrap()).sum();
    assert_eq!(sessions, by_model["totals"]["sessions"].as_i64().unwrap());
    assert!(env.ok(&["stats", "--by", "day"]).contains("9999-12-31"));
    // Weeks and months of those days: the first week stays in year 0000 (its Monday
    // would be in year -1), 9999-12-31 was a Friday.
    for (by, first, last) in [
        ("week", "0000-01-01", "9999-12-27"),
        ("month", "0000-01", "9999-12"),
    ] {
        let json = env.json(&["stats", "--by", by, "--json"]);
        let rows = json["rows"].as_array().unwrap();
        let keys: Vec<&str> = rows.iter().map(|r| r["key"].as_str().unwrap()).collect();
        assert_eq!(keys.first(), Some(&first), "{json}");
        assert_eq!(keys.last(), Some(&last), "{json}");
        assert_eq!(json["totals"], by_model["totals"]);
    }
}

/// Token counts near `i64::MAX` and costs near `f64::MAX` in two sessions (another
/// program's rows, or an export imported as given): SQLite's integer `sum()` raised
/// "integer overflow" and every `stats` grouping failed, and the costs summed to `inf`
/// (`null` in JSON). The sums saturate instead, in `stats` and the web viewer's chart.
#[test]
fn stats_survive_token_counts_near_the_limit() {
    let env = Env::new();
    let seeded = seed(&env);
    damage(
        &env,
        &format!(
            "UPDATE sessions SET input_tokens = {max}, api_call_count = {max},
                 estimated_cost_usd = {cost:e} WHERE id IN ('{}', '{}')",
            seeded.build,
            seeded.cjk,
            max = i64::MAX,
            cost = f64::MAX,
        ),
    );
    for by in ["model", "source", "day", "week", "month"] {
        let json = env.json(&["stats", "--by", by, "--json"]);
        assert_eq!(json["totals"]["tokens"]["input"], i64::MAX, "{by}: {json}");
        assert_eq!(json["totals"]["api_calls"], i64::MAX, "{by}: {json}");
        assert_eq!(json["totals"]["cost_usd"], f64::MAX, "{by}: {json}");
    }
    let text = env.ok(&["stats"]);
    assert!(text.contains("total"), "{text}");
    let usage = Serving::start(&env.db).json("/api/usage");
    assert_eq!(usage["totals"]["cost_usd"], f64::MAX, "{usage}");
    assert_eq!(usage["days"][0]["cost_usd"], f64::MAX, "{usage}");
    assert_eq!(usage["top"][0]["cost_usd"], f64::MAX, "{usage}");
    assert!(text.contains("$1.80e308"), "{text}");
}

/// Values of a kind Scribe's readers cannot take (text where a time belongs, a REAL past
/// the largest integer in a token count), which SQLite keeps because its tables are not
/// STRICT and `integrity_check` does not look at: every read of those rows fails naming
/// only the column (a listing also the session), and says so. `db check` names each such
/// column with its rows and exits 1, saying how to mend them; once they are mended it is
/// clean again.
#[test]
fn db_check_names_the_rows_holding_values_of_the_wrong_kind() {
    let env = Env::new();
    let seeded = seed(&env);
    assert!(env.ok(&["db", "check"]).contains("column_types       ok"));
    damage(
        &env,
        &format!(
            "UPDATE sessions SET created_at = 'yesterday' WHERE id = '{}';
             UPDATE messages SET input_tokens = 1e300 WHERE session_id = '{}';",
            seeded.cjk, seeded.build,
        ),
    );
    let out = env.run(&["db", "check"]);
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    let text = String::from_utf8(out.stdout.clone()).unwrap();
    let line = text
        .lines()
        .find(|l| l.starts_with("column_types"))
        .unwrap_or_else(|| panic!("{text}"));
    assert!(
        line.contains(&format!(
            "sessions.created_at: 1 row holds what is not an integer ('{}' text)",
            seeded.cjk
        )),
        "{line}"
    );
    assert!(line.contains("messages.input_tokens: "), "{line}");
    assert!(line.contains("what is not an integer ('msg_"), "{line}");
    assert!(line.contains("' real"), "{line}");
    let err = stderr(&out);
    assert!(
        err.contains("column_types; set the values named above right"),
        "{err}"
    );
    // The sound parts of the check still pass.
    assert!(text.contains("integrity_check    ok"), "{text}");
    // A read of such a row fails in one line that says where to look; a listing names
    // the session.
    let err = env.fails(&["show", &seeded.cjk]);
    assert!(err.contains("name: created_at"), "{err}");
    assert!(
        err.contains("`scribe db check` names the rows that hold one"),
        "{err}"
    );
    // The list leaves that session out, naming it, and lists the rest (exit status 1).
    let out = env.run(&["list"]);
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    let err = stderr(&out);
    assert!(
        err.contains(&format!(
            "left out a session: session storage failed: session {}: sqlite error: ",
            seeded.cjk
        )),
        "{err}"
    );
    assert!(err.contains("name: created_at"), "{err}");
    assert!(
        err.contains(
            "scribe: 1 session could not be read and was left out of the list (see above)"
        ),
        "{err}"
    );
    let listed = stdout(&out);
    assert!(listed.contains("Fix the build"), "{listed}");
    assert!(!listed.contains("搜索功能"), "{listed}");
    let out = env.run(&["list", "--json"]);
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    let listed: serde_json::Value = serde_json::from_str(&stdout(&out)).unwrap();
    assert_eq!(listed["sessions"].as_array().unwrap().len(), 1, "{listed}");

    damage(
        &env,
        &format!(
            "UPDATE sessions SET created_at = 0 WHERE id = '{}';
             UPDATE messages SET input_tokens = 1 WHERE session_id = '{}';",
            seeded.cjk, seeded.build,
        ),
    );
    assert!(env.ok(&["db", "check"]).contains("column_types       ok"));
}

/// Values that break a CHECK constraint (a session `kind` Scribe does not know,
/// `model_config` that is not JSON), which a program that switched the checks off can
/// write: `integrity_check` names only the table, so `db check` names the rows and the
/// rules they break, and its advice is to set the values right, not to restore the file.
#[test]
fn db_check_names_the_rows_that_break_a_check_constraint() {
    let env = Env::new();
    let seeded = seed(&env);
    assert!(env.ok(&["db", "check"]).contains("constraints        ok"));
    damage(
        &env,
        &format!(
            "UPDATE sessions SET model_config = '{{not json' WHERE id = '{}';
             UPDATE sessions SET kind = 'chat' WHERE id = '{}';",
            seeded.build, seeded.cjk,
        ),
    );
    // The list leaves the sessions out and points at the check.
    let out = env.run(&["list"]);
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    assert!(
        stderr(&out).contains("`scribe db check` names the values to set right"),
        "{}",
        stderr(&out)
    );
    let out = env.run(&["db", "check"]);
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    let text = stdout(&out);
    assert!(
        text.contains("integrity_check    CHECK constraint failed in sessions"),
        "{text}"
    );
    let line = text
        .lines()
        .find(|l| l.starts_with("constraints"))
        .unwrap_or_else(|| panic!("{text}"));
    assert!(
        line.contains(&format!(
            "sessions: 1 row breaks CHECK (kind IN ('normal', 'title', 'task', 'fork', \
             'continuation')) ('{}')",
            seeded.cjk
        )),
        "{line}"
    );
    assert!(
        line.contains(&format!(
            "sessions: 1 row breaks CHECK (model_config IS NULL OR json_valid(model_config)) \
             ('{}')",
            seeded.build
        )),
        "{line}"
    );
    let err = stderr(&out);
    assert!(
        err.contains("integrity_check, constraints; set the values named above right"),
        "{err}"
    );
    // Set right as the check says, the store is sound again.
    damage(
        &env,
        &format!(
            "UPDATE sessions SET model_config = NULL WHERE id = '{}';
             UPDATE sessions SET kind = 'normal' WHERE id = '{}';",
            seeded.build, seeded.cjk,
        ),
    );
    let text = env.ok(&["db", "check"]);
    assert!(text.contains("constraints        ok"), "{text}");
    assert!(text.contains("integrity_check    ok"), "{text}");
}

/// A session whose `message_count` another program set to what its messages are not:
/// `list`, `show` and `delete` would report a wrong number. `db check` recounts, names the
/// session with both numbers, and says how to set it right; done so, it is clean again.
#[test]
fn db_check_names_a_session_whose_message_count_is_wrong() {
    let env = Env::new();
    let seeded = seed(&env);
    assert!(env.ok(&["db", "check"]).contains("message_counts     ok"));
    let held: i64 = rusqlite::Connection::open(&env.db)
        .unwrap()
        .query_row(
            "SELECT count(*) FROM messages WHERE session_id = ?1",
            [&seeded.build],
            |row| row.get(0),
        )
        .unwrap();
    assert!(held > 0);
    damage(
        &env,
        &format!(
            "UPDATE sessions SET message_count = message_count + 5 WHERE id = '{}'",
            seeded.build
        ),
    );
    let out = env.run(&["db", "check"]);
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    let text = stdout(&out);
    let line = text
        .lines()
        .find(|l| l.starts_with("message_counts"))
        .unwrap_or_else(|| panic!("{text}"));
    assert!(
        line.contains(&format!(
            "1 session's count differs from its stored messages ({}: message_count {}, \
             messages {held}); set with UPDATE sessions SET message_count",
            seeded.build,
            held + 5
        )),
        "{line}"
    );
    assert!(
        stderr(&out).contains("message_counts; set the values named above right"),
        "{}",
        stderr(&out)
    );
    // The statement the line gives sets it right.
    let fix = line.split("set with ").nth(1).unwrap();
    damage(&env, fix);
    let text = env.ok(&["db", "check"]);
    assert!(text.contains("message_counts     ok"), "{text}");
}

/// A session deleted by another program with foreign keys off (the `sqlite3` shell's
/// default) leaves its messages, parts and files behind, which every read passes by and
/// `integrity_check` does not see. `db check` names them, with what the delete would
/// have done; deleted as it says, with foreign keys on, the store is sound again.
#[test]
fn db_check_names_the_rows_a_delete_with_foreign_keys_off_left_behind() {
    let env = Env::new();
    let seeded = seed(&env);
    assert!(env.ok(&["db", "check"]).contains("foreign_keys       ok"));
    damage(
        &env,
        &format!(
            "PRAGMA foreign_keys = OFF; DELETE FROM sessions WHERE id = '{}'",
            seeded.build
        ),
    );
    let out = env.run(&["db", "check"]);
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    let text = stdout(&out);
    assert!(text.contains("integrity_check    ok"), "{text}");
    let line = text
        .lines()
        .find(|l| l.starts_with("foreign_keys"))
        .unwrap_or_else(|| panic!("{text}"));
    assert!(
        line.contains("messages.session_id: ")
            && line.contains(" rows name a row of sessions that is not there ('msg_")
            && line.contains("; its delete would have deleted them"),
        "{line}"
    );
    let err = stderr(&out);
    assert!(
        err.contains(
            "foreign_keys; set the values named above right, or delete their rows, with \
             sqlite3 (run `PRAGMA foreign_keys = ON` first)"
        ) && !err.contains("every read"),
        "{err}"
    );
    // A copy cannot carry them: refused before anything is written, pointing here.
    let target = env.db.with_file_name("copy.db");
    let out = env.run(&[
        "db",
        "copy",
        env.db.to_str().unwrap(),
        target.to_str().unwrap(),
    ]);
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    let err = stderr(&out);
    assert!(
        err.contains("cannot copy: the source holds ")
            && err.contains("`scribe db check` on it names them"),
        "{err}"
    );
    assert!(!target.exists());
    damage(
        &env,
        "PRAGMA foreign_keys = ON;
         DELETE FROM messages WHERE session_id NOT IN (SELECT id FROM sessions);
         DELETE FROM files WHERE session_id NOT IN (SELECT id FROM sessions);
         UPDATE sessions SET parent_session_id = NULL
         WHERE parent_session_id NOT IN (SELECT id FROM sessions);",
    );
    let text = env.ok(&["db", "check"]);
    assert!(text.contains("foreign_keys       ok"), "{text}");
    assert!(text.contains("parts_fts          ok"), "{text}");
}

/// `export --all` over a store with damaged rows (a session row, a message row and a part
/// another program wrote): each session that cannot be read is left out, named, with why;
/// the rest is written, and the file imports. Before, the first such row failed the whole
/// export, so no backup of the rest could be made. Exit status 1, since it is incomplete.
#[test]
fn export_all_leaves_out_the_sessions_it_cannot_read_and_writes_the_rest() {
    let env = Env::new();
    let seeded = seed(&env);
    let all = env.json(&["list", "--all", "--json"])["sessions"]
        .as_array()
        .unwrap()
        .len();
    damage(
        &env,
        &format!(
            "UPDATE sessions SET created_at = 'yesterday' WHERE id = '{}';
             UPDATE messages SET input_tokens = 1e300 WHERE session_id = '{}';
             UPDATE parts SET data = '{{\"type\":\"text\"}}' WHERE session_id = '{}';",
            seeded.cjk, seeded.build, seeded.archived,
        ),
    );
    let file = env.path("backup.json");
    let out = env.run(&["export", "--all", "-o", file.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    let err = stderr(&out);
    assert!(
        err.contains(&format!(
            "left out a session: session storage failed: session {}: ",
            seeded.cjk
        )),
        "{err}"
    );
    assert!(
        err.contains(&format!(
            "left out {}: session storage failed: sqlite error: ",
            seeded.build
        )),
        "{err}"
    );
    assert!(err.contains("name: input_tokens"), "{err}");
    assert!(
        err.contains(&format!("left out {}: ", seeded.archived)),
        "{err}"
    );
    assert!(err.contains("is corrupt"), "{err}");
    // Four sessions (`seed`), three left out.
    assert_eq!(all, 4);
    assert!(err.contains("exported 1 session to "), "{err}");
    assert!(
        err.contains(
            "3 sessions could not be read and were left out of the export (see above); \
             `scribe db check` names the values to set right"
        ),
        "{err}"
    );
    let written: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&file).unwrap()).unwrap();
    let ids: Vec<&str> = written["sessions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["session"]["id"].as_str().unwrap())
        .collect();
    assert_eq!(ids, [seeded.task.as_str()]);
    // What was written is a backup: it imports.
    let other = Env::new();
    let imported = other.ok(&["import", file.to_str().unwrap()]);
    assert!(
        imported.contains(&format!("{} imported, 0 skipped, 0 failed", all - 3)),
        "{imported}"
    );

    // To stdout as well; a session named on its own still fails, naming it.
    let out = env.run(&["export", "--all", "--format", "jsonl"]);
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    assert_eq!(stdout(&out).lines().count(), all - 3);
    let err = env.fails(&["export", &seeded.build]);
    assert!(
        err.contains(&format!("session {}: sqlite error: ", seeded.build)),
        "{err}"
    );

    // Two session rows that cannot be read are both named.
    damage(
        &env,
        &format!(
            "UPDATE sessions SET updated_at = 'later' WHERE id = '{}'",
            seeded.task
        ),
    );
    let out = env.run(&["export", "--all", "--format", "jsonl"]);
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    assert_eq!(stdout(&out), "");
    let err = stderr(&out);
    for id in [&seeded.cjk, &seeded.task] {
        assert!(
            err.contains(&format!(
                "left out a session: session storage failed: session {id}: "
            )),
            "{err}"
        );
    }
    assert!(
        err.contains("4 sessions could not be read and were left out of the export"),
        "{err}"
    );
}

/// A search leaves out the hits in rows holding a value no reader takes, names each on
/// stderr (the row: the message, or the session, by the column; the hit's message too
/// when the row is another), shows the others and exits 1: one damaged row does not fail
/// every search that meets it. On the word index and on the substring walk (which orders
/// messages by a time that is not a number there).
#[test]
fn a_search_leaves_out_the_hits_it_cannot_read_and_names_them() {
    let env = Env::new();
    let seeded = seed(&env);
    let (_, messages) = env.services();
    let later = messages
        .create(NewMessage::new(
            &seeded.cjk,
            Role::Assistant,
            vec![Part::text("搜索已经完成")],
        ))
        .unwrap();
    // `parser`: both messages of the build session and the task's.
    let before = env.json(&["search", "--json", "parser"]);
    assert_eq!(before["hits"].as_array().unwrap().len(), 3, "{before}");
    damage(
        &env,
        &format!(
            "UPDATE messages SET created_at = 'noon' WHERE session_id = '{}'",
            seeded.build
        ),
    );
    let out = env.run(&["search", "parser"]);
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    assert!(
        stdout(&out).contains("Run the parser tests"),
        "{}",
        stdout(&out)
    );
    let err = stderr(&out);
    let lines: Vec<&str> = err.lines().collect();
    assert_eq!(lines.len(), 3, "{err}");
    for line in &lines[..2] {
        assert!(line.starts_with("left out a search hit: "), "{err}");
        assert!(line.contains(": message msg_"), "{err}");
        assert!(
            line.contains("sqlite error: Invalid column type Text"),
            "{err}"
        );
        assert!(line.contains("name: created_at"), "{err}");
        assert!(
            line.contains("`scribe db check` names the rows that hold one"),
            "{err}"
        );
    }
    assert_ne!(lines[0], lines[1]);
    assert_eq!(
        lines[2],
        "scribe: 2 search hits could not be read and were left out of the search (see \
         above); `scribe db check` names the values to set right"
    );
    // JSON holds the hits read; what was left out is on stderr, as above.
    let out = env.run(&["search", "--json", "parser"]);
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    let hits: serde_json::Value = serde_json::from_str(&stdout(&out)).unwrap();
    let ids: Vec<&str> = hits["hits"]
        .as_array()
        .unwrap()
        .iter()
        .map(|h| h["session_id"].as_str().unwrap())
        .collect();
    assert_eq!(ids, [seeded.task.as_str()]);

    // The substring walk goes newest first by `created_at`: a text there sorts before
    // every number, and the walk passes it by to the older hit.
    let found = env.json(&["search", "--json", "搜"]);
    assert_eq!(found["hits"].as_array().unwrap().len(), 2, "{found}");
    let first: String = rusqlite::Connection::open(&env.db)
        .unwrap()
        .query_row(
            "SELECT id FROM messages WHERE session_id = ?1 AND id <> ?2",
            [&seeded.cjk, &later.id],
            |r| r.get(0),
        )
        .unwrap();
    damage(
        &env,
        &format!("UPDATE messages SET created_at = 'noon' WHERE id = '{first}'"),
    );
    // Nothing else matches: none readable, which the answer says.
    let out = env.run(&["search", "中文分词"]);
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    assert_eq!(stdout(&out), "no readable matches for \"中文分词\"\n");
    let out = env.run(&["search", "搜"]);
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    assert!(stdout(&out).contains("搜索已经完成"), "{}", stdout(&out));
    assert!(!stdout(&out).contains("中文分词"), "{}", stdout(&out));
    let err = stderr(&out);
    assert!(
        err.starts_with(&format!(
            "left out a search hit: database error: message {first}: "
        )),
        "{err}"
    );
    assert!(
        err.contains("1 search hit could not be read and was left out"),
        "{err}"
    );

    // A session's row: its hits are left out, each named by its message and the session.
    damage(
        &env,
        &format!(
            "UPDATE messages SET created_at = 1 WHERE session_id IN ('{0}', '{1}');
             UPDATE sessions SET created_at = 'noon' WHERE id = '{0}';",
            seeded.build, seeded.cjk
        ),
    );
    let out = env.run(&["search", "parser"]);
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    let err = stderr(&out);
    assert_eq!(
        err.matches(&format!(
            ": database error: session {}: sqlite error: ",
            seeded.build
        ))
        .count(),
        2,
        "{err}"
    );
    assert_eq!(err.matches("left out msg_").count(), 2, "{err}");
    assert!(
        stdout(&out).contains("Run the parser tests"),
        "{}",
        stdout(&out)
    );

    // A role Scribe does not know, in the message after the only hit: the hit is left out
    // (it would show that message as its context), named by its own message and the
    // corrupt one.
    damage(
        &env,
        &format!(
            "UPDATE sessions SET created_at = 1 WHERE id = '{0}';
             UPDATE messages SET role = 'oracle' WHERE session_id = '{0}' AND id <> '{1}';",
            seeded.build, seeded.build_first
        ),
    );
    let out = env.run(&["search", "mismatched"]);
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    assert_eq!(stdout(&out), "no readable matches for \"mismatched\"\n");
    let err = stderr(&out);
    assert!(
        err.starts_with(&format!("left out {}: message msg_", seeded.build_first)),
        "{err}"
    );
    assert!(
        err.contains(" is corrupt: role is not a known role"),
        "{err}"
    );
    // A search that meets no damaged row is as before.
    assert!(env.ok(&["search", "milk"]).contains("remember the milk"));
}

/// A command naming one session whose own row holds a value of the wrong kind (`show`,
/// `delete`, by id, id prefix or title) fails naming that session, in one line, and
/// deletes nothing: the user learns which session `scribe db check` will point at.
#[test]
fn a_session_named_by_id_prefix_or_title_is_named_when_its_row_cannot_be_read() {
    let env = Env::new();
    let seeded = seed(&env);
    damage(
        &env,
        &format!(
            "UPDATE sessions SET created_at = 'noon' WHERE id = '{}'",
            seeded.archived
        ),
    );
    let id = seeded.archived.as_str();
    let prefix = &id[..id.len() - 4];
    for (args, names) in [
        (vec!["show", id], format!("session {id}: ")),
        (vec!["delete", "--yes", id], format!("session {id}: ")),
        (
            vec!["show", prefix],
            format!("a session whose id begins with {prefix}: "),
        ),
        (
            vec!["delete", "--yes", "Old notes"],
            "a session titled \"Old notes\" or \"Old notes\" #N: ".to_owned(),
        ),
        (
            vec!["show", "Old notes #1"],
            "the session titled \"Old notes\": ".to_owned(),
        ),
    ] {
        let err = env.fails(&args);
        assert!(err.contains(&names), "{args:?}: {err}");
        assert!(err.contains("name: created_at"), "{args:?}: {err}");
        assert_eq!(err.trim_end().lines().count(), 1, "{args:?}: {err}");
    }
    // Nothing was deleted; the other sessions read as before.
    let rows = rusqlite::Connection::open(&env.db)
        .unwrap()
        .query_row("SELECT count(*) FROM sessions", [], |r| r.get::<_, i64>(0))
        .unwrap();
    assert_eq!(rows, 4);
    assert!(env.ok(&["show", &seeded.build]).contains("Fix the build"));
}
