//! OpenHands: conversations found where its CLI keeps them, read into faithful sessions
//! (the user's words without what the agent context appended, images, signed reasoning, a
//! response's parallel calls as one reply, calls settled by their observations, a timeout
//! and a rejection failing theirs, the condenser's summary, the system prompt, the folder),
//! each reply's usage its response's (the cache and reasoning taken out of litellm's
//! counts), the cost reported only when every call has one, the calls no event names as
//! child sessions, its secrets never read, its files never changed, and a conversation that
//! grows read again storing nothing twice.
//!
//! Fixtures (`fixtures/openhands`): conversations authored for Scribe after the
//! software-agent SDK's own types (fixtures/SOURCES.md).

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::path::{Path, PathBuf};

use common::*;
use scribe_import::{Source, sources};
use scribe_message::{Part, Role};
use scribe_session::SessionKind;

/// A coding conversation, and a question with a title call no event names.
const CODING: &str = "4a3f1c0de9b74d2c8f6a5b4c3d2e1f00";
const QUESTION: &str = "7c2e9d41a8b34f5e9a1b2c3d4e5f6a7b";

/// OpenHands' folder in a fresh home under `dir`: (its conversations folder, the roots).
fn conversations(dir: &Path) -> (PathBuf, Vec<PathBuf>) {
    let home = dir.join("home");
    copy("openhands", &home.join(".openhands"));
    let roots = sources::importer(Source::OpenHands).default_roots(&env(&home, &[]));
    (home.join(".openhands/conversations"), roots)
}

fn close(a: f64, b: f64) -> bool {
    (a - b).abs() < 1e-9
}

#[test]
fn openhands_conversations_are_found_where_its_cli_keeps_them() {
    let dir = tempfile::tempdir().unwrap();
    let (folder, roots) = conversations(dir.path());
    assert_eq!(roots, std::slice::from_ref(&folder));
    let importer = sources::importer(Source::OpenHands);
    let expected = [
        folder.join(CODING).join("base_state.json"),
        folder.join(QUESTION).join("base_state.json"),
    ];
    for root in [folder.clone(), folder.parent().unwrap().to_owned()] {
        let mut found = Vec::new();
        importer.discover(&root, &mut found).unwrap();
        assert_eq!(found, expected, "from {}", root.display());
    }
    // A state file's companions are its events, in their order.
    let events = importer.companions(&expected[1]);
    assert_eq!(events.len(), 3);
    assert!(events[0].ends_with("events/event-00000-5d1e2f3a-0001-4b2c-8d9e-0a1b2c3d4e01.json"));
}

