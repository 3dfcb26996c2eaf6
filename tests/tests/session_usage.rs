//! Usage and cost: atomic increments (exact under 10 concurrent threads), validation,
//! once-only roll-up into the parent, stats by model/source/day and top sessions.
#![allow(clippy::unwrap_used, clippy::expect_used)]

#[path = "session_common/mod.rs"]
mod common;

use std::sync::Arc;
use std::thread;

use common::{drain, env, env_on};
use rusqlite::Connection;
use scribe_db::queries as q;
use scribe_db::{Database, ManualClock, Options};
use scribe_message::{FinishReason, MessageService, NewMessage, Part, Role, TokenUsage};
use scribe_pubsub::EventKind;
use scribe_session::{
    ExportSelection, NewSession, RollUp, SessionError, SessionService, StatsBy, UsageDelta,
};
use scribe_tests::Backend;

/// The ids of the two sessions with the most tokens, most first.
fn top_two_by_tokens(svc: &SessionService) -> Vec<String> {
    svc.top_sessions_by_tokens(2)
        .unwrap()
        .into_iter()
        .map(|s| s.id)
        .collect()
}

fn delta(input: i64, output: i64, cost: f64) -> UsageDelta {
    UsageDelta {
        tokens: TokenUsage {
            input,
            output,
            cache_read: 2,
            cache_write: 1,
            reasoning: 4,
        },
        api_calls: 1,
        tool_calls: 0,
        cost_usd: cost,
        actual_cost_usd: None,
    }
}

fn add_usage_increments_and_publishes_the_new_totals(backend: Backend) {
    let e = env_on(backend);
    let s = e.svc.create(NewSession::default()).unwrap();
    let sub = e.svc.subscribe();
    let first = e.svc.add_usage(&s.id, &delta(10, 20, 0.25)).unwrap();
    let second = e
        .svc
        .add_usage(
            &s.id,
            &UsageDelta {
                tool_calls: 2,
                actual_cost_usd: Some(0.5),
                ..delta(1, 2, 0.5)
            },
        )
        .unwrap();
    assert_eq!(
        second.tokens,
        TokenUsage {
            input: 11,
            output: 22,
            cache_read: 4,
            cache_write: 2,
            reasoning: 8
        }
    );
    assert_eq!(second.api_call_count, 2);
    assert_eq!(second.tool_call_count, 2);
    assert_eq!(second.estimated_cost_usd, 0.75);
    assert_eq!(second.actual_cost_usd, Some(0.5));
    assert_eq!(first.actual_cost_usd, None);
    let events = drain(&sub);
    assert_eq!(events.len(), 2);
    assert_eq!(
        (events[0].kind, &events[0].payload),
        (EventKind::Updated, &first)
    );
    assert_eq!(
        (events[1].kind, &events[1].payload),
        (EventKind::Updated, &second)
    );
    assert_eq!(e.svc.get(&s.id).unwrap(), second);
}

fn bad_deltas_and_unknown_sessions_change_nothing(backend: Backend) {
    let e = env_on(backend);
    let s = e.svc.create(NewSession::default()).unwrap();
    let sub = e.svc.subscribe();
    for bad in [
        delta(-1, 0, 0.0),
        UsageDelta {
            api_calls: -1,
            ..UsageDelta::default()
        },
        delta(0, 0, f64::NAN),
        delta(0, 0, -0.5),
        UsageDelta {
            actual_cost_usd: Some(f64::INFINITY),
            ..UsageDelta::default()
        },
    ] {
        let r = e.svc.add_usage(&s.id, &bad);
        assert!(
            matches!(r, Err(SessionError::InvalidInput(_))),
            "{bad:?} {r:?}"
        );
    }
    let r = e.svc.add_usage("ses_missing", &delta(1, 1, 0.25));
    assert!(matches!(r, Err(SessionError::NotFound { .. })), "{r:?}");
    assert!(drain(&sub).is_empty());
    assert_eq!(e.svc.get(&s.id).unwrap(), s);
}

fn ten_threads_adding_usage_give_exact_totals(backend: Backend) {
    let e = env_on(backend);
    let s = e.svc.create(NewSession::default()).unwrap();
    let svc = Arc::new(SessionService::new(Arc::clone(&e.db)));
    let threads: Vec<_> = (0..10)
        .map(|t| {
            let svc = Arc::clone(&svc);
            let id = s.id.clone();
            thread::spawn(move || {
                for _ in 0..100 {
                    // Quarter dollars add exactly in binary floating point.
                    svc.add_usage(&id, &delta(t + 1, 2, 0.25)).unwrap();
                }
            })
        })
        .collect();
    for t in threads {
        t.join().unwrap();
    }
    let total = e.svc.get(&s.id).unwrap();
    assert_eq!(total.tokens.input, 100 * (1..=10).sum::<i64>());
    assert_eq!(total.tokens.output, 2 * 1000);
    assert_eq!(total.tokens.cache_read, 2 * 1000);
    assert_eq!(total.tokens.cache_write, 1000);
    assert_eq!(total.tokens.reasoning, 4 * 1000);
    assert_eq!(total.api_call_count, 1000);
    assert_eq!(total.estimated_cost_usd, 250.0);
}

fn two_services_on_two_connections_both_count(backend: Backend) {
    let e = env_on(backend);
    let s = e.svc.create(NewSession::default()).unwrap();
    let other_db = e.t.reopen();
    let other = Arc::new(SessionService::new(other_db));
    let handles: Vec<_> = [Arc::new(SessionService::new(Arc::clone(&e.db))), other]
        .into_iter()
        .map(|svc| {
            let id = s.id.clone();
            thread::spawn(move || {
                for _ in 0..50 {
                    svc.add_usage(&id, &delta(1, 1, 0.5)).unwrap();
                }
            })
        })
        .collect();
    for h in handles {
        h.join().unwrap();
    }
    let total = e.svc.get(&s.id).unwrap();
    assert_eq!(total.tokens.input, 100);
    assert_eq!(total.estimated_cost_usd, 50.0);
}

