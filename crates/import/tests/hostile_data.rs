//! Source files written by another program, an older or newer agent, or a hand: numbers
//! at the edge of their type, times millennia apart. Each is imported or reported, never
//! a panic (debug builds check every integer operation for overflow, as these tests run).

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use common::*;
use scribe_import::Source;

/// A Claude Code transcript whose one response reports its cache writes split into two
/// counts near `i64::MAX` (their sum overflowed).
#[test]
fn claude_cache_write_counts_near_the_limit_saturate() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("in");
    std::fs::create_dir_all(&root).unwrap();
    let id = "5e1f0c1d-0000-4000-8000-000000000001";
    let user = format!(
        r#"{{"type":"user","sessionId":"{id}","uuid":"u1","parentUuid":null,"timestamp":"2026-01-01T00:00:00.000Z","message":{{"role":"user","content":"hi"}}}}"#
    );
    let assistant = format!(
        r#"{{"type":"assistant","sessionId":"{id}","uuid":"a1","parentUuid":"u1","timestamp":"2026-01-01T00:00:01.000Z","requestId":"r1","message":{{"id":"m1","role":"assistant","model":"claude-sonnet-4-5","content":[{{"type":"text","text":"hello"}}],"stop_reason":"end_turn","usage":{{"input_tokens":3,"output_tokens":2,"cache_creation":{{"ephemeral_5m_input_tokens":9223372036854775807,"ephemeral_1h_input_tokens":9223372036854775807}}}}}}}}"#
    );
    std::fs::write(
        root.join(format!("{id}.jsonl")),
        format!("{user}\n{assistant}\n"),
    )
    .unwrap();
    let db = scribe_db(dir.path());
    let s = run(&db, Source::ClaudeCode, &[root]);
    assert!(s.malformed.is_empty(), "{:?}", s.malformed);
    assert!(s.failed.is_empty(), "{:?}", s.failed);
    let stored = messages(&db, id);
    assert_eq!(stored.len(), 2);
    assert_eq!(stored[1].usage.cache_write, i64::MAX);
    assert_eq!(stored[1].usage.input, 3);
}

/// A Claude Code transcript saved with a UTF-8 byte order mark (an editor's or a Windows
/// tool's copy): its first line is imported with the rest. Before, the mark made line 1
/// malformed and the conversation lost its first message.
#[test]
fn a_transcript_starting_with_a_byte_order_mark_keeps_its_first_line() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("in");
    std::fs::create_dir_all(&root).unwrap();
    let id = "5e1f0c1d-0000-4000-8000-000000000002";
    let user = format!(
        r#"{{"type":"user","sessionId":"{id}","uuid":"u1","parentUuid":null,"timestamp":"2026-01-01T00:00:00.000Z","message":{{"role":"user","content":"hi"}}}}"#
    );
    let assistant = format!(
        r#"{{"type":"assistant","sessionId":"{id}","uuid":"a1","parentUuid":"u1","timestamp":"2026-01-01T00:00:01.000Z","requestId":"r1","message":{{"id":"m1","role":"assistant","model":"claude-sonnet-4-5","content":[{{"type":"text","text":"hello"}}],"stop_reason":"end_turn","usage":{{"input_tokens":3,"output_tokens":2}}}}}}"#
    );
    std::fs::write(
        root.join(format!("{id}.jsonl")),
        format!("\u{feff}{user}\n{assistant}\n"),
    )
    .unwrap();
    let db = scribe_db(dir.path());
    let s = run(&db, Source::ClaudeCode, std::slice::from_ref(&root));
    assert!(s.malformed.is_empty(), "{:?}", s.malformed);
    let stored = messages(&db, id);
    assert_eq!(stored.len(), 2);
    assert_eq!(stored[0].role, scribe_message::Role::User);
    // Read again unchanged: nothing new, nothing malformed.
    let again = run(&db, Source::ClaudeCode, &[root]);
    assert!(again.malformed.is_empty(), "{:?}", again.malformed);
    assert_eq!(messages(&db, id).len(), 2);
}

