-- SQLite spellings of the parts queries that PostgreSQL writes differently
-- (sql/queries/postgres/parts.sql has its own).

-- name: GetToolPartByCallId :one
-- The tool part of a call, by the provider's call id.
SELECT * FROM parts
WHERE session_id = @session_id AND type = 'tool' AND data ->> '$.call_id' = CAST(@call_id AS TEXT)
ORDER BY seq DESC
LIMIT 1;

-- name: ListSentPartDataFrom :many
-- The parts of a session's messages from the cursor (created_at, id) on, in message order
-- then part order, as a request needs them: the output and metadata of a tool call that
-- compaction cleared are left out (emptied), since only the cleared marker is sent, so
-- loading what is sent costs what is sent. Driven by messages_session_created, without an
-- IN list, however long the conversation.
SELECT p.id, p.message_id, p.position,
       CASE WHEN p.type = 'tool' AND p.data ->> '$.compacted_at' IS NOT NULL
            THEN json_replace(p.data, '$.state.output', '', '$.state.metadata', json('null'))
            ELSE p.data
       END AS "data!",
       p.created_at, p.updated_at
FROM messages AS m
JOIN parts AS p ON p.message_id = m.id
WHERE m.session_id = @session_id
  AND (m.created_at, m.id) >= (CAST(@created_at AS BIGINT), CAST(@id AS TEXT))
ORDER BY m.created_at, m.id, p.position;

-- name: CreateParts :exec
-- Inserts parts in one statement: @parts is a JSON object {"0": part, "1": part, …} of
-- objects with CreatePart's parameters as fields (`data` the part's JSON as a string),
-- inserted in key order. PostgreSQL's spelling (sql/queries/postgres/parts.sql) is what its
-- append and bulk import use to save round trips; SQLite, in process, inserts parts with
-- CreatePart (one by one, or many rows per statement in `scribe_db::bulk`) and has this
-- for parity.
INSERT INTO parts (id, message_id, session_id, position, type, data, created_at, updated_at)
SELECT value ->> '$.id', value ->> '$.message_id', value ->> '$.session_id',
       CAST(value ->> '$.position' AS INTEGER), value ->> '$.type', value ->> '$.data',
       CAST(value ->> '$.created_at' AS INTEGER), CAST(value ->> '$.updated_at' AS INTEGER)
FROM json_each(CAST(@parts AS TEXT))
ORDER BY CAST(key AS INTEGER);

-- name: ListMessageTexts :many
-- The searchable text of the given messages' parts, each cut to @max_chars characters, in
-- part order (search-hit context). The text is read through the view `parts_search`
-- (schema V11), the one place each dialect says how a part's text comes from its JSON
-- (sql/queries/postgres/parts.sql reads PostgreSQL's stored search text instead).
SELECT p.message_id, substr(v.search_text, 1, CAST(@max_chars AS INTEGER)) AS "text!: String"
FROM parts AS p
JOIN parts_search AS v ON v.seq = p.seq
WHERE p.message_id IN (sqlc.slice(message_ids)) AND v.search_text IS NOT NULL
ORDER BY p.message_id, p.position;