fn add_usage_tx_joins_the_callers_transaction(backend: Backend) {
    let e = env_on(backend);
    let s = e.svc.create(NewSession::default()).unwrap();
    let sub = e.svc.subscribe();
    // Rolled back: nothing counts and nothing is published.
    let r: Result<(), _> = e.db.write(|tx| {
        e.svc.add_usage_tx(tx, &s.id, &delta(5, 5, 1.0)).unwrap();
        Err(scribe_db::Error::InvalidInput("abort".into()))
    });
    assert!(r.is_err());
    assert_eq!(e.svc.get(&s.id).unwrap().tokens.input, 0);
    assert!(drain(&sub).is_empty());
    // Committed: the change is announced once, after the commit, by the transaction
    // helper (the caller no longer publishes what a `_tx` method changed).
    e.db.write(|tx| -> scribe_session::Result<()> {
        e.svc.add_usage_tx(tx, &s.id, &delta(5, 5, 1.0))?;
        assert!(drain(&sub).is_empty(), "nothing before the commit");
        Ok(())
    })
    .unwrap();
    let events = drain(&sub);
    assert_eq!(events.len(), 1);
    assert_eq!(events[0].payload.tokens.input, 5);
}

fn roll_up_adds_child_totals_to_parent_exactly_once(backend: Backend) {
    let e = env_on(backend);
    let parent = e.svc.create(NewSession::default()).unwrap();
    let child = e
        .svc
        .create_task_session(&parent.id, "call_1", None)
        .unwrap();
    e.svc.add_usage(&parent.id, &delta(100, 10, 1.0)).unwrap();
    e.svc
        .add_usage(
            &child.id,
            &UsageDelta {
                actual_cost_usd: Some(0.75),
                ..delta(7, 3, 0.25)
            },
        )
        .unwrap();
    let sub = e.svc.subscribe();
    let RollUp::RolledUp { parent: after } = e.svc.roll_up_into_parent(&child.id).unwrap() else {
        panic!("not rolled up");
    };
    assert_eq!(after.tokens.input, 107);
    assert_eq!(after.tokens.output, 13);
    assert_eq!(after.tokens.reasoning, 8);
    assert_eq!(after.api_call_count, 2);
    assert_eq!(after.estimated_cost_usd, 1.25);
    assert_eq!(after.actual_cost_usd, Some(0.75));
    let events = drain(&sub);
    assert_eq!(events.len(), 1);
    assert_eq!(
        (events[0].kind, &*events[0].payload.id),
        (EventKind::Updated, parent.id.as_str())
    );
    assert_eq!(events[0].payload, *after);

    match e.svc.roll_up_into_parent(&child.id).unwrap() {
        RollUp::AlreadyRolledUp { parent_id, .. } => assert_eq!(parent_id, parent.id),
        other => panic!("{other:?}"),
    }
    assert_eq!(e.svc.get(&parent.id).unwrap(), *after);
    assert!(drain(&sub).is_empty());
    assert!(e.svc.rolled_up_at(&child.id).unwrap().is_some());
    assert_eq!(e.svc.rolled_up_at(&parent.id).unwrap(), None);
    assert_eq!(
        e.svc.roll_up_into_parent(&parent.id).unwrap(),
        RollUp::NoParent
    );
    assert!(matches!(
        e.svc.roll_up_into_parent("nope"),
        Err(SessionError::NotFound { .. })
    ));
}

