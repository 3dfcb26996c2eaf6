//! Sub-agents: the built-in `task` tool. A call starts a child task session
//! whose id is the tool call's id (so the call and the session it spawned
//! find each other), runs the named agent's own loop there on the same
//! runner, and returns the sub-agent's final text as the tool's output. When
//! the child finishes — however it finishes — it is ended and its cost rolled
//! into the parent in one transaction
//! ([`UsageTracker::finish_task_session`](crate::usage::UsageTracker::finish_task_session)).
//!
//! The tool is offered when the agent may use `task`, another agent exists,
//! and the nesting depth is below the runner's limit.

use scribe_message::{FinishReason, ToolPart};
use scribe_types::error_chain;
use serde_json::{Value, json};

use super::AgentRunner;
use crate::agents::AgentConfig;
use crate::cancel::CancelToken;
use crate::ingest::{PartDraft, PromptInput};
use crate::provider::ToolSpec;
use crate::tools::{ToolError, ToolOutput};

/// The task tool's name.
pub const TASK_TOOL: &str = "task";

impl AgentRunner {
    /// The agents `agent` may delegate to: every other agent.
    fn subagents<'a>(
        &'a self,
        agent: &'a AgentConfig,
    ) -> impl Iterator<Item = &'a AgentConfig> + 'a {
        self.agents().iter().filter(move |a| a.name != agent.name)
    }

    pub(crate) fn task_enabled(&self, agent: &AgentConfig, depth: usize) -> bool {
        depth < self.max_task_depth()
            && agent.allows(TASK_TOOL)
            && self.subagents(agent).next().is_some()
    }

    /// The `task` tool as `agent` sees it: the sub-agents it may name.
    pub(crate) fn task_spec(&self, agent: &AgentConfig) -> ToolSpec {
        let names: Vec<&str> = self.subagents(agent).map(|a| a.name.as_str()).collect();
        let listing: Vec<String> = self
            .subagents(agent)
            .map(|a| format!("- {}: {}", a.name, a.description))
            .collect();
        ToolSpec {
            name: TASK_TOOL.to_owned(),
            description: format!(
                "Delegate a self-contained task to a sub-agent, which works in its own session and returns its final answer. Agents:\n{}",
                listing.join("\n")
            ),
            input_schema: json!({
                "type": "object",
                "properties": {
                    "description": {"type": "string"},
                    "prompt": {"type": "string"},
                    "agent": {"type": "string", "enum": names}
                },
                "required": ["description", "prompt", "agent"],
                "additionalProperties": false
            }),
        }
    }

    /// Runs a `task` call (its input already validated).
    pub(crate) fn run_task(
        &self,
        parent_session_id: &str,
        call: &ToolPart,
        cancel: &CancelToken,
        depth: usize,
    ) -> Result<ToolOutput, ToolError> {
        let field = |name: &str| {
            call.input
                .get(name)
                .and_then(Value::as_str)
                .unwrap_or_default()
                .to_owned()
        };
        let (agent, prompt, description) = (field("agent"), field("prompt"), field("description"));
        let child = self
            .store
            .sessions()
            .create_task_session(parent_session_id, &call.call_id, None)
            .map_err(|e| {
                ToolError::Failed(format!(
                    "cannot start the sub-agent session: {}",
                    error_chain(&e)
                ))
            })?;
        let result = self.prompt_at_depth(
            PromptInput {
                session_id: child.id.clone(),
                parts: vec![PartDraft::text(prompt)],
                agent: Some(agent.clone()),
                ..PromptInput::default()
            },
            cancel,
            depth + 1,
        );
        let end_reason = match &result {
            Ok(o) if o.finish_reason == Some(FinishReason::EndTurn) => "completed",
            Ok(o) if o.finish_reason == Some(FinishReason::Canceled) => "canceled",
            _ => "error",
        };
        let finished = self
            .usage()
            .finish_task_session(&child.id, end_reason)
            .map_err(|e| {
                ToolError::Failed(format!(
                    "cannot close the sub-agent session: {}",
                    error_chain(&e)
                ))
            })?;
        let outcome = result
            .map_err(|e| ToolError::Failed(format!("the sub-agent failed: {}", error_chain(&e))))?;
        match outcome.finish_reason {
            Some(FinishReason::EndTurn) | Some(FinishReason::MaxTokens) => Ok(ToolOutput {
                output: outcome.text,
                title: description,
                metadata: json!({
                    "session_id": child.id,
                    "agent": agent,
                    "cost_usd": finished.child.estimated_cost_usd,
                    "steps": outcome.steps,
                }),
            }),
            Some(FinishReason::Canceled) => Err(ToolError::Canceled),
            other => Err(ToolError::Failed(format!(
                "the sub-agent stopped with {}",
                other.as_ref().map_or("no answer", |r| r.as_str())
            ))),
        }
    }
}
