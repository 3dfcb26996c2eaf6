//! Prompt ingestion: persistence before the provider is called, model
//! precedence, file resolution (text, truncation, directory, binary, missing,
//! outside the roots), hooks, `no_reply` and tool switches.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod loop_support;

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use loop_support::*;
use scribe_agent::{
    AgentConfig, AgentError, AgentRegistry, CancelToken, ChatRequest, IngestConfig, LoopEvent,
    PartDraft, PromptInput, Provider, ProviderError, ProviderEvent, ProviderResponse,
    ScriptedProvider, ScriptedTurn,
};
use scribe_message::{FileSource, MessageService, Part, Role};

fn text_of(part: &Part) -> &str {
    match part {
        Part::Text(t) => &t.text,
        other => panic!("expected text, got {other:?}"),
    }
}

/// Checks the database from inside the provider call.
struct Inspecting {
    inner: ScriptedProvider,
    messages: Arc<MessageService>,
    session_id: String,
    seen_user_messages: AtomicUsize,
    seen_text: Mutex<String>,
}

impl Provider for Inspecting {
    fn name(&self) -> &str {
        "inspecting"
    }
    fn send(
        &self,
        request: &ChatRequest,
        on_event: &mut dyn FnMut(ProviderEvent),
    ) -> Result<ProviderResponse, ProviderError> {
        let stored = self.messages.list(&self.session_id).unwrap();
        let users: Vec<_> = stored.iter().filter(|m| m.role == Role::User).collect();
        self.seen_user_messages.store(users.len(), Ordering::SeqCst);
        *self.seen_text.lock().unwrap() = users.last().map(|m| m.text()).unwrap_or_default();
        // The assistant message of this step is saved before the call too.
        assert_eq!(stored.last().unwrap().role, Role::Assistant);
        assert!(stored.last().unwrap().finished_at.is_none());
        self.inner.send(request, on_event)
    }
}

#[test]
fn user_message_is_in_the_database_before_the_provider_is_called() {
    let env = Env::new();
    let session = env.session();
    let provider = Arc::new(Inspecting {
        inner: ScriptedProvider::new([ScriptedTurn::text("hi")]),
        messages: env.messages.clone(),
        session_id: session.id.clone(),
        seen_user_messages: AtomicUsize::new(0),
        seen_text: Mutex::new(String::new()),
    });
    let runner = scribe_agent::AgentRunner::builder(env.store.clone(), provider.clone())
        .with_catalog(env.catalog.clone())
        .with_project_root(env.project.clone())
        .build();
    let out = runner
        .prompt(
            PromptInput::text(&session.id, "explain this project"),
            &CancelToken::new(),
        )
        .unwrap();
    assert_eq!(provider.seen_user_messages.load(Ordering::SeqCst), 1);
    assert_eq!(*provider.seen_text.lock().unwrap(), "explain this project");
    assert_eq!(out.text, "hi");
    let stored = env.messages_of(&session.id);
    assert_eq!(stored.len(), 2);
    assert_eq!(stored[0].agent.as_deref(), Some("build"));
    assert_eq!(stored[0].model.as_deref(), Some(MODEL));
    assert_eq!(stored[1].parent_id.as_deref(), Some(stored[0].id.as_str()));
    // The session was touched by the save.
    assert!(env.sessions.get(&session.id).unwrap().updated_at >= stored[0].created_at);
}

