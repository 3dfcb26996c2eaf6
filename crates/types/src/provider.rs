//! The provider-neutral model interface: requests ([`ChatRequest`]), streamed
//! deltas ([`ProviderEvent`]), the assembled [`ProviderResponse`], the
//! [`Provider`] trait and its typed [`ProviderError`].
//!
//! A provider adapter translates a [`ChatRequest`] into its wire format,
//! reports deltas through the `on_event` callback as they arrive, and returns
//! the whole response at the end (a [`ResponseBuilder`] turns the deltas into
//! parts). Usage follows Scribe's disjoint convention ([`TokenUsage`]):
//! reasoning reported inside the output count is split off (scribe-agent's
//! `models::disjoint_usage` does it).
//!
//! scribe-agent ships `ScriptedProvider`, a deterministic provider for tests
//! and demos.

use std::sync::Arc;

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::part::{Part, ReasoningPart, TextPart, ToolPart};
use crate::role::{FinishReason, Role};
use crate::usage::TokenUsage;

/// One message of a request: who said it and its parts.
///
/// Parts are Scribe's own [`Part`]s, already transformed into what should be
/// sent (scribe-message's `conversation` view, then scribe-agent's compaction
/// steps); adapters skip parts that carry nothing for the model (step markers,
/// patches, finish markers, unknown types).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ChatMessage {
    /// The author.
    pub role: Role,
    /// The content, in order.
    pub parts: Vec<Part>,
}

impl ChatMessage {
    /// A message with these parts.
    pub fn new(role: Role, parts: Vec<Part>) -> ChatMessage {
        ChatMessage { role, parts }
    }

    /// A user message holding one text part.
    pub fn user_text(text: impl Into<String>) -> ChatMessage {
        ChatMessage::new(Role::User, vec![Part::text(text)])
    }

    /// An assistant message holding one text part.
    pub fn assistant_text(text: impl Into<String>) -> ChatMessage {
        ChatMessage::new(Role::Assistant, vec![Part::text(text)])
    }
}

/// A tool the model may call.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ToolSpec {
    /// The name the model calls it by.
    pub name: String,
    /// What it does, for the model.
    pub description: String,
    /// The JSON Schema of its input.
    pub input_schema: Value,
}

/// Everything sent to a provider for one model call.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ChatRequest {
    /// The model id (as scribe-agent's model catalog names it).
    pub model: String,
    /// The system prompt, if any.
    pub system: Option<String>,
    /// The conversation, oldest first.
    pub messages: Vec<ChatMessage>,
    /// The tools the model may call (empty: none, e.g. for summaries).
    pub tools: Vec<ToolSpec>,
}

impl ChatRequest {
    /// A request without system prompt or tools.
    pub fn new(model: impl Into<String>, messages: Vec<ChatMessage>) -> ChatRequest {
        ChatRequest {
            model: model.into(),
            system: None,
            messages,
            tools: Vec::new(),
        }
    }
}

/// One streamed piece of a response, in arrival order.
#[derive(Debug, Clone, PartialEq)]
pub enum ProviderEvent {
    /// More visible text.
    TextDelta(String),
    /// More reasoning text.
    ReasoningDelta(String),
    /// A complete tool call (adapters buffer streamed arguments until the
    /// input is whole JSON).
    ToolCall {
        /// The provider's id of the call.
        call_id: String,
        /// The tool's name.
        name: String,
        /// The arguments.
        input: Value,
    },
    /// The response ended; always the last event of a successful call.
    Finish {
        /// Why it ended.
        reason: FinishReason,
        /// What it used.
        usage: TokenUsage,
    },
}

/// A whole response.
#[derive(Debug, Clone, PartialEq)]
pub struct ProviderResponse {
    /// Text, reasoning and tool-call parts (tools in `pending`), in order.
    pub parts: Vec<Part>,
    /// Why the model stopped.
    pub finish_reason: FinishReason,
    /// What the call used.
    pub usage: TokenUsage,
}

