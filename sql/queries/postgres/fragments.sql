-- PostgreSQL spellings of the fragments each dialect writes its own way
-- (sql/queries/sqlite/fragments.sql has SQLite's; the shared ones are in
-- sql/queries/fragments.sql).

-- fragment: clamped_cost_sum(x)
-- The sum of the costs x over a group, at most the largest finite amount (f64::MAX), as
-- every stored cost sum (ARCHITECTURE.md, "Clamped cost sums"), and 0 for no rows.
-- sum(float8) fails with "value out of range: overflow" past f64::MAX, so each cost is
-- scaled by 2^-64 (exact: a power of two), summed (the same additions, bits scaled, and no
-- sum of fewer than 2^64 rows can overflow), clamped at MAX * 2^-64 (9.745314011399998e288)
-- and scaled back by 2^64, which gives PostgreSQL's own sum exactly below the limit. Costs
-- under ~1e-289 would lose precision (subnormal). Written for a use in a select list
-- (its continuation lines are indented to line up there).
CAST(coalesce(least(sum(x * CAST(5.421010862427522e-20 AS DOUBLE PRECISION)),
                          CAST(9.745314011399998e288 AS DOUBLE PRECISION))
                    * CAST(1.8446744073709552e19 AS DOUBLE PRECISION), 0) AS DOUBLE PRECISION)

-- fragment: utc_hour(ms)
-- The UTC hour (`YYYY-MM-DDTHH`) of the time ms (milliseconds since the epoch), the finest
-- bucket of every usage chart and `scribe stats` (its day is the first ten characters; a
-- usage block starts on an hour). A time outside years 0000-9999 (a damaged or
-- hand-edited row) counts in the first or last hour of those years.
to_char(to_timestamp(least(greatest(ms, -62167219200000), 253402300799999) / 1000) AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24')

-- fragment: clamped_count_sum(x)
-- The sum of the counts x (tokens, calls) over a group, summed exactly (numeric) and
-- clamped into BIGINT by scribe_clamped_bigint (V22), as every reported count sum.
scribe_clamped_bigint(sum(x))
