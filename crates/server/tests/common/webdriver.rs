//! A minimal W3C WebDriver client over [`super::request`]: enough to drive Debian's
//! headless Chromium through chromedriver (navigate, run a script, find, click, type,
//! screenshot). Waits poll a condition in the page, bounded, and fail with what they were
//! waiting for.
//!
//! No browser outlives the test process that started it, however that process ends:
//! chromedriver runs under a supervisor, a `sh` in a process group of its own (Chromium,
//! started by chromedriver, joins it) that waits on a pipe from the test process and kills
//! the whole group when the pipe closes — on [`Driver`]'s drop, or when the kernel closes
//! it because the test process died, even by `SIGKILL`. Every process of the group carries
//! [`OWNER_ENV`] naming its test process, so the next [`Driver::start`] also kills what a
//! run whose supervisor was killed too left behind ([`sweep_orphans`]).
#![allow(clippy::unwrap_used, clippy::expect_used, dead_code)]

use std::net::{SocketAddr, TcpListener};
use std::os::unix::process::CommandExt as _;
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::time::{Duration, Instant};

use base64::Engine as _;
use serde_json::{Value, json};

/// The key W3C WebDriver names element references by.
const ELEMENT: &str = "element-6066-11e4-a52e-4f735466cecf";

/// How long a wait may take before the test fails (generous: the machine may be loaded).
pub const WAIT: Duration = Duration::from_secs(30);

pub type Result<T> = std::result::Result<T, Box<dyn std::error::Error>>;

/// Where Chromium and chromedriver are: `SCRIBE_CHROMIUM` / `SCRIBE_CHROMEDRIVER`, else
/// the first of the usual names on `PATH`.
pub fn find_browser() -> Option<(PathBuf, PathBuf)> {
    let on_path = |names: &[&str]| -> Option<PathBuf> {
        let path = std::env::var_os("PATH")?;
        names.iter().find_map(|name| {
            std::env::split_paths(&path)
                .map(|dir| dir.join(name))
                .find(|p| p.is_file())
        })
    };
    let chromium = std::env::var_os("SCRIBE_CHROMIUM")
        .map(PathBuf::from)
        .or_else(|| on_path(&["chromium", "chromium-browser", "google-chrome"]))?;
    let driver = std::env::var_os("SCRIBE_CHROMEDRIVER")
        .map(PathBuf::from)
        .or_else(|| on_path(&["chromedriver"]))?;
    Some((chromium, driver))
}

/// The environment variable that marks the processes of a browser: `<pid>:<start>` of the
/// test process that started them (its start time tells a reused pid apart).
pub const OWNER_ENV: &str = "SCRIBE_BROWSER_OWNER";

/// The supervisor: starts chromedriver (`$1 --port=$2`) in the background, waits until its
/// standard input closes, then kills its own process group (itself, chromedriver, Chromium).
const SUPERVISOR: &str = r#""$1" --port="$2" >/dev/null 2>&1 &
read -r _ignored
kill -KILL 0"#;

/// When process `pid` started (clock ticks since boot, field 22 of `/proc/<pid>/stat`).
fn start_time(pid: u32) -> Option<u64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // The command name (field 2) is in parentheses and may hold spaces.
    let rest = &stat[stat.rfind(')')? + 1..];
    rest.split_whitespace().nth(19)?.parse().ok()
}

/// The [`OWNER_ENV`] value of this process.
pub fn owner_mark() -> String {
    let pid = std::process::id();
    format!("{pid}:{}", start_time(pid).unwrap_or(0))
}

/// Every process carrying [`OWNER_ENV`], with its value.
pub fn marked_processes() -> Vec<(u32, String)> {
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    let prefix = format!("{OWNER_ENV}=");
    entries
        .flatten()
        .filter_map(|entry| {
            let pid: u32 = entry.file_name().to_str()?.parse().ok()?;
            let environ = std::fs::read(entry.path().join("environ")).ok()?;
            let mark = environ
                .split(|&b| b == 0)
                .find_map(|var| var.strip_prefix(prefix.as_bytes()))?;
            Some((pid, String::from_utf8_lossy(mark).into_owned()))
        })
        .collect()
}

