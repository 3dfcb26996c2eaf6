//! The event a broker carries: what happened ([`EventKind`]) to which value (the payload).

use std::fmt;

/// What happened to the payload of an [`Event`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum EventKind {
    /// The payload was created.
    Created,
    /// The payload was changed; it carries the new state.
    Updated,
    /// The payload was deleted; it carries the last known state.
    Deleted,
}

impl EventKind {
    /// Every kind, in declaration order.
    pub const ALL: [EventKind; 3] = [EventKind::Created, EventKind::Updated, EventKind::Deleted];

    /// The lowercase name: `created`, `updated` or `deleted`.
    #[must_use]
    pub const fn as_str(self) -> &'static str {
        match self {
            EventKind::Created => "created",
            EventKind::Updated => "updated",
            EventKind::Deleted => "deleted",
        }
    }
}

impl fmt::Display for EventKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// One published change: its kind and the value it concerns.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Event<T> {
    /// What happened.
    pub kind: EventKind,
    /// The value it happened to.
    pub payload: T,
}

impl<T> Event<T> {
    /// An event of `kind` about `payload`.
    #[must_use]
    pub const fn new(kind: EventKind, payload: T) -> Self {
        Self { kind, payload }
    }

    /// An [`EventKind::Created`] event.
    #[must_use]
    pub const fn created(payload: T) -> Self {
        Self::new(EventKind::Created, payload)
    }

    /// An [`EventKind::Updated`] event.
    #[must_use]
    pub const fn updated(payload: T) -> Self {
        Self::new(EventKind::Updated, payload)
    }

    /// An [`EventKind::Deleted`] event.
    #[must_use]
    pub const fn deleted(payload: T) -> Self {
        Self::new(EventKind::Deleted, payload)
    }

    /// The same kind with the payload transformed, e.g. to narrow it to an id.
    #[must_use]
    pub fn map<U>(self, f: impl FnOnce(T) -> U) -> Event<U> {
        Event::new(self.kind, f(self.payload))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kind_displays_lowercase() {
        let shown: Vec<String> = EventKind::ALL.iter().map(ToString::to_string).collect();
        assert_eq!(shown, ["created", "updated", "deleted"]);
        assert_eq!(format!("{:?}", EventKind::Updated), "Updated");
    }

    #[test]
    fn constructors_set_the_kind() {
        assert_eq!(Event::created(1).kind, EventKind::Created);
        assert_eq!(Event::updated(1).kind, EventKind::Updated);
        assert_eq!(Event::deleted(1).kind, EventKind::Deleted);
        assert_eq!(Event::new(EventKind::Updated, 7), Event::updated(7));
    }

    #[test]
    fn map_keeps_the_kind() {
        let event = Event::deleted("ses_1".to_string()).map(|id| id.len());
        assert_eq!(event, Event::deleted(5));
    }
}
