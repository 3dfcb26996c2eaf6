//! Whole compaction runs: both strategies, repeated compaction, progress
//! events in order, the claim on `compacting_at`, a summary failure that
//! leaves the session unchanged, runs on their own thread, and a context that
//! never reads what came before the summary.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod compaction_support;

use std::sync::Arc;
use std::time::Duration;

use compaction_support::{CHEAP, Env, SMALL, drain, progress, read, text_of};
use scribe_agent::compaction::SUMMARY_PROMPT;
use scribe_agent::{
    AgentError, AgentEvent, CompactionConfig, CompactionOutcome, CompactionStrategy, ProviderError,
    ScriptedProvider, ScriptedTurn,
};
use scribe_db::queries as q;
use scribe_db::{ManualClock, Options, now_ms};
use scribe_message::{Part, Role, TokenUsage};
use scribe_session::SessionKind;

fn summary(text: &str) -> ScriptedTurn {
    ScriptedTurn::reply()
        .text(text)
        .usage(TokenUsage {
            input: 1_000,
            output: 100,
            ..TokenUsage::default()
        })
        .into()
}

/// A summary first that stands alone, keeping no recent message verbatim: these tests
/// are about whole summary runs; the cheap step and what a summary keeps are tested in
/// `compaction_strategies.rs`.
fn alone() -> CompactionConfig {
    CompactionConfig {
        prune_first: false,
        keep_recent_tokens: 0,
        ..CompactionConfig::default()
    }
}

fn continuation() -> CompactionConfig {
    CompactionConfig {
        strategy: CompactionStrategy::Continuation,
        ..alone()
    }
}

fn round(env: &Env, session: &str, n: usize) {
    env.user(session, &format!("round{n} question"));
    env.assistant(
        session,
        vec![
            Part::text(format!("round{n} answer")),
            read(&format!("c{n}"), 500, &format!("output{n}")),
        ],
    );
}

fn first_text(part: &Part) -> &str {
    match part {
        Part::Text(t) => &t.text,
        other => panic!("{other:?}"),
    }
}

#[test]
fn continuation_ends_the_session_and_opens_a_child_holding_the_summary() {
    let env = Env::new();
    let parent = env.session("Fix parser");
    round(&env, &parent.id, 1);
    let provider = Arc::new(ScriptedProvider::new([summary("summary one")]));
    let c = env
        .compactor(&provider, continuation())
        .with_summary_model(CHEAP);
    let events = c.subscribe();

    let outcome = c.compact(&parent.id, SMALL).unwrap();
    let CompactionOutcome::Continued {
        previous_session_id,
        new_session_id,
        summary_message_id,
        ..
    } = &outcome
    else {
        panic!("{outcome:?}")
    };
    assert_eq!(previous_session_id, &parent.id);
    assert_eq!(outcome.session_id(), new_session_id);

    let ended = env.get(&parent.id);
    assert_eq!(ended.end_reason.as_deref(), Some("compression"));
    assert!(ended.ended_at.is_some());
    assert_eq!(ended.compacting_at, None);
    assert_eq!(ended.summary_message_id, None);
    assert_eq!(
        ended.api_call_count, 0,
        "the summary call is charged where the summary lives"
    );

    let child = env.get(new_session_id);
    assert_eq!(child.kind, SessionKind::Continuation);
    assert_eq!(child.parent_session_id.as_deref(), Some(parent.id.as_str()));
    assert_eq!(child.title.as_deref(), Some("Fix parser #2"));
    assert_eq!(
        child.summary_message_id.as_deref(),
        Some(summary_message_id.as_str())
    );
    assert_eq!(child.api_call_count, 1);
    assert!((child.estimated_cost_usd - (1_000.0 + 500.0) / 1e6).abs() < 1e-9);
    let stored = env.messages.list(new_session_id).unwrap();
    assert_eq!(stored.len(), 1);
    assert!(stored[0].is_summary);
    assert_eq!(stored[0].text(), "summary one");

    let ctx = c.context(new_session_id).unwrap();
    assert_eq!(ctx.messages.len(), 1);
    assert_eq!(ctx.messages[0].role, Role::User);
    assert_eq!(first_text(&ctx.messages[0].parts[0]), "summary one");

    let seen = drain(&events);
    assert_eq!(
        progress(&seen),
        ["starting", "analyzing", "summarizing", "done"]
    );
    assert!(seen.iter().any(|e| matches!(e, AgentEvent::CompactionDone { continuation_session_id: Some(id), .. } if id == new_session_id)));

    // The ended session cannot be compacted again.
    assert!(matches!(
        c.compact(&parent.id, SMALL).unwrap_err(),
        AgentError::SessionEnded { .. }
    ));
}

