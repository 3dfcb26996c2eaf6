//! Whole-conversation operations: fork, clear, prune, export → import, and files history.
#![allow(clippy::unwrap_used, clippy::expect_used)]

#[path = "session_common/mod.rs"]
mod common;

use std::collections::BTreeSet;
use std::sync::Arc;

use common::{conversation, drain, env, env_on, message, store_message};
use scribe_tests::Backend;

use rusqlite::Connection;
use scribe_db::{Database, now_ms};
use scribe_message::{Message, Part, Role, store};
use scribe_pubsub::EventKind;
use scribe_session::{
    ExportSelection, ImportOutcome, MAX_TITLE_CHARS, NewSession, Session, SessionError,
    SessionExport, SessionKind, SessionService, UsageDelta,
};

fn raw(e: &common::Env) -> Connection {
    Connection::open(e.path()).unwrap()
}

fn messages_of(db: &Database, session_id: &str) -> Vec<Message> {
    db.read(|tx| store::load_session_messages(tx, session_id))
        .unwrap()
}

/// Ends `id` and moves its end `days` into the past.
fn end_days_ago(e: &common::Env, id: &str, days: i64) {
    e.svc.end(id, "done").unwrap();
    raw(e)
        .execute(
            "UPDATE sessions SET ended_at = ?1 WHERE id = ?2",
            (now_ms() - days * 86_400_000, id),
        )
        .unwrap();
}

fn fork_copies_the_conversation_up_to_the_message(backend: Backend) {
    let e = env_on(backend);
    let original = e
        .svc
        .create(NewSession {
            title: Some("orig".into()),
            model: Some("m".into()),
            system_prompt: Some("sp".into()),
            ..NewSession::default()
        })
        .unwrap();
    let msgs = conversation(&e.db, &original.id);
    let sub = e.svc.subscribe();
    let fork = e.svc.fork(&original.id, &msgs[1].id).unwrap();

    assert_eq!(fork.kind, SessionKind::Fork);
    assert_eq!(
        fork.parent_session_id.as_deref(),
        Some(original.id.as_str())
    );
    assert_eq!(
        (fork.model.as_deref(), fork.system_prompt.as_deref()),
        (Some("m"), Some("sp"))
    );
    assert_eq!(fork.title, None);
    assert_eq!(fork.message_count, 2);
    assert_eq!(fork.tool_call_count, 1);
    assert_eq!(fork.tokens.total(), 0);

    let copies = messages_of(&e.db, &fork.id);
    assert_eq!(copies.len(), 2);
    for (copy, orig) in copies.iter().zip(&msgs[..2]) {
        assert_ne!(copy.id, orig.id);
        assert_eq!(copy.session_id, fork.id);
        assert_eq!(copy.role, orig.role);
        assert_eq!(copy.usage, orig.usage);
        assert_eq!(copy.created_at, orig.created_at);
        let parts = |m: &Message| {
            m.parts
                .iter()
                .map(|p| (p.position, p.part.clone()))
                .collect::<Vec<_>>()
        };
        assert_eq!(parts(copy), parts(orig));
        for (cp, op) in copy.parts.iter().zip(&orig.parts) {
            assert_ne!(cp.id, op.id);
        }
    }
    // Links between copied messages point at the copies.
    assert_eq!(copies[0].parent_id, None);
    assert_eq!(copies[1].parent_id.as_deref(), Some(copies[0].id.as_str()));
    // The original is untouched.
    assert_eq!(messages_of(&e.db, &original.id), msgs);

    let events = drain(&sub);
    assert_eq!(events.len(), 1);
    assert_eq!(
        (events[0].kind, &events[0].payload),
        (EventKind::Created, &fork)
    );

    // Forking at the last message copies everything.
    let full = e.svc.fork(&original.id, &msgs[3].id).unwrap();
    assert_eq!(full.message_count, 4);
}

fn fork_refuses_a_foreign_or_unknown_message_and_rolls_back(backend: Backend) {
    let e = env_on(backend);
    let a = e.svc.create(NewSession::default()).unwrap();
    let b = e.svc.create(NewSession::default()).unwrap();
    conversation(&e.db, &a.id);
    let b_msgs = conversation(&e.db, &b.id);
    let sub = e.svc.subscribe();
    let r = e.svc.fork(&a.id, &b_msgs[0].id);
    assert!(matches!(r, Err(SessionError::InvalidInput(_))), "{r:?}");
    let r = e.svc.fork(&a.id, "msg_nope");
    assert!(
        matches!(
            r,
            Err(SessionError::NotFound {
                what: "message",
                ..
            })
        ),
        "{r:?}"
    );
    assert!(drain(&sub).is_empty());
    assert_eq!(e.svc.count(&Default::default()).unwrap(), 2);
}

