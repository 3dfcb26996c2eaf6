//! Fragments: a named, parameterised SQL expression written once and used by any query as
//! `sqlgen.name(arg, …)`, so a rule (a saturating sum, a clamp) has one definition.
//!
//! ```sql
//! -- fragment: saturating_add(x, d)
//! CASE WHEN d <= 0 THEN x + d WHEN x > 9223372036854775807 - d THEN 9223372036854775807
//!      ELSE x + d END
//!
//! -- name: AddUsage :exec
//! UPDATE sessions SET input_tokens = sqlgen.saturating_add(input_tokens, CAST(@n AS BIGINT))
//! WHERE id = @id;
//! ```
//!
//! A `-- fragment: name(p, …)` header starts a definition (it ends at the next header, as
//! a query does); the body is one expression. Fragments are shared by every query of a
//! dialect: those in `sql/queries/*.sql` are everyone's, and one in a dialect directory
//! (`sql/queries/postgres/`) replaces the shared one of the same name for that dialect, as a
//! query override does, so a rule each engine spells differently keeps one name and shared
//! queries stay shared.
//!
//! Expansion is textual and happens before anything else looks at a query (parameters,
//! parsing, the rewrite to `?N`/`$N`): each `sqlgen.name(…)` is replaced by the body with
//! every parameter (an unquoted identifier equal to its name, not after `.`, `@` or `:`
//! and not before `(`) replaced by the argument's text. An argument or a body that is not
//! a single operand (a name, literal, parameter, call, `CAST(…)`, `CASE … END` or
//! parenthesised expression) is parenthesised, so `sqlgen.f(a + b)` can never regroup.
//! Arguments may hold parameters, commas inside parentheses and further fragment calls; a
//! body may call other fragments but not itself. Every diagnostic about expanded text is
//! reported at its place in the query file, or, for text that came from a body, at the use
//! site with the place in the fragment appended.

use std::collections::BTreeSet;

use sqlparser::keywords::ALL_KEYWORDS;

use crate::Dialect;
use crate::diag::{Diagnostic, suggestion};
use crate::query::{self, PosError, Token, TokenWithSpan};

/// The prefix of a fragment call: `sqlgen.name(…)`. Like sqlc's `sqlc.arg(…)`, it is
/// reserved: any `sqlgen.` in a query is a call (an unknown name is an error), so a call
/// never reaches a database.
pub const CALL_PREFIX: &str = "sqlgen";

/// The most SQL one query may expand to; fragments that use each other several times grow
/// exponentially, and this stops that before memory does.
pub const MAX_EXPANSION: usize = 256 << 10;

/// A `-- fragment: name(params)` block as found in a file, not yet tokenized.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RawFragment {
    /// `saturating_add`.
    pub name: String,
    /// Parameter names in order.
    pub params: Vec<String>,
    /// File as displayed.
    pub file: String,
    /// Line of the header.
    pub line: u64,
    /// Column of the name in the header.
    pub col: u64,
    /// The body, prefixed with newlines so that positions are the file's own.
    pub body: String,
}

/// If `line` (trimmed at the start) is a `-- fragment:` header, what follows `fragment:`.
pub(crate) fn header(line: &str) -> Option<&str> {
    let rest = line.strip_prefix("--")?.trim_start();
    rest.strip_prefix("fragment:")
}

fn is_identifier(s: &str) -> bool {
    s.chars()
        .next()
        .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
        && s.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
}

