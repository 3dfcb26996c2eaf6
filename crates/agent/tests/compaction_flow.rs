//! The pure compaction steps driven end to end on a scripted conversation with
//! known token sizes, the way the session services will drive them: trigger,
//! summarise through a `ScriptedProvider`, prune, then fit what is sent.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod compaction_support;

use compaction_support::small_model;
use scribe_agent::compaction::{
    CLEARED_TOOL_OUTPUT, FitStep, PruneMessage, SUMMARY_PROMPT, clear_compacted_tool_outputs,
    fit_messages, plan_prune, summary_request,
};
use scribe_agent::estimate::PART_OVERHEAD_TOKENS;
use scribe_agent::{
    ChatMessage, CompactionConfig, HeuristicEstimator, Provider, ScriptedProvider, ScriptedTurn,
    TokenEstimator, TriggerReason, should_compact,
};
use scribe_message::{Extra, Part, Role, TokenUsage, ToolPart, ToolState};
use serde_json::{Value, json};

/// A completed `read` call whose output is `tokens` heuristic tokens.
fn read(call: &str, tokens: usize) -> Part {
    Part::Tool(ToolPart {
        call_id: call.into(),
        tool: "read".into(),
        input: json!({"path": format!("{call}.rs")}),
        state: ToolState::Completed {
            output: format!("{call}:{}", "x".repeat(tokens * 4 - call.len() - 1)),
            title: String::new(),
            metadata: Value::Null,
            started_at: 1,
            ended_at: 2,
        },
        compacted_at: None,
        extra: Extra::new(),
    })
}

/// user, assistant [text, 2k, 2k], user, assistant [1.5k, text], user, assistant [1k].
fn stored() -> Vec<ChatMessage> {
    vec![
        ChatMessage::user_text("refactor the parser"),
        ChatMessage::new(
            Role::Assistant,
            vec![Part::text("reading"), read("a", 2_000), read("b", 2_000)],
        ),
        ChatMessage::user_text("now the lexer"),
        ChatMessage::new(Role::Assistant, vec![read("c", 1_500), Part::text("ok")]),
        ChatMessage::user_text("and tests"),
        ChatMessage::new(Role::Assistant, vec![read("d", 1_000)]),
    ]
}

#[test]
fn trigger_summarise_prune_and_fit() {
    let e = HeuristicEstimator;
    let model = small_model();
    let config = CompactionConfig {
        prune_protect_tokens: 1_200,
        ..CompactionConfig::default()
    };
    let mut history = stored();

    // 1. The trigger: window 10k − reserve 2k = 8k usable. ~6.6k fits; one
    //    more 2k output overflows it.
    let tokens = e.estimate_messages(&history);
    assert!(tokens > 6_500 && tokens < 8_000, "{tokens}");
    assert_eq!(should_compact(tokens, &model, &config), None);
    history.push(ChatMessage::new(Role::Assistant, vec![read("e", 2_000)]));
    let tokens = e.estimate_messages(&history);
    assert_eq!(
        should_compact(tokens, &model, &config),
        Some(TriggerReason::ExceedsUsable {
            context_tokens: tokens,
            usable_tokens: 8_000
        })
    );

    // 2. Summarise: the request holds the history plus the prompt, no tools,
    //    and the call's cost is exact to 1e-9 with cache tokens.
    let usage = TokenUsage {
        input: 1_234,
        output: 456,
        cache_read: 7_000,
        cache_write: 1_000,
        reasoning: 0,
    };
    let provider = ScriptedProvider::new([ScriptedTurn::reply()
        .text("## Goal\nRefactor the parser.")
        .usage(usage)]);
    let request = summary_request(&model.id, None, history.clone());
    let response = provider.send(&request, &mut |_| {}).unwrap();
    assert!(response.text().starts_with("## Goal"));
    let sent = provider.requests();
    assert!(sent[0].tools.is_empty());
    assert_eq!(sent[0].messages.len(), history.len() + 1);
    assert_eq!(
        sent[0].messages.last(),
        Some(&ChatMessage::user_text(SUMMARY_PROMPT))
    );
    let expected = (1_234.0 * 3.0 + 456.0 * 15.0 + 7_000.0 * 0.30 + 1_000.0 * 3.75) / 1e6;
    assert!((model.cost(&response.usage) - expected).abs() < 1e-9);
    assert!((expected - 0.016392).abs() < 1e-9);

    // 3. Prune: the last two user turns (messages 2..) hold 4.5k of outputs, more
    //    than the 1.2k protection, so only the newest result (e, 2k, not read by the
    //    model yet) is spared; every older output goes. Asking for just enough takes
    //    the oldest first and stops.
    let budget = config.max_context_tokens(&model);
    let need = tokens - budget;
    let view: Vec<_> = history
        .iter()
        .map(|m| PruneMessage::from_parts(m.role, &m.parts, &e))
        .collect();
    let plan = plan_prune(&view, &config, Some(need));
    let refs: Vec<_> = plan.parts.iter().map(|r| (r.message, r.part)).collect();
    assert_eq!(refs, vec![(1, 1)], "a alone frees {need}");
    let all = plan_prune(&view, &config, None);
    let refs: Vec<_> = all.parts.iter().map(|r| (r.message, r.part)).collect();
    assert_eq!(refs, vec![(1, 1), (1, 2), (3, 0), (5, 0)]);
    assert_eq!(all.output_tokens, 6_500);

    // The service marks the planned parts; the stored text stays searchable.
    for r in &plan.parts {
        if let Part::Tool(t) = &mut history[r.message].parts[r.part] {
            t.compacted_at = Some(42);
        }
    }
    assert!(history[1].parts[1].searchable_text().contains("a:xxx"));
    let sent = clear_compacted_tool_outputs(history.clone());
    assert_eq!(
        sent[1].parts[1].searchable_text(),
        format!("read\n{{\"path\":\"a.rs\"}}\n{CLEARED_TOOL_OUTPUT}")
    );
    assert_eq!(sent[1].parts[0], Part::text("reading"), "text never pruned");
    let after = e.estimate_messages(&sent);
    assert!(after <= budget, "{after} > {budget}");
    assert_eq!(should_compact(after, &model, &config), None);

    // 4. What is sent fits as is; a much smaller budget needs progressive.
    let fitted = fit_messages(history.clone(), &e, budget).unwrap();
    assert!(fitted.steps.is_empty());
    assert_eq!(fitted.messages, sent);
    let fitted = fit_messages(history, &e, 3_100).unwrap();
    assert_eq!(fitted.steps, vec![FitStep::Progressive]);
    assert_eq!(fitted.messages[0], ChatMessage::user_text("and tests"));
    assert!(fitted.tokens >= 2 * PART_OVERHEAD_TOKENS);
}
