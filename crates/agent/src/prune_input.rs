//! A message as the prune planner ([`plan_prune`](crate::compaction::plan_prune)) sees it:
//! its role and, for each part, the estimated tokens of a completed tool output that is
//! still sent ([`PruneMessage`], [`PrunePart`]).
//!
//! Below both of its users: [`context`](fn@crate::context) builds the planner's input while
//! it loads what is sent, and compaction plans from it.

use scribe_message::{Message, Part, Role, ToolState};

use crate::estimate::TokenEstimator;

/// What the planner needs to know about one part.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PrunePart {
    /// A completed tool call whose output is still sent; the estimated tokens
    /// of that output.
    ToolOutput(u64),
    /// A tool call whose output was already cleared.
    Compacted,
    /// Anything else: never pruned and not counted.
    Other,
}

/// One message as the planner sees it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PruneMessage {
    /// Who wrote it; user messages delimit turns.
    pub role: Role,
    /// Its parts, in stored order (indices in the plan refer to this order).
    pub parts: Vec<PrunePart>,
}

impl PruneMessage {
    /// Describes stored parts, estimating completed tool outputs with `estimator`.
    pub fn from_parts<E: TokenEstimator + ?Sized>(
        role: Role,
        parts: &[Part],
        estimator: &E,
    ) -> PruneMessage {
        let parts = parts.iter().map(|p| PrunePart::of(p, estimator)).collect();
        PruneMessage { role, parts }
    }

    /// Describes a stored message (its parts in stored order).
    pub fn from_stored<E: TokenEstimator + ?Sized>(
        message: &Message,
        estimator: &E,
    ) -> PruneMessage {
        let parts = message
            .parts
            .iter()
            .map(|p| PrunePart::of(&p.part, estimator))
            .collect();
        PruneMessage {
            role: message.role,
            parts,
        }
    }
}

impl PrunePart {
    /// How the planner sees `part`.
    fn of<E: TokenEstimator + ?Sized>(part: &Part, estimator: &E) -> PrunePart {
        match part {
            Part::Tool(tool) if tool.compacted_at.is_some() => PrunePart::Compacted,
            Part::Tool(tool) => match &tool.state {
                ToolState::Completed { output, .. } => {
                    PrunePart::ToolOutput(estimator.estimate_text(output))
                }
                _ => PrunePart::Other,
            },
            _ => PrunePart::Other,
        }
    }
}
