//! The built-in tools, all confined to the project root ([`ToolContext::project_root`]):
//! [`ReadFile`], [`WriteFile`], [`EditFile`] (exact string replacement),
//! [`ListDir`], and [`RunCheck`], which runs one of a fixed set of configured
//! commands with a timeout — the model picks a check by name and never
//! supplies a command line.
//!
//! `write_file` and `edit_file` record what they change in the session's file
//! history when the context has a recorder ([`super::history`]).

use std::collections::BTreeMap;
use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::thread;
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use super::history::{Before, record_change};
use super::path::{canonical_roots, resolve_within};
use super::{Tool, ToolContext, ToolError, ToolOutput};

/// The most bytes of a file or command output returned to the model.
pub const MAX_OUTPUT_BYTES: usize = 64 * 1024;

fn confined(ctx: &ToolContext, requested: &str) -> Result<PathBuf, ToolError> {
    let roots = canonical_roots([ctx.project_root.as_path()]);
    Ok(resolve_within(&roots, &ctx.project_root, requested)?)
}

fn str_arg<'a>(input: &'a Value, name: &str) -> Result<&'a str, ToolError> {
    input
        .get(name)
        .and_then(Value::as_str)
        .ok_or_else(|| ToolError::InvalidInput(format!("{name} must be a string")))
}

fn io_error(action: String) -> impl FnOnce(std::io::Error) -> ToolError {
    move |source| ToolError::Io { action, source }
}

/// Cuts `text` to at most `max` bytes on a character boundary, saying so.
pub fn cap_text(text: &str, max: usize) -> String {
    if text.len() <= max {
        return text.to_owned();
    }
    let mut end = max;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    format!(
        "{}\n[truncated: showing the first {end} of {} bytes]",
        &text[..end],
        text.len()
    )
}

/// `abs` (a confined path) relative to the canonical project root, `/`-separated
/// (`.` for the root itself).
fn relative_to_root(ctx: &ToolContext, abs: &Path) -> Option<String> {
    let root = ctx.project_root.canonicalize().ok()?;
    let rel = abs.strip_prefix(&root).ok()?;
    let parts: Vec<String> = rel
        .components()
        .map(|c| c.as_os_str().to_string_lossy().into_owned())
        .collect();
    Some(if parts.is_empty() {
        ".".to_owned()
    } else {
        parts.join("/")
    })
}

/// The call's path relative to the (canonical) project root, `/`-separated;
/// the raw path when it does not resolve inside the root (the call then fails).
fn path_subject(input: &Value, ctx: &ToolContext) -> Option<String> {
    let raw = input.get("path").and_then(Value::as_str).unwrap_or(".");
    let relative = confined(ctx, raw)
        .ok()
        .and_then(|abs| relative_to_root(ctx, &abs));
    Some(relative.unwrap_or_else(|| raw.to_owned()))
}

/// Records a successful change of `path` in the session's file history (when the
/// context has a recorder), adding what happened to `metadata` under `"history"`.
/// Never fails: the file is already written (see [`super::history`]).
fn record_history(
    ctx: &ToolContext,
    path: &Path,
    before: Before,
    after: &str,
    metadata: &mut Value,
) {
    let Some(recorder) = ctx.files.as_deref() else {
        return;
    };
    let relative = relative_to_root(ctx, path);
    let history = record_change(
        recorder,
        &ctx.session_id,
        relative.as_deref(),
        before,
        after,
    );
    metadata["history"] = history;
}

/// `read_file {path}`: a text file's content (capped at [`MAX_OUTPUT_BYTES`]).
#[derive(Debug, Clone, Copy, Default)]
pub struct ReadFile;

