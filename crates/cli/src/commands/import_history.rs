//! `scribe import --from <agent> [PATH...]`: another agent's history, read where it keeps
//! it (or from PATHs), incrementally; and `--watch` to follow it.

use std::io::Write;
use std::path::PathBuf;
use std::time::Duration;

use clap::ValueEnum;
use scribe_agent::models::ModelCatalog;
use scribe_import::pricing::Pricer;
use scribe_import::sink::{DryRunSink, Sink, StoreSink};
use scribe_import::watch::{self, Watch};
use scribe_import::{Env, Event, Options, Source, SourceSummary, import, sources};
use serde::Serialize;

use crate::context::Context;
use crate::error::CliError;
use crate::interrupt::Interrupt;
use crate::json::{self, Tokens, usd};
use crate::ui::{self, paint, style};

/// `--watch` polls this often (ms) where file-system notifications do not cover every
/// location (default: [`watch::POLL`]); for troubleshooting and tests.
const POLL_VAR: &str = "SCRIBE_WATCH_POLL_MS";

/// `--watch` uses no file-system notifications (polls only) when this is `0`.
const NOTIFY_VAR: &str = "SCRIBE_WATCH_NOTIFY";

/// Malformed lines listed in the human summary (all are in `--json`).
const MALFORMED_SHOWN: usize = 10;

/// The agent whose history `--from` imports: one of [`Source::ALL`], or all of them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum From {
    /// One agent.
    One(Source),
    /// Every agent, each from its default location.
    All,
}

/// `--from`'s values, in help order: every agent, then `all`.
static FROM_VALUES: std::sync::LazyLock<Vec<From>> = std::sync::LazyLock::new(|| {
    Source::ALL
        .into_iter()
        .map(From::One)
        .chain([From::All])
        .collect()
});

impl ValueEnum for From {
    fn value_variants<'a>() -> &'a [Self] {
        FROM_VALUES.as_slice()
    }

    fn to_possible_value(&self) -> Option<clap::builder::PossibleValue> {
        let (name, help) = match self {
            From::One(source) => (source.name(), described(*source).help),
            From::All => ("all", "Every agent above, each from its default location"),
        };
        Some(clap::builder::PossibleValue::new(name).help(help))
    }
}

impl From {
    fn sources(self) -> Vec<Source> {
        match self {
            From::One(source) => vec![source],
            From::All => Source::ALL.to_vec(),
        }
    }
}

/// What the CLI says of an agent.
struct Described {
    /// Its name and where it is looked for (`--from`'s help).
    help: &'static str,
    /// What its history looks like, for a PATH that held none of it.
    keeps: &'static str,
}

