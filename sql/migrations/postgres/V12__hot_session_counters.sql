-- Scribe schema for PostgreSQL, version 12: writers of different sessions stop failing each
-- other's transactions.
--
-- Every append updates its session's row (message_count and updated_at by the
-- messages_count trigger, tool_call_count per tool part, the token and cost totals per
-- step). An update that changes an indexed column cannot be HOT (heap-only): it writes a
-- new entry into EVERY index of the table, the primary key too. Every append also reads
-- the primary key (the foreign key check of its message, the counter update's own
-- lookup), and under SERIALIZABLE a B-tree read locks the whole leaf page it looked at.
-- Dozens of sessions share one leaf page of sessions_pkey, so two writers appending to
-- two different sessions each wrote into the page the other had read: a cycle, and one of
-- them failed with a serialization failure (measured: 16 writers, ~1.7 retries per
-- append; pgbench with the same statements, 16 clients, 83% of transactions retried).
--
-- 1. The indexes on columns an append changes go: updated_at (V1), the cost and token
--    totals (V9). With them gone, the counter updates are HOT and touch no index page, so
--    the pages other writers read stay untouched (the same pgbench run: 0.02% retried).
--    Their price: `scribe list` sorted by activity, cost or tokens (and the web viewer's
--    list in those orders) reads every session row and keeps the top of the page (a
--    top-N heap sort), instead of walking one page of an index. The newest-first order
--    (created_at, never updated) keeps its index. SQLite keeps all three: it has one
--    writer at a time anyway.
-- 2. A HOT update also needs room on the row's own heap page. Session rows are few and
--    small, so the table leaves three quarters of each page free for the next versions
--    of its rows; without that room a busy page makes updates non-HOT again.
-- 3. Every part's foreign key check looks its message up by id. Message ids grow with
--    time (UUIDv7), so in messages_pkey every writer's newest message sits on the same
--    right-most leaf page: each check locked the page every other writer was inserting
--    into, and with three or more writers at once one of them became the pivot of a
--    dangerous structure (about one append in six retried once the table had a few
--    thousand messages). A hash index on the id spreads the same lookups over its
--    buckets, and the planner prefers it for an equality on id (the check's plan:
--    Index Scan using messages_id_hash), so a check locks one bucket page that another
--    writer's insert lands on only by chance (pgbench, 16 clients: 0.1–1.4% retried
--    instead of 14–16%). messages_pkey stays: it keeps ids unique and is what
--    sessions.summary_message_id references.

DROP INDEX sessions_updated;
DROP INDEX sessions_cost;
DROP INDEX sessions_tokens;

CREATE INDEX messages_id_hash ON messages USING hash (id);

-- One block (sqlgen skips it: it changes no table's shape).
DO $$
BEGIN
    ALTER TABLE sessions SET (fillfactor = 25);
END;
$$;
