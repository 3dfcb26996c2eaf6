//! File history for the built-in file tools: after `write_file` or `edit_file`
//! changes a file, the new content is recorded as the next version of that path in
//! the session ([`FileRecorder`], backed by [`SessionService::record_file`]).
//!
//! The first time a session changes a file it has no version of yet, the content the
//! file had before is recorded first (version 1), so the history shows before and
//! after; a file the call created has no "before". Paths are recorded relative to the
//! project root, `/`-separated.
//!
//! Recording happens after the file was written, so a failure to record must not turn
//! the call into an error (the model would retry a change that already happened): it is
//! reported in the tool output's metadata under `"history"` instead. Binary content and
//! content over [`MAX_RECORDED_BYTES`] are not recorded either; the metadata says so.
//!
//! Each version number is assigned inside its own write transaction, but "has this
//! session a version yet?" and the original's recording are separate steps: that is
//! safe because one session's tool calls run one at a time (one runner holds a
//! session's run lease).

use std::error::Error as StdError;

use serde_json::{Value, json};

use scribe_session::SessionService;

/// The largest content (bytes) recorded as a file version.
pub const MAX_RECORDED_BYTES: usize = 1024 * 1024;

/// Why a file change could not be recorded (shown in the tool's metadata).
pub type RecordError = Box<dyn StdError + Send + Sync>;

/// Where the built-in file tools record the files a session changed.
pub trait FileRecorder: Send + Sync {
    /// Whether `session_id` already has a version of `path`.
    fn has_versions(&self, session_id: &str, path: &str) -> Result<bool, RecordError>;

    /// Records `content` as the next version of `path`; returns its number.
    fn record(&self, session_id: &str, path: &str, content: &str) -> Result<i64, RecordError>;
}

impl FileRecorder for SessionService {
    fn has_versions(&self, session_id: &str, path: &str) -> Result<bool, RecordError> {
        Ok(!self.file_versions(session_id, path)?.is_empty())
    }

    fn record(&self, session_id: &str, path: &str, content: &str) -> Result<i64, RecordError> {
        Ok(self.record_file(session_id, path, content)?.version)
    }
}

/// What a file held before a tool changed it.
#[derive(Debug)]
pub(crate) enum Before {
    /// The file did not exist.
    Absent,
    /// Its text.
    Text(String),
    /// It could not be read as text (binary, unreadable); the reason.
    Unrecordable(String),
}

impl Before {
    /// Reads what `path` holds now, before it is overwritten.
    pub(crate) fn read(path: &std::path::Path) -> Before {
        match std::fs::read(path) {
            Ok(bytes) => text_of(bytes).map_or_else(Before::Unrecordable, Before::Text),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Before::Absent,
            Err(e) => Before::Unrecordable(format!("cannot read the previous content: {e}")),
        }
    }

    /// Text already read, unless it is too large or binary to record.
    pub(crate) fn text(text: String) -> Before {
        text_of(text.into_bytes()).map_or_else(Before::Unrecordable, Before::Text)
    }
}

fn text_of(bytes: Vec<u8>) -> Result<String, String> {
    if bytes.len() > MAX_RECORDED_BYTES {
        return Err(too_large(bytes.len()));
    }
    if bytes.contains(&0) {
        return Err("binary content not recorded".to_owned());
    }
    String::from_utf8(bytes).map_err(|_| "binary content not recorded".to_owned())
}

fn too_large(len: usize) -> String {
    format!("content of {len} bytes exceeds the {MAX_RECORDED_BYTES}-byte limit; not recorded")
}

/// Records the change of `path` (relative to the project root; `None` when it cannot
/// be expressed so) from `before` to `after` in `session_id`, and says what happened as
/// the JSON put under `"history"` in the tool's metadata.
pub(crate) fn record_change(
    recorder: &dyn FileRecorder,
    session_id: &str,
    path: Option<&str>,
    before: Before,
    after: &str,
) -> Value {
    let Some(path) = path else {
        return json!({"skipped": "the path is not inside the project root; not recorded"});
    };
    if after.len() > MAX_RECORDED_BYTES {
        return json!({"path": path, "skipped": too_large(after.len())});
    }
    if after.as_bytes().contains(&0) {
        return json!({"path": path, "skipped": "binary content not recorded"});
    }
    let mut versions = Vec::new();
    let mut note = None;
    let recorded = record_versions(
        recorder,
        session_id,
        path,
        &before,
        after,
        &mut versions,
        &mut note,
    );
    let mut out = json!({"path": path, "versions": versions});
    if let Some(note) = note {
        out["note"] = Value::String(note);
    }
    if let Err(e) = recorded {
        out["error"] = Value::String(format!("recording the file version failed: {e}"));
    }
    out
}

fn record_versions(
    recorder: &dyn FileRecorder,
    session_id: &str,
    path: &str,
    before: &Before,
    after: &str,
    versions: &mut Vec<i64>,
    note: &mut Option<String>,
) -> Result<(), RecordError> {
    if !recorder.has_versions(session_id, path)? {
        match before {
            Before::Absent => {}
            Before::Text(text) => versions.push(recorder.record(session_id, path, text)?),
            Before::Unrecordable(why) => *note = Some(format!("original: {why}")),
        }
    }
    versions.push(recorder.record(session_id, path, after)?);
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Mutex;

    #[derive(Default)]
    struct Memory {
        versions: Mutex<Vec<(String, String)>>,
        fail: bool,
    }

    impl FileRecorder for Memory {
        fn has_versions(&self, _s: &str, path: &str) -> Result<bool, RecordError> {
            Ok(self.versions.lock().unwrap().iter().any(|(p, _)| p == path))
        }
        fn record(&self, _s: &str, path: &str, content: &str) -> Result<i64, RecordError> {
            if self.fail {
                return Err("disk full".into());
            }
            let mut v = self.versions.lock().unwrap();
            v.push((path.to_owned(), content.to_owned()));
            Ok(i64::try_from(v.iter().filter(|(p, _)| p == path).count()).unwrap())
        }
    }

    #[test]
    fn records_the_original_once_then_each_change() {
        let m = Memory::default();
        let first = record_change(&m, "s", Some("a"), Before::Text("old".into()), "new");
        assert_eq!(first["versions"], json!([1, 2]));
        let second = record_change(&m, "s", Some("a"), Before::Text("new".into()), "newer");
        assert_eq!(second["versions"], json!([3]));
        let created = record_change(&m, "s", Some("b"), Before::Absent, "x");
        assert_eq!(created["versions"], json!([1]));
    }

    #[test]
    fn failures_and_skips_are_reported_not_raised() {
        let failing = Memory {
            fail: true,
            ..Memory::default()
        };
        let out = record_change(&failing, "s", Some("a"), Before::Absent, "x");
        assert!(
            out["error"].as_str().unwrap().contains("disk full"),
            "{out}"
        );
        let m = Memory::default();
        let huge = "x".repeat(MAX_RECORDED_BYTES + 1);
        let out = record_change(&m, "s", Some("a"), Before::Absent, &huge);
        assert!(out["skipped"].as_str().unwrap().contains("limit"), "{out}");
        let out = record_change(&m, "s", Some("a"), Before::Absent, "a\0b");
        assert!(out["skipped"].as_str().unwrap().contains("binary"), "{out}");
        assert!(m.versions.lock().unwrap().is_empty());
        let out = record_change(
            &m,
            "s",
            Some("a"),
            Before::Unrecordable("binary".into()),
            "t",
        );
        assert_eq!(out["versions"], json!([1]));
        assert!(out["note"].as_str().unwrap().contains("binary"), "{out}");
    }
}
