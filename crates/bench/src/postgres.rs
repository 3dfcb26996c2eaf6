//! The PostgreSQL report (`scribe-bench --db postgres://…`): what the scale
//! targets ask, measured on the server given and, for contrast, on SQLite files in the
//! same run.
//!
//! - writers: 1, 4 and 16 writer PROCESSES (copies of this binary, the hidden
//!   `--writer --queries` role), each appending to its own session, on PostgreSQL and
//!   on one SQLite file, in two ways. Saturated: every writer appends as fast as it
//!   can (on a 2-core machine 16 processes then queue for the CPU, so latency grows
//!   with writers whatever the store does). Paced: every writer appends once every
//!   [`PACE_MS`] ms, the rate of an agent streaming a reply, so the rows show whether
//!   writers wait on each other; every paced writer appends [`PgSizes::paced_per_writer`]
//!   times whatever the writer count, so every paced row runs as long (a single writer's
//!   p99 is then not just its second-slowest append), in [`PgSizes::paced_blocks`]
//!   blocks, the rows' blocks taking turns, so the rows compared share the machine's
//!   conditions (other work, the server's autovacuum rounds). Each writer first appends
//!   one message of every shape untimed ([`warm_up`]: its connection open, every
//!   statement prepared, every trigger path run once: the rows time appends, not a
//!   process's first). Total rate, p50/p95/p99/max of one append, errors, retries
//!   per append, and whether every append is stored. Targets: 16 PostgreSQL writers
//!   with 0 errors (both ways), their p99 at most 2x the single writer's (judged on the
//!   paced rows: "not waiting on each other"), and a saturated total at least 0.5x
//!   SQLite's saturated 4-writer total (a throughput is what saturated rows measure).
//! - PostgreSQL's limit ([`pg_limit`]): the simplest raw program doing the same job on the
//!   same server (issue 14's limit schema, one autocommit INSERT per message), 1, 4 and
//!   16 writer processes saturated, right after Scribe's saturated rows, and 1 and 16
//!   paced, right after Scribe's paced rows (no Scribe: the machine's share of a paced
//!   p99 ratio); then the
//!   breakdown variants (an explicit transaction, SERIALIZABLE) at 1 and 16. Every
//!   PostgreSQL row shows the server's CPU per append when the server is on this
//!   machine. Ratios: the limit's 16 writers against SQLite's 4 (whether the target is
//!   within PostgreSQL's reach here at all) and Scribe's rows against the limit's.
//! - events: a commit through one [`Database`] ("host A", its own pool and origin)
//!   until a subscriber of a [`Broker`] fed by another handle's [`Database::listen`]
//!   ("host B") receives it, appends back to back and then paced at 75 ms (the listener
//!   polls the outbox, faster while changes flow); and how many changes one append makes.
//! - load: reading one whole session (`MessageService::list`), on both backends.
//! - search: the SQLite report's query mix (`reads::query_mix`: common and rare words,
//!   two words, phrases, prefixes, CJK) through `MessageService::search` on a corpus of
//!   the SQLite report's shape (messages of the same generator interleaved over many
//!   sessions), built the same way on both backends; median and p95 per backend.
//!
//! Every side appends the same way, through `MessageService::create` ([`append`]), which
//! runs its statements through the generated query traits (`tx.q()`) on either backend,
//! so the backends are compared on the same work.
//!
//! The report writes its sessions into the database it is given and deletes them at the
//! end (a crash leaves sessions titled `bench writer …`): use a scratch database.

use std::fmt::Write as _;
use std::io::Write;
use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use scribe_db::events::{ChangeOp, Notice};
use scribe_db::ids::{Prefix, new_id};
use scribe_db::queries as q;
use scribe_db::{Database, now_ms};
use scribe_message::MessageService;
use scribe_pubsub::{Broker, RecvTimeoutError};
use serde::Serialize;

use crate::Result;
use crate::append::{Draft, drafts};
use crate::pg_limit::{self, Variant};
use crate::stats;
use crate::transfer;
use crate::writers::WriterReport;

/// The environment variable a writer process reads the database location from (a
/// PostgreSQL URL may hold a password, which a command line would show to everyone).
pub const DB_ENV: &str = "SCRIBE_BENCH_DB";

/// The environment variable that makes a writer process paced: one append every that
/// many milliseconds.
pub const PACE_ENV: &str = "SCRIBE_BENCH_PACE_MS";

/// The environment variable that limits the report to some of its parts (a comma list of
/// `writers`, `events`, `load`, `search`, `import`; all when unset): for profiling one of
/// them.
/// `saturated` is the writer rows without the paced ones (~20 s instead of ~3 min);
/// `pg-paced` only the PostgreSQL paced rows of 1 and 16 writers, Scribe's and the
/// limit's (~5 min);
/// `scribe-pg` only Scribe's saturated PostgreSQL rows; `limit` PostgreSQL's limit rows
/// (which `writers` and `saturated` include); `breakdown` the limit's variants
/// ([`pg_limit::Variant`]).
pub const PARTS_ENV: &str = "SCRIBE_BENCH_PG_PARTS";

/// The environment variable that keeps the report's sessions in the database (set to `1`):
/// for looking at the search corpus or the writers' rows afterwards.
pub const KEEP_ENV: &str = "SCRIBE_BENCH_PG_KEEP";

/// Whether [`PARTS_ENV`] asks for `part`.
fn wanted(part: &str) -> bool {
    std::env::var(PARTS_ENV).map_or(true, |parts| parts.split(',').any(|p| p.trim() == part))
}

/// The writer counts of the report.
const WRITERS: [usize; 3] = [1, 4, 16];

/// A paced writer appends once every this many milliseconds: an agent streaming a reply
/// stores a part every 50–100 ms, and a turn's messages come seconds apart.
pub const PACE_MS: u64 = 75;

/// How big the PostgreSQL report is.
#[derive(Debug, Clone, Copy, Serialize)]
pub struct PgSizes {
    /// Appends per writer process.
    pub per_writer: usize,
    /// Commits timed host A → host B.
    pub events: usize,
    /// Messages of the session loaded, and how many times it is loaded.
    pub load_messages: usize,
    /// Loads timed.
    pub load_rounds: usize,
    /// Appends per paced writer process, whatever the writer count: every paced row runs
    /// as long (`paced_per_writer` x [`PACE_MS`]).
    pub paced_per_writer: usize,
    /// Blocks each paced row is run in, the rows' blocks taking turns (1, 4, 16 writers,
    /// then 16, 4, 1, …), so that every paced row spends its time under the same
    /// conditions (other work on the machine, the server's autovacuum rounds).
    pub paced_blocks: usize,
    /// Messages of the search corpus.
    pub corpus_messages: usize,
    /// Sessions of the search corpus.
    pub corpus_sessions: usize,
    /// Search queries timed per backend.
    pub queries: usize,
    /// Sessions of the export file `scribe import` reads, and messages per session.
    pub import_sessions: usize,
    /// Messages per session of that file.
    pub import_per_session: usize,
}

impl PgSizes {
    /// A smoke run.
    pub fn quick() -> Self {
        PgSizes {
            per_writer: 40,
            events: 50,
            load_messages: 100,
            load_rounds: 10,
            paced_per_writer: 40,
            paced_blocks: 2,
            corpus_messages: 3_000,
            corpus_sessions: 10,
            queries: 36,
            import_sessions: 4,
            import_per_session: 100,
        }
    }

    /// The report's sizes.
    pub fn full() -> Self {
        PgSizes {
            per_writer: 300,
            events: 500,
            load_messages: 500,
            load_rounds: 50,
            // One writer's p99 is then its 8th-slowest of 800 (60 s at the pace), where
            // 200 made it the 2nd-slowest, which moved between 6.6 and 12 ms run to run;
            // 16 writers' is their 128th-slowest of 12,800 over the same 60 s. Until stop
            // 29 the 16 writers appended 200 each (15 s), after the single writer's 60 s:
            // the rows compared ran at different times under different conditions.
            paced_per_writer: 800,
            // 100 appends (7.5 s) per writer and block.
            paced_blocks: 8,
            // Smaller than the SQLite report's 50,000: a common word's query on
            // PostgreSQL ranks every matching part (see the report), so its time grows
            // with the corpus and 200 queries at 50,000 messages take most of an hour.
            corpus_messages: 10_000,
            corpus_sessions: 20,
            queries: 60,
            // A fifth of the SQLite report's 100,000: PostgreSQL stores a few thousand a
            // second (docs/measurements/postgres.md, stop 60).
            import_sessions: 20,
            import_per_session: 1_000,
        }
    }
}