/// What the CLI says of `source`: one place per agent, which a new [`Source`] must fill.
fn described(source: Source) -> Described {
    let (help, keeps) = match source {
        Source::ClaudeCode => (
            "Claude Code (`~/.claude/projects`, `CLAUDE_CONFIG_DIR`)",
            "Claude Code keeps *.jsonl transcripts under ~/.claude/projects",
        ),
        Source::Codex => (
            "OpenAI Codex CLI (`~/.codex/sessions`, `CODEX_HOME`)",
            "Codex keeps rollout-*.jsonl files under ~/.codex/sessions",
        ),
        Source::OpenCode => (
            "OpenCode (`~/.local/share/opencode`, `OPENCODE_DB`, `OPENCODE_DATA_DIR`, `XDG_DATA_HOME`)",
            "OpenCode keeps opencode*.db (or storage/session/*.json) in ~/.local/share/opencode",
        ),
        Source::Hermes => (
            "Hermes Agent (`~/.hermes`, `HERMES_HOME`)",
            "Hermes keeps state.db and sessions/*.json in ~/.hermes",
        ),
        Source::Gemini => (
            "Gemini CLI (`~/.gemini/tmp`, `GEMINI_DATA_DIR`)",
            "Gemini CLI keeps chats/*.json and *.jsonl under ~/.gemini/tmp",
        ),
        Source::Cline => (
            "Cline (its `tasks/` in each editor's extension storage; `~/.cline/data`, `CLINE_DIR`)",
            "Cline keeps tasks/<id>/api_conversation_history.json in its editor storage or ~/.cline/data",
        ),
        Source::RooCode => (
            "Roo Code (its `tasks/` in each editor's extension storage)",
            "Roo Code keeps tasks/<id>/api_conversation_history.json in its editor storage",
        ),
        Source::KiloCode => (
            "Kilo Code (its `tasks/` in each editor's extension storage)",
            "Kilo Code keeps tasks/<id>/api_conversation_history.json in its editor storage",
        ),
        Source::Goose => (
            "Goose (`~/.local/share/goose/sessions`, `GOOSE_PATH_ROOT`, `XDG_DATA_HOME`)",
            "Goose keeps sessions/sessions.db in ~/.local/share/goose",
        ),
        Source::Copilot => (
            "GitHub Copilot CLI (`~/.copilot/session-state`, `COPILOT_HOME`)",
            "Copilot CLI keeps session-state/<id>/events.jsonl in ~/.copilot",
        ),
        Source::Pi => (
            "pi (`~/.pi/agent/sessions`, `PI_CODING_AGENT_DIR`, `PI_CODING_AGENT_SESSION_DIR`)",
            "pi keeps sessions/<folder>/*.jsonl in ~/.pi/agent",
        ),
        Source::OpenClaw => (
            "OpenClaw (`~/.openclaw/agents`, `OPENCLAW_STATE_DIR`)",
            "OpenClaw keeps agents/<agent>/agent/openclaw-agent.sqlite (before 2026.9, \
             agents/<agent>/sessions/*.jsonl) in ~/.openclaw",
        ),
        Source::Amp => (
            "Amp (`~/.local/share/amp/threads`, `AMP_DATA_DIR`, `XDG_DATA_HOME`)",
            "Amp keeps threads/T-*.json in ~/.local/share/amp",
        ),
        Source::Droid => (
            "Factory Droid (`~/.factory/sessions`, `DROID_SESSIONS_DIR`)",
            "Droid keeps sessions/<folder>/<id>.jsonl in ~/.factory",
        ),
        Source::Kilo => (
            "Kilo CLI, OpenCode's fork (`~/.local/share/kilo/kilo.db`, `KILO_DATA_DIR`, `XDG_DATA_HOME`)",
            "Kilo CLI keeps kilo.db in ~/.local/share/kilo",
        ),
        Source::Grok => (
            "Grok Build (`~/.grok/sessions`, `GROK_HOME`)",
            "Grok Build keeps sessions/<folder>/<id>/chat_history.jsonl in ~/.grok",
        ),
        Source::Qwen => (
            "Qwen Code (`~/.qwen/projects`, `QWEN_DATA_DIR`)",
            "Qwen Code keeps projects/<project>/chats/<id>.jsonl in ~/.qwen",
        ),
        Source::Antigravity => (
            "Google Antigravity (`~/.gemini/antigravity-cli/brain`, `~/.gemini/antigravity/brain`, `ANTIGRAVITY_DATA_DIR`)",
            "Antigravity keeps brain/<id>/.system_generated/logs/transcript_full.jsonl in ~/.gemini/antigravity-cli or ~/.gemini/antigravity",
        ),
        Source::Kimi => (
            "Kimi Code (`~/.kimi-code/sessions`, `KIMI_CODE_HOME`) and the Kimi CLI before it (`~/.kimi/sessions`, `KIMI_DATA_DIR`)",
            "Kimi keeps sessions/<folder>/<id>/agents/<agent>/wire.jsonl in ~/.kimi-code (the Kimi CLI: sessions/<hash>/<id>/wire.jsonl in ~/.kimi)",
        ),
        Source::Cursor => (
            "Cursor's chats and agent (`~/.config/Cursor/User`, `XDG_CONFIG_HOME`) and its command-line agent (`~/.cursor/chats`)",
            "Cursor keeps globalStorage/state.vscdb in its User folder (~/.config/Cursor/User), its agent chats/<hash>/<id>/store.db in ~/.cursor",
        ),
        Source::Zed => (
            "Zed's agent panel (`~/.local/share/zed/threads`, `XDG_DATA_HOME`)",
            "Zed keeps threads/threads.db in its data folder (~/.local/share/zed)",
        ),
        Source::VsCode => (
            "VS Code's chat, GitHub Copilot Chat (`~/.config/Code/User`, `XDG_CONFIG_HOME`)",
            "VS Code keeps workspaceStorage/<workspace>/chatSessions in its User folder (~/.config/Code/User)",
        ),
        Source::Crush => (
            "Crush (each project's `.crush/crush.db`, as `~/.local/share/crush/projects.json` lists them; `CRUSH_GLOBAL_DATA`)",
            "Crush keeps .crush/crush.db in each project, listed in projects.json in ~/.local/share/crush",
        ),
        Source::Kiro => (
            "Kiro CLI and the Amazon Q Developer CLI (`~/.local/share/kiro-cli`, `~/.local/share/amazon-q`, `XDG_DATA_HOME`, `~/.kiro/sessions/cli`, `KIRO_HOME`)",
            "Kiro CLI keeps data.sqlite3 in ~/.local/share/kiro-cli (Amazon Q's in ~/.local/share/amazon-q), and from 2.0 sessions/cli/*.jsonl in ~/.kiro",
        ),
        Source::Continue => (
            "Continue (`~/.continue/sessions`, `CONTINUE_GLOBAL_DIR`)",
            "Continue keeps sessions/<id>.json in ~/.continue",
        ),
        Source::Aider => (
            "Aider (`.aider.chat.history.md` in each project, found under the home folder; `AIDER_CHAT_HISTORY_FILE`)",
            "Aider keeps .aider.chat.history.md in each project's folder (give the folders: scribe import --from aider ~/code)",
        ),
        Source::Vibe => (
            "Mistral Vibe (`~/.vibe/logs/session`, `VIBE_HOME`, `XDG_CONFIG_HOME`)",
            "Mistral Vibe keeps logs/session/session_<start>_<id>/messages.jsonl in ~/.vibe",
        ),
        Source::OpenHands => (
            "OpenHands (`~/.openhands/conversations`)",
            "OpenHands keeps conversations/<id>/base_state.json and its events/ in ~/.openhands",
        ),
    };
    Described { help, keeps }
}

