//! MessageService: create, get, list, update, part changes, finish, usage, delete, the
//! store functions, and the exact events each publishes (none for a failed change).
#![allow(clippy::unwrap_used, clippy::expect_used)]

#[path = "message_common/mod.rs"]
mod common;

use common::{completed_tool, count, counters, say, service, service_on, session};
use scribe_tests::{Backend, MovesForward, TestDb};

use scribe_message::{
    FinishReason, Message, MessageError, MessageUpdate, NewMessage, Part, Role, StoredPart,
    TokenUsage, ToolState,
};
use scribe_message::{MessageService, store};
use scribe_pubsub::{EventKind, TryRecvError};
use serde_json::json;

fn create_persists_message_and_parts_and_publishes_created(backend: Backend) {
    let (_dir, svc) = service_on(backend);
    let ses = session(&svc);
    let sub = svc.subscribe();
    let parts_sub = svc.subscribe_parts();

    let mut new = NewMessage::new(
        &ses,
        Role::Assistant,
        vec![
            Part::text("hello"),
            Part::tool("call_1", "bash", json!({"cmd": "ls"})),
        ],
    );
    new.model = Some("claude-x".into());
    new.provider = Some("anthropic".into());
    new.agent = Some("build".into());
    let msg = svc.create(new).unwrap();
    assert!(msg.id.starts_with("msg_"));
    assert_eq!(msg.parts.len(), 2);
    assert_eq!(msg.parts[0].position, 0);
    assert_eq!(msg.parts[1].position, 1);
    assert!(msg.parts.iter().all(|p| p.id.starts_with("prt_")));
    // An assistant message stays open.
    assert_eq!(msg.finish_reason, None);
    assert_eq!(msg.finished_at, None);

    let event = sub.try_recv().unwrap();
    assert_eq!(event.kind, EventKind::Created);
    assert_eq!(event.payload, msg);
    assert_eq!(sub.try_recv(), Err(TryRecvError::Empty));
    assert_eq!(parts_sub.try_recv(), Err(TryRecvError::Empty));

    assert_eq!(svc.get(&msg.id).unwrap(), msg);
    assert_eq!(svc.list(&ses).unwrap(), vec![msg]);
    assert_eq!(counters(&svc, &ses).0, 1);
    assert_eq!(counters(&svc, &ses).1, 1);
}

fn non_assistant_messages_get_a_finish_part(backend: Backend) {
    let (_dir, svc) = service_on(backend);
    let ses = session(&svc);
    let msg = say(&svc, &ses, Role::User, "hi");
    assert_eq!(msg.finish_reason, Some(FinishReason::EndTurn));
    assert_eq!(msg.finished_at, Some(msg.created_at));
    assert_eq!(msg.parts.len(), 2);
    assert!(matches!(&msg.parts[1].part, Part::Finish(f) if f.reason == FinishReason::EndTurn));
    // An explicit finish part is kept, not doubled.
    let own = svc
        .create(NewMessage::new(
            &ses,
            Role::System,
            vec![Part::text("rules"), Part::finish(FinishReason::Canceled, 5)],
        ))
        .unwrap();
    assert_eq!(own.parts.len(), 2);
    assert_eq!(own.finish_reason, Some(FinishReason::Canceled));
}

fn create_in_unknown_session_is_not_found_and_publishes_nothing(backend: Backend) {
    let (_dir, svc) = service_on(backend);
    let sub = svc.subscribe();
    let err = svc
        .create(NewMessage::new(
            "ses_missing",
            Role::User,
            vec![Part::text("x")],
        ))
        .unwrap_err();
    assert!(
        matches!(&err, MessageError::NotFound { what: "session", id } if id == "ses_missing"),
        "{err:?}"
    );
    assert!(err.is_not_found());
    let err = svc
        .create(NewMessage::new("", Role::User, vec![]))
        .unwrap_err();
    assert!(matches!(err, MessageError::InvalidInput(_)));
    assert_eq!(sub.try_recv(), Err(TryRecvError::Empty));
    // The raw row counts read the SQLite file.
    if backend == Backend::Sqlite {
        assert_eq!(count(&svc, "SELECT count(*) FROM messages"), 0);
        assert_eq!(count(&svc, "SELECT count(*) FROM parts"), 0);
    }
}

