//! sqlgen: turns annotated queries plus ordered migrations into type-safe Rust (sqlc for
//! Rust), for SQLite and PostgreSQL.
//!
//! One project has migrations per dialect (`sql/migrations/{sqlite,postgres}/`), one shared
//! query directory (`sql/queries/`) and per-dialect overrides (`sql/queries/{sqlite,postgres}/`,
//! a query there replaces the shared one of the same name; so does a fragment, a named
//! expression queries call as `sqlgen.name(…)`, see [`fragment`]). [`analyze_project`]
//! analyses both dialects and checks their parity (same tables, same query shapes);
//! [`Project::render`]
//! emits the SQLite module (free functions, the query traits and their SQLite
//! implementation) and the PostgreSQL one. [`analyze`] / [`generate`] handle one SQLite
//! directory pair, as before.

pub mod catalog;
pub mod codegen;
pub mod diag;
pub mod fragment;
pub mod infer;
pub mod parity;
pub mod query;

use std::path::{Component, Path, PathBuf};

pub use catalog::{Catalog, SqlType};
pub use codegen::{HEADER, RowType, header_line};
pub use diag::{Diagnostic, Diagnostics};
pub use infer::{Param, ResultColumn};
pub use query::{Kind, SourceFile};

use std::collections::BTreeSet;

use fragment::{FragmentKey, Fragments};
use query::{RawQuery, Token};

/// The SQL dialect a set of migrations and queries is written in.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Dialect {
    /// SQLite (rusqlite): the embedded default.
    #[default]
    Sqlite,
    /// PostgreSQL (the sync `postgres` crate).
    Postgres,
}

impl Dialect {
    /// Both dialects, SQLite first.
    pub const ALL: [Dialect; 2] = [Dialect::Sqlite, Dialect::Postgres];

    /// `sqlite` / `postgres`: the name of its migration and override directories.
    pub fn name(self) -> &'static str {
        match self {
            Dialect::Sqlite => "sqlite",
            Dialect::Postgres => "postgres",
        }
    }
}

impl std::fmt::Display for Dialect {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

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
    /// The dialect it was analysed in.
    pub dialect: Dialect,
    /// SELECT only (no INSERT/UPDATE/DELETE anywhere): a method of `ReadQueries`.
    pub read_only: bool,
    /// Always exactly one row (`:one` then returns the row, not an `Option`).
    pub one_row: bool,
    /// `custom_plan` in the annotation: on PostgreSQL, planned on every call, never
    /// prepared and cached ([`query::CUSTOM_PLAN`]).
    pub custom_plan: bool,
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

/// Both dialects of a project, analysed and parity-checked.
#[derive(Debug, Clone, PartialEq)]
pub struct Project {
    /// The SQLite analysis: the shapes every generated type and trait is rendered from.
    pub sqlite: Analyzed,
    /// The PostgreSQL analysis, when the project has PostgreSQL migrations.
    pub postgres: Option<Analyzed>,
}

/// One generated file: its name (`queries.rs`, `queries_postgres.rs`) and text.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Output {
    /// File name, beside the main output.
    pub name: String,
    /// Generated Rust.
    pub code: String,
}

impl Project {
    /// The generated files: `queries.rs` (models, row and params types, the SQLite free
    /// functions, the `ReadQueries`/`Queries` traits and `SqliteQueries`), and
    /// `queries_postgres.rs` (`PgQueries`, to be included as a `postgres` module) when the
    /// project has PostgreSQL.
    pub fn render(&self) -> Vec<Output> {
        let mut out = vec![Output {
            name: "queries.rs".into(),
            code: self.sqlite.render(),
        }];
        if let Some(pg) = &self.postgres {
            out.push(Output {
                name: "queries_postgres.rs".into(),
                code: codegen::render_postgres(&self.sqlite, pg),
            });
        }
        out
    }

    /// Notes on statements read but not modelled, both dialects.
    pub fn notes(&self) -> Vec<Diagnostic> {
        let mut n = self.sqlite.catalog.notes.clone();
        if let Some(pg) = &self.postgres {
            n.extend(pg.catalog.notes.iter().cloned());
        }
        n
    }

