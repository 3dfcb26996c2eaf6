//! The summarising step's request: [`SUMMARY_PROMPT`] and [`summary_request`].

use scribe_message::Role;

use super::transform::clear_compacted_tool_outputs;
use crate::provider::{ChatMessage, ChatRequest};

/// Sent as the last user message when the history is summarised. The answer
/// replaces the history it summarises, so it asks for everything needed to
/// carry on: goal, instructions, discoveries, accomplished work, the files
/// being worked on, and next steps.
pub const SUMMARY_PROMPT: &str = "\
Provide a detailed but concise summary of the conversation above. It will replace the \
conversation, so write it for someone who has none of it and must carry on the work without \
asking the user to repeat anything. Use exactly these sections:

## Goal
What the user is trying to achieve, in their terms.

## Instructions
The instructions, constraints and preferences the user gave that still apply (quote them \
where the wording matters).

## Discoveries
What was learned about the code, the environment and the problem: facts, decisions and their \
reasons, and dead ends not to retry.

## Accomplished
What has been done and verified, what is in progress, and what is left.

## Files being worked on
Every relevant file path, with what was changed or still needs changing in each.

## Next steps
The concrete next actions, in order.

Only summarise what is in the conversation; do not invent anything and do not call tools.";

/// The request that asks `model` to summarise `history`: compacted tool
/// outputs cleared, [`SUMMARY_PROMPT`] appended as a user message, no tools.
pub fn summary_request(
    model: impl Into<String>,
    system: Option<String>,
    history: Vec<ChatMessage>,
) -> ChatRequest {
    let mut messages = clear_compacted_tool_outputs(history);
    messages.push(ChatMessage::new(
        Role::User,
        vec![scribe_message::Part::text(SUMMARY_PROMPT)],
    ));
    ChatRequest {
        model: model.into(),
        system,
        messages,
        tools: Vec::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn prompt_asks_for_every_section() {
        for section in [
            "## Goal",
            "## Instructions",
            "## Discoveries",
            "## Accomplished",
            "## Files being worked on",
            "## Next steps",
        ] {
            assert!(SUMMARY_PROMPT.contains(section), "{section}");
        }
    }

    #[test]
    fn request_appends_the_prompt_and_has_no_tools() {
        let history = vec![
            ChatMessage::user_text("fix the bug"),
            ChatMessage::assistant_text("done"),
        ];
        let r = summary_request("claude-haiku-4-5", Some("sys".into()), history.clone());
        assert_eq!(r.model, "claude-haiku-4-5");
        assert_eq!(r.system.as_deref(), Some("sys"));
        assert!(r.tools.is_empty());
        assert_eq!(r.messages[..2], history[..]);
        assert_eq!(r.messages[2], ChatMessage::user_text(SUMMARY_PROMPT));
    }
}
