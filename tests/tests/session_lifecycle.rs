//! Session lifecycle: create (all kinds), get, list, update/save, delete, archive, end,
//! reopen, lineage — with the exact events each change publishes, and none on failure.
#![allow(clippy::unwrap_used, clippy::expect_used)]

#[path = "session_common/mod.rs"]
mod common;

use std::time::Duration;

use common::{conversation, drain, env_on};
use scribe_tests::Backend;

use rusqlite::Connection;
use scribe_db::queries as q;
use scribe_message::TokenUsage;
use scribe_pubsub::EventKind;
use scribe_session::{
    CompactionClaim, NewSession, ParentFilter, RollUp, Session, SessionError, SessionFilter,
    SessionKind, SessionOrder, SessionService, UsageDelta,
};
use serde_json::json;

fn create_and_get_round_trip_with_created_event(backend: Backend) {
    let e = env_on(backend);
    let sub = e.svc.subscribe();
    let new = NewSession {
        source: "telegram".into(),
        user_id: Some("u1".into()),
        directory: Some("/src/app".into()),
        title: Some("  Fix   the build ".into()),
        model: Some("anthropic/claude".into()),
        model_config: Some(json!({"temperature": 0.2})),
        system_prompt: Some("be brief".into()),
        permission: Some(json!({"bash": "ask"})),
        billing_provider: Some("anthropic".into()),
        ..NewSession::default()
    };
    let created = e.svc.create(new).unwrap();
    assert!(created.id.starts_with("ses_"));
    assert_eq!(created.kind, SessionKind::Normal);
    assert_eq!(created.title.as_deref(), Some("Fix the build"));
    assert_eq!(created.model_config, Some(json!({"temperature": 0.2})));
    assert_eq!(created.permission, Some(json!({"bash": "ask"})));
    assert_eq!(created.source, "telegram");
    assert!(created.is_active() && !created.is_archived());
    assert_eq!(created.created_at, created.updated_at);

    let got = e.svc.get(&created.id).unwrap();
    assert_eq!(got, created);

    let events = drain(&sub);
    assert_eq!(events.len(), 1);
    assert_eq!(events[0].kind, EventKind::Created);
    assert_eq!(events[0].payload, created);
}

fn unknown_ids_are_not_found_and_publish_nothing(backend: Backend) {
    let e = env_on(backend);
    let sub = e.svc.subscribe();
    let nf = |r: Result<_, SessionError>| {
        assert!(
            matches!(&r, Err(SessionError::NotFound { what: "session", id }) if id == "ses_missing"),
            "{r:?}"
        );
    };
    nf(e.svc.get("ses_missing").map(|_| ()));
    nf(e.svc
        .update("ses_missing", |s| s.directory = Some("x".into()))
        .map(|_| ()));
    nf(e.svc.delete("ses_missing").map(|_| ()));
    nf(e.svc.archive("ses_missing").map(|_| ()));
    nf(e.svc.unarchive("ses_missing").map(|_| ()));
    nf(e.svc.end("ses_missing", "x").map(|_| ()));
    nf(e.svc.reopen("ses_missing").map(|_| ()));
    nf(e.svc.ancestors("ses_missing").map(|_| ()));
    nf(e.svc.descendants("ses_missing").map(|_| ()));
    nf(e.svc.continuation_tip("ses_missing").map(|_| ()));
    nf(e.svc.create_title_session("ses_missing").map(|_| ()));
    nf(e.svc
        .create_task_session("ses_missing", "call_1", None)
        .map(|_| ()));
    nf(e.svc.create_continuation("ses_missing").map(|_| ()));
    nf(e.svc.clear("ses_missing").map(|_| ()));
    nf(e.svc.fork("ses_missing", "msg_x").map(|_| ()));
    nf(e.svc.record_file("ses_missing", "a.rs", "x").map(|_| ()));
    nf(e.svc.latest_files("ses_missing").map(|_| ()));
    let r = e.svc.create(NewSession {
        parent_session_id: Some("ses_gone".into()),
        ..NewSession::default()
    });
    assert!(
        matches!(
            r,
            Err(SessionError::NotFound {
                what: "parent session",
                ..
            })
        ),
        "{r:?}"
    );
    assert!(drain(&sub).is_empty());
}