fn stats_group_by_model_source_directory_and_day_counting_rolled_up_children_once(
    backend: Backend,
) {
    let e = env_on(backend);
    let a = e
        .svc
        .create(NewSession {
            model: Some("m1".into()),
            source: "cli".into(),
            directory: Some("/w/one".into()),
            ..NewSession::default()
        })
        .unwrap();
    let b = e
        .svc
        .create(NewSession {
            model: Some("m2".into()),
            source: "tui".into(),
            ..NewSession::default()
        })
        .unwrap();
    let c = e
        .svc
        .create(NewSession {
            model: Some("m1".into()),
            source: "tui".into(),
            directory: Some("/w/two".into()),
            ..NewSession::default()
        })
        .unwrap();
    let child = e.svc.create_task_session(&a.id, "call_x", None).unwrap();
    e.svc.add_usage(&a.id, &delta(10, 1, 1.0)).unwrap();
    e.svc.add_usage(&b.id, &delta(20, 2, 2.0)).unwrap();
    e.svc.add_usage(&c.id, &delta(30, 3, 0.5)).unwrap();
    e.svc.add_usage(&child.id, &delta(5, 5, 0.25)).unwrap();

    let by_model = e.svc.stats(StatsBy::Model, None).unwrap();
    assert_eq!(by_model.totals.tokens.input, 65);
    assert_eq!(by_model.totals.cost_usd, 3.75);
    assert_eq!(by_model.totals.sessions, 4);
    e.svc.roll_up_into_parent(&child.id).unwrap();
    let by_model = e.svc.stats(StatsBy::Model, None).unwrap();
    // The parent's totals now hold the child's, but each session still counts its own
    // usage only: nothing twice.
    assert_eq!(by_model.totals.tokens.input, 65);
    assert_eq!(by_model.totals.cost_usd, 3.75);
    assert_eq!(by_model.totals.sessions, 4);
    let keys: Vec<_> = by_model
        .rows
        .iter()
        .map(|r| (r.key.as_str(), r.totals.tokens.input, r.totals.cost_usd))
        .collect();
    assert_eq!(keys, vec![("m2", 20, 2.0), ("m1", 45, 1.75)]);
    assert_eq!(by_model.rows[1].totals.sessions, 3);
    assert_eq!(by_model.rows[1].totals.tokens.cache_read, 6);
    assert_eq!(by_model.rows[1].totals.tokens.cache_write, 3);
    assert_eq!(by_model.rows[1].totals.tokens.reasoning, 12);
    assert_eq!(by_model.rows[1].totals.api_calls, 3);

    let by_source = e.svc.stats(StatsBy::Source, None).unwrap();
    let keys: Vec<_> = by_source
        .rows
        .iter()
        .map(|r| (r.key.as_str(), r.totals.tokens.input))
        .collect();
    assert_eq!(keys, vec![("tui", 50), ("cli", 15)]);

    // By where the agent worked: the task child where its parent did, a session that
    // names no directory under "".
    let by_directory = e.svc.stats(StatsBy::Directory, None).unwrap();
    let keys: Vec<_> = by_directory
        .rows
        .iter()
        .map(|r| (r.key.as_str(), r.totals.tokens.input, r.totals.cost_usd))
        .collect();
    assert_eq!(
        keys,
        vec![("", 20, 2.0), ("/w/one", 15, 1.25), ("/w/two", 30, 0.5)]
    );
    assert_eq!(by_directory.rows[1].totals.sessions, 2);
    assert_eq!(by_directory.totals, by_model.totals);

    let by_day = e.svc.stats(StatsBy::Day, None).unwrap();
    assert_eq!(by_day.rows.len(), 1);
    assert_eq!(by_day.rows[0].key.len(), 10);
    assert_eq!(by_day.rows[0].totals, by_day.totals);

    let future = e.svc.stats(StatsBy::Source, Some(i64::MAX)).unwrap();
    assert!(future.rows.is_empty());
    assert_eq!(future.totals.sessions, 0);
    assert_eq!(future.since, Some(i64::MAX));

    let top = top_two_by_tokens(&e.svc);
    // a holds its rolled-up child: 15 + 6 + 4 + 2 + 8 = 35 tokens, more than b (29).
    assert_eq!(top, vec![c.id.clone(), a.id.clone()]);
}

/// A cost that leaves out usage of a model without a price (an imported session's
/// `cost_status` `partial` or `unknown`) is counted as such in every grouping, and in the
/// totals, so a report can say its cost is a lower bound; `reported+estimated` and no
/// status are complete costs.
fn stats_count_the_sessions_whose_cost_leaves_out_unpriced_usage(backend: Backend) {
    let e = env_on(backend);
    let mut ids = Vec::new();
    for (model, source, status, cost) in [
        ("m1", "codex", Some("estimated"), 1.0),
        ("m1", "codex", Some("partial"), 0.5),
        ("m2", "gemini", Some("unknown"), 0.0),
        ("m2", "cli", None, 0.25),
        ("m3", "cli", Some("reported+estimated"), 2.0),
    ] {
        let s = e
            .svc
            .create(NewSession {
                model: Some(model.into()),
                source: source.into(),
                ..NewSession::default()
            })
            .unwrap();
        e.svc.add_usage(&s.id, &delta(10, 1, cost)).unwrap();
        let s = e
            .svc
            .update(&s.id, |s| s.cost_status = status.map(str::to_owned))
            .unwrap();
        assert_eq!(
            s.cost_is_partial(),
            matches!(status, Some("partial" | "unknown")),
            "{status:?}"
        );
        ids.push(s.id);
    }
    let unpriced = |by| -> Vec<(String, i64, i64)> {
        let stats = e.svc.stats(by, None).unwrap();
        assert_eq!(stats.totals.unpriced_sessions, 2);
        assert!(stats.totals.cost_is_partial());
        let mut rows: Vec<_> = stats
            .rows
            .into_iter()
            .map(|r| (r.key, r.totals.sessions, r.totals.unpriced_sessions))
            .collect();
        rows.sort();
        rows
    };
    assert_eq!(
        unpriced(StatsBy::Model),
        vec![
            ("m1".to_owned(), 2, 1),
            ("m2".to_owned(), 2, 1),
            ("m3".to_owned(), 1, 0)
        ]
    );
    assert_eq!(
        unpriced(StatsBy::Source),
        vec![
            ("cli".to_owned(), 2, 0),
            ("codex".to_owned(), 2, 1),
            ("gemini".to_owned(), 1, 1)
        ]
    );
    let by_day = unpriced(StatsBy::Day);
    assert_eq!(by_day.len(), 1);
    assert_eq!((by_day[0].1, by_day[0].2), (5, 2));
    // Given a price later (the importer sets the status again), nothing is left out.
    for id in &ids[1..3] {
        e.svc
            .update(id, |s| s.cost_status = Some("estimated".into()))
            .unwrap();
    }
    let stats = e.svc.stats(StatsBy::Model, None).unwrap();
    assert_eq!(stats.totals.unpriced_sessions, 0);
    assert!(stats.rows.iter().all(|r| !r.totals.cost_is_partial()));
    let future = e.svc.stats(StatsBy::Model, Some(i64::MAX)).unwrap();
    assert_eq!(future.totals.unpriced_sessions, 0);
}

/// A message of `model` at `at` carrying `input` tokens and `cost`, stored in `session_id`.
fn used(
    e: &common::Env,
    session_id: &str,
    model: Option<&str>,
    at: i64,
    input: i64,
    cost: f64,
) -> String {
    let mut msg = common::message(session_id, Role::Assistant, vec![Part::text("done")]);
    msg.model = model.map(str::to_owned);
    msg.created_at = at;
    msg.updated_at = at;
    msg.usage = TokenUsage {
        input,
        ..TokenUsage::default()
    };
    msg.cost_usd = cost;
    common::store_message(&e.db, &msg);
    msg.id
}