/// A legacy Hermes session log (no per-message times: they are spread between start and
/// last update) spanning the whole calendar with enough messages that the spread
/// overflowed `i64`.
#[test]
fn hermes_log_spanning_millennia_spreads_its_times_without_overflow() {
    let dir = tempfile::tempdir().unwrap();
    let home = dir.path().join("hermes");
    let sessions = home.join("sessions");
    std::fs::create_dir_all(&sessions).unwrap();
    let count = 40_000;
    let messages_json: Vec<String> = (0..count)
        .map(|i| {
            let role = if i % 2 == 0 { "user" } else { "assistant" };
            format!(r#"{{"role":"{role}","content":"m{i}"}}"#)
        })
        .collect();
    let doc = format!(
        r#"{{"session_id":"20260101_wide","session_start":"0001-01-01T00:00:00Z","last_updated":"9999-12-31T23:59:59Z","messages":[{}]}}"#,
        messages_json.join(",")
    );
    std::fs::write(sessions.join("session_20260101_wide.json"), doc).unwrap();
    let db = scribe_db(dir.path());
    let s = run(&db, Source::Hermes, &[home]);
    assert!(s.failed.is_empty(), "{:?}", s.failed);
    let stored = messages(&db, "20260101_wide");
    assert_eq!(stored.len(), count);
    let start = -62_135_596_800_000; // 0001-01-01
    let end = 253_402_300_799_000; // 9999-12-31T23:59:59
    let times: Vec<i64> = stored.iter().map(|m| m.created_at).collect();
    assert!(times.windows(2).all(|w| w[0] <= w[1]), "in order");
    assert_eq!(times[0], start);
    assert!(times.iter().all(|t| (start..=end).contains(t)));
}

/// OpenCode messages each reporting a cost of 1e308 (valid JSON, a finite number): the
/// session's pending cost summed to infinity, the usage update refused it, and that
/// aborted the whole import (every session, every run). The sum stops at the largest
/// finite amount instead, and every session is imported.
#[test]
fn opencode_costs_summing_past_f64_max_do_not_abort_the_import() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("opencode");
    let source = data.join("opencode.db");
    build_db("opencode/opencode.sql", &source);
    let clean = {
        let other = tempfile::tempdir().unwrap();
        let copy = other.path().join("opencode");
        build_db("opencode/opencode.sql", &copy.join("opencode.db"));
        let db = scribe_db(other.path());
        run(&db, Source::OpenCode, &[copy]).written.sessions_created
    };
    let conn = rusqlite::Connection::open(&source).unwrap();
    let changed = conn
        .execute(
            "UPDATE message SET data = json_set(data, '$.cost', 1e308) \
             WHERE json_extract(data, '$.role') = 'assistant'",
            [],
        )
        .unwrap();
    assert!(changed >= 2, "{changed}");
    drop(conn);
    let db = scribe_db(dir.path());
    let s = run(&db, Source::OpenCode, &[data]);
    assert!(s.failed.is_empty(), "{:?}", s.failed);
    assert_eq!(s.written.sessions_created, clean);
    let costs: Vec<f64> = sessions(&db).iter().map(|s| s.estimated_cost_usd).collect();
    assert!(costs.contains(&f64::MAX), "{costs:?}");
    assert!(costs.iter().all(|c| c.is_finite()), "{costs:?}");
}

