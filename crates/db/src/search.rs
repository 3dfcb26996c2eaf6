//! Full-text search over parts, with the filters a caller may combine: sources to include
//! or exclude, roles, one session, a time range, limit and offset. One hit per message
//! (its best-ranked part), with a snippet and the session's source, model and title.
//!
//! [`search`] takes the read handle and runs on either backend. This module is the SQLite
//! side; `search/postgres.rs` answers the same [`SearchFilter`] on PostgreSQL with its GIN
//! indexes (a `tsquery` written from the same FTS5 expression, `ILIKE` through pg_trgm),
//! in the same hit format (ARCHITECTURE.md, "Search on two backends", says what differs).
//!
//! The caller chooses the path with [`TextQuery`]: the word index (`parts_fts`), the trigram
//! index (`parts_fts_trigram`: substrings of 3+ characters in the parts whose text has CJK
//! or other spaceless-script characters), both together with an escaped LIKE over the
//! other parts ([`TextQuery::Substrings`]), or an escaped LIKE alone for shorter
//! substrings ([`TextQuery::Substring`], [`TextQuery::Literal`]). [`TextQuery::Mixed`]
//! adds what an index cannot test: substrings its candidates must hold or lack (a symbol
//! next to a word), tested as the page is read, and alternatives of substrings alone, a
//! LIKE walk after the index's hits. An exclusion leaves out the whole message: an
//! excluded word or substring is tested over every searchable part of the candidate's
//! message ([`Check::without`], [`Alternative::none`]), not only the part that matched.
//! FTS expressions must already be sanitized
//! (crates/message does that); this module binds them as values, never splices them into
//! SQL.
//!
//! The indexes are read as they are: parts still queued for indexing (schema V7) are not
//! found. [`crate::Database::index_pending`] first, as `MessageService::search` does, to
//! find everything committed.
//!
//! Cost: the first page is one statement, read only as far as the page needs, so snippets
//! are computed for the page's rows (and the few further parts of messages already on
//! it), never for the rest of the matches. A later page ranks without snippets (a light
//! statement, repeated with a larger limit only when many candidates were further parts
//! of messages already found), then fetches its own rows' snippets. Ranking itself costs
//! per match (FTS5 computes bm25 for every match and sorts them all before the first row
//! comes back); [`SearchFilter::window`] bounds that by ranking only the newest matches.

use rusqlite::{Connection, OptionalExtension, Row};
use sea_query::{
    Alias, Cond, Expr, ExprTrait, JoinType, Order, Query, SelectStatement, SqliteQueryBuilder,
};
use sea_query_rusqlite::RusqliteBinder;

use crate::filters::escape_like;
use crate::tx::{Conn, ReadTx};

#[cfg(feature = "postgres")]
mod postgres;

/// Marks the start of a match in [`SearchHit::snippet`]: a control character (STX). It
/// was `>>>`, which stored text often holds (a Python prompt, a merge conflict's
/// `>>>>>>>`): that text was lost from snippets and mistaken for a match. Stored text can
/// hold STX too (terminal output in a tool's result), so a snippet shows a stored STX as
/// [`STX_SYMBOL`]: every `MATCH_START` in a snippet is a match's.
pub const MATCH_START: &str = "\u{2}";
/// Marks the end of a match in [`SearchHit::snippet`] (ETX; it was `<<<`, a heredoc too).
/// A stored ETX is shown as [`ETX_SYMBOL`].
pub const MATCH_END: &str = "\u{3}";
/// How a snippet shows a [`MATCH_START`] character of the stored text: `␂` (U+2402,
/// SYMBOL FOR START OF TEXT, what `scribe` prints for STX anywhere). Every other
/// character of the text is kept as stored.
pub const STX_SYMBOL: &str = "\u{2402}";
/// How a snippet shows a [`MATCH_END`] character of the stored text: `␃` (U+2403).
pub const ETX_SYMBOL: &str = "\u{2403}";
/// [`MATCH_START`]'s character.
const STX: char = '\u{2}';
/// [`MATCH_END`]'s character.
const ETX: char = '\u{3}';
/// Stands for cut text at either end of a snippet.
pub const ELLIPSIS: &str = "…";

/// A snippet ([`SearchHit::snippet`]) in its pieces, in order: `(text, true)` for a match
/// (between [`MATCH_START`] and [`MATCH_END`]; one left open runs to the end),
/// `(text, false)` for the text between. The one reading of the markers, for every page
/// and printer that shows a snippet.
pub fn snippet_pieces(snippet: &str) -> Vec<(&str, bool)> {
    let mut pieces = Vec::new();
    let mut rest = snippet;
    while let Some(start) = rest.find(MATCH_START) {
        if start > 0 {
            pieces.push((&rest[..start], false));
        }
        rest = &rest[start + MATCH_START.len()..];
        let end = rest.find(MATCH_END).unwrap_or(rest.len());
        pieces.push((&rest[..end], true));
        rest = rest.get(end + MATCH_END.len()..).unwrap_or("");
    }
    if !rest.is_empty() {
        pieces.push((rest, false));
    }
    pieces
}
/// Roughly how many tokens (words) a snippet of the word index holds.
const SNIPPET_TOKENS: i64 = 24;
/// Characters of context on each side of a LIKE match.
const LIKE_CONTEXT_CHARS: usize = 60;

/// What to look for, and through which index.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TextQuery {
    /// A sanitized FTS5 expression for the word index (unicode61, diacritics folded).
    Words(String),
    /// A sanitized FTS5 expression for the trigram index alone; every term needs 3+
    /// characters. The index holds only the parts whose text has CJK or other
    /// spaceless-script characters (see [`TextQuery::Substrings`] for all text).
    Trigrams(String),
    /// A substring search over all text: `trigrams` (as [`TextQuery::Trigrams`]) finds
    /// the parts the trigram index holds, and the alternatives of the same query that can
    /// match text without spaceless-script characters (`plain`) are matched in the other
    /// parts with an escaped LIKE. Hits of the index come first (by rank), then those of
    /// the LIKE (rank 0, newest first).
    Substrings {
        /// The FTS5 expression for the trigram index.
        trigrams: String,
        /// The alternatives that can match other text.
        plain: Vec<Alternative>,
    },
    /// A literal substring (any length), matched with an escaped LIKE: slow on big
    /// databases, meant for 1–2 character CJK or symbol queries (`中`, `🚀`, `->`) the
    /// trigram index cannot serve.
    Substring(String),
    /// Alternatives of literal substrings alone ([`TextQuery::Substring`] with more than
    /// one term: `-> ::`, `-> NOT ::`, `中 🚀`, `-> OR 中`): matched with an escaped LIKE,
    /// newest first, each message with its first matching part. An alternative without a
    /// term that must occur matches nothing.
    Literal(Vec<Alternative>),
    /// An index route whose alternatives also test literal substrings the index cannot
    /// (a symbol next to a word, `🚀 deployed`, `deployed -🚀`; a term of one or two
    /// characters next to a CJK one), and alternatives of substrings alone that it
    /// cannot serve at all (`deployed OR 🚀`).
    ///
    /// The index's candidates are tested in rank order, only as far as the page needs:
    /// a candidate is a hit when one of `checks` holds for its part (the part matches the
    /// check's expression and holds every `all` term as a substring of its searchable
    /// text, as the LIKE route tests them, and no part of its message holds a `none`
    /// term or matches a `without` word: an exclusion leaves out the whole message).
    /// Then, when the page is not full, the messages matching one of `substrings` and
    /// not found through the index, newest first, walked in steps as the LIKE route
    /// walks (rank 0, as LIKE hits).
    Mixed {
        /// The index route: [`TextQuery::Words`], [`TextQuery::Trigrams`] or
        /// [`TextQuery::Substrings`] (any other is searched as it is, without the rest).
        index: Box<TextQuery>,
        /// One per alternative of the index route's expression (its own expression and
        /// its substrings), or none when no candidate needs a test.
        checks: Vec<Check>,
        /// The alternatives of substrings alone, after the index's hits.
        substrings: Vec<Alternative>,
    },
}

/// One alternative of an index expression with the literal substrings its part must also
/// hold (`all`), and what no part of its message may hold (`none`, `without`): see
/// [`TextQuery::Mixed`].
///
/// Exclusions are tested per message, not per part: search returns one hit per message,
/// and `deploy -staging` reads "messages about deploy without staging", so a candidate
/// part is left out when any searchable part of its message holds an excluded term.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Check {
    /// The alternative's own FTS5 expression (sanitized, as the index route's).
    pub expr: String,
    /// The substrings the part must hold (`all`) and no part of its message may hold
    /// (`none`), as the LIKE route tests them.
    pub terms: Alternative,
    /// The alternative's excluded words, one sanitized FTS5 expression each (`"staging"`,
    /// `"conf"*`): no part of the candidate's message may match one in the word index.
    /// Only for the word route ([`TextQuery::Words`]); empty on the others.
    pub without: Vec<String>,
}

impl Check {
    /// Whether the check tests anything besides its expression.
    fn tests(&self) -> bool {
        !self.terms.all.is_empty() || !self.terms.none.is_empty() || !self.without.is_empty()
    }
}

/// Whether `c` belongs to a script written without spaces between words (Thai, Lao,
/// Myanmar, Khmer, Hangul, CJK ideographs, kana, Bopomofo …), which the word index cannot
/// split into words: queries with such characters go to the trigram index, and the
/// trigram index holds exactly the parts whose text has one (schema V7; its view
/// `parts_search_trigram` spells the same ranges in SQL, which a test checks).
pub fn is_spaceless_script(c: char) -> bool {
    matches!(c as u32,
        0x0E00..=0x0EFF     // Thai, Lao
        | 0x1000..=0x109F   // Myanmar
        | 0x1780..=0x17FF   // Khmer
        | 0x1100..=0x11FF   // Hangul Jamo
        | 0x2E80..=0x2FDF   // CJK radicals, Kangxi
        | 0x3005..=0x3007   // 々 〆 〇
        | 0x3021..=0x3029   // Hangzhou numerals
        | 0x3040..=0x31FF   // kana, Bopomofo, Hangul compatibility Jamo
        | 0x3400..=0x4DBF   // CJK extension A
        | 0x4E00..=0x9FFF   // CJK unified ideographs
        | 0xA960..=0xA97F   // Hangul Jamo extended A
        | 0xAC00..=0xD7FF   // Hangul syllables, Jamo extended B
        | 0xF900..=0xFAFF   // CJK compatibility ideographs
        | 0xFF66..=0xFFDC   // halfwidth kana and Hangul
        | 0x20000..=0x3134F // CJK extensions B–G
    )
}

/// One alternative of a substring search: the part's text holds every `all` term and no
/// part of its message holds a `none` term (an exclusion leaves out the whole message, on
/// every route), as literal substrings (ASCII letters in either case, as LIKE compares
/// them; the trigram index also folds other letters).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Alternative {
    /// Terms that must all occur.
    pub all: Vec<String>,
    /// Terms that must not occur.
    pub none: Vec<String>,
}

impl Alternative {
    /// The alternative of one term that must occur.
    pub fn of(term: &str) -> Alternative {
        Alternative {
            all: vec![term.to_owned()],
            none: Vec::new(),
        }
    }
}

/// A search and its filters; empty lists and `None` mean "any".
#[derive(Debug, Clone, PartialEq)]
pub struct SearchFilter {
    /// What to match.
    pub query: TextQuery,
    /// Only sessions from these sources.
    pub sources: Vec<String>,
    /// No sessions from these sources.
    pub exclude_sources: Vec<String>,
    /// Only sessions whose agent worked in this directory (exactly: not those below it).
    pub directory: Option<String>,
    /// Only messages with these roles.
    pub roles: Vec<String>,
    /// Only this session.
    pub session_id: Option<String>,
    /// Only messages created at or after this time (ms).
    pub after: Option<i64>,
    /// Only messages created before this time (ms).
    pub before: Option<i64>,
    /// At most this many hits.
    pub limit: u64,
    /// Skip this many hits first.
    pub offset: u64,
    /// Rank only the newest this many matching parts that pass the filters (newest by
    /// `seq`: the order parts were written), instead of every match: the hits are the best
    /// of that window, in rank order. `None` ranks every match. Bounds the cost of a query
    /// that matches much of the history (a short prefix typed into a search box) by the
    /// window, not the matches. Applies to the index routes ([`TextQuery::Words`],
    /// [`TextQuery::Trigrams`], the indexed half of [`TextQuery::Substrings`]); the LIKE
    /// scans are newest first already and ignore it.
    pub window: Option<u64>,
}

impl SearchFilter {
    /// A search for `query` with no filters and the first 20 hits.
    pub fn new(query: TextQuery) -> Self {
        SearchFilter {
            query,
            sources: Vec::new(),
            exclude_sources: Vec::new(),
            directory: None,
            roles: Vec::new(),
            session_id: None,
            after: None,
            before: None,
            limit: 20,
            offset: 0,
            window: None,
        }
    }

    /// Whether any condition besides the text narrows the hits (a source, directory,
    /// role, session or time): the routes that read only the index when none does.
    pub fn is_narrowed(&self) -> bool {
        !self.sources.is_empty()
            || !self.exclude_sources.is_empty()
            || self.directory.is_some()
            || !self.roles.is_empty()
            || self.session_id.is_some()
            || self.after.is_some()
            || self.before.is_some()
    }

    /// Whether a condition reads the hit's session row (`s`): its source or directory.
    fn reads_session(&self) -> bool {
        !self.sources.is_empty() || !self.exclude_sources.is_empty() || self.directory.is_some()
    }
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
    /// The message's role.
    pub role: String,
    /// When the message was created (ms).
    pub created_at: i64,
    /// Text around the match, matches between [`MATCH_START`] and [`MATCH_END`] (and no
    /// other of those characters: the text's own are [`STX_SYMBOL`] / [`ETX_SYMBOL`]).
    pub snippet: String,
    /// Rank of the best part, lower is better: FTS5's bm25 on SQLite (0 for LIKE
    /// matches; in a typing window's search for a phrase ending in a short prefix, bm25
    /// without its IDF factor, which is the same for every hit of such a query), minus
    /// `ts_rank_cd` or minus the terms' frequency on PostgreSQL (0 for a literal
    /// substring). Compare ranks within one search only.
    pub rank: f64,
    /// The session's source.
    pub source: String,
    /// The session's model.
    pub session_model: Option<String>,
    /// The message's model (assistant messages).
    pub message_model: Option<String>,
    /// The session's title.
    pub title: Option<String>,
    /// When the session was created (ms).
    pub session_created_at: i64,
}

