-- Scribe schema for PostgreSQL, version 25: a part's words never exceed what a tsvector
-- can hold, so no text can make a write fail.
--
-- A tsvector holds at most 1 MiB (1,048,575 bytes: its lexemes, 4 bytes of entry and 2 of
-- each position). Until V24 `scribe_search_words` built one document of the whole text, and
-- a part of about 250,000 different words (a 2.7 MB log of ids, a hex dump) failed with
-- "string is too long for tsvector": its append, its import and a `db copy` into
-- PostgreSQL failed whole, where SQLite's FTS5 has no such limit.
--
-- Now a text of at most 200,000 bytes is split exactly as before (its words are V21's, at
-- the same positions; nothing stored changes): its document cannot reach the limit. A
-- word's first occurrence costs its bytes plus 8 or 9 bytes of document against its bytes
-- plus a space of text, about 3x for a word of three bytes and less for longer ones; the
-- words of one or two bytes, which cost more, are only some thousands after folding, and
-- a repeated word costs 2 bytes of document for at least 2 of text.
-- A longer text goes to `scribe_search_words_bounded`, which builds the document from
-- pieces of about 200,000 bytes, each ending at a space (a word that runs on past it stays
-- whole in its piece: the parser drops a word over 2,047 bytes anyway), joined with `||`
-- (which numbers a piece's positions after the last one's, as one document would, both
-- capped at 16,383) while the whole stays under 1,000,000 bytes. The words of a text past
-- that budget are not in the word index: a word search does not find the part by them
-- (README, PostgreSQL). The pieces are cut in bytes (`convert_to`), where a space is a
-- byte no other UTF-8 character contains (so a piece is whole characters) and `substr`
-- does not count characters from the start of the text.
--
-- `scribe db check` recomputes every part's words with `scribe_search_words`, so the rows
-- longer than 200,000 bytes are recomputed here (their documents may keep other positions
-- than V21's beyond the 256 a lexeme keeps).

CREATE FUNCTION scribe_search_words_bounded(text TEXT) RETURNS tsvector
LANGUAGE plpgsql IMMUTABLE AS $$
DECLARE
    bytes BYTEA := convert_to(regexp_replace(text, '[^[:alnum:] ]+', ' ', 'g'), 'UTF8');
    total INTEGER := length(bytes);
    words tsvector := ''::tsvector;
    piece_words tsvector;
    start INTEGER := 1;
    stop INTEGER;
    space_at INTEGER;
BEGIN
    WHILE start <= total LOOP
        stop := start + 200000;
        -- The piece ends after the next space, 64 KiB of text looked at a time.
        WHILE stop <= total LOOP
            space_at := position('\x20'::bytea IN substr(bytes, stop, 65536));
            IF space_at > 0 THEN
                stop := stop + space_at;
                EXIT;
            END IF;
            stop := stop + 65536;
        END LOOP;
        stop := LEAST(stop, total + 1);
        piece_words := to_tsvector('scribe'::regconfig,
            convert_from(substr(bytes, start, stop - start), 'UTF8'));
        EXIT WHEN pg_column_size(words) + pg_column_size(piece_words) > 1000000;
        words := words || piece_words;
        start := stop;
    END LOOP;
    RETURN words;
END
$$;

CREATE OR REPLACE FUNCTION scribe_search_words(text TEXT) RETURNS tsvector
LANGUAGE sql IMMUTABLE AS $$
    SELECT CASE WHEN octet_length(text) <= 200000
        THEN to_tsvector('scribe'::regconfig, regexp_replace(text, '[^[:alnum:] ]+', ' ', 'g'))
        ELSE scribe_search_words_bounded(text)
    END
$$;

UPDATE parts_fts SET words = scribe_search_words(search_text)
WHERE octet_length(search_text) > 200000;
