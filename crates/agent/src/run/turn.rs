//! One turn of the loop: a [`Turn`] (who answers, with which model, for which user
//! message, how deep, how to cancel) and the steps it takes — a model call streamed into
//! an assistant message ([`AgentRunner::step`]), then the tool calls it made
//! ([`AgentRunner::run_tool`]), each recorded as it happens (see the module doc of
//! [`crate::run`]).

use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::Arc;

use scribe_db::ids::{Prefix, new_id};
use scribe_message::{
    FinishReason, Message, MessageError, MessageUpdate, NewMessage, Part, Role, StepStartPart,
    ToolPart,
};
use scribe_types::error_chain;
use serde_json::{Value, json};

use super::task::TASK_TOOL;
use super::{AgentRunner, RunOutcome};
use crate::agents::AgentConfig;
use crate::cancel::CancelToken;
use crate::compaction::Compactor;
use crate::context::{Context, RequestFrame};
use crate::error::AgentError;
use crate::events::LoopEvent;
use crate::permission::{Action, Decision, PermissionRequest, Ruleset, session_rules};
use crate::provider::{ChatRequest, ProviderError, ToolSpec};
use crate::recovery::mark_running;
use crate::reply::ReplyWriter;
use crate::tools::{Tool, ToolContext, ToolError, ToolOutput, schema};

/// What a turn keeps from step to step.
pub(crate) struct Turn<'a> {
    /// The agent answering.
    pub(crate) agent: &'a AgentConfig,
    /// The model it calls.
    pub(crate) model: &'a str,
    /// The user message the turn answers (empty: none).
    pub(crate) user_message_id: &'a str,
    /// Canceled when the caller gives up.
    pub(crate) cancel: &'a CancelToken,
    /// How deep in sub-agents this turn runs (0: the user's).
    pub(crate) depth: usize,
}

/// How a tool call ended, for the loop.
pub(crate) enum ToolRun {
    Done,
    Denied,
    Canceled,
}

/// One tool call to run: its session and message, the stored part and the call.
pub(crate) struct Call<'a> {
    session_id: &'a str,
    message_id: &'a str,
    part_id: &'a str,
    part: ToolPart,
}

/// What a step sends besides the conversation, and the rules its tool calls are
/// checked against: both follow from the session, read once per step.
pub(crate) struct StepFrame {
    /// The session's rules merged into the agent's.
    pub(crate) rules: Ruleset,
    /// The agent's system prompt and the tools it may call under `rules`.
    pub(crate) frame: RequestFrame,
}

impl AgentRunner {
    /// The frame of the next step of `turn` in `session_id`.
    pub(crate) fn step_frame(
        &self,
        turn: &Turn<'_>,
        session_id: &str,
    ) -> Result<StepFrame, AgentError> {
        let session = self.store.sessions().get(session_id)?;
        let rules = turn.agent.permission.then(&session_rules(&session)?);
        let frame = RequestFrame::new(
            turn.agent.system_prompt.clone(),
            self.tool_specs(turn, &rules),
        );
        Ok(StepFrame { rules, frame })
    }

