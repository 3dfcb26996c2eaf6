//! Cline and its forks Roo Code and Kilo Code: one folder per task, `tasks/<id>/`, in the
//! extension's storage of each VS Code-like editor (`~/.config/<editor>/User/globalStorage/
//! <extension>/tasks` on Linux, `~/Library/Application Support/<editor>/…` on macOS,
//! `%APPDATA%\<editor>\…` on Windows; editors: Code, Code - Insiders, VSCodium, Cursor,
//! Windsurf), and for the Cline CLI in `~/.cline/data/tasks` (`CLINE_DIR` moves `~/.cline`,
//! `CLINE_DATA_DIR` its `data`).
//!
//! A task folder holds, each a JSON array rewritten whole as the task goes on:
//! - `api_conversation_history.json`: the conversation as the model saw it, in Anthropic's
//!   message format (`role`, `content` blocks), which newer versions give a `ts` (ms), a
//!   `modelInfo` `{modelId, providerId}` and, in Roo Code, `isSummary` on a condensed
//!   context's summary;
//! - `ui_messages.json`: what the panel showed, each with its `ts`; a `say:
//!   "api_req_started"` row per model request, whose `text` is JSON holding what it cost
//!   (`tokensIn`, `tokensOut`, `cacheWrites`, `cacheReads`, `cost`, Roo Code and Kilo Code's
//!   `apiProtocol`; newer Cline gives the row a `modelInfo`; Cline before 2.x logged the
//!   usage in an `api_req_finished` row after it), and the rows Cline adds to its task
//!   totals: `deleted_api_reqs` (what requests a checkpoint restore removed had spent)
//!   and `subagent_usage`;
//! - `task_metadata.json`: `model_usage`, the model in use from each `ts` on;
//! - `history_item.json` (Roo Code, Kilo Code): the task's entry in the history list, with
//!   its `title`, `workspace` and, for a sub-task `new_task` started, `parentTaskId`.
//!
//! The folder is a session, and its conversation file is what an import reads: the other
//! files are its [companions](super::Importer::companions), so a change to any of them
//! reads the task again, whole. Mapping:
//! - each entry of the conversation is a message, known by its `ts` (or, in versions that
//!   write none, by its position: only Roo Code's condensing rewrites the file's middle,
//!   and it writes `ts`). Without a `ts`, a user message is at the time of the request
//!   that sent it (the n-th `api_req_started` for the n-th user message: a request is
//!   logged before its user message is added) and the reply 1 ms after;
//! - usage and cost, as Cline totals them: each request's counts go to the first reply at
//!   or after its time (several to one reply when failed requests came before it; a
//!   request with no reply yet is read when it has one), `deleted_api_reqs` and
//!   `subagent_usage` to the reply before them (no model call of their own). `tokensIn`
//!   is taken as Cline counts it, without cache reads or writes, except where
//!   `apiProtocol` is `"openai"`, whose `tokensIn` holds both; the request's `cost`
//!   (Cline's own figure, or the provider's) is the reported cost when above 0, and
//!   otherwise the catalog estimates it;
//! - assistant text is split as the model wrote it: a leading `<thinking>…</thinking>`
//!   is reasoning, and a tool call in Cline's XML protocol (a known tool's tag closing
//!   the text, `<read_file><path>…</path></read_file>`) is a tool part whose input is its
//!   parameters; its result is the next user message's `[… Result:` text up to the
//!   environment details, taken out of that message. Native `tool_use` blocks are tool
//!   parts, completed by the `tool_result` with their id. A result starting as Cline
//!   words a failure or a refusal ("The tool execution failed", "The user denied this
//!   operation") is an error. A call the next message does not answer failed
//!   (interrupted); one the task ends on is still running, but for `attempt_completion`,
//!   which no message answers when the user accepts it: completed;
//! - user text: the task, feedback and answers (`<task>`, `<feedback>`, `<answer>`,
//!   `<user_message>`) are their text unwrapped; what the extension added
//!   (`<environment_details>`, `[TASK RESUMPTION]`, `[ERROR]` nudges, a result with no
//!   call to belong to) is kept as synthetic text; images are file parts;
//! - the session's title is the history entry's `title`; its directory the entry's
//!   `workspace`, else the environment details' "Current Working Directory" (Roo Code:
//!   "Current Workspace Directory"); a sub-task is a task session under the task that
//!   started it; its model is the one most replies used.

use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};

