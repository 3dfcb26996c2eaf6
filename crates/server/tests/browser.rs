//! Browser tests: the viewer in a real headless Chromium (Debian's `chromium` and
//! `chromium-driver`), driven over WebDriver, against a server on a real fixture file.
//!
//! A test binary of its own (`harness = false`) so that a machine without a browser says
//! so on the terminal ("SKIPPED", counted as ignored) instead of passing silently; with
//! `SCRIBE_BROWSER_TESTS=require` (as CI sets) a missing browser is a failure. Output and
//! exit status follow libtest's (`test … ok`, `test result: …`). Arguments that are not
//! flags filter tests by name, as with `cargo test NAME`.
//!
//! The binary is also the writer process of the live-update tests (see
//! [`common::writer_main`]). The PostgreSQL live-update test needs a server: it runs
//! under `.ci/with-postgres` (SCRIBE_TEST_POSTGRES set) and is reported as ignored
//! without one.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::collections::BTreeSet;
use std::io::{BufRead, BufReader, Write};
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::process::{Child, Command, ExitCode, Stdio};
use std::time::Instant;

use common::webdriver::{self, Driver, Result, WAIT, find_browser};
use common::{
    Fixture, Running, SCRIPT_TEXT, big_output_store, block_store, costs_store, fixture, get_json,
    serve, serve_fixture, unpriced_store, unrecorded_store,
};
use scribe_db::calendar::date as utc_date;
use serde_json::{Value, json};

struct Ctx {
    fixture: Fixture,
    server: Running,
    driver: Driver,
}

type Test = fn(&Ctx) -> Result<()>;

const TESTS: &[(&str, Test)] = &[
    (
        "the_list_filters_sorts_and_groups_children",
        list_filters_sorts_and_groups,
    ),
    (
        "a_conversation_renders_its_parts_and_shows_script_as_text",
        conversation,
    ),
    (
        "a_deep_link_lands_on_its_message_and_long_conversations_load_progressively",
        deep_link_and_progressive,
    ),
    (
        "search_as_you_type_and_a_click_lands_on_the_message",
        search,
    ),
    ("the_usage_page_draws_a_chart_with_the_stats_numbers", usage),
    (
        "a_session_or_hit_that_cannot_be_read_is_named_and_the_rest_shown",
        left_out,
    ),
    (
        "text_the_user_did_not_type_is_folded_under_its_first_line",
        added_text,
    ),
    (
        "a_conversation_updates_live_while_another_process_writes",
        live,
    ),
    (
        "on_postgres_a_conversation_updates_live_while_another_process_writes",
        live_postgres,
    ),
    ("with_a_token_the_page_works_through_its_cookie", token),
    (
        "dates_shown_and_date_filters_agree_in_utc_whatever_the_time_zone",
        dates_in_utc,
    ),
    (
        "the_sorted_column_and_the_sort_choice_follow_every_way_of_sorting",
        sort_controls_agree,
    ),
    (
        "the_tab_title_names_the_view_shown_not_the_last_conversation",
        tab_title,
    ),
    (
        "back_over_a_message_link_keeps_the_conversation_as_loaded",
        back_over_a_permalink,
    ),
    (
        "a_conversation_with_no_related_sessions_shows_no_stray_text",
        head_without_relations,
    ),
    ("a_narrow_window_scrolls_only_up_and_down", narrow_window),
    ("right_to_left_paragraphs_read_right_to_left", right_to_left),
    (
        "back_from_a_conversation_returns_to_the_same_place_in_the_list_and_the_hits",
        back_returns_to_the_place,
    ),
    (
        "a_write_to_another_session_leaves_the_open_conversation_as_drawn",
        other_writes_leave_it_alone,
    ),
    (
        "a_live_change_keeps_the_keyboard_focus_in_the_session_list",
        list_keeps_focus,
    ),
    (
        "a_live_change_leaves_the_search_hits_and_their_ranking_alone",
        hits_stay,
    ),
    (
        "a_live_change_leaves_the_usage_controls_and_their_focus_alone",
        usage_controls_stay,
    ),
    (
        "an_empty_store_says_how_to_fill_it_and_the_console_stays_clean",
        empty_store,
    ),
    (
        "a_new_view_takes_the_keyboard_focus_and_back_returns_it_to_what_was_opened",
        focus_follows_the_view,
    ),
    (
        "a_link_to_a_message_that_is_gone_opens_the_conversation_and_says_so",
        stale_deep_link,
    ),
    (
        "a_big_tool_output_is_drawn_cut_and_whole_on_demand",
        big_output,
    ),
    (
        "an_unpriced_cost_and_a_rewound_answer_say_so_wherever_shown",
        unpriced_costs,
    ),
    (
        "a_session_whose_agent_keeps_no_usage_shows_none_recorded",
        unrecorded_usage,
    ),
    (
        "a_cost_column_has_one_format_as_the_command_line_prints_it",
        cost_columns,
    ),
    (
        "the_usage_page_shows_the_open_block_and_its_time_left",
        open_block,
    ),
    (
        "a_killed_test_process_leaves_no_browser_running",
        killed_test_process,
    ),
];

fn main() -> ExitCode {
    if common::writer_main() {
        return ExitCode::SUCCESS;
    }
    if std::env::var_os(HOLD_ENV).is_some() {
        hold();
    }
    let args: Vec<String> = std::env::args().skip(1).collect();
    let filters: Vec<&String> = args.iter().filter(|a| !a.starts_with('-')).collect();
    let selected: Vec<&(&str, Test)> = TESTS
        .iter()
        .filter(|(name, _)| filters.is_empty() || filters.iter().any(|f| name.contains(f.as_str())))
        .collect();
    if args.iter().any(|a| a == "--list") {
        for (name, _) in &selected {
            println!("{name}: test");
        }
        return ExitCode::SUCCESS;
    }
    println!("\nrunning {} tests", selected.len());
    let Some((chromium, chromedriver)) = find_browser() else {
        let required = std::env::var("SCRIBE_BROWSER_TESTS").is_ok_and(|v| v == "require");
        for (name, _) in &selected {
            println!("test {name} ... ignored, no browser");
        }
        println!(
            "\nbrowser tests SKIPPED: chromium and chromedriver were not found (install Debian's \
             `chromium` and `chromium-driver`, or set SCRIBE_CHROMIUM and SCRIBE_CHROMEDRIVER); \
             CI installs them and runs these tests"
        );
        println!(
            "\ntest result: {}. 0 passed; {} failed; {} ignored; 0 measured; 0 filtered out\n",
            if required { "FAILED" } else { "ok" },
            usize::from(required),
            selected.len()
        );
        return if required {
            eprintln!("SCRIBE_BROWSER_TESTS=require, but there is no browser");
            ExitCode::FAILURE
        } else {
            ExitCode::SUCCESS
        };
    };
    let fixture = fixture();
    let server = serve(&fixture.db, None);
    let driver = match Driver::start(&chromium, &chromedriver, 1280, 900) {
        Ok(driver) => driver,
        Err(err) => {
            println!(
                "\ncannot start the browser: {err}\n\ntest result: FAILED. 0 passed; 1 failed; 0 ignored; 0 measured; 0 filtered out\n"
            );
            return ExitCode::FAILURE;
        }
    };
    let ctx = Ctx {
        fixture,
        server,
        driver,
    };
    let (mut passed, mut failed, mut ignored) = (0, Vec::new(), 0);
    let postgres = std::env::var_os(scribe_db::testing::TEST_SERVER_VAR).is_some();
    for (name, test) in &selected {
        if NEEDS_POSTGRES.contains(name) && !postgres {
            ignored += 1;
            println!("test {name} ... ignored, needs PostgreSQL: run under .ci/with-postgres");
            continue;
        }
        let outcome = catch_unwind(AssertUnwindSafe(|| test(&ctx)));
        match outcome {
            Ok(Ok(())) => {
                passed += 1;
                println!("test {name} ... ok");
            }
            Ok(Err(err)) => {
                println!("test {name} ... FAILED");
                failed.push(format!("{name}: {err}"));
            }
            Err(panic) => {
                let text = panic
                    .downcast_ref::<String>()
                    .cloned()
                    .or_else(|| panic.downcast_ref::<&str>().map(|s| (*s).to_owned()))
                    .unwrap_or_default();
                println!("test {name} ... FAILED");
                failed.push(format!("{name}: panicked: {text}"));
            }
        }
    }
    if !failed.is_empty() {
        println!("\nfailures:");
        for failure in &failed {
            println!("    {failure}");
        }
    }
    println!(
        "\ntest result: {}. {passed} passed; {} failed; {ignored} ignored; 0 measured; {} filtered out\n",
        if failed.is_empty() { "ok" } else { "FAILED" },
        failed.len(),
        TESTS.len() - selected.len()
    );
    if failed.is_empty() {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    }
}

fn check(ok: bool, what: impl std::fmt::Display) -> Result<()> {
    if ok {
        Ok(())
    } else {
        Err(what.to_string().into())
    }
}

fn text(ctx: &Ctx, script: &str) -> Result<String> {
    Ok(ctx
        .driver
        .exec(script, json!([]))?
        .as_str()
        .unwrap_or("")
        .to_owned())
}

fn rows(ctx: &Ctx) -> Result<Vec<String>> {
    let value = ctx.driver.exec(
        "return [...document.querySelectorAll('#sessions-table tbody tr.session:not(.child)')].map(r => r.dataset.id)",
        json!([]),
    )?;
    Ok(serde_json::from_value(value)?)
}