fn fork_carries_a_copied_summary_message(backend: Backend) {
    let e = env_on(backend);
    let s = e.svc.create(NewSession::default()).unwrap();
    let msgs = conversation(&e.db, &s.id);
    e.svc
        .update(&s.id, |x| x.summary_message_id = Some(msgs[0].id.clone()))
        .unwrap();
    let fork = e.svc.fork(&s.id, &msgs[2].id).unwrap();
    let copies = messages_of(&e.db, &fork.id);
    assert_eq!(
        fork.summary_message_id.as_deref(),
        Some(copies[0].id.as_str())
    );
}

fn clear_deletes_messages_and_keeps_the_session(backend: Backend) {
    let e = env_on(backend);
    let s = e.svc.create(NewSession::titled("keep me")).unwrap();
    conversation(&e.db, &s.id);
    e.svc
        .add_usage(
            &s.id,
            &UsageDelta {
                api_calls: 1,
                cost_usd: 0.5,
                ..UsageDelta::default()
            },
        )
        .unwrap();
    e.svc.record_file(&s.id, "a.txt", "1").unwrap();
    // A compacted conversation: its summary message goes too, and the link with it.
    let summary = messages_of(&e.db, &s.id)[1].id.clone();
    e.svc
        .update(&s.id, |x| x.summary_message_id = Some(summary.clone()))
        .unwrap();
    let sub = e.svc.subscribe();
    let cleared = e.svc.clear(&s.id).unwrap();
    assert_eq!(cleared.summary_message_id, None);
    assert_eq!((cleared.message_count, cleared.tool_call_count), (0, 0));
    assert_eq!(cleared.title.as_deref(), Some("keep me"));
    assert_eq!(cleared.estimated_cost_usd, 0.5);
    assert!(messages_of(&e.db, &s.id).is_empty());
    // Raw rows of the SQLite file.
    if backend == Backend::Sqlite {
        let n: i64 = raw(&e)
            .query_row(
                "SELECT count(*) FROM parts WHERE session_id = ?1",
                [&s.id],
                |r| r.get(0),
            )
            .unwrap();
        assert_eq!(n, 0);
    }
    assert_eq!(e.svc.latest_files(&s.id).unwrap().len(), 1);
    let events = drain(&sub);
    assert_eq!(events.len(), 1);
    assert_eq!(
        (events[0].kind, &events[0].payload),
        (EventKind::Updated, &cleared)
    );
}

// SQLite only: it checks rows, counters or index entries with raw SQL on the file.
#[test]
fn prune_removes_only_old_ended_sessions() {
    let e = env();
    let old_ended = e
        .svc
        .create(NewSession {
            source: "cli".into(),
            ..NewSession::default()
        })
        .unwrap();
    let old_tg = e
        .svc
        .create(NewSession {
            source: "telegram".into(),
            ..NewSession::default()
        })
        .unwrap();
    let recent = e.svc.create(NewSession::default()).unwrap();
    let active_old = e.svc.create(NewSession::default()).unwrap();
    let child = e
        .svc
        .create_task_session(&old_ended.id, "call_p", None)
        .unwrap();
    conversation(&e.db, &old_ended.id);
    end_days_ago(&e, &old_ended.id, 100);
    end_days_ago(&e, &old_tg.id, 100);
    end_days_ago(&e, &recent.id, 5);
    // Active for a very long time: never pruned.
    raw(&e)
        .execute(
            "UPDATE sessions SET created_at = 0, updated_at = 0 WHERE id = ?1",
            [&active_old.id],
        )
        .unwrap();

    let sub = e.svc.subscribe();
    let dry = e.svc.prune(30, None, true).unwrap();
    assert!(dry.dry_run);
    let ids = |v: &[Session]| v.iter().map(|s| s.id.clone()).collect::<BTreeSet<_>>();
    assert_eq!(
        ids(&dry.sessions),
        BTreeSet::from([old_ended.id.clone(), old_tg.id.clone()])
    );
    assert_eq!(e.svc.count(&Default::default()).unwrap(), 5);
    assert!(drain(&sub).is_empty());

    let by_source = e.svc.prune(30, Some("telegram"), false).unwrap();
    assert_eq!(
        ids(&by_source.sessions),
        BTreeSet::from([old_tg.id.clone()])
    );
    let events = drain(&sub);
    assert_eq!(events.len(), 1);
    assert_eq!(events[0].kind, EventKind::Deleted);
    assert_eq!(events[0].payload.id, old_tg.id);

    let pruned = e.svc.prune(30, None, false).unwrap();
    assert!(!pruned.dry_run);
    assert_eq!(
        ids(&pruned.sessions),
        BTreeSet::from([old_ended.id.clone()])
    );
    assert_eq!(pruned.sessions[0].message_count, 4);
    let events = drain(&sub);
    assert_eq!(events.len(), 2, "{events:?}");
    assert_eq!(
        (events[0].kind, events[0].payload.id.as_str()),
        (EventKind::Deleted, old_ended.id.as_str())
    );
    assert_eq!(
        (events[1].kind, events[1].payload.id.as_str()),
        (EventKind::Updated, child.id.as_str())
    );
    assert_eq!(events[1].payload.parent_session_id, None);

    let left = ids(&e.svc.list(&Default::default()).unwrap());
    assert_eq!(
        left,
        BTreeSet::from([recent.id.clone(), active_old.id.clone(), child.id.clone()])
    );
    let n: i64 = raw(&e)
        .query_row("SELECT count(*) FROM messages", [], |r| r.get(0))
        .unwrap();
    assert_eq!(n, 0);
    // Zero days: everything ended is old enough; active ones still stay.
    let all = e.svc.prune(0, None, false).unwrap();
    assert_eq!(ids(&all.sessions), BTreeSet::from([recent.id.clone()]));
    assert_eq!(e.svc.count(&Default::default()).unwrap(), 2);
}

