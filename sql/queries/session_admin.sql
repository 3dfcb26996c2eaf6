-- Session service queries beyond sessions.sql: usage deltas that return the new row,
-- roll-up bookkeeping, prune candidates, exact restores for import, and usage statistics
-- since a point in time.

-- name: AddSessionUsageDelta :one
-- Adds one model call's usage atomically (`x = x + @n`, never read-modify-write) and returns
-- the row as it now is. tool_call_count is also kept by the parts triggers; @tool_call_count
-- is only for calls that are not stored as tool parts. The only query that adds usage to a
-- session (the service's add_usage, the importers' add_usage_at_tx). Counts saturate
-- (ARCHITECTURE.md, "Saturating counts").
UPDATE sessions
SET input_tokens = sqlgen.saturating_add(input_tokens, CAST(@input_tokens AS BIGINT)),
    output_tokens = sqlgen.saturating_add(output_tokens, CAST(@output_tokens AS BIGINT)),
    cache_read_tokens = sqlgen.saturating_add(cache_read_tokens, CAST(@cache_read_tokens AS BIGINT)),
    cache_write_tokens = sqlgen.saturating_add(cache_write_tokens, CAST(@cache_write_tokens AS BIGINT)),
    reasoning_tokens = sqlgen.saturating_add(reasoning_tokens, CAST(@reasoning_tokens AS BIGINT)),
    api_call_count = sqlgen.saturating_add(api_call_count, CAST(@api_call_count AS BIGINT)),
    tool_call_count = sqlgen.saturating_add(tool_call_count, CAST(@tool_call_count AS BIGINT)),
    -- Clamped, as every cost sum (ARCHITECTURE.md, "Clamped cost sums").
    estimated_cost_usd = sqlgen.clamped_cost_add(estimated_cost_usd, CAST(@estimated_cost_usd AS DOUBLE PRECISION)),
    updated_at = sqlgen.moved_forward(updated_at, @now)
WHERE id = @id
RETURNING *;

-- name: MarkSessionRolledUp :execrows
-- 1 when this call marked the child, 0 when it was marked before (or has no parent).
-- Records the child's totals as they are now: exactly what RollUpSessionUsage adds to the
-- parent in the same transaction (session_own_usage subtracts it again).
INSERT INTO session_rollups (
    child_id, parent_id, rolled_up_at, input_tokens, output_tokens, cache_read_tokens,
    cache_write_tokens, reasoning_tokens, api_call_count, estimated_cost_usd, actual_cost_usd)
SELECT id, parent_session_id, @now, input_tokens, output_tokens, cache_read_tokens,
       cache_write_tokens, reasoning_tokens, api_call_count, estimated_cost_usd,
       actual_cost_usd
FROM sessions
WHERE id = @child_id AND parent_session_id IS NOT NULL
ON CONFLICT (child_id) DO NOTHING;

-- name: GetSessionRollUp :one
SELECT * FROM session_rollups WHERE child_id = @child_id;

-- name: ListSessionRollUps :many
-- The roll-up marks of many sessions (those that have one).
SELECT * FROM session_rollups WHERE child_id IN (sqlc.slice(child_ids));

-- name: ImportSessionRollUp :exec
INSERT INTO session_rollups (
    child_id, parent_id, rolled_up_at, input_tokens, output_tokens, cache_read_tokens,
    cache_write_tokens, reasoning_tokens, api_call_count, estimated_cost_usd, actual_cost_usd)
VALUES (@child_id, @parent_id, @rolled_up_at, @input_tokens, @output_tokens,
        @cache_read_tokens, @cache_write_tokens, @reasoning_tokens, @api_call_count,
        @estimated_cost_usd, @actual_cost_usd)
ON CONFLICT (child_id) DO NOTHING;

-- name: RestoreImportedSession :one
-- After an import's messages are in: the columns ImportSession cannot set (the summary
-- message did not exist yet; the triggers moved tool_call_count, which also counts tool
-- calls reported with usage, and updated_at, to the newest child row's time, so the file's
-- are restored); the session as it now is. message_count stays the triggers', from what
-- was stored, never the file's claim.
UPDATE sessions
SET summary_message_id = @summary_message_id,
    compacting_at = @compacting_at,
    tool_call_count = @tool_call_count,
    updated_at = @updated_at
WHERE id = @id
RETURNING *;

