//! The database-free foundation of Scribe's agent: what models cost, how big
//! a conversation is, when and how to compact it, and how to talk to a model.
//!
//! - [`models`]: [`Model`], [`Pricing`] and [`Pricing::cost`] (Σ tokens ×
//!   price / 1e6 over input, output, cache read and cache write), and the
//!   [`ModelCatalog`] — built-in defaults plus a user-editable TOML or JSON file;
//! - [`estimate`]: the [`TokenEstimator`] trait and its deterministic
//!   [`HeuristicEstimator`], for content with no reported usage yet;
//! - [`compaction`]: the triggers ([`should_compact`]), the pruning planner,
//!   the summary prompt, and the "what is sent" transforms;
//! - [`provider`]: provider-neutral requests and streamed responses, the
//!   [`Provider`] trait and the deterministic [`ScriptedProvider`].
//!
//! The session and message services build the agent loop, usage tracking and
//! compaction runs on top of these pure pieces.

pub mod compaction;
pub mod estimate;
pub mod models;
pub mod provider;

pub use compaction::{CompactionConfig, CompactionStrategy, TriggerReason, should_compact};
pub use estimate::{HeuristicEstimator, TokenEstimator};
pub use models::{CatalogError, CatalogFormat, Model, ModelCatalog, ModelProblem, Pricing};
pub use provider::{
    ChatMessage, ChatRequest, Provider, ProviderError, ProviderEvent, ProviderResponse,
    ScriptedProvider, ScriptedTurn, ToolSpec,
};
