//! Each compaction strategy driven through the scripted provider: what the summary
//! covers, what is kept verbatim beside it, what is cleared and stored, what the next
//! request sends and how much of the history is read to build it; the cheap step's
//! place in the order; and a conversation whose words alone overflow the window.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod compaction_support;

use std::sync::Arc;

use compaction_support::{CHEAP, Env, SMALL, drain, png, progress, read, text_of};
use scribe_agent::compaction::{CLEARED_TOOL_OUTPUT, SUMMARY_PROMPT};
use scribe_agent::{
    AgentError, AgentEvent, ChatMessage, CompactionConfig, CompactionOutcome, CompactionStep,
    CompactionStrategy, ContextMeasure, ScriptedProvider, ScriptedTurn,
};
use scribe_db::queries as q;
use scribe_message::{
    ConversationOptions, Extra, FinishReason, Message, Part, ReasoningPart, Role, StepFinishPart,
    TokenUsage, ToolState, summary_compaction,
};

fn summary(text: &str) -> ScriptedTurn {
    ScriptedTurn::reply()
        .text(text)
        .usage(TokenUsage {
            input: 6_000,
            output: 300,
            ..TokenUsage::default()
        })
        .into()
}

fn config(strategy: CompactionStrategy) -> CompactionConfig {
    CompactionConfig {
        strategy,
        ..CompactionConfig::default()
    }
}

/// The first text of a sent message (or the output of its first tool call).
fn first(message: &ChatMessage) -> &str {
    match &message.parts[0] {
        Part::Text(t) => &t.text,
        Part::Reasoning(r) => &r.text,
        Part::Tool(t) => t.state.output().unwrap_or_default(),
        other => panic!("{other:?}"),
    }
}

fn tool_output(message: &ChatMessage) -> &str {
    message
        .parts
        .iter()
        .find_map(|p| match p {
            Part::Tool(t) => t.state.output(),
            _ => None,
        })
        .unwrap()
}

/// Four turns, about 8,200 tokens: two old ones with long answers (words: the cheap
/// step cannot clear them, so a summary is needed), two recent small ones with tool
/// outputs (about 1,600 tokens together, within the 2,000 a restarting summary keeps on
/// the small model, and within the outputs pruning spares).
fn four_turns(env: &Env, title: &str) -> (String, Vec<Message>) {
    let s = env.session(title);
    let m = vec![
        env.user(&s.id, "turn one: read the parser"),
        env.assistant(
            &s.id,
            vec![Part::text("one done"), Part::text(text_of(3_500, "alpha"))],
        ),
        env.user(&s.id, "turn two: read the lexer"),
        env.assistant(
            &s.id,
            vec![Part::text("two done"), Part::text(text_of(3_000, "beta"))],
        ),
        env.user(&s.id, "turn three: the tests"),
        env.assistant(
            &s.id,
            vec![Part::text("three done"), read("c3", 700, "gamma")],
        ),
        env.user(&s.id, "turn four: fix them"),
        env.assistant(
            &s.id,
            vec![Part::text("four done"), read("c4", 800, "delta")],
        ),
    ];
    (s.id, m)
}

/// Replaces a stored part's JSON with something that is not a part: any read of that
/// row fails from then on.
fn corrupt(env: &Env, part_id: &str) {
    env.db
        .write(|tx| -> scribe_db::Result<()> {
            let now = tx.now();
            tx.q().update_part(&q::UpdatePartParams {
                r#type: "text",
                data: "[\"not a part\"]",
                now,
                id: part_id,
            })?;
            Ok(())
        })
        .unwrap();
}

