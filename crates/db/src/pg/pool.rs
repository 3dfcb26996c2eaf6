//! A small connection pool: idle connections kept for reuse, a bound on how many are open
//! at once, and connections that broke (or whose state is unknown) closed instead of
//! reused. Small enough to read in one go, so no pool crate.
//!
//! The idle connections are a stack ordered by how many statements each has prepared:
//! [`Pool::get`] takes the top, the connection that has prepared the most (the most
//! recently returned of those that have prepared as many), and a connection that has
//! prepared fewer goes back below the ones that have prepared more. So a connection
//! opened for background work ([`Pool::get_spare`], the outbox trim), which prepares
//! none, never comes before the writers' own: before, it went back on top, and the next
//! write took it and prepared every statement it ran again.

use std::ops::{Deref, DerefMut};
use std::sync::{Condvar, Mutex, MutexGuard};
use std::time::Duration;

use postgres::config::{Host, SslMode};
use postgres::{Client, NoTls};

use crate::queries::postgres::Statements;
use postgres_native_tls::MakeTlsConnector;

use super::location::{Location, Verify, error_text};
use crate::{Error, Result};

/// How long [`Pool::get`] waits for a connection when all are in use.
const WAIT: Duration = Duration::from_secs(30);

/// Connections to one server, shared by the threads of a process.
pub(crate) struct Pool {
    location: Location,
    /// `None` when no connection to this location can use TLS (see [`needs_tls`]): building
    /// a connector loads the system's root certificates, most of a short command's CPU.
    tls: Option<MakeTlsConnector>,
    /// This process's name in the events it causes (`scribe.origin` on each connection).
    origin: String,
    /// A `search_path` every new connection is given, set once at open when the
    /// extensions Scribe uses live in a schema the location's path leaves out (see
    /// [`super::migrate::extension_path`]).
    search_path: std::sync::OnceLock<String>,
    state: Mutex<State>,
    freed: Condvar,
    max_open: usize,
    max_idle: usize,
}

struct State {
    /// Ordered by [`Prepared::len`], fewest first: the top (the end) is taken first.
    idle: Vec<(Client, Prepared)>,
    open: usize,
}

/// The statements a connection has prepared: those of read transactions and those of
/// write transactions apart. A write runs with `enable_seqscan` off (see
/// [`super::PgBackend::write`]), and PostgreSQL keeps a prepared statement's generic plan,
/// made under the settings of the transaction that made it, whatever the settings of the
/// transactions that use it later: shared, a plan made in a read could scan a whole table
/// in a write.
#[derive(Debug, Default)]
pub(crate) struct Prepared {
    pub(crate) read: Statements,
    pub(crate) write: Statements,
}

impl Prepared {
    /// How many statements are prepared, reads' and writes'.
    pub(crate) fn len(&self) -> usize {
        self.read.len() + self.write.len()
    }

    /// Whether none is.
    pub(crate) fn is_empty(&self) -> bool {
        self.read.is_empty() && self.write.is_empty()
    }
}

impl std::fmt::Debug for Pool {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let state = self.lock();
        f.debug_struct("Pool")
            .field("location", &self.location.shown)
            .field("open", &state.open)
            .field("idle", &state.idle.len())
            .field("max_open", &self.max_open)
            .finish_non_exhaustive()
    }
}

impl Pool {
    /// A pool for `location`; connects nothing yet. At most `max_open` connections are
    /// open at once and `max_idle` kept for reuse.
    pub(crate) fn new(
        location: Location,
        origin: String,
        max_open: usize,
        max_idle: usize,
    ) -> Result<Self> {
        let tls = if needs_tls(&location) {
            Some(tls_connector(&location)?)
        } else {
            None
        };
        Ok(Pool {
            location,
            tls,
            origin,
            search_path: std::sync::OnceLock::new(),
            state: Mutex::new(State {
                idle: Vec::new(),
                open: 0,
            }),
            freed: Condvar::new(),
            max_open: max_open.max(1),
            max_idle,
        })
    }

    /// Gives every connection opened from now on `search_path` (connections already open
    /// are the caller's to `SET`). Only the first call counts.
    pub(crate) fn set_search_path(&self, path: String) {
        let _ = self.search_path.set(path);
    }

    pub(crate) fn location(&self) -> &Location {
        &self.location
    }

