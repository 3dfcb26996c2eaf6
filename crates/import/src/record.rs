//! What a reader produces and the [`sink`](crate::sink) stores: sessions, messages and
//! part updates keyed by the source's own ids, collected into a [`Batch`].

use scribe_message::{Message, Part, TokenUsage};
use scribe_session::SessionKind;
use serde_json::Value;

/// How strong a title's source is; a session keeps the title of the strongest one seen.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum TitleRank {
    /// A summary the agent wrote of the conversation (Claude Code `summary` lines).
    Summary = 1,
    /// The title the agent keeps for the session (OpenCode, Hermes, Gemini, Roo Code).
    Source = 2,
    /// A title an AI generated (Claude Code `ai-title`).
    Ai = 3,
    /// A title the user gave (Claude Code `custom-title`).
    User = 4,
}

/// A session as the source shows it.
#[derive(Debug, Clone, PartialEq)]
pub struct SessionRec {
    /// The source's id of the session.
    pub external_id: String,
    /// The source's id of its parent (same source), if it has one.
    pub parent: Option<String>,
    /// What it is to its parent.
    pub kind: SessionKind,
    /// The working directory.
    pub directory: Option<String>,
    /// The title and how strong its source is.
    pub title: Option<(String, TitleRank)>,
    /// The model used most.
    pub model: Option<String>,
    /// Model settings, as the source keeps them.
    pub model_config: Option<Value>,
    /// The system prompt.
    pub system_prompt: Option<String>,
    /// The provider that billed it.
    pub billing_provider: Option<String>,
    /// First activity (ms).
    pub created_at: i64,
    /// Last activity (ms).
    pub updated_at: i64,
    /// When it ended, if the source says.
    pub ended_at: Option<i64>,
    /// Why it ended.
    pub end_reason: Option<String>,
    /// Usage the source keeps only per session (Hermes): the session's totals are set to
    /// it, since no message carries usage.
    pub usage_total: Option<SessionUsage>,
    /// Database sources: what was seen of the session, so an unchanged one is skipped.
    pub fingerprint: Option<String>,
    /// The record key (the source's own, as a [`KeyMark`] records it) of a line of
    /// another session that this one's first line answers (Claude Code `--resume`
    /// without a replay: its first `parentUuid`): the session becomes the continuation of
    /// the session holding that key.
    pub continues_from: Option<String>,
    /// The record key of the line that this read's first line of the session answers,
    /// when the session is not stored yet although its file was read before: its earlier
    /// lines were all a replay of another session's, which no sink keeps
    /// (`sink::only_replays`). Made now, the session continues the one holding that key.
    /// Ignored for a session already stored (a file read again names its own last line).
    pub answers: Option<String>,
}

impl SessionRec {
    /// A session with only its id and times set.
    pub fn new(external_id: impl Into<String>, created_at: i64) -> Self {
        SessionRec {
            external_id: external_id.into(),
            parent: None,
            kind: SessionKind::Normal,
            directory: None,
            title: None,
            model: None,
            model_config: None,
            system_prompt: None,
            billing_provider: None,
            created_at,
            updated_at: created_at,
            ended_at: None,
            end_reason: None,
            usage_total: None,
            fingerprint: None,
            continues_from: None,
            answers: None,
        }
    }
}

/// Usage a source keeps per session only.
#[derive(Debug, Clone, PartialEq)]
pub struct SessionUsage {
    /// Tokens (disjoint buckets).
    pub tokens: TokenUsage,
    /// Model calls.
    pub api_calls: i64,
    /// The cost the source reports, if it does.
    pub reported_cost: Option<f64>,
    /// The model to price it with when it does not.
    pub model: Option<String>,
    /// Set by pricing: the session's cost (reported or estimated).
    pub cost_usd: f64,
    /// Set by pricing: where `cost_usd` came from.
    pub cost_flags: u8,
}

/// One message: the Scribe [`Message`] (its `session_id` is filled in by the sink from
/// `session`), with what pricing needs.
#[derive(Debug, Clone, PartialEq)]
pub struct MessageRec {
    /// The source's id of the session it belongs to.
    pub session: String,
    /// The message, with ids from [`crate::ids`].
    pub message: Message,
    /// Model calls it stands for (1 for an assistant response, 0 otherwise).
    pub api_calls: i64,
    /// The cost the source reports for it, if it does.
    pub reported_cost: Option<f64>,
    /// Set by pricing: where `message.cost_usd` came from (see [`crate::pricing`]).
    pub cost_flags: u8,
    /// Of `message.usage.cache_write`, the tokens written to the cache for an hour
    /// (Claude's `ephemeral_1h_input_tokens`), priced at twice the input price where the
    /// others cost the catalog's cache-write price (`Pricing::cost_with_hour_writes`).
    pub cache_write_1h: i64,
}

