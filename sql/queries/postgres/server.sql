-- PostgreSQL spellings of the server queries that SQLite writes differently
-- (sql/queries/sqlite/server.sql).

-- name: ListCutPartNodes :many
-- The given parts' JSON as nodes, each string cut (sql/queries/sqlite/server.sql says
-- what each column holds). The document is walked as `json`, not `jsonb`, so the nodes come
-- in the stored order, as on SQLite (jsonb would reorder an object's members, and so which
-- strings the budget reaches first); `node` is the path of member and element ordinals
-- (ten digits each, joined), which orders them depth first. Read from the document without its NUL escapes
-- (`scribe_json_without_nul`, V24: `#>>` refuses `\u0000`), so a NUL in a cut string is a
-- space here. A number's head is its stored text. Each string is read to its first
-- @cap + 1 characters (`left`, no copy of the rest), then to as many bytes.
WITH RECURSIVE limits AS (
    SELECT CAST(@cap AS BIGINT) AS cap_bytes, CAST(@floor AS BIGINT) AS floor_bytes,
           CAST(@budget AS BIGINT) AS budget_bytes
), node (part_id, path, parent, key, value) AS (
    SELECT p.id, CAST('' AS TEXT), CAST(NULL AS TEXT), CAST(NULL AS TEXT),
           CAST(scribe_json_without_nul(p.data) AS json)
    FROM parts AS p
    WHERE p.id IN (sqlc.slice(part_ids))
  UNION ALL
    SELECT n.part_id, n.path || lpad(CAST(c.ord AS TEXT), 10, '0'), n.path, c.key, c.value
    FROM node AS n
    CROSS JOIN LATERAL (
        SELECT e.key AS key, e.value AS value, e.ord AS ord
        FROM json_each(CASE WHEN json_typeof(n.value) = 'object' THEN n.value
                            ELSE CAST('{}' AS json) END) WITH ORDINALITY AS e (key, value, ord)
        UNION ALL
        SELECT CAST(NULL AS TEXT), n.value -> CAST(g.i AS INTEGER), g.i + 1
        FROM (
            SELECT CAST(generate_series(0, json_array_length(n.value) - 1) AS BIGINT) AS i
            WHERE json_typeof(n.value) = 'array'
        ) AS g
    ) AS c
), leaf AS (
    SELECT part_id, path, parent, key,
           CASE json_typeof(value) WHEN 'object' THEN 'object' WHEN 'array' THEN 'array'
                WHEN 'string' THEN 'string' ELSE 'scalar' END AS kind,
           CASE WHEN json_typeof(value) = 'string'
                THEN substring(convert_to(left(value #>> '{}', CAST(l.cap_bytes AS INTEGER) + 1), 'UTF8')
                               FROM 1 FOR CAST(l.cap_bytes AS INTEGER) + 1)
                WHEN json_typeof(value) IN ('number', 'boolean', 'null')
                THEN convert_to(CAST(value AS TEXT), 'UTF8')
           END AS head
    FROM node CROSS JOIN limits AS l
), sized AS (
    SELECT part_id, path, parent, key, kind, head,
           CASE WHEN kind = 'string' THEN greatest(l.floor_bytes, least(l.cap_bytes,
               l.budget_bytes - coalesce(sum(CASE WHEN kind = 'string'
                   THEN least(octet_length(head), l.cap_bytes) END) OVER (
                   PARTITION BY part_id ORDER BY path
                   ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING), 0)))
           END AS allowed
    FROM leaf CROSS JOIN limits AS l
)
SELECT part_id AS "part_id!: String",
       path AS "node!: String",
       parent AS "parent?: String",
       key AS "key?: String",
       kind AS "kind!: String",
       CAST(CASE WHEN allowed IS NULL THEN head
                 ELSE substring(head FROM 1 FOR CAST(allowed AS INTEGER)) END AS BYTEA) AS "head?",
       coalesce(octet_length(head) > allowed, FALSE) AS "cut!: bool"
FROM sized
ORDER BY part_id, path;
