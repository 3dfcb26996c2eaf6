//! Usage and cost accounting: atomic increments ([`UsageDelta`]), rolling a child's totals
//! into its parent exactly once, and usage statistics.
//!
//! Every total is changed in SQL (`x = x + ?`), never read, added in Rust and written
//! back, so any number of threads and processes can add usage to one session at once and
//! all of it counts.

use std::borrow::Cow;
use std::collections::{BTreeMap, HashMap, HashSet};

use scribe_db::queries as q;
use scribe_db::{Reads, Tx};
use scribe_message::TokenUsage;
use scribe_pubsub::EventKind;
use serde::{Deserialize, Serialize};

use crate::error::{Result, SessionError};
use crate::service::{SessionService, load};
use crate::session::{Session, sessions};

/// The five token counts of a query row with the usual column names.
macro_rules! tokens_of {
    ($row:expr) => {
        TokenUsage {
            input: $row.input_tokens,
            output: $row.output_tokens,
            cache_read: $row.cache_read_tokens,
            cache_write: $row.cache_write_tokens,
            reasoning: $row.reasoning_tokens,
        }
    };
}

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

/// A session's own usage ([`SessionService::own_usage_tx`]).
#[derive(Debug, Clone, PartialEq)]
pub struct OwnUsage {
    /// Its model.
    pub model: Option<String>,
    /// Its model calls.
    pub api_calls: i64,
    /// What it used itself, without what rolled-up children added to its totals.
    pub tokens: TokenUsage,
    /// Whether any of its messages carries usage (false: its usage is the session's
    /// alone, as Hermes reports it).
    pub carried_by_messages: bool,
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
    /// By the UTC day it was used on (`YYYY-MM-DD`), oldest first.
    Day,
    /// By UTC week, Monday to Sunday (ISO 8601), keyed by its Monday (`YYYY-MM-DD`),
    /// oldest first.
    Week,
    /// By UTC month (`YYYY-MM`), oldest first.
    Month,
    /// By the directory the session's agent worked in (its project; `""` for sessions
    /// without one), most expensive first.
    Directory,
    /// By usage block, oldest first: [`BLOCK_HOURS`] from the UTC hour of the first usage
    /// after the last block ended, keyed by its start (`YYYY-MM-DDTHH:00Z`). The window
    /// Claude's and Codex's subscription limits count usage in; of the usage grouped, so a
    /// block starts within the period, and counts only the sources, models or directories
    /// kept ([`UsageSlices::retain`]).
    Block,
}

/// Hours a usage block lasts ([`StatsBy::Block`]).
pub const BLOCK_HOURS: i64 = 5;

/// How far back slices are read to find the block open now ([`UsageSlices::open_block`]):
/// a block lasts [`BLOCK_HOURS`], and blocks chain from the first use after the last one
/// ended, so a day back finds where the open one began.
pub const BLOCK_LOOKBACK_HOURS: i64 = 24;

/// Where the slices [`UsageSlices::open_block`] reads at `now` begin: the start of the hour
/// [`BLOCK_LOOKBACK_HOURS`] before `now`'s (blocks begin on the hour).
pub fn block_lookback(now: i64) -> i64 {
    now - now.rem_euclid(HOUR) - BLOCK_LOOKBACK_HOURS * HOUR
}

/// When the block keyed `key` ([`StatsBy::Block`], `YYYY-MM-DDTHH:00Z`) starts and ends
/// (ms); `None` for a key that is no block's start.
pub fn block_span(key: &str) -> Option<(i64, i64)> {
    let start = scribe_db::calendar::hour_start(key.strip_suffix(":00Z")?)?;
    Some((start, start.saturating_add(BLOCK_HOURS * HOUR)))
}

/// The usage block open at a time ([`UsageSlices::open_block`]).
#[derive(Debug, Clone, PartialEq)]
pub struct OpenBlock {
    /// When it began (ms): the UTC hour of its first use.
    pub start: i64,
    /// When it ends (ms), [`BLOCK_HOURS`] after `start`.
    pub end: i64,
    /// Its usage so far.
    pub totals: UsageTotals,
}

impl StatsBy {
    /// Every grouping, in the order the command line and the API list them.
    pub const ALL: [StatsBy; 7] = [
        StatsBy::Model,
        StatsBy::Source,
        StatsBy::Day,
        StatsBy::Week,
        StatsBy::Month,
        StatsBy::Directory,
        StatsBy::Block,
    ];

