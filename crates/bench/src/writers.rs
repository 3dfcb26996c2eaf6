//! Several writer processes on one file. The bench binary starts copies of itself with the
//! hidden `--writer` role: each opens the database, prepares its messages, says `ready`,
//! waits for `go` on stdin, appends its messages one transaction each while timing every
//! append, and prints one JSON line with its latencies and errors.
//!
//! The Scribe writer uses `MessageService::create` (`Database::write`: a short busy
//! timeout plus jittered retries). The raw writer uses plain `BEGIN IMMEDIATE` with a
//! 5 s busy timeout, i.e. SQLite's own busy handler only, for contrast: that handler polls
//! with growing sleeps, so a waiter can lose the lock to newcomers again and again. A third
//! run uses Scribe's previous defaults ([`previous_defaults`]), so the report keeps showing
//! why they changed.

use std::io::{BufRead, BufReader, Write};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use scribe_db::Database;
use scribe_message::MessageService;
use serde::{Deserialize, Serialize};

use crate::Result;
use crate::append::{drafts, fresh_db, raw_append, raw_connection, scribe_append};
use crate::stats;

/// An environment variable naming another `scribe-bench` binary whose `--writer` role
/// runs Scribe's writers instead of this one's: another build's write path measured in
/// this harness, beside the same limit.
pub const OTHER_WRITER: &str = "SCRIBE_BENCH_SCRIBE_WRITER";

/// How a writer process appends.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    /// `MessageService::create`.
    Scribe,
    /// Raw rusqlite, SQLite's busy handler only (busy timeout 5 s).
    Raw,
    /// `MessageService::create` over a `Database` opened with Scribe's previous defaults
    /// ([`previous_defaults`]): for contrast, not the shipped configuration.
    ScribePrevious,
    /// The limit ([`crate::limit`]): autocommit INSERTs, busy timeout 5 s.
    Limit,
}

/// What a writer process reports.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct WriterReport {
    /// Latency of every append attempt (failed ones included), in microseconds.
    pub latencies_us: Vec<u64>,
    /// Appends that returned an error.
    pub errors: usize,
    /// The first error, if any.
    pub first_error: Option<String>,
    /// Write closures run again (busy on SQLite, serialization failures on PostgreSQL).
    #[serde(default)]
    pub retries: u64,
    /// CPU time this writer process spent (its threads' time on a CPU) over its timed
    /// appends, microseconds, when `/proc/self/task/*/schedstat` can tell.
    #[serde(default)]
    pub cpu_us: Option<u64>,
    /// Every timed append traced, in order, when [`crate::trace::TRACE_ENV`] is set
    /// (PostgreSQL rows only).
    #[serde(default)]
    pub trace: Vec<crate::trace::AppendTrace>,
    /// Whether the trace metered the writer's server backend(s).
    #[serde(default)]
    pub traced_server: bool,
}

/// The [`Mode::ScribePrevious`] contrast: `scribe_db::Options::default()` before it moved to
/// what this benchmark measured as fairer. SQLite's busy handler waited 50 ms (now 10),
/// retries paused 20–150 ms (now 1–20) with 80 attempts (now 500, the same ~10 s), and a
/// passive checkpoint ran every 100 writes (now 1,000). The long pauses let the writer that
/// just committed retake the lock while every waiter slept.
pub fn previous_defaults() -> scribe_db::Options {
    scribe_db::Options {
        busy_timeout: Duration::from_millis(50),
        retry_min: Duration::from_millis(20),
        retry_max: Duration::from_millis(150),
        write_attempts: 80,
        checkpoint_every: 100,
        wal_restart_pages: 0,
        writer_gate: false,
        ..scribe_db::Options::default()
    }
}

/// An environment variable that sets [`scribe_db::Options::wal_restart_pages`] for
/// Scribe's writers (`--only writers`): the background checkpointer measured without a
/// rebuild.
pub const WAL_RESTART_PAGES: &str = "SCRIBE_BENCH_WAL_RESTART_PAGES";

