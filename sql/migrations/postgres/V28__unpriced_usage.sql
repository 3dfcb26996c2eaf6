-- Scribe schema for PostgreSQL, version 28: `session_own_usage` says which sessions used a model
-- without a price (`unpriced`, 1 or 0), so `scribe stats`, the web page's usage and their
-- JSON can say that a cost leaves usage out instead of showing it as free.
--
-- A session's `cost_status` (written by the history importers and copied by export and
-- `db copy`, scribe_import::pricing::status) is `unknown` when none of its usage had a
-- price and `partial` when some had none; its `estimated_cost_usd` then counts only the
-- priced usage. The agent loop refuses a model it cannot price, so its sessions never
-- have either status. A rolled-up child's status stays its own: the parent's own usage
-- (this view) is the parent's messages, and so is its status.

DROP VIEW session_own_usage;

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
       s.estimated_cost_usd - coalesce(r.estimated_cost_usd, 0) AS estimated_cost_usd,
       CASE WHEN s.cost_status IN ('unknown', 'partial') THEN 1 ELSE 0 END AS unpriced
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
