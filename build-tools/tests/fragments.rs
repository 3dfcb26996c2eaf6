//! Fragments (`-- fragment: name(x, …)` defined once, used as `sqlgen.name(…)`): what the
//! expansion produces in each dialect, and every misuse rejected with an exact, positioned
//! message (at the use site, with the place in the fragment when the cause is in its body).
#![allow(clippy::unwrap_used, clippy::expect_used)]

use sqlgen::{Dialect, SourceFile};

const SCHEMA: &str = "\
CREATE TABLE counters (
    id TEXT PRIMARY KEY,
    n BIGINT NOT NULL,
    m BIGINT NOT NULL,
    label TEXT NOT NULL
);
";

fn file(display: &str, text: &str) -> SourceFile {
    SourceFile {
        display: display.to_string(),
        text: text.to_string(),
    }
}

fn migrations() -> [SourceFile; 1] {
    [file("sql/migrations/V1__init.sql", SCHEMA)]
}

/// The generated SQL of each query, in one dialect, from shared files and overrides.
fn sql_in(dialect: Dialect, shared: &[SourceFile], overrides: &[SourceFile]) -> Vec<String> {
    match sqlgen::analyze_layers(dialect, &migrations(), shared, overrides) {
        Ok(a) => a.queries.iter().map(|q| q.sql.clone()).collect(),
        Err(d) => panic!("{d}"),
    }
}

fn sql(queries: &str) -> Vec<String> {
    sql_in(Dialect::Sqlite, &[file("sql/queries/q.sql", queries)], &[])
}

/// The error lines of one query file (SQLite).
fn errors(queries: &str) -> Vec<String> {
    errors_in(&[file("sql/queries/q.sql", queries)])
}

fn errors_in(files: &[SourceFile]) -> Vec<String> {
    match sqlgen::analyze_sources(&migrations(), files) {
        Ok(a) => panic!("expected errors, got {:#?}", a.explain()),
        Err(d) => d.to_string().lines().map(str::to_string).collect(),
    }
}

const SATURATING: &str = "\
-- fragment: saturating_add(x, d)
-- Adds d to x, at most the largest BIGINT.
CASE WHEN d <= 0 THEN x + d
        WHEN x > 9223372036854775807 - d THEN 9223372036854775807
        ELSE x + d END

";

/// The body replaces the call with each parameter replaced by its argument, byte for byte
/// (line breaks and indentation as written), before parameters are numbered; an argument
/// may hold parameters and commas inside parentheses.
#[test]
fn a_call_becomes_the_body_with_its_arguments() {
    let q = format!(
        "{SATURATING}-- name: Add :exec\n\
         UPDATE counters\n\
         SET n = sqlgen.saturating_add(n, CAST(@n AS BIGINT)),\n    \
         m = sqlgen.saturating_add(m, coalesce(@m, 0, length(@label)))\n\
         WHERE id = @id;\n"
    );
    assert_eq!(
        sql(&q),
        ["UPDATE counters\n\
          SET n = CASE WHEN CAST(?1 AS BIGINT) <= 0 THEN n + CAST(?1 AS BIGINT)\n        \
          WHEN n > 9223372036854775807 - CAST(?1 AS BIGINT) THEN 9223372036854775807\n        \
          ELSE n + CAST(?1 AS BIGINT) END,\n    \
          m = CASE WHEN coalesce(?2, 0, length(?3)) <= 0 THEN m + coalesce(?2, 0, length(?3))\n        \
          WHEN m > 9223372036854775807 - coalesce(?2, 0, length(?3)) THEN 9223372036854775807\n        \
          ELSE m + coalesce(?2, 0, length(?3)) END\n\
          WHERE id = ?4"]
    );
    let a = sqlgen::analyze_sources(&migrations(), &[file("sql/queries/q.sql", &q)]).unwrap();
    assert_eq!(
        a.explain(),
        ["Add :exec (n: i64, m: Option<i64>, label: &str, id: &str) -> ()"]
    );
}

