//! `scribe rename`: give a session a new title.

use std::io::Write;

use clap::Args;

use crate::context::Context;
use crate::error::CliError;

/// Give a session a new title.
///
/// Titles are unique: a title another session holds is refused. Whitespace is collapsed
/// and invisible characters are removed.
#[derive(Debug, Args)]
pub struct RenameCmd {
    /// The session: an id, a unique id prefix, or a title.
    pub session: String,
    /// The new title.
    pub title: String,
}

impl RenameCmd {
    /// Runs the command.
    pub fn run(self, ctx: &Context) -> Result<(), CliError> {
        let session = ctx.resolve(&self.session)?;
        let renamed = ctx.sessions.set_title(&session.id, Some(&self.title))?;
        let mut out = anstream::stdout().lock();
        writeln!(
            out,
            "renamed {} to {:?}",
            renamed.id,
            renamed.title.as_deref().unwrap_or_default()
        )?;
        Ok(())
    }
}
