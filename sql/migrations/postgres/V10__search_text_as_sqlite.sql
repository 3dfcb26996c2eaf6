-- Scribe schema for PostgreSQL, version 10: the searched text and words as SQLite has them.
--
-- 1. A tool's input is searched as the part stored it. Version 1 read it through jsonb,
--    which re-renders an object (`{"pattern": "x"}`, keys reordered), so a substring
--    search for `"pattern":"x"` and the context shown around a hit differed from SQLite's,
--    which returns the stored (compact) text. `json` keeps the stored text.
-- 2. Words that mix letters and digits (`café2`) are folded for diacritics too, as FTS5's
--    unicode61 tokenizer folds every word.
--
-- The stored search text of existing tool parts is computed again (an UPDATE recomputes a
-- generated column) without moving their `updated_at` or announcing a change, and the
-- word index is rebuilt for the new mapping.

ALTER TEXT SEARCH CONFIGURATION scribe
    ALTER MAPPING FOR numword WITH unaccent, simple;

CREATE OR REPLACE FUNCTION scribe_search_text(kind TEXT, data TEXT) RETURNS TEXT
LANGUAGE plpgsql IMMUTABLE AS $$
DECLARE
    doc JSON;
BEGIN
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

-- One block (sqlgen skips it: it changes no table's shape).
DO $$
BEGIN
    ALTER TABLE parts DISABLE TRIGGER parts_touch;
    ALTER TABLE parts DISABLE TRIGGER parts_notify;
    UPDATE parts SET data = data WHERE type = 'tool';
    ALTER TABLE parts ENABLE TRIGGER parts_touch;
    ALTER TABLE parts ENABLE TRIGGER parts_notify;
    REINDEX INDEX parts_search_words;
END;
$$;
