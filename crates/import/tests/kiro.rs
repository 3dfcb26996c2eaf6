//! Kiro CLI and the Amazon Q Developer CLI: both databases found where the CLIs keep them,
//! both generations of conversation tables read into faithful sessions (the user's words
//! without what the CLI adds, reasoning, tool calls settled by the results the next turn
//! carries, calls the user cancelled, the summary `/compact` wrote, the folder), the
//! database's secrets never read, the database never changed, and a conversation that
//! grows read again storing nothing twice.
//!
//! Fixtures (`fixtures/kiro`): dumps authored for Scribe after the CLI's own types
//! (fixtures/SOURCES.md).

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::path::{Path, PathBuf};

use common::*;
use scribe_import::{Source, sources};
use scribe_message::{Part, Role};

/// A Kiro conversation with tool calls.
const INFRA: &str = "3f6c9a1e-7b2d-4e8f-a1c3-5d7e9f1a3b5c";
/// One `/compact` summarized.
const WEB: &str = "8d1e4f7a-2c5b-4a9e-b3d6-0f2a4c6e8b1d";
/// An Amazon Q conversation from before `conversations_v2`.
const OLDER: &str = "5b7d9f1a-3c5e-4a7b-9d1f-2e4a6c8e0b2d";

/// Both databases in a fresh home under `dir`: (Kiro's, the import's roots).
fn databases(dir: &Path) -> (PathBuf, Vec<PathBuf>) {
    let home = dir.join("home");
    let kiro = home.join(".local/share/kiro-cli/data.sqlite3");
    build_db("kiro/kiro.sql", &kiro);
    build_db(
        "kiro/amazon-q.sql",
        &home.join(".local/share/amazon-q/data.sqlite3"),
    );
    let roots = sources::importer(Source::Kiro).default_roots(&env(&home, &[]));
    (kiro, roots)
}

#[test]
fn kiro_and_amazon_q_databases_are_found_where_the_clis_keep_them() {
    let dir = tempfile::tempdir().unwrap();
    let home = dir.path().join("home");
    let importer = sources::importer(Source::Kiro);
    if cfg!(target_os = "linux") {
        assert_eq!(
            importer.default_roots(&env(&home, &[])),
            [home.join(".local/share/kiro-cli")]
        );
        assert_eq!(
            importer.default_roots(&env(&home, &[("XDG_DATA_HOME", "/data")])),
            [PathBuf::from("/data/kiro-cli")]
        );
    }
    let (kiro, roots) = databases(dir.path());
    if cfg!(target_os = "linux") {
        assert_eq!(
            roots,
            [
                home.join(".local/share/kiro-cli"),
                home.join(".local/share/amazon-q")
            ]
        );
    }
    for root in [kiro.parent().unwrap().to_owned(), kiro.clone()] {
        let mut found = Vec::new();
        importer.discover(&root, &mut found).unwrap();
        assert_eq!(
            found,
            std::slice::from_ref(&kiro),
            "from {}",
            root.display()
        );
    }
}

