//! scribe-bench: Scribe's benchmark report. Measures, in one run on the same machine,
//! Scribe against two baselines: the limit (the simplest raw rusqlite program that stores
//! the same conversations with word search, [`limit`]), which every target is a ratio
//! against, and the same design as Scribe's in raw rusqlite (its own statements without
//! the library). Appends, sustained appends with the search indexes caught up, commit to
//! searchable, a streamed reply, several writer processes on one file, search, loading a
//! session, the file's bytes per message, Scribe's own import into an empty database and
//! export, history import (Claude Code and Codex files), `context()` after a summary, and the web viewer's requests at size;
//! prints one table (or, with `--json`, the same figures as one JSON document).
//!
//! ```text
//! cargo run --release -p scribe-bench [-- --quick] [--json] [--seed N]
//! cargo run --release -p scribe-bench -- --compaction [--quick] [--json] [--seed N]
//! ```
//!
//! `--db postgres://…` runs the PostgreSQL report instead ([`postgres`]): 1, 4 and 16
//! writer processes on the server and on SQLite (saturated, and paced at one append per
//! writer every 75 ms), events from one host to another, loading a session, and search
//! on both backends.
//!
//! ```text
//! cargo run --release -p scribe-bench -- --db postgres://me@host/scratch [--quick] [--json]
//! ```
//!
//! `--compaction` runs the compaction report instead ([`compaction`]): one scripted long
//! coding session through the agent loop under each compaction strategy, and the loop's
//! hot paths.
//!
//! The binary also runs as a writer process for the multi-process benchmark (the hidden
//! `--writer` role; see [`writers`]).

mod append;
mod compaction;
mod corpus;
mod data;
mod import;
mod latency;
mod limit;
mod pg_limit;
mod postgres;
mod reads;
mod report;
mod stats;
mod stream;
mod trace;
mod transfer;
mod web;
mod writers;

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Instant;

use clap::Parser;
use scribe_session::Store;

use crate::report::{Machine, Report, Sizes};

/// The bench's error: anything, with its message.
pub type Error = Box<dyn std::error::Error + Send + Sync>;
/// The bench's result.
pub type Result<T> = std::result::Result<T, Error>;

/// Command line.
#[derive(Debug, Parser)]
#[command(
    name = "scribe-bench",
    about = "Scribe's benchmark report: Scribe against raw rusqlite, in one run"
)]
struct Cli {
    /// Small sizes: a smoke run that finishes in seconds (figures are not meaningful).
    #[arg(long)]
    quick: bool,
    /// Print the figures as one JSON document instead of the table.
    #[arg(long)]
    json: bool,
    /// Seed of the generated content.
    #[arg(long, default_value_t = 42)]
    seed: u64,
    /// Run as a writer process of the multi-process benchmark (internal).
    #[arg(long, hide = true, requires_all = ["db", "session", "count"])]
    writer: bool,
    /// Run the PostgreSQL report against this database (a `postgres://` URL or libpq
    /// keyword string; it writes sessions there and deletes them at the end: use a
    /// scratch database). Writer processes: the database file.
    #[arg(long, value_name = "URL")]
    db: Option<PathBuf>,
    /// Writer: the session to append to.
    #[arg(long, hide = true)]
    session: Option<String>,
    /// Writer: how many messages to append.
    #[arg(long, hide = true)]
    count: Option<usize>,
    /// Writer: raw rusqlite with SQLite's busy handler only.
    #[arg(long, hide = true)]
    raw: bool,
    /// Run the compaction report (a scripted session under each strategy) instead.
    #[arg(long)]
    compaction: bool,
    /// Run only this part (append, latency, stream, writers, reads, transfer, import, web) and print its
    /// figures as JSON: for profiling one thing at a time.
    #[arg(long, value_name = "PART")]
    only: Option<String>,
    /// Work in this directory (kept afterwards) instead of a temporary one.
    #[arg(long, value_name = "DIR")]
    keep: Option<PathBuf>,
    /// Writer: Scribe with its previous default waits (for contrast).
    #[arg(long, hide = true, conflicts_with = "raw")]
    previous_defaults: bool,
    /// Writer: `Database::write` with the generated query traits, on the database named
    /// by SCRIBE_BENCH_DB (either backend).
    #[arg(long, hide = true, conflicts_with_all = ["raw", "previous_defaults", "limit"])]
    queries: bool,
    /// Writer: the limit (autocommit INSERTs into its own schema).
    #[arg(long, hide = true, conflicts_with_all = ["raw", "previous_defaults"])]
    limit: bool,
    /// Writer: PostgreSQL's limit on the server named by SCRIBE_BENCH_DB (raw `postgres`
    /// client, its own schema; the variant from SCRIBE_BENCH_PG_VARIANT).
    #[arg(long, hide = true, conflicts_with_all = ["raw", "previous_defaults", "limit", "queries"])]
    pg_limit: bool,
}

