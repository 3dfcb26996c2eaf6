-- Scribe schema for PostgreSQL, version 30: the session counters (message_count,
-- tool_call_count) move once for a statement of many rows, not once a row.
--
-- Every change of a session row is a new version of that row, and versions the writing
-- transaction made itself cannot be pruned before it ends: the next update of the row
-- first walks past all of them. The counter triggers of V1 and V23 updated the session
-- once per message and once per tool part, so a transaction writing n rows of one
-- session took time in the square of n. On a session of 7,209 messages and 9,612 tool
-- calls (2 cores, a throw-away cluster): `SessionService::clear` (its parts, then its
-- messages) 3.9 s; `scribe fork` 12.2 s; `scribe import FILE` of three such sessions 180 s.
--
-- Deletes: the counters are moved by statement-level triggers that read the statement's
-- deleted rows (a transition table) and update each session once (clear: 0.46 s). A
-- session delete, whose cascade deletes its parts once per message, is no slower
-- (0.57 -> 0.53 s). An append deletes nothing.
--
-- Inserts: a statement-level trigger with a transition table costs every single-row
-- append ~8% more of the server's instructions (4.01M -> 4.37M, counted by callgrind with
-- crates/bench/scripts/pg-append-instructions.sh), so the row triggers stay for the
-- one-row writes and leave an insert alone while the transaction-local setting
-- `scribe.bulk` is `on`: the bulk path (`scribe_db::bulk`, the import's and fork's
-- many-row statements) sets it around its CreateMessages and CreateParts and then adds the
-- same counts itself, one UPDATE per batch (AddSessionCounts). Its test
-- (tests/tests/bulk_insert.rs) holds the session rows it leaves equal to those the row
-- triggers leave. The test of the setting costs an append 0.15% (4.008M -> 4.014M).
--
-- A move of a message or part to another session (the UPDATE triggers) stays per row:
-- nothing moves rows in bulk.

DROP TRIGGER messages_count_delete ON messages;
DROP TRIGGER parts_tool_count_delete ON parts;

CREATE FUNCTION scribe_messages_count_deleted() RETURNS TRIGGER
LANGUAGE plpgsql AS $$
BEGIN
    UPDATE sessions AS s
    SET message_count = s.message_count - d.n
    FROM (SELECT session_id, count(*) AS n FROM gone GROUP BY session_id) AS d
    WHERE s.id = d.session_id;
    RETURN NULL;
END;
$$;

CREATE TRIGGER messages_count_delete AFTER DELETE ON messages
REFERENCING OLD TABLE AS gone
FOR EACH STATEMENT EXECUTE FUNCTION scribe_messages_count_deleted();

CREATE FUNCTION scribe_parts_tool_count_deleted() RETURNS TRIGGER
LANGUAGE plpgsql AS $$
BEGIN
    UPDATE sessions AS s
    SET tool_call_count = s.tool_call_count - d.n
    FROM (SELECT session_id, count(*) AS n FROM gone WHERE type = 'tool'
          GROUP BY session_id) AS d
    WHERE s.id = d.session_id;
    RETURN NULL;
END;
$$;

CREATE TRIGGER parts_tool_count_delete AFTER DELETE ON parts
REFERENCING OLD TABLE AS gone
FOR EACH STATEMENT EXECUTE FUNCTION scribe_parts_tool_count_deleted();

-- The row functions of V23, for inserts and moves only now (deletes are counted above),
-- an insert left to the bulk path while `scribe.bulk` is on. Tested inside the function,
-- which runs for every message anyway: the same test in the trigger's WHEN clause is
-- compiled again for every statement (+56k instructions an append).
CREATE OR REPLACE FUNCTION scribe_messages_count() RETURNS TRIGGER
LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP = 'INSERT' THEN
        IF current_setting('scribe.bulk', true) = 'on' THEN
            RETURN NULL;
        END IF;
        UPDATE sessions
        SET message_count = message_count + 1,
            updated_at = greatest(updated_at, NEW.created_at)
        WHERE id = NEW.session_id;
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
    IF TG_OP = 'INSERT' AND current_setting('scribe.bulk', true) = 'on' THEN
        RETURN NULL;
    END IF;
    IF TG_OP = 'UPDATE' AND OLD.type = 'tool' THEN
        UPDATE sessions SET tool_call_count = tool_call_count - 1 WHERE id = OLD.session_id;
    END IF;
    IF NEW.type = 'tool' THEN
        UPDATE sessions
        SET tool_call_count = tool_call_count + 1,
            updated_at = greatest(updated_at, NEW.updated_at)
        WHERE id = NEW.session_id;
    END IF;
    RETURN NULL;
END;
$$;
