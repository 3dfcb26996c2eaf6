mod common;
use common::*;
use scribe_import::Source;

#[test]
fn explore() {
    let dir = tempfile::tempdir().unwrap();
    let db = scribe_db(dir.path());
    let s = run(
        &db,
        Source::ClaudeCode,
        &[fixtures().join("claude/projects")],
    );
    println!("{s:#?}");
    for s in sessions(&db) {
        println!(
            "{} parent={:?} kind={} title={:?} model={:?} msgs={} tools={} calls={} tokens={:?} cost={} status={:?} dir={:?} {}..{}",
            s.id,
            s.parent_session_id,
            s.kind,
            s.title,
            s.model,
            s.message_count,
            s.tool_call_count,
            s.api_call_count,
            ccusage_view(&s.tokens),
            s.estimated_cost_usd,
            s.cost_status,
            s.directory,
            s.created_at,
            s.updated_at
        );
    }
    for m in messages(&db, "1af7fc5e-8455-4414-9ccd-011d40f70b2a") {
        println!(
            "{} {:?} {:?} {:?} parts={}",
            m.id,
            m.role,
            m.usage,
            m.finish_reason,
            m.parts
                .iter()
                .map(|p| format!(
                    "{}:{}",
                    p.part.type_name(),
                    match &p.part {
                        scribe_message::Part::Tool(t) => t.state.status().to_string(),
                        _ => String::new(),
                    }
                ))
                .collect::<Vec<_>>()
                .join(",")
        );
    }
}
