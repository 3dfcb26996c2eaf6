//! Mistral Vibe (mistralai/mistral-vibe, the `vibe` CLI): a folder per session in
//! `~/.vibe/logs/session` (`VIBE_HOME` moves `~/.vibe`; without `~/.vibe`, newer builds use
//! `${XDG_CONFIG_HOME:-~/.config}/vibe`), named `session_<start>_<first 8 of its id>`, holding
//! `messages.jsonl`, the conversation appended a turn at a time, and `meta.json`, rewritten
//! with each save (`vibe/core/session/session_logger.py`); builds before 2.0 wrote the two
//! as one file, `session_<start>_<id>.json` with `metadata` and `messages`. The save folder,
//! `~/.vibe`, a session's folder or either kind of file may be given.
//!
//! Mapping (`vibe/core/types.py`: `LLMMessage`, `SessionMetadata`, `AgentStats`):
//! - a message per line, known by its `message_id`: the user's `content` (an `injected`
//!   one, which Vibe wrote, synthetic), the reply's `reasoning_content` (signed by
//!   `reasoning_signature`), text and `tool_calls` (a function's `name`, its `arguments`
//!   as JSON text), settled by the `tool` message that answers each (`tool_call_id`): a
//!   `<tool_error>` or `<user_cancellation>` fails it with the text inside, anything else
//!   is its output;
//! - no message keeps a time: each takes the session's `start_time` (in the file's
//!   order), its `end_time` the session's last activity; both are local times without a
//!   zone, read as UTC (as Hermes' are);
//! - the title is the session's (`title_source` `manual`: the user's), the folder its
//!   `environment.working_directory`, the model the active one's name (`config`'s, or
//!   `agent_config`'s before 2.0: `active_model` is an alias of one of its `models`);
//! - a session with a `parent_session_id` was forked from it, or continues it after
//!   `/compact`: both copy the parent's messages, which stay the parent's (told by their
//!   `message_id`s, read from the parent's file beside it); a continuation is known by the
//!   summary it opens with (an injected user message before any reply), which is its
//!   summary;
//! - usage is the session's (`stats`): `session_prompt_tokens` as input, and
//!   `session_completion_tokens` as output, with the replies as calls; the cost is Vibe's
//!   own (`session_cost`, the prices configured for the model times those tokens, which
//!   Vibe says may overstate it since it ignores the cache), reported; a session Vibe had
//!   no prices for is priced from the model, if Scribe knows it. A continuation's stats run
//!   on from its parent's, so its own are the difference.
//!
//! A changed session is read again whole (its meta file is a companion); messages keyed by
//! their ids are stored once however often it is read.

use std::collections::{HashMap, HashSet};
use std::path::{Path, PathBuf};

use scribe_message::{Part, Role, TokenUsage, ToolState};
use scribe_session::SessionKind;
use serde_json::Value;

use super::{
    FileReport, Importer, Unit, array_of, content_text, existing_or_first, f64_of, int_of, message,
    numbered, only_tags, reasoning, settle_call, str_of, text, tool,
};
use crate::Source;
use crate::env::Env;
use crate::error::{ImportError, Result};
use crate::record::{Batch, MessageRec, Resume, SessionRec, SessionUsage, TitleRank};
use crate::time;

const SRC: Source = Source::Vibe;

/// A session folder's conversation.
const MESSAGES: &str = "messages.jsonl";
/// A session folder's metadata.
const META: &str = "meta.json";

/// The title Vibe gives a session without a user message.
const UNTITLED: &str = "Untitled session";

/// The Mistral Vibe importer.
#[derive(Debug, Clone, Copy)]
pub struct Vibe;

impl Importer for Vibe {
    fn source(&self) -> Source {
        SRC
    }

    /// `$VIBE_HOME/logs/session`; else `~/.vibe/logs/session`, or
    /// `${XDG_CONFIG_HOME:-~/.config}/vibe/logs/session` where only that exists.
    fn default_roots(&self, env: &Env) -> Vec<PathBuf> {
        if let Some(home) = env.var("VIBE_HOME") {
            return vec![env.expand(home).join("logs/session")];
        }
        let xdg = match env.var("XDG_CONFIG_HOME") {
            Some(dir) => Some(env.expand(dir)),
            None => env.home_join(".config"),
        };
        existing_or_first(
            env.home_join(".vibe/logs/session")
                .into_iter()
                .chain(xdg.map(|c| c.join("vibe/logs/session")))
                .collect(),
        )
    }

