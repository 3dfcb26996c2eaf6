//! The bulk insert of many messages (`scribe_message::bulk::insert_messages`, the path of
//! `scribe import FILE` and of the history importers) stores exactly what storing them one
//! by one (`store::insert_message`) stores, on both backends: the same message and part
//! rows (values, NULLs, floats bit for bit, the parts' order of insertion), the same session
//! counters and times the triggers keep, text that search finds and a store `scribe db
//! check` finds clean. When a row is refused, its error is the one-by-one path's, naming
//! the same message or part. Runs on SQLite, and on PostgreSQL (where the rows go in as
//! one `CreateMessages` and one `CreateParts` statement per batch) under
//! `.ci/with-postgres … -- --ignored`.
#![allow(clippy::unwrap_used, clippy::expect_used)]

#[path = "message_common/mod.rs"]
mod common;

use common::{completed_tool, service_on};
use scribe_db::queries::{self, MessageRow, PartRow, SessionRow};
use scribe_message::{
    FinishReason, Message, MessageError, MessageService, Part, Role, SearchOptions, StoredPart,
    TokenUsage, bulk, store,
};
use scribe_tests::{Backend, TestDb, backends};
use serde_json::json;

/// More than one bulk call's worth (256 messages), so a batch spans two calls.
const MESSAGES: usize = 300;

/// A store on `backend` holding one empty session `ses_bulk`.
fn store_with_session(backend: Backend) -> (TestDb, MessageService) {
    let (t, svc) = service_on(backend);
    svc.database()
        .write(|tx| -> scribe_db::Result<_> {
            tx.q().create_session(&queries::CreateSessionParams {
                title: Some("bulk"),
                ..scribe_db::testing::bare_session("ses_bulk", "cli", 1_000)
            })
        })
        .unwrap();
    (t, svc)
}

/// A conversation of [`MESSAGES`] messages in `ses_bulk` with every kind of value a
/// column takes: NULLs and not, floats that need every digit, the largest counts, error
/// JSON, Unicode and a NUL in texts, tool parts (which the session counts), positions with
/// gaps, a message without parts and a reply to an earlier message of the same batch.
fn conversation() -> Vec<Message> {
    let roles = [Role::User, Role::Assistant, Role::System, Role::Tool];
    let reasons = [
        None,
        Some(FinishReason::EndTurn),
        Some(FinishReason::ToolUse),
    ];
    (0..MESSAGES)
        .map(|i| {
            let n = i64::try_from(i).unwrap();
            let at = 10_000 + n * 10;
            let mut parts = Vec::new();
            for (k, position) in [0_i64, 5, 7].into_iter().take(i % 4).enumerate() {
                let part = match (i + k) % 3 {
                    0 => Part::text(format!("bulk text {i}.{k}: ünïcödé 日本語 🦀 nul\u{0}here")),
                    1 => completed_tool(&format!("call_{i}_{k}"), "bash", json!({"n": i}), "ok"),
                    _ => Part::text(format!("second \"quoted\" \\ text {i}")),
                };
                parts.push(StoredPart {
                    id: format!("prt_bulk_{i:04}_{k}"),
                    position,
                    part,
                    created_at: at + 1,
                    updated_at: at + 2,
                });
            }
            Message {
                id: format!("msg_bulk_{i:04}"),
                session_id: "ses_bulk".into(),
                parent_id: (i % 5 == 4).then(|| format!("msg_bulk_{:04}", i - 1)),
                role: roles[i % roles.len()],
                agent: (i % 2 == 0).then(|| "build".into()),
                provider: (i % 3 == 0).then(|| "anthropic".into()),
                model: (i % 3 == 0).then(|| "claude-sonnet-4 «β»".into()),
                finish_reason: reasons[i % reasons.len()].clone(),
                is_summary: i == 17,
                usage: TokenUsage {
                    input: if i == 3 { i64::MAX } else { n * 1_000 },
                    output: n,
                    cache_read: n * 7,
                    cache_write: 0,
                    reasoning: n % 11,
                },
                cost_usd: match i % 4 {
                    0 => 0.0,
                    1 => 0.1 + n as f64 * 1e-7,
                    2 => 1.0 / 3.0,
                    _ => 5e-324,
                },
                error: (i % 7 == 6)
                    .then(|| json!({"kind": "rate_limit", "message": "slow \"down\" ü", "n": i})),
                created_at: at,
                updated_at: at + 3,
                finished_at: (i % 2 == 1).then_some(at + 4),
                parts,
            }
        })
        .collect()
}

