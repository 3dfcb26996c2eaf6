-- Scribe schema for PostgreSQL, version 11: `parts` no longer has the generated
-- `search_text` column, as on SQLite (sql/migrations/sqlite/V11 says why there: SQLite
-- computed it on every streamed flush). Both dialects keep the same table shape.
--
-- Here the column was STORED: a second copy of every searchable part's text in the heap,
-- written again on every flush. The two GIN indexes are now built on the expression
-- itself, `scribe_search_text(type, data)` (V1, as V10 redefined it), which is IMMUTABLE,
-- so they hold exactly what they held before; a search repeats the expression to use them
-- (crates/db src/search/postgres.rs). Dropping the column drops the indexes built on it,
-- so both are made again, over every row.
--
-- `parts_search` (seq, search_text, damaged) is SQLite's view of the searchable parts and
-- their text, made here too so that the shared queries that show a part's text
-- (sql/queries/message_pages.sql) read it the same way on both backends.

ALTER TABLE parts DROP COLUMN search_text;

CREATE INDEX parts_search_words ON parts USING gin (
    to_tsvector('scribe'::regconfig,
        regexp_replace(scribe_search_text(type, data), '[^[:alnum:]]+', ' ', 'g'))
);

CREATE INDEX parts_search_trigram ON parts USING gin (scribe_search_text(type, data) gin_trgm_ops);

CREATE VIEW parts_search AS
SELECT seq,
       scribe_search_text(type, data) AS search_text,
       NOT scribe_json_valid(data) AS damaged
FROM parts
WHERE type IN ('text', 'reasoning', 'tool');