/// One row of the writers table.
#[derive(Debug, Clone, Serialize)]
pub struct WritersRow {
    /// `PostgreSQL` or `SQLite`.
    pub backend: &'static str,
    /// `saturated` (as fast as each writer can) or `paced` (one append per writer every
    /// [`PACE_MS`] ms).
    pub mode: &'static str,
    /// Writer processes.
    pub processes: usize,
    /// Successful appends per second, from `go` to the last exit.
    pub total_per_s: f64,
    /// Median append, ms.
    pub p50_ms: f64,
    /// 95th percentile append, ms.
    pub p95_ms: f64,
    /// 99th percentile append, ms.
    pub p99_ms: f64,
    /// Longest append, ms.
    pub max_ms: f64,
    /// Appends timed (all writers).
    pub appends: usize,
    /// Appends that failed.
    pub errors: usize,
    /// Appends run again whole (SQLite: busy; PostgreSQL: serialization failure or
    /// deadlock), per append.
    pub retries_per_append: f64,
    /// The first failure, if any.
    pub first_error: Option<String>,
    /// Messages found stored in the writers' sessions afterwards.
    pub stored: usize,
    /// Messages the writers were asked to append (each writer's untimed [`warm_up`]
    /// included).
    pub expected: usize,
    /// CPU time the PostgreSQL server spent per timed append, ms (all its processes,
    /// read from `/proc`; `None` on SQLite or when the server is not on this machine).
    pub server_cpu_ms: Option<f64>,
    /// CPU time the writer processes spent per timed append, ms (on SQLite all of an
    /// append's work; on PostgreSQL the client's side), `None` when `/proc` cannot tell.
    pub client_cpu_ms: Option<f64>,
    /// CPUs' worth of work the rest of the machine did during the row (its busy time,
    /// steal included, less the server's and the writers'; on SQLite less the writers'),
    /// `None` when `/proc` cannot tell: other work on the machine shows here.
    pub other_cores: Option<f64>,
    /// What the appends were made of, with [`crate::trace::TRACE_ENV`] set.
    pub tail: Option<crate::trace::Tail>,
}

/// Commit on host A to delivery on host B.
#[derive(Debug, Clone, Serialize)]
pub struct EventFigures {
    /// Appends timed.
    pub commits: usize,
    /// Appends whose message insert reached host B's subscriber.
    pub delivered: usize,
    /// From `write` returning on A (the commit acknowledged) to B's subscriber holding
    /// the event, median, ms (0 when it arrived first).
    pub p50_ms: f64,
    /// The same, 99th percentile, ms.
    pub p99_ms: f64,
    /// The same, longest, ms.
    pub max_ms: f64,
    /// From calling `MessageService::create` on A to B's subscriber holding the event,
    /// median, ms (the append itself included).
    pub from_call_p50_ms: f64,
    /// The same, 99th percentile, ms.
    pub from_call_p99_ms: f64,
    /// Changes host B received per append (one per row: the message, its parts, the
    /// session's counters), which since schema V19 come in one outbox row per
    /// transaction.
    pub notices_per_commit: f64,
    /// Append rate on A while B listened, per second (the events' cost shows against
    /// the single-writer row).
    pub append_per_s: f64,
    /// Appends timed one every [`EVENTS_PACE`] (an agent streaming a reply), after the
    /// back-to-back ones: the listener's poll has backed off between them.
    pub paced: usize,
    /// Their latency after A's write returned, median and 99th percentile, ms.
    pub paced_p50_ms: f64,
    /// The same, 99th percentile, ms.
    pub paced_p99_ms: f64,
}

/// The pause between the paced appends of the events row.
pub const EVENTS_PACE: Duration = Duration::from_millis(75);

/// Loading one session.
#[derive(Debug, Clone, Serialize)]
pub struct LoadFigures {
    /// `PostgreSQL` or `SQLite`.
    pub backend: &'static str,
    /// Messages in the session.
    pub messages: usize,
    /// Median load, ms.
    pub p50_ms: f64,
    /// 99th percentile load, ms.
    pub p99_ms: f64,
}

/// `scribe import FILE` on one backend: an export file of generated sessions read, parsed
/// and stored by the bulk path (`SessionService::import_many`), search indexes built.
#[derive(Debug, Clone, Serialize)]
pub struct ImportFigures {
    /// `PostgreSQL` or `SQLite`.
    pub backend: &'static str,
    /// Sessions imported.
    pub sessions: usize,
    /// Messages imported.
    pub messages: usize,
    /// Bytes of the file.
    pub file_bytes: u64,
    /// End to end, ms.
    pub import_ms: f64,
    /// Messages per second, end to end.
    pub per_s: f64,
}

/// Search on one backend: the SQLite report's query mix through `MessageService::search`.
#[derive(Debug, Clone, Serialize)]
pub struct SearchFigures {
    /// `PostgreSQL` or `SQLite`.
    pub backend: &'static str,
    /// Messages in the corpus.
    pub messages: usize,
    /// Queries timed (word and CJK).
    pub queries: usize,
    /// Word queries (common and rare words, two words, phrases, prefixes): median, ms.
    pub word_median_ms: f64,
    /// Word queries: 95th percentile, ms.
    pub word_p95_ms: f64,
    /// CJK queries (trigrams): median, ms.
    pub cjk_median_ms: f64,
    /// CJK queries: 95th percentile, ms.
    pub cjk_p95_ms: f64,
    /// Hits of all queries (the backends should agree).
    pub hits: usize,
    /// Seconds building the corpus took (one transaction per 1,000 messages; on PostgreSQL
    /// with the VACUUM (ANALYZE) after it).
    pub build_s: f64,
}

/// The whole PostgreSQL report.
#[derive(Debug, Clone, Serialize)]
pub struct PgReport {
    /// The server (`PostgreSQL 15.14 …`) and where, password hidden.
    pub server: String,
    /// Sizes.
    pub sizes: PgSizes,
    /// Writer rows, PostgreSQL then SQLite.
    pub writers: Vec<WritersRow>,
    /// Events across hosts (`None` when [`PARTS_ENV`] leaves them out).
    pub events: Option<EventFigures>,
    /// Loads, PostgreSQL then SQLite.
    pub load: Vec<LoadFigures>,
    /// Search, PostgreSQL then SQLite.
    pub search: Vec<SearchFigures>,
    /// `scribe import` of an export file, PostgreSQL then SQLite.
    pub import: Vec<ImportFigures>,
    /// Logical CPUs and the 1-minute load average when the run ended.
    pub machine: String,
    /// Seconds the report took.
    pub total_s: f64,
}

