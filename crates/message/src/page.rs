//! Keyset pagination of a session's messages: [`Cursor`], [`Page`],
//! [`MessageService::page`] (newest first), [`MessageService::stream`] (all messages in
//! creation order, a page at a time) and [`MessageService::stream_after`] (those after a
//! cursor).
//!
//! A cursor is the position (created_at, id) of a message, encoded as an opaque URL-safe
//! string. Because ids are unique and creation order is (created_at, id), a cursor names
//! the same place forever: messages appended later never shift older pages, and a cursor
//! whose message was deleted still works.

use std::fmt;
use std::str::FromStr;

use base64::Engine as _;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use scribe_db::queries;

use crate::error::{MessageError, Result};
use crate::message::Message;
use crate::service::MessageService;
use crate::store;

/// The largest page [`MessageService::page`] returns.
pub const MAX_PAGE: usize = 1000;

/// How many messages [`MessageStream`] loads per query.
const STREAM_PAGE: usize = 200;

/// An opaque position in a session's message order.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Cursor {
    created_at: i64,
    id: String,
}

impl Cursor {
    /// The position of `msg`.
    pub fn of(msg: &Message) -> Cursor {
        Cursor {
            created_at: msg.created_at,
            id: msg.id.clone(),
        }
    }

    /// Decodes a cursor string from [`Cursor::encode`]; anything else is
    /// [`MessageError::InvalidInput`].
    pub fn decode(text: &str) -> Result<Cursor> {
        let bad = || MessageError::InvalidInput(format!("invalid page cursor {text:?}"));
        let bytes = URL_SAFE_NO_PAD.decode(text.as_bytes()).map_err(|_| bad())?;
        let plain = String::from_utf8(bytes).map_err(|_| bad())?;
        let rest = plain.strip_prefix("v1:").ok_or_else(bad)?;
        let (time, id) = rest.split_once(':').ok_or_else(bad)?;
        let created_at = time.parse::<i64>().map_err(|_| bad())?;
        if id.is_empty() {
            return Err(bad());
        }
        Ok(Cursor {
            created_at,
            id: id.to_owned(),
        })
    }

    /// The opaque string form.
    pub fn encode(&self) -> String {
        URL_SAFE_NO_PAD.encode(format!("v1:{}:{}", self.created_at, self.id))
    }
}

impl fmt::Display for Cursor {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.encode())
    }
}

impl FromStr for Cursor {
    type Err = MessageError;

    fn from_str(s: &str) -> Result<Self> {
        Cursor::decode(s)
    }
}

/// One page of a session's messages, newest first.
#[derive(Debug, Clone, PartialEq)]
pub struct Page {
    /// The messages, newest first, with parts.
    pub messages: Vec<Message>,
    /// Pass as `before` for the next (older) page; `None` when there is none.
    pub next: Option<Cursor>,
    /// Whether older messages exist.
    pub more: bool,
}

impl MessageService {
    /// Up to `limit` (1–[`MAX_PAGE`]) messages of `session_id` older than `before` (or the
    /// newest, without it), newest first, with their parts: three queries per page.
    ///
    /// Unknown session → [`MessageError::NotFound`]; an empty one → an empty page.
    pub fn page(&self, session_id: &str, limit: usize, before: Option<&Cursor>) -> Result<Page> {
        if limit == 0 || limit > MAX_PAGE {
            return Err(MessageError::InvalidInput(format!(
                "page size must be 1–{MAX_PAGE}, got {limit}"
            )));
        }
        // One extra row tells whether another page exists.
        let fetch = i64::try_from(limit + 1).unwrap_or(i64::MAX);
        self.db.read(|tx| {
            store::ensure_session(tx, session_id)?;
            let mut rows = match before {
                None => tx
                    .q()
                    .list_messages_newest(&queries::ListMessagesNewestParams {
                        session_id,
                        limit: fetch,
                    })?,
                Some(cursor) => {
                    tx.q()
                        .list_messages_before(&queries::ListMessagesBeforeParams {
                            session_id,
                            created_at: cursor.created_at,
                            id: &cursor.id,
                            limit: fetch,
                        })?
                }
            };
            let more = rows.len() > limit;
            rows.truncate(limit);
            let messages = store::attach_parts(tx, rows)?;
            let next = if more {
                messages.last().map(Cursor::of)
            } else {
                None
            };
            Ok(Page {
                messages,
                next,
                more,
            })
        })
    }

    /// Every message of `session_id` in creation order, loaded a page at a time as the
    /// iterator advances. Unknown session → [`MessageError::NotFound`] (here, not from
    /// the iterator).
    pub fn stream(&self, session_id: &str) -> Result<MessageStream<'_>> {
        self.stream_from(session_id, None)
    }

    /// The messages of `session_id` that come after `after` in creation order, loaded a
    /// page at a time as [`stream`](Self::stream) loads them: what a reader who has shown
    /// the session up to the message at `after` has not seen yet (`scribe show
    /// --follow`). A message created later with an earlier `created_at` than `after`'s
    /// (another host's clock behind) sorts before it and is not among them. Unknown
    /// session → [`MessageError::NotFound`] (here, not from the iterator).
    pub fn stream_after(&self, session_id: &str, after: &Cursor) -> Result<MessageStream<'_>> {
        self.stream_from(session_id, Some(after.clone()))
    }

    fn stream_from(&self, session_id: &str, after: Option<Cursor>) -> Result<MessageStream<'_>> {
        self.db.read(|tx| store::ensure_session(tx, session_id))?;
        Ok(MessageStream {
            service: self,
            session_id: session_id.to_owned(),
            after,
            buffer: Vec::new().into_iter(),
            done: false,
        })
    }

    fn forward_page(&self, session_id: &str, after: Option<&Cursor>) -> Result<Vec<Message>> {
        let limit = i64::try_from(STREAM_PAGE).unwrap_or(i64::MAX);
        self.db.read(|tx| {
            let rows = match after {
                None => tx
                    .q()
                    .list_messages_oldest(&queries::ListMessagesOldestParams {
                        session_id,
                        limit,
                    })?,
                Some(cursor) => tx
                    .q()
                    .list_messages_after(&queries::ListMessagesAfterParams {
                        session_id,
                        created_at: cursor.created_at,
                        id: &cursor.id,
                        limit,
                    })?,
            };
            store::attach_parts(tx, rows)
        })
    }
}

/// Iterator over a session's messages in creation order (see [`MessageService::stream`]).
///
/// Yields `Err` once if a page fails to load (e.g. a corrupt part), then ends.
#[derive(Debug)]
pub struct MessageStream<'a> {
    service: &'a MessageService,
    session_id: String,
    after: Option<Cursor>,
    buffer: std::vec::IntoIter<Message>,
    done: bool,
}

impl Iterator for MessageStream<'_> {
    type Item = Result<Message>;

    fn next(&mut self) -> Option<Self::Item> {
        if let Some(msg) = self.buffer.next() {
            return Some(Ok(msg));
        }
        if self.done {
            return None;
        }
        match self
            .service
            .forward_page(&self.session_id, self.after.as_ref())
        {
            Ok(page) => {
                if page.len() < STREAM_PAGE {
                    self.done = true;
                }
                self.after = page.last().map(Cursor::of);
                self.buffer = page.into_iter();
                self.buffer.next().map(Ok)
            }
            Err(err) => {
                self.done = true;
                Some(Err(err))
            }
        }
    }
}
