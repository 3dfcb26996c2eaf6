//! [`Compactor`]: runs auto-compaction against the session and message
//! services, on the caller's thread ([`Compactor::compact`]) or its own
//! ([`Compactor::spawn_compact`]), reporting progress as [`AgentEvent`]s.
//!
//! A run claims the session (`compacting_at`, taken atomically so two
//! compactors never run on one session; a mark older than
//! [`Compactor::with_stale_after`] is a crashed run and is taken over), then
//! applies the steps, cheapest first, stopping as soon as the next request fits
//! ([`CompactionConfig::max_context_tokens`]):
//!
//! 1. **prune**: old tool outputs are marked compacted (stored, searchable,
//!    exportable; sent as the marker, and no longer even loaded for a request),
//!    sparing the newest of them ([`CompactionConfig::prune_protect_for`]) and the
//!    last `protect_user_turns` turns; every mark of a run commits in one
//!    transaction, and the part events follow the commit. A prune clears at least
//!    [`CompactionConfig::prune_minimum_for`] tokens or nothing: clearing an output
//!    changes the prompt from there on, so a provider's prompt cache is written
//!    again, which only a large step pays for (a prune a summary follows anyway, after
//!    the provider refused a request, has no minimum). With
//!    [`CompactionConfig::prune_early`] it runs as soon as that much can be cleared
//!    ([`TriggerReason::PruneDue`], before the window fills), so requests carry the
//!    protected outputs and the words rather than a nearly full window. If the
//!    request then fits with at least the minimum to spare, no model is called: the
//!    marks are stored, so every later request starts from them; for the strategies
//!    that restart from a summary, a prune of a full window that leaves less room than
//!    that is followed by the summary (else the next turns would fill the window again
//!    at once). Keep-words' summary keeps the words, so it frees little more than a
//!    prune: on a full window it prunes whatever it can, without the minimum;
//! 2. **summarize**: the conversation as sent goes to the summarising model
//!    with [`SUMMARY_PROMPT`](super::SUMMARY_PROMPT) and no tools; the answer is
//!    stored as an assistant message flagged `is_summary` that becomes the
//!    session's `summary_message_id`, and the call's usage and cost are charged
//!    to the session and that message — all in one transaction. What the
//!    summary does depends on [`CompactionConfig::strategy`]:
//!    - [`CompactionStrategy::InPlace`]: it restarts the conversation. The most
//!      recent messages ([`CompactionConfig::keep_recent_for`], whole turns when
//!      they can be) are kept verbatim and sent after it; the summary covers
//!      exactly the rest of what was sent, and its compaction part records where
//!      the kept messages begin (`keep_from`);
//!    - [`CompactionStrategy::Continuation`]: the same, but the same transaction
//!      ends the session (reason [`END_REASON_COMPRESSION`]) and the summary
//!      goes to a new continuation child (titled with the next title of the
//!      lineage, created in that transaction), which is charged instead; the
//!      kept messages stay in the ended session and are sent after the summary;
//!    - [`CompactionStrategy::KeepWords`]: the summary is added beside the whole
//!      conversation, which stays sent; every tool output before it is cleared
//!      in the same transaction. When the words alone would fill more than half
//!      of a request, it restarts the conversation as in place does, keeping the
//!      recent turns and at least the last user message on: the progressive step,
//!      stored once (reported as [`CompactionStep::Progressive`] after the
//!      summary) instead of a summary before every request.
//!
//!    If what it covers is too large for the summarising model itself, the copy
//!    it is sent is reduced first (old tool outputs cleared, then the oldest
//!    messages left out). With [`CompactionConfig::prune_first`] off, this step
//!    comes first and the prune step follows it;
//! 3. **progressive** and 4. **strip media**: what is sent keeps only the
//!    summary and the last user turn, then attachments become one-line
//!    descriptions ([`Compactor::request_context`] applies these to every
//!    request, as they are not stored);
//! 5. otherwise the run fails with [`AgentError::DoesNotFit`].
//!
//! Every size compared with the window counts what the request sends besides the
//! conversation: the system prompt and the tool specifications
//! ([`RequestFrame`], given by the loop; [`Compactor::compact`] and
//! [`Compactor::context`] count the session's system prompt and no tools).
//!
//! [`CompactionReport::steps`] and the [`AgentEvent::CompactionDone`] /
//! [`AgentEvent::CompactionFailed`] events say which steps ran.
//!
//! `compacting_at` is cleared when the run ends, whatever the outcome. Prune
//! marks and a summary, once stored, stay even if a later step fails (they are
//! correct; the failure only says the next request still cannot fit). A
//! failed summary call changes nothing: no summary message, no new
//! `summary_message_id`, no continuation, no cleared outputs.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::thread::JoinHandle;
use std::time::Duration;

use scribe_db::ids::{Prefix, new_id};
use scribe_message::{
    CompactionPart, FinishReason, Message, Part, Role, StoredPart, TokenUsage, ToolPart,
    sent_message,
};
use scribe_pubsub::{Broker, Subscription};
use scribe_session::{CompactionClaim, Store, UsageDelta};
use scribe_types::error_chain;

use super::keep::{KeepCandidate, plan_keep};
use super::{
    CompactionConfig, CompactionStrategy, DoesNotFit, FitStep, PrunePlan, TriggerReason,
    fit_messages, plan_prune, should_compact, summary_request,
};
use crate::context::{Context, Loaded, RequestFrame, load_context};
use crate::error::{AgentError, Result};
use crate::estimate::{HeuristicEstimator, TokenEstimator};
use crate::events::{AgentEvent, emit};
use crate::models::{Model, ModelCatalog};
use crate::provider::{ChatMessage, ChatRequest, Provider};

