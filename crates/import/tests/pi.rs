//! pi and OpenClaw: session files found where each keeps them, read into faithful
//! sessions (replies with reasoning and tool calls, their results, the user's own shell
//! commands, a compaction's summary, a fork under the session it was forked from), each
//! reply's usage and pi's own cost, and read again whole when they grow without storing
//! anything twice.
//!
//! Fixtures (`fixtures/pi`, `fixtures/openclaw`): sessions written for Scribe after pi's
//! `session-manager.ts`, and two from jazzyalex/agent-sessions (fixtures/SOURCES.md).
//! Their token totals equal ccusage's (`fixtures.rs`), and so do their costs, which both
//! take from the files.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::path::PathBuf;

use common::*;
use scribe_import::{Source, sources};
use scribe_message::{FinishReason, Part, Role};
use scribe_session::SessionKind;

const BLOG: &str = "019f3a10-5c2e-7b44-9d1a-6e0f2b7c8d91";
const FORK: &str = "019f3a22-1b7d-7c10-8e4f-2a9c5d3e6f70";
const CALENDAR: &str = "5b8e1f3c-9a2d-4c6e-8f10-3d7a2b9c4e51";
const RESET: &str = "1c4d7a2e-6b3f-4e8a-9d05-7f2c1b8a3e60";
/// Sessions OpenClaw keeps in its agent database (`fixtures/openclaw-store.py`): a
/// conversation, the continuation its compaction began, and a sub-agent it started.
const RELEASE: &str = "7e2a9c41-3f0b-4d8e-a6c5-1b9d2e4f6a83";
const SHORTER: &str = "7e2a9c41-3f0b-4d8e-a6c5-1b9d2e4f6a84";
const SUMMARY_OF_PR: &str = "7e2a9c41-3f0b-4d8e-a6c5-1b9d2e4f6a85";
/// The agent database's dump, beside where it is built.
const STORE_DUMP: &str = "openclaw/agents/main/agent/openclaw-agent.sql";

#[test]
fn pi_and_openclaw_are_found_where_they_keep_their_sessions() {
    let dir = tempfile::tempdir().unwrap();
    let home = dir.path().join("home");
    let roots = |source: Source, vars: &[(&str, &str)]| {
        sources::importer(source).default_roots(&env(&home, vars))
    };
    assert_eq!(roots(Source::Pi, &[]), [home.join(".pi/agent/sessions")]);
    assert_eq!(
        roots(Source::Pi, &[("PI_CODING_AGENT_DIR", "/srv/pi")]),
        [PathBuf::from("/srv/pi/sessions")]
    );
    assert_eq!(
        roots(
            Source::Pi,
            &[
                ("PI_CODING_AGENT_DIR", "/srv/pi"),
                ("PI_CODING_AGENT_SESSION_DIR", "/srv/s")
            ]
        ),
        [PathBuf::from("/srv/s")]
    );
    // OpenClaw: its state folder, or (when only that exists) the one of its earlier name.
    assert_eq!(
        roots(Source::OpenClaw, &[]),
        [home.join(".openclaw/agents")]
    );
    std::fs::create_dir_all(home.join(".clawdbot/agents")).unwrap();
    assert_eq!(
        roots(Source::OpenClaw, &[]),
        [home.join(".clawdbot/agents")]
    );
    let older = dir.path().join("older");
    std::fs::create_dir_all(older.join(".moltbot/agents")).unwrap();
    assert_eq!(
        sources::importer(Source::OpenClaw).default_roots(&env(&older, &[])),
        [older.join(".moltbot/agents")]
    );
    assert_eq!(
        roots(Source::OpenClaw, &[("OPENCLAW_STATE_DIR", "/srv/claw")]),
        [PathBuf::from("/srv/claw/agents")]
    );

    // Session files, and the transcripts OpenClaw set aside; nothing else.
    copy("openclaw", &home.join(".openclaw"));
    let sessions = home.join(".openclaw/agents/main/sessions");
    std::fs::write(sessions.join("sessions.json"), "{}").unwrap();
    let mut found = Vec::new();
    sources::importer(Source::OpenClaw)
        .discover(&home.join(".openclaw/agents"), &mut found)
        .unwrap();
    let names: Vec<String> = found
        .iter()
        .map(|p| p.file_name().unwrap().to_string_lossy().into_owned())
        .collect();
    assert_eq!(
        names,
        [
            format!("{RESET}.jsonl.reset.2026-11-20T17-59-00.000Z"),
            format!("{CALENDAR}.jsonl"),
            "openclaw-stage0-large.jsonl".to_owned(),
        ]
    );
    // And the agent's database, once OpenClaw keeps one (2026.9 on); pi has none.
    let store = home.join(".openclaw/agents/main/agent/openclaw-agent.sqlite");
    build_db(STORE_DUMP, &store);
    let mut found = Vec::new();
    sources::importer(Source::OpenClaw)
        .discover(&home.join(".openclaw/agents"), &mut found)
        .unwrap();
    assert_eq!(found.len(), 4);
    assert_eq!(found[0], store);
    assert_eq!(
        sources::importer(Source::OpenClaw).companions(&store),
        [home.join(".openclaw/agents/main/agent/openclaw-agent.sqlite-wal")]
    );
    let mut found = Vec::new();
    sources::importer(Source::Pi)
        .discover(&home.join(".openclaw/agents"), &mut found)
        .unwrap();
    assert_eq!(found.len(), 3);
}

