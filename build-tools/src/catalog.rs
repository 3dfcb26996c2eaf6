//! Schema catalog: replays the ordered migrations (`V{n}__name.sql`) into tables, views and
//! FTS5 virtual tables with typed, nullability-aware columns.

use std::path::Path;

use sqlparser::ast::{
    AlterTableOperation, ColumnOption, CreateTable, ObjectName, ObjectType, RenameTableNameKind,
    Statement, TableConstraint,
};
use sqlparser::keywords::Keyword;
use sqlparser::tokenizer::{Token, TokenWithSpan};

use crate::diag::{Diagnostic, suggestion};
use crate::query::{SourceFile, parse_tokens, tokenize};

/// A column or expression type as seen from Rust: SQLite's storage classes, plus the
/// PostgreSQL types that have no SQLite twin (4- and 2-byte integers, 4-byte floats, and the
/// types sqlgen knows but cannot bind or read: NUMERIC, JSON/JSONB, and the rest).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum SqlType {
    /// `INTEGER` affinity (SQLite) or `BIGINT` (PostgreSQL) → `i64`.
    Integer,
    /// `REAL` affinity → `f64`.
    Real,
    /// `TEXT` affinity → `String` / `&str`.
    Text,
    /// `BLOB` → `Vec<u8>` / `&[u8]`.
    Blob,
    /// Declared `BOOLEAN` → `bool`.
    Bool,
    /// Unknown or dynamic → `rusqlite::types::Value` (SQLite only).
    Any,
    /// PostgreSQL `INTEGER` / `INT4` → `i32`.
    Int4,
    /// PostgreSQL `SMALLINT` / `INT2` → `i16`.
    Int2,
    /// PostgreSQL `REAL` / `FLOAT4` → `f32`.
    Float4,
    /// PostgreSQL `NUMERIC`: no Rust type here; cast it.
    Numeric,
    /// PostgreSQL `JSON` / `JSONB`: no Rust type here; cast it to TEXT.
    Json,
    /// Any other PostgreSQL type (timestamps, tsvector, arrays …): no Rust type here.
    Other,
}

impl SqlType {
    /// Maps a declared column type to a type using SQLite's affinity rules (plus BOOLEAN).
    pub fn from_decl(decl: &str) -> SqlType {
        let d = decl.to_ascii_uppercase();
        if d.contains("BOOL") {
            SqlType::Bool
        } else if d.contains("INT") {
            SqlType::Integer
        } else if d.contains("CHAR")
            || d.contains("CLOB")
            || d.contains("TEXT")
            || d.contains("JSON")
            || d.contains("DATE")
            || d.contains("TIME")
            || d.contains("UUID")
        {
            SqlType::Text
        } else if d.contains("BLOB") || d.contains("BYTEA") {
            SqlType::Blob
        } else if d.contains("REAL") || d.contains("FLOA") || d.contains("DOUB") {
            SqlType::Real
        } else {
            SqlType::Any
        }
    }

    /// Maps a declared PostgreSQL type (a column or a CAST target).
    pub fn from_pg_decl(decl: &str) -> SqlType {
        let d = decl.to_ascii_uppercase();
        let d = d.trim();
        let base = d.split(['(', '[']).next().unwrap_or(d).trim();
        if d.ends_with(']') || d.starts_with("ARRAY") {
            return SqlType::Other;
        }
        match base {
            "BIGINT" | "INT8" | "BIGSERIAL" | "SERIAL8" => SqlType::Integer,
            "INTEGER" | "INT" | "INT4" | "SERIAL" | "SERIAL4" => SqlType::Int4,
            "SMALLINT" | "INT2" | "SMALLSERIAL" | "SERIAL2" => SqlType::Int2,
            "DOUBLE PRECISION" | "FLOAT8" | "FLOAT" | "DOUBLE" => SqlType::Real,
            "REAL" | "FLOAT4" => SqlType::Float4,
            "NUMERIC" | "DECIMAL" | "DEC" => SqlType::Numeric,
            "TEXT" | "VARCHAR" | "CHARACTER VARYING" | "CHAR" | "CHARACTER" | "BPCHAR" | "NAME"
            | "CITEXT" => SqlType::Text,
            "BYTEA" => SqlType::Blob,
            "BOOLEAN" | "BOOL" => SqlType::Bool,
            "JSON" | "JSONB" => SqlType::Json,
            _ => SqlType::Other,
        }
    }

