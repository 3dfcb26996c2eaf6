//! The HTTP side: binding, the request loop, workers, access rules, static files and the
//! event stream. Synchronous, like the services: tiny_http parses requests, a few worker
//! threads answer them, and each `/api/events` stream gets a thread of its own.
//!
//! Access rules, checked before anything else:
//! - only `GET` and `HEAD` (the server is read-only; anything else is 405);
//! - with a token, every request must carry it (`Authorization: Bearer T`, the
//!   `scribe_token` cookie, or `?token=T`, which a page load trades for the cookie);
//! - without one (loopback only), the `Host` header must name a loopback host, so a web
//!   page elsewhere cannot read the API through DNS rebinding.

use std::io::Write;
use std::net::{IpAddr, SocketAddr, TcpListener, ToSocketAddrs};
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::mpsc;
use std::sync::{Arc, Mutex, PoisonError};
use std::thread;
use std::time::Duration;

use tiny_http::{Header, Method, Request, Response};

use crate::api::{self, Params};
use crate::assets;
use crate::error::{ApiError, ServeError};
use crate::json::ErrorBody;
use crate::live::{self, Live};
use crate::store::Store;

/// Threads answering requests (event streams have their own).
const WORKERS: usize = 4;
/// Event streams open at once; more are refused with 503.
const MAX_STREAMS: usize = 64;
/// A comment line on an idle event stream this often, so a closed client is noticed.
const KEEPALIVE: Duration = Duration::from_secs(15);
/// The cookie a page load with `?token=` sets.
const COOKIE: &str = "scribe_token";

/// The policy of every response: only this server's own scripts, styles and data.
const CSP: &str = "default-src 'none'; script-src 'self'; style-src 'self'; \
                   img-src 'self' data:; connect-src 'self'; font-src 'self'; \
                   base-uri 'none'; form-action 'self'; frame-ancestors 'none'";

/// How to serve.
#[derive(Debug, Clone)]
pub struct Config {
    /// The database file (opened read-only).
    pub db: PathBuf,
    /// `host:port` to listen on; port 0 picks a free one.
    pub addr: String,
    /// Required on every request when set; required to listen beyond loopback.
    pub token: Option<String>,
}

/// What the request threads share.
#[derive(Debug)]
pub(crate) struct Shared {
    pub(crate) store: Store,
    pub(crate) live: Live,
    token: Option<String>,
    stop: AtomicBool,
    streams: AtomicUsize,
}

/// A bound server, ready to [`run`](Server::run).
pub struct Server {
    http: Arc<tiny_http::Server>,
    shared: Arc<Shared>,
    addr: SocketAddr,
}

/// Stops a running [`Server`] from another thread.
#[derive(Clone)]
pub struct StopHandle {
    http: Arc<tiny_http::Server>,
    shared: Arc<Shared>,
}

impl std::fmt::Debug for Server {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Server")
            .field("addr", &self.addr)
            .field("db", &self.shared.store.path())
            .finish_non_exhaustive()
    }
}

impl std::fmt::Debug for StopHandle {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("StopHandle").finish_non_exhaustive()
    }
}

impl StopHandle {
    /// Asks the server to stop: [`Server::run`] returns soon after.
    pub fn stop(&self) {
        self.shared.stop.store(true, Ordering::SeqCst);
        self.shared.live.wake_all();
        self.http.unblock();
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
        if addrs.is_empty() {
            return Err(bad("it names no address"));
        }
        if config.token.is_none() && !addrs.iter().all(|a| a.ip().is_loopback()) {
            return Err(ServeError::TokenRequired {
                addr: config.addr.clone(),
            });
        }
        let store = Store::open(&config.db)?;
        let listener = TcpListener::bind(&addrs[..]).map_err(|source| {
            if source.kind() == std::io::ErrorKind::AddrInUse {
                let next = addrs[0].port().checked_add(1).unwrap_or(7777);
                ServeError::AddrInUse {
                    addr: config.addr.clone(),
                    suggestion: SocketAddr::new(addrs[0].ip(), next).to_string(),
                }
            } else {
                ServeError::Bind {
                    addr: config.addr.clone(),
                    source,
                }
            }
        })?;
        let addr = listener.local_addr().map_err(ServeError::Server)?;
        let http = tiny_http::Server::from_listener(listener, None)
            .map_err(|err| ServeError::Server(std::io::Error::other(err.to_string())))?;
        Ok(Server {
            http: Arc::new(http),
            addr,
            shared: Arc::new(Shared {
                store,
                live: Live::default(),
                token: config.token,
                stop: AtomicBool::new(false),
                streams: AtomicUsize::new(0),
            }),
        })
    }

