//! [`SessionService::conversation`]: a session's messages as an LLM request needs them,
//! in the provider-neutral form ([`scribe_message::to_conversation`] over the one view
//! of what a model is sent, [`scribe_message::sent`]).
//!
//! This lives with the sessions because two of its rules are about sessions: where the
//! conversation starts (the session's `summary_message_id`) and which sessions it spans
//! (with [`ConversationOptions::include_ancestors`], the sessions a continuation
//! continues, root first, following `continuation` links only — a task or fork parent is
//! not part of the conversation).

use scribe_message::{ConversationMessage, ConversationOptions, sent, store, to_conversation};

use crate::error::Result;
use crate::service::{SessionService, load};
use crate::session::{SessionKind, sessions};

impl SessionService {
    /// The conversation of `session_id` as an LLM request needs it (see the module doc).
    /// With [`ConversationOptions::from_summary`], it starts at the session's summary
    /// (sent as a user message). Unknown session → [`crate::SessionError::NotFound`].
    pub fn conversation(
        &self,
        session_id: &str,
        options: ConversationOptions,
    ) -> Result<Vec<ConversationMessage>> {
        let (messages, summary) = self.db.read(|tx| -> Result<_> {
            let session = load(tx, session_id)?;
            let mut chain: Vec<String> = Vec::new();
            if options.include_ancestors && session.kind == SessionKind::Continuation {
                let ancestors = sessions(tx.q().list_session_ancestors(session_id)?)?;
                // Walk up from the session while each link is a continuation.
                let mut child_kind = session.kind;
                for ancestor in ancestors.iter().rev() {
                    if child_kind != SessionKind::Continuation {
                        break;
                    }
                    chain.push(ancestor.id.clone());
                    child_kind = ancestor.kind;
                }
                chain.reverse();
            }
            chain.push(session.id.clone());
            let mut all = Vec::new();
            for id in &chain {
                all.extend(store::load_session_messages(tx, id)?);
            }
            Ok((all, session.summary_message_id))
        })?;
        let start = summary.as_deref().filter(|_| options.from_summary);
        Ok(to_conversation(sent(&messages, start)))
    }
}