    /// Maps a declared type in `dialect`.
    pub fn from_decl_in(decl: &str, dialect: crate::Dialect) -> SqlType {
        match dialect {
            crate::Dialect::Sqlite => SqlType::from_decl(decl),
            crate::Dialect::Postgres => SqlType::from_pg_decl(decl),
        }
    }

    /// Owned Rust type used in row structs.
    pub fn rust_owned(self) -> &'static str {
        match self {
            SqlType::Integer => "i64",
            SqlType::Real => "f64",
            SqlType::Text => "String",
            SqlType::Blob => "Vec<u8>",
            SqlType::Bool => "bool",
            SqlType::Any => "rusqlite::types::Value",
            SqlType::Int4 => "i32",
            SqlType::Int2 => "i16",
            SqlType::Float4 => "f32",
            // Reported before code is generated (see `has_rust_type`).
            SqlType::Numeric | SqlType::Json | SqlType::Other => "String",
        }
    }

    /// Whether values of this type can be bound and read in `dialect`.
    pub fn has_rust_type(self, dialect: crate::Dialect) -> bool {
        match self {
            SqlType::Numeric | SqlType::Json | SqlType::Other => false,
            SqlType::Any => dialect == crate::Dialect::Sqlite,
            _ => true,
        }
    }

    /// The `postgres::types::Type` constant of a parameter of this type.
    pub fn pg_type(self) -> &'static str {
        match self {
            SqlType::Integer => "INT8",
            SqlType::Real => "FLOAT8",
            SqlType::Text => "TEXT",
            SqlType::Blob => "BYTEA",
            SqlType::Bool => "BOOL",
            SqlType::Int4 => "INT4",
            SqlType::Int2 => "INT2",
            SqlType::Float4 => "FLOAT4",
            SqlType::Any | SqlType::Numeric | SqlType::Json | SqlType::Other => "UNKNOWN",
        }
    }

    /// SQL spelling used in messages.
    pub fn sql_name(self) -> &'static str {
        match self {
            SqlType::Integer => "INTEGER",
            SqlType::Real => "REAL",
            SqlType::Text => "TEXT",
            SqlType::Blob => "BLOB",
            SqlType::Bool => "BOOLEAN",
            SqlType::Any => "ANY",
            SqlType::Int4 => "INTEGER (4 bytes)",
            SqlType::Int2 => "SMALLINT",
            SqlType::Float4 => "REAL (4 bytes)",
            SqlType::Numeric => "NUMERIC",
            SqlType::Json => "JSONB",
            SqlType::Other => "a type with no Rust mapping",
        }
    }

    /// The widest type of this type's family: what a parameter cast to it is bound as (the
    /// cast narrows it on the server), e.g. `CAST(@n AS INTEGER)` binds an `i64`.
    pub fn widest(self) -> SqlType {
        match self {
            SqlType::Int4 | SqlType::Int2 => SqlType::Integer,
            SqlType::Float4 | SqlType::Numeric => SqlType::Real,
            SqlType::Json | SqlType::Other => SqlType::Text,
            other => other,
        }
    }

    /// Whether this is a number type.
    pub fn is_numeric(self) -> bool {
        matches!(
            self,
            SqlType::Integer
                | SqlType::Real
                | SqlType::Int4
                | SqlType::Int2
                | SqlType::Float4
                | SqlType::Numeric
        )
    }
}

/// Where a table or column was defined.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Origin {
    /// File as shown.
    pub file: String,
    /// 1-based line.
    pub line: u64,
    /// 1-based column.
    pub col: u64,
}

impl std::fmt::Display for Origin {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}:{}:{}", self.file, self.line, self.col)
    }
}

