//! Aider: each project's `.aider.chat.history.md` found under the home folder (hidden
//! folders, dependency trees and what lies too deep left alone), read into sessions, one
//! per run of Aider (the user's input, the replies with what Aider did after them, the
//! usage each report gives, the model, the folder), the logs never changed, and a log
//! that grows read again storing nothing twice, a line still being written left for later.
//!
//! Fixtures (`fixtures/aider`): two projects' logs authored for Scribe after Aider's own
//! writer (fixtures/SOURCES.md).

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::io::Write;
use std::path::{Path, PathBuf};

use common::*;
use scribe_import::{Source, sources};
use scribe_message::Role;
use scribe_session::Session;

/// The log's name.
const LOG: &str = ".aider.chat.history.md";

/// The first run in `shop`, and the two runs in `tools` (started in the same second).
const SHOP_AT: i64 = 1_749_906_799_000;
const TOOLS_AT: i64 = 1_749_978_164_000;

/// The two projects' logs in a fresh home under `dir`: (the home, the import's roots).
fn projects(dir: &Path) -> (PathBuf, Vec<PathBuf>) {
    let home = dir.join("home");
    copy("aider", &home.join("work"));
    let roots = sources::importer(Source::Aider).default_roots(&env(&home, &[]));
    (home, roots)
}

/// The sessions of `folder`, oldest first.
fn in_folder(db: &std::sync::Arc<scribe_db::Database>, folder: &Path) -> Vec<Session> {
    let folder = folder.display().to_string();
    let mut found: Vec<Session> = sessions(db)
        .into_iter()
        .filter(|s| s.directory.as_deref() == Some(folder.as_str()))
        .collect();
    found.sort_by(|a, b| (a.created_at, &a.id).cmp(&(b.created_at, &b.id)));
    found
}

fn append(path: &Path, text: &str) {
    std::thread::sleep(std::time::Duration::from_millis(20));
    let mut file = std::fs::OpenOptions::new().append(true).open(path).unwrap();
    file.write_all(text.as_bytes()).unwrap();
}

#[test]
fn aiders_logs_are_found_in_the_projects_under_home() {
    let dir = tempfile::tempdir().unwrap();
    let (home, roots) = projects(dir.path());
    let (shop, tools) = (
        home.join("work/shop").join(LOG),
        home.join("work/tools").join(LOG),
    );
    assert_eq!(roots, [shop.clone(), tools.clone()]);
    // Not entered: hidden folders, dependency trees, what lies deeper than Aider's projects.
    for decoy in [
        ".cache/aider/proj",
        "work/app/node_modules/pkg",
        "work/app/target/debug",
        "a/b/c/d/e/f",
    ] {
        let folder = home.join(decoy);
        std::fs::create_dir_all(&folder).unwrap();
        std::fs::write(
            folder.join(LOG),
            "\n# aider chat started at 2025-01-01 10:00:00\n\n",
        )
        .unwrap();
    }
    let importer = sources::importer(Source::Aider);
    assert_eq!(importer.default_roots(&env(&home, &[])), roots);
    // The variable's file comes first, whatever its name; a relative one names no file.
    assert_eq!(
        importer.default_roots(&env(
            &home,
            &[("AIDER_CHAT_HISTORY_FILE", "/logs/aider.md")]
        )),
        [PathBuf::from("/logs/aider.md"), shop.clone(), tools.clone()]
    );
    assert_eq!(
        importer.default_roots(&env(&home, &[("AIDER_CHAT_HISTORY_FILE", "chat.md")])),
        roots
    );
    // A home without a log: where its own would be, so the report names where it looked.
    let empty = dir.path().join("empty");
    assert_eq!(importer.default_roots(&env(&empty, &[])), [empty.join(LOG)]);
    // A folder given is searched the same way, a file given is read as it is.
    let mut found = Vec::new();
    importer.discover(&home.join("work"), &mut found).unwrap();
    assert_eq!(found, [shop.clone(), tools]);
    let renamed = dir.path().join("chat.md");
    std::fs::copy(&shop, &renamed).unwrap();
    let mut found = Vec::new();
    importer.discover(&renamed, &mut found).unwrap();
    assert_eq!(found, [renamed]);
}

