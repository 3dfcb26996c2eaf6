//! Everything the server reads, in one place: the only module of this crate that calls the
//! services, the generated queries or the database, so changes to those are adapted here.
//!
//! The database is opened read-only ([`Database::open_read_only`]): the server cannot write
//! a byte, whatever a request asks. Reads go through the services where they have what is
//! needed (session lists and lookups, search, stats) and through generated queries otherwise
//! (message pages by id and their parts, a big part streamed from its row on SQLite or cut
//! in the database on PostgreSQL, the usage chart groups, filter choices, child counts,
//! previews; the queries of the last five are in `sql/queries/server.sql`, its dialect
//! spellings, and `cli.sql`).

use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, PoisonError, RwLock};
use std::time::SystemTime;

use base64::Engine as _;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use scribe_db::filters::{ParentFilter, SessionFilter, SessionKeyset, SessionOrder, SortValue};
use scribe_db::queries as q;
use scribe_db::{Backend, ChangeWatch, Database, ReadTx};
use scribe_message::{MessageError, MessageService, SearchHit, SearchOptions, StoredPart, store};
use scribe_session::{
    ExportSelection, Session, SessionError, SessionService, StatsBy, UsageSlice, UsageSlices,
    UsageTotals, block_lookback,
};

use crate::cut::{CutLimits, cut_part};
use crate::error::{ApiError, ServeError, chain};
use crate::json::{
    Block, Choice, Choices, CutNode, CutPart, MessagePage, PART_TEXT_CAP, SearchHits, SearchPage,
    SessionDetail, SessionList, SessionPage, SessionSummary, Stats, StatsRow, TopSession, Totals,
    Usage, UsageDay, page_message, rebuild_cut, usd,
};

/// The most children `GET /api/sessions/{id}` lists (`children_more` tells of the rest).
pub const MAX_CHILDREN: usize = 500;

/// Characters of the first user message fetched for a preview.
const PREVIEW_FETCH_CHARS: i64 = 400;

/// Values of each filter choice list.
const MAX_CHOICES: i64 = 500;

/// Top sessions of the usage page.
const TOP_SESSIONS: usize = 10;

/// The order of the session list.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Sort {
    /// Newest first.
    Created,
    /// Most recently active first.
    Active,
    /// Oldest first.
    Oldest,
    /// Most tokens first.
    Tokens,
    /// Most expensive first.
    Cost,
}

impl Sort {
    /// The parameter value naming it.
    pub fn name(self) -> &'static str {
        match self {
            Sort::Created => "created",
            Sort::Active => "active",
            Sort::Oldest => "oldest",
            Sort::Tokens => "tokens",
            Sort::Cost => "cost",
        }
    }

    /// The sort a parameter value names.
    pub fn parse(text: &str) -> Option<Sort> {
        [
            Sort::Created,
            Sort::Active,
            Sort::Oldest,
            Sort::Tokens,
            Sort::Cost,
        ]
        .into_iter()
        .find(|s| s.name() == text)
    }

    fn order(self) -> SessionOrder {
        match self {
            Sort::Created => SessionOrder::CreatedDesc,
            Sort::Active => SessionOrder::UpdatedDesc,
            Sort::Oldest => SessionOrder::CreatedAsc,
            Sort::Tokens => SessionOrder::TokensDesc,
            Sort::Cost => SessionOrder::CostDesc,
        }
    }

    /// `s`'s place in this order (see [`SessionKeyset`]).
    fn key(self, s: &Session) -> SortValue {
        match self {
            Sort::Created | Sort::Oldest => SortValue::Int(s.created_at),
            Sort::Active => SortValue::Int(s.updated_at),
            Sort::Tokens => SortValue::Int(s.tokens.total()),
            Sort::Cost => SortValue::Real(s.estimated_cost_usd),
        }
    }

    /// The opaque `next` cursor after `s`: `v1:<sort>:<i|r><value>:<id>`, base64url.
    pub fn cursor(self, s: &Session) -> String {
        let value = match self.key(s) {
            SortValue::Int(v) => format!("i{v}"),
            // `{:?}` of an f64 prints the shortest text that parses back to the same value.
            SortValue::Real(v) => format!("r{v:?}"),
        };
        URL_SAFE_NO_PAD.encode(format!("v1:{}:{value}:{}", self.name(), s.id))
    }

    /// Decodes a cursor made by [`Sort::cursor`] for this sort.
    pub fn decode(self, text: &str) -> Result<SessionKeyset, ApiError> {
        let bad = || ApiError::BadRequest(format!("invalid cursor {text:?}"));
        let bytes = URL_SAFE_NO_PAD.decode(text.as_bytes()).map_err(|_| bad())?;
        let plain = String::from_utf8(bytes).map_err(|_| bad())?;
        let mut fields = plain.splitn(4, ':');
        let (Some("v1"), Some(sort), Some(value), Some(id)) =
            (fields.next(), fields.next(), fields.next(), fields.next())
        else {
            return Err(bad());
        };
        if sort != self.name() {
            return Err(ApiError::BadRequest(format!(
                "the cursor belongs to sort={sort}, not sort={}",
                self.name()
            )));
        }
        let value = if let Some(int) = value.strip_prefix('i') {
            SortValue::Int(int.parse().map_err(|_| bad())?)
        } else if let Some(real) = value.strip_prefix('r') {
            // No stored amount is NaN, and nothing compares after it: a page after `rNaN`
            // was silently empty.
            SortValue::Real(
                real.parse()
                    .ok()
                    .filter(|v: &f64| !v.is_nan())
                    .ok_or_else(bad)?,
            )
        } else {
            return Err(bad());
        };
        if id.is_empty() {
            return Err(bad());
        }
        Ok(SessionKeyset {
            value,
            id: id.to_owned(),
        })
    }
}

