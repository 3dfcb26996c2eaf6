//! `ReplyWriter::finish_streamed` against a real SQLite file: a program without a
//! `Provider` pushes each event once, to the writer, and gets back the message id, the
//! response and the tool calls. What it stores and returns must equal what the two-step
//! form stores and returns (every event also fed to a `ResponseBuilder`, then
//! `finish(&response)`); a stream without its finish event is refused, keeping what
//! streamed.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::time::Duration;

use scribe_agent::provider::{ProviderEvent, ProviderResponse, ResponseBuilder};
use scribe_agent::{AgentError, ReplyWriter, StreamedReply, ToolCall};
use scribe_message::{FinishReason, NewMessage, Part, Role, StepStartPart, TokenUsage};
use scribe_session::{NewSession, Store};
use serde_json::{Value, json};

/// Reasoning, text, two tool calls with text between them, then the finish.
fn events() -> Vec<ProviderEvent> {
    vec![
        ProviderEvent::ReasoningDelta("The caller ".into()),
        ProviderEvent::ReasoningDelta("owns the String.".into()),
        ProviderEvent::TextDelta("Reading ".into()),
        ProviderEvent::TextDelta("it first.".into()),
        ProviderEvent::ToolCall {
            call_id: "call_1".into(),
            name: "read".into(),
            input: json!({"path": "src/parse.rs"}),
        },
        ProviderEvent::TextDelta("And the tests.".into()),
        ProviderEvent::ToolCall {
            call_id: "call_2".into(),
            name: "grep".into(),
            input: json!({"pattern": "parse("}),
        },
        ProviderEvent::Finish {
            reason: FinishReason::ToolUse,
            usage: TokenUsage {
                input: 900,
                output: 60,
                reasoning: 12,
                ..TokenUsage::default()
            },
        },
    ]
}

fn start<'a>(store: &'a Store, flush: Duration) -> ReplyWriter<'a> {
    let session = store.sessions().create(NewSession::default()).unwrap();
    ReplyWriter::start(
        store.messages(),
        NewMessage::new(
            &session.id,
            Role::Assistant,
            vec![Part::StepStart(StepStartPart::default())],
        ),
    )
    .unwrap()
    .with_flush_interval(flush)
}

/// A part as stored, without what differs between two runs (times).
fn content(part: &Part) -> Value {
    let mut value = serde_json::to_value(part).unwrap();
    if let Some(object) = value.as_object_mut() {
        object.remove("time");
    }
    value
}

/// The stored parts of `message_id`, in order, as [`content`].
fn stored(store: &Store, message_id: &str) -> Vec<Value> {
    let message = store.messages().get(message_id).unwrap();
    message.parts.iter().map(|p| content(&p.part)).collect()
}

fn calls(tool_calls: &[ToolCall]) -> Vec<Value> {
    tool_calls
        .iter()
        .map(|(_, call)| content(&Part::Tool(call.clone())))
        .collect()
}

/// The two-step form: every event to the writer and to a builder, then `finish`.
fn two_step(store: &Store, flush: Duration) -> (String, ProviderResponse, Vec<ToolCall>) {
    let mut reply = start(store, flush);
    let mut builder = ResponseBuilder::new();
    for event in events() {
        builder.push(&event);
        reply.push(event);
    }
    let response = builder.finish().unwrap();
    let message_id = reply.message_id().to_owned();
    let tool_calls = reply.finish(&response).unwrap();
    (message_id, response, tool_calls)
}

#[test]
fn finish_streamed_stores_and_returns_what_the_two_step_form_does() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(dir.path().join("scribe.db")).unwrap();
    // Every delta written at once, and the default interval (the last text written only
    // when its part closes).
    for flush in [Duration::ZERO, Duration::from_secs(60)] {
        let (old_id, old_response, old_calls) = two_step(&store, flush);

        let mut reply = start(&store, flush);
        for event in events() {
            reply.push(event);
        }
        assert!(reply.is_finished());
        let message_id = reply.message_id().to_owned();
        let StreamedReply {
            message_id: returned_id,
            response,
            tool_calls,
        } = reply.finish_streamed().unwrap();

        assert_eq!(returned_id, message_id);
        assert_eq!(response, old_response, "flush {flush:?}");
        assert_eq!(response.finish_reason, FinishReason::ToolUse);
        assert_eq!(response.usage.input, 900);
        assert_eq!(calls(&tool_calls), calls(&old_calls), "flush {flush:?}");
        assert_eq!(tool_calls.len(), 2);
        // The ids returned are the stored parts'.
        let message = store.messages().get(&message_id).unwrap();
        for (id, call) in &tool_calls {
            let part = message.parts.iter().find(|p| &p.id == id).unwrap();
            assert_eq!(part.part, Part::Tool(call.clone()));
        }
        let stored_now = stored(&store, &message_id);
        assert_eq!(stored_now, stored(&store, &old_id), "flush {flush:?}");
        // step-start, reasoning, text, call, text, call.
        assert_eq!(stored_now.len(), 6, "{stored_now:#?}");
        assert_eq!(
            message.text(),
            "Reading it first.\n\nAnd the tests.",
            "flush {flush:?}"
        );
    }
}

#[test]
fn finish_streamed_without_a_finish_event_is_refused_and_keeps_what_streamed() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(dir.path().join("scribe.db")).unwrap();
    let mut reply = start(&store, Duration::from_secs(60));
    let message_id = reply.message_id().to_owned();
    // The stream breaks off after the first call.
    for event in events().into_iter().take(5) {
        reply.push(event);
    }
    assert!(!reply.is_finished());
    let r = reply.finish_streamed();
    assert!(matches!(r, Err(AgentError::InvalidInput(_))), "{r:?}");
    let message = store.messages().get(&message_id).unwrap();
    // The text pending when it broke off was written, as `abandon` writes it.
    assert_eq!(message.text(), "Reading it first.");
    assert!(
        message
            .parts
            .iter()
            .any(|p| matches!(&p.part, Part::Tool(t) if t.call_id == "call_1"))
    );
}
