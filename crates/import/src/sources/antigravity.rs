//! Google Antigravity: one folder per conversation, `brain/<id>/`, whose
//! `.system_generated/logs/transcript_full.jsonl` logs its steps (and
//! `transcript.jsonl` the same steps with long fields cut short, read only where no full
//! log is beside it). The CLI keeps `brain` in `~/.gemini/antigravity-cli`, the editor in
//! `~/.gemini/antigravity` (or `antigravity-ide`); `ANTIGRAVITY_DATA_DIR`, a
//! comma-separated list of such folders, replaces them, as ccusage reads it.
//!
//! Each line is a step: `step_index`, `source` (`USER_EXPLICIT`, `MODEL`, `SYSTEM`),
//! `type`, `status`, `created_at`, `content`. A changed log is read whole; messages are
//! keyed by the conversation and the step's index, so nothing is stored twice.
//!
//! Mapping:
//! - `USER_INPUT`: what the user asked (`<USER_REQUEST>`) as their text; the other blocks
//!   Antigravity adds (`<USER_SETTINGS_CHANGE>`, …) as synthetic text; a change of the
//!   `Model Selection` setting names the model of the replies after it
//!   (`Gemini 3.5 Flash (Medium)` → `gemini-3.5-flash`);
//! - `PLANNER_RESPONSE`: a reply: `thinking` as reasoning, `content` as text, `tool_calls`
//!   (`name` and `args`, whose values Antigravity writes as JSON text, parsed) as tool
//!   parts; the model's steps that follow (`LIST_DIRECTORY`, `VIEW_FILE`, `RUN_COMMAND`,
//!   `CODE_ACTION`, …) are their results, in order (no step names its call): completed
//!   with the step's `content`, or failed when its status is an error or a cancel; a
//!   result no call waits for is a tool part of its own, named by its type;
//! - `CHECKPOINT` (a compaction) is a summary message; `SYSTEM_MESSAGE` (what Antigravity
//!   tells the model in the user's place) is synthetic user text; other system steps are
//!   counted as skipped.
//!
//! Usage: the logs keep none (ccusage estimates tokens from the characters written, 1.5
//! per character); Scribe stores no usage it was not told, so the sessions carry none.

use std::collections::VecDeque;
use std::path::{Path, PathBuf};

use scribe_message::{CompactionPart, Part, Role, ToolState};
use serde_json::Value;

use super::{
    FileReport, Importer, Times, Unit, existing_or_first, message, numbered, reasoning,
    resume_whole, settle_call, settled, str_of, text, tool, walk,
};
use crate::Source;
use crate::env::Env;
use crate::error::Result;
use crate::record::{Batch, MessageRec, Resume, SessionRec};
use crate::time;

const SRC: Source = Source::Antigravity;

/// The complete log of a conversation's steps.
const FULL: &str = "transcript_full.jsonl";
/// The same steps with long fields cut short.
const SHORT: &str = "transcript.jsonl";

/// The Google Antigravity importer.
#[derive(Debug, Clone, Copy)]
pub struct Antigravity;

impl Importer for Antigravity {
    fn source(&self) -> Source {
        SRC
    }

    fn reads_state(&self) -> bool {
        false
    }

    fn default_roots(&self, env: &Env) -> Vec<PathBuf> {
        if let Some(dirs) = env.paths("ANTIGRAVITY_DATA_DIR") {
            return dirs.into_iter().map(|d| d.join("brain")).collect();
        }
        let Some(gemini) = env.home_join(".gemini") else {
            return Vec::new();
        };
        existing_or_first(
            ["antigravity-cli", "antigravity", "antigravity-ide"]
                .iter()
                .map(|d| gemini.join(d).join("brain"))
                .collect(),
        )
    }

    fn discover(&self, root: &Path, out: &mut Vec<PathBuf>) -> Result<()> {
        let mut found = Vec::new();
        walk(root, &mut found, |p| {
            p.file_name().is_some_and(|n| n == FULL || n == SHORT)
        })?;
        // The full log where there is one; the cut one only without it.
        out.extend(found.into_iter().filter(|p| {
            p.file_name().is_some_and(|n| n == FULL) || !p.with_file_name(FULL).is_file()
        }));
        Ok(())
    }

