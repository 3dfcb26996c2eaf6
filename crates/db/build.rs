//! Generates the typed query layer: runs sqlgen over `sql/migrations/{sqlite,postgres}` and
//! `sql/queries` (with its `sqlite/` and `postgres/` overrides), checks that both dialects
//! agree, and writes `$OUT_DIR/queries.rs` and `$OUT_DIR/queries_postgres.rs`, which
//! `src/queries.rs` includes. A bad query fails the build with every diagnostic, each as
//! `sql/queries/<file>.sql:<line>:<col>: <Query>: <cause>`.

use std::path::{Path, PathBuf};
use std::{env, fs, process};

fn main() {
    let manifest_dir = PathBuf::from(env::var_os("CARGO_MANIFEST_DIR").unwrap_or_default());
    let repo_root = manifest_dir.join("../..");
    let repo_root = repo_root.canonicalize().unwrap_or(repo_root);
    let migrations = repo_root.join("sql/migrations");
    let queries = repo_root.join("sql/queries");

    // Directories are watched for added or removed files, each file for edits.
    for base in [&migrations, &queries] {
        for dir in [base.clone(), base.join("sqlite"), base.join("postgres")] {
            println!("cargo:rerun-if-changed={}", dir.display());
            for file in sql_files(&dir) {
                println!("cargo:rerun-if-changed={}", file.display());
            }
        }
    }

    let project = match sqlgen::analyze_project(&migrations, &queries) {
        Ok(project) => project,
        Err(diagnostics) => {
            // Paths relative to the repository root read the same in CI logs and editors.
            let prefix = format!("{}/", repo_root.display());
            for line in diagnostics.to_string().lines() {
                eprintln!("{}", line.replace(&prefix, ""));
            }
            process::exit(1);
        }
    };

    let out_dir = PathBuf::from(env::var_os("OUT_DIR").unwrap_or_default());
    for file in project.render() {
        let out = out_dir.join(&file.name);
        if let Err(err) = fs::write(&out, file.code) {
            eprintln!("cannot write {}: {err}", out.display());
            process::exit(1);
        }
    }
}

fn sql_files(dir: &Path) -> Vec<PathBuf> {
    let mut files: Vec<PathBuf> = fs::read_dir(dir)
        .into_iter()
        .flatten()
        .flatten()
        .map(|entry| entry.path())
        .filter(|path| path.extension().is_some_and(|ext| ext == "sql"))
        .collect();
    files.sort();
    files
}
