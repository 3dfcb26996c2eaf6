-- Scribe schema for PostgreSQL, version 16: every announced change carries a number, so a
-- listener that lost its connection can say how many changes it missed.
--
-- A notification (V14) now reads
--   {"origin": "…", "seq": [n1, n2, …], "changes": [[table, op, id, session], …]}
-- with one number per change, in the same order, taken from the sequence
-- scribe_change_seq when the notification is sent: at commit (V14's deferred flush), or
-- mid-transaction for a transaction whose changes fill more than one notification. A
-- listener reads the sequence's last value when it (re)connects; after a reconnect, the
-- numbers handed out since its previous connection began that it never received are the
-- changes it missed (crates/db/src/pg/events.rs says exactly what that count is: an upper
-- bound, exact when nothing was committing at either connect). Numbers are taken only
-- when changes are sent, not as rows change, so a rolled-back statement or transaction
-- spends none (short of a commit that fails after its flush ran: a serialization
-- failure at commit), and a payload stays under 8,000 bytes (the 6,000 of changes V14
-- allows, plus at most ~20 bytes per change for its number).

CREATE SEQUENCE scribe_change_seq;

-- PL/pgSQL, not SQL: a SQL function is planned on every call, and a subquery counting
-- the changes cost ~70 µs per commit that way; this costs a few µs over V14's. The changes
-- are counted without parsing them: `pending` is V14's comma-separated items, each built
-- by json_build_array, and `["` appears in such text only where an item starts (a quote
-- inside a JSON string is always escaped).
CREATE OR REPLACE FUNCTION scribe_notify_send(pending TEXT) RETURNS VOID
LANGUAGE plpgsql AS $$
DECLARE
    changes INT := (length(pending) - length(replace(pending, '["', ''))) / 2;
    seq TEXT := nextval('scribe_change_seq')::text;
BEGIN
    FOR i IN 2..changes LOOP
        seq := seq || ',' || nextval('scribe_change_seq')::text;
    END LOOP;
    PERFORM pg_notify('scribe_events',
        '{"origin":' || to_json(coalesce(current_setting('scribe.origin', true), ''))::text
        || ',"seq":[' || seq || '],"changes":[' || pending || ']}');
END;
$$;