fn c(table: &str, column: &str) -> Expr {
    Expr::col((Alias::new(table), Alias::new(column)))
}

fn tc(table: &str, column: &str) -> (Alias, Alias) {
    (Alias::new(table), Alias::new(column))
}

/// How the tables of a query are ordered.
#[derive(Clone, Copy, PartialEq, Eq)]
enum JoinOrder {
    /// As written (CROSS JOIN; SQLite keeps the left side outside, the ON goes to WHERE).
    /// Ranking starts from the full-text match so its cost follows the matches: without
    /// this, a filter such as `source IN (…)` can lead the planner to run the match once
    /// per candidate part.
    Fixed,
    /// The planner's choice, for queries without a full-text match (the LIKE route).
    Planner,
}

impl JoinOrder {
    fn join_type(self) -> JoinType {
        match self {
            JoinOrder::Fixed => JoinType::CrossJoin,
            JoinOrder::Planner => JoinType::InnerJoin,
        }
    }
}

/// Adds `table AS alias ON on` to `query` in `order`.
fn join(query: &mut SelectStatement, order: JoinOrder, table: &str, alias: &str, on: Expr) {
    query.join_as(
        order.join_type(),
        Alias::new(table),
        Alias::new(alias),
        on.clone(),
    );
    if order == JoinOrder::Fixed {
        query.and_where(on);
    }
}

/// Joins the view `parts_search` as `v` to parts `p`: a part's searched text
/// (`v.search_text`), computed from its JSON where it is read (schema V11).
fn join_text(query: &mut SelectStatement) {
    join(
        query,
        JoinOrder::Planner,
        "parts_search",
        "v",
        c("v", "seq").equals(tc("p", "seq")),
    );
}

/// Joins messages `m` and sessions `s` to parts `p` (for the columns of a hit).
fn join_hit_tables(query: &mut SelectStatement, order: JoinOrder) {
    join_tables(query, order, true, true);
}

fn join_tables(query: &mut SelectStatement, order: JoinOrder, message: bool, session: bool) {
    if message {
        join(
            query,
            order,
            "messages",
            "m",
            c("m", "id").equals(tc("p", "message_id")),
        );
    }
    if session {
        join(
            query,
            order,
            "sessions",
            "s",
            c("s", "id").equals(tc("p", "session_id")),
        );
    }
}

/// Joins messages `m` and sessions `s` to parts `p` when the filters (or `all`, the
/// columns of a hit) need them, and adds the filters.
fn filter_hits(query: &mut SelectStatement, filter: &SearchFilter, order: JoinOrder, all: bool) {
    let needs_message =
        all || !filter.roles.is_empty() || filter.after.is_some() || filter.before.is_some();
    let needs_session = all || filter.reads_session();
    join_tables(query, order, needs_message, needs_session);
    let mut cond = Cond::all();
    if !filter.sources.is_empty() {
        cond = cond.add(c("s", "source").is_in(filter.sources.iter().cloned()));
    }
    if !filter.exclude_sources.is_empty() {
        cond = cond.add(c("s", "source").is_not_in(filter.exclude_sources.iter().cloned()));
    }
    if let Some(directory) = &filter.directory {
        cond = cond.add(c("s", "directory").eq(directory.as_str()));
    }
    cond = message_filters(cond, filter, "p");
    query.cond_where(cond);
}

/// Adds the filters on a message `m` to `cond`: its role, its session (the `session_id` of
/// the table aliased `session_of`) and its creation time.
fn message_filters(mut cond: Cond, filter: &SearchFilter, session_of: &str) -> Cond {
    if !filter.roles.is_empty() {
        cond = cond.add(c("m", "role").is_in(filter.roles.iter().cloned()));
    }
    if let Some(session) = &filter.session_id {
        cond = cond.add(c(session_of, "session_id").eq(session.as_str()));
    }
    if let Some(after) = filter.after {
        cond = cond.add(c("m", "created_at").gte(after));
    }
    if let Some(before) = filter.before {
        cond = cond.add(c("m", "created_at").lt(before));
    }
    cond
}

/// Output columns of a hit; `text` (snippet source) and `rank` differ by path.
fn hit_columns(query: &mut SelectStatement, text: Expr, rank: Expr) {
    query
        .expr(c("p", "message_id"))
        .expr(c("p", "session_id"))
        .expr(c("p", "id"))
        .expr(c("m", "role"))
        .expr(c("m", "created_at"))
        .expr(text)
        .expr(rank)
        .expr(c("s", "source"))
        .expr(c("s", "model"))
        .expr(c("m", "model"))
        .expr(c("s", "title"))
        .expr(c("s", "created_at"));
}

fn matches(index: &'static str, expr: &str) -> Expr {
    Expr::cust_with_values(format!("\"{index}\" MATCH ?"), [expr])
}

/// Adds `index.rowid >= floor` (the window of [`SearchFilter::window`]) to `query`.
fn within(query: &mut SelectStatement, index: &str, floor: Option<i64>) {
    if let Some(floor) = floor {
        query.and_where(c(index, "rowid").gte(floor));
    }
}

/// The `seq` of the `window`-th newest matching part that passes the filters: ranking
/// only the matches from it on ranks the window of [`SearchFilter::window`]. `None` when
/// fewer parts match (the window holds every match).
///
/// FTS5 hands matches over newest first without ranking them (it consumes `ORDER BY
/// rowid DESC`), so this reads `window` matches and stops: its cost follows the window,
/// not the matches.
fn window_floor(
    conn: &Connection,
    index: &'static str,
    expr: &str,
    filter: &SearchFilter,
    checks: Option<&Cond>,
    window: u64,
) -> rusqlite::Result<Option<i64>> {
    if window == 0 {
        // An empty window: nothing is ranked (no part has a seq above the largest).
        return Ok(Some(i64::MAX));
    }
    let order = JoinOrder::Fixed;
    let mut query = Query::select();
    query.expr(c(index, "rowid")).from(Alias::new(index));
    let needs_part = filter.is_narrowed() || checks.is_some();
    if needs_part {
        join(
            &mut query,
            order,
            "parts",
            "p",
            c("p", "seq").equals(tc(index, "rowid")),
        );
        filter_hits(&mut query, filter, order, false);
        add_checks(&mut query, order, checks);
    }
    query
        .and_where(matches(index, expr))
        .order_by(tc(index, "rowid"), Order::Desc)
        .limit(1)
        .offset(window - 1);
    let (sql, values) = query.build_rusqlite(SqliteQueryBuilder);
    let mut stmt = conn.prepare_cached(&sql)?;
    let mut rows = stmt.query(&*values.as_params())?;
    match rows.next()? {
        Some(row) => Ok(Some(row.get(0)?)),
        None => Ok(None),
    }
}

/// A candidate hit: the part, its message, its rank.
#[derive(Debug, Clone, PartialEq)]
struct Candidate {
    seq: i64,
    message_id: String,
    rank: f64,
    /// Found by the LIKE over plain text (no snippet from an index).
    plain: bool,
}

/// The best `n` matching parts that pass the filters, best first, without snippets.
///
/// FTS5 hands rows over in rank order (it consumes `ORDER BY rank`), so the joins and the
/// filters only run for rows up to the limit: the cost is that of ranking the matches, as
/// for a plain full-text query.
fn ranked(
    conn: &Connection,
    index: &'static str,
    expr: &str,
    filter: &SearchFilter,
    checks: Option<&Cond>,
    floor: Option<i64>,
    n: u64,
) -> rusqlite::Result<Vec<Candidate>> {
    // Always start from the match. With a session filter the planner prefers walking the
    // session's parts and probing the index once per part, and each probe re-runs the full
    // match: time grew with the square of the session's size (735 ms at 1,000 messages
    // against 9 ms unfiltered). Match-first costs what an unfiltered search costs.
    let order = JoinOrder::Fixed;
    let mut query = Query::select();
    query
        .expr(c("p", "seq"))
        .expr(c("p", "message_id"))
        .expr(c(index, "rank"))
        .from(Alias::new(index));
    join(
        &mut query,
        order,
        "parts",
        "p",
        c("p", "seq").equals(tc(index, "rowid")),
    );
    filter_hits(&mut query, filter, order, false);
    add_checks(&mut query, order, checks);
    within(&mut query, index, floor);
    query
        .and_where(matches(index, expr))
        .order_by(tc(index, "rank"), Order::Asc)
        .limit(n);
    let (sql, values) = query.build_rusqlite(SqliteQueryBuilder);
    let mut stmt = conn.prepare_cached(&sql)?;
    let rows = stmt.query_map(&*values.as_params(), |row| {
        Ok(Candidate {
            seq: row.get(0)?,
            message_id: row.get(1)?,
            rank: row.get(2)?,
            plain: false,
        })
    })?;
    rows.collect()
}

/// The searchable text of a part (`v.search_text`, [`join_text`]) holds `term`: an escaped
/// LIKE, which folds ASCII case. The one substring test of every route that tests text.
fn holds(term: &str) -> Expr {
    c("v", "search_text")
        .like(sea_query::LikeExpr::new(format!("%{}%", escape_like(term))).escape('\\'))
}

/// No searchable part of the message of part `p` matches the word expression `expr`: a
/// correlated probe of the message's parts against the word index's matches for `expr`,
/// which SQLite lists once per statement (an uncorrelated `IN`), so a candidate costs a
/// lookup per part of its message. Probing the index per part instead (FTS5 seeking the
/// part's rowid) cost ~0.15 ms a probe: 2.4 s for 8,000 candidates all left out.
fn message_lacks_words(expr: &str) -> Expr {
    Expr::cust_with_values(
        "NOT EXISTS (SELECT 1 FROM \"parts\" AS \"q\" \
         WHERE \"q\".\"message_id\" = \"p\".\"message_id\" \
         AND \"q\".\"seq\" IN (SELECT \"rowid\" FROM \"parts_fts\" WHERE \"parts_fts\" MATCH ?))",
        [expr],
    )
}

/// No searchable part of the message of part `p` holds `term` as a substring of its
/// searchable text (the escaped LIKE of [`holds`]).
fn message_lacks_text(term: &str) -> Expr {
    Expr::cust_with_values(
        "NOT EXISTS (SELECT 1 FROM \"parts\" AS \"q\" CROSS JOIN \"parts_search\" AS \"w\" \
         WHERE \"q\".\"message_id\" = \"p\".\"message_id\" AND \"w\".\"seq\" = \"q\".\"seq\" \
         AND \"w\".\"search_text\" LIKE ? ESCAPE '\\')",
        [format!("%{}%", escape_like(term))],
    )
}

/// What `check` tests on a candidate part `p` (its text `v`): the part holds every `all`
/// substring, and no part of its message holds a `none` substring or matches a `without`
/// word expression.
fn check_terms(check: &Check) -> Cond {
    let mut all = literal_alternative(&check.terms);
    for expr in &check.without {
        all = all.add(message_lacks_words(expr));
    }
    all
}

/// The text of part `p` (`v`) holds every `all` term of `alternative`, and no part of its
/// message holds a `none` term (an exclusion leaves out the whole message).
fn literal_alternative(alternative: &Alternative) -> Cond {
    let mut all = Cond::all();
    for term in &alternative.all {
        all = all.add(holds(term));
    }
    for term in &alternative.none {
        all = all.add(message_lacks_text(term));
    }
    all
}

/// The text matches one of `alternatives` (those without an `all` term match nothing).
fn literal_alternatives(alternatives: &[Alternative]) -> Cond {
    let mut any = Cond::any();
    for alternative in alternatives.iter().filter(|a| !a.all.is_empty()) {
        any = any.add(literal_alternative(alternative));
    }
    any
}

/// The condition [`TextQuery::Mixed`]'s `checks` put on the candidates of `index` (parts
/// `p` with their text `v`); `None` when there is nothing to test. With one check its
/// expression is the index route's own, which the candidate matched; with several, a
/// candidate passes a check only if it also matches that check's expression (a rowid
/// list of the index's matches for it, computed once per statement).
fn checks_cond(index: &'static str, checks: &[Check]) -> Option<Cond> {
    if !checks.iter().any(Check::tests) {
        return None;
    }
    if let [check] = checks {
        return Some(check_terms(check));
    }
    let mut any = Cond::any();
    for check in checks {
        let matched = Expr::cust_with_values(
            format!(
                "\"p\".\"seq\" IN (SELECT \"rowid\" FROM \"{index}\" WHERE \"{index}\" MATCH ?)"
            ),
            [check.expr.as_str()],
        );
        any = any.add(Cond::all().add(matched).add(check_terms(check)));
    }
    Some(any)
}

/// Joins the part's text `v` to `p` in `order` and adds `cond` (a [`checks_cond`]).
fn add_checks(query: &mut SelectStatement, order: JoinOrder, cond: Option<&Cond>) {
    if let Some(cond) = cond {
        join(
            query,
            order,
            "parts_search",
            "v",
            c("v", "seq").equals(tc("p", "seq")),
        );
        query.cond_where(cond.clone());
    }
}

