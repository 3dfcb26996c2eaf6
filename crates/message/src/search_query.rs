//! Turns any user search string into a safe query for one of three search paths.
//!
//! [`SearchQuery::parse`] never fails and never produces text that SQLite can
//! reject: every term is emitted as an FTS5 string (`"…"`, inner `"` doubled),
//! so no keyword, column filter (`col:`), `^`, `+`, `NEAR(…)` or bracket from
//! the user ever reaches the FTS5 parser. Only `OR`, `NOT`, `*` and `(…)`
//! written by this module do.
//!
//! # Grammar (what the user may type)
//!
//! ```text
//! query   := item*
//! item    := word | "phrase" | -"phrase" | OR | AND | NOT
//! word    := any run of characters other than whitespace, control
//!            characters, '"', '(' and ')'; a trailing '*' makes it a prefix
//! phrase  := '"' anything '"'   (an unclosed quote runs to the end;
//!                                a '*' right after the closing quote makes a prefix)
//! ```
//!
//! - Words next to each other are ANDed; `AND` is accepted and means the same.
//! - `OR` separates alternatives; `NOT x` excludes `x` from its alternative, and so
//!   does web-search syntax: `-x` (a word with exactly one leading `-`) or
//!   `-"a phrase"`. Operators are uppercase only (as in FTS5): `or`, `and`, `not`
//!   are words.
//! - An exclusion leaves out the whole message (search returns one hit per message):
//!   `deploy -staging` does not find a message whose one part says `deploy` and whose
//!   other part, text or a tool's input or output, says `staging`. An FTS5 `NOT` tests
//!   only the part it matches, so every excluded term also comes back with the route
//!   ([`Literals::checks`]: `without` for words, `none` for symbols and substrings) for
//!   the db layer to test over the message's parts; a word query without an exclusion
//!   has none of this.
//! - Precedence: `NOT` binds to the next term, `OR` is loosest:
//!   `a b NOT c OR d` means `(a AND b AND NOT c) OR d`.
//!
//! # Sanitizing rules
//!
//! 1. Whitespace, control characters, `(` and `)` separate words; brackets are
//!    never honoured as grouping.
//! 2. A word loses leading and trailing characters that are not letters or
//!    digits (`C++` → `C`, `--foo` → `foo`, `100%` → `100`, `^x` → `x`,
//!    `#tag` → `tag`, `@user` → `user`, `🚀deployed` → `deployed`). A word
//!    that began with exactly one `-` is excluded (`-foo` → `NOT "foo"`).
//!    A word or phrase with no letter or digit at all (`🚀`, `👍🏽`, `->`, `::`,
//!    `$`, `%`, `...`, `*`, `-`) is a *symbol term*: kept whole and literal (its
//!    `*` is no prefix), matched as a substring (Routing). One leading `-` excludes
//!    it (`-🚀` → `NOT 🚀`, `-::` → `NOT ::`) unless the dash begins an operator:
//!    `-`, `->`, `-=`, `-<` and `--…` are searched as written, and `NOT ->` or
//!    `-"->"` excludes one.
//! 3. What remains is quoted as one FTS5 string, so inner punctuation makes it
//!    a phrase of the tokens unicode61 produced for the document:
//!    `chat-send` → `"chat-send"` (= chat, send), `P2.2`, `my-app.config.ts`,
//!    `sp_new1`, `don't`, `foo:bar` (not a column filter), `a@b.com`.
//! 4. Prefix: `conf*` → `"conf"*`.
//! 5. Stray operators are dropped: leading or trailing `OR`/`AND`, repeated
//!    operators (`a AND OR b` → `"a" OR "b"`), a `NOT` with nothing after it.
//!    An alternative made only of `NOT` terms cannot be expressed by FTS5 and
//!    is dropped (`NOT a` alone → [`SearchQuery::Empty`]); a leading `NOT`
//!    otherwise attaches to its alternative (`NOT a b` → `"b" NOT "a"`).
//! 6. At most [`MAX_TERMS`] terms are kept (FTS5 nests each exclusion one level
//!    deeper and refuses an expression more than 256 levels deep);
//!    `MessageService::search` refuses a longer query rather than search part of it.
//!
//! # Routing
//!
//! - No term contains CJK (Han, kana, Hangul, Bopomofo) or another script
//!   written without spaces (Thai, Lao, Khmer, Myanmar), and an alternative has a
//!   term with a letter or digit → [`SearchQuery::Fts`] for the `unicode61` word
//!   index, of the alternatives with such a term, their symbol terms left out
//!   (the index holds no symbols; a word with symbols inside is a phrase of its
//!   words: `ship🚀it` → `ship`, `it`). What the index cannot test comes with the
//!   route ([`SearchQuery::parse_with_literals`], [`Literals`]): each
//!   alternative's symbol terms, to be tested on its candidates as substrings
//!   (`🚀 deployed` needs both, `deployed -🚀` leaves out the rocket), each
//!   alternative's excluded words (`deploy -staging`), and the
//!   alternatives of symbols alone, searched as substrings next to the words
//!   (`deployed OR 🚀`). A pure word query without an exclusion has none.
//! - When every alternative is made only of symbol terms (`🚀`, `->`,
//!   `-> OR ::`, `!!! ???`) the whole query is a substring search, as CJK is
//!   (below): symbol terms of three or more characters go to the trigram
//!   expression, shorter ones to the `LIKE` pattern (`🚀` → `%🚀%`).
//! - Otherwise (or always, with [`SearchQuery::parse_substring`]) the
//!   alternatives with a term of three or more characters are built for the
//!   `trigram` index ([`SearchQuery::Trigram`]), without prefixes (trigram
//!   already matches substrings). Shorter terms cannot use trigrams: they are
//!   left out of the expression and come back as [`Literals::checks`] (`中文
//!   数据库` searches `数据库` and tests `中文`), and an alternative of short terms
//!   alone as [`Literals::alone`] (`数据库 OR 缓存`).
//! - If no term of three or more characters remains, the longest positive
//!   term (the first among equals) becomes an escaped `LIKE` pattern
//!   ([`SearchQuery::Like`]): `%term%` with `\`, `%` and `_` escaped by `\`,
//!   to be used as `content LIKE ?1 ESCAPE '\'`; when the query holds more than
//!   that one term, [`Literals::alone`] lists every alternative (`-> NOT ::`).
//! - Nothing searchable → [`SearchQuery::Empty`]: callers return no hits. So is
//!   a query of exclusions alone (`-🚀`, `NOT x`): an alternative needs a term
//!   that must occur.