fn invalid_creation_input_is_refused(backend: Backend) {
    let e = env_on(backend);
    let r = e.svc.create(NewSession {
        source: "  ".into(),
        ..NewSession::default()
    });
    assert!(matches!(r, Err(SessionError::InvalidInput(_))), "{r:?}");
    let r = e.svc.create(NewSession {
        kind: SessionKind::Task,
        ..NewSession::default()
    });
    assert!(matches!(r, Err(SessionError::InvalidInput(_))), "{r:?}");
    let parent = e.svc.create(NewSession::default()).unwrap();
    let r = e.svc.create_task_session(&parent.id, "", None);
    assert!(matches!(r, Err(SessionError::InvalidInput(_))), "{r:?}");
    assert_eq!(e.svc.count(&SessionFilter::default()).unwrap(), 1);
}

fn title_task_and_continuation_sessions_are_linked_children(backend: Backend) {
    let e = env_on(backend);
    let parent = e
        .svc
        .create(NewSession {
            source: "tui".into(),
            user_id: Some("u".into()),
            model: Some("m".into()),
            title: Some("Refactor".into()),
            ..NewSession::default()
        })
        .unwrap();
    let sub = e.svc.subscribe();

    let title = e.svc.create_title_session(&parent.id).unwrap();
    assert_eq!(title.id, format!("title-{}", parent.id));
    assert_eq!(title.kind, SessionKind::Title);
    assert_eq!(title.parent_session_id.as_deref(), Some(parent.id.as_str()));
    assert_eq!(title.title, None);
    assert_eq!(
        (title.source.as_str(), title.model.as_deref()),
        ("tui", Some("m"))
    );
    let again = e.svc.create_title_session(&parent.id);
    assert!(
        matches!(again, Err(SessionError::Conflict { .. })),
        "{again:?}"
    );

    let task = e
        .svc
        .create_task_session(&parent.id, "toolu_01ABC", Some("explore"))
        .unwrap();
    assert_eq!(task.id, "toolu_01ABC");
    assert_eq!(task.kind, SessionKind::Task);
    assert_eq!(task.parent_session_id.as_deref(), Some(parent.id.as_str()));
    assert_eq!(task.user_id.as_deref(), Some("u"));
    assert_eq!(task.title.as_deref(), Some("explore"));
    let dup = e.svc.create_task_session(&parent.id, "toolu_01ABC", None);
    assert!(matches!(dup, Err(SessionError::Conflict { .. })), "{dup:?}");

    let cont = e.svc.create_continuation(&parent.id).unwrap();
    assert_eq!(cont.kind, SessionKind::Continuation);
    assert_eq!(cont.title.as_deref(), Some("Refactor #2"));
    let cont2 = e.svc.create_continuation(&cont.id).unwrap();
    assert_eq!(cont2.title.as_deref(), Some("Refactor #3"));

    let events = drain(&sub);
    let kinds: Vec<_> = events
        .iter()
        .map(|ev| (ev.kind, ev.payload.id.clone()))
        .collect();
    assert_eq!(
        kinds,
        vec![
            (EventKind::Created, title.id.clone()),
            (EventKind::Created, task.id.clone()),
            (EventKind::Created, cont.id.clone()),
            (EventKind::Created, cont2.id.clone()),
        ]
    );
    assert_eq!(events[1].payload, task);

    let children = e.svc.children(&parent.id).unwrap();
    assert_eq!(children.len(), 3);
}

/// Sets the creation time of `id`: list order must not depend on how fast sessions were
/// created (the clock may not move between two creates).
fn set_created_at(e: &common::Env, id: &str, at: i64) {
    if e.t.backend == Backend::Postgres {
        postgres::Client::connect(&e.t.location, postgres::NoTls)
            .unwrap()
            .execute(
                "UPDATE sessions SET created_at = $1, updated_at = $1 WHERE id = $2",
                &[&at, &id],
            )
            .unwrap();
        return;
    }
    Connection::open(e.path())
        .unwrap()
        .execute(
            "UPDATE sessions SET created_at = ?1, updated_at = ?1 WHERE id = ?2",
            (at, id),
        )
        .unwrap();
}

