//! End to end: the `scribe` binary imports the agents' fixture histories from a home
//! directory (default locations and the agents' overrides), a second run changes nothing,
//! `--dry-run` writes nothing, `--watch` picks up new records, `scribe sources` lists what
//! it found, and `scribe import FILE` (a scribe export) still works.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;

#[path = "../../import/tests/common/fixture_home.rs"]
mod fixture_home;

use fixture_home::{build_db, copy_tree, fixtures, home, long_and_fine_rollouts};

struct Scribe {
    db: PathBuf,
    home: PathBuf,
    vars: Vec<(String, String)>,
}

impl Scribe {
    fn command(&self, args: &[&str]) -> Command {
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_scribe"));
        // Only what the test sets: no agent override of the machine running it leaks in.
        cmd.env_clear()
            .env("PATH", std::env::var_os("PATH").unwrap_or_default())
            .env("HOME", &self.home)
            .env("COLUMNS", "200")
            .arg("--db")
            .arg(&self.db)
            .args(args)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        for (k, v) in &self.vars {
            cmd.env(k, v);
        }
        cmd
    }

    fn run(&self, args: &[&str]) -> Output {
        self.command(args).output().unwrap()
    }

    fn ok(&self, args: &[&str]) -> String {
        let out = self.run(args);
        assert!(
            out.status.success(),
            "scribe {args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8(out.stdout).unwrap()
    }

    fn json(&self, args: &[&str]) -> Value {
        serde_json::from_str(&self.ok(args)).unwrap()
    }
}

fn setup() -> (tempfile::TempDir, Scribe) {
    let dir = tempfile::tempdir().unwrap();
    let home = home(dir.path());
    let scribe = Scribe {
        db: dir.path().join("scribe.db"),
        home,
        vars: Vec::new(),
    };
    (dir, scribe)
}

fn source<'a>(report: &'a Value, name: &str) -> &'a Value {
    report["sources"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["source"] == name)
        .unwrap()
}

#[test]
fn import_from_all_then_again_changes_nothing() {
    let (_dir, scribe) = setup();
    let first = scribe.json(&["import", "--from", "all", "--json"]);
    assert_eq!(first["dry_run"], false);
    let created: Vec<(String, u64)> = first["sources"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| {
            (
                s["source"].as_str().unwrap().to_owned(),
                s["sessions_created"].as_u64().unwrap(),
            )
        })
        .collect();
    assert_eq!(
        created,
        [
            ("claude-code".to_owned(), 7),
            ("codex".to_owned(), 4),
            ("opencode".to_owned(), 3),
            ("hermes".to_owned(), 6),
            ("gemini".to_owned(), 2),
            ("cline".to_owned(), 2),
            ("roo-code".to_owned(), 2),
            ("kilo-code".to_owned(), 1),
            ("goose".to_owned(), 3),
            ("copilot".to_owned(), 5),
            ("pi".to_owned(), 3),
            ("openclaw".to_owned(), 6),
            ("amp".to_owned(), 3),
            ("droid".to_owned(), 2),
            ("kilo".to_owned(), 1),
            ("grok".to_owned(), 1),
            ("qwen".to_owned(), 5),
            ("antigravity".to_owned(), 2),
            ("kimi".to_owned(), 4),
            ("cursor".to_owned(), 4),
            ("zed".to_owned(), 2),
            ("vscode".to_owned(), 3),
            ("crush".to_owned(), 3),
            ("kiro".to_owned(), 5),
            ("continue".to_owned(), 2),
            ("aider".to_owned(), 3),
            ("mistral-vibe".to_owned(), 4),
            ("openhands".to_owned(), 4)
        ]
    );
    let codex = source(&first, "codex");
    assert_eq!(codex["tokens"]["input"], 46_690);
    assert_eq!(codex["unpriced_messages"], 3);
    assert_eq!(codex["files_read"], 4);
    assert!(codex["skipped"]["event_msg:token_count(repeated)"].is_null());

    let second = scribe.json(&["import", "--from", "all", "--json"]);
    for s in second["sources"].as_array().unwrap() {
        assert_eq!(s["files_read"], 0, "{s}");
        assert_eq!(s["files_unchanged"], s["files"], "{s}");
        assert_eq!(s["messages_inserted"], 0, "{s}");
    }
    let human = scribe.ok(&["import", "--from", "all"]);
    assert_eq!(human.matches("nothing new").count(), 28, "{human}");

    // Imported history is Scribe history: list, show, search, stats.
    let list = scribe.json(&["list", "--all", "-n", "100", "--json"]);
    assert_eq!(list["sessions"].as_array().unwrap().len(), 92);
    let shown = scribe.ok(&["show", "1af7fc5e-8455-4414-9ccd-011d40f70b2a"]);
    assert!(shown.contains("CLAUDE.md"), "{shown}");
    let hits = scribe.json(&["search", "tmp_path", "--json"]);
    assert!(
        hits.to_string().contains("20260101_101000_d4e5f6"),
        "{hits}"
    );
    let stats = scribe.json(&["stats", "--by", "source", "--json"]);
    assert!(stats.to_string().contains("gemini"), "{stats}");
}

/// A session with sub-agents keeps a short id in `list`: its sub-agents' ids
/// (`parent:agent`) extend its own, and a prefix every match of which begins with the
/// parent's id names the parent. A sub-agent is named by its parent's short id and the
/// beginning of the rest of its id. Any other shared prefix is still ambiguous.
#[test]
fn a_session_with_sub_agents_keeps_a_short_id() {
    let (_dir, scribe) = setup();
    scribe.ok(&["import", "--from", "copilot"]);
    let parent = "7c1e2a90-3b5d-4f61-9a2e-5d8c0b4f1e37";
    let children = [
        "7c1e2a90-3b5d-4f61-9a2e-5d8c0b4f1e37:agent:call_task",
        "7c1e2a90-3b5d-4f61-9a2e-5d8c0b4f1e37:model:claude-haiku-4.5",
    ];
    let listed = scribe.json(&["list", "--all", "-n", "100", "--json"]);
    let ids: Vec<&str> = listed["sessions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["id"].as_str().unwrap())
        .collect();
    assert!(children.iter().all(|c| ids.contains(c)), "{ids:?}");

    // The table's first column, row by row, for the ids it lists.
    let short_of = |table: &str, id: &str| -> String {
        let row = table
            .lines()
            .skip(1)
            .filter_map(|line| line.split_whitespace().next())
            .filter(|short| id.starts_with(short))
            .max_by_key(|short| short.len())
            .unwrap_or_else(|| panic!("{id} not in\n{table}"));
        row.to_owned()
    };
    let table = scribe.ok(&["list", "-n", "100"]);
    let short = short_of(&table, parent);
    assert_eq!(short, "7c1e2a90-3b5", "{table}");
    for wanted in [short.as_str(), "7c1e", parent] {
        let shown = scribe.json(&["show", wanted, "--json"]);
        assert_eq!(shown["session"]["id"], parent, "{wanted}");
    }

    // With --all each sub-agent's row names it by its parent's short id, `:` and as much
    // of the rest as tells it apart; the parent's stays short.
    let table = scribe.ok(&["list", "--all", "-n", "100"]);
    assert_eq!(short_of(&table, parent), "7c1e2a90-3b5", "{table}");
    let mut paths: Vec<&str> = table
        .lines()
        .filter_map(|line| line.split_whitespace().next())
        .filter(|short| short.starts_with("7c1e2a90-3b5:"))
        .collect();
    paths.sort_unstable();
    assert_eq!(paths, ["7c1e2a90-3b5:a", "7c1e2a90-3b5:m"], "{table}");
    for (path, child) in paths.iter().zip(children) {
        let shown = scribe.json(&["show", path, "--json"]);
        assert_eq!(shown["session"]["id"], child, "{path}");
    }
    // Longer paths name them too, and so do their whole ids' prefixes.
    for (wanted, child) in [
        ("7c1e:agent:call", children[0]),
        ("7c1e2a90-3b5d-4f61-9a2e-5d8c0b4f1e37:m", children[1]),
    ] {
        let shown = scribe.json(&["show", wanted, "--json"]);
        assert_eq!(shown["session"]["id"], child, "{wanted}");
    }

    // Two sub-agents share `parent:`, and neither begins the other: ambiguous, whether the
    // parent is named whole or by its short id; a path to no sub-session is no session.
    for wanted in [format!("{parent}:"), "7c1e2a90-3b5:".to_owned()] {
        let out = scribe.run(&["show", &wanted]);
        assert_eq!(out.status.code(), Some(1));
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(err.contains("matches 2 sessions"), "{wanted}: {err}");
    }
    let out = scribe.run(&["show", "7c1e2a90-3b5:zz"]);
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("no session matches"), "{err}");
}

