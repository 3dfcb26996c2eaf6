//! The stable JSON shapes of `scribe … --json` and of `scribe serve`'s `/api/` (documented
//! in the README): snake_case keys, times in milliseconds since the epoch, costs in US
//! dollars, one document per answer.
//!
//! Both the CLI and the web API serialize through these types, so a script reading
//! `scribe list --json` and a page reading `/api/sessions` see the same fields. They are
//! Scribe's own wire types rather than the library's, so a library refactor cannot silently
//! change what scripts read. (`scribe show --json` and the conversation API print the
//! library's [`scribe_session::SessionExport`] / [`scribe_message::Message`] as they are:
//! that is the export format, versioned with the data; the conversation API cuts a big
//! part's strings, see [`CutPart`].)

use std::collections::{BTreeMap, HashMap};

use scribe_message::{
    ContextMessage, MAX_PART_DEPTH, Message, SearchHit, TokenUsage, snippet_pieces,
};
use scribe_session::{OpenBlock, Session, UsageStats, UsageStatsRow, UsageTotals};
use serde::Serialize;

/// The ellipsis that marks cut text.
pub const ELLIPSIS: char = '…';

/// Characters of a session's preview (its first user message, on one line).
pub const PREVIEW_CHARS: usize = 200;

/// `dollars` rounded to a billionth: sums of many small float charges carry noise in the
/// last digits (`0.04644000000000001`) that scripts should not see. An amount too large to
/// scale (above ~1.8e299, up to the `f64::MAX` cost sums stop at) has no such digits and
/// is kept as it is, not turned into `inf` (`null` in JSON).
pub fn usd(dollars: f64) -> f64 {
    let rounded = (dollars * 1e9).round() / 1e9;
    if rounded.is_finite() {
        rounded
    } else {
        dollars
    }
}

/// `text` on one line (every run of whitespace becomes one space), cut to at most
/// `max_chars` characters with [`ELLIPSIS`] when longer.
pub fn one_line(text: &str, max_chars: usize) -> String {
    let mut out = String::new();
    let mut count = 0;
    for word in text.split_whitespace() {
        if !out.is_empty() {
            out.push(' ');
            count += 1;
        }
        for c in word.chars() {
            out.push(c);
            count += 1;
        }
        if count > max_chars {
            break;
        }
    }
    cut(&out, max_chars)
}

/// `text` cut to at most `max_chars` characters, the last being [`ELLIPSIS`] when cut.
pub fn cut(text: &str, max_chars: usize) -> String {
    if text.chars().count() <= max_chars {
        return text.to_owned();
    }
    let keep = max_chars.saturating_sub(1);
    let mut out: String = text.chars().take(keep).collect();
    out.truncate(out.trim_end().len());
    out.push(ELLIPSIS);
    out
}

/// Token counters.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Tokens {
    /// Prompt tokens not served from a cache.
    pub input: i64,
    /// Generated tokens.
    pub output: i64,
    /// Prompt tokens read from the cache.
    pub cache_read: i64,
    /// Prompt tokens written to the cache.
    pub cache_write: i64,
    /// Reasoning tokens.
    pub reasoning: i64,
    /// All of the above.
    pub total: i64,
}

impl From<&TokenUsage> for Tokens {
    fn from(t: &TokenUsage) -> Self {
        Tokens {
            input: t.input,
            output: t.output,
            cache_read: t.cache_read,
            cache_write: t.cache_write,
            reasoning: t.reasoning,
            total: t.total(),
        }
    }
}