/// An environment variable that sets [`scribe_db::Options::writer_gate`] for Scribe's
/// writers (`--only writers`): `1` on, `0` off, so one binary measures both sides.
pub const WRITER_GATE: &str = "SCRIBE_BENCH_WRITER_GATE";

/// The options of [`Mode::Scribe`]'s writers: the shipped defaults, unless
/// [`WAL_RESTART_PAGES`] or [`WRITER_GATE`] say otherwise.
pub(crate) fn scribe_options() -> Result<scribe_db::Options> {
    let mut options = scribe_db::Options::default();
    if let Some(gate) = std::env::var_os(WRITER_GATE) {
        options.writer_gate = match gate.to_string_lossy().as_ref() {
            "1" => true,
            "0" => false,
            other => return Err(format!("{WRITER_GATE} must be 0 or 1, got {other:?}").into()),
        };
    }
    if let Some(pages) = std::env::var_os(WAL_RESTART_PAGES) {
        let pages = pages.to_string_lossy();
        options.wal_restart_pages = pages
            .parse()
            .map_err(|_| format!("{WAL_RESTART_PAGES} must be a page count, got {pages:?}"))?;
    }
    Ok(options)
}

/// The child side: `--writer`.
pub fn child(db: &Path, session: &str, count: usize, seed: u64, mode: Mode) -> Result<()> {
    let work = drafts(seed, count);
    let mut latencies_us = Vec::with_capacity(count);
    let mut errors = 0;
    let mut first_error = None;
    let mut record = |started: Instant, outcome: Result<()>| {
        latencies_us.push(u64::try_from(started.elapsed().as_micros()).unwrap_or(u64::MAX));
        if let Err(err) = outcome {
            errors += 1;
            first_error.get_or_insert_with(|| err.to_string());
        }
    };
    let mut go = String::new();
    match mode {
        Mode::Raw => {
            let mut conn = raw_connection(db, Duration::from_secs(5))?;
            handshake(&mut go)?;
            for draft in &work {
                let started = Instant::now();
                record(started, raw_append(&mut conn, session, draft));
            }
        }
        Mode::Scribe => {
            let svc = MessageService::new(Arc::new(Database::open_with(db, scribe_options()?)?));
            handshake(&mut go)?;
            for draft in work {
                let started = Instant::now();
                record(started, scribe_append(&svc, session, draft));
            }
        }
        Mode::ScribePrevious => {
            let svc = MessageService::new(Arc::new(Database::open_with(db, previous_defaults())?));
            handshake(&mut go)?;
            for draft in work {
                let started = Instant::now();
                record(started, scribe_append(&svc, session, draft));
            }
        }
        Mode::Limit => {
            let conn = crate::limit::open(db, Duration::from_secs(5))?;
            handshake(&mut go)?;
            for draft in &work {
                let started = Instant::now();
                record(started, crate::limit::append(&conn, session, draft));
            }
        }
    }
    let report = WriterReport {
        latencies_us,
        errors,
        first_error,
        retries: 0,
        cpu_us: None,
        trace: Vec::new(),
        traced_server: false,
    };
    let mut out = std::io::stdout().lock();
    serde_json::to_writer(&mut out, &report)?;
    writeln!(out)?;
    out.flush()?;
    Ok(())
}

/// Says `ready` and waits for the parent's `go`.
fn handshake(line: &mut String) -> Result<()> {
    let mut out = std::io::stdout().lock();
    writeln!(out, "ready")?;
    out.flush()?;
    std::io::stdin().read_line(line)?;
    Ok(())
}

