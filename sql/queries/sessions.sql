-- Sessions: lifecycle, titles, lineage, usage and cost, prune and stats.
-- Session lists with optional filters are built in crates/db/src/filters.rs.

-- name: CreateSession :one
INSERT INTO sessions (
    id, parent_session_id, kind, source, user_id, directory, title,
    model, model_config, system_prompt, permission,
    billing_provider, billing_base_url, billing_mode,
    created_at, updated_at
) VALUES (
    @id, @parent_session_id, @kind, @source, @user_id, @directory, @title,
    @model, @model_config, @system_prompt, @permission,
    @billing_provider, @billing_base_url, @billing_mode,
    @now, @now
)
RETURNING *;

-- name: ImportSession :exec
-- Inserts a whole session row as it was exported (import, tests): counters included, which
-- the message and part triggers then keep adding to.
INSERT INTO sessions (
    id, parent_session_id, kind, source, user_id, directory, title,
    model, model_config, system_prompt, permission,
    api_call_count, input_tokens, output_tokens, cache_read_tokens,
    cache_write_tokens, reasoning_tokens, estimated_cost_usd, actual_cost_usd,
    billing_provider, billing_base_url, billing_mode, cost_status, cost_source, pricing_version,
    created_at, updated_at, ended_at, end_reason, archived_at
) VALUES (
    @id, @parent_session_id, @kind, @source, @user_id, @directory, @title,
    @model, @model_config, @system_prompt, @permission,
    @api_call_count, @input_tokens, @output_tokens, @cache_read_tokens,
    @cache_write_tokens, @reasoning_tokens, @estimated_cost_usd, @actual_cost_usd,
    @billing_provider, @billing_base_url, @billing_mode, @cost_status, @cost_source, @pricing_version,
    @created_at, @updated_at, @ended_at, @end_reason, @archived_at
);

-- name: GetSession :one
SELECT * FROM sessions WHERE id = @id;

-- name: SessionExists :one
SELECT EXISTS (SELECT 1 FROM sessions WHERE id = @id) AS "found!: bool";

-- name: GetSessionByTitle :one
SELECT * FROM sessions WHERE title = @title;

-- name: ListChildSessions :many
SELECT * FROM sessions
WHERE parent_session_id = @parent_session_id
ORDER BY created_at, id;

-- name: CountSessions :one
SELECT count(*) FROM sessions;

-- name: UpdateSession :one
-- The fields a user or the agent may change; counters and times have their own queries.
UPDATE sessions
SET title = @title,
    directory = @directory,
    model = @model,
    model_config = @model_config,
    system_prompt = @system_prompt,
    permission = @permission,
    summary_message_id = @summary_message_id,
    billing_provider = @billing_provider,
    billing_base_url = @billing_base_url,
    billing_mode = @billing_mode,
    cost_status = @cost_status,
    cost_source = @cost_source,
    pricing_version = @pricing_version,
    updated_at = sqlgen.moved_forward(updated_at, @now)
WHERE id = @id
RETURNING *;

-- name: SetSessionSummaryMessage :execrows
UPDATE sessions
SET summary_message_id = @summary_message_id, updated_at = sqlgen.moved_forward(updated_at, @now)
WHERE id = @id;

-- name: SetSessionCompacting :execrows
-- compacting_at marks a compaction in progress (NULL when none). Clearing a mark that is
-- not there changes nothing (and so publishes nothing).
UPDATE sessions
SET compacting_at = @compacting_at, updated_at = sqlgen.moved_forward(updated_at, @now)
WHERE id = @id AND compacting_at IS DISTINCT FROM @compacting_at;

-- name: EndSession :execrows
-- The first end wins: ending an ended session changes nothing (0 rows).
UPDATE sessions
SET ended_at = @now, end_reason = @end_reason,
    updated_at = sqlgen.moved_forward(updated_at, @now)
WHERE id = @id AND ended_at IS NULL;

-- name: ReopenSession :execrows
UPDATE sessions
SET ended_at = NULL, end_reason = NULL, updated_at = sqlgen.moved_forward(updated_at, @now)
WHERE id = @id;

-- name: ArchiveSession :execrows
UPDATE sessions
SET archived_at = @now, updated_at = sqlgen.moved_forward(updated_at, @now)
WHERE id = @id AND archived_at IS NULL;

