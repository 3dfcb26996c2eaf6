//! VS Code's chat: conversations found where VS Code keeps them (every workspace's and the
//! empty window's, from any folder a user may give), both of its file formats (the flat
//! JSON of builds before 1.109 and the append log after) read into faithful sessions (the
//! user's words, Copilot's reasoning, text and tool calls settled by their results, denied
//! and cancelled turns, failures, the folder), VS Code's files never changed, and a log
//! that grows read again storing nothing twice.
//!
//! Fixtures (`fixtures/vscode`): a `User` folder authored for Scribe after VS Code's own
//! types (fixtures/SOURCES.md).

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::path::{Path, PathBuf};

use common::*;
use scribe_import::{Source, sources};
use scribe_message::{Part, Role};

/// An agent conversation kept as a flat JSON file (VS Code before 1.109).
const FLAT: &str = "a3f1c2d4-5e6f-4a7b-8c9d-0e1f2a3b4c5d";
/// One kept as an append log (1.109 on), with the flat file it replaced beside it.
const LOG: &str = "b7e2d9f0-1c3a-4b5d-9e8f-7a6b5c4d3e2f";
/// One held in a window without a folder, in an older build's format.
const EMPTY_WINDOW: &str = "c4d5e6f7-8a9b-4c0d-8e1f-2a3b4c5d6e7f";

/// VS Code's `User` folder in a fresh home under `dir`: (the folder, the import's roots).
fn user(dir: &Path) -> (PathBuf, Vec<PathBuf>) {
    let home = dir.join("home");
    let user = home.join(".config/Code/User");
    vscode_user(&user);
    let roots = sources::importer(Source::VsCode).default_roots(&env(&home, &[]));
    (user, roots)
}

fn log_path(user: &Path) -> PathBuf {
    user.join("workspaceStorage")
        .join(VSCODE_WORKSPACE)
        .join("chatSessions")
        .join(format!("{LOG}.jsonl"))
}

#[test]
fn vscode_conversations_are_found_in_its_user_folder() {
    let dir = tempfile::tempdir().unwrap();
    let home = dir.path().join("home");
    let importer = sources::importer(Source::VsCode);
    if cfg!(target_os = "linux") {
        // None there yet: where VS Code's own build keeps it.
        assert_eq!(
            importer.default_roots(&env(&home, &[])),
            [home.join(".config/Code/User")]
        );
        let insiders = home.join(".config/Code - Insiders/User");
        std::fs::create_dir_all(&insiders).unwrap();
        assert_eq!(importer.default_roots(&env(&home, &[])), [insiders]);
        assert_eq!(
            importer.default_roots(&env(&home, &[("XDG_CONFIG_HOME", "/cfg")])),
            [PathBuf::from("/cfg/Code/User")]
        );
    }
    let (user, _) = user(dir.path());
    let sessions = user
        .join("workspaceStorage")
        .join(VSCODE_WORKSPACE)
        .join("chatSessions");
    let flat = sessions.join(format!("{FLAT}.json"));
    let log = log_path(&user);
    let empty = user
        .join("globalStorage/emptyWindowChatSessions")
        .join(format!("{EMPTY_WINDOW}.json"));
    let found = |root: &Path| {
        let mut out = Vec::new();
        importer.discover(root, &mut out).unwrap();
        out
    };
    // The log, never the flat file it replaced.
    assert_eq!(found(&user), [flat.clone(), log.clone(), empty.clone()]);
    assert_eq!(
        found(&user.join("workspaceStorage")),
        [flat.clone(), log.clone()]
    );
    assert_eq!(
        found(&user.join("workspaceStorage").join(VSCODE_WORKSPACE)),
        [flat.clone(), log.clone()]
    );
    assert_eq!(found(&sessions), [flat.clone(), log.clone()]);
    assert_eq!(found(&user.join("globalStorage")), [empty]);
    assert_eq!(found(&flat), std::slice::from_ref(&flat));
    // `--watch` watches the workspaces, not the rest of the busy `User` folder.
    assert_eq!(importer.watch_root(&user), user.join("workspaceStorage"));
    assert_eq!(importer.watch_root(&sessions), sessions);
}

