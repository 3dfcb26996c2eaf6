-- Queries of `scribe serve` (crates/server): the choices of the session list's filters, and
-- how many child sessions each listed session has. The usage chart's day × model and day ×
-- source groups format days differently per dialect: sql/queries/{sqlite,postgres}/server.sql.
-- Everything else the web viewer reads goes through the services.

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
