-- Scribe schema for PostgreSQL, version 19: changes go into an outbox table, not NOTIFY.
--
-- Why. Since V14 every committing transaction sent one NOTIFY. PostgreSQL takes its ONE
-- global notify lock in PreCommit_Notify and holds it through the commit (async.c), so
-- every writer's commit, on every host, queued behind every other's: with 16 writer
-- processes `Lock:object` was the largest wait event (up to 46% of samples) and 16 writers
-- did less than 4. An outbox row is an ordinary insert: writers of different sessions
-- share nothing at commit.
--
-- What. V14's row trigger still buffers a transaction's changes in `scribe.pending` (in
-- order, a change repeated once, a rolled-back savepoint taking its own back), and its
-- deferred flush (or the buffer passing ~6,000 bytes) now inserts them as one row of
-- `scribe_outbox`: the writer's transaction id (`pg_current_xact_id()`), the chunk number
-- within the transaction, the origin, how many changes, and the changes as JSON:
--   [["parts", "insert", "prt_…", "ses_…"], …]
-- A rolled-back transaction's rows never become visible. The listener
-- (crates/db/src/pg/events.rs) polls the table with a snapshot cursor: it takes the rows
-- of transactions its previous read's snapshot did not see (`xid >= xmax` or in the
-- in-progress list) and that the new read sees, so every committed row is read once, a
-- transaction still running is read when it commits, and no id taken before commit can
-- be skipped. V16's numbers and sequence go: the outbox keeps what a listener missed.
--
-- Commit order per session. Rows read in one poll are ordered by transaction id. Two
-- committed transactions that both update the same session row cannot have overlapped
-- (SERIALIZABLE: the later updater fails with a serialization failure and is retried as a
-- new transaction), so the one that committed first had taken its id before the other's
-- snapshot: ids follow commit order. Most writes update their session's row already (the
-- message counters); the row trigger makes the others (a part inserted or updated while
-- streaming, a message updated, a file version) do it too: once per session per
-- transaction it runs `UPDATE sessions SET message_count = message_count`, a HOT update
-- of nothing, with `scribe.bump` on so that the touch and notify triggers of sessions skip
-- it (it is not a change of the session). A lock (SELECT … FOR UPDATE) would not do: a
-- lock taken and released by a committed transaction does not fail a later one.
--
-- Retention. `scribe_outbox_trim(keep_ms)` deletes rows older than `keep_ms` (by the time
-- their row was written) whose transactions are all finished, and records in
-- `scribe_outbox_trim` the transaction id below which rows are gone and how many changes
-- were deleted in all, so a listener that falls behind can count exactly what it can no
-- longer read. One trimmer at a time (an advisory lock; others return at once).

CREATE TABLE scribe_outbox (
    xid     xid8        NOT NULL,
    chunk   INTEGER     NOT NULL,
    origin  TEXT        NOT NULL,
    n       INTEGER     NOT NULL,
    changes TEXT        NOT NULL,
    at      TIMESTAMPTZ NOT NULL DEFAULT clock_timestamp(),
    PRIMARY KEY (xid, chunk)
);

CREATE TABLE scribe_outbox_trim (
    one     BOOLEAN PRIMARY KEY DEFAULT TRUE CHECK (one),
    horizon xid8    NOT NULL,
    changes BIGINT  NOT NULL
);
INSERT INTO scribe_outbox_trim (horizon, changes) VALUES ('0', 0);