#[test]
fn a_vscode_conversation_keeps_its_words_calls_failures_and_folder() {
    let dir = tempfile::tempdir().unwrap();
    let (_, roots) = user(dir.path());
    let db = scribe_db(dir.path());
    let s = run(&db, Source::VsCode, &roots);
    assert!(s.failed.is_empty() && s.malformed.is_empty(), "{s:?}");
    // What VS Code shows besides the conversation: the edits it applied, links to them,
    // undo points.
    for kind in [
        "response:textEditGroup",
        "response:codeblockUri",
        "response:undoStop",
    ] {
        assert_eq!(s.skipped.get(kind), Some(&1), "{kind}: {s:?}");
    }
    assert_eq!(s.written.sessions_created, 3, "{s:?}");

    let flat = session(&db, FLAT);
    assert_eq!(flat.source, "vscode");
    assert_eq!(flat.title.as_deref(), Some("Round the cart total once"));
    assert_eq!(flat.directory.as_deref(), Some("/home/dev/shop"));
    assert_eq!(flat.model.as_deref(), Some("claude-sonnet-4"));
    assert_eq!(flat.created_at, 1_767_258_000_000);
    // The failed turn's reply, which has no time of its own: its request's, a millisecond
    // on (the store keeps a conversation's messages in order).
    assert_eq!(flat.updated_at, 1_767_258_200_001);
    // No usage: what the file keeps is the last call's prompt, not the turn's.
    assert_eq!(flat.tokens.total(), 0);
    assert_eq!(flat.api_call_count, 0);
    assert_eq!(flat.estimated_cost_usd, 0.0);
    assert_eq!(
        texts(&db, FLAT)
            .into_iter()
            .map(|(role, text, synthetic)| {
                assert!(!synthetic);
                (role, text)
            })
            .collect::<Vec<_>>(),
        [
            (
                Role::User,
                "The cart total is off by a cent. #file:cart.ts".to_owned()
            ),
            (
                Role::Assistant,
                "Let me look at `cart.ts` first.".to_owned()
            ),
            (
                Role::Assistant,
                "Fixed: the total now rounds once, at the end.".to_owned()
            ),
            (
                Role::User,
                "Also drop the unused `formatPrice` helper.".to_owned()
            ),
            (
                Role::Assistant,
                "I'll remove it from `format.ts`.".to_owned()
            ),
            (Role::User, "Write a changelog entry.".to_owned()),
        ]
    );
    assert_eq!(
        tool_outcomes(&db, FLAT),
        [
            (
                "copilot_readFile".into(),
                "completed".into(),
                "export function total(lines) {\n  return lines.reduce((s, l) => s + \
                 round(l.price * l.qty), 0);\n}"
                    .into()
            ),
            (
                "run_in_terminal".into(),
                "error".into(),
                "FAIL src/cart.test.ts\n  expected 10.30, got 10.29".into()
            ),
            (
                "copilot_replaceString".into(),
                "error".into(),
                "the user denied the call".into()
            ),
        ]
    );
    let messages = messages(&db, FLAT);
    let parts: Vec<&Part> = messages
        .iter()
        .flat_map(|m| m.parts.iter().map(|p| &p.part))
        .collect();
    // The reasoning streamed in two chunks is one part, before what it led to.
    let reasoning: Vec<&str> = parts
        .iter()
        .filter_map(|p| match p {
            Part::Reasoning(r) => Some(r.text.as_str()),
            _ => None,
        })
        .collect();
    assert_eq!(
        reasoning,
        ["The total sums floats; rounding each line first drifts."]
    );
    assert!(matches!(messages[1].parts[0].part, Part::Reasoning(_)));
    // The calls' arguments are Copilot's.
    let inputs: Vec<serde_json::Value> = parts
        .iter()
        .filter_map(|p| match p {
            Part::Tool(t) => Some(t.input.clone()),
            _ => None,
        })
        .collect();
    assert_eq!(
        inputs[0],
        serde_json::json!({"filePath": "/home/dev/shop/src/cart.ts", "startLine": 1, "endLine": 80})
    );
    assert_eq!(inputs[1]["command"], "npm test -- cart");
    assert_eq!(inputs[2]["oldString"], "export function formatPrice");
    // Who replied, with which model, when; the cancelled turn and the failed one say so.
    let replies: Vec<_> = messages
        .iter()
        .filter(|m| m.role == Role::Assistant)
        .collect();
    assert_eq!(replies.len(), 3);
    assert_eq!(replies[0].created_at, 1_767_258_011_200);
    assert_eq!(replies[0].finished_at, Some(1_767_258_019_800));
    assert_eq!(
        replies[0].agent.as_deref(),
        Some("github.copilot.editsAgent")
    );
    assert_eq!(replies[0].error, None);
    assert_eq!(replies[1].error.as_ref().unwrap()["type"], "cancelled");
    let failed = replies[2].error.as_ref().unwrap();
    assert_eq!(failed["type"], "failed");
    assert_eq!(
        failed["message"],
        "Sorry, your request failed. Please try again."
    );
    assert_eq!(replies[2].model.as_deref(), Some("gpt-4.1"));
    assert!(replies[2].parts.is_empty());

    // The log: replayed to its last complete line; its flat predecessor never read.
    // Its title is the one VS Code generated, from the workspace's index of conversations
    // (which the user's own title above wins over).
    let log = session(&db, LOG);
    assert_eq!(log.title.as_deref(), Some("Debounce the search box"));
    assert_eq!(log.directory.as_deref(), Some("/home/dev/shop"));
    assert_eq!(log.model.as_deref(), Some("gpt-5-mini"));
    assert_eq!(
        texts(&db, LOG)
            .into_iter()
            .map(|t| (t.0, t.1))
            .collect::<Vec<_>>(),
        [
            (Role::User, "How do I debounce the search box?".to_owned()),
            (
                Role::Assistant,
                "Wrap the handler in a `debounce` of 300 ms.".to_owned()
            ),
            (Role::User, "And cancel it on unmount?".to_owned()),
            (
                Role::Assistant,
                "Return a cleanup that calls `cancel()`.".to_owned()
            ),
        ]
    );
    assert!(!dump(&db).contains("STALE"));
    assert_eq!(
        messages_of(&db, LOG, Role::Assistant)
            .iter()
            .map(|m| m.created_at)
            .collect::<Vec<_>>(),
        [1_767_344_410_800, 1_767_344_501_000]
    );

    // The empty window's, in a build's format before titles were the user's.
    let older = session(&db, EMPTY_WINDOW);
    assert_eq!(older.title.as_deref(), Some("Regex for ISO dates"));
    assert_eq!(older.directory, None);
    assert_eq!(older.model.as_deref(), Some("gpt-4o"));
    assert_eq!(older.created_at, 1_735_725_600_000);
    assert_eq!(texts(&db, EMPTY_WINDOW).len(), 2);
}

