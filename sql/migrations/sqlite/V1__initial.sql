-- Scribe schema, version 1: sessions → messages → parts, file versions, search.
--
-- Conventions: ids are TEXT, prefixed and time-sortable (`ses_…`, `msg_…`, `prt_…`, `fil_…`),
-- except where a caller supplies a meaningful id (a task session takes its tool-call id).
-- Times are INTEGER milliseconds since the Unix epoch. JSON lives in TEXT columns checked
-- with json_valid. Everything derived (counters, updated_at, both search indexes) is kept
-- by the triggers at the end of this file, so no writer can forget it.
--
-- This file is append-only history: change the schema in a new V2__….sql, never here.

CREATE TABLE sessions (
    id                  TEXT PRIMARY KEY NOT NULL,
    -- Task sub-sessions, title sessions, forks and compaction continuations point at the
    -- session they came from; deleting that session keeps the child and clears the link.
    parent_session_id   TEXT REFERENCES sessions (id) ON DELETE SET NULL,
    kind                TEXT NOT NULL DEFAULT 'normal'
                        CHECK (kind IN ('normal', 'title', 'task', 'fork', 'continuation')),
    source              TEXT NOT NULL DEFAULT 'cli',
    user_id             TEXT,
    directory           TEXT,
    -- Unique when present (partial index below); NULL titles never conflict.
    title               TEXT,
    model               TEXT,
    model_config        TEXT CHECK (model_config IS NULL OR json_valid(model_config)),
    system_prompt       TEXT,
    permission          TEXT CHECK (permission IS NULL OR json_valid(permission)),
    -- Maintained by triggers on messages and parts.
    message_count       INTEGER NOT NULL DEFAULT 0,
    tool_call_count     INTEGER NOT NULL DEFAULT 0,
    -- Maintained by atomic `x = x + @n` updates (sql/queries/sessions.sql).
    api_call_count      INTEGER NOT NULL DEFAULT 0,
    input_tokens        INTEGER NOT NULL DEFAULT 0,
    output_tokens       INTEGER NOT NULL DEFAULT 0,
    cache_read_tokens   INTEGER NOT NULL DEFAULT 0,
    cache_write_tokens  INTEGER NOT NULL DEFAULT 0,
    reasoning_tokens    INTEGER NOT NULL DEFAULT 0,
    estimated_cost_usd  REAL NOT NULL DEFAULT 0,
    -- NULL until a provider reports a billed amount.
    actual_cost_usd     REAL,
    billing_provider    TEXT,
    billing_base_url    TEXT,
    billing_mode        TEXT,
    cost_status         TEXT,
    cost_source         TEXT,
    pricing_version     TEXT,
    summary_message_id  TEXT REFERENCES messages (id) ON DELETE SET NULL,
    created_at          INTEGER NOT NULL,
    updated_at          INTEGER NOT NULL,
    ended_at            INTEGER,
    end_reason          TEXT,
    archived_at         INTEGER,
    compacting_at       INTEGER
);

CREATE UNIQUE INDEX sessions_title_unique ON sessions (title) WHERE title IS NOT NULL;
CREATE INDEX sessions_parent ON sessions (parent_session_id);
CREATE INDEX sessions_source ON sessions (source, created_at);
CREATE INDEX sessions_user ON sessions (user_id);
CREATE INDEX sessions_created ON sessions (created_at);
CREATE INDEX sessions_updated ON sessions (updated_at);
-- Lets ON DELETE SET NULL find the session when its summary message is deleted.
CREATE INDEX sessions_summary_message ON sessions (summary_message_id);

CREATE TABLE messages (
    id                  TEXT PRIMARY KEY NOT NULL,
    session_id          TEXT NOT NULL REFERENCES sessions (id) ON DELETE CASCADE,
    -- The message this one answers. Not a foreign key: forks and imports copy messages with
    -- new ids, and a dangling link must never block deleting a single message.
    parent_id           TEXT,
    role                TEXT NOT NULL CHECK (role IN ('user', 'assistant', 'system', 'tool')),
    agent               TEXT,
    provider            TEXT,
    model               TEXT,
    finish_reason       TEXT,
    is_summary          BOOLEAN NOT NULL DEFAULT 0,
    input_tokens        INTEGER NOT NULL DEFAULT 0,
    output_tokens       INTEGER NOT NULL DEFAULT 0,
    cache_read_tokens   INTEGER NOT NULL DEFAULT 0,
    cache_write_tokens  INTEGER NOT NULL DEFAULT 0,
    reasoning_tokens    INTEGER NOT NULL DEFAULT 0,
    cost_usd            REAL NOT NULL DEFAULT 0,
    -- JSON of the error that ended the message, if any.
    error               TEXT CHECK (error IS NULL OR json_valid(error)),
    created_at          INTEGER NOT NULL,
    updated_at          INTEGER NOT NULL,
    finished_at         INTEGER
);

