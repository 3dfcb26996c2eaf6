-- SQLite spellings of the session_admin queries that PostgreSQL writes differently
-- (sql/queries/postgres/session_admin.sql has its own).

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