/// The end reason of a session closed by continuation compaction.
pub const END_REASON_COMPRESSION: &str = "compression";

/// How long a `compacting_at` mark holds before it is taken for a crashed run.
pub const DEFAULT_STALE_AFTER: Duration = Duration::from_secs(10 * 60);

/// A step a compaction took (see the module doc), in the order they can run.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum CompactionStep {
    /// Old tool outputs were marked compacted (stored).
    Prune,
    /// A summary was asked for and stored.
    Summarize,
    /// What is sent keeps only the summary and the last user turn.
    Progressive,
    /// Attachments are sent as one-line descriptions.
    StripMedia,
}

impl CompactionStep {
    /// The step's name: `prune`, `summarize`, `progressive`, `strip_media`.
    pub fn as_str(self) -> &'static str {
        match self {
            CompactionStep::Prune => "prune",
            CompactionStep::Summarize => "summarize",
            CompactionStep::Progressive => "progressive",
            CompactionStep::StripMedia => "strip_media",
        }
    }
}

impl From<FitStep> for CompactionStep {
    fn from(step: FitStep) -> Self {
        match step {
            FitStep::Progressive => CompactionStep::Progressive,
            FitStep::StripMedia => CompactionStep::StripMedia,
        }
    }
}

/// What a compaction did, whatever the strategy.
#[derive(Debug, Clone, PartialEq)]
pub struct CompactionReport {
    /// Why it ran, when the trigger fired ([`Compactor::compact`] also runs
    /// on demand).
    pub trigger: Option<TriggerReason>,
    /// The context size before.
    pub tokens_before: u64,
    /// The size of the next request's context after.
    pub tokens_after: u64,
    /// What the summary call used (zero without a summary).
    pub summary_usage: TokenUsage,
    /// What the summary call cost, in US dollars.
    pub summary_cost_usd: f64,
    /// The tool parts whose outputs were cleared, by the prune step and by a summary
    /// that keeps the words, oldest first within each step.
    pub pruned_part_ids: Vec<String>,
    /// The messages a restarting summary kept verbatim after it.
    pub kept_messages: usize,
    /// The steps taken, in order.
    pub steps: Vec<CompactionStep>,
}

/// The result of [`Compactor::compact`].
#[derive(Debug, Clone, PartialEq)]
pub enum CompactionOutcome {
    /// The summary lives in the same session.
    InPlace {
        /// The session.
        session_id: String,
        /// The stored summary, now the session's `summary_message_id`.
        summary_message_id: String,
        /// What it took.
        report: CompactionReport,
    },
    /// The session ended and a continuation holds the summary.
    Continued {
        /// The session that ended (reason [`END_REASON_COMPRESSION`]).
        previous_session_id: String,
        /// The continuation to carry on in.
        new_session_id: String,
        /// The summary, the continuation's first message and `summary_message_id`.
        summary_message_id: String,
        /// What it took.
        report: CompactionReport,
    },
    /// No summary was made: old tool outputs were pruned (enough for the next
    /// request to fit, or [`Compactor::with_summarize`] is off) and what is sent
    /// was fitted.
    Pruned {
        /// The session.
        session_id: String,
        /// What it took.
        report: CompactionReport,
    },
    /// [`Compactor::compact_if_needed`] found the context small enough.
    NotNeeded {
        /// The session.
        session_id: String,
        /// Its context size.
        tokens: u64,
    },
}

impl CompactionOutcome {
    /// The session to carry on in: the continuation, or the session itself.
    pub fn session_id(&self) -> &str {
        match self {
            CompactionOutcome::Continued { new_session_id, .. } => new_session_id,
            CompactionOutcome::InPlace { session_id, .. }
            | CompactionOutcome::Pruned { session_id, .. }
            | CompactionOutcome::NotNeeded { session_id, .. } => session_id,
        }
    }

    /// The stored summary, if one was made.
    pub fn summary_message_id(&self) -> Option<&str> {
        match self {
            CompactionOutcome::InPlace {
                summary_message_id, ..
            }
            | CompactionOutcome::Continued {
                summary_message_id, ..
            } => Some(summary_message_id),
            _ => None,
        }
    }

    /// What it took, when it ran.
    pub fn report(&self) -> Option<&CompactionReport> {
        match self {
            CompactionOutcome::InPlace { report, .. }
            | CompactionOutcome::Continued { report, .. }
            | CompactionOutcome::Pruned { report, .. } => Some(report),
            CompactionOutcome::NotNeeded { .. } => None,
        }
    }

    /// The steps taken (none when not needed).
    pub fn steps(&self) -> &[CompactionStep] {
        self.report().map_or(&[], |r| &r.steps)
    }
}

/// The messages the next request sends after the send-side steps.
#[derive(Debug, Clone, PartialEq)]
pub struct RequestContext {
    /// The context as stored (summary and what it is sent with, compacted outputs
    /// cleared).
    pub context: Context,
    /// What to send: [`RequestContext::context`]'s messages, reduced by
    /// [`RequestContext::steps`] when they exceed the budget.
    pub messages: Vec<ChatMessage>,
    /// The estimated size of [`RequestContext::messages`].
    pub tokens: u64,
    /// The send-side steps applied (empty: sent as stored).
    pub steps: Vec<FitStep>,
}