impl MessageRec {
    /// `message` of session `session`, standing for no model call and with no cost of its
    /// own yet (a reader sets `api_calls` on a reply that carries usage).
    pub fn new(session: impl Into<String>, message: Message) -> MessageRec {
        MessageRec {
            session: session.into(),
            message,
            api_calls: 0,
            reported_cost: None,
            cost_flags: 0,
            cache_write_1h: 0,
        }
    }
}

/// A new content for a part stored earlier (a tool call whose result came later).
#[derive(Debug, Clone, PartialEq)]
pub struct PartUpdate {
    /// The source's id of the session.
    pub session: String,
    /// The part's message.
    pub message_id: String,
    /// The part.
    pub part_id: String,
    /// Its new content.
    pub part: Part,
    /// Its position, should the part not be stored yet.
    pub position: i64,
    /// When it changed (ms).
    pub at: i64,
}

/// A sub-agent's task call and the session it started (Claude Code's Task or Agent tool):
/// the call's tool part, once completed, names that session in its metadata
/// (`session_id`), as Scribe's own task tool does.
#[derive(Debug, Clone, PartialEq)]
pub struct TaskLink {
    /// The part of the call (in this batch, as a message's part or a part update).
    pub part_id: String,
    /// The source's id of the session the call started.
    pub child: String,
}

/// A record key that records in other files may name, and the session holding it
/// (Claude Code: a leaf line's uuid, which `summary` lines name).
#[derive(Debug, Clone, PartialEq)]
pub struct KeyMark {
    /// The source's key of the record.
    pub key: String,
    /// The source's id of the session holding it.
    pub session: String,
}

/// A title for whichever session holds record `key` (now, or once it is imported).
#[derive(Debug, Clone, PartialEq)]
pub struct KeyTitle {
    /// The source's key of a record of the session.
    pub key: String,
    /// The title.
    pub title: String,
    /// How strong its source is.
    pub rank: TitleRank,
}

/// A message stored earlier that the source has since undone (a Codex thread rollback):
/// it stays, with `error` recording why.
#[derive(Debug, Clone, PartialEq)]
pub struct MessageMark {
    /// The source's id of the message's session.
    pub session: String,
    /// The message.
    pub message_id: String,
    /// What to store as its `error`.
    pub error: Value,
}

/// Where a reader stopped in a file, and what it must remember to go on.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Resume {
    /// Bytes of complete records read.
    pub offset: u64,
    /// Lines read.
    pub lines: u64,
    /// The reader's own state (opaque JSON).
    pub carry: Option<Value>,
    /// The read stopped before the end of the file, at a session boundary, once it had
    /// given [`Unit::max_messages`](crate::sources::Unit::max_messages): what it gave is
    /// stored, then the file is read again from `carry`. Database sources do so, so a
    /// database of any size is imported a batch at a time. Never stored with the file.
    pub more: bool,
}

/// What was seen of a file: recorded with the records taken from it, in one transaction.
#[derive(Debug, Clone, PartialEq)]
pub struct FileMark {
    /// The file.
    pub path: String,
    /// Its size and modification time (ns) when read.
    pub size: i64,
    /// Modification time in nanoseconds.
    pub mtime_ns: i64,
    /// Where reading stopped.
    pub resume: Resume,
    /// Records taken.
    pub records: i64,
    /// Records skipped (unknown types).
    pub skipped: i64,
}

/// Everything one transaction stores.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Batch {
    /// Sessions, parents before children.
    pub sessions: Vec<SessionRec>,
    /// Messages in file order.
    pub messages: Vec<MessageRec>,
    /// Later changes of parts.
    pub part_updates: Vec<PartUpdate>,
    /// Messages stored earlier that the source undid.
    pub marks: Vec<MessageMark>,
    /// Task calls and the sessions they started.
    pub task_links: Vec<TaskLink>,
    /// Record keys other files may name, with their sessions.
    pub keys: Vec<KeyMark>,
    /// Titles for the sessions holding record keys.
    pub key_titles: Vec<KeyTitle>,
    /// The files these came from.
    pub files: Vec<FileMark>,
}

impl Batch {
    /// Whether nothing is in it.
    pub fn is_empty(&self) -> bool {
        self.sessions.is_empty()
            && self.messages.is_empty()
            && self.part_updates.is_empty()
            && self.marks.is_empty()
            && self.task_links.is_empty()
            && self.keys.is_empty()
            && self.key_titles.is_empty()
            && self.files.is_empty()
    }

    /// Moves everything of `other` into this batch.
    pub fn append(&mut self, other: Batch) {
        self.sessions.extend(other.sessions);
        self.messages.extend(other.messages);
        self.part_updates.extend(other.part_updates);
        self.marks.extend(other.marks);
        self.task_links.extend(other.task_links);
        self.keys.extend(other.keys);
        self.key_titles.extend(other.key_titles);
        self.files.extend(other.files);
    }
}
