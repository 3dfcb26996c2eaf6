//! Invalid inputs: each must be rejected with an exact, positioned message, and every bad
//! query of a run must be reported together.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use sqlgen::SourceFile;

const SCHEMA: &str = "\
CREATE TABLE sessions (
    id TEXT PRIMARY KEY,
    title TEXT NOT NULL,
    created_at INTEGER NOT NULL
);
CREATE TABLE messages (
    id TEXT PRIMARY KEY,
    session_id TEXT NOT NULL REFERENCES sessions (id),
    created_at INTEGER NOT NULL
);
";

fn file(display: &str, text: &str) -> SourceFile {
    SourceFile {
        display: display.to_string(),
        text: text.to_string(),
    }
}

/// Runs the generator on one query file and returns the error lines.
fn errors(queries: &str) -> Vec<String> {
    errors_with(SCHEMA, queries)
}

fn errors_with(schema: &str, queries: &str) -> Vec<String> {
    let m = [file("sql/migrations/V1__init.sql", schema)];
    let q = [file("sql/queries/sessions.sql", queries)];
    match sqlgen::analyze_sources(&m, &q) {
        Ok(a) => panic!("expected errors, got {:#?}", a.explain()),
        Err(d) => d.to_string().lines().map(str::to_string).collect(),
    }
}

#[test]
fn unknown_column_suggests_the_nearest() {
    let e = errors(
        "-- name: CreateSession :one\n\
         INSERT INTO sessions (id, titel, created_at)\n\
         VALUES (?, ?, ?)\n\
         RETURNING *;\n",
    );
    assert_eq!(
        e,
        [
            "sql/queries/sessions.sql:2:27: CreateSession: no column \"titel\" in \"sessions\"; did you mean \"title\"?",
        ]
    );
}

#[test]
fn unknown_column_in_where_and_unknown_table() {
    let e = errors(
        "-- name: A :many\nSELECT id FROM sessions WHERE craeted_at > 0;\n\
         -- name: B :many\nSELECT id FROM sesions;\n",
    );
    assert_eq!(
        e,
        [
            "sql/queries/sessions.sql:2:31: A: no column \"craeted_at\" in \"sessions\"; did you mean \"created_at\"?",
            "sql/queries/sessions.sql:4:16: B: no table \"sesions\"; did you mean \"sessions\"?",
        ]
    );
}

#[test]
fn missing_and_unknown_kind() {
    let e = errors("-- name: A\nSELECT 1 AS x;\n-- name: B :mny\nSELECT 1 AS x;\n");
    assert_eq!(
        e,
        [
            "sql/queries/sessions.sql:1:11: A: missing :kind after the query name (one of :one, :many, :exec, :execrows, :execlastid)",
            "sql/queries/sessions.sql:3:12: B: unknown kind \":mny\"; did you mean \":many\"?",
        ]
    );
}

/// `custom_plan` is the one word a query may have after its kind, and only for PostgreSQL:
/// a project of SQLite alone refuses it.
#[test]
fn words_after_the_kind() {
    let e = errors(
        "-- name: A :one custom_plan\nSELECT 1 AS x;\n\
         -- name: B :one custom_plna\nSELECT 1 AS x;\n\
         -- name: C :one now\nSELECT 1 AS x;\n",
    );
    assert_eq!(
        e,
        [
            "sql/queries/sessions.sql:3:17: B: unexpected \"custom_plna\" after the query kind; did you mean \"custom_plan\"?",
            "sql/queries/sessions.sql:5:17: C: unexpected \"now\" after the query kind",
        ]
    );
    let e = errors("-- name: A :one custom_plan\nSELECT 1 AS x;\n");
    assert_eq!(
        e,
        [
            "sql/queries/sessions.sql:1:1: A: custom_plan is for PostgreSQL's plan cache; SQLite keeps no generic plans, so a query only SQLite runs cannot ask for it"
        ]
    );
}

#[test]
fn duplicate_query_name() {
    let e = errors("-- name: A :one\nSELECT 1 AS x;\n\n-- name: A :one\nSELECT 2 AS x;\n");
    assert_eq!(
        e,
        [
            "sql/queries/sessions.sql:4:10: A: duplicate query name \"A\" (first defined at sql/queries/sessions.sql:1)"
        ]
    );
}

#[test]
fn one_on_dml_without_returning() {
    let e = errors("-- name: Rename :one\nUPDATE sessions SET title = ? WHERE id = ?;\n");
    assert_eq!(
        e,
        [
            "sql/queries/sessions.sql:2:1: Rename: :one needs a statement that returns rows; add RETURNING or use :exec/:execrows"
        ]
    );
    let e = errors("-- name: Count :exec\nSELECT COUNT(*) AS n FROM sessions;\n");
    assert_eq!(
        e,
        ["sql/queries/sessions.sql:2:1: Count: :exec query returns columns; use :one or :many"]
    );
}

