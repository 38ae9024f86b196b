#!/usr/bin/env bash
# buddy serve and the LiteLLM proxy side by side (BENCHMARKS.md §11): the same
# `buddy mock-server` behind both, the same open-loop schedule of `buddy bench gateway`
# sent to the mock alone, through buddy and through LiteLLM in turn at each rate, whole
# and streamed; then the peak resident memory (VmHWM) and CPU time of each gateway's
# processes. With `--api messages` (BENCHMARKS.md §11b) both gateways are sent Anthropic's
# `POST /v1/messages` over the same mock (LiteLLM translates it to the mock's Chat
# Completions as buddy does); the mock alone is sent the equivalent Chat Completions
# request, and streamed replies give each gateway's time to first token.
# Opt-in (not in .ci/run): it installs LiteLLM from PyPI into target/litellm-venv.
#
# usage: scripts/bench-gateway-litellm.sh [BENCH-GATEWAY-FLAGS]
#   default flags: -r 100 -r 500 -r 1000 --secs 5 (the rates when no -r/--rate is
#   given, the length when no --secs); e.g. --api messages -r 50 -r 200 --json
# Environment:
#   LITELLM_WORKERS  uvicorn worker processes for LiteLLM (default: the core count, as
#                    LiteLLM's production guide advises)
#   BUDDY            the buddy binary (default: target/release/buddy, built when missing)
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
litellm_version=1.106.12
venv="$root/target/litellm-venv"
buddy=${BUDDY:-$root/target/release/buddy}
workers=${LITELLM_WORKERS:-$(nproc)}
flags=("$@")
case " ${flags[*]-} " in *" -r "* | *" --rate "* | *" --rate="*) ;; *) flags+=(-r 100 -r 500 -r 1000) ;; esac
case " ${flags[*]} " in *" --secs "* | *" --secs="*) ;; *) flags+=(--secs 5) ;; esac

if [ ! -x "$buddy" ]; then
  (cd "$root" && cargo build --locked --release -p buddy-cli)
fi
if ! "$venv/bin/python" -c "import litellm.proxy.proxy_server" 2>/dev/null \
  || [ "$("$venv/bin/python" -c 'import importlib.metadata as m; print(m.version("litellm"))')" != "$litellm_version" ]; then
  echo "== preparing $venv (litellm[proxy]==$litellm_version from PyPI)" >&2
  python3 -m venv "$venv"
  # 1.106.12: the newest release whose `proxy` extra resolves from PyPI here (1.108 and
  # later pin litellm-proxy-extras builds that are not published).
  "$venv/bin/pip" install --quiet --disable-pip-version-check "litellm[proxy]==$litellm_version"
fi

work=$(mktemp -d "${TMPDIR:-/tmp}/buddy-litellm.XXXXXX")
pids=()
cleanup() {
  for pid in "${pids[@]}"; do kill "$pid" 2>/dev/null || true; done
  wait 2>/dev/null || true
  rm -rf "$work"
}
trap cleanup EXIT

# The address a process prints on stderr (file $1), waited for up to 60 s.
address() {
  for _ in $(seq 600); do
    url=$(grep -o 'http://[0-9.:]*' "$1" | head -n 1 || true)
    [ -n "$url" ] && { echo "$url"; return 0; }
    sleep 0.1
  done
  echo "no address in $1:" >&2; cat "$1" >&2; return 1
}

# Peak resident memory (VmHWM) of process $1 and its descendants, in KiB (summed: pages
# the workers share with their parent count once per process).
descendants() {
  local child
  for child in $(pgrep -P "$1" 2>/dev/null || true); do
    echo "$child"
    descendants "$child"
  done
}
# CPU time (user + system) used so far by process $1 and its descendants, in ms
# (/proc/PID/stat fields 14 and 15, in clock ticks of 10 ms).
cpu_ms() {
  local total=0 pid ticks
  for pid in $1 $(descendants "$1"); do
    ticks=$(sed 's/.*) //' "/proc/$pid/stat" 2>/dev/null | awk '{print $12 + $13}' || echo 0)
    total=$((total + ${ticks:-0}))
  done
  echo $((total * 10))
}
peak_kib() {
  local total=0 pid kib
  for pid in $1 $(descendants "$1"); do
    kib=$(awk '/^VmHWM:/ {print $2}' "/proc/$pid/status" 2>/dev/null || echo 0)
    total=$((total + ${kib:-0}))
  done
  echo "$total"
}

cd "$work"
"$buddy" mock-server --listen 127.0.0.1:0 2>mock.err &
pids+=($!)
mock=$(address mock.err)/v1

