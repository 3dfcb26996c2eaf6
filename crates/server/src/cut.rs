//! The cut rule of a big part's page, and the SQLite side of it: a part's stored JSON text
//! read as a stream (SQLite's incremental blob I/O) and cut on the way, so the page costs
//! the cut (at most [`PART_BUDGET`] of string bytes, [`PART_STRING_FLOOR`] for each string
//! after that, and the part's structure), never the part's size. PostgreSQL cuts in the
//! server (`ListCutPartNodes`) with the same [`CutLimits`].
//!
//! The cutter copies the JSON text through and cuts each string value (never an object's
//! key): its decoded UTF-8 bytes, at most [`CutLimits::allowed`] of them, ending at a whole
//! character. What it hands on is small JSON text that serde_json decodes, so duplicate
//! keys, numbers, nesting and malformed text come out as decoding the whole part would.

use std::io::Read;

use scribe_message::MAX_PART_DEPTH;
use serde_json::Value;

use crate::json::{PART_BUDGET, PART_STRING_FLOOR, PART_TEXT_CAP};

/// The bytes a big part's strings send: one definition for both backends (SQLite cuts
/// with [`cut_part`], PostgreSQL gets these as `ListCutPartNodes`' parameters, whose SQL
/// computes [`CutLimits::allowed`] the same way).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CutLimits {
    /// The most bytes one string sends.
    pub cap: usize,
    /// The bytes every string may send, whatever the budget left.
    pub floor: usize,
    /// The bytes the part's strings send together (each counted to `cap` at most).
    pub budget: usize,
}

impl CutLimits {
    /// The limits of the messages API ([`PART_TEXT_CAP`], [`PART_STRING_FLOOR`],
    /// [`PART_BUDGET`]).
    pub const PAGE: CutLimits = CutLimits {
        cap: PART_TEXT_CAP,
        floor: PART_STRING_FLOOR,
        budget: PART_BUDGET,
    };

    /// The bytes a string may send when the strings before it in the part `spent`:
    /// `max(floor, min(cap, budget - spent))`.
    pub fn allowed(self, spent: usize) -> usize {
        self.budget
            .saturating_sub(spent)
            .min(self.cap)
            .max(self.floor)
    }

    /// What a string of `len` bytes adds to what the strings spent: its first `cap` bytes.
    pub fn spends(self, len: usize) -> usize {
        len.min(self.cap)
    }
}

/// Why a part's JSON text could not be cut.
#[derive(Debug, thiserror::Error)]
pub enum CutTextError {
    /// Reading the text failed.
    #[error("reading a part's json failed")]
    Read(#[source] std::io::Error),
    /// The text is not JSON (found while cutting).
    #[error("a part's json is malformed near byte {at}: {what}")]
    Malformed {
        /// The byte offset in the part's text.
        at: u64,
        /// What is wrong.
        what: &'static str,
    },
    /// The cut text is not JSON.
    #[error("a part's json is malformed")]
    Json(#[source] serde_json::Error),
}

/// The bytes read from the text at a time.
const CHUNK: usize = 64 * 1024;

/// The JSON value of the part whose JSON text `reader` gives, its strings cut to `limits`,
/// and whether any was. Reads the text once, in chunks; holds the cut text, not the part.
/// A value nesting deeper than [`MAX_PART_DEPTH`] is read as
/// [`scribe_message::Part::from_json`] reads a whole part (each container below that level
/// as its JSON text, a string).
pub fn cut_part(reader: impl Read, limits: CutLimits) -> Result<(Value, bool), CutTextError> {
    let (text, cut) = cut_json_text(reader, limits)?;
    let text = if scribe_types::part::json_depth(&text) > MAX_PART_DEPTH {
        scribe_types::part::cut_too_deep(&text, MAX_PART_DEPTH).ok_or(CutTextError::Malformed {
            at: 0,
            what: "unbalanced brackets",
        })?
    } else {
        text
    };
    let value = serde_json::from_str(&text).map_err(CutTextError::Json)?;
    Ok((value, cut))
}

/// `reader`'s JSON text with each string value cut to `limits` (keys and everything
/// between strings copied as they are), and whether any string was cut. Malformed strings
/// (an invalid escape, a lone surrogate, a control character, bytes that are not UTF-8,
/// the text ending inside one) are errors; the rest of the text is left for serde_json to
/// judge.
pub fn cut_json_text(
    mut reader: impl Read,
    limits: CutLimits,
) -> Result<(String, bool), CutTextError> {
    let mut cutter = Cutter::new(limits);
    let mut buf = vec![0u8; CHUNK];
    let mut filled = 0;
    loop {
        let n = loop {
            match reader.read(&mut buf[filled..]) {
                Ok(n) => break n,
                Err(err) if err.kind() == std::io::ErrorKind::Interrupted => {}
                Err(err) => return Err(CutTextError::Read(err)),
            }
        };
        filled += n;
        let eof = n == 0;
        let used = cutter.feed(&buf[..filled], eof)?;
        buf.copy_within(used..filled, 0);
        filled -= used;
        if eof {
            break;
        }
    }
    let text = String::from_utf8(cutter.out).map_err(|_| CutTextError::Malformed {
        at: cutter.offset,
        what: "the text is not utf-8",
    })?;
    Ok((text, cutter.cut))
}

/// A container the cutter is in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Container {
    /// An object; whether a string here is a key.
    Object { key_next: bool },
    /// An array.
    Array,
}

/// Where the cutter is in the text.
#[derive(Debug)]
enum State {
    /// Between strings.
    Outside,
    /// In an object's key (copied); whether the byte before was a backslash.
    Key { escaped: bool },
    /// In a string value.
    Value(StringValue),
}

/// A string value being cut.
#[derive(Debug)]
struct StringValue {
    /// The bytes it may send.
    allowed: usize,
    /// Its decoded bytes so far.
    len: usize,
    /// What it sends (its first characters, at most `allowed` bytes).
    kept: String,
    /// Whether a character did not fit (nothing after it is kept).
    full: bool,
}

impl StringValue {
    /// Adds decoded text.
    fn take(&mut self, s: &str) {
        self.len += s.len();
        if self.full {
            return;
        }
        let room = self.allowed.saturating_sub(self.kept.len());
        if s.len() <= room {
            self.kept.push_str(s);
        } else {
            let mut end = room;
            while !s.is_char_boundary(end) {
                end -= 1;
            }
            self.kept.push_str(&s[..end]);
            self.full = true;
        }
    }

