//! Auto-compaction's pure core: when to compact ([`should_compact`]), which
//! old tool outputs to clear ([`plan_prune`]), what the summariser is asked
//! ([`summary_request`]) and what is sent after each step
//! ([`clear_compacted_tool_outputs`], [`keep_from_last_user`],
//! [`strip_media`], [`fit_messages`]).
//!
//! The steps, cheapest first, stopping as soon as the next request fits:
//!
//! 1. **prune** old tool outputs: [`plan_prune`] picks them, a service marks
//!    them compacted (stored, searchable), and they are sent as
//!    [`CLEARED_TOOL_OUTPUT`]; no model is called. Only a step of at least
//!    [`CompactionConfig::prune_minimum_for`] tokens is taken (it rewrites the
//!    cached prompt from the first cleared output on), as soon as one can be
//!    ([`TriggerReason::PruneDue`]);
//! 2. **summarise** what is sent: restarting from the summary with the most
//!    recent messages kept verbatim ([`plan_keep`] picks them), or adding it
//!    beside the conversation's words ([`CompactionStrategy`]);
//! 3. **progressive**: send only the summary and what follows the last user
//!    message;
//! 4. **strip media**: attachments become `[Attached image/png: screenshot.png]`;
//! 5. otherwise fail with [`DoesNotFit`], which says why.
//!
//! Apart from [`runner`] ([`Compactor`], which drives them against the session
//! and message services), nothing here touches a database.

mod keep;
mod prune;
pub mod runner;
mod summary;
mod transform;
mod trigger;

pub use crate::prune_input::{PruneMessage, PrunePart};
pub use keep::{KeepCandidate, plan_keep};
pub use prune::{PartRef, PrunePlan, plan_prune};
pub use runner::{
    CompactionOutcome, CompactionReport, CompactionStep, Compactor, DEFAULT_STALE_AFTER,
    END_REASON_COMPRESSION, RequestContext,
};
pub use summary::{SUMMARY_PROMPT, summary_request};
pub use transform::{
    CLEARED_TOOL_OUTPUT, DoesNotFit, FitStep, FittedMessages, clear_compacted_tool_outputs,
    fit_messages, keep_from_last_user, media_description, strip_media,
};
pub use trigger::{
    CompactionConfig, CompactionConfigError, CompactionStrategy, DEFAULT_RESERVE_CAP_TOKENS,
    TriggerReason, should_compact,
};
