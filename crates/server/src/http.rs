//! The HTTP side: binding, the accept loop, access rules, static files and the event
//! stream. Synchronous, like the services: one short-lived thread per connection, one
//! request per connection (`Connection: close`), requests parsed by `httparse`.
//!
//! Why not keep-alive or a thread pool: the viewer runs next to its user, where a new
//! loopback connection costs microseconds, and a connection that carries exactly one request
//! never leaves a thread waiting on an idle socket. (tiny_http, tried first, parks a pool
//! thread on every idle keep-alive connection, and its pool can leave a just-accepted
//! connection unread while all of its threads wait on such sockets: Chromium's page loads
//! hung on a script that way.) Connections are capped at [`MAX_CONNECTIONS`], event
//! streams at [`MAX_STREAMS`], and every read and write has a timeout.
//!
//! Access rules, checked before anything else:
//! - only `GET` and `HEAD` (the server is read-only; anything else is 405);
//! - with a token, every request must carry it (`Authorization: Bearer T`, the
//!   `scribe_token` cookie, or `?token=T`, which a page load trades for the cookie);
//! - without one (loopback only), the `Host` header must name a loopback host, so a web
//!   page elsewhere cannot read the API through DNS rebinding.

use std::io::{Read, Write};
use std::net::{IpAddr, Shutdown, SocketAddr, TcpListener, TcpStream, ToSocketAddrs};
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::thread;
use std::time::Duration;

use crate::api::{self, Params};
use crate::assets;
use crate::error::{ApiError, ServeError};
use crate::json::ErrorBody;
use crate::live::{self, Live};
use crate::store::Store;

/// Connections served at once; more are answered 503 at once.
pub const MAX_CONNECTIONS: usize = 256;
/// The stack of a connection thread. Reading a part and writing it as JSON recurse once
/// per level of its nesting, which serde_json lets reach 128: 256 KiB overflowed (in a
/// debug build; 512 KiB was enough) on a tool input stored 125 levels deep, and a stack
/// overflow aborts the whole server. Only the pages a thread touches are committed.
const CONNECTION_STACK: usize = 2 * 1024 * 1024;
/// Event streams open at once; more are answered 503.
pub const MAX_STREAMS: usize = 64;
/// The largest request head (request line and headers) read.
const MAX_HEAD: usize = 16 * 1024;
/// The most headers a request may have.
const MAX_HEADERS: usize = 64;
/// How long a client may take to send its request head (in all, not per read).
const READ_TIMEOUT: Duration = Duration::from_secs(10);
/// How long a write may block on a client that does not read.
const WRITE_TIMEOUT: Duration = Duration::from_secs(30);
/// A comment line on an idle event stream this often, so a closed client is noticed.
const KEEPALIVE: Duration = Duration::from_secs(15);
/// How often an idle event stream checks whether its client hung up, so that a closed
/// stream gives its slot (of [`MAX_STREAMS`]) back within about this long.
const HANGUP_CHECK: Duration = Duration::from_millis(500);
/// The cookie a page load with `?token=` sets.
const COOKIE: &str = "scribe_token";

/// The policy of every response: only this server's own scripts, styles and data.
const CSP: &str = "default-src 'none'; script-src 'self'; style-src 'self'; \
                   img-src 'self' data:; connect-src 'self'; font-src 'self'; \
                   base-uri 'none'; form-action 'self'; frame-ancestors 'none'";

/// How to serve.
#[derive(Debug, Clone)]
pub struct Config {
    /// The database, opened read-only: a file, or a PostgreSQL location (`postgres://…`
    /// or a libpq keyword string).
    pub db: PathBuf,
    /// `host:port` to listen on; port 0 picks a free one.
    pub addr: String,
    /// Required on every request when set; required to listen beyond loopback.
    pub token: Option<String>,
}

/// What the connection threads share.
#[derive(Debug)]
pub(crate) struct Shared {
    pub(crate) store: Store,
    pub(crate) live: Live,
    token: Option<String>,
    stop: AtomicBool,
    /// Connections being served ([`Slot`]s of [`MAX_CONNECTIONS`]).
    connections: Arc<AtomicUsize>,
    /// Event streams open ([`Slot`]s of [`MAX_STREAMS`]).
    streams: Arc<AtomicUsize>,
}

