//! `scribe fork`: copy a conversation up to a message into a new session.

use std::io::Write;

use clap::Args;

use crate::context::Context;
use crate::error::CliError;

/// Copy a session's conversation, up to and including one message, into a new session.
///
/// The fork is linked to the original (kind `fork`) and starts with zero usage: what the
/// copied turns cost was paid by the original.
#[derive(Debug, Args)]
pub struct ForkCmd {
    /// The session: an id, a unique id prefix, or a title.
    pub session: String,
    /// The last message to copy (an id or unique id prefix) [default: the last message].
    #[arg(long, value_name = "MESSAGE", value_parser = message_id)]
    pub at: Option<String>,
}

impl ForkCmd {
    /// Runs the command.
    pub fn run(self, ctx: &Context) -> Result<(), CliError> {
        let session = ctx.resolve(&self.session)?;
        let at = match &self.at {
            Some(wanted) => ctx.resolve_message(&session, wanted)?,
            None => ctx
                .db
                .read(|tx| scribe_message::store::last_message_id(tx, &session.id))?
                .ok_or_else(|| CliError::EmptySession(session.id.clone()))?,
        };
        let fork = ctx.sessions.fork(&session.id, &at)?;
        let mut out = anstream::stdout().lock();
        writeln!(
            out,
            "forked {} at {at} into {} ({})",
            session.id,
            fork.id,
            crate::ui::plural(fork.message_count, "message")
        )?;
        Ok(())
    }
}

/// `--at` as typed: an empty or blank value names no message (as a prefix it matched every
/// message of the session), so it is a usage error.
fn message_id(text: &str) -> Result<String, String> {
    if text.trim().is_empty() {
        return Err("give a message id or a unique id prefix".to_owned());
    }
    Ok(text.to_owned())
}
