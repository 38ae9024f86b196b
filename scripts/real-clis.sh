#!/usr/bin/env bash
# The real agent CLIs buddy guards, pinned, from npm (issue 54, item 5): codex and Claude
# Code (whose native binary comes from the registry through its optionalDependencies).
# Installs into target/real-clis and prints the variables buddy-cli's tests read (eval it):
#   eval "$(bash scripts/real-clis.sh)" && cargo test -p buddy-cli --test all real_
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
dir="$root/target/real-clis"
pins=('@openai/codex@0.169.0' '@anthropic-ai/claude-code@2.1.328')
stamp="$dir/buddy-pin.txt"
if [ "$(cat "$stamp" 2>/dev/null)" != "${pins[*]}" ] || [ ! -x "$dir/node_modules/.bin/codex" ] \
  || [ ! -x "$dir/node_modules/.bin/claude" ]; then
  echo "== installing ${pins[*]} into $dir (npm)" >&2
  mkdir -p "$dir"
  (cd "$dir" && npm install --no-audit --no-fund --loglevel=error --prefix "$dir" "${pins[@]}" >&2)
  echo "${pins[*]}" > "$stamp"
fi
echo "export BUDDY_CODEX=$dir/node_modules/.bin/codex"
echo "export BUDDY_CLAUDE=$dir/node_modules/.bin/claude"
