//! Every fixture imports, per-session token totals equal ccusage's (or differ where the
//! note says why Scribe is right), the mapping is faithful, and a second import changes
//! nothing.
//!
//! The expected figures were produced by ccusage 20.0.24 over the same files laid out as a
//! home directory (`crates/import/tests/fixtures` copied to `$H`, the SQL dumps loaded with
//! `sqlite3`), with:
//!
//! ```text
//! npm install ccusage@20.0.24 @ccusage/ccusage-linux-x64@20.0.24   # in a scratch dir
//! H=/tmp/cchome   # .claude ← claude, .codex ← codex, .local/share/opencode ← opencode
//!                 # (+ opencode.db), .hermes ← hermes (+ state.db), .gemini ← gemini,
//!                 # .local/share/goose/sessions/sessions.db ← goose/sessions.sql,
//!                 # .copilot ← copilot, .pi/agent/sessions ← pi/sessions,
//!                 # .openclaw ← openclaw (+ its agent database), .local/share/amp ← amp,
//!                 # .factory/sessions ← droid/sessions,
//!                 # .local/share/kilo/kilo.db ← kilo/kilo.sql, .qwen ← qwen,
//!                 # .kimi-code ← kimi/kimi-code, .kimi ← kimi/kimi
//! for a in claude codex opencode hermes gemini goose copilot pi openclaw amp droid kilo qwen kimi; do
//!   env -i PATH=$PATH HOME=$H npx ccusage $a session --json --offline
//! done
//! ```
//!
//! ccusage reports `inputTokens` (without cache), `outputTokens`, `cacheCreationTokens`,
//! `cacheReadTokens` per session. Scribe keeps reasoning apart from output; Claude Code
//! and Codex count reasoning inside their output, so for them ccusage's output is Scribe's
//! output + reasoning. Hermes and Gemini count it apart (Hermes totals add it separately),
//! and OpenCode reports it apart too (0 in these fixtures); Goose keeps none; pi and
//! OpenClaw count it inside their output; Droid keeps it apart (ccusage counts it in its
//! total and prices it as output); Amp's threads here have none. Qwen Code's figures are
//! compared in `tests/qwen.rs` (ccusage counts its cached prompt inside the input too), and
//! Kimi's in `tests/kimi.rs`. ccusage reads neither Cursor's nor Zed's database: their
//! figures are checked against the fixtures' own counts in `tests/cursor.rs` and
//! `tests/zed.rs`. VS Code's chat keeps no usage to compare (`tests/vscode.rs`), and Crush
//! only its reported cost (`tests/crush.rs`), which ccusage does not read; Kiro's and Amazon
//! Q's databases keep none, and ccusage reads neither them nor Kiro CLI 2's sessions, whose
//! counts are checked in `tests/kiro.rs`; Continue keeps none (`tests/continue_dev.rs`). Aider's
//! counts are its own rounded report's (`tests/aider.rs`), which ccusage does not read, and
//! Mistral Vibe's its sessions' own stats (`tests/vibe.rs`), and OpenHands' its
//! conversations' own metrics (`tests/openhands.rs`).

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::path::PathBuf;

use common::*;
use scribe_import::Source;
use scribe_message::{Part, ToolState};
use scribe_session::SessionKind;

/// (input, output as ccusage counts it, cache write, cache read).
type Figures = (i64, i64, i64, i64);

fn roots(home: &std::path::Path, source: Source) -> Vec<PathBuf> {
    let env = scribe_import::Env {
        home: Some(home.to_owned()),
        vars: Default::default(),
    };
    scribe_import::sources::importer(source).default_roots(&env)
}

fn import_all(
    db: &std::sync::Arc<scribe_db::Database>,
    home: &std::path::Path,
) -> Vec<scribe_import::SourceSummary> {
    Source::ALL
        .into_iter()
        .map(|s| run(db, s, &roots(home, s)))
        .collect()
}

fn figures(
    db: &std::sync::Arc<scribe_db::Database>,
    id: &str,
    reasoning_in_output: bool,
) -> Figures {
    let t = session(db, id).tokens;
    let output = if reasoning_in_output {
        t.output + t.reasoning
    } else {
        t.output
    };
    (t.input, output, t.cache_write, t.cache_read)
}

#[test]
fn every_fixture_imports_without_failures_or_malformed_lines() {
    let dir = tempfile::tempdir().unwrap();
    let home = home(dir.path());
    let db = scribe_db(dir.path());
    for s in import_all(&db, &home) {
        assert!(s.failed.is_empty(), "{}: {:?}", s.source, s.failed);
        assert!(s.malformed.is_empty(), "{}: {:?}", s.source, s.malformed);
        assert!(
            s.files > 0 && s.files == s.files_read,
            "{}: {s:?}",
            s.source
        );
        assert!(s.written.messages_inserted > 0, "{}", s.source);
    }
    let all = sessions(&db);
    assert_eq!(
        all.len(),
        92,
        "{:?}",
        all.iter().map(|s| &s.id).collect::<Vec<_>>()
    );
    for s in &all {
        assert!(
            [
                "claude-code",
                "codex",
                "opencode",
                "hermes",
                "gemini",
                "cline",
                "roo-code",
                "kilo-code",
                "goose",
                "copilot",
                "pi",
                "openclaw",
                "amp",
                "droid",
                "kilo",
                "grok",
                "qwen",
                "antigravity",
                "kimi",
                "cursor",
                "zed",
                "vscode",
                "crush",
                "kiro",
                "continue",
                "aider",
                "mistral-vibe",
                "openhands"
            ]
            .contains(&s.source.as_str()),
            "{}",
            s.source
        );
    }
}

