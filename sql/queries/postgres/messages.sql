-- PostgreSQL spellings of the message queries SQLite writes differently
-- (sql/queries/sqlite/messages.sql).

-- name: CreateMessages :exec
-- Inserts many new messages in one statement, each exactly as CreateMessage would (the bulk
-- import's path, `scribe_db::bulk`): @messages is a JSON object {"0": message, "1":
-- message, …} of objects with CreateMessage's parameters as fields (`error` the error's
-- JSON as a string, absent or null for NULL), inserted in key order, so that each row's
-- triggers run as they would one by one, in the same order. An object, not an array:
-- json_each reads objects in both dialects. Each message's object is parsed once (OFFSET 0,
-- as in CreateParts).
INSERT INTO messages (
    id, session_id, parent_id, role, agent, provider, model, finish_reason, is_summary,
    input_tokens, output_tokens, cache_read_tokens, cache_write_tokens, reasoning_tokens,
    cost_usd, error, created_at, updated_at, finished_at
)
SELECT m.v ->> 'id', m.v ->> 'session_id', m.v ->> 'parent_id', m.v ->> 'role',
       m.v ->> 'agent', m.v ->> 'provider', m.v ->> 'model', m.v ->> 'finish_reason',
       CAST(m.v ->> 'is_summary' AS BOOLEAN),
       CAST(m.v ->> 'input_tokens' AS BIGINT), CAST(m.v ->> 'output_tokens' AS BIGINT),
       CAST(m.v ->> 'cache_read_tokens' AS BIGINT), CAST(m.v ->> 'cache_write_tokens' AS BIGINT),
       CAST(m.v ->> 'reasoning_tokens' AS BIGINT),
       CAST(m.v ->> 'cost_usd' AS DOUBLE PRECISION), m.v ->> 'error',
       CAST(m.v ->> 'created_at' AS BIGINT), CAST(m.v ->> 'updated_at' AS BIGINT),
       CAST(m.v ->> 'finished_at' AS BIGINT)
FROM (
    SELECT CAST(key AS BIGINT) AS n, CAST(value AS jsonb) AS v
    FROM json_each(CAST(CAST(@messages AS TEXT) AS json))
    OFFSET 0
) AS m
ORDER BY m.n;