    pub(crate) fn origin(&self) -> &str {
        &self.origin
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        self.state
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// An idle connection, or a new one; waits (up to 30 s) while `max_open` are in use.
    pub(crate) fn get(&self) -> Result<Pooled<'_>> {
        let mut state = self.lock();
        loop {
            if let Some((client, statements)) = state.idle.pop() {
                if client.is_closed() {
                    state.open -= 1;
                    continue;
                }
                return Ok(self.reuse(client, statements));
            }
            if state.open < self.max_open {
                state.open += 1;
                drop(state);
                return self.open_new();
            }
            let (next, timeout) = self
                .freed
                .wait_timeout(state, WAIT)
                .unwrap_or_else(|poisoned| poisoned.into_inner());
            state = next;
            if timeout.timed_out() && state.idle.is_empty() && state.open >= self.max_open {
                return Err(Error::Postgres {
                    code: None,
                    message: format!(
                        "all {} connections to {} stayed in use for {}s",
                        self.max_open,
                        self.location.target(),
                        WAIT.as_secs()
                    ),
                    source: None,
                });
            }
        }
    }

    /// A connection for work in the background (the outbox trim), chosen so that it takes
    /// none the writers would want next: an idle one that has prepared nothing, else a new
    /// one while fewer than `max_open` are open, else the idle one that has prepared the
    /// fewest statements, else (all in use) whichever comes free first, as [`Pool::get`].
    pub(crate) fn get_spare(&self) -> Result<Pooled<'_>> {
        let mut state = self.lock();
        while let Some((client, _)) = state.idle.first() {
            if !client.is_closed() {
                break;
            }
            state.idle.remove(0);
            state.open -= 1;
        }
        let coldest_is_empty = state
            .idle
            .first()
            .is_some_and(|(_, statements)| statements.is_empty());
        if !coldest_is_empty && state.open < self.max_open {
            state.open += 1;
            drop(state);
            return self.open_new();
        }
        if !state.idle.is_empty() {
            let (client, statements) = state.idle.remove(0);
            return Ok(self.reuse(client, statements));
        }
        drop(state);
        self.get()
    }

    /// `client`, taken from the idle list, as a [`Pooled`].
    fn reuse(&self, client: Client, statements: Prepared) -> Pooled<'_> {
        Pooled {
            pool: self,
            client: Some(client),
            statements,
            reused: true,
        }
    }

    /// A new connection, already counted in `open` (uncounted again if it fails).
    fn open_new(&self) -> Result<Pooled<'_>> {
        match self.connect() {
            Ok(client) => Ok(Pooled {
                pool: self,
                client: Some(client),
                statements: Prepared::default(),
                reused: false,
            }),
            Err(err) => {
                self.lock().open -= 1;
                self.freed.notify_one();
                Err(err)
            }
        }
    }

    /// A new connection outside the pool (the event listener's own).
    pub(crate) fn connect(&self) -> Result<Client> {
        let mut config = self.location.config.clone();
        let mut options = match config.get_options() {
            Some(existing) => format!("{existing} -c scribe.origin={}", self.origin),
            None => format!("-c scribe.origin={}", self.origin),
        };
        if let Some(path) = self.search_path.get() {
            // The server splits options at white space; a backslash escapes the next
            // character.
            options.push_str(" -c search_path=");
            for c in path.chars() {
                if c == '\\' || c.is_whitespace() {
                    options.push('\\');
                }
                options.push(c);
            }
        }
        config.options(&options);
        match &self.tls {
            Some(tls) => config.connect(tls.clone()),
            None => config.connect(NoTls),
        }
        .map_err(|err| connect_error(err, &self.location))
    }

    /// Returns `client` to the idle list, above every idle connection that has prepared
    /// as many statements or fewer and below those that have prepared more. With the list
    /// full, the connection that has prepared the fewest (this one or the bottom one) is
    /// closed instead.
    fn put_back(&self, client: Client, statements: Prepared) {
        let mut state = self.lock();
        let closed = if client.is_closed() || self.max_idle == 0 {
            Some(client)
        } else {
            let count = statements.len();
            let at = state.idle.partition_point(|(_, s)| s.len() <= count);
            if state.idle.len() < self.max_idle {
                state.idle.insert(at, (client, statements));
                None
            } else if at > 0 {
                // Full: the bottom one has prepared no more than this one; it goes.
                let (bottom, _) = state.idle.remove(0);
                state.idle.insert(at - 1, (client, statements));
                Some(bottom)
            } else {
                Some(client)
            }
        };
        if closed.is_some() {
            state.open -= 1;
        }
        drop(state);
        // Closing sends a Terminate message: not under the lock.
        drop(closed);
        self.freed.notify_one();
    }

    fn forget(&self) {
        self.lock().open -= 1;
        self.freed.notify_one();
    }
}

/// A connection borrowed from the [`Pool`]; goes back when dropped, unless
/// [`Pooled::discard`]ed.
pub(crate) struct Pooled<'p> {
    pool: &'p Pool,
    client: Option<Client>,
    /// The statements this connection has prepared (the generated queries'), kept with it
    /// in the idle list.
    statements: Prepared,
    /// Taken from the idle list (it may have died while idle) rather than just opened.
    reused: bool,
}

