-- Scribe schema for PostgreSQL, version 1: the same tables as sql/migrations/sqlite/V1,
-- with the same columns in the same order (sqlgen checks that both give the same Rust
-- models), kept by the database the same way.
--
-- Types: times and counters are BIGINT (milliseconds overflow a 4-byte INTEGER), money is
-- DOUBLE PRECISION, flags BOOLEAN. Part JSON stays TEXT, so a part this build does not
-- know round-trips byte for byte (jsonb would reorder keys and drop duplicates); a CHECK
-- keeps invalid JSON out. Ids and titles compare in the "C" collation, byte order like
-- SQLite's, so id-prefix ranges and title lineage ranges mean the same on both.
--
-- What SQLite's triggers derive is derived here too: message and tool-call counters and
-- updated_at by plpgsql triggers, the searchable text by a generated column, and the two
-- search indexes (words, folded for diacritics; trigrams for substrings and CJK) by GIN
-- indexes, which maintain themselves. Version 3 of the SQLite schema (damaged JSON must
-- not break search) needs no counterpart: invalid JSON cannot be stored here.

CREATE EXTENSION IF NOT EXISTS unaccent;
CREATE EXTENSION IF NOT EXISTS pg_trgm;

-- Words as FTS5's `unicode61 remove_diacritics 2` sees them: lowercased, accents folded.
CREATE TEXT SEARCH CONFIGURATION scribe (COPY = simple);
ALTER TEXT SEARCH CONFIGURATION scribe
    ALTER MAPPING FOR hword, hword_part, word WITH unaccent, simple;

-- Whether a text is valid JSON (PostgreSQL 15 has no pg_input_is_valid).
CREATE FUNCTION scribe_json_valid(doc TEXT) RETURNS BOOLEAN
LANGUAGE plpgsql IMMUTABLE STRICT AS $$
BEGIN
    PERFORM doc::jsonb;
    RETURN TRUE;
EXCEPTION WHEN others THEN
    RETURN FALSE;
END;
$$;

