//! Shared helpers of the end-to-end tests: run the built `scribe` binary against a
//! temporary database, and seed that database through the services as a library.
#![allow(clippy::unwrap_used, clippy::expect_used, dead_code)]

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::sync::Arc;

use scribe_db::{Database, Options};
use scribe_message::{
    FinishReason, MessageService, NewMessage, Part, ReasoningPart, Role, TokenUsage, ToolPart,
    ToolState,
};
use scribe_session::{NewSession, SessionService, UsageDelta};

/// A temporary directory with a database path in it.
pub struct Env {
    pub dir: tempfile::TempDir,
    pub db: PathBuf,
}

impl Env {
    /// A fresh, not yet created database.
    pub fn new() -> Env {
        let dir = tempfile::tempdir().unwrap();
        let db = dir.path().join("scribe.db");
        Env { dir, db }
    }

    /// Runs `scribe --db <db> args…` with no stdin, no colour and a fixed width.
    pub fn run(&self, args: &[&str]) -> Output {
        self.run_with_stdin(args, None)
    }

    /// Like [`Env::run`], feeding `stdin` when given.
    pub fn run_with_stdin(&self, args: &[&str], stdin: Option<&str>) -> Output {
        self.run_full(args, stdin, &[])
    }

    /// Like [`Env::run`] with extra environment variables.
    pub fn run_env(&self, args: &[&str], vars: &[(&str, &str)]) -> Output {
        self.run_full(args, None, vars)
    }

    fn run_full(&self, args: &[&str], stdin: Option<&str>, vars: &[(&str, &str)]) -> Output {
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_scribe"));
        cmd.env_remove("NO_COLOR").env_remove("CLICOLOR_FORCE");
        cmd.arg("--db")
            .arg(&self.db)
            .args(args)
            .env_remove("SCRIBE_DB")
            .env("COLUMNS", "200")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        for (key, value) in vars {
            cmd.env(key, value);
        }
        let mut child = cmd.spawn().unwrap();
        let mut input = child.stdin.take().unwrap();
        if let Some(text) = stdin {
            input.write_all(text.as_bytes()).unwrap();
        }
        drop(input);
        child.wait_with_output().unwrap()
    }

    /// Runs and expects success; returns stdout.
    pub fn ok(&self, args: &[&str]) -> String {
        let out = self.run(args);
        assert!(
            out.status.success(),
            "scribe {args:?} failed: {}",
            stderr(&out)
        );
        stdout(&out)
    }

    /// Runs with `--json` expected to succeed; returns the parsed document.
    pub fn json(&self, args: &[&str]) -> serde_json::Value {
        let text = self.ok(args);
        serde_json::from_str(&text).unwrap_or_else(|e| panic!("{e}: {text}"))
    }

    /// Runs and expects exit code 1 with exactly one line on stderr; returns it.
    pub fn fails(&self, args: &[&str]) -> String {
        let out = self.run(args);
        assert_eq!(
            out.status.code(),
            Some(1),
            "scribe {args:?}: {}",
            stderr(&out)
        );
        let err = stderr(&out);
        assert_eq!(err.lines().count(), 1, "{err}");
        err
    }

    /// The services over the database (created if needed).
    pub fn services(&self) -> (SessionService, MessageService) {
        self.services_with(Options::default())
    }

    /// The services over the database opened with `options` (e.g. a clock of the test's).
    pub fn services_with(&self, options: Options) -> (SessionService, MessageService) {
        let db = Arc::new(Database::open_with(&self.db, options).unwrap());
        (
            SessionService::new(Arc::clone(&db)),
            MessageService::new(db),
        )
    }

    pub fn path(&self, name: &str) -> PathBuf {
        self.dir.path().join(name)
    }

    /// Runs `scribe --db <db> args…` (`args` as a shell would split them) with its stdout
    /// on a terminal (util-linux `script`), expecting success; returns what the terminal
    /// received.
    #[cfg(target_os = "linux")]
    pub fn on_a_terminal(&self, args: &str) -> String {
        let command = format!(
            "{} --db {} {args}",
            env!("CARGO_BIN_EXE_scribe"),
            self.db.display()
        );
        let out = Command::new("script")
            .args(["-qec", &command, "/dev/null"])
            .env_remove("SCRIBE_DB")
            .stdin(Stdio::null())
            .output()
            .expect("util-linux `script` runs a command on a pseudo-terminal");
        assert!(out.status.success(), "{}", stderr(&out));
        stdout(&out)
    }
}

