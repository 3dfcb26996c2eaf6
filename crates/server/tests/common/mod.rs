//! What the API and browser tests share: a minimal HTTP/1.1 client (real sockets), a
//! fixture database written through the services (import, so times, sources, models and
//! usage are exactly as chosen), a server running on a free loopback port, and the writer
//! process that live-update tests start.
#![allow(clippy::unwrap_used, clippy::expect_used, dead_code)]

pub mod webdriver;

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

use scribe_db::Database;
use scribe_message::{MessageService, NewMessage, Part, Role};
use scribe_server::{Config, ServeError, Server, StopHandle};
use scribe_session::{SessionExport, SessionService};
use serde_json::{Value, json};

/// An HTTP answer.
#[derive(Debug)]
pub struct Reply {
    pub status: u16,
    pub headers: Vec<(String, String)>,
    pub body: Vec<u8>,
}

impl Reply {
    /// The first header `name` (case-insensitive).
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(n, _)| n.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }

    /// The body as JSON (panics with the body when it is not).
    pub fn json(&self) -> Value {
        serde_json::from_slice(&self.body).unwrap_or_else(|err| {
            panic!(
                "not JSON ({err}), status {}: {}",
                self.status,
                String::from_utf8_lossy(&self.body)
            )
        })
    }

    pub fn text(&self) -> String {
        String::from_utf8_lossy(&self.body).into_owned()
    }
}

/// One request over a new connection (`Connection: close`). `headers` may override `Host`.
pub fn request(
    addr: SocketAddr,
    method: &str,
    path: &str,
    headers: &[(&str, &str)],
    body: Option<&[u8]>,
) -> std::io::Result<Reply> {
    let mut stream = TcpStream::connect(addr)?;
    stream.set_read_timeout(Some(Duration::from_secs(60)))?;
    let mut head = format!("{method} {path} HTTP/1.1\r\nConnection: close\r\n");
    if !headers.iter().any(|(n, _)| n.eq_ignore_ascii_case("host")) {
        head.push_str(&format!("Host: {addr}\r\n"));
    }
    for (name, value) in headers {
        head.push_str(&format!("{name}: {value}\r\n"));
    }
    if let Some(body) = body {
        head.push_str(&format!(
            "Content-Type: application/json\r\nContent-Length: {}\r\n",
            body.len()
        ));
    }
    head.push_str("\r\n");
    stream.write_all(head.as_bytes())?;
    if let Some(body) = body {
        stream.write_all(body)?;
    }
    read_reply(&mut stream, method == "HEAD")
        .map_err(|err| std::io::Error::new(err.kind(), format!("{method} {path}: {err}")))
}

/// Reads one reply: the head, then the body by `Content-Length`, chunks or to the end
/// (servers that keep the connection open despite `Connection: close` are fine).
fn read_reply(stream: &mut TcpStream, head_only: bool) -> std::io::Result<Reply> {
    let bad = |what: &str| std::io::Error::other(format!("bad HTTP reply: {what}"));
    let mut raw = Vec::new();
    let mut buf = [0u8; 8192];
    let split = loop {
        if let Some(at) = raw.windows(4).position(|w| w == b"\r\n\r\n") {
            break at;
        }
        let n = stream.read(&mut buf).map_err(|err| {
            std::io::Error::new(
                err.kind(),
                format!("{err} after {:?}", String::from_utf8_lossy(&raw)),
            )
        })?;
        if n == 0 {
            return Err(bad("closed before the end of the headers"));
        }
        raw.extend_from_slice(&buf[..n]);
    };
    let head = String::from_utf8_lossy(&raw[..split]).into_owned();
    let mut lines = head.split("\r\n");
    let status: u16 = lines
        .next()
        .and_then(|l| l.split(' ').nth(1))
        .and_then(|s| s.parse().ok())
        .ok_or_else(|| bad("status line"))?;
    let headers: Vec<(String, String)> = lines
        .filter_map(|l| l.split_once(':'))
        .map(|(n, v)| (n.trim().to_owned(), v.trim().to_owned()))
        .collect();
    let mut rest = raw[split + 4..].to_vec();
    let find = |name: &str| {
        headers
            .iter()
            .find(|(n, _)| n.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.clone())
    };
    let mut more = |rest: &mut Vec<u8>| -> std::io::Result<bool> {
        let n = stream.read(&mut buf)?;
        rest.extend_from_slice(&buf[..n]);
        Ok(n > 0)
    };
    let body = if head_only || status == 304 || status == 204 {
        Vec::new()
    } else if find("transfer-encoding").is_some_and(|v| v.eq_ignore_ascii_case("chunked")) {
        let mut body = Vec::new();
        let mut at = 0;
        loop {
            let Some(line_end) = rest[at..].windows(2).position(|w| w == b"\r\n") else {
                if !more(&mut rest)? {
                    return Err(bad("closed inside a chunk size"));
                }
                continue;
            };
            let size_text = String::from_utf8_lossy(&rest[at..at + line_end]).into_owned();
            let size = usize::from_str_radix(size_text.split(';').next().unwrap_or("").trim(), 16)
                .map_err(|_| bad("chunk size"))?;
            while rest.len() < at + line_end + 2 + size + 2 {
                if !more(&mut rest)? {
                    return Err(bad("closed inside a chunk"));
                }
            }
            if size == 0 {
                break;
            }
            body.extend_from_slice(&rest[at + line_end + 2..at + line_end + 2 + size]);
            at += line_end + 2 + size + 2;
        }
        body
    } else if let Some(len) = find("content-length") {
        let len: usize = len.parse().map_err(|_| bad("content-length"))?;
        while rest.len() < len {
            if !more(&mut rest)? {
                return Err(bad("closed inside the body"));
            }
        }
        rest.truncate(len);
        rest
    } else {
        while more(&mut rest)? {}
        rest
    };
    Ok(Reply {
        status,
        headers,
        body,
    })
}