fn rich_session(e: &common::Env) -> Session {
    let parent = e.svc.create(NewSession::titled("parent")).unwrap();
    let s = e
        .svc
        .create(NewSession {
            parent_session_id: Some(parent.id.clone()),
            kind: SessionKind::Continuation,
            title: Some("Export me #2".into()),
            source: "tui".into(),
            model_config: Some(serde_json::json!({"t": 1})),
            permission: Some(serde_json::json!(["allow"])),
            ..NewSession::default()
        })
        .unwrap();
    let msgs = conversation(&e.db, &s.id);
    let mut extra = message(
        &s.id,
        Role::Assistant,
        vec![
            Part::text("结论"),
            Part::tool("c2", "read", serde_json::json!({"p": "x"})),
        ],
    );
    extra.error = Some(serde_json::json!({"kind": "timeout"}));
    store_message(&e.db, &extra);
    e.svc
        .add_usage(
            &s.id,
            &UsageDelta {
                api_calls: 3,
                tool_calls: 1,
                cost_usd: 1.25,
                actual_cost_usd: Some(0.75),
                ..UsageDelta::default()
            },
        )
        .unwrap();
    e.svc
        .update(&s.id, |x| {
            x.summary_message_id = Some(msgs[3].id.clone());
            x.cost_status = Some("estimated".into());
        })
        .unwrap();
    e.svc.record_file(&s.id, "src/a.rs", "v1").unwrap();
    e.svc.record_file(&s.id, "src/a.rs", "v2").unwrap();
    e.svc.record_file(&s.id, "b.md", "# b").unwrap();
    e.svc.roll_up_into_parent(&s.id).unwrap();
    e.svc.set_compacting(&s.id, true).unwrap();
    e.svc.end(&s.id, "compacted").unwrap()
}

/// The export of session `id` of `e`.
fn exported(e: &common::Env, id: &str) -> SessionExport {
    e.svc
        .export(&ExportSelection::One(id.to_owned()))
        .unwrap()
        .remove(0)
}

fn export_then_import_into_a_fresh_database_is_equal(backend: Backend) {
    let e = env_on(backend);
    let s = rich_session(&e);
    let exported = e.svc.export(&ExportSelection::One(s.id.clone())).unwrap();
    assert_eq!(exported.len(), 1);
    let export = &exported[0];
    assert_eq!(export.session, s);
    assert_eq!(export.messages.len(), 5);
    assert_eq!(export.files.len(), 3);
    assert!(export.rolled_up.is_some());
    assert_eq!(
        s.tool_call_count, 3,
        "two tool parts plus one reported tool call"
    );

    // Through JSON, as a file would carry it.
    let json = serde_json::to_string(&exported).unwrap();
    let back: Vec<SessionExport> = serde_json::from_str(&json).unwrap();
    assert_eq!(back, exported);

    let e2 = env_on(backend);
    let sub = e2.svc.subscribe();
    let outcome = e2.svc.import(&back[0]).unwrap();
    let ImportOutcome::Imported {
        session,
        unlinked_parent,
    } = outcome
    else {
        panic!("{outcome:?}")
    };
    // The parent was not exported along: the link is dropped and reported.
    assert_eq!(unlinked_parent, s.parent_session_id);
    let expected = Session {
        parent_session_id: None,
        ..s.clone()
    };
    assert_eq!(*session, expected);
    assert_eq!(e2.svc.get(&s.id).unwrap(), expected);
    assert_eq!(messages_of(&e2.db, &s.id), export.messages);
    assert_eq!(
        e2.svc.latest_files(&s.id).unwrap(),
        e.svc.latest_files(&s.id).unwrap()
    );
    assert_eq!(
        e2.svc.file_versions(&s.id, "src/a.rs").unwrap(),
        e.svc.file_versions(&s.id, "src/a.rs").unwrap()
    );
    assert_eq!(
        e2.svc.rolled_up_at(&s.id).unwrap(),
        e.svc.rolled_up_at(&s.id).unwrap()
    );
    let events = drain(&sub);
    assert_eq!(events.len(), 1);
    assert_eq!(
        (events[0].kind, &events[0].payload),
        (EventKind::Created, &expected)
    );

    // Importing again is skipped, with a reason, and publishes nothing.
    match e2.svc.import(&back[0]).unwrap() {
        ImportOutcome::Skipped { reason } => assert!(reason.contains(&s.id), "{reason}"),
        other => panic!("{other:?}"),
    }
    assert!(drain(&sub).is_empty());
    assert_eq!(e2.svc.get(&s.id).unwrap(), expected);
}

