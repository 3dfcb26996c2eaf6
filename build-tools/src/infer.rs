//! Type inference: resolves every column reference against the catalog, infers parameter types
//! from their context and result columns (names, types, nullability) of one query.

use std::collections::HashMap;

use sqlparser::ast::{
    Assignment, AssignmentTarget, BinaryOperator, CastKind, Cte, Delete, Expr, FromTable, Function,
    FunctionArg, FunctionArgExpr, FunctionArguments, GroupByExpr, Ident, InTarget, Insert,
    JoinConstraint, JoinOperator, LimitClause, ObjectName, OnConflictAction, OnInsert, OrderBy,
    OrderByExpr, OrderByKind, Query, Select, SelectItem, SelectItemQualifiedWildcardKind, SetExpr,
    Spanned, SqliteOnConflict, Statement, TableFactor, TableObject, TableWithJoins, UnaryOperator,
    Update, UpdateTableFromKind, Value, WindowFrameBound, WindowType,
};

use crate::Dialect;
use crate::catalog::{Catalog, Column, Origin, SqlType, TableKind};
use crate::diag::suggestion;
use crate::query::{ParamKey, ParamScan, PosError, byte_offset, key_name, line_starts};

/// A result column of a query.
#[derive(Debug, Clone, PartialEq)]
pub struct ResultColumn {
    /// The name SQLite reports for the column (`sqlite3_column_name`).
    pub name: String,
    /// Rust field name (alias without override suffixes, snake_case).
    pub field: String,
    /// Inferred type.
    pub ty: SqlType,
    /// Whether the value may be NULL.
    pub nullable: bool,
    /// Author-provided Rust type (`AS "x: serde_json::Value"`).
    pub rust_type: Option<String>,
    /// Where its select item starts.
    pub pos: (u64, u64),
}

/// A parameter of a query.
#[derive(Debug, Clone, PartialEq)]
pub struct Param {
    /// Rust identifier (field or argument name).
    pub name: String,
    /// Inferred type.
    pub ty: SqlType,
    /// Whether `None` may be passed.
    pub nullable: bool,
    /// `sqlc.slice`: a list expanded at run time.
    pub slice: bool,
    /// Position in the rewritten SQL (`?N` / `$N`); 0 for SQLite slices (expanded at run time).
    pub index: usize,
    /// Where it first appears.
    pub pos: (u64, u64),
}

/// What analysing a statement produced.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Analysis {
    /// Parameters in order of first appearance.
    pub params: Vec<Param>,
    /// Result columns (empty for statements that return nothing).
    pub columns: Vec<ResultColumn>,
    /// Whether the statement is INSERT/UPDATE/DELETE.
    pub is_dml: bool,
    /// Whether the statement always yields exactly one row (an aggregate without GROUP BY, a
    /// SELECT without FROM, a one-row INSERT … RETURNING).
    pub one_row: bool,
}

#[derive(Debug, Clone, PartialEq)]
struct Col {
    name: String,
    field: String,
    ty: SqlType,
    nullable: bool,
    hidden: bool,
    rust: Option<String>,
    pos: (u64, u64),
}

impl Col {
    fn from_catalog(c: &Column) -> Col {
        Col {
            name: c.name.clone(),
            field: snake_case(&c.name),
            ty: c.ty,
            nullable: c.nullable,
            hidden: c.hidden,
            rust: None,
            pos: (0, 0),
        }
    }
}

#[derive(Debug, Clone)]
struct Rel {
    /// Alias or table name used to qualify columns.
    name: String,
    /// Underlying table name for messages.
    table: String,
    virtual_table: bool,
    cols: Vec<Col>,
    /// An unknown table (already reported): any column resolves, silently.
    opaque: bool,
}

#[derive(Debug, Default)]
struct Frame {
    rels: Vec<Rel>,
    ctes: Vec<(String, Vec<Col>)>,
    outputs: Vec<Col>,
    /// A SELECT with GROUP BY: every group has at least one row, so an aggregate over a
    /// NOT NULL argument is never NULL there.
    grouped: bool,
}

#[derive(Debug, Clone, Default)]
struct Hint {
    ty: Option<SqlType>,
    nullable: bool,
    name: Option<String>,
}

impl Hint {
    fn of(ty: SqlType, name: &str) -> Hint {
        Hint {
            ty: Some(ty),
            nullable: false,
            name: Some(name.to_string()),
        }
    }
    fn ty(ty: SqlType) -> Hint {
        Hint {
            ty: Some(ty),
            nullable: false,
            name: None,
        }
    }
}

#[derive(Debug, Clone)]
struct Typed {
    ty: SqlType,
    nullable: bool,
    col: Option<String>,
    agg: bool,
}

impl Typed {
    fn new(ty: SqlType, nullable: bool) -> Typed {
        Typed {
            ty,
            nullable,
            col: None,
            agg: false,
        }
    }
    fn hint(&self) -> Hint {
        Hint {
            ty: (self.ty != SqlType::Any).then_some(self.ty),
            nullable: false,
            name: self.col.clone(),
        }
    }
}

#[derive(Debug, Clone, Default)]
struct ParamState {
    ty: Option<SqlType>,
    /// Some(false) once any occurrence requires a value.
    nullable: Option<bool>,
    name: Option<String>,
}

struct Analyzer<'a> {
    catalog: &'a Catalog,
    text: &'a str,
    starts: Vec<usize>,
    frames: Vec<Frame>,
    occ: HashMap<(u64, u64), usize>,
    scan: &'a ParamScan,
    pstate: Vec<ParamState>,
    /// Parameters tested with `IS [NOT] NULL` (directly or through a CAST): the query means
    /// to accept NULL for them.
    null_tested: Vec<bool>,
    errors: Vec<PosError>,
    slice_ok: Option<(u64, u64)>,
    depth: usize,
}

/// Deeper expressions are rejected instead of risking the stack (the parser bounds nesting,
/// but long operator chains are built iteratively).
const MAX_DEPTH: usize = 200;

fn pos_of(span: sqlparser::tokenizer::Span) -> (u64, u64) {
    (span.start.line.max(1), span.start.column.max(1))
}

fn ident_pos(i: &Ident) -> (u64, u64) {
    pos_of(i.span)
}

fn last_ident(name: &ObjectName) -> Option<&Ident> {
    name.0.last().and_then(|p| p.as_ident())
}

const AGGREGATES: &[&str] = &[
    "count",
    "sum",
    "total",
    "avg",
    "group_concat",
    "string_agg",
    "json_group_array",
    "json_group_object",
];

/// Analyses one parsed query statement.
pub fn analyze_statement(
    catalog: &Catalog,
    stmt: &Statement,
    body: &str,
    scan: &ParamScan,
) -> Result<Analysis, Vec<PosError>> {
    let mut a = Analyzer::new(catalog, body, scan);
    let (cols, is_dml, one_row) = a.statement(stmt);
    let mut columns = Vec::new();
    let mut seen: Vec<&str> = Vec::new();
    let first_pos = stmt_pos(stmt);
    let clean = a.errors.is_empty();
    for c in &cols {
        if seen.contains(&c.field.as_str()) {
            a.errors.push((
                first_pos.0,
                first_pos.1,
                format!(
                    "duplicate result column \"{}\"; give it a distinct alias",
                    c.field
                ),
            ));
        }
        seen.push(&c.field);
        let pos = if c.pos.0 == 0 { first_pos } else { c.pos };
        if a.pg() && c.rust.is_none() && !c.ty.has_rust_type(Dialect::Postgres) {
            let msg = match c.ty {
                SqlType::Numeric => Some(format!(
                    "column \"{}\" is NUMERIC in PostgreSQL (a sum of BIGINT, an avg, a decimal \
                     literal); CAST it AS BIGINT or DOUBLE PRECISION",
                    c.field
                )),
                SqlType::Json => Some(format!(
                    "column \"{}\" is JSONB in PostgreSQL; read it with ->> or CAST it AS TEXT",
                    c.field
                )),
                SqlType::Other => Some(format!(
                    "column \"{}\" has a PostgreSQL type with no Rust mapping here; CAST it \
                     (AS TEXT, BIGINT, DOUBLE PRECISION, BOOLEAN or BYTEA)",
                    c.field
                )),
                // After a real error the type is unknown because of it.
                _ if !clean => None,
                _ => Some(format!(
                    "cannot infer the PostgreSQL type of column \"{}\"; CAST it",
                    c.field
                )),
            };
            if let Some(m) = msg {
                a.errors.push((pos.0, pos.1, m));
            }
        }
        columns.push(ResultColumn {
            name: c.name.clone(),
            field: c.field.clone(),
            ty: c.ty,
            nullable: c.nullable,
            rust_type: c.rust.clone(),
            pos,
        });
    }
    let params = a.finish_params();
    if a.errors.is_empty() {
        Ok(Analysis {
            params,
            columns,
            is_dml,
            one_row,
        })
    } else {
        let mut e = a.errors;
        e.sort();
        e.dedup();
        Err(e)
    }
}

fn stmt_pos(stmt: &Statement) -> (u64, u64) {
    pos_of(stmt.span())
}

/// Infers the columns of a `CREATE VIEW … AS query`.
pub fn view_columns(
    catalog: &Catalog,
    q: &Query,
    text: &str,
    origin: &Origin,
) -> Result<Vec<Column>, String> {
    let scan = ParamScan::default();
    let mut a = Analyzer::new(catalog, text, &scan);
    let cols = a.query(q, None).0;
    if let Some((_, _, m)) = a.errors.into_iter().next() {
        return Err(m);
    }
    Ok(cols
        .into_iter()
        .map(|c| Column {
            name: c.name,
            ty: c.ty,
            nullable: c.nullable,
            hidden: false,
            origin: origin.clone(),
        })
        .collect())
}

impl<'a> Analyzer<'a> {
    fn new(catalog: &'a Catalog, text: &'a str, scan: &'a ParamScan) -> Self {
        let occ = scan.occurrences.iter().map(|o| (o.pos, o.slot)).collect();
        Analyzer {
            catalog,
            text,
            starts: line_starts(text),
            frames: Vec::new(),
            occ,
            scan,
            pstate: vec![ParamState::default(); scan.slots.len()],
            null_tested: vec![false; scan.slots.len()],
            errors: Vec::new(),
            slice_ok: None,
            depth: 0,
        }
    }

    fn pg(&self) -> bool {
        self.catalog.dialect == Dialect::Postgres
    }

    fn err(&mut self, pos: (u64, u64), msg: String) {
        self.errors.push((pos.0, pos.1, msg));
    }

    /// The expression's original text, which is what SQLite names an unaliased result column.
    /// Spans of some nodes (function calls) stop early, so the text runs from the span start to
    /// the end of the select item: the next top-level `,`, `)` or clause keyword.
    fn source_text(&self, e: &Expr) -> String {
        let sp = e.span();
        if sp.start.line == 0 {
            return e.to_string();
        }
        let a = byte_offset(&self.starts, self.text, sp.start.line, sp.start.column);
        let Some(rest) = self.text.get(a..) else {
            return e.to_string();
        };
        let Ok(tokens) = crate::query::tokenize(rest, self.catalog.dialect) else {
            return e.to_string();
        };
        let rest_starts = line_starts(rest);
        let mut depth = 0usize;
        let mut end = 0usize;
        for t in &tokens {
            use sqlparser::keywords::Keyword as K;
            use sqlparser::tokenizer::Token;
            match &t.token {
                Token::Whitespace(_) => continue,
                Token::LParen => depth += 1,
                Token::RParen if depth == 0 => break,
                Token::RParen => depth -= 1,
                Token::Comma | Token::SemiColon | Token::EOF if depth == 0 => break,
                Token::Word(w)
                    if depth == 0
                        && w.quote_style.is_none()
                        && matches!(
                            w.keyword,
                            K::FROM
                                | K::WHERE
                                | K::GROUP
                                | K::HAVING
                                | K::ORDER
                                | K::LIMIT
                                | K::UNION
                                | K::EXCEPT
                                | K::INTERSECT
                                | K::WINDOW
                                | K::RETURNING
                                | K::AS
                        ) =>
                {
                    break;
                }
                _ => {}
            }
            end = byte_offset(&rest_starts, rest, t.span.end.line, t.span.end.column);
        }
        match rest.get(..end) {
            Some(s) if !s.trim().is_empty() => s.trim().to_string(),
            _ => e.to_string(),
        }
    }