/// What `--from` was asked to do.
#[derive(Debug)]
pub struct HistoryArgs {
    /// The agent(s).
    pub from: From,
    /// Files or directories to read instead of the default locations (one agent only).
    pub paths: Vec<PathBuf>,
    /// Say what would be imported; write nothing.
    pub dry_run: bool,
    /// Only sessions active since then (ms).
    pub since: Option<i64>,
    /// Print the summary as JSON.
    pub json: bool,
    /// Keep following the sources.
    pub watch: bool,
    /// Prices usage the agents do not price themselves (the user's catalog file applied).
    pub catalog: ModelCatalog,
}

#[derive(Serialize)]
struct Report<'a> {
    dry_run: bool,
    sources: Vec<SourceJson<'a>>,
}

/// One source in `--json` output (the CLI's own shape, documented in the README).
#[derive(Serialize)]
struct SourceJson<'a> {
    source: &'a str,
    locations: &'a [PathBuf],
    files: u64,
    files_read: u64,
    files_unchanged: u64,
    files_too_old: u64,
    records: u64,
    skipped: &'a std::collections::BTreeMap<String, u64>,
    malformed: Vec<Problem<'a>>,
    failed: Vec<Problem<'a>>,
    failed_sessions: Vec<Problem<'a>>,
    sessions_created: u64,
    sessions_updated: u64,
    messages_inserted: u64,
    messages_merged: u64,
    messages_replayed: u64,
    tool_results: u64,
    tokens: Tokens,
    cost_usd: f64,
    unpriced_messages: u64,
    repriced_sessions: u64,
    repriced_messages: u64,
    repriced_cost_usd: f64,
}

