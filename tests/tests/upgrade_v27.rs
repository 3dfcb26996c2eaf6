//! Schema version 27: a file path of any length is stored on both backends. PostgreSQL
//! keys `files` (session, path, version) and `import_files` (source, path) by the MD5 of
//! the path since V27; before, a path of ~2,700+ incompressible bytes was refused by the
//! server (SQLSTATE 54000, "index row size … exceeds btree version 4 maximum 2704") where
//! SQLite stored it, and `scribe db copy` of such a store into PostgreSQL failed midway.
//!
//! - a store written by version 26 (file versions, importer file records) upgrades with its
//!   rows intact and answers the same lookups; PostgreSQL's lookups by path walk the new
//!   index (EXPLAIN);
//! - a 3,000-byte incompressible path is recorded, versioned and found again (file history
//!   and importer records: an upsert adds to the one row), on both backends alike;
//! - `scribe_db::copy` of an SQLite store holding such paths into PostgreSQL copies them,
//!   and back into SQLite.
//!
//! PostgreSQL needs a server: `.ci/with-postgres cargo test -p scribe-tests --test
//! upgrade_v27 -- --include-ignored`.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::ops::ControlFlow;
use std::sync::Arc;

use scribe_db::queries::{ImportFileRow, UpsertImportFileParams};
use scribe_db::testing::incompressible;
use scribe_db::{Backend, Database, Options};
use scribe_session::{NewSession, SessionService};
use scribe_tests::{TestDb, dump_store_rows, open_upgraded, upgrade_location};

/// A path no compressor shrinks below PostgreSQL's b-tree limit.
fn long_path(seed: u64) -> String {
    format!("/home/dev/{}.rs", incompressible(3_000, seed))
}

/// Records that the importer read `path` of source `"claude"`: `records` more records.
fn upsert_import_file(db: &Database, path: &str, records: i64, byte_offset: i64) {
    db.write(|tx| -> scribe_db::Result<()> {
        tx.q().upsert_import_file(&UpsertImportFileParams {
            source: "claude",
            path,
            size: byte_offset,
            mtime_ns: 7,
            byte_offset,
            lines: records,
            carry: None,
            records,
            skipped: 0,
            imported_at: 1_000 + byte_offset,
        })
    })
    .unwrap();
}

fn import_files(db: &Database) -> Vec<ImportFileRow> {
    db.read(|tx| tx.q().list_import_files("claude")).unwrap()
}

/// Every version of every path of `session`, as the three lookups by path answer them.
fn lookups(sessions: &SessionService, session: &str, paths: &[&str]) -> Vec<String> {
    let mut out = Vec::new();
    for path in paths {
        let versions = sessions.file_versions(session, path).unwrap();
        for v in &versions {
            let one = sessions.file_version(session, path, v.version).unwrap();
            assert_eq!(one.id, v.id);
            out.push(format!(
                "{}:{}:{}",
                v.version,
                v.content,
                &v.path[..20.min(v.path.len())]
            ));
        }
        out.push(format!("{} versions", versions.len()));
    }
    out
}

/// A long path's versions count 1, 2 … and are found again; a long importer path's
/// records add up in one row.
fn long_paths_are_stored_and_found(db: &Arc<Database>, session: &str) {
    let sessions = SessionService::new(Arc::clone(db));
    let path = long_path(1);
    let other = long_path(2);
    let first = sessions.record_file(session, &path, "one").unwrap();
    let second = sessions.record_file(session, &path, "two").unwrap();
    sessions.record_file(session, &other, "other").unwrap();
    assert_eq!((first.version, second.version), (1, 2));
    assert_eq!(first.path, path);
    let versions = sessions.file_versions(session, &path).unwrap();
    assert_eq!(
        versions
            .iter()
            .map(|v| v.content.as_str())
            .collect::<Vec<_>>(),
        ["one", "two"]
    );
    assert_eq!(
        sessions.file_version(session, &path, 2).unwrap().id,
        second.id
    );
    assert_eq!(sessions.file_versions(session, &other).unwrap().len(), 1);

    let file = long_path(3);
    upsert_import_file(db, &file, 5, 100);
    upsert_import_file(db, &file, 3, 200);
    let rows: Vec<_> = import_files(db)
        .into_iter()
        .filter(|r| r.path == file)
        .collect();
    assert_eq!(rows.len(), 1, "one row per (source, path)");
    assert_eq!((rows[0].records, rows[0].byte_offset), (8, 200));
}