#[test]
fn continuation_three_times_builds_a_titled_chain() {
    let env = Env::new();
    let root = env.session("Chain");
    let provider = Arc::new(ScriptedProvider::new([
        summary("s1"),
        summary("s2"),
        summary("s3"),
    ]));
    let c = env
        .compactor(&provider, continuation())
        .with_summary_model(CHEAP);
    let mut current = root.id.clone();
    let mut titles = vec![env.get(&current).title.unwrap()];
    for n in 1..=3 {
        round(&env, &current, n);
        let outcome = c.compact(&current, SMALL).unwrap();
        current = outcome.session_id().to_owned();
        titles.push(env.get(&current).title.unwrap());
    }
    assert_eq!(titles, ["Chain", "Chain #2", "Chain #3", "Chain #4"]);
    assert_eq!(env.sessions.continuation_tip(&root.id).unwrap().id, current);
    // The second summary request saw the first summary, then round 2 only.
    let r = &provider.requests()[1];
    assert_eq!(first_text(&r.messages[0].parts[0]), "s1");
    assert_eq!(r.messages[0].role, Role::User);
    assert!(first_text(&r.messages[1].parts[0]).starts_with("round2"));
    assert_eq!(r.messages.len(), 4, "summary, user, assistant, prompt");
}

#[test]
fn in_place_three_times_each_summary_covers_the_previous_one() {
    let env = Env::new();
    let s = env.session("Repeat");
    let provider = Arc::new(ScriptedProvider::new([
        summary("s1"),
        summary("s2"),
        summary("s3"),
    ]));
    let c = env.compactor(&provider, alone()).with_summary_model(CHEAP);
    let events = c.subscribe();
    let mut summaries = Vec::new();
    for n in 1..=3 {
        round(&env, &s.id, n);
        round(&env, &s.id, n + 10);
        let outcome = c.compact(&s.id, SMALL).unwrap();
        let CompactionOutcome::InPlace {
            summary_message_id, ..
        } = outcome
        else {
            panic!()
        };
        assert_eq!(
            env.get(&s.id).summary_message_id.as_deref(),
            Some(summary_message_id.as_str())
        );
        summaries.push(summary_message_id);
    }
    let requests = provider.requests();
    assert_eq!(requests[0].messages.len(), 5, "two rounds and the prompt");
    for (i, r) in requests.iter().enumerate().skip(1) {
        // The previous summary first, then only this round's messages.
        assert_eq!(first_text(&r.messages[0].parts[0]), format!("s{i}"));
        assert_eq!(r.messages.len(), 6, "{i}");
        assert!(first_text(&r.messages[1].parts[0]).starts_with(&format!("round{}", i + 1)));
        assert_eq!(first_text(&r.messages[5].parts[0]), SUMMARY_PROMPT);
    }
    let ctx = c.context(&s.id).unwrap();
    assert_eq!(ctx.loaded_messages, 1);
    assert_eq!(first_text(&ctx.messages[0].parts[0]), "s3");
    let session = env.get(&s.id);
    assert_eq!(session.api_call_count, 3);
    assert_eq!(session.message_count, 12 + 3);
    assert_eq!(
        env.messages
            .list(&s.id)
            .unwrap()
            .iter()
            .filter(|m| m.is_summary)
            .count(),
        3
    );
    assert_eq!(
        progress(&drain(&events)),
        ["starting", "analyzing", "summarizing", "done"].repeat(3)
    );
}

