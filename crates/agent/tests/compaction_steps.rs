//! Each compaction step on a scripted session with known token sizes: what the
//! provider is sent, what is stored, what stays searchable, and what the next
//! request sends.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod compaction_support;

use std::sync::Arc;

use compaction_support::{CHEAP, Env, SMALL, drain, png, progress, read, text_of};
use scribe_agent::compaction::{CLEARED_TOOL_OUTPUT, FitStep, SUMMARY_PROMPT};
use scribe_agent::{
    AgentError, AgentEvent, CompactionConfig, CompactionOutcome, CompactionStep, ContextMeasure,
    ScriptedProvider, ScriptedTurn, TriggerReason,
};
use scribe_message::{Part, Role, SearchOptions, TokenUsage, ToolState};

fn summary_turn(text: &str) -> ScriptedTurn {
    ScriptedTurn::reply()
        .text(text)
        .usage(TokenUsage {
            input: 8_000,
            output: 500,
            ..TokenUsage::default()
        })
        .into()
}

/// The summary step alone, first (the cheap step comes first by default and has its
/// own tests; here it would clear the outputs and make the summary unnecessary).
fn summary_first() -> CompactionConfig {
    CompactionConfig {
        prune_first: false,
        keep_recent_tokens: 0,
        ..CompactionConfig::default()
    }
}

fn hits(env: &Env, word: &str, session: &str) -> Vec<String> {
    let options = SearchOptions {
        session_id: Some(session.to_owned()),
        ..SearchOptions::default()
    };
    env.messages
        .search(word, &options)
        .unwrap()
        .into_iter()
        .map(|h| h.message_id)
        .collect()
}

fn tool_output(part: &Part) -> (&str, Option<i64>) {
    match part {
        Part::Tool(t) => match &t.state {
            ToolState::Completed { output, .. } => (output.as_str(), t.compacted_at),
            other => panic!("not completed: {other:?}"),
        },
        other => panic!("not a tool part: {other:?}"),
    }
}

/// user, assistant [text, 4k alpha], user, assistant [4k beta, text]: about 8,060 tokens.
fn long_session(env: &Env, title: &str) -> (String, Vec<String>) {
    let s = env.session(title);
    let ids = vec![
        env.user(&s.id, "refactor the parser").id,
        env.assistant(
            &s.id,
            vec![Part::text("reading"), read("c1", 4_000, "alpha")],
        )
        .id,
        env.user(&s.id, "now the lexer").id,
        env.assistant(&s.id, vec![read("c2", 4_000, "beta"), Part::text("done")])
            .id,
    ];
    (s.id, ids)
}

