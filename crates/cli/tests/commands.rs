//! End to end: every `scribe` command against a seeded temporary database — success paths,
//! `--json` shapes, exit codes and the one-line failures.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use common::{Env, seed, snapshot, stderr, stdout, tool_done};
use scribe_message::{NewMessage, Part, Role};
use scribe_session::NewSession;

#[test]
fn list_shows_roots_newest_first_with_previews() {
    let env = Env::new();
    let s = seed(&env);
    let text = env.ok(&["list"]);
    assert!(text.contains("Fix the build"), "{text}");
    assert!(text.contains("搜索功能"), "{text}");
    assert!(text.contains("The build fails with error E0308"), "{text}");
    assert!(!text.contains("Old notes"), "archived hidden: {text}");
    assert!(!text.contains("Check the tests"), "children hidden: {text}");
    assert!(text.contains("$0.50"), "{text}");
    // Newest first.
    assert!(text.find("搜索功能").unwrap() < text.find("Fix the build").unwrap());
    assert!(!text.contains('\u{1b}'), "no colour when not a terminal");

    let all = env.ok(&["list", "--all"]);
    assert!(
        all.contains("Old notes") && all.contains("Check the tests"),
        "{all}"
    );

    let json = env.json(&["list", "--json"]);
    let sessions = json["sessions"].as_array().unwrap();
    assert_eq!(sessions.len(), 2);
    assert_eq!(json["more"], false);
    let build = sessions
        .iter()
        .find(|x| x["id"] == s.build.as_str())
        .unwrap();
    assert_eq!(build["title"], "Fix the build");
    assert_eq!(build["source"], "cli");
    assert_eq!(build["kind"], "normal");
    assert_eq!(build["message_count"], 2);
    assert_eq!(build["tool_call_count"], 1);
    assert_eq!(build["tokens"]["input"], 1200);
    assert_eq!(build["tokens"]["total"], 2450);
    assert_eq!(build["cost_usd"], 0.0123);
    assert_eq!(
        build["preview"],
        "The build fails with error E0308: mismatched types in parser.rs"
    );
    for key in [
        "created_at",
        "updated_at",
        "ended_at",
        "archived_at",
        "model",
        "parent_session_id",
    ] {
        assert!(build.get(key).is_some(), "{key} missing");
    }
}

#[test]
fn list_limit_source_and_footer() {
    let env = Env::new();
    seed(&env);
    let json = env.json(&["list", "--limit", "1", "--json"]);
    assert_eq!(json["sessions"].as_array().unwrap().len(), 1);
    assert_eq!(json["more"], true);
    let text = env.ok(&["list", "-n", "1"]);
    assert!(
        text.contains("… 1 more session; show them with --limit 2"),
        "{text}"
    );

    let json = env.json(&["list", "--source", "tui", "--json"]);
    let sessions = json["sessions"].as_array().unwrap();
    assert_eq!(sessions.len(), 1);
    assert_eq!(sessions[0]["title"], "搜索功能");

    let empty = Env::new();
    empty.ok(&["db", "migrate"]);
    assert!(empty.ok(&["list"]).contains("no sessions"));
    let json = empty.json(&["list", "--json"]);
    assert_eq!(json, serde_json::json!({"sessions": [], "more": false}));
}

#[test]
fn show_renders_the_conversation() {
    let env = Env::new();
    let s = seed(&env);
    let text = env.ok(&["show", &s.build]);
    assert!(text.starts_with("Fix the build\n"), "{text}");
    // The counts read as English: one tool call, not "1 tool calls".
    assert!(text.contains("2 messages · 1 tool call · "), "{text}");
    assert!(text.contains("user"), "{text}");
    assert!(text.contains("assistant"), "{text}");
    assert!(
        text.contains("thinking: The parser returns a String where a &str is expected."),
        "{text}"
    );
    assert!(
        text.contains("⚙ read({\"path\":\"src/parser.rs\"}) [completed]"),
        "{text}"
    );
    assert!(text.contains("fn parse(input: &str) -> String {"), "{text}");
    assert!(text.contains("the build passes now"), "{text}");
    // Its sub-agent session, named under the header with its kind, model and cost; the
    // sub-agent's own page names none.
    assert!(
        text.contains(&format!(
            "1 sub-session (sub-agents, forks, titles):\n  {} · Check the tests · task · anthropic/claude-sonnet-4 · 1 message · ",
            s.task
        )),
        "{text}"
    );
    assert!(!env.ok(&["show", &s.task]).contains("sub-session"));

    // By title and by unique prefix too.
    assert_eq!(env.ok(&["show", "Fix the build"]), text);
    let prefix = &s.cjk[..s.cjk.len() - 4];
    assert!(
        env.ok(&["show", prefix])
            .contains("搜索功能需要支持中文分词")
    );

    let json = env.json(&["show", &s.build, "--json"]);
    assert_eq!(json["session"]["id"], s.build.as_str());
    assert_eq!(json["messages"].as_array().unwrap().len(), 2);
    assert_eq!(json["messages"][0]["id"], s.build_first.as_str());
}

/// `show` without a session: the conversation `list --sort active` lists first, which an
/// archived session's or a sub-agent's activity does not displace; none on an empty store.
#[test]
fn show_without_a_session_shows_the_most_recently_active_conversation() {
    let env = Env::new();
    env.ok(&["db", "migrate"]);
    let err = env.fails(&["show"]);
    assert!(
        err.contains("there is no conversation to show yet"),
        "{err}"
    );

    let s = seed(&env);
    let first = env.json(&["list", "--sort", "active", "-n", "1", "--json"]);
    let first = first["sessions"][0]["id"].as_str().unwrap().to_owned();
    assert_eq!(env.ok(&["show"]), env.ok(&["show", &first]));

    let (_, messages) = env.services();
    let say = |session: &str, text: &str| {
        std::thread::sleep(std::time::Duration::from_millis(5));
        messages
            .create(NewMessage::new(session, Role::User, vec![Part::text(text)]))
            .unwrap();
    };
    say(&s.cjk, "最新的消息");
    assert!(env.ok(&["show"]).starts_with("搜索功能"));
    say(&s.build, "one more thing");
    let shown = env.ok(&["show"]);
    assert!(shown.starts_with("Fix the build\n"), "{shown}");
    say(&s.archived, "a note to an archived session");
    say(&s.task, "a word to the sub-agent");
    assert_eq!(env.ok(&["show"]), env.ok(&["show", &s.build]));
}

/// `show --last N`: the newest N messages after a line saying earlier ones were left out
/// (none when N covers them all), read a page at a time from the end; an untitled
/// session's header names it by how it began.
#[test]
fn show_last_shows_the_end_of_a_long_conversation() {
    let env = Env::new();
    let (sessions, messages) = env.services();
    let long = sessions.create(NewSession::default()).unwrap();
    for i in 0..1_205 {
        let role = if i % 2 == 0 {
            Role::User
        } else {
            Role::Assistant
        };
        messages
            .create(NewMessage::new(
                &long.id,
                role,
                vec![Part::text(format!("message number {i:04}"))],
            ))
            .unwrap();
    }
    let text = env.ok(&["show", &long.id, "--last", "3"]);
    assert!(text.starts_with("“message number 0000”\n"), "{text}");
    assert!(text.contains("… 1,202 earlier messages left out"), "{text}");
    let shown: Vec<&str> = text
        .lines()
        .filter_map(|l| l.trim().strip_prefix("message number "))
        .collect();
    assert_eq!(shown, ["1202", "1203", "1204"], "{text}");
    // More than a page (1,000 messages) back, in order.
    let text = env.ok(&["show", &long.id, "--last", "1100"]);
    let shown: Vec<&str> = text
        .lines()
        .filter_map(|l| l.trim().strip_prefix("message number "))
        .collect();
    assert_eq!(shown.len(), 1_100);
    assert_eq!((shown[0], shown[1_099]), ("0105", "1204"));
    assert!(shown.windows(2).all(|w| w[0] < w[1]));
    // All of it: nothing left out, the same as without --last.
    let all = env.ok(&["show", &long.id, "--last", "5000"]);
    assert!(!all.contains("left out"));
    assert_eq!(all, env.ok(&["show", &long.id]));
    assert_eq!(
        env.run(&["show", &long.id, "--last", "0"]).status.code(),
        Some(2)
    );
    assert_eq!(
        env.run(&["show", &long.id, "--last", "2", "--json"])
            .status
            .code(),
        Some(2)
    );
}

#[test]
fn unknown_and_ambiguous_sessions_fail_with_one_line() {
    let env = Env::new();
    seed(&env);
    let err = env.fails(&["show", "no-such-thing"]);
    assert!(
        err.contains("no session matches \"no-such-thing\""),
        "{err}"
    );
    // Every session id starts with `ses_`.
    let err = env.fails(&["show", "ses_"]);
    assert!(err.contains("\"ses_\" matches 3 sessions"), "{err}");
    assert!(err.contains("Fix the build"), "{err}");
    for cmd in [
        vec!["rename", "nope", "x"],
        vec!["fork", "nope"],
        vec!["archive", "nope"],
        vec!["delete", "nope", "--yes"],
        vec!["export", "nope"],
    ] {
        let err = env.fails(&cmd);
        assert!(err.contains("no session matches"), "{cmd:?}: {err}");
    }
}