/// The outcome of one or more multi-process runs of the same shape.
#[derive(Debug, Clone, Serialize)]
pub struct LoadResult {
    /// Writer processes.
    pub processes: usize,
    /// Messages each appended.
    pub per_process: usize,
    /// Runs merged into this result (each on a fresh file).
    pub runs: usize,
    /// Messages stored in all runs (counted in the files).
    pub stored: usize,
    /// Successful appends per second over a whole run (from `go` to the last exit), the
    /// best run.
    pub total_per_s: f64,
    /// Every run's total rate.
    pub run_rates_per_s: Vec<f64>,
    /// Median append latency, ms.
    pub p50_ms: f64,
    /// 99th percentile append latency, ms.
    pub p99_ms: f64,
    /// Longest single append, ms.
    pub max_ms: f64,
    /// Appends that took longer than 500 ms.
    pub over_500ms: usize,
    /// Time after the last writer exited until both search indexes had caught up, ms
    /// (included in the rate).
    pub catch_up_ms: f64,
    /// Appends that failed.
    pub errors: usize,
    /// The first failure, if any.
    pub first_error: Option<String>,
    /// The largest the file's `-wal` grew during a run (sampled every
    /// [`WAL_SAMPLE_EVERY`] from `go` until the writers exited, and once more then), bytes;
    /// the largest of all runs.
    pub peak_wal_bytes: u64,
    /// The `-wal` file's size when the last writer exited (before the catch-up), bytes;
    /// the largest of all runs.
    pub end_wal_bytes: u64,
    /// Every append's latency, all runs.
    #[serde(skip)]
    pub samples: Vec<Duration>,
}

impl LoadResult {
    /// Whether every append of every run succeeded and is in its file.
    pub fn lossless(&self) -> bool {
        self.errors == 0 && self.stored == self.runs * self.processes * self.per_process
    }
}

/// Merges runs of the same shape: the best rate; latency percentiles over every append
/// of every run; errors and stored messages summed.
pub fn merge(results: Vec<LoadResult>) -> Result<LoadResult> {
    let mut iter = results.into_iter();
    let mut merged = iter.next().ok_or("no writer runs to merge")?;
    for r in iter {
        merged.runs += r.runs;
        merged.stored += r.stored;
        merged.errors += r.errors;
        merged.catch_up_ms = merged.catch_up_ms.max(r.catch_up_ms);
        merged.peak_wal_bytes = merged.peak_wal_bytes.max(r.peak_wal_bytes);
        merged.end_wal_bytes = merged.end_wal_bytes.max(r.end_wal_bytes);
        merged.first_error = merged.first_error.or(r.first_error);
        merged.run_rates_per_s.extend(r.run_rates_per_s);
        merged.samples.extend(r.samples);
    }
    merged.total_per_s = merged.run_rates_per_s.iter().copied().fold(0.0, f64::max);
    merged.p50_ms = stats::ms(stats::median(&merged.samples));
    merged.p99_ms = stats::ms(stats::percentile(&merged.samples, 0.99));
    merged.max_ms = stats::ms(stats::max(&merged.samples));
    merged.over_500ms = over_500ms(&merged.samples);
    Ok(merged)
}

/// `runs` runs each of Scribe's writers and the limit's, alternated so that both see the
/// same background load (the first run of each pair swaps every time): Scribe's merged
/// result, then the limit's.
pub fn scribe_and_limit(
    dir: &Path,
    processes: usize,
    per_process: usize,
    runs: usize,
    seed: u64,
) -> Result<(LoadResult, LoadResult)> {
    let (mut scribes, mut limits) = (Vec::new(), Vec::new());
    for rep in 0..runs {
        let run = |mode, name: String| run(dir, &name, mode, processes, per_process, seed);
        if rep % 2 == 0 {
            scribes.push(run(Mode::Scribe, format!("writers-scribe-{rep}"))?);
            limits.push(run(Mode::Limit, format!("writers-limit-{rep}"))?);
        } else {
            limits.push(run(Mode::Limit, format!("writers-limit-{rep}"))?);
            scribes.push(run(Mode::Scribe, format!("writers-scribe-{rep}"))?);
        }
    }
    Ok((merge(scribes)?, merge(limits)?))
}

/// What `--only writers` prints: Scribe's and the limit's 4-writer runs (alternated, as
/// in the report), and Scribe's total over the limit's.
#[derive(Debug, Serialize)]
pub struct Comparison {
    /// Scribe's writers (`MessageService::create`).
    pub scribe: LoadResult,
    /// The limit's writers.
    pub limit: LoadResult,
    /// Scribe's best total rate over the limit's.
    pub ratio: f64,
}

