//! Which old tool outputs to clear: the pure planning step of pruning
//! ([`plan_prune`]).
//!
//! The planner sees the conversation as an ordered list of messages, each a
//! role and its parts with estimated sizes ([`PruneMessage`]), and returns the
//! tool parts to mark compacted, oldest first ([`PrunePlan`]). The rules, as
//! in OpenCode's `prune`:
//!
//! - everything from the `protect_user_turns`-th last user message on is
//!   spared (by default the last two user turns), as long as those turns' outputs
//!   fit in `prune_protect_tokens`: an agent's turn can run hundreds of tool calls,
//!   and sparing all of it would leave the cheap step nothing to clear, so beyond
//!   that only the newest message with outputs (results the model may not have
//!   read yet) and the token budget below protect, the former counted in the latter;
//! - older than that, tool outputs are walked newest first and the first
//!   `prune_protect_tokens` of them (default 40,000) are spared; a part whose
//!   output crosses that line and every older one are candidates;
//! - only completed tool outputs are pruned; text, reasoning, tool inputs,
//!   errors and every other part are never touched, and parts already
//!   compacted are skipped;
//! - with a target, candidates are taken oldest first until their outputs add
//!   up to the target, so pruning stops as soon as the request fits.

use scribe_message::Role;

use super::trigger::CompactionConfig;
use crate::prune_input::{PruneMessage, PrunePart};

/// A part's position: the message's index in the planner's input and the
/// part's index within that message.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct PartRef {
    /// Index of the message.
    pub message: usize,
    /// Index of the part within the message.
    pub part: usize,
}

/// The tool parts to mark compacted.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PrunePlan {
    /// The parts, oldest first.
    pub parts: Vec<PartRef>,
    /// The estimated tokens of their outputs (what clearing them saves, less
    /// the marker that replaces each one).
    pub output_tokens: u64,
}

impl PrunePlan {
    /// Whether there is nothing to prune.
    pub fn is_empty(&self) -> bool {
        self.parts.is_empty()
    }
}

/// Chooses the tool outputs to clear (see the module doc for the rules).
///
/// With `target_tokens`, stops once the chosen outputs add up to at least that
/// many tokens (or every candidate is taken); with `None`, takes every
/// candidate.
pub fn plan_prune(
    messages: &[PruneMessage],
    config: &CompactionConfig,
    target_tokens: Option<u64>,
) -> PrunePlan {
    let outputs = |messages: &[PruneMessage]| -> u64 {
        messages
            .iter()
            .flat_map(|m| &m.parts)
            .map(|p| match p {
                PrunePart::ToolOutput(tokens) => *tokens,
                _ => 0,
            })
            .fold(0, u64::saturating_add)
    };
    // The protected turns (all of them when there are fewer)…
    let turns = protected_from(messages, config.protect_user_turns).unwrap_or(0);
    let (boundary, mut seen) = if outputs(&messages[turns..]) <= config.prune_protect_tokens {
        (turns, 0)
    } else {
        // …unless their outputs alone are more than the budget spares: then the newest
        // message with outputs (results the model may not have read yet) and the newest
        // budget of outputs, counting those, are spared.
        match messages.iter().rposition(|m| {
            m.parts
                .iter()
                .any(|p| matches!(p, PrunePart::ToolOutput(_)))
        }) {
            Some(newest) => (newest, outputs(&messages[newest..])),
            None => (messages.len(), 0),
        }
    };
    // Newest first, sparing the most recent `prune_protect_tokens` of outputs.
    let mut candidates: Vec<(PartRef, u64)> = Vec::new();
    for (m, message) in messages[..boundary].iter().enumerate().rev() {
        for (p, part) in message.parts.iter().enumerate().rev() {
            if let PrunePart::ToolOutput(tokens) = *part {
                seen = seen.saturating_add(tokens);
                if seen > config.prune_protect_tokens {
                    candidates.push((
                        PartRef {
                            message: m,
                            part: p,
                        },
                        tokens,
                    ));
                }
            }
        }
    }
    candidates.reverse();
    let mut plan = PrunePlan::default();
    for (part, tokens) in candidates {
        if target_tokens.is_some_and(|target| plan.output_tokens >= target) {
            break;
        }
        plan.parts.push(part);
        plan.output_tokens = plan.output_tokens.saturating_add(tokens);
    }
    plan
}

