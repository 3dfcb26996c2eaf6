//! A charged step's end (`ReplyWriter::finish_charged`, `finish_streamed_charged`)
//! against a real SQLite file: the reply squared with the response, the `step_finish`
//! part and the charge commit in one transaction. A charge that fails (in the database,
//! or on a model the catalog does not know) leaves nothing of the end — the streamed text
//! stands, nothing is announced — and an end that commits announces every part, the
//! session and the charge only after its commit, with exact totals.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod compaction_support;

use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use compaction_support::{Env, SMALL, sample_usage, small_cost};
use scribe_agent::provider::ProviderEvent;
use scribe_agent::{
    AgentError, AgentEvent, ProviderResponse, ReplyWriter, StreamedReply, UsageTracker, error_chain,
};
use scribe_message::{
    FinishReason, Message, NewMessage, Part, PartEvent, Role, StepStartPart, TokenUsage,
};
use scribe_pubsub::Subscription;
use scribe_session::{Session, Store};
use serde_json::json;

/// The reply streams `Hello ` (written at once); the response says `Hello there.` and
/// calls a tool that never streamed, so the end has both to add.
fn response() -> ProviderResponse {
    ProviderResponse {
        parts: vec![
            Part::text("Hello there."),
            Part::tool("c9", "read", json!({"path": "a.rs"})),
        ],
        finish_reason: FinishReason::ToolUse,
        usage: sample_usage(),
    }
}

fn tracker(env: &Env) -> UsageTracker {
    UsageTracker::new(env.store.clone(), env.catalog.clone())
}

/// A reply in a new session that has streamed `Hello ` (and, when `finished`, its finish
/// event with [`usage`]).
fn streamed<'a>(env: &'a Env, finished: bool) -> (Session, ReplyWriter<'a>) {
    // Titles are unique: one per reply.
    static REPLIES: AtomicUsize = AtomicUsize::new(0);
    let session = env.session(&format!(
        "charged end {}",
        REPLIES.fetch_add(1, Ordering::Relaxed)
    ));
    let mut reply = ReplyWriter::start(
        env.store.messages(),
        NewMessage::new(
            &session.id,
            Role::Assistant,
            vec![Part::StepStart(StepStartPart::default())],
        ),
    )
    .unwrap()
    .with_flush_interval(Duration::ZERO);
    reply.push(ProviderEvent::TextDelta("Hello ".into()));
    if finished {
        reply.push(ProviderEvent::Finish {
            reason: FinishReason::EndTurn,
            usage: sample_usage(),
        });
    }
    (session, reply)
}

/// What the store announces from now on.
struct Watch {
    parts: Subscription<PartEvent>,
    sessions: Subscription<Session>,
    messages: Subscription<Message>,
    usage: Subscription<AgentEvent>,
}

impl Watch {
    fn new(env: &Env, tracker: &UsageTracker) -> Watch {
        Watch {
            parts: env.store.messages().subscribe_parts(),
            sessions: env.store.sessions().subscribe(),
            messages: env.store.messages().subscribe(),
            usage: tracker.events().subscribe(),
        }
    }

    /// (part, session, message, usage) events announced since the last call.
    fn counts(&self) -> (usize, usize, usize, usize) {
        (
            self.parts.try_iter().count(),
            self.sessions.try_iter().count(),
            self.messages.try_iter().count(),
            self.usage.try_iter().count(),
        )
    }
}

/// Every change of a session's `api_call_count` fails in the database, as a storage
/// error inside the charge would.
fn fail_every_charge(env: &Env) {
    let conn = rusqlite::Connection::open(env._dir.path().join("scribe.db")).unwrap();
    conn.execute_batch(
        "CREATE TRIGGER fail_charge BEFORE UPDATE OF api_call_count ON sessions
         BEGIN SELECT RAISE(ABORT, 'injected charge failure'); END;",
    )
    .unwrap();
}

/// Nothing of the end of `message_id` in `session_id` is stored: the step-start part and
/// the streamed `Hello ` only, no usage anywhere, the message still open.
fn assert_no_end(env: &Env, session_id: &str, message_id: &str) {
    let message = env.messages.get(message_id).unwrap();
    let kinds: Vec<&str> = message.parts.iter().map(|p| p.part.type_name()).collect();
    assert_eq!(kinds, ["step_start", "text"], "{:#?}", message.parts);
    assert_eq!(message.text(), "Hello ");
    assert!(message.usage.is_zero());
    assert_eq!(message.cost_usd, 0.0);
    assert_eq!(message.finish_reason, None);
    let session = env.get(session_id);
    assert_eq!(session.api_call_count, 0);
    assert!(session.tokens.is_zero(), "{:?}", session.tokens);
    assert_eq!(session.estimated_cost_usd, 0.0);
}

