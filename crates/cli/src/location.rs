//! Where the database is: `--db PATH`, else `SCRIBE_DB` (both handled by clap), else the
//! platform data directory (`~/.local/share/scribe/scribe.db` on Linux).

use std::path::PathBuf;

use directories::ProjectDirs;

use crate::error::CliError;

/// The database path the user asked for, or the platform default.
pub fn database_path(explicit: Option<PathBuf>) -> Result<PathBuf, CliError> {
    if let Some(path) = explicit.filter(|p| !p.as_os_str().is_empty()) {
        return Ok(path);
    }
    let dirs = ProjectDirs::from("", "", "scribe").ok_or(CliError::NoDataDir)?;
    Ok(dirs.data_dir().join("scribe.db"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn explicit_path_wins() {
        let path = database_path(Some(PathBuf::from("/tmp/x.db"))).unwrap();
        assert_eq!(path, PathBuf::from("/tmp/x.db"));
    }

    #[test]
    fn default_is_under_a_scribe_data_dir() {
        if let Ok(path) = database_path(None) {
            assert!(path.ends_with("scribe.db"));
            assert!(path.to_string_lossy().to_lowercase().contains("scribe"));
        }
    }
}
