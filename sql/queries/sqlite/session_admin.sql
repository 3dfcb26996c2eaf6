-- SQLite spellings of the session_admin queries that PostgreSQL writes differently
-- (sql/queries/postgres/session_admin.sql has its own).

-- name: UsageByDaySince :many
-- Days are UTC calendar days of created_at, oldest first. A created_at outside years
-- 0000-9999 (a damaged or hand-edited row) counts on the first or last of those days
-- (date() gave NULL for it, which failed the whole query).
SELECT sqlgen.utc_day(created_at) AS "key!",
       count(*) AS "session_count!",
       CAST(total(input_tokens) AS INTEGER) AS "input_tokens!",
       CAST(total(output_tokens) AS INTEGER) AS "output_tokens!",
       CAST(total(cache_read_tokens) AS INTEGER) AS "cache_read_tokens!",
       CAST(total(cache_write_tokens) AS INTEGER) AS "cache_write_tokens!",
       CAST(total(reasoning_tokens) AS INTEGER) AS "reasoning_tokens!",
       CAST(total(api_call_count) AS INTEGER) AS "api_call_count!",
       sqlgen.clamped_cost_sum(estimated_cost_usd) AS "estimated_cost_usd!"
FROM session_own_usage
WHERE created_at >= @since
GROUP BY sqlgen.utc_day(created_at)
ORDER BY 1;