/// Runs compactions; share it behind an `Arc` (see the module doc).
pub struct Compactor {
    store: Store,
    provider: Arc<dyn Provider>,
    catalog: Arc<ModelCatalog>,
    config: CompactionConfig,
    estimator: Arc<dyn TokenEstimator>,
    summary_model: Option<String>,
    summarize: bool,
    stale_after: Duration,
    events: Arc<Broker<AgentEvent>>,
    fail_before_commit: bool,
    loads: AtomicU64,
}

impl std::fmt::Debug for Compactor {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Compactor")
            .field("provider", &self.provider.name())
            .field("config", &self.config)
            .field("summary_model", &self.summary_model)
            .field("summarize", &self.summarize)
            .field("stale_after", &self.stale_after)
            .finish_non_exhaustive()
    }
}

impl Compactor {
    /// A compactor over `store` summarising with `provider` (the session's own model
    /// unless [`Compactor::with_summary_model`]), measuring with the
    /// [`HeuristicEstimator`], with its own event broker. Claims are made and judged
    /// stale by the store's clock ([`scribe_db::Options::clock`]).
    pub fn new(
        store: Store,
        provider: Arc<dyn Provider>,
        catalog: Arc<ModelCatalog>,
        config: CompactionConfig,
    ) -> Self {
        Compactor {
            store,
            provider,
            catalog,
            config,
            estimator: Arc::new(HeuristicEstimator),
            summary_model: None,
            summarize: true,
            stale_after: DEFAULT_STALE_AFTER,
            events: Arc::new(Broker::new()),
            fail_before_commit: false,
            loads: AtomicU64::new(0),
        }
    }

    /// Measures content that has no reported usage with `estimator`.
    pub fn with_estimator(mut self, estimator: Arc<dyn TokenEstimator>) -> Self {
        self.estimator = estimator;
        self
    }

    /// Summarises with `model_id` (e.g. a small, cheap model) instead of the
    /// session's model. It must be in the catalog when a run starts.
    pub fn with_summary_model(mut self, model_id: impl Into<String>) -> Self {
        self.summary_model = Some(model_id.into());
        self
    }

    /// With `false`, runs never ask for a summary: they prune and fit what is sent
    /// (no model call; [`CompactionOutcome::Pruned`]).
    pub fn with_summarize(mut self, summarize: bool) -> Self {
        self.summarize = summarize;
        self
    }

    /// Takes over a `compacting_at` mark older than this (a crashed run).
    pub fn with_stale_after(mut self, stale_after: Duration) -> Self {
        self.stale_after = stale_after;
        self
    }

    /// Fault injection for tests: every summary transaction fails after all
    /// its writes, just before it would commit (so a test can show that
    /// nothing of it survives). Not for production use.
    #[doc(hidden)]
    pub fn with_failure_before_summary_commit(mut self) -> Self {
        self.fail_before_commit = true;
        self
    }

    /// Publishes on `events` instead of a broker of its own.
    pub fn with_events(mut self, events: Broker<AgentEvent>) -> Self {
        self.events = Arc::new(events);
        self
    }

    /// The broker progress (and the summary call's usage) is published on.
    pub fn events(&self) -> &Broker<AgentEvent> {
        &self.events
    }

    /// A new subscription to [`Compactor::events`].
    pub fn subscribe(&self) -> Subscription<AgentEvent> {
        self.events.subscribe()
    }

    /// The configuration.
    pub fn config(&self) -> &CompactionConfig {
        &self.config
    }

    /// The estimator.
    pub fn estimator(&self) -> &Arc<dyn TokenEstimator> {
        &self.estimator
    }

    /// How many contexts this compactor has loaded (each [`Compactor::context`],
    /// [`Compactor::check`], [`Compactor::request_context`], and each load of a
    /// compaction run). The agent loop loads one per step; this makes that observable.
    pub fn contexts_loaded(&self) -> u64 {
        self.loads.load(Ordering::Relaxed)
    }

    fn model(&self, model_id: &str) -> Result<&Model> {
        self.catalog
            .get(model_id)
            .ok_or_else(|| AgentError::UnknownModel(model_id.to_owned()))
    }

    fn load(&self, session_id: &str, frame: &RequestFrame) -> Result<(Context, Loaded)> {
        self.loads.fetch_add(1, Ordering::Relaxed);
        load_context(&self.store, session_id, self.estimator.as_ref(), frame)
    }

    /// The context of `session_id`, sent with the session's system prompt and no tools
    /// (see [`crate::context::context`]).
    pub fn context(&self, session_id: &str) -> Result<Context> {
        self.context_with_frame(session_id, &RequestFrame::default())
    }

    /// The context of `session_id` for a request sent with `frame`, whose system prompt
    /// and tools its size counts (see [`crate::context::context_with_frame`]).
    pub fn context_with_frame(&self, session_id: &str, frame: &RequestFrame) -> Result<Context> {
        Ok(self.load(session_id, frame)?.0)
    }

    /// Whether `session_id`'s context on `model_id` must be compacted before
    /// the next request (see [`Compactor::trigger`]).
    pub fn check(&self, session_id: &str, model_id: &str) -> Result<Option<TriggerReason>> {
        let context = self.context(session_id)?;
        self.trigger(&context, model_id)
    }

    /// [`Compactor::check`] for a context already loaded: [`should_compact`] over
    /// [`Context::tokens`] (the window), else, with [`CompactionConfig::prune_early`]
    /// (and [`CompactionConfig::prune_first`]), [`TriggerReason::PruneDue`] when a prune
    /// would clear at least [`CompactionConfig::prune_minimum_for`] tokens.
    pub fn trigger(&self, context: &Context, model_id: &str) -> Result<Option<TriggerReason>> {
        let model = self.model(model_id)?;
        Ok(
            should_compact(context.tokens, model, &self.config)
                .or_else(|| self.due(context, model)),
        )
    }