    /// One model call (sending `context`, loaded by the loop with `frame`, fitted to the
    /// window) and its tool calls; returns the step message's finish reason.
    pub(crate) fn step(
        &self,
        turn: &Turn<'_>,
        session_id: &str,
        compactor: &Compactor,
        (context, frame): (Context, StepFrame),
        outcome: &mut RunOutcome,
    ) -> Result<FinishReason, AgentError> {
        // Before the message exists, so recovery in this process never takes
        // it for a dead process's leftover (see `crate::recovery`).
        let _running = mark_running(session_id);
        // Renews the heartbeat (the turn already holds the lease).
        let _lease = self.lease(session_id)?;
        let StepFrame { rules, frame } = frame;
        let context = compactor.fit(context, turn.model)?;
        // The system prompt the context was measured with (the agent's, else the
        // session's) and the frame's tools: what the size counted is what is sent.
        let request = ChatRequest {
            model: turn.model.to_owned(),
            system: context.context.system_prompt.clone(),
            messages: context.messages,
            tools: frame.tools,
        };
        let mut reply =
            ReplyWriter::start(self.store.messages(), self.step_message(turn, session_id))?
                .with_flush_interval(self.settings.flush_interval);
        let message_id = reply.message_id().to_owned();
        outcome.assistant_message_ids.push(message_id.clone());
        self.emit(LoopEvent::StepStarted {
            session_id: session_id.to_owned(),
            message_id: message_id.clone(),
            step: outcome.steps,
        });

        let sent = self.provider.send(&request, &mut |event| reply.push(event));
        let response = match sent {
            Ok(response) => response,
            Err(source) => {
                let tool_parts = reply.abandon();
                let canceled =
                    turn.cancel.is_canceled() || matches!(source, ProviderError::Canceled);
                let why = if canceled {
                    "canceled"
                } else {
                    "not run: the model call failed"
                };
                for (part_id, part) in tool_parts {
                    self.fail_part(&part_id, part, why)?;
                }
                if canceled {
                    self.store
                        .messages()
                        .finish(&message_id, FinishReason::Canceled)?;
                    return Ok(FinishReason::Canceled);
                }
                self.record_error(
                    &message_id,
                    json!({"type": "provider", "message": error_chain(&source)}),
                )?;
                self.emit(LoopEvent::Error {
                    session_id: session_id.to_owned(),
                    message: error_chain(&source),
                });
                return Err(AgentError::Provider {
                    session_id: session_id.to_owned(),
                    source,
                });
            }
        };
        // What streamed stands; the response fills in what did not (a provider may
        // answer without streaming), see `crate::reply`. The end, the step_finish part
        // and the charge commit in one transaction: a reply is never stored ended but
        // uncharged.
        let tool_parts = match reply.finish_charged(&response, &self.usage, turn.model) {
            Ok((parts, _charge)) => parts,
            Err(e) => {
                // Best effort: the store may just have failed, so this may fail too,
                // and recovery will finish the message on the next open.
                let kind = match e {
                    AgentError::UnknownModel(_) => "usage",
                    _ => "storage",
                };
                let _ = self.record_error(
                    &message_id,
                    json!({"type": kind, "message": error_chain(&e)}),
                );
                return Err(e);
            }
        };
        let called_tools = !tool_parts.is_empty();
        let mut stop: Option<FinishReason> = None;
        for (part_id, part) in tool_parts {
            if let Some(reason) = &stop {
                let why = if *reason == FinishReason::Canceled {
                    "canceled".to_owned()
                } else {
                    "not run: an earlier call was denied".to_owned()
                };
                self.fail_part(&part_id, part, &why)?;
                continue;
            }
            if turn.cancel.is_canceled() {
                self.fail_part(&part_id, part, "canceled")?;
                stop = Some(FinishReason::Canceled);
                continue;
            }
            let call = Call {
                session_id,
                message_id: &message_id,
                part_id: &part_id,
                part,
            };
            match self.run_tool(turn, call, &rules)? {
                ToolRun::Done => {}
                ToolRun::Denied => stop = Some(FinishReason::PermissionDenied),
                ToolRun::Canceled => stop = Some(FinishReason::Canceled),
            }
        }
        let reason = match stop {
            Some(reason) => reason,
            None if turn.cancel.is_canceled() => FinishReason::Canceled,
            None if called_tools && outcome.steps >= turn.agent.max_steps => FinishReason::MaxSteps,
            None if called_tools => FinishReason::ToolUse,
            // A model that says tool_use without calling one has nothing left to do.
            None if response.finish_reason == FinishReason::ToolUse => FinishReason::EndTurn,
            None => response.finish_reason.clone(),
        };
        self.store.messages().finish(&message_id, reason.clone())?;
        Ok(reason)
    }

    /// The assistant message a step of `turn` writes into: open, with a `step_start`
    /// part.
    fn step_message(&self, turn: &Turn<'_>, session_id: &str) -> NewMessage {
        NewMessage {
            agent: Some(turn.agent.name.clone()),
            provider: Some(self.provider.name().to_owned()),
            model: Some(turn.model.to_owned()),
            parent_id: (!turn.user_message_id.is_empty()).then(|| turn.user_message_id.to_owned()),
            ..NewMessage::new(
                session_id,
                Role::Assistant,
                vec![Part::StepStart(StepStartPart::default())],
            )
        }
    }

