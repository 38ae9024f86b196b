#!/usr/bin/env bash
# The official Anthropic Python SDK, pinned, for buddy-cli's test of `POST /v1/messages`
# (scripts/anthropic_sdk_check.py). Installs into target/anthropic-venv from PyPI and
# prints the variable the test reads (eval it):
#   eval "$(bash scripts/anthropic-sdk.sh)" && cargo test -p buddy-cli --test all anthropic
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
venv="$root/target/anthropic-venv"
pin='anthropic==2.12.0'
stamp="$venv/buddy-pin.txt"
if [ "$(cat "$stamp" 2>/dev/null)" != "$pin" ] || ! "$venv/bin/python" -c "import anthropic" 2>/dev/null; then
  echo "== preparing $venv ($pin from PyPI)" >&2
  python3 -m venv "$venv"
  "$venv/bin/pip" install --quiet --disable-pip-version-check "$pin" >&2
  echo "$pin" > "$stamp"
fi
echo "export BUDDY_ANTHROPIC_PYTHON=$venv/bin/python"