/// Which sessions by their archive mark.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Archived {
    /// Not archived ones (the default, as `scribe list`).
    Exclude,
    /// Both.
    Include,
    /// Only archived ones.
    Only,
}

/// Which sessions by their parent.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Parent {
    /// Top-level sessions (the default: children are grouped under their parent).
    Root,
    /// Any session.
    Any,
    /// The children of this session.
    Of(String),
}

/// What `GET /api/sessions` asks for.
#[derive(Debug, Clone)]
pub struct ListQuery {
    /// Only these sources.
    pub sources: Vec<String>,
    /// Not these sources.
    pub exclude_sources: Vec<String>,
    /// Only these models.
    pub models: Vec<String>,
    /// Only this directory.
    pub directory: Option<String>,
    /// Created at or after (ms).
    pub from: Option<i64>,
    /// Created before (ms).
    pub to: Option<i64>,
    /// Archive mark.
    pub archived: Archived,
    /// Parent link.
    pub parent: Parent,
    /// Title contains.
    pub title: Option<String>,
    /// Order.
    pub sort: Sort,
    /// Page size.
    pub limit: u64,
    /// Start after this cursor.
    pub after: Option<String>,
}

/// Where a page of messages starts.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum At {
    /// The first messages.
    Start,
    /// The last messages.
    End,
    /// From this message on (it included).
    From(String),
    /// After this message.
    After(String),
    /// Before this message.
    Before(String),
}

/// The open, read-only database and the services over it.
///
/// A database read as `immutable` (see [`Database::open_read_only`]) takes no locks and
/// never notices another process's commits, so when its file changes the [`Watcher`] has
/// the store open it again ([`Store::reopen`]): every request works on the [`Opened`] it
/// started with, and the next one on the new.
#[derive(Debug)]
pub struct Store {
    path: PathBuf,
    opened: RwLock<Arc<Opened>>,
    /// Filter choices and the change generation they were read at.
    choices: Mutex<Option<(u64, Choices)>>,
    /// The last usage read, with the change generation and period it was read at: the
    /// usage page asks for it twice per refresh (`/api/usage` and `/api/stats`), and it
    /// reads every message that carries usage.
    usage: Mutex<Option<UsageRead>>,
}

/// A usage read: the change generation and the period it was read at, and what it read.
type UsageRead = (u64, Option<i64>, Arc<UsageSlices>);

/// One opening of the database, with the services over it.
#[derive(Debug)]
struct Opened {
    db: Arc<Database>,
    sessions: SessionService,
    messages: MessageService,
}

impl Opened {
    fn new(path: &Path) -> Result<Opened, ServeError> {
        let db = Arc::new(open_read_only(path)?);
        Ok(Opened {
            sessions: SessionService::new(Arc::clone(&db)),
            messages: MessageService::new(Arc::clone(&db)),
            db,
        })
    }

