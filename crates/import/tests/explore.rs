mod common;
use common::*;
use scribe_import::Source;

fn show(src: Source, root: &str) {
    let dir = tempfile::tempdir().unwrap();
    let db = scribe_db(dir.path());
    let home = dir.path().join("home");
    copy(root, &home);
    for (sql, name) in [
        ("opencode/opencode.sql", "opencode.db"),
        ("hermes/state_db_sample.sql", "state.db"),
    ] {
        if sql.starts_with(root) {
            build_db(sql, &home.join(name));
        }
    }
    let s = run(&db, src, &[home]);
    println!(
        "records={} skipped={:?} malformed={:?} failed={:?} written={:?} tokens={:?}",
        s.records, s.skipped, s.malformed, s.failed, s.written, s.tokens
    );
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
        for m in messages(&db, &s.id) {
            println!(
                "   {:?} {:?} sum={} {:?} parts={}",
                m.role,
                m.model,
                m.is_summary,
                m.usage,
                m.parts
                    .iter()
                    .map(|p| format!(
                        "{}:{}",
                        p.part.type_name(),
                        match &p.part {
                            scribe_message::Part::Tool(t) => t.state.status().to_string(),
                            scribe_message::Part::Text(t) => t.text.chars().take(30).collect(),
                            _ => String::new(),
                        }
                    ))
                    .collect::<Vec<_>>()
                    .join(",")
            );
        }
    }
}

#[test]
fn explore() {
    let src: Source = std::env::var("SRC").unwrap().parse().unwrap();
    let root = std::env::var("ROOT").unwrap();
    show(src, &root);
}