impl Tool for ReadFile {
    fn name(&self) -> &str {
        "read_file"
    }
    fn description(&self) -> &str {
        "Read a text file of the project. `path` is relative to the project root."
    }
    fn input_schema(&self) -> Value {
        json!({"type": "object", "properties": {"path": {"type": "string"}},
               "required": ["path"], "additionalProperties": false})
    }
    fn permission_subject(&self, input: &Value, ctx: &ToolContext) -> Option<String> {
        path_subject(input, ctx)
    }
    fn run(&self, input: &Value, ctx: &ToolContext) -> Result<ToolOutput, ToolError> {
        let requested = str_arg(input, "path")?;
        let path = confined(ctx, requested)?;
        let bytes = std::fs::read(&path).map_err(io_error(format!("read {requested}")))?;
        let text = String::from_utf8(bytes)
            .map_err(|_| ToolError::InvalidInput(format!("{requested} is not a text file")))?;
        Ok(ToolOutput {
            metadata: json!({"bytes": text.len()}),
            output: cap_text(&text, MAX_OUTPUT_BYTES),
            title: format!("Read {requested}"),
        })
    }
}

/// `write_file {path, content}`: creates or replaces a file (and its parent directories).
#[derive(Debug, Clone, Copy, Default)]
pub struct WriteFile;

impl Tool for WriteFile {
    fn name(&self) -> &str {
        "write_file"
    }
    fn description(&self) -> &str {
        "Create or overwrite a file of the project with `content`."
    }
    fn input_schema(&self) -> Value {
        json!({"type": "object",
               "properties": {"path": {"type": "string"}, "content": {"type": "string"}},
               "required": ["path", "content"], "additionalProperties": false})
    }
    fn permission_subject(&self, input: &Value, ctx: &ToolContext) -> Option<String> {
        path_subject(input, ctx)
    }
    fn run(&self, input: &Value, ctx: &ToolContext) -> Result<ToolOutput, ToolError> {
        let requested = str_arg(input, "path")?;
        let content = str_arg(input, "content")?;
        let path = confined(ctx, requested)?;
        if let Some(parent) = path.parent() {
            std::fs::create_dir_all(parent).map_err(io_error(format!("create {requested}")))?;
        }
        let before = if ctx.files.is_some() {
            Before::read(&path)
        } else {
            Before::Absent
        };
        std::fs::write(&path, content).map_err(io_error(format!("write {requested}")))?;
        let mut metadata = json!({"bytes": content.len()});
        record_history(ctx, &path, before, content, &mut metadata);
        Ok(ToolOutput {
            output: format!("wrote {} bytes to {requested}", content.len()),
            title: format!("Write {requested}"),
            metadata,
        })
    }
}

/// `edit_file {path, old, new, replace_all?}`: replaces an exact string, which
/// must occur exactly once unless `replace_all` is set.
#[derive(Debug, Clone, Copy, Default)]
pub struct EditFile;

impl Tool for EditFile {
    fn name(&self) -> &str {
        "edit_file"
    }
    fn description(&self) -> &str {
        "Replace the exact text `old` by `new` in a file; `old` must occur once unless `replace_all` is true."
    }
    fn input_schema(&self) -> Value {
        json!({"type": "object",
               "properties": {"path": {"type": "string"}, "old": {"type": "string"},
                              "new": {"type": "string"}, "replace_all": {"type": "boolean"}},
               "required": ["path", "old", "new"], "additionalProperties": false})
    }
    fn permission_subject(&self, input: &Value, ctx: &ToolContext) -> Option<String> {
        path_subject(input, ctx)
    }
    fn run(&self, input: &Value, ctx: &ToolContext) -> Result<ToolOutput, ToolError> {
        let requested = str_arg(input, "path")?;
        let old = str_arg(input, "old")?;
        let new = str_arg(input, "new")?;
        let replace_all = input
            .get("replace_all")
            .and_then(Value::as_bool)
            .unwrap_or(false);
        if old.is_empty() {
            return Err(ToolError::InvalidInput("old must not be empty".into()));
        }
        let path = confined(ctx, requested)?;
        let text = std::fs::read_to_string(&path).map_err(io_error(format!("read {requested}")))?;
        let count = text.matches(old).count();
        let edited = match count {
            0 => {
                return Err(ToolError::InvalidInput(format!(
                    "the text to replace was not found in {requested}"
                )));
            }
            1 => text.replacen(old, new, 1),
            n if replace_all => {
                let _ = n;
                text.replace(old, new)
            }
            n => {
                return Err(ToolError::InvalidInput(format!(
                    "the text to replace occurs {n} times in {requested}; give more context or set replace_all"
                )));
            }
        };
        std::fs::write(&path, &edited).map_err(io_error(format!("write {requested}")))?;
        let mut metadata = json!({"replacements": count});
        let before = Before::text(text);
        record_history(ctx, &path, before, &edited, &mut metadata);
        Ok(ToolOutput {
            output: format!("replaced {count} occurrence(s) in {requested}"),
            title: format!("Edit {requested}"),
            metadata,
        })
    }
}

