//! A project in both dialects (tests/fixtures/dual): golden outputs of both renderers, the
//! generated code compiled under strict lints, the parity check catching a deliberately
//! mismatched fixture, PostgreSQL-mode diagnostics with exact positions, and (with a server)
//! the generated PostgreSQL implementation run for real.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::{Path, PathBuf};

use sqlgen::{Dialect, SourceFile};

#[deny(warnings, missing_debug_implementations, unsafe_code)]
#[allow(dead_code)]
mod generated {
    include!("fixtures/dual/expected/queries.rs");

    pub mod postgres {
        include!("fixtures/dual/expected/queries_postgres.rs");
    }
}

/// The error type the generated traits return (in Scribe, `scribe_db::Error`).
#[derive(Debug)]
pub enum Error {
    /// rusqlite's.
    Sqlite(rusqlite::Error),
    /// The postgres crate's.
    Postgres(postgres::Error),
}

impl From<rusqlite::Error> for Error {
    fn from(err: rusqlite::Error) -> Self {
        Error::Sqlite(err)
    }
}

impl From<postgres::Error> for Error {
    fn from(err: postgres::Error) -> Self {
        Error::Postgres(err)
    }
}

fn dual() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/dual")
}

fn project() -> sqlgen::Project {
    let d = dual();
    sqlgen::analyze_project(&d.join("migrations"), &d.join("queries"))
        .unwrap_or_else(|e| panic!("{e}"))
}

#[test]
fn both_renderers_match_their_golden_files() {
    for file in project().render() {
        let path = dual().join("expected").join(&file.name);
        if std::env::var_os("SQLGEN_BLESS").is_some() {
            std::fs::write(&path, &file.code).unwrap();
            continue;
        }
        let expected = std::fs::read_to_string(&path).unwrap_or_default();
        assert!(
            expected == file.code,
            "{} is out of date; rerun with SQLGEN_BLESS=1 and review the diff",
            path.display()
        );
    }
}

#[test]
fn explain_shows_both_dialects() {
    let lines = project().explain();
    let sections: Vec<&String> = lines.iter().filter(|l| l.starts_with("== ")).collect();
    assert_eq!(sections.len(), 2);
    assert!(sections[0].starts_with("== sqlite ("), "{}", sections[0]);
    assert!(sections[1].starts_with("== postgres ("), "{}", sections[1]);
    assert!(lines.contains(&"CountNotes :one () -> i64".to_string()));
    // PostgreSQL's NotesWithMetaKey is planned on each call; SQLite's is the same query.
    let meta_key: Vec<&String> = lines
        .iter()
        .filter(|l| l.starts_with("NotesWithMetaKey "))
        .collect();
    assert_eq!(
        meta_key,
        [
            "NotesWithMetaKey :many (kind: &str) -> Vec<String>",
            "NotesWithMetaKey :many custom_plan (kind: &str) -> Vec<String>",
        ]
    );
    assert!(
        lines.contains(
            &"ListNotes :many (folder: Option<&str>, limit: i64) -> Vec<NoteRow> { id: String, \
          folder: Option<String>, body: String, meta: Option<String>, pinned: bool, score: \
          f64, created_at: i64 }"
                .to_string()
        )
    );
}

#[test]
fn postgres_sql_uses_positional_parameters_and_arrays() {
    let p = project();
    let pg = p.postgres.unwrap();
    let sql = |n: &str| pg.queries.iter().find(|q| q.name == n).unwrap().sql.clone();
    assert_eq!(
        sql("ListNotes"),
        "SELECT * FROM notes\nWHERE ($1 IS NULL OR folder = $1)\nORDER BY created_at DESC, id\nLIMIT $2"
    );
    assert_eq!(
        sql("NotesByIds"),
        "SELECT id, body FROM notes WHERE id = ANY($1) ORDER BY id"
    );
    assert_eq!(
        sql("NotesNotIn"),
        "SELECT id FROM notes WHERE id <> ALL($1) ORDER BY id"
    );
    let skipped = p.sqlite.catalog.notes.len() + pg.catalog.notes.len();
    assert_eq!(skipped, 1, "the CREATE EXTENSION is noted, nothing else");
}

