//! The agent loop: [`AgentRunner`] takes a [`PromptInput`], persists it (see
//! [`crate::ingest`]), then runs model calls and tool calls until the model
//! ends its turn, the agent's step limit is hit, a permission is denied, or
//! the [`CancelToken`] is canceled.
//!
//! Ingestion saves the user message, its parts and the session settings the
//! prompt implies (its model, its tool switches as permission rules) in one
//! transaction, before any model runs; opening a session first takes its run
//! lease ([`crate::lease`]: a session another live process is answering is
//! refused with [`LoopError::SessionBusy`]) and repairs what a dead process
//! left unfinished ([`crate::recovery`]), and prompting a session
//! that compaction closed continues in its continuation. Subtask parts of the
//! prompt run as `task` calls before the model is asked.
//!
//! Every step is recorded as it happens, so a crash or a restart can be
//! understood and resumed:
//!
//! 1. the request is built from the session's context (from its latest
//!    summary on, fitted to the window) and the tools the agent may use;
//! 2. an assistant message is saved (with a `step_start` part) **before** the
//!    provider is called; streamed text grows one text part, each tool call
//!    is saved as a `pending` tool part as it arrives;
//! 3. the call's usage and cost are charged to the session and the message
//!    (plus a `step_finish` part);
//! 4. each tool call is checked (known tool, input matches its schema,
//!    permission rules / approver) and run: `pending → running → completed |
//!    error`; a schema mismatch or a tool failure is an error part the model
//!    reads, not a crash;
//! 5. the message is finished with its reason: `tool_use` (the loop goes on),
//!    `end_turn`, `max_tokens`, `max_steps`, `permission_denied`, `canceled`
//!    or `error`;
//! 6. before the next request, compaction runs if the context calls for it —
//!    on the compactor's own thread ([`Compactor::spawn_compact`]), which the
//!    loop joins before building the next request; a continuation moves the
//!    loop into the new session. A provider that
//!    reports a context overflow gets one compaction and one retry.
//!
//! Cancellation is checked before each model call and each tool call; a
//! running tool sees it through its [`ToolContext::cancel`]. Unfinished tool
//! parts of a canceled step become `error: canceled`.

mod cancel;
mod config;
mod error;
mod events;
mod stream;

use std::collections::BTreeMap;
use std::fmt;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use scribe_db::ids::{Prefix, new_id};
use scribe_db::now_ms;
use scribe_db::queries;
use scribe_db::rusqlite::OptionalExtension;
use scribe_message::{
    FinishReason, Message, MessageError, MessageService, NewMessage, Part, Role, StepFinishPart,
    StepStartPart, ToolPart, store,
};
use scribe_pubsub::{Broker, EventKind, Subscription};
use scribe_session::{Session, SessionKind, SessionService};
use serde_json::{Value, json};

pub use cancel::CancelToken;
pub use config::{AgentConfig, AgentRegistry};
pub use error::LoopError;
pub use events::LoopEvent;

use crate::compaction::runner::END_REASON_COMPRESSION;
use crate::compaction::{CompactionOutcome, Compactor};
use crate::error::write_tx;
use crate::estimate::{HeuristicEstimator, TokenEstimator};
use crate::ingest::{
    Hook, HookError, IngestConfig, PartDraft, PromptInput, UserMessageDraft, resolve_parts,
};
use crate::lease::{self, AcquireError, LeaseConfig, LeaseGuard};
use crate::models::ModelCatalog;
use crate::permission::{Action, Approver, Decision, PermissionRequest, Ruleset};
use crate::provider::{ChatRequest, Provider, ProviderError, ToolSpec};
use crate::recovery::{RecoveryReport, mark_running, recover_session_with};
use crate::subagent::TASK_TOOL;
use crate::title::{TitleGenerator, TitleHandle};
use crate::tools::path::canonical_roots;
use crate::tools::{Tool, ToolContext, ToolError, ToolOutput, ToolRegistry, schema};
use crate::usage::UsageTracker;

use stream::Streamer;

/// The finish reason of a message whose step hit the agent's step limit.
pub const MAX_STEPS: &str = "max_steps";

