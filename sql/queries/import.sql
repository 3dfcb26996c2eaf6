-- Queries of the history importers (crates/import): their own state tables (V6). Rows of
-- sessions, messages and parts are written through the session and message crates.

-- name: ListImportFiles :many
-- Every file read from one source, by path (read once per import, so checking a file
-- costs one stat and a map lookup).
SELECT * FROM import_files WHERE source = @source ORDER BY path;

-- name: UpsertImportFile :exec
-- Records what an import saw of a file and where it stopped; counters add up.
INSERT INTO import_files (source, path, size, mtime_ns, byte_offset, lines, carry, records, skipped, imported_at)
VALUES (@source, @path, @size, @mtime_ns, @byte_offset, @lines, @carry, @records, @skipped, @imported_at)
ON CONFLICT (source, path) DO UPDATE SET
    size = excluded.size,
    mtime_ns = excluded.mtime_ns,
    byte_offset = excluded.byte_offset,
    lines = excluded.lines,
    carry = excluded.carry,
    records = import_files.records + excluded.records,
    skipped = import_files.skipped + excluded.skipped,
    imported_at = excluded.imported_at;

-- name: GetImportSession :one
SELECT * FROM import_sessions WHERE source = @source AND external_id = @external_id;

-- name: GetImportSessionById :one
SELECT * FROM import_sessions WHERE session_id = @session_id;

-- name: InsertImportSession :exec
INSERT INTO import_sessions (session_id, source, external_id, path, title_rank, cost_flags,
                             pending_parent, fingerprint, imported_at)
VALUES (@session_id, @source, @external_id, @path, @title_rank, @cost_flags,
        @pending_parent, @fingerprint, @imported_at);

-- name: UpdateImportSession :exec
UPDATE import_sessions
SET path = @path,
    title_rank = @title_rank,
    cost_flags = @cost_flags,
    pending_parent = @pending_parent,
    fingerprint = @fingerprint,
    imported_at = @imported_at
WHERE session_id = @session_id;

-- name: ListUnpricedImportSessions :many
-- One source's imported sessions with usage of a model that had no price (cost bit 4,
-- scribe_import::pricing::UNKNOWN) and no cost reported by the source (bit 1, REPORTED),
-- last priced with another catalog than @pricing_version (sessions.pricing_version).
SELECT i.session_id, i.cost_flags
FROM import_sessions AS i
JOIN sessions AS s ON s.id = i.session_id
WHERE i.source = @source AND (i.cost_flags & 4) <> 0 AND (i.cost_flags & 1) = 0
  AND s.pricing_version IS DISTINCT FROM @pricing_version
ORDER BY i.session_id;

-- name: SetImportSessionCostFlags :exec
UPDATE import_sessions SET cost_flags = @cost_flags WHERE session_id = @session_id;

-- name: ListPendingParents :many
-- Imported sessions whose parent was not imported yet, with the parent's session when it
-- now is (NULL otherwise).
SELECT c.session_id, c.source, c.pending_parent AS "pending_parent!: String",
       p.session_id AS parent_session_id
FROM import_sessions AS c
LEFT JOIN import_sessions AS p
    ON p.source = c.source AND p.external_id = c.pending_parent
WHERE c.pending_parent IS NOT NULL;

-- name: SummarizeImports :many
-- Per source: files read, their bytes, records taken and skipped, and the last import.
SELECT source, count(*) AS "files!: i64", CAST(sum(size) AS BIGINT) AS "bytes!",
       CAST(sum(records) AS BIGINT) AS "records!", CAST(sum(skipped) AS BIGINT) AS "skipped!",
       max(imported_at) AS "last_imported_at!: i64"
FROM import_files
GROUP BY source
ORDER BY source;

-- name: ListRecentImportedConfigs :many
-- The model_config of one source's most recently active imported sessions that have one,
-- newest first (what an agent last said about the session as a whole: Codex's usage
-- limits, scribe_import::sources::codex::RATE_LIMITS).
SELECT s.model_config AS "model_config!: String"
FROM import_sessions AS i
JOIN sessions AS s ON s.id = i.session_id
WHERE i.source = @source AND s.model_config IS NOT NULL
ORDER BY s.updated_at DESC
LIMIT @limit;

-- name: CountImportedSessions :many
SELECT source, count(*) AS "sessions!: i64"
FROM import_sessions
GROUP BY source
ORDER BY source;

-- name: GetImportKey :one
SELECT * FROM import_keys WHERE source = @source AND record_key = @record_key;

-- name: MarkImportKey :exec
-- Records that @session_id holds a record key; the first session to hold it keeps it.
INSERT INTO import_keys (source, record_key, session_id)
VALUES (@source, @record_key, @session_id)
ON CONFLICT (source, record_key) DO UPDATE SET
    session_id = coalesce(import_keys.session_id, excluded.session_id);

-- name: SetImportKeyTitle :exec
-- A title for the session that will hold a record key (NULL clears it once applied).
INSERT INTO import_keys (source, record_key, title, title_rank)
VALUES (@source, @record_key, @title, @title_rank)
ON CONFLICT (source, record_key) DO UPDATE SET
    title = excluded.title,
    title_rank = excluded.title_rank;
