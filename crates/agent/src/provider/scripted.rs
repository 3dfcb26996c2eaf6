//! [`ScriptedProvider`]: a deterministic [`Provider`] that plays back a list
//! of scripted turns and records every request it received.
//!
//! ```
//! use scribe_agent::provider::{ChatMessage, ChatRequest, Provider, ScriptedProvider, ScriptedTurn};
//! use scribe_message::TokenUsage;
//!
//! let provider = ScriptedProvider::new([
//!     ScriptedTurn::reply().tool_call("call_1", "read", serde_json::json!({"path": "a.rs"})),
//!     ScriptedTurn::reply().text("Done.").usage(TokenUsage { input: 10, output: 2, ..Default::default() }),
//! ]);
//! let request = ChatRequest::new("test-model", vec![ChatMessage::user_text("hi")]);
//! let first = provider.send(&request, &mut |_| {}).unwrap();
//! assert_eq!(first.tool_calls().count(), 1);
//! let second = provider.send(&request, &mut |_| {}).unwrap();
//! assert_eq!(second.text(), "Done.");
//! assert!(provider.send(&request, &mut |_| {}).is_err()); // the script ran out
//! assert_eq!(provider.requests().len(), 3);
//! ```

use std::collections::VecDeque;
use std::sync::{Mutex, MutexGuard, PoisonError};

use scribe_types::provider::{
    ChatRequest, Provider, ProviderError, ProviderEvent, ProviderResponse, ResponseBuilder,
};
use scribe_types::{FinishReason, TokenUsage};
use serde_json::Value;

/// One scripted answer to one request.
#[derive(Debug)]
pub enum ScriptedTurn {
    /// Stream these deltas and finish (or fail part-way).
    Reply(ScriptedReply),
    /// Fail at once with this error, streaming nothing.
    Error(ProviderError),
}

impl ScriptedTurn {
    /// Starts a reply; add deltas with the builder methods of [`ScriptedReply`].
    pub fn reply() -> ScriptedReply {
        ScriptedReply::default()
    }

    /// A reply holding one text delta that ends the turn.
    pub fn text(text: impl Into<String>) -> ScriptedTurn {
        ScriptedTurn::reply().text(text).into()
    }

    /// A turn that fails with `error`.
    pub fn error(error: ProviderError) -> ScriptedTurn {
        ScriptedTurn::Error(error)
    }
}

/// The deltas, usage and finish reason of a scripted reply.
///
/// The finish reason defaults to [`FinishReason::ToolUse`] when the reply
/// calls a tool and [`FinishReason::EndTurn`] otherwise.
#[derive(Debug, Default)]
pub struct ScriptedReply {
    events: Vec<ProviderEvent>,
    usage: TokenUsage,
    finish: Option<FinishReason>,
    fail_after: Option<ProviderError>,
}

impl ScriptedReply {
    /// Streams a text delta.
    pub fn text(mut self, delta: impl Into<String>) -> ScriptedReply {
        self.events.push(ProviderEvent::TextDelta(delta.into()));
        self
    }

    /// Streams a reasoning delta.
    pub fn reasoning(mut self, delta: impl Into<String>) -> ScriptedReply {
        self.events
            .push(ProviderEvent::ReasoningDelta(delta.into()));
        self
    }

    /// Calls a tool.
    pub fn tool_call(
        mut self,
        call_id: impl Into<String>,
        name: impl Into<String>,
        input: Value,
    ) -> ScriptedReply {
        self.events.push(ProviderEvent::ToolCall {
            call_id: call_id.into(),
            name: name.into(),
            input,
        });
        self
    }

    /// Reports this usage at the end.
    pub fn usage(mut self, usage: TokenUsage) -> ScriptedReply {
        self.usage = usage;
        self
    }

    /// Ends with this reason instead of the default.
    pub fn finish(mut self, reason: FinishReason) -> ScriptedReply {
        self.finish = Some(reason);
        self
    }

    /// Streams the deltas, then fails with `error` instead of finishing
    /// (a connection that breaks mid-answer).
    pub fn then_fail(mut self, error: ProviderError) -> ScriptedReply {
        self.fail_after = Some(error);
        self
    }
}

