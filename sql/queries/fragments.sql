-- Fragments: the rules every query spells the same way, each written once here and used as
-- `sqlgen.name(…)` (README, "Adding a query"). sqlgen puts the body in place of the call,
-- each parameter replaced by its argument, before it reads the query, so the generated SQL
-- is what the query would be with the rule written out. A dialect may replace one
-- (sql/queries/{sqlite,postgres}/fragments.sql), as it replaces a query.

-- fragment: saturating_add(x, d)
-- Saturating counts (ARCHITECTURE.md): `x + d`, at most the largest BIGINT. SQLite would
-- store the overflow as a REAL that no reader can take, PostgreSQL refuse the write. The
-- first arm keeps `MAX - d` from being computed for a negative d (PostgreSQL folds a bound
-- parameter into the plan). Every stored token or call count adds with it
-- (tests/tests/saturating_counts.rs checks).
CASE WHEN d <= 0 THEN x + d
        WHEN x > 9223372036854775807 - d THEN 9223372036854775807
        ELSE x + d END

-- fragment: clamped_cost_add(x, d)
-- Clamped cost sums (ARCHITECTURE.md): `x + d`, at most the largest finite amount
-- (f64::MAX). SQLite would store inf, PostgreSQL refuse the write. The halves never
-- overflow and are exact, so comparing them with MAX / 2 is the overflow test itself.
CASE WHEN x / 2 + d / 2 > CAST(8.988465674311579e307 AS DOUBLE PRECISION)
        THEN CAST(1.7976931348623157e308 AS DOUBLE PRECISION)
        ELSE x + d END

-- fragment: moved_forward(old_time, clock)
-- The updated_at every UPDATE of a row writes: the clock, or one past the stored time when
-- the clock has not passed it (two changes in one millisecond, another process's clock
-- ahead). updated_at then always moves, and only forward: a process whose clock is behind
-- never moves it back, and the row returned and announced is exactly the row stored (no
-- trigger restamps it: since V23 every time comes from the statements). A column the clock sets as
-- the time of an event (ended_at, archived_at, compacting_at, finished_at) takes the clock
-- as it is. (MessageService::update_part computes the same in Rust for its event, which
-- has no RETURNING to read it from.) At the largest BIGINT it stays there, as the
-- saturating counts do: SQLite would store one past it as a REAL no reader can take (an
-- imported time can be that large), PostgreSQL refuse the write.
CASE WHEN old_time >= clock AND old_time < 9223372036854775807 THEN old_time + 1
        WHEN old_time >= clock THEN old_time
        ELSE clock END

-- fragment: carries_usage(m)
-- Whether the row m (an alias of messages) carries usage: a token count or a cost. The
-- messages `scribe stats` splits a session's usage by (session_admin.sql,
-- MessageUsageSince).
(m.input_tokens <> 0 OR m.output_tokens <> 0 OR m.cache_read_tokens <> 0
 OR m.cache_write_tokens <> 0 OR m.reasoning_tokens <> 0 OR m.cost_usd <> 0)
