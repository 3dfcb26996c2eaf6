//! `scribe delete`: remove a session with its messages, parts and files.

use std::io::Write;

use clap::Args;

use crate::context::Context;
use crate::error::CliError;
use crate::ui;

/// Delete a session with its messages, parts and file versions.
///
/// Asks for confirmation on a terminal; elsewhere --yes is required. Child sessions
/// (sub-agent tasks, forks) are kept, with their link to this session cleared.
#[derive(Debug, Args)]
pub struct DeleteCmd {
    /// The session: an id, a unique id prefix, or a title.
    pub session: String,
    /// Delete without asking.
    #[arg(long, short = 'y')]
    pub yes: bool,
}

impl DeleteCmd {
    /// Runs the command.
    pub fn run(self, ctx: &Context) -> Result<(), CliError> {
        let session = ctx.resolve(&self.session)?;
        let what = match &session.title {
            Some(title) => format!(
                "session {} ({title:?}, {} messages)",
                session.id, session.message_count
            ),
            None => format!(
                "session {} ({} messages)",
                session.id, session.message_count
            ),
        };
        if !self.yes {
            if !ui::can_ask() {
                return Err(CliError::NeedsConfirmation {
                    action: format!("delete session {}", session.id),
                });
            }
            if !ui::confirm(&format!("Delete {what}?"))? {
                return Err(CliError::Cancelled);
            }
        }
        ctx.sessions.delete(&session.id)?;
        let mut out = anstream::stdout().lock();
        writeln!(out, "deleted {what}")?;
        Ok(())
    }
}
