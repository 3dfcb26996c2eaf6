//! A whole scripted agent session, end to end — the shape `scribe demo` can
//! follow: open a database, build the runner (tools, agents, approver, scripted
//! provider), send a prompt with an attached file, and print what was recorded.
//!
//! Run: `cargo run -p scribe-agent --example scripted_demo [DB_PATH]`.

use std::collections::BTreeMap;
use std::error::Error;
use std::sync::Arc;
use std::time::Duration;

use scribe_agent::permission::{Action, Rule, Ruleset};
use scribe_agent::{
    AgentConfig, AgentRegistry, AgentRunner, CancelToken, CheckCommand, Decision, ModelCatalog,
    PartDraft, PromptInput, ScriptedProvider, ScriptedTurn, ToolRegistry,
};
use scribe_message::{Part, TokenUsage};
use scribe_session::{NewSession, Store};
use serde_json::json;

fn main() -> Result<(), Box<dyn Error>> {
    let work = tempfile::tempdir()?;
    let project = work.path().join("project");
    std::fs::create_dir_all(&project)?;
    std::fs::write(project.join("greet.txt"), "hello world\n")?;
    let db_path = std::env::args()
        .nth(1)
        .map_or_else(|| work.path().join("scribe.db"), Into::into);

    let store = Store::open(&db_path)?;
    let (sessions, messages) = (store.sessions(), store.messages());
    let catalog = Arc::new(ModelCatalog::builtin());
    let model = catalog
        .iter()
        .next()
        .ok_or("the built-in catalog is empty")?
        .id
        .clone();

    let usage = |input, output| TokenUsage {
        input,
        output,
        ..TokenUsage::default()
    };
    let provider = Arc::new(ScriptedProvider::new([
        ScriptedTurn::reply()
            .text("I'll check the file and delegate a review.")
            .tool_call("call_1", "read_file", json!({"path": "greet.txt"}))
            .tool_call("call_2", "task", json!({
                "description": "review greeting", "prompt": "Is 'hello world' friendly?", "agent": "reviewer"
            }))
            .usage(usage(1_200, 80)),
        // The reviewer sub-agent's answer.
        ScriptedTurn::reply().text("Friendly, but could name the user.").usage(usage(300, 20)),
        ScriptedTurn::reply()
            .tool_call("call_3", "edit_file", json!({"path": "greet.txt", "old": "world", "new": "Scribe"}))
            .tool_call("call_4", "run_check", json!({"check": "cat"}))
            .usage(usage(1_600, 60)),
        ScriptedTurn::reply().text("Done: greet.txt now says hello Scribe.").usage(usage(1_900, 30)),
        // The background title.
        ScriptedTurn::reply().text("Personalize the greeting"),
    ]));

    let checks = BTreeMap::from([(
        "cat".to_owned(),
        CheckCommand::new("cat", ["greet.txt"]).with_timeout(Duration::from_secs(10)),
    )]);
    let agents = AgentRegistry::new(
        AgentConfig::new("build")
            .with_system_prompt("You are a careful coding agent.")
            .with_permission(Ruleset::new(vec![Rule::new("edit_file", "*", Action::Ask)])),
    )
    .with(
        AgentConfig::new("reviewer")
            .with_description("reviews text")
            .with_tools(["read_file"]),
    );
    let runner = AgentRunner::builder(store.clone(), provider)
        .with_catalog(catalog)
        .with_project_root(&project)
        .with_tools(ToolRegistry::builtin(checks))
        .with_agents(agents)
        .with_approver(|request| {
            println!("approve {} on {:?}? yes", request.tool, request.subject);
            Decision::Allow
        })
        .with_title_generation(true)
        .build();

    let session = sessions.create(NewSession {
        directory: Some(project.to_string_lossy().into_owned()),
        model: Some(model),
        ..NewSession::default()
    })?;
    let outcome = runner.prompt(
        PromptInput {
            session_id: session.id.clone(),
            parts: vec![
                PartDraft::text("Make the greeting personal."),
                PartDraft::file("greet.txt"),
            ],
            ..PromptInput::default()
        },
        &CancelToken::new(),
    )?;
    if let Some(title) = outcome.title {
        println!("title: {:?}", title.join()?);
    }
    println!(
        "finished: {:?} after {} steps",
        outcome.finish_reason, outcome.steps
    );
    for message in messages.list(&outcome.session_id)? {
        println!("[{}] {:?}", message.role, message.finish_reason);
        for stored in &message.parts {
            match &stored.part {
                Part::Text(t) => {
                    println!("    text: {}", t.text.lines().next().unwrap_or_default())
                }
                Part::Tool(t) => {
                    println!("    tool {} ({}): {}", t.tool, t.call_id, t.state.status())
                }
                other => println!("    {}", other.type_name()),
            }
        }
    }
    let s = sessions.get(&outcome.session_id)?;
    println!(
        "cost ${:.6}, {} api calls, {} tool calls",
        s.estimated_cost_usd, s.api_call_count, s.tool_call_count
    );
    Ok(())
}
