-- Scribe schema for PostgreSQL, version 8: every committed change to a session, message,
-- part or file is announced on the channel `scribe_events`, so processes on other hosts
-- can tell their subscribers (scribe_db's listener feeds each process's brokers).
--
-- A row trigger rather than the application: no writer can forget it, and NOTIFY is
-- transactional, so a change is announced only if, and when, it commits; notifications
-- arrive in commit order. The payload is small JSON (the limit is 8000 bytes):
--   {"table": "parts", "op": "update", "id": "prt_…", "session": "ses_…", "origin": "…"}
-- `origin` is the writing process's `scribe.origin` setting (each connection of Scribe's
-- pool sets it), so a process can skip the changes it announced itself. PostgreSQL
-- delivers identical notifications of one transaction once, as after_commit_keyed does.

CREATE FUNCTION scribe_notify_change() RETURNS TRIGGER
LANGUAGE plpgsql AS $$
DECLARE
    row_id TEXT;
    session TEXT;
BEGIN
    IF TG_OP = 'DELETE' THEN
        row_id := OLD.id;
        IF TG_TABLE_NAME = 'sessions' THEN
            session := OLD.id;
        ELSE
            session := OLD.session_id;
        END IF;
    ELSE
        row_id := NEW.id;
        IF TG_TABLE_NAME = 'sessions' THEN
            session := NEW.id;
        ELSE
            session := NEW.session_id;
        END IF;
    END IF;
    PERFORM pg_notify('scribe_events', json_build_object(
        'table', TG_TABLE_NAME,
        'op', lower(TG_OP),
        'id', row_id,
        'session', session,
        'origin', coalesce(current_setting('scribe.origin', true), '')
    )::text);
    RETURN NULL;
END;
$$;

CREATE TRIGGER sessions_notify AFTER INSERT OR UPDATE OR DELETE ON sessions
FOR EACH ROW EXECUTE FUNCTION scribe_notify_change();
CREATE TRIGGER messages_notify AFTER INSERT OR UPDATE OR DELETE ON messages
FOR EACH ROW EXECUTE FUNCTION scribe_notify_change();
CREATE TRIGGER parts_notify AFTER INSERT OR UPDATE OR DELETE ON parts
FOR EACH ROW EXECUTE FUNCTION scribe_notify_change();
CREATE TRIGGER files_notify AFTER INSERT OR UPDATE OR DELETE ON files
FOR EACH ROW EXECUTE FUNCTION scribe_notify_change();
