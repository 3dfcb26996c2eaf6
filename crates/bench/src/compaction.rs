//! Compaction under load: one scripted long coding session (several hundred model calls,
//! tool heavy, a few very large outputs, an image) played through the real agent loop
//! under each compaction strategy, counting what a user pays for and what the model is
//! sent: summary calls, compactions, tokens per request (mean and max), whether every
//! request fit, and the cost at the demo's prices, with where it goes (prompt tokens
//! read from and written to the cache, what the summary calls cost).
//!
//! Everything but the model is real: prompts are ingested (the image from a file),
//! tools run (a bench tool whose output size the script decides), usage is charged,
//! compaction runs on its own thread. The model is [`SessionModel`], a scripted provider
//! that plays the session's steps in order, answers summary requests with a summary of
//! a fixed size, and reports each call's usage as a provider with prompt caching would:
//! the prefix shared with the previous request (same system prompt and tools, then the
//! same leading messages) is read from the cache, the rest written to it. The counts are
//! deterministic (they depend only on the seed), so `tests` asserts them; the timings
//! beside them are not.
//!
//! The same run measures the agent loop's hot paths on the longest session it made
//! (issue 14 item 5): context loads per step, recovery with nothing to repair, the last
//! user message by one query against listing the history, and loading what is sent with
//! cleared outputs left out against loading them.

use std::collections::VecDeque;
use std::path::Path;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use scribe_agent::provider::{ResponseBuilder, ToolSpec};
use scribe_agent::{
    AgentConfig, AgentRegistry, AgentRunner, CancelToken, ChatMessage, ChatRequest,
    CompactionConfig, CompactionStep, CompactionStrategy, HeuristicEstimator, LoopEvent, Model,
    ModelCatalog, PartDraft, Pricing, PromptInput, Provider, ProviderError, ProviderEvent,
    ProviderResponse, TokenEstimator, Tool, ToolContext, ToolError, ToolOutput, ToolRegistry,
};
use scribe_message::store::{self, SentFrom};
use scribe_message::{FinishReason, Role, TokenUsage};
use scribe_session::{NewSession, Store};
use serde::Serialize;
use serde_json::{Value, json};

use crate::data::Gen;
use crate::stats::{median, ms};

/// The model of the session: Sonnet-like window and output, the demo's prices.
pub const MODEL: &str = "bench-sonnet";
const SYSTEM: &str = "You are a careful coding agent working in a Rust repository. Read before \
you edit, run the tests after every change, and explain what you did in a sentence or two.";

/// How big the session is.
#[derive(Debug, Clone, Copy, Serialize)]
pub struct Shape {
    /// User prompts.
    pub prompts: usize,
    /// Tool-calling steps per prompt, at least and at most (each prompt ends with one
    /// more call that answers in text).
    pub steps: (usize, usize),
    /// Outputs far larger than the rest (a build log, a generated file), spread over
    /// the session.
    pub big_outputs: usize,
    /// Their size in tokens.
    pub big_output_tokens: usize,
    /// The model's context window.
    pub window: u64,
}

impl Shape {
    /// The measured session: 60 prompts, about 500 model calls, on a 200k window.
    pub fn full() -> Self {
        Shape {
            prompts: 60,
            steps: (3, 12),
            big_outputs: 4,
            big_output_tokens: 30_000,
            window: 200_000,
        }
    }

    /// A smaller session that still overflows its (smaller) window several times.
    pub fn quick() -> Self {
        Shape {
            prompts: 16,
            steps: (3, 12),
            big_outputs: 2,
            big_output_tokens: 16_000,
            window: 64_000,
        }
    }
}

