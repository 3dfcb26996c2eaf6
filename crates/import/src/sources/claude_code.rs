//! Claude Code: `~/.claude/projects/<encoded-cwd>/<sessionId>.jsonl` (and
//! `~/.config/claude/projects`, or every root of `CLAUDE_CONFIG_DIR`, comma-separated).
//!
//! Mapping (FORMATS.md §1):
//! - one session per `<sessionId>.jsonl`; `agent-<id>.jsonl` beside it (2.0.28+) or under
//!   `<sessionId>/subagents/` (newer 2.x) is a task session under that parent; sidechain
//!   lines inside a session file (before 2.0.28) form a task session per sidechain root;
//! - an API response written as several lines (one per content block, same `message.id`
//!   and `requestId`) is one assistant message; its usage is taken once, from the line
//!   with the largest total (earlier lines carry a partial `output_tokens`). Lines of the
//!   same `message.id` separated by a user line are separate calls (a gateway or a fake
//!   model may reuse ids; `cost-state` confirms they are two calls);
//! - `tool_use` and its `tool_result` (arriving later, in any order, on user lines) are one
//!   tool part, completed or failed, with `toolUseResult` kept as metadata;
//! - a completed Task (or Agent) call names the sub-agent session it started in its
//!   metadata (`session_id`, as Scribe's own task tool does), a failed one in the tool
//!   part's own `session_id` field (an error state has no metadata): an inline sidechain is the
//!   one whose first prompt is the call's `prompt` (parallel calls interleave, so only the
//!   prompt tells them apart); an agent file is `agent-<agentId>` from the result's
//!   `toolUseResult.agentId`, or the `subagents/*.meta.json` whose `toolUseId` is the
//!   call; an inline sidechain takes the call's `description` as its title;
//! - usage: `input_tokens` (without cache), cache read, cache write (5m + 1h when the
//!   breakdown is there), output without `thinking_tokens`, which are reasoning;
//!   `<synthetic>` messages carry no model and no usage;
//! - a user line that is only Claude Code's command tags is kept as the user typed it: a
//!   slash command with its arguments (`/model opus`), a shell command (`!ls`); what a
//!   command printed (`<local-command-stdout>`, `<bash-stdout>`, …) is synthetic text, and
//!   none when it printed nothing;
//! - `compact_boundary` + the `isCompactSummary` user line: a summary message;
//! - a rewind (Esc-Esc, `/rewind`): the conversation is a tree of lines by `parentUuid`, and
//!   a prompt the user typed that answers the same line as an earlier typed prompt, at
//!   another time, starts a new branch; the earlier prompt and everything after it in the
//!   file's own conversation (not its sub-agents) is marked `rewound`, kept with its usage
//!   (those tokens were spent). The line a prompt answers is found through lines that are
//!   not conversation (hooks' attachments, the CLI's meta lines). A replay after a
//!   compaction writes its lines at one time and is no rewind (claude-code-log's
//!   `dev-docs/dag.md`, "Real rewind"); a prompt answering no line is never taken for one.
//!   Only the newest [`TURNS_KEPT`] prompts (and [`TURN_IDS_KEPT`] message ids) are
//!   remembered for it;
//! - titles: `custom-title` over `ai-title` over `summary`; a `summary` titles the session
//!   whose line its `leafUuid` names, which may be in another (earlier) file: each read
//!   records the file's leaf lines (uuids no later line names as its parent, the newest
//!   [`LEAVES_KEPT`]) with their sessions, and a summary naming a leaf not imported yet
//!   waits for it;
//! - a file whose first line answers a line of another session (`--resume`: its
//!   `parentUuid`, one of the leaves that session's file recorded) is that session's
//!   continuation, as is one that replays another's lines first; the replayed lines keep
//!   their ids and stay with the original.
//! - skipped, counted: `progress`, `queue-operation`, `file-history-snapshot`,
//!   `attachment` (except queued commands), `cost-state`, other metadata and unknown types.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use scribe_message::{CompactionPart, FinishReason, Part, Role, TokenUsage, ToolState};
use scribe_session::SessionKind;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::{
    FileReport, Importer, JsonLines, Unit, content_text, int_of, mark_undone, media, message,
    read_json_lines, reasoning, resume_after, resumed_carry, settled, stored_part, str_of, text,
    tool, walk,
};
use crate::Source;
use crate::env::Env;
use crate::error::Result;
use crate::record::{
    Batch, KeyMark, KeyTitle, MessageRec, PartUpdate, Resume, SessionRec, TaskLink, TitleRank,
};
use crate::time;

const SRC: Source = Source::ClaudeCode;

/// Leaf lines a reader remembers per file (uuid and session), for `summary` lines.
pub const LEAVES_KEPT: usize = 64;

/// Typed prompts a reader remembers per file (with the messages after each), for a later
/// rewind to one of them.
pub const TURNS_KEPT: usize = 100;

/// Message ids a reader remembers per file in those turns at the most: the oldest turns
/// are let go first (a file's carry is stored with it).
pub const TURN_IDS_KEPT: usize = 2_000;

/// Lines other than conversation a reader remembers per file (uuid and parent), to see
/// through them to the line a prompt answers: the lines a CLI writes between a reply and
/// the next prompt.
pub const HOPS_KEPT: usize = 64;

/// The Claude Code importer.
#[derive(Debug, Clone, Copy)]
pub struct ClaudeCode;

/// A tool call waiting for its result.
#[derive(Debug, Clone, Serialize, Deserialize)]
struct Call {
    session: String,
    message_id: String,
    part_id: String,
    position: i64,
    name: String,
    input: Value,
    started_at: i64,
}