/// A malformed line or a file that could not be read.
#[derive(Serialize)]
struct Problem<'a> {
    path: &'a str,
    line: Option<u64>,
    error: &'a str,
}

/// A PATH the user named must be there (a typo otherwise reads as "no history found" with
/// exit 0); `--watch` may wait for a location that does not exist yet. Checked before the
/// database is opened, so a typo creates no database either.
pub fn check_paths(args: &HistoryArgs) -> Result<(), CliError> {
    if args.watch {
        return Ok(());
    }
    for path in &args.paths {
        if let Err(source) = std::fs::metadata(path) {
            return Err(CliError::ReadFile {
                path: path.clone(),
                source,
            });
        }
    }
    Ok(())
}

/// Runs `scribe import --from …` (its PATHs checked by [`check_paths`]).
pub fn run(args: HistoryArgs, ctx: &Context) -> Result<(), CliError> {
    let env = Env::from_process();
    let targets: Vec<(Source, Vec<PathBuf>)> = args
        .from
        .sources()
        .into_iter()
        .map(|source| {
            let roots = if args.paths.is_empty() {
                sources::importer(source).default_roots(&env)
            } else {
                args.paths.clone()
            };
            (source, roots)
        })
        .collect();
    // Ctrl-C stops an import between files (what was taken is stored) and a watch between
    // imports, and the command says what it stored.
    let interrupt = Interrupt::catch();
    let options = Options {
        since: args.since,
        stop: Some(interrupt.flag()),
        pricer: Pricer::new(args.catalog.clone()),
        ..Options::default()
    };
    // Watching starts before the first import, so nothing written during it is missed.
    let watch = args
        .watch
        .then(|| watcher(&targets).stop_on(interrupt.flag()));
    let mut sink: Box<dyn Sink> = if args.dry_run {
        Box::new(DryRunSink::new(Some(ctx.store.clone())))
    } else {
        Box::new(StoreSink::new(ctx.store.clone()))
    };
    let summaries = once(&targets, &options, sink.as_mut(), !args.json)?;
    let mut out = anstream::stdout().lock();
    if args.json && !args.watch {
        let report = Report {
            dry_run: args.dry_run,
            sources: summaries.iter().map(source_json).collect(),
        };
        json::print(&mut out, &report)?;
    } else {
        for s in &summaries {
            write!(out, "{}", human(s, args.dry_run))?;
        }
    }
    // Ctrl-C that came when every file was taken (while the last agent's search indexes
    // were built) left nothing undone.
    let left = summaries.iter().any(|s| s.stopped) || summaries.len() < targets.len();
    if left && interrupt.happened() {
        return Err(stopped(&summaries, targets.len(), args.dry_run));
    }
    let Some(watch) = watch else {
        // The report lists what failed; the exit status says that something did, for
        // scripts (as `scribe import FILE` does for a session that failed).
        let failed: usize = summaries.iter().map(|s| s.failed.len()).sum();
        let sessions: usize = summaries.iter().map(|s| s.failed_sessions.len()).sum();
        if failed + sessions > 0 {
            return Err(CliError::ImportFilesFailed {
                failed,
                total: summaries.iter().map(|s| s.files).sum(),
                sessions,
            });
        }
        // PATHs the user named that hold nothing this agent reads are a mistake (another
        // agent's files, a file of another kind), not an empty history.
        if let Some(s) = summaries
            .iter()
            .find(|s| !args.paths.is_empty() && s.files == 0)
        {
            return Err(CliError::NoHistoryIn {
                agent: s.source.clone(),
                paths: args
                    .paths
                    .iter()
                    .map(|p| p.display().to_string())
                    .collect::<Vec<_>>()
                    .join(", "),
                keeps: keeps(&s.source),
            });
        }
        return Ok(());
    };
    let how = if watch.notifying() {
        "file-system notifications".to_owned()
    } else {
        format!("looking every {} ms", poll().as_millis())
    };
    writeln!(out, "watching for new records ({how}; Ctrl-C to stop)…")?;
    out.flush()?;
    // What the watch stored, as counts: a watch may run for days.
    let mut watched = Stored::default();
    while !interrupt.happened() {
        watch.wait();
        if interrupt.happened() {
            break;
        }
        let summaries = once(&targets, &options, sink.as_mut(), false)?;
        for s in summaries.iter().filter(|s| changed(s)) {
            if args.json {
                json::print_line(&mut out, &source_json(s))?;
            } else {
                write!(out, "{}\n{}", watch_line(s), problem_lines(s))?;
            }
            out.flush()?;
        }
        watched.add(&summaries);
    }
    Err(watch_stopped(&watched, args.dry_run))
}

