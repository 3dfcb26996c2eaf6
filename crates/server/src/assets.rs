//! The page and everything it loads, embedded in the binary: nothing comes from a CDN, so
//! the viewer works offline. `assets/vendor/` holds the third-party libraries, unmodified,
//! with their licences (`assets/vendor/README.md` says which version of what).

use std::sync::OnceLock;

/// An embedded file.
#[derive(Debug)]
pub struct Asset {
    /// Its path under `/assets/`.
    pub path: &'static str,
    /// Its `Content-Type`.
    pub mime: &'static str,
    /// Its bytes.
    pub body: &'static [u8],
}

const JS: &str = "text/javascript; charset=utf-8";
const CSS: &str = "text/css; charset=utf-8";
const TEXT: &str = "text/plain; charset=utf-8";

macro_rules! asset {
    ($path:literal, $mime:expr) => {
        Asset {
            path: $path,
            mime: $mime,
            body: include_bytes!(concat!("../assets/", $path)),
        }
    };
}

/// Every embedded file.
pub static ASSETS: &[Asset] = &[
    asset!("index.html", "text/html; charset=utf-8"),
    asset!("app.js", JS),
    asset!("app.css", CSS),
    asset!("favicon.svg", "image/svg+xml"),
    asset!("vendor/marked.umd.js", JS),
    asset!("vendor/purify.min.js", JS),
    asset!("vendor/highlight.min.js", JS),
    asset!("vendor/diff.min.js", JS),
    asset!("vendor/highlight-github.min.css", CSS),
    asset!("vendor/highlight-github-dark.min.css", CSS),
    asset!("vendor/README.md", TEXT),
    asset!("vendor/LICENSE-marked.txt", TEXT),
    asset!("vendor/LICENSE-dompurify.txt", TEXT),
    asset!("vendor/LICENSE-highlight.js.txt", TEXT),
    asset!("vendor/LICENSE-diff.txt", TEXT),
];

/// The embedded file at `path` (under `/assets/`) and its `ETag`.
pub fn find(path: &str) -> Option<(&'static Asset, &'static str)> {
    static TAGS: OnceLock<Vec<String>> = OnceLock::new();
    let tags = TAGS.get_or_init(|| ASSETS.iter().map(|a| etag(a.body)).collect());
    let i = ASSETS.iter().position(|a| a.path == path)?;
    Some((ASSETS.get(i)?, tags.get(i)?.as_str()))
}

/// The page every route of the viewer serves.
pub fn index() -> &'static [u8] {
    include_bytes!("../assets/index.html")
}

/// A strong validator: FNV-1a over the bytes.
fn etag(bytes: &[u8]) -> String {
    let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
    for &b in bytes {
        hash ^= u64::from(b);
        hash = hash.wrapping_mul(0x0100_0000_01b3);
    }
    format!("\"{hash:016x}\"")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_asset_is_found_with_a_distinct_tag() {
        let mut tags = Vec::new();
        for asset in ASSETS {
            let (found, tag) = find(asset.path).unwrap_or_else(|| panic!("{}", asset.path));
            assert!(!found.body.is_empty(), "{} is empty", asset.path);
            tags.push(tag);
        }
        tags.sort_unstable();
        tags.dedup();
        assert_eq!(tags.len(), ASSETS.len());
        assert!(find("nope.js").is_none());
    }
}
