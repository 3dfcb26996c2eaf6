//! sqlgen: turns annotated SQLite queries plus ordered migrations into type-safe rusqlite
//! functions (sqlc for Rust).
//!
//! [`generate`] is what `crates/db/build.rs` calls; [`analyze`] exposes the inferred shape of
//! every query (used by `sqlgen explain` and the cross-check tests).

pub mod catalog;
pub mod codegen;
pub mod diag;
pub mod infer;
pub mod query;

use std::path::{Component, Path, PathBuf};

pub use catalog::{Catalog, SqlType};
pub use codegen::{HEADER, RowType, header_line};
pub use diag::{Diagnostic, Diagnostics};
pub use infer::{Param, ResultColumn};
pub use query::{Kind, SourceFile};

use query::{RawQuery, Token};

/// Everything sqlgen knows about one query.
#[derive(Debug, Clone, PartialEq)]
pub struct QueryInfo {
    /// `CreateSession`.
    pub name: String,
    /// Annotation kind.
    pub kind: Kind,
    /// File as displayed.
    pub file: String,
    /// Line of the annotation.
    pub line: u64,
    /// Comment lines directly after the annotation (become doc comments).
    pub doc: Vec<String>,
    /// SQL rewritten to positional `?N` placeholders (slices as `/*SLICE:name*/?`).
    pub sql: String,
    /// Parameters in order of first appearance.
    pub params: Vec<Param>,
    /// Result columns.
    pub columns: Vec<ResultColumn>,
}

/// The catalog plus every analysed query.
#[derive(Debug, Clone, PartialEq)]
pub struct Analyzed {
    /// Schema after all migrations.
    pub catalog: Catalog,
    /// Queries in file-name then source order.
    pub queries: Vec<QueryInfo>,
    /// The inputs named in the generated header: the directories of the migration and query
    /// files, relative to the workspace (see [`public_name`]).
    pub inputs: Vec<String>,
}

impl Analyzed {
    /// Renders the generated Rust module.
    pub fn render(&self) -> String {
        codegen::render(&self.catalog, &self.queries, &self.inputs)
    }

    /// One `explain` line per query.
    pub fn explain(&self) -> Vec<String> {
        self.queries
            .iter()
            .map(|q| codegen::explain(&self.catalog, q))
            .collect()
    }

    /// The Rust row type of a query.
    pub fn row_type(&self, q: &QueryInfo) -> RowType {
        codegen::row_type(&self.catalog, q)
    }
}

/// Generates the Rust query module from `migrations_dir` and `queries_dir`.
pub fn generate(migrations_dir: &Path, queries_dir: &Path) -> Result<String, Diagnostics> {
    Ok(analyze(migrations_dir, queries_dir)?.render())
}

/// Reads and analyses the migrations and queries in the given directories.
pub fn analyze(migrations_dir: &Path, queries_dir: &Path) -> Result<Analyzed, Diagnostics> {
    let migrations = catalog::read_migrations(migrations_dir).map_err(Diagnostics::single)?;
    let (queries, unreadable) = query::read_queries(queries_dir);
    match (
        analyze_sources(&migrations, &queries),
        unreadable.is_empty(),
    ) {
        (Ok(a), true) => Ok(a),
        (Ok(_), false) => Err(Diagnostics::from_items(unreadable)),
        (Err(mut d), _) => {
            d.items.extend(unreadable);
            d.items.sort();
            Err(d)
        }
    }
}

/// Generates from in-memory files (migrations already in order).
pub fn generate_sources(
    migrations: &[SourceFile],
    queries: &[SourceFile],
) -> Result<String, Diagnostics> {
    Ok(analyze_sources(migrations, queries)?.render())
}

