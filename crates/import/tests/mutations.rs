//! Every importer, given its fixture files with one value changed at a time into a value
//! of another kind (a number where text was, text where a number was, null, an empty
//! array or object, numbers at the edge of their type and past any time), finishes:
//! what it cannot read is reported or skipped, never a panic and never an error that
//! stops the import (debug builds check every integer operation for overflow, as these
//! tests run). JSON and JSON Lines files have a value inside a document changed; the
//! agents' SQLite databases have a column of a table set to one value in every row, or a
//! value inside a cell's JSON changed.
//!
//! The values changed are a fixed sample of each file's (every n-th, so a file of any
//! size costs about the same), each given a few of the kinds in turn, so a run is
//! repeatable and takes about a minute. A run over every value and every kind found an
//! empty session id stopping the whole import and a time one past the largest integer
//! stored where no reader could take it (`hostile_data.rs` keeps both as their own tests).

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::path::{Path, PathBuf};
use std::sync::Arc;

use common::*;
use scribe_import::Source;
use serde_json::Value;

/// Values sampled from a file, at most.
const PER_FILE: usize = 16;
/// Kinds of value each sampled one becomes, in turn.
const KINDS_EACH: usize = 4;

/// One step of the way from a document's root to a value in it.
#[derive(Clone, Debug)]
enum Step {
    Key(String),
    Index(usize),
}

/// The way to every value of `v` (its root first), depth first.
fn ways(v: &Value, at: &mut Vec<Step>, out: &mut Vec<Vec<Step>>) {
    out.push(at.clone());
    match v {
        Value::Object(m) => {
            for (k, c) in m {
                at.push(Step::Key(k.clone()));
                ways(c, at, out);
                at.pop();
            }
        }
        Value::Array(a) => {
            for (i, c) in a.iter().enumerate() {
                at.push(Step::Index(i));
                ways(c, at, out);
                at.pop();
            }
        }
        _ => {}
    }
}

fn replace(v: &mut Value, way: &[Step], new: Value) {
    let mut cur = v;
    for step in way {
        cur = match step {
            Step::Key(k) => cur.get_mut(k.as_str()).unwrap(),
            Step::Index(i) => cur.get_mut(*i).unwrap(),
        };
    }
    *cur = new;
}

/// What a JSON value is changed into.
fn json_kinds() -> Vec<Value> {
    [
        "null",
        "-7",
        "\"x\"",
        "[]",
        "{}",
        "1e300",
        "9223372036854775807",
        "-9223372036854775808",
        "18446744073709551615",
        "true",
        "\"\"",
        "0.5",
    ]
    .iter()
    .map(|s| serde_json::from_str(s).unwrap())
    .collect()
}

/// What a database column is set to.
fn sql_kinds() -> Vec<rusqlite::types::Value> {
    use rusqlite::types::Value as V;
    vec![
        V::Null,
        V::Integer(-7),
        V::Integer(i64::MAX),
        V::Integer(i64::MIN),
        V::Real(1e300),
        V::Text("x".into()),
        V::Text("{}".into()),
        V::Text("[]".into()),
        V::Blob(vec![0, 0xff, 0x28]),
    ]
}

/// Every `n`-th of `len` items, so that about `want` are taken.
fn stride(len: usize, want: usize) -> usize {
    len.div_ceil(want).max(1)
}

/// The fixture home's history, file by file: the source, the root it was found under, the
/// file.
fn fixture_files(home: &Path) -> Vec<(Source, PathBuf, PathBuf)> {
    let mut all = Vec::new();
    for source in Source::ALL {
        let importer = scribe_import::sources::importer(source);
        for root in importer.default_roots(&env(home, &[])) {
            let mut files = Vec::new();
            importer.discover(&root, &mut files).unwrap();
            all.extend(files.into_iter().map(|f| (source, root.clone(), f)));
        }
    }
    all
}

/// Where `file` sits under `root` (a root that is a file, as Aider's logs are, by name).
fn relative(root: &Path, file: &Path) -> PathBuf {
    match file.strip_prefix(root).unwrap() {
        r if r.as_os_str().is_empty() => PathBuf::from(file.file_name().unwrap()),
        r => r.to_owned(),
    }
}

/// Runs: a fresh Scribe database for each (copied from one migrated once), an import of
/// the one changed copy, and a failure that names the change.
struct Runs {
    dir: tempfile::TempDir,
    template: PathBuf,
    count: usize,
}