/// A file's `message_count` is a claim about the messages it carries (a hand-built or
/// edited export may get it wrong); the stored count is the messages stored, as the
/// triggers count them for every other write.
fn import_counts_the_messages_it_stored_not_the_files_claim(backend: Backend) {
    let e = env_on(backend);
    let s = rich_session(&e);
    let mut exported = e.svc.export(&ExportSelection::One(s.id.clone())).unwrap();
    assert_eq!(exported[0].messages.len(), 5);
    exported[0].session.message_count = 99;
    let e2 = env_on(backend);
    let ImportOutcome::Imported { session, .. } = e2.svc.import(&exported[0]).unwrap() else {
        panic!("not imported")
    };
    assert_eq!(session.message_count, 5);
    assert_eq!(e2.svc.get(&s.id).unwrap().message_count, 5);

    // The bulk path too, with one message fewer than the file claims.
    exported[0].messages.pop();
    exported[0].session.message_count = 5;
    let e3 = env_on(backend);
    let outcomes = e3.svc.import_many(exported, |_| {}).unwrap();
    assert!(
        matches!(outcomes[0], Ok(ImportOutcome::Imported { .. })),
        "{outcomes:?}"
    );
    assert_eq!(e3.svc.get(&s.id).unwrap().message_count, 4);
}

/// A session whose messages, parts or file versions another session holds (a file that
/// carries one twice, under two sessions) fails saying which and where, not only "UNIQUE
/// constraint failed: messages.id" (or parts', or files'); the rest go in.
fn import_names_the_message_part_or_file_version_another_session_holds(backend: Backend) {
    let e = env_on(backend);
    let s = rich_session(&e);
    let original = exported(&e, &s.id);
    let mut twin = original.clone();
    twin.session.id = "twin".into();
    twin.session.title = None;
    for m in &mut twin.messages {
        m.session_id = "twin".into();
    }
    twin.files.clear();
    twin.rolled_up = None;
    let first = original.messages[0].id.clone();

    // Both in one import: the twin clashes with the session before it.
    let e2 = env_on(backend);
    let outcomes = e2
        .svc
        .import_many(vec![original.clone(), twin.clone()], |_| {})
        .unwrap();
    assert!(
        matches!(outcomes[0], Ok(ImportOutcome::Imported { .. })),
        "{outcomes:?}"
    );
    let err = outcomes[1].as_ref().unwrap_err().to_string();
    assert!(
        err.contains(&format!(
            "message {first} is already in session {}, earlier in this import",
            s.id
        )),
        "{err}"
    );

    // The twin alone, later: the message is stored already.
    let outcomes = e2.svc.import_many(vec![twin], |_| {}).unwrap();
    let err = outcomes[0].as_ref().unwrap_err().to_string();
    assert!(
        err.contains(&format!(
            "message {first} is already in session {}, stored before",
            s.id
        )),
        "{err}"
    );
    assert!(err.contains("remove it from one of them"), "{err}");

    // New message ids, the parts' ids kept; then new parts, the file versions' ids kept.
    let renamed = |id: &str, keep_parts: bool| {
        let mut v = original.clone();
        v.session.id = id.into();
        v.session.title = None;
        v.rolled_up = None;
        for m in &mut v.messages {
            m.session_id = id.into();
            m.id = format!("{}-{id}", m.id);
            for p in &mut m.parts {
                if !keep_parts {
                    p.id = format!("{}-{id}", p.id);
                }
            }
        }
        for f in &mut v.files {
            f.session_id = id.into();
        }
        v
    };
    let part = original.messages[0].parts[0].id.clone();
    let file = original.files[0].id.clone();
    assert!(!original.files.is_empty());
    let parts_twin = renamed("parts-twin", true);
    let mut files_twin = renamed("files-twin", false);
    files_twin.files.truncate(1);
    let e3 = env_on(backend);
    let outcomes = e3
        .svc
        .import_many(
            vec![original.clone(), parts_twin.clone(), files_twin.clone()],
            |_| {},
        )
        .unwrap();
    let errors: Vec<String> = outcomes[1..]
        .iter()
        .map(|o| o.as_ref().unwrap_err().to_string())
        .collect();
    assert!(
        errors[0].contains(&format!(
            "part {part} is already in session {}, earlier in this import; a part belongs to \
             one session",
            s.id
        )),
        "{errors:?}"
    );
    assert!(
        errors[1].contains(&format!(
            "file version {file} is already in session {}, earlier in this import; a file \
             version belongs to one session",
            s.id
        )),
        "{errors:?}"
    );
    let outcomes = e3.svc.import_many(vec![files_twin], |_| {}).unwrap();
    let err = outcomes[0].as_ref().unwrap_err().to_string();
    assert!(
        err.contains(&format!(
            "file version {file} is already in session {}, stored before",
            s.id
        )),
        "{err}"
    );
    for id in ["parts-twin", "files-twin"] {
        assert!(e3.svc.get(id).is_err(), "{id} was stored");
    }
}