-- Writes `pending` (V14's comma-separated change arrays) as one outbox row. The changes
-- are counted without parsing them: each item was built by json_build_array, and `["`
-- appears in such text only where an item starts (a quote inside a JSON string is always
-- escaped).
CREATE OR REPLACE FUNCTION scribe_notify_send(pending TEXT) RETURNS VOID
LANGUAGE plpgsql AS $$
DECLARE
    chunk INTEGER := coalesce(nullif(current_setting('scribe.chunk', true), ''), '0')::INTEGER;
BEGIN
    INSERT INTO scribe_outbox (xid, chunk, origin, n, changes)
    VALUES (pg_current_xact_id(), chunk,
            coalesce(current_setting('scribe.origin', true), ''),
            (length(pending) - length(replace(pending, '["', ''))) / 2,
            '[' || pending || ']');
    PERFORM set_config('scribe.chunk', (chunk + 1)::TEXT, true);
END;
$$;

CREATE OR REPLACE FUNCTION scribe_notify_change() RETURNS TRIGGER
LANGUAGE plpgsql AS $$
DECLARE
    row_id TEXT;
    session TEXT;
    item TEXT;
    pending TEXT;
    mark TEXT;
    bumped TEXT;
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
    IF TG_TABLE_NAME <> 'sessions' THEN
        -- The session's row, unless this transaction wrote it already: a sessions item
        -- ends with `"ses_…", "ses_…"]` (json_build_array's spacing; no other item has
        -- its session id twice), or it was bumped before.
        mark := to_json(session)::text;
        IF strpos(pending, mark || ', ' || mark || ']') = 0 THEN
            bumped := coalesce(current_setting('scribe.bumped', true), '');
            IF strpos(bumped, mark) = 0 THEN
                PERFORM set_config('scribe.bumped', bumped || mark, true);
                PERFORM set_config('scribe.bump', 'on', true);
                UPDATE sessions SET message_count = message_count WHERE id = session;
                PERFORM set_config('scribe.bump', '', true);
            END IF;
        END IF;
    END IF;
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

-- The bump is no change of the session: neither touched nor announced.
DROP TRIGGER sessions_touch ON sessions;
CREATE TRIGGER sessions_touch BEFORE UPDATE ON sessions
FOR EACH ROW WHEN (current_setting('scribe.bump', true) IS DISTINCT FROM 'on')
EXECUTE FUNCTION scribe_touch();
DROP TRIGGER sessions_notify ON sessions;
CREATE TRIGGER sessions_notify AFTER INSERT OR UPDATE OR DELETE ON sessions
FOR EACH ROW WHEN (current_setting('scribe.bump', true) IS DISTINCT FROM 'on')
EXECUTE FUNCTION scribe_notify_change();

-- Deletes the rows written more than `keep_ms` ago (in transaction id order, up to the
-- first younger one) of transactions that have all finished; returns how many rows.
-- Rows below the recorded horizon are gone, and `changes` counts every change deleted.
-- Run it in its own READ COMMITTED transaction: its statements must each see what has
-- committed by then.
CREATE FUNCTION scribe_outbox_trim(keep_ms BIGINT) RETURNS BIGINT
LANGUAGE plpgsql AS $$
DECLARE
    running xid8;
    cutoff TIMESTAMPTZ := clock_timestamp() - keep_ms * INTERVAL '1 millisecond';
    was xid8;
    below xid8;
    r RECORD;
    gone_rows BIGINT;
    gone_changes BIGINT;
BEGIN
    -- "scribeou" in ASCII (migrations lock "scribemi").
    IF NOT pg_try_advisory_xact_lock(8314615134004014965) THEN
        RETURN 0;
    END IF;
    -- Before the outbox has statistics its estimates can be large enough to compile the
    -- statements below with JIT, which costs far more than running them.
    PERFORM set_config('jit', 'off', true);
    -- Every transaction with a lower id has finished, so its rows are visible to the
    -- statements below and none will be written later.
    running := pg_snapshot_xmin(pg_current_snapshot());
    SELECT t.horizon INTO was FROM scribe_outbox_trim t;
    below := running;
    FOR r IN SELECT o.xid, o.at FROM scribe_outbox o WHERE o.xid < running ORDER BY o.xid LOOP
        IF r.at >= cutoff THEN
            below := r.xid;
            EXIT;
        END IF;
    END LOOP;
    IF below <= was THEN
        RETURN 0;
    END IF;
    WITH gone AS (DELETE FROM scribe_outbox WHERE xid < below RETURNING n)
    SELECT count(*), coalesce(sum(n), 0) INTO gone_rows, gone_changes FROM gone;
    UPDATE scribe_outbox_trim SET horizon = below, changes = changes + gone_changes;
    RETURN gone_rows;
END;
$$;

DROP SEQUENCE scribe_change_seq;
