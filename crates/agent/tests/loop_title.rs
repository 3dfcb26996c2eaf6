//! Titles: after the first exchange a title session asks the model for a
//! title in the background; a taken title gets the next lineage number.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod loop_support;

use std::sync::Arc;

use loop_support::*;
use scribe_agent::{CancelToken, PromptInput, ScriptedProvider, ScriptedTurn};
use scribe_message::TokenUsage;
use scribe_session::{NewSession, SessionKind};

#[test]
fn the_first_exchange_gets_a_title_numbered_on_collision() {
    let env = Env::new();
    env.sessions
        .create(NewSession::titled("Fix the build"))
        .unwrap();
    let provider = Arc::new(ScriptedProvider::new([
        ScriptedTurn::text("Looking into it."),
        ScriptedTurn::reply()
            .text("\"Fix the build.\"")
            .usage(TokenUsage {
                input: 30,
                output: 5,
                ..TokenUsage::default()
            })
            .into(),
        ScriptedTurn::text("second answer"),
    ]));
    let runner = env
        .runner(provider.clone())
        .with_title_generation(true)
        .build();
    let session = env.session();
    let out = runner
        .prompt(
            PromptInput::text(&session.id, "the build fails"),
            &CancelToken::new(),
        )
        .unwrap();
    let handle = out.title.expect("first exchange starts a title");
    assert_eq!(handle.session_id(), session.id);
    assert_eq!(handle.join().unwrap().as_deref(), Some("Fix the build #2"));
    let titled = env.sessions.get(&session.id).unwrap();
    assert_eq!(titled.title.as_deref(), Some("Fix the build #2"));
    assert_eq!(
        env.sessions.resolve_by_title("Fix the build").unwrap().id,
        session.id
    );

    // The title call lives in its own title session, whose cost rolled up.
    let title_session = env.sessions.get(&format!("title-{}", session.id)).unwrap();
    assert_eq!(title_session.kind, SessionKind::Title);
    assert!(title_session.ended_at.is_some());
    assert!(title_session.estimated_cost_usd > 0.0);
    assert!((titled.estimated_cost_usd - title_session.estimated_cost_usd).abs() < 1e-9);
    let request = &provider.requests()[1];
    assert!(request.tools.is_empty());
    assert!(format!("{:?}", request.messages).contains("the build fails"));

    // Later exchanges do not retitle.
    let out = runner
        .prompt(PromptInput::text(&session.id, "more"), &CancelToken::new())
        .unwrap();
    assert!(out.title.is_none());
    assert_eq!(out.text, "second answer");
}

#[test]
fn a_free_title_is_used_as_is() {
    let env = Env::new();
    let provider = Arc::new(ScriptedProvider::new([
        ScriptedTurn::text("sure"),
        ScriptedTurn::text("# Refactor the parser"),
    ]));
    let runner = env.runner(provider).with_title_generation(true).build();
    let session = env.session();
    let out = runner
        .prompt(
            PromptInput::text(&session.id, "refactor"),
            &CancelToken::new(),
        )
        .unwrap();
    assert_eq!(
        out.title.unwrap().join().unwrap().as_deref(),
        Some("Refactor the parser")
    );
}