/// The newest `n` parts outside the trigram index that match one of `plain` and pass the
/// filters (the plain-text half of [`TextQuery::Substrings`]).
fn plain_matches(
    conn: &Connection,
    plain: &[Alternative],
    filter: &SearchFilter,
    n: u64,
) -> rusqlite::Result<Vec<Candidate>> {
    let any = literal_alternatives(plain);
    let mut query = Query::select();
    query
        .expr(c("p", "seq"))
        .expr(c("p", "message_id"))
        .from_as(Alias::new("parts_search"), Alias::new("v"));
    join(
        &mut query,
        JoinOrder::Planner,
        "parts",
        "p",
        c("p", "seq").equals(tc("v", "seq")),
    );
    filter_hits(&mut query, filter, JoinOrder::Planner, true);
    // Parts the trigram index does not hold (its own list of documents says which).
    query
        .and_where(Expr::cust(
            "NOT EXISTS (SELECT 1 FROM \"parts_fts_trigram_docsize\" AS \"d\" WHERE \"d\".\"id\" = \"p\".\"seq\")",
        ))
        .cond_where(any)
        .order_by(tc("m", "created_at"), Order::Desc)
        .order_by(tc("m", "id"), Order::Desc)
        .order_by(tc("p", "position"), Order::Asc)
        .limit(n);
    let (sql, values) = query.build_rusqlite(SqliteQueryBuilder);
    let mut stmt = conn.prepare_cached(&sql)?;
    let rows = stmt.query_map(&*values.as_params(), |row| {
        Ok(Candidate {
            seq: row.get(0)?,
            message_id: row.get(1)?,
            rank: 0.0,
            plain: true,
        })
    })?;
    rows.collect()
}

/// The first `wanted` candidates of distinct messages (the best part of each), asking for
/// more rows while further parts of messages already seen crowd the list.
fn distinct_messages(
    wanted: u64,
    mut fetch: impl FnMut(u64) -> rusqlite::Result<Vec<Candidate>>,
) -> rusqlite::Result<Vec<Candidate>> {
    // Most messages have one searchable part, so a few extra candidates usually cover the
    // parts of a message that also match; when they don't, ask for more.
    let mut batch = wanted.saturating_add(wanted / 2).saturating_add(4);
    loop {
        let candidates = fetch(batch)?;
        let exhausted = (candidates.len() as u64) < batch;
        let mut seen = std::collections::HashSet::new();
        let unique: Vec<Candidate> = candidates
            .into_iter()
            .filter(|hit| seen.insert(hit.message_id.clone()))
            .collect();
        if exhausted || unique.len() as u64 >= wanted {
            return Ok(unique);
        }
        batch = batch.saturating_mul(4);
    }
}

/// What an index search tests besides its expression: the plain half of
/// [`TextQuery::Substrings`], the checks and substring alternatives of [`TextQuery::Mixed`].
#[derive(Clone, Copy, Default)]
struct Extras<'a> {
    plain: &'a [Alternative],
    checks: &'a [Check],
    substrings: &'a [Alternative],
}

fn fts_search(
    conn: &Connection,
    index: &'static str,
    expr: &str,
    extras: Extras<'_>,
    filter: &SearchFilter,
    unread: &mut Unread,
) -> rusqlite::Result<Vec<SearchHit>> {
    let mut hits = fts_hits(conn, index, expr, extras, filter, unread)?;
    nul_free_snippets(conn, index, expr, &mut hits)?;
    Ok(hits)
}

/// [`fts_search`] with the snippets of parts holding a NUL still to make.
fn fts_hits(
    conn: &Connection,
    index: &'static str,
    expr: &str,
    extras: Extras<'_>,
    filter: &SearchFilter,
    unread: &mut Unread,
) -> rusqlite::Result<Vec<SearchHit>> {
    if filter.limit == 0 {
        return Ok(Vec::new());
    }
    let Extras {
        plain,
        checks,
        substrings,
    } = extras;
    let checks = checks_cond(index, checks);
    let checks = checks.as_ref();
    let limit = usize::try_from(filter.limit).unwrap_or(usize::MAX);
    if index == "parts_fts"
        && checks.is_none()
        && substrings.is_empty()
        && let Some(window) = filter.window
        && let Some(hits) = typing_page(conn, expr, filter, window, TYPING_WALK, unread)?
    {
        return Ok(hits);
    }
    let floor = match filter.window {
        Some(window) => window_floor(conn, index, expr, filter, checks, window)?,
        None => None,
    };
    let alone = !substrings.iter().any(|a| !a.all.is_empty());
    if filter.offset == 0 {
        let mut hits = first_page(conn, index, expr, filter, checks, floor, unread)?;
        if plain.iter().any(|a| !a.all.is_empty()) && hits.len() < limit {
            let seen: std::collections::HashSet<String> =
                hits.iter().map(|h| h.message_id.clone()).collect();
            let more = (limit - hits.len()) as u64;
            let extra = distinct_messages(more, |n| {
                let mut rows =
                    plain_matches(conn, plain, filter, n.saturating_add(seen.len() as u64))?;
                rows.retain(|r| !seen.contains(&r.message_id));
                Ok(rows)
            })?;
            let page: Vec<Candidate> = extra.into_iter().take(limit - hits.len()).collect();
            hits.extend(page_hits(conn, index, expr, plain, &page, unread)?);
        }
        if !alone && hits.len() < limit {
            // The index's hits are all here: the substring alternatives' come after them.
            let seen = hits.iter().map(|h| h.message_id.clone()).collect();
            let more = (limit - hits.len()) as u64;
            hits.extend(like_walk(
                conn,
                substrings,
                filter,
                &LIKE_STEPS,
                more,
                &seen,
                unread,
            )?);
        }
        return Ok(hits);
    }
    let wanted = filter.offset.saturating_add(filter.limit);
    let mut found = distinct_messages(wanted, |n| {
        ranked(conn, index, expr, filter, checks, floor, n)
    })?;
    if plain.iter().any(|a| !a.all.is_empty()) && (found.len() as u64) < wanted {
        // A part is either in the trigram index or in this scan, never both, but a message
        // may have parts in each: it keeps its indexed (better ranked) hit.
        let seen: std::collections::HashSet<String> =
            found.iter().map(|f| f.message_id.clone()).collect();
        let more = wanted - found.len() as u64;
        let extra = distinct_messages(more, |n| {
            let mut rows = plain_matches(conn, plain, filter, n.saturating_add(seen.len() as u64))?;
            rows.retain(|r| !seen.contains(&r.message_id));
            Ok(rows)
        })?;
        found.extend(
            extra
                .into_iter()
                .take(usize::try_from(more).unwrap_or(usize::MAX)),
        );
    }
    let offset = usize::try_from(filter.offset).unwrap_or(usize::MAX);
    // Every hit of the index route when it has fewer than the page needs.
    let all_found = found.len();
    let seen: std::collections::HashSet<String> = if !alone && (all_found as u64) < wanted {
        found.iter().map(|f| f.message_id.clone()).collect()
    } else {
        std::collections::HashSet::new()
    };
    let page: Vec<Candidate> = found.into_iter().skip(offset).take(limit).collect();
    let mut hits = page_hits(conn, index, expr, plain, &page, unread)?;
    if !alone && (all_found as u64) < wanted {
        let more = wanted - all_found as u64;
        let extra = like_walk(conn, substrings, filter, &LIKE_STEPS, more, &seen, unread)?;
        let skip = offset.saturating_sub(all_found);
        hits.extend(
            extra
                .into_iter()
                .skip(skip)
                .take(limit - hits.len().min(limit)),
        );
    }
    Ok(hits)
}

/// How far [`typing_page`] walks the newest indexed parts: this many steps of this many
/// parts before it leaves the query to the index.
const TYPING_WALK: (usize, u64) = (8, 1_000);

/// bm25's parameters, as FTS5 fixes them.
const BM25_K1: f64 = 1.2;
const BM25_B: f64 = 0.75;

/// The typing window's first page for a phrase ending in a short prefix (`"con"*`,
/// `"handle_r"*`), without the word index's prefix query; `None` when the query is not one
/// of those (or has filters or an offset), or when the window is not found within the walk
/// ([`TYPING_WALK`]): the index answers then.
///
/// Why. FTS5 has no prefix index here, so a prefix query first merges the position lists
/// of every term it expands to over the whole history, whatever rowid bounds or limit the
/// statement has, and bm25 runs the phrase again to count its documents: three full merges
/// per keystroke with the window's floor (`"handle_r"*` expands `r*`: ~450 ms on 100,000
/// messages). The newest matches are found instead by reading the newest indexed parts'
/// text (the index holds exactly their current text, V7), a step at a time, until the
/// window is found: a common short prefix matches most parts, so it comes within a few
/// steps. ASCII text is tokenized here (unicode61 on ASCII: runs of letters and digits,
/// lowercased) and the phrase counted in it; other text goes to a private in-memory FTS5
/// table with the index's tokenizer, and so do the page's parts, for their snippets.
///
/// Same answer as the index: the same parts match (same tokens, same text), the
/// snippets are FTS5's own `snippet()` over the same text and phrase instances, and the
/// order is bm25's: with one phrase, bm25 is IDF × f(instances, document length, average
/// length), the IDF (a count of every matching document, which costs the merge) is one
/// positive factor for the query, so f with the index's own lengths orders the hits as
/// bm25 does, ties by rowid as FTS5's sorter leaves them. [`SearchHit::rank`] is −f here
/// (bm25 without its IDF factor): compare ranks within one search only.
fn typing_page(
    conn: &Connection,
    expr: &str,
    filter: &SearchFilter,
    window: u64,
    (steps, step): (usize, u64),
    unread: &mut Unread,
) -> rusqlite::Result<Option<Vec<SearchHit>>> {
    if filter.is_narrowed() || filter.offset != 0 || window == 0 {
        return Ok(None);
    }
    let Some(words) = short_prefix_phrase(expr) else {
        return Ok(None);
    };
    let mem = Connection::open_in_memory()?;
    mem.execute_batch(
        "CREATE VIRTUAL TABLE w USING fts5(t, tokenize='unicode61 remove_diacritics 2')",
    )?;
    // seq -> (message id, document length in tokens, text when ASCII), for the parts read.
    let mut parts: std::collections::HashMap<i64, (String, i64, Option<String>)> =
        std::collections::HashMap::new();
    // The matches of ASCII text, counted here: (seq, instances).
    let mut ascii: Vec<(i64, usize)> = Vec::new();
    let mut below = i64::MAX;
    let mut matched = 0_u64;
    let mut exhausted = false;
    {
        let mut newest = conn.prepare_cached(
            "SELECT d.id, d.sz, v.search_text, p.message_id FROM parts_fts_docsize AS d \
             CROSS JOIN parts AS p CROSS JOIN parts_search AS v \
             WHERE p.seq = d.id AND v.seq = d.id AND d.id < ?1 ORDER BY d.id DESC LIMIT ?2",
        )?;
        let mut insert = mem.prepare("INSERT INTO w (rowid, t) VALUES (?1, ?2)")?;
        let mut count = mem.prepare("SELECT count(*) FROM w WHERE w MATCH ?1")?;
        for done in 1..=steps {
            let mut rows = newest.query(rusqlite::params![below, step])?;
            let mut read = 0_u64;
            // One transaction per step: FTS5 writes one segment for it, not one per part.
            mem.execute_batch("BEGIN")?;
            while let Some(row) = rows.next()? {
                let seq: i64 = row.get(0)?;
                let size: Vec<u8> = row.get(1)?;
                let text: Option<String> = row.get(2)?;
                let length = first_varint(&size).unwrap_or(0);
                match text {
                    // unicode61 on ASCII is plain: runs of letters and digits, lowercased.
                    Some(text) if text.is_ascii() => {
                        let n = ascii_instances(&text, &words);
                        if n > 0 {
                            ascii.push((seq, n));
                        }
                        parts.insert(seq, (row.get(3)?, length, Some(text)));
                    }
                    text => {
                        insert.execute(rusqlite::params![seq, text.as_deref().map(without_nul)])?;
                        parts.insert(seq, (row.get(3)?, length, None));
                    }
                }
                below = seq;
                read += 1;
            }
            mem.execute_batch("COMMIT")?;
            let in_mem: u64 = count.query_row([expr], |r| r.get(0))?;
            matched = in_mem + ascii.len() as u64;
            if read < step {
                exhausted = true;
                break;
            }
            // Stop when the window is full, or when at this rate it will not be within the
            // walk (a rarer prefix: its index query is cheap).
            let done = done as u64;
            if matched >= window
                || matched.saturating_mul(steps as u64) < window.saturating_mul(done) / 2
            {
                break;
            }
        }
    }
    if matched < window && !exhausted {
        return Ok(None);
    }
    let Some(avgdl) = average_length(conn)? else {
        return Ok(None);
    };
    // Every match with its phrase instances: counted above for ASCII text; for the rest,
    // highlight() opens one mark per instance (instances of these phrases never overlap:
    // short_prefix_phrase).
    let mut all: Vec<(i64, usize)> = ascii;
    {
        let mut stmt = mem.prepare(
            "SELECT rowid, highlight(w, 0, char(1), char(2)), t FROM w WHERE w MATCH ?1",
        )?;
        let mut rows = stmt.query([expr])?;
        while let Some(row) = rows.next()? {
            let marked: String = row.get(1)?;
            let text: Option<String> = row.get(2)?;
            let own = text.as_deref().map_or(0, |t| t.matches('\u{1}').count());
            all.push((
                row.get(0)?,
                marked.matches('\u{1}').count().saturating_sub(own),
            ));
        }
    }
    // The window: the newest `window` matches.
    all.sort_by_key(|a| std::cmp::Reverse(a.0));
    all.truncate(usize::try_from(window).unwrap_or(usize::MAX));
    let mut scored: Vec<(f64, i64)> = all
        .iter()
        .map(|&(seq, instances)| {
            let length = parts.get(&seq).map_or(0, |p| p.1);
            (
                bm25_without_idf(instances as f64, length as f64, avgdl),
                seq,
            )
        })
        .collect();
    // bm25 is −IDF × f, best (lowest) first: f descending, ties by rowid.
    scored.sort_by(|a, b| b.0.total_cmp(&a.0).then(a.1.cmp(&b.1)));
    let limit = usize::try_from(filter.limit).unwrap_or(usize::MAX);
    let mut seen = std::collections::HashSet::new();
    let page: Vec<(f64, i64)> = scored
        .into_iter()
        .filter(|(_, seq)| parts.get(seq).is_some_and(|p| seen.insert(p.0.clone())))
        .take(limit)
        .collect();
    if page.is_empty() {
        return Ok(Some(Vec::new()));
    }
    // The page's snippets: FTS5's own, so its ASCII texts join the in-memory table; a
    // long text's are made from its pieces ([`Pieces`], as for the index's hits).
    let mut snippets: std::collections::HashMap<i64, String> = std::collections::HashMap::new();
    let mut short: Vec<i64> = Vec::new();
    let mut long: Option<Pieces> = None;
    mem.execute_batch("BEGIN")?;
    {
        let mut insert = mem.prepare("INSERT INTO w (rowid, t) VALUES (?1, ?2)")?;
        let mut stored = mem.prepare("SELECT t FROM w WHERE rowid = ?1")?;
        for &(_, seq) in &page {
            let text: Option<String> = match parts.get(&seq) {
                Some((_, _, Some(text))) => Some(text.clone()),
                _ => stored
                    .query_row([seq], |r| r.get::<_, Option<String>>(0))
                    .optional()?
                    .flatten(),
            };
            let ascii = matches!(parts.get(&seq), Some((_, _, Some(_))));
            match text {
                Some(text) if text.len() > LONG_PART => {
                    let pieces = match &mut long {
                        Some(pieces) => pieces,
                        empty => empty.insert(Pieces::new("parts_fts")?),
                    };
                    snippets.insert(seq, pieces.snippet(expr, &text)?);
                }
                Some(text) if ascii => {
                    insert.execute(rusqlite::params![seq, without_nul(&text)])?;
                    short.push(seq);
                }
                _ => short.push(seq),
            }
        }
    }
    mem.execute_batch("COMMIT")?;
    let ids = serde_json::Value::from(short).to_string();
    {
        let mut stmt = mem.prepare(&format!(
            "SELECT rowid, {} FROM w \
             WHERE w MATCH ?1 AND rowid IN (SELECT value FROM json_each(?2))",
            snippet_sql("w")
        ))?;
        let mut rows = stmt.query(rusqlite::params![expr, ids])?;
        while let Some(row) = rows.next()? {
            snippets.insert(row.get(0)?, row.get(1)?);
        }
    }
    let mut query = Query::select();
    hit_columns(&mut query, Expr::val(""), Expr::val(0.0));
    query
        .expr(c("p", "seq"))
        .from_as(Alias::new("parts"), Alias::new("p"));
    join_hit_tables(&mut query, JoinOrder::Planner);
    query.and_where(c("p", "seq").is_in(page.iter().map(|p| p.1)));
    let (sql, values) = query.build_rusqlite(SqliteQueryBuilder);
    let mut stmt = conn.prepare_cached(&sql)?;
    let mut by_seq: std::collections::HashMap<i64, SearchHit> = std::collections::HashMap::new();
    for row in stmt.query_map(&*values.as_params(), |row| {
        Ok((row.get::<_, i64>(12)?, hit(row, None, unread)?))
    })? {
        if let (seq, Some(hit)) = row? {
            by_seq.insert(seq, hit);
        }
    }
    Ok(Some(
        page.iter()
            .filter_map(|&(f, seq)| {
                by_seq.remove(&seq).map(|mut hit| {
                    hit.rank = -f;
                    hit.snippet = snippets.remove(&seq).unwrap_or_default();
                    hit
                })
            })
            .collect(),
    ))
}