fn list_filters_sorts_and_groups(ctx: &Ctx) -> Result<()> {
    let (d, f) = (&ctx.driver, &ctx.fixture);
    d.open(&ctx.server.url("/"))?;
    d.wait(
        "9 sessions listed",
        "return document.querySelectorAll('#sessions-table tbody tr.session').length === 9",
    )?;
    let listed = rows(ctx)?;
    check(listed[0] == f.telegram, format!("newest first: {listed:?}"))?;
    let cells = text(
        ctx,
        &format!(
            "return document.querySelector('tr[data-id=\"{}\"]').innerText",
            f.main
        ),
    )?;
    check(
        cells.contains("$0.50") && cells.contains("1.2k") && cells.contains("m-opus"),
        format!("cost, tokens and model columns: {cells}"),
    )?;
    // Filter by source.
    d.wait(
        "the source choices",
        "return document.querySelector('select[name=source] option[value=telegram]')",
    )?;
    d.click("select[name=source] option[value=telegram]")?;
    d.wait(
        "only telegram",
        "return document.querySelectorAll('#sessions-table tbody tr.session').length === 1",
    )?;
    check(
        rows(ctx)? == vec![f.telegram.clone()],
        "the telegram filter",
    )?;
    check(
        d.url()?.contains("source=telegram"),
        "the filter is in the address",
    )?;
    d.click("select[name=source] option[value='']")?;
    d.wait(
        "all again",
        "return document.querySelectorAll('#sessions-table tbody tr.session').length === 9",
    )?;
    // Sort by cost by clicking its column.
    d.click("#sessions-table th.sortable[title='Sort by cost']")?;
    d.wait("most expensive first", &format!("return document.querySelector('#sessions-table tbody tr.session')?.dataset.id === '{}'", f.main))?;
    // The sub-agent session is grouped under its parent.
    check(
        !rows(ctx)?.contains(&f.task),
        "children are not top-level rows",
    )?;
    let kids = text(
        ctx,
        &format!(
            "return document.querySelector('tr[data-id=\"{}\"] button.kids').textContent",
            f.main
        ),
    )?;
    check(
        kids == "▸ 1 sub-session",
        format!("the children toggle: {kids}"),
    )?;
    d.click(&format!("tr[data-id=\"{}\"] button.kids", f.main))?;
    d.wait(
        "the child row",
        &format!(
            "return document.querySelector('tr.child[data-id=\"{}\"][data-parent=\"{}\"]')",
            f.task, f.main
        ),
    )?;
    Ok(())
}

fn conversation(ctx: &Ctx) -> Result<()> {
    let (d, f) = (&ctx.driver, &ctx.fixture);
    d.open(&ctx.server.url(&format!("/s/{}", f.main)))?;
    d.wait(
        "the messages",
        "return document.querySelectorAll('#messages .msg').length === 4",
    )?;
    // The conversation downloads as Markdown, saved under its id.
    let link = d.exec(
        "const a = document.getElementById('download-markdown'); return [a.getAttribute('href'), a.hasAttribute('download')]",
        json!([]),
    )?;
    check(
        link == json!([format!("/api/sessions/{}/markdown", f.main), true]),
        format!("the download link: {link}"),
    )?;
    d.exec(
        "fetch(document.getElementById('download-markdown').href).then((r) => r.text()).then((t) => { window.__md = t; })",
        json!([]),
    )?;
    d.wait("the Markdown", "return typeof window.__md === 'string'")?;
    let md = text(ctx, "return window.__md")?;
    check(
        md.starts_with("# Fix the build\n") && md.contains("<script>window.__xss = 1</script>"),
        format!("the Markdown: {md:.200}"),
    )?;
    // Stored HTML is text: visible as written, never an element, never run.
    let shown = text(
        ctx,
        "return document.querySelector('#msg_main_1 .md').textContent",
    )?;
    check(
        shown.contains("<script>window.__xss = 1</script>"),
        format!("the script shows as text: {shown}"),
    )?;
    check(
        shown.contains("<img src=x onerror=\"window.__xss = 2\">"),
        format!("the img shows as text: {shown}"),
    )?;
    let harmless = d.exec(
        "return window.__xss === undefined && !document.querySelector('#messages script, #messages img, [onerror]')",
        json!([]),
    )?;
    check(
        harmless == json!(true),
        "no script ran and no element was made from stored HTML",
    )?;
    check(SCRIPT_TEXT.contains("**done**"), "fixture")?;
    check(
        text(
            ctx,
            "return document.querySelector('#msg_main_1 strong')?.textContent",
        )? == "done",
        "markdown is rendered",
    )?;
    // Code highlighted; reasoning and tool calls folded; the edit as a diff.
    d.wait(
        "highlighted code",
        "return document.querySelector('#msg_main_2 .md pre code .hljs-keyword')",
    )?;
    check(
        d.exec(
            "return document.querySelector('#msg_main_2 details.reasoning').open",
            json!([]),
        )? == json!(false),
        "reasoning is collapsed",
    )?;
    check(
        d.exec(
            "return [...document.querySelectorAll('#msg_main_2 details.tool')].every(t => !t.open)",
            json!([]),
        )? == json!(true),
        "tool calls are collapsed",
    )?;
    // Reasoning the provider redacted says so when opened, rather than showing nothing.
    d.click("#msg_main_4 details.reasoning > summary")?;
    d.wait(
        "the redacted reasoning says so",
        "return document.querySelector('#msg_main_4 details.reasoning')?.textContent\
             .includes('(redacted by the provider)')",
    )?;
    d.click("#msg_main_2 details.tool > summary")?;
    d.wait(
        "the tool opens",
        "return document.querySelector('#msg_main_2 details.tool').open",
    )?;
    check(
        text(
            ctx,
            "return document.querySelector('#msg_main_2 .diff .ln.del')?.textContent",
        )?
        .contains("let b = 2;"),
        "the removed line",
    )?;
    check(
        text(
            ctx,
            "return document.querySelector('#msg_main_2 .diff .ln.add')?.textContent",
        )?
        .contains("let b = 3;"),
        "the added line",
    )?;
    check(
        text(
            ctx,
            "return document.querySelector('#msg_main_2 details.tool')?.innerText",
        )?
        .contains("replaced 1 occurrence"),
        "the tool output",
    )?;
    // The sub-agent session is linked from its task call; steps show tokens and cost.
    d.wait(
        "the sub-agent link",
        &format!(
            "return document.querySelector('#msg_main_2 a[href=\"/s/{}\"]')",
            f.task
        ),
    )?;
    let step = text(
        ctx,
        "return document.querySelector('#msg_main_2 .step').textContent",
    )?;
    check(
        step.contains("3,060 tokens") && step.contains("$0.0108"),
        format!("per-step usage: {step}"),
    )?;
    // The compaction summary is marked.
    check(d.exec("return !!document.querySelector('#msg_main_3.summary .summary-mark') && !!document.querySelector('#msg_main_3 .compaction')", json!([]))? == json!(true), "the summary is marked")?;
    let totals = text(
        ctx,
        "return document.getElementById('session-totals').textContent",
    )?;
    check(
        totals.contains("$0.50") && totals.contains("1,200"),
        format!("session totals: {totals}"),
    )?;
    // Counts read as English: the one sub-agent session is "1 sub-session".
    let children = text(
        ctx,
        "return document.querySelector('.related details.children summary').textContent",
    )?;
    check(
        children == "1 sub-session (sub-agents, forks, titles)",
        format!("the sub-sessions summary: {children}"),
    )?;
    // Each names its model (a sub-agent, or an agent's title call, often runs on another).
    let child = text(
        ctx,
        "return document.querySelector('.related details.children li').textContent",
    )?;
    check(
        child.contains("task · m-haiku · 1 message · $0.05"),
        format!("the sub-session line: {child}"),
    )?;
    // The child links back to its parent.
    d.click(&format!(".related a[href=\"/s/{}\"]", f.task))?;
    d.wait("the child session", &format!("return location.pathname === '/s/{}' && document.getElementById('main').dataset.state === 'ready'", f.task))?;
    d.wait(
        "the parent link",
        &format!(
            "return document.querySelector('.related a[href=\"/s/{}\"]')",
            f.main
        ),
    )?;
    Ok(())
}

fn deep_link_and_progressive(ctx: &Ctx) -> Result<()> {
    let (d, f) = (&ctx.driver, &ctx.fixture);
    d.open(&ctx.server.url(&format!("/s/{}#msg_long_0180", f.long)))?;
    d.wait(
        "the linked message, highlighted",
        "return document.querySelector('#msg_long_0180.target')",
    )?;
    check(d.exec("return !document.getElementById('msg_long_0000') && !!document.getElementById('load-earlier')", json!([]))? == json!(true), "only the linked part is loaded")?;
    let top = d.exec("return Math.abs(document.getElementById('msg_long_0180').getBoundingClientRect().top) < 200", json!([]))?;
    check(top == json!(true), "the page scrolled to the message")?;
    d.click("#load-earlier")?;
    d.wait(
        "earlier messages",
        "return document.getElementById('msg_long_0080')",
    )?;
    // From the start, pages load as the end scrolls into view.
    d.open(&ctx.server.url(&format!("/s/{}", f.long)))?;
    d.wait(
        "the first page",
        "return document.querySelectorAll('#messages .msg').length === 100",
    )?;
    check(
        d.exec(
            "return !document.getElementById('msg_long_0249')",
            json!([]),
        )? == json!(true),
        "not everything at once",
    )?;
    d.wait(
        "the rest, by scrolling",
        "window.scrollTo(0, document.body.scrollHeight); return document.querySelectorAll('#messages .msg').length === 250",
    )?;
    Ok(())
}