/// Runs the report against `url`.
pub fn run(url: &str, quick: bool, seed: u64, dir: &Path) -> Result<PgReport> {
    let started = Instant::now();
    let sizes = if quick {
        PgSizes::quick()
    } else {
        PgSizes::full()
    };
    let db = Database::open(url)?;
    let info = db.info()?;
    let server = format!("{} at {}", info.engine_version, info.location);
    let mut made = Vec::new();

    let mut writers = Vec::new();
    let paced_only = wanted("pg-paced") && !wanted("writers");
    let paces: &[Option<u64>] = if wanted("writers") {
        &[None, Some(PACE_MS)]
    } else if wanted("saturated") || wanted("scribe-pg") {
        &[None]
    } else if paced_only {
        &[Some(PACE_MS)]
    } else {
        &[]
    };
    let sqlite_rows = wanted("writers") || wanted("saturated");
    let limit_rows = sqlite_rows || wanted("limit");
    // The limit's paced rows: what the machine alone makes of a paced p99.
    let limit_paced = wanted("writers") || paced_only;
    let breakdown_rows = wanted("breakdown");
    let mut limit_client = if limit_rows || breakdown_rows || limit_paced {
        // The limit's raw client speaks no TLS: a server that insists on it gets no limit
        // rows (said so), not a failed report.
        match pg_limit::connect(url) {
            Ok(mut client) => {
                pg_limit::create_schema(&mut client)?;
                Some(client)
            }
            Err(err) => {
                progress(&format!(
                    "PostgreSQL limit: skipped, its raw client (no TLS) cannot connect: {err}"
                ));
                None
            }
        }
    } else {
        None
    };
    // PostgreSQL's limit on the same server: Scribe's writer rows without Scribe, then
    // with one of Scribe's choices at a time (the breakdown).
    let mut limit_runs: Vec<(Variant, usize)> = Vec::new();
    if limit_rows && limit_client.is_some() {
        limit_runs.extend(WRITERS.map(|processes| (Variant::Limit, processes)));
    }
    if breakdown_rows && limit_client.is_some() {
        for variant in [Variant::Tx, Variant::Serializable] {
            limit_runs.extend([1, 16].map(|processes| (variant, processes)));
        }
    }
    for &pace in paces {
        let how = pace.map_or_else(
            || "as fast as they can".to_owned(),
            |ms| format!("one every {ms} ms each"),
        );
        if let Some(ms) = pace {
            let per_block = sizes.paced_per_writer.div_ceil(sizes.paced_blocks.max(1));
            // `pg-paced` alone: the two rows the target compares.
            let counts: &[usize] = if paced_only { &[1, 16] } else { &WRITERS };
            progress(&format!(
                "PostgreSQL: {counts:?} writer processes in turn, {} blocks of {per_block} \
                 appends each, {how}",
                sizes.paced_blocks
            ));
            for (processes, timed, stored, expected, sessions) in
                paced_rows(counts, sizes, seed, |processes, per_writer, seed| {
                    writers_block(url, "PostgreSQL", processes, per_writer, seed, Some(ms))
                })?
            {
                made.extend(sessions);
                writers.push(timed.row("PostgreSQL", "paced", processes, stored, expected));
            }
            if limit_paced && limit_client.is_some() {
                // The same pace and appends with no Scribe: what the machine makes of it.
                progress(&format!(
                    "PostgreSQL limit ({}): 1 and 16 writer processes in turn, {how}",
                    Variant::Limit.describe()
                ));
                for (processes, timed, stored, expected, _) in
                    paced_rows(&[1, 16], sizes, seed, |processes, per_writer, seed| {
                        let (timed, stored, expected) =
                            limit_block(url, Variant::Limit, processes, per_writer, seed, pace)?;
                        Ok((timed, stored, expected, Vec::new()))
                    })?
                {
                    writers.push(timed.row(
                        Variant::Limit.backend(),
                        "paced",
                        processes,
                        stored,
                        expected,
                    ));
                }
            }
            if sqlite_rows {
                progress(&format!(
                    "SQLite: 1, 4 and 16 writer processes in turn, {how}"
                ));
                let rows = paced_rows(&WRITERS, sizes, seed, |processes, per_writer, seed| {
                    // A file per row, as the saturated rows have: its blocks add to it.
                    let file = dir.join(format!("pg-report-sqlite-paced-{processes}.db"));
                    let file = file.to_str().ok_or("temporary path is not UTF-8")?;
                    writers_block(file, "SQLite", processes, per_writer, seed, Some(ms))
                })?;
                for (processes, timed, stored, expected, _) in rows {
                    writers.push(timed.row("SQLite", "paced", processes, stored, expected));
                }
            }
            continue;
        }
        let count = |_: usize| sizes.per_writer;
        for processes in WRITERS {
            let count = count(processes);
            progress(&format!(
                "PostgreSQL: {processes} writer processes x {count} appends, {how}"
            ));
            let (row, sessions) = writers_row(url, "PostgreSQL", processes, count, seed, pace)?;
            made.extend(sessions);
            writers.push(row);
        }
        // Right after Scribe's saturated rows, on the same server state.
        limit_writers(url, &limit_runs, sizes, seed, &mut writers)?;
        limit_runs.clear();
        if !sqlite_rows {
            continue;
        }
        for processes in WRITERS {
            let count = count(processes);
            progress(&format!(
                "SQLite: {processes} writer processes x {count} appends, {how}"
            ));
            let file = dir.join(format!("pg-report-sqlite-saturated-{processes}.db"));
            let file = file.to_str().ok_or("temporary path is not UTF-8")?;
            let (row, _) = writers_row(file, "SQLite", processes, count, seed, pace)?;
            writers.push(row);
        }
    }

    if !limit_runs.is_empty() {
        // PARTS without the Scribe rows: the limit alone.
        limit_writers(url, &limit_runs, sizes, seed, &mut writers)?;
    }
    let keep = std::env::var(KEEP_ENV).is_ok_and(|keep| keep == "1");
    if let Some(client) = limit_client.as_mut()
        && !keep
    {
        pg_limit::drop_schema(client)?;
    }

    let events = if wanted("events") {
        progress(&format!(
            "events: {} appends on host A, received on host B",
            sizes.events
        ));
        let (events, session) = events(url, sizes.events, seed)?;
        made.push(session);
        Some(events)
    } else {
        None
    };

    let file = dir.join("pg-report-load.db");
    let mut load = Vec::new();
    let load_on = if wanted("load") { 2 } else { 0 };
    if load_on > 0 {
        progress(&format!(
            "load: a session of {} messages, {} times",
            sizes.load_messages, sizes.load_rounds
        ));
    }
    for (backend, location) in [
        ("PostgreSQL", url),
        (
            "SQLite",
            file.to_str().ok_or("temporary path is not UTF-8")?,
        ),
    ]
    .into_iter()
    .take(load_on)
    {
        let db = Arc::new(Database::open(location)?);
        let session = new_session(&db, "bench load")?;
        let svc = MessageService::new(Arc::clone(&db));
        for draft in drafts(seed, sizes.load_messages) {
            append(&svc, &session, &draft)?;
        }
        load.push(load_figures(&svc, backend, &session, sizes)?);
        if backend == "PostgreSQL" {
            made.push(session);
        }
    }

    let mut search = Vec::new();
    let file = dir.join("pg-report-search.db");
    let search_on = if wanted("search") { 2 } else { 0 };
    if search_on > 0 {
        progress(&format!(
            "search: a corpus of {} messages in {} sessions on each backend, {} queries",
            sizes.corpus_messages, sizes.corpus_sessions, sizes.queries
        ));
    }
    for (backend, location) in [
        ("PostgreSQL", url),
        (
            "SQLite",
            file.to_str().ok_or("temporary path is not UTF-8")?,
        ),
    ]
    .into_iter()
    .take(search_on)
    {
        let (figures, sessions) = search_figures(backend, location, sizes, seed)?;
        if backend == "PostgreSQL" {
            made.extend(sessions);
        }
        search.push(figures);
    }

    let mut import = Vec::new();
    if wanted("import") {
        progress(&format!(
            "import: scribe import of an export of {} sessions x {} messages on each backend",
            sizes.import_sessions, sizes.import_per_session
        ));
        let file = dir.join("pg-report-import.jsonl");
        let file_bytes =
            transfer::write_file(&file, seed, sizes.import_sessions, sizes.import_per_session)?;
        let sqlite = dir.join("pg-report-import.db");
        for (backend, location) in [
            ("PostgreSQL", url),
            (
                "SQLite",
                sqlite.to_str().ok_or("temporary path is not UTF-8")?,
            ),
        ] {
            if backend == "PostgreSQL" {
                // The file's session ids are fixed: a report stopped before its clean-up
                // (or kept, KEEP_ENV) left them, and an import skips what is there.
                db.write(|tx| -> scribe_db::Result<()> {
                    for n in 0..sizes.import_sessions {
                        tx.q().delete_session(&transfer::session_id(n))?;
                    }
                    Ok(())
                })?;
            }
            let imported = transfer::import_file(&file, location)?;
            let expected = sizes.import_sessions * sizes.import_per_session;
            if imported.messages != expected {
                return Err(format!(
                    "{backend}: imported {} messages of {expected}",
                    imported.messages
                )
                .into());
            }
            import.push(ImportFigures {
                backend,
                sessions: imported.ids.len(),
                messages: imported.messages,
                file_bytes,
                import_ms: stats::ms(imported.time),
                per_s: stats::rate(imported.messages, imported.time),
            });
            if backend == "PostgreSQL" {
                made.extend(imported.ids);
            }
        }
    }

    if keep {
        made.clear();
    }
    db.write(|tx| -> scribe_db::Result<()> {
        for id in &made {
            tx.q().delete_session(id)?;
        }
        Ok(())
    })?;
    Ok(PgReport {
        server,
        sizes,
        writers,
        events,
        load,
        search,
        import,
        machine: machine(),
        total_s: started.elapsed().as_secs_f64(),
    })
}

fn progress(what: &str) {
    eprintln!("[scribe-bench] {what}");
}

/// A new session in `db` titled `title` and its id (titles are unique); its id.
fn new_session(db: &Database, title: &str) -> Result<String> {
    let id = new_id(Prefix::Session);
    let title = format!("{title} {id}");
    let title = title.as_str();
    db.write(|tx| {
        tx.q().create_session(&q::CreateSessionParams {
            title: Some(title),
            ..scribe_db::testing::bare_session(&id, "bench", now_ms())
        })
    })?;
    Ok(id)
}

