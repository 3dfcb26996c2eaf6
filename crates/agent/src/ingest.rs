//! Prompt ingestion: external input becomes persisted, typed facts before any
//! model runs (OpenCode's "persist, then loop").
//!
//! A [`PromptInput`] holds only [`PartDraft`]s — text, a file, an agent
//! mention, a subtask — so a caller cannot submit a completed tool call or any
//! other state only the runtime may produce. Files are resolved before saving
//! ([`resolve_parts`]):
//!
//! - a text file → two synthetic text parts: `Read file <path>`, then its
//!   content (capped at [`IngestConfig::max_file_bytes`] with a truncation note);
//! - a directory → `Listed directory <path>` and the listing;
//! - a binary or image → a file part with its media type (by extension, then
//!   a NUL-byte / UTF-8 check), inline up to [`IngestConfig::max_inline_bytes`],
//!   else a `file://` URL;
//! - outside the session's allowed roots (its directory plus configured extra
//!   roots; `..` and symlinks resolved first) → [`AgentError::FileRefused`],
//!   nothing saved;
//! - any other failure → a visible synthetic text part saying what failed
//!   (never invented content) plus a [`LoopEvent::FileReadFailed`], which
//!   [`resolve_parts`] collects and the runner publishes only once the user
//!   message has committed (nothing when a hook refuses it or the save fails).
//!
//! Hooks then see the [`UserMessageDraft`] and may change it; what they leave
//! is what is saved: the user message, its parts and the
//! session settings the prompt implies (its model, its tool switches as permission
//! rules) in one transaction, whose events — the message, the session, the read
//! failures and [`LoopEvent::PromptSaved`] — go out only once it committed.

use std::collections::BTreeMap;
use std::fs::File;
use std::io::Read;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use scribe_message::{
    AgentPart, FilePart, FileSource, Message, NewMessage, Part, Role, SubtaskPart, TextPart,
};
use scribe_pubsub::Broker;
use scribe_session::{Session, Store};

use crate::agents::{AgentConfig, AgentRegistry};
use crate::error::AgentError;
use crate::events::{LoopEvent, emit};
use crate::models::ModelCatalog;
use crate::permission::{Ruleset, session_rules};
use crate::tools::PathError;
use crate::tools::builtin::list_directory;
use crate::tools::path::{canonical_roots, resolve_within};

/// What a caller may put in a prompt.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PartDraft {
    /// Text typed by the user.
    Text {
        /// The text.
        text: String,
    },
    /// A local file or directory to attach (relative to the session's directory).
    File {
        /// The path.
        path: String,
        /// The media type, if the caller knows it better than the extension.
        mime: Option<String>,
    },
    /// An agent the user addresses (`@reviewer`).
    Agent {
        /// The agent's name.
        name: String,
    },
    /// A sub-task for another agent.
    Subtask {
        /// What the sub-agent is asked.
        prompt: String,
        /// A short description for UIs.
        description: String,
        /// The sub-agent's name.
        agent: String,
    },
}

impl PartDraft {
    /// A text draft.
    pub fn text(text: impl Into<String>) -> PartDraft {
        PartDraft::Text { text: text.into() }
    }

    /// A file draft without a media type.
    pub fn file(path: impl Into<String>) -> PartDraft {
        PartDraft::File {
            path: path.into(),
            mime: None,
        }
    }
}

/// One prompt to a session.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct PromptInput {
    /// The session.
    pub session_id: String,
    /// What the user sends, in order.
    pub parts: Vec<PartDraft>,
    /// The agent to answer; default: an agent mention in the parts, else the
    /// runner's default agent.
    pub agent: Option<String>,
    /// The model; default: the agent's, else the session's last.
    pub model: Option<String>,
    /// Save the message but do not run the loop.
    pub no_reply: bool,
    /// Per-tool switches, stored as the session's permission rules
    /// (`true` → allow, `false` → deny).
    pub tools: Option<BTreeMap<String, bool>>,
}

impl PromptInput {
    /// A prompt of one text part.
    pub fn text(session_id: impl Into<String>, text: impl Into<String>) -> PromptInput {
        PromptInput {
            session_id: session_id.into(),
            parts: vec![PartDraft::text(text)],
            ..PromptInput::default()
        }
    }
}