/// One of at most `limit` places counted by a shared counter, given back when dropped:
/// when its holder returns, and also when its thread panics and unwinds (a slot given
/// back by hand after the work would be lost to a panic, and once every slot was lost
/// every request would be answered 503).
#[derive(Debug)]
struct Slot {
    count: Arc<AtomicUsize>,
}

impl Slot {
    /// A slot of `count`'s `limit`, or `None` when all are taken (the count is then left
    /// as it was: it never exceeds `limit`).
    fn take(count: &Arc<AtomicUsize>, limit: usize) -> Option<Slot> {
        count
            .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |taken| {
                (taken < limit).then_some(taken + 1)
            })
            .ok()
            .map(|_| Slot {
                count: Arc::clone(count),
            })
    }
}

impl Drop for Slot {
    fn drop(&mut self) {
        self.count.fetch_sub(1, Ordering::SeqCst);
    }
}

/// A bound server, ready to [`run`](Server::run).
#[derive(Debug)]
pub struct Server {
    listener: TcpListener,
    shared: Arc<Shared>,
    addr: SocketAddr,
}

/// Stops a running [`Server`] from another thread.
#[derive(Debug, Clone)]
pub struct StopHandle {
    shared: Arc<Shared>,
    addr: SocketAddr,
}

impl StopHandle {
    /// Asks the server to stop: [`Server::run`] returns soon after, and open event
    /// streams end.
    pub fn stop(&self) {
        self.shared.stop.store(true, Ordering::SeqCst);
        self.shared.live.wake_all();
        // Wake the accept loop with a connection of our own.
        let _ = TcpStream::connect_timeout(&self.addr, Duration::from_secs(1));
    }
}

fn valid_token(token: &str) -> bool {
    (1..=256).contains(&token.len())
        && token
            .bytes()
            .all(|b| b.is_ascii_graphic() && !matches!(b, b';' | b',' | b'"' | b'\\'))
}

impl Server {
    /// Checks the configuration, opens the database read-only and binds the address.
    pub fn bind(config: Config) -> Result<Server, ServeError> {
        if let Some(token) = &config.token
            && !valid_token(token)
        {
            return Err(ServeError::BadToken);
        }
        let bad = |reason: &str| ServeError::BadAddress {
            addr: config.addr.clone(),
            reason: reason.to_owned(),
        };
        let addrs: Vec<SocketAddr> = config
            .addr
            .to_socket_addrs()
            .map_err(|err| bad(&err.to_string()))?
            .collect();
        let Some(first) = addrs.first().copied() else {
            return Err(bad("it names no address"));
        };
        if config.token.is_none() && !addrs.iter().all(|a| a.ip().is_loopback()) {
            return Err(ServeError::TokenRequired {
                addr: config.addr.clone(),
            });
        }
        let store = Store::open(&config.db)?;
        let listener = TcpListener::bind(&addrs[..]).map_err(|source| {
            if source.kind() == std::io::ErrorKind::AddrInUse {
                let next = first.port().checked_add(1).unwrap_or(7777);
                ServeError::AddrInUse {
                    addr: config.addr.clone(),
                    suggestion: SocketAddr::new(first.ip(), next).to_string(),
                }
            } else {
                ServeError::Bind {
                    addr: config.addr.clone(),
                    source,
                }
            }
        })?;
        let addr = listener.local_addr().map_err(ServeError::Server)?;
        Ok(Server {
            listener,
            addr,
            shared: Arc::new(Shared {
                store,
                live: Live::default(),
                token: config.token,
                stop: AtomicBool::new(false),
                connections: Arc::new(AtomicUsize::new(0)),
                streams: Arc::new(AtomicUsize::new(0)),
            }),
        })
    }

    /// The address it listens on (with the real port when 0 was asked for).
    pub fn local_addr(&self) -> SocketAddr {
        self.addr
    }

    /// Where the database is, for people: the file, or the PostgreSQL location with its
    /// password hidden.
    pub fn location(&self) -> String {
        self.shared.store.location()
    }

    /// The URL of the viewer's front page.
    pub fn url(&self) -> String {
        format!("http://{}/", self.addr)
    }

    /// The URL to open the viewer with: [`Server::url`], plus `?token=` when the server
    /// requires one, encoded as the server decodes a query (`+`, `&`, `#`, `%` in a token
    /// would otherwise change or cut it).
    pub fn url_with_token(&self) -> String {
        match &self.shared.token {
            Some(token) => {
                let query = form_urlencoded::Serializer::new(String::new())
                    .append_pair("token", token)
                    .finish();
                format!("{}?{query}", self.url())
            }
            None => self.url(),
        }
    }

