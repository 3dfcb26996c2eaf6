-- Scribe schema, version 31: the title lineage found by an index seek.
--
-- A session whose title another holds is imported as `t #N+1`, N the highest number of
-- the lineage `t` (`t` itself counting 1). Finding N scanned every title of the lineage,
-- so importing n sessions of one title took time in the square of n (8,000 sessions
-- titled `t`: 8.4 s, against 0.2 s for 8,000 titles). This index keeps each title's
-- lineage base and number: `t #12` is (`t`, 12); a title that ends in no ` #N` (N digits
-- without a leading zero) has neither. MaxTitleLineageNumber (sql/queries/sqlite/
-- sessions.sql) repeats both expressions to the letter, which SQLite needs to use the
-- index; crates/db/tests/queries.rs holds the two together through the query's plan.
CREATE INDEX sessions_title_lineage ON sessions (
    CASE WHEN substr(rtrim(title, '0123456789'), -2) = ' #'
              AND substr(title, length(rtrim(title, '0123456789')) + 1, 1) BETWEEN '1' AND '9'
         THEN substr(title, 1, length(rtrim(title, '0123456789')) - 2) END,
    CASE WHEN substr(rtrim(title, '0123456789'), -2) = ' #'
              AND substr(title, length(rtrim(title, '0123456789')) + 1, 1) BETWEEN '1' AND '9'
         THEN CAST(substr(title, length(rtrim(title, '0123456789')) + 1) AS INTEGER) END
);