#[test]
fn step_one_summarizes_in_place() {
    let env = Env::new();
    let (sid, ids) = long_session(&env, "summarize");
    let provider = Arc::new(ScriptedProvider::new([summary_turn(
        "## Goal\nRefactor the parser and lexer.",
    )]));
    let c = env
        .compactor(&provider, summary_first())
        .with_summary_model(CHEAP);
    let events = c.subscribe();
    let trigger = c.check(&sid, SMALL).unwrap();
    assert!(
        matches!(trigger, Some(TriggerReason::ExceedsUsable { .. })),
        "{trigger:?}"
    );

    let outcome = c.compact(&sid, SMALL).unwrap();
    let CompactionOutcome::InPlace {
        session_id,
        summary_message_id,
        report,
    } = &outcome
    else {
        panic!("{outcome:?}");
    };
    assert_eq!(session_id, &sid);
    assert!(report.tokens_before > 8_000);
    assert!(report.tokens_after < 100, "{report:?}");
    assert!(report.pruned_part_ids.is_empty());
    assert_eq!(report.steps, vec![CompactionStep::Summarize]);

    // What was sent: the whole history, then the summary prompt, no tools, to the cheap model.
    let requests = provider.requests();
    assert_eq!(requests.len(), 1);
    let r = &requests[0];
    assert_eq!(r.model, CHEAP);
    assert!(r.tools.is_empty());
    assert_eq!(r.messages.len(), 5);
    assert_eq!(r.messages[4].role, Role::User);
    assert!(matches!(&r.messages[4].parts[0], Part::Text(t) if t.text == SUMMARY_PROMPT));
    assert!(tool_output(&r.messages[1].parts[1]).0.starts_with("alpha"));

    // What was stored: an assistant summary, the session's summary_message_id, the call's cost.
    let summary = env.messages.get(summary_message_id).unwrap();
    assert!(summary.is_summary);
    assert_eq!(summary.role, Role::Assistant);
    assert_eq!(summary.text(), "## Goal\nRefactor the parser and lexer.");
    assert_eq!(summary.model.as_deref(), Some(CHEAP));
    assert_eq!(summary.parent_id.as_deref(), Some(ids[3].as_str()));
    let cost = (8_000.0 * 1.0 + 500.0 * 5.0) / 1e6;
    assert!((summary.cost_usd - cost).abs() < 1e-9);
    let session = env.get(&sid);
    assert_eq!(
        session.summary_message_id.as_deref(),
        Some(summary_message_id.as_str())
    );
    assert_eq!(session.api_call_count, 1);
    assert!((session.estimated_cost_usd - cost).abs() < 1e-9);
    assert_eq!(session.compacting_at, None);
    assert_eq!(session.message_count, 5);

    // The next request starts at the summary, sent as a user message; its size restarts
    // from the summary's (the summary call's own usage is not the context's size).
    let ctx = c.context(&sid).unwrap();
    assert_eq!(
        ctx.summary_message_id.as_deref(),
        Some(summary_message_id.as_str())
    );
    assert_eq!(ctx.loaded_messages, 1);
    assert_eq!(ctx.messages.len(), 1);
    assert_eq!(ctx.messages[0].role, Role::User);
    assert_eq!(ctx.measure, ContextMeasure::Estimated);
    assert_eq!(ctx.tokens, report.tokens_after);
    assert_eq!(c.check(&sid, SMALL).unwrap(), None);

    // The summarised history stays stored and searchable.
    assert_eq!(env.messages.list(&sid).unwrap().len(), 5);
    assert_eq!(hits(&env, "alpha", &sid), vec![ids[1].clone()]);

    // Messages after the summary follow it.
    env.user(&sid, "and the tests");
    let ctx = c.context(&sid).unwrap();
    assert_eq!(ctx.messages.len(), 2);
    assert_eq!(ctx.loaded_messages, 2);

    let seen = drain(&events);
    assert_eq!(
        progress(&seen),
        ["starting", "analyzing", "summarizing", "done"]
    );
    assert!(
        seen.iter()
            .any(|e| matches!(e, AgentEvent::UsageTracked { .. }))
    );
    assert!(
        matches!(seen.last(), Some(AgentEvent::CompactionDone { tokens_before, tokens_after, continuation_session_id: None, .. })
        if *tokens_before == report.tokens_before && *tokens_after == report.tokens_after)
    );
}

#[test]
fn a_history_too_large_for_the_summarizer_is_sent_with_tool_outputs_cleared() {
    let env = Env::new();
    let (sid, ids) = long_session(&env, "too large");
    let provider = Arc::new(ScriptedProvider::new([summary_turn("short")]));
    // Summarising with the small model itself: 8,060 + the prompt exceed its 8,000.
    let c = env.compactor(&provider, summary_first());
    c.compact(&sid, SMALL).unwrap();
    let r = &provider.requests()[0];
    assert_eq!(r.model, SMALL);
    assert_eq!(tool_output(&r.messages[1].parts[1]).0, CLEARED_TOOL_OUTPUT);
    assert_eq!(tool_output(&r.messages[3].parts[0]).0, CLEARED_TOOL_OUTPUT);
    assert!(matches!(&r.messages[0].parts[0], Part::Text(t) if t.text == "refactor the parser"));
    // Only the copy sent was cleared.
    let stored = env.messages.get(&ids[1]).unwrap();
    let (output, compacted) = tool_output(&stored.parts[1].part);
    assert!(output.starts_with("alpha") && compacted.is_none());
}

fn prune_config() -> CompactionConfig {
    CompactionConfig {
        prune_protect_tokens: 1_000,
        ..CompactionConfig::default()
    }
}

