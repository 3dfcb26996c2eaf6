-- Scribe schema for PostgreSQL, version 26: a part's search row (`parts_fts`: its text and
-- its words) is kept in the table's own page, uncompressed, up to 8 kB, so a search reads
-- each matching part's words where it finds the row.
--
-- A row over 2 kB (a part of about a kilobyte of text or more: the text and its words)
-- was compressed (lz4 since V21) and, when that was not enough, its text or words moved to
-- the TOAST table, and a word search reads the words of every matching part twice (the
-- match test of a sequential scan or a lossy page, then `ts_rank_cd`), each time
-- decompressing them or fetching them from TOAST (an index probe and its chunks). On the
-- bench's corpus (10,000 messages, 11,645 searchable parts, 57% of them over 2 kB) the
-- words of all parts took ~20-25 ms to read that way and ~4-5 ms kept whole, and `error`
-- (9,050 matching parts) took ~110 ms against ~60 ms (docs/measurements/postgres.md,
-- stop 39). `toast_tuple_target` is the row size from which PostgreSQL compresses or moves
-- a row's values (2,032 bytes by default; 8,160, the most it takes, keeps every row that
-- fits a page whole). The table takes more pages (~26 against ~22 MB there, heap and TOAST
-- together), and a write no longer compresses the two values. One block, which sqlgen
-- skips: it changes no table's shape.
DO $$
BEGIN
    ALTER TABLE parts_fts SET (toast_tuple_target = 8160);
END;
$$;

-- The setting applies to rows written from now on; the rows already stored are written
-- again, each value rebuilt unchanged (a concatenation with nothing is a new, uncompressed
-- copy, which the row takes whole where it fits; a bigger row is compressed again, as
-- before). `scribe db check` compares the stored words and text with recomputed ones, so a
-- changed value would show there.
UPDATE parts_fts
SET search_text = search_text || '', words = words || ''::tsvector
WHERE pg_column_compression(search_text) IS NOT NULL
   OR pg_column_compression(words) IS NOT NULL;
