-- Queries of the `scribe` command line (crates/cli): list previews and id-prefix lookup.
-- (`scribe db check` uses `Database::check` of crates/db.)

-- name: ListSessionPreviews :many
-- The text parts of each given session's first user message, in part order, each cut to
-- @max_chars characters (the preview column of `scribe list`). Synthetic parts (the text
-- of attached files) are left out: the preview is what the user typed. One indexed probe
-- per session, never a whole conversation.
SELECT p.session_id, substr(p.search_text, 1, CAST(@max_chars AS INTEGER)) AS "text!: String"
FROM parts AS p
WHERE p.type = 'text'
  AND coalesce(p.data ->> '$.synthetic', 0) = 0
  AND p.message_id IN (
      SELECT (SELECT m.id FROM messages AS m
              WHERE m.session_id = s.id AND m.role = 'user'
              ORDER BY m.created_at, m.id
              LIMIT 1)
      FROM sessions AS s
      WHERE s.id IN (sqlc.slice(session_ids)))
ORDER BY p.session_id, p.position;

-- name: ListSessionsByIdRange :many
-- Sessions whose id is in [@lo, @hi), by id: with @hi = @lo followed by U+10FFFF this is
-- every id starting with @lo, found by the primary key rather than a LIKE scan.
SELECT * FROM sessions
WHERE id >= @lo AND id < @hi
ORDER BY id
LIMIT @limit;

-- name: ListMessageIdsByRange :many
-- The ids of a session's messages in [@lo, @hi) (a message id prefix, as above).
SELECT id FROM messages
WHERE session_id = @session_id AND id >= @lo AND id < @hi
ORDER BY id
LIMIT @limit;

-- name: GetSessionIdNeighbors :one
-- The session ids just before and after @id in id order (NULL at either end): the shortest
-- prefix naming only @id is one character longer than what it shares with either.
SELECT
    (SELECT max(id) FROM sessions WHERE id < @id) AS "before?: String",
    (SELECT min(id) FROM sessions WHERE id > @id) AS "after?: String";
