//! Continue: sessions found where Continue keeps them, read into faithful sessions (the
//! user's words without the context attached to them, reasoning, tool calls settled by
//! the tool messages or their recorded state, images, the models the replies came from,
//! the folder), dated by Continue's list of sessions (or, for a session it does not list,
//! by the first import), Continue's files never changed, and a session that grows read
//! again storing nothing twice.
//!
//! Fixtures (`fixtures/continue`): sessions authored for Scribe after Continue's own types
//! (fixtures/SOURCES.md).

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::path::{Path, PathBuf};

use common::*;
use scribe_import::{Source, sources};
use scribe_message::{Part, Role};

/// An agent session Continue lists.
const LISTED: &str = "b1c2d3e4-f5a6-4b7c-8d9e-0f1a2b3c4d5e";
/// A chat Continue's list lacks, under its placeholder title.
const UNLISTED: &str = "f9e8d7c6-b5a4-4c3d-9e2f-1a0b9c8d7e6f";

/// Continue's folder in a fresh home under `dir`: (its sessions folder, the import's roots).
fn sessions_dir(dir: &Path) -> (PathBuf, Vec<PathBuf>) {
    let home = dir.join("home");
    copy("continue", &home.join(".continue"));
    let roots = sources::importer(Source::Continue).default_roots(&env(&home, &[]));
    (home.join(".continue/sessions"), roots)
}

#[test]
fn continue_sessions_are_found_where_continue_keeps_them() {
    let dir = tempfile::tempdir().unwrap();
    let home = dir.path().join("home");
    let importer = sources::importer(Source::Continue);
    assert_eq!(
        importer.default_roots(&env(&home, &[])),
        [home.join(".continue/sessions")]
    );
    assert_eq!(
        importer.default_roots(&env(&home, &[("CONTINUE_GLOBAL_DIR", "/cont")])),
        [PathBuf::from("/cont/sessions")]
    );
    let (folder, roots) = sessions_dir(dir.path());
    assert_eq!(roots, std::slice::from_ref(&folder));
    let expected = [
        folder.join(format!("{LISTED}.json")),
        folder.join(format!("{UNLISTED}.json")),
    ];
    for root in [folder.clone(), folder.parent().unwrap().to_owned()] {
        let mut found = Vec::new();
        importer.discover(&root, &mut found).unwrap();
        assert_eq!(found, expected, "from {}", root.display());
    }
}

#[test]
fn a_continue_session_keeps_its_words_calls_and_folder() {
    let dir = tempfile::tempdir().unwrap();
    let (_, roots) = sessions_dir(dir.path());
    let db = scribe_db(dir.path());
    let s = run(&db, Source::Continue, &roots);
    assert!(s.failed.is_empty() && s.malformed.is_empty(), "{s:?}");
    assert_eq!(s.skipped.get("message:system"), Some(&1), "{s:?}");

    let listed = session(&db, LISTED);
    assert_eq!(listed.source, "continue");
    assert_eq!(
        listed.title.as_deref(),
        Some("Refactor the payment retry loop")
    );
    assert_eq!(listed.directory.as_deref(), Some("/home/dev/payments"));
    assert_eq!(listed.model.as_deref(), Some("claude-sonnet-4-20250514"));
    assert_eq!(listed.created_at, 1_767_950_000_000);
    // Continue keeps no usage a reader can count.
    assert_eq!(listed.cost_status, None);
    assert_eq!(listed.tokens.total(), 0);
    assert_eq!(
        texts(&db, LISTED)
            .into_iter()
            .map(|t| (t.0, t.1))
            .collect::<Vec<_>>(),
        [
            (
                Role::User,
                "The retry loop in `charge.ts` never backs off. Fix it?".to_owned()
            ),
            (Role::Assistant, "Let me read it first.".to_owned()),
            (
                Role::Assistant,
                "Added exponential backoff (100 ms, doubling, capped at 5 s) with jitter."
                    .to_owned()
            ),
            (Role::User, "Now add a test.".to_owned()),
            (
                Role::Assistant,
                "Added `charge.test.ts` covering three retries.".to_owned()
            ),
        ]
    );
    assert_eq!(
        tool_outcomes(&db, LISTED),
        [
            (
                "read_file".into(),
                "completed".into(),
                "while (!ok) { ok = await charge(); }".into()
            ),
            (
                "edit_existing_file".into(),
                "error".into(),
                "Edit rejected: the file changed on disk".into()
            ),
        ]
    );
    let stored = messages(&db, LISTED);
    let parts: Vec<&Part> = stored
        .iter()
        .flat_map(|m| m.parts.iter().map(|p| &p.part))
        .collect();
    let reasoning: Vec<(&str, Option<&str>)> = parts
        .iter()
        .filter_map(|p| match p {
            Part::Reasoning(r) => Some((r.text.as_str(), r.signature.as_deref())),
            _ => None,
        })
        .collect();
    assert_eq!(
        reasoning,
        [
            (
                "It retries at once; exponential backoff with jitter.",
                Some("sig-continue-1")
            ),
            ("Use setTimeout with a doubled delay.", None),
        ]
    );
    assert!(
        parts
            .iter()
            .any(|p| matches!(p, Part::File(f) if f.mime == "image/png"))
    );
    assert!(
        parts
            .iter()
            .any(|p| matches!(p, Part::Tool(t) if t.input["filepath"] == "src/charge.ts"))
    );
    // What the user attached is what the model was sent, not what they said.
    assert!(!dump(&db).contains("```ts src/charge.ts"));
    assert_eq!(
        stored
            .iter()
            .filter(|m| m.role == Role::Assistant)
            .filter_map(|m| m.model.as_deref())
            .collect::<Vec<_>>(),
        [
            "claude-sonnet-4-20250514",
            "claude-sonnet-4-20250514",
            "gpt-4.1"
        ]
    );

    let unlisted = session(&db, UNLISTED);
    assert_eq!(unlisted.directory.as_deref(), Some("/home/dev/scratch"));
    assert_ne!(unlisted.title.as_deref(), Some("New Session"));
    assert_eq!(unlisted.model.as_deref(), Some("Llama 3.1 8B"));
}

