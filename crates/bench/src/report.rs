//! The report: the machine it ran on, the sizes, every figure (serialized as is for
//! `--json`) and the one table printed by default, with each target and whether it was
//! met.

use std::fmt::Write as _;

use serde::Serialize;

use crate::append::AppendResult;
use crate::corpus::Shape;
use crate::import::ImportResult;
use crate::reads::{ContextResult, LoadResult, SearchResult};
use crate::stats::ratio;
use crate::transfer::TransferResult;
use crate::web::WebResult;
use crate::writers::LoadResult as WritersResult;

/// How big each benchmark is.
#[derive(Debug, Clone, Serialize)]
pub struct Sizes {
    /// Messages appended per side per round.
    pub append_messages: usize,
    /// Messages per alternating chunk of the append benchmark.
    pub append_chunk: usize,
    /// Writer processes.
    pub writers: usize,
    /// Messages per writer process.
    pub per_writer: usize,
    /// Runs of the 1-writer and the many-writer Scribe benchmarks (alternating).
    pub writer_runs: usize,
    /// The read corpus.
    #[serde(serialize_with = "shape")]
    pub corpus: Shape,
    /// Search queries.
    pub queries: usize,
    /// Session loads timed per side.
    pub load_rounds: usize,
    /// `context()` calls timed per session.
    pub context_rounds: usize,
    /// Messages of generated agent history imported.
    pub import_messages: usize,
}

fn shape<S: serde::Serializer>(s: &Shape, ser: S) -> Result<S::Ok, S::Error> {
    serde::Serialize::serialize(
        &serde_json::json!({
            "messages": s.messages,
            "sessions": s.sessions,
            "load_messages": s.load_messages,
            "long_messages": s.long_messages,
            "short_messages": s.short_messages,
            "summary_back": s.summary_back,
        }),
        ser,
    )
}

impl Sizes {
    /// The report's sizes.
    pub fn full() -> Self {
        Sizes {
            append_messages: 10_000,
            append_chunk: 100,
            writers: 4,
            per_writer: 2_000,
            writer_runs: 2,
            corpus: Shape {
                messages: 50_000,
                sessions: 100,
                load_messages: 500,
                long_messages: 10_000,
                short_messages: 1_000,
                summary_back: 200,
            },
            queries: 200,
            load_rounds: 50,
            context_rounds: 30,
            import_messages: 100_000,
        }
    }

    /// A smoke run.
    pub fn quick() -> Self {
        Sizes {
            append_messages: 500,
            append_chunk: 50,
            writers: 4,
            per_writer: 100,
            writer_runs: 1,
            corpus: Shape {
                messages: 3_000,
                sessions: 10,
                load_messages: 200,
                long_messages: 1_000,
                short_messages: 300,
                summary_back: 100,
            },
            queries: 36,
            load_rounds: 5,
            context_rounds: 5,
            import_messages: 3_000,
        }
    }
}

/// Where the run happened.
#[derive(Debug, Clone, Serialize)]
pub struct Machine {
    /// CPU model from /proc/cpuinfo.
    pub cpu: String,
    /// Cores available to this process.
    pub cores: usize,
    /// Operating system and architecture.
    pub os: String,
    /// `rustc --version`, if rustc is on the PATH.
    pub rustc: String,
    /// The linked SQLite.
    pub sqlite: String,
    /// /proc/loadavg when the run started (other work on the machine skews figures).
    pub load_start: String,
    /// /proc/loadavg when it ended.
    pub load_end: String,
    /// Start time, ms since the epoch.
    pub started_at_ms: i64,
}