    /// Runs `f` in one read snapshot; errors of any kind come back as they were.
    fn read<T>(
        &self,
        f: impl FnMut(&mut ReadTx<'_>) -> Result<T, ReadError>,
    ) -> Result<T, ApiError> {
        self.db.read(f).map_err(ApiError::from)
    }

    /// The [`TOP_SESSIONS`] conversations that cost the most in the period `slices` are
    /// of: each top-level session with the usage in it of itself and of every session
    /// under it (sub-agents, forks, continuations), most first, those without a cost left
    /// out.
    fn top_sessions(&self, slices: &[UsageSlice]) -> Result<Vec<TopSession>, ApiError> {
        let parents: HashMap<String, String> = self.read(|tx| {
            Ok(tx
                .q()
                .list_session_parents()?
                .into_iter()
                .map(|row| (row.id, row.parent_id))
                .collect())
        })?;
        /// The top-level session `id` is under (itself when it has no parent).
        fn root<'a>(parents: &'a HashMap<String, String>, mut id: &'a str) -> &'a str {
            // A chain of links longer than the sessions can only be a loop.
            for _ in 0..=parents.len() {
                match parents.get(id) {
                    Some(parent) if parent != id => id = parent,
                    _ => break,
                }
            }
            id
        }
        let conversations =
            scribe_session::group_usage(slices, |slice| root(&parents, &slice.session_id));
        let mut ranked: Vec<(&str, UsageTotals)> = conversations
            .into_iter()
            .filter(|(_, totals)| usd(totals.cost_usd) > 0.0)
            .collect();
        ranked.sort_by(|a, b| {
            b.1.cost_usd
                .total_cmp(&a.1.cost_usd)
                .then_with(|| a.0.cmp(b.0))
        });
        let mut top = Vec::new();
        let mut periods = Vec::new();
        for (id, period) in ranked {
            if top.len() >= TOP_SESSIONS {
                break;
            }
            // Deleted since the usage was read: left out.
            match self.sessions.get(id) {
                Ok(session) => top.push(session),
                Err(SessionError::NotFound { .. }) => continue,
                Err(e) => return Err(e.into()),
            }
            periods.push(period);
        }
        Ok(self
            .summaries(&top)?
            .into_iter()
            .zip(periods)
            .map(|(session, period)| TopSession {
                session,
                period: Totals::from(&period),
            })
            .collect())
    }

    fn summaries(&self, sessions: &[Session]) -> Result<Vec<SessionSummary>, ApiError> {
        let ids: Vec<&str> = sessions.iter().map(|s| s.id.as_str()).collect();
        let previews = previews(&self.db, &ids)?;
        Ok(sessions
            .iter()
            .map(|s| SessionSummary::new(s, previews.get(&s.id).map(String::as_str)))
            .collect())
    }
}

/// Opens the database at `path` (a file, or a PostgreSQL location) read-only. A missing
/// file is [`ServeError::NoDatabase`] (none is created); a PostgreSQL database must exist
/// with this build's schema.
fn open_read_only(path: &Path) -> Result<Database, ServeError> {
    Database::open_read_only(path).map_err(|source| match source {
        scribe_db::Error::NoDatabase { path } => ServeError::NoDatabase { path },
        source => ServeError::Open {
            location: Database::shown_location(path),
            source,
        },
    })
}

impl Store {
    /// Opens the database at `path` read-only.
    pub fn open(path: &Path) -> Result<Store, ServeError> {
        Ok(Store {
            path: path.to_owned(),
            opened: RwLock::new(Arc::new(Opened::new(path)?)),
            choices: Mutex::new(None),
            usage: Mutex::new(None),
        })
    }

    /// The current opening (a request uses one throughout).
    fn current(&self) -> Arc<Opened> {
        Arc::clone(&self.opened.read().unwrap_or_else(PoisonError::into_inner))
    }

    /// Whether the database is read as `immutable` (changes are then seen by its file).
    pub fn is_immutable(&self) -> bool {
        self.current().db.is_immutable()
    }

    /// Opens the database again, for requests from now on: after its file changed while it
    /// was read as `immutable`. On failure (the file mid-change) the old opening stays.
    pub fn reopen(&self) -> Result<(), ServeError> {
        let fresh = Arc::new(Opened::new(&self.path)?);
        *self.opened.write().unwrap_or_else(PoisonError::into_inner) = fresh;
        Ok(())
    }

    /// Where the database is, for people (a PostgreSQL password hidden).
    pub fn location(&self) -> String {
        self.current().db.location()
    }

    /// A change detector for the current opening (see [`Watcher`]).
    pub fn watcher(&self) -> Result<Watcher, ServeError> {
        let opened = self.current();
        if self.is_immutable() {
            return Ok(Watcher::files(&self.path));
        }
        match opened.db.watch_changes() {
            Ok(changes) => Ok(Watcher::Changes(changes)),
            // The file can only be read as immutable now (its writer left since this
            // opening): its data version would never move, so watch its files, whose
            // next change opens the store again.
            Err(scribe_db::Error::InvalidInput(_)) if opened.db.backend() == Backend::Sqlite => {
                Ok(Watcher::files(&self.path))
            }
            Err(scribe_db::Error::NoDatabase { path }) => Err(ServeError::NoDatabase { path }),
            Err(source) => Err(ServeError::Open {
                location: opened.db.location(),
                source,
            }),
        }
    }

    /// A page of the session list.
    pub fn list(&self, query: &ListQuery) -> Result<SessionPage, ApiError> {
        let after = query
            .after
            .as_deref()
            .map(|cursor| query.sort.decode(cursor))
            .transpose()?;
        let filter = SessionFilter {
            sources: query.sources.clone(),
            exclude_sources: query.exclude_sources.clone(),
            models: query.models.clone(),
            directory: query.directory.clone(),
            created_after: query.from,
            created_before: query.to,
            archived: match query.archived {
                Archived::Exclude => Some(false),
                Archived::Include => None,
                Archived::Only => Some(true),
            },
            parent: match &query.parent {
                Parent::Root => ParentFilter::Root,
                Parent::Any => ParentFilter::Any,
                Parent::Of(id) => ParentFilter::Of(id.clone()),
            },
            title_contains: query.title.clone(),
            order: query.sort.order(),
            // One more than asked tells whether more exist.
            limit: Some(query.limit.saturating_add(1)),
            after,
            ..SessionFilter::default()
        };
        let opened = self.current();
        // The children of a session that does not exist: a 404, as `search?session=` is,
        // not an empty list that reads as "it has none".
        if let Parent::Of(id) = &query.parent {
            opened.sessions.get(id)?;
        }
        // A session whose row cannot be read (another program's write) is left out and
        // named, as `scribe list` does: one damaged row does not blank the page.
        let mut left_out = Vec::new();
        let mut sessions = opened
            .sessions
            .list_skipping(&filter, &mut |err| left_out.push(crate::error::chain(&err)))?;
        // Rows left out were read too: the one more than asked may be among them.
        let more = (sessions.len() + left_out.len()) as u64 > query.limit;
        sessions.truncate(usize::try_from(query.limit).unwrap_or(usize::MAX));
        let next = if more {
            sessions.last().map(|s| query.sort.cursor(s))
        } else {
            None
        };
        let ids: Vec<&str> = sessions.iter().map(|s| s.id.as_str()).collect();
        let child_counts = if ids.is_empty() {
            BTreeMap::new()
        } else {
            opened.read(|tx| {
                Ok(tx
                    .q()
                    .count_child_sessions(&ids)?
                    .into_iter()
                    .map(|row| (row.parent_id, row.children))
                    .collect())
            })?
        };
        Ok(SessionPage {
            list: SessionList {
                sessions: opened.summaries(&sessions)?,
                more,
            },
            next,
            child_counts,
            left_out,
        })
    }