/// An argument or body that is not a single operand is parenthesised, so precedence cannot
/// change; a name, a call, a CAST, a parameter or a CASE … END is left as it is. Only bare
/// parameter names are replaced: not `t.x`, `@x`, or a function `x(…)`.
#[test]
fn operands_keep_their_grouping() {
    let q = "-- fragment: twice(x)\nx + x\n\n\
             -- fragment: scaled(x, label)\nlength(label) * x + counters.x\n\n\
             -- name: P :one\n\
             SELECT sqlgen.twice(n - 1) * 2 AS a, sqlgen.twice(CAST(@k AS BIGINT)) AS b,\n       \
             sqlgen.scaled(-m, label) AS c, sqlgen.twice(CASE WHEN n > 0 THEN n ELSE 0 END) AS d,\n       \
             sqlgen.twice(NOT (n > 0)) AS e\n\
             FROM (SELECT n, m, label, 1 AS x FROM counters) AS counters;\n";
    assert_eq!(
        sql(q),
        [
            "SELECT ((n - 1) + (n - 1)) * 2 AS a, (CAST(?1 AS BIGINT) + CAST(?1 AS BIGINT)) AS b,\n       \
          (length(label) * (-m) + counters.x) AS c, (CASE WHEN n > 0 THEN n ELSE 0 END + CASE WHEN n > 0 THEN n ELSE 0 END) AS d,\n       \
          ((NOT (n > 0)) + (NOT (n > 0))) AS e\n\
          FROM (SELECT n, m, label, 1 AS x FROM counters) AS counters"
        ]
    );
}

/// A body may call other fragments (and an argument may be a call); each expands in turn.
#[test]
fn fragments_may_use_other_fragments() {
    let q = "-- fragment: inc(x)\nx + 1\n\
             -- fragment: inc2(x)\nsqlgen.inc(sqlgen.inc(x))\n\
             -- name: P :one\nSELECT sqlgen.inc2(n) AS a, sqlgen.inc(sqlgen.inc2(@k)) AS b FROM counters;\n";
    assert_eq!(
        sql(q),
        ["SELECT ((n + 1) + 1) AS a, (((?1 + 1) + 1) + 1) AS b FROM counters"]
    );
}

/// A dialect directory replaces a shared fragment of the same name for that dialect only,
/// so shared queries stay shared while each engine gets its own spelling.
#[test]
fn a_dialect_replaces_a_shared_fragment() {
    let shared = [file(
        "sql/queries/q.sql",
        "-- fragment: clamp(x)\nmin(x, 100)\n\n\
         -- name: Clamped :one\nSELECT CAST(sqlgen.clamp(n) AS BIGINT) AS c FROM counters WHERE id = @id;\n",
    )];
    let pg = [file(
        "sql/queries/postgres/fragments.sql",
        "-- fragment: clamp(x)\nleast(x, 100)\n",
    )];
    assert_eq!(
        sql_in(Dialect::Sqlite, &shared, &[]),
        ["SELECT CAST(min(n, 100) AS BIGINT) AS c FROM counters WHERE id = ?1"]
    );
    assert_eq!(
        sql_in(Dialect::Postgres, &shared, &pg),
        ["SELECT CAST(least(n, 100) AS BIGINT) AS c FROM counters WHERE id = $1"]
    );
}