use scribe_message::{Part, Role, StoredPart, TokenUsage, ToolState};
use scribe_session::SessionKind;
use serde_json::Value;

use super::{
    FileReport, Importer, Unit, content_text, int_of, media, message, only_tags, reasoning,
    settled, stored_part, str_of, text, tool, walk,
};
use crate::Source;
use crate::env::Env;
use crate::error::{ImportError, Result};
use crate::record::{Batch, MessageRec, Resume, SessionRec, TitleRank};

/// The conversation file of a task folder: what [`Importer::discover`] finds.
const CONVERSATION: &str = "api_conversation_history.json";
/// The panel's log beside it.
const UI_MESSAGES: &str = "ui_messages.json";
/// The models used, beside it.
const METADATA: &str = "task_metadata.json";
/// The task's history entry, beside it (Roo Code, Kilo Code).
const HISTORY_ITEM: &str = "history_item.json";

/// Tools of the XML protocol (Cline's, Roo Code's and Kilo Code's prompts): a tag named
/// otherwise closing a reply is text.
const XML_TOOLS: &[&str] = &[
    "access_mcp_resource",
    "apply_diff",
    "apply_patch",
    "ask_followup_question",
    "attempt_completion",
    "browser_action",
    "codebase_search",
    "condense",
    "edit_file",
    "execute_command",
    "fetch_instructions",
    "generate_image",
    "insert_content",
    "list_code_definition_names",
    "list_files",
    "load_mcp_documentation",
    "new_rule",
    "new_task",
    "plan_mode_respond",
    "read_file",
    "replace_in_file",
    "report_bug",
    "run_slash_command",
    "search_and_replace",
    "search_files",
    "search_replace",
    "summarize_task",
    "switch_mode",
    "update_todo_list",
    "use_mcp_tool",
    "web_fetch",
    "web_search",
    "write_to_file",
];

/// Parameters whose value is a file's text, kept as written (only the newline after the
/// opening tag and before the closing one dropped), and read to the last closing tag.
const VERBATIM: [&str; 2] = ["content", "diff"];

/// Cline, Roo Code or Kilo Code: the same task folders, in each extension's storage.
#[derive(Debug, Clone, Copy)]
pub struct ClineFamily {
    source: Source,
    /// The extension's id, its storage folder's name.
    extension: &'static str,
}

/// Cline (`saoudrizwan.claude-dev`, and the Cline CLI).
pub const CLINE: ClineFamily = ClineFamily {
    source: Source::Cline,
    extension: "saoudrizwan.claude-dev",
};

/// Roo Code (`rooveterinaryinc.roo-cline`).
pub const ROO_CODE: ClineFamily = ClineFamily {
    source: Source::RooCode,
    extension: "rooveterinaryinc.roo-cline",
};

/// Kilo Code (`kilocode.kilo-code`).
pub const KILO_CODE: ClineFamily = ClineFamily {
    source: Source::KiloCode,
    extension: "kilocode.kilo-code",
};

impl Importer for ClineFamily {
    fn reads_state(&self) -> bool {
        false
    }

    fn source(&self) -> Source {
        self.source
    }

    /// The task folders of each editor that has the extension's storage, and the Cline
    /// CLI's; where none exists yet, VS Code's (or the CLI's, when `CLINE_DIR` or
    /// `CLINE_DATA_DIR` says it is used), so that a report names where it looked.
    fn default_roots(&self, env: &Env) -> Vec<PathBuf> {
        let mut candidates = Vec::new();
        let cli = match self.source {
            Source::Cline => match (env.var("CLINE_DATA_DIR"), env.var("CLINE_DIR")) {
                (Some(data), _) => Some((env.expand(data).join("tasks"), true)),
                (None, Some(dir)) => Some((env.expand(dir).join("data/tasks"), true)),
                (None, None) => env.home_join(".cline/data/tasks").map(|p| (p, false)),
            },
            _ => None,
        };
        if let Some((dir, chosen)) = &cli
            && *chosen
        {
            candidates.push(dir.clone());
        }
        candidates.extend(
            env.editor_storage(self.extension)
                .into_iter()
                .map(|d| d.join("tasks")),
        );
        if let Some((dir, false)) = cli {
            candidates.push(dir);
        }
        super::existing_or_first(candidates)
    }

    fn discover(&self, root: &Path, out: &mut Vec<PathBuf>) -> Result<()> {
        // A task folder given itself is read as its conversation file.
        let conversation = root.join(CONVERSATION);
        if root.is_dir() && conversation.is_file() {
            out.push(conversation);
            return Ok(());
        }
        walk(root, out, |p| {
            p.file_name().is_some_and(|n| n == CONVERSATION)
        })
    }