    /// `sqlgen explain`: a section per dialect, one line per query.
    pub fn explain(&self) -> Vec<String> {
        if self.postgres.is_none() {
            return self.sqlite.explain();
        }
        let mut out = Vec::new();
        for a in std::iter::once(&self.sqlite).chain(&self.postgres) {
            out.push(format!(
                "== {} ({})",
                a.catalog.dialect,
                a.inputs.join(", ")
            ));
            out.extend(a.explain());
        }
        out
    }
}

/// Reads and analyses a project. With `sqlite/` and `postgres/` below `migrations_root`
/// both dialects are analysed (shared queries in `queries_root`, overrides in its `sqlite/`
/// and `postgres/`), and their parity is checked; otherwise `migrations_root` holds SQLite
/// migrations and `queries_root` the queries, as [`analyze`] reads them.
pub fn analyze_project(
    migrations_root: &Path,
    queries_root: &Path,
) -> Result<Project, Diagnostics> {
    let dual = Dialect::ALL
        .iter()
        .any(|d| migrations_root.join(d.name()).is_dir());
    if !dual {
        return Ok(Project {
            sqlite: analyze(migrations_root, queries_root)?,
            postgres: None,
        });
    }
    let (shared, mut unreadable) = query::read_queries(queries_root);
    let mut results = Vec::new();
    let mut usages = Vec::new();
    for d in Dialect::ALL {
        let migrations = match catalog::read_migrations(&migrations_root.join(d.name())) {
            Ok(m) => m,
            Err(e) => {
                results.push((d, Err(Diagnostics::single(e))));
                continue;
            }
        };
        let dir = queries_root.join(d.name());
        let (overrides, bad) = if dir.is_dir() {
            query::read_queries(&dir)
        } else {
            (Vec::new(), Vec::new())
        };
        unreadable.extend(bad);
        let (result, usage) = analyze_dialect(d, &migrations, &shared, &overrides);
        usages.push(usage);
        results.push((d, result));
    }
    let mut errors: Vec<(Dialect, Vec<Diagnostic>)> = Vec::new();
    let mut done = Vec::new();
    for (d, r) in results {
        match r {
            Ok(a) => done.push(a),
            Err(e) => errors.push((d, e.items)),
        }
    }
    let mut items = tag_one_sided(errors);
    items.extend(unreadable);
    // A fragment is used when a query of either dialect uses it; known only when both
    // dialects got as far as their queries.
    if usages.len() == Dialect::ALL.len() {
        items.extend(FragmentUsage::merge(usages).unused());
    }
    if !items.is_empty() {
        return Err(Diagnostics::from_items(items));
    }
    let postgres = done.pop();
    let sqlite = done.pop();
    let (Some(sqlite), Some(postgres)) = (sqlite, postgres) else {
        return Err(Diagnostics::default());
    };
    let mismatches = parity::check(&sqlite, &postgres);
    if !mismatches.is_empty() {
        return Err(Diagnostics::from_items(mismatches));
    }
    Ok(Project {
        sqlite,
        postgres: Some(postgres),
    })
}