/// The user message as hooks see it, after resolution and before saving.
#[derive(Debug, Clone, PartialEq)]
pub struct UserMessageDraft {
    /// The session (read-only in effect: changing it is ignored).
    pub session_id: String,
    /// The chosen agent.
    pub agent: String,
    /// The chosen model.
    pub model: String,
    /// The resolved parts.
    pub parts: Vec<Part>,
}

/// What a hook returns when it refuses the message.
pub type HookError = Box<dyn std::error::Error + Send + Sync>;

/// A callback that may change a user message before it is saved.
pub type Hook = dyn Fn(&mut UserMessageDraft) -> Result<(), HookError> + Send + Sync;

/// Limits and roots for file attachments.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IngestConfig {
    /// Roots besides the session's directory that attachments may come from.
    pub extra_roots: Vec<PathBuf>,
    /// The most bytes of a text file included.
    pub max_file_bytes: usize,
    /// Binary files up to this size are stored inline; larger ones by URL.
    pub max_inline_bytes: usize,
    /// The most directory entries listed.
    pub max_dir_entries: usize,
}

impl Default for IngestConfig {
    fn default() -> Self {
        IngestConfig {
            extra_roots: Vec::new(),
            max_file_bytes: 50 * 1024,
            max_inline_bytes: 1024 * 1024,
            max_dir_entries: 500,
        }
    }
}

/// Resolves drafts into parts (see the module doc). `base` is the session's
/// directory, relative paths are joined to it; `roots` are canonical. Read
/// failures are pushed onto `failures` as [`LoopEvent::FileReadFailed`] for
/// the caller to publish once the message is saved.
pub fn resolve_parts(
    drafts: &[PartDraft],
    base: &Path,
    roots: &[PathBuf],
    config: &IngestConfig,
    session_id: &str,
    failures: &mut Vec<LoopEvent>,
) -> Result<Vec<Part>, AgentError> {
    let mut parts = Vec::new();
    for draft in drafts {
        match draft {
            PartDraft::Text { text } => parts.push(Part::text(text.clone())),
            PartDraft::Agent { name } => parts.push(Part::Agent(AgentPart {
                name: name.clone(),
                ..AgentPart::default()
            })),
            PartDraft::Subtask {
                prompt,
                description,
                agent,
            } => parts.push(Part::Subtask(SubtaskPart {
                prompt: prompt.clone(),
                description: description.clone(),
                agent: agent.clone(),
                ..SubtaskPart::default()
            })),
            PartDraft::File { path, mime } => {
                let resolved = match resolve_within(roots, base, path) {
                    Ok(resolved) => resolved,
                    Err(e @ (PathError::Outside { .. } | PathError::NoRoots)) => {
                        return Err(AgentError::FileRefused {
                            path: path.clone(),
                            source: e,
                        });
                    }
                    Err(PathError::Io { source, .. }) => {
                        parts.push(read_failure(
                            path,
                            &source.to_string(),
                            session_id,
                            failures,
                        ));
                        continue;
                    }
                };
                match resolve_file(path, &resolved, mime.as_deref(), config) {
                    Ok(resolved_parts) => parts.extend(resolved_parts),
                    Err(error) => parts.push(read_failure(path, &error, session_id, failures)),
                }
            }
        }
    }
    Ok(parts)
}

/// What saving a prompt needs of a runner.
pub(crate) struct Ingestion<'a> {
    pub(crate) store: &'a Store,
    pub(crate) agents: &'a AgentRegistry,
    pub(crate) catalog: &'a ModelCatalog,
    pub(crate) hooks: &'a [Arc<Hook>],
    pub(crate) config: &'a IngestConfig,
    pub(crate) project_root: &'a Path,
    pub(crate) events: &'a Arc<Broker<LoopEvent>>,
}