/// What one prompt (or one [`AgentRunner::run`]) did.
#[derive(Debug)]
pub struct RunOutcome {
    /// The session the loop ended in (a continuation after compaction may
    /// differ from the one prompted).
    pub session_id: String,
    /// The saved user message (`None` for [`AgentRunner::run`]).
    pub user_message_id: Option<String>,
    /// The assistant messages, one per step, in order.
    pub assistant_message_ids: Vec<String>,
    /// Why the loop stopped; `None` with `no_reply`.
    pub finish_reason: Option<FinishReason>,
    /// Model calls made.
    pub steps: usize,
    /// The text of the last assistant message.
    pub text: String,
    /// The background title generation, when this was the first exchange and
    /// titles are on.
    pub title: Option<TitleHandle>,
}

impl RunOutcome {
    fn empty(session_id: &str) -> RunOutcome {
        RunOutcome {
            session_id: session_id.to_owned(),
            user_message_id: None,
            assistant_message_ids: Vec::new(),
            finish_reason: None,
            steps: 0,
            text: String::new(),
            title: None,
        }
    }
}

/// Runs prompts against sessions; share it behind an `Arc` (sub-agents run on
/// the same runner).
pub struct AgentRunner {
    sessions: Arc<SessionService>,
    messages: Arc<MessageService>,
    provider: Arc<dyn Provider>,
    catalog: Arc<ModelCatalog>,
    usage: Arc<UsageTracker>,
    tools: ToolRegistry,
    agents: AgentRegistry,
    estimator: Arc<dyn TokenEstimator>,
    approver: Arc<Approver>,
    hooks: Vec<Arc<Hook>>,
    ingest: IngestConfig,
    project_root: PathBuf,
    events: Broker<LoopEvent>,
    compactors: BTreeMap<String, Arc<Compactor>>,
    titles: bool,
    flush_interval: Duration,
    max_task_depth: usize,
    lease: LeaseConfig,
}

impl fmt::Debug for AgentRunner {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("AgentRunner")
            .field("provider", &self.provider.name())
            .field("tools", &self.tools)
            .field("agents", &self.agents)
            .field("hooks", &self.hooks.len())
            .field("project_root", &self.project_root)
            .field("titles", &self.titles)
            .finish_non_exhaustive()
    }
}

enum ToolRun {
    Done,
    Denied,
    Canceled,
}

impl AgentRunner {
    /// A runner with no tools, the default agent (`build`), an approver that
    /// denies every `ask`, titles off, and `project_root` as the directory of
    /// sessions that have none.
    pub fn new(
        sessions: Arc<SessionService>,
        messages: Arc<MessageService>,
        provider: Arc<dyn Provider>,
        catalog: Arc<ModelCatalog>,
        project_root: impl Into<PathBuf>,
    ) -> AgentRunner {
        let usage = UsageTracker::new(sessions.clone(), messages.clone(), catalog.clone());
        let mut runner = AgentRunner {
            sessions,
            messages,
            provider,
            catalog,
            usage: Arc::new(usage),
            tools: ToolRegistry::new(),
            agents: AgentRegistry::default(),
            estimator: Arc::new(HeuristicEstimator),
            approver: Arc::new(|_: &PermissionRequest| {
                Decision::Deny(Some("no approver is configured".to_owned()))
            }),
            hooks: Vec::new(),
            ingest: IngestConfig::default(),
            project_root: project_root.into(),
            events: Broker::new(),
            compactors: BTreeMap::new(),
            titles: false,
            flush_interval: Duration::from_millis(50),
            max_task_depth: 3,
            lease: LeaseConfig::default(),
        };
        runner.build_compactors();
        runner
    }

    /// One compactor per agent (its compaction settings), so each keeps one
    /// event broker that callers can subscribe to.
    fn build_compactors(&mut self) {
        self.compactors = self
            .agents
            .iter()
            .map(|agent| {
                let compactor = Compactor::new(
                    self.sessions.clone(),
                    self.messages.clone(),
                    self.provider.clone(),
                    self.catalog.clone(),
                    agent.compaction.clone(),
                )
                .with_estimator(self.estimator.clone());
                (agent.name.clone(), Arc::new(compactor))
            })
            .collect();
    }

    /// Offers these tools.
    pub fn with_tools(mut self, tools: ToolRegistry) -> AgentRunner {
        self.tools = tools;
        self
    }

    /// Uses these agents.
    pub fn with_agents(mut self, agents: AgentRegistry) -> AgentRunner {
        self.agents = agents;
        self.build_compactors();
        self
    }

    /// Sends `ask` decisions to `approver`.
    pub fn with_approver(
        mut self,
        approver: impl Fn(&PermissionRequest) -> Decision + Send + Sync + 'static,
    ) -> AgentRunner {
        self.approver = Arc::new(approver);
        self
    }