/// The cheapest step first: with summaries on, clearing old tool outputs makes the
/// request fit, so no model is called; the marks are stored, so the next request starts
/// from them.
#[test]
fn pruning_first_makes_the_request_fit_without_a_model_call() {
    let env = Env::new();
    let s = env.session("prune");
    env.user(&s.id, "start");
    let a1 = env.assistant(&s.id, vec![read("c1", 2_500, "alpha")]);
    env.user(&s.id, "more");
    let a2 = env.assistant(&s.id, vec![read("c2", 2_500, "beta")]);
    env.user(&s.id, "again");
    let a3 = env.assistant(&s.id, vec![read("c3", 2_000, "gamma")]);
    env.user(&s.id, "last");
    let a4 = env.assistant(&s.id, vec![read("c4", 1_500, "delta"), Part::text("ok")]);
    // Any model call would fail: the script is empty.
    let provider = Arc::new(ScriptedProvider::new(Vec::<ScriptedTurn>::new()));
    let c = env.compactor(&provider, prune_config());
    let events = c.subscribe();
    let before = c.context(&s.id).unwrap().tokens;
    assert!(before > 8_000 && before < 8_600, "{before}");
    assert!(c.check(&s.id, SMALL).unwrap().is_some());

    let outcome = c.compact(&s.id, SMALL).unwrap();
    let CompactionOutcome::Pruned { report, .. } = &outcome else {
        panic!("{outcome:?}")
    };
    // The two protected turns hold 3,500 tokens of outputs, more than the 1,000 spared,
    // so only the newest result (c4) is: every older output goes, oldest first.
    assert_eq!(
        report.pruned_part_ids,
        vec![
            a1.parts[0].id.clone(),
            a2.parts[0].id.clone(),
            a3.parts[0].id.clone()
        ]
    );
    assert_eq!(report.steps, vec![CompactionStep::Prune]);
    assert!(report.tokens_after <= 8_000 && report.tokens_after < before - 6_900);
    assert!(provider.requests().is_empty(), "pruning asks no model");
    assert_eq!(env.get(&s.id).summary_message_id, None);
    assert_eq!(env.get(&s.id).api_call_count, 0);

    let stored = env.messages.get(&a1.id).unwrap();
    let (output, compacted) = tool_output(&stored.parts[0].part);
    assert!(
        output.starts_with("alpha") && output.len() == 10_000,
        "the output stays stored"
    );
    assert!(compacted.is_some());
    assert!(
        tool_output(&env.messages.get(&a4.id).unwrap().parts[0].part)
            .1
            .is_none()
    );
    assert_eq!(hits(&env, "alpha", &s.id), vec![a1.id.clone()]);

    // The next request starts from the stored marks.
    let ctx = c.context(&s.id).unwrap();
    assert_eq!(ctx.tokens, report.tokens_after);
    assert_eq!(ctx.measure, ContextMeasure::Estimated);
    assert_eq!(
        tool_output(&ctx.messages[1].parts[0]).0,
        CLEARED_TOOL_OUTPUT
    );
    assert_eq!(
        tool_output(&ctx.messages[3].parts[0]).0,
        CLEARED_TOOL_OUTPUT
    );
    assert_eq!(
        tool_output(&ctx.messages[5].parts[0]).0,
        CLEARED_TOOL_OUTPUT
    );
    assert!(
        tool_output(&ctx.messages[7].parts[0])
            .0
            .starts_with("delta")
    );
    assert_eq!(c.check(&s.id, SMALL).unwrap(), None);
    let seen = drain(&events);
    assert_eq!(progress(&seen), ["starting", "analyzing", "done"]);
    assert!(matches!(
        seen.last(),
        Some(AgentEvent::CompactionDone { summary_message_id: None, pruned_tool_parts: 3, steps, .. })
            if steps == &[CompactionStep::Prune]
    ));
}