/// Parses `name(p, …)`, the text after `fragment:` whose first character is at column
/// `col0`: the name with its column and the parameters, or an error's column and message.
pub(crate) fn parse_header(
    rest: &str,
    col0: u64,
) -> Result<(String, u64, Vec<String>), (u64, String)> {
    let col = |byte: usize| col0 + rest.get(..byte).unwrap_or(rest).chars().count() as u64;
    // The column of `part`, a slice of `rest`.
    let at = |part: &str| {
        let byte = (part.as_ptr() as usize)
            .checked_sub(rest.as_ptr() as usize)
            .filter(|b| *b <= rest.len())
            .unwrap_or(0);
        col(byte)
    };
    let text = rest.trim_end();
    let Some(open) = text.find('(') else {
        let name = text.trim();
        if name.is_empty() {
            return Err((
                col(text.len()),
                "missing fragment name after \"-- fragment:\"".into(),
            ));
        }
        return Err((
            col(text.len()),
            format!(
                "missing parameter list after the fragment name; write {name}(x, …) or {name}()"
            ),
        ));
    };
    let name = text.get(..open).unwrap_or_default().trim();
    if name.is_empty() {
        return Err((
            col(open),
            "missing fragment name after \"-- fragment:\"".into(),
        ));
    }
    if !is_identifier(name) {
        return Err((
            at(name),
            format!("invalid fragment name \"{name}\"; use letters, digits and _"),
        ));
    }
    let after = text.get(open + 1..).unwrap_or_default();
    let Some(close) = after.find(')') else {
        return Err((
            col(text.len()),
            format!("unclosed parameter list of fragment \"{name}\""),
        ));
    };
    let extra = after.get(close + 1..).unwrap_or_default().trim();
    if !extra.is_empty() {
        return Err((
            at(extra),
            format!("unexpected \"{extra}\" after the parameter list"),
        ));
    }
    let inner = after.get(..close).unwrap_or_default();
    let mut params: Vec<String> = Vec::new();
    if !inner.trim().is_empty() {
        for part in inner.split(',') {
            let p = part.trim();
            let pcol = if p.is_empty() { at(part) } else { at(p) };
            if p.is_empty() {
                return Err((pcol, format!("empty parameter name in fragment \"{name}\"")));
            }
            if !is_identifier(p) {
                return Err((
                    pcol,
                    format!(
                        "invalid parameter \"{p}\" of fragment \"{name}\"; use letters, digits and _"
                    ),
                ));
            }
            let upper = p.to_ascii_uppercase();
            if ALL_KEYWORDS.binary_search(&upper.as_str()).is_ok()
                || p.eq_ignore_ascii_case(CALL_PREFIX)
            {
                return Err((
                    pcol,
                    format!(
                        "parameter \"{p}\" of fragment \"{name}\" is an SQL keyword (every \
                         \"{p}\" in the body would be replaced); choose another name"
                    ),
                ));
            }
            if params.iter().any(|q| q.eq_ignore_ascii_case(p)) {
                return Err((
                    pcol,
                    format!("duplicate parameter \"{p}\" of fragment \"{name}\""),
                ));
            }
            params.push(p.to_string());
        }
    }
    Ok((name.to_string(), at(name), params))
}

/// A fragment body split at its parameters.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Piece {
    /// Body text, a byte range of [`RawFragment::body`].
    Text(usize, usize),
    /// The argument of this parameter.
    Param(usize),
}

#[derive(Debug, Clone, PartialEq, Eq)]
struct Compiled {
    pieces: Vec<Piece>,
    /// Uses of each parameter in the body.
    uses: Vec<usize>,
    /// The body is not a single operand: parenthesised where used.
    wrap: bool,
    /// Byte range of the body from its first to its last token.
    core: (usize, usize),
}

#[derive(Debug, Clone, PartialEq, Eq)]
struct Entry {
    raw: RawFragment,
    /// `None` when the definition has errors (reported once, at the definition).
    compiled: Option<Compiled>,
}

/// The fragments one dialect sees: the shared ones, each replaced by a dialect one of the
/// same name.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Fragments {
    entries: Vec<Entry>,
    dialect: Dialect,
}

/// A fragment definition's identity across dialects: file and header line.
pub type FragmentKey = (String, u64);

impl Fragments {
    /// Tokenizes and checks the definitions of one dialect. A name defined twice in the same
    /// layer (the shared files, or one dialect's directory) is an error; a dialect definition
    /// replaces the shared one of that name.
    pub fn collect(
        dialect: Dialect,
        shared: &[RawFragment],
        overrides: &[RawFragment],
    ) -> (Fragments, Vec<Diagnostic>) {
        let mut diags = Vec::new();
        let mut layers: Vec<Vec<&RawFragment>> = Vec::new();
        for layer in [overrides, shared] {
            let mut kept: Vec<&RawFragment> = Vec::new();
            for f in layer {
                if let Some(first) = kept.iter().find(|k| k.name == f.name) {
                    diags.push(Diagnostic {
                        file: f.file.clone(),
                        line: f.line,
                        col: f.col,
                        query: Some(f.name.clone()),
                        message: format!(
                            "duplicate fragment \"{}\" (first defined at {}:{})",
                            f.name, first.file, first.line
                        ),
                    });
                } else {
                    kept.push(f);
                }
            }
            layers.push(kept);
        }
        let (own, shared) = (&layers[0], &layers[1]);
        let mut entries = Vec::new();
        for raw in own.iter().chain(
            shared
                .iter()
                .filter(|s| !own.iter().any(|o| o.name == s.name)),
        ) {
            let compiled = match compile(raw, dialect) {
                Ok(c) => Some(c),
                Err((line, col, message)) => {
                    diags.push(Diagnostic {
                        file: raw.file.clone(),
                        line,
                        col,
                        query: Some(raw.name.clone()),
                        message,
                    });
                    None
                }
            };
            entries.push(Entry {
                raw: (*raw).clone(),
                compiled,
            });
        }
        (Fragments { entries, dialect }, diags)
    }

