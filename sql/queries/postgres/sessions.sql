-- PostgreSQL spellings of the sessions queries SQLite writes differently
-- (sql/queries/sqlite/sessions.sql): a POSIX regular expression instead of GLOB, and
-- lineage numbers compared as NUMERIC, so a suffix too long for BIGINT is ordered, not an
-- error (MaxTitleLineageNumber saturates it at the BIGINT maximum, as SQLite's CAST does).
-- `title` is in the "C" collation, so the range compares bytes, as in SQLite.

-- name: ListTitleLineage :many
-- The sessions titled `t` or `t #N` (N ≥ 1, digits only), highest N first (`t` itself counts
-- as 1). Compares by range, not LIKE, so `_` and `%` in titles are literal.
SELECT * FROM sessions
WHERE title = @title
   OR (title > @title || ' #' AND title < @title || ' $'
       AND substr(title, length(@title) + 3) ~ '^[1-9][0-9]*$')
ORDER BY CASE WHEN title = @title THEN 1
              ELSE CAST(substr(title, length(@title) + 3) AS NUMERIC) END DESC,
         created_at DESC;

-- name: MaxTitleLineageNumber :one custom_plan
-- As SQLite's: `t` by its unique index, `t #N` by V31's index, whose expressions these
-- repeat to the letter. Planned on each call (`custom_plan`): the generic plan made
-- while `sessions` held a few rows aggregated over the whole lineage (an index scan, not
-- the one-row seek), and the connection kept it as the lineage grew (an import of 8,000
-- sessions of one title into a new store: 148 s; planned per call, 44 s).
SELECT CAST(least(greatest(coalesce((SELECT 1 FROM sessions WHERE title = @title), 0),
                           coalesce((SELECT max(CASE WHEN right(rtrim(title, '0123456789'), 2) = ' #'
                                                      AND substr(title, length(rtrim(title, '0123456789')) + 1, 1) BETWEEN '1' AND '9'
                                                 THEN CAST(substr(title, length(rtrim(title, '0123456789')) + 1) AS NUMERIC) END)
                                     FROM sessions
                                     WHERE CASE WHEN right(rtrim(title, '0123456789'), 2) = ' #'
                                                     AND substr(title, length(rtrim(title, '0123456789')) + 1, 1) BETWEEN '1' AND '9'
                                                THEN substr(title, 1, length(rtrim(title, '0123456789')) - 2) END = @title), 0)),
                  9223372036854775807)
            AS BIGINT) AS "n!";

-- name: TopSessionsByTokens :many
-- As the shared query, the sum taken as numeric: bigint addition raised 'bigint out of
-- range' for counts near i64::MAX (SQLite turns such a sum into a REAL instead).
SELECT * FROM sessions
ORDER BY CAST(input_tokens AS NUMERIC) + output_tokens + cache_read_tokens
         + cache_write_tokens + reasoning_tokens DESC, id
LIMIT @limit;

-- name: AddSessionCounts :exec custom_plan
-- Adds to sessions what the counter triggers add for new messages and tool parts, for rows
-- the bulk path (`scribe_db::bulk`) inserted while those triggers stood aside (schema V30,
-- `scribe.bulk`): @counts is a JSON object {session id: {"messages": n, "tools": n, "at":
-- ms}, …}; each session's message_count and tool_call_count grow by its numbers, and its
-- updated_at moves to `at` (its newest new message's created_at or new tool part's
-- updated_at, as the triggers move it), never backward. One UPDATE for the batch, planned
-- on each call (`custom_plan`): the generic plan made while `sessions` held a few rows
-- hashed every session (a scan of the whole primary key) to join the batch's few, and the
-- connection kept it as the table grew.
UPDATE sessions AS s
SET message_count = sqlgen.saturating_add(s.message_count, CAST(c.value ->> 'messages' AS BIGINT)),
    tool_call_count = sqlgen.saturating_add(s.tool_call_count, CAST(c.value ->> 'tools' AS BIGINT)),
    updated_at = greatest(s.updated_at, CAST(c.value ->> 'at' AS BIGINT))
FROM json_each(CAST(CAST(@counts AS TEXT) AS json)) AS c
WHERE s.id = c.key;
