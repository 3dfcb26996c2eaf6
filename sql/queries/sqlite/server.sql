-- SQLite spellings of the server queries that PostgreSQL writes differently
-- (sql/queries/postgres/server.sql has its own).

-- name: UsageByDayAndModelSince :many
-- The usage chart, stacked by model: each session's own usage (session_own_usage, exactly
-- what `scribe stats` sums) per UTC day of creation and model, for sessions created at or
-- after @since. Summed over models, a day's rows give UsageByDaySince's row for that day;
-- summed over days, a model's rows give UsageByModelSince's row for that model.
SELECT sqlgen.utc_day(created_at) AS "day!",
       coalesce(model, '') AS "key!",
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
GROUP BY sqlgen.utc_day(created_at), coalesce(model, '')
ORDER BY 1, 2;

-- name: UsageByDayAndSourceSince :many
-- The usage chart, stacked by source (as UsageByDayAndModelSince).
SELECT sqlgen.utc_day(created_at) AS "day!",
       source AS "key!",
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
GROUP BY sqlgen.utc_day(created_at), source
ORDER BY 1, 2;
