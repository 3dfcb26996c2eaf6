//! The importer fixtures laid out as the agents lay out their history: shared by the
//! importer's own tests (through `common`), the CLI's end-to-end import tests and the
//! PostgreSQL import suite, which include this file by path (`#[path = …] mod`), so it
//! needs nothing but std and rusqlite.
#![allow(clippy::unwrap_used, clippy::expect_used, dead_code)]

use std::path::{Path, PathBuf};

/// The committed fixtures (see fixtures/SOURCES.md), found from whichever crate of the
/// workspace includes this file.
pub fn fixtures() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .ancestors()
        .map(|dir| dir.join("crates/import/tests/fixtures"))
        .find(|dir| dir.is_dir())
        .expect("the importer fixtures under crates/import/tests/fixtures")
}

/// Copies `rel` of the fixtures to `to` (a directory tree or one file).
pub fn copy(rel: &str, to: &Path) {
    copy_tree(&fixtures().join(rel), to);
}

/// Copies the file or directory tree `from` to `to`.
pub fn copy_tree(from: &Path, to: &Path) {
    if from.is_file() {
        std::fs::create_dir_all(to.parent().unwrap()).unwrap();
        std::fs::copy(from, to).unwrap();
        return;
    }
    for entry in std::fs::read_dir(from).unwrap() {
        let path = entry.unwrap().path();
        copy_tree(&path, &to.join(path.file_name().unwrap()));
    }
}

/// Builds an SQLite database at `db` from the SQL dump `sql` of the fixtures.
pub fn build_db(sql: &str, db: &Path) {
    let text = std::fs::read_to_string(fixtures().join(sql)).unwrap();
    std::fs::create_dir_all(db.parent().unwrap()).unwrap();
    rusqlite::Connection::open(db)
        .unwrap()
        .execute_batch(&text)
        .unwrap();
}

/// A home directory `dir/home` holding every agent's fixture history where the agent
/// keeps it by default (OpenCode's and Hermes's databases built from their dumps; Cline's,
/// Roo Code's and Kilo Code's tasks in VS Code's extension storage on Linux, one Cline CLI
/// task in `~/.cline/data`, Goose's database built from its dump, Copilot CLI's session
/// folders in `~/.copilot` with its session index built from its dump, pi's sessions in `~/.pi/agent`, OpenClaw's agents in
/// `~/.openclaw` (its agent database built from its dump), Amp's threads in `~/.local/share/amp`, Droid's sessions in
/// `~/.factory/sessions`, the Kilo CLI's database built from its dump, Grok Build's
/// sessions in `~/.grok/sessions`, Qwen Code's in `~/.qwen/projects` and Antigravity's
/// conversations in `~/.gemini/antigravity-cli/brain` and `~/.gemini/antigravity/brain`,
/// Kimi Code's sessions in `~/.kimi-code` and the Kimi CLI's in `~/.kimi`, Cursor's databases
/// built from their dumps in `~/.config/Cursor/User` and its agent's in `~/.cursor/chats`,
/// Zed's threads database built from its dump in `~/.local/share/zed/threads`, VS Code's
/// chat conversations and a workspace's state database in `~/.config/Code/User`, a Crush
/// project's database in `~/work/notes/.crush`, listed in `~/.local/share/crush`, Kiro
/// CLI's and the Amazon Q Developer CLI's databases built from their dumps in
/// `~/.local/share/kiro-cli` and `~/.local/share/amazon-q` and Kiro CLI 2's sessions in
/// `~/.kiro/sessions/cli`, Continue's sessions in
/// `~/.continue/sessions`, Aider's logs in two projects, `~/work/shop` and `~/work/tools`,
/// Mistral Vibe's sessions in `~/.vibe/logs/session`, OpenHands' conversations in
/// `~/.openhands/conversations`).
pub fn home(dir: &Path) -> PathBuf {
    let home = dir.join("home");
    copy("claude", &home.join(".claude"));
    copy("codex", &home.join(".codex"));
    copy("opencode", &home.join(".local/share/opencode"));
    build_db(
        "opencode/opencode.sql",
        &home.join(".local/share/opencode/opencode.db"),
    );
    copy("hermes", &home.join(".hermes"));
    build_db("hermes/state_db_sample.sql", &home.join(".hermes/state.db"));
    copy("gemini", &home.join(".gemini"));
    let storage = home.join(".config/Code/User/globalStorage");
    copy("cline/vscode", &storage.join("saoudrizwan.claude-dev"));
    copy("cline/cli", &home.join(".cline"));
    copy("roo-code", &storage.join("rooveterinaryinc.roo-cline"));
    copy("kilo-code", &storage.join("kilocode.kilo-code"));
    build_db(
        "goose/sessions.sql",
        &home.join(".local/share/goose/sessions/sessions.db"),
    );
    copy("copilot", &home.join(".copilot"));
    build_db(
        "copilot/session-store.sql",
        &home.join(".copilot/session-store.db"),
    );
    copy("pi/sessions", &home.join(".pi/agent/sessions"));
    copy("openclaw", &home.join(".openclaw"));
    build_db(
        "openclaw/agents/main/agent/openclaw-agent.sql",
        &home.join(".openclaw/agents/main/agent/openclaw-agent.sqlite"),
    );
    copy("amp", &home.join(".local/share/amp"));
    copy("droid/sessions", &home.join(".factory/sessions"));
    build_db("kilo/kilo.sql", &home.join(".local/share/kilo/kilo.db"));
    copy("grok/sessions", &home.join(".grok/sessions"));
    copy("qwen", &home.join(".qwen"));
    copy("antigravity", &home.join(".gemini"));
    copy("kimi/kimi-code", &home.join(".kimi-code"));
    copy("kimi/kimi", &home.join(".kimi"));
    cursor_user(&home.join(".config/Cursor/User"));
    cursor_chats(&home.join(".cursor/chats"));
    build_db(
        "zed/threads.sql",
        &home.join(".local/share/zed/threads/threads.db"),
    );
    vscode_user(&home.join(".config/Code/User"));
    crush_project(&home);
    copy("continue", &home.join(".continue"));
    copy("aider", &home.join("work"));
    vibe_sessions(&home.join(".vibe"));
    copy("openhands", &home.join(".openhands"));
    build_db(
        "kiro/kiro.sql",
        &home.join(".local/share/kiro-cli/data.sqlite3"),
    );
    build_db(
        "kiro/amazon-q.sql",
        &home.join(".local/share/amazon-q/data.sqlite3"),
    );
    copy("kiro/sessions/cli", &home.join(".kiro/sessions/cli"));
    home
}

