//! Aider (Aider-AI/aider): `.aider.chat.history.md`, the Markdown log Aider appends to in
//! the folder it runs in (a git repository's root), one per project; `--chat-history-file`
//! (`AIDER_CHAT_HISTORY_FILE`) puts it elsewhere. Aider keeps no list of its projects, so
//! the default locations are that variable's file and every `.aider.chat.history.md` under
//! the home folder, looked for [`MAX_DEPTH`] levels down without entering hidden folders
//! or dependency and build trees ([`SKIPPED_DIRS`]); other folders given as paths are
//! searched the same way, and a file given is read whatever its name.
//!
//! Aider writes the log a call at a time (`aider/io.py`, `InputOutput`):
//! - `# aider chat started at 2025-06-14 13:13:19` opens each run of Aider: a session;
//! - `#### ` opens each line of what the user typed (`user_input`), a prompt or a command
//!   (`/add`, `/ask …`), each ending with two spaces (a Markdown line break);
//! - `> ` opens what Aider printed itself (`tool_output`, `tool_warning`, `tool_error`, a
//!   question with its answer): the banner, files added, edits applied, commits, the usage
//!   report. Each such write ends with two spaces, and only its first line is quoted, so a
//!   write of several lines runs to the line that ends with two spaces;
//! - the rest, after a blank line, is the model's reply (`ai_output`), written whole once
//!   it is complete.
//!
//! Mapping:
//! - each run is a session, its start the run's time; Aider writes its local time without
//!   the zone, which is read as UTC (as Hermes' logs are), so a session shows the wall
//!   clock Aider showed. No message carries a time of its own: each takes the session's
//!   start (in the file's order), and the session's last activity is its start too;
//! - a user's input is a user message, a reply an assistant message of the model the
//!   banner (or a later `/model`) named (`Main model: …` or `Model: …`; litellm's
//!   `provider/model` split into both);
//! - what Aider printed is kept, as synthetic text, on the message before it (what it did
//!   with a reply: `Applied edit to cart.py`, `Commit 3f2a1b9 …`); the banner before the
//!   first message is counted as skipped;
//! - usage: the report after each reply, `Tokens: 4.5k sent, 1.2k cache write, 3.0k cache
//!   hit, 429 received. Cost: $0.0018 message, $0.0018 session.`, is that reply's: the
//!   cost as reported; the tokens as printed, which Aider rounds (`4.5k` is 4,500), the
//!   cache's taken out of what was sent. A reply without a report has no usage recorded;
//! - the folder is the log's own, when the log has Aider's name.
//!
//! A log that grew is read again from the start of its last session (the earlier ones are
//! complete), so that session's messages, keyed by the session and their place in it, are
//! stored once however often it is read; a line still being written waits for the next
//! import. Runs `--since` leaves out keep the log unread from where it was, so an import
//! without it reads them once the log has grown.

use std::borrow::Cow;
use std::collections::HashMap;
use std::path::{Path, PathBuf};

use scribe_message::{Role, TokenUsage};
use serde_json::{Value, json};

use super::{FileReport, Importer, Unit, message, numbered, provider_and_model, text};
use crate::Source;
use crate::env::Env;
use crate::error::{ImportError, Result};
use crate::record::{Batch, MessageRec, Resume, SessionRec};
use crate::{ids, time};

const SRC: Source = Source::Aider;

/// The log's name, in each folder Aider runs in.
pub const HISTORY_FILE: &str = ".aider.chat.history.md";

/// The line that opens each run of Aider, before its local time.
const STARTED: &str = "# aider chat started at ";

/// How many levels under a folder the log is looked for.
pub const MAX_DEPTH: usize = 6;

/// Folders never entered looking for the log (besides hidden ones): dependency trees,
/// build output and the operating system's application data.
pub const SKIPPED_DIRS: [&str; 9] = [
    "node_modules",
    "target",
    "vendor",
    "venv",
    "__pycache__",
    "site-packages",
    "Library",
    "AppData",
    "snap",
];

/// The Aider importer.
#[derive(Debug, Clone, Copy)]
pub struct Aider;

impl Importer for Aider {
    fn source(&self) -> Source {
        SRC
    }

    /// `$AIDER_CHAT_HISTORY_FILE` (when absolute) and the logs found under the home
    /// folder; when there are none, where the home folder's own log would be.
    fn default_roots(&self, env: &Env) -> Vec<PathBuf> {
        let mut roots: Vec<PathBuf> = env
            .var("AIDER_CHAT_HISTORY_FILE")
            .map(|f| env.expand(f))
            .filter(|f| f.is_absolute())
            .into_iter()
            .collect();
        if let Some(home) = &env.home {
            // An unreadable home holds no log Scribe can read: reported as not found.
            let _ = find_logs(home, &mut roots);
            if roots.is_empty() {
                roots.push(home.join(HISTORY_FILE));
            }
        }
        roots
    }

