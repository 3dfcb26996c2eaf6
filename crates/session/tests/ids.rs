//! The one id rule: an id a user or an importer supplies (a session's, a message's, a
//! part's, a file version's) has at most `scribe_db::ids::MAX_ID_BYTES` bytes, refused
//! with the same typed error on both backends, and only that session fails: the others
//! of the same import are stored. A store that already holds a longer id (written by an
//! older build) still reads and exports.
//!
//! Before, SQLite stored any id and PostgreSQL refused one of ~2,700+ incompressible bytes
//! itself (SQLSTATE 54000, "index row size … exceeds btree version 4 maximum 2704"), so a
//! file imported on one backend failed on the other, and `scribe db copy` of such a store
//! into PostgreSQL failed midway.
//!
//! The PostgreSQL test needs a server: `.ci/with-postgres cargo test -p scribe-session
//! --features postgres --test ids -- --ignored`.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::sync::Arc;

use scribe_db::Database;
use scribe_db::ids::{IdTooLong, MAX_ID_BYTES};
use scribe_db::testing::incompressible;
use scribe_message::{MessageError, MessageService, NewMessage, Part, Role};
use scribe_session::{
    ExportSelection, FileVersion, ImportOutcome, NewSession, SessionError, SessionExport,
    SessionFilter, SessionService,
};

/// Four exported sessions of one message each (the last with a file version), from a
/// scratch SQLite store.
fn exports(dir: &std::path::Path) -> Vec<SessionExport> {
    let db = Arc::new(Database::open(dir.join("source.db")).unwrap());
    let sessions = SessionService::new(Arc::clone(&db));
    let messages = MessageService::new(Arc::clone(&db));
    (0..4)
        .map(|i| {
            let s = sessions
                .create(NewSession {
                    source: "cli".to_owned(),
                    title: Some(format!("session {i}")),
                    ..NewSession::default()
                })
                .unwrap();
            messages
                .create(NewMessage::new(
                    &s.id,
                    Role::User,
                    vec![Part::text(format!("hello {i}"))],
                ))
                .unwrap();
            sessions
                .export(&ExportSelection::One(s.id))
                .unwrap()
                .pop()
                .unwrap()
        })
        .collect()
}

/// The import of four sessions, each with one over-long id of another kind, and one
/// without: each of the four fails alone with `IdTooLong` naming the kind and length
/// (and the session, for an id inside one), the fifth is stored, and nothing of the
/// others is.
fn over_long_ids_fail_their_session_alone(target: &Arc<Database>) {
    let dir = tempfile::tempdir().unwrap();
    let mut list = exports(dir.path());
    let len = 3_000;
    // 0: the session's own id (its messages say they belong to it).
    let long = incompressible(len, 1);
    list[0].session.id.clone_from(&long);
    for m in &mut list[0].messages {
        m.session_id.clone_from(&long);
    }
    // 1: a message's; 2: a part's; 3: a file version's.
    list[1].messages[0].id = incompressible(len, 2);
    list[2].messages[0].parts[0].id = incompressible(len, 3);
    let session = list[3].session.id.clone();
    list[3].files.push(FileVersion {
        id: incompressible(len, 4),
        session_id: session,
        path: "src/lib.rs".to_owned(),
        content: "fn main() {}".to_owned(),
        version: 1,
        created_at: 1,
        updated_at: 1,
    });
    // The one that goes in: at the limit exactly.
    let other = tempfile::tempdir().unwrap();
    let mut fine = exports(other.path()).remove(0);
    let at_limit = incompressible(MAX_ID_BYTES, 5);
    fine.session.id.clone_from(&at_limit);
    for m in &mut fine.messages {
        m.session_id.clone_from(&at_limit);
    }
    list.push(fine);
    let named: Vec<(String, Option<String>)> = list
        .iter()
        .map(|e| (e.session.id.clone(), e.session.title.clone()))
        .collect();

    let service = SessionService::new(Arc::clone(target));
    let outcomes = service.import_many(list, |_| {}).unwrap();
    assert_eq!(outcomes.len(), 5);
    for (i, what) in ["session", "message", "part", "file version"]
        .into_iter()
        .enumerate()
    {
        let err = match &outcomes[i] {
            Err(SessionError::IdTooLong(err)) => err.clone(),
            other => panic!("{what}: {other:?}"),
        };
        assert_eq!((err.what, err.len), (what, len), "{err:?}");
        let text = outcomes[i].as_ref().unwrap_err().to_string();
        assert!(text.starts_with(&format!("{what} id ")), "{what}: {text}");
        assert!(
            text.ends_with("is 3000 bytes long, more than the 1024 an id may have"),
            "{text}"
        );
        // An id inside a session names that session.
        if i > 0 {
            assert_eq!(err.session.as_deref(), Some(named[i].0.as_str()), "{err:?}");
        }
    }
    match &outcomes[4] {
        Ok(ImportOutcome::Imported { session, .. }) => assert_eq!(session.id, at_limit),
        other => panic!("{other:?}"),
    }
    let stored = service
        .list(&SessionFilter {
            limit: None,
            ..SessionFilter::default()
        })
        .unwrap();
    let ids: Vec<&str> = stored.iter().map(|s| s.id.as_str()).collect();
    assert_eq!(ids, [at_limit.as_str()]);
    let messages = MessageService::new(Arc::clone(target))
        .list(&at_limit)
        .unwrap();
    assert_eq!(messages.len(), 1);
}