#[test]
fn a_kiro_conversation_keeps_its_words_calls_and_folder() {
    let dir = tempfile::tempdir().unwrap();
    let (_, roots) = databases(dir.path());
    let db = scribe_db(dir.path());
    let s = run(&db, Source::Kiro, &roots);
    assert!(s.failed.is_empty() && s.malformed.is_empty(), "{s:?}");
    assert_eq!(s.written.sessions_created, 3, "{s:?}");

    let infra = session(&db, INFRA);
    assert_eq!(infra.source, "kiro");
    assert_eq!(infra.directory.as_deref(), Some("/home/dev/infra"));
    assert_eq!(infra.model.as_deref(), Some("claude-sonnet-4.5"));
    assert_eq!(infra.created_at, 1_772_442_000_000);
    assert_eq!(infra.updated_at, 1_772_442_092_000);
    // Kiro keeps no token counts: no usage recorded, not zeros.
    assert_eq!(infra.cost_status, None);
    assert_eq!(infra.tokens.total(), 0);
    assert_eq!(
        texts(&db, INFRA)
            .into_iter()
            .map(|t| (t.0, t.1))
            .collect::<Vec<_>>(),
        [
            (
                Role::User,
                "List the S3 buckets in this account.".to_owned()
            ),
            (Role::Assistant, "Let me check.".to_owned()),
            (Role::Assistant, "You have one bucket: `logs`.".to_owned()),
            (Role::User, "Delete it.".to_owned()),
            (Role::User, "No, wait: keep it.".to_owned()),
            (
                Role::Assistant,
                "Understood, I left `logs` alone.".to_owned()
            ),
        ]
    );
    assert_eq!(
        tool_outcomes(&db, INFRA),
        [
            (
                "use_aws".into(),
                "completed".into(),
                r#"{"Buckets":[{"Name":"logs"}]}"#.into()
            ),
            (
                "execute_bash".into(),
                "error".into(),
                "Tool use was cancelled by the user".into()
            ),
        ]
    );
    let stored = messages(&db, INFRA);
    let parts: Vec<&Part> = stored
        .iter()
        .flat_map(|m| m.parts.iter().map(|p| &p.part))
        .collect();
    assert!(parts.iter().any(|p| matches!(p,
        Part::Reasoning(r) if r.signature.as_deref() == Some("sig-kiro-1"))));
    assert!(parts.iter().any(|p| matches!(p,
        Part::Tool(t) if t.input["operation_name"] == "list-buckets")));
    // What the CLI adds to a prompt (its context files) is not the user's.
    assert!(!dump(&db).contains("deploy with care"));
    let first_reply = stored.iter().find(|m| m.role == Role::Assistant).unwrap();
    assert_eq!(first_reply.created_at, 1_772_442_000_500);
    assert_eq!(first_reply.finished_at, Some(1_772_442_003_000));

    // The summary `/compact` wrote is the session's.
    let web = session(&db, WEB);
    assert_eq!(web.directory.as_deref(), Some("/home/dev/web"));
    assert_eq!(web.model.as_deref(), Some("claude-haiku-4.5"));
    let summary = messages(&db, WEB)
        .into_iter()
        .find(|m| m.is_summary)
        .unwrap();
    assert!(matches!(&summary.parts[0].part,
        Part::Text(t) if t.text.starts_with("The user asked why the browser blocked")));

    // Amazon Q's older table: its conversation starts with its first prompt.
    let older = session(&db, OLDER);
    assert_eq!(older.directory.as_deref(), Some("/home/dev/tf"));
    assert_eq!(older.model.as_deref(), Some("claude-3.7-sonnet"));
    assert_eq!(older.created_at, 1_747_774_800_000);
    assert_eq!(texts(&db, OLDER).len(), 2);
}

#[test]
fn the_databases_are_read_without_their_secrets_or_any_change() {
    let dir = tempfile::tempdir().unwrap();
    let (kiro, roots) = databases(dir.path());
    let folder = kiro.parent().unwrap().parent().unwrap();
    let db = scribe_db(dir.path());
    import_read_only(&db, Source::Kiro, &roots, folder);
    let stored = dump(&db);
    for secret in ["SECRET-KIRO", "SECRET-COGNITO", "AKIA-SECRET"] {
        assert!(!stored.contains(secret), "{secret} reached the store");
    }
}

#[test]
fn a_grown_kiro_conversation_is_read_again_storing_nothing_twice() {
    let dir = tempfile::tempdir().unwrap();
    let (kiro, roots) = databases(dir.path());
    let db = scribe_db(dir.path());
    import_twice(&db, Source::Kiro, &roots);

    // The user goes on: the CLI writes the whole conversation again.
    let conn = rusqlite::Connection::open(&kiro).unwrap();
    let value: String = conn
        .query_row(
            "SELECT value FROM conversations_v2 WHERE conversation_id = ?1",
            [WEB],
            |r| r.get(0),
        )
        .unwrap();
    let mut state: serde_json::Value = serde_json::from_str(&value).unwrap();
    state["history"]
        .as_array_mut()
        .unwrap()
        .push(serde_json::json!({
            "user": {"additional_context": "", "env_context": {"env_state": null},
                     "content": {"Prompt": {"prompt": "Thanks!"}},
                     "timestamp": "2026-03-03T09:40:00.000Z", "images": null},
            "assistant": {"Response": {"message_id": "w-3", "content": "You're welcome."}},
            "request_metadata": null
        }));
    conn.execute(
        "UPDATE conversations_v2 SET value = ?1, updated_at = updated_at + 600000 \
         WHERE conversation_id = ?2",
        rusqlite::params![state.to_string(), WEB],
    )
    .unwrap();
    drop(conn);
    let grown = run(&db, Source::Kiro, &roots);
    assert!(grown.malformed.is_empty(), "{grown:?}");
    assert_eq!(grown.written.messages_inserted, 2, "{grown:?}");
    let settled = dump(&db);
    let repeat = run(&db, Source::Kiro, &roots);
    assert_eq!(repeat.written.messages_inserted, 0, "{repeat:?}");
    assert_same(&settled, &dump(&db), "read twice");
}

