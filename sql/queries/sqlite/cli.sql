-- SQLite spellings of the cli queries that PostgreSQL writes differently
-- (sql/queries/postgres/cli.sql has its own).

-- name: ListSessionPreviews :many
-- The text parts of each given session's first user message with text the user typed, in
-- part order, each cut to @max_chars characters (the preview column of `scribe list`).
-- Synthetic parts (the text of attached files, a command's output, an agent's caveat) are
-- left out, and so is a message of nothing else (Claude Code's caveat before a command):
-- the preview is what the user typed. Indexed probes of a session's first user messages,
-- never a whole conversation. A part whose JSON has no text (damaged or
-- written by another program) is left out, as ListMessageTexts leaves it out.
-- A NUL character in the text is a space in the preview, as on PostgreSQL: substr() stops
-- at a NUL (it reads a C string) and replace() cannot take char(0) as its pattern, so a
-- part whose JSON holds the escape `\u0000` is read from its JSON with that escape made a
-- space escape. Every escaped backslash is first written `\u005c`, so that the letters
-- "u0000" after one (`\\u0000`, no NUL) stay; the text read is the same but for its NULs.
SELECT p.session_id, substr(
    CASE WHEN p.data GLOB '*\u0000*'
        THEN replace(replace(p.data, '\\', '\u005c'), '\u0000', '\u0020') ->> '$.text'
        ELSE v.search_text
    END, 1, CAST(@max_chars AS INTEGER)) AS "text!: String"
FROM parts AS p
JOIN parts_search AS v ON v.seq = p.seq
WHERE p.type = 'text' AND v.search_text IS NOT NULL
  AND coalesce(p.data ->> '$.synthetic', 0) = 0
  AND p.message_id IN (
      SELECT (SELECT m.id FROM messages AS m
              WHERE m.session_id = s.id AND m.role = 'user'
                AND EXISTS (SELECT 1 FROM parts AS q
                            WHERE q.message_id = m.id AND q.type = 'text'
                              AND coalesce(q.data ->> '$.synthetic', 0) = 0)
              ORDER BY m.created_at, m.id
              LIMIT 1)
      FROM sessions AS s
      WHERE s.id IN (sqlc.slice(session_ids)))
ORDER BY p.session_id, p.position;