/// One strategy's run.
#[derive(Debug, Clone, Serialize)]
pub struct StrategyResult {
    /// Its name in the table.
    pub strategy: &'static str,
    /// Model calls of the session itself (summaries not counted).
    pub model_calls: usize,
    /// Summary calls.
    pub summary_calls: usize,
    /// Compaction runs (each between two requests).
    pub compactions: usize,
    /// Compaction runs that only pruned (no model call).
    pub prune_only: usize,
    /// Compactions that needed the progressive step.
    pub fitted_requests: usize,
    /// Tokens of the session's requests (system, tools and messages, estimated), mean.
    pub tokens_mean: f64,
    /// …and the largest.
    pub tokens_max: u64,
    /// Requests larger than what a request may hold (window − reserve).
    pub over_budget: usize,
    /// Requests larger than the window itself.
    pub over_window: usize,
    /// Prompts that failed (e.g. the conversation could not be made to fit).
    pub failed_prompts: usize,
    /// Cost charged to the sessions (their usage at the demo's prices, with the cache).
    pub cost_usd: f64,
    /// What the same requests would cost without a prompt cache.
    pub cost_uncached_usd: f64,
    /// Prompt tokens read from the cache, summary calls included.
    pub cache_read_tokens: u64,
    /// Prompt tokens written to the cache (first sent, or sent again after the prompt
    /// changed before them), summary calls included.
    pub cache_write_tokens: u64,
    /// What the summary calls cost.
    pub summary_cost_usd: f64,
    /// Contexts the loop loaded per model call.
    pub loads_per_call: f64,
    /// Wall time of the run.
    pub run_s: f64,
    /// The session the conversation ended in.
    #[serde(skip)]
    pub last_session: String,
}

/// The agent loop's hot paths on the longest session.
#[derive(Debug, Clone, Serialize)]
pub struct HotPaths {
    /// Messages in the session measured.
    pub messages: usize,
    /// `recover_session` with nothing to repair (a read, no write lock), median ms.
    pub recover_ms: f64,
    /// The last user message by one indexed query, median ms.
    pub last_user_ms: f64,
    /// The same found by listing every message (what `run()` did), median ms.
    pub last_user_by_list_ms: f64,
    /// `context()` of the session, median ms.
    pub context_ms: f64,
    /// Loading what is sent with cleared outputs left out, median ms.
    pub load_sent_ms: f64,
    /// Loading the same messages whole, median ms.
    pub load_whole_ms: f64,
    /// Bytes of part data loaded each way.
    pub load_sent_bytes: usize,
    /// …whole.
    pub load_whole_bytes: usize,
}

/// The whole compaction report.
#[derive(Debug, Clone, Serialize)]
pub struct CompactionReport {
    /// The session's shape.
    pub shape: Shape,
    /// Tokens a request may hold on the model (window − reserve, below the threshold).
    pub budget: u64,
    /// Prompts, model calls of the script, images.
    pub script_calls: usize,
    /// One row per strategy; the first is the summary-first baseline.
    pub strategies: Vec<StrategyResult>,
    /// Summary calls of the best prune-first strategy against summary-first, as a
    /// fraction (target ≤ 0.5).
    pub summary_call_ratio: f64,
    /// Whether the target is met: at most half the summary calls of summary-first in
    /// every prune-first strategy, and no request over the window in any.
    pub target_met: bool,
    /// The loop's hot paths.
    pub hot_paths: HotPaths,
}

fn model(window: u64) -> Model {
    Model {
        id: MODEL.to_owned(),
        provider: "scripted".to_owned(),
        name: "Bench Sonnet".to_owned(),
        context_window: window,
        max_output_tokens: 64_000,
        // The demo's main model (`scribe demo`).
        pricing: Pricing {
            input_per_mtok: 3.0,
            output_per_mtok: 15.0,
            cache_write_per_mtok: 3.75,
            cache_read_per_mtok: 0.30,
            long_prompt: None,
        },
    }
}

/// The strategies compared, the baseline first.
pub fn strategies() -> Vec<(&'static str, CompactionConfig)> {
    vec![
        (
            "summary first",
            CompactionConfig {
                prune_first: false,
                keep_recent_tokens: 0,
                ..CompactionConfig::default()
            },
        ),
        ("in place", CompactionConfig::default()),
        (
            "continuation",
            CompactionConfig {
                strategy: CompactionStrategy::Continuation,
                ..CompactionConfig::default()
            },
        ),
        (
            "keep words",
            CompactionConfig {
                strategy: CompactionStrategy::KeepWords,
                ..CompactionConfig::default()
            },
        ),
    ]
}