/// A column of a table, view or virtual table.
#[derive(Debug, Clone, PartialEq)]
pub struct Column {
    /// Column name as declared.
    pub name: String,
    /// Rust-facing type.
    pub ty: SqlType,
    /// Whether the column may hold NULL.
    pub nullable: bool,
    /// Hidden columns (`rowid`, FTS5 `rank`) are reachable by name but not part of `*`.
    pub hidden: bool,
    /// Where it was declared (a CREATE TABLE or an ALTER TABLE … ADD COLUMN).
    pub origin: Origin,
}

/// What kind of relation a catalog entry is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TableKind {
    /// An ordinary table; gets a model struct.
    Table,
    /// A virtual table (FTS5).
    Virtual,
    /// A view.
    View,
}

/// A relation of the schema after all migrations.
#[derive(Debug, Clone, PartialEq)]
pub struct Table {
    /// Table name.
    pub name: String,
    /// Table, view or virtual table.
    pub kind: TableKind,
    /// Columns in schema order, hidden ones last.
    pub columns: Vec<Column>,
    /// Why a view's columns could not be inferred (reported when a query uses it).
    pub broken: Option<String>,
    /// Where it was created.
    pub origin: Origin,
}

impl Table {
    /// Visible columns, i.e. what `*` expands to.
    pub fn visible(&self) -> impl Iterator<Item = &Column> {
        self.columns.iter().filter(|c| !c.hidden)
    }

    /// Case-insensitive column lookup.
    pub fn column(&self, name: &str) -> Option<&Column> {
        self.columns
            .iter()
            .find(|c| c.name.eq_ignore_ascii_case(name))
    }
}

/// A function created by a migration (PostgreSQL `CREATE FUNCTION`), so queries calling it
/// get its declared result type.
#[derive(Debug, Clone, PartialEq)]
pub struct Function {
    /// Its name.
    pub name: String,
    /// Its declared result type.
    pub returns: SqlType,
}

/// The schema the migrations build.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Catalog {
    /// The dialect the migrations are written in.
    pub dialect: crate::Dialect,
    /// Relations in creation order.
    pub tables: Vec<Table>,
    /// Functions the migrations created.
    pub functions: Vec<Function>,
    /// Statements read but not modelled (extensions, text search configurations, `DO`
    /// blocks …): each says what was skipped and why, so nothing is silently misread.
    pub notes: Vec<Diagnostic>,
}

impl Catalog {
    /// Case-insensitive relation lookup.
    pub fn table(&self, name: &str) -> Option<&Table> {
        self.tables
            .iter()
            .find(|t| t.name.eq_ignore_ascii_case(name))
    }

    fn table_mut(&mut self, name: &str) -> Option<&mut Table> {
        self.tables
            .iter_mut()
            .find(|t| t.name.eq_ignore_ascii_case(name))
    }

    /// The declared result type of a function the migrations created.
    pub fn function(&self, name: &str) -> Option<SqlType> {
        self.functions
            .iter()
            .rev()
            .find(|f| f.name.eq_ignore_ascii_case(name))
            .map(|f| f.returns)
    }

    /// `; did you mean "x"?` over relation names.
    pub fn suggest_table(&self, name: &str) -> String {
        suggestion(name, self.tables.iter().map(|t| t.name.as_str()))
    }
}

