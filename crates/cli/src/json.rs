//! The stable JSON shapes of `--json` output (documented in the README): snake_case keys,
//! times in milliseconds since the epoch, costs in US dollars, one document per command.
//!
//! The shapes live in [`scribe_server::json`], shared with `scribe serve`'s `/api/`, so the
//! command line and the web API cannot drift apart.

use std::io::Write;

use serde::Serialize;

pub use scribe_server::json::{SearchHits, SessionList, SessionSummary, Stats, Tokens, usd};

/// Writes `value` as one pretty JSON document and a newline.
pub fn print(out: &mut impl Write, value: &impl Serialize) -> Result<(), crate::error::CliError> {
    serde_json::to_writer_pretty(&mut *out, value)?;
    writeln!(out)?;
    Ok(())
}
