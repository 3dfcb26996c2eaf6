//! sea-query builders for queries whose shape depends on the caller: optional filters, IN
//! lists and sort orders. Values are always bound (sea-query-rusqlite on SQLite, the
//! `postgres` driver on PostgreSQL), never formatted into the SQL text. Each function
//! takes the read handle ([`ReadTx`]) and builds its statement in the dialect of the
//! backend it runs on.
//!
//! The only SQL text written here by hand is static: `+column` on SQLite (a column that
//! must not drive index choice; see [`ParentFilter::Root`]) and a constant `1`.
//!
//! - [`list_sessions`] / [`count_sessions`]: sessions by [`SessionFilter`], returning the
//!   generated [`SessionRow`]; [`SessionFilter::after`] pages by keyset (a [`SessionKeyset`]
//!   from the last row of the previous page), so a page deep into a long list costs what the
//!   first one does.

use sea_query::{
    Alias, Asterisk, BinOper, CommonTableExpression, Cond, Expr, ExprTrait, LikeExpr, Order, Query,
    SelectStatement, SqliteQueryBuilder, UnionType, WithClause,
};
use sea_query_rusqlite::RusqliteBinder;

use crate::Backend;
use crate::queries::{self, SessionRow};
use crate::tx::{Conn, ReadTx};

fn col(table: &str, column: &str) -> Expr {
    Expr::col((Alias::new(table), Alias::new(column)))
}

/// Escapes `\`, `%` and `_` so `text` matches itself literally in `LIKE … ESCAPE '\'`.
pub fn escape_like(text: &str) -> String {
    let mut out = String::with_capacity(text.len() + 2);
    for ch in text.chars() {
        if matches!(ch, '\\' | '%' | '_') {
            out.push('\\');
        }
        out.push(ch);
    }
    out
}

/// `%text%` with `text` escaped, for a LIKE "contains" match.
fn contains_pattern(text: &str) -> LikeExpr {
    LikeExpr::new(format!("%{}%", escape_like(text))).escape('\\')
}

/// Which sessions by their parent link.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub enum ParentFilter {
    /// Any session.
    #[default]
    Any,
    /// Only sessions without a parent (top-level conversations). On SQLite never served by
    /// the parent index (it matches nearly every row), so a sorted page reads one page's
    /// rows; PostgreSQL's planner weighs the term by its statistics and needs no hint.
    Root,
    /// Only sessions with a parent (tasks, forks, continuations, title sessions).
    Child,
    /// Only the children of this session.
    Of(String),
    /// The conversations a user started or chose to make, each once, at its live end:
    /// sessions without a parent and forks, except that one carried on by a compaction
    /// continuation shows as the newest continuation of its chain instead (the tip:
    /// a session no continuation carries on). Tasks and title sessions are left out.
    Conversations,
}

/// Sort order of [`list_sessions`]; ties are broken by id, descending (ascending for
/// [`SessionOrder::CreatedAsc`]).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum SessionOrder {
    /// Most recently active first.
    UpdatedDesc,
    /// Newest first (the default: a session list is newest first).
    #[default]
    CreatedDesc,
    /// Oldest first.
    CreatedAsc,
    /// Most tokens (all kinds) first.
    TokensDesc,
    /// Most estimated cost first.
    CostDesc,
}

/// The value a [`SessionOrder`] sorts by.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum SortValue {
    /// A time or a token count.
    Int(i64),
    /// A cost.
    Real(f64),
}

impl From<SortValue> for sea_query::Value {
    fn from(value: SortValue) -> Self {
        match value {
            SortValue::Int(v) => v.into(),
            SortValue::Real(v) => v.into(),
        }
    }
}

