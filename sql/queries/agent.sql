-- Agent: compaction runs.

-- name: ClaimSessionCompaction :execrows
-- Marks a compaction of an active session as running, unless one is already running and
-- started at or after @stale_before (an older mark is left by a crashed process and is taken
-- over). One statement, so two compactors can never both claim the session.
UPDATE sessions
SET compacting_at = @now, updated_at = sqlgen.moved_forward(updated_at, @now)
WHERE id = @id
  AND ended_at IS NULL
  AND (compacting_at IS NULL OR compacting_at < @stale_before);