#[test]
fn a_charge_failing_in_the_transaction_leaves_nothing_of_the_end() {
    let env = Env::new();
    let t = tracker(&env);
    // With a response to square (a tail and a call to add) …
    let (session, reply) = streamed(&env, true);
    let message_id = reply.message_id().to_owned();
    fail_every_charge(&env);
    let watch = Watch::new(&env, &t);
    let err = reply.finish_charged(&response(), &t, SMALL).unwrap_err();
    assert!(
        error_chain(&err).contains("injected"),
        "{}",
        error_chain(&err)
    );
    assert_no_end(&env, &session.id, &message_id);
    assert_eq!(watch.counts(), (0, 0, 0, 0));

    // … and with the response assembled from the stream.
    let (session, reply) = streamed(&env, true);
    let message_id = reply.message_id().to_owned();
    let err = reply.finish_streamed_charged(&t, SMALL).unwrap_err();
    assert!(
        error_chain(&err).contains("injected"),
        "{}",
        error_chain(&err)
    );
    assert_no_end(&env, &session.id, &message_id);
    // The second session's creation and its message's parts streamed before the end.
    let (parts, sessions, messages, usage) = watch.counts();
    assert_eq!((sessions, usage), (1, 0));
    assert_eq!(
        (parts, messages),
        (2, 1),
        "the start and the streamed text only"
    );
}

#[test]
fn a_step_on_a_model_not_in_the_catalog_writes_nothing_of_the_end() {
    let env = Env::new();
    let t = tracker(&env);
    for streamed_form in [false, true] {
        let (session, reply) = streamed(&env, true);
        let message_id = reply.message_id().to_owned();
        let watch = Watch::new(&env, &t);
        let err = if streamed_form {
            reply.finish_streamed_charged(&t, "gpt-99").unwrap_err()
        } else {
            reply.finish_charged(&response(), &t, "gpt-99").unwrap_err()
        };
        assert!(
            matches!(&err, AgentError::UnknownModel(m) if m == "gpt-99"),
            "{err}"
        );
        assert_no_end(&env, &session.id, &message_id);
        assert_eq!(watch.counts(), (0, 0, 0, 0));
    }
}

#[test]
fn a_tracker_over_another_database_is_refused_before_anything_is_written() {
    let env = Env::new();
    let other = Store::open_in_memory().unwrap();
    let t = UsageTracker::new(other, env.catalog.clone());
    let (session, reply) = streamed(&env, true);
    let message_id = reply.message_id().to_owned();
    let err = reply.finish_charged(&response(), &t, SMALL).unwrap_err();
    assert!(matches!(err, AgentError::InvalidInput(_)), "{err}");
    assert_no_end(&env, &session.id, &message_id);
}

/// A tracker over a handle of its own on the reply's file (opened by a path written
/// another way, as a second component of one program would) is the same store: the
/// charge commits with the end, and its session event goes to the tracker's store's
/// subscribers (whose service queued it). Before, any other handle was refused.
#[test]
fn a_tracker_on_another_handle_to_the_same_file_charges_the_reply() {
    let env = Env::new();
    let same_file = Store::open(env._dir.path().join(".").join("scribe.db")).unwrap();
    let tracker_sessions = same_file.sessions().subscribe();
    let t = UsageTracker::new(same_file, env.catalog.clone());
    let (session, reply) = streamed(&env, true);
    let message_id = reply.message_id().to_owned();

    let (_, charge) = reply.finish_charged(&response(), &t, SMALL).unwrap();

    let expected = small_cost(&sample_usage());
    assert!((charge.record.cost_usd - expected).abs() < 1e-9);
    let after = env.get(&session.id);
    assert_eq!(after.api_call_count, 1);
    assert_eq!(after.tokens, sample_usage());
    assert!((after.estimated_cost_usd - expected).abs() < 1e-9);
    assert_eq!(
        env.messages.get(&message_id).unwrap().text(),
        "Hello there."
    );
    let announced: Vec<String> = tracker_sessions
        .try_iter()
        .map(|event| event.unwrap().payload.id)
        .collect();
    assert_eq!(announced, [session.id]);
}

/// Another file is another store, even in the same directory: refused by name, and
/// nothing of the end written to either.
#[test]
fn a_tracker_over_another_file_is_refused_before_anything_is_written() {
    let env = Env::new();
    let other_path = env._dir.path().join("other.db");
    let other = Store::open(&other_path).unwrap();
    let t = UsageTracker::new(other.clone(), env.catalog.clone());
    let (session, reply) = streamed(&env, true);
    let message_id = reply.message_id().to_owned();
    let err = reply.finish_charged(&response(), &t, SMALL).unwrap_err();
    assert!(matches!(err, AgentError::InvalidInput(_)), "{err}");
    let text = err.to_string();
    assert!(
        text.contains("another store") && text.contains(&other_path.display().to_string()),
        "{text}"
    );
    assert_no_end(&env, &session.id, &message_id);
    assert!(other.sessions().get(&session.id).is_err());
}