    /// A handle that stops [`run`](Server::run) from another thread.
    pub fn stop_handle(&self) -> StopHandle {
        StopHandle {
            shared: Arc::clone(&self.shared),
            addr: self.addr,
        }
    }

    /// Answers requests until stopped.
    pub fn run(self) -> Result<(), ServeError> {
        let watcher = self.shared.store.watcher()?;
        let watch = {
            let shared = Arc::clone(&self.shared);
            thread::Builder::new()
                .name("scribe-serve-watch".into())
                .spawn(move || live::watch(&shared.store, watcher, &shared.live, &shared.stop))
                .map_err(ServeError::Server)?
        };
        for stream in self.listener.incoming() {
            if self.shared.stop.load(Ordering::SeqCst) {
                break;
            }
            let Ok(stream) = stream else {
                // Out of file descriptors or the like: that connection is lost; pause so
                // a persistent condition does not spin.
                thread::sleep(Duration::from_millis(20));
                continue;
            };
            let Some(slot) = Slot::take(&self.shared.connections, MAX_CONNECTIONS) else {
                let mut stream = stream;
                let _ = stream.set_write_timeout(Some(Duration::from_secs(1)));
                let busy = ApiError::Unavailable("the server is busy; try again".into());
                let _ = write_response(&mut stream, &json_error(&busy), false);
                continue;
            };
            let shared = Arc::clone(&self.shared);
            // The slot is the thread's: given back when it ends, however it ends, or
            // with the closure when the thread cannot be started.
            let _ = thread::Builder::new()
                .name("scribe-serve-conn".into())
                .stack_size(CONNECTION_STACK)
                .spawn(move || {
                    let _slot = slot;
                    serve_connection(&shared, stream);
                });
        }
        self.shared.stop.store(true, Ordering::SeqCst);
        self.shared.live.wake_all();
        let _ = watch.join();
        Ok(())
    }
}

/// A parsed request.
#[derive(Debug)]
struct Request {
    method: String,
    /// The minor version: `HTTP/1.0` or `HTTP/1.1`.
    version: u8,
    /// The request target: path and query.
    url: String,
    headers: Vec<(String, String)>,
    /// Bytes of the body read with the head.
    body_read: usize,
    /// When the request must have arrived, body included.
    deadline: std::time::Instant,
}

impl Request {
    fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(n, _)| n.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }

    fn path(&self) -> &str {
        path_of(&self.url)
    }

    fn query(&self) -> &str {
        self.url.split_once('?').map_or("", |(_, q)| q)
    }

    fn is_head(&self) -> bool {
        self.method == "HEAD"
    }

    /// Reads a target in absolute form (`GET http://host:port/path`, as a client talking
    /// to a proxy sends), which a server must accept (RFC 9112 §3.2.2): the path is the
    /// target's, and its authority replaces any `Host` header.
    fn absolute_form(&mut self) {
        let Some(rest) = ["http://", "https://"].iter().find_map(|scheme| {
            self.url
                .get(..scheme.len())
                .filter(|s| s.eq_ignore_ascii_case(scheme))
                .map(|_| self.url[scheme.len()..].to_owned())
        }) else {
            return;
        };
        let split = rest.find(['/', '?']).unwrap_or(rest.len());
        let (authority, target) = rest.split_at(split);
        self.url = if target.starts_with('/') {
            target.to_owned()
        } else {
            format!("/{target}")
        };
        self.headers
            .retain(|(n, _)| !n.eq_ignore_ascii_case("Host"));
        self.headers.push(("Host".into(), authority.to_owned()));
    }
}

/// A response with its whole body.
#[derive(Debug)]
struct Response {
    status: u16,
    headers: Vec<(&'static str, String)>,
    body: Vec<u8>,
}

impl Response {
    fn new(status: u16, content_type: &str, body: Vec<u8>) -> Response {
        Response {
            status,
            headers: vec![("Content-Type", content_type.to_owned())],
            body,
        }
    }

