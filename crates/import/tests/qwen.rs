//! Qwen Code: session files found where Qwen keeps them, their conversation read into a
//! faithful session (a reply written in pieces as one message, tool calls settled by their
//! results, a rewind's abandoned branch kept and marked, a compaction's summary keeping
//! what Qwen goes on sending, a sub-agent's records in a task session of its own), token
//! totals equal to ccusage's, and a grown file read again storing nothing twice.
//!
//! Fixtures (`fixtures/qwen/projects`): a session authored for Scribe after Qwen Code's
//! `chatRecordingService.ts`, and three of jazzyalex/agent-sessions' (a rewound branch, two
//! records glued on one line, unknown record types); fixtures/SOURCES.md.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::path::PathBuf;

use common::*;
use scribe_import::{Source, sources};
use scribe_message::{Part, Role};
use scribe_session::SessionKind;

const ID: &str = "7d2f0c1a-5b3e-4c8d-9e1f-2a3b4c5d6e7f";
const REWOUND: &str = "019f0000-0000-7000-8000-000000000004";
const GLUED: &str = "019f0000-0000-7000-8000-000000000005";

fn projects(dir: &std::path::Path) -> PathBuf {
    let projects = dir.join("qwen/projects");
    copy("qwen/projects", &projects);
    projects
}

#[test]
fn qwen_sessions_are_found_where_qwen_keeps_them() {
    let dir = tempfile::tempdir().unwrap();
    let home = dir.path().join("home");
    let roots =
        |vars: &[(&str, &str)]| sources::importer(Source::Qwen).default_roots(&env(&home, vars));
    assert_eq!(roots(&[]), [home.join(".qwen/projects")]);
    assert_eq!(
        roots(&[("QWEN_DATA_DIR", "/srv/a, /srv/b")]),
        [
            PathBuf::from("/srv/a/projects"),
            PathBuf::from("/srv/b/projects")
        ]
    );
    // The transcripts in the projects' `chats` folders only.
    let projects = projects(dir.path());
    let chats = projects.join("-home-dev-shop/chats");
    std::fs::create_dir_all(chats.join(ID)).unwrap();
    std::fs::write(chats.join(ID).join("tool-output.jsonl"), "{}\n").unwrap();
    std::fs::write(projects.join("-home-dev-shop/memory.jsonl"), "{}\n").unwrap();
    let mut found = Vec::new();
    sources::importer(Source::Qwen)
        .discover(&projects, &mut found)
        .unwrap();
    let names: Vec<String> = found
        .iter()
        .map(|p| p.strip_prefix(&projects).unwrap().display().to_string())
        .collect();
    assert_eq!(
        names,
        [
            format!("-home-dev-shop/chats/{ID}.jsonl"),
            "-tmp-as-qwen-fixture/chats/019f0000-0000-7000-8000-000000000004.jsonl".into(),
            "-tmp-as-qwen-fixture/chats/019f0000-0000-7000-8000-000000000005.jsonl".into(),
            "-tmp-as-qwen-fixture/chats/019f0000-0000-7000-8000-000000000006.jsonl".into(),
        ]
    );
    // A file named on the command line is read whatever its folder.
    let mut one = Vec::new();
    let file = projects.join("-home-dev-shop/memory.jsonl");
    sources::importer(Source::Qwen)
        .discover(&file, &mut one)
        .unwrap();
    assert_eq!(one, [file]);
}