    /// One session with its parent and children.
    pub fn session(&self, id: &str) -> Result<SessionDetail, ApiError> {
        let opened = self.current();
        let session = opened.sessions.get(id)?;
        let parent = match &session.parent_session_id {
            Some(parent) => match opened.sessions.get(parent) {
                Ok(parent) => Some(parent),
                Err(scribe_session::SessionError::NotFound { .. }) => None,
                Err(err) => return Err(err.into()),
            },
            None => None,
        };
        let mut children = opened.sessions.list(&SessionFilter {
            parent: ParentFilter::Of(session.id.clone()),
            order: SessionOrder::CreatedAsc,
            limit: Some(MAX_CHILDREN as u64 + 1),
            ..SessionFilter::default()
        })?;
        let children_more = children.len() > MAX_CHILDREN;
        children.truncate(MAX_CHILDREN);
        let parent = match parent {
            Some(p) => opened
                .summaries(std::slice::from_ref(&p))?
                .into_iter()
                .next(),
            None => None,
        };
        let preview = previews(&opened.db, &[session.id.as_str()])?
            .remove(&session.id)
            .map(|text| crate::json::one_line(&text, crate::json::PREVIEW_CHARS));
        Ok(SessionDetail {
            children: opened.summaries(&children)?,
            children_more,
            parent,
            cost_partial: session.cost_is_partial(),
            usage_recorded: session.usage_recorded(),
            preview,
            session,
        })
    }

    /// The whole conversation `id` as Markdown, as `scribe export --format markdown`
    /// writes it ([`crate::markdown`]).
    pub fn markdown(&self, id: &str) -> Result<Vec<u8>, ApiError> {
        let opened = self.current();
        let mut body = Vec::new();
        for export in opened
            .sessions
            .export(&ExportSelection::One(id.to_owned()))?
        {
            crate::markdown::write(&mut body, &export)
                .map_err(|err| ApiError::Internal(err.to_string()))?;
        }
        Ok(body)
    }

