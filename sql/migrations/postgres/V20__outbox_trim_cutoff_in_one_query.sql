-- Scribe schema for PostgreSQL, version 20: `scribe_outbox_trim` finds where to stop in
-- one query.
--
-- V19's trim walked the expired rows one by one in PL/pgSQL, in transaction id order, to
-- the first row younger than the retention. The same row is the first of an index scan on
-- the primary key that skips the old ones, in the executor: with 300,000 expired rows the
-- trim took 330–450 ms at V19 and 280–410 ms now (the DELETE is the rest; measured on a
-- throw-away cluster of `.ci/with-postgres`). What it deletes and records is unchanged.

CREATE OR REPLACE FUNCTION scribe_outbox_trim(keep_ms BIGINT) RETURNS BIGINT
LANGUAGE plpgsql AS $$
DECLARE
    running xid8;
    cutoff TIMESTAMPTZ := clock_timestamp() - keep_ms * INTERVAL '1 millisecond';
    was xid8;
    below xid8;
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
    -- The first row, in transaction id order, still within the retention. It and every row
    -- after it stay, older ones included: what goes is a prefix in id order, which is what
    -- the horizon records.
    SELECT o.xid INTO below FROM scribe_outbox o
    WHERE o.xid < running AND o.at >= cutoff
    ORDER BY o.xid
    LIMIT 1;
    IF NOT FOUND THEN
        below := running;
    END IF;
    IF below <= was THEN
        RETURN 0;
    END IF;
    WITH gone AS (DELETE FROM scribe_outbox WHERE xid < below RETURNING n)
    SELECT count(*), coalesce(sum(n), 0) INTO gone_rows, gone_changes FROM gone;
    UPDATE scribe_outbox_trim SET horizon = below, changes = changes + gone_changes;
    RETURN gone_rows;
END;
$$;
