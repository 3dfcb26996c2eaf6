//! Changes committed by any process, on any host, as they commit (`postgres` feature).
//!
//! Version 8 of the PostgreSQL schema announces every committed insert, update and delete
//! of a session, message, part or file on the channel `scribe_events` (a row trigger, so
//! no writer can forget; NOTIFY is transactional, so only committed changes go out, in
//! commit order). Since version 14 a transaction's changes go out together, as one
//! notification (several past ~6,000 bytes of them) sent when it commits, instead of one
//! per row; the listener hands each change to the sink on its own, as before, in the
//! order they were made. [`crate::Database::listen`] starts one thread with its own connection
//! that turns those notifications into [`Notice`]s for a sink of the caller's: typically
//! a closure publishing on a `scribe_pubsub::Broker`, decoding the [`Change`] into the
//! service's own event (reloading the row) on the way.
//!
//! The listener reconnects by itself (with a growing pause, up to two seconds). What was
//! committed while it was disconnected cannot be delivered (PostgreSQL keeps nothing for
//! a closed connection); it reports [`Notice::Lagged`]`(n)` instead, which a broker passes
//! on as `RecvError::Lagged(n)` so subscribers reload. Since schema version 16 every
//! announced change carries a number from the sequence `scribe_change_seq`, taken when its
//! notification is sent (at commit), and the listener reads the sequence's last value
//! each time it starts listening. After a reconnect, `n` is how many numbers were handed
//! out between the two starts that the lost connection did not deliver:
//!
//! - every change committed while the listener was away is counted (its number was taken
//!   at its commit, after the lost connection started listening and before the new one
//!   did), with one exception: a transaction of more than ~60 changes sends its earlier
//!   notifications before it commits, and those, numbered before the lost connection
//!   started but committed after it died, are not counted;
//! - `n` may count changes that were not missed: those of a transaction committing at the
//!   very moment of the reconnect (numbered before the new connection read the sequence,
//!   delivered right after the `Lagged`), and numbers spent by a transaction that failed
//!   after its notification was built (a serialization failure at commit, or the rollback
//!   of a transaction of more than ~60 changes).
//!
//! So `n` is exact when no transaction was committing at either start and none of more
//! than ~60 changes spanned them, and otherwise an upper bound by those changes. When
//! nothing was missed (`n` = 0) no `Lagged` is sent. On a schema before version 16 (no
//! numbers), or when the sequence went backwards (a restored database), the count is
//! unknown and `n` is 1, as before: "changes may be missing; reload".

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::thread::JoinHandle;
use std::time::Duration;

use postgres::fallible_iterator::FallibleIterator;

use crate::{Database, Error, Result};

/// The channel the schema's triggers notify.
pub const CHANNEL: &str = "scribe_events";

/// The `application_name` of the listener's connection (what `pg_stat_activity` shows),
/// unless the location sets one of its own (the pool's connections are `scribe`).
pub const APPLICATION_NAME: &str = "scribe-listen";

/// The sequence's last number handed out (0 before the first), or `None` when there is no
/// sequence (a schema before version 16) or it cannot be read.
const LAST_NUMBER: &str =
    "SELECT CASE WHEN is_called THEN last_value ELSE 0 END FROM scribe_change_seq";

/// How long the listener waits for a notification before checking whether it should
/// stop.
const POLL: Duration = Duration::from_millis(100);

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

/// One committed row change, as the schema's trigger announced it.
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
    /// A committed change, in commit order.
    Change(Change),
    /// The connection was lost and re-established, and `n` changes committed meanwhile
    /// were not delivered: exact, or an upper bound when writers were committing as the
    /// listener (re)connected, or 1 ("some may be missing") on a schema before version 16;
    /// see the module docs for exactly what is counted. Never sent with 0. The `u64`
    /// matches the brokers' `report_missed(n)`.
    Lagged(u64),
}