    /// Runs the subtask parts of a user message as `task` calls, each in an
    /// assistant message of its own, before the model is asked (the model then
    /// sees their results). Returns those messages and, if one stopped the
    /// prompt (denied, canceled), why.
    pub(crate) fn run_subtasks(
        &self,
        turn: &Turn<'_>,
        session_id: &str,
        user: &Message,
    ) -> Result<(Vec<String>, Option<FinishReason>), AgentError> {
        let mut ids = Vec::new();
        for stored in &user.parts {
            let Part::Subtask(sub) = &stored.part else {
                continue;
            };
            if turn.cancel.is_canceled() {
                return Ok((ids, Some(FinishReason::Canceled)));
            }
            let _running = mark_running(session_id);
            let session = self.store.sessions().get(session_id)?;
            let rules = turn.agent.permission.then(&session_rules(&session)?);
            let message = self
                .store
                .messages()
                .create(self.step_message(turn, session_id))?;
            ids.push(message.id.clone());
            // The call id names the child session, so it must be a fresh session id.
            let call_id = new_id(Prefix::Session);
            let input =
                json!({"description": sub.description, "prompt": sub.prompt, "agent": sub.agent});
            let stored_call = self
                .store
                .messages()
                .append_part(&message.id, Part::tool(call_id, TASK_TOOL, input))?;
            let Part::Tool(part) = stored_call.part else {
                continue;
            };
            let call = Call {
                session_id,
                message_id: &message.id,
                part_id: &stored_call.id,
                part,
            };
            let reason = match self.run_tool(turn, call, &rules)? {
                ToolRun::Done => FinishReason::ToolUse,
                ToolRun::Denied => FinishReason::PermissionDenied,
                ToolRun::Canceled => FinishReason::Canceled,
            };
            self.store.messages().finish(&message.id, reason.clone())?;
            if reason != FinishReason::ToolUse {
                return Ok((ids, Some(reason)));
            }
        }
        Ok((ids, None))
    }

    /// The specs the agent may call, minus tools the rules disable outright.
    fn tool_specs(&self, turn: &Turn<'_>, rules: &Ruleset) -> Vec<ToolSpec> {
        let agent = turn.agent;
        let mut specs = self
            .settings
            .tools
            .specs(|name| agent.allows(name) && !rules.is_disabled(name) && name != TASK_TOOL);
        if self.task_enabled(agent, turn.depth) && !rules.is_disabled(TASK_TOOL) {
            specs.push(self.task_spec(agent));
        }
        specs
    }

