//! Usage tracking against a real SQLite file: costs to 1e-9 with cache and
//! reasoning tokens, session and message charged in one transaction, typed
//! refusals that write nothing, exact totals from concurrent threads, and task
//! sessions rolled into their parent when they finish.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod compaction_support;

use std::sync::Arc;

use compaction_support::{CHEAP, Env, SMALL, sample_usage, small_cost};
use scribe_agent::{AgentError, AgentEvent, ReplyWriter, UsageTracker};
use scribe_message::{Part, TokenUsage};
use scribe_session::{RollUp, Session};

fn tracker(env: &Env) -> UsageTracker {
    UsageTracker::new(env.store.clone(), env.catalog.clone())
}

#[test]
fn cost_with_cache_and_reasoning_tokens_to_a_billionth() {
    let env = Env::new();
    let s = env.session("costs");
    env.user(&s.id, "hi");
    let a = env.assistant(&s.id, vec![Part::text("hello")]);
    let t = tracker(&env);
    let events = t.events().subscribe();

    let u = sample_usage();
    let record = t.track_usage(&s.id, SMALL, &u, Some(&a.id)).unwrap();
    // 3702 + 12255 + 26703.6 + 16203.75 = 58864.35 → $0.05886435
    let expected = 0.058_864_35;
    assert!((small_cost(&u) - expected).abs() < 1e-12);
    assert!(
        (record.cost_usd - expected).abs() < 1e-9,
        "{}",
        record.cost_usd
    );

    let session = env.get(&s.id);
    assert_eq!(session.tokens, u);
    assert_eq!(session.api_call_count, 1);
    assert!((session.estimated_cost_usd - expected).abs() < 1e-9);
    let message = env.messages.get(&a.id).unwrap();
    assert_eq!(message.usage, u);
    assert!((message.cost_usd - expected).abs() < 1e-9);
    // RETURNING reports the row before AFTER triggers run, so the touch trigger may have
    // moved updated_at by a millisecond since; everything else is exactly what was stored.
    assert!(record.session.updated_at <= session.updated_at);
    assert_eq!(
        Session {
            updated_at: session.updated_at,
            ..record.session.clone()
        },
        session
    );

    // A second call on another model adds up, per message and per session.
    let u2 = TokenUsage {
        input: 1_000_000,
        output: 1_000_000,
        cache_read: 1_000_000,
        cache_write: 1_000_000,
        reasoning: 1_000_000,
    };
    let r2 = t.track_usage(&s.id, CHEAP, &u2, Some(&a.id)).unwrap();
    assert!((r2.cost_usd - (1.0 + 5.0 + 0.10 + 1.25 + 5.0)).abs() < 1e-9);
    let session = env.get(&s.id);
    assert_eq!(session.api_call_count, 2);
    assert_eq!(session.tokens, u + u2);
    assert!((session.estimated_cost_usd - (expected + 12.35)).abs() < 1e-9);
    assert!((env.messages.get(&a.id).unwrap().cost_usd - (expected + 12.35)).abs() < 1e-9);
    // tool_call_count is the database's business, not the tracker's.
    assert_eq!(session.tool_call_count, 0);

    let seen: Vec<_> = events.try_iter().map(|e| e.unwrap().payload).collect();
    assert_eq!(seen.len(), 2);
    assert!(
        matches!(&seen[0], AgentEvent::UsageTracked { session_id, message_id: Some(m), model_id, cost_usd, .. }
        if *session_id == s.id && *m == a.id && model_id == SMALL && (cost_usd - expected).abs() < 1e-9)
    );
}

#[test]
fn session_only_charges_need_no_message() {
    let env = Env::new();
    let s = env.session("no message");
    let t = tracker(&env);
    let r = t.track_usage(&s.id, SMALL, &sample_usage(), None).unwrap();
    assert!(r.message.is_none());
    assert_eq!(env.get(&s.id).tokens, sample_usage());
}

#[test]
fn refusals_write_nothing() {
    let env = Env::new();
    let s = env.session("refusals");
    let other = env.session("other");
    let u = env.user(&s.id, "hi");
    let a = env.assistant(&s.id, vec![Part::text("hello")]);
    let foreign = env.assistant(&other.id, vec![Part::text("elsewhere")]);
    let t = tracker(&env);
    let before = env.get(&s.id);

    let err = t
        .track_usage(&s.id, "gpt-99", &sample_usage(), Some(&a.id))
        .unwrap_err();
    assert!(
        matches!(&err, AgentError::UnknownModel(m) if m == "gpt-99"),
        "{err}"
    );
    assert!(err.to_string().starts_with("unknown model \"gpt-99\""));

    let err = t
        .track_usage(&s.id, SMALL, &sample_usage(), Some(&foreign.id))
        .unwrap_err();
    assert!(matches!(err, AgentError::InvalidInput(_)), "{err}");
    let err = t
        .track_usage(&s.id, SMALL, &sample_usage(), Some(&u.id))
        .unwrap_err();
    assert!(matches!(err, AgentError::InvalidInput(_)), "{err}");
    let err = t
        .track_usage(&s.id, SMALL, &sample_usage(), Some("msg_missing"))
        .unwrap_err();
    assert!(matches!(err, AgentError::Message(_)), "{err}");
    let negative = TokenUsage {
        input: -5,
        ..TokenUsage::default()
    };
    let err = t
        .track_usage(&s.id, SMALL, &negative, Some(&a.id))
        .unwrap_err();
    assert!(matches!(err, AgentError::Session(_)), "{err}");
    let err = t
        .track_usage("ses_missing", SMALL, &sample_usage(), None)
        .unwrap_err();
    assert!(matches!(err, AgentError::Session(_)), "{err}");

    let after = env.get(&s.id);
    assert_eq!(after.tokens, before.tokens);
    assert_eq!(after.api_call_count, 0);
    assert_eq!(after.estimated_cost_usd, 0.0);
    assert!(env.messages.get(&a.id).unwrap().usage.is_zero());
    assert!(env.messages.get(&foreign.id).unwrap().usage.is_zero());
    assert_eq!(env.get(&other.id).api_call_count, 0);
}

