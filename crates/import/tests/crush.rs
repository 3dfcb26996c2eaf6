//! Crush: each project's database found through the list Crush keeps of its projects,
//! read into faithful sessions (the user's words and attachments, reasoning, tool calls
//! settled by their results, a sub-agent's session under its parent's, cancelled and
//! failed replies, the summary, parts stored compressed), Crush's reported cost counted
//! once (a parent's less what it added of its children's), Crush's database never changed,
//! and a session that grows read again storing nothing twice.
//!
//! Fixtures (`fixtures/crush`): a dump authored for Scribe after Crush's own schema and
//! types (fixtures/SOURCES.md).

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::path::{Path, PathBuf};

use common::*;
use scribe_import::{Source, sources};
use scribe_message::{FinishReason, Part, Role};

/// A session of the user's with a sub-agent.
const MAIN: &str = "c7a1e3f0-2b4d-4e6f-8a1c-3d5e7f9a1b2c";
/// The sub-agent's session (Crush names it by its parent's message and the call).
const AGENT: &str = "m4-7e1d$$toolu_c3";
/// A session Crush kept no cost for, still under its placeholder title.
const UNPRICED: &str = "d2b4f6a8-1c3e-4a5b-9d7f-0e2c4a6b8d0f";

/// A fresh home under `dir` holding Crush's project: (the project's database, the import's
/// roots).
fn project(dir: &Path) -> (PathBuf, Vec<PathBuf>) {
    let home = dir.join("home");
    let db = crush_project(&home).join(".crush/crush.db");
    let roots = sources::importer(Source::Crush).default_roots(&env(&home, &[]));
    (db, roots)
}

#[test]
fn crush_projects_are_found_through_its_list_of_them() {
    let dir = tempfile::tempdir().unwrap();
    let home = dir.path().join("home");
    let importer = sources::importer(Source::Crush);
    if cfg!(target_os = "linux") {
        // Nothing listed yet: its global data folder, where the list would be.
        assert_eq!(
            importer.default_roots(&env(&home, &[])),
            [home.join(".local/share/crush")]
        );
        assert_eq!(
            importer.default_roots(&env(&home, &[("XDG_DATA_HOME", "/data")])),
            [PathBuf::from("/data/crush")]
        );
        assert_eq!(
            importer.default_roots(&env(&home, &[("CRUSH_GLOBAL_DATA", "/crush")])),
            [PathBuf::from("/crush")]
        );
    }
    let (db, roots) = project(dir.path());
    let data = db.parent().unwrap().to_owned();
    assert_eq!(roots, std::slice::from_ref(&data));
    let found = |root: &Path| {
        let mut out = Vec::new();
        importer.discover(root, &mut out).unwrap();
        out
    };
    for root in [
        data.clone(),
        data.parent().unwrap().to_owned(),
        db.clone(),
        home.join(".local/share/crush"),
    ] {
        assert_eq!(
            found(&root),
            std::slice::from_ref(&db),
            "from {}",
            root.display()
        );
    }
    // A project Crush lists whose folder is gone is not a root.
    let list = home.join(".local/share/crush/projects.json");
    let text = std::fs::read_to_string(&list).unwrap();
    let gone = text.replace(
        r#"{"projects":["#,
        r#"{"projects":[{"path":"/gone","data_dir":"/gone/.crush"},"#,
    );
    std::fs::write(&list, gone).unwrap();
    assert_eq!(importer.default_roots(&env(&home, &[])), [data]);
}