    fn find(&self, name: &str) -> Option<usize> {
        self.entries.iter().position(|e| e.raw.name == name)
    }

    /// The definitions in effect that have errors (reported at the definition).
    pub fn broken(&self) -> impl Iterator<Item = FragmentKey> + '_ {
        self.entries
            .iter()
            .filter(|e| e.compiled.is_none())
            .map(|e| (e.raw.file.clone(), e.raw.line))
    }

    /// The definitions in effect, by identity, with the position and name to report them at.
    pub fn definitions(&self) -> impl Iterator<Item = (FragmentKey, &RawFragment)> {
        self.entries
            .iter()
            .map(|e| ((e.raw.file.clone(), e.raw.line), &e.raw))
    }
}

/// Whether `t` is an unquoted word equal (ignoring case) to `word`.
fn is_word(t: &TokenWithSpan, word: &str) -> bool {
    matches!(&t.token, Token::Word(w) if w.quote_style.is_none() && w.value.eq_ignore_ascii_case(word))
}

fn significant(tokens: &[TokenWithSpan]) -> Vec<&TokenWithSpan> {
    tokens
        .iter()
        .filter(|t| !matches!(t.token, Token::Whitespace(_) | Token::EOF))
        .collect()
}

fn compile(raw: &RawFragment, dialect: Dialect) -> Result<Compiled, PosError> {
    let tokens = query::tokenize(&raw.body, dialect)?;
    let sig = significant(&tokens);
    let (Some(first), Some(last)) = (sig.first(), sig.last()) else {
        return Err((raw.line, raw.col, "fragment has no sql".into()));
    };
    if let Some(semi) = sig.iter().find(|t| t.token == Token::SemiColon) {
        return Err((
            semi.span.start.line,
            semi.span.start.column,
            "a fragment is one expression; remove the \";\"".into(),
        ));
    }
    let starts = query::line_starts(&raw.body);
    let off = |l: u64, c: u64| query::byte_offset(&starts, &raw.body, l, c);
    let core = (
        off(first.span.start.line, first.span.start.column),
        off(last.span.end.line, last.span.end.column),
    );
    let mut pieces = Vec::new();
    let mut uses = vec![0usize; raw.params.len()];
    let mut cursor = core.0;
    for (i, t) in sig.iter().enumerate() {
        let Token::Word(w) = &t.token else { continue };
        if w.quote_style.is_some() {
            continue;
        }
        let Some(p) = raw
            .params
            .iter()
            .position(|p| p.eq_ignore_ascii_case(&w.value))
        else {
            continue;
        };
        let before = i.checked_sub(1).and_then(|k| sig.get(k));
        // `t.x` is a column of t, `@x` / `:x` a query parameter, `x(…)` a function.
        let qualified = before.is_some_and(|b| {
            b.token == Token::Period
                || matches!(b.token, Token::AtSign | Token::Colon) && b.span.end == t.span.start
        });
        let called = sig.get(i + 1).is_some_and(|n| n.token == Token::LParen);
        if qualified || called {
            continue;
        }
        let a = off(t.span.start.line, t.span.start.column);
        let b = off(t.span.end.line, t.span.end.column);
        pieces.push(Piece::Text(cursor, a));
        pieces.push(Piece::Param(p));
        uses[p] += 1;
        cursor = b;
    }
    pieces.push(Piece::Text(cursor, core.1));
    pieces.retain(|p| !matches!(p, Piece::Text(a, b) if a >= b));
    if let Some(unused) = uses.iter().position(|n| *n == 0) {
        return Err((
            raw.line,
            raw.col,
            format!(
                "parameter \"{}\" is never used in the body of fragment \"{}\"",
                raw.params[unused], raw.name
            ),
        ));
    }
    Ok(Compiled {
        pieces,
        uses,
        wrap: !is_operand(&sig),
        core,
    })
}