pub fn stdout(out: &Output) -> String {
    String::from_utf8_lossy(&out.stdout).into_owned()
}

pub fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

/// The ids of what [`seed`] created.
pub struct Seeded {
    /// "Fix the build" (cli, ended): user, assistant with reasoning + tool + text.
    pub build: String,
    /// Its first user message.
    pub build_first: String,
    /// A sub-agent task of `build`.
    pub task: String,
    /// "搜索功能" (tui, active, CJK text).
    pub cjk: String,
    /// "Old notes" (telegram, archived).
    pub archived: String,
}

/// A completed tool call of `tool` with `input` that output `output`.
pub fn tool_done(call: &str, tool: &str, input: serde_json::Value, output: &str) -> Part {
    Part::Tool(ToolPart {
        call_id: call.into(),
        tool: tool.into(),
        input,
        state: ToolState::Completed {
            output: output.into(),
            title: String::new(),
            metadata: serde_json::Value::Null,
            started_at: 1,
            ended_at: 2,
        },
        compacted_at: None,
        extra: Default::default(),
    })
}

/// Seeds a small, varied history.
pub fn seed(env: &Env) -> Seeded {
    let (sessions, messages) = env.services();
    let build = sessions
        .create(NewSession {
            title: Some("Fix the build".into()),
            model: Some("anthropic/claude-sonnet-4".into()),
            directory: Some("/src/app".into()),
            ..NewSession::default()
        })
        .unwrap();
    let first = messages
        .create(NewMessage::new(
            &build.id,
            Role::User,
            vec![Part::text(
                "The build fails with\n error E0308: mismatched types in parser.rs",
            )],
        ))
        .unwrap();
    let mut answer = NewMessage::new(
        &build.id,
        Role::Assistant,
        vec![
            Part::Reasoning(ReasoningPart {
                text: "The parser returns a String\nwhere a &str is expected.".into(),
                ..Default::default()
            }),
            tool_done(
                "call_1",
                "read",
                serde_json::json!({"path": "src/parser.rs"}),
                "fn parse(input: &str) -> String {\n    input.to_owned()\n}",
            ),
            Part::text("I changed `parse` to borrow its input; the build passes now."),
        ],
    );
    answer.model = Some("anthropic/claude-sonnet-4".into());
    let answer = messages.create(answer).unwrap();
    let usage = TokenUsage {
        input: 1200,
        output: 300,
        cache_read: 800,
        cache_write: 100,
        reasoning: 50,
    };
    messages.add_usage(&answer.id, usage, 0.0123).unwrap();
    messages.finish(&answer.id, FinishReason::EndTurn).unwrap();
    sessions
        .add_usage(
            &build.id,
            &UsageDelta {
                tokens: usage,
                api_calls: 1,
                cost_usd: 0.0123,
                ..UsageDelta::default()
            },
        )
        .unwrap();
    let task = sessions
        .create_task_session(&build.id, "call_task_1", Some("Check the tests"))
        .unwrap();
    messages
        .create(NewMessage::new(
            &task.id,
            Role::User,
            vec![Part::text("Run the parser tests")],
        ))
        .unwrap();
    sessions.end(&build.id, "user_exit").unwrap();

    let cjk = sessions
        .create(NewSession {
            title: Some("搜索功能".into()),
            source: "tui".into(),
            model: Some("openai/gpt-4o".into()),
            ..NewSession::default()
        })
        .unwrap();
    messages
        .create(NewMessage::new(
            &cjk.id,
            Role::User,
            vec![Part::text("搜索功能需要支持中文分词")],
        ))
        .unwrap();
    sessions
        .add_usage(
            &cjk.id,
            &UsageDelta {
                tokens: TokenUsage {
                    input: 500,
                    output: 100,
                    ..TokenUsage::default()
                },
                api_calls: 1,
                cost_usd: 0.5,
                ..UsageDelta::default()
            },
        )
        .unwrap();

    let archived = sessions
        .create(NewSession {
            title: Some("Old notes".into()),
            source: "telegram".into(),
            ..NewSession::default()
        })
        .unwrap();
    messages
        .create(NewMessage::new(
            &archived.id,
            Role::User,
            vec![Part::text("remember the milk")],
        ))
        .unwrap();
    sessions.archive(&archived.id).unwrap();
    sessions.end(&archived.id, "user_exit").unwrap();

    Seeded {
        build: build.id,
        build_first: first.id,
        task: task.id,
        cjk: cjk.id,
        archived: archived.id,
    }
}