    fn with(mut self, name: &'static str, value: impl Into<String>) -> Response {
        self.headers.push((name, value.into()));
        self
    }
}

fn reason(status: u16) -> &'static str {
    match status {
        200 => "OK",
        303 => "See Other",
        304 => "Not Modified",
        400 => "Bad Request",
        401 => "Unauthorized",
        403 => "Forbidden",
        404 => "Not Found",
        405 => "Method Not Allowed",
        408 => "Request Timeout",
        413 => "Payload Too Large",
        414 => "URI Too Long",
        431 => "Request Header Fields Too Large",
        500 => "Internal Server Error",
        503 => "Service Unavailable",
        _ => "",
    }
}

fn write_head(out: &mut impl Write, status: u16, headers: &[(&str, &str)]) -> std::io::Result<()> {
    let mut head = format!("HTTP/1.1 {status} {}\r\n", reason(status));
    for (name, value) in [
        ("Server", "scribe"),
        ("Connection", "close"),
        ("Content-Security-Policy", CSP),
        ("X-Content-Type-Options", "nosniff"),
        ("Referrer-Policy", "no-referrer"),
        ("X-Frame-Options", "DENY"),
    ]
    .iter()
    .chain(headers)
    {
        head.push_str(name);
        head.push_str(": ");
        head.push_str(value);
        head.push_str("\r\n");
    }
    head.push_str("\r\n");
    out.write_all(head.as_bytes())
}

fn write_response(
    out: &mut TcpStream,
    response: &Response,
    head_only: bool,
) -> std::io::Result<()> {
    let length = response.body.len().to_string();
    let mut headers: Vec<(&str, &str)> = response
        .headers
        .iter()
        .map(|(n, v)| (*n, v.as_str()))
        .collect();
    // A 304 has no body, and a length it gives must be the 200's: it gives none.
    if response.status != 304 {
        headers.push(("Content-Length", &length));
    }
    write_head(out, response.status, &headers)?;
    if !head_only && response.status != 304 {
        out.write_all(&response.body)?;
    }
    out.flush()
}

/// Reads one request head; `Err` carries the response to send instead.
fn read_request(stream: &mut TcpStream) -> Result<Option<Request>, Response> {
    let mut buf = Vec::with_capacity(2048);
    let mut chunk = [0u8; 4096];
    let deadline = std::time::Instant::now() + READ_TIMEOUT;
    loop {
        let mut headers = [httparse::EMPTY_HEADER; MAX_HEADERS];
        let mut parsed = httparse::Request::new(&mut headers);
        match parsed.parse(&buf) {
            Ok(httparse::Status::Complete(head_len)) => {
                let mut request = Request {
                    method: parsed.method.unwrap_or("").to_owned(),
                    version: parsed.version.unwrap_or(1),
                    url: parsed.path.unwrap_or("/").to_owned(),
                    headers: parsed
                        .headers
                        .iter()
                        .map(|h| {
                            (
                                h.name.to_owned(),
                                String::from_utf8_lossy(h.value).into_owned(),
                            )
                        })
                        .collect(),
                    body_read: buf.len() - head_len,
                    deadline,
                };
                request.absolute_form();
                // A length that is not one number leaves no telling where the request
                // ends (RFC 9112 §6.3): refused rather than guessed.
                let mut lengths = request
                    .headers
                    .iter()
                    .filter(|(n, _)| n.eq_ignore_ascii_case("Content-Length"))
                    .flat_map(|(_, v)| v.split(','))
                    .map(str::trim);
                let first = lengths.next();
                if first.is_some_and(|l| l.is_empty() || !l.bytes().all(|b| b.is_ascii_digit()))
                    || lengths.any(|l| Some(l) != first)
                {
                    return Err(early_error(&buf, 400, "invalid Content-Length"));
                }
                return Ok(Some(request));
            }
            Ok(httparse::Status::Partial) => {}
            Err(httparse::Error::TooManyHeaders) => {
                return Err(early_error(&buf, 431, "too many headers"));
            }
            Err(err) => return Err(early_error(&buf, 400, &format!("bad request: {err}"))),
        }
        if buf.len() >= MAX_HEAD {
            // The request line alone too long is the address's fault (414), not the
            // headers' (431).
            if !buf.contains(&b'\n') {
                return Err(early_error(
                    &buf,
                    414,
                    "the request's address is too long (at most 16 KiB)",
                ));
            }
            return Err(early_error(&buf, 431, "request head too large"));
        }
        // A client trickling its head byte by byte is answered 408 at the deadline; one
        // that sent nothing at all (a browser's spare connection) is closed quietly.
        let timed_out = || {
            if buf.is_empty() {
                Ok(None)
            } else {
                Err(early_error(
                    &buf,
                    408,
                    "the request head took too long to arrive",
                ))
            }
        };
        let Some(left) = deadline.checked_duration_since(std::time::Instant::now()) else {
            return timed_out();
        };
        let _ = stream.set_read_timeout(Some(left.max(Duration::from_millis(1))));
        match stream.read(&mut chunk) {
            Ok(0) if buf.is_empty() => return Ok(None),
            Ok(0) => return Err(early_error(&buf, 400, "incomplete request")),
            Ok(n) => buf.extend_from_slice(&chunk[..n]),
            Err(err)
                if matches!(
                    err.kind(),
                    std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
                ) =>
            {
                return timed_out();
            }
            // The connection failed: nobody to answer.
            Err(_) => return Ok(None),
        }
    }
}