#[test]
fn a_crush_session_keeps_its_words_calls_and_reported_cost() {
    let dir = tempfile::tempdir().unwrap();
    let (db_path, roots) = project(dir.path());
    let db = scribe_db(dir.path());
    let s = run(&db, Source::Crush, &roots);
    assert!(s.failed.is_empty() && s.malformed.is_empty(), "{s:?}");
    assert_eq!(s.written.sessions_created, 3, "{s:?}");

    let main = session(&db, MAIN);
    assert_eq!(main.source, "crush");
    assert_eq!(main.title.as_deref(), Some("Add a dark mode toggle"));
    let project = db_path.parent().unwrap().parent().unwrap();
    assert_eq!(main.directory.as_deref(), project.to_str());
    assert_eq!(main.model.as_deref(), Some("claude-sonnet-4-5-20250929"));
    assert_eq!(main.created_at, 1_767_600_000_000);
    // Crush's cost, less the sub-agent's it added: its own replies are its model calls; no
    // tokens (Crush keeps only the last call's).
    assert_eq!(main.cost_status.as_deref(), Some("reported"));
    assert!(
        (main.actual_cost_usd.unwrap() - 0.042).abs() < 1e-12,
        "{main:?}"
    );
    assert_eq!(main.api_call_count, 4);
    assert_eq!(main.tokens.total(), 0);
    let agent = session(&db, AGENT);
    assert_eq!(agent.parent_session_id.as_deref(), Some(MAIN));
    assert_eq!(agent.title, None);
    assert!((agent.actual_cost_usd.unwrap() - 0.011).abs() < 1e-12);
    assert_eq!(agent.model.as_deref(), Some("claude-haiku-4-5-20251001"));

    assert_eq!(
        texts(&db, MAIN)
            .into_iter()
            .map(|t| (t.0, t.1))
            .collect::<Vec<_>>(),
        [
            (
                Role::User,
                "Add a dark mode toggle to the settings page.".to_owned()
            ),
            (
                Role::Assistant,
                "Let me look at the settings page.".to_owned()
            ),
            (
                Role::Assistant,
                "I'll ask a sub-agent where themes are defined.".to_owned()
            ),
            // Stored compressed.
            (
                Role::Assistant,
                "Added the toggle to `src/settings.tsx`, reading themes from `src/theme.ts`; \
                 the settings test passes now."
                    .to_owned()
            ),
            (Role::Assistant, "Let me also upd".to_owned()),
        ]
    );
    assert_eq!(
        tool_outcomes(&db, MAIN),
        [
            (
                "view".into(),
                "completed".into(),
                "export function Settings() {\n  return <Page title=\"Settings\" />;\n}".into()
            ),
            (
                "bash".into(),
                "error".into(),
                "1 failing: theme toggle missing".into()
            ),
            (
                "agent".into(),
                "completed".into(),
                "Themes live in src/theme.ts.".into()
            ),
        ]
    );
    let stored = messages(&db, MAIN);
    let parts: Vec<&Part> = stored
        .iter()
        .flat_map(|m| m.parts.iter().map(|p| &p.part))
        .collect();
    // The user's attachment, the reasoning with its signature, a call's input and metadata.
    assert!(parts.iter().any(|p| matches!(p,
        Part::File(f) if f.mime == "text/plain"
            && f.filename.as_deref() == Some("/home/dev/notes/design.txt"))));
    assert!(parts.iter().any(|p| matches!(p,
        Part::Reasoning(r) if r.signature.as_deref() == Some("sig-crush-1")
            && r.text.starts_with("The settings page reads"))));
    let view = parts
        .iter()
        .find_map(|p| match p {
            Part::Tool(t) if t.tool == "view" => Some(t),
            _ => None,
        })
        .unwrap();
    assert_eq!(view.input["file_path"], "/home/dev/notes/src/settings.tsx");
    match &view.state {
        scribe_message::ToolState::Completed { metadata, .. } => assert_eq!(metadata["lines"], 3),
        other => panic!("{other:?}"),
    }
    let replies: Vec<_> = stored
        .iter()
        .filter(|m| m.role == Role::Assistant)
        .collect();
    assert_eq!(replies[0].finish_reason, Some(FinishReason::ToolUse));
    assert_eq!(replies[0].provider.as_deref(), Some("anthropic"));
    assert_eq!(replies[0].finished_at, Some(1_767_600_006_000));
    assert_eq!(replies[2].finish_reason, Some(FinishReason::EndTurn));
    assert_eq!(replies[3].finish_reason, Some(FinishReason::Canceled));
    assert_eq!(replies[3].error.as_ref().unwrap()["type"], "cancelled");

    // No cost kept: no usage recorded, not a cost of nothing; the placeholder is no
    // title; a failed reply says why; the summary is one.
    let unpriced = session(&db, UNPRICED);
    assert_eq!(unpriced.cost_status, None, "{unpriced:?}");
    assert_eq!(unpriced.actual_cost_usd, None);
    assert_ne!(unpriced.title.as_deref(), Some("New Session"));
    let later = messages(&db, UNPRICED);
    let failed = later.iter().find(|m| m.error.is_some()).unwrap();
    assert_eq!(failed.error.as_ref().unwrap()["type"], "error");
    assert_eq!(
        failed.error.as_ref().unwrap()["message"],
        "Provider error: rate limit exceeded"
    );
    assert!(later.last().unwrap().is_summary);
}