/// In a project, a fragment is used when either dialect uses it: a shared one both dialects
/// replace, or a misspelt replacement, is reported as unused.
#[test]
fn unused_fragments_count_every_dialect() {
    let shared = "-- fragment: clamp(x)\nmin(x, 100)\n\n\
                  -- name: Clamped :one\nSELECT CAST(sqlgen.clamp(n) AS BIGINT) AS c FROM counters WHERE id = @id;\n";
    assert_eq!(
        project_errors(&[
            (
                "q.sql",
                "-- fragment: clamp(x)\nmin(x, 100)\n\n\
                 -- fragment: spare(x)\nx\n\n\
                 -- name: Clamped :one\nSELECT CAST(sqlgen.clamp(n) AS BIGINT) AS c FROM counters WHERE id = @id;\n",
            ),
            (
                "postgres/fragments.sql",
                "-- fragment: clamp(x)\nleast(x, 100)\n\n-- fragment: clammp(x)\nleast(x, 100)\n",
            ),
            ("sqlite/fragments.sql", "-- fragment: spare(x)\n(x)\n"),
        ]),
        [
            "queries/postgres/fragments.sql:4:14: clammp: fragment \"clammp\" is never used; remove it",
            "queries/q.sql:4:14: spare: fragment \"spare\" is never used; remove it",
            "queries/sqlite/fragments.sql:1:14: spare: fragment \"spare\" is never used; remove it",
        ]
    );
    // Used by SQLite only (PostgreSQL replaces the query), the shared fragment is used.
    let postgres_query = (
        "postgres/q.sql",
        "-- name: Clamped :one\nSELECT CAST(n AS BIGINT) AS c FROM counters WHERE id = @id;\n",
    );
    assert_eq!(
        project_errors(&[
            ("q.sql", shared),
            (
                "postgres/fragments.sql",
                "-- fragment: clamp(x)\nleast(x, 100)\n"
            ),
            postgres_query,
        ]),
        ["queries/postgres/fragments.sql:1:14: clamp: fragment \"clamp\" is never used; remove it"]
    );
    assert_eq!(
        project_errors(&[("q.sql", shared), postgres_query]),
        Vec::<String>::new()
    );
}

/// A project in a temp dir: the schema in both dialects' migrations and `files` (path below
/// `queries/`, text); the diagnostics, paths relative to the temp dir.
fn project_errors(files: &[(&str, &str)]) -> Vec<String> {
    let dir = tempfile::tempdir().unwrap();
    let (queries, migrations) = (dir.path().join("queries"), dir.path().join("migrations"));
    for d in ["sqlite", "postgres"] {
        std::fs::create_dir_all(queries.join(d)).unwrap();
        std::fs::create_dir_all(migrations.join(d)).unwrap();
        std::fs::write(migrations.join(d).join("V1__init.sql"), SCHEMA).unwrap();
    }
    for (name, text) in files {
        std::fs::write(queries.join(name), text).unwrap();
    }
    match sqlgen::analyze_project(&migrations, &queries) {
        Ok(_) => Vec::new(),
        Err(d) => d
            .items
            .iter()
            .map(|i| {
                i.to_string()
                    .replace(&format!("{}/", dir.path().display()), "")
            })
            .collect(),
    }
}

/// Positions the parity check reports (a parameter's first use) are the query's own, also
/// for a parameter in a fragment's argument.
#[test]
fn parity_positions_are_the_querys() {
    let e = project_errors(&[
        (
            "q.sql",
            "-- name: V :one\nSELECT sqlgen.f(@x) AS v FROM counters LIMIT 1;\n",
        ),
        ("sqlite/f.sql", "-- fragment: f(x)\nlength(x)\n"),
        (
            "postgres/f.sql",
            "-- fragment: f(x)\nCAST(x AS BIGINT) + 1\n",
        ),
    ]);
    assert_eq!(
        e,
        [
            "queries/q.sql:2:17: V: parameter \"x\" is &str in sqlite but i64 in postgres \
          (queries/q.sql:2:17)"
        ]
    );
}

#[test]
fn unknown_fragment_and_wrong_argument_count() {
    let e = errors(&format!(
        "{SATURATING}-- name: A :exec\nUPDATE counters SET n = sqlgen.saturating_ad(n, 1);\n\
         -- name: B :exec\nUPDATE counters SET n = sqlgen.saturating_add(n);\n\
         -- name: C :exec\nUPDATE counters SET n = sqlgen.saturating_add(n, 1, 2);\n\
         -- name: D :exec\nUPDATE counters SET n = sqlgen.saturating_add(n, );\n"
    ));
    assert_eq!(
        e,
        [
            "sql/queries/q.sql:8:25: A: no fragment \"saturating_ad\"; did you mean \"saturating_add\"?",
            "sql/queries/q.sql:10:25: B: sqlgen.saturating_add takes 2 arguments (x, d), found 1",
            "sql/queries/q.sql:12:25: C: sqlgen.saturating_add takes 2 arguments (x, d), found 3",
            "sql/queries/q.sql:14:25: D: argument 2 of sqlgen.saturating_add(…) is empty",
        ]
    );
}