/// What an agent's history looks like, for a PATH that held none of it.
fn keeps(source: &str) -> &'static str {
    source
        .parse::<Source>()
        .map_or("see `scribe import --help`", |s| described(s).keeps)
}

/// How often `--watch` polls where notifications do not reach.
fn poll() -> Duration {
    std::env::var(POLL_VAR)
        .ok()
        .and_then(|v| v.trim().parse::<u64>().ok())
        .filter(|ms| *ms > 0)
        .map_or(watch::POLL, Duration::from_millis)
}

/// A watch over every location the targets read.
fn watcher(targets: &[(Source, Vec<PathBuf>)]) -> Watch {
    let roots: Vec<PathBuf> = targets
        .iter()
        .flat_map(|(source, roots)| {
            let importer = scribe_import::sources::importer(*source);
            roots.iter().map(|root| importer.watch_root(root))
        })
        .collect();
    let notify = std::env::var(NOTIFY_VAR).map_or(true, |v| v.trim() != "0");
    Watch::new(&roots, poll(), notify)
}

fn problems(list: &[scribe_import::Malformed]) -> Vec<Problem<'_>> {
    list.iter()
        .map(|m| Problem {
            path: &m.path,
            line: m.line,
            error: &m.error,
        })
        .collect()
}

fn source_json(s: &SourceSummary) -> SourceJson<'_> {
    let w = &s.written;
    SourceJson {
        source: &s.source,
        locations: &s.roots,
        files: s.files,
        files_read: s.files_read,
        files_unchanged: s.files_unchanged,
        files_too_old: s.files_too_old,
        records: s.records,
        skipped: &s.skipped,
        malformed: problems(&s.malformed),
        failed: problems(&s.failed),
        failed_sessions: problems(&s.failed_sessions),
        sessions_created: w.sessions_created,
        sessions_updated: w.sessions_updated,
        messages_inserted: w.messages_inserted,
        messages_merged: w.messages_merged,
        messages_replayed: w.messages_replayed,
        tool_results: w.parts_updated,
        tokens: Tokens::from(&s.written.usage.tokens),
        cost_usd: usd(s.written.usage.cost_usd),
        unpriced_messages: s.written.usage.unpriced,
        repriced_sessions: s.repriced.sessions,
        repriced_messages: s.repriced.messages,
        repriced_cost_usd: usd(s.repriced.cost_usd),
    }
}

fn changed(s: &SourceSummary) -> bool {
    let w = &s.written;
    w.messages_inserted + w.messages_merged + w.parts_updated + w.sessions_created > 0
        || !s.malformed.is_empty()
        || !s.failed.is_empty()
        || !s.failed_sessions.is_empty()
        || s.repriced.messages > 0
}

