//! What a PostgreSQL writer row's appends were made of, for finding where the slow ones
//! spend their time: with [`TRACE_ENV`] set, every writer process notes per timed append
//! when it started (wall clock, to set beside the server's log) and how long, during it,
//! the writer's thread and its server backend each ran on a CPU and waited in the run queue
//! for one (Linux's `schedstat`: a process that is woken waits there until a CPU is free,
//! so this is the CPU queueing of 2 cores shared by 16 clients, 16 backends and whatever
//! else runs). The four times can overlap (a client preempted by the backend it just woke
//! waits in the run queue while that backend runs), so they are not a sum: an append
//! much longer than all four together waited on something else (a lock, I/O).
//!
//! Off by default: each append then reads two or three small `/proc` files (~10-30 us).

use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use serde::{Deserialize, Serialize};

/// The environment variable that turns the trace on (a directory: each traced row's
/// appends are written there as `trace-<backend>-<mode>-<processes>.tsv`, one line per
/// append, and the report adds what the slowest 1% were made of). The writer processes
/// inherit it.
pub const TRACE_ENV: &str = "SCRIBE_BENCH_PG_TRACE";

/// Whether the trace is on ([`TRACE_ENV`] set, not empty).
pub fn enabled() -> bool {
    std::env::var_os(TRACE_ENV).is_some_and(|dir| !dir.is_empty())
}

/// One timed append.
#[derive(Debug, Clone, Copy, Default, Serialize, Deserialize)]
pub struct AppendTrace {
    /// When it started, microseconds since the Unix epoch.
    pub at_us: u64,
    /// The writer's thread on a CPU during it, microseconds.
    pub cli_run_us: u64,
    /// The writer's thread waiting for a CPU during it, microseconds.
    pub cli_wait_us: u64,
    /// The writer's server backend(s) on a CPU during it, microseconds (0 untraced).
    pub srv_run_us: u64,
    /// The writer's server backend(s) waiting for a CPU during it, microseconds.
    pub srv_wait_us: u64,
}

/// Run and run-queue time so far, nanoseconds, from a `schedstat` file.
fn schedstat(path: &Path) -> Option<(u64, u64)> {
    let text = std::fs::read_to_string(path).ok()?;
    let mut fields = text.split_whitespace().map(|f| f.parse::<u64>().ok());
    Some((fields.next()??, fields.next()??))
}

/// Reads the writer thread's and its backends' scheduler times.
pub struct Meter {
    backends: Vec<PathBuf>,
}

/// One reading of a [`Meter`], nanoseconds.
#[derive(Debug, Clone, Copy, Default)]
pub struct Reading {
    at: Option<SystemTime>,
    cli: (u64, u64),
    srv: (u64, u64),
}

impl Meter {
    /// A meter of the calling thread and the server processes `backends` (their pids).
    pub fn new(backends: &[u32]) -> Meter {
        Meter {
            backends: backends
                .iter()
                .map(|pid| PathBuf::from(format!("/proc/{pid}/schedstat")))
                .collect(),
        }
    }

    /// Whether any backend is metered.
    pub fn has_backends(&self) -> bool {
        !self.backends.is_empty()
    }

    /// The times so far (zeros for what cannot be read).
    pub fn read(&self) -> Reading {
        let mut srv = (0, 0);
        for path in &self.backends {
            if let Some((run, wait)) = schedstat(path) {
                srv.0 += run;
                srv.1 += wait;
            }
        }
        Reading {
            at: Some(SystemTime::now()),
            cli: schedstat(Path::new("/proc/thread-self/schedstat")).unwrap_or_default(),
            srv,
        }
    }
}

impl Reading {
    /// The append between this reading (its start) and `end`.
    pub fn until(&self, end: &Reading) -> AppendTrace {
        let us = |a: u64, b: u64| b.saturating_sub(a) / 1_000;
        AppendTrace {
            at_us: self
                .at
                .and_then(|at| at.duration_since(UNIX_EPOCH).ok())
                .map_or(0, |d| u64::try_from(d.as_micros()).unwrap_or(u64::MAX)),
            cli_run_us: us(self.cli.0, end.cli.0),
            cli_wait_us: us(self.cli.1, end.cli.1),
            srv_run_us: us(self.srv.0, end.srv.0),
            srv_wait_us: us(self.srv.1, end.srv.1),
        }
    }
}

/// The mean of a group of appends, split as the trace splits them, ms.
#[derive(Debug, Clone, Copy, Default, Serialize)]
pub struct Split {
    /// Appends in the group.
    pub appends: usize,
    /// Mean latency.
    pub latency_ms: f64,
    /// The writer on a CPU.
    pub cli_run_ms: f64,
    /// The writer waiting for a CPU.
    pub cli_wait_ms: f64,
    /// Its backend on a CPU.
    pub srv_run_ms: f64,
    /// Its backend waiting for a CPU.
    pub srv_wait_ms: f64,
}

/// A row's appends split: all of them, and the slowest 1% (the `n / 100` slowest, at
/// least one: the p99 and the appends above it).
#[derive(Debug, Clone, Copy, Serialize)]
pub struct Tail {
    /// Every traced append.
    pub all: Split,
    /// The slowest 1% of the row's appends.
    pub slowest: Split,
    /// Whether the server's backends were metered (else their columns are 0 and in the
    /// rest).
    pub server: bool,
}

