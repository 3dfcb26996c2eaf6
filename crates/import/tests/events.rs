//! Imported sessions are announced as the session service announces its own: `created`
//! and `updated` on its broker, queued in the import's transaction and published after
//! it commits, each carrying the session as committed; an import that changes nothing
//! announces nothing.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::collections::BTreeMap;

use common::*;
use scribe_import::sink::StoreSink;
use scribe_import::{Options, Source, import, sources};
use scribe_pubsub::EventKind;
use scribe_session::{Session, Store};

fn import_into(store: &Store, root: &std::path::Path) -> scribe_import::SourceSummary {
    import(
        &mut StoreSink::new(store.clone()),
        sources::importer(Source::ClaudeCode),
        &[root.to_path_buf()],
        &Options::default(),
        &mut |_| {},
    )
    .unwrap()
}

#[test]
fn imported_sessions_are_announced_after_commit_as_committed() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("projects");
    copy("claude/projects", &root);
    let store = Store::open(dir.path().join("scribe.db")).unwrap();
    let events = store.sessions().subscribe();
    let summary = import_into(&store, &root);
    let mut created = 0;
    let mut last: BTreeMap<String, Session> = BTreeMap::new();
    while let Ok(event) = events.try_recv() {
        match event.kind {
            EventKind::Created => created += 1,
            EventKind::Updated => {}
            EventKind::Deleted => panic!("an import deleted {}", event.payload.id),
        }
        last.insert(event.payload.id.clone(), event.payload);
    }
    assert_eq!(created, summary.written.sessions_created);
    assert_eq!(last.len() as u64, summary.written.sessions_created);
    // The last word on each session is its committed state: counters and usage included.
    for (id, announced) in &last {
        assert_eq!(announced, &store.sessions().get(id).unwrap(), "{id}");
    }
    // Nothing changed, nothing announced.
    import_into(&store, &root);
    assert!(events.try_recv().is_err());
}