/// Imports every target once, with a progress bar per source on a terminal.
fn once(
    targets: &[(Source, Vec<PathBuf>)],
    options: &Options,
    sink: &mut dyn Sink,
    progress: bool,
) -> Result<Vec<SourceSummary>, CliError> {
    let mut summaries = Vec::new();
    for (source, roots) in targets {
        let mut bar = None;
        let mut on_event = |event: Event<'_>| match event {
            Event::Found(n) if progress => bar = Some(ui::progress(n, source.name())),
            Event::Done(_) => {
                if let Some(bar) = &bar {
                    bar.inc(1);
                }
            }
            Event::Found(_) => {}
            // A database read a batch at a time: its one file may take minutes.
            Event::Stored { path, messages } if progress => {
                let bar = bar.get_or_insert_with(|| ui::spinner(source.name()));
                if bar.is_hidden() {
                    *bar = ui::spinner(source.name());
                }
                let file = path.file_name().unwrap_or(path.as_os_str());
                bar.set_message(format!(
                    "{}: {} messages of {} stored",
                    source.name(),
                    ui::grouped(i64::try_from(messages).unwrap_or(i64::MAX)),
                    ui::visible(&file.to_string_lossy())
                ));
            }
            Event::Stored { .. } => {}
            // The store sink builds the search indexes once the files are read.
            Event::Indexed { done, total } => {
                if let Some(bar) = &bar {
                    if bar.length() != Some(total) {
                        bar.set_length(total);
                        bar.set_message("indexing");
                    }
                    bar.set_position(done);
                }
            }
        };
        let summary = import(
            sink,
            sources::importer(*source),
            roots,
            options,
            &mut on_event,
        )?;
        if let Some(bar) = bar {
            bar.finish_and_clear();
        }
        let stopped = summary.stopped;
        summaries.push(summary);
        if stopped || options.stopped() {
            break;
        }
    }
    Ok(summaries)
}

/// What a one-off import that Ctrl-C stopped says after its report (exit status 130):
/// what it stored, and how much it did not reach (files of the agent it was reading,
/// agents of `--from all` it did not start).
fn stopped(summaries: &[SourceSummary], agents: usize, dry_run: bool) -> CliError {
    let n = |v: u64| i64::try_from(v).unwrap_or(i64::MAX);
    let mut left = Vec::new();
    for s in summaries.iter().filter(|s| s.stopped) {
        let reached = s.files_read + s.files_unchanged + s.files_too_old;
        left.push(format!(
            "{} of {} files of {} not reached",
            ui::grouped(n(s.files.saturating_sub(reached))),
            ui::grouped(n(s.files)),
            s.source
        ));
    }
    let not_started = agents.saturating_sub(summaries.len());
    if not_started > 0 {
        left.push(format!(
            "{} not started",
            ui::plural(n(not_started as u64), "more agent")
        ));
    }
    let mut all = Stored::default();
    all.add(summaries);
    let mut text = all.describe(dry_run);
    if !left.is_empty() {
        text.push_str(&format!(", {}", left.join(", ")));
    }
    text.push_str("; importing again reads the rest");
    CliError::Interrupted(text)
}

/// What a watch that Ctrl-C ended says (exit status 130): what it stored after its first
/// import (which reported itself), and whether the import in flight was cut short.
fn watch_stopped(watched: &Stored, dry_run: bool) -> CliError {
    let mut text = format!(
        "stopped watching; {} while watching",
        watched.describe(dry_run)
    );
    if watched.cut_short {
        text.push_str(
            "; the import in flight stopped between files, importing again reads the rest",
        );
    }
    CliError::Interrupted(text)
}

/// Sessions and new messages stored (or, in a dry run, that would be), summed over
/// imports, and whether one was stopped between files.
#[derive(Default)]
struct Stored {
    sessions: u64,
    messages: u64,
    cut_short: bool,
}