fn main() {
    let cli = Cli::parse();
    let outcome = if cli.writer && cli.pg_limit {
        match (&cli.session, cli.count) {
            (Some(session), Some(count)) => pg_limit::child(session, count, cli.seed),
            _ => Err("--writer needs --session and --count".into()),
        }
    } else if cli.writer && cli.queries {
        match (&cli.session, cli.count) {
            (Some(session), Some(count)) => postgres::child(session, count, cli.seed),
            _ => Err("--writer needs --session and --count".into()),
        }
    } else if cli.writer {
        match (&cli.db, &cli.session, cli.count) {
            (Some(db), Some(session), Some(count)) => {
                let mode = match (cli.raw, cli.previous_defaults, cli.limit) {
                    (true, _, _) => writers::Mode::Raw,
                    (_, true, _) => writers::Mode::ScribePrevious,
                    (_, _, true) => writers::Mode::Limit,
                    _ => writers::Mode::Scribe,
                };
                writers::child(db, session, count, cli.seed, mode)
            }
            _ => Err("--writer needs --db, --session and --count".into()),
        }
    } else {
        run(&cli)
    };
    if let Err(err) = outcome {
        eprintln!("scribe-bench: {err}");
        std::process::exit(1);
    }
}

fn progress(what: &str) {
    eprintln!("[scribe-bench] {what}");
}

/// `--only PART`: one part of the report, its figures as JSON.
fn only(part: &str, dir: &std::path::Path, seed: u64, sizes: &Sizes) -> Result<()> {
    let json = match part {
        "append" => serde_json::to_string_pretty(&append::run(
            dir,
            seed,
            sizes.append_messages,
            sizes.append_chunk,
        )?)?,
        "latency" => serde_json::to_string_pretty(&latency::run(
            dir,
            seed,
            sizes.latency_messages,
            sizes.latency_searches,
        )?)?,
        "stream" => serde_json::to_string_pretty(&stream::run(dir, seed, sizes.stream_rounds)?)?,
        "writers" => serde_json::to_string_pretty(&writers::compare(
            dir,
            sizes.writers,
            sizes.per_writer,
            sizes.writer_runs,
            seed,
        )?)?,
        "reads" => {
            let corpus = corpus::build(
                &dir.join("corpus.db"),
                &dir.join("corpus-limit.db"),
                sizes.corpus,
                seed,
            )?;
            let store = Store::new(Arc::clone(&corpus.db));
            let search = reads::search(&corpus, store.messages(), sizes.queries)?;
            let load = reads::load(&corpus, store.messages(), sizes.load_rounds)?;
            serde_json::to_string_pretty(&(search, load))?
        }
        "transfer" => {
            let db = Arc::new(scribe_db::Database::open(dir.join("export-from.db"))?);
            let sessions = scribe_session::SessionService::new(db);
            let session = sessions.create(scribe_session::NewSession::default())?;
            serde_json::to_string_pretty(&transfer::run(
                &dir.join("transfer.jsonl"),
                &dir.join("transfer.db"),
                seed,
                sizes.import_sessions,
                sizes.import_per_session,
                (&sessions, &session.id),
            )?)?
        }
        "import" => serde_json::to_string_pretty(&import::run(dir, sizes.import_messages, seed)?)?,
        other => return Err(format!("--only: no part named {other:?}").into()),
    };
    println!("{json}");
    Ok(())
}

