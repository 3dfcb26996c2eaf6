//! Run leases (table `session_runs`): which process is answering in a session,
//! so crash recovery can tell a dead process's leftovers from another live
//! process's run, and two processes never run the same session at once.
//!
//! The runner takes a session's lease before it opens the session (recovery,
//! then the prompt) and holds it until the turn ends — also on an error, a
//! cancellation or a panic, since its guard releases it on drop. Nested
//! and concurrent runs of one process share the lease (it is counted per
//! process, the row is deleted when the last one ends).
//!
//! # Liveness
//!
//! A lease held by this process is always live. Another holder is dead when
//! - it ran on this host and its pid is gone (Linux: `/proc/<pid>` is absent or
//!   a zombie; other systems rely on the heartbeat), or its pid is this
//!   process's own (a previous process whose pid was reused), or
//! - its heartbeat is older than [`LeaseConfig::stale_after`] (default
//!   [`DEFAULT_STALE_AFTER`]).
//!
//! The heartbeat is renewed at the start of every step and by a background
//! thread every quarter of the window while the lease is held, so a long tool
//! or model call does not make a live run look stale unless the process stops
//! making progress (or its database writes keep failing) for a whole window.
//! Same-host liveness assumes processes sharing a database file on one host
//! also share a pid namespace (containers with distinct host names are told
//! apart by host, and then by the heartbeat). Heartbeats are written and judged
//! by the database's clock ([`scribe_db::Options::clock`]), so a test can age a
//! lease without sleeping.
//!
//! This crate owns the `session_runs` table: nothing else reads or writes it.

use std::collections::BTreeMap;
use std::sync::mpsc::{self, RecvTimeoutError, Sender};
use std::sync::{Arc, Mutex, OnceLock, PoisonError};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use rusqlite::OptionalExtension;
use scribe_db::queries::{self, SessionRunRow};
use scribe_db::{Database, Tx};

/// How long a heartbeat stays fresh by default.
pub const DEFAULT_STALE_AFTER: Duration = Duration::from_secs(120);

/// How leases are judged.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LeaseConfig {
    /// A lease whose heartbeat is older than this is dead, whoever holds it.
    pub stale_after: Duration,
}

impl Default for LeaseConfig {
    fn default() -> Self {
        LeaseConfig {
            stale_after: DEFAULT_STALE_AFTER,
        }
    }
}

impl LeaseConfig {
    fn stale_after_ms(&self) -> i64 {
        i64::try_from(self.stale_after.as_millis()).unwrap_or(i64::MAX)
    }

    /// How often the background heartbeat renews a held lease.
    fn heartbeat_interval(&self) -> Duration {
        (self.stale_after / 4).max(Duration::from_millis(10))
    }
}

/// A live lease held by another process.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LeaseHolder {
    /// The holder's process-unique owner id.
    pub owner: String,
    /// Its process id.
    pub pid: i64,
    /// Its host name.
    pub host: String,
    /// Its last heartbeat (ms since the epoch).
    pub heartbeat_at: i64,
}

impl From<SessionRunRow> for LeaseHolder {
    fn from(row: SessionRunRow) -> Self {
        LeaseHolder {
            owner: row.owner,
            pid: row.pid,
            host: row.host,
            heartbeat_at: row.heartbeat_at,
        }
    }
}

/// This host's name: `/proc/sys/kernel/hostname`, else `$HOSTNAME`, else `unknown`.
pub fn this_host() -> &'static str {
    static HOST: OnceLock<String> = OnceLock::new();
    HOST.get_or_init(|| {
        std::fs::read_to_string("/proc/sys/kernel/hostname")
            .ok()
            .map(|h| h.trim().to_owned())
            .filter(|h| !h.is_empty())
            .or_else(|| std::env::var("HOSTNAME").ok().filter(|h| !h.is_empty()))
            .unwrap_or_else(|| "unknown".to_owned())
    })
}

