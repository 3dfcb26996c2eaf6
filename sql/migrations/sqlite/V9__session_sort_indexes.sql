-- Scribe schema, version 9: indexes for the cost and token orders of a session list
-- (`scribe list --sort`, the web viewer's list). Without them a page sorted by cost or by
-- tokens reads and sorts every session; with them it walks one page of the index, as the
-- newest-first order already does. The tokens index is on the very expression the list
-- orders by (crates/db/src/filters.rs, `SessionOrder::TokensDesc`), so the planner uses it.

CREATE INDEX sessions_cost ON sessions (estimated_cost_usd, id);

CREATE INDEX sessions_tokens ON sessions (
    (input_tokens + output_tokens + cache_read_tokens + cache_write_tokens + reasoning_tokens),
    id
);