/// Google Antigravity keeps no usage: its sessions show none recorded (`—` in the tables,
/// words in `show` and the Markdown export) rather than `0` tokens and `$0.00`, beside a
/// session whose agent counted its usage.
#[test]
fn a_session_whose_agent_keeps_no_usage_shows_none_recorded() {
    let (_dir, scribe) = setup();
    scribe.ok(&["import", "--from", "antigravity"]);
    scribe.ok(&["import", "--from", "droid"]);
    let id = "8e4b2c1d-6f3a-4d5e-9b7c-0a1f2e3d4c5b";
    let list = scribe.json(&["list", "-n", "100", "--json"]);
    let recorded: Vec<(&str, &str, bool)> = list["sessions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| {
            (
                s["source"].as_str().unwrap(),
                s["id"].as_str().unwrap(),
                s["usage_recorded"].as_bool().unwrap(),
            )
        })
        .collect();
    // Droid's drift fixture carries no usage either; its other session does.
    assert_eq!(
        recorded,
        [
            ("antigravity", id, false),
            ("antigravity", "ag-stage0-cli-small", false),
            ("droid", "6f0b2d1e-4c3a-4e5b-9a8d-1c2e3f4a5b6c", true),
            ("droid", "droid_drift", false),
        ]
    );

    let table = scribe.ok(&["list", "-n", "100"]);
    let row = table
        .lines()
        .find(|l| id.starts_with(l.split_whitespace().next().unwrap_or("-")))
        .unwrap_or_else(|| panic!("{table}"));
    let cells: Vec<&str> = row.split_whitespace().collect();
    // ID, TITLE, SOURCE, MSGS, TOKENS, COST, …
    assert_eq!(cells[2..6], ["antigravity", "8", "—", "—"], "{row}");
    let droid = table
        .lines()
        .find(|l| l.starts_with("6f0b2d1e-4c3"))
        .unwrap_or_else(|| panic!("{table}"));
    assert!(droid.contains('$') && !droid.contains('—'), "{droid}");

    let shown = scribe.ok(&["show", id]);
    assert!(
        shown.contains("\n8 messages · 4 tool calls · no usage recorded\n"),
        "{shown}"
    );
    let markdown = scribe.ok(&["export", id, "--format", "markdown"]);
    assert!(
        markdown.contains("\n- 8 messages · no usage recorded\n"),
        "{markdown}"
    );

    let stats = scribe.ok(&["stats", "--by", "source"]);
    let row = |key: &str| -> Vec<String> {
        stats
            .lines()
            .find(|l| l.starts_with(key))
            .unwrap_or_else(|| panic!("{key}: {stats}"))
            .split_whitespace()
            .map(str::to_owned)
            .collect()
    };
    assert_eq!(
        row("antigravity"),
        ["antigravity", "2", "0", "—", "—", "—", "—", "—", "—"],
        "{stats}"
    );
    assert!(row("droid").iter().all(|c| c != "—"), "{stats}");
    assert!(row("total")[8].starts_with('$'), "{stats}");
}

/// Crush keeps a session's cost but not its tokens (only the last call's): its sessions
/// show the cost and say the tokens were not recorded, rather than `0` tokens.
#[test]
fn a_session_whose_agent_keeps_only_a_cost_shows_no_tokens_recorded() {
    let (_dir, scribe) = setup();
    scribe.ok(&["import", "--from", "crush"]);
    let id = "c7a1e3f0-2b4d-4e6f-8a1c-3d5e7f9a1b2c";
    let shown = scribe.ok(&["show", id]);
    assert!(
        shown.contains("\n5 messages · 3 tool calls · no tokens recorded · $0.042\n"),
        "{shown}"
    );
    let markdown = scribe.ok(&["export", id, "--format", "markdown"]);
    assert!(
        markdown.contains("\n- 5 messages · no tokens recorded · $0.042\n"),
        "{markdown}"
    );
    let table = scribe.ok(&["list", "-n", "100"]);
    let row = table
        .lines()
        .find(|l| l.starts_with("c7a1e3f0-2b4"))
        .unwrap_or_else(|| panic!("{table}"));
    let cells: Vec<&str> = row.split_whitespace().collect();
    // ID, TITLE (four words), SOURCE, MSGS, TOKENS, COST, …
    assert!(
        cells.windows(4).any(|w| w == ["crush", "5", "—", "$0.042"]),
        "{row}"
    );
    let stats = scribe.ok(&["stats", "--by", "source"]);
    let crush: Vec<&str> = stats
        .lines()
        .find(|l| l.starts_with("crush"))
        .unwrap_or_else(|| panic!("{stats}"))
        .split_whitespace()
        .collect();
    assert_eq!(
        crush,
        ["crush", "3", "5", "—", "—", "—", "—", "—", "$0.053"],
        "{stats}"
    );
}

/// In a terminal narrower than 100 columns `list` drops its FIRST MESSAGE column and names
/// an untitled session by how it began, in quotes, where its title would be; wider, the
/// column is there and the title says `(untitled)`.
#[test]
fn a_narrow_list_names_untitled_sessions_by_their_first_message() {
    let (_dir, mut scribe) = setup();
    scribe.ok(&["import", "--from", "antigravity"]);
    let wide = scribe.ok(&["list"]);
    let header = wide.lines().next().unwrap();
    assert!(header.contains("FIRST MESSAGE"), "{wide}");
    assert!(
        wide.lines()
            .any(|l| l.contains("(untitled)") && l.contains("Fix the failing date test")),
        "{wide}"
    );
    scribe.vars.push(("COLUMNS".to_owned(), "80".to_owned()));
    let narrow = scribe.ok(&["list"]);
    let header = narrow.lines().next().unwrap();
    assert_eq!(
        header.split_whitespace().collect::<Vec<_>>(),
        ["ID", "TITLE", "SOURCE", "MSGS", "TOKENS", "COST", "ACTIVE"],
        "{narrow}"
    );
    assert!(narrow.lines().all(|l| l.chars().count() <= 80), "{narrow}");
    let row = narrow
        .lines()
        .find(|l| l.starts_with("8e4b2c1d-6f3"))
        .unwrap_or_else(|| panic!("{narrow}"));
    assert!(row.contains("“Fix the"), "{row}");
    assert!(!row.contains("(untitled)"), "{row}");
}

/// A `--source` or `--model` no session has (a typo) still finds nothing, but `list`,
/// `stats` and `search` say so on stderr and name what was likely meant, or what there is;
/// `export --all --source` of one is an error that writes nothing.
#[test]
fn a_filter_value_no_session_has_is_named_with_what_was_meant() {
    let (_dir, scribe) = setup();
    scribe.ok(&["import", "--from", "antigravity"]);
    scribe.ok(&["import", "--from", "droid"]);
    let run = |args: &[&str]| {
        let out = scribe.run(args);
        assert!(out.status.success(), "{args:?}");
        (
            String::from_utf8(out.stdout).unwrap(),
            String::from_utf8(out.stderr).unwrap(),
        )
    };
    let (stdout, stderr) = run(&["list", "--source", "antigravty"]);
    assert_eq!(stdout, "no sessions\n");
    assert_eq!(
        stderr,
        "scribe: no session has source \"antigravty\"; did you mean \"antigravity\"?\n"
    );
    let (stdout, stderr) = run(&["stats", "--source", "nope", "--model", "claude-sonnet"]);
    assert!(
        stdout.starts_with("no usage matches the filters"),
        "{stdout}"
    );
    assert_eq!(
        stderr,
        "scribe: no session has source \"nope\"; sources: antigravity, droid\n\
         scribe: no session has model \"claude-sonnet\"; did you mean \"claude-sonnet-4.5\"?\n"
    );
    let (stdout, stderr) = run(&["search", "date", "--source", "Droidd"]);
    assert_eq!(stdout, "no matches for \"date\"\n");
    assert!(stderr.contains("did you mean \"droid\"?"), "{stderr}");
    // `export --all` of a source no session has writes nothing: a backup stays.
    let backup = scribe.home.join("backup.jsonl");
    std::fs::write(&backup, "the old backup").unwrap();
    let out = scribe.run(&[
        "export",
        "--all",
        "--source",
        "antigravty",
        "-o",
        backup.to_str().unwrap(),
    ]);
    assert_eq!(out.status.code(), Some(1));
    assert_eq!(
        String::from_utf8_lossy(&out.stderr),
        "scribe: nothing was exported: no session has source \"antigravty\"; did you mean \
         \"antigravity\"?\n"
    );
    assert_eq!(std::fs::read_to_string(&backup).unwrap(), "the old backup");
    // A value sessions have but the other filters rule out is no typo: nothing is said.
    let (stdout, stderr) = run(&["list", "--source", "droid", "--title", "zzz"]);
    assert_eq!(stdout, "no sessions\n");
    assert_eq!(stderr, "");
}

