-- SQLite spellings of the server queries that PostgreSQL writes differently
-- (sql/queries/postgres/server.sql has its own).

-- name: ListCutPartNodes :many
-- Not what the server runs on SQLite (it streams a big part from its row and cuts it in
-- Rust, crates/server's cut.rs: json_tree holds the whole string several times); kept
-- because every PostgreSQL query needs a SQLite spelling (sqlgen's parity check), and as
-- the reference the cutter's tests compare with.
-- The given parts' JSON as nodes, each string cut: what a message page sends of a part too
-- big to read whole (ListPagePartData). One row per node, in document order per part:
-- `node` and `parent` identify nodes within a part (the root has no parent), `key` is an
-- object member's name (NULL in arrays), `kind` is object, array, string or scalar. `head`
-- is a scalar's JSON text, or a string's first bytes: at most @cap, and once the strings
-- before it in the part took @budget bytes together (each its first @cap at most), at
-- most @floor; `cut` says whether the string was longer than its head. A cut may end
-- inside a character: the reader drops the broken end. Reals print with 17 digits, which
-- read back as the same double. Each string is read once (`atom`), to its first @cap + 1
-- bytes, which tell whether it is longer than what is sent; only heads leave the database.
WITH limits AS (
    SELECT CAST(@cap AS INTEGER) AS cap_bytes, CAST(@floor AS INTEGER) AS floor_bytes,
           CAST(@budget AS INTEGER) AS budget_bytes
), picked AS (
    SELECT id, data FROM parts WHERE id IN (sqlc.slice(part_ids))
), node AS (
    SELECT p.id AS part_id, t.id AS seq, t.parent AS parent, CAST(t.key AS TEXT) AS key,
           CASE t.type WHEN 'object' THEN 'object' WHEN 'array' THEN 'array'
                WHEN 'text' THEN 'string' ELSE 'scalar' END AS kind,
           CASE t.type
                WHEN 'text' THEN substr(CAST(t.atom AS BLOB), 1, l.cap_bytes + 1)
                WHEN 'integer' THEN CAST(CAST(t.atom AS TEXT) AS BLOB)
                WHEN 'real' THEN CAST(printf('%!.17g', t.atom) AS BLOB)
                WHEN 'true' THEN CAST('true' AS BLOB)
                WHEN 'false' THEN CAST('false' AS BLOB)
                WHEN 'null' THEN CAST('null' AS BLOB)
           END AS head
    FROM limits AS l, picked AS p, json_tree(p.data) AS t
    LIMIT -1 OFFSET 0
), sized AS (
    SELECT part_id, seq, parent, key, kind, head,
           CASE WHEN kind = 'string' THEN max(l.floor_bytes, min(l.cap_bytes,
               l.budget_bytes - coalesce(sum(CASE WHEN kind = 'string'
                   THEN min(length(head), l.cap_bytes) END) OVER (
                   PARTITION BY part_id ORDER BY seq
                   ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING), 0)))
           END AS allowed
    FROM node, limits AS l
)
SELECT part_id AS "part_id!: String",
       CAST(seq AS TEXT) AS "node!: String",
       CAST(parent AS TEXT) AS "parent?: String",
       key AS "key?: String",
       kind AS "kind!: String",
       CAST(CASE WHEN allowed IS NULL THEN head ELSE substr(head, 1, allowed) END AS BLOB)
           AS "head?",
       coalesce(length(head) > allowed, 0) AS "cut!: bool"
FROM sized
ORDER BY part_id, seq;
