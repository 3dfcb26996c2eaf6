//! An application with a loop of its own, composing the crates as the README's library
//! section and the crates' docs describe: open a store, watch its events, create a
//! session, store the user's prompt, stream a model's reply into the session with
//! [`ReplyWriter`] (the deltas a real provider adapter would read off the wire), end it
//! and charge the step's usage and cost in one transaction, then search the history and
//! read what was spent.
//!
//! Run: `cargo run -p scribe-agent --example own_loop [DB_PATH]` (a temporary database
//! when no path is given; run it again on one path and it adds a session `… #2` that the
//! search finds too). `cargo test -p scribe-agent --example own_loop` runs it twice on
//! one file and checks what it reports.

use std::error::Error;
use std::io::Write;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use scribe_agent::provider::ProviderEvent;
use scribe_agent::{ModelCatalog, ReplyWriter, StepCharge, StreamedReply, UsageTracker};
use scribe_message::{
    FinishReason, NewMessage, Part, Role, SearchOptions, StepStartPart, TokenUsage, snippet_pieces,
};
use scribe_pubsub::{EventKind, Lagged};
use scribe_session::{NewSession, StatsBy, Store};

fn main() -> Result<(), Box<dyn Error>> {
    let work = tempfile::tempdir()?;
    let db_path = std::env::args()
        .nth(1)
        .map_or_else(|| work.path().join("scribe.db"), Into::into);
    run(&db_path, &mut std::io::stdout().lock())?;
    Ok(())
}

/// The model the (spelled-out) provider is said to be.
const MODEL: &str = "claude-sonnet-4-5";

/// What one run did, for the test.
#[derive(Debug)]
#[cfg_attr(
    not(test),
    expect(dead_code, reason = "only the test reads the report")
)]
struct Report {
    session_id: String,
    title: String,
    reply: String,
    cost_usd: f64,
    hits: Vec<String>,
    session_events: Vec<(EventKind, String)>,
    part_events: usize,
}

