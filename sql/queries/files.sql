-- Files history: the versions of files a session changed. Versions count 1, 2, 3 … per
-- (session, path), assigned here inside the write transaction so they never collide.

-- name: CreateFileVersion :one
INSERT INTO files (id, session_id, path, content, version, created_at, updated_at)
VALUES (
    @id, @session_id, @path, @content,
    (SELECT coalesce(max(version), 0) + 1 FROM files WHERE session_id = @session_id AND path = @path),
    @now, @now
)
RETURNING *;

-- name: GetFileVersion :one
SELECT * FROM files WHERE session_id = @session_id AND path = @path AND version = @version;

-- name: ListFileVersions :many
-- Oldest first.
SELECT * FROM files WHERE session_id = @session_id AND path = @path ORDER BY version;

-- name: ListLatestFiles :many
-- The newest version of every path the session changed, by path.
SELECT f.* FROM files AS f
WHERE f.session_id = @session_id
  AND f.version = (SELECT max(g.version) FROM files AS g
                   WHERE g.session_id = f.session_id AND g.path = f.path)
ORDER BY f.path;

-- name: ListFileSessions :many
-- The session holding each of the given file versions (an import's clashing ids, explained).
SELECT id, session_id FROM files WHERE id IN (sqlc.slice(ids));

-- name: ListSessionFiles :many
SELECT * FROM files WHERE session_id = @session_id ORDER BY path, version;

-- name: ListFilesOfSessions :many
-- The file versions of many sessions, each session's as ListSessionFiles orders them.
SELECT * FROM files
WHERE session_id IN (sqlc.slice(session_ids))
ORDER BY session_id, path, version;
