-- Scribe schema, version 6: what `scribe import --from <agent>` imported, from where.
--
-- Importing another agent's history is incremental: a file is read again only when its
-- size or modification time changed, and then only from where the last import stopped.
-- `import_files` keeps, per source file (or database), what the last import saw and where
-- it stopped; `import_sessions` keeps which session of which source each imported session
-- is, and what the importer must remember about it between runs. Both are written in the
-- same transaction as the rows they describe, so a crash never leaves a file marked as
-- read whose records are missing (or the other way round).

CREATE TABLE import_files (
    -- The agent: claude-code, codex, opencode, hermes, gemini.
    source              TEXT NOT NULL,
    -- Absolute path of the file or database read.
    path                TEXT NOT NULL,
    -- What the last import saw: size in bytes and modification time in nanoseconds.
    -- Unchanged values mean the file is skipped after one stat.
    size                INTEGER NOT NULL,
    mtime_ns            INTEGER NOT NULL,
    -- How far the last import read: bytes of complete lines, and their count. A line
    -- still being written (no newline yet) is left for the next import.
    byte_offset         INTEGER NOT NULL DEFAULT 0,
    lines               INTEGER NOT NULL DEFAULT 0,
    -- What the reader must remember to go on from `byte_offset` (open message, pending tool
    -- calls, cumulative token totals …): the importer's own JSON, opaque to the schema.
    carry               TEXT CHECK (carry IS NULL OR json_valid(carry)),
    -- Records taken from the file over all imports, and those skipped (unknown types).
    records             INTEGER NOT NULL DEFAULT 0,
    skipped             INTEGER NOT NULL DEFAULT 0,
    imported_at         INTEGER NOT NULL,
    PRIMARY KEY (source, path)
);

CREATE TABLE import_sessions (
    -- The Scribe session (deleting it forgets the mapping; its file is not read again
    -- unless it changes).
    session_id          TEXT PRIMARY KEY NOT NULL REFERENCES sessions (id) ON DELETE CASCADE,
    source              TEXT NOT NULL,
    -- The session's id in its source.
    external_id         TEXT NOT NULL,
    -- The file or database it was last read from.
    path                TEXT NOT NULL,
    -- Rank of the title source that set the current title (higher wins: a user's title
    -- over an AI title over a summary), so a later, weaker title never replaces it.
    title_rank          INTEGER NOT NULL DEFAULT 0,
    -- Where the cost figures came from, as bits: 1 reported by the source, 2 estimated
    -- from the pricing catalog, 4 usage of a model without a known price.
    cost_flags          INTEGER NOT NULL DEFAULT 0,
    -- The source's id of a parent session not imported yet; linked once it is.
    pending_parent      TEXT,
    -- For database sources: what the last import saw of the session (update time,
    -- message count), so an unchanged session is not read again.
    fingerprint         TEXT,
    imported_at         INTEGER NOT NULL,
    UNIQUE (source, external_id)
);

CREATE INDEX import_sessions_pending ON import_sessions (pending_parent)
    WHERE pending_parent IS NOT NULL;

-- Keys of records that a record in another file may name, with the session that holds
-- each: Claude Code's `summary` lines title the conversation whose leaf line they name
-- (`leafUuid`), often from a later file. The first session to hold a key keeps it (a
-- resumed conversation replays its parent's lines with their keys). A title naming a
-- key not imported yet waits here (`title`, `title_rank`) until it is.
CREATE TABLE import_keys (
    source              TEXT NOT NULL,
    record_key          TEXT NOT NULL,
    session_id          TEXT REFERENCES sessions (id) ON DELETE CASCADE,
    title               TEXT,
    title_rank          INTEGER NOT NULL DEFAULT 0,
    PRIMARY KEY (source, record_key)
);