/// (key, sessions, input tokens, calls, cost in micro-dollars, unpriced sessions) of
/// every row, in the stats' order.
fn rows_of(stats: &scribe_session::UsageStats) -> Vec<(String, i64, i64, i64, i64, i64)> {
    stats
        .rows
        .iter()
        .map(|r| {
            let t = &r.totals;
            #[allow(clippy::cast_possible_truncation)]
            let micros = (t.cost_usd * 1e6).round() as i64;
            (
                r.key.clone(),
                t.sessions,
                t.tokens.input,
                t.api_calls,
                micros,
                t.unpriced_sessions,
            )
        })
        .collect()
}

fn stats_split_a_session_by_the_model_and_hour_of_its_messages(backend: Backend) {
    let e = env_on(backend);
    const DAY1: i64 = 1_772_359_200_000; // 2026-03-01 10:00 UTC
    const DAY2: i64 = DAY1 + 86_400_000 - 3_600_000; // 2026-03-02 09:00 UTC
    let new = |model: &str| {
        e.svc
            .create(NewSession {
                model: Some(model.into()),
                source: "claude-code".into(),
                ..NewSession::default()
            })
            .unwrap()
    };
    let plain = |input: i64, calls: i64, cost: f64| UsageDelta {
        tokens: TokenUsage {
            input,
            ..TokenUsage::default()
        },
        api_calls: calls,
        tool_calls: 0,
        cost_usd: cost,
        actual_cost_usd: None,
    };
    // Switched from sonnet to opus overnight; one message names no model; 1,000 tokens and
    // two calls the session counts were carried by no message.
    let switched = new("opus");
    used(&e, &switched.id, Some("sonnet"), DAY1, 100, 1.0);
    used(&e, &switched.id, None, DAY1 + 3_600_000, 5, 0.125);
    let on_opus = used(&e, &switched.id, Some("opus"), DAY2, 200, 3.0);
    e.svc
        .add_usage(&switched.id, &plain(1_305, 5, 4.625))
        .unwrap();
    // A fork copies messages with their usage and starts with no usage of its own: its
    // copies count nowhere, so no token counts twice.
    let fork = e.svc.fork(&switched.id, &on_opus).unwrap();
    // Cleared: its messages are gone, the usage they carried is still the session's.
    let cleared = new("haiku");
    used(&e, &cleared.id, Some("sonnet"), DAY1, 40, 0.5);
    e.svc.add_usage(&cleared.id, &plain(40, 1, 0.5)).unwrap();
    e.svc.clear(&cleared.id).unwrap();
    // No usage at all.
    let idle = new("haiku");

    let today = scribe_db::calendar::date(switched.created_at);
    for id in [&fork.id, &cleared.id, &idle.id] {
        let created = e.svc.get(id).unwrap().created_at;
        assert_eq!(
            scribe_db::calendar::date(created),
            today,
            "one creation day"
        );
    }
    let by_model = e.svc.stats(StatsBy::Model, None).unwrap();
    assert_eq!(
        rows_of(&by_model),
        vec![
            // The opus message, the unnamed one and what no message carried; the five
            // calls shared among the three messages (2, 2 and 1, the first two first).
            ("opus".to_owned(), 2, 1_205, 3, 3_625_000, 0),
            ("sonnet".to_owned(), 1, 100, 2, 1_000_000, 0),
            ("haiku".to_owned(), 2, 40, 1, 500_000, 0),
        ]
    );
    let by_day = e.svc.stats(StatsBy::Day, None).unwrap();
    assert_eq!(
        rows_of(&by_day),
        vec![
            ("2026-03-01".to_owned(), 1, 105, 4, 1_125_000, 0),
            ("2026-03-02".to_owned(), 1, 200, 1, 3_000_000, 0),
            (today.clone(), 4, 1_040, 1, 1_000_000, 0),
        ]
    );
    let by_source = e.svc.stats(StatsBy::Source, None).unwrap();
    assert_eq!(
        rows_of(&by_source),
        vec![("claude-code".to_owned(), 4, 1_345, 6, 5_125_000, 0)]
    );
    // A week runs Monday to Sunday, keyed by its Monday: 2026-03-01 was a Sunday, so the
    // night's two days fall in two weeks, and in one month.
    let this_week = scribe_db::calendar::week_start(&today).unwrap();
    assert_ne!(this_week, "2026-03-02", "the test runs after that week");
    let by_week = e.svc.stats(StatsBy::Week, None).unwrap();
    assert_eq!(
        rows_of(&by_week),
        vec![
            ("2026-02-23".to_owned(), 1, 105, 4, 1_125_000, 0),
            ("2026-03-02".to_owned(), 1, 200, 1, 3_000_000, 0),
            (this_week, 4, 1_040, 1, 1_000_000, 0),
        ]
    );
    let by_month = e.svc.stats(StatsBy::Month, None).unwrap();
    assert_eq!(
        rows_of(&by_month),
        vec![
            ("2026-03".to_owned(), 1, 305, 5, 4_125_000, 0),
            (today[..7].to_owned(), 4, 1_040, 1, 1_000_000, 0),
        ]
    );
    // Usage blocks: five hours from the hour of the first use after the last block ended.
    // The night's messages (10:00 and 11:00, then 09:00 the next day) are two blocks; what
    // the sessions count beyond their messages opens one at the hour they were created.
    let created_hour = switched.created_at - switched.created_at.rem_euclid(3_600_000);
    let this_block = format!(
        "{}T{:02}:00Z",
        today,
        created_hour.rem_euclid(86_400_000) / 3_600_000
    );
    let by_block = e.svc.stats(StatsBy::Block, None).unwrap();
    assert_eq!(
        rows_of(&by_block),
        vec![
            ("2026-03-01T10:00Z".to_owned(), 1, 105, 4, 1_125_000, 0),
            ("2026-03-02T09:00Z".to_owned(), 1, 200, 1, 3_000_000, 0),
            (this_block, 4, 1_040, 1, 1_000_000, 0),
        ]
    );
    // From 11:00 on, the first block starts at the hour of the first use in the period.
    let later = e.svc.stats(StatsBy::Block, Some(DAY1 + 3_600_000)).unwrap();
    assert_eq!(later.rows[0].key, "2026-03-01T11:00Z");
    assert_eq!(later.rows[0].totals.tokens.input, 5);
    // Every grouping adds up to the totals, which count every session once.
    for stats in [
        &by_model, &by_day, &by_source, &by_week, &by_month, &by_block,
    ] {
        let t = &stats.totals;
        assert_eq!((t.sessions, t.tokens.input, t.api_calls), (4, 1_345, 6));
        assert!((t.cost_usd - 5.125).abs() < 1e-12, "{}", t.cost_usd);
        let input: i64 = stats.rows.iter().map(|r| r.totals.tokens.input).sum();
        let calls: i64 = stats.rows.iter().map(|r| r.totals.api_calls).sum();
        let cost: f64 = stats.rows.iter().map(|r| r.totals.cost_usd).sum();
        assert_eq!((input, calls), (1_345, 6));
        assert!((cost - 5.125).abs() < 1e-12, "{cost}");
    }
    // `since` counts the usage from then on: a message's by its time, what a session
    // counts beyond its messages by when the session started (all four today).
    let since = e.svc.stats(StatsBy::Model, Some(DAY2)).unwrap();
    assert_eq!(
        rows_of(&since),
        vec![
            ("opus".to_owned(), 2, 1_200, 1, 3_500_000, 0),
            ("haiku".to_owned(), 2, 40, 1, 500_000, 0),
        ]
    );
    assert_eq!(
        (
            since.totals.sessions,
            since.totals.tokens.input,
            since.totals.api_calls
        ),
        (4, 1_240, 2)
    );
    // A session whose cost leaves out a model without a price marks only the model that
    // had none (a store of its own: sessions created within a millisecond share a time).
    let e = env_on(backend);
    let partial = e
        .svc
        .create(NewSession {
            model: Some("opus".into()),
            ..NewSession::default()
        })
        .unwrap();
    used(&e, &partial.id, Some("opus"), DAY1, 10, 0.25);
    used(&e, &partial.id, Some("mystery"), DAY1, 7, 0.0);
    e.svc.add_usage(&partial.id, &plain(17, 2, 0.25)).unwrap();
    e.svc
        .update(&partial.id, |s| s.cost_status = Some("partial".into()))
        .unwrap();
    let marks: Vec<(String, i64)> = e
        .svc
        .stats(StatsBy::Model, None)
        .unwrap()
        .rows
        .into_iter()
        .map(|r| (r.key, r.totals.unpriced_sessions))
        .collect();
    assert_eq!(
        marks,
        vec![("opus".to_owned(), 0), ("mystery".to_owned(), 1)]
    );
    // Nothing from after the last session started: its messages are dated before.
    let later = e
        .svc
        .stats(StatsBy::Day, Some(partial.created_at + 1))
        .unwrap();
    assert!(later.rows.is_empty());
    assert_eq!(later.totals.sessions, 0);
    assert_eq!(later.totals.sessions, 0);
}