/// A step's end charged on a model the catalog does not know is `UnknownModel` and writes
/// nothing: no `step_finish` part, none of the response's parts on the message (its doc
/// says so; an application on its own models must add them to the catalog), no tokens on
/// the session.
#[test]
fn a_step_on_an_unknown_model_writes_no_part() {
    let env = Env::new();
    let s = env.session("unknown step");
    let a = env.assistant(&s.id, vec![Part::text("hello")]);
    let response = scribe_agent::ProviderResponse {
        parts: vec![Part::text("hello")],
        finish_reason: scribe_message::FinishReason::EndTurn,
        usage: sample_usage(),
    };
    let err = ReplyWriter::new(env.store.messages(), &a.id)
        .finish_charged(&response, &tracker(&env), "gpt-99")
        .unwrap_err();
    assert!(
        matches!(&err, AgentError::UnknownModel(m) if m == "gpt-99"),
        "{err}"
    );
    assert_eq!(env.messages.get(&a.id).unwrap().parts.len(), 1);
    let after = env.get(&s.id);
    assert_eq!(
        (after.api_call_count, after.tokens),
        (0, TokenUsage::default())
    );
}

#[test]
fn ten_threads_tracking_at_once_count_exactly() {
    let env = Env::new();
    let s = env.session("contended");
    let a = env.assistant(&s.id, vec![Part::text("busy")]);
    let t = Arc::new(tracker(&env));
    const THREADS: i64 = 10;
    const CALLS: i64 = 25;
    let handles: Vec<_> = (0..THREADS)
        .map(|i| {
            let t = t.clone();
            let (sid, aid) = (s.id.clone(), a.id.clone());
            std::thread::spawn(move || {
                for j in 0..CALLS {
                    let u = TokenUsage {
                        input: 100 + i,
                        output: 10 + j,
                        cache_read: 1_000,
                        cache_write: 7,
                        reasoning: 3,
                    };
                    t.track_usage(&sid, SMALL, &u, Some(&aid)).unwrap();
                }
            })
        })
        .collect();
    for h in handles {
        h.join().unwrap();
    }
    let mut total = TokenUsage::default();
    let mut cost = 0.0;
    for i in 0..THREADS {
        for j in 0..CALLS {
            let u = TokenUsage {
                input: 100 + i,
                output: 10 + j,
                cache_read: 1_000,
                cache_write: 7,
                reasoning: 3,
            };
            total += u;
            cost += small_cost(&u);
        }
    }
    let session = env.get(&s.id);
    assert_eq!(session.api_call_count, THREADS * CALLS);
    assert_eq!(session.tokens, total);
    assert!((session.estimated_cost_usd - cost).abs() < 1e-9);
    let message = env.messages.get(&a.id).unwrap();
    assert_eq!(message.usage, total);
    assert!((message.cost_usd - cost).abs() < 1e-9);
}

#[test]
fn finishing_a_task_session_rolls_its_cost_into_the_parent_once() {
    let env = Env::new();
    let parent = env.session("parent");
    let t = tracker(&env);
    t.track_usage(&parent.id, SMALL, &sample_usage(), None)
        .unwrap();
    let child = env
        .sessions
        .create_task_session(&parent.id, "call_task_1", None)
        .unwrap();
    let a = env.assistant(&child.id, vec![Part::text("sub-agent answer")]);
    let child_usage = TokenUsage {
        input: 10_000,
        output: 2_000,
        cache_read: 50_000,
        cache_write: 1_000,
        reasoning: 500,
    };
    t.track_usage(&child.id, SMALL, &child_usage, Some(&a.id))
        .unwrap();

    let done = t.finish_task_session(&child.id, "completed").unwrap();
    assert_eq!(done.child.end_reason.as_deref(), Some("completed"));
    assert!(done.child.ended_at.is_some());
    let RollUp::RolledUp { parent: rolled } = &done.roll_up else {
        panic!("expected a roll-up, got {:?}", done.roll_up);
    };
    let expected = small_cost(&sample_usage()) + small_cost(&child_usage);
    assert!((rolled.estimated_cost_usd - expected).abs() < 1e-9);
    assert_eq!(rolled.tokens, sample_usage() + child_usage);
    assert_eq!(rolled.api_call_count, 2);
    assert_eq!(env.get(&parent.id), **rolled);

    // Finishing again changes nothing: first end and first roll-up win.
    let again = t.finish_task_session(&child.id, "other").unwrap();
    assert_eq!(again.child.end_reason.as_deref(), Some("completed"));
    assert!(matches!(again.roll_up, RollUp::AlreadyRolledUp { .. }));
    let parent_now = env.get(&parent.id);
    assert!((parent_now.estimated_cost_usd - expected).abs() < 1e-9);
    assert_eq!(parent_now.api_call_count, 2);

    // A session without parent just ends.
    let lone = env.session("lone");
    let done = t.finish_task_session(&lone.id, "completed").unwrap();
    assert_eq!(done.roll_up, RollUp::NoParent);
    assert!(t.finish_task_session(&lone.id, "  ").is_err());
    assert!(t.finish_task_session("ses_missing", "completed").is_err());
}