/// The answer to a request head that could not be read whole: `{"error": …}` when its
/// target is under `/api/` (as every API failure is), a line of text otherwise.
fn early_error(head: &[u8], status: u16, text: &str) -> Response {
    let target = head.split(|&b| b == b' ').nth(1).unwrap_or_default();
    if target.starts_with(b"/api/") {
        let body = serde_json::to_vec(&ErrorBody {
            error: text.to_owned(),
        })
        .unwrap_or_default();
        json_response(status, body)
    } else {
        text_response(status, &format!("{text}\n"))
    }
}

/// Reads and drops a small request body once the answer is sent, so that closing the
/// socket after a 405 does not reset the connection before the client read the answer;
/// by the head's deadline, so a body trickled a byte at a time does not hold the
/// connection longer than a head may. (Answering first: a client that waits to hear
/// before sending its body, `Expect: 100-continue`, hears at once.)
fn drain_body(stream: &mut TcpStream, request: &Request) {
    let (already, deadline) = (request.body_read, request.deadline);
    let length = request
        .header("Content-Length")
        .and_then(|v| v.trim().parse::<usize>().ok())
        .unwrap_or(0);
    let mut left = length.saturating_sub(already).min(1024 * 1024);
    let mut sink = [0u8; 4096];
    while left > 0 {
        let Some(wait) = deadline.checked_duration_since(std::time::Instant::now()) else {
            break;
        };
        let _ = stream.set_read_timeout(Some(wait.max(Duration::from_millis(1))));
        match stream.read(&mut sink[..left.min(4096)]) {
            Ok(0) | Err(_) => break,
            Ok(n) => left -= n,
        }
    }
}

fn serve_connection(shared: &Shared, mut stream: TcpStream) {
    let _ = stream.set_read_timeout(Some(READ_TIMEOUT));
    let _ = stream.set_write_timeout(Some(WRITE_TIMEOUT));
    let _ = stream.set_nodelay(true);
    let request = match read_request(&mut stream) {
        Ok(Some(request)) => request,
        Ok(None) => return,
        Err(response) => {
            let _ = write_response(&mut stream, &response, false);
            return;
        }
    };
    if shared.stop.load(Ordering::SeqCst) {
        return;
    }
    let response = match admit(shared, &request) {
        Err(response) => response,
        Ok(()) if request.path() == "/api/events" => {
            if let Err(err) = api::events_query(request.query()) {
                let _ = write_response(&mut stream, &json_error(&err), request.is_head());
                let _ = stream.shutdown(Shutdown::Write);
                drain_body(&mut stream, &request);
                return;
            }
            stream_events(shared, &mut stream, request.is_head());
            let _ = stream.shutdown(Shutdown::Both);
            return;
        }
        Ok(()) => handle(shared, &request),
    };
    let _ = write_response(&mut stream, &response, request.is_head());
    let _ = stream.shutdown(Shutdown::Write);
    drain_body(&mut stream, &request);
}

fn path_of(url: &str) -> &str {
    url.split_once('?').map_or(url, |(path, _)| path)
}

fn json_response(status: u16, body: Vec<u8>) -> Response {
    Response::new(status, "application/json; charset=utf-8", body).with("Cache-Control", "no-store")
}

fn json_error(err: &ApiError) -> Response {
    let body = serde_json::to_vec(&ErrorBody {
        error: err.to_string(),
    })
    .unwrap_or_default();
    let response = json_response(err.status(), body);
    if err.status() == 503 {
        // Busy for a moment (connections and streams end all the time): when to try again.
        return response.with("Retry-After", "1");
    }
    response
}

