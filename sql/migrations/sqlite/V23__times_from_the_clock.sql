-- Scribe schema, version 23: every updated_at comes from the statement, i.e. from the
-- store's Clock (`Tx::now`), never from the database's own clock.
--
-- Until now `sessions_touch`, `messages_touch`, `parts_touch` and `files_touch` (V1; parts'
-- redefined in V3 and V11) stamped a row that an UPDATE changed without setting updated_at
-- with `unixepoch('subsec')`: the counter triggers below changed sessions that way, so
-- with a frozen or offset Clock a session's updated_at jumped to the wall clock, and two
-- hosts with different clocks disagreed. Every UPDATE in sql/queries sets updated_at
-- itself (`sqlgen.moved_forward(updated_at, @now)`, never backward), so the touch
-- triggers go. The counters move the session's updated_at to the child row's own time
-- (itself the Clock's), never backward; a delete, which has no such time, leaves it.
DROP TRIGGER sessions_touch;
DROP TRIGGER messages_touch;
DROP TRIGGER parts_touch;
DROP TRIGGER files_touch;

DROP TRIGGER messages_count_move;
CREATE TRIGGER messages_count_move AFTER UPDATE OF session_id ON messages
WHEN old.session_id IS NOT new.session_id
BEGIN
    UPDATE sessions SET message_count = message_count - 1 WHERE id = old.session_id;
    UPDATE sessions
    SET message_count = message_count + 1,
        updated_at = max(updated_at, new.updated_at)
    WHERE id = new.session_id;
END;

DROP TRIGGER parts_tool_count_insert;
CREATE TRIGGER parts_tool_count_insert AFTER INSERT ON parts
WHEN new.type = 'tool'
BEGIN
    UPDATE sessions
    SET tool_call_count = tool_call_count + 1,
        updated_at = max(updated_at, new.updated_at)
    WHERE id = new.session_id;
END;

DROP TRIGGER parts_tool_count_update;
CREATE TRIGGER parts_tool_count_update AFTER UPDATE OF type, session_id ON parts
WHEN (old.type = 'tool') IS NOT (new.type = 'tool') OR old.session_id IS NOT new.session_id
BEGIN
    UPDATE sessions SET tool_call_count = tool_call_count - 1
    WHERE id = old.session_id AND old.type = 'tool';
    UPDATE sessions
    SET tool_call_count = tool_call_count + 1,
        updated_at = max(updated_at, new.updated_at)
    WHERE id = new.session_id AND new.type = 'tool';
END;