impl Machine {
    /// Reads what it can; unknown fields say so.
    pub fn detect() -> Self {
        let cpu = std::fs::read_to_string("/proc/cpuinfo")
            .ok()
            .and_then(|info| {
                info.lines()
                    .find(|l| l.starts_with("model name"))
                    .and_then(|l| l.split_once(':'))
                    .map(|(_, v)| v.trim().to_owned())
            })
            .unwrap_or_else(|| "unknown".to_owned());
        let rustc = std::process::Command::new("rustc")
            .arg("--version")
            .output()
            .ok()
            .filter(|o| o.status.success())
            .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_owned())
            .unwrap_or_else(|| "unknown".to_owned());
        Machine {
            cpu,
            cores: std::thread::available_parallelism().map_or(1, usize::from),
            os: format!("{} {}", std::env::consts::OS, std::env::consts::ARCH),
            rustc,
            sqlite: rusqlite::version().to_owned(),
            load_start: loadavg(),
            load_end: String::new(),
            started_at_ms: scribe_db::now_ms(),
        }
    }

    /// Records the load at the end of the run.
    pub fn finish(mut self) -> Self {
        self.load_end = loadavg();
        self
    }
}

fn loadavg() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .map(|l| l.split_whitespace().take(3).collect::<Vec<_>>().join(" "))
        .unwrap_or_else(|_| "unknown".to_owned())
}

/// The read corpus and the file it made.
#[derive(Debug, Clone, Serialize)]
pub struct CorpusFigures {
    /// Messages stored.
    pub messages: usize,
    /// Parts stored.
    pub parts: usize,
    /// Seconds to build it (batched inserts, 1,000 messages per transaction).
    pub build_s: f64,
    /// The database file after a checkpoint.
    pub file_bytes: u64,
    /// `file_bytes / messages`.
    pub bytes_per_message: f64,
    /// Part JSON per message (the payload the file holds, before both search indexes).
    pub payload_bytes_per_message: f64,
}

/// Everything one run measured.
#[derive(Debug, Clone, Serialize)]
pub struct Report {
    /// Where.
    pub machine: Machine,
    /// The content seed.
    pub seed: u64,
    /// A `--quick` smoke run.
    pub quick: bool,
    /// How big.
    pub sizes: Sizes,
    /// Single-process appends, Scribe and raw.
    pub append: AppendResult,
    /// One writer process (the single-writer rate the multi-process total is held to).
    pub writers_single: WritersResult,
    /// Several Scribe writer processes.
    pub writers: WritersResult,
    /// Several raw writer processes (SQLite's busy handler only), for contrast.
    pub writers_raw: WritersResult,
    /// Several Scribe writer processes with the previous default waits
    /// (`writers::previous_defaults`), for contrast with the shipped ones.
    pub writers_previous_defaults: WritersResult,
    /// The read corpus.
    pub corpus: CorpusFigures,
    /// Search.
    pub search: SearchResult,
    /// Loading one session.
    pub load: LoadResult,
    /// `context()`.
    pub context: ContextResult,
    /// Export and import.
    pub transfer: TransferResult,
    /// History import of generated Claude Code and Codex files.
    pub import: ImportResult,
    /// The web viewer (`scribe serve`) at size.
    pub web: WebResult,
    /// Seconds the whole run took.
    pub total_s: f64,
}

/// One line of the table.
struct Row {
    measure: String,
    scribe: String,
    raw: String,
    ratio: String,
    target: &'static str,
    verdict: &'static str,
}

fn row(
    measure: impl Into<String>,
    scribe: impl Into<String>,
    raw: impl Into<String>,
    ratio: Option<f64>,
    target: &'static str,
    met: Option<bool>,
) -> Row {
    Row {
        measure: measure.into(),
        scribe: scribe.into(),
        raw: raw.into(),
        ratio: match ratio {
            Some(r) if r.is_finite() => format!("{r:.2}x"),
            _ => "-".to_owned(),
        },
        target,
        verdict: match met {
            Some(true) => "met",
            Some(false) => "MISSED",
            None => "",
        },
    }
}

fn per_s(rate: f64) -> String {
    format!("{} msg/s", thousands(rate))
}

fn millis(ms: f64) -> String {
    if ms >= 100.0 {
        format!("{ms:.0} ms")
    } else if ms >= 1.0 {
        format!("{ms:.2} ms")
    } else {
        format!("{ms:.3} ms")
    }
}