/// How many times the phrase `words` (its last word a prefix) occurs in ASCII `text`, as
/// unicode61 tokenizes it: runs of ASCII letters and digits, lowercased (FTS5 counts an
/// instance at every position where the phrase starts).
fn ascii_instances(text: &str, words: &[String]) -> usize {
    let tokens: Vec<&str> = text
        .split(|c: char| !c.is_ascii_alphanumeric())
        .filter(|t| !t.is_empty())
        .collect();
    let k = words.len();
    if k == 0 || tokens.len() < k {
        return 0;
    }
    (0..=tokens.len() - k)
        .filter(|&o| {
            words.iter().enumerate().all(|(j, w)| {
                let t = tokens[o + j].as_bytes();
                if j + 1 == k {
                    t.get(..w.len())
                        .is_some_and(|head| head.eq_ignore_ascii_case(w.as_bytes()))
                } else {
                    t.eq_ignore_ascii_case(w.as_bytes())
                }
            })
        })
        .count()
}

/// bm25's per-document factor for one phrase, computed as FTS5 computes it (the same
/// operations in the same order, so the same doubles): `instances` of the phrase in a
/// document of `length` tokens, `avgdl` the index's average length.
fn bm25_without_idf(instances: f64, length: f64, avgdl: f64) -> f64 {
    (instances * (BM25_K1 + 1.0)) / (instances + BM25_K1 * (1.0 - BM25_B + BM25_B * length / avgdl))
}

/// The word index's average document length in tokens, as bm25 reads it: its total of
/// tokens over its number of rows (the averages record, id 1 of `parts_fts_data`: a
/// varint row count, then a varint total per column). `None` when there is none.
fn average_length(conn: &Connection) -> rusqlite::Result<Option<f64>> {
    let block: Option<Vec<u8>> = conn
        .prepare_cached("SELECT block FROM parts_fts_data WHERE id = 1")?
        .query_row([], |r| r.get(0))
        .optional()?;
    let Some(block) = block else {
        return Ok(None);
    };
    let Some((rows, used)) = varint(&block) else {
        return Ok(None);
    };
    let Some(tokens) = block.get(used..).and_then(first_varint) else {
        return Ok(None);
    };
    if rows <= 0 {
        return Ok(None);
    }
    Ok(Some(tokens as f64 / rows as f64))
}

/// The first SQLite varint of `bytes` (FTS5's format), if whole.
fn first_varint(bytes: &[u8]) -> Option<i64> {
    varint(bytes).map(|(v, _)| v)
}

/// An SQLite varint at the start of `bytes` and how many bytes it took: big-endian groups
/// of 7 bits, high bit set on every byte but the last, and a ninth byte of 8 bits.
fn varint(bytes: &[u8]) -> Option<(i64, usize)> {
    let mut value: u64 = 0;
    for (i, &byte) in bytes.iter().enumerate().take(9) {
        if i == 8 {
            value = (value << 8) | u64::from(byte);
            return Some((value as i64, 9));
        }
        value = (value << 7) | u64::from(byte & 0x7f);
        if byte & 0x80 == 0 {
            return Some((value as i64, i + 1));
        }
    }
    None
}

/// Whether `expr` is one FTS5 string with a prefix (`"…"*`, as the sanitizer writes it)
/// whose text is ASCII, whose last word has at most three characters, and whose
/// instances cannot overlap: the queries [`typing_page`] answers. The words are
/// unicode61's on ASCII: runs of letters and digits, lowercased.
fn short_prefix_phrase(expr: &str) -> Option<Vec<String>> {
    let inner = expr.strip_prefix('"')?.strip_suffix("\"*")?;
    // Inside, a quote only as a doubled quote (the sanitizer's escape).
    if inner.replace("\"\"", "").contains('"') || !inner.is_ascii() {
        return None;
    }
    let words: Vec<String> = inner
        .split(|c: char| !c.is_ascii_alphanumeric())
        .filter(|w| !w.is_empty())
        .map(str::to_ascii_lowercase)
        .collect();
    let last = words.last()?;
    if last.len() > 3 {
        return None;
    }
    // Two instances overlap when the phrase, shifted by `s` words, agrees with itself on
    // the words both cover (the last word is a prefix).
    let k = words.len();
    for s in 1..k {
        let agrees = (0..k - s).all(|j| {
            let (a, b) = (&words[j + s], &words[j]);
            if j + s == k - 1 {
                b.starts_with(a.as_str())
            } else {
                a == b
            }
        });
        if agrees {
            return None;
        }
    }
    Some(words)
}

/// The first page (no offset) in one statement: the ranked hits with their columns and
/// snippets, read only as far as the page needs. SQLite computes a row's snippet when the
/// statement steps to it, so snippets are made for the page's rows and for the few
/// further parts of messages already on it, never for the rest of the matches.
fn first_page(
    conn: &Connection,
    index: &'static str,
    expr: &str,
    filter: &SearchFilter,
    checks: Option<&Cond>,
    floor: Option<i64>,
    unread: &mut Unread,
) -> rusqlite::Result<Vec<SearchHit>> {
    let limit = usize::try_from(filter.limit).unwrap_or(usize::MAX);
    let order = JoinOrder::Fixed;
    let mut query = Query::select();
    hit_columns(&mut query, snippet(index), c(index, "rank"));
    query.from(Alias::new(index));
    join(
        &mut query,
        order,
        "parts",
        "p",
        c("p", "seq").equals(tc(index, "rowid")),
    );
    filter_hits(&mut query, filter, order, true);
    add_checks(&mut query, order, checks);
    within(&mut query, index, floor);
    query
        .and_where(matches(index, expr))
        .order_by(tc(index, "rank"), Order::Asc);
    let (sql, values) = query.build_rusqlite(SqliteQueryBuilder);
    let mut stmt = conn.prepare_cached(&sql)?;
    let mut rows = stmt.query(&*values.as_params())?;
    let mut seen = std::collections::HashSet::new();
    let mut hits = Vec::with_capacity(limit.min(64));
    while hits.len() < limit {
        let Some(row) = rows.next()? else {
            break;
        };
        let message_id: String = match row.get(0) {
            Ok(id) => id,
            Err(err @ rusqlite::Error::InvalidColumnType(..)) => {
                unread.push(Unreadable {
                    message_id: None,
                    in_other_row: false,
                    error: err,
                });
                continue;
            }
            Err(err) => return Err(err),
        };
        if seen.insert(message_id)
            && let Some(hit) = hit(row, None, unread)?
        {
            hits.push(hit);
        }
    }
    Ok(hits)
}

/// FTS5's snippet of column 0 of `index`, marked with [`MATCH_START`] / [`MATCH_END`]; for
/// a part whose JSON holds the escape of a NUL character or is longer than [`LONG_PART`]
/// characters (`p.data` of the query's parts `p`), [`NUL_SNIPPET`] instead:
/// [`nul_free_snippets`] makes that one.
///
/// Why long parts. FTS5's `snippet()` scores a window at every match by counting the
/// matches in it, all of them each time: its cost grows with the square of the matches
/// in the part. A 280 KB tool output holding one word 40,000 times took 2.9 s per search
/// of that word (a helper's walk of the web page; 0.16 s at 5,000, 0.65 s at 10,000).
///
/// Why NULs. FTS5's `snippet()` appends the pieces of a snippet as C strings (`%.*s`), so a NUL
/// in the text (a tool's output of `cat` on a binary file) cut the snippet from the NUL to
/// the next match or its end. The text is the content view's (`parts_search`), read by
/// `snippet()` itself, so nothing between could put a space there; giving the view a space
/// instead would cost every read of it (the indexer's, the LIKE scan's) a copy of the text
/// (SQLite's `replace()` cannot even take `char(0)` as its pattern: it reads it as empty).
/// The test here is a GLOB over the JSON of the page's rows only, next to `snippet()`,
/// which reads and tokenizes all of that text anyway: GLOB skips to each backslash with
/// `strcspn`, ~10 times faster than `instr` (which compares at every character). Measured
/// (SQLite 3.40 from Python) on a page of 20 parts of 11 KB of JSON each: ~50 µs for the
/// GLOBs with the rows' reads, ~470 µs with `instr`; `scribe-bench --only reads` (200
/// searches, medians 35–50 ms on a shared machine) shows no difference beyond its noise.
/// A false alarm (an escaped backslash before the letters "u0000") only costs the second
/// snippet, which is the same.
fn snippet(index: &str) -> Expr {
    Expr::cust(format!(
        "CASE WHEN \"p\".\"data\" GLOB '*\\u0000*' OR length(\"p\".\"data\") > {LONG_PART} \
         THEN {} ELSE {} END",
        sql_chars(NUL_SNIPPET),
        snippet_sql(index)
    ))
}

/// What [`snippet`] gives for a part whose text may hold a NUL, or is long: a NUL, which
/// no snippet of FTS5's holds (it stops at one).
const NUL_SNIPPET: &str = "\u{0}";

/// The length (characters of its JSON) past which a part's snippet is made from pieces of
/// its text ([`nul_free_snippets`]): at most ~2,000 matches, whose `snippet()` costs at
/// most ~25 ms, and far fewer in text of words (~1 ms).
const LONG_PART: usize = 4096;

/// The most bytes of a long part's text one piece holds ([`nul_free_snippets`]).
const SNIPPET_PIECE: usize = 2048;

/// The FTS5 tokenizer of `index` (schema V7), for a private table that makes snippets as the
/// index would.
fn tokenizer(index: &str) -> &'static str {
    if index == "parts_fts_trigram" {
        "trigram"
    } else {
        "unicode61 remove_diacritics 2"
    }
}

/// `text` with each NUL character a space, as PostgreSQL's search text has it (its V24):
/// both of FTS5's tokenizers stop at a NUL in places (`snippet()`'s pieces, the trigram
/// tokenizer), and unicode61 gives a NUL and a space the same tokens.
fn without_nul(text: &str) -> std::borrow::Cow<'_, str> {
    if text.contains('\0') {
        std::borrow::Cow::Owned(text.replace('\0', " "))
    } else {
        std::borrow::Cow::Borrowed(text)
    }
}

/// Makes the snippets [`snippet`] left to Rust ([`NUL_SNIPPET`]) from the parts' text,
/// through [`Pieces`]. Only parts whose JSON holds a NUL escape or is long get here, at
/// most a page of them.
fn nul_free_snippets(
    conn: &Connection,
    index: &str,
    expr: &str,
    hits: &mut [SearchHit],
) -> rusqlite::Result<()> {
    if !hits.iter().any(|h| h.snippet == NUL_SNIPPET) {
        return Ok(());
    }
    let pieces = Pieces::new(index)?;
    let mut text = conn.prepare_cached(
        "SELECT v.search_text FROM parts AS p JOIN parts_search AS v ON v.seq = p.seq \
         WHERE p.id = ?1",
    )?;
    for hit in hits.iter_mut() {
        if hit.snippet != NUL_SNIPPET {
            continue;
        }
        let found: Option<Option<String>> =
            text.query_row([&hit.part_id], |r| r.get(0)).optional()?;
        let whole = found.flatten().unwrap_or_default();
        hit.snippet = pieces.snippet(expr, &whole)?;
    }
    Ok(())
}