    fn discover(&self, root: &Path, out: &mut Vec<PathBuf>) -> Result<()> {
        if root.is_file() {
            out.push(root.to_owned());
            return Ok(());
        }
        find_logs(root, out)
    }

    fn read(&self, unit: &Unit<'_>, out: &mut Batch, report: &mut FileReport) -> Result<Resume> {
        let path = unit.path;
        let chunk = crate::reader::read_from(path, unit.resume.offset, unit.resume.lines)?;
        let bytes = chunk.bytes();
        // Complete lines only: a write still under way is read next time.
        let complete = bytes.iter().rposition(|b| *b == b'\n').map_or(0, |i| i + 1);
        let (chats, before) = split(&bytes[..complete], unit.resume.offset, unit.resume.lines);
        if before {
            if unit.resume.offset == 0 && chats.is_empty() {
                return Err(ImportError::Malformed {
                    path: path.to_owned(),
                    what: "log of Aider's chats",
                    reason: format!("it has no `{}` line", STARTED.trim_end()),
                });
            }
            report.skip("text before the first chat");
        }
        let Some(last) = chats.last() else {
            return Ok(unit.resume.clone());
        };
        let resume = Resume {
            offset: last.offset,
            lines: last.line,
            carry: None,
            more: false,
        };
        let directory = (path.file_name().is_some_and(|n| n == HISTORY_FILE))
            .then(|| path.parent())
            .flatten()
            .map(|d| d.display().to_string());
        let carried = unit.resume.carry.as_ref();
        let mut previous: Option<(&str, u64)> = None;
        let mut created_before = unit.mtime_ms;
        let mut last_carry = Value::Null;
        // Runs `--since` left out: the log is not marked read past them.
        let mut skipped = false;
        for (i, chat) in chats.iter().enumerate() {
            // Runs started in the same second are told apart by their order.
            let n = match previous {
                Some((at, n)) if at == chat.started => n + 1,
                Some(_) => 0,
                None if unit.resume.offset > 0
                    && carried
                        .and_then(|c| c.get("started"))
                        .and_then(Value::as_str)
                        == Some(chat.started) =>
                {
                    carried
                        .and_then(|c| c.get("n"))
                        .and_then(Value::as_u64)
                        .unwrap_or(0)
                }
                None => 0,
            };
            previous = Some((chat.started, n));
            last_carry = json!({"started": chat.started, "n": n});
            let created = match time::parse(chat.started) {
                Some(at) => at,
                None => {
                    report.malformed(
                        path,
                        Some(chat.line + 1),
                        format!("`{}` is not a time", chat.started),
                    );
                    created_before
                }
            };
            created_before = created;
            let is_last = i + 1 == chats.len();
            if !is_last && unit.since.is_some_and(|since| created < since) {
                skipped = true;
                continue;
            }
            let key = format!("{}\n{}\n{n}", path.display(), chat.started);
            let id = ids::session_id(SRC, &key, created);
            let mut session = Session::default();
            for line in &chat.lines {
                session.line(line);
            }
            report.records += session.items.len() as u64;
            let Some(model) = session.finish(&id, created, out, report) else {
                continue;
            };
            let mut rec = SessionRec::new(id, created);
            rec.directory = directory.clone();
            rec.model = model;
            out.sessions.push(rec);
        }
        // A run `--since` left out stays unread: the next import of the grown log reads it.
        if skipped {
            return Ok(unit.resume.clone());
        }
        Ok(Resume {
            carry: Some(last_carry),
            ..resume
        })
    }
}

/// Adds the logs under `dir` to `out`: files named [`HISTORY_FILE`] up to [`MAX_DEPTH`]
/// levels down, in name order, neither entering hidden folders nor [`SKIPPED_DIRS`] (`dir`
/// itself is searched whatever its name) nor following links to folders.
fn find_logs(dir: &Path, out: &mut Vec<PathBuf>) -> Result<()> {
    if !dir.exists() {
        return Ok(());
    }
    let walk = walkdir::WalkDir::new(dir)
        .max_depth(MAX_DEPTH)
        .sort_by_file_name()
        .into_iter()
        .filter_entry(|e| {
            e.depth() == 0 || !e.file_type().is_dir() || {
                let name = e.file_name().to_string_lossy();
                !name.starts_with('.') && !SKIPPED_DIRS.contains(&name.as_ref())
            }
        });
    for entry in walk {
        let entry = match entry {
            Ok(e) => e,
            Err(err) if err.depth() == 0 => {
                return Err(ImportError::Io {
                    path: dir.to_owned(),
                    source: err
                        .into_io_error()
                        .unwrap_or_else(|| std::io::Error::other("cannot walk the directory")),
                });
            }
            Err(err) => {
                tracing::debug!(error = %err, "skipping an unreadable entry");
                continue;
            }
        };
        if entry.file_name() == HISTORY_FILE && entry.path().is_file() {
            out.push(entry.into_path());
        }
    }
    Ok(())
}

