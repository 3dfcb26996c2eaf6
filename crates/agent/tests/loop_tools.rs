//! The loop with tools: a multi-step run with every tool part's state history,
//! streamed text, schema-invalid and unknown calls, permissions (allow, ask
//! approved or refused, deny), the step limit, cancellation mid-tool and a
//! failing model call.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod loop_support;

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use loop_support::*;
use scribe_agent::permission::{Action, Rule, Ruleset};
use scribe_agent::{
    AgentConfig, AgentError, AgentRegistry, CancelToken, Decision, PromptInput, ProviderError,
    ScriptedProvider, ScriptedTurn, ToolRegistry,
};
use scribe_message::{FinishReason, Part, Role, TokenUsage, ToolPart, ToolState};
use serde_json::json;

fn usage() -> TokenUsage {
    TokenUsage {
        input: 100,
        output: 10,
        ..TokenUsage::default()
    }
}

#[test]
fn multi_step_loop_records_every_state_and_ends_the_turn() {
    let env = Env::new();
    std::fs::write(env.project.join("a.txt"), "alpha").unwrap();
    let provider = Arc::new(ScriptedProvider::new([
        ScriptedTurn::reply()
            .reasoning("let me look")
            .text("Reading ")
            .text("the file.")
            .tool_call("c1", "read_file", json!({"path": "a.txt"}))
            .tool_call("c2", "echo", json!({"text": "hi"}))
            .usage(usage()),
        ScriptedTurn::reply()
            .tool_call(
                "c3",
                "edit_file",
                json!({"path": "a.txt", "old": "alpha", "new": "beta"}),
            )
            .usage(usage()),
        ScriptedTurn::reply()
            .text("Done: ")
            .text("edited.")
            .usage(usage()),
    ]));
    let runner = env
        .runner(provider.clone())
        .with_tools(ToolRegistry::builtin(BTreeMap::new()).with(Echo))
        .build();
    let session = env.session();
    let parts = env.messages.subscribe_parts();
    let out = runner
        .prompt(
            PromptInput::text(&session.id, "edit a.txt"),
            &CancelToken::new(),
        )
        .unwrap();
    assert_eq!(out.finish_reason, Some(FinishReason::EndTurn));
    assert_eq!(out.steps, 3);
    assert_eq!(out.text, "Done: edited.");
    assert_eq!(
        std::fs::read_to_string(env.project.join("a.txt")).unwrap(),
        "beta"
    );

    // Every tool part went pending → running → completed, in that order.
    let mut history: BTreeMap<String, Vec<&'static str>> = BTreeMap::new();
    let mut text_versions: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for event in parts.try_iter() {
        let event = event.unwrap().payload;
        match &event.part.part {
            Part::Tool(t) => history
                .entry(t.call_id.clone())
                .or_default()
                .push(t.state.status()),
            Part::Text(t) => text_versions
                .entry(event.part.id.clone())
                .or_default()
                .push(t.text.clone()),
            _ => {}
        }
    }
    for call in ["c1", "c2", "c3"] {
        assert_eq!(
            history[call],
            vec!["pending", "running", "completed"],
            "{call}"
        );
    }
    // Streamed text grew one part per run of deltas.
    let finals: Vec<String> = text_versions
        .values()
        .map(|v| v.last().unwrap().clone())
        .collect();
    assert!(
        finals.contains(&"Reading the file.".to_owned()),
        "{finals:?}"
    );
    assert!(
        text_versions
            .values()
            .any(|v| v.first().unwrap() == "Reading ")
    );

    let stored = env.messages_of(&session.id);
    let roles: Vec<Role> = stored.iter().map(|m| m.role).collect();
    assert_eq!(
        roles,
        [
            Role::User,
            Role::Assistant,
            Role::Assistant,
            Role::Assistant
        ]
    );
    let reasons: Vec<_> = stored[1..]
        .iter()
        .map(|m| m.finish_reason.clone().unwrap())
        .collect();
    assert_eq!(
        reasons,
        [
            FinishReason::ToolUse,
            FinishReason::ToolUse,
            FinishReason::EndTurn
        ]
    );
    let first = &stored[1];
    let types: Vec<&str> = first.parts.iter().map(|p| p.part.type_name()).collect();
    assert_eq!(
        types,
        [
            "step_start",
            "reasoning",
            "text",
            "tool",
            "tool",
            "step_finish",
            "finish"
        ]
    );
    let tools = tool_parts(first);
    assert!(matches!(&tools[0].state, ToolState::Completed { output, .. } if output == "alpha"));
    assert!(matches!(&tools[1].state, ToolState::Completed { output, .. } if output == "hi"));
    // Every completed call of every step started before (or when) it ended.
    let all_tools: Vec<ToolPart> = stored.iter().flat_map(tool_parts).collect();
    assert_eq!(all_tools.len(), 3);
    for tool in &all_tools {
        let ToolState::Completed {
            started_at,
            ended_at,
            ..
        } = &tool.state
        else {
            panic!("not completed: {tool:?}")
        };
        assert!(*started_at > 0 && started_at <= ended_at, "{tool:?}");
    }
    // Usage was charged per step, to the message and the session.
    assert_eq!(first.usage, usage());
    let s = env.sessions.get(&session.id).unwrap();
    assert_eq!(s.api_call_count, 3);
    assert_eq!(s.tokens.input, 300);
    assert!((s.estimated_cost_usd - 3.0 * (0.1 + 0.02)).abs() < 1e-9);
    // The second request carried the tool results.
    let second = &provider.requests()[1];
    assert!(second.tools.iter().any(|t| t.name == "echo"));
    assert_eq!(second.messages.len(), 2);
}