    /// [`TriggerReason::PruneDue`], when early prunes are on and one would clear enough.
    fn due(&self, context: &Context, model: &Model) -> Option<TriggerReason> {
        let early = self.config.prune_early && (self.config.prune_first || !self.summarize);
        if !early {
            return None;
        }
        let minimum_tokens = self.config.prune_minimum_for(model);
        let prunable_tokens = self.prune_plan(context, model).output_tokens;
        (prunable_tokens > 0 && prunable_tokens >= minimum_tokens).then_some(
            TriggerReason::PruneDue {
                prunable_tokens,
                minimum_tokens,
            },
        )
    }

    /// Which old tool outputs a prune of `context` on `model` would clear.
    fn prune_plan(&self, context: &Context, model: &Model) -> PrunePlan {
        let config = CompactionConfig {
            prune_protect_tokens: self.config.prune_protect_for(model),
            ..self.config.clone()
        };
        plan_prune(&context.prune_input, &config, None)
    }

    /// What the next request on `model_id` sends: the context, reduced by the
    /// send-side steps (progressive: the summary and the last user turn; then
    /// media stripped) only when it exceeds the budget (the frame counted: the messages
    /// get what the system prompt and the tools leave). Fails with
    /// [`AgentError::DoesNotFit`] when even that is too large.
    pub fn request_context(&self, session_id: &str, model_id: &str) -> Result<RequestContext> {
        let context = self.context(session_id)?;
        self.fit(context, model_id)
    }

    /// [`Compactor::request_context`] for a context already loaded.
    pub fn fit(&self, context: Context, model_id: &str) -> Result<RequestContext> {
        let model = self.model(model_id)?;
        let budget = self.config.max_context_tokens(model);
        let fitted = fit_context(&context, self.estimator.as_ref(), budget).map_err(|source| {
            AgentError::DoesNotFit {
                session_id: context.session_id.clone(),
                source,
            }
        })?;
        Ok(RequestContext {
            messages: fitted.messages,
            tokens: fitted.tokens,
            steps: fitted.steps,
            context,
        })
    }

    /// Compacts only when [`Compactor::check`] says so.
    pub fn compact_if_needed(&self, session_id: &str, model_id: &str) -> Result<CompactionOutcome> {
        let context = self.context(session_id)?;
        match self.trigger(&context, model_id)? {
            None => Ok(CompactionOutcome::NotNeeded {
                session_id: session_id.to_owned(),
                tokens: context.tokens,
            }),
            Some(_) => self.compact(session_id, model_id),
        }
    }

    /// [`Compactor::compact`] for requests sent with `frame` (the agent's system prompt
    /// and tools), which every size it compares with the budget counts.
    pub fn compact_with_frame(
        &self,
        session_id: &str,
        model_id: &str,
        frame: &RequestFrame,
    ) -> Result<CompactionOutcome> {
        self.compact_with(session_id, model_id, frame, false)
    }

    /// Compacts `session_id` for requests on `model_id` now, on this thread
    /// (see the module doc): cheapest step first. A summary is asked for when
    /// pruning did not make the request fit or found nothing to clear. Progress:
    /// starting, analyzing, summarizing (when it summarises), then done or failed;
    /// a session that cannot be claimed (unknown, ended, already compacting) fails
    /// before any event.
    pub fn compact(&self, session_id: &str, model_id: &str) -> Result<CompactionOutcome> {
        self.compact_with(session_id, model_id, &RequestFrame::default(), false)
    }

    /// [`Compactor::compact`] after the provider refused a request as too long: our
    /// estimate said it fit, so it is not trusted to say that pruning was enough, and
    /// a summary is made whatever pruning did (unless summaries are off).
    pub fn compact_after_overflow(
        &self,
        session_id: &str,
        model_id: &str,
    ) -> Result<CompactionOutcome> {
        self.compact_with(session_id, model_id, &RequestFrame::default(), true)
    }

    fn compact_with(
        &self,
        session_id: &str,
        model_id: &str,
        frame: &RequestFrame,
        force_summary: bool,
    ) -> Result<CompactionOutcome> {
        let model = self.model(model_id)?.clone();
        let summary_model = match &self.summary_model {
            Some(id) => self.model(id)?.clone(),
            None => model.clone(),
        };
        self.claim(session_id)?;
        emit(
            &self.events,
            AgentEvent::CompactionStarting {
                session_id: session_id.to_owned(),
            },
        );
        let mut steps = Vec::new();
        let outcome = self.run(
            session_id,
            (&model, &summary_model),
            frame,
            force_summary,
            &mut steps,
        );
        let cleared = self.store.sessions().set_compacting(session_id, false);
        let outcome = match (outcome, cleared) {
            (Ok(outcome), Ok(_)) => Ok(outcome),
            (Err(err), _) => Err(err),
            (Ok(_), Err(err)) => Err(AgentError::from(err)),
        };
        match &outcome {
            Ok(done) => {
                if let Some(report) = done.report() {
                    emit(
                        &self.events,
                        AgentEvent::CompactionDone {
                            session_id: session_id.to_owned(),
                            summary_message_id: done.summary_message_id().map(str::to_owned),
                            continuation_session_id: match done {
                                CompactionOutcome::Continued { new_session_id, .. } => {
                                    Some(new_session_id.clone())
                                }
                                _ => None,
                            },
                            tokens_before: report.tokens_before,
                            tokens_after: report.tokens_after,
                            pruned_tool_parts: report.pruned_part_ids.len(),
                            kept_messages: report.kept_messages,
                            steps: report.steps.clone(),
                        },
                    );
                }
            }
            Err(err) => emit(
                &self.events,
                AgentEvent::CompactionFailed {
                    session_id: session_id.to_owned(),
                    steps,
                    error: error_chain(err),
                },
            ),
        }
        outcome
    }