/// A `--dir` no session worked in finds nothing, and `list`, `stats` and `search` say
/// why: the folders under it that sessions worked in (`--dir` is that directory alone),
/// else the directory it was likely a typo of.
#[test]
fn a_directory_no_session_worked_in_is_named_with_the_folders_under_it() {
    let (_dir, scribe) = setup();
    scribe.ok(&["import", "--from", "cursor"]);
    let run = |args: &[&str]| {
        let out = scribe.run(args);
        assert!(out.status.success(), "{args:?}");
        (
            String::from_utf8(out.stdout).unwrap(),
            String::from_utf8(out.stderr).unwrap(),
        )
    };
    let (stdout, stderr) = run(&["list", "--dir", "/home/dev"]);
    assert_eq!(stdout, "no sessions\n");
    assert_eq!(
        stderr,
        "scribe: no session worked in /home/dev itself; 2 sessions worked in folders under it \
         (give one to --dir): /home/dev/date parser (1), /home/dev/shop (1)\n"
    );
    let (stdout, stderr) = run(&["stats", "--dir", "/home/dev/date parsr"]);
    assert!(stdout.starts_with("no usage matches"), "{stdout}");
    assert_eq!(
        stderr,
        "scribe: no session worked in /home/dev/date parsr; did you mean \"/home/dev/date parser\"?\n"
    );
    let (stdout, stderr) = run(&["search", "timezone", "--dir", "/srv"]);
    assert_eq!(stdout, "no matches for \"timezone\"\n");
    assert_eq!(stderr, "scribe: no session worked in /srv\n");
    // The directory sessions worked in, with filters that rule them out: nothing to say.
    let (stdout, stderr) = run(&["list", "--dir", "/home/dev/date parser", "--title", "zzz"]);
    assert_eq!(stdout, "no sessions\n");
    assert_eq!(stderr, "");
    let (stdout, _) = run(&["list", "--dir", "/home/dev/date parser"]);
    assert!(stdout.contains("Fix the timezone bug"), "{stdout}");
}

/// A conversation of Cursor's command-line agent reads as the user had it: their words
/// without the context Cursor wraps them in, and a reasoning the provider redacted said
/// to be so (in `show` and in the Markdown export) rather than shown empty.
#[test]
fn a_cursor_agent_conversation_reads_as_the_user_had_it() {
    let (_dir, scribe) = setup();
    scribe.ok(&["import", "--from", "cursor"]);
    let shown = scribe.ok(&["show", "9c2e4b7a"]);
    assert!(
        shown.contains("Why does `cargo build` fail in the shop crate?"),
        "{shown}"
    );
    assert!(
        !shown.contains("user_query") && !shown.contains("user_info"),
        "{shown}"
    );
    assert!(
        shown.contains("thinking: (redacted by the provider)"),
        "{shown}"
    );
    assert!(shown.contains("no usage recorded"), "{shown}");
    let markdown = scribe.ok(&["export", "9c2e4b7a", "--format", "markdown"]);
    assert!(
        markdown.contains("> _thinking:_ (redacted by the provider)"),
        "{markdown}"
    );
}

/// The output the README shows after `$ scribe COMMAND` in its import tour: the lines
/// up to the next blank line or the end of the block.
fn readme_output(command: &str) -> String {
    let readme =
        std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("../../README.md"))
            .unwrap();
    let start = readme
        .find(&format!("\n$ scribe {command}\n"))
        .unwrap_or_else(|| panic!("the README shows `$ scribe {command}`"));
    readme[start..]
        .lines()
        .skip(2)
        .take_while(|line| !line.is_empty() && !line.starts_with("```"))
        .map(|line| format!("{line}\n"))
        .collect()
}

/// The README's import tour is a real run on the fixture home (`/home/me` standing for
/// it): the first `import --from all` and `stats --by source` print what it shows, so the
/// page cannot drift from the CLI (it showed `$0.00` beside `$0.0945` after every cost
/// column had come to share one format).
#[test]
fn the_readme_import_tour_is_what_the_fixtures_print() {
    let (_dir, scribe) = setup();
    let home = scribe.home.to_str().unwrap().to_owned();
    let imported = scribe
        .ok(&["import", "--from", "all"])
        .replace(&home, "/home/me");
    assert_eq!(imported, readme_output("import --from all"));
    let stats = scribe.ok(&["stats", "--by", "source"]);
    assert_eq!(stats, readme_output("stats --by source"));
}