    /// Checks and runs one tool call, recording every state it passes through.
    fn run_tool(
        &self,
        turn: &Turn<'_>,
        call: Call<'_>,
        rules: &Ruleset,
    ) -> Result<ToolRun, AgentError> {
        let Call {
            session_id,
            message_id,
            part_id,
            mut part,
        } = call;
        let agent = turn.agent;
        let is_task = part.tool == TASK_TOOL && self.task_enabled(agent, turn.depth);
        let tool: Option<&Arc<dyn Tool>> = if is_task {
            None
        } else {
            match self.settings.tools.get(&part.tool) {
                Some(tool) if agent.allows(&part.tool) => Some(tool),
                Some(_) => {
                    let why = format!(
                        "tool {} is not available to agent {}",
                        part.tool, agent.name
                    );
                    self.fail_part(part_id, part, &why)?;
                    return Ok(ToolRun::Done);
                }
                None => {
                    let why = format!("unknown tool {:?}", part.tool);
                    self.fail_part(part_id, part, &why)?;
                    return Ok(ToolRun::Done);
                }
            }
        };
        let input_schema = match tool {
            Some(tool) => tool.input_schema(),
            None => self.task_spec(agent).input_schema,
        };
        if let Err(problems) = schema::validate(&input_schema, &part.input) {
            let why = format!("invalid input for {}: {problems}", part.tool);
            self.fail_part(part_id, part, &why)?;
            return Ok(ToolRun::Done);
        }
        let ctx = ToolContext {
            session_id: session_id.to_owned(),
            message_id: message_id.to_owned(),
            call_id: part.call_id.clone(),
            agent: agent.name.clone(),
            cancel: turn.cancel.clone(),
            project_root: self.settings.project_root.clone(),
            files: Some(self.store.sessions().clone()),
        };
        let subject = match tool {
            Some(tool) => tool.permission_subject(&part.input, &ctx),
            None => part
                .input
                .get("agent")
                .and_then(Value::as_str)
                .map(str::to_owned),
        };
        let denied = match rules
            .evaluate(&part.tool, subject.as_deref())
            .unwrap_or(Action::Allow)
        {
            Action::Allow => None,
            Action::Deny => Some(format!(
                "permission denied: the rules deny {}{}",
                part.tool,
                subject
                    .as_deref()
                    .map(|s| format!(" on {s}"))
                    .unwrap_or_default()
            )),
            Action::Ask => {
                let request = PermissionRequest {
                    session_id: session_id.to_owned(),
                    tool: part.tool.clone(),
                    subject: subject.clone(),
                    input: part.input.clone(),
                    call_id: part.call_id.clone(),
                };
                match (self.settings.approver)(&request) {
                    Decision::Allow => None,
                    Decision::Deny(reason) => Some(format!(
                        "permission denied: {}",
                        reason.unwrap_or_else(|| "the approver refused".to_owned())
                    )),
                }
            }
        };
        if let Some(why) = denied {
            self.fail_part(part_id, part, &why)?;
            return Ok(ToolRun::Denied);
        }
        if turn.cancel.is_canceled() {
            self.fail_part(part_id, part, "canceled")?;
            return Ok(ToolRun::Canceled);
        }
        let messages = self.store.messages();
        part.state
            .start(self.store.database().now())
            .map_err(|source| MessageError::IllegalToolTransition {
                part_id: part_id.to_owned(),
                source,
            })?;
        messages.update_part(part_id, Part::Tool(part.clone()))?;

        let result: Result<ToolOutput, ToolError> = match tool {
            Some(tool) => catch_unwind(AssertUnwindSafe(|| tool.run(&part.input, &ctx)))
                .unwrap_or_else(|_| Err(ToolError::Failed("the tool panicked".to_owned()))),
            None => self.run_task(session_id, &part, turn.cancel, turn.depth),
        };
        let now = self.store.database().now();
        let run = match result {
            Ok(out) => {
                part.state
                    .complete(out.output, out.title, out.metadata, now)
                    .map_err(|source| MessageError::IllegalToolTransition {
                        part_id: part_id.to_owned(),
                        source,
                    })?;
                messages.update_part(part_id, Part::Tool(part))?;
                ToolRun::Done
            }
            Err(error) => {
                let canceled = matches!(error, ToolError::Canceled) || turn.cancel.is_canceled();
                let why = if canceled {
                    "canceled".to_owned()
                } else {
                    error_chain(&error)
                };
                self.fail_part(part_id, part, &why)?;
                if canceled {
                    ToolRun::Canceled
                } else {
                    ToolRun::Done
                }
            }
        };
        if turn.cancel.is_canceled() {
            return Ok(ToolRun::Canceled);
        }
        Ok(run)
    }

    /// Moves a pending or running tool part to `error` with `why`.
    fn fail_part(&self, part_id: &str, mut part: ToolPart, why: &str) -> Result<(), AgentError> {
        if part.state.fail(why, self.store.database().now()).is_ok() {
            self.store
                .messages()
                .update_part(part_id, Part::Tool(part))?;
        }
        Ok(())
    }

    /// Finishes `message_id` with `error`, recording `error`.
    fn record_error(&self, message_id: &str, error: Value) -> Result<(), AgentError> {
        let messages = self.store.messages();
        messages.update(
            message_id,
            MessageUpdate {
                error: Some(Some(error)),
                ..Default::default()
            },
        )?;
        messages.finish(message_id, FinishReason::Error)?;
        Ok(())
    }
}
