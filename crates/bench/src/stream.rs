//! A streamed reply against the same reply appended once. A 10 KB reply streams into its
//! message through `ReplyWriter` in 100 deltas with a zero flush interval (so each delta is
//! one write: 100 flushes of the growing text part), then the message is finished; the
//! other side appends the finished reply in one `create` and finishes the message. Both
//! end when the search indexes hold the reply.

use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use scribe_agent::ReplyWriter;
use scribe_agent::provider::{ProviderEvent, ProviderResponse};
use scribe_db::Database;
use scribe_message::{
    FinishReason, MessageService, NewMessage, Part, PartTime, Role, StepStartPart, TextPart,
    TokenUsage,
};
use serde::Serialize;

use crate::Result;
use crate::append::fresh_db;
use crate::data::Gen;
use crate::stats::{median, ms};

/// Flushes of the streamed reply.
pub const FLUSHES: usize = 100;
/// Bytes of the reply.
pub const REPLY_BYTES: usize = 10_000;

/// Medians of both ways, ms.
#[derive(Debug, Clone, Serialize)]
pub struct StreamResult {
    /// Replies written each way.
    pub rounds: usize,
    /// Flushes per streamed reply.
    pub flushes: usize,
    /// Bytes per reply.
    pub bytes: usize,
    /// Streamed, median.
    pub streamed_ms: f64,
    /// Appended once, median.
    pub once_ms: f64,
}

/// `text` cut into `n` pieces on character boundaries.
fn pieces(text: &str, n: usize) -> Vec<String> {
    let chars: Vec<char> = text.chars().collect();
    let size = chars.len().div_ceil(n.max(1)).max(1);
    chars.chunks(size).map(|c| c.iter().collect()).collect()
}

/// Writes `rounds` replies each way, alternating.
pub fn run(dir: &Path, seed: u64, rounds: usize) -> Result<StreamResult> {
    let path = dir.join("stream.db");
    let session = fresh_db(&path, "stream")?;
    let db = Arc::new(Database::open(&path)?);
    let svc = MessageService::new(Arc::clone(&db));
    let mut g = Gen::new(seed ^ 0x57);
    let (mut streamed, mut once) = (Vec::new(), Vec::new());
    for i in 0..rounds {
        let text = g.text(REPLY_BYTES, REPLY_BYTES);
        let deltas = pieces(&text, FLUSHES);
        let stream = || -> Result<Duration> {
            let t = Instant::now();
            let mut reply = ReplyWriter::start(
                &svc,
                NewMessage::new(
                    &session,
                    Role::Assistant,
                    vec![Part::StepStart(StepStartPart::default())],
                ),
            )?
            .with_flush_interval(Duration::ZERO);
            for delta in &deltas {
                reply.push(ProviderEvent::TextDelta(delta.clone()));
            }
            let id = reply.message_id().to_owned();
            let response = ProviderResponse {
                parts: vec![Part::text(text.clone())],
                finish_reason: FinishReason::EndTurn,
                usage: TokenUsage::default(),
            };
            reply.finish(&response)?;
            svc.finish(&id, FinishReason::EndTurn)?;
            db.index_pending()?;
            Ok(t.elapsed())
        };
        let append = || -> Result<Duration> {
            let t = Instant::now();
            let now = db.now();
            let msg = svc.create(NewMessage::new(
                &session,
                Role::Assistant,
                vec![
                    Part::StepStart(StepStartPart::default()),
                    Part::Text(TextPart {
                        text: text.clone(),
                        time: Some(PartTime {
                            start: now,
                            end: Some(now),
                        }),
                        ..TextPart::default()
                    }),
                ],
            ))?;
            svc.finish(&msg.id, FinishReason::EndTurn)?;
            db.index_pending()?;
            Ok(t.elapsed())
        };
        if i % 2 == 0 {
            streamed.push(stream()?);
            once.push(append()?);
        } else {
            once.push(append()?);
            streamed.push(stream()?);
        }
    }
    Ok(StreamResult {
        rounds,
        flushes: FLUSHES,
        bytes: REPLY_BYTES,
        streamed_ms: ms(median(&streamed)),
        once_ms: ms(median(&once)),
    })
}
