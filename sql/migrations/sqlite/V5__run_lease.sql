-- Scribe schema, version 5: run leases.
--
-- A process answering in a session holds its lease: who it is (`owner`, unique per process),
-- where it runs (`pid`, `host`) and when it last showed it is alive (`heartbeat_at`, ms).
-- Crash recovery repairs a session's open messages only when no live process holds its
-- lease, so a run in another process is no longer mistaken for a crashed one. A lease is
-- dead when its process is gone (same host, pid absent) or its heartbeat is stale.
-- A separate table, not columns on `sessions`: the lease changes at every step and is no
-- part of a session's data.

CREATE TABLE session_runs (
    session_id TEXT PRIMARY KEY REFERENCES sessions(id) ON DELETE CASCADE,
    owner TEXT NOT NULL,
    pid INTEGER NOT NULL,
    host TEXT NOT NULL,
    started_at INTEGER NOT NULL,
    heartbeat_at INTEGER NOT NULL
);