/// Usage of a model the built-in catalog does not price is priced by the user's catalog
/// file: `models.toml` in the config directory, or the file `SCRIBE_MODELS` names (which
/// wins), history imported before included; a broken file stops the import before the
/// database is created, naming the file. The codex fixtures' `gpt-5.3-codex` costs what
/// ccusage 20.0.24 says (`ccusage codex session --offline`: $0.06091155 + $0.01089375).
#[test]
fn a_catalog_file_prices_the_models_the_builtin_one_does_not() {
    let (dir, mut scribe) = setup();
    let builtin = scribe.json(&["import", "--from", "codex", "--json"]);
    let codex = source(&builtin, "codex");
    assert_eq!(codex["unpriced_messages"], 3);
    assert_eq!(codex["repriced_messages"], 0);
    let builtin_cost = codex["cost_usd"].as_f64().unwrap();
    assert!((builtin_cost - 0.071_805_3).abs() < 1e-9, "{builtin_cost}");
    // Until those models have a price, every report says what their cost leaves out
    // rather than show their usage as free.
    let note = "+? leaves out usage of models without a price (2 sessions); give them one in \
                a model catalog (see `scribe import --help`) and import again";
    let stats = scribe.json(&["stats", "--json"]);
    assert_eq!(stats["totals"]["unpriced_sessions"], 2, "{stats}");
    for model in ["fake-model", "gpt-5.6-luna"] {
        let row = stats["rows"]
            .as_array()
            .unwrap()
            .iter()
            .find(|r| r["key"] == model);
        assert_eq!(row.unwrap()["unpriced_sessions"], 1, "{model} in {stats}");
    }
    let table = scribe.ok(&["stats"]);
    let cost_of = |table: &str, key: &str| -> String {
        let line = table.lines().find(|l| l.starts_with(key));
        let line = line.unwrap_or_else(|| panic!("{key} in {table}"));
        line.split_whitespace()
            .last()
            .unwrap_or_default()
            .to_owned()
    };
    assert_eq!(cost_of(&table, "gpt-5.6-luna"), "?", "{table}");
    // session-alpha switched models: each is priced and counted as it was used.
    assert_eq!(cost_of(&table, "gpt-5.3-codex"), "$0.0687", "{table}");
    assert_eq!(cost_of(&table, "gpt-5.2-codex"), "$0.0031", "{table}");
    assert_eq!(cost_of(&table, "total"), "$0.0718+?", "{table}");
    assert!(table.ends_with(&format!("{note}\n")), "{table}");
    let list = scribe.json(&["list", "--json"]);
    let luna = list["sessions"].as_array().unwrap().iter();
    let luna: Vec<&Value> = luna.filter(|s| s["model"] == "gpt-5.6-luna").collect();
    assert_eq!(luna[0]["cost_status"], "unknown", "{list}");
    assert_eq!(luna[0]["cost_partial"], true, "{list}");
    let luna_id = luna[0]["id"].as_str().unwrap().to_owned();
    assert!(scribe.ok(&["list"]).ends_with(&format!("{note}\n")));
    let shown = scribe.ok(&["show", &luna_id]);
    assert!(
        shown.contains(" · $0.00 + unknown (models without a price)\n"),
        "{shown}"
    );
    let told = Scribe {
        db: dir.path().join("told.db"),
        home: scribe.home.clone(),
        vars: Vec::new(),
    };
    told.ok(&["import", "--from", "codex"]);

    // Round prices ($ per million tokens) for the two models no catalog entry has.
    let prices = |input: f64, output: f64, cache_read: f64| {
        format!(
            "provider = \"test\"\ncontext_window = 100000\nmax_output_tokens = 1000\n\
             pricing = {{ input_per_mtok = {input:?}, output_per_mtok = {output:?}, \
             cache_read_per_mtok = {cache_read:?} }}\n"
        )
    };
    let config = scribe.home.join(".config/scribe");
    std::fs::create_dir_all(&config).unwrap();
    std::fs::write(
        config.join("models.toml"),
        format!(
            "[[models]]\nid = \"fake-model\"\n{}\n[[models]]\nid = \"gpt-5.6-luna\"\n{}",
            prices(1000.0, 2000.0, 100.0),
            prices(10.0, 20.0, 1.0)
        ),
    )
    .unwrap();
    // A dry run says what it would price, and prices nothing.
    let dry = scribe.json(&["import", "--from", "codex", "--dry-run", "--json"]);
    assert_eq!(source(&dry, "codex")["repriced_messages"], 3, "{dry}");
    let said = told.ok(&["import", "--from", "codex", "--dry-run"]);
    assert!(
        said.contains("  would price 3 messages of 2 sessions imported before"),
        "{said}"
    );
    // Every file is unchanged; what was stored without a price is priced now.
    let report = scribe.json(&["import", "--from", "codex", "--json"]);
    let codex = source(&report, "codex");
    assert_eq!(codex["files_read"], 0, "{codex}");
    assert_eq!(codex["repriced_messages"], 3, "{codex}");
    assert_eq!(codex["repriced_sessions"], 2, "{codex}");
    // What the stored tokens cost at those prices (reasoning at the output price).
    let stats = scribe.json(&["stats", "--by", "model", "--json"]);
    let at = |model: &str, [input, output, cache_read]: [f64; 3]| {
        let row = stats["rows"]
            .as_array()
            .unwrap()
            .iter()
            .find(|r| r["key"] == model)
            .unwrap_or_else(|| panic!("{model} in {stats}"));
        let t = |k: &str| row["tokens"][k].as_f64().unwrap();
        let cost = (t("input") * input
            + (t("output") + t("reasoning")) * output
            + t("cache_read") * cache_read)
            / 1e6;
        assert!(cost > 0.0, "{row}");
        assert!(
            (row["cost_usd"].as_f64().unwrap() - cost).abs() < 1e-9,
            "{row}"
        );
        cost
    };
    let repriced =
        at("fake-model", [1000.0, 2000.0, 100.0]) + at("gpt-5.6-luna", [10.0, 20.0, 1.0]);
    let cost = codex["repriced_cost_usd"].as_f64().unwrap();
    assert!((cost - repriced).abs() < 1e-9, "{cost} != {repriced}");
    let total = stats["totals"]["cost_usd"].as_f64().unwrap();
    assert!((total - (builtin_cost + repriced)).abs() < 1e-9, "{stats}");
    let said = told.ok(&["import", "--from", "codex"]);
    assert!(
        said.contains(
            "  nothing new\n  priced 3 messages of 2 sessions imported before their models \
             had a price: $0.34\n"
        ),
        "{said}"
    );
    // Under the same prices there is nothing left to look at.
    let again = scribe.json(&["import", "--from", "codex", "--json"]);
    assert_eq!(source(&again, "codex")["repriced_messages"], 0);
    // Priced, nothing is left out any more.
    assert_eq!(stats["totals"]["unpriced_sessions"], 0, "{stats}");
    let table = scribe.ok(&["stats"]);
    assert!(!table.contains('?'), "{table}");
    assert!(!scribe.ok(&["list"]).contains("+?"));
    let shown = scribe.ok(&["show", &luna_id]);
    assert!(!shown.contains("unknown"), "{shown}");

    // SCRIBE_MODELS wins over the config directory's file (broken now, and not read).
    std::fs::write(config.join("models.toml"), "models = 3\n").unwrap();
    let named = dir.path().join("prices.json");
    std::fs::write(
        &named,
        r#"{"models": [{"id": "fake-model", "provider": "test", "context_window": 1000,
            "max_output_tokens": 100, "pricing": {"input_per_mtok": 1000, "output_per_mtok": 2000,
            "cache_read_per_mtok": 100}}]}"#,
    )
    .unwrap();
    scribe.db = dir.path().join("named.db");
    scribe
        .vars
        .push(("SCRIBE_MODELS".to_owned(), named.display().to_string()));
    let report = scribe.json(&["import", "--from", "codex", "--json"]);
    let codex = source(&report, "codex");
    // gpt-5.6-luna is unpriced again; fake-model costs what the named file says.
    let unpriced = codex["unpriced_messages"].as_u64().unwrap();
    assert!(unpriced > 0 && unpriced < 3, "{codex}");
    let cost = codex["cost_usd"].as_f64().unwrap();
    let fake = at("fake-model", [1000.0, 2000.0, 100.0]);
    assert!((cost - (builtin_cost + fake)).abs() < 1e-9, "{codex}");

    // A file that cannot be used: the import stops before the database is created.
    std::fs::write(
        &named,
        r#"{"models": [{"id": "gpt-5", "pricing": {"input_per_mtok": -1}}]}"#,
    )
    .unwrap();
    scribe.db = dir.path().join("refused.db");
    let out = scribe.run(&["import", "--from", "codex"]);
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.starts_with("scribe: nothing was imported: "), "{err}");
    assert!(err.contains(&named.display().to_string()), "{err}");
    assert!(err.contains("\"gpt-5\""), "{err}");
    assert!(!scribe.db.exists(), "{err}");
    scribe.vars.clear();
    let out = scribe.run(&["import", "--from", "codex"]);
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains(".config/scribe/models.toml"), "{err}");
    assert!(!scribe.db.exists(), "{err}");
}

#[test]
fn dry_run_writes_nothing() {
    let (_dir, scribe) = setup();
    let report = scribe.json(&["import", "--from", "claude-code", "--dry-run", "--json"]);
    assert_eq!(report["dry_run"], true);
    assert_eq!(source(&report, "claude-code")["messages_inserted"], 36);
    let out = scribe.run(&["import", "--from", "claude-code", "--dry-run"]);
    let human = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success() && human.contains("would import"),
        "{human}"
    );
    // Into a database not created yet: it counts against an empty store, says so, and
    // creates nothing (no file, no `-wal`/`-shm`).
    let note = String::from_utf8_lossy(&out.stderr);
    assert!(
        note.contains("no database at") && note.contains("dry run"),
        "{note}"
    );
    let dir = scribe.db.parent().unwrap();
    let names = |dir: &Path| -> Vec<String> {
        std::fs::read_dir(dir)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .filter(|name| name.starts_with("scribe.db"))
            .collect()
    };
    assert!(names(dir).is_empty(), "{:?}", names(dir));
    // And a real import afterwards reads every file.
    let report = scribe.json(&["import", "--from", "claude-code", "--json"]);
    assert_eq!(source(&report, "claude-code")["files_read"], 6);
}

#[test]
fn dry_run_counts_only_what_would_be_new() {
    let (dir, scribe) = setup();
    let counts = |report: &Value, name: &str| {
        let s = source(report, name);
        ["sessions_created", "messages_inserted", "messages_replayed"]
            .map(|k| s[k].as_u64().unwrap())
    };
    // On an empty database: exactly what the import then writes.
    let dry = scribe.json(&["import", "--from", "all", "--dry-run", "--json"]);
    let real = scribe.json(&["import", "--from", "all", "--json"]);
    for name in ["claude-code", "codex", "opencode", "hermes", "gemini"] {
        assert_eq!(counts(&dry, name), counts(&real, name), "{name}");
    }
    // A file that grew by two messages (into a database of its own): the dry run reads
    // the new records and reports two new messages, not everything it read; the import
    // then writes just those.
    let scribe = Scribe {
        db: dir.path().join("grown.db"),
        home: scribe.home.clone(),
        vars: Vec::new(),
    };
    let root = dir.path().join("live");
    std::fs::create_dir_all(&root).unwrap();
    let fixture = std::fs::read_to_string(
        fixtures().join("codex/sessions/2026/09/30/rollout-2026-09-30T08-39-00-01a0f21c-5c40-7f72-9aa9-ef0b43570680.jsonl"),
    )
    .unwrap();
    let lines: Vec<&str> = fixture.lines().collect();
    let file = root.join("rollout-2026-09-30T08-39-00-01a0f21c-5c40-7f72-9aa9-ef0b43570680.jsonl");
    std::fs::write(&file, lines[..8].join("\n") + "\n").unwrap();
    let path = root.to_str().unwrap();
    scribe.ok(&["import", "--from", "codex", path]);
    std::fs::write(&file, lines.join("\n") + "\n").unwrap();
    let dry = scribe.json(&["import", "--from", "codex", path, "--dry-run", "--json"]);
    let s = source(&dry, "codex");
    assert_eq!(s["messages_inserted"], 2, "{s}");
    assert_eq!(s["sessions_created"], 0, "{s}");
    assert_eq!(s["sessions_updated"], 1, "{s}");
    let human = scribe.ok(&["import", "--from", "codex", path, "--dry-run"]);
    assert!(
        human.contains("would import 1 session (0 new), 2 messages (2 new)"),
        "{human}"
    );
    let real = scribe.json(&["import", "--from", "codex", path, "--json"]);
    assert_eq!(source(&real, "codex")["messages_inserted"], 2);
    let again = scribe.ok(&["import", "--from", "codex", path, "--dry-run"]);
    assert!(again.contains("nothing new"), "{again}");
}

