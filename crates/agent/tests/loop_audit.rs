//! Loop guarantees found missing in review: answers that do not (fully)
//! stream, the charge and its step_finish part committing together, recovery
//! leaving live runs of this process alone, read-failure events only for
//! saved prompts, compaction on its own thread, and atomic titles.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod loop_support;

use std::sync::{Arc, Barrier, Mutex};
use std::thread::ThreadId;
use std::time::{Duration, Instant};

use loop_support::*;
use scribe_agent::title::set_title_in_lineage;
use scribe_agent::{
    AgentConfig, AgentError, AgentRegistry, AgentRunner, CancelToken, ChatRequest,
    CompactionConfig, LoopEvent, PartDraft, PromptInput, Provider, ProviderError, ProviderEvent,
    ProviderResponse, ScriptedProvider, ScriptedTurn, ToolRegistry, recover_session,
};
use scribe_message::{FinishReason, Part, Role, TokenUsage, ToolState};
use scribe_pubsub::EventKind;
use serde_json::json;

/// How [`Wrapped`] passes on a scripted answer.
enum Mode {
    /// Streams nothing: the answer only comes back from `send`.
    Silent,
    /// Streams only the first event; the response holds everything.
    FirstEventOnly,
    /// Streams everything, but the response's text is this instead.
    FinalText(&'static str),
    /// Streams everything and records the thread of each request.
    RecordThreads(Mutex<Vec<ThreadId>>),
}

struct Wrapped {
    inner: ScriptedProvider,
    mode: Mode,
}

impl Provider for Wrapped {
    fn name(&self) -> &str {
        "wrapped"
    }