    /// [`Compactor::compact`] on a thread of its own; join the handle for the
    /// outcome, or follow [`Compactor::events`].
    pub fn spawn_compact(
        self: &Arc<Self>,
        session_id: String,
        model_id: String,
    ) -> JoinHandle<Result<CompactionOutcome>> {
        self.spawn(session_id, model_id, RequestFrame::default(), false)
    }

    /// [`Compactor::compact_with_frame`] or, with `after_overflow`, a compaction after
    /// the provider refused the request ([`Compactor::compact_after_overflow`]), on a
    /// thread of its own.
    pub(crate) fn spawn(
        self: &Arc<Self>,
        session_id: String,
        model_id: String,
        frame: RequestFrame,
        after_overflow: bool,
    ) -> JoinHandle<Result<CompactionOutcome>> {
        let this = Arc::clone(self);
        std::thread::spawn(move || {
            this.compact_with(&session_id, &model_id, &frame, after_overflow)
        })
    }

    /// Sets `compacting_at` unless a recent run holds it.
    fn claim(&self, session_id: &str) -> Result<()> {
        match self
            .store
            .sessions()
            .claim_compaction(session_id, self.stale_after)?
        {
            CompactionClaim::Claimed(_) => Ok(()),
            CompactionClaim::Ended(_) => Err(AgentError::SessionEnded {
                session_id: session_id.to_owned(),
            }),
            CompactionClaim::Held { since_ms } => Err(AgentError::AlreadyCompacting {
                session_id: session_id.to_owned(),
                since_ms,
            }),
        }
    }

    /// The steps, after the claim; `steps` records each as it is taken.
    fn run(
        &self,
        session_id: &str,
        (model, summary_model): (&Model, &Model),
        frame: &RequestFrame,
        force_summary: bool,
        steps: &mut Vec<CompactionStep>,
    ) -> Result<CompactionOutcome> {
        emit(
            &self.events,
            AgentEvent::CompactionAnalyzing {
                session_id: session_id.to_owned(),
            },
        );
        let (mut context, mut loaded) = self.load(session_id, frame)?;
        let budget = self.config.max_context_tokens(model);
        let window = should_compact(context.tokens, model, &self.config);
        let trigger = window.or_else(|| self.due(&context, model));
        let prune_due = matches!(trigger, Some(TriggerReason::PruneDue { .. }));
        let mut report = CompactionReport {
            trigger,
            tokens_before: context.tokens,
            tokens_after: context.tokens,
            summary_usage: TokenUsage::default(),
            summary_cost_usd: 0.0,
            pruned_part_ids: Vec::new(),
            kept_messages: 0,
            steps: Vec::new(),
        };
        let prune_first = self.config.prune_first || !self.summarize;
        // The minimum holds wherever a summary (or nothing) is the alternative; a full
        // window that cannot be summarised takes whatever can be cleared, and so does a
        // prune that a summary follows anyway (the prompt is rewritten regardless, and
        // the summary request is smaller for it). Keep-words' summary keeps every word
        // and clears the outputs before it, so on a full window it frees little that a
        // prune does not, and rewrites the prompt as much: there the prune takes
        // whatever it can, and the summary follows only when the request still does
        // not fit.
        let restarts = self.config.strategy != CompactionStrategy::KeepWords;
        let minimum =
            if force_summary || (!restarts && window.is_some()) || !(self.summarize || prune_due) {
                0
            } else {
                self.config.prune_minimum_for(model)
            };
        if prune_first && self.prune(&context, &loaded, model, minimum, &mut report, steps)? {
            (context, loaded) = self.load(session_id, frame)?;
            report.tokens_after = context.tokens;
        }
        let pruned = steps.contains(&CompactionStep::Prune);
        // A summary when the cheap step was not enough, or (restarting from the summary)
        // left less room than the next prune step needs (the next turns would fill the
        // window again at once), or found
        // nothing to clear on demand, or cannot be trusted (the provider overflowed);
        // never when summaries are off, nor for a prune that was merely due.
        let room = if restarts {
            self.config.prune_minimum_for(model)
        } else {
            0
        };
        let summarize = self.summarize
            && (force_summary
                || context.tokens > budget
                || (window.is_some() && (!pruned || context.tokens > budget.saturating_sub(room)))
                || (trigger.is_none() && !pruned));
        if prune_due && !summarize && !pruned {
            // Someone cleared the outputs meanwhile: nothing is due any more.
            return Ok(CompactionOutcome::NotNeeded {
                session_id: session_id.to_owned(),
                tokens: context.tokens,
            });
        }
        let mut target = session_id.to_owned();
        let mut summary: Option<(String, Option<String>)> = None;
        if summarize {
            let fresh = context.messages.len() - usize::from(context.summary_index.is_some());
            if fresh == 0 {
                return Err(AgentError::NothingToSummarize {
                    session_id: session_id.to_owned(),
                });
            }
            emit(
                &self.events,
                AgentEvent::CompactionSummarizing {
                    session_id: session_id.to_owned(),
                },
            );
            let stored = self.summarize(session_id, &context, &loaded, model, summary_model)?;
            steps.push(CompactionStep::Summarize);
            if stored.restarted_words {
                steps.push(CompactionStep::Progressive);
            }
            report.summary_usage = stored.usage;
            report.summary_cost_usd = stored.cost_usd;
            report.kept_messages = stored.kept;
            report.pruned_part_ids.extend(stored.cleared);
            if let Some(child) = &stored.continuation {
                target.clone_from(child);
            }
            summary = Some((stored.message_id, stored.continuation));
            (context, loaded) = self.load(&target, frame)?;
            report.tokens_after = context.tokens;
            // What follows the summary must fit: whatever can be cleared is.
            if !prune_first
                && context.tokens > budget
                && self.prune(&context, &loaded, model, 0, &mut report, steps)?
            {
                context = self.load(&target, frame)?.0;
                report.tokens_after = context.tokens;
            }
        }
        if context.tokens > budget {
            // Steps 3 and 4 change only what is sent.
            let fitted = fit_context(&context, self.estimator.as_ref(), budget).map_err(|source| {
                AgentError::DoesNotFit {
                    session_id: target.clone(),
                    source,
                }
            });
            let fitted = match fitted {
                Ok(fitted) => fitted,
                Err(err) => {
                    // Whatever send-side step was tried, it was not enough.
                    for step in [CompactionStep::Progressive, CompactionStep::StripMedia] {
                        if !steps.contains(&step) {
                            steps.push(step);
                        }
                    }
                    return Err(err);
                }
            };
            report.tokens_after = fitted.tokens;
            for step in fitted.steps.into_iter().map(CompactionStep::from) {
                if !steps.contains(&step) {
                    steps.push(step);
                }
            }
        }
        report.steps = steps.clone();
        Ok(match summary {
            Some((summary_message_id, None)) => CompactionOutcome::InPlace {
                session_id: session_id.to_owned(),
                summary_message_id,
                report,
            },
            Some((summary_message_id, Some(new_session_id))) => CompactionOutcome::Continued {
                previous_session_id: session_id.to_owned(),
                new_session_id,
                summary_message_id,
                report,
            },
            None => CompactionOutcome::Pruned {
                session_id: session_id.to_owned(),
                report,
            },
        })
    }

