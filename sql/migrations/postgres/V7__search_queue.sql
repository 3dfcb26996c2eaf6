-- Scribe schema for PostgreSQL, version 7: the search queue (sql/migrations/sqlite/V7 says
-- why SQLite indexes parts after the write that stored them).
--
-- Here the two GIN indexes of V1 stay synchronous: PostgreSQL maintains them inside each
-- write (with its own pending-list batching, `fastupdate`), so nothing fills this table
-- and it stays empty. It exists so that both dialects have the same tables. A backend
-- that wants SQLite's deferred indexing on PostgreSQL (for example a separate tsvector
-- column filled later) would fill it from a trigger as SQLite's V7 does and drain it with
-- `DELETE … WHERE seq IN (SELECT seq FROM search_queue ORDER BY seq LIMIT n FOR UPDATE
-- SKIP LOCKED)`, so that several indexers never take the same parts.

CREATE TABLE search_queue (
    seq BIGINT PRIMARY KEY NOT NULL
);