#[test]
fn token_totals_equal_ccusage_per_session() {
    let dir = tempfile::tempdir().unwrap();
    let home = home(dir.path());
    let db = scribe_db(dir.path());
    import_all(&db, &home);
    // (session, reasoning counted in output by the source, ccusage's figures)
    let expected: [(&str, bool, Figures); 27] = [
        // Claude Code: ccusage session --json (claude)
        (
            "1af7fc5e-8455-4414-9ccd-011d40f70b2a",
            true,
            (93, 953, 12_698, 103_219),
        ),
        ("agent-test-hash-123", true, (100, 10, 0, 0)),
        ("small", true, (10, 5, 0, 0)),
        // Codex
        (
            "019c8a70-dda7-7f33-98ea-f30553347322",
            true,
            (31_013, 431, 0, 3_456),
        ),
        (
            "01a0f21c-5c40-7f72-9aa9-ef0b43570680",
            true,
            (170, 14, 0, 100),
        ),
        (
            "019fc8be-3658-7ca3-9e29-000000000000",
            true,
            (12_757, 81, 0, 3_584),
        ),
        ("session-alpha", true, (2_750, 425, 0, 750)),
        // OpenCode (the database and the legacy JSON storage)
        ("ses_f0de500f8ffeXvsiYJDOg5JtrU", true, (170, 14, 0, 100)),
        ("s_stage0_large", true, (120, 16, 0, 0)),
        // Hermes (per-session totals; reasoning 40 is apart, in ccusage's total only)
        ("20260101_100000_a1b2c3", false, (1_200, 300, 800, 5_000)),
        ("20260101_100500_sub001", false, (150, 60, 0, 0)),
        ("20260101_101000_d4e5f6", false, (400, 120, 0, 2_500)),
        // Gemini CLI
        ("gemini_stage0_jsonl", false, (12_422, 228, 0, 11_502)),
        ("session-2026-01-16T18-34-3739ef95", false, (10, 5, 0, 0)),
        // Goose (per-session totals; no cache split)
        ("20251120_1", false, (24_310, 1_204, 0, 0)),
        ("20251121_1", false, (52_000, 3_100, 0, 0)),
        ("20251122_1", false, (900, 120, 0, 0)),
        // Droid (per-session totals; thinking apart from output)
        (
            "6f0b2d1e-4c3a-4e5b-9a8d-1c2e3f4a5b6c",
            false,
            (1_840, 920, 6_400, 38_200),
        ),
        // Kilo CLI (OpenCode's database; reasoning apart)
        (
            "ses_0a1b2c3d4e5fKiloCliSess01",
            false,
            (1_260, 395, 2_400, 18_300),
        ),
        // pi and OpenClaw (a reset's transcript included, and the sessions of its agent
        // database: a conversation, its continuation, a sub-agent)
        ("019e19b4-eb48-746a-aa6b-8dfcfa37954b", true, (40, 19, 0, 0)),
        (
            "019f3a10-5c2e-7b44-9d1a-6e0f2b7c8d91",
            true,
            (2_400, 630, 4_500, 17_300),
        ),
        (
            "019f3a22-1b7d-7c10-8e4f-2a9c5d3e6f70",
            true,
            (40, 30, 120, 4_600),
        ),
        (
            "5b8e1f3c-9a2d-4c6e-8f10-3d7a2b9c4e51",
            true,
            (3_500, 100, 0, 3_100),
        ),
        (
            "1c4d7a2e-6b3f-4e8a-9d05-7f2c1b8a3e60",
            true,
            (2_900, 12, 0, 0),
        ),
        (
            "7e2a9c41-3f0b-4d8e-a6c5-1b9d2e4f6a83",
            true,
            (3_300, 420, 0, 1_200),
        ),
        (
            "7e2a9c41-3f0b-4d8e-a6c5-1b9d2e4f6a84",
            true,
            (900, 70, 0, 400),
        ),
        (
            "7e2a9c41-3f0b-4d8e-a6c5-1b9d2e4f6a85",
            true,
            (400, 20, 0, 0),
        ),
    ];
    for (id, inclusive, want) in expected {
        assert_eq!(figures(&db, id, inclusive), want, "{id}");
    }
    assert_eq!(session(&db, "20260101_100000_a1b2c3").tokens.reasoning, 40);
}

/// Copilot CLI tells usage per model per session lifecycle; Scribe puts each model's on
/// its last reply, and a model with no reply in the log (one working in the background)
/// in a task session of its own. A session with those task sessions counts what ccusage
/// counts for the session (its `outputTokens` hold the reasoning), and costs the same.
#[test]
fn copilot_sessions_with_their_background_usage_equal_ccusage() {
    let dir = tempfile::tempdir().unwrap();
    let home = home(dir.path());
    let db = scribe_db(dir.path());
    run(&db, Source::Copilot, &roots(&home, Source::Copilot));
    for (id, want, cost) in [
        (
            "7c1e2a90-3b5d-4f61-9a2e-5d8c0b4f1e37",
            (18_200, 1_930, 6_000, 34_000),
            0.093_5,
        ),
        ("copilot_stage0_small", (200, 50, 0, 800), 0.001_2),
    ] {
        let (got, spent) = family_figures(&db, id);
        assert_eq!(got, want, "{id}");
        assert!((spent - cost).abs() < 1e-12, "{id}: {spent} != {cost}");
    }
}

/// What session `id` and its child sessions count together, as ccusage counts the
/// session (output holding the reasoning), and their estimated cost; every one of them
/// with usage estimated.
fn family_figures(db: &std::sync::Arc<scribe_db::Database>, id: &str) -> (Figures, f64) {
    let (mut got, mut spent) = ((0, 0, 0, 0), 0.0);
    for s in sessions(db)
        .iter()
        .filter(|s| s.id == id || s.parent_session_id.as_deref() == Some(id))
    {
        let t = s.tokens;
        got.0 += t.input;
        got.1 += t.output + t.reasoning;
        got.2 += t.cache_write;
        got.3 += t.cache_read;
        spent += s.estimated_cost_usd;
        if !t.is_zero() {
            assert_eq!(s.cost_status.as_deref(), Some("estimated"), "{}", s.id);
        }
    }
    (got, spent)
}

/// Amp's usage ledger bills every model call: a thread's replies with the child session of
/// its title generation (usage no reply carries) count what ccusage counts for the thread,
/// and cost the same; a thread without a ledger counts its replies' usage, as ccusage does.
#[test]
fn amp_threads_with_their_ledger_equal_ccusage() {
    let dir = tempfile::tempdir().unwrap();
    let home = home(dir.path());
    let db = scribe_db(dir.path());
    run(&db, Source::Amp, &roots(&home, Source::Amp));
    for (id, want, cost) in [
        (
            "T-3f6c2a1e-8b4d-4e7a-9c15-2d8e0b7f4a63",
            (477, 557, 5_800, 64_700),
            0.050_126,
        ),
        (
            "T-9a1d7c55-0e3b-4f28-b6a4-71c2e8d05f19",
            (1_910, 100, 1_350, 1_200),
            0.021_087_5,
        ),
    ] {
        let (got, spent) = family_figures(&db, id);
        assert_eq!(got, want, "{id}");
        assert!((spent - cost).abs() < 1e-12, "{id}: {spent} != {cost}");
    }
}

