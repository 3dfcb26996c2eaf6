//! Token estimates for content that has no reported usage yet
//! ([`TokenEstimator`], [`HeuristicEstimator`]).
//!
//! Estimates decide *when* to compact and *what* to prune, so they only need
//! to be deterministic and roughly proportional to what a provider would
//! count; they never feed into cost, which always uses reported usage.
//!
//! Parts are estimated as they would be *sent* ([`scribe_message::sent`]):
//! a compacted tool output counts as [`CLEARED_TOOL_OUTPUT`], a file or image
//! as a fixed [`MEDIA_PART_TOKENS`] (once media is stripped it is a text part
//! holding its one-line description, counted as text), and bookkeeping parts
//! (step markers, patches, finish markers, compaction markers, unknown types)
//! as nothing.

use scribe_message::{CLEARED_TOOL_OUTPUT, Part, ToolPart, ToolState};
use serde_json::Value;

use crate::provider::{ChatMessage, ChatRequest, ToolSpec};

/// Framing tokens added for every part that is sent.
pub const PART_OVERHEAD_TOKENS: u64 = 3;
/// Framing tokens added for every message (role, separators).
pub const MESSAGE_OVERHEAD_TOKENS: u64 = 4;
/// What one attached file or image is assumed to take. Deterministic on
/// purpose: it does not depend on the bytes. About what a provider charges for
/// a typical screenshot (Anthropic: ~1,600 tokens for a 1.15 megapixel image).
pub const MEDIA_PART_TOKENS: u64 = 1_600;
/// Framing tokens added for every tool specification.
pub const TOOL_SPEC_OVERHEAD_TOKENS: u64 = 8;

/// Estimates how many tokens content will take in a model's context.
///
/// Only [`TokenEstimator::estimate_text`] is required; the other methods build
/// on it and may be overridden by an estimator that knows a provider's framing.
pub trait TokenEstimator: Send + Sync {
    /// Tokens of plain text.
    fn estimate_text(&self, text: &str) -> u64;

    /// Tokens of one part as it would be sent ([`default_part_estimate`]).
    fn estimate_part(&self, part: &Part) -> u64 {
        default_part_estimate(self, part)
    }

    /// Tokens of several parts.
    fn estimate_parts(&self, parts: &[Part]) -> u64 {
        parts.iter().map(|p| self.estimate_part(p)).sum()
    }

    /// Tokens of one message, framing included.
    fn estimate_message(&self, message: &ChatMessage) -> u64 {
        MESSAGE_OVERHEAD_TOKENS + self.estimate_parts(&message.parts)
    }

    /// Tokens of a conversation.
    fn estimate_messages(&self, messages: &[ChatMessage]) -> u64 {
        messages.iter().map(|m| self.estimate_message(m)).sum()
    }

    /// Tokens of one tool specification (name, description, schema).
    fn estimate_tool_spec(&self, spec: &ToolSpec) -> u64 {
        TOOL_SPEC_OVERHEAD_TOKENS
            + self.estimate_text(&spec.name)
            + self.estimate_text(&spec.description)
            + self.estimate_text(&json_text(&spec.input_schema))
    }

    /// Tokens of a whole request: system prompt, tool specs and messages.
    fn estimate_request(&self, request: &ChatRequest) -> u64 {
        let system = request
            .system
            .as_deref()
            .map_or(0, |s| MESSAGE_OVERHEAD_TOKENS + self.estimate_text(s));
        let tools: u64 = request
            .tools
            .iter()
            .map(|t| self.estimate_tool_spec(t))
            .sum();
        system + tools + self.estimate_messages(&request.messages)
    }
}

