//! Faults: a full database, a read-only file or directory, files that are not databases
//! or are truncated, and part rows whose JSON is corrupt. Each must give a typed, readable
//! error, never a panic, and never lose or half-write what is stored.
//!
//! The read-only cases need a user that file modes apply to. Root ignores them, so when
//! the tests run as root the probe runs in a child process (this test binary, role
//! `read_only_child`) under uid/gid 65534 (`nobody`).

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::sync::Arc;

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use scribe_db::Database;
use scribe_message::{FinishReason, MessageError, MessageService, NewMessage, Part, Role};
use scribe_tests::{child_command, consistency_problems, create_session, error_chain};
use serde_json::{Value, json};

fn service(path: &Path) -> (Arc<Database>, MessageService) {
    let db = Arc::new(Database::open(path).unwrap());
    (Arc::clone(&db), MessageService::new(db))
}

fn user_message(session: &str, text: &str) -> NewMessage {
    NewMessage::new(session, Role::User, vec![Part::text(text)])
}

fn count(db: &Database, sql: &str) -> i64 {
    db.read(|conn| -> scribe_db::Result<_> {
        let conn = conn.conn().unwrap();
        Ok(conn.query_row(sql, [], |row| row.get(0))?)
    })
    .unwrap()
}

fn sqlite_code(err: &scribe_db::Error) -> Option<i32> {
    err.sqlite_code()
}

// ---------------------------------------------------------------------------------------
// (a) database full

#[test]
fn full_database_fails_the_whole_message_and_recovers() {
    let dir = tempfile::tempdir().unwrap();
    let (db, messages) = service(&dir.path().join("scribe.db"));
    let session = create_session(&db, None).unwrap();
    for i in 0..5 {
        messages
            .create(user_message(
                &session,
                &format!("before the disk filled up {i}"),
            ))
            .unwrap();
    }

    // max_page_count is a setting of the connection it is run on, so it is set through the
    // real write path: the writer connection every later write uses.
    let set_limit = |extra: i64| {
        db.write(|tx| -> scribe_db::Result<_> {
            let tx = tx.conn().unwrap();
            let pages: i64 = tx.query_row("PRAGMA page_count", [], |row| row.get(0))?;
            let limit = if extra < 0 { 1 << 30 } else { pages + extra };
            let set: i64 =
                tx.query_row(&format!("PRAGMA max_page_count = {limit}"), [], |row| {
                    row.get(0)
                })?;
            Ok(set)
        })
        .unwrap()
    };
    set_limit(2);

    let before = (
        count(&db, "SELECT count(*) FROM messages"),
        count(&db, "SELECT count(*) FROM parts"),
    );
    // The first part fits, the second does not: the failure comes mid-message.
    let big = NewMessage::new(
        session.as_str(),
        Role::Assistant,
        vec![
            Part::text("a short opening paragraph"),
            Part::text("overflowing ".repeat(30_000)),
            Part::text("a closing paragraph"),
        ],
    );
    let err = messages.create(big.clone()).unwrap_err();
    let shown = error_chain(&err);
    match &err {
        MessageError::Db(db_err) => assert_eq!(
            sqlite_code(db_err),
            Some(rusqlite::ffi::SQLITE_FULL),
            "expected Storage(SQLITE_FULL), got {db_err:?}"
        ),
        other => panic!("expected MessageError::Db(Storage(..)), got {other:?}"),
    }
    assert!(shown.contains("full"), "unclear message: {shown}");

    let after = (
        count(&db, "SELECT count(*) FROM messages"),
        count(&db, "SELECT count(*) FROM parts"),
    );
    assert_eq!(before, after, "the failed message left rows behind");
    assert_eq!(
        count(
            &db,
            "SELECT count(*) FROM parts_search WHERE search_text LIKE '%opening paragraph%'"
        ),
        0
    );
    let problems = consistency_problems(&db).unwrap();
    assert!(problems.is_empty(), "{problems:#?}");

    // Space is freed: the same message now goes in whole.
    set_limit(-1);
    let msg = messages.create(big).unwrap();
    assert_eq!(msg.parts.len(), 3);
    assert_eq!(messages.get(&msg.id).unwrap(), msg);
    assert_eq!(messages.list(&session).unwrap().len(), 6);
    let problems = consistency_problems(&db).unwrap();
    assert!(problems.is_empty(), "{problems:#?}");
}

