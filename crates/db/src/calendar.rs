//! Calendar arithmetic over Scribe's times (integer milliseconds since the Unix epoch,
//! UTC), and the one grammar a user writes a time in: `--since`/`--older-than` on the
//! command line and `since`/`from`/`to` in the web viewer's API.
//!
//! One copy of the day ↔ date conversion (Howard Hinnant's algorithms, proleptic
//! Gregorian, total over every `i64` day count a millisecond time can reach) for every crate:
//! the CLI's dates, the server's parameters, the importers' timestamps and the bench's
//! fixtures each kept their own before.
//!
//! The grammar ([`parse_since`]): a UTC date `YYYY-MM-DD` (its midnight) or a span back
//! from now (`30m`, `24h`, `7d`, `2w`, `90` = days; `s`, and the words `day(s)`, `hour(s)`,
//! `min`/`minutes`, `sec`/`seconds`, `week(s)`). Nothing before 1970-01-01, the earliest
//! time Scribe keeps, is accepted: a huge span is refused rather than shown as a negative
//! year.

/// One second, in milliseconds.
pub const SECOND: i64 = 1000;
/// One minute, in milliseconds.
pub const MINUTE: i64 = 60 * SECOND;
/// One hour, in milliseconds.
pub const HOUR: i64 = 60 * MINUTE;
/// One day, in milliseconds.
pub const DAY: i64 = 24 * HOUR;

/// Why a time a user wrote was refused. Each message quotes the text as given.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TimeError {
    /// Not a span like `7d` (no leading digits, or digits too many for an `i64`).
    #[error("{0:?} is not a span like 7d, 24h, 30m or 2w")]
    NotASpan(String),
    /// A span whose unit is not one of d, h, m, s, w (or their words).
    #[error("unknown unit {unit:?} in {text:?}; use d, h, m, s or w")]
    UnknownUnit {
        /// The text as given.
        text: String,
        /// The unit part of it.
        unit: String,
    },
    /// A span of more milliseconds than an `i64` holds.
    #[error("{0:?} is too long")]
    TooLong(String),
    /// Not a date `YYYY-MM-DD` that exists (`2026-02-30`, `yesterday`).
    #[error("{0:?} is not a date like 2026-01-31")]
    NotADate(String),
    /// A date, or a span back from now, before 1970-01-01.
    #[error("{0:?} is before 1970-01-01, the earliest time Scribe keeps")]
    BeforeEpoch(String),
    /// A span back from now that reaches before 1970-01-01.
    #[error(
        "{0:?} reaches back before 1970-01-01, the earliest time Scribe keeps; give a shorter span"
    )]
    SpanBeforeEpoch(String),
    /// A span where a whole number of days is asked for (`36h` for `--older-than`).
    #[error("{0:?} is not a whole number of days; use e.g. 90d or 12w")]
    NotWholeDays(String),
    /// Text that is neither a span nor a date, where either is taken.
    #[error("{span} (or give a date like 2026-01-31)")]
    NeitherSpanNorDate {
        /// Why it is not a span.
        span: Box<TimeError>,
    },
}

/// Days since 1970-01-01 → (year, month 1-12, day 1-31).
pub fn civil_from_days(days: i64) -> (i64, u32, u32) {
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = yoe + era * 400 + i64::from(m <= 2);
    // m is 1..=12 and d 1..=31 by construction.
    (
        y,
        u32::try_from(m).unwrap_or(1),
        u32::try_from(d).unwrap_or(1),
    )
}

