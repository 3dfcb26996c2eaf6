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

/// The most bytes an id may have: a session's, a message's, a part's or a file
/// version's, and the names a session is listed by, its source (`cli`, `claude-code`, a
/// client's name) and its user id, whoever supplies them (an export file, an agent's
/// history, the API). Scribe's own ids have 36; the agents' (UUIDs, `ses_…`, Hermes' dated
/// names) at most a few dozen. (A file path is not bounded: PostgreSQL keys it by a
/// digest, schema V27.)
/// PostgreSQL cannot index a key of more than about 2,700 bytes (its b-tree's largest
/// row, after compression), so without a limit an id SQLite stored was refused there
/// (SQLSTATE 54000, a raw message naming an index) and `scribe db copy` into PostgreSQL
/// failed; 1,024 bytes keeps well under that on both backends alike.
pub const MAX_ID_BYTES: usize = 1024;

/// How much of a long id an error shows, and the longest shown whole (Scribe's own ids
/// and the agents' are).
const SHOWN_CHARS: usize = 24;
const SHOWN_WHOLE_BYTES: usize = 64;

/// An id longer than [`MAX_ID_BYTES`]: refused before anything of its change is written,
/// the same on both backends.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IdTooLong {
    /// What the id names: `"session"`, `"message"`, `"part"`, `"file version"`, or whose
    /// id it is: `"source"` (a session's source), `"user"` (a session's user id).
    pub what: &'static str,
    /// Its length in bytes.
    pub len: usize,
    /// Its first characters (the whole id would fill a screen).
    pub start: String,
    /// The start of the id of the session it belongs to, when the id is not the
    /// session's own (a message's, a part's) and the caller knew it.
    pub session: Option<String>,
}

impl std::fmt::Display for IdTooLong {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} id {}", self.what, self.start)?;
        if let Some(session) = &self.session {
            write!(f, " (of session {session})")?;
        }
        write!(
            f,
            " is {} bytes long, more than the {MAX_ID_BYTES} an id may have",
            self.len
        )
    }
}

impl std::error::Error for IdTooLong {}

impl IdTooLong {
    /// The same error, naming session `id` the id belongs to.
    #[must_use]
    pub fn in_session(mut self, id: &str) -> Self {
        self.session = Some(shown(id));
        self
    }
}

/// `id` as an error shows it: whole when short, else its first characters and `…`.
fn shown(id: &str) -> String {
    if id.len() <= SHOWN_WHOLE_BYTES {
        return id.to_owned();
    }
    match id.char_indices().nth(SHOWN_CHARS) {
        Some((at, _)) => format!("{}…", &id[..at]),
        None => id.to_owned(),
    }
}

/// [`IdTooLong`] when `id` (naming a `what`) has more than [`MAX_ID_BYTES`] bytes: the
/// one rule every way an id comes in from outside checks.
pub fn check_id(what: &'static str, id: &str) -> Result<(), IdTooLong> {
    if id.len() <= MAX_ID_BYTES {
        return Ok(());
    }
    Err(IdTooLong {
        what,
        len: id.len(),
        start: shown(id),
        session: None,
    })
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
    fn ids_longer_than_the_limit_are_refused_naming_kind_and_length() {
        assert_eq!(check_id("session", &"a".repeat(MAX_ID_BYTES)), Ok(()));
        // Bytes, not characters: 342 three-byte characters are 1,026 bytes.
        let err = check_id("message", &"€".repeat(342)).unwrap_err();
        assert_eq!(err.len, 1026);
        let err = err.in_session("ses_1");
        assert_eq!(
            err.to_string(),
            format!(
                "message id {}… (of session ses_1) is 1026 bytes long, more than the 1024 an \
                 id may have",
                "€".repeat(24)
            )
        );
        let err = check_id("part", &"x".repeat(3000)).unwrap_err();
        assert_eq!(err.what, "part");
        assert!(
            err.to_string()
                .starts_with(&format!("part id {}… is 3000 bytes long", "x".repeat(24))),
            "{err}"
        );
    }

    #[test]
    fn now_is_milliseconds() {
        let now = now_ms();
        assert!(now > 1_600_000_000_000 && now < 10_000_000_000_000);
    }
}
