-- Scribe schema for PostgreSQL, version 21: a part's words are split with fewer regular
-- expression matches, to the same words at the same positions; a part's stored texts are
-- compressed with lz4 where the server has it (at the end).
--
-- Since V13 `scribe_search_words` replaced every run of non-alphanumerics with one space
-- (`regexp_replace(text, '[^[:alnum:]]+', ' ', 'g')`) before `to_tsvector('scribe', …)`,
-- so that the parser, which keeps paths, URLs and hyphenated words as tokens of their own,
-- sees only alphanumeric runs. Each match of `regexp_replace` restarts PostgreSQL's regular
-- expression search (a few thousand instructions per match), and in ordinary text nearly
-- every match is one space between two words: a match per word.
--
-- Now the spaces stay where they are and only the runs of other non-alphanumerics become a
-- space (`[^[:alnum:] ]+`). The text the parser reads differs from V13's only in how many
-- spaces stand between two alphanumeric runs (and before the first or after the last); the
-- runs are the same, in the same order, and the parser gives a run of spaces one blank token
-- however long it is (a blank token takes no position: the `scribe` configuration maps no
-- dictionary to it). So the words and their positions are V13's exactly: the stored words
-- (`parts_fts.words`) stay valid, nothing is recomputed, and `scribe db check` (which
-- recomputes them with this function) finds them equal. A test compares this function with
-- V13's expression on a corpus of diacritics, CJK, digits, underscores, hyphens, paths,
-- whitespace of every kind and long words (crates/db/tests/postgres.rs).
--
-- Measured (callgrind, instructions of one server backend per append of the bench's
-- messages, pgbench running the append's statements): 5.03M -> 4.20M per append (-16%);
-- on the bench's stored texts the split alone takes about a quarter of V13's time.

CREATE OR REPLACE FUNCTION scribe_search_words(text TEXT) RETURNS tsvector
LANGUAGE sql IMMUTABLE AS $$
    SELECT to_tsvector('scribe'::regconfig, regexp_replace(text, '[^[:alnum:] ]+', ' ', 'g'))
$$;

-- A part's stored texts are compressed with lz4 where the server has it. A `parts_fts` row
-- holds a part's text and its words, so the row of a part of a kilobyte or more passes the
-- 2 kB at which PostgreSQL compresses it, and pglz (the default) spent ~2% of an append's
-- server instructions there (callgrind as above: 4.20M -> 4.11M per append with lz4, which
-- also decompresses faster when a search reads the text back). Rows already stored keep
-- their compression; a server built without lz4 keeps pglz. One block (sqlgen skips it:
-- it changes no table's shape).
DO $$
BEGIN
    IF EXISTS (SELECT 1 FROM pg_settings
               WHERE name = 'default_toast_compression' AND 'lz4' = ANY (enumvals)) THEN
        ALTER TABLE parts ALTER COLUMN data SET COMPRESSION lz4;
        ALTER TABLE parts_fts ALTER COLUMN search_text SET COMPRESSION lz4,
            ALTER COLUMN words SET COMPRESSION lz4;
    END IF;
END;
$$;
