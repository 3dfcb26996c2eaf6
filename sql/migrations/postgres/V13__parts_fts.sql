-- Scribe schema for PostgreSQL, version 13: the search document of every searchable part is
-- stored once, at write, in `parts_fts`, PostgreSQL's stand-in for SQLite's FTS5 tables of
-- the same name (sqlgen's parity check lets a table stand in for a virtual table).
--
-- Since V11 both GIN indexes were built on expressions over `scribe_search_text(type, data)`
-- (PL/pgSQL). The indexes found the matches, but ranking (`ts_rank_cd` needs the vector),
-- the substring rank and ILIKE's recheck computed the expression again for every matching
-- part, so a common word cost in proportion to its matches (10,000 messages: word queries
-- median 2.6 s, against 12.5 ms on SQLite). Now the trigger computes the text and its words
-- once per write of a part's type or data, and search reads, ranks and rechecks the stored
-- values.
--
-- The invariant is SQLite's: one row per part whose search text is not NULL (a text,
-- reasoning or tool part with valid JSON), holding its current text and words; nothing else.
-- The text is stored too (V11 removed the stored copy in `parts`): the trigram index,
-- ILIKE's recheck, the substring rank and the snippet all need it, and recomputing it per
-- candidate is what made substring queries slow.
--
-- No foreign key to parts: under SERIALIZABLE its check would read the right-most leaf page
-- of parts_pkey, which every writer's newest part is inserted into (V12 point 3 says what
-- that costs). A delete trigger removes a deleted part's row instead. Lookups by seq (the
-- update and delete triggers) go through a hash index, for the same reason as V12's
-- messages_id_hash.

CREATE TABLE parts_fts (
    seq         BIGINT NOT NULL PRIMARY KEY,
    search_text TEXT NOT NULL,
    words       tsvector NOT NULL
);

CREATE INDEX parts_fts_seq_hash ON parts_fts USING hash (seq);
CREATE INDEX parts_fts_words ON parts_fts USING gin (words);
CREATE INDEX parts_fts_trigram ON parts_fts USING gin (search_text gin_trgm_ops);

-- A part's words: its text split at every non-alphanumeric, folded by `scribe` (V1, V10).
CREATE FUNCTION scribe_search_words(text TEXT) RETURNS tsvector
LANGUAGE sql IMMUTABLE AS $$
    SELECT to_tsvector('scribe'::regconfig, regexp_replace(text, '[^[:alnum:]]+', ' ', 'g'))
$$;

CREATE FUNCTION scribe_parts_fts() RETURNS TRIGGER
LANGUAGE plpgsql AS $$
DECLARE
    doc TEXT;
BEGIN
    IF TG_OP = 'DELETE' THEN
        DELETE FROM parts_fts WHERE seq = OLD.seq;
        RETURN NULL;
    END IF;
    doc := scribe_search_text(NEW.type, NEW.data);
    IF TG_OP = 'UPDATE' THEN
        IF doc IS NULL THEN
            DELETE FROM parts_fts WHERE seq = NEW.seq;
            RETURN NULL;
        END IF;
        UPDATE parts_fts SET search_text = doc, words = scribe_search_words(doc)
        WHERE seq = NEW.seq;
        IF FOUND THEN
            RETURN NULL;
        END IF;
    END IF;
    IF doc IS NOT NULL THEN
        INSERT INTO parts_fts (seq, search_text, words)
        VALUES (NEW.seq, doc, scribe_search_words(doc));
    END IF;
    RETURN NULL;
END;
$$;

CREATE TRIGGER parts_fts_insert AFTER INSERT ON parts
    FOR EACH ROW EXECUTE FUNCTION scribe_parts_fts();
CREATE TRIGGER parts_fts_update AFTER UPDATE OF type, data ON parts
    FOR EACH ROW WHEN (OLD.type IS DISTINCT FROM NEW.type OR OLD.data IS DISTINCT FROM NEW.data)
    EXECUTE FUNCTION scribe_parts_fts();
CREATE TRIGGER parts_fts_delete AFTER DELETE ON parts
    FOR EACH ROW EXECUTE FUNCTION scribe_parts_fts();

-- Every row again from the parts: fills the table here, and after `scribe db copy` into
-- PostgreSQL, which copies with the triggers switched off (crates/db src/pg/copy.rs).
CREATE FUNCTION scribe_parts_fts_rebuild() RETURNS VOID
LANGUAGE sql AS $$
    DELETE FROM parts_fts;
    INSERT INTO parts_fts (seq, search_text, words)
    SELECT seq, doc, scribe_search_words(doc)
    FROM (SELECT seq, scribe_search_text(type, data) AS doc FROM parts) AS p
    WHERE doc IS NOT NULL;
$$;

-- One block (sqlgen skips it: it changes no table's shape).
DO $$
BEGIN
    PERFORM scribe_parts_fts_rebuild();
END;
$$;

DROP INDEX parts_search_words;
DROP INDEX parts_search_trigram;