    /// Up to `limit` consecutive messages of `session_id`, starting `at`. With
    /// `missing_first`, an `At::From` message that is not in the session gives the first
    /// page, marked `missing`, instead of a 404 (a stale `#msg_…` link of the page).
    pub fn messages(
        &self,
        session_id: &str,
        at: &At,
        limit: usize,
        missing_first: bool,
    ) -> Result<MessagePage, ApiError> {
        let fetch = i64::try_from(limit + 1).unwrap_or(i64::MAX);
        let opened = self.current();
        opened.read(|tx| {
            if !tx.q().session_exists(session_id)? {
                return Err(ApiError::NotFound(format!("session not found: {session_id}")).into());
            }
            let oldest = |tx: &mut ReadTx<'_>| {
                tx.q().list_messages_oldest(&q::ListMessagesOldestParams {
                    session_id,
                    limit: fetch,
                })
            };
            let after = |tx: &mut ReadTx<'_>, m: &q::MessageRow| {
                tx.q().list_messages_after(&q::ListMessagesAfterParams {
                    session_id,
                    created_at: m.created_at,
                    id: &m.id,
                    limit: fetch,
                })
            };
            let before = |tx: &mut ReadTx<'_>, m: &q::MessageRow, limit: i64| {
                tx.q().list_messages_before(&q::ListMessagesBeforeParams {
                    session_id,
                    created_at: m.created_at,
                    id: &m.id,
                    limit,
                })
            };
            let mut missing = false;
            // Forward pages: (rows oldest first, whether older ones exist).
            let (mut rows, more_before, backward) = match at {
                At::Start => (oldest(tx)?, false, false),
                At::After(id) => {
                    let m = anchor(tx, session_id, id)?;
                    (after(tx, &m)?, true, false)
                }
                At::From(id) => match find(tx, session_id, id)? {
                    // The page starts after the message just before it, if any.
                    Some(m) => match before(tx, &m, 1)?.pop() {
                        Some(previous) => (after(tx, &previous)?, true, false),
                        None => (oldest(tx)?, false, false),
                    },
                    None if missing_first => {
                        missing = true;
                        (oldest(tx)?, false, false)
                    }
                    None => return Err(not_found(session_id, id)),
                },
                At::Before(id) => {
                    let m = anchor(tx, session_id, id)?;
                    (before(tx, &m, fetch)?, false, true)
                }
                At::End => (
                    tx.q().list_messages_newest(&q::ListMessagesNewestParams {
                        session_id,
                        limit: fetch,
                    })?,
                    false,
                    true,
                ),
            };
            let overflow = rows.len() > limit;
            rows.truncate(limit);
            let (more_before, more_after) = if backward {
                rows.reverse();
                (overflow, matches!(at, At::Before(_)))
            } else {
                (more_before, overflow)
            };
            let ids: Vec<&str> = rows.iter().map(|r| r.id.as_str()).collect();
            let mut parts = page_parts(tx, &ids)?;
            let messages = store::load_messages_without_parts_by_ids(tx, &ids)?
                .iter()
                .map(|m| page_message(m, parts.remove(&m.id).unwrap_or_default()))
                .collect::<Result<Vec<_>, _>>()
                .map_err(|err| ApiError::Internal(err.to_string()))?;
            Ok(MessagePage {
                messages,
                more_before,
                more_after,
                missing,
            })
        })
    }

    /// The part `id` whole, as in the `parts` of `scribe show --json` (what the messages
    /// API cuts), or 404.
    pub fn part(&self, id: &str) -> Result<StoredPart, ApiError> {
        self.current().read(|tx| match tx.q().get_part(id)? {
            Some(row) => Ok(StoredPart::from_row(row)?),
            None => Err(ApiError::NotFound(format!("part not found: {id}")).into()),
        })
    }

    /// Search, as `scribe search`: the hits, and those left out because a row of theirs
    /// cannot be read.
    pub fn search(&self, query: &str, options: &SearchOptions) -> Result<SearchPage, ApiError> {
        let opened = self.current();
        if let Some(id) = &options.session_id {
            opened.sessions.get(id)?;
        }
        // A hit whose rows cannot be read (another program's write) is left out and named,
        // as `scribe search` does: one damaged row does not fail every search that meets it.
        let mut left_out = Vec::new();
        let hits = opened
            .messages
            .search_skipping(query, options, &mut |id, err| {
                left_out.push(match id {
                    Some(id) => format!("message {id}: {}", chain(&err)),
                    None => chain(&err),
                });
            })?;
        let previews = untitled_previews(&opened.db, &hits)?;
        Ok(SearchPage {
            hits: SearchHits::new(&hits, &previews),
            left_out,
        })
    }

    /// The usage from `since` on, sliced as `scribe stats` slices it, read again only when
    /// the database changed since `generation` or the period is another. The lock is held
    /// while reading, so the page's two requests of one refresh read once.
    fn usage_slices(
        &self,
        generation: u64,
        since: Option<i64>,
    ) -> Result<Arc<UsageSlices>, ApiError> {
        let mut cache = self.usage.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some((seen, period, slices)) = cache.as_ref()
            && *seen == generation
            && *period == since
        {
            return Ok(Arc::clone(slices));
        }
        let slices = Arc::new(self.current().sessions.usage_slices(since)?);
        *cache = Some((generation, since, Arc::clone(&slices)));
        Ok(slices)
    }

    /// Usage statistics, as `scribe stats`, at change `generation`.
    pub fn stats(
        &self,
        generation: u64,
        by: StatsBy,
        since: Option<i64>,
    ) -> Result<Stats, ApiError> {
        Ok(Stats::new(&self.usage_slices(generation, since)?.stats(by)))
    }

    /// Usage per day, week or month (`step`; [`Step::Auto`] picks by the period's length)
    /// stacked by model, source or directory (`stack`; any other grouping stacks by
    /// model), and the top sessions, at change `generation`.
    pub fn usage(
        &self,
        generation: u64,
        stack: StatsBy,
        since: Option<i64>,
        step: Step,
    ) -> Result<Usage, ApiError> {
        let opened = self.current();
        // The same slices of each session's usage that `scribe stats` adds up.
        let usage = self.usage_slices(generation, since)?;
        let step = step.resolve(&usage.slices, since, scribe_db::now_ms());
        let stack = match stack {
            StatsBy::Source | StatsBy::Directory => stack,
            _ => StatsBy::Model,
        };
        // Each period split by the stack's key; the keys most expensive first over the
        // whole period, the order every period's stacks are drawn in.
        let by_period = usage.stats_broken_down(step, stack);
        let keys: Vec<String> = usage.stats(stack).rows.into_iter().map(|r| r.key).collect();
        let rank: HashMap<&str, usize> = keys
            .iter()
            .enumerate()
            .map(|(i, k)| (k.as_str(), i))
            .collect();
        let days = by_period
            .rows
            .iter()
            .map(|row| {
                let mut stacks: Vec<StatsRow> = row.breakdown.iter().map(StatsRow::from).collect();
                stacks.sort_by_key(|s| rank.get(s.key.as_str()).copied().unwrap_or(usize::MAX));
                UsageDay {
                    day: row.key.clone(),
                    totals: Totals::from(&row.totals),
                    stacks,
                }
            })
            .collect();
        let top = opened.top_sessions(&usage.slices)?;
        // The block open now, whatever the period: the last day is read for it, apart from
        // the period's cached slices.
        let now = scribe_db::now_ms();
        let block = opened
            .sessions
            .usage_slices(Some(block_lookback(now)))?
            .open_block(now)
            .map(|open| Block::from(&open));
        Ok(Usage {
            since,
            step: step.name(),
            stack: stack.name(),
            keys,
            days,
            totals: Totals::from(&by_period.totals),
            top,
            block,
        })
    }

    /// The filter choices, read again only when the database changed since `generation`.
    pub fn choices(&self, generation: u64) -> Result<Choices, ApiError> {
        if let Ok(cache) = self.choices.lock()
            && let Some((seen, choices)) = cache.as_ref()
            && *seen == generation
        {
            return Ok(choices.clone());
        }
        let choices = choices(&self.current().db)?;
        if let Ok(mut cache) = self.choices.lock() {
            *cache = Some((generation, choices.clone()));
        }
        Ok(choices)
    }
}