/// Mistral Vibe's sessions in `vibe` (its `~/.vibe`), each session's files modified in the
/// order Vibe wrote the sessions (a parent before the sessions continued or forked from
/// it), as the import, which reads the oldest first, would find them.
pub fn vibe_sessions(vibe: &Path) {
    copy("vibe", vibe);
    let saved = vibe.join("logs/session");
    let mut sessions: Vec<PathBuf> = std::fs::read_dir(&saved)
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    // Named after their start: the name's order is the order they were written in.
    sessions.sort();
    let base = std::time::SystemTime::now() - std::time::Duration::from_secs(3_600);
    for (i, session) in sessions.iter().enumerate() {
        let at = base + std::time::Duration::from_secs(i as u64);
        let files = if session.is_dir() {
            std::fs::read_dir(session)
                .unwrap()
                .map(|e| e.unwrap().path())
                .collect()
        } else {
            vec![session.clone()]
        };
        for file in files {
            std::fs::File::options()
                .write(true)
                .open(&file)
                .unwrap()
                .set_modified(at)
                .unwrap();
        }
    }
}

/// Crush's project at `home/work/notes` (its database built from `crush/crush.sql` in its
/// `.crush` folder), listed in `projects.json` in `home/.local/share/crush`; returns the
/// project's folder.
pub fn crush_project(home: &Path) -> PathBuf {
    let project = home.join("work/notes");
    let data = project.join(".crush");
    build_db("crush/crush.sql", &data.join("crush.db"));
    let global = home.join(".local/share/crush");
    std::fs::create_dir_all(&global).unwrap();
    let list = format!(
        r#"{{"projects":[{{"path":{:?},"data_dir":{:?},"last_accessed":"2026-01-05T09:06:40Z"}}]}}"#,
        project.display().to_string(),
        data.display().to_string()
    );
    std::fs::write(global.join("projects.json"), list).unwrap();
    project
}