    /// Adds a hook run on every user message before it is saved.
    pub fn with_hook(
        mut self,
        hook: impl Fn(&mut UserMessageDraft) -> Result<(), HookError> + Send + Sync + 'static,
    ) -> AgentRunner {
        self.hooks.push(Arc::new(hook));
        self
    }

    /// Sets attachment limits and extra roots.
    pub fn with_ingest_config(mut self, ingest: IngestConfig) -> AgentRunner {
        self.ingest = ingest;
        self
    }

    /// Measures unreported content with `estimator`.
    pub fn with_estimator(mut self, estimator: Arc<dyn TokenEstimator>) -> AgentRunner {
        self.estimator = estimator;
        self.build_compactors();
        self
    }

    /// Generates a title after a session's first exchange (off by default).
    pub fn with_title_generation(mut self, on: bool) -> AgentRunner {
        self.titles = on;
        self
    }

    /// Writes a growing text part at most this often (default 50 ms).
    pub fn with_flush_interval(mut self, interval: Duration) -> AgentRunner {
        self.flush_interval = interval;
        self
    }

    /// Limits how deep sub-agents may nest (default 3).
    pub fn with_max_task_depth(mut self, depth: usize) -> AgentRunner {
        self.max_task_depth = depth;
        self
    }

    /// Judges other processes' run leases with `config` (see [`crate::lease`]).
    pub fn with_lease_config(mut self, config: LeaseConfig) -> AgentRunner {
        self.lease = config;
        self
    }

    /// The session service.
    pub fn sessions(&self) -> &Arc<SessionService> {
        &self.sessions
    }

    /// The message service.
    pub fn messages(&self) -> &Arc<MessageService> {
        &self.messages
    }

    /// The usage tracker.
    pub fn usage(&self) -> &Arc<UsageTracker> {
        &self.usage
    }

    /// How deep sub-agents may nest.
    pub fn max_task_depth(&self) -> usize {
        self.max_task_depth
    }

    /// The agents.
    pub fn agents(&self) -> &AgentRegistry {
        &self.agents
    }

    /// The broker of loop events.
    pub fn events(&self) -> &Broker<LoopEvent> {
        &self.events
    }

    /// A subscription to loop events.
    pub fn subscribe(&self) -> Subscription<LoopEvent> {
        self.events.subscribe()
    }

    /// The compactor of agent `name` (subscribe to it for compaction progress;
    /// usage events are on [`AgentRunner::usage`]'s broker).
    pub fn compactor(&self, name: &str) -> Option<&Arc<Compactor>> {
        self.compactors.get(name)
    }

    fn emit(&self, event: LoopEvent) {
        self.events.publish(EventKind::Created, event);
    }

    /// Repairs what a dead process left unfinished in `session_id` (see
    /// [`crate::recovery`]); a session a loop of this process or another live
    /// process (per its run lease) is answering is left alone.
    pub fn recover_session(&self, session_id: &str) -> Result<RecoveryReport, LoopError> {
        recover_session_with(&self.messages, session_id, &self.lease)
    }

    /// Takes `session_id`'s run lease for this process (see [`crate::lease`]);
    /// another live process holding it refuses with [`LoopError::SessionBusy`].
    fn lease(&self, session_id: &str) -> Result<LeaseGuard, LoopError> {
        lease::acquire(self.sessions.database(), session_id, &self.lease).map_err(|e| match e {
            AcquireError::Busy(holder) => LoopError::SessionBusy {
                session_id: session_id.to_owned(),
                owner: holder.owner,
                pid: holder.pid,
                host: holder.host,
            },
            AcquireError::Db(e) => LoopError::Agent(e.into()),
        })
    }

    /// Persists `input` as a user message, then (unless `no_reply`) runs the loop.
    pub fn prompt(
        &self,
        input: PromptInput,
        cancel: &CancelToken,
    ) -> Result<RunOutcome, LoopError> {
        self.prompt_at_depth(input, cancel, 0)
    }