/// A session as `list` shows it.
#[derive(Debug, Clone, Serialize)]
pub struct SessionSummary {
    /// Id.
    pub id: String,
    /// Title, if any.
    pub title: Option<String>,
    /// `normal`, `task`, `fork`, `continuation` or `title`.
    pub kind: &'static str,
    /// Where it was started.
    pub source: String,
    /// The session it came from.
    pub parent_session_id: Option<String>,
    /// Model (`provider/model`).
    pub model: Option<String>,
    /// Messages.
    pub message_count: i64,
    /// Tool calls.
    pub tool_call_count: i64,
    /// Tokens used.
    pub tokens: Tokens,
    /// Estimated cost (USD).
    pub cost_usd: f64,
    /// Where the cost stands (`reported`, `estimated`, `reported+estimated`, `partial`,
    /// `unknown`; `null` for the agent's own sessions, whose every call was priced).
    pub cost_status: Option<String>,
    /// Whether `cost_usd` leaves out usage of a model without a price (`cost_status`
    /// `partial` or `unknown`): a lower bound, not what the session cost.
    pub cost_partial: bool,
    /// Whether any usage was recorded ([`Session::usage_recorded`]); when not, `tokens`
    /// and `cost_usd` are zero because nothing was counted, not because nothing was used.
    pub usage_recorded: bool,
    /// The first user message on one line, cut with `…`; `null` when there is none.
    pub preview: Option<String>,
    /// Creation time.
    pub created_at: i64,
    /// Last activity.
    pub updated_at: i64,
    /// When it ended.
    pub ended_at: Option<i64>,
    /// When it was archived.
    pub archived_at: Option<i64>,
}

impl SessionSummary {
    /// The summary of `s`; `first_message` is the text of its first user message (see
    /// [`crate::previews`]), put on one line and cut to [`PREVIEW_CHARS`].
    pub fn new(s: &Session, first_message: Option<&str>) -> Self {
        SessionSummary {
            id: s.id.clone(),
            title: s.title.clone(),
            kind: s.kind.as_str(),
            source: s.source.clone(),
            parent_session_id: s.parent_session_id.clone(),
            model: s.model.clone(),
            message_count: s.message_count,
            tool_call_count: s.tool_call_count,
            tokens: Tokens::from(&s.tokens),
            cost_usd: usd(s.estimated_cost_usd),
            cost_status: s.cost_status.clone(),
            cost_partial: s.cost_is_partial(),
            usage_recorded: s.usage_recorded(),
            preview: first_message.map(|text| one_line(text, PREVIEW_CHARS)),
            created_at: s.created_at,
            updated_at: s.updated_at,
            ended_at: s.ended_at,
            archived_at: s.archived_at,
        }
    }
}

/// `scribe list --json`: `{"sessions": [...], "more": bool}`.
#[derive(Debug, Clone, Serialize)]
pub struct SessionList {
    /// The sessions, in the order asked for.
    pub sessions: Vec<SessionSummary>,
    /// Whether more sessions match than were listed.
    pub more: bool,
}

/// Usage totals of a group of sessions (`stats`).
#[derive(Debug, Clone, Serialize)]
pub struct Totals {
    /// Sessions counted.
    pub sessions: i64,
    /// Model calls.
    pub api_calls: i64,
    /// Tokens.
    pub tokens: Tokens,
    /// Estimated cost (USD).
    pub cost_usd: f64,
    /// Sessions whose usage is partly or wholly of models without a price: when more than
    /// 0, `cost_usd` leaves their unpriced usage out.
    pub unpriced_sessions: i64,
    /// Whether any usage was recorded ([`UsageTotals::usage_recorded`]); when not, the
    /// zeros above are nothing counted, not nothing used.
    pub usage_recorded: bool,
}

impl From<&UsageTotals> for Totals {
    fn from(t: &UsageTotals) -> Self {
        Totals {
            sessions: t.sessions,
            api_calls: t.api_calls,
            tokens: Tokens::from(&t.tokens),
            cost_usd: usd(t.cost_usd),
            unpriced_sessions: t.unpriced_sessions,
            usage_recorded: t.usage_recorded(),
        }
    }
}