/// The escape character of [`SearchQuery::Like`] patterns (`ESCAPE '\'`).
pub const LIKE_ESCAPE: char = '\\';

/// How many terms (words, phrases, symbols) a search may hold: [`SearchQuery::parse`]
/// keeps the first ones, and `MessageService::search` refuses a query with more
/// ([`SearchQuery::term_count`]). Each exclusion nests the FTS5 expression one level
/// deeper, and FTS5 refuses one more than 256 levels deep.
pub const MAX_TERMS: usize = 200;

/// A sanitized user search, routed to the index that can answer it.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum SearchQuery {
    /// A MATCH expression for the `unicode61` word index.
    Fts(String),
    /// A MATCH expression for the `trigram` index (CJK, substrings).
    Trigram(String),
    /// A `LIKE` pattern escaped with [`LIKE_ESCAPE`] (CJK shorter than 3 chars).
    Like(String),
    /// Nothing searchable: no hits, not an error.
    Empty,
}

/// What the route of [`SearchQuery::parse`] cannot test through its index, as literal
/// substrings (see "Routing" in the module doc) and excluded words; empty for a query its
/// route answers alone (every pure word query without an exclusion).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Literals {
    /// For [`SearchQuery::Fts`] and [`SearchQuery::Trigram`]: one per alternative of the
    /// expression, in order, or none when no alternative has anything to test.
    pub checks: Vec<LiteralCheck>,
    /// Alternatives the index cannot serve at all, as (terms that must occur, terms
    /// that must not), all literal substrings: an alternative of symbols alone next to
    /// words (`deployed OR 🚀`), or of terms shorter than three characters next to the
    /// trigram route. For [`SearchQuery::Like`]: every alternative, when the query is more
    /// than its one pattern (`-> ::`, `-> NOT ::`, `中 🚀`).
    pub alone: Vec<(Vec<String>, Vec<String>)>,
}

