//! `sqlgen` command line: generate, check (CI freshness gate) and explain the query layer.

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use clap::{Args, Parser, Subcommand};

/// Annotated SQLite queries to type-safe rusqlite functions.
#[derive(Debug, Parser)]
#[command(name = "sqlgen", version)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Write the generated Rust module (the committed copy by default).
    Generate {
        #[command(flatten)]
        dirs: Dirs,
        /// Output file (default: crates/db/generated/queries.rs).
        #[arg(long)]
        out: Option<PathBuf>,
    },
    /// Validate every query and fail if the committed generated copy is stale or missing.
    Check {
        #[command(flatten)]
        dirs: Dirs,
        /// Committed copy to compare against (default: crates/db/generated/queries.rs).
        #[arg(long)]
        out: Option<PathBuf>,
    },
    /// Print each query's inferred parameters and row type, one line per query.
    Explain {
        #[command(flatten)]
        dirs: Dirs,
    },
}

#[derive(Debug, Args)]
struct Dirs {
    /// Directory of ordered migrations `V<n>__name.sql` (default: sql/migrations).
    #[arg(long)]
    migrations: Option<PathBuf>,
    /// Directory of annotated query files `*.sql` (default: sql/queries).
    #[arg(long)]
    queries: Option<PathBuf>,
}

/// The workspace root: the nearest ancestor of the current directory with `sql/`, else the one
/// this binary was built from.
fn repo_root() -> PathBuf {
    if let Ok(cwd) = std::env::current_dir() {
        let mut dir = Some(cwd.as_path());
        while let Some(d) = dir {
            if d.join("sql").is_dir() && d.join("Cargo.toml").is_file() {
                return d.to_path_buf();
            }
            dir = d.parent();
        }
    }
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .map_or_else(|| PathBuf::from("."), Path::to_path_buf)
}

impl Dirs {
    fn resolve(&self) -> (PathBuf, PathBuf) {
        let root = repo_root();
        (
            self.migrations
                .clone()
                .unwrap_or_else(|| root.join("sql/migrations/sqlite")),
            self.queries
                .clone()
                .unwrap_or_else(|| root.join("sql/queries")),
        )
    }
}

fn default_out(out: Option<PathBuf>) -> PathBuf {
    out.unwrap_or_else(|| repo_root().join("crates/db/generated/queries.rs"))
}

fn main() -> ExitCode {
    let cli = match Cli::try_parse() {
        Ok(c) => c,
        Err(e) => {
            let _ = e.print();
            return if e.use_stderr() {
                ExitCode::from(2)
            } else {
                ExitCode::SUCCESS
            };
        }
    };
    match run(cli) {
        Ok(()) => ExitCode::SUCCESS,
        Err(msg) => {
            eprintln!("{msg}");
            ExitCode::from(1)
        }
    }
}

fn run(cli: Cli) -> Result<(), String> {
    match cli.command {
        Command::Generate { dirs, out } => {
            let (m, q) = dirs.resolve();
            let code = sqlgen::generate(&m, &q).map_err(|d| d.to_string())?;
            let out = default_out(out);
            if let Some(parent) = out.parent() {
                std::fs::create_dir_all(parent)
                    .map_err(|e| format!("cannot create {}: {e}", parent.display()))?;
            }
            let unchanged = std::fs::read_to_string(&out).is_ok_and(|old| old == code);
            if !unchanged {
                std::fs::write(&out, &code)
                    .map_err(|e| format!("cannot write {}: {e}", out.display()))?;
            }
            let shown = sqlgen::display_path(&out);
            println!("{} {shown}", if unchanged { "unchanged" } else { "wrote" });
            Ok(())
        }
        Command::Check { dirs, out } => {
            let (m, q) = dirs.resolve();
            let code = sqlgen::generate(&m, &q).map_err(|d| d.to_string())?;
            let out = default_out(out);
            let shown = sqlgen::display_path(&out);
            match std::fs::read_to_string(&out) {
                Ok(old) if old == code => {
                    println!("ok: {shown} is up to date");
                    Ok(())
                }
                Ok(_) => Err(format!(
                    "stale: {shown} differs from what sql/ produces; run `cargo sqlgen generate`"
                )),
                Err(_) => Err(format!(
                    "stale: {shown} is missing; run `cargo sqlgen generate`"
                )),
            }
        }
        Command::Explain { dirs } => {
            let (m, q) = dirs.resolve();
            let analyzed = sqlgen::analyze(&m, &q).map_err(|d| d.to_string())?;
            for line in analyzed.explain() {
                println!("{line}");
            }
            Ok(())
        }
    }
}