/// A writer configuration in the report's words, pauses first since they decide fairness:
/// "20-150 ms pauses (busy_timeout 50 ms, 80 attempts, checkpoint every 100 writes)".
fn waits(o: &scribe_db::Options) -> String {
    format!(
        "{}-{} ms pauses (busy_timeout {} ms, {} attempts, checkpoint every {} writes)",
        o.retry_min.as_millis(),
        o.retry_max.as_millis(),
        o.busy_timeout.as_millis(),
        o.write_attempts,
        thousands(o.checkpoint_every as f64)
    )
}

/// `n` rounded, with thousands separators.
fn thousands(n: f64) -> String {
    let digits = format!("{:.0}", n.max(0.0));
    let mut out = String::new();
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i) % 3 == 0 {
            out.push(',');
        }
        out.push(c);
    }
    out
}

impl Report {
    fn rows(&self) -> Vec<Row> {
        let a = &self.append;
        let (w, w1, wr) = (&self.writers, &self.writers_single, &self.writers_raw);
        let s = &self.search;
        let (l, c, t) = (&self.load, &self.context, &self.transfer);
        let append_ratio = ratio(a.scribe_per_s, a.raw_per_s);
        let search_ratio = ratio(s.scribe_median_ms, s.raw_median_ms);
        let context_ratio = ratio(c.long_ms, c.short_ms);
        let n = w.processes;
        let mut rows = vec![
            row(
                "append 1 msg (1-3 parts) per tx",
                per_s(a.scribe_per_s),
                per_s(a.raw_per_s),
                Some(append_ratio),
                ">= 0.90x raw",
                Some(append_ratio >= 0.9),
            ),
            row(
                format!(
                    "1 writer process x {}: rate, best of {}",
                    w1.per_process, w1.runs
                ),
                per_s(w1.total_per_s),
                "",
                None,
                "",
                None,
            ),
            row(
                format!(
                    "{n} writer processes x {}: total rate, best of {}",
                    w.per_process, w.runs
                ),
                per_s(w.total_per_s),
                per_s(wr.total_per_s),
                Some(ratio(w.total_per_s, w1.total_per_s)),
                ">= 1 writer's rate",
                Some(w.total_per_s >= w1.total_per_s),
            ),
            row(
                format!("{n} writers: p99 write latency"),
                millis(w.p99_ms),
                millis(wr.p99_ms),
                None,
                "",
                None,
            ),
            row(
                format!("{n} writers: max write latency (writes > 500 ms)"),
                format!("{} ({})", millis(w.max_ms), w.over_500ms),
                format!("{} ({})", millis(wr.max_ms), wr.over_500ms),
                None,
                "<= 500 ms",
                Some(w.max_ms <= 500.0),
            ),
            row(
                format!("{n} writers: errors (messages stored)"),
                format!("{} ({})", w.errors, w.stored),
                format!("{} ({})", wr.errors, wr.stored),
                None,
                "0",
                Some(w.lossless()),
            ),
            row(
                format!(
                    "search {} msgs, {} queries: median",
                    self.corpus.messages, s.queries
                ),
                millis(s.scribe_median_ms),
                millis(s.raw_median_ms),
                Some(search_ratio),
                "<= 1.2x raw",
                Some(search_ratio <= 1.2),
            ),
            row(
                "search: p95",
                millis(s.scribe_p95_ms),
                millis(s.raw_p95_ms),
                Some(ratio(s.scribe_p95_ms, s.raw_p95_ms)),
                "",
                None,
            ),
            row(
                format!("load a {}-message session (median)", l.messages),
                millis(l.scribe_ms),
                millis(l.raw_ms),
                Some(ratio(l.scribe_ms, l.raw_ms)),
                "",
                None,
            ),
            row(
                format!(
                    "context(): {} msgs, summary {} back",
                    c.long_messages, c.loaded_messages
                ),
                millis(c.long_ms),
                "",
                None,
                "",
                None,
            ),
            row(
                format!(
                    "context(): {} msgs, summary {} back",
                    c.short_messages, c.loaded_messages
                ),
                millis(c.short_ms),
                "",
                Some(context_ratio),
                "long/short ~1x",
                Some(context_ratio <= 1.5),
            ),
            row(
                format!("export {} messages", t.messages),
                format!("{} ({})", millis(t.export_ms), per_s(t.export_per_s)),
                "",
                None,
                "",
                None,
            ),
            row(
                format!("import {} messages (empty db)", t.messages),
                format!("{} ({})", millis(t.import_ms), per_s(t.import_per_s)),
                "",
                None,
                "",
                None,
            ),
            row(
                format!(
                    "import history: {} msgs in {} files (empty db)",
                    thousands(self.import.messages as f64),
                    self.import.files
                ),
                format!(
                    "{} ({})",
                    millis(self.import.import_ms),
                    per_s(self.import.import_per_s)
                ),
                "",
                None,
                ">= 10,000 msg/s",
                Some(self.import.import_per_s >= 10_000.0),
            ),
            row(
                "  same, search index built later (bulk-path ceiling)",
                per_s(self.import.unindexed_per_s),
                "",
                None,
                "",
                None,
            ),
            row(
                "import history again, unchanged: per file",
                format!(
                    "{:.1} us ({} read)",
                    self.import.rerun_us_per_file, self.import.rerun_files_read
                ),
                "",
                None,
                "one stat, 0 read",
                Some(self.import.rerun_files_read == 0),
            ),
            row(
                "database file: bytes per message",
                format!("{} B", thousands(self.corpus.bytes_per_message)),
                "",
                None,
                "",
                None,
            ),
        ];
        rows.extend(self.web_rows());
        rows
    }