impl Pooled<'_> {
    /// Whether this connection was idle in the pool before (and so may have been closed
    /// by the server meanwhile).
    pub(crate) fn reused(&self) -> bool {
        self.reused
    }

    /// The connection and the statements prepared on it for read transactions (`write`
    /// false) or write transactions (see [`Prepared`]), for
    /// [`crate::queries::postgres::PgQueries::cached`].
    pub(crate) fn with_statements(&mut self, write: bool) -> (&mut Client, &mut Statements) {
        // Present until drop or discard, which consume the guard.
        let client = self.client.as_mut().unwrap_or_else(|| unreachable!());
        let statements = if write {
            &mut self.statements.write
        } else {
            &mut self.statements.read
        };
        (client, statements)
    }

    /// Closes the connection instead of returning it: its state is unknown (a failed
    /// rollback, a commit whose outcome is unknown).
    pub(crate) fn discard(mut self) {
        if self.client.take().is_some() {
            self.pool.forget();
        }
    }
}

impl Deref for Pooled<'_> {
    type Target = Client;

    fn deref(&self) -> &Client {
        // Present until drop or discard, which consume the guard.
        self.client.as_ref().unwrap_or_else(|| unreachable!())
    }
}

impl DerefMut for Pooled<'_> {
    fn deref_mut(&mut self) -> &mut Client {
        self.client.as_mut().unwrap_or_else(|| unreachable!())
    }
}

impl Drop for Pooled<'_> {
    fn drop(&mut self) {
        if let Some(client) = self.client.take() {
            let statements = std::mem::take(&mut self.statements);
            self.pool.put_back(client, statements);
        }
    }
}

impl std::fmt::Debug for Pooled<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Pooled")
            .field("reused", &self.reused)
            .finish_non_exhaustive()
    }
}

/// Whether a connection to `location` may use TLS: not with `sslmode=disable`, nor with
/// `allow`/`prefer` when every host is a Unix socket and no `sslrootcert` is given (the
/// server never speaks TLS on a Unix socket, so `prefer` ends in plain text either way).
/// `require` and `verify-*` keep their connector, and their errors, wherever they go.
fn needs_tls(location: &Location) -> bool {
    match location.config.get_ssl_mode() {
        SslMode::Disable => false,
        SslMode::Prefer => {
            location.root_cert.is_some()
                || !location
                    .config
                    .get_hosts()
                    .iter()
                    .all(|host| matches!(host, Host::Unix(_)))
        }
        _ => true,
    }
}

/// The TLS setup `location` asks for (see [`Verify`]).
fn tls_connector(location: &Location) -> Result<MakeTlsConnector> {
    let mut builder = native_tls::TlsConnector::builder();
    match location.verify {
        Verify::Off | Verify::Unchecked => {
            builder.danger_accept_invalid_certs(true);
            builder.danger_accept_invalid_hostnames(true);
        }
        Verify::Chain => {
            builder.danger_accept_invalid_hostnames(true);
        }
        Verify::Full => {}
    }
    if let Some(path) = location
        .root_cert
        .as_ref()
        .filter(|p| p.as_os_str() != "system")
    {
        // Named as a certificate, not as the database (`Error::Io` says "database path").
        let target = || format!("{} (sslrootcert {})", location.target(), path.display());
        let pem = std::fs::read(path).map_err(|err| Error::Tls {
            target: target(),
            source: Box::new(err),
        })?;
        let cert = native_tls::Certificate::from_pem(&pem).map_err(|err| Error::Tls {
            target: target(),
            source: Box::new(err),
        })?;
        builder.add_root_certificate(cert);
        builder.disable_built_in_roots(true);
    }
    let connector = builder.build().map_err(|err| Error::Tls {
        target: location.target(),
        source: Box::new(err),
    })?;
    Ok(MakeTlsConnector::new(connector))
}

/// Says which of the connection failures a person can act on it was.
fn connect_error(err: postgres::Error, location: &Location) -> Error {
    let target = location.target();
    if let Some(db) = err.as_db_error() {
        return match db.code().code() {
            // invalid_password, invalid_authorization_specification (no such role,
            // no pg_hba.conf entry).
            "28P01" | "28000" => Error::AuthFailed {
                user: location.user(),
                target,
                source: crate::error::driver_source(err),
            },
            "3D000" => Error::NoSuchDatabase {
                name: location.dbname(),
                target,
                source: crate::error::driver_source(err),
            },
            _ => Error::from(err),
        };
    }
    let text = error_text(&err);
    // Connected, then an answer the driver could not read ("bytes remaining on stream",
    // "unexpected message", "server does not support TLS" from a server answering `H`):
    // ask again what is there. A refused or timed-out connection is not asked twice.
    if !text.starts_with("error connecting to server")
        && !text.starts_with("timeout")
        && let Some((target, answered)) = not_postgres(location)
    {
        return Error::NotPostgres { target, answered };
    }
    if text.starts_with("error performing TLS handshake") {
        Error::Tls {
            target,
            source: Box::new(err),
        }
    } else if text.starts_with("authentication error") || text.contains("password missing") {
        Error::AuthFailed {
            user: location.user(),
            target,
            source: Box::new(err),
        }
    } else {
        Error::Unreachable {
            target,
            source: Box::new(err),
        }
    }
}