#[test]
fn a_conversation_that_cannot_be_read_is_reported_and_the_rest_imported() {
    let dir = tempfile::tempdir().unwrap();
    let (kiro, roots) = databases(dir.path());
    rusqlite::Connection::open(&kiro)
        .unwrap()
        .execute(
            "INSERT INTO conversations_v2 VALUES ('/home/dev/bad', 'bad', '{not json', 1, 2)",
            [],
        )
        .unwrap();
    let db = scribe_db(dir.path());
    let s = run(&db, Source::Kiro, &roots);
    assert!(s.failed.is_empty(), "{s:?}");
    let errors: Vec<&str> = s.malformed.iter().map(|m| m.error.as_str()).collect();
    assert_eq!(errors, ["the conversation of /home/dev/bad is not JSON"]);
    assert_eq!(sessions(&db).len(), 3);
}

/// Kiro CLI 2's sessions (`fixtures/kiro/sessions/cli`): a conversation with its metadata,
/// and a sub-agent's session it started.
const SHOP: &str = "4a8c2e6f-1b3d-4f5a-9c7e-2d4f6a8c0e1b";
const ROUTES: &str = "4a8c2e6f-1b3d-4f5a-9c7e-2d4f6a8c0e1c";

/// Kiro CLI 2's session folder in a fresh home under `dir`: (the folder, the home).
fn session_files(dir: &Path) -> (PathBuf, PathBuf) {
    let home = dir.join("home");
    let folder = home.join(".kiro/sessions/cli");
    copy("kiro/sessions/cli", &folder);
    (folder, home)
}

#[test]
fn kiro_cli_2_sessions_are_found_where_it_keeps_them() {
    let dir = tempfile::tempdir().unwrap();
    let (folder, home) = session_files(dir.path());
    let importer = sources::importer(Source::Kiro);
    // Where only the session folder exists, it is the root; `KIRO_HOME` moves it.
    assert_eq!(
        importer.default_roots(&env(&home, &[])),
        std::slice::from_ref(&folder)
    );
    let moved = dir.path().join("kiro-home");
    std::fs::create_dir_all(moved.join("sessions/cli")).unwrap();
    assert_eq!(
        importer.default_roots(&env(&home, &[("KIRO_HOME", moved.to_str().unwrap())])),
        [moved.join("sessions/cli")]
    );
    // Each session's conversation; its metadata is read with it, its lock file not at all,
    // and other JSON Lines files under `~/.kiro` are not taken for sessions.
    let other = home.join(".kiro/extensions/some.tool/events.jsonl");
    std::fs::create_dir_all(other.parent().unwrap()).unwrap();
    std::fs::write(&other, "{}\n").unwrap();
    for root in [home.join(".kiro"), folder.clone()] {
        let mut found = Vec::new();
        importer.discover(&root, &mut found).unwrap();
        assert_eq!(
            found,
            [
                folder.join(format!("{SHOP}.jsonl")),
                folder.join(format!("{ROUTES}.jsonl"))
            ]
        );
    }
    assert_eq!(
        importer.companions(&folder.join(format!("{SHOP}.jsonl"))),
        [folder.join(format!("{SHOP}.json"))]
    );
}

