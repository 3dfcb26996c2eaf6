//! Which backend a database location names, and the parts of [`Database`] that differ by
//! backend without being about SQLite files: opening PostgreSQL, [`Database::backend`],
//! [`Database::location`].

use std::path::Path;

use crate::database::Engine;
use crate::{Backend, Database, Error, Options, Result};

/// The location `path` names when it is not a file: `Some` for a PostgreSQL URL or keyword
/// string; an error for another `scheme://` URL (no backend for it); `None` for a path.
pub(crate) fn remote_location(path: &Path) -> Result<Option<&str>> {
    let Some(text) = path.to_str() else {
        return Ok(None);
    };
    if is_postgres(text) {
        return Ok(Some(text));
    }
    if let Some((scheme, _)) = text.split_once("://") {
        let is_scheme = scheme
            .chars()
            .next()
            .is_some_and(|c| c.is_ascii_alphabetic())
            && scheme
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || matches!(c, '+' | '-' | '.'));
        if is_scheme {
            return Err(Error::InvalidLocation {
                location: text.to_owned(),
                reason: format!(
                    "there is no backend for {scheme}:// (a file path, postgres:// or \
                     postgresql://)"
                ),
            });
        }
    }
    Ok(None)
}

#[cfg(feature = "postgres")]
fn is_postgres(text: &str) -> bool {
    crate::pg::location::is_postgres(text)
}

#[cfg(feature = "postgres")]
fn shown_remote(text: &str) -> String {
    crate::pg::location::redact(text)
}

#[cfg(not(feature = "postgres"))]
fn shown_remote(text: &str) -> String {
    let scheme = text.split_once("://").map_or("postgres", |(s, _)| s);
    format!("{}://…", scheme.trim())
}

#[cfg(not(feature = "postgres"))]
fn is_postgres(text: &str) -> bool {
    let t = text.trim_start();
    t.starts_with("postgres://") || t.starts_with("postgresql://")
}

impl Database {
    /// Opens the PostgreSQL database at `location` (a `postgres://` URL or a libpq keyword
    /// string) and brings its schema up to date, under an advisory lock so that processes
    /// starting together migrate it once. [`Database::open`] does the same when given
    /// such a location. `sslmode` `disable`, `allow`, `prefer` (the default), `require`,
    /// `verify-ca` and `verify-full` mean what they mean to libpq, with `sslrootcert`
    /// naming the root certificate to trust (`system`: the system's; empty: none named, as
    /// libpq reads it).
    ///
    /// Errors say what to fix: [`Error::InvalidLocation`] (a malformed URL, or any URL
    /// when this build lacks scribe-db's `postgres` feature), [`Error::Unreachable`],
    /// [`Error::NotPostgres`] (something else answers there), [`Error::AuthFailed`],
    /// [`Error::NoSuchDatabase`], [`Error::Tls`], [`Error::NoSchema`] (the location's
    /// `search_path` names no schema that exists, or none the user may use: Scribe
    /// creates none), [`Error::SchemaNotWritable`] (tables to create or migrate, and a user
    /// who may not create in the schema), [`Error::ForeignDatabase`],
    /// [`Error::SchemaTooNew`]. With [`Options::read_only`] nothing is migrated, an older
    /// schema is [`Error::SchemaTooOld`] and writes are [`Error::ReadOnly`].
    pub fn open_postgres(location: &str, options: Options) -> Result<Self> {
        Self::open_postgres_at(location, options, None)
    }

    #[cfg(feature = "postgres")]
    pub(crate) fn open_postgres_at(
        location: &str,
        options: Options,
        target: Option<i64>,
    ) -> Result<Self> {
        let (backend, migration) = crate::pg::PgBackend::open(location, &options, target)?;
        Database::from_postgres(backend, options, migration)
    }

    #[cfg(not(feature = "postgres"))]
    pub(crate) fn open_postgres_at(
        location: &str,
        _options: Options,
        _target: Option<i64>,
    ) -> Result<Self> {
        let scheme = location.split_once("://").map_or("postgres", |(s, _)| s);
        Err(Error::InvalidLocation {
            // Only the scheme: the rest may hold a password.
            location: format!("{}://…", scheme.trim()),
            reason: "this build has no PostgreSQL backend (scribe-db's `postgres` feature)"
                .to_owned(),
        })
    }

    /// `location` as [`Database::location`] would show it once opened, without opening
    /// anything: a path as it is, a PostgreSQL location with its password hidden (only
    /// its scheme when this build has no PostgreSQL backend). For messages about a
    /// location that could not be opened.
    pub fn shown_location(location: impl AsRef<Path>) -> String {
        let path = location.as_ref();
        match remote_location(path) {
            Ok(Some(text)) => shown_remote(text),
            Ok(None) => path.display().to_string(),
            // Another scheme: nothing of it is opened, and it may hold a password.
            Err(_) => path
                .to_str()
                .and_then(|text| text.split_once("://"))
                .map_or_else(
                    || "(a database URL)".to_owned(),
                    |(scheme, _)| format!("{}://…", scheme.trim()),
                ),
        }
    }

    /// Which backend this database runs on.
    pub fn backend(&self) -> Backend {
        match self.engine() {
            Engine::Sqlite(_) => Backend::Sqlite,
            #[cfg(feature = "postgres")]
            Engine::Postgres(_) => Backend::Postgres,
        }
    }

    /// Where the database is, for people: the file's path, `:memory:`, or the PostgreSQL
    /// location with its password hidden.
    pub fn location(&self) -> String {
        match self.engine() {
            Engine::Sqlite(sqlite) => match sqlite.path() {
                Some(path) => path.display().to_string(),
                None => ":memory:".to_owned(),
            },
            #[cfg(feature = "postgres")]
            Engine::Postgres(pg) => pg.shown().to_owned(),
        }
    }

    /// Whether `self` and `other` are handles to one store, so that what one writes the
    /// other reads: the same handle; two handles on one SQLite file, however its path was
    /// written (the same file on disk, through links and `..`); two on one PostgreSQL
    /// location as written (password hidden), so the same server, database and settings.
    /// Two in-memory databases are two stores, and a location that names one server two
    /// ways counts as two (nothing on the client side can tell they are one).
    pub fn is_same_store(&self, other: &Database) -> bool {
        if std::ptr::eq(self, other) {
            return true;
        }
        match (self.backend(), other.backend()) {
            (Backend::Sqlite, Backend::Sqlite) => match (self.path(), other.path()) {
                (Some(a), Some(b)) => same_file(a, b),
                _ => false,
            },
            (Backend::Postgres, Backend::Postgres) => self.location() == other.location(),
            _ => false,
        }
    }
}

/// Whether `a` and `b` name one existing file: its device and inode on Unix, its
/// canonical path elsewhere. A path that cannot be read names no file.
fn same_file(a: &Path, b: &Path) -> bool {
    #[cfg(unix)]
    {
        use std::os::unix::fs::MetadataExt;
        match (std::fs::metadata(a), std::fs::metadata(b)) {
            (Ok(a), Ok(b)) => (a.dev(), a.ino()) == (b.dev(), b.ino()),
            _ => false,
        }
    }
    #[cfg(not(unix))]
    {
        match (std::fs::canonicalize(a), std::fs::canonicalize(b)) {
            (Ok(a), Ok(b)) => a == b,
            _ => false,
        }
    }
}
