//! scribe-import: the history of other coding agents, imported into Scribe.
//!
//! Claude Code, Codex, OpenCode, Hermes, Gemini CLI, Cline (with its forks Roo Code and
//! Kilo Code), Goose, GitHub Copilot CLI, pi, OpenClaw, Amp, Factory Droid, the Kilo CLI, Grok
//! Build, Qwen Code, Google Antigravity, Kimi, Cursor, Zed, VS Code's chat, Crush, Kiro CLI
//! (Amazon Q), Continue, Aider, Mistral Vibe and OpenHands each keep every conversation on
//! disk in their own format. One module per agent ([`sources`]) reads that format behind one
//! [`Importer`] trait; the [`sink`] writes what they read through the session and message
//! crates. [`import`] drives both:
//!
//! - **incremental**: a file whose size and modification time are what the last import
//!   saw costs one `stat`; a file that grew is read from where the last import stopped
//!   (and what that reader must remember, e.g. a tool call waiting for its result, is kept
//!   with the position); a line still being written is left for next time;
//! - **idempotent**: message and part ids derive from the source's own keys
//!   ([`ids`]), so reading a record twice stores it once, and what was imported from
//!   where is recorded in the same transaction as the records (schema V6);
//! - **harmless to the source**: files are only read; agents' SQLite databases are opened
//!   read-only and never block the agent writing them;
//! - **exact usage**: each agent's token counters are turned into Scribe's disjoint
//!   buckets with that agent's quirks handled (see each module), and costs are the
//!   agent's own or estimated from the pricing catalog ([`pricing`]);
//! - **every record kept**: a malformed line or an unknown record type is counted and
//!   skipped, never stops a file; a record nesting deeper than a part may
//!   (`scribe_message::MAX_PART_DEPTH`, e.g. a tool call's deeply nested input, which the
//!   store refuses since it could not be read back) is stored with every object or array
//!   below that depth as its JSON text, a string (`Part::into_storable`): the call, its
//!   result and the records after it are all imported.
//!
//! ```no_run
//! use scribe_import::{Env, Options, Source, import, sink::StoreSink, sources};
//! use scribe_session::Store;
//!
//! let mut sink = StoreSink::new(Store::open("scribe.db")?);
//! let importer = sources::importer(Source::ClaudeCode);
//! let roots = importer.default_roots(&Env::from_process());
//! let summary = import(&mut sink, importer, &roots, &Options::default(), &mut |_| {})?;
//! println!("{} messages", summary.written.messages_inserted);
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

mod env;
mod error;
pub mod ids;
pub mod pricing;
pub mod reader;
pub mod record;
mod run;
pub mod sink;
pub mod sources;
pub mod time;
pub mod watch;

use std::fmt;
use std::str::FromStr;

pub use env::Env;
pub use error::{ImportError, Result, SourceDbError};
pub use run::{Event, Options, SourceSummary, import, scan};
pub use sources::{FileReport, Importer, Malformed};

/// An agent whose history Scribe imports.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Source {
    /// Anthropic's Claude Code.
    ClaudeCode,
    /// OpenAI's Codex CLI.
    Codex,
    /// OpenCode.
    OpenCode,
    /// Nous Research's Hermes Agent.
    Hermes,
    /// Google's Gemini CLI.
    Gemini,
    /// Cline (the VS Code extension and the CLI).
    Cline,
    /// Roo Code, a fork of Cline.
    RooCode,
    /// Kilo Code, a fork of Roo Code.
    KiloCode,
    /// Block's Goose.
    Goose,
    /// GitHub Copilot CLI.
    Copilot,
    /// The pi coding agent.
    Pi,
    /// OpenClaw, which keeps its agents' sessions in pi's format: in files, and from 2026.9
    /// on in each agent's database.
    OpenClaw,
    /// Sourcegraph's Amp.
    Amp,
    /// Factory's Droid.
    Droid,
    /// Kilo's CLI, a fork of OpenCode.
    Kilo,
    /// xAI's Grok Build.
    Grok,
    /// Alibaba's Qwen Code.
    Qwen,
    /// Google's Antigravity.
    Antigravity,
    /// Moonshot AI's Kimi Code (and the Kimi CLI before it).
    Kimi,
    /// The Cursor editor's chat and agent (and its command-line agent).
    Cursor,
    /// The Zed editor's agent panel.
    Zed,
    /// VS Code's chat (GitHub Copilot Chat).
    VsCode,
    /// Charm's Crush.
    Crush,
    /// Kiro CLI (and the Amazon Q Developer CLI before it): its database, and from 2.0 its
    /// session files.
    Kiro,
    /// Continue, the editors' extension (and its CLI).
    Continue,
    /// Aider, its chat history log in each project.
    Aider,
    /// Mistral Vibe, Mistral's CLI.
    Vibe,
    /// OpenHands, its CLI and software-agent SDK.
    OpenHands,
}

impl Source {
    /// Every source, in the order `--from all` imports them.
    pub const ALL: [Source; 28] = [
        Source::ClaudeCode,
        Source::Codex,
        Source::OpenCode,
        Source::Hermes,
        Source::Gemini,
        Source::Cline,
        Source::RooCode,
        Source::KiloCode,
        Source::Goose,
        Source::Copilot,
        Source::Pi,
        Source::OpenClaw,
        Source::Amp,
        Source::Droid,
        Source::Kilo,
        Source::Grok,
        Source::Qwen,
        Source::Antigravity,
        Source::Kimi,
        Source::Cursor,
        Source::Zed,
        Source::VsCode,
        Source::Crush,
        Source::Kiro,
        Source::Continue,
        Source::Aider,
        Source::Vibe,
        Source::OpenHands,
    ];

    /// The name used on the command line and as the sessions' `source`.
    pub const fn name(self) -> &'static str {
        match self {
            Source::ClaudeCode => "claude-code",
            Source::Codex => "codex",
            Source::OpenCode => "opencode",
            Source::Hermes => "hermes",
            Source::Gemini => "gemini",
            Source::Cline => "cline",
            Source::RooCode => "roo-code",
            Source::KiloCode => "kilo-code",
            Source::Goose => "goose",
            Source::Copilot => "copilot",
            Source::Pi => "pi",
            Source::OpenClaw => "openclaw",
            Source::Amp => "amp",
            Source::Droid => "droid",
            Source::Kilo => "kilo",
            Source::Grok => "grok",
            Source::Qwen => "qwen",
            Source::Antigravity => "antigravity",
            Source::Kimi => "kimi",
            Source::Cursor => "cursor",
            Source::Zed => "zed",
            Source::VsCode => "vscode",
            Source::Crush => "crush",
            Source::Kiro => "kiro",
            Source::Continue => "continue",
            Source::Aider => "aider",
            Source::Vibe => "mistral-vibe",
            Source::OpenHands => "openhands",
        }
    }
}

impl fmt::Display for Source {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for Source {
    type Err = ImportError;

    fn from_str(s: &str) -> Result<Self> {
        let s = s.trim().to_ascii_lowercase();
        Source::ALL
            .into_iter()
            .find(|src| src.name() == s || (s == "claude" && *src == Source::ClaudeCode))
            .ok_or(ImportError::UnknownSource(s))
    }
}