/// Reads `V{n}__name.sql` files from `dir`, ordered by version number.
pub fn read_migrations(dir: &Path) -> Result<Vec<SourceFile>, Diagnostic> {
    let entries = std::fs::read_dir(dir).map_err(|e| Diagnostic {
        file: crate::display_path(dir),
        line: 1,
        col: 1,
        query: None,
        message: format!("cannot read migrations directory: {e}"),
    })?;
    let mut files = Vec::new();
    for entry in entries.flatten() {
        let path = entry.path();
        let Some(fname) = path.file_name().and_then(|f| f.to_str()) else {
            continue;
        };
        if !fname.ends_with(".sql") {
            continue;
        }
        let version = fname
            .strip_prefix('V')
            .and_then(|rest| rest.split_once("__"))
            .and_then(|(v, _)| v.parse::<u64>().ok());
        let Some(version) = version else {
            return Err(Diagnostic {
                file: crate::display_path(&path),
                line: 1,
                col: 1,
                query: None,
                message: "migration file name must look like V1__name.sql".into(),
            });
        };
        files.push((version, crate::query::read_source(&path, "migration")?));
    }
    files.sort_by_key(|(v, _)| *v);
    for pair in files.windows(2) {
        if pair[0].0 == pair[1].0 {
            return Err(Diagnostic {
                file: pair[1].1.display.clone(),
                line: 1,
                col: 1,
                query: None,
                message: format!(
                    "duplicate migration version {} (also {})",
                    pair[1].0, pair[0].1.display
                ),
            });
        }
    }
    Ok(files.into_iter().map(|(_, f)| f).collect())
}

/// Replays migrations in order; returns the catalog and every problem found.
pub fn build(files: &[SourceFile], dialect: crate::Dialect) -> (Catalog, Vec<Diagnostic>) {
    let mut cat = Catalog {
        dialect,
        ..Catalog::default()
    };
    let pg = dialect == crate::Dialect::Postgres;
    let mut diags = Vec::new();
    for file in files {
        let mut notes = Vec::new();
        let mut err = |line: u64, col: u64, message: String| {
            diags.push(Diagnostic {
                file: file.display.clone(),
                line,
                col,
                query: None,
                message,
            })
        };
        let tokens = match tokenize(&file.text, dialect) {
            Ok(t) => t,
            Err((line, col, msg)) => {
                err(line, col, msg);
                continue;
            }
        };
        for stmt in split_statements(&tokens) {
            let Some(first) = stmt.iter().find(|t| !is_trivia(&t.token)) else {
                continue;
            };
            let (line, col) = (first.span.start.line, first.span.start.column);
            let origin = Origin {
                file: file.display.clone(),
                line,
                col,
            };
            let words = leading_keywords(stmt, 5);
            if !pg
                && words.first() == Some(&Keyword::CREATE)
                && words.get(1) == Some(&Keyword::VIRTUAL)
            {
                match virtual_table(stmt, &origin) {
                    Ok(t) => {
                        if cat.table(&t.name).is_some() {
                            err(line, col, format!("table \"{}\" already exists", t.name));
                        } else {
                            cat.tables.push(t);
                        }
                    }
                    Err(m) => err(line, col, m),
                }
                continue;
            }
            // PRAGMAs never change the schema, and sqlparser rejects valid ones such as
            // `PRAGMA ignore_check_constraints = ON`.
            if !pg && words.first() == Some(&Keyword::PRAGMA) {
                continue;
            }
            if pg && let Some(what) = pg_unmodelled(stmt) {
                notes.push(Diagnostic {
                    file: file.display.clone(),
                    line,
                    col,
                    query: None,
                    message: format!("note: skipped {what}"),
                });
                continue;
            }
            if !pg && is_trigger_if_not_exists(&words) {
                err(
                    line,
                    col,
                    "CREATE TRIGGER IF NOT EXISTS is not supported (sqlparser cannot parse it); \
                     drop IF NOT EXISTS, each migration runs once"
                        .into(),
                );
                continue;
            }
            if words.contains(&Keyword::VIEW)
                && let Err((l, c, m)) = crate::query::check_complexity(stmt)
            {
                err(l, c, m);
                continue;
            }
            let parsed = match parse_tokens(stmt, dialect) {
                Ok(p) => p,
                Err((l, c, m)) => {
                    err(l, c, m);
                    continue;
                }
            };
            for s in parsed {
                if let Err(m) = apply(&mut cat, &s, &file.text, &origin) {
                    err(line, col, m);
                }
            }
        }
        cat.notes.extend(notes);
    }
    (cat, diags)
}