impl Literals {
    /// Whether the route answers the query alone.
    pub fn is_empty(&self) -> bool {
        self.checks.is_empty() && self.alone.is_empty()
    }
}

/// One alternative of the route's expression and what its candidates are tested for
/// besides it: the literal substrings the part must also hold (`all`), the substrings
/// (`none`) and words (`without`) no part of its message may hold. The symbols next to its
/// words (`🚀 deployed`, `deployed -🚀`), its terms of one or two characters on the trigram
/// route, its excluded words on the word route (`deploy -staging`).
///
/// An exclusion leaves out the whole message: search returns one hit per message, so
/// `deploy -staging` does not find a message whose one part says `deploy` and whose other
/// part (text or tool output) says `staging`. The expression's own `NOT` tests only the
/// matching part, hence the exclusions are handed over again here.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LiteralCheck {
    /// The alternative's own expression (for the same index as the route's).
    pub expr: String,
    /// Substrings its part must hold.
    pub all: Vec<String>,
    /// Substrings no part of its message may hold.
    pub none: Vec<String>,
    /// Its excluded words (word route only), one FTS5 expression each (`"staging"`,
    /// `"conf"*`): no part of its message may match one.
    pub without: Vec<String>,
}

impl SearchQuery {
    /// Sanitizes and routes a user search string (see the module doc). Never fails.
    pub fn parse(input: &str) -> SearchQuery {
        SearchQuery::parse_with_literals(input).0
    }

    /// How many terms (words, phrases, symbols; not the operators) `input` holds, as
    /// [`SearchQuery::parse`] reads it: more than [`MAX_TERMS`] are not all searched.
    pub fn term_count(input: &str) -> usize {
        lex(input)
            .iter()
            .filter(|l| matches!(l, Lexeme::Term(_)))
            .count()
    }

    /// [`SearchQuery::parse`] and what its route cannot test itself ([`Literals`]), from one
    /// reading of `input`.
    pub fn parse_with_literals(input: &str) -> (SearchQuery, Literals) {
        let groups = parse_groups(input);
        let spaceless = groups
            .iter()
            .flat_map(|g| g.positive.iter().chain(&g.negative))
            .any(|t| t.text.chars().any(is_spaceless_script));
        if spaceless {
            return plan_substring(groups);
        }
        // The word index holds no symbols: an alternative with a word is searched for its
        // words, its symbols tested on the candidates; an alternative of symbols alone is
        // a substring search next to them (and the whole query when every one is).
        let (words, alone): (Vec<Group>, Vec<Group>) = groups
            .into_iter()
            .partition(|g| g.positive.iter().any(|t| !is_symbol(t)));
        if words.is_empty() {
            return plan_substring(alone);
        }
        let indexed: Vec<Group> = words.iter().map(without_symbols).collect();
        let symbols = |terms: &[Term]| -> Vec<String> {
            terms
                .iter()
                .filter(|t| is_symbol(t))
                .map(|t| t.text.clone())
                .collect()
        };
        let checks = words
            .iter()
            .zip(&indexed)
            .map(|(group, words)| LiteralCheck {
                expr: emit(std::slice::from_ref(words), true),
                all: symbols(&group.positive),
                none: symbols(&group.negative),
                without: words
                    .negative
                    .iter()
                    .map(|term| {
                        let excluded = Group {
                            positive: vec![term.clone()],
                            negative: Vec::new(),
                        };
                        emit(std::slice::from_ref(&excluded), true)
                    })
                    .collect(),
            })
            .collect();
        let route = SearchQuery::Fts(emit(&indexed, true));
        (route, literals(checks, alone.iter().map(literal).collect()))
    }

