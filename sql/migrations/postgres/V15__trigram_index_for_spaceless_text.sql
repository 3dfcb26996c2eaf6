-- Scribe schema for PostgreSQL, version 15: the trigram index holds only the text that
-- needs it, as SQLite's has since its V7.
--
-- Since V13 every searchable part's text went into `parts_fts_trigram` (pg_trgm's GIN
-- operator class), and that was most of what an append cost the server: on the bench
-- corpus (5,722 parts, 3,482 searchable, ~970 characters of text each) inserting the
-- stored documents took ~0.07 s with no search index, ~0.18 s with the word index and
-- ~1.4-1.7 s with the word and trigram indexes, ~350-450 us per searchable part for the
-- trigrams alone (show_trgm by itself: ~190 us). Words are found through the word index;
-- the trigram index serves substring queries, which Scribe routes there only when a term
-- has a character of a script written without spaces (CJK, kana, Hangul, Thai …: the
-- ranges of `scribe_db::search::is_spaceless_script`), and such a term can only occur in
-- text that has such a character. Now the index is partial over exactly that text (the
-- row's `spaceless`, computed by the triggers with `scribe_spaceless`), and queries repeat
-- the predicate so the planner can prove the index applies (crates/db
-- src/search/postgres.rs). Substring alternatives that can match
-- other text are answered with ILIKE over the stored text, as SQLite answers them with
-- LIKE. The same insert with the partial index: ~0.26 s (10 % of that corpus's
-- searchable parts have such characters).
--
-- The predicate is a stored column, computed once per write by a regular expression over
-- the text (~7-9 us per part on that corpus). Spelled as the expression itself, it was
-- evaluated again for every candidate row of a search (pg_trgm's matches are always
-- rechecked, and a bitmap scan rechecks a partial index's predicate with them), which made
-- CJK queries up to twice as slow as with the full index. sqlgen does not compare this
-- table with SQLite's FTS5 table of the same name (each dialect's own index).
--
-- `scribe_search_text` now returns NULL for a part that is not searchable (not a text,
-- reasoning or tool part) before validating its JSON: the result is the same, and the
-- validation's exception block (a subtransaction) is no longer paid for every step and
-- finish part.

-- Whether `text` has a character of a script written without spaces: the ranges of
-- `scribe_db::search::is_spaceless_script`, and of SQLite's view `parts_search_trigram`
-- (V7); a test compares it with the Rust function on every code point.
CREATE FUNCTION scribe_spaceless(text TEXT) RETURNS BOOLEAN
LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE AS $$
    SELECT text ~ '[\u0E00-\u0EFF\u1000-\u109F\u1780-\u17FF\u1100-\u11FF\u2E80-\u2FDF\u3005-\u3007\u3021-\u3029\u3040-\u31FF\u3400-\u4DBF\u4E00-\u9FFF\uA960-\uA97F\uAC00-\uD7FF\uF900-\uFAFF\uFF66-\uFFDC\U00020000-\U0003134F]'
$$;

-- Whether the row's text is in the trigram index: scribe_spaceless(search_text), kept by
-- the triggers with the rest of the row (and checked by `scribe db check`).
ALTER TABLE parts_fts ADD COLUMN spaceless BOOLEAN NOT NULL DEFAULT FALSE;
UPDATE parts_fts SET spaceless = TRUE WHERE scribe_spaceless(search_text);

DROP INDEX parts_fts_trigram;
CREATE INDEX parts_fts_trigram ON parts_fts USING gin (search_text gin_trgm_ops)
    WHERE spaceless;

CREATE OR REPLACE FUNCTION scribe_parts_fts() RETURNS TRIGGER
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
        UPDATE parts_fts
        SET search_text = doc, words = scribe_search_words(doc), spaceless = scribe_spaceless(doc)
        WHERE seq = NEW.seq;
        IF FOUND THEN
            RETURN NULL;
        END IF;
    END IF;
    IF doc IS NOT NULL THEN
        INSERT INTO parts_fts (seq, search_text, words, spaceless)
        VALUES (NEW.seq, doc, scribe_search_words(doc), scribe_spaceless(doc));
    END IF;
    RETURN NULL;
END;
$$;

CREATE OR REPLACE FUNCTION scribe_parts_fts_rebuild() RETURNS VOID
LANGUAGE sql AS $$
    DELETE FROM parts_fts;
    INSERT INTO parts_fts (seq, search_text, words, spaceless)
    SELECT seq, doc, scribe_search_words(doc), scribe_spaceless(doc)
    FROM (SELECT seq, scribe_search_text(type, data) AS doc FROM parts) AS p
    WHERE doc IS NOT NULL;
$$;

CREATE OR REPLACE FUNCTION scribe_search_text(kind TEXT, data TEXT) RETURNS TEXT
LANGUAGE plpgsql IMMUTABLE AS $$
DECLARE
    doc JSON;
BEGIN
    IF kind IS NULL OR kind NOT IN ('text', 'reasoning', 'tool') THEN
        RETURN NULL;
    END IF;
    IF data IS NULL OR NOT scribe_json_valid(data) THEN
        RETURN NULL;
    END IF;
    doc := data::json;
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

-- The planner has statistics for the stored text from here on (the migration may have
-- filled or rebuilt the table; `scribe db copy` analyzes after its rebuild as well).
ANALYZE parts_fts;