    fn companions(&self, path: &Path) -> Vec<PathBuf> {
        let dir = path.parent().unwrap_or(Path::new(""));
        vec![
            dir.join(UI_MESSAGES),
            dir.join(METADATA),
            dir.join(HISTORY_ITEM),
        ]
    }

    fn read(&self, unit: &Unit<'_>, out: &mut Batch, report: &mut FileReport) -> Result<Resume> {
        let path = unit.path;
        let dir = path.parent().unwrap_or(Path::new(""));
        let bytes = std::fs::read(path).map_err(ImportError::io(path))?;
        let conversation: Vec<Value> =
            serde_json::from_slice(&bytes).map_err(|e| ImportError::Malformed {
                path: path.to_owned(),
                what: "task conversation (a JSON array of messages)",
                reason: e.to_string(),
            })?;
        let ui = companion(&dir.join(UI_MESSAGES), report);
        let metadata = companion(&dir.join(METADATA), report)
            .into_iter()
            .next()
            .unwrap_or(Value::Null);
        let history = companion(&dir.join(HISTORY_ITEM), report)
            .into_iter()
            .next()
            .unwrap_or(Value::Null);
        let task = Task {
            source: self.source,
            id: dir
                .file_name()
                .map(|n| n.to_string_lossy().into_owned())
                .unwrap_or_default(),
            conversation,
            ui,
            metadata,
            history,
        };
        task.emit(unit, out, report);
        Ok(Resume {
            offset: u64::try_from(bytes.len()).unwrap_or(u64::MAX),
            lines: 0,
            carry: None,
            more: false,
        })
    }
}

/// A file beside the conversation: its array's items (an object read alone), none when it
/// is absent; one that is not JSON is reported malformed and read as none.
fn companion(path: &Path, report: &mut FileReport) -> Vec<Value> {
    let Ok(bytes) = std::fs::read(path) else {
        return Vec::new();
    };
    match serde_json::from_slice::<Value>(&bytes) {
        Ok(Value::Array(items)) => items,
        Ok(Value::Null) => Vec::new(),
        Ok(other) => vec![other],
        Err(err) => {
            report.malformed(path, None, err.to_string());
            Vec::new()
        }
    }
}

/// A number of milliseconds (a JavaScript `Date.now()`), read as [`int_of`] reads
/// numbers; none when absent, not a number, not after 1970 or past
/// [`crate::time::LATEST`].
fn ms(v: &Value, key: &str) -> Option<i64> {
    Some(int_of(v, key)).filter(|t| *t > 0 && *t <= crate::time::LATEST)
}

/// A row of the UI log that says what was spent: a model request, or what Cline sums
/// with them in its task totals (`getApiMetrics`).
#[derive(Debug)]
struct Request {
    at: i64,
    /// Its JSON: `tokensIn`, `tokensOut`, `cacheWrites`, `cacheReads`, `cost`, ….
    info: Value,
    /// The model, from the row's own `modelInfo` (newer Cline) or its JSON.
    model: Option<String>,
    provider: Option<String>,
    /// `deleted_api_reqs` (what requests whose messages a checkpoint restore removed had
    /// spent) or `subagent_usage` (what a reply's sub-agents spent): usage of no one
    /// request, which goes to the reply before it.
    spent: bool,
}

/// A task folder, read.
struct Task {
    source: Source,
    id: String,
    conversation: Vec<Value>,
    ui: Vec<Value>,
    metadata: Value,
    history: Value,
}

/// A tool call of the XML protocol waiting for its result in the next user message: the
/// index of its message in the batch, and of its part in the message.
#[derive(Debug, Clone, Copy)]
struct PendingCall {
    message: usize,
    part: usize,
}

/// A result being read for a call: its texts (an image in it is a part of the user
/// message, where a native call's result would leave it too).
struct Collecting {
    call: PendingCall,
    texts: Vec<String>,
}