/// Appends one draft through `MessageService::create` (the real path on either backend:
/// ids, part encoding, the session check, the generated statements through `tx.q()`,
/// [`Database::write`]'s retries, the `created` event).
pub fn append(svc: &MessageService, session: &str, draft: &Draft) -> Result<()> {
    crate::append::scribe_append(svc, session, draft.clone())
}

/// The writer process side of `--writer --queries`: the location comes from [`DB_ENV`];
/// with [`PACE_ENV`] set, one append every that many ms (the first after a pause of up to
/// one interval drawn from `seed`, so paced writers do not start in step; an append that
/// is late starts at once).
pub fn child(session: &str, count: usize, seed: u64) -> Result<()> {
    let location = std::env::var(DB_ENV).map_err(|_| format!("{DB_ENV} is not set"))?;
    let pace = pace_of_env()?;
    // Traced: the pool's connections carry a name of this process's, so its backends can be
    // found (and metered) after the first append.
    let name = format!("scribe-bench-writer-{}", std::process::id());
    let named = if crate::trace::enabled() {
        with_application_name(&location, &name)
    } else {
        None
    };
    let db = Arc::new(Database::open(named.as_deref().unwrap_or(&location))?);
    let svc = MessageService::new(Arc::clone(&db));
    writer_loop(
        count,
        seed,
        pace,
        |draft| append(&svc, session, draft).map_err(|err| err.to_string()),
        || {
            if named.is_none() {
                return Vec::new();
            }
            backends_named(&location, &name).unwrap_or_default()
        },
        || db.write_retries(),
    )
}

/// The pace [`PACE_ENV`] asks for, if any.
pub fn pace_of_env() -> Result<Option<Duration>> {
    match std::env::var(PACE_ENV) {
        Ok(ms) => {
            Ok(Some(Duration::from_millis(ms.parse().map_err(|_| {
                format!("{PACE_ENV} is not a number of ms: {ms:?}")
            })?)))
        }
        Err(_) => Ok(None),
    }
}

/// `location` (a PostgreSQL URL or keyword string) with `application_name` set to `name`;
/// `None` when it names one already or is not a PostgreSQL location.
fn with_application_name(location: &str, name: &str) -> Option<String> {
    if location.contains("application_name") {
        return None;
    }
    if location.starts_with("postgres://") || location.starts_with("postgresql://") {
        let sep = if location.contains('?') { '&' } else { '?' };
        Some(format!("{location}{sep}application_name={name}"))
    } else if location.contains('=') {
        Some(format!("{location} application_name={name}"))
    } else {
        None
    }
}

/// The pids of the server backends whose connections are named `name`.
fn backends_named(location: &str, name: &str) -> Result<Vec<u32>> {
    let mut client = pg_limit::connect(location)?;
    let rows = client.query(
        "SELECT pid FROM pg_stat_activity WHERE application_name = $1",
        &[&name],
    )?;
    rows.iter()
        .map(|row| Ok(u32::try_from(row.try_get::<_, i32>(0)?)?))
        .collect()
}

/// A writer process's side of the harness, whatever it appends with (Scribe's
/// `--writer --queries`, the limit's `--writer --pg-limit`): the untimed [`warm_up`]
/// appends (the connection open, every statement prepared), "ready", then after "go" `count` drafts
/// of `seed`, each timed (one every `pace` when given, the first after a pause of up to
/// one interval drawn from `seed`, so paced writers do not start in step; an append that
/// is late starts at once), and the report as one JSON line: latencies, errors,
/// `retries()` at the end, the process's own CPU.
pub fn writer_loop(
    count: usize,
    seed: u64,
    pace: Option<Duration>,
    mut append: impl FnMut(&Draft) -> std::result::Result<(), String>,
    backends: impl FnOnce() -> Vec<u32>,
    retries: impl FnOnce() -> u64,
) -> Result<()> {
    let work = drafts(seed, count);
    let mut report = WriterReport {
        latencies_us: Vec::with_capacity(count),
        errors: 0,
        first_error: None,
        retries: 0,
        cpu_us: None,
        trace: Vec::new(),
        traced_server: false,
    };
    for draft in &warm_up(seed) {
        append(draft)?;
    }
    // After the first append: its connection is open.
    let meter = crate::trace::enabled().then(|| crate::trace::Meter::new(&backends()));
    report.traced_server = meter
        .as_ref()
        .is_some_and(crate::trace::Meter::has_backends);
    let mut out = std::io::stdout().lock();
    writeln!(out, "ready")?;
    out.flush()?;
    let mut go = String::new();
    std::io::stdin().read_line(&mut go)?;
    let cpu_before = pg_limit::own_cpu();
    let mut next = Instant::now();
    if let Some(pace) = pace {
        let phase = u64::try_from(pace.as_micros()).unwrap_or(u64::MAX).max(1);
        // A splitmix step of the seed: enough to spread the writers' phases.
        let mixed = seed.wrapping_mul(0x9e37_79b9_7f4a_7c15).rotate_left(31);
        next += Duration::from_micros(mixed % phase);
    }
    for draft in &work {
        if let Some(pace) = pace {
            let now = Instant::now();
            if next > now {
                std::thread::sleep(next - now);
            }
            next += pace;
        }
        let before = meter.as_ref().map(crate::trace::Meter::read);
        let started = Instant::now();
        let outcome = append(draft);
        report
            .latencies_us
            .push(u64::try_from(started.elapsed().as_micros()).unwrap_or(u64::MAX));
        if let (Some(meter), Some(before)) = (&meter, before) {
            report.trace.push(before.until(&meter.read()));
        }
        if let Err(err) = outcome {
            report.errors += 1;
            report.first_error.get_or_insert(err);
        }
    }
    report.retries = retries();
    report.cpu_us = pg_limit::own_cpu()
        .zip(cpu_before)
        .and_then(|(after, before)| u64::try_from(after.saturating_sub(before).as_micros()).ok());
    serde_json::to_writer(&mut out, &report)?;
    writeln!(out)?;
    out.flush()?;
    Ok(())
}

/// A writer's untimed appends before its timed ones: one draft of every shape (role and
/// part types) the drafts have, so every statement an append can send is prepared and
/// every trigger path has run once in the writer's backend before timing starts. One
/// untimed user message (text and finish) left the first assistant message with a tool
/// or a step finish to do it inside a timed append: with 16 writers and the rows in
/// blocks (a fresh process each block) those first-time appends (2-3x the others) were
/// about 1% of a row's appends, where its p99 is read.
pub fn warm_up(seed: u64) -> Vec<Draft> {
    let mut shapes = std::collections::HashSet::new();
    drafts(seed ^ 0x5eed, 256)
        .into_iter()
        .filter(|(role, parts)| {
            let shape: Vec<String> = std::iter::once(role.as_str().to_owned())
                .chain(parts.iter().map(|p| p.type_name().to_owned()))
                .collect();
            shapes.insert(shape)
        })
        .collect()
}

/// Messages the writers of a row append in all: `per_writer` timed ones each and their
/// untimed [`warm_up`] (the `i`-th writer's seed is `seed + 1_000 + i`, as
/// [`writer_command`] passes it).
fn expected_appends(processes: usize, per_writer: usize, seed: u64) -> usize {
    (0..processes)
        .map(|i| per_writer + warm_up(seed + 1_000 + i as u64).len())
        .sum()
}

/// The command of the `i`-th writer process of a row (`kind`: `--queries` for Scribe's,
/// `--pg-limit` for the limit's), appending `per_writer` drafts of the `i`-th seed after
/// `seed` to `session` on `location`, its stdin and stdout piped for the harness.
fn writer_command(
    exe: &std::path::Path,
    kind: &str,
    location: &str,
    session: &str,
    per_writer: usize,
    seed: u64,
    i: usize,
) -> Command {
    let mut command = Command::new(exe);
    command
        .args(["--writer", kind, "--db", "-", "--session", session])
        .args(["--count", &per_writer.to_string()])
        .args(["--seed", &(seed + 1_000 + i as u64).to_string()])
        .env(DB_ENV, location)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit());
    command
}

/// `processes` writer processes on `location`, each appending `per_writer` messages to
/// its own new session; the row and the sessions made.
fn writers_row(
    location: &str,
    backend: &'static str,
    processes: usize,
    per_writer: usize,
    seed: u64,
    pace: Option<u64>,
) -> Result<(WritersRow, Vec<String>)> {
    let (timed, stored, expected, sessions) =
        writers_block(location, backend, processes, per_writer, seed, pace)?;
    let mode = if pace.is_some() { "paced" } else { "saturated" };
    Ok((
        timed.row(backend, mode, processes, stored, expected),
        sessions,
    ))
}

