//! Usage and cost accounting: atomic increments ([`UsageDelta`]), rolling a child's totals
//! into its parent exactly once, and usage statistics.
//!
//! Every total is changed in SQL (`x = x + ?`), never read, added in Rust and written
//! back, so any number of threads and processes can add usage to one session at once and
//! all of it counts.

use scribe_db::Tx;
use scribe_db::queries as q;
use scribe_message::TokenUsage;
use scribe_pubsub::EventKind;
use serde::{Deserialize, Serialize};

use crate::error::{Result, SessionError};
use crate::service::{SessionService, load};
use crate::session::{Session, sessions};

/// What one model call (or step) adds to a session.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct UsageDelta {
    /// Tokens used.
    pub tokens: TokenUsage,
    /// Model calls made (usually 1).
    pub api_calls: i64,
    /// Tool calls made that are *not* stored as tool parts. Tool parts are counted by the
    /// database when they are inserted, so an agent that stores its tool calls passes 0.
    pub tool_calls: i64,
    /// Estimated cost in US dollars.
    pub cost_usd: f64,
    /// Cost billed by the provider, when it reported one.
    pub actual_cost_usd: Option<f64>,
}

impl UsageDelta {
    /// Refuses negative counts and negative or non-finite costs: totals only grow.
    pub fn validate(&self) -> Result<()> {
        let calls = [
            ("api calls", self.api_calls),
            ("tool calls", self.tool_calls),
        ];
        let negative = self
            .tokens
            .first_negative()
            .or_else(|| calls.into_iter().find(|(_, v)| *v < 0));
        if let Some((name, value)) = negative {
            return Err(SessionError::InvalidInput(format!(
                "{name} must not be negative (got {value})"
            )));
        }
        let costs = std::iter::once(self.cost_usd).chain(self.actual_cost_usd);
        for cost in costs {
            if !cost.is_finite() || cost < 0.0 {
                return Err(SessionError::InvalidInput(format!(
                    "cost must be a finite, non-negative amount (got {cost})"
                )));
            }
        }
        Ok(())
    }
}

/// The result of [`SessionService::roll_up_into_parent`].
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub enum RollUp {
    /// The child's totals were added to its parent, which now looks like this.
    RolledUp {
        /// The parent after the roll-up.
        parent: Box<Session>,
    },
    /// The child was rolled up before; nothing changed.
    AlreadyRolledUp {
        /// The parent it went to then.
        parent_id: String,
        /// When (ms since the epoch).
        rolled_up_at: i64,
    },
    /// The child has no parent; nothing changed.
    NoParent,
}

/// How [`SessionService::stats`] groups sessions.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum StatsBy {
    /// By model (`""` for sessions without one), most expensive first.
    Model,
    /// By source, most expensive first.
    Source,
    /// By UTC day of creation (`YYYY-MM-DD`), oldest first.
    Day,
}

/// Usage totals of a group of sessions.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct UsageTotals {
    /// Sessions counted.
    pub sessions: i64,
    /// Tokens, all sessions added up.
    pub tokens: TokenUsage,
    /// Model calls.
    pub api_calls: i64,
    /// Estimated cost in US dollars.
    pub cost_usd: f64,
    /// Sessions counted whose usage is partly or wholly of models without a price (their
    /// `cost_status` is `unknown` or `partial`): `cost_usd` leaves that usage out, so it
    /// is a lower bound, not what the group cost. 0 when every token had a price (and
    /// when absent from serialized totals written before it existed).
    #[serde(default)]
    pub unpriced_sessions: i64,
}

impl UsageTotals {
    /// Whether `cost_usd` leaves out usage of a model without a price.
    pub fn cost_is_partial(&self) -> bool {
        self.unpriced_sessions > 0
    }
}

/// One group of [`UsageStats`].
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct UsageStatsRow {
    /// The model, source or day.
    pub key: String,
    /// The group's totals.
    pub totals: UsageTotals,
}

/// Usage grouped one way, with the grand totals.
///
/// Every session counts with its **own** usage: what it used itself, without what its
/// rolled-up children added to its totals (each roll-up records the amount it added, and
/// the `session_own_usage` view subtracts it). So a task child on another model is counted
/// under its own model, source and day, never under its parent's, and summing any set of
/// sessions counts every token and cent once. (A session's totals, as [`Session::tokens`]
/// shows them, still include its rolled-up children: that is what the conversation cost.)
/// A parent imported without its rolled-up child has no mark to subtract, so there the
/// child's share counts under the parent.
///
/// Why not sum the per-message usage of `messages` by `messages.model`: a fork copies its
/// original's messages with their usage (counting them twice), `clear` deletes messages
/// but keeps the session's totals, usage can be added without a message, and api calls
/// are not recorded per message. The session totals are the ledger; the roll-up amounts
/// make them attributable.
///
/// Costs are sums and differences of floating-point amounts, exact to the usual rounding.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct UsageStats {
    /// How the rows are grouped.
    pub by: StatsBy,
    /// Only sessions created at or after this time (ms) were counted.
    pub since: Option<i64>,
    /// One row per group.
    pub rows: Vec<UsageStatsRow>,
    /// All groups together.
    pub totals: UsageTotals,
}

macro_rules! totals_of {
    ($row:expr) => {
        UsageTotals {
            sessions: $row.session_count,
            tokens: TokenUsage {
                input: $row.input_tokens,
                output: $row.output_tokens,
                cache_read: $row.cache_read_tokens,
                cache_write: $row.cache_write_tokens,
                reasoning: $row.reasoning_tokens,
            },
            api_calls: $row.api_call_count,
            cost_usd: $row.estimated_cost_usd,
            unpriced_sessions: $row.unpriced_session_count,
        }
    };
}