impl Task {
    fn requests(&self) -> Vec<Request> {
        let mut requests: Vec<Request> = Vec::new();
        for m in &self.ui {
            let say = str_of(m, "say").unwrap_or("");
            if !matches!(
                say,
                "api_req_started" | "api_req_finished" | "deleted_api_reqs" | "subagent_usage"
            ) {
                continue;
            }
            let Some(Value::Object(info)) =
                str_of(m, "text").and_then(|t| serde_json::from_str::<Value>(t).ok())
            else {
                continue;
            };
            // Cline before 2.x logged a request's usage in a row of its own after it.
            if say == "api_req_finished" {
                if let Some(Value::Object(started)) = requests
                    .last_mut()
                    .filter(|r| !r.spent)
                    .map(|r| &mut r.info)
                {
                    started.extend(info);
                }
                continue;
            }
            let Some(at) = ms(m, "ts") else {
                continue;
            };
            let info = Value::Object(info);
            let own = |key: &str, inner: &str| {
                m.get("modelInfo")
                    .and_then(|i| str_of(i, key))
                    .or_else(|| str_of(&info, inner))
                    .map(str::to_owned)
            };
            requests.push(Request {
                at,
                model: own("modelId", "modelId"),
                provider: own("providerId", "providerId"),
                spent: say != "api_req_started",
                info,
            });
        }
        requests
    }

    /// Each conversation entry's time, never before the one above it.
    fn times(&self, requests: &[Request], created: i64) -> Vec<i64> {
        let stamped = self.conversation.iter().all(|m| ms(m, "ts").is_some());
        let mut asked = requests.iter().filter(|r| !r.spent).map(|r| r.at);
        let mut times = Vec::with_capacity(self.conversation.len());
        let mut prev = created;
        let mut request_at = None;
        for m in &self.conversation {
            let at = if stamped {
                ms(m, "ts").unwrap_or(prev)
            } else if str_of(m, "role") == Some("user") {
                request_at = asked.next();
                request_at.unwrap_or(prev)
            } else {
                request_at.map_or(prev, |t| t + 1)
            };
            prev = at.max(prev);
            times.push(prev);
        }
        times
    }

    /// Keys for the conversation's entries: by `ts` where every entry has one, else by
    /// position.
    fn keys(&self) -> Vec<String> {
        let stamped = self.conversation.iter().all(|m| ms(m, "ts").is_some());
        let mut seen: HashMap<String, usize> = HashMap::new();
        self.conversation
            .iter()
            .enumerate()
            .map(|(i, m)| {
                if !stamped {
                    return format!("{}:{i}", self.id);
                }
                let role = str_of(m, "role").unwrap_or("");
                let base = format!("{}:{}:{role}", self.id, ms(m, "ts").unwrap_or(0));
                let n = seen.entry(base.clone()).or_default();
                *n += 1;
                if *n == 1 { base } else { format!("{base}:{n}") }
            })
            .collect()
    }

    /// The model in use at `at` by the task's metadata: (model, provider). Before the
    /// first switch it records, the first model it records.
    fn model_at(&self, at: i64) -> (Option<String>, Option<String>) {
        let mut best: Option<(&str, Option<&str>)> = None;
        for u in self
            .metadata
            .get("model_usage")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
        {
            let Some(model) = str_of(u, "model_id") else {
                continue;
            };
            if best.is_none() || ms(u, "ts").is_some_and(|t| t <= at) {
                best = Some((model, str_of(u, "model_provider_id")));
            }
        }
        (
            best.map(|(m, _)| m.to_owned()),
            best.and_then(|(_, p)| p.map(str::to_owned)),
        )
    }

