//! Changes committed by any process, on any host, as they commit (`postgres` feature).
//!
//! Every committed insert, update and delete of a session, message, part or file is
//! written by the schema's triggers into the table `scribe_outbox` (schema version 19; a
//! row trigger, so no writer can forget): one row per committing transaction (several past
//! ~6,000 bytes of changes), holding the writer's transaction id, its origin and its
//! changes in the order they were made. A rolled-back transaction's rows never become
//! visible. [`crate::Database::listen`] starts one thread with its own connection that
//! polls the table and turns the rows into [`Notice`]s for a sink of the caller's:
//! typically a closure publishing on a `scribe_pubsub::Broker`, decoding the [`Change`]
//! into the service's own event (reloading the row) on the way.
//!
//! Why not NOTIFY (versions 8–18): PostgreSQL takes one global lock to queue a
//! notification at commit and holds it through the commit, so every writer's commit, on
//! every host, waited for every other's; with 16 writers it was the largest wait.
//!
//! **Every committed change, once.** The listener keeps the snapshot of its previous read
//! (`pg_current_snapshot()`: `xmin:xmax:in-progress ids`) as its cursor. The next read
//! takes, in one statement, a new snapshot and the rows of transactions the previous one
//! did not see (`xid >= xmax`, or an id in its in-progress list) that the new one sees. A
//! row is visible to a snapshot exactly when its transaction had committed when the
//! snapshot was taken, so each committed row is read by the first read after its commit,
//! and never again; a transaction still running is in the new in-progress list and is
//! read when it commits, and a long-running one holds back nothing but itself. (A cursor
//! on an id or a sequence would be wrong: ids are taken before commit, so a lower one can
//! commit after a higher one was read past.)
//!
//! **In commit order per session.** Rows of one read are handed over by transaction id,
//! then in the order written. Two committed transactions that changed the same session
//! both updated its row (the schema makes every change do so, V19), and under
//! SERIALIZABLE the later of two overlapping updaters fails and runs again as a new
//! transaction, so the one that committed first took its id first. Across sessions the
//! order within one read is by id, not by commit.
//!
//! **Latency.** The listener polls again after [`POLL_MIN`] while rows keep coming, and
//! backs off by a quarter per empty read up to [`POLL_MAX`] when idle (about half a
//! second from busy to idle). So a change reaches the sink a few milliseconds after its
//! commit while changes flow, and at most [`POLL_MAX`] plus a read after a quiet spell.
//! An idle listener costs the server one small indexed read per [`POLL_MAX`].
//!
//! **Retention and `Lagged`.** Rows are kept at least [`RETENTION`], then deleted by
//! `scribe_outbox_trim` (listeners of a writable opening run it every [`TRIM_EVERY`],
//! writing processes after their first commit and then at most every
//! [`WRITER_TRIM_EVERY`], on a thread of their own; one at a time, never on every commit; rows of a transaction
//! younger than a still running one wait for it).
//! The listener reconnects by itself (with a growing pause, up to two seconds) and goes on
//! from its cursor, so what was committed while it was away is delivered, late, in order.
//! Only rows deleted before it read them are lost: the trim records the transaction id
//! below which rows are gone and how many changes it deleted in all, and the listener
//! keeps the number of changes its cursor saw that were still stored; from those it counts
//! exactly the changes it can no longer receive and reports [`Notice::Lagged`]`(n)` before
//! what comes after (a broker passes it on as `RecvError::Lagged(n)`, so subscribers
//! reload). When the store goes backwards (restored, or another server) `n` is 1
//! ("reload") and the listener starts over from the present.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use crate::{Database, Error, Result};

/// The `application_name` of the listener's connection (what `pg_stat_activity` shows),
/// unless the location sets one of its own (the pool's connections are `scribe`).
pub const APPLICATION_NAME: &str = "scribe-listen";

/// How long the outbox keeps a change at least: a listener that is away (disconnected,
/// or its sink busy) for less receives everything it missed.
pub const RETENTION: Duration = Duration::from_secs(300);