#[test]
fn in_place_keeps_the_recent_turns_verbatim_and_summarises_exactly_the_rest() {
    let env = Env::new();
    let (sid, m) = four_turns(&env, "in place");
    let provider = Arc::new(ScriptedProvider::new([summary("## Goal\nFix the parser.")]));
    let c = env
        .compactor(&provider, config(CompactionStrategy::InPlace))
        .with_summary_model(CHEAP);
    assert!(c.check(&sid, SMALL).unwrap().is_some());

    let outcome = c.compact(&sid, SMALL).unwrap();
    let CompactionOutcome::InPlace {
        summary_message_id,
        report,
        ..
    } = &outcome
    else {
        panic!("{outcome:?}")
    };
    assert_eq!(report.steps, vec![CompactionStep::Summarize]);
    assert_eq!(report.kept_messages, 4, "turns three and four");
    assert!(report.pruned_part_ids.is_empty());

    // The summary was asked for exactly what it replaces: turns one and two.
    let r = &provider.requests()[0];
    let asked: Vec<&str> = r.messages.iter().map(first).collect();
    assert_eq!(
        asked,
        [
            "turn one: read the parser",
            "one done",
            "turn two: read the lexer",
            "two done",
            SUMMARY_PROMPT
        ]
    );

    // It records where the kept messages begin.
    let stored = env.messages.get(summary_message_id).unwrap();
    let part = summary_compaction(&stored).unwrap();
    assert_eq!(part.keep_from.as_deref(), Some(m[4].id.as_str()));
    assert!(!part.keeps_words && part.auto);

    // What is sent next: the summary, then turns three and four as they were.
    env.user(&sid, "turn five: and the docs");
    let ctx = c.context(&sid).unwrap();
    let sent: Vec<&str> = ctx.messages.iter().map(first).collect();
    assert_eq!(
        sent,
        [
            "## Goal\nFix the parser.",
            "turn three: the tests",
            "three done",
            "turn four: fix them",
            "four done",
            "turn five: and the docs"
        ]
    );
    assert_eq!(ctx.messages[0].role, Role::User);
    assert_eq!(ctx.summary_index, Some(0));
    assert!(tool_output(&ctx.messages[2]).starts_with("gamma"));
    assert_eq!(tool_output(&ctx.messages[2]).len(), 2_800, "verbatim");
    assert!(ctx.tokens < 2_500, "{}", ctx.tokens);
    // The session's conversation view agrees with what the agent sends (tool results
    // as messages of their own).
    let view = env
        .sessions
        .conversation(
            &sid,
            ConversationOptions {
                from_summary: true,
                ..ConversationOptions::default()
            },
        )
        .unwrap();
    assert_eq!(view.len(), 6 + 2);
    // Only what is sent was read: the kept messages, the summary and what follows.
    assert_eq!(ctx.loaded_messages, 6);
    corrupt(&env, &m[1].parts[0].id);
    assert!(env.messages.list(&sid).is_err());
    assert_eq!(c.context(&sid).unwrap().messages.len(), 6);
}

#[test]
fn a_continuation_sends_the_summary_then_the_turns_it_kept_in_the_ended_session() {
    let env = Env::new();
    let (sid, m) = four_turns(&env, "continued");
    let provider = Arc::new(ScriptedProvider::new([summary("## Goal\nFix the parser.")]));
    let c = env
        .compactor(&provider, config(CompactionStrategy::Continuation))
        .with_summary_model(CHEAP);

    let outcome = c.compact(&sid, SMALL).unwrap();
    let CompactionOutcome::Continued {
        new_session_id,
        summary_message_id,
        report,
        ..
    } = &outcome
    else {
        panic!("{outcome:?}")
    };
    assert_eq!(report.kept_messages, 4);
    assert_eq!(
        provider.requests()[0].messages.len(),
        5,
        "turns one, two, prompt"
    );

    // Nothing is copied: the child holds the summary, the kept turns stay where they are.
    let child = env.messages.list(new_session_id).unwrap();
    assert_eq!(child.len(), 1);
    assert_eq!(env.messages.list(&sid).unwrap().len(), 8);
    let part = summary_compaction(&child[0]).unwrap();
    assert_eq!(part.keep_from.as_deref(), Some(m[4].id.as_str()));

    env.user(new_session_id, "turn five: and the docs");
    let ctx = c.context(new_session_id).unwrap();
    let sent: Vec<&str> = ctx.messages.iter().map(first).collect();
    assert_eq!(
        sent,
        [
            "## Goal\nFix the parser.",
            "turn three: the tests",
            "three done",
            "turn four: fix them",
            "four done",
            "turn five: and the docs"
        ]
    );
    assert_eq!(
        ctx.summary_message_id.as_deref(),
        Some(summary_message_id.as_str())
    );
    assert_eq!(ctx.loaded_messages, 6);

    // What the ended session gets later (reopened) is not part of the continuation.
    env.sessions.reopen(&sid).unwrap();
    env.user(&sid, "a late word in the old session");
    assert_eq!(c.context(new_session_id).unwrap().messages.len(), 6);

    // The lineage view from the summary agrees.
    let view = env
        .sessions
        .conversation(
            new_session_id,
            ConversationOptions {
                include_ancestors: true,
                from_summary: true,
            },
        )
        .unwrap();
    assert_eq!(
        view.len(),
        1 + 2 + 2 + 2 + 1,
        "summary, 2 turns with results, prompt"
    );
}