/// The assistant response being read (it may continue in the next import).
#[derive(Debug, Clone, Serialize, Deserialize)]
struct Open {
    session: String,
    group: String,
    key: String,
    message_id: String,
    created_at: i64,
    updated_at: i64,
    next_position: i64,
    usage: TokenUsage,
    /// Of `usage.cache_write`, what was written for an hour (priced apart).
    #[serde(default)]
    hour_writes: i64,
    model: Option<String>,
    stop: Option<String>,
    error: Option<Value>,
    sidechain: bool,
}

/// What a reader remembers between imports of one file.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(default)]
struct Carry {
    session: Option<SessionHead>,
    open: Option<Open>,
    calls: BTreeMap<String, Call>,
    /// Sidechain line uuid → its sidechain's root uuid (inline sub-agents).
    roots: BTreeMap<String, String>,
    /// Sidechain sessions seen, by external id → first time.
    sidechains: BTreeMap<String, i64>,
    /// Task calls whose inline sidechain was found: call id → the sidechain's external id.
    tasks: BTreeMap<String, String>,
    /// Titles of inline sidechains (their Task call's description), by external id.
    side_titles: BTreeMap<String, String>,
    /// Conversation lines no later line names as its parent, oldest first: (uuid, the
    /// external id of their session).
    leaves: Vec<(String, String)>,
    compact: Option<bool>,
    last_at: i64,
    started: bool,
    /// The newest prompts the user typed in the file's own conversation, oldest first:
    /// what a rewind undoes.
    turns: Vec<Turn>,
    /// The newest lines that are not conversation (attachments, hooks, system lines, the
    /// CLI's meta lines), oldest first: (uuid, the line it names as its parent). A prompt
    /// may answer one of them rather than the line before it.
    hops: Vec<(String, Option<String>)>,
}

/// A prompt the user typed, and the messages from it to the next one.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
struct Turn {
    /// The line it answers (`parentUuid`; none for a conversation's first line).
    parent: Option<String>,
    /// When it was written.
    at: i64,
    /// The prompt's message id and those of the messages after it, in order.
    ids: Vec<String>,
}

/// What is known of the file's session so far.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
struct SessionHead {
    id: String,
    parent: Option<String>,
    task: bool,
    cwd: Option<String>,
    created_at: i64,
    updated_at: i64,
    models: BTreeMap<String, u64>,
    title: Option<(String, u8)>,
    agent_type: Option<String>,
    continues_from: Option<String>,
}

impl Importer for ClaudeCode {
    fn reads_state(&self) -> bool {
        false
    }

    fn source(&self) -> Source {
        SRC
    }

    fn default_roots(&self, env: &Env) -> Vec<PathBuf> {
        if let Some(dirs) = env.paths("CLAUDE_CONFIG_DIR") {
            return dirs.into_iter().map(|d| d.join("projects")).collect();
        }
        let mut roots = Vec::new();
        let xdg = env
            .var("XDG_CONFIG_HOME")
            .map(PathBuf::from)
            .or_else(|| env.home_join(".config"));
        if let Some(xdg) = xdg {
            roots.push(xdg.join("claude/projects"));
        }
        roots.extend(env.home_join(".claude/projects"));
        roots
    }

    fn discover(&self, root: &Path, out: &mut Vec<PathBuf>) -> Result<()> {
        walk(root, out, |p| p.extension().is_some_and(|e| e == "jsonl"))
    }

    fn read(&self, unit: &Unit<'_>, out: &mut Batch, report: &mut FileReport) -> Result<Resume> {
        let mut carry: Carry = resumed_carry(unit);
        if carry.session.is_none() {
            carry.session = Some(head_for(unit.path));
        }
        if carry.last_at == 0 {
            carry.last_at = unit.mtime_ms;
        }
        let mut reader = Reader {
            carry,
            out,
            report,
            path: unit.path,
            emitted: BTreeMap::new(),
            keys: std::collections::HashSet::new(),
            line: 0,
            agents: None,
            current: String::new(),
            answers: None,
        };
        let chunk = read_json_lines(unit, &mut reader)?;
        reader.close_open(false);
        Ok(resume_after(&chunk, &reader.finish()))
    }
}

impl JsonLines for Reader<'_> {
    fn report(&mut self) -> &mut FileReport {
        self.report
    }

    fn read_line(&mut self, number: u64, value: &Value) {
        self.line = number;
        self.line(value);
    }
}

/// The session a file holds, from its path.
fn head_for(path: &Path) -> SessionHead {
    let stem = path
        .file_stem()
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_default();
    let mut head = SessionHead {
        id: stem.clone(),
        ..SessionHead::default()
    };
    if stem.starts_with("agent-") {
        head.task = true;
        // <sessionId>/subagents/agent-<id>.jsonl
        let parent_dir = path.parent();
        if parent_dir
            .and_then(Path::file_name)
            .is_some_and(|n| n == "subagents")
        {
            head.parent = parent_dir
                .and_then(Path::parent)
                .and_then(Path::file_name)
                .map(|n| n.to_string_lossy().into_owned());
        }
        let meta = path.with_extension("meta.json");
        if let Ok(text) = std::fs::read_to_string(meta)
            && let Ok(meta) = serde_json::from_str::<Value>(&text)
        {
            head.agent_type = str_of(&meta, "agentType").map(str::to_owned);
            if let Some(desc) = str_of(&meta, "description") {
                head.title = Some((desc.to_owned(), TitleRank::Source as u8));
            }
        }
    }
    head
}

