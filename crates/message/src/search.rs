//! [`MessageService::search`]: full-text search over every session's messages.
//!
//! The user's string goes through [`SearchQuery::parse`] (which no input can make fail)
//! and is routed to the word index, the trigram index (CJK and other spaceless scripts,
//! three or more characters) or an escaped `LIKE` (shorter CJK); emoji, operators and
//! punctuation (a term with no letter or digit) take the same substring routes when the
//! query has nothing else (`🚀`, `->`). Next to a word they are tested as substrings on
//! the word index's candidates (`🚀 deployed`, `deployed -🚀`), and an alternative of them
//! alone is searched as a substring next to the words, its hits after theirs (`deployed
//! OR 🚀`); terms of one or two characters next to the trigram route likewise. The
//! filters of [`SearchOptions`] apply on every route. Each message appears at most once (its
//! best-ranked part), best bm25 rank first (newest first on the `LIKE` route), with a
//! snippet whose matches are between [`MATCH_START`] and [`MATCH_END`], one message of
//! context on each side, and its session's source, model and title.
//!
//! It runs on either backend (see `scribe_db::search` for how each searches). Before it
//! searches, it indexes what any process committed and the indexes do not hold yet
//! ([`scribe_db::Database::index_pending`]: one read when nothing waits; nothing on
//! PostgreSQL, whose indexes are kept inside each write), so a search finds every
//! message committed before it started. On SQLite a text or reasoning part still
//! being streamed is found once it settles (closed, its message finished, or 30 s without a
//! flush), not while it grows; on PostgreSQL it is found as flushed so far.
//!
//! On SQLite, CJK queries use the trigram index, which holds only text with CJK (or other
//! spaceless-script) characters; their alternatives that can match other text (`数据库 OR
//! docker`) are matched there with an escaped LIKE, ranked after the indexed hits.
//!
//! Cost: the first page is one statement (ranking, hits and snippets, read only as far as
//! the page), later pages a ranking statement and one for their hits; then two small
//! statements for the context of all hits together. Ranking grows with the matches (every
//! match is scored and sorted); [`SearchOptions::window`] ranks only the newest ones, what
//! a search box wants while the user types.

use std::collections::HashMap;

use scribe_db::queries;
use scribe_db::search::{self as db_search, Alternative, Check, SearchFilter, TextQuery};

pub use scribe_db::search::{
    ELLIPSIS, ETX_SYMBOL, MATCH_END, MATCH_START, STX_SYMBOL, snippet_pieces,
};

use crate::error::{MessageError, Result};
use crate::role::Role;
use crate::search_query::{LIKE_ESCAPE, SearchQuery};
use crate::service::MessageService;

/// The most hits one search returns; larger limits are lowered to this.
pub const MAX_SEARCH_LIMIT: usize = 500;

/// How many characters of a context message a hit carries.
pub const CONTEXT_CHARS: usize = 200;

/// The window a search box ranks while the user types ([`SearchOptions::window`]): the
/// best hits among the newest 2,000 matching parts. A short prefix (`con*`) can match half
/// of a large history, and ranking all of it by bm25 costs time in proportion (about
/// 120 ms for 50,000 matches); this many cost a few milliseconds, and the newest
/// 2,000 matches hold far more than a page of good hits.
pub const TYPING_WINDOW: usize = 2_000;

/// Filters and paging of [`MessageService::search`]; empty lists and `None` mean "any".
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SearchOptions {
    /// Only sessions from one of these sources (`cli`, `tui`, `telegram` …).
    pub sources: Vec<String>,
    /// No sessions from these sources.
    pub exclude_sources: Vec<String>,
    /// Only sessions whose agent worked in this directory (the session's `directory`, as
    /// the agent recorded it: the same path exactly, not the directories below it).
    pub directory: Option<String>,
    /// Only messages with one of these roles.
    pub roles: Vec<Role>,
    /// Only this session.
    pub session_id: Option<String>,
    /// Only messages created at or after this time (ms).
    pub since: Option<i64>,
    /// Only messages created before this time (ms).
    pub until: Option<i64>,
    /// At most this many hits (0 returns none; capped at [`MAX_SEARCH_LIMIT`]).
    pub limit: usize,
    /// Skip this many hits first.
    pub offset: usize,
    /// Rank only the newest this many matching parts (the order they were written) that
    /// pass the filters; the hits are the best of that window, best first. `None` (the
    /// default) ranks every match in the history. A search box sets it while the user
    /// types ([`TYPING_WINDOW`]) and searches without it when asked to (Enter): an older
    /// match that would rank first is found only then. The substring (`LIKE`) scans list
    /// newest first anyway and ignore it.
    pub window: Option<usize>,
}