/// A private in-memory FTS5 table with an index's tokenizer, whose `snippet()` over the
/// same expression is the index's snippet of a text (the same tokens at the same
/// positions for the word index): for texts the index's own `snippet()` is not asked for
/// ([`NUL_SNIPPET`]) and the typing window's long ones. A text longer than [`LONG_PART`]
/// goes as pieces of at most [`SNIPPET_PIECE`] bytes cut between words, one row each, and
/// the snippet is the best-ranked piece's, with [`ELLIPSIS`] where the piece cuts the text
/// (the piece best holding any term when none holds all; the text's start, unmarked,
/// when none holds any).
struct Pieces {
    mem: Connection,
}

impl Pieces {
    fn new(index: &str) -> rusqlite::Result<Pieces> {
        let mem = Connection::open_in_memory()?;
        mem.execute_batch(&format!(
            "CREATE VIRTUAL TABLE w USING fts5(search_text, tokenize='{}')",
            tokenizer(index)
        ))?;
        Ok(Pieces { mem })
    }

    /// The snippet of `text` (its NULs as spaces) for the FTS5 expression `expr`.
    fn snippet(&self, expr: &str, text: &str) -> rusqlite::Result<String> {
        let whole = without_nul(text);
        self.mem.execute("DELETE FROM w", [])?;
        let pieces = snippet_pieces_of(&whole);
        {
            let mut insert = self
                .mem
                .prepare_cached("INSERT INTO w (rowid, search_text) VALUES (?1, ?2)")?;
            for (n, piece) in (0_i64..).zip(&pieces) {
                insert.execute(rusqlite::params![n, piece])?;
            }
        }
        let mut make = self.mem.prepare_cached(&format!(
            "SELECT rowid, {} FROM w WHERE w MATCH ?1 ORDER BY rank LIMIT 1",
            snippet_sql("w")
        ))?;
        let mut best: Option<(i64, String)> = make
            .query_row([expr], |r| Ok((r.get(0)?, r.get(1)?)))
            .optional()?;
        if best.is_none() && pieces.len() > 1 {
            // No one piece holds the terms together: the piece that best holds any.
            if let Some(any) = any_positive_phrase(expr) {
                best = make
                    .query_row([any], |r| Ok((r.get(0)?, r.get(1)?)))
                    .optional()?;
            }
        }
        Ok(match best {
            Some((n, mut snippet)) => {
                if n > 0 && !snippet.starts_with(ELLIPSIS) {
                    snippet.insert_str(0, ELLIPSIS);
                }
                let last = i64::try_from(pieces.len()).unwrap_or(i64::MAX) - 1;
                if n < last && !snippet.ends_with(ELLIPSIS) {
                    snippet.push_str(ELLIPSIS);
                }
                snippet
            }
            None if pieces.len() > 1 => like_snippet(&whole, ""),
            None => String::new(),
        })
    }
}

/// The phrases of the sanitized FTS5 expression `expr` that are not excluded (each
/// quoted, a prefix's `*` kept), joined by `OR`: an expression any one of them matches.
/// `None` when there is none.
fn any_positive_phrase(expr: &str) -> Option<String> {
    let mut phrases: Vec<String> = Vec::new();
    let mut excluded = false;
    let mut chars = expr.chars().peekable();
    while let Some(c) = chars.next() {
        if c == '"' {
            let mut phrase = format!("\"{}\"", quoted_text(&mut chars).replace('"', "\"\""));
            if chars.peek() == Some(&'*') {
                chars.next();
                phrase.push('*');
            }
            if !std::mem::take(&mut excluded) {
                phrases.push(phrase);
            }
        } else if c == 'N' && expr_keyword(&mut chars, "OT") {
            excluded = true;
        }
    }
    (!phrases.is_empty()).then(|| phrases.join(" OR "))
}

/// The text of an FTS5 string whose opening `"` was just taken from `chars`, up to and
/// taking its closing one, each doubled `""` inside read as one `"`.
fn quoted_text(chars: &mut std::iter::Peekable<std::str::Chars<'_>>) -> String {
    let mut text = String::new();
    while let Some(c) = chars.next() {
        if c == '"' {
            if chars.peek() == Some(&'"') {
                chars.next();
                text.push('"');
            } else {
                break;
            }
        } else {
            text.push(c);
        }
    }
    text
}

/// Whether `chars` go on with `rest` (then taken): the end of a keyword outside quotes.
fn expr_keyword(chars: &mut std::iter::Peekable<std::str::Chars<'_>>, rest: &str) -> bool {
    let ahead: String = chars.clone().take(rest.len()).collect();
    if ahead != rest {
        return false;
    }
    for _ in 0..rest.len() {
        chars.next();
    }
    true
}

/// `text` whole when it is at most [`LONG_PART`] bytes, else in pieces of at most
/// [`SNIPPET_PIECE`] bytes, each cut after a whitespace character where one is (at a
/// character boundary where none is), so a word stays whole.
fn snippet_pieces_of(text: &str) -> Vec<&str> {
    if text.len() <= LONG_PART {
        return vec![text];
    }
    let mut pieces = Vec::new();
    let mut rest = text;
    while rest.len() > SNIPPET_PIECE {
        let mut cut = SNIPPET_PIECE;
        while !rest.is_char_boundary(cut) {
            cut -= 1;
        }
        let head = &rest[..cut];
        let at = head
            .char_indices()
            .rev()
            .find(|(_, c)| c.is_whitespace())
            .map_or(cut, |(i, c)| i + c.len_utf8());
        let at = if at == 0 { cut } else { at };
        pieces.push(&rest[..at]);
        rest = &rest[at..];
    }
    if !rest.is_empty() {
        pieces.push(rest);
    }
    pieces
}

/// FTS5 marks a match with this byte (and [`FTS_END`]): no UTF-8 text holds 0xFE or
/// 0xFF, so each one in `snippet()`'s output is a mark, never the text's own.
const FTS_START: &str = "CAST(X'FE' AS TEXT)";
/// The byte after a match in `snippet()`'s output (see [`FTS_START`]).
const FTS_END: &str = "CAST(X'FF' AS TEXT)";

/// SQL for FTS5's snippet of column 0 of the FTS5 table `table`: the text's own
/// [`MATCH_START`] / [`MATCH_END`] characters shown as [`STX_SYMBOL`] / [`ETX_SYMBOL`],
/// then FTS5's marks ([`FTS_START`], [`FTS_END`]) made [`MATCH_START`] / [`MATCH_END`].
/// With STX/ETX as FTS5's marks, a stored STX/ETX was read as one: stored `\x02red\x03`
/// was a highlight, and both characters were lost. The four byte-wise `replace`s of a
/// 24-word snippet cost ~1.2 us (50,000 snippets: 0.17 s of CPU without, 0.23 s with),
/// ~25 us a page of 20; nothing indexed changes.
fn snippet_sql(table: &str) -> String {
    format!(
        "replace(replace(replace(replace(snippet(\"{table}\", 0, {FTS_START}, {FTS_END}, {}, \
         {SNIPPET_TOKENS}), {}, {}), {}, {}), {FTS_START}, {}), {FTS_END}, {})",
        sql_chars(ELLIPSIS),
        sql_chars(MATCH_START),
        sql_chars(STX_SYMBOL),
        sql_chars(MATCH_END),
        sql_chars(ETX_SYMBOL),
        sql_chars(MATCH_START),
        sql_chars(MATCH_END),
    )
}

/// `text` as an SQLite expression: `char()` of its code points (no quoting to get wrong).
fn sql_chars(text: &str) -> String {
    let points: Vec<String> = text.chars().map(|c| u32::from(c).to_string()).collect();
    format!("char({})", points.join(", "))
}

/// Appends `text` to a snippet as it shows stored text: its [`MATCH_START`] /
/// [`MATCH_END`] characters as [`STX_SYMBOL`] / [`ETX_SYMBOL`], so that only the marks
/// put around matches are markers, and a NUL as a space (as FTS5's snippets show it,
/// [`nul_free_snippets`], and PostgreSQL's).
fn push_text(out: &mut String, text: &str) {
    for c in text.chars() {
        match c {
            '\0' => out.push(' '),
            STX => out.push_str(STX_SYMBOL),
            ETX => out.push_str(ETX_SYMBOL),
            c => out.push(c),
        }
    }
}

/// The hits of `page` in its order, with the hit columns, and snippets from `index` (or,
/// for plain-text candidates, cut around the first term found).
fn page_hits(
    conn: &Connection,
    index: &'static str,
    expr: &str,
    plain: &[Alternative],
    page: &[Candidate],
    unread: &mut Unread,
) -> rusqlite::Result<Vec<SearchHit>> {
    let mut by_seq: std::collections::HashMap<i64, SearchHit> = std::collections::HashMap::new();
    let indexed: Vec<i64> = page.iter().filter(|c| !c.plain).map(|c| c.seq).collect();
    if !indexed.is_empty() {
        let order = JoinOrder::Fixed;
        let mut query = Query::select();
        hit_columns(&mut query, snippet(index), Expr::val(0.0));
        query.expr(c("p", "seq")).from(Alias::new(index));
        join(
            &mut query,
            order,
            "parts",
            "p",
            c("p", "seq").equals(tc(index, "rowid")),
        );
        join_hit_tables(&mut query, order);
        query
            .and_where(matches(index, expr))
            .and_where(c(index, "rowid").is_in(indexed.iter().copied()));
        let (sql, values) = query.build_rusqlite(SqliteQueryBuilder);
        let mut stmt = conn.prepare_cached(&sql)?;
        let rows = stmt.query_map(&*values.as_params(), |row| {
            Ok((row.get::<_, i64>(12)?, hit(row, None, unread)?))
        })?;
        for row in rows {
            if let (seq, Some(hit)) = row? {
                by_seq.insert(seq, hit);
            }
        }
    }
    let unindexed: Vec<i64> = page.iter().filter(|c| c.plain).map(|c| c.seq).collect();
    if !unindexed.is_empty() {
        let mut query = Query::select();
        hit_columns(&mut query, c("v", "search_text"), Expr::val(0.0));
        query
            .expr(c("p", "seq"))
            .from_as(Alias::new("parts"), Alias::new("p"));
        join_text(&mut query);
        join_hit_tables(&mut query, JoinOrder::Planner);
        query.and_where(c("p", "seq").is_in(unindexed.iter().copied()));
        let (sql, values) = query.build_rusqlite(SqliteQueryBuilder);
        let mut stmt = conn.prepare_cached(&sql)?;
        let rows = stmt.query_map(&*values.as_params(), |row| {
            let text: Option<String> = row.get(5)?;
            let text = text.unwrap_or_default();
            // The snippet marks the first term of an alternative the text has.
            let needle = first_found(&text, plain);
            Ok((row.get::<_, i64>(12)?, hit(row, Some(needle), unread)?))
        })?;
        for row in rows {
            if let (seq, Some(hit)) = row? {
                by_seq.insert(seq, hit);
            }
        }
    }
    Ok(page
        .iter()
        .filter_map(|c| {
            by_seq.remove(&c.seq).map(|mut hit| {
                hit.rank = c.rank;
                hit
            })
        })
        .collect())
}

/// How many of the newest messages each step of [`like_search`] tests before the next,
/// larger one; after them, one statement tests the rest of the history.
const LIKE_STEPS: [u64; 2] = [1_000, 8_000];

/// The LIKE route: messages with a part whose text matches one of `alternatives` (literal
/// substrings), newest first (by creation time, then id), each with its first matching
/// part.
///
/// There is no index to answer a substring, so every part tested costs the extraction of
/// its text from JSON. The history is walked newest first in steps ([`LIKE_STEPS`]): the
/// next newest messages (a top-N over `messages`, which is small), then their parts, and
/// the walk stops once the page is full. A common substring (a one-character CJK query
/// typed into the search box) fills the page from the first step; a rare one ends with
/// one statement over the rest of the history, as a single statement did for all of it.
/// The steps partition the messages in the order of the answer, so the hits are the ones
/// a single statement over the whole history returns.
fn like_search(
    conn: &Connection,
    alternatives: &[Alternative],
    filter: &SearchFilter,
    unread: &mut Unread,
) -> rusqlite::Result<Vec<SearchHit>> {
    like_search_in_steps(conn, alternatives, filter, &LIKE_STEPS, unread)
}

/// [`like_search`] with these steps.
fn like_search_in_steps(
    conn: &Connection,
    alternatives: &[Alternative],
    filter: &SearchFilter,
    steps: &[u64],
    unread: &mut Unread,
) -> rusqlite::Result<Vec<SearchHit>> {
    if filter.limit == 0 {
        return Ok(Vec::new());
    }
    let wanted = filter.offset.saturating_add(filter.limit);
    let offset = usize::try_from(filter.offset).unwrap_or(usize::MAX);
    let limit = usize::try_from(filter.limit).unwrap_or(usize::MAX);
    let none = std::collections::HashSet::new();
    let hits = like_walk(conn, alternatives, filter, steps, wanted, &none, unread)?;
    Ok(hits.into_iter().skip(offset).take(limit).collect())
}

