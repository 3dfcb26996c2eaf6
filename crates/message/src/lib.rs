//! Messages, typed parts, pagination, the conversation view and full-text search for
//! Scribe.
//!
//! The model (defined in `scribe-types`, which has no database, and re-exported here
//! under the same paths: `scribe_message::Part`, `scribe_message::part::TextPart` …):
//!
//! - [`Role`] and [`FinishReason`]: who wrote a message and why a turn ended;
//! - [`Part`]: the typed pieces of a message (text, reasoning, tool calls with
//!   their [`ToolState`], files, step and finish markers …), serialized as JSON
//!   tagged by `type`, with unknown future types round-tripping unchanged;
//! - [`TokenUsage`]: token counters that add up;
//! - [`SearchQuery`]: the sanitizer and router that turns any user search
//!   string into a safe FTS5 word query, a trigram query, an escaped `LIKE`
//!   pattern, or nothing.
//!
//! Storage (through `scribe-db`'s generated queries; no SQL text in this crate):
//!
//! - [`Message`] and [`StoredPart`]: a stored message with its parts;
//! - [`store`]: transaction-level insert and load functions for other services;
//! - [`MessageService`]: create, update, part changes, [`page`](MessageService::page) and
//!   [`stream`](MessageService::stream), [`search`](MessageService::search), with events
//!   queued inside each transaction and published on two `scribe_pubsub` brokers after
//!   it commits (never for a change that rolled back); `_tx` twins make the same changes
//!   inside another service's transaction.
//!
//! What a model is sent ([`conversation`]): [`sent`] is the one view of stored messages
//! as requests carry them (the summary with what it keeps or the words it stands beside,
//! compacted results cleared, unfinished calls interrupted), used by the agent;
//! [`to_conversation`] pairs its tool calls with their results.
//!
//! Errors are [`MessageError`]; a part row whose JSON cannot be decoded is reported as
//! [`MessageError::CorruptPart`] naming the row, never a panic.

pub mod bulk;
pub mod conversation;
mod error;
pub mod events;
pub mod message;
pub mod page;
pub mod search;
pub mod search_query;
pub mod service;
pub mod store;

pub use scribe_types::{part, role, tool_state, usage};

pub use conversation::{
    CLEARED_TOOL_OUTPUT, ConversationMessage, ConversationOptions, ConversationPart,
    INTERRUPTED_TOOL_OUTPUT, is_sent, sent, sent_message, sent_order, sent_tool,
    summary_compaction, to_conversation,
};
pub use error::{MessageError, Result};
pub use events::queue_event;
pub use message::{Message, MessageUsage, StoredPart};
pub use page::{Cursor, MAX_PAGE, MessageStream, Page};
pub use part::{
    AgentPart, CompactionPart, Extra, FilePart, FileSource, FinishPart, ImageUrlPart,
    KNOWN_PART_TYPES, MAX_PART_DEPTH, Part, PartDecodeError, PartEncodeError, PartTime, PatchPart,
    ReasoningPart, StepFinishPart, StepStartPart, SubtaskPart, TextPart, ToolPart,
};
pub use role::{FinishReason, ParseRoleError, Role};
pub use search::{
    CONTEXT_CHARS, ContextMessage, ETX_SYMBOL, MATCH_END, MATCH_START, MAX_SEARCH_LIMIT,
    STX_SYMBOL, SearchHit, SearchOptions, TYPING_WINDOW, snippet_pieces,
};
pub use search_query::{LIKE_ESCAPE, LiteralCheck, Literals, MAX_TERMS, SearchQuery};
pub use service::{MessageService, MessageUpdate, NewMessage, PartEvent};
pub use tool_state::{ToolState, ToolStateError};
pub use usage::TokenUsage;