#[test]
fn model_precedence_input_then_agent_then_session() {
    let env = Env::new();
    let provider = Arc::new(ScriptedProvider::new(Vec::<ScriptedTurn>::new()));
    let agents = AgentRegistry::new(AgentConfig::new("build"))
        .with(AgentConfig::new("pinned").with_model(AGENT_MODEL));
    let runner = env.runner(provider.clone()).with_agents(agents).build();
    let session = env.session();
    let save = |agent: Option<&str>, model: Option<&str>| {
        runner
            .prompt(
                PromptInput {
                    agent: agent.map(str::to_owned),
                    model: model.map(str::to_owned),
                    no_reply: true,
                    ..PromptInput::text(&session.id, "x")
                },
                &CancelToken::new(),
            )
            .unwrap();
        let last = env.messages_of(&session.id).pop().unwrap();
        (last.agent.unwrap(), last.model.unwrap())
    };
    assert_eq!(
        save(Some("pinned"), Some(OTHER_MODEL)),
        ("pinned".into(), OTHER_MODEL.into())
    );
    assert_eq!(
        save(Some("pinned"), None),
        ("pinned".into(), AGENT_MODEL.into())
    );
    // The session's model is now the last one used.
    assert_eq!(
        env.sessions.get(&session.id).unwrap().model.as_deref(),
        Some(AGENT_MODEL)
    );
    assert_eq!(save(None, None), ("build".into(), AGENT_MODEL.into()));

    // A session with no model and no history: an error, nothing saved.
    let bare = env.sessions.create(Default::default()).unwrap();
    let err = runner
        .prompt(
            PromptInput {
                no_reply: true,
                ..PromptInput::text(&bare.id, "x")
            },
            &CancelToken::new(),
        )
        .unwrap_err();
    assert!(matches!(err, AgentError::NoModel { .. }), "{err}");
    assert!(env.messages_of(&bare.id).is_empty());
    // An agent mention picks the agent.
    let out = runner
        .prompt(
            PromptInput {
                session_id: session.id.clone(),
                parts: vec![
                    PartDraft::Agent {
                        name: "pinned".into(),
                    },
                    PartDraft::text("hey"),
                ],
                no_reply: true,
                ..PromptInput::default()
            },
            &CancelToken::new(),
        )
        .unwrap();
    assert!(out.finish_reason.is_none());
    let last = env.messages_of(&session.id).pop().unwrap();
    assert_eq!(last.agent.as_deref(), Some("pinned"));
    // Unknown agent and unknown model are refused.
    let bad = |input: PromptInput| runner.prompt(input, &CancelToken::new()).unwrap_err();
    assert!(matches!(
        bad(PromptInput {
            agent: Some("ghost".into()),
            ..PromptInput::text(&session.id, "x")
        }),
        AgentError::UnknownAgent(_)
    ));
    assert!(matches!(
        bad(PromptInput {
            model: Some("gpt-0".into()),
            ..PromptInput::text(&session.id, "x")
        }),
        AgentError::UnknownModel(_)
    ));
    assert!(matches!(
        bad(PromptInput {
            parts: vec![],
            ..PromptInput::text(&session.id, "x")
        }),
        AgentError::EmptyPrompt
    ));
    assert!(
        provider.requests().is_empty(),
        "no_reply never calls the model"
    );
}

#[test]
fn model_falls_back_to_the_last_assistant_message() {
    let env = Env::new();
    let provider = Arc::new(ScriptedProvider::new([ScriptedTurn::text("a")]));
    let runner = env.runner(provider).build();
    let session = env.session();
    runner
        .prompt(
            PromptInput {
                model: Some(OTHER_MODEL.into()),
                ..PromptInput::text(&session.id, "x")
            },
            &CancelToken::new(),
        )
        .unwrap();
    // Forget the session's model: the last assistant message still knows.
    env.sessions
        .update(&session.id, |s| s.model = None)
        .unwrap();
    runner
        .prompt(
            PromptInput {
                no_reply: true,
                ..PromptInput::text(&session.id, "y")
            },
            &CancelToken::new(),
        )
        .unwrap();
    let last = env.messages_of(&session.id).pop().unwrap();
    assert_eq!(last.model.as_deref(), Some(OTHER_MODEL));
}

