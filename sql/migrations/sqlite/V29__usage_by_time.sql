-- Scribe schema, version 29: the messages that carry usage, by time.
--
-- `scribe statusline` (run by Claude Code at every prompt), `scribe stats --since`, the
-- `--by block` report and the web page's usage of a period ask for the usage from a time
-- on (sql/queries/session_admin.sql, OwnUsageSince and MessageUsageSince): the sessions
-- started since then and those whose messages carry usage since then. Nothing indexed a
-- message by its time alone, so the second half read every message of the history:
-- 100–120 ms per query at 710,000 messages, four such queries per status line (0.37 s a
-- line; 0.10 s with this index; `stats --since 7d` 0.20 → 0.06 s).
--
-- The index holds only the messages that carry usage (a token count or a cost: the
-- fragment carries_usage, whose expression the queries use as written, so the planner
-- takes the index), by time, with their session: what those queries read of them, so
-- they never visit the table (and the whole history, `scribe stats`, reads this index
-- instead of the table: 1.24 → 1.13 s there). A message without usage (a user's, a
-- tool's, an assistant's until its usage is added) has no entry, so an append pays only
-- the test of its counts.
CREATE INDEX messages_usage_created ON messages (created_at, session_id)
WHERE input_tokens <> 0 OR output_tokens <> 0 OR cache_read_tokens <> 0
   OR cache_write_tokens <> 0 OR reasoning_tokens <> 0 OR cost_usd <> 0;
