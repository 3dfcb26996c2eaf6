//! [`super::search`] on PostgreSQL, with the same inputs and the same hit format as on
//! SQLite.
//!
//! - Words ([`TextQuery::Words`]): the sanitized FTS5 expression is read back into its
//!   alternatives and terms ([`groups`]) and written as a `tsquery` ([`tsquery`]): a term
//!   is a phrase of its alphanumeric runs (`my-app.config.ts` → `'my' <-> 'app' <-> …`),
//!   a prefix marks its last run `:*`, `NOT` is `!`, `OR` is `|`. Every run is
//!   alphanumeric and quoted, so no input reaches `to_tsquery` as syntax. It matches the
//!   words V13's triggers store per part in `parts_fts` (text split at every
//!   non-alphanumeric, folded by the `scribe` configuration) through their GIN index.
//!   Rank: `ts_rank_cd` over the stored words with length normalization, negated so lower
//!   is better as with bm25; ties newest first.
//! - Substrings ([`TextQuery::Trigrams`], [`TextQuery::Substrings`]): every alternative's
//!   terms as `ILIKE '%term%'` (escaped) over the stored text. `parts_fts`'s pg_trgm GIN
//!   index holds, as SQLite's trigram index does, only the text with a character of a
//!   script written without spaces (V15's partial index over the row's `spaceless`). The
//!   condition repeats the index's predicate ([`SPACELESS`]), so the planner can use the
//!   index, for [`TextQuery::Trigrams`] (the index alone, as on SQLite) and when every
//!   alternative has such a term (a CJK query), where it changes no result (such a term
//!   only occurs in such text). An alternative that can match other text (a Latin
//!   term next to a CJK one, SQLite's plain alternatives) is answered by ILIKE over the
//!   stored text, as SQLite answers it with LIKE, but ranked with the rest instead of
//!   after them. Rank: how often the terms occur per character of text
//!   ([`substring_rank`], bm25's direction), ties newest first.
//! - A literal substring ([`TextQuery::Substring`], [`TextQuery::Literal`]): `ILIKE`,
//!   newest first, as on SQLite.
//! - [`TextQuery::Mixed`]: the same condition with each alternative's substring checks
//!   added to it (with several alternatives, each check with its own `tsquery`), ORed
//!   with the alternatives of substrings alone. An exclusion (a check's `none` and
//!   `without`, an alternative's `none`, a substring route's `NOT`) is a correlated
//!   `NOT EXISTS` over the stored rows of the candidate's message, so it leaves out the
//!   whole message, as on SQLite. On the word route those rank 0, after
//!   every word hit (as SQLite lists its LIKE walk after the index's hits); on the
//!   substring route they are ranked with the rest.
//!
//! One hit per message: `DISTINCT ON (message_id)` keeps each message's best part (first
//! part by position among equals). A ranked page looks a message's time (the order among
//! equal ranks) up only for the hits at or above its last rank ([`page`]); a plain word
//! query is ranked over `parts_fts` before the join ([`Reads::WordsAlone`]), and an
//! unfiltered one looks parts up for their message only near the page ([`ranked_first`]):
//! a common word matches most parts, and what each match costs is the search's cost. Snippets are cut here from the part's text, in
//! FTS5's format: at most [`SNIPPET_TOKENS`] words, every phrase match marked between
//! [`MATCH_START`] and [`MATCH_END`], [`ELLIPSIS`] where text was cut.
//!
//! `parts_fts` and its GIN indexes are maintained inside each write (V13's triggers on
//! `parts`), so there is nothing to index before a search (`index_pending` does nothing
//! on PostgreSQL). Nothing is computed per matching part at search time: matching,
//! ranking, rechecks and snippets read the stored text and words.

use sea_query::{
    Alias, CommonTableExpression, Cond, Expr, ExprTrait, JoinType, Order, PostgresQueryBuilder,
    Query, SelectStatement, Values, WithClause,
};
use unicode_normalization::UnicodeNormalization;

use super::{
    Alternative, Check, ELLIPSIS, JoinOrder, MATCH_END, MATCH_START, SNIPPET_TOKENS, SearchFilter,
    SearchHit, TextQuery, c, filter_hits, find_ascii_case_insensitive, first_found, hit_columns,
    is_spaceless_script, join_tables, like_snippet, push_text, tc,
};
use crate::filters::{escape_like, pg};

/// A part's searched text, as V13's triggers store it in `parts_fts` (joined as `f`); its
/// trigram GIN index serves ILIKE.
const TEXT: &str = r#""f"."search_text""#;

/// A part's words, stored next to [`TEXT`] with their GIN index (V13).
const VECTOR: &str = r#""f"."words""#;

/// The predicate of `parts_fts`'s trigram index (V15): [`TEXT`] has a character of a
/// script written without spaces ([`is_spaceless_script`]), stored with the row. The
/// planner uses a partial index only for a query whose condition implies its predicate.
const SPACELESS: &str = r#""f"."spaceless""#;

/// One term of a query: its text and whether it is a prefix.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Term {
    pub(super) text: String,
    pub(super) prefix: bool,
}

/// One alternative: every `positive` term and none of the `negative` ones.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(super) struct Group {
    pub(super) positive: Vec<Term>,
    pub(super) negative: Vec<Term>,
}

/// The alternatives of an FTS5 expression as the sanitizer writes them (quoted strings,
/// `"…"*`, `NOT`, `OR`, brackets around an alternative). Anything else is read leniently:
/// a bare word is a term, brackets only separate, so no input fails; an alternative
/// without a positive term is dropped (FTS5 cannot express it either).
pub(super) fn groups(expr: &str) -> Vec<Group> {
    let mut out = Vec::new();
    let mut current = Group::default();
    let mut negate = false;
    let mut chars = expr.chars().peekable();
    let close = |current: &mut Group, out: &mut Vec<Group>| {
        let group = std::mem::take(current);
        if !group.positive.is_empty() {
            out.push(group);
        }
    };
    while let Some(&ch) = chars.peek() {
        let term = if ch == '"' {
            chars.next();
            Some(super::quoted_text(&mut chars))
        } else if ch.is_whitespace() || ch == '(' || ch == ')' {
            chars.next();
            None
        } else {
            let mut word = String::new();
            while let Some(&ch) = chars.peek() {
                if ch.is_whitespace() || matches!(ch, '(' | ')' | '"' | '*') {
                    break;
                }
                word.push(ch);
                chars.next();
            }
            match word.as_str() {
                "OR" => {
                    negate = false;
                    close(&mut current, &mut out);
                    None
                }
                "NOT" => {
                    negate = true;
                    None
                }
                "AND" | "" => {
                    // A lone `*` (nothing before it) is skipped.
                    if word.is_empty() {
                        chars.next();
                    }
                    None
                }
                _ => Some(word),
            }
        };
        let Some(text) = term else {
            continue;
        };
        let mut prefix = false;
        while chars.next_if_eq(&'*').is_some() {
            prefix = true;
        }
        let term = Term { text, prefix };
        if std::mem::take(&mut negate) {
            current.negative.push(term);
        } else {
            current.positive.push(term);
        }
    }
    close(&mut current, &mut out);
    out
}