    fn emit(self, unit: &Unit<'_>, out: &mut Batch, report: &mut FileReport) {
        let requests = self.requests();
        let first_ui = self.ui.iter().find_map(|m| ms(m, "ts"));
        let first_said = self.conversation.iter().find_map(|m| ms(m, "ts"));
        let from_id = self
            .id
            .parse::<i64>()
            .ok()
            .filter(|t| *t > 1_000_000_000_000);
        let created = [first_ui, first_said]
            .into_iter()
            .flatten()
            .min()
            .or(from_id)
            .unwrap_or(unit.mtime_ms);
        let times = self.times(&requests, created);
        let keys = self.keys();
        let last_ui = self.ui.iter().filter_map(|m| ms(m, "ts")).max();
        let updated = times
            .iter()
            .copied()
            .chain(last_ui)
            .max()
            .unwrap_or(created)
            .max(created);
        if unit.since.is_some_and(|since| updated < since) {
            return;
        }
        let mut rec = SessionRec::new(self.id.clone(), created);
        rec.updated_at = updated;
        let usage = self.usage_by_reply(&requests, &times);
        let start = out.messages.len();
        // The last reply's calls waiting for their results in the next user message: those
        // of the XML protocol in order, native ones by id.
        let mut pending: Vec<PendingCall> = Vec::new();
        let mut calls: HashMap<String, PendingCall> = HashMap::new();
        let mut models: BTreeMap<String, u64> = BTreeMap::new();
        for (i, m) in self.conversation.iter().enumerate() {
            let at = times[i];
            let key = &keys[i];
            report.records += 1;
            let blocks = blocks(m.get("content").unwrap_or(&Value::Null));
            let role = match str_of(m, "role") {
                Some("user") => Role::User,
                Some("assistant") => Role::Assistant,
                other => {
                    report.skip(format!("message:{}", other.unwrap_or("(no role)")));
                    continue;
                }
            };
            let mut msg = message(self.source, key, role, at);
            msg.is_summary = m.get("isSummary").and_then(Value::as_bool) == Some(true);
            let mut parts: Vec<Part> = Vec::new();
            let index = out.messages.len();
            if role == Role::Assistant {
                // Two replies in a row: the first one's calls got no result.
                interrupt(std::mem::take(&mut pending), &mut calls, out, at);
                for block in &blocks {
                    match str_of(block, "type").unwrap_or("") {
                        "text" => {
                            let said = split_reply(str_of(block, "text").unwrap_or(""));
                            if let Some(thought) = said.thinking {
                                parts.push(reasoning(thought, None, None));
                            }
                            if !said.text.is_empty() {
                                parts.push(text(said.text, false));
                            }
                            if let Some((name, input)) = said.call {
                                pending.push(PendingCall {
                                    message: index,
                                    part: parts.len(),
                                });
                                parts.push(tool(
                                    &format!("{key}:xml"),
                                    &name,
                                    input,
                                    ToolState::Running { started_at: at },
                                ));
                            }
                        }
                        "thinking" => parts.push(reasoning(
                            str_of(block, "thinking").unwrap_or(""),
                            str_of(block, "signature").map(str::to_owned),
                            None,
                        )),
                        "redacted_thinking" => {
                            parts.push(reasoning("", None, Some(block.clone())));
                        }
                        "tool_use" => {
                            let id = str_of(block, "id").unwrap_or("");
                            calls.insert(
                                id.to_owned(),
                                PendingCall {
                                    message: index,
                                    part: parts.len(),
                                },
                            );
                            parts.push(tool(
                                id,
                                str_of(block, "name").unwrap_or(""),
                                block.get("input").cloned().unwrap_or(Value::Null),
                                ToolState::Running { started_at: at },
                            ));
                        }
                        "image" | "document" => parts.push(media(block)),
                        _ => parts.push(Part::Unknown(block.clone())),
                    }
                }
                let info = &usage[i];
                let (meta_model, meta_provider) = self.model_at(at);
                let info_model = info.model.clone();
                msg.model = m
                    .pointer("/modelInfo/modelId")
                    .and_then(Value::as_str)
                    .map(str::to_owned)
                    .or(info_model)
                    .or(meta_model);
                msg.provider = m
                    .pointer("/modelInfo/providerId")
                    .and_then(Value::as_str)
                    .map(str::to_owned)
                    .or_else(|| info.provider.clone())
                    .or(meta_provider);
                if let Some(model) = &msg.model {
                    *models.entry(model.clone()).or_default() += 1;
                }
                msg.usage = info.usage;
                msg.error = info.error.clone();
            } else {
                // The previous reply's XML calls take the results in order, one a `[…]
                // Result:` header; what is not a result (the environment details, a header
                // with no call left) is the message's own.
                let mut waiting = std::mem::take(&mut pending).into_iter();
                let mut result: Option<Collecting> = None;
                for block in &blocks {
                    match str_of(block, "type").unwrap_or("") {
                        "text" => {
                            let s = str_of(block, "text").unwrap_or("");
                            let trimmed = s.trim();
                            let header = is_result_header(trimmed);
                            if header || trimmed.starts_with("<environment_details>") {
                                finish_result(result.take(), out, at);
                            }
                            if header && let Some(c) = waiting.next() {
                                result = Some(Collecting {
                                    call: c,
                                    texts: Vec::new(),
                                });
                            } else if header {
                                parts.push(text(s, true));
                            } else if let Some(r) = result.as_mut() {
                                r.texts.push(s.to_owned());
                            } else {
                                parts.push(user_text(s));
                            }
                        }
                        "tool_result" => {
                            let id = str_of(block, "tool_use_id").unwrap_or("");
                            match calls.remove(id) {
                                Some(c) => {
                                    let is_error = block.get("is_error").and_then(Value::as_bool)
                                        == Some(true);
                                    let output =
                                        content_text(block.get("content").unwrap_or(&Value::Null));
                                    settle(out, c, output, is_error, at);
                                }
                                None => report.skip("tool_result:without-call"),
                            }
                        }
                        "image" | "document" => parts.push(media(block)),
                        _ => parts.push(Part::Unknown(block.clone())),
                    }
                }
                finish_result(result, out, at);
                // A call this message did not answer never will be.
                interrupt(waiting, &mut calls, out, at);
            }
            for (n, part) in parts.into_iter().enumerate() {
                msg.parts.push(stored_part(
                    self.source,
                    key,
                    &n.to_string(),
                    n as i64,
                    part,
                    at,
                ));
            }
            out.messages.push(MessageRec {
                session: self.id.clone(),
                message: msg,
                api_calls: if role == Role::Assistant {
                    usage[i].requests.max(1)
                } else {
                    0
                },
                reported_cost: usage[i].cost,
                cost_flags: 0,
                cache_write_1h: 0,
            });
        }
        // The task's last reply: its completion stands as said; other calls still run.
        for c in pending.into_iter().chain(calls.into_values()) {
            let completion = out
                .messages
                .get(c.message)
                .and_then(|m| m.message.parts.get(c.part))
                .is_some_and(
                    |p| matches!(&p.part, Part::Tool(t) if t.tool == "attempt_completion"),
                );
            if completion {
                let at = out.messages[c.message].message.created_at;
                settle(out, c, String::new(), false, at);
            }
        }
        rec.model = models.into_iter().max_by_key(|(_, n)| *n).map(|(m, _)| m);
        let entry = |key: &str| {
            str_of(&self.history, key)
                .filter(|v| !v.trim().is_empty())
                .map(str::to_owned)
        };
        rec.title = entry("title").map(|t| (t, TitleRank::Source));
        rec.directory = entry("workspace").or_else(|| {
            out.messages[start..]
                .iter()
                .filter(|r| r.message.role == Role::User)
                .flat_map(|r| r.message.parts.iter())
                .find_map(|p| match &p.part {
                    Part::Text(t) => directory_of(&t.text),
                    _ => None,
                })
        });
        if let Some(parent) = entry("parentTaskId").filter(|p| *p != self.id) {
            rec.parent = Some(parent);
            rec.kind = SessionKind::Task;
        }
        out.sessions.push(rec);
    }

