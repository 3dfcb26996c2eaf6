//! [`Compactor`]: runs auto-compaction against the session and message
//! services, on the caller's thread ([`Compactor::compact`]) or its own
//! ([`Compactor::spawn_compact`]), reporting progress as [`AgentEvent`]s.
//!
//! A run claims the session (`compacting_at`, taken atomically so two
//! compactors never run on one session; a mark older than
//! [`Compactor::with_stale_after`] is a crashed run and is taken over), then
//! applies the steps in order, stopping as soon as the next request fits
//! ([`CompactionConfig::max_context_tokens`]):
//!
//! 1. **summarize**: the context since the last summary plus
//!    [`SUMMARY_PROMPT`](super::SUMMARY_PROMPT) goes to the summarising model
//!    with no tools; the answer is stored as an assistant message flagged
//!    `is_summary` and becomes the session's `summary_message_id`, and the
//!    call's usage and cost are charged to the session and that message — all
//!    in one transaction. With [`CompactionStrategy::Continuation`], the same
//!    transaction ends the session (reason [`END_REASON_COMPRESSION`]) and the
//!    summary goes to a new continuation child (titled with the next title of
//!    the lineage, created in that same transaction), which is charged
//!    instead; every event of the step follows the commit. If the history is too large for
//!    the summarising model itself, the copy it is sent is reduced first (old
//!    tool outputs cleared, then the oldest messages left out);
//! 2. **prune**: old tool outputs are marked compacted (stored, searchable,
//!    exportable; sent as the marker), oldest first, sparing the newest
//!    `prune_protect_tokens` of them and the last `protect_user_turns` turns;
//!    every mark of a run commits in one transaction, and the part events
//!    follow the commit;
//! 3. **progressive** and 4. **strip media**: what is sent keeps only the
//!    summary and the last user turn, then attachments become one-line
//!    descriptions ([`Compactor::request_context`] applies these to every
//!    request, as they are not stored);
//! 5. otherwise the run fails with [`AgentError::DoesNotFit`].
//!
//! A summary covers the whole context it was made from, so right after one
//! the context is the summary alone: steps 2–4 then only matter when the
//! summary step is off ([`Compactor::with_summarize`]) or for what a later
//! run finds after an earlier summary.
//!
//! `compacting_at` is cleared when the run ends, whatever the outcome. A
//! summary, once stored, stays even if a later step fails (it is a correct
//! summary; the failure only says the next request still cannot fit). A
//! failed summary call changes nothing: no summary message, no new
//! `summary_message_id`, no continuation.

use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

use scribe_db::ids::{Prefix, new_id};
use scribe_message::{
    CompactionPart, FinishReason, Message, Part, Role, StoredPart, TokenUsage, ToolPart,
};
use scribe_pubsub::{Broker, Subscription};
use scribe_session::{CompactionClaim, Store, UsageDelta};
use scribe_types::error_chain;

use super::{
    CompactionConfig, CompactionStrategy, DoesNotFit, FitStep, PruneMessage, TriggerReason,
    fit_messages, plan_prune, should_compact, summary_request,
};
use crate::context::{Context, load_context};
use crate::error::{AgentError, Result};
use crate::estimate::{HeuristicEstimator, TokenEstimator};
use crate::events::{AgentEvent, emit};
use crate::models::{Model, ModelCatalog};
use crate::provider::{ChatMessage, ChatRequest, Provider};

/// The end reason of a session closed by continuation compaction.
pub const END_REASON_COMPRESSION: &str = "compression";

/// How long a `compacting_at` mark holds before it is taken for a crashed run.
pub const DEFAULT_STALE_AFTER: Duration = Duration::from_secs(10 * 60);

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
    /// The tool parts marked compacted by the prune step, oldest first.
    pub pruned_part_ids: Vec<String>,
    /// The send-side steps the next request needs (progressive, strip media).
    pub fit_steps: Vec<FitStep>,
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
    /// No summary was asked for ([`Compactor::with_summarize`] `false`): old
    /// tool outputs were pruned and what is sent was fitted.
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
}

/// The messages the next request sends after the send-side steps.
#[derive(Debug, Clone, PartialEq)]
pub struct RequestContext {
    /// The context as stored (summary on, compacted outputs cleared).
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

    /// With `false`, runs skip the summary and start at the prune step (no
    /// model call; [`CompactionOutcome::Pruned`]).
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

    fn model(&self, model_id: &str) -> Result<&Model> {
        self.catalog
            .get(model_id)
            .ok_or_else(|| AgentError::UnknownModel(model_id.to_owned()))
    }

