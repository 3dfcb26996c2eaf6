//! Reading a `scribe export` file for `scribe import` without holding its sessions:
//! [`ExportFile::check`] parses every session once to check the whole file (so a malformed
//! file imports nothing) and keeps only each session's id, parent, title and message
//! count; [`ExportFile::each`] parses the file again and hands over one session at a
//! time. A 300 MB export took 1.8 GB to import when every session was held at once (as a
//! JSON tree, then as sessions); now it takes the file's text and a batch.
//!
//! The file is a JSON export document (`{"format", "version", "sessions": [...]}`), a
//! JSON array of session exports, one session export, or JSON Lines (one per line).

use std::collections::HashMap;
use std::fmt;

use scribe_session::SessionExport;
use serde::de::{self, DeserializeSeed, IgnoredAny, MapAccess, SeqAccess, Visitor};

use crate::commands::export::{FORMAT_NAME, FORMAT_VERSION};

/// How the sessions are laid out in the file.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Shape {
    /// `{"format", "version", "sessions": [...]}`.
    Document,
    /// `[...]`.
    Array,
    /// One session's export.
    One,
    /// One session's export per line.
    Lines,
}

/// What [`ExportFile::check`] keeps of a session.
#[derive(Debug, Clone, PartialEq)]
pub struct Listed {
    /// Its id.
    pub id: String,
    /// Its parent's id, if it has one.
    pub parent: Option<String>,
    /// Its title, if it has one.
    pub title: Option<String>,
    /// Its messages.
    pub messages: usize,
}

impl Listed {
    /// What is kept of `export`.
    pub fn of(export: &SessionExport) -> Self {
        Listed {
            id: export.session.id.clone(),
            parent: export.session.parent_session_id.clone(),
            title: export.session.title.clone(),
            messages: export.messages.len(),
        }
    }
}

/// An export file whose every session parsed, with what each is.
#[derive(Debug)]
pub struct ExportFile {
    text: String,
    shape: Shape,
    listed: Vec<Listed>,
}

impl ExportFile {
    /// Checks the whole of `text` as an export file. `Err` says where and why it is
    /// malformed.
    pub fn check(text: String) -> Result<ExportFile, String> {
        let mut listed = Vec::new();
        let shape = walk(&text, None, &mut |export| {
            listed.push(Listed::of(&export));
            Ok(())
        })?;
        Ok(ExportFile {
            text,
            shape,
            listed,
        })
    }

    /// The sessions, in the file's order.
    pub fn listed(&self) -> &[Listed] {
        &self.listed
    }

    /// Whether every session that has its parent in the file comes after it (as `scribe
    /// export` writes them): then they can be imported in the file's order, one at a time.
    pub fn parents_first(&self) -> bool {
        let at: HashMap<&str, usize> = self
            .listed
            .iter()
            .enumerate()
            .map(|(i, s)| (s.id.as_str(), i))
            .collect();
        self.listed.iter().enumerate().all(|(i, s)| {
            s.parent
                .as_deref()
                .and_then(|p| at.get(p))
                .is_none_or(|&parent| parent < i)
        })
    }

    /// Hands over each session in the file's order, parsed again; stops at the first
    /// `Err` of `each` and returns it.
    pub fn each(
        &self,
        each: &mut dyn FnMut(SessionExport) -> Result<(), String>,
    ) -> Result<(), String> {
        walk(&self.text, Some(self.shape), each).map(|_| ())
    }

    /// Every session, in the file's order.
    pub fn all(&self) -> Vec<SessionExport> {
        let mut all = Vec::with_capacity(self.listed.len());
        // Checked already: it parses.
        let _ = self.each(&mut |export| {
            all.push(export);
            Ok(())
        });
        all
    }
}

/// Walks the sessions of `text` (laid out as `shape`, or as found), handing each to
/// `each`; returns the shape.
fn walk(
    text: &str,
    shape: Option<Shape>,
    each: &mut dyn FnMut(SessionExport) -> Result<(), String>,
) -> Result<Shape, String> {
    let trimmed = text.trim_start_matches('\u{feff}').trim();
    if trimmed.is_empty() {
        return Err("the file is empty".to_owned());
    }
    if !trimmed.starts_with('{') && !trimmed.starts_with('[') {
        return Err("not JSON: a scribe export starts with `{` or `[`".to_owned());
    }
    match shape {
        Some(Shape::Lines) => return lines(trimmed, each).map(|()| Shape::Lines),
        Some(shape) => return value(trimmed, shape, each).map(|_| shape),
        None => {}
    }
    let shape = if trimmed.starts_with('[') {
        Shape::Array
    } else {
        Shape::Document
    };
    // A file that handed sessions over as one value and then failed is a broken document
    // or array (its error says where), never JSON Lines.
    let mut handed = 0_usize;
    let whole = value(trimmed, shape, &mut |export| {
        handed += 1;
        each(export)
    });
    match whole {
        Ok(shape) => Ok(shape),
        // Not one JSON value: JSON Lines, one session per line.
        Err(whole) => {
            let mut values = trimmed.lines().filter(|l| !l.trim().is_empty());
            // A first line that is not a whole JSON value means a broken JSON document,
            // not JSON Lines: report where the document broke.
            let first_is_value = values
                .next()
                .is_some_and(|l| serde_json::from_str::<IgnoredAny>(l).is_ok());
            if handed > 0 || values.next().is_none() || !first_is_value {
                return Err(whole);
            }
            lines(trimmed, each).map(|()| Shape::Lines)
        }
    }
}

