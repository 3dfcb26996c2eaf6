//! `scribe completions`: shell completion scripts, generated from the command definitions.

use std::io::Write;

use clap::{Args, CommandFactory};
use clap_complete::Shell;

use crate::cli::Cli;
use crate::error::CliError;

/// Print a shell completion script.
///
/// For example: `scribe completions bash > ~/.local/share/bash-completion/completions/scribe`,
/// or `scribe completions zsh > "${fpath[1]}/_scribe"`.
#[derive(Debug, Args)]
pub struct CompletionsCmd {
    /// The shell.
    #[arg(value_enum)]
    pub shell: Shell,
}

impl CompletionsCmd {
    /// Runs the command (it needs no database).
    pub fn run(self) -> Result<(), CliError> {
        // Generated into memory first: clap_complete panics on a failed write, and a
        // closed pipe (`scribe completions bash | head -1`) is no failure (`main`).
        let mut script = Vec::new();
        clap_complete::generate(self.shell, &mut Cli::command(), "scribe", &mut script);
        let mut out = std::io::stdout().lock();
        out.write_all(&script)?;
        out.flush()?;
        Ok(())
    }
}