/// PostgreSQL's SSLRequest: length 8, then the code 80877103. A server answers `S` or
/// `N` (a very old one an `E`rror message), before it looks at anything else.
const SSL_REQUEST: [u8; 8] = [0, 0, 0, 8, 0x04, 0xd2, 0x16, 0x2f];

/// The first of `location`'s hosts where something other than PostgreSQL answers, and
/// what it answered (for [`Error::NotPostgres`]); `None` when each one answers as
/// PostgreSQL, cannot be reached, or says nothing in time (the driver's error stands).
fn not_postgres(location: &Location) -> Option<(String, String)> {
    let timeout = location
        .config
        .get_connect_timeout()
        .copied()
        .unwrap_or(Duration::from_secs(5))
        .min(Duration::from_secs(5));
    let ports = location.config.get_ports();
    location
        .config
        .get_hosts()
        .iter()
        .enumerate()
        .find_map(|(i, host)| {
            let port = ports
                .get(i)
                .or_else(|| ports.first())
                .copied()
                .unwrap_or(5432);
            match host {
                Host::Tcp(name) => {
                    let addrs = std::net::ToSocketAddrs::to_socket_addrs(&(name.as_str(), port));
                    let answered = addrs.ok()?.find_map(|addr| {
                        let stream = std::net::TcpStream::connect_timeout(&addr, timeout).ok()?;
                        stream.set_read_timeout(Some(timeout)).ok()?;
                        stream.set_write_timeout(Some(timeout)).ok()?;
                        greeting(stream)
                    })?;
                    Some((format!("{name}:{port}"), answered))
                }
                #[cfg(unix)]
                Host::Unix(dir) => {
                    let socket = dir.join(format!(".s.PGSQL.{port}"));
                    let stream = std::os::unix::net::UnixStream::connect(socket).ok()?;
                    stream.set_read_timeout(Some(timeout)).ok()?;
                    stream.set_write_timeout(Some(timeout)).ok()?;
                    let answered = greeting(stream)?;
                    Some((format!("{} (port {port})", dir.display()), answered))
                }
                #[cfg(not(unix))]
                Host::Unix(_) => None,
            }
        })
}

/// What a server answered to [`SSL_REQUEST`] when that is not PostgreSQL's answer: its
/// first line, quoted and cut, or that it closed the connection without a word. `None`
/// for PostgreSQL's answer, or when nothing could be sent or read.
fn greeting(mut stream: impl std::io::Read + std::io::Write) -> Option<String> {
    stream.write_all(&SSL_REQUEST).ok()?;
    let mut buf = [0_u8; 64];
    let read = stream.read(&mut buf).ok()?;
    let answer = buf.get(..read)?;
    match answer.first() {
        None => Some("it closed the connection without answering".to_owned()),
        Some(b'S' | b'N' | b'E') => None,
        Some(_) => {
            let text = String::from_utf8_lossy(answer);
            let line = text.lines().next().unwrap_or_default();
            let cut: String = line.chars().take(40).collect();
            Some(format!("it answered {cut:?}"))
        }
    }
}

#[cfg(test)]
mod tls_tests {
    use super::*;

    fn needs(text: &str) -> bool {
        needs_tls(&Location::parse(text).expect("a valid location"))
    }

    #[test]
    fn only_locations_that_can_use_tls_build_a_connector() {
        // TCP: `prefer` (the default) tries TLS.
        assert!(needs("postgres://u@db.example/d"));
        assert!(needs("host=localhost port=5432 user=u dbname=d"));
        // A Unix socket under `prefer`: the server never offers TLS there.
        assert!(!needs("host=/tmp/pg port=5432 user=u dbname=d"));
        assert!(!needs("postgres://u@%2Ftmp%2Fpg/d"));
        // `disable` anywhere.
        assert!(!needs("postgres://u@db.example/d?sslmode=disable"));
        // What the user asked for is kept: `require`, `verify-*` and a root certificate
        // keep their connector (and its errors), on a socket too.
        assert!(needs("host=/tmp/pg user=u dbname=d sslmode=require"));
        assert!(needs("host=/tmp/pg user=u dbname=d sslmode=verify-full"));
        assert!(needs(
            "host=/tmp/pg user=u dbname=d sslrootcert=/nowhere/ca.pem"
        ));
        // A socket and a TCP host: the TCP one may use TLS.
        assert!(needs("host=/tmp/pg,db.example user=u dbname=d"));
    }
}