/// Another agent's file given to the Gemini importer (`--from gemini` with a Codex rollout
/// or a Claude Code transcript, a stray JSON file under `chats/`): nothing of a Gemini
/// conversation in it, so no session, only the skipped records in the report. (Before,
/// each became an empty session named after the file.)
#[test]
fn a_file_with_nothing_of_gemini_in_it_makes_no_session() {
    let dir = tempfile::tempdir().unwrap();
    let codex = dir.path().join("rollout.jsonl");
    copy(
        "codex/sessions/2026/02/23/rollout-2026-02-23T13-19-38-019c8a70-dda7-7f33-98ea-f30553347322.jsonl",
        &codex,
    );
    let claude = dir.path().join("claude.jsonl");
    copy(
        "claude/projects/-path-to-Demo/1af7fc5e-8455-4414-9ccd-011d40f70b2a.jsonl",
        &claude,
    );
    let other = dir.path().join("settings.json");
    std::fs::write(&other, r#"{"theme": "dark", "messages": []}"#).unwrap();
    let db = scribe_db(dir.path());
    for file in [codex, claude, other] {
        let s = run(&db, Source::Gemini, std::slice::from_ref(&file));
        assert!(s.failed.is_empty(), "{file:?}: {:?}", s.failed);
        assert_eq!(s.written.sessions_created, 0, "{file:?}: {s:?}");
    }
    assert!(sessions(&db).is_empty(), "{:?}", sessions(&db));
}

/// A Claude Code transcript whose tool call's input nests deeper than a part may
/// (`scribe_message::MAX_PART_DEPTH`; the line itself is within what serde_json reads):
/// the store refuses such a part, and the whole import stopped at it. The call is stored
/// with its input's deepest values as their JSON text (a string), its result still
/// reaches it, the records after it are imported, and the conversation reads back.
#[test]
fn claude_tool_input_nested_deeper_than_a_part_may_is_kept_as_text() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("in");
    std::fs::create_dir_all(&root).unwrap();
    let id = "5e1f0c1d-0000-4000-8000-000000000002";
    // 122 levels of input: the tool part would nest 123 (its own object first).
    let levels = 122;
    let input = "[".repeat(levels) + "\"deep\"" + &"]".repeat(levels);
    let line = |uuid: &str, parent: &str, at: u32, body: &str| {
        format!(
            r#"{{"sessionId":"{id}","uuid":"{uuid}","parentUuid":{parent},"timestamp":"2026-01-01T00:00:0{at}.000Z",{body}}}"#
        )
    };
    let lines = [
        line(
            "u1",
            "null",
            0,
            r#""type":"user","message":{"role":"user","content":"probe"}"#,
        ),
        line(
            "a1",
            r#""u1""#,
            1,
            &format!(
                r#""type":"assistant","requestId":"r1","message":{{"id":"m1","role":"assistant","model":"claude-sonnet-4-5","content":[{{"type":"tool_use","id":"toolu_1","name":"Probe","input":{input}}}],"stop_reason":"tool_use","usage":{{"input_tokens":3,"output_tokens":2}}}}"#
            ),
        ),
        line(
            "u2",
            r#""a1""#,
            2,
            r#""type":"user","message":{"role":"user","content":[{"type":"tool_result","tool_use_id":"toolu_1","content":"probed"}]}"#,
        ),
        line(
            "a2",
            r#""u2""#,
            3,
            r#""type":"assistant","requestId":"r2","message":{"id":"m2","role":"assistant","model":"claude-sonnet-4-5","content":[{"type":"text","text":"after the deep call"}],"stop_reason":"end_turn","usage":{"input_tokens":4,"output_tokens":5}}"#,
        ),
    ];
    assert!(serde_json::from_str::<serde_json::Value>(&lines[1]).is_ok());
    std::fs::write(root.join(format!("{id}.jsonl")), lines.join("\n") + "\n").unwrap();

    let db = scribe_db(dir.path());
    let s = run(&db, Source::ClaudeCode, &[root]);
    assert!(s.malformed.is_empty(), "{:?}", s.malformed);
    assert!(s.failed.is_empty(), "{:?}", s.failed);
    let stored = messages(&db, id);
    let all: Vec<&scribe_message::StoredPart> = stored.iter().flat_map(|m| &m.parts).collect();
    let tool = all
        .iter()
        .find_map(|p| match &p.part {
            scribe_message::Part::Tool(t) => Some(t),
            _ => None,
        })
        .expect("the deep call is stored");
    assert_eq!(tool.call_id, "toolu_1");
    assert_eq!(tool.state.output(), Some("probed"));
    let json = scribe_message::Part::Tool(tool.clone()).to_json().unwrap();
    assert_eq!(
        scribe_message::part::json_depth(&json),
        scribe_message::MAX_PART_DEPTH
    );
    // Levels 2..=MAX_PART_DEPTH as they were, the rest as its text.
    let mut inner = &tool.input;
    for _ in 2..=scribe_message::MAX_PART_DEPTH {
        inner = &inner.as_array().unwrap()[0];
    }
    let rest = levels - (scribe_message::MAX_PART_DEPTH - 1);
    assert_eq!(
        inner.as_str().unwrap(),
        "[".repeat(rest) + "\"deep\"" + &"]".repeat(rest)
    );
    assert!(
        stored.iter().any(|m| m.text() == "after the deep call"),
        "{stored:?}"
    );
}