#[test]
fn a_kiro_cli_2_session_keeps_its_words_calls_usage_and_sub_agent() {
    let dir = tempfile::tempdir().unwrap();
    let (folder, _) = session_files(dir.path());
    let db = scribe_db(dir.path());
    let s = import_read_only(&db, Source::Kiro, std::slice::from_ref(&folder), &folder);
    assert!(s.failed.is_empty() && s.malformed.is_empty(), "{s:?}");
    assert_eq!(s.written.sessions_created, 2, "{s:?}");
    // `/clear`'s record: what came before it stays, as it was said.
    assert_eq!(s.skipped.get("Clear"), Some(&1), "{s:?}");

    let shop = session(&db, SHOP);
    assert_eq!(shop.source, "kiro");
    assert_eq!(shop.title.as_deref(), Some("Health check endpoint"));
    assert_eq!(shop.directory.as_deref(), Some("/home/dev/shop"));
    assert_eq!(shop.model.as_deref(), Some("claude-sonnet-4.5"));
    assert_eq!(shop.created_at, 1_795_514_400_000);
    assert_eq!(shop.updated_at, 1_795_514_801_000);
    assert_eq!(
        texts(&db, SHOP)
            .into_iter()
            .map(|t| (t.0, t.1))
            .collect::<Vec<_>>(),
        [
            (
                Role::User,
                "Add a health check endpoint to the API".to_owned()
            ),
            (Role::Assistant, "I'll look at the router first.".to_owned()),
            (
                Role::Assistant,
                "Added GET /health returning 200; the tests pass.".to_owned()
            ),
            (Role::User, "Also log each request".to_owned()),
            (
                Role::Assistant,
                "The edit did not apply; src/main.rs builds the app differently. I will \
                 read it first next time."
                    .to_owned()
            ),
            (Role::User, "What should we do next?".to_owned()),
            (
                Role::Assistant,
                "Add request logging with tower-http's TraceLayer in src/main.rs.".to_owned()
            ),
        ]
    );
    let outcomes = tool_outcomes(&db, SHOP);
    assert_eq!(
        outcomes
            .iter()
            .map(|(tool, state, _)| (tool.as_str(), state.as_str()))
            .collect::<Vec<_>>(),
        [
            ("read", "completed"),
            ("shell", "completed"),
            ("write", "error")
        ]
    );
    assert!(outcomes[0].2.starts_with("pub fn routes() -> Router {"));
    // A shell command's result is what it printed.
    assert_eq!(outcomes[1].2, "test result: ok. 12 passed");
    assert_eq!(
        outcomes[2].2,
        "oldStr was not found in /home/dev/shop/src/main.rs"
    );

    // Each turn's counts and calls on its last reply, which ends when the turn did; a
    // turn Kiro counted no tokens for has none.
    let stored = messages(&db, SHOP);
    let replies: Vec<_> = stored
        .iter()
        .filter(|m| m.role == Role::Assistant)
        .collect();
    assert_eq!(replies.len(), 6);
    assert_eq!(
        (replies[2].usage.input, replies[2].usage.output),
        (12_400, 860)
    );
    assert_eq!(replies[2].finished_at, Some(1_795_514_446_000));
    assert_eq!(replies[4].usage.total(), 0);
    assert_eq!(
        (replies[5].usage.input, replies[5].usage.output),
        (5_100, 120)
    );
    assert_eq!(shop.api_call_count, 3 + 1);
    assert_eq!((shop.tokens.input, shop.tokens.output), (17_500, 980));
    // Priced from the catalog (Kiro bills in credits, which are not kept).
    assert_eq!(shop.cost_status.as_deref(), Some("estimated"));
    let want = (17_500.0 * 3.0 + 980.0 * 15.0) / 1e6;
    assert!((shop.estimated_cost_usd - want).abs() < 1e-9);

    let routes = session(&db, ROUTES);
    assert_eq!(routes.kind, scribe_session::SessionKind::Task);
    assert_eq!(routes.parent_session_id.as_deref(), Some(shop.id.as_str()));
    assert_eq!(routes.model.as_deref(), Some("claude-haiku-4.5"));
    assert_eq!(routes.title, None);
}

#[test]
fn a_grown_kiro_cli_2_session_is_read_again_storing_nothing_twice() {
    let dir = tempfile::tempdir().unwrap();
    let (folder, _) = session_files(dir.path());
    let db = scribe_db(dir.path());
    import_twice(&db, Source::Kiro, std::slice::from_ref(&folder));
    let before = messages(&db, SHOP).len();

    // Kiro appends a turn; its reply is still being written.
    let file = folder.join(format!("{SHOP}.jsonl"));
    let mut text = std::fs::read_to_string(&file).unwrap();
    text.push_str(concat!(
        r#"{"version":"v1","kind":"Prompt","data":{"message_id":"p4","content":[{"kind":"text","data":"Do it"}],"meta":{"timestamp":1795514900.5}}}"#,
        "\n",
        r#"{"version":"v1","kind":"AssistantMessage","data":{"message_id":"a7","content":[{"kind":"text","data":"Add"#,
    ));
    std::fs::write(&file, &text).unwrap();
    let grown = run(&db, Source::Kiro, std::slice::from_ref(&folder));
    assert!(
        grown.malformed.is_empty(),
        "the half-written line waits: {grown:?}"
    );
    assert_eq!(grown.written.messages_inserted, 1, "{grown:?}");
    text.push_str("ed it.\"}]}}\n");
    std::fs::write(&file, &text).unwrap();
    let done = run(&db, Source::Kiro, std::slice::from_ref(&folder));
    assert_eq!(done.written.messages_inserted, 1, "{done:?}");
    assert_eq!(messages(&db, SHOP).len(), before + 2);
    assert_eq!(
        texts(&db, SHOP).last().unwrap().1,
        "Added it.",
        "the reply, once written"
    );
}