fn search(ctx: &Ctx) -> Result<()> {
    let (d, f) = (&ctx.driver, &ctx.fixture);
    d.open(&ctx.server.url("/search"))?;
    // The box's hint promises only what the search does: words, phrases, prefixes,
    // exclusions and CJK text, not any substring (a symbol or an emoji alone is no word).
    let hint = text(
        ctx,
        "return document.getElementById('search-input').placeholder",
    )?;
    check(
        hint.contains("\"a phrase\"") && hint.contains("fix*") && !hint.contains("substring"),
        format!("the search hint is true: {hint:?}"),
    )?;
    // A word being typed already finds longer words.
    d.type_into("#search-input", "weat")?;
    d.wait(
        "a hit for the unfinished word",
        "return document.querySelectorAll('#hits a.hit').length === 1",
    )?;
    d.type_into("#search-input", "her")?;
    d.wait(
        "a hit",
        "return document.querySelectorAll('#hits a.hit').length === 1 && location.search.includes('q=weather')",
    )?;
    d.wait(
        "the query in the address",
        "return location.search.includes('q=weather')",
    )?;
    let marked = text(
        ctx,
        "return document.querySelector('#hits a.hit mark').textContent",
    )?;
    check(
        marked.eq_ignore_ascii_case("weather"),
        format!("the match is highlighted: {marked}"),
    )?;
    // Filters narrow it: no assistant message mentions the weather.
    d.click("select[name=role] option[value=assistant]")?;
    d.wait("no hits", "return document.querySelectorAll('#hits a.hit').length === 0 && document.getElementById('search-status').textContent.includes('No matches')")?;
    d.click("select[name=role] option[value='']")?;
    d.wait(
        "the hit again",
        "return document.querySelectorAll('#hits a.hit').length === 1",
    )?;
    // So does a directory: the weather was asked about on telegram, not in /p/one.
    d.click("select[name=directory] option[value='/p/one']")?;
    d.wait("no hits in the directory", "return document.querySelectorAll('#hits a.hit').length === 0 && location.search.includes('directory=%2Fp%2Fone')")?;
    d.click("select[name=directory] option[value='']")?;
    d.wait(
        "the hit in any directory",
        "return document.querySelectorAll('#hits a.hit').length === 1",
    )?;
    d.click("#hits a.hit")?;
    d.wait(
        "the message in its conversation",
        "return document.querySelector('#msg_tg_1.target')",
    )?;
    check(
        d.url()?.ends_with(&format!("/s/{}#msg_tg_1", f.telegram)),
        "the address names the message",
    )?;
    // Stored HTML in a snippet is text too.
    d.goto(&ctx.server.url("/search?q=xss"))?;
    d.wait(
        "the script hit",
        "return document.querySelectorAll('#hits a.hit').length >= 1",
    )?;
    let snippet = text(
        ctx,
        "return document.querySelector('#hits .snippet').textContent",
    )?;
    check(
        snippet.contains("<script>"),
        format!("snippet text: {snippet}"),
    )?;
    check(d.exec("return window.__xss === undefined && !document.querySelector('#hits script, #hits img')", json!([]))? == json!(true), "the snippet made no element")?;
    // An untitled session is named by how it began, in quotes, in its hits and on its page.
    d.goto(&ctx.server.url("/search?q=builder"))?;
    d.wait(
        "the sub-agent's hit",
        "return document.querySelectorAll('#hits a.hit').length === 1",
    )?;
    let named = text(
        ctx,
        "return document.querySelector('#hits .hit-head .t.untitled').textContent",
    )?;
    check(
        named == "“Which files call the builder?”",
        format!("the hit names the untitled session: {named:?}"),
    )?;
    d.click("#hits a.hit")?;
    d.wait("its page", "return document.querySelector('h1 .untitled')")?;
    let heading = text(
        ctx,
        "return document.querySelector('h1 .untitled').textContent + ' | ' + document.title",
    )?;
    check(
        heading == "“Which files call the builder?” | “Which files call the builder?” · Scribe",
        format!("the page names it too: {heading:?}"),
    )?;
    // A conversation's page searches the directory its agent worked in.
    d.goto(&ctx.server.url(&format!("/s/{}", f.main)))?;
    d.wait(
        "the link",
        "return document.getElementById('search-directory')",
    )?;
    d.click("#search-directory")?;
    d.wait(
        "the directory chosen",
        "return location.pathname === '/search' && document.querySelector('select[name=directory]')?.value === '/p/one'",
    )?;
    d.type_into("#search-input", "build")?;
    // Its sub-agent worked there too.
    d.wait(
        "hits of that directory only",
        &format!("const hits = [...document.querySelectorAll('#hits a.hit')]; return hits.length > 0 && hits.every((a) => ['/s/{}#', '/s/{}#'].some((s) => a.getAttribute('href').startsWith(s)))", f.main, f.task),
    )?;
    Ok(())
}

fn usage(ctx: &Ctx) -> Result<()> {
    let d = &ctx.driver;
    d.open(&ctx.server.url("/usage?period=all&stack=model&metric=cost"))?;
    d.wait(
        "bars",
        "return document.querySelectorAll('svg.chart rect.bar').length > 0",
    )?;
    let stats: Value = get_json(ctx.server.addr, "/api/stats?by=model");
    let rows = d.exec("return [...document.querySelectorAll('#stats-table tbody tr')].map(r => r.innerText.split('\\t')[0])", json!([]))?;
    let keys: Vec<Value> = stats["rows"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["key"].clone())
        .collect();
    let mut expected = keys.clone();
    expected.push(json!("total"));
    check(
        rows == Value::Array(expected),
        format!("the table has the stats rows: {rows}"),
    )?;
    let total = text(
        ctx,
        "return document.querySelector('#stats-table tr.total').innerText",
    )?;
    check(
        total.contains("$3.12") && total.contains("11"),
        format!("the totals are the stats totals: {total}"),
    )?;
    let bars = d.exec("return new Set([...document.querySelectorAll('svg.chart rect.bar')].map(r => r.dataset.key)).size", json!([]))?;
    check(bars == json!(3), format!("one colour per model: {bars}"))?;
    // The fixture's usage is months old: no block is open, and no card says one is.
    let block = d.exec(
        "return document.getElementById('block-card') === null",
        json!([]),
    )?;
    check(block == json!(true), "no open block card without one open")?;
    // All of time comes in the bars its length suits (the fixture's ~11 months: weeks,
    // until it is over three years old), each at the key the API gives it, and the note
    // says which.
    let auto: Value = get_json(ctx.server.addr, "/api/usage?stack=model&step=auto");
    let step = auto["step"].as_str().unwrap_or("");
    let mut keys: Vec<Value> = auto["days"]
        .as_array()
        .unwrap()
        .iter()
        .map(|d| d["day"].clone())
        .collect();
    keys.sort_by_key(|k| k.to_string());
    let shown = d.exec(
        "return [...new Set([...document.querySelectorAll('svg.chart rect.bar')].map(r => r.dataset.day))].sort()",
        json!([]),
    )?;
    check(
        shown == Value::Array(keys.clone()),
        format!("the bars are the {step}s of /api/usage: {shown} against {keys:?}"),
    )?;
    let note = text(
        ctx,
        "return document.querySelector('.chart-note').innerText",
    )?;
    let says = match step {
        "day" => "Days are UTC calendar days",
        "week" => "Weeks run Monday to Sunday",
        _ => "Months are UTC calendar months",
    };
    check(
        note.contains(says),
        format!("the note says {step}s: {note}"),
    )?;
    if step == "week" {
        let mondays = d.exec(
            "return [...document.querySelectorAll('svg.chart rect.bar')].every(r => new Date(r.dataset.day + 'T00:00:00Z').getUTCDay() === 1)",
            json!([]),
        )?;
        check(
            mondays == json!(true),
            "every week's bar is keyed by its Monday",
        )?;
    }
    // The top sessions: the conversations of the period, each with its tokens in it.
    let usage: Value = get_json(ctx.server.addr, "/api/usage?stack=model");
    let top = d.exec(
        "return [...document.querySelectorAll('#top-table tbody tr')].map(r => r.cells[1].innerText)",
        json!([]),
    )?;
    let expected: Vec<Value> = usage["top"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| {
            let tokens = t["period"]["tokens"]["total"].as_i64().unwrap();
            json!(if tokens >= 1000 {
                format!("{:.1}k", tokens as f64 / 1000.0)
            } else {
                tokens.to_string()
            })
        })
        .collect();
    check(
        !expected.is_empty() && top == Value::Array(expected.clone()),
        format!("the top sessions' tokens in the period: {top} against {expected:?}"),
    )?;
    d.click(".seg[aria-label=stack] button[data-value=source]")?;
    d.wait("stacked by source", "return document.querySelector('.legend')?.innerText.includes('telegram') && location.search.includes('stack=source')")?;
    // By directory: each row of the table is a link to the sessions of that directory.
    d.click(".seg[aria-label=stack] button[data-value=directory]")?;
    d.wait(
        "stacked by directory",
        "return location.search.includes('stack=directory') && document.querySelector('#stats-table a[href=\"/?directory=%2Fp%2Fone\"]')",
    )?;
    d.click("#stats-table a[href=\"/?directory=%2Fp%2Fone\"]")?;
    d.wait(
        "the sessions of /p/one",
        "return document.querySelector('select[name=directory]')?.value === '/p/one' && document.querySelectorAll('#sessions-table tbody tr').length > 0",
    )?;
    d.exec("history.back()", json!([]))?;
    d.wait(
        "the usage page again",
        "return location.pathname === '/usage' && document.querySelector('#stats-table')",
    )?;
    d.click(".seg[aria-label=period] button[data-value='7d']")?;
    d.wait(
        "an empty recent week",
        "return document.querySelector('svg.chart')?.textContent.includes('No usage')",
    )?;
    Ok(())
}

/// The tests that need a PostgreSQL server (SCRIBE_TEST_POSTGRES).
const NEEDS_POSTGRES: &[&str] =
    &["on_postgres_a_conversation_updates_live_while_another_process_writes"];

fn live(ctx: &Ctx) -> Result<()> {
    follows_another_process(ctx, &ctx.server, &ctx.fixture.db)
}