#[test]
fn a_qwen_session_keeps_its_conversation_calls_rewind_and_compaction() {
    let dir = tempfile::tempdir().unwrap();
    let projects = projects(dir.path());
    let db = scribe_db(dir.path());
    let s = run(&db, Source::Qwen, std::slice::from_ref(&projects));
    assert!(s.failed.is_empty() && s.malformed.is_empty(), "{s:?}");
    assert_eq!(s.skipped.get("system:ui_telemetry"), Some(&1), "{s:?}");

    let session = session(&db, ID);
    assert_eq!(session.source, "qwen");
    // The user's title over the one Qwen generated.
    assert_eq!(session.title.as_deref(), Some("Discount field for orders"));
    assert_eq!(session.directory.as_deref(), Some("/home/dev/shop"));
    assert_eq!(session.model.as_deref(), Some("qwen3-coder-plus"));
    // The prompt less the cache is input; the thoughts are reasoning.
    assert_eq!(
        (
            session.tokens.input,
            session.tokens.output,
            session.tokens.cache_read,
            session.tokens.reasoning
        ),
        (6_200, 440, 71_100, 40)
    );
    assert_eq!(session.api_call_count, 7);

    assert_eq!(
        texts(&db, ID),
        [
            (
                Role::User,
                "Add a discount field to the Order model".into(),
                false
            ),
            (Role::Assistant, "I'll read the model.".into(), false),
            (
                Role::Assistant,
                "The edit failed; retrying with the exact text.".into(),
                false
            ),
            (
                Role::Assistant,
                "Added `discount: int = 0` to Order.".into(),
                false
            ),
            (Role::User, "Also add a test".into(), false),
            (Role::Assistant, "Writing the test now.".into(), false),
            (Role::User, "Show me the diff instead".into(), false),
            (
                Role::Assistant,
                "<state_snapshot>Order gained a discount field; the user asked to see the diff.</state_snapshot>"
                    .into(),
                false
            ),
            // A notification Qwen sent for the user.
            (
                Role::User,
                "<task-notification>Background shell finished</task-notification>".into(),
                true
            ),
            (
                Role::Assistant,
                "Done: the diff shows the new field.".into(),
                false
            ),
        ]
    );
    assert_eq!(
        tool_outcomes(&db, ID),
        [
            (
                "read_file".into(),
                "completed".into(),
                "class Order:\n    total: int\n".into()
            ),
            (
                "edit".into(),
                "error".into(),
                "old_string was not found in /home/dev/shop/models.py".into()
            ),
            (
                "edit".into(),
                "completed".into(),
                "Edited /home/dev/shop/models.py".into()
            ),
            (
                "run_shell_command".into(),
                "completed".into(),
                "+    discount: int = 0".into()
            ),
        ]
    );

    let msgs = messages(&db, ID);
    // The reply written in two records is one message: its thought, its words, its call,
    // and the usage of the second record.
    let kinds: Vec<&str> = msgs[1]
        .parts
        .iter()
        .map(|p| match &p.part {
            Part::Reasoning(_) => "reasoning",
            Part::Text(_) => "text",
            Part::Tool(_) => "tool",
            _ => "other",
        })
        .collect();
    assert_eq!(kinds, ["reasoning", "text", "tool"]);
    assert_eq!(
        (msgs[1].usage.input, msgs[1].usage.cache_read),
        (3_000, 9_000)
    );
    // The rewind left the second prompt and its answer behind: kept, marked, their usage
    // still counted.
    let rewound: Vec<&str> = msgs
        .iter()
        .filter(|m| {
            m.error.as_ref().is_some_and(|e| {
                e["type"] == "rewound" && e["message"] == "undone by a rewind in Qwen Code"
            })
        })
        .map(|m| m.role.as_str())
        .collect();
    assert_eq!(rewound, ["user", "assistant"]);
    // The image sent with the third prompt.
    match &msgs[7].parts[1].part {
        Part::File(f) => assert_eq!(f.mime, "image/png"),
        other => panic!("{other:?}"),
    }
    // The compaction's summary: Qwen goes on sending the third prompt and what follows,
    // which its history repeats.
    let summary = msgs.iter().find(|m| m.is_summary).unwrap();
    match &summary.parts[0].part {
        Part::Compaction(c) => assert_eq!(c.keep_from.as_deref(), Some(msgs[7].id.as_str())),
        other => panic!("{other:?}"),
    }

    // The sub-agent's records: a task session of its own, under the session.
    let child = sessions(&db)
        .into_iter()
        .find(|s| s.parent_session_id.as_deref() == Some(ID))
        .unwrap();
    assert_eq!(child.kind, SessionKind::Task);
    assert_eq!(child.title.as_deref(), Some("Explore"));
    assert_eq!((child.tokens.input, child.tokens.output), (2_000, 50));
    assert_eq!(
        texts(&db, &child.id),
        [
            (Role::User, "Find every use of Order.total".into(), false),
            (
                Role::Assistant,
                "Order.total is read in checkout.py and invoice.py.".into(),
                false
            ),
        ]
    );
}