/// PostgreSQL statements sqlgen reads past without modelling them, with what they are.
/// They cannot change a table's columns; what they add (an extension's functions and
/// operators, a text search configuration) is typed as unknown where a query uses it.
fn pg_unmodelled(stmt: &[TokenWithSpan]) -> Option<String> {
    let words: Vec<String> = stmt
        .iter()
        .filter(|t| !is_trivia(&t.token))
        .take(4)
        .map(|t| match &t.token {
            Token::Word(w) if w.quote_style.is_none() => w.value.to_ascii_uppercase(),
            _ => String::new(),
        })
        .collect();
    let w = |i: usize| words.get(i).map_or("", String::as_str);
    let what = match (w(0), w(1), w(2)) {
        ("DO", _, _) => "a DO block: sqlgen does not run procedural code",
        ("CREATE" | "DROP" | "ALTER", "EXTENSION", _) => {
            "an extension statement: its functions and operators are typed as unknown"
        }
        ("CREATE" | "DROP" | "ALTER", "TEXT", "SEARCH") => {
            "a text search configuration statement: configurations do not change tables"
        }
        ("COMMENT", "ON", _) => "a COMMENT: comments do not change tables",
        ("GRANT" | "REVOKE", _, _) => "a privilege statement: privileges do not change tables",
        _ => return None,
    };
    let head: Vec<&str> = words.iter().take(3).map(String::as_str).collect();
    Some(format!("{} ({what})", head.join(" ").trim()))
}

fn is_trivia(t: &Token) -> bool {
    matches!(t, Token::Whitespace(_))
}

fn leading_keywords(stmt: &[TokenWithSpan], n: usize) -> Vec<Keyword> {
    stmt.iter()
        .filter(|t| !is_trivia(&t.token))
        .take(n)
        .map(|t| match &t.token {
            Token::Word(w) => w.keyword,
            _ => Keyword::NoKeyword,
        })
        .collect()
}

fn is_trigger_if_not_exists(words: &[Keyword]) -> bool {
    let mut i = 0;
    if words.first() != Some(&Keyword::CREATE) {
        return false;
    }
    i += 1;
    if matches!(words.get(i), Some(Keyword::TEMP | Keyword::TEMPORARY)) {
        i += 1;
    }
    words.get(i) == Some(&Keyword::TRIGGER) && words.get(i + 1) == Some(&Keyword::IF)
}

/// Splits a token stream on top-level `;`, keeping trigger bodies (`BEGIN … END`) whole.
pub fn split_statements(tokens: &[TokenWithSpan]) -> Vec<&[TokenWithSpan]> {
    let mut out = Vec::new();
    let mut start = 0;
    let mut in_trigger = false;
    let mut in_body = false;
    let mut case_depth = 0usize;
    let mut significant = 0usize;
    for (i, t) in tokens.iter().enumerate() {
        if is_trivia(&t.token) {
            continue;
        }
        significant += 1;
        match &t.token {
            Token::Word(w) => {
                if significant <= 3 && w.keyword == Keyword::TRIGGER {
                    in_trigger = true;
                }
                if in_trigger && w.keyword == Keyword::BEGIN {
                    in_body = true;
                } else if in_body && w.keyword == Keyword::CASE {
                    case_depth += 1;
                } else if in_body && w.keyword == Keyword::END {
                    if case_depth > 0 {
                        case_depth -= 1;
                    } else {
                        in_body = false;
                        in_trigger = false;
                    }
                }
            }
            Token::SemiColon if !in_body => {
                out.push(&tokens[start..=i]);
                start = i + 1;
                significant = 0;
                in_trigger = false;
            }
            _ => {}
        }
    }
    if tokens[start..]
        .iter()
        .any(|t| !is_trivia(&t.token) && t.token != Token::EOF)
    {
        out.push(&tokens[start..]);
    }
    out
}

fn ident_name(name: &ObjectName) -> String {
    name.0
        .last()
        .and_then(|p| p.as_ident())
        .map(|i| i.value.clone())
        .unwrap_or_else(|| name.to_string())
}

fn rowid(origin: &Origin) -> Column {
    Column {
        name: "rowid".into(),
        ty: SqlType::Integer,
        nullable: false,
        hidden: true,
        origin: origin.clone(),
    }
}