/// A compaction summary an agent wrote is where the conversation it sends from then on
/// starts: every imported session holding one points at its latest
/// (`summary_message_id`), as Scribe's own compaction records it, so Scribe continuing an
/// imported session sends the summary and what follows it, not the history the agent had
/// compacted away. Reading the files again, or an older summary after a newer one, leaves
/// the pointer where it is.
#[test]
fn an_imported_summary_is_where_the_conversation_sent_starts() {
    let dir = tempfile::tempdir().unwrap();
    let home = home(dir.path());
    let db = scribe_db(dir.path());
    import_all(&db, &home);
    let service = scribe_session::SessionService::new(std::sync::Arc::clone(&db));
    let (mut pointed, mut shorter) = (Vec::new(), 0);
    for s in sessions(&db) {
        let msgs = messages(&db, &s.id);
        let latest = msgs
            .iter()
            .filter(|m| m.is_summary)
            .max_by(|a, b| (a.created_at, &a.id).cmp(&(b.created_at, &b.id)));
        assert_eq!(
            s.summary_message_id.as_deref(),
            latest.map(|m| m.id.as_str()),
            "{}",
            s.id
        );
        let Some(summary) = latest else {
            continue;
        };
        pointed.push(s.source.clone());
        // What a model is sent: the summary (as the user's), then what followed it.
        let sent = service
            .conversation(
                &s.id,
                scribe_message::ConversationOptions {
                    from_summary: true,
                    ..Default::default()
                },
            )
            .unwrap();
        let whole = service.conversation(&s.id, Default::default()).unwrap();
        let said = summary
            .parts
            .iter()
            .find_map(|p| match &p.part {
                Part::Text(t) => Some(t.text.clone()),
                _ => None,
            })
            .unwrap();
        let first = serde_json::to_value(&sent[0]).unwrap();
        assert_eq!(first["role"], "user", "{}: {first}", s.id);
        assert!(
            first
                .to_string()
                .contains(&serde_json::to_string(&said).unwrap()[1..20]),
            "{}: {first}",
            s.id
        );
        // Less than the whole history, unless the summary opens the session (a Hermes
        // compression's continuation).
        assert!(sent.len() <= whole.len(), "{}", s.id);
        shorter += usize::from(sent.len() < whole.len());
    }
    pointed.sort();
    pointed.dedup();
    assert_eq!(
        pointed,
        [
            "amp",
            "antigravity",
            "claude-code",
            "codex",
            "copilot",
            "crush",
            "goose",
            "hermes",
            "kiro",
            "mistral-vibe",
            "openclaw",
            "openhands",
            "pi",
            "qwen"
        ]
    );
    assert!(shorter >= 4, "{shorter}");
    let before = dump(&db);
    import_all(&db, &home);
    assert_same(&dump(&db), &before, "a second import");
}

/// The Kilo CLI keeps OpenCode's database under its own name: read as OpenCode's, its
/// replies' reported cost equals what ccusage sums, and it is found where Kilo keeps it.
#[test]
fn the_kilo_cli_database_reads_as_opencode_and_equals_ccusage() {
    let dir = tempfile::tempdir().unwrap();
    let home = home(dir.path());
    let kilo = scribe_import::sources::importer(Source::Kilo);
    let roots_with = |vars: &[(&str, &str)]| kilo.default_roots(&env(&home, vars));
    assert_eq!(roots_with(&[]), [home.join(".local/share/kilo")]);
    assert_eq!(
        roots_with(&[("KILO_DATA_DIR", "/a,/b")]),
        [PathBuf::from("/a"), PathBuf::from("/b")]
    );
    // Kilo's databases only, not OpenCode's beside them.
    let mut found = Vec::new();
    kilo.discover(&home.join(".local/share/kilo"), &mut found)
        .unwrap();
    assert_eq!(found, [home.join(".local/share/kilo/kilo.db")]);

    let db = scribe_db(dir.path());
    let s = run(&db, Source::Kilo, &roots(&home, Source::Kilo));
    assert!(s.failed.is_empty() && s.malformed.is_empty(), "{s:?}");
    let id = "ses_0a1b2c3d4e5fKiloCliSess01";
    let session = session(&db, id);
    assert_eq!(session.source, "kilo");
    assert_eq!(
        session.title.as_deref(),
        Some("Fix the cart total rounding")
    );
    assert_eq!(session.tokens.reasoning, 40);
    let cost = session.actual_cost_usd.unwrap_or_default();
    assert!((cost - 0.021_3).abs() < 1e-12, "{cost}");
    assert_eq!(session.cost_status.as_deref(), Some("reported"));
    let outcomes: Vec<(String, String)> = tool_outcomes(&db, id)
        .into_iter()
        .map(|(tool, state, _)| (tool, state))
        .collect();
    assert_eq!(
        outcomes,
        [
            ("read".into(), "completed".into()),
            ("edit".into(), "error".into()),
            ("edit".into(), "completed".into()),
        ]
    );
}

/// pi and OpenClaw write each reply's cost; Scribe keeps it as the reported cost, and
/// ccusage sums the same figures.
#[test]
fn pi_and_openclaw_costs_are_their_own_and_equal_ccusage() {
    let dir = tempfile::tempdir().unwrap();
    let home = home(dir.path());
    let db = scribe_db(dir.path());
    for source in [Source::Pi, Source::OpenClaw] {
        run(&db, source, &roots(&home, source));
    }
    for (id, want) in [
        ("019f3a10-5c2e-7b44-9d1a-6e0f2b7c8d91", 0.038_715),
        ("019f3a22-1b7d-7c10-8e4f-2a9c5d3e6f70", 0.002_4),
        ("5b8e1f3c-9a2d-4c6e-8f10-3d7a2b9c4e51", 0.001_152_5),
        ("1c4d7a2e-6b3f-4e8a-9d05-7f2c1b8a3e60", 0.000_749),
        ("7e2a9c41-3f0b-4d8e-a6c5-1b9d2e4f6a83", 0.016_56),
        ("7e2a9c41-3f0b-4d8e-a6c5-1b9d2e4f6a84", 0.003_87),
        ("7e2a9c41-3f0b-4d8e-a6c5-1b9d2e4f6a85", 0.000_5),
    ] {
        let s = session(&db, id);
        let cost = s.actual_cost_usd.unwrap_or_default();
        assert!((cost - want).abs() < 1e-12, "{id}: {cost} != {want}");
        assert!((s.estimated_cost_usd - want).abs() < 1e-12, "{id}");
        assert_eq!(s.cost_status.as_deref(), Some("reported"), "{id}");
    }
}

/// Costs the sources do not report are estimated from the built-in pricing catalog, and
/// equal ccusage's `costUSD` (the same runs as the token figures above) for every session
/// whose models both price. `609b44ad…` is left out: Scribe counts both of its calls (see
/// [`scribe_counts_both_calls_of_a_reused_message_id`]). Models whose prices the catalog's
/// sources disagree on (`claude-opus-5`, `gpt-5.6-luna`) and a fake model keep their
/// tokens with the cost unknown, never a guess.
#[test]
fn estimated_costs_equal_ccusage_per_session() {
    let dir = tempfile::tempdir().unwrap();
    let home = home(dir.path());
    let db = scribe_db(dir.path());
    import_all(&db, &home);
    let expected: [(&str, f64); 9] = [
        // claude-sonnet-4-20250514
        ("1af7fc5e-8455-4414-9ccd-011d40f70b2a", 0.093_157_2),
        ("agent-test-hash-123", 0.000_45),
        // gpt-5.3-codex; gpt-5.2-codex then gpt-5.3-codex
        ("019c8a70-dda7-7f33-98ea-f30553347322", 0.060_911_55),
        ("session-alpha", 0.010_893_75),
        // gemini-3-flash-preview
        ("gemini_stage0_jsonl", 0.007_470_1),
        ("session-2026-01-16T18-34-3739ef95", 0.000_02),
        // Goose: claude-sonnet-4-5-20250929; gpt-4o
        ("20251120_1", 0.090_99),
        ("20251121_1", 0.161),
        // Droid: custom:Claude-Sonnet-4.5-[Anthropic], its thinking priced as output
        ("6f0b2d1e-4c3a-4e5b-9a8d-1c2e3f4a5b6c", 0.057_93),
    ];
    for (id, want) in expected {
        let s = session(&db, id);
        assert!(
            (s.estimated_cost_usd - want).abs() < 1e-12,
            "{id}: {} != {want}",
            s.estimated_cost_usd
        );
        assert_eq!(s.cost_status.as_deref(), Some("estimated"), "{id}");
    }
    for id in [
        "small",
        "019fc8be-3658-7ca3-9e29-000000000000",
        "01a0f21c-5c40-7f72-9aa9-ef0b43570680",
        "20251122_1",
    ] {
        let s = session(&db, id);
        assert!(s.tokens.input > 0, "{id}");
        assert_eq!(s.estimated_cost_usd, 0.0, "{id}");
        assert_eq!(s.cost_status.as_deref(), Some("unknown"), "{id}");
    }
}