/// Whether these tokens (no whitespace) form a single operand, which needs no parentheses
/// wherever it is put: a name (`a`, `t.a`), a literal, a parameter (`@a`, `?1`), a call
/// (`f(…)`, `CAST(…)`, `sqlgen.f(…)`), a parenthesised expression, or one `CASE … END`.
fn is_operand(tokens: &[&TokenWithSpan]) -> bool {
    // The tokens at nesting depth 0, a bracketed group standing as one `None`.
    let mut top: Vec<Option<&TokenWithSpan>> = Vec::new();
    let mut depth = 0usize;
    for t in tokens {
        match t.token {
            Token::LParen | Token::LBracket => {
                if depth == 0 {
                    top.push(None);
                }
                depth += 1;
            }
            Token::RParen | Token::RBracket => {
                let Some(d) = depth.checked_sub(1) else {
                    return false;
                };
                depth = d;
            }
            _ if depth == 0 => top.push(Some(t)),
            _ => {}
        }
    }
    if depth != 0 {
        return false;
    }
    let word =
        |t: &Option<&TokenWithSpan>| matches!(t, Some(t) if matches!(t.token, Token::Word(_)));
    // CASE … END: the first CASE closes at the last token.
    if top
        .first()
        .is_some_and(|t| t.is_some_and(|t| is_word(t, "case")))
    {
        let mut open = 0usize;
        for (i, t) in top.iter().enumerate() {
            let Some(t) = t else { continue };
            if is_word(t, "case") {
                open += 1;
            } else if is_word(t, "end") {
                open = open.saturating_sub(1);
                if open == 0 {
                    return i + 1 == top.len();
                }
            }
        }
        return false;
    }
    match top.as_slice() {
        [None] => true,
        [Some(t)] => matches!(
            t.token,
            Token::Word(_)
                | Token::Number(..)
                | Token::SingleQuotedString(_)
                | Token::DoubleQuotedString(_)
                | Token::HexStringLiteral(_)
                | Token::Placeholder(_)
        ),
        [Some(sigil), Some(name)]
            if matches!(sigil.token, Token::AtSign | Token::Colon)
                && matches!(name.token, Token::Word(_)) =>
        {
            true
        }
        // a, t.a, f(…), s.f(…); `NOT (…)` and `DISTINCT (…)` are an operator and an operand.
        [first, rest @ ..]
            if word(first)
                && !first.is_some_and(|t| is_word(t, "not") || is_word(t, "distinct")) =>
        {
            let path = match rest.split_last() {
                Some((None, path)) => path,
                _ => rest,
            };
            path.len() % 2 == 0
                && path.chunks(2).all(|pair| {
                    matches!(pair[0], Some(t) if t.token == Token::Period) && word(&pair[1])
                })
        }
        _ => false,
    }
}

/// Where a byte of expanded text came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Origin {
    /// This byte offset of the query body.
    Query(usize),
    /// This byte offset of fragment `idx`'s body, expanded for the call at `use_site` (a byte
    /// offset of the query body).
    Fragment {
        idx: usize,
        at: usize,
        use_site: usize,
    },
}

impl Origin {
    fn shifted(self, n: usize) -> Origin {
        match self {
            Origin::Query(o) => Origin::Query(o + n),
            Origin::Fragment { idx, at, use_site } => Origin::Fragment {
                idx,
                at: at + n,
                use_site,
            },
        }
    }

    fn use_site(self) -> usize {
        match self {
            Origin::Query(o) => o,
            Origin::Fragment { use_site, .. } => use_site,
        }
    }
}

/// Text with the origin of each of its bytes: segments starting at a byte offset, each a
/// verbatim copy of its origin.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
struct Mapped {
    text: String,
    segs: Vec<(usize, Origin)>,
}

impl Mapped {
    fn push(&mut self, s: &str, origin: Origin) {
        if !s.is_empty() {
            self.segs.push((self.text.len(), origin));
            self.text.push_str(s);
        }
    }

    /// Appends `from.text[a..b]` with its origins.
    fn push_range(&mut self, from: &Mapped, a: usize, b: usize) {
        let first = from
            .segs
            .partition_point(|(s, _)| *s <= a)
            .saturating_sub(1);
        for (i, &(start, origin)) in from.segs.iter().enumerate().skip(first) {
            if start >= b {
                break;
            }
            let end = from.segs.get(i + 1).map_or(from.text.len(), |s| s.0);
            let (lo, hi) = (start.max(a), end.min(b));
            if lo < hi {
                self.push(
                    from.text.get(lo..hi).unwrap_or_default(),
                    origin.shifted(lo - start),
                );
            }
        }
    }

