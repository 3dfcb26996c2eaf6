-- Message pages in creation order (MessageService::stream) and search-hit context.
-- Newest-first pages use ListMessagesNewest / ListMessagesBefore in messages.sql.

-- name: ListMessagesOldest :many
-- The oldest @limit messages of a session, in creation order (the first forward page).
SELECT * FROM messages
WHERE session_id = @session_id
ORDER BY created_at, id
LIMIT @limit;

-- name: ListMessagesAfter :many
-- The @limit messages after the cursor (created_at, id), in creation order (later forward
-- pages).
SELECT * FROM messages
WHERE session_id = @session_id AND (created_at, id) > (CAST(@created_at AS BIGINT), CAST(@id AS TEXT))
ORDER BY created_at, id
LIMIT @limit;

-- name: ListMessageNeighbors :many
-- For each message, the messages just before and after it in its session (search-hit
-- context), as (id, role) pairs.
SELECT m.id,
    (SELECT b.id FROM messages AS b
     WHERE b.session_id = m.session_id AND (b.created_at, b.id) < (m.created_at, m.id)
     ORDER BY b.created_at DESC, b.id DESC LIMIT 1) AS "before_id?: String",
    (SELECT b.role FROM messages AS b
     WHERE b.session_id = m.session_id AND (b.created_at, b.id) < (m.created_at, m.id)
     ORDER BY b.created_at DESC, b.id DESC LIMIT 1) AS "before_role?: String",
    (SELECT a.id FROM messages AS a
     WHERE a.session_id = m.session_id AND (a.created_at, a.id) > (m.created_at, m.id)
     ORDER BY a.created_at, a.id LIMIT 1) AS "after_id?: String",
    (SELECT a.role FROM messages AS a
     WHERE a.session_id = m.session_id AND (a.created_at, a.id) > (m.created_at, m.id)
     ORDER BY a.created_at, a.id LIMIT 1) AS "after_role?: String"
FROM messages AS m
WHERE m.id IN (sqlc.slice(ids));

-- name: ListSessionPartData :many
-- Every part of a session in the order they were written (seq), only its stored columns
-- (loading a conversation decodes each part's JSON once, in Rust). Driven by
-- parts_session alone: one index step and one row per part, no seek per message and no
-- sort; the caller puts each part under its message (seq order is message order and part
-- order, except for a part added to an older message later).
SELECT id, message_id, position, data, created_at, updated_at
FROM parts
WHERE session_id = @session_id
ORDER BY seq;

-- name: ListPartDataOfSessions :many
-- Every part of many sessions, each session's in the order written, as
-- ListSessionPartData gives one session's (a batch of `export --all`).
SELECT session_id, id, message_id, position, data, created_at, updated_at
FROM parts
WHERE session_id IN (sqlc.slice(session_ids))
ORDER BY session_id, seq;

-- name: ListPartDataByMessageIds :many
-- The parts of the given messages.
SELECT id, message_id, position, data, created_at, updated_at
FROM parts
WHERE message_id IN (sqlc.slice(message_ids))
ORDER BY message_id, position;

-- name: ListMessagePartData :many
-- One message's parts in order.
SELECT id, message_id, position, data, created_at, updated_at
FROM parts
WHERE message_id = @message_id
ORDER BY position;