impl From<ScriptedReply> for ScriptedTurn {
    fn from(reply: ScriptedReply) -> ScriptedTurn {
        ScriptedTurn::Reply(reply)
    }
}

#[derive(Debug, Default)]
struct State {
    turns: VecDeque<ScriptedTurn>,
    scripted: usize,
    requests: Vec<ChatRequest>,
}

/// A deterministic provider for tests and demos: answer *n* is turn *n* of the
/// script; a request after the last turn fails with
/// [`ProviderError::ScriptExhausted`]. Every request is recorded, including
/// the ones that fail, so tests can assert exactly what was sent.
#[derive(Debug)]
pub struct ScriptedProvider {
    name: String,
    state: Mutex<State>,
}

impl ScriptedProvider {
    /// A provider named `scripted` that plays `turns` in order.
    pub fn new<T: Into<ScriptedTurn>>(turns: impl IntoIterator<Item = T>) -> ScriptedProvider {
        let turns: VecDeque<ScriptedTurn> = turns.into_iter().map(Into::into).collect();
        ScriptedProvider {
            name: "scripted".to_owned(),
            state: Mutex::new(State {
                scripted: turns.len(),
                turns,
                requests: Vec::new(),
            }),
        }
    }

    /// Renames the provider.
    pub fn with_name(mut self, name: impl Into<String>) -> ScriptedProvider {
        self.name = name.into();
        self
    }

    /// Appends a turn to the script.
    pub fn push(&self, turn: impl Into<ScriptedTurn>) {
        let mut state = self.lock();
        state.turns.push_back(turn.into());
        state.scripted += 1;
    }

    /// Every request received so far, oldest first.
    pub fn requests(&self) -> Vec<ChatRequest> {
        self.lock().requests.clone()
    }