/// The failed inserts a PostgreSQL transaction cannot ask about afterwards (a failed
/// statement aborts it): a message stored as given into an unknown session is not found,
/// two parts at one position are the caller's invalid input, a taken id a conflict; none
/// leaves a row behind.
fn store_insert_failures_say_why(backend: Backend) {
    let (_dir, svc) = service_on(backend);
    let session = session(&svc);
    let kept = svc
        .create(NewMessage::new(
            &session,
            Role::User,
            vec![Part::text("a"), Part::text("b")],
        ))
        .unwrap();
    let mut copy = kept.clone();
    copy.id = format!("{}_copy", kept.id);
    for part in &mut copy.parts {
        part.id = format!("{}_copy", part.id);
    }
    copy.session_id = "ses_missing".to_owned();
    let err = svc
        .database()
        .write(|tx| store::insert_message(tx, &copy))
        .unwrap_err();
    assert!(
        matches!(&err, MessageError::NotFound { what: "session", id } if id == "ses_missing"),
        "{err:?}"
    );

    copy.session_id.clone_from(&session);
    copy.parts[1].position = copy.parts[0].position;
    let err = svc
        .database()
        .write(|tx| store::insert_message(tx, &copy))
        .unwrap_err();
    assert!(matches!(err, MessageError::InvalidInput(_)), "{err:?}");

    let err = svc
        .database()
        .write(|tx| store::insert_message(tx, &kept))
        .unwrap_err();
    assert!(
        matches!(&err, MessageError::Db(db) if db.kind() == scribe_db::ErrorKind::UniqueViolation),
        "{err:?}"
    );
    assert_eq!(svc.list(&session).unwrap(), vec![kept]);
}

fn get_list_and_delete_of_unknown_ids_are_not_found(backend: Backend) {
    let (_dir, svc) = service_on(backend);
    assert!(matches!(
        svc.get("msg_nope"),
        Err(MessageError::NotFound {
            what: "message",
            ..
        })
    ));
    assert!(matches!(
        svc.list("ses_nope"),
        Err(MessageError::NotFound {
            what: "session",
            ..
        })
    ));
    assert!(matches!(
        svc.delete("msg_nope"),
        Err(MessageError::NotFound {
            what: "message",
            ..
        })
    ));
    assert!(matches!(
        svc.update_part("prt_nope", Part::text("x")),
        Err(MessageError::NotFound { what: "part", .. })
    ));
    assert!(matches!(
        svc.append_part("msg_nope", Part::text("x")),
        Err(MessageError::NotFound {
            what: "message",
            ..
        })
    ));
    assert!(matches!(
        svc.finish("msg_nope", FinishReason::EndTurn),
        Err(MessageError::NotFound {
            what: "message",
            ..
        })
    ));
    assert!(matches!(
        svc.add_usage("msg_nope", TokenUsage::default(), 0.0),
        Err(MessageError::NotFound {
            what: "message",
            ..
        })
    ));
    assert!(matches!(
        svc.update("msg_nope", MessageUpdate::default()),
        Err(MessageError::NotFound {
            what: "message",
            ..
        })
    ));
    assert!(matches!(
        svc.delete_part("prt_nope"),
        Err(MessageError::NotFound { what: "part", .. })
    ));
    let ses = session(&svc);
    assert_eq!(svc.list(&ses).unwrap(), Vec::<Message>::new());
}

fn list_is_in_creation_order_with_parts_in_position_order(backend: Backend) {
    let (_dir, svc) = service_on(backend);
    let ses = session(&svc);
    let other = session(&svc);
    let mut ids = Vec::new();
    for i in 0..30 {
        let role = if i % 2 == 0 {
            Role::User
        } else {
            Role::Assistant
        };
        ids.push(say(&svc, &ses, role, &format!("message {i}")).id);
        say(&svc, &other, Role::User, "elsewhere");
    }
    let listed = svc.list(&ses).unwrap();
    assert_eq!(listed.iter().map(|m| m.id.clone()).collect::<Vec<_>>(), ids);
    for m in &listed {
        assert_eq!(m.session_id, ses);
        let positions: Vec<i64> = m.parts.iter().map(|p| p.position).collect();
        let mut sorted = positions.clone();
        sorted.sort_unstable();
        assert_eq!(positions, sorted);
    }
    assert_eq!(listed[3].text(), "message 3");
}