/// Where Scribe deliberately differs from ccusage.
///
/// `609b44ad…` was recorded against a fake model that gives two different API calls the
/// same `message.id` (`msg_1`) and no `requestId`. ccusage deduplicates on `message.id`
/// alone and keeps only the larger of the two (50 in, 6 out, 40 cache write, 100 cache
/// read). The two lines are separate calls: a user tool-result line stands between them,
/// their usage differs (120 in / 8 out, then 50 / 6 / 40 / 100), and Claude Code's own
/// `cost-state` line at the end of the file totals `inputTokens: 170, outputTokens: 14,
/// cacheCreationInputTokens: 40, cacheReadInputTokens: 100`. Scribe merges lines of one
/// response only while no user line intervenes, so it stores both calls and matches
/// Claude Code's own total.
///
/// Sessions ccusage does not list are not compared: those without usage
/// (`0a1b2c3d…`, its sub-agent, the sidechain of `small`, `s_stage0_small`) and the legacy
/// Hermes session logs (ccusage reads only `state.db`; the logs carry no usage).
#[test]
fn scribe_counts_both_calls_of_a_reused_message_id() {
    let dir = tempfile::tempdir().unwrap();
    let home = home(dir.path());
    let db = scribe_db(dir.path());
    run(&db, Source::ClaudeCode, &roots(&home, Source::ClaudeCode));
    let id = "609b44ad-7c18-4745-a70b-784281dce85e";
    assert_eq!(figures(&db, id, true), (170, 14, 40, 100));
    assert_eq!(session(&db, id).api_call_count, 2);
    // And its cost: 30 of the second call's 40 cache writes were kept for an hour, at
    // twice the input price ($6 a million for claude-sonnet-4-5, the others $3.75), which
    // is Claude Code's own `totalCostUSD` (ccusage prices them so too, for its one call).
    let cost = session(&db, id).estimated_cost_usd;
    assert!((cost - 0.000_967_5).abs() < 1e-12, "{cost}");
    let assistants: Vec<_> = messages(&db, id)
        .into_iter()
        .filter(|m| m.role == scribe_message::Role::Assistant)
        .collect();
    assert_eq!(assistants.len(), 2);
}

#[test]
fn a_second_import_changes_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let home = home(dir.path());
    let db = scribe_db(dir.path());
    import_all(&db, &home);
    let before = dump(&db);
    for s in import_all(&db, &home) {
        assert_eq!(s.files_read, 0, "{}: every file is unchanged", s.source);
        assert_eq!(s.files_unchanged, s.files, "{}", s.source);
        assert_eq!(s.written, Default::default(), "{}", s.source);
    }
    assert_eq!(dump(&db), before);
}

#[test]
fn reading_every_file_again_stores_nothing_twice() {
    // Forget what was read (as after a rewrite of every file): records are keyed by the
    // sources' own ids, so reading all of it again adds nothing.
    let dir = tempfile::tempdir().unwrap();
    let home = home(dir.path());
    let db = scribe_db(dir.path());
    import_all(&db, &home);
    let before = dump(&db);
    db.write(|tx| -> Result<(), scribe_db::Error> {
        tx.conn().unwrap().execute("DELETE FROM import_files", [])?;
        tx.conn()
            .unwrap()
            .execute("UPDATE import_sessions SET fingerprint = NULL", [])?;
        Ok(())
    })
    .unwrap();
    for s in import_all(&db, &home) {
        assert_eq!(s.written.messages_inserted, 0, "{}", s.source);
        assert_eq!(s.written.sessions_created, 0, "{}", s.source);
    }
    assert_eq!(dump(&db), before);
}

#[test]
fn history_imported_over_an_export_of_its_import_adds_nothing() {
    // A store moved with `scribe export --all` / `scribe import` keeps the sessions but
    // not the importer's record of them: importing the agents' history into it again
    // finds them, rather than adding an empty twin of each (and, for Hermes, whose usage
    // is per session, counting its usage twice).
    let dir = tempfile::tempdir().unwrap();
    let home = home(dir.path());
    let db = scribe_db(dir.path());
    import_all(&db, &home);
    let exports = scribe_session::SessionService::new(std::sync::Arc::clone(&db))
        .export(&scribe_session::ExportSelection::All { source: None })
        .unwrap();
    let moved_dir = tempfile::tempdir().unwrap();
    let moved = scribe_db(moved_dir.path());
    let outcomes = scribe_session::SessionService::new(std::sync::Arc::clone(&moved))
        .import_many(exports, |_| {})
        .unwrap();
    assert!(outcomes.iter().all(Result::is_ok), "{outcomes:?}");
    let before = dump(&moved);
    assert_eq!(before, dump(&db));

    // A dry run counts nothing new either.
    for source in Source::ALL {
        let mut sink = scribe_import::sink::DryRunSink::new(Some(scribe_session::Store::new(
            std::sync::Arc::clone(&moved),
        )));
        let s = scribe_import::import(
            &mut sink,
            scribe_import::sources::importer(source),
            &roots(&home, source),
            &scribe_import::Options::default(),
            &mut |_| {},
        )
        .unwrap();
        assert_eq!(s.written.sessions_created, 0, "{source:?} dry run: {s:?}");
        assert_eq!(s.written.messages_inserted, 0, "{source:?} dry run: {s:?}");
        assert_eq!(s.written.messages_replayed, 0, "{source:?} dry run: {s:?}");
    }
    for s in import_all(&moved, &home) {
        assert_eq!(s.written.sessions_created, 0, "{}: {s:?}", s.source);
        assert_eq!(s.written.messages_inserted, 0, "{}: {s:?}", s.source);
        assert_eq!(s.written.messages_replayed, 0, "{}: {s:?}", s.source);
    }
    assert_same(&dump(&moved), &before, "history over its moved import");
}

