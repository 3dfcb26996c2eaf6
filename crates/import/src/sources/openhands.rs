//! OpenHands (its CLI, and any program on its software-agent SDK that persists
//! conversations): a folder per conversation in `~/.openhands/conversations/<id>/`, holding
//! `base_state.json`, the conversation's state (the agent and its model, the workspace,
//! the usage of each of its LLMs), and `events/event-<index>-<event id>.json`, one JSON file
//! per event, written once (`openhands/sdk/conversation/state.py`, `event_store.py`,
//! `persistence_const.py`). `~/.openhands`, its `conversations` folder, one conversation's
//! folder or its `base_state.json` may be given.
//!
//! The state file is what an import reads, the event files are its
//! [companions](super::Importer::companions): a new event reads the conversation again,
//! whole. Mapping (`openhands/sdk/event`), each event by its `kind`, in index order:
//! - `MessageEvent`: from the `user`, a user message (its `llm_message` text and images;
//!   what the agent context appended, `extended_content`, is left out); from the `agent`,
//!   a reply (its reasoning: `thinking_blocks`, signed, else `reasoning_content`; its
//!   text);
//! - `ActionEvent`: a tool call; the actions of one model response (`llm_response_id`,
//!   parallel calls) are one reply, the first holding the response's thought and
//!   reasoning; settled by the `ObservationEvent` that answers it (`tool_call_id`: its
//!   observation's text; `is_error` fails it), a `UserRejectObservation` (failed with the
//!   reason) or an `AgentErrorEvent` (failed with the error);
//! - `Condensation` with a `summary`, and `CondensationSummaryEvent`: the summary of what
//!   the condenser dropped, a synthetic user message marked as the summary;
//! - `SystemPromptEvent`: the session's system prompt; the rest (state updates, pauses,
//!   streaming tokens, …) are counted as skipped;
//! - times are the events' `timestamp`s, local times without a zone, read as UTC (as
//!   Hermes' are); the folder is the workspace's `working_dir`, the model the agent's
//!   LLM's (`provider/model` split as litellm names it);
//! - usage: each LLM's metrics (`stats.usage_to_metrics`) list a `token_usages` record per
//!   call, named by the `response_id` the events carry: a reply's usage is its response's.
//!   litellm counts the cache inside `prompt_tokens` and reasoning inside
//!   `completion_tokens`, so both are taken out. The cost is reported per call when the
//!   metrics list a cost for every call (`costs`, in call order; OpenHands lists none for
//!   a call that cost nothing), else estimated from the model. Calls no event names (the
//!   condenser's, a title's) go to a child session per LLM and model, as Amp's background
//!   calls do.
//!
//! Only these fields of the state file are read: its `secret_registry` (the conversation's
//! secrets, redacted or encrypted) and the LLM's credentials never are.

use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};

use scribe_message::{Part, Role, TokenUsage, ToolState};
use scribe_session::SessionKind;
use serde_json::Value;

use super::{
    FileReport, Importer, Unit, array_of, f64_of, image_url, int_of, message, numbered,
    provider_and_model, reasoning, settle_call, str_of, text, tool,
};
use crate::Source;
use crate::env::Env;
use crate::error::{ImportError, Result};
use crate::record::{Batch, MessageRec, Resume, SessionRec, SessionUsage};
use crate::time;

const SRC: Source = Source::OpenHands;

/// A conversation's state file.
const BASE_STATE: &str = "base_state.json";
/// Its events' folder.
const EVENTS: &str = "events";

/// The OpenHands importer.
#[derive(Debug, Clone, Copy)]
pub struct OpenHands;

impl Importer for OpenHands {
    fn source(&self) -> Source {
        SRC
    }

    /// `~/.openhands/conversations`.
    fn default_roots(&self, env: &Env) -> Vec<PathBuf> {
        env.home_join(".openhands/conversations")
            .into_iter()
            .collect()
    }

    fn discover(&self, root: &Path, out: &mut Vec<PathBuf>) -> Result<()> {
        let conversations = root.join("conversations");
        let root = if conversations.is_dir() {
            &conversations
        } else {
            root
        };
        super::walk(root, out, |p| {
            p.file_name().is_some_and(|n| n == BASE_STATE)
                && p.parent().is_some_and(|d| d.join(EVENTS).is_dir())
        })
    }

