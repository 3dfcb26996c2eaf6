//! `scribe archive` and `scribe unarchive`: hide a session from `list` without deleting it.

use std::io::Write;

use clap::Args;

use crate::context::Context;
use crate::error::CliError;

/// Archive a session: `list` hides it (unless --all), nothing is deleted.
#[derive(Debug, Args)]
pub struct ArchiveCmd {
    /// The session: an id, a unique id prefix, or a title.
    pub session: String,
    /// Unarchive instead.
    #[arg(long)]
    pub undo: bool,
}

/// Unarchive a session.
#[derive(Debug, Args)]
pub struct UnarchiveCmd {
    /// The session: an id, a unique id prefix, or a title.
    pub session: String,
}

impl ArchiveCmd {
    /// Runs the command.
    pub fn run(self, ctx: &Context) -> Result<(), CliError> {
        let session = ctx.resolve(&self.session)?;
        let mut out = anstream::stdout().lock();
        if self.undo {
            let was = session.is_archived();
            let s = ctx.sessions.unarchive(&session.id)?;
            let verb = if was {
                "unarchived"
            } else {
                "was not archived:"
            };
            writeln!(out, "{verb} {}", s.id)?;
        } else {
            let was = session.is_archived();
            let s = ctx.sessions.archive(&session.id)?;
            let verb = if was { "already archived:" } else { "archived" };
            writeln!(out, "{verb} {}", s.id)?;
        }
        Ok(())
    }
}

impl UnarchiveCmd {
    /// Runs the command.
    pub fn run(self, ctx: &Context) -> Result<(), CliError> {
        ArchiveCmd {
            session: self.session,
            undo: true,
        }
        .run(ctx)
    }
}