#[test]
fn tool_calls_are_paired_with_their_results() {
    let dir = tempfile::tempdir().unwrap();
    let home = home(dir.path());
    let db = scribe_db(dir.path());
    import_all(&db, &home);
    // Claude Code: 12 calls, results arriving out of order on separate lines; one failed.
    let tools: Vec<_> = messages(&db, "1af7fc5e-8455-4414-9ccd-011d40f70b2a")
        .into_iter()
        .flat_map(|m| m.parts)
        .filter_map(|p| match p.part {
            Part::Tool(t) => Some(t),
            _ => None,
        })
        .collect();
    assert_eq!(tools.len(), 12);
    assert_eq!(
        tools
            .iter()
            .filter(|t| matches!(t.state, ToolState::Error { .. }))
            .count(),
        1
    );
    assert!(tools.iter().all(|t| t.state.is_terminal()));
    // Codex: a call with its output; an interrupted call stays running.
    let codex = |id: &str| -> Vec<ToolState> {
        messages(&db, id)
            .into_iter()
            .flat_map(|m| m.parts)
            .filter_map(|p| match p.part {
                Part::Tool(t) => Some(t.state),
                _ => None,
            })
            .collect()
    };
    let done = codex("01a0f21c-5c40-7f72-9aa9-ef0b43570680");
    assert!(
        matches!(&done[..], [ToolState::Completed { output, .. }] if output.contains("fixture"))
    );
    let cut = codex("019c8a70-dda7-7f33-98ea-f30553347322");
    assert!(matches!(cut[..], [ToolState::Running { .. }]));
    // Hermes: the assistant row's call and the tool row are one part.
    let hermes = codex("20260101_100000_a1b2c3");
    assert!(
        matches!(&hermes[..], [ToolState::Completed { output, .. }] if output.contains("1 failed"))
    );
    // Gemini: call and result in one record.
    assert!(matches!(
        &codex("gemini_stage0_jsonl")[..],
        [ToolState::Completed { output, .. }] if output.contains("README.md")
    ));
}

#[test]
fn sub_agents_compaction_titles_and_lineage() {
    let dir = tempfile::tempdir().unwrap();
    let home = home(dir.path());
    let db = scribe_db(dir.path());
    import_all(&db, &home);
    // Claude Code 2.1 layout: <session>/subagents/agent-<id>.jsonl under its session.
    let agent = session(&db, "agent-a0ad4f44468bdf20d");
    assert_eq!(agent.kind, SessionKind::Task);
    assert_eq!(
        agent.parent_session_id.as_deref(),
        Some("0a1b2c3d-4e5f-4061-8071-2a3b4c5d6e7f")
    );
    // Inline sidechain lines form a task session under their session.
    let side = session(&db, "small:sidechain:u1");
    assert_eq!(
        (side.kind, side.parent_session_id.as_deref()),
        (SessionKind::Task, Some("small"))
    );
    // custom-title wins over ai-title and summary.
    assert_eq!(
        session(&db, "small").title.as_deref(),
        Some("Stage0 small fixture")
    );
    // Hermes: a compression continuation, a delegated task, the summary message.
    let cont = session(&db, "20260101_101000_d4e5f6");
    assert_eq!(cont.kind, SessionKind::Continuation);
    assert_eq!(
        cont.parent_session_id.as_deref(),
        Some("20260101_100000_a1b2c3")
    );
    assert_eq!(cont.title.as_deref(), Some("Fix the flaky test #2"));
    assert!(messages(&db, &cont.id)[0].is_summary);
    let task = session(&db, "20260101_100500_sub001");
    assert_eq!(task.kind, SessionKind::Task);
    let root = session(&db, "20260101_100000_a1b2c3");
    assert_eq!(root.end_reason.as_deref(), Some("compression"));
    assert_eq!(root.ended_at, Some(1_767_262_200_500));
    // Codex compaction checkpoints are summary messages.
    assert!(
        messages(&db, "019fc8be-3658-7ca3-9e29-000000000000")
            .iter()
            .any(|m| m.is_summary)
    );
    // Times are the sources', not the import's.
    let claude = session(&db, "1af7fc5e-8455-4414-9ccd-011d40f70b2a");
    assert_eq!(claude.created_at, 1_756_860_439_293);
    assert_eq!(claude.updated_at, 1_756_860_472_264);
    assert_eq!(claude.directory.as_deref(), Some("/path/to/Demo"));
    assert_eq!(claude.model.as_deref(), Some("claude-sonnet-4-20250514"));
}

#[test]
fn costs_are_reported_estimated_or_unknown() {
    let dir = tempfile::tempdir().unwrap();
    let home = home(dir.path());
    let db = scribe_db(dir.path());
    import_all(&db, &home);
    // Estimated from the catalog (claude-sonnet-4 prices; ccusage: $0.0931572).
    let claude = session(&db, "1af7fc5e-8455-4414-9ccd-011d40f70b2a");
    assert_eq!(claude.cost_status.as_deref(), Some("estimated"));
    assert!((claude.estimated_cost_usd - 0.093_157_2).abs() < 1e-9);
    assert_eq!(claude.actual_cost_usd, None);
    // Reported by the source (Hermes's own figure).
    let hermes = session(&db, "20260101_100000_a1b2c3");
    assert_eq!(hermes.cost_status.as_deref(), Some("reported"));
    assert_eq!(hermes.cost_source.as_deref(), Some("hermes"));
    assert!((hermes.estimated_cost_usd - 0.0421).abs() < 1e-9);
    assert_eq!(hermes.actual_cost_usd, Some(0.0421));
    // A model the catalog does not price: tokens kept, cost unknown.
    let codex = session(&db, "01a0f21c-5c40-7f72-9aa9-ef0b43570680");
    assert_eq!(codex.cost_status.as_deref(), Some("unknown"));
    assert_eq!(codex.estimated_cost_usd, 0.0);
    assert_eq!(codex.tokens.input, 170);
}

/// What the bulk path stores is whole: after importing every fixture the database check
/// passes (both search indexes hold exactly the parts' text), and a search right after
/// the import finds every message by a word of its text, in its session.
#[test]
fn after_an_import_the_check_is_clean_and_search_finds_every_message() {
    let dir = tempfile::tempdir().unwrap();
    let home = home(dir.path());
    let db = scribe_db(dir.path());
    import_all(&db, &home);
    let report = db.check().unwrap();
    assert!(report.is_ok(), "{report:?}");

    let search = scribe_message::MessageService::new(std::sync::Arc::clone(&db));
    let mut searched = 0;
    for s in sessions(&db) {
        for m in messages(&db, &s.id) {
            // The message's longest plain ASCII word of its first text part.
            let Some(word) = m.parts.iter().find_map(|p| match &p.part {
                Part::Text(t) => t
                    .text
                    .split(|c: char| !c.is_ascii_alphabetic())
                    .filter(|w| w.len() >= 4)
                    .max_by_key(|w| w.len())
                    .map(str::to_owned),
                _ => None,
            }) else {
                continue;
            };
            let options = scribe_message::SearchOptions {
                session_id: Some(s.id.clone()),
                limit: 1000,
                ..Default::default()
            };
            let hits = search.search(&word, &options).unwrap();
            assert!(
                hits.iter().any(|h| h.message_id == m.id),
                "{word:?} did not find {} in {}",
                m.id,
                s.id
            );
            searched += 1;
        }
    }
    assert!(searched > 50, "only {searched} messages searched");
}

