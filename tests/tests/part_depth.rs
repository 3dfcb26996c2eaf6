//! A part nesting deeper than reading allows is never stored: every write path refuses it
//! with `MessageError::PartTooDeep` (naming the part, its message and the limit) and
//! writes nothing, while the deepest part accepted reads back exactly. A too-deep part an
//! older build stored does not make its conversation unreadable. Both backends.
#![allow(clippy::unwrap_used, clippy::expect_used)]

#[path = "message_common/mod.rs"]
mod common;

use common::{counters, say, service_on, session};
use scribe_tests::Backend;

use scribe_db::ids::{Prefix, new_id};
use scribe_db::queries;
use scribe_message::part::json_depth;
use scribe_message::{
    MAX_PART_DEPTH, Message, MessageError, MessageService, NewMessage, Part, Role, StoredPart,
    store,
};
use serde_json::{Value, json};

/// `levels` arrays nested in each other around `1` (`nested(2)` is `[[1]]`).
fn nested(levels: usize) -> Value {
    (0..levels).fold(json!(1), |inner, _| Value::Array(vec![inner]))
}

/// A tool call whose JSON nests exactly `depth` levels (its own object is the first).
fn tool_of_depth(depth: usize) -> Part {
    let part = Part::tool("call_deep", "probe", nested(depth - 1));
    let json = serde_json::to_string(&part).unwrap();
    assert_eq!(json_depth(&json), depth);
    part
}

/// Asserts `err` is the refusal of part `part_id` (any part when `None`) of message
/// `message_id`, `depth` levels deep, and says so in one lowercase line.
fn assert_too_deep(err: &MessageError, part_id: Option<&str>, message_id: &str, depth: usize) {
    match err {
        MessageError::PartTooDeep {
            part_id: got_part,
            message_id: got_message,
            depth: got_depth,
            limit,
        } => {
            if let Some(part_id) = part_id {
                assert_eq!(got_part, part_id);
            }
            assert!(got_part.starts_with("prt_"), "{got_part}");
            assert_eq!(got_message, message_id);
            assert_eq!(*got_depth, depth);
            assert_eq!(*limit, MAX_PART_DEPTH);
        }
        other => panic!("expected PartTooDeep, got {other:?}"),
    }
    let text = err.to_string();
    assert!(text.contains(message_id), "{text}");
    assert!(
        text.contains(&format!("more than the {MAX_PART_DEPTH}")),
        "{text}"
    );
    assert_eq!(text, text.to_lowercase(), "{text}");
}

fn the_deepest_part_accepted_reads_back_and_one_deeper_is_refused(backend: Backend) {
    let (_t, svc) = service_on(backend);
    let ses = session(&svc);

    let deepest = svc
        .create(NewMessage::new(
            &ses,
            Role::Assistant,
            vec![tool_of_depth(MAX_PART_DEPTH)],
        ))
        .unwrap();
    assert_eq!(svc.list(&ses).unwrap(), vec![deepest.clone()]);
    assert_eq!(svc.get(&deepest.id).unwrap(), deepest);
    let before = counters(&svc, &ses);

    // create: the whole message is refused, with its parts.
    let err = svc
        .create(NewMessage::new(
            &ses,
            Role::Assistant,
            vec![Part::text("kept?"), tool_of_depth(MAX_PART_DEPTH + 1)],
        ))
        .unwrap_err();
    let MessageError::PartTooDeep { message_id, .. } = &err else {
        panic!("{err:?}");
    };
    assert_too_deep(&err, None, &message_id.clone(), MAX_PART_DEPTH + 1);
    assert!(matches!(svc.get(message_id), Err(e) if e.is_not_found()));

    // append_part and update_part: nothing written, the stored part stays as it was.
    let err = svc
        .append_part(&deepest.id, tool_of_depth(MAX_PART_DEPTH + 1))
        .unwrap_err();
    assert_too_deep(&err, None, &deepest.id, MAX_PART_DEPTH + 1);
    let part_id = &deepest.parts[0].id;
    let err = svc
        .update_part(part_id, tool_of_depth(MAX_PART_DEPTH + 5))
        .unwrap_err();
    assert_too_deep(&err, Some(part_id), &deepest.id, MAX_PART_DEPTH + 5);
    let err = svc
        .database()
        .write(|tx| svc.update_part_tx(tx, part_id, &tool_of_depth(MAX_PART_DEPTH + 1)))
        .unwrap_err();
    assert_too_deep(&err, Some(part_id), &deepest.id, MAX_PART_DEPTH + 1);

    // The store's paths: insert_message (fork, export import; on PostgreSQL two parts go
    // in one statement), the bulk path (imports) and an importer's change of a part.
    let copy = |parts: Vec<Part>| Message {
        id: new_id(Prefix::Message),
        parts: parts
            .into_iter()
            .zip(0..)
            .map(|(part, position)| StoredPart {
                id: new_id(Prefix::Part),
                position,
                part,
                ..deepest.parts[0].clone()
            })
            .collect(),
        ..deepest.clone()
    };
    let two = copy(vec![Part::text("a"), tool_of_depth(MAX_PART_DEPTH + 1)]);
    let err = svc
        .database()
        .write(|tx| store::insert_message(tx, &two))
        .unwrap_err();
    assert_too_deep(&err, Some(&two.parts[1].id), &two.id, MAX_PART_DEPTH + 1);
    let fine = copy(vec![Part::text("b")]);
    let err = svc
        .database()
        .write(|tx| scribe_message::bulk::insert_messages(tx, [&fine, &two]))
        .unwrap_err();
    assert_too_deep(&err, Some(&two.parts[1].id), &two.id, MAX_PART_DEPTH + 1);
    assert!(matches!(svc.get(&fine.id), Err(e) if e.is_not_found()));
    let changed = StoredPart {
        part: tool_of_depth(MAX_PART_DEPTH + 1),
        ..deepest.parts[0].clone()
    };
    let err = svc
        .database()
        .write(|tx| store::import_part(tx, &deepest.id, &changed))
        .unwrap_err();
    assert_too_deep(&err, Some(part_id), &deepest.id, MAX_PART_DEPTH + 1);

    assert_eq!(svc.list(&ses).unwrap(), vec![deepest]);
    assert_eq!(counters(&svc, &ses), before);
}

