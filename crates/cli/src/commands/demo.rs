//! `scribe demo`: a scripted, offline coding session through the real agent loop, then
//! what Scribe stored about it.
//!
//! Everything but the model is real: the prompt is ingested with a file attachment, the
//! loop runs the built-in file tools and a check command on a temporary project, a
//! sub-agent works in its own task session, usage and cost are charged from a model
//! catalog, and the model's small context window makes the loop compact the conversation
//! once. The model is a [`ScriptedProvider`] playing a fixed script, so the demo needs no
//! network and no API key. Each run adds one session to the database, titled
//! `Demo: fix the failing add test` and then `… #2`, `… #3`.

use std::collections::BTreeMap;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use clap::Args;
use scribe_agent::{
    AgentConfig, AgentRegistry, CancelToken, CheckCommand, CompactionConfig, CompactionStrategy,
    Model, ModelCatalog, PartDraft, Pricing, PromptInput, ScriptedProvider, ScriptedTurn,
    ToolRegistry,
};
use scribe_db::ids::{Prefix, new_id};
use scribe_message::{Part, Role, TokenUsage};
use scribe_session::NewSession;
use serde_json::json;

use crate::commands::list::ListCmd;
use crate::commands::search::SearchCmd;
use crate::context::Context;
use crate::error::CliError;
use crate::ui::{self, paint, style};

/// The demo's main model: Sonnet-like prices, a deliberately tiny context window.
const MAIN_MODEL: &str = "demo-sonnet";
/// The sub-agent's cheaper model.
const SUB_MODEL: &str = "demo-haiku";
/// The lineage every demo session belongs to.
const TITLE: &str = "Demo: fix the failing add test";
/// The source the demo's sessions are recorded under.
const SOURCE: &str = "demo";

/// Run a scripted coding session through the real agent loop, offline.
///
/// A scripted model fixes a bug in a temporary project: it reads an attached note and the
/// code, runs the project's check, delegates a question to a sub-agent, edits the file and
/// runs the check again. Usage and cost are recorded, and the small context window makes
/// the conversation compact itself once. Then the demo prints what was stored: the
/// session list, a search hit and the cost breakdown. Each run adds a new session.
#[derive(Debug, Args)]
pub struct DemoCmd {
    /// Keep the temporary project directory and print where it is.
    #[arg(long)]
    pub keep_project: bool,
}

/// The check the demo's project runs (hidden; the demo calls it as a tool).
#[derive(Debug, Args)]
pub struct DemoCheckCmd {
    /// The source file to test.
    pub file: PathBuf,
}

fn demo_error(what: &str) -> impl Fn(std::io::Error) -> CliError + '_ {
    move |e| CliError::Demo {
        what: what.to_owned(),
        source: Some(Box::new(e)),
    }
}

impl DemoCheckCmd {
    /// "Tests" `add` in the demo project: passes when it adds.
    pub fn run(self) -> Result<(), CliError> {
        let code = std::fs::read_to_string(&self.file).map_err(demo_error("cannot read file"))?;
        let mut out = std::io::stdout().lock();
        writeln!(out, "running 1 test")?;
        if code.contains("a + b") {
            writeln!(out, "test math::add_two_and_two ... ok\n")?;
            writeln!(out, "test result: ok. 1 passed; 0 failed")?;
            Ok(())
        } else {
            writeln!(out, "test math::add_two_and_two ... FAILED")?;
            writeln!(out, "  add(2, 2) returned 0, expected 4\n")?;
            writeln!(out, "test result: FAILED. 0 passed; 1 failed")?;
            out.flush()?;
            std::process::exit(1);
        }
    }
}

fn model(id: &str, name: &str, window: u64, pricing: Pricing) -> Model {
    Model {
        id: id.to_owned(),
        provider: "scripted".to_owned(),
        name: name.to_owned(),
        context_window: window,
        max_output_tokens: 1_000,
        pricing,
    }
}

