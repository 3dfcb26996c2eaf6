//! Keyset pagination: newest-first pages, ties on created_at, stable cursors while new
//! messages arrive, garbage cursors, and stream() in creation order.
#![allow(clippy::unwrap_used, clippy::expect_used)]

#[path = "message_common/mod.rs"]
mod common;

use common::{say, service_on, session};
use scribe_tests::Backend;

use scribe_message::store;
use scribe_message::{
    Cursor, FinishReason, Message, MessageError, MessageService, Part, Role, StoredPart, TokenUsage,
};

/// Inserts a message with an exact id and time (ties on created_at need both).
fn insert_at(svc: &MessageService, session: &str, id: &str, created_at: i64) -> Message {
    let msg = Message {
        id: id.into(),
        session_id: session.into(),
        parent_id: None,
        role: Role::User,
        agent: None,
        provider: None,
        model: None,
        finish_reason: Some(FinishReason::EndTurn),
        is_summary: false,
        usage: TokenUsage::default(),
        cost_usd: 0.0,
        error: None,
        created_at,
        updated_at: created_at,
        finished_at: Some(created_at),
        parts: vec![StoredPart {
            id: format!("prt_{id}"),
            position: 0,
            part: Part::text(format!("text of {id}")),
            created_at,
            updated_at: created_at,
        }],
    };
    svc.database()
        .write(|tx| store::insert_message(tx, &msg))
        .unwrap();
    msg
}

fn ids(messages: &[Message]) -> Vec<String> {
    messages.iter().map(|m| m.id.clone()).collect()
}

fn pages_walk_newest_first_with_ties_broken_by_id(backend: Backend) {
    let (_dir, svc) = service_on(backend);
    let ses = session(&svc);
    // Five messages share one millisecond; ids decide their order.
    let mut expected = Vec::new();
    for (i, t) in [100, 200, 200, 200, 200, 200, 300].into_iter().enumerate() {
        expected.push(insert_at(&svc, &ses, &format!("msg_{i:02}"), t).id);
    }
    expected.reverse();
    let mut seen = Vec::new();
    let mut cursor: Option<Cursor> = None;
    let mut pages = 0;
    loop {
        let page = svc.page(&ses, 2, cursor.as_ref()).unwrap();
        pages += 1;
        assert!(
            page.messages.iter().all(|m| m.parts.len() == 1),
            "parts loaded"
        );
        seen.extend(ids(&page.messages));
        assert_eq!(page.more, page.next.is_some());
        match page.next {
            Some(next) => cursor = Some(next),
            None => break,
        }
    }
    assert_eq!(seen, expected);
    assert_eq!(pages, 4);

    // An exact multiple of the page size ends with more = false on the last full page.
    let page = svc.page(&ses, 7, None).unwrap();
    assert_eq!(page.messages.len(), 7);
    assert!(!page.more);
    assert_eq!(page.next, None);
}

fn cursors_are_stable_while_new_messages_are_appended(backend: Backend) {
    let (_dir, svc) = service_on(backend);
    let ses = session(&svc);
    for i in 0..10 {
        say(&svc, &ses, Role::User, &format!("m{i}"));
    }
    let first = svc.page(&ses, 4, None).unwrap();
    let cursor = first.next.clone().unwrap();
    let encoded = cursor.to_string();
    let second = svc.page(&ses, 4, Some(&cursor)).unwrap();
    for i in 0..5 {
        say(&svc, &ses, Role::Assistant, &format!("late {i}"));
    }
    // The same cursor string, decoded again, gives the same page.
    let decoded: Cursor = encoded.parse().unwrap();
    assert_eq!(decoded, cursor);
    let again = svc.page(&ses, 4, Some(&decoded)).unwrap();
    assert_eq!(ids(&again.messages), ids(&second.messages));
    assert_eq!(again.next, second.next);
    // And the newest page now starts with the late messages.
    let newest = svc.page(&ses, 5, None).unwrap();
    assert!(newest.messages.iter().all(|m| m.text().starts_with("late")));
}

