#!/usr/bin/env bash
# One run of the PostgreSQL writer rows (SCRIBE_BENCH_PG_PARTS, `writers` unless set) of
# the scribe-bench binary BENCH on a throw-away cluster of its own, with the evidence for
# what its paced latency tails are made of kept in OUT (a directory):
#
#   report.txt   the report, stderr progress lines stamped with the wall clock
#   server.log   the server's log: checkpoints, every autovacuum/autoanalyze, and every
#                statement that took more than SLOW_MS (default 5 ms), stamped to the ms
#   cpu.txt      once a second: the wall clock, /proc/stat's cpu line, /proc/loadavg
#                (the machine's busy time, whoever spent it: other work on the VM shows)
#   waits.txt    when WAITS=1: pg_stat_activity's non-idle backends (wait event, state,
#                application) sampled every 20 ms (costs the server a little CPU)
#
#   flock /work/wt/bench.lock bash .ci/with-postgres bash crates/bench/scripts/pg-paced-run.sh
#
# (run under .ci/with-postgres: it reads SCRIBE_TEST_POSTGRES and finds the cluster's
# directory, and so the log, from its socket directory). The settings are logging only;
# they change nothing an append does.
set -euo pipefail
: "${SCRIBE_TEST_POSTGRES:?run under .ci/with-postgres}"
BENCH=${BENCH:-target/release/scribe-bench}
OUT=${OUT:?set OUT to a directory for the evidence}
SLOW_MS=${SLOW_MS:-5}
PGBIN=$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -1)
PSQL="$PGBIN/psql"
mkdir -p "$OUT"
DIR=$(sed -E 's/.*host=([^ ]+).*/\1/' <<<"$SCRIBE_TEST_POSTGRES")
sql() { "$PSQL" -X -q -v ON_ERROR_STOP=1 "$SCRIBE_TEST_POSTGRES" -c "$1"; }
sql "ALTER SYSTEM SET log_checkpoints = on"
sql "ALTER SYSTEM SET log_autovacuum_min_duration = 0"
sql "ALTER SYSTEM SET log_min_duration_statement = '${SLOW_MS}ms'"
sql "ALTER SYSTEM SET log_line_prefix = '%m [%p] %a '"
sql "SELECT pg_reload_conf()" >/dev/null

pids=()
(
    while :; do
        echo "$(date +%T.%N | cut -c1-12) $(head -1 /proc/stat) | $(cat /proc/loadavg)"
        sleep 1
    done
) >"$OUT/cpu.txt" &
pids+=($!)
if [ "${WAITS:-0}" = 1 ]; then
    (
        "$PSQL" -X -q -A -F ' ' -t "$SCRIBE_TEST_POSTGRES" <<'EOF'
SELECT clock_timestamp()::time, coalesce(wait_event_type, '-'), coalesce(wait_event, '-'),
       state, coalesce(nullif(application_name, ''), backend_type)
  FROM pg_stat_activity
 WHERE pid <> pg_backend_pid() AND (state IS DISTINCT FROM 'idle') \watch 0.02
EOF
    ) >"$OUT/waits.txt" 2>/dev/null &
    pids+=($!)
fi
stop() { kill "${pids[@]}" 2>/dev/null || true; }
trap stop EXIT

echo "load at start: $(cat /proc/loadavg)" >"$OUT/report.txt"
SCRIBE_BENCH_PG_PARTS=${PARTS:-writers} "$BENCH" --db "$SCRIBE_TEST_POSTGRES" 2> >(
    while IFS= read -r line; do echo "$(date +%T.%N | cut -c1-12) $line"; done >>"$OUT/report.txt"
) >>"$OUT/report.txt.out"
stop
sleep 0.2
cat "$OUT/report.txt.out" >>"$OUT/report.txt"
rm -f "$OUT/report.txt.out"
echo "load at end: $(cat /proc/loadavg)" >>"$OUT/report.txt"
cp "$DIR/server.log" "$OUT/server.log"