    /// Adds one decoded character.
    fn take_char(&mut self, c: char) {
        if self.full {
            self.len += c.len_utf8();
            return;
        }
        self.take(c.encode_utf8(&mut [0; 4]));
    }
}

/// The streaming cutter ([`cut_json_text`]).
#[derive(Debug)]
struct Cutter {
    limits: CutLimits,
    /// The bytes the strings before spent ([`CutLimits::spends`]).
    spent: usize,
    /// Whether a string was cut.
    cut: bool,
    /// The cut text.
    out: Vec<u8>,
    /// The open containers, outermost first.
    open: Vec<Container>,
    state: State,
    /// The offset in the text of the next byte fed.
    offset: u64,
}

/// What an escape at the start of a slice is.
enum Escape {
    /// A character, and the bytes of its escape.
    Char(char, usize),
    /// The slice ends inside it.
    Partial,
}

impl Cutter {
    fn new(limits: CutLimits) -> Self {
        Cutter {
            limits,
            spent: 0,
            cut: false,
            out: Vec::new(),
            open: Vec::new(),
            state: State::Outside,
            offset: 0,
        }
    }

    fn malformed(&self, at: usize, what: &'static str) -> CutTextError {
        CutTextError::Malformed {
            at: self.offset + at as u64,
            what,
        }
    }

    /// Cuts as much of `buf` as it can, returning the bytes used; the rest (the start of an
    /// escape or a character) is fed again with more. At the end of the text (`eof`) all is
    /// used or it is an error.
    fn feed(&mut self, buf: &[u8], eof: bool) -> Result<usize, CutTextError> {
        // The text is UTF-8 (as a whole part, read as a string, is): checked a chunk at a
        // time, in one pass, so what is cut ends at a character and a cut string's rest
        // is only counted. A character the next chunk completes waits for it.
        let whole = match std::str::from_utf8(buf) {
            Ok(_) => buf.len(),
            Err(err) if err.error_len().is_none() && !eof => err.valid_up_to(),
            Err(err) => return Err(self.malformed(err.valid_up_to(), "the text is not utf-8")),
        };
        let used = self.cut_some(&buf[..whole], eof)?;
        self.offset += used as u64;
        if eof && !matches!(self.state, State::Outside) {
            return Err(self.malformed(0, "the text ends in a string"));
        }
        Ok(used)
    }

