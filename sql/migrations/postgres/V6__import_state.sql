-- Scribe schema for PostgreSQL, version 6: what `scribe import --from <agent>` imported,
-- from where (sql/migrations/sqlite/V6 says why).

CREATE TABLE import_files (
    source              TEXT COLLATE "C" NOT NULL,
    path                TEXT COLLATE "C" NOT NULL,
    size                BIGINT NOT NULL,
    mtime_ns            BIGINT NOT NULL,
    byte_offset         BIGINT NOT NULL DEFAULT 0,
    lines               BIGINT NOT NULL DEFAULT 0,
    carry               TEXT CHECK (carry IS NULL OR scribe_json_valid(carry)),
    records             BIGINT NOT NULL DEFAULT 0,
    skipped             BIGINT NOT NULL DEFAULT 0,
    imported_at         BIGINT NOT NULL,
    PRIMARY KEY (source, path)
);

CREATE TABLE import_sessions (
    session_id          TEXT COLLATE "C" PRIMARY KEY NOT NULL
                        REFERENCES sessions (id) ON DELETE CASCADE,
    source              TEXT COLLATE "C" NOT NULL,
    external_id         TEXT COLLATE "C" NOT NULL,
    path                TEXT COLLATE "C" NOT NULL,
    title_rank          BIGINT NOT NULL DEFAULT 0,
    cost_flags          BIGINT NOT NULL DEFAULT 0,
    pending_parent      TEXT COLLATE "C",
    fingerprint         TEXT,
    imported_at         BIGINT NOT NULL,
    UNIQUE (source, external_id)
);

CREATE INDEX import_sessions_pending ON import_sessions (pending_parent)
    WHERE pending_parent IS NOT NULL;

CREATE TABLE import_keys (
    source              TEXT COLLATE "C" NOT NULL,
    record_key          TEXT COLLATE "C" NOT NULL,
    session_id          TEXT COLLATE "C" REFERENCES sessions (id) ON DELETE CASCADE,
    title               TEXT,
    title_rank          BIGINT NOT NULL DEFAULT 0,
    PRIMARY KEY (source, record_key)
);