#[test]
fn an_openhands_conversation_keeps_its_words_calls_and_each_replys_usage() {
    let dir = tempfile::tempdir().unwrap();
    let (_, roots) = conversations(dir.path());
    let db = scribe_db(dir.path());
    let s = run(&db, Source::OpenHands, &roots);
    assert!(s.failed.is_empty() && s.malformed.is_empty(), "{s:?}");
    assert_eq!(
        s.skipped.get("ConversationStateUpdateEvent"),
        Some(&1),
        "{s:?}"
    );
    assert_eq!(s.skipped.get("PauseEvent"), Some(&1), "{s:?}");
    assert_eq!(sessions(&db).len(), 4);

    let coding = session(&db, CODING);
    assert_eq!(coding.source, "openhands");
    assert_eq!(coding.directory.as_deref(), Some("/home/dev/api"));
    assert_eq!(coding.model.as_deref(), Some("claude-sonnet-4-5-20250929"));
    assert_eq!(coding.created_at, 1_765_530_902_114);
    assert_eq!(coding.updated_at, 1_765_531_150_000);
    assert!(
        coding
            .system_prompt
            .as_deref()
            .is_some_and(|p| p.starts_with("You are OpenHands agent")),
        "{coding:?}"
    );
    assert_eq!(
        texts(&db, CODING),
        [
            (
                Role::User,
                "Add a /health endpoint to the API.".to_owned(),
                false
            ),
            (
                Role::Assistant,
                "I'll find the router first.".to_owned(),
                false
            ),
            (
                Role::Assistant,
                "Adding the endpoint, then running the tests.".to_owned(),
                false
            ),
            (
                Role::User,
                "The user wants a /health endpoint. app/health.py was created; the test run \
                 timed out."
                    .to_owned(),
                true
            ),
            (
                Role::User,
                "Skip the tests; wire the router into main.py.".to_owned(),
                false
            ),
            (
                Role::Assistant,
                "Editing routes.py to include it.".to_owned(),
                false
            ),
            (
                Role::Assistant,
                "Understood: I'll include the router from app/main.py instead.".to_owned(),
                false
            ),
        ]
    );
    assert_eq!(
        tool_outcomes(&db, CODING),
        [
            (
                "terminal".into(),
                "completed".into(),
                "app/routes.py:3:router = APIRouter()".into()
            ),
            (
                "file_editor".into(),
                "completed".into(),
                "File created successfully at: /home/dev/api/app/health.py".into()
            ),
            (
                "terminal".into(),
                "error".into(),
                "Command timed out after 120 seconds.".into()
            ),
            (
                "file_editor".into(),
                "error".into(),
                "Not routes.py: use app/main.py".into()
            ),
        ]
    );
    let stored = messages(&db, CODING);
    // A response's two calls are one reply.
    let tools_per_reply: Vec<usize> = stored
        .iter()
        .filter(|m| m.role == Role::Assistant)
        .map(|m| {
            m.parts
                .iter()
                .filter(|p| matches!(p.part, Part::Tool(_)))
                .count()
        })
        .collect();
    assert_eq!(tools_per_reply, [1, 2, 1, 0]);
    let reasoning: Vec<(&str, Option<&str>)> = stored
        .iter()
        .flat_map(|m| m.parts.iter())
        .filter_map(|p| match &p.part {
            Part::Reasoning(r) => Some((r.text.as_str(), r.signature.as_deref())),
            _ => None,
        })
        .collect();
    assert_eq!(
        reasoning,
        [
            (
                "FastAPI app: the router is where endpoints go.",
                Some("sig-oh-1")
            ),
            ("The user wants main.py, not routes.py.", None),
        ]
    );
    assert!(stored.iter().any(|m| m.is_summary));
    assert!(
        stored
            .iter()
            .flat_map(|m| m.parts.iter())
            .any(|p| matches!(&p.part, Part::File(f) if f.mime == "image/png"))
    );
    // What the agent context appended was sent, not said; the secrets are never read.
    let everything = dump(&db);
    assert!(!everything.contains("EXTRA_INFO"));
    assert!(!everything.contains("GITHUB_TOKEN"));

    // Each reply's usage is its response's, the cache and reasoning out of the prompt
    // and completion; the cost as OpenHands listed it per call.
    let replies: Vec<_> = stored
        .iter()
        .filter(|m| m.role == Role::Assistant)
        .collect();
    let u = &replies[0].usage;
    assert_eq!(
        (u.input, u.cache_read, u.cache_write, u.output),
        (1_000, 8_000, 3_000, 180)
    );
    assert!(
        close(replies[0].cost_usd, 0.01599),
        "{}",
        replies[0].cost_usd
    );
    assert!(
        replies
            .iter()
            .all(|m| m.model.as_deref() == Some("claude-sonnet-4-5-20250929")
                && m.provider.as_deref() == Some("anthropic"))
    );
    assert_eq!(coding.api_call_count, 4);
    assert_eq!(
        (
            coding.tokens.input,
            coding.tokens.output,
            coding.tokens.cache_read,
            coding.tokens.cache_write
        ),
        (4_000, 810, 35_400, 5_500)
    );
    assert!(
        close(coding.actual_cost_usd.unwrap(), 0.03753),
        "{coding:?}"
    );

    // The condenser's call, which no event names: a child session of its own.
    let condenser = session(
        &db,
        &format!("{CODING}:condenser:anthropic/claude-haiku-4-5-20251001"),
    );
    assert_eq!(condenser.kind, SessionKind::Task);
    assert_eq!(condenser.parent_session_id.as_deref(), Some(CODING));
    assert_eq!(
        condenser.model.as_deref(),
        Some("claude-haiku-4-5-20251001")
    );
    assert_eq!(
        (condenser.tokens.input, condenser.tokens.output),
        (6_000, 350)
    );
    assert!(close(condenser.actual_cost_usd.unwrap(), 0.00775));

    // A call OpenHands listed no cost for: estimated from the model, not reported.
    let question = session(&db, QUESTION);
    assert_eq!((question.tokens.input, question.tokens.output), (2_400, 60));
    assert_eq!(question.actual_cost_usd, None);
    assert!(close(question.estimated_cost_usd, 0.0066), "{question:?}");
    let title = session(
        &db,
        &format!("{QUESTION}:title-generator:openai/gpt-4o-mini"),
    );
    assert_eq!(title.kind, SessionKind::Title);
    assert_eq!(title.model.as_deref(), Some("gpt-4o-mini"));
}

