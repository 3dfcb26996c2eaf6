//! scribe-types: what a model provider adapter needs to talk to Scribe, without a database.
//!
//! - [`Role`] and [`FinishReason`]: who wrote a message and why a turn ended;
//! - [`Part`]: the typed pieces of a message (text, reasoning, tool calls with their
//!   [`ToolState`], files, step and finish markers …), serialized as JSON tagged by
//!   `type`, with unknown future types round-tripping unchanged;
//! - [`TokenUsage`]: token counters that add up (disjoint: reasoning is not inside
//!   output);
//! - [`provider`]: the [`Provider`] trait, its request ([`ChatRequest`]) and streamed
//!   response types ([`ProviderEvent`], [`ProviderResponse`]) and [`ProviderError`];
//! - [`error_chain`]: an error and its causes on one line.
//!
//! Nothing here touches SQLite: an adapter crate depends on this one alone. The storage
//! crates re-export these types (`scribe_message::Part` is [`Part`]).
//!
//! ```
//! use scribe_types::{ChatMessage, ChatRequest, Part, Role};
//!
//! let request = ChatRequest::new("my-model", vec![ChatMessage::user_text("hello")]);
//! assert_eq!(request.messages[0].role, Role::User);
//! assert_eq!(request.messages[0].parts, vec![Part::text("hello")]);
//! ```

mod depth;
mod error;
pub mod part;
pub mod provider;
pub mod role;
pub mod tool_state;
pub mod usage;

pub use error::error_chain;
pub use part::{
    AgentPart, CompactionPart, Extra, FilePart, FileSource, FinishPart, ImageUrlPart,
    KNOWN_PART_TYPES, MAX_PART_DEPTH, Part, PartDecodeError, PartEncodeError, PartTime, PatchPart,
    ReasoningPart, StepFinishPart, StepStartPart, SubtaskPart, TextPart, ToolPart,
};
pub use provider::{
    ChatMessage, ChatRequest, Provider, ProviderError, ProviderEvent, ProviderResponse,
    ResponseBuilder, ToolSpec,
};
pub use role::{FinishReason, ParseRoleError, Role};
pub use tool_state::{ToolState, ToolStateError};
pub use usage::TokenUsage;