fn text_response(status: u16, text: &str) -> Response {
    Response::new(
        status,
        "text/plain; charset=utf-8",
        text.as_bytes().to_vec(),
    )
    .with("Cache-Control", "no-store")
}

/// Whether `host` (a `Host` header: `name[:port]`) names this machine's loopback.
fn loopback_host(host: &str) -> bool {
    let name = if let Some(rest) = host.strip_prefix('[') {
        rest.split_once(']').map_or(rest, |(ip, _)| ip)
    } else {
        host.rsplit_once(':').map_or(host, |(name, _)| name)
    };
    name.eq_ignore_ascii_case("localhost")
        || name.parse::<IpAddr>().is_ok_and(|ip| ip.is_loopback())
}

/// Equal without an early exit, so the time taken does not tell how much of a guess was
/// right.
fn same(a: &str, b: &str) -> bool {
    a.len() == b.len()
        && a.bytes()
            .zip(b.bytes())
            .fold(0u8, |acc, (x, y)| acc | (x ^ y))
            == 0
}

fn cookie_token(request: &Request) -> Option<&str> {
    request
        .header("Cookie")?
        .split(';')
        .filter_map(|pair| pair.trim().split_once('='))
        .find(|(name, _)| *name == COOKIE)
        .map(|(_, value)| value)
}

/// Applies the access rules: `Err` is the answer when the request may not go on.
fn admit(shared: &Shared, request: &Request) -> Result<(), Response> {
    // Under /api/ every failure is `{"error": …}`, as the README's API reference says;
    // elsewhere it is a line of text.
    let api = request.path().starts_with("/api/");
    let refusal = |err: ApiError| {
        if api {
            json_error(&err)
        } else {
            text_response(err.status(), &format!("{err}\n"))
        }
    };
    // One Host, and on HTTP/1.1 exactly one (RFC 9112 §3.2): with two, this server and a
    // proxy in front of it could each read a different one.
    let hosts = request
        .headers
        .iter()
        .filter(|(n, _)| n.eq_ignore_ascii_case("Host"))
        .count();
    if hosts > 1 || (hosts == 0 && request.version >= 1) {
        return Err(refusal(ApiError::BadRequest(
            "a request must carry exactly one Host header".into(),
        )));
    }
    if !matches!(request.method.as_str(), "GET" | "HEAD") {
        return Err(refusal(ApiError::MethodNotAllowed(
            "scribe serve is read-only: only GET and HEAD are allowed".into(),
        ))
        .with("Allow", "GET, HEAD"));
    }
    let refuse = |err: ApiError| Err(refusal(err));
    let Some(token) = &shared.token else {
        let host = request.header("Host").unwrap_or("");
        if loopback_host(host) {
            return Ok(());
        }
        return refuse(ApiError::Forbidden(format!(
            "host {host:?} is not this machine's loopback; open the viewer at localhost"
        )));
    };
    // The scheme is case-insensitive (RFC 9110 §11.1): `bearer T` is as good as `Bearer T`.
    let bearer = request
        .header("Authorization")
        .and_then(|v| v.trim_start().split_once(' '))
        .filter(|(scheme, _)| scheme.eq_ignore_ascii_case("Bearer"))
        .map(|(_, t)| t.trim());
    if bearer
        .or(cookie_token(request))
        .is_some_and(|t| same(t, token))
    {
        return Ok(());
    }
    let query = request.query();
    let from_query = form_urlencoded::parse(query.as_bytes())
        .find(|(name, _)| name == "token")
        .map(|(_, value)| value.into_owned());
    // The URL `scribe serve` prints carries the token as it is, and a base64 token (what
    // `openssl rand -base64` makes) holds `+`, which decoding turns into a space: the
    // value as sent counts too.
    let as_sent = query
        .split('&')
        .find_map(|pair| pair.strip_prefix("token="));
    if !from_query.is_some_and(|t| same(&t, token)) && !as_sent.is_some_and(|t| same(t, token)) {
        // A 401 names the scheme that would do (RFC 9110 §15.5.2).
        return Err(refusal(ApiError::Unauthorized(
            "this server needs its token: open the URL `scribe serve` printed, or send \
             Authorization: Bearer TOKEN"
                .into(),
        ))
        .with("WWW-Authenticate", "Bearer realm=\"scribe\""));
    }
    if api {
        return Ok(());
    }
    // A page opened with ?token=: keep the token in a cookie, not in the address bar.
    let rest: Vec<(String, String)> = form_urlencoded::parse(query.as_bytes())
        .filter(|(name, _)| name != "token")
        .map(|(n, v)| (n.into_owned(), v.into_owned()))
        .collect();
    // One leading slash: `//host/…` (or `/\host/…`, which browsers read alike) in a
    // Location is another site.
    let path = format!("/{}", request.path().trim_start_matches(['/', '\\']));
    let location = if rest.is_empty() {
        path
    } else {
        let query: String = form_urlencoded::Serializer::new(String::new())
            .extend_pairs(rest)
            .finish();
        format!("{path}?{query}")
    };
    Err(Response::new(303, "text/plain; charset=utf-8", Vec::new())
        .with("Location", location)
        .with(
            "Set-Cookie",
            format!("{COOKIE}={token}; Path=/; HttpOnly; SameSite=Strict"),
        )
        .with("Cache-Control", "no-store"))
}