    /// The web viewer's rows (server time over loopback HTTP; see `web.rs`).
    fn web_rows(&self) -> Vec<Row> {
        let w = &self.web;
        let deep_ratio = ratio(w.list_deep_ms, w.list_first_ms);
        vec![
            row(
                format!(
                    "web: list page, 50 of {} sessions",
                    thousands(w.sizes.sessions as f64)
                ),
                millis(w.list_first_ms),
                millis(w.list_first_raw_ms),
                Some(ratio(w.list_first_ms, w.list_first_raw_ms)),
                "",
                None,
            ),
            row(
                format!(
                    "web: list page {} deep (keyset)",
                    thousands(w.deep_position as f64)
                ),
                millis(w.list_deep_ms),
                "",
                Some(deep_ratio),
                "deep/first <= 2x",
                Some(deep_ratio <= 2.0),
            ),
            row(
                "web: list page sorted by cost",
                millis(w.list_cost_ms),
                "",
                None,
                "",
                None,
            ),
            row(
                format!(
                    "web: {}-message conversation, first 100",
                    w.sizes.conversation
                ),
                millis(w.conversation_first_ms),
                "",
                None,
                "",
                None,
            ),
            row(
                format!("web: same, all {} pages", w.conversation_pages),
                millis(w.conversation_all_ms),
                "",
                None,
                "",
                None,
            ),
            row(
                format!(
                    "web: search keystroke, {} msgs (median)",
                    thousands(w.sizes.messages as f64)
                ),
                millis(w.keystroke_median_ms),
                millis(w.keystroke_service_median_ms),
                Some(ratio(w.keystroke_median_ms, w.keystroke_service_median_ms)),
                "<= 100 ms",
                Some(w.keystroke_median_ms <= 100.0),
            ),
            row(
                "web: search keystroke: p95",
                millis(w.keystroke_p95_ms),
                "",
                None,
                "",
                None,
            ),
        ]
    }

