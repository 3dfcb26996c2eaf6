//! Session titles: after a session's first exchange, a background thread asks
//! the provider for a short title in a title session (kind `title`, a child of
//! the session, so the call is recorded and its cost rolls into the parent),
//! then sets it through the title rules: a title already in use becomes the
//! next free title of its lineage (`Fix the build #2`).
//!
//! [`TitleHandle::join`] waits for the thread (tests, a CLI about to exit).

use std::sync::Arc;
use std::thread::JoinHandle;

use scribe_message::{FinishReason, NewMessage, Part, Role};
use scribe_session::{MAX_TITLE_CHARS, SessionService, Store, normalize_title};

use crate::error::AgentError;
use crate::provider::{ChatMessage, ChatRequest, Provider};
use crate::usage::UsageTracker;

/// The system prompt of a title request.
pub const TITLE_SYSTEM_PROMPT: &str = "You write titles for conversations. Answer with a title of at most eight words that says what the user wants: no quotes, no trailing punctuation, nothing else.";

/// The most characters a generated title keeps.
pub const MAX_GENERATED_TITLE_CHARS: usize = 60;

/// A title being generated in the background.
#[derive(Debug)]
pub struct TitleHandle {
    session_id: String,
    handle: JoinHandle<Result<Option<String>, AgentError>>,
}

impl TitleHandle {
    /// The session being titled.
    pub fn session_id(&self) -> &str {
        &self.session_id
    }

    /// Waits for the thread: the title set (`None` when the model gave nothing
    /// usable or the session got a title meanwhile).
    pub fn join(self) -> Result<Option<String>, AgentError> {
        self.handle.join().unwrap_or_else(|_| {
            Err(AgentError::TitlePanicked {
                session_id: self.session_id.clone(),
            })
        })
    }
}

/// What a title generator needs; cheap to clone into a thread.
#[derive(Clone)]
pub struct TitleGenerator {
    /// Sessions and messages.
    pub store: Store,
    /// The model backend.
    pub provider: Arc<dyn Provider>,
    /// Charges the title call.
    pub usage: Arc<UsageTracker>,
}

impl std::fmt::Debug for TitleGenerator {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TitleGenerator")
            .field("provider", &self.provider.name())
            .finish_non_exhaustive()
    }
}

impl TitleGenerator {
    /// Starts generating a title for `session_id` from `first_prompt` on `model`.
    pub fn spawn(self, session_id: String, model: String, first_prompt: String) -> TitleHandle {
        let id = session_id.clone();
        let handle = std::thread::spawn(move || self.generate(&session_id, &model, &first_prompt));
        TitleHandle {
            session_id: id,
            handle,
        }
    }

    /// Generates and sets the title on this thread (see the module doc).
    pub fn generate(
        &self,
        session_id: &str,
        model: &str,
        first_prompt: &str,
    ) -> Result<Option<String>, AgentError> {
        let (sessions, messages) = (self.store.sessions(), self.store.messages());
        let title_session = sessions.create_title_session(session_id)?;
        let request_text =
            format!("Write the title of a conversation that starts with:\n\n{first_prompt}");
        messages.create(NewMessage {
            model: Some(model.to_owned()),
            ..NewMessage::new(
                &title_session.id,
                Role::User,
                vec![Part::text(&request_text)],
            )
        })?;
        let request = ChatRequest {
            model: model.to_owned(),
            system: Some(TITLE_SYSTEM_PROMPT.to_owned()),
            messages: vec![ChatMessage::user_text(request_text)],
            tools: Vec::new(),
        };
        let answer = messages.create(NewMessage {
            provider: Some(self.provider.name().to_owned()),
            model: Some(model.to_owned()),
            ..NewMessage::new(&title_session.id, Role::Assistant, Vec::new())
        })?;
        let response = match self.provider.send(&request, &mut |_| {}) {
            Ok(response) => response,
            Err(source) => {
                messages.finish(&answer.id, FinishReason::Error)?;
                self.usage.finish_task_session(&title_session.id, "error")?;
                return Err(AgentError::Provider {
                    session_id: title_session.id,
                    source,
                });
            }
        };
        let text = response.text();
        messages.append_part(&answer.id, Part::text(&text))?;
        self.usage
            .track_usage(&title_session.id, model, &response.usage, Some(&answer.id))?;
        messages.finish(&answer.id, response.finish_reason.clone())?;
        self.usage
            .finish_task_session(&title_session.id, "completed")?;
        let Some(title) = clean_title(&text) else {
            return Ok(None);
        };
        set_title_in_lineage(sessions, session_id, &title)
    }
}

/// The first usable line of a model's answer as a title: markdown heading
/// marks, quotes and trailing punctuation removed, capped at
/// [`MAX_GENERATED_TITLE_CHARS`] on a word boundary; `None` if nothing is left.
pub fn clean_title(raw: &str) -> Option<String> {
    let line = raw.lines().map(str::trim).find(|l| !l.is_empty())?;
    let line = line
        .trim_start_matches('#')
        .trim()
        .trim_start_matches("Title:")
        .trim()
        .trim_matches(['"', '\'', '`', '*', '“', '”'])
        .trim_end_matches(['.', '!', '?', ':', ';', ','])
        .trim();
    let max = MAX_GENERATED_TITLE_CHARS.min(MAX_TITLE_CHARS);
    let mut title = String::new();
    for word in line.split_whitespace() {
        let extra = usize::from(!title.is_empty()) + word.chars().count();
        if title.chars().count() + extra > max {
            break;
        }
        if !title.is_empty() {
            title.push(' ');
        }
        title.push_str(word);
    }
    if title.is_empty() {
        // One overlong word: cut it.
        title = line.chars().take(max).collect();
    }
    normalize_title(&title).ok()
}

/// Sets `title` on `session_id` unless it already has one; a title in use
/// becomes the next free title of its lineage. Returns the title set (`None`
/// when the session already had one).
///
/// Check and set are one transaction
/// ([`SessionService::set_title_if_unset_tx`]): a title set meanwhile by
/// someone else is never overwritten, and two generators never both "win".
/// The `updated` event is published after commit.
pub fn set_title_in_lineage(
    sessions: &SessionService,
    session_id: &str,
    title: &str,
) -> Result<Option<String>, AgentError> {
    let set = sessions
        .database()
        .write(|tx| sessions.set_title_if_unset_tx(tx, session_id, title))?;
    Ok(set.and_then(|session| session.title))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cleans_model_answers() {
        assert_eq!(
            clean_title("\n# \"Fix the build.\"\nmore").as_deref(),
            Some("Fix the build")
        );
        assert_eq!(
            clean_title("Title: Refactor parser").as_deref(),
            Some("Refactor parser")
        );
        assert_eq!(clean_title("  \n "), None);
        let long = "word ".repeat(40);
        let t = clean_title(&long).unwrap();
        assert!(t.chars().count() <= MAX_GENERATED_TITLE_CHARS);
        assert!(t.ends_with("word"));
    }
}