-- name: RestoreSessionUpdatedAt :execrows
-- Only when it differs (until V23 an update that left updated_at as it was made sessions_touch
-- move it to the database's time; now it just writes nothing).
UPDATE sessions SET updated_at = @updated_at WHERE id = @id AND updated_at <> @updated_at;

-- name: ImportFileVersion :exec
INSERT INTO files (id, session_id, path, content, version, created_at, updated_at)
VALUES (@id, @session_id, @path, @content, @version, @created_at, @updated_at);

-- name: ListPrunableSessions :many
-- Ended before @before, oldest end first; active sessions (ended_at NULL) never qualify.
SELECT * FROM sessions
WHERE ended_at IS NOT NULL AND ended_at < @before
ORDER BY ended_at, id;

-- name: ListPrunableSessionsBySource :many
SELECT * FROM sessions
WHERE ended_at IS NOT NULL AND ended_at < @before AND source = @source
ORDER BY ended_at, id;

-- name: OwnUsageSince :many
-- The sessions whose usage `scribe stats --since @since` and the web page's usage chart
-- count: every session started at or after @since (started_since 1), and every other one
-- whose messages carry usage from then on. Each with its own usage (session_own_usage:
-- what it used itself, without what its rolled-up children added), so every token and
-- cent is counted once, and the UTC hour it started (the fragment utc_hour, each dialect's
-- own). With MessageUsageSince, what SessionService::usage_slices splits by model and hour
-- (crates/session/src/usage.rs). unpriced: the session's cost leaves out usage of a model
-- without a price (V28). directory: where the session's agent worked (its project), for
-- `scribe stats --by directory`.
SELECT id, model, source,
       (SELECT s.directory FROM sessions AS s WHERE s.id = session_own_usage.id) AS directory,
       sqlgen.utc_hour(created_at) AS "hour!",
       input_tokens AS "input_tokens!",
       output_tokens AS "output_tokens!",
       cache_read_tokens AS "cache_read_tokens!",
       cache_write_tokens AS "cache_write_tokens!",
       reasoning_tokens AS "reasoning_tokens!",
       api_call_count AS "api_call_count!",
       estimated_cost_usd AS "estimated_cost_usd!",
       CAST(unpriced AS BIGINT) AS "unpriced!",
       CAST(CASE WHEN created_at >= @since THEN 1 ELSE 0 END AS BIGINT) AS "started_since!"
FROM session_own_usage
WHERE created_at >= @since
   OR id IN (SELECT u.session_id FROM messages AS u
             WHERE u.created_at >= @since AND sqlgen.carries_usage(u))
ORDER BY id;

-- name: GetSessionOwnUsage :one
-- A session's own usage (session_own_usage: without what rolled-up children added to it)
-- with its model and calls, and how many of its messages carry usage: a session none of
-- whose messages does (Hermes reports usage per session) has usage of its own that its
-- model prices (SessionService::own_usage_tx; scribe_import prices it once the catalog
-- knows the model).
SELECT o.model, o.api_call_count AS "api_call_count!",
       o.input_tokens AS "input_tokens!", o.output_tokens AS "output_tokens!",
       o.cache_read_tokens AS "cache_read_tokens!", o.cache_write_tokens AS "cache_write_tokens!",
       o.reasoning_tokens AS "reasoning_tokens!",
       (SELECT count(*) FROM messages AS m
        WHERE m.session_id = o.id AND sqlgen.carries_usage(m)) AS "carrying!"
FROM session_own_usage AS o
WHERE o.id = @session_id;

-- name: MessageUsageSince :many
-- The usage the messages of OwnUsageSince's sessions carry (all of it: what a session
-- counts beyond its messages is its own less all of theirs), per UTC hour and model of the
-- message (NULL: none named) and whether it is from @since on (since 1), with how many
-- messages carry it, in no order; messages without usage are left out.
-- SessionService::usage_slices puts each group from @since on under its own model and
-- hour. Counts sum with the fragment clamped_count_sum, each dialect's own: SQLite with
-- total(), as doubles, cast back (exact below 2^53, saturating above; its integer sum()
-- raised 'integer overflow' for rows near i64::MAX, written by another program or
-- imported, and every report failed with it); PostgreSQL exactly as numeric, clamped into
-- BIGINT (scribe_clamped_bigint, V22). Costs sum to at most the largest finite amount
-- (f64::MAX), as every stored cost sum does (ARCHITECTURE.md, "Clamped cost sums"): here
-- min(total(…), MAX), total() giving inf past it; PostgreSQL, whose float sum fails with
-- "value out of range: overflow", sums the costs scaled by 2^-64 (exact, the same bits
-- scaled, and unable to overflow), clamps, and scales back. The sessions are found first
-- (those started since, and those with usage since) and their messages read by
-- messages_session_created: a join to sessions with an OR read every message (56 against
-- 14 ms for a day of a 100,000-message store with none in it).
SELECT m.session_id,
       sqlgen.utc_hour(m.created_at) AS "hour!",
       m.model,
       CAST(CASE WHEN m.created_at >= @since THEN 1 ELSE 0 END AS BIGINT) AS "since!",
       count(*) AS "message_count!",
       sqlgen.clamped_count_sum(m.input_tokens) AS "input_tokens!",
       sqlgen.clamped_count_sum(m.output_tokens) AS "output_tokens!",
       sqlgen.clamped_count_sum(m.cache_read_tokens) AS "cache_read_tokens!",
       sqlgen.clamped_count_sum(m.cache_write_tokens) AS "cache_write_tokens!",
       sqlgen.clamped_count_sum(m.reasoning_tokens) AS "reasoning_tokens!",
       sqlgen.clamped_cost_sum(m.cost_usd) AS "cost_usd!"
FROM messages AS m
WHERE m.session_id IN (SELECT s.id FROM sessions AS s WHERE s.created_at >= @since
                       UNION
                       SELECT u.session_id FROM messages AS u
                       WHERE u.created_at >= @since AND sqlgen.carries_usage(u))
  AND sqlgen.carries_usage(m)
GROUP BY 1, 2, 3, 4;

-- name: UpdateExternalSession :execrows
-- An imported session's link, kind and end as its source now shows them (history import);
-- @updated_at comes from the source, never the clock.
UPDATE sessions
SET parent_session_id = @parent_session_id,
    kind = @kind,
    ended_at = @ended_at,
    end_reason = @end_reason,
    updated_at = @updated_at
WHERE id = @id;
