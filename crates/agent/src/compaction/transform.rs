//! What is sent: pure transforms from stored messages to the messages of a
//! request, and [`fit_messages`], which applies them until a request fits.
//!
//! None of these touch what is stored: a compacted tool output is still in the
//! database, searchable and exportable; only the copy sent to the model says
//! [`CLEARED_TOOL_OUTPUT`].

use scribe_message::{FileSource, Part, Role, TextPart, sent_tool};

use crate::estimate::TokenEstimator;
use crate::provider::ChatMessage;

/// What the model sees instead of a compacted tool output (the one constant, from
/// scribe-message's view of what is sent).
pub use scribe_message::CLEARED_TOOL_OUTPUT;

/// Replaces the result of every compacted, finished tool part with
/// [`CLEARED_TOOL_OUTPUT`] (and drops its metadata, which can be as large), by the rule
/// of [`scribe_message::sent_tool`]. Messages built by [`scribe_message::sent`] are
/// cleared already; this is for messages assembled otherwise.
pub fn clear_compacted_tool_outputs(mut messages: Vec<ChatMessage>) -> Vec<ChatMessage> {
    for part in messages.iter_mut().flat_map(|m| m.parts.iter_mut()) {
        if let Part::Tool(tool) = part
            && tool.compacted_at.is_some()
            && tool.state.is_terminal()
        {
            *tool = sent_tool(tool.clone());
        }
    }
    messages
}

/// Progressive compaction: keeps only the messages from the last user message
/// on. Without a user message, the list is returned unchanged.
///
/// The system prompt travels in [`crate::provider::ChatRequest::system`] and
/// is not affected.
pub fn keep_from_last_user(mut messages: Vec<ChatMessage>) -> Vec<ChatMessage> {
    if let Some(last_user) = messages.iter().rposition(|m| m.role == Role::User) {
        messages.drain(..last_user);
    }
    messages
}

/// Replaces every file and image part by a synthetic text part holding its
/// one-line [`media_description`], e.g. `[Attached image/png: screenshot.png]`.
pub fn strip_media(mut messages: Vec<ChatMessage>) -> Vec<ChatMessage> {
    for part in messages.iter_mut().flat_map(|m| m.parts.iter_mut()) {
        if let Some(description) = media_description(part) {
            *part = Part::Text(TextPart {
                text: description,
                synthetic: true,
                ..TextPart::default()
            });
        }
    }
    messages
}

/// The one line that stands for an attachment once media is stripped:
/// `[Attached <mime>: <name>]`, or `[Attached <mime>]` without a name.
/// `None` for parts that are not attachments.
pub fn media_description(part: &Part) -> Option<String> {
    let (mime, name) = match part {
        Part::File(file) => {
            let name = file.filename.clone().or_else(|| match &file.source {
                FileSource::Url { url } => url_file_name(url),
                FileSource::Inline { .. } => None,
            });
            (file.mime.clone(), name)
        }
        Part::ImageUrl(image) => match data_url_mime(&image.url) {
            Some(mime) => (mime.to_owned(), None),
            None => {
                let name = url_file_name(&image.url);
                let mime = name
                    .as_deref()
                    .and_then(image_mime_from_name)
                    .unwrap_or("image");
                (mime.to_owned(), name)
            }
        },
        _ => return None,
    };
    Some(match name {
        Some(name) => format!("[Attached {mime}: {name}]"),
        None => format!("[Attached {mime}]"),
    })
}

/// `data:image/png;base64,…` → `image/png`.
fn data_url_mime(url: &str) -> Option<&str> {
    let rest = url.strip_prefix("data:")?;
    let end = rest.find([';', ','])?;
    let mime = &rest[..end];
    (!mime.is_empty()).then_some(mime)
}

/// The last path segment of a URL, without query or fragment.
fn url_file_name(url: &str) -> Option<String> {
    if url.starts_with("data:") {
        return None;
    }
    let path = url.split(['?', '#']).next().unwrap_or_default();
    let name = path.rsplit('/').next().unwrap_or_default();
    (!name.is_empty() && !name.contains(':')).then(|| name.to_owned())
}

fn image_mime_from_name(name: &str) -> Option<&'static str> {
    let ext = name.rsplit_once('.')?.1.to_ascii_lowercase();
    Some(match ext.as_str() {
        "png" => "image/png",
        "jpg" | "jpeg" => "image/jpeg",
        "gif" => "image/gif",
        "webp" => "image/webp",
        "svg" => "image/svg+xml",
        _ => return None,
    })
}