#[test]
fn a_failed_summary_call_leaves_the_session_unchanged() {
    for strategy in [
        CompactionStrategy::InPlace,
        CompactionStrategy::Continuation,
    ] {
        let env = Env::new();
        let s = env.session("Fragile");
        round(&env, &s.id, 1);
        let provider = Arc::new(ScriptedProvider::new([summary("s1")]));
        // A first summary in place, so the failing run has one to keep.
        env.compactor(&provider, CompactionConfig::default())
            .with_summary_model(CHEAP)
            .compact(&s.id, SMALL)
            .unwrap();
        round(&env, &s.id, 2);
        let before = env.get(&s.id);
        let listed = env.messages.list(&s.id).unwrap();

        provider.push(ScriptedTurn::error(ProviderError::Api {
            provider: "scripted".into(),
            status: Some(529),
            message: "overloaded".into(),
        }));
        let config = CompactionConfig {
            strategy,
            ..CompactionConfig::default()
        };
        let c = env.compactor(&provider, config).with_summary_model(CHEAP);
        let events = c.subscribe();
        let err = c.compact(&s.id, SMALL).unwrap_err();
        assert!(
            matches!(
                err,
                AgentError::Provider {
                    source: ProviderError::Api { .. },
                    ..
                }
            ),
            "{err}"
        );

        let after = env.get(&s.id);
        assert_eq!(after.summary_message_id, before.summary_message_id);
        assert_eq!(after.compacting_at, None);
        assert_eq!(after.ended_at, None);
        assert_eq!(after.api_call_count, before.api_call_count);
        assert_eq!(after.estimated_cost_usd, before.estimated_cost_usd);
        assert_eq!(env.messages.list(&s.id).unwrap(), listed);
        assert!(
            env.sessions.children(&s.id).unwrap().is_empty(),
            "{strategy:?}"
        );

        let seen = drain(&events);
        assert_eq!(
            progress(&seen),
            ["starting", "analyzing", "summarizing", "failed"]
        );
        let Some(AgentEvent::CompactionFailed {
            session_id,
            error,
            steps,
        }) = seen.last()
        else {
            panic!()
        };
        assert_eq!(session_id, &s.id);
        assert!(
            steps.is_empty(),
            "nothing was pruned, nothing else ran: {steps:?}"
        );
        assert!(
            error.contains("model call failed") && error.contains("overloaded"),
            "{error}"
        );
    }
}

#[test]
fn nothing_to_summarize_is_an_error_event() {
    let env = Env::new();
    let provider = Arc::new(ScriptedProvider::new([summary("s1")]));
    let c = env.compactor(&provider, alone()).with_summary_model(CHEAP);
    let events = c.subscribe();
    let empty = env.session("Empty");
    let err = c.compact(&empty.id, SMALL).unwrap_err();
    assert!(
        matches!(err, AgentError::NothingToSummarize { .. }),
        "{err}"
    );
    let seen = drain(&events);
    assert_eq!(progress(&seen), ["starting", "analyzing", "failed"]);
    assert!(
        matches!(seen.last(), Some(AgentEvent::CompactionFailed { error, .. }) if error.starts_with("no messages to summarize"))
    );
    assert_eq!(env.get(&empty.id).compacting_at, None);

    // Right after a summary there is nothing new either.
    round(&env, &empty.id, 1);
    c.compact(&empty.id, SMALL).unwrap();
    assert!(matches!(
        c.compact(&empty.id, SMALL).unwrap_err(),
        AgentError::NothingToSummarize { .. }
    ));
    assert_eq!(provider.requests().len(), 1);
}

