//! scribe-server: `scribe serve`, a local web viewer of a Scribe database.
//!
//! One page (embedded in the binary, working offline) over a JSON API under `/api/`:
//! the session list with filters, sorting and keyset paging; a conversation with its parts
//! rendered (markdown sanitized, code highlighted, tool calls and reasoning folded, edits
//! as diffs) and loaded progressively; search as you type; usage charts per day; and live
//! updates while another process writes, detected from the database itself.
//!
//! ```no_run
//! use scribe_server::{Config, Server};
//!
//! let server = Server::bind(Config {
//!     db: "scribe.db".into(),
//!     addr: "127.0.0.1:7777".into(),
//!     token: None,
//! })?;
//! println!("{}", server.url());
//! server.run()?;
//! # Ok::<(), scribe_server::ServeError>(())
//! ```
//!
//! Rules it keeps: the database is opened read-only and only `GET`/`HEAD` are answered;
//! without a token it listens on loopback only and answers only requests addressed to a
//! loopback host; with one, every request must carry it; stored text is never inserted
//! into the page as HTML (markdown goes through an escaping renderer and a sanitizer, and
//! the content security policy allows only the server's own scripts).
//!
//! Modules: [`json`] (the JSON shapes shared with the CLI's `--json`), [`markdown`] (a
//! conversation as Markdown, shared with `scribe export`), [`text`] (counts and costs as
//! people read them, shared with the CLI's tables), `store` (the one
//! place that reads the database), `api` (routes and parameters), `http` (binding, access
//! rules, workers, static files, the event stream), `live` (change detection), `assets`
//! (the embedded page and vendored libraries).

mod api;
mod assets;
pub mod cut;
mod error;
mod http;
pub mod json;
mod live;
pub mod markdown;
mod store;
pub mod text;

pub use api::{MAX_MESSAGE_PAGE, MAX_SESSION_PAGE, parse_time};
pub use error::{ApiError, ServeError};
pub use http::{Config, MAX_STREAMS, Server, StopHandle};
pub use live::POLL;
pub use store::{MAX_CHILDREN, choices, previews, untitled_previews};