impl Stored {
    fn add(&mut self, summaries: &[SourceSummary]) {
        for s in summaries {
            let w = &s.written;
            self.sessions = self
                .sessions
                .saturating_add(w.sessions_created + w.sessions_updated);
            self.messages = self.messages.saturating_add(w.messages_inserted);
            self.cut_short |= s.stopped;
        }
    }

    /// "N sessions (M messages new) stored" ("would be imported" for a dry run).
    fn describe(&self, dry_run: bool) -> String {
        let n = |v: u64| i64::try_from(v).unwrap_or(i64::MAX);
        let verb = if dry_run {
            "would be imported"
        } else {
            "stored"
        };
        format!(
            "{} ({} new) {verb}",
            ui::plural(n(self.sessions), "session"),
            ui::plural(n(self.messages), "message"),
        )
    }
}

fn watch_line(s: &SourceSummary) -> String {
    let w = &s.written;
    format!(
        "{} {}: {} new, {} updated, {} tool results",
        ui::date_time(scribe_db::now_ms()),
        s.source,
        ui::plural(
            i64::try_from(w.messages_inserted).unwrap_or(i64::MAX),
            "message"
        ),
        ui::grouped(i64::try_from(w.messages_merged).unwrap_or(i64::MAX)),
        ui::grouped(i64::try_from(w.parts_updated).unwrap_or(i64::MAX))
    )
}

/// The human summary of one source.
fn human(s: &SourceSummary, dry_run: bool) -> String {
    let mut text = String::new();
    let roots: Vec<String> = s.roots.iter().map(|r| r.display().to_string()).collect();
    let head = format!(
        "{:<12} {}",
        s.source,
        if roots.is_empty() {
            "(no location)".to_owned()
        } else {
            roots.join(", ")
        }
    );
    text.push_str(&paint(style::HEADER, head));
    text.push('\n');
    if s.files == 0 {
        text.push_str("  no history found\n");
        return text;
    }
    let w = &s.written;
    let n = |v: u64| i64::try_from(v).unwrap_or(i64::MAX);
    text.push_str(&format!(
        "  {} ({} read, {} unchanged{})\n",
        ui::plural(n(s.files), "file"),
        ui::grouped(n(s.files_read)),
        ui::grouped(n(s.files_unchanged)),
        if s.files_too_old > 0 {
            format!(", {} older than --since", ui::grouped(n(s.files_too_old)))
        } else {
            String::new()
        }
    ));
    let verb = if dry_run { "would import" } else { "imported" };
    if w.messages_inserted + w.messages_merged + w.parts_updated + w.sessions_created == 0
        && w.sessions_updated == 0
    {
        text.push_str("  nothing new\n");
    } else {
        let mut bits = vec![format!(
            "{} ({} new)",
            ui::plural(n(w.sessions_created + w.sessions_updated), "session"),
            ui::grouped(n(w.sessions_created))
        )];
        bits.push(format!(
            "{} ({} new)",
            ui::plural(n(w.messages_inserted + w.messages_merged), "message"),
            ui::grouped(n(w.messages_inserted))
        ));
        if w.parts_updated > 0 {
            bits.push(ui::plural(n(w.parts_updated), "later tool result"));
        }
        if w.messages_replayed > 0 {
            bits.push(format!(
                "{} already held by the session they were replayed from",
                ui::plural(n(w.messages_replayed), "message")
            ));
        }
        text.push_str(&format!("  {verb} {}\n", bits.join(", ")));
    }
    if s.repriced.messages > 0 {
        text.push_str(&format!(
            "  {} {} of {} imported before their models had a price: {}\n",
            if dry_run { "would price" } else { "priced" },
            ui::plural(n(s.repriced.messages), "message"),
            ui::plural(n(s.repriced.sessions), "session"),
            ui::dollars(s.repriced.cost_usd)
        ));
    }
    let counted = &s.written.usage;
    if !counted.tokens.is_zero() {
        text.push_str(&format!(
            "  {} tokens (input {}, output {}, cache read {}, cache write {}, reasoning {}), {}\n",
            ui::grouped(counted.tokens.total()),
            ui::grouped(counted.tokens.input),
            ui::grouped(counted.tokens.output),
            ui::grouped(counted.tokens.cache_read),
            ui::grouped(counted.tokens.cache_write),
            ui::grouped(counted.tokens.reasoning),
            if counted.unpriced > 0 {
                format!(
                    "{} + unknown ({} of models without a price)",
                    ui::dollars(counted.cost_usd),
                    ui::plural(
                        i64::try_from(counted.unpriced).unwrap_or(i64::MAX),
                        "message"
                    )
                )
            } else {
                ui::dollars(counted.cost_usd)
            }
        ));
    } else if counted.cost_usd > 0.0 {
        // A cost the agent reports without the tokens it was for (Crush's).
        text.push_str(&format!(
            "  {}, as the agent counted it (it keeps no token counts)\n",
            ui::dollars(counted.cost_usd)
        ));
    }
    let skipped: u64 = s.skipped.values().sum();
    if skipped > 0 {
        let mut kinds: Vec<(&String, &u64)> = s.skipped.iter().collect();
        kinds.sort_by(|a, b| b.1.cmp(a.1).then(a.0.cmp(b.0)));
        let top: Vec<String> = kinds
            .iter()
            .take(5)
            .map(|(k, v)| format!("{k} {}", ui::grouped(n(**v))))
            .collect();
        text.push_str(&format!(
            "  skipped {} (metadata or unknown types: {}{})\n",
            ui::plural(n(skipped), "record"),
            top.join(", "),
            if kinds.len() > 5 { ", …" } else { "" }
        ));
    }
    text.push_str(&problem_lines(s));
    text
}

