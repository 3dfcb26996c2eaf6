//! Takes the README's screenshots of `scribe serve` in headless Chromium.
//!
//! ```sh
//! scribe --db /tmp/shots.db demo && scribe --db /tmp/shots.db demo
//! cargo run -p scribe-server --example screenshots -- /tmp/shots.db docs/screenshots
//! ```
//!
//! Adds a month of varied sessions to the database first (sources, models, usage, a few
//! messages each, so the list and the charts have something to show), then serves it and
//! saves `sessions.png`, `conversation.png` (the demo's conversation, a tool call and its
//! edit open), `search.png` and `usage.png`. Needs `chromium` and `chromedriver`.
#![allow(clippy::unwrap_used, clippy::expect_used)]

#[path = "../tests/common/mod.rs"]
mod common;

use std::path::{Path, PathBuf};
use std::sync::Arc;

use common::webdriver::{Driver, find_browser};
use scribe_db::Database;
use scribe_session::{SessionExport, SessionService};
use serde_json::{Value, json};

const DAY: i64 = 86_400_000;

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let [db, out] = args.as_slice() else {
        eprintln!("usage: screenshots <db made by `scribe demo`> <output dir>");
        std::process::exit(2);
    };
    let (db, out) = (PathBuf::from(db), PathBuf::from(out));
    std::fs::create_dir_all(&out).unwrap();
    add_month(&db);
    let (chromium, chromedriver) = find_browser().expect("chromium and chromedriver");
    let server = common::serve(&db, None);
    let driver = Driver::start(&chromium, &chromedriver, 1280, 860).unwrap();
    let shot = |name: &str| {
        let png = driver.screenshot().unwrap();
        std::fs::write(out.join(name), png).unwrap();
        println!("wrote {}", out.join(name).display());
    };

    driver.goto(&server.url("/")).unwrap();
    driver.wait_ready().unwrap();
    driver
        .wait(
            "the demo's sub-sessions toggle",
            "return document.querySelector('button.kids')",
        )
        .unwrap();
    driver.click("button.kids").unwrap();
    driver
        .wait("child rows", "return document.querySelector('tr.child')")
        .unwrap();
    driver.exec("window.scrollTo(0, 0)", json!([])).unwrap();
    shot("sessions.png");

    let demo = driver
        .exec(
            "return [...document.querySelectorAll('tr.session')].find(r => r.innerText.includes('Demo: fix the failing add test'))?.dataset.id",
            json!([]),
        )
        .unwrap();
    let demo = demo
        .as_str()
        .expect("a demo session in the list")
        .to_owned();
    driver.goto(&server.url(&format!("/s/{demo}"))).unwrap();
    driver.wait_ready().unwrap();
    driver
        .wait(
            "the messages",
            "return document.querySelectorAll('.msg').length > 4",
        )
        .unwrap();
    driver.resize(1280, 1500).unwrap();
    driver
        .exec(
            "for (const d of document.querySelectorAll('details.tool')) {\
               if (/read_file|edit_file/.test(d.innerText)) d.open = true; }\
             const think = document.querySelector('details.reasoning'); if (think) think.open = true;\
             window.scrollTo(0, 0);",
            json!([]),
        )
        .unwrap();
    shot("conversation.png");
    driver.resize(1280, 860).unwrap();

    driver.goto(&server.url("/search")).unwrap();
    driver.wait_ready().unwrap();
    driver.type_into("#search-input", "test").unwrap();
    driver
        .wait(
            "hits",
            "return document.querySelectorAll('#hits a.hit').length > 2",
        )
        .unwrap();
    shot("search.png");

    driver
        .goto(&server.url("/usage?period=30d&stack=model&metric=cost"))
        .unwrap();
    driver.wait_ready().unwrap();
    driver
        .wait(
            "bars",
            "return document.querySelectorAll('svg.chart rect.bar').length > 5",
        )
        .unwrap();
    shot("usage.png");
}