fn catalog() -> Result<ModelCatalog, CliError> {
    let mut catalog = ModelCatalog::empty();
    let models = [
        model(
            MAIN_MODEL,
            "Demo Sonnet (8k window)",
            8_000,
            Pricing {
                input_per_mtok: 3.0,
                output_per_mtok: 15.0,
                cache_write_per_mtok: 3.75,
                cache_read_per_mtok: 0.30,
                long_prompt: None,
            },
        ),
        model(
            SUB_MODEL,
            "Demo Haiku",
            200_000,
            Pricing {
                input_per_mtok: 1.0,
                output_per_mtok: 5.0,
                cache_write_per_mtok: 1.25,
                cache_read_per_mtok: 0.10,
                long_prompt: None,
            },
        ),
    ];
    for m in models {
        catalog.insert(m).map_err(|e| CliError::Demo {
            what: "bad demo model".to_owned(),
            source: Some(Box::new(e)),
        })?;
    }
    Ok(catalog)
}

fn usage(input: i64, output: i64, cache_read: i64, cache_write: i64) -> TokenUsage {
    TokenUsage {
        input,
        output,
        cache_read,
        cache_write,
        reasoning: 0,
    }
}

/// The model's side of the conversation, in the order the loop asks for it.
fn script(task_call_id: &str) -> Vec<ScriptedTurn> {
    vec![
        ScriptedTurn::reply()
            .reasoning("NOTES.md says add must return the sum of its arguments. ")
            .reasoning("Read the code before touching it.")
            .text("Let me read the code first.")
            .tool_call("call_read", "read_file", json!({"path": "src/math.rs"}))
            .usage(usage(1_800, 60, 0, 1_200))
            .into(),
        ScriptedTurn::reply()
            .text("Now let me run the tests to see the failure.")
            .tool_call("call_check_1", "run_check", json!({"check": "test"}))
            .usage(usage(400, 40, 2_000, 300))
            .into(),
        ScriptedTurn::reply()
            .text("Before changing `add`, I'll have a sub-agent find out who calls it.")
            .tool_call(
                task_call_id,
                "task",
                json!({
                    "description": "Find the callers of add",
                    "prompt": "Which files call add() in this project, and what do they expect it to return?",
                    "agent": "explorer"
                }),
            )
            .usage(usage(500, 70, 2_400, 200))
            .into(),
        // The sub-agent, in its own task session.
        ScriptedTurn::reply()
            .tool_call("call_list", "list_dir", json!({"path": "src"}))
            .usage(usage(700, 20, 0, 0))
            .into(),
        ScriptedTurn::reply()
            .tool_call("call_read_main", "read_file", json!({"path": "src/main.rs"}))
            .usage(usage(900, 25, 0, 0))
            .into(),
        ScriptedTurn::reply()
            .text("Only src/main.rs calls add: it prints add(2, 2) and expects 4.")
            .usage(usage(1_100, 30, 0, 0))
            .into(),
        // The main agent again; this step fills the small window, so the loop compacts
        // before the next request.
        ScriptedTurn::reply()
            .text("The bug is `a - b`. Fixing it.")
            .tool_call(
                "call_edit",
                "edit_file",
                json!({"path": "src/math.rs", "old": "a - b", "new": "a + b"}),
            )
            .usage(usage(600, 90, 6_200, 400))
            .into(),
        // The compaction summary.
        ScriptedTurn::reply()
            .text("## Goal\nFix the failing `add` test (NOTES.md: add returns the sum).\n\n")
            .text("## Done\n- `add` in src/math.rs returned `a - b`; changed to `a + b`.\n")
            .text("- Only src/main.rs calls it and expects add(2, 2) = 4.\n\n")
            .text("## Next steps\nRun the tests again and report.")
            .usage(usage(3_000, 150, 0, 0))
            .into(),
        ScriptedTurn::reply()
            .text("Running the tests again.")
            .tool_call("call_check_2", "run_check", json!({"check": "test"}))
            .usage(usage(900, 30, 0, 600))
            .into(),
        ScriptedTurn::reply()
            .text("Fixed: `add` returned `a - b`; it now returns `a + b`, and the test passes.")
            .usage(usage(300, 40, 1_200, 0))
            .into(),
    ]
}

