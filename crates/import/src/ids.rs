//! Ids of imported rows, derived from the source's own keys.
//!
//! The same record read twice (a grown file read again, a Claude Code `--resume` that
//! replays earlier lines into a new file) must land on the same row, so message and part
//! ids are a function of the source and the record's key, not random. They keep Scribe's
//! shape and order: `msg_` + 12 hex digits of the creation time in ms + 20 hex digits of a
//! hash, so id order is still time order (ties within one millisecond fall back to the
//! hash; messages of one session the file wrote in one millisecond are stored a
//! millisecond apart to keep the file's order, `run::keep_file_order`, their ids as
//! here). The hash is SipHash-1-3 with fixed keys, a defined function that does not change
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

/// The id of a session whose source names it by no id of its own (Aider's runs), known
/// by `key` and started at `at_ms`: Scribe's own shape, `ses_` and the time.
pub fn session_id(source: Source, key: &str, at_ms: i64) -> String {
    shaped("ses", at_ms, &[source.name(), "session", key])
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

/// The Scribe id of `external`, a session of `source` whose own id another source's
/// session already has: `<source>-<external>`, unless that is longer than
/// [`scribe_db::ids::MAX_ID_BYTES`] (the external id fits, so it is at most that long,
/// and the prefix can push it over). Then the external id is cut at a character boundary
/// and a 128-bit hash of the whole of it follows, `<source>-<start>-<32 hex digits>`, which
/// is exactly the limit long: distinct ids with the same start stay distinct, the same id
/// always gets the same spelling (an import into another store, or again after its record
/// was lost, finds the same session), and the batch is not refused for an id Scribe made.
pub fn clash_session_id(source: Source, external: &str) -> String {
    let max = scribe_db::ids::MAX_ID_BYTES;
    let prefixed = format!("{}-{external}", source.name());
    if prefixed.len() <= max {
        return prefixed;
    }
    let digest = format!("{:032x}", hash(&[source.name(), "session", external]));
    let room = max.saturating_sub(source.name().len() + 1 + 1 + digest.len());
    let mut cut = room.min(external.len());
    while !external.is_char_boundary(cut) {
        cut -= 1;
    }
    format!("{}-{}-{digest}", source.name(), &external[..cut])
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

    #[test]
    fn a_clash_id_stays_within_the_id_limit_and_is_stable() {
        use scribe_db::ids::{MAX_ID_BYTES, check_id};
        assert_eq!(clash_session_id(Source::Codex, "abc"), "codex-abc");
        // Just fits with the prefix: spelled as before.
        let fits = "x".repeat(MAX_ID_BYTES - "codex-".len());
        assert_eq!(
            clash_session_id(Source::Codex, &fits),
            format!("codex-{fits}")
        );
        // One byte more, and an id at the limit itself: cut, hashed, exactly the limit.
        for len in [MAX_ID_BYTES - "codex-".len() + 1, MAX_ID_BYTES] {
            let external = "y".repeat(len);
            let id = clash_session_id(Source::Codex, &external);
            assert_eq!(id.len(), MAX_ID_BYTES, "{len}");
            assert!(check_id("session", &id).is_ok());
            assert!(id.starts_with("codex-yyyy"), "{id}");
            assert_eq!(id, clash_session_id(Source::Codex, &external), "stable");
        }
        // Same start, different ends: different ids; another source: another id.
        let a = format!("{}a", "z".repeat(MAX_ID_BYTES - 1));
        let b = format!("{}b", "z".repeat(MAX_ID_BYTES - 1));
        assert_ne!(
            clash_session_id(Source::Codex, &a),
            clash_session_id(Source::Codex, &b)
        );
        assert_ne!(
            clash_session_id(Source::Codex, &a),
            clash_session_id(Source::Hermes, &a)
        );
        // The cut never splits a character: 341 three-byte characters and one byte.
        let wide = format!("{}q", "€".repeat(341));
        let id = clash_session_id(Source::ClaudeCode, &wide);
        assert!(
            id.len() <= MAX_ID_BYTES && id.len() > MAX_ID_BYTES - 3,
            "{}",
            id.len()
        );
        assert!(id.starts_with("claude-code-€€"));
    }
}