    fn finish_params(&mut self) -> Vec<Param> {
        let mut out: Vec<Param> = Vec::new();
        let mut index = 0;
        for (i, slot) in self.scan.slots.iter().enumerate() {
            let st = self.pstate.get(i).cloned().unwrap_or_default();
            let Some(ty) = st.ty else {
                // After a real error (an unknown table or column) the parameter's context is
                // unknown too; asking for a CAST would mislead, so only that error stands.
                if !self.errors.is_empty() {
                    continue;
                }
                let what = match &slot.key {
                    ParamKey::Named(n) if slot.spelling.starts_with("sqlc") => {
                        format!("{}({n})", slot.spelling)
                    }
                    ParamKey::Named(_) | ParamKey::Numbered(_) => slot.spelling.clone(),
                    ParamKey::Anon(_) => "?".to_string(),
                };
                let others = if self.pg() {
                    "BIGINT, DOUBLE PRECISION, BOOLEAN, BYTEA"
                } else {
                    "INTEGER, REAL, BLOB"
                };
                self.err(
                    slot.first,
                    format!(
                        "cannot infer the type of parameter {what}; write CAST({what} AS TEXT) (or {others})"
                    ),
                );
                continue;
            };
            if self.pg() && !ty.has_rust_type(Dialect::Postgres) {
                let (what, cast) = match ty {
                    SqlType::Numeric => ("NUMERIC", "DOUBLE PRECISION"),
                    SqlType::Json => ("JSONB", "jsonb"),
                    _ => ("a type with no Rust mapping", "TEXT"),
                };
                let shown = slot.spelling.clone();
                self.err(
                    slot.first,
                    format!(
                        "parameter {shown} is used as {what} in PostgreSQL; write CAST({shown} AS {cast}) \
                         to bind it as {}",
                        ty.widest().sql_name()
                    ),
                );
                continue;
            }
            let base = match &slot.key {
                ParamKey::Named(n) => snake_case(n),
                _ => st.name.as_deref().map(snake_case).unwrap_or_default(),
            };
            let base = if base.is_empty() {
                format!("p{}", i + 1)
            } else {
                base
            };
            let base = match base.as_str() {
                "conn" | "params" | "sql" | "stmt" | "row" | "rows" => format!("{base}_"),
                _ => base,
            };
            let mut name = base.clone();
            let mut n = 2;
            while out.iter().any(|p| p.name == name) {
                name = format!("{base}_{n}");
                n += 1;
            }
            if !slot.slice || self.pg() {
                index += 1;
            }
            out.push(Param {
                name,
                ty,
                nullable: slot.narg
                    || st.nullable.unwrap_or(false)
                    || self.null_tested.get(i).copied().unwrap_or(false),
                slice: slot.slice,
                index: if slot.slice && !self.pg() { 0 } else { index },
                pos: slot.first,
            });
        }
        out
    }

    // ---- statements -------------------------------------------------------------------

    /// The output columns, whether the statement changes data, and whether it always yields
    /// exactly one row.
    fn statement(&mut self, stmt: &Statement) -> (Vec<Col>, bool, bool) {
        match stmt {
            Statement::Query(q) => {
                let dml = is_dml_body(q.body.as_ref())
                    || q.with.as_ref().is_some_and(|w| {
                        w.cte_tables
                            .iter()
                            .any(|c| is_dml_body(c.query.body.as_ref()))
                    });
                let (cols, single) = self.query(q, None);
                (cols, dml, single && !dml)
            }
            Statement::Insert(i) => (self.insert(i), true, insert_one_row(i)),
            Statement::Update(u) => (self.update(u), true, false),
            Statement::Delete(d) => (self.delete(d), true, false),
            other => {
                self.err(
                    stmt_pos(other),
                    "unsupported statement; expected SELECT, INSERT, UPDATE, DELETE or WITH".into(),
                );
                (Vec::new(), false, false)
            }
        }
    }

    fn insert(&mut self, ins: &Insert) -> Vec<Col> {
        let TableObject::TableName(name) = &ins.table else {
            self.err(pos_of(ins.table.span()), "unsupported INSERT target".into());
            return Vec::new();
        };
        let Some(rel) = self.catalog_rel(name, None) else {
            return Vec::new();
        };
        let rel = match &ins.table_alias {
            Some(a) => Rel {
                name: a.alias.value.clone(),
                ..rel
            },
            None => rel,
        };
        let mut targets: Vec<Col> = Vec::new();
        if ins.columns.is_empty() {
            targets = rel.cols.iter().filter(|c| !c.hidden).cloned().collect();
        } else {
            for cn in &ins.columns {
                let Some(id) = last_ident(cn) else { continue };
                match find_col(&rel, &id.value) {
                    Some(c) => targets.push(c.clone()),
                    None => {
                        let msg = no_column_msg(&id.value, std::slice::from_ref(&rel));
                        self.err(ident_pos(id), msg);
                        targets.push(Col {
                            name: id.value.clone(),
                            field: id.value.clone(),
                            ty: SqlType::Any,
                            nullable: true,
                            hidden: false,
                            rust: None,
                            pos: (0, 0),
                        });
                    }
                }
            }
        }
        let hints: Vec<Hint> = targets
            .iter()
            .map(|c| Hint {
                ty: Some(c.ty),
                nullable: c.nullable,
                name: Some(c.name.clone()),
            })
            .collect();
        if let Some(src) = &ins.source {
            if let SetExpr::Values(v) = src.body.as_ref()
                && src.with.is_none()
            {
                for row in &v.rows {
                    if row.content.len() != targets.len() {
                        self.err(
                            pos_of(row.opening_token.0.span),
                            format!("{} values for {} columns", row.content.len(), targets.len()),
                        );
                    }
                    let extra = Hint::ty(SqlType::Any);
                    for (i, e) in row.content.iter().enumerate() {
                        self.expr(e, Some(hints.get(i).unwrap_or(&extra)));
                    }
                }
            } else {
                let (cols, _) = self.query(src, Some(&hints));
                if cols.len() != targets.len() {
                    self.err(
                        pos_of(src.span()),
                        format!(
                            "SELECT returns {} columns for {} target columns",
                            cols.len(),
                            targets.len()
                        ),
                    );
                }
            }
        }
        if let Some(OnInsert::OnConflict(oc)) = &ins.on
            && let OnConflictAction::DoUpdate(du) = &oc.action
        {
            let excluded = Rel {
                name: "excluded".into(),
                ..rel.clone()
            };
            self.frames.push(Frame {
                rels: vec![rel.clone(), excluded],
                ..Frame::default()
            });
            self.assignments(&du.assignments, &rel);
            if let Some(sel) = &du.selection {
                self.expr(sel, Some(&Hint::ty(SqlType::Bool)));
            }
            self.frames.pop();
        }
        match &ins.returning {
            Some(items) => {
                self.frames.push(Frame {
                    rels: vec![rel],
                    ..Frame::default()
                });
                let cols = self.projection(items, None);
                self.frames.pop();
                cols
            }
            None => Vec::new(),
        }
    }

    fn assignments(&mut self, assignments: &[Assignment], rel: &Rel) {
        for a in assignments {
            match &a.target {
                AssignmentTarget::ColumnName(n) => {
                    let Some(id) = last_ident(n) else { continue };
                    let hint = match find_col(rel, &id.value) {
                        Some(c) => Hint {
                            ty: Some(c.ty),
                            nullable: c.nullable,
                            name: Some(c.name.clone()),
                        },
                        None => {
                            let msg = no_column_msg(&id.value, std::slice::from_ref(rel));
                            self.err(ident_pos(id), msg);
                            Hint::default()
                        }
                    };
                    self.expr(&a.value, Some(&hint));
                }
                AssignmentTarget::Tuple(names) => {
                    let mut hints = Vec::new();
                    for n in names {
                        let Some(id) = last_ident(n) else { continue };
                        match find_col(rel, &id.value) {
                            Some(c) => hints.push(Hint {
                                ty: Some(c.ty),
                                nullable: c.nullable,
                                name: Some(c.name.clone()),
                            }),
                            None => {
                                let msg = no_column_msg(&id.value, std::slice::from_ref(rel));
                                self.err(ident_pos(id), msg);
                                hints.push(Hint::default());
                            }
                        }
                    }
                    match &a.value {
                        Expr::Tuple(items) => {
                            for (i, e) in items.iter().enumerate() {
                                self.expr(e, hints.get(i));
                            }
                        }
                        other => {
                            self.expr(other, None);
                        }
                    }
                }
            }
        }
    }

    fn update(&mut self, u: &Update) -> Vec<Col> {
        self.frames.push(Frame::default());
        self.table_with_joins(&u.table);
        let target = self.frames.last().and_then(|f| f.rels.first().cloned());
        if let Some(from) = &u.from {
            let (UpdateTableFromKind::BeforeSet(t) | UpdateTableFromKind::AfterSet(t)) = from;
            for twj in t {
                self.table_with_joins(twj);
            }
        }
        if let Some(rel) = target {
            self.assignments(&u.assignments, &rel);
        }
        self.write_tail(
            u.selection.as_ref(),
            &u.order_by,
            u.limit.as_ref(),
            u.returning.as_deref(),
        )
    }

    fn delete(&mut self, d: &Delete) -> Vec<Col> {
        self.frames.push(Frame::default());
        let (FromTable::WithFromKeyword(from) | FromTable::WithoutKeyword(from)) = &d.from;
        for twj in from {
            self.table_with_joins(twj);
        }
        if let Some(using) = &d.using {
            for twj in using {
                self.table_with_joins(twj);
            }
        }
        self.write_tail(
            d.selection.as_ref(),
            &d.order_by,
            d.limit.as_ref(),
            d.returning.as_deref(),
        )
    }

    /// The clauses UPDATE and DELETE share after their tables: WHERE, ORDER BY, LIMIT and
    /// RETURNING (the returned columns). Pops the statement's frame.
    fn write_tail(
        &mut self,
        selection: Option<&Expr>,
        order_by: &[OrderByExpr],
        limit: Option<&Expr>,
        returning: Option<&[SelectItem]>,
    ) -> Vec<Col> {
        if let Some(sel) = selection {
            self.expr(sel, Some(&Hint::ty(SqlType::Bool)));
        }
        for o in order_by {
            self.expr(&o.expr, None);
        }
        if let Some(l) = limit {
            self.expr(l, Some(&Hint::of(SqlType::Integer, "limit")));
        }
        let cols = match returning {
            Some(items) => self.projection(items, None),
            None => Vec::new(),
        };
        self.frames.pop();
        cols
    }

    // ---- queries ----------------------------------------------------------------------

    /// Returns the output columns and whether the query always yields exactly one row.
    fn query(&mut self, q: &Query, hints: Option<&[Hint]>) -> (Vec<Col>, bool) {
        if self.frames.len() >= MAX_DEPTH / 4 {
            self.err(pos_of(q.span()), crate::query::NESTED_TOO_DEEPLY.into());
            return (Vec::new(), false);
        }
        self.frames.push(Frame::default());
        if let Some(with) = &q.with {
            for cte in &with.cte_tables {
                self.cte(cte, with.recursive);
            }
        }
        let (cols, single) = self.set_expr(&q.body, hints, q.order_by.as_ref());
        if let Some(lc) = &q.limit_clause {
            match lc {
                LimitClause::LimitOffset {
                    limit,
                    offset,
                    limit_by,
                } => {
                    if let Some(l) = limit {
                        self.expr(l, Some(&Hint::of(SqlType::Integer, "limit")));
                    }
                    if let Some(o) = offset {
                        self.expr(&o.value, Some(&Hint::of(SqlType::Integer, "offset")));
                    }
                    for e in limit_by {
                        self.expr(e, None);
                    }
                }
                LimitClause::OffsetCommaLimit { offset, limit } => {
                    self.expr(offset, Some(&Hint::of(SqlType::Integer, "offset")));
                    self.expr(limit, Some(&Hint::of(SqlType::Integer, "limit")));
                }
            }
        }
        self.frames.pop();
        (cols, single && limit_keeps_one_row(q.limit_clause.as_ref()))
    }

