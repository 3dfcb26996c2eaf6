-- Scribe schema, version 23: every updated_at comes from the statement, i.e. from the
-- store's Clock (`Tx::now`), never from the database server's clock.
--
-- Until now `scribe_touch` (V1, V21) set updated_at to `scribe_now_ms()`
-- (`clock_timestamp()`) on an UPDATE that did not set it: the counter functions below
-- changed sessions that way, so with a frozen or offset Clock a session's updated_at
-- jumped to the server's clock, and two hosts with different clocks disagreed. Every
-- UPDATE in sql/queries sets updated_at itself (`sqlgen.moved_forward(updated_at, @now)`,
-- never backward), so the touch triggers, `scribe_touch` and `scribe_now_ms` go. V19's
-- bump (`scribe.bump`) changes no column, so without the trigger it leaves updated_at as
-- `scribe_touch` did. The counters move the session's updated_at to the child row's own
-- time (itself the Clock's), never backward; a delete, which has no such time, leaves it.
-- As SQLite's V23.
--
-- The change outbox (V19, V20) keeps the server's clock: its `at` and the trim cutoff are
-- retention bookkeeping no user sees, compared only with each other on the one server.
DROP TRIGGER sessions_touch ON sessions;
DROP TRIGGER messages_touch ON messages;
DROP TRIGGER parts_touch ON parts;
DROP TRIGGER files_touch ON files;
DROP FUNCTION scribe_touch();
DROP FUNCTION scribe_now_ms();

CREATE OR REPLACE FUNCTION scribe_messages_count() RETURNS TRIGGER
LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP = 'INSERT' THEN
        UPDATE sessions
        SET message_count = message_count + 1,
            updated_at = greatest(updated_at, NEW.created_at)
        WHERE id = NEW.session_id;
    ELSIF TG_OP = 'DELETE' THEN
        UPDATE sessions SET message_count = message_count - 1 WHERE id = OLD.session_id;
    ELSE
        UPDATE sessions SET message_count = message_count - 1 WHERE id = OLD.session_id;
        UPDATE sessions
        SET message_count = message_count + 1,
            updated_at = greatest(updated_at, NEW.updated_at)
        WHERE id = NEW.session_id;
    END IF;
    RETURN NULL;
END;
$$;

CREATE OR REPLACE FUNCTION scribe_parts_tool_count() RETURNS TRIGGER
LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP IN ('UPDATE', 'DELETE') AND OLD.type = 'tool' THEN
        UPDATE sessions SET tool_call_count = tool_call_count - 1 WHERE id = OLD.session_id;
    END IF;
    IF TG_OP IN ('UPDATE', 'INSERT') AND NEW.type = 'tool' THEN
        UPDATE sessions
        SET tool_call_count = tool_call_count + 1,
            updated_at = greatest(updated_at, NEW.updated_at)
        WHERE id = NEW.session_id;
    END IF;
    RETURN NULL;
END;
$$;
