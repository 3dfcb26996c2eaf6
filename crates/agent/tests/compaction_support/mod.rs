//! Shared fixtures of the compaction and usage tests: a real SQLite file in a
//! temporary directory, both services, a small priced model, and builders for
//! messages of known token sizes (the heuristic estimator counts 4 ASCII
//! characters per token).
#![allow(clippy::unwrap_used, clippy::expect_used, dead_code)]

use std::sync::Arc;

use scribe_agent::{
    AgentEvent, CompactionConfig, Compactor, Model, ModelCatalog, Pricing, ScriptedProvider,
};
use scribe_db::{Database, Options};
use scribe_message::{
    Extra, FilePart, FileSource, Message, MessageService, NewMessage, Part, Role, ToolPart,
    ToolState,
};
use scribe_pubsub::Subscription;
use scribe_session::{NewSession, Session, SessionService, Store};
use serde_json::{Value, json};

/// A 10k-window model: reserve min(20k, 2k) = 2k, so a request may hold 8,000 tokens.
pub const SMALL: &str = "small";
/// The summarising model.
pub const CHEAP: &str = "cheap";

pub fn small_model() -> Model {
    Model {
        id: SMALL.into(),
        provider: "scripted".into(),
        name: "Small".into(),
        context_window: 10_000,
        max_output_tokens: 2_000,
        pricing: Pricing {
            input_per_mtok: 3.0,
            output_per_mtok: 15.0,
            cache_write_per_mtok: 3.75,
            cache_read_per_mtok: 0.30,
            long_prompt: None,
        },
    }
}

/// One call's usage with every kind of token, for the usage tests.
pub fn sample_usage() -> scribe_message::TokenUsage {
    scribe_message::TokenUsage {
        input: 1_234,
        output: 567,
        cache_read: 89_012,
        cache_write: 4_321,
        reasoning: 250,
    }
}

/// What [`small_model`] charges for `u`, written out from its prices ($3 input, $15
/// output and reasoning, $0.30 cache read, $3.75 cache write per Mtok), not through the
/// crate's pricing code.
pub fn small_cost(u: &scribe_message::TokenUsage) -> f64 {
    (u.input as f64 * 3.0
        + (u.output + u.reasoning) as f64 * 15.0
        + u.cache_read as f64 * 0.30
        + u.cache_write as f64 * 3.75)
        / 1e6
}

pub fn cheap_model() -> Model {
    Model {
        id: CHEAP.into(),
        provider: "scripted".into(),
        name: "Cheap".into(),
        context_window: 100_000,
        max_output_tokens: 8_000,
        pricing: Pricing {
            input_per_mtok: 1.0,
            output_per_mtok: 5.0,
            cache_write_per_mtok: 1.25,
            cache_read_per_mtok: 0.10,
            long_prompt: None,
        },
    }
}

pub fn catalog() -> Arc<ModelCatalog> {
    let mut c = ModelCatalog::empty();
    c.insert(small_model()).unwrap();
    c.insert(cheap_model()).unwrap();
    Arc::new(c)
}

pub struct Env {
    pub _dir: tempfile::TempDir,
    pub db: Arc<Database>,
    pub store: Store,
    pub sessions: Arc<SessionService>,
    pub messages: Arc<MessageService>,
    pub catalog: Arc<ModelCatalog>,
}

impl Env {
    pub fn new() -> Env {
        Env::with_options(Options::default())
    }

    /// An env whose database has `options` (e.g. a test's clock).
    pub fn with_options(options: Options) -> Env {
        let dir = tempfile::tempdir().unwrap();
        let db = Arc::new(Database::open_with(dir.path().join("scribe.db"), options).unwrap());
        let store = Store::new(db.clone());
        Env {
            sessions: store.sessions().clone(),
            messages: store.messages().clone(),
            store,
            catalog: catalog(),
            db,
            _dir: dir,
        }
    }

    pub fn session(&self, title: &str) -> Session {
        self.sessions.create(NewSession::titled(title)).unwrap()
    }

    pub fn compactor(
        &self,
        provider: &Arc<ScriptedProvider>,
        config: CompactionConfig,
    ) -> Compactor {
        Compactor::new(
            self.store.clone(),
            provider.clone(),
            self.catalog.clone(),
            config,
        )
    }

    pub fn user(&self, session: &str, text: &str) -> Message {
        self.messages
            .create(NewMessage::new(session, Role::User, vec![Part::text(text)]))
            .unwrap()
    }

    pub fn user_parts(&self, session: &str, parts: Vec<Part>) -> Message {
        self.messages
            .create(NewMessage::new(session, Role::User, parts))
            .unwrap()
    }

    pub fn assistant(&self, session: &str, parts: Vec<Part>) -> Message {
        let mut new = NewMessage::new(session, Role::Assistant, parts);
        new.model = Some(SMALL.into());
        self.messages.create(new).unwrap()
    }

    pub fn get(&self, id: &str) -> Session {
        self.sessions.get(id).unwrap()
    }
}

/// Text of exactly `tokens` heuristic tokens (plus the part's overhead when sent).
pub fn text_of(tokens: usize, word: &str) -> String {
    let mut s = format!("{word} ");
    while s.len() < tokens * 4 {
        s.push('x');
    }
    s.truncate(tokens * 4);
    s
}

/// A completed `read` call whose output is `tokens` heuristic tokens and starts with `word`.
pub fn read(call: &str, tokens: usize, word: &str) -> Part {
    Part::Tool(ToolPart {
        call_id: call.into(),
        tool: "read".into(),
        input: json!({"path": format!("{call}.rs")}),
        state: ToolState::Completed {
            output: text_of(tokens, word),
            title: String::new(),
            metadata: Value::Null,
            started_at: 1,
            ended_at: 2,
        },
        compacted_at: None,
        extra: Extra::new(),
    })
}

pub fn png(name: &str) -> Part {
    Part::File(FilePart {
        mime: "image/png".into(),
        filename: Some(name.into()),
        source: FileSource::Url {
            url: format!("file:///tmp/{name}"),
        },
        extra: Extra::new(),
    })
}

/// Every event received so far.
pub fn drain(sub: &Subscription<AgentEvent>) -> Vec<AgentEvent> {
    sub.try_iter().map(|e| e.unwrap().payload).collect()
}

/// Only the compaction progress events, by name.
pub fn progress(events: &[AgentEvent]) -> Vec<&'static str> {
    events
        .iter()
        .filter_map(|e| match e {
            AgentEvent::CompactionStarting { .. } => Some("starting"),
            AgentEvent::CompactionAnalyzing { .. } => Some("analyzing"),
            AgentEvent::CompactionSummarizing { .. } => Some("summarizing"),
            AgentEvent::CompactionDone { .. } => Some("done"),
            AgentEvent::CompactionFailed { .. } => Some("failed"),
            _ => None,
        })
        .collect()
}
