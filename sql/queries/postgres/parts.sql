-- PostgreSQL spellings of the parts queries SQLite writes differently
-- (sql/queries/sqlite/parts.sql): part JSON is TEXT, read as jsonb.

-- name: GetToolPartByCallId :one
-- The tool part of a call, by the provider's call id.
SELECT * FROM parts
WHERE session_id = @session_id AND type = 'tool'
  AND CAST(data AS jsonb) ->> 'call_id' = CAST(@call_id AS TEXT)
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