-- The text both search indexes hold for a part (SQLite's parts.search_text expression):
-- a text or reasoning part's text; a tool's name, input, output and error, one per line.
CREATE FUNCTION scribe_search_text(kind TEXT, data TEXT) RETURNS TEXT
LANGUAGE plpgsql IMMUTABLE AS $$
DECLARE
    doc JSONB;
BEGIN
    IF data IS NULL OR NOT scribe_json_valid(data) THEN
        RETURN NULL;
    END IF;
    doc := data::jsonb;
    RETURN CASE kind
        WHEN 'text' THEN doc ->> 'text'
        WHEN 'reasoning' THEN doc ->> 'text'
        WHEN 'tool' THEN concat_ws(E'\n',
            doc ->> 'tool',
            doc ->> 'input',
            doc #>> '{state,output}',
            doc #>> '{state,message}')
    END;
END;
$$;

-- The current time in milliseconds, for updated_at.
CREATE FUNCTION scribe_now_ms() RETURNS BIGINT
LANGUAGE sql VOLATILE AS $$
    SELECT CAST(floor(extract(epoch FROM clock_timestamp()) * 1000) AS BIGINT)
$$;

CREATE TABLE sessions (
    id                  TEXT COLLATE "C" PRIMARY KEY NOT NULL,
    parent_session_id   TEXT REFERENCES sessions (id) ON DELETE SET NULL,
    kind                TEXT NOT NULL DEFAULT 'normal'
                        CHECK (kind IN ('normal', 'title', 'task', 'fork', 'continuation')),
    source              TEXT NOT NULL DEFAULT 'cli',
    user_id             TEXT,
    directory           TEXT,
    title               TEXT COLLATE "C",
    model               TEXT,
    model_config        TEXT CHECK (model_config IS NULL OR scribe_json_valid(model_config)),
    system_prompt       TEXT,
    permission          TEXT CHECK (permission IS NULL OR scribe_json_valid(permission)),
    message_count       BIGINT NOT NULL DEFAULT 0,
    tool_call_count     BIGINT NOT NULL DEFAULT 0,
    api_call_count      BIGINT NOT NULL DEFAULT 0,
    input_tokens        BIGINT NOT NULL DEFAULT 0,
    output_tokens       BIGINT NOT NULL DEFAULT 0,
    cache_read_tokens   BIGINT NOT NULL DEFAULT 0,
    cache_write_tokens  BIGINT NOT NULL DEFAULT 0,
    reasoning_tokens    BIGINT NOT NULL DEFAULT 0,
    estimated_cost_usd  DOUBLE PRECISION NOT NULL DEFAULT 0,
    actual_cost_usd     DOUBLE PRECISION,
    billing_provider    TEXT,
    billing_base_url    TEXT,
    billing_mode        TEXT,
    cost_status         TEXT,
    cost_source         TEXT,
    pricing_version     TEXT,
    -- A foreign key to messages, added below once that table exists.
    summary_message_id  TEXT,
    created_at          BIGINT NOT NULL,
    updated_at          BIGINT NOT NULL,
    ended_at            BIGINT,
    end_reason          TEXT,
    archived_at         BIGINT,
    compacting_at       BIGINT
);

CREATE UNIQUE INDEX sessions_title_unique ON sessions (title) WHERE title IS NOT NULL;
CREATE INDEX sessions_parent ON sessions (parent_session_id);
CREATE INDEX sessions_source ON sessions (source, created_at);
CREATE INDEX sessions_user ON sessions (user_id);
CREATE INDEX sessions_created ON sessions (created_at);
CREATE INDEX sessions_updated ON sessions (updated_at);
CREATE INDEX sessions_summary_message ON sessions (summary_message_id);

CREATE TABLE messages (
    id                  TEXT COLLATE "C" PRIMARY KEY NOT NULL,
    session_id          TEXT COLLATE "C" NOT NULL REFERENCES sessions (id) ON DELETE CASCADE,
    parent_id           TEXT,
    role                TEXT NOT NULL CHECK (role IN ('user', 'assistant', 'system', 'tool')),
    agent               TEXT,
    provider            TEXT,
    model               TEXT,
    finish_reason       TEXT,
    is_summary          BOOLEAN NOT NULL DEFAULT FALSE,
    input_tokens        BIGINT NOT NULL DEFAULT 0,
    output_tokens       BIGINT NOT NULL DEFAULT 0,
    cache_read_tokens   BIGINT NOT NULL DEFAULT 0,
    cache_write_tokens  BIGINT NOT NULL DEFAULT 0,
    reasoning_tokens    BIGINT NOT NULL DEFAULT 0,
    cost_usd            DOUBLE PRECISION NOT NULL DEFAULT 0,
    error               TEXT CHECK (error IS NULL OR scribe_json_valid(error)),
    created_at          BIGINT NOT NULL,
    updated_at          BIGINT NOT NULL,
    finished_at         BIGINT
);

CREATE INDEX messages_session_created ON messages (session_id, created_at, id);
CREATE UNIQUE INDEX messages_session_id ON messages (session_id, id);

ALTER TABLE sessions ADD CONSTRAINT sessions_summary_message_fk
    FOREIGN KEY (summary_message_id) REFERENCES messages (id) ON DELETE SET NULL;

CREATE TABLE parts (
    seq                 BIGINT GENERATED BY DEFAULT AS IDENTITY PRIMARY KEY,
    id                  TEXT COLLATE "C" NOT NULL UNIQUE,
    message_id          TEXT COLLATE "C" NOT NULL,
    session_id          TEXT COLLATE "C" NOT NULL,
    position            BIGINT NOT NULL,
    type                TEXT NOT NULL,
    data                TEXT NOT NULL CHECK (scribe_json_valid(data)),
    created_at          BIGINT NOT NULL,
    updated_at          BIGINT NOT NULL,
    search_text         TEXT GENERATED ALWAYS AS (scribe_search_text(type, data)) STORED,
    UNIQUE (message_id, position),
    FOREIGN KEY (session_id, message_id) REFERENCES messages (session_id, id) ON DELETE CASCADE
);

CREATE INDEX parts_session ON parts (session_id);

-- Search. Words: the text split on every non-alphanumeric (as FTS5's unicode61 does, so
-- `config` finds `my-app.config.ts`), folded by the `scribe` configuration. Trigrams: for
-- substrings and CJK text. A query repeats the indexed expression to use it.
CREATE INDEX parts_search_words ON parts USING gin (
    to_tsvector('scribe'::regconfig, regexp_replace(search_text, '[^[:alnum:]]+', ' ', 'g'))
);
CREATE INDEX parts_search_trigram ON parts USING gin (search_text gin_trgm_ops);

CREATE TABLE files (
    id                  TEXT COLLATE "C" PRIMARY KEY NOT NULL,
    session_id          TEXT COLLATE "C" NOT NULL REFERENCES sessions (id) ON DELETE CASCADE,
    path                TEXT NOT NULL,
    content             TEXT NOT NULL,
    version             BIGINT NOT NULL CHECK (version > 0),
    created_at          BIGINT NOT NULL,
    updated_at          BIGINT NOT NULL,
    UNIQUE (session_id, path, version)
);

-- Counters (SQLite's messages_count_* and parts_tool_count_* triggers).
CREATE FUNCTION scribe_messages_count() RETURNS TRIGGER
LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP = 'INSERT' THEN
        UPDATE sessions
        SET message_count = message_count + 1,
            updated_at = greatest(updated_at, NEW.created_at)
        WHERE id = NEW.session_id;
    ELSIF TG_OP = 'DELETE' THEN
        UPDATE sessions SET message_count = message_count - 1 WHERE id = OLD.session_id;
    ELSE
        UPDATE sessions SET message_count = message_count - 1 WHERE id = OLD.session_id;
        UPDATE sessions SET message_count = message_count + 1 WHERE id = NEW.session_id;
    END IF;
    RETURN NULL;
END;
$$;

CREATE TRIGGER messages_count_insert AFTER INSERT ON messages
FOR EACH ROW EXECUTE FUNCTION scribe_messages_count();
CREATE TRIGGER messages_count_delete AFTER DELETE ON messages
FOR EACH ROW EXECUTE FUNCTION scribe_messages_count();
CREATE TRIGGER messages_count_move AFTER UPDATE OF session_id ON messages
FOR EACH ROW WHEN (OLD.session_id IS DISTINCT FROM NEW.session_id)
EXECUTE FUNCTION scribe_messages_count();

CREATE FUNCTION scribe_parts_tool_count() RETURNS TRIGGER
LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP IN ('UPDATE', 'DELETE') AND OLD.type = 'tool' THEN
        UPDATE sessions SET tool_call_count = tool_call_count - 1 WHERE id = OLD.session_id;
    END IF;
    IF TG_OP IN ('UPDATE', 'INSERT') AND NEW.type = 'tool' THEN
        UPDATE sessions SET tool_call_count = tool_call_count + 1 WHERE id = NEW.session_id;
    END IF;
    RETURN NULL;
END;
$$;

CREATE TRIGGER parts_tool_count_insert AFTER INSERT ON parts
FOR EACH ROW WHEN (NEW.type = 'tool') EXECUTE FUNCTION scribe_parts_tool_count();
CREATE TRIGGER parts_tool_count_delete AFTER DELETE ON parts
FOR EACH ROW WHEN (OLD.type = 'tool') EXECUTE FUNCTION scribe_parts_tool_count();
CREATE TRIGGER parts_tool_count_update AFTER UPDATE OF type, session_id ON parts
FOR EACH ROW WHEN ((OLD.type = 'tool') IS DISTINCT FROM (NEW.type = 'tool')
    OR OLD.session_id IS DISTINCT FROM NEW.session_id)
EXECUTE FUNCTION scribe_parts_tool_count();

-- updated_at: an update that did not set it still moves it forward, never backward
-- (SQLite's *_touch triggers). BEFORE UPDATE changes the row in place, so nothing recurses.
CREATE FUNCTION scribe_touch() RETURNS TRIGGER
LANGUAGE plpgsql AS $$
BEGIN
    IF NEW.updated_at IS NOT DISTINCT FROM OLD.updated_at THEN
        NEW.updated_at := greatest(OLD.updated_at, scribe_now_ms());
    END IF;
    RETURN NEW;
END;
$$;

CREATE TRIGGER sessions_touch BEFORE UPDATE ON sessions
FOR EACH ROW EXECUTE FUNCTION scribe_touch();
CREATE TRIGGER messages_touch BEFORE UPDATE ON messages
FOR EACH ROW EXECUTE FUNCTION scribe_touch();
CREATE TRIGGER parts_touch BEFORE UPDATE ON parts
FOR EACH ROW EXECUTE FUNCTION scribe_touch();
CREATE TRIGGER files_touch BEFORE UPDATE ON files
FOR EACH ROW EXECUTE FUNCTION scribe_touch();