/// Writes the demo project: a bug, a note about it, a caller.
fn write_project(root: &Path) -> Result<(), CliError> {
    let err = demo_error("cannot write the demo project");
    std::fs::create_dir_all(root.join("src")).map_err(&err)?;
    std::fs::write(
        root.join("src/math.rs"),
        "/// The sum of `a` and `b`.\npub fn add(a: i32, b: i32) -> i32 {\n    a - b\n}\n",
    )
    .map_err(&err)?;
    std::fs::write(
        root.join("src/main.rs"),
        "mod math;\n\nfn main() {\n    println!(\"2 + 2 = {}\", math::add(2, 2));\n}\n",
    )
    .map_err(&err)?;
    std::fs::write(
        root.join("NOTES.md"),
        "# Notes\n\n`add(a, b)` must return the sum of its arguments; the test `add_two_and_two` checks it.\n",
    )
    .map_err(&err)?;
    Ok(())
}

impl DemoCmd {
    /// Runs the command.
    pub fn run(self, ctx: &Context) -> Result<(), CliError> {
        let project_dir = tempfile::Builder::new()
            .prefix("scribe-demo-")
            .tempdir()
            .map_err(demo_error("cannot create a temporary project"))?;
        let project = project_dir.path().to_path_buf();
        write_project(&project)?;

        let session = ctx.sessions.create_in_lineage(NewSession {
            title: Some(TITLE.to_owned()),
            source: SOURCE.to_owned(),
            directory: Some(project.to_string_lossy().into_owned()),
            model: Some(MAIN_MODEL.to_owned()),
            ..NewSession::default()
        })?;
        // A task session's id is the id of the call that spawned it, so it must be new on
        // every run.
        let task_call_id = new_id(Prefix::Part).replacen("prt_", "call_", 1);

        let exe = std::env::current_exe().map_err(demo_error("cannot find the scribe binary"))?;
        let checks = BTreeMap::from([(
            "test".to_owned(),
            CheckCommand::new(exe.to_string_lossy(), ["__demo-check", "src/math.rs"]),
        )]);
        let compaction = CompactionConfig {
            strategy: CompactionStrategy::InPlace,
            ..CompactionConfig::default()
        };
        let agents = AgentRegistry::new(
            AgentConfig::new("build")
                .with_description("writes and fixes code")
                .with_model(MAIN_MODEL)
                .with_system_prompt("You are a careful coding agent. Fix what the user asks.")
                .with_tools(["read_file", "edit_file", "list_dir", "run_check", "task"])
                .with_compaction(compaction),
        )
        .with(
            AgentConfig::new("explorer")
                .with_description("reads code and answers questions; changes nothing")
                .with_model(SUB_MODEL)
                .with_tools(["read_file", "list_dir"]),
        );
        let provider = Arc::new(ScriptedProvider::new(script(&task_call_id)));
        let runner = scribe_agent::AgentRunner::builder(ctx.store.clone(), provider)
            .with_catalog(Arc::new(catalog()?))
            .with_project_root(project.clone())
            .with_tools(ToolRegistry::builtin(checks))
            .with_agents(agents)
            .build();

        let spinner = ui::spinner("running the scripted session");
        let input = PromptInput {
            session_id: session.id.clone(),
            parts: vec![
                PartDraft::text("The add test fails. Please fix it; the notes are attached."),
                PartDraft::file("NOTES.md"),
            ],
            ..PromptInput::default()
        };
        let outcome = runner.prompt(input, &CancelToken::new());
        spinner.finish_and_clear();
        let outcome = outcome.map_err(|e| CliError::Demo {
            what: "the agent loop stopped".to_owned(),
            source: Some(Box::new(e)),
        })?;
        let session = ctx.sessions.get(&outcome.session_id)?;
        let Some(summary_id) = session.summary_message_id.clone() else {
            return Err(CliError::Demo {
                what: "the session ended without compacting; the demo expects one compaction"
                    .into(),
                source: None,
            });
        };

        let mut out = anstream::stdout().lock();
        writeln!(
            out,
            "{}",
            paint(
                style::HEADER,
                format!("Ran {:?}", session.title.as_deref().unwrap_or_default())
            )
        )?;
        writeln!(
            out,
            "  {} · {} model calls (main agent, sub-agent, compaction) · {} · finished: {}",
            session.id,
            session.api_call_count,
            ui::plural(session.tool_call_count, "tool call"),
            outcome.finish_reason.as_ref().map_or("?", |r| r.as_str())
        )?;
        writeln!(
            out,
            "  compacted once: summary {summary_id} · see it all with `scribe show {}`",
            session.id
        )?;
        writeln!(out, "  last answer: {}", outcome.text)?;
        let files = ctx.sessions.latest_files(&session.id)?;
        writeln!(out, "  files changed: {}", files.len())?;
        if self.keep_project {
            let kept = project_dir.keep();
            writeln!(out, "  project kept at {}", kept.display())?;
        }
        out.flush()?;
        drop(out);

        section("Sessions (scribe list --all -n 5)")?;
        ListCmd {
            source: Vec::new(),
            model: Vec::new(),
            dir: None,
            title: None,
            limit: 5,
            all: true,
            since: None,
            sort: crate::commands::list::Sort::Created,
            json: false,
        }
        .run(ctx)?;

        section("A search hit (scribe search \"expected 4\" --session …)")?;
        SearchCmd {
            query: vec!["expected 4".to_owned()],
            source: Vec::new(),
            exclude_source: Vec::new(),
            dir: None,
            role: Vec::new(),
            session: Some(session.id.clone()),
            since: None,
            limit: 1,
            json: false,
        }
        .run(ctx)?;

        section("Cost breakdown")?;
        cost_breakdown(ctx, &session.id, &task_call_id)?;
        Ok(())
    }
}