#[test]
fn a_run_of_aider_keeps_the_input_the_replies_what_aider_did_and_the_usage() {
    let dir = tempfile::tempdir().unwrap();
    let (home, roots) = projects(dir.path());
    let db = scribe_db(dir.path());
    let s = run(&db, Source::Aider, &roots);
    assert!(s.failed.is_empty() && s.malformed.is_empty(), "{s:?}");
    assert_eq!(s.skipped.get("banner"), Some(&4), "{s:?}");
    assert_eq!(s.skipped.get("input:repeated"), Some(&1), "{s:?}");
    // The run that started and quit holds no message: no session.
    assert_eq!(s.skipped.get("chat:empty"), Some(&1), "{s:?}");
    assert_eq!(sessions(&db).len(), 3);

    let shop = in_folder(&db, &home.join("work/shop"));
    assert_eq!(shop.len(), 1);
    let shop = &shop[0];
    assert_eq!(shop.source, "aider");
    assert!(shop.id.starts_with("ses_"), "{}", shop.id);
    assert_eq!(shop.created_at, SHOP_AT);
    assert_eq!(shop.model.as_deref(), Some("claude-sonnet-4-20250514"));
    let reply = "The discount belongs on the subtotal, so tax is computed on the reduced amount.\n\n\
                 #### Change\n\n\
                 > Note: the rounding stays at the end, on the total.\n\n\
                 cart.py\n```python\n<<<<<<< SEARCH\n    total = subtotal * (1 + TAX_RATE)\n    \
                 total -= discount\n=======\n    total = (subtotal - discount) * (1 + TAX_RATE)\n\
                 >>>>>>> REPLACE\n```";
    assert_eq!(
        texts(&db, &shop.id),
        [
            (Role::User, "/add tests/test_cart.py".to_owned(), false),
            (
                Role::User,
                "Added tests/test_cart.py to the chat".to_owned(),
                true
            ),
            (
                Role::User,
                "The discount is applied after tax in cart.py.\n\
                 Apply it before tax, and keep the total rounded to cents."
                    .to_owned(),
                false
            ),
            // A heading and a quote inside the reply are the reply's.
            (Role::Assistant, reply.to_owned(), false),
            (
                Role::Assistant,
                "Applied edit to cart.py\n\
                 Commit 3f2a1b9 fix: apply the discount before tax\n\
                 You can use /undo to undo and discard each aider commit."
                    .to_owned(),
                true
            ),
            // `/ask …` is said once, not again as the question Aider sent.
            (
                Role::User,
                "/ask why does test_total_with_coupon still fail?".to_owned(),
                false
            ),
            (
                Role::Assistant,
                "The test expects `108.00`, the old order of operations: 100 * 1.08 - 0. With a \
                 10.00\ncoupon the new total is (100 - 10) * 1.08 = 97.20, so the expected value \
                 in the test\nneeds updating, not the code."
                    .to_owned(),
                false
            ),
            (Role::Assistant, "^C again to exit".to_owned(), true),
        ]
    );
    let replies: Vec<_> = messages(&db, &shop.id)
        .into_iter()
        .filter(|m| m.role == Role::Assistant)
        .collect();
    assert!(replies.iter().all(|m| {
        m.provider.as_deref() == Some("anthropic")
            && m.model.as_deref() == Some("claude-sonnet-4-20250514")
    }));
    // The report after each reply: rounded counts as printed, the cache's taken out of
    // what was sent (the cost on the line after, as Aider writes it when both cache
    // counts are given), and the cost as reported.
    let u = &replies[0].usage;
    assert_eq!(
        (u.input, u.cache_write, u.cache_read, u.output),
        (400, 1_200, 1_500, 412)
    );
    let u = &replies[1].usage;
    assert_eq!((u.input, u.output, u.cache_read), (5_200, 230, 0));
    assert!(
        (replies[0].cost_usd - 0.02).abs() < 1e-9,
        "{}",
        replies[0].cost_usd
    );
    assert_eq!(shop.api_call_count, 2);
    assert_eq!(shop.tokens.total(), 400 + 1_200 + 1_500 + 412 + 5_200 + 230);
    assert!(
        (shop.actual_cost_usd.unwrap() - 0.04).abs() < 1e-9,
        "{shop:?}"
    );

    // Two runs started in the same second are two sessions.
    let tools = in_folder(&db, &home.join("work/tools"));
    assert_eq!(tools.len(), 2);
    assert!(tools.iter().all(|s| s.created_at == TOOLS_AT));
    let by_model = |model: &str| tools.iter().find(|s| s.model.as_deref() == Some(model));
    let gpt = by_model("gpt-4o").expect("the gpt-4o run");
    assert_eq!(
        texts(&db, &gpt.id),
        [
            (
                Role::User,
                "Rename the flag in cli.py.\n\n      Keep the old name as an alias.".to_owned(),
                false
            ),
            (
                Role::Assistant,
                "cli.py\n```\nparser.add_argument(\"--dry-run\", \"--dryrun\", action=\"store_true\")\n```"
                    .to_owned(),
                false
            ),
            (Role::Assistant, "Applied edit to cli.py".to_owned(), true),
        ]
    );
    // No price Aider knew: the tokens only, the cost estimated from Scribe's prices.
    assert_eq!((gpt.tokens.input, gpt.tokens.output), (2_300, 150));
    assert_eq!(gpt.actual_cost_usd, None);
    assert!(gpt.estimated_cost_usd > 0.0, "{gpt:?}");
    let deepseek = by_model("deepseek-chat").expect("the deepseek run");
    assert_eq!(
        (
            deepseek.tokens.input,
            deepseek.tokens.cache_read,
            deepseek.tokens.output
        ),
        (1_900, 6_100, 512)
    );
}

