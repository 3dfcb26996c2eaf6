//! Prefixed, time-sortable ids and the millisecond clock.
//!
//! An id is a prefix, `_`, and a UUIDv7 in lowercase hex: the first 48 bits are the
//! creation time in milliseconds and, within one process, a counter keeps ids created in
//! the same millisecond in creation order. So sorting ids as strings sorts by creation,
//! and id-based cursors are stable.

use std::time::{SystemTime, UNIX_EPOCH};

/// What an id names; decides its prefix.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Prefix {
    /// `ses_`
    Session,
    /// `msg_`
    Message,
    /// `prt_`
    Part,
    /// `fil_`
    File,
}

impl Prefix {
    /// The prefix without its `_` separator, e.g. `"ses"`.
    pub const fn as_str(self) -> &'static str {
        match self {
            Prefix::Session => "ses",
            Prefix::Message => "msg",
            Prefix::Part => "prt",
            Prefix::File => "fil",
        }
    }
}

/// A new id for `prefix`, e.g. `ses_0192f3c4a1b27c3e9d0a5b6c7d8e9f10`.
pub fn new_id(prefix: Prefix) -> String {
    format!("{}_{}", prefix.as_str(), uuid::Uuid::now_v7().simple())
}

/// Milliseconds since the Unix epoch (0 if the clock is before it).
pub fn now_ms() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_are_prefixed_and_sort_in_creation_order() {
        let ids: Vec<String> = (0..1000).map(|_| new_id(Prefix::Message)).collect();
        assert!(
            ids.iter()
                .all(|id| id.starts_with("msg_") && id.len() == 36)
        );
        let mut sorted = ids.clone();
        sorted.sort();
        assert_eq!(ids, sorted);
        assert!(new_id(Prefix::Session).starts_with("ses_"));
        assert!(new_id(Prefix::Part).starts_with("prt_"));
        assert!(new_id(Prefix::File).starts_with("fil_"));
    }

    #[test]
    fn now_is_milliseconds() {
        let now = now_ms();
        assert!(now > 1_600_000_000_000 && now < 10_000_000_000_000);
    }
}
