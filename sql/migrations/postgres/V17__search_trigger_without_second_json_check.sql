-- Scribe schema for PostgreSQL, version 17: the search trigger reads a part's JSON without
-- validating it a second time.
--
-- Since V13 the trigger on parts computed a part's search text with `scribe_search_text`,
-- which validates the JSON first (`scribe_json_valid`: a cast to jsonb inside an exception
-- block, that is a subtransaction) and then parses it again as json. The CHECK on
-- parts.data (`scribe_json_valid(data)`, NOT NULL) has already run for the row when an
-- AFTER trigger sees it, so the second validation always said yes. The trigger now parses
-- the JSON once and computes the same text inline (V15's `scribe_search_text`: NULL for a
-- part that is not a text, reasoning or tool part; a text or reasoning part's text; a
-- tool's name, input, output and error, one per line; the same `json` operators, so the
-- same text character for character). `scribe_search_text` itself is unchanged: the
-- rebuild (`scribe_parts_fts_rebuild`, after `scribe db copy`) and `scribe db check` still
-- use it on rows no CHECK is running for.
--
-- Measured (callgrind, instructions of the writer's server backend, one writer appending
-- the bench's messages, 100 and 400 appends, the slope): 4.41M -> 4.29M per append (-2.7%).
-- What remains of an append's server instructions is mostly the word document
-- (`regexp_replace` ~0.9M and `to_tsvector` ~1.1M per append, exact as they are).

CREATE OR REPLACE FUNCTION scribe_parts_fts() RETURNS TRIGGER
LANGUAGE plpgsql AS $$
DECLARE
    doc TEXT;
    body JSON;
BEGIN
    IF TG_OP = 'DELETE' THEN
        DELETE FROM parts_fts WHERE seq = OLD.seq;
        RETURN NULL;
    END IF;
    -- scribe_search_text(NEW.type, NEW.data) without its validation: the CHECK on
    -- parts.data has validated this row's JSON.
    IF NEW.type IN ('text', 'reasoning', 'tool') THEN
        body := NEW.data::json;
        IF NEW.type = 'tool' THEN
            doc := concat_ws(E'\n',
                body ->> 'tool',
                body ->> 'input',
                body #>> '{state,output}',
                body #>> '{state,message}');
        ELSE
            doc := body ->> 'text';
        END IF;
    END IF;
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