// ---------------------------------------------------------------------------------------
// (b) read-only file or directory

const READ_ONLY_CHILD: &str = "read_only_child";
const ENV_READ_ONLY_DB: &str = "SCRIBE_READ_ONLY_DB";

/// What a process that may not write the file or directory could do with it: opening
/// read-write must fail clearly, opening read-only must still read (and refuse writes).
fn read_only_probe(path: &Path) -> Value {
    let read_write = match Database::open(path) {
        Err(err) => json!({
            "open": "error",
            "variant": variant_name(&err),
            "message": error_chain(&err),
        }),
        Ok(db) => {
            let written = create_session(&db, Some("written while read-only"));
            json!({
                "open": "ok",
                "write": match &written {
                    Ok(_) => "ok".to_owned(),
                    Err(err) => format!("{}: {}", variant_name(err), error_chain(err)),
                },
            })
        }
    };
    let read_only = match Database::open_read_only(path) {
        Err(err) => json!({ "open": format!("{}: {}", variant_name(&err), error_chain(&err)) }),
        Ok(db) => {
            let written = create_session(&db, Some("written while read-only"));
            let read = db.read(|conn| -> scribe_db::Result<_> {
                let conn = conn.conn().unwrap();
                Ok(conn.query_row("SELECT count(*) FROM messages", [], |row| {
                    row.get::<_, i64>(0)
                })?)
            });
            let messages = MessageService::new(Arc::new(db));
            let found = messages.search("second", &scribe_message::SearchOptions::default());
            json!({
                "open": "ok",
                "write": match &written {
                    Ok(_) => "ok".to_owned(),
                    Err(err) => format!("{}: {}", variant_name(err), error_chain(err)),
                },
                "read": match read {
                    Ok(n) => json!(n),
                    Err(err) => json!(error_chain(&err)),
                },
                "search": match found {
                    Ok(hits) => json!(hits.len()),
                    Err(err) => json!(error_chain(&err)),
                },
            })
        }
    };
    json!({ "read_write": read_write, "read_only": read_only })
}

fn variant_name(err: &scribe_db::Error) -> String {
    format!("{err:?}")
        .split(['(', ' ', '{'])
        .next()
        .unwrap_or_default()
        .to_owned()
}

/// The child role: runs [`read_only_probe`] as whatever user it was started as.
#[test]
fn read_only_child() {
    let Ok(path) = std::env::var(ENV_READ_ONLY_DB) else {
        return;
    };
    println!("probe {}", read_only_probe(Path::new(&path)));
}

/// Runs the probe as a user the file modes apply to (this one, or `nobody` when run as
/// root).
fn probe_as_unprivileged(path: &Path) -> Value {
    let blocked = std::fs::OpenOptions::new().write(true).open(path).is_err()
        || std::fs::File::create(path.with_extension("probe")).is_err();
    if blocked {
        return read_only_probe(path);
    }
    // Root: the modes don't stop us, so ask `nobody`. A test that cannot do its job here
    // fails and says why; it never passes silently.
    use std::os::unix::process::CommandExt;
    let output = child_command(READ_ONLY_CHILD)
        .unwrap()
        .env(ENV_READ_ONLY_DB, path)
        .uid(65534)
        .gid(65534)
        .output()
        .unwrap_or_else(|err| {
            panic!("this test runs its probe as uid 65534 when run as root, which cannot start here: {err}")
        });
    assert!(
        output.status.success(),
        "the read-only probe could not run as uid 65534 ({}): {}",
        output.status,
        String::from_utf8_lossy(&output.stderr)
    );
    let stdout = String::from_utf8_lossy(&output.stdout);
    let line = stdout
        .lines()
        .find_map(|l| l.split_once("probe ").map(|(_, json)| json))
        .unwrap_or_else(|| panic!("no probe output in: {stdout}"));
    serde_json::from_str(line).unwrap()
}

