//! The provider-neutral model interface, defined in `scribe-types` (which has no
//! database, so an adapter crate needs nothing else) and re-exported here: requests
//! ([`ChatRequest`]), streamed deltas ([`ProviderEvent`]), the assembled
//! [`ProviderResponse`], the [`Provider`] trait and its typed [`ProviderError`].
//!
//! Usage follows Scribe's disjoint convention (see [`crate::models`]): reasoning
//! reported inside the output count is split with [`crate::models::disjoint_usage`].
//!
//! [`ScriptedProvider`] is a deterministic provider for tests and demos.

mod scripted;

pub use scribe_types::provider::*;
pub use scripted::{ScriptedProvider, ScriptedReply, ScriptedTurn};