/// A Codex rollout whose session id (its `session_meta` line's) is 3,000 bytes (a
/// hand-edited or another program's file), next to an ordinary one: that session fails
/// alone, reported in `failed_sessions` (not as a failed file) with the kind and length,
/// and the other is imported.
/// Before, SQLite stored the id and PostgreSQL refused it with a raw message, which
/// stopped the whole import.
#[test]
fn a_session_id_longer_than_an_id_may_be_fails_that_session_alone() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("sessions");
    let fine = long_and_fine_rollouts(&root);
    let db = scribe_db(dir.path());
    let s = run(&db, Source::Codex, &[root]);
    // The file was read (its other sessions, had it any, are imported): a failed
    // session, not a failed file.
    assert!(s.failed.is_empty(), "{:?}", s.failed);
    assert_eq!(s.files_read, 2);
    let failed = &s.failed_sessions;
    assert_eq!(failed.len(), 1, "{failed:?}");
    assert!(failed[0].path.ends_with("long.jsonl"), "{failed:?}");
    assert_eq!(
        failed[0].error,
        format!(
            "session id {}… is 3000 bytes long, more than the 1024 an id may have",
            "7".repeat(24)
        )
    );
    let ids: Vec<String> = sessions(&db).into_iter().map(|s| s.id).collect();
    assert_eq!(ids, [fine]);
    assert_eq!(messages(&db, fine).len(), 1);
}

/// A Hermes session whose id (1,020 bytes, within the id limit) another source's session
/// already has: it is imported as `hermes-<id>` cut to the limit with a hash of the whole
/// id (`scribe_import::ids::clash_session_id`), not refused. Before, the prefix made an id
/// of 1,027 bytes and the session failed with `IdTooLong`.
#[test]
fn a_clashing_session_id_near_the_limit_is_imported_within_it() {
    use scribe_db::ids::MAX_ID_BYTES;
    let dir = tempfile::tempdir().unwrap();
    let home = dir.path().join("hermes");
    let dir_sessions = home.join("sessions");
    std::fs::create_dir_all(&dir_sessions).unwrap();
    let id = format!("20260101_{}", "a".repeat(MAX_ID_BYTES - 13));
    assert!(id.len() <= MAX_ID_BYTES && id.len() + "hermes-".len() > MAX_ID_BYTES);
    let db = scribe_db(dir.path());
    db.write(|tx| -> scribe_db::Result<()> {
        tx.q()
            .create_session(&scribe_db::testing::bare_session(&id, "cli", 1))
            .map(|_| ())
    })
    .unwrap();
    let doc = format!(
        r#"{{"session_id":"{id}","session_start":"2026-01-01T00:00:00Z","last_updated":"2026-01-01T00:01:00Z","messages":[{{"role":"user","content":"hi"}}]}}"#
    );
    std::fs::write(dir_sessions.join("session_20260101_clash.json"), doc).unwrap();
    let s = run(&db, Source::Hermes, &[home]);
    assert!(s.failed.is_empty(), "{:?}", s.failed);
    assert!(s.failed_sessions.is_empty(), "{:?}", s.failed_sessions);
    let expected = scribe_import::ids::clash_session_id(Source::Hermes, &id);
    assert_eq!(expected.len(), MAX_ID_BYTES);
    let imported: Vec<_> = sessions(&db)
        .into_iter()
        .filter(|x| x.id != id)
        .map(|x| x.id)
        .collect();
    assert_eq!(imported, std::slice::from_ref(&expected));
    assert_eq!(messages(&db, &expected).len(), 1);
}

