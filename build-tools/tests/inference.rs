//! What sqlgen infers for parameters and result columns in shapes a query author writes to
//! express intent: optional filters (`@p IS NULL OR …`) and aggregates that cannot be NULL.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use sqlgen::SourceFile;

const SCHEMA: &str = "\
CREATE TABLE sessions (
    id TEXT PRIMARY KEY,
    parent_id TEXT,
    title TEXT NOT NULL,
    created_at INTEGER NOT NULL
);
CREATE TABLE messages (
    id TEXT PRIMARY KEY,
    session_id TEXT NOT NULL REFERENCES sessions (id),
    cost REAL,
    created_at INTEGER NOT NULL
);
";

fn explain(queries: &str) -> Vec<String> {
    let m = [SourceFile {
        display: "sql/migrations/V1__init.sql".into(),
        text: SCHEMA.into(),
    }];
    let q = [SourceFile {
        display: "sql/queries/q.sql".into(),
        text: queries.into(),
    }];
    sqlgen::analyze_sources(&m, &q)
        .unwrap_or_else(|d| panic!("{d}"))
        .explain()
}

/// `@p IS NULL OR col = @p` is an optional filter: `None` must be passable, or the "no
/// filter" branch could never run.
#[test]
fn a_parameter_tested_with_is_null_is_optional() {
    let e = explain(
        "-- name: ByParent :many\n\
         SELECT id FROM sessions WHERE (@parent IS NULL OR parent_id = @parent);\n\
         -- name: ByCastParent :many\n\
         SELECT id FROM sessions WHERE (CAST(@parent AS TEXT) IS NULL OR parent_id = @parent);\n\
         -- name: ByNumbered :many\n\
         SELECT id FROM sessions WHERE (?1 IS NULL OR title = ?1) AND created_at > ?2;\n\
         -- name: ByNotNull :many\n\
         SELECT id FROM sessions WHERE (sqlc.arg(t) IS NOT NULL AND title = sqlc.arg(t)) OR id = @id;\n\
         -- name: Plain :many\n\
         SELECT id FROM sessions WHERE parent_id = @parent;\n",
    );
    assert_eq!(
        e,
        [
            "ByParent :many (parent: Option<&str>) -> Vec<String>",
            "ByCastParent :many (parent: Option<&str>) -> Vec<String>",
            "ByNumbered :many (title: Option<&str>, created_at: i64) -> Vec<String>",
            "ByNotNull :many (t: Option<&str>, id: &str) -> Vec<String>",
            "Plain :many (parent: &str) -> Vec<String>",
        ]
    );
}

/// Within a GROUP BY group (never empty) or a window frame holding the current row, an
/// aggregate of a NOT NULL column is never NULL; elsewhere it stays optional.
#[test]
fn aggregates_over_nonempty_groups_of_not_null_columns_are_not_optional() {
    let e = explain(
        "-- name: PerSession :many\n\
         SELECT session_id, sum(created_at) AS total, max(created_at) AS latest,\n\
                min(created_at) AS first, avg(created_at) AS mean,\n\
                group_concat(id) AS ids, sum(cost) AS cost\n\
         FROM messages GROUP BY session_id;\n\
         -- name: Running :many\n\
         SELECT id, sum(created_at) OVER (PARTITION BY session_id ORDER BY created_at) AS running,\n\
                max(created_at) OVER (ORDER BY created_at ROWS BETWEEN 2 PRECEDING AND CURRENT ROW) AS recent,\n\
                sum(created_at) OVER (ORDER BY created_at ROWS BETWEEN 2 PRECEDING AND 1 PRECEDING) AS before\n\
         FROM messages;\n\
         -- name: Whole :one\n\
         SELECT max(created_at) AS latest FROM messages;\n\
         -- name: Filtered :many\n\
         SELECT session_id, max(created_at) FILTER (WHERE cost > 0) AS paid FROM messages GROUP BY session_id;\n\
         -- name: Joined :many\n\
         SELECT s.id, max(m.created_at) AS latest FROM sessions AS s\n\
         LEFT JOIN messages AS m ON m.session_id = s.id GROUP BY s.id;\n",
    );
    assert_eq!(
        e,
        [
            "PerSession :many () -> Vec<PerSessionRow> { session_id: String, total: i64, latest: i64, first: i64, mean: f64, ids: String, cost: Option<f64> }",
            "Running :many () -> Vec<RunningRow> { id: String, running: i64, recent: i64, before: Option<i64> }",
            "Whole :one () -> Option<i64>",
            "Filtered :many () -> Vec<FilteredRow> { session_id: String, paid: Option<i64> }",
            "Joined :many () -> Vec<JoinedRow> { id: String, latest: Option<i64> }",
        ]
    );
}
