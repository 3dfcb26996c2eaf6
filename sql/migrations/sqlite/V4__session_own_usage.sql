-- Scribe schema, version 4: what each roll-up added to its parent, and the usage each
-- session made itself.
--
-- A roll-up adds a child's totals into its parent's, so a parent's totals are its own usage
-- plus its rolled-up children's. Statistics that group by the parent's columns then
-- attribute a child's tokens to the parent's model, source and day, and summing parents
-- and children counts the child twice. Recording the exact amounts a roll-up added (in the
-- same transaction, from the same row) lets `session_own_usage` subtract them again: every
-- session's own usage, under its own model, so a sum over any set of sessions counts every
-- token and cent once.
--
-- Marks made before this version did not record their amounts. They are filled from the
-- child's current totals, which is what the roll-up added unless usage reached the child
-- after it (the service documents that such usage is not carried over).

ALTER TABLE session_rollups ADD COLUMN input_tokens INTEGER NOT NULL DEFAULT 0;
ALTER TABLE session_rollups ADD COLUMN output_tokens INTEGER NOT NULL DEFAULT 0;
ALTER TABLE session_rollups ADD COLUMN cache_read_tokens INTEGER NOT NULL DEFAULT 0;
ALTER TABLE session_rollups ADD COLUMN cache_write_tokens INTEGER NOT NULL DEFAULT 0;
ALTER TABLE session_rollups ADD COLUMN reasoning_tokens INTEGER NOT NULL DEFAULT 0;
ALTER TABLE session_rollups ADD COLUMN api_call_count INTEGER NOT NULL DEFAULT 0;
ALTER TABLE session_rollups ADD COLUMN estimated_cost_usd REAL NOT NULL DEFAULT 0;
-- NULL when the child had no billed amount (as sessions.actual_cost_usd).
ALTER TABLE session_rollups ADD COLUMN actual_cost_usd REAL;

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

-- Each session's own usage: its totals minus what its rolled-up children added.
-- (`parent_id` of a mark is the parent at roll-up time, which is the session the amounts
-- were added to.)
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
           sum(input_tokens) AS input_tokens,
           sum(output_tokens) AS output_tokens,
           sum(cache_read_tokens) AS cache_read_tokens,
           sum(cache_write_tokens) AS cache_write_tokens,
           sum(reasoning_tokens) AS reasoning_tokens,
           sum(api_call_count) AS api_call_count,
           sum(estimated_cost_usd) AS estimated_cost_usd
    FROM session_rollups
    GROUP BY parent_id
) AS r ON r.parent_id = s.id;
