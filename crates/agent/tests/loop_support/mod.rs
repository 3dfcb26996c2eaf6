//! Shared fixtures of the agent-loop tests: a real SQLite file and a project
//! directory in a temp dir, the services over it, a catalog with cheap test
//! models, and small test tools.
#![allow(clippy::unwrap_used, clippy::expect_used, dead_code)]

use std::path::{Path, PathBuf};
use std::process::{Child, Command};
use std::sync::Arc;
use std::time::{Duration, Instant};

use scribe_agent::{
    AgentRunner, AgentRunnerBuilder, Model, ModelCatalog, Pricing, Provider, Tool, ToolContext,
    ToolError, ToolOutput,
};
use scribe_db::Database;
use scribe_message::{Message, MessageService, Part, ToolPart};
use scribe_session::{NewSession, Session, SessionService, Store};
use serde_json::{Value, json};
use tempfile::TempDir;

pub const MODEL: &str = "test-model";
pub const OTHER_MODEL: &str = "other-model";
pub const AGENT_MODEL: &str = "agent-model";
pub const SMALL_MODEL: &str = "small-model";

pub fn model(id: &str, window: u64) -> Model {
    Model {
        id: id.into(),
        provider: "scripted".into(),
        name: id.into(),
        context_window: window,
        max_output_tokens: 1_000,
        pricing: Pricing {
            input_per_mtok: 1_000.0,
            output_per_mtok: 2_000.0,
            cache_write_per_mtok: 0.0,
            cache_read_per_mtok: 0.0,
            long_prompt: None,
        },
    }
}

pub struct Env {
    /// Kept so the temp dir lives as long as the env (`None`: not ours to delete).
    _dir: Option<TempDir>,
    pub root: PathBuf,
    pub project: PathBuf,
    pub db: Arc<Database>,
    pub store: Store,
    pub sessions: Arc<SessionService>,
    pub messages: Arc<MessageService>,
    pub catalog: Arc<ModelCatalog>,
}

impl Env {
    pub fn new() -> Env {
        let dir = tempfile::tempdir().unwrap();
        let mut env = Env::open(dir.path());
        env._dir = Some(dir);
        env
    }

    /// The env rooted at `root` (created by another process's [`Env::new`]).
    pub fn open(root: &Path) -> Env {
        Env::with_database(root, Database::open(root.join("scribe.db")).unwrap())
    }

    /// The env rooted at `root` (its project directory) over `db`, whatever its backend.
    pub fn with_database(root: &Path, db: Database) -> Env {
        let project = root.join("project");
        std::fs::create_dir_all(&project).unwrap();
        let db = Arc::new(db);
        let store = Store::new(db.clone());
        let sessions = store.sessions().clone();
        let messages = store.messages().clone();
        let mut catalog = ModelCatalog::empty();
        for m in [
            model(MODEL, 200_000),
            model(OTHER_MODEL, 200_000),
            model(AGENT_MODEL, 200_000),
            model(SMALL_MODEL, 3_000),
        ] {
            catalog.insert(m).unwrap();
        }
        Env {
            _dir: None,
            root: root.to_path_buf(),
            project,
            db,
            store,
            sessions,
            messages,
            catalog: Arc::new(catalog),
        }
    }

    /// A normal session in the project directory using [`MODEL`].
    pub fn session(&self) -> Session {
        self.sessions
            .create(NewSession {
                directory: Some(self.project.to_string_lossy().into_owned()),
                model: Some(MODEL.into()),
                ..NewSession::default()
            })
            .unwrap()
    }

    /// A runner builder over this env's store with `provider`, its catalog and
    /// project, writing streamed text at once.
    pub fn runner<P: Provider + 'static>(&self, provider: Arc<P>) -> AgentRunnerBuilder {
        AgentRunner::builder(self.store.clone(), provider)
            .with_catalog(self.catalog.clone())
            .with_project_root(self.project.clone())
            .with_flush_interval(Duration::ZERO)
    }

    pub fn messages_of(&self, session_id: &str) -> Vec<Message> {
        self.messages.list(session_id).unwrap()
    }
}