fn update_changes_fields_and_publishes_updated(backend: Backend) {
    let (_dir, svc) = service_on(backend);
    let ses = session(&svc);
    let msg = svc
        .create(NewMessage::new(
            &ses,
            Role::Assistant,
            vec![Part::text("a")],
        ))
        .unwrap();
    let sub = svc.subscribe();
    let updated = svc
        .update(
            &msg.id,
            MessageUpdate {
                model: Some(Some("gpt-x".into())),
                error: Some(Some(json!({"kind": "overloaded"}))),
                usage: Some(TokenUsage {
                    input: 10,
                    ..TokenUsage::default()
                }),
                is_summary: Some(true),
                ..MessageUpdate::default()
            },
        )
        .unwrap();
    assert_eq!(updated.model.as_deref(), Some("gpt-x"));
    assert_eq!(updated.error, Some(json!({"kind": "overloaded"})));
    assert_eq!(updated.usage.input, 10);
    assert!(updated.is_summary);
    assert_eq!(updated.parts, msg.parts, "parts untouched");
    assert!(updated.updated_at >= msg.updated_at);
    let event = sub.try_recv().unwrap();
    assert_eq!((event.kind, &event.payload), (EventKind::Updated, &updated));
    assert_eq!(svc.get(&msg.id).unwrap(), updated);

    // Bad input fails without an event.
    let err = svc
        .update(
            &msg.id,
            MessageUpdate {
                cost_usd: Some(f64::NAN),
                ..MessageUpdate::default()
            },
        )
        .unwrap_err();
    assert!(matches!(err, MessageError::InvalidInput(_)));
    assert_eq!(sub.try_recv(), Err(TryRecvError::Empty));
}

fn update_part_changes_one_part_and_follows_the_tool_state_machine(backend: Backend) {
    let (_dir, svc) = service_on(backend);
    let ses = session(&svc);
    let msg = svc
        .create(NewMessage::new(
            &ses,
            Role::Assistant,
            vec![
                Part::text("running a tool"),
                Part::tool("call_9", "grep", json!({"pattern": "needle"})),
            ],
        ))
        .unwrap();
    let text_before = msg.parts[0].clone();
    let tool_id = msg.parts[1].id.clone();
    let Part::Tool(mut tool) = msg.parts[1].part.clone() else {
        panic!("tool part expected")
    };
    let sub = svc.subscribe();
    let parts_sub = svc.subscribe_parts();

    tool.state.start(100).unwrap();
    let running = svc.update_part(&tool_id, Part::Tool(tool.clone())).unwrap();
    assert_eq!(running.part, Part::Tool(tool.clone()));
    assert_eq!(running.position, 1);
    let event = parts_sub.try_recv().unwrap();
    assert_eq!(event.kind, EventKind::Updated);
    assert_eq!(event.payload.message_id, msg.id);
    assert_eq!(event.payload.session_id, ses);
    assert_eq!(event.payload.part, running);

    tool.state
        .complete("found 3", "grep needle", json!({"n": 3}), 200)
        .unwrap();
    let done = svc.update_part(&tool_id, Part::Tool(tool.clone())).unwrap();
    assert!(matches!(&done.part, Part::Tool(t) if t.state.output() == Some("found 3")));
    assert_eq!(parts_sub.try_recv().unwrap().payload.part, done);

    let reloaded = svc.get(&msg.id).unwrap();
    assert_eq!(
        reloaded.parts[0], text_before,
        "the other part is untouched"
    );
    assert_eq!(reloaded.parts[1], done);

    // completed → running is refused, nothing changes, no event.
    let mut back = tool.clone();
    back.state = ToolState::Running { started_at: 300 };
    let err = svc.update_part(&tool_id, Part::Tool(back)).unwrap_err();
    assert!(
        matches!(&err, MessageError::IllegalToolTransition { part_id, .. } if *part_id == tool_id),
        "{err:?}"
    );
    // pending → completed skips running.
    let fresh = svc
        .append_part(&msg.id, Part::tool("call_10", "ls", json!(null)))
        .unwrap();
    let _ = parts_sub.try_recv().unwrap();
    let skip = completed_tool("call_10", "ls", json!(null), "x");
    if let Part::Tool(mut t) = skip {
        t.state = ToolState::Completed {
            output: "x".into(),
            title: String::new(),
            metadata: json!(null),
            started_at: 1,
            ended_at: 2,
        };
        assert!(matches!(
            svc.update_part(&fresh.id, Part::Tool(t)),
            Err(MessageError::IllegalToolTransition { .. })
        ));
    }
    // The call id is the tool part's identity.
    let mut renamed = tool.clone();
    renamed.call_id = "call_other".into();
    assert!(matches!(
        svc.update_part(&tool_id, Part::Tool(renamed)),
        Err(MessageError::InvalidInput(_))
    ));
    assert_eq!(svc.get(&msg.id).unwrap().parts[1], done);
    assert_eq!(parts_sub.try_recv(), Err(TryRecvError::Empty));
    assert_eq!(
        sub.try_recv(),
        Err(TryRecvError::Empty),
        "no message events"
    );
}