/// The runs of letters and digits of `text` (what the word index splits text into).
fn runs(text: &str) -> impl Iterator<Item = &str> {
    text.split(|c: char| !c.is_alphanumeric())
        .filter(|r| !r.is_empty())
}

/// A term as a `tsquery` operand: its runs as a phrase, the last a prefix when the term
/// is one; `None` when it has no letter or digit.
fn operand(term: &Term) -> Option<String> {
    let runs: Vec<&str> = runs(&term.text).collect();
    let last = runs.len().checked_sub(1)?;
    let phrase: Vec<String> = runs
        .iter()
        .enumerate()
        .map(|(i, run)| {
            let star = if term.prefix && i == last { ":*" } else { "" };
            // A run is letters and digits only: nothing to escape inside the quotes.
            format!("'{run}'{star}")
        })
        .collect();
    Some(if phrase.len() == 1 {
        phrase.concat()
    } else {
        format!("({})", phrase.join(" <-> "))
    })
}

/// The `tsquery` text of `groups` (for `to_tsquery('scribe', …)`); `None` when no
/// alternative has a term with letters or digits.
pub(super) fn tsquery(groups: &[Group]) -> Option<String> {
    let alternatives: Vec<String> = groups
        .iter()
        .filter_map(|group| {
            let positive: Vec<String> = group.positive.iter().filter_map(operand).collect();
            if positive.is_empty() {
                return None;
            }
            let negative = group
                .negative
                .iter()
                .filter_map(operand)
                .map(|o| format!("!{o}"));
            let all: Vec<String> = positive.into_iter().chain(negative).collect();
            Some(format!("({})", all.join(" & ")))
        })
        .collect();
    (!alternatives.is_empty()).then(|| alternatives.join(" | "))
}

/// Runs `filter` on PostgreSQL.
pub(super) fn search(
    client: &mut postgres::Client,
    filter: &SearchFilter,
) -> crate::Result<Vec<SearchHit>> {
    if filter.limit == 0 {
        return Ok(Vec::new());
    }
    match &filter.query {
        TextQuery::Words(expr) => words(client, filter, expr, &[], &[]),
        TextQuery::Trigrams(expr) | TextQuery::Substrings { trigrams: expr, .. } => {
            substrings(client, filter, expr, &[], &[])
        }
        TextQuery::Substring(text) => literal(client, filter, &[Alternative::of(text)]),
        TextQuery::Literal(alternatives) => literal(client, filter, alternatives),
        TextQuery::Mixed {
            index,
            checks,
            substrings: alone,
        } => match &**index {
            TextQuery::Words(expr) => words(client, filter, expr, checks, alone),
            TextQuery::Trigrams(expr) | TextQuery::Substrings { trigrams: expr, .. } => {
                substrings(client, filter, expr, checks, alone)
            }
            other => search(
                client,
                &SearchFilter {
                    query: other.clone(),
                    ..filter.clone()
                },
            ),
        },
    }
}

/// The word route: the `tsquery` of `expr` over the stored words; with `checks` (one per
/// alternative, [`TextQuery::Mixed`]) a part also needs one alternative whose words it
/// has and whose substrings pass, and the parts matching one of `alone` (substrings alone)
/// are hits too, ranked 0, after every word hit (as SQLite lists them after the index's).
fn words(
    client: &mut postgres::Client,
    filter: &SearchFilter,
    expr: &str,
    checks: &[Check],
    alone: &[Alternative],
) -> crate::Result<Vec<SearchHit>> {
    let groups = groups(expr);
    let Some(query) = tsquery(&groups) else {
        return Ok(Vec::new());
    };
    // `$1`: the values given with each expression (sea-query renumbers them).
    let words_of = |query: String| {
        Expr::cust_with_values(
            format!("{VECTOR} @@ to_tsquery('scribe'::regconfig, $1)"),
            [query],
        )
    };
    let mut indexed = Cond::all().add(words_of(query.clone()));
    let tested = checks.iter().any(Check::tests);
    if let ([check], true) = (checks, tested) {
        indexed = indexed.add(check_terms(check));
    } else if tested {
        let mut any = Cond::any();
        for check in checks {
            if let Some(own) = tsquery(&super::postgres::groups(&check.expr)) {
                any = any.add(Cond::all().add(words_of(own)).add(check_terms(check)));
            }
        }
        indexed = indexed.add(any);
    }
    let rank = Expr::cust_with_values(
        "CAST(-ts_rank_cd(\"f\".\"words\", to_tsquery('scribe'::regconfig, $1), 1) AS DOUBLE PRECISION)",
        [query],
    );
    let alone: Vec<&Alternative> = alone.iter().filter(|a| !a.all.is_empty()).collect();
    let (matched, rank) = if alone.is_empty() {
        (indexed.into(), rank)
    } else {
        let mut any = Cond::any().add(indexed.clone());
        for alternative in &alone {
            any = any.add(all_of(alternative));
        }
        let zero = Expr::cust("CAST(0 AS DOUBLE PRECISION)");
        let ranked = Expr::case(indexed, rank).finally(zero);
        (any.into(), ranked.into())
    };
    // A plain word query reads nothing but the stored words: matched and ranked in
    // `parts_fts` alone, before the join.
    let reads = if tested || !alone.is_empty() {
        Reads::Joined
    } else {
        Reads::WordsAlone
    };
    let (sql, values) =
        if reads == Reads::WordsAlone && filter.window.is_none() && !filter.is_narrowed() {
            let (ranked, best) = ranked_first(filter, matched, rank);
            page(best, filter, Cut::Ranked, Some(ranked))
        } else {
            let best = best_parts(filter, matched, rank, filter.window, Cut::Ranked, reads);
            page(best, filter, Cut::Ranked, None)
        };
    let rows = pg::run(client, &sql, values)?;
    let terms: Vec<Term> = groups.into_iter().flat_map(|g| g.positive).collect();
    let alone: Vec<Alternative> = alone.into_iter().cloned().collect();
    rows.iter()
        .map(|row| {
            hit(row, |text| {
                let marked = word_snippet(text, &terms);
                if marked.contains(MATCH_START) || alone.is_empty() {
                    marked
                } else {
                    like_snippet(text, first_found(text, &alone))
                }
            })
        })
        .collect()
}