fn messages_of(
    db: &std::sync::Arc<scribe_db::Database>,
    id: &str,
    role: Role,
) -> Vec<scribe_message::Message> {
    messages(db, id)
        .into_iter()
        .filter(|m| m.role == role)
        .collect()
}

#[test]
fn vscodes_files_are_read_without_being_changed() {
    let dir = tempfile::tempdir().unwrap();
    let (user, roots) = user(dir.path());
    let db = scribe_db(dir.path());
    import_read_only(&db, Source::VsCode, &roots, &user);
}

/// Appends `text` to the conversation log of `user` (as VS Code appends its entries).
fn vscode_appends(user: &Path, text: &str) {
    use std::io::Write;
    let mut f = std::fs::OpenOptions::new()
        .append(true)
        .open(log_path(user))
        .unwrap();
    f.write_all(text.as_bytes()).unwrap();
}

#[test]
fn a_grown_vscode_log_is_read_again_storing_nothing_twice() {
    let dir = tempfile::tempdir().unwrap();
    let (user, roots) = user(dir.path());
    let db = scribe_db(dir.path());
    import_twice(&db, Source::VsCode, &roots);

    // VS Code finishes the entry it was writing and adds a turn.
    let turn = serde_json::json!({"kind": 2, "k": ["requests"], "v": [{
        "requestId": "request_b3", "timestamp": 1_767_344_600_000_i64,
        "message": {"text": "Thanks!", "parts": []},
        "response": [{"value": "You're welcome."}], "modelId": "copilot/gpt-5-mini",
        "modelState": {"value": 1}
    }]});
    vscode_appends(&user, &format!("}}\n{turn}\n"));
    let grown = run(&db, Source::VsCode, &roots);
    assert!(grown.malformed.is_empty(), "{grown:?}");
    assert_eq!(grown.written.messages_inserted, 2, "{grown:?}");
    assert_eq!(texts(&db, LOG).len(), 6);
    let settled = dump(&db);

    // VS Code compacts the log: the whole conversation, one first entry. Nothing changed.
    let whole = replayed(&std::fs::read(log_path(&user)).unwrap());
    std::fs::write(
        log_path(&user),
        format!("{}\n", serde_json::json!({"kind": 0, "v": whole})),
    )
    .unwrap();
    let compacted = run(&db, Source::VsCode, &roots);
    assert_eq!(compacted.files_read, 1, "{compacted:?}");
    assert_eq!(compacted.written.messages_inserted, 0, "{compacted:?}");
    assert_same(&settled, &dump(&db), "compacted");
}

