-- Scribe schema for PostgreSQL, version 5: run leases (sql/migrations/sqlite/V5 says why).

CREATE TABLE session_runs (
    session_id TEXT COLLATE "C" PRIMARY KEY REFERENCES sessions (id) ON DELETE CASCADE,
    owner TEXT NOT NULL,
    pid BIGINT NOT NULL,
    host TEXT NOT NULL,
    started_at BIGINT NOT NULL,
    heartbeat_at BIGINT NOT NULL
);