#[test]
fn invalid_or_unknown_calls_become_error_parts_and_the_loop_goes_on() {
    let env = Env::new();
    let provider = Arc::new(ScriptedProvider::new([
        ScriptedTurn::reply()
            .tool_call("c1", "echo", json!({"text": 42}))
            .tool_call("c2", "nope", json!({}))
            .into(),
        ScriptedTurn::text("sorry"),
    ]));
    let runner = env
        .runner(provider.clone())
        .with_tools(ToolRegistry::new().with(Echo))
        .build();
    let session = env.session();
    let out = runner
        .prompt(PromptInput::text(&session.id, "go"), &CancelToken::new())
        .unwrap();
    assert_eq!(out.finish_reason, Some(FinishReason::EndTurn));
    let stored = env.messages_of(&session.id);
    let tools = tool_parts(&stored[1]);
    assert_eq!(
        tools[0].state.error_message(),
        Some("invalid input for echo: input.text: expected string, got integer")
    );
    assert_eq!(tools[0].state.started_at(), None, "never ran");
    assert_eq!(
        tools[1].state.error_message(),
        Some("unknown tool \"nope\"")
    );
}

fn permission_env(
    rules: Ruleset,
    decision: Option<Decision>,
) -> (
    Env,
    Arc<ScriptedProvider>,
    scribe_agent::AgentRunner,
    Arc<Mutex<Vec<String>>>,
) {
    let env = Env::new();
    let provider = Arc::new(ScriptedProvider::new([
        ScriptedTurn::reply()
            .tool_call("c1", "echo", json!({"text": "secret"}))
            .into(),
        ScriptedTurn::text("ok"),
    ]));
    let asked = Arc::new(Mutex::new(Vec::new()));
    let seen = asked.clone();
    let agents = AgentRegistry::new(AgentConfig::new("build").with_permission(rules));
    let mut runner = env
        .runner(provider.clone())
        .with_tools(ToolRegistry::new().with(Echo))
        .with_agents(agents);
    if let Some(decision) = decision {
        runner = runner.with_approver(move |req| {
            seen.lock().unwrap().push(format!(
                "{} {}",
                req.tool,
                req.subject.clone().unwrap_or_default()
            ));
            decision.clone()
        });
    }
    (env, provider, runner.build(), asked)
}