/// Everything the store holds for `ses_bulk`: its row, its messages' and parts' rows.
fn stored(svc: &MessageService) -> (SessionRow, Vec<MessageRow>, Vec<PartRow>) {
    svc.database()
        .read(|tx| -> scribe_db::Result<_> {
            let session = tx.q().get_session("ses_bulk")?.unwrap();
            let messages = tx.q().list_messages("ses_bulk")?;
            let parts = tx.q().list_session_parts("ses_bulk")?;
            Ok((session, messages, parts))
        })
        .unwrap()
}

/// Float columns compared by their bits, so `0.1 + 1e-7` and the smallest subnormal must
/// come back exactly (a JSON round trip that lost a digit would show here).
fn cost_bits(messages: &[MessageRow]) -> Vec<u64> {
    messages.iter().map(|m| m.cost_usd.to_bits()).collect()
}

fn bulk_stores_what_one_by_one_stores(backend: Backend) {
    let messages = conversation();
    let (_a, one) = store_with_session(backend);
    one.database()
        .write(|tx| {
            messages
                .iter()
                .try_for_each(|m| store::insert_message(tx, m))
        })
        .unwrap();
    let (_b, many) = store_with_session(backend);
    many.database()
        .write(|tx| bulk::insert_messages(tx, &messages))
        .unwrap();

    let (session_one, messages_one, parts_one) = stored(&one);
    let (session_many, messages_many, parts_many) = stored(&many);
    assert_eq!(messages_many.len(), MESSAGES);
    assert_eq!(messages_many, messages_one);
    assert_eq!(cost_bits(&messages_many), cost_bits(&messages_one));
    assert_eq!(messages_many[3].input_tokens, i64::MAX);
    // Part rows in full, `seq` too: the parts went in in the same order.
    assert_eq!(parts_many, parts_one);
    assert_eq!(
        parts_many.len(),
        (0..MESSAGES).map(|i| i % 4).sum::<usize>()
    );
    // What the triggers keep: counts and the newest child's time.
    assert_eq!(session_many, session_one);
    assert_eq!(session_many.message_count, 300);
    assert!(session_many.tool_call_count > 0);
    // Read back as messages, the same as given.
    let read = many.list("ses_bulk").unwrap();
    assert_eq!(read, messages);

    // Search finds the bulk's text (on PostgreSQL its trigger-built documents), and the
    // store checks clean.
    many.database().index_pending().unwrap();
    let hits = many
        .search(
            "日本語",
            &SearchOptions {
                limit: 500,
                ..SearchOptions::default()
            },
        )
        .unwrap();
    let expected = messages
        .iter()
        .filter(|m| {
            m.parts
                .iter()
                .any(|p| p.part.searchable_text().contains("日本語"))
        })
        .count();
    assert_eq!(hits.len(), expected);
    assert!(expected > 50);
    assert_eq!(
        many.database().check().unwrap().problems(),
        Vec::<String>::new()
    );
}

/// Stores `messages` after `before` in a fresh store on `backend`, in one transaction:
/// with the bulk path when `in_bulk`, else one by one. The error with its sources, as a
/// report shows it.
fn refused(backend: Backend, before: &[Message], messages: &[Message], in_bulk: bool) -> String {
    let (_t, svc) = store_with_session(backend);
    svc.database()
        .write(|tx| bulk::insert_messages(tx, before))
        .unwrap();
    let result = svc.database().write(|tx| {
        if in_bulk {
            bulk::insert_messages(tx, messages)
        } else {
            messages
                .iter()
                .try_for_each(|m| store::insert_message(tx, m))
        }
    });
    let err: MessageError = result.expect_err("the batch is refused");
    // Nothing of the refused transaction is stored.
    assert_eq!(stored(&svc).1.len(), before.len());
    chain(&err)
}