macro_rules! stats_rows {
    ($rows:expr) => {
        $rows
            .into_iter()
            .map(|row| UsageStatsRow {
                totals: totals_of!(row),
                key: row.key,
            })
            .collect::<Vec<_>>()
    };
}

impl SessionService {
    /// Adds `delta` to session `id` atomically and publishes `updated`.
    pub fn add_usage(&self, id: &str, delta: &UsageDelta) -> Result<Session> {
        delta.validate()?;
        self.db.write(|tx| self.add_usage_tx(tx, id, delta))
    }

    /// [`SessionService::add_usage`] inside the caller's transaction; queues `updated`.
    pub fn add_usage_tx(&self, tx: &mut Tx<'_>, id: &str, delta: &UsageDelta) -> Result<Session> {
        delta.validate()?;
        let now = tx.now();
        let params = q::AddSessionUsageDeltaParams {
            input_tokens: delta.tokens.input,
            output_tokens: delta.tokens.output,
            cache_read_tokens: delta.tokens.cache_read,
            cache_write_tokens: delta.tokens.cache_write,
            reasoning_tokens: delta.tokens.reasoning,
            api_call_count: delta.api_calls,
            tool_call_count: delta.tool_calls,
            estimated_cost_usd: delta.cost_usd,
            now,
            id,
        };
        let Some(row) = tx.q().add_session_usage_delta(&params)? else {
            return Err(SessionError::not_found("session", id));
        };
        let session = match delta.actual_cost_usd {
            None => Session::try_from(row)?,
            Some(actual) => {
                let params = q::AddSessionActualCostParams {
                    actual_cost_usd: actual,
                    now,
                    id,
                };
                tx.q().add_session_actual_cost(&params)?;
                load(tx, id)?
            }
        };
        self.announce(tx, EventKind::Updated, &session);
        Ok(session)
    }

    /// Adds the usage and cost totals of `child_id` (tokens, api calls, estimated and
    /// actual cost) to its parent, in one transaction, at most once per child: the child
    /// is marked in the same transaction, with the amounts added (so [`stats`](Self::stats)
    /// can keep counting them under the child), and a second call returns
    /// [`RollUp::AlreadyRolledUp`] without changing anything. Usage added to the child
    /// after its roll-up is not carried over, so roll a child up when it has ended.
    /// Publishes `updated` for the parent.
    pub fn roll_up_into_parent(&self, child_id: &str) -> Result<RollUp> {
        self.db
            .write(|tx| self.roll_up_into_parent_tx(tx, child_id))
    }

    /// [`SessionService::roll_up_into_parent`] inside the caller's transaction; queues
    /// the parent's `updated`.
    pub fn roll_up_into_parent_tx(&self, tx: &mut Tx<'_>, child_id: &str) -> Result<RollUp> {
        let child = load(tx, child_id)?;
        let Some(parent_id) = child.parent_session_id else {
            return Ok(RollUp::NoParent);
        };
        let now = tx.now();
        let params = q::MarkSessionRolledUpParams { now, child_id };
        if tx.q().mark_session_rolled_up(&params)? == 0 {
            let mark = tx
                .q()
                .get_session_roll_up(child_id)?
                .ok_or_else(|| SessionError::not_found("session", child_id))?;
            return Ok(RollUp::AlreadyRolledUp {
                parent_id: mark.parent_id,
                rolled_up_at: mark.rolled_up_at,
            });
        }
        tx.q()
            .roll_up_session_usage(&q::RollUpSessionUsageParams { now, child_id })?;
        let parent = load(tx, &parent_id)?;
        self.announce(tx, EventKind::Updated, &parent);
        Ok(RollUp::RolledUp {
            parent: Box::new(parent),
        })
    }

    /// When `child_id` was rolled into its parent, if it was.
    pub fn rolled_up_at(&self, child_id: &str) -> Result<Option<i64>> {
        self.db.read(|tx| {
            load(tx, child_id)?;
            Ok(tx
                .q()
                .get_session_roll_up(child_id)?
                .map(|mark| mark.rolled_up_at))
        })
    }

    /// Token and cost totals grouped `by` model, source or day, over sessions created at
    /// or after `since` (ms; `None`: all), with the grand totals. Each session counts its
    /// own usage under its own model, source and creation day (see [`UsageStats`]);
    /// `sessions` counts every session created in the range, children included.
    pub fn stats(&self, by: StatsBy, since: Option<i64>) -> Result<UsageStats> {
        let from = since.unwrap_or(i64::MIN);
        self.db.read(|tx| {
            let rows = match by {
                StatsBy::Model => stats_rows!(tx.q().usage_by_model_since(from)?),
                StatsBy::Source => stats_rows!(tx.q().usage_by_source_since(from)?),
                StatsBy::Day => stats_rows!(tx.q().usage_by_day_since(from)?),
            };
            let totals = tx.q().usage_totals_since(from)?;
            Ok(UsageStats {
                by,
                since,
                rows,
                totals: totals_of!(totals),
            })
        })
    }

    /// The `limit` sessions that used the most tokens (all kinds added up), most first.
    pub fn top_sessions_by_tokens(&self, limit: usize) -> Result<Vec<Session>> {
        let limit = i64::try_from(limit).unwrap_or(i64::MAX);
        self.db
            .read(|tx| sessions(tx.q().top_sessions_by_tokens(limit)?))
    }
}