/// The substring route: every alternative of `expr` (with its `checks`, one per
/// alternative, [`TextQuery::Mixed`]) and of `alone` as ILIKEs over the stored text.
fn substrings(
    client: &mut postgres::Client,
    filter: &SearchFilter,
    expr: &str,
    checks: &[Check],
    alone: &[Alternative],
) -> crate::Result<Vec<SearchHit>> {
    let groups = groups(expr);
    let mut terms: Vec<String> = Vec::new();
    let mut any = Cond::any();
    for (n, group) in groups.iter().enumerate() {
        let mut all = Cond::all();
        for term in &group.positive {
            all = all.add(contains(&term.text));
            terms.push(term.text.clone());
        }
        for term in &group.negative {
            all = all.add(message_lacks_text(&term.text));
        }
        if let Some(check) = checks.get(n).filter(|_| checks.len() == groups.len()) {
            all = all.add(check_terms(check));
            terms.extend(check.terms.all.iter().cloned());
        }
        any = any.add(all);
    }
    let alone: Vec<&Alternative> = alone.iter().filter(|a| !a.all.is_empty()).collect();
    if groups.is_empty() && alone.is_empty() {
        return Ok(Vec::new());
    }
    // The trigram index alone (as on SQLite), or every alternative needs a
    // spaceless-script term so only text the index holds can match: saying so
    // lets the planner use the index.
    let indexed_only = matches!(filter.query, TextQuery::Trigrams(_))
        || matches!(&filter.query, TextQuery::Mixed { index, .. } if matches!(**index, TextQuery::Trigrams(_)));
    let every_spaceless = groups.iter().all(spaceless)
        && alone
            .iter()
            .all(|a| a.all.iter().any(|t| t.chars().any(is_spaceless_script)));
    let mut matched = Cond::any();
    if groups.is_empty() {
        // Nothing from the index route: only the substrings alone.
    } else if indexed_only || every_spaceless {
        matched = matched.add(Cond::all().add(Expr::cust(SPACELESS)).add(any));
    } else {
        matched = any;
    }
    for alternative in &alone {
        matched = matched.add(all_of(alternative));
        terms.extend(alternative.all.iter().cloned());
    }
    if every_spaceless && !alone.is_empty() {
        // Every alternative of substrings alone needs such a character too.
        matched = Cond::all().add(Expr::cust(SPACELESS)).add(matched);
    }
    let best = best_parts(
        filter,
        matched.into(),
        substring_rank(&terms),
        filter.window,
        Cut::Ranked,
        Reads::Joined,
    );
    let (sql, values) = page(best, filter, Cut::Ranked, None);
    let rows = pg::run(client, &sql, values)?;
    rows.iter()
        .map(|row| {
            hit(row, |text| {
                let needle = terms
                    .iter()
                    .find(|t| find_ascii_case_insensitive(text, t).is_some())
                    .map_or("", String::as_str);
                like_snippet(text, needle)
            })
        })
        .collect()
}

/// The literal route: parts whose text matches one of `alternatives`, newest first, as
/// SQLite's LIKE walk.
fn literal(
    client: &mut postgres::Client,
    filter: &SearchFilter,
    alternatives: &[Alternative],
) -> crate::Result<Vec<SearchHit>> {
    let mut any = Cond::any();
    let mut some = false;
    for alternative in alternatives.iter().filter(|a| !a.all.is_empty()) {
        any = any.add(all_of(alternative));
        some = true;
    }
    if !some {
        return Ok(Vec::new());
    }
    let best = best_parts(
        filter,
        any.into(),
        Expr::cust("CAST(0 AS DOUBLE PRECISION)"),
        None,
        Cut::Newest,
        Reads::Joined,
    );
    let (sql, values) = page(best, filter, Cut::Newest, None);
    let rows = pg::run(client, &sql, values)?;
    rows.iter()
        .map(|row| hit(row, |t| like_snippet(t, first_found(t, alternatives))))
        .collect()
}

/// What `check` tests on a candidate part `p` (its stored row `f`), as on SQLite
/// (`super::check_terms`): the part holds every `all` substring, and no searchable part of
/// its message holds a `none` substring or has the words of a `without` expression (a
/// correlated probe of the message's rows in `parts_fts`, per candidate).
fn check_terms(check: &Check) -> Cond {
    let mut all = all_of(&check.terms);
    for expr in &check.without {
        if let Some(query) = tsquery(&groups(expr)) {
            all = all.add(message_lacks(
                "\"g\".\"words\" @@ to_tsquery('scribe'::regconfig, $1)".to_owned(),
                query,
            ));
        }
    }
    all
}

/// No searchable part of the message of part `p` passes `test` on its stored row `g`
/// (`$1` bound to `value`): a correlated probe of the message's rows in `parts_fts`.
fn message_lacks(test: String, value: String) -> Expr {
    Expr::cust_with_values(
        format!(
            "NOT EXISTS (SELECT 1 FROM \"parts\" AS \"q\" JOIN \"parts_fts\" AS \"g\" \
             ON \"g\".\"seq\" = \"q\".\"seq\" \
             WHERE \"q\".\"message_id\" = \"p\".\"message_id\" AND {test})"
        ),
        [value],
    )
}

/// No searchable part of the message of part `p` holds `text` ([`contains`] over each).
fn message_lacks_text(text: &str) -> Expr {
    let op = if uncased(text) { "LIKE" } else { "ILIKE" };
    message_lacks(
        format!("\"g\".\"search_text\" {op} $1"),
        format!("%{}%", escape_like(text)),
    )
}

/// The stored text holds every `all` term of `alternative`, and no part of its message
/// holds a `none` term (an exclusion leaves out the whole message).
fn all_of(alternative: &Alternative) -> Cond {
    let mut all = Cond::all();
    for term in &alternative.all {
        all = all.add(contains(term));
    }
    for term in &alternative.none {
        all = all.add(message_lacks_text(term));
    }
    all
}

