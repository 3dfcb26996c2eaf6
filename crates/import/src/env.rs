//! Where each agent keeps its history: default locations per platform and the agents' own
//! overrides, read from an [`Env`] so tests can point them anywhere.

use std::collections::HashMap;
use std::path::PathBuf;

/// The VS Code-like editors whose extension storage is looked in, by their folder's name.
const EDITORS: [&str; 5] = ["Code", "Code - Insiders", "VSCodium", "Cursor", "Windsurf"];

/// The home directory and environment variables the default locations come from.
#[derive(Debug, Clone, Default)]
pub struct Env {
    /// The user's home directory.
    pub home: Option<PathBuf>,
    /// Environment variables.
    pub vars: HashMap<String, String>,
}

impl Env {
    /// The process's own home and environment.
    pub fn from_process() -> Env {
        let vars: HashMap<String, String> = std::env::vars().collect();
        let home = vars
            .get("HOME")
            .or_else(|| vars.get("USERPROFILE"))
            .filter(|h| !h.is_empty())
            .map(PathBuf::from);
        Env { home, vars }
    }

    /// A non-empty variable.
    pub fn var(&self, name: &str) -> Option<&str> {
        self.vars
            .get(name)
            .map(String::as_str)
            .filter(|v| !v.trim().is_empty())
    }

    /// A variable holding a comma-separated list of paths (`CLAUDE_CONFIG_DIR`,
    /// `HERMES_HOME`), each one trimmed.
    pub fn paths(&self, name: &str) -> Option<Vec<PathBuf>> {
        let list: Vec<PathBuf> = self
            .var(name)?
            .split(',')
            .map(str::trim)
            .filter(|p| !p.is_empty())
            .map(|p| self.expand(p))
            .collect();
        (!list.is_empty()).then_some(list)
    }

    /// `~/…` under the home directory.
    pub fn expand(&self, path: &str) -> PathBuf {
        match (path.strip_prefix("~/"), &self.home) {
            (Some(rest), Some(home)) => home.join(rest),
            _ => PathBuf::from(path),
        }
    }

    /// Where each VS Code-like editor keeps `extension`'s storage on this platform
    /// (`<config>/<editor>/User/globalStorage/<extension>`; config: `$XDG_CONFIG_HOME` or
    /// `~/.config` on Linux, `~/Library/Application Support` on macOS, `%APPDATA%` on
    /// Windows), whether or not it exists.
    pub fn editor_storage(&self, extension: &str) -> Vec<PathBuf> {
        EDITORS
            .iter()
            .flat_map(|editor| self.editor_user_dir(editor))
            .map(|user| user.join("globalStorage").join(extension))
            .collect()
    }

    /// Where the VS Code-like editor whose folder is named `editor` (`Cursor`) keeps its
    /// user data on this platform (`<config>/<editor>/User`, config as for
    /// [`Env::editor_storage`]), whether or not it exists.
    pub fn editor_user_dir(&self, editor: &str) -> Option<PathBuf> {
        let config = if cfg!(windows) {
            self.var("APPDATA").map(PathBuf::from)
        } else if cfg!(target_os = "macos") {
            self.home_join("Library/Application Support")
        } else {
            match self.var("XDG_CONFIG_HOME") {
                Some(dir) => Some(self.expand(dir)),
                None => self.home_join(".config"),
            }
        };
        config.map(|base| base.join(editor).join("User"))
    }

    /// `home/rel`, when there is a home.
    pub fn home_join(&self, rel: &str) -> Option<PathBuf> {
        self.home.as_ref().map(|h| h.join(rel))
    }
}