    /// What each conversation entry that is a reply cost: the requests of the UI log
    /// matched to replies by time.
    fn usage_by_reply(&self, requests: &[Request], times: &[i64]) -> Vec<ReplyUsage> {
        let mut usage: Vec<ReplyUsage> = (0..self.conversation.len())
            .map(|_| ReplyUsage::default())
            .collect();
        let replies: Vec<usize> = self
            .conversation
            .iter()
            .enumerate()
            .filter(|(_, m)| str_of(m, "role") == Some("assistant"))
            .map(|(i, _)| i)
            .collect();
        // A request goes to the first reply at or after it; what was spent apart from
        // requests, to the last reply before it (the first after, if none is).
        for r in requests {
            let after = replies.partition_point(|&i| times[i] < r.at);
            let reply = if r.spent && after > 0 {
                replies.get(after - 1)
            } else {
                replies.get(after)
            };
            if let Some(&reply) = reply {
                usage[reply].add(r);
            }
        }
        usage
    }
}

/// What the requests answered by one reply cost.
#[derive(Debug, Default)]
struct ReplyUsage {
    usage: TokenUsage,
    cost: Option<f64>,
    requests: i64,
    model: Option<String>,
    provider: Option<String>,
    error: Option<Value>,
}

impl ReplyUsage {
    fn add(&mut self, r: &Request) {
        let info = &r.info;
        let cache_read = int_of(info, "cacheReads");
        let cache_write = int_of(info, "cacheWrites");
        let mut input = int_of(info, "tokensIn");
        if str_of(info, "apiProtocol") == Some("openai") {
            input = (input - cache_read - cache_write).max(0);
        }
        self.usage.input += input;
        self.usage.output += int_of(info, "tokensOut");
        self.usage.cache_read += cache_read;
        self.usage.cache_write += cache_write;
        if let Some(cost) = info
            .get("cost")
            .and_then(Value::as_f64)
            .filter(|c| c.is_finite() && *c > 0.0)
        {
            *self.cost.get_or_insert(0.0) += cost;
        }
        if r.spent {
            return;
        }
        self.requests += 1;
        if r.model.is_some() {
            self.model.clone_from(&r.model);
        }
        if r.provider.is_some() {
            self.provider.clone_from(&r.provider);
        }
        // The last request decides: one that failed before a retry answered is no error
        // of the reply.
        self.error = str_of(info, "cancelReason").map(|reason| {
            serde_json::json!({
                "type": reason,
                "message": str_of(info, "streamingFailedMessage").unwrap_or(match reason {
                    "user_cancelled" => "cancelled by the user",
                    _ => "the response stream failed",
                }),
            })
        });
    }
}

