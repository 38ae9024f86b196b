#!/usr/bin/env bash
# BENCHMARKS §3, issue 47 item 2: buddy and PostgreSQL on "different machines". Runs
# `buddy bench load` with one and with two instances on the throw-away cluster of
# scripts/postgres.sh, reached through scripts/delay_proxy.py adding 0, 1 and 5 ms of
# round-trip time (0 ms through the proxy too, so the proxy's own cost is in every figure),
# alternating, ROUNDS times. Prints one line per run: turns per second.
#
#   scripts/bench-postgres-latency.sh ROUNDS CHATS BUDDY
set -euo pipefail
rounds=${1:?rounds}
chats=${2:?chats}
buddy=${3:?buddy binary}
here=$(cd "$(dirname "$0")" && pwd)
eval "$("$here/postgres.sh")"
proxy_pid=""
cleanup() {
  [ -n "$proxy_pid" ] && kill "$proxy_pid" 2>/dev/null || true
  "$here/postgres.sh" stop "$BUDDY_TEST_POSTGRES_DIR"
}
trap cleanup EXIT
# postgres://user@127.0.0.1:PORT/db → its port, and the same URL through a proxy port.
pg_port=$(echo "$BUDDY_TEST_POSTGRES_URL" | sed -E 's#.*:([0-9]+)/.*#\1#')
through() { echo "$BUDDY_TEST_POSTGRES_URL" | sed -E "s#:$pg_port/#:$1/#"; }
# Starts a proxy adding `$1` ms; sets proxy_pid and proxy_port.
start_proxy() {
  local fifo
  fifo=$(mktemp -u); mkfifo "$fifo"
  # A port nothing holds now.
  local free
  free=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
  python3 "$here/delay_proxy.py" "$free" 127.0.0.1 "$pg_port" "$1" >"$fifo" &
  proxy_pid=$!
  read -r _ proxy_port <"$fifo"; rm -f "$fifo"
}
for round in $(seq "$rounds"); do
  for delay in 0 1 5; do
    start_proxy "$delay"
    url=$(through "$proxy_port")
    for instances in 1 2; do
      out=$("$buddy" bench load -n "$chats" --latency-ms 200 --instances "$instances" \
        --store "$url" --json)
      tps=$(echo "$out" | jq -r '.turns_per_sec | floor')
      echo "round=$round rtt_ms=$delay instances=$instances chats=$chats turns_per_sec=$tps"
    done
    kill "$proxy_pid" 2>/dev/null || true; wait "$proxy_pid" 2>/dev/null || true; proxy_pid=""
  done
done