    fn origin_at(&self, off: usize) -> Option<Origin> {
        let i = self.segs.partition_point(|(s, _)| *s <= off);
        let (start, origin) = self.segs.get(i.checked_sub(1)?)?;
        Some(origin.shifted(off - start))
    }
}

/// A query body with its fragment calls expanded.
#[derive(Debug, Clone)]
pub struct Expanded<'a> {
    /// The expanded text (the original when it calls no fragment), positions as the
    /// original's up to the first call.
    pub body: String,
    /// `None` when nothing was expanded.
    mapped: Option<Mapped>,
    source: &'a str,
    fragments: &'a Fragments,
}

/// 1-based line and column (in characters) of byte `off` of `text`.
fn position(text: &str, off: usize) -> (u64, u64) {
    let mut off = off.min(text.len());
    while !text.is_char_boundary(off) {
        off -= 1;
    }
    let before = text.get(..off).unwrap_or_default();
    let line = before.matches('\n').count() as u64 + 1;
    let start = before.rfind('\n').map_or(0, |i| i + 1);
    let col = before.get(start..).unwrap_or_default().chars().count() as u64 + 1;
    (line, col)
}

impl Expanded<'_> {
    /// Where a problem at `(line, col)` of the expanded body is reported: its place in the
    /// query, or for text from a fragment body the use site, with the place in the fragment
    /// appended to the message.
    pub fn error(&self, (line, col, message): PosError) -> PosError {
        let Some(map) = &self.mapped else {
            return (line, col, message);
        };
        let starts = query::line_starts(&self.body);
        let off = query::byte_offset(&starts, &self.body, line, col);
        match map.origin_at(off) {
            Some(origin) => describe(self.source, self.fragments, origin, message),
            None => (line, col, message),
        }
    }

    /// The query position of `(line, col)` of the expanded body (the use site for text from a
    /// fragment body); `(0, _)`, "no position", stays as it is.
    pub fn position(&self, pos: (u64, u64)) -> (u64, u64) {
        if pos.0 == 0 {
            return pos;
        }
        let (l, c, _) = self.error((pos.0, pos.1, String::new()));
        (l, c)
    }
}

fn describe(source: &str, fragments: &Fragments, origin: Origin, message: String) -> PosError {
    match origin {
        Origin::Query(o) => {
            let (l, c) = position(source, o);
            (l, c, message)
        }
        Origin::Fragment { idx, at, use_site } => {
            let (l, c) = position(source, use_site);
            let Some(e) = fragments.entries.get(idx) else {
                return (l, c, message);
            };
            let (fl, fc) = position(&e.raw.body, at);
            let note = if message.is_empty() {
                String::new()
            } else {
                format!(
                    " (in fragment \"{}\" at {}:{fl}:{fc})",
                    e.raw.name, e.raw.file
                )
            };
            (l, c, format!("{message}{note}"))
        }
    }
}

struct Ctx<'a> {
    fragments: &'a Fragments,
    used: &'a mut BTreeSet<FragmentKey>,
    expanded: bool,
}

/// A failed expansion: where, and why (`None`: a fragment whose definition has errors,
/// already reported there).
struct Failure {
    origin: Origin,
    message: Option<String>,
}

/// `sql` (one query's text) with its fragment calls expanded as the generator expands them,
/// the fragments being those of the `shared` query files, replaced by name by those of the
/// dialect's `overrides`: for tools that read query files without the generator (a test
/// that prepares each query on a real database). The error is every diagnostic, one a line.
pub fn expand_text(
    dialect: Dialect,
    shared: &[query::SourceFile],
    overrides: &[query::SourceFile],
    sql: &str,
) -> Result<String, String> {
    let defined = |files: &[query::SourceFile]| -> Vec<RawFragment> {
        files.iter().flat_map(|f| query::split_file(f).1).collect()
    };
    let (fragments, diags) = Fragments::collect(dialect, &defined(shared), &defined(overrides));
    if !diags.is_empty() {
        return Err(crate::Diagnostics::from_items(diags).to_string());
    }
    match expand(sql, &fragments, &mut BTreeSet::new()) {
        Ok(e) => Ok(e.body),
        Err(Some((line, col, message))) => Err(format!("{line}:{col}: {message}")),
        Err(None) => Err("a fragment it uses has errors".into()),
    }
}

