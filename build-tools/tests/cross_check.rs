//! Cross-check against SQLite itself: every query (fixtures and the repository's real `sql/`)
//! is prepared on an in-memory database built from the migrations, and the column names and
//! counts SQLite reports must equal what sqlgen inferred.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::{Path, PathBuf};

use rusqlite::Connection;

fn apply_migrations(dir: &Path) -> Connection {
    let conn = Connection::open_in_memory().unwrap();
    let mut files: Vec<(u64, PathBuf)> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "sql"))
        .map(|p| {
            let name = p.file_name().unwrap().to_string_lossy().to_string();
            let v = name[1..].split_once("__").unwrap().0.parse().unwrap();
            (v, p)
        })
        .collect();
    files.sort();
    for (_, f) in files {
        conn.execute_batch(&std::fs::read_to_string(&f).unwrap())
            .unwrap_or_else(|e| panic!("{}: {e}", f.display()));
    }
    conn
}

fn cross_check(migrations: &Path, queries: &Path) -> usize {
    let analyzed = sqlgen::analyze_project(migrations, queries)
        .unwrap_or_else(|d| panic!("{d}"))
        .sqlite;
    let sqlite_dir = migrations.join("sqlite");
    let conn = apply_migrations(if sqlite_dir.is_dir() {
        &sqlite_dir
    } else {
        migrations
    });
    let mut problems = Vec::new();
    for q in &analyzed.queries {
        let stmt = match conn.prepare(&q.sql) {
            Ok(s) => s,
            Err(e) => {
                problems.push(format!("{}: sqlite cannot prepare it: {e}", q.name));
                continue;
            }
        };
        let sqlite: Vec<String> = stmt
            .column_names()
            .into_iter()
            .map(str::to_string)
            .collect();
        let ours: Vec<String> = q.columns.iter().map(|c| c.name.clone()).collect();
        if sqlite != ours {
            problems.push(format!(
                "{}: sqlite reports columns {sqlite:?}, sqlgen inferred {ours:?}",
                q.name
            ));
        }
        let fixed = q.params.iter().filter(|p| !p.slice).count();
        let markers = q.sql.matches("/*SLICE:").count();
        if stmt.parameter_count() != fixed + markers {
            problems.push(format!(
                "{}: sqlite sees {} parameters, sqlgen {fixed} (+{markers} list markers)",
                q.name,
                stmt.parameter_count()
            ));
        }
    }
    assert!(problems.is_empty(), "{}", problems.join("\n"));
    analyzed.queries.len()
}

#[test]
fn fixture_queries_match_sqlite() {
    let f = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures");
    assert!(cross_check(&f.join("migrations"), &f.join("queries")) >= 30);
}

#[test]
fn repository_queries_match_sqlite() {
    let sql = Path::new(env!("CARGO_MANIFEST_DIR")).join("../sql");
    let queries = sql.join("queries");
    let has_queries = std::fs::read_dir(&queries)
        .map(|d| {
            d.flatten()
                .any(|e| e.path().extension().is_some_and(|x| x == "sql"))
        })
        .unwrap_or(false);
    if !has_queries {
        eprintln!("skipping: {} has no query files yet", queries.display());
        return;
    }
    let n = cross_check(&sql.join("migrations"), &queries);
    assert!(n > 0);
}