/// The workspace folder (its hash) of VS Code's fixture.
pub const VSCODE_WORKSPACE: &str = "7f3a9c1e4b2d8a6f0e5c3b1a9d7e2f40";

/// VS Code's `User` folder at `user`: its conversations, and the workspace's state
/// database (the index of its conversations) built from `vscode/workspace-state.sql`.
pub fn vscode_user(user: &Path) {
    copy("vscode/User", user);
    build_db(
        "vscode/workspace-state.sql",
        &user
            .join("workspaceStorage")
            .join(VSCODE_WORKSPACE)
            .join("state.vscdb"),
    );
}

/// The workspace folder (its hash) of Cursor's fixture.
pub const CURSOR_WORKSPACE: &str = "6f1e2d3c4b5a69788796a5b4c3d2e1f0";

/// The conversations of Cursor's command-line agent in its `chats` folder at `chats`,
/// each database built from its dump: `(workspace hash, conversation id, dump)`.
pub const CURSOR_CHATS: [(&str, &str, &str); 2] = [
    (
        "11e9fe063b91149eb10c6daf331adfaa",
        "9c2e4b7a-1d3f-4e5a-8b6c-0d1e2f3a4b5c",
        "cursor/agent.sql",
    ),
    (
        "7d1c0e2b3a4f5968778695a4b3c2d1e0",
        "5e6f7a8b-9c0d-4e1f-a2b3-c4d5e6f7a8b9",
        "cursor/agent-untitled.sql",
    ),
];

/// Lays out [`CURSOR_CHATS`] under `chats`.
pub fn cursor_chats(chats: &Path) {
    for (workspace, id, dump) in CURSOR_CHATS {
        build_db(dump, &chats.join(workspace).join(id).join("store.db"));
    }
}

/// Cursor's `User` folder at `user`: its global database built from `cursor/global.sql`,
/// and one workspace (`workspace.json`, its database from `cursor/workspace.sql`).
pub fn cursor_user(user: &Path) {
    build_db("cursor/global.sql", &user.join("globalStorage/state.vscdb"));
    let workspace = user.join("workspaceStorage").join(CURSOR_WORKSPACE);
    copy("cursor/workspace.json", &workspace.join("workspace.json"));
    build_db("cursor/workspace.sql", &workspace.join("state.vscdb"));
}

/// A Codex rollout (JSON Lines) of session `id`: its `session_meta` line, then one
/// `response_item` message per `(role, text)`, a second apart, user lines as
/// `input_text` and the others as `output_text`.
pub fn codex_rollout(id: &str, messages: &[(&str, &str)]) -> String {
    let mut text = format!(
        r#"{{"timestamp":"2026-02-23T12:19:42.561Z","type":"session_meta","payload":{{"id":"{id}","timestamp":"2026-02-23T12:19:38.535Z","cwd":"/p","originator":"codex_cli_rs","cli_version":"0.104.0","source":"cli","model_provider":"openai"}}}}"#
    );
    text.push('\n');
    for (n, (role, said)) in messages.iter().enumerate() {
        let kind = if *role == "user" {
            "input_text"
        } else {
            "output_text"
        };
        text.push_str(&format!(
            r#"{{"timestamp":"2026-02-23T12:{:02}:{:02}.000Z","type":"response_item","payload":{{"type":"message","role":"{role}","content":[{{"type":"{kind}","text":"{said}"}}]}}}}"#,
            20 + n / 60,
            n % 60
        ));
        text.push('\n');
    }
    text
}

/// Two Codex rollouts in `root` (created): `…-long.jsonl`, whose session id is 3,000
/// bytes (more than an id may have), and `…-fine.jsonl`, an ordinary one, each with one
/// reply; returns the ordinary session's id.
pub fn long_and_fine_rollouts(root: &Path) -> &'static str {
    std::fs::create_dir_all(root).unwrap();
    let long = "7".repeat(3_000);
    let fine = "019c8a70-dda7-7f33-98ea-f30553347399";
    for (id, file) in [
        (long.as_str(), "rollout-2026-02-23T13-19-38-long.jsonl"),
        (fine, "rollout-2026-02-23T13-19-39-fine.jsonl"),
    ] {
        std::fs::write(root.join(file), codex_rollout(id, &[("assistant", "hi")])).unwrap();
    }
    fine
}