/// [`scribe_and_limit`] as a [`Comparison`].
pub fn compare(
    dir: &Path,
    processes: usize,
    per_process: usize,
    runs: usize,
    seed: u64,
) -> Result<Comparison> {
    let (scribe, limit) = scribe_and_limit(dir, processes, per_process, runs, seed)?;
    let ratio = scribe.total_per_s / limit.total_per_s;
    Ok(Comparison {
        scribe,
        limit,
        ratio,
    })
}

/// Runs `processes` writers of `per_process` messages each on a fresh file in `dir`.
pub fn run(
    dir: &Path,
    name: &str,
    mode: Mode,
    processes: usize,
    per_process: usize,
    seed: u64,
) -> Result<LoadResult> {
    let path = dir.join(format!("{name}.db"));
    // Another build's writers, for an A/B in one harness (`--only writers`, the same
    // limit beside them).
    let exe = match std::env::var_os(OTHER_WRITER) {
        Some(other) if mode == Mode::Scribe => other.into(),
        _ => std::env::current_exe()?,
    };
    // Each writer has its own session (an agent, a TUI, a gateway …) in the one file.
    let sessions = if mode == Mode::Limit {
        let conn = crate::limit::open(&path, Duration::from_secs(5))?;
        (0..processes)
            .map(|i| crate::limit::create_session(&conn, &format!("writer {i}")))
            .collect::<Result<Vec<_>>>()?
    } else {
        (0..processes)
            .map(|i| fresh_db(&path, &format!("writer {i}")))
            .collect::<Result<Vec<_>>>()?
    };
    let mut children = Vec::new();
    for (i, session) in sessions.iter().enumerate() {
        let mut cmd = Command::new(&exe);
        cmd.arg("--writer")
            .arg("--db")
            .arg(&path)
            .arg("--session")
            .arg(session)
            .arg("--count")
            .arg(per_process.to_string())
            .arg("--seed")
            .arg((seed + 1_000 + i as u64).to_string());
        match mode {
            Mode::Raw => {
                cmd.arg("--raw");
            }
            Mode::ScribePrevious => {
                cmd.arg("--previous-defaults");
            }
            Mode::Limit => {
                cmd.arg("--limit");
            }
            Mode::Scribe => {}
        }
        cmd.stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit());
        children.push(cmd.spawn()?);
    }
    let (readers, started) = start(&mut children)?;
    let sampler = WalSampler::start(&path)?;
    let collected = collect(&mut children, readers);
    let (peak_wal_bytes, end_wal_bytes) = sampler.finish();
    let reports = collected?;
    // Scribe's run ends when both search indexes have caught up (each writer indexes what
    // it can before it exits; what is left is indexed here), as the limit's ends with its
    // one index complete.
    let mut caught_up = Duration::ZERO;
    if mode != Mode::Limit && mode != Mode::Raw {
        let drain = Instant::now();
        Database::open(&path)?.index_pending()?;
        caught_up = drain.elapsed();
    }
    let elapsed = started.elapsed();
    let mut latencies = Vec::new();
    let mut errors = 0;
    let mut first_error = None;
    for report in reports {
        latencies.extend(
            report
                .latencies_us
                .iter()
                .map(|&us| Duration::from_micros(us)),
        );
        errors += report.errors;
        if first_error.is_none() {
            first_error = report.first_error;
        }
    }
    let stored = count_messages(&path)?;
    let total_per_s = stats::rate(latencies.len() - errors, elapsed);
    Ok(LoadResult {
        processes,
        per_process,
        runs: 1,
        stored,
        total_per_s,
        run_rates_per_s: vec![total_per_s],
        p50_ms: stats::ms(stats::median(&latencies)),
        p99_ms: stats::ms(stats::percentile(&latencies, 0.99)),
        max_ms: stats::ms(stats::max(&latencies)),
        over_500ms: over_500ms(&latencies),
        catch_up_ms: stats::ms(caught_up),
        errors,
        first_error,
        peak_wal_bytes,
        end_wal_bytes,
        samples: latencies,
    })
}

