#!/usr/bin/env bash
# BENCHMARKS §3, issues 30 and 47: one `buddy serve` on SQLite against two sharing one
# PostgreSQL, runs alternating, on the throw-away cluster of scripts/postgres.sh; then,
# for each binary, what one turn costs the database: its round trips (counted at
# scripts/delay_proxy.py, 0 ms added), its statements (log_statement = all) and
# PostgreSQL's own CPU.
#
#   scripts/bench-postgres.sh ROUNDS CHATS BUDDY [BUDDY...]
#
# Several binaries (a build from before a change beside one from after) take turns in
# each round. Prints one line per run and per binary, ready for docs/bench/: turns per
# second, the machine's busy CPU per turn (from /proc/stat, everything on it included)
# and PostgreSQL's CPU per turn (its processes', from /proc/PID/stat: the postmaster's
# own and its reaped children's, plus its live backends').
set -euo pipefail
rounds=${1:?rounds}
chats=${2:?chats}
shift 2
[ $# -ge 1 ] || { echo "usage: $0 ROUNDS CHATS BUDDY [BUDDY...]" >&2; exit 2; }
here=$(cd "$(dirname "$0")" && pwd)
eval "$("$here/postgres.sh")"
proxy_pid=""
cleanup() {
  [ -n "$proxy_pid" ] && kill "$proxy_pid" 2>/dev/null || true
  "$here/postgres.sh" stop "$BUDDY_TEST_POSTGRES_DIR"
}
trap cleanup EXIT
as=(); [ "$(id -u)" = 0 ] && as=(runuser -u postgres --)
psql=("${as[@]}" "$(cat "$BUDDY_TEST_POSTGRES_DIR/bin")/psql" -q -X -At "$BUDDY_TEST_POSTGRES_URL")
hz=$(getconf CLK_TCK)
# Busy CPU of the whole machine (user, nice, system, irq, softirq), in clock ticks.
busy_ticks() {
  awk '/^cpu /{print $2 + $3 + $4 + $7 + $8}' /proc/stat
}
# PostgreSQL's CPU so far, in clock ticks: the postmaster's user and system time with
# that of the children it reaped (backends of connections already closed), plus the
# user and system time of the children alive now. Fields after the `(comm)`: utime is
# the 12th, stime the 13th, cutime the 14th, cstime the 15th.
pg_ticks() {
  local postmaster
  postmaster=$(head -1 "$BUDDY_TEST_POSTGRES_DIR/data/postmaster.pid")
  {
    sed -E 's/^.*\) //' "/proc/$postmaster/stat" | awk '{print $12 + $13 + $14 + $15}'
    for child in $(ps --ppid "$postmaster" -o pid= || true); do
      sed -E 's/^.*\) //' "/proc/$child/stat" 2>/dev/null | awk '{print $12 + $13}' || true
    done
  } | awk '{s += $1} END {print s}'
}
# One run: "TURNS_PER_SEC CPU_MS_PER_TURN PG_CPU_MS_PER_TURN" over the run, per completed
# turn (the servers are gone, and their backends reaped, when `bench load` returns).
run() {
  local before after pg_before pg_after out
  before=$(busy_ticks); pg_before=$(pg_ticks)
  out=$("$@" --json)
  sleep 0.5
  after=$(busy_ticks); pg_after=$(pg_ticks)
  echo "$out" | jq -r --argjson ticks "$((after - before))" --argjson pg "$((pg_after - pg_before))" \
    --argjson hz "$hz" \
    '"\(.turns_per_sec | floor) \($ticks / $hz * 1000 / .completed * 100 | round / 100) \($pg / $hz * 1000 / .completed * 100 | round / 100)"'
}
for round in $(seq "$rounds"); do
  for buddy in "$@"; do
    read -r sqlite sqlite_cpu _ < <(run "$buddy" bench load -n "$chats" --latency-ms 200)
    read -r pg pg_cpu pg_server < <(run "$buddy" bench load -n "$chats" --latency-ms 200 \
      --instances 2 --store "$BUDDY_TEST_POSTGRES_URL")
    ratio=$(python3 -c "print(f'{$pg / $sqlite:.2f}')")
    echo "round=$round buddy=$buddy chats=$chats sqlite=$sqlite pg2=$pg ratio=$ratio" \
      "cpu_ms_per_turn: sqlite=$sqlite_cpu pg2=$pg_cpu postgres_cpu_ms_per_turn=$pg_server"
  done
done

# Round trips per turn, at a proxy adding nothing: `round_trips N` on SIGUSR1.
pg_port=$(echo "$BUDDY_TEST_POSTGRES_URL" | sed -E 's#.*:([0-9]+)/.*#\1#')
proxy_out="$BUDDY_TEST_POSTGRES_DIR/proxy.out"
free=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
python3 "$here/delay_proxy.py" "$free" 127.0.0.1 "$pg_port" 0 >"$proxy_out" &
proxy_pid=$!
until grep -q '^ready' "$proxy_out" 2>/dev/null; do sleep 0.1; done
proxied=$(echo "$BUDDY_TEST_POSTGRES_URL" | sed -E "s#:$pg_port/#:$free/#")
round_trips() {
  local lines
  lines=$(grep -c '^round_trips' "$proxy_out" || true)
  kill -USR1 "$proxy_pid"
  until [ "$(grep -c '^round_trips' "$proxy_out" || true)" -gt "$lines" ]; do sleep 0.05; done
  grep '^round_trips' "$proxy_out" | tail -1 | cut -d' ' -f2
}
# Round trips of a run of `$2` chats of binary `$1` on two instances through the proxy.
counted() {
  local before after
  before=$(round_trips)
  "$1" bench load -n "$2" --latency-ms 200 --instances 2 --store "$proxied" --json >/dev/null
  after=$(round_trips)
  echo $((after - before))
}
log="$BUDDY_TEST_POSTGRES_DIR/data/server.log"
for buddy in "$@"; do
  # A run of one chat is the instances' own start and stop (schema, heartbeat, sweep,
  # listener, connections): taken off, the rest is what the turns cost.
  one=$(counted "$buddy" 1)
  many=$(counted "$buddy" "$chats")
  echo "buddy=$buddy round_trips: 1_chat=$one ${chats}_chats=$many" \
    "per_turn=$(python3 -c "print(f'{($many - $one) / ($chats - 1):.2f}')")"
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