#[test]
fn a_pi_session_keeps_its_replies_calls_commands_summary_usage_and_fork() {
    let dir = tempfile::tempdir().unwrap();
    let sessions = dir.path().join("pi/sessions");
    copy("pi/sessions", &sessions);
    let db = scribe_db(dir.path());
    let s = run(&db, Source::Pi, &[sessions]);
    assert!(s.failed.is_empty() && s.malformed.is_empty(), "{s:?}");
    assert_eq!(s.written.sessions_created, 3);

    let blog = session(&db, BLOG);
    assert_eq!(blog.source, "pi");
    assert_eq!(blog.title.as_deref(), Some("RSS dates in UTC"));
    assert_eq!(blog.directory.as_deref(), Some("/home/me/blog"));
    assert_eq!(blog.model.as_deref(), Some("claude-sonnet-4-5"));
    assert_eq!(
        texts(&db, BLOG),
        [
            (
                Role::User,
                "The RSS feed shows dates in local time; make them RFC 822 in UTC.".into(),
                false
            ),
            (Role::Assistant, "Let me read the feed template.".into(), false),
            // The user's own command, as typed, and its output.
            (Role::User, "!grep -n pubDate src/feed.ts".into(), false),
            (
                Role::User,
                "14:    pubDate: post.date.toLocaleString(),".into(),
                true
            ),
            (
                Role::User,
                "It is on line 14, with a trailing comma.".into(),
                false
            ),
            (
                Role::Assistant,
                "pubDate now uses toUTCString(), which is the RFC 822 form in UTC.".into(),
                false
            ),
            (
                Role::Assistant,
                "The feed's pubDate used toLocaleString(); it now uses toUTCString() (RFC 822, UTC)."
                    .into(),
                false
            ),
            (Role::User, "Add a test for it".into(), false),
        ]
    );
    assert_eq!(
        tool_outcomes(&db, BLOG),
        [
            (
                "read".into(),
                "completed".into(),
                "pubDate: post.date.toLocaleString()".into()
            ),
            (
                "edit".into(),
                "error".into(),
                "Could not find the exact text in src/feed.ts".into()
            ),
            (
                "edit".into(),
                "completed".into(),
                "Successfully replaced text in src/feed.ts.".into()
            ),
        ]
    );
    let msgs = messages(&db, BLOG);
    match &msgs[1].parts[0].part {
        Part::Reasoning(r) => assert_eq!(r.signature.as_deref(), Some("sig-a4")),
        other => panic!("{other:?}"),
    }
    // Output holds the reasoning; Scribe keeps it apart.
    let first = msgs[1].usage;
    assert_eq!(
        (
            first.input,
            first.output,
            first.reasoning,
            first.cache_read,
            first.cache_write
        ),
        (2_100, 140, 40, 0, 3_900)
    );
    assert_eq!(msgs[1].finish_reason, Some(FinishReason::ToolUse));
    let summary = msgs.iter().find(|m| m.is_summary).unwrap();
    // pi keeps sending the entries from `firstKeptEntryId` on (here the reply before the
    // summary) after it: the summary keeps them, so Scribe sends them too.
    let kept = msgs
        .iter()
        .find(|m| {
            m.parts
                .iter()
                .any(|p| matches!(&p.part, Part::Text(t) if t.text.starts_with("pubDate now uses")))
        })
        .unwrap();
    match &summary.parts[0].part {
        Part::Compaction(c) => assert_eq!(c.keep_from.as_deref(), Some(kept.id.as_str())),
        other => panic!("{other:?}"),
    }
    let sent = scribe_session::SessionService::new(std::sync::Arc::clone(&db))
        .conversation(
            BLOG,
            scribe_message::ConversationOptions {
                from_summary: true,
                ..Default::default()
            },
        )
        .unwrap();
    let sent = serde_json::to_string(&sent).unwrap();
    assert!(sent.contains("pubDate now uses toUTCString()"), "{sent}");
    assert!(!sent.contains("make them RFC 822 in UTC"), "{sent}");
    // An aborted reply with no content keeps its usage and says why it ended.
    let aborted = msgs.last().unwrap();
    assert!(aborted.parts.is_empty());
    assert_eq!(aborted.error.as_ref().unwrap()["type"], "aborted");
    assert_eq!(aborted.usage.cache_read, 4_600);
    // pi's own cost, reported.
    assert!(
        (blog.actual_cost_usd.unwrap() - 0.038_715).abs() < 1e-12,
        "{:?}",
        blog.actual_cost_usd
    );
    assert_eq!(blog.api_call_count, 5);

    // A session forked from it is a fork under it.
    let fork = session(&db, FORK);
    assert_eq!(
        (fork.kind, fork.parent_session_id.as_deref()),
        (SessionKind::Fork, Some(BLOG))
    );
}