struct Reader<'a> {
    carry: Carry,
    out: &'a mut Batch,
    report: &'a mut FileReport,
    path: &'a Path,
    /// Message id → index in `out.messages`, for results of calls read in this import.
    emitted: BTreeMap<String, usize>,
    /// Keys given to messages in this import, and the line being read: a key seen twice
    /// (sanitized files repeat placeholder uuids) gets the line number added.
    keys: std::collections::HashSet<String>,
    line: u64,
    /// The agent files under this session's `subagents/`: the Task call (`toolUseId` of
    /// their `.meta.json`) → the agent's external id; read when first needed.
    agents: Option<BTreeMap<String, String>>,
    /// The session of the conversation line being read.
    current: String,
    /// The line the first line of this read in the file's own conversation answers
    /// (`parentUuid`), once one was read ([`SessionRec::answers`]).
    answers: Option<Option<String>>,
}

/// Whether `name` is Claude Code's sub-agent tool (Task, renamed Agent).
fn is_task_tool(name: &str) -> bool {
    name == "Task" || name == "Agent"
}

impl Reader<'_> {
    fn head(&mut self) -> &mut SessionHead {
        self.carry.session.get_or_insert_with(SessionHead::default)
    }

    fn line(&mut self, v: &Value) {
        let kind = str_of(v, "type").unwrap_or("");
        let at = str_of(v, "timestamp").and_then(time::parse);
        if let Some(at) = at {
            self.carry.last_at = at;
        }
        let at = at.unwrap_or(self.carry.last_at);
        if kind != "user" && kind != "assistant" {
            self.hop(v);
        }
        match kind {
            "user" | "assistant" => {
                self.touch(v, at);
                if kind == "assistant" {
                    self.assistant(v, at);
                } else {
                    self.user(v, at);
                }
                self.leaf(v);
                self.report.records += 1;
            }
            "summary" => {
                if let Some(s) = str_of(v, "summary") {
                    match str_of(v, "leafUuid").filter(|l| !l.is_empty()) {
                        Some(leaf) => self.summary(leaf, s),
                        None => self.title(s, TitleRank::Summary),
                    }
                }
                self.report.records += 1;
            }
            "custom-title" => {
                if let Some(s) = str_of(v, "customTitle") {
                    self.title(s, TitleRank::User);
                }
                self.report.records += 1;
            }
            "ai-title" => {
                if let Some(s) = str_of(v, "aiTitle") {
                    self.title(s, TitleRank::Ai);
                }
                self.report.records += 1;
            }
            "system" => {
                let subtype = str_of(v, "subtype").unwrap_or("");
                if subtype == "compact_boundary" {
                    let trigger = v
                        .pointer("/compactMetadata/trigger")
                        .and_then(Value::as_str)
                        .unwrap_or("");
                    self.carry.compact = Some(trigger == "auto");
                    self.report.records += 1;
                } else {
                    self.report.skip(format!("system:{subtype}"));
                }
            }
            "attachment" => {
                let atype = v
                    .pointer("/attachment/type")
                    .and_then(Value::as_str)
                    .unwrap_or("");
                if atype == "queued_command"
                    && let Some(prompt) = v
                        .pointer("/attachment/prompt")
                        .map(content_text)
                        .filter(|p| !p.trim().is_empty())
                {
                    self.touch(v, at);
                    self.close_open(true);
                    let key = self.unique(str_of(v, "uuid").unwrap_or("").to_owned());
                    let session = self.session_of(v);
                    let mut m = message(SRC, &key, Role::User, at);
                    m.parts
                        .push(stored_part(SRC, &key, "0", 0, text(prompt, false), at));
                    self.emit(session, m, 0);
                    self.report.records += 1;
                } else {
                    self.report.skip(format!("attachment:{atype}"));
                }
            }
            "" => self.report.skip("(no type)"),
            other => self.report.skip(other),
        }
    }

    /// Session bookkeeping common to conversational lines.
    fn touch(&mut self, v: &Value, at: i64) {
        let cwd = str_of(v, "cwd").map(str::to_owned);
        let first = !self.carry.started;
        self.carry.started = true;
        let parent_uuid = str_of(v, "parentUuid").map(str::to_owned);
        let head = self.head();
        if head.cwd.is_none() {
            head.cwd = cwd;
        }
        if head.created_at == 0 || at < head.created_at {
            head.created_at = at;
        }
        head.updated_at = head.updated_at.max(at);
        // A session file whose first line answers a line it does not hold continues
        // another session (`--resume`); an agent file's root is its parent's tool call.
        // The line answered is named by its uuid, which the earlier file recorded as one
        // of its leaves (a message's id holds its own time, which this line cannot know).
        let parent_uuid = parent_uuid.filter(|p| !p.is_empty());
        if first && !head.task {
            head.continues_from.clone_from(&parent_uuid);
        }
        // Not a sidechain's line: it answers its own sub-agent's lines.
        let sidechain = v.get("isSidechain").and_then(Value::as_bool) == Some(true);
        if self.answers.is_none() && !sidechain && !self.head().task {
            self.answers = Some(parent_uuid);
        }
    }

    /// Notes the line just read as a leaf, and its parent as one no longer.
    fn leaf(&mut self, v: &Value) {
        let Some(uuid) = str_of(v, "uuid").filter(|u| !u.is_empty()) else {
            return;
        };
        let leaves = &mut self.carry.leaves;
        if let Some(parent) = str_of(v, "parentUuid") {
            leaves.retain(|(u, _)| u != parent);
        }
        leaves.retain(|(u, _)| u != uuid);
        leaves.push((uuid.to_owned(), self.current.clone()));
        if leaves.len() > LEAVES_KEPT {
            leaves.remove(0);
        }
    }

    /// A `summary` titling the session that holds line `leaf`: one of this file's when
    /// the leaf was read here, else whichever imported it (or will).
    fn summary(&mut self, leaf: &str, title: &str) {
        if let Some((_, session)) = self.carry.leaves.iter().find(|(u, _)| u == leaf) {
            self.out.keys.push(KeyMark {
                key: leaf.to_owned(),
                session: session.clone(),
            });
        }
        self.out.key_titles.push(KeyTitle {
            key: leaf.to_owned(),
            title: title.to_owned(),
            rank: TitleRank::Summary,
        });
    }

    fn title(&mut self, title: &str, rank: TitleRank) {
        let head = self.head();
        let stronger = head.title.as_ref().is_none_or(|(_, r)| rank as u8 >= *r);
        if stronger && !title.trim().is_empty() {
            head.title = Some((title.to_owned(), rank as u8));
        }
    }

    /// The external id of the session a line belongs to: the file's, or for a sidechain
    /// line of a session file, its sidechain's.
    fn session_of(&mut self, v: &Value) -> String {
        let id = self.line_session(v);
        self.current.clone_from(&id);
        id
    }

    fn line_session(&mut self, v: &Value) -> String {
        let head_id = self.head().id.clone();
        let task = self.head().task;
        let sidechain = v.get("isSidechain").and_then(Value::as_bool) == Some(true);
        if task || !sidechain {
            return head_id;
        }
        let uuid = str_of(v, "uuid").unwrap_or("").to_owned();
        let root = str_of(v, "parentUuid")
            .and_then(|p| self.carry.roots.get(p).cloned())
            .unwrap_or_else(|| uuid.clone());
        if !uuid.is_empty() {
            self.carry.roots.insert(uuid, root.clone());
        }
        let id = format!("{head_id}:sidechain:{root}");
        let at = self.carry.last_at;
        if let std::collections::btree_map::Entry::Vacant(e) =
            self.carry.sidechains.entry(id.clone())
        {
            e.insert(at);
            if str_of(v, "type") == Some("user") {
                let prompt = v
                    .pointer("/message/content")
                    .map(content_text)
                    .unwrap_or_default();
                self.match_task(&head_id, &id, &prompt);
            }
        }
        id
    }

    /// Finds the Task call of `session` that started the inline sidechain `child`, whose
    /// first prompt is `prompt`: the earliest unmatched call with that prompt.
    fn match_task(&mut self, session: &str, child: &str, prompt: &str) {
        let prompt = prompt.trim();
        if prompt.is_empty() {
            return;
        }
        let matched: Vec<&String> = self.carry.tasks.keys().collect();
        let call = self
            .carry
            .calls
            .iter()
            .filter(|(id, c)| {
                is_task_tool(&c.name)
                    && c.session == session
                    && !matched.contains(id)
                    && str_of(&c.input, "prompt").map(str::trim) == Some(prompt)
            })
            .min_by_key(|(_, c)| (c.started_at, c.position))
            .map(|(id, c)| {
                (
                    id.clone(),
                    str_of(&c.input, "description").map(str::to_owned),
                )
            });
        if let Some((call_id, description)) = call {
            self.carry.tasks.insert(call_id, child.to_owned());
            if let Some(title) = description.filter(|d| !d.trim().is_empty()) {
                self.carry.side_titles.insert(child.to_owned(), title);
            }
        }
    }

    /// The external id of the session Task call `call_id` started, from what the file
    /// says: its inline sidechain, the result's `agentId`, or the `subagents/` meta file
    /// naming the call.
    fn task_child(&mut self, call_id: &str, line: &Value) -> Option<String> {
        if let Some(child) = self.carry.tasks.remove(call_id) {
            return Some(child);
        }
        if let Some(agent) = line
            .pointer("/toolUseResult/agentId")
            .and_then(Value::as_str)
            .filter(|a| !a.is_empty())
        {
            return Some(format!("agent-{agent}"));
        }
        if self.agents.is_none() {
            let dir = self
                .path
                .parent()
                .map(|p| p.join(&self.head().id).join("subagents"));
            self.agents = Some(dir.map(|d| agent_metas(&d)).unwrap_or_default());
        }
        self.agents.as_ref()?.get(call_id).cloned()
    }

    /// `key`, or `key@line` when a message of this import already has it.
    fn unique(&mut self, key: String) -> String {
        if self.keys.insert(key.clone()) {
            key
        } else {
            let key = format!("{key}@{}", self.line);
            self.keys.insert(key.clone());
            key
        }
    }

    fn emit(&mut self, session: String, m: scribe_message::Message, api_calls: i64) {
        if self.is_own(&session)
            && let Some(turn) = self.carry.turns.last_mut()
            && turn.ids.last() != Some(&m.id)
        {
            turn.ids.push(m.id.clone());
            let turns = &mut self.carry.turns;
            while turns.len() > 1
                && turns.iter().map(|t| t.ids.len()).sum::<usize>() > TURN_IDS_KEPT
            {
                turns.remove(0);
            }
        }
        self.emitted.insert(m.id.clone(), self.out.messages.len());
        self.out.messages.push(MessageRec {
            session,
            message: m,
            api_calls,
            reported_cost: None,
            cost_flags: 0,
            cache_write_1h: 0,
        });
    }

    fn assistant(&mut self, v: &Value, at: i64) {
        let session = self.session_of(v);
        let msg = v.get("message").cloned().unwrap_or(Value::Null);
        let mid = str_of(&msg, "id").unwrap_or("");
        let rid = str_of(v, "requestId").unwrap_or("");
        let uuid = str_of(v, "uuid").unwrap_or("").to_owned();
        let group = format!("{mid}\u{1f}{rid}");
        let model = str_of(&msg, "model")
            .filter(|m| *m != "<synthetic>")
            .map(str::to_owned);
        let continues = !mid.is_empty()
            && self
                .carry
                .open
                .as_ref()
                .is_some_and(|o| o.group == group && o.session == session);
        if !continues {
            self.close_open(true);
            let key = if uuid.is_empty() { group.clone() } else { uuid };
            let key = self.unique(key);
            self.carry.open = Some(Open {
                session: session.clone(),
                group,
                message_id: crate::ids::message_id(SRC, &key, at),
                key,
                created_at: at,
                updated_at: at,
                next_position: 0,
                usage: TokenUsage::default(),
                hour_writes: 0,
                model: None,
                stop: None,
                error: None,
                sidechain: session != self.head().id,
            });
            // A new API response is a model call.
            if let Some(m) = &model {
                *self.head().models.entry(m.clone()).or_default() += 1;
            }
        }
        let usage = msg.get("usage").map(usage_of).unwrap_or_default();
        let hour_writes = msg
            .pointer("/usage/cache_creation")
            .map_or(0, |c| int_of(c, "ephemeral_1h_input_tokens"));
        let is_error = v.get("isApiErrorMessage").and_then(Value::as_bool) == Some(true);
        let error = if is_error {
            Some(
                v.get("error")
                    .cloned()
                    .unwrap_or_else(|| Value::String("api error".into())),
            )
        } else {
            None
        };
        let Some(open) = self.carry.open.as_mut() else {
            return;
        };
        open.updated_at = open.updated_at.max(at);
        // Each line repeats the response's usage; the one with the largest total is final.
        if usage.total() >= open.usage.total() {
            open.usage = usage;
            open.hour_writes = hour_writes;
        }
        if model.is_some() {
            open.model = model;
        }
        if let Some(stop) = str_of(&msg, "stop_reason") {
            open.stop = Some(stop.to_owned());
        }
        if error.is_some() {
            open.error = error;
        }
        let (message_id, key, session, mut position) = (
            open.message_id.clone(),
            open.key.clone(),
            open.session.clone(),
            open.next_position,
        );
        let blocks = match msg.get("content") {
            Some(Value::Array(blocks)) => blocks.clone(),
            Some(Value::String(s)) => vec![serde_json::json!({"type": "text", "text": s})],
            _ => Vec::new(),
        };
        let mut parts = Vec::new();
        for block in &blocks {
            let part_key = format!("{}:{position}", str_of(v, "uuid").unwrap_or(""));
            let part = match str_of(block, "type").unwrap_or("") {
                "text" => text(str_of(block, "text").unwrap_or(""), false),
                "thinking" => reasoning(
                    str_of(block, "thinking").unwrap_or(""),
                    str_of(block, "signature").map(str::to_owned),
                    None,
                ),
                "redacted_thinking" => reasoning("", None, Some(block.clone())),
                "tool_use" => {
                    let call_id = str_of(block, "id").unwrap_or("").to_owned();
                    let name = str_of(block, "name").unwrap_or("").to_owned();
                    let input = block.get("input").cloned().unwrap_or(Value::Null);
                    let part_id = crate::ids::part_id(SRC, &key, &call_id, at);
                    self.carry.calls.insert(
                        call_id.clone(),
                        Call {
                            session: session.clone(),
                            message_id: message_id.clone(),
                            part_id: part_id.clone(),
                            position,
                            name: name.clone(),
                            input: input.clone(),
                            started_at: at,
                        },
                    );
                    parts.push(scribe_message::StoredPart {
                        id: part_id,
                        position,
                        part: tool(
                            &call_id,
                            &name,
                            input,
                            ToolState::Running { started_at: at },
                        ),
                        created_at: at,
                        updated_at: at,
                    });
                    position += 1;
                    continue;
                }
                // Server tools, fallbacks and blocks of newer versions: kept as they are.
                _ => Part::Unknown(block.clone()),
            };
            parts.push(stored_part(SRC, &key, &part_key, position, part, at));
            position += 1;
        }
        if let Some(open) = self.carry.open.as_mut() {
            open.next_position = position;
        }
        self.push_open_parts(parts);
    }

    /// Adds parts to the open response's message in this import's output.
    fn push_open_parts(&mut self, parts: Vec<scribe_message::StoredPart>) {
        let Some(open) = self.carry.open.clone() else {
            return;
        };
        let m = self.open_message(&open);
        match self.emitted.get(&open.message_id).copied() {
            Some(i) => {
                let rec = &mut self.out.messages[i];
                let mut kept = std::mem::take(&mut rec.message.parts);
                kept.extend(parts);
                rec.message = m;
                rec.message.parts = kept;
                rec.cache_write_1h = open.hour_writes;
            }
            None => {
                let mut m = m;
                m.parts = parts;
                // One model call; the sink counts it only when the message is new.
                self.emit(open.session.clone(), m, 1);
                if let Some(rec) = self.out.messages.last_mut() {
                    rec.cache_write_1h = open.hour_writes;
                }
            }
        }
    }

    /// The open response as a message without parts.
    fn open_message(&self, open: &Open) -> scribe_message::Message {
        let mut m = message(SRC, &open.key, Role::Assistant, open.created_at);
        m.id.clone_from(&open.message_id);
        m.updated_at = open.updated_at;
        m.model.clone_from(&open.model);
        m.provider = open.model.as_ref().map(|_| "anthropic".to_owned());
        m.usage = open.usage;
        m.error.clone_from(&open.error);
        m.finish_reason = open.stop.as_deref().map(finish_reason);
        if m.finish_reason.is_some() {
            m.finished_at = Some(open.updated_at);
        }
        if let Some(agent) = self
            .carry
            .session
            .as_ref()
            .and_then(|h| h.agent_type.clone())
        {
            m.agent = Some(agent);
        }
        m
    }

    /// Ends the open response (when `for_good`, so the next line starts a new one).
    fn close_open(&mut self, for_good: bool) {
        if for_good {
            self.carry.open = None;
        }
    }

    fn user(&mut self, v: &Value, at: i64) {
        // A user line (a prompt or a tool result) ends the response before it.
        self.close_open(true);
        let session = self.session_of(v);
        let msg = v.get("message").cloned().unwrap_or(Value::Null);
        let content = msg.get("content").cloned().unwrap_or(Value::Null);
        let uuid = str_of(v, "uuid").unwrap_or("").to_owned();
        let meta = v.get("isMeta").and_then(Value::as_bool) == Some(true);
        let mut parts: Vec<Part> = Vec::new();
        let mut results = 0;
        match &content {
            Value::String(s) => parts.extend(user_text(s, meta)),
            Value::Array(blocks) => {
                for block in blocks {
                    match str_of(block, "type").unwrap_or("") {
                        "text" => {
                            parts.extend(user_text(str_of(block, "text").unwrap_or(""), meta))
                        }
                        "tool_result" => {
                            results += 1;
                            self.tool_result(v, block, at);
                        }
                        "image" | "document" => parts.push(media(block)),
                        _ => parts.push(Part::Unknown(block.clone())),
                    }
                }
            }
            _ => {}
        }
        if parts.is_empty() {
            if results == 0 {
                self.report.skip("user:empty");
                self.hop(v);
            }
            return;
        }
        self.close_open(true);
        let summary = v.get("isCompactSummary").and_then(Value::as_bool) == Some(true);
        let key = if uuid.is_empty() {
            format!("{}:{at}", self.head().id)
        } else {
            uuid
        };
        let key = self.unique(key);
        let role = if summary { Role::Assistant } else { Role::User };
        let mut m = message(SRC, &key, role, at);
        let mut position = 0;
        if summary {
            m.is_summary = true;
            let auto = self.carry.compact.take().unwrap_or(false);
            let part = Part::Compaction(CompactionPart {
                auto,
                ..CompactionPart::default()
            });
            m.parts
                .push(stored_part(SRC, &key, "compaction", 0, part, at));
            position = 1;
        }
        for (i, part) in parts.into_iter().enumerate() {
            m.parts
                .push(stored_part(SRC, &key, &i.to_string(), position, part, at));
            position += 1;
        }
        if let Some(agent) = self
            .carry
            .session
            .as_ref()
            .and_then(|h| h.agent_type.clone())
        {
            m.agent = Some(agent);
        }
        let typed = !summary
            && results == 0
            && m.parts
                .iter()
                .any(|p| matches!(&p.part, Part::Text(t) if !t.synthetic));
        if !typed && !summary && results == 0 {
            self.hop(v);
        }
        if typed && self.is_own(&session) {
            let parent = self.answered(v);
            self.rewind(parent.as_deref(), at);
            let turns = &mut self.carry.turns;
            turns.push(Turn {
                parent,
                at,
                ids: Vec::new(),
            });
            if turns.len() > TURNS_KEPT {
                turns.remove(0);
            }
        }
        self.emit(session, m, 0);
    }

    /// Whether `session` is the file's own conversation (not an inline sub-agent's, and
    /// not a sub-agent's file): the one whose prompts the user types and rewinds.
    fn is_own(&mut self, session: &str) -> bool {
        let head = self.head();
        !head.task && head.id == session
    }

    /// Notes line `v` as one that is not conversation, for [`answered`](Self::answered).
    fn hop(&mut self, v: &Value) {
        let Some(uuid) = str_of(v, "uuid").filter(|u| !u.is_empty()) else {
            return;
        };
        let parent = str_of(v, "parentUuid")
            .filter(|p| !p.is_empty())
            .map(str::to_owned);
        let hops = &mut self.carry.hops;
        hops.push((uuid.to_owned(), parent));
        if hops.len() > HOPS_KEPT {
            hops.remove(0);
        }
    }

    /// The line prompt `v` answers: its parent, or that line's parent while the parent is
    /// not conversation (a hook's attachment, the CLI's meta line before a command).
    fn answered(&self, v: &Value) -> Option<String> {
        let mut at = str_of(v, "parentUuid")
            .filter(|p| !p.is_empty())
            .map(str::to_owned);
        for _ in 0..HOPS_KEPT {
            let Some(hop) = at
                .as_deref()
                .and_then(|u| self.carry.hops.iter().rfind(|(h, _)| h == u))
            else {
                break;
            };
            at.clone_from(&hop.1);
        }
        at
    }

    /// A typed prompt answering line `parent` at `at`: when an earlier typed prompt
    /// answered the same line at another time, the user rewound to before it, and it and
    /// every message after it are marked as undone (stored ones by a mark). A prompt that
    /// answers no line (a conversation's first, or one after a compaction's boundary) is
    /// never taken for a rewind: roots are not told apart.
    fn rewind(&mut self, parent: Option<&str>, at: i64) {
        let Some(parent) = parent else {
            return;
        };
        let Some(from) = self
            .carry
            .turns
            .iter()
            .position(|t| t.parent.as_deref() == Some(parent) && t.at != at)
        else {
            return;
        };
        let error = serde_json::json!({
            "type": "rewound",
            "message": "undone by a rewind in Claude Code",
            "at": at,
        });
        let session = self.head().id.clone();
        let undone: Vec<String> = self.carry.turns.drain(from..).flat_map(|t| t.ids).collect();
        mark_undone(self.out, &self.emitted, &session, undone, &error);
    }

    fn tool_result(&mut self, line: &Value, block: &Value, at: i64) {
        let id = str_of(block, "tool_use_id").unwrap_or("");
        let Some(call) = self.carry.calls.remove(id) else {
            self.report.skip("tool_result:without-call");
            return;
        };
        let is_error = block.get("is_error").and_then(Value::as_bool) == Some(true);
        let output = content_text(block.get("content").unwrap_or(&Value::Null));
        let metadata = line.get("toolUseResult").cloned().unwrap_or(Value::Null);
        let state = settled(output, is_error, metadata, Some(call.started_at), at);
        let part = tool(id, &call.name, call.input.clone(), state);
        // A call that failed (interrupted, refused, the sub-agent erred) may still have
        // started its sub-agent: it is linked the same way (its sidechain's prompt, the
        // `subagents/` meta file, an `agentId` when the result carries one).
        if is_task_tool(&call.name)
            && let Some(child) = self.task_child(id, line)
        {
            self.out.task_links.push(TaskLink {
                part_id: call.part_id.clone(),
                child,
            });
        }
        if let Some(i) = self.emitted.get(&call.message_id).copied()
            && let Some(p) = self.out.messages[i]
                .message
                .parts
                .iter_mut()
                .find(|p| p.id == call.part_id)
        {
            p.part = part;
            p.updated_at = at;
            return;
        }
        self.out.part_updates.push(PartUpdate {
            session: call.session,
            message_id: call.message_id,
            part_id: call.part_id,
            part,
            position: call.position,
            at,
        });
    }

    /// Emits the sessions touched and returns the state to carry.
    fn finish(self) -> Carry {
        let Some(head) = self.carry.session.clone() else {
            return self.carry;
        };
        if !self.carry.started {
            return self.carry;
        }
        let mut rec = SessionRec::new(head.id.clone(), head.created_at);
        rec.updated_at = head.updated_at;
        rec.directory = head.cwd.clone();
        rec.model = head
            .models
            .iter()
            .max_by_key(|(m, n)| (**n, std::cmp::Reverse((*m).clone())))
            .map(|(m, _)| m.clone());
        rec.title = head
            .title
            .as_ref()
            .and_then(|(t, r)| Some((t.clone(), rank(*r)?)));
        rec.continues_from = head.continues_from.clone();
        rec.answers = self.answers.clone().flatten();
        if head.task {
            rec.kind = SessionKind::Task;
            rec.parent = head.parent.clone().or_else(|| self.first_session_id());
        }
        let mut sessions = vec![rec];
        for (id, created) in &self.carry.sidechains {
            let mut side = SessionRec::new(id.clone(), *created);
            side.updated_at = head.updated_at;
            side.kind = SessionKind::Task;
            side.parent = Some(head.id.clone());
            side.directory = head.cwd.clone();
            side.title = self
                .carry
                .side_titles
                .get(id)
                .map(|t| (t.clone(), TitleRank::Source));
            sessions.push(side);
        }
        for (key, session) in &self.carry.leaves {
            self.out.keys.push(KeyMark {
                key: key.clone(),
                session: session.clone(),
            });
        }
        // Parents first: this batch's sessions go before any that reference them.
        let mut batch_sessions = std::mem::take(&mut self.out.sessions);
        batch_sessions.extend(sessions);
        self.out.sessions = batch_sessions;
        let _ = self.path;
        self.carry
    }

    /// The `sessionId` an agent file's lines name (its parent in the 2.0.28 layout).
    fn first_session_id(&self) -> Option<String> {
        let text = std::fs::read_to_string(self.path).ok()?;
        let first = text
            .lines()
            .find_map(|l| serde_json::from_str::<Value>(l).ok())?;
        let sid = str_of(&first, "sessionId")?;
        let own = self.carry.session.as_ref().map(|h| h.id.as_str());
        (Some(sid) != own).then(|| sid.to_owned())
    }
}