// SQLite only: it checks rows, counters or index entries with raw SQL on the file.
#[test]
fn stats_attribute_a_rolled_up_child_to_its_own_model() {
    let e = env();
    let parent = e
        .svc
        .create(NewSession {
            model: Some("model-a".into()),
            source: "cli".into(),
            ..NewSession::default()
        })
        .unwrap();
    let child = e
        .svc
        .create_task_session(&parent.id, "toolu_b", None)
        .unwrap();
    let child = e
        .svc
        .update(&child.id, |s| s.model = Some("model-b".into()))
        .unwrap();
    e.svc.add_usage(&parent.id, &delta(100, 10, 1.0)).unwrap();
    e.svc
        .add_usage(
            &child.id,
            &UsageDelta {
                actual_cost_usd: Some(0.125),
                ..delta(7, 3, 0.25)
            },
        )
        .unwrap();
    let by_model = |e: &common::Env| -> Vec<(String, i64, i64, i64, i64, f64)> {
        e.svc
            .stats(StatsBy::Model, None)
            .unwrap()
            .rows
            .into_iter()
            .map(|r| {
                let t = r.totals;
                (
                    r.key,
                    t.sessions,
                    t.tokens.input,
                    t.tokens.output,
                    t.api_calls,
                    t.cost_usd,
                )
            })
            .collect()
    };
    let before = by_model(&e);
    assert_eq!(
        before,
        vec![
            ("model-a".to_owned(), 1, 100, 10, 1, 1.0),
            ("model-b".to_owned(), 1, 7, 3, 1, 0.25),
        ]
    );

    let RollUp::RolledUp { parent: after } = e.svc.roll_up_into_parent(&child.id).unwrap() else {
        panic!("not rolled up");
    };
    // The parent's totals include the child (what the conversation cost) …
    assert_eq!((after.tokens.input, after.estimated_cost_usd), (107, 1.25));
    // … but by model, the child's tokens stay with model-b, and nothing counts twice.
    assert_eq!(by_model(&e), before);
    let stats = e.svc.stats(StatsBy::Model, None).unwrap();
    assert_eq!(stats.totals.tokens.input, 107);
    assert_eq!(stats.totals.tokens.reasoning, 8);
    assert_eq!(stats.totals.api_calls, 2);
    assert_eq!(stats.totals.cost_usd, 1.25);
    assert_eq!(stats.totals.sessions, 2);

    // Usage that reaches the child after its roll-up is not in the parent's totals, but it
    // was used, by model-b.
    e.svc.add_usage(&child.id, &delta(1, 1, 0.5)).unwrap();
    let later = by_model(&e);
    assert_eq!(later[0], ("model-a".to_owned(), 1, 100, 10, 1, 1.0));
    assert_eq!(later[1], ("model-b".to_owned(), 1, 8, 4, 2, 0.75));

    // The same attribution by source and by day, and with `since` excluding the parent.
    let by_source = e.svc.stats(StatsBy::Source, None).unwrap();
    assert_eq!(by_source.rows.len(), 1);
    assert_eq!(by_source.rows[0].totals.tokens.input, 108);
    let by_day = e.svc.stats(StatsBy::Day, None).unwrap();
    assert_eq!(by_day.totals, by_source.totals);
    let raw = Connection::open(e.path()).unwrap();
    raw.execute(
        "UPDATE sessions SET created_at = 1000, updated_at = 1000 WHERE id = ?1",
        [&parent.id],
    )
    .unwrap();
    let recent = e.svc.stats(StatsBy::Model, Some(2000)).unwrap();
    assert_eq!(recent.rows.len(), 1);
    assert_eq!(recent.rows[0].key, "model-b");
    assert_eq!(recent.totals.tokens.input, 8);

    // The mark travels through export and import: the importing database attributes the
    // same way.
    let exported = e
        .svc
        .export(&ExportSelection::All { source: None })
        .unwrap();
    let mark = exported[1].rolled_up.clone().unwrap();
    assert_eq!(mark.parent_id, parent.id);
    let added = mark.added.unwrap();
    assert_eq!((added.tokens.input, added.api_calls), (7, 1));
    assert_eq!((added.cost_usd, added.actual_cost_usd), (0.25, Some(0.125)));
    let e2 = env();
    for export in &exported {
        e2.svc.import(export).unwrap();
    }
    assert_eq!(by_model(&e2), later);
    assert_eq!(e2.svc.get(&child.id).unwrap().model, child.model);
}