/// The rows of `counts` writer processes, paced: [`PgSizes::paced_blocks`] blocks each of
/// `paced_per_writer / paced_blocks` appends per writer, run by `block(processes,
/// per_writer, seed)`, the rows taking turns (forwards, then backwards), each block with
/// its own seed (its own drafts and the writers' own phases); per row its blocks merged,
/// the messages stored and expected, and the sessions made.
#[allow(clippy::type_complexity)]
fn paced_rows(
    counts: &[usize],
    sizes: PgSizes,
    seed: u64,
    mut block: impl FnMut(usize, usize, u64) -> Result<(Timed, usize, usize, Vec<String>)>,
) -> Result<Vec<(usize, Timed, usize, usize, Vec<String>)>> {
    let blocks = sizes.paced_blocks.max(1);
    let per_block = sizes.paced_per_writer.div_ceil(blocks);
    let mut rows: Vec<(usize, Option<Timed>, usize, usize, Vec<String>)> = counts
        .iter()
        .map(|&processes| (processes, None, 0, 0, Vec::new()))
        .collect();
    for b in 0..blocks {
        let order: Vec<usize> = if b % 2 == 0 {
            (0..rows.len()).collect()
        } else {
            (0..rows.len()).rev().collect()
        };
        for i in order {
            let row = &mut rows[i];
            let block_seed = seed.wrapping_add(7_919 * b as u64);
            let (timed, stored, expected, sessions) = block(row.0, per_block, block_seed)?;
            row.1 = Some(match row.1.take() {
                Some(mut so_far) => {
                    so_far.merge(timed);
                    so_far
                }
                None => timed,
            });
            row.2 += stored;
            row.3 += expected;
            row.4.extend(sessions);
        }
    }
    Ok(rows
        .into_iter()
        .filter_map(|(processes, timed, stored, expected, sessions)| {
            timed.map(|timed| (processes, timed, stored, expected, sessions))
        })
        .collect())
}

/// `processes` writer processes on `location`, each appending `per_writer` messages to
/// its own new session: what they measured, the messages stored and expected, the
/// sessions made.
fn writers_block(
    location: &str,
    backend: &'static str,
    processes: usize,
    per_writer: usize,
    seed: u64,
    pace: Option<u64>,
) -> Result<(Timed, usize, usize, Vec<String>)> {
    let db = Database::open(location)?;
    let sessions = (0..processes)
        .map(|i| new_session(&db, &format!("bench writer {i}")))
        .collect::<Result<Vec<_>>>()?;
    let exe = std::env::current_exe()?;
    let mut children = Vec::new();
    for (i, session) in sessions.iter().enumerate() {
        let mut command = writer_command(&exe, "--queries", location, session, per_writer, seed, i);
        command.env_remove(PACE_ENV);
        if let Some(ms) = pace {
            command.env(PACE_ENV, ms.to_string());
        }
        children.push(command.spawn()?);
    }
    let timed = timed_run(&mut children, server_cpu(backend, location))?;
    let stored = db.read(|tx| -> scribe_db::Result<usize> {
        let mut n = 0;
        for session in &sessions {
            n += tx.q().list_messages(session)?.len();
        }
        Ok(n)
    })?;
    // Each writer's untimed appends included.
    Ok((
        timed,
        stored,
        expected_appends(processes, per_writer, seed),
        sessions,
    ))
}

/// Runs the limit's rows `runs` (variant, writer processes) and adds them to `writers`.
fn limit_writers(
    url: &str,
    runs: &[(Variant, usize)],
    sizes: PgSizes,
    seed: u64,
    writers: &mut Vec<WritersRow>,
) -> Result<()> {
    for &(variant, processes) in runs {
        progress(&format!(
            "PostgreSQL limit ({}): {processes} writer processes x {} appends, as fast as they can",
            variant.describe(),
            sizes.per_writer
        ));
        writers.push(limit_row(
            url,
            variant,
            processes,
            sizes.per_writer,
            seed,
            None,
        )?);
    }
    Ok(())
}

/// The server's CPU meter for a PostgreSQL row (`None` on SQLite, or when the server is
/// not on this machine or cannot be reached without TLS).
fn server_cpu(backend: &str, location: &str) -> Option<pg_limit::ServerCpu> {
    if backend == "SQLite" {
        return None;
    }
    let mut client = pg_limit::connect(location).ok()?;
    pg_limit::ServerCpu::find(&mut client)
}

/// `processes` limit writer processes ([`pg_limit`], `variant`) on `url`, each appending
/// `per_writer` messages to its own new session of the limit's schema, as fast as it can
/// or one every `pace` ms.
fn limit_row(
    url: &str,
    variant: Variant,
    processes: usize,
    per_writer: usize,
    seed: u64,
    pace: Option<u64>,
) -> Result<WritersRow> {
    let (timed, stored, expected) = limit_block(url, variant, processes, per_writer, seed, pace)?;
    Ok(timed.row(
        variant.backend(),
        if pace.is_some() { "paced" } else { "saturated" },
        processes,
        stored,
        expected,
    ))
}

/// `processes` limit writer processes as [`limit_row`] runs them: what they measured,
/// the messages stored and expected.
fn limit_block(
    url: &str,
    variant: Variant,
    processes: usize,
    per_writer: usize,
    seed: u64,
    pace: Option<u64>,
) -> Result<(Timed, usize, usize)> {
    let mut client = pg_limit::connect(url)?;
    let sessions = (0..processes)
        .map(|i| pg_limit::create_session(&mut client, &format!("bench limit writer {i}")))
        .collect::<Result<Vec<_>>>()?;
    let exe = std::env::current_exe()?;
    let mut children = Vec::new();
    for (i, session) in sessions.iter().enumerate() {
        // The same drafts as Scribe's writer rows.
        let mut command = writer_command(&exe, "--pg-limit", url, session, per_writer, seed, i);
        command.env(pg_limit::VARIANT_ENV, variant.name());
        command.env_remove(PACE_ENV);
        if let Some(ms) = pace {
            command.env(PACE_ENV, ms.to_string());
        }
        children.push(command.spawn()?);
    }
    let timed = timed_run(&mut children, pg_limit::ServerCpu::find(&mut client))?;
    let (counted, stored) = pg_limit::stored(&mut client, &sessions)?;
    if counted != stored {
        return Err(format!(
            "the limit's trigger counted {counted} messages where {stored} are stored"
        )
        .into());
    }
    Ok((
        timed,
        usize::try_from(stored)?,
        expected_appends(processes, per_writer, seed),
    ))
}

/// What a set of writer processes reported: their appends' latencies and outcomes, and
/// the CPU they and the server spent.
struct Timed {
    elapsed: Duration,
    latencies: Vec<Duration>,
    errors: usize,
    first_error: Option<String>,
    retries: u64,
    client_cpu: Option<Duration>,
    server_cpu: Option<Duration>,
    machine_busy: Option<Duration>,
    /// Every traced append: writer, latency, trace (empty when untraced).
    traces: Vec<(usize, Duration, crate::trace::AppendTrace)>,
    /// Whether every writer's backends were metered.
    traced_server: bool,
}

/// Starts the (spawned, waiting) writer `children` together, collects their reports, and
/// reads the server's CPU meter `cpu` (if any) around the run.
fn timed_run(
    children: &mut [std::process::Child],
    cpu: Option<pg_limit::ServerCpu>,
) -> Result<Timed> {
    let (readers, started) = crate::writers::start(children)?;
    let cpu_before = cpu.and_then(pg_limit::ServerCpu::total);
    let busy_before = crate::trace::machine_busy();
    let reports = crate::writers::collect(children, readers)?;
    let elapsed = started.elapsed();
    let machine_busy = crate::trace::machine_busy()
        .zip(busy_before)
        .map(|(after, before)| after.saturating_sub(before));
    let server_cpu = cpu
        .and_then(pg_limit::ServerCpu::total)
        .zip(cpu_before)
        .map(|(after, before)| after.saturating_sub(before));
    let mut timed = Timed {
        elapsed,
        latencies: Vec::new(),
        errors: 0,
        first_error: None,
        retries: 0,
        client_cpu: Some(Duration::ZERO),
        server_cpu,
        machine_busy,
        traces: Vec::new(),
        traced_server: true,
    };
    for (writer, report) in reports.into_iter().enumerate() {
        if report.trace.len() == report.latencies_us.len() {
            timed.traced_server &= report.traced_server;
            timed.traces.extend(
                report
                    .latencies_us
                    .iter()
                    .zip(&report.trace)
                    .map(|(&us, t)| (writer, Duration::from_micros(us), *t)),
            );
        }
        timed.retries += report.retries;
        timed.client_cpu = timed
            .client_cpu
            .zip(report.cpu_us)
            .map(|(sum, us)| sum + Duration::from_micros(us));
        timed.latencies.extend(
            report
                .latencies_us
                .iter()
                .map(|&us| Duration::from_micros(us)),
        );
        timed.errors += report.errors;
        timed.first_error = timed.first_error.or(report.first_error);
    }
    Ok(timed)
}

