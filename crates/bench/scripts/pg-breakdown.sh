#!/usr/bin/env bash
# Where Scribe's PostgreSQL append spends above PostgreSQL's limit: the report's saturated
# PostgreSQL writer rows (Scribe's and the limit's, with the server's CPU per append) on a
# throw-away server, then again after dropping one more of Scribe's per-append pieces of
# work (cumulative): the trigram index, the word document (the parts_fts trigger), the
# change outbox and session bump (the notify triggers). Destructive: run it only on a
# throw-away cluster, e.g.
#
#   bash .ci/with-postgres bash crates/bench/scripts/pg-breakdown.sh
#
# SPLIT=word splits the word document instead: its computation (scribe_search_words), the
# spaceless test, then the rest (the trigger and the parts_fts row). ROUNDS=n repeats.
# Needs SCRIBE_TEST_POSTGRES (set by .ci/with-postgres) and a release build of scribe-bench.
set -euo pipefail
: "${SCRIBE_TEST_POSTGRES:?run under .ci/with-postgres}"
BENCH=${BENCH:-target/release/scribe-bench}
PSQL=$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -1)/psql
ROUNDS=${ROUNDS:-1}
sql() { "$PSQL" -X -q -v ON_ERROR_STOP=1 "$SCRIBE_TEST_POSTGRES" -c "$1"; }
rows() {
    echo "== $1 (load $(cut -d' ' -f1-3 /proc/loadavg))"
    SCRIBE_BENCH_PG_PARTS=${PARTS:-scribe-pg,limit} "$BENCH" --db "$SCRIBE_TEST_POSTGRES" 2>/dev/null \
        | grep -E '^(PostgreSQL|PG limit|PG lim) +saturated|limit 16|Scribe 16'
}
if [ "${SPLIT:-}" = word ]; then
    # The word document split: its computation, then its row, one at a time.
    for round in $(seq "$ROUNDS"); do
        echo "### round $round (word document split)"
        sql "DROP SCHEMA public CASCADE; CREATE SCHEMA public;"
        rows "Scribe as it is (V19)"
        sql "CREATE OR REPLACE FUNCTION scribe_search_words(text TEXT) RETURNS tsvector LANGUAGE sql IMMUTABLE AS \$\$ SELECT ''::tsvector \$\$;"
        rows "- the words' computation (scribe_search_words returns an empty tsvector)"
        sql "CREATE OR REPLACE FUNCTION scribe_spaceless(text TEXT) RETURNS BOOLEAN LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE AS \$\$ SELECT false \$\$;"
        rows "- the spaceless test (scribe_spaceless returns false)"
        sql "DROP TRIGGER parts_fts_insert ON parts;"
        rows "- the rest of the word document (the trigger, the parts_fts row and its indexes)"
    done
    exit 0
fi
for round in $(seq "$ROUNDS"); do
    echo "### round $round"
    # A fresh schema each round: the report migrates it on open.
    sql "DROP SCHEMA public CASCADE; CREATE SCHEMA public;"
    rows "Scribe as it is (V19)"
    sql "DROP INDEX parts_fts_trigram;"
    rows "- the trigram index (parts_fts_trigram)"
    sql "DROP TRIGGER parts_fts_insert ON parts;"
    rows "- the word document (parts_fts_insert: scribe_parts_fts(), parts_fts row and its GIN)"
    sql "DROP TRIGGER messages_notify ON messages; DROP TRIGGER parts_notify ON parts; DROP TRIGGER sessions_notify ON sessions;"
    rows "- the change outbox and session bump (the notify triggers)"
    sql "DROP TRIGGER parts_tool_count_insert ON parts;"
    rows "- the tool counter trigger"
done