    /// The conversation's event files.
    fn companions(&self, path: &Path) -> Vec<PathBuf> {
        event_files(path)
            .into_iter()
            .map(|(_, file)| file)
            .collect()
    }

    fn read(&self, unit: &Unit<'_>, out: &mut Batch, report: &mut FileReport) -> Result<Resume> {
        let path = unit.path;
        let chunk = crate::reader::read_from(path, 0, 0)?;
        let state: Value = serde_json::from_slice(chunk.bytes()).map_err(|e| malformed(path, e))?;
        if !state.is_object() {
            return Err(malformed(path, "it is not an object"));
        }
        let resume = super::resume_whole(&chunk);
        let id = str_of(&state, "id")
            .filter(|s| !s.is_empty())
            .map(str::to_owned)
            .or_else(|| Some(path.parent()?.file_name()?.to_string_lossy().into_owned()))
            .ok_or_else(|| malformed(path, "it names no conversation"))?;
        let mut events = Vec::new();
        let files = event_files(path);
        for (i, (_, file)) in files.iter().enumerate() {
            let parsed = std::fs::read(file)
                .map_err(|e| e.to_string())
                .and_then(|b| serde_json::from_slice::<Value>(&b).map_err(|e| e.to_string()));
            match parsed {
                Ok(event) if event.is_object() => events.push(event),
                Ok(_) => report.malformed(file, None, "not an event object"),
                // The newest event may be one OpenHands is still writing: its file
                // changes once it is whole, and the conversation is read again.
                Err(_) if i + 1 == files.len() => report.skip("event:being-written"),
                Err(e) => report.malformed(file, None, e),
            }
        }
        report.records += events.len() as u64;
        let model = state
            .pointer("/agent/llm/model")
            .and_then(Value::as_str)
            .filter(|m| !m.is_empty())
            .map(str::to_owned);
        let times: Vec<i64> = events
            .iter()
            .filter_map(|e| str_of(e, "timestamp").and_then(time::parse))
            .collect();
        let created = times.iter().copied().min().unwrap_or(unit.mtime_ms);
        let updated = times
            .iter()
            .copied()
            .max()
            .unwrap_or(unit.mtime_ms)
            .max(created);
        if unit.since.is_some_and(|since| updated < since) {
            return Ok(resume);
        }
        let mut conversation = Conversation {
            sid: &id,
            model: model.clone(),
            at: created,
            messages: Vec::new(),
            calls: HashMap::new(),
            responses: HashMap::new(),
            system_prompt: None,
        };
        for event in &events {
            conversation.event(event, report);
        }
        let mut rec = SessionRec::new(id.clone(), created);
        rec.updated_at = updated;
        rec.model = model.as_deref().map(|m| provider_and_model(m).1.to_owned());
        rec.directory = state
            .pointer("/workspace/working_dir")
            .and_then(Value::as_str)
            .filter(|d| !d.is_empty())
            .map(str::to_owned);
        rec.system_prompt = conversation.system_prompt.take();
        let children = conversation.usage(&state, &rec);
        out.sessions.push(rec);
        out.sessions.extend(children);
        out.messages.extend(conversation.messages);
        Ok(resume)
    }
}

fn malformed(path: &Path, reason: impl ToString) -> ImportError {
    ImportError::Malformed {
        path: path.to_owned(),
        what: "state file of an OpenHands conversation",
        reason: reason.to_string(),
    }
}

/// The event files beside the state file at `state`, by their index (the number after
/// `event-`, five digits or more).
fn event_files(state: &Path) -> Vec<(u64, PathBuf)> {
    let Some(dir) = state.parent().map(|d| d.join(EVENTS)) else {
        return Vec::new();
    };
    let Ok(entries) = std::fs::read_dir(&dir) else {
        return Vec::new();
    };
    let mut files: Vec<(u64, PathBuf)> = entries
        .flatten()
        .filter_map(|e| {
            let path = e.path();
            let name = path.file_name()?.to_str()?;
            let rest = name.strip_prefix("event-")?.strip_suffix(".json")?;
            let index = rest.split('-').next()?.parse().ok()?;
            Some((index, path))
        })
        .collect();
    files.sort();
    files
}