/// OpenCode's legacy JSON storage is found from the folder a user sees it in: the data
/// folder (the default root), the `storage` folder itself, or its `session` folder; each
/// imports the same sessions with the same figures. Before, only the data folder did
/// ("no history found" for the others).
#[test]
fn opencode_storage_is_found_from_its_own_folders() {
    let dir = tempfile::tempdir().unwrap();
    let home = home(dir.path());
    let data = roots(&home, Source::OpenCode).remove(0);
    for (i, root) in [
        data.join("storage"),
        data.join("storage/session"),
        data.clone(),
    ]
    .into_iter()
    .enumerate()
    {
        let store = dir.path().join(format!("store{i}"));
        std::fs::create_dir_all(&store).unwrap();
        let db = scribe_db(&store);
        let summary = run(&db, Source::OpenCode, std::slice::from_ref(&root));
        assert!(summary.files > 0, "{}: {summary:?}", root.display());
        // `--watch` watches the storage whole: messages and parts lie beside its sessions.
        let watched = scribe_import::sources::importer(Source::OpenCode).watch_root(&root);
        let expected = if root.ends_with("storage/session") {
            data.join("storage")
        } else {
            root.clone()
        };
        assert_eq!(watched, expected);
        assert_eq!(
            figures(&db, "s_stage0_large", true),
            (120, 16, 0, 0),
            "{}",
            root.display()
        );
    }
}

/// Hermes' session logs are found from their own folder (`~/.hermes/sessions`) too, with
/// `state.db` beside it (which holds the sessions whose logs are left to it): the same
/// files and the same store as an import of Hermes' home; without a database beside it,
/// every log. Before, the folder held "no history".
#[test]
fn hermes_logs_are_found_from_their_own_folder() {
    let dir = tempfile::tempdir().unwrap();
    let home = home(dir.path());
    let hermes = roots(&home, Source::Hermes).remove(0);
    let whole = scribe_db(dir.path());
    let from_home = run(&whole, Source::Hermes, std::slice::from_ref(&hermes));
    let store = |name: &str| {
        let store = dir.path().join(name);
        std::fs::create_dir_all(&store).unwrap();
        scribe_db(&store)
    };
    let logs = store("logs");
    let from_logs = run(&logs, Source::Hermes, &[hermes.join("sessions")]);
    assert_eq!(from_logs.files, from_home.files, "{from_logs:?}");
    assert!(from_logs.failed.is_empty() && from_logs.malformed.is_empty());
    assert_eq!(dump(&logs), dump(&whole));
    // `--watch` watches Hermes' home, where state.db changes too.
    let hermes_importer = scribe_import::sources::importer(Source::Hermes);
    assert_eq!(hermes_importer.watch_root(&hermes.join("sessions")), hermes);
    assert_eq!(hermes_importer.watch_root(&hermes), hermes);

    // The logs alone, copied where no database is beside them.
    let alone = dir.path().join("elsewhere/sessions");
    std::fs::create_dir_all(&alone).unwrap();
    let mut copied = 0;
    for entry in std::fs::read_dir(hermes.join("sessions")).unwrap() {
        let path = entry.unwrap().path();
        std::fs::copy(&path, alone.join(path.file_name().unwrap())).unwrap();
        copied += 1;
    }
    let only = store("only");
    let from_alone = run(&only, Source::Hermes, std::slice::from_ref(&alone));
    assert_eq!(from_alone.files, copied, "{from_alone:?}");
    assert!(from_alone.failed.is_empty() && from_alone.malformed.is_empty());
    assert!(!sessions(&only).is_empty());
    assert_eq!(hermes_importer.watch_root(&alone), alone);
    // The same logs in a folder of any other name are found as well (they were not: only
    // a home or a folder named `sessions` was looked in).
    let kept = dir.path().join("backup/hermes-logs");
    std::fs::create_dir_all(kept.parent().unwrap()).unwrap();
    std::fs::rename(&alone, &kept).unwrap();
    let renamed = store("renamed");
    let from_kept = run(&renamed, Source::Hermes, std::slice::from_ref(&kept));
    assert_eq!(from_kept.files, copied, "{from_kept:?}");
    assert_eq!(dump(&renamed), dump(&only));
    assert_eq!(hermes_importer.watch_root(&kept), kept);
}

/// Gemini CLI conversation files (`session-….json`, `.jsonl`) copied into a folder of any
/// name are found there, as under the CLI's own `chats` folders. (Only files under a
/// `chats` folder were looked at: "no gemini history".)
#[test]
fn gemini_conversations_are_found_in_a_folder_of_any_name() {
    let dir = tempfile::tempdir().unwrap();
    let home = home(dir.path());
    let gemini = roots(&home, Source::Gemini).remove(0);
    let whole = scribe_db(dir.path());
    let from_home = run(&whole, Source::Gemini, std::slice::from_ref(&gemini));
    let kept = dir.path().join("backup/gemini-conversations");
    std::fs::create_dir_all(&kept).unwrap();
    let mut files = Vec::new();
    scribe_import::sources::importer(Source::Gemini)
        .discover(&gemini, &mut files)
        .unwrap();
    for path in &files {
        std::fs::copy(path, kept.join(path.file_name().unwrap())).unwrap();
    }
    let store = dir.path().join("kept");
    std::fs::create_dir_all(&store).unwrap();
    let copied = scribe_db(&store);
    let from_kept = run(&copied, Source::Gemini, std::slice::from_ref(&kept));
    assert_eq!((from_kept.files, from_home.files), (2, 2), "{from_kept:?}");
    assert_eq!(dump(&copied), dump(&whole));
}

/// Imports `source` from `roots` pricing with `catalog`.
fn run_priced(
    db: &std::sync::Arc<scribe_db::Database>,
    source: Source,
    roots: &[PathBuf],
    catalog: &scribe_agent::models::ModelCatalog,
) -> scribe_import::SourceSummary {
    let mut sink =
        scribe_import::sink::StoreSink::new(scribe_session::Store::new(std::sync::Arc::clone(db)));
    let options = scribe_import::Options {
        pricer: scribe_import::pricing::Pricer::new(catalog.clone()),
        ..scribe_import::Options::default()
    };
    scribe_import::import(
        &mut sink,
        scribe_import::sources::importer(source),
        roots,
        &options,
        &mut |_| {},
    )
    .unwrap()
}

