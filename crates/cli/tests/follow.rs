//! `scribe show --follow` in a process of its own while this test writes the session the
//! way an agent does (a streamed reply, a tool call that runs, a finish): what it prints,
//! a piece at a time, ends up exactly what `scribe show` prints; a tool call appears only
//! with its result; deleting the session ends it. On SQLite and (ignored without a
//! server: `.ci/with-postgres cargo test -p scribe-cli --test follow -- --ignored`) on
//! PostgreSQL, where the follower hears the commits through the change outbox.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::ffi::OsStr;
use std::io::Read;
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use common::Env;
use scribe_message::{
    FinishReason, MessageService, NewMessage, Part, Role, StepStartPart, TextPart,
};
use scribe_session::{NewSession, SessionService};

/// A running `scribe show --follow`, with what it printed so far; killed when dropped.
struct Following {
    child: Child,
    out: Arc<Mutex<Vec<u8>>>,
    err: Arc<Mutex<Vec<u8>>>,
}

impl Following {
    /// `scribe --db DB show SESSION --follow`.
    fn start(db: impl AsRef<OsStr>, session: &str) -> Following {
        Self::start_with(db, session, &[])
    }

    /// The same with more environment variables.
    fn start_with(db: impl AsRef<OsStr>, session: &str, vars: &[(&str, &str)]) -> Following {
        let mut child = Command::new(env!("CARGO_BIN_EXE_scribe"))
            .envs(vars.iter().copied())
            .arg("--db")
            .arg(db)
            .args(["show", session, "--follow"])
            .env_remove("SCRIBE_DB")
            .env_remove("CLICOLOR_FORCE")
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let collect = |mut from: Box<dyn Read + Send>| {
            let into = Arc::new(Mutex::new(Vec::new()));
            let sink = Arc::clone(&into);
            std::thread::spawn(move || {
                let mut buf = [0u8; 4096];
                while let Ok(n) = from.read(&mut buf) {
                    if n == 0 {
                        break;
                    }
                    sink.lock().unwrap().extend_from_slice(&buf[..n]);
                }
            });
            into
        };
        let out = collect(Box::new(child.stdout.take().unwrap()));
        let err = collect(Box::new(child.stderr.take().unwrap()));
        Following { child, out, err }
    }

    fn printed(&self) -> String {
        String::from_utf8_lossy(&self.out.lock().unwrap()).into_owned()
    }