/// The plan of `sql` (PostgreSQL) with `params`, one line.
fn plan(location: &str, sql: &str, params: &[&(dyn postgres::types::ToSql + Sync)]) -> String {
    let mut client = postgres::Client::connect(location, postgres::NoTls).unwrap();
    let mut tx = client.transaction().unwrap();
    // The tables are tiny: without this the planner reads them whole whatever indexes
    // exist. What is asserted is that the query can use the key, not its cost.
    tx.batch_execute("SET LOCAL enable_seqscan = off").unwrap();
    tx.query(&format!("EXPLAIN {sql}"), params)
        .unwrap()
        .iter()
        .map(|r| r.get::<_, String>(0))
        .collect::<Vec<_>>()
        .join(" | ")
}

fn a_v26_store_upgrades_to_v27_and_keeps_any_path(backend: Backend) {
    let dir = tempfile::tempdir().unwrap();
    let location = upgrade_location(backend, &dir, "v26.db", "scribe_upgrade_v27").unwrap();
    let paths = ["src/lib.rs", "src/main.rs", "README.md"];
    let (session, before_lookups, before_files) = {
        let db = Arc::new(Database::open_at_version(&location, 26).unwrap());
        assert_eq!(db.schema_version().unwrap(), 26);
        let sessions = SessionService::new(Arc::clone(&db));
        let s = sessions.create(NewSession::default()).unwrap();
        // Written by hand: this build's statements name V27's digest, which a version 26
        // PostgreSQL store does not have.
        let mut rows = Vec::new();
        for (i, path) in paths.iter().enumerate() {
            for n in 0..=i {
                let v = i64::try_from(n + 1).unwrap();
                rows.push((
                    format!("fil_{i}{n}"),
                    (*path).to_owned(),
                    format!("{path} v{n}"),
                    v,
                ));
            }
        }
        let files = [("/logs/a.jsonl", 4_i64, 10_i64), ("/logs/b.jsonl", 2, 20)];
        match backend {
            Backend::Sqlite => {
                let conn = rusqlite::Connection::open(&location).unwrap();
                for (id, path, content, v) in &rows {
                    conn.execute(
                        "INSERT INTO files (id, session_id, path, content, version, created_at, \
                         updated_at) VALUES (?1, ?2, ?3, ?4, ?5, 1, 1)",
                        rusqlite::params![id, s.id, path, content, v],
                    )
                    .unwrap();
                }
                for (path, records, offset) in files {
                    conn.execute(
                        "INSERT INTO import_files (source, path, size, mtime_ns, byte_offset, \
                         lines, records, imported_at) VALUES ('claude', ?1, ?2, 7, ?2, ?3, ?3, 5)",
                        rusqlite::params![path, offset, records],
                    )
                    .unwrap();
                }
            }
            Backend::Postgres => {
                let mut client = postgres::Client::connect(&location, postgres::NoTls).unwrap();
                for (id, path, content, v) in &rows {
                    client
                        .execute(
                            "INSERT INTO files (id, session_id, path, content, version, \
                             created_at, updated_at) VALUES ($1, $2, $3, $4, $5, 1, 1)",
                            &[id, &s.id, path, content, v],
                        )
                        .unwrap();
                }
                for (path, records, offset) in files {
                    client
                        .execute(
                            "INSERT INTO import_files (source, path, size, mtime_ns, \
                             byte_offset, lines, records, imported_at) \
                             VALUES ('claude', $1, $2, 7, $2, $3, $3, 5)",
                            &[&path, &offset, &records],
                        )
                        .unwrap();
                }
            }
        }
        // What the lookups answered at version 26 (SQLite's, which V27 does not change).
        let mut expected = Vec::new();
        for path in paths {
            let of_path: Vec<_> = rows.iter().filter(|r| r.1 == path).collect();
            for (_, path, content, v) in &of_path {
                expected.push(format!("{v}:{content}:{}", &path[..20.min(path.len())]));
            }
            expected.push(format!("{} versions", of_path.len()));
        }
        (s.id.clone(), expected, files)
    };
    let before = dump_store_rows(backend, &location).unwrap();

    let db = open_upgraded(backend, &location, Options::default(), &before, "V27");
    let sessions = SessionService::new(Arc::clone(&db));
    assert_eq!(lookups(&sessions, &session, &paths), before_lookups);
    let stored: Vec<_> = import_files(&db)
        .into_iter()
        .map(|r| (r.path, r.records, r.byte_offset))
        .collect();
    let before_files: Vec<_> = before_files
        .iter()
        .map(|(p, records, offset)| ((*p).to_owned(), *records, *offset))
        .collect();
    assert_eq!(stored, before_files);
    // The key still holds: a new version of a path counts on, an import adds up.
    assert_eq!(
        sessions
            .record_file(&session, "README.md", "x")
            .unwrap()
            .version,
        4
    );
    upsert_import_file(&db, "/logs/a.jsonl", 1, 30);
    let a = import_files(&db)
        .into_iter()
        .find(|r| r.path == "/logs/a.jsonl")
        .unwrap();
    assert_eq!((a.records, a.byte_offset), (5, 30));
    assert_eq!(import_files(&db).len(), 2);

    long_paths_are_stored_and_found(&db, &session);

    if backend == Backend::Postgres {
        use scribe_db::queries::postgres as pq;
        let get = plan(
            &location,
            pq::GET_FILE_VERSION_SQL,
            &[&session, &"src/lib.rs", &1_i64],
        );
        assert!(get.contains("files_session_path_version"), "{get}");
        assert!(get.contains("Index Cond"), "{get}");
        let list = plan(
            &location,
            pq::LIST_FILE_VERSIONS_SQL,
            &[&session, &"src/lib.rs"],
        );
        assert!(list.contains("files_session_path_version"), "{list}");
        // The upsert's update finds the row through the new key.
        let upsert = plan(
            &location,
            pq::UPSERT_IMPORT_FILE_SQL,
            &[
                &"claude",
                &"/logs/a.jsonl",
                &1_i64,
                &1_i64,
                &1_i64,
                &1_i64,
                &None::<String>,
                &1_i64,
                &0_i64,
                &1_i64,
            ],
        );
        assert!(upsert.contains("import_files_source_path"), "{upsert}");
    }
}

