-- Queries of `scribe serve` (crates/server): the choices of the session list's filters, how
-- many child sessions each listed session has, who is whose child, and the parts of a
-- message page (ListPagePartData here; ListCutPartNodes, which reads a big part cut on
-- PostgreSQL, in sqlite/server.sql and postgres/server.sql). Everything else the web
-- viewer reads, the usage chart's numbers too, goes through the services.

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

-- name: ListSessionParents :many
-- Every child session with its parent (sessions_parent index): how the usage page's top
-- sessions count a sub-agent's usage in the period under the conversation it belongs to.
SELECT id, parent_session_id AS "parent_id!"
FROM sessions
WHERE parent_session_id IS NOT NULL;

-- name: ListPagePartData :many
-- The parts of a message page's messages, each with its JSON's size in bytes and its JSON
-- only when that size is at most @whole_max (crates/server's PART_TEXT_CAP): a bigger
-- part (a tool's 20 MB output) is read cut, so a page never reads a big part whole: on
-- SQLite streamed from its row (`seq`, the rowid) by crates/server's cutter, on PostgreSQL
-- by ListCutPartNodes. octet_length reads the stored size without the value (SQLite's record
-- header, PostgreSQL's TOAST header: no decompression).
SELECT seq, id, message_id, position, created_at, updated_at,
       CAST(octet_length(data) AS BIGINT) AS "bytes!: i64",
       CASE WHEN octet_length(data) <= CAST(@whole_max AS BIGINT) THEN data END AS "data?: String"
FROM parts
WHERE message_id IN (sqlc.slice(message_ids))
ORDER BY message_id, position;