/// `export --all` reads small sessions many at a time (messages, parts, file versions and
/// roll-up marks of a batch in four statements): each session's export is exactly what
/// exporting it alone gives, its files and mark its own, sessions without messages
/// included, in the same order.
fn export_all_in_batches_equals_each_session_alone(backend: Backend) {
    let e = env_on(backend);
    let rich = rich_session(&e);
    let empty = e.svc.create(NewSession::titled("nothing said")).unwrap();
    let plain = e.svc.create(NewSession::titled("plain")).unwrap();
    conversation(&e.db, &plain.id);
    e.svc
        .record_file(&plain.id, "src/a.rs", "plain's own")
        .unwrap();
    let all = e
        .svc
        .export(&ExportSelection::All { source: None })
        .unwrap();
    assert_eq!(all.len(), 4, "the rich session, its parent, empty, plain");
    for export in &all {
        let alone = exported(&e, &export.session.id);
        assert_eq!(export, &alone, "{}", export.session.id);
    }
    let ids: Vec<&str> = all.iter().map(|x| x.session.id.as_str()).collect();
    for id in [&rich.id, &empty.id, &plain.id] {
        assert!(ids.contains(&id.as_str()), "{id}");
    }
    let rich_export = all.iter().find(|x| x.session.id == rich.id).unwrap();
    assert_eq!(rich_export.messages.len(), 5);
    assert_eq!(rich_export.files.len(), 3);
    assert!(rich_export.rolled_up.is_some());
    let plain_export = all.iter().find(|x| x.session.id == plain.id).unwrap();
    assert_eq!(plain_export.files.len(), 1);
    assert!(plain_export.rolled_up.is_none());
    assert!(
        all.iter()
            .find(|x| x.session.id == empty.id)
            .unwrap()
            .messages
            .is_empty()
    );
}

/// Many sessions of one batch that fail (twins clashing with the session before them, a
/// session refused before anything of it is written) among sessions that go in: each
/// failure is its own, said as it would be alone, every other session is stored whole
/// (its messages and counters), and only those stored are announced. The failures after
/// the first are undone by a savepoint each, not by storing the whole batch again.
fn many_failures_in_one_batch_fail_alone(backend: Backend) {
    let e = env_on(backend);
    let s = rich_session(&e);
    let original = exported(&e, &s.id);
    let first = original.messages[0].id.clone();
    let copy = |id: &str, new_ids: bool| {
        let mut v = original.clone();
        v.session.id = id.into();
        v.session.title = None;
        v.rolled_up = None;
        v.files.clear();
        for m in &mut v.messages {
            m.session_id = id.into();
            if new_ids {
                m.id = format!("{}-{id}", m.id);
                for p in &mut m.parts {
                    p.id = format!("{}-{id}", p.id);
                }
            }
        }
        v
    };
    let mut batch = vec![original.clone()];
    let mut expected = vec![true];
    for n in 0..6 {
        batch.push(copy(&format!("good-{n}"), true));
        expected.push(true);
        batch.push(copy(&format!("twin-{n}"), false));
        expected.push(false);
    }
    // Refused before anything of it is written: a message of another session.
    let mut stray = copy("stray", true);
    stray.messages[0].session_id = "elsewhere".into();
    batch.push(stray);
    expected.push(false);
    batch.push(copy("last", true));
    expected.push(true);

    let e2 = env_on(backend);
    let sub = e2.svc.subscribe();
    let outcomes = e2.svc.import_many(batch.clone(), |_| {}).unwrap();
    assert_eq!(outcomes.len(), batch.len());
    for ((outcome, export), stored) in outcomes.iter().zip(&batch).zip(&expected) {
        let id = &export.session.id;
        if *stored {
            assert!(
                matches!(outcome, Ok(ImportOutcome::Imported { .. })),
                "{id}: {outcome:?}"
            );
            let got = e2.svc.get(id).unwrap();
            assert_eq!(got.message_count, 5, "{id}");
            assert_eq!(messages_of(&e2.db, id).len(), 5, "{id}");
        } else {
            let err = outcome.as_ref().unwrap_err().to_string();
            if id.starts_with("twin") {
                assert!(
                    err.contains(&format!(
                        "message {first} is already in session {}, earlier in this import",
                        s.id
                    )),
                    "{id}: {err}"
                );
            } else {
                assert!(err.contains("belongs to session elsewhere"), "{id}: {err}");
            }
            assert!(e2.svc.get(id).is_err(), "{id} was stored");
        }
    }
    let created: Vec<String> = drain(&sub)
        .into_iter()
        .filter(|ev| ev.kind == EventKind::Created)
        .map(|ev| ev.payload.id)
        .collect();
    let stored: Vec<String> = batch
        .iter()
        .zip(&expected)
        .filter(|(_, stored)| **stored)
        .map(|(export, _)| export.session.id.clone())
        .collect();
    assert_eq!(created, stored);
    // The stored sessions' parts are searchable; nothing of the failed ones is.
    let hits: BTreeSet<String> = scribe_message::MessageService::new(Arc::clone(&e2.db))
        .search("结论", &scribe_message::SearchOptions::default())
        .unwrap()
        .into_iter()
        .map(|hit| hit.session_id)
        .collect();
    assert_eq!(hits, stored.into_iter().collect::<BTreeSet<_>>());
}

