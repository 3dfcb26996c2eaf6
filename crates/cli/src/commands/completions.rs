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
        let mut out = std::io::stdout().lock();
        clap_complete::generate(self.shell, &mut Cli::command(), "scribe", &mut out);
        out.flush()?;
        Ok(())
    }
}
