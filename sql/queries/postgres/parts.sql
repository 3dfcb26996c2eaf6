-- PostgreSQL spellings of the parts queries SQLite writes differently
-- (sql/queries/sqlite/parts.sql): part JSON is TEXT, read as jsonb.

-- name: GetToolPartByCallId :one
-- The tool part of a call, by the provider's call id.
SELECT * FROM parts
WHERE session_id = @session_id AND type = 'tool'
  AND CAST(data AS jsonb) ->> 'call_id' = CAST(@call_id AS TEXT)
ORDER BY seq DESC
LIMIT 1;
