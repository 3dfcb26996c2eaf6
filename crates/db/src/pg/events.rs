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
//! committed while it was disconnected cannot be delivered; it reports
//! [`Notice::Lagged`] instead, which a broker passes on as `RecvError::Lagged` so
//! subscribers reload. PostgreSQL keeps no count of the notifications a closed connection
//! missed, so the count is not a count: it is always 1, meaning "changes may be missing
//! (none, one or many); reload what you show". An exact count would need an outbox table
//! numbered by a sequence, which this store deliberately does not keep (every commit
//! would write one more row, and someone would have to trim it).

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::thread::JoinHandle;
use std::time::Duration;

use postgres::fallible_iterator::FallibleIterator;

use crate::{Database, Error, Result};

/// The channel the schema's triggers notify.
pub const CHANNEL: &str = "scribe_events";

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
    /// The connection was lost and re-established: changes committed meanwhile were not
    /// delivered. Always `Lagged(1)`: "changes may be missing, reload" (PostgreSQL does
    /// not say how many; see the module docs). The `u64` matches the brokers'
    /// `report_missed(n)`.
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
            let location = pool.location().clone();
            let origin = pool.origin().to_owned();
            move || -> Result<postgres::Client> {
                let pool = super::pool::Pool::new(location.clone(), origin.clone(), 1, 0)?;
                let mut client = pool.connect()?;
                client.batch_execute(&format!("LISTEN {CHANNEL}"))?;
                Ok(client)
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

fn run(
    first: postgres::Client,
    connect: &dyn Fn() -> Result<postgres::Client>,
    own: &str,
    stop: &AtomicBool,
    mut sink: impl FnMut(Notice),
) {
    let mut client = Some(first);
    let mut pause = Duration::from_millis(50);
    while !stop.load(Ordering::Relaxed) {
        let Some(current) = client.as_mut() else {
            match connect() {
                Ok(fresh) => {
                    client = Some(fresh);
                    pause = Duration::from_millis(50);
                    sink(Notice::Lagged(1));
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
                            for change in decode(note.payload(), own) {
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

/// The changes of one notification, in the order they were made; nothing for anything
/// else on the channel. Since V14 a notification holds a transaction's changes:
/// `{"origin": "…", "changes": [[table, op, id, session], …]}`; a V8–V13 payload (one
/// change: `{"table", "op", "id", "session", "origin"}`) is read as well, so a listener
/// of this build hears a server whose schema it has not migrated yet.
fn decode(payload: &str, own: &str) -> Vec<Change> {
    let Ok(value) = serde_json::from_str::<serde_json::Value>(payload) else {
        return Vec::new();
    };
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
        let other = decode(
            r#"{"origin":"them","changes":[["parts","delete","prt_2","ses_2"]]}"#,
            "me",
        );
        assert_eq!(other.len(), 1);
        assert!(!other[0].own);
        assert_eq!(other[0].origin, "them");
    }

    #[test]
    fn payloads_decode_and_junk_is_skipped() {
        let change = decode(
            r#"{"table":"parts","op":"update","id":"prt_1","session":"ses_1","origin":"me"}"#,
            "me",
        );
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
        );
        assert_eq!(
            other.iter().map(|c| (c.op, c.own)).collect::<Vec<_>>(),
            [(ChangeOp::Delete, false)]
        );
        assert_eq!(decode("not json", "me"), []);
        assert_eq!(decode(r#"{"table":"x","op":"truncate"}"#, "me"), []);
    }
}