    fn read(&self, unit: &Unit<'_>, out: &mut Batch, report: &mut FileReport) -> Result<Resume> {
        let path = unit.path;
        let chunk = crate::reader::read_from(path, 0, 0)?;
        // brain/<id>/.system_generated/logs/<log>
        let id = path
            .ancestors()
            .nth(3)
            .and_then(Path::file_name)
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        let mut log = Log::new(id, unit.mtime_ms);
        for line in chunk.lines() {
            match serde_json::from_str::<Value>(line.text) {
                Ok(step) => log.step(&step, line.number, report),
                Err(err) => report.malformed(path, Some(line.number), err.to_string()),
            }
        }
        if log.messages.is_empty() {
            report.skip("(no Antigravity conversation)");
        } else if unit.since.is_none_or(|since| log.times.last() >= since) {
            log.finish(out);
        }
        Ok(resume_whole(&chunk))
    }
}

/// One conversation's log being read.
struct Log {
    id: String,
    times: Times,
    /// The model the user selected last.
    model: Option<String>,
    messages: Vec<MessageRec>,
    /// Calls waiting for their results, in order: (index in `messages`, part index).
    pending: VecDeque<(usize, usize)>,
}

impl Log {
    fn new(id: String, mtime_ms: i64) -> Log {
        Log {
            id,
            times: Times::new(mtime_ms),
            model: None,
            messages: Vec::new(),
            pending: VecDeque::new(),
        }
    }

    fn step(&mut self, step: &Value, line: u64, report: &mut FileReport) {
        let at = self
            .times
            .note(str_of(step, "created_at").and_then(time::parse));
        let key = match step.get("step_index").and_then(Value::as_u64) {
            Some(n) => format!("{}:{n}", self.id),
            None => format!("{}:#{line}", self.id),
        };
        let content = str_of(step, "content").unwrap_or("");
        let kind = str_of(step, "type").unwrap_or("");
        let source = str_of(step, "source").unwrap_or("");
        match (source, kind) {
            (_, "USER_INPUT") => {
                self.pending.clear();
                let parts = self.user_input(content);
                self.push(&key, Role::User, at, parts, report);
            }
            (_, "PLANNER_RESPONSE") => self.reply(step, &key, at, report),
            ("SYSTEM", "CHECKPOINT") => {
                if content.trim().is_empty() {
                    report.skip("CHECKPOINT:empty");
                    return;
                }
                let parts = vec![
                    Part::Compaction(CompactionPart::default()),
                    text(content, false),
                ];
                if let Some(i) = self.push(&key, Role::Assistant, at, parts, report) {
                    self.messages[i].message.is_summary = true;
                }
            }
            ("SYSTEM", "SYSTEM_MESSAGE") => {
                let parts = if content.is_empty() {
                    Vec::new()
                } else {
                    vec![text(content, true)]
                };
                self.push(&key, Role::User, at, parts, report);
            }
            ("MODEL", _) if !kind.is_empty() => self.result(step, kind, content, &key, at, report),
            ("", "") => report.skip("untyped"),
            _ => report.skip(kind),
        }
    }

    /// A user's input: their request, and what Antigravity added to it as synthetic text.
    fn user_input(&mut self, content: &str) -> Vec<Part> {
        let mut parts = Vec::new();
        let mut rest = content.trim();
        let mut tagged = false;
        while let Some(after) = rest.strip_prefix('<')
            && let Some((name, body)) = after.split_once('>')
            && !name.contains([' ', '/'])
            && let Some((inner, tail)) = body.split_once(&format!("</{name}>"))
        {
            tagged = true;
            let inner = inner.trim();
            if name == "USER_SETTINGS_CHANGE"
                && let Some(model) = selected_model(inner)
            {
                self.model = Some(model);
            }
            if !inner.is_empty() {
                parts.push(text(inner, name != "USER_REQUEST"));
            }
            rest = tail.trim_start();
        }
        // Text outside any block is the user's.
        if !rest.is_empty() || !tagged {
            let said = rest.trim();
            if !said.is_empty() {
                parts.push(text(said, false));
            }
        }
        parts
    }

