//! Ids of imported rows, derived from the source's own keys.
//!
//! The same record read twice (a grown file read again, a Claude Code `--resume` that
//! replays earlier lines into a new file) must land on the same row, so message and part
//! ids are a function of the source and the record's key, not random. They keep Scribe's
//! shape and order: `msg_` + 12 hex digits of the creation time in ms + 20 hex digits of a
//! hash, so id order is still time order (ties within one millisecond fall back to the
//! hash). The hash is SipHash-1-3 with fixed keys, a defined function that does not change
//! with the Rust release.

use std::hash::Hasher;

use siphasher::sip::SipHasher13;

use crate::Source;

fn hash(parts: &[&str]) -> u128 {
    let mut low = SipHasher13::new_with_keys(0x5c71_b0e1, 0x1a2b_3c4d);
    let mut high = SipHasher13::new_with_keys(0x9e37_79b9, 0x7f4a_7c15);
    for part in parts {
        for h in [&mut low, &mut high] {
            h.write(part.as_bytes());
            // A separator no key contains, so ("ab","c") and ("a","bc") differ.
            h.write_u8(0xff);
        }
    }
    (u128::from(high.finish()) << 64) | u128::from(low.finish())
}

fn shaped(prefix: &str, at_ms: i64, parts: &[&str]) -> String {
    let time = u64::try_from(at_ms.max(0)).unwrap_or(0) & 0xffff_ffff_ffff;
    let h = hash(parts) & ((1u128 << 80) - 1);
    format!("{prefix}_{time:012x}{h:020x}")
}

/// The id of the message the source knows as `key` (created at `at_ms`).
pub fn message_id(source: Source, key: &str, at_ms: i64) -> String {
    shaped("msg", at_ms, &[source.name(), "message", key])
}

/// The id of part `part_key` of the message the source knows as `message_key`.
pub fn part_id(source: Source, message_key: &str, part_key: &str, at_ms: i64) -> String {
    shaped(
        "prt",
        at_ms,
        &[source.name(), "part", message_key, part_key],
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_are_stable_shaped_and_time_ordered() {
        let a = message_id(Source::ClaudeCode, "uuid-1", 1_700_000_000_000);
        assert_eq!(
            a,
            message_id(Source::ClaudeCode, "uuid-1", 1_700_000_000_000)
        );
        assert_ne!(a, message_id(Source::Codex, "uuid-1", 1_700_000_000_000));
        assert!(a.starts_with("msg_") && a.len() == 36, "{a}");
        let later = message_id(Source::ClaudeCode, "uuid-0", 1_700_000_000_001);
        assert!(later > a);
        assert_ne!(
            part_id(Source::Codex, "ab", "c", 0),
            part_id(Source::Codex, "a", "bc", 0)
        );
        // Fixed values: changing the function would duplicate every re-imported message.
        assert_eq!(
            message_id(Source::ClaudeCode, "k", 0),
            "msg_000000000000be8bc67b9c5f29c361eb"
        );
        assert_eq!(
            part_id(Source::Codex, "m", "p", 1),
            "prt_0000000000019108f8022d5101a1aa60"
        );
    }
}