    fn cte(&mut self, cte: &Cte, recursive: bool) {
        let rename = |cols: &mut Vec<Col>| {
            for (c, def) in cols.iter_mut().zip(&cte.alias.columns) {
                c.name = def.name.value.clone();
                c.field = snake_case(&def.name.value);
            }
        };
        let name = cte.alias.name.value.clone();
        if recursive && let SetExpr::SetOperation { left, .. } = cte.query.body.as_ref() {
            // The anchor (first branch) gives the types the recursive branch refers to.
            let mut anchor = self.set_expr(leftmost(left), None, None).0;
            rename(&mut anchor);
            if let Some(f) = self.frames.last_mut() {
                f.ctes.push((name.clone(), anchor.clone()));
            }
            let (mut cols, _) = self.query(&cte.query, None);
            rename(&mut cols);
            for (c, a) in cols.iter_mut().zip(&anchor) {
                c.nullable |= a.nullable;
                if c.ty == SqlType::Any {
                    c.ty = a.ty;
                }
            }
            if let Some(f) = self.frames.last_mut() {
                f.ctes.retain(|(n, _)| *n != name);
                f.ctes.push((name, cols));
            }
            return;
        }
        let (mut cols, _) = self.query(&cte.query, None);
        if !cte.alias.columns.is_empty() && cte.alias.columns.len() != cols.len() {
            self.err(
                ident_pos(&cte.alias.name),
                format!(
                    "\"{name}\" declares {} columns but its query returns {}",
                    cte.alias.columns.len(),
                    cols.len()
                ),
            );
        }
        rename(&mut cols);
        if let Some(f) = self.frames.last_mut() {
            f.ctes.push((name, cols));
        }
    }

    fn set_expr(
        &mut self,
        body: &SetExpr,
        hints: Option<&[Hint]>,
        order_by: Option<&OrderBy>,
    ) -> (Vec<Col>, bool) {
        match body {
            SetExpr::Select(s) => self.select(s, hints, order_by),
            SetExpr::Query(q) => {
                let r = self.query(q, hints);
                self.order_by_outputs(order_by, &r.0);
                r
            }
            SetExpr::SetOperation { left, right, .. } => {
                let (mut l, _) = self.set_expr(left, hints, None);
                let (r, _) = self.set_expr(right, hints, None);
                if l.len() != r.len() {
                    self.err(
                        pos_of(right.span()),
                        format!(
                            "compound SELECT branches return {} and {} columns",
                            l.len(),
                            r.len()
                        ),
                    );
                }
                let pg = self.pg();
                for (a, b) in l.iter_mut().zip(&r) {
                    a.nullable |= b.nullable;
                    if a.ty == SqlType::Any && a.rust.is_none() {
                        a.ty = b.ty;
                    } else if pg {
                        a.ty = pg_unify(a.ty, b.ty);
                    }
                }
                self.order_by_outputs(order_by, &l);
                (l, false)
            }
            SetExpr::Values(v) => {
                let mut cols: Vec<Col> = Vec::new();
                for row in &v.rows {
                    for (i, e) in row.content.iter().enumerate() {
                        let t = self.expr(e, hints.and_then(|h| h.get(i)));
                        let name = format!("column{}", i + 1);
                        match cols.get_mut(i) {
                            Some(c) => c.nullable |= t.nullable,
                            None => cols.push(Col {
                                name: name.clone(),
                                field: name,
                                ty: t.ty,
                                nullable: t.nullable,
                                hidden: false,
                                rust: None,
                                pos: (0, 0),
                            }),
                        }
                    }
                }
                self.order_by_outputs(order_by, &cols);
                (cols, v.rows.len() == 1)
            }
            SetExpr::Insert(Statement::Insert(i)) => (self.insert(i), false),
            SetExpr::Update(Statement::Update(u)) => (self.update(u), false),
            SetExpr::Delete(Statement::Delete(d)) => (self.delete(d), false),
            other => {
                self.err(pos_of(other.span()), "unsupported query form".into());
                (Vec::new(), false)
            }
        }
    }

    fn order_by_outputs(&mut self, order_by: Option<&OrderBy>, cols: &[Col]) {
        let Some(ob) = order_by else { return };
        self.frames.push(Frame {
            rels: vec![Rel {
                name: String::new(),
                table: "result".into(),
                virtual_table: false,
                cols: cols.to_vec(),
                opaque: false,
            }],
            ..Frame::default()
        });
        self.order_by(ob);
        self.frames.pop();
    }

    fn order_by(&mut self, ob: &OrderBy) {
        if let OrderByKind::Expressions(exprs) = &ob.kind {
            for o in exprs {
                if let Expr::Value(v) = &o.expr
                    && let Value::Number(..) = v.value
                {
                    continue;
                }
                self.expr(&o.expr, None);
            }
        }
    }

    fn select(
        &mut self,
        s: &Select,
        hints: Option<&[Hint]>,
        order_by: Option<&OrderBy>,
    ) -> (Vec<Col>, bool) {
        let grouped = match &s.group_by {
            GroupByExpr::Expressions(exprs, _) => !exprs.is_empty(),
            GroupByExpr::All(_) => true,
        };
        self.frames.push(Frame {
            grouped,
            ..Frame::default()
        });
        for twj in &s.from {
            self.table_with_joins(twj);
        }
        let (cols, agg) = self.projection_agg(&s.projection, hints);
        if let Some(f) = self.frames.last_mut() {
            f.outputs = cols.clone();
        }
        if let Some(w) = &s.selection {
            self.expr(w, Some(&Hint::ty(SqlType::Bool)));
        }
        if let GroupByExpr::Expressions(exprs, _) = &s.group_by {
            for e in exprs {
                self.expr(e, None);
            }
        }
        if let Some(h) = &s.having {
            self.expr(h, Some(&Hint::ty(SqlType::Bool)));
        }
        if let Some(ob) = order_by {
            self.order_by(ob);
        }
        self.frames.pop();
        let single =
            !grouped && s.having.is_none() && (agg || (s.from.is_empty() && s.selection.is_none()));
        (cols, single)
    }

    fn projection(&mut self, items: &[SelectItem], hints: Option<&[Hint]>) -> Vec<Col> {
        self.projection_agg(items, hints).0
    }

    fn projection_agg(&mut self, items: &[SelectItem], hints: Option<&[Hint]>) -> (Vec<Col>, bool) {
        let mut cols = Vec::new();
        let mut agg = false;
        for (i, item) in items.iter().enumerate() {
            let hint = hints.and_then(|h| h.get(i));
            let before = cols.len();
            let item_pos = match item {
                SelectItem::Wildcard(w) => pos_of(w.wildcard_token.0.span),
                other => pos_of(other.span()),
            };
            self.projection_item(item, i, hint, &mut cols, &mut agg);
            for c in cols.iter_mut().skip(before) {
                c.pos = item_pos;
            }
        }
        (cols, agg)
    }

    fn projection_item(
        &mut self,
        item: &SelectItem,
        i: usize,
        hint: Option<&Hint>,
        cols: &mut Vec<Col>,
        agg: &mut bool,
    ) {
        {
            match item {
                SelectItem::UnnamedExpr(e) => {
                    let t = self.expr(e, hint);
                    *agg |= t.agg;
                    let (name, field) = match &t.col {
                        Some(c)
                            if matches!(e, Expr::Identifier(_) | Expr::CompoundIdentifier(_)) =>
                        {
                            (c.clone(), c.clone())
                        }
                        _ => {
                            let field = match e {
                                Expr::Function(f) => last_ident(&f.name)
                                    .map(|i| i.value.to_ascii_lowercase())
                                    .unwrap_or_default(),
                                _ => String::new(),
                            };
                            let field = if field.is_empty() {
                                format!("column_{}", i + 1)
                            } else {
                                field
                            };
                            (self.source_text(e), field)
                        }
                    };
                    cols.push(Col {
                        name,
                        field: snake_case(&field),
                        ty: t.ty,
                        nullable: t.nullable,
                        hidden: false,
                        rust: None,
                        pos: (0, 0),
                    });
                }
                SelectItem::ExprWithAlias { expr, alias } => {
                    let t = self.expr(expr, hint);
                    *agg |= t.agg;
                    let ov = parse_override(&alias.value);
                    cols.push(Col {
                        name: alias.value.clone(),
                        field: snake_case(&ov.name),
                        ty: t.ty,
                        nullable: ov.nullable.unwrap_or(t.nullable),
                        hidden: false,
                        rust: ov.rust,
                        pos: (0, 0),
                    });
                }
                SelectItem::Wildcard(w) => {
                    let rels = self
                        .frames
                        .last()
                        .map(|f| f.rels.clone())
                        .unwrap_or_default();
                    if rels.is_empty() {
                        self.err(
                            pos_of(w.wildcard_token.0.span),
                            "\"*\" without a FROM clause".into(),
                        );
                    }
                    for r in rels {
                        cols.extend(r.cols.iter().filter(|c| !c.hidden).cloned());
                    }
                }
                SelectItem::QualifiedWildcard(kind, _) => match kind {
                    SelectItemQualifiedWildcardKind::ObjectName(n) => {
                        let Some(id) = last_ident(n) else { return };
                        match self.find_rel(&id.value) {
                            Some(r) => cols.extend(r.cols.iter().filter(|c| !c.hidden).cloned()),
                            None => {
                                let msg = self.no_rel_msg(&id.value);
                                self.err(ident_pos(id), msg);
                            }
                        }
                    }
                    SelectItemQualifiedWildcardKind::Expr(e) => {
                        self.err(pos_of(e.span()), "unsupported qualified wildcard".into());
                    }
                },
                other => {
                    self.err(pos_of(other.span()), "unsupported select item".into());
                }
            }
        }
    }

    // ---- FROM -------------------------------------------------------------------------

    fn table_with_joins(&mut self, twj: &TableWithJoins) {
        let rels = self.table_factor(&twj.relation);
        if let Some(f) = self.frames.last_mut() {
            f.rels.extend(rels);
        }
        for j in &twj.joins {
            let mut rels = self.table_factor(&j.relation);
            let (left_null, right_null, constraint) = match &j.join_operator {
                JoinOperator::Left(c) | JoinOperator::LeftOuter(c) => (false, true, Some(c)),
                JoinOperator::Right(c) | JoinOperator::RightOuter(c) => (true, false, Some(c)),
                JoinOperator::FullOuter(c) => (true, true, Some(c)),
                JoinOperator::Join(c)
                | JoinOperator::Inner(c)
                | JoinOperator::CrossJoin(c)
                | JoinOperator::StraightJoin(c) => (false, false, Some(c)),
                _ => {
                    self.err(pos_of(j.relation.span()), "unsupported join kind".into());
                    (false, false, None)
                }
            };
            if right_null {
                for r in &mut rels {
                    for c in &mut r.cols {
                        c.nullable = true;
                    }
                }
            }
            if let Some(f) = self.frames.last_mut() {
                if left_null {
                    for r in &mut f.rels {
                        for c in &mut r.cols {
                            c.nullable = true;
                        }
                    }
                }
                f.rels.extend(rels);
            }
            match constraint {
                Some(JoinConstraint::On(e)) => {
                    self.expr(e, Some(&Hint::ty(SqlType::Bool)));
                }
                Some(JoinConstraint::Using(names)) => {
                    for n in names {
                        if let Some(id) = last_ident(n) {
                            self.column(None, id);
                        }
                    }
                }
                _ => {}
            }
        }
    }