/// Usage imported before its model had a price is priced by the next import whose
/// catalog knows it, with every file unchanged: the messages' costs, the session's total
/// and status, and nothing else of the session; then not looked at again under the same
/// prices, and a cost is never lowered.
#[test]
fn usage_imported_without_a_price_is_priced_once_the_price_is_known() {
    use scribe_agent::models::{Model, ModelCatalog, Pricing};
    let dir = tempfile::tempdir().unwrap();
    let home = home(dir.path());
    let db = scribe_db(dir.path());
    let roots = roots(&home, Source::Codex);
    let builtin = ModelCatalog::builtin();
    run_priced(&db, Source::Codex, &roots, &builtin);
    let (luna, fake) = (
        "019fc8be-3658-7ca3-9e29-000000000000",
        "01a0f21c-5c40-7f72-9aa9-ef0b43570680",
    );
    let before = session(&db, luna);
    assert_eq!(before.cost_status.as_deref(), Some("unknown"));
    assert_eq!(before.estimated_cost_usd, 0.0);

    let mut priced = builtin.clone();
    let model = Model {
        id: "gpt-5.6-luna".to_owned(),
        provider: "openai".to_owned(),
        name: "GPT-5.6 Luna".to_owned(),
        context_window: 1_050_000,
        max_output_tokens: 128_000,
        pricing: Pricing {
            input_per_mtok: 1.0,
            output_per_mtok: 6.0,
            cache_write_per_mtok: 1.0,
            cache_read_per_mtok: 0.10,
            long_prompt: None,
        },
    };
    let want = model.cost(&before.tokens);
    priced.insert(model).unwrap();
    let summary = run_priced(&db, Source::Codex, &roots, &priced);
    assert_eq!(summary.files_read, 0, "every file is unchanged");
    assert_eq!(summary.repriced.sessions, 1);
    let with_usage = messages(&db, luna)
        .into_iter()
        .filter(|m| !m.usage.is_zero())
        .collect::<Vec<_>>();
    assert_eq!(summary.repriced.messages, with_usage.len() as u64);
    assert!((summary.repriced.cost_usd - want).abs() < 1e-12);
    assert!(with_usage.iter().all(|m| m.cost_usd > 0.0));
    let sum: f64 = with_usage.iter().map(|m| m.cost_usd).sum();
    assert!((sum - want).abs() < 1e-12, "{sum} != {want}");
    let after = session(&db, luna);
    assert!((after.estimated_cost_usd - want).abs() < 1e-12);
    assert_eq!(after.cost_status.as_deref(), Some("estimated"));
    assert_eq!(after.cost_source.as_deref(), Some("pricing-catalog"));
    let version = scribe_import::pricing::Pricer::new(priced.clone()).version();
    assert_eq!(after.pricing_version.as_deref(), Some(version.as_str()));
    assert_eq!(
        (after.tokens, after.updated_at, after.message_count),
        (before.tokens, before.updated_at, before.message_count)
    );
    // The model nobody prices was looked at, and stays unknown.
    let unknown = session(&db, fake);
    assert_eq!(unknown.cost_status.as_deref(), Some("unknown"));
    assert_eq!(unknown.pricing_version.as_deref(), Some(version.as_str()));

    // The same prices again: nothing to look at, nothing changes.
    let stored = dump(&db);
    let again = run_priced(&db, Source::Codex, &roots, &priced);
    assert_eq!(again.repriced, Default::default());
    assert_eq!(dump(&db), stored);
    // Back to prices without it: a cost counted is not taken back.
    let back = run_priced(&db, Source::Codex, &roots, &builtin);
    assert_eq!(back.repriced, Default::default());
    assert!((session(&db, luna).estimated_cost_usd - want).abs() < 1e-12);
    let report = db.check().unwrap();
    assert!(report.is_ok(), "{report:?}");
}

/// Hermes reports usage per session, not per message: a session whose model had no price
/// (and no cost of Hermes' own) is priced by the next import whose catalog knows the
/// model, with the database unchanged, as messages are; then not looked at again.
#[test]
fn hermes_usage_without_a_price_is_priced_once_the_price_is_known() {
    use scribe_agent::models::{Model, ModelCatalog, Pricing};
    let dir = tempfile::tempdir().unwrap();
    let state = dir.path().join("hermes/state.db");
    build_db("hermes/state_db_sample.sql", &state);
    let id = "20260101_100500_sub001";
    rusqlite::Connection::open(&state)
        .unwrap()
        .execute(
            "UPDATE sessions SET model = 'mystery-9', estimated_cost_usd = NULL,
                 actual_cost_usd = NULL WHERE id = ?1",
            [id],
        )
        .unwrap();
    let db = scribe_db(dir.path());
    let roots = [state.clone()];
    let builtin = ModelCatalog::builtin();
    run_priced(&db, Source::Hermes, &roots, &builtin);
    let before = session(&db, id);
    assert_eq!(before.cost_status.as_deref(), Some("unknown"));
    assert_eq!(before.estimated_cost_usd, 0.0);
    assert!(!before.tokens.is_zero());
    assert!(messages(&db, id).iter().all(|m| m.usage.is_zero()));

    let mut priced = builtin.clone();
    let model = Model {
        id: "mystery-9".to_owned(),
        provider: "example".to_owned(),
        name: "Mystery 9".to_owned(),
        context_window: 200_000,
        max_output_tokens: 32_000,
        pricing: Pricing {
            input_per_mtok: 2.0,
            output_per_mtok: 8.0,
            cache_write_per_mtok: 2.5,
            cache_read_per_mtok: 0.2,
            long_prompt: None,
        },
    };
    assert_eq!(before.api_call_count, 1);
    let want = model.cost(&before.tokens);
    assert!(want > 0.0);
    priced.insert(model).unwrap();
    let summary = run_priced(&db, Source::Hermes, &roots, &priced);
    assert_eq!(summary.files_read, 0, "the database is unchanged");
    assert_eq!(summary.repriced.sessions, 1);
    assert_eq!(summary.repriced.messages, 0);
    assert!((summary.repriced.cost_usd - want).abs() < 1e-12);
    let after = session(&db, id);
    assert!((after.estimated_cost_usd - want).abs() < 1e-12);
    assert_eq!(after.cost_status.as_deref(), Some("estimated"));
    assert_eq!(
        (after.tokens, after.message_count),
        (before.tokens, before.message_count)
    );
    // Its parent, whose cost Hermes reported, is not touched.
    let parent = session(&db, "20260101_100000_a1b2c3");
    assert_eq!(parent.cost_status.as_deref(), Some("reported"));

    // The same prices again: nothing to look at, nothing changes.
    let stored = dump(&db);
    let again = run_priced(&db, Source::Hermes, &roots, &priced);
    assert_eq!(again.repriced, Default::default());
    assert_eq!(dump(&db), stored);
    let report = db.check().unwrap();
    assert!(report.is_ok(), "{report:?}");
}