/// The first `wanted` hits of the LIKE route (newest first, from the first message on,
/// whatever `filter`'s offset and limit) of messages not in `skip`, walked in `steps`.
fn like_walk(
    conn: &Connection,
    alternatives: &[Alternative],
    filter: &SearchFilter,
    steps: &[u64],
    wanted: u64,
    skip: &std::collections::HashSet<String>,
    unread: &mut Unread,
) -> rusqlite::Result<Vec<SearchHit>> {
    let mut hits: Vec<SearchHit> = Vec::new();
    if wanted == 0 || !alternatives.iter().any(|a| !a.all.is_empty()) {
        return Ok(hits);
    }
    let mut cursor: Option<At> = None;
    for &step in steps {
        let newest = newest_messages(conn, filter, cursor.as_ref(), step)?;
        let exhausted = (newest.len() as u64) < step;
        let Some(last) = newest.last().cloned() else {
            return Ok(hits);
        };
        let ids = serde_json::Value::from(
            newest
                .into_iter()
                .filter(|(_, id)| !skip.contains(id))
                .map(|(_, id)| serde_json::Value::from(id))
                .collect::<Vec<_>>(),
        )
        .to_string();
        hits.extend(like_hits(
            conn,
            alternatives,
            filter,
            LikeScope::Messages(&ids),
            None,
            unread,
        )?);
        cursor = Some(last);
        if exhausted || hits.len() as u64 >= wanted {
            hits.truncate(usize::try_from(wanted).unwrap_or(usize::MAX));
            return Ok(hits);
        }
    }
    let more = wanted - hits.len() as u64;
    let scope = match &cursor {
        Some(at) => LikeScope::Older(at),
        None => LikeScope::All,
    };
    let rest = like_hits(
        conn,
        alternatives,
        filter,
        scope,
        Some(more.saturating_add(skip.len() as u64)),
        unread,
    )?;
    hits.extend(
        rest.into_iter()
            .filter(|h| !skip.contains(&h.message_id))
            .take(usize::try_from(more).unwrap_or(usize::MAX)),
    );
    Ok(hits)
}

/// Which messages a statement of [`like_search`] tests.
enum LikeScope<'a> {
    /// Every message.
    All,
    /// The messages whose ids are in this JSON array.
    Messages(&'a str),
    /// The messages after this (created_at, id) in newest-first order.
    Older(&'a At),
}

/// A message's place in newest-first order: its `created_at` as stored (an integer, or
/// whatever another program wrote there: SQLite orders values of every kind, so the walk
/// passes such a row by, and [`hit`] leaves it out), then its id.
type At = (sea_query::Value, String);

/// The `n` newest messages (created_at, id) after `cursor` in newest-first order. Only the
/// filters on the message itself narrow them (the source is tested with the parts), so
/// the list may hold messages the hits leave out, never the other way round.
fn newest_messages(
    conn: &Connection,
    filter: &SearchFilter,
    cursor: Option<&At>,
    n: u64,
) -> rusqlite::Result<Vec<At>> {
    let mut query = Query::select();
    query
        .expr(c("m", "created_at"))
        .expr(c("m", "id"))
        .from_as(Alias::new("messages"), Alias::new("m"));
    let mut cond = message_filters(Cond::all(), filter, "m");
    if let Some(at) = cursor {
        cond = cond.add(older_than(at));
    }
    query
        .cond_where(cond)
        .order_by(tc("m", "created_at"), Order::Desc)
        .order_by(tc("m", "id"), Order::Desc)
        .limit(n);
    let (sql, values) = query.build_rusqlite(SqliteQueryBuilder);
    let mut stmt = conn.prepare_cached(&sql)?;
    let rows = stmt.query_map(&*values.as_params(), |row| {
        use rusqlite::types::Value as Stored;
        let created_at = match row.get::<_, Stored>(0)? {
            Stored::Integer(n) => sea_query::Value::from(n),
            Stored::Real(x) => sea_query::Value::from(x),
            Stored::Text(text) => sea_query::Value::from(text),
            Stored::Blob(bytes) => sea_query::Value::from(bytes),
            Stored::Null => sea_query::Value::BigInt(None),
        };
        Ok((created_at, row.get(1)?))
    })?;
    rows.collect()
}

/// `m` comes after `at` in newest-first order (created_at, then id, both descending).
fn older_than(at: &At) -> Expr {
    Expr::cust_with_values(
        "(\"m\".\"created_at\", \"m\".\"id\") < (?, ?)",
        [at.0.clone(), sea_query::Value::from(at.1.as_str())],
    )
}

/// The LIKE route's hits among the messages of `scope`, newest first, at most `n`.
fn like_hits(
    conn: &Connection,
    alternatives: &[Alternative],
    filter: &SearchFilter,
    scope: LikeScope<'_>,
    n: Option<u64>,
    unread: &mut Unread,
) -> rusqlite::Result<Vec<SearchHit>> {
    let mut query = Query::select();
    // The part's text comes back whole; the snippet is cut in Rust around the match.
    hit_columns(&mut query, c("v", "search_text"), Expr::val(0.0));
    query
        // Bare columns of an aggregate query come from the row with min(): the first
        // matching part of each message.
        .expr(c("p", "position").min())
        .from_as(Alias::new("parts"), Alias::new("p"));
    join_text(&mut query);
    filter_hits(&mut query, filter, JoinOrder::Planner, true);
    match scope {
        LikeScope::All => {}
        LikeScope::Messages(ids) => {
            query.and_where(Expr::cust_with_values(
                "\"p\".\"message_id\" IN (SELECT \"value\" FROM json_each(?))",
                [ids],
            ));
        }
        LikeScope::Older(at) => {
            query.and_where(older_than(at));
        }
    }
    query
        .cond_where(literal_alternatives(alternatives))
        .group_by_col(tc("p", "message_id"))
        .order_by(tc("m", "created_at"), Order::Desc)
        .order_by(tc("m", "id"), Order::Desc);
    if let Some(n) = n {
        query.limit(n);
    }
    let (sql, values) = query.build_rusqlite(SqliteQueryBuilder);
    let mut stmt = conn.prepare_cached(&sql)?;
    let rows = stmt.query_map(&*values.as_params(), |row| {
        let text: Option<String> = row.get(5)?;
        let needle = first_found(text.as_deref().unwrap_or_default(), alternatives);
        hit(row, Some(needle), unread)
    })?;
    let mut hits = Vec::new();
    for row in rows {
        hits.extend(row?);
    }
    Ok(hits)
}

/// The first term that must occur (in the order of `alternatives`) that `text` holds, as
/// LIKE finds it: what a substring hit's snippet marks. Empty when there is none.
fn first_found<'a>(text: &str, alternatives: &'a [Alternative]) -> &'a str {
    alternatives
        .iter()
        .flat_map(|a| &a.all)
        .find(|t| find_ascii_case_insensitive(text, t).is_some())
        .map_or("", String::as_str)
}

/// A hit from a row of [`hit_columns`]; `like` is the substring to mark in the raw text.
/// A row holding a value no reader takes (another program's write) is no hit: its error,
/// naming the row it is in (the part, the message or the session, by the column), goes
/// to `unread`, and the search goes on without it ([`search_skipping`]).
fn hit(
    row: &Row<'_>,
    like: Option<&str>,
    unread: &mut Unread,
) -> rusqlite::Result<Option<SearchHit>> {
    match read_hit(row, like) {
        Ok(hit) => Ok(Some(hit)),
        Err(err @ rusqlite::Error::InvalidColumnType(..)) => {
            unread.push(unreadable_hit(row, err));
            Ok(None)
        }
        Err(err) => Err(err),
    }
}

/// The hits a search left out ([`hit`]); given to the caller once the search is done
/// ([`search_skipping`]).
type Unread = Vec<Unreadable>;

/// A hit left out: its row holds a value of the wrong kind.
struct Unreadable {
    /// The hit's message, when its id could be read.
    message_id: Option<String>,
    /// Whether `error` names another row than the message (its part, its session).
    in_other_row: bool,
    /// The driver's error, naming the row it is in when the row's id could be read.
    error: rusqlite::Error,
}

/// The hit of `row` (of [`hit_columns`]) left out for `err`, a value of the wrong kind,
/// which names the row it is in: the part, the message or the session, by the column.
fn unreadable_hit(row: &Row<'_>, err: rusqlite::Error) -> Unreadable {
    let (what, key) = match &err {
        rusqlite::Error::InvalidColumnType(2 | 5, ..) => ("part", 2),
        rusqlite::Error::InvalidColumnType(7 | 8 | 10 | 11, ..) => ("session", 1),
        _ => ("message", 0),
    };
    Unreadable {
        message_id: row.get(0).ok(),
        in_other_row: what != "message",
        error: crate::error::in_row(err, || {
            let id: String = row.get(key).ok()?;
            Some(format!("{what} {id}"))
        }),
    }
}

fn read_hit(row: &Row<'_>, like: Option<&str>) -> rusqlite::Result<SearchHit> {
    let text: Option<String> = row.get(5)?;
    let text = text.unwrap_or_default();
    Ok(SearchHit {
        message_id: row.get(0)?,
        session_id: row.get(1)?,
        part_id: row.get(2)?,
        role: row.get(3)?,
        created_at: row.get(4)?,
        snippet: match like {
            Some(needle) => like_snippet(&text, needle),
            None => text,
        },
        rank: row.get(6)?,
        source: row.get(7)?,
        session_model: row.get(8)?,
        message_model: row.get(9)?,
        title: row.get(10)?,
        session_created_at: row.get(11)?,
    })
}

/// Runs the search described by `filter` inside the snapshot `tx`, on either backend: at
/// most `limit` hits after skipping `offset`, best first (newest first for substring
/// matches), never two for one message.
///
/// Every occurrence in a hit's snippet of a literal term the query requires (a symbol, a
/// CJK term too short for the trigram index: what the indexes cannot mark) is marked,
/// beside the index's own marks.
///
/// A hit whose row holds a value no reader takes fails the search with an
/// [`Error::UnreadableValue`](crate::Error::UnreadableValue) naming that row;
/// [`search_skipping`] leaves such hits out instead.
pub fn search(tx: &mut ReadTx<'_>, filter: &SearchFilter) -> crate::Result<Vec<SearchHit>> {
    search_skipping(tx, filter, &mut |_, err| Err(err))
}

/// [`search`], giving `unreadable` each hit left out because a row of it holds a value no
/// reader takes (which only another program's write leaves in SQLite), once: the hit's
/// message id when the error names another row (its part or session; `None` when it
/// names the message itself, or the id cannot be read), and an
/// [`Error::UnreadableValue`](crate::Error::UnreadableValue) naming the row. When it
/// returns `Ok`, the hits are the others (a page may then hold fewer than `limit`); an
/// error it returns ends the search. Every other error ends it.
pub fn search_skipping(
    tx: &mut ReadTx<'_>,
    filter: &SearchFilter,
    unreadable: &mut dyn FnMut(Option<&str>, crate::Error) -> crate::Result<()>,
) -> crate::Result<Vec<SearchHit>> {
    let mut hits = match tx.raw() {
        Conn::Sqlite(conn) => {
            let mut unread = Unread::new();
            let hits = sqlite_search(conn, filter, &mut unread)?;
            // One message may be met by more than one step of a route: it counts once.
            let mut met = std::collections::HashSet::new();
            for hit in unread {
                if hit
                    .message_id
                    .as_ref()
                    .is_some_and(|id| !met.insert(id.clone()))
                {
                    continue;
                }
                let id = hit.message_id.as_deref().filter(|_| hit.in_other_row);
                unreadable(id, crate::Error::from(hit.error))?;
            }
            hits
        }
        #[cfg(feature = "postgres")]
        Conn::Postgres(client) => postgres::search(client, filter)?,
    };
    let mut terms = Vec::new();
    literal_terms(&filter.query, &mut terms);
    if !terms.is_empty() {
        for hit in &mut hits {
            hit.snippet = mark_literals(&hit.snippet, &terms);
        }
    }
    Ok(hits)
}

/// The literal terms `query` requires somewhere (each alternative's `all`; never an
/// excluded one), which its index's snippets do not mark: the substrings of the LIKE
/// routes and those tested beside an index.
fn literal_terms<'a>(query: &'a TextQuery, out: &mut Vec<&'a str>) {
    let mut add = |alternatives: &'a [Alternative]| {
        out.extend(alternatives.iter().flat_map(|a| &a.all).map(String::as_str));
    };
    match query {
        TextQuery::Words(_) | TextQuery::Trigrams(_) => {}
        TextQuery::Substring(text) => out.push(text),
        TextQuery::Literal(alternatives)
        | TextQuery::Substrings {
            plain: alternatives,
            ..
        } => {
            add(alternatives);
        }
        TextQuery::Mixed {
            index,
            checks,
            substrings,
        } => {
            add(substrings);
            out.extend(checks.iter().flat_map(|c| &c.terms.all).map(String::as_str));
            literal_terms(index, out);
        }
    }
}

/// `snippet` with every occurrence of each of `terms` marked too (compared as the LIKE
/// route compares: ASCII letters case-insensitively), merged with the marks it has: a
/// term overlapping or touching a mark makes one longer mark. Occurrences are found in the
/// snippet's text without its marks, so a term is marked across a mark's edge too
/// (`rocket 🚀` where the word index marked `rocket`).
fn mark_literals(snippet: &str, terms: &[&str]) -> String {
    let pieces = snippet_pieces(snippet);
    let mut text = String::with_capacity(snippet.len());
    let mut marked = Vec::with_capacity(snippet.len());
    for (piece, is_match) in &pieces {
        text.push_str(piece);
        marked.resize(text.len(), *is_match);
    }
    for term in terms {
        let mut from = 0;
        while let Some(at) = text
            .get(from..)
            .and_then(|rest| find_ascii_case_insensitive(rest, term))
        {
            let start = from + at;
            let end = start + term.len();
            marked[start..end].fill(true);
            from = end;
        }
    }
    let mut out = String::with_capacity(snippet.len() + 8);
    let mut open = false;
    for (i, c) in text.char_indices() {
        if marked[i] != open {
            out.push_str(if open { MATCH_END } else { MATCH_START });
            open = marked[i];
        }
        out.push(c);
    }
    if open {
        out.push_str(MATCH_END);
    }
    out
}