    /// [`Cutter::feed`] without the bookkeeping.
    fn cut_some(&mut self, buf: &[u8], eof: bool) -> Result<usize, CutTextError> {
        let mut i = 0;
        while i < buf.len() {
            match &mut self.state {
                State::Outside => {
                    let b = buf[i];
                    match b {
                        b'"' => {
                            if let Some(Container::Object { key_next: true }) = self.open.last() {
                                self.out.push(b'"');
                                self.state = State::Key { escaped: false };
                            } else {
                                self.state = State::Value(StringValue {
                                    allowed: self.limits.allowed(self.spent),
                                    len: 0,
                                    kept: String::new(),
                                    full: false,
                                });
                            }
                        }
                        b'{' => {
                            self.open.push(Container::Object { key_next: true });
                            self.out.push(b);
                        }
                        b'[' => {
                            self.open.push(Container::Array);
                            self.out.push(b);
                        }
                        b'}' | b']' => {
                            self.open.pop();
                            self.out.push(b);
                        }
                        b':' | b',' => {
                            if let Some(Container::Object { key_next }) = self.open.last_mut() {
                                *key_next = b == b',';
                            }
                            self.out.push(b);
                        }
                        _ => self.out.push(b),
                    }
                    i += 1;
                }
                State::Key { escaped } => {
                    let b = buf[i];
                    self.out.push(b);
                    if *escaped {
                        *escaped = false;
                    } else if b == b'\\' {
                        *escaped = true;
                    } else if b == b'"' {
                        self.state = State::Outside;
                    }
                    i += 1;
                }
                State::Value(string) => {
                    if string.full {
                        i += skip_counted(&buf[i..], &mut string.len);
                        if i == buf.len() {
                            break;
                        }
                    }
                    let rest = &buf[i..];
                    match rest[0] {
                        b'"' => {
                            if let State::Value(string) =
                                std::mem::replace(&mut self.state, State::Outside)
                            {
                                self.end_string(string)?;
                            }
                            i += 1;
                        }
                        b'\\' => match escape(rest) {
                            Ok(Escape::Char(c, used)) => {
                                string.take_char(c);
                                i += used;
                            }
                            Ok(Escape::Partial) if !eof => return Ok(i),
                            Ok(Escape::Partial) => {
                                return Err(self.malformed(i, "the text ends in an escape"));
                            }
                            Err(what) => return Err(self.malformed(i, what)),
                        },
                        0..=0x1f => {
                            return Err(self.malformed(i, "a control character in a string"));
                        }
                        _ => {
                            let run = &rest[..plain_len(rest)];
                            // Whole characters: `feed` passes UTF-8 that ends at one.
                            let Ok(text) = std::str::from_utf8(run) else {
                                return Err(self.malformed(i, "a string is not utf-8"));
                            };
                            string.take(text);
                            i += run.len();
                        }
                    }
                }
            }
        }
        Ok(buf.len())
    }

    /// Writes a finished string value (what it sends) and counts it.
    fn end_string(&mut self, string: StringValue) -> Result<(), CutTextError> {
        self.spent = self.spent.saturating_add(self.limits.spends(string.len));
        self.cut |= string.len > string.allowed;
        serde_json::to_writer(&mut self.out, string.kept.as_str()).map_err(CutTextError::Json)
    }
}

/// The escape at the start of `rest` (which starts with a backslash).
fn escape(rest: &[u8]) -> Result<Escape, &'static str> {
    let Some(&kind) = rest.get(1) else {
        return Ok(Escape::Partial);
    };
    let c = match kind {
        b'"' => '"',
        b'\\' => '\\',
        b'/' => '/',
        b'b' => '\u{8}',
        b'f' => '\u{c}',
        b'n' => '\n',
        b'r' => '\r',
        b't' => '\t',
        b'u' => return unicode_escape(rest),
        _ => return Err("an invalid escape"),
    };
    Ok(Escape::Char(c, 2))
}

/// A `\uXXXX` escape (two, for a surrogate pair) at the start of `rest`.
fn unicode_escape(rest: &[u8]) -> Result<Escape, &'static str> {
    let Some(first) = rest.get(2..6) else {
        return Ok(Escape::Partial);
    };
    let unit = hex4(first)?;
    let code = match unit {
        0xD800..=0xDBFF => {
            let Some(second) = rest.get(6..12) else {
                return Ok(Escape::Partial);
            };
            if !second.starts_with(b"\\u") {
                return Err("a lone leading surrogate");
            }
            let low = hex4(&second[2..])?;
            if !(0xDC00..=0xDFFF).contains(&low) {
                return Err("a lone leading surrogate");
            }
            let c = 0x10000 + ((u32::from(unit) - 0xD800) << 10) + (u32::from(low) - 0xDC00);
            return char::from_u32(c)
                .map(|c| Escape::Char(c, 12))
                .ok_or("an invalid escape");
        }
        0xDC00..=0xDFFF => return Err("a lone trailing surrogate"),
        unit => u32::from(unit),
    };
    char::from_u32(code)
        .map(|c| Escape::Char(c, 6))
        .ok_or("an invalid escape")
}

/// Four hex digits.
fn hex4(digits: &[u8]) -> Result<u16, &'static str> {
    digits.iter().try_fold(0u16, |acc, &d| {
        let v = (d as char).to_digit(16).ok_or("an invalid \\u escape")?;
        Ok((acc << 4) | v as u16)
    })
}