/// Answers one admitted request (not an event stream).
fn handle(shared: &Shared, request: &Request) -> Response {
    let path = request.path();
    if let Some(route) = path.strip_prefix("/api/") {
        return match Params::parse(request.query())
            .and_then(|params| api::answer(shared, route, &params))
        {
            Ok(api::Reply::Json(body)) => json_response(200, body),
            Ok(api::Reply::Markdown { body, filename }) => {
                Response::new(200, "text/markdown; charset=utf-8", body)
                    .with("Cache-Control", "no-store")
                    .with(
                        "Content-Disposition",
                        format!("attachment; filename=\"{filename}\""),
                    )
            }
            Err(err) => json_error(&err),
        };
    }
    if let Some(name) = path.strip_prefix("/assets/") {
        return match assets::find(name) {
            // The headers a 200 would have (a cache updates its copy's from them), no body.
            Some((asset, tag))
                if request
                    .header("If-None-Match")
                    .is_some_and(|v| matches_tag(v, tag)) =>
            {
                Response::new(304, asset.mime, Vec::new())
                    .with("ETag", tag)
                    .with("Cache-Control", "no-cache")
            }
            Some((asset, tag)) => Response::new(200, asset.mime, asset.body.to_vec())
                .with("ETag", tag)
                .with("Cache-Control", "no-cache"),
            None => text_response(404, "no such file\n"),
        };
    }
    if is_page(path) {
        return Response::new(200, "text/html; charset=utf-8", assets::index().to_vec())
            .with("Cache-Control", "no-cache");
    }
    if path == "/favicon.ico"
        && let Some((asset, _)) = assets::find("favicon.svg")
    {
        return Response::new(200, asset.mime, asset.body.to_vec());
    }
    text_response(404, "no such page\n")
}

/// Whether an `If-None-Match` value (`*`, or a list of tags, weak or strong) names `tag`:
/// the weak comparison RFC 9110 asks for.
fn matches_tag(header: &str, tag: &str) -> bool {
    header.split(',').map(str::trim).any(|candidate| {
        candidate == "*" || candidate.strip_prefix("W/").unwrap_or(candidate) == tag
    })
}

/// The routes the page itself handles: `/`, `/search`, `/usage`, `/s/<session id>`.
fn is_page(path: &str) -> bool {
    matches!(path, "/" | "/search" | "/usage")
        || path
            .strip_prefix("/s/")
            .is_some_and(|id| !id.is_empty() && !id.contains('/'))
}

/// `GET /api/events`: a `change` event whenever the database changes, until the client
/// goes away or the server stops.
fn stream_events(shared: &Shared, out: &mut TcpStream, head_only: bool) {
    let Some(_slot) = Slot::take(&shared.streams, MAX_STREAMS) else {
        let busy = ApiError::Unavailable(format!(
            "too many event streams open (at most {MAX_STREAMS})"
        ));
        let _ = write_response(out, &json_error(&busy), head_only);
        return;
    };
    let _ = write_events(shared, out, head_only);
}

