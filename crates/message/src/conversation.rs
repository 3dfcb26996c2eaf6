//! What a model is sent of a conversation — the one view, used by the agent for every
//! request and by [`to_conversation`] for the provider-neutral form.
//!
//! [`sent`] turns stored messages into [`ChatMessage`]s:
//! - **Where it starts** ([`sent_order`]): at the session's `summary_message_id` when it
//!   is among the messages. A summary is always sent as a user message (so every
//!   provider accepts it, also as the conversation's opening), and its compaction part
//!   ([`CompactionPart`]) says how it stands to what came before it:
//!   - a summary that **restarts** the conversation (the default) is sent first, then
//!     the recent messages it kept verbatim — those stored before it from its
//!     [`CompactionPart::keep_from`] on (none without one; for a continuation they lie
//!     in the session it continues, up to the hand-over) — then everything after it;
//!     what lies before `keep_from` is what the summary replaced and is not sent;
//!   - a summary that **keeps the words** ([`CompactionPart::keeps_words`]) is sent where
//!     it stands: the conversation before it is sent as it would have been without it
//!     (by these same rules, from the previous summary, which this one supersedes and
//!     which is not sent), then the summary, then what follows. Compaction cleared that
//!     conversation's tool outputs when it added the summary, so what stays is the
//!     words: user and assistant text and reasoning.
//!
//!   Without a summary among the messages every message is sent, from the first.
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
use crate::part::{CompactionPart, FileSource, Part, ToolPart};
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

/// One stored message as sent (`as_summary`: it is the summary, sent as a user message);
/// `None` when nothing of it is sent.
pub fn sent_message(message: &Message, as_summary: bool) -> Option<ChatMessage> {
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
    let role = if as_summary { Role::User } else { message.role };
    Some(ChatMessage::new(role, parts))
}

/// What a model is sent of `messages` (creation order; they may span a continuation and
/// the session it continues), by the rules of the module doc.
pub fn sent(messages: &[Message], summary_message_id: Option<&str>) -> Vec<ChatMessage> {
    sent_order(messages, summary_message_id)
        .into_iter()
        .filter_map(|(m, as_summary)| sent_message(m, as_summary))
        .collect()
}

/// The messages [`sent`] sends, in the order it sends them, each with whether it is the
/// summary (sent as a user message); messages with nothing to send are still listed.
pub fn sent_order<'a>(
    messages: &'a [Message],
    summary_message_id: Option<&str>,
) -> Vec<(&'a Message, bool)> {
    let summary = summary_message_id.and_then(|id| messages.iter().position(|m| m.id == id));
    let mut out = Vec::with_capacity(messages.len());
    push_order(messages, summary, &mut out);
    out
}

/// The compaction part of a summary message: how it stands to what came before it.
pub fn summary_compaction(message: &Message) -> Option<&CompactionPart> {
    message.parts.iter().find_map(|p| match &p.part {
        Part::Compaction(c) => Some(c),
        _ => None,
    })
}

