#!/usr/bin/env bash
# Opt-in check that buddy's traces work in a real GenAI trace viewer: installs Arize
# Phoenix (arize-phoenix==20.26.1 from PyPI) into a virtualenv, starts it on 127.0.0.1
# (it takes OTLP/HTTP on its own port), runs two scripted turns with `buddy run` —
# a tool chain and a loop that a guard stops — under a caller's TRACEPARENT, and reads
# the spans back through Phoenix's REST API: every span kind, the parent links, the
# caller's trace continued, the stop reason and the guard trip. Not in CI's required
# path (Phoenix's install takes minutes); run by .ci/run only when BUDDY_PHOENIX=1.
# Environment:
#   BUDDY_PHOENIX_VENV        virtualenv to use/create (default: target/phoenix-venv)
#   BUDDY_PHOENIX_SCREENSHOT  write a screenshot of the loop turn's trace in Phoenix's
#                             UI to this path (needs the browser tests' chromium and venv)
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
venv=${BUDDY_PHOENIX_VENV:-$root/target/phoenix-venv}
work=$(mktemp -d)
phoenix_pid=""
cleanup() {
  [ -n "$phoenix_pid" ] && kill "$phoenix_pid" 2>/dev/null || true
  rm -rf "$work"
}
trap cleanup EXIT

echo "== virtualenv $venv (arize-phoenix==20.26.1)"
[ -x "$venv/bin/python" ] || python3 -m venv "$venv"
"$venv/bin/python" -c "import phoenix" 2>/dev/null ||
  "$venv/bin/pip" install -q --disable-pip-version-check 'arize-phoenix==20.26.1'

free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
port=$(free_port)
grpc_port=$(free_port)
base="http://127.0.0.1:$port"
echo "== Phoenix on $base"
PHOENIX_HOST=127.0.0.1 PHOENIX_PORT=$port PHOENIX_GRPC_PORT=$grpc_port \
  PHOENIX_WORKING_DIR="$work/phoenix" PHOENIX_TELEMETRY_ENABLED=false \
  "$venv/bin/python" -m phoenix.server.main serve >"$work/phoenix.log" 2>&1 &
phoenix_pid=$!
for _ in $(seq 1 120); do
  curl -fsS "$base/healthz" >/dev/null 2>&1 && break
  kill -0 "$phoenix_pid" 2>/dev/null || { cat "$work/phoenix.log" >&2; exit 1; }
  sleep 1
done
curl -fsS "$base/healthz" >/dev/null || { echo "phoenix did not start" >&2; cat "$work/phoenix.log" >&2; exit 1; }

echo "== building buddy"
cargo build --locked -q -p buddy-cli
buddy="$root/target/debug/buddy"

mkdir -p "$work/sandbox"
cat >"$work/sandbox/buddy.toml" <<TOML
[telemetry]
endpoint = "$base"
capture_content = true
service_name = "buddy"
TOML
printf 'Buy milk.\n' >"$work/sandbox/notes.md"
new_trace() { python3 -c 'import secrets; print(secrets.token_hex(16))'; }
parent=00f067aa0ba902b7
chain_trace=$(new_trace)
loop_trace=$(new_trace)
echo "== a tool chain (trace $chain_trace) and a loop (trace $loop_trace)"
(cd "$work/sandbox" && TRACEPARENT="00-$chain_trace-$parent-01" "$buddy" run --scenario "$root/scenarios/chain_3_steps.json" >/dev/null 2>&1) || true
(cd "$work/sandbox" && TRACEPARENT="00-$loop_trace-$parent-01" "$buddy" run --scenario "$root/scenarios/identical_forever.json" >/dev/null 2>&1) || true

echo "== reading the spans back from Phoenix"
"$venv/bin/python" - "$base" "$parent" "$chain_trace" "$loop_trace" <<'PY'
import json, sys, time, urllib.request
base, parent, chain, loop = sys.argv[1:5]

def spans(trace):
    for _ in range(30):
        data = json.load(urllib.request.urlopen(f"{base}/v1/projects/default/spans?limit=1000"))["data"]
        mine = [s for s in data if s["context"]["trace_id"] == trace]
        if any(s["name"].startswith("invoke_agent") for s in mine):
            return mine
        time.sleep(1)
    sys.exit(f"phoenix: no invoke_agent span of trace {trace}")

failures = []
def check(ok, what):
    print(("ok   " if ok else "FAIL ") + what)
    if not ok:
        failures.append(what)

for label, trace, want_reason in (("chain", chain, "completed"), ("loop", loop, None)):
    got = spans(trace)
    agent = next(s for s in got if s["name"] == "invoke_agent buddy")
    chats = [s for s in got if s["name"].startswith("chat ")]
    tools = [s for s in got if s["name"].startswith("execute_tool ")]
    attrs = agent["attributes"]
    reason = attrs.get("buddy.stop_reason")
    print(f"-- {label}: {len(got)} spans: 1 invoke_agent, {len(chats)} chat, {len(tools)} execute_tool; stop reason {reason}")
    check(agent["parent_id"] == parent, f"{label}: invoke_agent continues the caller's span {parent}")
    check(agent["span_kind"] == "AGENT", f"{label}: Phoenix reads invoke_agent as an AGENT span")
    check(len(chats) >= 2 and all(c["parent_id"] == agent["context"]["span_id"] for c in chats), f"{label}: chat spans are the turn's children")
    check(all(c["span_kind"] == "LLM" for c in chats), f"{label}: Phoenix reads chat spans as LLM spans")
    check(len(tools) >= 1 and all(t["parent_id"] == agent["context"]["span_id"] for t in tools), f"{label}: execute_tool spans are the turn's children")
    check(all(t["span_kind"] == "TOOL" for t in tools), f"{label}: Phoenix reads execute_tool spans as TOOL spans")
    check(attrs.get("gen_ai.operation.name") == "invoke_agent", f"{label}: gen_ai.operation.name")
    if want_reason:
        check(reason == want_reason, f"{label}: stop reason {want_reason}")
    else:
        guards = [e for e in agent.get("events", []) if e["name"] == "buddy.guard_tripped"]
        check(reason not in (None, "completed") and attrs.get("error.type") == reason, f"{label}: a guard's stop reason as error.type ({reason})")
        check(len(guards) >= 1, f"{label}: guard trips as span events ({len(guards)})")
if failures:
    sys.exit(f"phoenix: {len(failures)} check(s) failed")
print("phoenix: every check passed")
PY

if [ -n "${BUDDY_PHOENIX_SCREENSHOT:-}" ]; then
  echo "== screenshot of the loop turn in Phoenix's UI -> $BUDDY_PHOENIX_SCREENSHOT"
  "$root/target/browser-venv/bin/python" - "$base" "$loop_trace" "$BUDDY_PHOENIX_SCREENSHOT" <<'PY'
import json, shutil, sys, urllib.request
from playwright.sync_api import sync_playwright
base, trace, out = sys.argv[1:4]
project = json.load(urllib.request.urlopen(f"{base}/v1/projects"))["data"][0]["id"]
with sync_playwright() as p:
    browser = p.chromium.launch(executable_path=shutil.which("chromium"))
    page = browser.new_page(viewport={"width": 1400, "height": 900})
    page.goto(f"{base}/projects/{project}/traces/{trace}")
    page.get_by_text("invoke_agent buddy").first.wait_for(timeout=30000)
    page.wait_for_timeout(2000)
    page.screenshot(path=out)
    browser.close()
PY
fi