/// A database with one session and two messages, closed again (WAL folded back in).
fn stored_database(path: &Path) {
    let (db, messages) = service(path);
    let session = create_session(&db, Some("read-only")).unwrap();
    messages
        .create(user_message(&session, "the first message"))
        .unwrap();
    messages
        .create(user_message(&session, "the second message"))
        .unwrap();
}

/// Opening read-write must be refused with a typed error that names the file and points
/// to read-only mode; read-only mode must read and search, and refuse writes by name. The
/// stored rows stay intact.
fn assert_read_only_outcome(path: &Path, outcome: &Value) {
    eprintln!("read-only outcome: {outcome}");
    let shown = path.display().to_string();
    let read_write = &outcome["read_write"];
    assert_eq!(read_write["open"], "error", "{outcome}");
    assert_eq!(read_write["variant"], "NotWritable", "{outcome}");
    let message = read_write["message"].as_str().unwrap();
    assert!(
        message.contains(&shown)
            && message.contains("not writable")
            && message.contains("read-only"),
        "unclear error: {message}"
    );

    let read_only = &outcome["read_only"];
    assert_eq!(read_only["open"], "ok", "read-only open failed: {outcome}");
    assert_eq!(
        read_only["read"],
        json!(2),
        "reads stopped working: {outcome}"
    );
    assert_eq!(
        read_only["search"],
        json!(1),
        "search stopped working: {outcome}"
    );
    let write = read_only["write"].as_str().unwrap();
    assert!(
        write.starts_with("ReadOnly: ") && write.contains(&shown) && write.contains("read-only"),
        "unclear write error: {write}"
    );

    let conn =
        rusqlite::Connection::open_with_flags(path, rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY)
            .unwrap();
    let n: i64 = conn
        .query_row("SELECT count(*) FROM messages", [], |row| row.get(0))
        .unwrap();
    assert_eq!(n, 2, "stored messages changed");
}

fn set_mode(path: &Path, mode: u32) {
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode)).unwrap();
}

#[test]
fn read_only_file_is_a_clear_error_and_loses_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("scribe.db");
    stored_database(&path);
    set_mode(dir.path(), 0o755);
    set_mode(&path, 0o444);
    let outcome = probe_as_unprivileged(&path);
    assert_read_only_outcome(&path, &outcome);
    set_mode(&path, 0o644);
}

#[test]
fn read_only_directory_is_a_clear_error_and_loses_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("scribe.db");
    stored_database(&path);
    // The file itself is writable; the WAL and shared-memory files beside it cannot be made.
    set_mode(&path, 0o666);
    set_mode(dir.path(), 0o555);
    let outcome = probe_as_unprivileged(&path);
    set_mode(dir.path(), 0o755);
    assert_read_only_outcome(&path, &outcome);
}

// ---------------------------------------------------------------------------------------
// (c) not a database, truncated