/// The sources, models and directories sessions have, each with how many sessions have it,
/// most used first (at most 500 of each): the web page's filter choices, and what `scribe`
/// suggests when a filter value matches no session.
pub fn choices(db: &Database) -> Result<Choices, scribe_db::Error> {
    db.read(|tx| {
        macro_rules! choices {
            ($rows:expr) => {
                $rows
                    .into_iter()
                    .map(|r| Choice {
                        value: r.value,
                        sessions: r.sessions,
                    })
                    .collect()
            };
        }
        Ok(Choices {
            sources: choices!(tx.q().list_source_choices(MAX_CHOICES)?),
            models: choices!(tx.q().list_model_choices(MAX_CHOICES)?),
            directories: choices!(tx.q().list_directory_choices(MAX_CHOICES)?),
        })
    })
}

/// The parts of the messages `ids` as a message page sends them, by message id, in
/// position order: a part whose JSON is at most [`PART_TEXT_CAP`] bytes is read whole and
/// sent as stored; a bigger one is never read whole, its strings are cut ([`CutLimits`]:
/// each at most [`PART_TEXT_CAP`] bytes, within a budget for the part, at least a floor)
/// and it is sent as a [`CutPart`]. On SQLite its JSON text is
/// streamed from the row and cut on the way ([`stream_cut_parts`]); on PostgreSQL the
/// server hands over its strings cut and the rest of it (`ListCutPartNodes`).
fn page_parts(
    tx: &mut ReadTx<'_>,
    ids: &[&str],
) -> Result<HashMap<String, Vec<serde_json::Value>>, ReadError> {
    let mut by_message: HashMap<String, Vec<serde_json::Value>> = HashMap::new();
    if ids.is_empty() {
        return Ok(by_message);
    }
    let rows = tx.q().list_page_part_data(&q::ListPagePartDataParams {
        message_ids: ids,
        whole_max: limit(PART_TEXT_CAP),
    })?;
    let mut cut = match tx.backend() {
        Backend::Sqlite => stream_cut_parts(
            tx,
            rows.iter()
                .filter(|r| r.data.is_none())
                .map(|r| (r.id.as_str(), r.seq)),
        )?,
        Backend::Postgres => {
            let big: Vec<&str> = rows
                .iter()
                .filter(|r| r.data.is_none())
                .map(|r| r.id.as_str())
                .collect();
            cut_parts(tx, &big)?
        }
    };
    for row in rows {
        let value = match row.data {
            Some(data) => serde_json::to_value(StoredPart::decode(
                row.id,
                row.position,
                &data,
                row.created_at,
                row.updated_at,
            )?),
            None => {
                let Some((part, was_cut)) = cut.remove(&row.id) else {
                    return Err(ApiError::Internal(format!("part {} was not read", row.id)).into());
                };
                serde_json::to_value(CutPart {
                    id: row.id,
                    position: row.position,
                    part,
                    created_at: row.created_at,
                    updated_at: row.updated_at,
                    cut: was_cut,
                    full_bytes: was_cut.then_some(row.bytes),
                })
            }
        }
        .map_err(|err| ApiError::Internal(err.to_string()))?;
        by_message.entry(row.message_id).or_default().push(value);
    }
    Ok(by_message)
}

/// The parts `parts` (id, `seq`) read cut on SQLite ([`page_parts`]): each one's JSON
/// value and whether a string of it was cut, by part id. Each part's JSON text is streamed
/// from its row through [`cut_part`] (SQLite's incremental blob I/O, inside the read's
/// snapshot), so the page holds the cut, never the part. A row that cannot be opened
/// because it is gone is left out (as `ListCutPartNodes` leaves it out).
fn stream_cut_parts<'p>(
    tx: &ReadTx<'_>,
    parts: impl Iterator<Item = (&'p str, i64)>,
) -> Result<HashMap<String, (serde_json::Value, bool)>, ReadError> {
    let mut out = HashMap::new();
    for (id, seq) in parts {
        let Some(blob) = tx.part_json_reader(seq)? else {
            continue;
        };
        let built = cut_part(blob, CutLimits::PAGE)
            .map_err(|err| ApiError::Internal(format!("part {id}: {}", chain(&err))))?;
        out.insert(id.to_owned(), built);
    }
    Ok(out)
}