    /// Its name: `model`, `source`, `day`, `week`, `month`, `directory` or `block` (as
    /// serialized).
    pub fn name(self) -> &'static str {
        match self {
            StatsBy::Model => "model",
            StatsBy::Source => "source",
            StatsBy::Day => "day",
            StatsBy::Week => "week",
            StatsBy::Month => "month",
            StatsBy::Directory => "directory",
            StatsBy::Block => "block",
        }
    }

    /// Whether its rows go oldest first (a period) rather than most expensive first.
    pub fn is_period(self) -> bool {
        matches!(
            self,
            StatsBy::Day | StatsBy::Week | StatsBy::Month | StatsBy::Block
        )
    }

    /// The key of `slice` in this grouping: its model, source, day, week (its Monday),
    /// month (`YYYY-MM`), directory, or the start of its block among the hours of
    /// `blocks`.
    fn key<'a>(self, slice: &'a UsageSlice, blocks: &'a Blocks<'_>) -> Cow<'a, str> {
        let day = slice.day();
        match self {
            StatsBy::Model => Cow::Borrowed(&slice.model),
            StatsBy::Source => Cow::Borrowed(&slice.source),
            StatsBy::Day => Cow::Borrowed(day),
            // A day the reader does not know as a date (none is written so) stays whole.
            StatsBy::Week => {
                scribe_db::calendar::week_start(day).map_or(Cow::Borrowed(day), Cow::Owned)
            }
            StatsBy::Month => Cow::Borrowed(day.get(..7).unwrap_or(day)),
            StatsBy::Directory => Cow::Borrowed(&slice.directory),
            StatsBy::Block => blocks
                .0
                .get(slice.hour.as_str())
                .map_or(Cow::Borrowed(slice.hour.as_str()), |start| {
                    Cow::Borrowed(start.as_str())
                }),
        }
    }
}

/// The start of the usage block (`YYYY-MM-DDTHH:00Z`) of each hour slices were used in
/// ([`StatsBy::Block`]); empty unless a grouping is by block.
struct Blocks<'a>(HashMap<&'a str, String>);

impl<'a> Blocks<'a> {
    /// The blocks of `slices` when `by` (either of them) groups by block.
    fn of(slices: &'a [UsageSlice], by: [StatsBy; 2]) -> Self {
        let mut starts = HashMap::new();
        if !by.contains(&StatsBy::Block) {
            return Blocks(starts);
        }
        let hours: std::collections::BTreeSet<&str> =
            slices.iter().map(|s| s.hour.as_str()).collect();
        let mut open: Option<(i64, String)> = None;
        for hour in hours {
            // An hour the reader does not know (none is written so) is a block of its own.
            let Some(at) = scribe_db::calendar::hour_start(hour) else {
                continue;
            };
            let block = match open.take() {
                Some((start, key)) if at < start.saturating_add(BLOCK_HOURS * HOUR) => (start, key),
                _ => (at, block_key(at)),
            };
            starts.insert(hour, block.1.clone());
            open = Some(block);
        }
        Blocks(starts)
    }
}

/// A block starting at `ms` as its key: `YYYY-MM-DDTHH:00Z`.
fn block_key(ms: i64) -> String {
    format!(
        "{}T{:02}:00Z",
        scribe_db::calendar::date(ms),
        ms.rem_euclid(scribe_db::calendar::DAY) / HOUR
    )
}

const HOUR: i64 = scribe_db::calendar::HOUR;

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

    /// Whether any usage was recorded in the group: a model call, tokens or a cost, the
    /// rule of [`Session::usage_recorded`](crate::Session::usage_recorded). A group of
    /// sessions whose agent keeps no usage has none: not known, rather than zero.
    pub fn usage_recorded(&self) -> bool {
        self.api_calls > 0 || !self.tokens.is_zero() || self.cost_usd != 0.0
    }

    /// Whether the group's tokens are known ([`Session::tokens_recorded`]'s rule): some
    /// counted.
    pub fn tokens_recorded(&self) -> bool {
        !self.tokens.is_zero()
    }
}