#[test]
fn step_three_sends_only_from_the_last_user_message() {
    let env = Env::new();
    let s = env.session("progressive");
    env.user(&s.id, &text_of(5_000, "ancient"));
    env.assistant(&s.id, vec![Part::text("ok")]);
    env.user(&s.id, "next");
    env.assistant(&s.id, vec![read("c1", 1_000, "beta")]);
    let last = env.user(&s.id, &text_of(2_500, "latest"));
    env.assistant(&s.id, vec![Part::text("working")]);
    let provider = Arc::new(ScriptedProvider::new(Vec::<ScriptedTurn>::new()));
    let c = env
        .compactor(&provider, prune_config())
        .with_summarize(false);

    let outcome = c.compact(&s.id, SMALL).unwrap();
    let report = outcome.report().unwrap();
    assert!(
        report.pruned_part_ids.is_empty(),
        "text is never pruned; recent turns are spared"
    );
    assert_eq!(report.steps, vec![CompactionStep::Progressive]);
    assert!(report.tokens_after < 2_600);

    let request = c.request_context(&s.id, SMALL).unwrap();
    assert_eq!(request.steps, vec![FitStep::Progressive]);
    assert_eq!(request.messages.len(), 2);
    assert!(matches!(&request.messages[0].parts[0], Part::Text(t) if t.text.starts_with("latest")));
    assert_eq!(request.tokens, report.tokens_after);
    // Nothing stored changed.
    assert_eq!(env.messages.list(&s.id).unwrap().len(), 6);
    assert_eq!(
        env.messages.get(&last.id).unwrap().text(),
        text_of(2_500, "latest")
    );
}

#[test]
fn step_four_strips_media_from_what_is_sent() {
    let env = Env::new();
    let s = env.session("media");
    env.user(&s.id, "look at these");
    env.assistant(&s.id, vec![Part::text("sure")]);
    let shots: Vec<Part> = std::iter::once(Part::text("compare"))
        .chain((1..=5).map(|i| png(&format!("shot{i}.png"))))
        .collect();
    env.user_parts(&s.id, shots);
    let provider = Arc::new(ScriptedProvider::new(Vec::<ScriptedTurn>::new()));
    let c = env
        .compactor(&provider, prune_config())
        .with_summarize(false);

    let outcome = c.compact(&s.id, SMALL).unwrap();
    assert_eq!(
        outcome.steps(),
        [CompactionStep::Progressive, CompactionStep::StripMedia]
    );
    let request = c.request_context(&s.id, SMALL).unwrap();
    assert_eq!(request.messages.len(), 1);
    let texts: Vec<&str> = request.messages[0]
        .parts
        .iter()
        .filter_map(|p| match p {
            Part::Text(t) => Some(t.text.as_str()),
            _ => None,
        })
        .collect();
    assert_eq!(texts[0], "compare");
    assert_eq!(texts[1], "[Attached image/png: shot1.png]");
    assert_eq!(texts.len(), 6);
    // The files themselves stay stored.
    let stored = env.messages.list(&s.id).unwrap();
    assert_eq!(
        stored[2]
            .parts
            .iter()
            .filter(|p| matches!(p.part, Part::File(_)))
            .count(),
        5
    );
}

#[test]
fn step_five_fails_with_why_and_clears_the_mark() {
    let env = Env::new();
    let s = env.session("hopeless");
    env.user(&s.id, "hi");
    env.assistant(&s.id, vec![Part::text("hello")]);
    env.user(&s.id, &text_of(9_000, "enormous"));
    let provider = Arc::new(ScriptedProvider::new(Vec::<ScriptedTurn>::new()));
    let c = env
        .compactor(&provider, prune_config())
        .with_summarize(false);
    let events = c.subscribe();

    let err = c.compact(&s.id, SMALL).unwrap_err();
    let AgentError::DoesNotFit { session_id, source } = &err else {
        panic!("{err}")
    };
    assert_eq!(session_id, &s.id);
    assert_eq!(source.max_tokens, 8_000);
    assert!(source.tokens > 9_000);
    assert_eq!(env.get(&s.id).compacting_at, None);
    let seen = drain(&events);
    assert_eq!(progress(&seen), ["starting", "analyzing", "failed"]);
    let AgentEvent::CompactionFailed { error, .. } = seen.last().unwrap() else {
        unreachable!()
    };
    assert!(error.contains("cannot fit the context window"), "{error}");
    assert!(matches!(
        c.request_context(&s.id, SMALL).unwrap_err(),
        AgentError::DoesNotFit { .. }
    ));
}
