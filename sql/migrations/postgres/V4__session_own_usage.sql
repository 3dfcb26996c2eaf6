-- Scribe schema for PostgreSQL, version 4: what each roll-up added to its parent, and the
-- usage each session made itself (sql/migrations/sqlite/V4 says why). The view's sums are
-- cast back to BIGINT: PostgreSQL sums BIGINTs as NUMERIC.

ALTER TABLE session_rollups ADD COLUMN input_tokens BIGINT NOT NULL DEFAULT 0;
ALTER TABLE session_rollups ADD COLUMN output_tokens BIGINT NOT NULL DEFAULT 0;
ALTER TABLE session_rollups ADD COLUMN cache_read_tokens BIGINT NOT NULL DEFAULT 0;
ALTER TABLE session_rollups ADD COLUMN cache_write_tokens BIGINT NOT NULL DEFAULT 0;
ALTER TABLE session_rollups ADD COLUMN reasoning_tokens BIGINT NOT NULL DEFAULT 0;
ALTER TABLE session_rollups ADD COLUMN api_call_count BIGINT NOT NULL DEFAULT 0;
ALTER TABLE session_rollups ADD COLUMN estimated_cost_usd DOUBLE PRECISION NOT NULL DEFAULT 0;
ALTER TABLE session_rollups ADD COLUMN actual_cost_usd DOUBLE PRECISION;

UPDATE session_rollups
SET input_tokens = child.input_tokens,
    output_tokens = child.output_tokens,
    cache_read_tokens = child.cache_read_tokens,
    cache_write_tokens = child.cache_write_tokens,
    reasoning_tokens = child.reasoning_tokens,
    api_call_count = child.api_call_count,
    estimated_cost_usd = child.estimated_cost_usd,
    actual_cost_usd = child.actual_cost_usd
FROM sessions AS child
WHERE child.id = session_rollups.child_id;

CREATE VIEW session_own_usage AS
SELECT s.id AS id,
       s.model AS model,
       s.source AS source,
       s.created_at AS created_at,
       s.input_tokens - coalesce(r.input_tokens, 0) AS input_tokens,
       s.output_tokens - coalesce(r.output_tokens, 0) AS output_tokens,
       s.cache_read_tokens - coalesce(r.cache_read_tokens, 0) AS cache_read_tokens,
       s.cache_write_tokens - coalesce(r.cache_write_tokens, 0) AS cache_write_tokens,
       s.reasoning_tokens - coalesce(r.reasoning_tokens, 0) AS reasoning_tokens,
       s.api_call_count - coalesce(r.api_call_count, 0) AS api_call_count,
       s.estimated_cost_usd - coalesce(r.estimated_cost_usd, 0) AS estimated_cost_usd
FROM sessions AS s
LEFT JOIN (
    SELECT parent_id,
           CAST(sum(input_tokens) AS BIGINT) AS input_tokens,
           CAST(sum(output_tokens) AS BIGINT) AS output_tokens,
           CAST(sum(cache_read_tokens) AS BIGINT) AS cache_read_tokens,
           CAST(sum(cache_write_tokens) AS BIGINT) AS cache_write_tokens,
           CAST(sum(reasoning_tokens) AS BIGINT) AS reasoning_tokens,
           CAST(sum(api_call_count) AS BIGINT) AS api_call_count,
           sum(estimated_cost_usd) AS estimated_cost_usd
    FROM session_rollups
    GROUP BY parent_id
) AS r ON r.parent_id = s.id;
