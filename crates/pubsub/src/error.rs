//! Why a receive returned no event: nothing yet, events were missed, or the stream ended.
//!
//! `Lagged` is an error on purpose: a subscriber that missed events holds a stale
//! picture and must reload, so it cannot be ignored the way an `Option` could.

/// A blocking [`recv`](crate::Subscription::recv) returned no event.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, thiserror::Error)]
pub enum RecvError {
    /// The buffer was full when this many events were published; they are gone.
    /// Reported once, before any buffered event; the count then restarts at zero.
    #[error("subscriber lagged behind and missed {0} events")]
    Lagged(u64),
    /// The broker shut down (or was dropped) and every buffered event was received.
    #[error("broker shut down and the subscription is drained")]
    Closed,
}

/// A non-blocking [`try_recv`](crate::Subscription::try_recv) returned no event.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, thiserror::Error)]
pub enum TryRecvError {
    /// No event is buffered right now; the stream is still open.
    #[error("no event is buffered")]
    Empty,
    /// Events were missed; see [`RecvError::Lagged`].
    #[error("subscriber lagged behind and missed {0} events")]
    Lagged(u64),
    /// The stream ended; see [`RecvError::Closed`].
    #[error("broker shut down and the subscription is drained")]
    Closed,
}

/// A [`recv_timeout`](crate::Subscription::recv_timeout) returned no event.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, thiserror::Error)]
pub enum RecvTimeoutError {
    /// No event arrived before the timeout; the stream is still open.
    #[error("timed out waiting for an event")]
    Timeout,
    /// Events were missed; see [`RecvError::Lagged`].
    #[error("subscriber lagged behind and missed {0} events")]
    Lagged(u64),
    /// The stream ended; see [`RecvError::Closed`].
    #[error("broker shut down and the subscription is drained")]
    Closed,
}

/// The gap an iterator over a subscription yields in place of missed events.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, thiserror::Error)]
#[error("subscriber lagged behind and missed {0} events")]
pub struct Lagged(pub u64);

impl RecvError {
    /// The number of missed events, if this is [`RecvError::Lagged`].
    #[must_use]
    pub const fn lagged(self) -> Option<u64> {
        match self {
            RecvError::Lagged(n) => Some(n),
            RecvError::Closed => None,
        }
    }
}

impl TryRecvError {
    /// The number of missed events, if this is [`TryRecvError::Lagged`].
    #[must_use]
    pub const fn lagged(self) -> Option<u64> {
        match self {
            TryRecvError::Lagged(n) => Some(n),
            TryRecvError::Empty | TryRecvError::Closed => None,
        }
    }
}

impl RecvTimeoutError {
    /// The number of missed events, if this is [`RecvTimeoutError::Lagged`].
    #[must_use]
    pub const fn lagged(self) -> Option<u64> {
        match self {
            RecvTimeoutError::Lagged(n) => Some(n),
            RecvTimeoutError::Timeout | RecvTimeoutError::Closed => None,
        }
    }
}

impl From<Lagged> for RecvError {
    fn from(Lagged(n): Lagged) -> Self {
        RecvError::Lagged(n)
    }
}

impl From<Lagged> for TryRecvError {
    fn from(Lagged(n): Lagged) -> Self {
        TryRecvError::Lagged(n)
    }
}

impl From<Lagged> for RecvTimeoutError {
    fn from(Lagged(n): Lagged) -> Self {
        RecvTimeoutError::Lagged(n)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn messages_are_lowercase() {
        let messages = [
            RecvError::Lagged(3).to_string(),
            RecvError::Closed.to_string(),
            TryRecvError::Empty.to_string(),
            RecvTimeoutError::Timeout.to_string(),
            Lagged(3).to_string(),
        ];
        for message in messages {
            assert!(message.starts_with(char::is_lowercase), "{message}");
        }
        assert_eq!(
            Lagged(3).to_string(),
            "subscriber lagged behind and missed 3 events"
        );
    }

    #[test]
    fn lagged_accessors() {
        assert_eq!(RecvError::Lagged(2).lagged(), Some(2));
        assert_eq!(RecvError::Closed.lagged(), None);
        assert_eq!(TryRecvError::Empty.lagged(), None);
        assert_eq!(RecvTimeoutError::from(Lagged(4)).lagged(), Some(4));
        assert_eq!(TryRecvError::from(Lagged(4)), TryRecvError::Lagged(4));
        assert_eq!(RecvError::from(Lagged(4)), RecvError::Lagged(4));
    }
}