#[test]
fn not_a_database_or_truncated_is_a_clear_error_on_open() {
    let dir = tempfile::tempdir().unwrap();
    let real = dir.path().join("real.db");
    {
        let (db, messages) = service(&real);
        let session = create_session(&db, None).unwrap();
        for i in 0..200 {
            messages
                .create(user_message(
                    &session,
                    &format!("message {i} with enough text to fill several pages of the file"),
                ))
                .unwrap();
        }
    }
    let bytes = std::fs::read(&real).unwrap();
    assert!(
        bytes.len() > 16 * 4096,
        "fixture too small: {}",
        bytes.len()
    );
    let mut rng = StdRng::seed_from_u64(7);
    let random: Vec<u8> = (0..64 * 1024).map(|_| rng.random()).collect();
    let mut header_then_noise = bytes[..100].to_vec();
    header_then_noise.extend((0..8 * 4096).map(|_| rng.random::<u8>()));

    let cases: Vec<(&str, Vec<u8>)> = vec![
        ("random bytes", random),
        (
            "a text file",
            "[settings]\ntheme = \"dark\"\n".repeat(200).into_bytes(),
        ),
        ("10 bytes of a database", bytes[..10].to_vec()),
        ("the 100-byte header only", bytes[..100].to_vec()),
        ("the first page only", bytes[..4096].to_vec()),
        ("half a database", bytes[..bytes.len() / 2].to_vec()),
        ("a real header, then noise", header_then_noise),
    ];
    for (name, content) in cases {
        let path = dir.path().join(format!("{}.db", name.replace(' ', "_")));
        std::fs::write(&path, &content).unwrap();
        let opened = std::panic::catch_unwind(|| Database::open(&path))
            .unwrap_or_else(|_| panic!("{name}: Database::open panicked"));
        match opened {
            Err(err) => {
                let shown = error_chain(&err);
                assert!(
                    matches!(
                        sqlite_code(&err),
                        Some(rusqlite::ffi::SQLITE_NOTADB | rusqlite::ffi::SQLITE_CORRUPT)
                    ),
                    "{name}: expected Storage(NOTADB | CORRUPT), got {err:?}"
                );
                assert!(
                    shown.contains("not a database") || shown.contains("malformed"),
                    "{name}: unclear error: {shown}"
                );
            }
            Ok(db) => {
                // Opening only reads the schema; a file damaged further in must then fail
                // on reading, typed, rather than look healthy.
                let problems = consistency_problems(&db);
                assert!(
                    !matches!(&problems, Ok(p) if p.is_empty()),
                    "{name}: a damaged file opened and looks healthy"
                );
            }
        }
        assert_eq!(
            std::fs::read(&path).unwrap(),
            content,
            "{name}: a failed open changed the file"
        );
    }
}

// ---------------------------------------------------------------------------------------
// (d) corrupt part JSON

/// Writes `data` into part `part_id` behind the application's back, bypassing the
/// `json_valid` CHECK the way a damaged disk or a foreign writer would.
fn corrupt_part(path: &Path, part_id: &str, data: &str) {
    let conn = rusqlite::Connection::open(path).unwrap();
    conn.pragma_update(None, "ignore_check_constraints", true)
        .unwrap();
    let changed = conn
        .execute(
            "UPDATE parts SET data = ?1, updated_at = updated_at + 1 WHERE id = ?2",
            [data, part_id],
        )
        .unwrap();
    assert_eq!(changed, 1);
}

