//! The agent loop: [`AgentRunner`] takes a [`PromptInput`], persists it (see
//! [`crate::ingest`]), then runs model calls and tool calls until the model
//! ends its turn, the agent's step limit is hit, a permission is denied, or
//! the [`CancelToken`] is canceled.
//!
//! Ingestion saves the user message, its parts and the session settings the
//! prompt implies (its model, its tool switches as permission rules) in one
//! transaction, before any model runs; opening a session first takes its run
//! lease ([`crate::lease`]: a session another live process is answering is
//! refused with [`AgentError::SessionBusy`]) and repairs what a dead process
//! left unfinished ([`crate::recovery`]), and prompting a session
//! that compaction closed continues in its continuation. Subtask parts of the
//! prompt run as `task` calls before the model is asked.
//!
//! Every step is recorded as it happens, so a crash or a restart can be
//! understood and resumed (`run/turn.rs`):
//!
//! 1. the request is built from the session's context (what is sent with its
//!    latest summary, fitted to the window) and the tools the agent may use;
//! 2. an assistant message is saved (with a `step_start` part) **before** the
//!    provider is called; the reply streams into it through a
//!    [`ReplyWriter`](crate::ReplyWriter): streamed text grows one text part, each
//!    tool call is saved as a `pending` tool part as it arrives;
//! 3. the step's end is one transaction
//!    ([`ReplyWriter::finish_charged`](crate::ReplyWriter::finish_charged)): what
//!    streamed is squared with the response, a `step_finish` part is added and the
//!    call's usage and cost are charged to the message and its session; a failure
//!    leaves none of it and ends the message with the error recorded;
//! 4. each tool call is checked (known tool, input matches its schema,
//!    permission rules / approver) and run: `pending → running → completed |
//!    error`; a schema mismatch or a tool failure is an error part the model
//!    reads, not a crash;
//! 5. the message is finished with its reason: `tool_use` (the loop goes on),
//!    `end_turn`, `max_tokens`, `max_steps`, `permission_denied`, `canceled`
//!    or `error`;
//! 6. before every request (the first of a prompt too), compaction runs if the
//!    context calls for it — on the compactor's own thread
//!    ([`Compactor::spawn_compact`]), which the loop joins before building the
//!    request; a continuation moves the loop into the new session. The context is
//!    loaded once per step: the load that decides whether to compact is the one
//!    the request is built from (a compaction reloads it). A provider that reports
//!    a context overflow gets one compaction (with a summary:
//!    [`Compactor::compact_after_overflow`]) and one retry.
//!
//! Cancellation is checked before each model call and each tool call; a
//! running tool sees it through its [`ToolContext::cancel`](crate::ToolContext).
//! Unfinished tool parts of a canceled step become `error: canceled`.
//!
//! The `task` tool (`run/task.rs`) runs a sub-agent's own loop on the same runner.

mod task;
mod turn;

use std::collections::BTreeMap;
use std::fmt;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use scribe_message::{FinishReason, MessageService, store};
use scribe_pubsub::{Broker, Subscription};
use scribe_session::{SessionKind, SessionService, Store};

pub use task::TASK_TOOL;

use crate::agents::AgentRegistry;
use crate::cancel::CancelToken;
use crate::compaction::runner::END_REASON_COMPRESSION;
use crate::compaction::{CompactionOutcome, Compactor};
use crate::context::RequestFrame;
use crate::error::AgentError;
use crate::estimate::{HeuristicEstimator, TokenEstimator};
use crate::events::{LoopEvent, emit};
use crate::ingest::{
    Hook, HookError, IngestConfig, Ingestion, PromptInput, UserMessageDraft, choose_model,
};
use crate::lease::{self, AcquireError, LeaseConfig, LeaseGuard};
use crate::models::ModelCatalog;
use crate::permission::{Approver, Decision, PermissionRequest};
use crate::provider::{Provider, ProviderError};
use crate::recovery::{RecoveryReport, recover_session_with};
use crate::reply::DEFAULT_FLUSH_INTERVAL;
use crate::title::{TitleGenerator, TitleHandle};
use crate::tools::ToolRegistry;
use crate::usage::UsageTracker;