/// A running listener thread; dropping it (or [`Listener::stop`]) stops the thread
/// within about 100 ms.
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
    /// Starts a thread that listens for the changes committed to this PostgreSQL
    /// database by every process (this one included: see [`Change::own`]) and calls
    /// `sink` with each, in commit order, and with [`Notice::Lagged`] after it had to
    /// reconnect. The first connection is made before this returns, so a change
    /// committed after it is delivered; an unreachable server is an error here, later
    /// losses are retried in the thread.
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
            move || -> Result<Listening> {
                let pool = super::pool::Pool::new(location.clone(), origin.clone(), 1, 0)?;
                let mut client = pool.connect()?;
                client.batch_execute(&format!("LISTEN {CHANNEL}"))?;
                // Read after LISTEN took effect (it did when its statement returned): a
                // change numbered later is delivered on this connection.
                let base = client
                    .query_one(LAST_NUMBER, &[])
                    .and_then(|row| row.try_get::<_, i64>(0))
                    .ok();
                Ok(Listening { client, base })
            }
        };
        let first = connect()?;
        let own = pg.origin().to_owned();
        let stop = Arc::new(AtomicBool::new(false));
        let thread = std::thread::Builder::new()
            .name("scribe-listen".to_owned())
            .spawn({
                let stop = Arc::clone(&stop);
                move || run(first, &connect, &own, &stop, sink)
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

/// A listening connection and the change sequence's last number when it started
/// listening (`None`: unknown).
struct Listening {
    client: postgres::Client,
    base: Option<i64>,
}

fn run(
    first: Listening,
    connect: &dyn Fn() -> Result<Listening>,
    own: &str,
    stop: &AtomicBool,
    mut sink: impl FnMut(Notice),
) {
    let mut base = first.base;
    let mut client = Some(first.client);
    // Changes numbered above `base` this connection delivered.
    let mut received: u64 = 0;
    let mut pause = Duration::from_millis(50);
    while !stop.load(Ordering::Relaxed) {
        let Some(current) = client.as_mut() else {
            match connect() {
                Ok(fresh) => {
                    let n = missed(base, received, fresh.base);
                    client = Some(fresh.client);
                    base = fresh.base;
                    received = 0;
                    pause = Duration::from_millis(50);
                    if n > 0 {
                        sink(Notice::Lagged(n));
                    }
                }
                Err(err) => {
                    tracing::debug!(error = %err, "listener could not reconnect");
                    std::thread::sleep(pause);
                    pause = (pause * 2).min(Duration::from_secs(2));
                }
            }
            continue;
        };
        let mut lost = false;
        {
            let mut notifications = current.notifications();
            let mut iter = notifications.timeout_iter(POLL);
            loop {
                match iter.next() {
                    Ok(Some(note)) => {
                        if note.channel() == CHANNEL {
                            let (changes, numbers) = decode(note.payload(), own);
                            if let Some(base) = base {
                                received += numbers.iter().filter(|&&n| n > base).count() as u64;
                            }
                            for change in changes {
                                sink(Notice::Change(change));
                            }
                        }
                    }
                    Err(err) => {
                        tracing::debug!(error = %err, "listener lost its connection");
                        lost = true;
                        break;
                    }
                    Ok(None) => break,
                }
            }
        }
        if lost || current.is_closed() {
            client = None;
        }
    }
}

/// How many changes a reconnect missed: the numbers handed out after the lost connection
/// started listening (`before`) up to when the new one did (`now`), less those the lost
/// connection delivered (`received`); 1 ("unknown") without both numbers or when the
/// sequence went backwards.
fn missed(before: Option<i64>, received: u64, now: Option<i64>) -> u64 {
    let (Some(before), Some(now)) = (before, now) else {
        return 1;
    };
    match now.checked_sub(before).map(u64::try_from) {
        Some(Ok(handed_out)) => handed_out.saturating_sub(received),
        _ => 1,
    }
}

/// The changes of one notification, in the order they were made (nothing for anything
/// else on the channel), and the numbers it carries (one per change it announces, those
/// this build cannot read included; none before schema V16). Since V14 a notification
/// holds a transaction's changes: `{"origin": "…", "seq": [n, …], "changes": [[table, op,
/// id, session], …]}` (`seq` since V16); a V8–V13 payload (one change: `{"table", "op",
/// "id", "session", "origin"}`) is read as well, so a listener of this build hears a server
/// whose schema it has not migrated yet.
fn decode(payload: &str, own: &str) -> (Vec<Change>, Vec<i64>) {
    let Ok(value) = serde_json::from_str::<serde_json::Value>(payload) else {
        return (Vec::new(), Vec::new());
    };
    let numbers = value
        .get("seq")
        .and_then(serde_json::Value::as_array)
        .map(|seq| seq.iter().filter_map(serde_json::Value::as_i64).collect())
        .unwrap_or_default();
    (changes(&value, own), numbers)
}

fn changes(value: &serde_json::Value, own: &str) -> Vec<Change> {
    let origin = value
        .get("origin")
        .and_then(serde_json::Value::as_str)
        .unwrap_or_default();
    let change = |table: &str, op: &str, id: &str, session: &str| {
        let op = match op {
            "insert" => ChangeOp::Insert,
            "update" => ChangeOp::Update,
            "delete" => ChangeOp::Delete,
            _ => return None,
        };
        Some(Change {
            table: table.to_owned(),
            op,
            id: id.to_owned(),
            session_id: session.to_owned(),
            own: !origin.is_empty() && origin == own,
            origin: origin.to_owned(),
        })
    };
    if let Some(changes) = value.get("changes").and_then(serde_json::Value::as_array) {
        return changes
            .iter()
            .filter_map(|item| match item.as_array()?.as_slice() {
                [table, op, id, session] => change(
                    table.as_str()?,
                    op.as_str()?,
                    id.as_str()?,
                    session.as_str()?,
                ),
                _ => None,
            })
            .collect();
    }
    let text = |key: &str| value.get(key).and_then(serde_json::Value::as_str);
    (|| change(text("table")?, text("op")?, text("id")?, text("session")?))()
        .into_iter()
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_transactions_changes_decode_in_order() {
        let changes = decode(
            r#"{"origin":"me","changes":[["messages","insert","msg_1","ses_1"],["parts","insert","prt_1","ses_1"],["sessions","update","ses_1","ses_1"],["files","truncate","f","ses_1"],"junk"]}"#,
            "me",
        )
        .0;
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
        let other = decode(
            r#"{"origin":"them","changes":[["parts","delete","prt_2","ses_2"]]}"#,
            "me",
        )
        .0;
        assert_eq!(other.len(), 1);
        assert!(!other[0].own);
        assert_eq!(other[0].origin, "them");
    }

    #[test]
    fn payloads_decode_and_junk_is_skipped() {
        let change = decode(
            r#"{"table":"parts","op":"update","id":"prt_1","session":"ses_1","origin":"me"}"#,
            "me",
        )
        .0;
        assert_eq!(
            change,
            [Change {
                table: "parts".into(),
                op: ChangeOp::Update,
                id: "prt_1".into(),
                session_id: "ses_1".into(),
                origin: "me".into(),
                own: true,
            }]
        );
        let other = decode(
            r#"{"table":"sessions","op":"delete","id":"s","session":"s","origin":""}"#,
            "",
        )
        .0;
        assert_eq!(
            other.iter().map(|c| (c.op, c.own)).collect::<Vec<_>>(),
            [(ChangeOp::Delete, false)]
        );
        assert_eq!(decode("not json", "me"), (vec![], vec![]));
        assert_eq!(
            decode(r#"{"table":"x","op":"truncate"}"#, "me"),
            (vec![], vec![])
        );
    }

    #[test]
    fn numbers_come_with_every_announced_change_even_unreadable_ones() {
        let (changes, numbers) = decode(
            r#"{"origin":"o","seq":[7,8,9],"changes":[["parts","insert","p","s"],["files","truncate","f","s"],["sessions","update","s","s"]]}"#,
            "me",
        );
        assert_eq!(changes.len(), 2);
        assert_eq!(numbers, [7, 8, 9]);
        // Before V16: no numbers.
        let (_, none) = decode(
            r#"{"origin":"o","changes":[["parts","insert","p","s"]]}"#,
            "me",
        );
        assert_eq!(none, Vec::<i64>::new());
    }

    #[test]
    fn missed_counts_numbers_handed_out_between_starts_less_those_delivered() {
        // 5 numbers handed out between the starts, 2 of them delivered.
        assert_eq!(missed(Some(10), 2, Some(15)), 3);
        // Everything delivered: nothing missed (no Lagged is sent).
        assert_eq!(missed(Some(10), 5, Some(15)), 0);
        assert_eq!(missed(Some(0), 0, Some(0)), 0);
        // Unknown: a schema without numbers on either side, or a sequence gone backwards.
        assert_eq!(missed(None, 0, Some(15)), 1);
        assert_eq!(missed(Some(10), 0, None), 1);
        assert_eq!(missed(Some(10), 0, Some(3)), 1);
    }
}
