-- PostgreSQL spellings of the session_admin queries SQLite writes differently
-- (sql/queries/sqlite/session_admin.sql): days formatted with to_char in UTC.
--
-- Costs: sum(float8) fails with "value out of range: overflow" past f64::MAX, where SQLite
-- gives inf. Both clamp to f64::MAX (ARCHITECTURE.md, "Clamped cost sums") with the
-- fragment clamped_cost_sum, each dialect's own (postgres/fragments.sql says how).

-- name: UsageByDaySince :many
-- Days are UTC calendar days of created_at, oldest first. A created_at outside years
-- 0000-9999 (a damaged or hand-edited row) counts on the first or last of those days
-- (date() gave NULL for it, which failed the whole query).
SELECT sqlgen.utc_day(created_at) AS "key!",
       count(*) AS "session_count!",
       sqlgen.clamped_count_sum(input_tokens) AS "input_tokens!",
       sqlgen.clamped_count_sum(output_tokens) AS "output_tokens!",
       sqlgen.clamped_count_sum(cache_read_tokens) AS "cache_read_tokens!",
       sqlgen.clamped_count_sum(cache_write_tokens) AS "cache_write_tokens!",
       sqlgen.clamped_count_sum(reasoning_tokens) AS "reasoning_tokens!",
       sqlgen.clamped_count_sum(api_call_count) AS "api_call_count!",
       sqlgen.clamped_cost_sum(estimated_cost_usd) AS "estimated_cost_usd!"
FROM session_own_usage
WHERE created_at >= @since
GROUP BY sqlgen.utc_day(created_at)
ORDER BY 1;

-- name: UsageByModelSince :many
-- As the shared query; counts summed exactly (numeric) and clamped into BIGINT
-- (scribe_clamped_bigint, V22).
SELECT coalesce(model, '') AS "key!",
       count(*) AS "session_count!",
       sqlgen.clamped_count_sum(input_tokens) AS "input_tokens!",
       sqlgen.clamped_count_sum(output_tokens) AS "output_tokens!",
       sqlgen.clamped_count_sum(cache_read_tokens) AS "cache_read_tokens!",
       sqlgen.clamped_count_sum(cache_write_tokens) AS "cache_write_tokens!",
       sqlgen.clamped_count_sum(reasoning_tokens) AS "reasoning_tokens!",
       sqlgen.clamped_count_sum(api_call_count) AS "api_call_count!",
       sqlgen.clamped_cost_sum(estimated_cost_usd) AS "estimated_cost_usd!"
FROM session_own_usage
WHERE created_at >= @since
GROUP BY coalesce(model, '')
ORDER BY 9 DESC, 1;

-- name: UsageBySourceSince :many
-- As the shared query; counts summed exactly (numeric) and clamped into BIGINT
-- (scribe_clamped_bigint, V22).
SELECT source AS "key!",
       count(*) AS "session_count!",
       sqlgen.clamped_count_sum(input_tokens) AS "input_tokens!",
       sqlgen.clamped_count_sum(output_tokens) AS "output_tokens!",
       sqlgen.clamped_count_sum(cache_read_tokens) AS "cache_read_tokens!",
       sqlgen.clamped_count_sum(cache_write_tokens) AS "cache_write_tokens!",
       sqlgen.clamped_count_sum(reasoning_tokens) AS "reasoning_tokens!",
       sqlgen.clamped_count_sum(api_call_count) AS "api_call_count!",
       sqlgen.clamped_cost_sum(estimated_cost_usd) AS "estimated_cost_usd!"
FROM session_own_usage
WHERE created_at >= @since
GROUP BY source
ORDER BY 9 DESC, 1;

-- name: UsageTotalsSince :one
-- As the shared query; counts summed exactly (numeric) and clamped into BIGINT
-- (scribe_clamped_bigint, V22).
SELECT count(*) AS "session_count!",
       sqlgen.clamped_count_sum(input_tokens) AS "input_tokens!",
       sqlgen.clamped_count_sum(output_tokens) AS "output_tokens!",
       sqlgen.clamped_count_sum(cache_read_tokens) AS "cache_read_tokens!",
       sqlgen.clamped_count_sum(cache_write_tokens) AS "cache_write_tokens!",
       sqlgen.clamped_count_sum(reasoning_tokens) AS "reasoning_tokens!",
       sqlgen.clamped_count_sum(api_call_count) AS "api_call_count!",
       sqlgen.clamped_cost_sum(estimated_cost_usd) AS "estimated_cost_usd!"
FROM session_own_usage
WHERE created_at >= @since;
