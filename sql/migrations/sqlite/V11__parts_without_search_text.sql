-- Scribe schema, version 11: `parts` no longer has the generated `search_text` column; the
-- text a part is searched by is computed where search reads it (the views `parts_search`
-- and `parts_search_trigram`, and the few queries that show it).
--
-- Why. SQLite computes every generated column of a row that an UPDATE writes, VIRTUAL or
-- not, whether anything reads it or not. `search_text` is a JSON extraction of the whole
-- part (for a tool, four of them), so every streamed flush of a reply paid for extracting
-- the text it had just written, which nothing read (the part waits in the search queue
-- until it settles, V7): about a fifth of a flush. The views compute the same text only
-- where it is read: by the indexer (once per part), by snippet(), by the index checks.
--
-- The expression is V3's, unchanged (the text of text and reasoning parts; a tool's name,
-- input, output and error, one per line; NULL while `data` is not valid JSON), written
-- once, in `parts_search`; `parts_search_trigram` reads it from there. CAST AS TEXT gives
-- the view what the column's TEXT affinity gave (a JSON number as its text). Both views
-- keep their names and columns, so the indexer (crates/db search_index.rs) and the FTS5
-- tables (external content over the views) see the same rows as before.
--
-- `CHECK (json_valid(data))` stays: it is what keeps bad JSON out of every write from any
-- process or language (V3); damaged bytes on disk remain the only way a part's JSON is
-- invalid, and the views and the search triggers treat such a part as V3 and V7 say.
-- Measured in raw rusqlite (crates/bench/examples/flush_experiment.rs), one flush of a
-- 10 KB text part: 96 µs with V10's table, 75 µs without the generated column, 66 µs
-- without the CHECK too. The CHECK's 9 µs buy what V3 relies on.
--
-- The rebuilt `parts` comes after `search_queue` in the catalog now; `scribe_db::copy`
-- fills an SQLite target's queue with INSERT OR IGNORE, since inserting the parts queues
-- them already, whichever comes first.
--
-- The rebuild is V3's recipe (create, copy, drop, rename) inside the migration
-- transaction. What it keeps:
-- - every row as it is, damaged ones included (ignore_check_constraints around the copy,
--   as in V3), and every `seq`: both FTS5 indexes and `search_queue` are keyed by it, so
--   they stay exact without re-indexing anything; a part waiting in the queue keeps
--   waiting, an indexed one stays indexed (V7's invariant holds across the rebuild);
-- - the columns (less `search_text`) in their order, the constraints, the foreign key to
--   messages, the index `parts_session`, and every trigger on `parts` (V3's counters and
--   touch, V7's search queue triggers and `parts_seq_fixed`), re-created as they were.
-- DROP TABLE fires no triggers and no table references `parts`, so no counter moves and
-- the queue is untouched. The views are dropped first and made again after the rename
-- (SQLite checks every view when a table is renamed).

DROP VIEW parts_search_trigram;
DROP VIEW parts_search;

CREATE TABLE parts_new (
    -- Stable integer key of both search indexes and of search_queue (an INTEGER PRIMARY
    -- KEY survives VACUUM, an implicit rowid does not).
    seq                 INTEGER PRIMARY KEY,
    id                  TEXT NOT NULL UNIQUE,
    message_id          TEXT NOT NULL,
    session_id          TEXT NOT NULL,
    position            INTEGER NOT NULL,
    type                TEXT NOT NULL,
    data                TEXT NOT NULL CHECK (json_valid(data)),
    created_at          INTEGER NOT NULL,
    updated_at          INTEGER NOT NULL,
    UNIQUE (message_id, position),
    FOREIGN KEY (session_id, message_id) REFERENCES messages (session_id, id) ON DELETE CASCADE
);

PRAGMA ignore_check_constraints = 1;

INSERT INTO parts_new (seq, id, message_id, session_id, position, type, data, created_at, updated_at)
SELECT seq, id, message_id, session_id, position, type, data, created_at, updated_at
FROM parts
ORDER BY seq;

PRAGMA ignore_check_constraints = 0;

DROP TABLE parts;

ALTER TABLE parts_new RENAME TO parts;

CREATE INDEX parts_session ON parts (session_id);

-- The searchable parts and the text the word index holds for each; `damaged`: the part's
-- JSON is not valid, so its text cannot be read (V3). The one place SQLite spells how a
-- part's searched text is read from its JSON.
CREATE VIEW parts_search AS
SELECT seq,
       CASE WHEN json_valid(data) THEN CAST(
           CASE type
               WHEN 'text' THEN data ->> '$.text'
               WHEN 'reasoning' THEN data ->> '$.text'
               WHEN 'tool' THEN concat_ws(char(10),
                   data ->> '$.tool',
                   data ->> '$.input',
                   data ->> '$.state.output',
                   data ->> '$.state.message')
           END AS TEXT)
       END AS search_text,
       NOT json_valid(data) AS damaged
FROM parts
WHERE type IN ('text', 'reasoning', 'tool');

-- As V7 (see there): the parts whose text has characters of a script written without
-- spaces, and damaged parts.
CREATE VIEW parts_search_trigram AS
SELECT seq, search_text
FROM parts_search
WHERE damaged
   OR search_text GLOB '*[' || char(
           0x0E00, 0x2D, 0x0EFF,
           0x1000, 0x2D, 0x109F,
           0x1780, 0x2D, 0x17FF,
           0x1100, 0x2D, 0x11FF,
           0x2E80, 0x2D, 0x2FDF,
           0x3005, 0x2D, 0x3007,
           0x3021, 0x2D, 0x3029,
           0x3040, 0x2D, 0x31FF,
           0x3400, 0x2D, 0x4DBF,
           0x4E00, 0x2D, 0x9FFF,
           0xA960, 0x2D, 0xA97F,
           0xAC00, 0x2D, 0xD7FF,
           0xF900, 0x2D, 0xFAFF,
           0xFF66, 0x2D, 0xFFDC,
           0x20000, 0x2D, 0x3134F
       ) || ']*';

-- V3's counters and touch.
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

-- V7's search queue triggers (V7 says what each keeps).
CREATE TRIGGER parts_search_insert AFTER INSERT ON parts
WHEN new.type IN ('text', 'reasoning', 'tool')
BEGIN
    INSERT OR IGNORE INTO search_queue (seq) VALUES (new.seq);
END;

CREATE TRIGGER parts_search_update BEFORE UPDATE OF type, data ON parts
WHEN NOT EXISTS (SELECT 1 FROM search_queue WHERE seq = old.seq)
BEGIN
    INSERT INTO parts_fts (parts_fts) SELECT 'rebuild' WHERE NOT json_valid(old.data);
    INSERT INTO parts_fts_trigram (parts_fts_trigram)
        SELECT 'rebuild' WHERE NOT json_valid(old.data);
    DELETE FROM search_queue WHERE NOT json_valid(old.data);
    INSERT INTO parts_fts (parts_fts, rowid, search_text)
        SELECT 'delete', seq, search_text FROM parts_search WHERE seq = old.seq;
    INSERT INTO parts_fts_trigram (parts_fts_trigram, rowid, search_text)
        SELECT 'delete', seq, search_text FROM parts_search
        WHERE seq = old.seq
          AND EXISTS (SELECT 1 FROM parts_fts_trigram_docsize WHERE id = old.seq);
    INSERT OR IGNORE INTO search_queue (seq)
        SELECT new.seq WHERE new.type IN ('text', 'reasoning', 'tool');
END;

CREATE TRIGGER parts_search_delete BEFORE DELETE ON parts
WHEN NOT EXISTS (SELECT 1 FROM search_queue WHERE seq = old.seq)
BEGIN
    INSERT INTO parts_fts (parts_fts) SELECT 'rebuild' WHERE NOT json_valid(old.data);
    INSERT INTO parts_fts_trigram (parts_fts_trigram)
        SELECT 'rebuild' WHERE NOT json_valid(old.data);
    DELETE FROM search_queue WHERE NOT json_valid(old.data);
    INSERT INTO parts_fts (parts_fts, rowid, search_text)
        SELECT 'delete', seq, search_text FROM parts_search WHERE seq = old.seq;
    INSERT INTO parts_fts_trigram (parts_fts_trigram, rowid, search_text)
        SELECT 'delete', seq, search_text FROM parts_search
        WHERE seq = old.seq
          AND EXISTS (SELECT 1 FROM parts_fts_trigram_docsize WHERE id = old.seq);
END;

CREATE TRIGGER parts_search_dequeue AFTER DELETE ON parts
BEGIN
    DELETE FROM search_queue WHERE seq = old.seq;
END;

CREATE TRIGGER parts_seq_fixed BEFORE UPDATE OF seq ON parts
WHEN old.seq IS NOT new.seq
BEGIN
    SELECT RAISE(ABORT, 'parts.seq is the search key of a part and cannot change');
END;
