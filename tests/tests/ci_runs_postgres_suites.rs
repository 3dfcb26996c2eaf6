//! Every test file with PostgreSQL variants is run against a server by `.ci/run`.
//!
//! A PostgreSQL test is `#[ignore = "needs PostgreSQL: …"]` (or a `backends!` suite's
//! `postgres` half), so a plain `cargo test` lists it as ignored and passes; only the
//! commands `.ci/run` gives `.ci/with-postgres` run it, and those name their test files one
//! by one. A new file not named there would never run on PostgreSQL, and nothing would
//! say so (`search_pages` and `rough_edges` went unrun that way). This reads the test files
//! and `.ci/run` and names each such file `.ci/run` does not run with a server. Unit tests
//! (in a crate's `src/`) that need a server are run by a command giving that package's
//! `--lib` or `--bin`.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::BTreeSet;
use std::fs;
use std::path::{Path, PathBuf};

/// The repository's root.
fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

/// What marks a test as needing a server: the reasons its `#[ignore]` gives, and the
/// `backends!` macro (`scribe_tests::backends!` too), whose `postgres` half is ignored.
/// (`scribe-server`'s browser tests pick theirs by name, `on_postgres…`, and are run so.)
const MARKERS: [&str; 3] = [
    "ignore = \"needs PostgreSQL",
    "ignore = \"needs a PostgreSQL",
    "backends!(",
];

/// Whether the file at `path` has tests that need a server.
fn has_postgres_tests(path: &Path) -> bool {
    let text = fs::read_to_string(path).unwrap();
    MARKERS.iter().any(|marker| text.contains(marker))
}

/// Every `.rs` file under `dir`, its subdirectories too.
fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    let Ok(entries) = fs::read_dir(dir) else {
        return;
    };
    for entry in entries {
        let path = entry.unwrap().path();
        if path.is_dir() {
            rust_files(&path, out);
        } else if path.extension().is_some_and(|ext| ext == "rs") {
            out.push(path);
        }
    }
}

/// The package of every crate (`crates/<dir>`, package `scribe-<dir>`) with a file in
/// `src/` whose unit tests need a server.
fn packages_with_postgres_unit_tests() -> BTreeSet<String> {
    let mut packages = BTreeSet::new();
    for entry in fs::read_dir(root().join("crates")).unwrap() {
        let dir = entry.unwrap().path();
        let name = dir.file_name().unwrap().to_str().unwrap().to_owned();
        let mut files = Vec::new();
        rust_files(&dir.join("src"), &mut files);
        if files.iter().any(|file| has_postgres_tests(file)) {
            packages.insert(format!("scribe-{name}"));
        }
    }
    packages
}

/// `(package, test file stem)` of every integration test file that has PostgreSQL
/// variants: `crates/<dir>/tests/*.rs` (package `scribe-<dir>`) and `tests/tests/*.rs`
/// (`scribe-tests`).
fn postgres_suites() -> BTreeSet<(String, String)> {
    let mut dirs: Vec<(String, PathBuf)> =
        vec![("scribe-tests".into(), root().join("tests/tests"))];
    for entry in fs::read_dir(root().join("crates")).unwrap() {
        let dir = entry.unwrap().path();
        let name = dir.file_name().unwrap().to_str().unwrap().to_owned();
        dirs.push((format!("scribe-{name}"), dir.join("tests")));
    }
    let mut suites = BTreeSet::new();
    for (package, dir) in dirs {
        let Ok(entries) = fs::read_dir(&dir) else {
            continue;
        };
        for entry in entries {
            let path = entry.unwrap().path();
            if path.extension().is_none_or(|ext| ext != "rs") {
                continue;
            }
            let stem = path.file_stem().unwrap().to_str().unwrap().to_owned();
            // This file names the markers without having PostgreSQL variants.
            if stem == "ci_runs_postgres_suites" {
                continue;
            }
            if has_postgres_tests(&path) {
                suites.insert((package.clone(), stem));
            }
        }
    }
    suites
}

/// `(package, test file stem)` of every `cargo test -p P --test T …` that `.ci/run` runs
/// under `.ci/with-postgres` (lines joined at a trailing `\`; commands split at `&&`), and
/// `(package, "src")` for one that gives `--lib` or `--bin` (its unit tests).
fn run_with_postgres() -> BTreeSet<(String, String)> {
    let script = fs::read_to_string(root().join(".ci/run")).unwrap();
    let joined = script.replace("\\\n", " ");
    let mut run = BTreeSet::new();
    for line in joined.lines().filter(|l| l.contains(".ci/with-postgres")) {
        for command in line.split("&&") {
            let words: Vec<&str> = command
                .split_whitespace()
                .map(|w| w.trim_matches(|c| c == '\'' || c == '"'))
                .collect();
            let Some(at) = words.windows(2).position(|w| w == ["cargo", "test"]) else {
                continue;
            };
            let words = &words[at..];
            let packages: Vec<&str> = words
                .windows(2)
                .filter(|w| w[0] == "-p")
                .map(|w| w[1])
                .collect();
            for test in words.windows(2).filter(|w| w[0] == "--test").map(|w| w[1]) {
                for package in &packages {
                    run.insert(((*package).to_owned(), test.to_owned()));
                }
            }
            if words.iter().any(|w| *w == "--lib" || *w == "--bin") {
                for package in &packages {
                    run.insert(((*package).to_owned(), "src".to_owned()));
                }
            }
        }
    }
    run
}

#[test]
fn every_postgres_suite_is_run_with_a_server() {
    let suites = postgres_suites();
    // The reader finds what it should: files known to have PostgreSQL variants.
    for known in [
        ("scribe-tests", "session_transfer"),
        ("scribe-cli", "postgres_pass"),
    ] {
        assert!(
            suites.contains(&(known.0.to_owned(), known.1.to_owned())),
            "{known:?} not found among {suites:?}"
        );
    }
    let run = run_with_postgres();
    assert!(
        run.contains(&("scribe-tests".to_owned(), "session_transfer".to_owned())),
        "{run:?}"
    );
    let mut unrun: Vec<String> = suites
        .difference(&run)
        .map(|(package, test)| format!("cargo test -p {package} --test {test} -- --ignored"))
        .collect();
    let unit = packages_with_postgres_unit_tests();
    // The reader finds unit tests too: the run lease's two-host tests.
    assert!(unit.contains("scribe-agent"), "{unit:?}");
    unrun.extend(
        unit.iter()
            .filter(|package| !run.contains(&((*package).clone(), "src".to_owned())))
            .map(|package| format!("cargo test -p {package} --lib -- --ignored")),
    );
    assert!(
        unrun.is_empty(),
        "test files with PostgreSQL variants that .ci/run never runs under .ci/with-postgres \
         (add them to one of its commands):\n{}",
        unrun.join("\n")
    );
}