#[test]
fn files_are_resolved_before_saving() {
    let env = Env::new();
    let p = &env.project;
    std::fs::write(p.join("notes.md"), "# Notes\nhello").unwrap();
    std::fs::write(p.join("big.txt"), "a".repeat(100)).unwrap();
    std::fs::create_dir_all(p.join("src/nested")).unwrap();
    std::fs::write(p.join("src/lib.rs"), "fn main() {}").unwrap();
    std::fs::write(p.join("logo.png"), [0x89, b'P', b'N', b'G', 0, 1, 2]).unwrap();
    std::fs::write(p.join("blob.bin"), [1, 2, 0, 3]).unwrap();
    let runner = env
        .runner(Arc::new(ScriptedProvider::new(Vec::<ScriptedTurn>::new())))
        .with_ingest_config(IngestConfig {
            max_file_bytes: 10,
            ..IngestConfig::default()
        })
        .build();
    let events = runner.subscribe();
    let session = env.session();
    let drafts = vec![
        PartDraft::text("look"),
        PartDraft::file("notes.md"),
        PartDraft::file("big.txt"),
        PartDraft::file("src"),
        PartDraft::file("logo.png"),
        PartDraft::file("blob.bin"),
        PartDraft::file("missing.txt"),
    ];
    runner
        .prompt(
            PromptInput {
                session_id: session.id.clone(),
                parts: drafts,
                no_reply: true,
                ..Default::default()
            },
            &CancelToken::new(),
        )
        .unwrap();
    let msg = env.messages_of(&session.id).pop().unwrap();
    let parts: Vec<&Part> = msg.parts.iter().map(|p| &p.part).collect();
    assert_eq!(text_of(parts[0]), "look");
    assert_eq!(text_of(parts[1]), "Read file notes.md");
    assert!(matches!(parts[1], Part::Text(t) if t.synthetic));
    // Capped at 10 bytes, with a note.
    assert_eq!(
        text_of(parts[2]),
        "# Notes\nhe\n[truncated: the file is 13 bytes; only the first 10 are included]"
    );
    assert_eq!(text_of(parts[3]), "Read file big.txt");
    assert!(text_of(parts[4]).starts_with("aaaaaaaaaa\n[truncated: the file is 100 bytes"));
    assert_eq!(text_of(parts[5]), "Listed directory src");
    assert_eq!(text_of(parts[6]), "lib.rs\nnested/");
    match parts[7] {
        Part::File(f) => {
            assert_eq!(f.mime, "image/png");
            assert_eq!(f.filename.as_deref(), Some("logo.png"));
            assert!(matches!(&f.source, FileSource::Inline { data } if data.len() == 7));
        }
        other => panic!("{other:?}"),
    }
    assert!(matches!(parts[8], Part::File(f) if f.mime == "application/octet-stream"));
    // A failed read is visible, never invented, and reported.
    let failure = text_of(parts[9]);
    assert!(
        failure.starts_with("Read file missing.txt failed: "),
        "{failure}"
    );
    let failed: Vec<_> = events
        .try_iter()
        .filter_map(|e| match e.unwrap().payload {
            LoopEvent::FileReadFailed { path, .. } => Some(path),
            _ => None,
        })
        .collect();
    assert_eq!(failed, vec!["missing.txt".to_owned()]);
}

#[test]
fn paths_outside_the_roots_are_refused_and_nothing_is_saved() {
    let env = Env::new();
    let outside = env.root.join("outside");
    std::fs::create_dir_all(&outside).unwrap();
    std::fs::write(outside.join("secret.txt"), "secret").unwrap();
    #[cfg(unix)]
    std::os::unix::fs::symlink(&outside, env.project.join("escape")).unwrap();
    let runner = env
        .runner(Arc::new(ScriptedProvider::new(Vec::<ScriptedTurn>::new())))
        .build();
    let session = env.session();
    let mut bad = vec![
        "../outside/secret.txt".to_owned(),
        outside.join("secret.txt").to_string_lossy().into_owned(),
    ];
    if cfg!(unix) {
        bad.push("escape/secret.txt".into());
    }
    for path in bad {
        let err = runner
            .prompt(
                PromptInput {
                    session_id: session.id.clone(),
                    parts: vec![PartDraft::text("x"), PartDraft::file(&path)],
                    no_reply: true,
                    ..Default::default()
                },
                &CancelToken::new(),
            )
            .unwrap_err();
        assert!(
            matches!(err, AgentError::FileRefused { .. }),
            "{path}: {err}"
        );
    }
    assert!(env.messages_of(&session.id).is_empty());

    // The same file through an extra root is fine.
    let runner = env
        .runner(Arc::new(ScriptedProvider::new(Vec::<ScriptedTurn>::new())))
        .with_ingest_config(IngestConfig {
            extra_roots: vec![outside.clone()],
            ..Default::default()
        })
        .build();
    runner
        .prompt(
            PromptInput {
                session_id: session.id.clone(),
                parts: vec![PartDraft::file(
                    outside.join("secret.txt").to_string_lossy(),
                )],
                no_reply: true,
                ..Default::default()
            },
            &CancelToken::new(),
        )
        .unwrap();
    assert_eq!(env.messages_of(&session.id)[0].parts.len(), 3); // read, content, finish
}