fn list_filters_and_orders_through_the_builder(backend: Backend) {
    let e = env_on(backend);
    let a = e
        .svc
        .create(NewSession {
            source: "cli".into(),
            user_id: Some("u1".into()),
            title: Some("alpha_1".into()),
            ..NewSession::default()
        })
        .unwrap();
    let b = e
        .svc
        .create(NewSession {
            source: "telegram".into(),
            user_id: Some("u2".into()),
            title: Some("beta%".into()),
            ..NewSession::default()
        })
        .unwrap();
    let c = e.svc.create_task_session(&a.id, "call_9", None).unwrap();
    // Matches "a_1" and "%" only if `_` / `%` were wildcards.
    let d = e.svc.create(NewSession::titled("alphaX1 100")).unwrap();
    set_created_at(&e, &a.id, 1_000);
    set_created_at(&e, &b.id, 2_000);
    set_created_at(&e, &c.id, 3_000);
    set_created_at(&e, &d.id, 500);
    e.svc.archive(&b.id).unwrap();
    e.svc.end(&c.id, "done").unwrap();

    let ids = |f: SessionFilter| -> Vec<String> {
        e.svc.list(&f).unwrap().into_iter().map(|s| s.id).collect()
    };
    let all_newest_first = vec![c.id.clone(), b.id.clone(), a.id.clone(), d.id.clone()];
    // The default order is newest first (issue 5), whatever was touched last.
    assert_eq!(SessionFilter::default().order, SessionOrder::CreatedDesc);
    assert_eq!(ids(SessionFilter::default()), all_newest_first);
    assert_eq!(
        ids(SessionFilter {
            order: SessionOrder::CreatedDesc,
            ..SessionFilter::default()
        }),
        all_newest_first
    );
    // Active since: by the last change, whenever created (archiving b and ending c were
    // changes, now), where created since counts the creation only.
    let since = |updated_after: i64, created_after: Option<i64>| {
        ids(SessionFilter {
            updated_after: Some(updated_after),
            created_after,
            ..SessionFilter::default()
        })
    };
    assert_eq!(
        since(900, None),
        vec![c.id.clone(), b.id.clone(), a.id.clone()]
    );
    assert_eq!(since(2_500, None), vec![c.id.clone(), b.id.clone()]);
    assert_eq!(since(2_500, Some(2_500)), vec![c.id.clone()]);
    // Most recently active first is still there when asked for.
    e.svc.set_title(&d.id, Some("alphaX1 100 renamed")).unwrap();
    assert_eq!(
        ids(SessionFilter {
            order: SessionOrder::UpdatedDesc,
            limit: Some(1),
            ..SessionFilter::default()
        }),
        vec![d.id.clone()]
    );
    assert_eq!(
        ids(SessionFilter {
            sources: vec!["telegram".into()],
            ..SessionFilter::default()
        }),
        vec![b.id.clone()]
    );
    // The user filter: c inherits a's user.
    assert_eq!(
        ids(SessionFilter {
            user_id: Some("u1".into()),
            ..SessionFilter::default()
        }),
        vec![c.id.clone(), a.id.clone()]
    );
    assert_eq!(
        ids(SessionFilter {
            user_id: Some("nobody".into()),
            ..SessionFilter::default()
        }),
        Vec::<String>::new()
    );
    assert_eq!(
        ids(SessionFilter {
            parent: ParentFilter::Root,
            order: SessionOrder::CreatedAsc,
            ..SessionFilter::default()
        }),
        vec![d.id.clone(), a.id.clone(), b.id.clone()]
    );
    assert_eq!(
        ids(SessionFilter {
            parent: ParentFilter::Child,
            ..SessionFilter::default()
        }),
        vec![c.id.clone()]
    );
    assert_eq!(
        ids(SessionFilter {
            parent: ParentFilter::Of(a.id.clone()),
            ..SessionFilter::default()
        }),
        vec![c.id.clone()]
    );
    assert_eq!(
        ids(SessionFilter {
            parent: ParentFilter::Of(b.id.clone()),
            ..SessionFilter::default()
        }),
        Vec::<String>::new()
    );
    assert_eq!(
        ids(SessionFilter {
            archived: Some(true),
            ..SessionFilter::default()
        }),
        vec![b.id.clone()]
    );
    assert_eq!(
        ids(SessionFilter {
            archived: Some(false),
            ..SessionFilter::default()
        }),
        vec![c.id.clone(), a.id.clone(), d.id.clone()]
    );
    assert_eq!(
        ids(SessionFilter {
            ended: Some(true),
            ..SessionFilter::default()
        }),
        vec![c.id.clone()]
    );
    assert_eq!(
        ids(SessionFilter {
            ended: Some(false),
            ..SessionFilter::default()
        }),
        vec![b.id.clone(), a.id.clone(), d.id.clone()]
    );
    assert_eq!(
        ids(SessionFilter {
            ended: Some(false),
            archived: Some(false),
            parent: ParentFilter::Root,
            ..SessionFilter::default()
        }),
        vec![a.id.clone(), d.id.clone()]
    );
    // `%` and `_` are literal in "title contains".
    assert_eq!(
        ids(SessionFilter {
            title_contains: Some("%".into()),
            ..SessionFilter::default()
        }),
        vec![b.id.clone()]
    );
    assert_eq!(
        ids(SessionFilter {
            title_contains: Some("a_1".into()),
            ..SessionFilter::default()
        }),
        vec![a.id.clone()]
    );
    assert_eq!(
        ids(SessionFilter {
            title_contains: Some("a%".into()),
            ..SessionFilter::default()
        }),
        vec![b.id.clone()]
    );
    assert_eq!(
        ids(SessionFilter {
            title_contains: Some("_".into()),
            ..SessionFilter::default()
        }),
        vec![a.id.clone()]
    );
    assert_eq!(
        ids(SessionFilter {
            title_contains: Some("X1 1".into()),
            ..SessionFilter::default()
        }),
        vec![d.id.clone()]
    );
    assert_eq!(
        ids(SessionFilter {
            limit: Some(1),
            offset: Some(1),
            ..SessionFilter::default()
        }),
        vec![b.id.clone()]
    );
    assert_eq!(e.svc.count(&SessionFilter::default()).unwrap(), 4);
    assert_eq!(
        e.svc
            .count(&SessionFilter {
                archived: Some(false),
                ended: Some(false),
                ..SessionFilter::default()
            })
            .unwrap(),
        2
    );
}