/// The agent files in a session's `subagents/` directory, by the Task call their
/// `.meta.json` names (`toolUseId`): call id → the agent's external id (its file stem).
fn agent_metas(dir: &Path) -> BTreeMap<String, String> {
    let mut out = BTreeMap::new();
    let Ok(entries) = std::fs::read_dir(dir) else {
        return out;
    };
    for entry in entries.flatten() {
        let name = entry.file_name().to_string_lossy().into_owned();
        let Some(agent) = name.strip_suffix(".meta.json") else {
            continue;
        };
        if let Ok(text) = std::fs::read_to_string(entry.path())
            && let Ok(meta) = serde_json::from_str::<Value>(&text)
            && let Some(call) = str_of(&meta, "toolUseId")
        {
            out.insert(call.to_owned(), agent.to_owned());
        }
    }
    out
}

fn rank(r: u8) -> Option<TitleRank> {
    Some(match r {
        1 => TitleRank::Summary,
        2 => TitleRank::Source,
        3 => TitleRank::Ai,
        4 => TitleRank::User,
        _ => return None,
    })
}

/// Claude usage as Scribe's disjoint buckets.
fn usage_of(u: &Value) -> TokenUsage {
    let split = u.get("cache_creation").map(|c| {
        // Saturating: two counts near i64::MAX in a hand-edited file overflowed.
        int_of(c, "ephemeral_5m_input_tokens")
            .saturating_add(int_of(c, "ephemeral_1h_input_tokens"))
    });
    let cache_write = match split {
        Some(n) if n > 0 => n,
        _ => int_of(u, "cache_creation_input_tokens"),
    };
    let output = int_of(u, "output_tokens");
    let thinking = u
        .get("output_tokens_details")
        .map_or(0, |d| int_of(d, "thinking_tokens"))
        .min(output);
    TokenUsage {
        input: int_of(u, "input_tokens"),
        output: output - thinking,
        cache_read: int_of(u, "cache_read_input_tokens"),
        cache_write,
        reasoning: thinking,
    }
}

