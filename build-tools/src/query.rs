//! Query files: `-- name: Name :kind` annotations (and `-- fragment:` headers, see
//! [`crate::fragment`]), tokenizing/parsing with positions, and
//! parameter discovery (`?`, `?N`, `@name`, `:name`, `$name`, `sqlc.arg/narg/slice(name)`)
//! with the rewrite to plain positional `?N` placeholders.

use std::fmt;
use std::path::Path;

use sqlparser::ast::Statement;
use sqlparser::dialect::{Dialect as SqlDialect, PostgreSqlDialect, SQLiteDialect};
use sqlparser::keywords::Keyword;
use sqlparser::parser::{Parser, ParserError};
use sqlparser::tokenizer::{Span, Tokenizer};
pub use sqlparser::tokenizer::{Token, TokenWithSpan, Whitespace};

use crate::Dialect;
use crate::diag::{Diagnostic, suggestion};
use crate::fragment::{self, RawFragment};

/// A file read from disk (or given in memory), with the path shown in messages.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SourceFile {
    /// Path as shown in diagnostics and doc comments.
    pub display: String,
    /// Full contents.
    pub text: String,
}

/// What a query returns.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Kind {
    /// Exactly one row (`QueryReturnedNoRows` otherwise).
    One,
    /// Any number of rows.
    Many,
    /// Nothing.
    Exec,
    /// Number of rows changed.
    ExecRows,
    /// Rowid of the last insert.
    ExecLastId,
}

impl Kind {
    const ALL: [(&'static str, Kind); 5] = [
        (":one", Kind::One),
        (":many", Kind::Many),
        (":exec", Kind::Exec),
        (":execrows", Kind::ExecRows),
        (":execlastid", Kind::ExecLastId),
    ];

    /// Whether the query must return result columns.
    pub fn returns_rows(self) -> bool {
        matches!(self, Kind::One | Kind::Many)
    }
}

impl fmt::Display for Kind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let s = Kind::ALL
            .iter()
            .find(|(_, k)| k == self)
            .map_or("?", |(s, _)| s);
        f.write_str(s)
    }
}

/// One annotated query as found in a file, not yet analysed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RawQuery {
    /// `CreateSession`.
    pub name: String,
    /// Annotation kind.
    pub kind: Kind,
    /// File as displayed.
    pub file: String,
    /// Line of the `-- name:` annotation.
    pub line: u64,
    /// The query text, prefixed with newlines so that positions are the file's own.
    pub body: String,
    /// `custom_plan` after the kind: on PostgreSQL the statement is planned on every call,
    /// never prepared once and cached (see [`CUSTOM_PLAN`]).
    pub custom_plan: bool,
}

/// The word after a query's kind that asks PostgreSQL to plan the statement for each
/// call's values and table sizes. A cached prepared statement gets, from its sixth run,
/// one generic plan that the server keeps until the table's statistics change; made while
/// a table was nearly empty, it can scan every row long after the table has grown (an
/// import's first sessions decide the plan for all the rest). The price is parsing and
/// planning on every call, in the same round trip. SQLite has no generic plans; a query
/// of an SQLite query file may not ask for it.
pub const CUSTOM_PLAN: &str = "custom_plan";

/// A `(line, col, message)` error before it is attached to a file and query.
pub type PosError = (u64, u64, String);

static SQLITE: SQLiteDialect = SQLiteDialect {};
static POSTGRES: PostgreSqlDialect = PostgreSqlDialect {};

fn parser_dialect(d: Dialect) -> &'static dyn SqlDialect {
    match d {
        Dialect::Sqlite => &SQLITE,
        Dialect::Postgres => &POSTGRES,
    }
}

/// Tokenizes with positions; tokenizer errors carry their position.
pub fn tokenize(text: &str, dialect: Dialect) -> Result<Vec<TokenWithSpan>, PosError> {
    Tokenizer::new(parser_dialect(dialect), text)
        .tokenize_with_location()
        .map_err(|e| {
            (
                e.location.line.max(1),
                e.location.column.max(1),
                format!("syntax error: {}", lower_first(&e.message)),
            )
        })
}