/// `sqlgen.` is reserved: anything after it other than a call is an error, never SQL sent
/// to a database.
#[test]
fn sqlgen_prefix_is_reserved_for_calls() {
    let e = errors(&format!(
        "{SATURATING}-- name: A :one\nSELECT sqlgen.saturating_add AS x FROM counters;\n\
         -- name: B :one\nSELECT sqlgen.* FROM counters;\n\
         -- name: C :one\nSELECT sqlgen.saturating_add(n, (1) AS x FROM counters;\n"
    ));
    assert_eq!(
        e,
        [
            "sql/queries/q.sql:8:8: A: sqlgen.saturating_add is a fragment: call it as sqlgen.saturating_add(…)",
            "sql/queries/q.sql:10:8: B: \"sqlgen.\" is reserved for fragment calls, like sqlgen.name(x, …)",
            "sql/queries/q.sql:12:8: C: sqlgen.saturating_add( is never closed",
        ]
    );
}

#[test]
fn duplicate_fragment_in_one_layer() {
    let e = errors_in(&[
        file("sql/queries/a.sql", "-- fragment: f(x)\nx + 1\n"),
        file(
            "sql/queries/b.sql",
            "-- fragment:   f(x)\nx + 2\n-- name: A :one\nSELECT sqlgen.f(n) AS n FROM counters;\n",
        ),
    ]);
    assert_eq!(
        e,
        [
            "sql/queries/b.sql:1:16: f: duplicate fragment \"f\" (first defined at sql/queries/a.sql:1)"
        ]
    );
}

#[test]
fn a_fragment_cannot_use_itself() {
    let e = errors(
        "-- fragment: f(x)\nsqlgen.f(x) + 1\n\
         -- fragment: g(x)\nsqlgen.h(x)\n-- fragment: h(x)\n  1 + sqlgen.g(x)\n\
         -- name: A :one\nSELECT sqlgen.f(n) AS n FROM counters;\n\
         -- name: B :one\nSELECT sqlgen.g(n) AS n FROM counters;\n",
    );
    assert_eq!(
        e,
        [
            "sql/queries/q.sql:8:8: A: fragment \"f\" uses itself (f → f); a fragment cannot recurse \
             (in fragment \"f\" at sql/queries/q.sql:2:1)",
            "sql/queries/q.sql:10:8: B: fragment \"g\" uses itself (g → h → g); a fragment cannot \
             recurse (in fragment \"h\" at sql/queries/q.sql:6:7)",
        ]
    );
}

#[test]
fn bad_definitions() {
    let e = errors(
        "-- fragment:\nx\n\
         -- fragment: f\nx\n\
         -- fragment: f-g(x)\nx\n\
         -- fragment: f(x, x)\nx\n\
         -- fragment: f(x, end)\nx\n\
         -- fragment: f(x) y\nx\n\
         -- fragment: unused_param(x, d)\nx + 1\n\
         -- fragment: two_statements(x)\nx; x\n\
         -- fragment: empty(x)\n-- only a comment\n\
         -- name: A :one\nSELECT sqlgen.unused_param(n, 1) + sqlgen.two_statements(n) + sqlgen.empty(n) AS n FROM counters;\n",
    );
    assert_eq!(
        e,
        [
            "sql/queries/q.sql:1:13: missing fragment name after \"-- fragment:\"",
            "sql/queries/q.sql:3:15: missing parameter list after the fragment name; write f(x, …) or f()",
            "sql/queries/q.sql:5:14: invalid fragment name \"f-g\"; use letters, digits and _",
            "sql/queries/q.sql:7:19: duplicate parameter \"x\" of fragment \"f\"",
            "sql/queries/q.sql:9:19: parameter \"end\" of fragment \"f\" is an SQL keyword (every \"end\" \
             in the body would be replaced); choose another name",
            "sql/queries/q.sql:11:19: unexpected \"y\" after the parameter list",
            "sql/queries/q.sql:13:14: unused_param: parameter \"d\" is never used in the body of \
             fragment \"unused_param\"",
            "sql/queries/q.sql:16:2: two_statements: a fragment is one expression; remove the \";\"",
            "sql/queries/q.sql:17:14: empty: fragment has no sql",
        ]
    );
}