use turn::Turn;

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
/// the same runner). Build one with [`AgentRunner::builder`].
///
/// ```
/// use std::sync::Arc;
/// use scribe_agent::{AgentRunner, CancelToken, ModelCatalog, PromptInput, ScriptedProvider, ScriptedTurn};
/// use scribe_session::{NewSession, Store};
///
/// let store = Store::open_in_memory()?;
/// let catalog = ModelCatalog::builtin();
/// let model = catalog.iter().next().expect("a built-in model").id.clone();
/// let provider = Arc::new(ScriptedProvider::new([ScriptedTurn::reply().text("Hi! How can I help?")]));
/// let runner = AgentRunner::builder(store.clone(), provider)
///     .with_catalog(Arc::new(catalog))
///     .build();
///
/// let session = store.sessions().create(NewSession { model: Some(model), ..NewSession::default() })?;
/// let outcome = runner.prompt(PromptInput::text(&session.id, "hello"), &CancelToken::new())?;
/// assert_eq!(outcome.text, "Hi! How can I help?");
/// assert_eq!(store.messages().list(&session.id)?.len(), 2);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub struct AgentRunner {
    store: Store,
    provider: Arc<dyn Provider>,
    settings: Settings,
    usage: Arc<UsageTracker>,
    events: Arc<Broker<LoopEvent>>,
    compactors: BTreeMap<String, Arc<Compactor>>,
}

/// What an [`AgentRunnerBuilder`] sets and the [`AgentRunner`] it builds keeps.
struct Settings {
    catalog: Arc<ModelCatalog>,
    tools: ToolRegistry,
    agents: AgentRegistry,
    estimator: Arc<dyn TokenEstimator>,
    approver: Arc<Approver>,
    hooks: Vec<Arc<Hook>>,
    ingest: IngestConfig,
    project_root: PathBuf,
    titles: bool,
    flush_interval: Duration,
    max_task_depth: usize,
    lease: LeaseConfig,
}

impl fmt::Debug for Settings {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Settings")
            .field("tools", &self.tools)
            .field("agents", &self.agents)
            .field("hooks", &self.hooks.len())
            .field("project_root", &self.project_root)
            .field("titles", &self.titles)
            .finish_non_exhaustive()
    }
}

impl fmt::Debug for AgentRunner {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("AgentRunner")
            .field("provider", &self.provider.name())
            .field("settings", &self.settings)
            .finish_non_exhaustive()
    }
}

/// Builds an [`AgentRunner`]: [`AgentRunner::builder`], the `with_*` settings, then
/// [`build`](AgentRunnerBuilder::build).
pub struct AgentRunnerBuilder {
    store: Store,
    provider: Arc<dyn Provider>,
    settings: Settings,
}

impl fmt::Debug for AgentRunnerBuilder {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("AgentRunnerBuilder")
            .field("provider", &self.provider.name())
            .field("settings", &self.settings)
            .finish_non_exhaustive()
    }
}

impl AgentRunnerBuilder {
    /// Prices and sizes models from `catalog` (default: [`ModelCatalog::builtin`]).
    pub fn with_catalog(mut self, catalog: Arc<ModelCatalog>) -> Self {
        self.settings.catalog = catalog;
        self
    }

    /// Uses `root` as the directory of sessions that have none, and confines the
    /// file tools to it (default: the current directory).
    pub fn with_project_root(mut self, root: impl Into<PathBuf>) -> Self {
        self.settings.project_root = root.into();
        self
    }

    /// Offers these tools (default: none).
    pub fn with_tools(mut self, tools: ToolRegistry) -> Self {
        self.settings.tools = tools;
        self
    }

    /// Uses these agents (default: one agent, `build`).
    pub fn with_agents(mut self, agents: AgentRegistry) -> Self {
        self.settings.agents = agents;
        self
    }

    /// Sends `ask` decisions to `approver` (default: deny every `ask`).
    pub fn with_approver(
        mut self,
        approver: impl Fn(&PermissionRequest) -> Decision + Send + Sync + 'static,
    ) -> Self {
        self.settings.approver = Arc::new(approver);
        self
    }

    /// Adds a hook run on every user message before it is saved.
    pub fn with_hook(
        mut self,
        hook: impl Fn(&mut UserMessageDraft) -> Result<(), HookError> + Send + Sync + 'static,
    ) -> Self {
        self.settings.hooks.push(Arc::new(hook));
        self
    }

    /// Sets attachment limits and extra roots.
    pub fn with_ingest_config(mut self, ingest: IngestConfig) -> Self {
        self.settings.ingest = ingest;
        self
    }