/// Most binary operators one statement may use. sqlparser builds operator chains as left-deep
/// trees and walks them recursively (`Spanned::span`), so very long chains would exhaust the
/// stack; no hand-written query comes near this.
pub const MAX_OPERATORS: usize = 150;

/// Rejects statements whose operator count could make the syntax tree too deep to walk.
pub fn check_complexity(tokens: &[TokenWithSpan]) -> Result<(), PosError> {
    use sqlparser::keywords::Keyword as K;
    let mut count = 0usize;
    for t in tokens {
        let is_op = match &t.token {
            Token::Plus
            | Token::Minus
            | Token::Mul
            | Token::Div
            | Token::Mod
            | Token::StringConcat
            | Token::Eq
            | Token::DoubleEq
            | Token::Neq
            | Token::Lt
            | Token::Gt
            | Token::LtEq
            | Token::GtEq
            | Token::Arrow
            | Token::LongArrow
            | Token::Ampersand
            | Token::Pipe
            | Token::ShiftLeft
            | Token::ShiftRight => true,
            Token::Word(w) => matches!(
                w.keyword,
                K::AND | K::OR | K::IS | K::LIKE | K::GLOB | K::MATCH | K::BETWEEN | K::IN | K::NOT
            ),
            _ => false,
        };
        if is_op {
            count += 1;
            if count > MAX_OPERATORS {
                return Err((
                    t.span.start.line.max(1),
                    t.span.start.column.max(1),
                    format!(
                        "statement too complex: more than {MAX_OPERATORS} operators; \
                         split it into smaller queries or move parts into a CTE"
                    ),
                ));
            }
        }
    }
    Ok(())
}

/// Parses already tokenized statements, mapping parser errors to positions.
///
/// sqlparser cannot parse SQLite's `x NOT GLOB y` and `x NOT MATCH y`. When a statement
/// fails to parse and contains them, it is parsed again without those `NOT`s: negation changes
/// neither the operands' types nor the (boolean) result, and only this parse sees the change
/// (generated SQL is cut from the original text), so inference is unaffected.
pub fn parse_tokens(
    tokens: &[TokenWithSpan],
    dialect: Dialect,
) -> Result<Vec<Statement>, PosError> {
    let err = match parse_once(tokens, dialect) {
        Ok(stmts) => return Ok(stmts),
        Err(e) => e,
    };
    // Only when the parser stopped at such a GLOB/MATCH; an earlier error is the real one.
    let Some(op) = (0..tokens.len()).find_map(|i| {
        negated_glob_or_match(tokens, i)
            .filter(|t| (t.span.start.line, t.span.start.column) == (err.0, err.1))
            .map(|t| t.token.to_string().to_ascii_uppercase())
    }) else {
        return Err(err);
    };
    let stripped: Vec<TokenWithSpan> = tokens
        .iter()
        .enumerate()
        .filter(|(i, _)| negated_glob_or_match(tokens, *i).is_none())
        .map(|(_, t)| t.clone())
        .collect();
    parse_once(&stripped, dialect).map_err(|e| {
        if (e.0, e.1) == (err.0, err.1) {
            let (l, c, m) = err;
            (
                l,
                c,
                format!("{m}; write NOT (x {op} y) instead of x NOT {op} y"),
            )
        } else {
            e
        }
    })
}

/// If `tokens[i]` is the `NOT` of `NOT GLOB` / `NOT MATCH`, the GLOB/MATCH token.
fn negated_glob_or_match(tokens: &[TokenWithSpan], i: usize) -> Option<&TokenWithSpan> {
    use sqlparser::keywords::Keyword as K;
    let unquoted = |t: &TokenWithSpan, k: &[K]| matches!(&t.token, Token::Word(w) if w.quote_style.is_none() && k.contains(&w.keyword));
    if !unquoted(tokens.get(i)?, &[K::NOT]) {
        return None;
    }
    tokens
        .iter()
        .skip(i + 1)
        .find(|t| !matches!(t.token, Token::Whitespace(_)))
        .filter(|t| unquoted(t, &[K::GLOB, K::MATCH]))
}