/// The rank of a part on the substring route: minus how often the terms occur in it per
/// character of its text, so more of the terms in less text ranks first, the direction in
/// which bm25 ranks SQLite's trigram hits.
fn substring_rank(terms: &[String]) -> Expr {
    let text = TEXT;
    let mut sql = String::from("CAST(-(0");
    let mut values = Vec::new();
    for (n, term) in terms.iter().enumerate() {
        let n = n + 1;
        // An uncased term (CJK, digits) occurs in the text exactly where it occurs in its
        // lowercase, so the text is not lowercased for it (`lower` of a long text is most
        // of this expression's cost).
        //
        // The count is what `replace` removed over the term's length. For an uncased term
        // it is counted in bytes: the same whole number (each occurrence removed is the
        // term's bytes and its characters alike), but a text's byte length is in its
        // header where `char_length` walks every byte, twice per term.
        let removed = if uncased(term) {
            format!(
                "(octet_length({text}) - octet_length(replace({text}, CAST(${n} AS TEXT), ''))) \
                 / CAST(greatest(octet_length(CAST(${n} AS TEXT)), 1) AS DOUBLE PRECISION)"
            )
        } else {
            format!(
                "(char_length({text}) - char_length(replace(lower({text}), lower(CAST(${n} AS TEXT)), ''))) \
                 / CAST(greatest(char_length(CAST(${n} AS TEXT)), 1) AS DOUBLE PRECISION)"
            )
        };
        sql.push_str(&format!(" + {removed}"));
        values.push(term.clone());
    }
    sql.push_str(&format!(
        ") / greatest(char_length({text}), 1) AS DOUBLE PRECISION)"
    ));
    Expr::cust_with_values(sql, values)
}

/// `<the part's text> ILIKE '%text%'`, escaped with `\\` (PostgreSQL's default LIKE escape):
/// the pg_trgm index serves it from three characters on. ILIKE folds case as SQLite's LIKE
/// and trigram index do. A term without cased letters (CJK, digits, punctuation) matches
/// the same with `LIKE`, which does not lowercase every text it reads (ILIKE costs about
/// seven times as much per row, and a planner without statistics reads every row).
fn contains(text: &str) -> Expr {
    let op = if uncased(text) { "LIKE" } else { "ILIKE" };
    Expr::cust_with_values(
        format!("{TEXT} {op} $1"),
        [format!("%{}%", escape_like(text))],
    )
}

/// Whether `group` can match only text with a character of a script written without
/// spaces: one of its required terms has such a character.
fn spaceless(group: &Group) -> bool {
    group
        .positive
        .iter()
        .any(|term| term.text.chars().any(is_spaceless_script))
}

/// Whether no character of `text` has another case: folding case changes nothing in it,
/// nor in any text where it occurs (lowercasing maps a cased letter to a cased letter).
fn uncased(text: &str) -> bool {
    text.chars().all(|ch| {
        let mut lower = ch.to_lowercase();
        let mut upper = ch.to_uppercase();
        lower.next() == Some(ch)
            && lower.next().is_none()
            && upper.next() == Some(ch)
            && upper.next().is_none()
    })
}

/// How the page is cut from the best parts: by rank, or newest first where every rank is
/// the same ([`literal`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Cut {
    /// Ranks differ: the best parts carry no message time, and only those that can reach
    /// the page (their rank at most the page's last rank) look theirs up.
    Ranked,
    /// Every rank is equal (newest first): the best parts carry their message's time.
    Newest,
}

/// What a statement's condition and rank read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Reads {
    /// The stored row `f` and the part `p` (its message, for an exclusion): tested and
    /// ranked after `parts_fts` is joined to `parts`.
    Joined,
    /// Only the stored row `f`: tested and ranked in a subquery over `parts_fts` alone
    /// (`OFFSET 0` keeps the planner from merging it), so the join carries a part's `seq`
    /// and rank, not its words. A common word matches thousands of parts, and the planner
    /// hashed the matching rows, words included, to join them (a hash of ~10 MB for
    /// `error` on the bench's corpus, spilled to disk past `work_mem`), ranking them after.
    WordsAlone,
}

/// The best part of each matching message that passes the filters: its `seq`, message
/// id, `rank` (lower is better; the first part among equals) and, for [`Cut::Newest`], its
/// message's time. Only the tables the filters need are joined (and `messages` for the
/// time): every join here runs once per matching part, where the page's joins run once
/// per hit.
///
/// With `window`, only the newest `window` matching parts that pass the filters (by
/// `seq`) are ranked ([`SearchFilter::window`]).
fn best_parts(
    filter: &SearchFilter,
    matched: Expr,
    rank: Expr,
    window: Option<u64>,
    cut: Cut,
    reads: Reads,
) -> SelectStatement {
    let mut query = Query::select();
    // The window ranks only its own parts: they are picked after the join.
    let alone = reads == Reads::WordsAlone && window.is_none();
    if let Some(window) = window {
        let mut newest = Query::select();
        newest
            .expr(c("p", "seq"))
            .from_as(Alias::new("parts"), Alias::new("p"))
            .join_as(
                JoinType::InnerJoin,
                Alias::new("parts_fts"),
                Alias::new("f"),
                c("f", "seq").equals(tc("p", "seq")),
            );
        filter_hits(&mut newest, filter, JoinOrder::Planner, false);
        newest
            .and_where(matched.clone())
            .order_by(tc("p", "seq"), Order::Desc)
            .limit(window);
        query.and_where(c("p", "seq").in_subquery(newest));
    }
    query
        .distinct_on([tc("p", "message_id")])
        .expr_as(c("p", "seq"), Alias::new("seq"))
        .expr_as(c("p", "message_id"), Alias::new("message_id"));
    if cut == Cut::Newest {
        query.expr_as(c("m", "created_at"), Alias::new("created_at"));
    }
    query.from_as(Alias::new("parts"), Alias::new("p"));
    let matched = if alone {
        let mut ranked = Query::select();
        ranked
            .expr_as(c("f", "seq"), Alias::new("seq"))
            .expr_as(rank, Alias::new("rank"))
            .from_as(Alias::new("parts_fts"), Alias::new("f"))
            .and_where(matched)
            .offset(0);
        query
            .expr_as(c("f", "rank"), Alias::new("rank"))
            .join_subquery(
                JoinType::InnerJoin,
                ranked,
                Alias::new("f"),
                c("f", "seq").equals(tc("p", "seq")),
            );
        None
    } else {
        query.expr_as(rank, Alias::new("rank")).join_as(
            JoinType::InnerJoin,
            Alias::new("parts_fts"),
            Alias::new("f"),
            c("f", "seq").equals(tc("p", "seq")),
        );
        Some(matched)
    };
    // filter_hits joins `messages` itself when a filter reads it; the time needs it too.
    let filters_join_messages =
        !filter.roles.is_empty() || filter.after.is_some() || filter.before.is_some();
    if cut == Cut::Newest && !filters_join_messages {
        join_tables(&mut query, JoinOrder::Planner, true, false);
    }
    filter_hits(&mut query, filter, JoinOrder::Planner, false);
    if let Some(matched) = matched {
        query.and_where(matched);
    }
    query
        .order_by(tc("p", "message_id"), Order::Asc)
        .order_by(Alias::new("rank"), Order::Asc)
        .order_by(tc("p", "position"), Order::Asc);
    query
}

