#!/usr/bin/env bash
# The Open Responses compliance suite (clients/openresponses: bin/compliance-test.ts and
# src/lib/compliance-tests.ts of openresponses/openresponses at commit 92c12d9, with the
# generated zod schemas they import; Apache-2.0, see its LICENSE) run with Node through
# tsx against `buddy serve` on 127.0.0.1, whose scripted model `openresponses`
# (clients/openresponses/scenario.json) calls the suite's get_weather tool and otherwise
# answers. Installs tsx and zod (pinned in package-lock.json) with npm.
# Prints one line per test and `openresponses: N passed, M failed` last; exits non-zero
# when a test fails. Extra arguments go to the suite (e.g. --filter basic-response -v). The
# suite runs its tests at once with one key: the server allows 64 concurrent turns per key.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
suite="$root/clients/openresponses"
work=$(mktemp -d)
server_pid=""
cleanup() {
  [ -n "$server_pid" ] && kill "$server_pid" 2>/dev/null || true
  rm -rf "$work"
}
trap cleanup EXIT

if [ ! -x "$suite/node_modules/.bin/tsx" ]; then
  echo "== installing the compliance suite's tsx and zod (npm ci)"
  (cd "$suite" && npm ci --no-audit --no-fund --silent)
fi
cargo build --locked -q -p buddy-cli
buddy="$root/target/debug/buddy"

mkdir -p "$work/scenarios" "$work/sandbox"
cp "$suite/scenario.json" "$work/scenarios/openresponses.json"
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
(cd "$work" && exec "$buddy" serve --listen "127.0.0.1:$port" --db "$work/buddy.db" \
  --scenarios "$work/scenarios" --sandbox "$work/sandbox" --api-key sk-openresponses \
  --max-concurrent-turns 64) \
  >"$work/serve.log" 2>&1 &
server_pid=$!
for _ in $(seq 1 100); do
  curl -fsS "http://127.0.0.1:$port/healthz" >/dev/null 2>&1 && break
  kill -0 "$server_pid" 2>/dev/null || { cat "$work/serve.log" >&2; exit 1; }
  sleep 0.1
done

echo "== Open Responses compliance suite (openresponses/openresponses@92c12d9) against buddy serve"
# Node 20 has a WebSocket client only behind a flag; later ones have it on by default.
node_options="--no-warnings"
if [ "$(node -e 'process.stdout.write(typeof WebSocket)')" != function ]; then
  node_options="$node_options --experimental-websocket"
fi
set +e
(cd "$suite" && NODE_OPTIONS="$node_options" node_modules/.bin/tsx bin/compliance-test.ts \
  --base-url "http://127.0.0.1:$port/v1" --api-key sk-openresponses --model scripted:openresponses --json "$@") \
  >"$work/results.json"
set -e
# Each test's outcome; the tests of clients/openresponses/not-yet.txt (one id per line:
# what buddy does not support yet) are expected to fail, and the run fails when one of
# them passes, so that the list is kept true.
python3 - "$work/results.json" "$suite/not-yet.txt" <<'PY'
import json, sys
try:
    report = json.load(open(sys.argv[1]))
except ValueError:
    sys.exit("openresponses: the suite printed no JSON report:\n" + open(sys.argv[1]).read()[:4000])
not_yet = {l.split("#")[0].strip() for l in open(sys.argv[2]) if l.split("#")[0].strip()}
passed = failed = expected = 0
problems = []
for r in report["results"]:
    ok = r["status"] == "passed"
    if r["id"] in not_yet:
        expected += not ok
        mark = "not yet" if not ok else "PASSES NOW"
        if ok:
            problems.append(f"{r['id']} passes now: take it off clients/openresponses/not-yet.txt")
    else:
        mark = "ok" if ok else "FAILED"
        if not ok:
            problems.append(f"{r['id']}: " + "; ".join(r.get("errors") or [r["status"]]))
    passed += ok
    failed += not ok
    print(f"  {mark:10} {r['id']}")
print(f"openresponses: {passed} passed, {failed} failed ({expected} of them not supported yet: see clients/openresponses/not-yet.txt)")
for p in problems:
    print("  -", p)
sys.exit(1 if problems else 0)
PY
