//! Files history: the versions of files a session changed ([`FileVersion`]), numbered
//! 1, 2, 3 … per (session, path).

use scribe_db::ids::{Prefix, new_id};
use scribe_db::queries::{self as q, FileRow};
use serde::{Deserialize, Serialize};

use crate::error::{Result, SessionError};
use crate::service::{SessionService, load};

/// One version of a file as a session left it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct FileVersion {
    /// `fil_…`.
    pub id: String,
    /// The session that changed the file.
    pub session_id: String,
    /// The file's path as the agent named it.
    pub path: String,
    /// The whole content of this version.
    pub content: String,
    /// 1 for the first version of this path in this session, then 2, 3 …
    pub version: i64,
    /// When this version was recorded (ms).
    pub created_at: i64,
    /// When it last changed (ms).
    pub updated_at: i64,
}

impl From<FileRow> for FileVersion {
    fn from(row: FileRow) -> Self {
        FileVersion {
            id: row.id,
            session_id: row.session_id,
            path: row.path,
            content: row.content,
            version: row.version,
            created_at: row.created_at,
            updated_at: row.updated_at,
        }
    }
}

pub(crate) fn file_versions(rows: Vec<FileRow>) -> Vec<FileVersion> {
    rows.into_iter().map(FileVersion::from).collect()
}

/// Which of the file version ids `ids` are stored, each with its session (`(file version
/// id, session id)`; ids not stored are left out). One statement with an `IN` list of all
/// of `ids`: call it per chunk for many.
pub(crate) fn file_sessions(
    tx: &mut dyn scribe_db::Reads,
    ids: &[&str],
) -> Result<Vec<(String, String)>> {
    if ids.is_empty() {
        return Ok(Vec::new());
    }
    Ok(tx
        .reads()
        .list_file_sessions(ids)?
        .into_iter()
        .map(|row| (row.id, row.session_id))
        .collect())
}

/// Refuses, on PostgreSQL, a file version whose path or content holds the NUL character
/// (a binary file's bytes read as text), which PostgreSQL's text cannot store (SQLite
/// stores it): [`scribe_db::Error::NulInText`] naming the file and the session.
pub(crate) fn ensure_storable_file(
    tx: &scribe_db::Tx<'_>,
    session_id: &str,
    path: &str,
    content: &str,
) -> Result<()> {
    let backend = tx.backend();
    scribe_db::storable_text(
        backend,
        || format!("the path {path:?} of a file of session {session_id}"),
        path,
    )?;
    scribe_db::storable_text(
        backend,
        || format!("the content of file {path:?} of session {session_id}"),
        content,
    )?;
    Ok(())
}

impl SessionService {
    /// Records `content` as the next version of `path` in `session_id` (1 when it is the
    /// first). The number is assigned inside the write transaction, so concurrent
    /// recorders never get the same one. Files are not session events: nothing is
    /// published.
    pub fn record_file(&self, session_id: &str, path: &str, content: &str) -> Result<FileVersion> {
        if path.trim().is_empty() {
            return Err(SessionError::InvalidInput(
                "file path must not be empty".to_owned(),
            ));
        }
        let id = new_id(Prefix::File);
        self.db.write(|tx| {
            load(tx, session_id)?;
            ensure_storable_file(tx, session_id, path, content)?;
            let params = q::CreateFileVersionParams {
                id: &id,
                session_id,
                path,
                content,
                now: tx.now(),
            };
            Ok(FileVersion::from(tx.q().create_file_version(&params)?))
        })
    }

    /// Every version of `path` in `session_id`, oldest first (empty when the session
    /// never changed it).
    pub fn file_versions(&self, session_id: &str, path: &str) -> Result<Vec<FileVersion>> {
        self.db.read(|tx| {
            load(tx, session_id)?;
            let params = q::ListFileVersionsParams { session_id, path };
            Ok(file_versions(tx.q().list_file_versions(&params)?))
        })
    }

    /// Version `version` of `path` in `session_id`.
    pub fn file_version(&self, session_id: &str, path: &str, version: i64) -> Result<FileVersion> {
        self.db.read(|tx| {
            load(tx, session_id)?;
            let params = q::GetFileVersionParams {
                session_id,
                path,
                version,
            };
            match tx.q().get_file_version(&params)? {
                Some(row) => Ok(FileVersion::from(row)),
                None => Err(SessionError::not_found(
                    "file version",
                    format!("{path} v{version}"),
                )),
            }
        })
    }

    /// The newest version of every path `session_id` changed, by path.
    pub fn latest_files(&self, session_id: &str) -> Result<Vec<FileVersion>> {
        self.db.read(|tx| {
            load(tx, session_id)?;
            Ok(file_versions(tx.q().list_latest_files(session_id)?))
        })
    }
}
