-- Scribe schema, version 22: one definition of how a usage report turns an exact sum of
-- BIGINT counts into a BIGINT.
--
-- sum() of BIGINT is NUMERIC on PostgreSQL (exact, never overflowing), and a count near
-- i64::MAX in a damaged or imported row made `CAST(sum(…) AS BIGINT)` fail with 'bigint
-- out of range', and every report with it. The usage queries clamp each sum into BIGINT;
-- this function is that rule, written once instead of in every column of every query.
-- NULL (no rows) is 0.

CREATE FUNCTION scribe_clamped_bigint(total NUMERIC) RETURNS BIGINT
LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
    SELECT CAST(least(greatest(coalesce(total, 0), -9223372036854775808), 9223372036854775807)
                AS BIGINT)
$$;
