//! Throwaway check: the query plan of every generated SQLite statement with `LIMIT ?N`,
//! with the LIMIT value bound (SQLite 3.51 plans with it, and re-prepares the statement
//! at every new binding) against the same statement under
//! `SQLITE_DBCONFIG_ENABLE_QPSG` (planned without bound values, prepared once).
//! Usage: qpsg_plans crates/db/generated/queries.rs <DIR> (reads the `*_SQL` constants)
#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

use rusqlite::config::DbConfig;
use rusqlite::types::Value;
use rusqlite::{Connection, params_from_iter};

fn plan(conn: &Connection, sql: &str, limit_param: usize) -> Vec<String> {
    let mut stmt = conn.prepare(&format!("EXPLAIN QUERY PLAN {sql}")).unwrap();
    let n = stmt.parameter_count();
    let values: Vec<Value> = (1..=n)
        .map(|i| {
            if i == limit_param {
                Value::Integer(50)
            } else {
                Value::Null
            }
        })
        .collect();
    let rows = stmt
        .query_map(params_from_iter(values), |r| {
            Ok(format!(
                "{}:{}",
                r.get::<_, i64>(1)?,
                r.get::<_, String>(3)?
            ))
        })
        .unwrap();
    rows.collect::<Result<_, _>>().unwrap()
}

/// The `pub const NAME_SQL: &str = "...";` constants of the generated query file whose
/// statement has `LIMIT ?N`: (name, SQL).
fn limit_statements(source: &str) -> Vec<(String, String)> {
    let mut out = Vec::new();
    for chunk in source.split("pub const ").skip(1) {
        let Some((name, rest)) = chunk.split_once(": &str = \"") else {
            continue;
        };
        let mut sql = String::new();
        let mut chars = rest.chars();
        while let Some(c) = chars.next() {
            match c {
                '"' => break,
                '\\' => match chars.next() {
                    Some('n') => sql.push('\n'),
                    Some(other) => sql.push(other),
                    None => break,
                },
                c => sql.push(c),
            }
        }
        if name.ends_with("_SQL") && sql.contains("LIMIT ?") {
            out.push((name.to_owned(), sql));
        }
    }
    out
}

fn main() {
    let source = std::fs::read_to_string(std::env::args().nth(1).unwrap()).unwrap();
    let dir = std::path::PathBuf::from(std::env::args().nth(2).unwrap());
    let path = dir.join("plans.db");
    drop(scribe_db::Database::open(&path).unwrap());
    let plain = Connection::open(&path).unwrap();
    let qpsg = Connection::open(&path).unwrap();
    qpsg.set_db_config(DbConfig::SQLITE_DBCONFIG_ENABLE_QPSG, true)
        .unwrap();
    let (mut same, mut differ) = (0, 0);
    for (name, sql) in limit_statements(&source) {
        let at = sql.rfind("LIMIT ?").unwrap() + "LIMIT ?".len();
        let digits: String = sql[at..].chars().take_while(char::is_ascii_digit).collect();
        let param: usize = digits.parse().unwrap();
        let (a, b) = (plan(&plain, &sql, param), plan(&qpsg, &sql, param));
        if a == b {
            same += 1;
        } else {
            differ += 1;
            println!("{name}\n  bound LIMIT: {a:?}\n  QPSG:        {b:?}");
        }
    }
    println!("{same} plans the same, {differ} differ");
}