    fn catalog_rel(&mut self, name: &ObjectName, alias: Option<&Ident>) -> Option<Rel> {
        let id = last_ident(name)?;
        match self.catalog.table(&id.value) {
            Some(t) => {
                if let Some(why) = &t.broken {
                    self.err(
                        ident_pos(id),
                        format!("view \"{}\" could not be analysed: {why}", t.name),
                    );
                    return None;
                }
                Some(Rel {
                    name: alias.map_or_else(|| t.name.clone(), |a| a.value.clone()),
                    table: t.name.clone(),
                    virtual_table: t.kind == TableKind::Virtual,
                    cols: t.columns.iter().map(Col::from_catalog).collect(),
                    opaque: false,
                })
            }
            None => {
                let mut names: Vec<String> =
                    self.catalog.tables.iter().map(|t| t.name.clone()).collect();
                for f in &self.frames {
                    names.extend(f.ctes.iter().map(|(n, _)| n.clone()));
                }
                let s = suggestion(&id.value, names.iter().map(String::as_str));
                self.err(ident_pos(id), format!("no table \"{}\"{s}", id.value));
                None
            }
        }
    }

    fn table_factor(&mut self, tf: &TableFactor) -> Vec<Rel> {
        match tf {
            TableFactor::Table {
                name, alias, args, ..
            } => {
                let Some(id) = last_ident(name) else {
                    return Vec::new();
                };
                let alias_id = alias.as_ref().map(|a| &a.name);
                let mut rel = if let Some(args) = args {
                    self.table_function(id, &args.args)
                } else if let Some(cols) = self.find_cte(&id.value) {
                    Some(Rel {
                        name: alias_id.map_or_else(|| id.value.clone(), |a| a.value.clone()),
                        table: id.value.clone(),
                        virtual_table: false,
                        cols,
                        opaque: false,
                    })
                } else {
                    let r = self.catalog_rel(name, alias_id);
                    r.or_else(|| {
                        Some(Rel {
                            name: alias_id.map_or_else(|| id.value.clone(), |a| a.value.clone()),
                            table: id.value.clone(),
                            virtual_table: false,
                            cols: Vec::new(),
                            opaque: true,
                        })
                    })
                };
                if let (Some(r), Some(a)) = (rel.as_mut(), alias.as_ref()) {
                    r.name = a.name.value.clone();
                    for (c, def) in r.cols.iter_mut().filter(|c| !c.hidden).zip(&a.columns) {
                        c.name = def.name.value.clone();
                        c.field = snake_case(&def.name.value);
                    }
                }
                rel.into_iter().collect()
            }
            TableFactor::Derived {
                subquery, alias, ..
            } => {
                let (mut cols, _) = self.query(subquery, None);
                let name = alias
                    .as_ref()
                    .map(|a| a.name.value.clone())
                    .unwrap_or_default();
                if let Some(a) = alias {
                    for (c, def) in cols.iter_mut().zip(&a.columns) {
                        c.name = def.name.value.clone();
                        c.field = snake_case(&def.name.value);
                    }
                }
                vec![Rel {
                    table: name.clone(),
                    name,
                    virtual_table: false,
                    cols,
                    opaque: false,
                }]
            }
            TableFactor::NestedJoin {
                table_with_joins, ..
            } => {
                self.frames.push(Frame::default());
                self.table_with_joins(table_with_joins);
                let f = self.frames.pop().unwrap_or_default();
                f.rels
            }
            other => {
                self.err(pos_of(other.span()), "unsupported FROM item".into());
                Vec::new()
            }
        }
    }

    fn table_function(&mut self, id: &Ident, args: &[FunctionArg]) -> Option<Rel> {
        let fname = id.value.to_ascii_lowercase();
        for a in args {
            if let Some(e) = fn_arg_expr(a) {
                self.expr(e, Some(&Hint::of(SqlType::Text, "json")));
            }
        }
        if fname != "json_each" && fname != "json_tree" {
            self.err(
                ident_pos(id),
                format!("unknown table-valued function \"{}\"", id.value),
            );
            return None;
        }
        let col = |n: &str, ty: SqlType| Col {
            name: n.into(),
            field: n.into(),
            ty,
            nullable: true,
            hidden: false,
            rust: None,
            pos: (0, 0),
        };
        Some(Rel {
            name: id.value.clone(),
            table: id.value.clone(),
            virtual_table: false,
            cols: vec![
                col("key", SqlType::Any),
                col("value", SqlType::Any),
                col("type", SqlType::Text),
                col("atom", SqlType::Any),
                col("id", SqlType::Integer),
                col("parent", SqlType::Integer),
                col("fullkey", SqlType::Text),
                col("path", SqlType::Text),
            ],
            opaque: false,
        })
    }

    fn find_cte(&self, name: &str) -> Option<Vec<Col>> {
        self.frames.iter().rev().find_map(|f| {
            f.ctes
                .iter()
                .rev()
                .find(|(n, _)| n.eq_ignore_ascii_case(name))
                .map(|(_, c)| c.clone())
        })
    }

    fn find_rel(&self, name: &str) -> Option<Rel> {
        self.frames.iter().rev().find_map(|f| {
            f.rels
                .iter()
                .find(|r| r.name.eq_ignore_ascii_case(name))
                .cloned()
        })
    }

    fn no_rel_msg(&self, name: &str) -> String {
        let names: Vec<String> = self
            .frames
            .iter()
            .flat_map(|f| f.rels.iter().map(|r| r.name.clone()))
            .collect();
        let s = suggestion(name, names.iter().map(String::as_str));
        format!("no table or alias \"{name}\" in scope{s}")
    }

    /// Resolves `col` or `rel.col`.
    fn column(&mut self, qualifier: Option<&Ident>, id: &Ident) -> Typed {
        let unknown = Typed::new(SqlType::Any, true);
        if let Some(q) = qualifier {
            let Some(rel) = self.find_rel(&q.value) else {
                let msg = self.no_rel_msg(&q.value);
                self.err(ident_pos(q), msg);
                return unknown;
            };
            return match find_col(&rel, &id.value) {
                Some(c) => typed_col(c),
                None if rel.opaque => unknown,
                None => {
                    let msg = no_column_msg(&id.value, std::slice::from_ref(&rel));
                    self.err(ident_pos(id), msg);
                    unknown
                }
            };
        }
        for f in self.frames.iter().rev() {
            let hits: Vec<&Rel> = f
                .rels
                .iter()
                .filter(|r| find_col(r, &id.value).is_some())
                .collect();
            if hits.len() > 1 {
                let names: Vec<String> = hits.iter().map(|r| format!("\"{}\"", r.name)).collect();
                let msg = format!(
                    "ambiguous column \"{}\" (in {}); qualify it",
                    id.value,
                    names.join(" and ")
                );
                self.err(ident_pos(id), msg);
                return unknown;
            }
            if let Some(r) = hits.first()
                && let Some(c) = find_col(r, &id.value)
            {
                return typed_col(c);
            }
            if let Some(c) = f
                .outputs
                .iter()
                .find(|c| c.name.eq_ignore_ascii_case(&id.value))
            {
                return typed_col(c);
            }
            if f.rels
                .iter()
                .any(|r| r.virtual_table && r.name.eq_ignore_ascii_case(&id.value))
            {
                return Typed::new(SqlType::Any, true);
            }
            if f.rels.iter().any(|r| r.opaque) {
                return unknown;
            }
        }
        let rels: Vec<Rel> = self
            .frames
            .last()
            .map(|f| f.rels.clone())
            .unwrap_or_default();
        let msg = no_column_msg(&id.value, &rels);
        self.err(ident_pos(id), msg);
        unknown
    }

    // ---- expressions ------------------------------------------------------------------

    fn param(&mut self, pos: (u64, u64), hint: Option<&Hint>) -> Typed {
        let Some(&slot) = self.occ.get(&pos) else {
            return Typed::new(SqlType::Any, true);
        };
        let Some(info) = self.scan.slots.get(slot).cloned() else {
            return Typed::new(SqlType::Any, true);
        };
        if info.slice && self.slice_ok != Some(pos) {
            self.err(
                pos,
                format!(
                    "sqlc.slice({}) can only be the whole list of an IN (…)",
                    key_name(&info.key)
                ),
            );
        }
        let mut ty = SqlType::Any;
        if let Some(h) = hint
            && let Some(st) = self.pstate.get_mut(slot)
        {
            if let Some(t) = h.ty {
                ty = t;
                match st.ty {
                    Some(prev) if prev != t && prev != SqlType::Any && t != SqlType::Any => {
                        let msg = format!(
                            "parameter {} is used as {} and as {}",
                            info.spelling,
                            prev.sql_name(),
                            t.sql_name()
                        );
                        self.errors.push((pos.0, pos.1, msg));
                    }
                    Some(prev) if prev != SqlType::Any => ty = prev,
                    _ => st.ty = Some(t),
                }
                let prev_null = st.nullable.unwrap_or(true);
                st.nullable = Some(prev_null && h.nullable);
            }
            if st.name.is_none() {
                st.name.clone_from(&h.name);
            }
        }
        Typed::new(ty, info.narg || hint.is_some_and(|h| h.nullable))
    }

    /// The parameter an `IS NULL` test is about: `@p`, `(@p)`, `CAST(@p AS T)`.
    fn tested_param(&self, e: &Expr) -> Option<usize> {
        match e {
            Expr::Value(v) if matches!(v.value, Value::Placeholder(_)) => {
                self.occ.get(&pos_of(v.span)).copied()
            }
            Expr::Function(f) if sqlc_fn(f).is_some() => self.occ.get(&fn_pos(f)).copied(),
            Expr::Nested(inner) | Expr::Cast { expr: inner, .. } => self.tested_param(inner),
            _ => None,
        }
    }

    /// Whether the current SELECT groups its rows (see [`Frame::grouped`]).
    fn in_group(&self) -> bool {
        self.frames.last().is_some_and(|f| f.grouped)
    }

    fn is_param(&self, e: &Expr) -> bool {
        match e {
            Expr::Value(v) => matches!(v.value, Value::Placeholder(_)),
            Expr::Function(f) => sqlc_fn(f).is_some(),
            Expr::Nested(inner) => self.is_param(inner),
            Expr::UnaryOp { expr, .. } => self.is_param(expr),
            _ => false,
        }
    }

    /// Types two operands that must agree, letting a parameter on either side take the other's type.
    fn pair(&mut self, l: &Expr, r: &Expr) -> (Typed, Typed) {
        self.pair_with(l, r, false)
    }

    /// Like [`Self::pair`]; `null_ok` (for `IS`, which compares NULLs) lets a parameter be `None`.
    /// Row values pair element by element, `(a, b) < (@a, @b)`, also against a subquery's columns.
    fn pair_with(&mut self, l: &Expr, r: &Expr, null_ok: bool) -> (Typed, Typed) {
        match (row_items(l), row_items(r), row_subquery(l), row_subquery(r)) {
            (Some(a), Some(b), ..) => return self.pair_rows(a, b, r, null_ok),
            (Some(a), None, _, Some(q)) => return self.row_vs_subquery(a, q, null_ok),
            (None, Some(b), Some(q), _) => {
                let (rt, lt) = self.row_vs_subquery(b, q, null_ok);
                return (lt, rt);
            }
            (Some(_), None, ..) | (None, Some(_), ..) => {
                let (row, other) = if row_items(l).is_some() {
                    (l, r)
                } else {
                    (r, l)
                };
                self.err(
                    pos_of(other.span()),
                    "a row value can only be compared with a row value of the same size or a subquery"
                        .into(),
                );
                // Already reported: keep its parameters from adding "cannot infer" noise.
                let any = Hint::ty(SqlType::Any);
                for e in row_items(row).unwrap_or_default() {
                    self.expr(e, Some(&any));
                }
                self.expr(other, Some(&any));
                return (
                    Typed::new(SqlType::Any, true),
                    Typed::new(SqlType::Any, true),
                );
            }
            _ => {}
        }
        let with_null = |t: &Typed| Hint {
            nullable: null_ok,
            ..t.hint()
        };
        if self.is_param(l) && !self.is_param(r) {
            let rt = self.expr(r, None);
            let lt = self.expr(l, Some(&with_null(&rt)));
            (lt, rt)
        } else {
            let lt = self.expr(l, None);
            let rt = self.expr(r, Some(&with_null(&lt)));
            (lt, rt)
        }
    }