    /// Measures unreported content with `estimator` (default: [`HeuristicEstimator`]).
    pub fn with_estimator(mut self, estimator: Arc<dyn TokenEstimator>) -> Self {
        self.settings.estimator = estimator;
        self
    }

    /// Generates a title after a session's first exchange (off by default).
    pub fn with_title_generation(mut self, on: bool) -> Self {
        self.settings.titles = on;
        self
    }

    /// Writes a growing text part at most this often (default 50 ms).
    pub fn with_flush_interval(mut self, interval: Duration) -> Self {
        self.settings.flush_interval = interval;
        self
    }

    /// Limits how deep sub-agents may nest (default 3).
    pub fn with_max_task_depth(mut self, depth: usize) -> Self {
        self.settings.max_task_depth = depth;
        self
    }

    /// Judges other processes' run leases with `config` (see [`crate::lease`]).
    pub fn with_lease_config(mut self, config: LeaseConfig) -> Self {
        self.settings.lease = config;
        self
    }

    /// The runner, with one compactor per agent (its compaction settings).
    pub fn build(self) -> AgentRunner {
        let settings = self.settings;
        let usage = UsageTracker::new(self.store.clone(), settings.catalog.clone());
        let compactors = settings
            .agents
            .iter()
            .map(|agent| {
                let compactor = Compactor::new(
                    self.store.clone(),
                    self.provider.clone(),
                    settings.catalog.clone(),
                    agent.compaction.clone(),
                )
                .with_estimator(settings.estimator.clone());
                (agent.name.clone(), Arc::new(compactor))
            })
            .collect();
        AgentRunner {
            store: self.store,
            provider: self.provider,
            settings,
            usage: Arc::new(usage),
            events: Arc::new(Broker::new()),
            compactors,
        }
    }
}

impl AgentRunner {
    /// A builder of a runner over `store` calling `provider`: no tools, the default
    /// agent (`build`), an approver that denies every `ask`, titles off, the built-in
    /// model catalog, and the current directory as the project root.
    pub fn builder(store: Store, provider: Arc<dyn Provider>) -> AgentRunnerBuilder {
        let settings = Settings {
            catalog: Arc::new(ModelCatalog::builtin()),
            tools: ToolRegistry::new(),
            agents: AgentRegistry::default(),
            estimator: Arc::new(HeuristicEstimator),
            approver: Arc::new(|_: &PermissionRequest| {
                Decision::Deny(Some("no approver is configured".to_owned()))
            }),
            hooks: Vec::new(),
            ingest: IngestConfig::default(),
            project_root: std::env::current_dir().unwrap_or_default(),
            titles: false,
            flush_interval: DEFAULT_FLUSH_INTERVAL,
            max_task_depth: 3,
            lease: LeaseConfig::default(),
        };
        AgentRunnerBuilder {
            store,
            provider,
            settings,
        }
    }

    /// The store it works on.
    pub fn store(&self) -> &Store {
        &self.store
    }

    /// The session service.
    pub fn sessions(&self) -> &Arc<SessionService> {
        self.store.sessions()
    }

    /// The message service.
    pub fn messages(&self) -> &Arc<MessageService> {
        self.store.messages()
    }

    /// The usage tracker.
    pub fn usage(&self) -> &Arc<UsageTracker> {
        &self.usage
    }

    /// How deep sub-agents may nest.
    pub fn max_task_depth(&self) -> usize {
        self.settings.max_task_depth
    }

    /// The agents.
    pub fn agents(&self) -> &AgentRegistry {
        &self.settings.agents
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
        emit(&self.events, event);
    }

    /// Repairs what a dead process left unfinished in `session_id` (see
    /// [`crate::recovery`]); a session a loop of this process or another live
    /// process (per its run lease) is answering is left alone.
    pub fn recover_session(&self, session_id: &str) -> Result<RecoveryReport, AgentError> {
        recover_session_with(&self.store, session_id, &self.settings.lease)
    }

    /// Takes `session_id`'s run lease for this process (see [`crate::lease`]);
    /// another live process holding it refuses with [`AgentError::SessionBusy`].
    fn lease(&self, session_id: &str) -> Result<LeaseGuard, AgentError> {
        lease::acquire(self.store.database(), session_id, &self.settings.lease).map_err(|e| match e
        {
            AcquireError::Busy(holder) => AgentError::SessionBusy {
                session_id: session_id.to_owned(),
                owner: holder.owner,
                pid: holder.pid,
                host: holder.host,
            },
            AcquireError::Db(e) => AgentError::Db(e),
        })
    }