impl Ingestion<'_> {
    /// Chooses agent and model, resolves files, runs hooks, and saves the message,
    /// its parts and the session settings the prompt implies in one transaction (see
    /// the module doc). Returns the message and the agent that answers.
    pub(crate) fn save(
        &self,
        input: &PromptInput,
        session: &Session,
    ) -> Result<(Message, AgentConfig), AgentError> {
        let mentioned = input.parts.iter().find_map(|p| match p {
            PartDraft::Agent { name } => Some(name.clone()),
            _ => None,
        });
        let agent_name = input
            .agent
            .clone()
            .or(mentioned)
            .unwrap_or_else(|| self.agents.default_name().to_owned());
        let agent = self.agents.agent(&agent_name)?;
        let model = choose_model(self.store, input, &agent, session)?;
        // Read the stored rules first: a session whose rules are unreadable is
        // refused before anything is saved.
        let mut rules = session_rules(session)?;

        let base = session
            .directory
            .as_ref()
            .map_or_else(|| self.project_root.to_path_buf(), PathBuf::from);
        let roots = canonical_roots(
            std::iter::once(base.as_path())
                .chain(self.config.extra_roots.iter().map(PathBuf::as_path)),
        );
        let mut read_failures = Vec::new();
        let parts = resolve_parts(
            &input.parts,
            &base,
            &roots,
            self.config,
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
            hook(&mut draft).map_err(|source| AgentError::Hook { index, source })?;
        }
        let agent = if draft.agent == agent.name {
            agent
        } else {
            self.agents.agent(&draft.agent)?
        };
        if !self.catalog.contains(&draft.model) {
            return Err(AgentError::UnknownModel(draft.model));
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
        let mut new = NewMessage::new(&session.id, Role::User, draft.parts);
        new.agent = Some(draft.agent.clone());
        new.model = Some(draft.model.clone());
        let message = new.into_message(self.store.database().now());
        // The message, its parts and the session settings the prompt implies commit
        // together: a crash cannot keep the prompt but lose the tool switches the user
        // gave with it. Read failures are reported only if the message is saved.
        self.store
            .database()
            .write(|tx| -> Result<(), AgentError> {
                self.store.messages().insert_tx(tx, &message)?;
                if settings_change {
                    self.store.sessions().set_prompt_settings_tx(
                        tx,
                        &session.id,
                        &draft.model,
                        permission.as_deref(),
                    )?;
                }
                let mut events = read_failures.clone();
                events.push(LoopEvent::PromptSaved {
                    session_id: session.id.clone(),
                    message_id: message.id.clone(),
                });
                let broker = Arc::clone(self.events);
                tx.after_commit(move || {
                    for event in events {
                        emit(&broker, event);
                    }
                });
                Ok(())
            })?;
        Ok((message, agent))
    }
}

/// The input's model, else the agent's, else the session's, else the model of the
/// session's last assistant message.
pub(crate) fn choose_model(
    store: &Store,
    input: &PromptInput,
    agent: &AgentConfig,
    session: &Session,
) -> Result<String, AgentError> {
    if let Some(model) = input.model.clone().or_else(|| agent.model.clone()) {
        return Ok(model);
    }
    if let Some(model) = &session.model {
        return Ok(model.clone());
    }
    let last = store
        .database()
        .read(|tx| scribe_message::store::last_assistant_model(tx, &session.id))?;
    last.ok_or_else(|| AgentError::NoModel {
        session_id: session.id.clone(),
    })
}

fn synthetic(text: String) -> Part {
    Part::Text(TextPart {
        text,
        synthetic: true,
        ..TextPart::default()
    })
}

fn read_failure(path: &str, error: &str, session_id: &str, failures: &mut Vec<LoopEvent>) -> Part {
    failures.push(LoopEvent::FileReadFailed {
        session_id: session_id.to_owned(),
        path: path.to_owned(),
        error: error.to_owned(),
    });
    synthetic(format!("Read file {path} failed: {error}"))
}