fn parse_once(tokens: &[TokenWithSpan], dialect: Dialect) -> Result<Vec<Statement>, PosError> {
    let parsed = Parser::new(parser_dialect(dialect))
        .with_tokens_with_locations(tokens.to_vec())
        .parse_statements();
    parsed.map_err(|e| {
        let raw = match e {
            ParserError::TokenizerError(m) | ParserError::ParserError(m) => m,
            ParserError::RecursionLimitExceeded => {
                let (line, col) = deepest_paren(tokens).unwrap_or((1, 1));
                return (line, col, NESTED_TOO_DEEPLY.to_string());
            }
        };
        let end = tokens
            .iter()
            .rev()
            .find(|t| !matches!(t.token, Token::Whitespace(_) | Token::EOF))
            .map_or((1, 1), |t| (t.span.end.line, t.span.end.column));
        let (msg, pos) = split_position(&raw);
        let (line, col) = pos.unwrap_or(end);
        if dialect == Dialect::Postgres
            && let Some(op) = tokens.iter().find_map(|t| match &t.token {
                Token::Word(w)
                    if (t.span.start.line, t.span.start.column) == (line, col)
                        && w.quote_style.is_none()
                        && matches!(
                            w.keyword,
                            Keyword::GLOB | Keyword::MATCH | Keyword::REGEXP
                        ) =>
                {
                    Some(w.value.to_ascii_uppercase())
                }
                _ => None,
            })
        {
            return (
                line,
                col,
                format!("{op} is SQLite's; PostgreSQL matches with ~ (a POSIX regular expression)"),
            );
        }
        (line, col, format!("syntax error: {}", lower_first(&msg)))
    })
}

/// Shown when nesting exceeds sqlparser's recursion limit (50 levels) or sqlgen's own.
pub const NESTED_TOO_DEEPLY: &str = "expression nested too deeply (the limit is about 50 levels of \
     parentheses or subqueries); flatten it or move parts into a CTE";

/// The first `(` at the greatest nesting depth: where the parser gave up (it reports no position).
fn deepest_paren(tokens: &[TokenWithSpan]) -> Option<(u64, u64)> {
    let (mut depth, mut max) = (0usize, 0usize);
    let mut at = None;
    for t in tokens {
        match t.token {
            Token::LParen => {
                depth += 1;
                if depth > max {
                    max = depth;
                    at = Some((t.span.start.line.max(1), t.span.start.column.max(1)));
                }
            }
            Token::RParen => depth = depth.saturating_sub(1),
            _ => {}
        }
    }
    at
}

/// Splits `"… at Line: 3, Column: 5"` into the message and the position.
fn split_position(raw: &str) -> (String, Option<(u64, u64)>) {
    if let Some(idx) = raw.rfind(" at Line: ") {
        let tail = &raw[idx + " at Line: ".len()..];
        if let Some((l, c)) = tail.split_once(", Column: ")
            && let (Ok(l), Ok(c)) = (l.trim().parse::<u64>(), c.trim().parse::<u64>())
            && l > 0
        {
            return (raw[..idx].to_string(), Some((l, c)));
        }
    }
    (raw.to_string(), None)
}

/// Lowercases the first character (parser messages start with a capital).
pub fn lower_first(s: &str) -> String {
    let mut c = s.chars();
    match c.next() {
        Some(f) => f.to_lowercase().chain(c).collect(),
        None => String::new(),
    }
}

/// Reads `*.sql` from `dir`, sorted by file name. A file that cannot be read or is not UTF-8
/// is reported (with the position of its first bad byte) and the others are still read.
pub fn read_queries(dir: &Path) -> (Vec<SourceFile>, Vec<Diagnostic>) {
    let entries = match std::fs::read_dir(dir) {
        Ok(e) => e,
        Err(e) => {
            let d = Diagnostic {
                file: crate::display_path(dir),
                line: 1,
                col: 1,
                query: None,
                message: format!("cannot read queries directory: {e}"),
            };
            return (Vec::new(), vec![d]);
        }
    };
    let mut paths: Vec<_> = entries
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.is_file() && p.extension().is_some_and(|e| e == "sql"))
        .collect();
    paths.sort();
    let mut out = Vec::new();
    let mut diags = Vec::new();
    for path in paths {
        match read_source(&path, "query file") {
            Ok(f) => out.push(f),
            Err(d) => diags.push(d),
        }
    }
    (out, diags)
}