fn ident_origin(origin: &Origin, id: &sqlparser::ast::Ident) -> Origin {
    if id.span.start.line == 0 {
        return origin.clone();
    }
    Origin {
        file: origin.file.clone(),
        line: id.span.start.line,
        col: id.span.start.column,
    }
}

fn create_table(
    ct: &CreateTable,
    dialect: crate::Dialect,
    origin: &Origin,
) -> Result<Table, String> {
    let mut pk_cols: Vec<String> = Vec::new();
    for c in &ct.constraints {
        if let TableConstraint::PrimaryKey(pk) = c {
            for ic in &pk.columns {
                pk_cols.push(ic.column.expr.to_string());
            }
        }
    }
    let mut columns = Vec::new();
    for cd in &ct.columns {
        let decl = cd.data_type.to_string();
        let decl = if decl.eq_ignore_ascii_case("unspecified") {
            String::new()
        } else {
            decl
        };
        let mut not_null = false;
        for opt in &cd.options {
            match &opt.option {
                ColumnOption::NotNull | ColumnOption::PrimaryKey(_) => not_null = true,
                // PostgreSQL identity columns are always NOT NULL.
                ColumnOption::Generated {
                    generation_expr: None,
                    ..
                } => not_null = true,
                _ => {}
            }
        }
        if pk_cols
            .iter()
            .any(|p| p.trim_matches('"').eq_ignore_ascii_case(&cd.name.value))
        {
            not_null = true;
        }
        if columns
            .iter()
            .any(|c: &Column| c.name.eq_ignore_ascii_case(&cd.name.value))
        {
            return Err(format!("duplicate column \"{}\"", cd.name.value));
        }
        columns.push(Column {
            name: cd.name.value.clone(),
            ty: SqlType::from_decl_in(&decl, dialect),
            nullable: !not_null,
            hidden: false,
            origin: ident_origin(origin, &cd.name),
        });
    }
    if ct.columns.is_empty() {
        return Err("CREATE TABLE without a column list is not supported; list the columns".into());
    }
    let without_rowid = ct
        .sqlite_table_options
        .options
        .iter()
        .any(|o| matches!(o, sqlparser::ast::SqliteTableOption::WithoutRowid));
    if !without_rowid && dialect == crate::Dialect::Sqlite {
        columns.push(rowid(origin));
    }
    Ok(Table {
        name: ident_name(&ct.name),
        kind: TableKind::Table,
        columns,
        broken: None,
        origin: origin.clone(),
    })
}