/// `claude --resume` writes a new file that first replays the earlier conversation. Read
/// together with the original, the replayed calls are stored once (with the original), and
/// the import's own summary, dry run or not, counts their tokens and cost once too: it says
/// what the store then holds, not twice that. A file that holds only the replay adds no
/// session.
#[test]
fn a_resumed_copy_of_a_conversation_is_not_counted_twice_in_the_summary() {
    let (_dir, scribe) = setup();
    let folder = scribe.home.join(".claude/projects/-work-proj");
    let old_id = "609b44ad-7c18-4745-a70b-784281dce85e";
    let new_id = "77777777-7c18-4745-a70b-784281dce85e";
    let original = std::fs::read_to_string(folder.join(format!("{old_id}.jsonl"))).unwrap();
    let replay: String = original
        .lines()
        .take(18)
        .map(|l| l.replace(old_id, new_id) + "\n")
        .collect();
    std::fs::write(folder.join(format!("{new_id}.jsonl")), replay).unwrap();
    let path = folder.to_str().unwrap();
    let counted = |report: &Value| {
        let s = source(report, "claude-code");
        (
            s["tokens"].clone(),
            s["cost_usd"].as_f64().unwrap(),
            s["messages_replayed"].clone(),
        )
    };
    let dry = scribe.json(&[
        "import",
        "--from",
        "claude-code",
        path,
        "--dry-run",
        "--json",
    ]);
    let real = scribe.json(&["import", "--from", "claude-code", path, "--json"]);
    let stats = scribe.json(&["stats", "--json"]);
    let held = (
        stats["totals"]["tokens"].clone(),
        stats["totals"]["cost_usd"].as_f64().unwrap(),
    );
    assert_eq!(held.0["total"], 324, "{stats}");
    // The resumed file went no further than its replay: the list shows the conversation,
    // not an empty continuation of it.
    let listed = scribe.json(&["list", "--json"]);
    let ids: Vec<&str> = listed["sessions"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|s| s["id"].as_str())
        .collect();
    assert_eq!(ids, [old_id], "{listed}");
    for report in [&dry, &real] {
        let (tokens, cost, replayed) = counted(report);
        assert_eq!(replayed, 3, "{report}");
        assert_eq!(tokens, held.0, "{report}");
        assert!((cost - held.1).abs() < 1e-12, "{cost} against {}", held.1);
    }
    // The human summary says the same (into a database of its own).
    let scribe = Scribe {
        db: scribe.db.with_file_name("human.db"),
        home: scribe.home.clone(),
        vars: Vec::new(),
    };
    let human = scribe.ok(&["import", "--from", "claude-code", path]);
    assert!(
        human.contains("3 messages already held by the session they were replayed from")
            && human.contains("  324 tokens (input 170,"),
        "{human}"
    );
}

#[test]
fn agents_overrides_and_paths_choose_where_to_read() {
    let (dir, mut scribe) = setup();
    // CLAUDE_CONFIG_DIR lists several roots, comma-separated.
    let a = dir.path().join("a");
    let b = dir.path().join("b");
    copy_tree(
        &fixtures().join("claude/projects/-work-proj"),
        &a.join("projects/-work-proj"),
    );
    copy_tree(
        &fixtures().join("claude/projects/-path-to-Demo"),
        &b.join("projects/-path-to-Demo"),
    );
    scribe.vars.push((
        "CLAUDE_CONFIG_DIR".into(),
        format!("{}, {}", a.display(), b.display()),
    ));
    let report = scribe.json(&["import", "--from", "claude-code", "--json"]);
    assert_eq!(source(&report, "claude-code")["files"], 3);
    // CODEX_HOME moves Codex's home; a PATH replaces the default location.
    let codex_home = dir.path().join("codex-home");
    copy_tree(
        &fixtures().join("codex/sessions/project-alpha"),
        &codex_home.join("sessions"),
    );
    scribe
        .vars
        .push(("CODEX_HOME".into(), codex_home.display().to_string()));
    let report = scribe.json(&["import", "--from", "codex", "--json"]);
    assert_eq!(source(&report, "codex")["files"], 1);
    let path = fixtures().join("codex/sessions/2026");
    let report = scribe.json(&[
        "import",
        "--from",
        "codex",
        path.to_str().unwrap(),
        "--json",
    ]);
    assert_eq!(source(&report, "codex")["files"], 2);
    // OPENCODE_DATA_DIR (ccusage's override) names the data directory, in place of
    // XDG_DATA_HOME's opencode folder.
    let data = dir.path().join("oc-data");
    build_db("opencode/opencode.sql", &data.join("opencode.db"));
    scribe
        .vars
        .push(("OPENCODE_DATA_DIR".into(), data.display().to_string()));
    let report = scribe.json(&["import", "--from", "opencode", "--json"]);
    assert_eq!(source(&report, "opencode")["files"], 1);
    assert_eq!(source(&report, "opencode")["sessions_created"], 1);
    // OPENCODE_DB names the database file, and wins over the directory.
    let oc = dir.path().join("elsewhere/opencode-dev.db");
    build_db("opencode/opencode.sql", &oc);
    std::fs::remove_file(data.join("opencode.db")).unwrap();
    scribe
        .vars
        .push(("OPENCODE_DB".into(), oc.display().to_string()));
    let report = scribe.json(&["import", "--from", "opencode", "--json"]);
    assert_eq!(source(&report, "opencode")["files"], 1);
    // The same sessions, so nothing new.
    assert_eq!(source(&report, "opencode")["sessions_created"], 0);
}

#[test]
fn usage_errors_exit_2_and_export_files_still_import() {
    let (dir, scribe) = setup();
    for args in [
        &["import", "--from", "all", "/tmp"][..],
        &["import"][..],
        &["import", "a.json", "b.json"][..],
        &["import", "--dry-run", "a.json"][..],
        &["import", "--from", "nobody"][..],
    ] {
        let out = scribe.run(args);
        assert_eq!(
            out.status.code(),
            Some(2),
            "{args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
    // `scribe import FILE` reads a scribe export, as before.
    scribe.ok(&["import", "--from", "hermes"]);
    let export = dir.path().join("export.json");
    scribe.ok(&["export", "--all", "--output", export.to_str().unwrap()]);
    let other = Scribe {
        db: dir.path().join("other.db"),
        home: scribe.home.clone(),
        vars: Vec::new(),
    };
    let out = other.ok(&["import", export.to_str().unwrap()]);
    assert!(out.contains("6 imported, 0 skipped, 0 failed"), "{out}");
}

#[test]
fn malformed_lines_are_reported_and_the_rest_imported() {
    let (dir, scribe) = setup();
    let root = dir.path().join("bad");
    let good = std::fs::read_to_string(
        fixtures().join("codex/sessions/2026/09/30/rollout-2026-09-30T08-39-00-01a0f21c-5c40-7f72-9aa9-ef0b43570680.jsonl"),
    )
    .unwrap();
    let mut lines: Vec<&str> = good.lines().collect();
    lines.insert(3, "{broken");
    std::fs::create_dir_all(&root).unwrap();
    let file = root.join("rollout-2026-09-30T08-39-00-01a0f21c-5c40-7f72-9aa9-ef0b43570680.jsonl");
    std::fs::write(&file, lines.join("\n") + "\n").unwrap();
    let out = scribe.ok(&["import", "--from", "codex", root.to_str().unwrap()]);
    assert!(
        out.contains(&format!("malformed {}:4:", file.display())),
        "{out}"
    );
    let list = scribe.json(&["list", "--json"]);
    assert_eq!(list["sessions"][0]["tokens"]["input"], 170);
}

#[test]
fn sources_lists_the_histories_and_their_last_import() {
    let (_dir, scribe) = setup();
    // `sources` reads the database, which it never creates.
    scribe.ok(&["db", "migrate"]);
    let before = scribe.json(&["sources", "--json"]);
    let rows = before["sources"].as_array().unwrap();
    assert_eq!(rows.len(), 28);
    assert!(
        rows.iter()
            .all(|r| r["found"] == true && r["last_imported_at"].is_null())
    );
    scribe.ok(&["import", "--from", "gemini"]);
    let after = scribe.json(&["sources", "--json"]);
    let gemini = source(&after, "gemini").clone();
    assert_eq!(gemini["sessions_imported"], 2);
    assert_eq!(gemini["files"], 2);
    assert!(gemini["last_imported_at"].as_i64().unwrap() > 0);
    let table = scribe.ok(&["sources"]);
    assert!(
        table.contains("gemini") && table.contains("never"),
        "{table}"
    );
    assert!(gemini["rate_limits"].is_null());
    assert!(!table.contains("usage limits"), "{table}");
    // Codex reports its plan's usage limits: the newest snapshot is listed, in JSON and
    // under the table (its reset has passed by now, and the line says so).
    scribe.ok(&["import", "--from", "codex"]);
    let after = scribe.json(&["sources", "--json"]);
    let codex = source(&after, "codex").clone();
    assert_eq!(codex["rate_limits"]["plan"], "pro", "{codex}");
    assert_eq!(
        codex["rate_limits"]["windows"],
        serde_json::json!([{"minutes": 10_080, "used_percent": 1.0, "resets_at": 1_785_958_530_000_i64}])
    );
    let table = scribe.ok(&["sources"]);
    assert!(
        table.contains(
            "codex usage limits (pro plan) as of 2026-08-03 10:48 UTC: 1% of the weekly window (reset since, 2026-08-05 19:35)"
        ),
        "{table}"
    );
}

/// A `scribe import --watch` process and the lines it prints (read on a thread, so a
/// test waits for a line with a deadline instead of blocking on a silent child).
struct Watching {
    child: std::process::Child,
    lines: std::sync::mpsc::Receiver<String>,
    seen: String,
}

impl Watching {
    fn start(scribe: &Scribe, args: &[&str]) -> Watching {
        let mut child = scribe.command(args).spawn().unwrap();
        let out = BufReader::new(child.stdout.take().unwrap());
        let (tx, lines) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            for line in out.lines() {
                let Ok(line) = line else { break };
                if tx.send(line).is_err() {
                    break;
                }
            }
        });
        Watching {
            child,
            lines,
            seen: String::new(),
        }
    }

    /// Waits for a line containing `what`; returns how long it took. The deadline is
    /// generous so that a loaded machine does not fail the test: what a test proves is
    /// *which* mechanism imported the record, not how fast (see each test).
    fn expect(&mut self, what: &str) -> Duration {
        let started = Instant::now();
        let deadline = started + Duration::from_secs(60);
        while let Some(left) = deadline.checked_duration_since(Instant::now()) {
            match self.lines.recv_timeout(left) {
                Ok(line) => {
                    self.seen.push_str(&line);
                    self.seen.push('\n');
                    if line.contains(what) {
                        return started.elapsed();
                    }
                }
                Err(_) => break,
            }
        }
        panic!("no {what:?} within 60 s; the watch printed:\n{}", self.seen);
    }
}

