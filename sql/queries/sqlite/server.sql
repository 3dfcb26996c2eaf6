-- SQLite spellings of the server queries that PostgreSQL writes differently
-- (sql/queries/postgres/server.sql has its own).

-- name: UsageByDayAndModelSince :many
-- The usage chart, stacked by model: each session's own usage (session_own_usage, exactly
-- what `scribe stats` sums) per UTC day of creation and model, for sessions created at or
-- after @since. Summed over models, a day's rows give UsageByDaySince's row for that day;
-- summed over days, a model's rows give UsageByModelSince's row for that model.
SELECT date(min(max(created_at, -62167219200000), 253402300799999) / 1000, 'unixepoch') AS "day!",
       coalesce(model, '') AS "key!",
       count(*) AS "session_count!",
       CAST(coalesce(sum(CAST(input_tokens AS DOUBLE PRECISION)), 0) AS BIGINT) AS "input_tokens!",
       CAST(coalesce(sum(CAST(output_tokens AS DOUBLE PRECISION)), 0) AS BIGINT) AS "output_tokens!",
       CAST(coalesce(sum(CAST(cache_read_tokens AS DOUBLE PRECISION)), 0) AS BIGINT) AS "cache_read_tokens!",
       CAST(coalesce(sum(CAST(cache_write_tokens AS DOUBLE PRECISION)), 0) AS BIGINT) AS "cache_write_tokens!",
       CAST(coalesce(sum(CAST(reasoning_tokens AS DOUBLE PRECISION)), 0) AS BIGINT) AS "reasoning_tokens!",
       CAST(coalesce(sum(CAST(api_call_count AS DOUBLE PRECISION)), 0) AS BIGINT) AS "api_call_count!",
       CAST(coalesce(sum(estimated_cost_usd), 0) AS DOUBLE PRECISION) AS "estimated_cost_usd!"
FROM session_own_usage
WHERE created_at >= @since
GROUP BY date(min(max(created_at, -62167219200000), 253402300799999) / 1000, 'unixepoch'), coalesce(model, '')
ORDER BY 1, 2;

-- name: UsageByDayAndSourceSince :many
-- The usage chart, stacked by source (as UsageByDayAndModelSince).
SELECT date(min(max(created_at, -62167219200000), 253402300799999) / 1000, 'unixepoch') AS "day!",
       source AS "key!",
       count(*) AS "session_count!",
       CAST(coalesce(sum(CAST(input_tokens AS DOUBLE PRECISION)), 0) AS BIGINT) AS "input_tokens!",
       CAST(coalesce(sum(CAST(output_tokens AS DOUBLE PRECISION)), 0) AS BIGINT) AS "output_tokens!",
       CAST(coalesce(sum(CAST(cache_read_tokens AS DOUBLE PRECISION)), 0) AS BIGINT) AS "cache_read_tokens!",
       CAST(coalesce(sum(CAST(cache_write_tokens AS DOUBLE PRECISION)), 0) AS BIGINT) AS "cache_write_tokens!",
       CAST(coalesce(sum(CAST(reasoning_tokens AS DOUBLE PRECISION)), 0) AS BIGINT) AS "reasoning_tokens!",
       CAST(coalesce(sum(CAST(api_call_count AS DOUBLE PRECISION)), 0) AS BIGINT) AS "api_call_count!",
       CAST(coalesce(sum(estimated_cost_usd), 0) AS DOUBLE PRECISION) AS "estimated_cost_usd!"
FROM session_own_usage
WHERE created_at >= @since
GROUP BY date(min(max(created_at, -62167219200000), 253402300799999) / 1000, 'unixepoch'), source
ORDER BY 1, 2;