    pub(crate) fn prompt_at_depth(
        &self,
        input: PromptInput,
        cancel: &CancelToken,
        depth: usize,
    ) -> Result<RunOutcome, LoopError> {
        if input.parts.is_empty() {
            return Err(LoopError::EmptyPrompt);
        }
        let mut session = self.sessions.get(&input.session_id)?;
        if session.ended_at.is_some()
            && session.end_reason.as_deref() == Some(END_REASON_COMPRESSION)
        {
            // The conversation moved on when it was compacted into a continuation.
            session = self.sessions.continuation_tip(&session.id)?;
        }
        // Before recovery and the save: a session another live process is
        // answering is neither repaired nor prompted.
        let _lease = self.lease(&session.id)?;
        self.recover_session(&session.id)?;
        let (message, agent) = self.save_prompt(&input, &session)?;
        let model = message.model.clone().unwrap_or_default();
        let mut outcome = if input.no_reply {
            RunOutcome::empty(&session.id)
        } else {
            let (ids, stop) =
                self.run_subtasks(&session.id, &agent, &model, &message, cancel, depth)?;
            let mut outcome = match stop {
                Some(reason) => RunOutcome {
                    finish_reason: Some(reason),
                    ..RunOutcome::empty(&session.id)
                },
                None => self.run_loop(&session.id, &agent, &model, &message.id, cancel, depth)?,
            };
            outcome.assistant_message_ids.splice(0..0, ids);
            outcome
        };
        outcome.user_message_id = Some(message.id.clone());
        let first_exchange = session.message_count == 0
            && session.title.is_none()
            && session.kind == SessionKind::Normal;
        if self.titles && depth == 0 && first_exchange && !input.no_reply {
            let generator = TitleGenerator {
                sessions: self.sessions.clone(),
                messages: self.messages.clone(),
                provider: self.provider.clone(),
                usage: self.usage.clone(),
            };
            outcome.title = Some(generator.spawn(session.id.clone(), model, message.text()));
        }
        Ok(outcome)
    }

    /// Ingestion: chooses agent and model, resolves files, runs hooks, saves the
    /// message and its parts in one transaction, then stores the tool switches
    /// as permission rules. Returns the message and the agent that answers.
    fn save_prompt(
        &self,
        input: &PromptInput,
        session: &Session,
    ) -> Result<(Message, AgentConfig), LoopError> {
        let mentioned = input.parts.iter().find_map(|p| match p {
            PartDraft::Agent { name } => Some(name.clone()),
            _ => None,
        });
        let agent_name = input
            .agent
            .clone()
            .or(mentioned)
            .unwrap_or_else(|| self.agents.default_name().to_owned());
        let agent = self.agent(&agent_name)?;
        let model = self.choose_model(input, &agent, session)?;
        // Read the stored rules first: a session whose rules are unreadable is
        // refused before anything is saved.
        let mut rules = parse_rules(session)?;

        let base = session
            .directory
            .as_ref()
            .map_or_else(|| self.project_root.clone(), PathBuf::from);
        let roots = canonical_roots(
            std::iter::once(base.as_path())
                .chain(self.ingest.extra_roots.iter().map(PathBuf::as_path)),
        );
        let mut read_failures = Vec::new();
        let parts = resolve_parts(
            &input.parts,
            &base,
            &roots,
            &self.ingest,
            &session.id,
            &mut read_failures,
        )?;
        let mut draft = UserMessageDraft {
            session_id: session.id.clone(),
            agent: agent.name.clone(),
            model,
            parts,
        };
        for (index, hook) in self.hooks.iter().enumerate() {
            hook(&mut draft).map_err(|source| LoopError::Hook { index, source })?;
        }
        let agent = if draft.agent == agent.name {
            agent
        } else {
            self.agent(&draft.agent)?
        };
        if !self.catalog.contains(&draft.model) {
            return Err(LoopError::UnknownModel(draft.model));
        }
        let switches = input.tools.clone().unwrap_or_default();
        let permission = if switches.is_empty() {
            None
        } else {
            rules.merge(&Ruleset::from_switches(&switches));
            Some(rules.to_json().to_string())
        };
        let settings_change =
            permission.is_some() || session.model.as_deref() != Some(draft.model.as_str());
        let message = user_message(&session.id, &draft.agent, &draft.model, draft.parts);
        // The message, its parts and the session settings the prompt implies
        // commit together: a crash cannot keep the prompt but lose the tool
        // switches the user gave with it. The message insert touches the
        // session (trigger).
        write_tx(self.sessions.database(), |tx| {
            store::insert_message(tx, &message)?;
            if settings_change {
                queries::set_session_prompt_settings(
                    tx,
                    &queries::SetSessionPromptSettingsParams {
                        model: Some(&draft.model),
                        permission: permission.as_deref(),
                        now: now_ms(),
                        id: &session.id,
                    },
                )?;
            }
            Ok(())
        })?;
        self.messages.messages().publish_created(message.clone());
        // Only now: a refused or failed save must not report reads of a
        // message that does not exist.
        for failure in read_failures {
            self.emit(failure);
        }
        if settings_change {
            self.sessions.notify_changed(&session.id)?;
        }
        self.emit(LoopEvent::PromptSaved {
            session_id: session.id.clone(),
            message_id: message.id.clone(),
        });
        Ok((message, agent))
    }