/// ccusage 20.0.24 (`ccusage qwen session --json --offline` over the fixtures laid out as
/// `~/.qwen`) counts a session's records with its sub-agents' and the cached prompt inside
/// its input as well as apart: Scribe's input plus cache read is ccusage's input. Its
/// output leaves the thoughts out, as Scribe's does. (It prices Qwen's models from
/// LiteLLM's tiered DashScope prices; Scribe's catalog has none, so the cost is unknown
/// until a catalog gives one.)
#[test]
fn qwen_token_totals_equal_ccusage() {
    let dir = tempfile::tempdir().unwrap();
    let projects = projects(dir.path());
    let db = scribe_db(dir.path());
    run(&db, Source::Qwen, std::slice::from_ref(&projects));
    for (id, want) in [(ID, (79_300, 490, 0, 71_100)), (REWOUND, (12, 4, 0, 0))] {
        let mut got = (0, 0, 0, 0);
        for s in sessions(&db)
            .iter()
            .filter(|s| s.id == id || s.parent_session_id.as_deref() == Some(id))
        {
            let t = s.tokens;
            got.0 += t.input + t.cache_read;
            got.1 += t.output;
            got.2 += t.cache_write;
            got.3 += t.cache_read;
            if !t.is_zero() {
                assert_eq!(s.cost_status.as_deref(), Some("unknown"), "{}", s.id);
            }
        }
        assert_eq!(got, want, "{id}");
    }
}

#[test]
fn a_rewound_branch_glued_records_and_unknown_types_are_read_as_qwen_reads_them() {
    let dir = tempfile::tempdir().unwrap();
    let projects = projects(dir.path());
    let db = scribe_db(dir.path());
    let s = run(&db, Source::Qwen, std::slice::from_ref(&projects));
    assert!(s.malformed.is_empty(), "{s:?}");
    for skipped in [
        "session_checkpoint",
        "system:quantum_flux",
        "system:session_artifact_snapshot",
    ] {
        assert_eq!(s.skipped.get(skipped), Some(&1), "{skipped}: {s:?}");
    }

    // The answer on the branch the rewind left is marked; the active branch's reply (two
    // records of one uuid) is one message.
    let msgs = messages(&db, REWOUND);
    let summary: Vec<(Role, bool, usize)> = msgs
        .iter()
        .map(|m| (m.role, m.error.is_some(), m.parts.len()))
        .collect();
    assert_eq!(
        summary,
        [
            (Role::User, false, 1),
            (Role::Assistant, true, 1),
            (Role::User, false, 1),
            (Role::Assistant, false, 3),
        ]
    );
    assert_eq!(msgs[3].model.as_deref(), Some("synthetic-active-model"));
    // A title the user gave outranks a generated one, even from the abandoned branch (as
    // Qwen keeps a manual title).
    let rewound = session(&db, REWOUND);
    assert_eq!(rewound.title.as_deref(), Some("Discarded branch title"));
    assert_eq!(
        rewound.directory.as_deref(),
        Some("/tmp/as-qwen-fixture/old-project")
    );

    // Two records glued on one line: both read.
    assert_eq!(
        texts(&db, GLUED),
        [
            (
                Role::User,
                r#"Inspect {"glued": "objects"} safely."#.into(),
                false
            ),
            (
                Role::Assistant,
                "Recovered both synthetic objects.".into(),
                false
            ),
        ]
    );
}

