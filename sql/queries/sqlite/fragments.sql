-- SQLite spellings of the fragments each dialect writes its own way
-- (sql/queries/postgres/fragments.sql has PostgreSQL's; the shared ones are in
-- sql/queries/fragments.sql).

-- fragment: clamped_cost_sum(x)
-- The sum of the costs x over a group, at most the largest finite amount (f64::MAX), as
-- every stored cost sum (ARCHITECTURE.md, "Clamped cost sums"): total() gives inf past it
-- (and 0.0 for no rows).
CAST(min(total(x), 1.7976931348623157e308) AS DOUBLE PRECISION)
