//! Every query in `sql/queries` earns its place: each function sqlgen generates is called
//! somewhere outside the generated code (a service, the CLI, a benchmark or a test).
//! A query nothing calls is dead weight that still has to be kept valid against every
//! migration; delete it from `sql/queries` and run `cargo sqlgen generate`.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::{Path, PathBuf};

/// The workspace root (this crate is `tests/`).
fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

/// Every `.rs` file under `dir`, skipping build output and generated code.
fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for entry in entries.flatten() {
        let path = entry.path();
        let name = entry.file_name();
        if path.is_dir() {
            if name != "target" && name != "generated" && name != "fixtures" {
                rust_files(&path, out);
            }
        } else if path.extension().is_some_and(|ext| ext == "rs") {
            out.push(path);
        }
    }
}

/// The names of the generated query functions (not the row readers they share, whose doc
/// line starts "Reads a").
fn generated_functions() -> Vec<String> {
    let code = std::fs::read_to_string(root().join("crates/db/generated/queries.rs")).unwrap();
    let lines: Vec<&str> = code.lines().collect();
    lines
        .windows(2)
        .filter(|pair| !pair[0].starts_with("/// Reads a [`"))
        .filter_map(|pair| pair[1].strip_prefix("pub fn "))
        .map(|rest| {
            rest.split(|c: char| !(c.is_alphanumeric() || c == '_'))
                .next()
                .unwrap_or_default()
                .to_owned()
        })
        .collect()
}

/// The methods called on `q()` or `reads()` (`tx.q().get_session(…)`,
/// `tx.reads().get_session(…)`, also across a line break).
fn trait_method_calls(sources: &str) -> std::collections::HashSet<&str> {
    let mut methods = std::collections::HashSet::new();
    let calls = ["q()", "reads()"]
        .into_iter()
        .flat_map(|handle| sources.match_indices(handle));
    for (at, handle) in calls {
        let rest = sources[at + handle.len()..].trim_start();
        let Some(rest) = rest.strip_prefix('.') else {
            continue;
        };
        let end = rest
            .find(|c: char| !(c.is_alphanumeric() || c == '_'))
            .unwrap_or(rest.len());
        if rest[end..].starts_with('(') {
            methods.insert(&rest[..end]);
        }
    }
    methods
}

#[test]
fn trait_method_calls_count_as_calls() {
    let calls = trait_method_calls(
        "tx.q().get_session(id)?; tx.q()\n    .list_x(&p); q().y; q(); tx.reads().get_z(id)",
    );
    assert_eq!(
        calls,
        ["get_session", "list_x", "get_z"].into_iter().collect()
    );
}

#[test]
fn every_generated_query_function_is_called_outside_the_generated_code() {
    let functions = generated_functions();
    assert!(functions.len() > 20, "found only {functions:?}");
    let mut files = Vec::new();
    for dir in ["crates", "tests", "build-tools/src"] {
        rust_files(&root().join(dir), &mut files);
    }
    let sources: String = files
        .iter()
        .map(|path| std::fs::read_to_string(path).unwrap())
        .collect();
    // Callers name the module (`q::get_session(…)`, `queries::get_session(…)`) or call the
    // query's trait method on a transaction (`tx.q().get_session(…)`, `tx.reads()…`).
    let methods = trait_method_calls(&sources);
    let unused: Vec<&String> = functions
        .iter()
        .filter(|name| {
            !methods.contains(name.as_str())
                && !["q::", "queries::"]
                    .iter()
                    .any(|module| sources.contains(&format!("{module}{name}(")))
        })
        .collect();
    assert!(
        unused.is_empty(),
        "generated query functions nothing calls (remove them from sql/queries and run \
         `cargo sqlgen generate`): {unused:?}"
    );
}
