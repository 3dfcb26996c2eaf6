-- Scribe schema, version 3: a part whose JSON is damaged no longer breaks search, repair
-- or deletion.
--
-- `parts.search_text` read `data ->> '$.text'` unguarded. The CHECK (json_valid(data))
-- keeps bad JSON out of every write, but bytes damaged on disk still reach it, and then
-- every evaluation of the column raised "malformed JSON": in a search's snippet, in
-- `SELECT *`, and in the search triggers' `old.search_text`, so searching, overwriting the
-- part (the repair path) and deleting its message or session all failed. The column is now
-- NULL while `data` is not valid JSON: such a part is simply not searchable.
--
-- A generated column's expression cannot be altered, so `parts` is rebuilt (SQLite's
-- create-copy-drop-rename recipe). It runs inside the migration transaction, where
-- `PRAGMA foreign_keys` cannot change; that is safe because no table references `parts`
-- (its own foreign key to messages is declared again and holds for every copied row), and
-- DROP TABLE fires no triggers, so no counter moves. The column list and order, the
-- constraints, the index and every trigger on `parts` are those of version 1, except
-- the search triggers (see below). `seq` is copied as is: both search indexes are keyed by
-- it and stay valid without a rebuild. No trigger on another table refers to `parts`.
--
-- Search triggers and damaged rows. An external-content FTS5 index must be told the exact
-- text to remove, and it was taken from `old.search_text`. If a part's JSON was damaged
-- after it was indexed (the only way it can be damaged), `old.search_text` is now NULL,
-- a 'delete' with it would remove nothing and the index would drift from the rows. The
-- original text is not stored anywhere else, so instead, when the old row's JSON is not
-- valid, the triggers rebuild both indexes from the rows (after the change, so the result
-- is exact). That costs a full re-index, but only on the rare change to a damaged row.
-- While a damaged row stays, its stale tokens stay in the indexes (a search may return the
-- part with an empty snippet) and FTS5's 'integrity-check' reports the mismatch, which is
-- what a checker should say about a damaged row.

CREATE TABLE parts_new (
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
    -- The text both search indexes hold for this part; NULL for parts that are not
    -- searched, and for parts whose JSON is damaged.
    search_text         TEXT GENERATED ALWAYS AS (
        CASE WHEN json_valid(data) THEN
            CASE type
                WHEN 'text' THEN data ->> '$.text'
                WHEN 'reasoning' THEN data ->> '$.text'
                WHEN 'tool' THEN concat_ws(char(10),
                    data ->> '$.tool',
                    data ->> '$.input',
                    data ->> '$.state.output',
                    data ->> '$.state.message')
            END
        END
    ) VIRTUAL,
    UNIQUE (message_id, position),
    FOREIGN KEY (session_id, message_id) REFERENCES messages (session_id, id) ON DELETE CASCADE
);

-- Only the stored columns: search_text is computed. A row already damaged must be copied
-- as it is (the rows are the user's; a repair is theirs to make), but INSERT checks the
-- CHECK (json_valid(data)) and would abort the whole migration, leaving a database that
-- cannot be opened at all. ignore_check_constraints (unlike foreign_keys) can change
-- inside a transaction; it is a connection setting, switched back right after the copy
-- (and again by scribe-db after every migration, in case this one fails half-way).
PRAGMA ignore_check_constraints = 1;

INSERT INTO parts_new (seq, id, message_id, session_id, position, type, data, created_at, updated_at)
SELECT seq, id, message_id, session_id, position, type, data, created_at, updated_at
FROM parts
ORDER BY seq;

PRAGMA ignore_check_constraints = 0;

DROP TABLE parts;

ALTER TABLE parts_new RENAME TO parts;

CREATE INDEX parts_session ON parts (session_id);

CREATE TRIGGER parts_search_insert AFTER INSERT ON parts
BEGIN
    INSERT INTO parts_fts (rowid, search_text) VALUES (new.seq, new.search_text);
    INSERT INTO parts_fts_trigram (rowid, search_text) VALUES (new.seq, new.search_text);
END;

CREATE TRIGGER parts_search_delete AFTER DELETE ON parts
BEGIN
    INSERT INTO parts_fts (parts_fts, rowid, search_text)
        SELECT 'delete', old.seq, old.search_text WHERE json_valid(old.data);
    INSERT INTO parts_fts_trigram (parts_fts_trigram, rowid, search_text)
        SELECT 'delete', old.seq, old.search_text WHERE json_valid(old.data);
    INSERT INTO parts_fts (parts_fts) SELECT 'rebuild' WHERE NOT json_valid(old.data);
    INSERT INTO parts_fts_trigram (parts_fts_trigram)
        SELECT 'rebuild' WHERE NOT json_valid(old.data);
END;

CREATE TRIGGER parts_search_update AFTER UPDATE ON parts
WHEN old.search_text IS NOT new.search_text OR old.seq IS NOT new.seq
    OR NOT json_valid(old.data)
BEGIN
    INSERT INTO parts_fts (parts_fts, rowid, search_text)
        SELECT 'delete', old.seq, old.search_text WHERE json_valid(old.data);
    INSERT INTO parts_fts_trigram (parts_fts_trigram, rowid, search_text)
        SELECT 'delete', old.seq, old.search_text WHERE json_valid(old.data);
    INSERT INTO parts_fts (rowid, search_text)
        SELECT new.seq, new.search_text WHERE json_valid(old.data);
    INSERT INTO parts_fts_trigram (rowid, search_text)
        SELECT new.seq, new.search_text WHERE json_valid(old.data);
    INSERT INTO parts_fts (parts_fts) SELECT 'rebuild' WHERE NOT json_valid(old.data);
    INSERT INTO parts_fts_trigram (parts_fts_trigram)
        SELECT 'rebuild' WHERE NOT json_valid(old.data);
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

CREATE TRIGGER parts_touch AFTER UPDATE ON parts
WHEN new.updated_at IS old.updated_at
BEGIN
    UPDATE parts
    SET updated_at = max(old.updated_at, CAST(unixepoch('subsec') * 1000 AS INTEGER))
    WHERE seq = new.seq;
END;