/// Every importer, given each of its fixture files cut short at a few places, and files
/// where its history should be holding JSON of the wrong shape, finishes: what it cannot
/// read is reported (malformed, failed, skipped) or left for a later import, never a panic
/// and never an error that stops the run.
#[test]
fn every_importer_survives_its_files_cut_short_and_of_the_wrong_shape() {
    let dir = tempfile::tempdir().unwrap();
    let home = home(dir.path());
    let wrong_json = r#"{"id":5,"messages":[1,"x",null,{"role":7,"content":{"a":1},"usage":"lots"}],"usageLedger":{"events":[{"toMessageId":"x","tokens":[]}]},"tokenUsage":3}"#;
    let wrong_lines = concat!(
        r#"{"type":"message","message":7,"id":[]}"#,
        "\n[1,2]\n\"x\"\n",
        r#"{"type":5,"timestamp":{"a":1},"payload":null}"#,
        "\n",
        r#"{"type":"session_start","id":7,"cwd":[]}"#,
        "\n",
        r#"{"type":"message","id":"m","message":{"role":"assistant","content":[{"type":"tool_use","id":9,"input":"?"},{"type":"thinking"},7]}}"#,
        "\n",
        r#"{"type":"message","id":"n","message":{"role":"user","content":[{"type":"tool_result","tool_use_id":9,"content":{"deep":[1]}}]}}"#,
        "\n",
        r#"{"type":"assistant","uuid":5,"message":{"parts":[{"functionCall":7},{"text":9},{"functionCall":{"id":[],"args":"?"}}]},"usageMetadata":"lots"}"#,
        "\n",
        r#"{"type":"tool_result","uuid":"t","message":{"parts":[{"functionResponse":{"id":[],"response":5}}]},"toolCallResult":7}"#,
        "\n",
        r#"{"type":"system","subtype":"chat_compression","systemPayload":{"compressedHistory":[{"parts":[{"text":"s"}]},7,{"parts":"x"}]}}"#,
        "\n",
        r#"{"type":"system","subtype":"rewind","uuid":"r","parentUuid":7}"#,
        "\n",
        r#"{"timestamp":"x","message":{"type":"ToolCallPart","payload":{"arguments_part":7}}}"#,
        "\n",
        r#"{"timestamp":1e300,"message":{"type":"SubagentEvent","payload":{"agent_id":"a","event":{"type":"SubagentEvent","payload":{"agent_id":"b","event":7}}}}}"#,
        "\n",
        r#"{"type":"context.append_loop_event","event":{"type":"tool.result","toolCallId":[],"result":"?"},"time":"now"}"#,
        "\n",
    );
    let mut runs = 0;
    for source in Source::ALL {
        let importer = scribe_import::sources::importer(source);
        for root in importer.default_roots(&env(&home, &[])) {
            let mut files = Vec::new();
            importer.discover(&root, &mut files).unwrap();
            for file in &files {
                let bytes = std::fs::read(file).unwrap();
                // A root that is a file (Aider's logs) is copied by its name.
                let rel = match file.strip_prefix(&root).unwrap() {
                    r if r.as_os_str().is_empty() => {
                        std::path::Path::new(file.file_name().unwrap())
                    }
                    r => r,
                };
                let mut variants: Vec<(String, Vec<u8>)> = [3, 2]
                    .iter()
                    .map(|d| (format!("cut{d}"), bytes[..bytes.len() / d].to_vec()))
                    .collect();
                let name = file.to_string_lossy();
                if name.ends_with(".json") {
                    variants.push(("shape".into(), wrong_json.as_bytes().to_vec()));
                } else if name.contains(".jsonl") {
                    variants.push(("shape".into(), wrong_lines.as_bytes().to_vec()));
                }
                for (what, content) in variants {
                    let at = dir.path().join(format!("{source}/{runs}-{what}"));
                    let copy = at.join(rel);
                    std::fs::create_dir_all(copy.parent().unwrap()).unwrap();
                    std::fs::write(&copy, content).unwrap();
                    // The files read with it (OpenHands' events, a Cline task's UI log)
                    // come along as they are.
                    for companion in importer.companions(file) {
                        let Ok(beside) = companion.strip_prefix(file.parent().unwrap()) else {
                            continue;
                        };
                        if companion.is_file() {
                            copy_tree(&companion, &copy.parent().unwrap().join(beside));
                        }
                    }
                    let db = scribe_db(&at.join("scribe"));
                    let s = run(&db, source, std::slice::from_ref(&at));
                    assert_eq!(s.files, 1, "{source} {}: {s:?}", copy.display());
                    runs += 1;
                }
            }
        }
    }
    assert!(runs > 100, "{runs}");
}