# buddy serve as `buddy bench gateway` starts it: no skills, SQLite, HTTP/2 to the mock.
cat >buddy.toml <<EOF
default_provider = "mock"
[providers.mock]
kind = "openai"
base_url = "$mock"
model = "scripted:plain_chat"
[providers.mock.http]
max_retries = 0
http2_prior_knowledge = true
[skills]
builtin = []
[server]
max_concurrent_turns_per_key = 1000000
EOF
"$buddy" --config buddy.toml serve --listen 127.0.0.1:0 --db gateway.db 2>serve.err &
buddy_pid=$!
pids+=($buddy_pid)
buddy_url=$(address serve.err)/v1

# LiteLLM: one model routed to the same mock, no database, no callbacks, quiet logs,
# the bundled price map (nothing fetched). No keys on either side (buddy serve here
# has none either): LiteLLM refuses to start without a master key unless told this is
# a local run, which a loopback benchmark is. LiteLLM serves /v1/messages over this
# same model, translating to the mock's Chat Completions as buddy does.
port=$("$venv/bin/python" -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
cat >litellm.yaml <<EOF
model_list:
  - model_name: "scripted:plain_chat"
    litellm_params:
      model: "openai/scripted:plain_chat"
      api_base: "$mock"
      api_key: "none"
litellm_settings:
  telemetry: false
  drop_params: true
  # /v1/messages over an openai/ model goes to the upstream's Responses API unless
  # told otherwise; the mock (and buddy's translation) speak Chat Completions.
  use_chat_completions_url_for_anthropic_messages: true
general_settings:
  dangerously_permit_weak_or_unset_master_key: true
EOF
LITELLM_LOCAL_MODEL_COST_MAP=True LITELLM_LOG=ERROR LITELLM_USE_CHAT_COMPLETIONS_URL_FOR_ANTHROPIC_MESSAGES=True \
  "$venv/bin/litellm" --config litellm.yaml --host 127.0.0.1 --port "$port" \
  --num_workers "$workers" >litellm.out 2>&1 &
litellm_pid=$!
pids+=($litellm_pid)
litellm_url="http://127.0.0.1:$port"
# Up to 5 minutes: each worker imports LiteLLM, slow on a busy 2-core machine.
for _ in $(seq 3000); do
  curl -fsS -o /dev/null "$litellm_url/health/liveliness" 2>/dev/null && break
  kill -0 "$litellm_pid" 2>/dev/null || { cat litellm.out >&2; exit 1; }
  sleep 0.1
done
curl -fsS -o /dev/null "$litellm_url/health/liveliness" || { cat litellm.out >&2; exit 1; }

echo "== buddy $("$buddy" --version | awk '{print $2}') (serve, pid $buddy_pid) and LiteLLM $litellm_version (proxy, $workers uvicorn workers, pid $litellm_pid), $(nproc) cores"
echo "== idle RSS before the run: buddy $(($(awk '/^VmRSS:/ {print $2}' /proc/$buddy_pid/status) / 1024)) MiB, litellm $(($(peak_kib "$litellm_pid") / 1024)) MiB (VmHWM so far)"
# buddy's phases first, then LiteLLM's: a gateway that falls behind keeps working off its
# backlog after the generator has given up on it, which would fall on the next phase.
# Each phase's line has the gateway's CPU time over that phase and its peak memory so
# far (--gateway-pid); the whole run's CPU time of each is printed after it.
status=0
cpu0=$(cpu_ms "$buddy_pid")
"$buddy" bench gateway --mock "$mock" --gateway "buddy=$buddy_url" \
  --gateway-pid "buddy=$buddy_pid" "${flags[@]}" || status=$?
buddy_cpu=$(($(cpu_ms "$buddy_pid") - cpu0))
cpu0=$(cpu_ms "$litellm_pid")
"$buddy" bench gateway --mock "$mock" --gateway "litellm=$litellm_url/v1" \
  --gateway-pid "litellm=$litellm_pid" "${flags[@]}" || true
litellm_cpu=$(($(cpu_ms "$litellm_pid") - cpu0))
echo "== CPU time over each gateway's whole run (warm-ups and backlog included): buddy $buddy_cpu ms, litellm $litellm_cpu ms"
echo "== peak RSS (VmHWM): buddy $(($(peak_kib "$buddy_pid") / 1024)) MiB (1 process), litellm $(($(peak_kib "$litellm_pid") / 1024)) MiB ($(($(descendants "$litellm_pid" | wc -l) + 1)) processes, summed)"
exit "$status"