impl ProviderResponse {
    /// The visible text, all text parts joined.
    pub fn text(&self) -> String {
        self.parts
            .iter()
            .filter_map(|p| match p {
                Part::Text(t) => Some(t.text.as_str()),
                _ => None,
            })
            .collect()
    }

    /// The tool calls, in order.
    pub fn tool_calls(&self) -> impl Iterator<Item = &ToolPart> + '_ {
        self.parts.iter().filter_map(|p| match p {
            Part::Tool(t) => Some(t),
            _ => None,
        })
    }
}

/// Assembles streamed [`ProviderEvent`]s into a [`ProviderResponse`]:
/// consecutive text deltas form one text part, consecutive reasoning deltas
/// one reasoning part, each tool call one pending tool part.
#[derive(Debug, Clone, Default)]
pub struct ResponseBuilder {
    parts: Vec<Part>,
    finish: Option<(FinishReason, TokenUsage)>,
}

impl ResponseBuilder {
    /// An empty builder.
    pub fn new() -> ResponseBuilder {
        ResponseBuilder::default()
    }

    /// Adds one event.
    pub fn push(&mut self, event: &ProviderEvent) {
        match event {
            ProviderEvent::TextDelta(delta) => {
                if let Some(Part::Text(last)) = self.parts.last_mut() {
                    last.text.push_str(delta);
                } else {
                    self.parts.push(Part::Text(TextPart {
                        text: delta.clone(),
                        ..TextPart::default()
                    }));
                }
            }
            ProviderEvent::ReasoningDelta(delta) => {
                if let Some(Part::Reasoning(last)) = self.parts.last_mut() {
                    last.text.push_str(delta);
                } else {
                    self.parts.push(Part::Reasoning(ReasoningPart {
                        text: delta.clone(),
                        ..ReasoningPart::default()
                    }));
                }
            }
            ProviderEvent::ToolCall {
                call_id,
                name,
                input,
            } => self
                .parts
                .push(Part::tool(call_id.clone(), name.clone(), input.clone())),
            ProviderEvent::Finish { reason, usage } => {
                self.finish = Some((reason.clone(), *usage));
            }
        }
    }

    /// The parts assembled so far.
    pub fn parts(&self) -> &[Part] {
        &self.parts
    }

    /// The response; `None` until a [`ProviderEvent::Finish`] was pushed.
    pub fn finish(self) -> Option<ProviderResponse> {
        let (finish_reason, usage) = self.finish?;
        Some(ProviderResponse {
            parts: self.parts,
            finish_reason,
            usage,
        })
    }
}

/// A model backend.
pub trait Provider: Send + Sync {
    /// The provider's name (`anthropic`, `openai`, `scripted`, …).
    fn name(&self) -> &str;

    /// Sends one request; reports deltas through `on_event` as they arrive and
    /// returns the whole response. On error, events already reported stand
    /// (the caller decides what to keep of a partial response).
    fn send(
        &self,
        request: &ChatRequest,
        on_event: &mut dyn FnMut(ProviderEvent),
    ) -> Result<ProviderResponse, ProviderError>;
}

impl<P: Provider + ?Sized> Provider for Arc<P> {
    fn name(&self) -> &str {
        (**self).name()
    }

    fn send(
        &self,
        request: &ChatRequest,
        on_event: &mut dyn FnMut(ProviderEvent),
    ) -> Result<ProviderResponse, ProviderError> {
        (**self).send(request, on_event)
    }
}

impl<P: Provider + ?Sized> Provider for Box<P> {
    fn name(&self) -> &str {
        (**self).name()
    }

    fn send(
        &self,
        request: &ChatRequest,
        on_event: &mut dyn FnMut(ProviderEvent),
    ) -> Result<ProviderResponse, ProviderError> {
        (**self).send(request, on_event)
    }
}