/// One prompt and its streamed reply in the store at `db_path`, and what the store then
/// says about it, printed to `out`.
fn run(db_path: &Path, out: &mut dyn Write) -> Result<Report, Box<dyn Error>> {
    // The store: the database (created 0600, WAL, migrated) with the session and message
    // services over it. Every service announces a change after it commits.
    let store = Store::open(db_path)?;
    let session_events = store.sessions().subscribe();
    let part_events = store.messages().subscribe_parts();

    // The model this program calls, named as its provider adapter names it; the
    // catalog (built-in prices, or a user's file over them) prices its usage. There is
    // no default model: the charge must be the price of the model that was called.
    let catalog = Arc::new(ModelCatalog::builtin());
    let model = MODEL.to_owned();
    if !catalog.contains(&model) {
        return Err(format!("{model} is not in the model catalog").into());
    }
    // A title is unique: a second session on the same subject takes the lineage's next
    // one (`… #2`), which `scribe show "borrow, don't clone"` then names. The title is
    // picked and the session created in one transaction, so another process creating
    // in the lineage at the same time cannot take it in between.
    let session = store.sessions().create_in_lineage(NewSession {
        model: Some(model.clone()),
        ..NewSession::titled("borrow, don't clone")
    })?;

    // The user's prompt: complete when written (it gets its finish part then).
    let prompt = store.messages().create(NewMessage::new(
        &session.id,
        Role::User,
        vec![Part::text("parse() takes a String; make it borrow")],
    ))?;

    // The reply: an open assistant message that grows as the deltas arrive. A provider
    // adapter turns its wire format into `ProviderEvent`s; here they are spelled out. The
    // writer stores them and assembles the whole response the charge needs.
    let mut reply = ReplyWriter::start(
        store.messages(),
        NewMessage {
            model: Some(model.clone()),
            parent_id: Some(prompt.id.clone()),
            ..NewMessage::new(
                &session.id,
                Role::Assistant,
                vec![Part::StepStart(StepStartPart::default())],
            )
        },
    )?
    .with_flush_interval(Duration::ZERO);
    let usage = TokenUsage {
        input: 1_200,
        output: 40,
        ..TokenUsage::default()
    };
    for event in [
        ProviderEvent::TextDelta("Borrow it: ".into()),
        ProviderEvent::TextDelta("`fn parse(s: &str)`.".into()),
        ProviderEvent::Finish {
            reason: FinishReason::EndTurn,
            usage,
        },
    ] {
        reply.push(event);
    }
    // A stream that broke off before its finish event is abandoned instead.
    if !reply.is_finished() {
        reply.abandon();
        return Err("the stream ended without a finish".into());
    }
    // The end: what streamed squared with the assembled response, the step's usage and
    // cost charged to the message (and so to its session), and the step-finish part
    // that reports them, all in one transaction: a reply is never stored ended but
    // uncharged. Then the message is ended with the model's finish reason.
    let tracker = UsageTracker::new(store.clone(), Arc::clone(&catalog));
    let (
        StreamedReply {
            message_id: reply_id,
            response,
            tool_calls,
        },
        StepCharge { record: charge, .. },
    ) = reply.finish_streamed_charged(&tracker, &model)?;
    if !tool_calls.is_empty() {
        return Err("this reply calls no tools".into());
    }
    let reply = store
        .messages()
        .finish(&reply_id, response.finish_reason.clone())?;
    writeln!(
        out,
        "charged {} input + {} output tokens on {model}: ${:.6}",
        charge.usage.input, charge.usage.output, charge.cost_usd
    )?;

    // Any string is a safe query; hits are best first, each match in its snippet between
    // markers that `snippet_pieces` reads.
    let mut hits = Vec::new();
    for hit in store
        .messages()
        .search("borrow", &SearchOptions::default())?
    {
        let snippet: String = snippet_pieces(&hit.snippet)
            .into_iter()
            .map(|(text, matched)| {
                if matched {
                    format!("[{text}]")
                } else {
                    text.to_owned()
                }
            })
            .collect();
        let title = hit.title.as_deref().unwrap_or(&hit.session_id);
        writeln!(out, "hit in {title} ({}): {snippet}", hit.role)?;
        hits.push(snippet);
    }

    // The session's running totals (kept by the charge) and the store's totals by model.
    let session = store.sessions().get(&session.id)?;
    let title = session.title.clone().unwrap_or_default();
    writeln!(
        out,
        "{title}: {} messages, {} model call, {} tokens, ${:.6}",
        session.message_count,
        session.api_call_count,
        session.tokens.total(),
        session.estimated_cost_usd
    )?;
    for row in store.sessions().stats(StatsBy::Model, None)?.rows {
        writeln!(
            out,
            "all sessions on {}: {} tokens, ${:.6}",
            row.key,
            row.totals.tokens.total(),
            row.totals.cost_usd
        )?;
    }

    // What was announced, in commit order. A subscriber too slow for its buffer is told
    // how many events it missed (`Lagged`) and reloads what it shows rather than drift.
    let mut announced = Vec::new();
    for event in session_events.try_iter() {
        match event {
            Ok(event) => announced.push((event.kind, event.payload.id)),
            Err(Lagged(missed)) => writeln!(out, "{missed} session events missed: reload")?,
        }
    }
    for (kind, id) in &announced {
        writeln!(out, "session {}: {id}", kind.as_str())?;
    }
    let parts = part_events.try_iter().filter(Result::is_ok).count();
    writeln!(out, "{parts} part events")?;

    Ok(Report {
        session_id: session.id,
        title,
        reply: reply.text(),
        cost_usd: session.estimated_cost_usd,
        hits,
        session_events: announced,
        part_events: parts,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Two runs on one file: each stores its reply as streamed and charges its cost, the
    /// second takes the lineage's next title, the search finds both runs' prompts and
    /// replies with the match marked, and each run saw its session created then updated.
    #[test]
    fn two_runs_on_one_store() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("scribe.db");
        let first = run(&path, &mut Vec::new()).unwrap();
        let mut printed = Vec::new();
        let second = run(&path, &mut printed).unwrap();
        let printed = String::from_utf8(printed).unwrap();

        assert_eq!(first.title, "borrow, don't clone");
        assert_eq!(second.title, "borrow, don't clone #2");
        for report in [&first, &second] {
            assert_eq!(report.reply, "Borrow it: `fn parse(s: &str)`.");
            assert!(report.cost_usd > 0.0, "{report:?}");
            assert_eq!(
                report.session_events,
                [
                    (EventKind::Created, report.session_id.clone()),
                    (EventKind::Updated, report.session_id.clone()),
                ]
            );
            assert!(report.part_events >= 3, "{report:?}");
        }
        assert_eq!(second.hits.len(), 4, "{printed}");
        assert!(
            second
                .hits
                .iter()
                .any(|hit| hit == "[Borrow] it: `fn parse(s: &str)`."),
            "{printed}"
        );
        assert!(
            printed.contains("borrow, don't clone #2: 2 messages"),
            "{printed}"
        );
    }
}