/// A transform [`fit_messages`] applied beyond clearing compacted outputs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FitStep {
    /// Kept only the messages from the last user message on.
    Progressive,
    /// Replaced attachments by one-line descriptions.
    StripMedia,
}

/// Messages that fit, and what it took.
#[derive(Debug, Clone, PartialEq)]
pub struct FittedMessages {
    /// What to send.
    pub messages: Vec<ChatMessage>,
    /// Their estimated size.
    pub tokens: u64,
    /// The steps applied, in order (empty: the history fit as it was).
    pub steps: Vec<FitStep>,
}

/// Even the last user turn without attachments is too large.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "the conversation cannot fit the context window: even the last user turn alone, with \
     old tool outputs cleared and attachments stripped, needs about {tokens} tokens \
     but only {max_tokens} are available"
)]
pub struct DoesNotFit {
    /// The estimated size after every step.
    pub tokens: u64,
    /// The budget.
    pub max_tokens: u64,
}

/// Makes `messages` fit in `max_tokens` (estimated): compacted tool outputs
/// are always cleared; then, only while still too large, progressive
/// compaction and then media stripping are applied. Summarising and pruning,
/// which change what is stored, happen before this.
pub fn fit_messages<E: TokenEstimator + ?Sized>(
    messages: Vec<ChatMessage>,
    estimator: &E,
    max_tokens: u64,
) -> Result<FittedMessages, DoesNotFit> {
    let mut fitted = FittedMessages {
        messages: clear_compacted_tool_outputs(messages),
        tokens: 0,
        steps: Vec::new(),
    };
    fitted.tokens = estimator.estimate_messages(&fitted.messages);
    type Transform = fn(Vec<ChatMessage>) -> Vec<ChatMessage>;
    let steps: [(FitStep, Transform); 2] = [
        (FitStep::Progressive, keep_from_last_user),
        (FitStep::StripMedia, strip_media),
    ];
    for (step, transform) in steps {
        if fitted.tokens <= max_tokens {
            return Ok(fitted);
        }
        fitted.messages = transform(std::mem::take(&mut fitted.messages));
        fitted.tokens = estimator.estimate_messages(&fitted.messages);
        fitted.steps.push(step);
    }
    if fitted.tokens <= max_tokens {
        Ok(fitted)
    } else {
        Err(DoesNotFit {
            tokens: fitted.tokens,
            max_tokens,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::estimate::HeuristicEstimator;
    use scribe_message::{Extra, FilePart, ImageUrlPart, ToolPart, ToolState};
    use serde_json::{Value, json};

    fn tool(output: &str, compacted_at: Option<i64>) -> Part {
        Part::Tool(ToolPart {
            call_id: "c1".into(),
            tool: "read".into(),
            input: json!({"path": "a.rs"}),
            state: ToolState::Completed {
                output: output.into(),
                title: "a.rs".into(),
                metadata: json!({"lines": 500}),
                started_at: 1,
                ended_at: 2,
            },
            compacted_at,
            extra: Extra::new(),
        })
    }

    fn png(bytes: usize) -> Part {
        Part::File(FilePart {
            mime: "image/png".into(),
            filename: Some("screenshot.png".into()),
            source: FileSource::Inline {
                data: vec![7; bytes],
            },
            extra: Extra::new(),
        })
    }

    fn output_of(part: &Part) -> &str {
        match part {
            Part::Tool(t) => t.state.output().unwrap_or_default(),
            _ => "",
        }
    }

    #[test]
    fn compacted_outputs_are_replaced_by_the_marker_only() {
        let messages = vec![
            ChatMessage::user_text("refactor user.ts"),
            ChatMessage::new(
                Role::Assistant,
                vec![
                    Part::text("reading"),
                    tool("500 lines", Some(9)),
                    tool("fresh", None),
                ],
            ),
        ];
        let sent = clear_compacted_tool_outputs(messages.clone());
        assert_eq!(output_of(&sent[1].parts[1]), CLEARED_TOOL_OUTPUT);
        assert_eq!(output_of(&sent[1].parts[2]), "fresh");
        assert_eq!(sent[1].parts[0], messages[1].parts[0], "text untouched");
        let Part::Tool(t) = &sent[1].parts[1] else {
            panic!()
        };
        assert_eq!(t.input, json!({"path": "a.rs"}), "input still sent");
        assert!(matches!(
            &t.state,
            ToolState::Completed {
                metadata: Value::Null,
                ..
            }
        ));
        assert_eq!(sent[0], messages[0]);
        // Idempotent.
        assert_eq!(clear_compacted_tool_outputs(sent.clone()), sent);
    }

    #[test]
    fn progressive_keeps_from_the_last_user_message() {
        let messages = vec![
            ChatMessage::user_text("one"),
            ChatMessage::assistant_text("a"),
            ChatMessage::user_text("two"),
            ChatMessage::assistant_text("b"),
            ChatMessage::assistant_text("c"),
        ];
        let kept = keep_from_last_user(messages.clone());
        assert_eq!(kept, messages[2..].to_vec());
        let no_user = vec![ChatMessage::assistant_text("x")];
        assert_eq!(keep_from_last_user(no_user.clone()), no_user);
        assert!(keep_from_last_user(Vec::new()).is_empty());
    }

    #[test]
    fn media_is_replaced_by_one_line_descriptions() {
        let messages = vec![ChatMessage::new(
            Role::User,
            vec![
                Part::text("look"),
                png(1_000_000),
                Part::File(FilePart {
                    mime: "application/pdf".into(),
                    filename: None,
                    source: FileSource::Url {
                        url: "https://x.test/docs/spec.pdf?dl=1".into(),
                    },
                    extra: Extra::new(),
                }),
                Part::ImageUrl(ImageUrlPart {
                    url: "data:image/jpeg;base64,AAAA".into(),
                    ..ImageUrlPart::default()
                }),
                Part::ImageUrl(ImageUrlPart {
                    url: "https://x.test/shot.webp".into(),
                    ..ImageUrlPart::default()
                }),
            ],
        )];
        let stripped = strip_media(messages);
        let texts: Vec<_> = stripped[0]
            .parts
            .iter()
            .map(|p| match p {
                Part::Text(t) => (t.text.as_str(), t.synthetic),
                other => panic!("{other:?}"),
            })
            .collect();
        assert_eq!(
            texts,
            vec![
                ("look", false),
                ("[Attached image/png: screenshot.png]", true),
                ("[Attached application/pdf: spec.pdf]", true),
                ("[Attached image/jpeg]", true),
                ("[Attached image/webp: shot.webp]", true),
            ]
        );
        assert_eq!(media_description(&Part::text("x")), None);
    }

    #[test]
    fn fit_applies_steps_only_while_too_large() {
        let e = HeuristicEstimator;
        let history = vec![
            ChatMessage::user_text("x".repeat(4_000)), // ~1000 tokens
            ChatMessage::new(Role::Assistant, vec![tool(&"y".repeat(40_000), Some(1))]),
            ChatMessage::new(Role::User, vec![Part::text("now"), png(10)]),
        ];
        // Fits once the compacted output is cleared (~1000 + media + framing).
        let fitted = fit_messages(history.clone(), &e, 3_000).unwrap();
        assert!(fitted.steps.is_empty());
        assert_eq!(fitted.messages.len(), 3);
        assert_eq!(fitted.tokens, e.estimate_messages(&fitted.messages));

        // Needs progressive.
        let fitted = fit_messages(history.clone(), &e, 2_000).unwrap();
        assert_eq!(fitted.steps, vec![FitStep::Progressive]);
        assert_eq!(fitted.messages.len(), 1);
        assert!(
            fitted.messages[0]
                .parts
                .iter()
                .any(|p| matches!(p, Part::File(_)))
        );

        // Needs media stripped too.
        let last_turn = keep_from_last_user(history.clone());
        let with_media = e.estimate_messages(&last_turn);
        let without = e.estimate_messages(&strip_media(last_turn));
        assert!(without + 1_000 < with_media, "{without} vs {with_media}");
        let fitted = fit_messages(history.clone(), &e, without).unwrap();
        assert_eq!(
            fitted.steps,
            vec![FitStep::Progressive, FitStep::StripMedia]
        );
        assert_eq!(fitted.tokens, without);
        assert!(matches!(&fitted.messages[0].parts[1], Part::Text(t) if t.synthetic));
        // One token short of that: nothing else can help.
        assert!(fit_messages(history.clone(), &e, without - 1).is_err());

        // Nothing helps.
        let err = fit_messages(history, &e, 3).unwrap_err();
        assert_eq!(err.max_tokens, 3);
        assert!(err.tokens > 3);
        assert!(err.to_string().contains("cannot fit the context window"));
    }
}