    /// Like [`SearchQuery::parse`], but always a substring search: routes to
    /// [`SearchQuery::Trigram`], [`SearchQuery::Like`] or [`SearchQuery::Empty`].
    pub fn parse_substring(input: &str) -> SearchQuery {
        plan_substring(parse_groups(input)).0
    }

    /// The alternatives of `input`'s substring search ([`SearchQuery::parse_substring`],
    /// and what [`SearchQuery::parse`] builds when it routes to the trigram index) that can
    /// match text without CJK or other spaceless-script characters: those whose terms of
    /// three or more characters (the ones the trigram expression keeps) have none. Each
    /// is (terms that must occur, terms that must not), literal text.
    ///
    /// The trigram index holds only text with such characters (schema V7), so a search
    /// matches these alternatives in the rest of the text by other means.
    ///
    /// Each alternative holds all of its terms, the short ones the trigram expression
    /// leaves to [`Literals::checks`] too: a LIKE tests them all.
    pub fn plain_alternatives(input: &str) -> Vec<(Vec<String>, Vec<String>)> {
        parse_groups(input)
            .iter()
            .filter(|g| g.positive.iter().any(long_enough))
            .filter(|g| {
                !g.positive
                    .iter()
                    .any(|t| t.text.chars().any(is_spaceless_script))
            })
            .map(literal)
            .collect()
    }

    /// Whether there is nothing to search for.
    pub fn is_empty(&self) -> bool {
        matches!(self, SearchQuery::Empty)
    }

    /// The MATCH expression or LIKE pattern; `None` for [`SearchQuery::Empty`].
    pub fn as_str(&self) -> Option<&str> {
        match self {
            SearchQuery::Fts(s) | SearchQuery::Trigram(s) | SearchQuery::Like(s) => Some(s),
            SearchQuery::Empty => None,
        }
    }
}

/// A sanitized term: the text to quote and whether it is a prefix.
#[derive(Debug, Clone, PartialEq)]
struct Term {
    text: String,
    prefix: bool,
}

/// One OR-alternative: all positive terms AND none of the negative ones.
#[derive(Debug, Default)]
struct Group {
    positive: Vec<Term>,
    negative: Vec<Term>,
}

#[derive(Debug)]
enum Lexeme {
    Term(Term),
    Or,
    And,
    Not,
}

fn is_separator(c: char) -> bool {
    c.is_whitespace() || c.is_control() || c == '(' || c == ')'
}

fn lex(input: &str) -> Vec<Lexeme> {
    let mut out = Vec::new();
    let mut chars = input.chars().peekable();
    let mut word = String::new();
    while let Some(c) = chars.next() {
        if c == '"' {
            // `-"a phrase"` excludes the phrase, as `-word` excludes the word.
            if word == "-" {
                word.clear();
                out.push(Lexeme::Not);
            }
            flush_word(&mut word, &mut out);
            let mut phrase = String::new();
            for c in chars.by_ref() {
                if c == '"' {
                    break;
                }
                // Control characters become spaces so the FTS5 string stays plain text.
                phrase.push(if c.is_control() { ' ' } else { c });
            }
            let mut prefix = false;
            while chars.next_if_eq(&'*').is_some() {
                prefix = true;
            }
            // A phrase of symbols alone (`"->"`) is kept: it is searched as a substring.
            if !phrase.trim().is_empty() {
                out.push(Lexeme::Term(Term {
                    text: phrase.trim().to_owned(),
                    prefix,
                }));
            }
        } else if is_separator(c) {
            flush_word(&mut word, &mut out);
        } else {
            word.push(c);
        }
    }
    flush_word(&mut word, &mut out);
    out
}