/// `err` and its sources, as a report shows them.
fn chain(err: &dyn std::error::Error) -> String {
    let mut text = err.to_string();
    let mut source = err.source();
    while let Some(cause) = source {
        text.push_str(": ");
        text.push_str(&cause.to_string());
        source = cause.source();
    }
    text
}

fn a_refused_row_fails_as_it_does_one_by_one(backend: Backend) {
    let all = conversation();
    let (before, batch) = all.split_at(10);
    let same = |messages: &[Message], says: &str| {
        let bulk = refused(backend, before, messages, true);
        let one = refused(backend, before, messages, false);
        assert_eq!(bulk, one);
        assert!(bulk.contains(says), "{bulk:?} should say {says:?}");
    };

    // A message id already stored, deep in the second bulk call.
    let mut taken = batch.to_vec();
    taken[280].id = before[2].id.clone();
    same(&taken, "conflict");

    // A part id already stored.
    let mut taken_part = batch.to_vec();
    taken_part[40].parts[0].id = before[1].parts[0].id.clone();
    same(&taken_part, "conflict");

    // Two parts of one message at one position.
    let mut clash = batch.to_vec();
    let at = clash[32].parts[0].position;
    clash[32].parts[1].position = at;
    same(&clash, &format!("two parts at position {at}"));

    // A message of a session that does not exist.
    let mut stray = batch.to_vec();
    stray[100].session_id = "ses_nowhere".into();
    for part in &mut stray[100].parts {
        part.id.push_str("_stray");
    }
    same(&stray, "ses_nowhere");
}

/// A cost that is not a finite number has no JSON spelling: such a batch takes the
/// one-by-one path, with its outcome exactly.
fn a_cost_json_cannot_spell_goes_in_one_by_one(backend: Backend) {
    for cost in [f64::INFINITY, f64::NAN] {
        let mut messages = conversation();
        messages.truncate(20);
        messages[12].cost_usd = cost;
        let (_a, one) = store_with_session(backend);
        let one_result = one.database().write(|tx| {
            messages
                .iter()
                .try_for_each(|m| store::insert_message(tx, m))
        });
        let (_b, many) = store_with_session(backend);
        let many_result = many
            .database()
            .write(|tx| bulk::insert_messages(tx, &messages));
        assert_eq!(
            many_result.as_ref().map_err(|err| chain(err)),
            one_result.as_ref().map_err(|err| chain(err)),
            "{cost}"
        );
        let (_, rows_one, parts_one) = stored(&one);
        let (_, rows_many, parts_many) = stored(&many);
        assert_eq!(cost_bits(&rows_many), cost_bits(&rows_one), "{cost}");
        assert_eq!(parts_many, parts_one, "{cost}");
    }
}

/// The database-level bulk insert itself: it takes the rows (not its one-by-one fallback),
/// and when it refuses one, it undoes all of them and leaves the transaction usable, so the
/// caller's one-by-one path (or anything else) can go on in it.
fn the_bulk_statements_take_the_rows_or_leave_none(backend: Backend) {
    use scribe_db::bulk::{self as db_bulk, Bulk};
    use scribe_db::queries::{CreateMessageParams, CreatePartParams};
    let message = |id: &'static str| CreateMessageParams {
        id,
        session_id: "ses_bulk",
        parent_id: None,
        role: "user",
        agent: None,
        provider: None,
        model: None,
        finish_reason: None,
        is_summary: false,
        input_tokens: 1,
        output_tokens: 2,
        cache_read_tokens: 3,
        cache_write_tokens: 4,
        reasoning_tokens: 5,
        cost_usd: 0.25,
        error: None,
        created_at: 2_000,
        updated_at: 2_000,
        finished_at: None,
    };
    let part = |id: &'static str, message_id: &'static str| CreatePartParams {
        id,
        message_id,
        session_id: "ses_bulk",
        position: 0,
        r#type: "text",
        data: r#"{"type":"text","text":"taken or not"}"#,
        created_at: 2_000,
        updated_at: 2_000,
    };
    let (_t, svc) = store_with_session(backend);
    let first = svc
        .database()
        .write(|tx| db_bulk::insert_messages(tx, &[message("msg_a")], &[part("prt_a", "msg_a")]))
        .unwrap();
    assert_eq!(first, Bulk::Inserted);
    let (outcome, after) = svc
        .database()
        .write(|tx| -> scribe_db::Result<_> {
            let outcome = db_bulk::insert_messages(
                tx,
                &[message("msg_b"), message("msg_a")],
                &[part("prt_b", "msg_b")],
            )?;
            // The transaction goes on after the refusal.
            tx.q().create_message(&message("msg_c"))?;
            Ok((outcome, tx.q().list_messages("ses_bulk")?))
        })
        .unwrap();
    assert_eq!(outcome, Bulk::NotInserted);
    let ids: Vec<&str> = after.iter().map(|m| m.id.as_str()).collect();
    assert_eq!(ids, ["msg_a", "msg_c"]);
    let (session, _, parts) = stored(&svc);
    assert_eq!(parts.len(), 1);
    // The message stored after the refusal is counted: on PostgreSQL the counter
    // triggers stand aside only inside a bulk insert that took its rows (V30).
    assert_eq!(session.message_count, 2);
}