/// An export whose file versions break the files table's rules (an edited or another
/// program's file: a version numbered 0 or below, a path with the same version twice)
/// fails that session alone with words that say which, and nothing of it is stored; the
/// others go in. Before, the version below 1 failed the whole import with SQLite's "CHECK
/// constraint failed: version > 0".
fn import_refuses_file_versions_the_files_table_cannot_hold(backend: Backend) {
    let e = env_on(backend);
    let s = rich_session(&e);
    let original = exported(&e, &s.id);
    let variant = |id: &str, change: &dyn Fn(&mut Vec<scribe_session::FileVersion>)| {
        let mut v = original.clone();
        v.session.id = id.into();
        v.session.title = None;
        v.session.parent_session_id = None;
        v.rolled_up = None;
        v.messages.clear();
        for f in &mut v.files {
            f.session_id = id.into();
            f.id = format!("{}-{id}", f.id);
        }
        change(&mut v.files);
        v
    };
    let zero = variant("zero", &|files| files[0].version = 0);
    let negative = variant("negative", &|files| files[0].version = i64::MIN);
    let twice = variant("twice", &|files| {
        files[1].path = files[0].path.clone();
        files[1].version = files[0].version;
    });
    let fine = variant("fine", &|_| {});
    let e2 = env_on(backend);
    let outcomes = e2
        .svc
        .import_many(vec![zero, negative, twice, fine], |_| {})
        .unwrap();
    let errors: Vec<String> = outcomes[..3]
        .iter()
        .map(|o| o.as_ref().unwrap_err().to_string())
        .collect();
    let path = &original.files[0].path;
    assert!(
        errors[0].contains(&format!(
            "of {path} is numbered 0; a path's versions are numbered from 1"
        )),
        "{errors:?}"
    );
    assert!(
        errors[1].contains(&format!("is numbered {}", i64::MIN)),
        "{errors:?}"
    );
    assert!(
        errors[2].contains(&format!(
            "{path} has version {} twice",
            original.files[0].version
        )),
        "{errors:?}"
    );
    assert!(
        matches!(outcomes[3], Ok(ImportOutcome::Imported { .. })),
        "{outcomes:?}"
    );
    for id in ["zero", "negative", "twice"] {
        assert!(e2.svc.get(id).is_err(), "{id} was stored");
    }

    // A message, a part or a file version given twice in one session.
    let mut repeated = original.clone();
    repeated.session.title = None;
    repeated.rolled_up = None;
    let again = repeated.messages[1].clone();
    repeated.messages.push(again.clone());
    let mut part_twice = original.clone();
    part_twice.session.title = None;
    part_twice.rolled_up = None;
    let mut part = part_twice.messages[0].parts[0].clone();
    part.position = 99;
    part_twice.messages[0].parts.push(part.clone());
    let file_twice = variant("file-twice", &|files| {
        let mut copy = files[0].clone();
        copy.version = 99;
        files.push(copy);
    });
    for (export, what) in [
        (repeated, format!("message {}", again.id)),
        (part_twice, format!("part {}", part.id)),
        (file_twice, "file version".to_owned()),
    ] {
        let e3 = env_on(backend);
        let outcomes = e3.svc.import_many(vec![export.clone()], |_| {}).unwrap();
        let err = outcomes[0].as_ref().unwrap_err().to_string();
        assert!(err.contains(&what) && err.contains("twice"), "{err}");
        assert!(e3.svc.get(&export.session.id).is_err());
    }
    assert_eq!(
        e2.svc.file_versions("fine", path).unwrap().len(),
        original.files.iter().filter(|f| &f.path == path).count()
    );
}