/// The pause between reads while changes keep coming.
pub const POLL_MIN: Duration = Duration::from_millis(5);

/// The pause between reads when idle (and the most a [`Listener::stop`] waits for).
pub const POLL_MAX: Duration = Duration::from_millis(100);

/// How often a listener deletes what is past [`RETENTION`].
pub const TRIM_EVERY: Duration = Duration::from_secs(10);

/// How often a writing process deletes what is past [`RETENTION`] (after a commit; also
/// after its first), so a store that nobody listens to does not grow.
pub const WRITER_TRIM_EVERY: Duration = Duration::from_secs(60);

/// Where a listener starts: the present snapshot, the trim record, and the changes stored
/// now (all of them visible to that snapshot).
const START: &str = "SELECT CAST(pg_current_snapshot() AS TEXT), CAST(t.horizon AS TEXT), \
     t.changes, (SELECT CAST(coalesce(sum(o.n), 0) AS BIGINT) FROM scribe_outbox o) \
     FROM scribe_outbox_trim t";

/// One read, in one statement (one snapshot): the new snapshot, the trim record, the
/// changes the previous snapshot saw that are still stored (only when the trim passed
/// its oldest running transaction; else 0), then the rows the previous snapshot (`$1`)
/// did not see, in transaction id and chunk order (none: one row of NULLs).
const POLL: &str = "WITH prev AS MATERIALIZED (SELECT CAST($1::TEXT AS pg_snapshot) AS s), \
     cur AS MATERIALIZED (SELECT pg_current_snapshot() AS s), \
     cut AS MATERIALIZED (SELECT horizon, changes FROM scribe_outbox_trim), \
     kept AS MATERIALIZED ( \
         SELECT CASE WHEN cut.horizon > pg_snapshot_xmin(prev.s) THEN ( \
             SELECT CAST(coalesce(sum(o.n), 0) AS BIGINT) FROM scribe_outbox o \
             WHERE o.xid >= cut.horizon AND o.xid < pg_snapshot_xmax(prev.s) \
               AND pg_visible_in_snapshot(o.xid, prev.s)) ELSE 0 END AS n \
         FROM cut, prev) \
     SELECT CAST(cur.s AS TEXT), CAST(cut.horizon AS TEXT), cut.changes, kept.n, \
            CAST(o.xid AS TEXT), o.origin, o.n, o.changes \
     FROM cur CROSS JOIN cut CROSS JOIN kept \
     LEFT JOIN scribe_outbox o \
       ON o.xid >= pg_snapshot_xmax(CAST($1::TEXT AS pg_snapshot)) \
       OR o.xid = ANY (ARRAY(SELECT pg_snapshot_xip(CAST($1::TEXT AS pg_snapshot)))) \
     ORDER BY o.xid, o.chunk";

/// What kind of change a row went through.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum ChangeOp {
    /// The row was inserted.
    Insert,
    /// The row was updated.
    Update,
    /// The row was deleted.
    Delete,
}

/// One committed row change, as the schema's trigger recorded it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Change {
    /// The table: `sessions`, `messages`, `parts` or `files`.
    pub table: String,
    /// Insert, update or delete.
    pub op: ChangeOp,
    /// The row's id.
    pub id: String,
    /// The session the row belongs to (a session's own id for `sessions`).
    pub session_id: String,
    /// The process that made the change (its connections' `scribe.origin`).
    pub origin: String,
    /// Whether this process made it (through this same [`Database`]), so it already
    /// published its own event.
    pub own: bool,
}

/// What the listener hands its sink.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Notice {
    /// A committed change, in commit order per session.
    Change(Change),
    /// `n` committed changes were deleted from the outbox (older than [`RETENTION`])
    /// before this listener read them, so it will never deliver them: an exact count, or
    /// 1 ("reload") when the store went backwards. Sent before the changes that come
    /// after them; never with 0. The `u64` matches the brokers' `report_missed(n)`.
    Lagged(u64),
}