/// How often [`WalSampler`] looks at the `-wal` file's size.
pub const WAL_SAMPLE_EVERY: Duration = Duration::from_millis(2);

/// A thread that watches the size of a database's `-wal` file while writers run: SQLite
/// reuses the file from its start after a checkpoint copied every frame while no reader
/// used it (a WAL restart), so the file's size is the most the WAL held between two
/// restarts (or since it was created, if it never restarts).
struct WalSampler {
    stop: Arc<AtomicBool>,
    thread: std::thread::JoinHandle<u64>,
    wal: std::path::PathBuf,
}

impl WalSampler {
    fn start(db: &Path) -> Result<WalSampler> {
        let mut wal = db.as_os_str().to_owned();
        wal.push("-wal");
        let wal = std::path::PathBuf::from(wal);
        let stop = Arc::new(AtomicBool::new(false));
        let thread = {
            let (stop, wal) = (Arc::clone(&stop), wal.clone());
            std::thread::Builder::new()
                .name("wal-sampler".to_owned())
                .spawn(move || {
                    let mut peak = 0;
                    while !stop.load(Ordering::Relaxed) {
                        peak = peak.max(wal_size(&wal));
                        std::thread::sleep(WAL_SAMPLE_EVERY);
                    }
                    peak
                })?
        };
        Ok(WalSampler { stop, thread, wal })
    }

    /// Stops sampling: the peak and the size now.
    fn finish(self) -> (u64, u64) {
        self.stop.store(true, Ordering::Relaxed);
        let end = wal_size(&self.wal);
        let peak = self.thread.join().unwrap_or(0);
        (peak.max(end), end)
    }
}

/// The size of a `-wal` file, 0 when there is none.
fn wal_size(path: &Path) -> u64 {
    std::fs::metadata(path).map_or(0, |m| m.len())
}

/// Waits until every writer process says "ready", then tells them all "go" at once:
/// their stdout readers (for [`collect`]) and the moment they were started.
pub(crate) fn start(
    children: &mut [Child],
) -> Result<(Vec<BufReader<std::process::ChildStdout>>, Instant)> {
    let mut readers = Vec::new();
    for child in children.iter_mut() {
        let stdout = child.stdout.take().ok_or("writer has no stdout")?;
        let mut reader = BufReader::new(stdout);
        let mut line = String::new();
        reader.read_line(&mut line)?;
        if line.trim() != "ready" {
            return Err(format!("writer did not get ready: {line:?}").into());
        }
        readers.push(reader);
    }
    let started = Instant::now();
    for child in children.iter_mut() {
        let stdin = child.stdin.as_mut().ok_or("writer has no stdin")?;
        writeln!(stdin, "go")?;
        stdin.flush()?;
    }
    Ok((readers, started))
}

pub(crate) fn collect(
    children: &mut [Child],
    readers: Vec<BufReader<std::process::ChildStdout>>,
) -> Result<Vec<WriterReport>> {
    let mut reports = Vec::new();
    for (child, mut reader) in children.iter_mut().zip(readers) {
        let mut line = String::new();
        reader.read_line(&mut line)?;
        let status = child.wait()?;
        if !status.success() {
            return Err(format!("writer exited with {status}").into());
        }
        reports.push(serde_json::from_str(&line)?);
    }
    Ok(reports)
}

fn over_500ms(samples: &[Duration]) -> usize {
    samples
        .iter()
        .filter(|d| **d > Duration::from_millis(500))
        .count()
}

fn count_messages(path: &Path) -> Result<usize> {
    let conn = rusqlite::Connection::open(path)?;
    let n: i64 = conn.query_row("SELECT count(*) FROM messages", [], |r| r.get(0))?;
    Ok(usize::try_from(n)?)
}