/// (year, month 1-12, day) → days since 1970-01-01, the inverse of [`civil_from_days`]
/// for a date that exists (a day past the month's end counts on into the next month).
pub fn days_from_civil(y: i64, m: u32, d: u32) -> i64 {
    let (m, d) = (i64::from(m), i64::from(d));
    let y = if m <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y.rem_euclid(400);
    let mp = if m > 2 { m - 3 } else { m + 9 };
    let doy = (153 * mp + 2) / 5 + d - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

/// Whether `y-m-d` is a date of the proleptic Gregorian calendar.
pub fn is_date(y: i64, m: u32, d: u32) -> bool {
    (1..=12).contains(&m) && d >= 1 && civil_from_days(days_from_civil(y, m, d)) == (y, m, d)
}

/// The date `YYYY-MM-DD` (years 0000-9999, as the usage reports' days are) as days since
/// 1970-01-01 (negative before); `None` for text that is not such a date.
pub fn day_number(date: &str) -> Option<i64> {
    let b = date.as_bytes();
    if b.len() != 10 || b[4] != b'-' || b[7] != b'-' {
        return None;
    }
    let number = |part: &str| -> Option<u32> {
        part.bytes()
            .all(|c| c.is_ascii_digit())
            .then(|| part.parse().ok())
            .flatten()
    };
    let (y, m, d) = (
        number(date.get(..4)?)?,
        number(date.get(5..7)?)?,
        number(date.get(8..)?)?,
    );
    is_date(i64::from(y), m, d).then(|| days_from_civil(i64::from(y), m, d))
}

/// The start of the UTC hour `YYYY-MM-DDTHH` (years 0000-9999, as the usage reports'
/// hours are) in ms since the epoch; `None` for text that is not such an hour.
pub fn hour_start(hour: &str) -> Option<i64> {
    let (date, hh) = hour.split_once('T')?;
    if hh.len() != 2 || !hh.bytes().all(|c| c.is_ascii_digit()) {
        return None;
    }
    let hh: i64 = hh.parse().ok().filter(|h| *h < 24)?;
    Some(day_number(date)? * DAY + hh * HOUR)
}

/// The Monday that starts the week (ISO 8601: Monday to Sunday) holding the date
/// `YYYY-MM-DD` (years 0000-9999, as the usage reports' days are), as `YYYY-MM-DD`
/// (0000-01-01 for that year's first days); `None` for text that is not such a date.
pub fn week_start(date: &str) -> Option<String> {
    let days = day_number(date)?;
    // 1970-01-01 was a Thursday, three days after a Monday. The first days of year 0000
    // (where the reports clamp a damaged time) stay in that year.
    let monday = (days - (days + 3).rem_euclid(7)).max(days_from_civil(0, 1, 1));
    let (y, m, d) = civil_from_days(monday);
    Some(format!("{y:04}-{m:02}-{d:02}"))
}

/// The UTC date of `ms` as `YYYY-MM-DD`.
pub fn date(ms: i64) -> String {
    let (y, m, d) = civil_from_days(ms.div_euclid(DAY));
    format!("{y:04}-{m:02}-{d:02}")
}

/// The UTC date and time of `ms` as `YYYY-MM-DD HH:MM`.
pub fn date_time(ms: i64) -> String {
    let in_day = ms.rem_euclid(DAY);
    format!(
        "{} {:02}:{:02}",
        date(ms),
        in_day / HOUR,
        (in_day % HOUR) / MINUTE
    )
}

/// `ms` as RFC 3339 in UTC with milliseconds: `2026-01-31T12:34:56.789Z`.
pub fn rfc3339(ms: i64) -> String {
    let in_day = ms.rem_euclid(DAY);
    format!(
        "{}T{:02}:{:02}:{:02}.{:03}Z",
        date(ms),
        in_day / HOUR,
        in_day % HOUR / MINUTE,
        in_day % MINUTE / SECOND,
        in_day % SECOND
    )
}

/// A span like `90d`, `12h`, `30m`, `2w` (a bare number is days), in milliseconds.
pub fn parse_span(text: &str) -> Result<i64, TimeError> {
    let text = text.trim();
    let split = text
        .find(|c: char| !c.is_ascii_digit())
        .unwrap_or(text.len());
    let (digits, unit) = text.split_at(split);
    let n: i64 = digits
        .parse()
        .map_err(|_| TimeError::NotASpan(text.to_owned()))?;
    let unit_ms = match unit.trim() {
        "" | "d" | "day" | "days" => DAY,
        "h" | "hour" | "hours" => HOUR,
        "m" | "min" | "minutes" => MINUTE,
        "s" | "sec" | "seconds" => SECOND,
        "w" | "week" | "weeks" => 7 * DAY,
        other => {
            return Err(TimeError::UnknownUnit {
                text: text.to_owned(),
                unit: other.to_owned(),
            });
        }
    };
    n.checked_mul(unit_ms)
        .ok_or_else(|| TimeError::TooLong(text.to_owned()))
}

/// A date `YYYY-MM-DD`, from 1970-01-01 on, as the UTC midnight that starts it (ms).
pub fn parse_date(text: &str) -> Result<i64, TimeError> {
    let bad = || TimeError::NotADate(text.to_owned());
    let mut parts = text.trim().splitn(3, '-');
    let mut next = |digits: usize| -> Result<i64, TimeError> {
        let part = parts.next().ok_or_else(bad)?;
        if part.is_empty() || part.len() > digits || !part.bytes().all(|b| b.is_ascii_digit()) {
            return Err(bad());
        }
        part.parse().map_err(|_| bad())
    };
    let (y, m, d) = (next(4)?, next(2)?, next(2)?);
    let (m, d) = (
        u32::try_from(m).map_err(|_| bad())?,
        u32::try_from(d).map_err(|_| bad())?,
    );
    if !is_date(y, m, d) {
        return Err(bad());
    }
    if y < 1970 {
        return Err(TimeError::BeforeEpoch(text.to_owned()));
    }
    Ok(days_from_civil(y, m, d) * DAY)
}

/// A span back from `now` or a date, as `--since` takes it: text with a `-` is a date
/// ([`parse_date`]), anything else a span ([`parse_span`]); neither may reach before
/// 1970-01-01.
pub fn parse_since(text: &str, now: i64) -> Result<i64, TimeError> {
    if text.contains('-') {
        parse_date(text)
    } else {
        let span = parse_span(text).map_err(|err| TimeError::NeitherSpanNorDate {
            span: Box::new(err),
        })?;
        back_from(text, span, now)
    }
}

/// Whole days as `--older-than` takes them (`90d`, `90`, `12w`), no more than reach back
/// from `now` to 1970-01-01.
pub fn parse_days(text: &str, now: i64) -> Result<u32, TimeError> {
    let ms = parse_span(text)?;
    if ms % DAY != 0 {
        return Err(TimeError::NotWholeDays(text.trim().to_owned()));
    }
    back_from(text, ms, now)?;
    u32::try_from(ms / DAY).map_err(|_| TimeError::TooLong(text.trim().to_owned()))
}

/// The time `span` ms before `now`, which must not be before 1970-01-01.
fn back_from(text: &str, span: i64, now: i64) -> Result<i64, TimeError> {
    if span > now {
        return Err(TimeError::SpanBeforeEpoch(text.trim().to_owned()));
    }
    Ok(now - span)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_week_starts_on_its_monday() {
        for (date, monday) in [
            ("2026-12-05", "2026-11-30"), // a Saturday
            ("2026-11-30", "2026-11-30"), // a Monday
            ("2026-12-06", "2026-11-30"), // a Sunday ends it
            ("2026-01-01", "2025-12-29"), // across a year
            ("1970-01-01", "1969-12-29"),
            ("2024-03-01", "2024-02-26"), // across a leap day
            ("0000-01-01", "0000-01-01"),
            ("0000-01-05", "0000-01-03"),
            ("9999-12-31", "9999-12-27"),
        ] {
            assert_eq!(week_start(date).as_deref(), Some(monday), "{date}");
        }
        for bad in [
            "",
            "2026-02-30",
            "2026-1-01",
            "20261201xx",
            "2026-12-0x",
            "+026-12-01",
        ] {
            assert_eq!(week_start(bad), None, "{bad:?}");
        }
    }

    #[test]
    fn an_hour_starts_on_its_hour() {
        assert_eq!(hour_start("1970-01-01T00"), Some(0));
        assert_eq!(hour_start("1970-01-01T05"), Some(5 * HOUR));
        assert_eq!(hour_start("1969-12-31T23"), Some(-HOUR));
        assert_eq!(
            hour_start("2026-12-06T01"),
            Some(parse_date("2026-12-06").unwrap() + HOUR)
        );
        for bad in [
            "",
            "2026-12-06",
            "2026-12-06T24",
            "2026-12-06T1",
            "2026-12-06T+1",
            "2026-02-30T01",
            "2026-12-06 01",
        ] {
            assert_eq!(hour_start(bad), None, "{bad:?}");
        }
    }

    #[test]
    fn days_and_dates_agree_with_the_time_crate() {
        let epoch = time::Date::from_calendar_date(1970, time::Month::January, 1).unwrap();
        // Every day of years -2000..=4000, and the edges an i64 of ms can reach.
        for days in -1_450_000..=740_000_i64 {
            let (y, m, d) = civil_from_days(days);
            let expected = epoch + time::Duration::days(days);
            assert_eq!(
                (y, m, d),
                (
                    i64::from(expected.year()),
                    u32::from(u8::from(expected.month())),
                    u32::from(expected.day())
                ),
                "day {days}"
            );
            assert_eq!(days_from_civil(y, m, d), days);
        }
        for ms in [i64::MIN, i64::MAX, -1, 0] {
            let (y, m, d) = civil_from_days(ms.div_euclid(DAY));
            assert_eq!(days_from_civil(y, m, d), ms.div_euclid(DAY));
        }
    }

    #[test]
    fn formats() {
        assert_eq!(date(0), "1970-01-01");
        assert_eq!(date(-1), "1969-12-31");
        assert_eq!(date_time(90 * MINUTE), "1970-01-01 01:30");
        assert_eq!(rfc3339(1_756_860_444_652), "2025-09-03T00:47:24.652Z");
        assert_eq!(rfc3339(-1), "1969-12-31T23:59:59.999Z");
    }

    #[test]
    fn dates() {
        let ms = parse_date("2026-11-29").unwrap();
        assert_eq!(date(ms), "2026-11-29");
        assert_eq!(parse_date("1970-01-02"), Ok(DAY));
        assert_eq!(
            parse_date("2000-03-01").unwrap() - parse_date("2000-02-28").unwrap(),
            2 * DAY
        );
        for bad in [
            "2026-02-30",
            "2026-13-01",
            "2026-00-10",
            "yesterday",
            "2026-1-",
            "+2026-01-01",
            "99999-01-01",
            "2026-01-01T00:00",
        ] {
            assert_eq!(
                parse_date(bad),
                Err(TimeError::NotADate(bad.to_owned())),
                "{bad}"
            );
        }
        assert_eq!(
            parse_date("1969-12-31"),
            Err(TimeError::BeforeEpoch("1969-12-31".to_owned()))
        );
    }

    #[test]
    fn spans_since_and_days() {
        let now = 20_000 * DAY;
        assert_eq!(parse_span("7d"), Ok(7 * DAY));
        assert_eq!(parse_span("24h"), Ok(DAY));
        assert_eq!(parse_span("30m"), Ok(30 * MINUTE));
        assert_eq!(parse_span("2w"), Ok(14 * DAY));
        assert_eq!(parse_span("90"), Ok(90 * DAY));
        assert!(matches!(parse_span("soon"), Err(TimeError::NotASpan(_))));
        assert!(matches!(
            parse_span("5y"),
            Err(TimeError::UnknownUnit { .. })
        ));
        assert!(matches!(
            parse_span("9999999999999999w"),
            Err(TimeError::TooLong(_))
        ));
        assert_eq!(parse_since("7d", now), Ok(now - 7 * DAY));
        assert_eq!(parse_since("1970-01-02", now), Ok(DAY));
        assert_eq!(
            parse_since("20001d", now),
            Err(TimeError::SpanBeforeEpoch("20001d".to_owned()))
        );
        let err = parse_since("yesterday", now).unwrap_err().to_string();
        assert!(err.contains("7d") && err.contains("2026-01-31"), "{err}");
        assert_eq!(parse_days("90d", now), Ok(90));
        assert_eq!(parse_days("12w", now), Ok(84));
        assert_eq!(parse_days("20000d", now), Ok(20_000));
        assert!(matches!(
            parse_days("36h", now),
            Err(TimeError::NotWholeDays(_))
        ));
        assert!(matches!(
            parse_days("20001d", now),
            Err(TimeError::SpanBeforeEpoch(_))
        ));
    }
}
