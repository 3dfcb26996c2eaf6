-- Scribe schema, version 2: which child sessions have had their usage rolled into their parent.
--
-- Rolling a child's totals into its parent must happen at most once, or the parent's cost
-- would grow every time it is repeated. A row here is that "already rolled up" mark; it is
-- inserted in the same transaction as the roll-up itself, so the two can never disagree.
-- A separate table rather than a column keeps the sessions row shape of version 1.

CREATE TABLE session_rollups (
    child_id            TEXT PRIMARY KEY NOT NULL REFERENCES sessions (id) ON DELETE CASCADE,
    -- The parent the totals went to, as it was then (not a foreign key: the parent may be
    -- deleted later and the mark must still stop a second roll-up into a new parent).
    parent_id           TEXT NOT NULL,
    rolled_up_at        INTEGER NOT NULL
);
