-- Scribe schema for PostgreSQL, version 2: which child sessions have had their usage rolled
-- into their parent (sql/migrations/sqlite/V2 says why).

CREATE TABLE session_rollups (
    child_id            TEXT COLLATE "C" PRIMARY KEY NOT NULL
                        REFERENCES sessions (id) ON DELETE CASCADE,
    parent_id           TEXT NOT NULL,
    rolled_up_at        BIGINT NOT NULL
);
