-- Scribe schema for PostgreSQL, version 24: part JSON holding the NUL character (the
-- escape `\u0000`) is stored, read and searched, as on SQLite.
--
-- Part JSON is TEXT, and a NUL inside one of its strings is the six characters `\u0000`
-- there (a tool's output of `cat` on a binary file, an imported history). Until now the
-- CHECK on parts.data (`scribe_json_valid`, V1) cast the text to jsonb, which refuses that
-- escape ("unsupported Unicode escape sequence", SQLSTATE 22P05, raised as the CHECK's
-- 23514): such a message could not be created, imported or copied from SQLite. And every
-- `->>`/`#>>` on json or jsonb de-escapes all the strings of the document it reads, so
-- one `\u0000` anywhere in a part raised the same error in its search trigger, in
-- `scribe_search_text` (rebuild after `scribe db copy`, `scribe db check`), in the lookup
-- of a tool part by call id (which reads every tool part of a session: one such part
-- broke every later lookup) and in the previews of `scribe list`.
--
-- `scribe_json_without_nul` gives the document with each NUL escape replaced by a space
-- escape (`\u0020`): a backslash run of odd length before `u0000` is an escape; `\\u0000`
-- is an escaped backslash followed by the letters "u0000", not a NUL, and stays. Only a
-- document containing the text `\u0000` at all (strpos, no regular expression) is
-- rewritten. The stored part is never changed: it reads back exactly.
--
-- * `scribe_json_valid` still casts to jsonb (which also refuses lone surrogate escapes;
--   a cast to json would not: verified on PostgreSQL 15, `'"\ud800"'::json` is accepted)
--   and only when that cast fails with 22P05 (untranslatable character) tries again on the
--   document without its NULs. So a document is valid iff it is valid JSON with `\u0000`
--   allowed; a part without NUL costs what it cost (the same cast, no extra expression).
--   Every user of the function takes this: parts.data, messages.error,
--   sessions.model_config and permission, import_state.carry, the view parts_search.
-- * The search text (the trigger `scribe_parts_fts` and `scribe_search_text`) is read from
--   the document without its NULs: a NUL in a text, a tool's output or error is a space
--   there, so the words on either side of it are found as two words, as FTS5 on SQLite,
--   whose tokenizer separates words at a NUL. A tool's input is searched as its stored JSON
--   text (V10), so there the escape `\u0000` is put back (`scribe_json_nul_restored`): the
--   words are SQLite's ("u0000" sticks to the word after it on both).
--   What a search snippet shows for the NUL differs: PostgreSQL's is cut from
--   parts_fts.search_text and shows a space; SQLite's FTS5 `snippet()` drops the text from
--   the NUL to the next match or the snippet's end (it appends pieces as C strings), and
--   SQLite's preview of `scribe list` (`substr`) ends at the NUL, where PostgreSQL's shows
--   a space. Rows stored before this version have no NUL escape (the CHECK refused them),
--   so no search document is rebuilt.
-- * The queries that read one field of a part (GetToolPartByCallId, ListSessionPreviews)
--   read it from the document without its NULs (sql/queries/postgres).
--
-- Measured (crates/bench/scripts/pg-append-instructions.sh: callgrind, the server's
-- instructions per append of the bench's drafts, none with a NUL): 4.000-4.003M with V17's
-- trigger, 4.013-4.015M with this one (+0.3%, three runs each): the `strpos` over each
-- searchable part's JSON. Testing it in an IF before a plain cast costs the same; the
-- validation's path for a part without NUL is unchanged (the same cast, no expression).

CREATE FUNCTION scribe_json_without_nul(doc TEXT) RETURNS TEXT
LANGUAGE sql IMMUTABLE AS $$
    SELECT CASE
        WHEN strpos(doc, '\u0000') = 0 THEN doc
        ELSE regexp_replace(doc, '(?<!\\)((?:\\\\)*)\\u0000', '\1\\u0020', 'g')
    END
$$;

-- A JSON text read (`->>` of an object or array) from `scribe_json_without_nul(data)`, with
-- its NUL escapes back: the space escapes become `\u0000` again when `data` held a NUL
-- escape. A tool's input is searched as the JSON the part stored (V10, as SQLite's
-- `data ->> '$.input'`), escapes and all, so its words are SQLite's: `cat\u0000x` gives
-- "cat" and "u0000x" on both. (serde_json, which writes every part, never writes `\u0020`:
-- no space escape of the stored part is taken for a NUL.)
CREATE FUNCTION scribe_json_nul_restored(data TEXT, fragment TEXT) RETURNS TEXT
LANGUAGE sql IMMUTABLE AS $$
    SELECT CASE
        WHEN strpos(data, '\u0000') = 0 THEN fragment
        ELSE regexp_replace(fragment, '(?<!\\)((?:\\\\)*)\\u0020', '\1\\u0000', 'g')
    END
$$;

CREATE OR REPLACE FUNCTION scribe_json_valid(doc TEXT) RETURNS BOOLEAN
LANGUAGE plpgsql IMMUTABLE STRICT AS $$
BEGIN
    PERFORM doc::jsonb;
    RETURN TRUE;
EXCEPTION
    WHEN untranslatable_character THEN
        -- jsonb refuses `\u0000`: valid when the document without its NULs is.
        BEGIN
            PERFORM scribe_json_without_nul(doc)::jsonb;
            RETURN TRUE;
        EXCEPTION WHEN others THEN
            RETURN FALSE;
        END;
    WHEN others THEN
        RETURN FALSE;
END;
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
    doc := scribe_json_without_nul(data)::json;
    RETURN CASE kind
        WHEN 'text' THEN doc ->> 'text'
        WHEN 'reasoning' THEN doc ->> 'text'
        WHEN 'tool' THEN concat_ws(E'\n',
            doc ->> 'tool',
            scribe_json_nul_restored(data, doc ->> 'input'),
            doc #>> '{state,output}',
            doc #>> '{state,message}')
    END;
END;
$$;

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
        body := scribe_json_without_nul(NEW.data)::json;
        IF NEW.type = 'tool' THEN
            doc := concat_ws(E'\n',
                body ->> 'tool',
                scribe_json_nul_restored(NEW.data, body ->> 'input'),
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