/// Claude Code and Codex title few conversations: a hit of an untitled session names it
/// by how it began, quoted (so it is not read as a title), in the table and in JSON.
#[test]
fn search_names_an_untitled_session_by_its_first_message() {
    let env = Env::new();
    let (sessions, messages) = env.services();
    let untitled = sessions.create(NewSession::default()).unwrap();
    for (role, text) in [
        (Role::User, "Why does the\nwidget flicker on resize?"),
        (Role::Assistant, "The widget redraws twice."),
    ] {
        messages
            .create(NewMessage::new(&untitled.id, role, vec![Part::text(text)]))
            .unwrap();
    }
    let titled = sessions.create(NewSession::titled("Widgets")).unwrap();
    messages
        .create(NewMessage::new(
            &titled.id,
            Role::User,
            vec![Part::text("widget colours")],
        ))
        .unwrap();
    let text = env.ok(&["search", "redraws"]);
    assert!(
        text.starts_with("“Why does the widget flicker on resize?” · assistant"),
        "{text}"
    );
    let json = env.json(&["search", "widget", "--json"]);
    let hits = json["hits"].as_array().unwrap();
    assert_eq!(hits.len(), 3, "{json}");
    for hit in hits {
        if hit["session_id"] == untitled.id.as_str() {
            assert!(hit["title"].is_null());
            assert_eq!(hit["preview"], "Why does the widget flicker on resize?");
        } else {
            assert_eq!(hit["title"], "Widgets");
            assert!(hit["preview"].is_null());
        }
    }
}

#[test]
fn search_finds_words_cjk_and_filters() {
    let env = Env::new();
    let s = seed(&env);
    let text = env.ok(&["search", "mismatched"]);
    assert!(text.contains("Fix the build"), "{text}");
    assert!(text.contains("user"), "{text}");
    assert!(text.contains(&s.build), "{text}");
    assert!(text.contains("mismatched"), "{text}");

    let json = env.json(&["search", "中文", "--json"]);
    let hits = json["hits"].as_array().unwrap();
    assert_eq!(hits.len(), 1, "{json}");
    let hit = &hits[0];
    assert_eq!(hit["session_id"], s.cjk.as_str());
    assert_eq!(hit["title"], "搜索功能");
    assert_eq!(hit["source"], "tui");
    assert_eq!(hit["role"], "user");
    let snippet = hit["snippet"].as_str().unwrap();
    let [a, b] = [0, 1].map(|i| hit["highlights"][0][i].as_u64().unwrap() as usize);
    let matched: String = snippet.chars().skip(a).take(b - a).collect();
    assert!(matched.contains("中文"), "{snippet} {a} {b}");
    for key in [
        "message_id",
        "part_id",
        "created_at",
        "rank",
        "model",
        "before",
        "after",
    ] {
        assert!(hit.get(key).is_some(), "{key} missing");
    }

    let none = env.json(&["search", "parser", "--source", "tui", "--json"]);
    assert_eq!(none["hits"].as_array().unwrap().len(), 0);
    let excluded = env.json(&["search", "parser", "--exclude-source", "cli", "--json"]);
    assert_eq!(excluded["hits"].as_array().unwrap().len(), 0);
    let assistant = env.json(&["search", "parse", "--role", "assistant", "--json"]);
    assert!(
        assistant["hits"]
            .as_array()
            .unwrap()
            .iter()
            .all(|h| h["role"] == "assistant")
    );
    let in_session = env.json(&["search", "parser", "--session", "Fix the build", "--json"]);
    assert!(!in_session["hits"].as_array().unwrap().is_empty());
    let future = env.json(&["search", "parser", "--since", "2999-01-01", "--json"]);
    assert_eq!(future["hits"].as_array().unwrap().len(), 0);
    let recent = env.json(&[
        "search", "parser", "--since", "1h", "--limit", "1", "--json",
    ]);
    assert_eq!(recent["hits"].as_array().unwrap().len(), 1);
    // Nothing searchable is no hits, not an error.
    assert!(env.ok(&["search", "\"(*"]).contains("no matches"));
    // A long query that finds nothing (pasted lines) is echoed on one short line.
    let pasted = "zzzunfound\nline ".repeat(100);
    let said = env.ok(&["search", &pasted]);
    assert!(
        said.starts_with("no matches for \"zzzunfound line"),
        "{said}"
    );
    assert_eq!(said.lines().count(), 1, "{said}");
    assert!(said.chars().count() < 120, "{said}");
    // A pasted file holds more terms than a search takes: refused on one line, never
    // searched in part.
    let file = "zzzunfound\nline ".repeat(4_000);
    assert_eq!(
        env.fails(&["search", &file]),
        "scribe: invalid input: a search holds at most 200 words, phrases or symbols; \
         this one has 8000\n"
    );
    // Bad filters are usage errors.
    assert_eq!(
        env.run(&["search", "x", "--since", "yesterday"])
            .status
            .code(),
        Some(2)
    );
    assert_eq!(
        env.run(&["search", "x", "--role", "robot"]).status.code(),
        Some(2)
    );
}

#[test]
fn stats_by_model_source_day_and_directory() {
    let env = Env::new();
    seed(&env);
    let json = env.json(&["stats", "--json"]);
    assert_eq!(json["by"], "model");
    let rows = json["rows"].as_array().unwrap();
    let gpt = rows.iter().find(|r| r["key"] == "openai/gpt-4o").unwrap();
    assert_eq!(gpt["tokens"]["input"], 500);
    assert_eq!(gpt["cost_usd"], 0.5);
    assert_eq!(gpt["api_calls"], 1);
    let totals = &json["totals"];
    assert_eq!(totals["tokens"]["input"], 1700);
    assert_eq!(totals["tokens"]["output"], 400);
    assert_eq!(totals["tokens"]["cache_read"], 800);
    assert_eq!(totals["tokens"]["cache_write"], 100);
    assert_eq!(totals["tokens"]["reasoning"], 50);
    assert!((totals["cost_usd"].as_f64().unwrap() - 0.5123).abs() < 1e-9);

    let by_source = env.json(&["stats", "--by", "source", "--json"]);
    assert!(
        by_source["rows"]
            .as_array()
            .unwrap()
            .iter()
            .any(|r| r["key"] == "tui")
    );
    let by_day = env.json(&["stats", "--by", "day", "--json"]);
    assert_eq!(by_day["rows"].as_array().unwrap().len(), 1);
    // The week and month of that day, each one row with the same totals.
    let day = by_day["rows"][0]["key"].as_str().unwrap().to_owned();
    for (by, key) in [
        ("week", scribe_db::calendar::week_start(&day).unwrap()),
        ("month", day[..7].to_owned()),
    ] {
        let json = env.json(&["stats", "--by", by, "--json"]);
        assert_eq!(json["by"], by);
        assert_eq!(json["rows"].as_array().unwrap().len(), 1, "{json}");
        assert_eq!(json["rows"][0]["key"], key.as_str());
        assert_eq!(json["totals"], by_day["totals"]);
        let text = env.ok(&["stats", "--by", by]);
        assert!(
            text.starts_with(&by.to_uppercase()) && text.contains(&key),
            "{text}"
        );
    }
    // By usage block: all of it was just used, so one block, from the hour of the first
    // use, still open, which the table says with the time it has left.
    let by_block = env.json(&["stats", "--by", "block", "--json"]);
    assert_eq!(by_block["by"], "block");
    assert_eq!(by_block["rows"].as_array().unwrap().len(), 1, "{by_block}");
    let start = by_block["rows"][0]["key"].as_str().unwrap().to_owned();
    assert!(
        start.starts_with(&format!("{day}T")) && start.ends_with(":00Z"),
        "{start}"
    );
    assert_eq!(by_block["totals"], by_day["totals"]);
    let text = env.ok(&["stats", "--by", "block"]);
    let shown = format!("{day} {}–", &start[11..16]);
    assert!(
        text.starts_with("BLOCK") && text.contains(&shown) && text.contains("m left)"),
        "{text}"
    );
    // By where the agent worked: "Fix the build" and its task in /src/app, the rest in
    // none, shown as (none).
    let by_directory = env.json(&["stats", "--by", "directory", "--json"]);
    assert_eq!(by_directory["by"], "directory");
    let keys: Vec<&str> = by_directory["rows"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["key"].as_str().unwrap())
        .collect();
    assert_eq!(keys.len(), 2, "{by_directory}");
    assert!(keys.contains(&"/src/app") && keys.contains(&""), "{keys:?}");
    assert_eq!(by_directory["totals"], json["totals"]);
    let text = env.ok(&["stats", "--by", "directory"]);
    assert!(
        text.starts_with("DIRECTORY") && text.contains("/src/app") && text.contains("(none)"),
        "{text}"
    );

    // Only some sessions: a directory's, a source's, a model's usage, in any grouping;
    // their totals are the row of that key.
    let row_of = |stats: &serde_json::Value, key: &str| -> serde_json::Value {
        let row = stats["rows"]
            .as_array()
            .unwrap()
            .iter()
            .find(|r| r["key"] == key)
            .unwrap()
            .clone();
        let mut totals = row;
        totals.as_object_mut().unwrap().remove("key");
        totals
    };
    for (flag, value, by, key) in [
        ("--dir", "/src/app", &by_directory, "/src/app"),
        ("--source", "tui", &by_source, "tui"),
        ("--model", "openai/gpt-4o", &json, "openai/gpt-4o"),
    ] {
        let only = env.json(&["stats", "--by", "day", flag, value, "--json"]);
        assert_eq!(only["totals"], row_of(by, key), "{flag} {value}");
        assert_eq!(only["rows"].as_array().unwrap().len(), 1, "{only}");
    }
    let both = env.json(&[
        "stats",
        "--dir",
        "/src/app",
        "--model",
        "openai/gpt-4o",
        "--json",
    ]);
    assert_eq!(both["totals"]["sessions"], 0, "{both}");
    assert!(
        env.ok(&["stats", "--source", "nope"])
            .contains("no usage matches")
    );

    // Each row split by model (rows of models: by day): the split adds up to its row.
    for by in ["day", "source", "directory", "model"] {
        let split = env.json(&["stats", "--by", by, "--breakdown", "--json"]);
        let plain = env.json(&["stats", "--by", by, "--json"]);
        for (row, same) in split["rows"]
            .as_array()
            .unwrap()
            .iter()
            .zip(plain["rows"].as_array().unwrap())
        {
            assert_eq!(row["key"], same["key"]);
            let parts = row["breakdown"].as_array().unwrap();
            assert!(!parts.is_empty(), "{row}");
            let sum = |f: &dyn Fn(&serde_json::Value) -> i64| parts.iter().map(f).sum::<i64>();
            assert_eq!(
                sum(&|p| p["tokens"]["total"].as_i64().unwrap()),
                row["tokens"]["total"].as_i64().unwrap(),
                "{by}: {row}"
            );
            assert_eq!(
                sum(&|p| p["api_calls"].as_i64().unwrap()),
                row["api_calls"].as_i64().unwrap()
            );
            if by == "model" {
                assert_eq!(parts[0]["key"].as_str().unwrap().len(), 10, "a day: {row}");
            }
        }
        assert_eq!(split["totals"], plain["totals"]);
        assert!(plain["rows"][0].get("breakdown").is_none(), "{plain}");
    }
    let text = env.ok(&["stats", "--by", "source", "--breakdown"]);
    assert!(text.contains("  └ openai/gpt-4o"), "{text}");

    let none = env.json(&["stats", "--since", "2999-01-01", "--json"]);
    assert_eq!(none["totals"]["sessions"], 0);

    let text = env.ok(&["stats"]);
    assert!(
        text.contains("openai/gpt-4o") && text.contains("total"),
        "{text}"
    );
    assert!(text.contains("1,700"), "{text}");
    assert!(text.contains("$0.51"), "{text}");
    assert_eq!(env.run(&["stats", "--by", "planet"]).status.code(), Some(2));
}