impl Watching {
    /// Sends Ctrl-C (SIGINT) and waits (a minute at most) for the process to end; its exit
    /// code (`None`: killed by the signal) and what it said on stderr.
    fn interrupt(&mut self) -> (Option<i32>, String) {
        let sent = Command::new("kill")
            .args(["-INT", &self.child.id().to_string()])
            .status()
            .unwrap();
        assert!(sent.success());
        let deadline = Instant::now() + Duration::from_secs(60);
        let status = loop {
            if let Some(status) = self.child.try_wait().unwrap() {
                break status;
            }
            assert!(
                Instant::now() < deadline,
                "still running a minute after Ctrl-C; it printed:\n{}",
                self.seen
            );
            std::thread::sleep(Duration::from_millis(20));
        };
        let mut err = String::new();
        std::io::Read::read_to_string(&mut self.child.stderr.take().unwrap(), &mut err).unwrap();
        (status.code(), err)
    }
}

impl Drop for Watching {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The Codex fixture's lines, and a live directory holding its first 8 lines.
fn live_codex(dir: &Path) -> (PathBuf, PathBuf, Vec<String>) {
    let root = dir.join("live");
    std::fs::create_dir_all(&root).unwrap();
    let fixture = std::fs::read_to_string(
        fixtures().join("codex/sessions/2026/09/30/rollout-2026-09-30T08-39-00-01a0f21c-5c40-7f72-9aa9-ef0b43570680.jsonl"),
    )
    .unwrap();
    let lines: Vec<String> = fixture.lines().map(str::to_owned).collect();
    let file = root.join("rollout-2026-09-30T08-39-00-01a0f21c-5c40-7f72-9aa9-ef0b43570680.jsonl");
    std::fs::write(&file, lines[..8].join("\n") + "\n").unwrap();
    (root, file, lines)
}

fn append(file: &Path, lines: &[String]) {
    let mut f = std::fs::OpenOptions::new().append(true).open(file).unwrap();
    f.write_all((lines.join("\n") + "\n").as_bytes()).unwrap();
}

#[test]
fn watch_imports_records_as_they_are_written() {
    let (dir, scribe) = setup();
    let (root, file, lines) = live_codex(dir.path());
    let mut watching = Watching::start(
        &scribe,
        &[
            "import",
            "--from",
            "codex",
            root.to_str().unwrap(),
            "--watch",
        ],
    );
    watching.expect("watching");
    append(&file, &lines[8..]);
    watching.expect("codex: 2 messages new");
    drop(watching);
    let list = scribe.json(&["list", "--json"]);
    assert_eq!(list["sessions"][0]["message_count"], 3);
}

/// Ctrl-C ends a watch between imports, says on stderr what the watch stored after its
/// first report, and exits 130 (before, the signal killed it: no exit code, nothing said);
/// a session the store refuses during the watch is shown in its lines ("failed a session
/// of FILE"; before, only `--json` told it) and the watch goes on.
#[test]
fn ctrl_c_ends_a_watch_and_says_what_it_stored() {
    let (dir, scribe) = setup();
    let (root, file, lines) = live_codex(dir.path());
    let mut watching = Watching::start(
        &scribe,
        &[
            "import",
            "--from",
            "codex",
            root.to_str().unwrap(),
            "--watch",
        ],
    );
    watching.expect("watching");
    append(&file, &lines[8..]);
    watching.expect("codex: 2 messages new");
    // A session id over the store's limit, and a fine session, in a new day's directory.
    long_and_fine_rollouts(&root.join("2026/10/02"));
    // One import or two, in either order.
    for line in ["failed a session of ", "codex: 1 message new"] {
        if !watching.seen.contains(line) {
            watching.expect(line);
        }
    }
    let (code, err) = watching.interrupt();
    assert_eq!(code, Some(130), "{err}");
    assert_eq!(
        err.trim_end(),
        "scribe: interrupted: stopped watching; 2 sessions (3 messages new) stored while watching",
        "{}",
        watching.seen
    );
    let list = scribe.json(&["list", "--json"]);
    assert_eq!(list["sessions"].as_array().unwrap().len(), 2, "{list}");
}

#[test]
fn watch_is_woken_by_file_system_notifications() {
    // The poll is set to an hour: a record imported within the test's deadline came in
    // through a notification. A machine without them fails here, saying so.
    let (dir, mut scribe) = setup();
    scribe
        .vars
        .push(("SCRIBE_WATCH_POLL_MS".to_owned(), "3600000".to_owned()));
    let (root, file, lines) = live_codex(dir.path());
    let mut watching = Watching::start(
        &scribe,
        &[
            "import",
            "--from",
            "codex",
            root.to_str().unwrap(),
            "--watch",
        ],
    );
    watching.expect("watching for new records (file-system notifications");
    append(&file, &lines[8..]);
    let grown = watching.expect("codex: 2 messages new");
    // A new file in a directory that did not exist when watching began (Codex writes
    // each day's rollouts under a new YYYY/MM/DD).
    let later = root.join("2026/10/01");
    std::fs::create_dir_all(&later).unwrap();
    let other = std::fs::read_to_string(
        fixtures().join("codex/sessions/2026/02/23/rollout-2026-02-23T13-19-38-019c8a70-dda7-7f33-98ea-f30553347322.jsonl"),
    )
    .unwrap();
    std::fs::write(
        later.join("rollout-2026-02-23T13-19-38-019c8a70-dda7-7f33-98ea-f30553347322.jsonl"),
        other,
    )
    .unwrap();
    let created = watching.expect("codex: ");
    eprintln!("imported after a write: {grown:?} (grown file), {created:?} (new file)");
    drop(watching);
    let list = scribe.json(&["list", "--json"]);
    assert_eq!(list["sessions"].as_array().unwrap().len(), 2, "{list}");
}

#[test]
fn watch_polls_when_notifications_are_off() {
    let (dir, mut scribe) = setup();
    scribe
        .vars
        .push(("SCRIBE_WATCH_NOTIFY".to_owned(), "0".to_owned()));
    let (root, file, lines) = live_codex(dir.path());
    let mut watching = Watching::start(
        &scribe,
        &[
            "import",
            "--from",
            "codex",
            root.to_str().unwrap(),
            "--watch",
            "--json",
        ],
    );
    watching.expect("watching for new records (looking every 1000 ms");
    append(&file, &lines[8..]);
    let took = watching.expect("\"messages_inserted\":2");
    eprintln!("imported after a write: {took:?}");
}

/// PATHs that exist but hold nothing the agent reads (another agent's files, an export
/// given with --from) are a mistake, exit 1, saying what the agent's history looks like;
/// before, "no history found" and exit 0. Nothing is written.
#[test]
fn paths_with_none_of_the_agents_history_are_an_error() {
    let (dir, scribe) = setup();
    let export = dir.path().join("export.json");
    std::fs::write(&export, "[]").unwrap();
    let empty = dir.path().join("empty");
    std::fs::create_dir_all(&empty).unwrap();
    for (agent, path, keeps) in [
        ("claude-code", &export, "*.jsonl transcripts"),
        ("hermes", &empty, "state.db and sessions/*.json"),
    ] {
        let out = scribe.run(&["import", "--from", agent, path.to_str().unwrap()]);
        let err = String::from_utf8_lossy(&out.stderr).into_owned();
        assert_eq!(out.status.code(), Some(1), "{agent}: {err}");
        assert!(
            err.contains(&format!("no {agent} history in {}", path.display())),
            "{err}"
        );
        assert!(err.contains(keeps), "{err}");
        assert!(!scribe.db.exists(), "a database was left");
    }
    // The default locations holding nothing are a first run, not a mistake.
    let bare = Scribe {
        db: dir.path().join("bare.db"),
        home: empty.clone(),
        vars: Vec::new(),
    };
    let out = bare.run(&["import", "--from", "claude-code"]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{err}");
    assert!(String::from_utf8_lossy(&out.stdout).contains("no history found"));
    assert!(!bare.db.exists(), "a database was left");
}

/// A PATH that does not exist (a typo) is an error naming it, exit 1, and nothing is
/// written, not even a new database; before, it printed "no history found" and exited 0.
/// A file that is not the agent's database fails alone, reported with its path, and the
/// command exits 1.
#[test]
fn a_missing_path_is_an_error_and_a_foreign_file_fails_alone() {
    let (dir, scribe) = setup();
    let missing = dir.path().join("no/such/projects");
    let out = scribe.run(&["import", "--from", "claude-code", missing.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8_lossy(&out.stderr).into_owned();
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(
        err.contains(&format!("cannot read {}", missing.display())),
        "{err}"
    );
    assert!(err.contains("No such file or directory"), "{err}");
    // Checked before the database is opened: none was created.
    assert!(!scribe.db.exists(), "a database was created");

    let garbage = dir.path().join("opencode.db");
    std::fs::write(&garbage, "this is not sqlite").unwrap();
    let out = scribe.run(&[
        "import",
        "--from",
        "opencode",
        garbage.to_str().unwrap(),
        "--json",
    ]);
    // The report on stdout lists the failure; the exit status says it.
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(err.contains("1 of 1 files could not be imported"), "{err}");
    let report: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let failed = source(&report, "opencode")["failed"]
        .as_array()
        .unwrap()
        .clone();
    assert_eq!(failed.len(), 1, "{report}");
    // Said once: SQLite's message, not again as the driver's "Error code 26: …".
    assert_eq!(
        failed[0]["error"]
            .as_str()
            .unwrap()
            .matches("not a database")
            .count(),
        1,
        "{report}"
    );
    assert_eq!(std::fs::read(&garbage).unwrap(), b"this is not sqlite");
}

/// A Claude Code line whose usage claims 9e18 input and output tokens.
fn claimed_usage_line(uuid: &str, parent: &str, message: &str, at: &str) -> String {
    serde_json::json!({
        "parentUuid": parent, "isSidechain": false, "userType": "external",
        "cwd": "/path/to/Huge", "sessionId": "5a1e9c2d-0b7e-4c55-9d61-3f0e2a4b6c8d",
        "version": "1.0.98", "type": "assistant", "uuid": uuid, "timestamp": at,
        "requestId": format!("req_{message}"),
        "message": {
            "id": message, "type": "message", "role": "assistant",
            "model": "claude-sonnet-4-20250514",
            "content": [{"type": "text", "text": "counted"}],
            "usage": {"input_tokens": 9_000_000_000_000_000_000_i64,
                      "output_tokens": 9_000_000_000_000_000_000_i64}
        }
    })
    .to_string()
}

/// A history that claims 9e18 tokens per reply, imported in two runs (the file grew):
/// the session's totals stop at `i64::MAX` and it stays readable, as do the reports over
/// it. Before, the second run's addition overflowed: SQLite made the total a REAL that
/// the row could not be read back with, so the import failed on every run.
#[test]
fn absurd_token_counts_imported_twice_stop_at_the_largest_count() {
    let (dir, scribe) = setup();
    let root = dir.path().join("huge");
    std::fs::create_dir_all(&root).unwrap();
    let file = root.join("5a1e9c2d-0b7e-4c55-9d61-3f0e2a4b6c8d.jsonl");
    let user = serde_json::json!({
        "parentUuid": null, "isSidechain": false, "userType": "external",
        "cwd": "/path/to/Huge", "sessionId": "5a1e9c2d-0b7e-4c55-9d61-3f0e2a4b6c8d",
        "version": "1.0.98", "type": "user", "uuid": "u-1",
        "timestamp": "2025-09-03T00:47:19.293Z",
        "message": {"role": "user", "content": "count this"}
    })
    .to_string();
    let first = claimed_usage_line("a-1", "u-1", "msg_a", "2025-09-03T00:47:21.540Z");
    std::fs::write(&file, format!("{user}\n{first}\n")).unwrap();
    let root = root.to_str().unwrap();
    scribe.ok(&["import", "--from", "claude-code", root]);
    let second = claimed_usage_line("a-2", "a-1", "msg_b", "2025-09-03T00:47:25.000Z");
    append(&file, &[second]);
    scribe.ok(&["import", "--from", "claude-code", root]);

    let list = scribe.json(&["list", "--json"]);
    let session = &list["sessions"][0];
    assert_eq!(session["message_count"], 3, "{list}");
    assert_eq!(session["tokens"]["input"], i64::MAX, "{list}");
    assert_eq!(session["tokens"]["output"], i64::MAX, "{list}");
    let id = session["id"].as_str().unwrap();
    let shown = scribe.ok(&["show", id]);
    assert!(shown.contains("count this"), "{shown}");
    for by in ["model", "source", "day"] {
        let stats = scribe.json(&["stats", "--by", by, "--json"]);
        assert_eq!(
            stats["totals"]["tokens"]["input"],
            i64::MAX,
            "{by}: {stats}"
        );
    }
}

/// A session the store refuses (an id over 1,024 bytes) in a file whose other session is
/// imported is a failed session, not a failed file: the human report says "failed a
/// session of FILE", `--json` lists it under `failed_sessions` (and `failed`, the files,
/// stays empty), and the exit status 1 says "1 session could not be imported". Before,
/// it read "1 of 2 files could not be imported", though both files were read.
#[test]
fn a_refused_session_is_reported_as_a_session_not_a_file() {
    let (dir, scribe) = setup();
    let root = dir.path().join("rollouts");
    long_and_fine_rollouts(&root);
    let path = root.to_str().unwrap();
    let out = scribe.run(&["import", "--from", "codex", path, "--dry-run"]);
    assert_eq!(out.status.code(), Some(1));
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    let err = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(text.contains("failed a session of "), "{text}");
    assert!(text.contains("long.jsonl: session id 7777"), "{text}");
    assert!(err.contains("1 session could not be imported"), "{err}");
    assert!(!err.contains("files"), "{err}");

    let out = scribe.run(&["import", "--from", "codex", path, "--json"]);
    assert_eq!(out.status.code(), Some(1));
    let report: Value = serde_json::from_slice(&out.stdout).unwrap();
    let codex = source(&report, "codex");
    assert_eq!(codex["failed"].as_array().unwrap().len(), 0, "{report}");
    let sessions = codex["failed_sessions"].as_array().unwrap();
    assert_eq!(sessions.len(), 1, "{report}");
    assert!(
        sessions[0]["path"]
            .as_str()
            .unwrap()
            .ends_with("long.jsonl"),
        "{report}"
    );
    assert_eq!(codex["files_read"], 2, "{report}");
    assert_eq!(codex["sessions_created"], 1, "{report}");
}

/// Claude Code records a slash command, a `!` shell command and what they printed as user
/// lines of tags (`<command-name>/model</command-name>…`), Codex a `!` shell command as a
/// user message `<user_shell_command>…`. They are kept as the user typed them (`/model
/// opus`, `!ls`) and as the output they printed (synthetic text, dimmed by `show`), so
/// `list` previews, `show` and search read what happened, not the markup; an output that
/// printed nothing is no message, and a prompt that only mentions a tag is kept as written.
#[test]
fn agents_commands_are_kept_as_typed() {
    let (dir, scribe) = setup();
    let root = dir.path().join("commands");
    std::fs::create_dir_all(&root).unwrap();
    let id = "c0ffee00-0000-4000-8000-000000000001";
    let mut lines = Vec::new();
    // The caveat Claude Code writes before a command (a meta line): no preview of its own.
    lines.push(
        serde_json::json!({
            "type": "user", "sessionId": id, "uuid": "u0", "isMeta": true,
            "timestamp": "2026-03-01T09:59:59.000Z",
            "message": {"role": "user", "content": "<local-command-caveat>Caveat: The messages below were generated by the user while running local commands.</local-command-caveat>"},
        })
        .to_string(),
    );
    let mut user = |uuid: &str, content: &str| {
        let at = lines.len();
        lines.push(
            serde_json::json!({
                "type": "user", "sessionId": id, "uuid": uuid,
                "timestamp": format!("2026-03-01T10:00:0{at}.000Z"),
                "message": {"role": "user", "content": content},
            })
            .to_string(),
        );
    };
    user(
        "u1",
        "<command-name>/model</command-name>\n<command-message>model</command-message>\n<command-args>opus</command-args>",
    );
    user(
        "u2",
        "<local-command-stdout>Set model to opus</local-command-stdout>",
    );
    user("u3", "<bash-input>ls</bash-input>");
    user(
        "u4",
        "<bash-stdout>Cargo.toml\nsrc</bash-stdout><bash-stderr></bash-stderr>",
    );
    user("u5", "<local-command-stdout></local-command-stdout>");
    user("u6", "why does <command-name> show up in my logs?");
    std::fs::write(root.join(format!("{id}.jsonl")), lines.join("\n") + "\n").unwrap();
    let report = scribe.json(&[
        "import",
        "--from",
        "claude-code",
        root.to_str().unwrap(),
        "--json",
    ]);
    assert_eq!(source(&report, "claude-code")["messages_inserted"], 6);

    let shown = scribe.json(&["show", id, "--json"]);
    let texts: Vec<(&str, bool)> = shown["messages"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| {
            let part = &m["parts"][0]["part"];
            (
                part["text"].as_str().unwrap(),
                part["synthetic"].as_bool().unwrap_or(false),
            )
        })
        .collect();
    assert_eq!(
        texts,
        [
            (
                "Caveat: The messages below were generated by the user while running local commands.",
                true
            ),
            ("/model opus", false),
            ("Set model to opus", true),
            ("!ls", false),
            ("Cargo.toml\nsrc", true),
            ("why does <command-name> show up in my logs?", false),
        ]
    );
    let list = scribe.json(&["list", "--json"]);
    let row = list["sessions"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["id"] == id)
        .unwrap();
    assert_eq!(row["preview"], "/model opus");
    let found = scribe.json(&["search", "opus", "--json"]);
    assert!(!found["hits"].as_array().unwrap().is_empty(), "{found}");
    // The real fixture's `/init`.
    scribe.ok(&["import", "--from", "claude-code"]);
    let list = scribe.json(&["list", "--json"]);
    let init = list["sessions"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["id"] == "1af7fc5e-8455-4414-9ccd-011d40f70b2a")
        .unwrap();
    assert_eq!(init["preview"], "/init");

    // Codex records a `!` shell command as a user message of tags too.
    let codex = dir.path().join("codex");
    std::fs::create_dir_all(&codex).unwrap();
    let name = "rollout-2026-09-30T08-39-00-01a0f21c-5c40-7f72-9aa9-ef0b43570680.jsonl";
    let mut rollout =
        std::fs::read_to_string(fixtures().join("codex/sessions/2026/09/30").join(name)).unwrap();
    rollout.push_str(
        &(serde_json::json!({
            "timestamp": "2026-09-30T11:40:00.000Z", "type": "event_msg",
            "payload": {"type": "user_message", "message": "<user_shell_command>\n<command>printf synthetic</command>\n<result>\nExit code: 0\nOutput:\nsynthetic\n</result>\n</user_shell_command>"},
        })
        .to_string()
            + "\n"),
    );
    std::fs::write(codex.join(name), rollout).unwrap();
    scribe.ok(&["import", "--from", "codex", codex.to_str().unwrap()]);
    let shown = scribe.json(&["show", "01a0f21c-5c40-7f72-9aa9-ef0b43570680", "--json"]);
    let last = shown["messages"]
        .as_array()
        .unwrap()
        .last()
        .unwrap()
        .clone();
    assert_eq!(last["role"], "user");
    let parts: Vec<(&str, bool)> = last["parts"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| {
            (
                p["part"]["text"].as_str().unwrap(),
                p["part"]["synthetic"].as_bool().unwrap_or(false),
            )
        })
        .collect();
    assert_eq!(
        parts,
        [
            ("!printf synthetic", false),
            ("Exit code: 0\nOutput:\nsynthetic", true)
        ]
    );
}

/// A Cline task reads in `show` as it went: the task as typed, the model's thinking, its
/// XML tool calls as calls with their results, and the environment details Cline appends
/// to every message cut to their first lines; `list` and `stats` name the agent.
#[test]
fn a_cline_task_shows_its_calls_and_cuts_what_the_extension_added() {
    let (_dir, scribe) = setup();
    scribe.ok(&["import", "--from", "cline"]);
    let shown = scribe.ok(&["show", "1764590400000"]);
    for want in [
        "1764590400000 · normal · cline · claude-sonnet-4-20250514",
        "  Fix the off-by-one in src/main.rs\n  <environment_details>\n",
        "  thinking: The bug is in the loop bound; I need to read the file first.\n",
        "  ⚙ read_file({\"path\":\"src/main.rs\"}) [completed]\n    fn main() {\n",
        "  ⚙ replace_in_file(",
        ") [error]\n    The user denied this operation",
        "  ⚙ attempt_completion({\"result\":\"The loop now runs to COUNT (10).\"}) [completed]",
        "  … 15 more lines\n",
    ] {
        assert!(shown.contains(want), "{want:?} in:\n{shown}");
    }
    assert!(!shown.contains("Context Window Usage"), "{shown}");
    assert!(!shown.contains("<read_file>"), "{shown}");
    let list = scribe.ok(&["list"]);
    assert!(
        list.contains("cline") && list.contains("Fix the off-by-one in src/main.rs"),
        "{list}"
    );
}

/// A folder of history that cannot be read (its permissions) is named as a failure, with
/// exit status 1, and the rest imported: what it holds is not left out unsaid. Run as
/// `nobody` (`setpriv`) when the tests run as root, whom permissions do not stop.
#[cfg(unix)]
#[test]
fn an_unreadable_folder_of_history_is_named_not_skipped() {
    use std::os::unix::fs::PermissionsExt;
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("projects");
    let shut = root.join("proj/shut");
    std::fs::create_dir_all(&shut).unwrap();
    let claude = fixtures().join("claude/projects");
    std::fs::copy(
        claude.join("-work-proj/609b44ad-7c18-4745-a70b-784281dce85e.jsonl"),
        root.join("proj/609b44ad-7c18-4745-a70b-784281dce85e.jsonl"),
    )
    .unwrap();
    for entry in std::fs::read_dir(claude.join("-path-to-Demo")).unwrap() {
        let path = entry.unwrap().path();
        std::fs::copy(&path, shut.join(path.file_name().unwrap())).unwrap();
    }
    let open_to_all = |p: &Path, mode: u32| {
        std::fs::set_permissions(p, std::fs::Permissions::from_mode(mode)).unwrap();
    };
    for p in [dir.path(), &root, &root.join("proj")] {
        open_to_all(p, 0o777);
    }
    open_to_all(&shut, 0o000);
    let db = dir.path().join("scribe.db");
    // A file this process made is its effective user's.
    let root_user = {
        use std::os::unix::fs::MetadataExt;
        std::fs::metadata(&root).unwrap().uid() == 0
    };
    let mut cmd = if root_user {
        let mut cmd = Command::new("setpriv");
        cmd.args(["--reuid=65534", "--regid=65534", "--clear-groups"])
            .arg(env!("CARGO_BIN_EXE_scribe"));
        cmd
    } else {
        Command::new(env!("CARGO_BIN_EXE_scribe"))
    };
    let out = cmd
        .env_clear()
        .env("HOME", dir.path())
        .env("COLUMNS", "200")
        .arg("--db")
        .arg(&db)
        .args(["import", "--from", "claude-code"])
        .arg(&root)
        .output()
        .unwrap();
    open_to_all(&shut, 0o755);
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stdout}{stderr}");
    assert!(
        stdout.contains(&format!("failed {}: ", shut.display()))
            && stdout.contains("Permission denied"),
        "{stdout}{stderr}"
    );
    assert!(stdout.contains("imported 1 session (1 new)"), "{stdout}");
}
