//! Which recent messages a summary that restarts the conversation keeps verbatim: the
//! pure planning step ([`plan_keep`]).
//!
//! The summary covers exactly what it replaces: everything sent before the kept
//! messages. The kept messages are the newest ones that fit a token budget
//! ([`CompactionConfig::keep_recent_for`](super::CompactionConfig::keep_recent_for)),
//! taken as whole turns when a turn's start (a user message) is among them, so the model
//! sees the user's request with the work that answers it; when even the newest turn is
//! larger than the budget, the newest messages of that turn are kept instead.

use scribe_message::Role;

/// One message the planner may keep: who wrote it and its size as sent.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct KeepCandidate {
    /// Who wrote it; user messages start turns.
    pub role: Role,
    /// Its estimated size as sent.
    pub tokens: u64,
}

/// The index of the first kept message among `candidates` (oldest first; the messages
/// the summary may leave out of what it covers), or `candidates.len()` when none is
/// kept.
///
/// Keeps the longest suffix whose sizes add up to at most `budget`, then drops its
/// messages before its first user message, if it has one. With `cover_one`, at least the
/// oldest candidate is left to the summary (it would otherwise have nothing new to
/// cover).
pub fn plan_keep(candidates: &[KeepCandidate], budget: u64, cover_one: bool) -> usize {
    let mut start = candidates.len();
    let mut total: u64 = 0;
    while let Some(next) = start.checked_sub(1) {
        let size = candidates[next].tokens;
        match total.checked_add(size) {
            Some(sum) if sum <= budget => {
                total = sum;
                start = next;
            }
            _ => break,
        }
    }
    if cover_one && start == 0 && !candidates.is_empty() {
        start = 1;
    }
    if let Some(turn) = candidates[start..]
        .iter()
        .position(|c| c.role == Role::User)
    {
        start += turn;
    }
    start
}

#[cfg(test)]
mod tests {
    use super::*;

    fn user(tokens: u64) -> KeepCandidate {
        KeepCandidate {
            role: Role::User,
            tokens,
        }
    }

    fn assistant(tokens: u64) -> KeepCandidate {
        KeepCandidate {
            role: Role::Assistant,
            tokens,
        }
    }

    #[test]
    fn keeps_whole_recent_turns_within_the_budget() {
        // Turns: [u 100, a 900], [u 50, a 400, a 300], [u 20, a 200].
        let c = [
            user(100),
            assistant(900),
            user(50),
            assistant(400),
            assistant(300),
            user(20),
            assistant(200),
        ];
        // 1,000 fits the last two turns (970) but not the first's answer: whole turns only.
        assert_eq!(plan_keep(&c, 1_000, true), 2);
        // 600 fits the last turn and two messages of the one before: the last turn alone.
        assert_eq!(plan_keep(&c, 600, true), 5);
        // Exactly the last turn.
        assert_eq!(plan_keep(&c, 220, true), 5);
        // Nothing: nothing kept.
        assert_eq!(plan_keep(&c, 0, true), c.len());
        assert_eq!(plan_keep(&c, 199, true), c.len());
    }

    #[test]
    fn a_turn_larger_than_the_budget_keeps_its_newest_messages() {
        let c = [user(10), assistant(500), assistant(300), assistant(200)];
        assert_eq!(plan_keep(&c, 550, true), 2);
        assert_eq!(plan_keep(&c, 200, true), 3);
    }

    #[test]
    fn something_is_left_to_cover_when_asked() {
        let c = [user(10), assistant(20)];
        assert_eq!(plan_keep(&c, 1_000, false), 0);
        // The oldest is left to the summary; what remains has no turn start.
        assert_eq!(plan_keep(&c, 1_000, true), 1);
        let c = [user(10), assistant(20), user(5), assistant(5)];
        assert_eq!(plan_keep(&c, 1_000, true), 2);
        assert_eq!(plan_keep(&[], 1_000, true), 0);
    }
}