fn append_and_delete_part_publish_part_events_and_keep_counters(backend: Backend) {
    let (_dir, svc) = service_on(backend);
    let ses = session(&svc);
    let msg = svc
        .create(NewMessage::new(
            &ses,
            Role::Assistant,
            vec![Part::text("a")],
        ))
        .unwrap();
    let parts_sub = svc.subscribe_parts();
    let appended = svc
        .append_part(
            &msg.id,
            completed_tool("c1", "read", json!({"path": "x"}), "out"),
        )
        .unwrap();
    assert_eq!(appended.position, 1);
    let event = parts_sub.try_recv().unwrap();
    assert_eq!(event.kind, EventKind::Created);
    assert_eq!(event.payload.part, appended);
    assert_eq!(counters(&svc, &ses).1, 1);

    let deleted = svc.delete_part(&appended.id).unwrap();
    assert_eq!(deleted, appended);
    let event = parts_sub.try_recv().unwrap();
    assert_eq!(event.kind, EventKind::Deleted);
    assert_eq!(event.payload.part, appended);
    assert_eq!(counters(&svc, &ses).1, 0);
    assert_eq!(svc.get(&msg.id).unwrap().parts.len(), 1);
}

fn finish_sets_reason_and_a_single_finish_part(backend: Backend) {
    let (_dir, svc) = service_on(backend);
    let ses = session(&svc);
    let msg = svc
        .create(NewMessage::new(
            &ses,
            Role::Assistant,
            vec![Part::text("a")],
        ))
        .unwrap();
    let sub = svc.subscribe();
    let parts_sub = svc.subscribe_parts();
    let done = svc.finish(&msg.id, FinishReason::ToolUse).unwrap();
    assert_eq!(done.finish_reason, Some(FinishReason::ToolUse));
    assert!(done.finished_at.is_some());
    assert_eq!(done.parts.len(), 2);
    assert_eq!(parts_sub.try_recv().unwrap().kind, EventKind::Created);
    let event = sub.try_recv().unwrap();
    assert_eq!((event.kind, &event.payload), (EventKind::Updated, &done));

    let again = svc.finish(&msg.id, FinishReason::EndTurn).unwrap();
    assert_eq!(
        again.parts.len(),
        2,
        "the finish part is replaced, not added"
    );
    assert!(matches!(&again.parts[1].part, Part::Finish(f) if f.reason == FinishReason::EndTurn));
    assert_eq!(parts_sub.try_recv().unwrap().kind, EventKind::Updated);
    assert_eq!(sub.try_recv().unwrap().payload, again);
}

fn add_usage_adds_atomically_from_many_threads(backend: Backend) {
    let (_dir, svc) = service_on(backend);
    let ses = session(&svc);
    let msg = svc
        .create(NewMessage::new(&ses, Role::Assistant, vec![]))
        .unwrap();
    let sub = svc.subscribe_with_buffer_for_test();
    std::thread::scope(|s| {
        for _ in 0..4 {
            s.spawn(|| {
                for _ in 0..10 {
                    svc.add_usage(
                        &msg.id,
                        TokenUsage {
                            input: 1,
                            output: 2,
                            cache_read: 3,
                            cache_write: 4,
                            reasoning: 5,
                        },
                        0.25,
                    )
                    .unwrap();
                }
            });
        }
    });
    let total = svc.get(&msg.id).unwrap();
    assert_eq!(total.usage.input, 40);
    assert_eq!(total.usage.reasoning, 200);
    assert!((total.cost_usd - 10.0).abs() < 1e-9);
    assert_eq!(sub.try_iter().filter_map(Result::ok).count(), 40);
    assert!(matches!(
        svc.add_usage(&msg.id, TokenUsage::default(), -1.0),
        Err(MessageError::InvalidInput(_))
    ));
}

/// A message's summed cost stops at the largest finite amount on both backends, as a
/// session's does (`session_usage.rs`), where each added cost is valid but the sum is not
/// finite. (Before: `inf` stored on SQLite, "value out of range: overflow" on PostgreSQL.)
fn summed_message_cost_stops_at_the_largest_finite_amount(backend: Backend) {
    let (_dir, svc) = service_on(backend);
    let ses = session(&svc);
    let msg = svc
        .create(NewMessage::new(&ses, Role::Assistant, vec![]))
        .unwrap();
    let big = f64::MAX * 0.75;
    assert_eq!(
        svc.add_usage(&msg.id, TokenUsage::default(), big)
            .unwrap()
            .cost_usd,
        big
    );
    let after = svc.add_usage(&msg.id, TokenUsage::default(), big).unwrap();
    assert_eq!(after.cost_usd, f64::MAX);
    assert_eq!(svc.get(&msg.id).unwrap().cost_usd, f64::MAX);
    let again = svc.add_usage(&msg.id, TokenUsage::default(), 1.0).unwrap();
    assert_eq!(again.cost_usd, f64::MAX);
}