/// The tool parts of `message`, in order.
pub fn tool_parts(message: &Message) -> Vec<ToolPart> {
    message
        .parts
        .iter()
        .filter_map(|p| match &p.part {
            Part::Tool(t) => Some(t.clone()),
            _ => None,
        })
        .collect()
}

/// `echo {text}` → `text`.
#[derive(Debug)]
pub struct Echo;

impl Tool for Echo {
    fn name(&self) -> &str {
        "echo"
    }
    fn description(&self) -> &str {
        "echo the text back"
    }
    fn input_schema(&self) -> Value {
        json!({"type": "object", "properties": {"text": {"type": "string"}}, "required": ["text"]})
    }
    fn permission_subject(&self, input: &Value, _ctx: &ToolContext) -> Option<String> {
        input.get("text").and_then(Value::as_str).map(str::to_owned)
    }
    fn run(&self, input: &Value, _ctx: &ToolContext) -> Result<ToolOutput, ToolError> {
        Ok(ToolOutput::new(
            input["text"].as_str().unwrap_or_default(),
            "echo",
        ))
    }
}

/// Blocks until the loop is canceled (or 60 s pass), optionally touching a
/// marker file first so another process knows it is running.
#[derive(Debug, Default)]
pub struct Block {
    pub marker: Option<PathBuf>,
}

impl Tool for Block {
    fn name(&self) -> &str {
        "block"
    }
    fn description(&self) -> &str {
        "wait until canceled"
    }
    fn input_schema(&self) -> Value {
        json!({"type": "object"})
    }
    fn run(&self, _input: &Value, ctx: &ToolContext) -> Result<ToolOutput, ToolError> {
        if let Some(marker) = &self.marker {
            std::fs::write(marker, b"running").unwrap();
        }
        if ctx.cancel.wait_timeout(Duration::from_secs(60)) {
            Err(ToolError::Canceled)
        } else {
            Ok(ToolOutput::new("never canceled", "block"))
        }
    }
}

/// Where a child role (this test binary re-run by [`Env::spawn_blocked_child`]) finds its
/// database directory and session.
const CHILD_ROOT_ENV: &str = "SCRIBE_TEST_CHILD_ROOT";
const CHILD_SESSION_ENV: &str = "SCRIBE_TEST_CHILD_SESSION";

/// In a child role: the environment and session its parent gave it; `None` in a normal
/// test run, where the role does nothing.
pub fn child_role() -> Option<(Env, String)> {
    let root = std::env::var(CHILD_ROOT_ENV).ok()?;
    let session_id = std::env::var(CHILD_SESSION_ENV).ok()?;
    Some((Env::open(Path::new(&root)), session_id))
}

impl Env {
    /// Runs the test `role` of this binary as another process on this environment's
    /// database and `session_id`, and returns once its [`Block`] tool has written the
    /// `running` marker (at most 60 s).
    pub fn spawn_blocked_child(&self, role: &str, session_id: &str) -> Child {
        let child = Command::new(std::env::current_exe().unwrap())
            .args([role, "--exact", "--nocapture", "--test-threads=1"])
            .env(CHILD_ROOT_ENV, &self.root)
            .env(CHILD_SESSION_ENV, session_id)
            .spawn()
            .unwrap();
        let marker = self.root.join("running");
        let started = Instant::now();
        while !marker.exists() {
            assert!(
                started.elapsed() < Duration::from_secs(60),
                "the child never started its tool"
            );
            std::thread::sleep(Duration::from_millis(20));
        }
        child
    }
}

/// What [`StreamsLess`] reports it used.
pub const STREAMS_LESS_USAGE: scribe_message::TokenUsage = scribe_message::TokenUsage {
    input: 1_000,
    output: 20,
    cache_read: 0,
    cache_write: 0,
    reasoning: 0,
};

