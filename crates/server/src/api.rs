//! `/api/…`: parameters in, JSON documents out (the shapes of [`crate::json`]).
//!
//! Parameters are checked strictly: an unknown name, a repeated single-valued one or a
//! malformed value is a 400 naming it, so a typo never silently widens a filter. An empty
//! value (`source=`, as an empty form field sends) counts as absent.

use scribe_db::calendar::{self, TimeError};
use scribe_message::{MAX_SEARCH_LIMIT, Role, SearchOptions, TYPING_WINDOW};
use scribe_session::StatsBy;
use serde::Serialize;

use crate::error::ApiError;
use crate::http::Shared;
use crate::json::Version;
use crate::store::{Archived, At, ListQuery, Parent, Sort, Step};

/// Largest page of the session list.
pub const MAX_SESSION_PAGE: u64 = 200;
/// Default page of the session list.
const SESSION_PAGE: u64 = 50;
/// Largest page of messages.
pub const MAX_MESSAGE_PAGE: usize = 500;
/// Default page of messages.
const MESSAGE_PAGE: usize = 100;

/// The query string's parameters.
#[derive(Debug, Default)]
pub struct Params {
    pairs: Vec<(String, String)>,
}

impl Params {
    /// Parses `a=1&b=2` (percent- and `+`-decoded); empty values are dropped. A name or
    /// value that is not UTF-8 once decoded is refused, as a path segment is (decoding it
    /// lossily would search for, or filter by, text nobody sent).
    pub fn parse(query: &str) -> Result<Params, ApiError> {
        let mut pairs = Vec::new();
        for pair in query.split('&').filter(|pair| !pair.is_empty()) {
            let (name, value) = pair.split_once('=').unwrap_or((pair, ""));
            let (name, value) = (query_text(name)?, query_text(value)?);
            if !value.is_empty() {
                pairs.push((name, value));
            }
        }
        Ok(Params { pairs })
    }

    /// Refuses any parameter not in `known` (`token` is always allowed).
    fn only(&self, known: &[&str]) -> Result<(), ApiError> {
        match self
            .pairs
            .iter()
            .find(|(name, _)| name != "token" && !known.contains(&name.as_str()))
        {
            Some((name, _)) => Err(ApiError::BadRequest(if known.is_empty() {
                format!("unknown parameter {name:?}: this endpoint takes none")
            } else {
                format!(
                    "unknown parameter {name:?}; this endpoint takes {}",
                    known.join(", ")
                )
            })),
            None => Ok(()),
        }
    }

    /// Every value of `name`.
    fn all(&self, name: &str) -> Vec<String> {
        self.pairs
            .iter()
            .filter(|(n, _)| n == name)
            .map(|(_, v)| v.clone())
            .collect()
    }

    /// The one value of `name`, if given; given twice is an error.
    fn one(&self, name: &str) -> Result<Option<&str>, ApiError> {
        let mut values = self.pairs.iter().filter(|(n, _)| n == name);
        let first = values.next().map(|(_, v)| v.as_str());
        if values.next().is_some() {
            return Err(ApiError::BadRequest(format!(
                "parameter {name:?} given more than once"
            )));
        }
        Ok(first)
    }

    /// `name` as a number in `min..=max`, or `default`.
    fn number(&self, name: &str, min: u64, max: u64, default: u64) -> Result<u64, ApiError> {
        match self.one(name)? {
            None => Ok(default),
            Some(text) => match text.parse::<u64>() {
                Ok(n) if (min..=max).contains(&n) => Ok(n),
                _ => Err(ApiError::BadRequest(format!(
                    "invalid {name}={text:?}: expected a number from {min} to {max}"
                ))),
            },
        }
    }

    /// `name` as a time (see [`parse_time`]).
    fn time(&self, name: &str) -> Result<Option<i64>, ApiError> {
        self.one(name)?
            .map(|text| {
                parse_time(text, scribe_db::now_ms())
                    .map_err(|err| ApiError::BadRequest(format!("invalid {name}: {err}")))
            })
            .transpose()
    }