fn finish_reason(stop: &str) -> FinishReason {
    match stop {
        "end_turn" | "stop_sequence" => FinishReason::EndTurn,
        "tool_use" => FinishReason::ToolUse,
        "max_tokens" => FinishReason::MaxTokens,
        "refusal" => FinishReason::Error,
        other => FinishReason::Unknown(other.to_owned()),
    }
}

/// A user line's text as Scribe keeps it: a command Claude Code wrapped in its tags reads
/// as the user typed it, its output as synthetic text (what the user did not type), and
/// an output that printed nothing is no part; any other text is kept as it is.
fn user_text(s: &str, meta: bool) -> Option<Part> {
    match command(s) {
        Some(Command::Typed(typed)) => Some(text(typed, meta)),
        Some(Command::Output(out)) if out.is_empty() => None,
        Some(Command::Output(out)) => Some(text(out, true)),
        None => Some(text(s, meta)),
    }
}

/// What a text made only of Claude Code's command tags stands for.
#[derive(Debug, PartialEq)]
enum Command {
    /// What the user typed: a slash command with its arguments (`/model opus`, from
    /// `<command-name>` and `<command-args>`; `<command-message>` is the CLI's status
    /// line for it) or a shell command (`!ls`, from `<bash-input>`).
    Typed(String),
    /// What ran printed (`<local-command-stdout>`, `<bash-stdout>`, their `-stderr`, the
    /// stderr after the stdout) or the caveat the CLI puts before such lines.
    Output(String),
}