#[test]
fn corrupt_part_json_is_a_typed_error_naming_the_row() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("scribe.db");
    let (db, messages) = service(&path);
    let session = create_session(&db, None).unwrap();
    let all: Vec<_> = (0..6)
        .map(|i| {
            messages
                .create(user_message(&session, &format!("message number {i}")))
                .unwrap()
        })
        .collect();
    let finish_part = |i: usize| all[i].parts.last().unwrap().id.clone();
    let text_part = |i: usize| all[i].parts[0].id.clone();

    // Not JSON at all (the CHECK bypassed).
    corrupt_part(&path, &finish_part(1), r#"{"type":"finish","reason":"#);
    corrupt_part(&path, &finish_part(2), "not json at all");
    // Valid JSON, so it passes the CHECK, but not a text part.
    corrupt_part(&path, &text_part(3), r#"{"type":"text","text":42}"#);
    // Valid JSON that is not an object.
    corrupt_part(&path, &finish_part(4), "[1,2,3]");
    let corrupt: Vec<(usize, String)> = vec![
        (1, finish_part(1)),
        (2, finish_part(2)),
        (3, text_part(3)),
        (4, finish_part(4)),
    ];

    for (i, part_id) in &corrupt {
        match messages.get(&all[*i].id) {
            Err(MessageError::CorruptPart { part_id: named, .. }) => {
                assert_eq!(&named, part_id, "message {i}: wrong row named");
            }
            other => panic!("message {i}: expected CorruptPart({part_id}), got {other:?}"),
        }
        let shown = error_chain(&messages.get(&all[*i].id).unwrap_err());
        assert!(shown.contains(part_id.as_str()), "row not named: {shown}");
    }
    // The rest of the session still loads, message by message.
    for i in [0, 5] {
        assert_eq!(messages.get(&all[i].id).unwrap(), all[i]);
    }
    // Loading the whole session fails on the first bad row, typed and naming it (there is
    // no lenient whole-session load that skips or flags corrupt parts).
    match messages.list(&session) {
        Ok(list) => assert_eq!(list.len(), all.len()),
        Err(MessageError::CorruptPart { part_id, .. }) => {
            assert!(corrupt.iter().any(|(_, id)| *id == part_id), "{part_id}")
        }
        Err(other) => panic!("list: expected CorruptPart, got {other:?}"),
    }
    // Search still works around the damage (message 3's text is now the number 42).
    let hits = messages
        .search("number", &scribe_message::SearchOptions::default())
        .unwrap();
    assert_eq!(hits.len(), all.len() - 1);

    // A corrupt part can be repaired by overwriting it; then everything loads again.
    for (i, part_id) in &corrupt {
        let replacement = if *i == 3 {
            Part::text("message number 3")
        } else {
            Part::finish(FinishReason::EndTurn, 1)
        };
        messages.update_part(part_id, replacement).unwrap();
    }
    assert_eq!(messages.list(&session).unwrap().len(), all.len());
    let problems = consistency_problems(&db).unwrap();
    assert!(problems.is_empty(), "{problems:#?}");
}

/// A session of three messages whose second message's text part has JSON damaged on disk.
struct Damaged {
    _dir: tempfile::TempDir,
    db: Arc<Database>,
    messages: MessageService,
    session: String,
    all: Vec<scribe_message::Message>,
    bad: String,
}

fn damaged_searchable_part() -> Damaged {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("scribe.db");
    let (db, messages) = service(&path);
    let session = create_session(&db, None).unwrap();
    let all: Vec<_> = (0..3)
        .map(|i| {
            messages
                .create(user_message(&session, &format!("message number {i}")))
                .unwrap()
        })
        .collect();
    let bad = all[1].parts[0].id.clone();
    // No statement can write this: the CHECK (json_valid(data)) on `parts` refuses it on
    // every INSERT or UPDATE. So damage the bytes on disk, as
    // bit rot would (all connections closed, so the WAL is folded into the file).
    drop((db, messages));
    let mut bytes = std::fs::read(&path).unwrap();
    let needle = br#""text":"message number 1"}"#;
    let at: Vec<usize> = bytes
        .windows(needle.len())
        .enumerate()
        .filter(|(_, w)| w == needle)
        .map(|(i, _)| i)
        .collect();
    assert_eq!(
        at.len(),
        1,
        "the part's JSON should be on disk exactly once"
    );
    // Same length, so the record stays well-formed; only the JSON loses its last brace.
    bytes[at[0] + needle.len() - 1] = b' ';
    std::fs::write(&path, bytes).unwrap();
    let (db, messages) = service(&path);
    Damaged {
        _dir: dir,
        db,
        messages,
        session,
        all,
        bad,
    }
}

/// A searchable part (text, reasoning, tool) whose JSON is damaged on disk: loading names
/// the row, and the other messages still load.
#[test]
fn damaged_searchable_part_is_a_typed_error_naming_the_row() {
    // Bound whole: a pattern with `..` would drop the temporary directory right away.
    let damaged = damaged_searchable_part();
    let Damaged {
        messages,
        session,
        all,
        bad,
        ..
    } = &damaged;
    match messages.get(&all[1].id) {
        Err(MessageError::CorruptPart { part_id, .. }) => assert_eq!(&part_id, bad),
        other => panic!("expected CorruptPart({bad}), got {other:?}"),
    }
    assert_eq!(messages.get(&all[0].id).unwrap(), all[0]);
    assert_eq!(messages.get(&all[2].id).unwrap(), all[2]);
    match messages.list(session) {
        Err(MessageError::CorruptPart { part_id, .. }) => assert_eq!(&part_id, bad),
        other => panic!("list: expected CorruptPart({bad}), got {other:?}"),
    }
}

/// The damaged part of [`damaged_searchable_part_is_a_typed_error_naming_the_row`] must not
/// take search, repair or deletion down with it.
///
/// A part's searched text (the view `parts_search` since schema version 11, the generated
/// `parts.search_text` before) is NULL while `data` is not valid JSON (before version 3,
/// reading it raised "malformed JSON" in searches, `update_part` and deletes). Changing or deleting the damaged row makes the triggers
/// rebuild both search indexes, whose entry for it could not be removed exactly.
#[test]
fn damaged_searchable_part_can_be_searched_repaired_and_deleted() {
    let damaged = damaged_searchable_part();
    let Damaged {
        db,
        messages,
        session,
        all,
        bad,
        ..
    } = &damaged;
    let hits = messages
        .search("number", &scribe_message::SearchOptions::default())
        .unwrap();
    assert!(hits.len() >= 2, "{hits:?}");
    messages.update_part(bad, Part::text("repaired")).unwrap();
    assert_eq!(messages.list(session).unwrap().len(), all.len());
    messages.delete(&all[1].id).unwrap();
    scribe_session::SessionService::new(Arc::clone(db))
        .delete(session)
        .unwrap();
}

// ---------------------------------------------------------------------------------------
// The consistency checker itself

/// The checks the other reliability tests rely on do notice a search index that drifted
/// from its rows.
#[test]
fn consistency_checker_notices_index_drift() {
    let dir = tempfile::tempdir().unwrap();
    let (db, messages) = service(&dir.path().join("scribe.db"));
    let session = create_session(&db, None).unwrap();
    for i in 0..20 {
        messages
            .create(user_message(&session, &format!("drift check {i} 漂移检查")))
            .unwrap();
    }
    assert_eq!(consistency_problems(&db).unwrap(), Vec::<String>::new());
    // Each index's rows come from its content view (the trigram index holds the text with
    // CJK characters).
    for (index, view) in [
        ("parts_fts", "parts_search"),
        ("parts_fts_trigram", "parts_search_trigram"),
    ] {
        db.write(|tx| -> scribe_db::Result<_> {
            let tx = tx.conn().unwrap();
            tx.execute(
                &format!(
                    "INSERT INTO {index} ({index}, rowid, search_text)
                     SELECT 'delete', seq, search_text FROM {view} ORDER BY seq LIMIT 1"
                ),
                [],
            )?;
            Ok(())
        })
        .unwrap();
        let problems = consistency_problems(&db).unwrap();
        assert!(
            problems.iter().any(|p| p.contains(index)),
            "{index}: drift not noticed: {problems:#?}"
        );
        db.write(|tx| -> scribe_db::Result<_> {
            let tx = tx.conn().unwrap();
            tx.execute(
                &format!("INSERT INTO {index} ({index}) VALUES ('rebuild')"),
                [],
            )?;
            Ok(())
        })
        .unwrap();
    }
    // Counters are checked too.
    db.write(|tx| -> scribe_db::Result<_> {
        let tx = tx.conn().unwrap();
        tx.execute("UPDATE sessions SET message_count = message_count + 1", [])?;
        Ok(())
    })
    .unwrap();
    let problems = consistency_problems(&db).unwrap();
    assert!(
        problems.iter().any(|p| p.contains("message_count")),
        "{problems:#?}"
    );
}