/// One run of Aider in the log.
#[derive(Debug)]
struct Chat<'a> {
    /// Its start, as written (local time).
    started: &'a str,
    /// Where its first line starts in the file.
    offset: u64,
    /// Lines of the file before it.
    line: u64,
    /// Its lines after the first, without their line ends.
    lines: Vec<Cow<'a, str>>,
}

/// The runs in `data` (complete lines read from `offset`, after `line` lines), and
/// whether anything but blank lines came before the first.
fn split(data: &[u8], offset: u64, line: u64) -> (Vec<Chat<'_>>, bool) {
    let mut chats: Vec<Chat<'_>> = Vec::new();
    let mut before = false;
    let (mut at, mut number) = (0usize, line);
    while at < data.len() {
        let end = data[at..]
            .iter()
            .position(|b| *b == b'\n')
            .map_or(data.len(), |i| at + i);
        let raw = &data[at..end];
        let raw = raw.strip_suffix(b"\r").unwrap_or(raw);
        match raw
            .strip_prefix(STARTED.as_bytes())
            .and_then(|t| std::str::from_utf8(t).ok())
        {
            Some(started) => chats.push(Chat {
                started: started.trim(),
                offset: offset + at as u64,
                line: number,
                lines: Vec::new(),
            }),
            None => match chats.last_mut() {
                Some(chat) => chat.lines.push(String::from_utf8_lossy(raw)),
                None => before |= !raw.iter().all(u8::is_ascii_whitespace),
            },
        }
        at = end + 1;
        number += 1;
    }
    (chats, before)
}

/// What one write of the log was.
#[derive(Debug)]
enum Item {
    /// The user's input, a line each.
    User(Vec<String>),
    /// The model's reply, a line each.
    Reply(Vec<String>),
    /// What Aider printed, a line each.
    Said(Vec<String>),
}

/// A message being built.
#[derive(Debug)]
struct Built {
    role: Role,
    text: String,
    /// What Aider printed after it.
    said: Vec<String>,
    model: Option<String>,
    usage: TokenUsage,
    /// Usage reports read for it.
    calls: i64,
    cost: Option<f64>,
}

/// One run's lines, read into writes.
#[derive(Debug, Default)]
struct Session {
    items: Vec<Item>,
    /// A write of Aider's of several lines is still running.
    open: bool,
    /// A blank line came since the last line.
    blank: bool,
}

impl Session {
    /// Takes the next line (see the module doc for how each kind is told apart).
    fn line(&mut self, line: &str) {
        let breaks = line.ends_with("  ");
        if self.open {
            self.said(line.trim_end(), false);
            self.open = !breaks;
            return;
        }
        if line.trim().is_empty() {
            self.blank = true;
            if let Some(Item::Reply(lines)) = self.items.last_mut() {
                lines.push(String::new());
            }
            return;
        }
        let in_reply = matches!(self.items.last(), Some(Item::Reply(_)));
        let user = line
            .strip_prefix("####")
            .filter(|rest| breaks && (rest.is_empty() || rest.starts_with(' ')));
        let said = line.strip_prefix("> ").or((line == ">").then_some(""));
        if let Some(rest) = user {
            let text = rest.strip_prefix(' ').unwrap_or(rest).trim_end().to_owned();
            match self.items.last_mut() {
                Some(Item::User(lines)) if !self.blank => lines.push(text),
                _ => self.items.push(Item::User(vec![text])),
            }
        } else if let Some(rest) = said
            // A quote inside a reply is the reply's, unless it is Aider's usage report.
            .filter(|rest| !in_reply || breaks || rest.starts_with("Tokens:"))
        {
            self.said(rest.trim_end(), true);
            self.open = !breaks;
        } else {
            match self.items.last_mut() {
                Some(Item::Reply(lines)) => lines.push(line.to_owned()),
                _ => self.items.push(Item::Reply(vec![line.to_owned()])),
            }
        }
        self.blank = false;
    }