#[test]
fn over_long_ids_fail_their_session_alone_on_sqlite() {
    let dir = tempfile::tempdir().unwrap();
    let db = Arc::new(Database::open(dir.path().join("scribe.db")).unwrap());
    over_long_ids_fail_their_session_alone(&db);
}

#[cfg(feature = "postgres")]
#[test]
#[ignore = "needs PostgreSQL: run under .ci/with-postgres"]
fn over_long_ids_fail_their_session_alone_on_postgres() {
    let url = scribe_db::testing::fresh_test_database("session_long_ids").unwrap();
    let db = Arc::new(Database::open(&url).unwrap());
    over_long_ids_fail_their_session_alone(&db);
}

/// Every other way in checks the same rule: a session created with a given id, an
/// external (history importer's) session, a message or a part stored directly.
#[test]
fn every_way_in_refuses_an_over_long_id() {
    let dir = tempfile::tempdir().unwrap();
    let db = Arc::new(Database::open(dir.path().join("scribe.db")).unwrap());
    let sessions = SessionService::new(Arc::clone(&db));
    let long = incompressible(MAX_ID_BYTES + 1, 7);
    let too_long = |err: &IdTooLong, what: &str| {
        assert_eq!((err.what, err.len), (what, MAX_ID_BYTES + 1), "{err:?}");
    };
    let err = db
        .write(|tx| sessions.create_tx(tx, &long, &NewSession::default()))
        .unwrap_err();
    let SessionError::IdTooLong(err) = err else {
        panic!("{err:?}")
    };
    too_long(&err, "session");

    let external = scribe_session::ExternalSession {
        id: long.clone(),
        parent_session_id: None,
        kind: scribe_session::SessionKind::Normal,
        source: "codex".to_owned(),
        directory: None,
        title: None,
        model: None,
        model_config: None,
        system_prompt: None,
        billing_provider: None,
        billing_base_url: None,
        cost_status: None,
        cost_source: None,
        pricing_version: None,
        created_at: 1,
        updated_at: 1,
        ended_at: None,
        end_reason: None,
    };
    let err = db
        .write(|tx| sessions.upsert_external_tx(tx, &external))
        .unwrap_err();
    let SessionError::IdTooLong(err) = err else {
        panic!("{err:?}")
    };
    too_long(&err, "session");

    let s = sessions.create(NewSession::default()).unwrap();
    let mut message = NewMessage::new(&s.id, Role::User, vec![Part::text("hi")]).into_message(1);
    message.id.clone_from(&long);
    let err = db
        .write(|tx| scribe_message::store::insert_message(tx, &message))
        .unwrap_err();
    let MessageError::IdTooLong(err) = err else {
        panic!("{err:?}")
    };
    too_long(&err, "message");
    assert_eq!(err.session.as_deref(), Some(s.id.as_str()));

    let mut message = NewMessage::new(&s.id, Role::User, vec![Part::text("hi")]).into_message(1);
    message.parts[0].id.clone_from(&long);
    let err = db
        .write(|tx| scribe_message::bulk::insert_messages(tx, [&message]))
        .unwrap_err();
    let MessageError::IdTooLong(err) = err else {
        panic!("{err:?}")
    };
    too_long(&err, "part");
    assert!(MessageService::new(db).list(&s.id).unwrap().is_empty());
}

