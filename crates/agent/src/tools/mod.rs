//! Tools the model may call: the [`Tool`] trait, what a call gets
//! ([`ToolContext`]) and returns ([`ToolOutput`] or [`ToolError`]), the
//! [`ToolRegistry`] the loop looks names up in, input validation against a
//! tool's JSON schema ([`schema`]), path confinement ([`path`]), and the
//! built-in tools ([`builtin`]).
//!
//! A tool never sees input that does not match its schema: the loop records
//! such a call as an error tool part (the model can read why and retry)
//! instead of running it.

pub mod builtin;
pub mod history;
pub mod path;
pub mod schema;

use std::collections::BTreeMap;
use std::fmt;
use std::path::PathBuf;
use std::sync::Arc;

use serde_json::Value;

use crate::cancel::CancelToken;
use crate::provider::ToolSpec;

pub use builtin::{CheckCommand, EditFile, ListDir, ReadFile, RunCheck, WriteFile};
pub use history::{FileRecorder, MAX_RECORDED_BYTES, RecordError};
pub use path::PathError;

/// What a running tool call knows about where it runs.
#[derive(Clone)]
pub struct ToolContext {
    /// The session the call belongs to.
    pub session_id: String,
    /// The assistant message holding the call.
    pub message_id: String,
    /// The provider's id of the call.
    pub call_id: String,
    /// The agent that made the call.
    pub agent: String,
    /// Canceled when the loop is: a long-running tool should check it (or
    /// wait on it) and return [`ToolError::Canceled`].
    pub cancel: CancelToken,
    /// The project directory; file tools are confined to it.
    pub project_root: PathBuf,
    /// Where `write_file` and `edit_file` record the files they change (see
    /// [`history`]); `None` records nothing. The runner sets its session service.
    pub files: Option<Arc<dyn FileRecorder>>,
}

impl fmt::Debug for ToolContext {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ToolContext")
            .field("session_id", &self.session_id)
            .field("message_id", &self.message_id)
            .field("call_id", &self.call_id)
            .field("agent", &self.agent)
            .field("cancel", &self.cancel)
            .field("project_root", &self.project_root)
            .field("files", &self.files.is_some())
            .finish()
    }
}

/// What a successful call returns.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ToolOutput {
    /// The result sent back to the model.
    pub output: String,
    /// A short title for UIs (`Read src/main.rs`).
    pub title: String,
    /// Tool-specific details kept on the part (`null` for none).
    pub metadata: Value,
}

impl ToolOutput {
    /// An output with this text and title and no metadata.
    pub fn new(output: impl Into<String>, title: impl Into<String>) -> ToolOutput {
        ToolOutput {
            output: output.into(),
            title: title.into(),
            metadata: Value::Null,
        }
    }
}

/// Why a tool call failed; its message is what the model reads.
#[derive(Debug, thiserror::Error)]
pub enum ToolError {
    /// The input is well-formed but unusable (e.g. the text to replace is not there).
    #[error("invalid input: {0}")]
    InvalidInput(String),
    /// The path is not allowed.
    #[error(transparent)]
    Path(#[from] PathError),
    /// A file-system operation failed.
    #[error("{action} failed: {source}")]
    Io {
        /// What was being done (`read src/a.rs`).
        action: String,
        /// The underlying failure.
        #[source]
        source: std::io::Error,
    },
    /// The call ran longer than allowed and was stopped.
    #[error("timed out after {after_ms} ms")]
    Timeout {
        /// The limit, in milliseconds.
        after_ms: u64,
    },
    /// The call was canceled.
    #[error("canceled")]
    Canceled,
    /// Any other failure, described for the model.
    #[error("{0}")]
    Failed(String),
}

/// A tool the model may call.
pub trait Tool: Send + Sync {
    /// The name the model calls it by (unique in a registry).
    fn name(&self) -> &str;

    /// What it does, for the model.
    fn description(&self) -> &str;

    /// The JSON schema of its input (see [`schema`] for the supported subset).
    fn input_schema(&self) -> Value;

    /// What permission rule patterns are matched against for this input: a
    /// path for file tools (resolved and made relative to the project root,
    /// so `./secrets/k`, `a/../secrets/k` or a symlink cannot dodge a
    /// `secrets/*` rule), a check name for checks. `None`: only rules whose
    /// pattern matches anything (`*`) apply.
    fn permission_subject(&self, input: &Value, ctx: &ToolContext) -> Option<String> {
        let _ = (input, ctx);
        None
    }

    /// Runs the call. `input` already matches [`Tool::input_schema`].
    fn run(&self, input: &Value, ctx: &ToolContext) -> Result<ToolOutput, ToolError>;
}

/// The tools a runner offers, by name.
#[derive(Clone, Default)]
pub struct ToolRegistry {
    tools: BTreeMap<String, Arc<dyn Tool>>,
}

impl fmt::Debug for ToolRegistry {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ToolRegistry")
            .field("tools", &self.tools.keys().collect::<Vec<_>>())
            .finish()
    }
}

impl ToolRegistry {
    /// An empty registry.
    pub fn new() -> ToolRegistry {
        ToolRegistry::default()
    }

    /// The built-in file tools (`read_file`, `write_file`, `edit_file`,
    /// `list_dir`) plus `run_check` over `checks` (omitted when empty).
    pub fn builtin(checks: BTreeMap<String, CheckCommand>) -> ToolRegistry {
        let mut registry = ToolRegistry::new()
            .with(ReadFile)
            .with(WriteFile)
            .with(EditFile)
            .with(ListDir);
        if !checks.is_empty() {
            registry.register(Arc::new(RunCheck::new(checks)));
        }
        registry
    }

    /// Adds (or replaces) a tool.
    pub fn register(&mut self, tool: Arc<dyn Tool>) -> &mut ToolRegistry {
        self.tools.insert(tool.name().to_owned(), tool);
        self
    }

    /// Builder form of [`ToolRegistry::register`].
    pub fn with(mut self, tool: impl Tool + 'static) -> ToolRegistry {
        self.register(Arc::new(tool));
        self
    }

    /// The tool called `name`.
    pub fn get(&self, name: &str) -> Option<&Arc<dyn Tool>> {
        self.tools.get(name)
    }

    /// Every tool's name, sorted.
    pub fn names(&self) -> impl Iterator<Item = &str> + '_ {
        self.tools.keys().map(String::as_str)
    }

    /// The specs of the tools `keep` accepts, sorted by name.
    pub fn specs(&self, mut keep: impl FnMut(&str) -> bool) -> Vec<ToolSpec> {
        self.tools
            .values()
            .filter(|t| keep(t.name()))
            .map(|t| spec_of(t.as_ref()))
            .collect()
    }
}

/// The [`ToolSpec`] the model is shown for `tool`.
pub fn spec_of(tool: &dyn Tool) -> ToolSpec {
    ToolSpec {
        name: tool.name().to_owned(),
        description: tool.description().to_owned(),
        input_schema: tool.input_schema(),
    }
}