fn resolve_file(
    shown: &str,
    path: &Path,
    mime: Option<&str>,
    config: &IngestConfig,
) -> Result<Vec<Part>, String> {
    let meta = std::fs::metadata(path).map_err(|e| e.to_string())?;
    if meta.is_dir() {
        let listing = list_directory(path, config.max_dir_entries).map_err(|e| e.to_string())?;
        return Ok(vec![
            synthetic(format!("Listed directory {shown}")),
            synthetic(listing),
        ]);
    }
    let size = usize::try_from(meta.len()).unwrap_or(usize::MAX);
    let guessed = mime.map(str::to_owned).or_else(|| mime_by_extension(path));
    let binary_by_type = guessed.as_deref().is_some_and(|m| !is_text_mime(m));
    // Read enough to decide and to include: the text cap (plus one byte to see
    // truncation) or the whole inline-able binary.
    let limit = config
        .max_file_bytes
        .max(config.max_inline_bytes)
        .saturating_add(1);
    let mut bytes = Vec::new();
    File::open(path)
        .and_then(|f| f.take(limit as u64).read_to_end(&mut bytes))
        .map_err(|e| e.to_string())?;
    let text = if binary_by_type {
        None
    } else {
        sniff_text(&bytes[..bytes.len().min(config.max_file_bytes)])
    };
    match text {
        Some(text) => {
            let mut content = text.to_owned();
            if size > text.len() {
                content.push_str(&format!(
                    "\n[truncated: the file is {size} bytes; only the first {} are included]",
                    text.len()
                ));
            }
            Ok(vec![
                synthetic(format!("Read file {shown}")),
                synthetic(content),
            ])
        }
        None => {
            let mime = guessed.unwrap_or_else(|| "application/octet-stream".to_owned());
            let source = if size <= config.max_inline_bytes && bytes.len() == size {
                FileSource::Inline { data: bytes }
            } else {
                FileSource::Url {
                    url: format!("file://{}", path.display()),
                }
            };
            Ok(vec![Part::File(FilePart {
                mime,
                filename: path.file_name().map(|n| n.to_string_lossy().into_owned()),
                source,
                extra: Default::default(),
            })])
        }
    }
}

/// The text of `bytes` if they look like text: no NUL byte and valid UTF-8
/// (a character cut at the end by the size cap is dropped, not an error).
fn sniff_text(bytes: &[u8]) -> Option<&str> {
    if bytes.contains(&0) {
        return None;
    }
    match std::str::from_utf8(bytes) {
        Ok(text) => Some(text),
        Err(e) if e.error_len().is_none() => std::str::from_utf8(&bytes[..e.valid_up_to()]).ok(),
        Err(_) => None,
    }
}

fn is_text_mime(mime: &str) -> bool {
    mime.starts_with("text/")
        || matches!(
            mime,
            "application/json"
                | "application/toml"
                | "application/xml"
                | "application/x-sh"
                | "image/svg+xml"
                | "application/javascript"
                | "application/yaml"
        )
}

/// The media type of `path` by its extension, for the common kinds.
pub fn mime_by_extension(path: &Path) -> Option<String> {
    let ext = path.extension()?.to_str()?.to_ascii_lowercase();
    let mime = match ext.as_str() {
        "png" => "image/png",
        "jpg" | "jpeg" => "image/jpeg",
        "gif" => "image/gif",
        "webp" => "image/webp",
        "bmp" => "image/bmp",
        "ico" => "image/x-icon",
        "svg" => "image/svg+xml",
        "pdf" => "application/pdf",
        "zip" => "application/zip",
        "gz" => "application/gzip",
        "tar" => "application/x-tar",
        "wasm" => "application/wasm",
        "sqlite" | "db" => "application/vnd.sqlite3",
        "mp3" => "audio/mpeg",
        "mp4" => "video/mp4",
        "json" => "application/json",
        "toml" => "application/toml",
        "xml" => "application/xml",
        "yaml" | "yml" => "application/yaml",
        "js" => "application/javascript",
        "sh" => "application/x-sh",
        "md" => "text/markdown",
        "html" | "htm" => "text/html",
        "css" => "text/css",
        "csv" => "text/csv",
        "txt" | "rs" | "py" | "go" | "ts" | "c" | "h" | "cpp" | "java" | "sql" | "lock" => {
            "text/plain"
        }
        _ => return None,
    };
    Some(mime.to_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sniffing() {
        assert_eq!(sniff_text(b"hello"), Some("hello"));
        assert_eq!(sniff_text(b"a\0b"), None);
        assert_eq!(sniff_text(&[0xff, 0xfe, 0x41]), None);
        // "é" cut in half by the cap.
        assert_eq!(sniff_text(&[b'a', 0xc3]), Some("a"));
        assert_eq!(
            mime_by_extension(Path::new("x.PNG")).as_deref(),
            Some("image/png")
        );
        assert_eq!(mime_by_extension(Path::new("Makefile")), None);
    }
}
