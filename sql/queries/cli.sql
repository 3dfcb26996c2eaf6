-- Queries of the `scribe` command line (crates/cli): list previews and id-prefix lookup.
-- (`scribe db check` uses `Database::check` of crates/db.)

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
-- The session id just before @id, and the first one after every id that begins with @id
-- (@past = @id followed by U+10FFFF), in id order, NULL at either end: an id prefix names
-- the session whose id every match begins with (a sub-agent's `parent:agent` id begins
-- with its parent's), so the shortest prefix naming @id is one character longer than what
-- it shares with either.
SELECT
    (SELECT max(id) FROM sessions WHERE id < @id) AS "before?: String",
    (SELECT min(id) FROM sessions WHERE id >= @past) AS "after?: String";