/// One group of [`Stats`].
#[derive(Debug, Clone, Serialize)]
pub struct StatsRow {
    /// The model, source, day, week, month or directory (`""`: sessions without one).
    pub key: String,
    /// The group's totals.
    #[serde(flatten)]
    pub totals: Totals,
    /// The group split another way (`scribe stats --breakdown`); absent otherwise.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub breakdown: Vec<StatsRow>,
}

impl From<&UsageStatsRow> for StatsRow {
    fn from(r: &UsageStatsRow) -> Self {
        StatsRow {
            key: r.key.clone(),
            totals: Totals::from(&r.totals),
            breakdown: r.breakdown.iter().map(StatsRow::from).collect(),
        }
    }
}

/// `scribe stats --json`: `{"by", "since", "rows": [...], "totals": {...}}`.
#[derive(Debug, Clone, Serialize)]
pub struct Stats {
    /// `model`, `source`, `day`, `week`, `month` or `directory`.
    pub by: &'static str,
    /// Only usage from this time (ms) on was counted (`scribe_session::UsageStats`).
    pub since: Option<i64>,
    /// One row per group.
    pub rows: Vec<StatsRow>,
    /// All groups together.
    pub totals: Totals,
}

impl Stats {
    /// The document of `stats`.
    pub fn new(stats: &UsageStats) -> Self {
        Stats {
            by: stats.by.name(),
            since: stats.since,
            rows: stats.rows.iter().map(StatsRow::from).collect(),
            totals: Totals::from(&stats.totals),
        }
    }
}

/// `scribe search --json`: `{"hits": [...]}`.
#[derive(Debug, Clone, Serialize)]
pub struct SearchHits {
    /// Best first.
    pub hits: Vec<Hit>,
}

impl SearchHits {
    /// The document of `hits`; `previews` holds the first user message of (at least) the
    /// hits' untitled sessions, by session id ([`crate::untitled_previews`]).
    pub fn new(hits: &[SearchHit], previews: &HashMap<String, String>) -> Self {
        SearchHits {
            hits: hits
                .iter()
                .map(|hit| {
                    let mut doc = Hit::from(hit);
                    if doc.title.is_none() {
                        doc.preview = previews
                            .get(&hit.session_id)
                            .map(|text| one_line(text, PREVIEW_CHARS));
                    }
                    doc
                })
                .collect(),
        }
    }
}

/// `GET /api/search`: the hits, as `scribe search --json` prints them, and the hits left
/// out.
#[derive(Debug, Clone, Serialize)]
pub struct SearchPage {
    /// `hits`, as `scribe search --json`.
    #[serde(flatten)]
    pub hits: SearchHits,
    /// Hits left out because a row of theirs cannot be read (a value another program wrote
    /// into an SQLite column, a role Scribe does not know): one line each, naming the row
    /// (after the hit's message when the row is another) and why. Empty normally.
    pub left_out: Vec<String>,
}

/// A message next to a hit.
#[derive(Debug, Clone, Serialize)]
pub struct HitContext {
    /// Message id.
    pub id: String,
    /// Its role.
    pub role: &'static str,
    /// The start of its text.
    pub text: String,
}

impl From<&ContextMessage> for HitContext {
    fn from(c: &ContextMessage) -> Self {
        HitContext {
            id: c.id.clone(),
            role: c.role.as_str(),
            text: c.text.clone(),
        }
    }
}

/// One search hit: the best match in one message.
#[derive(Debug, Clone, Serialize)]
pub struct Hit {
    /// The session.
    pub session_id: String,
    /// The message.
    pub message_id: String,
    /// The part that matched.
    pub part_id: String,
    /// The session's title.
    pub title: Option<String>,
    /// How an untitled session began: its first user message on one line, cut with `…`
    /// (as `scribe list` previews it); `null` for a titled session, or one without.
    pub preview: Option<String>,
    /// The session's source.
    pub source: String,
    /// The message's model, else the session's.
    pub model: Option<String>,
    /// The message's role.
    pub role: &'static str,
    /// When the message was created.
    pub created_at: i64,
    /// The text around the match, without markers.
    pub snippet: String,
    /// The matches in `snippet` as `[start, end)` character offsets.
    pub highlights: Vec<[usize; 2]>,
    /// Relevance (lower is better).
    pub rank: f64,
    /// The message before, if any.
    pub before: Option<HitContext>,
    /// The message after, if any.
    pub after: Option<HitContext>,
}

