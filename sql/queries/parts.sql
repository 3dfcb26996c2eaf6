-- Parts: the ordered, typed pieces of a message. `data` is the part's JSON; the search
-- queue (and so both search indexes) and the tool-call counter follow by triggers, and the
-- searched text is read from `data` by the view `parts_search` (schema V11).

-- name: CreatePart :exec
INSERT INTO parts (id, message_id, session_id, position, type, data, created_at, updated_at)
VALUES (@id, @message_id, @session_id, @position, @type, @data, @created_at, @updated_at);

-- name: AppendPart :one
-- Appends a part after the message's last one.
INSERT INTO parts (id, message_id, session_id, position, type, data, created_at, updated_at)
VALUES (
    @id, @message_id, @session_id,
    (SELECT coalesce(max(position) + 1, 0) FROM parts WHERE message_id = @message_id),
    @type, @data, @now, @now
)
RETURNING *;

-- name: GetPart :one
SELECT * FROM parts WHERE id = @id;

-- name: ListParts :many
SELECT * FROM parts WHERE message_id = @message_id ORDER BY position;

-- name: ListPartSessions :many
-- The session holding each of the given parts (an import's clashing part ids, explained).
SELECT id, session_id FROM parts WHERE id IN (sqlc.slice(ids));

-- name: ListSessionParts :many
-- Every part of a session, in message order then part order: one query loads a whole
-- conversation with ListMessages.
SELECT p.* FROM parts AS p
JOIN messages AS m ON m.id = p.message_id
WHERE p.session_id = @session_id
ORDER BY m.created_at, m.id, p.position;

-- name: UpdatePart :execrows
-- Replaces one part's content (e.g. a tool moving from running to completed).
UPDATE parts
SET type = @type, data = @data, updated_at = sqlgen.moved_forward(updated_at, @now)
WHERE id = @id;

-- name: GetPartPlace :one
-- Where a part sits, without its content: what a changed part's event needs besides the
-- content the caller has, read without the part's JSON.
SELECT message_id, session_id, position, created_at, updated_at FROM parts WHERE id = @id;

-- name: GetPartContent :one
-- A part's type and JSON (to check a tool part's change against it), and where it sits.
SELECT type, data, message_id, session_id, position, created_at, updated_at FROM parts WHERE id = @id;

-- name: NextPartPosition :one
-- The position after a message's last part (0 for none).
SELECT CAST(coalesce(max(position) + 1, 0) AS BIGINT) AS "position!: i64"
FROM parts
WHERE message_id = @message_id;

-- name: GetLastFinishPartId :one
-- The message's finish part, if it has one (the last, should there be several).
SELECT id FROM parts
WHERE message_id = @message_id AND type = 'finish'
ORDER BY position DESC
LIMIT 1;

-- name: DeletePart :execrows
DELETE FROM parts WHERE id = @id;