/// The parts `ids` read cut on PostgreSQL ([`page_parts`]): each one's JSON value and
/// whether a string of it was cut, by part id (the server cuts, `ListCutPartNodes`).
fn cut_parts(
    tx: &mut ReadTx<'_>,
    ids: &[&str],
) -> Result<HashMap<String, (serde_json::Value, bool)>, ReadError> {
    let mut out = HashMap::new();
    if ids.is_empty() {
        return Ok(out);
    }
    let rows = tx.q().list_cut_part_nodes(&q::ListCutPartNodesParams {
        part_ids: ids,
        cap: limit(CutLimits::PAGE.cap),
        floor: limit(CutLimits::PAGE.floor),
        budget: limit(CutLimits::PAGE.budget),
    })?;
    // Rows come part by part (ordered by part id), each part's in document order.
    let mut rows = rows.into_iter().peekable();
    while let Some(first) = rows.next() {
        let part_id = first.part_id.clone();
        let mut nodes = vec![first];
        while let Some(next) = rows.next_if(|r| r.part_id == part_id) {
            nodes.push(next);
        }
        let built = rebuild_cut(nodes.into_iter().map(CutNode::from))
            .map_err(|err| ApiError::Internal(format!("part {part_id}: {err}")))?;
        out.insert(part_id, built);
    }
    Ok(out)
}

/// A byte count as a query parameter.
fn limit(bytes: usize) -> i64 {
    i64::try_from(bytes).unwrap_or(i64::MAX)
}

/// The message `id` of `session_id`, if it is one.
fn find(
    tx: &mut ReadTx<'_>,
    session_id: &str,
    id: &str,
) -> Result<Option<q::MessageRow>, ReadError> {
    Ok(tx
        .q()
        .get_message(id)?
        .filter(|row| row.session_id == session_id))
}

/// The message `id` of `session_id`, or 404.
fn anchor(tx: &mut ReadTx<'_>, session_id: &str, id: &str) -> Result<q::MessageRow, ReadError> {
    find(tx, session_id, id)?.ok_or_else(|| not_found(session_id, id))
}

/// The 404 of a message `id` that is not in `session_id`.
fn not_found(session_id: &str, id: &str) -> ReadError {
    ApiError::NotFound(format!("message not found: {id} in session {session_id}")).into()
}

/// What a closure of [`Opened::read`] fails with: the database (so the transaction helper
/// sees it) or an answer for the client.
#[derive(Debug)]
enum ReadError {
    /// The database failed.
    Db(scribe_db::Error),
    /// The request cannot be answered (a message of another session …).
    Api(ApiError),
}

scribe_db::impl_tx_error!(ReadError, ReadError::Db);

impl From<scribe_db::Error> for ReadError {
    fn from(err: scribe_db::Error) -> Self {
        ReadError::Db(err)
    }
}

impl From<ApiError> for ReadError {
    fn from(err: ApiError) -> Self {
        ReadError::Api(err)
    }
}

impl From<MessageError> for ReadError {
    fn from(err: MessageError) -> Self {
        ReadError::Api(err.into())
    }
}

impl From<ReadError> for ApiError {
    fn from(err: ReadError) -> Self {
        match err {
            ReadError::Db(err) => err.into(),
            ReadError::Api(err) => err,
        }
    }
}

/// The bars of the usage chart ([`Store::usage`]): UTC days, weeks (Monday to Sunday) or
/// months, as `scribe stats --by day|week|month` counts them, or picked by the period.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Step {
    /// A bar a day.
    Day,
    /// A bar a week, keyed by its Monday.
    Week,
    /// A bar a month, keyed `YYYY-MM`.
    Month,
    /// Days for a period of up to [`Step::DAYS_OF_DAYS`] days (from `since`, or the first
    /// day with usage, to today or the last day with usage), weeks up to
    /// [`Step::DAYS_OF_WEEKS`], months beyond (about 160 bars at most, for a history of
    /// up to 13 years).
    Auto,
}

impl Step {
    /// The longest period [`Step::Auto`] shows by day.
    pub const DAYS_OF_DAYS: i64 = 92;
    /// The longest period [`Step::Auto`] shows by week (three years).
    pub const DAYS_OF_WEEKS: i64 = 3 * 366;

    /// The grouping of `slices` (of the period from `since`, at `now`) this step is.
    fn resolve(self, slices: &[UsageSlice], since: Option<i64>, now: i64) -> StatsBy {
        match self {
            Step::Day => StatsBy::Day,
            Step::Week => StatsBy::Week,
            Step::Month => StatsBy::Month,
            Step::Auto => {
                let days = slices
                    .iter()
                    .filter_map(|slice| scribe_db::calendar::day_number(slice.day()));
                let today = now.div_euclid(scribe_db::calendar::DAY);
                let first = since
                    .map(|ms| ms.div_euclid(scribe_db::calendar::DAY))
                    .or_else(|| days.clone().min())
                    .unwrap_or(today);
                let last = days.max().unwrap_or(today).max(today);
                match last.saturating_sub(first) {
                    span if span <= Step::DAYS_OF_DAYS => StatsBy::Day,
                    span if span <= Step::DAYS_OF_WEEKS => StatsBy::Week,
                    _ => StatsBy::Month,
                }
            }
        }
    }
}