fn run(cli: &Cli) -> Result<()> {
    if cli.compaction {
        return run_compaction(cli);
    }
    let sizes = if cli.quick {
        Sizes::quick()
    } else {
        Sizes::full()
    };
    let machine = Machine::detect();
    let started = Instant::now();
    let temp = tempfile::tempdir()?;
    let dir = match &cli.keep {
        Some(keep) => {
            std::fs::create_dir_all(keep)?;
            keep.clone()
        }
        None => temp.path().to_owned(),
    };
    let dir = dir.as_path();
    let seed = cli.seed;
    if let Some(url) = &cli.db {
        let url = url.to_str().ok_or("--db: not UTF-8")?;
        let report = postgres::run(url, cli.quick, seed, dir)?;
        if cli.json {
            println!("{}", serde_json::to_string_pretty(&report)?);
        } else {
            print!("{}", report.table());
        }
        return Ok(());
    }
    if let Some(part) = &cli.only {
        if part == "web" {
            println!(
                "{}",
                serde_json::to_string_pretty(&web::run(dir, cli.quick, seed)?)?
            );
            return Ok(());
        }
        return only(part, dir, seed, &sizes);
    }

    progress(&format!(
        "append: {} one-text-part messages, Scribe, the limit and raw alternating every {}",
        sizes.append_messages, sizes.append_chunk
    ));
    let append = append::run(dir, seed, sizes.append_messages, sizes.append_chunk)?;

    progress(&format!(
        "commit to indexed: {} messages, then {} searches right after a commit",
        sizes.latency_messages, sizes.latency_searches
    ));
    let latency = latency::run(dir, seed, sizes.latency_messages, sizes.latency_searches)?;

    progress(&format!(
        "streaming: {} replies of {} bytes in {} flushes, and appended once",
        sizes.stream_rounds,
        stream::REPLY_BYTES,
        stream::FLUSHES
    ));
    let streaming = stream::run(dir, seed, sizes.stream_rounds)?;

    progress(&format!(
        "writers: {} processes x {} messages, Scribe and the limit ({} runs each), then raw",
        sizes.writers, sizes.per_writer, sizes.writer_runs
    ));
    // Scribe and the limit alternate, so both see the same background load.
    let (many, limit_many) = writers::scribe_and_limit(
        dir,
        sizes.writers,
        sizes.per_writer,
        sizes.writer_runs,
        seed,
    )?;
    let raw_many = writers::run(
        dir,
        "writers-raw",
        writers::Mode::Raw,
        sizes.writers,
        sizes.per_writer,
        seed,
    )?;

    progress(&format!(
        "corpus: {} messages in {} sessions (Scribe and the limit)",
        sizes.corpus.messages, sizes.corpus.sessions
    ));
    let corpus = corpus::build(
        &dir.join("corpus.db"),
        &dir.join("corpus-limit.db"),
        sizes.corpus,
        seed,
    )?;
    let file_bytes = std::fs::metadata(&corpus.path)?.len();
    let limit_bytes = std::fs::metadata(&corpus.limit_path)?.len();
    let objects = report::object_sizes(&corpus.path)?;
    let store = Store::new(Arc::clone(&corpus.db));
    let (messages, sessions) = (store.messages(), store.sessions());

    progress(&format!("search: {} queries", sizes.queries));
    let search = reads::search(&corpus, messages, sizes.queries)?;
    progress("load and context()");
    let load = reads::load(&corpus, messages, sizes.load_rounds)?;
    let context = reads::context_time(
        &corpus,
        &store,
        (sizes.corpus.long_messages, sizes.corpus.short_messages),
        sizes.context_rounds,
    )?;
    progress(&format!(
        "import: {} sessions x {} messages from a JSON Lines file into an empty database; export",
        sizes.import_sessions, sizes.import_per_session
    ));
    let transfer = transfer::run(
        &dir.join("transfer.jsonl"),
        &dir.join("transfer.db"),
        seed,
        sizes.import_sessions,
        sizes.import_per_session,
        (sessions, &corpus.long_session),
    )?;

    progress(&format!(
        "history import: about {} messages of generated Claude Code and Codex history",
        sizes.import_messages
    ));
    let import = import::run(dir, sizes.import_messages, seed)?;
    progress("web viewer: list, conversation and search over HTTP");
    let web = web::run(dir, cli.quick, seed)?;

    let n = corpus.messages.max(1) as f64;
    let report = Report {
        machine: machine.finish(),
        seed,
        quick: cli.quick,
        sizes,
        append,
        latency,
        streaming,
        writers: many,
        writers_limit: limit_many,
        writers_raw: raw_many,
        corpus: report::CorpusFigures {
            messages: corpus.messages,
            parts: corpus.parts,
            build_s: corpus.build_time.as_secs_f64(),
            file_bytes,
            bytes_per_message: file_bytes as f64 / n,
            limit_file_bytes: limit_bytes,
            limit_bytes_per_message: limit_bytes as f64 / n,
            payload_bytes_per_message: corpus.payload_bytes as f64 / n,
            objects,
        },
        search,
        load,
        context,
        transfer,
        import,
        web,
        total_s: started.elapsed().as_secs_f64(),
    };
    if cli.json {
        println!("{}", serde_json::to_string_pretty(&report)?);
    } else {
        print!("{}", report.table());
    }
    Ok(())
}

fn run_compaction(cli: &Cli) -> Result<()> {
    let (shape, rounds) = if cli.quick {
        (compaction::Shape::quick(), 5)
    } else {
        (compaction::Shape::full(), 30)
    };
    let dir = tempfile::tempdir()?;
    let report = compaction::run(dir.path(), shape, cli.seed, rounds)?;
    if cli.json {
        println!("{}", serde_json::to_string_pretty(&report)?);
    } else {
        print!("{}", report.table());
    }
    Ok(())
}