#[test]
fn an_openclaw_agent_keeps_its_context_messages_and_set_aside_transcripts() {
    let dir = tempfile::tempdir().unwrap();
    let agents = dir.path().join("openclaw/agents");
    copy("openclaw/agents", &agents);
    let db = scribe_db(dir.path());
    let s = run(&db, Source::OpenClaw, &[agents]);
    assert!(s.failed.is_empty() && s.malformed.is_empty(), "{s:?}");
    assert_eq!(s.written.sessions_created, 3);
    assert_eq!(
        texts(&db, CALENDAR),
        [
            (
                Role::User,
                "Channel: telegram. The user is Dana.".into(),
                true
            ),
            (
                Role::User,
                "Remind me what is on my calendar tomorrow".into(),
                false
            ),
            (
                Role::Assistant,
                "Tomorrow: the dentist at 9:30, then a call with Sam at 14:00.".into(),
                false
            ),
        ]
    );
    assert_eq!(
        tool_outcomes(&db, CALENDAR),
        [(
            "calendar_list".into(),
            "completed".into(),
            "09:30 dentist; 14:00 call with Sam".into()
        )]
    );
    let calendar = session(&db, CALENDAR);
    assert_eq!(calendar.source, "openclaw");
    assert_eq!(calendar.model.as_deref(), Some("gpt-5-mini"));
    assert_eq!(
        messages(&db, RESET).len(),
        2,
        "a reset's transcript is read"
    );
    // A result given as a plain string settles its call too.
    assert_eq!(
        tool_outcomes(&db, "openclaw-stage0-large")[0],
        (
            "run_terminal".into(),
            "completed".into(),
            "M file1\nM file2".into()
        )
    );
}