    fn discover(&self, root: &Path, out: &mut Vec<PathBuf>) -> Result<()> {
        let saved = root.join("logs/session");
        let root = if saved.is_dir() { &saved } else { root };
        let given = root.is_file();
        super::walk(root, out, |p| {
            let Some(name) = p.file_name().and_then(|n| n.to_str()) else {
                return false;
            };
            // A pre-2.0 session file, unless it is a folder's meta file.
            name == MESSAGES
                || (name.ends_with(".json")
                    && name != META
                    && (given || !p.with_file_name(MESSAGES).is_file()))
        })
    }

    fn companions(&self, path: &Path) -> Vec<PathBuf> {
        if path.file_name().is_some_and(|n| n == MESSAGES) {
            vec![path.with_file_name(META)]
        } else {
            Vec::new()
        }
    }

    fn read(&self, unit: &Unit<'_>, out: &mut Batch, report: &mut FileReport) -> Result<Resume> {
        let path = unit.path;
        let chunk = crate::reader::read_from(path, 0, 0)?;
        let (meta, messages, save_dir) = if path.file_name().is_some_and(|n| n == MESSAGES) {
            let mut messages = Vec::new();
            for line in chunk.lines() {
                match serde_json::from_str::<Value>(line.text) {
                    Ok(m) if m.is_object() => messages.push(m),
                    Ok(_) => report.malformed(path, Some(line.number), "not a message object"),
                    Err(e) => report.malformed(path, Some(line.number), e.to_string()),
                }
            }
            let folder = path.parent().unwrap_or(Path::new(""));
            // Vibe writes the messages first, then the meta file: a session caught between
            // the two is read once its meta file (a companion) is there.
            let Some(meta) = std::fs::read(folder.join(META))
                .ok()
                .and_then(|b| serde_json::from_slice::<Value>(&b).ok())
                .filter(Value::is_object)
            else {
                report.skip("session:meta-not-written");
                return Ok(Resume::default());
            };
            (meta, messages, folder.parent().unwrap_or(Path::new("")))
        } else {
            let doc: Value =
                serde_json::from_slice(chunk.bytes()).map_err(|e| malformed(path, e))?;
            let (Some(meta), Some(messages)) = (
                doc.get("metadata").filter(|m| m.is_object()),
                doc.get("messages").and_then(Value::as_array),
            ) else {
                return Err(malformed(path, "it has no metadata and messages"));
            };
            let messages = messages.iter().filter(|m| m.is_object()).cloned().collect();
            (
                meta.clone(),
                messages,
                path.parent().unwrap_or(Path::new("")),
            )
        };
        let resume = super::resume_whole(&chunk);
        let id = str_of(&meta, "session_id")
            .filter(|s| !s.is_empty())
            .map(str::to_owned)
            .or_else(|| id_from_name(path))
            .ok_or_else(|| malformed(path, "it names no session"))?;
        report.records += messages.len() as u64;
        let start = str_of(&meta, "start_time").and_then(time::parse);
        let created = start.unwrap_or(unit.mtime_ms);
        let updated = str_of(&meta, "end_time")
            .and_then(time::parse)
            .unwrap_or(unit.mtime_ms)
            .max(created);
        if unit.since.is_some_and(|since| updated < since) {
            return Ok(resume);
        }
        let parent = str_of(&meta, "parent_session_id")
            .filter(|p| !p.is_empty() && *p != id)
            .map(|p| (p.to_owned(), parent_of(save_dir, p)));
        let model = active_model(&meta);
        let mut session = Session {
            sid: &id,
            at: created,
            model: model.clone(),
            inherited: parent
                .as_ref()
                .and_then(|(_, p)| p.as_ref())
                .map(|p| &p.messages),
            replayed_calls: HashSet::new(),
            calls: HashMap::new(),
            replies: 0,
            summary: false,
        };
        session.messages(&messages, out, report);

        let mut rec = SessionRec::new(id.clone(), created);
        rec.updated_at = updated;
        rec.model = model.clone();
        rec.directory = meta
            .pointer("/environment/working_directory")
            .and_then(Value::as_str)
            .filter(|d| !d.is_empty())
            .map(str::to_owned);
        rec.title = str_of(&meta, "title")
            .map(str::trim)
            .filter(|t| !t.is_empty() && *t != UNTITLED)
            .map(|t| {
                let rank = if str_of(&meta, "title_source") == Some("manual") {
                    TitleRank::User
                } else {
                    TitleRank::Source
                };
                (t.to_owned(), rank)
            });
        if let Some((parent_id, found)) = &parent {
            rec.parent = Some(parent_id.clone());
            rec.kind = if session.summary {
                SessionKind::Continuation
            } else {
                SessionKind::Fork
            };
            // A continuation's stats run on from its parent's.
            let before = found
                .as_ref()
                .filter(|_| session.summary)
                .map(|p| stats_of(&p.meta));
            let (mut tokens, mut cost) = stats_of(&meta);
            if let Some((t, c)) = before {
                tokens.input = tokens.input.saturating_sub(t.input).max(0);
                tokens.output = tokens.output.saturating_sub(t.output).max(0);
                cost = match (cost, c) {
                    (Some(now), Some(then)) => Some((now - then).max(0.0)),
                    (now, _) => now,
                };
            }
            rec.usage_total = usage(tokens, cost, session.replies, &model);
        } else {
            let (tokens, cost) = stats_of(&meta);
            rec.usage_total = usage(tokens, cost, session.replies, &model);
        }
        out.sessions.push(rec);
        Ok(resume)
    }
}