/// `list_dir {path?}`: the entries of a directory (default: the project root),
/// sorted, directories suffixed with `/`.
#[derive(Debug, Clone, Copy, Default)]
pub struct ListDir;

/// The sorted listing of `dir`, directories suffixed with `/`, at most `max` entries
/// (then a line saying how many were left out).
pub fn list_directory(dir: &Path, max: usize) -> std::io::Result<String> {
    let mut names = Vec::new();
    for entry in std::fs::read_dir(dir)? {
        let entry = entry?;
        let mut name = entry.file_name().to_string_lossy().into_owned();
        if entry.file_type()?.is_dir() {
            name.push('/');
        }
        names.push(name);
    }
    names.sort();
    let total = names.len();
    let mut out: Vec<String> = names.into_iter().take(max).collect();
    if total > max {
        out.push(format!("[{} more entries not shown]", total - max));
    }
    Ok(out.join("\n"))
}

impl Tool for ListDir {
    fn name(&self) -> &str {
        "list_dir"
    }
    fn description(&self) -> &str {
        "List a directory of the project (default: the project root)."
    }
    fn input_schema(&self) -> Value {
        json!({"type": "object", "properties": {"path": {"type": "string"}},
               "additionalProperties": false})
    }
    fn permission_subject(&self, input: &Value, ctx: &ToolContext) -> Option<String> {
        path_subject(input, ctx)
    }
    fn run(&self, input: &Value, ctx: &ToolContext) -> Result<ToolOutput, ToolError> {
        let requested = input.get("path").and_then(Value::as_str).unwrap_or(".");
        let path = confined(ctx, requested)?;
        let listing = list_directory(&path, 1000).map_err(io_error(format!("list {requested}")))?;
        Ok(ToolOutput::new(listing, format!("List {requested}")))
    }
}

/// One command [`RunCheck`] may run: a program and its arguments, run in the
/// project root, stopped after `timeout`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CheckCommand {
    /// The program (looked up on `PATH`).
    pub program: String,
    /// Its arguments.
    pub args: Vec<String>,
    /// How long it may run.
    pub timeout: Duration,
}

impl CheckCommand {
    /// `program args…` with a 120 s timeout.
    pub fn new(
        program: impl Into<String>,
        args: impl IntoIterator<Item = impl Into<String>>,
    ) -> Self {
        CheckCommand {
            program: program.into(),
            args: args.into_iter().map(Into::into).collect(),
            timeout: Duration::from_secs(120),
        }
    }

    /// The same command with another timeout.
    pub fn with_timeout(mut self, timeout: Duration) -> Self {
        self.timeout = timeout;
        self
    }
}

/// `run_check {check}`: runs one of the configured [`CheckCommand`]s by name
/// and returns its exit status and (capped) output. A failing check is a
/// successful call: its output is what the model needs to see.
#[derive(Debug, Clone)]
pub struct RunCheck {
    checks: BTreeMap<String, CheckCommand>,
}

impl RunCheck {
    /// A tool offering these named checks.
    pub fn new(checks: BTreeMap<String, CheckCommand>) -> RunCheck {
        RunCheck { checks }
    }
}