/// Hermes (v22+) records auxiliary calls (a title, a compression, a look at an image) in
/// `session_model_usage` under their task, and not in the session's totals: each task and
/// model of a session is a child session holding that usage, so stats count every call
/// once under its own model; the main loop's rows and a voice turn's (already in the
/// totals) are not counted again. A new auxiliary call is read on the next import; an
/// unchanged database is not read again.
#[test]
fn hermes_auxiliary_calls_are_child_sessions_under_their_model() {
    let dir = tempfile::tempdir().unwrap();
    let state = dir.path().join("hermes/state.db");
    build_db("hermes/state_db_sample.sql", &state);
    let parent = "20260101_100000_a1b2c3";
    let source = rusqlite::Connection::open(&state).unwrap();
    source
        .execute_batch(
            "CREATE TABLE session_model_usage (
                session_id TEXT NOT NULL, model TEXT NOT NULL,
                billing_provider TEXT NOT NULL DEFAULT '', billing_base_url TEXT NOT NULL DEFAULT '',
                billing_mode TEXT NOT NULL DEFAULT '', task TEXT NOT NULL DEFAULT '',
                api_call_count INTEGER NOT NULL DEFAULT 0, input_tokens INTEGER NOT NULL DEFAULT 0,
                output_tokens INTEGER NOT NULL DEFAULT 0, cache_read_tokens INTEGER NOT NULL DEFAULT 0,
                cache_write_tokens INTEGER NOT NULL DEFAULT 0, reasoning_tokens INTEGER NOT NULL DEFAULT 0,
                estimated_cost_usd REAL NOT NULL DEFAULT 0, actual_cost_usd REAL NOT NULL DEFAULT 0,
                cost_status TEXT, cost_source TEXT, first_seen REAL, last_seen REAL,
                PRIMARY KEY (session_id, model, billing_provider, billing_base_url, billing_mode, task));
             INSERT INTO session_model_usage
                 (session_id, model, billing_provider, task, api_call_count, input_tokens,
                  output_tokens, estimated_cost_usd, first_seen, last_seen) VALUES
               ('20260101_100000_a1b2c3', 'claude-sonnet-4-6', 'anthropic', '', 5, 1000, 100, 0.01, 1767261601, 1767262100),
               ('20260101_100000_a1b2c3', 'voice-1', 'voicep', 'voice_chat', 1, 40, 4, 0.001, 1767261700, 1767261700),
               ('20260101_100000_a1b2c3', 'gpt-4o-mini', 'openai', 'title_generation', 1, 200, 10, 0.0004, 1767261605, 1767261605),
               ('20260101_100000_a1b2c3', 'gemini-2.5-flash', 'google', 'compression', 1, 5000, 300, 0.0, 1767262150, 1767262150),
               ('20260101_100000_a1b2c3', 'gemini-2.5-flash', 'openrouter', 'compression', 1, 3000, 200, 0.0, 1767262190, 1767262190);",
        )
        .unwrap();
    let db = scribe_db(dir.path());
    let roots = [state.clone()];
    run(&db, Source::Hermes, &roots);
    let children: Vec<_> = sessions(&db)
        .into_iter()
        .filter(|s| {
            s.parent_session_id.as_deref() == Some(parent)
                && s.model_config
                    .as_ref()
                    .is_some_and(|c| c.get("hermes_task").is_some())
        })
        .collect();
    let seen: Vec<(String, Option<String>, i64, i64, i64)> = children
        .iter()
        .map(|s| {
            (
                s.kind.to_string(),
                s.model.clone(),
                s.api_call_count,
                s.tokens.input,
                s.tokens.output,
            )
        })
        .collect();
    assert_eq!(
        seen,
        vec![
            (
                "task".to_owned(),
                Some("gemini-2.5-flash".to_owned()),
                2,
                8000,
                500
            ),
            (
                "title".to_owned(),
                Some("gpt-4o-mini".to_owned()),
                1,
                200,
                10
            ),
        ]
    );
    // The title call's cost is Hermes' own; the compression's, which Hermes left at 0,
    // is Scribe's estimate from the built-in prices.
    let title = children
        .iter()
        .find(|s| s.kind.to_string() == "title")
        .unwrap();
    assert!((title.estimated_cost_usd - 0.0004).abs() < 1e-12);
    let compression = children
        .iter()
        .find(|s| s.kind.to_string() == "task")
        .unwrap();
    // 8,000 input tokens at $0.30 and 500 output tokens at $2.50 a million.
    assert!((compression.estimated_cost_usd - 0.00365).abs() < 1e-12);
    assert_eq!(compression.cost_status.as_deref(), Some("estimated"));
    assert!(children.iter().all(|s| messages(&db, &s.id).is_empty()));
    // The parent keeps Hermes' totals; stats count the children once, under their models.
    let sessions_svc = scribe_session::SessionService::new(std::sync::Arc::clone(&db));
    let by_model = sessions_svc
        .stats(scribe_session::StatsBy::Model, None)
        .unwrap();
    let row = |m: &str| {
        by_model
            .rows
            .iter()
            .find(|r| r.key == m)
            .map(|r| r.totals.tokens.input)
    };
    assert_eq!(row("gpt-4o-mini"), Some(200));
    assert_eq!(row("gemini-2.5-flash"), Some(8000));
    assert_eq!(row("voice-1"), None);

    // Unchanged: nothing read, nothing changes.
    let stored = dump(&db);
    let again = run(&db, Source::Hermes, &roots);
    assert_eq!(again.written.sessions_updated, 0, "{again:?}");
    assert_same(&dump(&db), &stored, "unchanged");
    // Another title call: its child is read again with it.
    source
        .execute(
            "UPDATE session_model_usage SET api_call_count = 2, input_tokens = 450
             WHERE task = 'title_generation'",
            [],
        )
        .unwrap();
    run(&db, Source::Hermes, &roots);
    let title = session(&db, &title.id);
    assert_eq!((title.api_call_count, title.tokens.input), (2, 450));
    let report = db.check().unwrap();
    assert!(report.is_ok(), "{report:?}");
}

/// Codex reports its plan's usage limits with its token counts. Each session keeps its
/// newest snapshot (in its `model_config`), read from the shapes Codex wrote over time,
/// whole or a line at a time; what `scribe sources` shows is the newest of them.
#[test]
fn codex_usage_limits_are_kept_as_reported() {
    for batch in [scribe_import::Options::default().batch_messages, 1] {
        let dir = tempfile::tempdir().unwrap();
        let home = home(dir.path());
        let db = scribe_db(dir.path());
        run_batched(
            &db,
            Source::Codex,
            &roots(&home, Source::Codex),
            batch,
            &mut |_| {},
        );
        let limits = |id: &str| {
            session(&db, id)
                .model_config
                .and_then(|c| c.get(scribe_import::sources::codex::RATE_LIMITS).cloned())
        };
        // A plus plan: the five hours and the week, each with when it resets.
        let two = limits("019c8a70-dda7-7f33-98ea-f30553347322").unwrap();
        assert_eq!(
            two["windows"],
            serde_json::json!([
                {"minutes": 300, "used_percent": 19.0, "resets_at": 1_771_864_834_000_i64},
                {"minutes": 10_080, "used_percent": 6.0, "resets_at": 1_772_355_702_000_i64},
            ]),
            "batch {batch}"
        );
        // A pro plan reports the week alone; the later snapshots of that file with windows
        // of length 0 (older Codex, before it knew) say nothing and leave it in place.
        let pro = limits("019fc8be-3658-7ca3-9e29-000000000000").unwrap();
        assert_eq!(pro["plan"], "pro", "batch {batch}");
        assert_eq!(
            pro["windows"],
            serde_json::json!([
                {"minutes": 10_080, "used_percent": 1.0, "resets_at": 1_785_958_530_000_i64},
            ]),
            "batch {batch}"
        );
        // A rollout whose limits are all null has none.
        assert!(limits("01a0f21c-5c40-7f72-9aa9-ef0b43570680").is_none());
        // The source's newest snapshot is the pro plan's (August, after February's).
        let store = scribe_session::Store::new(std::sync::Arc::clone(&db));
        let states = scribe_import::sink::source_states(&store).unwrap();
        assert_eq!(states["codex"].rate_limits.as_ref(), Some(&pro));
    }
}