/// The page of `best` (rank, then newest first) with the columns of a hit: the page is
/// cut first, so the hit's columns are joined for its rows only.
///
/// [`Cut::Ranked`]: `best` is computed once (a CTE, `b`) and read twice: for the rank of
/// the page's last hit (the `offset + limit`-th best, or none when fewer match), and for
/// the hits at or above it, each looking its message's time up for the order among equal
/// ranks. A common word matches thousands of parts; joining `messages` to every one of
/// them (a hash of the whole table) cost a third of such a search, the lookups cost the
/// page's.
///
/// `ranked`, a CTE `best` reads ([`ranked_first`]), comes before it.
fn page(
    best: SelectStatement,
    filter: &SearchFilter,
    cut: Cut,
    ranked: Option<CommonTableExpression>,
) -> (String, Values) {
    let mut page = Query::select();
    let mut shared = None;
    match cut {
        Cut::Newest => {
            page.column(sea_query::Asterisk)
                .from_subquery(best, Alias::new("b"));
        }
        Cut::Ranked => {
            shared = Some(best);
            let last = filter.offset.saturating_add(filter.limit).saturating_sub(1);
            page.expr_as(c("b", "seq"), Alias::new("seq"))
                .expr_as(c("b", "message_id"), Alias::new("message_id"))
                .expr_as(
                    Expr::cust(
                        r#"(SELECT "t"."created_at" FROM "messages" AS "t" WHERE "t"."id" = "b"."message_id")"#,
                    ),
                    Alias::new("created_at"),
                )
                .expr_as(c("b", "rank"), Alias::new("rank"))
                .from(Alias::new("b"))
                .and_where(Expr::cust_with_values(
                    r#""b"."rank" <= COALESCE((SELECT "l"."rank" FROM "b" AS "l" ORDER BY "l"."rank" ASC LIMIT 1 OFFSET $1), CAST('Infinity' AS DOUBLE PRECISION))"#,
                    [i64::try_from(last).unwrap_or(i64::MAX)],
                ));
        }
    }
    page.order_by(tc("b", "rank"), Order::Asc)
        .order_by(Alias::new("created_at"), Order::Desc)
        .order_by(tc("b", "message_id"), Order::Desc)
        .limit(filter.limit)
        .offset(filter.offset);
    let mut query = Query::select();
    hit_columns(&mut query, Expr::cust(TEXT), c("h", "rank"));
    query
        .from_subquery(page, Alias::new("h"))
        .join_as(
            JoinType::InnerJoin,
            Alias::new("parts"),
            Alias::new("p"),
            c("p", "seq").equals(tc("h", "seq")),
        )
        .join_as(
            JoinType::InnerJoin,
            Alias::new("parts_fts"),
            Alias::new("f"),
            c("f", "seq").equals(tc("h", "seq")),
        )
        .join_as(
            JoinType::InnerJoin,
            Alias::new("messages"),
            Alias::new("m"),
            c("m", "id").equals(tc("p", "message_id")),
        )
        .join_as(
            JoinType::InnerJoin,
            Alias::new("sessions"),
            Alias::new("s"),
            c("s", "id").equals(tc("p", "session_id")),
        )
        .order_by(tc("h", "rank"), Order::Asc)
        .order_by(tc("h", "created_at"), Order::Desc)
        .order_by(tc("h", "message_id"), Order::Desc);
    match shared {
        Some(best) => {
            let mut with = WithClause::new();
            if let Some(ranked) = ranked {
                with.cte(ranked);
            }
            with.cte(
                CommonTableExpression::new()
                    .query(best)
                    .table_name(Alias::new("b"))
                    .to_owned(),
            )
            .to_owned()
            .query(query)
            .build(PostgresQueryBuilder)
        }
        None => query.build(PostgresQueryBuilder),
    }
}

/// At least this many of the best parts, and [`TOP_PARTS_PER_HIT`] per hit up to the
/// page's end, are looked up for their message to find the page's last rank.
const TOP_PARTS: u64 = 200;

/// See [`TOP_PARTS`].
const TOP_PARTS_PER_HIT: u64 = 8;