#[test]
fn aiders_logs_are_read_without_being_changed() {
    let dir = tempfile::tempdir().unwrap();
    let (home, roots) = projects(dir.path());
    let db = scribe_db(dir.path());
    import_read_only(&db, Source::Aider, &roots, &home.join("work"));
}

#[test]
fn a_growing_log_is_read_again_storing_nothing_twice() {
    let dir = tempfile::tempdir().unwrap();
    let (home, roots) = projects(dir.path());
    let log = home.join("work/shop").join(LOG);
    let db = scribe_db(dir.path());
    import_twice(&db, Source::Aider, &roots);

    // The run goes on: a question and its reply, whose report is not written yet.
    append(
        &log,
        "\n#### And the coupon test?  \n\nUpdated the expected total to 97.20.\n\n",
    );
    let grown = run(&db, Source::Aider, &roots);
    assert!(
        grown.malformed.is_empty() && grown.failed.is_empty(),
        "{grown:?}"
    );
    assert_eq!(grown.written.messages_inserted, 2, "{grown:?}");
    let shop = &in_folder(&db, &home.join("work/shop"))[0];
    let said = texts(&db, &shop.id);
    assert_eq!(
        said[said.len() - 2..],
        [
            (Role::User, "And the coupon test?".to_owned(), false),
            (
                Role::Assistant,
                "Updated the expected total to 97.20.".to_owned(),
                false
            ),
        ]
    );
    assert_eq!(shop.api_call_count, 3);

    // The report comes, and the user types the next input, its line not ended yet: the
    // reply gets its usage (the session's totals with it), the input waits.
    append(
        &log,
        "> Tokens: 6.0k sent, 80 received. Cost: $0.01 message, $0.05 session.  \n\n#### Thanks",
    );
    let reported = run(&db, Source::Aider, &roots);
    assert!(reported.malformed.is_empty(), "{reported:?}");
    assert_eq!(reported.written.messages_inserted, 0, "{reported:?}");
    let shop = &in_folder(&db, &home.join("work/shop"))[0];
    assert_eq!(shop.api_call_count, 3);
    assert!(
        (shop.actual_cost_usd.unwrap() - 0.05).abs() < 1e-9,
        "{shop:?}"
    );

    // The line ends and a new run starts: the input is taken, the run is a new session.
    append(
        &log,
        "  \n\n# aider chat started at 2025-06-14 15:00:00\n\n> Aider v0.86.1  \n\n#### /help  \n",
    );
    let settled = run(&db, Source::Aider, &roots);
    assert!(settled.malformed.is_empty(), "{settled:?}");
    assert_eq!(settled.written.messages_inserted, 2, "{settled:?}");
    let shop = in_folder(&db, &home.join("work/shop"));
    assert_eq!(shop.len(), 2);
    assert_eq!(
        texts(&db, &shop[0].id).last().unwrap().1,
        "Thanks",
        "the input whose line was still being written"
    );
    assert_eq!(
        texts(&db, &shop[1].id),
        [(Role::User, "/help".to_owned(), false)]
    );
    let now = dump(&db);
    let repeat = run(&db, Source::Aider, &roots);
    assert_eq!(repeat.written.messages_inserted, 0, "{repeat:?}");
    assert_same(&now, &dump(&db), "read twice");
}