/// "Title contains" ignores case in every script, not only ASCII letters: `über` finds
/// `Über`, `école` finds `ÉCOLE`, `αβγ` finds `ΑΒΓ`; accents still count, and `%` and `_`
/// stay literal.
fn the_title_filter_folds_case_in_every_script(backend: Backend) {
    let e = env_on(backend);
    let greek = e
        .svc
        .create(NewSession::titled("Über ÉCOLE ΑΒΓ 50%"))
        .unwrap();
    let plain = e.svc.create(NewSession::titled("uber ecole")).unwrap();
    let ids = |text: &str| -> Vec<String> {
        let mut ids: Vec<String> = e
            .svc
            .list(&SessionFilter {
                title_contains: Some(text.into()),
                ..SessionFilter::default()
            })
            .unwrap()
            .into_iter()
            .map(|s| s.id)
            .collect();
        ids.sort();
        ids
    };
    for text in ["über", "ÜBER", "école", "École", "αβγ", "Αβγ", "0%"] {
        assert_eq!(ids(text), vec![greek.id.clone()], "{text} on {backend:?}");
    }
    for text in ["uber", "ECOLE"] {
        assert_eq!(ids(text), vec![plain.id.clone()], "{text} on {backend:?}");
    }
    let mut both = vec![greek.id.clone(), plain.id.clone()];
    both.sort();
    assert_eq!(ids("E"), both, "on {backend:?}");
    assert!(ids("ü_er").is_empty(), "on {backend:?}");
}