fn garbage_cursors_are_invalid_input_not_panics(backend: Backend) {
    let (_dir, svc) = service_on(backend);
    let ses = session(&svc);
    say(&svc, &ses, Role::User, "x");
    for garbage in [
        "",
        "!!!",
        "djE6",     // "v1:"
        "djE6eDp5", // "v1:x:y"
        "djE6MTI6", // "v1:12:"
        "bm9wZQ",   // "nope"
        "////",
        "djI6MTI6bXNn", // "v2:12:msg"
        "日本語",
    ] {
        let err = Cursor::decode(garbage).unwrap_err();
        assert!(
            matches!(err, MessageError::InvalidInput(_)),
            "{garbage}: {err:?}"
        );
        assert!(garbage.parse::<Cursor>().is_err());
    }
    assert!(matches!(
        svc.page(&ses, 0, None),
        Err(MessageError::InvalidInput(_))
    ));
}

fn unknown_session_is_not_found_and_empty_session_an_empty_page(backend: Backend) {
    let (_dir, svc) = service_on(backend);
    assert!(matches!(
        svc.page("ses_missing", 10, None),
        Err(MessageError::NotFound {
            what: "session",
            ..
        })
    ));
    assert!(matches!(
        svc.stream("ses_missing"),
        Err(MessageError::NotFound {
            what: "session",
            ..
        })
    ));
    let ses = session(&svc);
    let page = svc.page(&ses, 10, None).unwrap();
    assert!(page.messages.is_empty());
    assert!(!page.more);
    assert_eq!(page.next, None);
    assert_eq!(svc.stream(&ses).unwrap().count(), 0);
}

fn stream_walks_every_page_in_creation_order(backend: Backend) {
    let (_dir, svc) = service_on(backend);
    let ses = session(&svc);
    let other = session(&svc);
    let mut expected = Vec::new();
    // More than one internal page (200), with ties on created_at.
    for i in 0..450 {
        expected.push(insert_at(&svc, &ses, &format!("msg_{i:04}"), 1_000 + i / 3).id);
    }
    insert_at(&svc, &other, "msg_other", 1_001);
    let streamed: Vec<String> = svc.stream(&ses).unwrap().map(|m| m.unwrap().id).collect();
    assert_eq!(streamed, expected);
    assert_eq!(ids(&svc.list(&ses).unwrap()), expected);
}

fn stream_after_gives_what_came_after_a_cursor(backend: Backend) {
    let (_dir, svc) = service_on(backend);
    let ses = session(&svc);
    let mut all = Vec::new();
    // Over a page (200) after the cursor, with ties on created_at around it.
    for i in 0..260 {
        all.push(insert_at(&svc, &ses, &format!("msg_{i:04}"), 1_000 + i / 4));
    }
    // msg_0010 shares its millisecond with msg_0008..=msg_0011: the id breaks the tie.
    let seen = Cursor::of(&all[10]);
    let after: Vec<String> = svc
        .stream_after(&ses, &seen)
        .unwrap()
        .map(|m| m.unwrap().id)
        .collect();
    assert_eq!(after, ids(&all[11..]));
    // From the last message: nothing until one more is written, then only that one.
    let last = Cursor::of(all.last().unwrap());
    assert_eq!(svc.stream_after(&ses, &last).unwrap().count(), 0);
    let next = insert_at(&svc, &ses, "msg_9999", 5_000);
    let after: Vec<String> = svc
        .stream_after(&ses, &last)
        .unwrap()
        .map(|m| m.unwrap().id)
        .collect();
    assert_eq!(after, vec![next.id]);
    // The message at the cursor may be gone: the position still holds.
    svc.delete(&all[10].id).unwrap();
    assert_eq!(svc.stream_after(&ses, &seen).unwrap().count(), 250);
    assert!(matches!(
        svc.stream_after("ses_missing", &seen),
        Err(MessageError::NotFound { .. })
    ));
}

scribe_tests::backends!(
    stream_after_gives_what_came_after_a_cursor,
    pages_walk_newest_first_with_ties_broken_by_id,
    cursors_are_stable_while_new_messages_are_appended,
    garbage_cursors_are_invalid_input_not_panics,
    unknown_session_is_not_found_and_empty_session_an_empty_page,
    stream_walks_every_page_in_creation_order,
);