/// Analyses in-memory files (migrations already in order); reports every problem found.
pub fn analyze_sources(
    migrations: &[SourceFile],
    queries: &[SourceFile],
) -> Result<Analyzed, Diagnostics> {
    let (catalog, mut diags) = catalog::build(migrations);
    let mut infos = Vec::new();
    let mut names: Vec<(String, String, u64)> = Vec::new();
    for file in queries {
        let (raws, d) = query::split_queries(file);
        diags.extend(d);
        for raw in raws {
            if let Some((_, f, l)) = names
                .iter()
                .find(|(n, f, _)| *n == raw.name && *f != raw.file)
            {
                diags.push(Diagnostic {
                    file: raw.file.clone(),
                    line: raw.line,
                    col: 1,
                    query: Some(raw.name.clone()),
                    message: format!(
                        "duplicate query name \"{}\" (first defined at {f}:{l})",
                        raw.name
                    ),
                });
            }
            names.push((raw.name.clone(), raw.file.clone(), raw.line));
            match analyze_query(&catalog, &raw) {
                Ok(info) => infos.push(info),
                Err(d) => diags.extend(d),
            }
        }
    }
    let mut fns: Vec<(String, &QueryInfo)> = Vec::new();
    for q in &infos {
        let f = codegen::fn_name(&q.name);
        if let Some((_, other)) = fns.iter().find(|(n, o)| *n == f && o.name != q.name) {
            diags.push(Diagnostic {
                file: q.file.clone(),
                line: q.line,
                col: 1,
                query: Some(q.name.clone()),
                message: format!(
                    "function name \"{f}\" clashes with query \"{}\"; rename one",
                    other.name
                ),
            });
        }
        fns.push((f, q));
    }
    // Generated type names must not collide with each other or with the table models.
    let mut types: Vec<(String, String)> = catalog
        .tables
        .iter()
        .filter(|t| t.kind == catalog::TableKind::Table)
        .map(|t| {
            (
                codegen::model_name(&t.name),
                format!("the model of table \"{}\"", t.name),
            )
        })
        .collect();
    for q in &infos {
        let mut mine = Vec::new();
        if let RowType::Struct(n) = codegen::row_type(&catalog, q) {
            mine.push(n);
        }
        if q.params.len() >= 2 {
            mine.push(format!("{}Params", codegen::pascal_case(&q.name)));
        }
        for n in mine {
            if let Some((_, owner)) = types.iter().find(|(t, _)| *t == n) {
                diags.push(Diagnostic {
                    file: q.file.clone(),
                    line: q.line,
                    col: 1,
                    query: Some(q.name.clone()),
                    message: format!(
                        "generated type \"{n}\" clashes with {owner}; rename the query"
                    ),
                });
            }
            types.push((n, format!("a type of query \"{}\"", q.name)));
        }
    }
    if diags.is_empty() {
        Ok(Analyzed {
            catalog,
            queries: infos,
            inputs: input_names(migrations.iter().chain(queries)),
        })
    } else {
        diags.sort();
        diags.dedup();
        Err(Diagnostics { items: diags })
    }
}

fn analyze_query(catalog: &Catalog, raw: &RawQuery) -> Result<QueryInfo, Vec<Diagnostic>> {
    let mk = |(line, col, message): query::PosError| Diagnostic {
        file: raw.file.clone(),
        line,
        col,
        query: Some(raw.name.clone()),
        message,
    };
    let tokens = query::tokenize(&raw.body).map_err(|e| vec![mk(e)])?;
    let scan = query::scan_params(&raw.body, &tokens).map_err(|e| vec![mk(e)])?;
    query::check_complexity(&tokens).map_err(|e| vec![mk(e)])?;
    let stmts = query::parse_tokens(&tokens).map_err(|e| vec![mk(e)])?;
    let significant: Vec<&query::TokenWithSpan> = tokens
        .iter()
        .filter(|t| !matches!(t.token, Token::Whitespace(_) | Token::EOF))
        .collect();
    let first = significant.first().map_or((raw.line + 1, 1), |t| {
        (t.span.start.line, t.span.start.column)
    });
    let stmt = match stmts.as_slice() {
        [one] => one,
        [] => return Err(vec![mk((first.0, first.1, "query has no sql".into()))]),
        [_, _, ..] => {
            let p = second_statement_pos(&tokens).unwrap_or(first);
            return Err(vec![mk((
                p.0,
                p.1,
                format!("a query must be a single statement; found {}", stmts.len()),
            ))]);
        }
    };
    let analysis = infer::analyze_statement(catalog, stmt, &raw.body, &scan)
        .map_err(|e| e.into_iter().map(mk).collect::<Vec<_>>())?;
    if raw.kind.returns_rows() && analysis.columns.is_empty() {
        let msg = if analysis.is_dml {
            format!(
                "{} needs a statement that returns rows; add RETURNING or use :exec/:execrows",
                raw.kind
            )
        } else {
            format!("{} query returns no columns", raw.kind)
        };
        return Err(vec![mk((first.0, first.1, msg))]);
    }
    if !raw.kind.returns_rows() && !analysis.columns.is_empty() {
        return Err(vec![mk((
            first.0,
            first.1,
            format!("{} query returns columns; use :one or :many", raw.kind),
        ))]);
    }
    let sql = rewrite(raw, &tokens, &scan, &analysis.params);
    let doc = leading_comments(&tokens);
    Ok(QueryInfo {
        name: raw.name.clone(),
        kind: raw.kind,
        file: raw.file.clone(),
        line: raw.line,
        doc,
        sql,
        params: analysis.params,
        columns: analysis.columns,
    })
}

