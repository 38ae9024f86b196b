#!/usr/bin/env bash
# Starts a throw-away PostgreSQL cluster on 127.0.0.1 for the test suite and prints the
# `export` lines that point the tests at it; `scripts/postgres.sh stop DIR` stops it.
# Uses Debian's `postgresql` package (.ci/run installs it when missing). initdb refuses
# to run as root, so as root the cluster runs as the `postgres` user.
set -euo pipefail
if [ "${1:-}" = stop ]; then
  dir=$2
  as=(); [ "$(id -u)" = 0 ] && as=(runuser -u postgres --)
  "${as[@]}" "$(cat "$dir/bin")/pg_ctl" -D "$dir/data" -m immediate stop >/dev/null 2>&1 || true
  rm -rf "$dir"
  exit 0
fi
bin=$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -1 || true)
if [ -z "$bin" ] || [ ! -x "$bin/initdb" ]; then
  echo "postgres.sh: PostgreSQL is not installed (apt-get install postgresql)" >&2
  exit 1
fi
dir=$(mktemp -d /tmp/buddy-pg.XXXXXX)
echo "$bin" > "$dir/bin"
as=()
if [ "$(id -u)" = 0 ]; then
  as=(runuser -u postgres --)
  chown postgres "$dir"
fi
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
"${as[@]}" "$bin/initdb" -D "$dir/data" -U buddy -A trust --no-sync -E UTF8 >"$dir/initdb.log" 2>&1 \
  || { cat "$dir/initdb.log" >&2; exit 1; }
"${as[@]}" "$bin/pg_ctl" -D "$dir/data" -l "$dir/data/server.log" -w -t 60 \
  -o "-c listen_addresses=127.0.0.1 -p $port -k $dir -c fsync=off -c synchronous_commit=off -c max_connections=300" \
  start >/dev/null || { cat "$dir/data/server.log" >&2; exit 1; }
echo "export BUDDY_TEST_POSTGRES_URL=postgres://buddy@127.0.0.1:$port/postgres"
echo "export BUDDY_TEST_POSTGRES_DIR=$dir"