/// The bytes at the start of `bytes` that the rest of a cut string spends in plain text
/// and simple escapes (`\n`, `\"` …), adding their decoded bytes to `len`: the loop a
/// long string spends its time in, so it does nothing else. Stops at the string's end, a
/// `\u` escape, anything malformed or the end of `bytes`.
fn skip_counted(bytes: &[u8], len: &mut usize) -> usize {
    let mut i = 0;
    loop {
        let plain = plain_len(&bytes[i..]);
        *len += plain;
        i += plain;
        match bytes.get(i..i + 2) {
            Some(
                [
                    b'\\',
                    b'"' | b'\\' | b'/' | b'b' | b'f' | b'n' | b'r' | b't',
                ],
            ) => {
                *len += 1;
                i += 2;
            }
            _ => return i,
        }
    }
}

/// The bytes at the start of `bytes` that a string copies as they are: up to a quote, a
/// backslash or a control character. Sixteen bytes at a time (the usual bit tricks for "a
/// byte equal to" and "a byte below"), as this is the loop a long string spends its time in.
fn plain_len(bytes: &[u8]) -> usize {
    const ONES: u128 = u128::MAX / 0xFF;
    const HIGHS: u128 = ONES * 0x80;
    const QUOTES: u128 = ONES * b'"' as u128;
    const BACKSLASHES: u128 = ONES * b'\\' as u128;
    const SPACES: u128 = ONES * 0x20;
    let mut i = 0;
    while let Some(word) = bytes.get(i..).and_then(|w| w.first_chunk::<16>()) {
        let v = u128::from_le_bytes(*word);
        let quote = v ^ QUOTES;
        let backslash = v ^ BACKSLASHES;
        let found = (quote.wrapping_sub(ONES) & !quote)
            | (backslash.wrapping_sub(ONES) & !backslash)
            | (v.wrapping_sub(SPACES) & !v);
        if found & HIGHS != 0 {
            break;
        }
        i += 16;
    }
    while let Some(&b) = bytes.get(i) {
        if b == b'"' || b == b'\\' || b < 0x20 {
            break;
        }
        i += 1;
    }
    i
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// Small limits, so short texts show the rule: 8 bytes a string, 3 at least, 20 in all.
    const SMALL: CutLimits = CutLimits {
        cap: 8,
        floor: 3,
        budget: 20,
    };

    /// A reader handing over one byte a read: every escape and character straddles a chunk.
    struct Trickle<'a>(&'a [u8]);

    impl Read for Trickle<'_> {
        fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
            match (self.0.split_first(), buf.first_mut()) {
                (Some((&b, rest)), Some(slot)) => {
                    *slot = b;
                    self.0 = rest;
                    Ok(1)
                }
                _ => Ok(0),
            }
        }
    }

    /// `text` cut to `limits`, read whole and read a byte at a time (which must agree).
    fn cut(text: &str, limits: CutLimits) -> Result<(Value, bool), CutTextError> {
        let whole = cut_part(text.as_bytes(), limits);
        let trickled = cut_part(Trickle(text.as_bytes()), limits);
        match (&whole, &trickled) {
            (Ok(a), Ok(b)) => assert_eq!(a, b, "{text:?}"),
            (Err(_), Err(_)) => {}
            _ => {
                panic!("reading in chunks changed the answer for {text:?}: {whole:?} {trickled:?}")
            }
        }
        whole
    }

    /// The first string value of a cut text.
    fn first(text: &str) -> (String, bool) {
        let (value, was_cut) = cut(text, SMALL).unwrap();
        (value["a"].as_str().unwrap().to_owned(), was_cut)
    }

    #[test]
    fn escapes_straddling_the_cut_are_kept_whole_or_left_out() {
        // Escapes that end exactly at the cap are kept; ones that would cross it are not.
        assert_eq!(first(r#"{"a":"abcdefg\nxyz"}"#), ("abcdefg\n".into(), true));
        assert_eq!(first(r#"{"a":"abcdefgh\nxyz"}"#), ("abcdefgh".into(), true));
        assert_eq!(first(r#"{"a":"abcdef\"\\x"}"#), ("abcdef\"\\".into(), true));
        assert_eq!(first(r#"{"a":"abcdefg\\"}"#), ("abcdefg\\".into(), false));
        // \u00e9 is two bytes decoded: at 7 it would end at 9.
        assert_eq!(first(r#"{"a":"abcdefg\u00e9"}"#), ("abcdefg".into(), true));
        assert_eq!(first(r#"{"a":"abcdef\u00e9"}"#), ("abcdefé".into(), false));
        // A surrogate pair is one 4-byte character.
        assert_eq!(
            first(r#"{"a":"abcde\ud83d\ude80"}"#),
            ("abcde".into(), true)
        );
        assert_eq!(
            first(r#"{"a":"abcd\ud83d\ude80"}"#),
            ("abcd🚀".into(), false)
        );
        assert_eq!(
            first(r#"{"a":"abcd\ud83d\ude80x"}"#),
            ("abcd🚀".into(), true)
        );
    }

    #[test]
    fn a_character_straddling_the_cut_is_left_out() {
        assert_eq!(first(r#"{"a":"abcdef🚀"}"#), ("abcdef".into(), true));
        assert_eq!(first(r#"{"a":"abcd🚀"}"#), ("abcd🚀".into(), false));
        assert_eq!(first(r#"{"a":"éééé"}"#), ("éééé".into(), false));
        assert_eq!(first(r#"{"a":"aééééé"}"#), ("aééé".into(), true));
        // Nothing after a character that did not fit is kept, even a shorter one.
        assert_eq!(first(r#"{"a":"abcdef🚀a"}"#), ("abcdef".into(), true));
    }

    #[test]
    fn keys_are_never_cut_nor_counted() {
        let key = "k".repeat(50);
        let text = format!(r#"{{"{key}":"0123456789","b":{{"{key}\n":"x"}}}}"#);
        let (value, was_cut) = cut(&text, SMALL).unwrap();
        assert!(was_cut);
        assert_eq!(value[&key], "01234567");
        assert_eq!(value["b"][format!("{key}\n")], "x");
        // Values in arrays inside objects are values; the key after one is a key.
        let text = format!(r#"{{"a":["0123456789"],"{key}":1}}"#);
        let (value, _) = cut(&text, SMALL).unwrap();
        assert_eq!(value, json!({"a": ["01234567"], key: 1}));
    }

    #[test]
    fn the_budget_runs_across_the_strings_in_document_order() {
        let ten = "0123456789";
        let text = format!(r#"["{ten}",{{"z":"{ten}","a":"{ten}"}},"{ten}","{ten}","ab"]"#);
        let (value, was_cut) = cut(&text, SMALL).unwrap();
        assert!(was_cut);
        // 8 + 8 spend 16 of 20: then 4, then the floor of 3 (document order, not the
        // object's key order).
        assert_eq!(
            value,
            json!(["01234567", {"z": "01234567", "a": "0123"}, "012", "012", "ab"])
        );
        // Nothing longer than its allowance: nothing cut, the text as it is.
        let (value, was_cut) = cut(r#"["abc","de"]"#, SMALL).unwrap();
        assert!(!was_cut);
        assert_eq!(value, json!(["abc", "de"]));
    }

    #[test]
    fn duplicate_keys_behave_as_serde_json_and_both_values_spend() {
        let text = r#"{"a":"xxxxxxxxxxxxxxxxxx","a":"yyyyyyyyyyyy","b":"zzzzzzzzzzzz"}"#;
        let (value, was_cut) = cut(text, SMALL).unwrap();
        assert!(was_cut);
        // The last "a" wins; the first spent 8, the second 8, so "b" gets 4.
        assert_eq!(value, json!({"a": "yyyyyyyy", "b": "zzzz"}));
    }

    #[test]
    fn numbers_and_literals_read_as_serde_json_reads_them() {
        for text in [
            r#"[1.5,-0.0,1e3,12345678901234567890,-9223372036854775808,0.1,true,false,null]"#,
            r#"{"n":18446744073709551615,"r":2.5e-308,"s":"x"}"#,
            " [ 1 , \"a\" , {\t\"k\" : 2 } ] \n",
        ] {
            let expected: Value = serde_json::from_str(text).unwrap();
            assert_eq!(cut(text, SMALL).unwrap(), (expected, false), "{text}");
        }
        // What serde_json refuses whole it refuses cut.
        for text in [
            "[1e400]",
            "[01]",
            "[1.]",
            "[-]",
            "[NaN]",
            "[1,]",
            "{\"a\":1,}",
        ] {
            assert!(serde_json::from_str::<Value>(text).is_err(), "{text}");
            assert!(cut(text, SMALL).is_err(), "{text}");
        }
    }

    #[test]
    fn a_part_nesting_too_deep_reads_as_a_whole_part_does() {
        for levels in [MAX_PART_DEPTH, MAX_PART_DEPTH + 5, 200, 500] {
            let text = format!(
                r#"{{"type":"tool","deep":{}"0123456789"{},"s":"0123456789"}}"#,
                "[".repeat(levels),
                "]".repeat(levels)
            );
            let (value, was_cut) = cut(&text, SMALL).unwrap();
            assert!(was_cut);
            assert_eq!(value["s"], "01234567", "{levels}");
            // As Part::from_json reads the whole part: below MAX_PART_DEPTH, JSON text.
            let mut inner = &value["deep"];
            let mut depth = 2;
            while let Some(items) = inner.as_array() {
                inner = &items[0];
                depth += 1;
            }
            if levels < MAX_PART_DEPTH {
                assert_eq!(inner, "01234567");
            } else {
                assert_eq!(depth, MAX_PART_DEPTH + 1, "{levels}");
                let text = inner.as_str().unwrap();
                assert!(
                    text.starts_with('[') && text.contains("\"01234567\""),
                    "{levels}"
                );
            }
        }
    }

    #[test]
    fn malformed_text_is_an_error_never_a_panic() {
        let long = "x".repeat(40);
        for text in [
            String::new(),
            r#"{"a":"abc"#.into(),
            format!(r#"{{"a":"{long}"#),
            r#"{"a":"abc\"#.into(),
            r#"{"a":"\u12"#.into(),
            r#"{"a":"\x"}"#.into(),
            r#"{"a":"\u12g4"}"#.into(),
            r#"{"a":"\ud83d"}"#.into(),
            r#"{"a":"\ud83dx"}"#.into(),
            r#"{"a":"\ud83d\u0041"}"#.into(),
            r#"{"a":"\ude80"}"#.into(),
            "{\"a\":\"a\tb\"}".into(),
            r#"{"a":1"#.into(),
            r#"{"a" 1}"#.into(),
            r#"{"a":1}}"#.into(),
            r#"{"a":1} x"#.into(),
            // The same faults in the part of a string that is cut away.
            format!(r#"{{"a":"{long}\x"}}"#),
            format!(r#"{{"a":"{long}\ud83d"}}"#),
            format!(r#"{{"a":"{long}\u00"}}"#),
            format!("{{\"a\":\"{long}\n\"}}"),
        ] {
            assert!(cut(&text, SMALL).is_err(), "{text:?}");
            assert!(serde_json::from_str::<Value>(&text).is_err(), "{text:?}");
        }
        // Bytes that are not UTF-8, kept or cut away.
        for bytes in [
            &b"[\"ab\xffc\"]"[..],
            &b"[\"0123456789\xc3\"]"[..],
            b"[\"\xf0\x9f\x9a\"]",
        ] {
            assert!(cut_part(bytes, SMALL).is_err(), "{bytes:?}");
            assert!(cut_part(Trickle(bytes), SMALL).is_err(), "{bytes:?}");
        }
        // A read that fails is an error.
        struct Broken;
        impl Read for Broken {
            fn read(&mut self, _: &mut [u8]) -> std::io::Result<usize> {
                Err(std::io::Error::other("gone"))
            }
        }
        assert!(matches!(
            cut_part(Broken, SMALL),
            Err(CutTextError::Read(_))
        ));
    }

    #[test]
    fn the_limits_have_one_rule() {
        let l = CutLimits::PAGE;
        assert_eq!(l.allowed(0), PART_TEXT_CAP);
        assert_eq!(l.allowed(PART_BUDGET - 10), PART_STRING_FLOOR);
        assert_eq!(l.allowed(PART_BUDGET - 1000), 1000);
        assert_eq!(l.allowed(usize::MAX), PART_STRING_FLOOR);
        assert_eq!(l.spends(usize::MAX), PART_TEXT_CAP);
    }

    /// A small deterministic generator (xorshift) of JSON texts: nested objects and arrays
    /// (duplicate keys too), strings of ASCII, escapes, 2- and 4-byte characters written
    /// raw or as `\u` escapes, integers, exact reals and literals.
    struct Gen(u64);

    impl Gen {
        fn next(&mut self) -> u64 {
            self.0 ^= self.0 << 13;
            self.0 ^= self.0 >> 7;
            self.0 ^= self.0 << 17;
            self.0
        }

        fn below(&mut self, n: u64) -> u64 {
            self.next() % n
        }

        fn string(&mut self, out: &mut String) {
            out.push('"');
            let len = match self.below(4) {
                0 => self.below(4),
                1 | 2 => self.below(14),
                _ => self.below(40),
            };
            for _ in 0..len {
                let c = ['a', 'b', ' ', 'é', '€', '🚀', '\n', '"', '\\', '/', '\u{1}']
                    [self.below(11) as usize];
                match (self.below(3), c) {
                    (0, c) => {
                        let mut units = [0u16; 2];
                        for unit in c.encode_utf16(&mut units) {
                            out.push_str(&format!("\\u{unit:04x}"));
                        }
                    }
                    (_, '\n') => out.push_str("\\n"),
                    (_, '"') => out.push_str("\\\""),
                    (_, '\\') => out.push_str("\\\\"),
                    (_, '\u{1}') => out.push_str("\\u0001"),
                    (1, '/') => out.push_str("\\/"),
                    (_, c) => out.push(c),
                }
            }
            out.push('"');
        }

        fn value(&mut self, depth: u32, out: &mut String) {
            let kind = if depth > 4 {
                self.below(3)
            } else {
                self.below(6)
            };
            match kind {
                0 => self.string(out),
                1 => out.push_str(
                    [
                        "0",
                        "-7",
                        "42",
                        "1.5",
                        "-0.25",
                        "true",
                        "false",
                        "null",
                        "9007199254740993",
                        "1e3",
                        "-1.5e-3",
                        "0.1",
                        "123456789012345678901",
                        "18446744073709551615",
                    ][self.below(14) as usize],
                ),
                2 => self.string(out),
                3 | 4 => {
                    out.push('{');
                    for i in 0..self.below(5) {
                        if i > 0 {
                            out.push(',');
                        }
                        out.push_str(
                            ["\"k\"", "\"name\"", "\"k\\n\"", "\"é\""][self.below(4) as usize],
                        );
                        out.push(':');
                        self.value(depth + 1, out);
                    }
                    out.push('}');
                }
                _ => {
                    out.push('[');
                    for i in 0..self.below(5) {
                        if i > 0 {
                            out.push(',');
                        }
                        self.value(depth + 1, out);
                    }
                    out.push(']');
                }
            }
        }
    }

    /// The part cut as PostgreSQL's path (and SQLite's before) cut it: SQLite's
    /// `json_tree` walk (`ListCutPartNodes`) and [`crate::json::rebuild_cut`].
    fn cut_in_sql(conn: &rusqlite::Connection, text: &str, limits: CutLimits) -> (Value, bool) {
        conn.execute("DELETE FROM parts", []).unwrap();
        conn.execute(
            "INSERT INTO parts (seq, id, data) VALUES (1, 'p', ?1)",
            [text],
        )
        .unwrap();
        let rows = scribe_db::queries::list_cut_part_nodes(
            conn,
            &scribe_db::queries::ListCutPartNodesParams {
                part_ids: &["p"],
                cap: limits.cap as i64,
                floor: limits.floor as i64,
                budget: limits.budget as i64,
            },
        )
        .unwrap();
        crate::json::rebuild_cut(rows.into_iter().map(crate::json::CutNode::from)).unwrap()
    }

    /// "Decode whole, then cut": serde_json reads the whole text and each string, in the
    /// order serde_json meets it (document order), is cut by [`CutLimits`] as it arrives.
    struct DecodeThenCut<'a> {
        limits: CutLimits,
        spent: &'a std::cell::Cell<usize>,
        cut: &'a std::cell::Cell<bool>,
    }

    impl Clone for DecodeThenCut<'_> {
        fn clone(&self) -> Self {
            DecodeThenCut { ..*self }
        }
    }

    impl<'de> serde::de::DeserializeSeed<'de> for DecodeThenCut<'_> {
        type Value = Value;
        fn deserialize<D: serde::Deserializer<'de>>(self, d: D) -> Result<Value, D::Error> {
            d.deserialize_any(self)
        }
    }

    impl<'de> serde::de::Visitor<'de> for DecodeThenCut<'_> {
        type Value = Value;
        fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            f.write_str("json")
        }
        fn visit_bool<E>(self, v: bool) -> Result<Value, E> {
            Ok(Value::Bool(v))
        }
        fn visit_i64<E>(self, v: i64) -> Result<Value, E> {
            Ok(Value::from(v))
        }
        fn visit_u64<E>(self, v: u64) -> Result<Value, E> {
            Ok(Value::from(v))
        }
        fn visit_f64<E>(self, v: f64) -> Result<Value, E> {
            Ok(serde_json::Number::from_f64(v).map_or(Value::Null, Value::Number))
        }
        fn visit_unit<E>(self) -> Result<Value, E> {
            Ok(Value::Null)
        }
        fn visit_str<E>(self, v: &str) -> Result<Value, E> {
            let allowed = self.limits.allowed(self.spent.get());
            self.spent
                .set(self.spent.get() + self.limits.spends(v.len()));
            let mut end = v.len().min(allowed);
            while !v.is_char_boundary(end) {
                end -= 1;
            }
            if v.len() > allowed {
                self.cut.set(true);
            }
            Ok(Value::String(v[..end].to_owned()))
        }
        fn visit_seq<A: serde::de::SeqAccess<'de>>(self, mut seq: A) -> Result<Value, A::Error> {
            let mut items = Vec::new();
            while let Some(item) = seq.next_element_seed(self.clone())? {
                items.push(item);
            }
            Ok(Value::Array(items))
        }
        fn visit_map<A: serde::de::MapAccess<'de>>(self, mut map: A) -> Result<Value, A::Error> {
            let mut out = serde_json::Map::new();
            while let Some(key) = map.next_key::<String>()? {
                let value = map.next_value_seed(self.clone())?;
                out.insert(key, value);
            }
            Ok(Value::Object(out))
        }
    }

    fn decode_then_cut(text: &str, limits: CutLimits) -> Result<(Value, bool), serde_json::Error> {
        use serde::de::DeserializeSeed;
        let (spent, cut) = (std::cell::Cell::new(0), std::cell::Cell::new(false));
        let mut de = serde_json::Deserializer::from_str(text);
        let value = DecodeThenCut {
            limits,
            spent: &spent,
            cut: &cut,
        }
        .deserialize(&mut de)?;
        de.end()?;
        Ok((value, cut.get()))
    }

    #[test]
    fn the_reference_cuts_as_the_examples_say() {
        let ten = "0123456789";
        let text = format!(r#"["{ten}",{{"z":"{ten}","a":"{ten}"}},"{ten}","{ten}","ab"]"#);
        assert_eq!(
            decode_then_cut(&text, SMALL).unwrap(),
            (
                json!(["01234567", {"z": "01234567", "a": "0123"}, "012", "012", "ab"]),
                true
            )
        );
    }

    #[test]
    fn the_stream_cuts_as_the_database_walk_and_as_decoding_whole() {
        let conn = rusqlite::Connection::open_in_memory().unwrap();
        conn.execute_batch("CREATE TABLE parts (seq INTEGER PRIMARY KEY, id TEXT, data TEXT)")
            .unwrap();
        let mut generator = Gen(0x9E37_79B9_7F4A_7C15);
        let (mut differed_from_whole, mut walked) = (0, 0);
        for round in 0..400 {
            let mut text = String::new();
            generator.value(0, &mut text);
            let limits = [
                SMALL,
                CutLimits {
                    cap: 5,
                    floor: 2,
                    budget: 9,
                },
                CutLimits::PAGE,
            ][round % 3];
            let streamed = cut(&text, limits).unwrap_or_else(|err| panic!("{text}: {err}"));
            assert_eq!(streamed, decode_then_cut(&text, limits).unwrap(), "{text}");
            // SQLite's walk reads an integer beyond i64 as a real (to 15 digits); the
            // stream reads it as serde_json does, as the whole part is read.
            if !text.contains("123456789012345678901") && !text.contains("18446744073709551615") {
                assert_eq!(streamed, cut_in_sql(&conn, &text, limits), "{text}");
                walked += 1;
            }
            // Uncut, it is the whole text decoded.
            let whole: Value = serde_json::from_str(&text).unwrap();
            if streamed.1 {
                differed_from_whole += 1;
            } else {
                assert_eq!(streamed.0, whole, "{text}");
            }
        }
        assert!(
            differed_from_whole > 50,
            "{differed_from_whole} parts were cut"
        );
        assert!(walked > 200, "{walked} parts compared with the walk");
    }

    #[test]
    fn the_word_scan_stops_where_the_byte_scan_does() {
        let naive = |bytes: &[u8]| {
            bytes
                .iter()
                .position(|&b| b == b'"' || b == b'\\' || b < 0x20)
                .unwrap_or(bytes.len())
        };
        for special in [b'"', b'\\', 0, 0x1f, b'\n'] {
            for len in 0..40 {
                for at in 0..=len {
                    let mut bytes = vec![b'x'; len];
                    // Bytes just past the specials' values, and above 0x7f, are plain.
                    for (k, b) in bytes.iter_mut().enumerate() {
                        *b = [b'x', 0x20, 0x23, 0x5d, 0xc3, 0xff][k % 6];
                    }
                    if at < len {
                        bytes[at] = special;
                    }
                    assert_eq!(plain_len(&bytes), naive(&bytes), "{bytes:?}");
                    let mut counted = 0;
                    assert_eq!(skip_counted(&bytes, &mut counted), naive(&bytes));
                }
            }
        }
        let mut counted = 0;
        assert_eq!(skip_counted(br#"ab\n\"cd\u0041"#, &mut counted), 8);
        assert_eq!(counted, 6);
    }

    /// How long the cutter takes over a long string (run with `--ignored --nocapture`).
    #[test]
    #[ignore = "a measurement"]
    fn measure_the_cutter() {
        for line in [false, true] {
            let body = if line { "some output line\\n" } else { "x" };
            let count = 100_000_000 / body.len();
            let text = format!(r#"{{"s":"{}"}}"#, body.repeat(count));
            let started = std::time::Instant::now();
            let (_, was_cut) = cut_part(text.as_bytes(), CutLimits::PAGE).unwrap();
            assert!(was_cut);
            eprintln!("100 MB, lines {line}: {:?}", started.elapsed());
        }
    }
}