/// Copies the fixture to a temp dir, applies `edits` (file, from, to), and analyses it.
fn edited(edits: &[(&str, &str, &str)]) -> (tempfile::TempDir, Vec<String>) {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("dual");
    copy_dir(&dual(), &root);
    for (file, from, to) in edits {
        let path = root.join(file);
        let text = std::fs::read_to_string(&path).unwrap();
        assert!(text.contains(from), "{file} has no {from:?}");
        std::fs::write(&path, text.replacen(from, to, 1)).unwrap();
    }
    let errors = match sqlgen::analyze_project(&root.join("migrations"), &root.join("queries")) {
        Ok(_) => Vec::new(),
        Err(d) => d
            .items
            .iter()
            .map(|i| {
                let line = i.to_string();
                let prefix = format!("{}/", root.display());
                line.replace(&prefix, "")
            })
            .collect(),
    };
    (dir, errors)
}

fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for e in std::fs::read_dir(from).unwrap() {
        let p = e.unwrap().path();
        let target = to.join(p.file_name().unwrap());
        if p.is_dir() {
            copy_dir(&p, &target);
        } else {
            std::fs::copy(&p, &target).unwrap();
        }
    }
}

/// A table model and a query that differ between the dialects fail with both positions and
/// what differs.
#[test]
fn a_mismatched_dialect_fails_the_parity_check() {
    let (_dir, errors) = edited(&[
        (
            "migrations/postgres/V1__init.sql",
            "score DOUBLE PRECISION NOT NULL",
            "score REAL NOT NULL",
        ),
        (
            "queries/postgres/notes.sql",
            "CAST(@kind AS TEXT) ORDER BY id;",
            "CAST(@kind AS TEXT) AND created_at > length(@kind) ORDER BY id;",
        ),
    ]);
    let msg = |e: &str| {
        e.split_once(": ")
            .map_or(e.to_string(), |(_, m)| m.to_string())
    };
    let _ = msg;
    let files: Vec<String> = errors
        .iter()
        .map(|e| {
            e.rsplit_once("dual/")
                .map_or(e.clone(), |(_, r)| r.to_string())
        })
        .collect();
    assert_eq!(
        files,
        [
            "migrations/sqlite/V1__init.sql:7:5: notes.score is f64 in sqlite but f32 in postgres \
             (migrations/postgres/V1__init.sql:8:5: REAL (4 bytes)); use DOUBLE PRECISION",
        ]
        .iter()
        .map(|s| s.to_string())
        .collect::<Vec<_>>(),
        "{errors:#?}"
    );
}

/// A query only one dialect has, and parameters that differ in type.
#[test]
fn a_query_missing_or_differing_in_one_dialect_fails_the_parity_check() {
    let (_dir, errors) = edited(&[(
        "queries/postgres/notes.sql",
        "-- name: NotesWithMetaKey :many custom_plan\nSELECT id FROM notes WHERE CAST(meta AS jsonb) ->> 'kind' = CAST(@kind AS TEXT) ORDER BY id;",
        "-- name: NotesWithMetaKey :many custom_plan\nSELECT id FROM notes WHERE created_at = @kind ORDER BY id;\n\n-- name: OnlyHere :one\nSELECT count(*) AS n FROM tags;",
    )]);
    let shown: Vec<String> = errors
        .iter()
        .map(|e| e.replace(&format!("{}/", dual().display()), ""))
        .map(|e| e.split("dual/").collect::<Vec<_>>().join(""))
        .collect();
    assert_eq!(
        shown,
        [
            "queries/postgres/notes.sql:4:1: OnlyHere: query \"OnlyHere\" exists in postgres but \
             not in sqlite; share it or add a sqlite override",
            "queries/sqlite/notes.sql:2:53: NotesWithMetaKey: parameter \"kind\" is &str in \
             sqlite but i64 in postgres (queries/postgres/notes.sql:2:41)",
        ],
        "{errors:#?}"
    );
}

/// `custom_plan` belongs to PostgreSQL's queries; an SQLite override may not ask for it.
#[test]
fn an_sqlite_query_cannot_ask_for_a_custom_plan() {
    let (_dir, errors) = edited(&[(
        "queries/sqlite/notes.sql",
        "-- name: NotesWithMetaKey :many\n",
        "-- name: NotesWithMetaKey :many custom_plan\n",
    )]);
    let shown: Vec<String> = errors
        .iter()
        .map(|e| e.split("dual/").collect::<Vec<_>>().join(""))
        .collect();
    assert_eq!(
        shown,
        [
            "queries/sqlite/notes.sql:1:1: NotesWithMetaKey: custom_plan is for PostgreSQL's plan \
          cache; SQLite keeps no generic plans, so a query only SQLite runs cannot ask for it"
        ],
        "{errors:#?}"
    );
}