impl Runs {
    fn new() -> Runs {
        let dir = tempfile::tempdir().unwrap();
        let template = dir.path().join("template");
        drop(scribe_db(&template));
        Runs {
            dir,
            template,
            count: 0,
        }
    }

    /// A folder for the next run's copy of the history.
    fn next(&mut self) -> PathBuf {
        self.count += 1;
        self.dir.path().join(format!("run-{}", self.count))
    }

    /// Imports `source` from `at`, failing with `what` if the import panics or stops.
    fn import(&self, source: Source, at: &Path, what: &str) {
        let scribe = at.join("scribe");
        copy_tree(&self.template, &scribe);
        let db: Arc<scribe_db::Database> = scribe_db(&scribe);
        let outcome = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            run(&db, source, &[at.to_owned()])
        }));
        drop(db);
        assert!(
            outcome.is_ok(),
            "{source}: {what}: the import panicked or stopped"
        );
        std::fs::remove_dir_all(at).unwrap();
    }
}

/// JSON and JSON Lines history with one value of one document changed.
#[test]
fn every_importer_survives_a_value_of_its_files_changed_in_kind() {
    let mut runs = Runs::new();
    let home = home(&runs.dir.path().join("fixtures"));
    let kinds = json_kinds();
    for (source, root, file) in fixture_files(&home) {
        let importer = scribe_import::sources::importer(source);
        let rel = relative(&root, &file);
        let Ok(text) = String::from_utf8(std::fs::read(&file).unwrap()) else {
            continue;
        };
        let lines = file.to_string_lossy().contains(".jsonl");
        let docs: Vec<Option<Value>> = if lines {
            text.lines().map(|l| serde_json::from_str(l).ok()).collect()
        } else {
            vec![serde_json::from_str(&text).ok()]
        };
        let targets: Vec<(usize, Vec<Step>)> = docs
            .iter()
            .enumerate()
            .filter_map(|(d, doc)| Some((d, doc.as_ref()?)))
            .flat_map(|(d, doc)| {
                let mut out = Vec::new();
                ways(doc, &mut Vec::new(), &mut out);
                out.into_iter().map(move |w| (d, w))
            })
            .collect();
        let every = stride(targets.len(), PER_FILE);
        for (n, (d, way)) in targets.iter().enumerate().step_by(every) {
            for k in 0..KINDS_EACH {
                let new = &kinds[(n / every * KINDS_EACH + k) % kinds.len()];
                let mut changed = docs.clone();
                replace(changed[*d].as_mut().unwrap(), way, new.clone());
                let content = if lines {
                    let mut out = String::new();
                    for (line, doc) in text.lines().zip(&changed) {
                        match doc {
                            Some(doc) => out.push_str(&doc.to_string()),
                            None => out.push_str(line),
                        }
                        out.push('\n');
                    }
                    out
                } else {
                    changed[0].as_ref().unwrap().to_string()
                };
                let at = runs.next();
                let copy = at.join(&rel);
                std::fs::create_dir_all(copy.parent().unwrap()).unwrap();
                std::fs::write(&copy, content).unwrap();
                for companion in importer.companions(&file) {
                    let Ok(beside) = companion.strip_prefix(file.parent().unwrap()) else {
                        continue;
                    };
                    if companion.is_file() {
                        copy_tree(&companion, &copy.parent().unwrap().join(beside));
                    }
                }
                let what = format!("{} document {d} at {way:?} set to {new}", rel.display());
                runs.import(source, &at, &what);
            }
        }
    }
    assert!(runs.count > 1000, "{}", runs.count);
}

/// A change to make to a copy of an agent's database.
enum Change {
    /// Every row's column set to a value.
    Column { table: String, column: String },
    /// A value inside one cell's JSON changed.
    Inside {
        table: String,
        column: String,
        rowid: i64,
        way: Vec<Step>,
    },
}

