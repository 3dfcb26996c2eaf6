//! The stable JSON shapes of `--json` output (documented in the README): snake_case keys,
//! times in milliseconds since the epoch, costs in US dollars, one document per command.
//!
//! The shapes live in [`scribe_server::json`], shared with `scribe serve`'s `/api/`, so the
//! command line and the web API cannot drift apart.
//!
//! JSON written to a terminal has its C1 control characters escaped ([`for_stdout`]).

use std::io::{IsTerminal as _, Write};

use serde::Serialize;

pub use scribe_server::json::{SearchHits, SessionList, SessionSummary, Stats, Tokens, usd};

/// Writes `value` to stdout (`out`) as one pretty JSON document and a newline.
pub fn print(out: &mut impl Write, value: &impl Serialize) -> Result<(), crate::error::CliError> {
    let mut out = for_stdout(out);
    serde_json::to_writer_pretty(&mut out, value)?;
    writeln!(out)?;
    Ok(())
}

/// Writes `value` to stdout (`out`) as one compact JSON line (JSON Lines).
pub fn print_line(
    out: &mut impl Write,
    value: &impl Serialize,
) -> Result<(), crate::error::CliError> {
    let mut out = for_stdout(out);
    serde_json::to_writer(&mut out, value)?;
    writeln!(out)?;
    Ok(())
}

/// `out`, a writer of JSON text to stdout, as it must be written there: when stdout is a
/// terminal, with every C1 control character (U+0080–U+009F) escaped as `\u009b`, as
/// JSON escapes C0 ones. serde_json writes them raw, and a terminal may act on one (U+009B
/// is CSI, U+009D OSC), so stored text could move the cursor, clear the screen or retitle
/// the window. Escaped, the document is still valid JSON of the same value; piped or
/// redirected output is the bytes serde_json writes.
pub fn for_stdout<W: Write>(out: W) -> C1Escaped<W> {
    escaped_on(out, std::io::stdout().is_terminal())
}

/// `out`, a writer of JSON text, escaping C1 control characters when `terminal` (it goes
/// to one), as [`for_stdout`] does for stdout.
pub fn escaped_on<W: Write>(out: W, terminal: bool) -> C1Escaped<W> {
    C1Escaped {
        out,
        escape: terminal,
        lead: false,
    }
}

/// A writer of UTF-8 JSON text that escapes C1 control characters ([`for_stdout`]). A C1
/// character can only stand inside a JSON string (everything else is ASCII), so escaping
/// it anywhere in the text is correct.
pub struct C1Escaped<W: Write> {
    out: W,
    /// Whether to escape; when not, bytes pass through untouched.
    escape: bool,
    /// The last write ended with `0xC2`, the UTF-8 lead byte of every C1 character, whose
    /// second byte comes with the next write.
    lead: bool,
}

/// The second UTF-8 byte of a C1 character after its `0xC2` lead (U+0080–U+009F).
fn is_c1_tail(byte: u8) -> bool {
    (0x80..=0x9f).contains(&byte)
}

impl<W: Write> C1Escaped<W> {
    /// Writes the character `0xC2 tail`: escaped when it is a C1 control, else as is.
    fn write_c2(&mut self, tail: u8) -> std::io::Result<()> {
        if is_c1_tail(tail) {
            write!(self.out, "\\u{:04x}", u32::from(tail))
        } else {
            self.out.write_all(&[0xc2, tail])
        }
    }
}

impl<W: Write> Write for C1Escaped<W> {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        if !self.escape {
            return self.out.write(buf);
        }
        let mut rest = buf;
        if self.lead {
            let Some((&tail, after)) = rest.split_first() else {
                return Ok(0);
            };
            self.lead = false;
            self.write_c2(tail)?;
            rest = after;
        }
        while let Some(at) = rest.iter().position(|&b| b == 0xc2) {
            self.out.write_all(&rest[..at])?;
            match rest.get(at + 1) {
                Some(&tail) => {
                    self.write_c2(tail)?;
                    rest = &rest[at + 2..];
                }
                None => {
                    self.lead = true;
                    return Ok(buf.len());
                }
            }
        }
        self.out.write_all(rest)?;
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        // A lead byte waiting for its second byte stays: the character is not complete.
        self.out.flush()
    }
}

impl<W: Write> Drop for C1Escaped<W> {
    fn drop(&mut self) {
        // Never happens with serde_json, which writes whole characters; a lone lead byte
        // is passed on as it came.
        if self.lead {
            let _ = self.out.write_all(&[0xc2]);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn escaped(chunks: &[&[u8]]) -> String {
        let mut bytes = Vec::new();
        {
            let mut out = C1Escaped {
                out: &mut bytes,
                escape: true,
                lead: false,
            };
            for chunk in chunks {
                out.write_all(chunk).unwrap();
            }
        }
        String::from_utf8(bytes).unwrap()
    }

    #[test]
    fn c1_controls_are_escaped_and_nothing_else_changes() {
        let text = "a\u{9b}2J é\u{a0}\u{80}\u{9f}\u{85}x ✓";
        let json = serde_json::to_string(text).unwrap();
        let out = escaped(&[json.as_bytes()]);
        assert_eq!(out, "\"a\\u009b2J é\u{a0}\\u0080\\u009f\\u0085x ✓\"");
        assert_eq!(serde_json::from_str::<String>(&out).unwrap(), text);
        // A character split across writes is escaped all the same.
        let bytes = json.as_bytes();
        for at in 0..=bytes.len() {
            assert_eq!(escaped(&[&bytes[..at], &bytes[at..]]), out, "split at {at}");
        }
    }
}