fn flush_word(word: &mut String, out: &mut Vec<Lexeme>) {
    if word.is_empty() {
        return;
    }
    let raw = std::mem::take(word);
    match raw.as_str() {
        "OR" => out.push(Lexeme::Or),
        "AND" => out.push(Lexeme::And),
        "NOT" => out.push(Lexeme::Not),
        _ => {
            let trimmed_end = raw.trim_end_matches(|c: char| !c.is_alphanumeric());
            let prefix = raw[trimmed_end.len()..].contains('*');
            let text = trimmed_end.trim_start_matches(|c: char| !c.is_alphanumeric());
            if !text.is_empty() {
                // Web-search syntax: one leading `-` excludes the word (`--x` does not).
                let mut chars = raw.chars();
                if chars.next() == Some('-') && chars.next() != Some('-') {
                    out.push(Lexeme::Not);
                }
                out.push(Lexeme::Term(Term {
                    text: text.to_owned(),
                    prefix,
                }));
            } else if let Some(rest) = excluded_symbol(&raw) {
                // `-🚀`: web-search syntax excludes the symbol as it excludes a word.
                out.push(Lexeme::Not);
                out.push(Lexeme::Term(Term {
                    text: rest.to_owned(),
                    prefix: false,
                }));
            } else {
                // No letter or digit (`🚀`, `->`, `$`, `...`): a literal symbol term, every
                // character kept (`*` and `-` included), searched as a substring.
                out.push(Lexeme::Term(Term {
                    text: raw,
                    prefix: false,
                }));
            }
        }
    }
}

/// The symbols a word of symbols alone excludes: those after exactly one leading `-`, as
/// `-word` excludes a word (`-🚀` → `🚀`, `-::` → `::`, `-$` → `$`), unless the dash
/// begins an operator: `-` alone, `--…`, `->`, `-=`, `-<` are searched as written
/// (`-"->"` or `NOT ->` excludes one).
fn excluded_symbol(raw: &str) -> Option<&str> {
    let rest = raw.strip_prefix('-')?;
    let operator = matches!(rest.chars().next(), None | Some('-' | '>' | '=' | '<'));
    (!operator).then_some(rest)
}

fn parse_groups(input: &str) -> Vec<Group> {
    let mut groups = Vec::new();
    let mut current = Group::default();
    let mut negate = false;
    let mut kept = 0;
    for lexeme in lex(input) {
        match lexeme {
            Lexeme::Or => {
                negate = false;
                close_group(&mut current, &mut groups);
            }
            Lexeme::And => {}
            Lexeme::Not => negate = true,
            Lexeme::Term(term) => {
                if kept == MAX_TERMS {
                    break;
                }
                kept += 1;
                if std::mem::take(&mut negate) {
                    current.negative.push(term);
                } else {
                    current.positive.push(term);
                }
            }
        }
    }
    close_group(&mut current, &mut groups);
    groups
}

/// Whether `term` has no letter or digit (`🚀`, `->`): the word index cannot find it.
fn is_symbol(term: &Term) -> bool {
    !term.text.chars().any(char::is_alphanumeric)
}

/// `group` without its symbol terms.
fn without_symbols(group: &Group) -> Group {
    let keep = |terms: &[Term]| terms.iter().filter(|t| !is_symbol(t)).cloned().collect();
    Group {
        positive: keep(&group.positive),
        negative: keep(&group.negative),
    }
}

/// Keeps a finished alternative only if FTS5 can express it (it needs a positive term).
fn close_group(current: &mut Group, groups: &mut Vec<Group>) {
    let group = std::mem::take(current);
    if !group.positive.is_empty() {
        groups.push(group);
    }
}

/// Whether the trigram index can find `term`: it has three or more characters.
fn long_enough(term: &Term) -> bool {
    term.text.chars().count() >= 3
}

/// `group` as literal substrings: (terms that must occur, terms that must not).
fn literal(group: &Group) -> (Vec<String>, Vec<String>) {
    let texts = |terms: &[Term]| terms.iter().map(|t| t.text.clone()).collect();
    (texts(&group.positive), texts(&group.negative))
}

/// [`Literals`] with the checks left out when none tests anything.
fn literals(checks: Vec<LiteralCheck>, alone: Vec<(Vec<String>, Vec<String>)>) -> Literals {
    let tested = checks
        .iter()
        .any(|c| !c.all.is_empty() || !c.none.is_empty() || !c.without.is_empty());
    Literals {
        checks: if tested { checks } else { Vec::new() },
        alone,
    }
}