    /// `name` as one of `choices`, or `default`.
    fn choice<T: Copy>(
        &self,
        name: &str,
        choices: &[(&str, T)],
        default: T,
    ) -> Result<T, ApiError> {
        match self.one(name)? {
            None => Ok(default),
            Some(text) => choices
                .iter()
                .find(|(n, _)| *n == text)
                .map(|(_, v)| *v)
                .ok_or_else(|| {
                    let names: Vec<&str> = choices.iter().map(|(n, _)| *n).collect();
                    ApiError::BadRequest(format!(
                        "invalid {name}={text:?}: expected one of {}",
                        names.join(", ")
                    ))
                }),
        }
    }
}

/// A time parameter: milliseconds since the epoch (`1767225600000`), or what `scribe …
/// --since` takes ([`calendar::parse_since`]): a UTC date (`2026-01-31`, its midnight) or a
/// span back from `now` (`30m`, `24h`, `7d`, `2w`), never before 1970-01-01. (Digits alone
/// are milliseconds here, where `--since` reads them as days.)
pub fn parse_time(text: &str, now: i64) -> Result<i64, TimeError> {
    if !text.is_empty() && text.bytes().all(|b| b.is_ascii_digit()) {
        return text
            .parse()
            .map_err(|_| TimeError::TooLong(text.to_owned()));
    }
    calendar::parse_since(text, now)
}

/// What a route answers: JSON, or a file to download.
pub(crate) enum Reply {
    /// A JSON document.
    Json(Vec<u8>),
    /// A Markdown file, saved as `filename`.
    Markdown {
        /// The file.
        body: Vec<u8>,
        /// The name a browser saves it under.
        filename: String,
    },
}

fn json(value: &impl Serialize) -> Result<Reply, ApiError> {
    serde_json::to_vec(value)
        .map(Reply::Json)
        .map_err(|err| ApiError::Internal(err.to_string()))
}

/// The name a session's download is saved under: its id (letters, digits, `_` and `-`
/// kept, anything else `_`, at most 100 of them) and `extension`.
fn download_name(id: &str, extension: &str) -> String {
    let stem: String = id
        .chars()
        .take(100)
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '_' || c == '-' {
                c
            } else {
                '_'
            }
        })
        .collect();
    format!("{stem}.{extension}")
}