/// A Hermes session log whose `session_id` is empty (a hand-edited file, another
/// program's) beside two ordinary ones: that session fails alone, reported in
/// `failed_sessions`, and the others are imported. Before, the store refused the empty id
/// and the whole import stopped with nothing imported.
#[test]
fn an_empty_session_id_fails_that_session_alone() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("hermes");
    copy("hermes/sessions", &root.join("sessions"));
    let small = root.join("sessions/session_20260429_hermes_small.json");
    let mut doc: serde_json::Value =
        serde_json::from_slice(&std::fs::read(&small).unwrap()).unwrap();
    doc["session_id"] = "".into();
    std::fs::write(&small, serde_json::to_vec(&doc).unwrap()).unwrap();
    let db = scribe_db(dir.path());
    let s = run(&db, Source::Hermes, &[root]);
    assert!(s.failed.is_empty(), "{:?}", s.failed);
    let failed = &s.failed_sessions;
    assert_eq!(failed.len(), 1, "{failed:?}");
    assert!(failed[0].path.ends_with("hermes_small.json"), "{failed:?}");
    assert_eq!(failed[0].error, "session id is empty");
    let ids: Vec<String> = sessions(&db).into_iter().map(|s| s.id).collect();
    assert_eq!(ids.len(), 2, "{ids:?}");
    assert!(ids.iter().all(|id| !id.is_empty()), "{ids:?}");
}

/// Times no clock writes: a Cline request stamped 1e300 ms and one at the largest integer,
/// and a VS Code chat request answered `firstProgress` of `u64::MAX` ms after a time near
/// the largest integer. Each is imported; such a record takes the time of the one before
/// it (a time past the year 9999 is no time), so its session neither fails nor lists as
/// active for ever after. Before, one past the largest time was stored as a REAL no reader
/// could take, and the import stopped with nothing imported; VS Code's sum overflowed.
#[test]
fn times_past_the_year_9999_are_no_times() {
    let dir = tempfile::tempdir().unwrap();
    let cline = dir.path().join("cline");
    copy("cline/cli", &cline);
    let mut changed = 0;
    for task in std::fs::read_dir(cline.join("data/tasks")).unwrap() {
        let file = task.unwrap().path().join("api_conversation_history.json");
        let mut doc: serde_json::Value =
            serde_json::from_slice(&std::fs::read(&file).unwrap()).unwrap();
        let turns = doc.as_array_mut().unwrap();
        turns[1]["ts"] = serde_json::json!(1e300);
        turns[2]["ts"] = serde_json::json!(i64::MAX);
        std::fs::write(&file, serde_json::to_vec(&doc).unwrap()).unwrap();
        changed += 1;
    }
    assert!(changed > 0);
    let db = scribe_db(dir.path());
    let s = run(&db, Source::Cline, &[cline]);
    assert!(s.failed.is_empty() && s.failed_sessions.is_empty(), "{s:?}");
    let all = sessions(&db);
    assert_eq!(all.len(), changed);
    for session in &all {
        assert!(
            session.updated_at <= scribe_import::time::LATEST,
            "{session:?}"
        );
        let times: Vec<i64> = messages(&db, &session.id)
            .iter()
            .map(|m| m.created_at)
            .collect();
        assert!(
            times.iter().all(|t| *t <= scribe_import::time::LATEST),
            "{times:?}"
        );
        assert!(times.is_sorted(), "{times:?}");
    }

    let vscode = dir.path().join("vscode");
    let chats = vscode.join("emptyWindowChatSessions");
    std::fs::create_dir_all(&chats).unwrap();
    let doc = serde_json::json!({
        "version": 3,
        "sessionId": "far-off",
        "creationDate": 1_767_225_600_000_i64,
        "requests": [{
            "requestId": "r1",
            "timestamp": i64::MAX - 5,
            "message": {"text": "when?"},
            "response": [{"value": "now"}],
            "result": {"timings": {"firstProgress": u64::MAX, "totalElapsed": u64::MAX}},
        }],
    });
    std::fs::write(chats.join("far-off.json"), doc.to_string()).unwrap();
    let db = scribe_db(&dir.path().join("vscode-db"));
    let s = run(&db, Source::VsCode, &[vscode]);
    assert!(s.failed.is_empty() && s.failed_sessions.is_empty(), "{s:?}");
    let stored = messages(&db, "far-off");
    assert_eq!(stored.len(), 2, "{stored:?}");
    assert!(
        // The reply a millisecond after its request, as the file wrote them.
        stored.iter().all(|m| m.created_at - 1_767_225_600_000 <= 1),
        "{stored:?}"
    );
    assert_eq!(stored[1].finished_at, None, "{stored:?}");
}