/// OpenClaw 2026.9 keeps its transcripts in the agent's SQLite database: each session's
/// records (compressed or not) read as its file would be, the database left as it was, a
/// record that cannot be read reported, the session a file of it moved there the same
/// session, and a session that grew read again with nothing stored twice.
#[test]
fn an_openclaw_agent_database_is_read_as_its_transcripts() {
    let dir = tempfile::tempdir().unwrap();
    let agents = dir.path().join("openclaw/agents");
    copy("openclaw/agents", &agents);
    let files_only = scribe_db(&dir.path().join("files"));
    run(&files_only, Source::OpenClaw, std::slice::from_ref(&agents));
    let store = agents.join("main/agent/openclaw-agent.sqlite");
    build_db(STORE_DUMP, &store);
    // A compressed record that is not zstd.
    rusqlite::Connection::open(&store)
        .unwrap()
        .execute(
            "INSERT INTO transcript_events VALUES (?1, 8, NULL, 1795770090000, \
             X'0102030405', 10, '{\"version\":1}')",
            [RELEASE],
        )
        .unwrap();

    let db = scribe_db(dir.path());
    let s = import_read_only(
        &db,
        Source::OpenClaw,
        std::slice::from_ref(&agents),
        &agents,
    );
    assert!(s.failed.is_empty(), "{s:?}");
    // The record that is not zstd is reported, by its session and place.
    let [broken] = s.malformed.as_slice() else {
        panic!("one malformed record: {s:?}")
    };
    assert!(
        broken
            .error
            .contains(&format!("session {RELEASE}, record 8: not zstd")),
        "{broken:?}"
    );
    // Three sessions more than the files hold: the calendar's file moved into the
    // database is the same session, its messages stored once.
    assert_eq!(s.written.sessions_created, 6, "{s:?}");
    assert_eq!(messages(&db, CALENDAR), messages(&files_only, CALENDAR));

    let release = session(&db, RELEASE);
    assert_eq!(release.source, "openclaw");
    assert_eq!(release.title.as_deref(), Some("#release"));
    assert_eq!(
        release.directory.as_deref(),
        Some("/home/me/.openclaw/workspace")
    );
    assert_eq!(release.model.as_deref(), Some("claude-sonnet-4-5"));
    assert_eq!(
        texts(&db, RELEASE),
        [
            (
                Role::User,
                "Draft the release notes for 2.4 from the merged PRs".into(),
                false
            ),
            (
                Role::Assistant,
                "Release notes for 2.4: sessions are cached in Redis, webhooks retry with \
                 backoff, exports stream, and the v1 search endpoint is gone."
                    .into(),
                false
            ),
            (Role::User, "Thanks, post it in #release".into(), false),
        ]
    );
    // The tool's result was compressed (over 1 KB): read whole.
    let [(tool, state, output)] = tool_outcomes(&db, RELEASE).try_into().unwrap();
    assert_eq!((tool.as_str(), state.as_str()), ("gh_pr_list", "completed"));
    assert!(output.starts_with("#400 Move the session cache to Redis\n#401 Retry"));
    assert!(output.len() > 1_024, "{}", output.len());
    // Each reply's usage and OpenClaw's own cost.
    assert_eq!(release.tokens.input, 1_200 + 2_100);
    assert_eq!(release.tokens.cache_read, 1_200);
    assert!((release.actual_cost_usd.unwrap() - 0.016_56).abs() < 1e-9);

    // The continuation its compaction began, with the summary; the sub-agent it started.
    let shorter = session(&db, SHORTER);
    assert_eq!(
        shorter.parent_session_id.as_deref(),
        Some(release.id.as_str())
    );
    assert_eq!(shorter.kind, SessionKind::Continuation);
    assert!(shorter.summary_message_id.is_some());
    // A continuation takes its lineage's title and number, as every continuation does.
    assert_eq!(shorter.title.as_deref(), Some("#release #2"));
    let sub = session(&db, SUMMARY_OF_PR);
    assert_eq!(sub.parent_session_id.as_deref(), Some(release.id.as_str()));
    assert_eq!(sub.kind, SessionKind::Task);
    assert_eq!(sub.model.as_deref(), Some("claude-haiku-4-5"));
    assert_eq!(sub.title, None);
    // Its run's end, and how it ended.
    assert_eq!(sub.ended_at, Some(1_795_770_015_000));
    assert_eq!(sub.end_reason.as_deref(), Some("done"));
    assert_eq!(release.ended_at, None);

    // Nothing changed: nothing read again. Then OpenClaw goes on with one session.
    let before = dump(&db);
    let again = run(&db, Source::OpenClaw, std::slice::from_ref(&agents));
    assert_eq!(again.written.messages_inserted, 0, "{again:?}");
    assert_same(&dump(&db), &before, "unchanged");
    let conn = rusqlite::Connection::open(&store).unwrap();
    conn.execute(
        "INSERT INTO transcript_events VALUES (?1, 5, ?2, 1795770020000, NULL, NULL, NULL)",
        [
            SHORTER,
            r#"{"type":"message","id":"e0000004","parentId":"e0000003","timestamp":"2026-11-27T10:00:20.000Z","message":{"role":"user","content":"Perfect, thanks"}}"#,
        ],
    )
    .unwrap();
    drop(conn);
    let grown = run(&db, Source::OpenClaw, std::slice::from_ref(&agents));
    assert_eq!(grown.written.messages_inserted, 1, "{grown:?}");
    // Only the grown session is read again (the one with the broken record is not).
    assert_eq!(grown.malformed.len(), 0, "{grown:?}");
    assert_eq!(
        texts(&db, SHORTER).last().unwrap(),
        &(Role::User, "Perfect, thanks".into(), false)
    );
}

