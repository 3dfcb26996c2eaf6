//! Shared by the importer tests: fixture copies in temporary homes, imports into
//! temporary databases, and reading back what was stored.
#![allow(clippy::unwrap_used, clippy::expect_used, dead_code, unused_imports)]

use std::path::{Path, PathBuf};
use std::sync::Arc;

use scribe_db::Database;
use scribe_import::sink::StoreSink;
use scribe_import::{Options, Source, SourceSummary, import, sources};
use scribe_message::{Message, MessageService, TokenUsage};
use scribe_session::{Session, SessionFilter, SessionService, Store};

pub mod fixture_home;

pub use fixture_home::{
    VSCODE_WORKSPACE, build_db, codex_rollout, copy, copy_tree, crush_project, fixtures, home,
    long_and_fine_rollouts, vibe_sessions, vscode_user,
};

/// An environment whose home is `home`, with `vars` set and nothing else.
pub fn env(home: &Path, vars: &[(&str, &str)]) -> scribe_import::Env {
    scribe_import::Env {
        home: Some(home.to_owned()),
        vars: vars
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect(),
    }
}

/// Imports `source`'s history at `roots` into `db`, asserting that nothing under `folder`
/// (where the agent keeps it) was changed, added or touched; what the import said.
pub fn import_read_only(
    db: &Arc<Database>,
    source: Source,
    roots: &[PathBuf],
    folder: &Path,
) -> SourceSummary {
    let before = listing(folder);
    let summary = run(db, source, roots);
    assert_eq!(listing(folder), before, "no file changed, added or touched");
    summary
}

/// Imports `source`'s history at `roots` into `db` twice, asserting that the second import
/// stores nothing and leaves the store as the first did; the store's dump.
pub fn import_twice(db: &Arc<Database>, source: Source, roots: &[PathBuf]) -> String {
    run(db, source, roots);
    let first = dump(db);
    let again = run(db, source, roots);
    assert_eq!(again.written.messages_inserted, 0, "{again:?}");
    assert_same(&first, &dump(db), "unchanged");
    first
}

/// The text parts of session `id`, in order: who said each, what, and whether the agent
/// wrote it rather than the user or the model (synthetic).
pub fn texts(db: &Arc<Database>, id: &str) -> Vec<(scribe_message::Role, String, bool)> {
    use scribe_message::Part;
    messages(db, id)
        .into_iter()
        .flat_map(|m| {
            let role = m.role;
            m.parts.into_iter().filter_map(move |p| match p.part {
                Part::Text(t) => Some((role, t.text, t.synthetic)),
                _ => None,
            })
        })
        .collect()
}

/// Each tool call of session `id`, in order: its tool, its state (`completed`, `error`,
/// `running`, `pending`) and its output or error (empty while it runs).
pub fn tool_outcomes(db: &Arc<Database>, id: &str) -> Vec<(String, String, String)> {
    use scribe_message::{Part, ToolState};
    messages(db, id)
        .into_iter()
        .flat_map(|m| m.parts)
        .filter_map(|p| match p.part {
            Part::Tool(t) => {
                let (state, said) = match &t.state {
                    ToolState::Completed { output, .. } => ("completed", output.clone()),
                    ToolState::Error { message, .. } => ("error", message.clone()),
                    ToolState::Running { .. } => ("running", String::new()),
                    ToolState::Pending => ("pending", String::new()),
                };
                Some((t.tool, state.to_owned(), said))
            }
            _ => None,
        })
        .collect()
}

/// A fresh Scribe database in `dir`.
pub fn scribe_db(dir: &Path) -> Arc<Database> {
    Arc::new(Database::open(dir.join("scribe.db")).unwrap())
}

/// Imports `source` from `roots` into `db`.
pub fn run(db: &Arc<Database>, source: Source, roots: &[PathBuf]) -> SourceSummary {
    let batch_messages = Options::default().batch_messages;
    run_batched(db, source, roots, batch_messages, &mut |_| {})
}

/// Imports `source` from `roots` into `db`, `batch_messages` messages to a batch, telling
/// `progress` what it does.
pub fn run_batched(
    db: &Arc<Database>,
    source: Source,
    roots: &[PathBuf],
    batch_messages: usize,
    progress: &mut dyn FnMut(scribe_import::Event<'_>),
) -> SourceSummary {
    let mut sink = StoreSink::new(Store::new(Arc::clone(db)));
    let options = Options {
        batch_messages,
        ..Options::default()
    };
    import(
        &mut sink,
        sources::importer(source),
        roots,
        &options,
        progress,
    )
    .unwrap()
}

pub fn sessions(db: &Arc<Database>) -> Vec<Session> {
    let mut list = SessionService::new(Arc::clone(db))
        .list(&SessionFilter {
            limit: None,
            ..SessionFilter::default()
        })
        .unwrap();
    list.sort_by(|a, b| a.id.cmp(&b.id));
    list
}

pub fn session(db: &Arc<Database>, id: &str) -> Session {
    SessionService::new(Arc::clone(db)).get(id).unwrap()
}

pub fn messages(db: &Arc<Database>, id: &str) -> Vec<Message> {
    MessageService::new(Arc::clone(db)).list(id).unwrap()
}

/// Input, output (reasoning added back, as the sources count it), cache write, cache read.
pub fn ccusage_view(t: &TokenUsage) -> (i64, i64, i64, i64) {
    (t.input, t.output + t.reasoning, t.cache_write, t.cache_read)
}

/// Everything stored, as text: changes when anything stored changes.
pub fn dump(db: &Arc<Database>) -> String {
    let mut out = String::new();
    let round = |x: f64| (x * 1e9).round() / 1e9;
    for mut s in sessions(db) {
        // Sums of float costs depend on the order they were added in.
        s.estimated_cost_usd = round(s.estimated_cost_usd);
        s.actual_cost_usd = s.actual_cost_usd.map(round);
        out.push_str(&format!("{s:?}\n"));
        for m in messages(db, &s.id) {
            out.push_str(&format!("  {m:?}\n"));
        }
    }
    out
}

/// `assert_eq!` for dumps, showing where they first differ.
#[track_caller]
pub fn assert_same(left: &str, right: &str, what: &str) {
    if left == right {
        return;
    }
    let at = left
        .bytes()
        .zip(right.bytes())
        .position(|(a, b)| a != b)
        .unwrap_or(left.len().min(right.len()));
    let from = at.saturating_sub(300);
    let show = |s: &str| {
        s.get(from..(at + 100).min(s.len()))
            .unwrap_or("")
            .to_owned()
    };
    panic!(
        "{what}: dumps differ at byte {at}\n left: …{}\nright: …{}",
        show(left),
        show(right)
    );
}

/// Every file in `dir` (recursively) with its length, a checksum of its bytes and its
/// modification time.
pub fn listing(dir: &Path) -> Vec<(String, u64, u64, std::time::SystemTime)> {
    use std::hash::{Hash, Hasher};
    let mut out = Vec::new();
    for entry in walk(dir) {
        let meta = std::fs::metadata(&entry).unwrap();
        let mut sum = std::collections::hash_map::DefaultHasher::new();
        std::fs::read(&entry).unwrap().hash(&mut sum);
        out.push((
            entry.display().to_string(),
            meta.len(),
            sum.finish(),
            meta.modified().unwrap(),
        ));
    }
    out.sort();
    out
}

fn walk(dir: &Path) -> Vec<std::path::PathBuf> {
    let mut out = Vec::new();
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            out.extend(walk(&path));
        } else {
            out.push(path);
        }
    }
    out
}
