-- Agent loop: crash recovery and model choice.

-- name: ListUnfinishedAssistantMessageIds :many
-- Assistant messages left open (a dead process, or one still running), oldest first.
SELECT id FROM messages
WHERE session_id = @session_id AND role = 'assistant' AND finished_at IS NULL
ORDER BY created_at, id;

-- name: GetLastAssistantModel :one
-- The model of the session's newest assistant message that names one.
SELECT model AS "model!" FROM messages
WHERE session_id = @session_id AND role = 'assistant' AND model IS NOT NULL
ORDER BY created_at DESC, id DESC
LIMIT 1;

-- name: SetSessionPromptSettings :execrows
-- What a prompt changes on its session, in the transaction that saves the prompt: the model
-- it used and, when the prompt had tool switches, the merged permission rules (NULL keeps
-- the stored rules).
UPDATE sessions
SET model = @model,
    permission = coalesce(sqlc.narg(permission), permission),
    updated_at = sqlgen.moved_forward(updated_at, @now)
WHERE id = @id;

-- name: GetSessionRun :one
-- The run lease of a session, if any process holds one.
SELECT * FROM session_runs WHERE session_id = @session_id;

-- name: PutSessionRun :exec
-- Takes a session's lease (the caller checked the previous holder is dead or itself).
INSERT INTO session_runs (session_id, owner, pid, host, started_at, heartbeat_at)
VALUES (@session_id, @owner, @pid, @host, @started_at, @heartbeat_at)
ON CONFLICT (session_id) DO UPDATE
SET owner = excluded.owner, pid = excluded.pid, host = excluded.host,
    started_at = excluded.started_at, heartbeat_at = excluded.heartbeat_at;

-- name: RenewSessionRun :execrows
-- A heartbeat: only the holder's own lease is renewed.
UPDATE session_runs SET heartbeat_at = @heartbeat_at
WHERE session_id = @session_id AND owner = @owner;

-- name: DeleteSessionRun :execrows
-- Releases (or clears a dead) lease, only if `owner` still holds it.
DELETE FROM session_runs WHERE session_id = @session_id AND owner = @owner;

-- name: GetLastUserMessageId :one
-- The session's newest user message (what a resumed loop answers), without loading the
-- history: walks messages_session_created from the end.
SELECT id FROM messages
WHERE session_id = @session_id AND role = 'user'
ORDER BY created_at DESC, id DESC
LIMIT 1;