impl Tool for RunCheck {
    fn name(&self) -> &str {
        "run_check"
    }
    fn description(&self) -> &str {
        "Run one of the project's configured checks (tests, build, lint) by name."
    }
    fn input_schema(&self) -> Value {
        let names: Vec<&String> = self.checks.keys().collect();
        json!({"type": "object", "properties": {"check": {"type": "string", "enum": names}},
               "required": ["check"], "additionalProperties": false})
    }
    fn permission_subject(&self, input: &Value, _ctx: &ToolContext) -> Option<String> {
        input
            .get("check")
            .and_then(Value::as_str)
            .map(str::to_owned)
    }
    fn run(&self, input: &Value, ctx: &ToolContext) -> Result<ToolOutput, ToolError> {
        let name = str_arg(input, "check")?;
        let check = self
            .checks
            .get(name)
            .ok_or_else(|| ToolError::InvalidInput(format!("no check named {name:?}")))?;
        let (code, stdout, stderr) = run_command(check, &ctx.project_root, ctx)?;
        let status = code.map_or_else(
            || "killed by a signal".to_owned(),
            |c| format!("exit code {c}"),
        );
        let output = format!(
            "{status}\n--- stdout ---\n{}\n--- stderr ---\n{}",
            cap_text(&stdout, MAX_OUTPUT_BYTES / 2),
            cap_text(&stderr, MAX_OUTPUT_BYTES / 2)
        );
        Ok(ToolOutput {
            output,
            title: format!("Check {name}: {status}"),
            metadata: json!({"exit_code": code}),
        })
    }
}

