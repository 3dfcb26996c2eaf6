//! Confinement of paths to allowed roots, shared by the built-in tools (the
//! project root) and prompt ingestion (the session's directory plus extra
//! roots).
//!
//! A requested path is joined to a base directory, normalised lexically (so
//! `..` cannot climb out), then its deepest existing ancestor is
//! canonicalised (so a symlink pointing out of the root is seen for what it
//! is). The result must lie inside one of the canonicalised roots; callers
//! then act on the returned path, which is exactly the one that was checked.

use std::io;
use std::path::{Component, Path, PathBuf};

/// A path that may not be used.
#[derive(Debug, thiserror::Error)]
pub enum PathError {
    /// The path resolves outside every allowed root (`..`, an absolute path
    /// elsewhere, or a symlink out).
    #[error("path {path:?} is outside the allowed roots")]
    Outside {
        /// The path as requested.
        path: String,
    },
    /// No allowed root exists on disk, so nothing can be allowed.
    #[error("no allowed root exists")]
    NoRoots,
    /// The file system refused to resolve the path.
    #[error("cannot resolve {path:?}")]
    Io {
        /// The path as requested.
        path: String,
        /// The underlying failure.
        #[source]
        source: io::Error,
    },
}

/// Canonicalises `roots`, dropping the ones that do not exist.
pub fn canonical_roots<'a>(roots: impl IntoIterator<Item = &'a Path>) -> Vec<PathBuf> {
    roots
        .into_iter()
        .filter_map(|r| r.canonicalize().ok())
        .collect()
}

/// Resolves `requested` (relative to `base`, or absolute) and checks it lies
/// inside one of `roots` (already canonical, see [`canonical_roots`]). The
/// path need not exist; its existing part is canonicalised.
pub fn resolve_within(
    roots: &[PathBuf],
    base: &Path,
    requested: &str,
) -> Result<PathBuf, PathError> {
    if roots.is_empty() {
        return Err(PathError::NoRoots);
    }
    let outside = || PathError::Outside {
        path: requested.to_owned(),
    };
    let requested_path = Path::new(requested);
    let joined = if requested_path.is_absolute() {
        requested_path.to_path_buf()
    } else {
        base.join(requested_path)
    };
    let normal = normalize(&joined).ok_or_else(outside)?;
    let resolved = canonicalize_existing(&normal).map_err(|source| PathError::Io {
        path: requested.to_owned(),
        source,
    })?;
    if roots.iter().any(|root| resolved.starts_with(root)) {
        Ok(resolved)
    } else {
        Err(outside())
    }
}

/// Removes `.` and applies `..` lexically; `None` if `..` climbs above the
/// file-system root.
fn normalize(path: &Path) -> Option<PathBuf> {
    let mut out = PathBuf::new();
    for component in path.components() {
        match component {
            Component::CurDir => {}
            Component::ParentDir => {
                if !out.pop() || out.as_os_str().is_empty() {
                    return None;
                }
            }
            other => out.push(other.as_os_str()),
        }
    }
    Some(out)
}

/// Canonicalises the deepest existing ancestor of `path` and appends the rest.
fn canonicalize_existing(path: &Path) -> io::Result<PathBuf> {
    let mut existing = path.to_path_buf();
    let mut rest = Vec::new();
    loop {
        match existing.canonicalize() {
            Ok(canonical) => {
                let mut out = canonical;
                for name in rest.iter().rev() {
                    out.push(name);
                }
                return Ok(out);
            }
            Err(err) if err.kind() == io::ErrorKind::NotFound => {
                let Some(name) = existing.file_name().map(ToOwned::to_owned) else {
                    return Err(err);
                };
                rest.push(name);
                if !existing.pop() {
                    return Err(err);
                }
            }
            Err(err) => return Err(err),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn confines_to_roots() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().join("proj");
        std::fs::create_dir_all(root.join("src")).unwrap();
        std::fs::write(root.join("src/a.rs"), "x").unwrap();
        let roots = canonical_roots([root.as_path()]);
        let ok = resolve_within(&roots, &root, "src/a.rs").unwrap();
        assert!(ok.ends_with("src/a.rs"));
        // Not existing yet is fine (write_file creates it).
        assert!(resolve_within(&roots, &root, "src/new/b.rs").is_ok());
        assert!(resolve_within(&roots, &root, "./src/../src/a.rs").is_ok());
        for bad in ["../x", "src/../../x", "/etc/passwd"] {
            assert!(
                matches!(
                    resolve_within(&roots, &root, bad),
                    Err(PathError::Outside { .. })
                ),
                "{bad}"
            );
        }
        assert!(matches!(
            resolve_within(&[], &root, "a"),
            Err(PathError::NoRoots)
        ));
    }

    #[cfg(unix)]
    #[test]
    fn symlink_out_of_the_root_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().join("proj");
        let secret = dir.path().join("secret");
        std::fs::create_dir_all(&root).unwrap();
        std::fs::create_dir_all(&secret).unwrap();
        std::fs::write(secret.join("key"), "k").unwrap();
        std::os::unix::fs::symlink(&secret, root.join("link")).unwrap();
        let roots = canonical_roots([root.as_path()]);
        assert!(matches!(
            resolve_within(&roots, &root, "link/key"),
            Err(PathError::Outside { .. })
        ));
    }
}