/// How a part is estimated unless an estimator overrides it.
///
/// - text, reasoning: the text;
/// - tool: the name, the input as compact JSON, and the result as sent (the
///   output, [`CLEARED_TOOL_OUTPUT`] once compacted, or the error message;
///   nothing while pending or running);
/// - file, image URL: [`MEDIA_PART_TOKENS`];
/// - agent mention, subtask: their names and prompt;
/// - everything else: 0, it is not sent.
///
/// Every sent part adds [`PART_OVERHEAD_TOKENS`].
pub fn default_part_estimate<E: TokenEstimator + ?Sized>(estimator: &E, part: &Part) -> u64 {
    let body = match part {
        Part::Text(p) => estimator.estimate_text(&p.text),
        Part::Reasoning(p) => estimator.estimate_text(&p.text),
        Part::Tool(p) => {
            estimator.estimate_text(&p.tool)
                + estimator.estimate_text(&json_text(&p.input))
                + tool_result_tokens(estimator, p)
        }
        Part::File(_) | Part::ImageUrl(_) => MEDIA_PART_TOKENS,
        Part::Agent(p) => estimator.estimate_text(&p.name),
        Part::Subtask(p) => {
            estimator.estimate_text(&p.agent)
                + estimator.estimate_text(&p.description)
                + estimator.estimate_text(&p.prompt)
        }
        Part::StepStart(_)
        | Part::StepFinish(_)
        | Part::Compaction(_)
        | Part::Patch(_)
        | Part::Finish(_)
        | Part::Unknown(_) => return 0,
    };
    PART_OVERHEAD_TOKENS + body
}

/// Tokens of a tool call's result as sent: what pruning it would save (the
/// output) or what it costs once pruned (the marker).
pub fn tool_result_tokens<E: TokenEstimator + ?Sized>(estimator: &E, tool: &ToolPart) -> u64 {
    match &tool.state {
        ToolState::Completed { .. } if tool.compacted_at.is_some() => {
            estimator.estimate_text(CLEARED_TOOL_OUTPUT)
        }
        ToolState::Completed { output, .. } => estimator.estimate_text(output),
        ToolState::Error { message, .. } => estimator.estimate_text(message),
        ToolState::Pending | ToolState::Running { .. } => 0,
    }
}