/// The best parts of an unfiltered plain word query ([`Reads::WordsAlone`], no window),
/// looking up a part's message only where it can reach the page: a CTE `r` of every
/// matching part's `seq` and rank (over `parts_fts` alone, no join), and the statement of
/// `b` (as [`best_parts`]) over the parts of `r` ranked at or above the page's last hit.
///
/// The page's last hit is the `offset + limit`-th message by its best part's rank. The
/// best [`TOP_PARTS`] parts (or more for a deep page) are looked up for their message;
/// when they hold that many messages, the rank of the last one's best part bounds the
/// page: a message whose best part ranks below it is not on the page, and every part at or
/// above it is among the parts read (ties past them included: the bound is taken from
/// `r`, not from the parts read). Otherwise (fewer messages match, or the best parts
/// crowd into fewer messages) every matching part is looked up, as before. A common word
/// matches thousands of parts, and joining `parts` to each (a hash of the whole table, to
/// keep one part per message) was half of its search after V26.
fn ranked_first(
    filter: &SearchFilter,
    matched: Expr,
    rank: Expr,
) -> (CommonTableExpression, SelectStatement) {
    let mut ranked = Query::select();
    ranked
        .expr_as(c("f", "seq"), Alias::new("seq"))
        .expr_as(rank, Alias::new("rank"))
        .from_as(Alias::new("parts_fts"), Alias::new("f"))
        .and_where(matched);
    let ranked = CommonTableExpression::new()
        .query(ranked)
        .table_name(Alias::new("r"))
        .materialized(true)
        .to_owned();
    let hits = filter.offset.saturating_add(filter.limit);
    let read = Ord::max(hits.saturating_mul(TOP_PARTS_PER_HIT), TOP_PARTS);
    let as_i64 = |n: u64| i64::try_from(n).unwrap_or(i64::MAX);
    let message_of = |part: &str| {
        format!(r#"(SELECT "q"."message_id" FROM "parts" AS "q" WHERE "q"."seq" = "{part}"."seq")"#)
    };
    let bound = Expr::cust_with_values(
        format!(
            r#""r"."rank" <= COALESCE((SELECT min("t"."rank") AS "rank" FROM (SELECT "a"."rank", {} AS "message_id" FROM (SELECT "r"."seq", "r"."rank" FROM "r" ORDER BY "r"."rank" ASC LIMIT $1) AS "a") AS "t" GROUP BY "t"."message_id" ORDER BY "rank" ASC LIMIT 1 OFFSET $2), CAST('Infinity' AS DOUBLE PRECISION))"#,
            message_of("a")
        ),
        [as_i64(read), as_i64(hits.saturating_sub(1))],
    );
    let mut candidates = Query::select();
    candidates
        .expr_as(c("r", "seq"), Alias::new("seq"))
        .expr_as(c("r", "rank"), Alias::new("rank"))
        .expr_as(Expr::cust(message_of("r")), Alias::new("message_id"))
        .expr_as(
            Expr::cust(
                r#"(SELECT "q"."position" FROM "parts" AS "q" WHERE "q"."seq" = "r"."seq")"#,
            ),
            Alias::new("position"),
        )
        .from(Alias::new("r"))
        .and_where(bound);
    let mut best = Query::select();
    best.distinct_on([tc("c", "message_id")])
        .expr_as(c("c", "seq"), Alias::new("seq"))
        .expr_as(c("c", "message_id"), Alias::new("message_id"))
        .expr_as(c("c", "rank"), Alias::new("rank"))
        .from_subquery(candidates, Alias::new("c"))
        .and_where(c("c", "message_id").is_not_null())
        .order_by(tc("c", "message_id"), Order::Asc)
        .order_by(tc("c", "rank"), Order::Asc)
        .order_by(tc("c", "position"), Order::Asc);
    (ranked, best)
}

/// A hit from a row of [`hit_columns`]; `snippet` cuts the part's text.
fn hit(row: &postgres::Row, snippet: impl Fn(&str) -> String) -> crate::Result<SearchHit> {
    let text: Option<String> = row.try_get(5)?;
    Ok(SearchHit {
        message_id: row.try_get(0)?,
        session_id: row.try_get(1)?,
        part_id: row.try_get(2)?,
        role: row.try_get(3)?,
        created_at: row.try_get(4)?,
        snippet: snippet(text.as_deref().unwrap_or_default()),
        rank: row.try_get(6)?,
        source: row.try_get(7)?,
        session_model: row.try_get(8)?,
        message_model: row.try_get(9)?,
        title: row.try_get(10)?,
        session_created_at: row.try_get(11)?,
    })
}

/// `word` as the word index compares it: lowercase, diacritics removed.
fn fold(word: &str) -> String {
    word.nfd()
        .filter(|c| !unicode_normalization::char::is_combining_mark(*c))
        .flat_map(char::to_lowercase)
        .collect()
}

/// A word of the text: where it is and how it compares.
struct Word {
    start: usize,
    end: usize,
    folded: String,
}

/// FTS5's `snippet()` as closely as it matters: a window of at most [`SNIPPET_TOKENS`]
/// words, the one with the most distinct terms matched (the earliest among equals), the
/// first match roughly centred; each phrase match marked as one span; [`ELLIPSIS`] where
/// the window cuts text; the text before the first word and after the last kept when the
/// window reaches them. The text's own STX/ETX are shown as [`super::STX_SYMBOL`] /
/// [`super::ETX_SYMBOL`] ([`push_text`]): only the marks are markers.
fn word_snippet(text: &str, terms: &[Term]) -> String {
    let mut words = Vec::new();
    let mut start = None;
    for (i, ch) in text.char_indices().chain([(text.len(), ' ')]) {
        match (ch.is_alphanumeric() && i < text.len(), start) {
            (true, None) => start = Some(i),
            (false, Some(s)) => {
                let word = text.get(s..i).unwrap_or_default();
                words.push(Word {
                    start: s,
                    end: i,
                    folded: fold(word),
                });
                start = None;
            }
            _ => {}
        }
    }
    // Every match: (first word, last word, which term).
    let mut matches: Vec<(usize, usize, usize)> = Vec::new();
    for (t, term) in terms.iter().enumerate() {
        let phrase: Vec<String> = runs(&term.text).map(fold).collect();
        let Some(last) = phrase.len().checked_sub(1) else {
            continue;
        };
        for first in 0..words.len() {
            let fits = phrase.iter().enumerate().all(|(k, want)| {
                words.get(first + k).is_some_and(|w| {
                    if term.prefix && k == last {
                        w.folded.starts_with(want.as_str())
                    } else {
                        w.folded == *want
                    }
                })
            });
            if fits {
                matches.push((first, first + last, t));
            }
        }
    }
    matches.sort_unstable();
    let window = usize::try_from(SNIPPET_TOKENS).unwrap_or(24);
    // The window around each match; the best covers the most distinct terms.
    let mut best: Option<(usize, usize)> = None; // (start word, score)
    for &(first, last, _) in &matches {
        let span = last - first + 1;
        let lead = window.saturating_sub(span) / 2;
        let begin = first
            .saturating_sub(lead)
            .min(words.len().saturating_sub(window));
        // The matches that start in the window, found by their sorted starts: scanning
        // them all for every match took the square of their number (a word 40,000 times
        // in one part: seconds).
        let from = matches.partition_point(|m| m.0 < begin);
        let mut covered: Vec<usize> = matches[from..]
            .iter()
            .take_while(|m| m.0 < begin + window)
            .filter(|m| m.1 < begin + window)
            .map(|m| m.2)
            .collect();
        covered.sort_unstable();
        covered.dedup();
        if best.is_none_or(|(_, score)| covered.len() > score) {
            best = Some((begin, covered.len()));
        }
    }
    let begin = best.map_or(0, |(b, _)| b);
    let end = (begin + window).min(words.len());
    let from = if begin == 0 {
        0
    } else {
        words.get(begin).map_or(0, |w| w.start)
    };
    let to = if end >= words.len() {
        text.len()
    } else {
        words.get(end - 1).map_or(text.len(), |w| w.end)
    };
    // Marked spans inside the window, merged where they overlap or touch.
    let mut spans: Vec<(usize, usize)> = Vec::new();
    for &(first, last, _) in &matches {
        if first < begin || last >= end {
            continue;
        }
        let (Some(a), Some(b)) = (words.get(first), words.get(last)) else {
            continue;
        };
        match spans.last_mut() {
            Some(prev) if a.start <= prev.1 => prev.1 = prev.1.max(b.end),
            _ => spans.push((a.start, b.end)),
        }
    }
    let mut out = String::new();
    if from > 0 {
        out.push_str(ELLIPSIS);
    }
    let mut at = from;
    for (a, b) in spans {
        push_text(&mut out, text.get(at..a).unwrap_or_default());
        out.push_str(MATCH_START);
        push_text(&mut out, text.get(a..b).unwrap_or_default());
        out.push_str(MATCH_END);
        at = b;
    }
    push_text(&mut out, text.get(at..to).unwrap_or_default());
    if to < text.len() {
        out.push_str(ELLIPSIS);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn t(text: &str, prefix: bool) -> Term {
        Term {
            text: text.to_owned(),
            prefix,
        }
    }

    #[test]
    fn the_sanitizers_expressions_read_back_into_alternatives() {
        assert_eq!(
            groups(r#"("a" "b" NOT "c") OR "d""#),
            vec![
                Group {
                    positive: vec![t("a", false), t("b", false)],
                    negative: vec![t("c", false)],
                },
                Group {
                    positive: vec![t("d", false)],
                    negative: vec![],
                },
            ]
        );
        assert_eq!(
            groups(r#""connection po"* "say ""hi""""#),
            vec![Group {
                positive: vec![t("connection po", true), t(r#"say "hi""#, false)],
                negative: vec![],
            }]
        );
        // Whatever else comes in is read without failing.
        for odd in [
            "", "(", ")", "\"", "*", "OR", "NOT", "a OR", "NOT a", "\"a", "a*b (",
        ] {
            let _ = tsquery(&groups(odd));
        }
        assert!(groups("NOT a").is_empty());
    }

    #[test]
    fn terms_become_phrases_of_their_runs() {
        let q = tsquery(&groups(r#""my-app.config.ts" NOT "x" OR "conf"*"#)).unwrap();
        assert_eq!(
            q,
            "(('my' <-> 'app' <-> 'config' <-> 'ts') & !'x') | ('conf':*)"
        );
        assert_eq!(tsquery(&groups(r#""'\&|!""#)), None);
        assert_eq!(tsquery(&groups(r#""don't""#)).unwrap(), "(('don' <-> 't'))");
    }

    #[test]
    fn snippets_mark_phrases_and_cut_like_fts5() {
        assert_eq!(
            word_snippet("see my-app.config.ts now", &[t("my-app.config.ts", false)]),
            "see \u{2}my-app.config.ts\u{3} now"
        );
        assert_eq!(
            word_snippet("Café au lait", &[t("cafe", false)]),
            "\u{2}Café\u{3} au lait"
        );
        assert_eq!(
            word_snippet("deployment done", &[t("deploy", true)]),
            "\u{2}deployment\u{3} done"
        );
        let long = format!("{} needle {}", "a ".repeat(100), "b ".repeat(100));
        let s = word_snippet(&long, &[t("needle", false)]);
        assert!(s.starts_with(ELLIPSIS) && s.ends_with(ELLIPSIS), "{s}");
        assert!(s.contains("\u{2}needle\u{3}"), "{s}");
        assert_eq!(s.split_whitespace().count(), 24, "{s}");
        // No match found here (the server split differently): the start, unmarked.
        let s = word_snippet(&long, &[t("zzz", false)]);
        assert!(s.starts_with("a a") && s.ends_with(ELLIPSIS), "{s}");
        assert_eq!(word_snippet("", &[t("x", false)]), "");
        // The text's own STX/ETX are no marks: shown as their symbols, next to a match too.
        assert_eq!(
            word_snippet("out \u{2}red\u{3} the needle", &[t("needle", false)]),
            "out ␂red␃ the \u{2}needle\u{3}"
        );
        assert_eq!(
            word_snippet("\u{3}\u{2}needle\u{3}", &[t("needle", false)]),
            "␃␂\u{2}needle\u{3}␃"
        );
    }
}

#[cfg(test)]
mod statement_tests {
    use sea_query::PostgresQueryBuilder;

    use super::*;

    /// The statement binds every value and repeats the index's expression.
    #[test]
    fn the_words_statement_binds_its_query_and_uses_the_indexed_expression() {
        let filter = SearchFilter {
            sources: vec!["cli".into()],
            ..SearchFilter::new(TextQuery::Words(r#""x""#.into()))
        };
        let matched = Expr::cust_with_values(
            format!("{VECTOR} @@ to_tsquery('scribe'::regconfig, $1)"),
            ["'x'"],
        );
        let best = best_parts(
            &filter,
            matched,
            contains("a%b"),
            None,
            Cut::Ranked,
            Reads::Joined,
        );
        let (sql, values) = page(best, &filter, Cut::Ranked, None);
        assert!(!sql.contains('?'), "{sql}");
        assert!(sql.contains(VECTOR), "{sql}");
        assert!(!sql.contains("'x'") && !sql.contains("a%b"), "{sql}");
        assert!(
            values.0.contains(&sea_query::Value::from(r"%a\%b%")),
            "{values:?}"
        );
    }

    /// A term without cased letters is matched with LIKE (no lowercasing of the texts);
    /// any cased letter keeps ILIKE, so case still folds as on SQLite.
    #[test]
    fn uncased_terms_use_like_and_cased_ones_ilike() {
        assert!(uncased("数据库") && uncased("データベース") && uncased("2024-01") && uncased(""));
        assert!(!uncased("数据库 Docker") && !uncased("ß") && !uncased("Ǆ") && !uncased("x"));
        let sql = |term: &str| {
            let mut q = Query::select();
            q.expr(contains(term))
                .and_where(substring_rank(&[term.to_owned()]).gt(0));
            q.build(PostgresQueryBuilder).0
        };
        let cjk = sql("数据库");
        assert!(
            cjk.contains(" LIKE ") && !cjk.contains("ILIKE") && !cjk.contains("lower("),
            "{cjk}"
        );
        // An uncased term is counted in bytes: one `char_length` of the text per row
        // (the rank's divisor), none per term.
        assert_eq!(cjk.matches("char_length(").count(), 1, "{cjk}");
        let mixed = sql("数据库x");
        assert!(
            mixed.contains("ILIKE") && mixed.contains("lower("),
            "{mixed}"
        );
    }

    /// The page is cut (rank, then newest first) before a hit's columns are joined, and
    /// sessions are joined per matching part only when a filter reads them.
    #[test]
    fn the_page_is_cut_before_the_hit_columns_are_joined() {
        let plain = SearchFilter {
            limit: 20,
            offset: 40,
            ..SearchFilter::new(TextQuery::Substring("x".into()))
        };
        let best = best_parts(
            &plain,
            contains("x"),
            Expr::cust("CAST(0 AS DOUBLE PRECISION)"),
            None,
            Cut::Newest,
            Reads::Joined,
        );
        let (inner, _) = best.build(PostgresQueryBuilder);
        assert!(
            inner.contains(r#""messages""#) && !inner.contains(r#""sessions""#),
            "{inner}"
        );
        let (sql, _) = page(best, &plain, Cut::Newest, None);
        let limit = sql.find("LIMIT").unwrap_or(usize::MAX);
        let sessions = sql.rfind(r#"JOIN "sessions""#).unwrap_or(0);
        assert!(limit < sessions, "{sql}");
        let filtered = SearchFilter {
            sources: vec!["cli".into()],
            ..plain
        };
        let (inner, _) = best_parts(
            &filtered,
            contains("x"),
            Expr::cust("0"),
            None,
            Cut::Newest,
            Reads::Joined,
        )
        .build(PostgresQueryBuilder);
        assert!(inner.contains(r#""sessions""#), "{inner}");
    }

    /// A ranked page joins no table per matching part for the message's time: the best
    /// parts are computed once (a CTE) and only those ranked at or above the page's last
    /// (its 60th here) look their message up.
    #[test]
    fn a_ranked_page_looks_up_message_times_only_for_the_hits_that_can_reach_it() {
        let plain = SearchFilter {
            limit: 20,
            offset: 40,
            ..SearchFilter::new(TextQuery::Words(r#""x""#.into()))
        };
        let best = best_parts(
            &plain,
            contains("x"),
            substring_rank(&["x".into()]),
            None,
            Cut::Ranked,
            Reads::Joined,
        );
        let (inner, _) = best.build(PostgresQueryBuilder);
        assert!(!inner.contains(r#""messages""#), "{inner}");
        let (sql, values) = page(best, &plain, Cut::Ranked, None);
        assert!(sql.starts_with(r#"WITH "b" AS"#), "{sql}");
        assert!(
            sql.contains(r#"FROM "b" AS "l""#) && sql.contains("OFFSET $"),
            "{sql}"
        );
        assert!(
            values.0.contains(&sea_query::Value::from(59_i64)),
            "{values:?}"
        );
    }

    /// A plain word query is matched and ranked over `parts_fts` alone, in a subquery the
    /// planner keeps (`OFFSET 0`), so what is joined to `parts` is a `seq` and a rank; with
    /// a window (its parts picked after the join) or a test that reads the part's message,
    /// the rank stays after the join.
    #[test]
    fn a_plain_word_query_ranks_before_the_join() {
        let filter = SearchFilter::new(TextQuery::Words(r#""x""#.into()));
        let matched = || {
            Expr::cust_with_values(
                format!("{VECTOR} @@ to_tsquery('scribe'::regconfig, $1)"),
                ["'x'"],
            )
        };
        let rank = || {
            Expr::cust(format!(
                "CAST(-ts_rank_cd({VECTOR}, 'x', 1) AS DOUBLE PRECISION)"
            ))
        };
        let sql = |window, reads| {
            best_parts(&filter, matched(), rank(), window, Cut::Ranked, reads)
                .build(PostgresQueryBuilder)
                .0
        };
        let alone = sql(None, Reads::WordsAlone);
        let from = alone
            .find(r#"FROM "parts_fts" AS "f""#)
            .unwrap_or(usize::MAX);
        let ranked = alone.find("ts_rank_cd").unwrap_or(0);
        let fence = alone.find("OFFSET").unwrap_or(0);
        assert!(ranked < from && from < fence, "{alone}");
        assert!(
            alone.contains(r#"AS "f" ON "f"."seq" = "p"."seq""#),
            "{alone}"
        );
        assert_eq!(alone.matches("@@").count(), 1, "{alone}");
        for joined in [sql(Some(100), Reads::WordsAlone), sql(None, Reads::Joined)] {
            assert!(!joined.contains("OFFSET"), "{joined}");
            assert!(
                joined.contains(r#"JOIN "parts_fts" AS "f" ON "f"."seq" = "p"."seq""#),
                "{joined}"
            );
        }
    }

    /// An unfiltered plain word query matches and ranks once (a materialized `r` over
    /// `parts_fts` alone) and looks parts up for their message only to bound the page
    /// (at least 200 best parts, 8 per hit up to the page's end: 320 here) and for the
    /// parts within it.
    #[test]
    fn an_unfiltered_word_query_looks_up_messages_only_near_the_page() {
        let filter = SearchFilter {
            limit: 20,
            offset: 20,
            ..SearchFilter::new(TextQuery::Words(r#""x""#.into()))
        };
        let matched = Expr::cust_with_values(
            format!("{VECTOR} @@ to_tsquery('scribe'::regconfig, $1)"),
            ["'x'"],
        );
        let rank = Expr::cust(format!(
            "CAST(-ts_rank_cd({VECTOR}, 'x', 1) AS DOUBLE PRECISION)"
        ));
        let (ranked, best) = ranked_first(&filter, matched, rank);
        let (sql, values) = page(best, &filter, Cut::Ranked, Some(ranked));
        assert!(sql.starts_with(r#"WITH "r" AS"#), "{sql}");
        assert!(sql.contains(r#"MATERIALIZED (SELECT "f"."seq""#), "{sql}");
        assert_eq!(sql.matches("@@").count(), 1, "{sql}");
        assert_eq!(sql.matches("ts_rank_cd").count(), 1, "{sql}");
        assert!(sql.contains(r#""b" AS (SELECT DISTINCT ON"#), "{sql}");
        assert!(
            !sql.contains(r#"JOIN "parts" AS "p" ON "f"."seq""#),
            "{sql}"
        );
        for n in [320_i64, 39] {
            assert!(
                values.0.contains(&sea_query::Value::from(n)),
                "{n}: {values:?}"
            );
        }
        let deep = SearchFilter {
            offset: 980,
            ..filter
        };
        let (ranked, best) = ranked_first(&deep, Expr::cust("TRUE"), Expr::cust("0"));
        let (_, values) = page(best, &deep, Cut::Ranked, Some(ranked));
        assert!(
            values.0.contains(&sea_query::Value::from(8_000_i64)),
            "{values:?}"
        );
    }
}