fn equal_creation_times_list_by_id_descending(backend: Backend) {
    let e = env_on(backend);
    let mut ids: Vec<String> = (0..4)
        .map(|_| e.svc.create(NewSession::default()).unwrap().id)
        .collect();
    for id in &ids {
        set_created_at(&e, id, 42);
    }
    let listed = |order: SessionOrder| -> Vec<String> {
        e.svc
            .list(&SessionFilter {
                order,
                ..SessionFilter::default()
            })
            .unwrap()
            .into_iter()
            .map(|s| s.id)
            .collect()
    };
    ids.sort();
    assert_eq!(listed(SessionOrder::CreatedAsc), ids);
    ids.reverse();
    assert_eq!(listed(SessionOrder::CreatedDesc), ids);
    assert_eq!(
        e.svc
            .list(&SessionFilter::default())
            .unwrap()
            .into_iter()
            .map(|s| s.id)
            .collect::<Vec<_>>(),
        ids
    );
}

fn update_and_save_change_mutable_fields_only(backend: Backend) {
    let e = env_on(backend);
    let s = e.svc.create(NewSession::titled("first")).unwrap();
    let sub = e.svc.subscribe();
    let updated = e
        .svc
        .update(&s.id, |s| {
            s.title = Some(" second\u{200B} ".into());
            s.model = Some("openai/gpt".into());
            s.permission = Some(json!({"edit": "deny"}));
            s.cost_status = Some("estimated".into());
            // Not mutable through update: ignored.
            s.message_count = 99;
            s.kind = SessionKind::Fork;
            s.source = "hacked".into();
        })
        .unwrap();
    assert_eq!(updated.title.as_deref(), Some("second"));
    assert_eq!(updated.model.as_deref(), Some("openai/gpt"));
    assert_eq!(updated.permission, Some(json!({"edit": "deny"})));
    assert_eq!(updated.cost_status.as_deref(), Some("estimated"));
    assert_eq!(
        (updated.message_count, updated.kind, updated.source.as_str()),
        (0, SessionKind::Normal, "cli")
    );
    assert!(updated.updated_at >= s.updated_at);

    let mut edited = updated.clone();
    edited.directory = Some("/tmp/x".into());
    edited.title = None;
    let saved = e.svc.save(&edited).unwrap();
    assert_eq!(saved.directory.as_deref(), Some("/tmp/x"));
    assert_eq!(saved.title, None);
    assert_eq!(e.svc.get(&s.id).unwrap(), saved);

    let events = drain(&sub);
    assert_eq!(events.len(), 2);
    assert_eq!(
        (events[0].kind, &events[0].payload),
        (EventKind::Updated, &updated)
    );
    assert_eq!(
        (events[1].kind, &events[1].payload),
        (EventKind::Updated, &saved)
    );

    // A summary message must exist and belong to the session.
    let r = e
        .svc
        .update(&s.id, |s| s.summary_message_id = Some("msg_nope".into()));
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
    let other = e.svc.create(NewSession::default()).unwrap();
    let msgs = conversation(&e.db, &other.id);
    let r = e
        .svc
        .update(&s.id, |s| s.summary_message_id = Some(msgs[0].id.clone()));
    assert!(matches!(r, Err(SessionError::InvalidInput(_))), "{r:?}");
    let mine = conversation(&e.db, &s.id);
    let with_summary = e
        .svc
        .update(&s.id, |s| s.summary_message_id = Some(mine[3].id.clone()))
        .unwrap();
    assert_eq!(
        with_summary.summary_message_id.as_deref(),
        Some(mine[3].id.as_str())
    );
    drain(&sub);
    assert!(
        e.svc
            .save(&{
                let mut x = saved.clone();
                x.id = "ses_nope".into();
                x
            })
            .is_err()
    );
    assert!(drain(&sub).is_empty());
}