    /// How many turns are left.
    pub fn remaining(&self) -> usize {
        self.lock().turns.len()
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        // The state stays consistent even if a callback panicked while we held
        // the lock, so a poisoned lock is still usable.
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

impl Provider for ScriptedProvider {
    fn name(&self) -> &str {
        &self.name
    }

    fn send(
        &self,
        request: &ChatRequest,
        on_event: &mut dyn FnMut(ProviderEvent),
    ) -> Result<ProviderResponse, ProviderError> {
        // Take the turn and release the lock before calling back into the
        // caller, so a callback may inspect `requests()` without deadlocking.
        let turn = {
            let mut state = self.lock();
            state.requests.push(request.clone());
            let request_number = state.requests.len();
            let scripted = state.scripted;
            state
                .turns
                .pop_front()
                .ok_or(ProviderError::ScriptExhausted {
                    request: request_number,
                    scripted,
                })?
        };
        let reply = match turn {
            ScriptedTurn::Error(error) => return Err(error),
            ScriptedTurn::Reply(reply) => reply,
        };
        let mut builder = ResponseBuilder::new();
        let calls_tool = reply
            .events
            .iter()
            .any(|e| matches!(e, ProviderEvent::ToolCall { .. }));
        for event in reply.events {
            builder.push(&event);
            on_event(event);
        }
        if let Some(error) = reply.fail_after {
            return Err(error);
        }
        let reason = reply.finish.unwrap_or(if calls_tool {
            FinishReason::ToolUse
        } else {
            FinishReason::EndTurn
        });
        let finish = ProviderEvent::Finish {
            reason,
            usage: reply.usage,
        };
        builder.push(&finish);
        on_event(finish);
        builder
            .finish()
            .ok_or_else(|| ProviderError::InvalidResponse {
                provider: self.name.clone(),
                message: "scripted reply did not finish".to_owned(),
            })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::provider::ChatMessage;
    use scribe_message::Part;
    use serde_json::json;
    use std::sync::Arc;

    fn request(text: &str) -> ChatRequest {
        ChatRequest::new("m", vec![ChatMessage::user_text(text)])
    }

    #[test]
    fn scripted_provider_is_shareable() {
        fn assert_send_sync<T: Send + Sync>() {}
        assert_send_sync::<ScriptedProvider>();
    }

    #[test]
    fn plays_turns_in_order_streaming_events_then_finish() {
        let usage = TokenUsage {
            input: 100,
            output: 20,
            cache_read: 5,
            cache_write: 1,
            reasoning: 3,
        };
        let p = ScriptedProvider::new([ScriptedTurn::reply()
            .reasoning("hmm")
            .text("Reading ")
            .text("it.")
            .tool_call("c1", "read", json!({"path": "x"}))
            .usage(usage)]);
        let mut events = Vec::new();
        let r = p.send(&request("go"), &mut |e| events.push(e)).unwrap();
        assert_eq!(events.len(), 5);
        assert_eq!(
            events.last(),
            Some(&ProviderEvent::Finish {
                reason: FinishReason::ToolUse,
                usage
            })
        );
        assert_eq!(r.usage, usage);
        assert_eq!(r.finish_reason, FinishReason::ToolUse);
        assert_eq!(r.parts.len(), 3);
        assert_eq!(r.text(), "Reading it.");
        assert!(matches!(&r.parts[2], Part::Tool(t) if t.call_id == "c1" && t.tool == "read"));
        assert_eq!(p.remaining(), 0);
    }

    #[test]
    fn records_requests_and_errors_clearly_when_exhausted() {
        let p = ScriptedProvider::new([ScriptedTurn::text("one")]);
        assert_eq!(
            p.send(&request("a"), &mut |_| {}).unwrap().finish_reason,
            FinishReason::EndTurn
        );
        let err = p.send(&request("b"), &mut |_| {}).unwrap_err();
        assert!(matches!(
            err,
            ProviderError::ScriptExhausted {
                request: 2,
                scripted: 1
            }
        ));
        assert_eq!(
            err.to_string(),
            "scripted provider ran out of turns: request 2 found none (script held 1)"
        );
        let sent = p.requests();
        assert_eq!(sent.len(), 2);
        assert_eq!(sent[1].messages[0], ChatMessage::user_text("b"));
    }

    #[test]
    fn scripted_errors_immediate_and_mid_stream() {
        let p = ScriptedProvider::new([
            ScriptedTurn::error(ProviderError::RateLimited {
                provider: "scripted".into(),
                retry_after_ms: Some(10),
            }),
            ScriptedTurn::reply()
                .text("partial")
                .then_fail(ProviderError::Canceled)
                .into(),
            ScriptedTurn::reply()
                .text("x")
                .finish(FinishReason::MaxTokens)
                .into(),
        ]);
        let mut events = Vec::new();
        assert!(matches!(
            p.send(&request("1"), &mut |e| events.push(e)),
            Err(ProviderError::RateLimited { .. })
        ));
        assert!(events.is_empty());
        assert!(matches!(
            p.send(&request("2"), &mut |e| events.push(e)),
            Err(ProviderError::Canceled)
        ));
        assert_eq!(events, vec![ProviderEvent::TextDelta("partial".into())]);
        let r = p.send(&request("3"), &mut |_| {}).unwrap();
        assert_eq!(r.finish_reason, FinishReason::MaxTokens);
    }

    #[test]
    fn shared_across_threads_each_turn_is_played_once() {
        let p = Arc::new(ScriptedProvider::new(
            (0..16).map(|i| ScriptedTurn::text(i.to_string())),
        ));
        let handles: Vec<_> = (0..4)
            .map(|_| {
                let p = Arc::clone(&p);
                std::thread::spawn(move || {
                    (0..4)
                        .map(|_| p.send(&request("t"), &mut |_| {}).unwrap().text())
                        .collect::<Vec<_>>()
                })
            })
            .collect();
        let mut seen: Vec<u32> = handles
            .into_iter()
            .flat_map(|h| h.join().unwrap())
            .map(|t| t.parse().unwrap())
            .collect();
        seen.sort_unstable();
        assert_eq!(seen, (0..16).collect::<Vec<_>>());
        assert_eq!(p.requests().len(), 16);
        p.push(ScriptedTurn::text("late"));
        assert_eq!(p.send(&request("x"), &mut |_| {}).unwrap().text(), "late");
        assert_eq!(p.name(), "scripted");
        assert_eq!(
            ScriptedProvider::new(Vec::<ScriptedTurn>::new())
                .with_name("fake")
                .name(),
            "fake"
        );
    }
}