/// A message's token totals stop at `i64::MAX` on both backends, counter by counter, when
/// each added count is valid but the sum is not (an import that claims 9e18 tokens, twice).
/// Before, SQLite turned the overflowed sum into a REAL that the write's `RETURNING` could
/// not read as an integer, so the write failed, and PostgreSQL refused it ("bigint out of
/// range"). A negative count is refused, with nothing written: totals only grow.
fn summed_message_tokens_stop_at_the_largest_count(backend: Backend) {
    let (_dir, svc) = service_on(backend);
    let ses = session(&svc);
    let msg = svc
        .create(NewMessage::new(&ses, Role::Assistant, vec![]))
        .unwrap();
    let huge = TokenUsage {
        input: 9_000_000_000_000_000_000,
        output: i64::MAX,
        cache_read: 1,
        cache_write: 9_000_000_000_000_000_000,
        reasoning: 0,
    };
    svc.add_usage(&msg.id, huge, 0.0).unwrap();
    let after = svc.add_usage(&msg.id, huge, 0.0).unwrap();
    let expected = TokenUsage {
        input: i64::MAX,
        output: i64::MAX,
        cache_read: 2,
        cache_write: i64::MAX,
        reasoning: 0,
    };
    assert_eq!(after.usage, expected);
    assert_eq!(svc.get(&msg.id).unwrap().usage, expected);
    assert_eq!(svc.list(&ses).unwrap()[0].usage, expected);
    for bad in [
        TokenUsage {
            input: -1,
            ..TokenUsage::default()
        },
        TokenUsage {
            reasoning: i64::MIN,
            ..TokenUsage::default()
        },
    ] {
        let r = svc.add_usage(&msg.id, bad, 0.0);
        assert!(matches!(r, Err(MessageError::InvalidInput(_))), "{r:?}");
    }
    assert_eq!(svc.get(&msg.id).unwrap().usage, expected);
}

trait SubscribeBig {
    fn subscribe_with_buffer_for_test(&self) -> scribe_pubsub::Subscription<Message>;
}
impl SubscribeBig for scribe_message::MessageService {
    fn subscribe_with_buffer_for_test(&self) -> scribe_pubsub::Subscription<Message> {
        self.messages().subscribe_with_buffer(1000)
    }
}

fn delete_removes_parts_counters_and_index_rows_and_publishes_deleted(backend: Backend) {
    let (_dir, svc) = service_on(backend);
    let ses = session(&svc);
    let keep = say(&svc, &ses, Role::User, "keep me");
    let msg = svc
        .create(NewMessage::new(
            &ses,
            Role::Assistant,
            vec![
                Part::text("gone soon"),
                completed_tool("c", "bash", json!("ls"), "files"),
            ],
        ))
        .unwrap();
    let sub = svc.subscribe();
    assert_eq!(counters(&svc, &ses).0, 2);
    let deleted = svc.delete(&msg.id).unwrap();
    assert_eq!(deleted, msg);
    let event = sub.try_recv().unwrap();
    assert_eq!((event.kind, &event.payload), (EventKind::Deleted, &msg));
    assert_eq!(counters(&svc, &ses).0, 1);
    assert_eq!(counters(&svc, &ses).1, 0);
    // Raw rows of the SQLite file.
    if backend == Backend::Sqlite {
        assert_eq!(count(&svc, "SELECT count(*) FROM parts"), 2);
    }
    // Raw rows of the SQLite file.
    if backend == Backend::Sqlite {
        assert_eq!(
            count(
                &svc,
                "SELECT count(*) FROM parts_fts WHERE parts_fts MATCH 'gone'"
            ),
            0
        );
    }
    assert_eq!(svc.list(&ses).unwrap(), vec![keep]);
    assert!(svc.delete(&msg.id).unwrap_err().is_not_found());
    assert_eq!(sub.try_recv(), Err(TryRecvError::Empty));
}