/// A usage record as Scribe's disjoint buckets: litellm counts the cache inside the prompt
/// (unless the cache alone is larger: a protocol that reports it apart) and reasoning
/// inside the completion.
fn tokens_of(u: &Value) -> TokenUsage {
    let (prompt, completion) = (int_of(u, "prompt_tokens"), int_of(u, "completion_tokens"));
    let (read, write) = (
        int_of(u, "cache_read_tokens"),
        int_of(u, "cache_write_tokens"),
    );
    let reasoning = int_of(u, "reasoning_tokens").min(completion);
    let cached = read.saturating_add(write);
    TokenUsage {
        input: if cached <= prompt {
            prompt - cached
        } else {
            prompt
        },
        output: completion - reasoning,
        cache_read: read,
        cache_write: write,
        reasoning,
    }
}

/// One conversation's events being read.
struct Conversation<'a> {
    sid: &'a str,
    model: Option<String>,
    /// When the conversation started: the time of an event without one.
    at: i64,
    messages: Vec<MessageRec>,
    /// A call's id → (index in `messages`, part index).
    calls: HashMap<String, (usize, usize)>,
    /// A model response's id → the index of its reply in `messages`.
    responses: HashMap<String, usize>,
    system_prompt: Option<String>,
}

impl Conversation<'_> {
    fn event(&mut self, event: &Value, report: &mut FileReport) {
        let kind = str_of(event, "kind").unwrap_or("");
        let at = str_of(event, "timestamp")
            .and_then(time::parse)
            .unwrap_or(self.at);
        let key = str_of(event, "id").unwrap_or("").to_owned();
        match kind {
            "MessageEvent" => {
                let m = event.get("llm_message").unwrap_or(&Value::Null);
                match str_of(event, "source") {
                    Some("user") => {
                        let parts = content_parts(array_of(m, "content"));
                        if parts.is_empty() {
                            report.skip("message:user:empty");
                            return;
                        }
                        self.push(&key, Role::User, parts, at, None);
                    }
                    Some("agent") => {
                        let mut parts = reasoning_of(event, m);
                        parts.extend(content_parts(array_of(m, "content")));
                        if parts.is_empty() {
                            report.skip("message:agent:empty");
                            return;
                        }
                        let response = str_of(event, "llm_response_id");
                        self.push(&key, Role::Assistant, parts, at, response);
                    }
                    other => report.skip(format!("message:{}", other.unwrap_or("(no source)"))),
                }
            }
            "ActionEvent" => {
                let response = str_of(event, "llm_response_id").filter(|r| !r.is_empty());
                let call = event.get("tool_call").unwrap_or(&Value::Null);
                let call_id = str_of(event, "tool_call_id")
                    .or_else(|| str_of(call, "id"))
                    .unwrap_or("")
                    .to_owned();
                let name = str_of(call, "name")
                    .or_else(|| str_of(event, "tool_name"))
                    .unwrap_or("");
                let input = match call.get("arguments") {
                    Some(Value::String(raw)) => {
                        serde_json::from_str(raw).unwrap_or_else(|_| Value::String(raw.clone()))
                    }
                    Some(other) => other.clone(),
                    None => Value::Null,
                };
                let part = tool(&call_id, name, input, ToolState::Running { started_at: at });
                // The actions of one response (parallel calls) are one reply.
                if let Some(&index) = response.and_then(|r| self.responses.get(r)) {
                    let reply = &mut self.messages[index];
                    let position = reply.message.parts.len();
                    let message_key = response.unwrap_or(&key).to_owned();
                    reply.message.parts.push(super::stored_part(
                        SRC,
                        &message_key,
                        &position.to_string(),
                        position as i64,
                        part,
                        at,
                    ));
                    reply.message.updated_at = reply.message.updated_at.max(at);
                    self.calls.insert(call_id, (index, position));
                    return;
                }
                let mut parts = reasoning_of(event, event);
                parts.extend(content_parts(array_of(event, "thought")));
                let position = parts.len();
                parts.push(part);
                let message_key = response.map_or_else(|| key.clone(), str::to_owned);
                self.push(&message_key, Role::Assistant, parts, at, response);
                self.calls
                    .insert(call_id, (self.messages.len() - 1, position));
            }
            "ObservationEvent" | "UserRejectObservation" | "AgentErrorEvent" => {
                let call_id = str_of(event, "tool_call_id").unwrap_or("");
                let Some(&place) = self.calls.get(call_id) else {
                    report.skip(format!("{kind}:without-call"));
                    return;
                };
                let (output, failed) = match kind {
                    "ObservationEvent" => {
                        let o = event.get("observation").unwrap_or(&Value::Null);
                        let said = texts(array_of(o, "content"));
                        (
                            said,
                            o.get("is_error").and_then(Value::as_bool) == Some(true),
                        )
                    }
                    "UserRejectObservation" => (
                        str_of(event, "rejection_reason")
                            .unwrap_or("User rejected the action")
                            .to_owned(),
                        true,
                    ),
                    _ => (str_of(event, "error").unwrap_or("").to_owned(), true),
                };
                settle_call(&mut self.messages, place, output, failed, at);
            }
            "Condensation" | "CondensationSummaryEvent" => {
                let Some(summary) = str_of(event, "summary").filter(|s| !s.trim().is_empty())
                else {
                    report.skip(format!("{kind}:without-summary"));
                    return;
                };
                let mut msg = message(SRC, &key, Role::User, at);
                msg.is_summary = true;
                msg.parts = numbered(SRC, &key, vec![text(summary, true)], at);
                self.messages
                    .push(MessageRec::new(self.sid.to_owned(), msg));
            }
            "SystemPromptEvent" => {
                self.system_prompt = event
                    .pointer("/system_prompt/text")
                    .and_then(Value::as_str)
                    .map(str::to_owned);
            }
            "" => report.skip("event:(no kind)"),
            other => report.skip(other.to_owned()),
        }
    }

    /// A message of `parts` known by `key`; a reply, by its model response's id.
    fn push(&mut self, key: &str, role: Role, parts: Vec<Part>, at: i64, response: Option<&str>) {
        let mut msg = message(SRC, key, role, at);
        msg.parts = numbered(SRC, key, parts, at);
        if role == Role::Assistant {
            if let Some(name) = &self.model {
                let (provider, model) = provider_and_model(name);
                msg.provider = provider.map(str::to_owned);
                msg.model = Some(model.to_owned());
            }
            if let Some(r) = response.filter(|r| !r.is_empty()) {
                self.responses.insert(r.to_owned(), self.messages.len());
            }
        }
        let mut rec = MessageRec::new(self.sid.to_owned(), msg);
        if role == Role::Assistant {
            rec.api_calls = 1;
        }
        self.messages.push(rec);
    }

    /// Each call's usage onto the reply its response made; the calls no reply names as
    /// child sessions of `session`, one per LLM and model (returned).
    fn usage(&mut self, state: &Value, session: &SessionRec) -> Vec<SessionRec> {
        let mut background: BTreeMap<(String, String), (TokenUsage, i64, Option<f64>)> =
            BTreeMap::new();
        let metrics = state
            .pointer("/stats/usage_to_metrics")
            .and_then(Value::as_object);
        for (usage_id, m) in metrics.into_iter().flatten() {
            let calls = array_of(m, "token_usages");
            let costs = array_of(m, "costs");
            // A cost per call, in call order, only when every call has one.
            let priced = costs.len() == calls.len();
            for (i, call) in calls.iter().enumerate() {
                let tokens = tokens_of(call);
                let cost = priced
                    .then(|| f64_of(&costs[i], "cost"))
                    .flatten()
                    .filter(|c| c.is_finite() && *c >= 0.0);
                let model = str_of(call, "model")
                    .filter(|m| !m.is_empty())
                    .or_else(|| str_of(m, "model_name"))
                    .unwrap_or("unknown");
                let reply = str_of(call, "response_id")
                    .and_then(|r| self.responses.get(r))
                    .copied();
                match reply {
                    Some(index) => {
                        let rec = &mut self.messages[index];
                        rec.message.usage += tokens;
                        if let Some(c) = cost {
                            *rec.reported_cost.get_or_insert(0.0) += c;
                        }
                        let (provider, name) = provider_and_model(model);
                        if model != "unknown" {
                            rec.message.provider = provider.map(str::to_owned);
                            rec.message.model = Some(name.to_owned());
                        }
                    }
                    None => {
                        let entry = background
                            .entry((usage_id.clone(), model.to_owned()))
                            .or_insert((TokenUsage::default(), 0, priced.then_some(0.0)));
                        entry.0 += tokens;
                        entry.1 += 1;
                        if let (Some(total), Some(c)) = (&mut entry.2, cost) {
                            *total += c;
                        }
                    }
                }
            }
        }
        background
            .into_iter()
            .map(|((usage_id, model), (tokens, calls, cost))| {
                let mut child = SessionRec::new(
                    format!("{}:{usage_id}:{model}", session.external_id),
                    session.updated_at,
                );
                child.parent = Some(session.external_id.clone());
                child.kind = if usage_id.contains("title") {
                    SessionKind::Title
                } else {
                    SessionKind::Task
                };
                child.directory.clone_from(&session.directory);
                let model = (model != "unknown").then(|| provider_and_model(&model).1.to_owned());
                child.model.clone_from(&model);
                child.model_config = Some(serde_json::json!({ "openhands_usage_id": usage_id }));
                child.usage_total = Some(SessionUsage {
                    tokens,
                    api_calls: calls,
                    reported_cost: cost,
                    model,
                    cost_usd: 0.0,
                    cost_flags: 0,
                });
                child
            })
            .collect()
    }
}