/// A message's content as blocks (a string is one text block).
fn blocks(content: &Value) -> Vec<Value> {
    match content {
        Value::Array(items) => items.clone(),
        Value::String(s) => vec![serde_json::json!({"type": "text", "text": s})],
        _ => Vec::new(),
    }
}

/// `[read_file for 'src/main.rs'] Result:`: the header Cline writes before a tool's
/// result.
fn is_result_header(s: &str) -> bool {
    s.starts_with('[') && s.ends_with("] Result:") && !s.contains('\n')
}

/// Settles a call with the result collected for it, if one was.
fn finish_result(result: Option<Collecting>, out: &mut Batch, at: i64) {
    let Some(r) = result else {
        return;
    };
    let output = r.texts.join("\n");
    let trimmed = output.trim_start();
    let is_error = trimmed.starts_with("The tool execution failed")
        || trimmed.starts_with("The user denied this operation");
    settle(out, r.call, output, is_error, at);
}

/// Settles as failed the calls that a later message shows got no result.
fn interrupt(
    xml: impl IntoIterator<Item = PendingCall>,
    native: &mut HashMap<String, PendingCall>,
    out: &mut Batch,
    at: i64,
) {
    for c in xml.into_iter().chain(native.drain().map(|(_, c)| c)) {
        settle(
            out,
            c,
            "interrupted: the task went on without this call's result".to_owned(),
            true,
            at,
        );
    }
}

/// Settles the tool part of `call` with `output`.
fn settle(out: &mut Batch, call: PendingCall, output: String, is_error: bool, at: i64) {
    let Some(stored) = out
        .messages
        .get_mut(call.message)
        .and_then(|m| m.message.parts.get_mut(call.part))
    else {
        return;
    };
    let stored: &mut StoredPart = stored;
    if let Part::Tool(t) = &mut stored.part {
        let started = match t.state {
            ToolState::Running { started_at } => Some(started_at),
            _ => None,
        };
        t.state = settled(output, is_error, Value::Null, started, at);
        stored.updated_at = at;
    }
}

/// A user's text block: a wrapper the extension put around what the user typed is taken
/// off; what the extension wrote itself is synthetic.
fn user_text(s: &str) -> Part {
    if let Some(tags) = only_tags(s, &["task", "feedback", "answer", "user_message"])
        && tags.len() == 1
        && let Some(inner) = tags.values().next()
    {
        return text(inner.trim(), false);
    }
    let trimmed = s.trim_start();
    let added = trimmed.starts_with("[TASK RESUMPTION]")
        || trimmed.starts_with("[ERROR]")
        || trimmed.starts_with("<environment_details>");
    text(s, added)
}

/// The directory environment details name.
fn directory_of(s: &str) -> Option<String> {
    for label in [
        "# Current Working Directory (",
        "# Current Workspace Directory (",
    ] {
        if let Some((_, rest)) = s.split_once(label)
            && let Some((dir, _)) = rest.split_once(") Files")
            && !dir.is_empty()
            && !dir.contains('\n')
        {
            return Some(dir.to_owned());
        }
    }
    None
}

/// An assistant text block taken apart.
#[derive(Debug, PartialEq)]
struct Reply {
    thinking: Option<String>,
    text: String,
    /// A closing tool call: its name and parameters.
    call: Option<(String, Value)>,
}

/// Splits a reply into its leading `<thinking>`, its text and a closing XML tool call.
fn split_reply(s: &str) -> Reply {
    let mut rest = s.trim();
    let mut thinking = None;
    if let Some(after) = rest.strip_prefix("<thinking>")
        && let Some((inner, after)) = after.split_once("</thinking>")
    {
        thinking = Some(inner.trim().to_owned());
        rest = after.trim_start();
    }
    let mut call = None;
    if let Some((before, name, input)) = closing_call(rest) {
        call = Some((name.to_owned(), input));
        rest = before.trim_end();
    }
    Reply {
        thinking,
        text: rest.to_owned(),
        call,
    }
}