fn store_insert_message_keeps_everything_as_given(backend: Backend) {
    let (_dir, svc) = service_on(backend);
    let ses = session(&svc);
    let msg = Message {
        id: "msg_imported".into(),
        session_id: ses.clone(),
        parent_id: Some("msg_parent".into()),
        role: Role::Assistant,
        agent: Some("plan".into()),
        provider: Some("p".into()),
        model: Some("m".into()),
        finish_reason: Some(FinishReason::Unknown("content_filter".into())),
        is_summary: true,
        usage: TokenUsage {
            input: 1,
            output: 2,
            cache_read: 3,
            cache_write: 4,
            reasoning: 5,
        },
        cost_usd: 0.125,
        error: Some(json!({"message": "x"})),
        created_at: 1_000,
        updated_at: 2_000,
        finished_at: Some(3_000),
        parts: vec![
            StoredPart {
                id: "prt_b".into(),
                position: 10,
                part: Part::text("second"),
                created_at: 1_100,
                updated_at: 1_200,
            },
            StoredPart {
                id: "prt_a".into(),
                position: 5,
                part: Part::Unknown(json!({"type": "future", "x": [1, 2]})),
                created_at: 1_000,
                updated_at: 1_000,
            },
        ],
    };
    // Inside a caller's own transaction, with the caller's error type.
    svc.database()
        .write(|tx| store::insert_message(tx, &msg))
        .unwrap();
    let loaded = svc
        .database()
        .read(|tx| store::load_message(tx, "msg_imported"))
        .unwrap();
    let mut expected = msg.clone();
    expected.parts.reverse();
    assert_eq!(loaded, expected);
    let all = svc
        .database()
        .read(|tx| store::load_session_messages(tx, &ses))
        .unwrap();
    assert_eq!(all, vec![expected]);

    // Duplicate part positions are the caller's mistake, and nothing is half written.
    let mut dup = msg.clone();
    dup.id = "msg_dup".into();
    dup.parts[0].id = "prt_c".into();
    dup.parts[1].id = "prt_d".into();
    dup.parts[1].position = 10;
    let result = svc.database().write(|tx| store::insert_message(tx, &dup));
    assert!(
        matches!(&result, Err(MessageError::InvalidInput(m)) if m.contains("position 10")),
        "{result:?}"
    );
    // Raw rows of the SQLite file.
    if backend == Backend::Sqlite {
        assert_eq!(count(&svc, "SELECT count(*) FROM messages"), 1);
    }
    let err = svc
        .database()
        .write(|tx| {
            store::insert_message(
                tx,
                &Message {
                    session_id: "ses_x".into(),
                    ..msg.clone()
                },
            )
        })
        .unwrap_err();
    match backend {
        Backend::Sqlite => assert!(matches!(
            err,
            MessageError::NotFound {
                what: "session",
                ..
            }
        )),
        // A taken id in an unknown session: PostgreSQL checks the id first, and its failed
        // statement aborts the transaction, so the store cannot ask about the session
        // afterwards. Either way nothing is written.
        Backend::Postgres => assert!(
            matches!(&err, MessageError::Db(db) if db.kind() == scribe_db::ErrorKind::UniqueViolation),
            "{err:?}"
        ),
    }
}