fn an_export_without_roll_up_amounts_imports_with_the_childs_totals(backend: Backend) {
    let e = env_on(backend);
    let parent = e
        .svc
        .create(NewSession {
            model: Some("a".into()),
            ..NewSession::default()
        })
        .unwrap();
    let child = e
        .svc
        .create_task_session(&parent.id, "call_old", None)
        .unwrap();
    e.svc
        .update(&child.id, |s| s.model = Some("b".into()))
        .unwrap();
    e.svc.add_usage(&parent.id, &delta(10, 0, 1.0)).unwrap();
    e.svc.add_usage(&child.id, &delta(4, 0, 0.5)).unwrap();
    e.svc.roll_up_into_parent(&child.id).unwrap();
    let mut exported = e
        .svc
        .export(&ExportSelection::All { source: None })
        .unwrap();
    // As an export written before the amounts were recorded.
    let mut json = serde_json::to_value(&exported[1]).unwrap();
    json["rolled_up"].as_object_mut().unwrap().remove("added");
    exported[1] = serde_json::from_value(json).unwrap();
    assert_eq!(exported[1].rolled_up.as_ref().unwrap().added, None);

    let e2 = env_on(backend);
    for export in &exported {
        e2.svc.import(export).unwrap();
    }
    let rows: Vec<_> = e2
        .svc
        .stats(StatsBy::Model, None)
        .unwrap()
        .rows
        .into_iter()
        .map(|r| (r.key, r.totals.tokens.input, r.totals.cost_usd))
        .collect();
    assert_eq!(
        rows,
        vec![("a".to_owned(), 10, 1.0), ("b".to_owned(), 4, 0.5)]
    );
}

// SQLite only: it migrates a file from an old SQLite schema version.
#[test]
fn roll_ups_made_before_v4_are_attributed_after_the_upgrade() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("old.db");
    let (parent_id, child_id) = {
        // Version 3: marks without amounts.
        let db = Arc::new(Database::open_at_version(&path, 3).unwrap());
        let svc = SessionService::new(Arc::clone(&db));
        let parent = svc
            .create(NewSession {
                model: Some("a".into()),
                ..NewSession::default()
            })
            .unwrap();
        let child = svc
            .create_task_session(&parent.id, "call_v3", None)
            .unwrap();
        svc.update(&child.id, |s| s.model = Some("b".into()))
            .unwrap();
        svc.add_usage(&parent.id, &delta(10, 1, 1.0)).unwrap();
        svc.add_usage(&child.id, &delta(6, 2, 0.25)).unwrap();
        db.write(|tx| -> scribe_db::Result<()> {
            tx.conn().unwrap().execute(
                "INSERT INTO session_rollups (child_id, parent_id, rolled_up_at) VALUES (?1, ?2, 1)",
                (&child.id, &parent.id),
            )?;
            q::roll_up_session_usage(
                tx.conn().unwrap(),
                &q::RollUpSessionUsageParams {
                    now: 1,
                    child_id: &child.id,
                },
            )?;
            Ok(())
        })
        .unwrap();
        assert_eq!(svc.get(&parent.id).unwrap().tokens.input, 16);
        (parent.id, child.id)
    };
    let db = Arc::new(Database::open(&path).unwrap());
    let svc = SessionService::new(Arc::clone(&db));
    let rows: Vec<_> = svc
        .stats(StatsBy::Model, None)
        .unwrap()
        .rows
        .into_iter()
        .map(|r| (r.key, r.totals.tokens.input, r.totals.cost_usd))
        .collect();
    assert_eq!(
        rows,
        vec![("a".to_owned(), 10, 1.0), ("b".to_owned(), 6, 0.25)]
    );
    assert_eq!(svc.get(&parent_id).unwrap().tokens.input, 16);
    assert!(matches!(
        svc.roll_up_into_parent(&child_id).unwrap(),
        RollUp::AlreadyRolledUp { .. }
    ));
}