/// The text before a known tool's XML call that ends `s`, the tool and its parameters.
fn closing_call(s: &str) -> Option<(&str, &str, Value)> {
    let (head, closing) = s.rsplit_once("</")?;
    let name = closing.strip_suffix('>')?;
    if !XML_TOOLS.contains(&name) {
        return None;
    }
    let open = format!("<{name}>");
    // The call's own opening tag: the first one whose parameters parse to the end.
    let mut from = 0;
    while let Some(found) = head[from..].find(&open) {
        let start = from + found;
        if let Some(params) = parameters(&head[start + open.len()..]) {
            return Some((&s[..start], name, params));
        }
        from = start + open.len();
    }
    None
}

/// `<a>x</a><b>y</b>` (whitespace between) as `{"a": "x", "b": "y"}`; `None` unless the
/// whole of `s` is such a run.
fn parameters(s: &str) -> Option<Value> {
    let mut map = serde_json::Map::new();
    let mut rest = s.trim_start();
    while !rest.is_empty() {
        let (name, after) = rest.strip_prefix('<')?.split_once('>')?;
        if name.is_empty() || !name.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_') {
            return None;
        }
        let close = format!("</{name}>");
        let end = if VERBATIM.contains(&name) {
            after.rfind(&close)?
        } else {
            after.find(&close)?
        };
        let raw = &after[..end];
        let value = if VERBATIM.contains(&name) {
            let v = raw.strip_prefix('\n').unwrap_or(raw);
            v.strip_suffix('\n').unwrap_or(v)
        } else {
            raw.trim()
        };
        map.insert(name.to_owned(), Value::String(value.to_owned()));
        rest = after[end + close.len()..].trim_start();
    }
    Some(Value::Object(map))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_reply_is_split_into_its_thinking_text_and_closing_call() {
        let r = split_reply(
            "<thinking>\nLook first.\n</thinking>\n\nReading it.\n\n<read_file>\n<path>src/main.rs</path>\n</read_file>",
        );
        assert_eq!(r.thinking.as_deref(), Some("Look first."));
        assert_eq!(r.text, "Reading it.");
        assert_eq!(
            r.call,
            Some((
                "read_file".to_owned(),
                serde_json::json!({"path": "src/main.rs"})
            ))
        );
        // A file's text is kept as written, even holding a tag of its own name.
        let r = split_reply(
            "<write_to_file>\n<path>a.md</path>\n<content>\n  x </content> y\n</content>\n</write_to_file>",
        );
        assert_eq!(r.text, "");
        assert_eq!(
            r.call.unwrap().1,
            serde_json::json!({"path": "a.md", "content": "  x </content> y"})
        );
    }

    #[test]
    fn text_that_only_looks_like_a_call_stays_text() {
        for s in [
            "Use <b>bold</b>",
            "<read_file><path>x</path> and more</read_file>",
            "<read_file>\n<path>x</path>\n</read_file>\nThen this.",
            "<unknown_tool><a>1</a></unknown_tool>",
            "</read_file>",
        ] {
            let r = split_reply(s);
            assert_eq!(r.call, None, "{s}");
            assert_eq!(r.text, s.trim(), "{s}");
        }
    }

    #[test]
    fn user_text_is_unwrapped_or_marked_as_the_extensions() {
        match user_text("<task>\nFix the build\n</task>") {
            Part::Text(t) => assert_eq!((t.text.as_str(), t.synthetic), ("Fix the build", false)),
            other => panic!("{other:?}"),
        }
        for s in [
            "<environment_details>\n# x\n</environment_details>",
            "[TASK RESUMPTION] This task was interrupted",
            "[ERROR] You did not use a tool",
        ] {
            match user_text(s) {
                Part::Text(t) => assert!(t.synthetic, "{s}"),
                other => panic!("{other:?}"),
            }
        }
        assert_eq!(
            directory_of(
                "<environment_details>\n# Current Working Directory (/home/u/proj) Files\na.rs"
            ),
            Some("/home/u/proj".to_owned())
        );
        assert_eq!(
            directory_of("# Current Workspace Directory (c:/p) Files\n"),
            Some("c:/p".to_owned())
        );
        assert_eq!(directory_of("no details"), None);
    }
}