    /// The context of `session_id` (see [`crate::context::context`]).
    pub fn context(&self, session_id: &str) -> Result<Context> {
        crate::context::context(&self.store, session_id, self.estimator.as_ref())
    }

    /// Whether `session_id`'s context on `model_id` must be compacted before
    /// the next request: [`should_compact`] over [`Context::tokens`].
    pub fn check(&self, session_id: &str, model_id: &str) -> Result<Option<TriggerReason>> {
        let model = self.model(model_id)?;
        let context = self.context(session_id)?;
        Ok(should_compact(context.tokens, model, &self.config))
    }

    /// What the next request on `model_id` sends: the context, reduced by the
    /// send-side steps (progressive: the summary and the last user turn; then
    /// media stripped) only when it exceeds the budget. Fails with
    /// [`AgentError::DoesNotFit`] when even that is too large.
    pub fn request_context(&self, session_id: &str, model_id: &str) -> Result<RequestContext> {
        let model = self.model(model_id)?;
        let context = self.context(session_id)?;
        let budget = self.config.max_context_tokens(model);
        let fitted = fit_context(&context, self.estimator.as_ref(), budget).map_err(|source| {
            AgentError::DoesNotFit {
                session_id: session_id.to_owned(),
                source,
            }
        })?;
        Ok(RequestContext {
            messages: fitted.0,
            tokens: fitted.1,
            steps: fitted.2,
            context,
        })
    }

    /// Compacts only when [`Compactor::check`] says so.
    pub fn compact_if_needed(&self, session_id: &str, model_id: &str) -> Result<CompactionOutcome> {
        let model = self.model(model_id)?;
        let context = self.context(session_id)?;
        match should_compact(context.tokens, model, &self.config) {
            None => Ok(CompactionOutcome::NotNeeded {
                session_id: session_id.to_owned(),
                tokens: context.tokens,
            }),
            Some(_) => self.compact(session_id, model_id),
        }
    }

