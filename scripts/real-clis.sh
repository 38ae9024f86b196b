#!/usr/bin/env bash
# The real agent CLIs buddy guards, pinned, from npm (issue 54, item 5): codex. Installs
# into target/real-clis and prints the variable buddy-cli's test reads (eval it):
#   eval "$(bash scripts/real-clis.sh)" && cargo test -p buddy-cli --test all real_codex
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
dir="$root/target/real-clis"
pin='@openai/codex@0.169.0'
stamp="$dir/buddy-pin.txt"
if [ "$(cat "$stamp" 2>/dev/null)" != "$pin" ] || [ ! -x "$dir/node_modules/.bin/codex" ]; then
  echo "== installing $pin into $dir (npm)" >&2
  mkdir -p "$dir"
  (cd "$dir" && npm install --no-audit --no-fund --loglevel=error --prefix "$dir" "$pin" >&2)
  echo "$pin" > "$stamp"
fi
echo "export BUDDY_CODEX=$dir/node_modules/.bin/codex"
