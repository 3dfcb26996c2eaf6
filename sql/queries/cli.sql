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
-- The session ids just before and after @id in id order (NULL at either end): the shortest
-- prefix naming only @id is one character longer than what it shares with either.
SELECT
    (SELECT max(id) FROM sessions WHERE id < @id) AS "before?: String",
    (SELECT min(id) FROM sessions WHERE id > @id) AS "after?: String";