#[test]
fn export_import_round_trip_is_lossless() {
    let env = Env::new();
    seed(&env);
    let file = env.path("all.json");
    env.ok(&["export", "--all", "-o", file.to_str().unwrap()]);
    let doc: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&file).unwrap()).unwrap();
    assert_eq!(doc["format"], "scribe-export");
    assert_eq!(doc["version"], 1);
    assert_eq!(doc["sessions"].as_array().unwrap().len(), 4);

    let other = Env::new();
    let text = other.ok(&["import", file.to_str().unwrap()]);
    assert!(text.contains("4 imported, 0 skipped, 0 failed"), "{text}");
    assert_eq!(snapshot(&env.db), snapshot(&other.db));
    // The import built both search indexes: words and CJK are found, and `db check`
    // finds the indexes and the queue in agreement with the rows.
    assert!(
        other
            .ok(&["search", "mismatched"])
            .contains("Fix the build")
    );
    let cjk = other.json(&["search", "中文", "--json"]);
    assert_eq!(cjk["hits"].as_array().unwrap().len(), 1, "{cjk}");
    let check = other.ok(&["db", "check"]);
    assert!(check.contains("parts_fts          ok"), "{check}");
    assert!(check.contains("parts_fts_trigram  ok"), "{check}");

    // A second import skips every session and changes nothing.
    let again = other.ok(&["import", file.to_str().unwrap()]);
    assert!(again.contains("0 imported, 4 skipped"), "{again}");
    assert!(again.contains("already in this database"), "{again}");
    assert_eq!(snapshot(&env.db), snapshot(&other.db));
}