fn pg_errors(queries: &str) -> Vec<String> {
    let m = [SourceFile {
        display: "sql/migrations/postgres/V1__init.sql".into(),
        text: std::fs::read_to_string(dual().join("migrations/postgres/V1__init.sql")).unwrap(),
    }];
    let q = [SourceFile {
        display: "sql/queries/q.sql".into(),
        text: queries.into(),
    }];
    match sqlgen::analyze_layers(Dialect::Postgres, &m, &q, &[]) {
        Ok(a) => panic!("expected errors, got {:#?}", a.explain()),
        Err(d) => d.to_string().lines().map(str::to_string).collect(),
    }
}

/// PostgreSQL mode reports what PostgreSQL would reject or what has no Rust type, at the
/// exact position, each with what to write instead.
#[test]
fn postgres_mode_diagnostics_are_positioned() {
    let e = pg_errors(
        "-- name: Anon :many\nSELECT id FROM notes WHERE body = ?;\n\
         -- name: Arrow :many\nSELECT meta ->> 'kind' AS kind FROM notes;\n\
         -- name: Sum :one\nSELECT sum(created_at) AS total FROM notes;\n\
         -- name: Glob :many\nSELECT id FROM notes WHERE body GLOB @pattern;\n\
         -- name: IfNull :many\nSELECT ifnull(folder, '') AS folder FROM notes;\n\
         -- name: Rowid :execlastid\nINSERT INTO tags (note_id, tag) VALUES (@note_id, @tag);\n\
         -- name: Typo :many\nSELECT id FROM notes WHERE folder = @folder AND titel = @t;\n",
    );
    assert_eq!(
        e,
        [
            "sql/queries/q.sql:2:35: Anon: PostgreSQL has no \"?\" parameters (\"?\" is a jsonb operator there); name the parameter: @name",
            "sql/queries/q.sql:4:8: Arrow: ->> needs json or jsonb on its left in PostgreSQL, not TEXT; write CAST(… AS jsonb)",
            "sql/queries/q.sql:6:8: Sum: column \"total\" is NUMERIC in PostgreSQL (a sum of BIGINT, an avg, a decimal literal); CAST it AS BIGINT or DOUBLE PRECISION",
            "sql/queries/q.sql:8:33: Glob: GLOB is SQLite's; PostgreSQL matches with ~ (a POSIX regular expression)",
            "sql/queries/q.sql:10:8: IfNull: ifnull() is SQLite's; PostgreSQL has no ifnull() (write coalesce(a, b))",
            "sql/queries/q.sql:12:1: Rowid: :execlastid needs SQLite's rowid; PostgreSQL has none: use INSERT … RETURNING id with :one",
            "sql/queries/q.sql:14:49: Typo: no column \"titel\" in \"notes\"",
        ]
    );
}