    fn pair_rows(&mut self, a: &[Expr], b: &[Expr], r: &Expr, null_ok: bool) -> (Typed, Typed) {
        if a.len() != b.len() {
            self.err(
                pos_of(r.span()),
                format!(
                    "row values of different sizes: {} and {} elements",
                    a.len(),
                    b.len()
                ),
            );
        }
        let (mut ln, mut rn) = (false, false);
        for (x, y) in a.iter().zip(b) {
            let (xt, yt) = self.pair_with(x, y, null_ok);
            ln |= xt.nullable;
            rn |= yt.nullable;
        }
        // Elements beyond the shorter row are still resolved so their own errors are reported;
        // their parameters get no "cannot infer" on top of the size error.
        let any = Hint::ty(SqlType::Any);
        for e in a.iter().skip(b.len()).chain(b.iter().skip(a.len())) {
            self.expr(e, Some(&any));
        }
        (Typed::new(SqlType::Any, ln), Typed::new(SqlType::Any, rn))
    }

    /// A row value against a subquery's columns: `(a, @b) = (SELECT x, y …)`,
    /// `(a, b) IN (VALUES (@a, @b))`. Returns the row's and the subquery's types.
    fn row_vs_subquery(&mut self, items: &[Expr], q: &Query, null_ok: bool) -> (Typed, Typed) {
        let mut typed: Vec<Option<Typed>> = Vec::with_capacity(items.len());
        let mut hints = Vec::with_capacity(items.len());
        for e in items {
            if self.is_param(e) {
                typed.push(None);
                hints.push(Hint::default());
            } else {
                let t = self.expr(e, None);
                hints.push(Hint {
                    nullable: null_ok,
                    ..t.hint()
                });
                typed.push(Some(t));
            }
        }
        let (cols, single) = self.query(q, Some(&hints));
        if cols.len() != items.len() {
            self.err(
                pos_of(q.span()),
                format!(
                    "row value has {} elements but the subquery returns {} column{}",
                    items.len(),
                    cols.len(),
                    if cols.len() == 1 { "" } else { "s" }
                ),
            );
        }
        let mut ln = false;
        for (i, e) in items.iter().enumerate() {
            let t = match typed.get_mut(i).and_then(Option::take) {
                Some(t) => t,
                None => {
                    let h = cols.get(i).map(|c| Hint {
                        ty: (c.ty != SqlType::Any).then_some(c.ty),
                        nullable: null_ok,
                        name: Some(c.name.clone()),
                    });
                    self.expr(e, h.as_ref())
                }
            };
            ln |= t.nullable;
        }
        let rn = !single || cols.iter().any(|c| c.nullable);
        (Typed::new(SqlType::Any, ln), Typed::new(SqlType::Any, rn))
    }

    fn subquery_scalar(&mut self, q: &Query, hint: Option<&Hint>) -> Typed {
        let hints = hint.map(|h| vec![h.clone()]);
        let (cols, single) = self.query(q, hints.as_deref());
        match cols.first() {
            Some(c) => Typed {
                ty: c.ty,
                nullable: c.nullable || !single,
                col: None,
                agg: false,
            },
            None => Typed::new(SqlType::Any, true),
        }
    }

    fn expr(&mut self, e: &Expr, hint: Option<&Hint>) -> Typed {
        if self.depth >= MAX_DEPTH {
            self.err(pos_of(e.span()), crate::query::NESTED_TOO_DEEPLY.into());
            return Typed::new(SqlType::Any, true);
        }
        self.depth += 1;
        let t = self.expr_inner(e, hint);
        self.depth -= 1;
        t
    }