/// Many parts go in together on PostgreSQL (one statement, their JSON escaped into one
/// parameter): every byte of their content, their ids, positions and times come back as
/// given, in insertion order, and a bad part among them fails the whole message as it
/// does one part at a time.
fn store_insert_message_with_many_parts_keeps_each_exactly(backend: Backend) {
    let (_dir, svc) = service_on(backend);
    let ses = session(&svc);
    let tricky = "quote \" backslash \\ newline \n tab \t nul-free unicode é 漢字 🦀 </script>";
    let contents = [
        Part::text(tricky),
        Part::text("why \\u0000 is not a NUL"),
        Part::tool(
            "call_9",
            "bash",
            json!({"cmd": "echo \"{}\"", "n": 1.5e300}),
        ),
        Part::Unknown(json!({"type": "future", "nested": {"a": [1, "2", null]}})),
        Part::text(""),
    ];
    let parts: Vec<StoredPart> = contents
        .iter()
        .enumerate()
        .map(|(i, part)| StoredPart {
            id: format!("prt_many_{i}"),
            // Out of order, with gaps: stored as given, loaded in position order.
            position: [7, 3, 100, 0, 42][i],
            part: part.clone(),
            created_at: 1_000 + i as i64,
            updated_at: 2_000 + i as i64,
        })
        .collect();
    let msg = Message {
        id: "msg_many".into(),
        session_id: ses.clone(),
        parent_id: None,
        role: Role::Assistant,
        agent: None,
        provider: None,
        model: None,
        finish_reason: None,
        is_summary: false,
        usage: TokenUsage::default(),
        cost_usd: 0.0,
        error: None,
        created_at: 1_000,
        updated_at: 1_000,
        finished_at: None,
        parts,
    };
    svc.database()
        .write(|tx| store::insert_message(tx, &msg))
        .unwrap();
    let loaded = svc
        .database()
        .read(|tx| store::load_message(tx, "msg_many"))
        .unwrap();
    let mut expected = msg.clone();
    expected.parts.sort_by_key(|p| p.position);
    assert_eq!(loaded, expected);
    // Inserted in the order given (the sequence numbers parts carry follow it).
    let order = svc
        .database()
        .read(|tx| -> scribe_db::Result<Vec<String>> {
            Ok(tx
                .q()
                .list_session_part_data(&ses)?
                .into_iter()
                .map(|r| r.id)
                .collect())
        })
        .unwrap();
    assert_eq!(
        order,
        (0..5).map(|i| format!("prt_many_{i}")).collect::<Vec<_>>()
    );

    // A taken part id among them: the whole message fails, nothing is written.
    let mut taken = msg.clone();
    taken.id = "msg_taken".into();
    for (i, part) in taken.parts.iter_mut().enumerate() {
        part.id = format!("prt_taken_{i}");
    }
    taken.parts[3].id = "prt_many_1".into();
    let err = svc
        .database()
        .write(|tx| store::insert_message(tx, &taken))
        .unwrap_err();
    assert!(
        matches!(&err, MessageError::Db(db) if db.kind() == scribe_db::ErrorKind::UniqueViolation),
        "{err:?}"
    );
    // An empty part id among them is the caller's mistake.
    taken.parts[3].id = String::new();
    let err = svc
        .database()
        .write(|tx| store::insert_message(tx, &taken))
        .unwrap_err();
    assert!(
        matches!(&err, MessageError::InvalidInput(m) if m.contains("part id is empty")),
        "{err:?}"
    );
    // The second of two parts at one position is the one named.
    taken.parts[3].id = "prt_taken_3".into();
    taken.parts[4].position = 100;
    let err = svc
        .database()
        .write(|tx| store::insert_message(tx, &taken))
        .unwrap_err();
    assert!(
        matches!(&err, MessageError::InvalidInput(m) if m == "two parts at position 100"),
        "{err:?}"
    );
    assert_eq!(
        svc.database()
            .read(|tx| store::load_session_messages(tx, &ses))
            .unwrap(),
        vec![expected.clone()]
    );

    // The statement itself, on both backends (PostgreSQL's appends use it; SQLite has it
    // for parity): rows in key order, whatever order the object lists them in.
    let part = |id: &str, position: i64, text: &str, at: i64| {
        json!({
            "id": id, "message_id": "msg_direct", "session_id": ses, "position": position,
            "type": "text",
            "data": Part::text(text).to_json().unwrap(), "created_at": at, "updated_at": at + 1,
        })
    };
    let object = format!(
        "{{\"1\":{},\"0\":{}}}",
        part("prt_direct_b", 1, "b \"quoted\"", 30),
        part("prt_direct_a", 0, "a", 10)
    );
    let bare = Message {
        id: "msg_direct".into(),
        parts: Vec::new(),
        ..expected.clone()
    };
    svc.database()
        .write(|tx| -> Result<(), MessageError> {
            store::insert_message(tx, &bare)?;
            tx.q().create_parts(&object)?;
            Ok(())
        })
        .unwrap();
    let direct = svc.get("msg_direct").unwrap();
    let got: Vec<(&str, i64, &Part, i64, i64)> = direct
        .parts
        .iter()
        .map(|p| {
            (
                p.id.as_str(),
                p.position,
                &p.part,
                p.created_at,
                p.updated_at,
            )
        })
        .collect();
    assert_eq!(
        got,
        [
            ("prt_direct_a", 0, &Part::text("a"), 10, 11),
            ("prt_direct_b", 1, &Part::text("b \"quoted\""), 30, 31)
        ]
    );
}