impl Timed {
    /// Adds another block of the same row.
    fn merge(&mut self, other: Timed) {
        let add = |a: Option<Duration>, b: Option<Duration>| a.zip(b).map(|(a, b)| a + b);
        self.elapsed += other.elapsed;
        self.latencies.extend(other.latencies);
        self.errors += other.errors;
        self.first_error = self.first_error.take().or(other.first_error);
        self.retries += other.retries;
        self.client_cpu = add(self.client_cpu, other.client_cpu);
        self.server_cpu = add(self.server_cpu, other.server_cpu);
        self.machine_busy = add(self.machine_busy, other.machine_busy);
        self.traces.extend(other.traces);
        self.traced_server &= other.traced_server;
    }

    /// The report's row for this run: `stored` of the `expected` appends found afterwards.
    fn row(
        self,
        backend: &'static str,
        mode: &'static str,
        processes: usize,
        stored: usize,
        expected: usize,
    ) -> WritersRow {
        let appends = self.latencies.len();
        let per_append = |d: Duration| stats::ms(d) / appends.max(1) as f64;
        let secs = self.elapsed.as_secs_f64();
        let other_cores = self
            .machine_busy
            .zip(self.client_cpu)
            .and_then(|(busy, client)| {
                let server = match backend {
                    "SQLite" => Duration::ZERO,
                    _ => self.server_cpu?,
                };
                (secs > 0.0).then(|| {
                    (busy.as_secs_f64() - client.as_secs_f64() - server.as_secs_f64()).max(0.0)
                        / secs
                })
            });
        let tail = if self.traces.len() == appends {
            let latencies: Vec<Duration> = self.traces.iter().map(|(_, d, _)| *d).collect();
            let traces: Vec<_> = self.traces.iter().map(|(_, _, t)| *t).collect();
            crate::trace::tail(&latencies, &traces, self.traced_server)
        } else {
            None
        };
        if !self.traces.is_empty()
            && let Some(dir) = std::env::var_os(crate::trace::TRACE_ENV)
        {
            let name = format!("{}-{mode}-{processes}", backend.replace(' ', "-"));
            if let Err(err) = crate::trace::write(Path::new(&dir), &name, &self.traces) {
                progress(&format!("trace {name}: not written: {err}"));
            }
        }
        WritersRow {
            backend,
            mode,
            processes,
            total_per_s: stats::rate(appends - self.errors, self.elapsed),
            p50_ms: stats::ms(stats::median(&self.latencies)),
            p95_ms: stats::ms(stats::percentile(&self.latencies, 0.95)),
            p99_ms: stats::ms(stats::percentile(&self.latencies, 0.99)),
            max_ms: stats::ms(stats::max(&self.latencies)),
            appends,
            errors: self.errors,
            retries_per_append: self.retries as f64 / appends.max(1) as f64,
            first_error: self.first_error,
            stored,
            expected,
            server_cpu_ms: self.server_cpu.map(per_append),
            client_cpu_ms: self.client_cpu.map(per_append),
            other_cores,
            tail,
        }
    }
}

/// Host A appends `commits` messages one by one; host B's listener publishes every
/// change on a broker whose subscriber notes when each message insert arrived.
fn events(url: &str, commits: usize, seed: u64) -> Result<(EventFigures, String)> {
    let host_a = Arc::new(Database::open(url)?);
    let host_b = Database::open(url)?;
    let session = new_session(&host_a, "bench events")?;
    let svc = MessageService::new(Arc::clone(&host_a));
    let broker: Arc<Broker<(Instant, scribe_db::events::Change)>> =
        Arc::new(Broker::with_buffer(commits * 8 + 64));
    let subscription = broker.subscribe();
    let notices = Arc::new(AtomicUsize::new(0));
    let listener = host_b.listen({
        let broker = Arc::clone(&broker);
        let notices = Arc::clone(&notices);
        let session = session.clone();
        move |notice| match notice {
            Notice::Change(change) => {
                if change.session_id == session {
                    notices.fetch_add(1, Ordering::Relaxed);
                }
                broker.publish_created((Instant::now(), change));
            }
            Notice::Lagged(n) => broker.report_missed(n),
        }
    })?;
    // Back to back, then one every EVENTS_PACE: `commits` and a tenth of it.
    let paced = (commits / 10).max(5);
    let work = drafts(seed + 7, commits + paced);
    let mut committed = Vec::with_capacity(commits + paced);
    let mut begun = Vec::with_capacity(commits + paced);
    let mut received = Vec::with_capacity(commits + paced);
    let mut append_per_s = 0.0;
    let receive = |received: &mut Vec<Instant>, until: usize| {
        while received.len() < until {
            match subscription.recv_timeout(Duration::from_secs(5)) {
                Ok(event) => {
                    let (at, change) = event.payload;
                    if change.table == "messages"
                        && change.op == ChangeOp::Insert
                        && change.session_id == session
                    {
                        received.push(at);
                    }
                }
                Err(RecvTimeoutError::Lagged(_)) => continue,
                Err(_) => break,
            }
        }
    };
    let started = Instant::now();
    for (i, draft) in work.iter().enumerate() {
        if i == commits {
            append_per_s = stats::rate(commits, started.elapsed());
            receive(&mut received, commits);
        }
        if i >= commits {
            std::thread::sleep(EVENTS_PACE);
        }
        // The id is made inside `append`; the subscriber matches on message inserts of
        // this session in order, which commit order guarantees.
        begun.push(Instant::now());
        append(&svc, &session, draft)?;
        committed.push(Instant::now());
    }
    receive(&mut received, commits + paced);
    listener.stop();
    let after = |range: std::ops::Range<usize>, from: &[Instant]| -> Vec<Duration> {
        let end = range.end.min(received.len());
        from[range.start.min(end)..end]
            .iter()
            .zip(&received[range.start.min(end)..end])
            .map(|(sent, got)| got.saturating_duration_since(*sent))
            .collect()
    };
    let latencies = after(0..commits, &committed);
    let whole = after(0..commits, &begun);
    let slow = after(commits..commits + paced, &committed);
    let figures = EventFigures {
        commits,
        delivered: received.len().min(commits),
        from_call_p50_ms: stats::ms(stats::median(&whole)),
        from_call_p99_ms: stats::ms(stats::percentile(&whole, 0.99)),
        p50_ms: stats::ms(stats::median(&latencies)),
        p99_ms: stats::ms(stats::percentile(&latencies, 0.99)),
        max_ms: stats::ms(stats::max(&latencies)),
        notices_per_commit: notices.load(Ordering::Relaxed) as f64
            / (commits + paced).max(1) as f64,
        append_per_s,
        paced,
        paced_p50_ms: stats::ms(stats::median(&slow)),
        paced_p99_ms: stats::ms(stats::percentile(&slow, 0.99)),
    };
    Ok((figures, session))
}

