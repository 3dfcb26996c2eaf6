-- SQLite spellings of the parts queries that PostgreSQL writes differently
-- (sql/queries/postgres/parts.sql has its own).

-- name: GetToolPartByCallId :one
-- The tool part of a call, by the provider's call id.
SELECT * FROM parts
WHERE session_id = @session_id AND type = 'tool' AND data ->> '$.call_id' = CAST(@call_id AS TEXT)
ORDER BY seq DESC
LIMIT 1;