/// The sessions of one JSON value laid out as `shape` (a document turns out to be one
/// session's export when it has no `sessions`): returns the shape it was.
fn value(
    text: &str,
    shape: Shape,
    each: &mut dyn FnMut(SessionExport) -> Result<(), String>,
) -> Result<Shape, String> {
    let mut de = serde_json::Deserializer::from_str(text);
    let shape = match shape {
        Shape::Array => {
            EachSession(each)
                .deserialize(&mut de)
                .map_err(|e| e.to_string())?;
            Shape::Array
        }
        Shape::One => {
            each(one(&mut de)?)?;
            Shape::One
        }
        // (JSON Lines are read line by line, never as one value.)
        Shape::Document | Shape::Lines => {
            let has_sessions = de::Deserializer::deserialize_map(&mut de, Document(each))
                .map_err(|e| e.to_string())?;
            if !has_sessions {
                de.end().map_err(|e| e.to_string())?;
                // One session's export: parsed as one.
                let mut whole = serde_json::Deserializer::from_str(text);
                each(one(&mut whole)?)?;
                whole.end().map_err(|e| e.to_string())?;
                return Ok(Shape::One);
            }
            Shape::Document
        }
    };
    de.end().map_err(|e| e.to_string())?;
    Ok(shape)
}

/// The sessions of JSON Lines, one per line; a line that is no session says which.
fn lines(
    text: &str,
    each: &mut dyn FnMut(SessionExport) -> Result<(), String>,
) -> Result<(), String> {
    for (i, line) in text.lines().enumerate() {
        if line.trim().is_empty() {
            continue;
        }
        let export = serde_json::from_str::<SessionExport>(line)
            .map_err(|e| format!("line {}: {e}", i + 1))?;
        each(export)?;
    }
    Ok(())
}

/// One session's export, parsed from `de`.
fn one(
    de: &mut serde_json::Deserializer<serde_json::de::StrRead<'_>>,
) -> Result<SessionExport, String> {
    serde::Deserialize::deserialize(de).map_err(|e: serde_json::Error| e.to_string())
}

/// A JSON array of session exports, each handed over as soon as it is parsed.
struct EachSession<'f>(&'f mut dyn FnMut(SessionExport) -> Result<(), String>);

impl<'de> DeserializeSeed<'de> for EachSession<'_> {
    type Value = ();

    fn deserialize<D: de::Deserializer<'de>>(self, de: D) -> Result<(), D::Error> {
        de.deserialize_seq(self)
    }
}

impl<'de> Visitor<'de> for EachSession<'_> {
    type Value = ();

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("an array of session exports")
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<(), A::Error> {
        while let Some(export) = seq.next_element::<SessionExport>()? {
            (self.0)(export).map_err(de::Error::custom)?;
        }
        Ok(())
    }
}

/// An export document: its `format` and `version` checked, its `sessions` handed over
/// one at a time. `false`: it has no `sessions` (one session's export, not a document).
struct Document<'f>(&'f mut dyn FnMut(SessionExport) -> Result<(), String>);

impl<'de> Visitor<'de> for Document<'_> {
    type Value = bool;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a scribe export")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<bool, A::Error> {
        let mut has_sessions = false;
        while let Some(key) = map.next_key::<String>()? {
            match key.as_str() {
                "format" => {
                    let format: serde_json::Value = map.next_value()?;
                    if let Some(f) = format.as_str().filter(|f| *f != FORMAT_NAME) {
                        return Err(de::Error::custom(format!(
                            "unknown format {f:?}, expected {FORMAT_NAME:?}"
                        )));
                    }
                    serde_json::from_value::<String>(format).map_err(de::Error::custom)?;
                }
                "version" => {
                    let version: serde_json::Value = map.next_value()?;
                    if let Some(v) = version.as_u64().filter(|v| *v > u64::from(FORMAT_VERSION)) {
                        return Err(de::Error::custom(format!(
                            "written by a newer scribe (export version {v}, this build reads \
                             {FORMAT_VERSION})"
                        )));
                    }
                    serde_json::from_value::<u32>(version).map_err(de::Error::custom)?;
                }
                "exported_at" => {
                    map.next_value::<i64>()?;
                }
                "sessions" => {
                    map.next_value_seed(EachSession(&mut *self.0))?;
                    has_sessions = true;
                }
                _ => {
                    map.next_value::<IgnoredAny>()?;
                }
            }
        }
        Ok(has_sessions)
    }
}

#[cfg(test)]
mod tests {
    use super::ExportFile;

    fn check(text: &str) -> Result<ExportFile, String> {
        ExportFile::check(text.to_owned())
    }

    #[test]
    fn malformed_files_say_where() {
        assert!(check("").unwrap_err().contains("empty"));
        assert!(check("hello").unwrap_err().contains("not JSON"));
        let err = check("{\"session\": 1}\n{\"x\": 2}\n").unwrap_err();
        assert!(err.starts_with("line 1:"), "{err}");
        let err = check("{\n  \"format\": \"scribe-export\",\n  \"sessions\": [\n").unwrap_err();
        assert!(err.contains("EOF") && err.contains("line 3"), "{err}");
        let err = check(r#"{"format":"scribe-export","version":9,"sessions":[]}"#).unwrap_err();
        assert!(err.contains("newer"), "{err}");
        let err = check(r#"{"format":"other","sessions":[]}"#).unwrap_err();
        assert!(err.contains("unknown format \"other\""), "{err}");
        let err = check(r#"{"sessions":[{"nope":1}]}"#).unwrap_err();
        assert!(err.contains("missing field `session`"), "{err}");
        let err = check("[] x").unwrap_err();
        assert!(err.contains("trailing characters"), "{err}");
        let empty = check(r#"{"format":"scribe-export","version":1,"sessions":[]}"#).unwrap();
        assert!(empty.listed().is_empty());
        assert!(empty.all().is_empty());
    }
}