/// A place in a [`SessionOrder`]: the sort value and id of a row. With
/// [`SessionFilter::after`], a list starts just after that row.
///
/// The sort value of a row is, by order: `updated_at` ([`SessionOrder::UpdatedDesc`]),
/// `created_at` ([`SessionOrder::CreatedDesc`], [`SessionOrder::CreatedAsc`]), the sum of
/// its five token columns ([`SessionOrder::TokensDesc`]), `estimated_cost_usd`
/// ([`SessionOrder::CostDesc`]).
#[derive(Debug, Clone, PartialEq)]
pub struct SessionKeyset {
    /// The row's sort value.
    pub value: SortValue,
    /// The row's id (the tie-break).
    pub id: String,
}

/// Optional conditions on sessions; every `None` / empty field means "any".
#[derive(Debug, Clone, Default, PartialEq)]
pub struct SessionFilter {
    /// Only sessions from one of these sources.
    pub sources: Vec<String>,
    /// No sessions from these sources.
    pub exclude_sources: Vec<String>,
    /// Only sessions of one of these models.
    pub models: Vec<String>,
    /// Only sessions of this user.
    pub user_id: Option<String>,
    /// Only sessions of one of these kinds (`normal`, `title`, `task`, `fork`, `continuation`).
    pub kinds: Vec<String>,
    /// By parent link.
    pub parent: ParentFilter,
    /// `Some(true)`: only archived; `Some(false)`: only not archived.
    pub archived: Option<bool>,
    /// `Some(true)`: only ended; `Some(false)`: only active.
    pub ended: Option<bool>,
    /// Only sessions whose title contains this text (literally: `%` and `_` are not
    /// wildcards).
    pub title_contains: Option<String>,
    /// Only sessions in this directory.
    pub directory: Option<String>,
    /// Only sessions created at or after this time (ms).
    pub created_after: Option<i64>,
    /// Only sessions created before this time (ms).
    pub created_before: Option<i64>,
    /// Only sessions active at or after this time (ms): whose last change (`updated_at`:
    /// a message, a title, an ending) is then or later, whenever they were created.
    pub updated_after: Option<i64>,
    /// Sort order; newest first ([`SessionOrder::CreatedDesc`]) by default.
    pub order: SessionOrder,
    /// At most this many rows.
    pub limit: Option<u64>,
    /// Skip this many rows first.
    pub offset: Option<u64>,
    /// Only rows after this place in [`SessionFilter::order`] (keyset paging; ignored by
    /// [`count_sessions`]).
    pub after: Option<SessionKeyset>,
}

