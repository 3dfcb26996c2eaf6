-- SQLite spellings of the fragments each dialect writes its own way
-- (sql/queries/postgres/fragments.sql has PostgreSQL's; the shared ones are in
-- sql/queries/fragments.sql).

-- fragment: clamped_cost_sum(x)
-- The sum of the costs x over a group, at most the largest finite amount (f64::MAX), as
-- every stored cost sum (ARCHITECTURE.md, "Clamped cost sums"): total() gives inf past it
-- (and 0.0 for no rows).
CAST(min(total(x), 1.7976931348623157e308) AS DOUBLE PRECISION)

-- fragment: utc_hour(ms)
-- The UTC hour (`YYYY-MM-DDTHH`) of the time ms (milliseconds since the epoch), the finest
-- bucket of every usage chart and `scribe stats` (its day is the first ten characters; a
-- usage block starts on an hour). A time outside years 0000-9999 (a damaged or
-- hand-edited row) counts in the first or last hour of those years (strftime() gives NULL
-- for it, which would fail the whole query).
strftime('%Y-%m-%dT%H', min(max(ms, -62167219200000), 253402300799999) / 1000, 'unixepoch')

-- fragment: clamped_count_sum(x)
-- The sum of the counts x (tokens, calls) over a group, as every reported count sum:
-- total() never overflows (it sums in REAL, 0.0 for no rows) and the CAST clamps it into
-- INTEGER.
CAST(total(x) AS INTEGER)