    /// Persists `input` as a user message, then (unless `no_reply`) runs the loop.
    pub fn prompt(
        &self,
        input: PromptInput,
        cancel: &CancelToken,
    ) -> Result<RunOutcome, AgentError> {
        self.prompt_at_depth(input, cancel, 0)
    }

    pub(crate) fn prompt_at_depth(
        &self,
        input: PromptInput,
        cancel: &CancelToken,
        depth: usize,
    ) -> Result<RunOutcome, AgentError> {
        if input.parts.is_empty() {
            return Err(AgentError::EmptyPrompt);
        }
        let sessions = self.store.sessions();
        let mut session = sessions.get(&input.session_id)?;
        if session.ended_at.is_some()
            && session.end_reason.as_deref() == Some(END_REASON_COMPRESSION)
        {
            // The conversation moved on when it was compacted into a continuation.
            session = sessions.continuation_tip(&session.id)?;
        }
        // Before recovery and the save: a session another live process is
        // answering is neither repaired nor prompted.
        let _lease = self.lease(&session.id)?;
        self.recover_session(&session.id)?;
        let (message, agent) = self.ingestion().save(&input, &session)?;
        let model = message.model.clone().unwrap_or_default();
        let turn = Turn {
            agent: &agent,
            model: &model,
            user_message_id: &message.id,
            cancel,
            depth,
        };
        let mut outcome = if input.no_reply {
            RunOutcome::empty(&session.id)
        } else {
            let (ids, stop) = self.run_subtasks(&turn, &session.id, &message)?;
            let mut outcome = match stop {
                Some(reason) => RunOutcome {
                    finish_reason: Some(reason),
                    ..RunOutcome::empty(&session.id)
                },
                None => self.run_loop(&turn, &session.id)?,
            };
            outcome.assistant_message_ids.splice(0..0, ids);
            outcome
        };
        outcome.user_message_id = Some(message.id.clone());
        let first_exchange = session.message_count == 0
            && session.title.is_none()
            && session.kind == SessionKind::Normal;
        if self.settings.titles && depth == 0 && first_exchange && !input.no_reply {
            let generator = TitleGenerator {
                store: self.store.clone(),
                provider: self.provider.clone(),
                usage: self.usage.clone(),
            };
            outcome.title = Some(generator.spawn(session.id.clone(), model, message.text()));
        }
        Ok(outcome)
    }