// ---------------------------------------------------------------------------------------
// The script

/// One tool call of the script: the tool's input says how big its output is.
#[derive(Debug, Clone)]
struct Call {
    reasoning: String,
    text: String,
    input: Value,
}

/// One prompt: its text, whether it attaches the screenshot, its tool calls, its answer.
#[derive(Debug, Clone)]
struct Prompt {
    text: String,
    image: bool,
    calls: Vec<Call>,
    answer: String,
}

fn words(g: &mut Gen, tokens: usize) -> String {
    let bytes = tokens * 4;
    g.text(bytes, bytes + 8)
}

/// Text of `min` tokens and up to `extra` more.
fn words_about(g: &mut Gen, min: usize, extra: usize) -> String {
    let tokens = min + g.below(extra);
    words(g, tokens)
}

fn script(shape: &Shape, seed: u64) -> Vec<Prompt> {
    let mut g = Gen::new(seed ^ 0xC0FFEE);
    let (min, max) = shape.steps;
    let mut prompts: Vec<Prompt> = Vec::with_capacity(shape.prompts);
    let mut n = 0;
    for p in 0..shape.prompts {
        let steps = min + g.below(max - min + 1);
        let mut calls = Vec::with_capacity(steps);
        for _ in 0..steps {
            n += 1;
            let roll = g.below(100);
            let (kind, input_tokens, output_tokens) = if roll < 40 {
                ("read", 15, 300 + g.below(3_700))
            } else if roll < 60 {
                ("grep", 15, 100 + g.below(1_400))
            } else if roll < 85 {
                ("edit", 150 + g.below(750), 20 + g.below(40))
            } else {
                ("test", 10, 200 + g.below(2_800))
            };
            calls.push(Call {
                reasoning: words_about(&mut g, 30, 220),
                text: words_about(&mut g, 10, 70),
                input: json!({
                    "kind": kind,
                    "path": format!("src/module_{}.rs", g.below(40)),
                    "code": words(&mut g, input_tokens),
                    "output_tokens": output_tokens,
                    "seed": n,
                }),
            });
        }
        prompts.push(Prompt {
            text: words_about(&mut g, 15, 105),
            image: p == shape.prompts / 5,
            calls,
            answer: words_about(&mut g, 40, 160),
        });
    }
    // The very large outputs, spread over the session (a tool call early in a prompt).
    for i in 0..shape.big_outputs {
        let p = (i * 2 + 1) * shape.prompts / (shape.big_outputs * 2 + 1);
        if let Some(call) = prompts.get_mut(p).and_then(|p| p.calls.first_mut()) {
            call.input["kind"] = json!("test");
            call.input["output_tokens"] = json!(shape.big_output_tokens);
        }
    }
    prompts
}

/// The bench's only tool: returns as many tokens of text as its input asks for.
#[derive(Debug)]
struct Work;

impl Tool for Work {
    fn name(&self) -> &str {
        "work"
    }
    fn description(&self) -> &str {
        "read, search, edit or test the project"
    }
    fn input_schema(&self) -> Value {
        json!({"type": "object", "properties": {
            "kind": {"type": "string"}, "path": {"type": "string"}, "code": {"type": "string"},
            "output_tokens": {"type": "integer"}, "seed": {"type": "integer"}
        }, "required": ["kind", "output_tokens", "seed"]})
    }
    fn run(&self, input: &Value, _ctx: &ToolContext) -> Result<ToolOutput, ToolError> {
        let tokens = input["output_tokens"].as_u64().unwrap_or(0) as usize;
        let seed = input["seed"].as_u64().unwrap_or(0);
        let mut g = Gen::new(seed);
        Ok(ToolOutput::new(words(&mut g, tokens), "work"))
    }
}

// ---------------------------------------------------------------------------------------
// The model

/// What the scripted model says next.
enum Reply {
    Call(Call, usize),
    Answer(String),
}

#[derive(Default)]
struct ModelState {
    replies: VecDeque<Reply>,
    /// The previous request's system prompt, tools and messages (the cache).
    cached: Option<(Option<String>, Vec<ToolSpec>, Vec<ChatMessage>)>,
    session_requests: Vec<u64>,
    summary_calls: usize,
    uncached_cost: f64,
    summary_cost: f64,
}