/// Sessions whose first messages one query reads (each id is a bound parameter).
const PREVIEW_BATCH: usize = 500;

/// The text of each session's first user message (its text parts joined by spaces), by
/// session id; sessions without one are absent. What `scribe list` previews. Any number
/// of ids, read 500 at a time in one read transaction (`prune` names
/// thousands).
pub fn previews(db: &Database, ids: &[&str]) -> Result<HashMap<String, String>, scribe_db::Error> {
    if ids.is_empty() {
        return Ok(HashMap::new());
    }
    let rows = db.read(|tx| {
        let mut rows = Vec::new();
        for batch in ids.chunks(PREVIEW_BATCH) {
            rows.extend(
                tx.q()
                    .list_session_previews(&q::ListSessionPreviewsParams {
                        max_chars: PREVIEW_FETCH_CHARS,
                        session_ids: batch,
                    })?,
            );
        }
        Ok::<_, scribe_db::Error>(rows)
    })?;
    let mut previews: HashMap<String, String> = HashMap::new();
    for row in rows {
        let text = previews.entry(row.session_id).or_default();
        if !text.is_empty() {
            text.push(' ');
        }
        text.push_str(&row.text);
    }
    previews.retain(|_, text| !text.trim().is_empty());
    Ok(previews)
}

/// The [`previews`] of the sessions of `hits` that have no title: what names them where a
/// title would ([`SearchHits::new`], `scribe search`).
pub fn untitled_previews(
    db: &Database,
    hits: &[SearchHit],
) -> Result<HashMap<String, String>, scribe_db::Error> {
    let mut ids: Vec<&str> = hits
        .iter()
        .filter(|hit| hit.title.is_none())
        .map(|hit| hit.session_id.as_str())
        .collect();
    ids.sort_unstable();
    ids.dedup();
    previews(db, &ids)
}

/// Tells when the database changed, whichever process changed it.
///
/// - [`Watcher::Changes`]: scribe-db's change watch ([`Database::watch_changes`], the one
///   `Store::watch` of scribe-session uses too): on an SQLite file SQLite's `PRAGMA
///   data_version` on a connection of its own, which changes whenever another connection
///   (in this process or any other) commits; on PostgreSQL the change outbox, which
///   records every committed change to sessions, messages, parts and files, by any
///   process on any host (schema V19's triggers), read by a [`Database::listen`] thread
///   (a `Lagged`, changes deleted before it read them, is a change too).
/// - [`Watcher::Files`]: a database read as `immutable` takes no locks and its data version
///   never moves, so the watcher compares the size and modification time of the file and
///   its `-wal` and `-shm` instead (a writer starting creates them; a commit or checkpoint
///   changes one of them), and the store must be opened again on a change
///   ([`Watcher::reopens`]).
#[derive(Debug)]
pub enum Watcher {
    /// scribe-db's change watch.
    Changes(ChangeWatch),
    /// Polls the files of a database read as `immutable`, and their stamps last seen.
    Files {
        /// The files.
        files: FileStamps,
        /// Their stamps at the last poll (or when the watcher was made).
        last: [Option<(u64, SystemTime)>; 3],
    },
}

impl Watcher {
    /// A watcher of the files of the database at `path`, from their stamps now.
    fn files(path: &Path) -> Watcher {
        let files = FileStamps::new(path);
        let last = files.stamps();
        Watcher::Files { files, last }
    }

    /// Whether the database changed since the last poll (or since the watcher was made).
    /// Errors: the change watch's connection failed (what it last saw stays, so the next
    /// poll compares with it again).
    pub fn changed(&mut self) -> Result<bool, scribe_db::Error> {
        match self {
            Watcher::Changes(changes) => Ok(changes.poll()?.is_some()),
            Watcher::Files { files, last } => {
                let now = files.stamps();
                if now == *last {
                    return Ok(false);
                }
                *last = now;
                Ok(true)
            }
        }
    }

    /// Whether a change means the store must be opened again ([`Store::reopen`]) to be
    /// seen: true when the database is read as `immutable`.
    pub fn reopens(&self) -> bool {
        matches!(self, Watcher::Files { .. })
    }
}

/// The files of one database whose size and modification time [`Watcher::Files`] polls.
#[derive(Debug, Clone)]
pub struct FileStamps {
    files: [PathBuf; 3],
}

impl FileStamps {
    /// The database at `path`, with its `-wal` and `-shm` files.
    pub fn new(path: &Path) -> FileStamps {
        let with = |suffix: &str| {
            let mut name = path.as_os_str().to_owned();
            name.push(suffix);
            PathBuf::from(name)
        };
        FileStamps {
            files: [path.to_owned(), with("-wal"), with("-shm")],
        }
    }

    /// Each file's size and modification time, `None` when it is absent (or unreadable).
    pub fn stamps(&self) -> [Option<(u64, SystemTime)>; 3] {
        self.files.clone().map(|file| {
            let meta = std::fs::metadata(file).ok()?;
            Some((meta.len(), meta.modified().ok()?))
        })
    }
}