/// The conversation the log in `bytes` holds, replayed with JSON pointers (the test's log
/// only sets, pushes to and deletes places that are there).
fn replayed(bytes: &[u8]) -> serde_json::Value {
    use serde_json::Value;
    let mut state = Value::Null;
    for line in std::str::from_utf8(bytes).unwrap().lines() {
        let e: Value = serde_json::from_str(line).unwrap();
        let path: Vec<String> = e["k"]
            .as_array()
            .map(|k| {
                k.iter()
                    .map(|s| s.as_str().map_or_else(|| s.to_string(), str::to_owned))
                    .collect()
            })
            .unwrap_or_default();
        let pointer = |p: &[String]| p.iter().map(|s| format!("/{s}")).collect::<String>();
        let (last, parent) = path
            .split_last()
            .map_or((None, &[][..]), |(l, p)| (Some(l), p));
        match e["kind"].as_i64().unwrap() {
            0 => state = e["v"].clone(),
            1 => {
                let at = state.pointer_mut(&pointer(parent)).unwrap();
                let key = last.unwrap();
                match at {
                    Value::Array(items) => items[key.parse::<usize>().unwrap()] = e["v"].clone(),
                    _ => {
                        at.as_object_mut()
                            .unwrap()
                            .insert(key.clone(), e["v"].clone());
                    }
                }
            }
            2 => {
                let items = state
                    .pointer_mut(&pointer(&path))
                    .unwrap()
                    .as_array_mut()
                    .unwrap();
                if let Some(i) = e["i"].as_u64() {
                    items.truncate(i as usize);
                }
                items.extend(e["v"].as_array().cloned().unwrap_or_default());
            }
            3 => {
                let at = state.pointer_mut(&pointer(parent)).unwrap();
                at.as_object_mut().unwrap().remove(last.unwrap());
            }
            other => panic!("kind {other}"),
        }
    }
    state
}

#[test]
fn a_file_that_is_not_a_vscode_conversation_fails_alone() {
    let dir = tempfile::tempdir().unwrap();
    let (user, roots) = user(dir.path());
    let folder = user
        .join("workspaceStorage")
        .join(VSCODE_WORKSPACE)
        .join("chatSessions");
    std::fs::write(folder.join("notes.json"), "[1, 2]").unwrap();
    std::fs::write(folder.join("broken.json"), "{\"requests\": [").unwrap();
    std::fs::write(
        folder.join("headless.jsonl"),
        "{\"kind\":1,\"k\":[\"customTitle\"],\"v\":\"x\"}\n",
    )
    .unwrap();
    let db = scribe_db(dir.path());
    let s = run(&db, Source::VsCode, &roots);
    let failed: Vec<String> = s.failed.iter().map(|f| f.error.clone()).collect();
    assert_eq!(failed.len(), 3, "{failed:?}");
    assert!(
        failed
            .iter()
            .all(|f| f.contains("is not a VS Code chat session")),
        "{failed:?}"
    );
    assert_eq!(sessions(&db).len(), 3);
}