#[test]
fn crushs_database_is_read_without_being_changed() {
    let dir = tempfile::tempdir().unwrap();
    let (db_path, roots) = project(dir.path());
    let folder = db_path.parent().unwrap();
    let db = scribe_db(dir.path());
    import_read_only(&db, Source::Crush, &roots, folder);
}

#[test]
fn a_grown_crush_session_is_read_again_storing_nothing_twice() {
    let dir = tempfile::tempdir().unwrap();
    let (db_path, roots) = project(dir.path());
    let db = scribe_db(dir.path());
    import_twice(&db, Source::Crush, &roots);

    // The user goes on; Crush adds a turn and what it cost.
    let conn = rusqlite::Connection::open(&db_path).unwrap();
    conn.execute_batch(&format!(
        "INSERT INTO messages VALUES ('m8-1', '{UNPRICED}', 'user', \
           '[{{\"type\":\"text\",\"data\":{{\"text\":\"And --fork-point?\"}}}}]', \
           NULL, 1767604100, 1767604100, NULL, NULL, 0); \
         INSERT INTO messages VALUES ('m8-2', '{UNPRICED}', 'assistant', \
           '[{{\"type\":\"text\",\"data\":{{\"text\":\"It finds where the branch forked.\"}}}}, \
             {{\"type\":\"finish\",\"data\":{{\"reason\":\"end_turn\",\"time\":1767604110}}}}]', \
           'gpt-5.4', 1767604101, 1767604110, 1767604110, 'openai', 0); \
         UPDATE sessions SET cost = 0.002, message_count = 6, updated_at = 1767604110 \
           WHERE id = '{UNPRICED}';"
    ))
    .unwrap();
    drop(conn);
    let grown = run(&db, Source::Crush, &roots);
    assert!(grown.malformed.is_empty(), "{grown:?}");
    assert_eq!(grown.written.messages_inserted, 2, "{grown:?}");
    let unpriced = session(&db, UNPRICED);
    assert!((unpriced.actual_cost_usd.unwrap() - 0.002).abs() < 1e-12);
    let settled = dump(&db);
    let repeat = run(&db, Source::Crush, &roots);
    assert_eq!(repeat.written.messages_inserted, 0, "{repeat:?}");
    assert_same(&settled, &dump(&db), "read twice");
}

#[test]
fn a_crush_message_that_cannot_be_read_is_reported_and_the_rest_imported() {
    let dir = tempfile::tempdir().unwrap();
    let (db_path, roots) = project(dir.path());
    rusqlite::Connection::open(&db_path)
        .unwrap()
        .execute_batch(&format!(
            "INSERT INTO messages VALUES ('bad-json', '{UNPRICED}', 'user', '[{{', NULL, \
               1767604000, 1767604000, NULL, NULL, 0); \
             INSERT INTO messages VALUES ('bad-zstd', '{UNPRICED}', 'user', \
               X'28b52ffd00010203', NULL, 1767604001, 1767604001, NULL, NULL, 0); \
             INSERT INTO messages VALUES ('not-a-list', '{UNPRICED}', 'user', '{{}}', NULL, \
               1767604002, 1767604002, NULL, NULL, 0);"
        ))
        .unwrap();
    let db = scribe_db(dir.path());
    let s = run(&db, Source::Crush, &roots);
    assert!(s.failed.is_empty(), "{s:?}");
    let errors: Vec<&str> = s.malformed.iter().map(|m| m.error.as_str()).collect();
    assert_eq!(errors.len(), 3, "{errors:?}");
    assert!(
        errors
            .iter()
            .any(|e| e.starts_with("message bad-zstd") && e.contains("not zstd"))
    );
    assert!(
        errors
            .iter()
            .any(|e| e.starts_with("message not-a-list") && e.ends_with("not a list"))
    );
    assert_eq!(sessions(&db).len(), 3);
    assert_eq!(texts(&db, UNPRICED).len(), 3);
}