/// A running listener thread; dropping it (or [`Listener::stop`]) stops the thread
/// within about [`POLL_MAX`] (or one read).
#[derive(Debug)]
pub struct Listener {
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
}

impl Listener {
    /// Stops the thread and waits for it.
    pub fn stop(mut self) {
        self.halt();
    }

    fn halt(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

impl Drop for Listener {
    fn drop(&mut self) {
        self.halt();
    }
}

impl Database {
    /// Starts a thread that reads the changes committed to this PostgreSQL database by
    /// every process (this one included: see [`Change::own`]) from its outbox and calls
    /// `sink` with each, in commit order per session, and with [`Notice::Lagged`] when
    /// some were deleted before it could read them. Its position is taken before this
    /// returns, so every change committed after it is delivered; an unreachable server (or
    /// a schema without the outbox, before version 19) is an error here, later losses are
    /// retried in the thread, which then goes on where it was.
    ///
    /// On an SQLite database, [`Error::InvalidInput`]: its processes publish their own
    /// events.
    pub fn listen(&self, sink: impl FnMut(Notice) + Send + 'static) -> Result<Listener> {
        let Some(pg) = self.postgres() else {
            return Err(Error::InvalidInput(
                "listening for changes needs a PostgreSQL database".to_owned(),
            ));
        };
        let connect = {
            let pool = pg.pool();
            let mut location = pool.location().clone();
            // Unless the location names the application itself ("scribe" is the default).
            if location
                .config
                .get_application_name()
                .is_none_or(|name| name == "scribe")
            {
                location.config.application_name(APPLICATION_NAME);
            }
            let origin = pool.origin().to_owned();
            move || -> Result<Reader> {
                let pool = super::pool::Pool::new(location.clone(), origin.clone(), 1, 0)?;
                let mut client = pool.connect()?;
                // Each read and trim must see what has committed when it runs, whatever
                // the server's default. No JIT: before the outbox has statistics its
                // estimates are large enough to compile every read (~0.4 s each, measured).
                client.batch_execute(
                    "SET default_transaction_isolation = 'read committed'; SET jit = off",
                )?;
                // Parsed once per connection, not at every poll.
                let poll = client.prepare(POLL)?;
                Ok(Reader { client, poll })
            }
        };
        let mut reader = connect()?;
        let cursor = start(&mut reader.client)?;
        let own = pg.origin().to_owned();
        // A read-only opening (`scribe serve`) deletes nothing, not even expired changes.
        let trims = !self.is_read_only();
        let stop = Arc::new(AtomicBool::new(false));
        let thread = std::thread::Builder::new()
            .name("scribe-listen".to_owned())
            .spawn({
                let stop = Arc::clone(&stop);
                move || run(reader, cursor, &connect, &own, trims, &stop, sink)
            })
            .map_err(|source| Error::Io {
                path: "scribe-listen thread".into(),
                source,
            })?;
        Ok(Listener {
            stop,
            thread: Some(thread),
        })
    }
}

/// Deletes the outbox rows past [`RETENTION`] (see the module docs), in its own READ
/// COMMITTED transaction on `client`; how many rows. Another process trimming at the same
/// time makes this return 0 at once.
pub(crate) fn trim(client: &mut postgres::Client) -> Result<i64> {
    let keep = i64::try_from(RETENTION.as_millis()).unwrap_or(i64::MAX);
    let mut tx = client
        .build_transaction()
        .isolation_level(postgres::IsolationLevel::ReadCommitted)
        .start()?;
    let rows: i64 = tx
        .query_one("SELECT scribe_outbox_trim($1)", &[&keep])?
        .try_get(0)?;
    tx.commit()?;
    Ok(rows)
}

/// Where a listener stands: the snapshot of its last read and what it knew then.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Cursor {
    /// `pg_current_snapshot()` of the last read, as text.
    snapshot: String,
    /// Its oldest running transaction (`xmin`) and first unassigned id (`xmax`).
    xmin: u64,
    xmax: u64,
    /// The trim record then: rows below `horizon` were gone, `trimmed` changes deleted in
    /// all.
    horizon: u64,
    trimmed: i64,
    /// Changes in stored rows this snapshot saw (delivered, or committed before the
    /// listener started).
    seen: i64,
}

/// The `xmin` and `xmax` of a snapshot's text (`xmin:xmax:xip,…`).
fn snapshot_bounds(text: &str) -> Option<(u64, u64)> {
    let mut fields = text.split(':');
    let xmin = fields.next()?.parse().ok()?;
    let xmax = fields.next()?.parse().ok()?;
    Some((xmin, xmax))
}

fn malformed(what: &str, text: &str) -> Error {
    Error::InvalidInput(format!("the server sent a malformed {what}: {text:?}"))
}

/// The cursor of the present: what the listener starts from.
fn start(client: &mut postgres::Client) -> Result<Cursor> {
    let row = client.query_one(START, &[])?;
    let snapshot: String = row.try_get(0)?;
    let horizon: String = row.try_get(1)?;
    let (xmin, xmax) =
        snapshot_bounds(&snapshot).ok_or_else(|| malformed("snapshot", &snapshot))?;
    Ok(Cursor {
        xmin,
        xmax,
        horizon: horizon
            .parse()
            .map_err(|_| malformed("transaction id", &horizon))?,
        trimmed: row.try_get(2)?,
        seen: row.try_get(3)?,
        snapshot,
    })
}

/// One read's outcome, before it is accounted for.
#[derive(Debug, Default)]
struct Read {
    snapshot: String,
    horizon: u64,
    trimmed: i64,
    /// Changes the previous snapshot saw still stored (meaningful when the trim passed
    /// the previous snapshot's `xmin`).
    kept: i64,
    /// (origin, number of changes, changes JSON) per row, in order.
    rows: Vec<(String, i64, String)>,
}

/// The listener's connection and its prepared [`POLL`].
struct Reader {
    client: postgres::Client,
    poll: postgres::Statement,
}

fn read(reader: &mut Reader, cursor: &Cursor) -> Result<Read> {
    let rows = reader.client.query(&reader.poll, &[&cursor.snapshot])?;
    let mut out = Read::default();
    for (i, row) in rows.iter().enumerate() {
        if i == 0 {
            out.snapshot = row.try_get(0)?;
            let horizon: String = row.try_get(1)?;
            out.horizon = horizon
                .parse()
                .map_err(|_| malformed("transaction id", &horizon))?;
            out.trimmed = row.try_get(2)?;
            out.kept = row.try_get(3)?;
        }
        let xid: Option<String> = row.try_get(4)?;
        if xid.is_some() {
            out.rows.push((
                row.try_get(5)?,
                i64::from(row.try_get::<_, i32>(6)?),
                row.try_get(7)?,
            ));
        }
    }
    Ok(out)
}

/// What a read means: how many changes the listener can no longer receive, and its next
/// cursor; `None` when the store went backwards (the listener starts over).
///
/// The trim deleted the rows with ids in [previous horizon, new horizon), holding
/// `trimmed - prev.trimmed` changes. Those the previous snapshot saw were delivered (or
/// predate the listener); the others are lost. While the new horizon is at most the
/// previous snapshot's `xmin`, every deleted row was seen; otherwise the seen ones still
/// stored are `kept`, so `prev.seen - kept` of the deleted were seen.
fn account(prev: &Cursor, read: &Read) -> Option<(u64, Cursor)> {
    let (xmin, xmax) = snapshot_bounds(&read.snapshot)?;
    if xmax < prev.xmax || read.horizon < prev.horizon || read.trimmed < prev.trimmed {
        return None;
    }
    let deleted = read.trimmed - prev.trimmed;
    let delivered: i64 = read.rows.iter().map(|(_, n, _)| n).sum();
    let (missed, still_seen) = if read.horizon <= prev.xmin {
        (0, prev.seen - deleted)
    } else {
        (deleted - (prev.seen - read.kept), read.kept)
    };
    Some((
        u64::try_from(missed).unwrap_or(0),
        Cursor {
            snapshot: read.snapshot.clone(),
            xmin,
            xmax,
            horizon: read.horizon,
            trimmed: read.trimmed,
            seen: still_seen.max(0) + delivered,
        },
    ))
}

fn run(
    first: Reader,
    mut cursor: Cursor,
    connect: &dyn Fn() -> Result<Reader>,
    own: &str,
    trims: bool,
    stop: &AtomicBool,
    mut sink: impl FnMut(Notice),
) {
    let mut client = Some(first);
    let mut pause = Duration::from_millis(50);
    let mut interval = POLL_MIN;
    let mut trimmed_at = Instant::now();
    while !stop.load(Ordering::Relaxed) {
        let Some(current) = client.as_mut() else {
            match connect() {
                Ok(fresh) => client = Some(fresh),
                Err(err) => {
                    tracing::debug!(error = %err, "listener could not reconnect");
                    std::thread::sleep(pause);
                    pause = (pause * 2).min(Duration::from_secs(2));
                }
            }
            continue;
        };
        let outcome = read(current, &cursor);
        let read = match outcome {
            Ok(read) => read,
            Err(err) => {
                // A lost connection, or a read that keeps failing on a fresh one: either
                // way a new connection after a growing pause.
                tracing::debug!(error = %err, "listener could not read the outbox");
                client = None;
                std::thread::sleep(pause);
                pause = (pause * 2).min(Duration::from_secs(2));
                continue;
            }
        };
        pause = Duration::from_millis(50);
        match account(&cursor, &read) {
            Some((missed, next)) => {
                cursor = next;
                if missed > 0 {
                    sink(Notice::Lagged(missed));
                }
                for (origin, _, changes) in &read.rows {
                    for change in decode(origin, changes, own) {
                        sink(Notice::Change(change));
                    }
                }
            }
            None => match start(&mut current.client) {
                Ok(fresh) => {
                    cursor = fresh;
                    sink(Notice::Lagged(1));
                }
                Err(err) => {
                    tracing::debug!(error = %err, "listener could not start over");
                    client = None;
                    std::thread::sleep(pause);
                    continue;
                }
            },
        }
        if trims && trimmed_at.elapsed() >= TRIM_EVERY {
            trimmed_at = Instant::now();
            if let Err(err) = trim(&mut current.client) {
                tracing::debug!(error = %err, "listener could not trim the outbox");
            }
        }
        interval = if read.rows.is_empty() {
            (interval * 5 / 4).min(POLL_MAX)
        } else {
            POLL_MIN
        };
        std::thread::sleep(interval);
    }
}

/// The changes of one outbox row, in the order they were made (items this build cannot
/// read are skipped): `[[table, op, id, session], …]`.
fn decode(origin: &str, changes: &str, own: &str) -> Vec<Change> {
    let Ok(serde_json::Value::Array(items)) = serde_json::from_str::<serde_json::Value>(changes)
    else {
        return Vec::new();
    };
    items
        .iter()
        .filter_map(|item| {
            let [table, op, id, session] = item.as_array()?.as_slice() else {
                return None;
            };
            let op = match op.as_str()? {
                "insert" => ChangeOp::Insert,
                "update" => ChangeOp::Update,
                "delete" => ChangeOp::Delete,
                _ => return None,
            };
            Some(Change {
                table: table.as_str()?.to_owned(),
                op,
                id: id.as_str()?.to_owned(),
                session_id: session.as_str()?.to_owned(),
                own: !origin.is_empty() && origin == own,
                origin: origin.to_owned(),
            })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_rows_changes_decode_in_order_and_junk_is_skipped() {
        let changes = decode(
            "me",
            r#"[["messages","insert","msg_1","ses_1"],["parts","insert","prt_1","ses_1"],["sessions","update","ses_1","ses_1"],["files","truncate","f","ses_1"],"junk",["parts","delete"]]"#,
            "me",
        );
        let seen: Vec<(&str, ChangeOp, &str, bool)> = changes
            .iter()
            .map(|c| (c.table.as_str(), c.op, c.id.as_str(), c.own))
            .collect();
        assert_eq!(
            seen,
            [
                ("messages", ChangeOp::Insert, "msg_1", true),
                ("parts", ChangeOp::Insert, "prt_1", true),
                ("sessions", ChangeOp::Update, "ses_1", true),
            ]
        );
        assert!(changes.iter().all(|c| c.session_id == "ses_1"));
        let other = decode("them", r#"[["parts","delete","prt_2","ses_2"]]"#, "me");
        assert_eq!(
            other,
            [Change {
                table: "parts".into(),
                op: ChangeOp::Delete,
                id: "prt_2".into(),
                session_id: "ses_2".into(),
                origin: "them".into(),
                own: false,
            }]
        );
        // No origin is nobody's own.
        assert!(!decode("", r#"[["sessions","delete","s","s"]]"#, "")[0].own);
        assert_eq!(decode("me", "not json", "me"), []);
        assert_eq!(decode("me", r#"{"changes":[]}"#, "me"), []);
    }

    #[test]
    fn snapshots_bounds_parse() {
        assert_eq!(snapshot_bounds("10:20:10,14"), Some((10, 20)));
        assert_eq!(snapshot_bounds("7:7:"), Some((7, 7)));
        assert_eq!(snapshot_bounds("junk"), None);
    }

    fn cursor(snapshot: &str, horizon: u64, trimmed: i64, seen: i64) -> Cursor {
        let (xmin, xmax) = snapshot_bounds(snapshot).unwrap();
        Cursor {
            snapshot: snapshot.into(),
            xmin,
            xmax,
            horizon,
            trimmed,
            seen,
        }
    }

    fn read_of(snapshot: &str, horizon: u64, trimmed: i64, kept: i64, rows: &[i64]) -> Read {
        Read {
            snapshot: snapshot.into(),
            horizon,
            trimmed,
            kept,
            rows: rows
                .iter()
                .map(|&n| (String::new(), n, String::new()))
                .collect(),
        }
    }

    #[test]
    fn a_trim_below_the_cursor_loses_nothing() {
        // Seen 10 changes; the trim deleted 4 of them (all below xmin 20); 3 delivered now.
        let prev = cursor("20:25:20", 5, 100, 10);
        let (missed, next) = account(&prev, &read_of("26:30:", 18, 104, 0, &[1, 2])).unwrap();
        assert_eq!(missed, 0);
        assert_eq!(next, cursor("26:30:", 18, 104, 6 + 3));
    }

    #[test]
    fn a_trim_past_the_cursor_counts_exactly_what_was_never_read() {
        // Seen 10 changes (stored, below xmax 25); the trim went to 40 and deleted 16
        // changes: the 10 seen, 6 never read. Nothing of the seen is kept.
        let prev = cursor("20:25:20", 5, 100, 10);
        let (missed, next) = account(&prev, &read_of("41:45:", 40, 116, 0, &[2])).unwrap();
        assert_eq!(missed, 6);
        assert_eq!(next, cursor("41:45:", 40, 116, 2));
        // The trim stopped inside the cursor (at 22, past xmin 20): 7 of the 10 seen are
        // still stored, so of the 5 deleted 3 were seen and 2 lost.
        let (missed, next) = account(&prev, &read_of("30:31:", 22, 105, 7, &[])).unwrap();
        assert_eq!(missed, 2);
        assert_eq!(next.seen, 7);
    }

    #[test]
    fn a_store_that_went_backwards_is_not_accounted() {
        let prev = cursor("20:25:20", 5, 100, 10);
        assert!(account(&prev, &read_of("3:4:", 5, 100, 0, &[])).is_none());
        assert!(account(&prev, &read_of("30:31:", 4, 100, 0, &[])).is_none());
        assert!(account(&prev, &read_of("30:31:", 5, 90, 0, &[])).is_none());
        assert!(account(&prev, &read_of("junk", 5, 100, 0, &[])).is_none());
    }
}