impl From<&SearchHit> for Hit {
    fn from(hit: &SearchHit) -> Self {
        let (snippet, highlights) = split_snippet(&hit.snippet);
        Hit {
            session_id: hit.session_id.clone(),
            message_id: hit.message_id.clone(),
            part_id: hit.part_id.clone(),
            title: hit.title.clone(),
            preview: None,
            source: hit.source.clone(),
            model: hit.message_model.clone().or_else(|| hit.model.clone()),
            role: hit.role.as_str(),
            created_at: hit.created_at,
            snippet,
            highlights,
            rank: hit.rank,
            before: hit.before.as_ref().map(HitContext::from),
            after: hit.after.as_ref().map(HitContext::from),
        }
    }
}

/// The snippet's text without markers, and the matches as character ranges.
pub fn split_snippet(snippet: &str) -> (String, Vec<[usize; 2]>) {
    let mut text = String::with_capacity(snippet.len());
    let mut ranges = Vec::new();
    let mut chars = 0;
    for (piece, matched) in snippet_pieces(snippet) {
        text.push_str(piece);
        let len = piece.chars().count();
        if matched {
            ranges.push([chars, chars + len]);
        }
        chars += len;
    }
    (text, ranges)
}

// ---- Documents only the web API has (the CLI has no command printing them) ----

/// `GET /api/sessions`: a page of `scribe list --json`'s shape, plus where the next page
/// starts and how many child sessions each listed session has.
#[derive(Debug, Clone, Serialize)]
pub struct SessionPage {
    /// `sessions` and `more`, as `scribe list --json`.
    #[serde(flatten)]
    pub list: SessionList,
    /// Pass as `after=` for the next page; `null` on the last page.
    pub next: Option<String>,
    /// Child sessions (sub-agent tasks, forks, continuations) by listed session id; a
    /// session without children is absent.
    pub child_counts: BTreeMap<String, i64>,
    /// Sessions of this page left out because their stored row cannot be read (a value
    /// another program wrote into an SQLite column): one line each, naming the session and
    /// why. Empty normally.
    pub left_out: Vec<String>,
}

/// `GET /api/sessions/{id}`: the session as `scribe show --json` prints it, with its
/// parent and children as list rows.
#[derive(Debug, Clone, Serialize)]
pub struct SessionDetail {
    /// The session (the `session` object of `scribe show --json`).
    pub session: Session,
    /// Whether the session's cost leaves out usage of a model without a price
    /// ([`Session::cost_is_partial`]).
    pub cost_partial: bool,
    /// Whether any usage was recorded ([`Session::usage_recorded`]).
    pub usage_recorded: bool,
    /// Its first user message on one line, cut with `…` (as [`SessionSummary::preview`]);
    /// `null` when there is none. What names an untitled session.
    pub preview: Option<String>,
    /// The session it came from, if it still exists.
    pub parent: Option<SessionSummary>,
    /// Its direct children, oldest first (at most [`crate::MAX_CHILDREN`]).
    pub children: Vec<SessionSummary>,
    /// Whether it has more children than listed.
    pub children_more: bool,
}

/// Bytes of each string of a part that `GET /api/sessions/{id}/messages` sends (64 KiB): a
/// tool's 20 MB output would otherwise be sent, and drawn, whole. A part whose JSON is at
/// most this long is read and sent whole (none of its strings can be longer).
pub const PART_TEXT_CAP: usize = 64 * 1024;

