//! The report: the machine it ran on, the sizes, every figure (serialized as is for
//! `--json`) and the one table printed by default, with each target and whether it was
//! met.

use std::fmt::Write as _;

use serde::Serialize;

use crate::append::AppendResult;
use crate::corpus::Shape;
use crate::import::ImportResult;
use crate::latency::LatencyResult;
use crate::reads::{ContextResult, LoadResult, SearchResult};
use crate::stats::ratio;
use crate::stream::StreamResult;
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
    /// Messages appended for the commit-to-indexed figure.
    pub latency_messages: usize,
    /// Commit-then-search rounds.
    pub latency_searches: usize,
    /// Replies streamed (and appended once) each.
    pub stream_rounds: usize,
    /// Sessions in the import file.
    pub import_sessions: usize,
    /// Messages per imported session.
    pub import_per_session: usize,
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
            per_writer: 2_500,
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
            latency_messages: 3_000,
            latency_searches: 50,
            stream_rounds: 20,
            import_sessions: 100,
            import_per_session: 1_000,
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
            latency_messages: 300,
            latency_searches: 10,
            stream_rounds: 4,
            import_sessions: 10,
            import_per_session: 200,
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
    /// The limit's file with the same messages.
    pub limit_file_bytes: u64,
    /// `limit_file_bytes / messages`.
    pub limit_bytes_per_message: f64,
    /// Part JSON per message (the payload the file holds, before both search indexes).
    pub payload_bytes_per_message: f64,
    /// Bytes per message of each kind of object in Scribe's file (`dbstat`).
    pub objects: Vec<(String, f64)>,
}

/// Bytes of `path`'s objects grouped by what they serve (`dbstat`), per message.
pub fn object_sizes(path: &std::path::Path) -> crate::Result<Vec<(String, f64)>> {
    let conn =
        rusqlite::Connection::open_with_flags(path, rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY)?;
    let messages: f64 =
        conn.query_row("SELECT count(*) FROM messages", [], |r| r.get::<_, i64>(0))? as f64;
    let mut groups: Vec<(String, f64)> = Vec::new();
    let mut stmt = conn.prepare("SELECT name, sum(pgsize) FROM dbstat GROUP BY name")?;
    let rows = stmt.query_map([], |r| Ok((r.get::<_, String>(0)?, r.get::<_, i64>(1)?)))?;
    for row in rows {
        let (name, bytes) = row?;
        let group = if name.starts_with("parts_fts_trigram") {
            "trigram index"
        } else if name.starts_with("parts_fts") {
            "word index"
        } else if name == "parts"
            || name == "parts_session"
            || name.starts_with("sqlite_autoindex_parts")
        {
            "parts (+ indexes)"
        } else if name.starts_with("messages") || name.starts_with("sqlite_autoindex_messages") {
            "messages (+ indexes)"
        } else if name == "search_queue" {
            "search queue"
        } else {
            "other"
        };
        match groups.iter_mut().find(|(g, _)| g == group) {
            Some((_, total)) => *total += bytes as f64,
            None => groups.push((group.to_owned(), bytes as f64)),
        }
    }
    for (_, total) in &mut groups {
        *total /= messages.max(1.0);
    }
    groups.sort_by(|a, b| b.1.total_cmp(&a.1));
    Ok(groups)
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
    /// Single-process appends: Scribe, the limit, raw.
    pub append: AppendResult,
    /// Commit to indexed.
    pub latency: LatencyResult,
    /// A streamed reply against the same reply appended once.
    pub streaming: StreamResult,
    /// Several Scribe writer processes.
    pub writers: WritersResult,
    /// Several limit writer processes.
    pub writers_limit: WritersResult,
    /// Several raw writer processes (Scribe's statements, SQLite's busy handler only).
    pub writers_raw: WritersResult,
    /// The read corpus.
    pub corpus: CorpusFigures,
    /// Search.
    pub search: SearchResult,
    /// Loading one session.
    pub load: LoadResult,
    /// `context()`.
    pub context: ContextResult,
    /// Scribe's own import (the bulk path) and export.
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
    limit: String,
    ratio: String,
    raw: String,
    target: &'static str,
    verdict: &'static str,
}