    /// The address it listens on (with the real port when 0 was asked for).
    pub fn local_addr(&self) -> SocketAddr {
        self.addr
    }

    /// The URL of the viewer's front page.
    pub fn url(&self) -> String {
        format!("http://{}/", self.addr)
    }

    /// A handle that stops [`run`](Server::run) from another thread.
    pub fn stop_handle(&self) -> StopHandle {
        StopHandle {
            http: Arc::clone(&self.http),
            shared: Arc::clone(&self.shared),
        }
    }

    /// Answers requests until stopped.
    pub fn run(self) -> Result<(), ServeError> {
        let watcher = self.shared.store.watcher()?;
        let watch = {
            let shared = Arc::clone(&self.shared);
            thread::Builder::new()
                .name("scribe-serve-watch".into())
                .spawn(move || {
                    let mut last = watcher.version().ok();
                    while !shared.stop.load(Ordering::SeqCst) {
                        thread::sleep(live::POLL);
                        // A failed poll (a file briefly locked) is tried again next time.
                        if let Ok(version) = watcher.version()
                            && last != Some(version)
                        {
                            last = Some(version);
                            shared.live.bump();
                        }
                    }
                })
                .map_err(ServeError::Server)?
        };
        let (jobs, queue) = mpsc::channel::<Request>();
        let queue = Arc::new(Mutex::new(queue));
        let mut workers = Vec::with_capacity(WORKERS);
        for i in 0..WORKERS {
            let queue = Arc::clone(&queue);
            let shared = Arc::clone(&self.shared);
            let worker = thread::Builder::new()
                .name(format!("scribe-serve-{i}"))
                .spawn(move || {
                    loop {
                        let next = queue.lock().unwrap_or_else(PoisonError::into_inner).recv();
                        match next {
                            Ok(request) => handle(&shared, request),
                            Err(_) => break,
                        }
                    }
                })
                .map_err(ServeError::Server)?;
            workers.push(worker);
        }
        let outcome = loop {
            let request = match self.http.recv() {
                Ok(request) => request,
                Err(_) if self.shared.stop.load(Ordering::SeqCst) => break Ok(()),
                // A failed accept (e.g. too many open files) loses that connection only.
                Err(_) => continue,
            };
            if self.shared.stop.load(Ordering::SeqCst) {
                break Ok(());
            }
            if is_event_stream(&request) {
                self.start_stream(request);
            } else if let Err(mpsc::SendError(request)) = jobs.send(request) {
                // Every worker is gone, which only a bug could cause: answer and stop.
                let _ = request.respond(json_error(&ApiError::Internal(
                    "the server's workers stopped".into(),
                )));
                break Err(ServeError::Server(std::io::Error::other(
                    "the server's workers stopped",
                )));
            }
        };
        self.shared.stop.store(true, Ordering::SeqCst);
        self.shared.live.wake_all();
        drop(jobs);
        for worker in workers {
            let _ = worker.join();
        }
        let _ = watch.join();
        outcome
    }

    fn start_stream(&self, request: Request) {
        let shared = Arc::clone(&self.shared);
        if shared.streams.fetch_add(1, Ordering::SeqCst) >= MAX_STREAMS {
            shared.streams.fetch_sub(1, Ordering::SeqCst);
            let _ = request.respond(json_error(&ApiError::Unavailable(format!(
                "too many event streams open (at most {MAX_STREAMS})"
            ))));
            return;
        }
        let spawned = thread::Builder::new()
            .name("scribe-serve-events".into())
            .spawn(move || {
                if let Some(request) = admit(&shared, request) {
                    stream_events(&shared, request);
                }
                shared.streams.fetch_sub(1, Ordering::SeqCst);
            });
        if spawned.is_err() {
            self.shared.streams.fetch_sub(1, Ordering::SeqCst);
        }
    }
}