#[test]
fn continues_files_are_read_without_being_changed() {
    let dir = tempfile::tempdir().unwrap();
    let (folder, roots) = sessions_dir(dir.path());
    let db = scribe_db(dir.path());
    import_read_only(&db, Source::Continue, &roots, &folder);
}

#[test]
fn a_grown_continue_session_is_read_again_storing_nothing_twice() {
    let dir = tempfile::tempdir().unwrap();
    let (folder, roots) = sessions_dir(dir.path());
    let db = scribe_db(dir.path());
    import_twice(&db, Source::Continue, &roots);

    // Continue writes the session again with a turn more; the unlisted one too, later:
    // its messages keep the start its first import gave them.
    for id in [LISTED, UNLISTED] {
        let path = folder.join(format!("{id}.json"));
        let mut doc: serde_json::Value =
            serde_json::from_slice(&std::fs::read(&path).unwrap()).unwrap();
        let history = doc["history"].as_array_mut().unwrap();
        history.push(serde_json::json!({"message": {"role": "user", "content": "Thanks!"}, "contextItems": []}));
        history.push(serde_json::json!({"message": {"role": "assistant", "content": "Any time."}, "contextItems": []}));
        std::thread::sleep(std::time::Duration::from_millis(20));
        std::fs::write(&path, doc.to_string()).unwrap();
    }
    let grown = run(&db, Source::Continue, &roots);
    assert!(
        grown.malformed.is_empty() && grown.failed.is_empty(),
        "{grown:?}"
    );
    assert_eq!(grown.written.messages_inserted, 4, "{grown:?}");
    assert_eq!(texts(&db, UNLISTED).len(), 4);
    let settled = dump(&db);
    let repeat = run(&db, Source::Continue, &roots);
    assert_eq!(repeat.written.messages_inserted, 0, "{repeat:?}");
    assert_same(&settled, &dump(&db), "read twice");
}

#[test]
fn a_file_that_is_not_a_continue_session_fails_alone() {
    let dir = tempfile::tempdir().unwrap();
    let (folder, roots) = sessions_dir(dir.path());
    std::fs::write(folder.join("notes.json"), "[1, 2]").unwrap();
    std::fs::write(folder.join("broken.json"), "{\"history\": [").unwrap();
    let db = scribe_db(dir.path());
    let s = run(&db, Source::Continue, &roots);
    let failed: Vec<&str> = s.failed.iter().map(|f| f.error.as_str()).collect();
    assert_eq!(failed.len(), 2, "{failed:?}");
    assert!(
        failed
            .iter()
            .all(|f| f.contains("is not a Continue session")),
        "{failed:?}"
    );
    assert_eq!(sessions(&db).len(), 2);
}
