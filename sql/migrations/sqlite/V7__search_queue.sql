-- Scribe schema, version 7: full-text indexing leaves the write path.
--
-- Until version 6, triggers tokenized every part into both search indexes inside the
-- transaction that wrote it, and every streamed flush of a part deleted and re-added its
-- whole text: most of an append's cost, and most of the file (the trigram index was half
-- of it). Now a write only records what must be indexed, and an indexer (scribe-db's
-- `search_index`) indexes it in batches, in the writing process and in any process that
-- searches; a search first indexes what is waiting, so it still finds every message
-- committed before it started.
--
-- The guarantee that no writer can forget the indexes still rests on triggers, in any
-- language: inserting, changing or deleting a part keeps this invariant, which the
-- indexer keeps too:
--
--   every searchable part is EITHER waiting in `search_queue` (and then has nothing in
--   either index) OR indexed with exactly its current text (and then is not waiting).
--
-- - insert: a searchable part (text, reasoning, tool) is queued.
-- - change of its type or data: a waiting part stays waiting (so a part streamed in many
--   flushes costs one queue lookup per flush, and is indexed once it settles). An indexed
--   part has its old text taken out of the indexes at once, from the row as it is before
--   the change (which is exactly what was indexed), and is queued again.
-- - delete: a waiting part leaves the queue; an indexed part's text is taken out at once.
-- So deleting or changing a part before it was indexed can never leave a stale hit, and a
-- crash between a commit and its indexing loses nothing: the queue is in the same file.
--
-- Storage. The word index holds every searchable part. The trigram index (substrings of
-- CJK and other scripts written without spaces) now holds only the parts whose text has
-- such characters: a query is routed to it only when it has them, and its alternatives
-- that can match other text are answered from that text directly (crates/db search.rs).
-- Both indexes are external-content tables over views of `parts`, so the content each
-- index is checked against ('integrity-check', 'rebuild') is exactly what it should hold.
-- The trigram index was about half of a database's bytes; over CJK text only it is a
-- small fraction.
--
-- Damaged part JSON (see V3): an indexed part whose JSON was damaged on disk no longer
-- yields the text that was indexed, so its tokens cannot be taken out one by one; as in
-- V3, the change or delete of such a part rebuilds both indexes from the rows, and since a
-- rebuild indexes every part as it is, the queue is emptied with it.
--
-- Migration: both indexes are created empty and every searchable part is queued; the
-- indexer of the first process that opens the file fills them (a search before that
-- indexes them itself).

DROP TRIGGER parts_search_insert;
DROP TRIGGER parts_search_delete;
DROP TRIGGER parts_search_update;
DROP TABLE parts_fts;
DROP TABLE parts_fts_trigram;

-- Parts whose current text is in neither index yet, by parts.seq (not a foreign key: the
-- delete trigger removes the row with its part).
CREATE TABLE search_queue (
    seq INTEGER PRIMARY KEY NOT NULL
);

-- The searchable parts and their text (what the word index holds). `damaged`: the part's
-- JSON is not valid, so its text cannot be read (see V3).
CREATE VIEW parts_search AS
SELECT seq,
       search_text,
       CASE WHEN search_text IS NULL THEN NOT json_valid(data) ELSE 0 END AS damaged
FROM parts
WHERE type IN ('text', 'reasoning', 'tool');

-- What the trigram index holds: the searchable parts whose text has characters of a
-- script written without spaces (the ranges of `scribe_db::search::is_spaceless_script`:
-- Thai, Lao, Myanmar, Khmer, Hangul, CJK, kana, Bopomofo …), and damaged parts (their
-- text cannot be read, so the index may still hold their tokens, and the row must stay
-- where snippet() and the index checks look for it). Only rebuilds, checks and snippets
-- read this definition; the indexer decides the same in Rust (a character class GLOB over
-- every part would cost more than indexing it), and the triggers ask the index itself
-- (`parts_fts_trigram_docsize`) whether it holds a part.
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

CREATE VIRTUAL TABLE parts_fts USING fts5(
    search_text,
    content='parts_search',
    content_rowid='seq',
    tokenize='unicode61 remove_diacritics 2'
);

CREATE VIRTUAL TABLE parts_fts_trigram USING fts5(
    search_text,
    content='parts_search_trigram',
    content_rowid='seq',
    tokenize='trigram'
);

INSERT INTO search_queue (seq)
SELECT seq FROM parts WHERE type IN ('text', 'reasoning', 'tool');

CREATE TRIGGER parts_search_insert AFTER INSERT ON parts
WHEN new.type IN ('text', 'reasoning', 'tool')
BEGIN
    INSERT OR IGNORE INTO search_queue (seq) VALUES (new.seq);
END;

-- BEFORE the change, so the views still give the text as it was indexed. Neither this
-- trigger nor any other names `search_text` of OLD or NEW: SQLite computes a virtual
-- column referenced by a trigger for every row the statement touches, even when the WHEN
-- clause is false, and that is a JSON extraction of the whole part per streamed flush.
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

-- `seq` is the key of both indexes and of the queue; nothing renumbers parts.
CREATE TRIGGER parts_seq_fixed BEFORE UPDATE OF seq ON parts
WHEN old.seq IS NOT new.seq
BEGIN
    SELECT RAISE(ABORT, 'parts.seq is the search key of a part and cannot change');
END;