fn is_event_stream(request: &Request) -> bool {
    path_of(request.url()) == "/api/events"
}

fn path_of(url: &str) -> &str {
    url.split_once('?').map_or(url, |(path, _)| path)
}

fn header(name: &str, value: &str) -> Option<Header> {
    Header::from_bytes(name.as_bytes(), value.as_bytes()).ok()
}

fn with_headers<R: std::io::Read>(
    mut response: Response<R>,
    headers: &[(&str, &str)],
) -> Response<R> {
    for (name, value) in [
        ("Content-Security-Policy", CSP),
        ("X-Content-Type-Options", "nosniff"),
        ("Referrer-Policy", "no-referrer"),
        ("X-Frame-Options", "DENY"),
    ]
    .iter()
    .chain(headers)
    {
        if let Some(h) = header(name, value) {
            response.add_header(h);
        }
    }
    response
}

type Body = Response<std::io::Cursor<Vec<u8>>>;

fn json_response(status: u16, body: Vec<u8>) -> Body {
    with_headers(
        Response::from_data(body).with_status_code(status),
        &[
            ("Content-Type", "application/json; charset=utf-8"),
            ("Cache-Control", "no-store"),
        ],
    )
}

fn json_error(err: &ApiError) -> Body {
    let body = serde_json::to_vec(&ErrorBody {
        error: err.to_string(),
    })
    .unwrap_or_default();
    json_response(err.status(), body)
}

fn text_response(status: u16, text: &str) -> Body {
    with_headers(
        Response::from_data(text.as_bytes().to_vec()).with_status_code(status),
        &[
            ("Content-Type", "text/plain; charset=utf-8"),
            ("Cache-Control", "no-store"),
        ],
    )
}

fn request_header<'a>(request: &'a Request, name: &'static str) -> Option<&'a str> {
    request
        .headers()
        .iter()
        .find(|h| h.field.equiv(name))
        .map(|h| h.value.as_str())
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
    request_header(request, "Cookie")?
        .split(';')
        .filter_map(|pair| pair.trim().split_once('='))
        .find(|(name, _)| *name == COOKIE)
        .map(|(_, value)| value)
}

/// Applies the access rules; answers and returns `None` when the request may not go on.
fn admit(shared: &Shared, request: Request) -> Option<Request> {
    if !matches!(request.method(), Method::Get | Method::Head) {
        let response = with_headers(
            text_response(
                405,
                "scribe serve is read-only: only GET and HEAD are allowed\n",
            ),
            &[("Allow", "GET, HEAD")],
        );
        let _ = request.respond(response);
        return None;
    }
    let api = path_of(request.url()).starts_with("/api/");
    let refuse = |request: Request, err: ApiError| {
        let response = if api {
            json_error(&err)
        } else {
            text_response(err.status(), &format!("{err}\n"))
        };
        let _ = request.respond(response);
        None
    };
    let Some(token) = &shared.token else {
        let host = request_header(&request, "Host").unwrap_or("").to_owned();
        if loopback_host(&host) {
            return Some(request);
        }
        return refuse(
            request,
            ApiError::Forbidden(format!(
                "host {host:?} is not this machine's loopback; open the viewer at localhost"
            )),
        );
    };
    let bearer = request_header(&request, "Authorization")
        .and_then(|v| v.strip_prefix("Bearer "))
        .map(str::trim);
    if bearer
        .or(cookie_token(&request))
        .is_some_and(|t| same(t, token))
    {
        return Some(request);
    }
    let query = request.url().split_once('?').map_or("", |(_, q)| q);
    let from_query = form_urlencoded::parse(query.as_bytes())
        .find(|(name, _)| name == "token")
        .map(|(_, value)| value.into_owned());
    if !from_query.is_some_and(|t| same(&t, token)) {
        return refuse(
            request,
            ApiError::Unauthorized(
                "this server needs its token: open the URL `scribe serve` printed, or send \
                 Authorization: Bearer TOKEN"
                    .into(),
            ),
        );
    }
    if api {
        return Some(request);
    }
    // A page opened with ?token=: keep the token in a cookie, not in the address bar.
    let path = path_of(request.url()).to_owned();
    let rest: Vec<(String, String)> = form_urlencoded::parse(query.as_bytes())
        .filter(|(name, _)| name != "token")
        .map(|(n, v)| (n.into_owned(), v.into_owned()))
        .collect();
    let location = if rest.is_empty() {
        path
    } else {
        let query: String = form_urlencoded::Serializer::new(String::new())
            .extend_pairs(rest)
            .finish();
        format!("{path}?{query}")
    };
    let cookie = format!("{COOKIE}={token}; Path=/; HttpOnly; SameSite=Strict");
    let response = with_headers(
        Response::from_data(Vec::new()).with_status_code(303),
        &[
            ("Location", location.as_str()),
            ("Set-Cookie", cookie.as_str()),
            ("Cache-Control", "no-store"),
        ],
    );
    let _ = request.respond(response);
    None
}

