//! Factory Droid: one JSON Lines file per session, `~/.factory/sessions/<encoded
//! folder>/<id>.jsonl`, with the session's settings beside it in `<id>.settings.json`
//! (`DROID_SESSIONS_DIR`, a comma-separated list of folders, replaces the default, as
//! ccusage reads it).
//!
//! The transcript opens with a `session_start` line (`id`, `title` or `sessionTitle`,
//! `cwd`), then `message` lines (`id`, `timestamp`, and an Anthropic-style `message`:
//! `role` and content blocks); other lines (`todo_state`, …) carry nothing to keep and are
//! counted as skipped. A changed file, or changed settings, is read again whole; messages
//! are keyed by the session and the line's `id`, so nothing is stored twice.
//!
//! Mapping:
//! - user messages: `text` (the `<system-reminder>` blocks Droid puts before what the user
//!   typed are kept apart, as synthetic text) and `image` blocks; their `tool_result`
//!   blocks (`tool_use_id`, `content`, `is_error`) settle the call of the reply before;
//! - assistant messages: `text`, `thinking` as reasoning, `tool_use` as a tool part;
//! - usage: Droid keeps it per session only, in the settings' `tokenUsage` (`inputTokens`
//!   without the cache, `cacheCreationTokens`, `cacheReadTokens`, `outputTokens`,
//!   `thinkingTokens` apart from the output; a bare `totalTokens` counted as output, as
//!   ccusage does), so the session's totals are set to it, as Goose's and Hermes' are;
//!   calls are the replies. Its model is the settings' `model` as Droid names it for a
//!   custom model (`custom:Claude-Sonnet-4.5-[Anthropic]`) without the prefix and the
//!   bracketed provider, lowercased; the cost is estimated from the pricing catalog.

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use scribe_message::{Part, Role, TokenUsage, ToolState};
use serde_json::Value;

use super::{
    FileReport, Importer, Unit, content_text, int_of, media, message, numbered, reasoning,
    resume_whole, settle_call, str_of, text, tool, walk,
};
use crate::Source;
use crate::env::Env;
use crate::error::Result;
use crate::record::{Batch, MessageRec, Resume, SessionRec, SessionUsage, TitleRank};
use crate::time;

const SRC: Source = Source::Droid;

/// The Factory Droid importer.
#[derive(Debug, Clone, Copy)]
pub struct Droid;

/// The settings file beside the transcript `path` (`<id>.jsonl` → `<id>.settings.json`).
fn settings_path(path: &Path) -> PathBuf {
    let stem = path
        .file_stem()
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_default();
    path.with_file_name(format!("{stem}.settings.json"))
}

impl Importer for Droid {
    fn source(&self) -> Source {
        SRC
    }

    fn reads_state(&self) -> bool {
        false
    }

    fn default_roots(&self, env: &Env) -> Vec<PathBuf> {
        env.paths("DROID_SESSIONS_DIR")
            .or_else(|| env.home_join(".factory/sessions").map(|p| vec![p]))
            .unwrap_or_default()
    }

    fn discover(&self, root: &Path, out: &mut Vec<PathBuf>) -> Result<()> {
        walk(root, out, |p| p.extension().is_some_and(|e| e == "jsonl"))
    }

    fn companions(&self, path: &Path) -> Vec<PathBuf> {
        vec![settings_path(path)]
    }

    fn read(&self, unit: &Unit<'_>, out: &mut Batch, report: &mut FileReport) -> Result<Resume> {
        let path = unit.path;
        let chunk = crate::reader::read_from(path, 0, 0)?;
        let stem = path
            .file_stem()
            .map(|s| s.to_string_lossy().into_owned())
            .unwrap_or_default();
        let mut session = Session::new(stem, unit.mtime_ms);
        for line in chunk.lines() {
            match serde_json::from_str::<Value>(line.text) {
                Ok(entry) => session.entry(&entry, report),
                Err(err) => report.malformed(path, Some(line.number), err.to_string()),
            }
        }
        // Settings that cannot be read (not there yet, cut short while Droid writes them)
        // leave the session without usage until they can.
        let settings: Value = std::fs::read(settings_path(path))
            .ok()
            .and_then(|bytes| serde_json::from_slice(&bytes).ok())
            .unwrap_or(Value::Null);
        if session.started && unit.since.is_none_or(|since| session.last_at >= since) {
            session.finish(&settings, out);
        } else if !session.started {
            report.skip("(not a Droid session)");
        }
        Ok(resume_whole(&chunk))
    }
}