/// The same on a PostgreSQL copy of the fixture, served by a second server: the page
/// follows through PostgreSQL's change notifications.
fn live_postgres(ctx: &Ctx) -> Result<()> {
    let url = scribe_db::testing::fresh_test_database("scribe_browser_live")?;
    {
        let sqlite = scribe_db::Database::open(&ctx.fixture.db)?;
        let pg = scribe_db::Database::open(&url)?;
        scribe_db::copy::copy(&sqlite, &pg, |_| std::ops::ControlFlow::Continue(()))?;
    }
    let url = std::path::PathBuf::from(url);
    let server = serve(&url, None);
    follows_another_process(ctx, &server, &url)
}

/// The long conversation open in the page follows a message another process appends to
/// `db` (served by `server`): the message appears, the header counts it.
fn follows_another_process(ctx: &Ctx, server: &Running, db: &std::path::Path) -> Result<()> {
    let (d, f) = (&ctx.driver, &ctx.fixture);
    let before =
        get_json(server.addr, &format!("/api/sessions/{}", f.long))["session"]["message_count"]
            .as_u64()
            .ok_or("no message count")?;
    d.open(&server.url(&format!("/s/{}", f.long)))?;
    d.wait_live()?;
    d.wait(
        "everything",
        &format!(
            "window.scrollTo(0, document.body.scrollHeight); \
             return document.querySelectorAll('#messages .msg').length === {before}"
        ),
    )?;
    let exe = std::env::current_exe()?;
    let written = format!("Live: written by another process into {before}");
    common::write_from_another_process(&exe, &[], db, &f.long, &written);
    d.wait(
        "the new message in the page",
        &format!("return document.getElementById('messages').textContent.includes('{written}')"),
    )?;
    let count = text(
        ctx,
        "return document.getElementById('session-totals').textContent",
    )?;
    check(
        count.contains(&format!("messages {}", before + 1)),
        format!("the header follows: {count}"),
    )?;
    Ok(())
}

fn token(ctx: &Ctx) -> Result<()> {
    let d = &ctx.driver;
    let server = serve(&ctx.fixture.db, Some("browser-t0ken"));
    d.goto(&server.url("/usage"))?;
    d.wait(
        "the refusal",
        "return document.body.innerText.includes('token')",
    )?;
    d.open(&server.url("/?token=browser-t0ken"))?;
    d.wait(
        "the list",
        "return document.querySelectorAll('#sessions-table tbody tr.session').length === 9",
    )?;
    check(
        !d.url()?.contains("token"),
        "the token left the address bar",
    )?;
    // Live, through the cookie.
    d.wait_live()?;
    d.open(&server.url("/usage"))?;
    Ok(())
}

/// A copy of the fixture whose newest session's row holds text where a time belongs
/// (another program's write): the list names it above the table and lists the other
/// eight, where the whole page used to show an error; a search meeting its message names
/// the hit it left out above the hits.
fn left_out(ctx: &Ctx) -> Result<()> {
    let (d, f) = (&ctx.driver, &ctx.fixture);
    let dir = tempfile::tempdir()?;
    let copy = dir.path().join("damaged.db");
    let conn = rusqlite::Connection::open(&f.db)?;
    conn.execute("VACUUM INTO ?1", [copy.to_string_lossy()])?;
    drop(conn);
    let conn = rusqlite::Connection::open(&copy)?;
    conn.execute(
        "UPDATE sessions SET created_at = 'yesterday' WHERE id = ?1",
        [&f.telegram],
    )?;
    drop(conn);
    let server = serve(&copy, None);
    d.open(&server.url("/"))?;
    d.wait(
        "8 sessions listed",
        "return document.querySelectorAll('#sessions-table tbody tr.session').length === 8",
    )?;
    let notice = text(ctx, "return document.getElementById('left-out').innerText")?;
    check(
        notice.contains("1 session could not be read and was left out")
            && notice.contains(&format!("session {}: ", f.telegram))
            && notice.contains("scribe db check"),
        format!("the notice: {notice}"),
    )?;
    check(
        !rows(ctx)?.contains(&f.telegram),
        "the unreadable session is not listed",
    )?;
    d.open(&server.url("/search?q=weather"))?;
    d.wait(
        "the search names the hit it left out",
        "return document.getElementById('left-out').innerText.includes('left out')",
    )?;
    let notice = text(ctx, "return document.getElementById('left-out').innerText")?;
    check(
        notice.contains("1 search hit could not be read and was left out")
            && notice.contains(&format!(
                "message msg_tg_1: database error: session {}: ",
                f.telegram
            ))
            && notice.contains("name: created_at"),
        format!("the search's notice: {notice}"),
    )?;
    let hits = text(
        ctx,
        "return String(document.querySelectorAll('#hits a.hit').length)",
    )?;
    check(hits == "0", format!("no hit shown: {hits}"))?;
    let status = text(
        ctx,
        "return document.getElementById('search-status').textContent",
    )?;
    check(
        status.starts_with("No readable matches for “weather”"),
        format!("the status: {status}"),
    )?;
    // The sound store shows no notice.
    d.open(&ctx.server.url("/search?q=weather"))?;
    d.wait(
        "one hit",
        "return document.querySelectorAll('#hits a.hit').length === 1",
    )?;
    let notice = text(ctx, "return document.getElementById('left-out').innerText")?;
    check(notice.is_empty(), format!("no search notice: {notice}"))?;
    d.open(&ctx.server.url("/"))?;
    d.wait(
        "9 sessions listed",
        "return document.querySelectorAll('#sessions-table tbody tr.session').length === 9",
    )?;
    let notice = text(ctx, "return document.getElementById('left-out').innerText")?;
    check(notice.is_empty(), format!("no notice: {notice}"))
}

/// Set in a process of this binary that starts a browser, says `held <owner mark>` and
/// waits to be killed ([`killed_test_process`]).
const HOLD_ENV: &str = "SCRIBE_BROWSER_TEST_HOLD";

/// The body of a holding process (see [`HOLD_ENV`]); never returns.
fn hold() -> ! {
    let (chromium, chromedriver) = find_browser().expect("a browser");
    let _driver = Driver::start(&chromium, &chromedriver, 400, 300).expect("the browser starts");
    let mut out = std::io::stdout().lock();
    writeln!(out, "held {}", webdriver::owner_mark()).unwrap();
    out.flush().unwrap();
    loop {
        std::thread::sleep(std::time::Duration::from_secs(3600));
    }
}

/// Starts this binary as a holding process; returns it and its owner mark once its
/// browser runs.
fn start_holder() -> Result<(Child, String)> {
    let mut child = Command::new(std::env::current_exe()?)
        .env(HOLD_ENV, "1")
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()?;
    let mut line = String::new();
    BufReader::new(child.stdout.take().ok_or("no stdout")?).read_line(&mut line)?;
    let Some(mark) = line.trim().strip_prefix("held ") else {
        let _ = child.kill();
        let _ = child.wait();
        return Err(format!("the holding process did not start a browser: {line:?}").into());
    };
    Ok((child, mark.to_owned()))
}

/// The (pid, command name) of every process marked as started for `mark`'s process.
fn browser_of(mark: &str) -> Vec<(u32, String)> {
    webdriver::marked_processes()
        .into_iter()
        .filter(|(_, m)| m == mark)
        .map(|(pid, _)| {
            let name = std::fs::read_to_string(format!("/proc/{pid}/comm")).unwrap_or_default();
            (pid, name.trim().to_owned())
        })
        .collect()
}