/// The end commits whole: the tail and the unstreamed call added, the `step_finish` part
/// last with the step's tokens and cost, the message and session charged exactly that,
/// and every event of it announced once, after the commit: a subscriber reading the
/// database on the end's first part event already sees the charge.
#[test]
fn an_end_that_commits_is_charged_exactly_and_announced_after_its_commit() {
    let env = Env::new();
    let t = tracker(&env);
    let (session, reply) = streamed(&env, true);
    let message_id = reply.message_id().to_owned();
    let watch = Watch::new(&env, &t);
    let path = env._dir.path().join("scribe.db");
    let sid = session.id.clone();
    let reader = std::thread::spawn({
        let parts = env.store.messages().subscribe_parts();
        move || {
            let first = parts.recv_timeout(Duration::from_secs(10)).unwrap();
            let conn = rusqlite::Connection::open(path).unwrap();
            let calls: i64 = conn
                .query_row(
                    "SELECT api_call_count FROM sessions WHERE id = ?1",
                    [&sid],
                    |row| row.get(0),
                )
                .unwrap();
            (first.payload.part.part.type_name().to_owned(), calls)
        }
    });

    let (tool_calls, charge) = reply.finish_charged(&response(), &t, SMALL).unwrap();
    let (first_kind, calls_seen) = reader.join().unwrap();
    assert_eq!(first_kind, "text", "the tail is the end's first change");
    assert_eq!(calls_seen, 1, "the charge committed with the tail");

    let expected = small_cost(&sample_usage());
    assert!((charge.record.cost_usd - expected).abs() < 1e-9);
    assert_eq!(charge.record.usage, sample_usage());
    assert_eq!(charge.record.session_id, session.id);
    assert_eq!(
        charge.record.message_id.as_deref(),
        Some(message_id.as_str())
    );
    assert_eq!(tool_calls.len(), 1);
    assert_eq!(tool_calls[0].1.call_id, "c9");

    let message = env.messages.get(&message_id).unwrap();
    let kinds: Vec<&str> = message.parts.iter().map(|p| p.part.type_name()).collect();
    assert_eq!(kinds, ["step_start", "text", "tool", "step_finish"]);
    assert_eq!(message.text(), "Hello there.");
    assert_eq!(message.parts[3], charge.step_finish);
    let Part::StepFinish(step) = &charge.step_finish.part else {
        panic!("{:?}", charge.step_finish)
    };
    assert_eq!(step.tokens, sample_usage());
    assert_eq!(step.reason, FinishReason::ToolUse);
    assert!((step.cost - expected).abs() < 1e-9);
    assert_eq!(message.usage, sample_usage());
    assert!((message.cost_usd - expected).abs() < 1e-9);
    let after = env.get(&session.id);
    assert_eq!(after.tokens, sample_usage());
    assert_eq!(after.api_call_count, 1);
    assert!((after.estimated_cost_usd - expected).abs() < 1e-9);

    // The tail, the call, the step_finish; the message's charge; the session's.
    assert_eq!(watch.counts(), (3, 1, 1, 1));

    // A second step, ended from its stream: the totals are the two steps' sum.
    let mut reply = ReplyWriter::start(
        env.store.messages(),
        NewMessage::new(&session.id, Role::Assistant, vec![]),
    )
    .unwrap();
    let second = TokenUsage {
        input: 10,
        output: 3,
        ..TokenUsage::default()
    };
    reply.push(ProviderEvent::TextDelta("done".into()));
    reply.push(ProviderEvent::Finish {
        reason: FinishReason::EndTurn,
        usage: second,
    });
    let (StreamedReply { response, .. }, charge) =
        reply.finish_streamed_charged(&t, SMALL).unwrap();
    assert_eq!(response.text(), "done");
    assert_eq!(charge.record.usage, second);
    let after = env.get(&session.id);
    assert_eq!(after.api_call_count, 2);
    assert_eq!(after.tokens.input, sample_usage().input + second.input);
    assert_eq!(after.tokens.output, sample_usage().output + second.output);
    assert!((after.estimated_cost_usd - (expected + small_cost(&second))).abs() < 1e-9);
}

/// A writer over a message that is not the assistant's (`ReplyWriter::new` takes any id)
/// charges nothing and adds none of the response to it: the refusal comes from inside
/// the end's transaction, which rolls back what the end had written.
#[test]
fn an_end_on_a_user_message_is_refused_and_rolled_back() {
    let env = Env::new();
    let t = tracker(&env);
    let session = env.session("not the assistant's");
    let user = env.user(&session.id, "hi");
    let watch = Watch::new(&env, &t);
    let err = ReplyWriter::new(env.store.messages(), &user.id)
        .finish_charged(&response(), &t, SMALL)
        .unwrap_err();
    assert!(matches!(err, AgentError::InvalidInput(_)), "{err}");
    assert_eq!(env.messages.get(&user.id).unwrap(), user);
    assert_eq!(env.get(&session.id).api_call_count, 0);
    assert_eq!(watch.counts(), (0, 0, 0, 0));
}
