-- Scribe schema, version 18: the search triggers and the view `parts_search` test a part's
-- type with `=` and OR instead of `IN ('text', 'reasoning', 'tool')`. Same rows, same
-- queue, same indexes; only cheaper.
--
-- Why. SQLite codes an IN over a list of three or more constants, whose left side no index
-- serves, as a temporary b-tree: at every execution of the statement (and of a trigger's
-- program) it opens an ephemeral table, inserts the three strings and probes it (EXPLAIN
-- shows OpenEphemeral and three IdxInsert; lists of one or two values are already compared
-- in place). `type` is NOT NULL, so `type = 'text' OR type = 'reasoning' OR type = 'tool'`
-- is true for exactly the rows the IN was, and compiles to three comparisons. Every
-- inserted part ran one such IN in `parts_search_insert`'s WHEN; every read of
-- `parts_search` (the indexer's look-ups and range scans, snippet(), FTS5's deletes in the
-- triggers, `scribe db check`) ran another. No index is on `type`, so the OR cannot be
-- rewritten into an IN that uses one.
--
-- What is re-created, exactly as V11 left it but for the test: the views `parts_search`
-- (columns and rows unchanged: it is the external content of `parts_fts`) and
-- `parts_search_trigram` (unchanged; it reads `parts_search`, so it is dropped and made
-- again with it), and the triggers `parts_search_insert` and `parts_search_update`.
-- `parts_search_delete`, `parts_search_dequeue` and the counters have no IN and stay.
-- Nothing is re-indexed and the queue is untouched: no row changes.
--
-- PostgreSQL's version 18 is a no-op (its IN over constants is a scalar array compare,
-- not a temporary table).

DROP VIEW parts_search_trigram;
DROP VIEW parts_search;

-- As V11 (see there), the type tested with = and OR.
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
WHERE type = 'text' OR type = 'reasoning' OR type = 'tool';

-- As V7 and V11 (see there), unchanged.
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

DROP TRIGGER parts_search_insert;
DROP TRIGGER parts_search_update;

-- As V7 and V11 (see there), the type tested with = and OR.
CREATE TRIGGER parts_search_insert AFTER INSERT ON parts
WHEN new.type = 'text' OR new.type = 'reasoning' OR new.type = 'tool'
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
        SELECT new.seq WHERE new.type = 'text' OR new.type = 'reasoning' OR new.type = 'tool';
END;