    /// What saving a prompt needs of this runner.
    fn ingestion(&self) -> Ingestion<'_> {
        Ingestion {
            store: &self.store,
            agents: &self.settings.agents,
            catalog: &self.settings.catalog,
            hooks: &self.settings.hooks,
            config: &self.settings.ingest,
            project_root: &self.settings.project_root,
            events: &self.events,
        }
    }

    /// Runs the loop on `session_id` from its current history (e.g. after a
    /// `no_reply` prompt), with `agent` (default: the runner's default) and the
    /// session's model.
    pub fn run(
        &self,
        session_id: &str,
        agent: Option<&str>,
        cancel: &CancelToken,
    ) -> Result<RunOutcome, AgentError> {
        let session = self.store.sessions().get(session_id)?;
        let _lease = self.lease(session_id)?;
        self.recover_session(session_id)?;
        let agent = self
            .settings
            .agents
            .agent(agent.unwrap_or(self.settings.agents.default_name()))?;
        let input = PromptInput {
            session_id: session_id.to_owned(),
            ..PromptInput::default()
        };
        let model = choose_model(&self.store, &input, &agent, &session)?;
        // One indexed query, however long the history.
        let parent = self
            .store
            .database()
            .read(|tx| store::last_user_message_id(tx, session_id))?
            .unwrap_or_default();
        let turn = Turn {
            agent: &agent,
            model: &model,
            user_message_id: &parent,
            cancel,
            depth: 0,
        };
        self.run_loop(&turn, session_id)
    }

    /// Steps until the turn ends, compacting before a step when its context calls for
    /// it (see the module doc).
    fn run_loop(&self, turn: &Turn<'_>, session_id: &str) -> Result<RunOutcome, AgentError> {
        let compactor = match self.compactors.get(&turn.agent.name) {
            Some(compactor) => compactor.clone(),
            None => Arc::new(
                Compactor::new(
                    self.store.clone(),
                    self.provider.clone(),
                    self.settings.catalog.clone(),
                    turn.agent.compaction.clone(),
                )
                .with_estimator(self.settings.estimator.clone()),
            ),
        };
        let mut outcome = RunOutcome::empty(session_id);
        let mut overflow_retried = false;
        // The lease of the continuation the loop moved into, if it did.
        let mut moved_lease: Option<LeaseGuard> = None;
        loop {
            if turn.cancel.is_canceled() {
                outcome.finish_reason = Some(FinishReason::Canceled);
                break;
            }
            // One load of the context per step, measured with the frame the request
            // sends (system prompt and tools): it says whether to compact first and,
            // unless a compaction changed it, is what the request sends.
            let mut frame = self.step_frame(turn, &outcome.session_id)?;
            let mut context = compactor.context_with_frame(&outcome.session_id, &frame.frame)?;
            if compactor.trigger(&context, turn.model)?.is_some() {
                let current = outcome.session_id.clone();
                let compacted =
                    compact_on_its_thread(&compactor, &current, turn.model, &frame.frame, false)?;
                self.carry_on(&compacted, &mut outcome, &mut moved_lease)?;
                if outcome.session_id != current {
                    frame = self.step_frame(turn, &outcome.session_id)?;
                }
                context = compactor.context_with_frame(&outcome.session_id, &frame.frame)?;
            }
            outcome.steps += 1;
            let current = outcome.session_id.clone();
            let sent = frame.frame.clone();
            match self.step(turn, &current, &compactor, (context, frame), &mut outcome) {
                // The provider counts differently than our estimate: compact now
                // and retry once (the failed step stays recorded with its error).
                Err(AgentError::Provider {
                    source: ProviderError::ContextOverflow { .. },
                    ..
                }) if !overflow_retried => {
                    overflow_retried = true;
                    let compacted =
                        compact_on_its_thread(&compactor, &current, turn.model, &sent, true)?;
                    self.carry_on(&compacted, &mut outcome, &mut moved_lease)?;
                }
                Err(other) => return Err(other),
                Ok(reason) => {
                    outcome.finish_reason = Some(reason.clone());
                    if reason != FinishReason::ToolUse {
                        break;
                    }
                }
            }
        }
        if let Some(last) = outcome.assistant_message_ids.last() {
            outcome.text = self.store.messages().get(last)?.text();
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

    /// After a compaction: announces it and, when it moved the conversation into a
    /// continuation, takes that session's lease and carries on there.
    fn carry_on(
        &self,
        compacted: &CompactionOutcome,
        outcome: &mut RunOutcome,
        moved_lease: &mut Option<LeaseGuard>,
    ) -> Result<(), AgentError> {
        if matches!(compacted, CompactionOutcome::NotNeeded { .. }) {
            return Ok(());
        }
        let current = outcome.session_id.clone();
        let next = compacted.session_id().to_owned();
        self.emit(LoopEvent::Compacted {
            session_id: current.clone(),
            continued_in: (next != current).then(|| next.clone()),
            steps: compacted.steps().to_vec(),
        });
        if next != current {
            *moved_lease = Some(self.lease(&next)?);
        }
        outcome.session_id = next;
        Ok(())
    }
}

/// Compacts `session_id` on the compactor's own thread ([`Compactor::spawn_compact`]:
/// the work and its progress events happen there, as the compaction design asks) and
/// waits for it: the next request must not be built before the compaction is done.
/// `after_overflow`: the provider refused the last request as too long
/// ([`Compactor::compact_after_overflow`]).
fn compact_on_its_thread(
    compactor: &Arc<Compactor>,
    session_id: &str,
    model: &str,
    frame: &RequestFrame,
    after_overflow: bool,
) -> Result<CompactionOutcome, AgentError> {
    let handle = compactor.spawn(
        session_id.to_owned(),
        model.to_owned(),
        frame.clone(),
        after_overflow,
    );
    match handle.join() {
        Ok(outcome) => Ok(outcome?),
        Err(_) => Err(AgentError::CompactionPanicked {
            session_id: session_id.to_owned(),
        }),
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn runner_is_send_and_sync() {
        fn is<T: Send + Sync>() {}
        is::<super::AgentRunner>();
    }
}
