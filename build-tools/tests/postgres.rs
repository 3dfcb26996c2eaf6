//! Against a real PostgreSQL server: the PostgreSQL migrations apply, and every generated
//! PostgreSQL statement prepares with the parameter types sqlgen declares and returns the
//! column types the generated code reads (so `try_get` can never meet a type it refuses).
//!
//! Needs a server: run `.ci/with-postgres cargo test -p scribe-sqlgen --test postgres --
//! --ignored`, which starts a throw-away cluster and sets SCRIBE_TEST_POSTGRES.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::Path;

use postgres::types::Type;
use postgres::{Client, NoTls};

const NEEDS_SERVER: &str = "SCRIBE_TEST_POSTGRES is unset: run through .ci/with-postgres";

/// A fresh database on the test server, dropped by name at the next run's start.
fn fresh_database(name: &str) -> Client {
    let url = std::env::var("SCRIBE_TEST_POSTGRES").expect(NEEDS_SERVER);
    let mut admin = Client::connect(&url, NoTls).unwrap();
    admin
        .batch_execute(&format!("DROP DATABASE IF EXISTS {name}"))
        .unwrap();
    admin
        .batch_execute(&format!("CREATE DATABASE {name}"))
        .unwrap();
    Client::connect(&format!("{url} dbname={name}"), NoTls).unwrap()
}

fn expected_type(ty: sqlgen::SqlType, rust: Option<&str>) -> Vec<Type> {
    match rust {
        Some("String") => return vec![Type::TEXT, Type::VARCHAR, Type::BPCHAR, Type::NAME],
        Some("bool") => return vec![Type::BOOL],
        Some("i64") => return vec![Type::INT8],
        Some("f64") => return vec![Type::FLOAT8],
        _ => {}
    }
    match ty {
        sqlgen::SqlType::Integer => vec![Type::INT8],
        sqlgen::SqlType::Real => vec![Type::FLOAT8],
        sqlgen::SqlType::Text => vec![Type::TEXT, Type::VARCHAR, Type::BPCHAR, Type::NAME],
        sqlgen::SqlType::Blob => vec![Type::BYTEA],
        sqlgen::SqlType::Bool => vec![Type::BOOL],
        sqlgen::SqlType::Int4 => vec![Type::INT4],
        sqlgen::SqlType::Int2 => vec![Type::INT2],
        sqlgen::SqlType::Float4 => vec![Type::FLOAT4],
        _ => Vec::new(),
    }
}

fn param_type(p: &sqlgen::Param) -> Type {
    let scalar = match p.ty {
        sqlgen::SqlType::Integer => Type::INT8,
        sqlgen::SqlType::Real => Type::FLOAT8,
        sqlgen::SqlType::Blob => Type::BYTEA,
        sqlgen::SqlType::Bool => Type::BOOL,
        sqlgen::SqlType::Int4 => Type::INT4,
        sqlgen::SqlType::Int2 => Type::INT2,
        sqlgen::SqlType::Float4 => Type::FLOAT4,
        _ => Type::TEXT,
    };
    if !p.slice {
        return scalar;
    }
    match scalar {
        Type::INT8 => Type::INT8_ARRAY,
        Type::FLOAT8 => Type::FLOAT8_ARRAY,
        Type::BOOL => Type::BOOL_ARRAY,
        _ => Type::TEXT_ARRAY,
    }
}

/// Applies `migrations` in order, then prepares every query of `project`; returns how many.
fn prepare_all(db: &str, migrations: &Path, queries: &Path) -> usize {
    let project = sqlgen::analyze_project(migrations, queries).unwrap_or_else(|d| panic!("{d}"));
    let pg = project
        .postgres
        .expect("a project with PostgreSQL migrations");
    let mut client = fresh_database(db);
    let mut files: Vec<_> = std::fs::read_dir(migrations.join("postgres"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    files.sort_by_key(|p| {
        let name = p.file_name().unwrap().to_string_lossy().into_owned();
        name[1..]
            .split_once("__")
            .unwrap()
            .0
            .parse::<u64>()
            .unwrap()
    });
    for f in &files {
        client
            .batch_execute(&std::fs::read_to_string(f).unwrap())
            .unwrap_or_else(|e| panic!("{}: {e:?}", f.display()));
    }
    let mut problems = Vec::new();
    for q in &pg.queries {
        let types: Vec<Type> = q.params.iter().map(param_type).collect();
        let stmt = match client.prepare_typed(&q.sql, &types) {
            Ok(s) => s,
            Err(e) => {
                problems.push(format!("{}: PostgreSQL cannot prepare it: {e:?}", q.name));
                continue;
            }
        };
        if stmt.columns().len() != q.columns.len() {
            problems.push(format!(
                "{}: PostgreSQL returns {} columns, sqlgen inferred {}",
                q.name,
                stmt.columns().len(),
                q.columns.len()
            ));
            continue;
        }
        for (c, ours) in stmt.columns().iter().zip(&q.columns) {
            let want = expected_type(ours.ty, ours.rust_type.as_deref());
            if !want.contains(c.type_()) {
                problems.push(format!(
                    "{}: column {} is {} in PostgreSQL, sqlgen reads {:?}",
                    q.name,
                    c.name(),
                    c.type_(),
                    want
                ));
            }
        }
    }
    assert!(problems.is_empty(), "{}", problems.join("\n"));
    pg.queries.len()
}

#[test]
#[ignore = "needs a PostgreSQL server: .ci/with-postgres cargo test -p scribe-sqlgen --test postgres -- --ignored"]
fn repository_statements_prepare_on_postgres() {
    let sql = Path::new(env!("CARGO_MANIFEST_DIR")).join("../sql");
    let n = prepare_all(
        "sqlgen_repository",
        &sql.join("migrations"),
        &sql.join("queries"),
    );
    assert!(n > 50, "only {n} queries");
}

#[test]
#[ignore = "needs a PostgreSQL server: .ci/with-postgres cargo test -p scribe-sqlgen --test postgres -- --ignored"]
fn fixture_statements_prepare_on_postgres() {
    let f = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/dual");
    let n = prepare_all("sqlgen_fixture", &f.join("migrations"), &f.join("queries"));
    assert!(n >= 5, "only {n} queries");
}