    /// Step 2: asks for the summary of what it covers and stores it.
    fn summarize(
        &self,
        session_id: &str,
        context: &Context,
        loaded: &Loaded,
        model: &Model,
        summary_model: &Model,
    ) -> Result<StoredSummary> {
        let estimator = self.estimator.as_ref();
        // Keeping the words is worth it while they leave room: once they would fill
        // half of a request, the summary restarts the conversation instead.
        let words_fit = || {
            let words = clear_all_tool_outputs(context.messages.clone());
            context.frame_tokens + estimator.estimate_messages(&words)
                <= self.config.max_context_tokens(model) / 2
        };
        let keeps_words = self.config.strategy == CompactionStrategy::KeepWords && words_fit();
        let restarted_words = self.config.strategy == CompactionStrategy::KeepWords && !keeps_words;
        // What the summary covers: all that is sent, less the recent messages a
        // restarting summary keeps (the newest of those stored after the previous
        // summary, so they are the last ones sent).
        let (covered, keep_from, kept) = if keeps_words {
            let start = loaded.messages.first().map(|m| m.id.clone());
            (context.messages.clone(), start, 0)
        } else {
            let after = loaded.summary_at.map_or(0, |k| k + 1);
            let recent = &loaded.messages[after..];
            let sizes: Vec<(KeepCandidate, bool)> = recent
                .iter()
                .map(|m| {
                    let sent = sent_message(m, false);
                    let candidate = KeepCandidate {
                        role: m.role,
                        tokens: sent.as_ref().map_or(0, |s| estimator.estimate_message(s)),
                    };
                    (candidate, sent.is_some())
                })
                .collect();
            let candidates: Vec<KeepCandidate> = sizes.iter().map(|(c, _)| *c).collect();
            let mut start = plan_keep(&candidates, self.config.keep_recent_for(model), true);
            if restarted_words {
                // The progressive step's promise: the user's latest words are sent as
                // they are (or the request does not fit, and the run says so).
                if let Some(last_user) = recent.iter().rposition(|m| m.role == Role::User) {
                    start = start.min(last_user);
                }
            }
            let kept_sent = sizes[start..].iter().filter(|(_, sent)| *sent).count();
            let covered_len = context.messages.len().saturating_sub(kept_sent);
            let kept = recent.len() - start;
            let keep_from = recent.get(start).map(|m| m.id.clone());
            (context.messages[..covered_len].to_vec(), keep_from, kept)
        };
        let request = self.summary_request(session_id, context, covered, summary_model)?;
        let response = self
            .provider
            .send(&request, &mut |_| {})
            .map_err(|source| AgentError::Provider {
                session_id: session_id.to_owned(),
                source,
            })?;
        let text = response.text();
        let text = text.trim();
        if text.is_empty() {
            return Err(AgentError::EmptySummary {
                session_id: session_id.to_owned(),
            });
        }
        let cost_usd = summary_model.cost(&response.usage);
        let delta = UsageDelta {
            tokens: response.usage,
            api_calls: 1,
            tool_calls: 0,
            cost_usd,
            actual_cost_usd: None,
        };
        delta.validate()?;

        // A summary that keeps the words clears every tool output before it.
        let clear: Vec<(String, ToolPart)> = if keeps_words {
            loaded
                .messages
                .iter()
                .flat_map(|m| &m.parts)
                .filter_map(|p| match &p.part {
                    Part::Tool(tool) if tool.compacted_at.is_none() && tool.state.is_terminal() => {
                        Some((p.id.clone(), tool.clone()))
                    }
                    _ => None,
                })
                .collect()
        } else {
            Vec::new()
        };
        let summary_id = new_id(Prefix::Message);
        let parent_id = loaded.messages.last().map(|m| m.id.clone());
        let provider = self.provider.name().to_owned();
        let compaction = CompactionPart {
            auto: true,
            keep_from,
            keeps_words,
            ..CompactionPart::default()
        };
        let (sessions, messages) = (self.store.sessions(), self.store.messages());
        // Everything the summary changes commits together: the continuation (if any),
        // the summary message with its usage, `summary_message_id`, the charge, the
        // cleared outputs and the end of the compacted session. Their events follow the
        // commit.
        let continuation = self.store.database().write(|tx| {
            let continuation = match self.config.strategy {
                CompactionStrategy::InPlace | CompactionStrategy::KeepWords => None,
                CompactionStrategy::Continuation => {
                    Some(sessions.create_continuation_tx(tx, session_id)?)
                }
            };
            let home = continuation.as_ref().map_or(session_id, |c| c.id.as_str());
            let summary = summary_message(SummaryMessage {
                id: &summary_id,
                session_id: home,
                parent_id: parent_id.clone(),
                provider: &provider,
                model_id: &summary_model.id,
                compaction: compaction.clone(),
                text,
                usage: delta.tokens,
                cost_usd,
                now: tx.now(),
            });
            messages.insert_tx(tx, &summary)?;
            sessions.set_summary_message_tx(tx, home, &summary.id)?;
            sessions.add_usage_tx(tx, home, &delta)?;
            let now = tx.now();
            for (id, tool) in &clear {
                let mut tool = tool.clone();
                tool.compacted_at = Some(now);
                messages.update_part_tx(tx, id, &Part::Tool(tool))?;
            }
            if continuation.is_some() {
                sessions.end_tx(tx, session_id, END_REASON_COMPRESSION)?;
            }
            if self.fail_before_commit {
                return Err(AgentError::InvalidInput(
                    "injected failure before the summary commit".to_owned(),
                ));
            }
            let (events, event) = (
                Arc::clone(&self.events),
                AgentEvent::UsageTracked {
                    session_id: home.to_owned(),
                    message_id: Some(summary_id.clone()),
                    model_id: summary_model.id.clone(),
                    usage: response.usage,
                    cost_usd,
                },
            );
            tx.after_commit(move || emit(&events, event));
            Ok(continuation.map(|c| c.id))
        })?;
        Ok(StoredSummary {
            message_id: summary_id,
            continuation,
            kept,
            restarted_words,
            cleared: clear.into_iter().map(|(id, _)| id).collect(),
            usage: response.usage,
            cost_usd,
        })
    }