/// `GET path` from the server at `addr`.
pub fn get(addr: SocketAddr, path: &str) -> Reply {
    request(addr, "GET", path, &[], None).unwrap()
}

/// `GET path`, expecting 200 and JSON.
pub fn get_json(addr: SocketAddr, path: &str) -> Value {
    let reply = get(addr, path);
    assert_eq!(reply.status, 200, "GET {path}: {}", reply.text());
    reply.json()
}

/// A server answering on a free loopback port until dropped.
pub struct Running {
    pub addr: SocketAddr,
    stop: StopHandle,
    thread: Option<JoinHandle<Result<(), ServeError>>>,
}

impl Running {
    pub fn url(&self, path: &str) -> String {
        format!("http://{}{path}", self.addr)
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        self.stop.stop();
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

/// Serves `db` on 127.0.0.1 (a free port), optionally with a token.
pub fn serve(db: &Path, token: Option<&str>) -> Running {
    let server = Server::bind(Config {
        db: db.to_owned(),
        addr: "127.0.0.1:0".into(),
        token: token.map(str::to_owned),
    })
    .unwrap();
    let addr = server.local_addr();
    let stop = server.stop_handle();
    let thread = std::thread::spawn(move || {
        let outcome = server.run();
        if let Err(err) = &outcome {
            eprintln!("the test server stopped: {err:?}");
        }
        outcome
    });
    Running {
        addr,
        stop,
        thread: Some(thread),
    }
}

/// A fixture of its own, served: for a test that writes to it, so the shared fixture's
/// conversations stay as the other tests know them.
pub fn serve_fixture() -> (Fixture, Running) {
    let f = fixture();
    let server = serve(&f.db, None);
    (f, server)
}

/// 2026-01-10 12:00 UTC: "now" of the fixture's story.
pub const T0: i64 = 1_768_046_400_000;
pub const DAY: i64 = 86_400_000;
pub const MINUTE: i64 = 60_000;

/// The XSS probe stored in a message: shown as text, never run.
pub const SCRIPT_TEXT: &str = "Please fix the build <script>window.__xss = 1</script> \
     <img src=x onerror=\"window.__xss = 2\"> and say **done**.";

/// The fixture: its database and the ids tests refer to.
pub struct Fixture {
    pub dir: tempfile::TempDir,
    pub db: PathBuf,
    /// "Fix the build": markdown, a `<script>`, reasoning, an edit, a sub-agent task,
    /// a compaction summary.
    pub main: String,
    /// The sub-agent task session of `main` (its id is the task call's id).
    pub task: String,
    /// 250 messages.
    pub long: String,
    /// Archived.
    pub archived: String,
    /// Telegram.
    pub telegram: String,
    /// Message ids of `main`, in order.
    pub main_messages: Vec<String>,
    /// Message ids of `long`, in order.
    pub long_messages: Vec<String>,
}

#[allow(clippy::too_many_arguments)] // one call per fixture session reads best flat
fn session(
    id: &str,
    title: Option<&str>,
    source: &str,
    model: &str,
    dir: Option<&str>,
    created_at: i64,
    cost: f64,
    tokens: (i64, i64),
) -> Value {
    json!({
        "id": id, "parent_session_id": null, "kind": "normal", "source": source,
        "user_id": null, "directory": dir, "title": title, "model": model,
        "model_config": null, "system_prompt": null, "permission": null,
        "message_count": 0, "tool_call_count": 0, "api_call_count": 2,
        "tokens": {"input": tokens.0, "output": tokens.1, "cache_read": 0, "cache_write": 0, "reasoning": 0},
        "estimated_cost_usd": cost, "actual_cost_usd": null, "billing_provider": null,
        "billing_base_url": null, "billing_mode": null, "cost_status": null,
        "cost_source": null, "pricing_version": null, "summary_message_id": null,
        "created_at": created_at, "updated_at": created_at + 10 * MINUTE,
        "ended_at": null, "end_reason": null, "archived_at": null, "compacting_at": null
    })
}

fn message(session: &str, id: &str, role: &str, at: i64, parts: Vec<Value>) -> Value {
    let parts: Vec<Value> = parts
        .into_iter()
        .enumerate()
        .map(|(i, part)| {
            json!({"id": format!("prt_{id}_{i}"), "position": i, "part": part,
                   "created_at": at, "updated_at": at})
        })
        .collect();
    json!({
        "id": id, "session_id": session, "parent_id": null, "role": role,
        "agent": if role == "assistant" { Some("build") } else { None },
        "provider": null, "model": if role == "assistant" { Some("m-opus") } else { None },
        "finish_reason": if role == "assistant" { "stop" } else { "end_turn" },
        "is_summary": false,
        "usage": {"input": 100, "output": 20, "cache_read": 0, "cache_write": 0, "reasoning": 0},
        "cost_usd": 0.001, "error": null, "created_at": at, "updated_at": at, "finished_at": at,
        "parts": parts
    })
}

fn import(sessions: &SessionService, mut session: Value, messages: Vec<Value>) {
    // The counters an export carries are restored as they are: make them true.
    session["message_count"] = json!(messages.len());
    let tools = messages
        .iter()
        .flat_map(|m| m["parts"].as_array().unwrap())
        .filter(|p| p["part"]["type"] == json!("tool"))
        .count();
    session["tool_call_count"] = json!(tools);
    let export: SessionExport = serde_json::from_value(json!({
        "session": session, "messages": messages, "files": []
    }))
    .unwrap();
    sessions.import(&export).unwrap();
}

/// Builds the fixture database (closed again before returning).
pub fn fixture() -> Fixture {
    let dir = tempfile::tempdir().unwrap();
    let db_path = dir.path().join("scribe.db");
    let db = Arc::new(Database::open(&db_path).unwrap());
    let sessions = SessionService::new(Arc::clone(&db));

    let main = "ses_main".to_owned();
    let task = "call_task_1".to_owned();
    let t = T0 - 3 * DAY;
    let main_messages: Vec<String> = (1..=4).map(|i| format!("msg_main_{i}")).collect();
    let summary = {
        let mut m = message(
            &main,
            &main_messages[2],
            "assistant",
            t + 3 * MINUTE,
            vec![
                json!({"type": "compaction", "auto": true}),
                json!({"type": "text", "text": "## Summary\nThe build was fixed by editing `src/lib.rs`."}),
            ],
        );
        m["is_summary"] = json!(true);
        m
    };
    import(
        &sessions,
        session(
            &main,
            Some("Fix the build"),
            "cli",
            "m-opus",
            Some("/p/one"),
            t,
            0.5,
            (1000, 200),
        ),
        vec![
            message(
                &main,
                &main_messages[0],
                "user",
                t + MINUTE,
                vec![json!({"type": "text", "text": SCRIPT_TEXT})],
            ),
            message(
                &main,
                &main_messages[1],
                "assistant",
                t + 2 * MINUTE,
                vec![
                    json!({"type": "step_start"}),
                    json!({"type": "reasoning", "text": "The build fails in lib.rs; read it first."}),
                    json!({"type": "text", "text": "Here is the fix:\n\n```rust\nfn main() { let x = 1; }\n```"}),
                    json!({"type": "tool", "call_id": "call_edit", "tool": "edit_file",
                       "input": {"path": "src/lib.rs", "old": "let a = 1;\nlet b = 2;", "new": "let a = 1;\nlet b = 3;"},
                       "state": {"status": "completed", "output": "replaced 1 occurrence", "title": "Edit src/lib.rs",
                                 "started_at": t, "ended_at": t}}),
                    json!({"type": "tool", "call_id": task, "tool": "task",
                       "input": {"agent": "explorer", "description": "Find the callers"},
                       "state": {"status": "completed", "output": "two callers", "title": "Find the callers",
                                 "started_at": t, "ended_at": t}}),
                    json!({"type": "step_finish", "reason": "tool_use",
                       "tokens": {"input": 3000, "output": 60, "cache_read": 0, "cache_write": 0, "reasoning": 0},
                       "cost": 0.0108}),
                ],
            ),
            summary,
            message(
                &main,
                &main_messages[3],
                "assistant",
                t + 4 * MINUTE,
                vec![
                    // Reasoning the provider sent redacted: no text, kept in its metadata.
                    json!({"type": "reasoning", "text": "", "metadata": {"redacted": "ZW5jcnlwdGVk"}}),
                    json!({"type": "text", "text": "All green now: the build passes."}),
                ],
            ),
        ],
    );
    let mut task_session = session(
        &task,
        None,
        "cli",
        "m-haiku",
        Some("/p/one"),
        t + MINUTE,
        0.05,
        (300, 30),
    );
    task_session["parent_session_id"] = json!(main);
    task_session["kind"] = json!("task");
    import(
        &sessions,
        task_session,
        vec![message(
            &task,
            "msg_task_1",
            "user",
            t + MINUTE,
            vec![json!({"type": "text", "text": "Which files call the builder?"})],
        )],
    );

    let telegram = "ses_telegram".to_owned();
    import(
        &sessions,
        session(
            &telegram,
            Some("Chat from the phone"),
            "telegram",
            "m-haiku",
            Some("/p/two"),
            T0 - DAY,
            0.02,
            (50, 5),
        ),
        vec![message(
            &telegram,
            "msg_tg_1",
            "user",
            T0 - DAY,
            vec![json!({"type": "text", "text": "What is the weather in the logs?"})],
        )],
    );

    let archived = "ses_archived".to_owned();
    let mut old = session(
        &archived,
        Some("Old archived work"),
        "cli",
        "m-opus",
        Some("/p/one"),
        T0 - 10 * DAY,
        1.25,
        (9000, 900),
    );
    old["archived_at"] = json!(T0 - 9 * DAY);
    import(&sessions, old, vec![]);

    let long = "ses_long".to_owned();
    let long_messages: Vec<String> = (0..250).map(|i| format!("msg_long_{i:04}")).collect();
    let start = T0 - 2 * DAY;
    import(
        &sessions,
        session(&long, Some("Long conversation"), "tui", "m-sonnet", Some("/p/two"), start, 0.3, (5000, 400)),
        long_messages
            .iter()
            .enumerate()
            .map(|(i, id)| {
                let role = if i % 2 == 0 { "user" } else { "assistant" };
                message(&long, id, role, start + i as i64 * 1000, vec![
                    json!({"type": "text", "text": format!("Step {i} of the long conversation.")}),
                ])
            })
            .collect(),
    );

    // Six sessions created at the same moment, with repeating costs: ties for paging.
    for i in 0..6 {
        let id = format!("ses_bulk_{i}");
        let cost = [0.1, 0.2, 0.1, 0.3, 0.2, 0.1][i];
        import(
            &sessions,
            session(
                &id,
                Some(&format!("Bulk {i}")),
                "cli",
                "m-sonnet",
                None,
                T0 - 5 * DAY,
                cost,
                (10 * i as i64, 1),
            ),
            vec![],
        );
    }
    drop(sessions);
    drop(db);
    Fixture {
        db: db_path,
        dir,
        main,
        task,
        long,
        archived,
        telegram,
        main_messages,
        long_messages,
    }
}

/// A store in `dir` with one session, `ses_big`, whose second message (`msg_big_2`) holds a
/// `cat` of a log whose output (part `prt_msg_big_2_0`) is `output` and a short text
/// (part `prt_msg_big_2_1`); a user message before and an answer after. Returns the file.
pub fn big_output_store(dir: &Path, output: &str) -> PathBuf {
    let db_path = dir.join("big.db");
    let db = Arc::new(Database::open(&db_path).unwrap());
    let sessions = SessionService::new(Arc::clone(&db));
    let t = T0 - DAY;
    import(
        &sessions,
        session(
            "ses_big",
            Some("Read the big log"),
            "cli",
            "m-opus",
            Some("/p/big"),
            t,
            0.1,
            (100, 20),
        ),
        vec![
            message(
                "ses_big",
                "msg_big_1",
                "user",
                t + MINUTE,
                vec![json!({"type": "text", "text": "What is in the log?"})],
            ),
            message(
                "ses_big",
                "msg_big_2",
                "assistant",
                t + 2 * MINUTE,
                vec![
                    json!({"type": "tool", "call_id": "call_cat", "tool": "bash",
                       "input": {"command": "cat build.log"},
                       "state": {"status": "completed", "output": output, "title": "cat build.log",
                                 "started_at": t, "ended_at": t}}),
                    json!({"type": "text", "text": "That is a long log."}),
                ],
            ),
            message(
                "ses_big",
                "msg_big_3",
                "assistant",
                t + 3 * MINUTE,
                vec![json!({"type": "text", "text": "It ends with the failure."})],
            ),
        ],
    );
    db_path
}

/// A store of three imported sessions, the cost of two of which leaves out usage of a model
/// without a price: `ses_priced` ($0.50, `estimated`), `ses_partial` ($0.25, `partial`) and
/// `ses_unknown` ($0, `unknown`, its answer marked `rewound`; `ses_partial`'s `cancelled`
/// with an empty message), all three on `m-new`, created
/// a day before `T0`; `ses_priced`'s question has a synthetic text part after its text.
pub fn unpriced_store(dir: &Path) -> PathBuf {
    let db_path = dir.join("unpriced.db");
    let db = Arc::new(Database::open(&db_path).unwrap());
    let sessions = SessionService::new(Arc::clone(&db));
    let t = T0 - DAY;
    for (i, (id, status, cost)) in [
        ("ses_priced", "estimated", 0.5),
        ("ses_partial", "partial", 0.25),
        ("ses_unknown", "unknown", 0.0),
    ]
    .into_iter()
    .enumerate()
    {
        let at = t + i64::try_from(i).unwrap() * MINUTE;
        let mut s = session(id, Some(id), "codex", "m-new", None, at, cost, (1000, 100));
        s["cost_status"] = json!(status);
        let mut text = vec![json!({"type": "text", "text": format!("question of {id}")})];
        if id == "ses_priced" {
            // Text the user did not type (a command's output): folded in the page.
            text.push(json!({"type": "text", "synthetic": true,
                             "text": "\n  Set model to opus (claude-opus-4-5)\nand more"}));
        }
        let mut messages = vec![message(id, &format!("msg_{id}"), "user", at, text)];
        if id == "ses_partial" {
            // An answer the user stopped: an error with a type and an empty message.
            let text = vec![json!({"type": "text", "text": "an answer cut"})];
            let mut answer = message(id, "msg_ses_partial_2", "assistant", at + 1000, text);
            answer["error"] = json!({"type": "cancelled", "message": ""});
            messages.push(answer);
        }
        if id == "ses_unknown" {
            // An answer a rewind in the agent dropped: kept, marked.
            let text = vec![json!({"type": "text", "text": "an answer taken back"})];
            let mut answer = message(id, "msg_ses_unknown_2", "assistant", at + 1000, text);
            answer["error"] =
                json!({"type": "rewound", "message": "undone by a rewind in Gemini CLI"});
            messages.push(answer);
        }
        import(&sessions, s, messages);
    }
    db_path
}

/// A store of three sessions a day before `T0` whose costs need 2, 4 and 3 decimals:
/// `ses_dear` ($1.50, model `m-a`), `ses_cheap` ($0.0035, `m-b`), `ses_cheaper` ($0.004,
/// `m-c`).
pub fn costs_store(dir: &Path) -> PathBuf {
    let db_path = dir.join("costs.db");
    let db = Arc::new(Database::open(&db_path).unwrap());
    let sessions = SessionService::new(Arc::clone(&db));
    let t = T0 - DAY;
    for (i, (id, model, cost)) in [
        ("ses_dear", "m-a", 1.5),
        ("ses_cheap", "m-b", 0.0035),
        ("ses_cheaper", "m-c", 0.004),
    ]
    .into_iter()
    .enumerate()
    {
        let at = t + i64::try_from(i).unwrap() * MINUTE;
        let s = session(id, Some(id), "codex", model, None, at, cost, (1000, 100));
        let text = vec![json!({"type": "text", "text": format!("question of {id}")})];
        import(
            &sessions,
            s,
            vec![message(id, &format!("msg_{id}"), "user", at, text)],
        );
    }
    db_path
}

/// A store of one session begun now that used 1,000 input tokens for $1.50 (a usage block
/// open now), with the path of its database.
pub fn block_store(dir: &Path) -> PathBuf {
    let db_path = dir.join("block.db");
    let db = Arc::new(Database::open(&db_path).unwrap());
    let sessions = SessionService::new(Arc::clone(&db));
    let now = sessions
        .create(scribe_session::NewSession::default())
        .unwrap();
    sessions.add_usage(&now.id, &one_call(1_000, 1.5)).unwrap();
    db_path
}

/// One model call's usage: `input` tokens in, nothing else, costing `cost_usd`.
pub fn one_call(input: i64, cost_usd: f64) -> scribe_session::UsageDelta {
    scribe_session::UsageDelta {
        tokens: scribe_message::TokenUsage {
            input,
            ..Default::default()
        },
        api_calls: 1,
        cost_usd,
        ..Default::default()
    }
}

/// A store of three imported sessions a day before `T0`: `ses_counted` (source `codex`,
/// 1,100 tokens, $0.50), `ses_uncounted`, whose agent (source `antigravity`) keeps no
/// usage: a question and an answer, no model call, token or cost recorded, and
/// `ses_costonly`, whose agent (source `crush`) keeps a cost ($0.04, one call) and no
/// tokens.
pub fn unrecorded_store(dir: &Path) -> PathBuf {
    let db_path = dir.join("unrecorded.db");
    let db = Arc::new(Database::open(&db_path).unwrap());
    let sessions = SessionService::new(Arc::clone(&db));
    let t = T0 - DAY;
    for (i, (id, source, cost, tokens)) in [
        ("ses_counted", "codex", 0.5, (1000, 100)),
        ("ses_uncounted", "antigravity", 0.0, (0, 0)),
        ("ses_costonly", "crush", 0.04, (0, 0)),
    ]
    .into_iter()
    .enumerate()
    {
        let at = t + i64::try_from(i).unwrap() * MINUTE;
        let mut s = session(id, Some(id), source, "m-new", None, at, cost, tokens);
        let question = vec![json!({"type": "text", "text": format!("question of {id}")})];
        let answer = vec![json!({"type": "text", "text": format!("answer of {id}")})];
        let mut messages = vec![
            message(id, &format!("msg_{id}_1"), "user", at, question),
            message(id, &format!("msg_{id}_2"), "assistant", at + 1000, answer),
        ];
        if tokens == (0, 0) {
            s["api_call_count"] = json!(if cost == 0.0 { 0 } else { 1 });
            for m in &mut messages {
                m["usage"] = json!({"input": 0, "output": 0, "cache_read": 0, "cache_write": 0, "reasoning": 0});
                m["cost_usd"] = json!(0.0);
            }
        }
        import(&sessions, s, messages);
    }
    db_path
}

/// A store of one imported session on `m-b`, created a day before `T0`, that answered
/// first on `m-a` (300 input tokens, $0.25) and the next day on `m-b` (700, $0.75), a call
/// each; its 100 output tokens were carried by no message.
pub fn switched_store(dir: &Path) -> PathBuf {
    let db_path = dir.join("switched.db");
    let db = Arc::new(Database::open(&db_path).unwrap());
    let sessions = SessionService::new(Arc::clone(&db));
    let t = T0 - DAY;
    let s = session(
        "ses_switched",
        None,
        "codex",
        "m-b",
        None,
        t,
        1.0,
        (1000, 100),
    );
    let mut messages = Vec::new();
    for (i, (model, at, input, cost)) in [("m-a", t, 300, 0.25), ("m-b", T0, 700, 0.75)]
        .into_iter()
        .enumerate()
    {
        let text = vec![json!({"type": "text", "text": format!("answer {i}")})];
        let mut answer = message(
            "ses_switched",
            &format!("msg_switched_{i}"),
            "assistant",
            at,
            text,
        );
        answer["model"] = json!(model);
        answer["usage"] =
            json!({"input": input, "output": 0, "cache_read": 0, "cache_write": 0, "reasoning": 0});
        answer["cost_usd"] = json!(cost);
        messages.push(answer);
    }
    import(&sessions, s, messages);
    db_path
}

/// Appends an assistant message with `text` to `session` in `db`, in this process.
pub fn append_message(db: &Path, session: &str, text: &str) {
    let db = Arc::new(Database::open(db).unwrap());
    let messages = MessageService::new(db);
    let mut new = NewMessage::new(session, Role::Assistant, vec![Part::text(text)]);
    new.model = Some("m-live".into());
    messages.create(new).unwrap();
}

/// Runs `exe args…` with `SCRIBE_TEST_WRITE=<db>\t<session>\t<text>`: another process that
/// appends one message (see [`writer_main`]), and waits for it.
pub fn write_from_another_process(exe: &Path, args: &[&str], db: &Path, session: &str, text: &str) {
    let status = std::process::Command::new(exe)
        .args(args)
        .env(
            "SCRIBE_TEST_WRITE",
            format!("{}\t{session}\t{text}", db.display()),
        )
        .stdout(std::process::Stdio::null())
        .status()
        .unwrap();
    assert!(status.success(), "the writer process failed: {status}");
}

/// In a process started by [`write_from_another_process`]: does the write and returns
/// true; elsewhere returns false.
pub fn writer_main() -> bool {
    let Ok(job) = std::env::var("SCRIBE_TEST_WRITE") else {
        return false;
    };
    let mut fields = job.splitn(3, '\t');
    let (Some(db), Some(session), Some(text)) = (fields.next(), fields.next(), fields.next())
    else {
        panic!("SCRIBE_TEST_WRITE needs db, session and text");
    };
    append_message(Path::new(db), session, text);
    true
}

/// This test binary again, as the writer process: the test binary must have an ignored
/// test `writer_process` that calls [`writer_main`]. Appends one message with `text` to
/// `session` in `db` from another process and waits for it.
pub fn write_elsewhere(db: &Path, session: &str, text: &str) {
    let exe = std::env::current_exe().unwrap();
    write_from_another_process(
        &exe,
        &["--exact", "writer_process", "--ignored", "--nocapture"],
        db,
        session,
        text,
    );
}

/// The event stream of `addr` (`GET /api/events` on a real socket): asserts `200 OK`,
/// `retry: 1000` and the `hello` event, and returns the response's header lines and a
/// reader of each next line (line end cut; each read waits at most 30 s), positioned
/// just after `event: hello`.
pub fn events(addr: SocketAddr) -> (Vec<String>, impl FnMut() -> String) {
    let mut stream = TcpStream::connect(addr).unwrap();
    stream
        .set_read_timeout(Some(Duration::from_secs(30)))
        .unwrap();
    write!(stream, "GET /api/events HTTP/1.1\r\nHost: {addr}\r\n\r\n").unwrap();
    let mut lines = BufReader::new(stream);
    let mut next_line = move || {
        let mut line = String::new();
        lines.read_line(&mut line).unwrap();
        line.trim_end().to_owned()
    };
    assert_eq!(next_line(), "HTTP/1.1 200 OK");
    let headers: Vec<String> = std::iter::from_fn(|| Some(next_line()))
        .take_while(|line| !line.is_empty())
        .collect();
    assert_eq!(next_line(), "retry: 1000");
    assert_eq!(next_line(), "event: hello");
    (headers, next_line)
}

/// Reads the event stream until a `change` event, whose data must be a version; anything
/// else on the way may only be keep-alive comments, blank lines or data.
pub fn wait_for_change(next_line: &mut impl FnMut() -> String) {
    loop {
        let line = next_line();
        if line == "event: change" {
            break;
        }
        assert!(
            line.is_empty() || line.starts_with(':') || line.starts_with("data:"),
            "{line}"
        );
    }
    let data = next_line();
    assert!(data.starts_with("data: {\"version\":"), "{data}");
}

/// The start of `text` of at most `max` bytes that ends on a character boundary: what the
/// messages API keeps of a string cut to `max` bytes.
pub fn head_of(text: &str, max: usize) -> &str {
    let mut end = max.min(text.len());
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    &text[..end]
}

/// The 5 MB string of [`cut_parts_store`]: `x`s up to one byte before the cap, then
/// four-byte characters, so the cap falls inside one.
pub fn five_mb_string() -> String {
    let cap = scribe_server::json::PART_TEXT_CAP;
    let mut text = "x".repeat(cap - 1);
    while text.len() < 5_000_000 {
        text.push('😀');
    }
    text
}

/// The tool input of [`cut_parts_store`]'s part of many long strings: fifty 100 KB
/// strings (`k00`…`k49`: "ab" then four-byte characters) and one short one under a key
/// that needs escaping.
pub fn many_strings_input() -> Value {
    let long = format!("ab{}", "😀".repeat(25_000));
    let mut input = serde_json::Map::new();
    for i in 0..50 {
        input.insert(format!("k{i:02}"), Value::String(long.clone()));
    }
    input.insert("a \"key\" é".into(), json!("short"));
    Value::Object(input)
}

/// A store with session `ses_cut`: `msg_cut_2` holds a tool part whose output is
/// [`five_mb_string`] (`prt_msg_cut_2_0`), a tool part whose input is
/// [`many_strings_input`] (`prt_msg_cut_2_1`, its metadata every kind of scalar) and a
/// small text part (`prt_msg_cut_2_2`).
pub fn cut_parts_store(dir: &Path) -> PathBuf {
    let db_path = dir.join("cut.db");
    let db = Arc::new(Database::open(&db_path).unwrap());
    let sessions = SessionService::new(Arc::clone(&db));
    let t = T0 - DAY;
    import(
        &sessions,
        session(
            "ses_cut",
            Some("Big strings"),
            "cli",
            "m-opus",
            None,
            t,
            0.1,
            (100, 20),
        ),
        vec![
            message(
                "ses_cut",
                "msg_cut_1",
                "user",
                t + MINUTE,
                vec![json!({"type": "text", "text": "Write them."})],
            ),
            message(
                "ses_cut",
                "msg_cut_2",
                "assistant",
                t + 2 * MINUTE,
                vec![
                    json!({"type": "tool", "call_id": "call_cat", "tool": "bash",
                       "input": {"command": "cat emoji.txt"},
                       "state": {"status": "completed", "output": five_mb_string(),
                                 "title": "cat emoji.txt", "started_at": t, "ended_at": t}}),
                    json!({"type": "tool", "call_id": "call_many", "tool": "write",
                       "input": many_strings_input(),
                       "state": {"status": "completed", "output": "done", "title": "write",
                                 "metadata": {"exit": 0, "ratio": 0.1, "big": 12_345_678_901_234_i64,
                                              "third": 1.0 / 3.0, "ok": true, "none": null,
                                              "list": [1, "two", [3.5]]},
                                 "started_at": t, "ended_at": t}}),
                    json!({"type": "text", "text": "Done."}),
                ],
            ),
        ],
    );
    db_path
}

/// What the messages API must send of [`cut_parts_store`] (on any backend): strings cut
/// at the cap, whole characters only, within the part's budget; `full_bytes` exactly the
/// size of the part's JSON whole; everything else as stored; and `/api/parts/{id}` the
/// part whole, as stored. Returns the page.
pub fn check_cut_parts(addr: SocketAddr) -> Value {
    use scribe_server::json::{PART_BUDGET, PART_STRING_FLOOR, PART_TEXT_CAP};
    let reply = get(addr, "/api/sessions/ses_cut/messages");
    assert_eq!(reply.status, 200, "{}", reply.text());
    // Two cut parts: at most a cap, the budget, and a floor per string, plus their JSON.
    assert!(
        reply.body.len() < PART_TEXT_CAP + PART_BUDGET + 60 * PART_STRING_FLOOR + 10_000,
        "the page is bounded: {} bytes",
        reply.body.len()
    );
    let page = reply.json();
    let parts = &page["messages"][1]["parts"];

    // The 5 MB output: its first cap bytes but for the four-byte character across the cap.
    let big = &parts[0];
    let output = five_mb_string();
    let sent = big["part"]["state"]["output"].as_str().unwrap();
    assert_eq!(sent.len(), PART_TEXT_CAP - 1);
    assert_eq!(sent, head_of(&output, PART_TEXT_CAP));
    assert_eq!(big["cut"], json!(true));
    assert_eq!(big["part"]["input"], json!({"command": "cat emoji.txt"}));
    assert_eq!(big["part"]["state"]["title"], json!("cat emoji.txt"));
    let whole = get_json(addr, "/api/parts/prt_msg_cut_2_0");
    assert_eq!(whole["part"]["state"]["output"], json!(output));
    assert_eq!(
        big["full_bytes"],
        json!(serde_json::to_vec(&whole["part"]).unwrap().len())
    );
    // Apart from the output, the part is sent as it is whole.
    let mut rest = big.clone();
    rest["part"]["state"]["output"] = whole["part"]["state"]["output"].clone();
    for field in ["cut", "full_bytes"] {
        rest.as_object_mut().unwrap().remove(field);
    }
    assert_eq!(rest, whole);

    // Many 100 KB strings: in stored order, each its cap until the budget is spent (the
    // strings before them count: "tool", "call_many", "write", then the short input),
    // then the floor each.
    let many = &parts[1];
    let input = many_strings_input();
    let mut used = "tool".len() + "call_many".len() + "write".len() + "short".len();
    for i in 0..50 {
        let key = format!("k{i:02}");
        let full = input[&key].as_str().unwrap();
        let allowed = PART_TEXT_CAP
            .min(PART_BUDGET.saturating_sub(used))
            .max(PART_STRING_FLOOR);
        let sent = many["part"]["input"][&key].as_str().unwrap();
        assert_eq!(sent, head_of(full, allowed), "{key}: {} bytes", sent.len());
        used += full.len().min(PART_TEXT_CAP);
    }
    assert_eq!(many["part"]["input"]["k00"].as_str().unwrap().len(), 65_534);
    assert_eq!(many["part"]["input"]["k49"].as_str().unwrap().len(), 254);
    assert_eq!(many["part"]["input"]["a \"key\" é"], json!("short"));
    assert_eq!(many["cut"], json!(true));
    let whole = get_json(addr, "/api/parts/prt_msg_cut_2_1");
    assert_eq!(whole["part"]["input"], input);
    assert_eq!(
        many["full_bytes"],
        json!(serde_json::to_vec(&whole["part"]).unwrap().len())
    );
    // Its state, scalars and all, is whole.
    assert_eq!(many["part"]["state"], whole["part"]["state"]);
    assert_eq!(
        whole["part"]["state"]["metadata"]["third"],
        json!(1.0_f64 / 3.0)
    );

    // A small part is sent as stored, without cut fields.
    let small = &parts[2];
    assert_eq!(small, &get_json(addr, "/api/parts/prt_msg_cut_2_2"));
    assert!(small.get("cut").is_none() && small.get("full_bytes").is_none());
    page
}