/// Builds a search corpus at `location` (the SQLite report's shape: the same generator's
/// messages interleaved over `sizes.corpus_sessions` sessions, stored 1,000 per
/// transaction through `store::insert_message`, the search indexes caught up) and times
/// the SQLite report's query mix on it; the figures and the sessions made.
fn search_figures(
    backend: &'static str,
    location: &str,
    sizes: PgSizes,
    seed: u64,
) -> Result<(SearchFigures, Vec<String>)> {
    let started = Instant::now();
    let db = Arc::new(Database::open(location)?);
    let sessions = (0..sizes.corpus_sessions.max(1))
        .map(|i| new_session(&db, &format!("bench search {i}")))
        .collect::<Result<Vec<_>>>()?;
    let mut g = crate::data::Gen::new(seed);
    let mut nth = vec![0_usize; sessions.len()];
    let mut time = 1_700_000_000_000_i64;
    let mut batch = Vec::with_capacity(1_000);
    for n in 0..sizes.corpus_messages {
        // Sessions interleave in time as in a real store.
        let s = g.below(sessions.len());
        time += 1 + i64::try_from(g.below(3))?;
        let (role, content) = g.message(nth[s], time);
        nth[s] += 1;
        batch.push(crate::corpus::message(
            &sessions[s],
            role,
            content,
            time,
            false,
        ));
        if batch.len() == 1_000 || n + 1 == sizes.corpus_messages {
            db.write(|tx| -> scribe_message::Result<()> {
                for msg in &batch {
                    scribe_message::store::insert_message(tx, msg)?;
                }
                Ok(())
            })?;
            batch.clear();
        }
    }
    // SQLite indexes after the write; PostgreSQL's GIN indexes are already complete.
    db.index_pending_with(scribe_db::IndexBatch {
        max_parts: 20_000,
        max_time: Duration::from_secs(1),
    })?;
    // PostgreSQL plans from statistics that autovacuum gathers in its own time, a minute
    // or so after a bulk write; a store in use has them, so the queries are timed with
    // them (`scribe db vacuum` is VACUUM (ANALYZE)). Before, the first queries met tables
    // never analysed and the figures moved with autovacuum's timing.
    if db.backend() == scribe_db::Backend::Postgres {
        db.vacuum()?;
    }
    let build_s = started.elapsed().as_secs_f64();
    let svc = MessageService::new(Arc::clone(&db));
    let options = scribe_message::SearchOptions {
        limit: 20,
        ..scribe_message::SearchOptions::default()
    };
    let queries = crate::reads::query_mix(sizes.queries);
    // One warm-up pass, as the SQLite report does.
    for (_, query) in &queries {
        svc.search(query, &options)?;
    }
    let (mut words, mut cjk, mut hits) = (Vec::new(), Vec::new(), 0);
    for (kind, query) in &queries {
        let t = Instant::now();
        hits += std::hint::black_box(svc.search(query, &options)?).len();
        if *kind == "cjk" {
            cjk.push(t.elapsed());
        } else {
            words.push(t.elapsed());
        }
    }
    let figures = SearchFigures {
        backend,
        messages: sizes.corpus_messages,
        queries: queries.len(),
        word_median_ms: stats::ms(stats::median(&words)),
        word_p95_ms: stats::ms(stats::percentile(&words, 0.95)),
        cjk_median_ms: stats::ms(stats::median(&cjk)),
        cjk_p95_ms: stats::ms(stats::percentile(&cjk, 0.95)),
        hits,
        build_s,
    };
    Ok((figures, sessions))
}

/// Loads `session` with `MessageService::list` (every message with its parts)
/// `sizes.load_rounds` times.
fn load_figures(
    svc: &MessageService,
    backend: &'static str,
    session: &str,
    sizes: PgSizes,
) -> Result<LoadFigures> {
    let mut times = Vec::with_capacity(sizes.load_rounds);
    let mut messages = 0;
    for _ in 0..sizes.load_rounds {
        let started = Instant::now();
        messages = svc.list(session)?.len();
        times.push(started.elapsed());
    }
    Ok(LoadFigures {
        backend,
        messages,
        p50_ms: stats::ms(stats::median(&times)),
        p99_ms: stats::ms(stats::percentile(&times, 0.99)),
    })
}

fn machine() -> String {
    let cpus = std::thread::available_parallelism().map_or(0, std::num::NonZero::get);
    let load = std::fs::read_to_string("/proc/loadavg")
        .ok()
        .and_then(|l| l.split_whitespace().next().map(str::to_owned))
        .unwrap_or_else(|| "?".to_owned());
    format!("{cpus} logical CPUs, load average {load} (1 min) at the end")
}

impl PgReport {
    /// The writer processes' rows, their targets and, when traced, what an append was made
    /// of.
    fn writers_table(&self, out: &mut String) {
        let _ = writeln!(
            out,
            "\nwriter processes, each appending to its own session (MessageService::create, one \
             transaction per message), after untimed appends of every shape each: saturated = {} appends \
             each as fast as it can; paced = one every {} ms, {} each, in {} blocks per row, the \
             rows' blocks taking turns so every paced row runs as long under the same conditions \
             (timed: the appends column); retries per append; stored (untimed ones included)",
            self.sizes.per_writer, PACE_MS, self.sizes.paced_per_writer, self.sizes.paced_blocks
        );
        let _ = writeln!(
            out,
            "{:<11} {:<9} {:>5} {:>7} {:>9} {:>8} {:>8} {:>8} {:>8} {:>6} {:>7} {:>11} {:>7} {:>7} {:>7}",
            "backend",
            "mode",
            "procs",
            "appends",
            "total/s",
            "p50 ms",
            "p95 ms",
            "p99 ms",
            "max ms",
            "errors",
            "retries",
            "stored",
            "srv cpu",
            "cli cpu",
            "others"
        );
        for row in &self.writers {
            let _ = writeln!(
                out,
                "{:<11} {:<9} {:>5} {:>7} {:>9.0} {:>8.2} {:>8.2} {:>8.2} {:>8.2} {:>6} {:>7.3} {:>11} {:>7} {:>7} {:>7}",
                row.backend,
                row.mode,
                row.processes,
                row.appends,
                row.total_per_s,
                row.p50_ms,
                row.p95_ms,
                row.p99_ms,
                row.max_ms,
                row.errors,
                row.retries_per_append,
                format!("{}/{}", row.stored, row.expected),
                row.server_cpu_ms
                    .map_or_else(|| "-".to_owned(), |ms| format!("{ms:.2}")),
                row.client_cpu_ms
                    .map_or_else(|| "-".to_owned(), |ms| format!("{ms:.2}")),
                row.other_cores
                    .map_or_else(|| "-".to_owned(), |cores| format!("{cores:.2}"))
            );
            if let Some(first) = &row.first_error {
                let _ = writeln!(out, "            first error: {first}");
            }
        }
        let find = |backend: &str, mode: &str, processes: usize| {
            self.writers
                .iter()
                .find(|r| r.backend == backend && r.mode == mode && r.processes == processes)
        };
        let _ = writeln!(out, "\ntargets");
        for mode in ["saturated", "paced"] {
            if let Some(pg16) = find("PostgreSQL", mode, 16) {
                let _ = writeln!(
                    out,
                    "  PostgreSQL 16 writers, errors, {mode:<9}    {:>8}   (target 0)",
                    pg16.errors
                );
            }
        }
        for mode in ["paced", "saturated"] {
            let judged = if mode == "paced" {
                "(target <= 2x: judged here)"
            } else {
                "(CPU queueing: 16 processes on this machine's cores)"
            };
            if let (Some(pg1), Some(pg16)) =
                (find("PostgreSQL", mode, 1), find("PostgreSQL", mode, 16))
            {
                let _ = writeln!(
                    out,
                    "  p99(16) / p99(1), PostgreSQL, {mode:<9}     {:>8.2}x  {judged}",
                    stats::ratio(pg16.p99_ms, pg1.p99_ms)
                );
                if mode == "paced" {
                    let _ = writeln!(
                        out,
                        "  p95(16) / p95(1), PostgreSQL, {mode:<9}     {:>8.2}x  (p50: {:.2}x)",
                        stats::ratio(pg16.p95_ms, pg1.p95_ms),
                        stats::ratio(pg16.p50_ms, pg1.p50_ms)
                    );
                }
            }
            if mode == "paced"
                && let (Some(l1), Some(l16)) =
                    (find("PG limit", mode, 1), find("PG limit", mode, 16))
            {
                let _ = writeln!(
                    out,
                    "  p99(16) / p99(1), PG limit, {mode:<9}       {:>8.2}x  (no Scribe: the machine's own share; p99 {:.2} / {:.2} ms)",
                    stats::ratio(l16.p99_ms, l1.p99_ms),
                    l16.p99_ms,
                    l1.p99_ms
                );
            }
            if let (Some(l1), Some(l16)) = (find("SQLite", mode, 1), find("SQLite", mode, 16)) {
                let _ = writeln!(
                    out,
                    "  p99(16) / p99(1), SQLite, {mode:<9}         {:>8.2}x  (for contrast)",
                    stats::ratio(l16.p99_ms, l1.p99_ms)
                );
            }
        }
        if let (Some(pg4), Some(pg16), Some(lite4)) = (
            find("PostgreSQL", "saturated", 4),
            find("PostgreSQL", "saturated", 16),
            find("SQLite", "saturated", 4),
        ) {
            let _ = writeln!(
                out,
                "  PostgreSQL 16 total / SQLite 4 total, saturated {:>6.2}x  (target >= 0.5x: judged here)",
                stats::ratio(pg16.total_per_s, lite4.total_per_s)
            );
            let _ = writeln!(
                out,
                "  PostgreSQL 4 total / SQLite 4 total, saturated  {:>6.2}x",
                stats::ratio(pg4.total_per_s, lite4.total_per_s)
            );
        }
        if let (Some(limit16), Some(lite4)) = (
            find("PG limit", "saturated", 16),
            find("SQLite", "saturated", 4),
        ) {
            let ratio = stats::ratio(limit16.total_per_s, lite4.total_per_s);
            let _ = writeln!(
                out,
                "  PostgreSQL limit 16 total / SQLite 4 total      {ratio:>6.2}x  {}",
                if ratio < 0.5 {
                    "(below 0.5x: no design on PostgreSQL meets the target on this machine)"
                } else {
                    "(at least 0.5x: the target is within PostgreSQL's reach here)"
                }
            );
        }
        for processes in WRITERS {
            if let (Some(pg), Some(limit)) = (
                find("PostgreSQL", "saturated", processes),
                find("PG limit", "saturated", processes),
            ) {
                let _ = writeln!(
                    out,
                    "  Scribe {processes:>2} total / PostgreSQL limit {processes:>2} total   {:>6.2}x",
                    stats::ratio(pg.total_per_s, limit.total_per_s)
                );
            }
        }
        if self.writers.iter().any(|r| r.server_cpu_ms.is_some()) {
            let _ = writeln!(
                out,
                "  srv cpu: the PostgreSQL server's CPU time per timed append, ms (all its \
                 processes, from /proc); cli cpu: the writer processes' (SQLite: all the work); \
                 srv cpu in 10 ms ticks, cli cpu in ns; PG limit = {}; lim+tx = {}; lim+ser = {}",
                Variant::Limit.describe(),
                Variant::Tx.describe(),
                Variant::Serializable.describe()
            );
        }
        if self.writers.iter().any(|r| r.other_cores.is_some()) {
            let _ = writeln!(
                out,
                "  others: CPUs' worth of work the rest of the machine did during the row (its \
                 busy time, steal included, less the server's and the writers'): other work \
                 on the machine, which rows compared must not differ in"
            );
        }
        let traced: Vec<_> = self
            .writers
            .iter()
            .filter_map(|r| r.tail.map(|t| (r, t)))
            .collect();
        if !traced.is_empty() {
            let _ = writeln!(
                out,
                "\nwhat an append was made of (traced, mean ms): all appends / the slowest 1% \
                 (the p99 and above); cli/srv = the writer / its server backend on a CPU, \
                 +wait = waiting in the run queue for one (they overlap: a client still runnable \
                 waits while the backend it woke runs)"
            );
            let _ = writeln!(
                out,
                "{:<11} {:<9} {:>5} {:>15} {:>13} {:>13} {:>13} {:>13}",
                "backend", "mode", "procs", "latency", "cli", "cli wait", "srv", "srv wait"
            );
            for (row, t) in traced {
                let pair = |a: f64, b: f64| format!("{a:.2} / {b:.2}");
                let srv = |a: f64, b: f64| {
                    if t.server { pair(a, b) } else { "-".to_owned() }
                };
                let _ = writeln!(
                    out,
                    "{:<11} {:<9} {:>5} {:>15} {:>13} {:>13} {:>13} {:>13}",
                    row.backend,
                    row.mode,
                    row.processes,
                    pair(t.all.latency_ms, t.slowest.latency_ms),
                    pair(t.all.cli_run_ms, t.slowest.cli_run_ms),
                    pair(t.all.cli_wait_ms, t.slowest.cli_wait_ms),
                    srv(t.all.srv_run_ms, t.slowest.srv_run_ms),
                    srv(t.all.srv_wait_ms, t.slowest.srv_wait_ms)
                );
            }
        }
    }