/// Reads one `.sql` file as UTF-8; the error names the file and, for bytes that are not
/// UTF-8, the line and column of the first bad one.
pub fn read_source(path: &Path, what: &str) -> Result<SourceFile, Diagnostic> {
    let display = crate::display_path(path);
    let bytes = std::fs::read(path).map_err(|e| Diagnostic {
        file: display.clone(),
        line: 1,
        col: 1,
        query: None,
        message: format!("cannot read {what}: {e}"),
    })?;
    match String::from_utf8(bytes) {
        Ok(text) => Ok(SourceFile { display, text }),
        Err(e) => {
            let good = &e.as_bytes()[..e.utf8_error().valid_up_to()];
            // Everything before the bad byte is valid UTF-8, so lines and columns (in
            // characters, like every other position) can be counted on it.
            let good = std::str::from_utf8(good).unwrap_or_default();
            let line = good.matches('\n').count() as u64 + 1;
            let col = good.rsplit('\n').next().unwrap_or("").chars().count() as u64 + 1;
            let byte = e.as_bytes().get(good.len()).copied().unwrap_or(0);
            Err(Diagnostic {
                file: display,
                line,
                col,
                query: None,
                message: format!(
                    "{what} is not valid UTF-8: byte 0x{byte:02x} cannot start a character here"
                ),
            })
        }
    }
}

/// Splits a query file at its `-- name: Name :kind` annotations.
pub fn split_queries(file: &SourceFile) -> (Vec<RawQuery>, Vec<Diagnostic>) {
    let (queries, _, diags) = split_file(file);
    (queries, diags)
}