fn malformed(path: &Path, reason: impl ToString) -> ImportError {
    ImportError::Malformed {
        path: path.to_owned(),
        what: "Mistral Vibe session",
        reason: reason.to_string(),
    }
}

/// The session id a pre-2.0 file's name ends with (`session_20251101_090000_<id>.json`).
fn id_from_name(path: &Path) -> Option<String> {
    let stem = path.file_stem()?.to_str()?;
    let id = stem.rsplit('_').next()?;
    (!id.is_empty() && id != stem).then(|| id.to_owned())
}

/// What a session's `stats` say it used: its tokens, and Vibe's cost for them (its own
/// `session_cost`, else the configured prices times the tokens; `None` without prices).
fn stats_of(meta: &Value) -> (TokenUsage, Option<f64>) {
    let stats = meta.get("stats").unwrap_or(&Value::Null);
    let tokens = TokenUsage {
        input: int_of(stats, "session_prompt_tokens"),
        output: int_of(stats, "session_completion_tokens"),
        ..TokenUsage::default()
    };
    let priced = |key: &str| f64_of(stats, key).filter(|p| p.is_finite() && *p > 0.0);
    let cost = f64_of(stats, "session_cost")
        .filter(|c| c.is_finite() && *c > 0.0)
        .or_else(|| {
            let (i, o) = (
                priced("input_price_per_million"),
                priced("output_price_per_million"),
            );
            (i.is_some() || o.is_some()).then(|| {
                (tokens.input as f64 * i.unwrap_or(0.0) + tokens.output as f64 * o.unwrap_or(0.0))
                    / 1_000_000.0
            })
        });
    (tokens, cost)
}

/// The session's usage, when it used any.
fn usage(
    tokens: TokenUsage,
    cost: Option<f64>,
    replies: i64,
    model: &Option<String>,
) -> Option<SessionUsage> {
    (tokens.total() > 0).then(|| SessionUsage {
        tokens,
        api_calls: replies,
        reported_cost: cost,
        model: model.clone(),
        cost_usd: 0.0,
        cost_flags: 0,
    })
}

/// The model in use: the name of the `models` entry whose alias is `active_model` (the
/// alias itself when none is), from `config` or, before 2.0, `agent_config`.
fn active_model(meta: &Value) -> Option<String> {
    let config = ["config", "agent_config"]
        .iter()
        .filter_map(|k| meta.get(*k))
        .find(|c| str_of(c, "active_model").is_some())?;
    let alias = str_of(config, "active_model")?;
    let name = array_of(config, "models")
        .iter()
        .find(|m| str_of(m, "alias") == Some(alias))
        .and_then(|m| str_of(m, "name"))
        .unwrap_or(alias);
    (!name.is_empty()).then(|| name.to_owned())
}