fn apply(cat: &mut Catalog, s: &Statement, text: &str, origin: &Origin) -> Result<(), String> {
    match s {
        Statement::CreateTable(ct) => {
            let t = create_table(ct, cat.dialect, origin)?;
            if cat.table(&t.name).is_some() {
                if ct.if_not_exists {
                    return Ok(());
                }
                return Err(format!("table \"{}\" already exists", t.name));
            }
            cat.tables.push(t);
        }
        Statement::AlterTable(at) => {
            let name = ident_name(&at.name);
            let suggest = cat.suggest_table(&name);
            if cat.table(&name).is_none() {
                return Err(format!("no table \"{name}\"{suggest}"));
            }
            for op in &at.operations {
                alter(cat, &name, op, origin)?;
            }
        }
        Statement::CreateView(cv) => {
            let name = ident_name(&cv.name);
            if cat.table(&name).is_some() {
                if cv.if_not_exists {
                    return Ok(());
                }
                return Err(format!("view \"{name}\" already exists"));
            }
            let (columns, broken) = match crate::infer::view_columns(cat, &cv.query, text, origin) {
                Ok(mut cols) => {
                    for (c, vc) in cols.iter_mut().zip(&cv.columns) {
                        c.name = vc.name.value.clone();
                    }
                    (cols, None)
                }
                Err(m) => (Vec::new(), Some(m)),
            };
            cat.tables.push(Table {
                name,
                kind: TableKind::View,
                columns,
                broken,
                origin: origin.clone(),
            });
        }
        Statement::CreateIndex(ci) => {
            let name = ident_name(&ci.table_name);
            if cat.table(&name).is_none() {
                let suggest = cat.suggest_table(&name);
                return Err(format!("no table \"{name}\"{suggest}"));
            }
        }
        Statement::CreateTrigger(tr) => {
            let name = ident_name(&tr.table_name);
            if cat.table(&name).is_none() {
                let suggest = cat.suggest_table(&name);
                return Err(format!("no table \"{name}\"{suggest}"));
            }
        }
        Statement::CreateFunction(cf) => {
            if let Some(ret) = &cf.return_type {
                let decl = ret.to_string();
                if !decl.eq_ignore_ascii_case("trigger") {
                    cat.functions.push(Function {
                        name: ident_name(&cf.name),
                        returns: SqlType::from_decl_in(&decl, cat.dialect),
                    });
                }
            }
        }
        Statement::Drop {
            object_type,
            names,
            if_exists,
            ..
        } => {
            if matches!(object_type, ObjectType::Table | ObjectType::View) {
                for n in names {
                    let name = ident_name(n);
                    let before = cat.tables.len();
                    cat.tables.retain(|t| !t.name.eq_ignore_ascii_case(&name));
                    if before == cat.tables.len() && !if_exists {
                        return Err(format!("no table \"{name}\""));
                    }
                }
            }
        }
        _ => {}
    }
    Ok(())
}

fn alter(
    cat: &mut Catalog,
    name: &str,
    op: &AlterTableOperation,
    origin: &Origin,
) -> Result<(), String> {
    let dialect = cat.dialect;
    let new_name = match op {
        AlterTableOperation::RenameTable { table_name } => {
            let (RenameTableNameKind::As(n) | RenameTableNameKind::To(n)) = table_name;
            Some(ident_name(n))
        }
        _ => None,
    };
    if let Some(new_name) = &new_name
        && cat.table(new_name).is_some()
    {
        return Err(format!("table \"{new_name}\" already exists"));
    }
    let Some(t) = cat.table_mut(name) else {
        return Err(format!("no table \"{name}\""));
    };
    let suggest = |t: &Table, c: &str| suggestion(c, t.columns.iter().map(|c| c.name.as_str()));
    match op {
        AlterTableOperation::AddColumn { column_def, .. } => {
            if t.column(&column_def.name.value).is_some() {
                return Err(format!("duplicate column \"{}\"", column_def.name.value));
            }
            let not_null = column_def.options.iter().any(|o| {
                matches!(
                    o.option,
                    ColumnOption::NotNull | ColumnOption::PrimaryKey(_)
                )
            });
            let col = Column {
                name: column_def.name.value.clone(),
                ty: SqlType::from_decl_in(&column_def.data_type.to_string(), dialect),
                nullable: !not_null,
                hidden: false,
                origin: ident_origin(origin, &column_def.name),
            };
            let pos = t
                .columns
                .iter()
                .position(|c| c.hidden)
                .unwrap_or(t.columns.len());
            t.columns.insert(pos, col);
        }
        AlterTableOperation::RenameColumn {
            old_column_name,
            new_column_name,
        } => {
            let s = suggest(t, &old_column_name.value);
            let Some(c) = t
                .columns
                .iter_mut()
                .find(|c| c.name.eq_ignore_ascii_case(&old_column_name.value))
            else {
                return Err(format!(
                    "no column \"{}\" in \"{name}\"{s}",
                    old_column_name.value
                ));
            };
            c.name = new_column_name.value.clone();
        }
        AlterTableOperation::DropColumn { column_names, .. } => {
            for cn in column_names {
                let s = suggest(t, &cn.value);
                let before = t.columns.len();
                t.columns
                    .retain(|c| c.hidden || !c.name.eq_ignore_ascii_case(&cn.value));
                if before == t.columns.len() {
                    return Err(format!("no column \"{}\" in \"{name}\"{s}", cn.value));
                }
            }
        }
        AlterTableOperation::RenameTable { .. } => {
            if let Some(n) = new_name {
                t.name = n;
            }
        }
        // Constraints (a foreign key added once both tables exist) change no column.
        AlterTableOperation::AddConstraint { .. } | AlterTableOperation::DropConstraint { .. } => {}
        other => return Err(format!("unsupported ALTER TABLE operation: {other}")),
    }
    Ok(())
}