#[test]
fn openhands_files_are_read_without_being_changed() {
    let dir = tempfile::tempdir().unwrap();
    let (folder, roots) = conversations(dir.path());
    let db = scribe_db(dir.path());
    import_read_only(&db, Source::OpenHands, &roots, &folder);
}

#[test]
fn a_grown_openhands_conversation_is_read_again_storing_nothing_twice() {
    let dir = tempfile::tempdir().unwrap();
    let (folder, roots) = conversations(dir.path());
    let db = scribe_db(dir.path());
    import_twice(&db, Source::OpenHands, &roots);

    // OpenHands writes two events more and the state with the new call's usage.
    let conversation = folder.join(QUESTION);
    std::thread::sleep(std::time::Duration::from_millis(20));
    std::fs::write(
        conversation.join("events/event-00003-5d1e2f3a-0004-4b2c-8d9e-0a1b2c3d4e04.json"),
        r#"{"kind":"MessageEvent","id":"5d1e2f3a-0004-4b2c-8d9e-0a1b2c3d4e04","timestamp":"2025-12-13T14:05:00.000000","source":"user","llm_message":{"role":"user","content":[{"type":"text","text":"And for POST requests?"}]}}"#,
    )
    .unwrap();
    std::fs::write(
        conversation.join("events/event-00004-5d1e2f3a-0005-4b2c-8d9e-0a1b2c3d4e05.json"),
        r#"{"kind":"MessageEvent","id":"5d1e2f3a-0005-4b2c-8d9e-0a1b2c3d4e05","timestamp":"2025-12-13T14:05:06.000000","source":"agent","llm_message":{"role":"assistant","content":[{"type":"text","text":"Never: POST is not idempotent."}]},"llm_response_id":"chatcmpl-oh-b2"}"#,
    )
    .unwrap();
    let state_path = conversation.join("base_state.json");
    let mut state: serde_json::Value =
        serde_json::from_slice(&std::fs::read(&state_path).unwrap()).unwrap();
    state["stats"]["usage_to_metrics"]["agent"]["token_usages"]
        .as_array_mut()
        .unwrap()
        .push(
            serde_json::json!({"model": "openai/gpt-4o", "prompt_tokens": 2_500,
            "completion_tokens": 20, "response_id": "chatcmpl-oh-b2"}),
        );
    std::fs::write(&state_path, state.to_string()).unwrap();

    let grown = run(&db, Source::OpenHands, &roots);
    assert!(
        grown.malformed.is_empty() && grown.failed.is_empty(),
        "{grown:?}"
    );
    assert_eq!(grown.written.messages_inserted, 2, "{grown:?}");
    let question = session(&db, QUESTION);
    assert_eq!((question.tokens.input, question.tokens.output), (4_900, 80));
    assert_eq!(question.api_call_count, 2);
    let settled = dump(&db);
    let repeat = run(&db, Source::OpenHands, &roots);
    assert_eq!(repeat.written.messages_inserted, 0, "{repeat:?}");
    assert_same(&settled, &dump(&db), "read twice");
}

#[test]
fn a_broken_event_is_reported_and_a_broken_state_fails_alone() {
    let dir = tempfile::tempdir().unwrap();
    let (folder, roots) = conversations(dir.path());
    // A broken event before the newest is malformed; the newest may still be written.
    std::fs::write(
        folder
            .join(CODING)
            .join("events/event-00014-0b7e1a52-0015-4c1e-9d3a-000000000015.json"),
        "{\"kind\": \"MessageEvent\", ",
    )
    .unwrap();
    std::fs::write(
        folder
            .join(CODING)
            .join("events/event-00015-0b7e1a52-0016-4c1e-9d3a-000000000016.json"),
        "{\"kind\": \"Mess",
    )
    .unwrap();
    std::fs::write(folder.join(QUESTION).join("base_state.json"), "[1, 2").unwrap();
    let db = scribe_db(dir.path());
    let s = run(&db, Source::OpenHands, &roots);
    let failed: Vec<&str> = s.failed.iter().map(|f| f.error.as_str()).collect();
    assert_eq!(failed.len(), 1, "{failed:?}");
    assert!(
        failed[0].contains("is not a state file of an OpenHands conversation"),
        "{failed:?}"
    );
    assert_eq!(s.malformed.len(), 1, "{:?}", s.malformed);
    assert!(
        s.malformed[0]
            .path
            .ends_with("0b7e1a52-0015-4c1e-9d3a-000000000015.json"),
        "{:?}",
        s.malformed
    );
    assert_eq!(s.skipped.get("event:being-written"), Some(&1), "{s:?}");
    assert_eq!(texts(&db, CODING).len(), 7);
}