#[test]
fn slice_outside_in() {
    let e = errors("-- name: S :many\nSELECT id FROM sessions WHERE id = sqlc.slice(ids);\n");
    assert_eq!(
        e,
        [
            "sql/queries/sessions.sql:2:36: S: sqlc.slice(ids) can only be the whole list of an IN (…)"
        ]
    );
    let e =
        errors("-- name: S :many\nSELECT id FROM sessions WHERE id IN ('x', sqlc.slice(ids));\n");
    assert_eq!(
        e,
        [
            "sql/queries/sessions.sql:2:43: S: sqlc.slice(ids) can only be the whole list of an IN (…)"
        ]
    );
}

#[test]
fn mixing_anonymous_and_numbered() {
    let e = errors("-- name: M :many\nSELECT id FROM sessions\nWHERE id = ?1 AND title = ?;\n");
    assert_eq!(
        e,
        ["sql/queries/sessions.sql:3:27: M: cannot mix \"?\" and \"?N\" parameters in one query"]
    );
}

#[test]
fn ambiguous_column() {
    let e = errors(
        "-- name: J :many\nSELECT created_at FROM sessions s JOIN messages m ON m.session_id = s.id;\n",
    );
    assert_eq!(
        e,
        [
            "sql/queries/sessions.sql:2:8: J: ambiguous column \"created_at\" (in \"s\" and \"m\"); qualify it"
        ]
    );
}

#[test]
fn unknown_alias() {
    let e = errors("-- name: J :many\nSELECT x.id FROM sessions s;\n");
    assert_eq!(
        e,
        ["sql/queries/sessions.sql:2:8: J: no table or alias \"x\" in scope"]
    );
}

#[test]
fn syntax_errors_have_positions() {
    let e = errors("-- name: Bad :many\nSELECT id\nFROM sessions\nWHERE id = = 1;\n");
    assert_eq!(
        e,
        ["sql/queries/sessions.sql:4:12: Bad: syntax error: expected: an expression, found: ="]
    );
    let e = errors("-- name: Trunc :many\nSELECT id FROM sessions WHERE title = 'abc\n");
    assert_eq!(
        e,
        ["sql/queries/sessions.sql:2:39: Trunc: syntax error: unterminated string literal"]
    );
}

#[test]
fn uninferable_parameter_asks_for_cast() {
    let e = errors("-- name: Echo :one\nSELECT @value AS v;\n");
    assert_eq!(
        e,
        [
            "sql/queries/sessions.sql:2:8: Echo: cannot infer the type of parameter @value; write CAST(@value AS TEXT) (or INTEGER, REAL, BLOB)"
        ]
    );
}

#[test]
fn wrong_value_count_and_two_statements() {
    let e = errors(
        "-- name: Ins :exec\nINSERT INTO sessions (id, title) VALUES (?, ?, ?);\n\
         -- name: Two :exec\nDELETE FROM sessions; DELETE FROM messages;\n",
    );
    assert_eq!(
        e,
        [
            "sql/queries/sessions.sql:2:41: Ins: 3 values for 2 columns",
            "sql/queries/sessions.sql:4:23: Two: a query must be a single statement; found 2",
        ]
    );
}

#[test]
fn sql_before_first_annotation_and_empty_query() {
    let e = errors("SELECT 1;\n-- name: Empty :exec\n\n-- name: Ok :one\nSELECT 1 AS x;\n");
    assert_eq!(
        e,
        [
            "sql/queries/sessions.sql:1:1: sql before the first \"-- name: Name :kind\" annotation",
            "sql/queries/sessions.sql:2:1: Empty: query has no sql",
        ]
    );
}

#[test]
fn every_bad_query_in_every_file_is_reported() {
    let m = [file("sql/migrations/V1__init.sql", SCHEMA)];
    let q = [
        file(
            "sql/queries/a.sql",
            "-- name: A :one\nSELECT nope FROM sessions;\n-- name: B :one\nSELECT 1 AS ok;\n",
        ),
        file(
            "sql/queries/b.sql",
            "-- name: C :many\nSELECT id FROM nowhere;\n-- name: A :one\nSELECT 1 AS x;\n",
        ),
    ];
    let e = sqlgen::analyze_sources(&m, &q).unwrap_err();
    assert_eq!(
        e.to_string(),
        "sql/queries/a.sql:2:8: A: no column \"nope\" in \"sessions\"\n\
         sql/queries/b.sql:2:16: C: no table \"nowhere\"\n\
         sql/queries/b.sql:3:1: A: duplicate query name \"A\" (first defined at sql/queries/a.sql:1)"
    );
    assert_eq!(e.len(), 3);
}