#[test]
fn a_grown_qwen_session_is_read_again_and_nothing_is_stored_twice() {
    let dir = tempfile::tempdir().unwrap();
    let projects = projects(dir.path());
    let file = projects.join(format!("-home-dev-shop/chats/{ID}.jsonl"));
    let db = scribe_db(dir.path());
    run(&db, Source::Qwen, std::slice::from_ref(&projects));
    let before = dump(&db);
    let again = run(&db, Source::Qwen, std::slice::from_ref(&projects));
    assert_eq!(again.files_unchanged, 4, "{again:?}");
    assert_same(&dump(&db), &before, "unchanged files");
    let count = messages(&db, ID).len();

    // The last reply goes on in a record of its uuid (a call), its result arrives, and a
    // line is still being written.
    let last = std::fs::read_to_string(&file)
        .unwrap()
        .lines()
        .rfind(|l| l.contains(r#""type":"assistant""#))
        .unwrap()
        .to_owned();
    let uuid = serde_json::from_str::<serde_json::Value>(&last).unwrap()["uuid"]
        .as_str()
        .unwrap()
        .to_owned();
    let mut text = std::fs::read_to_string(&file).unwrap();
    text.push_str(&format!(
        concat!(
            r#"{{"uuid":"{uuid}","parentUuid":null,"sessionId":"{id}","timestamp":"2026-11-20T09:01:20.000Z","type":"assistant","model":"qwen3-coder-plus","message":{{"role":"model","parts":[{{"functionCall":{{"id":"call_9","name":"read_file","args":{{"absolute_path":"/home/dev/shop/tests.py"}}}}}}]}},"usageMetadata":{{"promptTokenCount":1600,"candidatesTokenCount":25}}}}"#,
            "\n",
            r#"{{"uuid":"0b1c9999-0000-4000-8000-000000009999","parentUuid":"{uuid}","sessionId":"{id}","timestamp":"2026-11-20T09:01:21.000Z","type":"tool_result","message":{{"role":"user","parts":[{{"functionResponse":{{"id":"call_9","name":"read_file","response":{{"output":"def test_total(): ..."}}}}}}]}},"toolCallResult":{{"status":"success"}}}}"#,
            "\n",
            r#"{{"uuid":"0b1c"#,
        ),
        uuid = uuid,
        id = ID,
    ));
    std::fs::write(&file, text).unwrap();
    let grown = run(&db, Source::Qwen, std::slice::from_ref(&projects));
    assert!(grown.malformed.is_empty(), "{grown:?}");
    assert_eq!(grown.written.messages_inserted, 0, "{grown:?}");
    let msgs = messages(&db, ID);
    assert_eq!(msgs.len(), count);
    let reply = msgs.last().unwrap();
    assert_eq!(reply.parts.len(), 2);
    // The usage of the reply's newest record.
    assert_eq!((reply.usage.input, reply.usage.output), (1_600, 25));
    assert_eq!(
        tool_outcomes(&db, ID).last().unwrap(),
        &(
            "read_file".to_owned(),
            "completed".to_owned(),
            "def test_total(): ...".to_owned()
        )
    );
}

/// A `/branch` copies the session so far into a new file, each copied record naming the
/// original (`forkedFrom`): the copies stay with the original, and the new session is its
/// fork, holding what came after the branch.
#[test]
fn a_branch_is_a_fork_of_the_session_it_copied() {
    const FORK: &str = "019f0000-0000-7000-8000-000000000006";
    const ORIGINAL: &str = "019f0000-0000-7000-8000-000000000001";
    let dir = tempfile::tempdir().unwrap();
    let projects = projects(dir.path());
    std::fs::write(
        projects.join(format!("-tmp-as-qwen-fixture/chats/{ORIGINAL}.jsonl")),
        format!(
            concat!(
                r#"{{"uuid":"bbbb0000-0000-4000-8000-000000000009","parentUuid":null,"sessionId":"{id}","#,
                r#""type":"user","timestamp":"2026-08-31T09:00:00.000Z","cwd":"/tmp/synthetic","#,
                r#""version":"0.22.3","message":{{"role":"user","parts":[{{"text":"synthetic forked prompt"}}]}}}}"#,
                "\n"
            ),
            id = ORIGINAL
        ),
    )
    .unwrap();
    let db = scribe_db(dir.path());
    let s = run(&db, Source::Qwen, std::slice::from_ref(&projects));
    assert_eq!(s.skipped.get("replayed-parent-history"), Some(&1), "{s:?}");

    let fork = session(&db, FORK);
    assert_eq!(fork.kind, SessionKind::Fork);
    assert_eq!(fork.parent_session_id.as_deref(), Some(ORIGINAL));
    assert_eq!(
        texts(&db, FORK),
        [(Role::Assistant, "synthetic reply".into(), false)]
    );
    assert_eq!(
        texts(&db, ORIGINAL),
        [(Role::User, "synthetic forked prompt".into(), false)]
    );
}