scribe_tests::backends!(a_v26_store_upgrades_to_v27_and_keeps_any_path);

/// A fresh store of either backend stores and finds 3,000-byte paths alike.
fn long_paths_on_a_fresh_store(backend: Backend) {
    let t = TestDb::new(backend);
    let sessions = SessionService::new(Arc::clone(&t.db));
    let s = sessions.create(NewSession::default()).unwrap();
    long_paths_are_stored_and_found(&t.db, &s.id);
}

scribe_tests::backends!(long_paths_on_a_fresh_store);

/// `scribe_db::copy` of an SQLite store holding 3,000-byte paths into PostgreSQL copies
/// every row; the copy answers the same lookups.
#[test]
#[ignore = "needs PostgreSQL (.ci/with-postgres)"]
fn an_sqlite_store_with_long_paths_copies_into_postgres() {
    let from = TestDb::new(Backend::Sqlite);
    let sessions = SessionService::new(Arc::clone(&from.db));
    let s = sessions.create(NewSession::default()).unwrap();
    long_paths_are_stored_and_found(&from.db, &s.id);
    let to = TestDb::new(Backend::Postgres);
    scribe_db::copy::copy(&from.db, &to.db, |_| ControlFlow::Continue(())).unwrap();
    let files = |db: &Arc<Database>| {
        let mut v = SessionService::new(Arc::clone(db))
            .latest_files(&s.id)
            .unwrap();
        v.sort_by(|a, b| a.id.cmp(&b.id));
        v.into_iter()
            .map(|f| (f.id, f.path, f.content, f.version))
            .collect::<Vec<_>>()
    };
    let copied_files = files(&to.db);
    assert_eq!(copied_files.len(), 2);
    assert!(
        copied_files == files(&from.db),
        "the copied file versions differ"
    );
    assert_eq!(import_files(&to.db), import_files(&from.db));
    // And back: PostgreSQL's keys on the digest (import_files has no primary key there
    // since V27) copy into SQLite whole.
    let back = TestDb::new(Backend::Sqlite);
    scribe_db::copy::copy(&to.db, &back.db, |_| ControlFlow::Continue(())).unwrap();
    assert!(
        files(&back.db) == copied_files,
        "the file versions copied back differ"
    );
    assert_eq!(import_files(&back.db), import_files(&from.db));
    let copied = SessionService::new(Arc::clone(&to.db));
    let path = long_path(1);
    assert_eq!(
        lookups(&copied, &s.id, &[&path]),
        lookups(&sessions, &s.id, &[&path])
    );
}