#[test]
fn keep_words_adds_the_summary_and_sends_every_word_with_old_outputs_cleared() {
    let env = Env::new();
    let s = env.session("words");
    let u1 = env.user(&s.id, "first question");
    let a1 = env.assistant(
        &s.id,
        vec![
            Part::Reasoning(ReasoningPart {
                text: "thinking about one".into(),
                ..ReasoningPart::default()
            }),
            Part::text("answer one"),
            read("c1", 1_000, "alpha"),
        ],
    );
    env.user(&s.id, "second question");
    let a2 = env.assistant(
        &s.id,
        vec![Part::text("answer two"), read("c2", 1_000, "beta")],
    );
    env.user(&s.id, "third question");
    // A result larger than a request: the cheap step spares it (the newest), so it is
    // not enough.
    let a3 = env.assistant(
        &s.id,
        vec![Part::text("answer three"), read("c3", 8_100, "gamma")],
    );
    let provider = Arc::new(ScriptedProvider::new([summary("S1"), summary("S2")]));
    let c = env
        .compactor(&provider, config(CompactionStrategy::KeepWords))
        .with_summary_model(CHEAP);
    let events = c.subscribe();

    let outcome = c.compact(&s.id, SMALL).unwrap();
    let CompactionOutcome::InPlace {
        summary_message_id,
        report,
        ..
    } = &outcome
    else {
        panic!("{outcome:?}")
    };
    assert_eq!(
        report.steps,
        vec![CompactionStep::Prune, CompactionStep::Summarize]
    );
    assert_eq!(report.kept_messages, 0);
    // The prune cleared the older outputs; the summary every one left before it, in its
    // own transaction.
    let outputs = [&a1.parts[2], &a2.parts[1], &a3.parts[1]].map(|p| p.id.clone());
    assert_eq!(report.pruned_part_ids, outputs);
    // It was asked for the whole conversation (the pruned outputs as the marker).
    assert_eq!(provider.requests()[0].messages.len(), 7);
    assert!(tool_output(&provider.requests()[0].messages[5]).starts_with("gamma"));

    let stored = env.messages.get(summary_message_id).unwrap();
    let part = summary_compaction(&stored).unwrap();
    assert!(part.keeps_words);
    assert_eq!(part.keep_from.as_deref(), Some(u1.id.as_str()));
    for id in [&a1.id, &a2.id, &a3.id] {
        let m = env.messages.get(id).unwrap();
        let Part::Tool(tool) = &m.parts.last().unwrap().part else {
            panic!()
        };
        assert!(tool.compacted_at.is_some());
        assert!(tool.state.output().unwrap().len() >= 4_000, "still stored");
    }

    // Every word is still sent, the outputs as the marker, the summary where it stands.
    let ctx = c.context(&s.id).unwrap();
    let sent: Vec<&str> = ctx.messages.iter().map(first).collect();
    assert_eq!(
        sent,
        [
            "first question",
            "thinking about one",
            "second question",
            "answer two",
            "third question",
            "answer three",
            "S1"
        ]
    );
    assert_eq!(ctx.messages[1].parts.len(), 3, "reasoning, text, tool call");
    assert!(matches!(&ctx.messages[1].parts[1], Part::Text(t) if t.text == "answer one"));
    for i in [1, 3, 5] {
        assert_eq!(tool_output(&ctx.messages[i]), CLEARED_TOOL_OUTPUT);
    }
    assert_eq!(ctx.summary_index, Some(6));
    assert_eq!(ctx.messages[6].role, Role::User);
    assert!(ctx.tokens < 500, "{}", ctx.tokens);
    assert_eq!(c.check(&s.id, SMALL).unwrap(), None);

    // Later: a second summary takes the first one's place; its words stay too.
    env.user(&s.id, "fourth question");
    env.assistant(
        &s.id,
        vec![Part::text("answer four"), read("c4", 8_100, "delta")],
    );
    assert!(c.check(&s.id, SMALL).unwrap().is_some());
    c.compact(&s.id, SMALL).unwrap();
    let requests = provider.requests();
    let asked: Vec<&str> = requests[1].messages.iter().map(first).collect();
    assert_eq!(
        asked[6], "S1",
        "the first summary is part of what the second covers"
    );
    let ctx = c.context(&s.id).unwrap();
    let sent: Vec<&str> = ctx.messages.iter().map(first).collect();
    assert_eq!(
        sent,
        [
            "first question",
            "thinking about one",
            "second question",
            "answer two",
            "third question",
            "answer three",
            "fourth question",
            "answer four",
            "S2"
        ],
        "S1 is superseded"
    );
    assert_eq!(tool_output(&ctx.messages[7]), CLEARED_TOOL_OUTPUT);
    assert_eq!(
        progress(&drain(&events)),
        ["starting", "analyzing", "summarizing", "done"].repeat(2)
    );
}