/// The index of the first protected message: the `turns`-th user message from
/// the end. `None` when there are not that many user turns (all protected).
fn protected_from(messages: &[PruneMessage], turns: usize) -> Option<usize> {
    if turns == 0 {
        return Some(messages.len());
    }
    messages
        .iter()
        .enumerate()
        .rev()
        .filter(|(_, m)| m.role == Role::User)
        .nth(turns - 1)
        .map(|(i, _)| i)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::estimate::HeuristicEstimator;
    use scribe_message::{Extra, Part, ToolPart, ToolState};
    use serde_json::Value;

    fn user() -> PruneMessage {
        PruneMessage {
            role: Role::User,
            parts: vec![PrunePart::Other],
        }
    }

    fn assistant(parts: &[PrunePart]) -> PruneMessage {
        PruneMessage {
            role: Role::Assistant,
            parts: parts.to_vec(),
        }
    }

    fn out(k: u64) -> PrunePart {
        PrunePart::ToolOutput(k * 1_000)
    }

    fn at(message: usize, part: usize) -> PartRef {
        PartRef { message, part }
    }

    /// 0 user, 1 asst [text, 30k, 20k], 2 user, 3 asst [15k, text, 10k],
    /// 4 user, 5 asst [recent…], 6 user, 7 asst [newest].
    fn conversation_with(recent: &[PrunePart], newest: &[PrunePart]) -> Vec<PruneMessage> {
        vec![
            user(),
            assistant(&[PrunePart::Other, out(30), out(20)]),
            user(),
            assistant(&[out(15), PrunePart::Other, out(10)]),
            user(),
            assistant(recent),
            user(),
            assistant(newest),
        ]
    }

    /// The last two turns hold 110k of outputs.
    fn conversation() -> Vec<PruneMessage> {
        conversation_with(&[out(50)], &[out(60)])
    }

    #[test]
    fn spares_last_two_turns_and_the_newest_forty_thousand() {
        // The last two turns hold 11k of outputs: within the budget, spared whole.
        let messages = conversation_with(&[out(5)], &[out(6)]);
        let plan = plan_prune(&messages, &CompactionConfig::default(), None);
        // Older outputs newest first: 10k (10), 15k (25), 20k (45 > 40 → prune), 30k.
        assert_eq!(plan.parts, vec![at(1, 1), at(1, 2)]);
        assert_eq!(plan.output_tokens, 50_000);
    }

    #[test]
    fn turns_holding_more_than_the_budget_spare_the_newest_results_and_the_budget() {
        // 110k in the last two turns: only the newest message (60k, over the budget
        // alone) is spared; everything older goes.
        let plan = plan_prune(&conversation(), &CompactionConfig::default(), None);
        assert_eq!(
            plan.parts,
            vec![at(1, 1), at(1, 2), at(3, 0), at(3, 2), at(5, 0)]
        );
        // 45k in the last two turns: the newest 25k, then 10k more of the budget.
        let messages = conversation_with(&[out(10), out(10)], &[out(25)]);
        let plan = plan_prune(&messages, &CompactionConfig::default(), None);
        assert_eq!(
            plan.parts,
            vec![at(1, 1), at(1, 2), at(3, 0), at(3, 2), at(5, 0)]
        );
        assert!(!plan.parts.contains(&at(5, 1)) && !plan.parts.contains(&at(7, 0)));
    }

    #[test]
    fn the_output_crossing_the_line_is_pruned_and_exactly_forty_is_spared() {
        let messages = vec![user(), assistant(&[out(5), out(40)]), user(), user()];
        let plan = plan_prune(&messages, &CompactionConfig::default(), None);
        assert_eq!(
            plan.parts,
            vec![at(1, 0)],
            "40k exactly is spared, the next is not"
        );
        let messages = vec![user(), assistant(&[out(41)]), user(), user()];
        assert_eq!(
            plan_prune(&messages, &CompactionConfig::default(), None).parts,
            vec![at(1, 0)]
        );
    }

    #[test]
    fn target_takes_oldest_first_and_stops_when_enough() {
        let config = CompactionConfig {
            prune_protect_tokens: 0,
            ..CompactionConfig::default()
        };
        let all = plan_prune(&conversation(), &config, None);
        assert_eq!(
            all.parts,
            vec![at(1, 1), at(1, 2), at(3, 0), at(3, 2), at(5, 0)]
        );
        let some = plan_prune(&conversation(), &config, Some(45_000));
        assert_eq!(some.parts, vec![at(1, 1), at(1, 2)]);
        assert_eq!(some.output_tokens, 50_000);
        let one = plan_prune(&conversation(), &config, Some(1));
        assert_eq!(one.parts, vec![at(1, 1)]);
        assert!(plan_prune(&conversation(), &config, Some(0)).is_empty());
    }

    #[test]
    fn text_reasoning_compacted_and_recent_turns_are_never_chosen() {
        let config = CompactionConfig {
            prune_protect_tokens: 0,
            protect_user_turns: 1,
            ..CompactionConfig::default()
        };
        let messages = vec![
            user(),
            assistant(&[PrunePart::Other, PrunePart::Compacted, out(1)]),
            user(),
            assistant(&[out(99)]),
        ];
        assert_eq!(plan_prune(&messages, &config, None).parts, vec![at(1, 2)]);
        // Fewer user turns than protected: nothing at all.
        let short = vec![user(), assistant(&[out(500)])];
        assert!(plan_prune(&short, &CompactionConfig::default(), None).is_empty());
        assert!(plan_prune(&[], &config, None).is_empty());
        // Zero protected turns: the whole history is eligible.
        let none = CompactionConfig {
            prune_protect_tokens: 0,
            protect_user_turns: 0,
            ..CompactionConfig::default()
        };
        assert_eq!(plan_prune(&short, &none, None).parts, vec![at(1, 0)]);
    }

    #[test]
    fn from_parts_classifies_stored_parts() {
        let tool = |state: ToolState, compacted_at: Option<i64>| {
            Part::Tool(ToolPart {
                call_id: "c".into(),
                tool: "read".into(),
                input: Value::Null,
                state,
                compacted_at,
                extra: Extra::new(),
            })
        };
        let done = ToolState::Completed {
            output: "x".repeat(400),
            title: String::new(),
            metadata: Value::Null,
            started_at: 1,
            ended_at: 2,
        };
        let parts = vec![
            Part::text("hello"),
            tool(done.clone(), None),
            tool(done, Some(5)),
            tool(ToolState::Pending, None),
        ];
        let m = PruneMessage::from_parts(Role::Assistant, &parts, &HeuristicEstimator);
        assert_eq!(
            m.parts,
            vec![
                PrunePart::Other,
                PrunePart::ToolOutput(100),
                PrunePart::Compacted,
                PrunePart::Other
            ]
        );
    }
}
