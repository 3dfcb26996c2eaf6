//! The conversation view: a session's messages as the provider-neutral list an LLM
//! request needs ([`MessageService::conversation`]).
//!
//! Rules:
//! - Only content a model reads is kept: text, reasoning (with its signature and provider
//!   metadata, which providers want back verbatim), tool calls and results, files and
//!   image URLs. Step markers, patches, finish markers and unknown parts are dropped; a
//!   message left with nothing is skipped.
//! - Tool calls and results are paired: an assistant message's tool parts become
//!   [`ConversationPart::ToolCall`]s in it, followed by one [`Role::Tool`] message holding
//!   a [`ConversationPart::ToolResult`] for every call, in the same order.
//!   - completed → its output; error → its message with `is_error`;
//!   - **pending or running** (the agent stopped mid-call: crash, cancel) → reported as
//!     interrupted ([`INTERRUPTED_TOOL_OUTPUT`], `is_error`) rather than skipped, because
//!     providers reject a tool call without a result, and dropping the call would hide
//!     from the model that it had asked for it;
//!   - a result cleared by compaction (`compacted_at` set) → [`CLEARED_TOOL_OUTPUT`].
//! - `from_summary`: the view starts at the newest compaction summary (included, presented
//!   as a user message, as OpenCode does), dropping what it summarises.
//! - `include_ancestors`: a continuation session's history is prefixed by the sessions it
//!   continues, root first, following `continuation` links only (a task or fork parent is
//!   not part of the conversation).

use serde::{Deserialize, Serialize};
use serde_json::Value;

use scribe_db::queries;
use scribe_db::rusqlite::OptionalExtension;

use crate::error::{MessageError, Result};
use crate::message::Message;
use crate::part::{FileSource, Part};
use crate::role::Role;
use crate::service::MessageService;
use crate::store;
use crate::tool_state::ToolState;

/// What replaces a tool output cleared by compaction.
pub const CLEARED_TOOL_OUTPUT: &str = "[Old tool result content cleared]";

/// The result given for a tool call that never finished.
pub const INTERRUPTED_TOOL_OUTPUT: &str = "[Tool execution was interrupted]";

/// What [`MessageService::conversation`] includes.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ConversationOptions {
    /// Prefix the history of the sessions this one continues (root first).
    pub include_ancestors: bool,
    /// Start at the newest compaction summary.
    pub from_summary: bool,
}

/// One provider-neutral message.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ConversationMessage {
    /// Who speaks.
    pub role: Role,
    /// What is said, in order.
    pub parts: Vec<ConversationPart>,
}

/// One piece of a [`ConversationMessage`].
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum ConversationPart {
    /// Plain text.
    Text {
        /// The text.
        text: String,
    },
    /// The model's reasoning, to send back as the provider requires.
    Reasoning {
        /// The reasoning text.
        text: String,
        /// The provider's signature, verbatim.
        signature: Option<String>,
        /// Other provider details, verbatim.
        metadata: Option<Value>,
    },
    /// The model asked for a tool.
    ToolCall {
        /// Pairs the call with its result.
        call_id: String,
        /// The tool's name.
        tool: String,
        /// Its arguments.
        input: Value,
    },
    /// What a tool returned.
    ToolResult {
        /// The call this answers.
        call_id: String,
        /// The tool's name.
        tool: String,
        /// The output (or error message).
        output: String,
        /// Whether the call failed or was interrupted.
        is_error: bool,
    },
    /// An attached file.
    File {
        /// Media type.
        mime: String,
        /// File name, when known.
        filename: Option<String>,
        /// Where the bytes are.
        source: FileSource,
    },
    /// An image by URL.
    ImageUrl {
        /// The URL.
        url: String,
        /// The provider's detail level.
        detail: Option<String>,
    },
}

impl MessageService {
    /// The conversation of `session_id` as an LLM request needs it (see the module doc).
    /// Unknown session → [`MessageError::NotFound`].
    pub fn conversation(
        &self,
        session_id: &str,
        options: ConversationOptions,
    ) -> Result<Vec<ConversationMessage>> {
        let messages = self.read(|conn| {
            let session = queries::get_session(conn, session_id)
                .optional()?
                .ok_or_else(|| MessageError::not_found("session", session_id))?;
            let mut chain: Vec<String> = Vec::new();
            if options.include_ancestors && session.kind == "continuation" {
                let ancestors = queries::list_session_ancestors(conn, session_id)?;
                // Walk up from the session while each link is a continuation.
                let mut child_kind = session.kind.as_str();
                for ancestor in ancestors.iter().rev() {
                    if child_kind != "continuation" {
                        break;
                    }
                    chain.push(ancestor.id.clone());
                    child_kind = ancestor.kind.as_str();
                }
                chain.reverse();
            }
            chain.push(session.id.clone());
            let mut all = Vec::new();
            for id in &chain {
                all.extend(store::load_session_messages(conn, id)?);
            }
            Ok(all)
        })?;
        Ok(to_conversation(messages, options.from_summary))
    }
}

/// Converts stored messages (creation order) to the conversation view.
pub fn to_conversation(messages: Vec<Message>, from_summary: bool) -> Vec<ConversationMessage> {
    let start = if from_summary {
        messages.iter().rposition(|m| m.is_summary).unwrap_or(0)
    } else {
        0
    };
    let mut out = Vec::new();
    for (i, msg) in messages.into_iter().enumerate().skip(start) {
        let role = if from_summary && i == start && msg.is_summary {
            Role::User
        } else {
            msg.role
        };
        let mut parts = Vec::new();
        let mut results = Vec::new();
        for stored in msg.parts {
            match stored.part {
                Part::Text(p) => parts.push(ConversationPart::Text { text: p.text }),
                Part::Reasoning(p) => parts.push(ConversationPart::Reasoning {
                    text: p.text,
                    signature: p.signature,
                    metadata: p.metadata,
                }),
                Part::Tool(p) => {
                    let (output, is_error) = match &p.state {
                        _ if p.compacted_at.is_some() && p.state.is_terminal() => {
                            (CLEARED_TOOL_OUTPUT.to_owned(), false)
                        }
                        ToolState::Completed { output, .. } => (output.clone(), false),
                        ToolState::Error { message, .. } => (message.clone(), true),
                        ToolState::Pending | ToolState::Running { .. } => {
                            (INTERRUPTED_TOOL_OUTPUT.to_owned(), true)
                        }
                    };
                    results.push(ConversationPart::ToolResult {
                        call_id: p.call_id.clone(),
                        tool: p.tool.clone(),
                        output,
                        is_error,
                    });
                    parts.push(ConversationPart::ToolCall {
                        call_id: p.call_id,
                        tool: p.tool,
                        input: p.input,
                    });
                }
                Part::File(p) => parts.push(ConversationPart::File {
                    mime: p.mime,
                    filename: p.filename,
                    source: p.source,
                }),
                Part::ImageUrl(p) => parts.push(ConversationPart::ImageUrl {
                    url: p.url,
                    detail: p.detail,
                }),
                _ => {}
            }
        }
        if !parts.is_empty() {
            out.push(ConversationMessage { role, parts });
        }
        if !results.is_empty() {
            out.push(ConversationMessage {
                role: Role::Tool,
                parts: results,
            });
        }
    }
    out
}