/// The seed's last word: when even the words do not fit, the summary is kept with the
/// last user turn (progressive), attachments are described (strip media), and then the
/// run stops with the clear error. Nothing stored is lost.
#[test]
fn words_alone_overflowing_the_window_end_in_the_clear_error_with_nothing_lost() {
    let env = Env::new();
    let s = env.session("too many words");
    env.user(&s.id, "hi");
    env.assistant(&s.id, vec![Part::text("hello")]);
    let huge = text_of(9_000, "enormous");
    let last = env.user_parts(&s.id, vec![Part::text(huge.clone()), png("screen.png")]);
    let before = env.messages.list(&s.id).unwrap();
    let provider = Arc::new(ScriptedProvider::new([summary("S")]));
    let c = env
        .compactor(&provider, config(CompactionStrategy::KeepWords))
        .with_summary_model(CHEAP);
    let events = c.subscribe();

    let err = c.compact(&s.id, SMALL).unwrap_err();
    let AgentError::DoesNotFit { session_id, source } = &err else {
        panic!("{err}")
    };
    assert_eq!(session_id, &s.id);
    assert_eq!(source.max_tokens, 8_000);
    assert!(source.tokens > 9_000, "{source:?}");
    let why = scribe_agent::error_chain(&err);
    assert!(why.contains("cannot fit the context window"), "{why}");
    let seen = drain(&events);
    assert_eq!(
        progress(&seen),
        ["starting", "analyzing", "summarizing", "failed"]
    );
    let Some(AgentEvent::CompactionFailed { steps, .. }) = seen.last() else {
        panic!()
    };
    assert_eq!(
        steps,
        &[
            CompactionStep::Summarize,
            CompactionStep::Progressive,
            CompactionStep::StripMedia
        ]
    );

    // Nothing lost: every message as it was, the summary added (it is correct), the
    // session free for the next run, and every request refused the same way.
    let after = env.messages.list(&s.id).unwrap();
    assert_eq!(after.len(), before.len() + 1);
    assert_eq!(after[..before.len()], before[..]);
    assert_eq!(env.messages.get(&last.id).unwrap().text(), huge);
    assert!(after[3].is_summary);
    assert_eq!(env.get(&s.id).compacting_at, None);
    assert!(matches!(
        c.request_context(&s.id, SMALL).unwrap_err(),
        AgentError::DoesNotFit { .. }
    ));
}

/// Prune, summarise, progressive — the order in every strategy — and the summary-first
/// order when asked for.
#[test]
fn the_cheap_step_comes_first_unless_summary_first_is_asked_for() {
    for prune_first in [true, false] {
        let env = Env::new();
        let s = env.session("order");
        for n in 0..4 {
            env.user(&s.id, &format!("turn {n}"));
            env.assistant(&s.id, vec![read(&format!("c{n}"), 2_100, "out")]);
        }
        let provider = Arc::new(ScriptedProvider::new([summary("S")]));
        let c = env
            .compactor(
                &provider,
                CompactionConfig {
                    prune_protect_tokens: 1_000,
                    prune_first,
                    keep_recent_tokens: 0,
                    ..CompactionConfig::default()
                },
            )
            .with_summary_model(CHEAP);
        let outcome = c.compact(&s.id, SMALL).unwrap();
        if prune_first {
            assert_eq!(outcome.steps(), [CompactionStep::Prune]);
            assert!(provider.requests().is_empty());
            // All but the newest result (the protected turns hold more than 1,000).
            assert_eq!(outcome.report().unwrap().pruned_part_ids.len(), 3);
        } else {
            // Summary first: it covers everything, so nothing is left to prune.
            assert_eq!(outcome.steps(), [CompactionStep::Summarize]);
            assert_eq!(provider.requests().len(), 1);
            assert!(outcome.report().unwrap().pruned_part_ids.is_empty());
        }
    }
}