/// A provider that streams less than it returns: on its first call `Hello ` streams,
/// the response is `Hello there.` and an `echo` call that never streamed, so the step's
/// end adds both; every later call streams and returns `done` ([`DONE_USAGE`]).
#[derive(Debug, Default)]
pub struct StreamsLess {
    calls: std::sync::atomic::AtomicUsize,
}

/// What [`StreamsLess`] reports after its first call.
pub const DONE_USAGE: scribe_message::TokenUsage = scribe_message::TokenUsage {
    input: 1_100,
    output: 2,
    cache_read: 0,
    cache_write: 0,
    reasoning: 0,
};

impl Provider for StreamsLess {
    fn name(&self) -> &str {
        "streams-less"
    }

    fn send(
        &self,
        _request: &scribe_agent::ChatRequest,
        on_event: &mut dyn FnMut(scribe_agent::ProviderEvent),
    ) -> Result<scribe_agent::ProviderResponse, scribe_agent::ProviderError> {
        use scribe_agent::ProviderEvent;
        use scribe_message::FinishReason;
        if self.calls.fetch_add(1, std::sync::atomic::Ordering::SeqCst) > 0 {
            on_event(ProviderEvent::TextDelta("done".into()));
            on_event(ProviderEvent::Finish {
                reason: FinishReason::EndTurn,
                usage: DONE_USAGE,
            });
            return Ok(scribe_agent::ProviderResponse {
                parts: vec![Part::text("done")],
                finish_reason: FinishReason::EndTurn,
                usage: DONE_USAGE,
            });
        }
        on_event(ProviderEvent::TextDelta("Hello ".into()));
        on_event(ProviderEvent::Finish {
            reason: FinishReason::ToolUse,
            usage: STREAMS_LESS_USAGE,
        });
        Ok(scribe_agent::ProviderResponse {
            parts: vec![
                Part::text("Hello there."),
                Part::tool("c9", "echo", json!({"text": "unstreamed"})),
            ],
            finish_reason: FinishReason::ToolUse,
            usage: STREAMS_LESS_USAGE,
        })
    }
}

/// A turn whose step's charge fails inside the end's transaction (`inject` makes every
/// change of a session's `api_call_count` fail in the database) stores nothing of the
/// step's end: the streamed `Hello ` stands, but not the response's tail, not its
/// unstreamed tool call, no `step_finish` part and no charge; the message is ended with
/// the error recorded, and the session's totals are untouched.
pub fn a_failed_step_end_stores_nothing_of_it(env: &Env, inject: impl FnOnce()) {
    use scribe_agent::{CancelToken, PromptInput, ToolRegistry};
    use scribe_message::{FinishReason, Role};

    let runner = env
        .runner(Arc::new(StreamsLess::default()))
        .with_tools(ToolRegistry::new().with(Echo))
        .build();
    let session = env.session();
    inject();
    let err = runner
        .prompt(PromptInput::text(&session.id, "hi"), &CancelToken::new())
        .unwrap_err();
    assert!(
        scribe_agent::error_chain(&err).contains("injected"),
        "{}",
        scribe_agent::error_chain(&err)
    );

    let messages = env.messages_of(&session.id);
    let reply = messages
        .iter()
        .find(|m| m.role == Role::Assistant)
        .expect("the step's message");
    assert_eq!(reply.text(), "Hello ");
    assert!(tool_parts(reply).is_empty(), "{:#?}", reply.parts);
    assert!(
        !reply
            .parts
            .iter()
            .any(|p| matches!(p.part, Part::StepFinish(_))),
        "{:#?}",
        reply.parts
    );
    assert!(reply.usage.is_zero());
    assert_eq!(reply.finish_reason, Some(FinishReason::Error));
    assert_eq!(
        reply.error.as_ref().and_then(|e| e.get("type")),
        Some(&json!("storage")),
        "{:?}",
        reply.error
    );
    let after = env.sessions.get(&session.id).unwrap();
    assert_eq!(after.api_call_count, 0);
    assert!(after.tokens.is_zero(), "{:?}", after.tokens);
    assert_eq!(after.estimated_cost_usd, 0.0);
}
