//! Where the database is: `--db PATH|URL`, else `SCRIBE_DB` (both handled by clap), else
//! the platform data directory (`~/.local/share/scribe/scribe.db` on Linux).
//!
//! A `postgres://` or `postgresql://` URL (or a libpq keyword string such as
//! `host=/run/postgresql dbname=scribe`, which is not a URL and passes as a "path") names
//! a PostgreSQL database; `scribe_db::Database::open` tells them apart. Any other
//! `scheme://` is a usage error.
//!
//! Where the prices are: the built-in pricing catalog, with the user's catalog file
//! applied ([`model_catalog`]).

use std::path::PathBuf;

use directories::ProjectDirs;
use scribe_agent::models::ModelCatalog;

use crate::error::CliError;

/// `--db` / `SCRIBE_DB` as clap reads it: a path, or a PostgreSQL URL. Another URL
/// (`mysql://…`, any `scheme://` without a backend) is refused as a usage error, rather
/// than being taken for a path and creating directories named after it. Anything else is
/// a path, `./mysql://…` included.
pub fn parse_db_path(text: &str) -> Result<PathBuf, String> {
    match url_scheme(text) {
        Some(scheme) if is_postgres_scheme(scheme) => Ok(PathBuf::from(text)),
        Some(scheme) => Err(format!(
            "{scheme}:// is a database URL, and there is no backend for {scheme}; --db takes \
             a file path or a postgres:// URL (write ./{text} for a file of that name)"
        )),
        None => Ok(PathBuf::from(text)),
    }
}

/// [`parse_db_path`] for any OS string (`--db`, `SCRIBE_DB`): a file name that is not
/// UTF-8, legal on Unix, is a path as given (clap refused it: "invalid UTF-8 was detected
/// in one or more arguments", exit 2); only a URL must be text.
pub fn parse_db_os(text: std::ffi::OsString) -> Result<PathBuf, String> {
    match text.to_str() {
        Some(text) => parse_db_path(text),
        None if url_scheme(&text.to_string_lossy()).is_some() => {
            Err("a database URL must be valid UTF-8".to_owned())
        }
        None => Ok(PathBuf::from(text)),
    }
}

/// The schemes of a PostgreSQL URL (as libpq spells them).
fn is_postgres_scheme(scheme: &str) -> bool {
    scheme == "postgres" || scheme == "postgresql"
}

/// The scheme of `text` when it starts like a URL: `scheme://` with an RFC 3986 scheme
/// (a letter, then letters, digits, `+`, `-` or `.`).
fn url_scheme(text: &str) -> Option<&str> {
    let (scheme, _) = text.split_once("://")?;
    let mut chars = scheme.chars();
    let first = chars.next()?;
    (first.is_ascii_alphabetic()
        && chars.all(|c| c.is_ascii_alphanumeric() || matches!(c, '+' | '-' | '.')))
    .then_some(scheme)
}

/// The database a command works on.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DbPath {
    /// The path or PostgreSQL location.
    pub path: PathBuf,
    /// Whether the user named it (`--db`, `SCRIBE_DB`) rather than taking the default: a
    /// missing file they named is an error, a missing default is a first run.
    pub explicit: bool,
}

/// The database path the user asked for, or the platform default.
pub fn database_path(explicit: Option<PathBuf>) -> Result<DbPath, CliError> {
    if let Some(path) = explicit.filter(|p| !p.as_os_str().is_empty()) {
        return Ok(DbPath {
            path,
            explicit: true,
        });
    }
    let dirs = ProjectDirs::from("", "", "scribe").ok_or(CliError::NoDataDir)?;
    Ok(DbPath {
        path: dirs.data_dir().join("scribe.db"),
        explicit: false,
    })
}

/// Names the model catalog file (TOML or JSON) that prices what `import --from` reads.
pub const MODELS_VAR: &str = "SCRIBE_MODELS";

/// The catalog file read when [`MODELS_VAR`] is not set, in the platform config directory
/// (`~/.config/scribe/models.toml` on Linux), if there is one.
pub const MODELS_FILE: &str = "models.toml";

/// The pricing catalog: the built-in models with the user's catalog file applied, the
/// file [`MODELS_VAR`] names (which must be there) or else [`MODELS_FILE`] in the
/// platform config directory when it exists. A file that cannot be read or parsed, or
/// holds an invalid entry, is an error naming it and the entry.
pub fn model_catalog() -> Result<ModelCatalog, CliError> {
    let mut catalog = ModelCatalog::builtin();
    let path = match std::env::var_os(MODELS_VAR).filter(|v| !v.is_empty()) {
        Some(path) => PathBuf::from(path),
        None => match default_models_file() {
            Some(path) => path,
            None => return Ok(catalog),
        },
    };
    catalog
        .apply_file(&path)
        .map_err(|source| CliError::ModelCatalog { source })?;
    Ok(catalog)
}

/// [`MODELS_FILE`] in the platform config directory, when it is there (a missing one is
/// no catalog file: the built-in prices alone).
fn default_models_file() -> Option<PathBuf> {
    let path = ProjectDirs::from("", "", "scribe")?
        .config_dir()
        .join(MODELS_FILE);
    match std::fs::symlink_metadata(&path) {
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => None,
        _ => Some(path),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn explicit_path_wins() {
        let db = database_path(Some(PathBuf::from("/tmp/x.db"))).unwrap();
        assert_eq!(db.path, PathBuf::from("/tmp/x.db"));
        assert!(db.explicit);
    }

    #[test]
    fn urls_are_refused_and_paths_kept() {
        for url in [
            "mysql://u@h/db",
            "sqlite://x.db",
            "a+b.c-d://x",
            "Postgres://x",
        ] {
            assert!(parse_db_path(url).is_err(), "{url}");
        }
        for url in ["postgres://u@h/db", "postgresql://h/db?sslmode=require"] {
            assert_eq!(parse_db_path(url), Ok(PathBuf::from(url)), "{url}");
        }
        for path in [
            "x.db",
            "/tmp/a://b",
            "./postgres://x",
            "1abc://x",
            "c:\\x.db",
            "",
        ] {
            assert_eq!(parse_db_path(path), Ok(PathBuf::from(path)), "{path}");
        }
    }

    #[test]
    fn default_is_under_a_scribe_data_dir() {
        if let Ok(DbPath { path, explicit }) = database_path(None) {
            assert!(!explicit);
            assert!(path.ends_with("scribe.db"));
            assert!(path.to_string_lossy().to_lowercase().contains("scribe"));
        }
    }
}