/// Writes `data` into part `part_id` as a program other than this build would (an older
/// build, which stored any depth).
fn store_raw(svc: &MessageService, part_id: &str, data: &str) {
    svc.database()
        .write(|tx| -> scribe_db::Result<()> {
            tx.q().update_part(&queries::UpdatePartParams {
                r#type: "tool",
                data,
                now: i64::MAX / 2,
                id: part_id,
            })?;
            Ok(())
        })
        .unwrap();
}

fn a_too_deep_part_stored_before_does_not_make_the_conversation_unreadable(backend: Backend) {
    let (_t, svc) = service_on(backend);
    let ses = session(&svc);
    say(&svc, &ses, Role::User, "probe the viewer");
    let msg = svc
        .create(NewMessage::new(
            &ses,
            Role::Assistant,
            vec![
                Part::tool("call_deep", "probe", json!({})),
                Part::text("after"),
            ],
        ))
        .unwrap();
    let part_id = msg.parts[0].id.clone();
    // 200 levels: past serde_json's 128, what the probe stored through an older build.
    let raw = r#"{"type":"tool","call_id":"call_deep","tool":"probe","input":"#.to_owned()
        + &nested(199).to_string()
        + r#","state":{"status":"pending"}}"#;
    assert_eq!(json_depth(&raw), 200);
    assert!(serde_json::from_str::<Value>(&raw).is_err());
    store_raw(&svc, &part_id, &raw);

    let listed = svc.list(&ses).unwrap();
    assert_eq!(listed.len(), 2);
    let read = listed[1].part(&part_id).unwrap();
    let Part::Tool(tool) = &read.part else {
        panic!("{read:?}");
    };
    assert_eq!(tool.call_id, "call_deep");
    // The first levels as they were, the value below MAX_PART_DEPTH as its JSON text.
    let mut inner = &tool.input;
    for _ in 2..=MAX_PART_DEPTH {
        inner = &inner.as_array().unwrap()[0];
    }
    assert_eq!(
        inner.as_str().unwrap(),
        nested(199 - (MAX_PART_DEPTH - 1)).to_string()
    );
    assert_eq!(listed[1].text(), "after");
    assert_eq!(svc.get(&msg.id).unwrap(), listed[1]);
    // The row itself is left as it is.
    let stored = svc
        .database()
        .read(|tx| -> scribe_db::Result<_> { tx.q().get_part(&part_id) })
        .unwrap()
        .unwrap();
    assert_eq!(stored.data, raw);
}

/// 124 levels: serde_json reads it, but it could not be stored again (a fork, an export
/// that `scribe import` reads back): it is read as it can be stored.
fn a_part_stored_just_past_the_limit_reads_as_it_can_be_stored_again(backend: Backend) {
    let (_t, svc) = service_on(backend);
    let ses = session(&svc);
    let msg = svc
        .create(NewMessage::new(
            &ses,
            Role::Assistant,
            vec![Part::tool("call_deep", "probe", json!({}))],
        ))
        .unwrap();
    let part_id = msg.parts[0].id.clone();
    let raw = r#"{"type":"tool","call_id":"call_deep","tool":"probe","input":"#.to_owned()
        + &nested(123).to_string()
        + r#","state":{"status":"pending"}}"#;
    assert!(serde_json::from_str::<Value>(&raw).is_ok());
    store_raw(&svc, &part_id, &raw);

    let read = svc.get(&msg.id).unwrap();
    assert_eq!(read.parts[0].part.depth(), MAX_PART_DEPTH);
    // What a fork does with it: store a copy.
    let copy = Message {
        id: new_id(Prefix::Message),
        parts: vec![StoredPart {
            id: new_id(Prefix::Part),
            ..read.parts[0].clone()
        }],
        ..read.clone()
    };
    svc.database()
        .write(|tx| store::insert_message(tx, &copy))
        .unwrap();
    assert_eq!(svc.get(&copy.id).unwrap().parts[0].part, read.parts[0].part);
}

scribe_tests::backends!(
    a_part_stored_just_past_the_limit_reads_as_it_can_be_stored_again,
    the_deepest_part_accepted_reads_back_and_one_deeper_is_refused,
    a_too_deep_part_stored_before_does_not_make_the_conversation_unreadable,
);