    fn expr_inner(&mut self, e: &Expr, hint: Option<&Hint>) -> Typed {
        match e {
            Expr::Identifier(id) => self.column(None, id),
            Expr::CompoundIdentifier(parts) => match parts.as_slice() {
                [] => Typed::new(SqlType::Any, true),
                [one] => self.column(None, one),
                [.., q, c] => self.column(Some(q), c),
            },
            Expr::Value(v) => match &v.value {
                Value::Placeholder(_) => self.param(pos_of(v.span), hint),
                Value::Number(n, _) => {
                    let real = n.contains(['.', 'e', 'E']) && !n.starts_with("0x");
                    let ty = match (real, self.pg()) {
                        (true, false) => SqlType::Real,
                        (false, false) => SqlType::Integer,
                        // PostgreSQL: a decimal literal is NUMERIC, an integer one INTEGER
                        // (4 bytes) unless it needs more.
                        (true, true) => SqlType::Numeric,
                        (false, true) => match n.parse::<i64>() {
                            Ok(v) if i32::try_from(v).is_ok() => SqlType::Int4,
                            Ok(_) => SqlType::Integer,
                            Err(_) => SqlType::Numeric,
                        },
                    };
                    Typed::new(ty, false)
                }
                Value::DollarQuotedString(_) => Typed::new(SqlType::Text, false),
                Value::Null => Typed::new(hint.and_then(|h| h.ty).unwrap_or(SqlType::Any), true),
                Value::Boolean(_) => Typed::new(SqlType::Bool, false),
                Value::HexStringLiteral(_) => Typed::new(SqlType::Blob, false),
                Value::SingleQuotedString(_)
                | Value::DoubleQuotedString(_)
                | Value::NationalStringLiteral(_)
                | Value::EscapedStringLiteral(_) => Typed::new(SqlType::Text, false),
                _ => Typed::new(SqlType::Any, false),
            },
            Expr::Nested(inner) => {
                let mut t = self.expr(inner, hint);
                t.col = None;
                t
            }
            Expr::BinaryOp { left, op, right } => self.binary(left, op, right, hint),
            Expr::UnaryOp { op, expr } => match op {
                UnaryOperator::Not => {
                    let t = self.expr(expr, Some(&Hint::ty(SqlType::Bool)));
                    Typed::new(SqlType::Bool, t.nullable)
                }
                UnaryOperator::BitwiseNot => {
                    let t = self.expr(expr, Some(&Hint::ty(SqlType::Integer)));
                    Typed::new(SqlType::Integer, t.nullable)
                }
                _ => {
                    let t = self.expr(expr, hint);
                    Typed::new(t.ty, t.nullable)
                }
            },
            Expr::IsNull(x) | Expr::IsNotNull(x) => {
                if let Some(slot) = self.tested_param(x)
                    && let Some(t) = self.null_tested.get_mut(slot)
                {
                    *t = true;
                }
                self.expr(x, None);
                Typed::new(SqlType::Bool, false)
            }
            Expr::IsTrue(x) | Expr::IsNotTrue(x) | Expr::IsFalse(x) | Expr::IsNotFalse(x) => {
                self.expr(x, Some(&Hint::ty(SqlType::Bool)));
                Typed::new(SqlType::Bool, false)
            }
            Expr::IsDistinctFrom(a, b) | Expr::IsNotDistinctFrom(a, b) => {
                self.pair_with(a, b, true);
                Typed::new(SqlType::Bool, false)
            }
            Expr::In { expr, target, .. } if row_items(expr).is_some() => {
                let t = match target {
                    InTarget::List(list) => {
                        let mut t = Typed::new(SqlType::Any, false);
                        for item in list {
                            t = self.pair(expr, item).0;
                        }
                        t
                    }
                    InTarget::Subquery(q) => match row_items(expr) {
                        Some(items) => self.row_vs_subquery(items, q, false).0,
                        None => Typed::new(SqlType::Any, true),
                    },
                    other => {
                        self.err(
                            pos_of(expr.span()),
                            format!("unsupported IN target: {other}"),
                        );
                        Typed::new(SqlType::Any, true)
                    }
                };
                Typed::new(SqlType::Bool, t.nullable)
            }
            Expr::In { expr, target, .. } => {
                let lt = self.expr(expr, None);
                match target {
                    InTarget::List(list) => {
                        if let [Expr::Function(f)] = list.as_slice()
                            && let Some(("slice", _)) = sqlc_fn(f)
                        {
                            self.slice_ok = Some(fn_pos(f));
                        }
                        let h = lt.hint();
                        for item in list {
                            self.expr(item, Some(&h));
                        }
                        self.slice_ok = None;
                    }
                    InTarget::Subquery(q) => {
                        self.query(q, Some(&[lt.hint()]));
                    }
                    other => {
                        self.err(
                            pos_of(expr.span()),
                            format!("unsupported IN target: {other}"),
                        );
                    }
                }
                Typed::new(SqlType::Bool, lt.nullable)
            }
            Expr::Between {
                expr, low, high, ..
            } => {
                let t = if row_items(expr).is_some() {
                    let (t, _) = self.pair(expr, low);
                    self.pair(expr, high);
                    t
                } else if self.is_param(expr) && !self.is_param(low) {
                    let lt = self.expr(low, None);
                    let t = self.expr(expr, Some(&lt.hint()));
                    self.expr(high, Some(&lt.hint()));
                    t
                } else {
                    let t = self.expr(expr, None);
                    let h = t.hint();
                    self.expr(low, Some(&h));
                    self.expr(high, Some(&h));
                    t
                };
                Typed::new(SqlType::Bool, t.nullable)
            }
            Expr::Like {
                expr,
                pattern,
                escape_char,
                ..
            }
            | Expr::ILike {
                expr,
                pattern,
                escape_char,
                ..
            } => {
                let t = self.expr(expr, Some(&Hint::ty(SqlType::Text)));
                let ph = Hint {
                    ty: Some(SqlType::Text),
                    nullable: false,
                    name: t.col.clone(),
                };
                self.expr(pattern, Some(&ph));
                if let Some(esc) = escape_char {
                    self.expr(esc, Some(&Hint::of(SqlType::Text, "escape")));
                }
                Typed::new(SqlType::Bool, t.nullable)
            }
            Expr::SimilarTo { expr, pattern, .. } | Expr::RLike { expr, pattern, .. } => {
                let t = self.expr(expr, Some(&Hint::ty(SqlType::Text)));
                self.expr(pattern, Some(&Hint::of(SqlType::Text, "pattern")));
                Typed::new(SqlType::Bool, t.nullable)
            }
            Expr::Cast {
                expr,
                data_type,
                kind,
                ..
            } => {
                let ty = SqlType::from_decl_in(&data_type.to_string(), self.catalog.dialect);
                // A parameter under a cast is bound as the widest type of the cast's family
                // (PostgreSQL narrows it explicitly, failing on overflow): `CAST(@n AS
                // INTEGER)` takes an i64 in both dialects.
                let h = Hint {
                    ty: Some(ty.widest()),
                    nullable: false,
                    name: hint.and_then(|h| h.name.clone()),
                };
                let t = self.expr(expr, Some(&h));
                let nullable = t.nullable || matches!(kind, CastKind::TryCast | CastKind::SafeCast);
                Typed::new(ty, nullable)
            }
            Expr::Collate { expr, .. } => {
                let mut t = self.expr(expr, hint);
                t.col = None;
                t
            }
            Expr::Case {
                operand,
                conditions,
                else_result,
                ..
            } => {
                let op = operand.as_ref().map(|o| self.expr(o, None));
                let mut result: Option<Typed> = None;
                let mut nullable = else_result.is_none();
                // Results typed first so a parameter among them can borrow a sibling's type.
                let mut pending = Vec::new();
                for cw in conditions {
                    let ch = match &op {
                        Some(t) => t.hint(),
                        None => Hint::ty(SqlType::Bool),
                    };
                    self.expr(&cw.condition, Some(&ch));
                    if self.is_param(&cw.result) {
                        pending.push(&cw.result);
                        continue;
                    }
                    let t = self.expr(&cw.result, hint);
                    nullable |= t.nullable;
                    match result.as_mut() {
                        Some(r) if r.ty != SqlType::Any && self.pg() => r.ty = pg_unify(r.ty, t.ty),
                        Some(r) if r.ty != SqlType::Any => {}
                        _ => result = Some(t),
                    }
                }
                if let Some(el) = else_result {
                    if self.is_param(el) {
                        pending.push(el);
                    } else {
                        let t = self.expr(el, hint);
                        nullable |= t.nullable;
                        match result.as_mut() {
                            Some(r) if r.ty != SqlType::Any && self.pg() => {
                                r.ty = pg_unify(r.ty, t.ty);
                            }
                            Some(r) if r.ty != SqlType::Any => {}
                            _ => result = Some(t),
                        }
                    }
                }
                let h = match (&result, hint) {
                    (Some(r), _) if r.ty != SqlType::Any => r.hint(),
                    (_, Some(h)) => h.clone(),
                    _ => Hint::default(),
                };
                for p in pending {
                    let t = self.expr(p, Some(&h));
                    nullable |= t.nullable;
                }
                let ty = result.map_or(h.ty.unwrap_or(SqlType::Any), |r| r.ty);
                Typed::new(ty, nullable)
            }
            Expr::Exists { subquery, .. } => {
                self.query(subquery, None);
                Typed::new(SqlType::Bool, false)
            }
            Expr::Subquery(q) => self.subquery_scalar(q, hint),
            Expr::Tuple(items) => {
                for i in items {
                    self.expr(i, None);
                }
                Typed::new(SqlType::Any, true)
            }
            Expr::Function(f) => self.function(f, hint),
            Expr::AtTimeZone {
                timestamp,
                time_zone,
            } => {
                let t = self.expr(timestamp, None);
                self.expr(time_zone, Some(&Hint::of(SqlType::Text, "time_zone")));
                Typed::new(SqlType::Other, t.nullable)
            }
            Expr::Extract { expr, .. } => {
                let t = self.expr(expr, None);
                Typed::new(
                    if self.pg() {
                        SqlType::Numeric
                    } else {
                        SqlType::Real
                    },
                    t.nullable,
                )
            }
            Expr::Position { expr, r#in } => {
                let a = self.expr(expr, Some(&Hint::ty(SqlType::Text)));
                let b = self.expr(r#in, Some(&Hint::ty(SqlType::Text)));
                Typed::new(SqlType::Int4, a.nullable || b.nullable)
            }
            Expr::TypedString(ts) => Typed::new(
                SqlType::from_decl_in(&ts.data_type.to_string(), self.catalog.dialect),
                false,
            ),
            Expr::Substring {
                expr,
                substring_from,
                substring_for,
                ..
            } => {
                let t = self.expr(expr, Some(&Hint::ty(SqlType::Text)));
                if let Some(x) = substring_from {
                    self.expr(x, Some(&Hint::of(SqlType::Integer, "start")));
                }
                if let Some(x) = substring_for {
                    self.expr(x, Some(&Hint::of(SqlType::Integer, "length")));
                }
                Typed::new(SqlType::Text, t.nullable)
            }
            Expr::Trim {
                expr,
                trim_what,
                trim_characters,
                ..
            } => {
                let t = self.expr(expr, Some(&Hint::ty(SqlType::Text)));
                if let Some(x) = trim_what {
                    self.expr(x, Some(&Hint::ty(SqlType::Text)));
                }
                for x in trim_characters.iter().flatten() {
                    self.expr(x, Some(&Hint::ty(SqlType::Text)));
                }
                Typed::new(SqlType::Text, t.nullable)
            }
            other => {
                self.err(
                    pos_of(other.span()),
                    format!("unsupported expression: {other}"),
                );
                Typed::new(SqlType::Any, true)
            }
        }
    }

    fn binary(&mut self, l: &Expr, op: &BinaryOperator, r: &Expr, hint: Option<&Hint>) -> Typed {
        use BinaryOperator as B;
        match op {
            B::And | B::Or | B::Xor => {
                let a = self.expr(l, Some(&Hint::ty(SqlType::Bool)));
                let b = self.expr(r, Some(&Hint::ty(SqlType::Bool)));
                Typed::new(SqlType::Bool, a.nullable || b.nullable)
            }
            B::Eq | B::NotEq | B::Lt | B::LtEq | B::Gt | B::GtEq | B::Spaceship => {
                let (a, b) = self.pair(l, r);
                Typed::new(SqlType::Bool, a.nullable || b.nullable)
            }
            B::Is | B::IsNot => {
                self.pair_with(l, r, true);
                Typed::new(SqlType::Bool, false)
            }
            B::Match | B::Glob | B::Regexp if self.pg() => {
                self.expr(l, None);
                self.expr(r, Some(&Hint::of(SqlType::Text, "pattern")));
                self.err(
                    pos_of(r.span()),
                    format!(
                        "{op} is SQLite's; PostgreSQL matches with ~ (a POSIX regular expression)"
                    ),
                );
                Typed::new(SqlType::Bool, false)
            }
            B::Match | B::Glob | B::Regexp => {
                let a = self.expr(l, None);
                let h = Hint {
                    ty: Some(SqlType::Text),
                    nullable: false,
                    name: Some(if *op == B::Match {
                        "query".into()
                    } else {
                        a.col.clone().unwrap_or_else(|| "pattern".into())
                    }),
                };
                self.expr(r, Some(&h));
                Typed::new(SqlType::Bool, false)
            }
            B::StringConcat => {
                let a = self.expr(l, Some(&Hint::ty(SqlType::Text)));
                let b = self.expr(r, Some(&Hint::ty(SqlType::Text)));
                Typed::new(SqlType::Text, a.nullable || b.nullable)
            }
            B::Arrow | B::LongArrow | B::HashArrow | B::HashLongArrow if self.pg() => {
                let a = self.expr(l, None);
                if !matches!(a.ty, SqlType::Json | SqlType::Any) {
                    self.err(
                        pos_of(l.span()),
                        format!(
                            "{op} needs json or jsonb on its left in PostgreSQL, not {}; write CAST(… AS jsonb)",
                            a.ty.sql_name()
                        ),
                    );
                }
                let key = if matches!(op, B::HashArrow | B::HashLongArrow) {
                    Hint::of(SqlType::Other, "path")
                } else {
                    Hint::of(SqlType::Text, "key")
                };
                self.expr(r, Some(&key));
                let ty = if matches!(op, B::LongArrow | B::HashLongArrow) {
                    SqlType::Text
                } else {
                    SqlType::Json
                };
                Typed::new(ty, true)
            }
            B::AtArrow
            | B::ArrowAt
            | B::Question
            | B::QuestionAnd
            | B::QuestionPipe
            | B::AtAt
            | B::PGRegexMatch
            | B::PGRegexIMatch
            | B::PGRegexNotMatch
            | B::PGRegexNotIMatch
            | B::PGLikeMatch
            | B::PGILikeMatch
            | B::PGNotLikeMatch
            | B::PGNotILikeMatch
                if self.pg() =>
            {
                let text = matches!(
                    op,
                    B::PGRegexMatch
                        | B::PGRegexIMatch
                        | B::PGRegexNotMatch
                        | B::PGRegexNotIMatch
                        | B::PGLikeMatch
                        | B::PGILikeMatch
                        | B::PGNotLikeMatch
                        | B::PGNotILikeMatch
                );
                let h = text.then(|| Hint::ty(SqlType::Text));
                let a = self.expr(l, h.as_ref());
                let h = if text {
                    Hint::of(SqlType::Text, "pattern")
                } else {
                    a.hint()
                };
                let b = self.expr(r, Some(&h));
                Typed::new(SqlType::Bool, a.nullable || b.nullable)
            }
            B::Arrow | B::LongArrow => {
                let a = self.expr(l, Some(&Hint::ty(SqlType::Text)));
                self.expr(r, Some(&Hint::of(SqlType::Text, "path")));
                let ty = if *op == B::Arrow {
                    SqlType::Text
                } else {
                    SqlType::Any
                };
                let _ = a;
                Typed::new(ty, true)
            }
            B::Plus | B::Minus | B::Multiply | B::Divide | B::Modulo => {
                let (a, b) = if self.is_param(l) && !self.is_param(r) {
                    let b = self.expr(r, hint);
                    let a = self.expr(l, Some(&b.hint()));
                    (a, b)
                } else {
                    let a = self.expr(l, hint);
                    let b = self.expr(r, Some(&a.hint()));
                    (a, b)
                };
                let ty = match (a.ty, b.ty) {
                    (x, y) if self.pg() && x.is_numeric() && y.is_numeric() => pg_unify(x, y),
                    (SqlType::Real, _) | (_, SqlType::Real) => SqlType::Real,
                    (SqlType::Integer | SqlType::Bool, SqlType::Integer | SqlType::Bool) => {
                        SqlType::Integer
                    }
                    _ => SqlType::Any,
                };
                Typed::new(ty, a.nullable || b.nullable)
            }
            B::BitwiseAnd
            | B::BitwiseOr
            | B::BitwiseXor
            | B::PGBitwiseShiftLeft
            | B::PGBitwiseShiftRight => {
                let a = self.expr(l, Some(&Hint::ty(SqlType::Integer)));
                let b = self.expr(r, Some(&Hint::ty(SqlType::Integer)));
                Typed::new(SqlType::Integer, a.nullable || b.nullable)
            }
            other => {
                self.expr(l, None);
                self.expr(r, None);
                self.err(pos_of(l.span()), format!("unsupported operator {other}"));
                Typed::new(SqlType::Any, true)
            }
        }
    }

    fn function(&mut self, f: &Function, hint: Option<&Hint>) -> Typed {
        if let Some((kind, _)) = sqlc_fn(f) {
            let pos = fn_pos(f);
            if kind == "slice" && self.slice_ok != Some(pos) {
                let name = fn_args(f)
                    .first()
                    .map(|e| e.to_string())
                    .unwrap_or_default();
                self.err(
                    pos,
                    format!("sqlc.slice({name}) can only be the whole list of an IN (…)"),
                );
                self.slice_ok = Some(pos);
                self.param(pos, Some(&Hint::ty(SqlType::Any)));
                self.slice_ok = None;
                return Typed::new(SqlType::Any, true);
            }
            return self.param(pos, hint);
        }
        let name = last_ident(&f.name)
            .map(|i| i.value.to_ascii_lowercase())
            .unwrap_or_default();
        let args = fn_args(f);
        if let Some(filter) = &f.filter {
            self.expr(filter, Some(&Hint::ty(SqlType::Bool)));
        }
        let windowed = f.over.is_some();
        // The rows an aggregate sees are never none: a GROUP BY group, or a window frame that
        // holds the current row. Then it is NULL only if its argument can be.
        let nonempty = f.filter.is_none()
            && match &f.over {
                None => self.in_group(),
                Some(w) => frame_holds_current_row(w),
            };
        let star = matches!(&f.args, FunctionArguments::List(l) if l.args.iter().any(|a| matches!(a, FunctionArg::Unnamed(FunctionArgExpr::Wildcard))));
        let mut agg = AGGREGATES.contains(&name.as_str()) && !windowed;
        let any_null = |ts: &[Typed]| ts.iter().any(|t| t.nullable);
        if self.pg()
            && let Some(t) = self.pg_function(f, &name, &args, hint, nonempty)
        {
            let agg = (agg || matches!(name.as_str(), "min" | "max")) && !windowed;
            return Typed { agg, ..t };
        }
        let t = match name.as_str() {
            "count" => {
                for a in &args {
                    self.expr(a, None);
                }
                let _ = star;
                Typed::new(SqlType::Integer, false)
            }
            "sum" | "total" | "avg" => {
                let ts = self.args_with(&args, None);
                let ty = match name.as_str() {
                    "sum" => match ts.first().map(|t| t.ty) {
                        Some(SqlType::Integer | SqlType::Bool) => SqlType::Integer,
                        _ => SqlType::Real,
                    },
                    _ => SqlType::Real,
                };
                Typed::new(ty, name != "total" && (!nonempty || any_null(&ts)))
            }
            "min" | "max" if args.len() == 1 => {
                agg = !windowed;
                let ts = self.args_with(&args, hint);
                let ty = ts.first().map_or(SqlType::Any, |t| t.ty);
                Typed::new(ty, !nonempty || any_null(&ts))
            }
            "min" | "max" | "coalesce" | "ifnull" | "nullif" | "iif" | "if" => {
                let (cond, vals) = if name == "iif" || name == "if" {
                    if let Some(c) = args.first() {
                        self.expr(c, Some(&Hint::ty(SqlType::Bool)));
                    }
                    (1, args.get(1..).unwrap_or(&[]))
                } else {
                    (0, &args[..])
                };
                let _ = cond;
                let mut typed: Vec<Option<Typed>> = vec![None; vals.len()];
                let mut base: Option<Typed> = None;
                for (i, a) in vals.iter().enumerate() {
                    if !self.is_param(a) {
                        let t = self.expr(a, hint);
                        if base.as_ref().is_none_or(|b| b.ty == SqlType::Any)
                            && t.ty != SqlType::Any
                        {
                            base = Some(t.clone());
                        } else if let Some(b) = base.as_mut()
                            && self.catalog.dialect == Dialect::Postgres
                        {
                            b.ty = pg_unify(b.ty, t.ty);
                        }
                        typed[i] = Some(t);
                    }
                }
                let h = match (&base, hint) {
                    (Some(b), _) => Hint {
                        ty: Some(b.ty),
                        nullable: false,
                        name: b.col.clone(),
                    },
                    (None, Some(h)) => h.clone(),
                    (None, None) => Hint::default(),
                };
                for (i, a) in vals.iter().enumerate() {
                    if typed[i].is_none() {
                        let hh = if name == "coalesce" || name == "ifnull" {
                            Hint {
                                nullable: true,
                                ..h.clone()
                            }
                        } else {
                            h.clone()
                        };
                        typed[i] = Some(self.expr(a, Some(&hh)));
                    }
                }
                let ts: Vec<Typed> = typed.into_iter().flatten().collect();
                let ty = base.map_or(h.ty.unwrap_or(SqlType::Any), |b| b.ty);
                let nullable = match name.as_str() {
                    "coalesce" | "ifnull" => ts.iter().all(|t| t.nullable),
                    "nullif" => true,
                    "iif" | "if" => any_null(&ts) || vals.len() < 2,
                    _ => any_null(&ts),
                };
                Typed::new(ty, nullable)
            }
            "length" | "octet_length" | "instr" | "unicode" => {
                let ts = self.args_with(&args, Some(&Hint::ty(SqlType::Text)));
                Typed::new(SqlType::Integer, any_null(&ts))
            }
            "lower" | "upper" | "trim" | "ltrim" | "rtrim" | "replace" | "substr" | "substring"
            | "soundex" | "unhex" => {
                let mut ts = Vec::new();
                for (i, a) in args.iter().enumerate() {
                    let h = if (name == "substr" || name == "substring") && i > 0 {
                        Hint::of(SqlType::Integer, if i == 1 { "start" } else { "length" })
                    } else {
                        Hint::ty(SqlType::Text)
                    };
                    ts.push(self.expr(a, Some(&h)));
                }
                Typed::new(
                    if name == "unhex" {
                        SqlType::Blob
                    } else {
                        SqlType::Text
                    },
                    any_null(&ts),
                )
            }
            "printf" | "format" | "char" | "hex" | "quote" | "typeof" | "concat" | "concat_ws" => {
                self.args_with(&args, Some(&Hint::ty(SqlType::Text)));
                Typed::new(SqlType::Text, false)
            }
            "group_concat" | "string_agg" => {
                let ts = self.args_with(&args, Some(&Hint::ty(SqlType::Text)));
                let value_null = ts.first().is_none_or(|t| t.nullable);
                Typed::new(SqlType::Text, !nonempty || value_null)
            }
            "date" | "time" | "datetime" | "strftime" | "timediff" => {
                self.args_with(&args, Some(&Hint::ty(SqlType::Text)));
                Typed::new(SqlType::Text, true)
            }
            "julianday" => {
                self.args_with(&args, Some(&Hint::ty(SqlType::Text)));
                Typed::new(SqlType::Real, true)
            }
            "unixepoch" => {
                self.args_with(&args, Some(&Hint::ty(SqlType::Text)));
                Typed::new(SqlType::Integer, true)
            }
            "abs" | "round" | "ceil" | "ceiling" | "floor" | "sign" => {
                let ts = self.args_with(&args, Some(&Hint::ty(SqlType::Real)));
                let ty = match (name.as_str(), ts.first().map(|t| t.ty)) {
                    ("round", _) => SqlType::Real,
                    (_, Some(SqlType::Integer)) => SqlType::Integer,
                    (_, Some(t)) if t != SqlType::Any => t,
                    _ => SqlType::Real,
                };
                Typed::new(ty, any_null(&ts))
            }
            "random" | "changes" | "total_changes" | "last_insert_rowid" | "row_number"
            | "rank" | "dense_rank" | "ntile" => {
                self.args_with(&args, Some(&Hint::ty(SqlType::Integer)));
                Typed::new(SqlType::Integer, false)
            }
            "percent_rank" | "cume_dist" => Typed::new(SqlType::Real, false),
            "randomblob" | "zeroblob" => {
                self.args_with(&args, Some(&Hint::ty(SqlType::Integer)));
                Typed::new(SqlType::Blob, false)
            }
            "lag" | "lead" | "first_value" | "last_value" | "nth_value" => {
                let ts = self.args_with(&args, None);
                Typed::new(ts.first().map_or(SqlType::Any, |t| t.ty), true)
            }
            "json_extract" => {
                self.args_with(&args, Some(&Hint::of(SqlType::Text, "path")));
                Typed::new(SqlType::Any, true)
            }
            "json" | "json_array" | "json_object" | "json_quote" | "json_set" | "json_insert"
            | "json_replace" | "json_remove" | "json_patch" | "json_group_array"
            | "json_group_object" => {
                let ts = self.args_with(&args, Some(&Hint::ty(SqlType::Text)));
                let nullable = matches!(
                    name.as_str(),
                    "json"
                        | "json_set"
                        | "json_insert"
                        | "json_replace"
                        | "json_remove"
                        | "json_patch"
                ) && any_null(&ts);
                Typed::new(SqlType::Text, nullable)
            }
            "json_type" => {
                self.args_with(&args, Some(&Hint::ty(SqlType::Text)));
                Typed::new(SqlType::Text, true)
            }
            "json_array_length" => {
                self.args_with(&args, Some(&Hint::ty(SqlType::Text)));
                Typed::new(SqlType::Integer, true)
            }
            "json_valid" => {
                self.args_with(&args, Some(&Hint::ty(SqlType::Text)));
                Typed::new(SqlType::Bool, false)
            }
            "bm25" => {
                if let Some(first) = args.first() {
                    self.expr(first, None);
                }
                self.args_with(
                    args.get(1..).unwrap_or(&[]),
                    Some(&Hint::of(SqlType::Real, "weight")),
                );
                Typed::new(SqlType::Real, false)
            }
            "snippet" | "highlight" => {
                if let Some(first) = args.first() {
                    self.expr(first, None);
                }
                for (i, a) in args.iter().enumerate().skip(1) {
                    let h = match (name.as_str(), i) {
                        (_, 1) => Hint::of(SqlType::Integer, "column"),
                        ("snippet", 5) => Hint::of(SqlType::Integer, "tokens"),
                        _ => Hint::ty(SqlType::Text),
                    };
                    self.expr(a, Some(&h));
                }
                Typed::new(SqlType::Text, false)
            }
            "likelihood" | "likely" | "unlikely" => {
                let ts = self.args_with(&args, None);
                ts.first()
                    .cloned()
                    .unwrap_or_else(|| Typed::new(SqlType::Any, true))
            }
            "like" | "glob" => {
                self.args_with(&args, Some(&Hint::ty(SqlType::Text)));
                Typed::new(SqlType::Bool, false)
            }
            _ => {
                self.args_with(&args, None);
                Typed::new(SqlType::Any, true)
            }
        };
        Typed {
            agg: agg || t.agg,
            ..t
        }
    }

    /// PostgreSQL's typing of the functions whose types or names differ from SQLite's; `None`
    /// for those typed like SQLite's (count, min/max of one column, coalesce, nullif, lower …).
    fn pg_function(
        &mut self,
        f: &Function,
        name: &str,
        args: &[Expr],
        hint: Option<&Hint>,
        nonempty: bool,
    ) -> Option<Typed> {
        let any_null = |ts: &[Typed]| ts.iter().any(|t| t.nullable);
        if let Some((_, instead)) = SQLITE_ONLY_FUNCTIONS.iter().find(|(n, _)| *n == name) {
            self.args_with(args, None);
            self.err(
                fn_pos(f),
                format!("{name}() is SQLite's; PostgreSQL has no {name}() (write {instead})"),
            );
            return Some(Typed::new(SqlType::Any, true));
        }
        let t = match name {
            "min" | "max" if args.len() > 1 => {
                self.args_with(args, hint);
                self.err(
                    fn_pos(f),
                    format!(
                        "scalar {name}(a, b, …) is SQLite's; write {}(a, b, …) or a CASE",
                        if name == "max" { "greatest" } else { "least" }
                    ),
                );
                Typed::new(SqlType::Any, true)
            }
            "sum" | "avg" => {
                let ts = self.args_with(args, None);
                let arg = ts.first().map_or(SqlType::Any, |t| t.ty);
                let ty = match (name, arg) {
                    ("sum", SqlType::Int2 | SqlType::Int4) => SqlType::Integer,
                    ("sum", SqlType::Float4) => SqlType::Float4,
                    (_, SqlType::Real | SqlType::Float4) => SqlType::Real,
                    (_, SqlType::Any) => SqlType::Any,
                    _ => SqlType::Numeric,
                };
                Typed::new(ty, !nonempty || any_null(&ts))
            }
            "greatest" | "least" => {
                let ts = self.args_with(args, hint);
                let ty = ts
                    .iter()
                    .map(|t| t.ty)
                    .reduce(pg_unify)
                    .unwrap_or(SqlType::Any);
                Typed::new(ty, ts.iter().all(|t| t.nullable))
            }
            "length" | "char_length" | "character_length" | "octet_length" | "strpos"
            | "bit_length" | "ascii" => {
                let ts = self.args_with(args, Some(&Hint::ty(SqlType::Text)));
                Typed::new(SqlType::Int4, any_null(&ts))
            }
            "substr" | "substring" | "left" | "right" | "repeat" | "lpad" | "rpad" => {
                let mut ts = Vec::new();
                for (i, a) in args.iter().enumerate() {
                    let h = match (name, i) {
                        (_, 0) | ("lpad" | "rpad", 2) => Hint::ty(SqlType::Text),
                        ("substr" | "substring", 1) => Hint::of(SqlType::Int4, "start"),
                        _ => Hint::of(SqlType::Int4, "length"),
                    };
                    ts.push(self.expr(a, Some(&h)));
                }
                Typed::new(SqlType::Text, any_null(&ts))
            }
            "string_agg" => {
                let ts = self.args_with(args, Some(&Hint::ty(SqlType::Text)));
                let value_null = ts.first().is_none_or(|t| t.nullable);
                Typed::new(SqlType::Text, !nonempty || value_null)
            }
            "to_char" | "regexp_replace" | "md5" | "unaccent" | "concat" | "concat_ws"
            | "format" | "ts_headline" | "encode" | "initcap" | "btrim" | "translate"
            | "jsonb_typeof" | "json_typeof" | "quote_ident" | "quote_literal" => {
                let ts = self.args_with(args, Some(&Hint::ty(SqlType::Text)));
                let nullable = !matches!(name, "concat" | "concat_ws" | "format") && any_null(&ts);
                Typed::new(SqlType::Text, nullable)
            }
            "row_number" | "rank" | "dense_rank" => {
                self.args_with(args, None);
                Typed::new(SqlType::Integer, false)
            }
            "ntile" => {
                self.args_with(args, Some(&Hint::ty(SqlType::Int4)));
                Typed::new(SqlType::Int4, true)
            }
            "random" | "date_part" | "percent_rank" | "cume_dist" => {
                self.args_with(args, None);
                Typed::new(SqlType::Real, name == "date_part")
            }
            "round" | "trunc" => {
                let ts = self.args_with(args, None);
                let ty = match ts.first().map(|t| t.ty) {
                    Some(SqlType::Real) if args.len() == 1 => SqlType::Real,
                    Some(SqlType::Any) | None => SqlType::Any,
                    _ => SqlType::Numeric,
                };
                Typed::new(ty, any_null(&ts))
            }
            "ts_rank" | "ts_rank_cd" | "similarity" | "word_similarity" => {
                let ts = self.args_with(args, None);
                Typed::new(SqlType::Float4, any_null(&ts))
            }
            "jsonb_array_length" | "json_array_length" => {
                let ts = self.args_with(args, None);
                Typed::new(SqlType::Int4, any_null(&ts))
            }
            "to_timestamp"
            | "now"
            | "clock_timestamp"
            | "statement_timestamp"
            | "to_tsvector"
            | "to_tsquery"
            | "plainto_tsquery"
            | "websearch_to_tsquery"
            | "phraseto_tsquery"
            | "array_agg"
            | "jsonb_agg"
            | "json_agg"
            | "to_jsonb"
            | "to_json"
            | "jsonb_build_object"
            | "json_build_object"
            | "jsonb_build_array"
            | "json_build_array" => {
                let ts = self.args_with(args, None);
                let ty = if name.contains("json") {
                    SqlType::Json
                } else {
                    SqlType::Other
                };
                Typed::new(ty, any_null(&ts))
            }
            other => {
                let returns = self.catalog.function(other)?;
                self.args_with(args, None);
                Typed::new(returns, true)
            }
        };
        Some(t)
    }

    fn args_with(&mut self, args: &[Expr], hint: Option<&Hint>) -> Vec<Typed> {
        args.iter().map(|a| self.expr(a, hint)).collect()
    }
}

/// Whether a window's frame always contains the current row (the default frame does; an
/// explicit one does when it starts at or before it and ends at or after it). A named window
/// is defined elsewhere, so it is not known to.
fn frame_holds_current_row(w: &WindowType) -> bool {
    let WindowType::WindowSpec(spec) = w else {
        return false;
    };
    let Some(frame) = &spec.window_frame else {
        return true;
    };
    let starts_before = matches!(
        frame.start_bound,
        WindowFrameBound::Preceding(_) | WindowFrameBound::CurrentRow
    );
    let ends_after = matches!(
        frame.end_bound,
        None | Some(WindowFrameBound::CurrentRow | WindowFrameBound::Following(_))
    );
    starts_before && ends_after
}

fn is_dml_body(e: &SetExpr) -> bool {
    matches!(
        e,
        SetExpr::Insert(_) | SetExpr::Update(_) | SetExpr::Delete(_)
    )
}

/// A one-row `VALUES` insert with RETURNING always returns its row, unless a conflict may
/// skip it (`DO NOTHING`, `DO UPDATE … WHERE`, SQLite's `OR IGNORE`).
fn insert_one_row(i: &Insert) -> bool {
    let one_values = i.source.as_ref().is_some_and(|src| {
        src.with.is_none()
            && matches!(src.body.as_ref(), SetExpr::Values(v) if v.rows.len() == 1)
            && limit_keeps_one_row(src.limit_clause.as_ref())
    });
    let may_skip = match &i.on {
        Some(OnInsert::OnConflict(oc)) => match &oc.action {
            OnConflictAction::DoNothing => true,
            OnConflictAction::DoUpdate(du) => du.selection.is_some(),
        },
        _ => false,
    };
    let ignored = matches!(i.or, Some(SqliteOnConflict::Ignore));
    i.returning.is_some() && one_values && !may_skip && !ignored
}

/// Whether a LIMIT/OFFSET leaves a one-row result one row: none, or a literal LIMIT of at
/// least 1 without OFFSET.
fn limit_keeps_one_row(lc: Option<&LimitClause>) -> bool {
    match lc {
        None => true,
        Some(LimitClause::LimitOffset {
            limit: Some(Expr::Value(v)),
            offset: None,
            limit_by,
        }) if limit_by.is_empty() => {
            matches!(&v.value, Value::Number(n, _) if n.parse::<u64>().is_ok_and(|n| n >= 1))
        }
        Some(_) => false,
    }
}

/// PostgreSQL's common type of two numeric types (UNION, CASE, coalesce, arithmetic): the one
/// further along int2 → int4 → int8 → numeric → real → double precision.
fn pg_unify(a: SqlType, b: SqlType) -> SqlType {
    fn rank(t: SqlType) -> Option<u8> {
        Some(match t {
            SqlType::Int2 => 0,
            SqlType::Int4 => 1,
            SqlType::Integer => 2,
            SqlType::Numeric => 3,
            SqlType::Float4 => 4,
            SqlType::Real => 5,
            _ => return None,
        })
    }
    match (rank(a), rank(b)) {
        (Some(x), Some(y)) => {
            if x >= y {
                a
            } else {
                b
            }
        }
        _ if a == SqlType::Any => b,
        _ => a,
    }
}

/// SQLite's functions that PostgreSQL does not have, with what to write there instead.
const SQLITE_ONLY_FUNCTIONS: &[(&str, &str)] = &[
    ("ifnull", "coalesce(a, b)"),
    ("iif", "CASE WHEN … THEN … ELSE … END"),
    ("total", "coalesce(sum(x), 0)"),
    ("group_concat", "string_agg(x, ',')"),
    ("instr", "strpos(a, b)"),
    ("printf", "format(…)"),
    ("json_extract", "CAST(x AS jsonb) ->> 'key'"),
    ("json_valid", "a CHECK with a validating function"),
    ("date", "to_char(…)"),
    ("datetime", "to_char(…)"),
    ("strftime", "to_char(…)"),
    ("julianday", "extract(epoch FROM …)"),
    ("unixepoch", "extract(epoch FROM …)"),
    ("glob", "x ~ 'regex'"),
    ("hex", "encode(x, 'hex')"),
    ("unhex", "decode(x, 'hex')"),
    ("randomblob", "gen_random_bytes(n)"),
    ("zeroblob", "a bytea literal"),
    ("typeof", "pg_typeof(x)"),
    ("changes", "the affected row count (:execrows)"),
    ("total_changes", "the affected row count (:execrows)"),
    ("last_insert_rowid", "INSERT … RETURNING id"),
    ("likelihood", "the plain condition"),
    ("likely", "the plain condition"),
    ("unlikely", "the plain condition"),
    ("bm25", "ts_rank_cd(…)"),
    ("snippet", "ts_headline(…)"),
    ("highlight", "ts_headline(…)"),
];

fn leftmost(e: &SetExpr) -> &SetExpr {
    match e {
        SetExpr::SetOperation { left, .. } => leftmost(left),
        other => other,
    }
}

/// The elements of a row value `(a, b, …)`, looking through redundant parentheses.
fn row_items(e: &Expr) -> Option<&[Expr]> {
    match e {
        Expr::Tuple(items) => Some(items),
        Expr::Nested(inner) => row_items(inner),
        _ => None,
    }
}

/// A scalar subquery operand, looking through redundant parentheses.
fn row_subquery(e: &Expr) -> Option<&Query> {
    match e {
        Expr::Subquery(q) => Some(q),
        Expr::Nested(inner) => row_subquery(inner),
        _ => None,
    }
}

fn fn_arg_expr(a: &FunctionArg) -> Option<&Expr> {
    match a {
        FunctionArg::Unnamed(FunctionArgExpr::Expr(e))
        | FunctionArg::Named {
            arg: FunctionArgExpr::Expr(e),
            ..
        }
        | FunctionArg::ExprNamed {
            arg: FunctionArgExpr::Expr(e),
            ..
        } => Some(e),
        _ => None,
    }
}

fn fn_args(f: &Function) -> Vec<Expr> {
    match &f.args {
        FunctionArguments::List(l) => l.args.iter().filter_map(fn_arg_expr).cloned().collect(),
        _ => Vec::new(),
    }
}

fn fn_pos(f: &Function) -> (u64, u64) {
    f.name
        .0
        .first()
        .and_then(|p| p.as_ident())
        .map_or((1, 1), ident_pos)
}

/// `sqlc.arg(x)` → `("arg", "x")`.
fn sqlc_fn(f: &Function) -> Option<(&'static str, ())> {
    let parts: Vec<&str> = f
        .name
        .0
        .iter()
        .filter_map(|p| p.as_ident())
        .map(|i| i.value.as_str())
        .collect();
    match parts.as_slice() {
        [s, k] if s.eq_ignore_ascii_case("sqlc") => match k.to_ascii_lowercase().as_str() {
            "arg" => Some(("arg", ())),
            "narg" => Some(("narg", ())),
            "slice" => Some(("slice", ())),
            _ => None,
        },
        _ => None,
    }
}

fn find_col<'r>(rel: &'r Rel, name: &str) -> Option<&'r Col> {
    rel.cols
        .iter()
        .find(|c| c.name.eq_ignore_ascii_case(name))
        .or_else(|| {
            if matches!(
                name.to_ascii_lowercase().as_str(),
                "rowid" | "oid" | "_rowid_"
            ) {
                rel.cols.iter().find(|c| c.hidden && c.name == "rowid")
            } else {
                None
            }
        })
}

