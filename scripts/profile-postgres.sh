#!/usr/bin/env bash
# BENCHMARKS §3, issue 47 item 1: where PostgreSQL's CPU per turn goes. Starts the
# throw-away cluster of scripts/postgres.sh with pg_stat_statements loaded, runs
# `buddy bench load` (CHATS chats, two instances) once, and prints per turn:
#   - each statement's calls, execution and planning time, rows and WAL records/bytes
#     (pg_stat_statements; planning tracked too);
#   - the cluster's WAL totals (pg_stat_wal) and its commits (pg_stat_database);
#   - with PERF=1, a `perf record` of the PostgreSQL processes over the run, its samples
#     split by what the backend was doing (parse/bind, planning, execution, commit and
#     WAL, the protocol and the kernel's socket work, NOTIFY), from the functions on
#     each sample's stack (`perf record -g`, frame pointers as the Debian build has them).
#
#   scripts/profile-postgres.sh CHATS BUDDY
set -euo pipefail
chats=${1:?chats}
buddy=${2:?buddy binary}
here=$(cd "$(dirname "$0")" && pwd)
eval "$("$here/postgres.sh")"
cleanup() { "$here/postgres.sh" stop "$BUDDY_TEST_POSTGRES_DIR"; }
trap cleanup EXIT
as=(); [ "$(id -u)" = 0 ] && as=(runuser -u postgres --)
bin=$(cat "$BUDDY_TEST_POSTGRES_DIR/bin")
psql=("${as[@]}" "$bin/psql" -q -X -At "$BUDDY_TEST_POSTGRES_URL")
"${psql[@]}" -c "ALTER SYSTEM SET shared_preload_libraries = 'pg_stat_statements'"
"${as[@]}" "$bin/pg_ctl" -D "$BUDDY_TEST_POSTGRES_DIR/data" -w -t 60 restart >/dev/null
# The extension's own settings exist once it is loaded.
"${psql[@]}" -c "ALTER SYSTEM SET pg_stat_statements.track_planning = on" -c "SELECT pg_reload_conf()" \
  -c "CREATE EXTENSION IF NOT EXISTS pg_stat_statements" >/dev/null
echo "cluster: fsync=$("${psql[@]}" -c "SHOW fsync") synchronous_commit=$("${psql[@]}" -c "SHOW synchronous_commit")"
# A first run creates the schema and warms the instances' statement caches.
"$buddy" bench load -n 10 --latency-ms 200 --instances 2 --store "$BUDDY_TEST_POSTGRES_URL" \
  --json >/dev/null
"${psql[@]}" -c "SELECT pg_stat_statements_reset()" -c "SELECT pg_stat_reset_shared('wal')" \
  -c "SELECT pg_stat_reset()" >/dev/null
perf_pid=""
if [ "${PERF:-0}" = 1 ]; then
  perf record -q -a -g -F 2999 -o "$BUDDY_TEST_POSTGRES_DIR/perf.data" >/dev/null 2>&1 &
  perf_pid=$!
  sleep 1
fi
out=$("$buddy" bench load -n "$chats" --latency-ms 200 --instances 2 \
  --store "$BUDDY_TEST_POSTGRES_URL" --json)
[ -n "$perf_pid" ] && { kill -INT "$perf_pid"; wait "$perf_pid" || true; }
turns=$(echo "$out" | jq -r '.completed')
echo "buddy=$buddy chats=$chats completed=$turns turns_per_sec=$(echo "$out" | jq -r '.turns_per_sec | floor')"
echo
echo "per turn, by statement (pg_stat_statements; µs are per call):"
"${psql[@]}" -F $'\t' -c "
  SELECT round(calls::numeric / $turns, 2) AS calls_per_turn,
         round((total_exec_time * 1000 / calls)::numeric, 1) AS exec_us,
         round((total_plan_time * 1000 / calls)::numeric, 1) AS plan_us,
         round((total_exec_time + total_plan_time)::numeric * 1000 / $turns, 1) AS us_per_turn,
         round(rows::numeric / calls, 1) AS rows,
         round(wal_records::numeric / calls, 1) AS wal_records,
         round(wal_bytes::numeric / calls) AS wal_bytes,
         regexp_replace(left(query, 70), '\s+', ' ', 'g') AS statement
  FROM pg_stat_statements WHERE calls >= $turns / 20
  ORDER BY total_exec_time + total_plan_time DESC LIMIT 12" \
  | column -t -s $'\t' -N calls/turn,exec_us,plan_us,us/turn,rows,wal_rec,wal_bytes,statement
echo
"${psql[@]}" -c "
  SELECT 'wal per turn: records=' || round(wal_records::numeric / $turns, 1)
      || ' bytes=' || round(wal_bytes::numeric / $turns)
      || ' full_page_images=' || round(wal_fpi::numeric / $turns, 2)
      || ' wal_writes=' || round(wal_write::numeric / $turns, 2)
      || ' wal_syncs=' || round(wal_sync::numeric / $turns, 2) FROM pg_stat_wal"
"${psql[@]}" -c "
  SELECT 'commits per turn: ' || round(sum(xact_commit)::numeric / $turns, 2)
      || ', rollbacks per turn: ' || round(sum(xact_rollback)::numeric / $turns, 2)
  FROM pg_stat_database"
if [ -n "$perf_pid" ]; then
  echo
  echo "PostgreSQL's CPU samples over the run, by what the backend was doing (perf):"
  perf script -i "$BUDDY_TEST_POSTGRES_DIR/perf.data" --comm postgres -F ip,sym 2>/dev/null \
    | python3 "$here/pg_perf_split.py"
fi