#[test]
fn hooks_change_what_is_saved_or_refuse_it() {
    let env = Env::new();
    let runner = env
        .runner(Arc::new(ScriptedProvider::new(Vec::<ScriptedTurn>::new())))
        .with_hook(|draft| {
            draft.parts.push(Part::text("[added by hook]"));
            if let Some(Part::Text(t)) = draft.parts.first_mut() {
                t.text = t.text.to_uppercase();
            }
            draft.model = OTHER_MODEL.to_owned();
            Ok(())
        })
        .with_hook(|draft| {
            if draft
                .parts
                .iter()
                .any(|p| matches!(p, Part::Text(t) if t.text.contains("FORBIDDEN")))
            {
                return Err("forbidden word".into());
            }
            Ok(())
        })
        .build();
    let session = env.session();
    runner
        .prompt(
            PromptInput {
                no_reply: true,
                ..PromptInput::text(&session.id, "hello")
            },
            &CancelToken::new(),
        )
        .unwrap();
    let msg = env.messages_of(&session.id).pop().unwrap();
    assert_eq!(msg.text(), "HELLO\n\n[added by hook]");
    assert_eq!(msg.model.as_deref(), Some(OTHER_MODEL));
    let err = runner
        .prompt(
            PromptInput {
                no_reply: true,
                ..PromptInput::text(&session.id, "forbidden")
            },
            &CancelToken::new(),
        )
        .unwrap_err();
    assert!(matches!(err, AgentError::Hook { index: 1, .. }), "{err}");
    assert_eq!(env.messages_of(&session.id).len(), 1);
}

#[test]
fn no_reply_saves_and_stops_and_tool_switches_become_rules() {
    let env = Env::new();
    let provider = Arc::new(ScriptedProvider::new([ScriptedTurn::text("later")]));
    let runner = env.runner(provider.clone()).build();
    let session = env.session();
    let out = runner
        .prompt(
            PromptInput {
                no_reply: true,
                tools: Some(BTreeMap::from([
                    ("write_file".to_owned(), false),
                    ("read_file".to_owned(), true),
                ])),
                ..PromptInput::text(&session.id, "remember this")
            },
            &CancelToken::new(),
        )
        .unwrap();
    assert!(out.finish_reason.is_none());
    assert!(out.assistant_message_ids.is_empty());
    assert!(provider.requests().is_empty());
    let stored = env.messages_of(&session.id);
    assert_eq!(stored.len(), 1);
    assert_eq!(
        stored[0].finish_reason,
        Some(scribe_message::FinishReason::EndTurn)
    );
    let permission = env.sessions.get(&session.id).unwrap().permission.unwrap();
    assert_eq!(
        permission,
        serde_json::json!([
            {"permission": "read_file", "pattern": "*", "action": "allow"},
            {"permission": "write_file", "pattern": "*", "action": "deny"}
        ])
    );
    // The loop can be run later on the saved history.
    let out = runner.run(&session.id, None, &CancelToken::new()).unwrap();
    assert_eq!(out.text, "later");
    assert_eq!(provider.requests()[0].messages.len(), 1);
}