-- name: UnarchiveSession :execrows
UPDATE sessions
SET archived_at = NULL, updated_at = sqlgen.moved_forward(updated_at, @now)
WHERE id = @id;

-- name: DeleteSession :execrows
-- Messages, parts and files go with it (cascade); children keep existing, unlinked.
DELETE FROM sessions WHERE id = @id;

-- name: AddSessionActualCost :execrows
-- A billed amount reported by the provider; NULL + x counts as x.
UPDATE sessions
SET actual_cost_usd = sqlgen.clamped_cost_add(coalesce(actual_cost_usd, 0), CAST(@actual_cost_usd AS DOUBLE PRECISION)),
    updated_at = sqlgen.moved_forward(updated_at, @now)
WHERE id = @id;

-- name: RollUpSessionUsage :execrows
-- Rolls a child session's usage and cost into its parent (run once, when the child ends).
-- Counts saturate and costs are clamped, as in AddSessionUsageDelta (session_admin.sql).
UPDATE sessions
SET input_tokens = sqlgen.saturating_add(sessions.input_tokens, child.input_tokens),
    output_tokens = sqlgen.saturating_add(sessions.output_tokens, child.output_tokens),
    cache_read_tokens = sqlgen.saturating_add(sessions.cache_read_tokens, child.cache_read_tokens),
    cache_write_tokens = sqlgen.saturating_add(sessions.cache_write_tokens, child.cache_write_tokens),
    reasoning_tokens = sqlgen.saturating_add(sessions.reasoning_tokens, child.reasoning_tokens),
    api_call_count = sqlgen.saturating_add(sessions.api_call_count, child.api_call_count),
    estimated_cost_usd = sqlgen.clamped_cost_add(sessions.estimated_cost_usd, child.estimated_cost_usd),
    actual_cost_usd = CASE
        WHEN child.actual_cost_usd IS NULL THEN sessions.actual_cost_usd
        ELSE sqlgen.clamped_cost_add(coalesce(sessions.actual_cost_usd, 0), child.actual_cost_usd)
    END,
    updated_at = sqlgen.moved_forward(sessions.updated_at, @now)
FROM (SELECT * FROM sessions WHERE id = @child_id) AS child
WHERE sessions.id = child.parent_session_id;

-- name: ListSessionAncestors :many
-- Root first, excluding the session itself.
WITH RECURSIVE lineage (id, depth) AS (
    SELECT parent_session_id, 1 FROM sessions WHERE id = @id AND parent_session_id IS NOT NULL
    UNION ALL
    SELECT s.parent_session_id, l.depth + 1
    FROM sessions AS s JOIN lineage AS l ON s.id = l.id
    WHERE s.parent_session_id IS NOT NULL AND l.depth < 1000
)
SELECT s.* FROM lineage AS l JOIN sessions AS s ON s.id = l.id
ORDER BY l.depth DESC;

-- name: ListSessionDescendants :many
-- Breadth first (children, then grandchildren …), excluding the session itself.
WITH RECURSIVE tree (id, depth) AS (
    SELECT id, 1 FROM sessions WHERE parent_session_id = @id
    UNION ALL
    SELECT s.id, t.depth + 1
    FROM sessions AS s JOIN tree AS t ON s.parent_session_id = t.id
    WHERE t.depth < 1000
)
SELECT s.* FROM tree AS t JOIN sessions AS s ON s.id = t.id
ORDER BY t.depth, s.created_at, s.id;

-- name: GetContinuationTip :one
-- The newest end of a compaction chain: follows continuation children as deep as they go
-- (the session itself when it has none).
WITH RECURSIVE chain (id, depth) AS (
    SELECT id, 0 FROM sessions WHERE id = @id
    UNION ALL
    SELECT s.id, c.depth + 1
    FROM sessions AS s JOIN chain AS c ON s.parent_session_id = c.id
    WHERE s.kind = 'continuation' AND c.depth < 1000
)
SELECT s.* FROM chain AS c JOIN sessions AS s ON s.id = c.id
ORDER BY c.depth DESC, s.created_at DESC, s.id DESC
LIMIT 1;

-- name: TopSessionsByTokens :many
SELECT * FROM sessions
ORDER BY input_tokens + output_tokens + cache_read_tokens + cache_write_tokens
         + reasoning_tokens DESC, id
LIMIT @limit;
