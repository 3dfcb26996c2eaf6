-- PostgreSQL spellings of the cli queries SQLite writes differently
-- (sql/queries/sqlite/cli.sql): part JSON is TEXT, read as jsonb (without its NUL escapes,
-- which jsonb refuses: `scribe_json_without_nul`, V24); a part is synthetic when
-- its `synthetic` is true (or 1, as SQLite reads it).

-- name: ListSessionPreviews :many
-- The text parts of each given session's first user message with text the user typed, in
-- part order, each cut to @max_chars characters (the preview column of `scribe list`).
-- Synthetic parts (the text of attached files, a command's output, an agent's caveat) are
-- left out, and so is a message of nothing else (Claude Code's caveat before a command):
-- the preview is what the user typed. Indexed probes of a session's first user messages,
-- never a whole conversation. A part whose JSON has no text (damaged or
-- written by another program) is left out, as ListMessageTexts leaves it out.
SELECT p.session_id, substr(v.search_text, 1, CAST(@max_chars AS INTEGER)) AS "text!: String"
FROM parts AS p
JOIN parts_search AS v ON v.seq = p.seq
WHERE p.type = 'text' AND v.search_text IS NOT NULL
  AND coalesce(CAST(scribe_json_without_nul(p.data) AS jsonb) ->> 'synthetic', 'false') NOT IN ('true', '1')
  AND p.message_id IN (
      SELECT (SELECT m.id FROM messages AS m
              WHERE m.session_id = s.id AND m.role = 'user'
                AND EXISTS (SELECT 1 FROM parts AS q
                            WHERE q.message_id = m.id AND q.type = 'text'
                              AND coalesce(CAST(scribe_json_without_nul(q.data) AS jsonb) ->> 'synthetic', 'false') NOT IN ('true', '1'))
              ORDER BY m.created_at, m.id
              LIMIT 1)
      FROM sessions AS s
      WHERE s.id IN (sqlc.slice(session_ids)))
ORDER BY p.session_id, p.position;
