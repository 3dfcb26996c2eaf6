//! `sqlgen` command line: generate, check (CI freshness gate) and explain the query layer.

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use clap::{Args, Parser, Subcommand};

/// Annotated SQL queries to type-safe Rust, for SQLite and PostgreSQL.
#[derive(Debug, Parser)]
#[command(name = "sqlgen", version)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Write the generated Rust modules (the committed copies by default): `queries.rs` and,
    /// with PostgreSQL migrations, `queries_postgres.rs` beside it.
    Generate {
        #[command(flatten)]
        dirs: Dirs,
        /// Output file (default: crates/db/generated/queries.rs).
        #[arg(long)]
        out: Option<PathBuf>,
    },
    /// Validate every query in both dialects, check their parity, and fail if a committed
    /// generated copy is stale or missing.
    Check {
        #[command(flatten)]
        dirs: Dirs,
        /// Committed copy to compare against (default: crates/db/generated/queries.rs).
        #[arg(long)]
        out: Option<PathBuf>,
    },
    /// Print each query's inferred parameters and row type, one line per query and dialect.
    Explain {
        #[command(flatten)]
        dirs: Dirs,
    },
}

#[derive(Debug, Args)]
struct Dirs {
    /// Migrations `V<n>__name.sql`, in `sqlite/` and `postgres/` below it or (SQLite only)
    /// in it (default: sql/migrations).
    #[arg(long)]
    migrations: Option<PathBuf>,
    /// Shared query files `*.sql`, with per-dialect overrides in its `sqlite/` and
    /// `postgres/` (default: sql/queries).
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
                .unwrap_or_else(|| root.join("sql/migrations")),
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

/// Where each generated file goes: the first at `out`, the others beside it
/// (`queries_postgres.rs` → `<stem>_postgres.rs`).
fn output_path(out: &Path, name: &str) -> PathBuf {
    match name.strip_prefix("queries") {
        Some(rest) if !rest.is_empty() && rest != ".rs" => {
            let stem = out.file_stem().map_or_else(
                || "queries".to_string(),
                |s| s.to_string_lossy().into_owned(),
            );
            out.with_file_name(format!("{stem}{rest}"))
        }
        _ => out.to_path_buf(),
    }
}

fn analyze(dirs: &Dirs) -> Result<sqlgen::Project, String> {
    let (m, q) = dirs.resolve();
    let project = sqlgen::analyze_project(&m, &q).map_err(|d| d.to_string())?;
    for note in project.notes() {
        eprintln!("{note}");
    }
    Ok(project)
}

fn run(cli: Cli) -> Result<(), String> {
    match cli.command {
        Command::Generate { dirs, out } => {
            let project = analyze(&dirs)?;
            let out = default_out(out);
            for file in project.render() {
                let path = output_path(&out, &file.name);
                if let Some(parent) = path.parent() {
                    std::fs::create_dir_all(parent)
                        .map_err(|e| format!("cannot create {}: {e}", parent.display()))?;
                }
                let unchanged = std::fs::read_to_string(&path).is_ok_and(|old| old == file.code);
                if !unchanged {
                    std::fs::write(&path, &file.code)
                        .map_err(|e| format!("cannot write {}: {e}", path.display()))?;
                }
                let shown = sqlgen::display_path(&path);
                println!("{} {shown}", if unchanged { "unchanged" } else { "wrote" });
            }
            Ok(())
        }
        Command::Check { dirs, out } => {
            let project = analyze(&dirs)?;
            let out = default_out(out);
            let mut stale = Vec::new();
            for file in project.render() {
                let path = output_path(&out, &file.name);
                let shown = sqlgen::display_path(&path);
                match std::fs::read_to_string(&path) {
                    Ok(old) if old == file.code => println!("ok: {shown} is up to date"),
                    Ok(_) => stale.push(format!(
                        "stale: {shown} differs from what sql/ produces; run `cargo sqlgen generate`"
                    )),
                    Err(_) => stale.push(format!(
                        "stale: {shown} is missing; run `cargo sqlgen generate`"
                    )),
                }
            }
            if stale.is_empty() {
                Ok(())
            } else {
                Err(stale.join("\n"))
            }
        }
        Command::Explain { dirs } => {
            let project = analyze(&dirs)?;
            for line in project.explain() {
                println!("{line}");
            }
            Ok(())
        }
    }
}
