-- PostgreSQL spellings of the parts queries SQLite writes differently
-- (sql/queries/sqlite/parts.sql): part JSON is TEXT, read as jsonb; a field is read from
-- the document without its NUL escapes (`scribe_json_without_nul`, V24), since jsonb and
-- `->>` refuse `\u0000` anywhere in the document.

-- name: GetToolPartByCallId :one
-- The tool part of a call, by the provider's call id. A tool part holding a NUL (its output
-- of a binary file) does not break the lookup of any call of its session.
SELECT * FROM parts
WHERE session_id = @session_id AND type = 'tool'
  AND CAST(scribe_json_without_nul(data) AS jsonb) ->> 'call_id' = CAST(@call_id AS TEXT)
ORDER BY seq DESC
LIMIT 1;

-- name: ListSentPartDataFrom :many
-- The parts of a session's messages from the cursor (created_at, id) on, in message order
-- then part order (sql/queries/sqlite/parts.sql). PostgreSQL returns cleared tool outputs
-- whole: only the marker is sent either way, SQLite just spares decoding them.
SELECT p.id, p.message_id, p.position, p.data AS "data!", p.created_at, p.updated_at
FROM messages AS m
JOIN parts AS p ON p.message_id = m.id
WHERE m.session_id = @session_id
  AND (m.created_at, m.id) >= (CAST(@created_at AS BIGINT), CAST(@id AS TEXT))
ORDER BY m.created_at, m.id, p.position;

-- name: CreateParts :exec
-- Inserts parts in one statement (sql/queries/sqlite/parts.sql): @parts is a JSON object
-- {"0": part, "1": part, …} of objects with CreatePart's parameters as fields (`data` the
-- part's JSON as a string), inserted in key order, so that a message and its parts cost two
-- statements (two round trips) however many parts it has, and the bulk import's messages
-- (`scribe_db::bulk`, after CreateMessages) two per batch. An object, not an array:
-- json_each reads objects in both dialects. Each part's object is parsed once (OFFSET 0
-- keeps the planner from copying the CAST into every column that reads it).
INSERT INTO parts (id, message_id, session_id, position, type, data, created_at, updated_at)
SELECT p.v ->> 'id', p.v ->> 'message_id', p.v ->> 'session_id',
       CAST(p.v ->> 'position' AS BIGINT), p.v ->> 'type', p.v ->> 'data',
       CAST(p.v ->> 'created_at' AS BIGINT), CAST(p.v ->> 'updated_at' AS BIGINT)
FROM (
    SELECT CAST(key AS BIGINT) AS n, CAST(value AS jsonb) AS v
    FROM json_each(CAST(CAST(@parts AS TEXT) AS json))
    OFFSET 0
) AS p
ORDER BY p.n;

-- name: ListMessageTexts :many
-- The searchable text of the given messages' parts, each cut to @max_chars characters, in
-- part order (search-hit context; sql/queries/sqlite/parts.sql). Read from `parts_fts`,
-- which holds exactly the view `parts_search`'s text for every part that has one (its
-- trigger computes it as `scribe_search_text` does; `scribe db check` compares them):
-- the view rebuilt each part's text from its JSON, ~2 ms of a search's page.
SELECT p.message_id, substr(f.search_text, 1, CAST(@max_chars AS INTEGER)) AS "text!: String"
FROM parts AS p
JOIN parts_fts AS f ON f.seq = p.seq
WHERE p.message_id IN (sqlc.slice(message_ids))
ORDER BY p.message_id, p.position;