/// A session whose counts reach `i64::MAX` (a provider's garbage, an import taken as
/// given): stats clamp their sums there and the top sessions are still ordered, where
/// SQLite's integer sum() raised "integer overflow" and PostgreSQL's bigint addition and
/// casts "bigint out of range".
fn stats_and_top_sessions_survive_counts_near_the_limit(backend: Backend) {
    let e = env_on(backend);
    let huge = e.svc.create(NewSession::default()).unwrap();
    let small = e.svc.create(NewSession::default()).unwrap();
    e.svc.add_usage(&huge.id, &delta(i64::MAX, 0, 0.0)).unwrap();
    e.svc.add_usage(&small.id, &delta(5, 10, 0.0)).unwrap();
    for by in [StatsBy::Model, StatsBy::Source, StatsBy::Day] {
        let stats = e.svc.stats(by, None).unwrap();
        assert_eq!(stats.totals.tokens.input, i64::MAX, "{by:?}");
        assert_eq!(stats.totals.sessions, 2, "{by:?}");
    }
    let top = top_two_by_tokens(&e.svc);
    assert_eq!(top, vec![huge.id, small.id]);
}

/// Counts that each pass validation (not negative) but whose sum does not fit in an i64 (an
/// import claiming 9e18 tokens, imported twice): every stored total stops at `i64::MAX`,
/// on both backends, for an added delta and a roll-up into the parent, and the session
/// and the reports over it stay readable. (Before, SQLite turned the overflowed sum into a
/// REAL that the write's `RETURNING` could not read as an integer, so the write failed,
/// and PostgreSQL refused it with "bigint out of range".)
fn summed_counts_stop_at_the_largest_count(backend: Backend) {
    let e = env_on(backend);
    const HUGE: i64 = 9_000_000_000_000_000_000;
    let huge = UsageDelta {
        tokens: TokenUsage {
            input: HUGE,
            output: i64::MAX,
            cache_read: HUGE,
            cache_write: 1,
            reasoning: HUGE,
        },
        api_calls: HUGE,
        tool_calls: HUGE,
        cost_usd: 0.5,
        actual_cost_usd: None,
    };
    let parent = e.svc.create(NewSession::default()).unwrap();
    e.svc.add_usage(&parent.id, &huge).unwrap();
    let second = e.svc.add_usage(&parent.id, &huge).unwrap();
    let saturated = TokenUsage {
        input: i64::MAX,
        output: i64::MAX,
        cache_read: i64::MAX,
        cache_write: 2,
        reasoning: i64::MAX,
    };
    assert_eq!(second.tokens, saturated);
    assert_eq!(second.api_call_count, i64::MAX);
    assert_eq!(second.tool_call_count, i64::MAX);
    assert_eq!(second.estimated_cost_usd, 1.0);
    assert_eq!(e.svc.get(&parent.id).unwrap(), second);
    // A small count on top of the largest stays the largest.
    let third = e.svc.add_usage(&parent.id, &delta(1, 1, 0.0)).unwrap();
    assert_eq!(third.tokens.input, i64::MAX);
    assert_eq!(third.tokens.cache_write, 3);

    let child = e
        .svc
        .create_task_session(&parent.id, "call_1", None)
        .unwrap();
    e.svc.add_usage(&child.id, &huge).unwrap();
    let RollUp::RolledUp { parent: after } = e.svc.roll_up_into_parent(&child.id).unwrap() else {
        panic!("not rolled up");
    };
    assert_eq!(after.tokens.input, i64::MAX);
    assert_eq!(after.tokens.cache_write, 4);
    assert_eq!(after.api_call_count, i64::MAX);
    assert_eq!(e.svc.get(&parent.id).unwrap(), *after);

    // The reports sum them (clamped) and list them.
    for by in [StatsBy::Model, StatsBy::Source, StatsBy::Day] {
        let stats = e.svc.stats(by, None).unwrap();
        assert_eq!(stats.totals.tokens.input, i64::MAX, "{by:?}");
        assert_eq!(stats.totals.api_calls, i64::MAX, "{by:?}");
        assert_eq!(stats.totals.sessions, 2, "{by:?}");
    }
    let top = top_two_by_tokens(&e.svc);
    assert_eq!(top.len(), 2);
    assert!(
        top.contains(&parent.id) && top.contains(&child.id),
        "{top:?}"
    );
}