fn run_command(
    check: &CheckCommand,
    dir: &Path,
    ctx: &ToolContext,
) -> Result<(Option<i32>, String, String), ToolError> {
    let mut child = Command::new(&check.program)
        .args(&check.args)
        .current_dir(dir)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(io_error(format!("start {}", check.program)))?;
    // Drain both pipes on their own threads so a chatty command cannot fill a
    // pipe buffer and block forever.
    let drain = |pipe: Option<Box<dyn Read + Send>>| {
        thread::spawn(move || {
            let mut buf = Vec::new();
            if let Some(mut pipe) = pipe {
                let _ = pipe.read_to_end(&mut buf);
            }
            String::from_utf8_lossy(&buf).into_owned()
        })
    };
    let out = drain(
        child
            .stdout
            .take()
            .map(|p| Box::new(p) as Box<dyn Read + Send>),
    );
    let err = drain(
        child
            .stderr
            .take()
            .map(|p| Box::new(p) as Box<dyn Read + Send>),
    );
    let started = Instant::now();
    let stopped = loop {
        match child.try_wait() {
            Ok(Some(status)) => break Ok(status),
            Ok(None) => {}
            Err(source) => {
                break Err(ToolError::Io {
                    action: format!("wait for {}", check.program),
                    source,
                });
            }
        }
        if ctx.cancel.is_canceled() {
            break Err(ToolError::Canceled);
        }
        if started.elapsed() >= check.timeout {
            break Err(ToolError::Timeout {
                after_ms: u64::try_from(check.timeout.as_millis()).unwrap_or(u64::MAX),
            });
        }
        ctx.cancel.wait_timeout(Duration::from_millis(20));
    };
    if stopped.is_err() {
        let _ = child.kill();
        let _ = child.wait();
    }
    let stdout = out.join().unwrap_or_default();
    let stderr = err.join().unwrap_or_default();
    let status = stopped?;
    Ok((status.code(), stdout, stderr))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cancel::CancelToken;

    fn ctx(root: &Path) -> ToolContext {
        ToolContext {
            session_id: "s".into(),
            message_id: "m".into(),
            call_id: "c".into(),
            agent: "build".into(),
            cancel: CancelToken::new(),
            project_root: root.to_path_buf(),
            files: None,
        }
    }

    #[test]
    fn file_tools_round_trip_inside_the_root() {
        let dir = tempfile::tempdir().unwrap();
        let c = ctx(dir.path());
        WriteFile
            .run(&json!({"path": "src/a.txt", "content": "hello world"}), &c)
            .unwrap();
        let read = ReadFile.run(&json!({"path": "src/a.txt"}), &c).unwrap();
        assert_eq!(read.output, "hello world");
        EditFile
            .run(
                &json!({"path": "src/a.txt", "old": "world", "new": "scribe"}),
                &c,
            )
            .unwrap();
        assert_eq!(
            std::fs::read_to_string(dir.path().join("src/a.txt")).unwrap(),
            "hello scribe"
        );
        let err = EditFile
            .run(
                &json!({"path": "src/a.txt", "old": "absent", "new": "x"}),
                &c,
            )
            .unwrap_err();
        assert!(err.to_string().contains("not found"));
        assert_eq!(ListDir.run(&json!({}), &c).unwrap().output, "src/");
        let err = ReadFile
            .run(&json!({"path": "../etc/passwd"}), &c)
            .unwrap_err();
        assert!(matches!(err, ToolError::Path(_)), "{err}");
    }

    /// Fails the test, saying why, when `program` cannot be started here: these tests
    /// need a Unix `sh` and `sleep`, and a machine without them must not pass them
    /// silently.
    #[cfg(unix)]
    fn require(program: &str, args: &[&str]) {
        let started = std::process::Command::new(program)
            .args(args)
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .status();
        if let Err(err) = started {
            panic!("this test needs `{program}` on the PATH, which cannot be started: {err}");
        }
    }

    #[cfg(unix)]
    #[test]
    fn run_check_runs_only_configured_commands() {
        require("sh", &["-c", "exit 0"]);
        let dir = tempfile::tempdir().unwrap();
        let c = ctx(dir.path());
        let tool = RunCheck::new(BTreeMap::from([(
            "ok".to_owned(),
            CheckCommand::new("sh", ["-c", "echo fine; exit 3"]),
        )]));
        let out = tool.run(&json!({"check": "ok"}), &c).unwrap();
        assert!(out.output.starts_with("exit code 3"), "{}", out.output);
        assert!(out.output.contains("fine"));
        assert_eq!(
            tool.input_schema()["properties"]["check"]["enum"],
            json!(["ok"])
        );
        assert!(tool.run(&json!({"check": "other"}), &c).is_err());
    }

    /// A command that outlives its timeout is killed and reported as a
    /// timeout. The margins are wide both ways: the command would run 60 s,
    /// the timeout is 300 ms, and the whole call must end within 20 s, so a
    /// slow machine cannot make it fail and a missing kill cannot pass.
    #[cfg(unix)]
    #[test]
    fn run_check_kills_a_command_that_times_out() {
        require("sleep", &["0"]);
        let dir = tempfile::tempdir().unwrap();
        let c = ctx(dir.path());
        let tool = RunCheck::new(BTreeMap::from([(
            "slow".to_owned(),
            CheckCommand::new("sleep", ["60"]).with_timeout(Duration::from_millis(300)),
        )]));
        let started = std::time::Instant::now();
        let err = tool.run(&json!({"check": "slow"}), &c).unwrap_err();
        let took = started.elapsed();
        assert!(
            matches!(err, ToolError::Timeout { after_ms: 300 }),
            "{err:?}"
        );
        assert_eq!(err.to_string(), "timed out after 300 ms");
        assert!(took >= Duration::from_millis(300), "{took:?}");
        assert!(took < Duration::from_secs(20), "not killed: {took:?}");
    }

    #[test]
    fn path_subjects_are_normalized_relative_to_the_root() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(dir.path().join("secrets")).unwrap();
        let c = ctx(dir.path());
        for raw in ["secrets/k", "./secrets/k", "src/../secrets/k"] {
            assert_eq!(
                ReadFile
                    .permission_subject(&json!({"path": raw}), &c)
                    .as_deref(),
                Some("secrets/k"),
                "{raw}"
            );
        }
        let abs = dir.path().join("secrets/k");
        assert_eq!(
            ReadFile
                .permission_subject(&json!({"path": abs.to_string_lossy()}), &c)
                .as_deref(),
            Some("secrets/k")
        );
        assert_eq!(
            ListDir.permission_subject(&json!({}), &c).as_deref(),
            Some(".")
        );
    }

    #[test]
    fn cap_text_respects_char_boundaries() {
        let capped = cap_text("ééé", 3);
        assert!(capped.starts_with("é\n[truncated: showing the first 2 of 6 bytes]"));
    }
}