    /// The report as a table, with the targets' ratios.
    pub fn table(&self) -> String {
        let mut out = String::new();
        let _ = writeln!(out, "scribe-bench: PostgreSQL report");
        let _ = writeln!(out, "server   {}", self.server);
        let _ = writeln!(out, "machine  {}", self.machine);
        // The writer rows and their targets, when the report ran them.
        if !self.writers.is_empty() {
            self.writers_table(&mut out);
        }
        if let Some(e) = &self.events {
            let _ = writeln!(
                out,
                "\nevents, commit on host A -> Broker subscriber on host B (Database::listen)"
            );
            let _ = writeln!(
                out,
                "  delivered {}/{}; after A's write returned: p50 {:.2} ms   p99 {:.2} ms   \
             max {:.2} ms (0: B had it first)",
                e.delivered, e.commits, e.p50_ms, e.p99_ms, e.max_ms
            );
            let _ = writeln!(
                out,
                "  from the call on A (the append included): p50 {:.2} ms   p99 {:.2} ms",
                e.from_call_p50_ms, e.from_call_p99_ms
            );
            let _ = writeln!(
                out,
                "  {} more, one every {} ms (B's poll backed off between them): after A's write \
             returned p50 {:.2} ms   p99 {:.2} ms",
                e.paced,
                EVENTS_PACE.as_millis(),
                e.paced_p50_ms,
                e.paced_p99_ms
            );
            let _ = writeln!(
                out,
                "  {:.1} changes per append (one per row: the message, its parts, the session), \
             in one outbox row per transaction (schema V19), polled every {}-{} ms; appends at \
             {:.0}/s while B listened",
                e.notices_per_commit,
                scribe_db::events::POLL_MIN.as_millis(),
                scribe_db::events::POLL_MAX.as_millis(),
                e.append_per_s
            );
        }
        if !self.load.is_empty() {
            let _ = writeln!(out, "\nloading one session (MessageService::list)");
        }
        for l in &self.load {
            let _ = writeln!(
                out,
                "  {:<11} {} messages   p50 {:.2} ms   p99 {:.2} ms",
                l.backend, l.messages, l.p50_ms, l.p99_ms
            );
        }
        if let Some(first) = self.search.first() {
            let _ = writeln!(
                out,
                "\nsearch (MessageService::search, the SQLite report's query mix, 20 hits), a corpus \
                 of {} messages, {} queries",
                first.messages, first.queries
            );
        }
        for f in &self.search {
            let _ = writeln!(
                out,
                "  {:<11} words: median {:.2} ms   p95 {:.2} ms   CJK: median {:.2} ms   p95 {:.2} ms   \
                 {} hits   (built in {:.1} s)",
                f.backend,
                f.word_median_ms,
                f.word_p95_ms,
                f.cjk_median_ms,
                f.cjk_p95_ms,
                f.hits,
                f.build_s
            );
        }
        if let Some(first) = self.import.first() {
            let _ = writeln!(
                out,
                "\nscribe import FILE (SessionService::import_many, the bulk path; search \
                 indexes built): an export of {} sessions, {} messages, {:.1} MiB",
                first.sessions,
                first.messages,
                first.file_bytes as f64 / (1024.0 * 1024.0)
            );
        }
        for f in &self.import {
            let _ = writeln!(
                out,
                "  {:<11} {:>8.0} msg/s   ({:.2} s end to end)",
                f.backend,
                f.per_s,
                f.import_ms / 1000.0
            );
        }
        let _ = writeln!(out, "total {:.1} s", self.total_s);
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn shape((role, parts): &Draft) -> Vec<String> {
        std::iter::once(role.as_str().to_owned())
            .chain(parts.iter().map(|p| p.type_name().to_owned()))
            .collect()
    }

    #[test]
    fn the_warm_up_has_every_shape_a_writer_then_appends_once() {
        for seed in (0..40).chain([42, 1_042, 1_057, 7_961]) {
            let warm = warm_up(seed);
            let shapes: Vec<_> = warm.iter().map(shape).collect();
            let distinct: std::collections::HashSet<_> = shapes.iter().collect();
            assert_eq!(distinct.len(), shapes.len(), "seed {seed}: a shape twice");
            for draft in drafts(seed, 800) {
                assert!(
                    shapes.contains(&shape(&draft)),
                    "seed {seed}: {:?} not warmed up",
                    shape(&draft)
                );
            }
        }
    }

    #[test]
    fn a_row_expects_every_writers_warm_up_and_timed_appends() {
        let seed = 42;
        let warm: usize = (0..16).map(|i| warm_up(seed + 1_000 + i).len()).sum();
        assert_eq!(expected_appends(16, 100, seed), 1_600 + warm);
        assert!(
            warm >= 16 * 2,
            "a user and an assistant message each at least"
        );
    }
}