-- Creation order within a session (pagination cursors are (created_at, id)).
CREATE INDEX messages_session_created ON messages (session_id, created_at, id);
-- The parent key of parts' composite foreign key: a part always belongs to a message of
-- the same session.
CREATE UNIQUE INDEX messages_session_id ON messages (session_id, id);

-- One typed part of a message. `data` is the serde JSON of the part, tagged by `type`;
-- the JSON fields read here are the searchable ones:
--   text, reasoning: {"type": …, "text": "…"}
--   tool:            {"type": "tool", "tool": "<name>", "call_id": "…", "input": <json>,
--                     "state": {"status": "…", "output": "…" (completed) | "message": "…" (error)}}
-- (the shape of crates/message's Part; a tool's name, input, output and error are searched).
CREATE TABLE parts (
    -- Stable integer key of both search indexes (an INTEGER PRIMARY KEY survives VACUUM,
    -- an implicit rowid does not).
    seq                 INTEGER PRIMARY KEY,
    id                  TEXT NOT NULL UNIQUE,
    message_id          TEXT NOT NULL,
    session_id          TEXT NOT NULL,
    position            INTEGER NOT NULL,
    type                TEXT NOT NULL,
    data                TEXT NOT NULL CHECK (json_valid(data)),
    created_at          INTEGER NOT NULL,
    updated_at          INTEGER NOT NULL,
    -- The text both search indexes hold for this part; NULL for parts that are not searched.
    -- Computed from `data`, so it can never disagree with it.
    search_text         TEXT GENERATED ALWAYS AS (
        CASE type
            WHEN 'text' THEN data ->> '$.text'
            WHEN 'reasoning' THEN data ->> '$.text'
            WHEN 'tool' THEN concat_ws(char(10),
                data ->> '$.tool',
                data ->> '$.input',
                data ->> '$.state.output',
                data ->> '$.state.message')
        END
    ) VIRTUAL,
    UNIQUE (message_id, position),
    FOREIGN KEY (session_id, message_id) REFERENCES messages (session_id, id) ON DELETE CASCADE
);

CREATE INDEX parts_session ON parts (session_id);

CREATE TABLE files (
    id                  TEXT PRIMARY KEY NOT NULL,
    session_id          TEXT NOT NULL REFERENCES sessions (id) ON DELETE CASCADE,
    path                TEXT NOT NULL,
    content             TEXT NOT NULL,
    version             INTEGER NOT NULL CHECK (version > 0),
    created_at          INTEGER NOT NULL,
    updated_at          INTEGER NOT NULL,
    UNIQUE (session_id, path, version)
);

-- Search. Both indexes are external-content tables over parts.search_text keyed by
-- parts.seq, so a hit maps back to part → message → session, snippet() can read the
-- text, and nothing is stored twice. The word index serves words, phrases and prefixes;
-- the trigram index serves CJK text and substrings.
CREATE VIRTUAL TABLE parts_fts USING fts5(
    search_text,
    content='parts',
    content_rowid='seq',
    tokenize='unicode61 remove_diacritics 2'
);

CREATE VIRTUAL TABLE parts_fts_trigram USING fts5(
    search_text,
    content='parts',
    content_rowid='seq',
    tokenize='trigram'
);

-- External-content indexes must be told exactly what to remove, so every change of a
-- part's searchable text deletes the old tokens (from `old`) before adding the new ones.
-- Every part has an index row (NULL text holds no tokens), which keeps the indexes in the
-- exact one-row-per-part shape that FTS5's own integrity check and 'rebuild' expect.
CREATE TRIGGER parts_search_insert AFTER INSERT ON parts
BEGIN
    INSERT INTO parts_fts (rowid, search_text) VALUES (new.seq, new.search_text);
    INSERT INTO parts_fts_trigram (rowid, search_text) VALUES (new.seq, new.search_text);
