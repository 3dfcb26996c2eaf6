-- Scribe schema, version 32: the view `parts_search` is written in the SQL of SQLite 3.34,
-- so the `sqlite3` shell and language bindings of older systems can open a store.
--
-- Why. Scribe bundles SQLite 3.51, but the shell and the bindings of many systems link
-- their own, older one (Debian 12: 3.40; Ubuntu 22.04: 3.37; RHEL 9: 3.34; macOS 13
-- and 14: 3.39 and 3.43), and the view used two things they may lack:
--
-- * the operator `->>`, which came with SQLite 3.38. An older SQLite parses every view
--   and trigger when it loads the schema, so it could not open a store at all: every
--   statement, `SELECT count(*) FROM sessions` too, failed with "malformed database
--   schema (parts_search) - near ">>": syntax error";
-- * the function `concat_ws`, which came with 3.44. Up to 3.43 the store opened, but
--   every statement that read the view failed with "no such function: concat_ws": the
--   text of both FTS5 tables (the view is their external content) and so `snippet()`;
--   every delete of a part or change of its data (the triggers take the old text out of
--   the indexes through the view); and with foreign keys on, every delete of a message
--   or a session.
--
-- What changes. `data ->> P` is written `json_extract(data, P)`: for one path the two
-- give the same value (a string's contents; a number as a number; true and false as 1
-- and 0; an object or array as its compact JSON). A tool part's fields are joined by
-- `||` in a CASE: the first present field, then each later present one after a newline,
-- a NULL (absent) field left out with its newline, which is what `concat_ws` gave, to
-- the byte (an empty string is kept with its newline, a number is joined as its text, and
-- `||` copies a value whole where `substr()` would stop at a NUL). The same text matters:
-- FTS5 takes a row out of an external-content index by the text the view gives again, so
-- a text that differed for a row indexed before this version would corrupt the index.
-- Nothing is re-indexed and no row changes. `parts_search_trigram` reads `parts_search`,
-- so it is dropped and made again with it, unchanged. The triggers read the view by name
-- and stay. The rest of the schema needs nothing newer than 3.34 (FTS5's trigram
-- tokenizer; tests/tests/sqlite3_shell.rs holds that).
--
-- PostgreSQL's version 32 is a no-op.

DROP VIEW parts_search_trigram;
DROP VIEW parts_search;

-- As V18 (see there), with json_extract for ->> and the tool's fields joined by ||.
CREATE VIEW parts_search AS
SELECT seq,
       CASE WHEN json_valid(data) THEN CAST(
           CASE type
               WHEN 'text' THEN json_extract(data, '$.text')
               WHEN 'reasoning' THEN json_extract(data, '$.text')
               WHEN 'tool' THEN
                   CASE
                       WHEN json_extract(data, '$.tool') IS NOT NULL
                           THEN json_extract(data, '$.tool')
                               || coalesce(char(10) || json_extract(data, '$.input'), '')
                               || coalesce(char(10) || json_extract(data, '$.state.output'), '')
                               || coalesce(char(10) || json_extract(data, '$.state.message'), '')
                       WHEN json_extract(data, '$.input') IS NOT NULL
                           THEN json_extract(data, '$.input')
                               || coalesce(char(10) || json_extract(data, '$.state.output'), '')
                               || coalesce(char(10) || json_extract(data, '$.state.message'), '')
                       WHEN json_extract(data, '$.state.output') IS NOT NULL
                           THEN json_extract(data, '$.state.output')
                               || coalesce(char(10) || json_extract(data, '$.state.message'), '')
                       ELSE coalesce(json_extract(data, '$.state.message'), '')
                   END
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