/// With a server: the generated PostgreSQL implementation does what the SQLite one does.
#[test]
#[ignore = "needs a PostgreSQL server: .ci/with-postgres cargo test -p scribe-sqlgen --test dual -- --ignored"]
fn postgres_implementation_runs() {
    use generated::{Queries, ReadQueries};
    let url = std::env::var("SCRIBE_TEST_POSTGRES")
        .expect("SCRIBE_TEST_POSTGRES is unset: run through .ci/with-postgres");
    let mut admin = postgres::Client::connect(&url, postgres::NoTls).unwrap();
    admin
        .batch_execute("DROP DATABASE IF EXISTS sqlgen_dual_runtime")
        .unwrap();
    admin
        .batch_execute("CREATE DATABASE sqlgen_dual_runtime")
        .unwrap();
    let mut client = postgres::Client::connect(
        &format!("{url} dbname=sqlgen_dual_runtime"),
        postgres::NoTls,
    )
    .unwrap();
    client
        .batch_execute(
            &std::fs::read_to_string(dual().join("migrations/postgres/V1__init.sql")).unwrap(),
        )
        .unwrap();
    let mut tx = client.transaction().unwrap();
    let mut q = generated::postgres::PgQueries::new(&mut tx);
    let meta = r#"{"kind":"todo", "kind":"dup"}"#;
    let note = q
        .create_note(&generated::CreateNoteParams {
            id: "n1",
            folder: None,
            body: "first note",
            meta: Some(meta),
            pinned: true,
            score: 1.5,
            now: 1_700_000_000_000,
        })
        .unwrap();
    // TEXT keeps the JSON byte for byte (jsonb would reorder and drop the duplicate key).
    assert_eq!(note.meta.as_deref(), Some(meta));
    assert_eq!(note.created_at, 1_700_000_000_000);
    assert_eq!(q.get_note("n1").unwrap(), Some(note.clone()));
    assert_eq!(q.get_note("missing").unwrap(), None);
    assert_eq!(q.count_notes().unwrap(), 1);
    let all = q
        .list_notes(&generated::ListNotesParams {
            folder: None,
            limit: 10,
        })
        .unwrap();
    assert_eq!(all, [note]);
    assert_eq!(q.notes_by_ids(&["n1", "n2"]).unwrap().len(), 1);
    assert_eq!(q.notes_not_in(&["n1"]).unwrap(), Vec::<String>::new());
    q.tag_note(&generated::TagNoteParams {
        note_id: "n1",
        tag: "a",
    })
    .unwrap();
    q.tag_note(&generated::TagNoteParams {
        note_id: "n1",
        tag: "a",
    })
    .unwrap();
    assert_eq!(
        q.set_score(&generated::SetScoreParams {
            score: 3.0,
            id: "n1"
        })
        .unwrap(),
        1
    );
    assert_eq!(q.notes_with_meta_key("dup").unwrap(), ["n1"]);
    assert_eq!(q.preview(2).unwrap()[0].preview, "fi");
    // A uniqueness violation is an error, not a panic; so is a type the row cannot hold.
    assert!(matches!(
        q.create_note(&generated::CreateNoteParams {
            id: "n1",
            folder: None,
            body: "again",
            meta: None,
            pinned: false,
            score: 0.0,
            now: 1,
        }),
        Err(Error::Postgres(_))
    ));
    drop(tx);
    // With a statement cache, a query is prepared on the connection once, and from its
    // sixth run the server may keep one generic plan for it; a `custom_plan` query is
    // never prepared, so every call is planned for its own values and table sizes.
    let mut statements = generated::postgres::Statements::default();
    let mut q = generated::postgres::PgQueries::cached(&mut client, &mut statements);
    for _ in 0..7 {
        assert_eq!(q.count_notes().unwrap(), 0);
        assert_eq!(q.notes_with_meta_key("todo").unwrap(), Vec::<String>::new());
    }
    assert_eq!(statements.len(), 1, "{statements:?}");
    let prepared: Vec<String> = client
        .query_typed("SELECT statement FROM pg_prepared_statements", &[])
        .unwrap()
        .iter()
        .map(|row| row.get(0))
        .collect();
    assert_eq!(prepared, [generated::postgres::COUNT_NOTES_SQL]);
}

/// A PostgreSQL table stands in for an SQLite virtual table of the same name (each dialect's
/// own search index): it is neither compared nor reported. Any other PostgreSQL-only table
/// still fails the check.
#[test]
fn a_postgres_table_may_stand_in_for_a_virtual_table_of_the_same_name() {
    let fts = "CREATE TABLE notes_fts (id TEXT PRIMARY KEY NOT NULL, words tsvector NOT NULL);\n";
    let (_dir, errors) = edited(&[
        (
            "migrations/sqlite/V1__init.sql",
            "CREATE TABLE tags (",
            "CREATE VIRTUAL TABLE notes_fts USING fts5(body);\nCREATE TABLE tags (",
        ),
        (
            "migrations/postgres/V1__init.sql",
            "CREATE TABLE tags (",
            &format!("{fts}CREATE TABLE tags ("),
        ),
    ]);
    assert!(errors.is_empty(), "{errors:#?}");

    let (_dir, errors) = edited(&[(
        "migrations/postgres/V1__init.sql",
        "CREATE TABLE tags (",
        &format!("{fts}CREATE TABLE tags ("),
    )]);
    assert!(
        errors.len() == 1
            && errors[0].contains("table \"notes_fts\" exists in postgres but not in sqlite"),
        "{errors:#?}"
    );
}

/// A PostgreSQL-only table named `scribe_…` is the backend's own machinery (Scribe's change
/// outbox), like its `scribe_` functions: it needs no SQLite twin and gets no model.
#[test]
fn a_postgres_table_of_its_own_machinery_needs_no_sqlite_twin() {
    let (_dir, errors) = edited(&[(
        "migrations/postgres/V1__init.sql",
        "CREATE TABLE tags (",
        "CREATE TABLE scribe_outbox (xid xid8 NOT NULL, changes TEXT NOT NULL);\nCREATE TABLE tags (",
    )]);
    assert!(errors.is_empty(), "{errors:#?}");
}
