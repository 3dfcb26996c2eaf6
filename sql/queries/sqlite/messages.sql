-- SQLite spellings of the message queries PostgreSQL writes differently
-- (sql/queries/postgres/messages.sql).

-- name: CreateMessages :exec
-- Inserts many new messages in one statement: @messages is a JSON object {"0": message,
-- "1": message, …} of objects with CreateMessage's parameters as fields, inserted in key
-- order. PostgreSQL's spelling is its bulk import's path (`scribe_db::bulk`), to save round
-- trips; SQLite, in process, inserts statements of many CreateMessage rows there instead
-- (no JSON to encode and decode) and has this for parity.
INSERT INTO messages (
    id, session_id, parent_id, role, agent, provider, model, finish_reason, is_summary,
    input_tokens, output_tokens, cache_read_tokens, cache_write_tokens, reasoning_tokens,
    cost_usd, error, created_at, updated_at, finished_at
)
SELECT value ->> '$.id', value ->> '$.session_id', value ->> '$.parent_id',
       value ->> '$.role', value ->> '$.agent', value ->> '$.provider', value ->> '$.model',
       value ->> '$.finish_reason', CAST(value ->> '$.is_summary' AS INTEGER),
       CAST(value ->> '$.input_tokens' AS INTEGER), CAST(value ->> '$.output_tokens' AS INTEGER),
       CAST(value ->> '$.cache_read_tokens' AS INTEGER),
       CAST(value ->> '$.cache_write_tokens' AS INTEGER),
       CAST(value ->> '$.reasoning_tokens' AS INTEGER),
       CAST(value ->> '$.cost_usd' AS REAL), value ->> '$.error',
       CAST(value ->> '$.created_at' AS INTEGER), CAST(value ->> '$.updated_at' AS INTEGER),
       CAST(value ->> '$.finished_at' AS INTEGER)
FROM json_each(CAST(@messages AS TEXT))
ORDER BY CAST(key AS INTEGER);