    /// The table, with a header naming the machine and a footer with notes.
    pub fn table(&self) -> String {
        let m = &self.machine;
        let mut out = String::new();
        let _ = writeln!(
            out,
            "Scribe benchmark{} - seed {}, {:.0} s",
            if self.quick {
                " (QUICK smoke run: sizes too small to mean anything)"
            } else {
                ""
            },
            self.seed,
            self.total_s
        );
        let _ = writeln!(
            out,
            "machine: {}, {} cores, {}; {}; SQLite {}",
            m.cpu, m.cores, m.os, m.rustc, m.sqlite
        );
        let _ = writeln!(
            out,
            "load average at start {} / end {}",
            m.load_start, m.load_end
        );
        let rows = self.rows();
        let header = Row {
            measure: "measure".to_owned(),
            scribe: "scribe".to_owned(),
            raw: "raw rusqlite".to_owned(),
            ratio: "ratio".to_owned(),
            target: "target",
            verdict: "",
        };
        let width = |f: fn(&Row) -> usize| {
            rows.iter()
                .chain(std::iter::once(&header))
                .map(f)
                .max()
                .unwrap_or(0)
        };
        let w = [
            width(|r| r.measure.chars().count()),
            width(|r| r.scribe.chars().count()),
            width(|r| r.raw.chars().count()),
            width(|r| r.ratio.chars().count()),
            width(|r| r.target.chars().count()),
        ];
        let line = |out: &mut String, r: &Row| {
            let _ = writeln!(
                out,
                "{:<w0$}  {:>w1$}  {:>w2$}  {:>w3$}  {:<w4$}  {}",
                r.measure,
                r.scribe,
                r.raw,
                r.ratio,
                r.target,
                r.verdict,
                w0 = w[0],
                w1 = w[1],
                w2 = w[2],
                w3 = w[3],
                w4 = w[4],
            );
        };
        line(&mut out, &header);
        let _ = writeln!(out, "{}", "-".repeat(w.iter().sum::<usize>() + 10 + 6));
        for r in &rows {
            line(&mut out, r);
        }
        let shipped = scribe_db::Options::default();
        let previous = crate::writers::previous_defaults();
        let _ = writeln!(
            out,
            "\nnotes: raw writers use plain BEGIN IMMEDIATE with busy_timeout 5 s (SQLite's \
             busy handler only); Scribe writers use the shipped defaults: {}. Search ratio \
             compares MessageService::search (one hit per message, neighbours, titles) with \
             one raw FTS5 statement, same expression and limit {}. Corpus: {} parts, built in \
             {:.1} s; {} B of part JSON per message.",
            waits(&shipped),
            self.search.limit,
            self.corpus.parts,
            self.corpus.build_s,
            thousands(self.corpus.payload_bytes_per_message)
        );
        let _ = writeln!(
            out,
            "       whole {}-message session through list(): {}, for scale against context().",
            self.context.long_messages,
            millis(self.context.long_full_list_ms)
        );
        let _ = writeln!(
            out,
            "       append: median over {}-message chunks of the Scribe/raw rate ratio {:.2}x \
             (the sides alternate chunk by chunk; the row above is total time).",
            self.append.chunk, self.append.median_chunk_ratio
        );
        let (wp, w) = (&self.writers_previous_defaults, &self.writers);
        let _ = writeln!(
            out,
            "       previous defaults: {}, {} Scribe writers, one run: {}, p99 {}, max {} \
             ({} over 500 ms), {} errors; shipped: max {} ({} over 500 ms). Long pauses let \
             the writer that just committed retake the lock while every waiter slept: why the \
             defaults changed.",
            waits(&previous),
            wp.processes,
            per_s(wp.total_per_s),
            millis(wp.p99_ms),
            millis(wp.max_ms),
            wp.over_500ms,
            wp.errors,
            millis(w.max_ms),
            w.over_500ms
        );
        if let Some(err) = &self.writers.first_error {
            let _ = writeln!(out, "first Scribe writer error: {err}");
        }
        if let Some(err) = &self.writers_raw.first_error {
            let _ = writeln!(out, "first raw writer error: {err}");
        }
        if let Some(err) = &self.writers_previous_defaults.first_error {
            let _ = writeln!(out, "first previous-defaults writer error: {err}");
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn previous_defaults_are_labelled_as_such() {
        assert_eq!(
            waits(&crate::writers::previous_defaults()),
            "20-150 ms pauses (busy_timeout 50 ms, 80 attempts, checkpoint every 100 writes)"
        );
    }

    #[test]
    fn previous_defaults_differ_from_the_shipped_ones() {
        assert_ne!(
            waits(&crate::writers::previous_defaults()),
            waits(&scribe_db::Options::default())
        );
    }
}