fn export_all_by_source_round_trips_with_lineage(backend: Backend) {
    let e = env_on(backend);
    let s = rich_session(&e);
    e.svc
        .create(NewSession {
            source: "cli".into(),
            title: Some("other".into()),
            ..NewSession::default()
        })
        .unwrap();
    let all = e
        .svc
        .export(&ExportSelection::All { source: None })
        .unwrap();
    assert_eq!(all.len(), 3);
    let tui = e
        .svc
        .export(&ExportSelection::All {
            source: Some("tui".into()),
        })
        .unwrap();
    assert_eq!(tui.len(), 1);
    assert_eq!(tui[0].session.id, s.id);

    let e2 = env_on(backend);
    for export in &all {
        assert!(matches!(
            e2.svc.import(export).unwrap(),
            ImportOutcome::Imported {
                unlinked_parent: None,
                ..
            }
        ));
    }
    // Parents come first in an export, so every link survives.
    for export in &all {
        let session = e2.svc.get(&export.session.id).unwrap();
        assert_eq!(session, export.session);
        assert_eq!(messages_of(&e2.db, &session.id), export.messages);
    }
    let json_a = serde_json::to_value(&all).unwrap();
    let json_b = serde_json::to_value(
        e2.svc
            .export(&ExportSelection::All { source: None })
            .unwrap(),
    )
    .unwrap();
    assert_eq!(json_a, json_b);
}

fn import_conflicts_roll_back_completely(backend: Backend) {
    let e = env_on(backend);
    let s = rich_session(&e);
    let export = exported(&e, &s.id);

    // A different session holding the title is no conflict: the session is imported
    // under the next title of its lineage, as the history importers number it.
    let e2 = env_on(backend);
    let holder = e2.svc.create(NewSession::titled("Export me #2")).unwrap();
    let ImportOutcome::Imported { session, .. } = e2.svc.import(&export).unwrap() else {
        panic!("skipped");
    };
    assert_eq!(session.title.as_deref(), Some("Export me #3"));
    assert_eq!(
        e2.svc.get(&s.id).unwrap().title.as_deref(),
        Some("Export me #3")
    );
    assert_eq!(e2.svc.get(&holder.id).unwrap().title, holder.title);

    // A message id already present: nothing of the session stays.
    let e3 = env_on(backend);
    let host = e3.svc.create(NewSession::default()).unwrap();
    let sub = e3.svc.subscribe();
    let mut clash = export.messages[2].clone();
    clash.session_id = host.id.clone();
    store_message(&e3.db, &clash);
    let r = e3.svc.import(&export);
    assert!(matches!(r, Err(SessionError::Conflict { .. })), "{r:?}");
    assert!(matches!(
        e3.svc.get(&s.id),
        Err(SessionError::NotFound { .. })
    ));
    // Raw rows of the SQLite file.
    if backend == Backend::Sqlite {
        let n: i64 = Connection::open(e3.path())
            .unwrap()
            .query_row("SELECT count(*) FROM parts", [], |r| r.get(0))
            .unwrap();
        assert_eq!(n, clash.parts.len() as i64);
    }

    // A message that claims another session.
    let mut stray = export.clone();
    stray.messages[0].session_id = "ses_other".into();
    let r = env_on(backend).svc.import(&stray);
    assert!(matches!(r, Err(SessionError::InvalidInput(_))), "{r:?}");
    assert!(drain(&sub).is_empty());
}

// SQLite only: it checks rows, counters or index entries with raw SQL on the file.
#[test]
fn import_applies_the_title_rules() {
    let e = env();
    let s = rich_session(&e);
    let export = exported(&e, &s.id);
    let count = |env: &common::Env, table: &str| -> i64 {
        raw(env)
            .query_row(&format!("SELECT count(*) FROM {table}"), [], |r| r.get(0))
            .unwrap()
    };

    // An un-normalized title is stored normalized, like create does.
    let mut messy = export.clone();
    messy.session.title = Some("  Imported\u{200B}   title\t".into());
    let e2 = env();
    let ImportOutcome::Imported { session, .. } = e2.svc.import(&messy).unwrap() else {
        panic!("skipped");
    };
    assert_eq!(session.title.as_deref(), Some("Imported title"));
    assert_eq!(e2.svc.resolve_by_title("Imported title").unwrap().id, s.id);

    // A title equal to another's after normalization is taken: the next of its lineage.
    let e3 = env();
    let holder = e3.svc.create(NewSession::titled("Imported title")).unwrap();
    let ImportOutcome::Imported { session, .. } = e3.svc.import(&messy).unwrap() else {
        panic!("skipped");
    };
    assert_eq!(session.title.as_deref(), Some("Imported title #2"));
    assert_eq!(e3.svc.resolve_by_title("Imported title").unwrap().id, s.id);
    assert_eq!(
        e3.svc.get(&holder.id).unwrap().title.as_deref(),
        Some("Imported title")
    );

    // Bad titles are typed errors and nothing of the session is stored.
    let bad = [
        ("\u{200B} \t".to_owned(), "invalid"),
        ("x".repeat(MAX_TITLE_CHARS + 1), "too long"),
    ];
    for (title, what) in bad {
        let mut export = export.clone();
        export.session.title = Some(title);
        let e4 = env();
        let sub = e4.svc.subscribe();
        let r = e4.svc.import(&export);
        match what {
            "invalid" => assert!(matches!(r, Err(SessionError::InvalidTitle { .. })), "{r:?}"),
            _ => assert!(
                matches!(r, Err(SessionError::TitleTooLong { len, max })
                    if len == MAX_TITLE_CHARS + 1 && max == MAX_TITLE_CHARS),
                "{r:?}"
            ),
        }
        for table in ["sessions", "messages", "parts", "files", "session_rollups"] {
            assert_eq!(count(&e4, table), 0, "{what}: {table}");
        }
        assert!(drain(&sub).is_empty());
    }
}