#[test]
fn migration_errors() {
    let e = errors_with(
        "CREATE TABLE t (a TEXT);\nALTER TABLE tt ADD COLUMN b TEXT;\n\
         CREATE TRIGGER IF NOT EXISTS x AFTER INSERT ON t BEGIN SELECT 1; END;\n\
         CREATE VIRTUAL TABLE v USING rtree(id, a, b);\n",
        "-- name: A :one\nSELECT 1 AS x;\n",
    );
    assert_eq!(
        e,
        [
            "sql/migrations/V1__init.sql:2:1: no table \"tt\"",
            "sql/migrations/V1__init.sql:3:1: CREATE TRIGGER IF NOT EXISTS is not supported (sqlparser cannot parse it); drop IF NOT EXISTS, each migration runs once",
            "sql/migrations/V1__init.sql:4:1: unsupported virtual table module \"rtree\"; only fts5 is known",
        ]
    );
}

#[test]
fn conflicting_parameter_types() {
    let e =
        errors("-- name: P :many\nSELECT id FROM sessions WHERE title = @x OR created_at = @x;\n");
    assert_eq!(
        e,
        ["sql/queries/sessions.sql:2:58: P: parameter @x is used as TEXT and as INTEGER"]
    );
}

#[test]
fn generated_type_names_must_not_clash() {
    let e = errors("-- name: Session :one\nSELECT id, title FROM sessions WHERE id = ?;\n");
    assert_eq!(
        e,
        [
            "sql/queries/sessions.sql:1:1: Session: generated type \"SessionRow\" clashes with the model of table \"sessions\"; rename the query"
        ]
    );
}

#[test]
fn is_comparisons_accept_optional_parameters() {
    let m = [file("sql/migrations/V1__init.sql", SCHEMA)];
    let q = [file(
        "sql/queries/q.sql",
        "-- name: ByTitle :many\nSELECT id FROM sessions WHERE title IS ? AND id IS NOT @other;\n",
    )];
    let a = sqlgen::analyze_sources(&m, &q).unwrap();
    let p: Vec<_> = a.queries[0]
        .params
        .iter()
        .map(|p| (p.name.as_str(), p.nullable))
        .collect();
    assert_eq!(p, [("title", true), ("other", true)]);
}

#[test]
fn row_values_must_pair_up() {
    let e = errors(
        "-- name: Size :many\n\
         SELECT id FROM sessions WHERE (created_at, id) < (@created_at, @id, @x);\n\
         -- name: Sub :many\n\
         SELECT id FROM sessions WHERE (created_at, id) IN (SELECT created_at FROM messages);\n\
         -- name: Scalar :many\n\
         SELECT id FROM sessions WHERE (created_at, id) = @x;\n",
    );
    assert_eq!(
        e,
        [
            "sql/queries/sessions.sql:2:51: Size: row values of different sizes: 2 and 3 elements",
            "sql/queries/sessions.sql:4:52: Sub: row value has 2 elements but the subquery returns 1 column",
            "sql/queries/sessions.sql:6:50: Scalar: a row value can only be compared with a row value of the same size or a subquery",
        ]
    );
}

#[test]
fn row_value_parameters_take_their_partners_types() {
    let m = [file("sql/migrations/V1__init.sql", SCHEMA)];
    let q = [file(
        "sql/queries/q.sql",
        "-- name: Page :many\n\
         SELECT id FROM messages WHERE (created_at, id) > (?, ?) \
         AND (session_id, created_at) = (SELECT id, created_at FROM sessions WHERE title = ?) \
         AND (created_at, id) BETWEEN (@lo, @lo_id) AND (@hi, @hi_id) \
         AND (?, ?) IN (SELECT created_at, id FROM sessions);\n",
    )];
    let a = sqlgen::analyze_sources(&m, &q).unwrap();
    let p: Vec<_> = a.queries[0]
        .params
        .iter()
        .map(|p| (p.name.as_str(), p.ty.sql_name(), p.nullable))
        .collect();
    assert_eq!(
        p,
        [
            ("created_at", "INTEGER", false),
            ("id", "TEXT", false),
            ("title", "TEXT", false),
            ("lo", "INTEGER", false),
            ("lo_id", "TEXT", false),
            ("hi", "INTEGER", false),
            ("hi_id", "TEXT", false),
            ("created_at_2", "INTEGER", false),
            ("id_2", "TEXT", false),
        ]
    );
}