    fn agent(&self, name: &str) -> Result<AgentConfig, LoopError> {
        self.agents
            .get(name)
            .cloned()
            .ok_or_else(|| LoopError::UnknownAgent(name.to_owned()))
    }

    /// The input's model, else the agent's, else the session's last.
    fn choose_model(
        &self,
        input: &PromptInput,
        agent: &AgentConfig,
        session: &Session,
    ) -> Result<String, LoopError> {
        if let Some(model) = input.model.clone().or_else(|| agent.model.clone()) {
            return Ok(model);
        }
        if let Some(model) = &session.model {
            return Ok(model.clone());
        }
        let last = self
            .messages
            .database()
            .read(|conn| Ok(queries::get_last_assistant_model(conn, &session.id).optional()?))
            .map_err(MessageError::Db)?;
        last.ok_or_else(|| LoopError::NoModel {
            session_id: session.id.clone(),
        })
    }

    /// Runs the loop on `session_id` from its current history (e.g. after a
    /// `no_reply` prompt), with `agent` (default: the runner's default) and the
    /// session's model.
    pub fn run(
        &self,
        session_id: &str,
        agent: Option<&str>,
        cancel: &CancelToken,
    ) -> Result<RunOutcome, LoopError> {
        let session = self.sessions.get(session_id)?;
        let _lease = self.lease(session_id)?;
        self.recover_session(session_id)?;
        let agent = self.agent(agent.unwrap_or(self.agents.default_name()))?;
        let input = PromptInput {
            session_id: session_id.to_owned(),
            ..PromptInput::default()
        };
        let model = self.choose_model(&input, &agent, &session)?;
        let parent = self
            .messages
            .list(session_id)?
            .into_iter()
            .rev()
            .find(|m| m.role == Role::User)
            .map(|m| m.id)
            .unwrap_or_default();
        self.run_loop(session_id, &agent, &model, &parent, cancel, 0)
    }

    fn run_loop(
        &self,
        session_id: &str,
        agent: &AgentConfig,
        model: &str,
        user_message_id: &str,
        cancel: &CancelToken,
        depth: usize,
    ) -> Result<RunOutcome, LoopError> {
        let compactor = match self.compactors.get(&agent.name) {
            Some(compactor) => compactor.clone(),
            None => Arc::new(
                Compactor::new(
                    self.sessions.clone(),
                    self.messages.clone(),
                    self.provider.clone(),
                    self.catalog.clone(),
                    agent.compaction.clone(),
                )
                .with_estimator(self.estimator.clone()),
            ),
        };
        let mut outcome = RunOutcome::empty(session_id);
        let mut overflow_retried = false;
        // The lease of the continuation the loop moved into, if it did.
        let mut _moved_lease: Option<LeaseGuard> = None;
        loop {
            if cancel.is_canceled() {
                outcome.finish_reason = Some(FinishReason::Canceled);
                break;
            }
            outcome.steps += 1;
            let current = outcome.session_id.clone();
            let stepped = self.step(
                &current,
                agent,
                model,
                user_message_id,
                &compactor,
                cancel,
                depth,
                &mut outcome,
            );
            let compacted = match stepped {
                // The provider counts differently than our estimate: compact now
                // and retry once (the failed step stays recorded with its error).
                Err(LoopError::Provider {
                    source: ProviderError::ContextOverflow { .. },
                    ..
                }) if !overflow_retried => {
                    overflow_retried = true;
                    compact_on_its_thread(&compactor, &current, model)?
                }
                Err(other) => return Err(other),
                Ok(reason) => {
                    outcome.finish_reason = Some(reason.clone());
                    if reason != FinishReason::ToolUse {
                        break;
                    }
                    match compactor.check(&current, model)? {
                        None => CompactionOutcome::NotNeeded {
                            session_id: current.clone(),
                            tokens: 0,
                        },
                        Some(_) => compact_on_its_thread(&compactor, &current, model)?,
                    }
                }
            };
            if !matches!(compacted, CompactionOutcome::NotNeeded { .. }) {
                let next = compacted.session_id().to_owned();
                self.emit(LoopEvent::Compacted {
                    session_id: current.clone(),
                    continued_in: (next != current).then(|| next.clone()),
                });
                if next != current {
                    _moved_lease = Some(self.lease(&next)?);
                }
                outcome.session_id = next;
            }
        }
        if let Some(last) = outcome.assistant_message_ids.last() {
            outcome.text = self.messages.get(last)?.text();
        }
        self.emit(LoopEvent::Finished {
            session_id: outcome.session_id.clone(),
            message_id: outcome.assistant_message_ids.last().cloned(),
            reason: outcome
                .finish_reason
                .clone()
                .unwrap_or(FinishReason::Canceled),
        });
        Ok(outcome)
    }