/// A row that only reports a measured value: no limit, ratio, raw figure or target.
fn timing_row(measure: impl Into<String>, scribe: impl Into<String>) -> Row {
    row(measure, scribe, "", None, "", "", None)
}

/// A row: Scribe's figure, the limit's, Scribe/limit, the same design in raw rusqlite,
/// the target and whether it was met.
fn row(
    measure: impl Into<String>,
    scribe: impl Into<String>,
    limit: impl Into<String>,
    ratio: Option<f64>,
    raw: impl Into<String>,
    target: &'static str,
    met: Option<bool>,
) -> Row {
    Row {
        measure: measure.into(),
        scribe: scribe.into(),
        limit: limit.into(),
        ratio: match ratio {
            Some(r) if r.is_finite() => format!("{r:.2}x"),
            _ => "-".to_owned(),
        },
        raw: raw.into(),
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
    let checkpoints = if o.wal_restart_pages > 0 {
        format!(
            "WAL checkpointed and restarted in the background past {} pages",
            thousands(f64::from(o.wal_restart_pages))
        )
    } else {
        format!(
            "checkpoint every {} writes",
            thousands(o.checkpoint_every as f64)
        )
    };
    let gate = if o.writer_gate {
        "writers queued at the <db>-writers flock, "
    } else {
        ""
    };
    format!(
        "{gate}{}-{} ms pauses (busy_timeout {} ms, {} attempts, {checkpoints})",
        o.retry_min.as_millis(),
        o.retry_max.as_millis(),
        o.busy_timeout.as_millis(),
        o.write_attempts,
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
        let (w, wl, wr) = (&self.writers, &self.writers_limit, &self.writers_raw);
        let s = &self.search;
        let (l, c, i) = (&self.load, &self.context, &self.transfer);
        let h = &self.import;
        let (lat, st, corpus) = (&self.latency, &self.streaming, &self.corpus);
        let append_ratio = ratio(a.scribe_per_s, a.limit_per_s);
        let p99_ratio = ratio(a.scribe_p99_ms, a.limit_p99_ms);
        let sustained_ratio = ratio(a.scribe_sustained_per_s, a.limit_per_s);
        let load_ratio = ratio(l.scribe_ms, l.limit_ms);
        let search_ratio = ratio(s.scribe_median_ms, s.limit_median_ms);
        let p95_ratio = ratio(s.scribe_p95_ms, s.limit_p95_ms);
        let bytes_ratio = ratio(corpus.bytes_per_message, corpus.limit_bytes_per_message);
        let writers_ratio = ratio(w.total_per_s, wl.total_per_s);
        let stream_ratio = ratio(st.streamed_ms, st.once_ms);
        let context_ratio = ratio(c.long_ms, c.short_ms);
        let n = w.processes;
        let mut rows = vec![
            row(
                "append 1 msg + 1 text part per tx: rate",
                per_s(a.scribe_per_s),
                per_s(a.limit_per_s),
                Some(append_ratio),
                per_s(a.raw_per_s),
                ">= 1.0x limit",
                Some(append_ratio >= 1.0),
            ),
            row(
                "append: p99 (max)",
                format!("{} ({})", millis(a.scribe_p99_ms), millis(a.scribe_max_ms)),
                format!("{} ({})", millis(a.limit_p99_ms), millis(a.limit_max_ms)),
                Some(p99_ratio),
                millis(a.raw_p99_ms),
                "<= 1.0x limit",
                Some(p99_ratio <= 1.0),
            ),
            row(
                "sustained: appends + both indexes caught up",
                per_s(a.scribe_sustained_per_s),
                per_s(a.limit_per_s),
                Some(sustained_ratio),
                "",
                ">= 0.8x limit",
                Some(sustained_ratio >= 0.8),
            ),
            row(
                format!(
                    "commit -> indexed (no search), {} msgs: p99 (p50)",
                    lat.messages
                ),
                format!("{} ({})", millis(lat.p99_ms), millis(lat.p50_ms)),
                "",
                None,
                "",
                "<= 1 s",
                Some(lat.p99_ms <= 1_000.0),
            ),
            row(
                "search right after commit, same process",
                format!("found {}/{}", lat.found, lat.searched),
                "",
                None,
                "",
                "all found",
                Some(lat.found == lat.searched),
            ),
            row(
                format!("load a {}-message session (median)", l.messages),
                millis(l.scribe_ms),
                millis(l.limit_ms),
                Some(load_ratio),
                millis(l.raw_ms),
                "<= 1.2x limit",
                Some(load_ratio <= 1.2),
            ),
            row(
                format!("search {} msgs, word queries: median", corpus.messages),
                millis(s.scribe_median_ms),
                millis(s.limit_median_ms),
                Some(search_ratio),
                millis(s.raw_median_ms),
                "<= 1.2x limit",
                Some(search_ratio <= 1.2),
            ),
            row(
                "search, word queries: p95",
                millis(s.scribe_p95_ms),
                millis(s.limit_p95_ms),
                Some(p95_ratio),
                millis(s.raw_p95_ms),
                "<= 1.2x limit",
                Some(p95_ratio <= 1.2),
            ),
            row(
                "search, CJK queries (trigram): median",
                millis(s.cjk_scribe_median_ms),
                "n/a",
                None,
                millis(s.cjk_raw_median_ms),
                "",
                None,
            ),
            row(
                "bytes per message (word + CJK search)",
                format!("{} B", thousands(corpus.bytes_per_message)),
                format!("{} B", thousands(corpus.limit_bytes_per_message)),
                Some(bytes_ratio),
                "",
                "<= 1.3x limit",
                Some(bytes_ratio <= 1.3),
            ),
            row(
                format!(
                    "{n} writer processes x {}: total rate, best of {}",
                    w.per_process, w.runs
                ),
                per_s(w.total_per_s),
                per_s(wl.total_per_s),
                Some(writers_ratio),
                per_s(wr.total_per_s),
                ">= 0.8x limit",
                Some(writers_ratio >= 0.8),
            ),
            row(
                format!("{n} writers: worst wait (p99)"),
                format!("{} ({})", millis(w.max_ms), millis(w.p99_ms)),
                format!("{} ({})", millis(wl.max_ms), millis(wl.p99_ms)),
                None,
                format!("{} ({})", millis(wr.max_ms), millis(wr.p99_ms)),
                "<= 200 ms",
                Some(w.max_ms <= 200.0),
            ),
            row(
                format!("{n} writers: peak -wal file (at exit)"),
                format!(
                    "{} ({})",
                    mebibytes(w.peak_wal_bytes),
                    mebibytes(w.end_wal_bytes)
                ),
                format!(
                    "{} ({})",
                    mebibytes(wl.peak_wal_bytes),
                    mebibytes(wl.end_wal_bytes)
                ),
                None,
                format!(
                    "{} ({})",
                    mebibytes(wr.peak_wal_bytes),
                    mebibytes(wr.end_wal_bytes)
                ),
                "",
                None,
            ),
            row(
                format!("{n} writers: errors (messages stored)"),
                format!("{} ({})", w.errors, w.stored),
                format!("{} ({})", wl.errors, wl.stored),
                None,
                format!("{} ({})", wr.errors, wr.stored),
                "0",
                Some(w.lossless()),
            ),
            row(
                format!(
                    "{} KB reply in {} flushes vs appended once",
                    st.bytes / 1_000,
                    st.flushes
                ),
                format!("{} / {}", millis(st.streamed_ms), millis(st.once_ms)),
                format!(
                    "{} / {} ({:.1}x)",
                    millis(st.limit_streamed_ms),
                    millis(st.limit_once_ms),
                    ratio(st.limit_streamed_ms, st.limit_once_ms)
                ),
                Some(stream_ratio),
                "",
                "<= 3x once",
                Some(stream_ratio <= 3.0),
            ),
            row(
                format!(
                    "scribe import {} msgs (empty db, indexes built)",
                    thousands(i.messages as f64)
                ),
                per_s(i.import_per_s),
                "",
                None,
                "",
                ">= 10,000 msg/s",
                Some(i.import_per_s >= 10_000.0),
            ),
            row(
                format!(
                    "import history: {} msgs in {} files (empty db, indexes built)",
                    thousands(h.messages as f64),
                    h.files
                ),
                per_s(h.import_per_s),
                "",
                None,
                "",
                ">= 10,000 msg/s",
                Some(h.import_per_s >= 10_000.0),
            ),
            row(
                "import history again, unchanged: per file",
                format!(
                    "{:.1} us ({} read)",
                    h.rerun_us_per_file, h.rerun_files_read
                ),
                "",
                None,
                "",
                "one stat, 0 read",
                Some(h.rerun_files_read == 0),
            ),
            timing_row(
                format!("export {} messages", i.export_messages),
                format!("{} ({})", millis(i.export_ms), per_s(i.export_per_s)),
            ),
            timing_row(
                format!(
                    "context(): {} msgs, summary {} back",
                    c.long_messages, c.loaded_messages
                ),
                millis(c.long_ms),
            ),
            row(
                format!(
                    "context(): {} msgs, summary {} back",
                    c.short_messages, c.loaded_messages
                ),
                millis(c.short_ms),
                "",
                Some(context_ratio),
                "",
                "long/short ~1x",
                Some(context_ratio <= 1.5),
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
                "",
                Some(ratio(w.list_first_ms, w.list_first_raw_ms)),
                millis(w.list_first_raw_ms),
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
                "",
                "deep/first <= 2x",
                Some(deep_ratio <= 2.0),
            ),
            timing_row("web: list page sorted by cost", millis(w.list_cost_ms)),
            timing_row(
                format!(
                    "web: {}-message conversation, first 100",
                    w.sizes.conversation
                ),
                millis(w.conversation_first_ms),
            ),
            timing_row(
                format!("web: same, all {} pages", w.conversation_pages),
                millis(w.conversation_all_ms),
            ),
            row(
                format!(
                    "web: search keystroke, {} msgs (median)",
                    thousands(w.sizes.messages as f64)
                ),
                millis(w.keystroke_median_ms),
                "",
                Some(ratio(w.keystroke_median_ms, w.keystroke_service_median_ms)),
                millis(w.keystroke_service_median_ms),
                "<= 100 ms",
                Some(w.keystroke_median_ms <= 100.0),
            ),
            timing_row("web: search keystroke: p95", millis(w.keystroke_p95_ms)),
            timing_row(
                "web: search on Enter (whole history), median / p95",
                format!("{} / {}", millis(w.enter_median_ms), millis(w.enter_p95_ms)),
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
            limit: "limit".to_owned(),
            ratio: "ratio".to_owned(),
            raw: "same design".to_owned(),
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
            width(|r| r.limit.chars().count()),
            width(|r| r.ratio.chars().count()),
            width(|r| r.raw.chars().count()),
            width(|r| r.target.chars().count()),
        ];
        let line = |out: &mut String, r: &Row| {
            let _ = writeln!(
                out,
                "{:<w0$}  {:>w1$}  {:>w2$}  {:>w3$}  {:>w4$}  {:<w5$}  {}",
                r.measure,
                r.scribe,
                r.limit,
                r.ratio,
                r.raw,
                r.target,
                r.verdict,
                w0 = w[0],
                w1 = w[1],
                w2 = w[2],
                w3 = w[3],
                w4 = w[4],
                w5 = w[5],
            );
        };
        line(&mut out, &header);
        let _ = writeln!(out, "{}", "-".repeat(w.iter().sum::<usize>() + 12 + 6));
        for r in &rows {
            line(&mut out, r);
        }
        // What the writers ran with: the shipped defaults unless a SCRIBE_BENCH_ variable
        // changed them (an invalid one already failed the run).
        let shipped = crate::writers::scribe_options().unwrap_or_default();
        let corpus = &self.corpus;
        let _ = writeln!(
            out,
            "\nnotes: ratio = scribe / limit. The limit is the simplest raw rusqlite program \
             (crates/bench/src/limit.rs): one row per message with its parts as JSON, one FTS5 \
             table over the first part's text, autocommit INSERTs. \"same design\" is Scribe's \
             own statements and schema in a raw rusqlite loop (no library)."
        );
        let _ = writeln!(
            out,
            "       search: MessageService::search (one hit per message, snippets, neighbours, \
             titles; indexes what is queued first) against the limit's one FTS5 statement with \
             snippet(), same expression, limit {}; medians over the word queries (common, rare, \
             two words, phrases, prefixes). The limit cannot search CJK.",
            self.search.limit
        );
        let objects: Vec<String> = corpus
            .objects
            .iter()
            .map(|(name, bytes)| format!("{name} {}", thousands(*bytes)))
            .collect();
        let _ = writeln!(
            out,
            "       bytes per message of Scribe's file: {} (dbstat); {} B of part JSON per \
             message; {} parts; corpus built in {:.1} s.",
            objects.join(", "),
            thousands(corpus.payload_bytes_per_message),
            corpus.parts,
            corpus.build_s
        );
        let _ = writeln!(
            out,
            "       writers: Scribe with its shipped waits ({}) and background indexers; its \
             total rate includes indexing until caught up ({} after the last writer exited); \
             the limit and raw writers use BEGIN/autocommit with busy_timeout 5 s (SQLite's busy \
             handler only).",
            waits(&shipped),
            millis(self.writers.catch_up_ms)
        );
        let _ = writeln!(
            out,
            "       import: {} sessions, {} of JSON Lines, read + parsed ({}) + stored + indexed \
             ({} after the last session was stored); whole {}-message session through \
             list(): {}, for scale against context().",
            self.transfer.sessions,
            mebibytes(self.transfer.file_bytes),
            millis(self.transfer.parse_ms),
            millis(self.transfer.index_ms),
            self.context.long_messages,
            millis(self.context.long_full_list_ms)
        );
        for (who, first) in [
            ("Scribe", &self.writers.first_error),
            ("limit", &self.writers_limit.first_error),
            ("raw", &self.writers_raw.first_error),
        ] {
            if let Some(err) = first {
                let _ = writeln!(out, "first {who} writer error: {err}");
            }
        }
        out
    }
}

fn mebibytes(bytes: u64) -> String {
    format!("{:.1} MiB", bytes as f64 / (1024.0 * 1024.0))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn waits_read_naturally() {
        assert_eq!(
            waits(&crate::writers::previous_defaults()),
            "20-150 ms pauses (busy_timeout 50 ms, 80 attempts, checkpoint every 100 writes)"
        );
    }

    #[test]
    fn a_timing_row_shows_only_its_figure() {
        let r = timing_row("export 10 messages", "5 ms");
        assert_eq!(r.measure, "export 10 messages");
        assert_eq!(r.scribe, "5 ms");
        assert_eq!(r.limit, "");
        assert_eq!(r.ratio, "-");
        assert_eq!(r.raw, "");
        assert_eq!(r.target, "");
        assert_eq!(r.verdict, "");
    }

    #[test]
    fn thousands_group_digits() {
        assert_eq!(thousands(1_234_567.4), "1,234,567");
        assert_eq!(thousands(12.0), "12");
    }
}