#[test]
fn allow_rule_runs_the_tool() {
    let rules = Ruleset::new(vec![
        Rule::new("*", "*", Action::Deny),
        Rule::new("echo", "sec*", Action::Allow),
    ]);
    let (env, _p, runner, asked) = permission_env(rules, Some(Decision::Deny(None)));
    let session = env.session();
    let out = runner
        .prompt(PromptInput::text(&session.id, "go"), &CancelToken::new())
        .unwrap();
    assert_eq!(out.finish_reason, Some(FinishReason::EndTurn));
    assert!(asked.lock().unwrap().is_empty());
}

#[test]
fn ask_rule_goes_to_the_approver_who_approves() {
    let rules = Ruleset::new(vec![Rule::new("echo", "*", Action::Ask)]);
    let (env, _p, runner, asked) = permission_env(rules, Some(Decision::Allow));
    let session = env.session();
    let out = runner
        .prompt(PromptInput::text(&session.id, "go"), &CancelToken::new())
        .unwrap();
    assert_eq!(out.finish_reason, Some(FinishReason::EndTurn));
    assert_eq!(*asked.lock().unwrap(), vec!["echo secret".to_owned()]);
    let tools = tool_parts(&env.messages_of(&session.id)[1]);
    assert_eq!(tools[0].state.output(), Some("secret"));
}

#[test]
fn ask_refused_and_deny_stop_with_permission_denied() {
    for (rules, decision, expected) in [
        (
            Ruleset::new(vec![Rule::new("echo", "*", Action::Ask)]),
            Some(Decision::Deny(Some("not today".into()))),
            "permission denied: not today",
        ),
        (
            Ruleset::new(vec![
                Rule::new("echo", "*", Action::Allow),
                Rule::new("echo", "secret", Action::Deny),
            ]),
            None,
            "permission denied: the rules deny echo on secret",
        ),
    ] {
        let (env, provider, runner, _asked) = permission_env(rules, decision);
        let session = env.session();
        let out = runner
            .prompt(PromptInput::text(&session.id, "go"), &CancelToken::new())
            .unwrap();
        assert_eq!(out.finish_reason, Some(FinishReason::PermissionDenied));
        assert_eq!(provider.requests().len(), 1, "the loop stopped");
        let stored = env.messages_of(&session.id);
        assert_eq!(
            stored[1].finish_reason,
            Some(FinishReason::PermissionDenied)
        );
        assert_eq!(
            tool_parts(&stored[1])[0].state.error_message(),
            Some(expected)
        );
    }
}

#[test]
fn session_switches_disable_tools_and_deny_their_calls() {
    let env = Env::new();
    let provider = Arc::new(ScriptedProvider::new([ScriptedTurn::reply().tool_call(
        "c1",
        "echo",
        json!({"text": "x"}),
    )]));
    let runner = env
        .runner(provider.clone())
        .with_tools(ToolRegistry::new().with(Echo).with(Block::default()))
        .build();
    let session = env.session();
    let out = runner
        .prompt(
            PromptInput {
                tools: Some(BTreeMap::from([("echo".to_owned(), false)])),
                ..PromptInput::text(&session.id, "go")
            },
            &CancelToken::new(),
        )
        .unwrap();
    let offered: Vec<String> = provider.requests()[0]
        .tools
        .iter()
        .map(|t| t.name.clone())
        .collect();
    assert_eq!(offered, ["block"]);
    assert_eq!(out.finish_reason, Some(FinishReason::PermissionDenied));
}