/// Splits a query file at its `-- name: Name :kind` annotations and `-- fragment: name(…)`
/// headers (see [`crate::fragment`]): its queries and its fragments.
pub fn split_file(file: &SourceFile) -> (Vec<RawQuery>, Vec<RawFragment>, Vec<Diagnostic>) {
    let mut queries: Vec<RawQuery> = Vec::new();
    let mut fragments: Vec<RawFragment> = Vec::new();
    let mut diags = Vec::new();
    let mut current: Option<(RawQuery, Vec<&str>)> = None;
    let mut fragment: Option<(RawFragment, Vec<&str>)> = None;
    let diag = |line: u64, col: u64, query: Option<&str>, message: String| Diagnostic {
        file: file.display.clone(),
        line,
        col,
        query: query.map(str::to_string),
        message,
    };
    let finish = |cur: Option<(RawQuery, Vec<&str>)>,
                  queries: &mut Vec<RawQuery>,
                  diags: &mut Vec<Diagnostic>| {
        if let Some((mut q, lines)) = cur {
            let mut body = "\n".repeat(q.line as usize);
            body.push_str(&lines.join("\n"));
            if body.trim().trim_end_matches(';').trim().is_empty() {
                diags.push(diag(q.line, 1, Some(&q.name), "query has no sql".into()));
            } else {
                q.body = body;
                queries.push(q);
            }
        }
    };
    let finish_fragment = |cur: Option<(RawFragment, Vec<&str>)>,
                           fragments: &mut Vec<RawFragment>,
                           diags: &mut Vec<Diagnostic>| {
        if let Some((mut f, lines)) = cur {
            let mut body = "\n".repeat(f.line as usize);
            body.push_str(&lines.join("\n"));
            if body.trim().is_empty() {
                diags.push(diag(
                    f.line,
                    f.col,
                    Some(&f.name),
                    "fragment has no sql".into(),
                ));
            } else {
                f.body = body;
                fragments.push(f);
            }
        }
    };
    let mut skipping = false;
    for (idx, line) in file.text.lines().enumerate() {
        let lineno = idx as u64 + 1;
        let trimmed = line.trim_start();
        let indent = (line.len() - trimmed.len()) as u64;
        if let Some(rest) = fragment::header(trimmed) {
            finish(current.take(), &mut queries, &mut diags);
            finish_fragment(fragment.take(), &mut fragments, &mut diags);
            skipping = false;
            let before = line.len() - rest.len();
            let col0 = line.get(..before).unwrap_or_default().chars().count() as u64 + 1;
            match fragment::parse_header(rest, col0) {
                Ok((name, col, params)) => {
                    fragment = Some((
                        RawFragment {
                            name,
                            params,
                            file: file.display.clone(),
                            line: lineno,
                            col,
                            body: String::new(),
                        },
                        Vec::new(),
                    ));
                }
                Err((col, message)) => {
                    diags.push(diag(lineno, col, None, message));
                    skipping = true;
                }
            }
        } else if let Some(rest) = annotation(trimmed) {
            finish(current.take(), &mut queries, &mut diags);
            finish_fragment(fragment.take(), &mut fragments, &mut diags);
            skipping = false;
            let name_off = indent + (trimmed.len() - rest.len()) as u64;
            let mut parts = rest.split_whitespace();
            let name = parts.next().unwrap_or("");
            let kind = parts.next();
            let col_of = |s: &str| name_off + (rest.find(s).unwrap_or(0) as u64) + 1;
            if name.is_empty() || name.starts_with(':') {
                diags.push(diag(
                    lineno,
                    name_off + 1,
                    None,
                    "missing query name after \"-- name:\"".into(),
                ));
                skipping = true;
                continue;
            }
            if !name.chars().next().is_some_and(|c| c.is_ascii_alphabetic())
                || !name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
            {
                diags.push(diag(
                    lineno,
                    col_of(name),
                    Some(name),
                    format!("invalid query name \"{name}\"; use PascalCase letters and digits"),
                ));
                skipping = true;
                continue;
            }
            let kind = match kind {
                None => {
                    diags.push(diag(
                        lineno,
                        name_off + rest.trim_end().len() as u64 + 1,
                        Some(name),
                        "missing :kind after the query name (one of :one, :many, :exec, :execrows, :execlastid)".into(),
                    ));
                    skipping = true;
                    continue;
                }
                Some(k) => match Kind::ALL.iter().find(|(s, _)| *s == k) {
                    Some((_, kind)) => *kind,
                    None => {
                        let hint = suggestion(k, Kind::ALL.iter().map(|(s, _)| *s));
                        let hint = if hint.is_empty() {
                            " (one of :one, :many, :exec, :execrows, :execlastid)".to_string()
                        } else {
                            hint
                        };
                        diags.push(diag(
                            lineno,
                            col_of(k),
                            Some(name),
                            format!("unknown kind \"{k}\"{hint}"),
                        ));
                        skipping = true;
                        continue;
                    }
                },
            };
            let mut custom_plan = false;
            let mut extra = parts.next();
            if extra == Some(CUSTOM_PLAN) {
                custom_plan = true;
                extra = parts.next();
            }
            if let Some(extra) = extra {
                let hint = if custom_plan {
                    String::new()
                } else {
                    suggestion(extra, [CUSTOM_PLAN])
                };
                diags.push(diag(
                    lineno,
                    col_of(extra),
                    Some(name),
                    format!("unexpected \"{extra}\" after the query kind{hint}"),
                ));
            }
            if let Some(prev) = queries.iter().find(|q| q.name == name) {
                diags.push(diag(
                    lineno,
                    col_of(name),
                    Some(name),
                    format!(
                        "duplicate query name \"{name}\" (first defined at {}:{})",
                        prev.file, prev.line
                    ),
                ));
            }
            current = Some((
                RawQuery {
                    name: name.to_string(),
                    kind,
                    file: file.display.clone(),
                    line: lineno,
                    body: String::new(),
                    custom_plan,
                },
                Vec::new(),
            ));
        } else if let Some((_, lines)) = current.as_mut() {
            lines.push(line);
        } else if let Some((_, lines)) = fragment.as_mut() {
            lines.push(line);
        } else if !skipping && !trimmed.is_empty() && !trimmed.starts_with("--") {
            diags.push(diag(
                lineno,
                indent + 1,
                None,
                "sql before the first \"-- name: Name :kind\" annotation".into(),
            ));
            skipping = true;
        }
    }
    finish(current.take(), &mut queries, &mut diags);
    finish_fragment(fragment.take(), &mut fragments, &mut diags);
    (queries, fragments, diags)
}