fn write_events(shared: &Shared, out: &mut TcpStream, head_only: bool) -> std::io::Result<()> {
    write_head(
        out,
        200,
        &[
            ("Content-Type", "text/event-stream; charset=utf-8"),
            ("Cache-Control", "no-store"),
        ],
    )?;
    if head_only {
        return out.flush();
    }
    let mut seen = shared.live.current();
    write!(
        out,
        "retry: 1000\nevent: hello\ndata: {{\"version\":{seen}}}\n\n"
    )?;
    out.flush()?;
    let mut quiet = Duration::ZERO;
    while !shared.stop.load(Ordering::SeqCst) {
        let now = shared.live.wait(seen, HANGUP_CHECK);
        if shared.stop.load(Ordering::SeqCst) {
            break;
        }
        if now != seen {
            seen = now;
            quiet = Duration::ZERO;
            write!(out, "event: change\ndata: {{\"version\":{now}}}\n\n")?;
        } else if hung_up(out) {
            // The client closed: give the slot back now, not at the next failed write.
            break;
        } else {
            quiet += HANGUP_CHECK;
            if quiet < KEEPALIVE {
                continue;
            }
            quiet = Duration::ZERO;
            out.write_all(b": keep-alive\n\n")?;
        }
        out.flush()?;
    }
    Ok(())
}

/// Whether the client of an event stream has closed its side (or the connection failed).
/// It sends nothing after its request, so anything it does send is read and dropped (a
/// bounded amount per check). A client that closes only its sending side ends its stream
/// too: the two cannot be told apart without writing.
fn hung_up(stream: &mut TcpStream) -> bool {
    if stream.set_nonblocking(true).is_err() {
        return false;
    }
    let mut sink = [0u8; 4096];
    let mut gone = false;
    for _ in 0..16 {
        match stream.read(&mut sink) {
            Ok(0) => gone = true,
            Ok(_) => continue,
            Err(err) if err.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(err) => gone = err.kind() != std::io::ErrorKind::WouldBlock,
        }
        break;
    }
    let _ = stream.set_nonblocking(false);
    gone
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A slot is given back when its thread panics (it was given back by hand after the
    /// work, which a panic skipped: each panicking connection lost a slot for good), and
    /// when its holder returns; a full count refuses a slot and is left as it was.
    #[test]
    fn a_slot_is_given_back_when_its_thread_panics() {
        let count = Arc::new(AtomicUsize::new(0));
        let slot = Slot::take(&count, 1).unwrap();
        assert_eq!(count.load(Ordering::SeqCst), 1);
        assert!(Slot::take(&count, 1).is_none(), "the one slot is taken");
        assert_eq!(count.load(Ordering::SeqCst), 1);
        let worker = thread::spawn(move || {
            let _slot = slot;
            panic!("a connection thread panics");
        });
        assert!(worker.join().is_err(), "the thread panicked");
        assert_eq!(count.load(Ordering::SeqCst), 0);
        let again = Slot::take(&count, 1).expect("the panicked thread's slot is free again");
        drop(again);
        assert_eq!(count.load(Ordering::SeqCst), 0);
        let slots: Vec<_> = (0..3).map(|_| Slot::take(&count, 3).unwrap()).collect();
        assert!(Slot::take(&count, 3).is_none());
        drop(slots);
        assert_eq!(count.load(Ordering::SeqCst), 0);
    }

    #[test]
    fn loopback_hosts() {
        for host in [
            "localhost",
            "localhost:7777",
            "127.0.0.1:80",
            "127.1.2.3",
            "[::1]:7777",
            "[::1]",
            "LOCALHOST:1",
        ] {
            assert!(loopback_host(host), "{host}");
        }
        for host in [
            "",
            "example.com",
            "evil.localhost.example:7777",
            "10.0.0.1:7777",
            "[::2]:1",
            "0.0.0.0:7777",
        ] {
            assert!(!loopback_host(host), "{host}");
        }
    }

    #[test]
    fn tokens() {
        assert!(valid_token("s3cret-token_1"));
        assert!(!valid_token(""));
        assert!(!valid_token("has space"));
        assert!(!valid_token("semi;colon"));
        assert!(!valid_token(&"x".repeat(257)));
        assert!(same("abc", "abc"));
        assert!(!same("abc", "abd"));
        assert!(!same("abc", "abcd"));
    }

    #[test]
    fn pages() {
        assert!(is_page("/"));
        assert!(is_page("/s/ses_1"));
        assert!(is_page("/search"));
        assert!(!is_page("/s/"));
        assert!(!is_page("/s/a/b"));
        assert!(!is_page("/nope"));
    }
}