/// Waits (bounded by [`WAIT`]) until no process of `mark`'s browser is left.
fn all_gone(mark: &str, what: &str) -> Result<()> {
    let started = Instant::now();
    loop {
        let left = browser_of(mark);
        if left.is_empty() {
            return Ok(());
        }
        if started.elapsed() > WAIT {
            return Err(format!("{what}: still running: {left:?}").into());
        }
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
}

fn kill(pid: u32) -> Result<()> {
    let status = Command::new("kill")
        .args(["-KILL", &pid.to_string()])
        .status()?;
    check(status.success(), format!("kill -KILL {pid}: {status}"))
}

fn killed_test_process(_: &Ctx) -> Result<()> {
    // A test process killed outright: its supervisor sees the pipe close and kills the
    // browser at once.
    let (mut holder, mark) = start_holder()?;
    let running = browser_of(&mark);
    let names: Vec<&str> = running.iter().map(|(_, n)| n.as_str()).collect();
    check(
        names.contains(&"chromedriver") && names.contains(&"chromium"),
        format!("a browser runs for the holder: {running:?}"),
    )?;
    holder.kill()?; // SIGKILL: no destructor runs
    holder.wait()?;
    all_gone(&mark, "after SIGKILL of the test process")?;

    // Its supervisor killed as well: nothing kills the browser until the next start-up.
    let (mut holder, mark) = start_holder()?;
    let supervisor = browser_of(&mark)
        .into_iter()
        .find(|(_, name)| name == "sh")
        .ok_or("no supervisor")?;
    kill(supervisor.0)?;
    holder.kill()?;
    holder.wait()?;
    let left = browser_of(&mark);
    check(
        left.iter().any(|(_, name)| name == "chromedriver"),
        format!("the browser is left behind: {left:?}"),
    )?;
    check(
        webdriver::sweep_orphans() > 0,
        "the start-up sweep kills leftovers",
    )?;
    all_gone(&mark, "after the start-up sweep")
}

/// The Created cell of each listed top-level row, by session id.
fn created_cells(ctx: &Ctx) -> Result<Vec<(String, String)>> {
    let value = ctx.driver.exec(
        "return [...document.querySelectorAll('#sessions-table tbody tr.session:not(.child)')].map(r => [r.dataset.id, r.cells[6].innerText.trim()])",
        json!([]),
    )?;
    Ok(serde_json::from_value(value)?)
}

fn dates_in_utc(ctx: &Ctx) -> Result<()> {
    let (d, f) = (&ctx.driver, &ctx.fixture);
    // 14 hours ahead of UTC: most of the fixture's sessions fall on another local day.
    const AHEAD: i64 = 14 * 3_600_000;
    d.set_time_zone("Pacific/Kiritimati")?;
    let outcome = (|| -> Result<()> {
        let api = get_json(ctx.server.addr, "/api/sessions?limit=200");
        let created: Vec<(String, i64)> = api["sessions"]
            .as_array()
            .ok_or("no sessions")?
            .iter()
            .map(|s| {
                (
                    s["id"].as_str().unwrap().to_owned(),
                    s["created_at"].as_i64().unwrap(),
                )
            })
            .collect();
        check(
            created
                .iter()
                .any(|(_, at)| utc_date(*at) != utc_date(at + AHEAD)),
            "some session is on another day in the browser's zone (else this proves nothing)",
        )?;
        d.open(&ctx.server.url("/"))?;
        check(
            d.exec(
                "return Intl.DateTimeFormat().resolvedOptions().timeZone",
                json!([]),
            )? == json!("Pacific/Kiritimati"),
            "the page runs in the emulated zone",
        )?;
        let heads = text(
            ctx,
            "return document.querySelector('#sessions-table thead').innerText",
        )?;
        check(
            heads.contains("Created (UTC)"),
            format!("the column says UTC: {heads}"),
        )?;
        let labels = text(
            ctx,
            "return [...document.querySelectorAll('.filters label')].map(l => l.innerText).join('|')",
        )?;
        check(
            labels.contains("From (UTC)") && labels.contains("To (UTC)"),
            format!("the date filters say UTC: {labels}"),
        )?;
        // Every Created cell is the UTC date of its session.
        let shown = created_cells(ctx)?;
        check(!shown.is_empty(), "rows")?;
        for (id, cell) in &shown {
            let at = created
                .iter()
                .find(|(i, _)| i == id)
                .ok_or("a listed id")?
                .1;
            check(
                cell == &utc_date(at),
                format!("{id}: shown {cell}, created {}", utc_date(at)),
            )?;
        }
        // A From–To filter of one day lists exactly the sessions shown with that date.
        let day = utc_date(
            created
                .iter()
                .find(|(id, _)| id == &f.main)
                .ok_or("main")?
                .1,
        );
        d.open(&ctx.server.url(&format!("/?from={day}&to={day}")))?;
        let filtered = created_cells(ctx)?;
        let want: BTreeSet<&String> = shown
            .iter()
            .filter(|(_, c)| c == &day)
            .map(|(id, _)| id)
            .collect();
        let got: BTreeSet<&String> = filtered.iter().map(|(id, _)| id).collect();
        check(
            got == want && got.contains(&f.main) && filtered.iter().all(|(_, c)| c == &day),
            format!("from=to={day}: listed {filtered:?}, shown with that date {want:?}"),
        )?;
        // A message's time is UTC and says so.
        d.open(&ctx.server.url(&format!("/s/{}", f.main)))?;
        let first = get_json(
            ctx.server.addr,
            &format!("/api/sessions/{}/messages?limit=1", f.main),
        );
        let at = first["messages"][0]["created_at"]
            .as_i64()
            .ok_or("a message time")?;
        let time = text(
            ctx,
            "return document.querySelector('#messages .msg time').innerText",
        )?;
        check(
            time.starts_with(&utc_date(at)) && time.ends_with("UTC"),
            format!("message time {time:?} for {}", utc_date(at)),
        )
    })();
    d.set_time_zone("")?;
    outcome
}

/// What the list says it is sorted by: the arrowed column's title, the `sort` choice.
fn sort_shown(ctx: &Ctx) -> Result<Value> {
    ctx.driver.exec(
        "const th = [...document.querySelectorAll('#sessions-table th')].filter(t => t.classList.contains('sorted') || t.textContent.includes('↓'));
         return [th.map(t => t.title), document.querySelector('select[name=sort]').value]",
        json!([]),
    )
}

fn sort_controls_agree(ctx: &Ctx) -> Result<()> {
    let (d, f) = (&ctx.driver, &ctx.fixture);
    d.open(&ctx.server.url("/"))?;
    d.wait(
        "the sort choice",
        "return document.querySelector('select[name=sort]')",
    )?;
    check(
        sort_shown(ctx)? == json!([["Sort by created"], "created"]),
        format!("newest first at the start: {}", sort_shown(ctx)?),
    )?;
    // A column heading sorts, moves the arrow there and sets the choice to match.
    d.click("#sessions-table th.sortable[title='Sort by cost']")?;
    d.wait("most expensive first", &format!("return document.querySelector('#sessions-table tbody tr.session')?.dataset.id === '{}'", f.main))?;
    check(
        sort_shown(ctx)? == json!([["Sort by cost"], "cost"]),
        format!("sorted by cost, shown so: {}", sort_shown(ctx)?),
    )?;
    // The choice sorts and the arrow follows it (no column for `oldest`: no arrow).
    d.click("select[name=sort] option[value=oldest]")?;
    d.wait("oldest first", &format!("return document.querySelector('#sessions-table tbody tr.session')?.dataset.id !== '{}'", f.main))?;
    d.wait_ready()?;
    check(
        sort_shown(ctx)? == json!([[], "oldest"]),
        format!("sorted oldest first, shown so: {}", sort_shown(ctx)?),
    )?;
    // A heading sorts from the keyboard too: it is a button in the tab order.
    d.exec(
        "document.querySelector('#sessions-table th[title=\"Sort by tokens\"] button').focus()",
        json!([]),
    )?;
    check(
        d.exec(
            "return document.activeElement.closest('th')?.title",
            json!([]),
        )? == json!("Sort by tokens"),
        "the heading takes the focus",
    )?;
    d.keys("\u{E007}")?; // Enter
    d.wait(
        "sorted by tokens from the keyboard",
        "return document.querySelector('select[name=sort]').value === 'tokens'",
    )?;
    check(
        d.url()?.contains("sort=tokens"),
        "the sort is in the address",
    )?;
    Ok(())
}

fn tab_title(ctx: &Ctx) -> Result<()> {
    let (d, f) = (&ctx.driver, &ctx.fixture);
    d.open(&ctx.server.url(&format!("/s/{}", f.main)))?;
    d.wait(
        "the conversation's title",
        "return document.title === 'Fix the build · Scribe'",
    )?;
    for (link, title) in [
        ("search", "Search · Scribe"),
        ("usage", "Usage · Scribe"),
        ("sessions", "Sessions · Scribe"),
    ] {
        d.click(&format!("[data-nav={link}]"))?;
        d.wait_ready()?;
        let shown = text(ctx, "return document.title")?;
        check(
            shown == title,
            format!("after opening {link} the tab says {shown:?}"),
        )?;
    }
    Ok(())
}

fn back_over_a_permalink(ctx: &Ctx) -> Result<()> {
    let (d, f) = (&ctx.driver, &ctx.fixture);
    d.open(&ctx.server.url(&format!("/s/{}", f.long)))?;
    d.wait(
        "every message, by scrolling (the live test may have added some)",
        "window.scrollTo(0, document.body.scrollHeight); return !document.getElementById('load-later') && document.querySelectorAll('#messages .msg').length >= 250",
    )?;
    d.exec(
        "window.__list = document.getElementById('messages'); window.__count = document.querySelectorAll('#messages .msg').length",
        json!([]),
    )?;
    d.click("#msg_long_0200 a.permalink")?;
    d.wait(
        "the link in the address",
        "return location.hash === '#msg_long_0200'",
    )?;
    d.wait(
        "the message marked",
        "return document.querySelector('#msg_long_0200.target')",
    )?;
    d.exec("history.back()", json!([]))?;
    d.wait("back without the link", "return location.hash === ''")?;
    // A re-render would come back with only the first page (and lose the reader's place).
    std::thread::sleep(std::time::Duration::from_millis(500));
    let kept = d.exec(
        "return [document.getElementById('messages') === window.__list, document.querySelectorAll('#messages .msg').length === window.__count]",
        json!([]),
    )?;
    check(
        kept == json!([true, true]),
        format!("the conversation as loaded after Back: {kept}"),
    )?;
    d.exec("history.forward()", json!([]))?;
    d.wait(
        "forward to the link",
        "return location.hash === '#msg_long_0200'",
    )?;
    d.wait(
        "the message marked again",
        "return document.querySelector('#msg_long_0200.target')",
    )?;
    check(
        d.exec(
            "return document.getElementById('messages') === window.__list",
            json!([]),
        )? == json!(true),
        "forward keeps it as loaded too",
    )?;
    // Back to another page still routes.
    d.exec("history.back(); history.back()", json!([]))?;
    Ok(())
}

fn narrow_window(ctx: &Ctx) -> Result<()> {
    let (d, f) = (&ctx.driver, &ctx.fixture);
    d.resize(400, 800)?;
    let result = (|| {
        for path in [
            "/".to_owned(),
            format!("/s/{}", f.main),
            "/search?q=build".to_owned(),
            "/usage".to_owned(),
        ] {
            d.open(&ctx.server.url(&path))?;
            std::thread::sleep(std::time::Duration::from_millis(200));
            // The width, and what sticks out (the innermost elements past the right edge).
            let widths = d.exec(
                "const w = document.documentElement.clientWidth;
                 const out = [...document.querySelectorAll('body *')]
                   .filter(e => e.getBoundingClientRect().right > w + 1 && !e.closest('.table-wrap, pre') && ![...e.children].some(c => c.getBoundingClientRect().right > w + 1))
                   .slice(0, 5).map(e => e.tagName + '.' + e.className + ' ' + Math.round(e.getBoundingClientRect().right));
                 return [document.documentElement.scrollWidth, w, out]",
                json!([]),
            )?;
            check(
                widths[0].as_i64() <= widths[1].as_i64(),
                format!("{path} is no wider than the window: {widths}"),
            )?;
        }
        Ok(())
    })();
    d.resize(1280, 900)?;
    result
}

fn head_without_relations(ctx: &Ctx) -> Result<()> {
    let (d, f) = (&ctx.driver, &ctx.fixture);
    d.open(&ctx.server.url(&format!("/s/{}", f.telegram)))?;
    d.wait(
        "the head",
        "return document.getElementById('session-totals')",
    )?;
    let lines = d.exec(
        "return [...document.querySelector('.session-head').childNodes].map(n => n.nodeType === 3 ? 'text:' + n.textContent : n.tagName)",
        json!([]),
    )?;
    check(
        lines == json!(["H1", "DIV", "DIV"]),
        format!("the head holds the title and its facts, nothing else: {lines}"),
    )?;
    check(
        !text(
            ctx,
            "return document.querySelector('.session-head').innerText",
        )?
        .contains("null"),
        "no \"null\" in the head",
    )?;
    Ok(())
}

fn empty_store(ctx: &Ctx) -> Result<()> {
    let d = &ctx.driver;
    let dir = tempfile::tempdir()?;
    let db = dir.path().join("empty.db");
    drop(scribe_db::Database::open(&db)?);
    let server = serve(&db, None);
    d.clear_console()?;
    d.open(&server.url("/"))?;
    let said = d.wait(
        "the empty list explained",
        "return document.getElementById('no-sessions')?.textContent",
    )?;
    check(
        said.as_str()
            .is_some_and(|s| s.contains("No sessions recorded yet") && s.contains("scribe import")),
        format!("an empty store says so and how to fill it: {said}"),
    )?;
    // A filter that matches nothing says that instead.
    d.open(&server.url("/?q=nothing"))?;
    d.wait(
        "no match",
        "return document.querySelector('.more-row')?.textContent === 'No sessions match'",
    )?;
    // The other views work on an empty store, and nothing went to the console.
    for path in ["/search?q=anything", "/usage"] {
        d.open(&server.url(path))?;
    }
    std::thread::sleep(std::time::Duration::from_millis(300));
    d.check_console_clean()?;
    Ok(())
}

fn right_to_left(ctx: &Ctx) -> Result<()> {
    let d = &ctx.driver;
    // A store of its own: the shared fixture's conversations stay as the other tests know them.
    let f = fixture();
    common::append_message(
        &f.db,
        &f.telegram,
        "مرحبا بالعالم، هذا نص عربي مع كلمة English في الوسط.\n\nAnd an English paragraph after it.",
    );
    let server = serve(&f.db, None);
    d.open(&server.url(&format!("/s/{}", f.telegram)))?;
    let dirs = d.wait(
        "the two paragraphs",
        "const ps = [...document.querySelectorAll('#messages .msg:last-child .md p')];
         return ps.length === 2 && ps.map(p => getComputedStyle(p).direction)",
    )?;
    check(
        dirs == json!(["rtl", "ltr"]),
        format!("Arabic right to left, English left to right: {dirs}"),
    )?;
    d.open(&server.url("/search?q=%D9%85%D8%B1%D8%AD%D8%A8%D8%A7"))?;
    let dir = d.wait(
        "the hit",
        "const s = document.querySelector('.hit .snippet'); return s && getComputedStyle(s).direction",
    )?;
    check(
        dir == json!("rtl"),
        format!("an Arabic snippet right to left: {dir}"),
    )?;
    Ok(())
}

fn back_returns_to_the_place(ctx: &Ctx) -> Result<()> {
    let d = &ctx.driver;
    // A short window, so that the nine sessions and the hits scroll.
    d.resize(1000, 420)?;
    let result = (|| {
        for (path, link) in [
            (
                "/",
                "#sessions-table tbody tr.session:last-child td.title-cell a",
            ),
            ("/search?q=step", "#hits a.hit:nth-last-child(3)"),
        ] {
            d.open(&ctx.server.url(path))?;
            d.wait(
                "the link",
                &format!("return document.querySelector('{link}')"),
            )?;
            d.click(link)?;
            d.wait(
                "the conversation",
                "return location.pathname.startsWith('/s/')",
            )?;
            d.wait_ready()?;
            d.exec("history.back()", json!([]))?;
            d.wait("back", "return !location.pathname.startsWith('/s/')")?;
            d.wait_ready()?;
            let at = d.wait(
                "the same place",
                &format!(
                    "const a = document.querySelector('{link}'); const r = a && a.getBoundingClientRect();
                     return r && window.scrollY > 0 && r.top >= 0 && r.bottom <= innerHeight && window.scrollY"
                ),
            );
            check(
                at.is_ok(),
                format!("{path}: back where the link was clicked: {at:?}"),
            )?;
        }
        Ok(())
    })();
    d.resize(1280, 900)?;
    result
}

fn other_writes_leave_it_alone(ctx: &Ctx) -> Result<()> {
    let d = &ctx.driver;
    // A store of its own: the shared fixture's conversations stay as the other tests know them.
    let (f, server) = serve_fixture();
    d.open(&server.url(&format!("/s/{}", f.main)))?;
    d.wait_live()?;
    let last = f.main_messages.last().unwrap();
    d.exec(
        &format!("window.__last = document.getElementById('{last}'); window.__head = document.querySelector('.session-head h1'); window.__version = document.body.dataset.version"),
        json!([]),
    )?;
    // Another conversation grows: the open one's last message is not drawn again (a reader
    // selecting its text would lose the selection twice a second while an agent works).
    common::append_message(&f.db, &f.telegram, "elsewhere");
    d.wait_change_seen()?;
    std::thread::sleep(std::time::Duration::from_millis(800));
    check(
        d.exec(
            &format!("return document.getElementById('{last}') === window.__last && document.querySelector('.session-head h1') === window.__head"),
            json!([]),
        )? == json!(true),
        "the last message and the head are the same elements",
    )?;
    // This conversation grows: the new message is shown.
    common::append_message(&f.db, &f.main, "here");
    d.wait(
        "the new message",
        "return document.querySelectorAll('#messages .msg').length === 5",
    )?;
    Ok(())
}

fn list_keeps_focus(ctx: &Ctx) -> Result<()> {
    let d = &ctx.driver;
    let (f, server) = serve_fixture();
    d.open(&server.url("/"))?;
    let link = format!("tr[data-id=\"{}\"] td.title-cell a", f.main);
    d.wait(
        "the row",
        &format!("return document.querySelector('{link}')"),
    )?;
    d.wait_live()?;
    d.exec(
        &format!("document.querySelector('{link}').focus()"),
        json!([]),
    )?;
    // Another session grows: its row shows it, and the focused link keeps the focus.
    common::append_message(&f.db, &f.telegram, "elsewhere");
    let cells = format!("tr[data-id=\"{}\"] td.num", f.telegram);
    d.wait(
        "the grown session's row",
        &format!("return document.querySelector('{cells}')?.textContent === '2'"),
    )?;
    let focused = d.exec(
        &format!("return document.activeElement === document.querySelector('{link}')"),
        json!([]),
    )?;
    let why = d.exec("const a = document.activeElement; return a.tagName + ' ' + a.textContent.slice(0, 40) + ' ' + a.isConnected", json!([]))?;
    check(
        focused == json!(true),
        format!("the focus stays on the link it was on: {why}"),
    )?;
    check(
        rows(ctx)?.len() == 9 && rows(ctx)?[0] == f.telegram,
        format!("the list is whole and in order: {:?}", rows(ctx)?),
    )?;
    Ok(())
}

fn hits_stay(ctx: &Ctx) -> Result<()> {
    let d = &ctx.driver;
    let (f, server) = serve_fixture();
    d.open(&server.url("/search"))?;
    d.wait_live()?;
    d.type_into("#search-input", "step")?;
    d.wait(
        "hits while typing",
        "return document.querySelectorAll('#hits a.hit').length > 3 && document.getElementById('search-status').textContent.includes('newest')",
    )?;
    d.exec(
        "window.__hit = document.querySelectorAll('#hits a.hit')[2]; window.__hit.focus(); window.__version = document.body.dataset.version",
        json!([]),
    )?;
    // A write that does not change the hits: the same elements, the focus kept, and still
    // ranked as asked while typing.
    common::append_message(&f.db, &f.telegram, "elsewhere");
    d.wait_change_seen()?;
    std::thread::sleep(std::time::Duration::from_millis(800));
    let kept = d.exec(
        "return [document.querySelectorAll('#hits a.hit')[2] === window.__hit, document.activeElement === window.__hit, document.getElementById('search-status').textContent.includes('newest')]",
        json!([]),
    )?;
    check(
        kept == json!([true, true, true]),
        format!("hit kept, focus kept, ranking kept: {kept}"),
    )?;
    // A write that matches: it shows.
    common::append_message(&f.db, &f.telegram, "one more step");
    d.wait(
        "the new hit",
        "return [...document.querySelectorAll('#hits a.hit')].some(a => a.textContent.includes('one more step'))",
    )?;
    Ok(())
}

fn usage_controls_stay(ctx: &Ctx) -> Result<()> {
    let d = &ctx.driver;
    let (f, server) = serve_fixture();
    d.open(&server.url("/usage?period=all"))?;
    d.wait_live()?;
    d.wait(
        "the chart",
        "return document.querySelector('svg.chart rect.bar')",
    )?;
    d.exec(
        "window.__button = document.querySelector('.seg button[data-value=\"90d\"]'); window.__button.focus(); window.__version = document.body.dataset.version",
        json!([]),
    )?;
    common::append_message(&f.db, &f.telegram, "elsewhere");
    d.wait_change_seen()?;
    std::thread::sleep(std::time::Duration::from_millis(800));
    check(
        d.exec(
            "return document.activeElement === window.__button && window.__button.isConnected",
            json!([]),
        )? == json!(true),
        "the focused period button keeps the focus",
    )?;
    // The controls still work after the change.
    d.click(".seg button[data-value='7d']")?;
    d.wait("seven days", "return location.search.includes('period=7d') && document.querySelector('.seg button[data-value=\"7d\"]').classList.contains('active')")?;
    Ok(())
}

/// The log of `big_output`: numbered lines, `bytes` long (ASCII, so characters are bytes).
fn big_log(bytes: usize) -> String {
    let mut log = String::with_capacity(bytes + 64);
    let mut n = 0;
    while log.len() < bytes {
        n += 1;
        log.push_str(&format!(
            "{n:08} INFO build step finished without a problem\n"
        ));
    }
    log.truncate(bytes);
    log
}

fn unpriced_costs(ctx: &Ctx) -> Result<()> {
    let d = &ctx.driver;
    let dir = tempfile::tempdir()?;
    let server = serve(&unpriced_store(dir.path()), None);
    d.open(&server.url("/"))?;
    d.wait(
        "3 sessions listed",
        "return document.querySelectorAll('#sessions-table tbody tr.session').length === 3",
    )?;
    let cost = |id: &str| {
        text(
            ctx,
            &format!(
                "const c = document.querySelector('tr[data-id=\"{id}\"] td.num:nth-last-child(3)'); \
                 return c.innerText + '|' + (c.title || '')"
            ),
        )
    };
    let marked = "leaves out usage of models without a price";
    check(
        cost("ses_priced")? == "$0.50|",
        format!("a priced cost as it is: {}", cost("ses_priced")?),
    )?;
    check(
        cost("ses_partial")? == format!("$0.25+?|{marked}"),
        format!("a partial cost marked: {}", cost("ses_partial")?),
    )?;
    check(
        cost("ses_unknown")? == format!("?|{marked}"),
        format!("a cost with nothing priced: {}", cost("ses_unknown")?),
    )?;
    d.open(&server.url("/s/ses_partial"))?;
    d.wait(
        "the head",
        "return document.getElementById('session-totals')",
    )?;
    let facts = text(
        ctx,
        "return document.getElementById('session-totals').innerText",
    )?;
    check(
        facts.contains("cost $0.25 + unknown (models without a price)"),
        format!("the session's cost says what it leaves out: {facts}"),
    )?;
    // A message's error reads as its type and message, as `scribe show` prints it.
    d.open(&server.url("/s/ses_unknown"))?;
    d.wait(
        "the marked answer",
        "return document.querySelector('#msg_ses_unknown_2 .msg-error')",
    )?;
    let error = text(
        ctx,
        "return document.querySelector('#msg_ses_unknown_2 .msg-error').innerText",
    )?;
    check(
        error == "error (rewound): undone by a rewind in Gemini CLI",
        format!("the message's error: {error}"),
    )?;
    // A reply the user stopped: its type, and no empty message after a colon.
    d.open(&server.url("/s/ses_partial"))?;
    d.wait(
        "the stopped answer",
        "return document.querySelector('#msg_ses_partial_2 .msg-error')",
    )?;
    let error = text(
        ctx,
        "return document.querySelector('#msg_ses_partial_2 .msg-error').innerText",
    )?;
    check(
        error == "error (cancelled)",
        format!("the stopped answer's error: {error}"),
    )?;
    d.open(&server.url("/s/ses_unknown"))?;
    d.wait(
        "the marked answer",
        "return document.querySelector('#msg_ses_unknown_2 .msg-error')",
    )?;
    // A message the agent undid is dimmed; the question before it is not.
    let dimmed = text(
        ctx,
        "return [...document.querySelectorAll('article.msg')].filter((a) => getComputedStyle(a).opacity < 1).map((a) => a.id).join(' ')",
    )?;
    check(
        dimmed == "msg_ses_unknown_2",
        format!("the messages dimmed: {dimmed}"),
    )?;
    d.open(&server.url("/usage?period=all&stack=model&metric=cost"))?;
    d.wait(
        "the stats table",
        "return document.querySelector('#stats-table tr.total')",
    )?;
    let card = text(
        ctx,
        "const c = document.querySelector('.cards .card'); return c.innerText + '|' + c.title",
    )?;
    check(
        card.starts_with("$0.75+?") && card.ends_with(&format!("|{marked} (2 sessions)")),
        format!("the period's cost card: {card}"),
    )?;
    let total = text(
        ctx,
        "return document.querySelector('#stats-table tr.total td:last-child').innerText",
    )?;
    // In the column's format: the answers' model, $0.001, needs three decimals.
    let column = text(
        ctx,
        "return [...document.querySelectorAll('#stats-table td:last-child')].map((c) => c.innerText).join(' ')",
    )?;
    check(
        total == "$0.750+?",
        format!("the stats total: {total} (column {column})"),
    )?;
    Ok(())
}

/// Every cost column (the session list, the usage page's table and top sessions) writes its
/// amounts with as many decimals as the one that needs most, as `scribe list` and `scribe
/// stats` do (`$0.0040` beside `$0.0035`, never `$0.004`), so the points line up.
fn cost_columns(ctx: &Ctx) -> Result<()> {
    let d = &ctx.driver;
    let dir = tempfile::tempdir()?;
    let server = serve(&costs_store(dir.path()), None);
    d.open(&server.url("/?sort=oldest"))?;
    d.wait(
        "3 sessions listed",
        "return document.querySelectorAll('#sessions-table tbody tr.session').length === 3",
    )?;
    let column = |selector: &str| {
        text(
            ctx,
            &format!(
                "return [...document.querySelectorAll('{selector}')].map((c) => c.innerText).join(' ')"
            ),
        )
    };
    let list = column("#sessions-table td[data-usd]")?;
    check(
        list == "$1.5000 $0.0035 $0.0040",
        format!("the list's cost column: {list}"),
    )?;
    d.open(&server.url("/usage?period=all&stack=model&metric=cost"))?;
    d.wait(
        "the stats table",
        "return document.querySelector('#stats-table tr.total')",
    )?;
    let stats = column("#stats-table td[data-usd]")?;
    check(
        stats == "$1.5000 $0.0040 $0.0035 $1.5075",
        format!("the stats table's cost column: {stats}"),
    )?;
    let top = column("#top-table td[data-usd]")?;
    check(
        top == "$1.5000 $0.0040 $0.0035",
        format!("the top sessions' cost column: {top}"),
    )?;
    Ok(())
}

/// A session whose agent keeps no usage shows "—" for its tokens and cost in the list and
/// the usage table, and says "no usage recorded" on its page, not `0` and `$0.00`.
fn unrecorded_usage(ctx: &Ctx) -> Result<()> {
    let d = &ctx.driver;
    let dir = tempfile::tempdir()?;
    let server = serve(&unrecorded_store(dir.path()), None);
    d.open(&server.url("/"))?;
    d.wait(
        "3 sessions listed",
        "return document.querySelectorAll('#sessions-table tbody tr.session').length === 3",
    )?;
    // Tokens and cost are the 4th and 3rd cells from the end.
    let usage = |id: &str| {
        text(
            ctx,
            &format!(
                "const cells = [...document.querySelectorAll('tr[data-id=\"{id}\"] td.num')].slice(-4, -2); \
                 return cells.map((c) => c.innerText + '|' + (c.title || '')).join(' ')"
            ),
        )
    };
    let counted = usage("ses_counted")?;
    check(
        counted.starts_with("1.1k|") && counted.ends_with(" $0.50|"),
        format!("recorded usage as it is: {counted}"),
    )?;
    let none = usage("ses_uncounted")?;
    check(
        none == "—|no usage recorded —|no usage recorded",
        format!("no usage recorded: {none}"),
    )?;
    // A cost kept without tokens: the tokens are not known, the cost is.
    let cost_only = usage("ses_costonly")?;
    check(
        cost_only == "—|no tokens recorded $0.04|",
        format!("a cost without tokens: {cost_only}"),
    )?;
    // What a session's page says of its totals.
    let totals = |id: &str| -> Result<String> {
        d.open(&server.url(&format!("/s/{id}")))?;
        d.wait(
            "the head",
            "return document.getElementById('session-totals')",
        )?;
        text(
            ctx,
            "return document.getElementById('session-totals').innerText",
        )
    };
    let facts = totals("ses_uncounted")?;
    check(
        facts.contains("model calls 0")
            && facts.contains("no usage recorded")
            && !facts.contains("tokens")
            && !facts.contains('$'),
        format!("the session's totals: {facts}"),
    )?;
    d.open(&server.url("/usage?period=all&stack=source"))?;
    d.wait(
        "the stats table",
        "return document.querySelector('#stats-table tr.total')",
    )?;
    let rows = text(
        ctx,
        "return [...document.querySelectorAll('#stats-table tbody tr')].map((r) => [...r.cells].map((c) => c.innerText).join(',')).join(' / ')",
    )?;
    check(
        rows.contains("antigravity,1,0,—,—")
            && rows.contains("codex,1,2,1.1k,$0.50")
            && rows.contains("crush,1,1,—,$0.04"),
        format!("the usage table: {rows}"),
    )?;
    let facts = totals("ses_costonly")?;
    check(
        facts.contains("no tokens recorded")
            && !facts.contains("no usage recorded")
            && facts.contains("cost $0.04"),
        format!("the totals of a session with a cost and no tokens: {facts}"),
    )?;
    Ok(())
}

/// The usage page shows the 5-hour block open now, its cost and the time it has left,
/// whatever the period shown; a page with no block open shows no such card (the fixture's
/// usage is months old: see `usage`).
fn open_block(ctx: &Ctx) -> Result<()> {
    let d = &ctx.driver;
    let dir = tempfile::tempdir()?;
    let server = serve(&block_store(dir.path()), None);
    for page in ["/usage", "/usage?period=7d"] {
        d.open(&server.url(page))?;
        d.wait(
            "the block card",
            "return document.getElementById('block-card')",
        )?;
        let card = text(
            ctx,
            "const c = document.getElementById('block-card'); return c.innerText.replace(/\\s+/g, ' ') + '|' + c.title",
        )?;
        let (shown, title) = card.split_once('|').unwrap_or_default();
        let left_ok = shown
            .strip_prefix("$1.50 this 5-hour block (")
            .and_then(|rest| rest.strip_suffix(" left)"))
            .and_then(|left| left.split_once("h "))
            .is_some_and(|(h, m)| {
                h.parse::<u32>().is_ok_and(|h| h <= 5) && m.trim_end_matches('m').len() == 2
            });
        check(left_ok, format!("{page}: the block card: {card}"))?;
        check(
            title.starts_with("1,000 tokens, ") && title.contains(" UTC to "),
            format!("{page}: the block card's title: {title}"),
        )?;
    }
    Ok(())
}

/// Text the user did not type (an attached file, a command's output) is folded under its
/// first line, and opens to the whole of it.
fn added_text(ctx: &Ctx) -> Result<()> {
    let d = &ctx.driver;
    let dir = tempfile::tempdir()?;
    let server = serve(&unpriced_store(dir.path()), None);
    d.open(&server.url("/s/ses_priced"))?;
    d.wait(
        "the folded text",
        "return document.querySelector('#msg_ses_priced details.attached')",
    )?;
    let folded = d.exec(
        "const f = document.querySelector('#msg_ses_priced details.attached'); \
         return [f.open, f.querySelector('summary').innerText]",
        json!([]),
    )?;
    check(
        folded == json!([false, "added text · Set model to opus (claude-opus-4-5)"]),
        format!("folded under its first line: {folded}"),
    )?;
    d.click("#msg_ses_priced details.attached summary")?;
    d.wait(
        "the whole text",
        "const f = document.querySelector('#msg_ses_priced details.attached'); \
         return f.open && f.innerText.includes('and more')",
    )?;
    Ok(())
}

fn big_output(ctx: &Ctx) -> Result<()> {
    let d = &ctx.driver;
    // SCRIBE_BIG_OUTPUT_MB=20 measures the case of a 20 MB `cat` (and prints the figures).
    let mb: usize = std::env::var("SCRIBE_BIG_OUTPUT_MB")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(2);
    let log = big_log(mb * 1_000_000);
    let dir = tempfile::tempdir()?;
    let db = big_output_store(dir.path(), &log);
    let server = serve(&db, None);
    d.clear_console()?;
    let started = Instant::now();
    d.open(&server.url("/s/ses_big"))?;
    d.wait(
        "the conversation drawn",
        "return document.getElementById('msg_big_3')",
    )?;
    let drawn = started.elapsed();
    let sent = d.exec(
        "return performance.getEntriesByType('resource').filter(e => e.name.includes('/messages')).reduce((n, e) => n + e.encodedBodySize, 0)",
        json!([]),
    )?;
    if std::env::var_os("SCRIBE_BIG_OUTPUT_MB").is_some() {
        let took = d.exec(
            "const e = performance.getEntriesByType('resource').find(e => e.name.includes('/messages')); return [Math.round(e.responseStart - e.requestStart), Math.round(e.responseEnd - e.responseStart), Math.round(performance.now())]",
            json!([]),
        )?;
        println!(
            "measured: a {mb} MB tool output: /messages sent {sent} bytes; [server answer ms, transfer ms, page age ms] {took}; the conversation seen drawn {} ms after navigating",
            drawn.as_millis()
        );
    }
    let output = "#msg_big_2 details.tool > pre.plain";
    let shown = d.exec(
        &format!("return document.querySelector('{output}').textContent"),
        json!([]),
    )?;
    let shown = shown.as_str().unwrap_or("");
    check(
        !shown.is_empty() && shown.len() <= 64 * 1024 && log.starts_with(shown),
        format!(
            "the output is drawn cut to its start: {} bytes",
            shown.len()
        ),
    )?;
    check(
        sent.as_u64().is_some_and(|n| n < 200_000),
        format!("the page is not sent whole: {sent}"),
    )?;
    let label = text(
        ctx,
        "return document.querySelector('#msg_big_2 .show-all').textContent",
    )?;
    let whole_mb = format!("{:.1} MB", (log.len() + 150) as f64 / 1e6);
    check(
        label.starts_with("show all (") && label.ends_with(" MB)"),
        format!("the button says how big it is whole (about {whole_mb}): {label:?}"),
    )?;
    // Opened, the whole output is fetched and drawn in place, the fold left open.
    d.click("#msg_big_2 details.tool > summary")?;
    d.click("#msg_big_2 .show-all")?;
    d.wait(
        "the whole output",
        &format!(
            "const pre = document.querySelector('{output}'); return pre && pre.textContent.length === {} && pre.closest('details').open",
            log.len()
        ),
    )?;
    check(
        d.exec(
            "return document.querySelectorAll('#msg_big_2 .show-all, #msg_big_2 .cut-note').length",
            json!([]),
        )? == json!(0),
        "no cut note once whole",
    )?;
    d.check_console_clean()?;
    Ok(())
}

fn stale_deep_link(ctx: &Ctx) -> Result<()> {
    let (d, f) = (&ctx.driver, &ctx.fixture);
    d.clear_console()?;
    d.open(&ctx.server.url(&format!("/s/{}#msg_gone_long_ago", f.main)))?;
    d.wait(
        "the conversation, from its start",
        &format!("return document.getElementById('{}')", f.main_messages[0]),
    )?;
    std::thread::sleep(std::time::Duration::from_millis(300));
    d.check_console_clean()?;
    let said = d.wait(
        "the message said gone",
        "return document.getElementById('message-gone')?.textContent",
    )?;
    check(
        said.as_str()
            .is_some_and(|s| s.contains("msg_gone_long_ago") && s.contains("no longer")),
        format!("it says which message is gone: {said}"),
    )?;
    check(
        d.exec("return !document.querySelector('.error-box')", json!([]))? == json!(true),
        "and shows no error",
    )?;
    Ok(())
}

/// What has the keyboard focus: `tag#id.class text`, or `BODY`.
const FOCUSED: &str = "const a = document.activeElement; if (!a || a === document.body) return 'BODY';
    const row = a.closest('tr.session'); const hit = a.closest('a.hit');
    return a.tagName + (row ? ' row ' + row.dataset.id : '') + (hit ? ' hit ' + hit.dataset.message : '')
      + ' ' + (a.tagName === 'H1' ? a.textContent : '') + (document.getElementById('main').contains(a) ? ' in-main' : '')";

fn wait_focus(ctx: &Ctx, what: &str, want: &str) -> Result<()> {
    let script = format!(
        "const f = (() => {{ {FOCUSED} }})(); return f.startsWith({}) ? f : null",
        json!(want)
    );
    match ctx.driver.wait(what, &script) {
        Ok(_) => Ok(()),
        Err(_) => Err(format!(
            "{what}: the focus is on {:?}, not {want:?}",
            ctx.driver.exec(FOCUSED, json!([]))?
        )
        .into()),
    }
}

fn focus_follows_the_view(ctx: &Ctx) -> Result<()> {
    let (d, f) = (&ctx.driver, &ctx.fixture);
    d.open(&ctx.server.url("/"))?;
    // Opening a session from the list: the focus lands on the conversation's heading.
    let link = format!(
        "#sessions-table tr.session[data-id='{}'] td.title-cell > a",
        f.main
    );
    d.wait(
        "the row",
        &format!("return document.querySelector(\"{link}\")"),
    )?;
    d.click(&link)?;
    d.wait(
        "the conversation",
        "return location.pathname.startsWith('/s/')",
    )?;
    d.wait_ready()?;
    wait_focus(ctx, "open a session", "H1 Fix the build")?;
    // Back: on the row that was opened.
    d.exec("history.back()", json!([]))?;
    d.wait("back", "return location.pathname === '/'")?;
    d.wait_ready()?;
    wait_focus(ctx, "back to the list", &format!("A row {}", f.main))?;
    // The header's links: each view's heading.
    d.click("[data-nav=usage]")?;
    d.wait_ready()?;
    wait_focus(ctx, "the usage page", "H1 Usage")?;
    d.click("[data-nav=sessions]")?;
    d.wait_ready()?;
    wait_focus(ctx, "the session list", "H1 Sessions")?;
    // Search results: the search box of the new view; a hit opened, then Back: that hit.
    d.type_into("#quick-search", "build")?;
    d.wait("the search page", "return location.pathname === '/search'")?;
    d.wait_ready()?;
    wait_focus(ctx, "search results", "INPUT")?;
    check(
        d.exec(FOCUSED, json!([]))?
            .as_str()
            .is_some_and(|f| f.ends_with("in-main")),
        "the search box of the view, not the header's",
    )?;
    let hit = "#hits a.hit";
    d.wait("a hit", &format!("return document.querySelector('{hit}')"))?;
    let message = text(
        ctx,
        &format!("return document.querySelector('{hit}').dataset.message"),
    )?;
    d.click(hit)?;
    d.wait(
        "the conversation",
        "return location.pathname.startsWith('/s/')",
    )?;
    d.wait_ready()?;
    wait_focus(ctx, "a hit opened", "H1")?;
    d.exec("history.back()", json!([]))?;
    d.wait("back", "return location.pathname === '/search'")?;
    d.wait_ready()?;
    wait_focus(ctx, "back to the hits", &format!("A hit {message}"))?;
    Ok(())
}