/// Bytes of string a cut part sends in all (256 KiB, four [`PART_TEXT_CAP`]s): the strings
/// of a part, in stored order, each send at most [`PART_TEXT_CAP`] bytes until their sends
/// reach this; after that each sends at most [`PART_STRING_FLOOR`] bytes. So a tool input
/// of fifty 100 KB strings sends 256 KiB and the first 256 bytes of each other string,
/// not fifty times 64 KiB.
pub const PART_BUDGET: usize = 4 * PART_TEXT_CAP;

/// Bytes every string of a cut part keeps, whatever the budget left (256): names, ids,
/// statuses and paths stay whole, so the part is still drawn as what it is.
pub const PART_STRING_FLOOR: usize = 256;

/// `GET /api/sessions/{id}/messages`: consecutive messages in creation order, each as in
/// the `messages` array of `scribe show --json`, except for big parts (see [`CutPart`]).
#[derive(Debug, Clone, Serialize)]
pub struct MessagePage {
    /// The messages, oldest first, with their parts (see [`CutPart`]).
    pub messages: Vec<serde_json::Value>,
    /// Whether older messages exist (load them with `before=<first id>`).
    pub more_before: bool,
    /// Whether newer messages exist (load them with `after=<last id>`).
    pub more_after: bool,
    /// Asked with `missing=first`: the `from` message is not in the session, so this is
    /// the first page instead (absent otherwise).
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub missing: bool,
}

/// `message` (read without its parts) as the messages API sends it, with `parts` (each a
/// [`StoredPart`](scribe_message::StoredPart) as `scribe show --json` prints it, or a
/// [`CutPart`]) as its parts.
pub fn page_message(
    message: &Message,
    parts: Vec<serde_json::Value>,
) -> Result<serde_json::Value, serde_json::Error> {
    let mut value = serde_json::to_value(message)?;
    if let Some(object) = value.as_object_mut() {
        object.insert("parts".into(), serde_json::Value::Array(parts));
    }
    Ok(value)
}

/// A part longer than [`PART_TEXT_CAP`] as the messages API sends it: as in `scribe show
/// --json`, except that its strings are cut (each to at most [`PART_TEXT_CAP`] bytes, at
/// a character boundary, within the part's [`PART_BUDGET`]); when any was, two more fields:
/// `"cut": true` and `"full_bytes"`, the size of the part's JSON (`part`) whole.
/// `GET /api/parts/{id}` answers the part whole.
#[derive(Debug, Clone, Serialize)]
pub struct CutPart {
    /// `prt_…`.
    pub id: String,
    /// Its place in the message.
    pub position: i64,
    /// The part's JSON, its strings cut.
    pub part: serde_json::Value,
    /// Creation time (ms).
    pub created_at: i64,
    /// Last change (ms).
    pub updated_at: i64,
    /// Whether a string was cut.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub cut: bool,
    /// When cut: the bytes of the part's JSON whole.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub full_bytes: Option<i64>,
}

/// One node of a part's JSON as the database hands over a part too big to read whole
/// (the query `ListCutPartNodes`, on PostgreSQL), in document order, depth first.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CutNode {
    /// Its id within the part.
    pub node: String,
    /// Its container's id; `None` for the root.
    pub parent: Option<String>,
    /// Its name in an object container (ignored in an array).
    pub key: Option<String>,
    /// `object`, `array`, `string` or `scalar`.
    pub kind: String,
    /// A string's first bytes (a cut may end inside a character), or a scalar's JSON text.
    pub head: Option<Vec<u8>>,
    /// Whether the string is longer than its head.
    pub cut: bool,
}

impl From<scribe_db::queries::ListCutPartNodesRow> for CutNode {
    fn from(row: scribe_db::queries::ListCutPartNodesRow) -> Self {
        CutNode {
            node: row.node,
            parent: row.parent,
            key: row.key,
            kind: row.kind,
            head: row.head,
            cut: row.cut,
        }
    }
}

