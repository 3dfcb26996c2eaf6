//! Timestamps of the sources, as Scribe's milliseconds since the epoch.
//!
//! Written by hand rather than with a date crate because the sources are lenient in ways
//! RFC 3339 parsers are not: Hermes writes local times without an offset, Gemini and
//! Claude Code write `Z` with 3 to 9 fraction digits, and sanitised fixtures carry text
//! where a time should be. Anything unparseable is `None`, never a panic.

use scribe_db::calendar;

/// Parses `2026-01-31T12:34:56.789Z`, `…+02:00`, `… 12:34:56`, a date alone, or epoch
/// seconds / milliseconds given as a JSON number elsewhere (see [`epoch`]).
pub fn parse(text: &str) -> Option<i64> {
    let t = text.trim().as_bytes();
    let num = |s: &[u8]| -> Option<i64> {
        if s.is_empty() || !s.iter().all(u8::is_ascii_digit) {
            return None;
        }
        std::str::from_utf8(s).ok()?.parse().ok()
    };
    if t.len() < 10 || t[4] != b'-' || t[7] != b'-' {
        return None;
    }
    let (y, m, d) = (num(&t[0..4])?, num(&t[5..7])?, num(&t[8..10])?);
    let (m, d) = (u32::try_from(m).ok()?, u32::try_from(d).ok()?);
    if !calendar::is_date(y, m, d) {
        return None;
    }
    let mut ms = calendar::days_from_civil(y, m, d) * calendar::DAY;
    let rest = &t[10..];
    if rest.is_empty() {
        return Some(ms);
    }
    if !matches!(rest[0], b'T' | b't' | b' ')
        || rest.len() < 9
        || rest[3] != b':'
        || rest[6] != b':'
    {
        return None;
    }
    let (hh, mm, ss) = (num(&rest[1..3])?, num(&rest[4..6])?, num(&rest[7..9])?);
    if hh > 23 || mm > 59 || ss > 60 {
        return None;
    }
    ms += ((hh * 60 + mm) * 60 + ss) * 1000;
    let mut rest = &rest[9..];
    if let Some(b'.' | b',') = rest.first() {
        let digits = rest[1..].iter().take_while(|c| c.is_ascii_digit()).count();
        let frac = &rest[1..=digits];
        let mut millis = 0;
        for (i, c) in frac.iter().take(3).enumerate() {
            millis += i64::from(c - b'0') * [100, 10, 1][i];
        }
        ms += millis;
        rest = &rest[1 + digits..];
    }
    match rest {
        [] | [b'Z' | b'z'] => Some(ms),
        [sign @ (b'+' | b'-'), h1, h2, b':', m1, m2] | [sign @ (b'+' | b'-'), h1, h2, m1, m2] => {
            let offset = (num(&[*h1, *h2])? * 60 + num(&[*m1, *m2])?) * 60_000;
            Some(if *sign == b'+' {
                ms - offset
            } else {
                ms + offset
            })
        }
        _ => None,
    }
}

/// The last millisecond of the year 9999: the latest time a source's text can write
/// ([`parse`] reads four-digit years), and the latest an importer takes a record's time
/// to be ([`epoch`] and the readers' own numbers alike). A later one is a broken clock or
/// no time at all; taken, it would list its session as active now for ever after.
pub const LATEST: i64 = 253_402_300_799_999;

/// Epoch seconds (as Hermes stores them, fractional) or milliseconds, told apart by size;
/// none past [`LATEST`].
pub fn epoch(value: f64) -> Option<i64> {
    if !value.is_finite() || value < 0.0 {
        return None;
    }
    // Seconds until the year 5138; milliseconds from 1973 on.
    let ms = if value < 1e11 { value * 1000.0 } else { value };
    (ms.round() <= LATEST as f64).then(|| ms.round() as i64)
}

/// A time as a JSON value holds it: text ([`parse`]) or a number ([`epoch`]); anything
/// else is none.
pub fn of_json(value: &serde_json::Value) -> Option<i64> {
    match value {
        serde_json::Value::String(s) => parse(s),
        n => n.as_f64().and_then(epoch),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_what_the_sources_write() {
        assert_eq!(parse("1970-01-01T00:00:00Z"), Some(0));
        assert_eq!(parse("2025-09-03T00:47:24.652Z"), Some(1_756_860_444_652));
        assert_eq!(
            parse("2025-09-03T00:47:24.652123456Z"),
            Some(1_756_860_444_652)
        );
        assert_eq!(
            parse("2025-09-03T02:47:24.652+02:00"),
            Some(1_756_860_444_652)
        );
        assert_eq!(parse("2026-04-29T20:10:00"), parse("2026-04-29T20:10:00Z"));
        assert_eq!(parse("2026-04-29"), Some(1_777_420_800_000));
        assert_eq!(parse("[trimmed for fixture]"), None);
        assert_eq!(parse("2026-13-01T00:00:00Z"), None);
        // A day the month does not have is no time (it was counted on into March).
        assert_eq!(parse("2026-02-31T00:00:00Z"), None);
        assert_eq!(parse(""), None);
        assert_eq!(epoch(1_767_261_600.5), Some(1_767_261_600_500));
        assert_eq!(epoch(1_790_768_250_632.0), Some(1_790_768_250_632));
        assert_eq!(epoch(f64::NAN), None);
        let json = serde_json::json!(["2025-09-03T00:47:24.652Z", 1_767_261_600, true]);
        let times: Vec<Option<i64>> = json.as_array().unwrap().iter().map(of_json).collect();
        assert_eq!(
            times,
            [Some(1_756_860_444_652), Some(1_767_261_600_000), None]
        );
    }
}