/// Expands every `sqlgen.name(…)` of a query body. Every fragment a call names is recorded
/// in `used` (also when the call fails). `Err(None)`: the query uses a fragment whose
/// definition has errors, already reported.
pub fn expand<'a>(
    body: &'a str,
    fragments: &'a Fragments,
    used: &mut BTreeSet<FragmentKey>,
) -> Result<Expanded<'a>, Option<PosError>> {
    let identity = |body: &'a str| Expanded {
        body: body.to_string(),
        mapped: None,
        source: body,
        fragments,
    };
    if !body.to_ascii_lowercase().contains(CALL_PREFIX) {
        return Ok(identity(body));
    }
    let mut input = Mapped::default();
    input.push(body, Origin::Query(0));
    let mut ctx = Ctx {
        fragments,
        used,
        expanded: false,
    };
    match expand_mapped(&input, &mut ctx, &mut Vec::new(), true) {
        Ok(_) if !ctx.expanded => Ok(identity(body)),
        Ok(out) => Ok(Expanded {
            body: out.text.clone(),
            mapped: Some(out),
            source: body,
            fragments,
        }),
        Err(f) => Err(f.message.map(|m| describe(body, fragments, f.origin, m))),
    }
}

fn expand_mapped(
    input: &Mapped,
    ctx: &mut Ctx<'_>,
    stack: &mut Vec<usize>,
    top: bool,
) -> Result<Mapped, Failure> {
    let text = &input.text;
    let starts = query::line_starts(text);
    let off = |l: u64, c: u64| query::byte_offset(&starts, text, l, c);
    let tokens = match query::tokenize(text, ctx.fragments.dialect) {
        Ok(t) => t,
        // The query's own analysis reports it, at the same place.
        Err(_) if top => return Ok(input.clone()),
        Err((l, c, m)) => {
            return Err(Failure {
                origin: input.origin_at(off(l, c)).unwrap_or(Origin::Query(0)),
                message: Some(m),
            });
        }
    };
    let sig = significant(&tokens);
    let start_of = |t: &TokenWithSpan| off(t.span.start.line, t.span.start.column);
    let end_of = |t: &TokenWithSpan| off(t.span.end.line, t.span.end.column);
    let mut out = Mapped::default();
    let mut cursor = 0;
    let mut i = 0;
    while i < sig.len() {
        let t = sig[i];
        if !(is_word(t, CALL_PREFIX) && sig.get(i + 1).is_some_and(|n| n.token == Token::Period)) {
            i += 1;
            continue;
        }
        let call_start = start_of(t);
        let origin = input.origin_at(call_start).unwrap_or(Origin::Query(0));
        let fail = |message: String| Failure {
            origin,
            message: Some(message),
        };
        let name = match sig.get(i + 2).map(|t| &t.token) {
            Some(Token::Word(w)) => w.value.clone(),
            _ => {
                return Err(fail(format!(
                    "\"{CALL_PREFIX}.\" is reserved for fragment calls, like \
                     {CALL_PREFIX}.name(x, …)"
                )));
            }
        };
        let found = ctx.fragments.find(&name);
        if let Some(e) = found.and_then(|idx| ctx.fragments.entries.get(idx)) {
            ctx.used.insert((e.raw.file.clone(), e.raw.line));
        }
        if sig.get(i + 3).is_none_or(|t| t.token != Token::LParen) {
            return Err(fail(format!(
                "{CALL_PREFIX}.{name} is a fragment: call it as {CALL_PREFIX}.{name}(…)"
            )));
        }
        let open = i + 3;
        let mut depth = 0usize;
        let mut commas = Vec::new();
        let mut close = None;
        for (j, t) in sig.iter().enumerate().skip(open) {
            match t.token {
                Token::LParen | Token::LBracket => depth += 1,
                Token::RParen | Token::RBracket => {
                    depth = depth.saturating_sub(1);
                    if depth == 0 {
                        close = Some(j);
                        break;
                    }
                }
                Token::Comma if depth == 1 => commas.push(j),
                _ => {}
            }
        }
        let Some(close) = close else {
            return Err(fail(format!("{CALL_PREFIX}.{name}( is never closed")));
        };
        let mut args: Vec<(usize, usize)> = Vec::new();
        if !(commas.is_empty() && close == open + 1) {
            let bounds: Vec<usize> = std::iter::once(open)
                .chain(commas.iter().copied())
                .chain(std::iter::once(close))
                .collect();
            for (k, w) in bounds.windows(2).enumerate() {
                if w[0] + 1 >= w[1] {
                    return Err(fail(format!(
                        "argument {} of {CALL_PREFIX}.{name}(…) is empty",
                        k + 1
                    )));
                }
                args.push((w[0] + 1, w[1]));
            }
        }
        let Some(idx) = found else {
            let hint = suggestion(
                &name,
                ctx.fragments.entries.iter().map(|e| e.raw.name.as_str()),
            );
            return Err(fail(format!("no fragment \"{name}\"{hint}")));
        };
        let entry = &ctx.fragments.entries[idx];
        if let Some(from) = stack.iter().position(|s| *s == idx) {
            let chain: Vec<&str> = stack[from..]
                .iter()
                .chain(std::iter::once(&idx))
                .filter_map(|s| ctx.fragments.entries.get(*s).map(|e| e.raw.name.as_str()))
                .collect();
            return Err(fail(format!(
                "fragment \"{name}\" uses itself ({}); a fragment cannot recurse",
                chain.join(" → ")
            )));
        }
        let Some(frag) = &entry.compiled else {
            return Err(Failure {
                origin,
                message: None,
            });
        };
        let params = &entry.raw.params;
        if args.len() != params.len() {
            let s = if params.len() == 1 { "" } else { "s" };
            return Err(fail(format!(
                "{CALL_PREFIX}.{name} takes {} argument{s} ({}), found {}",
                params.len(),
                params.join(", "),
                args.len()
            )));
        }
        let use_site = origin.use_site();
        let mut values: Vec<(Mapped, bool)> = Vec::new();
        for (k, &(a, b)) in args.iter().enumerate() {
            let toks = &sig[a..b];
            let anon = toks.iter().any(|t| {
                matches!(&t.token, Token::Placeholder(p) if p == "?") || t.token == Token::Question
            });
            if anon && frag.uses[k] > 1 {
                return Err(fail(format!(
                    "argument {} of {CALL_PREFIX}.{name}(…) has a \"?\" parameter and \"{}\" is used \
                     {} times in the body, which would make {} parameters; name it (@name)",
                    k + 1,
                    params[k],
                    frag.uses[k],
                    frag.uses[k]
                )));
            }
            let mut arg = Mapped::default();
            arg.push_range(input, start_of(toks[0]), end_of(toks[toks.len() - 1]));
            let arg = expand_mapped(&arg, ctx, stack, false)?;
            values.push((arg, is_operand(toks)));
        }
        let here = |at: usize| Origin::Fragment { idx, at, use_site };
        let mut expansion = Mapped::default();
        if frag.wrap {
            expansion.push("(", here(frag.core.0));
        }
        for piece in &frag.pieces {
            match *piece {
                Piece::Text(a, b) => {
                    expansion.push(entry.raw.body.get(a..b).unwrap_or_default(), here(a));
                }
                Piece::Param(k) => {
                    let Some((arg, operand)) = values.get(k) else {
                        continue;
                    };
                    let first = arg.origin_at(0).unwrap_or(origin);
                    if !operand {
                        expansion.push("(", first);
                    }
                    expansion.push_range(arg, 0, arg.text.len());
                    if !operand {
                        let last = arg
                            .origin_at(arg.text.len().saturating_sub(1))
                            .unwrap_or(first);
                        expansion.push(")", last);
                    }
                }
            }
        }
        if frag.wrap {
            expansion.push(")", here(frag.core.1.saturating_sub(1)));
        }
        let too_large = || {
            fail(format!(
                "the fragments this query uses expand to more than {} KiB of SQL",
                MAX_EXPANSION / 1024
            ))
        };
        if expansion.text.len() > MAX_EXPANSION {
            return Err(too_large());
        }
        stack.push(idx);
        let expansion = expand_mapped(&expansion, ctx, stack, false)?;
        stack.pop();
        out.push_range(input, cursor, call_start);
        out.push_range(&expansion, 0, expansion.text.len());
        if out.text.len() > MAX_EXPANSION {
            return Err(too_large());
        }
        ctx.expanded = true;
        cursor = end_of(sig[close]);
        i = close + 1;
    }
    out.push_range(input, cursor, text.len());
    Ok(out)
}