/// Costs that each pass validation (finite, not negative) but whose sum is not finite: the
/// stored total stops at the largest finite amount (`f64::MAX`), on both backends, for an
/// estimated and a billed cost and a roll-up into the parent. (Before, SQLite stored `inf`,
/// which its readers turned into an error or `null`, and PostgreSQL refused the write with
/// "value out of range: overflow".)
fn summed_costs_stop_at_the_largest_finite_amount(backend: Backend) {
    let e = env_on(backend);
    let big = f64::MAX * 0.75;
    let costly = UsageDelta {
        actual_cost_usd: Some(big),
        ..delta(1, 1, big)
    };
    let parent = e.svc.create(NewSession::default()).unwrap();
    let first = e.svc.add_usage(&parent.id, &costly).unwrap();
    assert_eq!(first.estimated_cost_usd, big);
    let second = e.svc.add_usage(&parent.id, &costly).unwrap();
    assert_eq!(second.estimated_cost_usd, f64::MAX);
    assert_eq!(second.actual_cost_usd, Some(f64::MAX));
    assert_eq!(second.tokens.input, 2);
    assert_eq!(e.svc.get(&parent.id).unwrap(), second);
    // A small amount on top of the largest stays the largest.
    let third = e.svc.add_usage(&parent.id, &delta(1, 1, 0.5)).unwrap();
    assert_eq!(third.estimated_cost_usd, f64::MAX);

    let child = e
        .svc
        .create_task_session(&parent.id, "call_1", None)
        .unwrap();
    e.svc.add_usage(&child.id, &costly).unwrap();
    let RollUp::RolledUp { parent: after } = e.svc.roll_up_into_parent(&child.id).unwrap() else {
        panic!("not rolled up");
    };
    assert_eq!(after.estimated_cost_usd, f64::MAX);
    assert_eq!(after.actual_cost_usd, Some(f64::MAX));
    assert_eq!(after.tokens.input, 4);
    assert_eq!(e.svc.get(&parent.id).unwrap(), *after);

    // Reports summing several such sessions stop there too (SQLite gave inf, PostgreSQL
    // failed the report), and below the limit they are the plain sum.
    let other = e.svc.create(NewSession::default()).unwrap();
    e.svc.add_usage(&other.id, &costly).unwrap();
    for by in [StatsBy::Model, StatsBy::Source, StatsBy::Day] {
        let stats = e.svc.stats(by, None).unwrap();
        assert_eq!(stats.totals.cost_usd, f64::MAX, "{by:?}");
        assert_eq!(stats.rows.len(), 1, "{by:?}");
        assert_eq!(stats.rows[0].totals.cost_usd, f64::MAX, "{by:?}");
    }
    let small = env_on(backend);
    for cost in [0.1, 0.2, 1e-9] {
        let s = small.svc.create(NewSession::default()).unwrap();
        small.svc.add_usage(&s.id, &delta(1, 1, cost)).unwrap();
    }
    let stats = small.svc.stats(StatsBy::Model, None).unwrap();
    // (SQLite sums with compensation, PostgreSQL in order: the last bit may differ.)
    assert!(
        (stats.totals.cost_usd - 0.300_000_001).abs() < 1e-15,
        "{}",
        stats.totals.cost_usd
    );
}

/// Changes within one millisecond of the store's clock (or with another process's clock
/// ahead) return, and announce, each row exactly as stored, and move `updated_at` forward.
/// (Before, a change that found `updated_at` already at the clock's reading left it as it
/// was; the database's touch trigger then stamped the row with its own clock after
/// `RETURNING` had read it, so the session or message handed back was a millisecond or
/// more off the stored one: `summed_counts_stop_at_the_largest_count` failed on it once.)
fn changes_within_one_millisecond_return_the_stored_row(backend: Backend) {
    let t = scribe_tests::TestDb::new(backend);
    // A clock that stands still, far behind the database's own.
    let hand = ManualClock::new(1_600_000_000_000);
    let options = Options {
        clock: hand.clock(),
        ..Options::default()
    };
    let db = Arc::new(Database::open_with(&t.location, options).unwrap());
    let sessions = SessionService::new(Arc::clone(&db));
    let messages = MessageService::new(Arc::clone(&db));
    let session = sessions.create(NewSession::default()).unwrap();
    let mut last = session.updated_at;
    for _ in 0..3 {
        let after = sessions.add_usage(&session.id, &delta(1, 1, 0.0)).unwrap();
        assert_eq!(sessions.get(&session.id).unwrap(), after);
        assert!(after.updated_at > last, "{} after {last}", after.updated_at);
        last = after.updated_at;
    }
    let renamed = sessions
        .update(&session.id, |s| s.title = Some("renamed".into()))
        .unwrap();
    assert_eq!(sessions.get(&session.id).unwrap(), renamed);
    assert!(
        renamed.updated_at > last,
        "{} after {last}",
        renamed.updated_at
    );

    let message = messages
        .create(NewMessage::new(
            &session.id,
            Role::Assistant,
            vec![Part::text("hello")],
        ))
        .unwrap();
    let usage = TokenUsage {
        input: 1,
        ..TokenUsage::default()
    };
    let charged = messages.add_usage(&message.id, usage, 0.1).unwrap();
    assert_eq!(messages.get(&message.id).unwrap(), charged);
    let finished = messages.finish(&message.id, FinishReason::EndTurn).unwrap();
    assert_eq!(messages.get(&message.id).unwrap(), finished);
    assert!(finished.updated_at > charged.updated_at);
}

scribe_tests::backends!(
    changes_within_one_millisecond_return_the_stored_row,
    stats_and_top_sessions_survive_counts_near_the_limit,
    summed_counts_stop_at_the_largest_count,
    summed_costs_stop_at_the_largest_finite_amount,
    add_usage_increments_and_publishes_the_new_totals,
    bad_deltas_and_unknown_sessions_change_nothing,
    ten_threads_adding_usage_give_exact_totals,
    two_services_on_two_connections_both_count,
    add_usage_tx_joins_the_callers_transaction,
    roll_up_adds_child_totals_to_parent_exactly_once,
    stats_group_by_model_source_directory_and_day_counting_rolled_up_children_once,
    stats_count_the_sessions_whose_cost_leaves_out_unpriced_usage,
    stats_split_a_session_by_the_model_and_hour_of_its_messages,
);

// Filtered session lists (sea-query filters) run on both backends through the handle.
scribe_tests::backends!(an_export_without_roll_up_amounts_imports_with_the_childs_totals,);