fn push_order<'a>(
    messages: &'a [Message],
    summary: Option<usize>,
    out: &mut Vec<(&'a Message, bool)>,
) {
    let Some(k) = summary else {
        out.extend(messages.iter().map(|m| (m, false)));
        return;
    };
    let (before, rest) = messages.split_at(k);
    let (summary, after) = (&rest[0], &rest[1..]);
    let compaction = summary_compaction(summary);
    if compaction.is_some_and(|c| c.keeps_words) {
        // The conversation before it, as it was sent, less the summary it supersedes
        // (this one covers it).
        let previous = before.iter().rposition(|m| m.is_summary);
        let mut words = Vec::with_capacity(before.len());
        push_order(before, previous, &mut words);
        out.extend(words.into_iter().filter(|(_, as_summary)| !as_summary));
        out.push((summary, true));
    } else {
        out.push((summary, true));
        // The kept messages: from `keep_from` up to the summary (what the session it
        // lies in got after handing over to a continuation is not among them).
        let handed_over = (summary.created_at, summary.id.as_str());
        let kept = compaction
            .and_then(|c| c.keep_from.as_deref())
            .and_then(|id| before.iter().position(|m| m.id == id))
            .map_or(&[][..], |i| &before[i..]);
        out.extend(
            kept.iter()
                .filter(|m| (m.created_at, m.id.as_str()) < handed_over)
                .map(|m| (m, false)),
        );
    }
    out.extend(after.iter().map(|m| (m, false)));
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::message::StoredPart;
    use crate::usage::TokenUsage;

    fn message(id: &str, at: i64, role: Role, parts: Vec<Part>) -> Message {
        Message {
            id: id.to_owned(),
            session_id: "ses_1".to_owned(),
            parent_id: None,
            role,
            agent: None,
            provider: None,
            model: None,
            finish_reason: None,
            is_summary: false,
            usage: TokenUsage::default(),
            cost_usd: 0.0,
            error: None,
            created_at: at,
            updated_at: at,
            finished_at: Some(at),
            parts: parts
                .into_iter()
                .zip(0..)
                .map(|(part, position)| StoredPart {
                    id: format!("{id}_p{position}"),
                    position,
                    part,
                    created_at: at,
                    updated_at: at,
                })
                .collect(),
        }
    }

    fn say(id: &str, at: i64, role: Role) -> Message {
        message(id, at, role, vec![Part::text(id)])
    }

    fn summary(id: &str, at: i64, keep_from: Option<&str>, keeps_words: bool) -> Message {
        let mut m = message(
            id,
            at,
            Role::Assistant,
            vec![
                Part::Compaction(CompactionPart {
                    auto: true,
                    keep_from: keep_from.map(str::to_owned),
                    keeps_words,
                    ..CompactionPart::default()
                }),
                Part::text(id),
            ],
        );
        m.is_summary = true;
        m
    }

    fn order(messages: &[Message], summary: Option<&str>) -> Vec<(String, bool)> {
        sent_order(messages, summary)
            .into_iter()
            .map(|(m, s)| (m.id.clone(), s))
            .collect()
    }

    fn ids(pairs: &[(&str, bool)]) -> Vec<(String, bool)> {
        pairs.iter().map(|(id, s)| ((*id).to_owned(), *s)).collect()
    }

    #[test]
    fn a_restarting_summary_opens_then_its_kept_messages_then_what_follows() {
        let m = vec![
            say("u1", 1, Role::User),
            say("a1", 2, Role::Assistant),
            say("u2", 3, Role::User),
            say("a2", 4, Role::Assistant),
            summary("s", 5, Some("u2"), false),
            say("u3", 6, Role::User),
        ];
        let expect = ids(&[("s", true), ("u2", false), ("a2", false), ("u3", false)]);
        assert_eq!(order(&m, Some("s")), expect);
        // The same from the kept messages on (what the agent loads).
        assert_eq!(order(&m[2..], Some("s")), expect);
        // Without keep_from (summaries made before it existed): the summary alone.
        let mut old = m.clone();
        old[4] = summary("s", 5, None, false);
        assert_eq!(order(&old, Some("s")), ids(&[("s", true), ("u3", false)]));
        // Without a summary: everything.
        assert_eq!(order(&m, None).len(), 6);
        // The summary is sent as a user message.
        let sent = sent(&m, Some("s"));
        assert_eq!(sent[0].role, Role::User);
        assert_eq!(sent.len(), 4);
    }

    #[test]
    fn kept_messages_end_where_the_session_handed_over() {
        // A continuation: the ended session's messages, one added after the hand-over
        // (reopened), then the continuation's summary and its own.
        let m = vec![
            say("u1", 1, Role::User),
            say("u2", 3, Role::User),
            say("late", 9, Role::User),
            summary("s", 5, Some("u2"), false),
            say("u3", 10, Role::User),
        ];
        assert_eq!(
            order(&m, Some("s")),
            ids(&[("s", true), ("u2", false), ("u3", false)])
        );
    }

    #[test]
    fn a_summary_keeping_the_words_stands_after_them_and_supersedes_the_previous_one() {
        let m = vec![
            say("u1", 1, Role::User),
            say("a1", 2, Role::Assistant),
            summary("s1", 3, Some("u1"), true),
            say("u2", 4, Role::User),
            say("a2", 5, Role::Assistant),
            summary("s2", 6, Some("u1"), true),
            say("u3", 7, Role::User),
        ];
        assert_eq!(
            order(&m, Some("s2")),
            ids(&[
                ("u1", false),
                ("a1", false),
                ("u2", false),
                ("a2", false),
                ("s2", true),
                ("u3", false)
            ])
        );
        assert_eq!(
            order(&m[..5], Some("s1")),
            ids(&[
                ("u1", false),
                ("a1", false),
                ("s1", true),
                ("u2", false),
                ("a2", false)
            ])
        );
    }

    #[test]
    fn words_kept_after_a_restart_start_where_that_summary_left_off() {
        // r restarts (kept a1 on); k keeps the words of what r was sent with.
        let m = vec![
            say("u1", 1, Role::User),
            say("a1", 2, Role::Assistant),
            summary("r", 3, Some("a1"), false),
            say("u2", 4, Role::User),
            summary("k", 5, Some("a1"), true),
        ];
        assert_eq!(
            order(&m, Some("k")),
            ids(&[("a1", false), ("u2", false), ("k", true)])
        );
    }
}