/// Answers one request (not an event stream).
fn handle(shared: &Shared, request: Request) {
    let Some(request) = admit(shared, request) else {
        return;
    };
    let url = request.url().to_owned();
    let (path, query) = url.split_once('?').unwrap_or((url.as_str(), ""));
    let response = if let Some(route) = path.strip_prefix("/api/") {
        let params = Params::parse(query);
        match api::answer(shared, route, &params) {
            Ok(body) => json_response(200, body),
            Err(err) => json_error(&err),
        }
    } else if let Some(name) = path.strip_prefix("/assets/") {
        match assets::find(name) {
            Some((asset, tag)) => {
                if request_header(&request, "If-None-Match") == Some(tag) {
                    with_headers(
                        Response::from_data(Vec::new()).with_status_code(304),
                        &[("ETag", tag), ("Cache-Control", "no-cache")],
                    )
                } else {
                    with_headers(
                        Response::from_data(asset.body.to_vec()),
                        &[
                            ("Content-Type", asset.mime),
                            ("ETag", tag),
                            ("Cache-Control", "no-cache"),
                        ],
                    )
                }
            }
            None => text_response(404, "no such file\n"),
        }
    } else if is_page(path) {
        with_headers(
            Response::from_data(assets::index().to_vec()),
            &[
                ("Content-Type", "text/html; charset=utf-8"),
                ("Cache-Control", "no-cache"),
            ],
        )
    } else if path == "/favicon.ico" {
        match assets::find("favicon.svg") {
            Some((asset, _)) => with_headers(
                Response::from_data(asset.body.to_vec()),
                &[("Content-Type", asset.mime)],
            ),
            None => text_response(404, "no such file\n"),
        }
    } else {
        text_response(404, "no such page\n")
    };
    let _ = request.respond(response);
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
fn stream_events(shared: &Shared, request: Request) {
    let mut out = request.into_writer();
    let head = "HTTP/1.1 200 OK\r\n\
                Content-Type: text/event-stream; charset=utf-8\r\n\
                Cache-Control: no-store\r\n\
                X-Content-Type-Options: nosniff\r\n\
                Connection: close\r\n\r\n";
    let mut seen = shared.live.current();
    let hello = format!("retry: 1000\nevent: hello\ndata: {{\"version\":{seen}}}\n\n");
    if out.write_all(head.as_bytes()).is_err()
        || out.write_all(hello.as_bytes()).is_err()
        || out.flush().is_err()
    {
        return;
    }
    while !shared.stop.load(Ordering::SeqCst) {
        let now = shared.live.wait(seen, KEEPALIVE);
        if shared.stop.load(Ordering::SeqCst) {
            break;
        }
        let chunk = if now == seen {
            ": keep-alive\n\n".to_owned()
        } else {
            seen = now;
            format!("event: change\ndata: {{\"version\":{now}}}\n\n")
        };
        if out.write_all(chunk.as_bytes()).is_err() || out.flush().is_err() {
            break;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