/// One session file being read.
struct Session {
    id: String,
    /// Whether a `session_start` line or a message was seen: a Droid session.
    started: bool,
    created: Option<i64>,
    last_at: i64,
    directory: Option<String>,
    title: Option<String>,
    messages: Vec<MessageRec>,
    replies: i64,
    /// A call's id → (index in `messages`, part index).
    calls: HashMap<String, (usize, usize)>,
}

impl Session {
    fn new(id: String, mtime_ms: i64) -> Session {
        Session {
            id,
            started: false,
            created: None,
            last_at: mtime_ms,
            directory: None,
            title: None,
            messages: Vec::new(),
            replies: 0,
            calls: HashMap::new(),
        }
    }

    fn entry(&mut self, entry: &Value, report: &mut FileReport) {
        match str_of(entry, "type").unwrap_or("") {
            "session_start" => {
                if let Some(id) = str_of(entry, "id").filter(|id| !id.is_empty()) {
                    id.clone_into(&mut self.id);
                }
                self.title = str_of(entry, "sessionTitle")
                    .or_else(|| str_of(entry, "title"))
                    .map(str::trim)
                    .filter(|t| !t.is_empty())
                    .map(str::to_owned);
                self.directory = str_of(entry, "cwd")
                    .filter(|d| !d.is_empty())
                    .map(str::to_owned);
                self.started = true;
                report.records += 1;
            }
            "message" => {
                self.started = true;
                self.message(entry, report);
            }
            "" => report.skip("untyped"),
            other => report.skip(other),
        }
    }

    fn message(&mut self, entry: &Value, report: &mut FileReport) {
        let at = str_of(entry, "timestamp")
            .and_then(time::parse)
            .unwrap_or(self.last_at);
        if self.created.is_none() {
            self.created = Some(at);
        }
        self.last_at = self.last_at.max(at);
        let key = match str_of(entry, "id").filter(|id| !id.is_empty()) {
            Some(id) => format!("{}:{id}", self.id),
            None => format!("{}:#{}", self.id, self.messages.len()),
        };
        let inner = entry.get("message").unwrap_or(&Value::Null);
        let blocks: Vec<Value> = match inner.get("content") {
            Some(Value::Array(blocks)) => blocks.clone(),
            Some(Value::String(s)) => vec![serde_json::json!({ "type": "text", "text": s })],
            _ => Vec::new(),
        };
        let role = str_of(inner, "role").unwrap_or("");
        let mut parts = Vec::new();
        let mut calls = Vec::new();
        let mut results = 0;
        for block in &blocks {
            match (role, str_of(block, "type").unwrap_or("")) {
                (_, "text") => {
                    let said = str_of(block, "text").unwrap_or("");
                    if role == "user" {
                        parts.extend(user_text(said));
                    } else if !said.is_empty() {
                        parts.push(text(said, false));
                    }
                }
                (_, "image") => parts.push(media(block)),
                ("assistant", "thinking") => {
                    let signature = str_of(block, "signature")
                        .filter(|s| !s.is_empty())
                        .map(str::to_owned);
                    let thought = str_of(block, "thinking").unwrap_or("");
                    if !thought.is_empty() || signature.is_some() {
                        parts.push(reasoning(thought, signature, None));
                    }
                }
                ("assistant", "redacted_thinking") => {
                    parts.push(reasoning("", None, Some(block.clone())));
                }
                ("assistant", "tool_use") => {
                    let id = str_of(block, "id").unwrap_or("");
                    let input = match block.get("input") {
                        None | Some(Value::Null) => Value::Object(serde_json::Map::new()),
                        Some(input) => input.clone(),
                    };
                    calls.push((id.to_owned(), parts.len()));
                    let name = str_of(block, "name").unwrap_or("");
                    parts.push(tool(id, name, input, ToolState::Running { started_at: at }));
                }
                ("user", "tool_result") => {
                    results += 1;
                    self.result(block, at, report);
                }
                (_, other) => report.skip(format!("content:{other}")),
            }
        }
        let role = match role {
            "user" => Role::User,
            "assistant" => Role::Assistant,
            "" => {
                report.skip("message:untyped");
                return;
            }
            other => {
                report.skip(format!("message:{other}"));
                return;
            }
        };
        if parts.is_empty() {
            if results == 0 {
                report.skip(format!("message:{}:empty", role.as_str()));
            }
            return;
        }
        let mut m = message(SRC, &key, role, at);
        m.parts = numbered(SRC, &key, parts, at);
        m.model = str_of(inner, "model")
            .filter(|s| !s.is_empty())
            .map(str::to_owned);
        let i = self.messages.len();
        self.messages.push(MessageRec::new(self.id.clone(), m));
        if role == Role::Assistant {
            self.replies += 1;
        }
        for (id, part) in calls {
            self.calls.insert(id, (i, part));
        }
        report.records += 1;
    }

