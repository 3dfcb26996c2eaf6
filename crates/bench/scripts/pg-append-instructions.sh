#!/usr/bin/env bash
# Server instructions per PostgreSQL append, counted by callgrind rather than timed: on a
# shared VM the bench's timings move by 20-30% with load, instruction counts do not.
#
#   bash crates/bench/scripts/pg-append-instructions.sh ['label=SQL' ...]
#
# Makes its own throw-away cluster (a temp dir, a Unix socket, no TCP), applies
# sql/migrations/postgres in version order with psql, adds 16 sessions and 2,000 warm-up
# appends, then copies that database once per variant ("base" as it is, then each
# 'label=SQL' argument's SQL run on its own copy, e.g.
#   'nohash=DROP INDEX parts_fts_seq_hash'). For each copy the server runs under
# `valgrind --tool=callgrind`, and pgbench -M prepared sends an append's statements as
# Scribe sends them (BEGIN ISOLATION LEVEL SERIALIZABLE; CreateMessage; CreateParts;
# SELECT 1; COMMIT), alternating two of the bench's drafts (pg-append/: text + finish;
# text + tool + step_finish), 20 then 120 appends, each run with its own --random-seed
# (so every copy inserts the same rows); the backend's instructions between the two runs,
# per append, are printed. ~1 minute per variant; needs valgrind, pgbench and PostgreSQL
# with contrib. KEEP=1 keeps the callgrind files (their directory is printed).
set -euo pipefail
cd "$(dirname "$0")/../../.."
PGBIN=$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -1)
command -v valgrind >/dev/null || { echo "needs valgrind" >&2; exit 1; }

as_server() {
    if [ "$(id -u)" -eq 0 ]; then runuser -u postgres -- "$@"; else "$@"; fi
}
DIR=$(mktemp -d /tmp/scribe-pgi.XXXXXX)
chmod 0755 "$DIR"
mkdir "$DIR/cg"
[ "$(id -u)" -eq 0 ] && chown -R postgres: "$DIR"
SUPERUSER=$([ "$(id -u)" -eq 0 ] && echo postgres || id -un)
PORT=$(( (RANDOM % 20000) + 30000 ))
OPTS=(-k "$DIR" -p "$PORT" -c listen_addresses= -c fsync=off -c synchronous_commit=off
      -c full_page_writes=off -c autovacuum=off)
export PGHOST=$DIR PGPORT=$PORT PGUSER=$SUPERUSER
server_pid=""
stop() {
    as_server "$PGBIN/pg_ctl" -D "$DIR/data" -m fast stop >/dev/null 2>&1 || true
    [ -n "$server_pid" ] && wait "$server_pid" 2>/dev/null || true
    server_pid=""
}
cleanup() {
    stop
    if [ "${KEEP:-}" = 1 ]; then echo "callgrind files: $DIR/cg" >&2; else rm -rf "$DIR"; fi
}
trap cleanup EXIT

as_server "$PGBIN/initdb" -D "$DIR/data" -U "$SUPERUSER" --auth=trust --no-sync -E UTF8 \
    --locale=C.UTF-8 >"$DIR/initdb.log" 2>&1
as_server "$PGBIN/pg_ctl" -D "$DIR/data" -l "$DIR/server.log" -w -o "${OPTS[*]}" start >/dev/null

# The pgbench scripts: the generated statements, a draft's parts inlined (part ids made
# unique per append), each writer client on its own session.
for draft in text-finish text-tool-step; do
    parts=$(sed "s/'/''/g" "crates/bench/scripts/pg-append/$draft.json" | tr -d '\n')
    cat >"$DIR/$draft.sql" <<EOF