impl Default for SearchOptions {
    fn default() -> Self {
        SearchOptions {
            sources: Vec::new(),
            exclude_sources: Vec::new(),
            directory: None,
            roles: Vec::new(),
            session_id: None,
            since: None,
            until: None,
            limit: 20,
            offset: 0,
            window: None,
        }
    }
}

/// A neighbouring message shown around a hit.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ContextMessage {
    /// Its id.
    pub id: String,
    /// Its role.
    pub role: Role,
    /// Its searchable text (text, reasoning, tool calls), cut to about
    /// [`CONTEXT_CHARS`] characters.
    pub text: String,
}

/// One matching message.
#[derive(Debug, Clone, PartialEq)]
pub struct SearchHit {
    /// The message.
    pub message_id: String,
    /// Its session.
    pub session_id: String,
    /// Its best-matching part.
    pub part_id: String,
    /// Its role.
    pub role: Role,
    /// Its creation time (ms).
    pub created_at: i64,
    /// Text around the match, each match between [`MATCH_START`] and [`MATCH_END`]
    /// (control characters: read them with [`snippet_pieces`] before showing it).
    pub snippet: String,
    /// Rank of the best part (lower is better; 0 on the `LIKE` route): bm25 on SQLite,
    /// its PostgreSQL stand-in there (see `scribe_db::search::SearchHit::rank`).
    pub rank: f64,
    /// The message just before it in its session.
    pub before: Option<ContextMessage>,
    /// The message just after it in its session.
    pub after: Option<ContextMessage>,
    /// The session's source.
    pub source: String,
    /// The session's model.
    pub model: Option<String>,
    /// The message's own model (assistant messages).
    pub message_model: Option<String>,
    /// The session's title.
    pub title: Option<String>,
}

impl MessageService {
    /// Searches every session for `query` (see the module doc). Any string of at most
    /// [`MAX_TERMS`](crate::MAX_TERMS) terms (words, phrases, symbols) is accepted: one
    /// with nothing searchable in it returns `Ok` with no hits; one with more terms is
    /// [`MessageError::InvalidInput`] (searching only some of them would find what the
    /// whole query excludes or does not ask for).
    ///
    /// A hit whose stored rows cannot be read (a value another program wrote into an
    /// SQLite column) fails the search, naming the row; [`search_skipping`] leaves it out.
    ///
    /// [`search_skipping`]: Self::search_skipping
    pub fn search(&self, query: &str, options: &SearchOptions) -> Result<Vec<SearchHit>> {
        self.search_leaving_out(query, options, None)
    }

    /// [`search`](Self::search) that goes on past a hit whose rows cannot be read (its
    /// part, message or session holds a value another program wrote into an SQLite column;
    /// its role, or the role of the message before or after it, is not one Scribe knows):
    /// `left_out` gets each such hit once, as the hit's message id when the error names
    /// another row (`None` when it names the message itself) and the error naming the row,
    /// and the hits are the others (so a page may hold fewer than `options.limit`). Every
    /// other error fails the search.
    pub fn search_skipping(
        &self,
        query: &str,
        options: &SearchOptions,
        left_out: &mut dyn FnMut(Option<&str>, MessageError),
    ) -> Result<Vec<SearchHit>> {
        let mut unreadable = Vec::new();
        let hits = self.search_leaving_out(query, options, Some(&mut unreadable))?;
        for (id, err) in unreadable {
            left_out(id.as_deref(), err);
        }
        Ok(hits)
    }

