//! How the services announce a change: [`queue_event`] queues the event on the
//! transaction that makes the change, so it is published once that transaction has
//! committed (never for one that rolled back). The session service uses it too.

use std::sync::Arc;

use scribe_db::Tx;
use scribe_pubsub::{Broker, EventKind};

/// Queues `kind` with `payload` about `entity` (its id) on `tx`, to be published on
/// `broker` after COMMIT. An `updated` event is queued under the entity's id, so an
/// entity changed twice in one transaction is announced once, in its committed state;
/// `created` and `deleted` always go out.
///
/// Nothing is queued while `broker` has no subscriber: a change cannot be announced to a
/// subscription made after it, so the payload's clone and the queued action are spared
/// (a streamed reply writes its growing part many times a second). Callers whose payload
/// costs a query to build check [`Broker::subscriber_count`] first.
pub fn queue_event<T: Clone + Send + 'static>(
    tx: &mut Tx<'_>,
    broker: &Arc<Broker<T>>,
    kind: EventKind,
    entity: &str,
    payload: T,
) {
    if broker.subscriber_count() == 0 {
        return;
    }
    let broker = Arc::clone(broker);
    let publish = move || {
        broker.publish(kind, payload);
    };
    match kind {
        EventKind::Updated => {
            let key = format!("{} {entity}", std::any::type_name::<T>());
            tx.after_commit_keyed(key, publish);
        }
        EventKind::Created | EventKind::Deleted => tx.after_commit(publish),
    }
}