/// JSON as a model sees it: a string as its contents, `null` as nothing,
/// anything else compact.
fn json_text(value: &Value) -> String {
    match value {
        Value::Null => String::new(),
        Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

/// The default heuristic: about 4 ASCII characters per token, 1 token per CJK
/// character (Han, kana, Hangul, fullwidth forms), 2 other non-ASCII
/// characters (Cyrillic, accented Latin, emoji …) per token, rounded up.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct HeuristicEstimator;

impl TokenEstimator for HeuristicEstimator {
    fn estimate_text(&self, text: &str) -> u64 {
        // Count in quarter tokens so the three rates stay exact integers.
        let quarters: u64 = text
            .chars()
            .map(|c| {
                if c.is_ascii() {
                    1
                } else if is_cjk(c) {
                    4
                } else {
                    2
                }
            })
            .sum();
        quarters.div_ceil(4)
    }
}

fn is_cjk(c: char) -> bool {
    matches!(u32::from(c),
        0x1100..=0x11FF       // Hangul Jamo
        | 0x2E80..=0x9FFF     // radicals, CJK punctuation, kana, Bopomofo, Ext A, unified ideographs
        | 0xA960..=0xA97F     // Hangul Jamo Extended-A
        | 0xAC00..=0xD7AF     // Hangul syllables
        | 0xF900..=0xFAFF     // CJK compatibility ideographs
        | 0xFF00..=0xFFEF     // halfwidth and fullwidth forms
        | 0x20000..=0x323AF   // ideograph extensions B–H
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use scribe_message::{Extra, FilePart, FileSource, ImageUrlPart, StepStartPart};
    use serde_json::json;

    const E: HeuristicEstimator = HeuristicEstimator;

    fn completed(output: &str) -> ToolState {
        ToolState::Completed {
            output: output.into(),
            title: String::new(),
            metadata: Value::Null,
            started_at: 1,
            ended_at: 2,
        }
    }

    #[test]
    fn text_rates_by_script() {
        assert_eq!(E.estimate_text(""), 0);
        assert_eq!(E.estimate_text("abcd"), 1);
        assert_eq!(E.estimate_text("abcde"), 2);
        assert_eq!(E.estimate_text(&"x".repeat(4_000)), 1_000);
        assert_eq!(E.estimate_text("你好世界"), 4);
        assert_eq!(E.estimate_text("こんにちは"), 5);
        assert_eq!(E.estimate_text("안녕"), 2);
        assert_eq!(E.estimate_text("привет"), 3);
        // 4 ASCII (1) + 2 Han (2) = 3.
        assert_eq!(E.estimate_text("ab你好cd"), 3);
        assert_eq!(E.estimate_text("ab你好cd"), E.estimate_text("ab你好cd"));
    }

    #[test]
    fn parts_count_as_sent() {
        let text = Part::text("abcdefgh");
        assert_eq!(E.estimate_part(&text), PART_OVERHEAD_TOKENS + 2);

        let mut tool = ToolPart {
            call_id: "c".into(),
            tool: "read".into(),
            input: json!({"path": "src/lib.rs"}),
            state: ToolState::Pending,
            compacted_at: None,
            extra: Extra::new(),
        };
        let input_tokens = E.estimate_text(r#"{"path":"src/lib.rs"}"#);
        let pending = PART_OVERHEAD_TOKENS + 1 + input_tokens;
        assert_eq!(E.estimate_part(&Part::Tool(tool.clone())), pending);

        tool.state = completed(&"y".repeat(400));
        assert_eq!(E.estimate_part(&Part::Tool(tool.clone())), pending + 100);
        assert_eq!(tool_result_tokens(&E, &tool), 100);

        tool.compacted_at = Some(9);
        let marker = E.estimate_text(CLEARED_TOOL_OUTPUT);
        assert_eq!(E.estimate_part(&Part::Tool(tool.clone())), pending + marker);

        tool.compacted_at = None;
        tool.state = ToolState::Error {
            message: "boom".into(),
            started_at: None,
            ended_at: 3,
        };
        assert_eq!(E.estimate_part(&Part::Tool(tool)), pending + 1);
    }

    #[test]
    fn media_counts_as_a_fixed_size_and_bookkeeping_as_nothing() {
        let file = Part::File(FilePart {
            mime: "image/png".into(),
            filename: Some("screenshot.png".into()),
            source: FileSource::Inline {
                data: vec![0; 1_000_000],
            },
            extra: Extra::new(),
        });
        assert_eq!(
            E.estimate_part(&file),
            PART_OVERHEAD_TOKENS + MEDIA_PART_TOKENS
        );
        let image = Part::ImageUrl(ImageUrlPart {
            url: "https://x.test/a/b.jpg".into(),
            ..ImageUrlPart::default()
        });
        assert_eq!(
            E.estimate_part(&image),
            PART_OVERHEAD_TOKENS + MEDIA_PART_TOKENS
        );
        assert_eq!(
            E.estimate_part(&Part::StepStart(StepStartPart::default())),
            0
        );
        assert_eq!(
            E.estimate_part(&Part::Unknown(json!({"type": "future"}))),
            0
        );
    }

    #[test]
    fn requests_add_system_tools_and_message_framing() {
        let messages = vec![
            ChatMessage::user_text("abcd"),
            ChatMessage::assistant_text(""),
        ];
        let mut request = ChatRequest::new("m", messages.clone());
        let bare = E.estimate_request(&request);
        assert_eq!(
            bare,
            2 * MESSAGE_OVERHEAD_TOKENS + 2 * PART_OVERHEAD_TOKENS + 1
        );
        assert_eq!(bare, E.estimate_messages(&messages));
        request.system = Some("abcdefgh".into());
        request.tools.push(ToolSpec {
            name: "read".into(),
            description: "abcd".into(),
            input_schema: json!({}),
        });
        assert_eq!(
            E.estimate_request(&request),
            bare + MESSAGE_OVERHEAD_TOKENS + 2 + TOOL_SPEC_OVERHEAD_TOKENS + 1 + 1 + 1
        );
    }
}