/// Whether the test process a mark names is still running (the same process: same pid and
/// start time).
fn owner_alive(mark: &str) -> bool {
    let Some((pid, start)) = mark.split_once(':') else {
        return false;
    };
    match (pid.parse::<u32>(), start.parse::<u64>()) {
        (Ok(pid), Ok(start)) => start_time(pid) == Some(start),
        _ => false,
    }
}

/// Kills every marked process whose test process is gone: what a run left behind when its
/// supervisor was killed as well. Returns how many it killed.
pub fn sweep_orphans() -> usize {
    let orphans: Vec<String> = marked_processes()
        .into_iter()
        .filter(|(_, mark)| !owner_alive(mark))
        .map(|(pid, _)| pid.to_string())
        .collect();
    if !orphans.is_empty() {
        let _ = Command::new("sh")
            .args(["-c", r#"kill -KILL "$@" 2>/dev/null"#, "sh"])
            .args(&orphans)
            .status();
    }
    orphans.len()
}

/// A chromedriver process and one browser session, both ended on drop.
pub struct Driver {
    addr: SocketAddr,
    session: String,
    /// The supervisor; it kills its process group when `supervisor_pipe` closes.
    supervisor: Child,
    supervisor_pipe: Option<ChildStdin>,
    _profile: tempfile::TempDir,
}

fn free_port() -> Result<u16> {
    Ok(TcpListener::bind("127.0.0.1:0")?.local_addr()?.port())
}

impl Driver {
    /// Starts chromedriver and a headless Chromium with a fresh profile.
    pub fn start(chromium: &Path, chromedriver: &Path, width: u32, height: u32) -> Result<Driver> {
        sweep_orphans();
        let port = free_port()?;
        let mut supervisor = Command::new("sh")
            .args(["-c", SUPERVISOR, "sh"])
            .arg(chromedriver)
            .arg(port.to_string())
            .env(OWNER_ENV, owner_mark())
            .process_group(0)
            .stdin(Stdio::piped())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()?;
        let pipe = supervisor.stdin.take();
        let profile = tempfile::tempdir()?;
        let mut driver = Driver {
            addr: SocketAddr::from(([127, 0, 0, 1], port)),
            session: String::new(),
            supervisor,
            supervisor_pipe: pipe,
            _profile: profile,
        };
        let started = Instant::now();
        loop {
            if let Ok(reply) = super::request(driver.addr, "GET", "/status", &[], None)
                && reply.json()["value"]["ready"] == json!(true)
            {
                break;
            }
            if started.elapsed() > WAIT {
                return Err("chromedriver did not become ready".into());
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        let args = [
            "--headless=new".to_owned(),
            "--no-sandbox".to_owned(),
            "--disable-gpu".to_owned(),
            "--disable-quic".to_owned(),
            "--no-first-run".to_owned(),
            "--disable-background-networking".to_owned(),
            "--disable-component-update".to_owned(),
            "--disable-sync".to_owned(),
            "--disable-dev-shm-usage".to_owned(),
            format!("--user-data-dir={}", driver._profile.path().display()),
            format!("--window-size={width},{height}"),
        ];
        let mut args = args.to_vec();
        if let Ok(extra) = std::env::var("SCRIBE_CHROMIUM_ARGS") {
            args.extend(extra.split_whitespace().map(str::to_owned));
        }
        let caps = json!({"capabilities": {"alwaysMatch": {
            "browserName": "chrome",
            "goog:chromeOptions": {"binary": chromium, "args": args},
            "goog:loggingPrefs": {"browser": "ALL"}
        }}});
        let value = driver.call("POST", "/session", Some(caps))?;
        driver.session = value["sessionId"]
            .as_str()
            .ok_or("no session id from chromedriver")?
            .to_owned();
        Ok(driver)
    }

    fn call(&self, method: &str, path: &str, body: Option<Value>) -> Result<Value> {
        let body = body.map(|b| b.to_string());
        let started = Instant::now();
        let reply = super::request(
            self.addr,
            method,
            path,
            &[],
            body.as_deref().map(str::as_bytes),
        );
        if std::env::var_os("SCRIBE_WEBDRIVER_DEBUG").is_some() {
            let status = reply.as_ref().map(|r| r.status);
            eprintln!(
                "webdriver {method} {path} {body:?} -> {status:?} in {:?}",
                started.elapsed()
            );
        }
        let reply = reply?;
        let value = reply.json()["value"].take();
        if reply.status != 200 {
            return Err(format!("webdriver {method} {path}: {} {value}", reply.status).into());
        }
        Ok(value)
    }

    fn session_call(&self, method: &str, path: &str, body: Option<Value>) -> Result<Value> {
        self.call(method, &format!("/session/{}{path}", self.session), body)
    }

    /// Loads `url`.
    pub fn goto(&self, url: &str) -> Result<()> {
        self.session_call("POST", "/url", Some(json!({"url": url})))?;
        Ok(())
    }

    /// The current URL.
    pub fn url(&self) -> Result<String> {
        Ok(self
            .session_call("GET", "/url", None)?
            .as_str()
            .unwrap_or("")
            .to_owned())
    }

    /// Runs `script` (a function body; `arguments[i]` are `args`) and returns its value.
    pub fn exec(&self, script: &str, args: Value) -> Result<Value> {
        self.session_call(
            "POST",
            "/execute/sync",
            Some(json!({"script": script, "args": args})),
        )
    }

    /// Polls `script` until it returns something truthy (not null/false/0/""), bounded by
    /// [`WAIT`]; returns that value.
    pub fn wait(&self, what: &str, script: &str) -> Result<Value> {
        let started = Instant::now();
        loop {
            let value = self.exec(script, json!([]))?;
            let truthy = match &value {
                Value::Null | Value::Bool(false) => false,
                Value::Number(n) => n.as_f64() != Some(0.0),
                Value::String(s) => !s.is_empty(),
                _ => true,
            };
            if truthy {
                return Ok(value);
            }
            if started.elapsed() > WAIT {
                let state = self
                    .exec("return location.href + ' ' + (document.getElementById('main') || {dataset: {}}).dataset.state + ' ' + document.body.innerText.slice(0, 2000)", json!([]))
                    .unwrap_or(Value::Null);
                return Err(format!("timed out waiting for {what}; page: {state}").into());
            }
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    /// Waits until the view finished loading (`main[data-state=ready]`).
    pub fn wait_ready(&self) -> Result<()> {
        self.wait(
            "the view to be ready",
            "return document.getElementById('main')?.dataset.state === 'ready'",
        )?;
        Ok(())
    }

    /// Opens a view of the viewer: loads `url` and waits until it is ready.
    pub fn open(&self, url: &str) -> Result<()> {
        self.goto(url)?;
        self.wait_ready()
    }

    /// Waits until the page follows changes (its live badge is on).
    pub fn wait_live(&self) -> Result<()> {
        self.wait(
            "the live badge",
            "return document.getElementById('live').classList.contains('on')",
        )?;
        Ok(())
    }

    /// Waits until the page has seen a change: its `body[data-version]` moved from what
    /// the test kept in `window.__version`.
    pub fn wait_change_seen(&self) -> Result<()> {
        self.wait(
            "the page to see the change",
            "return document.body.dataset.version && document.body.dataset.version !== window.__version",
        )?;
        Ok(())
    }

    /// Fails unless the browser console has no entries since the last look (see
    /// [`Driver::clear_console`]).
    pub fn check_console_clean(&self) -> Result<()> {
        let console = self.console()?;
        if console.is_empty() {
            Ok(())
        } else {
            Err(format!("the console stays clean: {console:?}").into())
        }
    }

    /// The first element matching `css` (waits for it).
    pub fn find(&self, css: &str) -> Result<Value> {
        let started = Instant::now();
        loop {
            match self.session_call(
                "POST",
                "/element",
                Some(json!({"using": "css selector", "value": css})),
            ) {
                Ok(value) => return Ok(value),
                Err(err) if started.elapsed() > WAIT => {
                    return Err(format!("no element {css:?}: {err}").into());
                }
                Err(_) => std::thread::sleep(Duration::from_millis(100)),
            }
        }
    }

    fn element_id(element: &Value) -> Result<String> {
        Ok(element[ELEMENT]
            .as_str()
            .ok_or("not an element reference")?
            .to_owned())
    }

    /// Clicks the first element matching `css`, scrolled to the middle of the window first
    /// (so the sticky header cannot be in the way).
    pub fn click(&self, css: &str) -> Result<()> {
        let element = self.find(css)?;
        self.exec(
            "arguments[0].scrollIntoView({block: 'center'})",
            json!([element.clone()]),
        )?;
        let id = Self::element_id(&element)?;
        self.session_call("POST", &format!("/element/{id}/click"), Some(json!({})))?;
        Ok(())
    }

    /// Types `text` into the first element matching `css`, key by key.
    pub fn type_into(&self, css: &str, text: &str) -> Result<()> {
        let id = Self::element_id(&self.find(css)?)?;
        self.session_call(
            "POST",
            &format!("/element/{id}/value"),
            Some(json!({"text": text})),
        )?;
        Ok(())
    }

    /// Presses and releases each key of `text` (WebDriver key codes such as `\u{E007}`,
    /// Enter, included) on whatever has the focus, as a user at the keyboard would.
    pub fn keys(&self, text: &str) -> Result<()> {
        let actions: Vec<Value> = text
            .chars()
            .flat_map(|c| {
                let key = c.to_string();
                [
                    json!({"type": "keyDown", "value": key}),
                    json!({"type": "keyUp", "value": key}),
                ]
            })
            .collect();
        self.session_call(
            "POST",
            "/actions",
            Some(json!({"actions": [{"type": "key", "id": "keyboard", "actions": actions}]})),
        )?;
        Ok(())
    }

    /// The browser console's entries since the last call, as `LEVEL message` lines
    /// (chromedriver's log endpoint; `goog:loggingPrefs` asks it to keep them).
    pub fn console(&self) -> Result<Vec<String>> {
        let value = self.session_call("POST", "/se/log", Some(json!({"type": "browser"})))?;
        Ok(value
            .as_array()
            .map(|entries| {
                entries
                    .iter()
                    .map(|e| {
                        format!(
                            "{} {}",
                            e["level"].as_str().unwrap_or("?"),
                            e["message"].as_str().unwrap_or("")
                        )
                    })
                    .collect()
            })
            .unwrap_or_default())
    }

    /// Starts a clean console record: leaves the page shown for `about:blank` (a page left by an
    /// earlier test keeps polling its server, which is gone, and the browser logs every refused
    /// request), then drops the entries so far.
    pub fn clear_console(&self) -> Result<()> {
        self.goto("about:blank")?;
        self.console()?;
        Ok(())
    }

    /// Resizes the browser window.
    pub fn resize(&self, width: u32, height: u32) -> Result<()> {
        self.session_call(
            "POST",
            "/window/rect",
            Some(json!({"width": width, "height": height})),
        )?;
        Ok(())
    }

    /// Makes the page's time zone `zone` (an IANA name; "" gives the machine's back), as a
    /// user's own would be: Chromium's DevTools `Emulation.setTimezoneOverride`.
    pub fn set_time_zone(&self, zone: &str) -> Result<()> {
        self.session_call(
            "POST",
            "/goog/cdp/execute",
            Some(json!({"cmd": "Emulation.setTimezoneOverride", "params": {"timezoneId": zone}})),
        )?;
        Ok(())
    }

    /// A PNG of the viewport.
    pub fn screenshot(&self) -> Result<Vec<u8>> {
        let value = self.session_call("GET", "/screenshot", None)?;
        let b64 = value.as_str().ok_or("no screenshot data")?;
        Ok(base64::engine::general_purpose::STANDARD.decode(b64)?)
    }
}

impl Drop for Driver {
    fn drop(&mut self) {
        if !self.session.is_empty() {
            let _ = self.call("DELETE", &format!("/session/{}", self.session), None);
        }
        // Closing the pipe has the supervisor kill its group; then it is reaped.
        drop(self.supervisor_pipe.take());
        let _ = self.supervisor.wait();
    }
}
