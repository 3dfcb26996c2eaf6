//! Throwaway check: the query plan of every generated SQLite statement with `LIMIT ?N`,
//! with the LIMIT value bound (SQLite 3.51 plans with it, and re-prepares the statement
//! at every new binding) against the same statement under
//! `SQLITE_DBCONFIG_ENABLE_QPSG` (planned without bound values, prepared once).
//! Usage: qpsg_plans <statements.json: [{"name", "sql"}]> <DIR>
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

fn main() {
    let list = std::env::args().nth(1).unwrap();
    let dir = std::path::PathBuf::from(std::env::args().nth(2).unwrap());
    let path = dir.join("plans.db");
    drop(scribe_db::Database::open(&path).unwrap());
    let statements: Vec<serde_json::Value> =
        serde_json::from_str(&std::fs::read_to_string(list).unwrap()).unwrap();
    let plain = Connection::open(&path).unwrap();
    let qpsg = Connection::open(&path).unwrap();
    qpsg.set_db_config(DbConfig::SQLITE_DBCONFIG_ENABLE_QPSG, true)
        .unwrap();
    let (mut same, mut differ) = (0, 0);
    for s in &statements {
        let name = s["name"].as_str().unwrap();
        let sql = s["sql"].as_str().unwrap();
        let at = sql.rfind("LIMIT ?").unwrap() + "LIMIT ?".len();
        let digits: String = sql[at..].chars().take_while(char::is_ascii_digit).collect();
        let param: usize = digits.parse().unwrap();
        let (a, b) = (plan(&plain, sql, param), plan(&qpsg, sql, param));
        if a == b {
            same += 1;
        } else {
            differ += 1;
            println!("{name}\n  bound LIMIT: {a:?}\n  QPSG:        {b:?}");
        }
    }
    println!("{same} plans the same, {differ} differ");
}