#[test]
fn runs_since_left_out_are_read_by_a_later_import() {
    let dir = tempfile::tempdir().unwrap();
    let (home, _) = projects(dir.path());
    let log = home.join("work/tools").join(LOG);
    let db = scribe_db(dir.path());
    let recent = scribe_import::Options {
        since: Some(TOOLS_AT + 1),
        ..scribe_import::Options::default()
    };
    let mut sink = scribe_import::sink::StoreSink::new(scribe_session::Store::new(db.clone()));
    let importer = sources::importer(Source::Aider);
    let s = scribe_import::import(
        &mut sink,
        importer,
        std::slice::from_ref(&log),
        &recent,
        &mut |_| {},
    )
    .unwrap();
    assert!(s.failed.is_empty(), "{s:?}");
    assert!(in_folder(&db, &home.join("work/tools")).is_empty());

    // Aider runs again in the project; the import without --since reads the runs left out.
    append(
        &log,
        "\n# aider chat started at 2025-06-17 08:00:00\n\n#### /help  \n",
    );
    run(&db, Source::Aider, std::slice::from_ref(&log));
    assert_eq!(in_folder(&db, &home.join("work/tools")).len(), 3);
}

#[test]
fn a_windows_log_reads_the_same_and_a_file_that_is_no_log_fails_alone() {
    let dir = tempfile::tempdir().unwrap();
    let (home, roots) = projects(dir.path());
    let db = scribe_db(dir.path());
    run(&db, Source::Aider, &roots);
    let mut unix: Vec<_> = in_folder(&db, &home.join("work/tools"))
        .iter()
        .map(|s| texts(&db, &s.id))
        .collect();

    // Aider on Windows ends its lines with CRLF: the same sessions, in their own folder.
    let windows = dir.path().join("windows/tools");
    std::fs::create_dir_all(&windows).unwrap();
    let text = std::fs::read_to_string(home.join("work/tools").join(LOG)).unwrap();
    std::fs::write(windows.join(LOG), text.replace('\n', "\r\n")).unwrap();
    let notes = dir.path().join("notes.md");
    std::fs::write(&notes, "# Notes\n\nNothing Aider wrote.\n").unwrap();
    let db2 = scribe_db(&dir.path().join("second"));
    let s = run(
        &db2,
        Source::Aider,
        &[dir.path().join("windows"), notes.clone()],
    );
    let failed: Vec<&str> = s.failed.iter().map(|f| f.error.as_str()).collect();
    assert_eq!(failed.len(), 1, "{s:?}");
    assert!(
        failed[0].contains("has no `# aider chat started at` line"),
        "{failed:?}"
    );
    let mut read: Vec<_> = in_folder(&db2, &windows)
        .iter()
        .map(|s| texts(&db2, &s.id))
        .collect();
    // Runs of one second are ordered by id, which the log's path is part of.
    read.sort_by_key(|said| said[0].1.clone());
    unix.sort_by_key(|said| said[0].1.clone());
    assert_eq!(read, unix);
}