/// This process's owner id: pid, host and start time, so a reused pid is a
/// different owner.
pub fn this_owner() -> &'static str {
    static OWNER: OnceLock<String> = OnceLock::new();
    OWNER.get_or_init(|| {
        let nanos = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map(|d| d.as_nanos())
            .unwrap_or_default();
        format!("{}@{}#{nanos}", std::process::id(), this_host())
    })
}

fn this_pid() -> i64 {
    i64::from(std::process::id())
}

/// Whether process `pid` of this host exists; `None` where that cannot be told.
fn process_exists(pid: i64) -> Option<bool> {
    if cfg!(target_os = "linux") {
        if pid <= 0 {
            return Some(false);
        }
        // A killed child its parent has not reaped yet is a zombie: dead too.
        let stat = match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
            Ok(stat) => stat,
            Err(_) => return Some(false),
        };
        let state = stat
            .rsplit_once(')')
            .and_then(|(_, rest)| rest.trim_start().chars().next());
        Some(!matches!(state, Some('Z' | 'X')))
    } else {
        None
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Liveness {
    Own,
    Live,
    Dead,
}

fn liveness(row: &SessionRunRow, config: &LeaseConfig, now: i64) -> Liveness {
    if row.owner == this_owner() {
        return Liveness::Own;
    }
    if row.host == this_host() {
        if row.pid == this_pid() {
            return Liveness::Dead;
        }
        if process_exists(row.pid) == Some(false) {
            return Liveness::Dead;
        }
    }
    if now.saturating_sub(row.heartbeat_at) > config.stale_after_ms() {
        Liveness::Dead
    } else {
        Liveness::Live
    }
}

/// In a write transaction: the live holder of `session_id`'s lease other than
/// this process, if any; a dead lease is cleared.
pub(crate) fn live_holder_tx(
    tx: &Tx<'_>,
    session_id: &str,
    config: &LeaseConfig,
) -> scribe_db::Result<Option<LeaseHolder>> {
    let Some(row) = queries::get_session_run(tx.conn(), session_id).optional()? else {
        return Ok(None);
    };
    match liveness(&row, config, tx.now()) {
        Liveness::Own => Ok(None),
        Liveness::Live => Ok(Some(row.into())),
        Liveness::Dead => {
            queries::delete_session_run(
                tx.conn(),
                &queries::DeleteSessionRunParams {
                    session_id,
                    owner: &row.owner,
                },
            )?;
            Ok(None)
        }
    }
}

/// Why a lease could not be taken.
#[derive(Debug)]
pub(crate) enum AcquireError {
    /// Another live process holds it.
    Busy(LeaseHolder),
    /// The database failed.
    Db(scribe_db::Error),
}

/// A held lease per session in this process: how many runs share it and the
/// sender whose drop stops its heartbeat thread.
struct Held {
    count: usize,
    _stop: Option<Sender<()>>,
}

static HELD: Mutex<BTreeMap<String, Held>> = Mutex::new(BTreeMap::new());

/// Holds `session_id`'s lease for this process until dropped.
#[derive(Debug)]
pub(crate) struct LeaseGuard {
    session_id: String,
    db: Arc<Database>,
}

/// Takes (or, when this process already holds it, renews) `session_id`'s
/// lease; a live lease of another process refuses.
pub(crate) fn acquire(
    db: &Arc<Database>,
    session_id: &str,
    config: &LeaseConfig,
) -> Result<LeaseGuard, AcquireError> {
    // Held across the write so the count and the row agree within the process.
    let mut held = HELD.lock().unwrap_or_else(PoisonError::into_inner);
    let busy = db
        .write(|tx| -> scribe_db::Result<_> {
            if let Some(holder) = live_holder_tx(tx, session_id, config)? {
                return Ok(Some(holder));
            }
            let now = tx.now();
            let renewed = queries::renew_session_run(
                tx.conn(),
                &queries::RenewSessionRunParams {
                    heartbeat_at: now,
                    session_id,
                    owner: this_owner(),
                },
            )?;
            if renewed == 0 {
                queries::put_session_run(
                    tx.conn(),
                    &queries::PutSessionRunParams {
                        session_id,
                        owner: this_owner(),
                        pid: this_pid(),
                        host: this_host(),
                        started_at: now,
                        heartbeat_at: now,
                    },
                )?;
            }
            Ok(None)
        })
        .map_err(AcquireError::Db)?;
    if let Some(holder) = busy {
        return Err(AcquireError::Busy(holder));
    }
    match held.get_mut(session_id) {
        Some(entry) => entry.count += 1,
        None => {
            let stop = spawn_heartbeat(db.clone(), session_id.to_owned(), config);
            held.insert(
                session_id.to_owned(),
                Held {
                    count: 1,
                    _stop: stop,
                },
            );
        }
    }
    Ok(LeaseGuard {
        session_id: session_id.to_owned(),
        db: db.clone(),
    })
}

/// Renews the lease every quarter window until the returned sender drops.
/// Best effort: without a thread the step renewals still run.
fn spawn_heartbeat(
    db: Arc<Database>,
    session_id: String,
    config: &LeaseConfig,
) -> Option<Sender<()>> {
    let (stop, stopped) = mpsc::channel::<()>();
    let interval = config.heartbeat_interval();
    std::thread::Builder::new()
        .name("scribe-lease".to_owned())
        .spawn(move || {
            while let Err(RecvTimeoutError::Timeout) = stopped.recv_timeout(interval) {
                // A failed heartbeat only makes the lease look stale sooner.
                let _ = db.write(|tx| -> scribe_db::Result<_> {
                    Ok(queries::renew_session_run(
                        tx.conn(),
                        &queries::RenewSessionRunParams {
                            heartbeat_at: tx.now(),
                            session_id: &session_id,
                            owner: this_owner(),
                        },
                    )?)
                });
            }
        })
        .ok()
        .map(|_| stop)
}

impl Drop for LeaseGuard {
    fn drop(&mut self) {
        let mut held = HELD.lock().unwrap_or_else(PoisonError::into_inner);
        let Some(entry) = held.get_mut(&self.session_id) else {
            return;
        };
        entry.count = entry.count.saturating_sub(1);
        if entry.count > 0 {
            return;
        }
        // Dropping the entry stops its heartbeat thread.
        held.remove(&self.session_id);
        // Best effort: a lease left behind is dead once this process is gone
        // or its heartbeat is stale.
        let _ = self.db.write(|tx| -> scribe_db::Result<_> {
            Ok(queries::delete_session_run(
                tx.conn(),
                &queries::DeleteSessionRunParams {
                    session_id: &self.session_id,
                    owner: this_owner(),
                },
            )?)
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(owner: &str, pid: i64, host: &str, heartbeat_at: i64) -> SessionRunRow {
        SessionRunRow {
            session_id: "ses_1".into(),
            owner: owner.into(),
            pid,
            host: host.into(),
            started_at: heartbeat_at,
            heartbeat_at,
        }
    }

    #[test]
    fn liveness_rules() {
        let config = LeaseConfig {
            stale_after: Duration::from_secs(10),
        };
        let now = 1_000_000;
        let own = row(this_owner(), this_pid(), this_host(), 0);
        assert_eq!(liveness(&own, &config, now), Liveness::Own);
        let elsewhere = row("x", 1, "another-host", now - 5_000);
        assert_eq!(liveness(&elsewhere, &config, now), Liveness::Live);
        let stale = row("x", 1, "another-host", now - 10_001);
        assert_eq!(liveness(&stale, &config, now), Liveness::Dead);
        let reused_pid = row("old", this_pid(), this_host(), now);
        assert_eq!(liveness(&reused_pid, &config, now), Liveness::Dead);
        if cfg!(target_os = "linux") {
            let gone = row("x", i64::from(u32::MAX), this_host(), now);
            assert_eq!(liveness(&gone, &config, now), Liveness::Dead);
        }
    }
}
