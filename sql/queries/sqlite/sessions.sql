-- SQLite spellings of the sessions queries that PostgreSQL writes differently
-- (sql/queries/postgres/sessions.sql has its own).

-- name: ListTitleLineage :many
-- The sessions titled `t` or `t #N` (N ≥ 1, digits only), highest N first (`t` itself counts
-- as 1). Compares by range, not LIKE, so `_` and `%` in titles are literal.
SELECT * FROM sessions
WHERE title = @title
   OR (title > @title || ' #' AND title < @title || ' $'
       AND substr(title, length(@title) + 3) GLOB '[1-9]*'
       AND NOT (substr(title, length(@title) + 3) GLOB '*[^0-9]*'))
ORDER BY CASE WHEN title = @title THEN 1
              ELSE CAST(substr(title, length(@title) + 3) AS INTEGER) END DESC,
         created_at DESC;

-- name: MaxTitleLineageNumber :one
-- The highest number of the lineage `t` (`t` itself counts as 1), 0 when no session is of
-- it: `t` by its unique index, `t #N` by V31's index of each title's lineage base and
-- number, whose expressions these repeat to the letter (one seek, not a scan of the
-- lineage).
SELECT CAST(max(coalesce((SELECT 1 FROM sessions WHERE title = @title), 0),
                coalesce((SELECT max(CASE WHEN substr(rtrim(title, '0123456789'), -2) = ' #'
                                            AND substr(title, length(rtrim(title, '0123456789')) + 1, 1) BETWEEN '1' AND '9'
                                       THEN CAST(substr(title, length(rtrim(title, '0123456789')) + 1) AS INTEGER) END)
                          FROM sessions
                          WHERE CASE WHEN substr(rtrim(title, '0123456789'), -2) = ' #'
                                          AND substr(title, length(rtrim(title, '0123456789')) + 1, 1) BETWEEN '1' AND '9'
                                     THEN substr(title, 1, length(rtrim(title, '0123456789')) - 2) END = @title), 0))
            AS INTEGER) AS "n!";

-- name: AddSessionCounts :exec
-- As PostgreSQL's (sql/queries/postgres/sessions.sql), for parity: SQLite's bulk path keeps
-- its counter triggers and does not use it.
UPDATE sessions
SET message_count = sqlgen.saturating_add(message_count, CAST(c.value ->> '$.messages' AS INTEGER)),
    tool_call_count = sqlgen.saturating_add(tool_call_count, CAST(c.value ->> '$.tools' AS INTEGER)),
    updated_at = max(updated_at, CAST(c.value ->> '$.at' AS INTEGER))
FROM json_each(CAST(@counts AS TEXT)) AS c
WHERE sessions.id = c.key;