#[test]
fn the_step_limit_stops_the_loop_with_max_steps() {
    let env = Env::new();
    let provider = Arc::new(ScriptedProvider::new((0..5).map(|i| {
        ScriptedTurn::reply().tool_call(format!("c{i}"), "echo", json!({"text": "again"}))
    })));
    let agents = AgentRegistry::new(AgentConfig::new("build").with_max_steps(2));
    let runner = env
        .runner(provider.clone())
        .with_tools(ToolRegistry::new().with(Echo))
        .with_agents(agents)
        .build();
    let session = env.session();
    let out = runner
        .prompt(PromptInput::text(&session.id, "loop"), &CancelToken::new())
        .unwrap();
    assert_eq!(out.steps, 2);
    assert_eq!(out.finish_reason, Some(FinishReason::MaxSteps));
    assert_eq!(provider.remaining(), 3);
    let last = env.messages_of(&session.id).pop().unwrap();
    assert_eq!(
        last.finish_reason.as_ref().map(FinishReason::as_str),
        Some("max_steps")
    );
}

#[test]
fn cancel_from_another_thread_stops_a_running_tool() {
    let env = Env::new();
    let provider = Arc::new(ScriptedProvider::new([ScriptedTurn::reply()
        .text("working")
        .tool_call("c1", "block", json!({}))
        .tool_call("c2", "echo", json!({"text": "never"}))]));
    let runner = env
        .runner(provider.clone())
        .with_tools(ToolRegistry::new().with(Echo).with(Block::default()))
        .build();
    let session = env.session();
    let parts = env.messages.subscribe_parts();
    let cancel = CancelToken::new();
    let canceller = {
        let cancel = cancel.clone();
        std::thread::spawn(move || {
            // Wait until the blocking tool is running, then cancel.
            loop {
                let event = parts.recv_timeout(Duration::from_secs(30)).unwrap().payload;
                if matches!(&event.part.part, Part::Tool(t) if t.call_id == "c1" && t.state.status() == "running")
                {
                    cancel.cancel();
                    return;
                }
            }
        })
    };
    let out = runner
        .prompt(PromptInput::text(&session.id, "go"), &cancel)
        .unwrap();
    canceller.join().unwrap();
    assert_eq!(out.finish_reason, Some(FinishReason::Canceled));
    let stored = env.messages_of(&session.id);
    let msg = &stored[1];
    assert_eq!(msg.finish_reason, Some(FinishReason::Canceled));
    assert!(msg.finished_at.is_some());
    let tools = tool_parts(msg);
    assert_eq!(tools[0].state.error_message(), Some("canceled"));
    assert!(tools[0].state.started_at().is_some());
    assert_eq!(tools[1].state.error_message(), Some("canceled"));
    assert_eq!(msg.text(), "working");
    assert_eq!(provider.requests().len(), 1);
}

#[test]
fn a_failed_model_call_finishes_the_message_with_its_error() {
    let env = Env::new();
    let provider = Arc::new(ScriptedProvider::new([ScriptedTurn::reply()
        .text("partial")
        .tool_call("c1", "echo", json!({"text": "x"}))
        .then_fail(ProviderError::Api {
            provider: "scripted".into(),
            status: Some(500),
            message: "boom".into(),
        })]));
    let runner = env
        .runner(provider)
        .with_tools(ToolRegistry::new().with(Echo))
        .build();
    let session = env.session();
    let err = runner
        .prompt(PromptInput::text(&session.id, "go"), &CancelToken::new())
        .unwrap_err();
    assert!(matches!(err, AgentError::Provider { .. }), "{err}");
    let msg = env.messages_of(&session.id).pop().unwrap();
    assert_eq!(msg.finish_reason, Some(FinishReason::Error));
    assert_eq!(msg.text(), "partial", "what arrived is kept");
    assert!(
        msg.error.unwrap()["message"]
            .as_str()
            .unwrap()
            .contains("boom")
    );
    assert_eq!(
        tool_parts(&env.messages_of(&session.id)[1])[0]
            .state
            .error_message(),
        Some("not run: the model call failed")
    );
}