#[test]
fn a_running_compaction_holds_the_session_until_it_is_stale() {
    // The store's clock, moved by hand: no sleeping to age the claim.
    let hand = ManualClock::new(now_ms());
    let env = Env::with_options(Options {
        clock: hand.clock(),
        ..Options::default()
    });
    let s = env.session("Busy");
    round(&env, &s.id, 1);
    let provider = Arc::new(ScriptedProvider::new([summary("s1")]));
    let c = env.compactor(&provider, alone()).with_summary_model(CHEAP);
    let events = c.subscribe();
    env.sessions.set_compacting(&s.id, true).unwrap();
    let err = c.compact(&s.id, SMALL).unwrap_err();
    assert!(matches!(err, AgentError::AlreadyCompacting { .. }), "{err}");
    assert!(
        drain(&events).is_empty(),
        "a refused claim reports no progress"
    );
    assert!(provider.requests().is_empty());

    // Still held just inside the stale window (9 s later, window 10 s)...
    let c = env
        .compactor(&provider, alone())
        .with_summary_model(CHEAP)
        .with_stale_after(Duration::from_secs(10));
    hand.advance(Duration::from_secs(9));
    assert!(matches!(
        c.compact(&s.id, SMALL).unwrap_err(),
        AgentError::AlreadyCompacting { .. }
    ));
    // ...and taken over past it (a minute later): a crashed run's mark.
    hand.advance(Duration::from_secs(51));
    c.compact(&s.id, SMALL).unwrap();
    assert_eq!(env.get(&s.id).compacting_at, None);
}

#[test]
fn spawned_compaction_reports_progress_while_it_runs() {
    let env = Env::new();
    let s = env.session("Threaded");
    round(&env, &s.id, 1);
    let provider = Arc::new(ScriptedProvider::new([summary("s1")]));
    let c = Arc::new(env.compactor(&provider, alone()).with_summary_model(CHEAP));
    let events = c.subscribe();
    let handle = c.spawn_compact(s.id.clone(), SMALL.to_owned());
    let mut names = Vec::new();
    loop {
        let e = events
            .recv_timeout(Duration::from_secs(10))
            .unwrap()
            .payload;
        names.extend(progress(std::slice::from_ref(&e)));
        if e.is_terminal() {
            break;
        }
    }
    assert_eq!(names, ["starting", "analyzing", "summarizing", "done"]);
    let outcome = handle.join().unwrap().unwrap();
    assert_eq!(
        env.get(&s.id).summary_message_id.as_deref(),
        outcome.summary_message_id()
    );
}

#[test]
fn context_after_a_summary_never_reads_older_rows() {
    let env = Env::new();
    let s = env.session("Cursor");
    for n in 1..=20 {
        round(&env, &s.id, n);
    }
    let old = env.messages.list(&s.id).unwrap();
    let provider = Arc::new(ScriptedProvider::new([summary("s1")]));
    let c = env.compactor(&provider, alone()).with_summary_model(CHEAP);
    c.compact(&s.id, SMALL).unwrap();
    env.user(&s.id, &text_of(10, "fresh"));

    // Corrupt a part row from before the summary: loading the whole history now fails…
    let victim = &old[1].parts[0].id;
    env.db
        .write(|tx| -> scribe_db::Result<()> {
            let now = tx.now();
            tx.q().update_part(&q::UpdatePartParams {
                r#type: "text",
                data: "[\"not a part\"]",
                now,
                id: victim,
            })?;
            Ok(())
        })
        .unwrap();
    assert!(env.messages.list(&s.id).is_err());
    // …but the context reads only the summary and what follows it.
    let ctx = c.context(&s.id).unwrap();
    assert_eq!(ctx.loaded_messages, 2);
    assert_eq!(ctx.messages.len(), 2);
    assert_eq!(first_text(&ctx.messages[0].parts[0]), "s1");
    assert!(first_text(&ctx.messages[1].parts[0]).starts_with("fresh"));
}
