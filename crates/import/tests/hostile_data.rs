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
