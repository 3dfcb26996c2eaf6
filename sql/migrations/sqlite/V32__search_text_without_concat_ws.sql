-- Scribe schema, version 32: the view `parts_search` joins a tool part's fields without
-- `concat_ws`, so the store reads and changes in any SQLite of 3.38 or newer.
--
-- Why. `concat_ws` came with SQLite 3.44 (November 2023). Scribe bundles a newer SQLite,
-- but the `sqlite3` shell and language bindings of many systems link an older one
-- (Debian 12: 3.40.1; macOS 13 and 14: 3.39 and 3.43). There, every statement that read
-- `parts_search` failed with "no such function: concat_ws": the text columns of both FTS5
-- tables (their external content), and so `snippet()`; every delete of a part or change
-- of its data (the triggers take the old text out of the indexes through the view), and
-- with foreign keys on every delete of a message or a session. The rest of the schema
-- needs nothing newer than 3.38 (`->>`).
--
-- What changes. A tool part's search text is its name, input, output and error joined by
-- a newline, a field that is NULL (absent) left out with its newline: what `concat_ws`
-- gave, to the byte (an empty string is kept with its newline as there, a number is
-- joined as its text, and `||` copies a value whole where `substr()` would stop at a NUL).
-- The same text matters: FTS5 takes a row out of an external-content index by the text it
-- indexed, which the view gives again, so a text that differed for a row indexed before
-- this version would corrupt the index. Nothing is re-indexed and no row changes.
-- `parts_search_trigram` reads `parts_search`, so it is dropped and made again with it,
-- unchanged. The triggers read the view by name and stay.
--
-- PostgreSQL's version 32 is a no-op (`concat_ws` is in every supported version).

DROP VIEW parts_search_trigram;
DROP VIEW parts_search;

-- As V18 (see there), but for the tool branch: the first present field, then each later
-- present one after a newline.
CREATE VIEW parts_search AS
SELECT seq,
       CASE WHEN json_valid(data) THEN CAST(
           CASE type
               WHEN 'text' THEN data ->> '$.text'
               WHEN 'reasoning' THEN data ->> '$.text'
               WHEN 'tool' THEN
                   CASE
                       WHEN data ->> '$.tool' IS NOT NULL THEN data ->> '$.tool'
                           || coalesce(char(10) || (data ->> '$.input'), '')
                           || coalesce(char(10) || (data ->> '$.state.output'), '')
                           || coalesce(char(10) || (data ->> '$.state.message'), '')
                       WHEN data ->> '$.input' IS NOT NULL THEN data ->> '$.input'
                           || coalesce(char(10) || (data ->> '$.state.output'), '')
                           || coalesce(char(10) || (data ->> '$.state.message'), '')
                       WHEN data ->> '$.state.output' IS NOT NULL THEN data ->> '$.state.output'
                           || coalesce(char(10) || (data ->> '$.state.message'), '')
                       ELSE coalesce(data ->> '$.state.message', '')
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