    /// The search, with the hits it cannot read put in `unreadable` when given (failing
    /// it otherwise).
    fn search_leaving_out(
        &self,
        query: &str,
        options: &SearchOptions,
        mut unreadable: Option<&mut Vec<(Option<String>, MessageError)>>,
    ) -> Result<Vec<SearchHit>> {
        let terms = SearchQuery::term_count(query);
        if terms > crate::MAX_TERMS {
            return Err(MessageError::InvalidInput(format!(
                "a search holds at most {} words, phrases or symbols; this one has {terms}",
                crate::MAX_TERMS
            )));
        }
        let limit = options.limit.min(MAX_SEARCH_LIMIT);
        if limit == 0 {
            return Ok(Vec::new());
        }
        let alternatives = |list: Vec<(Vec<String>, Vec<String>)>| -> Vec<Alternative> {
            list.into_iter()
                .map(|(all, none)| Alternative { all, none })
                .collect()
        };
        let (route, literals) = SearchQuery::parse_with_literals(query);
        let text_query = match route {
            SearchQuery::Fts(expr) => TextQuery::Words(expr),
            SearchQuery::Trigram(expr) => TextQuery::Substrings {
                trigrams: expr,
                plain: alternatives(SearchQuery::plain_alternatives(query)),
            },
            SearchQuery::Like(_) if !literals.alone.is_empty() => {
                TextQuery::Literal(alternatives(literals.alone.clone()))
            }
            SearchQuery::Like(pattern) => TextQuery::Substring(unescape_like(&pattern)),
            SearchQuery::Empty => return Ok(Vec::new()),
        };
        // Symbols next to words, short terms next to CJK: tested on the index's candidates,
        // or searched as substrings next to them. A pure word query has none of this.
        let text_query = match text_query {
            TextQuery::Words(_) | TextQuery::Substrings { .. } if !literals.is_empty() => {
                TextQuery::Mixed {
                    index: Box::new(text_query),
                    checks: literals
                        .checks
                        .into_iter()
                        .map(|c| Check {
                            expr: c.expr,
                            terms: Alternative {
                                all: c.all,
                                none: c.none,
                            },
                            without: c.without,
                        })
                        .collect(),
                    substrings: alternatives(literals.alone),
                }
            }
            other => other,
        };
        let filter = SearchFilter {
            query: text_query,
            sources: options.sources.clone(),
            exclude_sources: options.exclude_sources.clone(),
            directory: options.directory.clone(),
            roles: options
                .roles
                .iter()
                .map(|r| r.as_str().to_owned())
                .collect(),
            session_id: options.session_id.clone(),
            after: options.since,
            before: options.until,
            limit: u64::try_from(limit).unwrap_or(u64::MAX),
            offset: u64::try_from(options.offset).unwrap_or(u64::MAX),
            window: options.window.map(|w| u64::try_from(w).unwrap_or(u64::MAX)),
        };
        // Whatever any process committed before this search is indexed first (cheap when
        // nothing waits); a part still being streamed is found once it settles.
        self.db.index_pending()?;
        self.db.read(|tx| {
            // A busy read is tried again: only the last try's rows count.
            if let Some(list) = unreadable.as_deref_mut() {
                list.clear();
            }
            let rows = db_search::search_skipping(tx, &filter, &mut |id, err| {
                let Some(list) = unreadable.as_deref_mut() else {
                    return Err(err);
                };
                list.push((id.map(str::to_owned), MessageError::Db(err)));
                Ok(())
            })?;
            if rows.is_empty() {
                return Ok(Vec::new());
            }
            let ids: Vec<&str> = rows.iter().map(|r| r.message_id.as_str()).collect();
            let neighbors = tx.q().list_message_neighbors(&ids)?;
            let context_ids: Vec<&str> = neighbors
                .iter()
                .flat_map(|n| [n.before_id.as_deref(), n.after_id.as_deref()])
                .flatten()
                .collect();
            let mut texts: HashMap<String, String> = HashMap::new();
            if !context_ids.is_empty() {
                let max_chars = i64::try_from(CONTEXT_CHARS + 1).unwrap_or(i64::MAX);
                for row in tx
                    .q()
                    .list_message_texts(&queries::ListMessageTextsParams {
                        max_chars,
                        message_ids: &context_ids,
                    })?
                {
                    let text = texts.entry(row.message_id).or_default();
                    if text.chars().count() <= CONTEXT_CHARS {
                        if !text.is_empty() {
                            text.push(' ');
                        }
                        text.push_str(&row.text);
                    }
                }
            }
            let context = |id: Option<&String>, role: Option<&String>| -> Result<_> {
                let (Some(id), Some(role)) = (id, role) else {
                    return Ok(None);
                };
                Ok(Some(ContextMessage {
                    id: id.clone(),
                    role: parse_role(id, role)?,
                    text: cut(texts.get(id).map(String::as_str).unwrap_or_default()),
                }))
            };
            let by_id: HashMap<&str, &queries::ListMessageNeighborsRow> =
                neighbors.iter().map(|n| (n.id.as_str(), n)).collect();
            let mut hits = Vec::with_capacity(rows.len());
            for row in &rows {
                let hit = (|| -> Result<SearchHit> {
                    let around = by_id.get(row.message_id.as_str());
                    let (before, after) = match around {
                        Some(n) => (
                            context(n.before_id.as_ref(), n.before_role.as_ref())?,
                            context(n.after_id.as_ref(), n.after_role.as_ref())?,
                        ),
                        None => (None, None),
                    };
                    Ok(SearchHit {
                        message_id: row.message_id.clone(),
                        session_id: row.session_id.clone(),
                        part_id: row.part_id.clone(),
                        role: parse_role(&row.message_id, &row.role)?,
                        created_at: row.created_at,
                        snippet: row.snippet.clone(),
                        rank: row.rank,
                        before,
                        after,
                        source: row.source.clone(),
                        model: row.session_model.clone(),
                        message_model: row.message_model.clone(),
                        title: row.title.clone(),
                    })
                })();
                match (hit, unreadable.as_deref_mut()) {
                    (Ok(hit), _) => hits.push(hit),
                    // Its own role, or a neighbour's (then named with the hit).
                    (Err(err @ MessageError::CorruptMessage { .. }), Some(list)) => {
                        let own = matches!(&err, MessageError::CorruptMessage { message_id, .. }
                            if *message_id == row.message_id);
                        list.push(((!own).then(|| row.message_id.clone()), err));
                    }
                    (Err(err), _) => return Err(err),
                }
            }
            Ok(hits)
        })
    }
}