fn typed_col(c: &Col) -> Typed {
    Typed {
        ty: c.ty,
        nullable: c.nullable,
        col: Some(c.name.clone()),
        agg: false,
    }
}

fn no_column_msg(name: &str, rels: &[Rel]) -> String {
    let cands: Vec<&str> = rels
        .iter()
        .flat_map(|r| r.cols.iter().filter(|c| !c.hidden).map(|c| c.name.as_str()))
        .collect();
    let s = suggestion(name, cands);
    match rels {
        [] => format!("no column \"{name}\" (no table in scope){s}"),
        [one] => format!("no column \"{name}\" in \"{}\"{s}", one.table),
        many => {
            let names: Vec<String> = many.iter().map(|r| format!("\"{}\"", r.table)).collect();
            format!("no column \"{name}\" in {}{s}", names.join(", "))
        }
    }
}

struct Override {
    name: String,
    nullable: Option<bool>,
    rust: Option<String>,
}

/// `n!`, `n?`, `x: serde_json::Value`, `x?: Type`.
fn parse_override(alias: &str) -> Override {
    let (name, rust) = match alias.split_once(':') {
        Some((n, t)) if !t.trim().is_empty() => (n.trim(), Some(t.trim().to_string())),
        _ => (alias.trim(), None),
    };
    if let Some(n) = name.strip_suffix('!') {
        Override {
            name: n.to_string(),
            nullable: Some(false),
            rust,
        }
    } else if let Some(n) = name.strip_suffix('?') {
        Override {
            name: n.to_string(),
            nullable: Some(true),
            rust,
        }
    } else {
        Override {
            name: name.to_string(),
            nullable: None,
            rust,
        }
    }
}

/// `createdAt` / `Created At` → `created_at`; keeps only identifier characters.
pub fn snake_case(s: &str) -> String {
    let mut out = String::new();
    let mut prev_lower = false;
    for ch in s.chars() {
        if ch.is_ascii_uppercase() {
            if prev_lower {
                out.push('_');
            }
            out.push(ch.to_ascii_lowercase());
            prev_lower = false;
        } else if ch.is_ascii_alphanumeric() {
            out.push(ch);
            prev_lower = ch.is_ascii_lowercase() || ch.is_ascii_digit();
        } else {
            if !out.ends_with('_') && !out.is_empty() {
                out.push('_');
            }
            prev_lower = false;
        }
    }
    let out = out.trim_matches('_').to_string();
    if out.chars().next().is_some_and(|c| c.is_ascii_digit()) {
        format!("_{out}")
    } else {
        out
    }
}
