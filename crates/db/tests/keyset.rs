//! Keyset paging of session lists (`SessionFilter::after`): walking a list page by page,
//! each page starting after the last row of the one before, yields exactly the whole list
//! in order, for every sort order, with ties in the sort value and with other filters on.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use common::*;
use scribe_db::Database;
use scribe_db::filters::{self, SessionFilter, SessionKeyset, SessionOrder, SortValue};
use scribe_db::ids::{Prefix, new_id};
use scribe_db::queries as q;

const ORDERS: [SessionOrder; 5] = [
    SessionOrder::UpdatedDesc,
    SessionOrder::CreatedDesc,
    SessionOrder::CreatedAsc,
    SessionOrder::TokensDesc,
    SessionOrder::CostDesc,
];

/// 40 sessions whose times, token counts and costs repeat, so every order has ties.
fn fill(db: &Database) {
    let models = ["m-a", "m-b", "m-c"];
    for i in 0..40_i64 {
        let id = new_id(Prefix::Session);
        db.write(|tx| -> scribe_db::Result<()> {
            let mut params = new_session(&id, if i % 2 == 0 { "cli" } else { "tui" });
            params.now = 1_000 + i % 7;
            params.model = Some(models[(i % 3) as usize]);
            tx.q().create_session(&params)?;
            tx.q()
                .add_session_usage_delta(&q::AddSessionUsageDeltaParams {
                    input_tokens: (i % 5) * 10,
                    output_tokens: i % 2,
                    cache_read_tokens: 0,
                    cache_write_tokens: 0,
                    reasoning_tokens: 0,
                    api_call_count: 1,
                    tool_call_count: 0,
                    estimated_cost_usd: (i % 4) as f64 * 0.1,
                    now: 2_000 + i % 6,
                    id: &id,
                })?;
            Ok(())
        })
        .unwrap();
    }
}

fn key(order: SessionOrder, row: &q::SessionRow) -> SortValue {
    match order {
        SessionOrder::UpdatedDesc => SortValue::Int(row.updated_at),
        SessionOrder::CreatedDesc | SessionOrder::CreatedAsc => SortValue::Int(row.created_at),
        SessionOrder::TokensDesc => SortValue::Int(
            row.input_tokens
                + row.output_tokens
                + row.cache_read_tokens
                + row.cache_write_tokens
                + row.reasoning_tokens,
        ),
        SessionOrder::CostDesc => SortValue::Real(row.estimated_cost_usd),
    }
}

fn ids(db: &Database, filter: &SessionFilter) -> Vec<q::SessionRow> {
    db.read(|tx| -> scribe_db::Result<_> { filters::list_sessions(tx, filter) })
        .unwrap()
}

#[test]
fn pages_concatenate_to_the_whole_list_in_every_order() {
    let dir = tempfile::tempdir().unwrap();
    let db = Database::open(dir.path().join("k.db")).unwrap();
    fill(&db);
    for order in ORDERS {
        for models in [vec![], vec!["m-a".to_owned(), "m-c".to_owned()]] {
            let base = SessionFilter {
                order,
                models: models.clone(),
                sources: vec!["cli".into(), "tui".into()],
                ..SessionFilter::default()
            };
            let whole: Vec<String> = ids(&db, &base).into_iter().map(|r| r.id).collect();
            assert_eq!(whole.len(), if models.is_empty() { 40 } else { 27 });
            for size in [1_u64, 3, 7, 40] {
                let mut walked = Vec::new();
                let mut after: Option<SessionKeyset> = None;
                loop {
                    let page = ids(
                        &db,
                        &SessionFilter {
                            limit: Some(size),
                            after: after.clone(),
                            ..base.clone()
                        },
                    );
                    let Some(last) = page.last() else { break };
                    after = Some(SessionKeyset {
                        value: key(order, last),
                        id: last.id.clone(),
                    });
                    walked.extend(page.into_iter().map(|r| r.id));
                    assert!(walked.len() <= whole.len(), "{order:?} size {size} loops");
                }
                assert_eq!(
                    walked, whole,
                    "{order:?}, page size {size}, models {models:?}"
                );
            }
        }
    }
}

#[test]
fn the_model_filter_keeps_only_those_models() {
    let db = Database::open_in_memory().unwrap();
    fill(&db);
    let rows = ids(
        &db,
        &SessionFilter {
            models: vec!["m-b".into()],
            ..SessionFilter::default()
        },
    );
    assert_eq!(rows.len(), 13);
    assert!(rows.iter().all(|r| r.model.as_deref() == Some("m-b")));
    let n = db
        .read(|tx| -> scribe_db::Result<_> {
            filters::count_sessions(
                tx,
                &SessionFilter {
                    models: vec!["m-b".into(), "none".into()],
                    ..SessionFilter::default()
                },
            )
        })
        .unwrap();
    assert_eq!(n, 13);
}