    /// A line Aider printed; `new` when it starts a write.
    fn said(&mut self, line: &str, new: bool) {
        match self.items.last_mut() {
            Some(Item::Said(lines)) if !new || !self.blank => lines.push(line.to_owned()),
            _ => self.items.push(Item::Said(vec![line.to_owned()])),
        }
    }

    /// The run's messages into `out`, as session `sid` started `at`; the model most replies
    /// came from. `None` when the run holds no message (Aider started and quit).
    fn finish(
        self,
        sid: &str,
        at: i64,
        out: &mut Batch,
        report: &mut FileReport,
    ) -> Option<Option<String>> {
        let mut built: Vec<Built> = Vec::new();
        let mut model: Option<String> = None;
        let mut banner = false;
        for item in self.items {
            match item {
                Item::User(lines) => {
                    let said = lines.join("\n");
                    if said.trim().is_empty() || said.trim() == "<blank>" {
                        report.skip("input:blank");
                        continue;
                    }
                    // `/ask why?` is logged, then the `why?` Aider sends: said once.
                    if built.last().is_some_and(|b| {
                        b.role == Role::User
                            && b.said.is_empty()
                            && b.text.starts_with('/')
                            && b.text.split_once(' ').is_some_and(|(_, arg)| arg == said)
                    }) {
                        report.skip("input:repeated");
                        continue;
                    }
                    built.push(Built::new(Role::User, said, None));
                }
                Item::Reply(mut lines) => {
                    while lines.last().is_some_and(|l| l.trim().is_empty()) {
                        lines.pop();
                    }
                    let said = lines.join("\n");
                    if said.trim().is_empty() {
                        continue;
                    }
                    built.push(Built::new(Role::Assistant, said, model.clone()));
                }
                Item::Said(lines) => {
                    let mut lines = lines.into_iter().peekable();
                    while let Some(line) = lines.next() {
                        if let Some(name) = model_named(&line) {
                            model = Some(name.to_owned());
                        }
                        if let Some(tokens) = line.strip_prefix("Tokens:") {
                            let cost = if tokens.contains("Cost:") {
                                None
                            } else {
                                lines.next_if(|l| l.starts_with("Cost:"))
                            };
                            let (usage, reported) = usage_of(tokens, cost.as_deref());
                            match built.last_mut() {
                                Some(reply) if reply.role == Role::Assistant => {
                                    reply.usage += usage;
                                    reply.calls += 1;
                                    if let Some(c) = reported {
                                        *reply.cost.get_or_insert(0.0) += c;
                                    }
                                }
                                _ => report.skip("usage:without-reply"),
                            }
                            continue;
                        }
                        if line.trim().is_empty() {
                            continue;
                        }
                        match built.last_mut() {
                            Some(m) => m.said.push(line),
                            None => banner = true,
                        }
                    }
                }
            }
        }
        if banner {
            report.skip("banner");
        }
        if built.is_empty() {
            report.skip("chat:empty");
            return None;
        }
        let mut models: HashMap<&str, usize> = HashMap::new();
        for b in &built {
            if let Some(m) = &b.model {
                *models.entry(m.as_str()).or_default() += 1;
            }
        }
        let most = models
            .into_iter()
            .max_by(|a, b| a.1.cmp(&b.1).then_with(|| b.0.cmp(a.0)))
            .map(|(m, _)| provider_and_model(m).1.to_owned());
        for (i, b) in built.into_iter().enumerate() {
            let key = format!("{sid}:{i}");
            let mut msg = message(SRC, &key, b.role, at);
            if let Some(name) = &b.model {
                let (provider, model) = provider_and_model(name);
                msg.provider = provider.map(str::to_owned);
                msg.model = Some(model.to_owned());
            }
            msg.usage = b.usage;
            let mut parts = vec![text(b.text, false)];
            if !b.said.is_empty() {
                parts.push(text(b.said.join("\n"), true));
            }
            msg.parts = numbered(SRC, &key, parts, at);
            let mut rec = MessageRec::new(sid.to_owned(), msg);
            // A reply is a model call, its report or not (yet) (more, if Aider sent again).
            if b.role == Role::Assistant {
                rec.api_calls = b.calls.max(1);
            }
            rec.reported_cost = b.cost;
            out.messages.push(rec);
        }
        Some(most)
    }
}

impl Built {
    fn new(role: Role, text: String, model: Option<String>) -> Built {
        Built {
            role,
            text,
            said: Vec::new(),
            model,
            usage: TokenUsage::default(),
            calls: 0,
            cost: None,
        }
    }
}

