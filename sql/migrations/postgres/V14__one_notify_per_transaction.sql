-- Scribe schema for PostgreSQL, version 14: a transaction announces its changes in one
-- notification instead of one per changed row.
--
-- Since V8 every changed session, message, part and file row sent its own `pg_notify` (an
-- append of a message with two parts: about four, with the session row its counter
-- trigger updates). Each one built a JSON object, was queued, checked against the
-- transaction's earlier ones for duplicates and written into the notification queue at
-- commit, while the commit held PostgreSQL's one global notify lock. Now the row trigger
-- only appends the change to a transaction-local setting (`scribe.pending`), and a deferred
-- constraint trigger sends what is pending as one notification when the transaction
-- commits:
--   {"origin": "…", "changes": [["parts", "insert", "prt_…", "ses_…"], …]}
-- (table, operation, row id, session id; in the order the changes were made). A payload is
-- kept under 7,000 bytes (PostgreSQL's limit is 8,000): a transaction that changes more rows
-- (an import, deleting a big session) sends several, in order. What a listener gets is
-- unchanged: every committed change, in commit order, none of a rolled-back transaction or
-- savepoint (the setting is transaction-local, so a rollback to a savepoint takes its
-- pending changes back with it), and a change repeated in one transaction once (as
-- PostgreSQL did with identical notifications).
--
-- The flush trigger is queued only by a change that finds nothing pending (its WHEN runs
-- when the row changes; the buffering trigger runs after the statement), so a transaction
-- queues one deferred call per statement that starts its changes, not one per row.

CREATE OR REPLACE FUNCTION scribe_notify_change() RETURNS TRIGGER
LANGUAGE plpgsql AS $$
DECLARE
    row_id TEXT;
    session TEXT;
    item TEXT;
    pending TEXT;
BEGIN
    -- Separate branches: PL/pgSQL resolves every field an expression names, and a
    -- sessions row has no session_id.
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
    item := json_build_array(TG_TABLE_NAME, lower(TG_OP), row_id, session)::text;
    pending := coalesce(current_setting('scribe.pending', true), '');
    IF pending = '' THEN
        pending := item;
    ELSIF strpos(pending, item) = 0 THEN
        pending := pending || ',' || item;
    ELSE
        RETURN NULL;
    END IF;
    IF length(pending) > 6000 THEN
        PERFORM scribe_notify_send(pending);
        pending := '';
    END IF;
    PERFORM set_config('scribe.pending', pending, true);
    RETURN NULL;
END;
$$;

-- Sends `pending` (comma-separated change arrays) as one notification.
CREATE FUNCTION scribe_notify_send(pending TEXT) RETURNS VOID
LANGUAGE sql AS $$
    SELECT pg_notify('scribe_events',
        '{"origin":' || to_json(coalesce(current_setting('scribe.origin', true), ''))::text
        || ',"changes":[' || pending || ']}');
$$;

CREATE FUNCTION scribe_notify_flush() RETURNS TRIGGER
LANGUAGE plpgsql AS $$
DECLARE
    pending TEXT := coalesce(current_setting('scribe.pending', true), '');
BEGIN
    IF pending <> '' THEN
        PERFORM scribe_notify_send(pending);
        PERFORM set_config('scribe.pending', '', true);
    END IF;
    RETURN NULL;
END;
$$;

CREATE CONSTRAINT TRIGGER sessions_notify_flush AFTER INSERT OR UPDATE OR DELETE ON sessions
DEFERRABLE INITIALLY DEFERRED FOR EACH ROW
WHEN (coalesce(current_setting('scribe.pending', true), '') = '')
EXECUTE FUNCTION scribe_notify_flush();
CREATE CONSTRAINT TRIGGER messages_notify_flush AFTER INSERT OR UPDATE OR DELETE ON messages
DEFERRABLE INITIALLY DEFERRED FOR EACH ROW
WHEN (coalesce(current_setting('scribe.pending', true), '') = '')
EXECUTE FUNCTION scribe_notify_flush();
CREATE CONSTRAINT TRIGGER parts_notify_flush AFTER INSERT OR UPDATE OR DELETE ON parts
DEFERRABLE INITIALLY DEFERRED FOR EACH ROW
WHEN (coalesce(current_setting('scribe.pending', true), '') = '')
EXECUTE FUNCTION scribe_notify_flush();
CREATE CONSTRAINT TRIGGER files_notify_flush AFTER INSERT OR UPDATE OR DELETE ON files
DEFERRABLE INITIALLY DEFERRED FOR EACH ROW
WHEN (coalesce(current_setting('scribe.pending', true), '') = '')
EXECUTE FUNCTION scribe_notify_flush();