/// A store written before the rule (an id of 3,000 bytes, stored through the query layer,
/// as an older build stored it) still lists, loads and exports that session.
#[test]
fn a_store_holding_an_over_long_id_still_reads_and_exports() {
    let dir = tempfile::tempdir().unwrap();
    let db = Arc::new(Database::open(dir.path().join("scribe.db")).unwrap());
    let long = incompressible(3_000, 9);
    db.write(|tx| scribe_db::testing::create_bare_session(tx, &long))
        .unwrap();
    let sessions = SessionService::new(Arc::clone(&db));
    assert_eq!(sessions.get(&long).unwrap().id, long);
    let listed = sessions.list(&SessionFilter::default()).unwrap();
    assert_eq!(listed.len(), 1);
    let exported = sessions
        .export(&ExportSelection::All { source: None })
        .unwrap();
    assert_eq!(exported.len(), 1);
    assert_eq!(exported[0].session.id, long);
}

/// A session's source and user id are indexed as ids are (PostgreSQL's sessions_source,
/// sessions_user) and follow the same rule: 3,000 incompressible bytes are `IdTooLong`
/// naming `source` / `user`, on every way in (create, an importer's session, an export
/// imported), and nothing is stored; at the limit they are stored and listed by. Before,
/// SQLite stored them and PostgreSQL refused them with the server's raw 54000.
fn over_long_source_and_user_are_refused(db: &Arc<Database>) {
    let sessions = SessionService::new(Arc::clone(db));
    let long = incompressible(3_000, 11);
    let refused = |result: Result<(), SessionError>, what: &str| {
        let err = match result {
            Err(SessionError::IdTooLong(err)) => err,
            other => panic!("{what}: {other:?}"),
        };
        assert_eq!((err.what, err.len), (what, 3_000), "{err:?}");
        assert!(err.to_string().starts_with(&format!("{what} id ")), "{err}");
    };
    refused(
        sessions
            .create(NewSession {
                source: long.clone(),
                ..NewSession::default()
            })
            .map(|_| ()),
        "source",
    );
    refused(
        sessions
            .create(NewSession {
                user_id: Some(long.clone()),
                ..NewSession::default()
            })
            .map(|_| ()),
        "user",
    );
    let external = scribe_session::ExternalSession {
        id: "ext-1".to_owned(),
        parent_session_id: None,
        kind: scribe_session::SessionKind::Normal,
        source: long.clone(),
        directory: None,
        title: None,
        model: None,
        model_config: None,
        system_prompt: None,
        billing_provider: None,
        billing_base_url: None,
        cost_status: None,
        cost_source: None,
        pricing_version: None,
        created_at: 1,
        updated_at: 1,
        ended_at: None,
        end_reason: None,
    };
    refused(
        db.write(|tx| sessions.upsert_external_tx(tx, &external).map(|_| ())),
        "source",
    );
    let dir = tempfile::tempdir().unwrap();
    let mut list = exports(dir.path());
    list.truncate(2);
    list[0].session.source.clone_from(&long);
    list[1].session.user_id = Some(long.clone());
    let outcomes = sessions.import_many(list, |_| {}).unwrap();
    let mut outcomes = outcomes.into_iter();
    refused(outcomes.next().unwrap().map(|_| ()), "source");
    refused(outcomes.next().unwrap().map(|_| ()), "user");
    let all = |filter: SessionFilter| {
        sessions
            .list(&SessionFilter {
                limit: None,
                ..filter
            })
            .unwrap()
    };
    assert!(all(SessionFilter::default()).is_empty());

    let at_limit = incompressible(MAX_ID_BYTES, 12);
    let s = sessions
        .create(NewSession {
            source: at_limit.clone(),
            user_id: Some(at_limit.clone()),
            ..NewSession::default()
        })
        .unwrap();
    let listed = all(SessionFilter {
        sources: vec![at_limit.clone()],
        user_id: Some(at_limit.clone()),
        ..SessionFilter::default()
    });
    assert_eq!(listed.len(), 1);
    assert_eq!(listed[0].id, s.id);
    assert_eq!(listed[0].user_id.as_deref(), Some(at_limit.as_str()));
}

#[test]
fn over_long_source_and_user_are_refused_on_sqlite() {
    let dir = tempfile::tempdir().unwrap();
    let db = Arc::new(Database::open(dir.path().join("scribe.db")).unwrap());
    over_long_source_and_user_are_refused(&db);
}

#[cfg(feature = "postgres")]
#[test]
#[ignore = "needs PostgreSQL: run under .ci/with-postgres"]
fn over_long_source_and_user_are_refused_on_postgres() {
    let url = scribe_db::testing::fresh_test_database("session_long_source").unwrap();
    let db = Arc::new(Database::open(&url).unwrap());
    over_long_source_and_user_are_refused(&db);
}