fn export_of_unknown_session_is_not_found(backend: Backend) {
    let e = env_on(backend);
    let r = e.svc.export(&ExportSelection::One("ses_nope".into()));
    assert!(matches!(r, Err(SessionError::NotFound { .. })), "{r:?}");
    assert!(
        e.svc
            .export(&ExportSelection::All { source: None })
            .unwrap()
            .is_empty()
    );
}

fn files_history_numbers_versions_per_path(backend: Backend) {
    let e = env_on(backend);
    let s = e.svc.create(NewSession::default()).unwrap();
    let other = e.svc.create(NewSession::default()).unwrap();
    let sub = e.svc.subscribe();
    let v1 = e.svc.record_file(&s.id, "src/lib.rs", "one").unwrap();
    let v2 = e.svc.record_file(&s.id, "src/lib.rs", "two").unwrap();
    let b1 = e.svc.record_file(&s.id, "README.md", "readme").unwrap();
    let o1 = e
        .svc
        .record_file(&other.id, "src/lib.rs", "elsewhere")
        .unwrap();
    assert_eq!(
        (v1.version, v2.version, b1.version, o1.version),
        (1, 2, 1, 1)
    );
    assert!(v1.id.starts_with("fil_"));
    assert_eq!(
        e.svc.file_versions(&s.id, "src/lib.rs").unwrap(),
        vec![v1.clone(), v2.clone()]
    );
    assert!(e.svc.file_versions(&s.id, "nope").unwrap().is_empty());
    assert_eq!(e.svc.latest_files(&s.id).unwrap(), vec![b1, v2.clone()]);
    assert_eq!(e.svc.file_version(&s.id, "src/lib.rs", 1).unwrap(), v1);
    let r = e.svc.file_version(&s.id, "src/lib.rs", 3);
    assert!(
        matches!(
            r,
            Err(SessionError::NotFound {
                what: "file version",
                ..
            })
        ),
        "{r:?}"
    );
    let r = e.svc.record_file(&s.id, "  ", "x");
    assert!(matches!(r, Err(SessionError::InvalidInput(_))), "{r:?}");
    // Files are not session events.
    assert!(drain(&sub).is_empty());
}

fn concurrent_file_versions_never_collide(backend: Backend) {
    let e = env_on(backend);
    let s = e.svc.create(NewSession::default()).unwrap();
    let svc = Arc::new(SessionService::new(Arc::clone(&e.db)));
    let handles: Vec<_> = (0..4)
        .map(|t| {
            let svc = Arc::clone(&svc);
            let id = s.id.clone();
            std::thread::spawn(move || {
                for i in 0..10 {
                    svc.record_file(&id, "f", &format!("{t}-{i}")).unwrap();
                }
            })
        })
        .collect();
    for h in handles {
        h.join().unwrap();
    }
    let versions: Vec<i64> = e
        .svc
        .file_versions(&s.id, "f")
        .unwrap()
        .iter()
        .map(|f| f.version)
        .collect();
    assert_eq!(versions, (1..=40).collect::<Vec<_>>());
}

scribe_tests::backends!(
    import_conflicts_roll_back_completely,
    clear_deletes_messages_and_keeps_the_session,
    fork_copies_the_conversation_up_to_the_message,
    fork_carries_a_copied_summary_message,
    export_then_import_into_a_fresh_database_is_equal,
    import_counts_the_messages_it_stored_not_the_files_claim,
    import_names_the_message_part_or_file_version_another_session_holds,
    many_failures_in_one_batch_fail_alone,
    export_all_in_batches_equals_each_session_alone,
    import_refuses_file_versions_the_files_table_cannot_hold,
    files_history_numbers_versions_per_path,
    concurrent_file_versions_never_collide,
);

// Filtered session lists (sea-query filters) run on both backends through the handle.
scribe_tests::backends!(
    fork_refuses_a_foreign_or_unknown_message_and_rolls_back,
    export_all_by_source_round_trips_with_lineage,
    export_of_unknown_session_is_not_found,
);
