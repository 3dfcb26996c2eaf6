//! The README's promise to a newcomer: `-- name: CountRows :one` +
//! `SELECT COUNT(*) AS n FROM <any table>;` yields `count_rows(&conn) -> rusqlite::Result<i64>`.
//! (The golden's `CountSessions` covers one table; this covers every table of the fixture schema.)
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::Path;

use sqlgen::SourceFile;

#[test]
fn count_rows_on_any_table_returns_i64() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/migrations");
    let migrations = sqlgen::catalog::read_migrations(&dir).unwrap();
    let catalog = sqlgen::analyze_sources(&migrations, &[]).unwrap().catalog;
    assert!(catalog.tables.len() >= 3);
    for table in &catalog.tables {
        let query = SourceFile {
            display: "sql/queries/extra.sql".into(),
            text: format!(
                "-- name: CountRows :one\nSELECT COUNT(*) AS n FROM {};\n",
                table.name
            ),
        };
        let code = sqlgen::generate_sources(&migrations, &[query])
            .unwrap_or_else(|d| panic!("{}: {d}", table.name));
        assert!(
            code.contains(
                "pub fn count_rows(conn: &rusqlite::Connection) -> rusqlite::Result<i64> {"
            ),
            "{}: no count_rows(&conn) -> Result<i64> in\n{code}",
            table.name
        );
    }
}