/// The scripted model of the bench (see the module doc).
pub struct SessionModel {
    state: Mutex<ModelState>,
    pricing: Pricing,
    summary: String,
}

impl std::fmt::Debug for SessionModel {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SessionModel").finish_non_exhaustive()
    }
}

impl SessionModel {
    fn new(prompts: &[Prompt], pricing: Pricing, seed: u64) -> SessionModel {
        let mut replies = VecDeque::new();
        for (p, prompt) in prompts.iter().enumerate() {
            for (c, call) in prompt.calls.iter().enumerate() {
                replies.push_back(Reply::Call(call.clone(), p * 100 + c));
            }
            replies.push_back(Reply::Answer(prompt.answer.clone()));
        }
        let mut g = Gen::new(seed ^ 0x5EED);
        let summary = format!(
            "## Goal\n{}\n## Instructions\n{}\n## Discoveries\n{}\n## Accomplished\n{}\n\
             ## Files being worked on\n{}\n## Next steps\n{}",
            words(&mut g, 120),
            words(&mut g, 150),
            words(&mut g, 450),
            words(&mut g, 300),
            words(&mut g, 150),
            words(&mut g, 80)
        );
        SessionModel {
            state: Mutex::new(ModelState {
                replies,
                ..ModelState::default()
            }),
            pricing,
            summary,
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, ModelState> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// The usage a caching provider would report, and the cost without a cache.
    fn usage(
        &self,
        state: &mut ModelState,
        request: &ChatRequest,
        output: u64,
    ) -> (TokenUsage, f64) {
        let e = HeuristicEstimator;
        let prompt = e.estimate_request(request);
        let cached = match &state.cached {
            Some((system, tools, messages))
                if *system == request.system && *tools == request.tools =>
            {
                let head = ChatRequest {
                    messages: Vec::new(),
                    ..request.clone()
                };
                let shared = messages
                    .iter()
                    .zip(&request.messages)
                    .take_while(|(a, b)| a == b)
                    .count();
                e.estimate_request(&head) + e.estimate_messages(&request.messages[..shared])
            }
            _ => 0,
        }
        .min(prompt);
        state.cached = Some((
            request.system.clone(),
            request.tools.clone(),
            request.messages.clone(),
        ));
        let usage = TokenUsage {
            input: 0,
            output: output as i64,
            cache_read: cached as i64,
            cache_write: (prompt - cached) as i64,
            reasoning: 0,
        };
        let uncached = (prompt as f64 * self.pricing.input_per_mtok
            + output as f64 * self.pricing.output_per_mtok)
            / 1e6;
        (usage, uncached)
    }
}

fn is_summary_request(request: &ChatRequest) -> bool {
    request.tools.is_empty()
        && request.messages.last().is_some_and(|m| {
            m.role == Role::User
                && matches!(m.parts.first(), Some(scribe_message::Part::Text(t))
                    if t.text == scribe_agent::compaction::SUMMARY_PROMPT)
        })
}

impl Provider for SessionModel {
    fn name(&self) -> &str {
        "bench"
    }

    fn send(
        &self,
        request: &ChatRequest,
        on_event: &mut dyn FnMut(ProviderEvent),
    ) -> Result<ProviderResponse, ProviderError> {
        let e = HeuristicEstimator;
        let mut state = self.lock();
        let (events, reason) = if is_summary_request(request) {
            state.summary_calls += 1;
            (
                vec![ProviderEvent::TextDelta(self.summary.clone())],
                FinishReason::EndTurn,
            )
        } else {
            state.session_requests.push(e.estimate_request(request));
            match state.replies.pop_front() {
                Some(Reply::Call(call, id)) => (
                    vec![
                        ProviderEvent::ReasoningDelta(call.reasoning),
                        ProviderEvent::TextDelta(call.text),
                        ProviderEvent::ToolCall {
                            call_id: format!("call_{id}"),
                            name: "work".to_owned(),
                            input: call.input,
                        },
                    ],
                    FinishReason::ToolUse,
                ),
                Some(Reply::Answer(text)) => {
                    (vec![ProviderEvent::TextDelta(text)], FinishReason::EndTurn)
                }
                None => {
                    return Err(ProviderError::ScriptExhausted {
                        request: state.session_requests.len(),
                        scripted: state.session_requests.len() - 1,
                    });
                }
            }
        };
        let output: u64 = events
            .iter()
            .map(|event| match event {
                ProviderEvent::TextDelta(t) | ProviderEvent::ReasoningDelta(t) => {
                    e.estimate_text(t)
                }
                ProviderEvent::ToolCall { input, .. } => e.estimate_text(&input.to_string()),
                _ => 0,
            })
            .sum();
        let (usage, uncached) = self.usage(&mut state, request, output);
        state.uncached_cost += uncached;
        if is_summary_request(request) {
            state.summary_cost += (usage.cache_read as f64 * self.pricing.cache_read_per_mtok
                + usage.cache_write as f64 * self.pricing.cache_write_per_mtok
                + usage.output as f64 * self.pricing.output_per_mtok)
                / 1e6;
        }
        drop(state);
        let mut builder = ResponseBuilder::new();
        for event in events
            .into_iter()
            .chain([ProviderEvent::Finish { reason, usage }])
        {
            builder.push(&event);
            on_event(event);
        }
        builder
            .finish()
            .ok_or_else(|| ProviderError::InvalidResponse {
                provider: "bench".to_owned(),
                message: "the reply did not finish".to_owned(),
            })
    }
}

// ---------------------------------------------------------------------------------------
// The runs

/// Plays the session under one strategy in a fresh database under `dir`.
fn play(
    dir: &Path,
    shape: &Shape,
    prompts: &[Prompt],
    seed: u64,
    name: &'static str,
    config: CompactionConfig,
) -> crate::Result<(StrategyResult, Store)> {
    let started = Instant::now();
    let root = dir.join(name.replace(' ', "-"));
    std::fs::create_dir_all(&root)?;
    // A small PNG (its bytes do not matter: an image is counted as one fixed size).
    std::fs::write(
        root.join("screenshot.png"),
        b"\x89PNG\r\n\x1a\n bench screenshot",
    )?;
    let store = Store::open(root.join("scribe.db"))?;
    let m = model(shape.window);
    let mut catalog = ModelCatalog::empty();
    catalog.insert(m.clone())?;
    let provider = Arc::new(SessionModel::new(prompts, m.pricing, seed));
    let agents = AgentRegistry::new(
        AgentConfig::new("build")
            .with_model(MODEL)
            .with_system_prompt(SYSTEM)
            .with_compaction(config.clone()),
    );
    let runner = AgentRunner::builder(store.clone(), provider.clone())
        .with_catalog(Arc::new(catalog))
        .with_project_root(root.clone())
        .with_tools(ToolRegistry::new().with(Work))
        .with_agents(agents)
        .with_flush_interval(Duration::from_secs(3_600))
        .build();
    let events = runner.subscribe();
    let session = store.sessions().create(NewSession {
        title: Some(format!("bench compaction: {name}")),
        model: Some(MODEL.to_owned()),
        directory: Some(root.to_string_lossy().into_owned()),
        ..NewSession::default()
    })?;
    let loads_before = runner.compactor("build").map_or(0, |c| c.contexts_loaded());
    let mut current = session.id.clone();
    let mut failed = 0;
    let (mut compactions, mut prune_only, mut fitted) = (0, 0, 0);
    // Drained after every prompt: a subscription holds a bounded number of events.
    let mut count = |events: &scribe_pubsub::Subscription<LoopEvent>| {
        for event in events.try_iter() {
            if let Ok(event) = event
                && let LoopEvent::Compacted { steps, .. } = event.payload
            {
                compactions += 1;
                if !steps.contains(&CompactionStep::Summarize) {
                    prune_only += 1;
                }
                if steps.contains(&CompactionStep::Progressive) {
                    fitted += 1;
                }
            }
        }
    };
    for prompt in prompts {
        let mut parts = vec![PartDraft::text(prompt.text.clone())];
        if prompt.image {
            parts.push(PartDraft::file("screenshot.png"));
        }
        let input = PromptInput {
            session_id: current.clone(),
            parts,
            ..PromptInput::default()
        };
        let outcome = runner.prompt(input, &CancelToken::new());
        count(&events);
        match outcome {
            Ok(out) => current = out.session_id,
            Err(err) => {
                failed += 1;
                crate::progress(&format!(
                    "compaction/{name}: a prompt failed: {}",
                    scribe_agent::error_chain(&err)
                ));
                // The rest of the script answers that prompt: stop here.
                break;
            }
        }
    }
    let loads = runner.compactor("build").map_or(0, |c| c.contexts_loaded()) - loads_before;
    // Every session of the conversation (continuations included) is charged its own.
    let mut cost = 0.0;
    let (mut cache_read, mut cache_write) = (0_u64, 0_u64);
    let mut id = Some(current.clone());
    while let Some(s) = id {
        let session = store.sessions().get(&s)?;
        cost += session.estimated_cost_usd;
        cache_read += u64::try_from(session.tokens.cache_read).unwrap_or(0);
        cache_write += u64::try_from(session.tokens.cache_write).unwrap_or(0);
        id = session.parent_session_id;
    }
    let state = provider.lock();
    let requests = &state.session_requests;
    let budget = CompactionConfig::default().max_context_tokens(&m);
    let calls = requests.len();
    let result = StrategyResult {
        strategy: name,
        model_calls: calls,
        summary_calls: state.summary_calls,
        compactions,
        prune_only,
        fitted_requests: fitted,
        tokens_mean: requests.iter().sum::<u64>() as f64 / calls.max(1) as f64,
        tokens_max: requests.iter().copied().max().unwrap_or(0),
        over_budget: requests.iter().filter(|&&t| t > budget).count(),
        over_window: requests.iter().filter(|&&t| t > m.context_window).count(),
        failed_prompts: failed,
        cost_usd: cost,
        cost_uncached_usd: state.uncached_cost,
        cache_read_tokens: cache_read,
        cache_write_tokens: cache_write,
        summary_cost_usd: state.summary_cost,
        loads_per_call: loads as f64 / calls.max(1) as f64,
        run_s: started.elapsed().as_secs_f64(),
        last_session: current,
    };
    drop(state);
    Ok((result, store))
}

/// Plays every strategy; `hot_rounds` timed rounds of each hot path (0: counts only).
pub fn run(
    dir: &Path,
    shape: Shape,
    seed: u64,
    hot_rounds: usize,
) -> crate::Result<CompactionReport> {
    let prompts = script(&shape, seed);
    let script_calls = prompts.iter().map(|p| p.calls.len() + 1).sum();
    let mut results = Vec::new();
    let mut keep_words: Option<(Store, String)> = None;
    for (name, config) in strategies() {
        crate::progress(&format!("compaction: {name}, {script_calls} model calls"));
        let words = config.strategy == CompactionStrategy::KeepWords;
        let (result, store) = play(dir, &shape, &prompts, seed, name, config)?;
        if words {
            keep_words = Some((store, result.last_session.clone()));
        }
        results.push(result);
    }
    let baseline = results.first().map_or(0, |r| r.summary_calls);
    let best = results[1..]
        .iter()
        .map(|r| r.summary_calls)
        .max()
        .unwrap_or(0);
    let summary_call_ratio = best as f64 / baseline.max(1) as f64;
    let target_met = baseline > 0
        && results[1..].iter().all(|r| r.summary_calls * 2 <= baseline)
        && results
            .iter()
            .all(|r| r.over_window == 0 && r.failed_prompts == 0);
    let hot_paths = match keep_words {
        Some((store, session)) => hot_paths(&store, &session, hot_rounds)?,
        None => return Err("no keep-words run".into()),
    };
    Ok(CompactionReport {
        budget: CompactionConfig::default().max_context_tokens(&model(shape.window)),
        shape,
        script_calls,
        strategies: results,
        summary_call_ratio,
        target_met,
        hot_paths,
    })
}

/// The loop's hot paths on `session` (the keep-words run's: the whole history is what
/// it sends, most tool outputs cleared).
fn hot_paths(store: &Store, session: &str, rounds: usize) -> crate::Result<HotPaths> {
    let rounds = rounds.max(1);
    let db = store.database();
    let messages = store.messages().list(session)?.len();
    let time = |f: &mut dyn FnMut() -> crate::Result<()>| -> crate::Result<f64> {
        let mut samples = Vec::with_capacity(rounds);
        for _ in 0..rounds {
            let t = Instant::now();
            f()?;
            samples.push(t.elapsed());
        }
        Ok(ms(median(&samples)))
    };
    let recover_ms = time(&mut || {
        let report = scribe_agent::recover_session(store, session)?;
        std::hint::black_box(report);
        Ok(())
    })?;
    let last_user_ms = time(&mut || {
        let id = db.read(|tx| store::last_user_message_id(tx, session))?;
        std::hint::black_box(id);
        Ok(())
    })?;
    let last_user_by_list_ms = time(&mut || {
        let id = store
            .messages()
            .list(session)?
            .into_iter()
            .rev()
            .find(|m| m.role == Role::User)
            .map(|m| m.id);
        std::hint::black_box(id);
        Ok(())
    })?;
    let context_ms = time(&mut || {
        let ctx = scribe_agent::context(store, session, &HeuristicEstimator)?;
        std::hint::black_box(ctx);
        Ok(())
    })?;
    let load_sent_ms = time(&mut || {
        let m = db.read(|tx| store::load_sent_messages_from(tx, session, SentFrom::Start))?;
        std::hint::black_box(m);
        Ok(())
    })?;
    let load_whole_ms = time(&mut || {
        let m = db.read(|tx| store::load_session_messages(tx, session))?;
        std::hint::black_box(m);
        Ok(())
    })?;
    let bytes = |m: Vec<scribe_message::Message>| -> usize {
        m.iter()
            .flat_map(|m| &m.parts)
            .map(|p| p.part.to_json().map_or(0, |j| j.len()))
            .sum()
    };
    let load_sent_bytes =
        bytes(db.read(|tx| store::load_sent_messages_from(tx, session, SentFrom::Start))?);
    let load_whole_bytes = bytes(db.read(|tx| store::load_session_messages(tx, session))?);
    Ok(HotPaths {
        messages,
        recover_ms,
        last_user_ms,
        last_user_by_list_ms,
        context_ms,
        load_sent_ms,
        load_whole_ms,
        load_sent_bytes,
        load_whole_bytes,
    })
}

impl CompactionReport {
    /// The report as a table.
    pub fn table(&self) -> String {
        use std::fmt::Write as _;
        let mut out = String::new();
        let s = &self.shape;
        let _ = writeln!(
            out,
            "Compaction: one scripted coding session, {} prompts, {} model calls, {} outputs of {} tokens, 1 image;",
            s.prompts, self.script_calls, s.big_outputs, s.big_output_tokens
        );
        let _ = writeln!(
            out,
            "window {} tokens (a request may hold {}), demo prices: $3 in, $15 out, $3.75 cache write, $0.30 cache read per Mtok",
            s.window, self.budget
        );
        let header = [
            "strategy",
            "summaries",
            "compactions",
            "prune only",
            "fitted",
            "tokens/req mean",
            "max",
            "max/window",
            "all fit",
            "cost (cache)",
            "cache read",
            "cache write",
            "summaries $",
            "cost (no cache)",
            "loads/call",
            "run s",
        ];
        let rows: Vec<[String; 16]> = self
            .strategies
            .iter()
            .map(|r| {
                [
                    r.strategy.to_owned(),
                    r.summary_calls.to_string(),
                    r.compactions.to_string(),
                    r.prune_only.to_string(),
                    r.fitted_requests.to_string(),
                    format!("{:.0}", r.tokens_mean),
                    r.tokens_max.to_string(),
                    format!("{:.0}%", r.tokens_max as f64 * 100.0 / s.window as f64),
                    if r.over_window == 0 && r.failed_prompts == 0 {
                        "yes".to_owned()
                    } else {
                        format!("NO ({} over, {} failed)", r.over_window, r.failed_prompts)
                    },
                    format!("${:.2}", r.cost_usd),
                    format!("{:.1}M", r.cache_read_tokens as f64 / 1e6),
                    format!("{:.1}M", r.cache_write_tokens as f64 / 1e6),
                    format!("${:.2}", r.summary_cost_usd),
                    format!("${:.2}", r.cost_uncached_usd),
                    format!("{:.2}", r.loads_per_call),
                    format!("{:.1}", r.run_s),
                ]
            })
            .collect();
        let widths: Vec<usize> = (0..header.len())
            .map(|i| {
                rows.iter()
                    .map(|r| r[i].chars().count())
                    .chain([header[i].len()])
                    .max()
                    .unwrap_or(0)
            })
            .collect();
        let line = |cells: &[&str]| -> String {
            cells
                .iter()
                .zip(&widths)
                .enumerate()
                .map(|(i, (c, w))| {
                    if i == 0 {
                        format!("{c:<w$}")
                    } else {
                        format!("{c:>w$}")
                    }
                })
                .collect::<Vec<_>>()
                .join("  ")
        };
        let _ = writeln!(out, "{}", line(&header));
        for row in &rows {
            let cells: Vec<&str> = row.iter().map(String::as_str).collect();
            let _ = writeln!(out, "{}", line(&cells));
        }
        let _ = writeln!(
            out,
            "target: prune-first strategies make at most half the summary calls of summary first ({:.0}% of them at most) and no request exceeds the window: {}",
            self.summary_call_ratio * 100.0,
            if self.target_met { "met" } else { "MISSED" }
        );
        let h = &self.hot_paths;
        let _ = writeln!(
            out,
            "loop hot paths on the keep-words session ({} messages): recovery with nothing to repair {:.3} ms (a read, no write lock); last user message {:.3} ms by one query vs {:.2} ms by listing the history; context() {:.2} ms; loading what is sent {:.2} ms / {} KB with cleared outputs left out vs {:.2} ms / {} KB whole",
            h.messages,
            h.recover_ms,
            h.last_user_ms,
            h.last_user_by_list_ms,
            h.context_ms,
            h.load_sent_ms,
            h.load_sent_bytes / 1024,
            h.load_whole_ms,
            h.load_whole_bytes / 1024
        );
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The counts are deterministic: the target is asserted on the quick session (the
    /// full one is what `--compaction` reports).
    #[test]
    fn prune_first_halves_the_summary_calls_and_every_request_fits() {
        let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
        let report = run(dir.path(), Shape::quick(), 42, 0).unwrap_or_else(|e| panic!("{e}"));
        let table = report.table();
        let baseline = &report.strategies[0];
        assert!(baseline.summary_calls >= 2, "{table}");
        for r in &report.strategies {
            assert_eq!(r.failed_prompts, 0, "{table}");
            assert_eq!(r.over_window, 0, "{table}");
            assert_eq!(r.model_calls, report.script_calls, "{table}");
            // One context load per model call; a compaction adds its own (at most three)
            // and the loop's reload after it.
            assert!(
                r.loads_per_call <= 1.0 + 4.0 * r.compactions as f64 / r.model_calls as f64,
                "{table}"
            );
        }
        for r in &report.strategies[1..] {
            assert!(r.summary_calls * 2 <= baseline.summary_calls, "{table}");
        }
        assert!(report.target_met, "{table}");
    }

    #[test]
    fn the_script_is_the_same_for_the_same_seed() {
        let a = script(&Shape::quick(), 7);
        let b = script(&Shape::quick(), 7);
        assert_eq!(a.len(), b.len());
        for (x, y) in a.iter().zip(&b) {
            assert_eq!(x.text, y.text);
            assert_eq!(x.calls.len(), y.calls.len());
            for (c, d) in x.calls.iter().zip(&y.calls) {
                assert_eq!(c.input, d.input);
            }
        }
        assert_eq!(a.iter().filter(|p| p.image).count(), 1);
    }
}