#[test]
fn is_parameters_are_optional_unless_required_elsewhere() {
    let m = [file("sql/migrations/V1__init.sql", SCHEMA)];
    let q = [file(
        "sql/queries/q.sql",
        "-- name: A :many\n\
         SELECT id FROM sessions WHERE title IS NOT sqlc.arg(t) AND id IS (@i) \
         AND (title, id) IS NOT (?, ?);\n\
         -- name: B :many\n\
         SELECT id FROM sessions WHERE title IS @t OR id = @t;\n",
    )];
    let a = sqlgen::analyze_sources(&m, &q).unwrap();
    let params = |i: usize| -> Vec<(String, bool)> {
        a.queries[i]
            .params
            .iter()
            .map(|p| (p.name.clone(), p.nullable))
            .collect()
    };
    let owned = |v: &[(&str, bool)]| -> Vec<(String, bool)> {
        v.iter().map(|(n, b)| (n.to_string(), *b)).collect()
    };
    assert_eq!(
        params(0),
        owned(&[("t", true), ("i", true), ("title", true), ("id", true)])
    );
    assert_eq!(params(1), owned(&[("t", false)]));
}

#[test]
fn negated_glob_and_match_parse() {
    let schema = format!(
        "{SCHEMA}CREATE VIRTUAL TABLE docs USING fts5(body);\n\
         CREATE TABLE codes (c TEXT NOT NULL CHECK (c NOT GLOB '*[^0-9]*'));\n"
    );
    let m = [file("sql/migrations/V1__init.sql", &schema)];
    let q = [file(
        "sql/queries/q.sql",
        "-- name: A :many\n\
         SELECT id, title NOT GLOB 'x*' AS plain FROM sessions WHERE title NOT GLOB @p \
         AND title NOT LIKE @l ESCAPE '\\' AND title NOT REGEXP @r;\n\
         -- name: B :many\n\
         SELECT rowid FROM docs WHERE docs NOT MATCH @q;\n",
    )];
    let a = sqlgen::analyze_sources(&m, &q).unwrap();
    assert_eq!(
        a.explain(),
        [
            "A :many (p: &str, l: &str, r: &str) -> Vec<ARow> { id: String, plain: bool }",
            "B :many (q: &str) -> Vec<i64>",
        ]
    );
    // Errors elsewhere in such a statement are still reported where they are.
    let e = errors(
        "-- name: A :many\nSELECT id FROM sessions WHERE title NOT GLOB @p AND (;\n\
         -- name: B :many\nSELECT id FROM sessions WHERE title NOT GLOB @p AND titel = 1;\n",
    );
    assert_eq!(
        e,
        [
            "sql/queries/sessions.sql:2:54: A: syntax error: expected: an expression, found: ;",
            "sql/queries/sessions.sql:4:53: B: no column \"titel\" in \"sessions\"; did you mean \"title\"?",
        ]
    );
}

#[test]
fn limits_are_positioned_and_explained() {
    let chain = vec!["id = ?"; 151].join(" OR ");
    let parens = format!("{}1{}", "(".repeat(60), ")".repeat(60));
    let e = errors(&format!(
        "-- name: Long :many\nSELECT id FROM sessions WHERE {chain};\n\
         -- name: Deep :one\nSELECT {parens} AS n;\n"
    ));
    assert_eq!(
        e,
        [
            "sql/queries/sessions.sql:2:784: Long: statement too complex: more than 150 operators; \
             split it into smaller queries or move parts into a CTE",
            "sql/queries/sessions.sql:4:67: Deep: expression nested too deeply (the limit is about \
             50 levels of parentheses or subqueries); flatten it or move parts into a CTE",
        ]
    );
}

#[test]
fn pragmas_in_migrations_are_skipped() {
    let schema = format!(
        "PRAGMA ignore_check_constraints = ON;\n{SCHEMA}PRAGMA ignore_check_constraints = OFF;\n\
         PRAGMA foreign_keys = off;\npragma user_version = 3;\nPRAGMA main.optimize;\n"
    );
    let m = [file("sql/migrations/V1__init.sql", &schema)];
    let q = [file(
        "sql/queries/q.sql",
        "-- name: Count :one\nSELECT COUNT(*) AS n FROM messages;\n",
    )];
    let a = sqlgen::analyze_sources(&m, &q).unwrap();
    assert_eq!(a.explain(), ["Count :one () -> i64"]);
}

/// A real error (unknown table or column) is the only report: the parameters next to it
/// cannot be typed because of it, and asking for a CAST would send the author the wrong way.
#[test]
fn no_cast_advice_after_a_real_error() {
    let e = errors(
        "-- name: A :exec\nINSERT INTO sesions (id, title) VALUES (?, ?);\n\
         -- name: B :many\nSELECT id FROM sessions WHERE nope = ?;\n\
         -- name: C :many\nSELECT id FROM sessions AS s WHERE x.title = @t;\n",
    );
    assert_eq!(
        e,
        [
            "sql/queries/sessions.sql:2:13: A: no table \"sesions\"; did you mean \"sessions\"?",
            "sql/queries/sessions.sql:4:31: B: no column \"nope\" in \"sessions\"",
            "sql/queries/sessions.sql:6:36: C: no table or alias \"x\" in scope",
        ]
    );
}
