//! `scribe show` makes compaction visible: outputs it cleared, what each summary stands
//! for, and where what the model is sent next begins. Sessions are compacted through the
//! agent's real compactor with a scripted summariser, then shown by the binary.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::sync::Arc;

use common::Env;
use scribe_agent::{
    CompactionConfig, CompactionOutcome, CompactionStep, CompactionStrategy, Compactor, Model,
    ModelCatalog, Pricing, ScriptedProvider, ScriptedTurn,
};
use scribe_db::Database;
use scribe_message::{NewMessage, Part, Role, ToolPart, ToolState};
use scribe_session::{NewSession, Store};
use serde_json::json;

const MODEL: &str = "tiny";

fn catalog() -> Arc<ModelCatalog> {
    let mut c = ModelCatalog::empty();
    c.insert(Model {
        id: MODEL.into(),
        provider: "scripted".into(),
        name: "Tiny".into(),
        context_window: 10_000,
        max_output_tokens: 2_000,
        pricing: Pricing::FREE,
    })
    .unwrap();
    Arc::new(c)
}

/// A completed `read` whose output is `lines` lines of about 100 characters.
fn read(call: &str, lines: usize) -> Part {
    let output: Vec<String> = (0..lines)
        .map(|i| format!("{call} line {i}: {}", "x".repeat(90)))
        .collect();
    Part::Tool(ToolPart {
        call_id: call.into(),
        tool: "read".into(),
        input: json!({"path": format!("{call}.rs")}),
        state: ToolState::Completed {
            output: output.join("\n"),
            title: String::new(),
            metadata: serde_json::Value::Null,
            started_at: 1,
            ended_at: 2,
        },
        compacted_at: None,
        extra: Default::default(),
    })
}

/// Four turns: two with large outputs, two small recent ones.
fn session(store: &Store, title: &str) -> String {
    let s = store
        .sessions()
        .create(NewSession::titled(title))
        .unwrap()
        .id;
    let say = |role: Role, parts: Vec<Part>| {
        store
            .messages()
            .create(NewMessage::new(&s, role, parts))
            .unwrap()
    };
    say(Role::User, vec![Part::text("first question")]);
    say(
        Role::Assistant,
        vec![Part::text("first answer"), read("c1", 100)],
    );
    say(Role::User, vec![Part::text("second question")]);
    say(
        Role::Assistant,
        vec![Part::text("second answer"), read("c2", 100)],
    );
    say(Role::User, vec![Part::text("recent question")]);
    say(Role::Assistant, vec![Part::text("recent answer")]);
    s
}

fn compactor(store: &Store, strategy: CompactionStrategy) -> Compactor {
    let provider = Arc::new(ScriptedProvider::new([ScriptedTurn::text(
        "## Goal\nAnswer the questions.",
    )]));
    Compactor::new(
        store.clone(),
        provider,
        catalog(),
        CompactionConfig {
            strategy,
            prune_protect_tokens: 1_000,
            ..CompactionConfig::default()
        },
    )
}

fn position(text: &str, needle: &str) -> usize {
    text.find(needle)
        .unwrap_or_else(|| panic!("{needle:?} not in:\n{text}"))
}

#[test]
fn show_marks_cleared_outputs_and_where_a_restarting_summary_begins() {
    let env = Env::new();
    let store = Store::new(Arc::new(Database::open(&env.db).unwrap()));
    let s = session(&store, "Restarted");
    let c = compactor(&store, CompactionStrategy::InPlace);
    // First the cheap step (it clears the output outside the two protected turns), then
    // a summary that keeps the recent turn verbatim.
    assert_eq!(
        c.compact(&s, MODEL).unwrap().steps(),
        [CompactionStep::Prune]
    );
    let CompactionOutcome::InPlace {
        summary_message_id, ..
    } = c.compact(&s, MODEL).unwrap()
    else {
        panic!()
    };

    let text = env.ok(&["show", &s]);
    assert_eq!(
        text.matches("⌫ output cleared by compaction").count(),
        1,
        "{text}"
    );
    assert!(text.contains("c2 line 0"), "{text}");
    assert!(
        text.contains(
            "the model is sent \"[Old tool result content cleared]\" (100 lines still stored"
        ),
        "{text}"
    );
    // The output itself is not printed once cleared.
    assert!(!text.contains("c1 line 0"), "{text}");
    let mark = position(
        &text,
        &format!(
            "── the model is sent summary {summary_message_id} first, then the messages from here on ──"
        ),
    );
    assert!(mark > position(&text, "second answer"));
    assert!(mark < position(&text, "recent question"));
    assert!(
        text.contains("[summary of the conversation before msg_"),
        "{text}"
    );
}

#[test]
fn show_marks_a_continuations_kept_messages_in_the_session_it_ended() {
    let env = Env::new();
    let store = Store::new(Arc::new(Database::open(&env.db).unwrap()));
    let s = session(&store, "Continued");
    let c = compactor(&store, CompactionStrategy::Continuation);
    c.compact(&s, MODEL).unwrap();
    let CompactionOutcome::Continued { new_session_id, .. } = c.compact(&s, MODEL).unwrap() else {
        panic!()
    };
    let old = env.ok(&["show", &s]);
    let mark = position(
        &old,
        &format!("── from here on also sent after the summary of continuation {new_session_id}"),
    );
    assert!(mark < position(&old, "recent question"));
    assert!(mark > position(&old, "second answer"));
    let new = env.ok(&["show", &new_session_id]);
    assert!(
        new.contains("[summary of the conversation before msg_"),
        "{new}"
    );
}

#[test]
fn show_marks_a_summary_that_keeps_the_words() {
    let env = Env::new();
    let store = Store::new(Arc::new(Database::open(&env.db).unwrap()));
    let s = session(&store, "Words");
    let c = compactor(&store, CompactionStrategy::KeepWords);
    c.compact(&s, MODEL).unwrap();
    c.compact(&s, MODEL).unwrap();
    let text = env.ok(&["show", &s]);
    let mark = position(&text, "── the model is sent every word from here on");
    assert!(mark < position(&text, "first question"));
    assert!(
        text.contains("[summary of the conversation so far, added beside its words]"),
        "{text}"
    );
    assert_eq!(
        text.matches("⌫ output cleared by compaction").count(),
        2,
        "{text}"
    );
}