/// [`search`] on SQLite: the FTS5 indexes (or LIKE).
fn sqlite_search(
    conn: &Connection,
    filter: &SearchFilter,
    unread: &mut Unread,
) -> rusqlite::Result<Vec<SearchHit>> {
    let none = Extras::default();
    match &filter.query {
        TextQuery::Words(expr) => fts_search(conn, "parts_fts", expr, none, filter, unread),
        TextQuery::Trigrams(expr) => {
            fts_search(conn, "parts_fts_trigram", expr, none, filter, unread)
        }
        TextQuery::Substrings { trigrams, plain } => {
            let extras = Extras { plain, ..none };
            fts_search(conn, "parts_fts_trigram", trigrams, extras, filter, unread)
        }
        TextQuery::Substring(text) => like_search(conn, &[Alternative::of(text)], filter, unread),
        TextQuery::Literal(alternatives) => like_search(conn, alternatives, filter, unread),
        TextQuery::Mixed {
            index,
            checks,
            substrings,
        } => {
            let extras = Extras {
                plain: &[],
                checks,
                substrings,
            };
            match &**index {
                TextQuery::Words(expr) => {
                    fts_search(conn, "parts_fts", expr, extras, filter, unread)
                }
                TextQuery::Trigrams(expr) => {
                    fts_search(conn, "parts_fts_trigram", expr, extras, filter, unread)
                }
                TextQuery::Substrings { trigrams, plain } => {
                    let extras = Extras { plain, ..extras };
                    fts_search(conn, "parts_fts_trigram", trigrams, extras, filter, unread)
                }
                _ => sqlite_search(
                    conn,
                    &SearchFilter {
                        query: (**index).clone(),
                        ..filter.clone()
                    },
                    unread,
                ),
            }
        }
    }
}

/// The first occurrence of `needle` in `text` (ASCII case-insensitively, like SQLite's LIKE)
/// with some context, marked like FTS5 snippets.
///
/// `text` is whatever the database holds, so every cut goes through `str::get`: a cut that
/// is not on a character boundary (which the matching below never produces) falls back to
/// the unmarked start of the text rather than panicking.
fn like_snippet(text: &str, needle: &str) -> String {
    let unmarked = || {
        let mut out = String::new();
        let kept: String = text.chars().take(2 * LIKE_CONTEXT_CHARS).collect();
        push_text(&mut out, &kept);
        out
    };
    let Some(start) = find_ascii_case_insensitive(text, needle) else {
        return unmarked();
    };
    let end = start + needle.len();
    let (Some(head), Some(matched), Some(tail)) =
        (text.get(..start), text.get(start..end), text.get(end..))
    else {
        return unmarked();
    };
    let mut out = String::new();
    let skip = head.chars().count().saturating_sub(LIKE_CONTEXT_CHARS);
    if skip > 0 {
        out.push_str(ELLIPSIS);
    }
    let before: String = head.chars().skip(skip).collect();
    push_text(&mut out, &before);
    out.push_str(MATCH_START);
    push_text(&mut out, matched);
    out.push_str(MATCH_END);
    let after: String = tail.chars().take(LIKE_CONTEXT_CHARS).collect();
    push_text(&mut out, &after);
    if after.len() < tail.len() {
        out.push_str(ELLIPSIS);
    }
    out
}