/// A problem in text that came from a fragment body is reported at the use site, with its
/// place in the fragment; one in an argument at the argument's own place.
#[test]
fn errors_in_expanded_text_point_at_the_query_and_the_fragment() {
    let e = errors_in(&[
        file(
            "sql/queries/fragments.sql",
            "-- fragment: bump(x)\nx + nope\n\n-- fragment: ok(x)\nx + 1\n",
        ),
        file(
            "sql/queries/q.sql",
            "-- name: A :exec\nUPDATE counters\nSET n = sqlgen.bump(n)\nWHERE id = @id;\n\
             -- name: B :exec\nUPDATE counters\nSET n = sqlgen.ok(titel), m = m + 1\nWHERE id = @id;\n\
             -- name: C :exec\nUPDATE counters\nSET n = sqlgen.ok(n) WHERE id = = 1;\n",
        ),
    ]);
    assert_eq!(
        e,
        [
            "sql/queries/q.sql:3:9: A: no column \"nope\" in \"counters\" (in fragment \"bump\" at \
             sql/queries/fragments.sql:2:5)",
            "sql/queries/q.sql:7:19: B: no column \"titel\" in \"counters\"",
            "sql/queries/q.sql:11:33: C: syntax error: expected: an expression, found: =",
        ]
    );
}

/// An anonymous `?` in an argument its parameter uses twice would become two parameters.
#[test]
fn an_anonymous_parameter_cannot_be_repeated() {
    let e = errors(&format!(
        "{SATURATING}-- name: A :exec\nUPDATE counters SET n = sqlgen.saturating_add(n, ?) WHERE id = ?;\n"
    ));
    assert_eq!(
        e,
        [
            "sql/queries/q.sql:8:25: A: argument 2 of sqlgen.saturating_add(…) has a \"?\" parameter \
          and \"d\" is used 4 times in the body, which would make 4 parameters; name it (@name)"
        ]
    );
    // Once is fine.
    assert_eq!(
        sql(&format!(
            "{SATURATING}-- fragment: inc(x)\nx + 1\n\
             -- name: A :exec\nUPDATE counters SET n = sqlgen.inc(?) WHERE id = ?;\n\
             -- name: B :exec\nUPDATE counters SET n = sqlgen.saturating_add(n, ?1) WHERE id = ?2;\n"
        ))[0],
        "UPDATE counters SET n = (?1 + 1) WHERE id = ?2"
    );
}

/// Fragments that use each other several times grow exponentially; expansion stops at a
/// limit instead of exhausting memory.
#[test]
fn expansion_is_bounded() {
    let mut q = String::from("-- fragment: f0(x)\nx + x\n");
    for i in 1..40 {
        q.push_str(&format!(
            "-- fragment: f{i}(x)\nsqlgen.f{}(x) + sqlgen.f{}(x)\n",
            i - 1,
            i - 1
        ));
    }
    q.push_str("-- name: A :one\nSELECT sqlgen.f39(n) AS n FROM counters;\n");
    let e = errors(&q);
    assert_eq!(
        e,
        [
            "sql/queries/q.sql:82:8: A: the fragments this query uses expand to more than 256 KiB \
          of SQL (in fragment \"f15\" at sql/queries/q.sql:32:17)"
        ]
    );
}