/// Answers `GET /api/<route>`.
pub(crate) fn answer(shared: &Shared, route: &str, params: &Params) -> Result<Reply, ApiError> {
    let store = &shared.store;
    let segments: Vec<&str> = route.split('/').collect();
    match segments.as_slice() {
        ["sessions"] => json(&store.list(&list_query(params)?)?),
        ["sessions", id] if !id.is_empty() => {
            params.only(&[])?;
            json(&store.session(&decode(id)?)?)
        }
        ["sessions", id, "markdown"] if !id.is_empty() => {
            params.only(&[])?;
            let id = decode(id)?;
            Ok(Reply::Markdown {
                body: store.markdown(&id)?,
                filename: download_name(&id, "md"),
            })
        }
        ["sessions", id, "messages"] if !id.is_empty() => {
            params.only(&["limit", "from", "after", "before", "tail", "missing"])?;
            // `missing=first`: a `from` message that is not there (a stale link) gives the
            // first page, marked `"missing": true`, rather than a 404.
            let missing_first =
                params.choice("missing", &[("error", false), ("first", true)], false)?;
            if missing_first && params.one("from")?.is_none() {
                return Err(ApiError::BadRequest(
                    "missing=first goes with from=<message id>".into(),
                ));
            }
            let limit = params.number("limit", 1, MAX_MESSAGE_PAGE as u64, MESSAGE_PAGE as u64)?;
            let places = [
                params.one("from")?.map(|m| At::From(m.to_owned())),
                params.one("after")?.map(|m| At::After(m.to_owned())),
                params.one("before")?.map(|m| At::Before(m.to_owned())),
                match params.one("tail")? {
                    None | Some("0") | Some("false") => None,
                    Some("1") | Some("true") => Some(At::End),
                    // `tail=no` meant the last page, not the first.
                    Some(text) => {
                        return Err(ApiError::BadRequest(format!(
                            "invalid tail={text:?}: expected 1 (the last messages) or 0"
                        )));
                    }
                },
            ];
            let mut given = places.into_iter().flatten();
            let at = given.next().unwrap_or(At::Start);
            if given.next().is_some() {
                return Err(ApiError::BadRequest(
                    "give at most one of from, after, before and tail".into(),
                ));
            }
            let limit = usize::try_from(limit).unwrap_or(MESSAGE_PAGE);
            json(&store.messages(&decode(id)?, &at, limit, missing_first)?)
        }
        ["parts", id] if !id.is_empty() => {
            params.only(&[])?;
            json(&store.part(&decode(id)?)?)
        }
        ["search"] => {
            params.only(&[
                "q",
                "source",
                "exclude_source",
                "directory",
                "role",
                "session",
                "since",
                "limit",
                "rank",
            ])?;
            let roles = params
                .all("role")
                .iter()
                .map(|r| {
                    r.parse::<Role>()
                        .map_err(|err| ApiError::BadRequest(format!("invalid role={r:?}: {err}")))
                })
                .collect::<Result<Vec<_>, _>>()?;
            let limit = params.number("limit", 1, MAX_SEARCH_LIMIT as u64, 20)?;
            let options = SearchOptions {
                sources: params.all("source"),
                exclude_sources: params.all("exclude_source"),
                directory: params.one("directory")?.map(str::to_owned),
                roles,
                session_id: params.one("session")?.map(str::to_owned),
                since: params.time("since")?,
                limit: usize::try_from(limit).unwrap_or(20),
                // `rank=recent`: the best of the newest matches, what the page asks while
                // the user types; `rank=all` (the default) ranks the whole history.
                window: params.choice(
                    "rank",
                    &[("all", None), ("recent", Some(TYPING_WINDOW))],
                    None,
                )?,
                ..SearchOptions::default()
            };
            let query = params.one("q")?.unwrap_or("");
            json(&store.search(query, &options)?)
        }
        ["stats"] => {
            params.only(&["by", "since"])?;
            let choices = StatsBy::ALL.map(|by| (by.name(), by));
            let by = params.choice("by", &choices, StatsBy::Model)?;
            json(&store.stats(shared.live.current(), by, params.time("since")?)?)
        }
        ["usage"] => {
            params.only(&["stack", "since", "step"])?;
            let stacks = [StatsBy::Model, StatsBy::Source, StatsBy::Directory];
            let stack =
                params.choice("stack", &stacks.map(|by| (by.name(), by)), StatsBy::Model)?;
            let step = params.choice(
                "step",
                &[
                    ("day", Step::Day),
                    ("week", Step::Week),
                    ("month", Step::Month),
                    ("auto", Step::Auto),
                ],
                Step::Day,
            )?;
            json(&store.usage(shared.live.current(), stack, params.time("since")?, step)?)
        }
        ["version"] => {
            params.only(&[])?;
            json(&Version {
                version: shared.live.current(),
            })
        }
        ["filters"] => {
            params.only(&[])?;
            json(&store.choices(shared.live.current())?)
        }
        _ => Err(ApiError::NotFound(format!(
            "no such API: /api/{route} (see the README's API reference)"
        ))),
    }
}

/// Checks the query of `GET /api/events`, which takes no parameters (but `token`).
pub(crate) fn events_query(query: &str) -> Result<(), ApiError> {
    Params::parse(query)?.only(&[])
}

/// A query string's name or value: `+` for a space, then as a path segment.
fn query_text(part: &str) -> Result<String, ApiError> {
    decode(&part.replace('+', " "))
}

/// A path segment, percent-decoded.
fn decode(segment: &str) -> Result<String, ApiError> {
    percent_encoding::percent_decode_str(segment)
        .decode_utf8()
        .map(|s| s.into_owned())
        .map_err(|_| ApiError::BadRequest(format!("{segment:?} is not UTF-8 once decoded")))
}