/// A parent session, as its file beside the child's shows it.
#[derive(Debug)]
struct Parent {
    /// The ids of its messages (the child's copies of them stay the parent's).
    messages: HashSet<String>,
    meta: Value,
}

/// Session `id` among the sessions in `save_dir`: the folder (or pre-2.0 file) named after
/// the first 8 characters of its id that holds it.
fn parent_of(save_dir: &Path, id: &str) -> Option<Parent> {
    let short: String = id.chars().take(8).collect();
    let entries = std::fs::read_dir(save_dir).ok()?;
    for entry in entries.flatten() {
        let path = entry.path();
        let Some(name) = path.file_name().and_then(|n| n.to_str()) else {
            continue;
        };
        let (meta, lines): (Value, Vec<Value>) =
            if name.ends_with(&format!("_{short}")) && path.is_dir() {
                let Some(meta) = std::fs::read(path.join(META))
                    .ok()
                    .and_then(|b| serde_json::from_slice(&b).ok())
                else {
                    continue;
                };
                let lines = std::fs::read_to_string(path.join(MESSAGES))
                    .unwrap_or_default()
                    .lines()
                    .filter_map(|l| serde_json::from_str(l).ok())
                    .collect();
                (meta, lines)
            } else if name.contains(&format!("_{short}")) && name.ends_with(".json") {
                let Some(doc) = std::fs::read(&path)
                    .ok()
                    .and_then(|b| serde_json::from_slice::<Value>(&b).ok())
                else {
                    continue;
                };
                let meta = doc.get("metadata").cloned().unwrap_or(Value::Null);
                (meta, array_of(&doc, "messages").to_vec())
            } else {
                continue;
            };
        if str_of(&meta, "session_id") != Some(id) {
            continue;
        }
        let messages = lines
            .iter()
            .filter_map(|m| str_of(m, "message_id"))
            .map(str::to_owned)
            .collect();
        return Some(Parent { messages, meta });
    }
    None
}

/// One session's messages being read.
struct Session<'a> {
    sid: &'a str,
    at: i64,
    model: Option<String>,
    /// The parent's message ids, when the session has a parent found beside it.
    inherited: Option<&'a HashSet<String>>,
    /// Calls of messages that stayed the parent's: their results are the parent's too.
    replayed_calls: HashSet<String>,
    /// A call's id → (index in `out.messages`, part index).
    calls: HashMap<String, (usize, usize)>,
    replies: i64,
    /// The session opens with a summary (a continuation after `/compact`).
    summary: bool,
}

