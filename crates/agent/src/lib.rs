//! Scribe's agent: what models cost, how big a conversation is, when and how
//! to compact it, how to talk to a model, and the loop that does it.
//!
//! - [`models`]: [`Model`], [`Pricing`] and [`Pricing::cost`] (Σ tokens ×
//!   price / 1e6 over input, output, cache read and cache write), and the
//!   [`ModelCatalog`] — built-in defaults plus a user-editable TOML or JSON file;
//! - [`estimate`]: the [`TokenEstimator`] trait and its deterministic
//!   [`HeuristicEstimator`], for content with no reported usage yet;
//! - [`compaction`]: the triggers ([`should_compact`]), the strategies, the
//!   pruning planner, which recent messages a summary keeps, the summary prompt,
//!   and the "what is sent" transforms;
//! - [`provider`]: provider-neutral requests and streamed responses, the
//!   [`Provider`] trait and the deterministic [`ScriptedProvider`].
//!
//! Over a [`scribe_session::Store`] (the session and message services built
//! together):
//!
//! - [`usage`]: [`UsageTracker::track_usage`] charges a call to a session and
//!   its assistant message in one transaction;
//!   [`UsageTracker::finish_task_session`] ends a sub-agent's session and rolls
//!   its cost into the parent in the same transaction;
//! - [`reply`]: [`ReplyWriter`] writes a streamed assistant reply as it arrives
//!   (the loop's, or an application's own, which ends it with
//!   [`ReplyWriter::finish_streamed`] to get the assembled response back); a
//!   step's end, its `step_finish` part and its charge ([`StepCharge`]) commit
//!   in one transaction with [`ReplyWriter::finish_charged`] (or
//!   [`ReplyWriter::finish_streamed_charged`]);
//! - [`context()`]: what the next request sends (the latest summary and what
//!   is sent with it, loaded in proportion to what is sent) and its size (the
//!   one view of scribe-message, [`scribe_message::sent`]);
//! - [`Compactor`] (in [`compaction`]): auto-compaction runs, cheapest step
//!   first, progress as [`AgentEvent`]s ([`events`]).
//!
//! The front door and the loop:
//!
//! - [`ingest`]: a [`PromptInput`] becomes a persisted user message (files
//!   resolved inside the allowed roots, hooks applied) before any model runs;
//! - [`agents`]: [`AgentConfig`] (model, prompt, tools, step limit,
//!   compaction, rules) and the [`AgentRegistry`] a runner picks them from;
//! - [`run`]: [`AgentRunner`] (built with [`AgentRunner::builder`] from a
//!   store and a provider) drives provider calls, tool runs, usage and
//!   compaction step by step until the turn ends, the step limit, or a
//!   [`CancelToken`] ([`cancel`]); sub-agents run as the `task` tool;
//! - [`tools`], [`permission`]: the [`tools::Tool`] trait, built-in tools
//!   confined to the project root, and allow/ask/deny rules (last match wins);
//! - [`title`], [`recovery`], [`lease`]: background titles, repairing a
//!   session a dead process left mid-turn, and the run lease that tells a dead
//!   process from another live one.
//!
//! Every failure is one error type, [`AgentError`] ([`error`]); progress goes out
//! as [`AgentEvent`]s and [`LoopEvent`]s ([`events`]).

pub mod agents;
pub mod cancel;
pub mod compaction;
pub mod context;
pub mod error;
pub mod estimate;
pub mod events;
pub mod ingest;
pub mod lease;
pub mod models;
pub mod permission;
pub mod provider;
mod prune_input;
pub mod recovery;
pub mod reply;
pub mod run;
pub mod title;
pub mod tools;
pub mod usage;

pub use agents::{AgentConfig, AgentRegistry};
pub use cancel::CancelToken;
pub use compaction::{
    CompactionConfig, CompactionOutcome, CompactionReport, CompactionStep, CompactionStrategy,
    Compactor, RequestContext, TriggerReason, should_compact,
};
pub use context::{Context, ContextMeasure, RequestFrame, context, context_with_frame};
pub use error::{AgentError, Result};
pub use estimate::{HeuristicEstimator, TokenEstimator};
pub use events::{AgentEvent, LoopEvent};
pub use ingest::{HookError, IngestConfig, PartDraft, PromptInput, UserMessageDraft};
pub use lease::{LeaseConfig, LeaseHolder};
pub use models::{CatalogError, CatalogFormat, Model, ModelCatalog, ModelProblem, Pricing};
pub use permission::{Action, Decision, PermissionRequest, Rule, Ruleset};
pub use provider::{
    ChatMessage, ChatRequest, Provider, ProviderError, ProviderEvent, ProviderResponse,
    ScriptedProvider, ScriptedTurn, ToolSpec,
};
pub use recovery::{RecoveryReport, recover_session, recover_session_with};
pub use reply::{DEFAULT_FLUSH_INTERVAL, ReplyWriter, StreamedReply, ToolCall};
pub use run::{AgentRunner, AgentRunnerBuilder, RunOutcome};
pub use scribe_types::error_chain;
pub use title::TitleHandle;
pub use tools::{CheckCommand, Tool, ToolContext, ToolError, ToolOutput, ToolRegistry};
pub use usage::{StepCharge, TaskFinish, UsageRecord, UsageTracker};