fn section(title: &str) -> Result<(), CliError> {
    let mut out = anstream::stdout().lock();
    writeln!(out, "\n{}", paint(style::HEADER, format!("== {title}")))?;
    Ok(())
}

/// One row per model call of the demo (main agent, sub-agent, compaction), then the
/// session totals (which include the sub-agent's rolled-up cost).
fn cost_breakdown(ctx: &Context, session_id: &str, task_id: &str) -> Result<(), CliError> {
    let mut table = ui::table([
        "SESSION",
        "STEP",
        "MODEL",
        "INPUT",
        "OUTPUT",
        "CACHE READ",
        "CACHE WRITE",
        "COST",
    ]);
    // Each row's cells but the cost, and its cost: a cost column has one format.
    let mut rows: Vec<(Vec<String>, f64)> = Vec::new();
    for (label, id) in [("main", session_id), ("sub-agent", task_id)] {
        let mut step = 0;
        for message in ctx.messages.list(id)? {
            if message.role != Role::Assistant {
                continue;
            }
            step += 1;
            let what = if message.is_summary {
                "compaction summary".to_owned()
            } else {
                let tools: Vec<&str> = message
                    .parts
                    .iter()
                    .filter_map(|p| match &p.part {
                        Part::Tool(t) => Some(t.tool.as_str()),
                        _ => None,
                    })
                    .collect();
                if tools.is_empty() {
                    "answer".to_owned()
                } else {
                    tools.join(", ")
                }
            };
            let u = &message.usage;
            rows.push((
                vec![
                    label.to_owned(),
                    format!("{step}. {what}"),
                    message.model.clone().unwrap_or_default(),
                    ui::grouped(u.input),
                    ui::grouped(u.output),
                    ui::grouped(u.cache_read),
                    ui::grouped(u.cache_write),
                ],
                message.cost_usd,
            ));
        }
    }
    let s = ctx.sessions.get(session_id)?;
    let t = &s.tokens;
    rows.push((
        vec![
            "total".to_owned(),
            format!("{} calls (sub-agent rolled in)", s.api_call_count),
            String::new(),
            ui::grouped(t.input),
            ui::grouped(t.output),
            ui::grouped(t.cache_read),
            ui::grouped(t.cache_write),
        ],
        s.estimated_cost_usd,
    ));
    let costs: Vec<f64> = rows.iter().map(|(_, cost)| *cost).collect();
    let last = rows.len().saturating_sub(1);
    for (i, ((mut cells, _), cost)) in rows.into_iter().zip(ui::dollar_column(&costs)).enumerate() {
        cells.push(cost);
        if i == last {
            cells = cells.into_iter().map(|c| paint(style::HEADER, c)).collect();
        }
        table.add_row(cells);
    }
    for i in 3..8 {
        if let Some(column) = table.column_mut(i) {
            column.set_cell_alignment(comfy_table::CellAlignment::Right);
        }
    }
    let mut out = anstream::stdout().lock();
    writeln!(out, "{}", ui::render(&mut table, &[0, 3, 4, 5, 6, 7]))?;
    Ok(())
}