/// A batch holding several sessions' messages, and a transaction that goes on after it,
/// leave every session's counters and time as one-by-one inserts leave them: on
/// PostgreSQL the bulk path counts its rows itself, per session, while the row triggers
/// stand aside (V30), and they count again for what comes after it.
fn several_sessions_in_one_batch_are_counted_as_one_by_one(backend: Backend) {
    let mut messages = conversation();
    for (i, m) in messages.iter_mut().enumerate() {
        if i % 3 == 1 {
            m.session_id = "ses_other".into();
            m.parent_id = None;
            for p in &mut m.parts {
                p.updated_at += 1_000_000;
            }
        }
    }
    let (last, batch) = messages.split_last().unwrap();
    let write = |svc: &MessageService, in_bulk: bool| {
        svc.database()
            .write(|tx| -> Result<(), MessageError> {
                tx.q().create_session(&queries::CreateSessionParams {
                    title: Some("other"),
                    ..scribe_db::testing::bare_session("ses_other", "cli", 1_000)
                })?;
                if in_bulk {
                    bulk::insert_messages(tx, batch)?;
                } else {
                    batch
                        .iter()
                        .try_for_each(|m| store::insert_message(tx, m))?;
                }
                store::insert_message(tx, last)
            })
            .unwrap();
        svc.database()
            .read(|tx| -> scribe_db::Result<_> {
                Ok((
                    tx.q().get_session("ses_bulk")?.unwrap(),
                    tx.q().get_session("ses_other")?.unwrap(),
                ))
            })
            .unwrap()
    };
    let (_a, one) = store_with_session(backend);
    let (_b, many) = store_with_session(backend);
    let by_one = write(&one, false);
    let by_many = write(&many, true);
    assert_eq!(by_many, by_one);
    let (ses_bulk, ses_other) = by_many;
    assert_eq!(ses_bulk.message_count + ses_other.message_count, 300);
    assert_eq!(ses_other.message_count, 100);
    assert!(ses_bulk.tool_call_count > 0 && ses_other.tool_call_count > 0);
    // A tool part's later time moved the other session's: the newest of both kinds.
    assert!(ses_other.updated_at > 1_000_000, "{}", ses_other.updated_at);
    // The check recounts each session's messages: the batch's counts agree with it.
    let report = many.database().check().unwrap();
    let counts = report.checks.iter().find(|c| c.name == "message_counts");
    assert_eq!(
        counts.map(|c| c.problem.as_deref()),
        Some(None),
        "{report:?}"
    );
}

backends!(
    the_bulk_statements_take_the_rows_or_leave_none,
    bulk_stores_what_one_by_one_stores,
    several_sessions_in_one_batch_are_counted_as_one_by_one,
    a_refused_row_fails_as_it_does_one_by_one,
    a_cost_json_cannot_spell_goes_in_one_by_one,
);