    /// Waits until stdout holds `needle`; what it holds then.
    fn wait_for(&self, needle: &str) -> String {
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            let printed = self.printed();
            if printed.contains(needle) {
                return printed;
            }
            assert!(
                Instant::now() < deadline,
                "no {needle:?} in 30 s; printed:\n{printed}\nstderr:\n{}",
                String::from_utf8_lossy(&self.err.lock().unwrap())
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

impl Drop for Following {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// What follows the header: from the first message's line on.
fn conversation(printed: &str) -> &str {
    let at = printed.find("\nuser ").expect("a user message");
    &printed[at..]
}

/// Twice the follower's poll: long enough for it to have printed what it would print.
fn a_few_polls() {
    std::thread::sleep(Duration::from_millis(600));
}

fn running(call: &str) -> Part {
    let Part::Tool(mut tool) =
        Part::tool(call, "bash", serde_json::json!({"command": "cargo build"}))
    else {
        unreachable!()
    };
    tool.state.start(1).unwrap();
    Part::Tool(tool)
}

fn completed(call: &str) -> Part {
    let Part::Tool(mut tool) = running(call) else {
        unreachable!()
    };
    tool.state
        .complete(
            "   Compiling app v0.1.0\n    Finished dev",
            "",
            serde_json::Value::Null,
            2,
        )
        .unwrap();
    Part::Tool(tool)
}

fn write_a_turn(messages: &MessageService, session: &str, follow: &Following) {
    let reply = messages
        .create(NewMessage::new(
            session,
            Role::Assistant,
            vec![Part::StepStart(StepStartPart::default())],
        ))
        .unwrap();
    // A reply streamed in three flushes: each piece appears as it is written.
    let text = messages
        .append_part(&reply.id, Part::text("Let me"))
        .unwrap();
    follow.wait_for("  Let me");
    messages
        .update_part(&text.id, Part::text("Let me build it "))
        .unwrap();
    follow.wait_for("Let me build it");
    messages
        .update_part(&text.id, Part::text("Let me build it first.\nThen fix it."))
        .unwrap();
    follow.wait_for("Then fix it.");
    // A tool call appears once it has its result, never as pending or running.
    let call = messages
        .append_part(
            &reply.id,
            Part::tool(
                "call_1",
                "bash",
                serde_json::json!({"command": "cargo build"}),
            ),
        )
        .unwrap();
    messages.update_part(&call.id, running("call_1")).unwrap();
    a_few_polls();
    assert!(!follow.printed().contains("bash"), "{}", follow.printed());
    messages.update_part(&call.id, completed("call_1")).unwrap();
    follow.wait_for("[completed]");
    follow.wait_for("Finished dev");
    // The last text part is printed while the message is open, and ended when it is
    // finished.
    messages
        .append_part(&reply.id, Part::text("It builds."))
        .unwrap();
    follow.wait_for("  It builds.");
    messages.finish(&reply.id, FinishReason::EndTurn).unwrap();
}

/// The store at `db` (its services `sessions` and `messages`) followed while a turn is
/// written; `show` is what `scribe show Live` prints at the end.
fn follow_a_turn(
    db: &OsStr,
    sessions: &SessionService,
    messages: &MessageService,
    show: impl Fn() -> String,
) {
    let session = sessions
        .create(NewSession {
            title: Some("Live".into()),
            ..NewSession::default()
        })
        .unwrap();
    messages
        .create(NewMessage::new(
            &session.id,
            Role::User,
            vec![Part::text("build it")],
        ))
        .unwrap();

    let follow = Following::start(db, "Live");
    follow.wait_for("  build it");
    write_a_turn(messages, &session.id, &follow);
    // Text the agent added (here, ten lines of environment details) is cut to its first
    // six lines, as `show` cuts it.
    let details: Vec<String> = (1..=10).map(|n| format!("detail {n}")).collect();
    messages
        .create(NewMessage::new(
            &session.id,
            Role::User,
            vec![
                Part::text("thanks"),
                Part::Text(TextPart {
                    text: details.join("\n"),
                    synthetic: true,
                    ..TextPart::default()
                }),
            ],
        ))
        .unwrap();
    follow.wait_for("  thanks");
    let printed = follow.wait_for("… 4 more lines");
    assert!(
        printed.contains("  detail 6\n") && !printed.contains("detail 7"),
        "{printed}"
    );
    assert!(
        !printed.contains("running") && !printed.contains("pending"),
        "{printed}"
    );

    // Piece by piece, the same conversation `show` prints at once.
    let shown = show();
    assert_eq!(conversation(&printed), conversation(&shown));

    // Deleting the session ends the follower, successfully, saying why.
    sessions.delete(&session.id).unwrap();
    let deadline = Instant::now() + Duration::from_secs(30);
    let mut follow = follow;
    let status = loop {
        if let Some(status) = follow.child.try_wait().unwrap() {
            break status;
        }
        assert!(
            Instant::now() < deadline,
            "still following a deleted session"
        );
        std::thread::sleep(Duration::from_millis(20));
    };
    assert!(status.success());
    std::thread::sleep(Duration::from_millis(100));
    let err = String::from_utf8_lossy(&follow.err.lock().unwrap()).into_owned();
    assert_eq!(err, format!("scribe: session {} was deleted\n", session.id));
}

#[test]
fn following_prints_what_show_prints_as_it_is_written() {
    let env = Env::new();
    let (sessions, messages) = env.services();
    follow_a_turn(env.db.as_os_str(), &sessions, &messages, || {
        env.ok(&["show", "Live"])
    });
}

/// The same on PostgreSQL: the follower hears another connection's commits through the
/// change outbox, as a follower on another host would.
#[test]
#[ignore = "needs PostgreSQL: run under .ci/with-postgres"]
fn following_on_postgres_prints_what_show_prints_as_it_is_written() {
    let url = scribe_db::testing::fresh_test_database("cli_follow").unwrap();
    let db = Arc::new(scribe_db::Database::open(&url).unwrap());
    let sessions = SessionService::new(Arc::clone(&db));
    let messages = MessageService::new(db);
    follow_a_turn(OsStr::new(&url), &sessions, &messages, || {
        let out = Command::new(env!("CARGO_BIN_EXE_scribe"))
            .args(["--db", &url, "show", "Live"])
            .env_remove("SCRIBE_DB")
            .output()
            .unwrap();
        assert!(out.status.success(), "{}", common::stderr(&out));
        common::stdout(&out)
    });
}

#[test]
fn a_reply_being_written_when_following_starts_goes_on_from_where_it_stands() {
    let env = Env::new();
    let (sessions, messages) = env.services();
    let session = sessions.create(NewSession::titled("Mid-reply")).unwrap();
    messages
        .create(NewMessage::new(
            &session.id,
            Role::User,
            vec![Part::text("go")],
        ))
        .unwrap();
    let reply = messages
        .create(NewMessage::new(
            &session.id,
            Role::Assistant,
            vec![Part::text("Half of")],
        ))
        .unwrap();

    let follow = Following::start(&env.db, &session.id);
    follow.wait_for("  Half of");
    // A rewrite, not an extension, is printed again whole after a line saying so.
    messages
        .update_part(&reply.parts[0].id, Part::text("All of it, said again."))
        .unwrap();
    let printed = follow.wait_for("All of it, said again.");
    assert!(
        printed.contains("  Half of\n  (the text above was rewritten:)\n  All of it, said again."),
        "{printed}"
    );
    // Deleted while written: the follower says so and goes on with the session.
    messages.delete(&reply.id).unwrap();
    follow.wait_for("(deleted before it was finished)");
    messages
        .create(NewMessage::new(
            &session.id,
            Role::User,
            vec![Part::text("still here?")],
        ))
        .unwrap();
    follow.wait_for("  still here?");
}

/// An import writes a reply a line, a part, at a time, with the agent's own times (long
/// past): a reply that looks ended goes on printing its parts as they come, and a tool
/// call waits for its result however old its times say it is.
#[test]
fn parts_added_to_an_ended_reply_with_old_times_print_where_it_stopped() {
    let env = Env::new();
    let clock = scribe_db::ManualClock::new(1_700_000_000_000);
    let (sessions, messages) = env.services_with(scribe_db::Options {
        clock: clock.clock(),
        ..scribe_db::Options::default()
    });
    let session = sessions.create(NewSession::titled("Imported")).unwrap();
    messages
        .create(NewMessage::new(
            &session.id,
            Role::User,
            vec![Part::text("read it")],
        ))
        .unwrap();
    let follow = Following::start(&env.db, "Imported");
    follow.wait_for("  read it");

    let reply = messages
        .create(NewMessage::new(
            &session.id,
            Role::Assistant,
            vec![Part::text("Reading the file.")],
        ))
        .unwrap();
    messages.finish(&reply.id, FinishReason::ToolUse).unwrap();
    follow.wait_for("  Reading the file.\n");
    let call = messages
        .append_part(
            &reply.id,
            Part::tool("call_9", "read_file", serde_json::json!({"path": "a.rs"})),
        )
        .unwrap();
    a_few_polls();
    assert!(
        !follow.printed().contains("read_file"),
        "{}",
        follow.printed()
    );
    messages.update_part(&call.id, running("call_9")).unwrap();
    a_few_polls();
    assert!(!follow.printed().contains("read_file"));
    messages.update_part(&call.id, completed("call_9")).unwrap();
    follow.wait_for("Finished dev");
    messages
        .create(NewMessage::new(
            &session.id,
            Role::User,
            vec![Part::text("and now?")],
        ))
        .unwrap();
    let printed = follow.wait_for("  and now?");
    assert!(!printed.contains("[pending]"), "{printed}");
    assert_eq!(
        conversation(&printed),
        conversation(&env.ok(&["show", "Imported"]))
    );
}

/// What a user runs to watch Claude Code at work, three processes: Claude Code's file
/// grows a line at a time (the shared fixture's 29 lines), `scribe import --from
/// claude-code --watch` stores each as it comes, and `scribe show -f` prints the
/// conversation as it is stored, which ends up exactly what `scribe show` prints: every
/// tool call with its result, none left out.
#[test]
fn following_claude_code_through_an_import_watch_prints_what_show_prints() {
    let env = Env::new();
    let home = env.path("home");
    let project = home.join(".claude/projects/-path-to-Demo");
    std::fs::create_dir_all(&project).unwrap();
    let name = "1af7fc5e-8455-4414-9ccd-011d40f70b2a.jsonl";
    let fixture = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../import/tests/fixtures/claude/projects/-path-to-Demo")
        .join(name);
    let text = std::fs::read_to_string(fixture).unwrap();
    let lines: Vec<&str> = text.lines().collect();
    let file = project.join(name);
    let write_lines = |lines: &[&str]| {
        use std::io::Write as _;
        let mut f = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&file)
            .unwrap();
        for line in lines {
            writeln!(f, "{line}").unwrap();
        }
    };
    // The first prompt is there before anything runs.
    write_lines(&lines[..2]);
    let import = |args: &[&str]| {
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_scribe"));
        cmd.arg("--db")
            .arg(&env.db)
            .args(["import", "--from", "claude-code"])
            .args(args)
            .env("HOME", &home)
            .env_remove("CLAUDE_CONFIG_DIR")
            .env_remove("SCRIBE_DB")
            .env("SCRIBE_WATCH_POLL_MS", "20");
        cmd
    };
    assert!(import(&[]).output().unwrap().status.success());
    let mut watcher = import(&["--watch"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let follow = Following::start(&env.db, "1af7fc5e");
    follow.wait_for("Please analyze this codebase");
    for line in &lines[2..] {
        write_lines(std::slice::from_ref(line));
        std::thread::sleep(Duration::from_millis(60));
    }
    follow.wait_for("I've created a basic CLAUDE.md");
    // The last reply's line ends once it is seen whole, a poll or two later.
    let deadline = Instant::now() + Duration::from_secs(30);
    let (printed, shown) = loop {
        let printed = follow.printed();
        let shown = env.ok(&["show", "1af7fc5e"]);
        if conversation(&printed) == conversation(&shown) || Instant::now() > deadline {
            break (printed, shown);
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    let _ = watcher.kill();
    let _ = watcher.wait();
    assert_eq!(conversation(&printed), conversation(&shown));
    assert!(!printed.contains("[running]") && !printed.contains("[pending]"));
    assert_eq!(printed.matches("⚙ ").count(), 12, "{printed}");
}

/// A reply whose writer stopped mid-way (a crash, a kill) is shown whole once nothing
/// was written to it for the quiet span (10 minutes; 1 s here), with no commit to wake
/// the follower: its tool call as it stands.
#[test]
fn a_reply_left_unfinished_shows_whole_once_quiet() {
    let env = Env::new();
    let (sessions, messages) = env.services();
    let session = sessions.create(NewSession::titled("Stopped")).unwrap();
    messages
        .create(NewMessage::new(
            &session.id,
            Role::User,
            vec![Part::text("build")],
        ))
        .unwrap();
    let follow = Following::start_with(&env.db, "Stopped", &[("SCRIBE_FOLLOW_QUIET_MS", "1000")]);
    follow.wait_for("  build");
    messages
        .create(NewMessage::new(
            &session.id,
            Role::Assistant,
            vec![Part::text("Running the build."), running("call_7")],
        ))
        .unwrap();
    follow.wait_for("  Running the build.\n");
    // Nothing more is written; the held call shows as it stands once quiet.
    let printed = follow.wait_for("[running]");
    assert!(
        printed.contains("⚙ bash({\"command\":\"cargo build\"}) [running]"),
        "{printed}"
    );
}

/// Compaction carries a conversation on into a continuation session (and ends the
/// first): the follower says so and goes on there, from its first message, and hears
/// that session's commits from then on.
#[test]
fn following_goes_on_into_the_continuation_compaction_starts() {
    let env = Env::new();
    let (sessions, messages) = env.services();
    follow_into_a_continuation(env.db.as_os_str(), &sessions, &messages);
}

/// The same on PostgreSQL, where the change outbox names each change's session: the
/// continuation's first commits name it, not the session followed, which hears of it when
/// compaction ends it.
#[test]
#[ignore = "needs PostgreSQL: run under .ci/with-postgres"]
fn following_on_postgres_goes_on_into_the_continuation() {
    let url = scribe_db::testing::fresh_test_database("cli_follow_continuation").unwrap();
    let db = Arc::new(scribe_db::Database::open(&url).unwrap());
    let sessions = SessionService::new(Arc::clone(&db));
    let messages = MessageService::new(db);
    follow_into_a_continuation(OsStr::new(&url), &sessions, &messages);
}

fn follow_into_a_continuation(db: &OsStr, sessions: &SessionService, messages: &MessageService) {
    let first = sessions.create(NewSession::titled("Long talk")).unwrap();
    messages
        .create(NewMessage::new(
            &first.id,
            Role::User,
            vec![Part::text("first part")],
        ))
        .unwrap();
    let follow = Following::start(db, &first.id);
    follow.wait_for("  first part");

    let next = sessions.create_continuation(&first.id).unwrap();
    messages
        .create(NewMessage::new(
            &next.id,
            Role::User,
            vec![Part::text("where we were: a summary")],
        ))
        .unwrap();
    sessions.end(&first.id, "compression").unwrap();
    let printed = follow.wait_for("  where we were: a summary");
    assert!(
        printed.contains(&format!(
            "\n── continued in {} (Long talk #2), after compaction: following it ──\n",
            next.id
        )),
        "{printed}"
    );
    messages
        .create(NewMessage::new(
            &next.id,
            Role::User,
            vec![Part::text("second part")],
        ))
        .unwrap();
    follow.wait_for("  second part");
}

#[test]
fn follow_and_json_do_not_go_together() {
    let env = Env::new();
    common::seed(&env);
    let out = env.run(&["show", "Fix the build", "--follow", "--json"]);
    assert_eq!(out.status.code(), Some(2), "{}", common::stderr(&out));
    assert!(common::stderr(&out).contains("cannot be used with"));
}