impl SessionFilter {
    fn condition(&self, backend: Backend) -> Cond {
        let c = |name: &str| col("sessions", name);
        let mut cond = Cond::all();
        if !self.sources.is_empty() {
            cond = cond.add(c("source").is_in(self.sources.iter().cloned()));
        }
        if !self.exclude_sources.is_empty() {
            cond = cond.add(c("source").is_not_in(self.exclude_sources.iter().cloned()));
        }
        if !self.models.is_empty() {
            cond = cond.add(c("model").is_in(self.models.iter().cloned()));
        }
        if let Some(user) = &self.user_id {
            cond = cond.add(c("user_id").eq(user.as_str()));
        }
        if !self.kinds.is_empty() {
            cond = cond.add(c("kind").is_in(self.kinds.iter().cloned()));
        }
        match &self.parent {
            ParentFilter::Any => {}
            // `+` keeps SQLite from using the parent index for this term: nearly every
            // session is top-level, so "parent IS NULL" selects almost the whole table,
            // and taking it from that index means sorting every row for each page. Without
            // it the planner walks the index of the sort column and stops after a page.
            ParentFilter::Root => {
                cond = cond.add(match backend {
                    Backend::Sqlite => Expr::cust(r#"+"sessions"."parent_session_id""#).is_null(),
                    Backend::Postgres => c("parent_session_id").is_null(),
                });
            }
            ParentFilter::Child => cond = cond.add(c("parent_session_id").is_not_null()),
            ParentFilter::Of(id) => cond = cond.add(c("parent_session_id").eq(id.as_str())),
            ParentFilter::Conversations => {
                cond = cond
                    .add(c("id").binary(
                        BinOper::In,
                        Expr::SubQuery(None, Box::new(conversation_chains().into())),
                    ))
                    .add(Expr::exists(continuations_of_this_session()).not());
            }
        }
        match self.archived {
            Some(true) => cond = cond.add(c("archived_at").is_not_null()),
            Some(false) => cond = cond.add(c("archived_at").is_null()),
            None => {}
        }
        match self.ended {
            Some(true) => cond = cond.add(c("ended_at").is_not_null()),
            Some(false) => cond = cond.add(c("ended_at").is_null()),
            None => {}
        }
        if let Some(text) = &self.title_contains {
            // Case folded in every script, on both sides: SQLite's LIKE and ILIKE on
            // PostgreSQL's "C"-collated title fold ASCII letters only (`über` did not find
            // `Über`). SQLite through `scribe_fold` (Rust's Unicode lowercase, registered
            // on every connection), PostgreSQL through `lower` under its ICU collation.
            cond = cond.add(match backend {
                Backend::Sqlite => Expr::cust(r#"scribe_fold("sessions"."title")"#)
                    .like(contains_pattern(&text.to_lowercase())),
                // `\\` is PostgreSQL's default LIKE escape.
                Backend::Postgres => Expr::cust_with_values(
                    r#"lower("sessions"."title" COLLATE "und-x-icu") LIKE lower($1 COLLATE "und-x-icu")"#,
                    [format!("%{}%", escape_like(text))],
                ),
            });
        }
        if let Some(dir) = &self.directory {
            cond = cond.add(c("directory").eq(dir.as_str()));
        }
        if let Some(after) = self.created_after {
            cond = cond.add(c("created_at").gte(after));
        }
        if let Some(before) = self.created_before {
            cond = cond.add(c("created_at").lt(before));
        }
        if let Some(after) = self.updated_after {
            cond = cond.add(c("updated_at").gte(after));
        }
        cond
    }

    /// The sort expression and direction of [`SessionFilter::order`].
    fn sort(&self) -> (Expr, Order) {
        let c = |name: &str| col("sessions", name);
        match self.order {
            SessionOrder::UpdatedDesc => (c("updated_at"), Order::Desc),
            SessionOrder::CreatedDesc => (c("created_at"), Order::Desc),
            SessionOrder::CreatedAsc => (c("created_at"), Order::Asc),
            SessionOrder::TokensDesc => (
                c("input_tokens")
                    .add(c("output_tokens"))
                    .add(c("cache_read_tokens"))
                    .add(c("cache_write_tokens"))
                    .add(c("reasoning_tokens")),
                Order::Desc,
            ),
            SessionOrder::CostDesc => (c("estimated_cost_usd"), Order::Desc),
        }
    }

    /// Rows after `place` in the sort order: `key <= v AND (key < v OR id < x)` when
    /// descending (mirrored when ascending), which an index on the key can serve as a range.
    fn keyset(&self, place: &SessionKeyset) -> Cond {
        let (key, order) = self.sort();
        let id = col("sessions", "id");
        let value = sea_query::Value::from(place.value);
        if order == Order::Asc {
            Cond::all()
                .add(key.clone().gte(value.clone()))
                .add(Cond::any().add(key.gt(value)).add(id.gt(place.id.as_str())))
        } else {
            Cond::all()
                .add(key.clone().lte(value.clone()))
                .add(Cond::any().add(key.lt(value)).add(id.lt(place.id.as_str())))
        }
    }

    fn select(&self, backend: Backend) -> SelectStatement {
        let c = |name: &str| col("sessions", name);
        let mut cond = self.condition(backend);
        if let Some(place) = &self.after {
            cond = cond.add(self.keyset(place));
        }
        let mut query = Query::select();
        query
            .column((Alias::new("sessions"), Asterisk))
            .from(Alias::new("sessions"))
            .cond_where(cond);
        let (first, order) = self.sort();
        let tie = if order == Order::Asc {
            Order::Asc
        } else {
            Order::Desc
        };
        query
            .order_by_expr(first, order)
            .order_by_expr(c("id"), tie);
        // SQLite needs a LIMIT for an OFFSET; -1 means "no limit".
        match (self.limit, self.offset) {
            (Some(limit), offset) => {
                query.limit(limit).offset(offset.unwrap_or(0));
            }
            (None, Some(offset)) => {
                query.limit(i64::MAX.unsigned_abs()).offset(offset);
            }
            (None, None) => {}
        }
        query
    }
}

/// Every session of a conversation chain: roots and forks, and the compaction
/// continuations that carry them on (followed down `continuation` children; `UNION`
/// keeps a corrupt cycle of parent links from looping).
fn conversation_chains() -> sea_query::WithQuery {
    let s = |name: &str| col("s", name);
    let mut base = Query::select()
        .column((Alias::new("sessions"), Alias::new("id")))
        .from(Alias::new("sessions"))
        .cond_where(
            Cond::any()
                .add(col("sessions", "parent_session_id").is_null())
                .add(col("sessions", "kind").eq("fork")),
        )
        .to_owned();
    let step = Query::select()
        .column((Alias::new("s"), Alias::new("id")))
        .from_as(Alias::new("sessions"), Alias::new("s"))
        .inner_join(
            Alias::new("chain"),
            s("parent_session_id").equals((Alias::new("chain"), Alias::new("id"))),
        )
        .and_where(s("kind").eq("continuation"))
        .to_owned();
    base.union(UnionType::Distinct, step);
    let mut cte = CommonTableExpression::new();
    cte.query(base)
        .column(Alias::new("id"))
        .table_name(Alias::new("chain"));
    let select = Query::select()
        .column(Alias::new("id"))
        .from(Alias::new("chain"))
        .to_owned();
    WithClause::new()
        .recursive(true)
        .cte(cte)
        .to_owned()
        .query(select)
}

/// The continuations of the outer query's session (it is not a chain's tip when any).
fn continuations_of_this_session() -> SelectStatement {
    Query::select()
        .expr(Expr::cust("1"))
        .from_as(Alias::new("sessions"), Alias::new("next"))
        .and_where(
            col("next", "parent_session_id").equals((Alias::new("sessions"), Alias::new("id"))),
        )
        .and_where(col("next", "kind").eq("continuation"))
        .to_owned()
}

/// The sessions matching `filter`, in its order.
pub fn list_sessions(
    tx: &mut ReadTx<'_>,
    filter: &SessionFilter,
) -> crate::Result<Vec<SessionRow>> {
    list_sessions_skipping(tx, filter, &mut Err)
}

/// [`list_sessions`], giving `unreadable` each row that holds a value no reader takes (an
/// [`Error::UnreadableValue`](crate::Error::UnreadableValue) naming the session, which
/// only another program's write leaves in SQLite): when it returns `Ok`, the listing goes
/// on without that row; an error it returns ends the listing. Every other error ends it.
pub fn list_sessions_skipping(
    tx: &mut ReadTx<'_>,
    filter: &SessionFilter,
    unreadable: &mut dyn FnMut(crate::Error) -> crate::Result<()>,
) -> crate::Result<Vec<SessionRow>> {
    let backend = tx.backend();
    let query = filter.select(backend);
    match tx.raw() {
        Conn::Sqlite(conn) => {
            let (sql, values) = query.build_rusqlite(SqliteQueryBuilder);
            let mut stmt = conn.prepare_cached(&sql)?;
            let mut rows = stmt.query(&*values.as_params())?;
            let mut sessions = Vec::new();
            // A row holding a value no reader takes (another program's) is named, so
            // that the error says which session to mend.
            while let Some(row) = rows.next()? {
                match queries::read_session_row(row) {
                    Ok(session) => sessions.push(session),
                    Err(err) => match crate::Error::from(err).in_row(|| {
                        let id = row.get::<_, String>(0).ok()?;
                        Some(format!("session {id}"))
                    }) {
                        err @ crate::Error::UnreadableValue { .. } => unreadable(err)?,
                        err => return Err(err),
                    },
                }
            }
            Ok(sessions)
        }
        #[cfg(feature = "postgres")]
        Conn::Postgres(client) => pg::query(client, &query)?
            .iter()
            .map(|row| Ok(crate::queries::postgres::read_session_row(row)?))
            .collect(),
    }
}

/// How many sessions match `filter` (its order, limit and offset ignored).
pub fn count_sessions(tx: &mut ReadTx<'_>, filter: &SessionFilter) -> crate::Result<i64> {
    let backend = tx.backend();
    let query = Query::select()
        .expr(Expr::col(Asterisk).count())
        .from(Alias::new("sessions"))
        .cond_where(filter.condition(backend))
        .to_owned();
    match tx.raw() {
        Conn::Sqlite(conn) => {
            let (sql, values) = query.build_rusqlite(SqliteQueryBuilder);
            Ok(conn
                .prepare_cached(&sql)?
                .query_row(&*values.as_params(), |row| row.get(0))?)
        }
        #[cfg(feature = "postgres")]
        Conn::Postgres(client) => {
            let rows = pg::query(client, &query)?;
            let row = rows
                .first()
                .ok_or_else(|| crate::Error::InvalidInput("count(*) returned no row".to_owned()))?;
            Ok(row.try_get(0)?)
        }
    }
}

/// Running built statements on PostgreSQL: the dialect and the parameters (rows are read by
/// the generated readers).
#[cfg(feature = "postgres")]
pub(crate) mod pg {
    use postgres::types::ToSql;
    use sea_query::{PostgresQueryBuilder, QueryStatementWriter, Value, Values};

    /// A value sea-query bound, as the driver takes it. Unsigned integers become `BIGINT`
    /// (PostgreSQL has no unsigned types); a value too big for it is an error.
    fn param(value: Value) -> crate::Result<Box<dyn ToSql + Sync>> {
        Ok(match value {
            Value::Bool(v) => Box::new(v),
            Value::TinyInt(v) => Box::new(v.map(i16::from)),
            Value::SmallInt(v) => Box::new(v),
            Value::Int(v) => Box::new(v),
            Value::BigInt(v) => Box::new(v),
            Value::TinyUnsigned(v) => Box::new(v.map(i16::from)),
            Value::SmallUnsigned(v) => Box::new(v.map(i32::from)),
            Value::Unsigned(v) => Box::new(v.map(i64::from)),
            Value::BigUnsigned(v) => Box::new(
                v.map(i64::try_from)
                    .transpose()
                    .map_err(|_| crate::Error::InvalidInput("a number above 2^63".to_owned()))?,
            ),
            Value::Float(v) => Box::new(v),
            Value::Double(v) => Box::new(v),
            Value::String(v) => Box::new(v),
            Value::Char(v) => Box::new(v.map(String::from)),
            Value::Bytes(v) => Box::new(v),
            other => {
                return Err(crate::Error::InvalidInput(format!(
                    "a value this backend does not bind: {other:?}"
                )));
            }
        })
    }

    /// `values` as the driver's parameter list.
    pub(crate) fn params(values: Values) -> crate::Result<Vec<Box<dyn ToSql + Sync>>> {
        values.0.into_iter().map(param).collect()
    }

    /// Runs `query`, built for PostgreSQL, and returns its rows.
    pub(crate) fn query(
        client: &mut postgres::Client,
        query: &impl QueryStatementWriter,
    ) -> crate::Result<Vec<postgres::Row>> {
        let (sql, values) = query.build(PostgresQueryBuilder);
        run(client, &sql, values)
    }

    /// Runs `sql` with `values` and returns its rows.
    pub(crate) fn run(
        client: &mut postgres::Client,
        sql: &str,
        values: Values,
    ) -> crate::Result<Vec<postgres::Row>> {
        let owned = params(values)?;
        let refs: Vec<&(dyn ToSql + Sync)> = owned.iter().map(|p| &**p).collect();
        Ok(client.query(sql, &refs)?)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_page_of_top_level_sessions_walks_the_sort_index() {
        let db = crate::Database::open_in_memory().unwrap();
        for (order, index) in [
            (SessionOrder::CreatedDesc, "sessions_created"),
            (SessionOrder::CreatedAsc, "sessions_created"),
            (SessionOrder::UpdatedDesc, "sessions_updated"),
        ] {
            let filter = SessionFilter {
                parent: ParentFilter::Root,
                archived: Some(false),
                order,
                limit: Some(51),
                ..SessionFilter::default()
            };
            let (sql, values) = filter
                .select(Backend::Sqlite)
                .build_rusqlite(SqliteQueryBuilder);
            let plan: Vec<String> = db
                .read(|tx| -> crate::Result<_> {
                    let mut stmt = tx
                        .conn()
                        .unwrap()
                        .prepare(&format!("EXPLAIN QUERY PLAN {sql}"))?;
                    let rows = stmt.query_map(&*values.as_params(), |row| row.get(3))?;
                    Ok(rows.collect::<rusqlite::Result<Vec<String>>>()?)
                })
                .unwrap();
            assert!(
                plan.iter().any(|step| step.contains(index))
                    && !plan.iter().any(|s| s.contains("sessions_parent")),
                "{order:?}: {plan:?}"
            );
        }
    }

    /// The plan of a page of top-level, unarchived sessions in `order`, first and after a
    /// keyset place.
    fn page_plans(db: &crate::Database, order: SessionOrder) -> Vec<Vec<String>> {
        let after = SessionKeyset {
            value: match order {
                SessionOrder::CostDesc => SortValue::Real(0.5),
                _ => SortValue::Int(1_000),
            },
            id: "ses_x".to_owned(),
        };
        [None, Some(after)]
            .into_iter()
            .map(|after| {
                let filter = SessionFilter {
                    parent: ParentFilter::Root,
                    archived: Some(false),
                    order,
                    limit: Some(51),
                    after,
                    ..SessionFilter::default()
                };
                let (sql, values) = filter
                    .select(Backend::Sqlite)
                    .build_rusqlite(SqliteQueryBuilder);
                db.read(|tx| -> crate::Result<_> {
                    let mut stmt = tx
                        .conn()
                        .unwrap()
                        .prepare(&format!("EXPLAIN QUERY PLAN {sql}"))?;
                    let rows = stmt.query_map(&*values.as_params(), |row| row.get(3))?;
                    Ok(rows.collect::<rusqlite::Result<Vec<String>>>()?)
                })
                .unwrap()
            })
            .collect()
    }

    /// Each page in `order` walks `index` and sorts nothing.
    fn assert_walks(db: &crate::Database, order: SessionOrder, index: &str) {
        for plan in page_plans(db, order) {
            assert!(
                plan.iter().any(|step| step.contains(index))
                    && !plan.iter().any(|step| step.contains("TEMP B-TREE")),
                "{order:?}: {plan:?}"
            );
        }
    }

    /// V9's indexes let a page sorted by cost or tokens read one page, not every session.
    #[test]
    fn pages_by_cost_or_tokens_read_one_page_not_every_session() {
        let db = crate::Database::open_in_memory().unwrap();
        assert_walks(&db, SessionOrder::CostDesc, "sessions_cost");
        assert_walks(&db, SessionOrder::TokensDesc, "sessions_tokens");
    }

    #[test]
    fn the_default_order_is_newest_first_with_ties_by_id() {
        assert_eq!(SessionFilter::default().order, SessionOrder::CreatedDesc);
        let (sql, _) = SessionFilter::default()
            .select(Backend::Sqlite)
            .build_rusqlite(SqliteQueryBuilder);
        assert!(
            sql.ends_with(r#"ORDER BY "sessions"."created_at" DESC, "sessions"."id" DESC"#),
            "{sql}"
        );
    }
}