impl Session<'_> {
    fn messages(&mut self, messages: &[Value], out: &mut Batch, report: &mut FileReport) {
        let mut own = 0usize;
        for (i, m) in messages.iter().enumerate() {
            let role = str_of(m, "role").unwrap_or("");
            let id = str_of(m, "message_id").filter(|s| !s.is_empty());
            if let Some(id) = id
                && self.inherited.is_some_and(|ids| ids.contains(id))
            {
                for call in array_of(m, "tool_calls") {
                    if let Some(c) = str_of(call, "id") {
                        self.replayed_calls.insert(c.to_owned());
                    }
                }
                report.skip("replayed-parent-history");
                continue;
            }
            let key = id.map_or_else(|| format!("{}:{i}", self.sid), str::to_owned);
            let said = content_text(m.get("content").unwrap_or(&Value::Null));
            match role {
                "user" => {
                    if said.trim().is_empty() {
                        report.skip("message:user:empty");
                        continue;
                    }
                    let injected = m.get("injected").and_then(Value::as_bool) == Some(true);
                    let mut msg = message(SRC, &key, Role::User, self.at);
                    // A continuation opens with the summary `/compact` wrote, before any
                    // message of its own.
                    if injected && own == 0 && self.inherited.is_some() {
                        msg.is_summary = true;
                        self.summary = true;
                    }
                    msg.parts = numbered(SRC, &key, vec![text(said, injected)], self.at);
                    out.messages.push(MessageRec::new(self.sid.to_owned(), msg));
                }
                "assistant" => {
                    let mut parts: Vec<Part> = Vec::new();
                    if let Some(r) = str_of(m, "reasoning_content").filter(|r| !r.trim().is_empty())
                    {
                        let signature = str_of(m, "reasoning_signature")
                            .filter(|s| !s.is_empty())
                            .map(str::to_owned);
                        parts.push(reasoning(r, signature, None));
                    }
                    if !said.trim().is_empty() {
                        parts.push(text(said, false));
                    }
                    let this = out.messages.len();
                    for call in array_of(m, "tool_calls") {
                        let call_id = str_of(call, "id").unwrap_or("");
                        let function = call.get("function").unwrap_or(&Value::Null);
                        let input = match str_of(function, "arguments") {
                            Some(raw) => serde_json::from_str(raw)
                                .unwrap_or_else(|_| Value::String(raw.to_owned())),
                            None => Value::Null,
                        };
                        self.calls.insert(call_id.to_owned(), (this, parts.len()));
                        parts.push(tool(
                            call_id,
                            str_of(function, "name").unwrap_or(""),
                            input,
                            ToolState::Running {
                                started_at: self.at,
                            },
                        ));
                    }
                    if parts.is_empty() {
                        report.skip("message:assistant:empty");
                        continue;
                    }
                    let mut msg = message(SRC, &key, Role::Assistant, self.at);
                    msg.model = self.model.clone();
                    msg.parts = numbered(SRC, &key, parts, self.at);
                    // Its call is counted with the session's usage, which Vibe keeps alone.
                    self.replies += 1;
                    out.messages.push(MessageRec::new(self.sid.to_owned(), msg));
                }
                "tool" => {
                    let call_id = str_of(m, "tool_call_id").unwrap_or("");
                    if self.replayed_calls.contains(call_id) {
                        report.skip("replayed-parent-history");
                        continue;
                    }
                    let Some(&place) = self.calls.get(call_id) else {
                        report.skip("tool:without-call");
                        continue;
                    };
                    let (output, failed) = outcome(&said);
                    settle_call(&mut out.messages, place, output, failed, self.at);
                    continue;
                }
                "system" => {
                    report.skip("message:system");
                    continue;
                }
                "" => {
                    report.skip("message:(no role)");
                    continue;
                }
                other => {
                    report.skip(format!("message:{other}"));
                    continue;
                }
            }
            own += 1;
        }
    }
}

/// A tool message's text as the call's outcome: what a `<tool_error>` or
/// `<user_cancellation>` holds fails it; anything else is its output.
fn outcome(said: &str) -> (String, bool) {
    match only_tags(said, &["tool_error", "user_cancellation"]) {
        Some(tags) => {
            let why = tags.values().copied().collect::<Vec<_>>().join("\n");
            (why.trim().to_owned(), true)
        }
        None => (said.to_owned(), false),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_tool_message_fails_its_call_only_with_vibes_tags() {
        assert_eq!(
            outcome("<tool_error>bash failed: exit status 1</tool_error>"),
            ("bash failed: exit status 1".to_owned(), true)
        );
        assert_eq!(
            outcome("<user_cancellation>User skipped the tool</user_cancellation>"),
            ("User skipped the tool".to_owned(), true)
        );
        assert_eq!(
            outcome("stdout: <tool_error> is a tag"),
            ("stdout: <tool_error> is a tag".to_owned(), false)
        );
    }

    #[test]
    fn the_model_is_the_active_alias_name() {
        let meta = serde_json::json!({"config": {"active_model": "devstral-2", "models": [
            {"name": "mistral-small-latest", "alias": "small"},
            {"name": "devstral-2512", "alias": "devstral-2"}
        ]}});
        assert_eq!(active_model(&meta).as_deref(), Some("devstral-2512"));
        let old = serde_json::json!({"agent_config": {"active_model": "local"}});
        assert_eq!(active_model(&old).as_deref(), Some("local"));
        assert_eq!(active_model(&Value::Null), None);
        assert_eq!(
            id_from_name(Path::new("/s/session_20251101_090000_c0ffee12.json")).as_deref(),
            Some("c0ffee12")
        );
    }
}
