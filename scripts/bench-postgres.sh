#!/usr/bin/env bash
# BENCHMARKS §3, issue 30: one `buddy serve` on SQLite against two sharing one PostgreSQL,
# runs alternating, on the throw-away cluster of scripts/postgres.sh; then the statements
# PostgreSQL ran per turn (log_statement = all over 100 chats on two instances).
#
#   scripts/bench-postgres.sh ROUNDS CHATS BUDDY [BUDDY...]
#
# Several binaries (a build from before a change beside one from after) take turns in
# each round. Prints one line per run and per binary, ready for docs/bench/: turns per
# second and the machine's busy CPU per turn (from /proc/stat, everything on it included).
set -euo pipefail
rounds=${1:?rounds}
chats=${2:?chats}
shift 2
[ $# -ge 1 ] || { echo "usage: $0 ROUNDS CHATS BUDDY [BUDDY...]" >&2; exit 2; }
here=$(cd "$(dirname "$0")" && pwd)
eval "$("$here/postgres.sh")"
trap '"$here/postgres.sh" stop "$BUDDY_TEST_POSTGRES_DIR"' EXIT
as=(); [ "$(id -u)" = 0 ] && as=(runuser -u postgres --)
psql=("${as[@]}" "$(cat "$BUDDY_TEST_POSTGRES_DIR/bin")/psql" -q -X -At "$BUDDY_TEST_POSTGRES_URL")
# Busy CPU of the whole machine (user, nice, system, irq, softirq), in clock ticks.
busy_ticks() {
  awk '/^cpu /{print $2 + $3 + $4 + $7 + $8}' /proc/stat
}
# One run: "TURNS_PER_SEC CPU_MS_PER_TURN", the CPU being everything the machine did
# (servers, PostgreSQL, the mock, the load generator) over the run, per completed turn.
run() {
  local before after out
  before=$(busy_ticks)
  out=$("$@" --json)
  after=$(busy_ticks)
  echo "$out" | jq -r --argjson ticks "$((after - before))" --argjson hz "$(getconf CLK_TCK)" \
    '"\(.turns_per_sec | floor) \($ticks / $hz * 1000 / .completed * 100 | round / 100)"'
}
for round in $(seq "$rounds"); do
  for buddy in "$@"; do
    read -r sqlite sqlite_cpu < <(run "$buddy" bench load -n "$chats" --latency-ms 200)
    read -r pg pg_cpu < <(run "$buddy" bench load -n "$chats" --latency-ms 200 --instances 2 \
      --store "$BUDDY_TEST_POSTGRES_URL")
    ratio=$(python3 -c "print(f'{$pg / $sqlite:.2f}')")
    echo "round=$round buddy=$buddy chats=$chats sqlite=$sqlite pg2=$pg ratio=$ratio" \
      "cpu_ms_per_turn: sqlite=$sqlite_cpu pg2=$pg_cpu"
  done
done
log="$BUDDY_TEST_POSTGRES_DIR/data/server.log"
for buddy in "$@"; do
  "${psql[@]}" -c "ALTER SYSTEM SET log_statement = 'all'" -c "SELECT pg_reload_conf()" >/dev/null
  sleep 1
  before=$(wc -l <"$log")
  "$buddy" bench load -n 100 --latency-ms 200 --instances 2 --store "$BUDDY_TEST_POSTGRES_URL" \
    --json >/dev/null
  "${psql[@]}" -c "ALTER SYSTEM RESET log_statement" -c "SELECT pg_reload_conf()" >/dev/null
  sleep 1
  # One line per statement: simple queries log `statement:`, prepared ones `execute`.
  tail -n +"$((before + 1))" "$log" | grep -E 'LOG:  (statement|execute [^:]*):' \
    | grep -v -E 'ALTER SYSTEM|pg_reload_conf' >"$BUDDY_TEST_POSTGRES_DIR/statements" || true
  total=$(wc -l <"$BUDDY_TEST_POSTGRES_DIR/statements")
  echo "buddy=$buddy statements=$total per_turn=$(python3 -c "print(f'{$total / 100:.1f}')")"
  sed -E 's/.*LOG:  (statement|execute [^:]*): *//' "$BUDDY_TEST_POSTGRES_DIR/statements" \
    | cut -c1-60 | sort | uniq -c | sort -rn | head -12
done
