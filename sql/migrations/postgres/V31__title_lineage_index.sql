-- Scribe schema for PostgreSQL, version 31: the title lineage found by an index seek.
--
-- As SQLite's version 31 (sql/migrations/sqlite/V31__title_lineage_index.sql): each
-- title's lineage base and number (`t #12` is (`t`, 12)), so the highest number of a
-- lineage is one seek instead of a scan of every title of it. The number is NUMERIC, as
-- MaxTitleLineageNumber (sql/queries/postgres/sessions.sql) compares it, so a suffix too
-- long for BIGINT is ordered, not an error. `right`, not a negative `substr` start, which
-- PostgreSQL counts differently. The query repeats both expressions to the letter, which
-- the planner needs to use the index; crates/db/tests/postgres.rs holds them together
-- through the query's plan.
CREATE INDEX sessions_title_lineage ON sessions (
    (CASE WHEN right(rtrim(title, '0123456789'), 2) = ' #'
               AND substr(title, length(rtrim(title, '0123456789')) + 1, 1) BETWEEN '1' AND '9'
          THEN substr(title, 1, length(rtrim(title, '0123456789')) - 2) END),
    (CASE WHEN right(rtrim(title, '0123456789'), 2) = ' #'
               AND substr(title, length(rtrim(title, '0123456789')) + 1, 1) BETWEEN '1' AND '9'
          THEN CAST(substr(title, length(rtrim(title, '0123456789')) + 1) AS NUMERIC) END)
);
