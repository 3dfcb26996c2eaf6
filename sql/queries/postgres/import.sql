-- PostgreSQL spellings of the importers' queries on `import_files`: since schema V27 its
-- key is (source, md5(path)) (a path of any length is stored;
-- sql/migrations/postgres/V27 says why).

-- name: UpsertImportFile :exec
-- Records what an import saw of a file and where it stopped; counters add up. The row is
-- updated, or inserted when there is none: ON CONFLICT cannot name the key's expression
-- here (sqlgen's parser takes columns only). A write runs SERIALIZABLE, so two writers
-- inserting the same path concurrently fail one of them with 40001, which is retried, as
-- ON CONFLICT would have made it update.
WITH v (source, path, size, mtime_ns, byte_offset, lines, carry, records, skipped, imported_at) AS (
    VALUES (CAST(@source AS TEXT), CAST(@path AS TEXT), CAST(@size AS BIGINT),
            CAST(@mtime_ns AS BIGINT), CAST(@byte_offset AS BIGINT), CAST(@lines AS BIGINT),
            CAST(sqlc.narg(carry) AS TEXT), CAST(@records AS BIGINT), CAST(@skipped AS BIGINT),
            CAST(@imported_at AS BIGINT))
), updated AS (
    UPDATE import_files AS f SET
        size = v.size,
        mtime_ns = v.mtime_ns,
        byte_offset = v.byte_offset,
        lines = v.lines,
        carry = v.carry,
        records = f.records + v.records,
        skipped = f.skipped + v.skipped,
        imported_at = v.imported_at
    FROM v
    WHERE f.source = v.source AND md5(f.path) = md5(v.path)
      AND f.path = v.path
    RETURNING 1
)
INSERT INTO import_files (source, path, size, mtime_ns, byte_offset, lines, carry, records, skipped, imported_at)
SELECT * FROM v
WHERE NOT EXISTS (SELECT 1 FROM updated);
