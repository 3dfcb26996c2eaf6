//! The agent loop on PostgreSQL: a turn with a tool call, its usage charged, and an
//! automatic compaction in place before the next request, all through the services
//! and the generated query traits, as on SQLite.
//!
//! Needs a server: `.ci/with-postgres cargo test -p scribe-agent --test loop_postgres --
//! --ignored` (`.ci/run` does). Without one it is listed as ignored, never passed.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod loop_support;

use std::sync::Arc;

use loop_support::*;
use scribe_agent::{
    AgentConfig, AgentRegistry, CancelToken, CompactionConfig, PromptInput, ScriptedProvider,
    ScriptedTurn, ToolRegistry,
};
use scribe_db::{Backend, Database};
use scribe_message::{FinishReason, Role, TokenUsage};
use serde_json::json;

/// A fresh, empty database named `name` on the test server; its connection string.
fn fresh(name: &str) -> String {
    scribe_db::testing::fresh_test_database(name).unwrap()
}

#[test]
#[ignore = "needs PostgreSQL: run under .ci/with-postgres"]
fn a_turn_with_a_tool_and_a_compaction_runs_on_postgresql() {
    let dir = tempfile::tempdir().unwrap();
    let db = Database::open(fresh("scribe_agent_loop")).unwrap();
    assert_eq!(db.backend(), Backend::Postgres);
    let env = Env::with_database(dir.path(), db);
    let provider = Arc::new(ScriptedProvider::new([
        ScriptedTurn::reply()
            .text("checking")
            .tool_call("c1", "echo", json!({"text": "data"}))
            // Over the small model's usable window: the loop compacts next.
            .usage(TokenUsage {
                input: 2_500,
                output: 20,
                ..TokenUsage::default()
            }),
        ScriptedTurn::reply().text("## Goal\nEcho data.\n## Next steps\nAnswer."),
        ScriptedTurn::reply().text("all done"),
    ]));
    let agent = AgentConfig::new("build")
        .with_model(SMALL_MODEL)
        .with_compaction(CompactionConfig::default());
    let runner = env
        .runner(provider.clone())
        .with_tools(ToolRegistry::new().with(Echo))
        .with_agents(AgentRegistry::new(agent))
        .build();
    let session = env.session();
    let out = runner
        .prompt(
            PromptInput::text(&session.id, "echo data"),
            &CancelToken::new(),
        )
        .unwrap();
    assert_eq!(out.finish_reason, Some(FinishReason::EndTurn));
    assert_eq!(out.text, "all done");
    assert_eq!(provider.requests().len(), 3);
    assert!(provider.requests()[1].tools.is_empty(), "the summary call");

    let stored = env.sessions.get(&session.id).unwrap();
    let summary = env
        .messages
        .get(stored.summary_message_id.as_deref().unwrap())
        .unwrap();
    assert!(summary.is_summary && summary.text().contains("## Goal"));
    assert!(stored.tokens.input >= 2_500, "{:?}", stored.tokens);
    let history = env.messages_of(&session.id);
    assert_eq!(history[0].role, Role::User);
    let tools = history.iter().flat_map(tool_parts).collect::<Vec<_>>();
    assert_eq!(tools.len(), 1);
    assert_eq!(tools[0].state.output(), Some("data"));
    // The turn's lease was released.
    assert_eq!(
        env.db
            .read(|tx| tx.q().get_session_run(&session.id))
            .unwrap(),
        None
    );
}

/// A step's end on PostgreSQL is one transaction too: a charge that fails in the
/// database (a trigger refusing every change of a session's `api_call_count`) leaves
/// nothing of the end, as on SQLite (`loop_step_end.rs`).
#[test]
#[ignore = "needs PostgreSQL: run under .ci/with-postgres"]
fn a_charge_failing_on_postgresql_leaves_nothing_of_the_step_end() {
    let dir = tempfile::tempdir().unwrap();
    let url = fresh("scribe_agent_step_end");
    let env = Env::with_database(dir.path(), Database::open(&url).unwrap());
    a_failed_step_end_stores_nothing_of_it(&env, || {
        let mut client = postgres::Client::connect(&url, postgres::NoTls).unwrap();
        client
            .batch_execute(
                "CREATE FUNCTION fail_charge() RETURNS trigger LANGUAGE plpgsql AS $$
                 BEGIN RAISE EXCEPTION 'injected charge failure'; END $$;
                 CREATE TRIGGER fail_charge BEFORE UPDATE OF api_call_count ON sessions
                 FOR EACH ROW EXECUTE FUNCTION fail_charge();",
            )
            .unwrap();
    });
}

/// A charged end's tracker over its own handle on the reply's PostgreSQL database (the
/// same location) is the same store and charges the reply; over another database of the
/// same server it is refused, with nothing of the end written.
#[test]
#[ignore = "needs PostgreSQL: run under .ci/with-postgres"]
fn a_charged_end_accepts_any_handle_to_the_same_postgresql_database() {
    use scribe_agent::provider::ProviderEvent;
    use scribe_agent::{AgentError, ModelCatalog, ReplyWriter, UsageTracker};
    use scribe_message::{NewMessage, Part, StepStartPart};
    use scribe_session::{NewSession, Store};

    let location = fresh("scribe_agent_same_store");
    let store = Store::open(&location).unwrap();
    let catalog = Arc::new(ModelCatalog::builtin());
    let model = catalog.iter().next().unwrap().id.clone();
    let usage = TokenUsage {
        input: 100,
        output: 10,
        ..TokenUsage::default()
    };
    let session = store
        .sessions()
        .create(NewSession::titled("two handles"))
        .unwrap();
    let reply = |text: &str| {
        let mut reply = ReplyWriter::start(
            store.messages(),
            NewMessage::new(
                &session.id,
                Role::Assistant,
                vec![Part::StepStart(StepStartPart::default())],
            ),
        )
        .unwrap();
        reply.push(ProviderEvent::TextDelta(text.into()));
        reply.push(ProviderEvent::Finish {
            reason: FinishReason::EndTurn,
            usage,
        });
        reply
    };

    let same = UsageTracker::new(Store::open(&location).unwrap(), Arc::clone(&catalog));
    reply("charged")
        .finish_streamed_charged(&same, &model)
        .unwrap();
    assert_eq!(store.sessions().get(&session.id).unwrap().api_call_count, 1);

    let elsewhere = Store::open(fresh("scribe_agent_other_store")).unwrap();
    let other = UsageTracker::new(elsewhere, Arc::clone(&catalog));
    let err = reply("refused")
        .finish_streamed_charged(&other, &model)
        .unwrap_err();
    assert!(matches!(err, AgentError::InvalidInput(_)), "{err}");
    assert_eq!(store.sessions().get(&session.id).unwrap().api_call_count, 1);
}