/// The split of the appends `which` of `latencies` (with their `traces`, in the same
/// order).
fn split(latencies: &[Duration], traces: &[AppendTrace], which: &[usize]) -> Split {
    let mut s = Split::default();
    for &i in which {
        let (Some(latency), Some(t)) = (latencies.get(i), traces.get(i)) else {
            continue;
        };
        s.appends += 1;
        s.latency_ms += latency.as_secs_f64() * 1e3;
        s.cli_run_ms += t.cli_run_us as f64 / 1e3;
        s.cli_wait_ms += t.cli_wait_us as f64 / 1e3;
        s.srv_run_ms += t.srv_run_us as f64 / 1e3;
        s.srv_wait_ms += t.srv_wait_us as f64 / 1e3;
    }
    let n = s.appends.max(1) as f64;
    for field in [
        &mut s.latency_ms,
        &mut s.cli_run_ms,
        &mut s.cli_wait_ms,
        &mut s.srv_run_ms,
        &mut s.srv_wait_ms,
    ] {
        *field /= n;
    }
    s
}

/// The row's split, when every append was traced.
pub fn tail(latencies: &[Duration], traces: &[AppendTrace], server: bool) -> Option<Tail> {
    if traces.is_empty() || traces.len() != latencies.len() {
        return None;
    }
    let mut by_latency: Vec<usize> = (0..latencies.len()).collect();
    by_latency.sort_by_key(|&i| std::cmp::Reverse(latencies[i]));
    let slowest = &by_latency[..latencies.len().div_ceil(100)];
    Some(Tail {
        all: split(latencies, traces, &by_latency),
        slowest: split(latencies, traces, slowest),
        server,
    })
}

/// Writes a row's appends to `dir/trace-<name>.tsv`: writer, start (us since the epoch),
/// latency and the four scheduler times (us), ordered by start.
pub fn write(
    dir: &Path,
    name: &str,
    rows: &[(usize, Duration, AppendTrace)],
) -> std::io::Result<()> {
    use std::fmt::Write as _;
    let mut sorted: Vec<_> = rows.to_vec();
    sorted.sort_by_key(|(_, _, t)| t.at_us);
    let mut out = String::from(
        "writer\tat_us\tlatency_us\tcli_run_us\tcli_wait_us\tsrv_run_us\tsrv_wait_us\n",
    );
    for (writer, latency, t) in sorted {
        let _ = writeln!(
            out,
            "{writer}\t{}\t{}\t{}\t{}\t{}\t{}",
            t.at_us,
            latency.as_micros(),
            t.cli_run_us,
            t.cli_wait_us,
            t.srv_run_us,
            t.srv_wait_us
        );
    }
    std::fs::create_dir_all(dir)?;
    std::fs::write(dir.join(format!("trace-{name}.tsv")), out)
}

/// The machine's busy CPU time so far (every CPU's user, nice, system, irq, softirq and
/// steal time from `/proc/stat`), when it can tell.
pub fn machine_busy() -> Option<Duration> {
    let text = std::fs::read_to_string("/proc/stat").ok()?;
    let line = text.lines().next()?;
    let fields: Vec<u64> = line
        .split_whitespace()
        .skip(1)
        .map(|f| f.parse().ok())
        .collect::<Option<_>>()?;
    // user nice system idle iowait irq softirq steal …
    let busy = [0, 1, 2, 5, 6, 7]
        .iter()
        .map(|&i| fields.get(i).copied().unwrap_or(0))
        .sum::<u64>();
    Some(Duration::from_secs_f64(busy as f64 / 100.0))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_slowest_percent_is_split_apart_from_the_rest() {
        // 100 appends of 1 ms, one of 10 ms that waited 6 ms for a CPU.
        let mut latencies = vec![Duration::from_millis(1); 99];
        latencies.push(Duration::from_millis(10));
        let mut traces = vec![
            AppendTrace {
                cli_run_us: 200,
                srv_run_us: 500,
                ..AppendTrace::default()
            };
            100
        ];
        traces[99].srv_wait_us = 6_000;
        let tail = tail(&latencies, &traces, true).expect("traced");
        assert_eq!(tail.slowest.appends, 1);
        assert!((tail.slowest.srv_wait_ms - 6.0).abs() < 1e-9);
        assert!((tail.slowest.latency_ms - 10.0).abs() < 1e-9);
        assert!((tail.all.srv_wait_ms - 0.06).abs() < 1e-9);
        assert_eq!(tail.all.appends, 100);
        // Untraced rows (or a writer that sent no trace) have no split.
        assert!(super::tail(&latencies, &traces[1..], true).is_none());
        assert!(super::tail(&latencies, &[], true).is_none());
    }

    #[test]
    fn this_thread_is_metered() {
        let meter = Meter::new(&[]);
        let start = meter.read();
        let mut x = 0_u64;
        for i in 0..2_000_000_u64 {
            x = std::hint::black_box(x.wrapping_add(i));
        }
        let t = start.until(&meter.read());
        assert!(t.at_us > 0);
        // Linux: the loop ran on a CPU for some time; elsewhere nothing can be read.
        if Path::new("/proc/thread-self/schedstat").exists() {
            assert!(t.cli_run_us > 0);
        }
        assert_eq!(t.srv_run_us, 0);
    }
}