    /// A `tool_result` block: settles its call.
    fn result(&mut self, block: &Value, at: i64, report: &mut FileReport) {
        let id = str_of(block, "tool_use_id").unwrap_or("");
        let Some(&place) = self.calls.get(id) else {
            report.skip("tool_result:without-call");
            return;
        };
        report.records += 1;
        let failed = block.get("is_error").and_then(Value::as_bool) == Some(true);
        let said = content_text(block.get("content").unwrap_or(&Value::Null));
        settle_call(&mut self.messages, place, said, failed, at);
    }

    /// The session, with the usage its settings keep, and its messages into `out`.
    fn finish(self, settings: &Value, out: &mut Batch) {
        let created = self.created.unwrap_or(self.last_at);
        let mut rec = SessionRec::new(&self.id, created);
        rec.updated_at = self.last_at.max(created);
        rec.directory = self.directory;
        rec.title = self.title.map(|t| (t, TitleRank::Source));
        rec.model = str_of(settings, "model")
            .map(model_name)
            .filter(|m| !m.is_empty())
            .or_else(|| {
                self.messages
                    .iter()
                    .rev()
                    .find_map(|m| m.message.model.clone())
            });
        if let Some(u) = settings.get("tokenUsage").filter(|u| u.is_object()) {
            let mut tokens = TokenUsage {
                input: int_of(u, "inputTokens"),
                output: int_of(u, "outputTokens"),
                reasoning: int_of(u, "thinkingTokens"),
                cache_read: int_of(u, "cacheReadTokens"),
                cache_write: int_of(u, "cacheCreationTokens"),
            };
            if tokens.is_zero() {
                tokens.output = int_of(u, "totalTokens");
            }
            if !tokens.is_zero() {
                rec.usage_total = Some(SessionUsage {
                    tokens,
                    api_calls: self.replies,
                    reported_cost: None,
                    model: rec.model.clone(),
                    cost_usd: 0.0,
                    cost_flags: 0,
                });
            }
        }
        // The replies were made by the session's model, as far as Droid says.
        let mut messages = self.messages;
        for m in &mut messages {
            if m.message.role == Role::Assistant && m.message.model.is_none() {
                m.message.model.clone_from(&rec.model);
            }
        }
        out.sessions.push(rec);
        out.messages.extend(messages);
    }
}

/// What a user typed, with the `<system-reminder>` blocks Droid puts before it kept apart
/// as synthetic text.
fn user_text(said: &str) -> Vec<Part> {
    const OPEN: &str = "<system-reminder>";
    const CLOSE: &str = "</system-reminder>";
    let mut parts = Vec::new();
    let mut rest = said;
    while let Some(after) = rest.trim_start().strip_prefix(OPEN)
        && let Some((reminder, tail)) = after.split_once(CLOSE)
    {
        parts.push(text(reminder.trim(), true));
        rest = tail;
    }
    let typed = if parts.is_empty() { said } else { rest.trim() };
    if !typed.is_empty() {
        parts.push(text(typed, false));
    }
    parts
}

/// A model as Droid's settings name it, as the catalog would: `custom:` and a bracketed
/// provider (`Claude-Sonnet-4.5-[Anthropic]`) taken off, lowercased, spaces as dashes.
fn model_name(raw: &str) -> String {
    let raw = raw.trim();
    let raw = raw.strip_prefix("custom:").unwrap_or(raw);
    let mut name = String::with_capacity(raw.len());
    let mut depth = 0_u32;
    for c in raw.chars() {
        match c {
            '[' => depth += 1,
            ']' => depth = depth.saturating_sub(1),
            _ if depth == 0 => name.push(c),
            _ => {}
        }
    }
    let mut out = String::with_capacity(name.len());
    for c in name.trim().to_lowercase().chars() {
        let c = if c.is_whitespace() { '-' } else { c };
        if !(c == '-' && out.ends_with('-')) {
            out.push(c);
        }
    }
    out.trim_matches('-').to_owned()
}

#[cfg(test)]
mod tests {
    use super::model_name;

    #[test]
    fn custom_model_names_lose_their_prefix_and_provider() {
        assert_eq!(
            model_name("custom:Claude-Sonnet-4.5-[Anthropic]"),
            "claude-sonnet-4.5"
        );
        assert_eq!(
            model_name("Claude Opus 4.5 [Anthropic]-0"),
            "claude-opus-4.5-0"
        );
        assert_eq!(model_name("gpt-5.1-codex"), "gpt-5.1-codex");
        assert_eq!(model_name("  "), "");
    }
}