/// If `line` is a `-- name:` annotation, returns what follows `name:`.
fn annotation(line: &str) -> Option<&str> {
    let rest = line.strip_prefix("--")?.trim_start();
    rest.strip_prefix("name:")
}

/// How a parameter was written.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ParamKey {
    /// `@x`, `:x`, `$x`, `sqlc.arg(x)`, …
    Named(String),
    /// `?N`.
    Numbered(u64),
    /// The n-th bare `?`.
    Anon(usize),
}

/// A distinct parameter of a query (several occurrences may share it).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ParamSlot {
    /// Identity.
    pub key: ParamKey,
    /// `sqlc.narg`: always nullable.
    pub narg: bool,
    /// `sqlc.slice`: expanded at run time.
    pub slice: bool,
    /// Position of the first occurrence.
    pub first: (u64, u64),
    /// How it was first written, for messages.
    pub spelling: String,
}

/// One place a parameter appears in the text.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Occurrence {
    /// Start position (matches the AST node's span start).
    pub pos: (u64, u64),
    /// Byte range in the body to replace.
    pub range: (usize, usize),
    /// Index into `ParamScan::slots`.
    pub slot: usize,
}

/// Parameters found by scanning the tokens.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ParamScan {
    /// Distinct parameters in order of first appearance.
    pub slots: Vec<ParamSlot>,
    /// Every occurrence in text order.
    pub occurrences: Vec<Occurrence>,
}

/// Byte offset of a (line, col) position in `text` (col counted in chars).
pub fn byte_offset(line_starts: &[usize], text: &str, line: u64, col: u64) -> usize {
    let Some(&start) = line_starts.get(line.saturating_sub(1) as usize) else {
        return text.len();
    };
    let rest = &text[start..];
    rest.char_indices()
        .nth(col.saturating_sub(1) as usize)
        .map_or(text.len(), |(i, _)| start + i)
}

/// Byte offsets where each line starts.
pub fn line_starts(text: &str) -> Vec<usize> {
    std::iter::once(0)
        .chain(text.match_indices('\n').map(|(i, _)| i + 1))
        .collect()
}