fn end_first_wins_and_reopen_clears(backend: Backend) {
    let e = env_on(backend);
    let s = e.svc.create(NewSession::default()).unwrap();
    let sub = e.svc.subscribe();
    let ended = e.svc.end(&s.id, "user_exit").unwrap();
    assert_eq!(ended.end_reason.as_deref(), Some("user_exit"));
    let ended_at = ended.ended_at.unwrap();
    assert!(!ended.is_active());

    let again = e.svc.end(&s.id, "timeout").unwrap();
    assert_eq!(again.end_reason.as_deref(), Some("user_exit"));
    assert_eq!(again.ended_at, Some(ended_at));
    assert_eq!(again, ended);

    let reopened = e.svc.reopen(&s.id).unwrap();
    assert_eq!(
        (reopened.ended_at, reopened.end_reason.as_deref()),
        (None, None)
    );
    // Reopening an active session changes nothing.
    assert_eq!(e.svc.reopen(&s.id).unwrap(), reopened);

    let events = drain(&sub);
    assert_eq!(events.len(), 2, "{events:?}");
    assert_eq!(
        (events[0].kind, &events[0].payload),
        (EventKind::Updated, &ended)
    );
    assert_eq!(
        (events[1].kind, &events[1].payload),
        (EventKind::Updated, &reopened)
    );

    let ended2 = e.svc.end(&s.id, "compacted").unwrap();
    assert_eq!(ended2.end_reason.as_deref(), Some("compacted"));
}

fn archive_and_unarchive_publish_only_real_changes(backend: Backend) {
    let e = env_on(backend);
    let s = e.svc.create(NewSession::default()).unwrap();
    let sub = e.svc.subscribe();
    let archived = e.svc.archive(&s.id).unwrap();
    assert!(archived.is_archived());
    assert_eq!(
        e.svc.archive(&s.id).unwrap().archived_at,
        archived.archived_at
    );
    let un = e.svc.unarchive(&s.id).unwrap();
    assert!(!un.is_archived());
    assert_eq!(e.svc.unarchive(&s.id).unwrap(), un);
    let events = drain(&sub);
    assert_eq!(events.len(), 2);
    assert_eq!(
        (events[0].kind, &events[0].payload),
        (EventKind::Updated, &archived)
    );
    assert_eq!(
        (events[1].kind, &events[1].payload),
        (EventKind::Updated, &un)
    );
}

fn compacting_flag_sets_and_clears_with_updated_events(backend: Backend) {
    let e = env_on(backend);
    let s = e.svc.create(NewSession::default()).unwrap();
    let sub = e.svc.subscribe();
    let on = e.svc.set_compacting(&s.id, true).unwrap();
    let started = on.compacting_at.unwrap();
    assert!(started >= s.created_at);
    assert!(on.updated_at >= started);
    assert_eq!(e.svc.get(&s.id).unwrap(), on);
    let off = e.svc.set_compacting(&s.id, false).unwrap();
    assert_eq!(off.compacting_at, None);
    assert!(off.updated_at >= on.updated_at);
    assert_eq!(e.svc.get(&s.id).unwrap(), off);

    let events = drain(&sub);
    assert_eq!(events.len(), 2, "{events:?}");
    assert_eq!(
        (events[0].kind, &events[0].payload),
        (EventKind::Updated, &on)
    );
    assert_eq!(
        (events[1].kind, &events[1].payload),
        (EventKind::Updated, &off)
    );

    // Clearing a mark that is not there changes nothing and publishes nothing.
    let again = e.svc.set_compacting(&s.id, false).unwrap();
    assert_eq!(again, off);
    assert!(drain(&sub).is_empty());

    // An unknown session: not found, nothing published.
    let r = e.svc.set_compacting("ses_missing", true);
    assert!(
        matches!(&r, Err(SessionError::NotFound { what: "session", id }) if id == "ses_missing"),
        "{r:?}"
    );
    assert!(drain(&sub).is_empty());
}

