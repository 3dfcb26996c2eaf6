-- Scribe schema for PostgreSQL, version 29: the messages that carry usage, by time, with
-- their session, as SQLite's version 29 (which says why): the usage from a time on reads
-- that period's entries, not every message (`scribe statusline` without a transcript,
-- 36,000 messages: a sequential scan of `messages` per query, 0.19 s a line; 0.02 s with
-- the index). Only messages that carry usage have an entry.
CREATE INDEX messages_usage_created ON messages (created_at, session_id)
WHERE input_tokens <> 0 OR output_tokens <> 0 OR cache_read_tokens <> 0
   OR cache_write_tokens <> 0 OR reasoning_tokens <> 0 OR cost_usd <> 0;
