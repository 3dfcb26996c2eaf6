//! Messages, typed parts and full-text search queries for Scribe.
//!
//! This crate currently holds the pure parts of the message layer:
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
//! The database-backed `MessageService` builds on these once `scribe-db` is ready.

pub mod part;
pub mod role;
pub mod search_query;
pub mod tool_state;
pub mod usage;

pub use part::{
    AgentPart, CompactionPart, Extra, FilePart, FileSource, FinishPart, ImageUrlPart,
    KNOWN_PART_TYPES, Part, PartDecodeError, PartEncodeError, PartTime, PatchPart, ReasoningPart,
    StepFinishPart, StepStartPart, SubtaskPart, TextPart, ToolPart,
};
pub use role::{FinishReason, ParseRoleError, Role};
pub use search_query::{LIKE_ESCAPE, MAX_TERMS, SearchQuery};
pub use tool_state::{ToolState, ToolStateError};
pub use usage::TokenUsage;