/// The byte offset of the first occurrence of `needle` in `text`, comparing ASCII letters
/// case-insensitively and every other byte exactly (SQLite's LIKE). Compares the original
/// bytes rather than lowercased copies, whose offsets could differ from `text`'s; only
/// character boundaries are tried. `None` for an empty needle.
fn find_ascii_case_insensitive(text: &str, needle: &str) -> Option<usize> {
    let needle = needle.as_bytes();
    if needle.is_empty() {
        return None;
    }
    let bytes = text.as_bytes();
    text.char_indices().map(|(i, _)| i).find(|&i| {
        bytes
            .get(i..i + needle.len())
            .is_some_and(|window| window.eq_ignore_ascii_case(needle))
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::queries as q;

    #[test]
    fn literal_marks_merge_with_the_index_marks() {
        let m = |s: &str| s.replace('[', MATCH_START).replace(']', MATCH_END);
        // Across a mark's edge, touching, at both ends, a mark left open.
        assert_eq!(
            mark_literals(&m("[rocket] 🚀 x"), &["t 🚀"]),
            m("[rocket 🚀] x")
        );
        assert_eq!(mark_literals("🚀🚀a🚀", &["🚀"]), m("[🚀🚀]a[🚀]"));
        assert_eq!(mark_literals(&m("a [open"), &["A"]), m("[a] [open]"));
        // Nothing to mark: the snippet as it was, its marks kept.
        assert_eq!(mark_literals(&m("x [y] z"), &["q"]), m("x [y] z"));
        assert_eq!(mark_literals("", &["q"]), "");
    }

    /// A session row for the fixtures below: `id` from `source`, titled `title`.
    fn insert_session(
        conn: &Connection,
        id: &str,
        source: &str,
        title: Option<&str>,
    ) -> crate::Result<()> {
        q::create_session(
            conn,
            &q::CreateSessionParams {
                title,
                ..crate::testing::bare_session(id, source, 0)
            },
        )?;
        Ok(())
    }

    /// A message row without usage for the fixtures below, created (and finished, when
    /// `finished`) at `created`.
    fn insert_message(
        conn: &Connection,
        id: &str,
        session: &str,
        role: &str,
        created: i64,
        finished: bool,
    ) -> crate::Result<()> {
        q::create_message(
            conn,
            &q::CreateMessageParams {
                finished_at: finished.then_some(created),
                ..crate::testing::bare_message(id, session, role, created)
            },
        )?;
        Ok(())
    }

    /// A part row for the fixtures below: its type is `tool` when its JSON says so.
    fn insert_part(
        conn: &Connection,
        id: &str,
        (message, session): (&str, &str),
        position: i64,
        data: &str,
        created: i64,
    ) -> crate::Result<()> {
        let is_tool =
            serde_json::from_str::<serde_json::Value>(data).is_ok_and(|v| v["type"] == "tool");
        q::create_part(
            conn,
            &q::CreatePartParams {
                id,
                message_id: message,
                session_id: session,
                position,
                r#type: if is_tool { "tool" } else { "text" },
                data,
                created_at: created,
                updated_at: created,
            },
        )?;
        Ok(())
    }

    /// A history larger than the LIKE route's first steps: 2,400 messages in two sessions
    /// and sources, many of them created in the same millisecond (the id breaks the tie),
    /// some with several parts, tool parts, JSON with escaped characters, and needles from
    /// common (found in the first step) to rare (only in the oldest messages).
    fn like_history() -> crate::Database {
        let db = crate::Database::open_in_memory().unwrap();
        db.write(|tx| -> crate::Result<()> {
            let conn = tx.conn().unwrap();
            let sessions = [("ses_a", "cli"), ("ses_b", "telegram")];
            for (id, source) in sessions {
                insert_session(conn, id, source, Some(id))?;
            }
            // `ses_b`'s agent worked in a directory (a filter of its own), `ses_a`'s names none.
            conn.execute(
                "UPDATE sessions SET directory = '/work/b' WHERE id = 'ses_b'",
                [],
            )?;
            for i in 0..2_400_i64 {
                let session = sessions[(i % 2) as usize].0;
                // Ids do not follow creation order: the tie-break must come from the query.
                let message = format!("msg_{:05}", (i * 7_919) % 10_007);
                let created = 1_000 + i / 3;
                let role = if i % 5 == 0 { "assistant" } else { "user" };
                insert_message(conn, &message, session, role, created, false)?;
                let mut parts =
                    vec![serde_json::json!({"type": "text", "text": format!("plain {i}")})];
                if i % 3 == 0 {
                    parts.push(
                        serde_json::json!({"type": "text", "text": format!("数 common {i}")}),
                    );
                }
                if i % 4 == 0 {
                    parts.push(
                        serde_json::json!({"type": "reasoning", "text": format!("又是数据 {i}")}),
                    );
                }
                if i % 97 == 0 {
                    parts.push(
                        serde_json::json!({"type": "tool", "tool": "grep", "input": {"q": "据"},
                        "state": {"output": format!("out {i}")}}),
                    );
                }
                if i < 40 && i % 7 == 0 {
                    parts.push(serde_json::json!({"type": "text", "text": format!("rare 稀 {i}")}));
                }
                let mut datas: Vec<String> = parts.iter().map(ToString::to_string).collect();
                if i % 11 == 0 {
                    // The same text written with JSON escapes.
                    datas.push(r#"{"type":"text","text":"\u6570\u636e escaped"}"#.to_owned());
                }
                for (position, data) in datas.iter().enumerate() {
                    insert_part(
                        conn,
                        &format!("prt_{i}_{position}"),
                        (&message, session),
                        position as i64,
                        data,
                        created,
                    )?;
                }
            }
            Ok(())
        })
        .unwrap();
        db
    }

    /// Messages of words drawn (deterministically) from a vocabulary full of shared short
    /// prefixes, phrases such as `handle_request`, folded diacritics, CJK, control
    /// characters, tool parts and messages with several parts, indexed.
    fn typing_history(messages: i64) -> crate::Database {
        const WORDS: &[&str] = &[
            "con",
            "connection",
            "config",
            "console",
            "Cônnection",
            "conn",
            "co",
            "c",
            "handle",
            "handle_request",
            "handle_response",
            "handle_re",
            "request",
            "return",
            "re",
            "r",
            "result",
            "rêve",
            "data",
            "database",
            "dat",
            "da",
            "timeout",
            "time",
            "数据库",
            "接続",
            "x\u{1}y",
            "HANDLE",
            "handle.rs",
            "r2d2",
            "ré",
            "repo",
            "the",
        ];
        let db = crate::Database::open_in_memory().unwrap();
        let mut state: u64 = 0x9e37_79b9_7f4a_7c15;
        let mut next = move |n: usize| {
            state = state
                .wrapping_mul(6_364_136_223_846_793_005)
                .wrapping_add(1_442_695_040_888_963_407);
            (state >> 33) as usize % n
        };
        db.write(|tx| -> crate::Result<()> {
            let conn = tx.conn().unwrap();
            insert_session(conn, "ses_t", "cli", None)?;
            for i in 0..messages {
                let message = format!("msg_{i:05}");
                insert_message(conn, &message, "ses_t", "user", i, true)?;
                for position in 0..=next(3) as i64 {
                    let length = 1 + next(60);
                    let text: Vec<&str> = (0..length).map(|_| WORDS[next(WORDS.len())]).collect();
                    let text = text.join(if next(2) == 0 { " " } else { ", " });
                    let data = if next(6) == 0 {
                        serde_json::json!({"type": "tool", "tool": "grep", "input": {"q": "con"},
                            "state": {"output": text}})
                    } else {
                        serde_json::json!({"type": "text", "text": text})
                    };
                    insert_part(
                        conn,
                        &format!("prt_{i}_{position}"),
                        (&message, "ses_t"),
                        position,
                        &data.to_string(),
                        i,
                    )?;
                }
            }
            Ok(())
        })
        .unwrap();
        db.index_pending().unwrap();
        db
    }

    /// The typing window's page without the index's prefix query is the index's page: the
    /// same hits in the same order with the same snippets, for prefixes of one to three
    /// letters, phrases ending in one, windows from one part to all of them, and limits
    /// that make several parts of one message compete.
    #[test]
    fn typing_page_equals_the_index_page() {
        let db = typing_history(400);
        let queries = [
            "\"con\"*",
            "\"co\"*",
            "\"c\"*",
            "\"handle_r\"*",
            "\"handle_re\"*",
            "\"han\"*",
            "\"re\"*",
            "\"r\"*",
            "\"handle re\"*",
            "\"dat\"*",
            "\"x\"*",
            "\"the\"*",
            "\"zzz\"*",
            "\"handle.r\"*",
            "\"r2d\"*",
            "\"y\"*",
        ];
        let mut answered = 0;
        db.read_sqlite("test", |conn| {
            for expr in queries {
                for window in [1, 7, 60, 300, 100_000] {
                    for limit in [1, 5, 20, 500] {
                        let filter = SearchFilter {
                            limit,
                            window: Some(window),
                            ..SearchFilter::new(TextQuery::Words(expr.to_owned()))
                        };
                        let floor = window_floor(conn, "parts_fts", expr, &filter, None, window)?;
                        let want = first_page(
                            conn,
                            "parts_fts",
                            expr,
                            &filter,
                            None,
                            floor,
                            &mut Unread::new(),
                        )?;
                        let Some(got) =
                            typing_page(conn, expr, &filter, window, (6, 40), &mut Unread::new())?
                        else {
                            continue;
                        };
                        answered += 1;
                        let strip = |hits: &[SearchHit]| -> Vec<SearchHit> {
                            hits.iter()
                                .map(|h| SearchHit {
                                    rank: 0.0,
                                    ..h.clone()
                                })
                                .collect()
                        };
                        assert_eq!(
                            strip(&got),
                            strip(&want),
                            "{expr} window {window} limit {limit}"
                        );
                        // Both rank the same way: bm25 there, bm25 without its IDF here.
                        for pair in got.windows(2) {
                            assert!(pair[0].rank <= pair[1].rank, "{expr}: {pair:?}");
                        }
                    }
                }
            }
            Ok(())
        })
        .unwrap();
        assert!(answered >= 100, "{answered}");
    }

    #[test]
    fn only_phrases_ending_in_a_short_prefix_without_overlaps_take_the_walk() {
        assert_eq!(
            short_prefix_phrase("\"handle_r\"*"),
            Some(vec!["handle".into(), "r".into()])
        );
        assert_eq!(short_prefix_phrase("\"CON\"*"), Some(vec!["con".into()]));
        for expr in [
            "\"conn\"*", // four letters: the index is quick enough
            "\"con\"",   // no prefix
            "\"con\"* OR \"x\"*",
            "\"a\" \"b\"*", // two phrases: the IDF weighs them
            "\"数\"*",
            "\"rêve\"*",
            "\"ab ab\"*", // "ab ab ab" holds two overlapping instances
            "\"ab abc ab\"*",
            "\"_\"*",
        ] {
            assert_eq!(short_prefix_phrase(expr), None, "{expr}");
        }
        assert_eq!(short_prefix_phrase("\"ab abc a\"*"), None);
        assert_eq!(
            short_prefix_phrase("\"ab cd e\"*"),
            Some(vec!["ab".into(), "cd".into(), "e".into()])
        );
        assert_eq!(varint(&[0x05]), Some((5, 1)));
        assert_eq!(varint(&[0x81, 0x00]), Some((128, 2)));
        assert_eq!(varint(&[0x81]), None);
    }

    /// The walk that follows an index's hits skips the messages they found and still
    /// returns what one statement over the history returns without them, for every step
    /// the walk can end in (its last statement asks for more rows than it keeps).
    #[test]
    fn like_walk_skipping_messages_equals_one_statement_without_them() {
        let db = like_history();
        let filter = SearchFilter::new(TextQuery::Substring(String::new()));
        db.read_sqlite("test", |conn| {
            for alternatives in [
                vec![Alternative::of("数")],
                vec![Alternative {
                    all: vec!["plain".into()],
                    none: vec!["数".into(), "1".into()],
                }],
                vec![Alternative::of("稀"), Alternative::of("escaped")],
            ] {
                let all = like_hits(
                    conn,
                    &alternatives,
                    &filter,
                    LikeScope::All,
                    None,
                    &mut Unread::new(),
                )?;
                // Skip every third hit, and some messages that are no hit at all.
                let mut skip: std::collections::HashSet<String> = all
                    .iter()
                    .step_by(3)
                    .map(|h| h.message_id.clone())
                    .collect();
                skip.insert("msg_00001".into());
                for wanted in [1, 50, 150, 900, 5_000] {
                    let got = like_walk(
                        conn,
                        &alternatives,
                        &filter,
                        &[100, 400],
                        wanted,
                        &skip,
                        &mut Unread::new(),
                    )?;
                    let want: Vec<SearchHit> = all
                        .iter()
                        .filter(|h| !skip.contains(&h.message_id))
                        .take(wanted as usize)
                        .cloned()
                        .collect();
                    assert_eq!(got, want, "{alternatives:?} {wanted}");
                }
            }
            Ok(())
        })
        .unwrap();
    }

    /// A mixed query (an index route with checks, then substrings alone) pages through one
    /// list: the index's hits, then the substring hits of the other messages, newest
    /// first; pages of any size neither repeat nor skip a message.
    #[test]
    fn mixed_pages_walk_one_list() {
        let db = like_history();
        db.index_pending().unwrap();
        let query = TextQuery::Mixed {
            index: Box::new(TextQuery::Words("\"plain\"".into())),
            checks: vec![Check {
                expr: "\"plain\"".into(),
                terms: Alternative {
                    all: vec!["7".into()],
                    none: vec!["3".into()],
                },
                without: Vec::new(),
            }],
            substrings: vec![Alternative::of("稀"), Alternative::of("据")],
        };
        db.read_sqlite("test", |conn| {
            let whole = sqlite_search(
                conn,
                &SearchFilter {
                    limit: 10_000,
                    ..SearchFilter::new(query.clone())
                },
                &mut Unread::new(),
            )?;
            let ids: Vec<&str> = whole.iter().map(|h| h.message_id.as_str()).collect();
            let unique: std::collections::HashSet<&str> = ids.iter().copied().collect();
            assert_eq!(unique.len(), ids.len());
            // The index's hits first (ranked), then the substring hits (rank 0).
            let words = whole.iter().take_while(|h| h.rank < 0.0).count();
            assert!(
                words > 100 && words < whole.len(),
                "{words} of {}",
                whole.len()
            );
            for hit in &whole[..words] {
                let text = hit.snippet.replace(['\u{2}', '\u{3}'], "");
                assert!(text.contains('7') && !text.contains('3'), "{text}");
            }
            assert!(whole[words..].iter().all(|h| h.rank == 0.0));
            for limit in [1_u64, 7, 100, 500] {
                let mut paged = Vec::new();
                let mut offset = 0;
                loop {
                    let page = sqlite_search(
                        conn,
                        &SearchFilter {
                            limit,
                            offset,
                            ..SearchFilter::new(query.clone())
                        },
                        &mut Unread::new(),
                    )?;
                    if page.is_empty() || offset > 5_000 {
                        break;
                    }
                    offset += limit;
                    paged.extend(page.into_iter().map(|h| h.message_id));
                    if limit == 1 && offset > 300 {
                        break;
                    }
                }
                let n = paged.len();
                assert_eq!(paged, ids[..n], "limit {limit}");
                if limit > 1 {
                    assert_eq!(n, ids.len(), "limit {limit}");
                }
            }
            Ok(())
        })
        .unwrap();
    }

    /// The walk in steps returns what one statement over the whole history returns (the
    /// LIKE route as it was): same hits, same order, same part and snippet, for needles
    /// found at once, late and never, pages deep into the answer, and every filter.
    #[test]
    fn like_search_in_steps_equals_one_statement_over_the_history() {
        let db = like_history();
        let base = SearchFilter::new(TextQuery::Substring(String::new()));
        let mut filters = vec![base.clone()];
        filters.push(SearchFilter {
            session_id: Some("ses_b".into()),
            ..base.clone()
        });
        filters.push(SearchFilter {
            roles: vec!["assistant".into()],
            ..base.clone()
        });
        filters.push(SearchFilter {
            sources: vec!["cli".into()],
            ..base.clone()
        });
        filters.push(SearchFilter {
            exclude_sources: vec!["cli".into()],
            ..base.clone()
        });
        filters.push(SearchFilter {
            directory: Some("/work/b".into()),
            ..base.clone()
        });
        filters.push(SearchFilter {
            after: Some(1_100),
            before: Some(1_500),
            ..base.clone()
        });
        let mut compared = 0;
        db.read_sqlite("test", |conn| {
            for needle in [
                "数",
                "数据",
                "据",
                "稀",
                "escaped",
                "nowhere",
                "数 common 1",
            ] {
                for filter in &filters {
                    for (offset, limit) in [
                        (0, 50),
                        (0, 1),
                        (10, 20),
                        (990, 30),
                        (1_500, 500),
                        (5_000, 5),
                    ] {
                        let filter = SearchFilter {
                            limit,
                            offset,
                            ..filter.clone()
                        };
                        let needle = &[Alternative::of(needle)];
                        let got = like_search(conn, needle, &filter, &mut Unread::new()).unwrap();
                        // Small steps, so that the walk also ends with the statement over
                        // the rest of the history.
                        let small = like_search_in_steps(
                            conn,
                            needle,
                            &filter,
                            &[100, 400],
                            &mut Unread::new(),
                        )
                        .unwrap();
                        assert_eq!(got, small, "{needle:?} {filter:?}");
                        let all = like_hits(
                            conn,
                            needle,
                            &filter,
                            LikeScope::All,
                            Some(offset + limit),
                            &mut Unread::new(),
                        )
                        .unwrap();
                        let want: Vec<SearchHit> = all.into_iter().skip(offset as usize).collect();
                        assert_eq!(got, want, "{needle:?} {filter:?}");
                        compared += got.len();
                    }
                }
            }
            Ok(())
        })
        .unwrap();
        // The comparisons covered pages of hits, not only empty answers.
        assert!(compared > 1_500, "{compared}");
    }

    #[test]
    fn a_long_text_is_cut_between_words_into_pieces_that_make_it_whole() {
        assert_eq!(snippet_pieces_of("short text"), vec!["short text"]);
        let words = "alpha beta gamma ".repeat(1000);
        let pieces = snippet_pieces_of(&words);
        assert!(pieces.len() > 1);
        assert_eq!(pieces.concat(), words);
        for piece in &pieces[..pieces.len() - 1] {
            assert!(
                piece.len() <= SNIPPET_PIECE && piece.ends_with(' '),
                "{piece:?}"
            );
        }
        // No space at all: cut at character boundaries.
        let cjk = "数据库迁移".repeat(1000);
        let pieces = snippet_pieces_of(&cjk);
        assert_eq!(pieces.concat(), cjk);
        assert!(
            pieces
                .iter()
                .all(|p| p.len() <= SNIPPET_PIECE && !p.is_empty())
        );
    }

    #[test]
    fn any_positive_phrase_keeps_every_phrase_but_the_excluded() {
        assert_eq!(
            any_positive_phrase(r#""a" "b" NOT "c" OR ("d"* "e")"#).as_deref(),
            Some(r#""a" OR "b" OR "d"* OR "e""#)
        );
        assert_eq!(
            any_positive_phrase(r#""say ""NOT"" here" NOT "x""#).as_deref(),
            Some(r#""say ""NOT"" here""#)
        );
        assert_eq!(any_positive_phrase(""), None);
    }

    #[test]
    fn like_snippet_marks_the_match_with_context() {
        assert_eq!(
            like_snippet("数据库迁移失败", "迁移"),
            "数据库\u{2}迁移\u{3}失败"
        );
        let long = format!("{}needle{}", "a".repeat(100), "b".repeat(100));
        let s = like_snippet(&long, "NEEDLE");
        assert!(s.starts_with(ELLIPSIS) && s.ends_with(ELLIPSIS), "{s}");
        assert!(s.contains("\u{2}needle\u{3}"));
    }

    /// The text's own STX/ETX are shown as their symbols, so a snippet's only markers are
    /// the ones around the match (the characters were read as marks, and lost).
    #[test]
    fn snippet_pieces_read_the_markers() {
        assert_eq!(
            snippet_pieces("a \u{2}b\u{3} c \u{2}d\u{3}"),
            [("a ", false), ("b", true), (" c ", false), ("d", true)]
        );
        assert_eq!(snippet_pieces("plain ␂x␃"), [("plain ␂x␃", false)]);
        assert_eq!(
            snippet_pieces("\u{2}open to the end"),
            [("open to the end", true)]
        );
        assert!(snippet_pieces("").is_empty());
    }

    #[test]
    fn like_snippet_shows_stored_markers_as_symbols() {
        assert_eq!(MATCH_START, STX.to_string());
        assert_eq!(MATCH_END, ETX.to_string());
        assert_eq!(
            like_snippet("a \u{2}red\u{3} b needle \u{3}\u{2}", "needle"),
            "a ␂red␃ b \u{2}needle\u{3} ␃␂"
        );
        assert_eq!(
            like_snippet("\u{2}NEEDLE\u{3}", "needle"),
            "␂\u{2}NEEDLE\u{3}␃"
        );
        assert_eq!(like_snippet("no \u{2}match\u{3}", "needle"), "no ␂match␃");
        let long = format!("{}needle{}", "\u{2}".repeat(100), "\u{3}".repeat(100));
        let s = like_snippet(&long, "needle");
        let expected = format!(
            "{ELLIPSIS}{}\u{2}needle\u{3}{}{ELLIPSIS}",
            "␂".repeat(LIKE_CONTEXT_CHARS),
            "␃".repeat(LIKE_CONTEXT_CHARS)
        );
        assert_eq!(s, expected);
    }

    /// Text whose lowercase form has another byte length ('İ' → "i̇", 'ẞ' → 'ß'), CJK,
    /// emoji (with a ZWJ sequence) and combining marks.
    const TRICKY: &[&str] = &[
        "İstanbul İİİ NEEDLE after",
        "ẞTRASSE ẞ needle ẞẞ",
        "数据库迁移失败：needle在这里，还有更多的中文文本",
        "👨‍👩‍👧 family 🎉 Needle 🎉🎉",
        "e\u{301}e\u{301} cafe\u{301} nEeDlE a\u{308}\u{304}",
        "ΑΣ Σ ς needle",
        "",
        "needle",
        "no match at all: İẞ数据🎉e\u{301}",
    ];

    #[test]
    fn like_snippet_cuts_multi_byte_text_on_character_boundaries() {
        assert_eq!(
            like_snippet("İstanbul İİİ NEEDLE after", "needle"),
            "İstanbul İİİ \u{2}NEEDLE\u{3} after"
        );
        assert_eq!(
            like_snippet("ẞTRASSE ẞ needle ẞẞ", "ẞ"),
            "\u{2}ẞ\u{3}TRASSE ẞ needle ẞẞ"
        );
        assert_eq!(
            like_snippet("👨‍👩‍👧 family 🎉 Needle 🎉🎉", "🎉"),
            "👨‍👩‍👧 family \u{2}🎉\u{3} Needle 🎉🎉"
        );
        // A lone combining mark is a character of its own; a precomposed 'é' is not "e\u{301}".
        assert_eq!(
            like_snippet("cafe\u{301}", "\u{301}"),
            "cafe\u{2}\u{301}\u{3}"
        );
        assert_eq!(like_snippet("cafe\u{301}", "é"), "cafe\u{301}");
        // LIKE folds ASCII only: 'İ' does not match "i".
        assert_eq!(like_snippet("İ", "i"), "İ");
        // Context is counted in characters, so a long CJK text is cut between characters.
        let long = format!("{}needle{}", "数".repeat(100), "🎉".repeat(100));
        let s = like_snippet(&long, "NEEDLE");
        let expected = format!(
            "{ELLIPSIS}{}\u{2}needle\u{3}{}{ELLIPSIS}",
            "数".repeat(LIKE_CONTEXT_CHARS),
            "🎉".repeat(LIKE_CONTEXT_CHARS)
        );
        assert_eq!(s, expected);
    }

    #[test]
    fn like_snippet_never_panics_on_tricky_text() {
        for text in TRICKY {
            // Every prefix, suffix and inner piece of every sample as the needle, in both cases.
            let cuts: Vec<usize> = text
                .char_indices()
                .map(|(i, _)| i)
                .chain([text.len()])
                .collect();
            for (a, &i) in cuts.iter().enumerate() {
                for &j in &cuts[a..] {
                    let piece = &text[i..j];
                    for needle in [piece.to_owned(), piece.to_uppercase(), piece.to_lowercase()] {
                        let s = like_snippet(text, &needle);
                        if let Some(at) = find_ascii_case_insensitive(text, &needle) {
                            let marked =
                                format!("{MATCH_START}{}{MATCH_END}", &text[at..at + needle.len()]);
                            assert!(s.contains(&marked), "{text:?} / {needle:?}: {s}");
                        } else {
                            assert!(!s.contains(MATCH_START), "{text:?} / {needle:?}: {s}");
                        }
                    }
                }
            }
        }
    }
}