/// Every layout of an export file imports the same store, its sessions parsed one at a
/// time as they are stored: the document (its keys in any order), a bare array of session
/// exports, JSON Lines, and one session's export alone.
#[test]
fn every_export_layout_imports_the_same_store() {
    let env = Env::new();
    let s = seed(&env);
    let document = env.ok(&["export", "--all"]);
    let value: serde_json::Value = serde_json::from_str(&document).unwrap();
    let sessions = value["sessions"].to_string();
    let layouts = [
        ("document.json", document.clone()),
        (
            "keys-reordered.json",
            format!(r#"{{"sessions": {sessions}, "version": 1, "format": "scribe-export"}}"#),
        ),
        ("array.json", sessions.clone()),
        (
            "lines.jsonl",
            env.ok(&["export", "--all", "--format", "jsonl"]),
        ),
    ];
    let mut stores = Vec::new();
    for (name, text) in layouts {
        let file = env.path(name);
        std::fs::write(&file, text).unwrap();
        let other = Env::new();
        let said = other.ok(&["import", file.to_str().unwrap()]);
        assert!(
            said.contains("4 imported, 0 skipped, 0 failed"),
            "{name}: {said}"
        );
        stores.push((name, snapshot(&other.db)));
    }
    for (name, store) in &stores[1..] {
        assert_eq!(store, &stores[0].1, "{name}");
    }
    let one = value["sessions"]
        .as_array()
        .unwrap()
        .iter()
        .find(|e| e["session"]["id"] == s.cjk.as_str())
        .unwrap()
        .to_string();
    let file = env.path("one.json");
    std::fs::write(&file, one).unwrap();
    let other = Env::new();
    let said = other.ok(&["import", file.to_str().unwrap()]);
    assert!(said.contains("1 imported, 0 skipped, 0 failed"), "{said}");
    assert!(
        said.contains(&format!("imported {} \"搜索功能\"", s.cjk)),
        "{said}"
    );
}

/// An export file that lists a child before its parent (two exports concatenated, one
/// edited by hand) keeps the link: the parent is stored first. (Before, the child went in
/// first and its link was dropped as "not in this database".)
#[test]
fn an_export_listing_a_child_first_keeps_its_parent_link() {
    let env = Env::new();
    let s = seed(&env);
    let jsonl = env.ok(&["export", &s.task, &s.build, "--format", "jsonl"]);
    let mut lines: Vec<&str> = jsonl.lines().collect();
    let task_first = |line: &str| line.contains(&format!(r#""id":"{}""#, s.task));
    if !task_first(lines[0]) {
        lines.reverse();
    }
    assert!(task_first(lines[0]), "{jsonl}");
    let file = env.path("child-first.jsonl");
    std::fs::write(&file, lines.join("\n")).unwrap();

    let other = Env::new();
    let text = other.ok(&["import", file.to_str().unwrap()]);
    assert!(text.contains("2 imported, 0 skipped, 0 failed"), "{text}");
    assert!(!text.contains("link was dropped"), "{text}");
    let json = other.json(&["show", &s.task, "--json"]);
    assert_eq!(
        json["session"]["parent_session_id"],
        s.build.as_str(),
        "{json}"
    );
}

#[test]
fn jsonl_and_markdown_exports() {
    let env = Env::new();
    let s = seed(&env);
    let jsonl = env.ok(&["export", "--all", "--format", "jsonl"]);
    assert_eq!(jsonl.lines().count(), 4);
    let file = env.path("all.jsonl");
    std::fs::write(&file, &jsonl).unwrap();
    let other = Env::new();
    assert!(
        other
            .ok(&["import", file.to_str().unwrap()])
            .contains("4 imported")
    );
    assert_eq!(snapshot(&env.db), snapshot(&other.db));

    let one = env.ok(&["export", &s.cjk, "--format", "jsonl"]);
    assert_eq!(one.lines().count(), 1);

    let md = env.ok(&["export", "Fix the build", "--format", "markdown"]);
    assert!(md.starts_with("# Fix the build"), "{md}");
    assert!(md.contains("## user"), "{md}");
    assert!(md.contains("**tool `read`** (completed)"), "{md}");

    // Nothing to export is a usage error.
    assert_eq!(env.run(&["export"]).status.code(), Some(2));
}

/// A tool output holding a fenced code block (`cat README.md`) stays inside its own block
/// in a Markdown export: its fence is longer than any run of backticks in it. A plain
/// ```` ``` ```` fence was closed by the output's first fence line, and the rest of the
/// output and of the conversation turned into Markdown of the output's making.
#[test]
fn a_markdown_export_keeps_a_fenced_tool_output_in_its_block() {
    let env = Env::new();
    let (sessions, messages) = env.services();
    let s = sessions.create(NewSession::titled("Fences")).unwrap();
    let readme = "# App\n\n```sh\ncargo run\n```\n\nAn inline ````` run.";
    let mut answer = NewMessage::new(
        &s.id,
        Role::Assistant,
        vec![
            tool_done(
                "call_1",
                "bash",
                serde_json::json!({"command": "cat README.md"}),
                readme,
            ),
            Part::text("That is the README."),
        ],
    );
    answer.model = Some("m".into());
    messages.create(answer).unwrap();
    let md = env.ok(&["export", "Fences", "-f", "markdown"]);
    let block = format!("\n``````\n{readme}\n``````\n");
    assert!(md.contains(&block), "{md}");
    // The input's one-line JSON keeps its plain fence; so does an output without backticks
    // (the seeded history's).
    assert!(
        md.contains("```json\n{\"command\":\"cat README.md\"}\n```\n"),
        "{md}"
    );
    assert!(md.ends_with("\nThat is the README.\n\n"), "{md:?}");
    seed(&env);
    let md = env.ok(&["export", "Fix the build", "-f", "markdown"]);
    assert!(md.contains("\n```\nfn parse(input: &str)"), "{md}");
}

#[test]
fn malformed_import_files_write_nothing() {
    let env = Env::new();
    env.ok(&["db", "migrate"]);
    let cases = [
        ("empty.json", "", "the file is empty"),
        ("text.json", "hello", "not JSON"),
        (
            "broken.json",
            "{\"format\": \"scribe-export\", \"sessions\": [",
            "line",
        ),
        (
            "shape.json",
            "{\"sessions\": [{\"nope\": 1}]}",
            "missing field",
        ),
        ("lines.jsonl", "{\"a\": 1}\n{\"b\": 2}\n", "line 1"),
    ];
    for (name, content, want) in cases {
        let file = env.path(name);
        std::fs::write(&file, content).unwrap();
        let err = env.fails(&["import", file.to_str().unwrap()]);
        assert!(err.contains("malformed import file"), "{name}: {err}");
        assert!(err.contains(want), "{name}: {err}");
        assert!(err.contains("nothing was imported"), "{name}: {err}");
    }
    // Bytes that are not text: a compressed export is named as such, with what to do.
    for (name, content, want) in [
        ("all.json.gz", &[0x1f, 0x8b, 0x08, 0x00, 0xff][..], "gunzip"),
        (
            "all.json.zst",
            &[0x28, 0xb5, 0x2f, 0xfd, 0xff][..],
            "zstd -d",
        ),
        (
            "bin.json",
            &[b'{', 0xff, 0xfe][..],
            "not UTF-8 text (byte 1)",
        ),
    ] {
        let file = env.path(name);
        std::fs::write(&file, content).unwrap();
        let err = env.fails(&["import", file.to_str().unwrap()]);
        assert!(err.contains("malformed import file"), "{name}: {err}");
        assert!(err.contains(want), "{name}: {err}");
    }
    let json = env.json(&["list", "--all", "--json"]);
    assert_eq!(json["sessions"].as_array().unwrap().len(), 0);
    let err = env.fails(&["import", env.path("missing.json").to_str().unwrap()]);
    assert!(err.contains("cannot read"), "{err}");
}

#[test]
fn an_import_that_stores_nothing_leaves_no_new_database() {
    let source = Env::new();
    seed(&source);
    let export = source.ok(&["export", "--all"]);
    let mut doc: serde_json::Value = serde_json::from_str(&export).unwrap();
    let sessions = doc["sessions"].as_array_mut().unwrap();
    let good = sessions[0].clone();
    // A session with no id is refused at store time: the file itself is a valid export.
    for session in sessions.iter_mut() {
        session["session"]["id"] = " ".into();
    }
    let bad = source.path("bad.json");
    std::fs::write(&bad, doc.to_string()).unwrap();

    // Into a mistyped path: neither the file, SQLite's and the gate's files beside it,
    // nor the directories created for it are left.
    let mut typo = Env::new();
    typo.db = typo.dir.path().join("new").join("deeper").join("scribe.db");
    let out = typo.run(&["import", bad.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(1));
    let err = stderr(&out);
    assert!(
        err.contains("4 of 4 sessions could not be imported"),
        "{err}"
    );
    // The blank id is shown quoted, not as nothing.
    assert!(
        err.contains(r#"failed session " ""#) && err.contains("id must not be empty"),
        "{err}"
    );
    assert!(
        err.contains("nothing was imported, so no database was created at"),
        "{err}"
    );
    let left: Vec<_> = std::fs::read_dir(typo.dir.path()).unwrap().collect();
    assert!(left.is_empty(), "{left:?}");
    // A directory that was there stays, even named through one created for the file
    // (`new/../kept` did not exist before the import; `kept` did).
    let mut up = Env::new();
    let kept = up.dir.path().join("kept");
    std::fs::create_dir(&kept).unwrap();
    up.db = up.dir.path().join("new/../kept/scribe.db");
    let out = up.run(&["import", bad.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    assert!(kept.is_dir(), "{}", stderr(&out));
    assert!(!kept.join("scribe.db").exists());
    // An export with no sessions at all stores nothing either.
    let empty = source.path("empty.json");
    std::fs::write(
        &empty,
        r#"{"format":"scribe-export","version":1,"sessions":[]}"#,
    )
    .unwrap();
    let out = typo.run(&["import", empty.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert!(!typo.db.exists() && !typo.dir.path().join("new").exists());
    // As does an agent's history with no session in it (a rollout of metadata only).
    let rollouts = source.path("rollouts");
    std::fs::create_dir_all(&rollouts).unwrap();
    std::fs::write(
        rollouts.join("rollout-x.jsonl"),
        "{\"type\":\"event_msg\"}\n",
    )
    .unwrap();
    let out = typo.run(&["import", "--from", "codex", rollouts.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert!(!typo.db.exists() && !typo.dir.path().join("new").exists());

    // A database that was there before stays, empty as it was.
    let existing = Env::new();
    existing.ok(&["db", "migrate"]);
    assert_eq!(
        existing
            .run(&["import", bad.to_str().unwrap()])
            .status
            .code(),
        Some(1)
    );
    let json = existing.json(&["list", "--all", "--json"]);
    assert_eq!(json["sessions"].as_array().unwrap().len(), 0);

    // One session stored is enough to keep the new database.
    let sessions = doc["sessions"].as_array_mut().unwrap();
    sessions[0] = good;
    std::fs::write(&bad, doc.to_string()).unwrap();
    let out = typo.run(&["import", bad.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(1));
    assert!(
        stdout(&out).contains("1 imported, 0 skipped, 3 failed"),
        "{}",
        stdout(&out)
    );
    assert!(!stderr(&out).contains("no database was created"));
    let json = typo.json(&["list", "--all", "--json"]);
    assert_eq!(json["sessions"].as_array().unwrap().len(), 1);
}

#[test]
fn rename_fork_archive_and_unarchive() {
    let env = Env::new();
    let s = seed(&env);
    let text = env.ok(&["rename", "Fix the build", "Fix the parser"]);
    assert!(
        text.contains("renamed") && text.contains("Fix the parser"),
        "{text}"
    );
    let err = env.fails(&["rename", &s.cjk, "Fix the parser"]);
    assert!(err.contains("already used"), "{err}");

    let text = env.ok(&["fork", "Fix the parser"]);
    assert!(text.contains("(2 messages)"), "{text}");
    let text = env.ok(&["fork", &s.build, "--at", &s.build_first]);
    assert!(text.contains("(1 message)"), "{text}");
    let err = env.fails(&["fork", &s.build, "--at", "msg_nope"]);
    assert!(err.contains("no message"), "{err}");
    let all = env.json(&["list", "--all", "--json"]);
    let forks = all["sessions"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|x| x["kind"] == "fork")
        .count();
    assert_eq!(forks, 2);

    assert!(env.ok(&["archive", &s.cjk]).contains("archived"));
    let roots = env.json(&["list", "--json"]);
    assert!(
        roots["sessions"]
            .as_array()
            .unwrap()
            .iter()
            .all(|x| x["id"] != s.cjk.as_str())
    );
    assert!(
        env.ok(&["archive", "--undo", &s.cjk])
            .contains("unarchived")
    );
    assert!(env.ok(&["unarchive", &s.archived]).contains("unarchived"));
    let roots = env.json(&["list", "--json"]);
    // The three conversations, and the two forks made above: a fork is listed too.
    assert_eq!(roots["sessions"].as_array().unwrap().len(), 5);
}

#[test]
fn delete_needs_yes_without_a_terminal() {
    let env = Env::new();
    let s = seed(&env);
    let err = env.fails(&["delete", &s.cjk]);
    assert!(err.contains("refusing to delete"), "{err}");
    assert!(err.contains("--yes"), "{err}");
    assert!(env.ok(&["show", &s.cjk]).contains("搜索功能"));

    let text = env.ok(&["delete", &s.cjk, "--yes"]);
    assert!(text.contains("deleted session"), "{text}");
    let err = env.fails(&["show", &s.cjk]);
    assert!(err.contains("no session matches"), "{err}");
}

#[test]
fn prune_dry_run_changes_nothing() {
    let env = Env::new();
    let s = seed(&env);
    let before = snapshot(&env.db);
    // Ended sessions: "Fix the build" and the archived one; "0d" means "ended before now".
    let json = env.json(&["prune", "--older-than", "0d", "--dry-run", "--json"]);
    assert_eq!(json["dry_run"], true);
    let ids: Vec<&str> = json["sessions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|x| x["id"].as_str().unwrap())
        .collect();
    assert_eq!(ids.len(), 2, "{json}");
    assert!(ids.contains(&s.build.as_str()) && ids.contains(&s.archived.as_str()));
    assert_eq!(before, snapshot(&env.db));
    assert!(
        env.ok(&["prune", "--older-than", "90d", "--dry-run"])
            .contains("0 sessions would be pruned")
    );

    let err = env.fails(&["prune", "--older-than", "0d"]);
    assert!(err.contains("refusing to prune"), "{err}");
    assert_eq!(before, snapshot(&env.db));

    let text = env.ok(&[
        "prune",
        "--older-than",
        "0",
        "--source",
        "telegram",
        "--yes",
    ]);
    assert!(text.contains("1 session pruned"), "{text}");
    assert_eq!(snapshot(&env.db).len(), 3);
    assert_eq!(
        env.run(&["prune", "--older-than", "36h"]).status.code(),
        Some(2)
    );
    assert_eq!(env.run(&["prune"]).status.code(), Some(2));
}

/// What prune lists is named as search names it: an untitled session by how it began,
/// before and after it is gone.
#[test]
fn prune_names_what_it_deletes() {
    let env = Env::new();
    let (sessions, messages) = env.services();
    let untitled = sessions.create(NewSession::default()).unwrap();
    messages
        .create(NewMessage::new(
            &untitled.id,
            Role::User,
            vec![Part::text("Why is the\nsky blue?")],
        ))
        .unwrap();
    sessions.end(&untitled.id, "user_exit").unwrap();
    for (args, verb) in [(["--dry-run"], "would delete"), (["--yes"], "deleted")] {
        let text = env.ok(&[&["prune", "--older-than", "0d"][..], &args[..]].concat());
        let line = |id: &str| {
            text.lines()
                .find(|l| l.contains(id))
                .unwrap_or_else(|| panic!("{id} in {text}"))
                .to_owned()
        };
        let named = line(&untitled.id);
        assert!(
            named.starts_with(verb) && named.contains("“Why is the sky blue?” · cli · ended"),
            "{named}"
        );
    }
    assert!(sessions.get(&untitled.id).is_err());
}

#[test]
fn db_check_and_vacuum() {
    let env = Env::new();
    seed(&env);
    let text = env.ok(&["db", "check"]);
    assert!(text.contains("integrity_check    ok"), "{text}");
    assert!(text.contains("parts_fts          ok"), "{text}");
    assert!(text.contains("parts_fts_trigram  ok"), "{text}");
    let text = env.ok(&["db", "vacuum"]);
    assert!(text.contains("→"), "{text}");
    assert!(env.ok(&["list"]).contains("Fix the build"));
}

#[test]
fn db_check_finds_a_stale_index_and_db_reindex_rebuilds_it() {
    let env = Env::new();
    seed(&env);
    // Remove a part's tokens from the word index behind the triggers' back.
    let conn = rusqlite::Connection::open(&env.db).unwrap();
    conn.execute_batch(
        "INSERT INTO parts_fts (parts_fts, rowid, search_text) \
         SELECT 'delete', seq, search_text FROM parts_search WHERE search_text IS NOT NULL LIMIT 1;",
    )
    .unwrap();
    drop(conn);
    let out = env.run(&["db", "check"]);
    assert_eq!(out.status.code(), Some(1), "{}", stdout(&out));
    assert!(
        stdout(&out).contains("parts_fts          index does not match"),
        "{}",
        stdout(&out)
    );
    assert!(
        stderr(&out).contains("database check failed: parts_fts"),
        "{}",
        stderr(&out)
    );
    // The index holds only what the parts give: the advice is to rebuild it.
    assert!(
        stderr(&out).contains("`scribe db reindex` rebuilds the search indexes"),
        "{}",
        stderr(&out)
    );
    let text = env.ok(&["db", "reindex"]);
    assert!(
        text.contains("rebuilt parts_fts and parts_fts_trigram from the parts"),
        "{text}"
    );
    let text = env.ok(&["db", "check"]);
    assert!(text.contains("parts_fts          ok"), "{text}");
}

#[test]
fn newer_schema_is_refused_by_every_command() {
    let env = Env::new();
    seed(&env);
    let conn = rusqlite::Connection::open(&env.db).unwrap();
    conn.execute(
        "INSERT INTO refinery_schema_history (version, name, applied_on, checksum) \
         VALUES (99, 'future', '2030-01-01T00:00:00Z', '0')",
        [],
    )
    .unwrap();
    drop(conn);
    for cmd in [
        vec!["list"],
        vec!["search", "x"],
        vec!["stats"],
        vec!["db", "check"],
    ] {
        let err = env.fails(&cmd);
        assert!(
            err.contains("version 99 is newer than this build knows"),
            "{cmd:?}: {err}"
        );
    }
}

#[test]
fn completions_for_each_shell() {
    let env = Env::new();
    let bash = env.ok(&["completions", "bash"]);
    assert!(bash.contains("_scribe()"), "{bash}");
    for cmd in ["list", "search", "export", "prune", "completions"] {
        assert!(bash.contains(cmd), "{cmd}");
    }
    assert!(env.ok(&["completions", "zsh"]).contains("#compdef scribe"));
    assert!(
        env.ok(&["completions", "fish"])
            .contains("complete -c scribe")
    );
    assert!(!env.db.exists(), "completions need no database");
    assert_eq!(env.run(&["completions", "tcsh"]).status.code(), Some(2));
}

#[test]
fn help_comes_from_doc_comments() {
    let env = Env::new();
    let help = env.ok(&["--help"]);
    for cmd in [
        "list",
        "show",
        "search",
        "stats",
        "export",
        "import",
        "rename",
        "fork",
        "archive",
        "delete",
        "prune",
        "db",
        "completions",
    ] {
        assert!(help.contains(cmd), "{cmd}: {help}");
    }
    let list = env.ok(&["list", "--help"]);
    assert!(list.contains("newest first"), "{list}");
}

#[test]
fn a_locked_database_is_one_line_and_exit_1() {
    let env = Env::new();
    let s = seed(&env);
    // Another process holding the write lock through every retry.
    let conn = rusqlite::Connection::open(&env.db).unwrap();
    conn.execute_batch("BEGIN EXCLUSIVE").unwrap();
    let err = env.fails(&["rename", &s.cjk, "renamed"]);
    assert!(err.contains("locked"), "{err}");
    conn.execute_batch("ROLLBACK").unwrap();
    drop(conn);
    assert!(
        env.ok(&["show", &s.cjk]).contains("搜索功能"),
        "nothing was renamed"
    );
}

#[test]
fn export_to_an_unwritable_place_fails_cleanly() {
    let env = Env::new();
    seed(&env);
    let target = env.path("no/such/dir/out.json");
    let err = env.fails(&["export", "--all", "-o", target.to_str().unwrap()]);
    assert!(err.contains("cannot write"), "{err}");
    assert!(err.contains("No such file or directory"), "{err}");
    // Not the random name of the temporary file it would have written first.
    assert!(!err.contains("at path"), "{err}");
    assert!(err.trim_end().ends_with("(os error 2)"), "{err}");
    assert!(!target.exists());
    // The whole line: the path asked for, then the operating system's own error.
    assert_eq!(
        err.trim_end(),
        format!(
            "scribe: cannot write {}: No such file or directory (os error 2)",
            target.display()
        )
    );
    // A file where a directory should be: its own error, and no temporary file is left.
    let file = env.path("plain");
    std::fs::write(&file, "x").unwrap();
    let target = file.join("out.json");
    let err = env.fails(&["export", "--all", "-o", target.to_str().unwrap()]);
    assert_eq!(
        err.trim_end(),
        format!(
            "scribe: cannot write {}: Not a directory (os error 20)",
            target.display()
        )
    );
    let dir = env.path("");
    let left: Vec<String> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|name| name.starts_with(".tmp"))
        .collect();
    assert!(left.is_empty(), "{left:?}");
}

#[test]
fn an_import_that_conflicts_reports_the_session_and_keeps_the_rest() {
    let env = Env::new();
    let s = seed(&env);
    let file = env.path("two.jsonl");
    let jsonl = env.ok(&["export", &s.build, &s.cjk, "--format", "jsonl"]);
    std::fs::write(&file, &jsonl).unwrap();

    // Another store holds a session ("Clash") whose message has the id of the CJK
    // session's message: a message belongs to one session, so that session cannot go in.
    let cjk_line = jsonl.lines().find(|l| l.contains(&s.cjk)).unwrap();
    let mut clash: serde_json::Value = serde_json::from_str(cjk_line).unwrap();
    clash["session"]["id"] = "ses_clash".into();
    clash["session"]["title"] = "Clash".into();
    for message in clash["messages"].as_array_mut().unwrap() {
        message["session_id"] = "ses_clash".into();
        for (i, part) in message["parts"]
            .as_array_mut()
            .unwrap()
            .iter_mut()
            .enumerate()
        {
            part["id"] = format!("prt_clash_{i}").into();
        }
    }
    let clash = serde_json::to_string(&clash)
        .unwrap()
        .replace("搜索功能需要支持中文分词", "nothing to find here");
    let clash_file = env.path("clash.jsonl");
    std::fs::write(&clash_file, clash).unwrap();
    let other = Env::new();
    other.ok(&["import", clash_file.to_str().unwrap()]);

    let out = other.run(&["import", file.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(1));
    let err = stderr(&out);
    assert!(err.contains(&format!("failed {}", s.cjk)), "{err}");
    assert!(err.contains("is already in session ses_clash"), "{err}");
    assert!(
        err.contains("1 of 2 sessions could not be imported"),
        "{err}"
    );
    assert!(
        stdout(&out).contains("1 imported, 0 skipped, 1 failed"),
        "{}",
        stdout(&out)
    );
    let json = other.json(&["list", "--all", "--json"]);
    assert_eq!(json["sessions"].as_array().unwrap().len(), 2);
    // The batch was stored again without the failed session, and indexed with it: the
    // imported session is found, the failed one's CJK text is not, and the indexes check.
    assert!(other.ok(&["search", "mismatched"]).contains(&s.build));
    let cjk = other.json(&["search", "中文", "--json"]);
    assert_eq!(cjk["hits"].as_array().unwrap().len(), 0, "{cjk}");
    let check = other.ok(&["db", "check"]);
    assert!(check.contains("parts_fts          ok"), "{check}");
    assert!(check.contains("parts_fts_trigram  ok"), "{check}");
    let zero = other.run(&["list", "--limit", "0"]);
    assert_eq!(zero.status.code(), Some(2));
    assert!(
        stderr(&zero).contains("expected a whole number from 1 up"),
        "{}",
        stderr(&zero)
    );
    // A negative count is a wrong value of -n, not an unknown option (clap said
    // "unexpected argument '-1'" and, for search, to pass it after `--`: as a query word).
    for (args, want) in [
        (
            &["list", "-n", "-1"][..],
            "expected a whole number from 1 up",
        ),
        (
            &["search", "mismatched", "-n", "-1"][..],
            "expected a number from 1 to 500",
        ),
    ] {
        let out = other.run(args);
        assert_eq!(out.status.code(), Some(2), "{args:?}");
        let err = stderr(&out);
        assert!(
            err.contains(&format!("invalid value '-1' for '--limit <N>': {want}")),
            "{args:?}: {err}"
        );
    }
    // An empty query word (most often a shell variable that was not set) is a usage error,
    // not a search for nothing that answered "no matches" with success.
    for (args, word) in [
        (&["search", ""][..], ""),
        (&["search", "mismatched", "  "][..], "  "),
        (&["search", "--json", "--", "-x", ""][..], ""),
    ] {
        let out = other.run(args);
        assert_eq!(out.status.code(), Some(2), "{args:?}");
        assert!(stdout(&out).is_empty(), "{args:?}");
        let err = stderr(&out);
        assert!(
            err.contains(&format!(
                "invalid value '{word}' for '<QUERY>...': expected text to search for"
            )),
            "{args:?}: {err}"
        );
    }
}

/// Merging two stores: an exported session whose title another stored session already
/// holds is imported under the next title of its lineage (`t #2`), as the history
/// importers number it, and the report says so; importing the file again changes nothing.
/// (Before, that session failed with "title … is already used", exit 1.)
#[test]
fn an_import_numbers_a_title_another_session_holds() {
    let env = Env::new();
    let s = seed(&env);
    let file = env.path("two.jsonl");
    let jsonl = env.ok(&["export", &s.build, &s.cjk, "--format", "jsonl"]);
    std::fs::write(&file, jsonl).unwrap();

    let other = Env::new();
    let (sessions, _) = other.services();
    let holder = sessions
        .create(scribe_session::NewSession::titled("搜索功能"))
        .unwrap();
    let text = other.ok(&["import", file.to_str().unwrap()]);
    assert!(
        text.contains(&format!(
            "imported {} \"搜索功能\" as \"搜索功能 #2\"",
            s.cjk
        )),
        "{text}"
    );
    assert!(
        text.contains(&format!("imported {} \"Fix the build\" (", s.build)),
        "{text}"
    );
    assert!(text.contains("2 imported, 0 skipped, 0 failed"), "{text}");
    let show = other.json(&["show", &s.cjk, "--json"]);
    assert_eq!(show["session"]["title"], "搜索功能 #2", "{show}");
    assert_eq!(show["messages"].as_array().unwrap().len(), 1, "{show}");
    assert_eq!(
        sessions.get(&holder.id).unwrap().title.as_deref(),
        Some("搜索功能")
    );
    // The title names the newest of its lineage: the imported session.
    let by_title = other.json(&["show", "搜索功能", "--json"]);
    assert_eq!(by_title["session"]["id"], s.cjk.as_str(), "{by_title}");

    let again = other.ok(&["import", file.to_str().unwrap()]);
    assert!(again.contains("0 imported, 2 skipped, 0 failed"), "{again}");
    let json = other.json(&["list", "--all", "--json"]);
    assert_eq!(json["sessions"].as_array().unwrap().len(), 3, "{json}");
}

#[test]
fn demo_runs_offline_compacts_and_numbers_its_titles() {
    let env = Env::new();
    let text = env.ok(&["demo"]);
    assert!(
        text.contains("Ran \"Demo: fix the failing add test\""),
        "{text}"
    );
    assert!(text.contains("compacted once"), "{text}");
    assert!(text.contains("== Sessions"), "{text}");
    assert!(text.contains("== A search hit"), "{text}");
    assert!(text.contains("expected 4"), "{text}");
    assert!(text.contains("== Cost breakdown"), "{text}");
    assert!(text.contains("compaction summary"), "{text}");
    assert!(text.contains("sub-agent"), "{text}");

    let again = env.ok(&["demo"]);
    assert!(
        again.contains("Ran \"Demo: fix the failing add test #2\""),
        "{again}"
    );

    let list = env.json(&["list", "--all", "--source", "demo", "--json"]);
    let sessions = list["sessions"].as_array().unwrap();
    assert_eq!(
        sessions.len(),
        4,
        "two demo sessions, each with a task session"
    );
    let main = sessions
        .iter()
        .find(|s| s["title"] == "Demo: fix the failing add test #2")
        .unwrap();
    assert!(main["cost_usd"].as_f64().unwrap() > 0.0);
    assert!(main["tokens"]["cache_read"].as_i64().unwrap() > 0);
    assert_eq!(sessions.iter().filter(|s| s["kind"] == "task").count(), 2);

    // The compaction is recorded: a summary message with a compaction part.
    let export = env.json(&["show", main["id"].as_str().unwrap(), "--json"]);
    let summary_id = export["session"]["summary_message_id"].as_str().unwrap();
    let messages = export["messages"].as_array().unwrap();
    let summary = messages.iter().find(|m| m["id"] == summary_id).unwrap();
    assert_eq!(summary["is_summary"], true);
    assert!(
        summary["parts"]
            .as_array()
            .unwrap()
            .iter()
            .any(|p| p["part"]["type"] == "compaction")
    );
    // The real tools ran: the check failed, then passed after the edit.
    let shown = env.ok(&["show", main["id"].as_str().unwrap()]);
    assert!(shown.contains("returned 0, expected 4"), "{shown}");
    assert!(shown.contains("test result: ok. 1 passed"), "{shown}");
    assert!(env.ok(&["db", "check"]).contains("parts_fts          ok"));
}

/// Stored text is printed as text: control characters in a message (an agent's history
/// holds tool output from any file or web page) are shown as symbols (`␛`, `␇`, `␍`) by
/// `show`, `search`, `list` and `stats`, even with colour on, so they cannot retitle or
/// clear the terminal or overwrite a line. (Before, a terminal got them raw.)
#[test]
fn stored_control_characters_never_reach_the_terminal() {
    let env = Env::new();
    let (sessions, messages) = env.services();
    let session = sessions
        .create(scribe_session::NewSession::titled("Escapes"))
        .unwrap();
    let hostile = "look\u{1b}]0;pwned\u{7} here\u{1b}[2J\rhidden\u{9b}6n end";
    let mut message = scribe_message::NewMessage::new(
        &session.id,
        scribe_message::Role::User,
        vec![
            scribe_message::Part::Reasoning(scribe_message::ReasoningPart {
                text: hostile.into(),
                ..Default::default()
            }),
            scribe_message::Part::text(hostile),
        ],
    );
    message.model = Some("model\u{1b}[8m".into());
    let message = messages.create(message).unwrap();
    messages
        .add_usage(&message.id, scribe_message::TokenUsage::default(), 0.01)
        .unwrap();
    let runs = [
        vec!["show", "Escapes"],
        vec!["search", "look"],
        vec!["list"],
        vec!["stats"],
    ];
    for args in runs {
        let out = env.run_env(&args, &[("CLICOLOR_FORCE", "1")]);
        assert!(out.status.success(), "{args:?}: {}", stderr(&out));
        let text = stdout(&out);
        for raw in ["\u{1b}]", "\u{1b}[2J", "\u{1b}[8m", "\u{7}", "\r", "\u{9b}"] {
            assert!(!text.contains(raw), "{args:?} printed {raw:?}: {text:?}");
        }
        if args[0] != "stats" {
            assert!(text.contains("␛]0;pwned␇"), "{args:?}: {text}");
        }
    }
    let shown = env.ok(&["show", "Escapes"]);
    assert!(
        shown.contains("  look␛]0;pwned␇ here␛[2J␍hidden\u{fffd}6n end"),
        "{shown}"
    );
    assert!(shown.contains("model␛[8m"), "{shown}");
    // JSON keeps the text exactly (escaped as JSON does).
    let json = env.json(&["show", "Escapes", "--json"]);
    assert!(
        json.to_string().contains("look\\u001b]0;pwned\\u0007"),
        "{json}"
    );
}

/// Stored STX/ETX (U+0002/U+0003, terminal output in a tool result can hold them: the
/// snippets' match markers) are text in a hit too: shown as `␂`/`␃`, never a highlight.
/// (Before, `red` between them was highlighted and both characters were dropped.)
#[test]
fn search_snippets_show_stored_match_markers_as_text() {
    let env = Env::new();
    let (sessions, messages) = env.services();
    let session = sessions
        .create(scribe_session::NewSession::titled("Terminal"))
        .unwrap();
    messages
        .create(scribe_message::NewMessage::new(
            &session.id,
            scribe_message::Role::User,
            vec![scribe_message::Part::text(
                "output \u{2}red\u{3} then the needle here",
            )],
        ))
        .unwrap();
    let shown_text = "output ␂red␃ then the needle here";
    let json = env.json(&["search", "needle", "--json"]);
    let hit = &json["hits"][0];
    assert_eq!(hit["snippet"], shown_text, "{json}");
    let marked = highlighted(hit, shown_text);
    assert_eq!(marked, ["needle"], "{json}");
    let coloured = stdout(&env.run_env(&["search", "needle"], &[("CLICOLOR_FORCE", "1")]));
    assert!(
        coloured.contains("output ␂red␃ then the \u{1b}[1m\u{1b}[33mneedle"),
        "{coloured:?}"
    );
}

/// The words a `--json` search hit highlights in its snippet `text` (its `highlights` are
/// character ranges).
fn highlighted(hit: &serde_json::Value, text: &str) -> Vec<String> {
    let chars: Vec<char> = text.chars().collect();
    hit["highlights"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| {
            let (a, b) = (r[0].as_u64().unwrap(), r[1].as_u64().unwrap());
            chars[a as usize..b as usize].iter().collect()
        })
        .collect()
}

/// A stored `>>>` (a Python prompt, a merge conflict) or `<<<` (a heredoc) is text in a
/// hit: kept in the snippet, never taken for a match. (Before, they were the snippets'
/// match markers: both were dropped from the text and the words between them marked.)
#[test]
fn search_snippets_keep_stored_angle_brackets() {
    let env = Env::new();
    let (sessions, messages) = env.services();
    let session = sessions
        .create(scribe_session::NewSession::titled("Python REPL"))
        .unwrap();
    let text = "In the REPL: >>> print(1) gives 1, and a <<< b is a heredoc";
    messages
        .create(scribe_message::NewMessage::new(
            &session.id,
            scribe_message::Role::User,
            vec![scribe_message::Part::text(text)],
        ))
        .unwrap();
    let json = env.json(&["search", "heredoc", "--json"]);
    let hit = &json["hits"][0];
    assert_eq!(hit["snippet"], text, "{json}");
    let marked = highlighted(hit, text);
    assert_eq!(marked, ["heredoc"], "{json}");
    let shown = env.ok(&["search", "heredoc"]);
    assert!(shown.contains(&format!("  {text}")), "{shown}");
    let coloured = stdout(&env.run_env(&["search", "heredoc"], &[("CLICOLOR_FORCE", "1")]));
    assert!(
        coloured.contains(">>> print(1) gives 1, and a <<< b is a \u{1b}[1m\u{1b}[33mheredoc"),
        "{coloured:?}"
    );
}

#[test]
fn colour_only_when_wanted_and_never_with_no_color() {
    let env = Env::new();
    seed(&env);
    let plain = env.run(&["search", "mismatched"]);
    assert!(!stdout(&plain).contains('\u{1b}'));
    let forced = env.run_env(&["search", "mismatched"], &[("CLICOLOR_FORCE", "1")]);
    assert!(
        stdout(&forced).contains("\u{1b}[1m\u{1b}[33mmismatched"),
        "{}",
        stdout(&forced)
    );
    let no_color = env.run_env(
        &["search", "mismatched"],
        &[("CLICOLOR_FORCE", "1"), ("NO_COLOR", "1")],
    );
    assert!(
        !stdout(&no_color).contains('\u{1b}'),
        "{}",
        stdout(&no_color)
    );
    assert_eq!(stdout(&no_color), stdout(&plain));
}

#[test]
fn tables_fit_the_width_they_are_given() {
    let env = Env::new();
    seed(&env);
    for width in [80usize, 100] {
        let w = width.to_string();
        let out = env.run_env(&["list", "--all"], &[("COLUMNS", w.as_str())]);
        let text = stdout(&out);
        assert_eq!(text.lines().count(), 5, "one line per session: {text}");
        for line in text.lines() {
            assert!(line.chars().count() <= width, "{width}: {line:?}");
        }
        // Ids are never cut: they are what `show` takes.
        let first = text
            .lines()
            .nth(1)
            .unwrap()
            .split_whitespace()
            .next()
            .unwrap();
        assert!(!first.ends_with('…'), "{first}");
        assert!(env.ok(&["show", first]).contains("user"));
    }
}

#[test]
fn a_demo_session_round_trips_through_export_and_import() {
    let env = Env::new();
    env.ok(&["demo"]);
    seed(&env);
    let file = env.path("everything.jsonl");
    env.ok(&[
        "export",
        "--all",
        "--format",
        "jsonl",
        "-o",
        file.to_str().unwrap(),
    ]);
    let other = Env::new();
    let text = other.ok(&["import", file.to_str().unwrap()]);
    assert!(text.contains("6 imported, 0 skipped, 0 failed"), "{text}");
    assert_eq!(snapshot(&env.db), snapshot(&other.db));
    assert_eq!(
        env.json(&["stats", "--json"])["totals"],
        other.json(&["stats", "--json"])["totals"]
    );
    assert!(other.ok(&["db", "check"]).contains("parts_fts_trigram  ok"));
}

#[test]
fn a_closed_pipe_is_not_an_error() {
    let env = Env::new();
    env.ok(&["demo"]);
    for args in [["stats", "--json"], ["export", "--all"]] {
        let mut child = std::process::Command::new(env!("CARGO_BIN_EXE_scribe"))
            .arg("--db")
            .arg(&env.db)
            .args(args)
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        // Close the read end at once, like `| head -0`.
        drop(child.stdout.take());
        let out = child.wait_with_output().unwrap();
        assert!(stderr(&out).is_empty(), "{args:?}: {}", stderr(&out));
    }
}

#[test]
fn the_short_ids_in_list_each_name_their_own_session() {
    let env = Env::new();
    let (sessions, _) = env.services();
    // Created back to back, these ids share their time prefix well past 12 characters.
    let mut made = Vec::new();
    for i in 0..30 {
        let s = sessions
            .create(scribe_session::NewSession {
                title: Some(format!("twin {i}")),
                ..Default::default()
            })
            .unwrap();
        made.push(s);
    }
    let table = env.ok(&["list", "--limit", "30"]);
    let mut checked = 0;
    for line in table.lines().skip(1) {
        let Some(short) = line.split_whitespace().next() else {
            continue;
        };
        let Some(session) = made.iter().find(|s| s.id.starts_with(short)) else {
            continue;
        };
        assert!(
            short.len() >= 12 && short.len() < session.id.len(),
            "{short}"
        );
        assert_eq!(
            made.iter().filter(|s| s.id.starts_with(short)).count(),
            1,
            "{short} is ambiguous"
        );
        let shown = env.json(&["show", short, "--json"]);
        assert_eq!(shown["session"]["id"], session.id.as_str(), "{short}");
        checked += 1;
    }
    assert_eq!(checked, 30, "{table}");
}

/// A fork is a conversation the user chose to make: `list` shows it (without --all),
/// marked as a fork of its parent.
#[test]
fn a_fork_is_listed_as_a_fork_of_its_parent() {
    let env = Env::new();
    let s = seed(&env);
    let text = env.ok(&["fork", &s.build]);
    let fork_id = text
        .split(" into ")
        .nth(1)
        .unwrap()
        .split(' ')
        .next()
        .unwrap();

    let json = env.json(&["list", "--json"]);
    let sessions = json["sessions"].as_array().unwrap();
    let fork = sessions
        .iter()
        .find(|x| x["id"] == fork_id)
        .unwrap_or_else(|| panic!("fork missing from list: {json}"));
    assert_eq!(fork["kind"], "fork");
    assert_eq!(fork["parent_session_id"], s.build.as_str());
    // Tasks stay hidden.
    assert!(
        sessions.iter().all(|x| x["id"] != s.task.as_str()),
        "{json}"
    );

    let table = env.ok(&["list"]);
    let line = table
        .lines()
        .find(|l| l.contains("fork of"))
        .unwrap_or_else(|| panic!("no fork row: {table}"));
    assert!(line.contains("fork of Fix the build"), "{line}");
}

/// After compaction into a continuation, `list` shows the live tip (`t #2`) with its
/// lineage, not the ended root; `show` of the root says where the conversation went on.
#[test]
fn list_shows_the_live_continuation_and_show_points_to_it() {
    let env = Env::new();
    seed(&env);
    let (sessions, messages) = env.services();
    let root = sessions
        .create(scribe_session::NewSession::titled("Long talk"))
        .unwrap();
    messages
        .create(scribe_message::NewMessage::new(
            &root.id,
            scribe_message::Role::User,
            vec![scribe_message::Part::text("a long conversation")],
        ))
        .unwrap();
    let second = sessions.create_continuation(&root.id).unwrap();
    sessions.end(&root.id, "compression").unwrap();
    let third = sessions.create_continuation(&second.id).unwrap();
    sessions.end(&second.id, "compression").unwrap();
    assert_eq!(third.title.as_deref(), Some("Long talk #3"));

    let json = env.json(&["list", "--json"]);
    let ids: Vec<&str> = json["sessions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|x| x["id"].as_str().unwrap())
        .collect();
    assert!(ids.contains(&third.id.as_str()), "tip missing: {json}");
    assert!(!ids.contains(&root.id.as_str()), "ended root shown: {json}");
    assert!(!ids.contains(&second.id.as_str()), "middle shown: {json}");

    let table = env.ok(&["list"]);
    let line = table
        .lines()
        .find(|l| l.contains("Long talk #3"))
        .unwrap_or_else(|| panic!("no tip row: {table}"));
    assert!(line.contains("continues Long talk #2"), "{line}");
    assert_eq!(
        table.lines().filter(|l| l.contains("Long talk")).count(),
        1,
        "one row per conversation: {table}"
    );

    for ended in [&root.id, &second.id] {
        let shown = env.ok(&["show", ended]);
        assert!(
            shown.contains(&format!("continued in {} (Long talk #3)", third.id)),
            "{shown}"
        );
    }
    assert!(!env.ok(&["show", &third.id]).contains("continued in"));
}

/// Web-search syntax: a leading `-word` excludes it, `NOT` still works, and a query that
/// starts with `-` is a query, not an unknown option; options still parse around it.
#[test]
fn search_takes_web_search_exclusions() {
    let env = Env::new();
    let s = seed(&env);
    let hits = |args: &[&str]| -> Vec<String> {
        let mut full = vec!["search", "--json"];
        full.extend_from_slice(args);
        env.json(&full)["hits"]
            .as_array()
            .unwrap()
            .iter()
            .map(|h| h["message_id"].as_str().unwrap().to_owned())
            .collect()
    };
    // "parser" is in several messages; "mismatched" only in the first question.
    let all = hits(&["parser"]);
    assert!(all.len() >= 2 && all.contains(&s.build_first), "{all:?}");
    let without = hits(&["parser", "-mismatched"]);
    assert_eq!(without.len(), all.len() - 1, "{without:?}");
    assert!(!without.contains(&s.build_first));
    assert_eq!(hits(&["parser -mismatched"]), without);
    assert_eq!(hits(&["parser", "NOT", "mismatched"]), without);
    // A query starting with `-` is accepted as a query.
    assert_eq!(hits(&["-mismatched", "parser"]), without);
    assert!(hits(&["-mismatched"]).is_empty());
    let out = env.run(&["search", "-mismatched"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert!(stdout(&out).contains("no matches"), "{}", stdout(&out));
    // Options before, between and after the words still are options.
    assert_eq!(hits(&["-n", "1", "parser"]).len(), 1);
    assert_eq!(hits(&["parser", "-n", "1"]).len(), 1);
    assert_eq!(hits(&["parser", "-n1", "-mismatched"]).len(), 1);
    assert_eq!(hits(&["--limit=1", "-nothing", "parser"]).len(), 1);
    assert_eq!(hits(&["--limit=1", "parser", "-nothing"]).len(), 1);
    let assistant = hits(&["parser", "--role", "assistant", "-mismatched"]);
    assert!(!assistant.is_empty() && assistant.len() < without.len());
    // `--` still ends the options.
    assert_eq!(hits(&["--", "parser", "-mismatched"]), without);
    assert_eq!(env.run(&["search", "-n"]).status.code(), Some(2));
    assert_eq!(
        env.run(&["search", "parser", "-n", "0"]).status.code(),
        Some(2)
    );
}

/// `prune --yes` with nothing to prune says so without claiming a dry run.
#[test]
fn prune_with_nothing_to_prune_is_not_a_dry_run() {
    let env = Env::new();
    seed(&env);
    let text = env.ok(&["prune", "--older-than", "90d", "--yes"]);
    assert!(!text.contains("dry run"), "{text}");
    assert!(text.contains("0 sessions pruned"), "{text}");
    let json = env.json(&["prune", "--older-than", "90d", "--yes", "--json"]);
    assert_eq!(json["dry_run"], false, "{json}");
    // A real dry run still says it is one.
    let text = env.ok(&["prune", "--older-than", "90d", "--dry-run"]);
    assert!(text.contains("(dry run)"), "{text}");
}

/// Every cost in a column has the same number of decimals, and the column is aligned
/// on the right, so `$0.004` never stands beside `$0.0035`.
#[test]
fn costs_in_a_column_share_one_format() {
    let env = Env::new();
    let (sessions, _) = env.services();
    for (source, cost) in [("cli", 0.004), ("tui", 0.0035), ("telegram", 1.5)] {
        let s = sessions
            .create(scribe_session::NewSession {
                source: source.into(),
                ..Default::default()
            })
            .unwrap();
        sessions
            .add_usage(
                &s.id,
                &scribe_session::UsageDelta {
                    api_calls: 1,
                    cost_usd: cost,
                    ..Default::default()
                },
            )
            .unwrap();
    }
    for args in [&["list"][..], &["stats", "--by", "source"][..]] {
        let table = env.ok(args);
        let costs: Vec<(usize, &str)> = table
            .lines()
            .skip(1)
            .filter_map(|line| {
                let at = line.find('$')?;
                let end = line[at..]
                    .find(char::is_whitespace)
                    .map_or(line.len(), |n| at + n);
                Some((end, &line[at..end]))
            })
            .collect();
        assert!(costs.len() >= 3, "{args:?}: {table}");
        let decimals = |c: &str| c.split('.').nth(1).map_or(0, str::len);
        assert!(
            costs.iter().all(|(_, c)| decimals(c) == 4),
            "{args:?}: {costs:?}"
        );
        assert!(
            costs.iter().all(|(end, _)| *end == costs[0].0),
            "{args:?}: not right-aligned: {table}"
        );
        assert!(
            table.contains("$0.0040") && table.contains("$0.0035"),
            "{table}"
        );
    }
}