/// Why the nodes of a cut part do not make one JSON value.
#[derive(Debug, thiserror::Error)]
pub enum CutError {
    /// The nodes are not one tree in document order.
    #[error("a cut part's nodes are not one tree: {0}")]
    Shape(&'static str),
    /// A scalar's text is not JSON.
    #[error("a cut part's scalar is not json")]
    Scalar(#[source] serde_json::Error),
}

/// The JSON value of one part from its [`CutNode`]s, and whether any string was cut. A
/// string's head is kept up to its last whole character; a container deeper than
/// [`MAX_PART_DEPTH`] is its JSON text (`flatten_below`).
pub fn rebuild_cut(
    nodes: impl IntoIterator<Item = CutNode>,
) -> Result<(serde_json::Value, bool), CutError> {
    use serde_json::Value as V;
    // The open containers, outermost first: (id, name in its container, value so far).
    let mut open: Vec<(String, Option<String>, V)> = Vec::new();
    let mut root: Option<V> = None;
    let mut cut = false;
    for n in nodes {
        let value = match n.kind.as_str() {
            "object" => V::Object(serde_json::Map::new()),
            "array" => V::Array(Vec::new()),
            "string" => {
                let mut bytes = n.head.unwrap_or_default();
                if let Err(err) = std::str::from_utf8(&bytes) {
                    bytes.truncate(err.valid_up_to());
                }
                cut |= n.cut;
                V::String(String::from_utf8(bytes).unwrap_or_default())
            }
            "scalar" => serde_json::from_slice(n.head.as_deref().unwrap_or(b"null"))
                .map_err(CutError::Scalar)?,
            _ => return Err(CutError::Shape("a node of an unknown kind")),
        };
        match &n.parent {
            None if root.is_some() || !open.is_empty() => {
                return Err(CutError::Shape("two roots"));
            }
            None => {}
            Some(parent) => {
                // Close the containers this node is not in (document order: they are done).
                while open.last().is_some_and(|(id, _, _)| id != parent) {
                    close(&mut open, &mut root)?;
                }
                if open.is_empty() {
                    return Err(CutError::Shape("a node before its container"));
                }
            }
        }
        if matches!(value, V::Object(_) | V::Array(_)) {
            open.push((n.node, n.key, value));
        } else if n.parent.is_none() {
            root = Some(value);
        } else {
            attach(&mut open, n.key, value)?;
        }
    }
    while !open.is_empty() {
        close(&mut open, &mut root)?;
    }
    let mut value = root.ok_or(CutError::Shape("no root"))?;
    flatten_below(&mut value, 1);
    Ok((value, cut))
}

/// Every object or array of `value` (at `level`, the root's being 1) deeper than
/// [`MAX_PART_DEPTH`] as its JSON text, a string: as [`scribe_message::Part::from_json`]
/// reads a part an older build stored too deep, so the page has the levels
/// `/api/parts/{id}` has and stays readable by a JSON reader with serde_json's limit.
fn flatten_below(value: &mut serde_json::Value, level: usize) {
    use serde_json::Value as V;
    if level > MAX_PART_DEPTH && matches!(value, V::Object(_) | V::Array(_)) {
        *value = V::String(value.to_string());
        return;
    }
    match value {
        V::Object(map) => map.values_mut().for_each(|v| flatten_below(v, level + 1)),
        V::Array(items) => items.iter_mut().for_each(|v| flatten_below(v, level + 1)),
        _ => {}
    }
}

/// Puts `value` into the innermost open container (under `key` in an object).
fn attach(
    open: &mut [(String, Option<String>, serde_json::Value)],
    key: Option<String>,
    value: serde_json::Value,
) -> Result<(), CutError> {
    match open.last_mut().map(|(_, _, v)| v) {
        Some(serde_json::Value::Object(map)) => {
            map.insert(key.unwrap_or_default(), value);
            Ok(())
        }
        Some(serde_json::Value::Array(items)) => {
            items.push(value);
            Ok(())
        }
        _ => Err(CutError::Shape("a node outside any container")),
    }
}

/// Closes the innermost open container: into the next one out, or as the root.
fn close(
    open: &mut Vec<(String, Option<String>, serde_json::Value)>,
    root: &mut Option<serde_json::Value>,
) -> Result<(), CutError> {
    let Some((_, key, value)) = open.pop() else {
        return Ok(());
    };
    if open.is_empty() {
        if root.is_some() {
            return Err(CutError::Shape("two roots"));
        }
        *root = Some(value);
        Ok(())
    } else {
        attach(open, key, value)
    }
}

/// `GET /api/usage`: usage per UTC day, stacked by model, source or directory, for the
/// charts.
#[derive(Debug, Clone, Serialize)]
pub struct Usage {
    /// Only usage from this time (ms) on was counted (`scribe_session::UsageStats`).
    pub since: Option<i64>,
    /// `day`, `week` or `month`: what each of `days` is.
    pub step: &'static str,
    /// `model`, `source` or `directory`: what each day's `stacks` are.
    pub stack: &'static str,
    /// Every stack key of the period, most expensive first (`""`: no model).
    pub keys: Vec<String>,
    /// Days (weeks, months) with usage, oldest first.
    pub days: Vec<UsageDay>,
    /// The whole period (equal to `scribe stats --since …`'s totals).
    pub totals: Totals,
    /// The conversations that cost the most in the period, most first: top-level sessions,
    /// each ranked by the usage in the period of itself and the sessions under it.
    pub top: Vec<TopSession>,
    /// The 5-hour usage block open now (whatever the period), as `scribe stats --by block`
    /// and `scribe statusline` find it; `null` when none is.
    pub block: Option<Block>,
}

/// A usage block ([`Usage::block`]): Claude's and Codex's subscription window.
#[derive(Debug, Clone, Serialize)]
pub struct Block {
    /// When it began (ms): the UTC hour of its first use.
    pub start: i64,
    /// When it ends (ms).
    pub end: i64,
    /// Its usage so far.
    pub totals: Totals,
}

impl From<&OpenBlock> for Block {
    fn from(b: &OpenBlock) -> Self {
        Block {
            start: b.start,
            end: b.end,
            totals: Totals::from(&b.totals),
        }
    }
}

/// One of [`Usage::top`]: the session as `list` shows it (its totals of all time, which
/// include its rolled-up sub-agents), and the usage in the period of it and every session
/// under it (sub-agents, forks, continuations).
#[derive(Debug, Clone, Serialize)]
pub struct TopSession {
    /// The session.
    #[serde(flatten)]
    pub session: SessionSummary,
    /// Its usage in the period, with the sessions under it (`sessions` counts those with
    /// usage in it, itself included).
    pub period: Totals,
}

/// One day (week, month) of [`Usage`].
#[derive(Debug, Clone, Serialize)]
pub struct UsageDay {
    /// `YYYY-MM-DD` (UTC): the day, or the Monday of the week; `YYYY-MM` for a month.
    pub day: String,
    /// The day's totals (equal to its row of `scribe stats --by day|week|month`).
    #[serde(flatten)]
    pub totals: Totals,
    /// The day's usage by model or source, in the order of [`Usage::keys`].
    pub stacks: Vec<StatsRow>,
}

/// `GET /api/filters`: the values the session list can be filtered by, most used first.
#[derive(Debug, Clone, Serialize)]
pub struct Choices {
    /// Sources.
    pub sources: Vec<Choice>,
    /// Models.
    pub models: Vec<Choice>,
    /// Directories.
    pub directories: Vec<Choice>,
}

/// One value of [`Choices`].
#[derive(Debug, Clone, Serialize)]
pub struct Choice {
    /// The value.
    pub value: String,
    /// How many sessions have it.
    pub sessions: i64,
}

/// `GET /api/version`: a counter that moves whenever the database changes (any process's
/// commit), for pages that poll instead of holding `/api/events` open.
#[derive(Debug, Clone, Copy, Serialize)]
pub struct Version {
    /// 0 when the server started, then one more per change seen.
    pub version: u64,
}

/// The body of every failed API request.
#[derive(Debug, Clone, Serialize)]
pub struct ErrorBody {
    /// What went wrong, on one line.
    pub error: String,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn costs_lose_float_noise() {
        assert_eq!(usd(0.046_440_000_000_000_01).to_string(), "0.04644");
        assert_eq!(usd(0.0123), 0.0123);
        assert_eq!(usd(f64::MAX), f64::MAX);
        assert_eq!(usd(1e300), 1e300);
    }

    #[test]
    fn snippets_split_into_text_and_ranges() {
        let (text, ranges) = split_snippet("a \u{2}fix\u{3} to the \u{2}büild\u{3} x");
        assert_eq!(text, "a fix to the büild x");
        assert_eq!(ranges, vec![[2, 5], [13, 18]]);
        // `>>>` and `<<<` are text.
        let (text, ranges) = split_snippet(">>> \u{2}print\u{3}(1) <<<");
        assert_eq!(text, ">>> print(1) <<<");
        assert_eq!(ranges, vec![[4, 9]]);
        let (text, ranges) = split_snippet("no match");
        assert_eq!((text.as_str(), ranges.len()), ("no match", 0));
    }

    fn node(id: &str, parent: Option<&str>, key: Option<&str>, kind: &str, head: &[u8]) -> CutNode {
        CutNode {
            node: id.into(),
            parent: parent.map(Into::into),
            key: key.map(Into::into),
            kind: kind.into(),
            head: (!head.is_empty()).then(|| head.to_vec()),
            cut: false,
        }
    }

    #[test]
    fn cut_nodes_make_the_part_again_and_bad_ones_are_errors() {
        let mut split = node("3", Some("2"), None, "string", "ab😀".as_bytes());
        // Cut inside the emoji: the broken character is dropped.
        split.head.as_mut().unwrap().truncate(4);
        split.cut = true;
        let nodes = vec![
            node("0", None, None, "object", b""),
            node("1", Some("0"), Some("n"), "scalar", b"0.10000000000000001"),
            node("2", Some("0"), Some("list"), "array", b""),
            split,
            node("4", Some("2"), None, "object", b""),
            node("5", Some("4"), Some("t"), "scalar", b"true"),
            node("6", Some("0"), Some("s"), "string", b"done"),
        ];
        let (value, cut) = rebuild_cut(nodes).unwrap();
        assert!(cut);
        assert_eq!(
            value,
            serde_json::json!({"n": 0.1, "list": ["ab", {"t": true}], "s": "done"})
        );
        // Not one tree, or not JSON: an error, never a panic.
        let orphan = vec![node("1", Some("9"), Some("a"), "scalar", b"1")];
        assert!(matches!(rebuild_cut(orphan), Err(CutError::Shape(_))));
        let two = vec![
            node("0", None, None, "object", b""),
            node("1", None, None, "object", b""),
        ];
        assert!(matches!(rebuild_cut(two), Err(CutError::Shape(_))));
        let bad = vec![node("0", None, None, "scalar", b"tru")];
        assert!(matches!(rebuild_cut(bad), Err(CutError::Scalar(_))));
        assert!(matches!(rebuild_cut(Vec::new()), Err(CutError::Shape(_))));
        let odd = vec![node("0", None, None, "set", b"")];
        assert!(matches!(rebuild_cut(odd), Err(CutError::Shape(_))));
    }

    #[test]
    fn cuts_to_one_line() {
        assert_eq!(one_line("  fix\n the   build ", 40), "fix the build");
        assert_eq!(one_line("abcdefghij", 5), "abcd…");
        assert_eq!(cut("héllo wörld", 6), "héllo…");
        assert_eq!(cut("short", 5), "short");
    }
}