/// Finds every parameter occurrence in a query's tokens.
///
/// PostgreSQL: `@name`, `$N` and `sqlc.*(name)` are parameters; `?` is a jsonb operator
/// there, so a `?` where a value is expected is rejected, and `:name` is not a parameter
/// (`a[1:n]` is an array slice).
pub fn scan_params(
    body: &str,
    tokens: &[TokenWithSpan],
    dialect: Dialect,
) -> Result<ParamScan, PosError> {
    let pg = dialect == Dialect::Postgres;
    let starts = line_starts(body);
    let off = |l: u64, c: u64| byte_offset(&starts, body, l, c);
    let sig: Vec<&TokenWithSpan> = tokens
        .iter()
        .filter(|t| !matches!(t.token, Token::Whitespace(_)))
        .collect();
    let mut scan = ParamScan::default();
    let mut anon = 0usize;
    let mut first_anon: Option<(u64, u64)> = None;
    let mut first_numbered: Option<(u64, u64)> = None;
    let mut i = 0;
    while i < sig.len() {
        let t = sig[i];
        let pos = (t.span.start.line, t.span.start.column);
        let mut found: Option<(ParamKey, String, bool, bool, usize)> = None; // key, spelling, narg, slice, last token idx
        match &t.token {
            Token::Question if pg && expects_value(i.checked_sub(1).and_then(|k| sig.get(k))) => {
                return Err((
                    pos.0,
                    pos.1,
                    "PostgreSQL has no \"?\" parameters (\"?\" is a jsonb operator there); \
                     name the parameter: @name"
                        .into(),
                ));
            }
            Token::Placeholder(p)
                if pg
                    && p.len() > 1
                    && p.starts_with('$')
                    && p[1..].bytes().all(|b| b.is_ascii_digit()) =>
            {
                let n: u64 = p[1..]
                    .parse()
                    .map_err(|_| (pos.0, pos.1, format!("invalid parameter \"{p}\"")))?;
                if n == 0 {
                    return Err((pos.0, pos.1, "parameter numbers start at $1".into()));
                }
                first_numbered.get_or_insert(pos);
                found = Some((ParamKey::Numbered(n), p.clone(), false, false, i));
            }
            Token::Placeholder(p) if p == "?" => {
                anon += 1;
                first_anon.get_or_insert(pos);
                found = Some((ParamKey::Anon(anon), "?".into(), false, false, i));
            }
            Token::Placeholder(p) if p.starts_with('?') => {
                let n: u64 = p
                    .get(1..)
                    .unwrap_or_default()
                    .parse()
                    .map_err(|_| (pos.0, pos.1, format!("invalid parameter \"{p}\"")))?;
                if n == 0 {
                    return Err((pos.0, pos.1, "parameter numbers start at ?1".into()));
                }
                first_numbered.get_or_insert(pos);
                found = Some((ParamKey::Numbered(n), p.clone(), false, false, i));
            }
            Token::Placeholder(p) if p.len() > 1 => {
                found = Some((
                    ParamKey::Named(p.get(1..).unwrap_or_default().to_string()),
                    p.clone(),
                    false,
                    false,
                    i,
                ));
            }
            Token::AtSign | Token::Colon if !(pg && t.token == Token::Colon) => {
                if let Some(next) = sig.get(i + 1)
                    && let Token::Word(w) = &next.token
                    && w.quote_style.is_none()
                    && next.span.start == t.span.end
                {
                    let sigil = if t.token == Token::AtSign { "@" } else { ":" };
                    found = Some((
                        ParamKey::Named(w.value.clone()),
                        format!("{sigil}{}", w.value),
                        false,
                        false,
                        i + 1,
                    ));
                }
            }
            Token::Word(w) if w.quote_style.is_none() && w.value.eq_ignore_ascii_case("sqlc") => {
                let word = |k: usize| match sig.get(k).map(|t| &t.token) {
                    Some(Token::Word(w)) => Some(w.value.clone()),
                    _ => None,
                };
                if matches!(sig.get(i + 1).map(|t| &t.token), Some(Token::Period)) {
                    let func = word(i + 2).unwrap_or_default().to_ascii_lowercase();
                    let (narg, slice) = match func.as_str() {
                        "arg" => (false, false),
                        "narg" => (true, false),
                        "slice" => (false, true),
                        other => {
                            return Err((
                                pos.0,
                                pos.1,
                                format!(
                                    "unknown sqlc.{other}(…); use sqlc.arg, sqlc.narg or sqlc.slice"
                                ),
                            ));
                        }
                    };
                    let ok = matches!(sig.get(i + 3).map(|t| &t.token), Some(Token::LParen))
                        && matches!(sig.get(i + 5).map(|t| &t.token), Some(Token::RParen));
                    let name = match (ok, sig.get(i + 4).map(|t| &t.token)) {
                        (true, Some(Token::Word(w))) => w.value.clone(),
                        (true, Some(Token::SingleQuotedString(s))) => s.clone(),
                        _ => {
                            return Err((
                                pos.0,
                                pos.1,
                                format!(
                                    "sqlc.{func} takes exactly one parameter name, like sqlc.{func}(name)"
                                ),
                            ));
                        }
                    };
                    found = Some((
                        ParamKey::Named(name),
                        format!("sqlc.{func}"),
                        narg,
                        slice,
                        i + 5,
                    ));
                }
            }
            _ => {}
        }
        if let Some((key, spelling, narg, slice, last)) = found {
            let end = &sig[last].span.end;
            let range = (off(pos.0, pos.1), off(end.line, end.column));
            let slot = match scan.slots.iter().position(|s| s.key == key) {
                Some(idx) => {
                    let s = &mut scan.slots[idx];
                    if s.slice != slice {
                        return Err((
                            pos.0,
                            pos.1,
                            format!(
                                "parameter \"{}\" is used both as sqlc.slice and as a single value",
                                key_name(&key)
                            ),
                        ));
                    }
                    s.narg |= narg;
                    idx
                }
                None => {
                    scan.slots.push(ParamSlot {
                        key,
                        narg,
                        slice,
                        first: pos,
                        spelling,
                    });
                    scan.slots.len() - 1
                }
            };
            scan.occurrences.push(Occurrence { pos, range, slot });
            i = last + 1;
        } else {
            i += 1;
        }
    }
    if let (Some(a), Some(n)) = (first_anon, first_numbered) {
        let later = a.max(n);
        return Err((
            later.0,
            later.1,
            "cannot mix \"?\" and \"?N\" parameters in one query".into(),
        ));
    }
    if let Some(max) = scan
        .slots
        .iter()
        .filter_map(|s| match s.key {
            ParamKey::Numbered(n) => Some(n),
            _ => None,
        })
        .max()
    {
        for n in 1..=max {
            if !scan.slots.iter().any(|s| s.key == ParamKey::Numbered(n)) {
                let p = first_numbered.unwrap_or((1, 1));
                return Err((
                    p.0,
                    p.1,
                    if pg {
                        format!(
                            "parameter ${n} is never used (numbered parameters must be $1..${max})"
                        )
                    } else {
                        format!(
                            "parameter ?{n} is never used (numbered parameters must be ?1..?{max})"
                        )
                    },
                ));
            }
        }
    }
    Ok(scan)
}