    fn send(
        &self,
        request: &ChatRequest,
        on_event: &mut dyn FnMut(ProviderEvent),
    ) -> Result<ProviderResponse, ProviderError> {
        match &self.mode {
            Mode::Silent => self.inner.send(request, &mut |_| {}),
            Mode::FirstEventOnly => {
                let mut first = true;
                self.inner.send(request, &mut |event| {
                    if std::mem::take(&mut first) {
                        on_event(event);
                    }
                })
            }
            Mode::FinalText(text) => {
                let mut response = self.inner.send(request, on_event)?;
                for part in &mut response.parts {
                    if let Part::Text(t) = part {
                        (*text).clone_into(&mut t.text);
                    }
                }
                Ok(response)
            }
            Mode::RecordThreads(threads) => {
                threads.lock().unwrap().push(std::thread::current().id());
                self.inner.send(request, on_event)
            }
        }
    }
}

fn wrapped_runner(env: &Env, turns: Vec<ScriptedTurn>, mode: Mode) -> (AgentRunner, Arc<Wrapped>) {
    let provider = Arc::new(Wrapped {
        inner: ScriptedProvider::new(turns),
        mode,
    });
    let runner = env
        .runner(provider.clone())
        .with_tools(ToolRegistry::new().with(Echo))
        .build();
    (runner, provider)
}

fn texts(parts: &[scribe_message::StoredPart]) -> Vec<String> {
    parts
        .iter()
        .filter_map(|p| match &p.part {
            Part::Text(t) => Some(t.text.clone()),
            _ => None,
        })
        .collect()
}

#[test]
fn a_provider_that_never_streams_still_has_its_answer_saved_and_tools_run() {
    let env = Env::new();
    let (runner, provider) = wrapped_runner(
        &env,
        vec![
            ScriptedTurn::reply()
                .reasoning("thinking")
                .text("Let me echo.")
                .tool_call("c1", "echo", json!({"text": "hi"}))
                .into(),
            ScriptedTurn::text("Done."),
        ],
        Mode::Silent,
    );
    let session = env.session();
    let out = runner
        .prompt(
            PromptInput::text(&session.id, "echo hi"),
            &CancelToken::new(),
        )
        .unwrap();
    assert_eq!(out.finish_reason, Some(FinishReason::EndTurn));
    assert_eq!(out.steps, 2);
    assert_eq!(out.text, "Done.");

    let stored = env.messages_of(&session.id);
    let first = &stored[1];
    let types: Vec<&str> = first.parts.iter().map(|p| p.part.type_name()).collect();
    assert_eq!(
        types,
        [
            "step_start",
            "reasoning",
            "text",
            "tool",
            "step_finish",
            "finish"
        ]
    );
    assert_eq!(texts(&first.parts), ["Let me echo."]);
    let tools = tool_parts(first);
    assert!(matches!(&tools[0].state, ToolState::Completed { output, .. } if output == "hi"));
    // The model saw its tool's result.
    let second = &provider.inner.requests()[1];
    assert!(second.messages.iter().any(|m| {
        m.role == Role::Assistant
            && m.parts
                .iter()
                .any(|p| matches!(p, Part::Tool(t) if t.call_id == "c1"))
    }));
}

#[test]
fn what_did_not_stream_is_filled_in_from_the_response() {
    let env = Env::new();
    let (runner, _) = wrapped_runner(
        &env,
        vec![
            ScriptedTurn::reply()
                .text("Hel")
                .text("lo")
                .tool_call("c1", "echo", json!({"text": "x"}))
                .into(),
            ScriptedTurn::text("ok"),
        ],
        Mode::FirstEventOnly,
    );
    let session = env.session();
    let out = runner
        .prompt(PromptInput::text(&session.id, "go"), &CancelToken::new())
        .unwrap();
    assert_eq!(out.steps, 2);
    let first = &env.messages_of(&session.id)[1];
    // The streamed "Hel" grew into the response's "Hello" in the same part.
    assert_eq!(texts(&first.parts), ["Hello"]);
    let tools = tool_parts(first);
    assert_eq!(tools.len(), 1, "the unstreamed call was added once");
    assert!(matches!(&tools[0].state, ToolState::Completed { output, .. } if output == "x"));
}

#[test]
fn a_final_text_that_differs_from_the_stream_wins() {
    let env = Env::new();
    let (runner, _) = wrapped_runner(
        &env,
        vec![ScriptedTurn::reply().text("Draft ").text("answer").into()],
        Mode::FinalText("Final answer"),
    );
    let session = env.session();
    let out = runner
        .prompt(PromptInput::text(&session.id, "go"), &CancelToken::new())
        .unwrap();
    assert_eq!(out.text, "Final answer");
    let first = &env.messages_of(&session.id)[1];
    assert_eq!(texts(&first.parts), ["Final answer"]);
}

#[test]
fn the_charge_and_its_step_finish_part_commit_together() {
    let env = Env::new();
    let usage = TokenUsage {
        input: 100,
        output: 10,
        ..TokenUsage::default()
    };
    let provider = Arc::new(ScriptedProvider::new([ScriptedTurn::reply()
        .text("hi")
        .usage(usage)]));
    let runner = env.runner(provider).build();
    let session = env.session();
    let messages = env.messages.subscribe();
    runner
        .prompt(PromptInput::text(&session.id, "hello"), &CancelToken::new())
        .unwrap();
    // The first announced state of the message that carries the charge already
    // holds the step_finish part reporting it.
    let charged = messages
        .try_iter()
        .map(|e| e.unwrap())
        .find(|e| e.kind == EventKind::Updated && e.payload.cost_usd > 0.0)
        .expect("the charge was announced")
        .payload;
    let step = charged
        .parts
        .iter()
        .find_map(|p| match &p.part {
            Part::StepFinish(s) => Some(s.clone()),
            _ => None,
        })
        .expect("step_finish committed with the charge");
    assert_eq!(step.tokens, usage);
    assert!((step.cost - charged.cost_usd).abs() < 1e-12);
}

#[test]
fn recovery_leaves_a_session_this_process_is_answering_alone() {
    let env = Env::new();
    let marker = env.root.join("running");
    let provider = Arc::new(ScriptedProvider::new([
        ScriptedTurn::reply()
            .tool_call("c1", "block", json!({}))
            .into(),
        ScriptedTurn::text("never asked"),
    ]));
    let runner = env
        .runner(provider)
        .with_tools(ToolRegistry::new().with(Block {
            marker: Some(marker.clone()),
        }))
        .build();
    let session = env.session();
    let cancel = CancelToken::new();
    std::thread::scope(|scope| {
        let running =
            scope.spawn(|| runner.prompt(PromptInput::text(&session.id, "wait"), &cancel));
        let started = Instant::now();
        while !marker.exists() {
            assert!(
                started.elapsed() < Duration::from_secs(60),
                "tool never ran"
            );
            std::thread::sleep(Duration::from_millis(5));
        }
        // The tool is running: its message is open, and must stay so.
        assert!(runner.recover_session(&session.id).unwrap().is_empty());
        assert!(recover_session(&env.store, &session.id).unwrap().is_empty());
        // A second prompt meanwhile (which recovers first) does not break it either.
        let mut quiet = PromptInput::text(&session.id, "meanwhile");
        quiet.no_reply = true;
        runner.prompt(quiet, &CancelToken::new()).unwrap();
        let open = env.messages_of(&session.id)[1].clone();
        assert_eq!(open.role, Role::Assistant);
        assert_eq!(open.finished_at, None);
        assert!(matches!(
            tool_parts(&open)[0].state,
            ToolState::Running { .. }
        ));

        cancel.cancel();
        let out = running.join().unwrap().unwrap();
        assert_eq!(out.finish_reason, Some(FinishReason::Canceled));
    });
    let answered = env.messages_of(&session.id)[1].clone();
    assert_eq!(answered.finish_reason, Some(FinishReason::Canceled));
    assert_eq!(answered.error, None);
    assert!(
        matches!(&tool_parts(&answered)[0].state, ToolState::Error { message, .. } if message == "canceled")
    );
    // Once the run is over, there is nothing left to recover.
    assert!(runner.recover_session(&session.id).unwrap().is_empty());
}

#[test]
fn read_failures_are_announced_only_for_a_saved_prompt() {
    let env = Env::new();
    let provider = Arc::new(ScriptedProvider::new(Vec::<ScriptedTurn>::new()));
    let refusing = env
        .runner(provider.clone())
        .with_hook(|_| Err("refused".into()))
        .build();
    let events = refusing.subscribe();
    let session = env.session();
    let input = PromptInput {
        session_id: session.id.clone(),
        parts: vec![PartDraft::text("look"), PartDraft::file("missing.txt")],
        no_reply: true,
        ..PromptInput::default()
    };
    let err = refusing
        .prompt(input.clone(), &CancelToken::new())
        .unwrap_err();
    assert!(matches!(err, AgentError::Hook { .. }), "{err}");
    let seen: Vec<LoopEvent> = events.try_iter().map(|e| e.unwrap().payload).collect();
    assert!(
        seen.is_empty(),
        "nothing was saved, so nothing is announced: {seen:?}"
    );
    assert!(env.messages_of(&session.id).is_empty());

    let accepting = env.runner(provider).build();
    let events = accepting.subscribe();
    accepting.prompt(input, &CancelToken::new()).unwrap();
    let seen: Vec<LoopEvent> = events.try_iter().map(|e| e.unwrap().payload).collect();
    assert!(
        matches!(&seen[0], LoopEvent::FileReadFailed { path, .. } if path == "missing.txt"),
        "{seen:?}"
    );
    assert!(
        matches!(&seen[1], LoopEvent::PromptSaved { .. }),
        "{seen:?}"
    );
    let saved = &env.messages_of(&session.id)[0];
    assert!(texts(&saved.parts)[1].starts_with("Read file missing.txt failed"));
}

#[test]
fn compaction_in_the_loop_runs_on_its_own_thread() {
    let env = Env::new();
    let big = TokenUsage {
        input: 2_500,
        output: 20,
        ..TokenUsage::default()
    };
    let provider = Arc::new(Wrapped {
        inner: ScriptedProvider::new([
            ScriptedTurn::reply()
                .text("checking")
                .tool_call("c1", "echo", json!({"text": "data"}))
                .usage(big)
                .into(),
            ScriptedTurn::text("## Goal\nEcho data."),
            ScriptedTurn::text("all done"),
        ]),
        mode: Mode::RecordThreads(Mutex::new(Vec::new())),
    });
    let agent = AgentConfig::new("build")
        .with_model(SMALL_MODEL)
        .with_compaction(CompactionConfig::default());
    let runner = env
        .runner(provider.clone())
        .with_tools(ToolRegistry::new().with(Echo))
        .with_agents(AgentRegistry::new(agent))
        .build();
    let progress = runner.compactor("build").unwrap().subscribe();
    let session = env.session();
    let out = runner
        .prompt(
            PromptInput::text(&session.id, "echo data"),
            &CancelToken::new(),
        )
        .unwrap();
    assert_eq!(out.text, "all done");
    let requests = provider.inner.requests();
    assert!(
        requests[1].tools.is_empty(),
        "the second call is the summary"
    );
    let Mode::RecordThreads(threads) = &provider.mode else {
        unreachable!()
    };
    let threads = threads.lock().unwrap().clone();
    assert_eq!(threads.len(), 3);
    let here = std::thread::current().id();
    assert_eq!(threads[0], here, "the loop runs on the caller's thread");
    assert_ne!(
        threads[1], here,
        "the summary is asked on the compaction thread"
    );
    assert_eq!(threads[2], here, "the loop waited and went on");
    assert!(progress.try_iter().count() >= 4, "progress was reported");
}

#[test]
fn concurrent_title_setters_never_overwrite_each_other() {
    let env = Env::new();
    const THREADS: usize = 16;
    // Many rounds: a check-then-set race needs the threads to interleave
    // between the check and the set, which one round may not show.
    for round in 0..20 {
        let session = env.session();
        let barrier = Barrier::new(THREADS);
        let results: Vec<Option<String>> = std::thread::scope(|scope| {
            let handles: Vec<_> = (0..THREADS)
                .map(|i| {
                    let (env, barrier, id) = (&env, &barrier, &session.id);
                    scope.spawn(move || {
                        barrier.wait();
                        let title = format!("Round {round} title {i}");
                        set_title_in_lineage(&env.sessions, id, &title).unwrap()
                    })
                })
                .collect();
            handles.into_iter().map(|h| h.join().unwrap()).collect()
        });
        let winners: Vec<&String> = results.iter().flatten().collect();
        assert_eq!(winners.len(), 1, "round {round}: {results:?}");
        let stored = env.sessions.get(&session.id).unwrap().title;
        assert_eq!(stored.as_ref(), Some(winners[0]), "round {round}");
    }

    // A taken title is numbered within the same transaction.
    let first = env.session();
    set_title_in_lineage(&env.sessions, &first.id, "Taken").unwrap();
    let other = env.session();
    assert_eq!(
        set_title_in_lineage(&env.sessions, &other.id, "Taken").unwrap(),
        Some("Taken #2".to_owned())
    );
}