    /// One model call and its tool calls; returns the step message's finish reason.
    #[allow(clippy::too_many_arguments)]
    fn step(
        &self,
        session_id: &str,
        agent: &AgentConfig,
        model: &str,
        user_message_id: &str,
        compactor: &Compactor,
        cancel: &CancelToken,
        depth: usize,
        outcome: &mut RunOutcome,
    ) -> Result<FinishReason, LoopError> {
        // Before the message exists, so recovery in this process never takes
        // it for a dead process's leftover (see `crate::recovery`).
        let _running = mark_running(session_id);
        // Renews the heartbeat (the turn already holds the lease).
        let _lease = self.lease(session_id)?;
        let session = self.sessions.get(session_id)?;
        let rules = agent.permission.then(&parse_rules(&session)?);
        let context = compactor.request_context(session_id, model)?;
        let request = ChatRequest {
            model: model.to_owned(),
            system: agent
                .system_prompt
                .clone()
                .or_else(|| context.context.system_prompt.clone()),
            messages: context.messages,
            tools: self.tool_specs(agent, &rules, depth),
        };
        let message = self.messages.create(NewMessage {
            agent: Some(agent.name.clone()),
            provider: Some(self.provider.name().to_owned()),
            model: Some(model.to_owned()),
            parent_id: (!user_message_id.is_empty()).then(|| user_message_id.to_owned()),
            ..NewMessage::new(
                session_id,
                Role::Assistant,
                vec![Part::StepStart(StepStartPart::default())],
            )
        })?;
        outcome.assistant_message_ids.push(message.id.clone());
        self.emit(LoopEvent::StepStarted {
            session_id: session_id.to_owned(),
            message_id: message.id.clone(),
            step: outcome.steps,
        });

        let mut streamer = Streamer::new(&self.messages, &message.id, self.flush_interval);
        let sent = self
            .provider
            .send(&request, &mut |event| streamer.push(event));
        let response = match sent {
            Ok(response) => response,
            Err(source) => {
                let tool_parts = streamer.finish_lenient();
                let canceled = cancel.is_canceled() || matches!(source, ProviderError::Canceled);
                let why = if canceled {
                    "canceled"
                } else {
                    "not run: the model call failed"
                };
                for (part_id, part) in tool_parts {
                    self.fail_part(&part_id, part, why)?;
                }
                if canceled {
                    self.messages.finish(&message.id, FinishReason::Canceled)?;
                    return Ok(FinishReason::Canceled);
                }
                self.record_error(
                    &message.id,
                    json!({"type": "provider", "message": error_chain(&source)}),
                )?;
                self.emit(LoopEvent::Error {
                    session_id: session_id.to_owned(),
                    message: error_chain(&source),
                });
                return Err(LoopError::Provider {
                    session_id: session_id.to_owned(),
                    source,
                });
            }
        };
        // What streamed stands; the response fills in what did not (a provider
        // may answer without streaming), see `stream::reconcile`.
        let tool_parts = match streamer
            .finish()
            .map_err(LoopError::from)
            .and_then(|streamed| {
                stream::reconcile(&self.messages, &message.id, streamed, &response)
                    .map_err(LoopError::from)
            }) {
            Ok(parts) => parts,
            Err(e) => {
                // Best effort: the store just failed, so this may fail too, and
                // recovery will finish the message on the next open.
                let _ = self.record_error(
                    &message.id,
                    json!({"type": "storage", "message": error_chain(&e)}),
                );
                return Err(e);
            }
        };
        // The charge and the step_finish part that reports it commit together.
        let (_, finish_part) = self.usage.track_usage_with(
            session_id,
            model,
            &response.usage,
            Some(&message.id),
            |tx, cost| {
                let part = Part::StepFinish(StepFinishPart {
                    reason: response.finish_reason.clone(),
                    tokens: response.usage,
                    cost,
                    extra: Default::default(),
                });
                Ok(MessageService::append_part_tx(tx, &message.id, &part)?)
            },
        )?;
        self.messages.parts().publish_created(finish_part);

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
            if cancel.is_canceled() {
                self.fail_part(&part_id, part, "canceled")?;
                stop = Some(FinishReason::Canceled);
                continue;
            }
            match self.run_tool(
                session_id,
                &message.id,
                &part_id,
                part,
                agent,
                &rules,
                cancel,
                depth,
            )? {
                ToolRun::Done => {}
                ToolRun::Denied => stop = Some(FinishReason::PermissionDenied),
                ToolRun::Canceled => stop = Some(FinishReason::Canceled),
            }
        }
        let reason = match stop {
            Some(reason) => reason,
            None if cancel.is_canceled() => FinishReason::Canceled,
            None if called_tools && outcome.steps >= agent.max_steps => {
                FinishReason::Unknown(MAX_STEPS.to_owned())
            }
            None if called_tools => FinishReason::ToolUse,
            // A model that says tool_use without calling one has nothing left to do.
            None if response.finish_reason == FinishReason::ToolUse => FinishReason::EndTurn,
            None => response.finish_reason.clone(),
        };
        self.messages.finish(&message.id, reason.clone())?;
        Ok(reason)
    }

    /// Runs the subtask parts of a user message as `task` calls, each in an
    /// assistant message of its own, before the model is asked (the model then
    /// sees their results). Returns those messages and, if one stopped the
    /// prompt (denied, canceled), why.
    fn run_subtasks(
        &self,
        session_id: &str,
        agent: &AgentConfig,
        model: &str,
        user: &Message,
        cancel: &CancelToken,
        depth: usize,
    ) -> Result<(Vec<String>, Option<FinishReason>), LoopError> {
        let mut ids = Vec::new();
        for stored in &user.parts {
            let Part::Subtask(sub) = &stored.part else {
                continue;
            };
            if cancel.is_canceled() {
                return Ok((ids, Some(FinishReason::Canceled)));
            }
            let _running = mark_running(session_id);
            let session = self.sessions.get(session_id)?;
            let rules = agent.permission.then(&parse_rules(&session)?);
            let message = self.messages.create(NewMessage {
                agent: Some(agent.name.clone()),
                provider: Some(self.provider.name().to_owned()),
                model: Some(model.to_owned()),
                parent_id: Some(user.id.clone()),
                ..NewMessage::new(
                    session_id,
                    Role::Assistant,
                    vec![Part::StepStart(StepStartPart::default())],
                )
            })?;
            ids.push(message.id.clone());
            // The call id names the child session, so it must be a fresh session id.
            let call_id = new_id(Prefix::Session);
            let input =
                json!({"description": sub.description, "prompt": sub.prompt, "agent": sub.agent});
            let stored_call = self
                .messages
                .append_part(&message.id, Part::tool(call_id, TASK_TOOL, input))?;
            let Part::Tool(call) = stored_call.part else {
                continue;
            };
            let run = self.run_tool(
                session_id,
                &message.id,
                &stored_call.id,
                call,
                agent,
                &rules,
                cancel,
                depth,
            )?;
            let reason = match run {
                ToolRun::Done => FinishReason::ToolUse,
                ToolRun::Denied => FinishReason::PermissionDenied,
                ToolRun::Canceled => FinishReason::Canceled,
            };
            self.messages.finish(&message.id, reason.clone())?;
            if reason != FinishReason::ToolUse {
                return Ok((ids, Some(reason)));
            }
        }
        Ok((ids, None))
    }

    /// The specs the agent may call, minus tools the rules disable outright.
    fn tool_specs(&self, agent: &AgentConfig, rules: &Ruleset, depth: usize) -> Vec<ToolSpec> {
        let mut specs = self
            .tools
            .specs(|name| agent.allows(name) && !rules.is_disabled(name) && name != TASK_TOOL);
        if self.task_enabled(agent, depth) && !rules.is_disabled(TASK_TOOL) {
            specs.push(self.task_spec(agent));
        }
        specs
    }

    /// Checks and runs one tool call, recording every state it passes through.
    #[allow(clippy::too_many_arguments)]
    fn run_tool(
        &self,
        session_id: &str,
        message_id: &str,
        part_id: &str,
        mut part: ToolPart,
        agent: &AgentConfig,
        rules: &Ruleset,
        cancel: &CancelToken,
        depth: usize,
    ) -> Result<ToolRun, LoopError> {
        let is_task = part.tool == TASK_TOOL && self.task_enabled(agent, depth);
        let tool: Option<&Arc<dyn Tool>> = if is_task {
            None
        } else {
            match self.tools.get(&part.tool) {
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
            cancel: cancel.clone(),
            project_root: self.project_root.clone(),
            files: Some(self.sessions.clone()),
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
                match (self.approver)(&request) {
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
        if cancel.is_canceled() {
            self.fail_part(part_id, part, "canceled")?;
            return Ok(ToolRun::Canceled);
        }
        part.state
            .start(now_ms())
            .map_err(|source| MessageError::IllegalToolTransition {
                part_id: part_id.to_owned(),
                source,
            })?;
        self.messages
            .update_part(part_id, Part::Tool(part.clone()))?;

        let result: Result<ToolOutput, ToolError> = match tool {
            Some(tool) => catch_unwind(AssertUnwindSafe(|| tool.run(&part.input, &ctx)))
                .unwrap_or_else(|_| Err(ToolError::Failed("the tool panicked".to_owned()))),
            None => self.run_task(session_id, &part, cancel, depth),
        };
        let now = now_ms();
        let run = match result {
            Ok(out) => {
                part.state
                    .complete(out.output, out.title, out.metadata, now)
                    .map_err(|source| MessageError::IllegalToolTransition {
                        part_id: part_id.to_owned(),
                        source,
                    })?;
                self.messages.update_part(part_id, Part::Tool(part))?;
                ToolRun::Done
            }
            Err(error) => {
                let canceled = matches!(error, ToolError::Canceled) || cancel.is_canceled();
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
        if cancel.is_canceled() {
            return Ok(ToolRun::Canceled);
        }
        Ok(run)
    }

    /// Moves a pending or running tool part to `error` with `why`.
    fn fail_part(&self, part_id: &str, mut part: ToolPart, why: &str) -> Result<(), LoopError> {
        if part.state.fail(why, now_ms()).is_ok() {
            self.messages.update_part(part_id, Part::Tool(part))?;
        }
        Ok(())
    }

    /// Finishes `message_id` with `error`, recording `error`.
    fn record_error(&self, message_id: &str, error: Value) -> Result<(), LoopError> {
        self.messages.update(
            message_id,
            scribe_message::MessageUpdate {
                error: Some(Some(error)),
                ..Default::default()
            },
        )?;
        self.messages.finish(message_id, FinishReason::Error)?;
        Ok(())
    }
}

/// Compacts `session_id` on the compactor's own thread
/// ([`Compactor::spawn_compact`]: the work and its progress events happen
/// there, as the compaction design asks) and waits for it: the next request
/// must not be built before the compaction is done.
fn compact_on_its_thread(
    compactor: &Arc<Compactor>,
    session_id: &str,
    model: &str,
) -> Result<CompactionOutcome, LoopError> {
    let handle = compactor.spawn_compact(session_id.to_owned(), model.to_owned());
    match handle.join() {
        Ok(outcome) => Ok(outcome?),
        Err(_) => Err(LoopError::CompactionPanicked {
            session_id: session_id.to_owned(),
        }),
    }
}

/// A complete user message, as `MessageService::create` would build it: ended
/// when written, with a finish part.
fn user_message(session_id: &str, agent: &str, model: &str, parts: Vec<Part>) -> Message {
    let mut new = NewMessage::new(session_id, Role::User, parts);
    new.agent = Some(agent.to_owned());
    new.model = Some(model.to_owned());
    new.into_message(now_ms())
}

fn parse_rules(session: &Session) -> Result<Ruleset, LoopError> {
    Ruleset::from_json(session.permission.as_ref()).map_err(|source| LoopError::Permission {
        session_id: session.id.clone(),
        source,
    })
}

/// An error and its sources, joined by `": "` — what a model or a log should read.
pub fn error_chain(error: &dyn std::error::Error) -> String {
    let mut text = error.to_string();
    let mut source = error.source();
    while let Some(cause) = source {
        let more = cause.to_string();
        if !text.contains(&more) {
            text.push_str(": ");
            text.push_str(&more);
        }
        source = cause.source();
    }
    text
}

#[cfg(test)]
mod tests {
    #[test]
    fn runner_is_send_and_sync() {
        fn is<T: Send + Sync>() {}
        is::<super::AgentRunner>();
    }
}