/// What to change in the database at `file`: each column of each table, and a sample of
/// the values inside the JSON its cells hold.
fn changes(file: &Path) -> Vec<Change> {
    let conn =
        rusqlite::Connection::open_with_flags(file, rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY)
            .unwrap();
    let strings = |sql: &str| -> Vec<String> {
        conn.prepare(sql)
            .unwrap()
            .query_map([], |r| r.get(0))
            .unwrap()
            .collect::<Result<_, _>>()
            .unwrap()
    };
    let mut out = Vec::new();
    let tables = strings(
        "SELECT name FROM sqlite_master WHERE type = 'table' \
         AND name NOT LIKE 'sqlite_%' AND sql NOT LIKE '%VIRTUAL%'",
    );
    for table in tables {
        for column in strings(&format!("SELECT name FROM pragma_table_info('{table}')")) {
            out.push(Change::Column {
                table: table.clone(),
                column: column.clone(),
            });
            let Ok(mut cells) = conn.prepare(&format!(
                "SELECT rowid, \"{column}\" FROM \"{table}\" WHERE typeof(\"{column}\") = 'text' \
                 AND json_valid(\"{column}\") AND substr(\"{column}\", 1, 1) IN ('{{', '[') \
                 LIMIT 5"
            )) else {
                // A table without rowids.
                continue;
            };
            let cells: Vec<(i64, String)> = cells
                .query_map([], |r| Ok((r.get(0)?, r.get(1)?)))
                .unwrap()
                .collect::<Result<_, _>>()
                .unwrap();
            for (rowid, text) in cells {
                let doc: Value = serde_json::from_str(&text).unwrap();
                let mut all = Vec::new();
                ways(&doc, &mut Vec::new(), &mut all);
                all.remove(0);
                let every = stride(all.len(), PER_FILE / 2);
                for way in all.into_iter().step_by(every) {
                    out.push(Change::Inside {
                        table: table.clone(),
                        column: column.clone(),
                        rowid,
                        way,
                    });
                }
            }
        }
    }
    out
}

/// The agents' SQLite databases with a column, or a value inside a cell's JSON, changed.
#[test]
fn every_importer_survives_a_value_of_its_databases_changed_in_kind() {
    let mut runs = Runs::new();
    let home = home(&runs.dir.path().join("fixtures"));
    let (json, sql) = (json_kinds(), sql_kinds());
    let mut databases = 0;
    for (source, root, file) in fixture_files(&home) {
        let is_db = std::fs::read(&file).is_ok_and(|b| b.starts_with(b"SQLite format 3\0"));
        if !is_db {
            continue;
        }
        databases += 1;
        let rel = relative(&root, &file);
        for (n, change) in changes(&file).iter().enumerate() {
            // Two kinds each, in turn; a database's columns are few.
            for k in 0..2 {
                let at = runs.next();
                let copy = at.join(&rel);
                // The database's folder whole: its WAL, and what is read with it.
                copy_tree(file.parent().unwrap(), copy.parent().unwrap());
                let conn = rusqlite::Connection::open(&copy).unwrap();
                let (applied, what) = match change {
                    Change::Column { table, column } => {
                        let new = &sql[(n * 2 + k) % sql.len()];
                        let set = format!("UPDATE \"{table}\" SET \"{column}\" = ?1");
                        // A constraint may refuse it (NOT NULL, UNIQUE): nothing to try.
                        let applied = conn.execute(&set, [new]).is_ok();
                        (applied, format!("{table}.{column} set to {new:?}"))
                    }
                    Change::Inside {
                        table,
                        column,
                        rowid,
                        way,
                    } => {
                        let new = &json[(n * 2 + k) % json.len()];
                        let get = format!("SELECT \"{column}\" FROM \"{table}\" WHERE rowid = ?1");
                        let text: String = conn.query_row(&get, [rowid], |r| r.get(0)).unwrap();
                        let mut doc: Value = serde_json::from_str(&text).unwrap();
                        replace(&mut doc, way, new.clone());
                        let set =
                            format!("UPDATE \"{table}\" SET \"{column}\" = ?1 WHERE rowid = ?2");
                        let applied = conn
                            .execute(&set, rusqlite::params![doc.to_string(), rowid])
                            .is_ok();
                        let what = format!("{table}.{column} row {rowid} at {way:?} set to {new}");
                        (applied, what)
                    }
                };
                drop(conn);
                if applied {
                    runs.import(source, &at, &format!("{}: {what}", rel.display()));
                } else {
                    std::fs::remove_dir_all(&at).unwrap();
                }
            }
        }
    }
    assert!(databases >= 10, "{databases}");
    assert!(runs.count > 1000, "{}", runs.count);
}