/// The substring route of `groups`: the alternatives with a term of three or more
/// characters go to the trigram expression (their shorter terms left to
/// [`Literals::checks`]), the others are [`Literals::alone`]; without any such
/// alternative, the longest term that must occur is the LIKE pattern (and every
/// alternative is in [`Literals::alone`] when there is more to the query than it).
fn plan_substring(groups: Vec<Group>) -> (SearchQuery, Literals) {
    let (indexed, alone): (Vec<Group>, Vec<Group>) = groups
        .into_iter()
        .partition(|g| g.positive.iter().any(long_enough));
    if !indexed.is_empty() {
        let split = |terms: &[Term], long: bool| -> Vec<Term> {
            terms
                .iter()
                .filter(|t| long_enough(t) == long)
                .cloned()
                .collect()
        };
        let trigram: Vec<Group> = indexed
            .iter()
            .map(|g| Group {
                positive: split(&g.positive, true),
                negative: split(&g.negative, true),
            })
            .collect();
        let checks = indexed
            .iter()
            .zip(&trigram)
            .map(|(group, long)| {
                let texts = |terms: Vec<Term>| terms.into_iter().map(|t| t.text).collect();
                LiteralCheck {
                    expr: emit(std::slice::from_ref(long), false),
                    all: texts(split(&group.positive, false)),
                    // Every excluded term, the long ones too: the expression's NOT tests
                    // only the matching part, the check every part of its message.
                    none: texts(group.negative.clone()),
                    without: Vec::new(),
                }
            })
            .collect();
        let route = SearchQuery::Trigram(emit(&trigram, false));
        return (route, literals(checks, alone.iter().map(literal).collect()));
    }
    let like_term = alone
        .iter()
        .flat_map(|g| &g.positive)
        .fold(None::<&Term>, |best, t| match best {
            Some(b) if b.text.chars().count() >= t.text.chars().count() => Some(b),
            _ => Some(t),
        })
        .map(|t| like_pattern(&t.text));
    let Some(pattern) = like_term else {
        return (SearchQuery::Empty, Literals::default());
    };
    let single = matches!(alone.as_slice(), [g] if g.positive.len() == 1 && g.negative.is_empty());
    let alone = if single {
        Vec::new()
    } else {
        alone.iter().map(literal).collect()
    };
    (SearchQuery::Like(pattern), literals(Vec::new(), alone))
}

fn emit(groups: &[Group], prefixes: bool) -> String {
    let several = groups.len() > 1;
    let mut out = String::new();
    for (i, group) in groups.iter().enumerate() {
        if i > 0 {
            out.push_str(" OR ");
        }
        let wrap = several && group.positive.len() + group.negative.len() > 1;
        if wrap {
            out.push('(');
        }
        for (j, term) in group.positive.iter().enumerate() {
            if j > 0 {
                out.push(' ');
            }
            push_fts_string(&mut out, term, prefixes);
        }
        for term in &group.negative {
            out.push_str(" NOT ");
            push_fts_string(&mut out, term, prefixes);
        }
        if wrap {
            out.push(')');
        }
    }
    out
}

fn push_fts_string(out: &mut String, term: &Term, prefixes: bool) {
    out.push('"');
    out.push_str(&term.text.replace('"', "\"\""));
    out.push('"');
    if prefixes && term.prefix {
        out.push('*');
    }
}

fn like_pattern(text: &str) -> String {
    let mut out = String::with_capacity(text.len() + 2);
    out.push('%');
    for c in text.chars() {
        if matches!(c, '\\' | '%' | '_') {
            out.push(LIKE_ESCAPE);
        }
        out.push(c);
    }
    out.push('%');
    out
}

/// Scripts that `unicode61` cannot split into words (no spaces between them); the same
/// ranges decide which parts the trigram index holds.
fn is_spaceless_script(c: char) -> bool {
    scribe_db::search::is_spaceless_script(c)
}

#[cfg(test)]
mod sqlite_tests;
#[cfg(test)]
mod tests;