#[test]
fn a_grown_pi_session_is_read_again_and_nothing_is_stored_twice() {
    let dir = tempfile::tempdir().unwrap();
    let sessions = dir.path().join("pi/sessions");
    copy("pi/sessions", &sessions);
    let db = scribe_db(dir.path());
    run(&db, Source::Pi, std::slice::from_ref(&sessions));
    let before = dump(&db);
    let again = run(&db, Source::Pi, std::slice::from_ref(&sessions));
    assert_eq!(again.files_unchanged, 3, "{again:?}");
    assert_same(&dump(&db), &before, "unchanged files");

    let file = sessions
        .join("--home-me-blog--")
        .join(format!("2026-10-14T07-30-00-000Z_{BLOG}.jsonl"));
    let mut text = std::fs::read_to_string(&file).unwrap();
    text.push_str(concat!(
        r#"{"type":"message","id":"a0000011","parentId":"a0000010","timestamp":"2026-10-14T07:32:00.000Z","message":{"role":"user","content":"Add a test for it, please","timestamp":1792049520000}}"#,
        "\n",
        r#"{"type":"message","id":"a0000012","parentId":"a0000011","timestamp":"2026-10-14T07:32:04.000Z","message":{"role":"assistant","content":[{"type":"text","text":"Added test/feed.test.ts."}],"provider":"anthropic","model":"claude-sonnet-4-5","usage":{"input":50,"output":70,"cacheRead":4700,"cacheWrite":0,"cost":{"total":0.00276}},"stopReason":"stop"}}"#,
        "\n",
        r#"{"type":"message","id":"a0000013","parentId":"a00"#,
    ));
    std::fs::write(&file, text).unwrap();
    let grown = run(&db, Source::Pi, std::slice::from_ref(&sessions));
    assert!(grown.malformed.is_empty(), "a line being written waits");
    assert_eq!(grown.written.messages_inserted, 2, "{grown:?}");
    assert_eq!(messages(&db, BLOG).len(), 12);
    let blog = session(&db, BLOG);
    assert!((blog.actual_cost_usd.unwrap() - 0.041_475).abs() < 1e-12);
}