/// After the provider refused a request as too long, our estimate is not trusted to say
/// that pruning was enough: a summary follows the prune.
#[test]
fn after_an_overflow_the_prune_is_followed_by_a_summary() {
    let env = Env::new();
    let s = env.session("overflow");
    for n in 0..4 {
        env.user(&s.id, &format!("turn {n}"));
        env.assistant(&s.id, vec![read(&format!("c{n}"), 500, "out")]);
    }
    let provider = Arc::new(ScriptedProvider::new([summary("S")]));
    let c = env
        .compactor(
            &provider,
            CompactionConfig {
                prune_protect_tokens: 100,
                ..CompactionConfig::default()
            },
        )
        .with_summary_model(CHEAP);
    let outcome = c.compact_after_overflow(&s.id, SMALL).unwrap();
    assert_eq!(
        outcome.steps(),
        [CompactionStep::Prune, CompactionStep::Summarize]
    );
    assert!(outcome.summary_message_id().is_some());
}

/// A provider's count measured the request before a prune cleared part of it, so it
/// no longer describes what is sent: the size falls back to the estimate until the next
/// call reports (otherwise every prune would be followed by a needless summary).
#[test]
fn a_call_reported_before_a_prune_no_longer_measures_the_context() {
    let env = Env::new();
    let s = env.session("stale report");
    for n in 0..3 {
        env.user(&s.id, &format!("turn {n}"));
        env.assistant(&s.id, vec![read(&format!("c{n}"), 2_000, "out")]);
    }
    env.user(&s.id, "last");
    let step = StepFinishPart {
        reason: FinishReason::ToolUse,
        tokens: TokenUsage {
            input: 8_500,
            output: 100,
            ..TokenUsage::default()
        },
        cost: 0.0,
        extra: Extra::new(),
    };
    let reporting = env.assistant(&s.id, vec![Part::text("working"), Part::StepFinish(step)]);
    let provider = Arc::new(ScriptedProvider::new(Vec::<ScriptedTurn>::new()));
    let c = env.compactor(
        &provider,
        CompactionConfig {
            prune_protect_tokens: 0,
            protect_user_turns: 1,
            ..CompactionConfig::default()
        },
    );
    let ctx = c.context(&s.id).unwrap();
    assert!(
        matches!(&ctx.measure, ContextMeasure::Reported { message_id, .. } if *message_id == reporting.id)
    );
    assert!(ctx.tokens >= 8_600);

    let outcome = c.compact(&s.id, SMALL).unwrap();
    assert_eq!(outcome.steps(), [CompactionStep::Prune]);
    let ctx = c.context(&s.id).unwrap();
    assert_eq!(ctx.measure, ContextMeasure::Estimated);
    assert!(ctx.tokens < 1_000, "{}", ctx.tokens);
    assert_eq!(c.check(&s.id, SMALL).unwrap(), None);
}

/// What a keep-words context reads of a cleared tool call is what is sent: the query
/// leaves its output out (the stored row keeps it).
#[test]
fn cleared_outputs_are_not_even_loaded_for_a_request() {
    let env = Env::new();
    let s = env.session("lean");
    env.user(&s.id, "go");
    let a = env.assistant(&s.id, vec![read("c1", 9_000, "alpha")]);
    let provider = Arc::new(ScriptedProvider::new([summary("S")]));
    let c = env
        .compactor(&provider, config(CompactionStrategy::KeepWords))
        .with_summary_model(CHEAP);
    c.compact(&s.id, SMALL).unwrap();
    let loaded = env
        .db
        .read(|tx| {
            scribe_message::store::load_sent_messages_from(
                tx,
                &s.id,
                scribe_message::store::SentFrom::Start,
            )
        })
        .unwrap();
    let Part::Tool(tool) = &loaded[1].parts[0].part else {
        panic!()
    };
    assert!(tool.compacted_at.is_some());
    assert!(matches!(&tool.state, ToolState::Completed { output, .. } if output.is_empty()));
    let stored = env.messages.get(&a.id).unwrap();
    let Part::Tool(tool) = &stored.parts[0].part else {
        panic!()
    };
    assert_eq!(tool.state.output().unwrap().len(), 36_000);
}