fn list_query(params: &Params) -> Result<ListQuery, ApiError> {
    params.only(&[
        "source",
        "exclude_source",
        "model",
        "directory",
        "from",
        "to",
        "archived",
        "parent",
        "q",
        "sort",
        "limit",
        "after",
    ])?;
    let sort = match params.one("sort")? {
        None => Sort::Created,
        Some(text) => Sort::parse(text).ok_or_else(|| {
            ApiError::BadRequest(format!(
                "invalid sort={text:?}: expected one of created, active, oldest, tokens, cost"
            ))
        })?,
    };
    let parent = match params.one("parent")? {
        None | Some("root") => Parent::Root,
        Some("any") => Parent::Any,
        Some(id) => Parent::Of(id.to_owned()),
    };
    Ok(ListQuery {
        sources: params.all("source"),
        exclude_sources: params.all("exclude_source"),
        models: params.all("model"),
        directory: params.one("directory")?.map(str::to_owned),
        from: params.time("from")?,
        to: params.time("to")?,
        archived: params.choice(
            "archived",
            &[
                ("exclude", Archived::Exclude),
                ("include", Archived::Include),
                ("only", Archived::Only),
            ],
            Archived::Exclude,
        )?,
        parent,
        title: params.one("q")?.map(str::to_owned),
        sort,
        limit: params.number("limit", 1, MAX_SESSION_PAGE, SESSION_PAGE)?,
        after: params.one("after")?.map(str::to_owned),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn times_in_every_form() {
        let now = 10 * 86_400_000;
        assert_eq!(parse_time("1767225600000", now), Ok(1_767_225_600_000));
        assert_eq!(parse_time("1970-01-02", now), Ok(86_400_000));
        assert_eq!(parse_time("2026-01-31", now), Ok(1_769_817_600_000));
        assert_eq!(parse_time("2024-02-29", now), Ok(1_709_164_800_000));
        assert_eq!(parse_time("7d", now), Ok(3 * 86_400_000));
        assert_eq!(parse_time("24h", now), Ok(9 * 86_400_000));
        assert_eq!(parse_time("30m", now), Ok(now - 1_800_000));
        assert_eq!(parse_time("1w", now), Ok(3 * 86_400_000));
        // Every form `--since` takes, and its floor: nothing before 1970-01-01.
        assert_eq!(parse_time("2 days", now), Ok(8 * 86_400_000));
        assert_eq!(
            parse_time("11d", now),
            Err(TimeError::SpanBeforeEpoch("11d".to_owned()))
        );
        assert_eq!(
            parse_time("1969-12-31", now),
            Err(TimeError::BeforeEpoch("1969-12-31".to_owned()))
        );
        for bad in [
            "",
            "x",
            "7y",
            "2026-13-01",
            "2025-02-29",
            "-5d",
            "d",
            "2026-1",
            "9223372036854775807-01-01",
            "99999999999-06-15",
            "0-01-01",
            "99999999999999999999",
        ] {
            assert!(parse_time(bad, now).is_err(), "{bad}");
        }
    }

    #[test]
    fn params_are_strict() {
        let p = Params::parse("a=1&a=2&b=&c=x%20y").unwrap();
        assert_eq!(p.all("a"), vec!["1", "2"]);
        assert!(p.one("a").is_err());
        assert_eq!(p.one("b").ok(), Some(None));
        assert_eq!(p.one("c").ok(), Some(Some("x y")));
        assert!(p.only(&["a", "c"]).is_ok());
        assert!(p.only(&["a"]).is_err());
        assert!(Params::parse("token=t").unwrap().only(&[]).is_ok());
        // Bytes that are not UTF-8 are refused; the replacement character sent as itself
        // (percent-encoded or raw) is text like any other.
        assert!(Params::parse("q=%ff").is_err());
        assert!(Params::parse("q%ff=1").is_err());
        assert!(Params::parse("a=1&q=ok%ff").is_err());
        let sent = Params::parse("q=%EF%BF%BD&r=\u{fffd}").unwrap();
        assert_eq!(sent.one("q").ok(), Some(Some("\u{fffd}")));
        assert_eq!(sent.one("r").ok(), Some(Some("\u{fffd}")));
        assert!(p.number("c", 1, 5, 1).is_err());
    }
}
