#!/usr/bin/env bash
# The first hour of someone who installs buddy and has no checkout: `cargo install` into
# an empty prefix, then, from an empty directory, `buddy init`, `buddy doctor`,
# `buddy demo` (the built-in scenarios), `buddy completions bash` and `buddy mock-server`
# (answering a chat completion) must all work. Run by scripts/test.sh. The install reuses
# target/ (debug profile), so it takes seconds after the test build.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
prefix=$(mktemp -d)
work=$(mktemp -d)
server_pid=""
cleanup() {
  [ -n "$server_pid" ] && kill "$server_pid" 2>/dev/null || true
  rm -rf "$prefix" "$work"
}
trap cleanup EXIT
fail() { echo "install check FAILED: $*" >&2; exit 1; }

echo "== install check: cargo install into an empty prefix, then run from an empty directory"
cargo install --debug --locked --quiet --path "$root/crates/buddy-cli" --root "$prefix" --target-dir "$root/target"
buddy="$prefix/bin/buddy"
cd "$work"
checks=0

env -u OPENAI_API_KEY -u ANTHROPIC_API_KEY "$buddy" init --local http://127.0.0.1:9/v1 2>init.txt ||
  fail "buddy init: $(cat init.txt)"
[ -s buddy.toml ] || fail "buddy init wrote no buddy.toml"
checks=$((checks + 1))

"$buddy" doctor >doctor.txt 2>&1 || fail "buddy doctor: $(cat doctor.txt)"
grep -q "config    ./buddy.toml: ok" doctor.txt || fail "buddy doctor: $(cat doctor.txt)"
checks=$((checks + 1))

"$buddy" demo >demo.txt 2>&1 || fail "buddy demo: $(tail -5 demo.txt)"
grep -q "met their expected outcome, 0 did not" demo.txt || fail "buddy demo: $(tail -3 demo.txt)"
checks=$((checks + 1))

# To a file, not a pipe: `grep -q` leaves at its first match, and buddy, still writing,
# would end on the closed pipe (exit 141), which pipefail reports as a failure.
"$buddy" completions bash >completions.bash 2>completions.txt ||
  fail "buddy completions bash: $(cat completions.txt)"
grep -q "complete -F _buddy" completions.bash || fail "buddy completions bash wrote no bash script"
checks=$((checks + 1))

port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
"$buddy" mock-server --listen "127.0.0.1:$port" >mock.txt 2>&1 &
server_pid=$!
for _ in $(seq 1 100); do
  curl -fsS "http://127.0.0.1:$port/v1/models" >/dev/null 2>&1 && break
  kill -0 "$server_pid" 2>/dev/null || fail "buddy mock-server exited: $(cat mock.txt)"
  sleep 0.1
done
reply=$(curl -fsS "http://127.0.0.1:$port/v1/chat/completions" -H 'content-type: application/json' \
  -d '{"model": "scripted:plain_chat", "messages": [{"role": "user", "content": "Say hello."}]}') ||
  fail "buddy mock-server did not answer: $(cat mock.txt)"
grep -q '"choices"' <<<"$reply" || fail "buddy mock-server answered: $reply"
checks=$((checks + 1))

echo "install check: $checks checks passed"
