//! Sub-agents: the `task` tool runs another agent in a child task session
//! whose id is the call id; its final text is the tool output and its cost
//! rolls into the parent.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod loop_support;

use std::sync::Arc;

use loop_support::*;
use scribe_agent::{
    AgentConfig, AgentRegistry, CancelToken, PromptInput, ScriptedProvider, ScriptedTurn,
    ToolRegistry,
};
use scribe_message::{FinishReason, TokenUsage};
use scribe_session::SessionKind;
use serde_json::json;

fn usage(input: i64) -> TokenUsage {
    TokenUsage {
        input,
        output: 10,
        ..TokenUsage::default()
    }
}

fn cost(u: TokenUsage) -> f64 {
    model(MODEL, 1).cost(&u)
}

#[test]
fn a_task_runs_a_sub_agent_and_rolls_its_cost_into_the_parent() {
    let env = Env::new();
    let provider = Arc::new(ScriptedProvider::new([
        ScriptedTurn::reply()
            .tool_call(
                "call_task_1",
                "task",
                json!({"description": "find main", "prompt": "where is main?", "agent": "explorer"}),
            )
            .usage(usage(100)),
        // The sub-agent: one tool step, then its answer.
        ScriptedTurn::reply().tool_call("call_echo", "echo", json!({"text": "src/main.rs"})).usage(usage(50)),
        ScriptedTurn::reply().text("main is in src/main.rs").usage(usage(60)),
        // The parent again.
        ScriptedTurn::reply().text("Found it.").usage(usage(200)),
    ]));
    let agents = AgentRegistry::new(AgentConfig::new("build").with_tools(["task"])).with(
        AgentConfig::new("explorer")
            .with_description("reads code")
            .with_tools(["echo"]),
    );
    let runner = env
        .runner(provider.clone())
        .with_tools(ToolRegistry::new().with(Echo))
        .with_agents(agents)
        .build();
    let session = env.session();
    let out = runner
        .prompt(
            PromptInput::text(&session.id, "where is main?"),
            &CancelToken::new(),
        )
        .unwrap();
    assert_eq!(out.finish_reason, Some(FinishReason::EndTurn));
    assert_eq!(out.text, "Found it.");

    // The parent only saw the task tool; the sub-agent only echo.
    let requests = provider.requests();
    let names = |i: usize| {
        requests[i]
            .tools
            .iter()
            .map(|t| t.name.clone())
            .collect::<Vec<_>>()
    };
    assert_eq!(names(0), ["task"]);
    assert_eq!(names(1), ["echo"]);

    let child = env.sessions.get("call_task_1").unwrap();
    assert_eq!(child.kind, SessionKind::Task);
    assert_eq!(
        child.parent_session_id.as_deref(),
        Some(session.id.as_str())
    );
    assert_eq!(child.end_reason.as_deref(), Some("completed"));
    assert!(env.sessions.rolled_up_at("call_task_1").unwrap().is_some());
    let child_messages = env.messages_of("call_task_1");
    assert_eq!(child_messages[0].agent.as_deref(), Some("explorer"));

    let parent_tool = &tool_parts(&env.messages_of(&session.id)[1])[0];
    assert_eq!(parent_tool.state.output(), Some("main is in src/main.rs"));
    let child_cost = cost(usage(50)) + cost(usage(60));
    assert!((child.estimated_cost_usd - child_cost).abs() < 1e-9);
    let parent = env.sessions.get(&session.id).unwrap();
    let own = cost(usage(100)) + cost(usage(200));
    assert!(
        (parent.estimated_cost_usd - (own + child_cost)).abs() < 1e-9,
        "{}",
        parent.estimated_cost_usd
    );
    assert_eq!(parent.api_call_count, 4);
}

#[test]
fn a_failing_sub_agent_is_an_error_part_and_still_rolls_up() {
    let env = Env::new();
    let provider = Arc::new(ScriptedProvider::new([
        ScriptedTurn::reply().tool_call(
            "call_task_2",
            "task",
            json!({"description": "d", "prompt": "p", "agent": "explorer"}),
        ),
        // The sub-agent's call fails: the script has only one more turn, for the parent.
    ]));
    provider.push(ScriptedTurn::error(scribe_agent::ProviderError::Api {
        provider: "scripted".into(),
        status: Some(400),
        message: "bad request".into(),
    }));
    provider.push(ScriptedTurn::text("the helper failed"));
    let agents = AgentRegistry::new(AgentConfig::new("build")).with(AgentConfig::new("explorer"));
    let runner = env.runner(provider).with_agents(agents).build();
    let session = env.session();
    let out = runner
        .prompt(PromptInput::text(&session.id, "go"), &CancelToken::new())
        .unwrap();
    assert_eq!(out.text, "the helper failed");
    let tool = &tool_parts(&env.messages_of(&session.id)[1])[0];
    let message = tool.state.error_message().unwrap();
    assert!(
        message.contains("the sub-agent failed") && message.contains("bad request"),
        "{message}"
    );
    let child = env.sessions.get("call_task_2").unwrap();
    assert_eq!(child.end_reason.as_deref(), Some("error"));
    assert!(env.sessions.rolled_up_at("call_task_2").unwrap().is_some());
}

#[test]
fn a_subtask_part_in_the_prompt_runs_before_the_model_answers() {
    let env = Env::new();
    let provider = Arc::new(ScriptedProvider::new([
        // The sub-agent answers first …
        ScriptedTurn::text("there are 3 modules"),
        // … then the main agent, which already sees the result.
        ScriptedTurn::text("Summary: 3 modules."),
    ]));
    let agents = AgentRegistry::new(AgentConfig::new("build"))
        .with(AgentConfig::new("explorer").with_tools(Vec::<String>::new()));
    let runner = env.runner(provider.clone()).with_agents(agents).build();
    let session = env.session();
    let out = runner
        .prompt(
            PromptInput {
                session_id: session.id.clone(),
                parts: vec![
                    scribe_agent::PartDraft::text("summarize the modules"),
                    scribe_agent::PartDraft::Subtask {
                        prompt: "count the modules".into(),
                        description: "count modules".into(),
                        agent: "explorer".into(),
                    },
                ],
                ..PromptInput::default()
            },
            &CancelToken::new(),
        )
        .unwrap();
    assert_eq!(out.text, "Summary: 3 modules.");
    assert_eq!(out.assistant_message_ids.len(), 2);
    let stored = env.messages_of(&session.id);
    let call = &tool_parts(&stored[1])[0];
    assert_eq!(call.tool, "task");
    assert_eq!(call.state.output(), Some("there are 3 modules"));
    let child = env.sessions.get(&call.call_id).unwrap();
    assert_eq!(child.kind, SessionKind::Task);
    assert!(env.sessions.rolled_up_at(&child.id).unwrap().is_some());
    let last_request = provider.requests().pop().unwrap();
    assert!(format!("{:?}", last_request.messages).contains("there are 3 modules"));
}
