//! Reading a JSON Lines file from where the last import stopped: plain or zstd-compressed
//! (`.zst`), complete lines only, each with its number and the offset just past it.
//!
//! The last line of a file an agent is still writing may be cut short. A final line
//! without its newline is taken only when it is already a whole JSON value; otherwise it
//! is left for the next import (which starts at the offset before it). A UTF-8 byte order
//! mark at the file's start (an editor's, a Windows tool's) is not part of its first line.

use std::fs::File;
use std::io::{Read, Seek, SeekFrom};
use std::path::Path;

use serde_json::Value;

use crate::error::{ImportError, Result};

/// The UTF-8 byte order mark.
const BOM: &[u8] = b"\xEF\xBB\xBF";

/// The unread part of a file.
#[derive(Debug)]
pub struct Chunk {
    data: Vec<u8>,
    offset: u64,
    line: u64,
}

/// One complete line.
#[derive(Debug)]
pub struct Line<'a> {
    /// 1-based line number in the file.
    pub number: u64,
    /// Byte offset just past the line (its newline included).
    pub end: u64,
    /// The line without its newline.
    pub text: &'a str,
}

/// Reads `path` from byte `offset` (line `line`) to its end. A `.zst` file is decompressed
/// whole and the offset counts decompressed bytes.
pub fn read_from(path: &Path, offset: u64, line: u64) -> Result<Chunk> {
    let mut file = File::open(path).map_err(ImportError::io(path))?;
    let mut data = Vec::new();
    if path.extension().is_some_and(|e| e == "zst") {
        let mut decoder = ruzstd::decoding::StreamingDecoder::new(&mut file).map_err(|e| {
            ImportError::Decompress {
                path: path.to_owned(),
                source: std::io::Error::new(std::io::ErrorKind::InvalidData, e.to_string()),
            }
        })?;
        decoder
            .read_to_end(&mut data)
            .map_err(|source| ImportError::Decompress {
                path: path.to_owned(),
                source,
            })?;
        let skip = usize::try_from(offset)
            .unwrap_or(usize::MAX)
            .min(data.len());
        data.drain(..skip);
    } else {
        file.seek(SeekFrom::Start(offset))
            .map_err(ImportError::io(path))?;
        file.read_to_end(&mut data).map_err(ImportError::io(path))?;
    }
    Ok(Chunk { data, offset, line })
}

impl Chunk {
    /// Builds a chunk from bytes already in memory (tests, benchmarks).
    pub fn from_bytes(data: Vec<u8>, offset: u64, line: u64) -> Chunk {
        Chunk { data, offset, line }
    }

    /// The bytes read, from the offset on (a reader of lines that are not JSON splits
    /// them itself).
    pub fn bytes(&self) -> &[u8] {
        &self.data
    }

    /// Where the first line starts: past a byte order mark at the file's start.
    fn first_line_at(&self) -> usize {
        if self.offset == 0 && self.data.starts_with(BOM) {
            BOM.len()
        } else {
            0
        }
    }

    /// The complete lines, in order; blank lines are counted but not returned.
    pub fn lines(&self) -> impl Iterator<Item = Line<'_>> {
        let mut at = self.first_line_at();
        let mut number = self.line;
        let data = &self.data;
        let base = self.offset;
        std::iter::from_fn(move || {
            loop {
                if at >= data.len() {
                    return None;
                }
                let rest = &data[at..];
                let (len, advance) = match rest.iter().position(|&b| b == b'\n') {
                    Some(i) => (i, i + 1),
                    None => {
                        // A last line without its newline: whole only if it parses.
                        let complete = std::str::from_utf8(rest)
                            .ok()
                            .is_some_and(|t| serde_json::from_str::<Value>(t).is_ok());
                        if !complete {
                            return None;
                        }
                        (rest.len(), rest.len())
                    }
                };
                let raw = &rest[..len];
                let raw = raw.strip_suffix(b"\r").unwrap_or(raw);
                at += advance;
                number += 1;
                let text = String::from_utf8_lossy(raw);
                if text.trim().is_empty() {
                    continue;
                }
                let text: &str = match std::str::from_utf8(raw) {
                    Ok(t) => t,
                    // Invalid UTF-8: reported as malformed by the caller's JSON parse.
                    Err(_) => "\u{fffd}",
                };
                return Some(Line {
                    number,
                    end: base + at as u64,
                    text,
                });
            }
        })
    }

    /// Where reading ends when every complete line is taken: (offset, line count).
    pub fn end(&self) -> (u64, u64) {
        let mut end = (self.offset, self.line);
        let mut at = self.first_line_at();
        let mut number = self.line;
        while at < self.data.len() {
            match self.data[at..].iter().position(|&b| b == b'\n') {
                Some(i) => {
                    at += i + 1;
                    number += 1;
                    end = (self.offset + at as u64, number);
                }
                None => {
                    let rest = &self.data[at..];
                    let complete = std::str::from_utf8(rest)
                        .ok()
                        .is_some_and(|t| serde_json::from_str::<Value>(t).is_ok());
                    if complete {
                        end = (self.offset + self.data.len() as u64, number + 1);
                    }
                    break;
                }
            }
        }
        end
    }

    /// Whether the file ends with a line still being written.
    pub fn has_partial_tail(&self) -> bool {
        let (end, _) = self.end();
        end < self.offset + self.data.len() as u64
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Each line of `chunk` as (number, end, text).
    fn lines_of(chunk: &Chunk) -> Vec<(u64, u64, String)> {
        chunk
            .lines()
            .map(|l| (l.number, l.end, l.text.to_owned()))
            .collect()
    }

    #[test]
    fn complete_lines_only_and_offsets_past_them() {
        let chunk = Chunk::from_bytes(b"{\"a\":1}\n\n{\"b\":2}\n{\"c\":".to_vec(), 10, 4);
        assert_eq!(
            lines_of(&chunk),
            [
                (5, 18, "{\"a\":1}".to_owned()),
                (7, 27, "{\"b\":2}".to_owned())
            ]
        );
        assert_eq!(chunk.end(), (27, 7));
        assert!(chunk.has_partial_tail());
        let whole = Chunk::from_bytes(b"{\"a\":1}\n{\"b\":2}".to_vec(), 0, 0);
        assert_eq!(whole.lines().count(), 2);
        assert_eq!(whole.end(), (15, 2));
        assert!(!whole.has_partial_tail());
    }

    /// A byte order mark at the file's start is not part of the first line; the offsets
    /// still count its bytes. Later in the file the same bytes are the line's own.
    #[test]
    fn a_byte_order_mark_at_the_start_is_not_part_of_the_first_line() {
        let chunk = Chunk::from_bytes(b"\xEF\xBB\xBF{\"a\":1}\n{\"b\":2}".to_vec(), 0, 0);
        assert_eq!(
            lines_of(&chunk),
            [
                (1, 11, "{\"a\":1}".to_owned()),
                (2, 18, "{\"b\":2}".to_owned())
            ]
        );
        assert_eq!(chunk.end(), (18, 2));
        let later = Chunk::from_bytes(b"\xEF\xBB\xBF{\"b\":2}\n".to_vec(), 11, 1);
        assert_eq!(lines_of(&later), [(2, 22, "\u{feff}{\"b\":2}".to_owned())]);
    }
}
