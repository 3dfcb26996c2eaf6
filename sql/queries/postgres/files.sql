-- PostgreSQL spellings of the file-history queries that look a path up: since schema V27
-- the key is (session_id, md5(path), version) (a path of any length is
-- stored; sql/migrations/postgres/V27 says why), so each names the digest to walk the
-- index to the path's entries, and the path itself to compare it.

-- name: CreateFileVersion :one
INSERT INTO files (id, session_id, path, content, version, created_at, updated_at)
VALUES (
    @id, @session_id, @path, @content,
    (SELECT coalesce(max(version), 0) + 1 FROM files
     WHERE session_id = @session_id AND md5(path) = md5(@path)
       AND path = @path),
    @now, @now
)
RETURNING *;

-- name: GetFileVersion :one
SELECT * FROM files
WHERE session_id = @session_id AND md5(path) = md5(@path)
  AND path = @path AND version = @version;

-- name: ListFileVersions :many
-- Oldest first.
SELECT * FROM files
WHERE session_id = @session_id AND md5(path) = md5(@path)
  AND path = @path
ORDER BY version;

-- name: ListLatestFiles :many
-- The newest version of every path the session changed, by path: one pass over the
-- session's versions in path order (the shared spelling's lookup of each path's newest
-- version by `g.path = f.path` could only walk the key's session prefix since V27).
SELECT DISTINCT ON (path) * FROM files
WHERE session_id = @session_id
ORDER BY path, version DESC;