/// Diagnostics of both dialects, each once: one both report (a typo in a shared query) is
/// shown as is; one only a single dialect reports on a shared file is prefixed with that
/// dialect, so the reader knows where it applies.
fn tag_one_sided(errors: Vec<(Dialect, Vec<Diagnostic>)>) -> Vec<Diagnostic> {
    let all: Vec<&Diagnostic> = errors.iter().flat_map(|(_, e)| e).collect();
    let mut out = Vec::new();
    for (d, items) in &errors {
        for item in items {
            let both = errors.len() > 1
                && errors
                    .iter()
                    .filter(|(o, _)| o != d)
                    .all(|(_, e)| e.contains(item));
            if both {
                if !out.contains(item) {
                    out.push(item.clone());
                }
                continue;
            }
            let own = Path::new(&item.file)
                .components()
                .any(|c| c.as_os_str() == d.name());
            let mut item = item.clone();
            if !own {
                item.message = format!("({d}) {}", item.message);
            }
            out.push(item);
        }
    }
    let _ = all;
    out
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

/// Analyses in-memory SQLite files (migrations already in order); reports every problem found.
pub fn analyze_sources(
    migrations: &[SourceFile],
    queries: &[SourceFile],
) -> Result<Analyzed, Diagnostics> {
    let analyzed = analyze_layers(Dialect::Sqlite, migrations, queries, &[])?;
    // One dialect, SQLite: no PostgreSQL statement would be planned by this word.
    let items: Vec<Diagnostic> = analyzed
        .queries
        .iter()
        .filter(|q| q.custom_plan)
        .map(|q| sqlite_custom_plan(&q.file, q.line, &q.name))
        .collect();
    if items.is_empty() {
        Ok(analyzed)
    } else {
        Err(Diagnostics::from_items(items))
    }
}

/// `custom_plan` on query `name` (at `file:line`), which only SQLite runs.
fn sqlite_custom_plan(file: &str, line: u64, name: &str) -> Diagnostic {
    Diagnostic {
        file: file.to_string(),
        line,
        col: 1,
        query: Some(name.to_string()),
        message: "custom_plan is for PostgreSQL's plan cache; SQLite keeps no generic plans, \
                  so a query only SQLite runs cannot ask for it"
            .into(),
    }
}

/// Which fragment definitions exist and which of them queries use.
#[derive(Debug, Default)]
struct FragmentUsage {
    /// The definitions in effect in the dialect.
    defined: Vec<(FragmentKey, fragment::RawFragment)>,
    /// Shared definitions the dialect replaces: only another dialect can use them.
    replaced: Vec<(FragmentKey, fragment::RawFragment)>,
    used: BTreeSet<FragmentKey>,
}

impl FragmentUsage {
    fn merge(all: Vec<FragmentUsage>) -> FragmentUsage {
        let mut out = FragmentUsage::default();
        for u in all {
            for (key, raw) in u.defined.into_iter().chain(u.replaced) {
                if !out.defined.iter().any(|(k, _)| *k == key) {
                    out.defined.push((key, raw));
                }
            }
            out.used.extend(u.used);
        }
        out
    }

    /// A fragment no query uses (in a dialect directory: no query of that dialect; shared:
    /// none of either, also when both dialects replace it) is dead code, or a misspelt
    /// replacement whose dialect still uses the shared one.
    fn unused(&self) -> Vec<Diagnostic> {
        self.defined
            .iter()
            .filter(|(key, _)| !self.used.contains(key))
            .map(|(_, f)| Diagnostic {
                file: f.file.clone(),
                line: f.line,
                col: f.col,
                query: Some(f.name.clone()),
                message: format!("fragment \"{}\" is never used; remove it", f.name),
            })
            .collect()
    }
}

/// Analyses in-memory files of one dialect: `shared` queries, where a query of the same name
/// in `overrides` replaces the shared one (and so for fragments).
pub fn analyze_layers(
    dialect: Dialect,
    migrations: &[SourceFile],
    shared: &[SourceFile],
    overrides: &[SourceFile],
) -> Result<Analyzed, Diagnostics> {
    let (result, usage) = analyze_dialect(dialect, migrations, shared, overrides);
    let unused = usage.unused();
    match result {
        Ok(_) if !unused.is_empty() => Err(Diagnostics::from_items(unused)),
        Ok(a) => Ok(a),
        Err(mut d) => {
            d.items.extend(unused);
            Err(Diagnostics::from_items(d.items))
        }
    }
}

/// [`analyze_layers`] without the check for unused fragments, which needs every dialect's
/// usage: the analysis and which fragments its queries used.
fn analyze_dialect(
    dialect: Dialect,
    migrations: &[SourceFile],
    shared: &[SourceFile],
    overrides: &[SourceFile],
) -> (Result<Analyzed, Diagnostics>, FragmentUsage) {
    let (catalog, mut diags) = catalog::build(migrations, dialect);
    let mut infos = Vec::new();
    let mut names: Vec<(String, String, u64)> = Vec::new();
    let mut all_raws = Vec::new();
    let mut override_raws = Vec::new();
    let (mut shared_frags, mut override_frags) = (Vec::new(), Vec::new());
    for file in overrides {
        let (raws, frags, d) = query::split_file(file);
        diags.extend(d);
        if dialect == Dialect::Sqlite {
            diags.extend(
                raws.iter()
                    .filter(|r| r.custom_plan)
                    .map(|r| sqlite_custom_plan(&r.file, r.line, &r.name)),
            );
        }
        override_raws.extend(raws);
        override_frags.extend(frags);
    }
    for file in shared {
        let (raws, frags, d) = query::split_file(file);
        diags.extend(d);
        shared_frags.extend(frags);
        all_raws.extend(
            raws.into_iter()
                .filter(|r| !override_raws.iter().any(|o| o.name == r.name)),
        );
    }
    all_raws.extend(override_raws);
    let (fragments, d) = Fragments::collect(dialect, &shared_frags, &override_frags);
    diags.extend(d);
    let mut usage = FragmentUsage {
        defined: fragments
            .definitions()
            .map(|(k, f)| (k, f.clone()))
            .collect(),
        replaced: Vec::new(),
        // A definition with errors is reported as such, not also as unused.
        used: fragments.broken().collect(),
    };
    for (i, f) in shared_frags.iter().enumerate() {
        let key = (f.file.clone(), f.line);
        let duplicate = shared_frags[..i].iter().any(|e| e.name == f.name);
        if !duplicate && !usage.defined.iter().any(|(k, _)| *k == key) {
            usage.replaced.push((key, f.clone()));
        }
    }
    {
        for raw in all_raws {
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
            match analyze_query(&catalog, &raw, dialect, &fragments, &mut usage.used) {
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
    let result = if diags.is_empty() {
        Ok(Analyzed {
            catalog,
            queries: infos,
            inputs: input_names(migrations.iter().chain(shared).chain(overrides)),
        })
    } else {
        diags.sort();
        diags.dedup();
        Err(Diagnostics { items: diags })
    };
    (result, usage)
}

fn analyze_query(
    catalog: &Catalog,
    raw: &RawQuery,
    dialect: Dialect,
    fragments: &Fragments,
    used: &mut BTreeSet<FragmentKey>,
) -> Result<QueryInfo, Vec<Diagnostic>> {
    let diagnostic = |(line, col, message): query::PosError| Diagnostic {
        file: raw.file.clone(),
        line,
        col,
        query: Some(raw.name.clone()),
        message,
    };
    // Fragments first: everything below works on the expanded text; its positions are
    // mapped back to the query file (or the use site of a fragment) when reported.
    let expanded = fragment::expand(&raw.body, fragments, used)
        .map_err(|e| e.into_iter().map(diagnostic).collect::<Vec<_>>())?;
    let mk = |e: query::PosError| diagnostic(expanded.error(e));
    let expanded_raw;
    let raw = if expanded.body == raw.body {
        raw
    } else {
        expanded_raw = RawQuery {
            body: expanded.body.clone(),
            ..raw.clone()
        };
        &expanded_raw
    };
    let tokens = query::tokenize(&raw.body, dialect).map_err(|e| vec![mk(e)])?;
    let scan = query::scan_params(&raw.body, &tokens, dialect).map_err(|e| vec![mk(e)])?;
    query::check_complexity(&tokens).map_err(|e| vec![mk(e)])?;
    let stmts = match dialect {
        Dialect::Sqlite => query::parse_tokens(&tokens, dialect),
        Dialect::Postgres => query::parse_tokens(&query::pg_placeholders(&tokens, &scan), dialect),
    }
    .map_err(|e| vec![mk(e)])?;
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
    if dialect == Dialect::Postgres && raw.kind == Kind::ExecLastId {
        return Err(vec![mk((
            first.0,
            first.1,
            ":execlastid needs SQLite's rowid; PostgreSQL has none: use INSERT … RETURNING id \
             with :one"
                .into(),
        ))]);
    }
    if !raw.kind.returns_rows() && !analysis.columns.is_empty() {
        return Err(vec![mk((
            first.0,
            first.1,
            format!("{} query returns columns; use :one or :many", raw.kind),
        ))]);
    }
    let sql = rewrite(raw, &tokens, &scan, &analysis.params, dialect).map_err(|e| vec![mk(e)])?;
    let doc = leading_comments(&tokens);
    let mut params = analysis.params;
    for p in &mut params {
        p.pos = expanded.position(p.pos);
    }
    let mut columns = analysis.columns;
    for c in &mut columns {
        c.pos = expanded.position(c.pos);
    }
    Ok(QueryInfo {
        name: raw.name.clone(),
        kind: raw.kind,
        file: raw.file.clone(),
        line: raw.line,
        doc,
        sql,
        params,
        columns,
        dialect,
        read_only: !analysis.is_dml,
        one_row: analysis.one_row,
        custom_plan: raw.custom_plan,
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

/// The statement text from its first to last token, parameters replaced by `?N` (SQLite;
/// a list as `/*SLICE:name*/?`, expanded at run time) or `$N` (PostgreSQL; a list is one
/// array parameter: `IN (sqlc.slice(x))` becomes `= ANY($N)`, `NOT IN (…)` `<> ALL($N)`).
fn rewrite(
    raw: &RawQuery,
    tokens: &[query::TokenWithSpan],
    scan: &query::ParamScan,
    params: &[Param],
    dialect: Dialect,
) -> Result<String, query::PosError> {
    let body = &raw.body;
    let starts = query::line_starts(body);
    let off = |l: u64, c: u64| query::byte_offset(&starts, body, l, c);
    let sig: Vec<&query::TokenWithSpan> = tokens
        .iter()
        .filter(|t| !matches!(t.token, Token::Whitespace(_) | Token::EOF))
        .collect();
    let Some(first) = sig.first() else {
        return Ok(String::new());
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
        let (mut a, mut b) = o.range;
        if a < cursor || b > end {
            continue;
        }
        let text = match (params.get(o.slot), dialect) {
            (Some(p), Dialect::Sqlite) if p.slice => format!("/*SLICE:{}*/?", p.name),
            (Some(p), Dialect::Sqlite) => format!("?{}", p.index),
            (Some(p), Dialect::Postgres) if p.slice => {
                let Some((from, to, negated)) = in_list_span(&sig, o.pos, &off) else {
                    return Err((
                        o.pos.0,
                        o.pos.1,
                        format!(
                            "sqlc.slice({}) can only be the whole list of an IN (…)",
                            p.name
                        ),
                    ));
                };
                (a, b) = (from, to);
                if negated {
                    format!("<> ALL(${})", p.index)
                } else {
                    format!("= ANY(${})", p.index)
                }
            }
            (Some(p), Dialect::Postgres) => format!("${}", p.index),
            (None, _) => body.get(a..b).unwrap_or_default().to_string(),
        };
        out.push_str(body.get(cursor..a).unwrap_or_default());
        out.push_str(&text);
        cursor = b;
    }
    out.push_str(body.get(cursor..end).unwrap_or_default());
    Ok(out
        .lines()
        .map(str::trim_end)
        .collect::<Vec<_>>()
        .join("\n"))
}

/// For the list parameter at `pos`, the byte range of `[NOT] IN ( … )` around it and whether
/// it is negated.
fn in_list_span(
    sig: &[&query::TokenWithSpan],
    pos: (u64, u64),
    off: &impl Fn(u64, u64) -> usize,
) -> Option<(usize, usize, bool)> {
    use sqlparser::keywords::Keyword;
    let at = sig
        .iter()
        .position(|t| (t.span.start.line, t.span.start.column) == pos)?;
    let open = sig.get(at.checked_sub(1)?)?;
    let kw = sig.get(at.checked_sub(2)?)?;
    if open.token != Token::LParen
        || !matches!(&kw.token, Token::Word(w) if w.keyword == Keyword::IN)
    {
        return None;
    }
    let not = at
        .checked_sub(3)
        .and_then(|i| sig.get(i))
        .filter(|t| matches!(&t.token, Token::Word(w) if w.keyword == Keyword::NOT));
    // sqlc.slice(x) is six tokens: sqlc . slice ( x ); the list closes after it.
    let close = sig.get(at + 6)?;
    if close.token != Token::RParen {
        return None;
    }
    let from = not.unwrap_or(kw);
    Some((
        off(from.span.start.line, from.span.start.column),
        off(close.span.end.line, close.span.end.column),
        not.is_some(),
    ))
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