fn delete_cascades_to_messages_and_unlinks_children(backend: Backend) {
    let e = env_on(backend);
    let parent = e.svc.create(NewSession::titled("parent")).unwrap();
    let child = e
        .svc
        .create_task_session(&parent.id, "call_7", None)
        .unwrap();
    conversation(&e.db, &parent.id);
    e.svc
        .record_file(&parent.id, "src/main.rs", "fn main() {}")
        .unwrap();
    let before = e.svc.get(&parent.id).unwrap();
    assert_eq!(before.message_count, 4);
    assert_eq!(before.tool_call_count, 1);

    let sub = e.svc.subscribe();
    let deleted = e.svc.delete(&parent.id).unwrap();
    assert_eq!(deleted, before);
    let child_now = e.svc.get(&child.id).unwrap();
    assert_eq!(child_now.parent_session_id, None);
    let events = drain(&sub);
    assert_eq!(events.len(), 2);
    assert_eq!(
        (events[0].kind, &events[0].payload),
        (EventKind::Deleted, &before)
    );
    assert_eq!(
        (events[1].kind, &events[1].payload),
        (EventKind::Updated, &child_now)
    );

    // Raw rows of the SQLite file.
    if backend == Backend::Sqlite {
        let path = e.path();
        let conn = Connection::open(path).unwrap();
        for table in ["messages", "parts", "files"] {
            let n: i64 = conn
                .query_row(
                    &format!("SELECT count(*) FROM {table} WHERE session_id = ?1"),
                    [&parent.id],
                    |r| r.get(0),
                )
                .unwrap();
            assert_eq!(n, 0, "{table}");
        }
    }
    assert!(matches!(
        e.svc.get(&parent.id),
        Err(SessionError::NotFound { .. })
    ));
    // The freed title can be used again.
    e.svc.create(NewSession::titled("parent")).unwrap();
}

fn ancestors_descendants_and_continuation_tip(backend: Backend) {
    let e = env_on(backend);
    let root = e.svc.create(NewSession::titled("root")).unwrap();
    let c1 = e.svc.create_continuation(&root.id).unwrap();
    let task = e.svc.create_task_session(&c1.id, "call_a", None).unwrap();
    let c2 = e.svc.create_continuation(&c1.id).unwrap();
    let grandchild = e.svc.create_task_session(&task.id, "call_b", None).unwrap();

    let ids = |v: Vec<scribe_session::Session>| v.into_iter().map(|s| s.id).collect::<Vec<_>>();
    assert_eq!(
        ids(e.svc.ancestors(&grandchild.id).unwrap()),
        vec![root.id.clone(), c1.id.clone(), task.id.clone()]
    );
    assert!(e.svc.ancestors(&root.id).unwrap().is_empty());
    assert_eq!(
        ids(e.svc.descendants(&root.id).unwrap()),
        vec![
            c1.id.clone(),
            task.id.clone(),
            c2.id.clone(),
            grandchild.id.clone()
        ]
    );
    assert_eq!(e.svc.continuation_tip(&root.id).unwrap().id, c2.id);
    assert_eq!(e.svc.continuation_tip(&c2.id).unwrap().id, c2.id);
    // A task child is not part of the compaction chain.
    assert_eq!(e.svc.continuation_tip(&task.id).unwrap().id, task.id);
}

fn notify_changed_publishes_the_current_state(backend: Backend) {
    let e = env_on(backend);
    let s = e.svc.create(NewSession::default()).unwrap();
    let sub = e.svc.subscribe();
    let got = e.svc.notify_changed(&s.id).unwrap();
    let events = drain(&sub);
    assert_eq!(events.len(), 1);
    assert_eq!(
        (events[0].kind, &events[0].payload),
        (EventKind::Updated, &got)
    );
}

