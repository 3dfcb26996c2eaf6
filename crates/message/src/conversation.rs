//! What a model is sent of a conversation — the one view, used by the agent for every
//! request and by [`to_conversation`] for the provider-neutral form.
//!
//! [`sent`] turns stored messages into [`ChatMessage`]s:
//! - **Where it starts**: at the session's `summary_message_id` when it is among the
//!   messages (that summary is sent first, as a user message, as OpenCode does, so every
//!   provider accepts it as the conversation's opening); otherwise at the first message.
//! - **Which parts**: only content a model reads ([`is_sent`]): text, reasoning (with
//!   its signature and provider metadata, which providers want back verbatim), tool
//!   calls, files, image URLs, agent mentions and subtasks. Step markers, patches,
//!   finish and compaction markers and unknown parts are dropped; a message left with
//!   nothing is skipped.
//! - **Tool results as sent** ([`sent_tool`]): a result cleared by compaction
//!   (`compacted_at` set on a finished call) is [`CLEARED_TOOL_OUTPUT`], completed and
//!   without metadata; a call still **pending or running** (the agent stopped mid-call:
//!   crash, cancel) failed with [`INTERRUPTED_TOOL_OUTPUT`] — reported rather than
//!   skipped, because providers reject a tool call without a result, and dropping the
//!   call would hide from the model that it had asked for it.
//!
//! [`to_conversation`] then pairs tool calls with results for adapters that want them
//! apart: an assistant message's tool parts become [`ConversationPart::ToolCall`]s in
//! it, followed by one [`Role::Tool`] message holding a [`ConversationPart::ToolResult`]
//! for every call, in the same order (agent mentions and subtasks, which have no
//! provider-neutral form, are left out there). scribe-session's
//! `SessionService::conversation` loads a session (and, on request, the sessions it
//! continues) and applies both.

use scribe_types::ChatMessage;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::message::Message;
use crate::part::{FileSource, Part, ToolPart};
use crate::role::Role;
use crate::tool_state::ToolState;

/// What replaces a tool output cleared by compaction.
pub const CLEARED_TOOL_OUTPUT: &str = "[Old tool result content cleared]";

/// The error of a tool call that never finished: what crash recovery stores on a call a
/// dead process left, and what a call still pending or running is sent as.
pub const INTERRUPTED_TOOL_OUTPUT: &str = "interrupted";

/// What scribe-session's `SessionService::conversation` includes.
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

/// Whether a part means anything to a model (see the module doc).
pub fn is_sent(part: &Part) -> bool {
    matches!(
        part,
        Part::Text(_)
            | Part::Reasoning(_)
            | Part::Tool(_)
            | Part::File(_)
            | Part::ImageUrl(_)
            | Part::Agent(_)
            | Part::Subtask(_)
    )
}

/// A tool call as it is sent (see the module doc): a compacted result cleared, an
/// unfinished call failed as interrupted, anything else unchanged.
pub fn sent_tool(mut tool: ToolPart) -> ToolPart {
    let cleared = tool.compacted_at.is_some() && tool.state.is_terminal();
    tool.state = match tool.state {
        ToolState::Completed {
            title,
            started_at,
            ended_at,
            ..
        } if cleared => ToolState::Completed {
            output: CLEARED_TOOL_OUTPUT.to_owned(),
            title,
            metadata: Value::Null,
            started_at,
            ended_at,
        },
        ToolState::Error {
            started_at,
            ended_at,
            ..
        } if cleared => ToolState::Completed {
            output: CLEARED_TOOL_OUTPUT.to_owned(),
            title: String::new(),
            metadata: Value::Null,
            started_at: started_at.unwrap_or(ended_at),
            ended_at,
        },
        ToolState::Pending => ToolState::Error {
            message: INTERRUPTED_TOOL_OUTPUT.to_owned(),
            started_at: None,
            ended_at: 0,
        },
        ToolState::Running { started_at } => ToolState::Error {
            message: INTERRUPTED_TOOL_OUTPUT.to_owned(),
            started_at: Some(started_at),
            ended_at: started_at,
        },
        other => other,
    };
    tool
}

/// One stored message as sent (`opening`: it is the summary the conversation starts
/// from, sent as a user message); `None` when nothing of it is sent.
pub fn sent_message(message: &Message, opening: bool) -> Option<ChatMessage> {
    let parts: Vec<Part> = message
        .parts
        .iter()
        .map(|p| &p.part)
        .filter(|p| is_sent(p))
        .map(|p| match p {
            Part::Tool(tool) => Part::Tool(sent_tool(tool.clone())),
            other => other.clone(),
        })
        .collect();
    if parts.is_empty() {
        return None;
    }
    let role = if opening { Role::User } else { message.role };
    Some(ChatMessage::new(role, parts))
}

/// What a model is sent of `messages` (creation order), starting at
/// `summary_message_id` when it is one of them (see the module doc).
pub fn sent(messages: &[Message], summary_message_id: Option<&str>) -> Vec<ChatMessage> {
    let summary = summary_message_id.and_then(|id| messages.iter().position(|m| m.id == id));
    let start = summary.unwrap_or(0);
    messages[start..]
        .iter()
        .enumerate()
        .filter_map(|(i, m)| sent_message(m, i == 0 && summary.is_some()))
        .collect()
}

/// The provider-neutral form of what is sent: tool calls paired with their results
/// (see the module doc).
pub fn to_conversation(sent: Vec<ChatMessage>) -> Vec<ConversationMessage> {
    let mut out = Vec::new();
    for message in sent {
        let mut parts = Vec::new();
        let mut results = Vec::new();
        for part in message.parts {
            match part {
                Part::Text(p) => parts.push(ConversationPart::Text { text: p.text }),
                Part::Reasoning(p) => parts.push(ConversationPart::Reasoning {
                    text: p.text,
                    signature: p.signature,
                    metadata: p.metadata,
                }),
                Part::Tool(p) => {
                    let (output, is_error) = match &p.state {
                        ToolState::Completed { output, .. } => (output.clone(), false),
                        ToolState::Error { message, .. } => (message.clone(), true),
                        // `sent` leaves no call unfinished.
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
            out.push(ConversationMessage {
                role: message.role,
                parts,
            });
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