/// The model a banner line names: `Main model: gpt-4o with diff edit format, …` (or
/// `Model: …`, Aider's older banner and a single model's).
fn model_named(line: &str) -> Option<&str> {
    let rest = line
        .strip_prefix("Main model: ")
        .or_else(|| line.strip_prefix("Model: "))?;
    let name = rest.split(" with ").next().unwrap_or(rest).trim();
    (!name.is_empty() && !name.contains(char::is_whitespace)).then_some(name)
}

/// A usage report (`tokens`: what follows `Tokens:`, the cost on the same line or in
/// `cost`) as Scribe's disjoint buckets, and the reply's cost. Aider counts the cache's
/// tokens inside what it sent (`sent` is the prompt, plus the cache write where the
/// provider reports one), so they are taken out of the input.
fn usage_of(tokens: &str, cost: Option<&str>) -> (TokenUsage, Option<f64>) {
    let (tokens, same_line) = match tokens.split_once("Cost:") {
        Some((t, c)) => (t, Some(c)),
        None => (tokens, None),
    };
    let (mut sent, mut write, mut hit, mut received) = (0, 0, 0, 0);
    for piece in tokens.split([',', ';', '(', ')']) {
        let piece = piece.trim().trim_end_matches('.');
        let Some((count, label)) = piece.split_once(' ') else {
            continue;
        };
        let Some(count) = count_of(count) else {
            continue;
        };
        match label.trim() {
            "sent" => sent = count,
            "cache write" => write = count,
            "cache hit" | "cache read" => hit = count,
            "received" => received = count,
            _ => {}
        }
    }
    let usage = TokenUsage {
        input: sent.saturating_sub(write).saturating_sub(hit).max(0),
        output: received,
        cache_read: hit,
        cache_write: write,
        reasoning: 0,
    };
    let cost = same_line
        .or_else(|| cost.and_then(|c| c.strip_prefix("Cost:")))
        .and_then(|c| {
            let amount = c.trim_start().strip_prefix('$')?;
            let end = amount
                .find(|ch: char| !ch.is_ascii_digit() && ch != '.')
                .unwrap_or(amount.len());
            amount[..end].parse::<f64>().ok()
        })
        .filter(|c| c.is_finite() && *c >= 0.0);
    (usage, cost)
}

/// A count as Aider prints it: `429`, `4.5k`, `12k`, `1.2M`.
fn count_of(text: &str) -> Option<i64> {
    let (digits, scale) = match text.strip_suffix(['k', 'K']) {
        Some(d) => (d, 1_000.0),
        None => match text.strip_suffix('M') {
            Some(d) => (d, 1_000_000.0),
            None => (text, 1.0),
        },
    };
    let value = digits.parse::<f64>().ok()? * scale;
    (0.0..1e15).contains(&value).then(|| value.round() as i64)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_usage_report_is_read_into_disjoint_buckets() {
        let (u, cost) = usage_of(
            " 12k sent, 1.5k cache write, 9.0k cache hit, 300 received.",
            Some("Cost: $0.05 message, $0.20 session."),
        );
        assert_eq!(
            (u.input, u.cache_write, u.cache_read, u.output),
            (1_500, 1_500, 9_000, 300)
        );
        assert_eq!(cost, Some(0.05));
        let (u, cost) = usage_of(
            " 4.5k sent, 429 received. Cost: $0.0018 message, $0.0018 session.",
            None,
        );
        assert_eq!((u.input, u.output, u.total()), (4_500, 429, 4_929));
        assert_eq!(cost, Some(0.0018));
        // No price known to Aider: tokens alone.
        let (u, cost) = usage_of(" 2.3k sent, 150 received.", None);
        assert_eq!((u.input, u.output, cost), (2_300, 150, None));
        assert_eq!(usage_of(" lots sent", None).0, TokenUsage::default());
    }

    #[test]
    fn counts_and_models_as_aider_prints_them() {
        assert_eq!(count_of("429"), Some(429));
        assert_eq!(count_of("4.5k"), Some(4_500));
        assert_eq!(count_of("1.2M"), Some(1_200_000));
        assert_eq!(count_of("-3"), None);
        assert_eq!(count_of("k"), None);
        assert_eq!(
            model_named("Main model: anthropic/claude-sonnet-4-20250514 with diff edit format"),
            Some("anthropic/claude-sonnet-4-20250514")
        );
        assert_eq!(
            model_named("Model: gpt-4o with whole edit format"),
            Some("gpt-4o")
        );
        assert_eq!(model_named("Weak model: gpt-4o-mini"), None);
        assert_eq!(model_named("Model: "), None);
    }
}