/// Every row a session export holds, for equality checks across databases.
pub fn snapshot(db: &Path) -> Vec<scribe_session::SessionExport> {
    let db = Arc::new(Database::open(db).unwrap());
    SessionService::new(db)
        .export(&scribe_session::ExportSelection::All { source: None })
        .unwrap()
}

/// A running `scribe serve` on a free loopback port, killed (by its pid) on drop.
pub struct Serving {
    child: std::process::Child,
    /// `127.0.0.1:PORT`.
    pub host: String,
    /// The line it printed on start: "scribe serve: <db> (read-only) at http://…/".
    pub line: String,
}

impl Drop for Serving {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Serving {
    /// `scribe --db DB serve --addr 127.0.0.1:0`, with no `SCRIBE_DB` or token from the
    /// environment.
    pub fn start(db: impl AsRef<std::ffi::OsStr>) -> Serving {
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_scribe"));
        cmd.arg("--db")
            .arg(db)
            .args(["serve", "--addr", "127.0.0.1:0"])
            .env_remove("SCRIBE_DB");
        Serving::spawn(cmd)
    }

    /// Runs `cmd` (a `scribe … serve` command) without a token from the environment and
    /// waits for the URL it prints.
    pub fn spawn(mut cmd: Command) -> Serving {
        use std::io::{BufRead, BufReader};
        let mut child = cmd
            .env_remove("SCRIBE_SERVE_TOKEN")
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let mut line = String::new();
        BufReader::new(child.stdout.take().unwrap())
            .read_line(&mut line)
            .unwrap();
        let host = line
            .split("http://")
            .nth(1)
            .and_then(|rest| rest.split('/').next())
            .map(ToOwned::to_owned);
        let Some(host) = host else {
            let _ = child.kill();
            let _ = child.wait();
            panic!("no URL in {line:?}");
        };
        Serving { child, host, line }
    }

    /// `GET path` → (status, body).
    pub fn get_text(&self, path: &str) -> (u16, String) {
        use std::io::Read;
        let mut stream = std::net::TcpStream::connect(&self.host).unwrap();
        stream
            .set_read_timeout(Some(std::time::Duration::from_secs(60)))
            .unwrap();
        write!(
            stream,
            "GET {path} HTTP/1.1\r\nHost: {}\r\nConnection: close\r\n\r\n",
            self.host
        )
        .unwrap();
        let mut raw = String::new();
        stream.read_to_string(&mut raw).unwrap();
        let (head, body) = raw.split_once("\r\n\r\n").unwrap();
        let status = head.split(' ').nth(1).unwrap().parse().unwrap();
        (status, body.to_owned())
    }

    /// `GET path` → (status, JSON body; `Null` when the body is not JSON).
    pub fn get(&self, path: &str) -> (u16, serde_json::Value) {
        let (status, body) = self.get_text(path);
        (
            status,
            serde_json::from_str(&body).unwrap_or(serde_json::Value::Null),
        )
    }

    /// `GET path`, which must answer 200, → its JSON body.
    pub fn json(&self, path: &str) -> serde_json::Value {
        let (status, body) = self.get_text(path);
        assert_eq!(status, 200, "GET {path}: {body}");
        serde_json::from_str(&body).unwrap()
    }
}

/// The names in `dir`, sorted.
pub fn names_in(dir: &Path) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    names
}