    /// Compacts `session_id` for requests on `model_id` now, on this thread
    /// (see the module doc). Progress: starting, analyzing, summarizing, then
    /// done or failed; a session that cannot be claimed (unknown, ended,
    /// already compacting) fails before any event.
    pub fn compact(&self, session_id: &str, model_id: &str) -> Result<CompactionOutcome> {
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
        let outcome = self.run(session_id, &model, &summary_model);
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
                            fit_steps: report.fit_steps.clone(),
                        },
                    );
                }
            }
            Err(err) => emit(
                &self.events,
                AgentEvent::CompactionFailed {
                    session_id: session_id.to_owned(),
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
        let this = Arc::clone(self);
        std::thread::spawn(move || this.compact(&session_id, &model_id))
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

    /// The steps, after the claim.
    fn run(
        &self,
        session_id: &str,
        model: &Model,
        summary_model: &Model,
    ) -> Result<CompactionOutcome> {
        emit(
            &self.events,
            AgentEvent::CompactionAnalyzing {
                session_id: session_id.to_owned(),
            },
        );
        let estimator = self.estimator.as_ref();
        let (context, stored) = load_context(&self.store, session_id, estimator)?;
        let mut report = CompactionReport {
            trigger: should_compact(context.tokens, model, &self.config),
            tokens_before: context.tokens,
            tokens_after: context.tokens,
            summary_usage: TokenUsage::default(),
            summary_cost_usd: 0.0,
            pruned_part_ids: Vec::new(),
            fit_steps: Vec::new(),
        };
        let mut target = session_id.to_owned();
        let mut summary: Option<(String, Option<String>)> = None;
        if self.summarize {
            let fresh = context.messages.len()
                - usize::from(context.summary_message_id.is_some() && !context.messages.is_empty());
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
            let (message_id, continuation) =
                self.summarize(session_id, &context, &stored, summary_model, &mut report)?;
            if let Some(child) = &continuation {
                target.clone_from(child);
            }
            summary = Some((message_id, continuation));
        }

        let budget = self.config.max_context_tokens(model);
        let (mut context, stored) = load_context(&self.store, &target, estimator)?;
        report.tokens_after = context.tokens;
        if context.tokens > budget {
            // Step 2: prune old tool outputs in what is stored.
            let pruned = self.prune(&stored, context.tokens - budget)?;
            if !pruned.is_empty() {
                report.pruned_part_ids = pruned;
                context = load_context(&self.store, &target, estimator)?.0;
                report.tokens_after = context.tokens;
            }
        }
        if context.tokens > budget {
            // Steps 3 and 4 change only what is sent.
            let (_, tokens, steps) =
                fit_context(&context, estimator, budget).map_err(|source| {
                    AgentError::DoesNotFit {
                        session_id: target.clone(),
                        source,
                    }
                })?;
            report.tokens_after = tokens;
            report.fit_steps = steps;
        }
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

    /// Step 1: asks for the summary and stores it. Returns the summary's id and
    /// the continuation session, if one was opened.
    fn summarize(
        &self,
        session_id: &str,
        context: &Context,
        stored: &[Message],
        summary_model: &Model,
        report: &mut CompactionReport,
    ) -> Result<(String, Option<String>)> {
        let request = self.summary_request(session_id, context, summary_model)?;
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
        report.summary_usage = response.usage;
        report.summary_cost_usd = cost_usd;

        let summary_id = new_id(Prefix::Message);
        let parent_id = stored.last().map(|m| m.id.clone());
        let provider = self.provider.name().to_owned();
        let (sessions, messages) = (self.store.sessions(), self.store.messages());
        // Everything the summary changes commits together: the continuation (if
        // any), the summary message with its usage, `summary_message_id`, the charge
        // and the end of the compacted session. Their events follow the commit.
        let continuation = self.store.database().write(|tx| {
            let continuation = match self.config.strategy {
                CompactionStrategy::InPlace => None,
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
                text,
                usage: delta.tokens,
                cost_usd,
                now: tx.now(),
            });
            messages.insert_tx(tx, &summary)?;
            sessions.set_summary_message_tx(tx, home, &summary.id)?;
            sessions.add_usage_tx(tx, home, &delta)?;
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
        Ok((summary_id, continuation))
    }

    /// The summary request, its history reduced if the summarising model
    /// could not take it whole: old tool outputs cleared in the copy sent
    /// (not stored), then the oldest messages after the previous summary left
    /// out.
    fn summary_request(
        &self,
        session_id: &str,
        context: &Context,
        summary_model: &Model,
    ) -> Result<ChatRequest> {
        let estimator = self.estimator.as_ref();
        let budget = self.config.max_context_tokens(summary_model);
        let model_id = summary_model.id.clone();
        let system = context.system_prompt.clone();
        let mut history = context.messages.clone();
        let request = summary_request(model_id.clone(), system.clone(), history.clone());
        let size = estimator.estimate_request(&request);
        if size <= budget {
            return Ok(request);
        }
        history = clear_all_tool_outputs(history);
        let keep_first = usize::from(context.summary_message_id.is_some());
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

    /// Step 2: marks old tool outputs compacted, oldest first, until about
    /// `excess` tokens are cleared. Returns the part ids marked.
    fn prune(&self, stored: &[Message], excess: u64) -> Result<Vec<String>> {
        let estimator = self.estimator.as_ref();
        let plan_input: Vec<PruneMessage> = stored
            .iter()
            .map(|m| {
                let parts: Vec<Part> = m.parts.iter().map(|p| p.part.clone()).collect();
                PruneMessage::from_parts(m.role, &parts, estimator)
            })
            .collect();
        let plan = plan_prune(&plan_input, &self.config, Some(excess));
        let marks: Vec<(String, ToolPart)> = plan
            .parts
            .iter()
            .filter_map(|at| stored.get(at.message).and_then(|m| m.parts.get(at.part)))
            .filter_map(|p| match &p.part {
                Part::Tool(tool) => Some((p.id.clone(), tool.clone())),
                _ => None,
            })
            .collect();
        if marks.is_empty() {
            return Ok(Vec::new());
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
        Ok(marks.into_iter().map(|(id, _)| id).collect())
    }
}

/// What a summary message is made of.
struct SummaryMessage<'a> {
    id: &'a str,
    session_id: &'a str,
    parent_id: Option<String>,
    provider: &'a str,
    model_id: &'a str,
    text: &'a str,
    usage: TokenUsage,
    cost_usd: f64,
    now: i64,
}

/// The stored form of a summary: an ended assistant message flagged
/// `is_summary` holding a compaction marker, the text and a finish part, with the
/// summary call's usage and cost.
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
            Part::Compaction(CompactionPart {
                auto: true,
                ..CompactionPart::default()
            }),
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

/// Fits a context into `budget` with the send-side steps, keeping the summary
/// (the first message) in front of whatever else is kept.
fn fit_context(
    context: &Context,
    estimator: &dyn TokenEstimator,
    budget: u64,
) -> std::result::Result<(Vec<ChatMessage>, u64, Vec<FitStep>), DoesNotFit> {
    let mut messages = context.messages.clone();
    let head = if context.summary_message_id.is_some() && !messages.is_empty() {
        Some(messages.remove(0))
    } else {
        None
    };
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
    let mut out = Vec::with_capacity(fitted.messages.len() + 1);
    out.extend(head);
    out.extend(fitted.messages);
    Ok((out, fitted.tokens + head_tokens, fitted.steps))
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