// SQLite only: it damages a row with raw SQL on the SQLite connection.
#[test]
fn a_corrupt_part_row_is_reported_by_name_and_other_messages_still_load() {
    let (_dir, svc) = service();
    let ses = session(&svc);
    let good = say(&svc, &ses, Role::User, "fine");
    let bad = say(&svc, &ses, Role::User, "about to break");
    let bad_part = bad.parts[0].id.clone();
    // Valid JSON (the CHECK needs it) but not a valid text part.
    svc.database()
        .write(|tx| -> scribe_db::Result<_> {
            let tx = tx.conn().unwrap();
            tx.execute(
                "UPDATE parts SET data = '{\"type\":\"text\",\"text\":42}' WHERE id = ?1",
                [&bad_part],
            )?;
            Ok(())
        })
        .unwrap();
    let err = svc.get(&bad.id).unwrap_err();
    assert!(
        matches!(&err, MessageError::CorruptPart { part_id, .. } if *part_id == bad_part),
        "{err:?}"
    );
    assert!(err.to_string().contains(&bad_part));
    assert_eq!(svc.get(&good.id).unwrap(), good);
    assert!(matches!(
        svc.list(&ses),
        Err(MessageError::CorruptPart { .. })
    ));
    let as_db = svc
        .database()
        .read(|tx| store::load_message(tx, &bad.id))
        .unwrap_err();
    assert!(as_db.to_string().contains(&bad_part), "{as_db}");
    // Repair by overwriting the part, or delete the message.
    svc.update_part(&bad_part, Part::text("repaired")).unwrap();
    assert_eq!(
        svc.get(&bad.id).unwrap().parts[0].part,
        Part::text("repaired")
    );
    svc.database()
        .write(|tx| -> scribe_db::Result<_> {
            let tx = tx.conn().unwrap();
            tx.execute("UPDATE parts SET data = '[1]' WHERE id = ?1", [&bad_part])?;
            Ok(())
        })
        .unwrap();
    let gone = svc.delete(&bad.id).unwrap();
    assert_eq!(gone.id, bad.id);
    assert_eq!(svc.list(&ses).unwrap(), vec![good]);
}

/// Every change a process makes to a message moves its `updated_at` forward, even when
/// that process's clock is behind the time stored (another process's clock is ahead) or
/// stands still: the clock's reading, or one past the stored time; a changed part's time
/// does the same. `finished_at`, the time of the event, is the clock's reading as it is.
/// Each change returns what is stored. (Before, `update` and `set_error_tx` wrote the
/// clock's reading, so the message went back a minute.)
fn a_process_whose_clock_is_behind_never_moves_a_message_back(backend: Backend) {
    let t = TestDb::new(backend);
    // Two processes' clocks, both standing still, one a minute ahead of the other.
    let process = |at: i64| MessageService::new(t.reopen_at(at));
    let behind_at = 1_600_000_000_000;
    let ahead = process(behind_at + 60_000);
    let behind = process(behind_at);
    let ses = session(&ahead);
    let msg = say(&ahead, &ses, Role::Assistant, "hello");
    assert_eq!(msg.updated_at, behind_at + 60_000);

    let mut forward = MovesForward::new(
        &msg,
        |m: &Message| m.updated_at,
        |m: &Message| behind.get(&m.id).unwrap(),
    );
    let mut moved = |what: &str, changed: Message| forward.check(what, changed);
    let update = MessageUpdate {
        model: Some(Some("gpt-x".into())),
        ..MessageUpdate::default()
    };
    moved("update", behind.update(&msg.id, update).unwrap());
    let error = json!({"kind": "overloaded"});
    let failed = behind
        .database()
        .write(|tx| behind.set_error_tx(tx, &msg.id, Some(&error)))
        .unwrap();
    moved("set_error_tx", failed);
    let usage = TokenUsage {
        input: 1,
        ..TokenUsage::default()
    };
    moved("add_usage", behind.add_usage(&msg.id, usage, 0.1).unwrap());
    let finished = moved(
        "finish",
        behind.finish(&msg.id, FinishReason::EndTurn).unwrap(),
    );
    assert_eq!(finished.finished_at, Some(behind_at));

    let part = &msg.parts[0];
    let changed = behind
        .update_part(&part.id, Part::text("hello again"))
        .unwrap();
    assert!(
        changed.updated_at > part.updated_at,
        "update_part: updated_at {} after {}",
        changed.updated_at,
        part.updated_at
    );
    assert_eq!(behind.get(&msg.id).unwrap().parts[0], changed);
}

scribe_tests::backends!(
    a_process_whose_clock_is_behind_never_moves_a_message_back,
    create_persists_message_and_parts_and_publishes_created,
    append_and_delete_part_publish_part_events_and_keep_counters,
    delete_removes_parts_counters_and_index_rows_and_publishes_deleted,
    store_insert_message_keeps_everything_as_given,
    store_insert_message_with_many_parts_keeps_each_exactly,
    create_in_unknown_session_is_not_found_and_publishes_nothing,
    store_insert_failures_say_why,
    non_assistant_messages_get_a_finish_part,
    get_list_and_delete_of_unknown_ids_are_not_found,
    list_is_in_creation_order_with_parts_in_position_order,
    update_changes_fields_and_publishes_updated,
    update_part_changes_one_part_and_follows_the_tool_state_machine,
    finish_sets_reason_and_a_single_finish_part,
    add_usage_adds_atomically_from_many_threads,
    summed_message_cost_stops_at_the_largest_finite_amount,
    summed_message_tokens_stop_at_the_largest_count,
);