    /// The summary request for `history` (what the summary covers), reduced if the
    /// summarising model could not take it whole: old tool outputs cleared in the copy
    /// sent (not stored), then the oldest messages after the previous summary left
    /// out.
    fn summary_request(
        &self,
        session_id: &str,
        context: &Context,
        mut history: Vec<ChatMessage>,
        summary_model: &Model,
    ) -> Result<ChatRequest> {
        let estimator = self.estimator.as_ref();
        let budget = self.config.max_context_tokens(summary_model);
        let model_id = summary_model.id.clone();
        let system = context.system_prompt.clone();
        let request = summary_request(model_id.clone(), system.clone(), history.clone());
        let size = estimator.estimate_request(&request);
        if size <= budget {
            return Ok(request);
        }
        history = clear_all_tool_outputs(history);
        // The previous summary (when it opens what is sent) stays in front.
        let keep_first = usize::from(context.summary_index == Some(0));
        loop {
            let request = summary_request(model_id.clone(), system.clone(), history.clone());
            let size = estimator.estimate_request(&request);
            if size <= budget {
                return Ok(request);
            }
            if history.len() <= keep_first + 1 {
                return Err(AgentError::DoesNotFit {
                    session_id: session_id.to_owned(),
                    source: DoesNotFit {
                        tokens: size,
                        max_tokens: budget,
                    },
                });
            }
            history.remove(keep_first);
        }
    }

    /// Step 1: marks every old tool output compacted (see [`plan_prune`]): all
    /// those beyond the protected ones, in one transaction, provided they add up to at
    /// least `minimum` tokens (a smaller step is not worth rewriting the prompt from the
    /// first of them on). `context` is the load `loaded` was built with. Returns whether
    /// it marked any (then the context must be reloaded).
    fn prune(
        &self,
        context: &Context,
        loaded: &Loaded,
        model: &Model,
        minimum: u64,
        report: &mut CompactionReport,
        steps: &mut Vec<CompactionStep>,
    ) -> Result<bool> {
        let plan = self.prune_plan(context, model);
        if plan.is_empty() || plan.output_tokens < minimum {
            return Ok(false);
        }
        let marks: Vec<(String, ToolPart)> = plan
            .parts
            .iter()
            .filter_map(|at| {
                loaded
                    .messages
                    .get(at.message)
                    .and_then(|m| m.parts.get(at.part))
            })
            // Only outputs still whole: a cleared call's output was not loaded, and a part
            // is written back as loaded.
            .filter_map(|p| match &p.part {
                Part::Tool(tool) if tool.compacted_at.is_none() => {
                    Some((p.id.clone(), tool.clone()))
                }
                _ => None,
            })
            .collect();
        if marks.is_empty() {
            return Ok(false);
        }
        // All marks in one transaction, with one time; the part events follow it.
        let messages = self.store.messages();
        self.store.database().write(|tx| -> Result<()> {
            let now = tx.now();
            for (id, tool) in &marks {
                let mut tool = tool.clone();
                tool.compacted_at = Some(now);
                messages.update_part_tx(tx, id, &Part::Tool(tool))?;
            }
            Ok(())
        })?;
        report
            .pruned_part_ids
            .extend(marks.into_iter().map(|(id, _)| id));
        steps.push(CompactionStep::Prune);
        Ok(true)
    }
}