/// Why a model call failed.
#[derive(Debug, thiserror::Error)]
pub enum ProviderError {
    /// The provider refused the request for now; worth retrying later.
    #[error("{provider} rate limited the request")]
    RateLimited {
        /// The provider's name.
        provider: String,
        /// How long the provider asked to wait, if it said.
        retry_after_ms: Option<u64>,
    },
    /// The request is larger than the model's context window.
    #[error("request does not fit the context window of {model}")]
    ContextOverflow {
        /// The model id.
        model: String,
    },
    /// The provider answered with an error.
    #[error("{provider} returned an error{}: {message}", .status.map(|s| format!(" (status {s})")).unwrap_or_default())]
    Api {
        /// The provider's name.
        provider: String,
        /// The HTTP status, when there was one.
        status: Option<u16>,
        /// The provider's message.
        message: String,
    },
    /// The provider could not be reached or the connection broke.
    #[error("cannot reach {provider}")]
    Transport {
        /// The provider's name.
        provider: String,
        /// The underlying failure.
        #[source]
        source: Box<dyn std::error::Error + Send + Sync>,
    },
    /// The provider's answer could not be understood.
    #[error("invalid response from {provider}: {message}")]
    InvalidResponse {
        /// The provider's name.
        provider: String,
        /// What was wrong.
        message: String,
    },
    /// The call was canceled by the caller.
    #[error("model call canceled")]
    Canceled,
    /// A scripted provider (scribe-agent's `ScriptedProvider`) received more requests
    /// than it has turns.
    #[error(
        "scripted provider ran out of turns: request {request} found none (script held {scripted})"
    )]
    ScriptExhausted {
        /// The 1-based number of the request that found no turn.
        request: usize,
        /// How many turns the script held in total.
        scripted: usize,
    },
}

impl ProviderError {
    /// Whether retrying the same request later may succeed.
    pub fn is_retryable(&self) -> bool {
        match self {
            ProviderError::RateLimited { .. } | ProviderError::Transport { .. } => true,
            ProviderError::Api { status, .. } => matches!(status, Some(s) if *s >= 500),
            _ => false,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ToolState;
    use serde_json::json;

    #[test]
    fn builder_merges_consecutive_deltas_and_keeps_order() {
        let mut b = ResponseBuilder::new();
        for e in [
            ProviderEvent::ReasoningDelta("think".into()),
            ProviderEvent::ReasoningDelta("ing".into()),
            ProviderEvent::TextDelta("Hel".into()),
            ProviderEvent::TextDelta("lo".into()),
            ProviderEvent::ToolCall {
                call_id: "c1".into(),
                name: "read".into(),
                input: json!({"path": "a"}),
            },
            ProviderEvent::TextDelta("after".into()),
        ] {
            b.push(&e);
        }
        assert_eq!(b.parts().len(), 4);
        assert!(b.clone().finish().is_none(), "no finish event yet");
        b.push(&ProviderEvent::Finish {
            reason: FinishReason::ToolUse,
            usage: TokenUsage::default(),
        });
        let r = b.finish().unwrap();
        assert!(matches!(&r.parts[0], Part::Reasoning(p) if p.text == "thinking"));
        assert_eq!(r.text(), "Helloafter");
        let calls: Vec<_> = r.tool_calls().collect();
        assert_eq!(calls.len(), 1);
        assert_eq!(calls[0].state, ToolState::Pending);
        assert_eq!(r.finish_reason, FinishReason::ToolUse);
    }

    #[test]
    fn errors_are_lowercase_and_classified() {
        let e = ProviderError::Api {
            provider: "openai".into(),
            status: Some(503),
            message: "overloaded".into(),
        };
        assert_eq!(
            e.to_string(),
            "openai returned an error (status 503): overloaded"
        );
        assert!(e.is_retryable());
        let e = ProviderError::Api {
            provider: "openai".into(),
            status: None,
            message: "bad".into(),
        };
        assert_eq!(e.to_string(), "openai returned an error: bad");
        assert!(!e.is_retryable());
        assert!(!ProviderError::Canceled.is_retryable());
    }

    #[test]
    fn provider_is_object_safe_and_shareable() {
        fn assert_send_sync<T: Send + Sync>() {}
        assert_send_sync::<Arc<dyn Provider>>();
    }
}