fn second_statement_pos(tokens: &[query::TokenWithSpan]) -> Option<(u64, u64)> {
    let mut after_semi = false;
    for t in tokens {
        match &t.token {
            Token::SemiColon => after_semi = true,
            Token::Whitespace(_) | Token::EOF => {}
            _ if after_semi => return Some((t.span.start.line, t.span.start.column)),
            _ => {}
        }
    }
    None
}

fn leading_comments(tokens: &[query::TokenWithSpan]) -> Vec<String> {
    let mut out = Vec::new();
    for t in tokens {
        match &t.token {
            Token::Whitespace(query::Whitespace::SingleLineComment { comment, .. }) => {
                out.push(comment.trim().to_string());
            }
            Token::Whitespace(_) => {}
            _ => break,
        }
    }
    out
}

/// The statement text from its first to last token, parameters replaced by `?N`.
fn rewrite(
    raw: &RawQuery,
    tokens: &[query::TokenWithSpan],
    scan: &query::ParamScan,
    params: &[Param],
) -> String {
    let body = &raw.body;
    let starts = query::line_starts(body);
    let off = |l: u64, c: u64| query::byte_offset(&starts, body, l, c);
    let sig: Vec<&query::TokenWithSpan> = tokens
        .iter()
        .filter(|t| !matches!(t.token, Token::Whitespace(_) | Token::EOF))
        .collect();
    let Some(first) = sig.first() else {
        return String::new();
    };
    let mut last_idx = sig.len() - 1;
    while last_idx > 0 && sig[last_idx].token == Token::SemiColon {
        last_idx -= 1;
    }
    let start = off(first.span.start.line, first.span.start.column);
    let end = off(sig[last_idx].span.end.line, sig[last_idx].span.end.column);
    let mut out = String::new();
    let mut cursor = start;
    for o in &scan.occurrences {
        let (a, b) = o.range;
        if a < cursor || b > end {
            continue;
        }
        out.push_str(body.get(cursor..a).unwrap_or_default());
        match params.get(o.slot) {
            Some(p) if p.slice => out.push_str(&format!("/*SLICE:{}*/?", p.name)),
            Some(p) => out.push_str(&format!("?{}", p.index)),
            None => out.push_str(body.get(a..b).unwrap_or_default()),
        }
        cursor = b;
    }
    out.push_str(body.get(cursor..end).unwrap_or_default());
    out.lines()
        .map(str::trim_end)
        .collect::<Vec<_>>()
        .join("\n")
}

/// The directories of `files` in order of appearance, each once, as [`public_name`] shows
/// them (a file with no directory stands for itself).
fn input_names<'a>(files: impl Iterator<Item = &'a SourceFile>) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for f in files {
        let shown = Path::new(&f.display);
        let name = match shown.parent().filter(|p| !p.as_os_str().is_empty()) {
            Some(dir) => public_name(&dir.to_string_lossy()),
            None => public_name(&f.display),
        };
        if !out.contains(&name) {
            out.push(name);
        }
    }
    out
}

/// A path as generated code names it: as shown when relative (relative to the workspace, see
/// [`display_path`]), else just its last component, so generated code never carries an
/// absolute path of the machine it was generated on.
pub fn public_name(shown: &str) -> String {
    let path = Path::new(shown);
    if path.is_absolute() || path.has_root() {
        path.file_name().map_or_else(
            || shown.replace('\\', "/"),
            |n| n.to_string_lossy().into_owned(),
        )
    } else {
        shown.replace('\\', "/")
    }
}

/// A path as shown in messages: relative to the repository root (nearest ancestor holding
/// `Cargo.lock` or `.git`) when there is one, so output does not depend on the machine.
pub fn display_path(path: &Path) -> String {
    let abs = if path.is_absolute() {
        path.to_path_buf()
    } else {
        std::env::current_dir()
            .map(|d| d.join(path))
            .unwrap_or_else(|_| path.to_path_buf())
    };
    let abs = normalize(&abs);
    let mut dir = abs.parent();
    while let Some(d) = dir {
        if (d.join("Cargo.lock").exists() || d.join(".git").exists())
            && let Ok(rel) = abs.strip_prefix(d)
        {
            return rel.to_string_lossy().replace('\\', "/");
        }
        dir = d.parent();
    }
    path.to_string_lossy().replace('\\', "/")
}

fn normalize(p: &Path) -> PathBuf {
    let mut out = PathBuf::new();
    for c in p.components() {
        match c {
            Component::ParentDir => {
                out.pop();
            }
            Component::CurDir => {}
            other => out.push(other.as_os_str()),
        }
    }
    out
}