/// What [`Compactor::summarize`] stored.
struct StoredSummary {
    message_id: String,
    continuation: Option<String>,
    kept: usize,
    /// A keep-words summary restarted the conversation: its words no longer fit.
    restarted_words: bool,
    cleared: Vec<String>,
    usage: TokenUsage,
    cost_usd: f64,
}

/// What a summary message is made of.
struct SummaryMessage<'a> {
    id: &'a str,
    session_id: &'a str,
    parent_id: Option<String>,
    provider: &'a str,
    model_id: &'a str,
    compaction: CompactionPart,
    text: &'a str,
    usage: TokenUsage,
    cost_usd: f64,
    now: i64,
}

/// The stored form of a summary: an ended assistant message flagged
/// `is_summary` holding a compaction marker (saying what the summary stands
/// beside), the text and a finish part, with the summary call's usage and cost.
fn summary_message(s: SummaryMessage<'_>) -> Message {
    let now = s.now;
    Message {
        id: s.id.to_owned(),
        session_id: s.session_id.to_owned(),
        parent_id: s.parent_id,
        role: Role::Assistant,
        agent: None,
        provider: Some(s.provider.to_owned()),
        model: Some(s.model_id.to_owned()),
        finish_reason: Some(FinishReason::EndTurn),
        is_summary: true,
        usage: s.usage,
        cost_usd: s.cost_usd,
        error: None,
        created_at: now,
        updated_at: now,
        finished_at: Some(now),
        parts: [
            Part::Compaction(s.compaction),
            Part::text(s.text),
            Part::finish(FinishReason::EndTurn, now),
        ]
        .into_iter()
        .zip(0_i64..)
        .map(|(part, position)| StoredPart {
            id: new_id(Prefix::Part),
            position,
            part,
            created_at: now,
            updated_at: now,
        })
        .collect(),
    }
}

/// Every completed tool output sent as the cleared marker (for the summary
/// request only).
fn clear_all_tool_outputs(mut messages: Vec<ChatMessage>) -> Vec<ChatMessage> {
    for part in messages.iter_mut().flat_map(|m| m.parts.iter_mut()) {
        if let Part::Tool(tool) = part
            && tool.state.is_terminal()
            && tool.compacted_at.is_none()
        {
            tool.compacted_at = Some(0);
        }
    }
    super::clear_compacted_tool_outputs(messages)
}

/// Messages fitted to a budget.
struct Fitted {
    messages: Vec<ChatMessage>,
    tokens: u64,
    steps: Vec<FitStep>,
}

/// Fits a context into `budget` with the send-side steps, keeping the summary
/// (wherever it is sent) in front of whatever else is kept. The frame (system prompt,
/// tools) is sent whatever happens: the messages get what it leaves, and the sizes
/// reported count it.
fn fit_context(
    context: &Context,
    estimator: &dyn TokenEstimator,
    budget: u64,
) -> std::result::Result<Fitted, DoesNotFit> {
    let frame = context.frame_tokens;
    let fitted = fit_messages_of(context, estimator, budget.saturating_sub(frame));
    match fitted {
        Ok(fitted) => Ok(Fitted {
            tokens: fitted.tokens + frame,
            ..fitted
        }),
        Err(e) => Err(DoesNotFit {
            tokens: e.tokens + frame,
            max_tokens: budget,
        }),
    }
}

/// [`fit_context`] for the messages alone, into `budget`.
fn fit_messages_of(
    context: &Context,
    estimator: &dyn TokenEstimator,
    budget: u64,
) -> std::result::Result<Fitted, DoesNotFit> {
    let mut messages = context.messages.clone();
    let head = context
        .summary_index
        .filter(|&i| i < messages.len())
        .map(|i| messages.remove(i));
    let head_tokens = head.as_ref().map_or(0, |h| estimator.estimate_message(h));
    if head_tokens > budget {
        return Err(DoesNotFit {
            tokens: head_tokens,
            max_tokens: budget,
        });
    }
    let fitted =
        fit_messages(messages, estimator, budget - head_tokens).map_err(|e| DoesNotFit {
            tokens: e.tokens + head_tokens,
            max_tokens: budget,
        })?;
    if fitted.steps.is_empty() {
        // It fits as it is sent.
        let messages = super::clear_compacted_tool_outputs(context.messages.clone());
        return Ok(Fitted {
            tokens: fitted.tokens + head_tokens,
            messages,
            steps: Vec::new(),
        });
    }
    let mut out = Vec::with_capacity(fitted.messages.len() + 1);
    out.extend(head);
    out.extend(fitted.messages);
    Ok(Fitted {
        messages: out,
        tokens: fitted.tokens + head_tokens,
        steps: fitted.steps,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn compactor_is_shareable_across_threads() {
        fn check<T: Send + Sync>() {}
        check::<Compactor>();
        check::<AgentError>();
    }
}