/// One group of [`UsageStats`].
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct UsageStatsRow {
    /// The model, source, day (`YYYY-MM-DD`), week (its Monday), month (`YYYY-MM`),
    /// directory, or block (its start, `YYYY-MM-DDTHH:00Z`).
    pub key: String,
    /// The group's totals.
    pub totals: UsageTotals,
    /// The group split another way ([`UsageSlices::stats_broken_down`]), in that
    /// grouping's order; empty otherwise.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub breakdown: Vec<UsageStatsRow>,
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
/// Within a session, usage counts under the model and UTC hour of the message that carries
/// it ([`UsageSlice`]): a conversation that switched from one model to another, or went on
/// past midnight, is split as it happened. The session totals stay the ledger: what they
/// hold beyond their messages' usage (usage reported for the session as a whole, usage of
/// messages since cleared) counts under the session's model and creation hour. Calls are
/// counted per session only: they are shared among its messages' hours and models in
/// proportion to the messages that carry usage. A session whose messages carry more than it counts
/// itself (a fork: its copied messages keep their usage, its totals start at zero) counts
/// wholly under its own model and creation hour, so no token is counted twice.
///
/// Usage `since` a time is the usage of the messages from then on, and of the sessions
/// started from then on, what they count beyond their messages.
///
/// Costs are sums and differences of floating-point amounts, exact to the usual rounding.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct UsageStats {
    /// How the rows are grouped.
    pub by: StatsBy,
    /// Only usage from this time (ms) on was counted.
    pub since: Option<i64>,
    /// One row per group.
    pub rows: Vec<UsageStatsRow>,
    /// All groups together.
    pub totals: UsageTotals,
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

    /// Session `id`'s own usage (without what rolled-up children added), its model and
    /// calls, and whether its messages carry usage, inside `tx`; `None` for no such
    /// session.
    pub fn own_usage_tx(tx: &mut dyn Reads, id: &str) -> Result<Option<OwnUsage>> {
        Ok(tx.reads().get_session_own_usage(id)?.map(|row| OwnUsage {
            tokens: tokens_of!(row),
            model: row.model,
            api_calls: row.api_call_count,
            carried_by_messages: row.carrying != 0,
        }))
    }

    /// Token and cost totals grouped `by` model, source, day, week, month, directory or
    /// block, of the usage from `since` on (ms; `None`: all), with the grand totals. Each
    /// session counts its own usage, split by the model and hour of the messages that
    /// carry it (see
    /// [`UsageStats`]); a row's `sessions` counts the sessions with usage in it, the
    /// totals' each of them once, and every session started in the range (children
    /// included) with or without.
    pub fn stats(&self, by: StatsBy, since: Option<i64>) -> Result<UsageStats> {
        Ok(self.usage_slices(since)?.stats(by))
    }

    /// The usage from `since` on (ms; `None`: all), each session's own split by the model
    /// and UTC hour it was used in (see [`UsageStats`]), and its totals, read in one
    /// transaction: what [`stats`](Self::stats) groups, for grouping other ways.
    pub fn usage_slices(&self, since: Option<i64>) -> Result<UsageSlices> {
        let from = since.unwrap_or(i64::MIN);
        self.db.read(|tx| {
            let mut carried: HashMap<String, Vec<q::MessageUsageSinceRow>> = HashMap::new();
            for row in tx.q().message_usage_since(from)? {
                carried.entry(row.session_id.clone()).or_default().push(row);
            }
            let mut slices = Vec::new();
            for own in tx.q().own_usage_since(from)? {
                let messages = carried.remove(&own.id).unwrap_or_default();
                slices.extend(split_session(own, messages));
            }
            let totals = group_usage(&slices, |_| ()).remove(&()).unwrap_or_default();
            Ok(UsageSlices {
                since,
                slices,
                totals,
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

/// One session's own usage of one model in one UTC hour: what [`SessionService::stats`]
/// and the web page's usage chart add up (see [`UsageStats`] for how a session's usage is
/// split).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct UsageSlice {
    /// The session that used it.
    pub session_id: String,
    /// The model of the messages that carried it (the session's model for usage no
    /// message carries, or whose message names none); `""` when neither names one.
    pub model: String,
    /// The session's source.
    pub source: String,
    /// The directory the session's agent worked in; `""` when it names none.
    #[serde(default)]
    pub directory: String,
    /// The UTC hour (`YYYY-MM-DDTHH`) of the messages that carried it (the session's
    /// creation hour for usage no message carries).
    pub hour: String,
    /// The usage; `sessions` is 1, and `unpriced_sessions` 1 when this share of the
    /// session's cost leaves out usage of a model without a price: when the session's
    /// does, the shares with tokens and no cost (every share of the session, when none
    /// looks so).
    pub totals: UsageTotals,
}

impl UsageSlice {
    /// The UTC day (`YYYY-MM-DD`) of its [`hour`](Self::hour).
    pub fn day(&self) -> &str {
        self.hour.get(..10).unwrap_or(&self.hour)
    }
}

/// The usage of a period, sliced ([`SessionService::usage_slices`]).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct UsageSlices {
    /// Only usage from this time (ms) on was counted (see [`UsageStats`]).
    pub since: Option<i64>,
    /// Each session's usage per hour and model, ordered by session, hour and model.
    pub slices: Vec<UsageSlice>,
    /// All of it; `sessions` counts the sessions with a slice (every session started in
    /// the period has one, with or without usage).
    pub totals: UsageTotals,
}

impl UsageSlices {
    /// Keeps only the slices `keep` accepts (a source's, a directory's, a model's), and
    /// their totals: `sessions` then counts the sessions with a slice kept.
    pub fn retain(&mut self, keep: impl Fn(&UsageSlice) -> bool) {
        self.slices.retain(|slice| keep(slice));
        self.totals = group_usage(&self.slices, |_| ())
            .remove(&())
            .unwrap_or_default();
    }

    /// The block open at `now`: the last of the slices' [`StatsBy::Block`] rows, when
    /// `now` is before its end; `None` when no block is open. Slices from
    /// [`block_lookback`]`(now)` on find where it began.
    pub fn open_block(&self, now: i64) -> Option<OpenBlock> {
        let stats = self.stats(StatsBy::Block);
        let last = stats.rows.last()?;
        let (start, end) = block_span(&last.key)?;
        (start..end).contains(&now).then(|| OpenBlock {
            start,
            end,
            totals: last.totals.clone(),
        })
    }

    /// The slices added up `by` model, source or directory (most expensive first) or day,
    /// week, month or block (oldest first), with the totals.
    pub fn stats(&self, by: StatsBy) -> UsageStats {
        self.stats_in(by, &Blocks::of(&self.slices, [by, by]))
    }

    /// [`stats`](Self::stats) with the slices' `blocks` known.
    fn stats_in(&self, by: StatsBy, blocks: &Blocks<'_>) -> UsageStats {
        let grouped = group_usage(&self.slices, |slice| by.key(slice, blocks));
        UsageStats {
            by,
            since: self.since,
            rows: ordered_rows(by, grouped),
            totals: self.totals.clone(),
        }
    }

    /// [`stats`](Self::stats) `by` one grouping with each row split `then` another (a day
    /// by model, as `scribe stats --by day --breakdown` shows it): a row's `breakdown`
    /// adds up to the row.
    pub fn stats_broken_down(&self, by: StatsBy, then: StatsBy) -> UsageStats {
        let blocks = Blocks::of(&self.slices, [by, then]);
        let mut stats = self.stats_in(by, &blocks);
        let mut split: BTreeMap<Cow<'_, str>, BTreeMap<Cow<'_, str>, UsageTotals>> =
            BTreeMap::new();
        let keys = |s| (by.key(s, &blocks), then.key(s, &blocks));
        for ((key, sub), totals) in group_usage(&self.slices, keys) {
            split.entry(key).or_default().insert(sub, totals);
        }
        for row in &mut stats.rows {
            if let Some(groups) = split.remove(row.key.as_str()) {
                row.breakdown = ordered_rows(then, groups);
            }
        }
        stats
    }
}

/// `groups` as rows: by key for a period (oldest first), else most expensive first.
fn ordered_rows<'a>(
    by: StatsBy,
    groups: BTreeMap<Cow<'a, str>, UsageTotals>,
) -> Vec<UsageStatsRow> {
    let mut rows: Vec<UsageStatsRow> = groups
        .into_iter()
        .map(|(key, totals)| UsageStatsRow {
            key: key.into_owned(),
            totals,
            breakdown: Vec::new(),
        })
        .collect();
    if !by.is_period() {
        rows.sort_by(|a, b| {
            b.totals
                .cost_usd
                .total_cmp(&a.totals.cost_usd)
                .then_with(|| a.key.cmp(&b.key))
        });
    }
    rows
}

/// Adds `slices` up by `key`, in key order. A group's `sessions` and `unpriced_sessions`
/// count each session once, however many of its slices the group holds; counts saturate
/// and costs stop at the largest finite amount, as every stored sum does.
pub fn group_usage<'a, K: Ord>(
    slices: &'a [UsageSlice],
    key: impl Fn(&'a UsageSlice) -> K,
) -> BTreeMap<K, UsageTotals> {
    let mut groups: BTreeMap<K, (UsageTotals, HashSet<&str>, HashSet<&str>)> = BTreeMap::new();
    for slice in slices {
        let (totals, sessions, unpriced) = groups.entry(key(slice)).or_default();
        add_totals(totals, &slice.totals);
        sessions.insert(&slice.session_id);
        if slice.totals.unpriced_sessions > 0 {
            unpriced.insert(&slice.session_id);
        }
    }
    groups
        .into_iter()
        .map(|(key, (mut totals, sessions, unpriced))| {
            totals.sessions = count(sessions.len());
            totals.unpriced_sessions = count(unpriced.len());
            (key, totals)
        })
        .collect()
}

fn count(n: usize) -> i64 {
    i64::try_from(n).unwrap_or(i64::MAX)
}

/// `into += add`, tokens and calls saturating, the cost clamped (ARCHITECTURE.md,
/// "Clamped cost sums"); `sessions` and `unpriced_sessions` are left to the caller.
fn add_totals(into: &mut UsageTotals, add: &UsageTotals) {
    into.tokens += add.tokens;
    into.api_calls = into.api_calls.saturating_add(add.api_calls);
    into.cost_usd = (into.cost_usd + add.cost_usd).min(f64::MAX);
}

/// How far, relative to their size, a session's message costs and its own may differ in
/// their sums' rounding (the two add the same amounts in different orders, and a sum of n
/// amounts may be off by n × 2^-53 of it) and still count as the same amount.
const COST_ROUNDING: f64 = 1e-9;

/// One session's own usage split by the model and hour of the messages that carry it
/// (see [`UsageStats`]), each (hour, model) once, in that order, keeping what is from the
/// period on: the messages' shares from then on, and what the session counts beyond its
/// messages when it started in the period.
fn split_session(
    own: q::OwnUsageSinceRow,
    messages: Vec<q::MessageUsageSinceRow>,
) -> Vec<UsageSlice> {
    let session_model = own.model.unwrap_or_default();
    let whole = UsageTotals {
        sessions: 1,
        tokens: tokens_of!(own),
        api_calls: own.api_call_count,
        cost_usd: own.estimated_cost_usd,
        unpriced_sessions: 0,
    };
    let carried: Vec<(bool, String, String, UsageTotals)> = messages
        .into_iter()
        .map(|row| {
            let totals = UsageTotals {
                sessions: 1,
                tokens: tokens_of!(row),
                api_calls: row.message_count,
                cost_usd: row.cost_usd,
                unpriced_sessions: 0,
            };
            let model = row.model.unwrap_or_else(|| session_model.clone());
            (row.since != 0, row.hour, model, totals)
        })
        .collect();
    let mut in_messages = UsageTotals::default();
    for (_, _, _, totals) in &carried {
        add_totals(&mut in_messages, totals);
    }
    // Every share of the session by (hour, model, whether it is from the period on).
    let mut shares: BTreeMap<(String, String, bool), UsageTotals> = BTreeMap::new();
    let mut rest = whole.clone();
    if fits_within(&in_messages, &whole) {
        for (since, hour, model, totals) in carried {
            add_totals(shares.entry((hour, model, since)).or_default(), &totals);
        }
        // Calls are counted per session only: shared among the messages' shares.
        share_calls(&mut shares, whole.api_calls);
        // What the messages' costs leave, less the rounding of their sum: nothing at all
        // when they carry the whole cost (else a session would count, with $0.00, on its
        // creation hour and model too).
        let cost_left = whole.cost_usd - in_messages.cost_usd;
        rest = UsageTotals {
            sessions: 1,
            tokens: minus(whole.tokens, in_messages.tokens),
            api_calls: if shares.is_empty() {
                whole.api_calls
            } else {
                0
            },
            cost_usd: if cost_left > rounding(whole.cost_usd, in_messages.cost_usd) {
                cost_left
            } else {
                0.0
            },
            unpriced_sessions: 0,
        };
    }
    // What the session counts beyond its messages is from when it started; a session
    // started in the period counts in it, with usage or without.
    let started_since = own.started_since != 0;
    let rest_counts = !rest.tokens.is_zero() || rest.api_calls != 0 || rest.cost_usd != 0.0;
    if rest_counts || shares.is_empty() {
        add_totals(
            shares
                .entry((own.hour, session_model, started_since))
                .or_default(),
            &rest,
        );
    }
    // Of a session whose cost leaves usage out, the shares with tokens and no cost are
    // that usage; when none looks so (before the period too), every share may hold it.
    let unpriced = own.unpriced != 0;
    let lacks_price = |t: &UsageTotals| !t.tokens.is_zero() && t.cost_usd == 0.0;
    let mark_all = unpriced && !shares.values().any(lacks_price);
    shares
        .into_iter()
        .filter(|((_, _, since), _)| *since)
        .map(|((hour, model, _), mut totals)| {
            totals.sessions = 1;
            totals.unpriced_sessions = i64::from(unpriced && (mark_all || lacks_price(&totals)));
            UsageSlice {
                session_id: own.id.clone(),
                model,
                source: own.source.clone(),
                directory: own.directory.clone().unwrap_or_default(),
                hour,
                totals,
            }
        })
        .collect()
}

/// Shares a session's `calls` among its messages' `shares` (each holding, on entry, how
/// many messages carry it as its `api_calls`) in proportion to those messages, by largest
/// remainder: each gets `calls × m / M` rounded down, and what that leaves goes one call
/// each to the shares with the largest fractions (the first in order on a tie), so the
/// shares add up to `calls` exactly. A session's calls are not stored per message (an
/// agent's message may hold several steps, an importer's several lines one call).
fn share_calls<K>(shares: &mut BTreeMap<K, UsageTotals>, calls: i64) {
    let messages: i128 = shares.values().map(|t| i128::from(t.api_calls)).sum();
    if messages <= 0 {
        return;
    }
    let calls = i128::from(calls.max(0));
    let mut shares: Vec<&mut UsageTotals> = shares.values_mut().collect();
    let mut fractions = Vec::with_capacity(shares.len());
    let mut given = 0;
    for (i, share) in shares.iter_mut().enumerate() {
        let exact = calls * i128::from(share.api_calls);
        let whole = exact / messages;
        fractions.push((exact % messages, i));
        share.api_calls = i64::try_from(whole).unwrap_or(i64::MAX);
        given += whole;
    }
    fractions.sort_by(|a, b| b.0.cmp(&a.0).then(a.1.cmp(&b.1)));
    let left = usize::try_from(calls - given).unwrap_or(0);
    for &(_, i) in fractions.iter().take(left) {
        shares[i].api_calls = shares[i].api_calls.saturating_add(1);
    }
}

/// Whether usage `part` (what a session's messages carry) is within `whole` (what the
/// session counts as its own): no count negative and none over the whole's, the cost
/// within its rounding, and the session's calls not negative (`part`'s calls, how many
/// messages carry usage, are shared out by [`share_calls`]).
fn fits_within(part: &UsageTotals, whole: &UsageTotals) -> bool {
    let within = |p: i64, w: i64| (0..=w).contains(&p);
    let (p, w) = (part.tokens, whole.tokens);
    whole.api_calls >= 0
        && within(p.input, w.input)
        && within(p.output, w.output)
        && within(p.cache_read, w.cache_read)
        && within(p.cache_write, w.cache_write)
        && within(p.reasoning, w.reasoning)
        && part.cost_usd >= 0.0
        && part.cost_usd <= whole.cost_usd + rounding(whole.cost_usd, part.cost_usd)
}

/// How far sums `a` and `b` of the same costs (in different orders) may differ:
/// [`COST_ROUNDING`] of their size.
fn rounding(a: f64, b: f64) -> f64 {
    (a.abs() + b.abs()) * COST_ROUNDING
}

/// `a - b` counter by counter, for `b` within `a` ([`fits_within`]).
fn minus(a: TokenUsage, b: TokenUsage) -> TokenUsage {
    TokenUsage {
        input: a.input.saturating_sub(b.input),
        output: a.output.saturating_sub(b.output),
        cache_read: a.cache_read.saturating_sub(b.cache_read),
        cache_write: a.cache_write.saturating_sub(b.cache_write),
        reasoning: a.reasoning.saturating_sub(b.reasoning),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn own(input: i64, calls: i64, cost: f64) -> q::OwnUsageSinceRow {
        q::OwnUsageSinceRow {
            id: "ses_1".into(),
            model: Some("m-session".into()),
            source: "cli".into(),
            directory: Some("/w".into()),
            hour: "2026-03-01T09".into(),
            input_tokens: input,
            output_tokens: 0,
            cache_read_tokens: 0,
            cache_write_tokens: 0,
            reasoning_tokens: 0,
            api_call_count: calls,
            estimated_cost_usd: cost,
            unpriced: 0,
            started_since: 1,
        }
    }

    /// Usage messages of `model` carried at 10:00 UTC on `day`.
    fn carried(day: &str, model: &str, input: i64, cost: f64) -> q::MessageUsageSinceRow {
        q::MessageUsageSinceRow {
            session_id: "ses_1".into(),
            hour: format!("{day}T10"),
            model: Some(model.into()),
            since: 1,
            message_count: 1,
            input_tokens: input,
            output_tokens: 0,
            cache_read_tokens: 0,
            cache_write_tokens: 0,
            reasoning_tokens: 0,
            cost_usd: cost,
        }
    }

    fn keys(slices: &[UsageSlice]) -> Vec<(&str, &str, i64, i64)> {
        slices
            .iter()
            .map(|s| {
                let t = &s.totals;
                (s.day(), s.model.as_str(), t.tokens.input, t.api_calls)
            })
            .collect()
    }

    #[test]
    fn messages_that_carry_the_whole_cost_leave_no_share_to_the_session() {
        // The session added 0.1 then 0.2; its one message was charged 0.3: the sums differ
        // in the last bit, and that is no usage of the session's own.
        let slices = split_session(
            own(30, 1, 0.1 + 0.2),
            vec![carried("2026-03-02", "m-msg", 30, 0.3)],
        );
        assert_eq!(keys(&slices), vec![("2026-03-02", "m-msg", 30, 1)]);
        assert!((slices[0].totals.cost_usd - 0.3).abs() < 1e-15);
    }

    #[test]
    fn damaged_or_copied_counts_keep_the_session_whole() {
        // Negative counts written by another program, and messages carrying more than the
        // session (a fork's copies): the session counts whole, on its own model and day.
        for messages in [
            vec![carried("2026-03-02", "m-msg", -5, 0.0)],
            vec![carried("2026-03-02", "m-msg", 50, 0.0)],
            vec![carried("2026-03-02", "m-msg", 5, 2.0)],
        ] {
            let slices = split_session(own(10, 2, 1.0), messages);
            assert_eq!(keys(&slices), vec![("2026-03-01", "m-session", 10, 2)]);
        }
    }

    #[test]
    fn a_period_keeps_the_messages_from_its_start_and_a_session_started_in_it() {
        let mut before = carried("2026-03-01", "m-old", 10, 0.0);
        before.since = 0;
        let messages = vec![before, carried("2026-03-02", "m-new", 20, 0.5)];
        // Started before the period: only its messages from then on count.
        let mut old = own(100, 2, 0.5);
        old.started_since = 0;
        old.unpriced = 1;
        let slices = split_session(old.clone(), messages.clone());
        assert_eq!(keys(&slices), vec![("2026-03-02", "m-new", 20, 1)]);
        // Its unpriced usage was on m-old, before the period: nothing here is marked.
        assert_eq!(slices[0].totals.unpriced_sessions, 0);
        // Started in the period: what no message carries counts too.
        old.started_since = 1;
        let slices = split_session(old, messages);
        assert_eq!(
            keys(&slices),
            vec![
                ("2026-03-01", "m-session", 70, 0),
                ("2026-03-02", "m-new", 20, 1)
            ]
        );
        // A session started before the period without usage in it is not counted.
        let mut idle = own(0, 0, 0.0);
        idle.started_since = 0;
        assert!(split_session(idle, Vec::new()).is_empty());
    }

    #[test]
    fn a_sessions_calls_are_shared_among_its_messages() {
        let two = vec![
            carried("2026-03-01", "m-a", 1, 0.0),
            carried("2026-03-02", "m-b", 2, 0.0),
        ];
        // Five calls for two messages: two and a half each, the half to the first.
        let slices = split_session(own(3, 5, 0.0), two.clone());
        assert_eq!(
            keys(&slices),
            vec![("2026-03-01", "m-a", 1, 3), ("2026-03-02", "m-b", 2, 2)]
        );
        // One call for two messages (an importer's lines of one answer).
        let slices = split_session(own(3, 1, 0.0), two);
        assert_eq!(
            keys(&slices),
            vec![("2026-03-01", "m-a", 1, 1), ("2026-03-02", "m-b", 2, 0)]
        );
        // Usage no message carries keeps none of the calls when messages carry some.
        let one = vec![carried("2026-03-02", "m-b", 2, 0.0)];
        let slices = split_session(own(10, 4, 0.0), one);
        assert_eq!(
            keys(&slices),
            vec![
                ("2026-03-01", "m-session", 8, 0),
                ("2026-03-02", "m-b", 2, 4)
            ]
        );
        // Shares of three messages on one day and one on the next: 3:1 of 8 calls; the
        // largest counts stay exact however big.
        let mut three = carried("2026-03-01", "m-a", 3, 0.0);
        three.message_count = 3;
        let slices = split_session(
            own(4, 8, 0.0),
            vec![three.clone(), carried("2026-03-02", "m-a", 1, 0.0)],
        );
        assert_eq!(
            keys(&slices),
            vec![("2026-03-01", "m-a", 3, 6), ("2026-03-02", "m-a", 1, 2)]
        );
        let slices = split_session(
            own(4, i64::MAX, 0.0),
            vec![three, carried("2026-03-02", "m-a", 1, 0.0)],
        );
        let calls: i128 = slices.iter().map(|s| i128::from(s.totals.api_calls)).sum();
        assert_eq!(calls, i128::from(i64::MAX));
    }

    /// A slice of session `id` in `hour` with `input` tokens and `cost`.
    fn slice(id: &str, hour: &str, model: &str, input: i64, cost: f64) -> UsageSlice {
        UsageSlice {
            session_id: id.into(),
            model: model.into(),
            source: "claude-code".into(),
            directory: String::new(),
            hour: hour.into(),
            totals: UsageTotals {
                sessions: 1,
                tokens: TokenUsage {
                    input,
                    ..TokenUsage::default()
                },
                api_calls: 1,
                cost_usd: cost,
                unpriced_sessions: 0,
            },
        }
    }

    fn sliced(slices: Vec<UsageSlice>) -> UsageSlices {
        let totals = group_usage(&slices, |_| ()).remove(&()).unwrap_or_default();
        UsageSlices {
            since: None,
            slices,
            totals,
        }
    }

    #[test]
    fn a_block_lasts_five_hours_from_the_hour_of_its_first_use() {
        let slices = sliced(vec![
            // 09:xx opens a block to 14:00; 13:xx is in it, 14:xx opens the next.
            slice("ses_a", "2026-03-01T09", "m-a", 1, 0.5),
            slice("ses_a", "2026-03-01T13", "m-b", 2, 0.25),
            slice("ses_b", "2026-03-01T14", "m-a", 4, 1.0),
            // A quiet evening: the next use opens a block at its own hour, across midnight.
            slice("ses_b", "2026-03-01T22", "m-a", 8, 0.0),
            slice("ses_c", "2026-03-02T02", "m-a", 16, 0.0),
            slice("ses_c", "2026-03-02T03", "m-a", 32, 0.0),
        ]);
        let stats = slices.stats(StatsBy::Block);
        let rows: Vec<(&str, i64, i64)> = stats
            .rows
            .iter()
            .map(|r| (r.key.as_str(), r.totals.tokens.input, r.totals.sessions))
            .collect();
        assert_eq!(
            rows,
            vec![
                ("2026-03-01T09:00Z", 3, 1),
                ("2026-03-01T14:00Z", 4, 1),
                ("2026-03-01T22:00Z", 24, 2),
                ("2026-03-02T03:00Z", 32, 1),
            ]
        );
        assert_eq!(stats.totals.tokens.input, 63);
        // Broken down by model, each block adds up; the other way round too.
        let by_model = slices.stats_broken_down(StatsBy::Block, StatsBy::Model);
        let first = &by_model.rows[0];
        assert_eq!(
            first
                .breakdown
                .iter()
                .map(|b| (b.key.as_str(), b.totals.tokens.input))
                .collect::<Vec<_>>(),
            vec![("m-a", 1), ("m-b", 2)]
        );
        let of_model = slices.stats_broken_down(StatsBy::Model, StatsBy::Block);
        let m_a = of_model.rows.iter().find(|r| r.key == "m-a").unwrap();
        assert_eq!(m_a.breakdown.len(), 4);
        assert_eq!(m_a.breakdown[0].key, "2026-03-01T09:00Z");
        // Days, weeks and months still add the hours up.
        let days = slices.stats(StatsBy::Day);
        assert_eq!(
            days.rows
                .iter()
                .map(|r| (r.key.as_str(), r.totals.tokens.input))
                .collect::<Vec<_>>(),
            vec![("2026-03-01", 15), ("2026-03-02", 48)]
        );
    }

    #[test]
    fn blocks_are_of_the_usage_kept() {
        // Kept alone, the later source's use opens its own block at its own hour.
        let mut slices = sliced(vec![
            slice("ses_a", "2026-03-01T09", "m-a", 1, 0.0),
            slice("ses_b", "2026-03-01T11", "m-b", 2, 0.0),
        ]);
        assert_eq!(slices.stats(StatsBy::Block).rows.len(), 1);
        slices.retain(|s| s.model == "m-b");
        let rows = slices.stats(StatsBy::Block).rows;
        assert_eq!(rows.len(), 1);
        assert_eq!(rows[0].key, "2026-03-01T11:00Z");
    }
}