\\set r random(1, 900000000000000)
\\set s :client_id + 1
BEGIN ISOLATION LEVEL SERIALIZABLE;
INSERT INTO messages (id, session_id, parent_id, role, agent, provider, model, finish_reason, is_summary, input_tokens, output_tokens, cache_read_tokens, cache_write_tokens, reasoning_tokens, cost_usd, error, created_at, updated_at, finished_at) VALUES ('msg_' || :r, 'ses_' || :s, NULL, 'assistant', NULL, NULL, NULL, NULL, false, 0, 0, 0, 0, 0, 0.0, NULL, 1700000000000, 1700000000000, NULL);
INSERT INTO parts (id, message_id, session_id, position, type, data, created_at, updated_at) SELECT p.v ->> 'id', 'msg_' || :r, 'ses_' || :s, CAST(p.v ->> 'position' AS BIGINT), p.v ->> 'type', p.v ->> 'data', CAST(p.v ->> 'created_at' AS BIGINT), CAST(p.v ->> 'updated_at' AS BIGINT) FROM (SELECT CAST(key AS BIGINT) AS n, CAST(value AS jsonb) AS v FROM json_each(CAST(CAST(replace('$parts', 'PID', 'prt_' || :r || '_') AS TEXT) AS json)) OFFSET 0) AS p ORDER BY p.n;
SELECT 1;
COMMIT;
EOF
done
bench() { # db clients appends seed
    "$PGBIN/pgbench" -n -M prepared --random-seed="$4" -d "$1" -c "$2" -t "$3" \
        -f "$DIR/text-finish.sql" -f "$DIR/text-tool-step.sql" >"$DIR/pgbench.log" 2>&1
    if ! grep -q "number of failed transactions: 0 " "$DIR/pgbench.log" \
        || grep -q "aborted" "$DIR/pgbench.log"; then
        cat "$DIR/pgbench.log" >&2
        exit 1
    fi
}

"$PGBIN/createdb" base
for migration in $(ls sql/migrations/postgres | sort -V); do
    "$PGBIN/psql" -X -q -v ON_ERROR_STOP=1 -d base -f "sql/migrations/postgres/$migration" >/dev/null
done
"$PGBIN/psql" -X -q -d base -c "INSERT INTO sessions (id, created_at, updated_at)
    SELECT 'ses_' || g, 1, 1 FROM generate_series(1, 16) AS g"
bench base 1 2000 1
"$PGBIN/psql" -X -q -d base -c "VACUUM ANALYZE"
# Every label measures its own copy of the warmed-up database, "base" included.
"$PGBIN/createdb" -T base v_base
labels=(base)
for variant in "$@"; do
    label=${variant%%=*}
    "$PGBIN/createdb" -T base "v_$label"
    "$PGBIN/psql" -X -q -v ON_ERROR_STOP=1 -d "v_$label" -c "${variant#*=}"
    labels+=("$label")
done
stop

instructions() { # the largest callgrind file written since $1 (the backend's)
    local best=0 f t
    for f in $(comm -13 <(echo "$1") <(ls "$DIR/cg" | sort)); do
        t=$(grep -m1 '^summary:\|^totals:' "$DIR/cg/$f" | awk '{print $2}')
        [ "${t:-0}" -gt "$best" ] && best=$t
    done
    echo "$best"
}
for label in "${labels[@]}"; do
    as_server valgrind --tool=callgrind --callgrind-out-file="$DIR/cg/cg.%p" \
        "$PGBIN/postgres" -D "$DIR/data" "${OPTS[@]}" >"$DIR/valgrind.log" 2>&1 &
    server_pid=$!
    for _ in $(seq 120); do "$PGBIN/pg_isready" -q && break; sleep 1; done
    counts=()
    for n in 20 120; do
        before=$(ls "$DIR/cg" | sort)
        bench "v_$label" 1 "$n" "$n"
        sleep 2
        counts+=("$(instructions "$before")")
    done
    stop
    awk -v l="$label" -v a="${counts[0]}" -v b="${counts[1]}" \
        'BEGIN { printf "%-12s %6.3fM instructions per append\n", l, (b - a) / 100 / 1e6 }'
done