/// The malformed records, failed files and failed sessions of one source, a line each
/// (after the summary of a one-off import, after the line of a watch's import).
fn problem_lines(s: &SourceSummary) -> String {
    let mut text = String::new();
    for m in s.malformed.iter().take(MALFORMED_SHOWN) {
        let at = m.line.map(|l| format!(":{l}")).unwrap_or_default();
        text.push_str(&paint(
            style::ERROR,
            format!("  malformed {}{at}: {}\n", m.path, m.error),
        ));
    }
    if s.malformed.len() > MALFORMED_SHOWN {
        text.push_str(&format!(
            "  … and {} more malformed (see --json)\n",
            s.malformed.len() - MALFORMED_SHOWN
        ));
    }
    for f in &s.failed {
        text.push_str(&paint(
            style::ERROR,
            format!("  failed {}: {}\n", f.path, f.error),
        ));
    }
    for f in &s.failed_sessions {
        text.push_str(&paint(
            style::ERROR,
            format!("  failed a session of {}: {}\n", f.path, f.error),
        ));
    }
    text
}

#[cfg(test)]
mod tests {
    use scribe_import::SourceSummary;

    #[test]
    fn every_count_of_the_summary_is_grouped_alike() {
        let mut s = SourceSummary {
            source: "claude-code".to_owned(),
            files: 1500,
            files_read: 1200,
            files_unchanged: 250,
            files_too_old: 50,
            ..SourceSummary::default()
        };
        s.written.sessions_created = 1200;
        s.written.messages_inserted = 13_500;
        s.written.messages_merged = 2000;
        s.skipped.insert("progress".to_owned(), 4000);
        let text = super::human(&s, false);
        assert!(
            text.contains("1,500 files (1,200 read, 250 unchanged, 50 older than --since)"),
            "{text}"
        );
        assert!(
            text.contains("1,200 sessions (1,200 new), 15,500 messages (13,500 new)"),
            "{text}"
        );
        assert!(text.contains("progress 4,000"), "{text}");
        assert!(
            super::watch_line(&s).ends_with("13,500 messages new, 2,000 updated, 0 tool results"),
            "{}",
            super::watch_line(&s)
        );
    }
}
