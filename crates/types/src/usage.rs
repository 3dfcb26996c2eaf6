//! Token counts of a model call ([`TokenUsage`]), summable across steps and messages.

use std::iter::Sum;
use std::ops::{Add, AddAssign};

use serde::{Deserialize, Serialize};

/// Tokens consumed by one model call, step or message.
///
/// Every field defaults to 0 when missing from JSON, so rows written before a
/// counter existed still decode. Addition saturates instead of overflowing:
/// a corrupt huge counter must not panic a summary.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(default)]
pub struct TokenUsage {
    /// Prompt tokens that were not served from the cache.
    pub input: i64,
    /// Generated tokens.
    pub output: i64,
    /// Prompt tokens served from the provider's cache.
    pub cache_read: i64,
    /// Prompt tokens written to the provider's cache.
    pub cache_write: i64,
    /// Hidden reasoning tokens.
    pub reasoning: i64,
}

impl TokenUsage {
    /// Every counter added up: what the call cost in tokens.
    pub fn total(&self) -> i64 {
        self.input
            .saturating_add(self.output)
            .saturating_add(self.cache_read)
            .saturating_add(self.cache_write)
            .saturating_add(self.reasoning)
    }

    /// Whether every counter is zero.
    pub fn is_zero(&self) -> bool {
        *self == TokenUsage::default()
    }

    /// Every counter with its name as messages show it (`"input tokens"`), in field order.
    pub fn named(&self) -> [(&'static str, i64); 5] {
        [
            ("input tokens", self.input),
            ("output tokens", self.output),
            ("cache read tokens", self.cache_read),
            ("cache write tokens", self.cache_write),
            ("reasoning tokens", self.reasoning),
        ]
    }

    /// The first negative counter, named: what a store refuses to add to a total, since
    /// totals only grow (and the stored sums saturate at `i64::MAX` only upwards).
    pub fn first_negative(&self) -> Option<(&'static str, i64)> {
        self.named().into_iter().find(|(_, value)| *value < 0)
    }
}

impl Add for TokenUsage {
    type Output = TokenUsage;

    fn add(self, rhs: TokenUsage) -> TokenUsage {
        TokenUsage {
            input: self.input.saturating_add(rhs.input),
            output: self.output.saturating_add(rhs.output),
            cache_read: self.cache_read.saturating_add(rhs.cache_read),
            cache_write: self.cache_write.saturating_add(rhs.cache_write),
            reasoning: self.reasoning.saturating_add(rhs.reasoning),
        }
    }
}

impl AddAssign for TokenUsage {
    fn add_assign(&mut self, rhs: TokenUsage) {
        *self = *self + rhs;
    }
}

impl Sum for TokenUsage {
    fn sum<I: Iterator<Item = TokenUsage>>(iter: I) -> TokenUsage {
        iter.fold(TokenUsage::default(), Add::add)
    }
}

impl<'a> Sum<&'a TokenUsage> for TokenUsage {
    fn sum<I: Iterator<Item = &'a TokenUsage>>(iter: I) -> TokenUsage {
        iter.copied().sum()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn adds_field_by_field_and_saturates() {
        let a = TokenUsage {
            input: 1,
            output: 2,
            cache_read: 3,
            cache_write: 4,
            reasoning: 5,
        };
        let mut b = a + a;
        assert_eq!(b.input, 2);
        assert_eq!(b.reasoning, 10);
        b += TokenUsage {
            input: i64::MAX,
            ..TokenUsage::default()
        };
        assert_eq!(b.input, i64::MAX);
        assert_eq!([a, a, a].iter().sum::<TokenUsage>().total(), 45);
        assert!(TokenUsage::default().is_zero());
    }

    #[test]
    fn the_first_negative_counter_is_named() {
        assert_eq!(TokenUsage::default().first_negative(), None);
        let bad = TokenUsage {
            input: 3,
            cache_write: -2,
            reasoning: -1,
            ..TokenUsage::default()
        };
        assert_eq!(bad.first_negative(), Some(("cache write tokens", -2)));
    }

    #[test]
    fn serde_defaults_missing_fields() {
        let u: TokenUsage = serde_json::from_str(r#"{"input":7}"#).unwrap();
        assert_eq!(u.input, 7);
        assert_eq!(u.output, 0);
        let json = serde_json::to_string(&u).unwrap();
        assert_eq!(
            json,
            r#"{"input":7,"output":0,"cache_read":0,"cache_write":0,"reasoning":0}"#
        );
    }
}
