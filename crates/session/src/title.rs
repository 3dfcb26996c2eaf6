//! Session titles: normalization, the length limit, and lineage numbering (`t`, `t #2`, …).
//!
//! A title is trimmed, every run of whitespace becomes one space, and control and invisible
//! characters (zero-width spaces and joiners, word joiners, the BOM, bidi embeddings,
//! overrides and isolates, the Arabic letter mark, the soft hyphen, tag characters) are removed, so two titles that look the same
//! are the same. A title that is empty after normalization is refused with
//! [`SessionError::InvalidTitle`] rather than silently stored as "no title": a caller who
//! wants no title passes `None`.

use crate::error::SessionError;

/// The longest title allowed, in characters (Unicode scalar values), after normalization.
pub const MAX_TITLE_CHARS: usize = 200;

/// Whether `c` is invisible or changes text direction without being visible itself.
fn is_invisible(c: char) -> bool {
    matches!(
        c,
        '\u{00AD}'
            | '\u{061C}'
            | '\u{180E}'
            | '\u{200B}'..='\u{200F}'
            | '\u{202A}'..='\u{202E}'
            | '\u{2060}'..='\u{2064}'
            | '\u{2066}'..='\u{2069}'
            | '\u{FEFF}'
            // Tag characters: invisible, and a known way to smuggle hidden text.
            | '\u{E0000}'..='\u{E007F}'
    )
}

/// Normalizes `raw` as a title: trimmed, whitespace runs collapsed to one space, control
/// and invisible characters removed.
///
/// Errors: [`SessionError::InvalidTitle`] when nothing is left,
/// [`SessionError::TitleTooLong`] when more than [`MAX_TITLE_CHARS`] characters are.
pub fn normalize_title(raw: &str) -> Result<String, SessionError> {
    let mut out = String::with_capacity(raw.len());
    let mut pending_space = false;
    for c in raw.chars() {
        if c.is_whitespace() {
            pending_space = !out.is_empty();
        } else if c.is_control() || is_invisible(c) {
            // Removed without breaking the word it sat in.
        } else {
            if pending_space {
                out.push(' ');
                pending_space = false;
            }
            out.push(c);
        }
    }
    if out.is_empty() {
        return Err(SessionError::InvalidTitle {
            reason: "title is empty after removing whitespace and invisible characters".to_owned(),
        });
    }
    let len = out.chars().count();
    if len > MAX_TITLE_CHARS {
        return Err(SessionError::TitleTooLong {
            len,
            max: MAX_TITLE_CHARS,
        });
    }
    Ok(out)
}

/// [`normalize_title`] for an optional title; `None` stays `None`.
pub fn normalize_optional_title(raw: Option<&str>) -> Result<Option<String>, SessionError> {
    raw.map(normalize_title).transpose()
}

/// Splits `title` into its lineage base and number: `"t #3"` → `("t", 3)`, `"t"` → `("t", 1)`.
/// Only a ` #` followed by digits without a leading zero counts as a number.
pub fn split_lineage(title: &str) -> (&str, u64) {
    if let Some((base, digits)) = title.rsplit_once(" #")
        && !base.is_empty()
        && !digits.is_empty()
        && !digits.starts_with('0')
        && digits.bytes().all(|b| b.is_ascii_digit())
        // SQLite compares lineage numbers as INTEGER (i64): a larger one is just text.
        && let Ok(n) = digits.parse::<i64>()
        && let Ok(n) = u64::try_from(n)
    {
        return (base, n);
    }
    (title, 1)
}

/// The title numbered `n` in the lineage of `base`: `base` itself for 1, `base #n` after.
pub fn lineage_title(base: &str, n: u64) -> String {
    if n <= 1 {
        base.to_owned()
    } else {
        format!("{base} #{n}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lineage_numbers_beyond_sqlite_integers_are_plain_text() {
        assert_eq!(
            split_lineage("t #9223372036854775807"),
            ("t", 9_223_372_036_854_775_807)
        );
        assert_eq!(
            split_lineage("t #9223372036854775808"),
            ("t #9223372036854775808", 1)
        );
    }

    #[test]
    fn splits_numbered_titles() {
        assert_eq!(split_lineage("fix build #12"), ("fix build", 12));
        assert_eq!(split_lineage("fix build"), ("fix build", 1));
        assert_eq!(split_lineage("fix #0"), ("fix #0", 1));
        assert_eq!(split_lineage("fix #02"), ("fix #02", 1));
        assert_eq!(split_lineage("fix #2a"), ("fix #2a", 1));
        assert_eq!(split_lineage(" #2"), (" #2", 1));
        assert_eq!(lineage_title("a", 1), "a");
        assert_eq!(lineage_title("a", 3), "a #3");
    }
}
