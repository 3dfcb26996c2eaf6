-- Messages: one row per turn; their content is in parts (parts.sql).
-- The session's message_count is kept by triggers.

-- name: CreateMessage :exec
INSERT INTO messages (
    id, session_id, parent_id, role, agent, provider, model, finish_reason, is_summary,
    input_tokens, output_tokens, cache_read_tokens, cache_write_tokens, reasoning_tokens,
    cost_usd, error, created_at, updated_at, finished_at
) VALUES (
    @id, @session_id, @parent_id, @role, @agent, @provider, @model, @finish_reason, @is_summary,
    @input_tokens, @output_tokens, @cache_read_tokens, @cache_write_tokens, @reasoning_tokens,
    @cost_usd, @error, @created_at, @updated_at, @finished_at
);

-- name: GetMessage :one
SELECT * FROM messages WHERE id = @id;

-- name: ListMessages :many
-- Creation order.
SELECT * FROM messages WHERE session_id = @session_id ORDER BY created_at, id;

-- name: ListMessagesOfSessions :many
-- The messages of many sessions, each session's in creation order (a batch of
-- `export --all`: one statement for many small sessions).
SELECT * FROM messages
WHERE session_id IN (sqlc.slice(session_ids))
ORDER BY session_id, created_at, id;

-- name: ListMessagesByIds :many
SELECT * FROM messages WHERE id IN (sqlc.slice(ids)) ORDER BY created_at, id;

-- name: ListMessagesNewest :many
-- The newest @limit messages, newest first (the first page).
SELECT * FROM messages
WHERE session_id = @session_id
ORDER BY created_at DESC, id DESC
LIMIT @limit;

-- name: ListMessagesBefore :many
-- The @limit messages before the cursor (created_at, id), newest first (later pages).
SELECT * FROM messages
WHERE session_id = @session_id AND (created_at, id) < (CAST(@created_at AS BIGINT), CAST(@id AS TEXT))
ORDER BY created_at DESC, id DESC
LIMIT @limit;

-- name: ListMessagesFrom :many
-- Messages from the cursor (created_at, id) on, in creation order: the conversation since a
-- summary message.
SELECT * FROM messages
WHERE session_id = @session_id AND (created_at, id) >= (CAST(@created_at AS BIGINT), CAST(@id AS TEXT))
ORDER BY created_at, id;

-- name: GetLastMessage :one
SELECT * FROM messages
WHERE session_id = @session_id
ORDER BY created_at DESC, id DESC
LIMIT 1;

-- name: UpdateMessage :execrows
-- Everything about a message except its session, role and creation time.
UPDATE messages
SET parent_id = @parent_id,
    agent = @agent,
    provider = @provider,
    model = @model,
    finish_reason = @finish_reason,
    is_summary = @is_summary,
    input_tokens = @input_tokens,
    output_tokens = @output_tokens,
    cache_read_tokens = @cache_read_tokens,
    cache_write_tokens = @cache_write_tokens,
    reasoning_tokens = @reasoning_tokens,
    cost_usd = @cost_usd,
    error = @error,
    finished_at = @finished_at,
    updated_at = sqlgen.moved_forward(updated_at, @now)
WHERE id = @id;

-- name: FinishMessage :one
-- Ends a message; returns it as it is now.
UPDATE messages
SET finish_reason = @finish_reason, finished_at = @now,
    updated_at = sqlgen.moved_forward(updated_at, @now)
WHERE id = @id
RETURNING *;

-- name: AddMessageUsage :one
-- Adds a step's usage to the message atomically; returns the totals after it. Counts
-- saturate, as every count sum (see AddSessionUsageDelta in session_admin.sql).
UPDATE messages
SET input_tokens = sqlgen.saturating_add(input_tokens, CAST(@input_tokens AS BIGINT)),
    output_tokens = sqlgen.saturating_add(output_tokens, CAST(@output_tokens AS BIGINT)),
    cache_read_tokens = sqlgen.saturating_add(cache_read_tokens, CAST(@cache_read_tokens AS BIGINT)),
    cache_write_tokens = sqlgen.saturating_add(cache_write_tokens, CAST(@cache_write_tokens AS BIGINT)),
    reasoning_tokens = sqlgen.saturating_add(reasoning_tokens, CAST(@reasoning_tokens AS BIGINT)),
    -- Clamped, as every cost sum (see AddSessionUsageDelta in session_admin.sql).
    cost_usd = sqlgen.clamped_cost_add(cost_usd, CAST(@cost_usd AS DOUBLE PRECISION)),
    updated_at = sqlgen.moved_forward(updated_at, @now)
WHERE id = @id
RETURNING id, session_id, input_tokens, output_tokens, cache_read_tokens, cache_write_tokens,
    reasoning_tokens, cost_usd, updated_at;

-- name: ListUnpricedMessages :many
-- A session's messages that used tokens and cost nothing: how an importer stores usage of
-- a model it had no price for (scribe_import prices them when a price is known later).
SELECT id, model, input_tokens, output_tokens, cache_read_tokens, cache_write_tokens,
       reasoning_tokens
FROM messages
WHERE session_id = @session_id AND cost_usd = 0
  AND (input_tokens > 0 OR output_tokens > 0 OR cache_read_tokens > 0
       OR cache_write_tokens > 0 OR reasoning_tokens > 0)
ORDER BY created_at, id;

-- name: DeleteMessage :execrows
-- Its parts go with it (cascade).
DELETE FROM messages WHERE id = @id;

-- name: DeleteSessionParts :execrows
-- Every part of a session, before its messages go. Left to the cascade, each message
-- deleted looks its parts up by the composite foreign key (session_id, message_id), for
-- which SQLite picks `parts_session` and walks every part of the session: a session of
-- 7,200 messages took 8.5 s to delete. After this, each lookup finds the session empty.
DELETE FROM parts WHERE session_id = @session_id;

-- name: DeleteSessionMessages :execrows
-- Clears a session's conversation, keeping the session. Delete its parts first
-- (DeleteSessionParts).
DELETE FROM messages WHERE session_id = @session_id;