/// Reads `CREATE VIRTUAL TABLE name USING fts5(a, b UNINDEXED, tokenize='x', content=…)`.
fn virtual_table(stmt: &[TokenWithSpan], origin: &Origin) -> Result<Table, String> {
    let toks: Vec<&Token> = stmt
        .iter()
        .map(|t| &t.token)
        .filter(|t| !is_trivia(t) && **t != Token::SemiColon)
        .collect();
    // CREATE VIRTUAL TABLE [IF NOT EXISTS] name USING module ( args )
    let mut i = 3;
    if matches!(toks.get(i), Some(Token::Word(w)) if w.keyword == Keyword::IF) {
        i += 3;
    }
    let mut name = match toks.get(i) {
        Some(Token::Word(w)) => w.value.clone(),
        _ => return Err("expected a table name after CREATE VIRTUAL TABLE".into()),
    };
    // schema-qualified: main.name
    if matches!(toks.get(i + 1), Some(Token::Period)) {
        if let Some(Token::Word(w)) = toks.get(i + 2) {
            name = w.value.clone();
        }
        i += 2;
    }
    if !matches!(toks.get(i + 1), Some(Token::Word(w)) if w.keyword == Keyword::USING) {
        return Err("expected USING after the virtual table name".into());
    }
    let module = match toks.get(i + 2) {
        Some(Token::Word(w)) => w.value.to_ascii_lowercase(),
        _ => return Err("expected a module name after USING".into()),
    };
    if module != "fts5" && module != "fts4" && module != "fts3" {
        return Err(format!(
            "unsupported virtual table module \"{module}\"; only fts5 is known"
        ));
    }
    if toks.get(i + 3) != Some(&&Token::LParen) {
        return Err(format!("expected ( after USING {module}"));
    }
    let mut args: Vec<Vec<&Token>> = vec![Vec::new()];
    let mut depth = 0usize;
    let mut closed = false;
    for t in &toks[(i + 4).min(toks.len())..] {
        match t {
            Token::LParen => depth += 1,
            Token::RParen if depth == 0 => {
                closed = true;
                break;
            }
            Token::RParen => depth -= 1,
            Token::Comma if depth == 0 => {
                args.push(Vec::new());
                continue;
            }
            _ => {}
        }
        if let Some(last) = args.last_mut() {
            last.push(t);
        }
    }
    if !closed {
        return Err(format!("unterminated USING {module}(…) argument list"));
    }
    let mut columns = Vec::new();
    for arg in args {
        if arg.is_empty() || arg.iter().any(|t| matches!(t, Token::Eq)) {
            continue;
        }
        let col = match arg.first() {
            Some(Token::Word(w)) => w.value.clone(),
            Some(Token::SingleQuotedString(s)) => s.clone(),
            _ => return Err(format!("unexpected argument in USING {module}(…)")),
        };
        columns.push(Column {
            name: col,
            ty: SqlType::Text,
            nullable: true,
            hidden: false,
            origin: origin.clone(),
        });
    }
    if columns.is_empty() {
        return Err(format!("virtual table \"{name}\" declares no columns"));
    }
    columns.push(rowid(origin));
    columns.push(Column {
        name: "rank".into(),
        ty: SqlType::Real,
        nullable: true,
        hidden: true,
        origin: origin.clone(),
    });
    columns.push(Column {
        name: name.clone(),
        ty: SqlType::Any,
        nullable: true,
        hidden: true,
        origin: origin.clone(),
    });
    Ok(Table {
        name,
        kind: TableKind::Virtual,
        columns,
        broken: None,
        origin: origin.clone(),
    })
}