END;

CREATE TRIGGER parts_search_delete AFTER DELETE ON parts
BEGIN
    INSERT INTO parts_fts (parts_fts, rowid, search_text)
        VALUES ('delete', old.seq, old.search_text);
    INSERT INTO parts_fts_trigram (parts_fts_trigram, rowid, search_text)
        VALUES ('delete', old.seq, old.search_text);
END;

CREATE TRIGGER parts_search_update AFTER UPDATE ON parts
WHEN old.search_text IS NOT new.search_text OR old.seq IS NOT new.seq
BEGIN
    INSERT INTO parts_fts (parts_fts, rowid, search_text)
        VALUES ('delete', old.seq, old.search_text);
    INSERT INTO parts_fts_trigram (parts_fts_trigram, rowid, search_text)
        VALUES ('delete', old.seq, old.search_text);
    INSERT INTO parts_fts (rowid, search_text) VALUES (new.seq, new.search_text);
    INSERT INTO parts_fts_trigram (rowid, search_text) VALUES (new.seq, new.search_text);
END;

-- Counters. Deletes read `old`: `new` is NULL in a DELETE trigger.
CREATE TRIGGER messages_count_insert AFTER INSERT ON messages
BEGIN
    UPDATE sessions
    SET message_count = message_count + 1,
        updated_at = max(updated_at, new.created_at)
    WHERE id = new.session_id;
END;

CREATE TRIGGER messages_count_delete AFTER DELETE ON messages
BEGIN
    UPDATE sessions SET message_count = message_count - 1 WHERE id = old.session_id;
END;

CREATE TRIGGER messages_count_move AFTER UPDATE OF session_id ON messages
WHEN old.session_id IS NOT new.session_id
BEGIN
    UPDATE sessions SET message_count = message_count - 1 WHERE id = old.session_id;
    UPDATE sessions SET message_count = message_count + 1 WHERE id = new.session_id;
END;

CREATE TRIGGER parts_tool_count_insert AFTER INSERT ON parts
WHEN new.type = 'tool'
BEGIN
    UPDATE sessions SET tool_call_count = tool_call_count + 1 WHERE id = new.session_id;
END;

CREATE TRIGGER parts_tool_count_delete AFTER DELETE ON parts
WHEN old.type = 'tool'
BEGIN
    UPDATE sessions SET tool_call_count = tool_call_count - 1 WHERE id = old.session_id;
END;

CREATE TRIGGER parts_tool_count_update AFTER UPDATE OF type, session_id ON parts
WHEN (old.type = 'tool') IS NOT (new.type = 'tool') OR old.session_id IS NOT new.session_id
BEGIN
    UPDATE sessions SET tool_call_count = tool_call_count - 1
    WHERE id = old.session_id AND old.type = 'tool';
    UPDATE sessions SET tool_call_count = tool_call_count + 1
    WHERE id = new.session_id AND new.type = 'tool';
END;

-- updated_at: an update that did not set it explicitly still moves it forward (never
-- backward). recursive_triggers is off, so the inner UPDATE does not fire this again.
CREATE TRIGGER sessions_touch AFTER UPDATE ON sessions
WHEN new.updated_at IS old.updated_at
BEGIN
    UPDATE sessions
    SET updated_at = max(old.updated_at, CAST(unixepoch('subsec') * 1000 AS INTEGER))
    WHERE id = new.id;
END;

CREATE TRIGGER messages_touch AFTER UPDATE ON messages
WHEN new.updated_at IS old.updated_at
BEGIN
    UPDATE messages
    SET updated_at = max(old.updated_at, CAST(unixepoch('subsec') * 1000 AS INTEGER))
    WHERE id = new.id;
END;

CREATE TRIGGER parts_touch AFTER UPDATE ON parts
WHEN new.updated_at IS old.updated_at
BEGIN
    UPDATE parts
    SET updated_at = max(old.updated_at, CAST(unixepoch('subsec') * 1000 AS INTEGER))
    WHERE seq = new.seq;
END;

CREATE TRIGGER files_touch AFTER UPDATE ON files
WHEN new.updated_at IS old.updated_at
BEGIN
    UPDATE files
    SET updated_at = max(old.updated_at, CAST(unixepoch('subsec') * 1000 AS INTEGER))
    WHERE id = new.id;
END;