fn parse_role(message_id: &str, role: &str) -> Result<Role> {
    role.parse::<Role>()
        .map_err(|e| MessageError::CorruptMessage {
            message_id: message_id.to_owned(),
            reason: "role is not a known role".to_owned(),
            source: Box::new(e),
        })
}

/// `text` cut to [`CONTEXT_CHARS`] characters, with an ellipsis when cut.
fn cut(text: &str) -> String {
    let mut chars = text.char_indices();
    match chars.nth(CONTEXT_CHARS) {
        Some((end, _)) => format!("{}{ELLIPSIS}", text[..end].trim_end()),
        None => text.to_owned(),
    }
}

/// The literal text of a [`SearchQuery::Like`] pattern (`%…%`, escaped with
/// [`LIKE_ESCAPE`]); the db layer escapes it again for its own `LIKE`.
fn unescape_like(pattern: &str) -> String {
    let inner = pattern.strip_prefix('%').unwrap_or(pattern);
    let inner = inner.strip_suffix('%').unwrap_or(inner);
    let mut out = String::with_capacity(inner.len());
    let mut chars = inner.chars();
    while let Some(c) = chars.next() {
        if c == LIKE_ESCAPE {
            if let Some(escaped) = chars.next() {
                out.push(escaped);
            }
        } else {
            out.push(c);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_bad_role_keeps_its_parse_error_as_source() {
        let err = parse_role("msg_9", "robot").unwrap_err();
        assert!(
            matches!(&err, MessageError::CorruptMessage { message_id, .. } if message_id == "msg_9"),
            "{err:?}"
        );
        let source = std::error::Error::source(&err).unwrap();
        assert!(source.is::<crate::ParseRoleError>(), "{source:?}");
        assert!(!err.to_string().contains("robot"), "{err}");
        assert_eq!(parse_role("msg_9", "tool").unwrap(), Role::Tool);
    }

    #[test]
    fn like_patterns_unescape_to_their_text() {
        assert_eq!(unescape_like("%中文%"), "中文");
        assert_eq!(unescape_like(r"%a\%b\_c\\%"), r"a%b_c\");
        for text in ["中", r"x\%_y"] {
            if let SearchQuery::Like(p) = SearchQuery::parse_substring(text) {
                assert_eq!(
                    unescape_like(&p),
                    text.trim_matches(|c: char| !c.is_alphanumeric())
                );
            }
        }
        // A term of symbols alone is kept whole.
        for text in ["%", "_", "\\", "->", "🚀"] {
            let SearchQuery::Like(p) = SearchQuery::parse_substring(text) else {
                panic!("{text:?} is not a LIKE pattern");
            };
            assert_eq!(unescape_like(&p), text);
        }
    }

    #[test]
    fn cut_keeps_short_text_and_marks_long_text() {
        assert_eq!(cut("short"), "short");
        let long = "字".repeat(300);
        let c = cut(&long);
        assert_eq!(c.chars().count(), CONTEXT_CHARS + 1);
        assert!(c.ends_with(ELLIPSIS));
    }
}