/// Whether a token after `prev` stands where an operand is expected (so a `?` there is meant
/// as a parameter, not as PostgreSQL's jsonb operator).
fn expects_value(prev: Option<&&TokenWithSpan>) -> bool {
    let Some(prev) = prev else { return true };
    match &prev.token {
        Token::Word(w) => {
            w.quote_style.is_none()
                && matches!(
                    w.keyword,
                    Keyword::SELECT
                        | Keyword::WHERE
                        | Keyword::AND
                        | Keyword::OR
                        | Keyword::NOT
                        | Keyword::ON
                        | Keyword::SET
                        | Keyword::VALUES
                        | Keyword::THEN
                        | Keyword::WHEN
                        | Keyword::ELSE
                        | Keyword::BY
                        | Keyword::LIMIT
                        | Keyword::OFFSET
                        | Keyword::IN
                        | Keyword::IS
                        | Keyword::LIKE
                        | Keyword::BETWEEN
                        | Keyword::RETURNING
                        | Keyword::HAVING
                        | Keyword::CASE
                )
        }
        Token::RParen
        | Token::RBracket
        | Token::Number(..)
        | Token::SingleQuotedString(_)
        | Token::Placeholder(_) => false,
        _ => true,
    }
}

/// PostgreSQL reads `@name` as the `@` (absolute value) operator applied to a column, so each
/// `@name` parameter becomes one placeholder token (with the span of both) before parsing.
pub fn pg_placeholders(tokens: &[TokenWithSpan], scan: &ParamScan) -> Vec<TokenWithSpan> {
    let at: Vec<(u64, u64)> = scan
        .occurrences
        .iter()
        .filter(|o| {
            scan.slots
                .get(o.slot)
                .is_some_and(|s| s.spelling.starts_with('@'))
        })
        .map(|o| o.pos)
        .collect();
    let mut out = Vec::with_capacity(tokens.len());
    let mut i = 0;
    while i < tokens.len() {
        let t = &tokens[i];
        let pos = (t.span.start.line, t.span.start.column);
        if t.token == Token::AtSign
            && at.contains(&pos)
            && let Some(word) = tokens.get(i + 1)
        {
            out.push(TokenWithSpan::new(
                Token::Placeholder(format!("${}", i + 1)),
                Span::new(t.span.start, word.span.end),
            ));
            i += 2;
            continue;
        }
        out.push(t.clone());
        i += 1;
    }
    out
}

/// A parameter key's name for messages.
pub fn key_name(key: &ParamKey) -> String {
    match key {
        ParamKey::Named(n) => n.clone(),
        ParamKey::Numbered(n) => format!("?{n}"),
        ParamKey::Anon(n) => format!("?{n}"),
    }
}