/// The reasoning of `event` (an action) or of its `llm_message` (a message): its thinking
/// blocks, each signed, else its `reasoning_content`.
fn reasoning_of(event: &Value, m: &Value) -> Vec<Part> {
    let blocks: Vec<Part> = array_of(m, "thinking_blocks")
        .iter()
        .filter(|b| str_of(b, "type") == Some("thinking"))
        .filter_map(|b| {
            let thought = str_of(b, "thinking").filter(|t| !t.trim().is_empty())?;
            let signature = str_of(b, "signature")
                .filter(|s| !s.is_empty())
                .map(str::to_owned);
            Some(reasoning(thought, signature, None))
        })
        .collect();
    if !blocks.is_empty() {
        return blocks;
    }
    str_of(m, "reasoning_content")
        .or_else(|| str_of(event, "reasoning_content"))
        .filter(|r| !r.trim().is_empty())
        .map(|r| vec![reasoning(r, None, None)])
        .unwrap_or_default()
}

/// Content blocks as parts: `text` as text, `image` (its `image_urls`) as files.
fn content_parts(blocks: &[Value]) -> Vec<Part> {
    let mut parts = Vec::new();
    let said = texts(blocks);
    if !said.trim().is_empty() {
        parts.push(text(said, false));
    }
    for block in blocks.iter().filter(|b| str_of(b, "type") == Some("image")) {
        for url in array_of(block, "image_urls")
            .iter()
            .filter_map(Value::as_str)
        {
            parts.push(image_url(url.to_owned()));
        }
    }
    parts
}

/// The text of content blocks, joined.
fn texts(blocks: &[Value]) -> String {
    blocks
        .iter()
        .filter(|b| str_of(b, "type").is_none_or(|t| t == "text"))
        .filter_map(|b| str_of(b, "text"))
        .collect::<Vec<_>>()
        .join("\n")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn litellms_counts_become_disjoint_buckets() {
        let u = serde_json::json!({"prompt_tokens": 10_000, "completion_tokens": 500,
            "cache_read_tokens": 7_000, "cache_write_tokens": 2_000, "reasoning_tokens": 120});
        let t = tokens_of(&u);
        assert_eq!(
            (t.input, t.cache_read, t.cache_write, t.output, t.reasoning),
            (1_000, 7_000, 2_000, 380, 120)
        );
        // A protocol that reports the cache apart from the prompt.
        let acp = serde_json::json!({"prompt_tokens": 300, "cache_read_tokens": 9_000});
        assert_eq!(tokens_of(&acp).input, 300);
    }
}
