-- Queries of `scribe serve` (crates/server): the usage chart's day × model and day × source
-- groups, the choices of the session list's filters, and how many child sessions each listed
-- session has. Everything else the web viewer reads goes through the services.

-- name: UsageByDayAndModelSince :many
-- The usage chart, stacked by model: each session's own usage (session_own_usage, exactly
-- what `scribe stats` sums) per UTC day of creation and model, for sessions created at or
-- after @since. Summed over models, a day's rows give UsageByDaySince's row for that day;
-- summed over days, a model's rows give UsageByModelSince's row for that model.
SELECT date(created_at / 1000, 'unixepoch') AS "day!",
       coalesce(model, '') AS "key!",
       count(*) AS "session_count!",
       CAST(coalesce(sum(input_tokens), 0) AS INTEGER) AS "input_tokens!",
       CAST(coalesce(sum(output_tokens), 0) AS INTEGER) AS "output_tokens!",
       CAST(coalesce(sum(cache_read_tokens), 0) AS INTEGER) AS "cache_read_tokens!",
       CAST(coalesce(sum(cache_write_tokens), 0) AS INTEGER) AS "cache_write_tokens!",
       CAST(coalesce(sum(reasoning_tokens), 0) AS INTEGER) AS "reasoning_tokens!",
       CAST(coalesce(sum(api_call_count), 0) AS INTEGER) AS "api_call_count!",
       CAST(coalesce(sum(estimated_cost_usd), 0) AS REAL) AS "estimated_cost_usd!"
FROM session_own_usage
WHERE created_at >= @since
GROUP BY date(created_at / 1000, 'unixepoch'), coalesce(model, '')
ORDER BY 1, 2;

-- name: UsageByDayAndSourceSince :many
-- The usage chart, stacked by source (as UsageByDayAndModelSince).
SELECT date(created_at / 1000, 'unixepoch') AS "day!",
       source AS "key!",
       count(*) AS "session_count!",
       CAST(coalesce(sum(input_tokens), 0) AS INTEGER) AS "input_tokens!",
       CAST(coalesce(sum(output_tokens), 0) AS INTEGER) AS "output_tokens!",
       CAST(coalesce(sum(cache_read_tokens), 0) AS INTEGER) AS "cache_read_tokens!",
       CAST(coalesce(sum(cache_write_tokens), 0) AS INTEGER) AS "cache_write_tokens!",
       CAST(coalesce(sum(reasoning_tokens), 0) AS INTEGER) AS "reasoning_tokens!",
       CAST(coalesce(sum(api_call_count), 0) AS INTEGER) AS "api_call_count!",
       CAST(coalesce(sum(estimated_cost_usd), 0) AS REAL) AS "estimated_cost_usd!"
FROM session_own_usage
WHERE created_at >= @since
GROUP BY date(created_at / 1000, 'unixepoch'), source
ORDER BY 1, 2;

-- name: ListSourceChoices :many
-- The sources of the session list's filter, most used first (the sessions_source index
-- covers it).
SELECT source AS "value!", count(*) AS "sessions!"
FROM sessions
GROUP BY source
ORDER BY 2 DESC, 1
LIMIT @limit;

-- name: ListModelChoices :many
-- The models of the session list's filter, most used first.
SELECT model AS "value!", count(*) AS "sessions!"
FROM sessions
WHERE model IS NOT NULL
GROUP BY model
ORDER BY 2 DESC, 1
LIMIT @limit;

-- name: ListDirectoryChoices :many
-- The directories of the session list's filter, most used first.
SELECT directory AS "value!", count(*) AS "sessions!"
FROM sessions
WHERE directory IS NOT NULL
GROUP BY directory
ORDER BY 2 DESC, 1
LIMIT @limit;

-- name: CountChildSessions :many
-- How many child sessions (sub-agent tasks, forks, continuations, title sessions) each of
-- the given sessions has; sessions without children have no row (sessions_parent index).
SELECT parent_session_id AS "parent_id!", count(*) AS "children!"
FROM sessions
WHERE parent_session_id IN (sqlc.slice(parent_ids))
GROUP BY parent_session_id;