    fn reply(&mut self, step: &Value, key: &str, at: i64, report: &mut FileReport) {
        let mut parts = Vec::new();
        if let Some(thought) = str_of(step, "thinking").filter(|t| !t.is_empty()) {
            parts.push(reasoning(thought, None, None));
        }
        if let Some(said) = str_of(step, "content").filter(|t| !t.is_empty()) {
            parts.push(text(said, false));
        }
        let mut calls = Vec::new();
        for (n, call) in step
            .get("tool_calls")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .enumerate()
        {
            let name = str_of(call, "name").unwrap_or("");
            // Antigravity writes each argument's value as JSON text.
            let input = match call.get("args") {
                Some(Value::Object(args)) => Value::Object(
                    args.iter()
                        .map(|(k, v)| {
                            let v = match v {
                                Value::String(s) => serde_json::from_str(s)
                                    .unwrap_or_else(|_| Value::String(s.clone())),
                                other => other.clone(),
                            };
                            (k.clone(), v)
                        })
                        .collect(),
                ),
                None | Some(Value::Null) => Value::Object(serde_json::Map::new()),
                Some(other) => other.clone(),
            };
            calls.push(parts.len());
            parts.push(tool(
                &format!("{key}:{n}"),
                name,
                input,
                ToolState::Running { started_at: at },
            ));
        }
        // Calls of an earlier reply still waiting got no result: they stay running.
        self.pending.clear();
        let model = self.model.clone();
        if let Some(i) = self.push(key, Role::Assistant, at, parts, report) {
            self.messages[i].message.model = model;
            self.pending.extend(calls.into_iter().map(|p| (i, p)));
        }
    }

    /// A step of the model's that carries out a call: the result of the oldest call
    /// waiting for one.
    fn result(
        &mut self,
        step: &Value,
        kind: &str,
        content: &str,
        key: &str,
        at: i64,
        report: &mut FileReport,
    ) {
        let status = str_of(step, "status")
            .unwrap_or("DONE")
            .to_ascii_uppercase();
        let failed = ["ERROR", "FAIL", "CANCEL"]
            .iter()
            .any(|s| status.contains(s));
        let said = if content.is_empty() && failed {
            status.to_ascii_lowercase()
        } else {
            content.to_owned()
        };
        if let Some(place) = self.pending.pop_front() {
            report.records += 1;
            settle_call(&mut self.messages, place, said, failed, at);
            return;
        }
        let state = settled(said, failed, Value::Null, Some(at), at);
        let input = Value::Object(serde_json::Map::new());
        let part = tool(key, &kind.to_ascii_lowercase(), input, state);
        let model = self.model.clone();
        if let Some(i) = self.push(key, Role::Assistant, at, vec![part], report) {
            self.messages[i].message.model = model;
        }
    }

    fn push(
        &mut self,
        key: &str,
        role: Role,
        at: i64,
        parts: Vec<Part>,
        report: &mut FileReport,
    ) -> Option<usize> {
        if parts.is_empty() {
            report.skip(format!("{}:empty", role.as_str()));
            return None;
        }
        let mut m = message(SRC, key, role, at);
        m.parts = numbered(SRC, key, parts, at);
        self.messages.push(MessageRec::new(self.id.clone(), m));
        report.records += 1;
        Some(self.messages.len() - 1)
    }

    fn finish(self, out: &mut Batch) {
        let created = self.times.first();
        let mut rec = SessionRec::new(&self.id, created);
        rec.updated_at = self.times.last().max(created);
        rec.model = self
            .messages
            .iter()
            .rev()
            .find_map(|m| m.message.model.clone());
        out.sessions.push(rec);
        out.messages.extend(self.messages);
    }
}

/// The model a `Model Selection` change selects, as the catalog names models:
/// `` The user changed setting `Model Selection` from None to Gemini 3.5 Flash (Medium). ``
/// → `gemini-3.5-flash`.
fn selected_model(change: &str) -> Option<String> {
    let (_, after) = change.split_once("Model Selection` from ")?;
    let (_, to) = after.split_once(" to ")?;
    let to = to.lines().next().unwrap_or("");
    // The sentence's full stop, not a version's (`3.5`).
    let to = to.trim().strip_suffix('.').unwrap_or(to.trim());
    let name = to.split(" (").next().unwrap_or(to).trim();
    let name = name
        .to_lowercase()
        .split_whitespace()
        .collect::<Vec<_>>()
        .join("-");
    (!name.is_empty()).then_some(name)
}

#[cfg(test)]
mod tests {
    use super::selected_model;

    #[test]
    fn a_model_selection_names_the_model_as_the_catalog_does() {
        assert_eq!(
            selected_model(
                "The user changed setting `Model Selection` from None to Gemini 3.5 Flash (Medium)."
            )
            .as_deref(),
            Some("gemini-3.5-flash")
        );
        assert_eq!(
            selected_model("`Model Selection` from Gemini 3 Pro to Claude Sonnet 4.5.\nmore")
                .as_deref(),
            Some("claude-sonnet-4.5")
        );
        assert_eq!(selected_model("nothing about models"), None);
    }
}