/// A month of sessions: a few a day, four sources, three models, usage and two messages.
fn add_month(db: &Path) {
    let sessions = SessionService::new(Arc::new(Database::open(db).unwrap()));
    let now = scribe_db::now_ms();
    let sources = ["cli", "tui", "telegram", "claude-code"];
    let models = [
        ("anthropic/claude-sonnet-4", 3e-6, 15e-6),
        ("anthropic/claude-haiku", 0.8e-6, 4e-6),
        ("openai/gpt-5", 1.25e-6, 10e-6),
    ];
    let topics = [
        (
            "Speed up the CI cache",
            "The CI run takes 40 minutes; can we cache the target dir?",
        ),
        (
            "Flaky websocket test",
            "`ws_reconnect` fails one run in ten on CI. Find out why.",
        ),
        (
            "Add a --json flag to export",
            "Scripts want `export --json`; add it with a test.",
        ),
        (
            "Review the retry pauses",
            "Are 1-20 ms retry pauses fair with four writers?",
        ),
        (
            "Migrate settings to TOML",
            "Move `settings.ini` to TOML and keep old files working.",
        ),
        (
            "Explain the compaction prompt",
            "Walk me through how the summary prompt is built.",
        ),
        (
            "Fix the Windows path bug",
            "`C:\\Users\\me` is split at the colon in `--db`.",
        ),
        (
            "Draft release notes",
            "Summarise the changes since v0.3 for the release notes.",
        ),
    ];
    let mut n = 0_i64;
    for day in (0..30).rev() {
        for k in 0..(2 + (day * 7 + 3) % 4) {
            n += 1;
            let (title, prompt) = topics[(n as usize) % topics.len()];
            let (model, in_price, out_price) = models[(n as usize * 7 + k as usize) % models.len()];
            let source = sources[(n as usize * 3 + day as usize) % sources.len()];
            let created = now - day * DAY - (k + 1) * 3_600_000;
            let input = 20_000 + (n * 7919) % 180_000;
            let output = input / 25;
            let cost = input as f64 * in_price + output as f64 * out_price;
            let id = format!("ses_shot_{n:04}");
            let export: SessionExport = serde_json::from_value(json!({
                "session": {
                    "id": id, "parent_session_id": null, "kind": "normal", "source": source,
                    "user_id": null, "directory": "/home/me/src/app", "title": format!("{title} #{n}"),
                    "model": model, "model_config": null, "system_prompt": null, "permission": null,
                    "message_count": 2, "tool_call_count": 0, "api_call_count": 3 + n % 9,
                    "tokens": {"input": input, "output": output, "cache_read": input / 3, "cache_write": 0, "reasoning": 0},
                    "estimated_cost_usd": cost, "actual_cost_usd": null, "billing_provider": null,
                    "billing_base_url": null, "billing_mode": null, "cost_status": null, "cost_source": null,
                    "pricing_version": null, "summary_message_id": null, "created_at": created,
                    "updated_at": created + 25 * 60_000, "ended_at": created + 25 * 60_000,
                    "end_reason": "user_exit", "archived_at": null, "compacting_at": null
                },
                "messages": [
                    message(&id, &format!("msg_shot_{n:04}_1"), "user", created, prompt, None),
                    message(&id, &format!("msg_shot_{n:04}_2"), "assistant", created + 60_000,
                        "Looked into it: the change is small. I updated the code and the test passes now.", Some(model)),
                ],
                "files": []
            }))
            .unwrap();
            sessions.import(&export).unwrap();
        }
    }
}

fn message(session: &str, id: &str, role: &str, at: i64, text: &str, model: Option<&str>) -> Value {
    json!({
        "id": id, "session_id": session, "parent_id": null, "role": role, "agent": "build",
        "provider": null, "model": model, "finish_reason": "end_turn", "is_summary": false,
        "usage": {"input": 0, "output": 0, "cache_read": 0, "cache_write": 0, "reasoning": 0},
        "cost_usd": 0.0, "error": null, "created_at": at, "updated_at": at, "finished_at": at,
        "parts": [{"id": format!("prt_{id}"), "position": 0, "part": {"type": "text", "text": text},
                   "created_at": at, "updated_at": at}]
    })
}