/// Every change a process makes to a session moves its `updated_at` forward, even when
/// that process's clock is behind the time stored (another process's clock is ahead) or
/// stands still (two changes in one millisecond): the clock's reading, or one past the
/// stored time. The time of the event itself (`ended_at`, `archived_at`, `compacting_at`)
/// is the clock's reading as it is. Each change returns the row as stored. (Before, all
/// but `update` and `add_usage` wrote the clock's reading into `updated_at`, so a session
/// changed by a process a minute behind went a minute back in every list ordered by it.)
fn a_process_whose_clock_is_behind_never_moves_a_session_back(backend: Backend) {
    let t = scribe_tests::TestDb::new(backend);
    // Two processes' clocks, both standing still, one a minute ahead of the other.
    let process = |at: i64| SessionService::new(t.reopen_at(at));
    let behind_at = 1_600_000_000_000;
    let ahead = process(behind_at + 60_000);
    let behind = process(behind_at);

    let s = ahead.create(NewSession::default()).unwrap();
    assert_eq!(s.updated_at, behind_at + 60_000);
    let mut forward = scribe_tests::MovesForward::new(
        &s,
        |s: &Session| s.updated_at,
        |s: &Session| behind.get(&s.id).unwrap(),
    );
    let mut moved = |what: &str, changed: Session| forward.check(what, changed);

    let archived = moved("archive", behind.archive(&s.id).unwrap());
    assert_eq!(archived.archived_at, Some(behind_at));
    moved("unarchive", behind.unarchive(&s.id).unwrap());
    let ended = moved("end", behind.end(&s.id, "user_exit").unwrap());
    assert_eq!(ended.ended_at, Some(behind_at));
    moved("reopen", behind.reopen(&s.id).unwrap());
    let compacting = moved(
        "set_compacting",
        behind.set_compacting(&s.id, true).unwrap(),
    );
    assert_eq!(compacting.compacting_at, Some(behind_at));
    moved(
        "clear compacting",
        behind.set_compacting(&s.id, false).unwrap(),
    );
    let claimed = match behind
        .claim_compaction(&s.id, Duration::from_secs(60))
        .unwrap()
    {
        CompactionClaim::Claimed(session) => session,
        other => panic!("not claimed: {other:?}"),
    };
    let claimed = moved("claim_compaction", claimed);
    assert_eq!(claimed.compacting_at, Some(behind_at));
    let settings = behind
        .database()
        .write(|tx| behind.set_prompt_settings_tx(tx, &s.id, "other-model", None))
        .unwrap();
    moved("set_prompt_settings_tx", settings);
    // The usage and the billed amount: two changes in one transaction.
    let delta = UsageDelta {
        tokens: TokenUsage {
            input: 5,
            ..TokenUsage::default()
        },
        api_calls: 1,
        tool_calls: 0,
        cost_usd: 0.25,
        actual_cost_usd: Some(0.5),
    };
    moved("add_usage", behind.add_usage(&s.id, &delta).unwrap());
    // The summary pointer an import restores (SetSessionSummaryMessage; none here: a
    // stored message would move updated_at to its creation time).
    behind
        .database()
        .write(|tx| {
            let now = tx.now();
            tx.q()
                .set_session_summary_message(&q::SetSessionSummaryMessageParams {
                    summary_message_id: None,
                    now,
                    id: &s.id,
                })
        })
        .unwrap();
    moved("set_session_summary_message", behind.get(&s.id).unwrap());
    // A child's roll-up changes the parent.
    let child = ahead
        .create_task_session(&s.id, "call_behind", None)
        .unwrap();
    let RollUp::RolledUp { parent } = behind.roll_up_into_parent(&child.id).unwrap() else {
        panic!("not rolled up");
    };
    moved("roll_up_into_parent", *parent);
    // The process ahead is now behind the stored time too.
    moved("archive (ahead)", ahead.archive(&s.id).unwrap());
}

scribe_tests::backends!(
    a_process_whose_clock_is_behind_never_moves_a_session_back,
    delete_cascades_to_messages_and_unlinks_children,
    create_and_get_round_trip_with_created_event,
    title_task_and_continuation_sessions_are_linked_children,
    end_first_wins_and_reopen_clears,
    archive_and_unarchive_publish_only_real_changes,
    compacting_flag_sets_and_clears_with_updated_events,
    ancestors_descendants_and_continuation_tip,
    notify_changed_publishes_the_current_state,
    unknown_ids_are_not_found_and_publish_nothing,
    update_and_save_change_mutable_fields_only,
);

// Filtered session lists (sea-query filters) run on both backends through the handle.
scribe_tests::backends!(
    invalid_creation_input_is_refused,
    list_filters_and_orders_through_the_builder,
    the_title_filter_folds_case_in_every_script,
);

// Sets equal creation times with raw SQL on the SQLite file.
scribe_tests::sqlite_only!(
    "raw SQL on the SQLite file",
    equal_creation_times_list_by_id_descending,
);