/// The tags Claude Code writes around a command and its output.
const COMMAND_TAGS: [&str; 9] = [
    "command-name",
    "command-message",
    "command-args",
    "local-command-stdout",
    "local-command-stderr",
    "local-command-caveat",
    "bash-input",
    "bash-stdout",
    "bash-stderr",
];

/// `s` read as Claude Code's command tags (daaain/claude-code-log's `dev-docs/messages.md`
/// lists them): `None` unless the whole text, spaces aside, is one or more of
/// [`COMMAND_TAGS`], each closed, so a prompt that only mentions a tag stays as written.
fn command(s: &str) -> Option<Command> {
    let tags = super::only_tags(s, &COMMAND_TAGS)?;
    let tag = |name: &str| tags.get(name).map_or("", |t| t.trim());
    if let Some(name) = tags.get("command-name").map(|n| n.trim()) {
        let name = if name.starts_with('/') {
            name.to_owned()
        } else {
            format!("/{name}")
        };
        let args = tag("command-args");
        return Some(Command::Typed(if args.is_empty() {
            name
        } else {
            format!("{name} {args}")
        }));
    }
    if tags.contains_key("bash-input") {
        return Some(Command::Typed(format!("!{}", tag("bash-input"))));
    }
    let printed: Vec<&str> = [
        "local-command-stdout",
        "bash-stdout",
        "local-command-stderr",
        "bash-stderr",
        "local-command-caveat",
    ]
    .into_iter()
    .map(tag)
    .filter(|t| !t.is_empty())
    .collect();
    Some(Command::Output(printed.join("\n")))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn commands_read_as_typed_and_their_output_as_printed() {
        let typed = |t: &str| Some(Command::Typed(t.to_owned()));
        let output = |t: &str| Some(Command::Output(t.to_owned()));
        for (text, read) in [
            (
                "<command-message>init is analyzing your codebase…</command-message>\n<command-name>/init</command-name>",
                typed("/init"),
            ),
            (
                "<command-name>/model</command-name>\n            <command-message>model</command-message>\n            <command-args>opus</command-args>",
                typed("/model opus"),
            ),
            (
                "<command-name>review</command-name><command-args> </command-args>",
                typed("/review"),
            ),
            ("<bash-input>ls -la</bash-input>", typed("!ls -la")),
            (
                "<bash-stdout>a\nb</bash-stdout><bash-stderr>warn</bash-stderr>",
                output("a\nb\nwarn"),
            ),
            ("<local-command-stdout></local-command-stdout>", output("")),
            (
                "<local-command-stdout>Set model to opus</local-command-stdout>",
                output("Set model to opus"),
            ),
            // Anything else is a prompt, kept as written.
            ("fix <command-name> parsing", None),
            ("<command-name>/init</command-name> and then explain", None),
            ("<command-name>/init", None),
            ("<b>bold</b>", None),
            ("<bash-input>ls</bash-input><div>x</div>", None),
            ("", None),
            ("   ", None),
        ] {
            assert_eq!(command(text), read, "{text:?}");
        }
        assert!(user_text("<local-command-stdout></local-command-stdout>", false).is_none());
        let Some(Part::Text(out)) = user_text("<bash-stdout>ok</bash-stdout>", false) else {
            panic!("a text part");
        };
        assert_eq!((out.text.as_str(), out.synthetic), ("ok", true));
        let Some(Part::Text(cmd)) = user_text("<bash-input>ok</bash-input>", false) else {
            panic!("a text part");
        };
        assert_eq!((cmd.text.as_str(), cmd.synthetic), ("!ok", false));
    }
}
